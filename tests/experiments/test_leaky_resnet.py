"""Smoke-scale runs of the seed-002 experiments: contract, determinism, every claim measured, figures."""

import dataclasses

import numpy as np
import pytest
import torch

from repdyn.experiments.base import SCALES
from repdyn.experiments.config import ConfigError, validate
from repdyn.experiments.leaky_resnet import EXPERIMENTS
from repdyn.theory import leaky_resnet as lr


@pytest.fixture(scope="module")
def smoke_results():
    out = {}
    for exp in EXPERIMENTS:
        cfg = exp.config("smoke")
        out[exp.name] = {r.label: exp.execute(cfg, r, 7 + j, "cpu") for j, r in enumerate(exp.runs(cfg))}
    return out


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_configs_are_valid_at_every_scale(exp):
    for scale in SCALES:
        cfg = exp.config(scale)
        validate(cfg)
        assert exp.prepare(cfg) is None
        labels = [r.label for r in exp.runs(cfg)]
        assert len(labels) == len(set(labels))
    assert exp.name.startswith("leaky_resnet.")


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_smoke_analysis_measures_every_claim_and_draws_figures(exp, smoke_results):
    cfg = exp.config("smoke")
    analysis = exp.analyse(cfg, smoke_results[exp.name])
    assert {c.id for c in exp.claims} == set(analysis.measured)
    assert analysis.figures and analysis.metrics
    for fig in analysis.figures.values():
        assert fig.axes


def test_execute_is_deterministic_and_returns_arrays_and_scalars(smoke_results):
    exp = EXPERIMENTS[1]
    cfg = exp.config("smoke")
    run = exp.runs(cfg)[0]
    again = exp.execute(cfg, run, 7, "cpu")
    first = smoke_results[exp.name][run.label]
    assert set(again) == set(first)
    for key, value in first.items():
        assert isinstance(value, (np.ndarray, int, float, bool, str, np.floating))
        np.testing.assert_array_equal(again[key], value)


def test_structures_diagnostics_are_consistent(smoke_results):
    # The per-layer arrays agree with their definitions: h_gamma = COI - kappa, p ends at 1, ranks <= w.
    r = smoke_results["leaky_resnet.structures"]["sweep"]
    np.testing.assert_allclose(r["h_gamma"], r["coi_gamma"] - r["kappa"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(r["p"][:, -1], 1.0, atol=1e-12)
    np.testing.assert_allclose(r["rho"].sum(-1), 1.0, atol=1e-12)
    assert ((r["weight_rank"] >= 1) & (r["weight_rank"] <= 12)).all()


def test_discretisation_pairs_initialisations_across_schemes():
    exp = EXPERIMENTS[1]
    cfg = dataclasses.replace(exp.config("smoke"), adam_steps=0, gd_steps=0, depths=(4,))
    r = exp.execute(cfg, exp.runs(cfg)[0], 3, "cpu")
    # untrained: equidistant and adaptive share init and steps, so identical test errors per seed
    np.testing.assert_allclose(r["test_error"][0], r["test_error"][2], rtol=1e-6)
    np.testing.assert_allclose(r["rho"][1, 0], lr.irregular_steps(4, cfg.irregular_a).numpy(), rtol=1e-6)
    assert torch.tensor(r["test_error"]).isfinite().all()


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_too_few_layers_for_the_rho_ltilde_cap_are_rejected_before_running(exp):
    # pitfall P9: rho_l L~ <= max_rho_ltilde needs L > L~ / max_rho_ltilde layers
    cfg = exp.config("smoke")
    field = "depth" if hasattr(cfg, "depth") else "depths"
    bad = dataclasses.replace(cfg, **{field: 3 if field == "depth" else (3, 6)}, max_rho_ltilde=0.9)
    ltilde = max(cfg.ltildes) if hasattr(cfg, "ltildes") else cfg.ltilde
    assert ltilde / 0.9 > 3
    with pytest.raises(ConfigError, match="depth=3"):
        exp.prepare(bad)
