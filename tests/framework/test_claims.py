"""Claims and verdicts: intervals over seeds, the expectation's relation to them, controls, documented
disagreements."""

import math

import numpy as np
import pytest
from scipy import stats

from repdyn.framework.claims import (
    ClaimSpec,
    CloseTo,
    Control,
    Disagreement,
    Holds,
    InRange,
    Measured,
    NullEffect,
    Precondition,
    at_least,
    at_most,
)
from repdyn.framework.verdicts import MIN_SEEDS, evaluate, interval, skip

CONTROL = Control("untrained", {"steps": 0})
EVIDENCE = Disagreement("width 500", "0.08 [0.07, 0.09], 5 seeds", "step size", "docs/reproduction/000.md")


def spec(expectation=at_most(1.0), **kwargs) -> ClaimSpec:
    return ClaimSpec("c", "statement", "seed 000, Fig. 1", expectation, **kwargs)


def test_range_relates_whole_intervals_and_nan_violates():
    band = InRange(0.4, 0.6)
    assert band.relate(0.4, 0.6) == "satisfied" and band.relate(0.61, 0.7) == "violated"
    assert band.relate(0.5, 0.65) == "straddles" and band.relate(0.1, 0.9) == "straddles"
    assert band.relate(math.nan, math.nan) == "violated" and not at_least(1.0).check(math.nan)
    assert at_most(2.0).describe() == "≤ 2" and at_least(1.0).describe() == "≥ 1"


def test_close_to_is_the_band_of_its_tolerance():
    expectation = CloseTo(10.0, rtol=0.1, atol=0.5)
    assert expectation.bounds() == (8.5, 11.5) and expectation.check(11.5) and not expectation.check(11.6)


def test_median_interval_is_the_percentile_bootstrap():
    values = [0.1, 0.3, 0.2, 0.5, 0.4, 0.25, 0.35]
    found = interval(spec(), values)
    reference = stats.bootstrap((np.array(values),), np.median, confidence_level=0.9, method="percentile",
                                n_resamples=4999, rng=np.random.default_rng(0)).confidence_interval
    assert found.estimate == 0.3 and (found.low, found.high) == (reference.low, reference.high)
    assert interval(spec(statistic="mean"), [1.0, 2.0, 3.0]).estimate == 2.0
    assert interval(spec(), [2.0, 2.0, 2.0]) == interval(spec(), [2.0]) and interval(spec(), [2.0]).low == 2.0


def test_a_median_orders_an_infinite_value_beyond_every_number():
    """A failed trial (∞) counts as larger than any value: the interval is that of the same values with ∞ replaced by
    any number above them, as long as the bound does not reach it, and ∞ where it does; a mean with ∞ is infinite."""
    rng = np.random.default_rng(3)
    finite = list(rng.uniform(0.0, 0.05, 9))
    failed, stand_in = interval(spec(), [*finite, math.inf]), interval(spec(), [*finite, 7.0])
    assert (failed.estimate, failed.low, failed.high) == (stand_in.estimate, stand_in.low, stand_in.high)
    assert failed.high < 0.05  # one failure in ten leaves the median decided
    half = interval(spec(), [*finite[:5], *[math.inf] * 5])
    assert half.estimate == math.inf and half.high == math.inf and half.low < 0.05
    below = interval(spec(at_least(0.0)), [-math.inf, *finite])  # -∞ lies below every number
    assert below.low == interval(spec(at_least(0.0)), [-7.0, *finite]).low
    assert interval(spec(statistic="mean"), [*finite, math.inf]).estimate == math.inf
    assert interval(spec(), [math.inf] * 3).low == math.inf


def test_holds_uses_the_exact_binomial_interval_of_the_fraction():
    found = interval(spec(Holds()), [True] * 5)
    assert found.estimate == 1.0 and found.low == pytest.approx(0.05 ** (1 / 5)) and found.high == 1.0
    assert evaluate("e", spec(Holds(), no_control="x"), [True] * 5).verdict == "reproduced"
    assert evaluate("e", spec(Holds(), no_control="x"), [True] * 4).verdict == "inconclusive"  # 0.47 < 0.5
    assert evaluate("e", spec(Holds(), no_control="x"), [False] * 5).verdict == "not reproduced"


