"""A monitor recording read through each theory: tables, figures and notes for the report.

- Seed 000: the effective rates 1/τ_h, 1/τ_y fitted to each pair's measured (u, v, w) by Eq. (49)
  (:func:`repdyn.theory.effective_theory.fit_rates`), and the final distance Eq. (10) predicts from u(0), v(0),
  ‖Δx‖², ‖Δy‖² and the fitted τ_y/τ_h, next to the measured final u.
- Seed 003: kernel PCA of the empirical NTK (spec 003 §2.11), the share of the (centred one-hot) label norm on
  the top eigenvectors, and the centred kernel alignment ⟨K_c, YYᵀ⟩/(‖K_c‖‖YYᵀ‖) (Cortes, Mohri & Rostamizadeh
  2012) at each NTK step: the alignment of the kernel with the task that seed 003 explains by compression.
- Seed 004: per-class mean logits X̄^k(t) over the probe set (the "probe mode" of spec 004 §2.10.0), the
  integrated strengths Â, B̂ (spec 004 §2.10.1, erratum 6), α̂, β̂ as their derivatives in the step, the
  separation rate γ̂ = min(α̂ − β̂, α̂ + (K − 1)β̂) of Thm 3.1, pairwise linear separability of the classes'
  logits (Definition C.1) and neural collapse (spec 004 §2.8) of the logits and of each layer.
- Representations: effective rank per layer; the Cost of Identity and Hamiltonian profiles (seed 002) when
  recorded.

α̂, β̂: spec 004 §2.10.3 takes a Savitzky–Golay derivative over every iteration; a monitor records a few
log-spaced steps, so the derivative is the second-order finite difference on the recorded (non-uniform) steps
(``numpy.gradient``), which is exact for quadratics like the local Savitzky–Golay fit.

Each section also *reads* its measures: verdicts in plain language with thresholds taken from the theories
(:data:`THRESHOLDS`), warnings (recording ended early, theory not applicable under the run's loss, kernel alignment
falling, Hamiltonian not readable), and measures that do not apply are left out with the reason.
:func:`analyze` gives the same as pandas DataFrames and a summary dict, for scripts.
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from matplotlib.figure import Figure

from repdyn.monitor.measures import centred_alignment
from repdyn.monitor.recording import Recording, load_recording
from repdyn.probes.collapse import neural_collapse
from repdyn.probes.kernel_pca import kernel_pca
from repdyn.theory.effective_theory import FitError, fit_rates, fixed_point_distance
from repdyn.theory.elastic_sde import margin_alignment, pairwise_separable, separation_rate
from repdyn.theory.elasticity_estimators import (
    class_mean_logits,
    integrated_strengths_isotropic,
    strengths_from_integrated,
)

if TYPE_CHECKING:
    import pandas

SEPARABILITY_CHECKS = 6
"""Separability (K(K−1)/2 linear programs) is checked at this many recorded steps, spread evenly, first and last
included."""

THRESHOLDS = {
    "nc1_collapsed": 1.0,
    "nc1_drop": 0.5,
    "regime_lazy": 0.1,
    "regime_rich": 1.0,
    "alignment_change": 0.05,
    "ntk_lazy": 0.1,
    "ntk_rich": 1.0,
    "rank_collapse": 0.5,
    "stationarity_readable": 0.1,
    "eq10_factor": 2.0,
}
"""Where a reading changes, and why:

- nc1_collapsed: NC1 = Tr(Σ_W Σ_B⁺)/C below 1 means the within-class spread is smaller than the separation of
  the class means; neural collapse (spec 004 §2.8, seed 004 §4) is NC1 → 0.
- nc1_drop: neural collapse is read only where NC1 also fell to at most this fraction of its first recorded
  value (at least halved, the factor 2 of rank_collapse and eq10_factor): a layer whose classes are already
  tighter than their separation at initialisation (NC1 < 1) and barely change (0.988 → 0.979 in a lazy run) has
  not collapsed through training.
- regime_lazy / regime_rich: the headline regime of a run reads three relative changes over training, each below
  regime_lazy as lazy and above regime_rich as rich: the NTK's ‖K_T − K_0‖/‖K_0‖ (the ntk thresholds below), the
  weights' ‖θ_T − θ₀‖/‖θ₀‖ (lazy training, Chizat, Oyallon & Bach 2019: the model stays at its linearisation
  around θ₀ when the weights move little against their scale) and the two-point distance's median |u_T/u_0 − 1|
  (seed 000 App. A.5, Eq. 41-43: under a large initialisation u keeps its initial value). The run is lazy when
  every available change reads lazy, rich when every one reads rich, and mixed otherwise.
- alignment_change: a rise of the centred kernel-label alignment by more than this is the NTK aligning with the
  task (feature learning, seed 003 §5.2, Fig. 9); a fall by more than this is the kernel moving away from it.
- ntk_lazy / ntk_rich: relative change ‖K_T − K_0‖_F/‖K_0‖_F of the NTK below ntk_lazy is the kernel (lazy)
  regime, in which the NTK stays at its initial value (seed 000 §4 large initialisation, seed 003 §3); above
  ntk_rich the kernel has been rebuilt by training (the rich regime).
- rank_collapse: a middle layer whose effective rank ends below this fraction of its initial value has
  compressed its representation: the low-rank bottleneck of seed 002 §2.2 and the compression of seed 003.
- stationarity_readable: the Hamiltonian is constant across layers only at a critical point (seed 002 Prop. 1);
  with a stationarity residual above this it is not read.
- eq10_factor: the Eq. (10) prediction of the final two-point distance agrees when measured/predicted lies within
  this factor.
"""

LEVELS = ("good", "warn", "info")


@dataclass
class Section:
    """One part of the report: a theory's measurements, with their reading."""

    key: str
    title: str
    source: str
    text: str
    tables: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    figures: dict[str, bytes] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    verdicts: list[tuple[str, str]] = field(default_factory=list)
    """(level, text): level "good" (the theory's expected behaviour), "warn" (read with care / something is off)
    or "info"."""
    summary: dict[str, Any] = field(default_factory=dict)


_RENDER = [True]
"""Whether sections render their figures (``analyze(figures=False)`` skips them: the tables and summary are the
same, at a fraction of the time)."""


