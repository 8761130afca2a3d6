"""Experiments 4 and 5 on one default two-point run each: the perturbed-dynamics control (Fig. 11) and the fit at
every read-out layer (Fig. 10) of seed 000."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from scipy import stats

from repdyn.experiments.base import Analysis, Experiment, RunSpec
from repdyn.experiments.claims import ClaimSpec, Disagreement, Measured, at_least, at_most
from repdyn.experiments.config import param
from repdyn.experiments.effective_theory.common import (
    TABLE1,
    UNTRAINED,
    DeepRunConfig,
    converged,
    fit_member,
    gated,
    train_two_point,
)
from repdyn.theory import effective_theory as et

PAPER_CONTROL_LOSSES = {"original": 0.92, "factor_two": 15.35, "square": 16.61, "minus_sign": 2.99, "drop_term": 5.64}
"""Fit losses of App. C.1 (Fig. 11), in the order of the paper's sentence (spec 000 §2.12)."""


@dataclass(frozen=True)
class DefaultRunConfig(DeepRunConfig):
    trials: int = param(3, ge=1, help="independent default networks (one ensemble; the paper shows one)")
    dx: float = param(0.5, gt=0)
    dy: float = param(1.0, gt=0)


SCALE_CONFIGS = {
    "smoke": DefaultRunConfig(width=32, depth=4, steps=400, time_compression=31.25, record_every=5),
    "quick": DefaultRunConfig(width=64, steps=4000, time_compression=11.71875, record_every=10),
    "paper": DefaultRunConfig(),
}
DEPTH_SCALES = {**SCALE_CONFIGS, "quick": dataclasses.replace(SCALE_CONFIGS["quick"], trials=8)}
"""Fig. 10 is judged on converged trials only: 8 at the quick scale, so that enough of them leave the plateau."""
FIG11 = "Trajectories of the alternatives are not as good of a fit compared to the effective theory."
W500_SETTINGS = ("the paper's: 20 × 500 leaky ReLU, gain 1, full-batch GD at half the Table-1 learning rate "
                 "(0.0025, 12000 steps; at the Table-1 step itself no network converged within 6000 epochs), dx = 0.5, "
                 "dy = 1, float64; the converged trajectories of 3 seeds")
W500_VARIANTS = ("normalised fit losses on the converged width-500 trajectory: original 0.98, square 0.155, "
                 "factor_two 0.22, minus_sign 0.56, drop_term 1.65 (best perturbed / original = 0.16; others / "
                 "minus_sign = 0.28)")
W500_RULED_OUT = ("the width (width 64 at the Table-1 step and at half of it: original 0.60 / 0.70, factor_two 0.14 "
                  "/ 0.15 best); the step (the quick scale's 11.7 × step, half the Table-1 step); the fit search "
                  "(widened to 12 decades, recovers known rates to 1 %); the normalisation (v does not swamp u: each "
                  "variable is normalised by its own variation)")
SECOND_HALF_FIT = Disagreement(
    settings="the paper's network (20 × 500 leaky ReLU, gain 1, dx = 0.5, dy = 1, float64) at the quick scale's step "
             "(Table-1 × 11.7, 4000 steps), every hidden layer recorded, 8 seeds (0-7); at the Table-1 step itself no "
             "width-500 network converged within 6000 epochs",
    measured="all 8 converged; median normalised fit loss over layers 11-20 per trial: 1.17, 1.91, 1.53, 1.41, 2.32, "
             "1.27, 1.92, 3.03 (first half 3.6: the ordering of the halves holds, claim halves); quick (width 64, 8 "
             "trials): 1.65-3.75",
    ruled_out="the width (64 and 500 agree); convergence (all converged); the fit search (12 decades of τ_y/τ_h); "
              "the step (half the Table-1 step fits the read-out layer no better, 0.98)",
    doc="docs/reproduction/000.md#eq-7-does-not-overlay-the-transition")
FIG10 = "We can see that the theory is accurate only in the second half of the network."


def train_default(config: DefaultRunConfig, seed: int, device: str, layers: list[str] | None = None) -> dict:
    arch = TABLE1["default"]
    k = config.trials
    lr = arch.lr * config.time_compression
    return train_two_point(activation=arch.activation, depth=config.depth, width=config.width, gains=[arch.gain] * k,
                           lrs=[lr] * k, seeds=[seed + i for i in range(k)], steps=config.steps,
                           record_every=config.record_every, dx=[config.dx] * k, dy=[config.dy] * k,
                           layers=layers, device=device, generator_seed=seed)


