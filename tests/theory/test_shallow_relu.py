"""Exact checks of seed 001's theory (spec 001 §2.10, T1-T2, T4, T6-T13) against autodiff, Monte Carlo,
finite differences and independent re-implementations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from repdyn.data.univariate import univariate_samples
from repdyn.theory import shallow_relu as sr
from repdyn.theory import shallow_relu_kernels as kr


def _random_net(rng: np.random.Generator, m: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return rng.normal(size=m), rng.normal(size=m), rng.normal(size=m)


def _samples(rng: np.random.Generator, s: int = 7) -> tuple[np.ndarray, np.ndarray]:
    return np.sort(rng.uniform(-1, 1, s)), rng.normal(size=s)


def _torch_loss(x: np.ndarray, y: np.ndarray, alpha: float):
    xt, yt = torch.tensor(x), torch.tensor(y)

    def loss(a, b, c):
        f = (c * torch.relu(a * xt[:, None] - b)).sum(-1) / alpha
        return 0.5 * ((f - yt) ** 2).sum()

    return loss


def test_canonical_map_reproduces_network_and_inverts_given_delta():
    """T1: f̃_{π(z)} = f_z with atan2 (erratum E1), and π⁻¹(π(z), δ(z)) = z, for α = m and α = √m."""
    rng = np.random.default_rng(0)
    a, b, c = _random_net(rng)
    m = a.size
    grid = np.linspace(-3, 3, 501)
    for alpha in (m, np.sqrt(m), 1.0):
        kappa = m / alpha
        r, theta = sr.to_canonical(a, b, c, kappa)
        f = sr.network(grid, a, b, c, alpha)
        np.testing.assert_allclose(sr.canonical_network(grid, r, theta), f, rtol=1e-12, atol=1e-12)
        a2, b2, c2 = sr.from_canonical(r, theta, sr.layer_imbalance(a, b, c), kappa)
        np.testing.assert_allclose(np.stack([a2, b2, c2]), np.stack([a, b, c]), rtol=1e-12, atol=1e-13)
    wrong = np.arctan(-b / a)  # the paper's literal Eq. (5)
    assert np.max(np.abs(sr.canonical_network(grid, r, wrong) - f)) > 0.1


def test_inverse_map_is_stable_at_large_delta():
    """P12: c² ρ² = r̂² and c² − ρ² = δ hold to relative precision even for |δ| ≫ |r̂|."""
    r_hat = np.array([1e-6, -3e-5, 2.0, 0.0, 0.0])
    delta = np.array([1e4, -1e4, 0.5, 2.0, -2.0])
    a, b, c = sr.from_canonical(r_hat, np.full(5, 0.3), delta, 1.0)
    ab = np.hypot(a, b)
    np.testing.assert_allclose(c * ab, r_hat, rtol=1e-12, atol=0)
    np.testing.assert_allclose(sr.layer_imbalance(a, b, c), delta, rtol=1e-12)


def test_gradients_match_autodiff_and_lemma3_identity():
    """Spec 001 §2.1 gradients (erratum E7 signs) vs autograd; T2: c∂_c L − a∂_a L − b∂_b L = 0 per neuron."""
    rng = np.random.default_rng(1)
    a, b, c = _random_net(rng)
    x, y = _samples(rng)
    alpha = np.sqrt(a.size)
    rho, ga, gb, gc = sr.loss_gradients(x, y, a, b, c, alpha)
    params = [torch.tensor(v, requires_grad=True) for v in (a, b, c)]
    _torch_loss(x, y, alpha)(*params).backward()
    for mine, p in zip((ga, gb, gc), params):
        np.testing.assert_allclose(mine, p.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rho, sr.network(x, a, b, c, alpha) - y, rtol=1e-14)
    identity = c * gc - a * ga - b * gb
    assert np.max(np.abs(identity)) <= 1e-12 * np.max(np.abs(c * gc))


def test_tangent_kernel_is_jacobian_gram():
    """Eq. (3): Θ = J Jᵀ with J from autograd, and the frozen-layer variants drop the right blocks."""
    rng = np.random.default_rng(2)
    a, b, c = _random_net(rng, m=15)
    x, _ = _samples(rng, 5)
    alpha = np.sqrt(15)
    xt = torch.tensor(x)

    def f(a_, b_, c_):
        return (c_ * torch.relu(a_ * xt[:, None] - b_)).sum(-1) / alpha

    jac = torch.func.jacrev(f, argnums=(0, 1, 2))(*(torch.tensor(v) for v in (a, b, c)))
    ja = torch.cat([jac[0], jac[1]], dim=1).numpy()
    jc = jac[2].numpy()
    np.testing.assert_allclose(sr.tangent_kernel(x, a, b, c, alpha), ja @ ja.T + jc @ jc.T, rtol=1e-12)
    np.testing.assert_allclose(sr.tangent_kernel(x, a, b, c, alpha, train_ab=False), jc @ jc.T, rtol=1e-12)
    np.testing.assert_allclose(sr.tangent_kernel(x, a, b, c, alpha, train_c=False), ja @ ja.T, rtol=1e-12)


def _canonical_loss(x: np.ndarray, y: np.ndarray):
    xt, yt = torch.tensor(x), torch.tensor(y)

    def loss(r, theta):
        f = (r * torch.relu(xt[:, None] * torch.cos(theta) + torch.sin(theta))).sum(-1) / r.numel()
        return 0.5 * ((f - yt) ** 2).sum()

    return loss


def test_canonical_velocity_field_matches_autodiff():
    """T7: Eq. (12) components equal autograd ∂L̃/∂r_i, ∂L̃/∂θ_i."""
    rng = np.random.default_rng(3)
    x, y = _samples(rng)
    r, theta = rng.normal(size=30), rng.uniform(0, 2 * np.pi, 30)
    rho = sr.canonical_network(x, r, theta) - y
    gr, gt = sr.canonical_gradient(x, rho, r, theta)
    rt, tt = torch.tensor(r, requires_grad=True), torch.tensor(theta, requires_grad=True)
    _canonical_loss(x, y)(rt, tt).backward()
    np.testing.assert_allclose(gr, rt.grad.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(gt, tt.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("alpha_kind", ["m", "sqrt", "one"])
def test_change_of_metric_prop4(alpha_kind):
    """T4: Dπ(−∇_z L) = −P_i ∇_{w_i} L̃ (Prop. 4 with the minus sign and κ of erratum E6), to 1e-10."""
    rng = np.random.default_rng(4)
    a, b, c = _random_net(rng, m=25)
    x, y = _samples(rng)
    m = a.size
    alpha = {"m": float(m), "sqrt": np.sqrt(m), "one": 1.0}[alpha_kind]
    kappa = m / alpha
    _, ga, gb, gc = sr.loss_gradients(x, y, a, b, c, alpha)

    def pi(a_, b_, c_):  # Eq. (5) in torch, an independent code path for the Jacobian
        return torch.stack([kappa * c_ * torch.sqrt(a_**2 + b_**2), torch.atan2(-b_, a_)])

    z = tuple(torch.tensor(v) for v in (a, b, c))
    velocity = [-torch.tensor(g) for g in (ga, gb, gc)]
    _, w_dot = torch.func.jvp(pi, z, tuple(velocity))
    r, theta = sr.to_canonical(a, b, c, kappa)
    rho = sr.canonical_network(x, r, theta) - y
    gr, gt = sr.canonical_gradient(x, rho, r, theta)
    p_rr, p_tt = sr.canonical_metric(a, b, c, kappa)
    expected = np.stack([-p_rr * gr, -p_tt * gt])
    np.testing.assert_allclose(w_dot.numpy(), expected, rtol=1e-10, atol=1e-12)
    assert not np.allclose(w_dot.numpy(), -expected, rtol=1e-3)


def test_residual_dynamics_prop1():
    """T6: Eq. (13) (region moments Σ_k) equals −m J_w J_wᵀ ρ with J_w from autograd, to 1e-10."""
    rng = np.random.default_rng(5)
    x, y = _samples(rng, 6)
    r, theta = rng.normal(size=50), rng.uniform(0, 2 * np.pi, 50)
    rho = sr.canonical_network(x, r, theta) - y
    xt = torch.tensor(x)

    def f(r_, t_):
        return (r_ * torch.relu(xt[:, None] * torch.cos(t_) + torch.sin(t_))).sum(-1) / r_.numel()

    jr, jt = torch.func.jacrev(f, argnums=(0, 1))(torch.tensor(r), torch.tensor(theta))
    jac = torch.cat([jr, jt], dim=1).numpy()
    expected = -r.size * jac @ jac.T @ rho
    np.testing.assert_allclose(sr.residual_velocity(x, rho, r, theta), expected, rtol=1e-10, atol=1e-12)


def test_sample_lines_and_arcs():
    """Erratum E3: the half-lines are at −arctan x_j and π − arctan x_j, and they cut 2s arcs with the listed
    activation sets (prefixes, suffixes, full, empty)."""
    x = np.array([-0.7, -0.1, 0.4, 0.9])
    right, left = sr.sample_line_angles(x)
    np.testing.assert_allclose(x * np.cos(right) + np.sin(right), 0, atol=1e-15)
    np.testing.assert_allclose(x * np.cos(left) + np.sin(left), 0, atol=1e-15)
    assert np.all(np.cos(right) > 0) and np.all(np.cos(left) < 0)
    theta = np.linspace(-np.pi, np.pi, 200001)
    patterns = (np.multiply.outer(np.cos(theta), x) + np.sin(theta)[:, None]) > 0
    distinct = {tuple(p) for p in patterns}
    s = x.size
    expected = {tuple(np.arange(s) < k) for k in range(1, s)} | {tuple(np.arange(s) >= k) for k in range(1, s)}
    expected |= {(True,) * s, (False,) * s}
    assert distinct == expected and len(distinct) == 2 * s


def test_attractor_condition_lemma2():
    """T8: the side-velocity classification agrees with −ρ_k²‖x̃_k‖² < ρ_k⟨G, x̃_k⟩ < 0 (erratum E5), and a
    sign-change half-line attracts exactly the particles with ε ρ_k > 0."""
    rng = np.random.default_rng(6)
    agree = total = attractors = 0
    for _ in range(300):
        x, _ = _samples(rng, rng.integers(2, 8))
        rho = rng.normal(size=x.size)
        cond = np.stack(sr.sample_line_condition(x, rho))
        for sign in (1.0, -1.0):
            below, above = sr.sample_line_side_velocities(x, rho, sign, offset=1e-7)
            attract = (below > 0) & (above < 0)
            repel = (below < 0) & (above > 0)
            agree += np.sum((attract | repel) == cond)
            total += cond.size
            np.testing.assert_array_equal(attract, cond & (sign * rho > 0))
            np.testing.assert_array_equal(repel, cond & (sign * rho < 0))
            attractors += attract.sum()
    assert agree == total and attractors > 50


def test_uniform_rf_kernel_closed_form_values():
    """Spec 001 §2.7: K(0,0) = 1/6, K(1,1) = 1/3, the in-box polynomial form, and the A/B scaling law."""
    assert kr.uniform_rf_kernel(0.0, 0.0) == pytest.approx(1 / 6, abs=1e-15)
    assert kr.uniform_rf_kernel(1.0, 1.0) == pytest.approx(1 / 3, abs=1e-15)
    rng = np.random.default_rng(7)
    x, xp = rng.uniform(-1, 1, (2, 50))
    lo, hi = np.minimum(x, xp), np.maximum(x, xp)

    def big_f(e):
        return x * xp * e - (x + xp) * e**2 / 2 + e**3 / 3

    box = (big_f(lo) - big_f(-1) + big_f(1) - big_f(hi)) / 16 + x * xp / 24 + 1 / 8
    np.testing.assert_allclose(kr.uniform_rf_kernel(x, xp), box, rtol=1e-13)


def _mc_check(samples: np.ndarray, closed: np.ndarray) -> None:
    mean = samples.mean(-1)
    err = samples.std(-1) / np.sqrt(samples.shape[-1])
    assert np.all(np.abs(mean - closed) <= 5 * err + 1e-12), (mean, closed, err)


def test_kernels_match_monte_carlo():
    """T10: the empirical RF kernel and NTK terms converge to the closed forms (U with A/B scaling, and G)."""
    rng = np.random.default_rng(8)
    m = 400_000
    x = np.array([-1.7, -0.6, 0.0, 0.5, 0.5, 1.0, 2.5])
    xp = np.array([0.3, -0.9, 0.0, 0.5, -0.2, 1.0, -1.2])
    for a_bound, b_bound in ((1.0, 1.0), (2.0, 0.5)):
        a, b = rng.uniform(-a_bound, a_bound, m), rng.uniform(-b_bound, b_bound, m)
        fx, fxp = kr.features(x, a, b), kr.features(xp, a, b)
        _mc_check(fx * fxp, kr.uniform_rf_kernel(x, xp, a_bound, b_bound))
    a, b = rng.uniform(-1, 1, (2, m))
    fx, fxp = kr.features(x, a, b), kr.features(xp, a, b)
    _mc_check(((fx > 0) & (fxp > 0)).astype(float), kr.uniform_active_kernel(x, xp))
    sigma = 0.7
    a, b = rng.normal(0, sigma, (2, m))
    fx, fxp = kr.features(x, a, b), kr.features(xp, a, b)
    _mc_check(fx * fxp, kr.gaussian_rf_kernel(x, xp, sigma))
    _mc_check(((fx > 0) & (fxp > 0)).astype(float), kr.gaussian_active_kernel(x, xp))
    c = rng.uniform(-1, 1, m)
    term_rf, term_active = kr.empirical_ntk_terms(x, xp, a, b, c)
    assert np.allclose(np.diag(term_rf), np.mean(fx * fxp, axis=1), rtol=1e-12)
    limit = kr.ntk_limit(x, xp, 1 / 3, init="gaussian")
    rf_part = kr.gaussian_rf_kernel(x, xp, sigma)
    active_part = (limit - kr.gaussian_rf_kernel(x, xp)) * 3  # (x x' + 1) K_1 for E[c²] = 1/3
    assert np.max(np.abs(np.diag(term_rf) - rf_part)) < 0.01
    assert np.max(np.abs(np.diag(term_active) - active_part / 3)) < 0.01


def test_knot_weight_is_slope_weighted_knot_density():
    """Erratum E9: ν(u) is the a²-weighted knot density (|a|³ in the b = a e substitution), for U and G."""
    rng = np.random.default_rng(9)
    n = 4_000_000
    edges = np.linspace(-2.5, 2.5, 26)
    for draw, nu in ((lambda: rng.uniform(-1, 1, (2, n)), kr.uniform_knot_weight),
                     (lambda: rng.normal(0, 1, (2, n)), kr.gaussian_knot_weight)):
        a, b = draw()
        hist, _ = np.histogram(b / a, bins=edges, weights=a**2)
        density = hist / n / np.diff(edges)
        # ν pairs each knot with both orientations; the a²-weighted knot density equals ν integrated per bin.
        fine = np.linspace(-2.5, 2.5, 50001)
        expected = np.add.reduceat(nu(fine[:-1]) * np.diff(fine), np.searchsorted(fine, edges[:-1]))
        np.testing.assert_allclose(density, expected / np.diff(edges), rtol=0.04)


def test_eq26_corrected_equals_arc_cosine_and_paper_form_is_wrong():
    """T11: the corrected Eq. (26) equals the arc-cosine kernel; the paper's sign gives −C/2π at (−1, 1)."""
    rng = np.random.default_rng(10)
    x, xp = rng.uniform(-3, 3, (2, 2000))
    np.testing.assert_allclose(kr.gaussian_rf_kernel_eq26(x, xp, 0.8), kr.gaussian_rf_kernel(x, xp, 0.8),
                               rtol=1e-12, atol=1e-14)

    def paper_eq26(u, v, big_c=2.0):
        return big_c / (4 * np.pi) * ((np.pi - np.arctan(v) + np.arctan(u)) * (u * v + 1)
                                      - (u / (1 + u**2) - v / (1 + v**2)) * (u * v - 1)
                                      + (u + v) * (v**2 / (1 + v**2) - u**2 / (1 + u**2)))

    assert paper_eq26(-1.0, 1.0) == pytest.approx(-2.0 / (2 * np.pi), rel=1e-12)
    assert kr.gaussian_rf_kernel(-1.0, 1.0) == pytest.approx(2.0 / (2 * np.pi), rel=1e-12)