def test_verdicts_follow_the_interval():
    assert evaluate("e", spec(), [0.1, 0.2, 0.3]).verdict == "reproduced"
    assert evaluate("e", spec(), [1.1, 1.2, 1.3]).verdict == "not reproduced"
    assert evaluate("e", spec(), [0.5, 1.5, 0.9, 1.2]).verdict == "inconclusive"
    few = evaluate("e", spec(), [0.1] * (MIN_SEEDS - 1))
    assert few.verdict == "inconclusive" and f"needs at least {MIN_SEEDS}" in few.note
    exact = evaluate("e", spec(CloseTo(1.0, atol=1e-9), exact=True), 1.0 + 1e-12)
    assert exact.verdict == "reproduced" and exact.statistic == "exact" and exact.n_seeds == 1


def test_control_that_passes_too_makes_the_claim_vacuous():
    claim = spec(control=CONTROL)
    fails = evaluate("e", claim, [0.1, 0.2, 0.3], control=[5.0, 6.0, 7.0])
    assert fails.verdict == "reproduced" and fails.control_verdict == "fails as it should"
    assert fails.control_value == 6.0 and fails.as_recorded
    vacuous = evaluate("e", claim, [0.1, 0.2, 0.3], control=[0.2, 0.3, 0.4])
    assert vacuous.verdict == "vacuous" and vacuous.control_verdict == "passes too" and not vacuous.as_recorded
    undecided = evaluate("e", claim, [0.1, 0.2, 0.3], control=[0.5, 1.5, 2.0])
    assert undecided.verdict == "inconclusive" and undecided.control_verdict == "straddles"
    missing = evaluate("e", claim, [0.1, 0.2, 0.3], control_failure="run 'x' diverged")
    assert missing.verdict == "inconclusive" and "control not measured: run 'x' diverged" in missing.note


def test_a_documented_disagreement_is_the_recorded_verdict_only_when_measured_so():
    claim = spec(disagreement=EVIDENCE, no_control="x")
    assert claim.recorded == "not reproduced"
    assert evaluate("e", claim, [1.1, 1.2, 1.3]).as_recorded
    assert not evaluate("e", claim, [0.1, 0.2, 0.3]).as_recorded  # an unexpected reproduction
    assert not evaluate("e", claim, [0.5, 1.5, 0.9, 1.2]).as_recorded  # inconclusive is never documented
    crashed = evaluate("e", claim, None, "analysis failed: boom")
    assert crashed.verdict == "not reproduced" and not crashed.as_recorded and crashed.note == "analysis failed: boom"
    assert "0.08 [0.07, 0.09]" in crashed.disagreement


def test_evidence_and_controls_are_required_in_full():
    with pytest.raises(ValueError, match="ruled_out"):
        Disagreement("width 500", "0.08", " ", "docs/reproduction/000.md")
    with pytest.raises(ValueError, match="override"):
        Control("untrained", {})
    with pytest.raises(ValueError, match="not both"):
        spec(control=CONTROL, no_control="closed form")
    with pytest.raises(ValueError, match="exact"):
        spec(control=CONTROL, exact=True)


def test_measured_takes_scalars_arrays_and_booleans():
    assert Measured(np.float32(0.5)).values == (0.5,)
    assert Measured(np.array([1, 2])).values == (1.0, 2.0)
    assert Measured(np.array([True, False])).values == (True, False)


def test_json_carries_every_field_of_the_verdict():
    result = evaluate("e", spec(control=CONTROL, quote="q", band_reason="why"), [0.1, 0.2, 0.3],
                      control=[5.0, 6.0, math.inf])
    data = result.to_json()
    for key in ("verdict", "estimate", "ci_low", "ci_high", "n_seeds", "control_value", "quote", "band_reason",
                "disagreement", "values", "recorded"):
        assert key in data
    assert (data["n_seeds"], data["quote"], data["control_ci"][1]) == (3, "q", "inf")
    assert skip("e", spec(), "no data").to_json()["verdict"] == "skipped"


def test_depends_on_matches_label_prefixes():
    claim = spec(Holds(), depends_on=("gain=0.1",))
    assert claim.depends_on_run("gain=0.1/seed=2") and not claim.depends_on_run("gain=1")
    assert spec(Holds()).depends_on_run("anything")


CONVERGED = Precondition("residual", at_most(0.1), state="at a critical point",
                         reason="the exact critical networks reach 0.02; five times that")


