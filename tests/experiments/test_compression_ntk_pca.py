"""ntk_pca (seed 003, Figs. 9 and 10): the rank-trend and one-dimensionality measures against closed forms, the
row-chunked Gram matrices against the one-call kernel, the controls of the new claims, memory under a cap."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from memory_cap import outcome_under_cap
from repdyn.experiments.compression import EXPERIMENTS
from repdyn.experiments.compression.common import ntk_rows, trial_ntk
from repdyn.experiments.compression.ntk_pca import rank_trend, variance_explained_by
from repdyn.nn.models.hidden_layer import init_hidden_layer
from repdyn.theory.compression import hidden_layer_ntk


def test_rank_trend_is_the_fitted_change_from_first_to_last_rank() -> None:
    ranks = np.arange(1, 11)
    np.testing.assert_allclose(rank_trend(0.3 - 0.02 * ranks), -0.18)  # 9 steps of −0.02
    np.testing.assert_allclose(rank_trend(np.full((3, 10), 0.1)), 0.0, atol=1e-15)
    one_mode = np.zeros(10)
    one_mode[0] = 1.0  # all on mode 1: slope −Σ(r − 5.5)·… = −4.5/82.5, times 9
    np.testing.assert_allclose(rank_trend(one_mode), -9 * 4.5 / 82.5)


def test_variance_explained_by_a_curve_and_by_noise() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(2000)
    curve = np.column_stack([np.exp(-x**2 / 2), np.tanh(x)])
    assert variance_explained_by(curve, x) > 0.99
    # φ independent of x: the k-NN mean of unit noise leaves σ²(1 + 1/k), so R² = −1/k = −0.1 in expectation
    noise = rng.standard_normal((2000, 2))
    assert abs(variance_explained_by(noise, x) + 0.1) < 0.04
    # noise of 10 % of the curve's spread off the curve: R² ≈ 1 − 0.01·(1 + 1/k)/var(curve)
    noisy = curve + 0.1 * curve.std(0) * rng.standard_normal((2000, 2))
    assert 0.97 < variance_explained_by(noisy, x) < 0.995


@pytest.mark.parametrize("last_layer_only", [False, True])
def test_row_chunked_gram_equals_the_one_call_kernel(last_layer_only) -> None:
    gen = torch.Generator().manual_seed(0)
    net = init_hidden_layer(2, 30, 4, gen)
    x = torch.randn(2, 50, 4, generator=gen, dtype=torch.float64)
    for s in range(2):
        whole = hidden_layer_ntk(net.w[s], net.b[s], net.beta[s], x[s], x[s], last_layer_only=last_layer_only)
        torch.testing.assert_close(trial_ntk(net, s, x[s], x[s], 7, last_layer_only), whole, rtol=1e-12, atol=0)
    assert ntk_rows(10_000, 1000, 16.0) < 1000  # the paper's h and p: chunked at the default setting too


def test_new_claims_controls_read_the_other_kernels() -> None:
    """final_as_init reads the trained network's final kernels as the initial ones (and drops the init-only
    realisations); at_init reads the untrained last layer as the trained one (gain 0)."""
    exp = next(e for e in EXPERIMENTS if e.name == "compression.ntk_pca")
    cfg = exp.config("smoke")
    results = {run.label: exp.execute(cfg, run, 3, "cpu") for run in exp.runs(cfg)}
    res = results["p=64"]
    assert res["extra_init_mi"].shape == (cfg.n_init_seeds, cfg.n_modes)
    measured = exp.analyse(cfg, results).measured
    trends = rank_trend(np.concatenate([res["init_mi"], res["extra_init_mi"]]))
    np.testing.assert_allclose(measured["mi_init_flat"].values, trends)
    control = exp.analyse(dataclasses.replace(cfg, final_as_init=True), results).measured
    np.testing.assert_allclose(control["mi_init_flat"].values, rank_trend(res["final_mi"]))
    untrained = exp.analyse(dataclasses.replace(cfg, at_init=True), results).measured
    np.testing.assert_allclose(untrained["mi1_gain_last_layer"].values,
                               res["init_last_layer_mi"][:, 0] - res["init_mi"][:, 0])
    np.testing.assert_allclose(untrained["last_layer_one_dimensional"].values,
                               [variance_explained_by(f, x) for f, x in zip(res["init_last_layer_phi"], res["x1"],
                                                                            strict=True)])


def test_memory_setting_changes_no_number() -> None:
    exp = next(e for e in EXPERIMENTS if e.name == "compression.ntk_pca")
    cfg = exp.config("smoke")
    run = exp.runs(cfg)[0]
    big, tiny = (exp.execute(dataclasses.replace(cfg, memory_gb=m), run, 5, "cpu") for m in (16.0, 1e-5))
    for key in big:
        np.testing.assert_allclose(np.abs(big[key]), np.abs(tiny[key]), rtol=1e-9, atol=1e-12)  # φ up to sign


NTK_CAP_SETUP = """
import torch
from repdyn.experiments.compression.common import ntk_rows, trial_ntk
from repdyn.nn.models.hidden_layer import init_hidden_layer
from repdyn.theory.compression import hidden_layer_ntk
g = torch.Generator().manual_seed(0)
net = init_hidden_layer(1, 40000, 5, g)
x = torch.randn(200, 5, generator=g, dtype=torch.float64)  # six (200, 40000) float64 temporaries = 0.36 GiB
"""
NTK_CAP_CALL = """
if sys.argv[1] == "chunked":
    trial_ntk(net, 0, x, x, ntk_rows(40000, 200, 0.1))
else:
    hidden_layer_ntk(net.w[0], net.b[0], net.beta[0], x, x)
"""


@pytest.mark.slow
def test_chunked_gram_fits_under_a_memory_cap_where_the_one_call_kernel_does_not(tmp_path) -> None:
    """ntk_pca's Gram matrix at p = 200, h = 40000 under an address-space cap of 300 MiB above what the interpreter,
    torch and the inputs map: row-chunked (as ntk_pca builds it: x2's three factors once, 0.18 GiB) it fits; in one
    call (as ntk_pca built it before: six factors, 0.36 GiB) it does not."""
    for mode, expected in (("chunked", "fits"), ("whole", "out of memory")):
        assert outcome_under_cap(tmp_path, NTK_CAP_SETUP, NTK_CAP_CALL, 300 * 2**20, mode) == expected


def test_centred_shares_and_perron_alignment_on_a_constant_plus_label_kernel() -> None:
    """K = 5·11ᵀ + yyᵀ with balanced ±1 labels: the uncentred mode 1 is the constant vector (|v₁·1|/√p = 1) and
    carries none of the label, mode 2 all of it (omega1_top's pattern); centring (H K H = yyᵀ) puts it all on mode 1."""
    from repdyn.experiments.compression.ntk_pca import centred_shares, perron_alignment
    from repdyn.probes.kernel_pca import kernel_pca

    y = torch.tensor([1.0, -1.0] * 20, dtype=torch.float64)
    gram = 5.0 * torch.ones(40, 40, dtype=torch.float64) + torch.outer(y, y)
    pca = kernel_pca(gram, y, 3)
    np.testing.assert_allclose(pca.fractions.numpy(), [0.0, 1.0, 0.0], atol=1e-12)
    assert perron_alignment(pca.eigenfunctions[:, 0].numpy()) == pytest.approx(1.0)
    np.testing.assert_allclose(centred_shares(gram, y, 3), [1.0, 0.0, 0.0], atol=1e-12)