def _second_difference(f, t: np.ndarray, h: float) -> np.ndarray:
    return (f(t + h) - 2 * f(t) + f(t - h)) / h**2


def test_uniform_interpolant_is_cubic_spline_with_knots_at_samples():
    """T12: the (U) K_RF interpolant of data in [−1, 1] has f'' = (1/16) Σ α_j |x − x_j| (Theorem 5 corrected)."""
    rng = np.random.default_rng(11)
    x, y = np.sort(rng.uniform(-0.9, 0.9, 6)), rng.normal(size=6)
    f = kr.kernel_interpolant(kr.uniform_rf_kernel, x, y)
    np.testing.assert_allclose(f(x), y, rtol=1e-10, atol=1e-10)
    t = np.linspace(-0.99, 0.99, 397)
    t = t[np.min(np.abs(t[:, None] - x), axis=1) > 2e-3]
    predicted = np.abs(t[:, None] - x) @ f.coef / 16
    np.testing.assert_allclose(_second_difference(f, t, 1e-3), predicted, atol=1e-6 * np.abs(predicted).max())


def test_two_point_interpolant_end_conditions():
    """Spec 001 §2.7 example: x = ±0.5, y = (0, 1): f'' runs from ≈ 0.5195 to ≈ −0.3377 and the largest gap to
    the line is ≈ 0.0155 near x ≈ −0.201 (the K_RF interpolant is not exactly the natural spline)."""
    f = kr.kernel_interpolant(kr.uniform_rf_kernel, np.array([-0.5, 0.5]), np.array([0.0, 1.0]))
    ends = np.abs(np.array([-0.5, 0.5])[:, None] - np.array([-0.5, 0.5])) @ f.coef / 16
    np.testing.assert_allclose(ends, [0.5195, -0.3377], atol=5e-4)
    t = np.linspace(-0.5, 0.5, 10001)
    gap = np.abs(f(t) - (t + 0.5))
    assert gap.max() == pytest.approx(0.0155, abs=5e-4) and t[gap.argmax()] == pytest.approx(-0.201, abs=5e-3)


