"""A small experiment for testing the runtime: gradient descent on least squares, checked against lstsq.

Loaded through REPDYN_PLUGINS=fixture_experiments (with tests/runtime on PYTHONPATH). A learning rate above
2/λ_max of XᵀX/n makes gradient descent diverge, which exercises the diverged-run path. With the environment
variable REPDYN_FIXTURE_TRACE set to a file, every run appends its label there when it starts (to count how often
each run is computed, across processes); REPDYN_FIXTURE_DELAY adds seconds of sleep to every run (to make two
processes overlap) without changing run keys.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from repdyn.framework.base import SCALES, Analysis, Experiment, Paper, RunSpec
from repdyn.framework.claims import ClaimSpec, Control, Disagreement, Measured, at_most
from repdyn.framework.config import param
from repdyn.nn import MLP, Ensemble, check_finite, train
from repdyn.nn.progress import Cap, report


@dataclass(frozen=True)
class LeastSquaresConfig:
    n: int = param(30, ge=2, help="samples")
    d: int = param(4, ge=1, help="features")
    lrs: tuple[float, ...] = param((0.1, 0.2), gt=0, help="learning rates, one run each")
    steps: int = param(600, ge=1)
    delay: float = param(0.0, ge=0, help="seconds to sleep per run (to test interruption)")


def trace(label: str) -> None:
    """Record that run ``label`` starts (REPDYN_FIXTURE_TRACE) and sleep REPDYN_FIXTURE_DELAY seconds."""
    if os.environ.get("REPDYN_FIXTURE_TRACE"):
        with open(os.environ["REPDYN_FIXTURE_TRACE"], "a") as handle:  # one short append: atomic on POSIX
            handle.write(f"{label} {os.getpid()}\n")
    time.sleep(float(os.environ.get("REPDYN_FIXTURE_DELAY", "0")))


class LeastSquares(Experiment):
    name = "fixture.least_squares"
    title = "Gradient descent on least squares"
    paper = "000"
    source = "test fixture"
    Config = LeastSquaresConfig
    claims = (
        ClaimSpec("converges", "GD reaches the least-squares solution", "closed form (normal equations)",
                  at_most(1e-6), exact=True, no_control="closed form"),
        ClaimSpec("first_lr", "the first learning rate converges", "closed form", at_most(1e-6),
                  exact=True, no_control="closed form", depends_on=("lr=0.1",)),
    )
    scales = {scale: LeastSquaresConfig() for scale in SCALES}

    def runs(self, config: LeastSquaresConfig) -> list[RunSpec]:
        return [RunSpec(f"lr={lr:g}", {"lr": lr}) for lr in config.lrs]

    def execute(self, config: LeastSquaresConfig, run: RunSpec, seed: int, device: str) -> dict:
        trace(run.label)
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



@dataclass(frozen=True)
class TanhRegressionConfig:
    n: int = param(32, ge=2, help="samples")
    width: int = param(16, ge=1, help="hidden units")
    runs: int = param(4, ge=1, help="independent runs, one seed each")
    steps: int = param(40, ge=1)
    lr: float = param(0.5, gt=0)
    kill_marker: str = param("", help="run 1 SIGKILLs its own process if this file is missing, creating it first "
                                      "(to test a worker dying mid-sweep); empty: nothing is killed")
    delay: float = param(0.0, ge=0, help="seconds to sleep per run")
    setup_cpu: float = param(0.0, ge=0, help="CPU-seconds spent before the loop (a slow set-up)")
    step_cpu: float = param(0.0, ge=0, help="CPU-seconds spent in each step (a slow step)")
    capped: bool = param(False, help="report the step count as a cap (a loop that may stop early)")


def _busy(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


class TanhRegression(Experiment):
    """Full-batch GD on a one-hidden-layer tanh net in float32 torch (threaded matmuls: tests that executors and
    thread counts do not change stored results)."""

    name = "fixture.tanh_regression"
    title = "Gradient descent on a small tanh network"
    paper = "000"
    source = "test fixture"
    Config = TanhRegressionConfig
    claims = (ClaimSpec("loss_drops", "GD with a small step lowers the loss", "descent lemma", at_most(0.5),
                        no_control="test fixture of the runtime"),)
    scales = {scale: TanhRegressionConfig() for scale in SCALES}

    def runs(self, config: TanhRegressionConfig) -> list[RunSpec]:
        return [RunSpec(f"run={i}", {"index": i}) for i in range(config.runs)]

    def execute(self, config: TanhRegressionConfig, run: RunSpec, seed: int, device: str) -> dict:
        if run.params["index"] == 1 and config.kill_marker and not os.path.exists(config.kill_marker):
            with open(config.kill_marker, "w") as handle:
                handle.write(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        trace(run.label)
        _busy(config.setup_cpu)
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(config.n, 8, generator=generator)
        y = torch.sin(x.sum(1, keepdim=True))
        w1 = (torch.randn(8, config.width, generator=generator) / 8**0.5).to(device).requires_grad_()
        w2 = (torch.randn(config.width, 1, generator=generator) / config.width**0.5).to(device).requires_grad_()
        x, y = x.to(device), y.to(device)
        losses = torch.empty(config.steps)
        for step in range(config.steps):
            _busy(config.step_cpu)
            loss = 0.5 * (torch.tanh(x @ w1) @ w2 - y).pow(2).mean()
            losses[step] = loss.detach()
            report(step, Cap(config.steps) if config.capped else config.steps, losses[step])
            check_finite(float(losses[step]), step)
            g1, g2 = torch.autograd.grad(loss, (w1, w2))
            with torch.no_grad():
                w1 -= config.lr * g1
                w2 -= config.lr * g2
        time.sleep(config.delay)
        return {"losses": losses.numpy(), "w1": w1.detach().cpu().numpy()}

    def analyse(self, config: TanhRegressionConfig, results: dict) -> Analysis:
        ratios = [float(r["losses"][-1] / r["losses"][0]) for r in results.values()]
        return Analysis(measured={"loss_drops": Measured(ratios, f"{len(ratios)} runs")},
                        metrics=[{"run": label, "ratio": ratio} for label, ratio in zip(results, ratios)])


def least_squares_ratio(seed: int, steps: int, noise: float) -> float:
    """Final/initial loss of ``steps`` GD steps on a random 30 × 4 least-squares problem with label noise."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((30, 4))
    y = x @ rng.standard_normal(4) + noise * rng.standard_normal(30)
    w = np.zeros(4)
    initial = 0.5 * np.mean(y**2)
    for _ in range(steps):
        w -= 0.1 * x.T @ (x @ w - y) / 30
    return float(0.5 * np.mean((x @ w - y) ** 2) / initial)


