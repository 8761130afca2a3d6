"""Batched shallow ReLU networks, initialisation families I1-I6 and the GD protocol (spec 001 §2.9, §3.3),
with the dynamical checks T3, T5, T14, T15, T16 of spec 001 §2.10."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from repdyn.nn import Diverged
from repdyn.nn import full_batch_gd as gd
from repdyn.nn.models import shallow_relu as nsr
from repdyn.theory import shallow_relu as sr

X = np.linspace(-1, 1, 6)
Y = np.array([1.0, 1.0, -1.0, -1.0, 1.0, 1.0])


def _batch(nets, alpha, **flags):
    return nsr.ShallowReLUBatch.stack(nets, alpha, **flags)


def test_initial_families_preserve_the_function():
    """I3 gives f_0 ≡ 0; I4, I5 and I6 keep f_0 and set δ as documented; I1 has PyTorch's bounds (E12)."""
    rng = np.random.default_rng(0)
    grid = np.linspace(-2, 2, 201)
    paired = nsr.uniform_init(40, rng, 0.3)
    assert np.max(np.abs(sr.network(grid, *paired, 1.0))) < 1e-15
    base = nsr.uniform_init(40, rng, 0.3, paired=False)
    f0 = sr.network(grid, *base, 1.0)
    for delta in (-5.0, 0.0, 2.0):
        p = nsr.with_imbalance(base, delta)
        np.testing.assert_allclose(sr.network(grid, *p, 1.0), f0, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(sr.layer_imbalance(*p), delta, atol=1e-12)
    p = nsr.adaptive_limit_init(base, 2.0)
    np.testing.assert_allclose(sr.network(grid, *p, 1.0), f0, rtol=1e-12, atol=1e-14)
    assert np.allclose(np.abs(p[2]), 2.0)
    p = nsr.rescale(base, 0.1)
    np.testing.assert_allclose(sr.network(grid, *p, 1.0), f0, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(sr.layer_imbalance(*p), base[2] ** 2 / 0.01 - 0.01 * (base[0] ** 2 + base[1] ** 2))
    a, b, c = nsr.pytorch_default_init(400, rng)
    assert np.abs(a).max() <= 1 and np.abs(b).max() <= 1 and 0.9 / 20 < np.abs(c).max() <= 1 / 20
    assert np.abs(nsr.pytorch_default_init(400, rng, "paper")[2]).max() <= 1 / 400
    with pytest.raises(ValueError, match="even"):
        nsr.uniform_init(5, rng, 1.0)
    with pytest.raises(ValueError, match="c_bound"):
        nsr.pytorch_default_init(5, rng, "other")


def test_padded_batch_trains_like_separate_networks():
    """Padding neurons a = b = c = 0 are inert: a batch of widths 10 and 30 trains exactly like each alone."""
    rng = np.random.default_rng(1)
    nets = [nsr.uniform_init(10, rng, 0.5), nsr.uniform_init(30, rng, 0.5)]
    together = gd.train_full_batch_gd(_batch(nets, [np.sqrt(10), np.sqrt(30)]), X, Y, max_steps=300)
    for i, p in enumerate(nets):
        alone = gd.train_full_batch_gd(_batch([p], [np.sqrt(p[0].size)]), X, Y, max_steps=300)
        for k in range(3):
            np.testing.assert_allclose(together.params[k][i, : p[0].size], alone.params[k][0], rtol=1e-12,
                                       atol=1e-14)
            assert np.all(together.params[k][i, p[0].size:] == 0)


def test_delta_change_per_step_is_exactly_second_order():
    """T3: δ_i^{k+1} − δ_i^k = η²((∂_c L)² − (∂_a L)² − (∂_b L)²), and the drift at fixed time T = Nη is ∝ η."""
    rng = np.random.default_rng(2)
    a, b, c = nsr.uniform_init(20, rng, 1.0, paired=False)
    alpha, lr = np.sqrt(20), 0.05
    _, ga, gb, gc = sr.loss_gradients(X, Y, a, b, c, alpha)
    after = sr.layer_imbalance(a - lr * ga, b - lr * gb, c - lr * gc)
    np.testing.assert_allclose(after - sr.layer_imbalance(a, b, c), lr**2 * (gc**2 - ga**2 - gb**2),
                               rtol=1e-9, atol=1e-16)
    drifts = []
    for n_steps in (200, 400, 800):
        p, step = (a.copy(), b.copy(), c.copy()), 4.0 / n_steps
        for _ in range(n_steps):
            grads = sr.loss_gradients(X, Y, *p, alpha)[1:]
            p = tuple(v - step * g for v, g in zip(p, grads))
        drifts.append(np.max(np.abs(sr.layer_imbalance(*p) - sr.layer_imbalance(a, b, c))))
    ratios = np.array(drifts[:-1]) / np.array(drifts[1:])
    np.testing.assert_allclose(ratios, 2.0, rtol=0.1)


def test_canonical_flow_with_metric_tracks_full_gd():
    """T5: Euler steps of ẇ_i = −P_i ∇L̃ in (r, θ) (Prop. 4), mapped back with the conserved δ_i, track GD on
    (a, b, c) with the same step; the gap after a fixed time is O(η)."""
    rng = np.random.default_rng(3)
    a0, b0, c0 = nsr.uniform_init(16, rng, 1.0, paired=False)
    m, alpha = 16, 4.0
    kappa = m / alpha
    delta = sr.layer_imbalance(a0, b0, c0)
    gaps = []
    for n_steps in (100, 200, 400):
        lr = 0.25 / n_steps
        p = (a0, b0, c0)
        r, theta = sr.to_canonical(a0, b0, c0, kappa)
        for _ in range(n_steps):
            p = tuple(v - lr * g for v, g in zip(p, sr.loss_gradients(X, Y, *p, alpha)[1:]))
            rho = sr.canonical_network(X, r, theta) - Y
            grad_r, grad_theta = sr.canonical_gradient(X, rho, r, theta)
            p_rr, p_tt = sr.canonical_metric(*sr.from_canonical(r, theta, delta, kappa), kappa)
            r, theta = r - lr * p_rr * grad_r, theta - lr * p_tt * grad_theta
        gaps.append(np.max(np.abs(sr.canonical_network(X, r, theta) - sr.network(X, *p, alpha))))
    assert gaps[-1] < 1e-5
    np.testing.assert_allclose(np.array(gaps[:-1]) / np.array(gaps[1:]), 2.0, rtol=0.05)


def test_train_only_c_freezes_knots_and_moves_radially():
    """T14: with a, b frozen (δ = −∞) knots and angles do not change at all and uv paths are radial."""
    rng = np.random.default_rng(4)
    p = nsr.uniform_init(40, rng, 0.2)
    res = gd.train_full_batch_gd(_batch([p], [np.sqrt(40)], train_ab=False), X, Y, max_steps=500,
                                  track=np.arange(40), track_every=50)
    a, b, c = res.params
    assert np.array_equal(a[0], p[0]) and np.array_equal(b[0], p[1])
    assert np.array_equal(sr.knots(a[0], b[0]), sr.knots(*p[:2]))
    traj = res.tracked["neurons"][:, 0]
    _, theta = sr.to_canonical(traj[..., 0], traj[..., 1], traj[..., 2], 1.0)
    assert np.all(theta == theta[0])
    assert res.trajectory["loss"][-1, 0] < res.trajectory["loss"][0, 0]


def test_positive_delta_keeps_sign_of_c():
    """T15: neurons with δ_i > 0 never change sign(c_i) under GD with the λ_max step rule."""
    rng = np.random.default_rng(5)
    p = nsr.with_imbalance(nsr.uniform_init(40, rng, 0.5), 0.05)
    res = gd.train_full_batch_gd(_batch([p], [np.sqrt(40)]), X, Y, max_steps=2000, track=np.arange(40),
                                  track_every=10)
    signs = np.sign(res.tracked["neurons"][:, 0, :, 2])
    assert np.all(signs == np.sign(p[2]))


def test_lazy_knot_motion_scales_as_inverse_sqrt_width():
    """T16: α = √m with O(1) weights, all layers trained for a fixed short physical time: knot directions θ_i
    (the |r̂|-weighted mean |Δθ_i|) move like m^(-1/2). The angle is used rather than the knot e_i = −tan θ_i,
    whose sensitivity 1/|a_i| adds a log m factor from nearly vertical neurons at these widths."""
    widths = (64, 256, 1024, 4096)
    x, y = X, np.sin(np.pi * X)
    moved = []
    for i, m in enumerate(widths):
        p = nsr.uniform_init(m, np.random.default_rng(6 + i), 1.0)
        res = gd.train_full_batch_gd(_batch([p], [np.sqrt(m)]), x, y, max_steps=20, lr_every=10**6)
        r0, theta0 = sr.to_canonical(*p, 1.0)
        _, theta1 = sr.to_canonical(*(v[0] for v in res.params), 1.0)
        turn = np.abs(np.angle(np.exp(1j * (theta1 - theta0))))
        moved.append(np.sum(np.abs(r0) * turn) / np.sum(np.abs(r0)))
    slope = np.polyfit(np.log(widths), np.log(moved), 1)[0]
    assert -0.65 <= slope <= -0.35


def test_divergence_and_bad_input_are_reported():
    """A NaN loss raises Diverged at the step it appears; bad settings raise ValueError."""
    rng = np.random.default_rng(7)
    batch = _batch([nsr.uniform_init(10, rng, 0.5)], [1.0])
    with pytest.raises(Diverged):
        gd.train_full_batch_gd(batch, X, np.full(6, np.nan), max_steps=5)
    with pytest.raises(ValueError, match="lr_fraction"):
        gd.train_full_batch_gd(batch, X, Y, max_steps=5, lr_fraction=3.0)
    with pytest.raises(ValueError, match="alpha"):
        nsr.ShallowReLUBatch.stack([nsr.uniform_init(10, rng, 0.5)], [1.0, 2.0])


def test_stops_when_converged():
    """A network stops at L ≤ tol · max(L_0, ½‖y‖²) and its parameters stop changing."""
    rng = np.random.default_rng(8)
    y = np.sin(np.pi * X)
    res = gd.train_full_batch_gd(_batch([nsr.uniform_init(20, rng, 1.0)], [np.sqrt(20)]), X, y,
                                  max_steps=3000, tol=1e-3, lr_fraction=1.0)
    assert res.converged[0] and res.steps[0] < 3000 and res.trajectory.steps[-1] == res.steps[0]
    assert res.trajectory.stopped_at == res.steps[0] and res.tracked.stopped_at == res.steps[0]
    assert res.trajectory["loss"][-1, 0] <= 1e-3 * 0.5 * np.sum(y**2)


def _gd_cases(device: str = "cpu") -> list[gd.GDResult]:
    """Tracking, snapshots, halving, the step cap, per-network stopping and a stop between recorded steps."""
    rng = np.random.default_rng(3)
    nets = [nsr.uniform_init(20, rng, 1.0), nsr.uniform_init(8, rng, 0.5)]

    def batch(n: int = 2) -> nsr.ShallowReLUBatch:
        return nsr.ShallowReLUBatch.stack(nets[:n], [np.sqrt(20), np.sqrt(8)][:n], [True, True][:n],
                                          [True, False][:n], device)

    sine = np.sin(np.pi * X)
    return [gd.train_full_batch_gd(batch(), X, sine, max_steps=3000, tol=1e-3, lr_fraction=1.0, record_every=7,
                                    track=np.array([0, 3]), track_every=5, snapshot_steps=(0, 10, 2999)),
            gd.train_full_batch_gd(batch(), X, Y, max_steps=400, tol=0.0, lr_fraction=1.9, record_every=50,
                                    max_move=0.05, track=np.array([1]), snapshot_steps=(100,)),
            gd.train_full_batch_gd(batch(1), X, sine, max_steps=3000, tol=1e-3, lr_fraction=1.0, record_every=7,
                                    track=np.array([0, 3]), track_every=5, snapshot_steps=(0, 10, 700))]


def test_device_resident_loop_agrees_with_the_host_copying_loop():
    """The loop keeps its records on the device and synchronises only at recorded steps. On this
    machine its results were bit-identical to the earlier loop that copied to the host every step; the numbers
    below are that loop's, compared to 1e-9 so that another BLAS build passes too."""
    earlier = [([613, 3000], [0.0012490705462452159, 0.45202582016827175], 3000, 96.06980336669525,
                16653.13090560556),
               ([400, 400], [0.6435325582264254, 0.6666666666666747], 400, 72.78172308256327, 97.66523198562702),
               ([613], [0.0012490705462452159], 613, 23.000831370271406, 620.3307073841606)]
    results = _gd_cases()
    for r, (steps, final_loss, last_recorded, first_layer, trajectory) in zip(results, earlier, strict=True):
        assert r.steps.tolist() == steps and r.trajectory.steps[-1] == last_recorded
        np.testing.assert_allclose(r.trajectory["loss"][-1], final_loss, rtol=1e-9)
        np.testing.assert_allclose([np.abs(r.params[0]).sum(), np.abs(r.tracked["neurons"]).sum()],
                                   [first_layer, trajectory], rtol=1e-9)
    stopped = results[2]  # converged at step 613, between recorded steps: nothing past it is kept
    assert stopped.tracked.steps[-1] == 610 and stopped.snapshots.steps.tolist() == [0, 10]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_loop_runs_on_cuda_like_cpu():
    """The same loop on torch.device("cuda") agrees with CPU (float64; summation order may differ)."""
    for gpu, cpu in zip(_gd_cases("cuda"), _gd_cases()):
        assert gpu.trajectory.steps.tolist() == cpu.trajectory.steps.tolist() and np.array_equal(gpu.steps, cpu.steps)
        for g, c in zip(gpu.params, cpu.params):
            np.testing.assert_allclose(g, c, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(gpu.trajectory["loss"], cpu.trajectory["loss"], rtol=1e-7, atol=1e-12)
        assert gpu.snapshots.steps.tolist() == cpu.snapshots.steps.tolist()


@pytest.mark.parametrize("stop_at", [0, 137, 300])
def test_an_interrupted_gd_resumes_from_its_checkpoint_bit_identical(tmp_path, stop_at):
    """Killed at a step (or after the loop finished: 300 = max_steps reports last), the trainer resumes from its
    checkpoint and ends where an uninterrupted run ends, bit for bit, every record included."""
    from interrupt import Killed, kill_at
    from repdyn.nn.checkpoint import Checkpointer, checkpointing
    from repdyn.nn.progress import reporting

    x = np.linspace(-1, 1, 12)
    y = np.sin(2 * np.pi * x)
    rng = np.random.default_rng(4)
    nets = [nsr.uniform_init(20, rng, 0.2) for _ in range(3)]
    kwargs = {"max_steps": 300, "lr_fraction": 0.5, "tol": 0.0, "record_every": 50, "lr_every": 40,
              "track": np.arange(3), "track_every": 30, "snapshot_steps": (90,), "max_move": 0.01}
    reference = gd.train_full_batch_gd(_batch(nets, [np.sqrt(20)] * 3, train_ab=[True, False, True]), x, y, **kwargs)
    path = tmp_path / "run.ckpt"
    with checkpointing(Checkpointer(path, every=0.0)), reporting(kill_at(stop_at)), pytest.raises(Killed):
        gd.train_full_batch_gd(_batch(nets, [np.sqrt(20)] * 3, train_ab=[True, False, True]), x, y, **kwargs)
    seen = []
    with checkpointing(Checkpointer(path, every=0.0)), reporting(lambda step, total, loss=None: seen.append(step)):
        resumed = gd.train_full_batch_gd(_batch(nets, [np.sqrt(20)] * 3, train_ab=[True, False, True]), x, y, **kwargs)
    assert seen[0] == stop_at
    for field in ("steps", "time", "converged", "lr_fraction", "ntk_initial", "ntk_final", "delta_drift"):
        np.testing.assert_array_equal(getattr(resumed, field), getattr(reference, field), err_msg=field)
    for part in ("trajectory", "tracked", "snapshots"):
        got, want = getattr(resumed, part), getattr(reference, part)
        assert got.stopped_at == want.stopped_at
        np.testing.assert_array_equal(got.steps, want.steps, err_msg=part)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{part} {name}")
    for got, want in zip(resumed.params, reference.params):
        np.testing.assert_array_equal(got, want)
    assert resumed.snapshots.steps.tolist() == [90]
    again, batch = [], _batch(nets, [np.sqrt(20)] * 3, train_ab=[True, False, True])
    with checkpointing(Checkpointer(path, every=0.0)), reporting(lambda step, total, loss=None: again.append(step)):
        finished = gd.train_full_batch_gd(batch, x, y, **kwargs)  # a finished loop returns its saved result
    assert again == [] and np.array_equal(finished.trajectory["loss"], reference.trajectory["loss"])
    np.testing.assert_array_equal(batch.params()[0], reference.params[0])
