"""Invariants of the two-point effective theory (seed 000, spec 000 §2 and §4 acceptance checks)."""

import math

import numpy as np
import pytest

from repdyn.theory import effective_theory as et

X, Y = 0.25, 1.0


def scalar_start(u0: float, v0: float, Y: float = Y, sign: float = 1.0) -> tuple[float, float, float]:
    """An initial state on the scalar-output constraint w = v − sign·sqrt(vY) (spec 000 §2.1)."""
    return u0, v0, v0 - sign * math.sqrt(v0 * Y)


@pytest.mark.parametrize("rates, start", [((0.02, 0.005), scalar_start(4e-4, 1e-9)),
                                          ((1.0, 3.0), scalar_start(0.3, 0.2, sign=-1.0)),
                                          ((0.5, 0.05), scalar_start(2e-6, 1e-12))])
def test_conserved_quantity_and_fixed_point(rates, start):
    rate_h, rate_y = rates
    t = np.linspace(0, 2e5 / min(rates), 400)
    traj = et.integrate_dynamics(start, X, Y, rate_h, rate_y, t)
    q = et.conserved_quantity(traj.u, traj.v, X, rate_h, rate_y)
    term_scale = np.maximum(traj.v / traj.u / rate_y, traj.u / (X * rate_h))  # Q is a difference of these
    assert np.max(np.abs(q - q[0]) / term_scale) <= 1e-6
    expected = et.fixed_point_distance(start[0], start[1], X, Y, rate_h / rate_y)
    assert traj.u[-1] == pytest.approx(float(expected), rel=1e-6)
    assert traj.v[-1] == pytest.approx(Y, rel=1e-6)
    assert abs(traj.w[-1]) < 1e-6
    # w stays above −Y/4 and the scalar-output constraint (v − w)² = vY is preserved.
    assert traj.w.min() >= -Y / 4 - 1e-9
    np.testing.assert_allclose((traj.v - traj.w) ** 2, traj.v * Y, rtol=1e-5, atol=1e-14)


def test_equal_targets_match_closed_form():
    rate_h, rate_y = 0.3, 2.5  # τ_y ≠ 1, where the printed exponent of Eq. 39 would be wrong
    u0, v0 = 0.05, 1e-3
    t = np.linspace(0, 60, 301)
    traj = et.integrate_dynamics((u0, v0, v0), X, 0.0, rate_h, rate_y, t)
    exact = et.equal_target_solution(t, u0, v0, X, rate_h, rate_y)
    np.testing.assert_allclose(traj.u, exact.u, rtol=1e-7)
    np.testing.assert_allclose(traj.v, exact.v, rtol=1e-6, atol=1e-15)
    np.testing.assert_allclose(traj.w, traj.v, rtol=1e-6, atol=1e-15)
    a_high = float(et.a_high(u0, v0, X, rate_h / rate_y))
    assert et.equal_target_solution(np.array([1e4]), u0, v0, X, rate_h, rate_y).u[0] == pytest.approx(a_high)


def test_reduced_system_matches_full_system():
    rate_h, rate_y = 0.7, 0.2
    start = scalar_start(0.01, 1e-4)
    t = np.linspace(0, 400, 801)
    traj = et.integrate_dynamics(start, X, Y, rate_h, rate_y, t)
    C = et.reduction_constant(start[0], start[1], X, rate_h, rate_y)
    full = et.vector_field(traj.stacked(), X, Y, rate_h, rate_y)
    reduced = et.reduced_vector_field(traj.u, traj.w, C, X, Y, rate_h, rate_y)
    np.testing.assert_allclose(reduced[:, 0], full[:, 0], rtol=1e-12)
    np.testing.assert_allclose(reduced[:, 1], full[:, 2], rtol=1e-5, atol=1e-7 * np.abs(full[:, 2]).max())
    # C = −(τ_h/τ_y) A_high / X (spec 000 §2.6).
    a_high = float(et.a_high(start[0], start[1], X, rate_h / rate_y))
    assert C == pytest.approx(-(rate_y / rate_h) * a_high / X, rel=1e-12)


