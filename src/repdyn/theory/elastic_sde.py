"""Locally elastic SDEs (seed 004): LE dynamics, LE-SDE / LE-ODE, closed forms, separability, neural collapse.

Conventions (spec 004 §2.1): K classes of n particles with features in R^p; a batch of Monte-Carlo runs is an
array ``x`` of shape (R, K, n, p); class means have shape (..., K, p) and are flattened class-major into R^{Kp}.
The LE matrix is E = (α−β) I_K + β 1 1ᵀ (App. E) and the drift matrix M of Eqs. (5)–(6) has block (k, l) equal
to E_kl H_kl / K: the block definition of spec 004 §2.4 (erratum 11: the paper's "(E⊗I)∘H" zeroes the
off-diagonal entries of every block, which is wrong for the L-model). Rates α, β are floats or vectorised
callables of time; integrated rates A, B are callables of time too. Everything is float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import combinations

import numpy as np
from scipy import integrate
from scipy.optimize import linprog

Rate = float | Callable[[np.ndarray], np.ndarray]


def _rate_at(rate: Rate, t: float | np.ndarray) -> np.ndarray:
    return np.asarray(rate(t) if callable(rate) else rate * np.ones_like(np.asarray(t, dtype=float)),
                      dtype=float)


def _check_classes(K: int, p: int | None = None) -> None:
    if int(K) != K or K < 2:
        raise ValueError(f"number of classes K={K!r} must be an integer >= 2")
    if p is not None and (int(p) != p or p < 1):
        raise ValueError(f"feature dimension p={p!r} must be an integer >= 1")


# ----------------------------------------------------------------------------------------------------------
# LE matrix, transformation blocks and the drift matrix M (Eqs. (5), (6), (8); spec 004 §2.4, §2.6, §2.7)
# ----------------------------------------------------------------------------------------------------------

def le_matrix(alpha: float, beta: float, K: int) -> np.ndarray:
    """E = (α−β) I_K + β 1 1ᵀ: intra-class impact α on the diagonal, inter-class impact β off it (App. E)."""
    _check_classes(K)
    return (alpha - beta) * np.eye(K) + beta * np.ones((K, K))


def isotropic_blocks(K: int, p: int) -> np.ndarray:
    """H_kl = I_p for every block: the isotropic l-model (Sec. 3.2.1 of seed 004). Shape (K, K, p, p)."""
    _check_classes(K, p)
    return np.broadcast_to(np.eye(p), (K, K, p, p)).copy()


def margin_directions(K: int) -> np.ndarray:
    """Rows d_j = e_j − 1_K/K, the margin directions of Eq. (8); ‖d_j‖² = (K−1)/K."""
    _check_classes(K)
    return np.eye(K) - np.full((K, K), 1.0 / K)


def logit_blocks(K: int) -> np.ndarray:
    """H_kl = H̄^l = d_l d_lᵀ/‖d_l‖², depending only on the source class l: the L-model, Eq. (8). (K, K, K, K)."""
    d = margin_directions(K)
    proj = np.einsum("li,lj->lij", d, d) / ((K - 1) / K)
    return np.broadcast_to(proj, (K, K, K, K)).copy()


def _split_blocks(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M_diag, M_all), both (Kp, Kp), with M(t) = ((α−β) M_diag + β M_all)/K."""
    blocks = np.asarray(blocks, dtype=float)
    if blocks.ndim != 4 or blocks.shape[0] != blocks.shape[1] or blocks.shape[2] != blocks.shape[3]:
        raise ValueError(f"blocks must have shape (K, K, p, p), got {blocks.shape}")
    K, _, p, _ = blocks.shape
    m_all = blocks.transpose(0, 2, 1, 3).reshape(K * p, K * p)
    diag = np.zeros_like(blocks)
    diag[np.arange(K), np.arange(K)] = blocks[np.arange(K), np.arange(K)]
    return diag.transpose(0, 2, 1, 3).reshape(K * p, K * p), m_all


def drift_matrix(alpha: float, beta: float, blocks: np.ndarray) -> np.ndarray:
    """M with block (k, l) = E_kl H_kl / K (Eqs. (5)–(6), block definition of spec 004 §2.4). (Kp, Kp)."""
    m_diag, m_all = _split_blocks(blocks)
    K = blocks.shape[0]
    return ((alpha - beta) * m_diag + beta * m_all) / K


