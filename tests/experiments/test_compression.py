"""Smoke-scale runs of the seed-003 experiments: contract, determinism of execute, analysis with all claims."""

from __future__ import annotations

import numpy as np
import pytest

from repdyn.experiments.compression import EXPERIMENTS
from repdyn.experiments.config import ConfigError, apply_overrides


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_smoke_run_measures_every_claim(exp) -> None:
    cfg = exp.config("smoke")
    runs = exp.runs(cfg)
    assert len({r.label for r in runs}) == len(runs)
    results = {r.label: exp.execute(cfg, r, 1234 + j, "cpu") for j, r in enumerate(runs)}
    analysis = exp.analyse(cfg, results)
    assert set(analysis.measured) == {c.id for c in exp.claims}
    assert analysis.figures
    for fig in analysis.figures.values():
        assert fig.axes


def test_execute_is_a_pure_function_of_its_arguments() -> None:
    exp = EXPERIMENTS[3]
    cfg = exp.config("smoke")
    run = exp.runs(cfg)[-1]
    a, b = exp.execute(cfg, run, 7, "cpu"), exp.execute(cfg, run, 7, "cpu")
    for key in a:
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))


def test_config_bounds() -> None:
    cfg = EXPERIMENTS[0].config("quick")
    with pytest.raises(ConfigError, match="alpha"):
        apply_overrides(cfg, {"alpha": "-1"})


def test_real_images_prepare_rejects_a_missing_data_folder(tmp_path) -> None:
    exp = next(e for e in EXPERIMENTS if e.name == "compression.real_images")
    assert exp.prepare(exp.config("smoke")) is None
    with pytest.raises(ConfigError, match="data_dir=.*no MNIST file train-images-idx3-ubyte"):  # an empty folder
        exp.prepare(apply_overrides(exp.config("smoke"), {"data_dir": str(tmp_path)}))
    with pytest.raises(ConfigError, match="data_dir"):
        exp.prepare(apply_overrides(exp.config("smoke"), {"data_dir": str(tmp_path / "missing")}))
