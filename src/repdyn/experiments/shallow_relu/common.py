"""Shared measurements, initialisations and plots of the seed-001 experiments (shallow univariate ReLU networks).

All networks use Eq. (1) of seed 001 with α = √m (§4), float64, full-batch GD with η = lr_fraction/λ_max(Θ)
(``repdyn.nn.full_batch_gd``), and the metrics M1-M7 of spec 001 §3.4 on a 2001-point grid of the data hull.
"""

from __future__ import annotations

import numpy as np

from repdyn.nn.models.shallow_relu import uniform_init
from repdyn.theory import shallow_relu as sr
from repdyn.theory import shallow_relu_kernels as kr

GRID_POINTS = 2001
ASYMPTOTIC_WIDTHS_PER_SAMPLE = 100
"""H2 fits the Monte-Carlo rate of d_RF over widths m ≥ this many neurons per sample: the 1/√m rate (seed 001
§3.1, central-limit fluctuations) is a large-m statement, and below ~100 neurons per sample the SQ10 interpolant
error is not a small perturbation of S_RF (d_RF(100) ≈ 0.28, local slope ≈ −1 between m = 100 and 300)."""
NUMBER = "001"



def hull(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Grid on [x_1, x_s] (pitfall P13) with the natural cubic spline and the linear interpolant on it."""
    grid = np.linspace(x[0], x[-1], GRID_POINTS)
    return grid, kr.natural_cubic_spline(x, y)(grid), kr.linear_interpolant(x, y)(grid)


def evaluate(grid: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """f on the grid for (B, M) parameters, in chunks of the grid to bound memory at large widths."""
    step = max(1, 2_000_000 // max(a.size, 1))
    return np.concatenate([sr.network(grid[i:i + step], a, b, c, alpha) for i in range(0, grid.size, step)],
                          axis=-1)


def fit_measures(x: np.ndarray, y: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray,
                  alpha: np.ndarray) -> dict[str, np.ndarray]:
    """M1-M3 for a batch of networks: f on the hull grid, d_cub, d_lin, β, D and K_ε."""
    grid, cubic, linear = hull(x, y)
    f = evaluate(grid, a, b, c, alpha)
    beta, dist = sr.spline_coordinate(f, cubic, linear)
    return {"f": f, "d_cub": sr.rms_distance(f, cubic), "d_lin": sr.rms_distance(f, linear), "beta": beta,
            "D": dist, "K": sr.knot_clustering(x, a, b, c)}


def shape_measures(x: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: np.ndarray,
                   f: np.ndarray) -> dict[str, np.ndarray]:
    """The fit-independent measures of a batch of networks whose values on the hull grid are ``f``: N_eff
    (effective number of kinks), D_shape (D against the splines through the network's own sample values) and the
    regime position q (|r̂|-weighted median δ/|r̂|), each (B,)."""
    grid = np.linspace(x[0], x[-1], GRID_POINTS)
    return {"N_eff": sr.effective_kinks(x, grid, f),
            "D_shape": sr.shape_coordinate(x, sr.network(x, a, b, c, alpha), grid, f),
            "q": sr.regime_position(a, b, c)}


def fit_residual(x: np.ndarray, y: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray,
                 alpha: np.ndarray) -> np.ndarray:
    """rms/sep: RMS_j(f(x_j) − y_j) / RMS(S_cub − S_lin) on the hull grid, per network (B,). D places a network
    between the two splines only when this is small (the fitted-state precondition: ≤ FITTED)."""
    _, cubic, linear = hull(x, y)
    rho = sr.network(x, a, b, c, alpha) - y
    return np.sqrt(np.mean(rho**2, axis=-1)) / sr.rms_distance(cubic, linear)


FITTED = 0.1
"""The fitted-state precondition of every D-based claim: rms/sep ≤ 0.1. D = d_cub/(d_cub + d_lin) with
d_cub + d_lin ≥ sep, so a change of f of RMS ε moves D by at most ε/sep to first order: a residual of 0.1 sep
leaves D within about 0.1 of the interpolating shape; the D bands (≤ 0.25, ≥ 0.75) sit 0.25 from the midpoint."""


def dead_fraction(x: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per network (rows of (B, M) parameters): fraction of the negative-c neurons (c < 0) that are inactive on
    every sample (the dead arc of spec 001 §2.2: they never move again)."""
    dead = ~np.any(a[..., None] * x - b[..., None] > 0, axis=-1)
    negative = c < 0
    return (dead & negative).sum(-1) / np.maximum(negative.sum(-1), 1)


def plot_fit(ax, x: np.ndarray, y: np.ndarray, f: np.ndarray, title: str, knots: np.ndarray | None = None,
              f0: np.ndarray | None = None) -> None:
    """The trained network over both limits (cubic spline, linear interpolant) and the samples."""
    grid, cubic, linear = hull(x, y)
    ax.plot(grid, cubic, color="tab:blue", lw=1, label="natural cubic spline")
    ax.plot(grid, linear, color="tab:orange", lw=1, ls="--", label="linear interpolant")
    if f0 is not None:
        ax.plot(grid, f0, color="tab:green", lw=1, alpha=0.7, label="initial network")
    ax.plot(grid, f, color="black", lw=1.4, label="network")
    ax.plot(x, y, "x", color="tab:red", ms=6)
    if knots is not None:
        inside = knots[np.isfinite(knots) & (knots >= x[0]) & (knots <= x[-1])]
        ax.plot(inside, np.interp(inside, grid, f), "o", mfc="none", color="tab:green", ms=3, alpha=0.5)
    ax.set_title(title, fontsize=9)


def plot_uv(ax, x: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, kappa: float, title: str) -> None:
    """Neurons as (u, v) = |r|(cos θ, sin θ) coloured by sign(c) (Eq. 6), with the sample lines u x_j + v = 0."""
    r, theta = sr.to_canonical(a, b, c, kappa)
    u, v = np.abs(r) * np.cos(theta), np.abs(r) * np.sin(theta)
    reach = 1.05 * max(np.abs(np.concatenate([u, v])).max(), 1e-12)
    for xj in x:
        scale = reach / np.hypot(1.0, xj)
        ax.plot([-scale, scale], [scale * xj, -scale * xj], color="0.8", lw=0.6)
    ax.scatter(u, v, s=4, c=np.where(c >= 0, "tab:red", "tab:blue"))
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-reach, reach)
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=9)


def lambda_labels(lambdas: np.ndarray) -> list[str]:
    return ["−∞" if v == -np.inf else "+∞" if v == np.inf else f"{v:g}" for v in lambdas]


def paired_base(m: int, rng: np.random.Generator, c_scale: float) -> tuple:
    if m % 2:
        raise ValueError(f"width {m} must be even (antisymmetric pairing I3)")
    return uniform_init(m, rng, c_scale / np.sqrt(m))