def test_fixed_point_jacobian_trace_determinant_and_finite_differences():
    rate_h, rate_y, u0, v0 = 0.4, 0.9, 0.2, 0.05
    C = et.reduction_constant(u0, v0, X, rate_h, rate_y)
    u_star = float(et.fixed_point_distance(u0, v0, X, Y, rate_h / rate_y))
    assert np.allclose(et.reduced_vector_field(u_star, 0.0, C, X, Y, rate_h, rate_y), 0, atol=1e-14)
    J = et.fixed_point_jacobian(X, Y, u0, v0, rate_h, rate_y)
    eps = 1e-6
    numeric = np.stack([(et.reduced_vector_field(u_star + e[0], e[1], C, X, Y, rate_h, rate_y)
                         - et.reduced_vector_field(u_star - e[0], -e[1], C, X, Y, rate_h, rate_y)) / (2 * eps)
                        for e in (np.array([eps, 0]), np.array([0, eps]))], axis=1)
    np.testing.assert_allclose(J, numeric, rtol=1e-7, atol=1e-9)
    tau_y = 1 / rate_y
    ah = float(et.a_high(u0, v0, X, rate_h / rate_y))
    al2 = float(et.a_low(X, Y, rate_h / rate_y)) ** 2
    root = math.sqrt(ah**2 + 4 * al2)
    assert np.trace(J) == pytest.approx(-(0.5 * ah + root) / tau_y, rel=1e-12)  # Eq. 30
    assert np.linalg.det(J) == pytest.approx(0.25 / tau_y**2 * (2 * al2 + 0.5 * (ah + root) ** 2), rel=1e-10)
    assert np.all(np.linalg.eigvals(J).real < 0)


def test_origin_eigenpairs():
    rate_h, rate_y, u0, v0 = 0.4, 0.9, 0.2, 0.05
    C = et.reduction_constant(u0, v0, X, rate_h, rate_y)
    values, vectors = et.origin_eigenpairs(X, Y, u0, v0, rate_h, rate_y)
    assert values[0] > 0 > values[1]
    eps = 1e-7
    for k in range(2):
        direction = vectors[:, k]
        field = et.reduced_vector_field(eps * direction[0], eps * direction[1], C, X, Y, rate_h, rate_y)
        np.testing.assert_allclose(field, eps * values[k] * direction, rtol=1e-5)


def test_matrix_model_reproduces_the_reduced_ode_on_the_aligned_manifold():
    rng = np.random.default_rng(0)
    rate_h, rate_y, rate_ybar = 0.6, 0.3, 0.2
    dx, dy, m = np.array([0.5]), np.array([1.0]), np.array([1.1])
    D_h = rng.standard_normal((6, 1)) * 0.05
    D_y = 0.02 * (D_h @ dx)[None, :] / np.linalg.norm(D_h @ dx)  # D_yᵀ ∥ dh: aligned (spec 000 §2.4)
    start = et.MatrixState(ybar=np.array([0.3]), D_h=D_h, D_y=D_y)
    t = np.linspace(0, 300, 61)
    states = et.integrate_matrix_model(start, dx, dy, m, rate_h, rate_y, rate_ybar, t)
    observed = np.array([et.matrix_model_observables(s, dx, dy) for s in states])
    traj = et.integrate_dynamics(tuple(observed[0]), float(dx @ dx), float(dy @ dy), rate_h, rate_y, t)
    np.testing.assert_allclose(observed, traj.stacked(), rtol=1e-6, atol=1e-10)
    # ȳ follows Eq. 18 and the invariant Q of spec 000 §2.3 is conserved.
    np.testing.assert_allclose([s.ybar[0] for s in states], et.output_mean(t, [0.3], m, rate_ybar)[:, 0],
                               rtol=1e-8)
    Q0 = et.matrix_model_invariant(states[0], dx, rate_h, rate_y)
    assert max(np.abs(et.matrix_model_invariant(s, dx, rate_h, rate_y) - Q0).max() for s in states) < 1e-8


