"""Gradient dynamics of shallow univariate ReLU networks (seed 001; digest with errata: spec 001).

The network of Eq. (1) of seed 001, f(x) = (1/α) Σ_i c_i [a_i x − b_i]_+, its canonical (non-redundant)
parameterisation (r_i, θ_i) of Eqs. (4)-(6), the canonical velocity field (Eq. 12), the residual dynamics
(Prop. 1), the attractor/repulsor condition (Lemma 2, corrected), the conserved δ_i (Lemma 3), the change of
metric (Prop. 4, corrected) and the regime measures M1-M7 of spec 001 §3.4.

Conventions (spec 001 §2.0): samples x are sorted ascending, the residual is ρ_j = f(x_j) − y_j, the loss is
L = ½ Σ_j ρ_j², κ = m/α, r̂_i = c_i √(a_i² + b_i²) and r_i = κ r̂_i.

The functions on the full network (``network``, ``loss_gradients``, ``tangent_kernel``) accept NumPy arrays or
torch tensors with any leading batch shape (..., m); the trainer of :mod:`repdyn.nn.full_batch_gd` uses them on
tensors. The canonical-coordinate functions work on NumPy float64 arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = Any
"""A NumPy array or a torch tensor (the full-network functions work on either)."""


def _per_net(value: Array | float) -> Array | float:
    """Append an axis to a per-network array (shape (...,)) so it broadcasts against (..., n); scalars pass."""
    return value if isinstance(value, (int, float)) else value[..., None]


def check_samples(x: np.ndarray) -> np.ndarray:
    """The sample locations as float64, checked to be 1-D, sorted ascending and distinct (spec 001 §2.0)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"samples x must be a 1-D array with at least 2 points, got shape {x.shape}")
    if np.any(np.diff(x) <= 0):
        raise ValueError("samples x must be sorted ascending and distinct (spec 001 §2.0)")
    return x


# ---------------------------------------------------------------------------------------------------------
# Full network, Eqs. (1)-(3)
# ---------------------------------------------------------------------------------------------------------

def preactivations(x: Array, a: Array, b: Array) -> Array:
    """a_i x_j − b_i with shape (..., n, m) for x of shape (n,) and a, b of shape (..., m)."""
    return a[..., None, :] * x[:, None] - b[..., None, :]


def network(x: Array, a: Array, b: Array, c: Array, alpha: Array | float) -> Array:
    """f_z(x) = (1/α) Σ_i c_i [a_i x − b_i]_+ (Eq. 1 of seed 001); shape (..., n). No output bias."""
    hidden = preactivations(x, a, b).clip(min=0)
    return (hidden * c[..., None, :]).sum(-1) / _per_net(alpha)


def loss_gradients(x: Array, y: Array, a: Array, b: Array, c: Array, alpha: Array | float
                   ) -> tuple[Array, Array, Array, Array]:
    """Residual ρ and (∂L/∂a, ∂L/∂b, ∂L/∂c) for L = ½ Σ_j ρ_j² (spec 001 §2.1; corrects Eq. 46, erratum E7).

    ∂L/∂c_i = (1/α) Σ_j ρ_j [a_i x_j − b_i]_+, ∂L/∂a_i = (c_i/α) Σ_j ρ_j x_j 1_ij,
    ∂L/∂b_i = −(c_i/α) Σ_j ρ_j 1_ij, with the convention ReLU'(0) = 0 (pitfall P9).
    """
    pre = preactivations(x, a, b)
    hidden = pre.clip(min=0)
    rho = (hidden * c[..., None, :]).sum(-1) / _per_net(alpha) - y
    active_rho = (pre > 0) * rho[..., None]
    grad_c = (hidden * rho[..., None]).sum(-2) / _per_net(alpha)
    grad_a = c * (active_rho * x[:, None]).sum(-2) / _per_net(alpha)
    grad_b = -c * active_rho.sum(-2) / _per_net(alpha)
    return rho, grad_a, grad_b, grad_c


