"""Seed 003's real-image experiment: the last layer's kernel, the momentum optimiser's device-side step control and
the memory setting (session 33)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from memory_cap import outcome_under_cap
from repdyn.experiments.compression import EXPERIMENTS
from repdyn.experiments.compression.real_images import (
    _fit_cnn_adam,
    _fit_cnn_momentum,
    _seeded_cnn,
    gram_bytes,
    last_layer_jacobian,
    softhinge,
)
from repdyn.framework.config import ConfigError
from repdyn.probes.ntk import empirical_ntk

EXP = next(e for e in EXPERIMENTS if e.name == "compression.real_images")


def _host_momentum(model, x, y, alpha, tau, max_dgrad, max_dout, max_steps):
    """Reference: the step rule of ``_fit_cnn_momentum``'s docstring with every decision taken on the host in
    Python floats (the loop as written before session 33)."""
    params = list(model.parameters())
    with torch.no_grad():
        f0 = model(x)

    def evaluate(flat):
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(flat, params)
        out = model(x)
        grads = torch.autograd.grad(softhinge(y * alpha * (out - f0), alpha), params)
        return out.detach(), torch.cat([gr.reshape(-1) for gr in grads])

    theta = torch.nn.utils.parameters_to_vector(params).detach().clone()
    out, g = evaluate(theta)
    v, dt = torch.zeros_like(theta), 1.0
    steps = 0
    while steps < max_steps and not bool((y * alpha * (out - f0) >= 1).all()):
        steps += 1
        decay = math.exp(-dt / tau) if tau > 0 else 0.0
        v_new = decay * v - (1.0 - decay) * g
        theta_new = theta + dt * v_new
        out_new, g_new = evaluate(theta_new)
        dgrad = float((g - g_new).pow(2).sum()) / float(g.norm() * g_new.norm())
        dout = alpha * float((out_new - out).abs().max())
        if dgrad < max_dgrad and dout < max_dout:
            theta, v, out, g = theta_new, v_new, out_new, g_new
            dt *= 1.1 if dgrad < max_dgrad / 2 and dout < max_dout / 2 else 1.0
        else:
            dt /= 10
    return steps, theta


@pytest.mark.parametrize("alpha", [10.0, 1e-2])
def test_momentum_step_control_on_the_device_changes_no_number(alpha) -> None:
    """sync_every = 1, 7 and 64 give the same step count and bitwise the same weights as the host-side reference; at
    α = 10 the network fits (margins ≥ 1) within the cap, so the stop between two syncs is exercised."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 1, 28, 28, generator=gen)
    y = torch.where(torch.arange(8) % 2 == 0, 1.0, -1.0)
    ref_steps, ref_theta = _host_momentum(_seeded_cnn(1, 4, "cpu"), x, y, alpha, 1.0, 1e-3, 0.1, 160)
    assert (ref_steps < 160) == (alpha == 10.0)
    for sync in (1, 7, 64):
        model = _seeded_cnn(1, 4, "cpu")
        fit = _fit_cnn_momentum(model, x, y, alpha, 1.0, 1e-3, 0.1, 160, sync_every=sync)
        assert (fit.trajectory.stopped_at, fit.fitted) == (ref_steps, ref_steps < 160)
        assert torch.equal(torch.nn.utils.parameters_to_vector(model.parameters()).detach(), ref_theta)
    with pytest.raises(ValueError, match="sync_every"):
        _fit_cnn_momentum(_seeded_cnn(1, 4, "cpu"), x, y, alpha, 1.0, 1e-3, 0.1, 5, sync_every=0)