def test_gaussian_interpolant_weighting():
    """T13: under (G), f''(x)(1 + x²)² is piecewise linear with kinks only at samples (ν of erratum E9);
    f''(x)(1 + x²) (the paper's |a| weight) is not."""
    rng = np.random.default_rng(12)
    x, y = np.array([-1.4, -0.6, 0.1, 0.8, 1.5]), rng.normal(size=5)
    f = kr.kernel_interpolant(kr.gaussian_rf_kernel, x, y)
    t = np.linspace(-2, 2, 801)
    t = t[np.min(np.abs(t[:, None] - x), axis=1) > 2e-3]
    curvature = _second_difference(f, t, 1e-3)
    predicted = np.abs(t[:, None] - x) @ f.coef / np.pi
    np.testing.assert_allclose(curvature * (1 + t**2) ** 2, predicted, atol=1e-6 * np.abs(predicted).max())
    gap = x[1] - x[0]
    inner = np.linspace(x[0] + gap / 10, x[1] - gap / 10, 9)
    paper = _second_difference(f, inner, 1e-3) * (1 + inner**2)
    assert np.max(np.abs(np.diff(paper, 2))) > 1e-3 * np.abs(paper).max()


def test_train_only_c_gradient_descent_closed_form():
    """T9: GD on c alone equals the finite-t closed form; its limit is c0 + Φ⁺(α y − Φ c0), and with pairing
    (f_0 ≡ 0) the function is the empirical min-norm kernel interpolant."""
    rng = np.random.default_rng(13)
    x, y = np.linspace(-1, 1, 6), rng.normal(size=6)
    m = 60
    half_a, half_b = rng.uniform(-1, 1, (2, m // 2))
    a, b = np.tile(half_a, 2), np.tile(half_b, 2)
    half_c = rng.uniform(-1, 1, m // 2) / np.sqrt(m)
    c0 = np.concatenate([half_c, -half_c])
    alpha = np.sqrt(m)
    phi = kr.features(x, a, b)
    lr = 0.9 / np.linalg.eigvalsh(phi @ phi.T / alpha**2).max()
    c = c0.copy()
    for _ in range(500):
        c -= lr * sr.loss_gradients(x, y, a, b, c, alpha)[3]
    np.testing.assert_allclose(kr.output_weights_after_gd(x, y, a, b, c0, alpha, lr, 500), c, rtol=1e-10,
                               atol=1e-12)
    limit = kr.output_weights_after_gd(x, y, a, b, c0, alpha, lr, np.inf)
    np.testing.assert_allclose(limit, c0 + np.linalg.pinv(phi) @ (alpha * y - phi @ c0), rtol=1e-8, atol=1e-10)
    grid = np.linspace(-1, 1, 101)

    def empirical(u, v):
        return kr.features(np.atleast_1d(u).ravel(), a, b) @ kr.features(np.atleast_1d(v).ravel(), a, b).T / m

    interpolant = kr.features(grid, a, b) @ phi.T @ np.linalg.solve(empirical(x, x), y) / m
    np.testing.assert_allclose(sr.network(grid, a, b, limit, alpha), interpolant, rtol=1e-8, atol=1e-8)
    with pytest.raises(ValueError, match="lr"):
        kr.output_weights_after_gd(x, y, a, b, c0, alpha, 3 * lr, np.inf)


def test_regime_measures():
    """M2/M3 sanity against their definitions: β = 1 on S_cub, 0 on S_lin; knots on samples give K_ε = 1;
    the uniform baseline is 2ε/h = 0.2."""
    x, y = np.linspace(-1, 1, 10), np.sin(np.pi * np.linspace(-1, 1, 10))
    grid = np.linspace(-1, 1, 2001)
    cub, lin = kr.natural_cubic_spline(x, y)(grid), kr.linear_interpolant(x, y)(grid)
    beta, dist = sr.spline_coordinate(np.stack([cub, lin]), cub, lin)
    np.testing.assert_allclose(beta, [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(dist, [0.0, 1.0], atol=1e-12)
    assert sr.knot_clustering_baseline(x) == pytest.approx(0.2, rel=1e-12)
    a = np.ones(10)
    assert sr.knot_clustering(x, a, x, np.ones(10)) == pytest.approx(1.0)
    e = np.linspace(-1, 1, 200001)
    assert sr.knot_clustering(x, np.ones_like(e), e, np.ones_like(e)) == pytest.approx(0.2, abs=1e-3)
    with pytest.raises(ValueError, match="sorted"):
        sr.knot_clustering(x[::-1], a, x, a)
    assert sr.mobility_ratio(np.array([-1e6, 0.0, 1e6]), np.ones(3)) == pytest.approx([0.0, 0.5, 1.0], abs=1e-6)


def test_knot_displacement_and_kernel_change():
    """M4 is the weighted mean knot shift over knots staying in the hull; M5 is the relative Frobenius change."""
    x = np.linspace(-1, 1, 5)
    a0, b0 = np.ones(3), np.array([0.0, 0.5, 3.0])
    a1, b1 = np.ones(3), np.array([0.1, 0.2, 3.0])
    assert sr.knot_displacement(x, a0, b0, a1, b1, np.array([1.0, 3.0, 5.0])) == pytest.approx((0.1 + 0.9) / 4)
    theta0 = np.eye(3) + 0.5
    assert sr.kernel_change(theta0, 2 * theta0) == pytest.approx(1.0)


def test_shape_measures_against_closed_forms():
    """N_eff of the linear interpolant is the participation ratio of its slope jumps at the samples (8.80 on
    SIN12); of the natural cubic spline, that of ∫ S'' over the bins (S' at the bin edges); one kink gives 1, and
    x² (uniform curvature over 111 bins, two of them half bins) gives 110²/109.5. D_shape is 0 on cubic-spline
    shapes, 1 on piecewise-linear ones, invariant under f → 3 + 2f, NaN on f ≡ 0; the regime position is the
    |r̂|-weighted median of δ/|r̂|."""
    x, y = univariate_samples("SIN12")
    grid = np.linspace(-1, 1, 2001)
    spline = kr.natural_cubic_spline(x, y)
    cub, lin = spline(grid), kr.linear_interpolant(x, y)(grid)
    jumps = np.diff(np.diff(y) / np.diff(x))
    pr = lambda w: np.sum(w) ** 2 / np.sum(w**2)  # noqa: E731
    width = (x[1] - x[0]) / sr.KINK_BINS_PER_SPACING
    edges = np.clip(x[0] + (np.arange(112) - 0.5) * width, x[0], x[-1])
    n_eff = sr.effective_kinks(x, grid, np.stack([lin, cub, grid**2, np.abs(grid - x[3]), grid]))
    assert n_eff[0] == pytest.approx(pr(np.abs(jumps)), rel=1e-9)
    assert n_eff[0] == pytest.approx(8.7953, abs=1e-4)
    assert n_eff[1] == pytest.approx(pr(np.abs(np.diff(spline(edges, 1)))), rel=2e-3)
    assert n_eff[2] == pytest.approx(110**2 / 109.5, rel=1e-2)
    assert n_eff[3] == pytest.approx(1.0, rel=1e-12)
    assert np.isnan(n_eff[4])
    masses = sr.kink_masses(x, grid, lin)
    assert masses.shape == (111,)
    np.testing.assert_allclose(masses[::10][1:-1], np.abs(jumps), rtol=1e-9)
    assert masses.sum() == pytest.approx(np.abs(jumps).sum(), rel=1e-12)
    with pytest.raises(ValueError, match="spacing"):
        sr.kink_masses(x, np.linspace(-1, 1, 101), np.linspace(-1, 1, 101))
    d_shape = sr.shape_coordinate(x, np.stack([y, y, 3 + 2 * y, 0 * y]), grid,
                                  np.stack([cub, lin, 3 + 2 * cub, 0 * grid]))
    np.testing.assert_allclose(d_shape[:3], [0.0, 1.0, 0.0], atol=1e-12)
    assert np.isnan(d_shape[3])
    r_hat = np.array([1.0, 2.0, 4.0])
    a, b, c = sr.from_canonical(r_hat, np.array([0.3, 1.0, 2.0]), np.array([-5.0, 0.0, 12.0]), 1.0)
    assert sr.regime_position(a, b, c) == pytest.approx(3.0)
    assert sr.regime_position(a[:2], b[:2], c[:2]) == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(sr.regime_position(np.stack([a, a]), np.stack([b, b]), np.stack([c, -c])), [3.0, 3.0])
