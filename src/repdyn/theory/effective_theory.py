"""Effective theory of two-point representation dynamics (seed 000, van Rossem & Saxe).

Two inputs x_1, x_2 with targets y_1, y_2 are followed through a network split at a hidden layer. The state is
u = ‖dh‖² (squared distance of the two hidden representations), v = ‖dy‖² (squared distance of the two predicted
outputs) and the output alignment w = ‖dy‖² − dyᵀΔy. X = ‖Δx‖² and Y = ‖Δy‖² are the data distances. Only two
constants enter: the effective learning rates ``rate_h`` = 1/τ_h and ``rate_y`` = 1/τ_y (per epoch).

Contents: the 3-D ODE (Eq. 7/21) and the perturbed controls (Eq. 51), a stiff-safe integrator (spec 000 §2.13),
the matrix model (Eq. 17, spec 000 §2.3 erratum: the ½ form), the loss (Eq. 9, corrected per spec 000 §7.2), the
conserved quantity (Eq. 24), the 2-D reduction (Eq. 25), the fixed point (Eq. 10/11/36), the Jacobians (Eq. 29-35),
the equal-target closed form (Eq. 39/40 with the exponent −A_high·t/τ_y of spec 000 §7.1), the lazy-regime
rescaling (Eq. 43, spec 000 §7.3), the random-feature distribution (Eq. 47/48), the exponential weighting (Eq. 50),
and the fit of the effective rates by the objective of Eq. 49.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, special, stats

MAX_STEPS = 10**8
"""LSODA steps allowed per solve (solve_ivp sets no limit; a solve that stalls fails by its step size instead)."""
ODE_SUCCESS = "Integration successful."
"""odeint's message when LSODA reached every requested time."""
VARIANTS = ("original", "factor_two", "square", "minus_sign", "drop_term")
"""Eq. 7 and the four perturbed dynamics of Eq. 51 (App. C.1), in the order of the paper's sentence."""


def _check_positive(name: str, value: float) -> None:
    if not (np.all(np.isfinite(value)) and np.all(np.asarray(value) > 0)):
        raise ValueError(f"{name}={value!r} must be finite and > 0")


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not allowed: choose one of {', '.join(VARIANTS)}")


def vector_field(state: np.ndarray, X: float, Y: float, rate_h: float, rate_y: float,
                 variant: str = "original") -> np.ndarray:
    """d(u, v, w)/dt of Eq. 7 (= Eq. 21) of seed 000, or of one perturbed version of Eq. 51.

    ``state`` has last axis (u, v, w). Perturbations (App. C.1, one change each, spec 000 §2.12):
    factor_two: dv/dt gets a factor 2; square: du/dt = −(X/τ_h) w²; minus_sign: the second term of dw/dt
    changes sign; drop_term: the term (X/τ_h) v/u in dv/dt is dropped.
    """
    _check_variant(variant)
    u, v, w = np.moveaxis(np.asarray(state, dtype=float), -1, 0)
    du = -X * rate_h * (w * w if variant == "square" else w)
    dv_bracket = u * rate_y + (0.0 if variant == "drop_term" else X * rate_h * v / u)
    dv = -(2.0 if variant == "factor_two" else 1.0) * w * dv_bracket
    second = 0.5 * X * rate_h * (v + w) * w / u
    dw = -0.5 * u * rate_y * (3 * w - v + Y) + (second if variant == "minus_sign" else -second)
    return np.stack([du, dv, dw], axis=-1)


def _log_coordinates_field(X: float, Y: float, rate_h: float, rate_y: float,
                           variant: str) -> Callable[[float, np.ndarray], list[float]]:
    """The same field in (log u, r = v/u, w) (spec 000 §2.13): u spans decades and the 1/u terms are stiff."""

    square, drop, plus = variant == "square", variant == "drop_term", variant == "minus_sign"
    xh = X * rate_h
    dv_factor = -(2.0 if variant == "factor_two" else 1.0)
    exp = math.exp

    def rhs(_t: float, z: np.ndarray) -> list[float]:
        # Python floats (LSODA calls this ~10⁵ times per fit); NumPy's inf/NaN where they would raise, so that
        # a blow-up is reported by integrate_dynamics, not raised here
        try:
            return field(*z.tolist())
        except (ZeroDivisionError, OverflowError):
            return [float(value) for value in field(*(np.float64(value) for value in z))]

    def field(log_u: float, r: float, w: float) -> list[float]:
        u = exp(log_u) if type(log_u) is float else np.exp(log_u)
        v = r * u
        du = -xh * (w * w if square else w)
        dv = dv_factor * w * (u * rate_y + (0.0 if drop else xh * r))
        second = 0.5 * xh * (r + w / u) * w
        dw = -0.5 * u * rate_y * (3 * w - v + Y) + (second if plus else -second)
        return [du / u, (dv - r * du) / u, dw]

    return rhs