def _png(fig: Figure) -> bytes:
    """The figure as PNG bytes (empty when figures are off), after :func:`_fit_step_axes`."""
    if not _RENDER[0]:
        return b""
    _fit_step_axes(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return buffer.getvalue()


def _fit_step_axes(fig: Figure) -> None:
    """The step axes of a figure span the recorded steps: from just left of 0 (the symlog axis' linear part, so no
    tick at −10¹ from autoscaling margins) to 1.4× the last step, so the last point's marker is not cut off."""
    for ax in fig.axes:
        if ax.get_xscale() != "symlog":
            continue
        xs = [np.asarray(line.get_xdata(), dtype=float) for line in ax.get_lines()]
        x = np.concatenate(xs) if xs else np.empty(0)
        x = x[np.isfinite(x)]
        if x.size:
            ax.set_xlim(-0.3 if x.min() <= 0 else x.min() / 1.4, max(1.4 * x.max(), 1.0))


def _figure(panels: int, columns: int = 3) -> tuple[Figure, list[Any]]:
    """A figure of ``panels`` axes, at most ``columns`` per row, laid out without overlapping titles."""
    columns = min(columns, panels)
    rows = math.ceil(panels / columns)
    fig = Figure(figsize=(3.9 * columns, 3.3 * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, columns)).ravel()
    for ax in axes[panels:]:
        ax.set_visible(False)
    return fig, list(axes[:panels])


def _step_axis(ax: Any) -> None:
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("training step")


def _log_y(ax: Any, values: Any, label: str) -> None:
    """A log y-axis when the values span more than a decade (else linear: a log axis over less than a decade
    shows few, oddly written ticks), labelled accordingly."""
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    log = finite.size > 1 and finite.max() / finite.min() > 10
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(f"{label} (log scale)" if log else label)


def _change(first: float, last: float) -> str:
    return f"from {first:.3g} to {last:.3g}"


def loss_kind(recording: Recording) -> str | None:
    return recording.meta.get("loss_kind")


def run_verdicts(recording: Recording) -> list[tuple[str, str]]:
    """Warnings about the recording as a whole: how much of training it covers, the loss it was told."""
    steps, meta = recording.steps, recording.meta
    verdicts = []
    total = meta.get("total_steps")
    if total is None:
        verdicts.append(("info", f"total_steps was not given: the recording ends at step {int(steps[-1])}, but the "
                                 "fraction of training it covers is unknown"))
    elif steps[-1] < total:
        verdicts.append(("warn", f"Recording ended early: the last recorded step is {int(steps[-1])} of "
                                 f"total_steps={total} ({100 * steps[-1] / total:.0f} % of training); the end of "
                                 "training is not in this report"))
    else:
        verdicts.append(("good", f"covers 100 % of training: steps 0 to {total}"))
    if steps[0] != 0:
        verdicts.append(("warn", f"the untrained model (step 0) was not recorded: the first step is {int(steps[0])}"))
    if loss_kind(recording) is None:
        verdicts.append(("info", "the training loss was not stated (Monitor(loss_kind=...)): measures that assume "
                                 "the squared error are shown, to be read with care"))
    return verdicts


def probe_accuracy(recording: Recording) -> Section:
    """The probe loss (the one the run trains with) and accuracy at each recorded step, from the outputs."""
    steps, outputs = recording.steps, torch.as_tensor(recording["outputs"], dtype=torch.float64)
    kind = loss_kind(recording)
    names = {"cross_entropy": ["probe cross-entropy"], "squared_error": ["probe squared error"]}.get(
        kind or "", ["probe cross-entropy", "probe squared error"])
    section = Section("training", "Training on the probe set", "recorded outputs",
                      f"{' and '.join(names).capitalize()} (the loss the run trains with"
                      f"{'' if kind in ('cross_entropy', 'squared_error') else ', not stated'}) and accuracy of the "
                      "model's outputs on the probe inputs.")
    if "labels" not in recording:
        section.notes.append("no labels were given: only the recorded step times are shown")
        return section
    labels = torch.as_tensor(recording["labels"])
    series = {
        "probe cross-entropy": torch.stack([torch.nn.functional.cross_entropy(o, labels) for o in outputs]).numpy(),
        "probe squared error": (0.5 * (outputs - torch.nn.functional.one_hot(labels, outputs.shape[-1]).double())
                                .pow(2).sum(-1).mean(-1)).numpy()}
    accuracy = (outputs.argmax(-1) == labels).double().mean(-1).numpy()
    section.tables.append(("per step", [
        {"step": int(s), **{n: float(series[n][t]) for n in names}, "probe accuracy": float(accuracy[t]),
         "training loss": None if math.isnan(l) else float(l), "record seconds": float(r)}
        for t, (s, l, r) in enumerate(zip(steps, recording["loss"], recording["record_seconds"]))]))
    fig, (ax1, ax2) = _figure(2)
    for marker, name in zip("o^", names):
        ax1.plot(steps, series[name], f"{marker}-", label=name)
    _log_y(ax1, np.concatenate([series[n] for n in names]), "probe loss")
    ax1.legend(fontsize=7)
    ax1.set_title("probe loss")
    ax2.plot(steps, accuracy, "s-", color="C2")
    ax2.set_ylim(-0.02, 1.02)
    ax2.set_ylabel("probe accuracy")
    ax2.set_title("probe accuracy")
    for ax in (ax1, ax2):
        _step_axis(ax)
    section.figures["probe loss and accuracy"] = _png(fig)
    main = series[names[0]]
    section.verdicts.append(("good" if accuracy[-1] > accuracy[0] else "warn",
                             f"probe accuracy {_change(accuracy[0], accuracy[-1])}"))
    if main[-1] > main[0]:
        section.verdicts.append(("warn", f"the {names[0]} rose {_change(main[0], main[-1])}: training is diverging "
                                         "or the probe set is not learned"))
    else:
        section.verdicts.append(("good", f"the {names[0]} fell {_change(main[0], main[-1])}"))
    section.summary.update(probe_accuracy_first=float(accuracy[0]), probe_accuracy_last=float(accuracy[-1]),
                           probe_loss_first=float(main[0]), probe_loss_last=float(main[-1]), probe_loss=names[0])
    return section


def two_point_applies(recording: Recording) -> str | None:
    """None when the two-point theory applies to the run, else the reason it does not."""
    if loss_kind(recording) == "cross_entropy":
        return ("Eq. (7) of seed 000 is derived for gradient flow on the squared error; this run trains with "
                "cross-entropy, so the effective rates and the Eq. (10) prediction do not apply (u, v, w are still "
                "in steps.csv)")
    if loss_kind(recording) == "other":
        return ("Eq. (7) of seed 000 is derived for the squared error, not this run's loss (u, v, w are still in "
                "steps.csv)")
    return None


def u_change(recording: Recording) -> float:
    """The median over the recorded pairs of |u_T/u_0 − 1|, the relative change of the two-point distance
    u = ‖h(x₂) − h(x₁)‖² at the pair layer over training (first and last finite recordings); NaN without pairs."""
    if "pair_u" not in recording:
        return math.nan
    changes = []
    for u in np.asarray(recording["pair_u"], dtype=float).T:
        finite = u[np.isfinite(u)]
        if finite.size >= 2 and finite[0] > 0:
            changes.append(abs(finite[-1] / finite[0] - 1))
    return float(np.median(changes)) if changes else math.nan


def weight_change(recording: Recording) -> float:
    """‖θ_T − θ₀‖/‖θ₀‖ at the last recorded step with a finite value (NaN when not recorded)."""
    if "weight_change" not in recording:
        return math.nan
    finite = np.asarray(recording["weight_change"], dtype=float)
    finite = finite[np.isfinite(finite)]
    return float(finite[-1]) if finite.size else math.nan


def regime(recording: Recording, ntk_change: float | None) -> tuple[str, list[str]]:
    """(the run's headline regime "lazy" / "rich" / "mixed" / "unknown", the reading of each indicator): the
    NTK's, the weights' and u's relative change over training against :data:`THRESHOLDS` regime_lazy and
    regime_rich (see there for the sources)."""
    lazy, rich = THRESHOLDS["regime_lazy"], THRESHOLDS["regime_rich"]
    values = {"NTK change ‖K_T − K_0‖/‖K_0‖": math.nan if ntk_change is None else ntk_change,
              "weight movement ‖θ_T − θ₀‖/‖θ₀‖": weight_change(recording),
              "two-point distance change |u_T/u_0 − 1|": u_change(recording)}
    readings, kinds = [], []
    for name, value in values.items():
        if not np.isfinite(value):
            continue
        kind = "lazy" if value < lazy else "rich" if value > rich else "between"
        kinds.append(kind)
        readings.append(f"{name} = {value:.3g} ({kind}: " + {"lazy": f"< {lazy:g}", "rich": f"> {rich:g}",
                                                             "between": f"{lazy:g} to {rich:g}"}[kind] + ")")
    if not kinds:
        return "unknown", readings
    if all(k == "lazy" for k in kinds):
        return "lazy", readings
    if all(k == "rich" for k in kinds):
        return "rich", readings
    return "mixed", readings


def two_point(recording: Recording) -> Section:
    """Eq. (49) fit of 1/τ_h, 1/τ_y per pair and the Eq. (10) final distance against the measured one."""
    layer = recording.meta["pair_layer"]
    section = Section("two_point", "Two-point effective theory", "seed 000, Eq. (7), (10), (49)",
                      f"u = ‖h(x₂) − h(x₁)‖² at layer {layer}, v = ‖f(x₂) − f(x₁)‖², w = v − (f(x₂) − f(x₁))ᵀΔy "
                      "with one-hot targets; the effective rates are fitted to the whole recorded trajectory and "
                      "Eq. (10) predicts the final u from u(0), v(0), ‖Δx‖², ‖Δy‖² and τ_y/τ_h.")
    steps = recording.steps.astype(float)
    rows = []
    fig, axes = _figure(3)
    agree = fitted = 0
    for p, (i, j) in enumerate(recording["pairs"]):
        u, v, w = (recording[k][:, p] for k in ("pair_u", "pair_v", "pair_w"))
        X, Y = float(recording["pair_X"][p]), float(recording["pair_Y"][p])
        row: dict[str, Any] = {"pair": f"{i},{j}", "‖Δx‖²": X, "‖Δy‖²": Y, "u(0)": float(u[0]),
                               "u final (measured)": float(u[-1])}
        try:
            if not math.isfinite(X):
                raise ValueError("the inputs are not vectors (token ids or a batch), so ‖Δx‖² is undefined")
            fit = fit_rates(steps, u, v, w, X, Y)
        except (FitError, ValueError, RuntimeError) as error:
            row.update({"1/τ_h": None, "1/τ_y": None, "τ_y/τ_h": None, "u final (Eq. 10)": None,
                        "measured / predicted": None, "status": f"no fit: {error}"})
        else:
            predicted = float(fixed_point_distance(u[0], v[0], X, Y, fit.tau_ratio))
            ratio = float(u[-1]) / predicted if predicted > 0 else None
            row.update({"1/τ_h": fit.rate_h, "1/τ_y": fit.rate_y, "τ_y/τ_h": fit.tau_ratio,
                        "u final (Eq. 10)": predicted, "measured / predicted": ratio, "status": "fitted"})
            fitted += 1
            factor = THRESHOLDS["eq10_factor"]
            agree += ratio is not None and 1 / factor <= ratio <= factor
            for ax, theory in zip(axes, (fit.theory.u, fit.theory.v, fit.theory.w)):
                ax.plot(steps, theory, "-", color=f"C{p}")
        for ax, measured, name, label in zip(axes, (u, v, w), ("u", "v", "w"),
                                             ("u = ‖Δh‖²", "v = ‖Δf‖²", "w = v − Δfᵀ Δy")):
            ax.plot(steps, measured, "o", color=f"C{p}", ms=3, label=f"pair {i},{j}")
            ax.set_title(f"{name}: measured (dots), Eq. (7) fit (lines)", fontsize=9)
            ax.set_ylabel(label)
            _step_axis(ax)
        rows.append(row)
    axes[0].legend(fontsize=7)
    section.tables.append(("pairs", rows))
    section.figures["two-point state u, v, w"] = _png(fig)
    pairs = len(rows)
    moved = u_change(recording)
    if np.isfinite(moved) and moved < THRESHOLDS["regime_lazy"]:
        section.verdicts.append(("good", f"u did not move (median |u_T/u_0 − 1| = {moved:.2g} over {pairs} pairs, "
                                         f"below {THRESHOLDS['regime_lazy']:g}): the lazy regime, in which the "
                                         "two-point theory predicts that the representation keeps its initial "
                                         "distances (seed 000 App. A.5, Eq. 41-43, large initialisation); the "
                                         "rates' ratio τ_y/τ_h is then not identifiable from the trajectory"))
    elif fitted == 0:
        section.verdicts.append(("warn", f"no pair could be fitted by Eq. (7) ({rows[0]['status']}): the two-point "
                                         "theory does not describe this run"))
    else:
        level = "good" if agree == pairs else "warn"
        section.verdicts.append((level, f"Eq. (10) predicts the final distance within a factor "
                                        f"{THRESHOLDS['eq10_factor']:g} for {agree} of {pairs} pairs ({fitted} "
                                        "fitted); a larger gap says the two-point theory does not capture the pair"))
    section.summary.update(two_point_pairs=pairs, two_point_fitted=fitted, two_point_agree=agree, u_change=moved)
    if loss_kind(recording) is None:
        section.notes.append("Eq. (7) assumes gradient flow on the squared error: under another loss or stochastic "
                             "batches the fitted rates are effective constants of this run.")
    return section


def ntk(recording: Recording) -> Section:
    """Kernel PCA, label projection on the top eigenvectors, kernel alignment and the change of the NTK."""
    index = recording["ntk_index"]
    m = len(index)
    section = Section("ntk", "Empirical NTK: kernel PCA and alignment", "seed 003 §5.1–5.2, Fig. 9; spec 003 §2.11",
                      f"The empirical NTK (trace over outputs) on {m} probe inputs (taken in turn from each class). "
                      "The label projection "
                      "is the share of the centred one-hot label matrix's squared norm on each eigenvector "
                      "(Σ_c (v_r·y_c)²/‖Y‖²), the multi-class form of ω_r² of spec 003 §2.11; the relative change "
                      "‖K_t − K_0‖/‖K_0‖ tells the lazy (kernel) regime from the rich one.")
    labels = recording["labels"][index]
    classes = recording["outputs"].shape[-1]
    targets = np.eye(classes)[labels]
    centred = targets - targets.mean(0)
    rows, shares, spectra = [], [], []
    top = min(classes, m)
    finite = [t for t, gram in enumerate(recording["ntk"]) if np.isfinite(gram).all()]
    if not finite:
        raise ValueError("the recorded NTK is not finite at any step (the run went to NaN or the NTK failed)")
    if len(finite) < len(recording["ntk"]):
        skipped = [int(recording["ntk_steps"][t]) for t in range(len(recording["ntk"])) if t not in finite]
        section.notes.append(f"the NTK is not finite at step(s) {skipped}: left out")
    first = recording["ntk"][finite[0]]
    for step, gram in ((recording["ntk_steps"][t], recording["ntk"][t]) for t in finite):
        pca = kernel_pca(torch.as_tensor(gram))
        vectors = pca.eigenvectors.numpy()
        share = ((vectors.T @ centred) ** 2).sum(1) / (centred**2).sum()
        values = pca.eigenvalues.numpy()
        shares.append(share)
        spectra.append(values / values.sum())
        rows.append({"step": int(step), "trace / m": float(np.trace(gram) / m),
                     "top eigenvalue share": float(values[0] / values.sum()),
                     f"label share on top {top} modes": float(share[:top].sum()),
                     "kernel alignment": centred_alignment(gram, targets),
                     "relative change from first": float(np.linalg.norm(gram - first) / np.linalg.norm(first))})
    section.tables.append(("per NTK step", rows))
    fig, (ax1, ax2, ax3) = _figure(3)
    ax1.plot([r["step"] for r in rows], [r["kernel alignment"] for r in rows], "o-")
    ax1.set_title("kernel-label alignment", fontsize=9)
    ax1.set_ylabel("centred alignment ⟨K, YYᵀ⟩")
    _step_axis(ax1)
    ranks = np.arange(1, min(20, m) + 1)
    for idx, label in ((0, "first"), (-1, "last")):
        ax2.plot(ranks, shares[idx][: len(ranks)], "o-", label=f"step {rows[idx]['step']} ({label})")
        ax3.semilogy(ranks, spectra[idx][: len(ranks)], "o-", label=f"step {rows[idx]['step']}")
    ax2.set_title("label share on eigenvector r", fontsize=9)
    ax2.set_ylabel("share of ‖Y‖²")
    ax2.legend(fontsize=7)
    ax3.set_title("normalised NTK eigenvalues", fontsize=9)
    ax3.set_ylabel("λ_r / Σλ")
    for ax in (ax2, ax3):
        ax.set_xlabel("eigenvector rank r")
    section.figures["NTK alignment and kernel PCA"] = _png(fig)
    a0, a1 = rows[0]["kernel alignment"], rows[-1]["kernel alignment"]
    delta = THRESHOLDS["alignment_change"]
    if len(rows) < 2:
        section.verdicts.append(("info", "the NTK was taken at one step only: no change to read"))
    elif a1 - a0 > delta:
        section.verdicts.append(("good", f"kernel-label alignment rose {_change(a0, a1)}: the tangent kernel turned "
                                         "towards the task, as feature learning does (seed 003)"))
    elif a0 - a1 > delta:
        section.verdicts.append(("warn", f"kernel alignment falling: {_change(a0, a1)}; the tangent kernel moved "
                                         "away from the labels"))
    else:
        section.verdicts.append(("info", f"kernel-label alignment stayed near {a1:.3g} ({_change(a0, a1)})"))
    change = rows[-1]["relative change from first"]
    if len(rows) >= 2:
        regime = ("lazy (kernel) regime: the NTK barely moved" if change < THRESHOLDS["ntk_lazy"]
                  else "rich regime: training rebuilt the kernel" if change > THRESHOLDS["ntk_rich"]
                  else "between the lazy and the rich regime")
        section.verdicts.append(("info", f"the NTK changed by {change:.3g} of its initial norm: {regime}"))
    section.summary.update(ntk_alignment_first=a0, ntk_alignment_last=a1, ntk_change=change)
    return section


def elasticity(recording: Recording) -> Section:
    """Class-mean logits, Â/B̂, α̂/β̂, separation rate, separability and neural collapse over training."""
    steps = recording.steps
    outputs = recording["outputs"].astype(float)
    labels = recording["labels"]
    classes = outputs.shape[-1]
    section = Section("elasticity", "Local elasticity and neural collapse", "seed 004 §4, App. D; spec 004 §2.8, §2.10",
                      "X̄^k(t) is the mean logit vector of the probe inputs of class k. Â, B̂ are the integrated "
                      "elasticity strengths of the l-model (spec 004 §2.10.1), α̂, β̂ their step derivatives, "
                      "γ̂ = min(α̂ − β̂, α̂ + (K − 1)β̂) the separation rate of Thm 3.1; separability is "
                      "pairwise linear separability of the classes' logits (Definition C.1).")
    xbar = class_mean_logits(np.broadcast_to(labels[:, None], (len(labels), len(steps))),
                             np.transpose(outputs, (1, 0, 2)), classes)
    a_hat, b_hat = integrated_strengths_isotropic(xbar)
    times = steps.astype(float)
    try:
        alpha, beta = (strengths_from_integrated(s, 3, times) if len(times) > 2 else np.full_like(s, np.nan)
                       for s in (a_hat, b_hat))
    except ValueError as error:  # Â, B̂ are logs of ratios to X̄(0): undefined when the class means start at 0
        alpha = beta = np.full_like(a_hat, np.nan)
        start = float(np.abs(xbar[0]).max())
        section.notes.append(f"Â, B̂, α̂, β̂ and γ̂ cannot be estimated ({error})"
                             + (": the class-mean logits are exactly 0 at the first recorded step (a centred "
                                "model f = α(g − g₀) starts at 0), and Â, B̂ are logarithms of ratios to them"
                                if start == 0 else ""))
    gamma = separation_rate(alpha, beta, classes)
    rows = []
    nc1 = []
    counts = np.bincount(labels, minlength=classes)
    size = int(counts.min())
    checked = set(np.round(np.linspace(0, len(steps) - 1, min(SEPARABILITY_CHECKS, len(steps)))).astype(int))
    separable_column = f"separable (checked at {len(checked)} steps)"
    for t, step in enumerate(steps):
        grouped = [outputs[t, labels == k][:size] for k in range(classes)]
        collapse = neural_collapse(torch.as_tensor(outputs[t]), torch.as_tensor(labels))
        nc1.append(collapse.within_between)
        rows.append({"step": int(step), "Â": float(a_hat[t]), "B̂": float(b_hat[t]), "α̂": float(alpha[t]),
                     "β̂": float(beta[t]), "γ̂": float(gamma[t]),
                     separable_column: pairwise_separable(np.stack(grouped)) if t in checked else "not checked",
                     "NC1 (logits)": collapse.within_between, "ETF max cos error": collapse.etf_max_cos_error,
                     "class-mean norm CV": collapse.mean_norm_cv,
                     "margin alignment": float(np.mean(margin_alignment(xbar[t])))})
    section.tables.append(("per step", rows))
    fig, (ax1, ax2, ax3) = _figure(3)
    ax1.plot(steps, a_hat, "o-", label="Â")
    ax1.plot(steps, b_hat, "s-", label="B̂")
    ax1.set_title("integrated strengths", fontsize=9)
    ax1.set_ylabel("Â, B̂")
    ax2.plot(steps, alpha, "o-", label="α̂")
    ax2.plot(steps, beta, "s-", label="β̂")
    ax2.set_title("strengths (step derivatives)", fontsize=9)
    ax2.set_ylabel("α̂, β̂ per step")
    ax3.plot(steps, nc1, "o-", label="logits")
    drawn = [np.asarray(nc1)]
    if "nc_within_between" in recording:
        for l, layer in enumerate(recording.meta["layers"]):
            ax3.plot(steps, recording["nc_within_between"][:, l], "s-", label=layer)
        drawn.append(recording["nc_within_between"].ravel())
    ax3.axhline(THRESHOLDS["nc1_collapsed"], color="grey", ls=":", lw=1)
    ax3.set_title("NC1 = Tr(Σ_W Σ_B⁺)/C (dotted: 1)", fontsize=9)
    _log_y(ax3, np.concatenate(drawn), "NC1")
    for ax in (ax1, ax2, ax3):
        _step_axis(ax)
        ax.legend(fontsize=7)
    section.figures["elasticity strengths and neural collapse"] = _png(fig)
    section.notes.append(f"separability needs K(K−1)/2 linear programs, so it is checked at {len(checked)} recorded "
                         "steps spread evenly (first and last included); the other rows say 'not checked'.")
    if len(times) <= 2:
        section.notes.append("α̂, β̂ need at least 3 recorded steps")
    if counts.max() > size:
        section.notes.append(f"separability uses the first {size} probe inputs of each class (the smallest "
                             "class size), as Definition C.1 is checked on equal-sized classes")
    last_layer = recording.meta["layers"][-1] if "nc_within_between" in recording else None
    series = recording["nc_within_between"][:, -1] if last_layer is not None else np.asarray(nc1)
    pooled = last_layer is not None and last_layer in (recording.meta.get("nc_pooling") or {})
    where = (f"layer {last_layer}" + (" (feature map globally average-pooled)" if pooled else "")
             if last_layer is not None else "the logits")
    if pooled:
        section.notes.append("NC1 of a convolutional feature map (n, C, H, W) is taken on its global average pool "
                             "(n, C): the features a classifier head sees, as in the neural-collapse literature")
    limit, drop = THRESHOLDS["nc1_collapsed"], THRESHOLDS["nc1_drop"]
    finite = np.flatnonzero(np.isfinite(series))
    first, last = (float(series[finite[0]]), float(series[finite[-1]])) if finite.size else (math.nan, math.nan)
    if not finite.size:
        section.verdicts.append(("warn", f"NC1 at {where} is undefined at every recorded step"))
    elif last < limit and last <= drop * first:
        section.verdicts.append(("good", f"NC1 at {where} fell {_change(first, last)} (×{last / first:.2g}, at "
                                         f"least halved) and is below {limit:g}: the classes collapse onto their "
                                         "means (neural collapse, seed 004)"))
    elif last < limit:
        section.verdicts.append(("info", f"NC1 at {where} is {last:.3g} (from {first:.3g}, ×{last / first:.2g}): "
                                         f"below {limit:g}, the classes are tighter than their separation, but NC1 "
                                         f"did not fall to {drop:g} of its first value: no collapse through "
                                         "training"))
    elif last < first:
        section.verdicts.append(("info", f"NC1 at {where} fell {_change(first, last)} but stays above {limit:g}: no "
                                         "collapse yet"))
    else:
        section.verdicts.append(("warn", f"NC1 at {where} did not fall ({_change(first, last)}) and stays above "
                                         f"{limit:g}: the classes do not separate at this layer"))
    if np.isfinite(gamma[-1]):
        section.verdicts.append(("good" if gamma[-1] > 0 else "info",
                                 f"separation rate γ̂ = {gamma[-1]:.3g} at the last step: "
                                 + ("positive, the class means move apart (Thm 3.1)" if gamma[-1] > 0
                                    else "not positive, the class means are not separating now (Thm 3.1)")))
    last_separable = rows[-1][separable_column]
    section.summary.update(nc1_first=first, nc1_last=last, nc1_where=where,
                           separation_rate_last=float(gamma[-1]), separable_last=last_separable)
    return section


def representations(recording: Recording) -> Section:
    """Effective rank per layer over training, and the Cost of Identity and Hamiltonian profiles when recorded."""
    steps, layers = recording.steps, recording.meta["layers"]
    recorded = [k for k in ("effective_rank", "cost_of_identity", "hamiltonian") if k in recording]
    titles = {"effective_rank": "effective rank", "cost_of_identity": "Cost of Identity", "hamiltonian": "Hamiltonian"}
    texts = {"effective_rank": "Effective rank exp(H(s/Σs)) of each centred layer representation of the probe set.",
             "cost_of_identity": "The γ-stable Cost of Identity ‖A‖²_(K+γI) (γ = γ₀ λ_max(K), spec 002 §7 P5(c)); "
                                 "along the residual stream of a Leaky ResNet its minimum approaches the bottleneck "
                                 "rank k* from above (seed 002).",
             "hamiltonian": "The rescaled Hamiltonian −2H/L̃ = 2⟨B, A⟩ − ‖Bσ(A)ᵀ‖² with momenta B = −(1/λ)∂C/∂A per "
                            "layer: constant over the layers of a Leaky ResNet at a critical point, so it is read "
                            "only where the stationarity residual r = ‖∇_θC + λθ‖/‖λθ‖ is small."}
    section = Section("representations", "Representations: " + ", ".join(titles[k] for k in recorded),
                      "seed 002 §2.2–2.4, Eq. (1), Prop. 1; spec 002 §3.5–3.6, §3.12–3.13",
                      " ".join(texts[k] for k in recorded))
    series = [k for k in ("effective_rank", "cost_of_identity", "hamiltonian", "momentum_norm") if k in recording]
    rows = []
    for t, s in enumerate(steps):
        row = {"step": int(s), **{f"{k.replace('_', ' ')} [{layer}]": float(recording[k][t, l])
                                  for k in series for l, layer in enumerate(layers)}}
        if "stationarity" in recording:
            row["stationarity residual"] = float(recording["stationarity"][t])
        rows.append(row)
    section.tables.append(("per step", rows))
    residual = float(recording["stationarity"][-1]) if "stationarity" in recording else None
    readable = residual is not None and residual < THRESHOLDS["stationarity_readable"]
    plotted = [k for k in recorded if k != "hamiltonian" or readable]
    profiles = [k for k in ("cost_of_identity", "hamiltonian") if k in plotted]
    if plotted:
        fig, axes = _figure(len(plotted) + len(profiles))
        ylabels = {"effective_rank": "effective rank", "cost_of_identity": "‖A‖²_(K+γI)", "hamiltonian": "−2H/L̃"}
        for ax, key in zip(axes, plotted):
            for l, layer in enumerate(layers):
                ax.plot(steps, recording[key][:, l], "o-", label=layer)
            ax.set_title(f"{titles[key]} per layer", fontsize=9)
            ax.set_ylabel(ylabels[key])
            _step_axis(ax)
            ax.legend(fontsize=7)
        for ax, key in zip(axes[len(plotted):], profiles):
            for t, label in ((0, "first"), (-1, "last")):
                ax.plot(range(len(layers)), recording[key][t], "o-", label=f"step {steps[t]} ({label})")
            ax.set_xticks(range(len(layers)), layers, rotation=30, fontsize=7)
            ax.set_title(f"{titles[key]} over layers", fontsize=9)
            ax.set_ylabel(ylabels[key])
            ax.legend(fontsize=7)
        section.figures["representation measures"] = _png(fig)
    if "effective_rank" in recording:
        ranks = recording["effective_rank"]
        ratio = ranks[-1] / np.maximum(ranks[0], 1e-12)
        middle = list(range(1, len(layers) - 1)) or list(range(len(layers)))
        collapsed = [layers[l] for l in middle if ratio[l] < THRESHOLDS["rank_collapse"]]
        if collapsed:
            section.verdicts.append(("good", "effective rank collapsing in the middle layers: "
                                     + ", ".join(f"{layers[l]} {_change(ranks[0, l], ranks[-1, l])}"
                                                 for l in middle if layers[l] in collapsed)
                                     + " — the representation is compressed (the bottleneck of seed 002, the "
                                       "compression of seed 003)"))
        else:
            section.verdicts.append(("info", "no middle layer lost more than half of its effective rank ("
                                     + ", ".join(f"{layers[l]} ×{ratio[l]:.2f}" for l in middle) + ")"))
        section.summary.update({f"effective_rank_last[{layer}]": float(ranks[-1, l]) for l, layer in enumerate(layers)})
    if "hamiltonian" in recording:
        if residual is None:
            section.verdicts.append(("warn", "the Hamiltonian was recorded without its stationarity residual: it is "
                                             "not shown, as it can be read only at a critical point"))
        elif readable:
            spread = np.ptp(recording["hamiltonian"][-1]) / max(np.abs(recording["hamiltonian"][-1]).mean(), 1e-12)
            section.verdicts.append(("good" if spread < 0.1 else "info",
                                     f"stationarity residual r = {residual:.3g} < "
                                     f"{THRESHOLDS['stationarity_readable']:g}: the Hamiltonian can be read; it varies "
                                     f"by {spread:.2g} of its mean over the layers (0 at a critical point)"))
        else:
            section.verdicts.append(("warn", "Hamiltonian not readable: the stationarity residual is "
                                             f"r = {residual:.3g} (≥ {THRESHOLDS['stationarity_readable']:g}), the "
                                             "network is not at a critical point of C + (λ/2)‖θ‖², so its profile "
                                             "is left out of the figure (values in the table)"))
        section.summary["stationarity_residual_last"] = residual
    return section


def analyse_recording(recording: Recording) -> list[Section]:
    """Every section the recording has the measurements for and whose theory applies, in report order."""
    return _analysis(recording)[0]


def omitted_measures(recording: Recording) -> dict[str, str]:
    """{measure: why it is not in the report} for recorded measures whose theory does not apply to the run."""
    return _analysis(recording, sections=False)[1]


def _analysis(recording: Recording, sections: bool = True) -> tuple[list[Section], dict[str, str], dict[str, str]]:
    """(sections, omitted {measure: why its theory does not apply}, failed {section: why it could not be
    computed}). A section that fails on the recording (e.g. a run gone to NaN) is left out with its reason; the
    others are still made."""
    measures = recording.meta["measures"]
    omitted: dict[str, str] = {}
    chosen: list[Any] = [probe_accuracy]
    if "two_point" in measures and "pairs" in recording:
        reason = two_point_applies(recording)
        if reason is None:
            chosen.append(two_point)
        else:
            omitted["two_point"] = reason
    if "ntk" in measures and "ntk" in recording:
        chosen.append(ntk)
    if "elasticity" in measures and "labels" in recording:
        chosen.append(elasticity)
    if any(m in measures for m in ("rank", "coi", "hamiltonian")):
        chosen.append(representations)
    made: list[Section] = []
    failed: dict[str, str] = {}
    for make in chosen if sections else []:
        try:
            made.append(make(recording))
        except Exception as error:  # noqa: BLE001 - one section's failure leaves the rest of the report
            reason = str(error).splitlines()[0] if str(error) else ""
            failed[make.__name__] = f"could not be computed from this recording ({type(error).__name__}: {reason})"
    return made, omitted, failed


@dataclass
class Analysis:
    """A recording read through the theories, for scripts (as ``weightwatcher`` returns a details frame and a
    summary): ``tables`` {name: DataFrame} (one row per step, pair or NTK step), ``summary`` (flat scalars,
    verdicts and omitted measures), and the report's ``sections``."""

    tables: dict[str, pandas.DataFrame]
    summary: dict[str, Any]
    sections: list[Section]
    verdicts: list[tuple[str, str, str]]
    """(section key, level, text), the run's own first."""
    omitted: dict[str, str]
    """{measure: why its theory does not apply to the run}"""
    failed: dict[str, str] = field(default_factory=dict)
    """{section: why it could not be computed from the recording}"""
    frame: Any = None
    """the tidy (run, step, layer, metric, value) frame of the recording (:func:`tidy`)"""


PER_LAYER = {"effective_rank": "effective_rank", "nc_within_between": "nc1", "nc_etf_distance": "nc_etf_distance",
             "cost_of_identity": "cost_of_identity", "hamiltonian": "hamiltonian", "momentum_norm": "momentum_norm"}
"""Recording arrays (T, L) and their metric names in the tidy frame."""


def tidy(recording: Recording, run: str | None = None) -> pandas.DataFrame:
    """The recording as a tidy frame: one row per (run, step, layer, metric) with its ``value``.

    Per layer: effective_rank, nc1, nc_etf_distance (and cost_of_identity, hamiltonian, momentum_norm when
    recorded). For the whole model (layer ""): loss (the training loss passed to the Monitor), weight_change
    ‖θ_t − θ₀‖/‖θ₀‖, probe_accuracy, probe_cross_entropy, probe_squared_error, ntk_alignment (at the NTK's steps),
    stationarity. Per input pair, at the pair layer: u[i,j], v[i,j], w[i,j] of the two-point theory."""
    import pandas

    run = recording.meta["name"] if run is None else run
    steps = recording.steps
    layers = recording.meta["layers"]
    rows: list[tuple[str, int, str, str, float]] = []

    def add(layer: str, metric: str, values: Any, at: Any = steps) -> None:
        rows.extend((run, int(s), layer, metric, float(v)) for s, v in zip(at, np.asarray(values, dtype=float)))

    for key, metric in PER_LAYER.items():
        if key in recording:
            for l, layer in enumerate(layers):
                add(layer, metric, recording[key][:, l])
    for key in ("loss", "weight_change", "stationarity"):
        if key in recording:
            add("", key, recording[key])
    if "labels" in recording:
        outputs = torch.as_tensor(recording["outputs"], dtype=torch.float64)
        labels = torch.as_tensor(recording["labels"])
        add("", "probe_accuracy", (outputs.argmax(-1) == labels).double().mean(-1).numpy())
        add("", "probe_cross_entropy",
            [float(torch.nn.functional.cross_entropy(o, labels)) for o in outputs])
        onehot = torch.nn.functional.one_hot(labels, outputs.shape[-1]).double()
        add("", "probe_squared_error", (0.5 * (outputs - onehot).pow(2).sum(-1).mean(-1)).numpy())
        if "ntk" in recording:
            targets = np.eye(outputs.shape[-1])[recording["labels"][recording["ntk_index"]]]
            add("", "ntk_alignment", [centred_alignment(g, targets) if np.isfinite(g).all() else math.nan
                                      for g in recording["ntk"]], recording["ntk_steps"])
    if "pairs" in recording:
        for p, (i, j) in enumerate(recording["pairs"]):
            for name in ("u", "v", "w"):
                add(recording.meta["pair_layer"], f"{name}[{i},{j}]", recording[f"pair_{name}"][:, p])
    return pandas.DataFrame(rows, columns=["run", "step", "layer", "metric", "value"])


@dataclass
class Sweep:
    """Several recordings analysed together (a sweep): ``runs`` their :class:`Analysis`, ``frame`` the tidy
    (run, step, layer, metric, value) frame of them all (:func:`tidy`) and ``summary`` one row per run (its
    summary's scalars: regime, coverage, end values)."""

    runs: list[Analysis]
    frame: pandas.DataFrame
    summary: pandas.DataFrame


def analyze(recording: Any, *, figures: bool = False) -> Any:
    """Analyse a recording (a :class:`Recording` or the .npz path of one) into an :class:`Analysis`; several (a
    list of them, or a glob pattern such as ``"runs/monitor/*.npz"``) into a :class:`Sweep` with their tidy frame.
    See :func:`analyze_one`.

    Example: a Monitor on a small classifier, then its analysis.

        >>> import tempfile, torch, repdyn
        >>> from torch import nn
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> _ = torch.manual_seed(0)
        >>> x = torch.randn(64, 4)
        >>> loader = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=16)
        >>> model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> monitor = repdyn.Monitor(model, layers=["1"], probe_inputs=x[:16], labels=(x[:16, 0] > 0).long(),
        ...                          total_steps=8, loss_kind="cross_entropy")
        >>> batches = [batch for epoch in range(2) for batch in loader]
        >>> for step, (xb, yb) in enumerate(batches):
        ...     loss = nn.functional.cross_entropy(model(xb), yb)
        ...     _ = monitor.step(step, loss)
        ...     optimizer.zero_grad()
        ...     loss.backward()
        ...     optimizer.step()
        >>> analysis = repdyn.analyze(monitor.save(tempfile.mkdtemp()))
        >>> analysis.summary["last_step"], list(analysis.frame.columns)
        (8, ['run', 'step', 'layer', 'metric', 'value'])
    """
    import glob

    if isinstance(recording, str) and any(c in recording for c in "*?["):
        recording = sorted(glob.glob(recording))
        if not recording:
            raise ValueError("no recording matches the pattern")
    if isinstance(recording, list | tuple):
        import pandas

        runs = [analyze_one(r, figures=figures) for r in recording]
        names = [a.summary["name"] for a in runs]
        labels = names if len(set(names)) == len(names) else [f"{n} #{i + 1}" for i, n in enumerate(names)]
        frame = pandas.concat([a.frame.assign(run=label) for label, a in zip(labels, runs)], ignore_index=True)
        summary = pandas.DataFrame([{"run": label, **{k: v for k, v in a.summary.items()
                                                       if isinstance(v, str | int | float | bool) or v is None}}
                                    for label, a in zip(labels, runs)])
        return Sweep(runs=runs, frame=frame, summary=summary)
    return analyze_one(recording, figures=figures)


def analyze_one(recording: Recording | str | os.PathLike[str], *, figures: bool = False) -> Analysis:
    """Analyse a recording (or the .npz path of one): DataFrames per section and a summary dict.

    ``tables`` holds ``"steps"`` (:meth:`Recording.scalar_table`) and one frame per table of the report
    (``"training"``, ``"two_point"``, ``"ntk"``, ``"elasticity"``, ``"representations"``, as recorded).
    ``summary`` holds the run (name, model, total_steps, last_step, coverage, loss_kind), each section's numbers
    (first/last probe accuracy and loss, NTK alignment and change, NC1, effective rank per layer, stationarity
    residual, ...), the headline ``"regime"`` (lazy / rich / mixed, :func:`regime`), ``"verdicts"`` (list of
    dicts: section, level, text), ``"omitted"`` ({measure: why its theory does not apply}) and ``"failed"``
    ({section: why it could not be computed}). ``figures=True`` also renders the report's PNG figures into
    ``sections`` (the report does; the tables and summary are the same without them)."""
    import pandas

    if not isinstance(recording, Recording):
        recording = load_recording(recording)
    _RENDER[0] = figures
    try:
        sections, omitted, failed = _analysis(recording)
    finally:
        _RENDER[0] = True
    tables = {"steps": recording.scalar_table()}
    for section in sections:
        for caption, rows in section.tables:
            name = section.key if len(section.tables) == 1 else f"{section.key}.{caption}"
            tables[name] = pandas.DataFrame(rows)
    meta = recording.meta
    verdicts = [("run", level, text) for level, text in run_verdicts(recording)]
    verdicts += [("run", "warn", f"the {name} section {reason}") for name, reason in failed.items()]
    verdicts += [(s.key, level, text) for s in sections for level, text in s.verdicts]
    summary: dict[str, Any] = {"name": meta["name"], "model": meta.get("model"), "loss_kind": meta.get("loss_kind"),
                               "total_steps": meta.get("total_steps"), "last_step": int(recording.steps[-1]),
                               "recorded_steps": len(recording.steps), "coverage": meta.get("coverage")}
    for section in sections:
        summary.update(section.summary)
    headline, readings = regime(recording, summary.get("ntk_change"))
    summary.update(regime=headline, weight_change=weight_change(recording), u_change=u_change(recording))
    if headline != "unknown":
        meaning = {"lazy": "the kernel (lazy) regime: the network trains close to its linearisation at "
                           "initialisation",
                   "rich": "the rich (feature-learning) regime: training rebuilt the kernel and the representations",
                   "mixed": "the indicators disagree or sit between the thresholds: neither purely lazy nor rich"}
        verdicts.insert(0, ("run", "info", f"Regime: {headline} — {meaning[headline]}. " + "; ".join(readings)))
    summary["verdicts"] = [{"section": k, "level": level, "text": text} for k, level, text in verdicts]
    summary["omitted"] = dict(omitted)
    summary["failed"] = dict(failed)
    return Analysis(tables=tables, summary=summary, sections=sections, verdicts=verdicts, omitted=omitted,
                    failed=failed, frame=tidy(recording))


def compare(runs: list[tuple[str, Recording, Analysis]], *, figures: bool = True) -> Section:
    """Several runs overlaid (a learning-rate sweep, lazy against rich): one row per run and their curves of
    probe accuracy and loss, kernel-label alignment, NC1 and effective rank at the last layer, on one step axis."""
    section = Section("comparison", f"Comparison of {len(runs)} runs", "all recordings",
                      "Each run's curves on one step axis; the table gives each run's coverage and end values. "
                      "Steps are each run's own (compare runs of the same length, or read the coverage).")
    rows = []
    for label, _, analysis in runs:
        s = analysis.summary
        warnings = [text for key, level, text in analysis.verdicts if level == "warn"]
        rows.append({"run": label, "regime": s.get("regime"), "model": s["model"], "loss": s["loss_kind"],
                     "total steps": s["total_steps"],
                     "coverage": s["coverage"], "probe accuracy (last)": s.get("probe_accuracy_last"),
                     "probe loss (last)": s.get("probe_loss_last"),
                     "NTK alignment (first)": s.get("ntk_alignment_first"),
                     "NTK alignment (last)": s.get("ntk_alignment_last"), "NTK change": s.get("ntk_change"),
                     "weight movement": s.get("weight_change"), "u change": s.get("u_change"),
                     "NC1 (last)": s.get("nc1_last"), "warnings": len(warnings)})
    section.tables.append(("runs", rows))
    panels: list[tuple[str, str, Any]] = [
        ("probe accuracy", "probe accuracy", lambda a, r: (a.tables["training"]["step"],
                                                           a.tables["training"]["probe accuracy"])),
        ("probe loss", "probe loss", lambda a, r: (a.tables["training"]["step"],
                                                               a.tables["training"][a.summary["probe_loss"]])),
        ("kernel-label alignment", "centred alignment", lambda a, r: (a.tables["ntk"]["step"],
                                                                      a.tables["ntk"]["kernel alignment"])),
        ("NC1 at the last layer", "NC1", lambda a, r: (r.steps, r["nc_within_between"][:, -1])),
        ("effective rank at the last layer", "effective rank", lambda a, r: (r.steps, r["effective_rank"][:, -1])),
    ]
    drawn = []
    for title, ylabel, get in panels:
        curves = []
        for label, recording, analysis in runs:
            try:
                curves.append((label, *get(analysis, recording)))
            except KeyError:
                continue
        if curves:
            drawn.append((title, ylabel, curves))
    if drawn and figures:
        fig, axes = _figure(len(drawn))
        for ax, (title, ylabel, curves) in zip(axes, drawn):
            for c, (label, x, y) in enumerate(curves):
                ax.plot(np.asarray(x), np.asarray(y), "o-", ms=3, color=f"C{c}", label=label)
            if ylabel in ("probe loss", "NC1"):
                _log_y(ax, np.concatenate([np.asarray(y, dtype=float) for _, _, y in curves]), ylabel)
            else:
                ax.set_ylabel(ylabel)
            ax.set_title(title, fontsize=9)
            _step_axis(ax)
            ax.legend(fontsize=7)
        section.figures["runs overlaid"] = _png(fig)
    incomplete = [row["run"] for row in rows if row["coverage"] is not None and row["coverage"] < 1]
    if incomplete:
        section.verdicts.append(("warn", f"Recording ended early in {', '.join(incomplete)}: their curves stop before "
                                         "the end of training"))
    kinds = {row["loss"] for row in rows}
    if len(kinds) > 1:
        section.verdicts.append(("warn", f"the runs train with different losses ({', '.join(map(str, kinds))}): their "
                                         "probe losses are not comparable"))
    return section
