"""Topic-specific tests of the seed-003 experiments: determinism of execute, bad config rejected, the integrator's
stall on gate-flip dgrad spikes and its cure (the smoke runs with controls are in test_contract.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from memory_cap import outcome_under_cap
from repdyn.data.manifolds import sample_manifold
from repdyn.experiments.compression import EXPERIMENTS
from repdyn.framework.config import ConfigError, apply_overrides
from repdyn.nn.gradient_flow import train_gradient_flow
from repdyn.nn.models.hidden_layer import init_hidden_layer


def test_execute_is_a_pure_function_of_its_arguments() -> None:
    exp = next(e for e in EXPERIMENTS if e.name == "compression.alpha_scan")
    cfg = exp.config("smoke")
    run = exp.runs(cfg)[-1]
    a, b = exp.execute(cfg, run, 7, "cpu"), exp.execute(cfg, run, 7, "cpu")
    for key in a:
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))


def test_alpha_scan_shares_data_and_init_across_alpha() -> None:
    exp = next(e for e in EXPERIMENTS if e.name == "compression.alpha_scan")
    groups = {run.seed_group for run in exp.runs(exp.config("quick"))}
    assert groups == {"realisations"}


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


@pytest.mark.slow
def test_plain_step_rule_stalls_and_the_small_step_rule_does_not() -> None:
    """With the plain ÷10/×1.1 rule, gate-flip dgrad spikes ratchet dt down and time stops (here at
    t ≈ 3044 with a third of the points fitted); skipping the dgrad test below τ/160 keeps time moving."""
    gen = torch.Generator().manual_seed(0)
    x, y = sample_manifold("stripe", 128, 5, gen, batch=(1,))
    net0 = init_hidden_layer(1, 100, 5, gen)
    kwargs = {"max_dgrad": 1e-2, "stop_fraction": 1.0, "max_steps": 3000}
    plain = train_gradient_flow(net0, x, y, 1e-6, dgrad_free_dt=0.0, **kwargs)
    fixed = train_gradient_flow(net0, x, y, 1e-6, **kwargs)
    t_plain = plain.trajectory["t"][:, 0]
    assert float(t_plain[-1] - t_plain[-500]) < 1e-6, "the plain rule no longer stalls on this case"
    assert float(fixed.t[0]) > 2 * float(plain.t[0])
    assert float(fixed.trajectory["fitted"][-1, 0]) > 1.5 * float(plain.trajectory["fitted"][-1, 0])
    assert torch.allclose(fixed.t_star, plain.t_star) and torch.allclose(fixed.lambda_star, plain.lambda_star)


def _stripe_flow(device: str = "cpu", dtype=torch.float64, **kwargs):
    gen = torch.Generator().manual_seed(0)
    x, y = sample_manifold("stripe", 200, 5, gen, batch=(3,))
    net0 = init_hidden_layer(3, 30, 5, gen)
    net0 = type(net0)(*(v.to(device, dtype) for v in (net0.w, net0.b, net0.beta)))
    return train_gradient_flow(net0, x.to(device, dtype), y.to(device), 1e-6, max_dgrad=1e-2, max_steps=1500,
                               record_every=3, **kwargs)


def test_buffered_integrator_keeps_the_numbers_of_the_allocating_one() -> None:
    """The integrator writes its (S, p, h) tensors into preallocated buffers and keeps the step control
    on the device. t* and Λ* of this case are those of the former allocating loop (commit 9cfa83b) to rounding."""
    res = _stripe_flow(grow_on_jumps=False)
    np.testing.assert_allclose(res.t_star.numpy(), [930.7799318201015, 1008.8730851111688, 743.8819713329389],
                               rtol=1e-9)
    np.testing.assert_allclose(res.lambda_star.numpy(), [4.554182263184992, 15.864588798804705, 14.016383793068508],
                               rtol=1e-9)
    assert res.trajectory["t"].shape == (501, 3)
    grown = _stripe_flow()  # dt also grows after jumps: further in time, t* and Λ* within 2 %
    assert bool((grown.t > res.t).all()) and float(grown.t.sum()) > 1.3 * float(res.t.sum())
    torch.testing.assert_close(grown.t_star, res.t_star, rtol=2e-2, atol=0)
    torch.testing.assert_close(grown.lambda_star, res.lambda_star, rtol=2e-2, atol=0)


def test_sync_every_changes_only_the_step_count() -> None:
    """Looking at the device only every K steps (the GPU path) gives the same trajectories on the CPU; so do the
    selects that looking at every step skips (every trial accepts, none reaches t*, all run)."""
    a, b = _stripe_flow(), _stripe_flow(sync_every=64)
    for got, want in ((a.t, b.t), (a.t_star, b.t_star), (a.net.w, b.net.w), (a.net.beta, b.net.beta),
                      (a.lambda_max, b.lambda_max), (a.lambda_star, b.lambda_star), (a.at_t_star.w, b.at_t_star.w)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_integrator_on_cuda_matches_the_cpu() -> None:
    cpu, gpu = _stripe_flow(), _stripe_flow(device="cuda")
    torch.testing.assert_close(gpu.t_star.cpu(), cpu.t_star, rtol=1e-6, atol=0)
    torch.testing.assert_close(gpu.lambda_star.cpu(), cpu.lambda_star, rtol=1e-6, atol=0)


def test_trial_groups_change_no_number() -> None:
    """The memory bound integrates trials in groups; each trial's flow is independent of the others."""
    from repdyn.experiments.compression.common import generator, train
    args = ("stripe", 5, 64, 3, 20, 1e-2, 1e-2, 1.0, 200)
    _, _, _, whole = train(*args, generator(3), "cpu", memory_gb=16.0)
    _, _, _, grouped = train(*args, generator(3), "cpu", memory_gb=1e-9)
    for key in ("t", "t_star", "lambda_star", "lambda_max"):
        torch.testing.assert_close(getattr(whole, key), getattr(grouped, key), equal_nan=True)
    torch.testing.assert_close(whole.net.w, grouped.net.w)