@dataclass(frozen=True)
class FitConfig:
    seeds: int = param(5, ge=1, help="independent seeds, one run each")
    steps: int = param(300, ge=0, help="GD steps (0: the untrained control)")
    noise: float = param(0.0, ge=0, help="label noise: the loss cannot fall below its floor")
    broken: bool = param(False, analysis=True, help="measure a constant 0 instead of the loss ratio (a measurement "
                                                    "that cannot fail, so its control passes too)")


class Fit(Experiment):
    """GD on noisy least squares, one run per seed: the final/initial loss ratio, judged over seeds against the
    untrained control. Its verdict is set by the config: reproduced (default), inconclusive (``seeds=2``),
    vacuous (``broken=true``); ``fixture.documented`` is the same experiment with a documented disagreement."""

    title = "Least-squares GD judged over seeds"
    paper = "000"
    source = "test fixture"
    Config = FitConfig
    scales = {scale: FitConfig() for scale in SCALES}

    def __init__(self, name: str, claim: ClaimSpec, config: FitConfig) -> None:
        self.name, self.claims = name, (claim,)
        self.scales = {scale: config for scale in SCALES}

    def runs(self, config: FitConfig) -> list[RunSpec]:
        return [RunSpec(f"seed={i}") for i in range(config.seeds)]

    def execute(self, config: FitConfig, run: RunSpec, seed: int, device: str) -> dict:
        return {"ratio": least_squares_ratio(seed, config.steps, config.noise)}

    def analyse(self, config: FitConfig, results: dict) -> Analysis:
        ratios = [0.0 if config.broken else r["ratio"] for r in results.values()]
        return Analysis(measured={self.claims[0].id: Measured(ratios)})


@dataclass(frozen=True)
class LongTrainingConfig:
    steps: int = param(3000, ge=1, help="steps of each of the two training loops")
    runs: int = param(1, ge=1)


