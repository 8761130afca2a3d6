"""Seed-001 topic tests that assert numbers: the by-construction properties of the δ = ±∞ protocol (frozen knots,
radial paths, the same initial function under rescaling), the exact claims, determinism, bad configs rejected.
The smoke runs with their controls are the contract test's (tests/experiments/test_contract.py)."""

from __future__ import annotations

import numpy as np
import pytest

from repdyn.data.univariate import univariate_samples
from repdyn.experiments.shallow_relu import EXPERIMENTS
from repdyn.experiments.shallow_relu.common import paired_base
from repdyn.framework.config import ConfigError, apply_overrides
from repdyn.nn.full_batch_gd import train_full_batch_gd
from repdyn.nn.models.shallow_relu import ShallowReLUBatch, pytorch_default_init, rescale
from repdyn.theory import shallow_relu as sr


def _experiment(name: str):
    return next(e for e in EXPERIMENTS if e.name == f"shallow_relu.{name}")


def _run(exp, seed: int = 5):
    cfg = exp.config("smoke")
    return cfg, {r.label: exp.execute(cfg, r, seed + j, "cpu") for j, r in enumerate(exp.runs(cfg))}


def test_kernel_regime_freezes_knots_and_moves_neurons_radially():
    """δ = −∞ (train only c): knots b/a never move and the canonical angle θ_i is constant (Fig. 6, top row)."""
    x, y = univariate_samples("SQ10")
    a, b, c = paired_base(40, np.random.default_rng(0), 1.0)
    batch = ShallowReLUBatch.stack([(a, b, c)], [np.sqrt(40)], train_ab=False)
    res = train_full_batch_gd(batch, x, y, max_steps=300, lr_fraction=0.5, tol=0.0, track=np.arange(10),
                              track_every=10, max_move=0.01)
    a1, b1, c1 = (p[0] for p in res.params)
    assert np.nanmax(np.abs(sr.knots(a1, b1) - sr.knots(a, b))) == 0.0
    assert np.abs(c1 - c).max() > 1e-3
    traj = res.tracked["neurons"][:, 0]
    _, theta = sr.to_canonical(traj[..., 0], traj[..., 1], traj[..., 2], 1.0)
    assert np.abs(theta - theta[:1]).max() == 0.0


def test_rescaling_keeps_the_initial_function():
    """(a, b, c) → (k a, k b, c/k) leaves f_0 unchanged (Fig. 7) and sets δ_i(k) = c²/k² − k²(a² + b²)."""
    grid = np.linspace(-1, 1, 101)
    base = pytorch_default_init(300, np.random.default_rng(1), "paper")
    f0 = sr.network(grid, *base, np.sqrt(300))
    for k in (0.1, 10.0):
        a, b, c = rescale(base, k)
        np.testing.assert_allclose(sr.network(grid, a, b, c, np.sqrt(300)), f0, rtol=0, atol=1e-13)
        np.testing.assert_allclose(sr.layer_imbalance(a, b, c), base[2]**2 / k**2 - k**2 * (base[0]**2 + base[1]**2))


def test_step_cap_bounds_the_relative_neuron_move():
    x, y = univariate_samples("SIN12")
    a, b, c = paired_base(40, np.random.default_rng(2), 1.0)
    batch = ShallowReLUBatch.stack([(a, b, c)], [np.sqrt(40)])
    train_full_batch_gd(batch, x, y, max_steps=1, lr_fraction=1.0, tol=0.0, max_move=0.01)
    a1, b1, c1 = (p[0] for p in batch.params())
    move = np.sqrt((a1 - a)**2 + (b1 - b)**2 + (c1 - c)**2) / np.sqrt(a**2 + b**2 + c**2)
    assert np.sort(move)[int(np.ceil(0.9 * move.size)) - 1] <= 0.01 * (1 + 1e-9)  # the 90th-percentile neuron


@pytest.mark.parametrize("name", ["kernel_terms", "kernel_spline"])
def test_exact_claims_hold_at_smoke_scale(name):
    exp = _experiment(name)
    cfg, results = _run(exp)
    analysis = exp.analyse(cfg, results)
    for spec in exp.claims:
        if spec.exact:
            assert all(spec.expectation.check(v) for v in analysis.measured[spec.id].values), spec.id


def test_runs_are_pure_functions_of_seed():
    _, first = _run(_experiment("trajectories"))
    _, second = _run(_experiment("trajectories"))
    for label, result in first.items():
        for key, value in result.items():
            np.testing.assert_array_equal(value, second[label][key])


def test_bad_config_is_rejected():
    exp = _experiment("regime_crossover")
    with pytest.raises(ConfigError, match="dataset"):
        apply_overrides(exp.config("smoke"), {"dataset": "SQ11"})
    with pytest.raises(ConfigError, match="even"):
        exp.prepare(apply_overrides(exp.config("smoke"), {"width": "41"}))


