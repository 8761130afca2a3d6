"""Tests of the one-hidden-layer network and its gradient-flow integrator (spec 003 §7 tests 3, 4, 5, 6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from repdyn.data.manifolds import sample_manifold
from repdyn.nn.gradient_flow import hinge_descent_direction, hinge_loss, train_gradient_flow
from repdyn.nn.kernel_flow import kernel_hinge_flow
from repdyn.nn.models.hidden_layer import HiddenLayerModule, HiddenLayerNet, hidden_layer_output, init_hidden_layer
from repdyn.probes.ntk import empirical_ntk
from repdyn.theory.compression import (
    classification_error,
    hidden_layer_ntk,
    kernel_predict,
)


def _setup(n_trials=2, h=40, d=3, p=30, seed=0):
    g = torch.Generator().manual_seed(seed)
    x, y = sample_manifold("stripe", p, d, g, batch=(n_trials,))
    return init_hidden_layer(n_trials, h, d, g), x, y


def test_descent_direction_is_minus_autograd_gradient_of_the_scaled_hinge() -> None:
    net, x, y = _setup()
    f0 = hidden_layer_output(net, x)
    moved = HiddenLayerNet(net.w + 0.3, net.b - 0.2, net.beta * 1.5)
    alpha = 0.7
    f_c, direction = hinge_descent_direction(moved, x, y, f0, alpha)
    params = [t.clone().requires_grad_(True) for t in (moved.w, moved.b, moved.beta)]
    out = hidden_layer_output(HiddenLayerNet(*params), x) - f0
    hinge_loss(out, y, alpha).sum().backward()
    assert torch.allclose(f_c, out.detach())
    for got, p in zip((direction.w, direction.b, direction.beta), params, strict=True):
        assert torch.allclose(got, -p.grad, rtol=1e-10, atol=1e-15)


def test_integrator_workspace_direction_equals_the_closed_form() -> None:
    """The integrator's buffered direction (one (S, p, h) buffer, products with the buffer on the right) gives
    hinge_descent_direction's f̃ and −∇L to rounding, on a state where some points are fitted and others not, and
    with them the margins α y f̃ and the hinge's active set of its f̃ exactly."""
    from repdyn.nn.gradient_flow import _Workspace
    from repdyn.nn.models.hidden_layer import stack_params

    net, x, y = _setup(n_trials=3, h=50, d=4, p=60)
    f0 = hidden_layer_output(net, x)
    moved = HiddenLayerNet(net.w + 0.3, net.b - 0.2, net.beta * 1.5)
    alpha = 20.0
    f_c, direction = hinge_descent_direction(moved, x, y, f0, alpha)
    fitted = (alpha * y * f_c >= 1).float().mean()
    assert 0.1 < float(fitted) < 0.9
    ws = _Workspace(x, y, alpha, 50)
    ws.f0 = f0
    got_f, got, margins, active = ws.direction(stack_params(moved))
    torch.testing.assert_close(got_f, f_c, rtol=1e-12, atol=1e-14)
    assert torch.equal(margins, alpha * y * got_f) and torch.equal(active, margins < 1)
    want = stack_params(direction)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)


def test_closed_form_ntk_equals_the_shared_empirical_ntk_probe() -> None:
    net, x, _ = _setup(h=50, d=4, p=20)
    got = hidden_layer_ntk(net.w[1], net.b[1], net.beta[1], x[1], x[1])
    probe = empirical_ntk(HiddenLayerModule(net, 1).double(), x[1], method="jacobian")
    assert torch.allclose(got, probe, rtol=1e-10, atol=1e-14)


def test_conservation_law_drift_vanishes_with_the_step_threshold() -> None:
    """β² − ‖ω‖² − b² is conserved per neuron by the gradient flow (§3.2.1); Euler drift → 0 with dt."""
    net, x, y = _setup(n_trials=1, h=30, d=3, p=40, seed=1)
    invariant0 = net.beta**2 - net.w.pow(2).sum(-1) - net.b**2
    drift_rates = []
    for max_dgrad in (1e-2, 1e-4):
        res = train_gradient_flow(net, x, y, alpha=1e-3, max_dgrad=max_dgrad, max_steps=150)
        inv = res.net.beta**2 - res.net.w.pow(2).sum(-1) - res.net.b**2
        # Euler: drift per step ∝ dt², so drift per unit time ∝ dt ∝ √max_dgrad
        drift_rates.append(float((inv - invariant0).abs().max()) / float(res.t))
    assert drift_rates[1] < drift_rates[0] / 5


def test_rotation_equivariance() -> None:
    """App. A: rotating inputs and first-layer weights by the same orthogonal matrix leaves F unchanged."""
    net, x, y = _setup(n_trials=1, h=30, d=3, p=30, seed=2)
    g = torch.Generator().manual_seed(9)
    q, _ = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))
    rotated = HiddenLayerNet(net.w @ q.T, net.b, net.beta)
    kwargs = dict(alpha=1e-2, max_dgrad=1e-3, max_steps=200)
    a = train_gradient_flow(net, x, y, **kwargs)
    b = train_gradient_flow(rotated, x @ q.T, y, **kwargs)
    xt = torch.randn(1, 50, 3, generator=g, dtype=torch.float64)
    fa = hidden_layer_output(a.net, xt) - hidden_layer_output(net, xt)
    fb = hidden_layer_output(b.net, xt @ q.T) - hidden_layer_output(rotated, xt @ q.T)
    assert torch.allclose(a.t, b.t, rtol=1e-9)
    assert torch.allclose(fa, fb, rtol=1e-6, atol=1e-9 * float(fa.abs().max()))


