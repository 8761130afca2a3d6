"""Claims: a sentence of a paper made measurable, and the verdict of the measurement.

A :class:`ClaimSpec` is declared on the experiment class, so its expectation is fixed in code before any run. It
carries the paper's own words (``quote``), where they stand (``source``), our operationalisation (``statement``),
why the expectation's band is what it is (``band_reason``), the negative control that must fail it (``control``,
or ``no_control`` saying why none applies) and, where the result does not reproduce, the documented evidence
(``disagreement``).

The experiment's analysis returns a :class:`Measured` per claim: one value per independent seed (or trial).
:func:`evaluate` (in :mod:`repdyn.framework.verdicts`) turns spec + values into a :class:`ClaimResult` whose
``verdict`` is one of :data:`VERDICTS`.

A claim about a trained state (converged, off a plateau, at a critical point) declares that state as
:class:`Precondition` s: the analysis measures each one's quantity per seed (``Analysis.states``) and a claim whose
precondition is not met is ``undecided``, never ``not reproduced``. A claim that an effect exists may declare its
smallest effect of interest (:class:`NullEffect`): an interval wholly inside that equivalence region is
``not reproduced (no effect)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal

import numpy as np

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
VACUOUS = "vacuous"
SKIPPED = "skipped"
UNDECIDED = "undecided"
"""A claim about a trained state measured on networks that did not reach it (or a claim not measured)."""
NO_EFFECT = "not reproduced (no effect)"
"""The interval lies wholly inside the claim's equivalence region: the effect is smaller than any of interest."""
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NO_EFFECT, INCONCLUSIVE, UNDECIDED, VACUOUS, SKIPPED)
DECIDED = (REPRODUCED, NOT_REPRODUCED, NO_EFFECT)
"""Verdicts that answer the claim."""

SATISFIED, VIOLATED, STRADDLES = "satisfied", "violated", "straddles"
"""How an interval relates to an expectation: wholly inside, wholly outside, or across its boundary."""


def _is_nan(value: float | bool) -> bool:
    return isinstance(value, float) and math.isnan(value)


