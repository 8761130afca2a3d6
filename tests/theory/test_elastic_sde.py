"""Tests of the locally elastic SDE theory (seed 004): closed forms vs solve_ivp, spectra, simulators vs exact laws,
separation probabilities (spec 004 §3.8 S-A, S-B, S-C, S-E)."""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from repdyn.theory import elastic_sde as es


def _rates():
    alpha = lambda t: 0.5 + 0.3 * np.sin(t)  # noqa: E731
    beta = lambda t: -0.1 + 0.2 * np.cos(2 * t)  # noqa: E731
    A = lambda t: 0.5 * t + 0.3 * (1 - np.cos(t))  # noqa: E731
    B = lambda t: -0.1 * t + 0.1 * np.sin(2 * t)  # noqa: E731
    return alpha, beta, A, B


def _solve(blocks, alpha, beta, x0, ts):
    K = blocks.shape[0]
    def rhs(t, y):
        return es.drift_matrix(float(alpha(t)), float(beta(t)), blocks) @ y
    sol = solve_ivp(rhs, (0, ts[-1]), x0.ravel(), t_eval=ts, method="DOP853", rtol=1e-13, atol=1e-14)
    return sol.y.T.reshape(len(ts), K, -1)


@pytest.mark.parametrize("K", [3, 4])
def test_logit_model_closed_form_matches_numerical_integration(K):
    alpha, beta, A, B = _rates()
    x0 = np.random.default_rng(K).standard_normal((K, K))
    ts = np.linspace(0, 8, 5)
    exact = _solve(es.logit_blocks(K), alpha, beta, x0, ts)
    closed = es.logit_model_mean(x0, ts, A, B, beta)
    assert np.abs(closed - exact).max() / np.abs(exact).max() < 1e-8


def test_isotropic_closed_form_eq7_matches_numerical_integration():
    alpha, beta, A, B = _rates()
    x0 = np.random.default_rng(1).standard_normal((3, 2))
    ts = np.linspace(0, 8, 5)
    exact = _solve(es.isotropic_blocks(3, 2), alpha, beta, x0, ts)
    assert np.abs(es.isotropic_mean(x0, A(ts), B(ts)) - exact).max() / np.abs(exact).max() < 1e-8


@pytest.mark.parametrize("K", [3, 4, 5])
def test_spectra_of_drift_matrix(K):
    a, b = 0.9, -0.25
    eig_L = np.sort(np.linalg.eigvals(es.drift_matrix(a, b, es.logit_blocks(K))).real)
    np.testing.assert_allclose(eig_L, es.logit_model_spectrum(a, b, K), atol=1e-12)
    eig_l = np.sort(np.linalg.eigvalsh(es.drift_matrix(a, b, es.isotropic_blocks(K, 2))))
    np.testing.assert_allclose(eig_l, es.isotropic_spectrum(a, b, K, 2), atol=1e-12)
    # d is the (α−β)/K eigenvector of the L-model
    d = es.margin_directions(K).ravel()
    np.testing.assert_allclose(es.drift_matrix(a, b, es.logit_blocks(K)) @ d, (a - b) / K * d, atol=1e-12)


def test_euler_ode_converges_to_flow():
    blocks = es.logit_blocks(3)
    y0 = np.random.default_rng(2).standard_normal((4, 3, 3))
    T = 2001
    h = 1e-3  # step 1 "iteration" with rates scaled by h approximates exp(M t) at t = 2
    path = es.simulate_le_ode(np.full(T, 1.0 * h), np.full(T, -0.2 * h), blocks, y0)
    flow = es.le_ode_flow(1.0, -0.2, blocks, 2.0)
    expected = (y0.reshape(4, 9) @ flow.T).reshape(4, 3, 3)
    assert np.abs(path[-1] - expected).max() < 5e-3 * np.abs(expected).max()