def _lsoda_first_step(field: Callable[[float, np.ndarray], list[float]], y0: list[float], t_end: float,
                      rtol: float, atol: np.ndarray) -> float:
    """LSODA's own first step from t = 0 aimed at ``t_end`` (ODEPACK lsoda.f: h0 = (1/(tol·w0²) + tol·‖f0‖²)^-½,
    at most t_end, with the error-weighted max norm): the step solve_ivp's one-step LSODA starts with, which odeint
    would instead aim at the first output time."""
    tol = min(max(rtol, 100.0 * np.finfo(float).eps / 2), 1e-3)
    f0 = field(0.0, np.asarray(y0, dtype=float))
    norm = max(abs(f) * (1.0 / (rtol * abs(y) + a)) for f, y, a in zip(f0, y0, atol, strict=True))
    return min(1.0 / math.sqrt(1.0 / (tol * t_end * t_end) + tol * norm * norm), t_end)


@dataclass(frozen=True)
class Trajectory:
    """A solution of Eq. 7 at times ``t``: arrays u, v, w of the same length."""

    t: np.ndarray
    u: np.ndarray
    v: np.ndarray
    w: np.ndarray

    def stacked(self) -> np.ndarray:
        return np.stack([self.u, self.v, self.w], axis=-1)


def integrate_dynamics(initial: tuple[float, float, float], X: float, Y: float, rate_h: float, rate_y: float,
                       t: np.ndarray, variant: str = "original", rtol: float = 1e-9) -> Trajectory:
    """Solve Eq. 7 (or a perturbation of Eq. 51) from (u(0), v(0), w(0)) and return it at times ``t``.

    Stiff-safe (spec 000 §2.13): LSODA in (log u, v/u, w) with rtol ``rtol`` and an absolute tolerance on w
    scaled to its initial magnitude, so that plateaus at u(0) ~ 1e-8 are resolved. Raises ValueError for bad
    inputs and RuntimeError when the solver fails (e.g. a perturbed system that blows up).
    """
    u0, v0, w0 = (float(a) for a in initial)
    _check_positive("u(0)", u0)
    if v0 < 0:
        raise ValueError(f"v(0)={v0!r} is a squared distance and must be >= 0")
    _check_positive("X", X)
    if Y < 0:
        raise ValueError(f"Y={Y!r} is a squared distance and must be >= 0")
    _check_positive("rate_h", rate_h)
    _check_positive("rate_y", rate_y)
    _check_variant(variant)
    t = np.asarray(t, dtype=float)
    if t.ndim != 1 or t.size < 1 or t[0] < 0 or np.any(np.diff(t) <= 0):
        raise ValueError("t must be a 1-D strictly increasing array of times >= 0")
    scale_w = max(abs(w0), 1e-3 * (v0 + Y * u0), 1e-300)
    atol = np.array([1e-10, 1e-9 * max(v0 / u0, 1e-12) + 1e-14, 1e-7 * scale_w + 1e-16])
    start = [math.log(u0), v0 / u0, w0]
    times = t if t[0] == 0 else np.concatenate([[0.0], t])
    with np.errstate(all="ignore"), warnings.catch_warnings():  # a blow-up is reported below, not as warnings
        warnings.simplefilter("ignore", integrate.ODEintWarning)
        # ODEPACK's LSODA driven from Fortran, stopping at the last time (tcrit) as one-step solve_ivp(LSODA) does:
        # the same steps, without solve_ivp's Python work per step (LSODA takes ~10³ steps per solve)
        field = _log_coordinates_field(X, Y, rate_h, rate_y, variant)
        y, info = integrate.odeint(field, start, times, rtol=rtol, atol=atol, tcrit=[times[-1]],
                                   h0=_lsoda_first_step(field, start, float(times[-1]), rtol, atol),
                                   mxstep=MAX_STEPS, full_output=True, tfirst=True)
    y = y[times.size - t.size:].T
    if info["message"] != ODE_SUCCESS or not np.all(np.isfinite(y)):
        raise RuntimeError(f"integration of the {variant} dynamics failed ({info['message']} a non-finite state "
                           f"means u reached 0 in finite time)")
    u = np.exp(y[0])
    return Trajectory(t=t, u=u, v=y[1] * u, w=y[2])