def test_chunked_kernels_change_no_number() -> None:
    from repdyn.experiments.compression.common import arccos_svm_error, network_output, trained_ntk_svm_error
    gen = torch.Generator().manual_seed(4)
    x, y = sample_manifold("stripe", 60, 5, gen, batch=(2,))
    xt, yt = sample_manifold("stripe", 300, 5, gen, batch=(2,))
    net = init_hidden_layer(2, 25, 5, gen)
    for tiny, big in ((1e-7, 16.0),):
        np.testing.assert_array_equal(arccos_svm_error(x, y, xt, yt, tiny), arccos_svm_error(x, y, xt, yt, big))
        np.testing.assert_array_equal(trained_ntk_svm_error(net, x, y, xt, yt, tiny),
                                      trained_ntk_svm_error(net, x, y, xt, yt, big))
        torch.testing.assert_close(network_output(net, xt, tiny), network_output(net, xt, big))


OUTPUTS_CAP_SETUP = """
import torch
from repdyn.experiments.compression.common import network_output
from repdyn.nn.models.hidden_layer import init_hidden_layer
"""
OUTPUTS_CAP_CALL = """
g = torch.Generator().manual_seed(0)
net = init_hidden_layer(1, 4000, 5, g)
x = torch.randn(1, 20000, 5, generator=g, dtype=torch.float64)  # one (20000, 4000) float64 tensor = 0.6 GiB
network_output(net, x, float(sys.argv[1]))
"""


@pytest.mark.slow
def test_memory_setting_bounds_the_test_outputs_under_a_memory_cap(tmp_path) -> None:
    """Under an address-space cap of 0.5 GiB above the interpreter, the feature test outputs fit with memory_gb =
    0.1 and do not without a bound (16 GiB): the setting is what bounds them."""
    for memory_gb, expected in (("0.1", "fits"), ("16.0", "out of memory")):
        assert outcome_under_cap(tmp_path, OUTPUTS_CAP_SETUP, OUTPUTS_CAP_CALL, 2**29, memory_gb) == expected


def test_stopped_trials_dropped_from_the_batch_keep_their_results() -> None:
    """Compaction: once half the trials have stopped only the running ones are integrated; every trial's result
    and its records (its final state repeated after it stopped) equal those of the trial integrated alone."""
    gen = torch.Generator().manual_seed(1)
    x, y = sample_manifold("cylinder", 150, 3, gen, batch=(4,))
    net0 = init_hidden_layer(4, 20, 3, gen)
    kwargs = {"d_parallel": 2, "max_dgrad": 1e-2, "stop_fraction": 0.15, "max_steps": 800, "trace_neurons": 2}
    batch = train_gradient_flow(net0, x, y, 1e-4, **kwargs)
    assert len(set(batch.trajectory["t"].argmax(dim=0).tolist())) > 1, "the trials should stop at different steps"
    for s in range(4):
        one = type(net0)(net0.w[s:s + 1], net0.b[s:s + 1], net0.beta[s:s + 1])
        alone = train_gradient_flow(one, x[s:s + 1], y[s:s + 1], 1e-4, **kwargs)
        for key in ("t", "t_star", "lambda_star", "lambda_max", "stopped"):
            torch.testing.assert_close(getattr(batch, key)[s:s + 1], getattr(alone, key), equal_nan=True)
        torch.testing.assert_close(batch.net.w[s:s + 1], alone.net.w)
        n = len(alone.trajectory)
        for key in batch.trajectory:
            value = batch.trajectory[key]
            torch.testing.assert_close(value[:n, s:s + 1], alone.trajectory[key])
            assert bool((value[n - 1:, s] == value[n - 1, s]).all())


