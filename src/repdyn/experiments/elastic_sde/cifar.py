"""CIFAR-10 of seed 004, K ∈ {2, 3} (Figs. 3c–d, 3g–h, D.4), only with a local data folder (``--set data_dir=…``, the
``cifar-10-batches-py`` folder): without it the experiment is skipped and says so. One run per (K, seed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from repdyn.data.cifar10 import check_cifar10_folder, cifar_subset
from repdyn.experiments.elastic_sde.common import (
    DTYPES,
    NUMBER,
    TERMINAL,
    amplification_start,
    estimate,
    plot_strengths,
    shape_checks,
    terminal_train_loss,
    train_log,
    val_chunk_param,
)
from repdyn.framework.base import Analysis, Experiment, RunResult, RunSpec
from repdyn.framework.claims import ClaimSpec, Control, Measured, at_least
from repdyn.framework.config import ConfigError, check_data_folder, param


@dataclass(frozen=True)
class CifarConfig:
    data_dir: str = param("", help="folder with the CIFAR-10 python batches (cifar-10-batches-py); empty: skip")
    classes: tuple[int, ...] = param((2, 3), ge=2, le=10, help="K values (first K classes)")
    n_train: int = param(5000, ge=3, help="per class (paper 5000; the authors' code 2000)")
    n_val: int = param(1000, ge=1, help="per class (paper 1000; the authors' code 500)")
    seeds: int = param(3, ge=1, help="independent replicates per K")
    trials: int = param(100, ge=3)
    steps: int = param(300_000, ge=50, help="paper: 3×10⁵ iterations")
    lr: float = param(0.005, gt=0, help="paper text 0.005 (the authors' code 0.001)")
    val_every: int = param(100, ge=1)
    dtype: str = param("float64", choices=tuple(DTYPES))
    val_chunk: int = val_chunk_param()
    sg_window: int = param(551, ge=5, help="paper: 551")
    untrained: bool = param(False, help="negative control: the untrained networks (no SGD update)")
    data_seed: int = param(4, ge=0)


SCALES = {
    "smoke": CifarConfig(n_train=10, n_val=5, trials=4, steps=100, val_every=50, dtype="float32", sg_window=15),
    "quick": CifarConfig(n_train=500, n_val=100, trials=16, steps=5000, lr=0.001, val_every=500, dtype="float32",
                         sg_window=91),
    # only with a local CIFAR-10 folder; the quick setting (not run here: no folder)
    "full": CifarConfig(n_train=500, n_val=100, trials=16, steps=5000, lr=0.001, val_every=500, dtype="float32",
                        sg_window=91),
    "paper": CifarConfig(),
}
UNTRAINED = Control("the untrained networks (no SGD update; the same initialisations and draws)",
                    {"untrained": True})


class CifarElasticity(Experiment):
    name = "elastic_sde.cifar"
    title = "CIFAR-10 (K = 2, 3): local elasticity of a LeNet's logits (needs a local CIFAR-10 folder)"
    paper = NUMBER
    source = "Figs. 3c–d, 3g–h, D.4"
    Config = CifarConfig
    scales = SCALES
    claims = (
        ClaimSpec("cifar_alpha_dominates_beta", "α̂ > β̂ (l-model) on a fraction of the amplification stage, "
                  "minimum over K", "seed 004, Fig. 3c–d, D.3", at_least(0.9),
                  quote="(iii) Both $\\hat{\\alpha}(t)$ and $\\hat{\\beta}(t)$ behave similarly on both datasets",
                  band_reason="as elastic_sde.geomnist h3_alpha_dominates_beta", control=UNTRAINED,
                  preconditions=(TERMINAL,), figure="fig3_cifar_K=3"),
        ClaimSpec("cifar_A_grows", "Â(T) (l-model, last 5 %), minimum over K", "seed 004, Fig. D.4",
                  at_least(2.0), quote="$A(t)$ increases while $B(t)$ decreases, suggesting this behavior is more "
                  "general and is likely independent of the number of classes",
                  band_reason="as elastic_sde.geomnist h3_A_grows", control=UNTRAINED, preconditions=(TERMINAL,),
                  figure="fig3_cifar_K=3"),
    )

    def prepare(self, config: CifarConfig) -> str | None:
        if not config.data_dir:
            return "no CIFAR-10 folder given: run with --set data_dir=PATH/cifar-10-batches-py (nothing is downloaded)"
        if not Path(config.data_dir).is_dir():
            raise ConfigError(f"data_dir={config.data_dir!r} is not a folder: give the cifar-10-batches-py folder")
        check_data_folder("data_dir", config.data_dir, check_cifar10_folder)
        return None

    def runs(self, config: CifarConfig) -> list[RunSpec]:
        return [RunSpec(f"K={k} seed={i}", {"K": int(k), "replicate": i}) for k in config.classes
                for i in range(config.seeds)]

    def execute(self, config: CifarConfig, run: RunSpec, seed: int, device: str) -> RunResult:
        K = int(run.params["K"])
        xt, yt, xv, yv = cifar_subset(config.data_dir, K, config.n_train, config.n_val,
                                      np.random.default_rng(config.data_seed))
        return train_log(xt, yt, xv, yv, n_trials=config.trials, steps=config.steps, lr=config.lr,
                         val_every=config.val_every, dtype=config.dtype, seed=seed, device=device,
                         val_chunk=config.val_chunk,
                         untrained=config.untrained)

    def analyse(self, config: CifarConfig, results: Mapping[str, RunResult]) -> Analysis:
        checks, figures = {}, {}
        for label, res in sorted(results.items()):
            est = estimate(res["label"], res["logits"], config.sg_window)
            start = amplification_start(res["train_loss"], config.sg_window, res["logits"].shape[-1])
            checks[label] = shape_checks(est, "iso", config.sg_window, start)
            if label.endswith("seed=0"):
                figures[f"fig3_cifar_{label.split()[0]}"] = plot_strengths(est, f"CIFAR-10 {label}")
        seeds = range(config.seeds)
        per_k = [[checks[f"K={k} seed={i}"] for k in config.classes] for i in seeds]
        m = {"cifar_alpha_dominates_beta": Measured([min(c["frac_alpha_gt_beta"] for c in s) for s in per_k]),
             "cifar_A_grows": Measured([min(c["A_end"] for c in s) for s in per_k])}
        # per seed, the worst K: every K's network must be in the terminal phase
        loss = [max(terminal_train_loss(results[f"K={k} seed={i}"]["train_loss"]) for k in config.classes)
                for i in seeds]
        return Analysis(measured=m, figures=figures, metrics=[{"run": k, **v} for k, v in checks.items()],
                        states={"terminal_train_loss": Measured(loss, "largest over K")})