def test_discrete_dynamics_mean_follows_euler_recursion():
    rng = np.random.default_rng(3)
    K, n, p, h, m = 3, 4, 3, 0.05, 40
    blocks = es.logit_blocks(K)
    x0 = np.broadcast_to(rng.standard_normal((1, K, n, p)), (20000, K, n, p))
    x = es.simulate_discrete_le(x0, 1.0, -0.3, blocks, h, m, 0.1, rng)
    M = es.drift_matrix(1.0, -0.3, blocks)
    expected = np.linalg.matrix_power(np.eye(K * p) + h * M, m) @ x0[0].mean(axis=1).ravel()
    got = x.mean(axis=(0, 2)).ravel()
    se = x.mean(axis=2).reshape(len(x), -1).std(axis=0) / math.sqrt(len(x))
    assert np.all(np.abs(got - expected) < 5 * se + 1e-12)


def test_binary_mean_gap_variance_closed_form():
    # Var δ(t) = (2σ²/n)(e^{(α−β)t} − 1)/(α−β) for the empirical-mean coupling (spec 004 §2.3)
    rng = np.random.default_rng(4)
    R, n, t, a, b = 20000, 5, 20.0, 0.05, -0.05
    x0 = np.zeros((R, 2, n, 1))
    x0[:, 0] += 1.0
    x = es.sample_isotropic_exact(x0, lambda s: a * s, lambda s: b * s, 1.0, t, rng)
    delta = x[:, 0, :, 0].mean(axis=1) - x[:, 1, :, 0].mean(axis=1)
    var = 2 / n * (math.exp((a - b) * t) - 1) / (a - b)
    assert abs(delta.mean() - math.exp((a - b) * t / 2)) < 4 * math.sqrt(var / R)
    assert abs(delta.var() / var - 1) < 0.05


def test_euler_maruyama_matches_exact_sampler_moments():
    rng = np.random.default_rng(5)
    R, n = 20000, 4
    x0 = np.zeros((R, 2, n, 1))
    x0[:, 0] = 0.5
    blocks = es.isotropic_blocks(2, 1)
    xp, _ = es.simulate_le_sde(x0, 0.2, -0.1, blocks, 1.0, 5.0, 250, rng, method="particles")
    xr, _ = es.simulate_le_sde(x0, 0.2, -0.1, blocks, 1.0, 5.0, 250, rng, method="reduced")
    xx = es.sample_isotropic_exact(x0, lambda s: 0.2 * s, lambda s: -0.1 * s, 1.0, 5.0, rng)
    assert np.all(x0[:, 0] == 0.5) and np.all(x0[:, 1] == 0)  # inputs are not modified
    for x in (xp, xr, xx):
        assert x.shape == x0.shape
    means = [x.mean(axis=2)[:, :, 0] for x in (xp, xr, xx)]
    for m in means[:2]:
        np.testing.assert_allclose(m.mean(axis=0), means[2].mean(axis=0), atol=0.06)
    # closed form: v_c P_c + v_1 P_1 with v = (σ²/n)(e^{2λt} − 1)/(2λ), λ_c = 0.15, λ_1 = 0.05 (standard error ≈ 0.02)
    v_c, v_1 = 0.25 * math.expm1(1.5) / 0.3, 0.25 * math.expm1(0.5) / 0.1
    cov = v_c * np.array([[0.5, -0.5], [-0.5, 0.5]]) + v_1 * np.full((2, 2), 0.5)
    for m in means:
        np.testing.assert_allclose(np.cov(m.T), cov, atol=0.1)
    for x in (xp, xr):  # within-class spread: (n−1)/n σ² t plus the initial spread, both methods
        np.testing.assert_allclose(x.var(axis=2).mean(), xx.var(axis=2).mean(), rtol=0.03)