def logit_model_spectrum(alpha: float, beta: float, K: int) -> np.ndarray:
    """Eigenvalues of the L-model M, ascending: (α−β)/K once, (α+β/(K−1))/K (K−1 times), 0 (K(K−1) times).

    Prop. 3.3 and Eq. (9) of seed 004; (C.8) prints "K+1" where K−1 is right (spec 004 §7 erratum 10).
    """
    _check_classes(K)
    vals = [(alpha - beta) / K] + [(alpha + beta / (K - 1)) / K] * (K - 1) + [0.0] * (K * (K - 1))
    return np.sort(np.array(vals))


def isotropic_spectrum(alpha: float, beta: float, K: int, p: int) -> np.ndarray:
    """Eigenvalues of the l-model M, ascending: (α−β)/K (p(K−1) times) and (α+(K−1)β)/K (p times), (C.4)–(C.6)."""
    _check_classes(K, p)
    vals = [(alpha - beta) / K] * (p * (K - 1)) + [(alpha + (K - 1) * beta) / K] * p
    return np.sort(np.array(vals))


# ----------------------------------------------------------------------------------------------------------
# Closed forms of the LE-ODE
# ----------------------------------------------------------------------------------------------------------

def isotropic_mean(xbar0: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Class means of the l-model LE-ODE, Eq. (7) of seed 004 (exact for time-varying α, β; spec 004 §2.6).

    xbar0: (..., K, p) initial class means; A, B: integrated rates at T times, shape (T,). Returns (T, ..., K, p):
    X̄^k(t) = c_k e^{(A−B)/K} + c_0 e^{(A+(K−1)B)/K} with c_0 the mean over classes and c_k = X̄^k(0) − c_0.
    """
    xbar0 = np.asarray(xbar0, dtype=float)
    K = xbar0.shape[-2]
    _check_classes(K)
    A, B = np.atleast_1d(np.asarray(A, dtype=float)), np.atleast_1d(np.asarray(B, dtype=float))
    c0 = xbar0.mean(axis=-2, keepdims=True)
    ck = xbar0 - c0
    shape = (-1,) + (1,) * xbar0.ndim
    return (ck * np.exp((A - B) / K).reshape(shape) + c0 * np.exp((A + (K - 1) * B) / K).reshape(shape))


def margin_coordinates(xbar: np.ndarray) -> np.ndarray:
    """s_k = d_kᵀ X̄^k / ‖d_k‖² for logit class means (..., K, K) (spec 004 §2.7)."""
    K = xbar.shape[-1]
    d = margin_directions(K)
    return np.einsum("...kj,kj->...k", xbar, d) * K / (K - 1)


def logit_model_mean(xbar0: np.ndarray, times: np.ndarray, A: Callable[[float], float],
                     B: Callable[[float], float], beta: Rate) -> np.ndarray:
    """Class means of the L-model LE-ODE (Eqs. (8)–(9)) for time-varying rates: the exact reduction of
    spec 004 §2.7 (margin coordinates s, a = mean(s), s^⊥ = s − a 1, φ = (A + B/(K−1))/K).

    The quadrature of §2.7 is rewritten with (α−β)/K = φ' − β/(K−1), leaving one integral
    I(t) = ∫_0^t e^{φ} β, and X̄^k(t) = X̄^k(0) + a0 (e^{(A−B)/K} − 1) d_k + s^⊥_k(0) d_k (e^φ − 1 − I/(K−1))
    + s^⊥(0) I / K. A, B: integrated rates (callables); beta: the rate β(t). xbar0: (K, K); returns (T, K, K).
    """
    xbar0 = np.asarray(xbar0, dtype=float)
    K = xbar0.shape[-1]
    if xbar0.shape != (K, K):
        raise ValueError(f"L-model class means must be (K, K) logits, got shape {xbar0.shape}")
    times = np.asarray(times, dtype=float)
    if np.any(np.diff(times) < 0) or times.min(initial=0.0) < 0:
        raise ValueError("times must be non-negative and increasing")
    At = np.array([A(t) for t in times], dtype=float)
    Bt = np.array([B(t) for t in times], dtype=float)
    phi = (At + Bt / (K - 1)) / K

    def integrand(s: float) -> float:
        return math.exp((A(s) + B(s) / (K - 1)) / K) * float(_rate_at(beta, s))

    edges = np.concatenate([[0.0], times])
    I = np.cumsum([integrate.quad(integrand, a, b, epsabs=0, epsrel=1e-12, limit=200)[0]
                   for a, b in zip(edges[:-1], edges[1:], strict=True)])
    d = margin_directions(K)
    s0 = margin_coordinates(xbar0)
    a0 = s0.mean()
    s_perp = s0 - a0
    return (xbar0[None]
            + (a0 * (np.exp((At - Bt) / K) - 1))[:, None, None] * d[None]
            + (np.exp(phi) - 1 - I / (K - 1))[:, None, None] * (s_perp[:, None] * d)[None]
            + (I / K)[:, None, None] * s_perp[None, None, :])


def le_ode_flow(alpha: float, beta: float, blocks: np.ndarray, t: float) -> np.ndarray:
    """Fundamental matrix Φ(t) = exp(M t) of the LE-ODE (6) with constant rates (scipy.linalg.expm)."""
    from scipy.linalg import expm

    return expm(drift_matrix(alpha, beta, blocks) * t)


def simulate_le_ode(alpha: np.ndarray, beta: np.ndarray, blocks: np.ndarray, y0: np.ndarray) -> np.ndarray:
    """Forward Euler of the LE-ODE with step 1 iteration, vectorised over runs (spec 004 §2.11, code `fwd_euler`).

    Y(t) = Y(t−1) + M(t) Y(t−1) with α̂, β̂ at index t, t = 1..T−1. alpha, beta: (T,); y0: (N, K, p).
    Returns (T, N, K, p). The L-model uses ``logit_blocks`` and the l-model ``isotropic_blocks``.
    """
    alpha, beta = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    if alpha.shape != beta.shape or alpha.ndim != 1:
        raise ValueError(f"alpha and beta must be 1-D of equal length, got {alpha.shape} and {beta.shape}")
    y0 = np.asarray(y0, dtype=float)
    N, K, p = y0.shape
    m_diag, m_all = _split_blocks(blocks)
    if m_diag.shape[0] != K * p:
        raise ValueError(f"blocks are for K*p={m_diag.shape[0]}, initial values for K*p={K * p}")
    out = np.empty((alpha.size, N, K * p))
    out[0] = y0.reshape(N, K * p)
    # every step's drift matrix at once (the same arithmetic as one step at a time), transposed for the row update
    drift_t = (((alpha - beta)[:, None, None] * m_diag + beta[:, None, None] * m_all) / K).transpose(0, 2, 1)
    for t in range(1, alpha.size):
        out[t] = out[t - 1] + out[t - 1] @ drift_t[t]
    return out.reshape(alpha.size, N, K, p)


def shared_blocks(H: np.ndarray, K: int) -> np.ndarray:
    """H_kl = H for every block (a non-identity H of Theorem 3.1): the block matrix 1 1ᵀ ⊗ H is PSD with
    positive diagonal iff H is, and M(t) = (E(t)/K) ⊗ H. Shape (K, K, p, p)."""
    H = np.asarray(H, dtype=float)
    if H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise ValueError(f"H must be a square (p, p) matrix, got shape {H.shape}")
    _check_classes(K, H.shape[0])
    return np.broadcast_to(H, (K, K) + H.shape).copy()


def shared_block_law(xbar0: np.ndarray, A: Callable[[float], float], B: Callable[[float], float], H: np.ndarray,
                     sigma: float, n: int, t: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact Gaussian law at time t of the class means of the LE-SDE with H_kl = H (symmetric p × p) for every
    block and time-varying rates (empirical coupling): the eigen-expansion of the proof of Theorem 3.1 ((C.11),
    corrected as in spec 004 §2.5) with μ_j t replaced by ∫_0^t μ_j (C.18).

    M(t) = (E(t)/K) ⊗ H; E(t) is a combination of I and 1 1ᵀ, so the eigenvectors P_c ⊗ u_j (centred) and
    P_1 ⊗ u_j (class average) do not depend on t, with integrated exponents h_j Λ_c, Λ_c = (A − B)/K, and
    h_j Λ_1, Λ_1 = (A + (K−1)B)/K (h_j, u_j: eigenpairs of H). dX̄ = M X̄ dt + σ n^{-1/2} dB gives
    mean X̄^k(t) = e^{Λ_c(t) H} c_k + e^{Λ_1(t) H} c_0 (c_0 the class average of X̄(0), c_k = X̄^k(0) − c_0) and
    covariance (σ²/n) Σ_{mode} P_mode ⊗ U diag(∫_0^t e^{2 h_j (Λ(t) − Λ(s))} ds) Uᵀ.
    xbar0: (K, p); A, B: integrated rates (callables). Returns mean (K, p) and covariance (Kp, Kp), class-major.
    """
    xbar0 = np.asarray(xbar0, dtype=float)
    K, p = xbar0.shape
    _check_classes(K, p)
    H = np.asarray(H, dtype=float)
    if H.shape != (p, p) or not np.allclose(H, H.T):
        raise ValueError(f"H must be a symmetric ({p}, {p}) matrix, got shape {H.shape}")
    h, U = np.linalg.eigh(H)
    modes = {"centred": lambda s: (A(s) - B(s)) / K, "average": lambda s: (A(s) + (K - 1) * B(s)) / K}
    projectors = {"centred": np.eye(K) - np.full((K, K), 1.0 / K), "average": np.full((K, K), 1.0 / K)}
    c0 = xbar0.mean(axis=0)
    mean = np.zeros((K, p))
    cov = np.zeros((K * p, K * p))
    for name, lam in modes.items():
        lam_t = lam(t)
        flow = U @ np.diag(np.exp(lam_t * h)) @ U.T
        mean += (xbar0 - c0) @ flow.T if name == "centred" else np.broadcast_to(flow @ c0, (K, p))
        var = [integrate.quad(lambda s, hj=hj, lam_t=lam_t, lam=lam: math.exp(2 * hj * (lam_t - lam(s))), 0.0, t,
                              epsrel=1e-11, limit=200)[0] for hj in h]
        cov += np.kron(projectors[name], U @ np.diag(var) @ U.T)
    return mean, cov * sigma**2 / n


# ----------------------------------------------------------------------------------------------------------
# Simulators of the stochastic dynamics
# ----------------------------------------------------------------------------------------------------------

def simulate_discrete_le(x0: np.ndarray, alpha: Rate, beta: Rate, blocks: np.ndarray, h: float, n_steps: int,
                         noise_sd: float, rng: np.random.Generator) -> np.ndarray:
    """The discrete LE dynamics, Eq. (4) of seed 004 (Eq. (1) when H = I), vectorised over R runs.

    Each step draws L ~ Unif[K], J ~ Unif[n] per run and moves every particle (i, k) by
    h E_{k,L} H_{k,L} X_J^L + √h ζ_i^k with ζ ~ N(0, noise_sd² I). x0: (R, K, n, p); returns the final state.
    Spec 004 §2.2 erratum 12: the binary display after Eq. (1) is read as in App. A (α if L = k, else β).
    """
    x = np.array(x0, dtype=float)
    R, K, n, p = x.shape
    blocks = np.asarray(blocks, dtype=float)
    runs = np.arange(R)
    for m in range(1, n_steps + 1):
        t = m * h
        a, b = float(_rate_at(alpha, t)), float(_rate_at(beta, t))
        L = rng.integers(0, K, size=R)
        J = rng.integers(0, n, size=R)
        source = x[runs, L, J]                                        # (R, p)
        strength = np.where(np.arange(K)[None, :] == L[:, None], a, b)  # (R, K)
        push = np.einsum("rkpq,rq->rkp", blocks[:, L].transpose(1, 0, 2, 3), source) * strength[..., None]
        x += h * push[:, :, None, :] + math.sqrt(h) * noise_sd * rng.standard_normal(x.shape)
    return x


def simulate_le_sde(x0: np.ndarray, alpha: Rate, beta: Rate, blocks: np.ndarray, sigma: float, t_final: float,
                    n_steps: int, rng: np.random.Generator, coupling: str = "empirical", record_every: int = 0,
                    method: str = "reduced") -> tuple[np.ndarray, np.ndarray | None]:
    """Euler–Maruyama for the particle LE-SDE of spec 004 §2.4 over R Monte-Carlo runs at once (float64).

    dX_i^k = (1/K) Σ_l E_kl(t) H_kl X̄^l dt + σ dW_i^k, the binary case being Eq. (2). ``coupling``: "empirical"
    (X̄ is the particles' own class mean, §2.4) or "deterministic" (X̄ solves the LE-ODE (6) from the initial
    class means, the n → ∞ coupling of Eq. (3)). x0: (R, K, n, p). Returns the final particles and, if
    ``record_every`` > 0, the class means every that many steps, shape (n_steps // record_every + 1, R, K, p).

    ``method="particles"`` steps all R·K·n·p coordinates. ``method="reduced"`` (default) produces the same joint
    law at n-fold lower cost: the drift depends on the particles only through X̄, so it steps X̄ with increments
    σ√dt ξ̄ (ξ̄ ~ N(0, I/n), the mean of the particles' increments) and adds the centred remainder
    σ Σ_t √dt (ξ_i − ξ̄) = σ√T (ζ_i − ζ̄) once at the end, independent of ξ̄ (spec 004 §2.4 decomposition).
    """
    if coupling not in ("empirical", "deterministic"):
        raise ValueError(f"coupling={coupling!r} is not allowed: use 'empirical' or 'deterministic'")
    if method not in ("reduced", "particles"):
        raise ValueError(f"method={method!r} is not allowed: use 'reduced' or 'particles'")
    if n_steps < 1 or t_final <= 0:
        raise ValueError(f"need n_steps >= 1 and t_final > 0, got n_steps={n_steps}, t_final={t_final}")
    x0 = np.asarray(x0, dtype=float)
    R, K, n, p = x0.shape
    m_diag, m_all = _split_blocks(blocks)
    dt = t_final / n_steps
    sq = sigma * math.sqrt(dt)
    mean = x0.mean(axis=2).reshape(R, K * p)
    start = mean.copy()
    records = [mean.reshape(R, K, p).copy()] if record_every else None
    particles = method == "particles"
    # particles are stepped in the layout (R, K·p, n): class means and the drift broadcast run along the
    # contiguous last axis
    x = x0.transpose(0, 1, 3, 2).reshape(R, K * p, n).copy() if particles else None
    noise = np.empty(x.shape if particles else mean.shape)
    for step in range(n_steps):
        t = step * dt
        a, b = float(_rate_at(alpha, t)), float(_rate_at(beta, t))
        M = ((a - b) * m_diag + b * m_all) / K
        if particles and coupling == "empirical":
            mean = x.mean(axis=2)
        drift = (mean @ M.T) * dt
        if particles:
            rng.standard_normal(out=noise)
            noise *= sq
            noise += drift[:, :, None]
            x += noise
            if coupling == "deterministic":
                mean += drift
        else:
            mean += drift
            if coupling == "empirical":
                rng.standard_normal(out=noise)
                mean += (sq / math.sqrt(n)) * noise
        if record_every and (step + 1) % record_every == 0:
            current = x.mean(axis=2) if particles and coupling == "empirical" else mean
            records.append(current.reshape(R, K, p).copy())
    if particles:
        final = x.reshape(R, K, p, n).transpose(0, 1, 3, 2).copy()
    else:
        zeta = rng.standard_normal(x0.shape)
        if coupling == "empirical":
            zeta -= zeta.mean(axis=2, keepdims=True)
        final = x0 + (mean - start).reshape(R, K, 1, p) + sigma * math.sqrt(t_final) * zeta
    return final, (np.stack(records) if record_every else None)


def sample_isotropic_exact(x0: np.ndarray, A: Callable[[float], float], B: Callable[[float], float],
                           sigma: float, t: float, rng: np.random.Generator,
                           coupling: str = "empirical") -> np.ndarray:
    """Exact sample at time t of the l-model particle LE-SDE (H = I, so M(t) = E(t)/K ⊗ I_p commutes over time).

    Spec 004 §2.4: X_i^k = X̄^k + D_i^k with D_i^k(t) = D_i^k(0) + σ(W_i^k − W̄^k)(t) (pure centred Brownian
    motion) and dX̄ = M X̄ dt + σ n^{-1/2} dB, whose Gaussian law is exact: mean by Eq. (7) and, per eigenmode
    Λ_c = (A−B)/K (centred), Λ_1 = (A+(K−1)B)/K (class average), variance (σ²/n) ∫_0^t e^{2(Λ(t)−Λ(s))} ds.
    With coupling="deterministic" the particles follow X_i(0) + m(t) − m(0) + σ W_i(t), m the LE-ODE mean.
    A, B: integrated rates as callables of time. x0: (R, K, n, p); returns (R, K, n, p).
    """
    if coupling not in ("empirical", "deterministic"):
        raise ValueError(f"coupling={coupling!r} is not allowed: use 'empirical' or 'deterministic'")
    x0 = np.asarray(x0, dtype=float)
    R, K, n, p = x0.shape
    At, Bt = float(A(t)), float(B(t))
    mean0 = x0.mean(axis=2)                                           # (R, K, p)
    mean_t = isotropic_mean(mean0, np.array([At]), np.array([Bt]))[0]
    W = math.sqrt(t) * rng.standard_normal(x0.shape)
    if coupling == "deterministic":
        return x0 + (mean_t - mean0)[:, :, None, :] + sigma * W
    deviations = x0 - mean0[:, :, None, :] + sigma * (W - W.mean(axis=2, keepdims=True))
    modes = {"centred": lambda s: (A(s) - B(s)) / K, "average": lambda s: (A(s) + (K - 1) * B(s)) / K}
    # geometric segments keep the quadrature accurate over long horizons (t up to 1e8 in S-B)
    edges = np.concatenate([[0.0], np.geomspace(min(1.0, t / 2), t, 80)])
    var = {}
    for name, lam in modes.items():
        lam_t = lam(t)
        var[name] = sum(integrate.quad(lambda s, lam=lam, lam_t=lam_t: math.exp(2 * (lam_t - lam(s))), lo, hi,
                                       epsrel=1e-10, limit=200)[0]
                        for lo, hi in zip(edges[:-1], edges[1:], strict=True)) * sigma**2 / n
    xi = rng.standard_normal((R, K, p))
    xi_avg = xi.mean(axis=1, keepdims=True)
    # (I − 11ᵀ/K) and 11ᵀ/K are orthogonal projectors: ξ_c = P_c ξ, ξ_1 = P_1 ξ are independent.
    noise = math.sqrt(var["centred"]) * (xi - xi_avg) + math.sqrt(var["average"]) * xi_avg
    return (mean_t + noise)[:, :, None, :] + deviations


# ----------------------------------------------------------------------------------------------------------
# Separability (App. C.1, Thm 2.1, Thm 3.1)
# ----------------------------------------------------------------------------------------------------------

def binary_separated(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    """1-D separability of two classes (Thm 2.1): min x1 > max x2 or the reverse, along the last axis."""
    return (x1.min(axis=-1) > x2.max(axis=-1)) | (x2.min(axis=-1) > x1.max(axis=-1))


def linearly_separable(a: np.ndarray, b: np.ndarray) -> bool:
    """Strict linear separability of point clouds a (n_a, p) and b (n_b, p) (spec 004 §2.5 (a)): a sufficient
    certificate first, the difference of the class means as normal (if it separates them strictly, so does a
    hyperplane), and otherwise the LP feasibility of :func:`_separable_lp`. The same answers as the LP alone
    (tests/theory/test_elastic_sde.py), at a fraction of the cost where the classes have drifted apart."""
    a, b = np.atleast_2d(np.asarray(a, dtype=float)), np.atleast_2d(np.asarray(b, dtype=float))
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"point clouds must have the same dimension, got {a.shape[1]} and {b.shape[1]}")
    w = a.mean(axis=0) - b.mean(axis=0)
    if (a @ w).min() > (b @ w).max():
        return True
    return _separable_lp(a, b)


def _separable_lp(a: np.ndarray, b: np.ndarray) -> bool:
    """Strict linear separability by LP feasibility: find (w, c) with wᵀx + c ≥ 1 on a and ≤ −1 on b
    (scipy.optimize.linprog, HiGHS)."""
    p = a.shape[1]
    # Scale-invariant problem: normalise so the LP tolerances do not depend on the feature magnitude.
    centre = np.concatenate([a, b]).mean(axis=0)
    scale = np.abs(np.concatenate([a, b]) - centre).max() or 1.0
    a, b = (a - centre) / scale, (b - centre) / scale
    A_ub = np.vstack([-np.hstack([a, np.ones((len(a), 1))]), np.hstack([b, np.ones((len(b), 1))])])
    res = linprog(np.zeros(p + 1), A_ub=A_ub, b_ub=-np.ones(len(A_ub)), bounds=[(None, None)] * (p + 1),
                  method="highs")
    if res.status not in (0, 2):
        raise RuntimeError(f"separability LP failed: {res.message}")
    return res.status == 0


def pairwise_separable(x: np.ndarray) -> bool:
    """Definition C.1 of seed 004: every pair of classes in x (K, n, p) is linearly separable."""
    x = np.asarray(x, dtype=float)
    if x.shape[-1] == 1:
        return all(bool(binary_separated(x[k, :, 0], x[l, :, 0])) for k, l in combinations(range(len(x)), 2))
    return all(linearly_separable(x[k], x[l]) for k, l in combinations(range(len(x)), 2))


def intermixed_separation_probability(n: int) -> float:
    """2 / C(2n, n): chance that two fully intermixed exchangeable 1-D classes of n points are separated
    (footnote 5 of seed 004; 0.1 at n = 3)."""
    if int(n) != n or n < 1:
        raise ValueError(f"class size n={n!r} must be a positive integer")
    return 2.0 / math.comb(2 * n, n)


def separation_rate(alpha: float | np.ndarray, beta: float | np.ndarray, K: int) -> np.ndarray:
    """γ = min{α−β, α+(K−1)β}, the rate of Theorem 3.1 (also Γ from A, B)."""
    _check_classes(K)
    alpha, beta = np.asarray(alpha, dtype=float), np.asarray(beta, dtype=float)
    return np.minimum(alpha - beta, alpha + (K - 1) * beta)


def satisfies_theorem_3_1(blocks: np.ndarray, tol: float = 1e-12) -> bool:
    """Theorem 3.1's condition on H: the block matrix is positive semi-definite with positive diagonal."""
    _, H = _split_blocks(blocks)
    sym = np.allclose(H, H.T, atol=tol)
    return bool(sym and np.linalg.eigvalsh((H + H.T) / 2).min() >= -tol and np.diag(H).min() > 0)


def boundary_gap_exponent(gamma0: float, K: int) -> float:
    """For the l-model with β = 0 and α = γ0/(1+t), the class-mean gap grows like (1+t)^{γ0/K} against noise
    √t: returns γ0/K − 1/2, positive iff separable, so the Θ(1/t) boundary sits at γ0 = K/2 (spec 004 §2.5)."""
    _check_classes(K)
    return gamma0 / K - 0.5


# ----------------------------------------------------------------------------------------------------------
# Neural collapse (Eq. (10), Prop. 3.4)
# ----------------------------------------------------------------------------------------------------------

def simplex_etf(K: int, Q: np.ndarray | None = None) -> np.ndarray:
    """Columns of √(K/(K−1)) Q (I_K − 11ᵀ/K), Eq. (10); Q (p, K) with orthonormal columns, default I_K."""
    _check_classes(K)
    Q = np.eye(K) if Q is None else np.asarray(Q, dtype=float)
    if Q.shape[1] != K or not np.allclose(Q.T @ Q, np.eye(K), atol=1e-10):
        raise ValueError(f"Q must have K={K} orthonormal columns, got shape {Q.shape}")
    return math.sqrt(K / (K - 1)) * Q @ (np.eye(K) - np.ones((K, K)) / K)


def etf_deviation(means: np.ndarray) -> np.ndarray:
    """max_{k≠l} |cos(X̄^k, X̄^l) + 1/(K−1)| for class means (..., K, p): 0 exactly at a simplex ETF (§2.8 (i))."""
    means = np.asarray(means, dtype=float)
    K = means.shape[-2]
    u = means / np.linalg.norm(means, axis=-1, keepdims=True)
    cos = np.einsum("...kp,...lp->...kl", u, u)
    off = ~np.eye(K, dtype=bool)
    return np.abs(cos[..., off] + 1.0 / (K - 1)).max(axis=-1)


def norm_variation(means: np.ndarray) -> np.ndarray:
    """Coefficient of variation of ‖X̄^k‖ over classes (spec 004 §2.8 (ii))."""
    norms = np.linalg.norm(np.asarray(means, dtype=float), axis=-1)
    return norms.std(axis=-1) / norms.mean(axis=-1)


def margin_alignment(means: np.ndarray) -> np.ndarray:
    """cos(X̄^k, d_k) per class for logit means (..., K, K) (spec 004 §2.8 (iii)); sign +1 at the L-model's +d limit."""
    means = np.asarray(means, dtype=float)
    d = margin_directions(means.shape[-1])
    return (np.einsum("...kj,kj->...k", means, d)
            / (np.linalg.norm(means, axis=-1) * np.linalg.norm(d, axis=-1)))
