"""Claims: a paper's headline result made checkable.

A :class:`ClaimSpec` is declared on the experiment class, so its expectation is fixed in code before any run.
The experiment's analysis measures a value for it; :func:`evaluate` turns spec + measurement into a
:class:`ClaimResult` with pass/fail. An expectation is never loosened to make a run pass (DESIGN.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


class Expectation:
    """What a measured value must satisfy; ``describe`` is shown in the report and ``repdyn list``."""

    def check(self, value: float | bool) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class InRange(Expectation):
    """lo <= value <= hi (either bound may be None for one-sided)."""

    lo: float | None = None
    hi: float | None = None

    def check(self, value: float | bool) -> bool:
        v = float(value)
        if math.isnan(v):
            return False
        return (self.lo is None or v >= self.lo) and (self.hi is None or v <= self.hi)

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
    """|value - target| <= atol + rtol * |target| (a tolerance against a closed form)."""

    target: float
    rtol: float = 0.0
    atol: float = 0.0

    def check(self, value: float | bool) -> bool:
        v = float(value)
        return not math.isnan(v) and abs(v - self.target) <= self.atol + self.rtol * abs(self.target)

    def describe(self) -> str:
        tol = []
        if self.rtol:
            tol.append(f"rtol {self.rtol:g}")
        if self.atol:
            tol.append(f"atol {self.atol:g}")
        return f"≈ {self.target:g} ({', '.join(tol) or 'exact'})"


@dataclass(frozen=True)
class Holds(Expectation):
    """A qualitative statement (an ordering, a monotonicity) that the analysis measures as True/False."""

    def check(self, value: float | bool) -> bool:
        return bool(value) is True and not (isinstance(value, float) and math.isnan(value))

    def describe(self) -> str:
        return "holds"


@dataclass(frozen=True)
class ClaimSpec:
    """A headline result: id (unique within the experiment), statement, source and expectation.

    ``source`` names the seed file and the figure or equation, e.g. "seed 000, Fig. 3". ``depends_on`` lists
    run labels (or label prefixes) whose divergence makes the claim fail; empty means every run.
    """

    id: str
    statement: str
    source: str
    expectation: Expectation
    depends_on: tuple[str, ...] = ()

    def depends_on_run(self, label: str) -> bool:
        return not self.depends_on or any(label.startswith(prefix) for prefix in self.depends_on)


@dataclass(frozen=True)
class Measured:
    """A measured value with the evidence a reader needs to judge it (shown next to the claim)."""

    value: float | bool
    note: str = ""


@dataclass(frozen=True)
class ClaimResult:
    experiment: str
    id: str
    statement: str
    source: str
    expected: str
    measured: float | bool | None
    passed: bool
    note: str
    skipped: bool = False

    @property
    def status(self) -> str:
        return "SKIP" if self.skipped else "PASS" if self.passed else "FAIL"

    def to_json(self) -> dict[str, Any]:
        value = self.measured
        if isinstance(value, float) and not math.isfinite(value):
            value = str(value)
        return {
            "experiment": self.experiment,
            "id": self.id,
            "statement": self.statement,
            "source": self.source,
            "expected": self.expected,
            "measured": value,
            "passed": self.passed,
            "skipped": self.skipped,
            "note": self.note,
        }


NOT_MEASURED = "not measured: the analysis had no data for it in this config (e.g. a condition it needs was not run)"


def evaluate(experiment: str, spec: ClaimSpec, measured: Measured | float | bool | None,
             failure: str | None = None) -> ClaimResult:
    """Judge one claim. ``failure`` (e.g. "run 'g=0.1' diverged at step 412") fails it without a value."""
    if failure is not None or measured is None:
        return ClaimResult(experiment, spec.id, spec.statement, spec.source, spec.expectation.describe(),
                           None, False, failure or NOT_MEASURED)
    if not isinstance(measured, Measured):
        measured = Measured(measured)
    value = measured.value
    if not isinstance(value, bool):
        value = float(value)
    return ClaimResult(experiment, spec.id, spec.statement, spec.source, spec.expectation.describe(),
                       value, spec.expectation.check(value), measured.note)


def skip(experiment: str, spec: ClaimSpec, reason: str) -> ClaimResult:
    """A claim not evaluated because its experiment was skipped (see ``Experiment.prepare``)."""
    return ClaimResult(experiment, spec.id, spec.statement, spec.source, spec.expectation.describe(), None, False,
                       reason, skipped=True)
