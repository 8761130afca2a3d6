"""§3.2: with α(m) = o(m) the radial motion dominates as m grows: the knots (neuron directions θ_i) slow down as
m^(-1/2) at α = √m."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from repdyn.data.univariate import UNIVARIATE_SETS, univariate_samples
from repdyn.experiments.shallow_relu.common import NUMBER
from repdyn.framework.base import Analysis, Experiment, RunResult, RunSpec
from repdyn.framework.claims import ClaimSpec, CloseTo, Control, Measured
from repdyn.framework.config import ConfigError, param
from repdyn.nn.full_batch_gd import train_full_batch_gd
from repdyn.nn.models.shallow_relu import ShallowReLUBatch, uniform_init
from repdyn.theory import shallow_relu as sr


@dataclass(frozen=True)
class LazyWidthConfig:
    dataset: str = param("SIN10", choices=UNIVARIATE_SETS, help="§3.2 states no data; a sinusoid as in Fig. 7")
    widths: tuple[int, ...] = param((64, 256, 1024, 4096), ge=2,
                                    help="m, spanning 64× (our choice; even: paired, f_0 ≡ 0)")
    alpha_power: float = param(0.5, gt=0, help="α(m) = m^alpha_power (§4: √m)")
    steps: int = param(20, ge=0, help="GD steps at η = lr_fraction/λ_max(Θ_0): a short time (t ≈ 3, the loss "
                                      "about halves) at which the turn is still ∝ t (0: the untrained control)")
    lr_fraction: float = param(0.5, gt=0, lt=2, help="η = lr_fraction/λ_max(Θ_0), fixed over the run")
    seeds: int = param(5, ge=1, help="independent initialisations per width (one batch)")


class LazyWidth(Experiment):
    name = "shallow_relu.lazy_width"
    title = "α = √m = o(m): the neuron directions (knots) slow down as m^(-1/2) while the function still fits"
    paper = NUMBER
    source = "§3.2 (Prop. 4, Eq. 21), spec 001 T16"
    Config = LazyWidthConfig
    scales = {"smoke": LazyWidthConfig(widths=(32, 128, 512), seeds=3, steps=10),
              "quick": LazyWidthConfig(), "full": LazyWidthConfig(), "paper": LazyWidthConfig()}
    claims = (
        ClaimSpec("knot_speed_scaling",
                  "O(1) weights a, b, c ~ U(−1, 1), α = √m, all layers trained for a short fixed number of GD steps: "
                  "the |r̂|-weighted mean angular speed |Δθ_i|/t of the neurons against m, per seed the slope of a "
                  "log-log fit over the widths",
                  "seed 001, §3.2", CloseTo(-0.5, atol=0.15),
                  quote="Also, if $\\alpha(m) = o(m)$, the radial component will dominate as m increases",
                  band_reason="derived: ȧ_i, ḃ_i = O(c_i ρ/α) with ρ = O(1) at initialisation, so the direction of "
                              "(a_i, b_i) turns at a rate ∝ 1/α = m^(-1/2); ±0.15 for the finite widths",
                  control=Control("α = m (mean-field normalisation, not o(m)): the turn rate falls as m^(-1)",
                                  {"alpha_power": 1.0}),
                  figure="knot_speed",
                  no_precondition="about the speed of the first GD steps, not an end state"),
    )

    def prepare(self, config: LazyWidthConfig) -> None:
        if any(m % 2 for m in config.widths) or len(set(config.widths)) < 2:
            raise ConfigError(f"widths={config.widths} must be even (antisymmetric pairing, f_0 ≡ 0) and at least "
                              "two distinct ones (a slope)")

    def runs(self, config: LazyWidthConfig) -> list[RunSpec]:
        return [RunSpec(f"m={m}", {"width": m}) for m in config.widths]

    def execute(self, config: LazyWidthConfig, run: RunSpec, seed: int, device: str) -> RunResult:
        x, y = univariate_samples(config.dataset)
        m = int(run.params["width"])
        nets = [uniform_init(m, np.random.default_rng([seed, k]), 1.0) for k in range(config.seeds)]
        alpha = float(m) ** config.alpha_power
        batch = ShallowReLUBatch.stack(nets, [alpha] * len(nets), device=device)
        res = train_full_batch_gd(batch, x, y, max_steps=config.steps, lr_fraction=config.lr_fraction, tol=0.0,
                                  lr_every=max(config.steps, 1), record_every=max(config.steps, 1))
        a0, b0, c0 = (np.stack(p) for p in zip(*nets))
        r0, theta0 = sr.to_canonical(a0, b0, c0, 1.0)
        _, theta1 = sr.to_canonical(*res.params, 1.0)
        turn = np.abs(np.angle(np.exp(1j * (theta1 - theta0))))
        moved = np.sum(np.abs(r0) * turn, -1) / np.sum(np.abs(r0), -1)
        with np.errstate(divide="ignore", invalid="ignore"):
            speed = moved / res.time
        loss = res.trajectory["loss"]
        return {"speed": speed, "time": res.time, "loss_fraction": loss[-1] / loss[0]}

    def analyse(self, config: LazyWidthConfig, results: Mapping[str, RunResult]) -> Analysis:
        widths = np.array(config.widths, dtype=float)
        speed = np.stack([results[f"m={m}"]["speed"] for m in config.widths])  # (widths, seeds)
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log(speed)
        slopes = [float(np.polyfit(np.log(widths), logs[:, k], 1)[0]) if np.all(np.isfinite(logs[:, k]))
                  else float("nan") for k in range(speed.shape[1])]
        note = "; ".join(f"m = {m:g}: speed {np.median(s):.3g} (median), t = "
                         f"{np.median(results[f'm={int(m)}']['time']):.3g}, L/L0 = "
                         f"{np.median(results[f'm={int(m)}']['loss_fraction']):.3g}"
                         for m, s in zip(widths, speed))
        fig = Figure(figsize=(4.2, 3.4))
        ax = fig.subplots()
        for k in range(speed.shape[1]):
            ax.loglog(widths, speed[:, k], "o-", color="0.6", ms=3, lw=0.8)
        ref = np.nanmedian(speed[0]) * (widths / widths[0]) ** -0.5
        ax.loglog(widths, ref, "--", color="tab:red", label="m^(-1/2)")
        ax.set_xlabel("width m")
        ax.set_ylabel("|r̂|-weighted |Δθ| / t")
        ax.legend(fontsize=7)
        fig.tight_layout()
        metrics = [{"width": int(m), "seed": k, "angular_speed": float(speed[i, k])}
                   for i, m in enumerate(widths) for k in range(speed.shape[1])]
        return Analysis({"knot_speed_scaling": Measured(slopes, note)}, {"knot_speed": fig}, metrics,
                        f"{config.dataset}, a, b, c ~ U(−1, 1) (O(1) weights), α = m^{config.alpha_power:g}, "
                        f"{config.steps} GD steps at η = {config.lr_fraction}/λ_max(Θ_0): the angular speed is the "
                        "|r̂|-weighted mean turn of θ_i per unit time (the knot e_i = −tan θ_i adds a 1/|a_i| factor "
                        "from nearly vertical neurons).")