class PerturbedDynamicsControl(Experiment):
    name = "effective_theory.control"
    title = "Control: Eq. 7 against four perturbed dynamics"
    paper = "000"
    source = "Fig. 11 (App. C.1), Eq. 51"
    Config = DefaultRunConfig
    scales = SCALE_CONFIGS
    claims = (
        ClaimSpec("original_best", "Eq. 7 fits the default network better than every deliberately wrong ODE of "
                  "Eq. 51: per trial, the smallest perturbed normalised fit loss / the original's",
                  "seed 000, Fig. 11 (paper: 2.99 / 0.92 = 3.3)", at_least(1.0), quote=FIG11,
                  band_reason="read off the paper's statement: every alternative fits worse (ratio > 1); the paper's "
                  "own ratio is 3.3", control=UNTRAINED, figure="fig11_control",
                  disagreement=Disagreement(W500_SETTINGS, W500_VARIANTS, W500_RULED_OUT,
                                            "docs/reproduction/000.md#eq-7-does-not-overlay-the-transition")),
        ClaimSpec("closest", "The removed-minus-sign version is the closest competitor: per trial, the smallest fit "
                  "loss of the other three perturbations / that of the minus-sign version", "seed 000, Fig. 11",
                  at_least(1.0), quote="increases from 0.92 to 15.35, 16.61, 2.99 and 5.64 respectively",
                  band_reason="read off App. C.1: minus sign 2.99 against 5.64 at the next (ratio 1.9 > 1)",
                  control=UNTRAINED,
                  disagreement=Disagreement(W500_SETTINGS, W500_VARIANTS, W500_RULED_OUT,
                                            "docs/reproduction/000.md#eq-7-does-not-overlay-the-transition")),
    )

    def runs(self, config: DefaultRunConfig) -> list[RunSpec]:
        return [RunSpec("default", {})]

    def execute(self, config: DefaultRunConfig, run: RunSpec, seed: int, device: str) -> dict:
        return train_default(config, seed, device)

    def analyse(self, config: DefaultRunConfig, results: Mapping[str, dict]) -> Analysis:
        res = results["default"]
        t = res["steps"] * config.time_compression
        X, Y = config.dx**2, config.dy**2
        analysis = Analysis()
        losses = {v: [] for v in et.VARIANTS}
        theories = {}
        notes = []
        for k in range(config.trials):
            u, v, w = res["u"][:, k, 0], res["v"][:, k], res["w"][:, k]
            for variant in et.VARIANTS:
                member = fit_member(t, u, v, w, X, Y, variant)
                losses[variant].append(member.relative_loss)
                if member.fit is None:
                    notes.append(f"trial {k} {variant}: {member.error}")
                elif k == 0:
                    theories[variant] = member.fit.theory
                analysis.metrics.append({"trial": k, "variant": variant, "relative_fit_loss": member.relative_loss,
                                         "fit_loss": member.fit.loss if member.fit else float("nan"),
                                         "paper_fit_loss": PAPER_CONTROL_LOSSES[variant]})
        # A failed fit of a perturbed ODE means it cannot follow the trajectory at all: rank it as infinitely bad.
        per_trial = {v: np.nan_to_num(np.asarray(losses[v], dtype=float), nan=np.inf) for v in et.VARIANTS}
        per_trial["original"] = np.asarray(losses["original"], dtype=float)  # a failed original fit stays NaN
        median = {v: float(np.median(per_trial[v])) for v in et.VARIANTS}
        perturbed = [v for v in et.VARIANTS if v != "original"]
        others = [v for v in perturbed if v != "minus_sign"]
        order = sorted(et.VARIANTS, key=lambda v: median[v])
        paper_order = sorted(PAPER_CONTROL_LOSSES, key=PAPER_CONTROL_LOSSES.get)
        summary = ", ".join(f"{v}: {median[v]:.3g}" for v in order)
        best_perturbed = np.min([per_trial[v] for v in perturbed], axis=0)
        analysis.measured["original_best"] = Measured(best_perturbed / per_trial["original"], summary)
        minus = np.asarray(losses["minus_sign"], dtype=float)
        analysis.measured["closest"] = Measured(np.min([per_trial[v] for v in others], axis=0) / minus,
                                                "measured order of the medians: " + " < ".join(order)
                                                + "; paper: " + " < ".join(paper_order))
        fig = Figure(figsize=(9.0, 3.0))
        axes = fig.subplots(1, 3)
        for col, name in enumerate(("‖dh‖²", "‖dy‖²", "w")):
            axes[col].plot(t, np.stack([res["u"][:, 0, 0], res["v"][:, 0], res["w"][:, 0]], -1)[:, col], color="k",
                           lw=2, label="network")
            for i, (variant, theory) in enumerate(theories.items()):
                axes[col].plot(t, theory.stacked()[:, col], ls="--", lw=1, color=f"C{i}",
                               label=f"{variant} ({median[variant]:.2g})")
            axes[col].set_title(name, fontsize=8)
            axes[col].set_xlabel("epoch", fontsize=8)
        axes[0].legend(fontsize=6)
        fig.suptitle("Fig. 11: fits of Eq. 7 and of the perturbed dynamics of Eq. 51 (relative fit loss)", fontsize=9)
        fig.tight_layout()
        analysis.figures["fig11_control"] = fig
        analysis.notes = ("Relative Eq. 49 fit losses (median over trials): " + summary + ". Paper (absolute, "
                          "its own integration convention): " + ", ".join(f"{k}: {v}" for k, v in
                                                                       PAPER_CONTROL_LOSSES.items())
                          + ". " + " ".join(notes))
        if order[0] != "original":
            analysis.notes += (" Eq. 7 is not the best fit here: the network leaves the plateau far more abruptly than "
                               "any Eq. 7 solution (see the figure), and the perturbations that sharpen the transition "
                               "fit that jump better. The paper's 500-wide networks follow Eq. 7 closely; this is a "
                               "disagreement at the reduced width and scaled-up learning rate of this scale.")
        return analysis


