"""Experiment 4 of seed 000: Eq. 7 against the perturbed dynamics of Eq. 51 on the default two-point run (Fig. 11)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from repdyn.experiments.effective_theory.common import (
    DEFAULT_RUN_SCALES,
    UNTRAINED,
    DefaultRunConfig,
    ReadsDefaultNetworks,
    escaped,
    fit_member,
    plateau_ratio,
    readout_index,
    select_networks,
)
from repdyn.framework.base import Analysis, Experiment
from repdyn.framework.claims import ClaimSpec, Measured, at_least
from repdyn.theory import effective_theory as et

PAPER_CONTROL_LOSSES = {"original": 0.92, "factor_two": 15.35, "square": 16.61, "minus_sign": 2.99, "drop_term": 5.64}
"""Fit losses of App. C.1 (Fig. 11), in the order of the paper's sentence (spec 000 §2.12)."""
FIG11 = "Trajectories of the alternatives are not as good of a fit compared to the effective theory."
class PerturbedDynamicsControl(ReadsDefaultNetworks, Experiment):
    name = "effective_theory.control"
    title = "Control: Eq. 7 against four perturbed dynamics"
    paper = "000"
    source = "Fig. 11 (App. C.1), Eq. 51"
    Config = DefaultRunConfig
    scales = DEFAULT_RUN_SCALES
    claims = (
        ClaimSpec("original_best", "Eq. 7 fits the default network better than every deliberately wrong ODE of "
                  "Eq. 51: per trial, the smallest perturbed normalised fit loss / the original's",
                  "seed 000, Fig. 11 (paper: 2.99 / 0.92 = 3.3)", at_least(1.0), quote=FIG11,
                  band_reason="read off the paper's statement: every alternative fits worse (ratio > 1); the paper's "
                  "own ratio is 3.3", control=UNTRAINED, figure="fig11_control",
                  preconditions=(escaped("default_escape", "every default network"),)),
        ClaimSpec("closest", "The removed-minus-sign version is the closest competitor: per trial, the smallest fit "
                  "loss of the other three perturbations / that of the minus-sign version", "seed 000, Fig. 11",
                  at_least(1.0), quote="increases from 0.92 to 15.35, 16.61, 2.99 and 5.64 respectively",
                  band_reason="read off App. C.1: minus sign 2.99 against 5.64 at the next (ratio 1.9 > 1)",
                  control=UNTRAINED,
                  preconditions=(escaped("default_escape", "every default network"),)),
    )

    def analyse(self, config: DefaultRunConfig, results: Mapping[str, dict]) -> Analysis:
        res = select_networks(results["default_networks"], range(config.trials), readout_index(config.depth))
        t = res["steps"] * config.time_compression
        X, Y = config.dx**2, config.dy**2
        analysis = Analysis()
        analysis.states["default_escape"] = Measured(plateau_ratio(res["loss"], Y).tolist(), "final loss / (Y/8)")
        losses = {v: [] for v in et.VARIANTS}
        theories = {}
        notes = []
        for k in range(config.trials):
            u, v, w = res["u"][:, k], res["v"][:, k], res["w"][:, k]
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
            axes[col].plot(t, np.stack([res["u"][:, 0], res["v"][:, 0], res["w"][:, 0]], -1)[:, col], color="k",
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
