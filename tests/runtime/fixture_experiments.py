"""A small experiment for testing the runtime: gradient descent on least squares, checked against lstsq.

Loaded through REPDYN_PLUGINS=fixture_experiments (with tests/runtime on PYTHONPATH). A learning rate above
2/λ_max of XᵀX/n makes gradient descent diverge, which exercises the diverged-run path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from repdyn.experiments.base import Analysis, Experiment, RunSpec
from repdyn.experiments.claims import ClaimSpec, Measured, at_most
from repdyn.experiments.config import param
from repdyn.nn import check_finite


@dataclass(frozen=True)
class LeastSquaresConfig:
    n: int = param(30, ge=2, help="samples")
    d: int = param(4, ge=1, help="features")
    lrs: tuple[float, ...] = param((0.1, 0.2), gt=0, help="learning rates, one run each")
    steps: int = param(600, ge=1)
    delay: float = param(0.0, ge=0, help="seconds to sleep per run (to test interruption)")


class LeastSquares(Experiment):
    name = "fixture.least_squares"
    title = "Gradient descent on least squares"
    seed = "000"
    source = "test fixture"
    Config = LeastSquaresConfig
    claims = (
        ClaimSpec("converges", "GD reaches the least-squares solution", "closed form (normal equations)",
                  at_most(1e-6)),
        ClaimSpec("first_lr", "the first learning rate converges", "closed form", at_most(1e-6),
                  depends_on=("lr=0.1",)),
    )

    def config(self, scale: str) -> LeastSquaresConfig:
        return LeastSquaresConfig()

    def runs(self, config: LeastSquaresConfig) -> list[RunSpec]:
        return [RunSpec(f"lr={lr:g}", {"lr": lr}) for lr in config.lrs]

    def execute(self, config: LeastSquaresConfig, run: RunSpec, seed: int, device: str) -> dict:
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((config.n, config.d))
        y = x @ rng.standard_normal(config.d)
        w = np.zeros(config.d)
        losses = np.empty(config.steps)
        for step in range(config.steps):
            residual = x @ w - y
            losses[step] = 0.5 * np.mean(residual**2)
            check_finite(float(losses[step]), step)
            w -= run.params["lr"] * x.T @ residual / config.n
        time.sleep(config.delay)
        return {"w": w, "losses": losses, "error": float(np.abs(w - np.linalg.lstsq(x, y)[0]).max())}

    def analyse(self, config: LeastSquaresConfig, results: dict) -> Analysis:
        figure = Figure(figsize=(4, 3))
        axes = figure.subplots()
        for label, result in results.items():
            axes.semilogy(result["losses"], label=label)
        axes.legend()
        errors = {label: result["error"] for label, result in results.items()}
        return Analysis(
            measured={"converges": Measured(max(errors.values()), f"max over {len(errors)} runs"),
                      "first_lr": results["lr=0.1"]["error"]},
            figures={"loss": figure},
            metrics=[{"run": label, "error": error} for label, error in errors.items()],
        )


EXPERIMENTS = (LeastSquares(),)
