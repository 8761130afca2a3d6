"""Every seed-000 experiment runs end to end at smoke scale, measures every claim it declares, draws figures, and
its runs are pure functions of (config, run, seed)."""

import numpy as np
import pytest

from repdyn.data.context_blobs import context_blobs
from repdyn.experiments.base import SCALES
from repdyn.experiments.config import ConfigError, apply_overrides, validate
from repdyn.experiments.effective_theory import EXPERIMENTS
from repdyn.experiments.effective_theory.blobs import classical_mds, context_separation, irrelevant_ratio
from repdyn.experiments.effective_theory.common import plateau_fraction, readout_layer, scaled_lr

NAMES = [e.name for e in EXPERIMENTS]


def test_registered_in_issue_order():
    assert NAMES == ["effective_theory.two_point", "effective_theory.init_scale", "effective_theory.final_distance",
                     "effective_theory.control", "effective_theory.depth", "effective_theory.xor",
                     "effective_theory.blobs", "effective_theory.digits", "effective_theory.adam"]
    for exp in EXPERIMENTS:
        for scale in SCALES:
            validate(exp.config(scale))
        assert len({c.id for c in exp.claims}) == len(exp.claims)


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=NAMES)
def test_smoke_run_measures_every_claim(exp):
    config = exp.config("smoke")
    results = {run.label: exp.execute(config, run, 7 + j, "cpu") for j, run in enumerate(exp.runs(config))}
    for result in results.values():
        for value in result.values():
            assert isinstance(value, (np.ndarray, int, float, str, bool))
    analysis = exp.analyse(config, results)
    assert set(analysis.measured) == {c.id for c in exp.claims}
    assert analysis.figures
    for fig in analysis.figures.values():
        assert fig.axes


def test_execute_is_pure():
    exp = EXPERIMENTS[0]
    config = exp.config("smoke")
    run = exp.runs(config)[0]
    a, b = exp.execute(config, run, 3, "cpu"), exp.execute(config, run, 3, "cpu")
    np.testing.assert_array_equal(a["u"], b["u"])
    c = exp.execute(config, run, 4, "cpu")
    assert not np.array_equal(a["u"], c["u"])


def test_helpers():
    assert readout_layer(20) == "layer9" and readout_layer(2) == "layer0" and readout_layer(4) == "layer1"
    assert scaled_lr(0.005, 50) == pytest.approx(0.05)
    t = np.arange(10.0)
    u = np.array([0, 0, 0, 0, 0, 0.01, 0.5, 1, 1, 1.0])
    assert plateau_fraction(t, u) == pytest.approx(6 / 9)
    data = context_blobs(grid=5)
    # Representation = (relevant, irrelevant) coordinates: ratio 1; relevant only: ratio 0.
    relevant = np.where(data.context == 0, data.feature_x, data.feature_y).astype(float)
    irrelevant = np.where(data.context == 0, data.feature_y, data.feature_x).astype(float)
    assert irrelevant_ratio(np.stack([relevant, irrelevant], 1), data) == pytest.approx(1.0)
    assert irrelevant_ratio(np.stack([relevant, 0 * irrelevant], 1), data) == pytest.approx(0.0)
    # Both contexts on one line ordered by target: context separation 0.
    assert context_separation(data.targets.copy(), data) == pytest.approx(0.0)
    # Classical MDS of planar points reproduces their distances.
    points = np.random.default_rng(0).standard_normal((12, 2))
    sq = ((points[:, None] - points[None]) ** 2).sum(-1)
    embedded = classical_mds(sq)
    np.testing.assert_allclose(((embedded[:, None] - embedded[None]) ** 2).sum(-1), sq, atol=1e-10)


def test_bad_override_is_rejected():
    exp = EXPERIMENTS[0]
    with pytest.raises(ConfigError, match="architectures"):
        apply_overrides(exp.config("smoke"), {"architectures": "default,lstm"})