def test_learning_curves_need_a_lazy_partner_for_every_network_realisation() -> None:
    exp = next(e for e in EXPERIMENTS if e.name == "compression.learning_curves")
    assert exp.prepare(exp.config("quick")) is None
    with pytest.raises(ConfigError, match="lazy_seeds"):
        exp.prepare(apply_overrides(exp.config("quick"), {"lazy_seeds": "2"}))


def test_lazy_only_realisations_are_nested_and_share_their_test_set() -> None:
    """Common random numbers for the lazy-only curves: every p of a realisation uses the first p points of one pool
    and one test set (one seed group); network runs draw their own data at each p."""
    from repdyn.experiments.compression.learning_curves import realisation

    exp = next(e for e in EXPERIMENTS if e.name == "compression.learning_curves")
    cfg = exp.config("smoke")
    assert {r.seed_group for r in exp.runs(cfg) if r.params.get("lazy_only")} == {"lazy"}
    assert {r.seed_group for r in exp.runs(cfg) if not r.params.get("lazy_only")} == {""}
    (pool, _), (xt, _) = realisation(5, 2, cfg.ds[0], 64, cfg.n_test, "cpu")
    (pool2, _), (xt2, _) = realisation(5, 2, cfg.ds[0], 128, cfg.n_test, "cpu")
    torch.testing.assert_close(xt, xt2)
    assert pool.shape[1] == 64 and pool2.shape[1] == 128


def test_nested_lazy_errors_are_those_of_each_p() -> None:
    """Session 31: the lazy-only curve is one run whose smaller p use the leading blocks of the largest p's kernels;
    its errors are those of the hard-margin learner trained on each p alone (kernel entries equal to rounding)."""
    from repdyn.experiments.compression.common import arccos_svm_error, nested_arccos_svm_errors
    from repdyn.experiments.compression.learning_curves import realisation

    (x, y), (xt, yt) = realisation(7, 3, 5, 256, 300, "cpu")
    p_values = (64, 128, 256)
    nested = nested_arccos_svm_errors(x, y, xt, yt, p_values, 1.0)
    alone = np.array([arccos_svm_error(x[:, :p], y[:, :p], xt, yt, 1.0) for p in p_values])
    assert nested.shape == (3, 3) and np.array_equal(nested, alone)
    assert nested[0].mean() > nested[-1].mean()  # a learning curve: the error falls with p


@pytest.mark.parametrize("name", ["compression.learning_curves", "compression.ntk_pca", "compression.real_images"])
def test_at_init_control_is_analysis_only_and_reads_the_untrained_network(name) -> None:
    """The at_init control reuses the runs: its analysis replaces every trained quantity by the untrained one, so
    ratios final/init are 1 and gains 0 (the numbers a max_steps = 0 run gives)."""
    import dataclasses

    exp = next(e for e in EXPERIMENTS if e.name == name)
    cfg = exp.config("smoke")
    results = {run.label: exp.execute(cfg, run, 3, "cpu") for run in exp.runs(cfg)}
    control = exp.analyse(dataclasses.replace(cfg, at_init=True), results).measured
    if name == "compression.real_images":
        np.testing.assert_array_equal(control["final_ntk_beats_init"].values, 1.0)
        np.testing.assert_array_equal(control["mi_plane_rises"].values, 0.0)
    elif name == "compression.ntk_pca":
        np.testing.assert_array_equal(control["mi1_gain"].values, 0.0)
    else:
        np.testing.assert_array_equal(control["feature_slope"].values, 0.0)  # error 1 (all ties) at every p
        assert not any(control["compressed_close_to_feature"].values)
        assert not any(control["cylinder_feature_below_lazy"].values)
        # final_ntk_like_feature: the untrained output's error is 1, so the control is the median |ln ε_init NTK|
        floor = 0.5 / cfg.n_test
        init_ntk = np.maximum([results[f"p={p}"]["init_ntk"] for p in cfg.p_values], floor)
        np.testing.assert_allclose(control["final_ntk_like_feature"].values,
                                   np.median(np.abs(np.log(init_ntk)), axis=0))
        ratio = np.maximum([results[f"p={p}"]["final_ntk"] for p in cfg.p_values], floor) / np.maximum(
            [results[f"p={p}"]["feature"] for p in cfg.p_values], floor)
        np.testing.assert_allclose(exp.analyse(cfg, results).measured["final_ntk_like_feature"].values,
                                   np.median(np.abs(np.log(ratio)), axis=0))


