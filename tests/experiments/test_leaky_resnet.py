"""Seed-002 specifics the contract test does not cover: determinism, paired initialisations, bad configs rejected,
batched seeds x L~ members, and the exact critical networks' numbers."""

import dataclasses

import numpy as np
import pytest

from repdyn.experiments.leaky_resnet import EXPERIMENTS, PAPER
from repdyn.experiments.leaky_resnet.common import UNTRAINED
from repdyn.framework.config import ConfigError
from repdyn.theory import leaky_resnet as lr

BY_NAME = {e.name: e for e in EXPERIMENTS}


def test_paper_record_and_names():
    assert PAPER.number == "002" and PAPER.topic == "leaky_resnet"
    assert all(e.name.startswith("leaky_resnet.") and e.paper == "002" for e in EXPERIMENTS)


def test_paper_defaults_are_the_papers_settings():
    cfg = BY_NAME["leaky_resnet.structures"].Config()
    assert (cfg.width, cfg.depth, cfg.lam, cfg.init_scale, cfg.n_train) == (200, 50, 0.002, 1.0, 1000)
    assert (cfg.adam_steps, cfg.gd_steps, cfg.max_rho_ltilde) == (20000, 10000, 0.0)
    assert not cfg.continuation  # each L~ from its own initialisation, as in the paper (quick scale: continuation)
    assert BY_NAME["leaky_resnet.discretisation"].Config().ltilde == 3.0


def test_discretisation_is_deterministic_and_pairs_initialisations_across_schemes():
    exp = BY_NAME["leaky_resnet.discretisation"]
    cfg = dataclasses.replace(exp.config("smoke"), depths=(4,), **UNTRAINED)
    run = exp.runs(cfg)[0]
    r = exp.execute(cfg, run, 3, "cpu")
    again = exp.execute(cfg, run, 3, "cpu")
    for key, value in r.items():
        np.testing.assert_array_equal(again[key], value)
    # untrained: equidistant and adaptive share initialisation and steps, so identical test errors per seed
    np.testing.assert_allclose(r["test_error"][0], r["test_error"][2], rtol=1e-6)
    assert len(set(np.round(r["test_error"][0], 8))) == cfg.seeds  # seeds differ
    np.testing.assert_allclose(r["rho"][1, 0], lr.irregular_steps(4, cfg.irregular_a).numpy(), rtol=1e-6)


