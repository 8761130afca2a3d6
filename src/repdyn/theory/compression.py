"""Compression of invariant manifolds by a one-hidden-layer network (seed 003, Paccolat et al. 2021).

Pure maths of the paper: the global amplification factor Λ (Eq. 9), the single-neuron theory of the stripe
model (Eqs. 5-8, App. C) with its fixed points and time scales, the learning-curve exponents (§3.1, §4), the
closed-form NTK of the network of Eq. (1) (spec 003 §2.6) and the frozen-kernel predictor F = K a of spec 003
§2.7 (its hinge-loss gradient flow on the dual coefficients is :mod:`repdyn.nn.kernel_flow`).

Errata followed (each checked against the paper text):
- τ = h √(d/2) (Eq. 5), not the h√d/2 of §2.4 (spec 003 §2.9, P2);
- e^(−d b²/2ω²) in Eq. (5), printed e^(−a b²/2ω²) (App. C.1 has d);
- √(2π) in Eq. (15) and τ*_⊥, printed 2π: with 2π the paper's own condition √(2π)|C₁| − e^(−z²/2) > 0
  would not be equivalent to τ*_⊥ > τ* (spec 003 §2.9, P3);
- finite-p noise of Eq. (7) with standard deviation √D_⊥ (App. C.3: μ² + σ² = D_⊥), not D_⊥ (spec P4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import optimize, special, stats

STRIPE_X_MIN = -0.3
"""Lower edge of the single stripe (seed 003 §3)."""
STRIPE_X_MAX = 1.18549
"""Upper edge, = √2 erf⁻¹(1 + erf(x_min/√2)) so that the labels are equiprobable (footnote 2 with the
erf(x_min/√2) correction of spec 003 §2.1, P5; the paper's printed value is used)."""
CYLINDER_RADIUS = math.sqrt(2.0 * math.log(2.0))
"""Radius of the cylinder model, P(‖x_∥‖ > R) = e^(−R²/2) = 1/2 for d_∥ = 2 (seed 003 §4, footnote 4)."""


def _check_dims(d: int, d_parallel: int) -> None:
    if not 1 <= d_parallel < d:
        raise ValueError(f"need 1 <= d_parallel < d, got d_parallel={d_parallel}, d={d}")


# ---------------------------------------------------------------------------------------------------------
# Exponents (§3.1, §4)
# ---------------------------------------------------------------------------------------------------------

def lazy_exponent(d: int) -> float:
    """β_Lazy = d/(3d − 2): (d − 1 + ξ)/(3d − 3 + ξ) with the NTK cusp ξ = 1 (seed 003 §3.1)."""
    if d < 2:
        raise ValueError(f"d={d} must be >= 2")
    return d / (3 * d - 2)


def feature_exponent(d: int, d_parallel: int = 1) -> float:
    """β_Feature: (2d − 1)/(3d − 2) for the stripe (d_∥ = 1, §3.1) and (d + d_⊥/2)/(3d − 2) for d_∥ > 1
    (§4). The two formulas differ at d_∥ = 1 (the stripe's gain exponent is 2(d − 1), not d_⊥)."""
    _check_dims(d, d_parallel)
    if d_parallel == 1:
        return (2 * d - 1) / (3 * d - 2)
    return (d + (d - d_parallel) / 2) / (3 * d - 2)


# ---------------------------------------------------------------------------------------------------------
# Amplification (Eq. 9)
# ---------------------------------------------------------------------------------------------------------

def amplification(w: torch.Tensor | np.ndarray, d_parallel: int = 1) -> torch.Tensor:
    """Global amplification factor Λ of first-layer weights ``w`` of shape (..., h, d) (Eq. 9 of seed 003).

    Λ² = (d_⊥/d_∥) Σ_n ‖ω_{n,∥}‖² / Σ_n ‖ω_{n,⊥}‖², informative coordinates first. For d_∥ = 1 this is
    Eq. (9); for d_∥ > 1 it is the generalisation of spec 003 §2.8 [I] that keeps Λ(0) ≈ 1. All neurons
    count, dead ones included (P19).
    """
    w = torch.as_tensor(w)
    d = w.shape[-1]
    _check_dims(d, d_parallel)
    par = w[..., :d_parallel].pow(2).sum(dim=(-1, -2))
    perp = w[..., d_parallel:].pow(2).sum(dim=(-1, -2))
    return torch.sqrt((d - d_parallel) / d_parallel * par / perp)


# ---------------------------------------------------------------------------------------------------------
# Single-neuron theory of the stripe (Eqs. 5-8, App. C)
# ---------------------------------------------------------------------------------------------------------

def stripe_label(x1: np.ndarray, x_min: float = STRIPE_X_MIN, x_max: float = STRIPE_X_MAX) -> np.ndarray:
    """y(x₁) = −1 inside the stripe x_min < x₁ < x_max, +1 outside (seed 003 §3)."""
    x1 = np.asarray(x1, dtype=float)
    return np.where((x1 > x_min) & (x1 < x_max), -1.0, 1.0)


def _segments(x_min: float, x_max: float) -> tuple[tuple[float, float, float], ...]:
    return ((-np.inf, x_min, 1.0), (x_min, x_max, -1.0), (x_max, np.inf, 1.0))


def _check_branch(branch: int) -> None:
    if branch not in (1, -1):
        raise ValueError(f"branch={branch} must be +1 (λ → +∞, ω₁ > 0) or -1 (λ → −∞, ω₁ < 0)")


def limit_coefficients(zeta: np.ndarray | float, branch: int, x_min: float = STRIPE_X_MIN,
                       x_max: float = STRIPE_X_MAX) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(C₁^±, C_b^±, C_⊥, D_⊥^±) at ζ in the λ → ±∞ limit (App. C.2, C.3), in closed form for the stripe.

    C₁^± = ⟨y x₁ Θ(±(x₁ − ζ))⟩, C_b^± = ⟨y Θ(±(x₁ − ζ))⟩, C_⊥ = y(ζ), D_⊥^± = ⟨Θ(±(x₁ − ζ))⟩ over
    x₁ ~ N(0, 1): each label segment clipped to the half-line contributes ∫φ = Φ(hi) − Φ(lo) and
    ∫xφ = φ(lo) − φ(hi).
    """
    _check_branch(branch)
    zeta = np.asarray(zeta, dtype=float)
    c1 = np.zeros_like(zeta)
    cb = np.zeros_like(zeta)
    for lo, hi, y in _segments(x_min, x_max):
        if branch == 1:
            a, b = np.maximum(lo, zeta), np.full_like(zeta, hi)
        else:
            a, b = np.full_like(zeta, lo), np.minimum(hi, zeta)
        valid = b > a
        mass = np.where(valid, special.ndtr(b) - special.ndtr(a), 0.0)
        first = np.where(valid, _pdf(a) - _pdf(b), 0.0)
        cb += y * mass
        c1 += y * first
    d_perp = special.ndtr(-zeta) if branch == 1 else special.ndtr(zeta)
    return c1, cb, stripe_label(zeta, x_min, x_max), d_perp


def _pdf(x: np.ndarray) -> np.ndarray:
    """Standard normal density, 0 at ±∞ and NaN (the ``where`` is skipped when every x is finite: the same values)."""
    finite = np.isfinite(x)
    with np.errstate(over="ignore"):
        if finite.all():
            return np.exp(-0.5 * np.square(x)) / math.sqrt(2 * math.pi)
        return np.where(finite, np.exp(-0.5 * np.square(np.where(finite, x, 0.0))), 0.0) / math.sqrt(2 * math.pi)


def fixed_point_function(zeta: np.ndarray | float, d: int, branch: int, x_min: float = STRIPE_X_MIN,
                         x_max: float = STRIPE_X_MAX) -> np.ndarray:
    """G^±(ζ) = d C_b^±(ζ) + ζ C₁^±(ζ), the bracket of Eq. (6); fixed points are its zeros."""
    c1, cb, _, _ = limit_coefficients(zeta, branch, x_min, x_max)
    return d * cb + np.asarray(zeta, dtype=float) * c1


def intercept_velocity(zeta: np.ndarray | float, d: int, branch: int, tau: float = 1.0,
                       x_min: float = STRIPE_X_MIN, x_max: float = STRIPE_X_MAX) -> np.ndarray:
    """ζ̇₁ of Eq. (6) at the asymptote β/ω₁ = sign(C₁^±) √(1 + ζ²/d) (App. C.2), in units of 1/τ.

    ζ̇ = −(1/τ) sign(C₁^±) √(1 + ζ²/d) G^±(ζ): its sign flips at the zeros of G and of C₁ (spec 003 §2.9,
    corrected on verification). Used for Fig. 3b.
    """
    zeta = np.asarray(zeta, dtype=float)
    c1, _, _, _ = limit_coefficients(zeta, branch, x_min, x_max)
    return -np.sign(c1) * np.sqrt(1 + zeta**2 / d) * fixed_point_function(zeta, d, branch, x_min, x_max) / tau


@dataclass(frozen=True)
class Attractor:
    """A stable fixed point z* of the compressing regime on one branch (sign of λ = sign of ω₁)."""

    z: float
    branch: int
    c1: float
    growth_rate: float
    """1/τ* in units of 1/τ: |C₁| √(1 + z²/d) (Eq. 14)."""
    shrinks: bool
    """λ diverges: λ C₁ y(z*) < 0 or √(2π)|C₁| − e^(−z²/2) > 0 (§3.2.1, with the √(2π) erratum)."""


def stripe_attractors(d: int, x_min: float = STRIPE_X_MIN, x_max: float = STRIPE_X_MAX,
                      z_range: float = 6.0) -> list[Attractor]:
    """Stable zeros of G^± (Eq. 6, App. C.2) on both branches, sorted by branch then z.

    Stability: ∂ζ̇/∂ζ < 0 with ζ̇ ∝ −sign(C₁) G, i.e. sign(C₁)·G′(z*) > 0 (the paper's "second
    derivative" means the derivative of ζ̇). For d = 2 the table of spec 003 §2.9 gives −1.226, 0.647
    (ω₁ > 0) and 0.450 (ω₁ < 0).
    """
    if d < 2:
        raise ValueError(f"d={d} must be >= 2")
    grid = np.linspace(-z_range, z_range, 24001)
    out: list[Attractor] = []
    for branch in (1, -1):
        g = fixed_point_function(grid, d, branch, x_min, x_max)
        crossings = np.nonzero(np.sign(g[:-1]) * np.sign(g[1:]) < 0)[0]
        for i in crossings:
            z = optimize.brentq(lambda s, b=branch: float(fixed_point_function(s, d, b, x_min, x_max)),
                                grid[i], grid[i + 1], xtol=1e-13)
            c1 = float(limit_coefficients(z, branch, x_min, x_max)[0])
            eps = 1e-6
            slope = (fixed_point_function(z + eps, d, branch, x_min, x_max)
                     - fixed_point_function(z - eps, d, branch, x_min, x_max)) / (2 * eps)
            if c1 == 0.0 or np.sign(c1) * slope <= 0:
                continue
            y = float(stripe_label(z, x_min, x_max))
            shrinks = (branch * c1 * y < 0) or (math.sqrt(2 * math.pi) * abs(c1) - math.exp(-z * z / 2) > 0)
            out.append(Attractor(float(z), branch, c1, abs(c1) * math.sqrt(1 + z * z / d), bool(shrinks)))
    return out


def fastest_attractor(d: int) -> Attractor:
    """The stripe attractor with the largest growth rate |C₁| √(1 + z²/d) (shortest τ*, Eq. 14): its neurons'
    ω₁ ∝ e^(t/τ*) outgrow the others', so they dominate F and the sums of Eq. (9) as t grows."""
    return max(stripe_attractors(d), key=lambda a: a.growth_rate)


def plateau_amplification(attractor: Attractor, d: int, eq7_as_printed: bool = False) -> float:
    """Λ*/√p at the plateau of Eqs. (7) and (9) when the neurons at ``attractor`` dominate Eq. (9): the median
    over training sets (our derivation from the paper's equations; the paper states only λ* ∼ √p, Eq. 8).

    At z* (λ → ±∞), ω̇₁ = (β/τ) C₁ and Eq. (7) reads ω̇_⊥ = (β/τ)(K ω₁ r + S) with r = ω_⊥/ω₁,
    K = sign(ω₁) C_⊥ e^(−z*²/2)/√(2π) (ω₁/ω → sign(ω₁)) and S = N σ/√p the training-set discrepancy
    (:func:`finite_p_discrepancy`). So ṙ = (β/(τ ω₁))(S − (C₁ − K) r), whose stable fixed point (the paper's
    condition of λ diverging at p = ∞) is r* = S/(C₁ − K): λ* = |C₁ − K|/‖S‖. (The paper's text drops the
    first term of Eq. 7 as ∝ 1/λ, but at the plateau it is of the same order as the second.) Every neuron at z*
    shares S, so Eq. (9) gives Λ* = √(d − 1) λ*. The components of √p S are independent with variance σ² =
    D_⊥(z*) (App. C.3, μ² + σ² = D_⊥; ``eq7_as_printed``: σ = D_⊥, spec 003 P4), so p‖S‖²/σ² ~ χ²_(d−1) and
    median(Λ*/√p) = |C₁ − K| √(d − 1) / (σ √median(χ²_(d−1))).
    """
    c1, _, c_perp, d_perp = (float(v) for v in limit_coefficients(attractor.z, attractor.branch))
    k = attractor.branch * c_perp * math.exp(-attractor.z**2 / 2) / math.sqrt(2 * math.pi)
    sigma = d_perp if eq7_as_printed else math.sqrt(d_perp)
    return abs(c1 - k) * math.sqrt((d - 1) / stats.chi2.median(d - 1)) / sigma


def neuron_time_scale(h: int, d: int) -> float:
    """τ = h √(d/2) (Eq. 5; the h√d/2 of §2.4 is a typo, spec 003 P2)."""
    if h < 1 or d < 1:
        raise ValueError(f"need h >= 1 and d >= 1, got h={h}, d={d}")
    return h * math.sqrt(d / 2)


def growth_time(attractor: Attractor, h: int, d: int) -> float:
    """τ* = τ / (|C₁^±(z*)| √(1 + z*²/d)) (Eq. 14): ω₁, b, β ∝ e^(t/τ*) at the fixed point."""
    return neuron_time_scale(h, d) / attractor.growth_rate


def perpendicular_growth_time(attractor: Attractor, h: int, d: int) -> float:
    """τ*_⊥ = √(2π) τ e^(z*²/2) / √(1 + z*²/d) (App. C.2 with the √(2π) erratum, spec 003 P3)."""
    z = attractor.z
    return math.sqrt(2 * math.pi) * neuron_time_scale(h, d) * math.exp(z * z / 2) / math.sqrt(1 + z * z / d)


_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(96)


def _gaussian_segment_nodes(breaks: np.ndarray, lim: float = 9.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes x, weights w and the density φ(x) of Gauss-Legendre on [−lim, lim] split at the sorted ``breaks``
    (one row per neuron) where the integrand has a kink or a steep step: ⟨fn(x₁)⟩ over x₁ ~ N(0,1) per neuron is
    (fn(x) * w * φ(x)).sum(axis=(1, 2)). Shared by the averages of one velocity evaluation."""
    edges = np.sort(np.clip(np.concatenate([np.full((breaks.shape[0], 1), -lim), breaks,
                                            np.full((breaks.shape[0], 1), lim)], axis=1), -lim, lim), axis=1)
    a, b = edges[:, :-1, None], edges[:, 1:, None]
    x = 0.5 * (b - a) * _GL_NODES + 0.5 * (b + a)
    return x, 0.5 * (b - a) * _GL_WEIGHTS, _pdf(x)


def single_neuron_velocity(w: np.ndarray, b: np.ndarray, beta: np.ndarray, h: int,
                           finite_p_noise: np.ndarray | None = None, x_min: float = STRIPE_X_MIN,
                           x_max: float = STRIPE_X_MAX) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ω̇, ḃ, β̇) of independent neurons in the compressing regime, l′ = 1 (Eq. 5 + Eq. 7 of seed 003).

    ``w``: (n, d), ``b``, ``beta``: (n,). Population averages over x ~ N(0, I_d) (App. C.1):
    ω̇₁ = (β/τ)⟨y x₁ g_λ(x₁ − ζ₁)⟩, ḃ = (√d β/τ)⟨y g_λ(x₁ − ζ₁)⟩,
    ω̇_i = (β/τ) (ω_i/ω) e^(−d b²/2ω²)/√(2π) ⟨y((ω_⊥/ω) x₁ + (ω₁²/ω²) ζ₁)⟩ for i ≥ 2, and
    β̇ = (√2/h)⟨y E_ξ[relu(m + sξ)]⟩ with m = ω₁x₁/√d + b, s = ω_⊥/√d (the β line of Eq. 4, averaged).
    ``finite_p_noise`` (n, d−1) adds (β/τ)·N √D_⊥/√p to ω̇_⊥ (Eq. 7 with the √D_⊥ erratum); pass the
    training-set discrepancy (1/p)Σ_μ x_⊥ y Θ(±(x₁ − ζ₁)) (its mean is 0), see :func:`finite_p_discrepancy`.
    """
    w = np.asarray(w, dtype=float)
    b = np.asarray(b, dtype=float)
    beta = np.asarray(beta, dtype=float)
    d = w.shape[1]
    tau = neuron_time_scale(h, d)
    w1 = w[:, 0]
    w_perp = np.linalg.norm(w[:, 1:], axis=1)
    w_norm = np.sqrt(w1**2 + w_perp**2)
    sd = np.maximum(w_perp, 1e-300)
    zeta = -math.sqrt(d) * b / np.where(w1 == 0, 1e-300, w1)

    breaks = np.stack([np.full_like(zeta, x_min), np.full_like(zeta, x_max), np.clip(zeta, -9, 9)], axis=1)
    x, weight, density = _gaussian_segment_nodes(breaks)
    label = stripe_label(x, x_min, x_max)
    w1x = w1[:, None, None] * x
    # Φ((ω₁ x₁ + b√d)/ω_⊥) = g_λ(x₁ − ζ₁)
    gate = special.ndtr((w1x + math.sqrt(d) * b[:, None, None]) / sd[:, None, None])
    signed_gate = label * gate  # label = ±1: exact, so signed_gate * x is label * x * gate to the bit
    mean_x = (signed_gate * x * weight * density).sum(axis=(1, 2))
    mean_b = (signed_gate * weight * density).sum(axis=(1, 2))
    centre = w1x / math.sqrt(d) + b[:, None, None]
    spread = sd[:, None, None] / math.sqrt(d)
    ratio = centre / spread
    relu_mean = label * (centre * special.ndtr(ratio) + spread * _pdf(ratio))  # y E_ξ[relu]
    mean_beta = (relu_mean * weight * density).sum(axis=(1, 2))
    # ⟨y(s x₁ + m)⟩ = 1 − 2 P(x_min < s x₁ + m < x_max) in closed form
    s = w_perp / w_norm
    m = (w1**2 / w_norm**2) * zeta
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = special.ndtr((x_max - m) / s) - special.ndtr((x_min - m) / s)
    inside = np.where(s > 0, inside, ((m > x_min) & (m < x_max)).astype(float))
    y_perp = 1.0 - 2.0 * inside
    perp_rate = np.exp(-d * b**2 / (2 * w_norm**2)) / math.sqrt(2 * math.pi) * y_perp / w_norm
    rate = beta / tau
    dw = np.empty_like(w)
    dw[:, 0] = rate * mean_x
    dw[:, 1:] = rate[:, None] * perp_rate[:, None] * w[:, 1:]
    if finite_p_noise is not None:
        dw[:, 1:] += rate[:, None] * np.asarray(finite_p_noise, dtype=float)
    db = math.sqrt(d) * beta / tau * mean_b
    dbeta = math.sqrt(2) / h * mean_beta
    return dw, db, dbeta


def finite_p_discrepancy(x: np.ndarray, y: np.ndarray, zeta: np.ndarray, branch: np.ndarray) -> np.ndarray:
    """(1/p) Σ_μ x_⊥^μ y^μ Θ(±(x₁^μ − ζ)) per neuron: N(z) √D_⊥/√p of Eq. (7) computed from the actual
    training set (spec 003 §2.9: "compute N numerically"); the population mean of this sum is 0.

    x: (p, d), y: (p,), zeta, branch: (n,) → (n, d − 1). Uses sorted cumulative sums, O((p + n) d).
    """
    return finite_p_discrepancy_fn(x, y)(zeta, branch)


def finite_p_discrepancy_fn(x: np.ndarray, y: np.ndarray):
    """:func:`finite_p_discrepancy` of one training set as a function of (ζ, branch): the sort and the cumulative
    sums over the set are done once (an ODE evaluates the discrepancy at every step)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    p = x.shape[0]
    order = np.argsort(x[:, 0])
    x1 = x[order, 0]
    contrib = x[order, 1:] * y[order, None] / p
    cum = np.vstack([np.zeros((1, contrib.shape[1])), np.cumsum(contrib, axis=0)])

    def discrepancy(zeta: np.ndarray, branch: np.ndarray) -> np.ndarray:
        k = np.searchsorted(x1, np.asarray(zeta, dtype=float), side="right")  # number of points with x₁ <= ζ
        below = cum[k]
        above = cum[-1] - below
        return np.where(np.asarray(branch)[:, None] > 0, above, below)

    return discrepancy


# ---------------------------------------------------------------------------------------------------------
# NTK of the one-hidden-layer network (spec 003 §2.6)
# ---------------------------------------------------------------------------------------------------------

def _preactivations(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    d = w.shape[-1]
    return x @ w.transpose(-1, -2) / math.sqrt(d) + b.unsqueeze(-2)


def hidden_layer_ntk(w: torch.Tensor, b: torch.Tensor, beta: torch.Tensor, x1: torch.Tensor,
                     x2: torch.Tensor, last_layer_only: bool = False) -> torch.Tensor:
    """Closed-form NTK Θ(x, x′) = ∂_W f(x)·∂_W f(x′) of f = (1/h) Σ β σ(ω·x/√d + b), σ = √2 relu.

    Θ = (S Sᵀ + (G Gᵀ) ⊙ (X X′ᵀ/d + 1)) / h² with S = σ(u), G = β σ′(u) (spec 003 §2.6). With
    ``last_layer_only`` only the β-gradients: K_LL = S Sᵀ/h² (§5.2). Shapes: w (..., h, d), b, beta
    (..., h), x1 (..., n1, d), x2 (..., n2, d) → (..., n1, n2).
    """
    return ntk_from_features(ntk_features(w, b, beta, x1, last_layer_only), ntk_features(w, b, beta, x2,
                                                                                          last_layer_only))


def ntk_features(w: torch.Tensor, b: torch.Tensor, beta: torch.Tensor, x: torch.Tensor,
                 last_layer_only: bool = False) -> tuple[torch.Tensor, ...]:
    """The factors of :func:`hidden_layer_ntk` at the points x: (S, G, X), or (S,) for the last layer; S and G
    are (..., n, h)."""
    u = _preactivations(w, b, x)
    s = math.sqrt(2) * u.clamp_min(0)
    if last_layer_only:
        return (s,)
    return s, math.sqrt(2) * (u > 0).to(w.dtype) * beta.unsqueeze(-2), x


def ntk_from_features(f1: tuple[torch.Tensor, ...], f2: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """:func:`hidden_layer_ntk` from the factors of :func:`ntk_features` at x1 and x2 (a chunk of rows of x1
    needs only its own factors)."""
    s1, s2 = f1[0], f2[0]
    k = s1 @ s2.transpose(-1, -2)
    if len(f1) > 1:
        (_, g1, x1), (_, g2, x2) = f1, f2
        k = k + (g1 @ g2.transpose(-1, -2)) * (x1 @ x2.transpose(-1, -2) / x1.shape[-1] + 1)
    return k / s1.shape[-1] ** 2


def infinite_width_ntk(x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """lim_{h→∞} h·Θ(x, x′) at initialisation (all weights N(0,1)), the arc-cosine form of spec 003 §2.6 [D].

    With x̃ = (x/√d, 1) and θ = ∠(x̃, x̃′): (‖x̃‖‖x̃′‖/π)(sin θ + (π − θ) cos θ) + ((π − θ)/π) x̃·x̃′.
    """
    d = x1.shape[-1]
    a1 = torch.cat([x1 / math.sqrt(d), torch.ones_like(x1[..., :1])], dim=-1)
    a2 = torch.cat([x2 / math.sqrt(d), torch.ones_like(x2[..., :1])], dim=-1)
    dot = a1 @ a2.transpose(-1, -2)
    norms = a1.norm(dim=-1).unsqueeze(-1) * a2.norm(dim=-1).unsqueeze(-2)
    # the same operations in the same order as the formula, in place (π − θ once): ~half the passes over (n1, n2)
    cos = torch.div(dot, norms).clamp_(-1.0, 1.0)
    theta = torch.arccos(cos)
    rest = torch.rsub(theta, math.pi)  # π − θ
    value = torch.sin(theta, out=theta).add_(torch.mul(rest, cos, out=cos))
    return value.mul_(norms.div_(math.pi)).add_(rest.div_(math.pi).mul_(dot))


# ---------------------------------------------------------------------------------------------------------
# Frozen-kernel learning (spec 003 §2.7)
# ---------------------------------------------------------------------------------------------------------

def kernel_predict(gram_test_train: torch.Tensor, coefficients: torch.Tensor) -> torch.Tensor:
    """F(x) = Σ_μ a_μ Θ(x, x^μ) for a (…, n_test, p) Gram block and (…, p) coefficients."""
    return (gram_test_train @ coefficients.unsqueeze(-1)).squeeze(-1)


def classification_error(outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Fraction of points with y·F ≤ 0 along the last axis; ties count as errors (spec 003 §2.5)."""
    return (y * outputs <= 0).to(outputs.dtype).mean(dim=-1)
