"""Verdicts: a claim's per-seed values summarised with a 90 % interval, judged against its expectation and its
negative control.

- Continuous values: the claim's statistic (median or mean) with a percentile bootstrap interval
  (``scipy.stats.bootstrap``); a median orders an infinite value (a trial whose measurement failed) beyond every
  number, a mean with one is infinite, and its interval is the values' range. Booleans
  (:class:`~repdyn.framework.claims.Holds`): the fraction of seeds on which the statement holds, with the exact
  binomial (Clopper-Pearson) interval. Exact claims: the single value.
- ``reproduced`` when the whole interval satisfies the expectation, ``not reproduced`` when it wholly violates
  it, ``inconclusive`` when it straddles the boundary or fewer than :data:`MIN_SEEDS` seeds were measured, and
  ``vacuous`` when the negative control satisfies the expectation too. A control whose own interval straddles the
  boundary leaves the claim ``inconclusive``: the measurement cannot yet tell learning from no learning.
- ``undecided`` when a declared precondition is not met on every seed (or its quantity, or the claim itself, was not
  measured): the networks did not reach the state the claim is about, so the values are shown but judge nothing.
- With a smallest effect of interest (:class:`~repdyn.framework.claims.NullEffect`): an interval wholly inside the
  equivalence region is ``not reproduced (no effect)``; one that overlaps it without wholly violating the
  expectation is ``inconclusive`` (more seeds or a larger setting decide it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from repdyn.framework.claims import (
    INCONCLUSIVE,
    NO_EFFECT,
    NOT_REPRODUCED,
    REPRODUCED,
    SATISFIED,
    SKIPPED,
    STRADDLES,
    UNDECIDED,
    VACUOUS,
    VIOLATED,
    ClaimResult,
    ClaimSpec,
    Measured,
    Precondition,
    values_text,
)

CONFIDENCE = 0.9
MIN_SEEDS = 3
"""Fewest independent seeds for a verdict on a non-exact claim."""

NOT_MEASURED = "not measured: the analysis had no data for it in this config (e.g. a condition it needs was not run)"


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float


def interval(spec: ClaimSpec, values: Sequence[float | bool]) -> Interval:
    """The claim's statistic over ``values`` with its 90 % interval (exact claims: the value itself)."""
    if spec.expectation.statistic == "fraction":
        hits = sum(bool(v) and not (isinstance(v, float) and math.isnan(v)) for v in values)
        ci = stats.binomtest(hits, len(values)).proportion_ci(confidence_level=CONFIDENCE, method="exact")
        return Interval(hits / len(values), float(ci.low), float(ci.high))
    data = np.asarray(values, dtype=float)
    summary = np.median if spec.statistic == "median" else np.mean
    estimate = float(summary(data))
    if spec.exact or len(data) == 1 or np.isnan(data).any() or np.ptp(data) == 0:
        return Interval(estimate, estimate, estimate)  # a seed that could not be measured (NaN) violates
    infinite = ~np.isfinite(data)
    if infinite.any() and (spec.statistic != "median" or infinite.all()):
        return Interval(estimate, float(data.min()), float(data.max()))
    data, back = _ordered_stand_ins(data)
    result = stats.bootstrap((data,), summary, confidence_level=CONFIDENCE, method="percentile",
                             n_resamples=4999, rng=np.random.default_rng(0))
    return Interval(back(summary(data)), back(result.confidence_interval.low), back(result.confidence_interval.high))


def _ordered_stand_ins(data: np.ndarray) -> tuple[np.ndarray, Callable[[float], float]]:
    """A median's bootstrap with ±∞ among the values (a trial whose measurement failed, beyond every number): ±∞ are
    replaced by stand-ins beyond the finite values' range, far enough that the mean of a stand-in and any finite value
    lies beyond it too, so every median (of an odd or even count) keeps its order; the returned map takes a statistic
    beyond the finite range back to ±∞."""
    finite = np.isfinite(data)
    if finite.all():
        return data, float
    low, high = float(data[finite].min()), float(data[finite].max())
    reach = 2 * (high - low) + 1
    stand_ins = np.where(data > 0, high + reach, low - reach)

    def back(value: float) -> float:
        value = float(value)
        return math.inf if value > high else -math.inf if value < low else value

    return np.where(finite, data, stand_ins), back


def _judge(spec: ClaimSpec, values: Sequence[float | bool]) -> tuple[Interval, str]:
    """The interval and the verdict it alone gives (before the control is considered)."""
    found = interval(spec, values)
    if not spec.exact and len(values) < MIN_SEEDS:
        return found, INCONCLUSIVE
    relation = spec.expectation.relate(found.low, found.high)
    null = spec.null_effect
    if null is not None and not (math.isnan(found.low) or math.isnan(found.high)):
        if null.contains(found.low, found.high):
            return found, NO_EFFECT
        if relation != VIOLATED and null.overlaps(found.low, found.high):
            return found, INCONCLUSIVE
    return found, {SATISFIED: REPRODUCED, VIOLATED: NOT_REPRODUCED, STRADDLES: INCONCLUSIVE}[relation]


