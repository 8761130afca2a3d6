"""Tests of the elasticity estimators (spec 004 §2.10, S-D round trip)."""

import math

import numpy as np
import pytest

from repdyn.theory import elastic_sde as es
from repdyn.theory import elasticity_estimators as ee


def test_class_mean_logits_groups_by_label_and_marks_empty_cells():
    labels = np.array([[0, 1, 1], [0, 0, 1], [2, 0, 1]])
    logits = np.arange(27, dtype=float).reshape(3, 3, 3)
    xbar = ee.class_mean_logits(labels, logits, 3)
    np.testing.assert_allclose(xbar[0, 0], (logits[0, 0] + logits[1, 0]) / 2)
    np.testing.assert_allclose(xbar[0, 2], logits[2, 0])
    assert np.isnan(xbar[0, 1]).all() and np.isnan(xbar[2, 0]).all()
    filled = ee.fill_empty_cells(xbar)
    np.testing.assert_allclose(filled[2, 0], xbar[1, 0])
    with pytest.raises(ValueError, match="labels"):
        ee.class_mean_logits(labels + 3, logits, 3)


def test_isotropic_round_trip_is_exact():
    t = np.arange(400.0)
    A, B = 2 * np.log1p(t) + 0.01 * t, -0.5 * np.log1p(t)
    x0 = np.random.default_rng(0).standard_normal((3, 3))
    xbar = es.isotropic_mean(x0, A, B)
    Ahat, Bhat = ee.integrated_strengths_isotropic(xbar)
    np.testing.assert_allclose(Ahat, A, atol=1e-10)
    np.testing.assert_allclose(Bhat, B, atol=1e-10)


def test_logit_round_trip_exact_without_null_space_constant():
    """S-D: L-model trajectories with κ_1 = v1ᵀc_0 = 0 give Â, B̂ exactly; α̂, β̂ follow by Savitzky–Golay."""
    alpha = lambda s: 0.004 + 0.01 * np.exp(-((s - 300) / 120) ** 2)  # noqa: E731
    beta = lambda s: -0.002 * np.ones_like(np.asarray(s, dtype=float))  # noqa: E731
    from scipy.special import erf
    A = lambda s: 0.004 * s + 0.01 * 120 * math.sqrt(math.pi) / 2 * (erf((s - 300) / 120) - erf(-300 / 120))  # noqa: E731
    B = lambda s: -0.002 * s  # noqa: E731
    rng = np.random.default_rng(1)
    d = es.margin_directions(3)
    # initial value in span{d, f-modes}: margin coordinates s, x_k = s_k d_k gives κ_1 = 0
    s0 = rng.standard_normal(3) + 1.0
    x0 = s0[:, None] * d
    t = np.arange(0.0, 1000.0)
    xbar = es.logit_model_mean(x0, t, A, B, beta)
    Ahat, Bhat = ee.integrated_strengths_logit(xbar)
    At, Bt = np.array([A(s) for s in t]), B(t)
    np.testing.assert_allclose(Ahat, At, atol=1e-9)
    np.testing.assert_allclose(Bhat, Bt, atol=1e-9)
    a_hat = ee.strengths_from_integrated(Ahat, 51)
    interior = slice(60, 940)
    assert np.abs(a_hat[interior] - alpha(t[interior])).max() < 0.01 * alpha(300.0)
    np.testing.assert_allclose(ee.strengths_from_integrated(Bhat, 51)[interior], -0.002, atol=1e-9)


def test_tail_index_oracle():
    t = np.arange(5000.0)
    for r in (0.3, 0.7, 1.4):
        assert ee.tail_index((1 + t) ** (1 - r)) == pytest.approx(r, abs=1e-12)
        assert ee.tail_index(-((1 + t) ** (1 - r))) == pytest.approx(r, abs=1e-12)


def test_separating_direction_and_relative_difference():
    xbar = np.zeros((5, 3, 3))
    xbar[:, 0] = [3.0, 0, 0]
    xbar[:, 1] = [0, 4.0, 0]
    nu = ee.separating_direction(xbar, 0, 1)
    np.testing.assert_allclose(nu, np.array([3, -4, 0]) / 5)
    rd = ee.relative_difference(xbar, xbar, "isotropic")
    assert np.all(rd[:, :2] == 0)
    Y = xbar.copy()
    Y[:, 0] += np.array([1.0, 1.0, 1.0])  # along 1_K: invisible to H̄^k, seen by the Euclidean norm
    assert np.allclose(ee.relative_difference(xbar, Y, "logit")[:, 0], 0)
    assert np.all(ee.relative_difference(xbar, Y, "isotropic")[:, 0] > 0.4)
    with pytest.raises(ValueError, match="model"):
        ee.relative_difference(xbar, Y, "lmodel")


def test_simulation_from_exact_rates_recovers_genuine_path_after_rescaling():
    t = np.arange(300)
    alpha, beta = np.full(300, 0.03), np.full(300, -0.01)
    rng = np.random.default_rng(2)
    y0 = ee.simulation_initial_values(np.eye(3) * 0.5, 200, rng)
    assert y0.shape == (200, 3, 3)
    np.testing.assert_allclose(y0.std(axis=(0, 2)), 0.5 / math.sqrt(3), rtol=0.1)
    genuine = es.simulate_le_ode(alpha, beta, es.logit_blocks(3), (np.eye(3) - 1 / 3)[None])[:, 0]
    sim = es.simulate_le_ode(alpha, beta, es.logit_blocks(3), 2.5 * (np.eye(3) - 1 / 3)[None])[:, 0]
    np.testing.assert_allclose(ee.rescale_to_genuine(genuine, sim, tail_n=50), genuine, rtol=1e-12)
    assert t.size == genuine.shape[0]
