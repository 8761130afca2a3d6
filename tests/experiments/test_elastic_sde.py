"""Smoke runs of the seed-004 experiments: every claim is measured, synthetic checks pass, figures are built."""

import dataclasses
import pickle

import numpy as np
import pytest

from repdyn.experiments.claims import Measured
from repdyn.experiments.config import ConfigError
from repdyn.experiments.elastic_sde import EXPERIMENTS


def _run(exp, config):
    results = {r.label: exp.execute(config, r, 100 + j, "cpu") for j, r in enumerate(exp.runs(config))}
    return results, exp.analyse(config, results)


def _by_name(name):
    return next(e for e in EXPERIMENTS if e.name == name)


def test_names_and_claims_are_unique():
    names = [e.name for e in EXPERIMENTS]
    assert len(set(names)) == len(names) and all(n.startswith("elastic_sde.") for n in names)
    for exp in EXPERIMENTS:
        ids = [c.id for c in exp.claims]
        assert len(set(ids)) == len(ids)


def test_synthetic_checks_pass_at_smoke_scale():
    exp = _by_name("elastic_sde.synthetic")
    _, analysis = _run(exp, exp.config("smoke"))
    values = {c.id: Measured(analysis.measured[c.id].values if isinstance(analysis.measured[c.id], Measured)
                             else analysis.measured[c.id]).values for c in exp.claims}
    failing = {c.id: values[c.id] for c in exp.claims if not all(c.expectation.check(v) for v in values[c.id])}
    assert failing == {}
    assert "synthetic_checks" in analysis.figures


def test_geomnist_smoke_measures_every_claim_and_is_deterministic():
    exp = _by_name("elastic_sde.geomnist")
    config = exp.config("smoke")
    run = exp.runs(config)[0]
    first = exp.execute(config, run, 7, "cpu")
    again = exp.execute(config, run, 7, "cpu")
    np.testing.assert_array_equal(first["logits"], again["logits"])
    assert first["logits"].shape == (run.params["n_trials"], config.steps, 3)
    results, analysis = _run(exp, config)
    assert set(analysis.measured) == {c.id for c in exp.claims}
    assert {"fig3_strengths", "fig1_separation", "fig5_simulated_vs_genuine"} <= set(analysis.figures)
    pickle.dumps(results)  # storable


def test_label_noise_smoke_measures_claims():
    exp = _by_name("elastic_sde.label_noise")
    config = exp.config("smoke")
    _, analysis = _run(exp, config)
    assert set(analysis.measured) == {c.id for c in exp.claims}
    assert len(analysis.metrics) == 3


def test_cifar_skips_without_folder_and_runs_with_one(tmp_path):
    exp = _by_name("elastic_sde.cifar")
    config = exp.config("smoke")
    assert "no CIFAR-10 folder given" in exp.prepare(config)
    with pytest.raises(ConfigError, match="data_dir='/no/such/folder' is not a folder"):
        exp.prepare(dataclasses.replace(config, data_dir="/no/such/folder"))
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"labels": [int(v) for v in np.arange(30) % 10],
                 b"data": rng.integers(0, 256, (30, 3072), dtype=np.uint8), b"batch_label": b"x"}
        with open(tmp_path / name, "wb") as fh:
            pickle.dump(batch, fh, protocol=2)
    config = dataclasses.replace(config, data_dir=str(tmp_path), classes=(2,), steps=60, val_every=30)
    assert exp.prepare(config) is None
    _, analysis = _run(exp, config)
    assert set(analysis.measured) == {c.id for c in exp.claims}


def test_bad_config_values_are_rejected():
    from repdyn.experiments.config import apply_overrides

    exp = _by_name("elastic_sde.label_noise")
    with pytest.raises(ConfigError, match="p_errs"):
        apply_overrides(exp.config("smoke"), {"p_errs": "0.2,1.5"})