def test_momentum_flow_descends_the_softhinge_and_is_deterministic() -> None:
    from repdyn.experiments.compression.real_images import _fit_cnn_momentum, _seeded_cnn, softhinge

    z = torch.tensor([0.0, 1.0, 3.0])
    torch.testing.assert_close(softhinge(z, 0.5), torch.log1p(torch.exp(3 * (1 - z))).mean() / 1.5)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(16, 1, 28, 28, generator=gen)
    y = torch.where(torch.arange(16) % 2 == 0, 1.0, -1.0)
    finals = []
    for _ in range(2):
        model = _seeded_cnn(1, 4, "cpu")
        with torch.no_grad():
            f0 = model(x)
        _fit_cnn_momentum(model, x, y, 1e-2, 1.0, 1e-3, 0.1, 40)
        with torch.no_grad():
            f = model(x)
        assert softhinge(y * 1e-2 * (f - f0), 1e-2) < softhinge(torch.zeros(16), 1e-2)
        finals.append(f)
    torch.testing.assert_close(finals[0], finals[1], rtol=0, atol=0)


def _former_loop(net, x, y, alpha, max_dgrad, max_steps, d_parallel=1, max_dout=0.1):
    """The integrator's step rule as it was written before session 29 (one allocating tensor op per quantity, a
    (5, S) record stacked every step, outside inference mode), without compaction or checkpoints: the reference of
    the fast loop."""
    import math

    from repdyn.nn.gradient_flow import _Workspace, hinge_loss
    from repdyn.nn.models.hidden_layer import stack_params
    from repdyn.theory.compression import amplification
    h = net.w.shape[1]
    dgrad_free_dt = h * math.sqrt(net.w.shape[2] / 2) / 160
    y = y.to(x.dtype)
    ws = _Workspace(x, y, alpha, h)
    theta = stack_params(net).to(x.dtype)
    ws.f0 = ws.direction(theta)[0].clone()
    out, grad = ws.direction(theta)[:2]
    dt = torch.ones(x.shape[0], dtype=torch.float64)
    t, t_star = torch.zeros_like(dt), torch.full_like(dt, math.nan)
    lam = amplification(theta[..., :-2], d_parallel)
    lam_star, lam_max, last_rejected = torch.full_like(lam, math.nan), lam.clone(), torch.full_like(lam, math.inf)
    fitted = (alpha * y * out >= 1).to(x.dtype).mean(dim=1)
    running = fitted < 1

    def row():
        return torch.stack([t.to(x.dtype), lam, fitted, hinge_loss(out, y, alpha) * alpha, dt.to(x.dtype)])
    records = [row()]
    for _ in range(max_steps):
        trial = torch.addcmul(theta, (dt * running).to(x.dtype)[:, None, None], grad)
        out_new, grad_new = ws.direction(trial)[:2]
        gn, gnn = grad.flatten(1), grad_new.flatten(1)
        norms = gn.norm(dim=1) * gnn.norm(dim=1)
        dgrad = torch.where(norms > 0, (gn - gnn).pow(2).sum(dim=1) / norms.clamp_min(1e-300), 0.0)
        dout = (out_new - out).abs().amax(dim=1) * alpha
        margin_event = ((alpha * y * out_new < 1) != (alpha * y * out < 1)).any(dim=1)
        small = dout < max_dout
        jump = running & small & ((dgrad > 0.1 * last_rejected) | margin_event)
        accept = running & small & ((dgrad < max_dgrad) | jump | (dt < dgrad_free_dt))
        grow = accept & (dout < 0.5 * max_dout) & ((dgrad < 0.5 * max_dgrad) | jump | (dt < dgrad_free_dt))
        reject = running & ~accept
        last_rejected = torch.where(reject & small, dgrad, math.inf)
        theta = torch.where(accept[:, None, None], trial, theta)
        grad = torch.where(accept[:, None, None], grad_new, grad)
        out = torch.where(accept[:, None], out_new, out)
        t = torch.where(accept, t + dt, t)
        dt = torch.where(grow, dt * 1.1, torch.where(reject, dt / 10, dt))
        lam = amplification(theta[..., :-2], d_parallel)
        lam_max = torch.where(accept, torch.maximum(lam_max, lam), lam_max)
        fitted = (alpha * y * out >= 1).to(x.dtype).mean(dim=1)
        first = accept & torch.isnan(t_star) & (fitted > 0.1)
        t_star, lam_star = torch.where(first, t, t_star), torch.where(first, lam, lam_star)
        running = running & (fitted < 1)
        records.append(row())
    return theta, t, t_star, lam_star, lam_max, torch.stack(records, dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fast_loop_is_bitwise_the_former_one(dtype) -> None:
    """Session 29: the loop reuses the margins and active set of the direction, keeps each step's (S,) tensors as
    its record and runs in inference mode; every number is that of the former loop, bit for bit."""
    from repdyn.nn.models.hidden_layer import stack_params
    gen = torch.Generator().manual_seed(4)
    x, y = sample_manifold("stripe", 96, 5, gen, batch=(3,))
    net0 = init_hidden_layer(3, 40, 5, gen)
    net0 = type(net0)(*(v.to(dtype) for v in (net0.w, net0.b, net0.beta)))
    theta, t, t_star, lam_star, lam_max, records = _former_loop(net0, x.to(dtype), y, 1e-4, 1e-2, 600)
    res = train_gradient_flow(net0, x.to(dtype), y, 1e-4, max_dgrad=1e-2, max_steps=600)
    assert bool(torch.isfinite(t_star).any()), "t* should be reached: the case must test its update"
    assert torch.equal(stack_params(res.net), theta) and torch.equal(res.t, t)
    for got, want in ((res.t_star, t_star), (res.lambda_star, lam_star), (res.lambda_max, lam_max)):
        assert torch.equal(got.nan_to_num(-1), want.nan_to_num(-1))
    for i, key in enumerate(("t", "amplification", "fitted", "loss", "dt")):
        assert torch.equal(res.trajectory[key], records[i].T), key


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_flow_without_records_keeps_every_number(dtype) -> None:
    """Session 30: record_every = 0 (the experiments that store no history) skips the per-step records and their
    hinge loss; the weights, t, t*, Λ*, Λ_max, the stop flags and the step count are the same bits, with compaction
    (the trials stop at different steps) and without. The loop keeps ‖g‖ of the accepted gradient instead of
    recomputing it: test_fast_loop_is_bitwise_the_former_one checks that against the former loop."""
    from repdyn.nn.models.hidden_layer import stack_params
    gen = torch.Generator().manual_seed(5)
    x, y = sample_manifold("stripe", 64, 5, gen, batch=(4,))
    net0 = init_hidden_layer(4, 30, 5, gen)
    net0 = type(net0)(*(v.to(dtype) for v in (net0.w, net0.b, net0.beta)))
    for stop in (1.0, 0.3):
        runs = [train_gradient_flow(net0, x.to(dtype), y, 1e-2, max_dgrad=1e-2, max_steps=800, stop_fraction=stop,
                                    record_every=every) for every in (1, 0)]
        with_records, without = runs
        assert len(without.trajectory) == 0 and not list(without.trajectory)
        assert len(with_records.trajectory) == with_records.trajectory.stopped_at + 1
        assert without.trajectory.stopped_at == with_records.trajectory.stopped_at
        if stop < 1:
            assert int(with_records.stopped.sum()) >= 2, "half the trials must stop (the batch is compacted)"
        assert torch.equal(stack_params(without.net), stack_params(with_records.net))
        assert torch.equal(stack_params(without.at_t_star), stack_params(with_records.at_t_star))
        for name in ("t", "t_star", "lambda_star", "lambda_max", "stopped"):
            assert torch.equal(getattr(without, name).nan_to_num(-1), getattr(with_records, name).nan_to_num(-1)), name
    with pytest.raises(ValueError, match="trace_neurons"):
        train_gradient_flow(net0, x.to(dtype), y, 1e-2, max_steps=5, record_every=0, trace_neurons=2)


def test_alpha_scan_converged_runs_keep_t_star_and_the_frozen_run_is_the_same_realisation() -> None:
    """Fig. 11 left (session 32): a converge_alphas run goes on past t* by the same flow, so t*, Λ* and Λ(0) are
    those of the run that stops just after t*; the frozen run's error is the hard-margin learner on the autograd NTK
    (an independent kernel) of the initialisation the α runs start from, on the training and test sets they use."""
    import dataclasses

    from sklearn.svm import SVC

    from repdyn.experiments.compression.alpha_scan import FROZEN
    from repdyn.experiments.compression.common import draw, generator
    from repdyn.framework.base import RunSpec
    from repdyn.nn.models.hidden_layer import HiddenLayerModule
    from repdyn.probes.ntk import empirical_ntk

    exp = next(e for e in EXPERIMENTS if e.name == "compression.alpha_scan")
    cfg = dataclasses.replace(exp.config("smoke"), max_steps=2500, converge_steps=2500)
    run = RunSpec("alpha=0.0001", {"alpha": 1e-4})
    converged = exp.execute(cfg, run, 3, "cpu")
    at_t_star = exp.execute(dataclasses.replace(cfg, test_errors=False), run, 3, "cpu")
    for key in ("t_star", "lambda_star", "lambda0"):
        np.testing.assert_array_equal(converged[key], at_t_star[key])
    assert np.isfinite(at_t_star["t_star"]).all() and at_t_star["stopped"].all()
    assert converged["steps"] > at_t_star["steps"] and "test_error" not in at_t_star
    frozen = exp.execute(cfg, RunSpec(FROZEN, {"frozen": True}), 3, "cpu")["test_error"]
    gen = generator(3)
    x, y, net0 = draw("stripe", cfg.d, cfg.p, cfg.n_seeds, cfg.width, gen, "cpu")
    xt, yt = sample_manifold("stripe", cfg.n_test, cfg.d, gen, batch=(cfg.n_seeds,))
    for s in range(cfg.n_seeds):
        module = HiddenLayerModule(net0, s)
        svc = SVC(C=1e8, kernel="precomputed", tol=1e-4).fit(empirical_ntk(module, x[s]).detach().numpy(), y[s])
        out = svc.decision_function(empirical_ntk(module, xt[s], x[s]).detach().numpy())
        assert abs(float(np.mean(yt[s].numpy() * out <= 0)) - frozen[s]) <= 1 / cfg.n_test


def test_alpha_scan_test_error_claims_are_the_closed_forms() -> None:
    """The two Fig. 11 left measurements on given errors: the plateau ratio ε(α_b)/ε(α_a) and
    g = ln(ε_lazy/ε(α_a)) / ((β_F − β_L) ln p), which is 1 when the ratio is p^−(β_F − β_L); under the α → ∞
    control (lazy_in_place) the lazy error stands for both networks' and g = 0."""
    import dataclasses

    from repdyn.experiments.compression.alpha_scan import FROZEN, exponent_gap

    exp = next(e for e in EXPERIMENTS if e.name == "compression.alpha_scan")
    cfg = dataclasses.replace(exp.config("quick"), n_seeds=2)
    assert exponent_gap(5) == pytest.approx(4 / 13) and exponent_gap(10) == pytest.approx(9 / 28)
    lazy = np.array([0.1, 0.2])
    feature = lazy * cfg.p ** -exponent_gap(cfg.d)
    results = {f"alpha={a:g}": {"t_star": np.array([10.0 / a, 11.0 / a]), "lambda_star": np.ones(2),
                                "lambda_max": np.array([3.0, 5.0]) / (1 + a), "lambda0": np.array([1.0, 2.0]),
                                "stopped": np.zeros(2, bool)} for a in cfg.alphas}
    results["alpha=1e-08"].update(test_error=feature, fitted=np.array([0.9, 0.97]))
    results["alpha=0.0001"].update(test_error=1.2 * feature, fitted=np.array([0.95, 0.85]))
    results[FROZEN] = {"test_error": lazy}
    analysis = exp.analyse(cfg, results)
    measured = analysis.measured
    # the preconditions' states: the least fitted fraction over the converged α ≤ 10⁻⁴, t* reached at every α
    np.testing.assert_allclose(analysis.states["fitted_fraction"].values, [0.9, 0.85])
    np.testing.assert_array_equal(analysis.states["t_star_reached"].values, [1.0, 1.0])
    np.testing.assert_allclose(measured["test_error_plateau"].values, 1.2)
    np.testing.assert_allclose(measured["plateau_below_lazy"].values, 1.0)
    control = exp.analyse(dataclasses.replace(cfg, lazy_in_place=True), results).measured
    np.testing.assert_allclose(control["test_error_plateau"].values, lazy / feature)
    np.testing.assert_array_equal(control["plateau_below_lazy"].values, 0.0)
    # Fig. 11 right: the median Λ_max/Λ(0) per α (medians of 3/(1 + α) and 2.5/(1 + α)), drawn beside Λ*/Λ(0)
    rows = [m for m in exp.analyse(cfg, results).metrics if "lambda_max_ratio" in m]
    np.testing.assert_allclose([m["alpha"] for m in rows], sorted(cfg.alphas))
    np.testing.assert_allclose([m["lambda_max_ratio"] for m in rows], [2.75 / (1 + a) for a in sorted(cfg.alphas)])
    np.testing.assert_allclose([m["lambda_ratio"] for m in rows], 0.75)
    with pytest.raises(ConfigError, match="converge_alphas"):
        exp.prepare(apply_overrides(exp.config("quick"), {"converge_alphas": "1e-9"}))


def test_real_images_several_p_draw_fig8_and_each_p_is_its_single_p_run() -> None:
    """Two p at smoke scale: one run per (p, init), an init's runs share the seed a single-p run gets (its seed
    group is the single-p label), each p's errors are those of a single-p run of that p, the claims are judged at
    the largest p, and Fig. 8 (test errors against p) is drawn."""
    import dataclasses

    exp = next(e for e in EXPERIMENTS if e.name == "compression.real_images")
    cfg = dataclasses.replace(exp.config("smoke"), ps=(48, 64), n_inits=2)
    runs = exp.runs(cfg)
    assert [r.label for r in runs] == ["p=48,init=0", "p=48,init=1", "p=64,init=0", "p=64,init=1"]
    for p in cfg.ps:
        single = dataclasses.replace(cfg, ps=(p,))
        assert [(r.label, r.seed_group) for r in exp.runs(single)] == [("init=0", "init=0"), ("init=1", "init=1")]
        assert [r.seed_group for r in runs if r.params["p"] == p] == ["init=0", "init=1"]
    results = {r.label: exp.execute(cfg, r, 7 + r.params["init"], "cpu") for r in runs}
    singles = {}
    for p in cfg.ps:
        single = dataclasses.replace(cfg, ps=(p,))
        alone = {r.label: exp.execute(single, r, 7 + r.params["init"], "cpu") for r in exp.runs(single)}
        for i in range(2):
            for key in ("network", "init_error", "final_error", "final_weights_only_error"):
                assert results[f"p={p},init={i}"][key] == alone[f"init={i}"][key]
        singles[p] = exp.analyse(single, alone)
    both = exp.analyse(cfg, results)
    assert "learning_curves" in both.figures and "learning_curves" not in singles[64].figures
    line = both.figures["learning_curves"].axes[0].lines[0]  # the network's curve
    np.testing.assert_array_equal(line.get_xdata(), [48, 64])
    np.testing.assert_array_equal(line.get_ydata(), [singles[p].metrics[0]["network"] for p in (48, 64)])
    for claim in exp.claims:
        np.testing.assert_array_equal(both.measured[claim.id].values, singles[64].measured[claim.id].values)
    assert [row["p"] for row in both.metrics] == [48, 64]
    assert exp.prepare(dataclasses.replace(cfg, ps=(48, 2000))).startswith("p up to 2000 needs 4050 images")
    with pytest.raises(ConfigError, match="repeats"):
        exp.prepare(dataclasses.replace(cfg, ps=(48, 48)))


@pytest.mark.parametrize("name", ["compression.learning_curves", "compression.amplification"])
def test_extra_stripe_dimension_is_drawn_and_claims_stay_on_d5(name) -> None:
    """Figs. 2 and 5 show d = 5 and d = 10: a run of an extra dimension is the run a config of that dimension gives
    (same seed), the figures draw it, and the claims are those of the d = 5 runs alone."""
    import dataclasses

    exp = next(e for e in EXPERIMENTS if e.name == name)
    base = exp.config("smoke")
    d_field = "ds" if name.endswith("learning_curves") else "ds_stripe"
    assert getattr(exp.config("quick"), d_field) == (5,) and getattr(exp.config("paper"), d_field) == (5, 10)
    cfg = dataclasses.replace(base, **{d_field: (5, 10)})
    plain = {r.label: r for r in exp.runs(base)}
    extra = [r for r in exp.runs(cfg) if r.label not in plain]
    prefix = "d=10 " if d_field == "ds" else "stripe d=10 "
    p_values = base.p_values if d_field == "ds" else base.p_stripe
    assert [r.label for r in extra] == [f"{prefix}p={p}" for p in p_values]
    assert [r.label for r in exp.runs(cfg) if r.label in plain] == list(plain)  # d = 5 runs unchanged
    results = {r.label: exp.execute(cfg, r, i, "cpu") for i, r in enumerate(exp.runs(cfg))}
    d10 = dataclasses.replace(base, **{d_field: (10,)})
    first = extra[0]
    twin, seed = plain[first.label.replace("d=10 ", "")], list(results).index(first.label)
    alone, at_d5 = exp.execute(d10, twin, seed, "cpu"), exp.execute(base, twin, seed, "cpu")
    key = "lazy" if d_field == "ds" else "lambda0"  # finite at smoke scale (Λ* is NaN there: no t*)
    assert np.all(np.isfinite(alone[key])) and not np.array_equal(alone[key], at_d5[key])
    np.testing.assert_array_equal(results[first.label][key], alone[key])
    with_d10 = exp.analyse(cfg, results)
    only_d5 = exp.analyse(base, {k: v for k, v in results.items() if k in plain})
    for claim in exp.claims:
        np.testing.assert_array_equal(np.asarray(with_d10.measured[claim.id].values, dtype=float),
                                      np.asarray(only_d5.measured[claim.id].values, dtype=float))
    figure = "learning_curves" if d_field == "ds" else "amplification_vs_p"
    curves = with_d10.figures[figure].axes
    if d_field == "ds":
        assert len(curves) == 2 and curves[1].get_title().startswith("stripe d = 10")
    else:
        assert any("d = 10" in line.get_label() for line in curves[0].lines)
    assert len(with_d10.metrics) == len(only_d5.metrics) + len(p_values)


def test_amplification_extra_d_runs_adds_runs_without_rekeying_the_others(tmp_path) -> None:
    """Fig. 5's further d (paper scale: ds_stripe = (5, 10)) toggled by extra_d_runs, an analysis-only field like
    geomnist's d3_sweep: with it off the plan's runs (controls included) are those with it on less the d = 10 ones,
    under the same keys, so switching it reuses every stored d = 5 stripe and cylinder run."""
    from repdyn.runtime.reproduce import plan, tasks_for

    def keys(extra: str) -> dict[str, str]:
        plan_ = plan(["compression.amplification"], scale="paper", overrides={"extra_d_runs": extra},
                     out=tmp_path)
        return {task.key: task.label for task in tasks_for(plan_)}

    on, off = keys("true"), keys("false")
    assert set(off) < set(on)
    assert sorted(set(on.values()) - set(off.values())) == sorted(f"stripe d=10 p={p}" for p in
                                                                   (256, 411, 1024, 2048, 4640, 10000))
    assert all(label.startswith("stripe d=10 ") for key, label in on.items() if key not in off)


def test_fitted_fraction_is_the_integrators_count_with_the_margin_tolerance() -> None:
    """The end state of the preconditions: the integrator's own fitted fraction #{y F ≥ 1}/p at its last step, plus
    the points the hinge's sliding mode holds within 10⁻³ below the margin (measured here: 1 and 1 more point in two
    of three trials, none in the third)."""
    from repdyn.experiments.compression.common import (
        FIT_TOLERANCE,
        fitted_fraction,
        generator,
        network_output,
        train,
    )

    x, y, _, res = train("stripe", 2, 64, 3, 16, 1e-2, 1e-2, 1.0, 300, generator(0), "cpu", history=True)
    margins = y.double() * 1e-2 * (network_output(res.net, x.double(), 1.0) - res.f0_train.double())
    np.testing.assert_array_equal((margins >= 1).double().mean(-1).numpy(), res.trajectory["fitted"][-1].numpy())
    got = fitted_fraction(res, x, y, 1e-2, 1.0)
    np.testing.assert_array_equal(got, (margins >= 1 - FIT_TOLERANCE).double().mean(-1).numpy())
    np.testing.assert_array_equal(np.round(got * 64), [39, 22, 39])


def test_learning_curve_seed_batches_extend_the_store_and_pool_the_realisations(tmp_path) -> None:
    """seed_batches (analysis-only): each further batch adds the stripe network runs and a lazy-only run under new
    labels (own seeds), and the plan keeps every key of the single batch, so a store is extended, not redone; the
    claims pool the batches' realisations in batch order."""
    import dataclasses

    from repdyn.experiments.compression.learning_curves import pool_batches
    from repdyn.runtime.reproduce import plan, tasks_for

    def keys(batches: str) -> dict[str, str]:
        plan_ = plan(["compression.learning_curves"], scale="smoke", overrides={"seed_batches": batches},
                     out=tmp_path)
        return {task.key: task.label for task in tasks_for(plan_)}

    one, two = keys("1"), keys("2")
    assert set(one) < set(two)
    assert sorted(set(two.values()) - set(one.values())) == ["lazy b=1", "p=32 b=1", "p=64 b=1"]

    exp = next(e for e in EXPERIMENTS if e.name == "compression.learning_curves")
    cfg = dataclasses.replace(exp.config("smoke"), seed_batches=2)
    results = {r.label: exp.execute(cfg, r, i, "cpu") for i, r in enumerate(exp.runs(cfg))}
    pooled = pool_batches(results, ["p=32", "lazy"], 2)
    np.testing.assert_array_equal(pooled["p=32"]["feature"],
                                  np.concatenate([results["p=32"]["feature"], results["p=32 b=1"]["feature"]]))
    np.testing.assert_array_equal(pooled["lazy"]["lazy"],
                                  np.concatenate([results["lazy"]["lazy"], results["lazy b=1"]["lazy"]], axis=-1))
    assert pooled["p=32"]["p"] == 32 and pooled["lazy"]["lazy"].shape == (2, 6)
    assert not np.array_equal(results["p=32"]["feature"], results["p=32 b=1"]["feature"])  # own seeds
    both = exp.analyse(cfg, results)
    first = exp.analyse(exp.config("smoke"), {k: v for k, v in results.items() if k in one.values()})
    feature = np.asarray(both.measured["feature_slope"].values, dtype=float)
    assert len(feature) == 2 * cfg.n_seeds
    np.testing.assert_array_equal(feature[:cfg.n_seeds], np.asarray(first.measured["feature_slope"].values, float))
