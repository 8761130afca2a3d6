"""Hamiltonian mechanics of Leaky ResNets: Cost of Identity, energies, momenta, Hamiltonian, step sizes.

Seed 002 (Jacot & Kaiser), digested in spec 002. Notation: a representation ``A`` is ``w x N`` (neurons x
samples), ``sigma(A) = ([A]_+, 1)`` is ``(w+1) x N`` (ReLU with the bias row), ``K = sigma(A)^T sigma(A)``.
A discrete network has weights ``W`` of shape ``(L, w, w+1)`` (last column = bias), steps ``rho`` (``L``),
representations ``A_0..A_L`` stacked as ``(L+1, w, N)`` and momenta ``B_0..B_L`` of the same shape.

Every function takes plain tensors, so the diagnostics apply to any trained Leaky ResNet, not only
:class:`repdyn.nn.models.leaky_resnet.LeakyResNet`. Use float64 for comparisons with the identities (spec 002 §3.12).

Errata followed (each checked against the paper, seed 002):
- spec 002 §7 P5(a): ``B_p = (A_p + dA_p / L~) K_p^+`` (the paper's ``W_p sigma(A_p)^+`` does not type-check).
- P5(b): the backward equation uses ``V_p^T B_p`` (bias row of ``W_p^T B_p`` dropped).
- P5(c): ``gamma_p = gamma_0 * lambda_max(K_p) = gamma_0 ||sigma(A_p)||_op^2`` (the paper's
  ``gamma_0 ||K_p||_op^2`` has the wrong units).
- P5(e): the gamma-potential energy carries a minus sign.
- P5(f): balancedness coefficient ``2 L~`` (Prop. 10 of seed 002 writes ``L~``; the scalar case
  ``b_p ~ exp(-L~ (1 - p))`` gives ``d/dp b_p^2 = 2 L~ b_p^2``; :func:`balancedness_rate` is tested against an
  integrated flow).
- P5(h): the irregular steps are renormalised to sum to 1 (they do not for odd ``L``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Tensor = torch.Tensor


def _check_positive(name: str, value: float, allow_zero: bool = False) -> None:
    if not (value > 0 or (allow_zero and value == 0)):
        allowed = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}={value!r} is not allowed: must be {allowed}")


# --------------------------------------------------------------------------------------------- kernels, norms


def relu_features(A: Tensor, bias: bool = True) -> Tensor:
    """``sigma(A) = ([A]_+, 1)`` (``(..., w+1, N)``), or ``[A]_+`` without the bias row (spec 002 §2)."""
    relu = torch.relu(A)
    if not bias:
        return relu
    ones = torch.ones(*A.shape[:-2], 1, A.shape[-1], dtype=A.dtype, device=A.device)
    return torch.cat([relu, ones], dim=-2)


def kernel(A: Tensor, bias: bool = True) -> Tensor:
    """``K = sigma(A)^T sigma(A)`` (``N x N``); without bias ``K~ = [A]_+^T [A]_+`` (spec 002 §2, §3.6)."""
    S = relu_features(A, bias)
    return S.transpose(-1, -2) @ S


def kernel_norm_sq(M: Tensor, K: Tensor, gamma: Tensor | float = 0.0) -> Tensor:
    """``||M||^2_(K + gamma I) = Tr[M (K + gamma I)^{-1} M^T]`` by a Cholesky solve (spec 002 §3.9, §3.12).

    ``gamma`` may be a tensor over the leading batch dimensions. With ``gamma = 0`` ``K`` must be positive
    definite; a singular ``K`` raises ValueError (use :func:`cost_of_identity` with ``gamma=0`` for the exact,
    possibly infinite, norm). No pseudo-inverse is formed (seed 002 App. B: "utilize the solve function").
    """
    gamma = torch.as_tensor(gamma, dtype=K.dtype, device=K.device)
    if bool((gamma < 0).any()):
        raise ValueError(f"gamma={gamma.tolist()} is not allowed: must be >= 0")
    eye = torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)
    factor, info = torch.linalg.cholesky_ex(K + gamma[..., None, None] * eye)
    if bool((info != 0).any()):
        raise ValueError("K + gamma I is not positive definite: use gamma > 0 for a singular kernel")
    solved = torch.cholesky_solve(M.transpose(-1, -2), factor)
    return (M.transpose(-1, -2) * solved).sum(dim=(-1, -2))


def adaptive_gamma(A: Tensor, gamma0: float) -> Tensor:
    """``gamma_p = gamma_0 lambda_max(K_p) = gamma_0 ||sigma(A_p)||_op^2`` (spec 002 §7 P5(c) erratum)."""
    _check_positive("gamma0", gamma0)
    return gamma0 * torch.linalg.matrix_norm(relu_features(A), ord=2) ** 2


def cost_of_identity(A: Tensor, gamma: Tensor | float = 0.0, bias: bool = True,
                     rtol: float = 1e-10) -> Tensor:
    """Cost of Identity ``||A||^2_K = ||A sigma(A)^+||_F^2``, or its gamma-stable ``||A||^2_(K + gamma I)``.

    Spec 002 §3.5-3.6 (seed 002 §2.2-2.3). With ``gamma > 0`` (the version for headline numbers) it is a
    Cholesky solve. With ``gamma = 0`` it is the exact COI: ``+inf`` when the rows of ``A`` are not in the row
    space of ``sigma(A)`` (relative residual above ``sqrt(rtol)``), else ``||A V_r diag(1/s_r)||_F^2`` on the
    singular values ``s_r > rtol s_max`` of ``sigma(A)``; it is only meant for exact algebraic checks.
    ``bias=False`` uses ``K~ = [A]_+^T [A]_+`` (COI without bias).
    """
    if not isinstance(gamma, Tensor) and gamma == 0:
        return exact_kernel_norm_sq(A, relu_features(A, bias), rtol)
    return kernel_norm_sq(A, kernel(A, bias), gamma)


def exact_kernel_norm_sq(M: Tensor, S: Tensor, rtol: float = 1e-10) -> Tensor:
    """``||M||^2_K = ||M S^+||_F^2`` with ``K = S^T S``, exactly (spec 002 §2): ``+inf`` when the rows of ``M``
    are not in the row space of ``S`` (relative residual above ``sqrt(rtol)``), else ``||M V_r diag(1/s_r)||^2``
    on the singular values ``s_r > rtol s_max`` of ``S``. For exact algebraic checks only. ``M`` may stack
    several matrices over leading dimensions (one SVD of the single ``S`` serves them all)."""
    _, s, Vh = torch.linalg.svd(S, full_matrices=False)
    keep = s > rtol * s.max()
    V = Vh[keep].T
    projected = M @ V
    leftover = (torch.linalg.norm(M - projected @ V.T, dim=(-2, -1))
                / torch.linalg.norm(M, dim=(-2, -1)).clamp_min(1e-300))
    norm_sq = ((projected / s[keep]) ** 2).sum((-2, -1))
    return torch.where(leftover > rtol**0.5, torch.full_like(norm_sq, float("inf")), norm_sq)


# ------------------------------------------------------------------------------------- continuous mechanics


def hamiltonian(A: Tensor, B: Tensor, ltilde: float) -> Tensor:
    """``H = L~/2 ||B sigma(A)^T||_F^2 - L~ Tr[B A^T]`` (Eq. (1) of seed 002); no pseudo-inverse."""
    BS = B @ relu_features(A).transpose(-1, -2)
    return 0.5 * ltilde * (BS**2).sum((-1, -2)) - ltilde * (B * A).sum((-1, -2))


def rescaled_hamiltonian(A: Tensor, B: Tensor, ltilde: float) -> Tensor:
    """``h = -2 H / L~ = 2 <B, A> - ||B sigma(A)^T||^2``: estimates the bottleneck rank (spec 002 §3.12)."""
    return -2.0 * hamiltonian(A, B, ltilde) / ltilde


def hamiltonian_vector_field(A: Tensor, B: Tensor, ltilde: float) -> tuple[Tensor, Tensor]:
    """``(dA/dp, dB/dp)`` of the joint dynamics [E-HAMDYN] (seed 002 §2.4) = Hamilton's equations of Eq. (1).

    ``dA = L~ (B K - A)``, ``dB = -L~ (1[A > 0] * [sigma(A) B^T B]_{1:w} - B)``.
    """
    S = relu_features(A)
    dA = ltilde * (B @ (S.transpose(-1, -2) @ S) - A)
    force = (S @ (B.transpose(-1, -2) @ B))[..., :-1, :]
    dB = -ltilde * ((A > 0).to(A.dtype) * force - B)
    return dA, dB


def rk4_path(A0: Tensor, B0: Tensor, ltilde: float, steps: int) -> tuple[Tensor, Tensor]:
    """Integrate [E-HAMDYN] over ``p in [0, 1]`` with ``steps`` RK4 steps; returns the stacked A_p, B_p."""
    if steps < 1:
        raise ValueError(f"steps={steps!r} is not allowed: must be >= 1")
    h = 1.0 / steps
    As, Bs = [A0], [B0]
    A, B = A0, B0
    for _ in range(steps):
        k1 = hamiltonian_vector_field(A, B, ltilde)
        k2 = hamiltonian_vector_field(A + 0.5 * h * k1[0], B + 0.5 * h * k1[1], ltilde)
        k3 = hamiltonian_vector_field(A + 0.5 * h * k2[0], B + 0.5 * h * k2[1], ltilde)
        k4 = hamiltonian_vector_field(A + h * k3[0], B + h * k3[1], ltilde)
        A = A + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        B = B + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        As.append(A)
        Bs.append(B)
    return torch.stack(As), torch.stack(Bs)


def lagrangian_terms(A: Tensor, velocity: Tensor, ltilde: float, rtol: float = 1e-10) -> dict[str, Tensor]:
    """The Lagrangian per unit lambda of seed 002 §2.2 and its decomposition [E-DECOMP] (exact K-norms).

    ``lagrangian`` = ``||L~ A + dA||^2_K / (2 L~)`` = ``||W||_F^2 / (2 L~)`` for the min-norm weight
    ``W = (L~ A + dA) sigma(A)^+`` of [E-WMIN]; ``coi_term`` = ``L~/2 ||A||^2_K``, ``middle`` =
    ``<dA, A>_K``, ``kinetic`` = ``||dA||^2_K / (2 L~)``. A term is ``+inf`` when its rows leave the row
    space of ``sigma(A)`` (the infinite-and-cancelling case of the paper's remark; use the gamma versions).
    """
    stacked = torch.stack([ltilde * A + velocity, A, velocity, A + velocity])
    full, coi, speed_sq, cross = exact_kernel_norm_sq(stacked, relu_features(A), rtol)
    return {"lagrangian": full / (2 * ltilde), "coi_term": ltilde / 2 * coi, "middle": (cross - coi - speed_sq) / 2,
            "kinetic": speed_sq / (2 * ltilde)}


def minimal_norm_momentum(A: Tensor, velocity: Tensor, ltilde: float) -> Tensor:
    """``B = (A + dA / L~) K^+`` for a positive definite ``K`` (spec 002 §7 P5(a) erratum, seed 002 §3.1)."""
    M = A + velocity / ltilde
    K = kernel(A)
    return torch.linalg.solve(K, M.transpose(-1, -2)).transpose(-1, -2)


def stable_energies(A: Tensor, velocity: Tensor, ltilde: float, gamma: Tensor | float) -> dict[str, Tensor]:
    """gamma-stable energies of seed 002 §3.1 (rescaled as in spec 002 §3.12 and P12).

    Returns ``coi`` = ``||A||^2_(K+gamma I)``, ``kinetic`` = ``||dA||^2_(K+gamma I) / (2 L~)``,
    ``potential`` = ``-L~/2 coi`` (minus sign: spec 002 §7 P5(e)), ``hamiltonian`` = kinetic + potential,
    ``kappa`` = ``2 kinetic / L~`` and ``h`` = ``-2 H_gamma / L~ = coi - kappa``.
    """
    K = kernel(A)
    coi = kernel_norm_sq(A, K, gamma)
    speed_sq = kernel_norm_sq(velocity, K, gamma)
    kinetic = speed_sq / (2 * ltilde)
    potential = -0.5 * ltilde * coi
    return {"coi": coi, "kinetic": kinetic, "potential": potential, "hamiltonian": kinetic + potential,
            "kappa": speed_sq / ltilde**2, "h": coi - speed_sq / ltilde**2, "speed_sq": speed_sq}


def theorem4_rhs(A: Tensor, velocity: Tensor, B: Tensor, ltilde: float, gamma: Tensor | float) -> Tensor:
    """Right-hand side of the identity of Theorem 4 (seed 002 §3.1, [T4-ID] of spec 002 §3.9):

    ``1/(2 L~) ||dA + gamma L~ B||^2_(K+gamma I) - L~/2 ||A||^2_(K+gamma I) - gamma L~/2 ||B||^2``. It equals
    :func:`hamiltonian` exactly whenever ``dA = L~ (B K - A)``.
    """
    gamma_t = torch.as_tensor(gamma, dtype=A.dtype, device=A.device)
    K = kernel(A)
    shifted = velocity + gamma_t[..., None, None] * ltilde * B
    return (kernel_norm_sq(shifted, K, gamma_t) / (2 * ltilde) - 0.5 * ltilde * kernel_norm_sq(A, K, gamma_t)
            - 0.5 * gamma_t * ltilde * (B**2).sum((-1, -2)))


def theorem4_bounds(A: Tensor, velocity: Tensor, B: Tensor, ltilde: float,
                    gamma: Tensor | float) -> dict[str, Tensor]:
    """Both sides of Eq. (3) and of the speed bound of Theorem 4 (seed 002), with ``c = ||B||_F``.

    ``eq3_gap`` = ``|2H/L~ - 2H_gamma/L~|`` <= ``eq3_bound`` = ``2/L~ ||dA||_g sqrt(gamma) c + gamma c^2``;
    ``speed_gap`` = ``| ||dA||_g - L~ sqrt(COI_g + 2H/L~) |`` <= ``speed_bound`` = ``2 L~ sqrt(gamma) c``
    (the radicand is clipped at 0; it can be negative by at most ``gamma c^2``).
    """
    gamma_t = torch.as_tensor(gamma, dtype=A.dtype, device=A.device)
    energies = stable_energies(A, velocity, ltilde, gamma_t)
    H = hamiltonian(A, B, ltilde)
    c = torch.linalg.norm(B, dim=(-2, -1))
    speed = energies["speed_sq"].sqrt()
    radicand = (energies["coi"] + 2 * H / ltilde).clamp_min(0.0)
    return {"eq3_gap": (2 * (H - energies["hamiltonian"]) / ltilde).abs(),
            "eq3_bound": 2 / ltilde * speed * gamma_t.sqrt() * c + gamma_t * c**2,
            "speed_gap": (speed - ltilde * radicand.sqrt()).abs(),
            "speed_bound": 2 * ltilde * gamma_t.sqrt() * c,
            "radicand": energies["coi"] + 2 * H / ltilde}


def balancedness_rate(A: Tensor, B: Tensor, ltilde: float) -> tuple[Tensor, Tensor]:
    """``(d/dp ||W_p||_F^2, ||b_p||^2)`` along [E-HAMDYN] with ``W_p = L~ B_p sigma(A_p)^T`` (Prop. 10).

    The derivative is taken exactly by forward-mode AD along the vector field; at a critical point it equals
    ``2 L~ ||b_p||^2`` (spec 002 §3.11 erratum P5(f); the paper writes ``L~``).
    """
    def weight_norm_sq(a: Tensor, b: Tensor) -> Tensor:
        return ltilde**2 * ((b @ relu_features(a).transpose(-1, -2)) ** 2).sum()

    dA, dB = hamiltonian_vector_field(A, B, ltilde)
    _, rate = torch.func.jvp(weight_norm_sq, (A, B), (dA, dB))
    bias = ltilde * B.sum(-1)
    return rate, (bias**2).sum()


def integrate_leaky_ode(weight_fn: Callable[[float], Tensor], x: Tensor, ltilde: float, length: float = 1.0,
                        steps: int = 1000) -> Tensor:
    """RK4 solution at ``p = length`` of ``d alpha/dp = -L~ alpha + W_p sigma(alpha)`` from ``alpha_0 = x``.

    [E-ODE] of spec 002 §3.1 (seed 002 §2); ``weight_fn(p)`` returns ``W_p`` (``w x (w+1)``). Used to check
    the integration-range and output-scaling symmetries of seed 002 §2.1 in continuous time.
    """
    _check_positive("length", length)
    if steps < 1:
        raise ValueError(f"steps={steps!r} is not allowed: must be >= 1")
    h = length / steps

    def field(p: float, a: Tensor) -> Tensor:
        return -ltilde * a + weight_fn(p) @ relu_features(a)

    a = x
    for i in range(steps):
        p = i * h
        k1 = field(p, a)
        k2 = field(p + h / 2, a + h / 2 * k1)
        k3 = field(p + h / 2, a + h / 2 * k2)
        k4 = field(p + h, a + h * k3)
        a = a + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return a


# ----------------------------------------------------------------------------------------- discrete network


def _as_batch(value: Tensor | float, like: Tensor) -> Tensor:
    return torch.as_tensor(value, dtype=like.dtype, device=like.device)


def leaky_forward(weights: Tensor, rho: Tensor, A0: Tensor, ltilde: Tensor | float,
                  activation: Callable[[Tensor], Tensor] = torch.relu) -> Tensor:
    """Representations ``A_0..A_L`` of the discretised Leaky ResNet [E-DISC] (seed 002 §4, spec 002 §3.4).

    ``A_l = (1 - rho_l L~) A_{l-1} + rho_l W_l sigma(A_{l-1})``. Shapes: ``weights (..., L, w, w+1)``,
    ``rho (..., L)``, ``A0 (..., w, N)``, ``ltilde`` a float or a tensor over the leading dimensions.
    Returns ``(..., L+1, w, N)``. ``activation`` replaces the ReLU of ``sigma`` (the bias row stays 1); the
    theory of seed 002 is for the ReLU, other activations serve comparisons such as
    ``examples/leaky_resnet_stationarity.py``.
    """
    return torch.stack(leaky_forward_layers(weights, rho, A0, ltilde, activation), dim=-3)


def leaky_forward_layers(weights: Tensor, rho: Tensor, A0: Tensor, ltilde: Tensor | float,
                         activation: Callable[[Tensor], Tensor] = torch.relu) -> list[Tensor]:
    """:func:`leaky_forward` as a list ``[A_0, ..., A_L]`` of ``(..., w, N)`` tensors: the weights are split per
    layer once (``unbind``) and nothing is stacked, so autograd through it costs O(L) (indexing
    ``weights[..., l, :, :]`` in the loop, or stacking the representations, makes autograd fill a zero tensor of
    the whole stack per layer: O(L^2)). Training uses the hand-written gradient
    :func:`repdyn.nn.models.leaky_resnet.objective_gradient`, tested equal to autograd through this."""
    if weights.shape[-1] != weights.shape[-2] + 1:
        raise ValueError(f"weights have shape {tuple(weights.shape)}: expected (..., L, w, w+1)")
    if rho.shape[-1] != weights.shape[-3]:
        raise ValueError(f"rho has {rho.shape[-1]} steps but there are {weights.shape[-3]} weight matrices")
    lt = _as_batch(ltilde, weights)[..., None, None]
    A = A0.expand(*weights.shape[:-3], *A0.shape[-2:])
    steps = rho[..., None, None].unbind(-3)
    reps = [A]
    for W, step in zip(weights.unbind(-3), steps, strict=True):
        # W sigma(A) = V [A]_+ + b 1^T, without building sigma(A)
        A = (1 - step * lt) * A + step * (W[..., :-1] @ activation(A) + W[..., -1:])
        reps.append(A)
    return reps


def momenta_by_backprop(weights: Tensor, rho: Tensor, A0: Tensor, ltilde: float,
                        cost: Callable[[Tensor], Tensor], lam: float) -> tuple[Tensor, Tensor]:
    """``(A_0..A_L, B_0..B_L)`` with ``B_l = -dC/dA_l / lambda`` by autograd (seed 002 §2.4, spec 002 §3.12).

    ``cost`` maps the output representation ``A_L`` to the data cost ``C`` (e.g. ``||Y - U A_L||^2_F / N``).
    It must be the same ``C`` and ``lambda`` used in training (spec 002 §7 P2).
    """
    _check_positive("lam", lam)
    weights = weights.detach()
    A = A0.detach().requires_grad_(True)
    reps = [A]
    for layer in range(weights.shape[0]):
        A = (1 - rho[layer] * ltilde) * A + rho[layer] * (weights[layer] @ relu_features(A))
        reps.append(A)
    grads = torch.autograd.grad(cost(reps[-1]), reps)
    return torch.stack([r.detach() for r in reps]), -torch.stack(grads) / lam


def adjoint_momenta(weights: Tensor, rho: Tensor, reps: Tensor, B_out: Tensor, ltilde: float) -> Tensor:
    """Momenta ``B_0..B_L`` by the explicit adjoint recursion (spec 002 §3.12 step 2, [E-BWD], erratum P5(b)):

    ``B_{l-1} = (1 - rho_l L~) B_l + rho_l 1[A_{l-1} > 0] * (V_l^T B_l)`` from ``B_L = B_out``.
    """
    B = B_out
    out = [B]
    for layer in range(weights.shape[0] - 1, -1, -1):
        V = weights[layer, :, :-1]
        B = (1 - rho[layer] * ltilde) * B + rho[layer] * (reps[layer] > 0).to(B.dtype) * (V.T @ B)
        out.append(B)
    return torch.stack(out[::-1])


def stationary_weights(reps: Tensor, momenta: Tensor, ltilde: float) -> Tensor:
    """``L~ B_l sigma(A_{l-1})^T``, ``l = 1..L``: the weights at a critical point (spec 002 §3.12 step 3)."""
    return ltilde * momenta[1:] @ relu_features(reps[:-1]).transpose(-1, -2)


def stationarity_residual(weights: Tensor, reps: Tensor, momenta: Tensor, ltilde: float) -> Tensor:
    """``r_l = ||W_l - L~ B_l sigma(A_{l-1})^T||_F / ||W_l||_F`` (spec 002 §3.12): 0 at a critical point."""
    gap = torch.linalg.norm(weights - stationary_weights(reps, momenta, ltilde), dim=(-2, -1))
    return gap / torch.linalg.norm(weights, dim=(-2, -1))


@dataclass(frozen=True)
class CriticalNetwork:
    """An exact critical point of [E-DLOSS] built by :func:`shoot_critical_network` (identity in/out maps)."""

    weights: Tensor   # (L, w, w+1)
    reps: Tensor      # A_0..A_L, (L+1, w, N)
    momenta: Tensor   # B_1..B_L of the critical point, (L, w, N)
    target: Tensor    # Y (w x N) for which the network is critical


def _next_momentum(B: Tensor, A: Tensor, step: Tensor, ltilde: float, tol: float, max_iter: int) -> Tensor:
    """Solve ``B = (1 - rho L~) B' + rho L~ 1[A > 0] * ([A]_+ B'^T B')`` for ``B'`` by Newton's method.

    This is the backward step of spec 002 §3.12 with the stationary ``V' = L~ B' [A]_+^T`` substituted.
    """
    active, relu = (A > 0).to(A.dtype), torch.relu(A)

    def residual(Bn: Tensor) -> Tensor:
        return (1 - step * ltilde) * Bn + step * ltilde * active * (relu @ (Bn.T @ Bn)) - B

    Bn = B / (1 - step * ltilde)
    for _ in range(max_iter):
        r = residual(Bn)
        if torch.linalg.norm(r) <= tol * torch.linalg.norm(B):
            return Bn
        jac = torch.func.jacrev(residual)(Bn).reshape(r.numel(), Bn.numel())
        Bn = Bn - torch.linalg.solve(jac, r.flatten()).reshape(Bn.shape)
    raise ValueError(f"the backward step did not converge in {max_iter} Newton iterations: use a smaller step "
                     "rho L~ or a smaller initial momentum")


def shoot_critical_network(A0: Tensor, B1: Tensor, rho: Tensor, ltilde: float, lam: float,
                           tol: float = 1e-13, max_iter: int = 50) -> CriticalNetwork:
    """Build a discrete Leaky ResNet that is an exact critical point of [E-DLOSS] (spec 002 §3.4, §3.12).

    Shooting from ``(A_0, B_1)``: ``W_l = L~ B_l sigma(A_{l-1})^T`` (stationarity), ``A_l`` by [E-DISC], and
    ``B_{l+1}`` solves the adjoint step with those stationary weights; the target ``Y = A_L + lambda N B_L / 2``
    makes ``B_L = 2 (Y - A_L) / (lambda N)`` the output momentum of ``C = ||Y - A_L||_F^2 / N``. Every
    stationarity residual of the result is 0 up to rounding, so it serves as ground truth for the diagnostics
    (T6, T7, T9, T10 of spec 002 §3.15) that a trained ReLU network can only approach.
    """
    _check_positive("ltilde", ltilde)
    _check_positive("lam", lam)
    if bool((rho * ltilde >= 1).any()):
        raise ValueError(f"max rho_l L~ = {float((rho * ltilde).max()):.3g} is not allowed: must be < 1")
    A, B = A0, B1
    reps, momenta, weights = [A0], [B1], []
    for layer in range(rho.shape[0]):
        W = ltilde * B @ relu_features(A).T
        A = (1 - rho[layer] * ltilde) * A + rho[layer] * W @ relu_features(A)
        weights.append(W)
        reps.append(A)
        if layer + 1 < rho.shape[0]:
            B = _next_momentum(B, A, rho[layer + 1], ltilde, tol, max_iter)
            momenta.append(B)
    target = A + 0.5 * lam * A0.shape[-1] * B
    return CriticalNetwork(torch.stack(weights), torch.stack(reps), torch.stack(momenta), target)


def layer_velocities(reps: Tensor, rho: Tensor) -> Tensor:
    """``dA_l = (A_l - A_{l-1}) / rho_l`` for ``l = 1..L`` (spec 002 §3.12 step 4)."""
    return (reps[1:] - reps[:-1]) / rho[:, None, None]


def relative_step_distances(reps: Tensor) -> Tensor:
    """``||A_l - A_{l-1}||_F / ||A_l||_F`` for ``l = 1..L`` (what adaptive steps equalise; seed 002 §4)."""
    diffs = torch.linalg.norm(reps[..., 1:, :, :] - reps[..., :-1, :, :], dim=(-2, -1))
    return diffs / torch.linalg.norm(reps[..., 1:, :, :], dim=(-2, -1))


@dataclass(frozen=True)
class LayerDiagnostics:
    """Per-layer quantities of a discrete Leaky ResNet (spec 002 §3.12, §3.13, §4.4), ``l = 1..L``.

    The Hamiltonian terms use the symplectic-Euler pairing ``(A_{l-1}, B_l, dA_l)`` (spec 002 §7 P4), under
    which the identity of Theorem 4 holds exactly when the stationarity residual is 0.
    """

    p: Tensor                   # layer positions p_l
    rho: Tensor                 # steps rho_l
    h: Tensor                   # -2 H / L~ from Eq. (1) (no pseudo-inverse)
    h_same_index: Tensor        # -2 H(A_l, B_l) / L~ for l = 0..L (secondary variant)
    h_gamma: Tensor             # stable Hamiltonian COI_gamma - kappa
    coi_gamma: Tensor           # ||A_{l-1}||^2_(K + gamma I)
    kappa: Tensor               # ||dA_l||^2_(K + gamma I) / L~^2
    gamma: Tensor               # gamma_l used
    speed: Tensor               # ||dA_l||_F
    speed_gamma: Tensor         # ||dA_l||_(K + gamma I)
    momentum_norm: Tensor       # ||B_l||_F
    momentum_feature_norm: Tensor  # ||B_l sigma(A_{l-1})^T||_F
    weight_norm_sq: Tensor      # ||W_l||_F^2 (bias included)
    bias_norm_sq: Tensor        # ||b_l||^2
    stationarity: Tensor        # r_l
    theorem4_residual: Tensor   # |H_l - RHS of Theorem 4| / |H_l|
    eq3_gap: Tensor
    eq3_bound: Tensor
    speed_gap: Tensor
    speed_bound: Tensor
    negativity: Tensor          # ||A_l - [A_l]_+|| / ||A_l||
    relative_step: Tensor       # ||A_l - A_{l-1}|| / ||A_l||
    weight_singular_values: Tensor  # (L, w) singular values of W_l, descending


def layer_diagnostics(weights: Tensor, rho: Tensor, reps: Tensor, momenta: Tensor, ltilde: float,
                      gamma0: float = 1e-3, gamma: float | None = None) -> LayerDiagnostics:
    """All per-layer diagnostics of a trained Leaky ResNet from its weights, steps, representations, momenta.

    ``gamma`` (constant) overrides the layer-dependent ``gamma_l = gamma0 lambda_max(K_l)`` (erratum P5(c)).
    Everything is computed in the dtype of the inputs (use float64; spec 002 §3.12).
    """
    _check_positive("ltilde", ltilde)
    L = weights.shape[0]
    if reps.shape[0] != L + 1 or momenta.shape[0] != L + 1:
        raise ValueError(f"need L+1 = {L + 1} representations and momenta, got {reps.shape[0]} and "
                         f"{momenta.shape[0]}")
    A_prev, B_next = reps[:-1], momenta[1:]
    velocity = layer_velocities(reps, rho)
    if gamma is None:
        gam = adaptive_gamma(A_prev, gamma0)
    else:
        _check_positive("gamma", gamma)
        gam = torch.full((L,), gamma, dtype=reps.dtype, device=reps.device)
    energies = stable_energies(A_prev, velocity, ltilde, gam)
    H = hamiltonian(A_prev, B_next, ltilde)
    bounds = theorem4_bounds(A_prev, velocity, B_next, ltilde, gam)
    rhs = theorem4_rhs(A_prev, velocity, B_next, ltilde, gam)
    relu_gap = torch.linalg.norm(reps[1:] - torch.relu(reps[1:]), dim=(-2, -1))
    return LayerDiagnostics(
        p=torch.cumsum(rho, 0), rho=rho, h=-2 * H / ltilde,
        h_same_index=rescaled_hamiltonian(reps, momenta, ltilde),
        h_gamma=energies["h"], coi_gamma=energies["coi"], kappa=energies["kappa"], gamma=gam,
        speed=torch.linalg.norm(velocity, dim=(-2, -1)), speed_gamma=energies["speed_sq"].sqrt(),
        momentum_norm=torch.linalg.norm(B_next, dim=(-2, -1)),
        momentum_feature_norm=torch.linalg.norm(B_next @ relu_features(A_prev).transpose(-1, -2),
                                                dim=(-2, -1)),
        weight_norm_sq=(weights**2).sum((-1, -2)), bias_norm_sq=(weights[..., -1] ** 2).sum(-1),
        stationarity=stationarity_residual(weights, reps, momenta, ltilde),
        theorem4_residual=(H - rhs).abs() / H.abs(),
        eq3_gap=bounds["eq3_gap"], eq3_bound=bounds["eq3_bound"],
        speed_gap=bounds["speed_gap"], speed_bound=bounds["speed_bound"],
        negativity=relu_gap / torch.linalg.norm(reps[1:], dim=(-2, -1)),
        relative_step=relative_step_distances(reps),
        weight_singular_values=torch.linalg.svdvals(weights),
    )


def discrete_balancedness(weights: Tensor, rho: Tensor, ltilde: float) -> tuple[Tensor, Tensor]:
    """``(||W_l||^2 - ||W_{l-1}||^2, 2 L~ rho_l ||b_l||^2)``, ``l = 2..L`` (spec 002 §3.11, erratum P5(f))."""
    norms = (weights**2).sum((-1, -2))
    bias = (weights[..., -1] ** 2).sum(-1)
    return norms[1:] - norms[:-1], 2 * ltilde * rho[1:] * bias[1:]


def path_length(reps: Tensor) -> Tensor:
    """``sum_l ||A_l - A_{l-1}||_F`` (approximates ``int ||dA_p|| dp``; spec 002 §3.12 summaries, Fig. 3)."""
    return torch.linalg.norm(reps[1:] - reps[:-1], dim=(-2, -1)).sum()


# --------------------------------------------------------------------------------------------- step sizes


def equidistant_steps(L: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """``rho_l = 1 / L`` (seed 002 §4)."""
    if L < 1:
        raise ValueError(f"L={L!r} is not allowed: must be >= 1")
    return torch.full((L,), 1.0 / L, dtype=dtype)


def irregular_steps(L: int, a: float = 0.5, symmetric: bool = False,
                    dtype: torch.dtype = torch.float64) -> Tensor:
    """``rho_l = 1/L + a/L (1/4 - |x_l - 1/2|)`` with ``x_l = l / L`` (seed 002 §4), renormalised to sum 1.

    The paper's formula sums to 1 only for even ``L`` (spec 002 §3.14, erratum P5(h), verified); it is
    renormalised. ``symmetric=True`` uses ``x_l = (l - 1/2) / L`` (spec 002 CHOICE).
    """
    if L < 1:
        raise ValueError(f"L={L!r} is not allowed: must be >= 1")
    if not 0 <= a < 1:
        raise ValueError(f"a={a!r} is not allowed: must be in [0, 1)")
    index = torch.arange(1, L + 1, dtype=dtype)
    x = (index - 0.5) / L if symmetric else index / L
    rho = 1.0 / L + a / L * (0.25 - (x - 0.5).abs())
    return rho / rho.sum()


def adaptive_steps(rho: Tensor, reps: Tensor, damping: float = 1.0, eps: float = 1e-12,
                   floor: float = 0.0, ceiling: Tensor | float | None = None) -> Tensor:
    """One update of the adaptive rule of seed 002 §4 (spec 002 §3.14):

    ``rho_l <- c_l / sum_k c_k`` with ``c_l = rho_l ||A_l|| / ||A_l - A_{l-1}||``, mixed as
    ``(1 - damping) rho + damping rho_new``, floored at ``floor / L`` (spec 002 CHOICEs) and renormalised.
    ``ceiling`` (a float, or a tensor over the leading dimensions) caps every step, the excess going to the
    other layers in proportion to their steps; ``ceiling = 0.9 / L~`` keeps ``rho_l L~ < 1`` (pitfall P9).
    Batched over leading dimensions: ``rho (..., L)``, ``reps (..., L+1, w, N)``.
    """
    diffs = torch.linalg.norm(reps[..., 1:, :, :] - reps[..., :-1, :, :], dim=(-2, -1))
    return adaptive_steps_from_norms(rho, torch.linalg.norm(reps[..., 1:, :, :], dim=(-2, -1)), diffs, damping,
                                     eps, floor, ceiling)


def adaptive_steps_from_norms(rho: Tensor, rep_norms: Tensor, step_norms: Tensor, damping: float = 1.0,
                              eps: float = 1e-12, floor: float = 0.0, ceiling: Tensor | float | None = None) -> Tensor:
    """:func:`adaptive_steps` from ``||A_l||`` and ``||A_l - A_{l-1}||`` (``(..., L)`` each, l = 1..L), for a
    training loop that has the norms without the stacked representations."""
    if not 0 < damping <= 1:
        raise ValueError(f"damping={damping!r} is not allowed: must be in (0, 1]")
    L = rho.shape[-1]
    c = rho * rep_norms / (step_norms + eps)
    new = c / c.sum(-1, keepdim=True)
    mixed = ((1 - damping) * rho + damping * new).clamp_min(floor / L)
    mixed = mixed / mixed.sum(-1, keepdim=True)
    if ceiling is None:
        return mixed
    cap = torch.as_tensor(ceiling, dtype=rho.dtype, device=rho.device)[..., None].expand_as(mixed)
    if bool((cap * L <= 1).any()):
        raise ValueError(f"ceiling={ceiling!r} is not allowed: L * ceiling must exceed 1 (L = {L})")
    for _ in range(L):  # each pass fixes at least one more capped layer
        capped = mixed >= cap
        free = torch.where(capped, torch.zeros_like(mixed), mixed)
        left = 1 - torch.where(capped, cap, torch.zeros_like(cap)).sum(-1, keepdim=True)
        scale = left / free.sum(-1, keepdim=True)
        mixed = torch.where(capped, cap, mixed * scale)
        if not bool((mixed > cap).any()):
            break
    return mixed


def step_scheme(name: str, L: int, a: float = 0.5, dtype: torch.dtype = torch.float64) -> Tensor:
    """Initial steps for a scheme: "equidistant", "irregular" or "adaptive" (starts equidistant)."""
    if name in ("equidistant", "adaptive"):
        return equidistant_steps(L, dtype)
    if name == "irregular":
        return irregular_steps(L, a, dtype=dtype)
    raise ValueError(f"scheme={name!r} is not allowed: choose equidistant, irregular or adaptive")