class LongTraining(Experiment):
    """Two training loops in one run through ``repdyn.nn.train`` (minibatch SGD with momentum, then Adam), long
    enough to be checkpointed and killed: the run must resume bit-identical (issue of long runs)."""

    name = "fixture.long_training"
    title = "A long run of two training loops"
    paper = "000"
    source = "test fixture"
    Config = LongTrainingConfig
    scales = {scale: LongTrainingConfig() for scale in SCALES}
    claims = (ClaimSpec("fits", "the loss falls", "test fixture", at_most(1.0), exact=True, no_control="fixture"),)

    def runs(self, config: LongTrainingConfig) -> list[RunSpec]:
        return [RunSpec(f"run={i}") for i in range(config.runs)]

    def execute(self, config: LongTrainingConfig, run: RunSpec, seed: int, device: str) -> dict:
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(64, 5, generator=generator)
        y = torch.sin(x.sum(1, keepdim=True))
        model = Ensemble(lambda generator: MLP(5, 16, 2, generator=generator, dropout=0.1), seeds=[seed, seed + 1])
        first = train(model, x, y, steps=config.steps, lr=0.01, optimizer="momentum", batch_size=16,
                      generator=generator)
        second = train(model, x, y, steps=config.steps, lr=1e-3, optimizer="adam", batch_size=16,
                       generator=generator)
        params = {name: p.detach().numpy() for name, p in model.params.items()}
        return {"loss_sgd": first.trajectory["loss"], "loss_adam": second.trajectory["loss"],
                **{f"param_{i}": value for i, value in enumerate(params.values())}}

    def analyse(self, config: LongTrainingConfig, results: dict) -> Analysis:
        return Analysis(measured={"fits": Measured([r["loss_adam"][-1].max() / r["loss_sgd"][0].max()
                                                    for r in results.values()])})


@dataclass(frozen=True)
class SharedConfig:
    seeds: int = param(5, ge=1, help="least-squares problems in the shared run")
    steps: int = param(300, ge=0, help="GD steps of the shared run (0: the untrained control)")
    offset: float = param(0.0, help="what this experiment's own run returns; not a param of the shared run")


SHARED = "fixture.shared_solution"


class SharedReader(Experiment):
    """Reads the shared run ``fixture.shared_solution`` (GD on ``seeds`` least-squares problems, keyed by its params
    alone) beside a run of its own; two instances with different configs declare it (``fixture.reads_a``,
    ``fixture.reads_b``), so it is trained once for both. Traced as "shared" and "<name>:own"."""

    title = "Two experiments reading one shared run"
    paper = "000"
    source = "test fixture"
    Config = SharedConfig

    def __init__(self, name: str, config: SharedConfig) -> None:
        self.name = name
        self.scales = {scale: config for scale in SCALES}
        self.claims = (FITS,)

    def runs(self, config: SharedConfig) -> list[RunSpec]:
        return [RunSpec("solution", {"seeds": config.seeds, "steps": config.steps}, shared=SHARED), RunSpec("own")]

    def execute(self, config: SharedConfig, run: RunSpec, seed: int, device: str) -> dict:
        if not run.shared:
            trace(f"{self.name}:own")
            return {"offset": config.offset}
        trace("shared")
        return {"ratio": np.array([least_squares_ratio(seed + i, run.params["steps"], 0.0)
                                   for i in range(run.params["seeds"])])}

    def analyse(self, config: SharedConfig, results: dict) -> Analysis:
        return Analysis(measured={"fits": Measured(results["solution"]["ratio"].tolist())},
                        metrics=[{"offset": results["own"]["offset"]}])


UNTRAINED = Control("the untrained network (steps = 0)", {"steps": 0})
FITS = ClaimSpec("fits", "GD fits the data: final/initial loss", "test fixture", at_most(0.01),
                 quote="gradient descent", band_reason="a choice of the fixture", control=UNTRAINED)
DOCUMENTED = ClaimSpec(
    "fits_noise", "GD fits noisy data: final/initial loss", "test fixture", at_most(0.01), quote="gradient descent",
    band_reason="a choice of the fixture", control=UNTRAINED,
    disagreement=Disagreement(settings="noise 1, 300 steps, 5 seeds", measured="ratio about 0.2 on every seed",
                              ruled_out="too few steps: the loss is at its noise floor", doc="tests/runtime"))
PAPER = Paper("000", "fixture", "Fixtures of the runtime", "repdyn", "Not a paper: the runtime's test fixtures.")

EXPERIMENTS = (LeastSquares(), TanhRegression(), LongTraining(), Fit("fixture.fits", FITS, FitConfig()),
               Fit("fixture.documented", DOCUMENTED, FitConfig(noise=1.0)),
               SharedReader("fixture.reads_a", SharedConfig()),
               SharedReader("fixture.reads_b", SharedConfig(offset=1.0)))