def loss(ybar: np.ndarray, m: np.ndarray, v: np.ndarray, w: np.ndarray, Y: float) -> np.ndarray:
    """Eq. 9 (= Eq. 22) of seed 000, corrected (spec 000 §7.2): ½‖ȳ − m‖² + ¼(w + ½(Y − v)).

    Equals ½‖ȳ − m‖² + ⅛‖dy − Δy‖², the two-point loss with the ½ convention. ``ybar`` and ``m`` have the
    output dimension as their last axis.
    """
    mean_term = 0.5 * np.sum((np.asarray(ybar) - np.asarray(m)) ** 2, axis=-1)
    return mean_term + 0.25 * (np.asarray(w) + 0.5 * (Y - np.asarray(v)))


def output_mean(t: np.ndarray, ybar0: np.ndarray, m: np.ndarray, rate_ybar: float) -> np.ndarray:
    """Eq. 18: ȳ(t) = m + (ȳ(0) − m) e^{−t/τ_ȳ}; returns shape (len(t), dim Y)."""
    ybar0, m = np.atleast_1d(ybar0).astype(float), np.atleast_1d(m).astype(float)
    return m + (ybar0 - m) * np.exp(-rate_ybar * np.asarray(t, dtype=float))[:, None]


def conserved_quantity(u: np.ndarray, v: np.ndarray, X: float, rate_h: float, rate_y: float) -> np.ndarray:
    """Eq. 24 rearranged: τ_y v/u − τ_h u/X is constant along solutions of Eq. 7."""
    return np.asarray(v) / np.asarray(u) / rate_y - np.asarray(u) / (X * rate_h)


def reduced_vector_field(u: np.ndarray, w: np.ndarray, C: float, X: float, Y: float, rate_h: float,
                         rate_y: float) -> np.ndarray:
    """Eq. 25: the 2-D (u, w) system after eliminating v with Eq. 24; C = v(0)/u(0) − (τ_h/τ_y) u(0)/X."""
    u, w = np.asarray(u, dtype=float), np.asarray(w, dtype=float)
    tau_h, tau_y = 1.0 / rate_h, 1.0 / rate_y
    du = -(X / tau_h) * w
    dw = -0.5 * (-(tau_h / tau_y**2) / X * u**3 + Y * u / tau_y + 4 * u * w / tau_y + (X / tau_h) * w**2 / u
                 + C * ((X / tau_h) * w - u**2 / tau_y))
    return np.stack([du, dw], axis=-1)


def reduction_constant(u0: float, v0: float, X: float, rate_h: float, rate_y: float) -> float:
    """C of Eq. 25: v(0)/u(0) − (τ_h/τ_y) u(0)/X."""
    return v0 / u0 - (rate_y / rate_h) * u0 / X


def a_high(u0: np.ndarray, v0: np.ndarray, X: np.ndarray, tau_ratio: float) -> np.ndarray:
    """Eq. 11: A_high = u(0) − (τ_y/τ_h) X v(0)/u(0), the initialisation-set term (``tau_ratio`` = τ_y/τ_h)."""
    return np.asarray(u0) - tau_ratio * np.asarray(X) * np.asarray(v0) / np.asarray(u0)


def a_low(X: np.ndarray, Y: np.ndarray, tau_ratio: float) -> np.ndarray:
    """Eq. 11: A_low = sqrt(τ_y/τ_h) ‖Δx‖ ‖Δy‖, the data-set term."""
    return np.sqrt(tau_ratio * np.asarray(X) * np.asarray(Y))


def fixed_point_distance(u0: np.ndarray, v0: np.ndarray, X: np.ndarray, Y: np.ndarray,
                         tau_ratio: float) -> np.ndarray:
    """Eq. 10 (= Eq. 36): the final squared representational distance ½A_high + sqrt(¼A_high² + A_low²).

    Broadcasts over arrays (pairwise predictions, spec 000 §2.14). ``tau_ratio`` = τ_y/τ_h. Where u(0) = 0
    (identical points) the prediction is 0.
    """
    u0 = np.asarray(u0, dtype=float)
    safe = np.where(u0 > 0, u0, 1.0)
    ah = np.where(u0 > 0, a_high(safe, v0, X, tau_ratio), 0.0)
    al = a_low(X, Y, tau_ratio)
    out = 0.5 * ah + np.sqrt(0.25 * ah**2 + al**2)
    return np.where(u0 > 0, out, 0.0)


