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
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure

from repdyn.monitor.recording import Recording
from repdyn.probes.collapse import neural_collapse
from repdyn.probes.kernel_pca import kernel_pca
from repdyn.theory.effective_theory import FitError, fit_rates, fixed_point_distance
from repdyn.theory.elastic_sde import margin_alignment, pairwise_separable, separation_rate
from repdyn.theory.elasticity_estimators import (
    class_mean_logits,
    integrated_strengths_isotropic,
    strengths_from_integrated,
)

SEPARABILITY_CHECKS = 6
"""Separability (K(K−1)/2 linear programs) is checked at this many recorded steps, spread evenly, first and last
included."""


@dataclass
class Section:
    """One part of the report: a theory's measurements."""

    key: str
    title: str
    source: str
    text: str
    tables: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    figures: dict[str, bytes] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return buffer.getvalue()


def _step_axis(ax: Any) -> None:
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("training step")


def probe_accuracy(recording: Recording) -> Section:
    """Squared error, cross-entropy and accuracy of the probe set at each recorded step, from the outputs."""
    steps, outputs = recording.steps, torch.as_tensor(recording["outputs"], dtype=torch.float64)
    section = Section("training", "Training on the probe set", "recorded outputs",
                      "Squared error ½‖f(x) − onehot(y)‖², cross-entropy and accuracy of the model's outputs on the "
                      "probe inputs.")
    if "labels" not in recording:
        section.notes.append("no labels were given: only the recorded step times are shown")
        return section
    labels = torch.as_tensor(recording["labels"])
    ce = torch.stack([torch.nn.functional.cross_entropy(o, labels) for o in outputs]).numpy()
    onehot = torch.nn.functional.one_hot(labels, outputs.shape[-1]).double()
    squared = (0.5 * (outputs - onehot).pow(2).sum(-1).mean(-1)).numpy()
    accuracy = (outputs.argmax(-1) == labels).double().mean(-1).numpy()
    section.tables.append(("per step", [
        {"step": int(s), "probe squared error": float(q), "probe cross-entropy": float(c),
         "probe accuracy": float(a), "training loss": None if math.isnan(l) else float(l),
         "record seconds": float(t)}
        for s, q, c, a, l, t in zip(steps, squared, ce, accuracy, recording["loss"], recording["record_seconds"])]))
    fig = Figure(figsize=(5.5, 3.2))
    ax = fig.add_subplot()
    ax.plot(steps, squared, "^-", label="probe squared error")
    ax.plot(steps, ce, "o-", label="probe cross-entropy")
    ax.plot(steps, accuracy, "s-", label="probe accuracy")
    _step_axis(ax)
    ax.legend()
    section.figures["probe loss and accuracy"] = _png(fig)
    return section


def two_point(recording: Recording) -> Section:
    """Eq. (49) fit of 1/τ_h, 1/τ_y per pair and the Eq. (10) final distance against the measured one."""
    layer = recording.meta["pair_layer"]
    section = Section("two_point", "Two-point effective theory", "seed 000, Eq. (7), (10), (49)",
                      f"u = ‖h(x₂) − h(x₁)‖² at layer {layer}, v = ‖f(x₂) − f(x₁)‖², w = v − (f(x₂) − f(x₁))ᵀΔy "
                      "with one-hot targets; the effective rates are fitted to the whole recorded trajectory and "
                      "Eq. (10) predicts the final u from u(0), v(0), ‖Δx‖², ‖Δy‖² and τ_y/τ_h.")
    steps = recording.steps.astype(float)
    rows = []
    fig = Figure(figsize=(11, 3.2))
    axes = fig.subplots(1, 3)
    for p, (i, j) in enumerate(recording["pairs"]):
        u, v, w = (recording[k][:, p] for k in ("pair_u", "pair_v", "pair_w"))
        X, Y = float(recording["pair_X"][p]), float(recording["pair_Y"][p])
        row: dict[str, Any] = {"pair": f"{i},{j}", "‖Δx‖²": X, "‖Δy‖²": Y, "u(0)": float(u[0]),
                               "u final (measured)": float(u[-1])}
        try:
            fit = fit_rates(steps, u, v, w, X, Y)
        except (FitError, ValueError, RuntimeError) as error:
            row.update({"1/τ_h": None, "1/τ_y": None, "τ_y/τ_h": None, "u final (Eq. 10)": None,
                        "measured / predicted": None, "status": f"no fit: {error}"})
        else:
            predicted = float(fixed_point_distance(u[0], v[0], X, Y, fit.tau_ratio))
            row.update({"1/τ_h": fit.rate_h, "1/τ_y": fit.rate_y, "τ_y/τ_h": fit.tau_ratio,
                        "u final (Eq. 10)": predicted, "measured / predicted": float(u[-1]) / predicted
                        if predicted > 0 else None, "status": "fitted"})
            for ax, theory in zip(axes, (fit.theory.u, fit.theory.v, fit.theory.w)):
                ax.plot(steps, theory, "-", color=f"C{p}")
        for ax, measured, name in zip(axes, (u, v, w), ("u", "v", "w")):
            ax.plot(steps, measured, "o", color=f"C{p}", ms=3, label=f"pair {i},{j}")
            ax.set_title(name)
            _step_axis(ax)
        rows.append(row)
    axes[0].legend(fontsize=7)
    fig.suptitle("measured (dots) and Eq. (7) with the fitted rates (lines)")
    section.tables.append(("pairs", rows))
    section.figures["two-point state u, v, w"] = _png(fig)
    section.notes.append("Eq. (7) assumes gradient flow on the squared error; under cross-entropy or stochastic "
                         "batches the fitted rates are effective constants of this run, and a large "
                         "measured/predicted gap says the two-point theory does not capture this pair.")
    return section