def test_separation_frequency_three_regimes_small():
    """S-A at small size: α>β → 1, α=β → 2/C(6,3) = 0.1, α<β → 0 with the empirical coupling."""
    rng = np.random.default_rng(6)
    R, n = 3000, 3
    x0 = rng.standard_normal((R, 2, 1, 1)) + 0.1 * rng.standard_normal((R, 2, n, 1))
    freq = {}
    for gap in (0.02, 0.0, -0.02):
        x = es.sample_isotropic_exact(x0, lambda s, g=gap: g / 2 * s, lambda s, g=gap: -g / 2 * s, 1.0, 1e4, rng)
        freq[gap] = es.binary_separated(x[:, 0, :, 0], x[:, 1, :, 0]).mean()
    assert freq[0.02] == 1.0
    p = es.intermixed_separation_probability(3)
    assert p == pytest.approx(0.1)
    assert abs(freq[0.0] - p) < 4 * math.sqrt(p * (1 - p) / R)
    assert freq[-0.02] < 0.005


def test_linear_separability_lp():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((50, 3)) + np.array([3.0, 0, 0])
    b = rng.standard_normal((50, 3)) - np.array([3.0, 0, 0])
    a[:, 0] = np.abs(a[:, 0]) + 0.01
    b[:, 0] = -np.abs(b[:, 0]) - 0.01
    assert es.linearly_separable(a, b)
    c = rng.standard_normal((60, 3))
    d = rng.standard_normal((60, 3))
    assert not es.linearly_separable(c, d)
    assert es.pairwise_separable(np.stack([a, b]))
    with pytest.raises(ValueError, match="same dimension"):
        es.linearly_separable(a, b[:, :2])


def test_mean_direction_certificate_gives_the_lp_answers():
    """The shortcut of linearly_separable (the class-mean difference as normal) answers as the LP alone, on clouds
    from well apart to intermixed, including separable ones whose mean direction does not separate them."""
    rng = np.random.default_rng(11)
    answers, shortcut = [], 0
    for shift in np.linspace(0.0, 6.0, 25):
        for _ in range(4):
            a = rng.standard_normal((30, 3)) + [shift, 0, 0]
            b = rng.standard_normal((30, 3))
            w = a.mean(0) - b.mean(0)
            shortcut += (a @ w).min() > (b @ w).max()
            answers.append((es.linearly_separable(a, b), es._separable_lp(a, b)))
    # separable along x only, but the means differ mostly along y: the certificate fails, the LP decides
    a = np.column_stack([rng.uniform(0.1, 1, 40), rng.uniform(-50, 50, 40), np.zeros(40)])
    b = np.column_stack([rng.uniform(-1, -0.1, 40), rng.uniform(-50, 50, 40) - 30, np.zeros(40)])
    w = a.mean(0) - b.mean(0)
    assert (a @ w).min() <= (b @ w).max()
    answers.append((es.linearly_separable(a, b), es._separable_lp(a, b)))
    assert answers[-1] == (True, True)
    assert all(fast == lp for fast, lp in answers)
    lp = [ans for _, ans in answers]
    assert 0 < shortcut < sum(lp) < len(lp)          # the shortcut, the LP's own separable and non-separable cases


def test_boundary_at_half_k():
    """S-B: for γ = γ0/(1+t), separable iff γ0 > K/2 (gap (1+t)^{γ0/K} against noise √t)."""
    rng = np.random.default_rng(8)
    K, p, n, R, t = 3, 3, 60, 20, 1e8
    sep = {}
    for g0 in (1.0, 3.0):
        x0 = rng.standard_normal((R, K, 1, p)) + 0.1 * rng.standard_normal((R, K, n, p))
        x = es.sample_isotropic_exact(x0, lambda s, g=g0: g * math.log1p(s), lambda s: 0.0, 1.0, t, rng)
        sep[g0] = np.mean([es.pairwise_separable(xr) for xr in x])
    assert es.boundary_gap_exponent(1.0, K) < 0 < es.boundary_gap_exponent(3.0, K)
    assert sep[1.0] == 0.0 and sep[3.0] == 1.0