def fixed_point_jacobian(X: float, Y: float, u0: float, v0: float, rate_h: float, rate_y: float) -> np.ndarray:
    """Eq. 29: the Jacobian of the (u, w) system (Eq. 25) at the positive fixed point (Eq. 36)."""
    tau_h, tau_y = 1.0 / rate_h, 1.0 / rate_y
    ah = float(a_high(u0, v0, X, tau_y / tau_h))
    al2 = float(a_low(X, Y, tau_y / tau_h)) ** 2
    root = math.sqrt(ah**2 + 4 * al2)
    lower_left = 0.25 * (tau_h / tau_y**2) / X * (2 * al2 + 0.5 * (ah + root) ** 2)
    return np.array([[0.0, -X / tau_h], [lower_left, -(0.5 * ah + root) / tau_y]])


def origin_eigenpairs(X: float, Y: float, u0: float, v0: float, rate_h: float,
                      rate_y: float) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 34/35: eigenvalues λ_± = (A_high ± sqrt(A_high² + 4A_low²))/(2τ_y) at u = 0 and eigenvectors
    e_± = (1, −(τ_h/τ_y)(A_high ± sqrt(A_high² + 4A_low²))/(2X)) in (u, w) coordinates (columns)."""
    tau_h, tau_y = 1.0 / rate_h, 1.0 / rate_y
    ah = float(a_high(u0, v0, X, tau_y / tau_h))
    root = math.sqrt(ah**2 + 4 * float(a_low(X, Y, tau_y / tau_h)) ** 2)
    branches = np.array([ah + root, ah - root])
    vectors = np.stack([np.ones(2), -(tau_h / tau_y) * branches / (2 * X)])
    return branches / (2 * tau_y), vectors


def equal_target_solution(t: np.ndarray, u0: float, v0: float, X: float, rate_h: float,
                          rate_y: float) -> Trajectory:
    """Eq. 39/40 (Y = 0, App. A.4) with the exponent −A_high t/τ_y (spec 000 §7.1; the paper's e^{−A_high t}
    holds only for τ_y = 1: Eq. 38 du/dt = (A_high u − u²)/τ_y integrates to this form)."""
    t = np.asarray(t, dtype=float)
    tau_h, tau_y = 1.0 / rate_h, 1.0 / rate_y
    ah = float(a_high(u0, v0, X, tau_y / tau_h))
    decay = np.exp(-ah * t / tau_y)
    denominator = 1 + (ah / u0 - 1) * decay
    u = ah / denominator
    v = (tau_h / tau_y) * ah**2 / X * (1 - ah / u0) * decay / denominator**2
    return Trajectory(t=t, u=u, v=v, w=v.copy())


def lazy_rescaled(trajectory: Trajectory, gain: float) -> Trajectory:
    """Eq. 41-43 (App. A.5) in the direction of spec 000 §7.3: u' = u/G, v' = v/G², w' = w/G², t' = G t.

    The rescaled trajectory of a solution of Eq. 7 with target distance Y solves Eq. 7 with Y replaced by
    G^{−2} Y (Eq. 43, LaTeX form); as G → ∞ this is the equal-target system, i.e. no plateau.
    """
    _check_positive("gain", gain)
    return Trajectory(t=trajectory.t * gain, u=trajectory.u / gain, v=trajectory.v / gain**2,
                      w=trajectory.w / gain**2)


def final_distance_cdf(h: np.ndarray, a_low_value: np.ndarray | float, X: np.ndarray | float,
                       gain: float) -> np.ndarray:
    """Eq. 47 (App. A.6, with τ_y/τ_h = 1 as the paper assumes): P(‖dh(∞)‖² < h) for A_high ~ N(0, 2X²G²)."""
    h = np.asarray(h, dtype=float)
    return special.ndtr((h - np.asarray(a_low_value) ** 2 / h) / (math.sqrt(2) * np.asarray(X) * gain))


def final_distance_pdf(h: np.ndarray, a_low_value: float, X: float, gain: float) -> np.ndarray:
    """Eq. 48: the density of Eq. 47, (1 + A_low²/h²)/(2√π X G) · exp(−½((h − A_low²/h)/(√2 X G))²)."""
    h = np.asarray(h, dtype=float)
    z = (h - a_low_value**2 / h) / (math.sqrt(2) * X * gain)
    return (1 + a_low_value**2 / h**2) / (2 * math.sqrt(math.pi) * X * gain) * np.exp(-0.5 * z**2)


def final_distance_ks(final: np.ndarray, a_low_value: np.ndarray | float, X: np.ndarray | float,
                      gain: float) -> float:
    """Kolmogorov-Smirnov distance of final squared distances (all > 0) from Eq. 47: sup |F_n − uniform| of their
    Eq. 47 probabilities P(‖dh(∞)‖² < h), each at its own A_low and X (arrays broadcast) under one gain G; at a single
    (A_low, X) this is the KS distance from Eq. 47 itself."""
    final = np.asarray(final, dtype=float)
    if final.size == 0 or not (final > 0).all():
        raise ValueError("Eq. 47 is a distribution on h > 0: the sample needs positive final distances")
    pit = np.broadcast_to(final_distance_cdf(final, a_low_value, X, gain), final.shape).ravel()
    return float(stats.kstest(pit, "uniform").statistic)


def ks_critical(n: int, alpha: float = 0.05) -> float:
    """The exact level-``alpha`` critical value of the one-sample KS distance of n points from a fully specified
    continuous distribution: a sample drawn from it exceeds this with probability ``alpha``."""
    return float(stats.kstwo.ppf(1.0 - alpha, n))


def exponentially_weighted(distances: np.ndarray) -> np.ndarray:
    """Eq. 50: P_ij = Σ_kl e^{−D_ik} e^{−D_lj} D_kl, i.e. P = E·D·E with E = exp(−D) elementwise (unnormalised)."""
    D = np.asarray(distances, dtype=float)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"distances must be a square matrix, got shape {D.shape}")
    E = np.exp(-D)
    return E @ D @ E


# ---------------------------------------------------------------------------------------------- matrix model


@dataclass(frozen=True)
class MatrixState:
    """The linearisation parameters of Eq. 17: mean output ȳ (dim Y), D_h (dim H × dim X), D_y (dim Y × dim H)."""

    ybar: np.ndarray
    D_h: np.ndarray
    D_y: np.ndarray


def matrix_model_derivative(state: MatrixState, dx: np.ndarray, dy_target: np.ndarray, m: np.ndarray,
                            rate_h: float, rate_y: float, rate_ybar: float) -> MatrixState:
    """Eq. 17 in the ½ form of spec 000 §2.3 (erratum: −(2/τ)∂L/∂D for L of Eq. 16, which is what Eq. 7 needs).

    dȳ/dt = −(ȳ − m)/τ_ȳ; dD_h/dt = −D_yᵀ(D_y D_h Δx − Δy)Δxᵀ/(2τ_h); dD_y/dt = −(D_y D_h Δx − Δy)(D_h Δx)ᵀ/(2τ_y).
    """
    dh = state.D_h @ dx
    residual = state.D_y @ dh - dy_target
    return MatrixState(ybar=-rate_ybar * (state.ybar - m),
                       D_h=-0.5 * rate_h * np.outer(state.D_y.T @ residual, dx),
                       D_y=-0.5 * rate_y * np.outer(residual, dh))


def integrate_matrix_model(initial: MatrixState, dx: np.ndarray, dy_target: np.ndarray, m: np.ndarray,
                           rate_h: float, rate_y: float, rate_ybar: float, t: np.ndarray) -> list[MatrixState]:
    """Solve Eq. 17 (a two-layer linear network with a bias and per-layer rates on Δx → Δy) at times ``t``."""
    shapes = [initial.ybar.shape, initial.D_h.shape, initial.D_y.shape]
    sizes = [int(np.prod(s)) for s in shapes]
    dx, dy_target, m = (np.atleast_1d(np.asarray(a, dtype=float)) for a in (dx, dy_target, m))

    def unpack(z: np.ndarray) -> MatrixState:
        parts = np.split(z, np.cumsum(sizes)[:-1])
        return MatrixState(*(p.reshape(s) for p, s in zip(parts, shapes, strict=True)))

    def rhs(_t: float, z: np.ndarray) -> np.ndarray:
        d = matrix_model_derivative(unpack(z), dx, dy_target, m, rate_h, rate_y, rate_ybar)
        return np.concatenate([d.ybar.ravel(), d.D_h.ravel(), d.D_y.ravel()])

    z0 = np.concatenate([np.ravel(initial.ybar), np.ravel(initial.D_h), np.ravel(initial.D_y)]).astype(float)
    sol = integrate.solve_ivp(rhs, (0.0, float(t[-1])), z0, method="LSODA", t_eval=t, rtol=1e-11, atol=1e-14)
    if sol.status != 0:
        raise RuntimeError(f"integration of the matrix model failed: {sol.message}")
    return [unpack(z) for z in sol.y.T]


def matrix_model_observables(state: MatrixState, dx: np.ndarray, dy_target: np.ndarray) -> tuple[float, float, float]:
    """(u, v, w) of a matrix-model state: dh = D_h Δx, dy = D_y dh, w = ‖dy‖² − dyᵀΔy (Eq. 8)."""
    dh = state.D_h @ np.atleast_1d(dx)
    dy = state.D_y @ dh
    return float(dh @ dh), float(dy @ dy), float(dy @ dy - dy @ np.atleast_1d(dy_target))


def matrix_model_invariant(state: MatrixState, dx: np.ndarray, rate_h: float, rate_y: float) -> np.ndarray:
    """Q = τ_y D_yᵀD_y − (τ_h/X) dh dhᵀ, conserved by Eq. 17 without the alignment assumption (spec 000 §2.3)."""
    dx = np.atleast_1d(dx)
    dh = state.D_h @ dx
    return state.D_y.T @ state.D_y / rate_y - np.outer(dh, dh) / (rate_h * float(dx @ dx))


# ------------------------------------------------------------------------------------------------ fitting


class FitError(RuntimeError):
    """The fit of the effective learning rates did not converge (the optimum sits on a search bound, or the
    objective is not finite)."""


@dataclass(frozen=True)
class RateFit:
    """Fitted 1/τ_h, 1/τ_y, the Eq. 49 fit loss at the optimum and the theory trajectory at the measured times."""

    rate_h: float
    rate_y: float
    loss: float
    theory: Trajectory
    variant: str = "original"

    @property
    def tau_ratio(self) -> float:
        """τ_y/τ_h, the only combination that enters Eq. 10."""
        return self.rate_h / self.rate_y


def fit_objective(measured: np.ndarray, theory: np.ndarray, t: np.ndarray) -> float:
    """Eq. 49: Σ over u, v, w of ∫(measured − theory)² dt, as a Riemann sum with the recording interval as dt
    (dt = 1 when every epoch is recorded; spec 000 §7.19)."""
    return float(np.sum(_weighted_squares(_riemann_weights(t), measured, theory)))


def _weighted_squares(weights: np.ndarray, measured: np.ndarray, theory: np.ndarray) -> np.ndarray:
    """The terms of Eq. 49's sum, dt·(measured − theory)², for one (T, 3) trajectory or a stack (..., T, 3)."""
    return weights * (measured - theory) ** 2


