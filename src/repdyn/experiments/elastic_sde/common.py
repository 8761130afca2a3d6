"""Shared pieces of the seed-004 experiments: batch-1 SGD logs of LeNet ensembles, the estimates of spec 004 §3.7
(class-mean logits, Â/B̂ of the l- and L-model, α̂/β̂ by the one estimator in ``theory.elasticity_estimators``) and
the figures built from them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from repdyn.framework.base import RunResult
from repdyn.framework.claims import Precondition, at_most
from repdyn.framework.config import param
from repdyn.nn.batch1_sgd import train_batch1_sgd
from repdyn.nn.models.lenet import lenet_ensemble
from repdyn.theory import elasticity_estimators as ee

NUMBER = "004"
DTYPES = {"float32": torch.float32, "float64": torch.float64}
LN3 = math.log(3.0)


def val_chunk_param():
    """The ``val_chunk`` config field: validation images per forward chunk (memory only)."""
    return param(64, ge=1, help="validation images per forward chunk (memory only: the peak is about trials × "
                                "val_chunk images' activations; 512 with 100 trials in float64 needs 16–24 GB)")


def train_log(x_train: np.ndarray, y_train: np.ndarray, x_val: np.ndarray, y_val: np.ndarray, *, n_trials: int,
               steps: int, lr: float, val_every: int, dtype: str, seed: int, device: str,
              untrained: bool = False, val_chunk: int = 512) -> RunResult:
    """n_trials LeNets trained together by batch-1 SGD; the log of spec 004 §3.5 as arrays."""
    tdtype = DTYPES[dtype]
    gen = torch.Generator().manual_seed(seed)
    K = int(max(y_train.max(), y_val.max())) + 1
    model = lenet_ensemble(n_trials, x_train.shape[1], K, gen, dtype=tdtype, device=device)

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=tdtype if a.dtype.kind == "f" else torch.long, device=device)

    # Batch-1 steps are many tiny kernels: intra-op threads only add synchronisation (and spin badly on a busy
    # machine, 30× slower measured), so the loop runs single-threaded; parallelism comes from separate runs.
    if untrained:
        return _untrained_log(model, tensor(x_train), tensor(y_train), tensor(x_val), tensor(y_val), steps=steps,
                              val_every=val_every, generator=gen, chunk=val_chunk)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        log = train_batch1_sgd(model, tensor(x_train), tensor(y_train), tensor(x_val), tensor(y_val),
                               steps=steps, lr=lr, generator=gen, val_every=val_every, val_chunk=val_chunk)
    finally:
        torch.set_num_threads(threads)
    every, validation = log.trajectory, log.validation  # stored trial-major: (R, T, ...)
    return {"label": every["label"].T.astype(np.int8), "logits": every["logits"].transpose(1, 0, 2).astype(np.float32),
            "train_loss": every["loss"].T.astype(np.float32), "val_steps": validation.steps,
            "val_loss": validation["loss"], "val_acc": validation["accuracy"]}


@torch.no_grad()
def _untrained_log(model, x_train: torch.Tensor, y_train: torch.Tensor, x_val: torch.Tensor, y_val: torch.Tensor, *,
                   steps: int, val_every: int, generator: torch.Generator, chunk: int) -> RunResult:
    """The log of the untrained network (the negative control): the same initialisation and the same draws of
    examples as :func:`train_log`, but no update, so the logits of each drawn example are those at t = 0. The
    images go through in chunks of ``chunk`` (the memory of R trials × all images would not fit at paper scale)."""
    R, n = model.k, len(x_train)
    order = torch.randint(0, n, (R, steps), generator=generator).to(x_train.device)
    model.eval()

    def logits_of(x: torch.Tensor) -> torch.Tensor:                              # (R, n, K)
        return torch.cat([model(x[i:i + chunk]) for i in range(0, len(x), chunk)], dim=1)

    every = logits_of(x_train)
    logits = torch.gather(every, 1, order[..., None].expand(R, steps, every.shape[-1]))
    labels = y_train[order]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                             reduction="none").reshape(R, steps)
    val = logits_of(x_val)
    val_loss = torch.nn.functional.cross_entropy(val.transpose(1, 2), y_val.expand(R, -1), reduction="none").mean(1)
    val_acc = (val.argmax(-1) == y_val).to(val.dtype).mean(1)
    val_steps = np.arange(0, steps + 1, val_every)
    return {"label": labels.cpu().numpy().astype(np.int8), "logits": logits.cpu().numpy().astype(np.float32),
            "train_loss": loss.cpu().numpy().astype(np.float32), "val_steps": val_steps,
            "val_loss": np.tile(val_loss.cpu().numpy(), (len(val_steps), 1)),
            "val_acc": np.tile(val_acc.cpu().numpy(), (len(val_steps), 1))}


def pooled(results: Mapping[str, RunResult], prefix: str = "") -> dict[str, np.ndarray]:
    runs = [r for label, r in sorted(results.items()) if label.startswith(prefix)]
    return {key: np.concatenate([r[key] for r in runs], axis=0 if key in ("label", "logits") else 1)
            for key in ("label", "logits", "val_loss", "val_acc")} | {"val_steps": runs[0]["val_steps"]}


def split_replicates(res: RunResult, seeds: int, trials: int) -> list[RunResult]:
    """A run whose ensemble holds ``seeds`` independent replicates of ``trials`` trials each (trained together so
    that the per-step overhead is paid once), split into one log per replicate: trials are axis 0 of the
    per-iteration logs and axis 1 of the validation logs."""
    def part(i: int) -> RunResult:
        cut = slice(i * trials, (i + 1) * trials)
        return {key: (value[cut] if key in ("label", "logits", "train_loss") else value[:, cut]
                      if key in ("val_loss", "val_acc") else value) for key, value in res.items()}
    return [part(i) for i in range(seeds)]


@dataclass
class Estimates:
    """Class-mean logits and the l-model ("iso") and L-model ("logit") estimates."""

    xbar: np.ndarray
    A: dict[str, np.ndarray]
    B: dict[str, np.ndarray]
    alpha: dict[str, np.ndarray]
    beta: dict[str, np.ndarray]
    empty_cells: int


def estimate(labels: np.ndarray, logits: np.ndarray, window: int) -> Estimates:
    """Spec 004 §3.7 steps 1–3: X̄[t,k,:], Â/B̂ for both models (L-model only for K = 3), α̂/β̂ by SG."""
    K = logits.shape[-1]
    raw = ee.class_mean_logits(labels, logits, K)
    xbar = ee.fill_empty_cells(raw)
    A, B = {}, {}
    A["iso"], B["iso"] = ee.integrated_strengths_isotropic(xbar)
    if K == 3:
        A["logit"], B["logit"] = ee.integrated_strengths_logit(xbar)
    alpha = {k: ee.strengths_from_integrated(v, window) for k, v in A.items()}
    beta = {k: ee.strengths_from_integrated(v, window) for k, v in B.items()}
    return Estimates(xbar, A, B, alpha, beta, int(np.isnan(raw[..., 0]).sum()))


TERMINAL_PART = 20
"""The terminal phase is judged over the last 1/TERMINAL_PART of the iterations (5 %, as the h3 claims' ends)."""


def terminal_train_loss(train_loss: np.ndarray) -> float:
    """Trial-mean training loss of the drawn samples over the last 5 % of iterations (``train_loss`` (R, T))."""
    loss = np.asarray(train_loss, dtype=float)
    return float(loss[:, -max(loss.shape[1] // TERMINAL_PART, 1):].mean())


TERMINAL = Precondition(
    quantity="terminal_train_loss", expectation=at_most(0.01),
    state="the terminal phase: (near) zero training loss",
    reason="our choice: the figures these claims read (Figs. 1, 3, 5, D.1, D.8–D.10) show networks trained to the "
    "end of the amplification stage, where the per-sample cross-entropy of the drawn images is ≈ 0; 0.01 (under 1 % "
    "of the initial ln 3) is a network that gives every drawn image ≥ 0.99 of its probability on average (set "
    "after the quick runs' ≈ 3·10⁻⁴ had been seen)")


ONSET_DROP = 0.05
"""Relative drop of the training loss below its initial ln K that marks "the losses begin to drop" (App. D.2)."""


def amplification_start(train_loss: np.ndarray, window: int, n_classes: int = 3) -> int:
    """First iteration of the amplification stage. App. D.2: after the de-randomization stage, "the losses begin to
    drop at a relatively fast speed" (around iteration 1200 on GeoMNIST, Fig. D.10). The beginning of that drop is
    where the trial-mean training loss, averaged over ``window`` iterations, first falls ONSET_DROP = 5 % below its
    initial value ln K (far outside the plateau's noise: 10 trials × ω = 101 iterations give a standard error of
    ≈ 0.003). Without such a drop (no learning) the second half of the run."""
    loss = np.asarray(train_loss, dtype=float).mean(axis=0)
    w = max(min(int(window), len(loss)), 1)
    smooth = np.convolve(loss, np.ones(w) / w, mode="valid")           # full windows only: no zero padding
    below = np.flatnonzero(smooth < (1 - ONSET_DROP) * math.log(n_classes))
    return int(below[0]) + w // 2 if below.size else len(loss) // 2


STAGE_PARTS = 10
"""Parts of the amplification stage over which α̂ − β̂ is averaged before the dominance is counted."""


def shape_checks(est: Estimates, model: str, window: int, start: int) -> dict[str, float]:
    """★H3 measurements on one estimation model, decided before any run:

    frac_alpha_gt_beta: the amplification stage [start, T − ω/2) cut into STAGE_PARTS equal parts, the fraction of
    parts where the mean of α̂ − β̂ is > 0 (the paper's "β(t) is dominated by α(t)", read off smoothed curves; the
    de-randomization plateau, where both are ≈ 0, is not part of it). Pointwise, late in the stage α̂ − β̂ is
    smaller than the Savitzky–Golay noise, so a pointwise count measures that noise.
    A_end, B_end: Â, B̂ over the last 5 % of iterations; B_drop: B_end − B̂ over the first 5 % (the change over
    training: B̂(0) = 0 is measured against the single-iteration class means X̄(0), whose noise offsets the whole
    curve, so B_end of an untrained network is that noise, ±1 at 8–16 trials).
    peak_contrast: (α̂ at its peak − α̂ at the start and at the end, the smaller) / the fluctuation of α̂ over
    the last 20 %: a rise-then-fall of α̂ ("an initial increasing stage and a second stage converging to the
    vicinity around zero") that stands out of its own noise. The peak is searched away from the first and
    last half window, where the Savitzky–Golay filter extrapolates instead of differentiating data."""
    T = len(est.xbar)
    a, b = est.alpha[model], est.beta[model]
    half = ee.odd_window(window, T) // 2
    stage = slice(min(start, T - half - 1), T - half)
    tail = slice(T - max(T // 20, 1), T)
    head = slice(0, max(T // 20, 1))
    peak, contrast = peak_contrast(a, window)
    parts = np.array_split((a - b)[stage], STAGE_PARTS)
    return {"frac_alpha_gt_beta": float(np.mean([part.mean() > 0 for part in parts])),
            "A_end": float(np.nanmean(est.A[model][tail])), "B_end": float(np.nanmean(est.B[model][tail])),
            "B_drop": float(np.nanmean(est.B[model][tail]) - np.nanmean(est.B[model][head])),
            "peak_frac": peak / T, "peak_contrast": contrast, "stage_start": start / T}


def peak_contrast(a: np.ndarray, window: int) -> tuple[int, float]:
    """The interior peak of α̂ (estimated with Savitzky–Golay window ``window``) and its contrast: (α̂ at the peak −
    the larger of α̂'s means over the first 5 % and the last 10 %) / the standard deviation of α̂ over the last
    20 %, all away from the first and last half window (where the filter extrapolates)."""
    T = len(a)
    half = ee.odd_window(window, T) // 2
    peak = int(np.argmax(a[half:T - half])) + half
    first = float(np.mean(a[half:half + max(T // 20, 1)]))
    last = float(np.mean(a[T - half - max(T // 10, 1):T - half]))
    noise = float(np.std(a[T - half - max(T // 5, 2):T - half])) or float("inf")
    return peak, (float(a[peak]) - max(first, last)) / noise


def plot_strengths(est: Estimates, title: str) -> Figure:
    """Fig. 3: rows l-model / L-model, columns (Â, B̂) and (α̂, β̂)."""
    models = list(est.A)
    fig = Figure(figsize=(10, 3.2 * len(models)))
    t = np.arange(len(est.xbar))
    for i, model in enumerate(models):
        name = "l-model" if model == "iso" else "L-model"
        ax = fig.add_subplot(len(models), 2, 2 * i + 1)
        ax.plot(t, est.A[model], label="Â(t)")
        ax.plot(t, est.B[model], label="B̂(t)")
        ax.axhline(0, color="gray", lw=0.5)
        ax.set(title=f"{title}: {name} integrated strengths", xlabel="iteration t")
        ax.legend(fontsize=8)
        ax = fig.add_subplot(len(models), 2, 2 * i + 2)
        ax.plot(t, est.alpha[model], label="α̂(t)")
        ax.plot(t, est.beta[model], label="β̂(t)")
        ax.axhline(0, color="gray", lw=0.5)
        ax.set(title=f"{title}: {name} α̂, β̂ (Savitzky–Golay)", xlabel="iteration t")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_separation(est: Estimates, labels: np.ndarray, logits: np.ndarray, pair: tuple[int, int]) -> Figure:
    """Fig. 1: class-mean logits in R³ over training, and the 1-D projection on ν of (C.24)."""
    fig = Figure(figsize=(11, 4.5))
    T, K = est.xbar.shape[:2]
    ax = fig.add_subplot(1, 2, 1, projection="3d" if K == 3 else None)
    colours = ("tab:red", "tab:blue", "tab:green")
    for k in range(K):
        coords = [est.xbar[::5, k, j] for j in range(min(K, 3))]
        ax.scatter(*coords, s=2, c=colours[k], alpha=0.4, label=f"class {k}")
    ax.set(title="class-mean logits X̄^k(t)")
    ax.legend(fontsize=7)
    nu = ee.separating_direction(est.xbar, *pair)
    ax = fig.add_subplot(1, 2, 2)
    times = np.linspace(0, T - 1, 50).astype(int)
    proj = logits @ nu                                                 # (R, T)
    for k in range(K):
        sel = labels[:, times] == k
        tt = np.broadcast_to(times, labels[:, times].shape)
        ax.scatter(proj[:, times][sel], tt[sel], s=3, color=colours[k % 3], alpha=0.5)
        ax.plot(est.xbar[:, k] @ nu, np.arange(T), color=colours[k % 3], lw=1.5, label=f"class {k} mean")
    ax.set(title=f"projection on ν (pair {pair})", xlabel="⟨ν, logit⟩", ylabel="iteration t")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