def tangent_kernel(x: Array, a: Array, b: Array, c: Array, alpha: Array | float,
                   train_ab: Array | bool = True, train_c: Array | bool = True) -> Array:
    """Tangent kernel Θ = J Jᵀ on the samples (Eq. 3 of seed 001; explicit form spec 001 §2.1), shape (..., n, n).

    Θ_jj' = (1/α²) Σ_i ( 1[c trained] h_ij h_ij' + 1[a, b trained] c_i² (x_j x_j' + 1) 1_ij 1_ij' ).
    ``train_ab`` / ``train_c`` (bool or per-network arrays) drop the frozen parameters' contribution.
    """
    pre = preactivations(x, a, b)
    hidden = pre.clip(min=0)
    mask = (pre > 0) * c[..., None, :]
    rf = hidden @ hidden.swapaxes(-1, -2)
    active = (mask @ mask.swapaxes(-1, -2)) * (x[:, None] * x[None, :] + 1)
    scale = alpha if isinstance(alpha, (int, float)) else alpha[..., None, None]
    tc = train_c if isinstance(train_c, bool) else train_c[..., None, None]
    tab = train_ab if isinstance(train_ab, bool) else train_ab[..., None, None]
    return (tc * rf + tab * active) / scale**2


def layer_imbalance(a: Array, b: Array, c: Array) -> Array:
    """δ_i = c_i² − a_i² − b_i², conserved by gradient flow (Lemma 3 of seed 001)."""
    return c**2 - a**2 - b**2


def knots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Knot positions e_i = b_i / a_i = −tan θ_i (spec 001 §2.2); ±inf or nan where a_i = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(b, dtype=np.float64) / np.asarray(a, dtype=np.float64)


# ---------------------------------------------------------------------------------------------------------
# Canonical parameterisation, Eqs. (4)-(6) and (45)
# ---------------------------------------------------------------------------------------------------------

def to_canonical(a: np.ndarray, b: np.ndarray, c: np.ndarray, kappa: float) -> tuple[np.ndarray, np.ndarray]:
    """The map π of Eq. (5): r_i = κ c_i √(a_i² + b_i²), θ_i = atan2(−b_i, a_i) (spec 001 erratum E1: the
    paper's arctan(−b/a) loses the sign of a_i). κ = m/α (κ = 1 for α = m, √m for α = √m)."""
    a, b, c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
    return kappa * c * np.hypot(a, b), np.arctan2(-b, a)