class Expectation:
    """What a measured statistic must satisfy; ``describe`` is shown in the report and ``repdyn list``."""

    statistic: Literal["value", "fraction"] = "value"
    """"value": continuous values, summarised by the claim's statistic; "fraction": booleans, the fraction true."""

    def check(self, value: float | bool) -> bool:
        """Whether one value satisfies the expectation (NaN never does)."""
        return self.relate(float(value), float(value)) == SATISFIED

    def relate(self, low: float, high: float) -> str:
        """SATISFIED, VIOLATED or STRADDLES for the interval [low, high] of the statistic."""
        return InRange(*self.bounds()).relate(low, high)

    def bounds(self) -> tuple[float | None, float | None]:
        """The band of the statistic that satisfies the expectation (None: unbounded on that side)."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class InRange(Expectation):
    """lo <= statistic <= hi (either bound may be None for one-sided)."""

    lo: float | None = None
    hi: float | None = None

    def bounds(self) -> tuple[float | None, float | None]:
        return self.lo, self.hi

    def relate(self, low: float, high: float) -> str:
        if math.isnan(low) or math.isnan(high):
            return VIOLATED
        below = self.lo is not None and high < self.lo
        above = self.hi is not None and low > self.hi
        if below or above:
            return VIOLATED
        inside = (self.lo is None or low >= self.lo) and (self.hi is None or high <= self.hi)
        return SATISFIED if inside else STRADDLES

    def describe(self) -> str:
        if self.lo is None:
            return f"≤ {self.hi:g}"
        if self.hi is None:
            return f"≥ {self.lo:g}"
        return f"in [{self.lo:g}, {self.hi:g}]"


def at_least(lo: float) -> InRange:
    return InRange(lo=lo)


def at_most(hi: float) -> InRange:
    return InRange(hi=hi)


@dataclass(frozen=True)
class CloseTo(Expectation):
    """|statistic - target| <= atol + rtol * |target| (a tolerance against a closed form)."""

    target: float
    rtol: float = 0.0
    atol: float = 0.0

    def bounds(self) -> tuple[float | None, float | None]:
        tolerance = self.atol + self.rtol * abs(self.target)
        return self.target - tolerance, self.target + tolerance

    def describe(self) -> str:
        tol = []
        if self.rtol:
            tol.append(f"rtol {self.rtol:g}")
        if self.atol:
            tol.append(f"atol {self.atol:g}")
        return f"≈ {self.target:g} ({', '.join(tol) or 'exact'})"


@dataclass(frozen=True)
class Holds(Expectation):
    """A qualitative statement (an ordering, a monotonicity) measured True/False per seed; it holds when the
    fraction of seeds on which it is true exceeds ``more_than`` (default: a majority of seeds)."""

    more_than: float = 0.5
    statistic: Literal["value", "fraction"] = field(default="fraction", init=False)

    def check(self, value: float | bool) -> bool:
        return not _is_nan(value) and bool(value) is True

    def bounds(self) -> tuple[float | None, float | None]:
        return self.more_than, None

    def relate(self, low: float, high: float) -> str:
        if low > self.more_than:
            return SATISFIED
        if high < self.more_than:
            return VIOLATED
        return STRADDLES

    def describe(self) -> str:
        return "holds" if self.more_than == 0.5 else f"holds on > {self.more_than:.0%} of seeds"


@dataclass(frozen=True)
class Precondition:
    """The trained state a claim is about, as data: the analysis measures ``quantity`` on every seed the claim is
    computed from (``Analysis.states[quantity]``), and each seed's value must satisfy ``expectation``.

    state: the state in words ("at a critical point", "off the Y/8 plateau"). reason: why this threshold (derived
    from the theory, from exact solutions at the same setting, or our choice and why), fixed before any run.
    """

    quantity: str
    expectation: Expectation
    state: str
    reason: str

    def __post_init__(self) -> None:
        missing = [name for name in ("quantity", "state", "reason") if not getattr(self, name).strip()]
        if missing:
            raise ValueError(f"a Precondition needs {', '.join(missing)}")


@dataclass(frozen=True)
class NullEffect:
    """The smallest effect of interest of a claim that an effect exists, as the equivalence region [lo, hi] of the
    claim's statistic (the effects too small to matter), with the reason for its edges, fixed before any run."""

    lo: float
    hi: float
    reason: str

    def __post_init__(self) -> None:
        if not self.lo < self.hi:
            raise ValueError(f"a NullEffect needs lo < hi, got [{self.lo:g}, {self.hi:g}]")
        if not self.reason.strip():
            raise ValueError("a NullEffect needs the reason for its smallest effect of interest")

    def contains(self, low: float, high: float) -> bool:
        return self.lo <= low and high <= self.hi

    def overlaps(self, low: float, high: float) -> bool:
        return low <= self.hi and high >= self.lo

    def describe(self) -> str:
        return f"no effect if within [{self.lo:g}, {self.hi:g}]"


@dataclass(frozen=True)
class Control:
    """A negative control: the same analysis on a changed config (the untrained network, shuffled labels, a null
    path), given as config overrides. The claim's expectation must fail on it, else the claim is vacuous."""

    description: str
    overrides: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not self.description or not self.overrides:
            raise ValueError("a Control needs a description and at least one config override")
        items = dict(self.overrides).items()
        object.__setattr__(self, "overrides", tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                                           for k, v in items)))

    def config_changes(self) -> dict[str, Any]:
        return dict(self.overrides)