def test_local_dynamics_helpers_match_autograd():
    """The canonical Jacobian of Eq. (4) and the radial-only Eq. (13) (the prop1 control) against torch autograd:
    ρ̇ = −m J Jᵀ ρ with J over (r, θ) (Prop. 1) and over r alone (the control's Σ_k = ∫ d dᵀ)."""
    import torch

    from repdyn.experiments.shallow_relu import local_dynamics as ld

    rng = np.random.default_rng(7)
    x, y = univariate_samples("SIN12")
    r, theta = rng.normal(size=30), rng.uniform(0, 2 * np.pi, 30)
    xt = torch.tensor(x)

    def f(r_, t_):
        return (r_ * torch.relu(xt[:, None] * torch.cos(t_) + torch.sin(t_))).sum(-1) / r_.numel()

    jr, jt = (j.numpy() for j in torch.func.jacrev(f, argnums=(0, 1))(torch.tensor(r), torch.tensor(theta)))
    np.testing.assert_allclose(ld._canonical_jacobian(x, r, theta), np.hstack([jr, jt]), rtol=1e-12, atol=1e-15)
    rho = sr.canonical_network(x, r, theta) - y
    radial = sr.residual_velocity(x, rho, r, theta, angular=False)
    np.testing.assert_allclose(radial, -30 * jr @ jr.T @ rho, rtol=1e-12, atol=1e-14)
    full = sr.residual_velocity(x, rho, r, theta)
    assert np.linalg.norm(full - radial) > 0.1 * np.linalg.norm(full)


def test_local_dynamics_gd_window_tracks_prop4_and_halves_with_eta():
    """Prop. 4 on a network: the direction gap 1 − cos(displacement, −P∇L̃) of a GD window at δ = 0 is O(ηT): it
    falls about 4× when η is halved at the same number of steps (the chord of a curve bends by O(T))."""
    from repdyn.experiments.shallow_relu import local_dynamics as ld

    x, y = univariate_samples("SIN12")
    base = paired_base(40, np.random.default_rng(3), np.sqrt(40))
    gaps = []
    for lr in (0.02, 0.01):
        cfg = ld.LocalDynamicsConfig(width=40, steps=10, lr_fraction=lr)
        gaps.append(1 - ld._local_step(x, y, base, cfg, 40.0)["agreement"])
    assert gaps[0] < 0.01 and 2.5 < gaps[0] / gaps[1] < 6


def test_local_dynamics_rejects_odd_width():
    exp = _experiment("local_dynamics")
    with pytest.raises(ConfigError):
        exp.prepare(apply_overrides(exp.config("smoke"), {"width": "31"}))


def test_crossover_trains_every_level_alike_and_reads_the_adaptive_end_on_converge_runs():
    """Every level, δ = ±∞ included, is GD-trained for max_steps (the δ = −∞ level is not replaced by its exact
    limit, which is reported beside it); the converge runs train only δ = +∞, for converge_steps, and
    adaptive_end_linear reads them; bad grids are rejected."""
    exp = _experiment("regime_crossover")
    cfg = apply_overrides(exp.config("smoke"), {"seeds": "2", "ensemble": "2", "twin_seeds": "0",
                                                "converge_steps": "50", "max_steps": "40"})
    assert [r.label for r in exp.runs(cfg)] == ["seeds=0", "seeds=0:converge"]
    results = {r.label: exp.execute(cfg, r, 11, "cpu") for r in exp.runs(cfg)}
    sweep, converge = results["seeds=0"], results["seeds=0:converge"]
    assert sweep["lambdas"].tolist() == [-np.inf, -1e4, 0.0, 1e4, np.inf]
    assert converge["lambdas"].tolist() == [np.inf]
    x, _ = univariate_samples(cfg.dataset)
    a0, b0, _ = paired_base(cfg.width, np.random.default_rng([11, 0]), cfg.c_scale)
    np.testing.assert_array_equal(sweep["a"][0, 0], a0)  # δ = −∞ trains c only: (a, b) unchanged
    assert sweep["D"][0, 0] != pytest.approx(sweep["limit_D"][0], abs=1e-3)  # GD at 40 steps, not the limit
    np.testing.assert_array_equal(sweep["q"].shape, (2, 5))
    assert np.all(sweep["q"][:, 1] < 0) and np.all(sweep["q"][:, 3] > 0)
    analysis = exp.analyse(cfg, results)
    fits = converge["fit"][:, 0] <= 0.1  # judged only where the δ = +∞ network fits (every seed where none does)
    fits = fits if fits.any() else np.ones_like(fits)
    np.testing.assert_allclose(analysis.measured["adaptive_end_linear"].values, converge["D"][fits, 0])
    np.testing.assert_allclose(analysis.states["adaptive_end_fit"].values, converge["fit"][fits, 0])
    assert analysis.states["adaptive_fitted_seeds"].values == (float(np.sum(converge["fit"][:, 0] <= 0.1)),)
    np.testing.assert_allclose(analysis.states["regime_span"].values,
                               np.minimum(-sweep["q"][:, 1], sweep["q"][:, 3]))
    special = ("−∞ (exact limit)", "+∞ (converge)")
    assert {row["steps"] for row in analysis.metrics if row["lambda"] not in special} == {40}
    assert [r.label for r in exp.runs(exp.config("full"))] == [  # η/2 twins and converge runs per ensemble
        "seeds=0", "seeds=1", "seeds=0:half", "seeds=1:half", "seeds=0:converge", "seeds=1:converge"]
    with pytest.raises(ConfigError, match="twin_seeds"):
        exp.prepare(apply_overrides(exp.config("smoke"), {"twin_seeds": "11"}))
    for bad in ("-100,0,0", "-100,inf"):
        with pytest.raises(ConfigError, match="ratios"):
            exp.prepare(apply_overrides(exp.config("smoke"), {"ratios": bad}))
