"""Figs. 1 and 2, Prop. 4 and Prop. 1: the local motion of the neurons under full (a, b, c) gradient descent is the
canonical flow under the δ-dependent metric, radial at δ ≪ 0 and along the gradient at δ ≫ 0; the residuals move
as Eq. (13) says."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from scipy.stats import spearmanr

from repdyn.data.univariate import UNIVARIATE_SETS, univariate_samples
from repdyn.experiments.shallow_relu.common import NUMBER, hull, lambda_labels, plot_fit, plot_uv
from repdyn.framework.base import Analysis, Experiment, RunResult, RunSpec
from repdyn.framework.claims import ClaimSpec, Control, Measured, at_least, at_most
from repdyn.framework.config import ConfigError, param
from repdyn.nn.models.shallow_relu import mean_amplitude, uniform_init, with_imbalance
from repdyn.theory import shallow_relu as sr

FIG2_LEVELS = (-100.0, 0.0, 100.0)
"""λ levels drawn in the Fig. 2 panels (left: radial, middle: mixed, right: along the gradient)."""


@dataclass(frozen=True)
class LocalDynamicsConfig:
    dataset: str = param("SIN12", choices=UNIVARIATE_SETS,
                         help="Figs. 1-2 state no data: the sinusoid of Fig. 5 (sin 2πx on 12 points)")
    width: int = param(100, ge=2, help="m (even: paired, f_0 ≡ 0); Figs. 1-2 state no width")
    alpha_power: float = param(1.0, gt=0, help="α(m) = m^alpha_power: Fig. 2 is drawn 'with α(m) = m'")
    c_scale: float = param(1.0, gt=0, help="a, b, c ~ U(−1, 1)·(1, 1, c_scale): O(1) mean-field weights")
    ratios: tuple[float, ...] = param((-100.0, -10.0, -1.0, 0.0, 1.0, 10.0, 100.0),
                                      help="λ = δ/r̄ at the same neurons (r_i, θ_i), the crossover's levels (I4)")
    steps: int = param(10, ge=0, help="GD steps of the local window (0: the untrained control)")
    lr_fraction: float = param(0.01, gt=0, lt=2,
                               help="η = lr_fraction/λ_max(Θ_0) per level: a short window (local trajectory)")
    seeds: int = param(10, ge=1, help="independent initialisations (one run)")
    metric: str = param("prop4", choices=("prop4", "identity"),
                        help="prediction of the neurons' motion: Prop. 4's −P_i∇L̃ or the reduced flow's −∇L̃")
    lift: bool = param(True, help="train the full (a, b, c) (False: train (r, θ) directly, no lift, no δ)")
    sigma_terms: str = param("both", choices=("both", "radial"),
                             help="Prop. 1's Σ_k: r² t tᵀ + d dᵀ (the paper) or d dᵀ alone (control)")


def _cosine(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Cosine between the columns of two (2, m) arrays (NaN where either vanishes)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sum(u * v, 0) / (np.linalg.norm(u, axis=0) * np.linalg.norm(v, axis=0))


def _local_step(x: np.ndarray, y: np.ndarray, z: tuple, config: LocalDynamicsConfig, alpha: float) -> dict:
    """One δ level: the neurons' canonical displacement over the local window, its Prop. 4 and gradient
    predictions at the start, in the (r, τ = r θ) frame."""
    kappa = config.width / alpha
    r0, theta0 = sr.to_canonical(*z, kappa)
    rho = sr.canonical_network(x, r0, theta0) - y
    grad_r, grad_theta = sr.canonical_gradient(x, rho, r0, theta0)
    p_rr, p_tt = sr.canonical_metric(*z, kappa)
    with np.errstate(divide="ignore", invalid="ignore"):
        gradient = np.stack([-grad_r, -grad_theta / r0])
    prop4 = np.stack([-p_rr * grad_r, -p_tt * grad_theta * r0])
    if config.lift:
        lam = np.linalg.eigvalsh(sr.tangent_kernel(x, *z, alpha)).max()
        p = z
        for _ in range(config.steps):
            p = tuple(v - config.lr_fraction / lam * g for v, g in zip(p, sr.loss_gradients(x, y, *p, alpha)[1:]))
        r1, theta1 = sr.to_canonical(*p, kappa)
    else:
        r1, theta1, _ = _canonical_descent(x, y, r0, theta0, config.steps, config.lr_fraction, mean_field=False)
    moved = np.stack([r1 - r0, r0 * np.angle(np.exp(1j * (theta1 - theta0)))])
    active = np.hypot(grad_r, grad_theta) > 0
    prediction = prop4 if config.metric == "prop4" else gradient
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.abs(moved[1]) / np.linalg.norm(moved, axis=0)
    return {"agreement": float(np.median(_cosine(moved, prediction)[active])),
            "tangential": float(np.median(share[active])),
            "along_gradient": float(np.median(_cosine(moved, gradient)[active])),
            "moved": moved[:, active], "gradient": gradient[:, active], "final": (r1, theta1)}


def _canonical_jacobian(x: np.ndarray, r: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """∂f̃(x_j)/∂(r, θ) of Eq. (4), shape (s, 2m)."""
    pre = np.multiply.outer(x, np.cos(theta)) + np.sin(theta)
    turn = r * (np.cos(theta) - np.multiply.outer(x, np.sin(theta))) * (pre > 0)
    return np.hstack([np.maximum(pre, 0), turn]) / np.size(r)


def _canonical_descent(x: np.ndarray, y: np.ndarray, r: np.ndarray, theta: np.ndarray, steps: int,
                       lr_fraction: float, mean_field: bool = True) -> tuple[np.ndarray, np.ndarray, float]:
    """GD on the reduced flow (7) in (r, θ): w ← w − η m ∇L̃ (mean-field time, ẇ = −∇V) when ``mean_field``,
    else w ← w − η ∇L̃; η = lr_fraction/λ_max of the matching tangent kernel at the start. Returns (r, θ, η)."""
    scale = np.size(r) if mean_field else 1.0
    jac = _canonical_jacobian(x, r, theta)
    eta = lr_fraction / np.linalg.eigvalsh(scale * jac @ jac.T).max()
    for _ in range(steps):
        rho = sr.canonical_network(x, r, theta) - y
        grad_r, grad_theta = sr.canonical_gradient(x, rho, r, theta)
        r, theta = r - eta * scale * grad_r, theta - eta * scale * grad_theta
    return r, theta, eta


def _residual_check(x: np.ndarray, y: np.ndarray, r: np.ndarray, theta: np.ndarray,
                    config: LocalDynamicsConfig) -> tuple[float, float]:
    """Prop. 1 at the start of the reduced flow: ‖Δρ/T − ρ̇_Eq.13‖/‖Δρ/T‖ over the local window, and T."""
    rho0 = sr.canonical_network(x, r, theta) - y
    r1, theta1, eta = _canonical_descent(x, y, r, theta, config.steps, config.lr_fraction)
    velocity = (sr.canonical_network(x, r1, theta1) - y - rho0) / (eta * max(config.steps, 1))
    predicted = sr.residual_velocity(x, rho0, r, theta, angular=config.sigma_terms == "both")
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.linalg.norm(velocity - predicted) / np.linalg.norm(velocity)), eta * config.steps


class LocalDynamics(Experiment):
    name = "shallow_relu.local_dynamics"
    title = "The δ-dependent metric (Prop. 4): local neuron trajectories go from radial to along the gradient"
    paper = NUMBER
    source = "Figs. 1-2, Prop. 4 (Eqs. 19-21), Prop. 1 (Eq. 13); spec 001 errata E6, T4-T6"
    Config = LocalDynamicsConfig
    scales = {"smoke": LocalDynamicsConfig(seeds=3), "quick": LocalDynamicsConfig(),
              "full": LocalDynamicsConfig(), "paper": LocalDynamicsConfig()}
    claims = (
        ClaimSpec("prop4_direction",
                  "full (a, b, c) GD from the same neurons (r_i, θ_i) at δ = λ r̄ for each level: the cosine between "
                  "each neuron's canonical displacement (Δr, r Δθ) over the local window and Prop. 4's −P_i ∇L̃ at the "
                  "start, median over active neurons, per seed the smallest over the levels",
                  "seed 001, §3.2, Prop. 4", at_least(0.99),
                  quote="If $\\mathbf{w}(t) = (\\mathbf{r}(t), \\boldsymbol{\\theta}(t))$ is a curve of canonical "
                        "parameters corresponding to $\\mathbf{z}(t)$, then we have that",
                  band_reason="derived: Prop. 4 is exact for gradient flow, so a short GD window departs from its "
                              "start direction by O(ηT): 0.99 (an 8° angle) is our allowance for that curvature",
                  control=Control("the reduced flow's prediction −∇L̃ (no change of metric): at δ ≪ 0 the "
                                  "neurons move radially, not along the gradient", {"metric": "identity"}),
                  figure="fig2_local_trajectories",
                  no_precondition="about the dynamics at the start (a local window of GD steps), not an end state"),
        ClaimSpec("fig2_radial_to_gradient",
                  "the median tangential share |Δτ|/‖(Δr, Δτ)‖ of the neurons' displacement over the local window, "
                  "per seed the Spearman correlation with the δ level over the seven levels",
                  "seed 001, Fig. 2", at_least(0.9),
                  quote="The value of δ interpolates between different kinds of local trajectories of neurons",
                  band_reason="derived: the tangential share of −P_i∇L̃ rises with γ_i = c_i²/(c_i² + a_i² + b_i²), "
                              "which rises with δ at fixed r̂_i, so the trend is monotone (correlation 1); 0.9 "
                              "allows one swap of neighbouring levels (0.96)",
                  control=Control("no lift: train (r, θ) directly (the reduced flow), where δ has no meaning and "
                                  "every level moves alike (no trend, correlation undefined)", {"lift": False}),
                  figure="fig2_local_trajectories",
                  no_precondition="about the dynamics at the start (a local window of GD steps), not an end state"),
        ClaimSpec("prop1_residual_velocity",
                  "reduced flow (7) in mean-field time from the same neurons: the relative gap ‖Δρ/T − ρ̇‖/‖Δρ/T‖ "
                  "between the residuals' measured rate of change over the local window and Eq. (13) at the start",
                  "seed 001, §3.1, Prop. 1", at_most(0.05),
                  quote="The exact dynamics for the vector of residuals are given by the following proposition",
                  band_reason="derived: Eq. (13) is exact for the flow; a forward difference over a window of "
                              "steps·η = 0.1/λ_max departs from the start rate by about half of that, ≤ 0.05",
                  control=Control("Σ_k without the angular term r² t tᵀ (the motion of r alone, the frozen-knot "
                                  "dynamics)", {"sigma_terms": "radial"}),
                  figure="fig1_state",
                  no_precondition="about the dynamics at the start (a local window of GD steps), not an end state"),
    )

    def prepare(self, config: LocalDynamicsConfig) -> None:
        if config.width % 2 or len(set(config.ratios)) < 3:
            raise ConfigError(f"width={config.width} must be even (pairing, f_0 ≡ 0) and ratios={config.ratios} "
                              "must hold at least three distinct levels (a trend)")

    def runs(self, config: LocalDynamicsConfig) -> list[RunSpec]:
        return [RunSpec("all", {})]

    def execute(self, config: LocalDynamicsConfig, run: RunSpec, seed: int, device: str) -> RunResult:
        x, y = univariate_samples(config.dataset)
        m = config.width
        alpha = float(m) ** config.alpha_power
        lambdas = np.array(sorted(config.ratios))
        keys = ("agreement", "tangential", "along_gradient")
        out: dict[str, list] = {k: [] for k in (*keys, "residual_gap", "window")}
        panels: dict[str, np.ndarray] = {}
        for k in range(config.seeds):
            a, b, c = uniform_init(m, np.random.default_rng([seed, k]), 1.0)
            base = (a, b, config.c_scale * c)
            levels = [_local_step(x, y, with_imbalance(base, lam * mean_amplitude(base)), config, alpha)
                      for lam in lambdas]
            for key in keys:
                out[key].append([level[key] for level in levels])
            gap, window = _residual_check(x, y, *sr.to_canonical(*base, m / alpha), config)
            out["residual_gap"].append(gap)
            out["window"].append(window)
            if k == 0:  # seed 0's neurons for the figures (flat arrays: the store keeps arrays only)
                panels = {f"{name}_{i}": lv[name] for i, (lam, lv) in enumerate(zip(lambdas, levels))
                          if lam in FIG2_LEVELS for name in ("moved", "gradient")}
                panels["final_r"], panels["final_theta"] = levels[-1]["final"]
        result = {key: np.array(v) for key, v in out.items()}
        result.update(lambdas=lambdas, **panels)
        return result

    def analyse(self, config: LocalDynamicsConfig, results: Mapping[str, RunResult]) -> Analysis:
        res = results["all"]
        lambdas = res["lambdas"]
        agreement, share = res["agreement"], res["tangential"]
        trend = [float(spearmanr(lambdas, s)[0]) if np.ptp(s) > 1e-9 * np.max(np.abs(s)) else float("nan")
                 for s in share]
        labels = lambda_labels(lambdas)
        measured = {
            "prop4_direction": Measured([float(np.min(v)) for v in agreement], "median cosine by level (seed "
                                        "median): " + ", ".join(f"λ = {lab}: {v:.4f}" for lab, v in
                                                                zip(labels, np.median(agreement, 0)))),
            "fig2_radial_to_gradient": Measured(trend, "median tangential share by level (seed median): " + ", ".join(
                f"λ = {lab}: {v:.3f}" for lab, v in zip(labels, np.median(share, 0))) + "; cosine with −∇L̃: " +
                ", ".join(f"{v:.3f}" for v in np.median(res["along_gradient"], 0))),
            "prop1_residual_velocity": Measured([float(v) for v in res["residual_gap"]],
                                                f"mean-field window T = {np.median(res['window']):.3g}"),
        }
        metrics = [{"seed": k, "lambda": float(lam), "prop4_cosine": float(agreement[k, i]),
                    "tangential_share": float(share[k, i]), "gradient_cosine": float(res["along_gradient"][k, i])}
                   for k in range(agreement.shape[0]) for i, lam in enumerate(lambdas)]
        return Analysis(measured, self._figures(config, res), metrics,
                        f"{config.dataset}, m = {config.width}, α = m^{config.alpha_power:g}, a, b, c ~ U(−1, 1) "
                        f"paired (f_0 ≡ 0), δ = λ r̄ at the same neurons; {config.steps} GD steps at η = "
                        f"{config.lr_fraction}/λ_max(Θ_0) (the local window). The displacement is read in the "
                        "(r, τ = r θ) frame of Eq. (21); Prop. 1 on the reduced flow over the same number of steps.")

    def _figures(self, config: LocalDynamicsConfig, res: RunResult) -> dict:
        x, y = univariate_samples(config.dataset)
        fig2 = Figure(figsize=(9, 3.2))
        for ax, lam in zip(fig2.subplots(1, len(FIG2_LEVELS)), FIG2_LEVELS):
            index = int(np.argmin(np.abs(res["lambdas"] - lam)))
            empty = np.zeros((2, 0))
            moved, gradient = res.get(f"moved_{index}", empty), res.get(f"gradient_{index}", empty)
            # the displacement in the frame (∇L̃, ∇L̃^⊥) of each neuron (Fig. 2), unit gradient length
            angle = np.arctan2(gradient[1], gradient[0])
            along = np.cos(angle) * moved[0] + np.sin(angle) * moved[1]
            across = -np.sin(angle) * moved[0] + np.cos(angle) * moved[1]
            norm = np.maximum(np.hypot(along, across), 1e-300)
            ax.quiver(np.zeros_like(along), np.zeros_like(along), along / norm, across / norm, angles="xy",
                      scale_units="xy", scale=1, width=0.004, alpha=0.3)
            ax.set_xlim(-1.1, 1.1)
            ax.set_ylim(-1.1, 1.1)
            ax.set_aspect("equal")
            ax.set_xlabel("along −∇L̃")
            ax.set_title(f"λ = δ/r̄ = {lam:g}", fontsize=9)
        fig2.tight_layout()
        fig1 = Figure(figsize=(8, 3.6))
        left, right = fig1.subplots(1, 2)
        r, theta = res["final_r"], res["final_theta"]
        a, b, c = sr.from_canonical(r, theta, 1.0, config.width / float(config.width) ** config.alpha_power)
        grid, _, _ = hull(x, y)
        alpha = float(config.width) ** config.alpha_power
        plot_fit(left, x, y, sr.network(grid, a, b, c, alpha), "network and its knots e_i (Fig. 1 left)",
                 knots=sr.knots(a, b))
        plot_uv(right, x, a, b, c, config.width / alpha, "neurons (u, v) and sample lines (Fig. 1 right)")
        fig1.tight_layout()
        return {"fig2_local_trajectories": fig2, "fig1_state": fig1}
