"""Tests of the compression theory of seed 003 (spec 003 §7 suggested unit tests 2, 3, 6, 7, 9)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats

from repdyn.theory import compression as C


def test_x_max_makes_stripe_labels_equiprobable() -> None:
    exact = math.sqrt(2) * special.erfinv(1 + special.erf(C.STRIPE_X_MIN / math.sqrt(2)))
    assert exact == pytest.approx(1.185492, abs=1e-6)
    assert special.ndtr(C.STRIPE_X_MAX) - special.ndtr(C.STRIPE_X_MIN) == pytest.approx(0.5, abs=1e-6)
    assert math.exp(-C.CYLINDER_RADIUS**2 / 2) == pytest.approx(0.5, abs=1e-15)


@pytest.mark.parametrize(("d", "d_par", "lazy", "feature"), [
    (2, 1, Fraction(1, 2), Fraction(3, 4)), (5, 1, Fraction(5, 13), Fraction(9, 13)),
    (10, 1, Fraction(10, 28), Fraction(19, 28)), (3, 2, Fraction(3, 7), Fraction(1, 2))])
def test_exponent_table(d: int, d_par: int, lazy: Fraction, feature: Fraction) -> None:
    assert C.lazy_exponent(d) == pytest.approx(float(lazy), abs=1e-15)
    assert C.feature_exponent(d, d_par) == pytest.approx(float(feature), abs=1e-15)
    # β_Lazy = (d − 1 + ξ)/(3d − 3 + ξ) at ξ = 1, and the stripe gain ½ · 2(d − 1)/(3d − 2)
    assert C.lazy_exponent(d) == pytest.approx(d / (3 * d - 3 + 1))
    if d_par == 1:
        assert C.feature_exponent(d) - C.lazy_exponent(d) == pytest.approx((d - 1) / (3 * d - 2))


def test_exponent_bad_input() -> None:
    with pytest.raises(ValueError, match="d_parallel"):
        C.feature_exponent(3, 3)


def test_amplification_is_one_at_init_and_grows_with_alignment() -> None:
    g = torch.Generator().manual_seed(0)
    for d_par in (1, 2):
        w = torch.randn(200, 20000, 5, generator=g, dtype=torch.float64)
        lam = C.amplification(w, d_par)
        assert lam.shape == (200,)
        assert float(lam.mean()) == pytest.approx(1.0, abs=3 / math.sqrt(20000))
    w = torch.randn(1000, 5, generator=g, dtype=torch.float64)
    w[:, 0] *= 10
    assert float(C.amplification(w)) == pytest.approx(10.0, rel=0.1)


@pytest.mark.parametrize(("d", "expected"), [
    (2, [(-1.226, 1), (0.647, 1), (0.450, -1)]), (5, [(-1.481, 1), (0.685, 1), (0.570, -1)]),
    (10, [(-1.687, 1), (0.701, 1), (0.633, -1)])])
def test_stripe_attractor_table(d: int, expected: list[tuple[float, int]]) -> None:
    attractors = C.stripe_attractors(d)
    assert [(a.branch) for a in attractors] == [b for _, b in expected]
    for a, (z, _) in zip(attractors, expected, strict=True):
        assert a.z == pytest.approx(z, abs=2e-3)
        assert a.shrinks
    if d == 2:
        assert [round(a.c1, 3) for a in attractors] == pytest.approx([-0.180, 0.071, -0.402], abs=2e-3)


def test_limit_coefficients_match_quadrature() -> None:
    for branch in (1, -1):
        for zeta in (-1.3, 0.2, 0.9, 2.0):
            lo, hi = (zeta, np.inf) if branch == 1 else (-np.inf, zeta)
            pts = [p for p in (C.STRIPE_X_MIN, C.STRIPE_X_MAX) if lo < p < hi]
            c1_q = sum(integrate.quad(lambda x: C.stripe_label(x) * x * math.exp(-x * x / 2) / math.sqrt(2 * math.pi),
                                      a, b)[0] for a, b in zip([lo, *pts], [*pts, hi], strict=True))
            cb_q = sum(integrate.quad(lambda x: C.stripe_label(x) * math.exp(-x * x / 2) / math.sqrt(2 * math.pi),
                                      a, b)[0] for a, b in zip([lo, *pts], [*pts, hi], strict=True))
            c1, cb, c_perp, d_perp = C.limit_coefficients(zeta, branch)
            assert float(c1) == pytest.approx(c1_q, abs=1e-9)
            assert float(cb) == pytest.approx(cb_q, abs=1e-9)
            assert float(c_perp) == C.stripe_label(zeta)
            assert float(d_perp) == pytest.approx(special.ndtr(branch * -zeta), abs=1e-12)


def test_time_scales() -> None:
    a = C.stripe_attractors(2)[0]
    tau = C.neuron_time_scale(100, 2)
    assert tau == pytest.approx(100.0)
    assert C.growth_time(a, 100, 2) == pytest.approx(tau / (abs(a.c1) * math.sqrt(1 + a.z**2 / 2)))
    # the shrink condition √(2π)|C₁| − e^(−z²/2) > 0 is equivalent to τ*_⊥ > τ* (the √(2π) erratum)
    for a in C.stripe_attractors(5):
        cond = math.sqrt(2 * math.pi) * abs(a.c1) - math.exp(-a.z**2 / 2) > 0
        assert cond == (C.perpendicular_growth_time(a, 10, 5) > C.growth_time(a, 10, 5))


def _monte_carlo_velocity(w, b, beta, h, n=4_000_000, seed=1):
    rng = np.random.default_rng(seed)
    d = w.shape[0]
    x = rng.standard_normal((n, d))
    u = x @ w / math.sqrt(d) + b
    on = math.sqrt(2) * (u > 0) * C.stripe_label(x[:, 0])
    dw = beta / h * (on[:, None] * x).mean(0) / math.sqrt(d)
    db = beta / h * on.mean()
    dbeta = math.sqrt(2) / h * (np.maximum(u, 0) * C.stripe_label(x[:, 0])).mean()
    return dw, db, dbeta


def test_single_neuron_velocity_matches_monte_carlo_population_average() -> None:
    w = np.array([[0.8, -0.5, 0.3], [-1.2, 0.2, 0.1]])
    b = np.array([0.3, -0.4])
    beta = np.array([1.1, -0.7])
    dw, db, dbeta = C.single_neuron_velocity(w, b, beta, h=7)
    for i in range(2):
        mw, mb, mbeta = _monte_carlo_velocity(w[i], b[i], beta[i], 7)
        assert dw[i] == pytest.approx(mw, abs=2e-4)
        assert db[i] == pytest.approx(mb, abs=2e-4)
        assert dbeta[i] == pytest.approx(mbeta, abs=2e-4)


def test_finite_p_discrepancy_is_the_training_sum() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 4))
    y = C.stripe_label(x[:, 0])
    zeta = np.array([-0.5, 0.7])
    branch = np.array([1, -1])
    got = C.finite_p_discrepancy(x, y, zeta, branch)
    for i in range(2):
        mask = branch[i] * (x[:, 0] - zeta[i]) > 0
        assert got[i] == pytest.approx((x[:, 1:] * (y * mask)[:, None]).sum(0) / 300, abs=1e-14)


def test_plateau_is_the_fixed_point_of_eq5_and_eq7() -> None:
    """At the predicted plateau ω_⊥ = S ω₁/(C₁ − K) of a neuron on each d = 5 attractor, the velocity of Eqs. (5)
    + (7) (the quadrature of single_neuron_velocity at finite λ ≈ 10³) leaves r = ω_⊥/ω₁ unchanged: ω̇_⊥/ω_⊥ =
    ω̇₁/ω₁ per component. Dropping the first term of Eq. (7) (K = 0) does not."""
    d, s = 5, np.array([1.0, -2.0, 0.5, 3.0]) * 1e-5
    for a in C.stripe_attractors(d):
        c1, _, c_perp, _ = (float(v) for v in C.limit_coefficients(a.z, a.branch))
        k = a.branch * c_perp * math.exp(-a.z**2 / 2) / math.sqrt(2 * math.pi)
        w1 = 50.0 * a.branch
        rates = {}
        for label, kk in (("eq7", k), ("no_first_term", 0.0)):
            w = np.concatenate([[w1], s * w1 / (c1 - kk)])[None]
            beta = np.array([np.sign(c1) * math.sqrt(1 + a.z**2 / d) * w1])
            dw, _, _ = C.single_neuron_velocity(w, np.array([-w1 * a.z / math.sqrt(d)]), beta, 3, s[None])
            rates[label] = dw[0, 1:] / w[0, 1:] / (dw[0, 0] / w[0, 0])
        np.testing.assert_allclose(rates["eq7"], 1.0, rtol=1e-3)
        assert np.all(np.abs(rates["no_first_term"] - 1.0) > 0.05)
        # Λ*/√p of one training set: √(d − 1) |C₁ − K| / (√p ‖S‖), the median's numerator
        assert C.plateau_amplification(a, d) * math.sqrt(stats.chi2.median(d - 1) / (d - 1)) == pytest.approx(
            abs(c1 - k) / math.sqrt(C.limit_coefficients(a.z, a.branch)[3]), rel=1e-12)


def test_plateau_median_over_training_sets() -> None:
    """median over stripe training sets of √(d − 1) |C₁ − K| / (√p ‖S‖), S the training-set discrepancy at each
    d = 5 attractor, equals plateau_amplification (σ² = D_⊥, App. C.3), within 5 % (Monte Carlo: 1000 sets of
    p = 1000); σ = D_⊥ (Eq. 7 as printed) misses it by ≥ 15 % at z* ≈ 0.570 and 0.685."""
    d, p, n_sets = 5, 1000, 1000
    rng = np.random.default_rng(1)
    attractors = C.stripe_attractors(d)
    norms = np.empty((n_sets, len(attractors)))
    for i in range(n_sets):
        x = rng.standard_normal((p, d))
        disc = C.finite_p_discrepancy(x, C.stripe_label(x[:, 0]), np.array([a.z for a in attractors]),
                                      np.array([a.branch for a in attractors]))
        norms[i] = np.linalg.norm(disc, axis=1)
    for j, a in enumerate(attractors):
        c1, _, c_perp, _ = (float(v) for v in C.limit_coefficients(a.z, a.branch))
        k = a.branch * c_perp * math.exp(-a.z**2 / 2) / math.sqrt(2 * math.pi)
        sampled = float(np.median(math.sqrt(d - 1) * abs(c1 - k) / (math.sqrt(p) * norms[:, j])))
        assert sampled == pytest.approx(C.plateau_amplification(a, d), rel=0.05)
        if a.z > 0:
            assert abs(C.plateau_amplification(a, d, eq7_as_printed=True) / sampled - 1) > 0.15
    assert C.fastest_attractor(d) == max(attractors, key=lambda a: abs(a.c1) * math.sqrt(1 + a.z**2 / d))


def _jacobian_gram(w, b, beta, x1, x2):
    def f(params, x):
        ww, bb, be = params
        u = x @ ww.T / math.sqrt(ww.shape[1]) + bb
        return math.sqrt(2) * torch.relu(u) @ be / ww.shape[0]
    jac = [torch.func.jacrev(f)((w, b, beta), x) for x in (x1, x2)]
    flat = [torch.cat([j.reshape(j.shape[0], -1) for j in js], dim=1) for js in jac]
    return flat[0] @ flat[1].T


def test_closed_form_ntk_equals_autograd_jacobian_gram() -> None:
    g = torch.Generator().manual_seed(3)
    h, d = 300, 5
    w, b, beta = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((h, d), (h,), (h,)))
    x1 = torch.randn(40, d, generator=g, dtype=torch.float64)
    x2 = torch.randn(25, d, generator=g, dtype=torch.float64)
    expected = _jacobian_gram(w, b, beta, x1, x2)
    got = C.hidden_layer_ntk(w, b, beta, x1, x2)
    assert torch.allclose(got, expected, rtol=1e-10, atol=1e-14)
    last = C.hidden_layer_ntk(w, b, beta, x1, x2, last_layer_only=True)
    s1 = math.sqrt(2) * torch.relu(x1 @ w.T / math.sqrt(d) + b)
    s2 = math.sqrt(2) * torch.relu(x2 @ w.T / math.sqrt(d) + b)
    assert torch.allclose(last, s1 @ s2.T / h**2, rtol=1e-12)
    batched = C.hidden_layer_ntk(w[None].repeat(2, 1, 1), b[None].repeat(2, 1), beta[None].repeat(2, 1),
                                 x1[None].repeat(2, 1, 1), x2[None].repeat(2, 1, 1))
    assert torch.allclose(batched[1], got)


def test_infinite_width_ntk_is_the_wide_limit() -> None:
    g = torch.Generator().manual_seed(4)
    h, d = 200_000, 3
    w, b, beta = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((h, d), (h,), (h,)))
    x = torch.randn(6, d, generator=g, dtype=torch.float64)
    finite = h * C.hidden_layer_ntk(w, b, beta, x, x)
    limit = C.infinite_width_ntk(x, x)
    assert torch.allclose(finite, limit, rtol=0.03, atol=0.03)
    diag = C.infinite_width_ntk(x, x).diagonal()
    # on the diagonal θ = 0: 2 ‖x̃‖²
    assert torch.allclose(diag, 2 * ((x**2).sum(1) / d + 1))


def test_normal_density_on_finite_and_infinite_arguments() -> None:
    """_pdf (the Gaussian averages' density, session 31: no where when every argument is finite) against scipy's
    normal density; 0 at ±∞ and NaN."""
    from scipy import stats

    x = np.linspace(-9, 9, 181)
    np.testing.assert_allclose(C._pdf(x), stats.norm.pdf(x), rtol=1e-14, atol=0)
    got = C._pdf(np.array([0.0, 1.0, np.inf, -np.inf, np.nan]))
    np.testing.assert_allclose(got, [stats.norm.pdf(0.0), stats.norm.pdf(1.0), 0.0, 0.0, 0.0], rtol=1e-14, atol=0)
    assert np.array_equal(C._pdf(x[:3]), C._pdf(np.append(x[:3], np.inf))[:3])  # the two paths, the same bits