@dataclass(frozen=True)
class Disagreement:
    """A documented failure to reproduce: the evidence, all of it required.

    settings: where it was established, as close to the paper's as was affordable (named).
    measured: the measured interval (estimate, 90 % interval, number of seeds).
    ruled_out: what was checked and excluded as the cause (bugs, step size, width, seeds, ...).
    doc: where it is written up (docs/reproduction/NNN.md#anchor).
    verdict: the verdict it records: ``not reproduced``, ``not reproduced (no effect)``, or ``undecided`` where no
    affordable setting reaches the claim's precondition (the evidence then says how far each try got).
    """

    settings: str
    measured: str
    ruled_out: str
    doc: str
    verdict: str = NOT_REPRODUCED

    def __post_init__(self) -> None:
        missing = [name for name in ("settings", "measured", "ruled_out", "doc") if not getattr(self, name).strip()]
        if missing:
            raise ValueError(f"a Disagreement needs its evidence: {', '.join(missing)} empty")
        if self.verdict not in (NOT_REPRODUCED, NO_EFFECT, UNDECIDED):
            raise ValueError(f"a Disagreement records {NOT_REPRODUCED!r}, {NO_EFFECT!r} or {UNDECIDED!r}, "
                             f"not {self.verdict!r}")

    def describe(self) -> str:
        return f"{self.measured} at {self.settings}; ruled out: {self.ruled_out} ({self.doc})"


@dataclass(frozen=True)
class ClaimSpec:
    """A sentence of a paper, made measurable.

    id: unique within the experiment. statement: our operationalisation. source: "seed 000, §3.1, Fig. 2".
    quote: the paper's sentence(s), verbatim ("…" may stand for a garbled formula). band_reason: why the band
    (derived from the theory: how; read off a figure: which value; our choice: why this value). statistic: how
    per-seed values are summarised ("median" or "mean"; Holds uses the fraction of seeds). exact: a closed form or
    identity judged on one value with a tolerance, needing no seeds. control / no_control: the negative control, or
    why none applies ("closed form", "a statement about initialisation"). disagreement: recorded evidence that the
    claim does not reproduce. figure: the analysis figure it belongs to. depends_on: run labels (or prefixes) whose
    divergence fails the claim; empty means every run. preconditions / no_precondition: the trained state the
    claim is about, or why it needs none ("closed form", "a statement about initialisation"). null_effect: the
    smallest effect of interest of a claim that an effect exists. full_only: why the claim is decided only at the
    ``full`` scale (recorded ``undecided at quick``; the committed full record must decide it).
    """

    id: str
    statement: str
    source: str
    expectation: Expectation
    depends_on: tuple[str, ...] = ()
    _: KW_ONLY
    quote: str = ""
    band_reason: str = ""
    statistic: Literal["median", "mean"] = "median"
    exact: bool = False
    control: Control | None = None
    no_control: str = ""
    disagreement: Disagreement | None = None
    figure: str = ""
    preconditions: tuple[Precondition, ...] = ()
    no_precondition: str = ""
    null_effect: NullEffect | None = None
    full_only: str = ""

    def __post_init__(self) -> None:
        if self.preconditions and self.no_precondition:
            raise ValueError(f"claim {self.id!r}: give preconditions or the reason for none, not both")
        if self.exact and self.null_effect is not None:
            raise ValueError(f"claim {self.id!r}: an exact claim (closed form) takes no null effect")
        if self.statistic not in ("median", "mean"):
            raise ValueError(f"claim {self.id!r}: statistic {self.statistic!r} is not median or mean")
        if self.control is not None and self.no_control:
            raise ValueError(f"claim {self.id!r}: give a control or the reason for none, not both")
        if self.exact and self.control is not None:
            raise ValueError(f"claim {self.id!r}: an exact claim (closed form) takes no control")

    @property
    def recorded(self) -> str:
        """The verdict recorded in code: the documented disagreement's, else ``reproduced``."""
        return self.disagreement.verdict if self.disagreement is not None else REPRODUCED

    def depends_on_run(self, label: str) -> bool:
        return not self.depends_on or any(label.startswith(prefix) for prefix in self.depends_on)