def test_large_alpha_network_matches_frozen_initial_kernel() -> None:
    """Spec 003 §7 test 6: for α ≫ 1 the network is its linearisation, i.e. kernel learning with the init NTK."""
    net, x, y = _setup(n_trials=1, h=300, d=3, p=20, seed=3)
    alpha = 1e4
    res = train_gradient_flow(net, x, y, alpha=alpha, max_dgrad=1e-2, max_steps=20000)
    assert bool(res.stopped.all())
    kernel = kernel_hinge_flow(hidden_layer_ntk(net.w, net.b, net.beta, x, x), y)
    assert bool(kernel.converged.all())
    g = torch.Generator().manual_seed(4)
    xt, yt = sample_manifold("stripe", 500, 3, g, batch=(1,))
    f_net = alpha * (hidden_layer_output(res.net, xt) - hidden_layer_output(net, xt))
    f_ker = kernel_predict(hidden_layer_ntk(net.w, net.b, net.beta, xt, x), kernel.coefficients)
    agree = float((torch.sign(f_net) == torch.sign(f_ker)).double().mean())
    assert agree > 0.95
    assert float(classification_error(f_net, yt)) == pytest.approx(float(classification_error(f_ker, yt)), abs=0.05)


def test_t_star_and_amplification_are_recorded() -> None:
    net, x, y = _setup(n_trials=2, h=60, d=3, p=80, seed=5)
    res = train_gradient_flow(net, x, y, alpha=1e-2, max_dgrad=1e-2, stop_fraction=0.3, max_steps=3000)
    assert bool(res.stopped.all())
    assert bool(torch.isfinite(res.t_star).all())
    assert bool((res.t_star <= res.t).all())
    assert bool((res.lambda_max >= res.lambda_star).all())
    trajectory = res.trajectory
    assert trajectory["t"].shape == trajectory["amplification"].shape == (len(trajectory), 2)
    assert trajectory.steps[0] == 0 and trajectory.steps[-1] == trajectory.stopped_at
    assert float(trajectory["amplification"][0].sub(1).abs().max()) < 1.0
    # t* ~ τ log(1/α): of the order of τ = h √(d/2) times a log, far above τ
    assert bool((res.t_star > math.sqrt(1.5) * 60).all())


def test_bad_input() -> None:
    net, x, y = _setup()
    with pytest.raises(ValueError, match="stop_fraction"):
        train_gradient_flow(net, x, y, alpha=1.0, stop_fraction=0.0)


@pytest.mark.parametrize(("stop_at", "sync_every"), [(50, 1), (400, 1), (402, 4)])
def test_an_interrupted_flow_resumes_from_its_checkpoint_bit_identical(tmp_path, stop_at, sync_every) -> None:
    """Killed before or after stopped trials were dropped from the batch (with the host looking every step, or
    between two looks), the integrator resumes from its checkpoint and ends where an uninterrupted run ends, bit for
    bit."""
    from interrupt import Killed, kill_at
    from repdyn.nn.checkpoint import Checkpointer, checkpointing
    from repdyn.nn.progress import reporting

    gen = torch.Generator().manual_seed(1)
    x, y = sample_manifold("cylinder", 150, 3, gen, batch=(4,))
    net0 = init_hidden_layer(4, 20, 3, gen)
    kwargs = {"d_parallel": 2, "max_dgrad": 1e-2, "stop_fraction": 0.15, "max_steps": 800, "trace_neurons": 2,
              "sync_every": sync_every}
    reference = train_gradient_flow(net0, x, y, 1e-4, **kwargs)
    path = tmp_path / "run.ckpt"
    with checkpointing(Checkpointer(path, every=0.0)), reporting(kill_at(stop_at)), pytest.raises(Killed):
        train_gradient_flow(net0, x, y, 1e-4, **kwargs)
    seen = []
    with checkpointing(Checkpointer(path, every=0.0)), reporting(lambda step, total, loss=None: seen.append(step)):
        resumed = train_gradient_flow(net0, x, y, 1e-4, **kwargs)
    assert seen[0] == stop_at and resumed.trajectory.stopped_at == reference.trajectory.stopped_at
    for key in ("t", "t_star", "lambda_star", "lambda_max", "stopped"):
        assert torch.equal(getattr(resumed, key).nan_to_num(-1), getattr(reference, key).nan_to_num(-1)), key
    assert torch.equal(resumed.net.w, reference.net.w) and torch.equal(resumed.at_t_star.w, reference.at_t_star.w)
    assert np.array_equal(resumed.trajectory.steps, reference.trajectory.steps)
    for key in reference.trajectory:
        assert torch.equal(resumed.trajectory[key], reference.trajectory[key]), key