class DepthDependence(Experiment):
    name = "effective_theory.depth"
    title = "Fit quality and effective rates at every read-out layer"
    paper = "000"
    source = "Fig. 10, Eq. 14"
    Config = DefaultRunConfig
    scales = DEPTH_SCALES
    claims = (
        ClaimSpec("second_half_fit", "Eq. 7 fits well in the second half of the network: per converged "
                  "trial, median normalised fit loss over hidden layers 11-20", "seed 000, Fig. 10", at_most(0.1),
                  quote=FIG10,
                  band_reason="the same choice as two_point default_fit", control=UNTRAINED,
                  disagreement=SECOND_HALF_FIT, figure="fig10_depth"),
        ClaimSpec("halves", "The fit is better in the second half than in the first: per converged trial, median "
                  "fit loss of layers 11-20 / that of layers 1-10 (a failed fit counts as ∞)", "seed 000, Fig. 10",
                  at_most(1.0), quote=FIG10, band_reason="read off Fig. 10: the ordering of the two halves",
                  control=UNTRAINED),
        ClaimSpec("rate_h_trend", "In the second half 1/τ_h increases with depth: per converged trial, Spearman "
                  "correlation with the layer index", "seed 000, Fig. 10", at_least(0.5),
                  quote="In this regime the effective learning rate of the encoder increases with depth",
                  band_reason="our choice: a clear monotone trend (the figure's y-axis is not to scale)",
                  control=UNTRAINED),
        ClaimSpec("rate_y_trend", "In the second half 1/τ_y decreases with depth: per converged trial, Spearman "
                  "correlation with the layer index", "seed 000, Fig. 10", at_most(-0.5),
                  quote="whereas the effective learning rate of the decoder decreases",
                  band_reason="our choice, as rate_h_trend", control=UNTRAINED),
    )

    def runs(self, config: DefaultRunConfig) -> list[RunSpec]:
        return [RunSpec("default_all_layers", {})]

    def execute(self, config: DefaultRunConfig, run: RunSpec, seed: int, device: str) -> dict:
        return train_default(config, seed, device, layers=[f"layer{i}" for i in range(config.depth)])

    def analyse(self, config: DefaultRunConfig, results: Mapping[str, dict]) -> Analysis:
        res = results["default_all_layers"]
        t = res["steps"] * config.time_compression
        X, Y = config.dx**2, config.dy**2
        depth = res["u"].shape[2]
        analysis = Analysis()
        rel = np.full((config.trials, depth), np.nan)
        rate_h, rate_y = np.full_like(rel, np.nan), np.full_like(rel, np.nan)
        notes = []
        for k in range(config.trials):
            for layer in range(depth):
                member = fit_member(t, res["u"][:, k, layer], res["v"][:, k], res["w"][:, k], X, Y)
                rel[k, layer] = member.relative_loss
                if member.fit is None:
                    notes.append(f"trial {k} layer {layer + 1}: {member.error}")
                    continue
                rate_h[k, layer], rate_y[k, layer] = member.fit.rate_h, member.fit.rate_y
                analysis.metrics.append({"trial": k, "hidden_layer": layer + 1, "rate_h": member.fit.rate_h,
                                         "rate_y": member.fit.rate_y, "relative_fit_loss": member.relative_loss,
                                         "u0": res["u"][0, k, layer]})
        # A failed fit (Eq. 7 cannot even be integrated from the measured start) counts as an infinitely bad fit.
        bad = np.nan_to_num(rel, nan=np.inf)
        layer_loss = np.median(bad, axis=0)
        # Fig. 10 fits whole transitions: only trials that left the plateau count (a plateau fits trivially well and
        # has no rates to speak of); an unconverged trial scores NaN (fails the claim), as in two_point default_fit.
        ok = converged(res["loss"])
        conv = (f"converged trials {int(ok.sum())} of {config.trials} (final losses "
                + ", ".join(f"{v:.2g}" for v in res["loss"][-1]) + ")")
        first, second = bad[:, : depth // 2], bad[:, depth // 2:]
        n_failed = int(np.sum(~np.isfinite(second[ok])))
        second_median = np.median(second, axis=1)
        second_median[~np.isfinite(second_median)] = np.nan
        analysis.measured["second_half_fit"] = Measured(gated(second_median, ok), f"{conv}; {n_failed} "
                                                        "second-half fits of converged trials did not converge")
        with np.errstate(invalid="ignore"):
            ratio = np.median(second, axis=1) / np.median(first, axis=1)
        halves = [np.median(part[ok]) if ok.any() else np.nan for part in (first, second)]
        analysis.measured["halves"] = Measured(gated(np.where(np.isfinite(ratio), ratio, np.nan), ok),
                                               f"{conv}; median first half {halves[0]:.3g}, second {halves[1]:.3g}")
        index = np.arange(depth // 2, depth)
        trends = {}
        for claim, rates in (("rate_h_trend", rate_h), ("rate_y_trend", rate_y)):
            rhos = []
            for k in range(config.trials):
                per_layer = rates[k, depth // 2:]
                fitted = np.isfinite(per_layer)
                rhos.append(stats.spearmanr(index[fitted], per_layer[fitted]).statistic if fitted.sum() >= 3
                            else float("nan"))
            rhos = gated(rhos, ok)
            trends[claim] = float(np.nanmedian(rhos)) if np.isfinite(rhos).any() else float("nan")
            analysis.measured[claim] = Measured(rhos, f"Spearman ρ per converged trial; {conv}")
        fig = Figure(figsize=(6.5, 3.2))
        ax = fig.subplots()
        layers = np.arange(1, depth + 1)
        ax.semilogy(layers, np.where(np.isfinite(layer_loss), layer_loss, np.nan), "o-", color="C3",
                    label="relative fit loss (gaps: no fit)")
        ax.semilogy(layers, np.nanmedian(rate_h, axis=0), "s-", color="C0", label="1/τ_h")
        ax.semilogy(layers, np.nanmedian(rate_y, axis=0), "^-", color="C2", label="1/τ_y")
        ax.set_xlabel("read-out hidden layer", fontsize=8)
        ax.legend(fontsize=7)
        fig.suptitle("Fig. 10: fit loss and fitted rates against read-out layer", fontsize=9)
        fig.tight_layout()
        analysis.figures["fig10_depth"] = fig
        analysis.notes = ("Median over trials per layer; layer numbers are 1-based hidden layers. Where a fit fails, "
                          "the measured start has w(0) > 0 with u(0) so small that Eq. 7 drives u to 0 in finite "
                          "time for every rate ratio: the network starts off the aligned manifold (spec 000 §7.7). "
                          "Spearman correlations with depth in the second half (median over converged trials): "
                          f"1/τ_h {trends['rate_h_trend']:.2f}, "
                          f"1/τ_y {trends['rate_y_trend']:.2f} (paper: 1/τ_h rises, 1/τ_y falls). "
                          + " ".join(notes))
        return analysis