def values_text(values: Any) -> str:
    """Per-seed values for a claim's note: ", "-separated, 3 significant digits."""
    return ", ".join(f"{v:.3g}" for v in np.asarray(values, dtype=float).reshape(-1))


@dataclass(frozen=True, init=False)
class Measured:
    """Measured values, one per independent seed or trial (a scalar for an exact claim), with the evidence a reader
    needs to judge them (shown next to the claim)."""

    values: tuple[float | bool, ...]
    note: str

    def __init__(self, values: float | bool | Sequence[float | bool], note: str = "") -> None:
        items = np.asarray(values).reshape(-1).tolist()
        object.__setattr__(self, "values", tuple(v if isinstance(v, bool) else float(v) for v in items))
        object.__setattr__(self, "note", note)


@dataclass(frozen=True)
class ClaimResult:
    """A judged claim: everything the report, ``claims.json`` and the exit code need."""

    experiment: str
    id: str
    statement: str
    source: str
    quote: str
    band_reason: str
    expected: str
    statistic: str
    values: tuple[float | bool, ...]
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    recorded: str
    note: str
    control: str = ""
    control_value: float | None = None
    control_ci: tuple[float, float] | None = None
    control_verdict: str = ""
    disagreement: str = ""
    figure: str = ""
    band: tuple[float | None, float | None] = (None, None)
    preconditions: tuple[dict[str, Any], ...] = ()
    """Per precondition: its description, whether it is met, and the measured per-seed values."""
    null_effect: str = ""
    full_only: str = ""
    scale: str = ""
    full_record: dict[str, Any] | None = None
    """The committed full-scale verdict of this claim (verdict, estimate, interval, date), where one exists."""

    @property
    def n_seeds(self) -> int:
        return len(self.values)

    @property
    def skipped(self) -> bool:
        return self.verdict == SKIPPED

    @property
    def undecided_here(self) -> bool:
        """Recorded ``undecided at quick``: a full-only claim judged below the full scale."""
        return bool(self.full_only) and self.scale in ("smoke", "quick")

    @property
    def expected_verdict(self) -> str:
        """What the exit code compares against: the recorded verdict, or ``undecided at quick``."""
        return f"{UNDECIDED} at {self.scale}" if self.undecided_here else self.recorded

    @property
    def as_recorded(self) -> bool:
        """The verdict is the one recorded in code (exit code 0): its recorded verdict, or, for a full-only claim
        below the full scale, undecided or inconclusive (the full record decides it)."""
        if self.skipped:
            return True
        if self.undecided_here and self.verdict in (UNDECIDED, INCONCLUSIVE):
            return True
        return self.verdict == self.recorded and (self.estimate is not None or self.verdict == UNDECIDED)

    def to_json(self) -> dict[str, Any]:
        def number(value: float | bool | None) -> float | bool | str | None:
            return str(value) if isinstance(value, float) and not math.isfinite(value) else value

        return {
            "experiment": self.experiment, "id": self.id, "statement": self.statement, "source": self.source,
            "quote": self.quote, "band_reason": self.band_reason, "expected": self.expected,
            "statistic": self.statistic, "values": [number(v) for v in self.values], "n_seeds": self.n_seeds,
            "estimate": number(self.estimate), "ci_low": number(self.ci_low), "ci_high": number(self.ci_high),
            "verdict": self.verdict, "recorded": self.recorded, "as_recorded": self.as_recorded,
            "control": self.control, "control_value": number(self.control_value),
            "control_ci": None if self.control_ci is None else [number(v) for v in self.control_ci],
            "control_verdict": self.control_verdict, "disagreement": self.disagreement or None,
            "figure": self.figure, "note": self.note,
            "preconditions": [{**p, "values": [number(v) for v in p["values"]]} for p in self.preconditions],
            "null_effect": self.null_effect or None, "full_only": self.full_only or None, "scale": self.scale,
            "expected_verdict": self.expected_verdict, "full_record": self.full_record,
        }