def check_precondition(precondition: Precondition, measured: Measured | Sequence | None) -> dict:
    """Whether ``precondition`` holds on every seed of ``measured`` (its quantity's per-seed values), as the
    record the report shows: description, met, values, note."""
    measured = _as_measured(measured)
    values = () if measured is None else measured.values
    met = bool(values) and all(precondition.expectation.check(v) for v in values)
    return {"quantity": precondition.quantity, "state": precondition.state,
            "expected": precondition.expectation.describe(), "reason": precondition.reason, "met": met,
            "values": tuple(float(v) for v in values), "note": "" if measured is None else measured.note}


def _unmet(checks: Sequence[dict]) -> str:
    """The note of an undecided claim: each unmet state with its threshold and measured values."""
    parts = []
    for check in checks:
        if check["met"]:
            continue
        found = f"measured {values_text(check['values'])}" if check["values"] else "not measured"
        parts.append(f"precondition not met ({check['state']}): {check['quantity']} {check['expected']} on every "
                     f"seed, {found}")
    return "; ".join(parts)


def _as_measured(measured: Measured | float | bool | Sequence[float | bool] | None) -> Measured | None:
    if measured is None or isinstance(measured, Measured):
        return measured
    return Measured(measured)


def evaluate(experiment: str, spec: ClaimSpec, measured: Measured | float | bool | Sequence | None,
             failure: str | None = None, *, control: Measured | float | bool | Sequence | None = None,
             control_failure: str | None = None, states: Mapping[str, Measured | Sequence] | None = None,
             scale: str = "") -> ClaimResult:
    """Judge one claim. ``failure`` (e.g. "run 'g=0.1' diverged at step 412") makes it not reproduced without a
    value; ``control`` is what the same analysis measured on the claim's negative control; ``states`` the per-seed
    values of the precondition quantities (``Analysis.states``); ``scale`` the scale it was measured at."""
    states = states or {}
    checks = tuple(check_precondition(p, states.get(p.quantity)) for p in spec.preconditions)
    common = {**_declared(experiment, spec), "preconditions": checks, "scale": scale}
    measured = _as_measured(measured)
    if failure is not None:
        return ClaimResult(**common, values=(), estimate=None, ci_low=None, ci_high=None,
                           verdict=NOT_REPRODUCED, note=failure)
    if measured is None or not measured.values:
        note = f"decided at the full scale only: {spec.full_only}" if spec.full_only else NOT_MEASURED
        return ClaimResult(**common, values=(), estimate=None, ci_low=None, ci_high=None, verdict=UNDECIDED,
                           note=note)
    found, verdict = _judge(spec, measured.values)
    notes = [measured.note] if measured.note else []
    if verdict == INCONCLUSIVE and not spec.exact and len(measured.values) < MIN_SEEDS:
        notes.append(f"{len(measured.values)} seed(s): a verdict needs at least {MIN_SEEDS}")
    control_fields: dict = {}
    if spec.control is not None:
        control_measured = _as_measured(control)
        if control_failure is not None or control_measured is None or not control_measured.values:
            control_fields["control_verdict"] = "not measured"
            notes.append(f"control not measured: {control_failure or NOT_MEASURED}")
            if verdict == REPRODUCED:
                verdict = INCONCLUSIVE
        else:
            control_found, control_verdict = _judge(spec, control_measured.values)
            control_fields.update(control_value=control_found.estimate,
                                  control_ci=(control_found.low, control_found.high))
            if control_verdict == REPRODUCED:
                control_fields["control_verdict"] = "passes too"
                if verdict in (REPRODUCED, INCONCLUSIVE, NO_EFFECT):
                    verdict = VACUOUS
            elif control_verdict in (NOT_REPRODUCED, NO_EFFECT):
                control_fields["control_verdict"] = "fails as it should"
            else:
                control_fields["control_verdict"] = "straddles"
                if verdict == REPRODUCED:
                    verdict = INCONCLUSIVE
                    notes.append("the control's interval straddles the expectation: it cannot yet tell this "
                                 "result from the control's")
    unmet = _unmet(checks)  # the control is still judged and shown: it does not depend on the claim's state
    if unmet:
        return ClaimResult(**common, values=measured.values, estimate=found.estimate, ci_low=found.low,
                           ci_high=found.high, verdict=UNDECIDED, note="; ".join([unmet, *notes]), **control_fields)
    return ClaimResult(**common, values=measured.values, estimate=found.estimate, ci_low=found.low,
                       ci_high=found.high, verdict=verdict, note="; ".join(notes), **control_fields)


def _declared(experiment: str, spec: ClaimSpec) -> dict:
    """The fields of a judged claim that come from its declaration, not from a measurement."""
    return dict(experiment=experiment, id=spec.id, statement=spec.statement, source=spec.source, quote=spec.quote,
                band_reason=spec.band_reason, expected=spec.expectation.describe(),
                statistic="exact" if spec.exact else "fraction of seeds" if spec.expectation.statistic == "fraction"
                else spec.statistic, recorded=spec.recorded, figure=spec.figure, band=spec.expectation.bounds(),
                control=spec.control.description if spec.control else spec.no_control,
                disagreement=spec.disagreement.describe() if spec.disagreement else "",
                null_effect=spec.null_effect.describe() if spec.null_effect else "", full_only=spec.full_only)


def skip(experiment: str, spec: ClaimSpec, reason: str, scale: str = "") -> ClaimResult:
    """A claim not evaluated because its experiment was skipped (see ``Experiment.prepare``)."""
    return ClaimResult(**_declared(experiment, spec), values=(), estimate=None, ci_low=None, ci_high=None,
                       verdict=SKIPPED, note=reason, scale=scale)
