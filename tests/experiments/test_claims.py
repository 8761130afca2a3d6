import math

from repdyn.experiments.claims import ClaimSpec, CloseTo, Holds, InRange, Measured, at_least, at_most, evaluate


def test_range_bounds_are_inclusive_and_nan_fails():
    assert InRange(0.4, 0.6).check(0.4) and InRange(0.4, 0.6).check(0.6)
    assert not InRange(0.4, 0.6).check(0.61)
    assert not at_least(1.0).check(math.nan)
    assert at_most(2.0).describe() == "≤ 2" and at_least(1.0).describe() == "≥ 1"


def test_close_to_uses_absolute_plus_relative_tolerance():
    expectation = CloseTo(10.0, rtol=0.1, atol=0.5)
    assert expectation.check(11.5) and not expectation.check(11.6)


def test_holds_requires_true():
    assert Holds().check(True) and not Holds().check(False)


def test_evaluate_reports_failure_reason_without_value():
    spec = ClaimSpec("c", "statement", "seed 000, Fig. 1", InRange(0, 1))
    result = evaluate("exp", spec, None, "run 'a' diverged at step 3")
    assert not result.passed and result.measured is None and "diverged" in result.note
    ok = evaluate("exp", spec, Measured(0.5, "evidence"))
    assert ok.passed and ok.measured == 0.5 and ok.note == "evidence"
    assert ok.to_json()["expected"] == "in [0, 1]"


def test_depends_on_matches_label_prefixes():
    spec = ClaimSpec("c", "s", "src", Holds(), depends_on=("gain=0.1",))
    assert spec.depends_on_run("gain=0.1/seed=2") and not spec.depends_on_run("gain=1")
    assert ClaimSpec("d", "s", "src", Holds()).depends_on_run("anything")