def test_an_unmet_precondition_is_undecided_never_not_reproduced():
    claim = spec(preconditions=(CONVERGED,))
    violating = [1.1, 1.2, 1.3]  # wholly outside the band: "not reproduced" if the state had been reached
    reached = evaluate("e", claim, violating, states={"residual": [0.01, 0.05, 0.09]})
    assert reached.verdict == "not reproduced" and reached.preconditions[0]["met"]
    one_short = evaluate("e", claim, violating, states={"residual": [0.01, 0.05, 0.6]})
    assert one_short.verdict == "undecided" and not one_short.as_recorded
    assert one_short.estimate == 1.2 and one_short.preconditions[0]["values"] == (0.01, 0.05, 0.6)
    assert "at a critical point" in one_short.note and "0.6" in one_short.note and "≤ 0.1" in one_short.note
    unmeasured = evaluate("e", claim, violating)
    assert unmeasured.verdict == "undecided" and "not measured" in unmeasured.note
    nan = evaluate("e", claim, [0.1, 0.2, 0.3], states={"residual": Measured([0.01, float("nan"), 0.02])})
    assert nan.verdict == "undecided"


def test_an_undecided_claim_still_judges_and_shows_its_control():
    """The control does not depend on the claim's trained state: an unmet precondition leaves the claim undecided,
    and the control's value and verdict are still reported (a smoke run that stops before the state still runs its
    controls)."""
    claim = spec(preconditions=(CONVERGED,), control=CONTROL)
    result = evaluate("e", claim, [0.2, 0.3, 0.4], states={"residual": [0.5, 0.6, 0.7]}, control=[2.0, 2.1, 2.2])
    assert result.verdict == "undecided" and result.control_verdict == "fails as it should"
    assert result.control_value == 2.1


def test_a_claim_declares_preconditions_or_why_none_not_both():
    with pytest.raises(ValueError, match="not both"):
        spec(preconditions=(CONVERGED,), no_precondition="closed form")
    with pytest.raises(ValueError, match="reason"):
        Precondition("residual", at_most(0.1), state="converged", reason=" ")


def test_null_effect_decides_equivalence_and_straddling_is_inconclusive():
    """Effect claim: difference >= 0, smallest effect of interest 0.05 (equivalence region [-0.05, 0.05])."""
    claim = spec(at_least(0.0), null_effect=NullEffect(-0.05, 0.05, reason="a tenth of the range"))
    inside = [0.001, -0.002, 0.003, 0.0, 0.002, -0.001]
    assert evaluate("e", claim, inside).verdict == "not reproduced (no effect)"
    assert evaluate("e", claim, [0.3, 0.4, 0.5, 0.35]).verdict == "reproduced"
    straddling = [0.02, 0.07, 0.04, 0.09, 0.03]  # wholly >= 0, but overlapping the region's edge 0.05
    assert evaluate("e", claim, straddling).verdict == "inconclusive"
    assert evaluate("e", claim, [-0.3, -0.4, -0.5]).verdict == "not reproduced"
    with pytest.raises(ValueError, match="lo < hi"):
        NullEffect(0.1, 0.1, reason="x")


def test_a_documented_no_effect_is_its_recorded_verdict():
    claim = spec(at_least(0.0), null_effect=NullEffect(-0.05, 0.05, reason="r"),
                 disagreement=Disagreement("s", "m", "r", "d", verdict="not reproduced (no effect)"))
    assert claim.recorded == "not reproduced (no effect)"
    assert evaluate("e", claim, [0.001, -0.002, 0.003, 0.0]).as_recorded
    with pytest.raises(ValueError, match="records"):
        Disagreement("s", "m", "r", "d", verdict="reproduced")


def test_a_full_only_claim_is_recorded_undecided_below_the_full_scale():
    claim = spec(full_only="needs 36 seeds")
    quick = evaluate("e", claim, None, scale="quick")
    assert quick.verdict == "undecided" and quick.as_recorded and quick.expected_verdict == "undecided at quick"
    assert "needs 36 seeds" in quick.note
    assert evaluate("e", claim, [0.1, 0.2, 0.9, 1.5], scale="quick").as_recorded  # inconclusive at quick
    full = evaluate("e", claim, None, scale="full")
    assert full.verdict == "undecided" and not full.as_recorded
    assert evaluate("e", claim, [0.1, 0.2, 0.3], scale="full").as_recorded