@pytest.mark.parametrize(("optimiser", "stop_at"), [("momentum", 30), ("momentum", 90), ("adam", 10)])
def test_an_interrupted_fit_resumes_from_its_checkpoint_bit_identical(tmp_path, optimiser, stop_at) -> None:
    """A fit killed at ``stop_at`` goes on from its last checkpoint and ends with the uninterrupted run's steps and
    weights, bit for bit; a finished fit is read back with its weights."""
    from interrupt import Killed, kill_at
    from repdyn.nn.checkpoint import Checkpointer, checkpointing
    from repdyn.nn.progress import reporting

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 1, 28, 28, generator=gen)
    y = torch.where(torch.arange(8) % 2 == 0, 1.0, -1.0)

    def fit(model):
        done = (_fit_cnn_adam(model, x, y, 10.0, 1e-2, 100) if optimiser == "adam" else
                _fit_cnn_momentum(model, x, y, 10.0, 1.0, 1e-3, 0.1, 160, sync_every=7))
        return done.trajectory.stopped_at, done.fitted

    def weights(model):
        return torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy().tobytes()

    reference = _seeded_cnn(1, 4, "cpu")
    expected = fit(reference)
    assert expected[1] and expected[0] > stop_at
    path = tmp_path / "run.ckpt"
    with checkpointing(Checkpointer(path, every=0.0)), reporting(kill_at(stop_at)), pytest.raises(Killed):
        fit(_seeded_cnn(1, 4, "cpu"))
    resumed, steps_seen = _seeded_cnn(1, 4, "cpu"), []
    with checkpointing(Checkpointer(path, every=0.0)), reporting(lambda step, total, loss: steps_seen.append(step)):
        assert fit(resumed) == expected
    assert steps_seen[0] == stop_at
    assert weights(resumed) == weights(reference)
    again = _seeded_cnn(1, 4, "cpu")
    with checkpointing(Checkpointer(path, every=0.0)):
        assert fit(again) == expected
    assert weights(again) == weights(reference)