def test_structures_batches_seeds_by_ltilde_and_its_diagnostics_are_consistent():
    exp = BY_NAME["leaky_resnet.structures"]
    cfg = exp.config("smoke")
    r = exp.execute(cfg, exp.runs(cfg)[0], 5, "cpu")
    assert r["h"].shape == (cfg.seeds, len(cfg.ltildes), cfg.depth)
    np.testing.assert_allclose(r["h_gamma"], r["coi_gamma"] - r["kappa"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(r["p"][..., -1], 1.0, atol=1e-12)
    assert ((r["weight_rank"] >= 1) & (r["weight_rank"] <= cfg.width)).all()
    analysis = exp.analyse(cfg, {"sweep": r})
    assert all(len(m.values) == cfg.seeds for m in analysis.measured.values())


def test_critical_networks_are_critical_and_first_order():
    exp = BY_NAME["leaky_resnet.critical"]
    cfg = exp.config("smoke")
    r = exp.execute(cfg, exp.runs(cfg)[0], 1, "cpu")
    assert r["theorem4_residual"].max() < 1e-8
    assert (np.diff(r["relative_spread"], axis=1) < 0).all()  # the spread of h shrinks with the step


@pytest.mark.parametrize("name", ["leaky_resnet.structures", "leaky_resnet.discretisation"])
def test_too_few_layers_for_the_ltilde_are_rejected_before_running(name):
    exp = BY_NAME[name]
    cfg = exp.config("smoke")
    field, bad = ("depth", 3) if hasattr(cfg, "depth") else ("depths", (3, 6))
    ltilde = max(cfg.ltildes) if hasattr(cfg, "ltildes") else cfg.ltilde
    assert ltilde >= 3
    with pytest.raises(ConfigError, match="depth=3"):
        exp.prepare(dataclasses.replace(cfg, **{field: bad}))


def test_critical_needs_the_papers_depth():
    exp = BY_NAME["leaky_resnet.critical"]
    with pytest.raises(ConfigError, match="50"):
        exp.prepare(dataclasses.replace(exp.config("smoke"), depths=(24, 48)))


def test_structures_runs_one_independent_run_per_ltilde_at_paper_scale():
    import dataclasses

    from repdyn.runtime import registry

    experiment = registry.get("leaky_resnet.structures")
    paper = experiment.config("paper")
    runs = experiment.runs(paper)
    assert [r.label for r in runs] == [f"ltilde={lt:g}" for lt in paper.ltildes]
    assert {r.seed_group for r in runs} == {"students"}  # one initialisation seed across the sweep
    config = dataclasses.replace(experiment.config("smoke"), run_per_ltilde=True)
    results = {run.label: experiment.execute(config, run, 3, "cpu") for run in experiment.runs(config)}
    analysis = experiment.analyse(config, results)
    assert {c.id for c in experiment.claims} <= set(analysis.measured)
    assert all(len(m.values) == config.seeds for m in analysis.measured.values())


def test_irregular_null_control_is_the_equidistant_scheme_untrained():
    """The a = 0 control of h5_irregular_better runs untrained: irregular and equidistant are then one computation,
    so every paired relative difference is exactly 0, inside the claim's null effect (training would only repeat that
    at cost)."""
    exp = BY_NAME["leaky_resnet.discretisation"]
    overrides = dict(next(c.control for c in exp.claims if c.id == "h5_irregular_better").overrides)
    assert overrides["irregular_a"] == 0.0 and overrides["adam_steps"] == 0
    cfg = dataclasses.replace(exp.config("smoke"), depths=(4,), **overrides)
    results = {run.label: exp.execute(cfg, run, 3, "cpu") for run in exp.runs(cfg)}
    np.testing.assert_array_equal(results["L=4"]["test_error"][0], results["L=4"]["test_error"][1])
    assert list(exp.analyse(cfg, results).measured["h5_irregular_better"].values) == [0.0] * cfg.seeds


def test_spearman_is_exact_on_a_band_edge():
    from repdyn.experiments.leaky_resnet.discretisation import _spearman

    depths = np.array([4, 8, 12, 16])
    assert _spearman(depths, np.array([1.4, 1.05, 1.07, 1.08])) == -0.2
    assert _spearman(depths, np.array([1.4, 1.05, 1.09, 1.07])) == -0.4  # sum d^2 = 14: not -0.39999999999999997
    assert _spearman(depths, -depths.astype(float)) == -1.0 and _spearman(depths, np.ones(4)) == 0.0


def test_full_discretisation_is_the_quick_networks_at_more_paired_seeds():
    """The full scale changes only the number of paired seeds (odd: the median of discrete per-seed values is one of
    them); the claim that only it decides is h5_adaptive_better."""
    exp = BY_NAME["leaky_resnet.discretisation"]
    quick, full = exp.config("quick"), exp.config("full")
    assert (quick.seeds, full.seeds) == (5, 31)
    assert dataclasses.replace(full, seeds=quick.seeds) == quick
    assert [c.id for c in exp.claims if c.full_only] == ["h5_adaptive_better"]


def test_structures_continuation_passes_the_weights_from_one_ltilde_to_the_next():
    exp = BY_NAME["leaky_resnet.structures"]
    cfg = dataclasses.replace(exp.config("smoke"), continuation=True, stage_adam_steps=20)
    r = exp.execute(cfg, exp.runs(cfg)[0], 5, "cpu")
    assert r["h"].shape == (cfg.seeds, len(cfg.ltildes), cfg.depth)
    assert (r["rho"][:, 1].max(-1) * cfg.ltildes[1] <= 1.0).all()  # clipped to rho L~ <= 0.9, then adapted
    np.testing.assert_allclose(r["p"][..., -1], 1.0, atol=1e-12)
    analysis = exp.analyse(cfg, {"sweep": r})
    assert all(len(m.values) == cfg.seeds for m in analysis.measured.values())
    for bad in ({"run_per_ltilde": True}, {"ltildes": (3.0, 1.0)}):
        with pytest.raises(ConfigError, match="continuation"):
            exp.prepare(dataclasses.replace(cfg, **bad))


def test_boundedness_control_expands_and_the_others_are_untrained_without_continuation():
    exp = BY_NAME["leaky_resnet.structures"]
    controls = {c.id: dict(c.control.overrides) for c in exp.claims if c.control is not None}
    assert controls["fig3_bounded"] == {**UNTRAINED, "continuation": False, "init_scale": 3.0}
    assert all(v == {**UNTRAINED, "continuation": False} for k, v in controls.items() if k != "fig3_bounded")


def test_precondition_thresholds_are_the_ones_derived_from_the_exact_critical_networks():
    """The stationarity thresholds of the trained-network claims are critical.stationarity_threshold at the claims'
    rho L~ (structures: L~ 6 / L 24, shot at L 12; discretisation: L~ 3 / L 16), rounded down to two digits."""
    from repdyn.experiments.leaky_resnet.critical import stationarity_threshold

    for name, depth, threshold in (("leaky_resnet.structures", 12, 0.31), ("leaky_resnet.discretisation", 16, 0.16)):
        derived, per_draw = stationarity_threshold(depth)
        assert np.floor(derived * 100) / 100 == threshold and len(per_draw) == 5
        hi = {p.expectation.hi for c in BY_NAME[name].claims for p in c.preconditions
              if p.quantity.startswith("stationarity")}
        assert hi == {threshold}


def test_every_trained_network_claim_has_a_measured_precondition():
    """Every claim of structures and discretisation declares a precondition whose quantity the analysis measures per
    seed (smoke scale), and the critical networks need none."""
    for exp in EXPERIMENTS:
        if exp.name == "leaky_resnet.critical":
            assert all(c.no_precondition and not c.preconditions for c in exp.claims)
            continue
        cfg = exp.config("smoke")
        results = {run.label: exp.execute(cfg, run, 3, "cpu") for run in exp.runs(cfg)}
        analysis = exp.analyse(cfg, results)
        for claim in exp.claims:
            assert claim.preconditions and not claim.no_precondition, claim.id
            for p in claim.preconditions:
                values = np.asarray(analysis.states[p.quantity].values, dtype=float)
                assert len(values) == cfg.seeds and np.isfinite(values).all() and (values >= 0).all(), claim.id


def test_the_paper_gpu_script_runs_in_pieces_and_brings_back_small_files(tmp_path, paper_gpu):
    """docs/reproduction/scripts/paper_gpu.sh with seed 002's experiments at the smoke scale on the CPU: its pieces
    end with status 3 until both experiments are stored, then 0; the results hold no checkpoint and no file over
    16 MiB."""
    results = tmp_path / "results"
    done = paper_gpu("leaky_resnet.structures", "leaky_resnet.discretisation", calls=30)
    assert done.returncode == 0, done.stdout + done.stderr
    files = [f for f in results.rglob("*") if f.is_file()]
    assert not [f for f in files if f.suffix == ".ckpt"]
    assert max(f.stat().st_size for f in files) <= 16 * 1024 * 1024
    for name in ("leaky_resnet.structures", "leaky_resnet.discretisation"):
        assert any(name in str(f) for f in files), name