def test_neural_collapse_etf_and_negative_control():
    """S-E: α = 1, β = −0.2 gives a simplex ETF of the class-mean logits; β = +0.2 does not."""
    rng = np.random.default_rng(9)
    x0 = rng.standard_normal((500, 9))
    blocks = es.logit_blocks(3)
    etf = es.etf_deviation((x0 @ es.le_ode_flow(1.0, -0.2, blocks, 150.0).T).reshape(-1, 3, 3))
    ctrl = es.etf_deviation((x0 @ es.le_ode_flow(1.0, 0.2, blocks, 150.0).T).reshape(-1, 3, 3))
    assert etf.max() < 1e-3
    assert np.median(ctrl) > 0.1
    S = es.simplex_etf(3)
    assert es.etf_deviation(S.T) < 1e-12
    assert es.norm_variation(S.T) < 1e-12
    np.testing.assert_allclose(np.abs(es.margin_alignment(S.T)), 1.0)


def test_theorem_3_1_conditions():
    assert es.satisfies_theorem_3_1(es.isotropic_blocks(3, 2))
    assert not es.satisfies_theorem_3_1(es.logit_blocks(3))  # H not symmetric: Prop. 3.3 replaces Thm 3.1
    np.testing.assert_allclose(es.separation_rate(1.0, -0.2, 3), 0.6)
    np.testing.assert_allclose(es.separation_rate(1.0, 0.2, 3), 0.8)



def test_shared_block_law_matches_moment_odes():
    """Theorem 3.1's eigen-expansion with a non-identity H and time-varying rates against an independent
    integration of the moment ODEs dm/dt = M m, dC/dt = M C + C Mᵀ + (σ²/n) I (DOP853)."""
    K, p, sigma, n, t = 3, 2, 0.7, 5, 2.5
    H = np.array([[1.6, 0.6], [0.6, 0.7]])
    alpha = lambda s: 1.0 + 0.3 * np.sin(s)  # noqa: E731
    beta = lambda s: 0.4 / (1 + s) - 0.2  # noqa: E731
    A = lambda s: s + 0.3 * (1 - np.cos(s))  # noqa: E731
    B = lambda s: 0.4 * np.log1p(s) - 0.2 * s  # noqa: E731
    blocks = es.shared_blocks(H, K)
    assert es.satisfies_theorem_3_1(blocks)
    xbar0 = np.random.default_rng(3).standard_normal((K, p))
    d = K * p

    def rhs(s, y):
        M = es.drift_matrix(float(alpha(s)), float(beta(s)), blocks)
        C = y[d:].reshape(d, d)
        return np.concatenate([M @ y[:d], (M @ C + C @ M.T + sigma**2 / n * np.eye(d)).ravel()])

    sol = solve_ivp(rhs, (0.0, t), np.concatenate([xbar0.ravel(), np.zeros(d * d)]), method="DOP853",
                    rtol=1e-12, atol=1e-12)
    mean, cov = es.shared_block_law(xbar0, A, B, H, sigma, n, t)
    np.testing.assert_allclose(mean.ravel(), sol.y[:d, -1], rtol=1e-9)
    np.testing.assert_allclose(cov, sol.y[d:, -1].reshape(d, d), rtol=1e-8, atol=1e-10)
    # the identity-H law (Eq. (7)) is a different law here: the class differences grow at h_j (A − B)/K
    iso = es.isotropic_mean(xbar0, np.array([A(t)]), np.array([B(t)]))[0]
    assert np.abs(iso - mean).max() > 0.1

def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="K=1"):
        es.le_matrix(1.0, 0.0, 1)
    with pytest.raises(ValueError, match="coupling"):
        es.simulate_le_sde(np.zeros((1, 2, 2, 1)), 1.0, 0.0, es.isotropic_blocks(2, 1), 1.0, 1.0, 2,
                           np.random.default_rng(0), coupling="mean-field")
    with pytest.raises(ValueError, match="n=0"):
        es.intermixed_separation_probability(0)