def test_last_layer_kernel_is_the_ntk_of_the_output_layer() -> None:
    """J Jᵀ + 1 with J = ∂f/∂readout equals the empirical NTK of the readout and the output bias (the probe's
    Jacobian route), and J is the pooled features over h (read with a forward hook on the head)."""
    model = _seeded_cnn(2, 5, "cpu")
    x = torch.randn(12, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    jac = last_layer_jacobian(model, x)
    torch.testing.assert_close(jac @ jac.T + 1.0, empirical_ntk(model, x, params=["readout", "bias"]).double(),
                               rtol=1e-5, atol=1e-7)
    seen = {}
    model.head.register_forward_hook(lambda m, i, o: seen.setdefault("z", o))
    with torch.no_grad():
        model(x)
    from repdyn.nn.models.mnas_cnn import swish
    features = swish(seen["z"].clone()).mean(dim=(-1, -2))
    torch.testing.assert_close(jac, (features / features.shape[1]).double(), rtol=1e-5, atol=1e-7)


def test_memory_setting_changes_no_number_and_guards_the_gram_matrices() -> None:
    """memory_gb = 10⁻⁵ GiB puts the NTK probe on its block path (Jacobians of 5 KiB at most); every stored number
    equals the default's. prepare refuses a setting whose Gram matrices do not fit half of it."""
    cfg = EXP.config("smoke")
    run = EXP.runs(cfg)[0]
    whole = EXP.execute(cfg, run, 3, "cpu")
    tiny = EXP.execute(dataclasses.replace(cfg, memory_gb=1e-5), run, 3, "cpu")
    assert whole.keys() == tiny.keys()
    for key in whole:
        np.testing.assert_allclose(np.asarray(tiny[key], dtype=float), np.asarray(whole[key], dtype=float),
                                   rtol=1e-6, atol=1e-9, err_msg=key)
    assert EXP.prepare(cfg) is None
    need = gram_bytes(max(cfg.ps), cfg.n_test)
    with pytest.raises(ConfigError, match="memory_gb"):
        EXP.prepare(dataclasses.replace(cfg, memory_gb=need / 2**30))


def test_last_layer_claims_read_the_untrained_network_under_the_control() -> None:
    """at_init: the MI gain is 0 and the one-dimensionality values are the untrained network's last layer's."""
    cfg = EXP.config("smoke")
    results = {run.label: EXP.execute(cfg, run, 3, "cpu") for run in EXP.runs(cfg)}
    control = EXP.analyse(dataclasses.replace(cfg, at_init=True), results).measured
    np.testing.assert_array_equal(control["last_layer_mi_plane_rises"].values, 0.0)
    np.testing.assert_array_equal(control["last_layer_one_dimensional"].values,
                                  [results[r.label]["init_ll_curve"] for r in EXP.runs(cfg)])
    trained = EXP.analyse(cfg, results).measured
    np.testing.assert_array_equal(trained["last_layer_one_dimensional"].values,
                                  [results[r.label]["final_ll_curve"] for r in EXP.runs(cfg)])


def test_last_layer_errors_are_fig8s_at_one_p_and_several() -> None:
    """Both networks' last-layer test errors are computed at one p (last_layer_between reads them) and with
    several p, where Fig. 8 draws them; the metrics carry the averages."""
    cfg = dataclasses.replace(EXP.config("smoke"), n_inits=1)
    single = EXP.execute(cfg, EXP.runs(cfg)[0], 3, "cpu")
    assert 0 <= single["init_ll_error"] <= 1 and 0 <= single["final_ll_error"] <= 1
    assert EXP.analyse(cfg, {EXP.runs(cfg)[0].label: single}).metrics[0]["final_last_layer"] == single[
        "final_ll_error"]
    several = dataclasses.replace(cfg, ps=(48, 64))
    results = {r.label: EXP.execute(several, r, 3, "cpu") for r in EXP.runs(several)}
    analysis = EXP.analyse(several, results)
    labels = [line.get_label() for line in analysis.figures["learning_curves"].axes[0].lines]
    assert "final last layer" in labels and "init last layer" in labels
    assert [row["final_last_layer"] for row in analysis.metrics] == [results[f"p={p},init=0"]["final_ll_error"]
                                                                     for p in (48, 64)]


def test_last_layer_between_counts_test_images_inside_network_to_init_ntk() -> None:
    """The measure by hand (errors of 1000 test images): inside by 3 and 5 images -> 3; as good as the network -> 0;
    worse than the initial NTK -> negative. In the analysis it is recomputed from the stored errors, and under
    at_init it reads the untrained network's last layer against the same (trained) network and initial NTK."""
    from repdyn.experiments.compression.real_images import last_layer_between
    np.testing.assert_array_equal(
        last_layer_between(np.array([0.083, 0.080, 0.130]), np.array([0.080, 0.080, 0.080]),
                           np.array([0.088, 0.120, 0.120]), np.array([1000, 1000, 1000])), [3, 0, -10])
    cfg = EXP.config("smoke")
    results = {run.label: EXP.execute(cfg, run, 3, "cpu") for run in EXP.runs(cfg)}
    runs = [results[r.label] for r in EXP.runs(cfg)]

    def by_hand(ll_key: str) -> list[float]:
        n = [r["n_test"] for r in runs]
        return [min(round(m * r[ll_key]) - round(m * r["network"]), round(m * r["init_error"]) - round(m * r[ll_key]))
                for m, r in zip(n, runs, strict=True)]

    np.testing.assert_array_equal(EXP.analyse(cfg, results).measured["last_layer_between"].values,
                                  by_hand("final_ll_error"))
    np.testing.assert_array_equal(EXP.analyse(dataclasses.replace(cfg, at_init=True), results)
                                  .measured["last_layer_between"].values, by_hand("init_ll_error"))


JACOBIANS_CAP_SETUP = """
import torch
from repdyn.experiments.compression.real_images import _cnn_weight_ntks, _seeded_cnn
g = torch.Generator().manual_seed(0)
model = _seeded_cnn(10, 1, "cpu")  # 23,251 parameters: a Jacobian row is 91 KiB
x = torch.randn(1000, 1, 8, 8, generator=g)
xt = torch.randn(6000, 1, 8, 8, generator=g)  # whole Jacobians of 7000 rows: 0.61 GiB
_cnn_weight_ntks(model, x[:2], xt[:2], 16.0)  # lazy libraries mapped before the cap is measured
"""


@pytest.mark.slow
def test_memory_setting_bounds_the_ntk_jacobians_under_a_memory_cap(tmp_path) -> None:
    """Under an address-space cap of 0.5 GiB above the interpreter, the weight NTKs of a width-10 CNN on 7000 (8×8)
    images fit with memory_gb = 0.1 (the probe's block path, 0.05 GiB of Jacobians) and do not with 16 GiB (the
    whole 0.61 GiB Jacobians). With glibc's default (dynamic) mmap threshold: before the block path wrote into
    buffers allocated once, its fresh 12 MB chunks fragmented the heap and it needed 2.2 GiB (session 33)."""
    call = "_cnn_weight_ntks(model, x, xt, float(sys.argv[1]))"
    for memory_gb, expected in (("0.1", "fits"), ("16.0", "out of memory")):
        assert outcome_under_cap(tmp_path, JACOBIANS_CAP_SETUP, call, 2**29, memory_gb, timeout=600) == expected