def test_matrix_model_is_gradient_flow_of_the_loss_with_the_half_form():
    """Eq. 17 (½ form, spec 000 §2.3 erratum) = −(2/τ)∂L/∂D for the loss of Eq. 16; checked by finite
    differences, and Eq. 9 equals the two-point loss."""
    rng = np.random.default_rng(1)
    dx, dy, m = rng.standard_normal(2), rng.standard_normal(3), rng.standard_normal(3)
    state = et.MatrixState(ybar=rng.standard_normal(3), D_h=rng.standard_normal((4, 2)),
                           D_y=rng.standard_normal((3, 4)))

    def two_point_loss(D_h: np.ndarray, D_y: np.ndarray) -> float:
        preds = [state.ybar + s * 0.5 * D_y @ D_h @ dx for s in (-1, 1)]
        targets = [m - 0.5 * dy, m + 0.5 * dy]
        return 0.5 * np.mean([np.sum((p - y) ** 2) for p, y in zip(preds, targets, strict=True)])

    d = et.matrix_model_derivative(state, dx, dy, m, 1.0, 1.0, 1.0)
    eps = 1e-6
    for name, matrix in (("D_h", state.D_h), ("D_y", state.D_y)):
        grad = np.zeros_like(matrix)
        for idx in np.ndindex(matrix.shape):
            plus, minus = matrix.copy(), matrix.copy()
            plus[idx] += eps
            minus[idx] -= eps
            args_p = (plus, state.D_y) if name == "D_h" else (state.D_h, plus)
            args_m = (minus, state.D_y) if name == "D_h" else (state.D_h, minus)
            grad[idx] = (two_point_loss(*args_p) - two_point_loss(*args_m)) / (2 * eps)
        np.testing.assert_allclose(getattr(d, name), -2 * grad, rtol=1e-6, atol=1e-9)
    u, v, w = et.matrix_model_observables(state, dx, dy)
    assert float(et.loss(state.ybar, m, v, w, float(dy @ dy))) == pytest.approx(
        two_point_loss(state.D_h, state.D_y), rel=1e-12)


def test_lazy_rescaling_replaces_Y_by_Y_over_G_squared():
    gain = 8.0
    rate_h, rate_y = 0.5, 0.2
    start = scalar_start(0.4 * gain, 0.02 * gain**2)
    t = np.linspace(0, 20, 101)
    rescaled = et.lazy_rescaled(et.integrate_dynamics(start, X, Y, rate_h, rate_y, t), gain)
    direct = et.integrate_dynamics((start[0] / gain, start[1] / gain**2, start[2] / gain**2), X, Y / gain**2,
                                   rate_h, rate_y, rescaled.t)
    np.testing.assert_allclose(rescaled.stacked(), direct.stacked(), rtol=1e-6, atol=1e-12)


def test_final_distance_distribution_matches_monte_carlo():
    rng = np.random.default_rng(2)
    gain, x2, y2 = 0.3, 0.25, 1.0
    n = 400_000
    u0 = x2 * (gain + gain * rng.standard_normal(n))
    ratio = gain + gain * rng.standard_normal(n)
    a_high = u0 - x2 * ratio  # τ_y/τ_h = 1 (App. A.6): A_high = u0 − X v0/u0 with v0/u0 = ratio
    a_low = math.sqrt(x2 * y2)
    final = 0.5 * a_high + np.sqrt(0.25 * a_high**2 + a_low**2)
    h = np.linspace(0.05, 1.5, 12)
    empirical = (final[:, None] < h).mean(axis=0)
    np.testing.assert_allclose(et.final_distance_cdf(h, a_low, x2, gain), empirical, atol=4e-3)
    # The pdf is the derivative of the cdf.
    eps = 1e-6
    numeric = (et.final_distance_cdf(h + eps, a_low, x2, gain) - et.final_distance_cdf(h - eps, a_low, x2, gain))
    np.testing.assert_allclose(et.final_distance_pdf(h, a_low, x2, gain), numeric / (2 * eps), rtol=1e-5, atol=1e-8)


