"""A fixture paper ("990") for the full-scale records: least-squares GD judged over seeds, with a precondition
(the gradient has vanished) and a claim decided at the full scale only (it needs 8 seeds, the full config's).

Loaded through REPDYN_PLUGINS beside fixture_experiments (tests/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from repdyn.framework.base import Analysis, Experiment, Paper, RunSpec
from repdyn.framework.claims import ClaimSpec, Measured, Precondition, at_most
from repdyn.framework.config import param


@dataclass(frozen=True)
class RecordedConfig:
    seeds: int = param(8, ge=1, help="independent least-squares problems, one run each")
    steps: int = param(400, ge=0, help="GD steps")
    warn: bool = param(False, help="each run and the analysis raise a numpy warning (to test that they are "
                                   "collected into the report, not printed)")


def descend(seed: int, steps: int) -> tuple[float, float]:
    """(final/initial loss, final gradient norm) of GD at step 0.1 on a random 30 x 4 problem with label noise."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((30, 4))
    y = x @ rng.standard_normal(4) + 0.1 * rng.standard_normal(30)
    w = np.zeros(4)
    for _ in range(steps):
        w -= 0.1 * x.T @ (x @ w - y) / 30
    return float(np.mean((x @ w - y) ** 2) / np.mean(y**2)), float(np.linalg.norm(x.T @ (x @ w - y) / 30))


CONVERGED = Precondition("gradient_norm", at_most(1e-6), state="at the least-squares minimum",
                         reason="GD at step 0.1 contracts the error geometrically; 1e-6 is far below any loss change "
                                "the claims read")


class Recorded(Experiment):
    name = "fixture_recorded.fit"
    title = "Least squares decided at the full scale"
    paper = "990"
    source = "test fixture"
    Config = RecordedConfig
    claims = (
        ClaimSpec("fits", "GD at the minimum explains the labels up to their noise: final/initial loss",
                  "test fixture", at_most(0.05), quote="fits", band_reason="noise 0.1 against unit signal",
                  no_control="test fixture", preconditions=(CONVERGED,)),
        ClaimSpec("eight_seeds", "the same, pooled over at least 8 problems", "test fixture", at_most(0.05),
                  quote="fits", band_reason="as fits", no_control="test fixture", preconditions=(CONVERGED,),
                  full_only="pooled over 8 problems, which only the full config runs"),
    )
    scales = {"smoke": RecordedConfig(seeds=3), "quick": RecordedConfig(seeds=3), "full": RecordedConfig(seeds=8),
              "paper": RecordedConfig()}

    def runs(self, config: RecordedConfig) -> list[RunSpec]:
        return [RunSpec(f"seed={i}") for i in range(config.seeds)]

    def execute(self, config: RecordedConfig, run: RunSpec, seed: int, device: str) -> dict:
        ratio, gradient = descend(seed, config.steps)
        if config.warn:
            np.nanmedian([np.nan])
        return {"ratio": ratio, "gradient_norm": gradient}

    def analyse(self, config: RecordedConfig, results: dict) -> Analysis:
        ratios = [r["ratio"] for r in results.values()]
        if config.warn:
            np.float64(0.0) / np.float64(0.0)
        measured = {"fits": Measured(ratios)}
        if len(ratios) >= 8:
            measured["eight_seeds"] = Measured(ratios)
        return Analysis(measured=measured, states={"gradient_norm": Measured([r["gradient_norm"]
                                                                              for r in results.values()])})


PAPER = Paper("990", "fixture_recorded", "Fixture of the full-scale records", "repdyn", "Not a paper.")
EXPERIMENTS = (Recorded(),)
