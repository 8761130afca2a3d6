"""Checks T1-T7, T9, T10, T12, T13 of spec 002 §3.15 on the Leaky ResNet mechanics (seed 002).

T6 and T7 (stationarity, a flat Hamiltonian) are checked on an exact critical point built by shooting; the
trained-network checks (T8, T11 and T6-T7 after training) are in tests/nn/ and tests/experiments/.
"""

import math

import pytest
import torch

from repdyn.probes.rank import nuclear_rank_ratio, stable_rank
from repdyn.theory import leaky_resnet as lr


@pytest.fixture(autouse=True)
def float64_default():
    """These checks compare against closed forms in float64; restore the default for the rest of the suite."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _random(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> torch.Tensor:
    return scale * torch.randn(*shape, generator=_gen(seed), dtype=torch.float64)


# ------------------------------------------------------------------------------------------------ COI (T3)


def test_coi_without_bias_is_rank_for_nonnegative_representations():
    # spec 002 §3.6: ||A||^2_{K~} = Rank A when A >= 0 (a rank-3 non-negative 7 x 12 matrix).
    A = (_random((7, 3), 1).abs() @ _random((3, 12), 2).abs())
    assert lr.cost_of_identity(A, bias=False).item() == pytest.approx(3.0, rel=1e-9)


def test_coi_constant_row_example():
    # spec 002 §3.6: A = c 1^T gives 1 without bias and c^2 / (c^2 + 1) with bias.
    c = 1.7
    A = torch.full((1, 5), c)
    assert lr.cost_of_identity(A, bias=False).item() == pytest.approx(1.0, rel=1e-12)
    assert lr.cost_of_identity(A).item() == pytest.approx(c**2 / (c**2 + 1), rel=1e-12)


def test_coi_is_infinite_outside_the_feature_row_space():
    # A negative row with N > w + 1 samples is not reachable from sigma(A): the exact COI is +inf.
    A = -_random((2, 9), 3).abs()
    assert math.isinf(lr.cost_of_identity(A).item())
    # ... while the gamma-stable version is finite and grows like 1 / gamma (spec 002 §7 P6).
    small, large = lr.cost_of_identity(A, 1e-4), lr.cost_of_identity(A, 1e-2)
    assert math.isfinite(small.item()) and small / large == pytest.approx(100, rel=0.05)


def test_proposition1_nuclear_bound_on_random_signed_matrices():
    # Prop. 1 of seed 002: ||A||^2_{K~} >= ||A||_*^2 / ||A||_F^2 >= ||A||_F^2 / ||A||_op^2, rank >= both.
    for seed in range(40):
        w, N = 3 + seed % 4, 4 + seed % 5
        A = _random((w, N), 100 + seed)
        coi = lr.cost_of_identity(A, bias=False).item()
        nuc = nuclear_rank_ratio(A).item()
        assert coi >= nuc - 1e-9
        assert torch.linalg.matrix_rank(A).item() >= nuc - 1e-9 >= stable_rank(A).item() - 2e-9


def test_gamma_coi_converges_to_exact_coi():
    # For a full-rank kernel (N <= w + 1), ||A||^2_(K + gamma I) -> ||A||^2_K as gamma -> 0.
    A = _random((6, 5), 4)
    exact = lr.cost_of_identity(A).item()
    assert lr.cost_of_identity(A, 1e-9).item() == pytest.approx(exact, rel=1e-6)
    assert lr.kernel_norm_sq(A, lr.kernel(A)).item() == pytest.approx(exact, rel=1e-9)


def test_gamma_p_is_gamma0_times_lambda_max_of_K():
    # Erratum P5(c): gamma_p = gamma_0 ||sigma(A)||_op^2 = gamma_0 lambda_max(K).
    A = _random((5, 8), 5)
    lam_max = torch.linalg.eigvalsh(lr.kernel(A))[-1]
    assert lr.adaptive_gamma(A, 1e-3).item() == pytest.approx(1e-3 * lam_max.item(), rel=1e-10)
    assert lam_max.item() >= 8  # the bias row alone gives 1 1^T with eigenvalue N


def test_bad_inputs_raise_value_errors():
    A = _random((3, 4), 6)
    with pytest.raises(ValueError, match="gamma"):
        lr.kernel_norm_sq(A, lr.kernel(A), -1.0)
    with pytest.raises(ValueError, match="positive definite"):
        lr.kernel_norm_sq(A, torch.ones(4, 4), 0.0)
    with pytest.raises(ValueError, match="a=1.5"):
        lr.irregular_steps(6, a=1.5)
    with pytest.raises(ValueError, match="scheme"):
        lr.step_scheme("random", 4)
    with pytest.raises(ValueError, match="rho has"):
        lr.leaky_forward(_random((3, 4, 5), 7), torch.ones(2) / 2, A[:4], 1.0)


# ---------------------------------------------------------------------------------- Theorem 4 (T1, T2, T9)


@pytest.mark.parametrize("seed", range(6))
def test_theorem4_identity_holds_exactly(seed):
    # T1: [T4-ID] for random A, B, gamma once dA := L~ (B K - A).
    A, B = _random((6, 10), seed), _random((6, 10), 50 + seed, 0.3)
    ltilde, gamma = 0.5 + seed, 10.0 ** (-1 - seed % 3)
    dA = lr.hamiltonian_vector_field(A, B, ltilde)[0]
    H = lr.hamiltonian(A, B, ltilde)
    assert lr.theorem4_rhs(A, dA, B, ltilde, gamma).item() == pytest.approx(H.item(), rel=1e-10)


def test_eq2_energy_decomposition_with_full_rank_kernel():
    # T2: with N <= w + 1 and B = (A + dA / L~) K^+, Eq. (1) = kinetic + potential (Eq. (2) of seed 002).
    A, dA, ltilde = _random((7, 6), 11), _random((7, 6), 12), 3.0
    B = lr.minimal_norm_momentum(A, dA, ltilde)
    K = lr.kernel(A)
    expected = lr.kernel_norm_sq(dA, K) / (2 * ltilde) - ltilde / 2 * lr.kernel_norm_sq(A, K)
    assert lr.hamiltonian(A, B, ltilde).item() == pytest.approx(expected.item(), rel=1e-10)
    # ... and B reproduces dA through the dynamics, dA = L~ (B K - A).
    torch.testing.assert_close(lr.hamiltonian_vector_field(A, B, ltilde)[0], dA, rtol=1e-9, atol=1e-9)


def test_lagrangian_decomposes_and_is_the_min_norm_weight_cost():
    # [E-DECOMP]: L = COI term + middle + kinetic; [E-WMIN]: L = ||W||^2 / (2 L~) for the min-norm W with
    # W sigma(A) = L~ A + dA; and H of Eq. (1) is its Legendre transform, H = <B, dA> - L with B = dL/d(dA).
    A, dA, ltilde = _random((7, 6), 13), _random((7, 6), 14), 2.5
    terms = lr.lagrangian_terms(A, dA, ltilde)
    total = terms["coi_term"] + terms["middle"] + terms["kinetic"]
    assert total.item() == pytest.approx(terms["lagrangian"].item(), rel=1e-10)
    S = lr.relu_features(A)
    W = torch.linalg.lstsq(S.T, (ltilde * A + dA).T, driver="gelsd").solution.T
    torch.testing.assert_close(W @ S, ltilde * A + dA)
    assert terms["lagrangian"].item() == pytest.approx(((W**2).sum() / (2 * ltilde)).item(), rel=1e-9)
    velocity = dA.clone().requires_grad_(True)
    lagrangian = lr.kernel_norm_sq(ltilde * A + velocity, lr.kernel(A)) / (2 * ltilde)
    (B,) = torch.autograd.grad(lagrangian, velocity)
    torch.testing.assert_close(B, lr.minimal_norm_momentum(A, dA, ltilde))
    legendre = (B * dA).sum() - lagrangian.detach()
    assert lr.hamiltonian(A, B, ltilde).item() == pytest.approx(legendre.item(), rel=1e-10)


def test_lagrangian_is_infinite_when_the_velocity_leaves_the_feature_row_space():
    A = _random((3, 8), 15)
    terms = lr.lagrangian_terms(A, _random((3, 8), 16), 1.0)
    assert torch.isinf(terms["lagrangian"]) and torch.isinf(terms["kinetic"])


@pytest.mark.parametrize("seed", range(6))
def test_theorem4_bounds_eq3_and_speed(seed):
    # T9: Eq. (3) and the speed bound of Theorem 4 for random A, B with dA := L~ (B K - A).
    A, B = _random((5, 12), 20 + seed), _random((5, 12), 70 + seed, 0.2)
    ltilde, gamma = 2.0 + seed, 10.0 ** (-seed % 4)
    dA = lr.hamiltonian_vector_field(A, B, ltilde)[0]
    out = lr.theorem4_bounds(A, dA, B, ltilde, gamma)
    c_sq = (B**2).sum()
    assert out["eq3_gap"] <= out["eq3_bound"] * (1 + 1e-10)
    assert out["speed_gap"] <= out["speed_bound"] * (1 + 1e-10)
    assert out["radicand"] >= -gamma * c_sq * (1 + 1e-10)


# ------------------------------------------------------------------------ Hamiltonian flow (T4, T10, Eq. 4)


def _flow_start(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    return _random((4, 6), seed), _random((4, 6), seed + 1, 0.3)


def test_hamiltonian_is_conserved_by_the_flow_and_drift_vanishes_with_step():
    # T4: H is constant along [E-HAMDYN]; RK4 drift falls ~16x per halving of the step. The field is only
    # piecewise smooth (ReLU kinks add O(step) jumps when an entry of A changes sign), so the path is chosen
    # to keep the sign pattern of A fixed, which the test asserts.
    A0 = _random((4, 6), 30).abs() + 0.5
    A0[0, :3] = -A0[0, :3]
    B0 = _random((4, 6), 31, 0.05)
    ltilde = 0.5
    drifts = []
    for steps in (25, 50, 100):
        A, B = lr.rk4_path(A0, B0, ltilde, steps)
        assert ((A > 0) == (A0 > 0)).all()
        H = lr.hamiltonian(A, B, ltilde)
        drifts.append((H.max() - H.min()).item() / H.abs().mean().item())
    assert drifts[-1] < 1e-10
    assert drifts[0] / drifts[1] > 8 and drifts[1] / drifts[2] > 8


def test_vector_field_is_hamiltons_equations_of_eq1():
    # dA = dH/dB, dB = -dH/dA, by autograd on Eq. (1).
    A, B = _flow_start(31)
    A.requires_grad_(True)
    B.requires_grad_(True)
    gA, gB = torch.autograd.grad(lr.hamiltonian(A, B, 1.5), (A, B))
    dA, dB = lr.hamiltonian_vector_field(A, B, 1.5)
    torch.testing.assert_close(dA, gB)
    torch.testing.assert_close(dB, -gA)


def test_balancedness_coefficient_is_two_ltilde():
    # T10 / erratum P5(f): d/dp ||W_p||^2 = 2 L~ ||b_p||^2 pointwise, and after integration.
    A0, B0 = _flow_start(32)
    ltilde = 2.0
    for A, B in [(A0, B0), (_random((4, 6), 40), _random((4, 6), 41))]:
        rate, bias_sq = lr.balancedness_rate(A, B, ltilde)
        assert rate.item() == pytest.approx(2 * ltilde * bias_sq.item(), rel=1e-10)
    As, Bs = lr.rk4_path(A0, B0, ltilde, 400)
    W = ltilde * Bs @ lr.relu_features(As).transpose(-1, -2)
    bias_sq = (W[..., -1] ** 2).sum(-1)
    integral = torch.trapezoid(bias_sq, dx=1 / 400)
    increase = (W[-1] ** 2).sum() - (W[0] ** 2).sum()
    assert (increase / (ltilde * integral)).item() == pytest.approx(2.0, rel=1e-3)


def test_eq4_sandwich_on_an_integrated_path():
    # Eq. (4): -(l_gamma / L~ + sqrt(gamma) c)^2 <= -2H/L~ - min_p COI_gamma <= gamma c^2 along a flow path.
    A0, B0 = _flow_start(33)
    ltilde, gamma, steps = 3.0, 1e-2, 400
    As, Bs = lr.rk4_path(A0, B0, ltilde, steps)
    H = lr.hamiltonian(As[0], Bs[0], ltilde)
    dA = lr.hamiltonian_vector_field(As, Bs, ltilde)[0]
    energies = lr.stable_energies(As, dA, ltilde, gamma)
    length = torch.trapezoid(energies["speed_sq"].sqrt(), dx=1 / steps)
    c = torch.linalg.norm(Bs, dim=(-2, -1)).max()
    middle = -2 * H / ltilde - energies["coi"].min()
    assert -(length / ltilde + math.sqrt(gamma) * c) ** 2 <= middle <= gamma * c**2


# ------------------------------------------------------------------------------------ discrete network (T5)


def _network(seed: int, L: int = 5, w: int = 4, N: int = 7):
    W = _random((L, w, w + 1), seed, 0.6)
    rho = lr.irregular_steps(L, 0.5)
    A0 = _random((w, N), seed + 1)
    Y = _random((w, N), seed + 2)
    return W, rho, A0, Y


def test_backprop_momenta_match_adjoint_recursion():
    # T5: autograd B_l = explicit adjoint recursion [E-BWD] (erratum P5(b)).
    W, rho, A0, Y = _network(60)
    lam, ltilde, N = 0.01, 1.5, A0.shape[1]
    reps, B = lr.momenta_by_backprop(W, rho, A0, ltilde, lambda A: ((Y - A) ** 2).sum() / N, lam)
    torch.testing.assert_close(reps, lr.leaky_forward(W, rho, A0, ltilde))
    B_out = 2 / (lam * N) * (Y - reps[-1])
    torch.testing.assert_close(B, lr.adjoint_momenta(W, rho, reps, B_out, ltilde), rtol=1e-12, atol=1e-12)


def test_leaky_forward_is_batched_over_leading_dimensions():
    W, rho, A0, _ = _network(61)
    W2 = torch.stack([W, 2 * W])
    rho2 = torch.stack([rho, lr.equidistant_steps(5)])
    reps = lr.leaky_forward(W2, rho2, A0, torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(reps[1], lr.leaky_forward(2 * W, lr.equidistant_steps(5), A0, 2.0))


# ------------------------------------------------------ an exact critical point (T6, T7, T9, T10 ground truth)

CRITICAL_DEPTHS = (8, 16, 32, 64)


def _critical(L: int, w: int = 6, n: int = 10, ltilde: float = 2.0, lam: float = 0.05):
    """An exact critical point of [E-DLOSS] shot from fixed (A_0, B_1), with its diagnostics."""
    A0, B1 = _random((w, n), 70), _random((w, n), 71, 0.03)
    rho = lr.equidistant_steps(L)
    net = lr.shoot_critical_network(A0, B1, rho, ltilde, lam)
    reps, B = lr.momenta_by_backprop(net.weights, rho, A0, ltilde, lambda A: ((net.target - A) ** 2).sum() / n,
                                     lam)
    return net, rho, reps, B, lr.layer_diagnostics(net.weights, rho, reps, B, ltilde, gamma0=1e-3)


@pytest.fixture(scope="module")
def critical_networks():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield {L: _critical(L) for L in CRITICAL_DEPTHS}
    torch.set_default_dtype(previous)


def test_shot_network_is_a_critical_point_of_the_objective(critical_networks):
    # T6 ground truth: the gradient of C + lambda/(2 L~) sum rho_l ||W_l||^2 vanishes, the backprop momenta are
    # the shot ones, and the stationarity residual of spec 002 §3.12 is 0 up to rounding.
    ltilde, lam = 2.0, 0.05
    for net, rho, reps, B, diag in critical_networks.values():
        torch.testing.assert_close(reps, net.reps, rtol=0, atol=1e-12)
        torch.testing.assert_close(B[1:], net.momenta, rtol=0, atol=1e-12)
        assert diag.stationarity.max() < 1e-10
        W = net.weights.clone().requires_grad_(True)
        data = ((net.target - lr.leaky_forward(W, rho, reps[0], ltilde)[-1]) ** 2).sum() / reps.shape[-1]
        decay = lam / (2 * ltilde) * (rho * (W**2).sum((-1, -2))).sum()
        (g_data,) = torch.autograd.grad(data, W)
        (g_decay,) = torch.autograd.grad(decay, W)
        assert torch.linalg.norm(g_data + g_decay) < 1e-10 * torch.linalg.norm(g_decay)


def test_hamiltonian_is_flat_across_layers_of_a_critical_network(critical_networks):
    # T7: with the (A_{l-1}, B_l) pairing, Theorem 4's identity is exact per layer and h_l = -2 H_l / L~ varies
    # only by the first-order error of symplectic Euler (halving with rho), while COI and kappa vary by ~350.
    spreads = []
    for *_, diag in critical_networks.values():
        assert diag.theorem4_residual.max() < 1e-10
        spreads.append(float(diag.h.max() - diag.h.min()))
        coi_spread = float(diag.coi_gamma.max() - diag.coi_gamma.min())
        assert spreads[-1] < 1e-3 * coi_spread
        assert float(diag.kappa.max() - diag.kappa.min()) > 100 * spreads[-1]
    ratios = [a / b for a, b in zip(spreads, spreads[1:], strict=False)]
    assert all(1.8 < r < 2.4 for r in ratios), ratios
    assert spreads[-1] / abs(float(diag.h.median())) < 0.05


def test_weight_decay_of_a_critical_network_is_lambda_times_its_discrete_action(critical_networks):
    # [E-LAG]: at a critical point each W_l = L~ B_l sigma(A_{l-1})^T is the min-norm weight for its velocity, so
    # lambda/(2 L~) sum rho_l ||W_l||^2 = lambda sum rho_l L(A_{l-1}, dA_l) with the exact K-norm (K singular here).
    ltilde, lam = 2.0, 0.05
    net, rho, reps, *_ = critical_networks[16]
    decay = lam / (2 * ltilde) * (rho * (net.weights**2).sum((-1, -2))).sum()
    velocities = lr.layer_velocities(reps, rho)
    action = sum(rho[k] * lr.lagrangian_terms(reps[k], velocities[k], ltilde)["lagrangian"]
                 for k in range(rho.shape[0]))
    assert torch.linalg.matrix_rank(lr.kernel(reps[0])) < reps.shape[-1]
    assert (lam * action).item() == pytest.approx(decay.item(), rel=1e-8)


def test_theorem4_bounds_hold_in_every_layer_of_a_critical_network(critical_networks):
    # T9: Eq. (3) and the speed bound of Theorem 4 with c = ||B_l||, layer by layer.
    for *_, diag in critical_networks.values():
        assert (diag.eq3_gap <= diag.eq3_bound * (1 + 1e-10)).all()
        assert (diag.speed_gap <= diag.speed_bound * (1 + 1e-10)).all()


def test_balancedness_coefficient_of_a_critical_network_is_two_ltilde(critical_networks):
    # T10 with erratum P5(f): ||W_l||^2 - ||W_{l-1}||^2 = c L~ rho_l ||b_l||^2 with c = 2 up to O(rho) (the
    # paper writes c = 1). The first-order error cancels in the Richardson extrapolation 2 c(2L) - c(L).
    ltilde = 2.0
    coefficients = []
    for net, rho, *_ in critical_networks.values():
        increments, predicted = lr.discrete_balancedness(net.weights, rho, ltilde)
        coefficients.append(2 * float(increments.sum() / predicted.sum()))
    extrapolated = [2 * fine - coarse for coarse, fine in zip(coefficients, coefficients[1:], strict=False)]
    assert all(abs(c - 2) < 1e-2 for c in extrapolated), (coefficients, extrapolated)
    assert 1.9 < coefficients[-1] < 2.0


def test_shooting_rejects_steps_with_rho_ltilde_at_least_one():
    with pytest.raises(ValueError, match="rho_l L~"):
        lr.shoot_critical_network(_random((3, 4), 1), _random((3, 4), 2), lr.equidistant_steps(2), 2.0, 0.1)


def test_discrete_balancedness_increments():
    W = _random((4, 3, 4), 64)
    rho = lr.equidistant_steps(4)
    diff, predicted = lr.discrete_balancedness(W, rho, 2.0)
    norms = (W**2).sum((-1, -2))
    torch.testing.assert_close(diff, norms[1:] - norms[:-1])
    torch.testing.assert_close(predicted, 2 * 2.0 * 0.25 * (W[1:, :, -1] ** 2).sum(-1))


# ------------------------------------------------------------------------------------- symmetries (T12)


def _weight_path(seed: int, w: int = 3, bias: bool = True):
    W0, W1 = _random((w, w + 1), seed, 0.8), _random((w, w + 1), seed + 1, 0.8)
    if not bias:
        W0[:, -1] = 0
        W1[:, -1] = 0
    return lambda p: W0 + p * W1


def test_integration_range_symmetry():
    # seed 002 §2.1: W'_q = W_{q/c} / c on [0, c] with leak L~/c gives alpha'_c = alpha_1.
    weights, x, ltilde, c = _weight_path(70), _random((3, 4), 71), 2.0, 3.0
    one = lr.integrate_leaky_ode(weights, x, ltilde, steps=400)
    stretched = lr.integrate_leaky_ode(lambda q: weights(q / c) / c, x, ltilde / c, length=c, steps=400)
    torch.testing.assert_close(one, stretched, rtol=1e-10, atol=1e-10)


def test_output_scaling_symmetry_without_bias():
    # seed 002 §2.1: without bias, leak L~ + c gives exp(-c p) alpha_p (exact in continuous time).
    weights, x, ltilde, c = _weight_path(72, bias=False), _random((3, 4), 73), 1.0, 2.5
    base = lr.integrate_leaky_ode(weights, x, ltilde, steps=1000)
    leakier = lr.integrate_leaky_ode(weights, x, ltilde + c, steps=1000)
    torch.testing.assert_close(leakier, math.exp(-c) * base, rtol=1e-9, atol=1e-11)


# ------------------------------------------------------------------------------------- step sizes (T13)


@pytest.mark.parametrize("L", [4, 5, 7, 10])
def test_step_schemes_sum_to_one_and_irregular_is_denser_at_the_ends(L):
    schemes = (lr.equidistant_steps(L), lr.irregular_steps(L, 0.5), lr.irregular_steps(L, 0.9, symmetric=True))
    for rho in schemes:
        assert rho.sum().item() == pytest.approx(1.0, abs=1e-14)
    rho = lr.irregular_steps(L, 0.5)
    assert rho[L // 2] > rho[-1] and rho[(L - 1) // 2] > rho[0]
    sym = lr.irregular_steps(L, 0.5, symmetric=True)
    torch.testing.assert_close(sym, sym.flip(0))


def test_irregular_formula_needs_renormalising_only_for_odd_L():
    # Erratum P5(h): the raw formula sums to 1 - 0.01 a for L = 5 and exactly 1 for even L.
    def raw(L, a):
        x = torch.arange(1, L + 1) / L
        return (1 / L + a / L * (0.25 - (x - 0.5).abs())).sum().item()

    assert raw(5, 0.5) == pytest.approx(1 - 0.005, abs=1e-14)
    assert raw(8, 0.5) == pytest.approx(1.0, abs=1e-14)


def test_adaptive_rule_equalises_relative_step_distances():
    # T13: on a path with fast ends and a slow middle, iterating the adaptive rule makes
    # ||A_l - A_{l-1}|| / ||A_l|| nearly constant, far more than equidistant steps do.
    base = _random((3, 5), 80).abs() + 1.0
    direction = _random((3, 5), 81)

    def path(p: torch.Tensor) -> torch.Tensor:
        u = 2 * p - 1
        shape = (u**3 + 0.05 * u) / 1.05  # speed ~ 3 u^2 + 0.05: slow middle, fast ends
        return base + shape[:, None, None] * direction

    L = 12
    rho = lr.equidistant_steps(L)

    def cv(r):
        reps = path(torch.cat([torch.zeros(1), torch.cumsum(r, 0)]))
        d = lr.relative_step_distances(reps)
        return (d.std() / d.mean()).item(), reps

    before, _ = cv(rho)
    for _ in range(60):
        _, reps = cv(rho)
        rho = lr.adaptive_steps(rho, reps, damping=0.5)
    after, _ = cv(rho)
    assert before > 0.3 and after < before / 10
    assert rho.sum().item() == pytest.approx(1.0, abs=1e-12)


def test_adaptive_ceiling_caps_steps_and_keeps_their_sum():
    # pitfall P9: the cap rho_l <= c per member, the excess spread over the other layers, sum still 1; an
    # uncapped step is left in the same proportion to the other uncapped ones.
    reps = _random((2, 9, 3, 4), 95).cumsum(1)
    rho = lr.equidistant_steps(8).expand(2, 8)
    free = lr.adaptive_steps(rho, reps)
    cap = torch.tensor([0.9, 0.9]) * free.max(-1).values
    capped = lr.adaptive_steps(rho, reps, ceiling=cap)
    torch.testing.assert_close(capped.sum(-1), torch.ones(2))
    assert (capped <= cap[:, None] * (1 + 1e-12)).all()
    assert torch.isclose(capped.max(-1).values, cap).all()
    for k in range(2):
        below = capped[k] < cap[k] * (1 - 1e-9)
        ratio = capped[k][below] / free[k][below]
        assert below.sum() >= 2
        torch.testing.assert_close(ratio, ratio[0].expand_as(ratio))
    with pytest.raises(ValueError, match="ceiling"):
        lr.adaptive_steps(rho, reps, ceiling=0.1)


# --------------------------------------------------------------------- diagnostics on a foreign network


def test_diagnostics_apply_to_a_user_written_leaky_resnet():
    # A Leaky ResNet written with torch.nn.Linear layers (not repdyn's model): its weights [V | b], steps and
    # retained activation gradients are all the diagnostics need, and they agree with the library's forward.
    torch.manual_seed(0)
    w, n, L, ltilde, lam = 5, 8, 4, 2.0, 0.05
    layers = torch.nn.ModuleList(torch.nn.Linear(w, w).double() for _ in range(L))
    rho = lr.irregular_steps(L, 0.3)
    x, y = _random((n, w), 90), _random((n, w), 91)
    a = x.T.clone()
    acts = [a]
    for step, layer in zip(rho, layers, strict=True):
        a = (1 - step * ltilde) * a + step * layer(torch.relu(a).T).T
        a.retain_grad()
        acts.append(a)
    acts[0].requires_grad_(False)
    cost = ((y.T - a) ** 2).sum() / n
    cost.backward()
    weights = torch.stack([torch.cat([layer.weight, layer.bias[:, None]], 1) for layer in layers]).detach()
    reps = torch.stack([t.detach() for t in acts])
    grads = torch.stack([torch.zeros_like(acts[0])] + [t.grad for t in acts[1:]])
    momenta = -grads / lam
    torch.testing.assert_close(reps, lr.leaky_forward(weights, rho, x.T, ltilde))
    _, B = lr.momenta_by_backprop(weights, rho, x.T, ltilde, lambda A: ((y.T - A) ** 2).sum() / n, lam)
    torch.testing.assert_close(momenta[1:], B[1:])
    diag = lr.layer_diagnostics(weights, rho, reps, momenta, ltilde)
    assert diag.h.shape == (L,) and torch.isfinite(diag.h_gamma).all()
    torch.testing.assert_close(diag.h, -2 * lr.hamiltonian(reps[:-1], B[1:], ltilde) / ltilde)