def _a6_sample(rng, n, gain, x2, y2):
    """Final ‖dh‖² drawn through Eq. 10 from App. A.6's initialisation model (τ_y/τ_h = 1)."""
    a_high = x2 * ((gain + gain * rng.standard_normal(n)) - (gain + gain * rng.standard_normal(n)))
    a_low = math.sqrt(x2 * y2)
    return 0.5 * a_high + np.sqrt(0.25 * a_high**2 + a_low**2), a_low


def test_ks_distance_of_eq47_is_small_on_its_own_samples_and_large_on_others():
    rng = np.random.default_rng(5)
    gain, x2, y2, n = 0.3, 0.25, 1.0, 30
    crit = et.ks_critical(n)
    own, other, wider = [], [], []
    for _ in range(200):
        final, a_low = _a6_sample(rng, n, gain, x2, y2)
        own.append(et.final_distance_ks(final, a_low, x2, gain))
        other.append(et.final_distance_ks(_a6_sample(rng, n, 3 * gain, x2, y2)[0], a_low, x2, gain))
        wider.append(et.final_distance_ks(rng.lognormal(math.log(a_low), 0.1, n), a_low, x2, 0.01))
    own, other, wider = map(np.asarray, (own, other, wider))
    # A sample from Eq. 47 exceeds the 5 % critical value about 5 % of the time (binomial sd of 200 draws: 1.5 %).
    assert 0.0 < np.mean(own > crit) < 0.11
    assert np.median(own) < 0.6 * crit
    # Three times the gain (a wider distribution) and a 10 % spread around A_low at G = 0.01 are rejected.
    assert np.mean(other > crit) > 0.9
    assert np.all(wider > 1.5 * crit)  # the PITs sit at 0 or 1: D is at least the larger of the two shares


def test_ks_critical_values_match_the_tables():
    # Massey (1951), two-sided 5 %: n = 10: 0.41, n = 20: 0.29; large n: 1.36 / sqrt(n)
    assert et.ks_critical(10) == pytest.approx(0.409, abs=1e-3)
    assert et.ks_critical(20) == pytest.approx(0.294, abs=1e-3)
    assert et.ks_critical(2000) * math.sqrt(2000) == pytest.approx(1.358, abs=0.01)
    # and by simulation: the KS distance of n uniforms from the uniform cdf
    rng = np.random.default_rng(0)
    u = np.sort(rng.random((20000, 7)), axis=1)
    i = np.arange(1, 8)
    d = np.maximum((i / 7 - u).max(axis=1), (u - (i - 1) / 7).max(axis=1))
    assert np.mean(d > et.ks_critical(7)) == pytest.approx(0.05, abs=0.006)
    with pytest.raises(ValueError):
        et.final_distance_ks(np.array([0.1, -0.2]), 0.5, 0.25, 0.3)


