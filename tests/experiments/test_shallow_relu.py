"""The seed-001 experiments at smoke scale: registered, deterministic, every claim measured, and the exact
claims (frozen knots, GD = closed form, same initial function, corrected Eq. 26) hold."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from repdyn.experiments.claims import Measured
from repdyn.experiments.config import ConfigError, apply_overrides, validate
from repdyn.experiments.shallow_relu import EXPERIMENTS

EXACT = {"frozen_knots", "radial_paths", "gd_matches_closed_form", "same_initial_function", "eq26_corrected"}


def _run(exp, seed: int = 5):
    cfg = exp.config("smoke")
    return cfg, {r.label: exp.execute(cfg, r, seed + j, "cpu") for j, r in enumerate(exp.runs(cfg))}


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_smoke_run_measures_every_claim(exp):
    assert exp.name.startswith("shallow_relu.") and exp.paper == "001"
    for scale in ("smoke", "quick", "paper"):
        validate(exp.config(scale))
    cfg, results = _run(exp)
    for result in results.values():
        for value in result.values():
            assert isinstance(value, (np.ndarray, int, float, bool, str)), type(value)
    analysis = exp.analyse(cfg, results)
    assert set(analysis.measured) == {c.id for c in exp.claims}
    assert analysis.figures and all(isinstance(f, Figure) for f in analysis.figures.values())
    for spec in exp.claims:
        if spec.id in EXACT:
            measured = analysis.measured[spec.id]
            values = measured.values if isinstance(measured, Measured) else (measured,)
            assert all(spec.expectation.check(v) for v in values), spec.id


def test_runs_are_pure_functions_of_seed():
    exp = next(e for e in EXPERIMENTS if e.name == "shallow_relu.trajectories")
    _, first = _run(exp)
    _, second = _run(exp)
    for label, result in first.items():
        for key, value in result.items():
            np.testing.assert_array_equal(value, second[label][key])


def test_bad_config_is_rejected():
    exp = next(e for e in EXPERIMENTS if e.name == "shallow_relu.regime_crossover")
    with pytest.raises(ConfigError, match="dataset"):
        apply_overrides(exp.config("smoke"), {"dataset": "SQ11"})
    cfg = apply_overrides(exp.config("smoke"), {"width": "41"})
    with pytest.raises(ValueError, match="even"):
        exp.execute(cfg, exp.runs(cfg)[0], 0, "cpu")