def centred_alignment(gram: np.ndarray, targets: np.ndarray) -> float:
    """⟨HKH, HYYᵀH⟩_F / (‖HKH‖_F ‖HYYᵀH‖_F), H = I − 11ᵀ/m: centred kernel alignment with the labels."""
    m = gram.shape[0]
    h = np.eye(m) - 1.0 / m
    kc, yc = h @ gram @ h, h @ targets @ targets.T @ h
    return float((kc * yc).sum() / (np.linalg.norm(kc) * np.linalg.norm(yc)))


def ntk(recording: Recording) -> Section:
    """Kernel PCA, label projection on the top eigenvectors and kernel alignment of the NTK over training."""
    index = recording["ntk_index"]
    m = len(index)
    section = Section("ntk", "Empirical NTK: kernel PCA and alignment", "seed 003 §5.1–5.2, Fig. 9; spec 003 §2.11",
                      f"The empirical NTK (trace over outputs) on {m} probe inputs (taken in turn from each class). "
                      "The label projection "
                      "is the share of the centred one-hot label matrix's squared norm on each eigenvector "
                      "(Σ_c (v_r·y_c)²/‖Y‖²), the multi-class form of ω_r² of spec 003 §2.11.")
    labels = recording["labels"][index]
    classes = recording["outputs"].shape[-1]
    targets = np.eye(classes)[labels]
    centred = targets - targets.mean(0)
    rows, shares, spectra = [], [], []
    top = min(classes, m)
    for step, gram in zip(recording["ntk_steps"], recording["ntk"]):
        pca = kernel_pca(torch.as_tensor(gram))
        vectors = pca.eigenvectors.numpy()
        share = ((vectors.T @ centred) ** 2).sum(1) / (centred**2).sum()
        values = pca.eigenvalues.numpy()
        shares.append(share)
        spectra.append(values / values.sum())
        rows.append({"step": int(step), "trace / m": float(np.trace(gram) / m),
                     "top eigenvalue share": float(values[0] / values.sum()),
                     f"label share on top {top} modes": float(share[:top].sum()),
                     "kernel alignment": centred_alignment(gram, targets)})
    section.tables.append(("per NTK step", rows))
    fig = Figure(figsize=(11, 3.2))
    ax1, ax2, ax3 = fig.subplots(1, 3)
    ax1.plot([r["step"] for r in rows], [r["kernel alignment"] for r in rows], "o-")
    ax1.set_title("centred kernel alignment with labels")
    _step_axis(ax1)
    ranks = np.arange(1, min(20, m) + 1)
    for idx, label in ((0, "first"), (-1, "last")):
        ax2.plot(ranks, shares[idx][: len(ranks)], "o-", label=f"step {rows[idx]['step']} ({label})")
        ax3.semilogy(ranks, spectra[idx][: len(ranks)], "o-", label=f"step {rows[idx]['step']}")
    ax2.set_title("label share on eigenvector r")
    ax2.set_xlabel("r")
    ax2.legend(fontsize=7)
    ax3.set_title("normalised NTK eigenvalues")
    ax3.set_xlabel("r")
    section.figures["NTK alignment and kernel PCA"] = _png(fig)
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
    alpha, beta = (strengths_from_integrated(s, 3, times) if len(times) > 2 else np.full_like(s, np.nan)
                   for s in (a_hat, b_hat))
    gamma = separation_rate(alpha, beta, classes)
    rows = []
    nc1 = []
    counts = np.bincount(labels, minlength=classes)
    size = int(counts.min())
    checked = set(np.round(np.linspace(0, len(steps) - 1, min(SEPARABILITY_CHECKS, len(steps)))).astype(int))
    for t, step in enumerate(steps):
        grouped = [outputs[t, labels == k][:size] for k in range(classes)]
        collapse = neural_collapse(torch.as_tensor(outputs[t]), torch.as_tensor(labels))
        nc1.append(collapse.within_between)
        rows.append({"step": int(step), "Â": float(a_hat[t]), "B̂": float(b_hat[t]), "α̂": float(alpha[t]),
                     "β̂": float(beta[t]), "γ̂": float(gamma[t]),
                     "separable": pairwise_separable(np.stack(grouped)) if t in checked else None,
                     "NC1 (logits)": collapse.within_between, "ETF max cos error": collapse.etf_max_cos_error,
                     "class-mean norm CV": collapse.mean_norm_cv,
                     "margin alignment": float(np.mean(margin_alignment(xbar[t])))})
    section.tables.append(("per step", rows))
    fig = Figure(figsize=(11, 3.2))
    ax1, ax2, ax3 = fig.subplots(1, 3)
    ax1.plot(steps, a_hat, "o-", label="Â")
    ax1.plot(steps, b_hat, "s-", label="B̂")
    ax1.set_title("integrated strengths")
    ax2.plot(steps, alpha, "o-", label="α̂")
    ax2.plot(steps, beta, "s-", label="β̂")
    ax2.set_title("strengths (step derivatives)")
    ax3.semilogy(steps, nc1, "o-", label="logits")
    if "nc_within_between" in recording:
        for l, layer in enumerate(recording.meta["layers"]):
            ax3.semilogy(steps, recording["nc_within_between"][:, l], "s-", label=layer)
    ax3.set_title("NC1 = Tr(Σ_W Σ_B⁺)/C")
    for ax in (ax1, ax2, ax3):
        _step_axis(ax)
        ax.legend(fontsize=7)
    section.figures["elasticity strengths and neural collapse"] = _png(fig)
    if len(times) <= 2:
        section.notes.append("α̂, β̂ need at least 3 recorded steps")
    if counts.max() > size:
        section.notes.append(f"separability uses the first {size} probe inputs of each class (the smallest "
                             "class size), as Definition C.1 is checked on equal-sized classes")
    return section