def test_exponential_weighting_is_E_D_E():
    D = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]])
    P = et.exponentially_weighted(D)
    brute = np.array([[sum(math.exp(-D[i, k]) * math.exp(-D[l, j]) * D[k, l] for k in range(3) for l in range(3))
                       for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(P, brute, rtol=1e-12)
    with pytest.raises(ValueError, match="square"):
        et.exponentially_weighted(np.ones((2, 3)))


def test_perturbed_variants_change_one_term():
    state = np.array([0.3, 0.2, -0.1])
    base = et.vector_field(state, X, Y, 0.5, 0.7)
    u, v, w = state
    assert et.vector_field(state, X, Y, 0.5, 0.7, "factor_two")[1] == pytest.approx(2 * base[1])
    assert et.vector_field(state, X, Y, 0.5, 0.7, "square")[0] == pytest.approx(-X * 0.5 * w * w)
    second = 0.5 * X * 0.5 * (v + w) * w / u
    assert et.vector_field(state, X, Y, 0.5, 0.7, "minus_sign")[2] == pytest.approx(base[2] + 2 * second)
    assert et.vector_field(state, X, Y, 0.5, 0.7, "drop_term")[1] == pytest.approx(-w * u * 0.7)
    with pytest.raises(ValueError, match="variant"):
        et.vector_field(state, X, Y, 0.5, 0.7, "other")


def test_fit_recovers_rates_and_reports_failure():
    t = np.arange(0, 3000.0, 2.0)
    start = scalar_start(4e-4, 1e-9)
    truth = et.integrate_dynamics(start, X, Y, 0.02, 0.005, t)
    fit = et.fit_rates(t, truth.u, truth.v, truth.w, X, Y)
    assert fit.rate_h == pytest.approx(0.02, rel=1e-3)
    assert fit.rate_y == pytest.approx(0.005, rel=1e-3)
    scale = et.fit_objective(truth.stacked(), np.zeros((t.size, 3)), t)
    assert fit.loss < 1e-8 * scale  # exact data: only the search tolerance remains
    # The perturbed dynamics fit the true trajectory worse (Fig. 11 logic).
    worse = et.fit_rates(t, truth.u, truth.v, truth.w, X, Y, variant="minus_sign")
    assert worse.loss > 100 * max(fit.loss, 1e-8)
    # A flat trajectory cannot determine a time scale: the fit must fail loudly.
    flat = np.full_like(t, 4e-4)
    with pytest.raises(et.FitError):
        et.fit_rates(t, flat, np.full_like(t, 1e-9), np.full_like(t, start[2]), X, Y)


def test_fit_widens_its_window_to_tiny_rate_ratios():
    """A deep read-out layer needs τ_y/τ_h <= 1e-4 and starts with w(0) > 0, so Eq. 7 cannot be
    integrated anywhere near the first guess; the search must move outwards and find the ratio."""
    t = np.linspace(0.0, 4000.0, 401)
    truth = et.integrate_dynamics((1e-5, 1e-3, 5e-3), 0.25, 1.0, 1e-7, 1e-2, t)  # τ_y/τ_h = 1e-5
    with pytest.raises(et.FitError, match="any rate ratio"):
        et.fit_rates(t, truth.u, truth.v, truth.w, 0.25, 1.0, max_decades=0.0)
    fit = et.fit_rates(t, truth.u, truth.v, truth.w, 0.25, 1.0)
    assert fit.tau_ratio == pytest.approx(1e-5, rel=1e-2)
    assert fit.rate_y == pytest.approx(1e-2, rel=1e-2)


def test_fit_output_mean_rate():
    t = np.arange(0, 3000.0, 2.0)
    theory = et.integrate_dynamics(scalar_start(4e-4, 1e-9), X, Y, 0.02, 0.005, t)
    m, ybar0 = np.array([1.1]), np.array([0.02])
    measured = et.loss(et.output_mean(t, ybar0, m, 0.01), m, theory.v, theory.w, Y)
    rate, fit_loss = et.fit_output_mean_rate(t, measured, ybar0, m, theory, Y)
    assert rate == pytest.approx(0.01, rel=1e-4)
    assert fit_loss < 1e-10
    # On the plateau (t = 400: mean fitted, dy ≈ 0) the loss is ≈ Y/8 (spec 000 §2.5).
    assert measured[200] == pytest.approx(Y / 8, rel=1e-2)


def test_bad_inputs_raise_value_errors():
    t = np.linspace(0, 1, 5)
    with pytest.raises(ValueError, match="u\\(0\\)"):
        et.integrate_dynamics((0.0, 1.0, 0.0), X, Y, 1.0, 1.0, t)
    with pytest.raises(ValueError, match="rate_h"):
        et.integrate_dynamics((1.0, 1.0, 0.0), X, Y, -1.0, 1.0, t)
    with pytest.raises(ValueError, match="increasing"):
        et.integrate_dynamics((1.0, 1.0, 0.0), X, Y, 1.0, 1.0, t[::-1])
    with pytest.raises(ValueError, match="same length"):
        et.fit_rates(t, t[:3], t, t, X, Y)