def _riemann_weights(t: np.ndarray) -> np.ndarray:
    """(T, 1) weights dt of :func:`fit_objective`'s sum: each recording interval, the last one repeated."""
    return np.diff(t, append=t[-1] + (t[-1] - t[-2] if t.size > 1 else 1.0))[:, None]


def _ratio_from_final_distance(u_final: float, u0: float, v0: float, X: float, Y: float) -> float | None:
    """Invert Eq. 10 for ρ = τ_y/τ_h given the measured final u (a starting point for the search)."""
    if not (u_final > 0 and Y > 0):
        return None
    # u∞² − A_high u∞ − A_low² = 0 with A_high = u0 − ρ X v0/u0 and A_low² = ρ X Y is linear in ρ.
    denominator = X * Y - u_final * X * v0 / u0
    rho = (u_final**2 - u0 * u_final) / denominator if denominator != 0 else -1.0
    return rho if rho > 0 else None


def fit_rates(t: np.ndarray, u: np.ndarray, v: np.ndarray, w: np.ndarray, X: float, Y: float,
              variant: str = "original", ratio_decades: float = 2.0, n_grid: int = 9,
              max_extensions: int = 3, max_decades: float = 12.0) -> RateFit:
    """Fit 1/τ_h and 1/τ_y to a measured trajectory by minimising Eq. 49 (App. B.1; spec 000 §3.3).

    Eq. 7 is homogeneous of degree one in the rates, so for a fixed ratio ρ = τ_y/τ_h = rate_h/rate_y the
    solution for rate_y = c is the rate_y = 1 solution at time c·t. The fit therefore solves the ODE once per ρ
    (on a fine time grid, interpolated) and scans c cheaply; ρ is scanned on a log grid around the value that
    Eq. 10 implies for the measured final distance (± ``ratio_decades``, extended up to ``max_extensions`` times
    by half a grid when the optimum is on an edge), then refined (bounded Brent in log ρ and log c). Where Eq. 7
    cannot be integrated anywhere in that window, the window moves outwards by up to ``max_decades`` decades: the
    boundary of integrable ratios is located by bisection in log ρ and the window placed on its integrable side.
    The initial conditions are the measured (u, v, w) at the first time. Raises FitError when the optimum is on
    a search bound or the objective is not finite, and ValueError for bad inputs.
    """
    t, u, v, w = (np.asarray(a, dtype=float) for a in (t, u, v, w))
    if not (t.ndim == 1 and t.size >= 3 and u.shape == v.shape == w.shape == t.shape):
        raise ValueError(f"t, u, v, w must be 1-D arrays of the same length >= 3; got {t.shape}, {u.shape}, "
                         f"{v.shape}, {w.shape}")
    if not np.all(np.isfinite(np.stack([u, v, w]))):
        raise ValueError("the measured trajectory contains NaN/inf")
    t = t - t[0]
    measured = np.stack([u, v, w], axis=-1)
    initial = (u[0], v[0], w[0])
    guess = _ratio_from_final_distance(u[-1], u[0], v[0], X, Y) or 1.0
    log_rho_lo, log_rho_hi = math.log10(guess) - ratio_decades, math.log10(guess) + ratio_decades
    # log10 of the time-scale factor c = rate_y relative to the natural time of the normalised system.
    t_last = float(t[-1])
    weights = _riemann_weights(t)
    cache: dict[float, tuple[float, float, Trajectory | None]] = {}

    def best_scale(log_rho: float) -> tuple[float, float, Trajectory | None]:
        if log_rho in cache:
            return cache[log_rho]
        rho = 10.0**log_rho
        # Normalised system: rate_y = 1, rate_h = ρ. Horizon: long enough for any c in the search range.
        horizon_grid = np.concatenate([[0.0], np.geomspace(1e-3, 1e9, 4000)])
        try:
            normalised = integrate_dynamics(initial, X, Y, rho, 1.0, horizon_grid, variant, rtol=1e-7)
        except RuntimeError:
            cache[log_rho] = (math.inf, math.nan, None)
            return cache[log_rho]
        grid = normalised.t
        states = normalised.stacked()

        def theory_at(scales: np.ndarray) -> np.ndarray:
            """The normalised solution at times c·t for each c of ``scales`` -> (len(scales), T, 3)."""
            s = (scales[:, None] * t).ravel()
            return np.stack([np.interp(s, grid, states[:, k]) for k in range(3)], axis=-1).reshape(-1, t.size, 3)

        def objective(log_c: float) -> float:
            return float(np.sum(_weighted_squares(weights, measured, theory_at(np.array([10.0**log_c]))[0])))

        # c·t_last must fall inside the solved horizon [1e-3, 1e9]. The scan in one batch: each row's sum is the
        # one objective() takes (a contiguous (T, 3) block, the same pairwise summation)
        log_cs = np.linspace(-3 - math.log10(t_last) + 1, 9 - math.log10(t_last), 61)
        values = np.array([float(np.sum(row)) for row in _weighted_squares(weights, measured, theory_at(10.0**log_cs))])
        k = int(np.nanargmin(values))
        lo, hi = log_cs[max(k - 1, 0)], log_cs[min(k + 1, len(log_cs) - 1)]
        res = optimize.minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
        log_c = float(res.x) if res.fun <= values[k] else float(log_cs[k])
        at_edge = k in (0, len(log_cs) - 1)
        result = (min(float(res.fun), float(values[k])), math.nan if at_edge else log_c, None)
        cache[log_rho] = result
        return result

    grid_rho = np.linspace(log_rho_lo, log_rho_hi, n_grid)
    losses = np.array([best_scale(x)[0] for x in grid_rho])
    if not np.any(np.isfinite(losses)):
        # Nothing integrates near the guess (e.g. w(0) > 0 with a tiny u(0): Eq. 7 drives u to 0 in finite time for
        # every ratio above some ρ*): find an integrable ratio further out, then the boundary ρ* by bisection in
        # log ρ, and search the window just below it.
        found = _widen(best_scale, log_rho_lo, log_rho_hi, max_decades)
        if found is None:
            raise FitError(f"fit of the {variant} dynamics failed: the ODE could not be solved for any rate ratio "
                           f"within {max_decades:g} decades of {guess:.3g}")
        below = found < log_rho_lo
        grid_rho = np.linspace(found - 2 * ratio_decades, found, n_grid) if below else \
            np.linspace(found, found + 2 * ratio_decades, n_grid)
        losses = np.array([best_scale(x)[0] for x in grid_rho])
        # beyond the edge next to ρ* the ODE cannot be integrated: an optimum there is a real one
        blocked = {"hi" if below else "lo"}
    else:
        blocked = set()
    step = grid_rho[1] - grid_rho[0]
    k = int(np.nanargmin(losses))

    def edge(k: int) -> str:
        return "lo" if k == 0 else "hi" if k == grid_rho.size - 1 else ""

    for _ in range(max_extensions):  # optimum on an edge: extend the ratio grid in that direction
        if not edge(k) or edge(k) in blocked:
            break
        extra = (grid_rho[0] - step * np.arange(n_grid // 2, 0, -1) if k == 0
                 else grid_rho[-1] + step * np.arange(1, n_grid // 2 + 1))
        extra_losses = np.array([best_scale(x)[0] for x in extra])
        grid_rho = np.concatenate([extra, grid_rho] if k == 0 else [grid_rho, extra])
        losses = np.concatenate([extra_losses, losses] if k == 0 else [losses, extra_losses])
        if not np.any(np.isfinite(extra_losses)):
            blocked.add(edge(k))
        k = int(np.nanargmin(losses))
    lo_k, hi_k = max(k - 1, 0), min(k + 1, grid_rho.size - 1)
    if edge(k) and edge(k) not in blocked:
        raise FitError(f"fit of the {variant} dynamics did not converge: best τ_y/τ_h = {10**grid_rho[k]:.3g} "
                       f"is on the search bound [{10**grid_rho[0]:.3g}, {10**grid_rho[-1]:.3g}]")
    if not np.isfinite(losses[lo_k]):  # the optimum sits at the integrability boundary: refine inside it only
        lo_k = k
    if not np.isfinite(losses[hi_k]):
        hi_k = k
    if lo_k == hi_k:  # isolated integrable point: nothing to refine
        lo_k, hi_k = max(k - 1, 0), min(k + 1, grid_rho.size - 1)
    res = optimize.minimize_scalar(lambda x: best_scale(x)[0], bounds=(grid_rho[lo_k], grid_rho[hi_k]),
                                   method="bounded", options={"xatol": 2e-3})
    log_rho = float(res.x) if res.fun <= losses[k] else float(grid_rho[k])
    fit_loss, log_c, _ = best_scale(log_rho)
    if not (math.isfinite(fit_loss) and math.isfinite(log_c)):
        raise FitError(f"fit of the {variant} dynamics did not converge: the time scale is on its search bound "
                       f"(loss {fit_loss:.3g})")
    rate_y = 10.0**log_c
    rate_h = rate_y * 10.0**log_rho
    theory = integrate_dynamics(initial, X, Y, rate_h, rate_y, t, variant)
    return RateFit(rate_h=rate_h, rate_y=rate_y, loss=fit_objective(measured, theory.stacked(), t),
                   theory=theory, variant=variant)


def _widen(best_scale, log_lo: float, log_hi: float, max_decades: float, tol: float = 0.05) -> float | None:
    """log10 ρ of an integrable ratio next to the boundary of integrability, searched outwards from [log_lo, log_hi]
    in steps of two decades (below first: Eq. 7 fails for large ρ), then bisected to ``tol`` decades."""
    def ok(x: float) -> bool:
        return math.isfinite(best_scale(x)[0])

    for distance in np.arange(2.0, max_decades + 1e-9, 2.0):
        for inner, outer in ((log_lo, log_lo - distance), (log_hi, log_hi + distance)):
            if ok(outer):
                bad = outer + 2.0 if outer < inner else outer - 2.0  # the previous (failed) probe
                good = outer
                while abs(bad - good) > tol:
                    mid = 0.5 * (bad + good)
                    bad, good = (bad, mid) if ok(mid) else (mid, good)
                return good
    return None


def fit_output_mean_rate(t: np.ndarray, measured_loss: np.ndarray, ybar0: np.ndarray, m: np.ndarray,
                         theory: Trajectory, Y: float) -> tuple[float, float]:
    """Fit 1/τ_ȳ with τ_h, τ_y fixed by minimising ∫(L_NN − L_theory)² dt, L_theory of Eq. 9 (spec 000 §3.3).

    Returns (rate_ybar, fit loss). Raises FitError when the optimum is on the search bound [1e-8, 1e3]/epoch.
    """
    t = np.asarray(t, dtype=float) - float(t[0])
    measured_loss = np.asarray(measured_loss, dtype=float)
    dt = np.diff(t, append=t[-1] + (t[-1] - t[-2]))

    def objective(log_rate: float) -> float:
        predicted = loss(output_mean(t, ybar0, m, 10.0**log_rate), m, theory.v, theory.w, Y)
        return float(np.sum(dt * (measured_loss - predicted) ** 2))

    grid = np.linspace(-8, 3, 111)
    values = np.array([objective(x) for x in grid])
    k = int(np.argmin(values))
    if k in (0, grid.size - 1) and values[k] < values[min(k + 1, grid.size - 1)] - 1e-15:
        raise FitError(f"fit of 1/τ_ȳ did not converge: the optimum 10^{grid[k]:.1f} is on the search bound")
    res = optimize.minimize_scalar(objective, bounds=(grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]),
                                   method="bounded")
    return 10.0 ** float(res.x), float(res.fun)
