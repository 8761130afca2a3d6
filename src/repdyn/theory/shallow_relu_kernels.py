"""Kernel regime of shallow univariate ReLU networks (seed 001 §3.3; spec 001 §2.7-2.8).

Random-feature kernel K_RF (Eq. 23) in closed form for the uniform and Gaussian first-layer initialisations,
the corrected radial kernel of Eq. (26), the NTK terms of Eq. (27), the knot weight ν of Theorem 5 (corrected),
min-norm kernel interpolation, the exact train-only-c gradient-descent solution (Eq. 22 at finite t and
t = ∞), and the two limits the network is compared with: the natural cubic spline and the linear interpolant.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.interpolate import CubicSpline

from repdyn.theory.shallow_relu import check_samples

Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _pairs(x: np.ndarray, xp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(xp, dtype=np.float64))


# ---------------------------------------------------------------------------------------------------------
# Uniform initialisation a, b ~ U(−A, A) x U(−B, B)
# ---------------------------------------------------------------------------------------------------------

def _uniform_unit_rf(x: np.ndarray, xp: np.ndarray) -> np.ndarray:
    """K_RF for a, b i.i.d. U(−1, 1): (1/16)[∫_{−∞}^{min} ω p + ∫_{max}^{∞} ω p], p(e) = (x − e)(x' − e),
    ω(e) = min(1, e⁻⁴) (spec 001 §2.7, weight representation with w_± = ω/16)."""
    s, q = x + xp, x * xp

    def inner(e: np.ndarray) -> np.ndarray:  # antiderivative of p on |e| <= 1
        return q * e - s * e**2 / 2 + e**3 / 3

    def tail(e: np.ndarray) -> np.ndarray:  # antiderivative of p e^-4 on |e| >= 1, zero at ±inf
        with np.errstate(divide="ignore"):
            return -q / (3 * e**3) + s / (2 * e**2) - 1 / e

    def integral(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        left = tail(np.minimum(hi, -1.0)) - tail(np.minimum(lo, -1.0))
        middle = inner(np.clip(hi, -1.0, 1.0)) - inner(np.clip(lo, -1.0, 1.0))
        right = tail(np.maximum(hi, 1.0)) - tail(np.maximum(lo, 1.0))
        return left + middle + right

    lo, hi = np.minimum(x, xp), np.maximum(x, xp)
    return (integral(np.full_like(lo, -np.inf), lo) + integral(hi, np.full_like(hi, np.inf))) / 16


def uniform_rf_kernel(x: np.ndarray, xp: np.ndarray, a_bound: float = 1.0, b_bound: float = 1.0) -> np.ndarray:
    """K_RF(x, x') = E[[a x − b]_+ [a x' − b]_+] for a ~ U(−A, A), b ~ U(−B, B) independent (Eq. 23).

    Closed form of spec 001 §2.7: for x, x' ∈ [−1, 1] and A = B = 1 it equals
    (1/16)[F(min) − F(−1) + F(1) − F(max)] + x x'/24 + 1/8; in general K_{A,B}(x, x') = B² K_{1,1}(Ax/B, Ax'/B).
    K(0, 0) = 1/6, K(1, 1) = 1/3. Broadcasts over x, x'.
    """
    if a_bound <= 0 or b_bound <= 0:
        raise ValueError(f"uniform bounds must be positive, got A={a_bound}, B={b_bound}")
    x, xp = _pairs(x, xp)
    return b_bound**2 * _uniform_unit_rf(a_bound * x / b_bound, a_bound * xp / b_bound)


def uniform_active_kernel(x: np.ndarray, xp: np.ndarray) -> np.ndarray:
    """K_1(x, x') = P(a x > b, a x' > b) for a, b i.i.d. U(−1, 1) (spec 001 §2.7, NTK term of Eq. 27).

    K_1 = G(min) + G(−max), G(t) = 1/(8|t|) (t ≤ −1), (t + 2)/8 (|t| ≤ 1), 1/2 − 1/(8t) (t ≥ 1);
    equals 1/2 − |x − x'|/8 on [−1, 1].
    """
    x, xp = _pairs(x, xp)

    def g(t: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.where(t <= -1, 1 / (8 * np.abs(t)), np.where(t >= 1, 0.5 - 1 / (8 * t), (t + 2) / 8))

    return g(np.minimum(x, xp)) + g(-np.maximum(x, xp))


def uniform_knot_weight(u: np.ndarray) -> np.ndarray:
    """ν(u) = ∫ |a|³ μ_a(a u) dq(a) = (1/8) min(1, u⁻⁴) for a, b i.i.d. U(−1, 1).

    Theorem 5 of seed 001 with the |a|³ weight of spec 001 erratum E9 (the paper writes |a|); flat on [−1, 1],
    so the min-norm interpolant of data in [−1, 1] is a C² cubic spline there.
    """
    u = np.abs(np.asarray(u, dtype=np.float64))
    with np.errstate(divide="ignore"):
        return np.where(u <= 1, 1.0, 1 / np.maximum(u, 1) ** 4) / 8


# ---------------------------------------------------------------------------------------------------------
# Gaussian initialisation a, b ~ N(0, σ²)
# ---------------------------------------------------------------------------------------------------------

def _angle(x: np.ndarray, xp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(‖x̃‖‖x̃'‖, φ) with φ the angle between x̃ = (x, 1) and x̃' = (x', 1), computed as atan2(|x − x'|, x x' + 1)
    (accurate for nearby points, unlike arccos)."""
    return np.hypot(x, 1.0) * np.hypot(xp, 1.0), np.arctan2(np.abs(x - xp), x * xp + 1)


def gaussian_rf_kernel(x: np.ndarray, xp: np.ndarray, sigma: float = 1.0) -> np.ndarray:
    """K_RF for a, b i.i.d. N(0, σ²): the arc-cosine kernel (σ²/2π) ‖x̃‖‖x̃'‖ (sin φ + (π − φ) cos φ),
    cos φ = (x x' + 1)/(‖x̃‖‖x̃'‖) (spec 001 §2.7)."""
    x, xp = _pairs(x, xp)
    norm, phi = _angle(x, xp)
    return sigma**2 / (2 * np.pi) * norm * (np.sin(phi) + (np.pi - phi) * np.cos(phi))


def gaussian_rf_kernel_eq26(x: np.ndarray, xp: np.ndarray, sigma: float = 1.0) -> np.ndarray:
    """Eq. (26) of seed 001, corrected (spec 001 erratum E10): the middle term's sign is flipped and the formula
    needs x ≤ x' (arguments are ordered here). With C = E[a² + b²] = 2σ² and x ≤ x':
    (C/4π){(π − arctan x' + arctan x)(x x' + 1) + (x/(1+x²) − x'/(1+x'²))(x x' − 1)
           + (x + x')(x'²/(1+x'²) − x²/(1+x²))}."""
    x, xp = _pairs(x, xp)
    lo, hi = np.minimum(x, xp), np.maximum(x, xp)
    big_c = 2 * sigma**2
    return big_c / (4 * np.pi) * (
        (np.pi - np.arctan(hi) + np.arctan(lo)) * (lo * hi + 1)
        + (lo / (1 + lo**2) - hi / (1 + hi**2)) * (lo * hi - 1)
        + (lo + hi) * (hi**2 / (1 + hi**2) - lo**2 / (1 + lo**2)))


def gaussian_active_kernel(x: np.ndarray, xp: np.ndarray) -> np.ndarray:
    """K_1(x, x') = P(a x > b, a x' > b) = (π − φ)/(2π) for a, b i.i.d. Gaussian (spec 001 §2.7)."""
    x, xp = _pairs(x, xp)
    return (np.pi - _angle(x, xp)[1]) / (2 * np.pi)


def gaussian_knot_weight(u: np.ndarray, sigma: float = 1.0) -> np.ndarray:
    """ν(u) = 2σ²/(π (1 + u²)²) for a, b i.i.d. N(0, σ²) (Theorem 5 with the |a|³ weight, erratum E9)."""
    return 2 * sigma**2 / (np.pi * (1 + np.asarray(u, dtype=np.float64) ** 2) ** 2)


def ntk_limit(x: np.ndarray, xp: np.ndarray, c_second_moment: float, init: str = "uniform") -> np.ndarray:
    """m → ∞ NTK of Eq. (27) at α = √m: K_RF(x, x') + E[c²] (x x' + 1) K_1(x, x')."""
    if init == "uniform":
        rf, active = uniform_rf_kernel(x, xp), uniform_active_kernel(x, xp)
    elif init == "gaussian":
        rf, active = gaussian_rf_kernel(x, xp), gaussian_active_kernel(x, xp)
    else:
        raise ValueError(f"init={init!r} is not supported: use 'uniform' or 'gaussian'")
    x, xp = _pairs(x, xp)
    return rf + c_second_moment * (x * xp + 1) * active


# ---------------------------------------------------------------------------------------------------------
# Empirical kernels, interpolants, train-only-c gradient descent
# ---------------------------------------------------------------------------------------------------------

def features(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Random features φ_i(x) = [a_i x − b_i]_+, shape (n, m)."""
    return np.maximum(np.multiply.outer(np.asarray(x, dtype=np.float64), a) - b, 0.0)


def empirical_ntk_terms(x: np.ndarray, xp: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The two terms of the empirical NTK of Eq. (27) at α = √m, shape (n, n') each:
    (1/m) Σ_i φ_i(x) φ_i(x') (random features, the c-gradient part) and
    ((x x' + 1)/m) Σ_i c_i² 1(a_i x > b_i) 1(a_i x' > b_i) (the (a, b)-gradient part)."""
    m = np.size(a)
    fx, fxp = features(x, a, b), features(xp, a, b)
    ax, axp = fx > 0, fxp > 0
    term_rf = fx @ fxp.T / m
    term_active = (np.multiply.outer(x, xp) + 1) * ((ax * c**2) @ axp.T) / m
    return term_rf, term_active


def kernel_interpolant(kernel: Kernel, x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Minimum-RKHS-norm interpolant f = Σ_j α_j K(x_j, ·) of (x, y) (Eq. 24 of seed 001)."""
    x = check_samples(x)
    coef = np.linalg.solve(kernel(x[:, None], x[None, :]), np.asarray(y, dtype=np.float64))

    def f(t: np.ndarray) -> np.ndarray:
        return kernel(np.asarray(t, dtype=np.float64)[..., None], x) @ coef

    f.coef = coef  # type: ignore[attr-defined]
    return f


def output_weights_after_gd(x: np.ndarray, y: np.ndarray, a: np.ndarray, b: np.ndarray, c0: np.ndarray,
                            alpha: float, lr: float, steps: float) -> np.ndarray:
    """Exact output weights c_t after ``steps`` GD steps of size ``lr`` training only c (Eq. 22; spec 001 §2.7).

    c_t = c_0 − (1/α) Φᵀ V diag((1 − (1 − η λ)^t)/λ) Vᵀ ρ⁽⁰⁾, with Φ_ji = [a_i x_j − b_i]_+, Θ = ΦΦᵀ/α² = V Λ Vᵀ
    and ρ⁽⁰⁾ = f_0(X) − y. ``steps = inf`` gives the limit c_0 + Φ⁺(α y − Φ c_0) (spec 001 T9), which
    requires 0 < η λ_max < 2; when Φ has rank below s (width below s) this is the least-squares fit that GD
    reaches. The function is f_t(x) = (1/α) φ(x)ᵀ c_t.
    """
    phi = features(x, a, b)
    ntk = phi @ phi.T / alpha**2
    eig, vec = np.linalg.eigh(ntk)
    null = eig <= 1e-13 * eig.max()  # Φᵀ v = 0 there (width below s, or dead samples): GD never moves
    safe = np.where(null, 1.0, eig)
    if np.isinf(steps):
        if not 0 < lr * eig.max() < 2:
            raise ValueError(f"lr={lr} does not converge: need 0 < lr·λ_max < 2 with λ_max={eig.max():.3g}")
        gain = np.where(null, 0.0, 1 / safe)
    else:
        if steps < 0:
            raise ValueError(f"steps={steps} must be >= 0")
        base = 1 - lr * safe
        with np.errstate(divide="ignore", invalid="ignore"):
            # 1 − (1 − ηλ)^t without cancellation for small ηλ; a plain power where 1 − ηλ ≤ 0 (η λ ≥ 1)
            removed = np.where(base > 0, -np.expm1(steps * np.log1p(-lr * safe)), 1 - np.power(base, steps))
        gain = np.where(null, 0.0, removed / safe)
    rho0 = phi @ c0 / alpha - y
    return c0 - phi.T @ (vec @ (gain * (vec.T @ rho0))) / alpha


def natural_cubic_spline(x: np.ndarray, y: np.ndarray) -> CubicSpline:
    """S_cub: the natural cubic spline through the samples (f'' = 0 at both ends; Fig. 4 of seed 001)."""
    return CubicSpline(check_samples(x), np.asarray(y, dtype=np.float64), bc_type="natural")


def linear_interpolant(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """S_lin: the piecewise-linear interpolant with knots at the samples (adaptive-regime limit, spec 001 §2.8)."""
    x = check_samples(x)
    y = np.asarray(y, dtype=np.float64)
    return lambda t: np.interp(t, x, y)