def from_canonical(r: np.ndarray, theta: np.ndarray, delta: np.ndarray | float, kappa: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of π given δ (Eq. 45 of seed 001 generalised to any α; spec 001 §2.2 and pitfall P12).

    With r̂ = r/κ and D = √(δ² + 4 r̂²): c² = (D + δ)/2, a² + b² = (D − δ)/2, sign(c) = sign(r),
    a = ρ cos θ, b = −ρ sin θ. The smaller of c², ρ² is computed as r̂²/(larger) to avoid cancellation.
    The paper's Eq. (45) writes r for r̂, valid only at α = m (erratum E6).
    """
    r_hat = np.asarray(r, dtype=np.float64) / kappa
    delta = np.broadcast_to(np.asarray(delta, dtype=np.float64), r_hat.shape)
    root = np.sqrt(delta**2 + 4 * r_hat**2)
    large = (root + np.abs(delta)) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        small = np.where(large > 0, r_hat**2 / large, 0.0)
    c_sq = np.where(delta >= 0, large, small)
    ab_sq = np.where(delta >= 0, small, large)
    sign = np.where(r_hat >= 0, 1.0, -1.0)
    c = sign * np.sqrt(c_sq)
    radius = np.sqrt(ab_sq)
    return radius * np.cos(theta), -radius * np.sin(theta), c


def mobility_ratio(delta: np.ndarray, r_hat: np.ndarray) -> np.ndarray:
    """γ_i = c_i²/(c_i² + a_i² + b_i²) = ½ (1 + δ_i/√(δ_i² + 4 r̂_i²)) ∈ [0, 1] (spec 001 §2.6, M7).

    γ → 0: radial motion only (kernel regime); γ → 1: isotropic (adaptive regime)."""
    delta = np.asarray(delta, dtype=np.float64)
    root = np.sqrt(delta**2 + 4 * np.asarray(r_hat, dtype=np.float64) ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(root > 0, 0.5 * (1 + delta / root), 0.5)


def canonical_network(x: np.ndarray, r: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """f̃_w(x) = (1/m) Σ_i r_i [x cos θ_i + sin θ_i]_+ (Eq. 4 of seed 001)."""
    r = np.asarray(r, dtype=np.float64)
    pre = np.multiply.outer(np.asarray(x, dtype=np.float64), np.cos(theta)) + np.sin(theta)
    return np.maximum(pre, 0) @ r / r.size


def canonical_gradient(x: np.ndarray, rho: np.ndarray, r: np.ndarray, theta: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(∂L̃/∂r_i, ∂L̃/∂θ_i) at residual ρ (Eq. 12 of seed 001; spec 001 §2.3).

    ∂L̃/∂r_i = (1/m) ⟨g_i, d(θ_i)⟩ and ∂L̃/∂θ_i = (1/m) r_i ⟨g_i, t(θ_i)⟩ with g_i = Σ_{j active} ρ_j x̃_j.
    m ∇L̃ = ∇V (erratum E4: the paper writes m/2).
    """
    g = active_residual_sum(x, rho, theta)
    cos, sin = np.cos(theta), np.sin(theta)
    m = np.size(r)
    return (g[:, 0] * cos + g[:, 1] * sin) / m, r * (-g[:, 0] * sin + g[:, 1] * cos) / m


def active_residual_sum(x: np.ndarray, rho: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """g_k = Σ_{j ∈ C_k} ρ_j x̃_j for the activation set of each angle θ_i (Eq. 12), shape (m, 2)."""
    x = np.asarray(x, dtype=np.float64)
    active = (np.multiply.outer(np.cos(theta), x) + np.sin(theta)[:, None]) > 0
    weighted = active * np.asarray(rho, dtype=np.float64)
    return np.stack([weighted @ x, weighted.sum(1)], axis=1)


def canonical_metric(a: np.ndarray, b: np.ndarray, c: np.ndarray, kappa: float) -> tuple[np.ndarray, np.ndarray]:
    """Diagonal metric P_i = diag(κ²(a_i² + b_i² + c_i²), 1/(a_i² + b_i²)) of Prop. 4 (Eq. 20 of seed 001).

    The full (a, b, c) flow seen in canonical coordinates is ẇ_i = −P_i ∇_{w_i} L̃ (the paper's Eq. 19 drops
    the minus sign and its forms hold only at α = m; spec 001 erratum E6). Returns (P_rr, P_θθ).
    """
    ab_sq = np.asarray(a) ** 2 + np.asarray(b) ** 2
    return kappa**2 * (ab_sq + np.asarray(c) ** 2), 1 / ab_sq


def residual_velocity(x: np.ndarray, rho: np.ndarray, r: np.ndarray, theta: np.ndarray,
                      angular: bool = True) -> np.ndarray:
    """ρ̇ of Prop. 1 (Eq. 13 of seed 001) under the mean-field-time canonical flow ẇ_i = −∇V(w_i).

    ρ̇_j = −x̃_jᵀ Σ_{k: A_k ⊂ B_j} Σ_k g_k, with one term per occupied activation region A_k (neurons grouped by
    their activation set C_k), Σ_k = (1/m) Σ_{θ_i ∈ A_k} (r_i² t tᵀ + d dᵀ) and g_k = Σ_{j' ∈ C_k} ρ_j' x̃_j'.
    ``angular=False`` drops the r_i² t tᵀ term: the motion of the radii alone (frozen angles, frozen knots).
    """
    x = np.asarray(x, dtype=np.float64)
    rho = np.asarray(rho, dtype=np.float64)
    m = np.size(r)
    active = (np.multiply.outer(np.cos(theta), x) + np.sin(theta)[:, None]) > 0
    patterns, region = np.unique(active, axis=0, return_inverse=True)
    d = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    t = np.stack([-np.sin(theta), np.cos(theta)], axis=1)
    moments = d[:, :, None] * d[:, None, :]
    if angular:
        moments = moments + np.asarray(r)[:, None, None] ** 2 * t[:, :, None] * t[:, None, :]
    sigma = np.zeros((len(patterns), 2, 2))
    np.add.at(sigma, region.ravel(), moments / m)
    x_tilde = np.stack([x, np.ones_like(x)], axis=1)
    g = (patterns * rho) @ x_tilde
    flow = np.einsum("kab,kb->ka", sigma, g)
    return -np.einsum("ja,kj,ka->j", x_tilde, patterns, flow)


def uv_velocity(x: np.ndarray, rho: np.ndarray, omega: np.ndarray, sign: np.ndarray | float) -> np.ndarray:
    """(F-uv) velocity ω̇ = −ε Σ_{j: ⟨x̃_j, ω⟩ > 0} ρ_j x̃_j in mean-field time (spec 001 §2.3), shape (..., 2).

    The exact δ → +∞ limit of the full flow (up to the time factor κ² c_i²), piecewise constant per activation
    cone; used for the Fig. 9 field (spec 001 erratum E14: not Dπ Dπᵀ, which is not the identity).
    """
    x = np.asarray(x, dtype=np.float64)
    omega = np.asarray(omega, dtype=np.float64)
    active = (omega[..., 0:1] * x + omega[..., 1:2]) > 0
    weighted = active * np.asarray(rho, dtype=np.float64)
    g = np.stack([weighted @ x, weighted.sum(-1)], axis=-1)
    return -np.asarray(sign)[..., None] * g if np.ndim(sign) else -sign * g


# ---------------------------------------------------------------------------------------------------------
# Activation regions and the attractor/repulsor condition (§3.1, Eq. 14, Lemma 2 corrected)
# ---------------------------------------------------------------------------------------------------------

def sample_line_angles(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Angles of the two half-lines of each sample line u x_j + v = 0 (spec 001 erratum E3).

    Returns (right-facing θ = −arctan x_j with u > 0, left-facing θ = π − arctan x_j with u < 0). The paper's
    arctan(x_j) ± π/2 is wrong. The 2s half-lines cut the circle into 2s arcs (2s − 1 non-dead, one dead).
    """
    x = check_samples(x)
    return -np.arctan(x), np.pi - np.arctan(x)


def sample_line_condition(x: np.ndarray, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Corrected Lemma 2 (spec 001 §2.5, erratum E5): which sample half-lines are sign-change boundaries.

    Half-line k (one orientation) is an attractor or repulsor iff −ρ_k² ‖x̃_k‖² < ρ_k ⟨G, x̃_k⟩ < 0, with
    G = Σ_{i>k} ρ_i x̃_i for right-facing and G = Σ_{i<k} ρ_i x̃_i for left-facing particles (Eq. 15 of seed
    001 drops the upper bound). When it holds, the half-line attracts particles with ε ρ_k > 0 and repels the
    others. Returns boolean arrays (right-facing, left-facing), each of shape (s,).
    """
    x = check_samples(x)
    rho = np.asarray(rho, dtype=np.float64)
    x_tilde = np.stack([x, np.ones_like(x)], axis=1)
    terms = rho[:, None] * x_tilde
    after = np.cumsum(terms[::-1], axis=0)[::-1] - terms
    before = np.cumsum(terms, axis=0) - terms
    bound = rho**2 * (x**2 + 1)

    def holds(g: np.ndarray) -> np.ndarray:
        q = rho * np.einsum("ja,ja->j", g, x_tilde)
        return (-bound < q) & (q < 0)

    return holds(after), holds(before)


def sample_line_side_velocities(x: np.ndarray, rho: np.ndarray, sign: float, offset: float = 1e-6
                                ) -> tuple[np.ndarray, np.ndarray]:
    """Angular velocity θ̇ just below and just above each sample half-line for a particle of sign ε and |r| = 1.

    Evaluated from the canonical field of Eq. (12) (θ̇ = −m ∂L̃/∂θ), the robust classification of spec 001 §2.5.
    Returns arrays of shape (2, s) (rows: right-facing, left-facing half-lines) for θ* − offset and θ* + offset.
    An attractor has θ̇(θ* − offset) > 0 > θ̇(θ* + offset); a repulsor the reverse.
    """
    right, left = sample_line_angles(x)
    lines = np.stack([right, left])

    def theta_dot(theta: np.ndarray) -> np.ndarray:
        flat = theta.ravel()
        _, grad_theta = canonical_gradient(x, rho, np.full(flat.size, float(sign)), flat)
        return -flat.size * grad_theta.reshape(theta.shape)

    return theta_dot(lines - offset), theta_dot(lines + offset)


# ---------------------------------------------------------------------------------------------------------
# Regime measures M1-M7 (spec 001 §3.4)
# ---------------------------------------------------------------------------------------------------------

def rms_distance(f: np.ndarray, g: np.ndarray) -> np.ndarray:
    """M1: root-mean-square distance over the last axis (a grid on the data hull, pitfall P13)."""
    return np.sqrt(np.mean((np.asarray(f) - np.asarray(g)) ** 2, axis=-1))


def spline_coordinate(f: np.ndarray, cubic: np.ndarray, linear: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """M2: (β, D) of f on a hull grid. β = ⟨f − S_lin, S_cub − S_lin⟩/‖S_cub − S_lin‖² (1: cubic, 0: linear);
    D = d_cub/(d_cub + d_lin) ∈ [0, 1] (0: cubic spline, 1: linear interpolant)."""
    diff = np.asarray(cubic) - np.asarray(linear)
    beta = ((np.asarray(f) - linear) * diff).sum(-1) / (diff**2).sum(-1)
    d_cub, d_lin = rms_distance(f, cubic), rms_distance(f, linear)
    return beta, d_cub / (d_cub + d_lin)


def knot_clustering(x: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, eps_fraction: float = 0.1
                    ) -> np.ndarray:
    """M3: K_ε, the slope-jump mass |c_i a_i| of knots in the hull [x_1, x_s] lying within ε of a sample.

    ε = eps_fraction · h with h the mean sample spacing; works on (..., m) parameter batches. Compare with
    :func:`knot_clustering_baseline` (0.2 for equally spaced samples and eps_fraction = 0.1).
    """
    x = check_samples(x)
    eps = eps_fraction * (x[-1] - x[0]) / (x.size - 1)
    e = knots(a, b)
    in_hull = np.isfinite(e) & (e >= x[0]) & (e <= x[-1])
    e_safe = np.where(in_hull, e, x[0])
    near = np.min(np.abs(e_safe[..., None] - x), axis=-1) <= eps
    weight = np.abs(np.asarray(c) * np.asarray(a)) * in_hull
    total = weight.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (weight * near).sum(-1) / total, np.nan)


def knot_clustering_baseline(x: np.ndarray, eps_fraction: float = 0.1) -> float:
    """K_ε of knots spread uniformly over the hull: the measure of {u: min_j |u − x_j| ≤ ε} over its length."""
    x = check_samples(x)
    eps = eps_fraction * (x[-1] - x[0]) / (x.size - 1)
    return float(np.minimum(np.diff(x), 2 * eps).sum() / (x[-1] - x[0]))


def knot_displacement(x: np.ndarray, a0: np.ndarray, b0: np.ndarray, a1: np.ndarray, b1: np.ndarray,
                      weight: np.ndarray) -> np.ndarray:
    """M4: weight-averaged |e_i(T) − e_i(0)| over neurons whose initial and final knots lie in the hull.

    spec 001 §3.4 weights by |r̂_i|."""
    x = check_samples(x)
    e0, e1 = knots(a0, b0), knots(a1, b1)
    inside = np.isfinite(e0) & np.isfinite(e1)
    inside &= (e0 >= x[0]) & (e0 <= x[-1]) & (e1 >= x[0]) & (e1 <= x[-1])
    w = np.abs(weight) * inside
    moved = np.where(inside, np.abs(np.where(inside, e1, 0.0) - np.where(inside, e0, 0.0)), 0.0)
    return (w * moved).sum(-1) / w.sum(-1)


def kernel_change(theta_0: np.ndarray, theta_t: np.ndarray) -> np.ndarray:
    """M5: ‖Θ_T − Θ_0‖_F / ‖Θ_0‖_F over the last two axes (a non-laziness measure)."""
    return np.linalg.norm(theta_t - theta_0, axis=(-2, -1)) / np.linalg.norm(theta_0, axis=(-2, -1))


# ---------------------------------------------------------------------------------------------------------
# Shape measures that do not depend on the fit (the regime of a network whatever its residual)
# ---------------------------------------------------------------------------------------------------------

KINK_BINS_PER_SPACING = 10
"""Bins per mean sample spacing h of :func:`kink_masses`: width h/10, the tolerance ε of K_ε (M3)."""


def kink_masses(x: np.ndarray, grid: np.ndarray, f: np.ndarray, bins_per_spacing: int = KINK_BINS_PER_SPACING
                ) -> np.ndarray:
    """The slope change of f in bins of width w = h/bins_per_spacing centred on x_1 + k w (k = 0 … (s − 1)
    bins_per_spacing, so every sample is a bin centre), |f'(bin end) − f'(bin start)|, shape (..., bins).

    f holds values on ``grid`` (ascending, spanning the hull [x_1, x_s]) over its last axis. The slope change of
    f at an interior node is the difference of the chord slopes on either side; a bin's mass is the absolute sum
    of the node changes in it. A kink between two nodes splits over both, so the grid spacing must be at most
    w/2 (then both lie in one bin, except for a kink within a grid spacing of a bin edge).
    """
    x = check_samples(x)
    grid = np.asarray(grid, dtype=np.float64)
    width = (x[-1] - x[0]) / (x.size - 1) / bins_per_spacing
    if grid.ndim != 1 or np.any(np.diff(grid) <= 0) or grid[0] > x[0] or grid[-1] < x[-1]:
        raise ValueError("grid must be ascending and span the hull [x_1, x_s]")
    if np.diff(grid).max() > width / 2:
        raise ValueError(f"grid spacing {np.diff(grid).max():.3g} exceeds half the bin width {width:.3g}")
    slope = np.diff(f, axis=-1) / np.diff(grid)
    change = np.diff(slope, axis=-1)
    node = np.rint((grid[1:-1] - x[0]) / width).astype(np.int64)
    bins = (x.size - 1) * bins_per_spacing + 1
    inside = (node >= 0) & (node < bins)
    onehot = np.zeros((node.size, bins))
    onehot[np.flatnonzero(inside), node[inside]] = 1.0
    return np.abs(change @ onehot)


def effective_kinks(x: np.ndarray, grid: np.ndarray, f: np.ndarray,
                    bins_per_spacing: int = KINK_BINS_PER_SPACING) -> np.ndarray:
    """N_eff, the effective number of kinks of f: the participation ratio (Σ_k W_k)² / Σ_k W_k² of its
    :func:`kink_masses` W. One kink gives 1, n equal kinks give n, a smooth curve spreads its curvature over all
    bins (f = x² on s samples: ≈ (s − 1) bins_per_spacing); NaN where f is linear on the hull."""
    w = kink_masses(x, grid, f, bins_per_spacing)
    total, square = w.sum(-1), (w**2).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(square > 0, total**2 / np.where(square > 0, square, 1.0), np.nan)


def interpolation_bases(x: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B_cub, B_lin), each (s, G): the natural cubic spline and the linear interpolant through values v at x are
    v @ B_cub and v @ B_lin on ``grid`` (both are linear in the values)."""
    from repdyn.theory.shallow_relu_kernels import linear_interpolant, natural_cubic_spline

    eye = np.eye(check_samples(x).size)
    return (np.stack([natural_cubic_spline(x, row)(grid) for row in eye]),
            np.stack([linear_interpolant(x, row)(grid) for row in eye]))


def shape_coordinate(x: np.ndarray, f_samples: np.ndarray, grid: np.ndarray, f: np.ndarray) -> np.ndarray:
    """D_shape: M2's D of f against the two splines through f's own sample values (x_j, f(x_j)), not the
    targets': d(f, S_cub[f]) / (d(f, S_cub[f]) + d(f, S_lin[f])), 0 for a cubic-spline shape, 1 for a
    piecewise-linear shape with knots at the samples, whatever the residual f(x_j) − y_j. NaN where f is linear
    on the hull (both splines equal f)."""
    cubic, linear = interpolation_bases(x, grid)
    f_samples = np.asarray(f_samples, dtype=np.float64)
    d_cub, d_lin = rms_distance(f, f_samples @ cubic), rms_distance(f, f_samples @ linear)
    total = d_cub + d_lin
    scale = np.sqrt(np.mean(np.asarray(f) ** 2, axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 1e-12 * np.maximum(scale, 1e-300), d_cub / np.where(total > 0, total, 1.0), np.nan)


def regime_position(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The |r̂|-weighted median over neurons of δ_i/|r̂_i| (r̂_i = c_i √(a_i² + b_i²), δ_i = c_i² − a_i² − b_i²):
    where a network sits between the kernel (≪ −1) and adaptive (≫ 1) regimes by Prop. 4's metric, whose
    mobility γ = ½(1 + q/√(q² + 4)) at q = δ/|r̂| (:func:`mobility_ratio`). Works on (..., m) batches; NaN where
    every r̂_i is 0."""
    r_hat = np.abs(c * np.sqrt(a**2 + b**2))
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(r_hat > 0, layer_imbalance(a, b, c) / np.where(r_hat > 0, r_hat, 1.0), np.nan)
    order = np.argsort(np.where(r_hat > 0, q, np.inf), axis=-1)
    q_sorted = np.take_along_axis(q, order, -1)
    cum = np.cumsum(np.take_along_axis(r_hat, order, -1), axis=-1)
    total = cum[..., -1:]
    index = np.minimum(np.argmax(cum >= 0.5 * total, axis=-1), q.shape[-1] - 1)
    median = np.take_along_axis(q_sorted, index[..., None], -1)[..., 0]
    return np.where(total[..., 0] > 0, median, np.nan)