def representations(recording: Recording) -> Section:
    """Effective rank per layer over training, and the Cost of Identity and Hamiltonian profiles when recorded."""
    steps, layers = recording.steps, recording.meta["layers"]
    section = Section("representations", "Representations: effective rank, Cost of Identity, Hamiltonian",
                      "seed 002 §2.2–2.4, Eq. (1), Prop. 1; spec 002 §3.5–3.6, §3.12–3.13",
                      "Effective rank exp(H(s/Σs)) of each centred layer representation of the probe set; the "
                      "γ-stable Cost of Identity ‖A‖²_(K+γI) (γ = γ₀ λ_max(K), spec 002 §7 P5(c)) and the rescaled "
                      "Hamiltonian −2H/L̃ = 2⟨B, A⟩ − ‖Bσ(A)ᵀ‖² with momenta B = −(1/λ)∂C/∂A per layer. Along the "
                      "residual stream of a Leaky ResNet the Hamiltonian is constant over layers at a critical point "
                      "and the minimal COI approaches the bottleneck rank k* from above (seed 002).")
    series = [k for k in ("effective_rank", "cost_of_identity", "hamiltonian", "momentum_norm") if k in recording]
    rows = [{"step": int(s), **{f"{k.replace('_', ' ')} [{layer}]": float(recording[k][t, l])
                                for k in series for l, layer in enumerate(layers)}} for t, s in enumerate(steps)]
    section.tables.append(("per step", rows))
    plotted = [k for k in series if k != "momentum_norm"]
    profiles = [k for k in ("cost_of_identity", "hamiltonian") if k in recording]
    if not plotted:
        return section
    fig = Figure(figsize=(11, 3.2))
    axes = np.atleast_1d(fig.subplots(1, len(plotted) + len(profiles)))
    for ax, key in zip(axes, plotted):
        for l, layer in enumerate(layers):
            ax.plot(steps, recording[key][:, l], "o-", label=layer)
        ax.set_title(key.replace("_", " "))
        _step_axis(ax)
        ax.legend(fontsize=7)
    for ax, key in zip(axes[len(plotted):], profiles):
        for t, label in ((0, "first"), (-1, "last")):
            ax.plot(range(len(layers)), recording[key][t], "o-", label=f"step {steps[t]} ({label})")
        ax.set_xticks(range(len(layers)), layers, rotation=30, fontsize=7)
        ax.set_title(f"{key.replace('_', ' ')} profile over layers")
        ax.legend(fontsize=7)
    section.figures["representation measures"] = _png(fig)
    return section


def analyse_recording(recording: Recording) -> list[Section]:
    """Every section the recording has the measurements for, in report order."""
    measures = recording.meta["measures"]
    sections = [probe_accuracy(recording)]
    if "two_point" in measures and "pairs" in recording:
        sections.append(two_point(recording))
    if "ntk" in measures and "ntk" in recording:
        sections.append(ntk(recording))
    if "elasticity" in measures and "labels" in recording:
        sections.append(elasticity(recording))
    if any(m in measures for m in ("rank", "coi", "hamiltonian")):
        sections.append(representations(recording))
    return sections
