"""Shared helpers of the seed-003 experiments: data + init + gradient flow, per-trial slopes, frozen-kernel solves.

Integrator note (quick scale): the dgrad threshold is 10⁻² instead of the reference 10⁻⁴. At h p² far below the
paper's 10¹², a single ReLU gate crossing a training point changes the gradient by dgrad ~ 100/(h p²), so 10⁻⁴ would
make the step track gate crossings instead of the smooth flow. Below dt = τ/160 the dgrad test is skipped (see
:func:`repdyn.nn.gradient_flow.train_gradient_flow`), which removes the stall of the plain rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from sklearn.svm import SVC

from repdyn.data.manifolds import informative_dimension, sample_manifold
from repdyn.framework.claims import Control, Measured, Precondition, at_least
from repdyn.nn.gradient_flow import FlowResult, train_gradient_flow
from repdyn.nn.models.hidden_layer import HiddenLayerNet, hidden_layer_output, init_hidden_layer
from repdyn.nn.trajectory import Trajectory
from repdyn.probes.kernel_pca import kernel_pca
from repdyn.theory.compression import (
    amplification,
    classification_error,
    infinite_width_ntk,
    ntk_features,
    ntk_from_features,
)
from repdyn.theory.mutual_information import knn_label_mutual_information

UNTRAINED = Control("the untrained network (max_steps = 0)", {"max_steps": 0})
"""Negative control of every claim about what training does: the same protocol with the network left at init."""

AT_INIT = Control("the untrained network (the same runs analysed with the network at initialisation)",
                  {"at_init": True})
"""The same negative control without new runs: every run also stores what the untrained network gives (its
initial NTK; the centred output α(f − f₀) = 0 at init), and ``at_init`` (an analysis-only setting) makes analyse()
read those in place of the trained network's."""

AT_INIT_HELP = ("analysis only: read the untrained network's values stored with each run in place of the trained "
                "ones (the negative control; no new runs)")


FIT_THRESHOLD = 0.8
FIT_REASON = ("the runs stop at zero hinge loss or a step cap; the test error converges well before zero loss "
              "(stripe d = 5, p = 128: 89-93 % fitted after 10⁴ steps, median test error 0.044 against 0.046 after "
              "2·10⁴ steps and 0.051 fully trained; α = 10⁻⁸: 90-93 % after 10⁴ steps), while t* is at 10 %: 80 % "
              "puts the network well into the fitting regime the paper's end state belongs to")


def t_star_precondition(quantity: str = "t_star_reached", where: str = "every run of the realisation") -> Precondition:
    """Precondition: t* (10 % of the training set fitted, Eq. 9's critical time) reached in ``where``."""
    return Precondition(quantity=quantity, expectation=at_least(1.0),
                        state=f"t* reached (10 % of the training set fitted) in {where}",
                        reason="t*, Λ* = Λ(t*) and the compression the claim is about exist only once t* is reached "
                               "(the untrained network never reaches it)")


def fit_precondition(quantity: str = "fitted_fraction", where: str = "every run of the realisation") -> Precondition:
    """Precondition: at least :data:`FIT_THRESHOLD` of the training set fitted at the end of ``where``."""
    return Precondition(quantity=quantity, expectation=at_least(FIT_THRESHOLD),
                        state=f"the fitting regime after t*: ≥ {FIT_THRESHOLD:.0%} of the training set fitted "
                              f"(y α(f − f₀) ≥ 1) at the end of {where} (1: zero hinge loss)",
                        reason=FIT_REASON)


def as_untrained(run: Mapping[str, Any]) -> dict[str, Any]:
    """A stored run as the ``at_init`` control reads it: every ``init…`` entry (the untrained network's value)
    also under the matching ``final…`` key, in place of the trained network's."""
    return {**run, **{key.replace("init", "final", 1): value for key, value in run.items() if key.startswith("init")}}


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


GIB = 2**30
MEMORY_HELP = ("memory bound in GiB of the large tensors of one run (flow buffers, Gram and test-output chunks); "
               "trials are integrated in groups and kernels computed in row chunks that fit it")


def trial_groups(n_seeds: int, p: int, h: int, memory_gb: float) -> list[slice]:
    """Groups of trials whose flow buffers fit ``memory_gb``: the integrator holds two float32 (p, h) buffers per
    trial plus a (p, h) temporary of the NTK-free evaluations, so 3 · 4 · p · h bytes a trial."""
    size = max(1, int(memory_gb * GIB // (12 * p * h)))
    return [slice(i, min(i + size, n_seeds)) for i in range(0, n_seeds, size)]


SMALL_CHUNK_GB = 2**-8
"""4 MiB: elementwise kernels (the arc-cosine NTK) chunked to this size reuse the allocator's freed blocks; chunks
of hundreds of MB are fresh mappings whose page faults cost more system time than the arithmetic (measured: 23 s
system against 11 s user for six lazy learners at p = 1024 … 4096)."""


def row_chunk(memory_gb: float, bytes_per_row: float) -> int:
    """Rows of a chunked computation that fit ``memory_gb`` given its bytes per row (at least one row)."""
    return max(1, int(memory_gb * GIB // max(bytes_per_row, 1.0)))


def by_rows(fn, a: torch.Tensor, b: torch.Tensor | None, rows: int, out_dim: int = -2) -> torch.Tensor:
    """fn(a, b) computed on chunks of ``rows`` rows of a (its dimension −2) and concatenated along the output's
    ``out_dim``: the same values with a bounded intermediate."""
    return torch.cat([fn(a[..., i:i + rows, :], b) for i in range(0, a.shape[-2], rows)], dim=out_dim)


def draw(model: str, d: int, p: int, n_seeds: int, h: int, gen: torch.Generator, device: str):
    """The training set and the initialisation of :func:`train`, in its order (x, y, net0): a run that needs the
    same realisation without training (the frozen initial kernel) draws it here."""
    x, y = sample_manifold(model, p, d, gen, batch=(n_seeds,), device=device)
    return x, y, init_hidden_layer(n_seeds, h, d, gen, device=device)


def train(model: str, d: int, p: int, n_seeds: int, h: int, alpha: float, max_dgrad: float, stop_fraction: float,
          max_steps: int, gen: torch.Generator, device: str, memory_gb: float = 16.0, history: bool = True):
    """Data (train set per trial, seeds batched) + init + gradient flow; data and init share the seed (P17).

    Data and init are drawn in float64 (the same draws as before); for α ≤ 10² the flow runs in float32 (same t* and
    Λ* to ~10⁻⁵ relative, a third less CPU time) and the trained weights come back in float64 for the evaluations.
    For α > 10² it stays in float64: F = α(f − f₀) carries float32's rounding of f ~ 1 (10⁻⁷) times α, 10⁻⁵ at
    α = 10² but 10⁻¹ (the dout threshold) at α = 10⁶. Trials
    are integrated in groups that fit ``memory_gb`` (:func:`trial_groups`); each trial's flow is independent of the
    others, so the grouping changes no number. ``history=False``: no per-step records (a
    ``FlowResult.trajectory`` without series; the same weights, t* and Λ*), for the experiments that store none."""
    x, y, net0 = draw(model, d, p, n_seeds, h, gen, device)
    parts, dtype = [], torch.float32 if alpha <= 100 else torch.float64
    for g in trial_groups(n_seeds, p, h, memory_gb):
        single = HiddenLayerNet(*(v[g].to(dtype) for v in (net0.w, net0.b, net0.beta)))
        parts.append(train_gradient_flow(single, x[g].to(dtype), y[g], alpha, d_parallel=informative_dimension(model),
                                         max_dgrad=max_dgrad, stop_fraction=stop_fraction, max_steps=max_steps,
                                         record_every=int(history)))
    return x, y, net0, _join(parts)


def _join(parts: list[FlowResult]) -> FlowResult:
    """One FlowResult of the trial groups, weights in float64; trajectories padded with each group's final state."""
    def cat(get, dim=0):
        return torch.cat([get(r) for r in parts], dim=dim)

    def nets(get):
        return HiddenLayerNet(cat(lambda r: get(r).w).double(), cat(lambda r: get(r).b).double(),
                              cat(lambda r: get(r).beta).double())

    longest = max((r.trajectory for r in parts), key=len)

    def padded(v: torch.Tensor) -> torch.Tensor:
        missing = len(longest) - v.shape[0]
        return torch.cat([v, v[-1:].expand(missing, *v.shape[1:])]) if missing else v

    series = {k: cat(lambda r, k=k: padded(r.trajectory[k]), dim=1) for k in parts[0].trajectory}
    trajectory = Trajectory(longest.steps, series, max(r.trajectory.stopped_at for r in parts))
    return FlowResult(nets(lambda r: r.net), cat(lambda r: r.f0_train), cat(lambda r: r.t), cat(lambda r: r.t_star),
                      cat(lambda r: r.lambda_star).double(), cat(lambda r: r.lambda_max).double(),
                      nets(lambda r: r.at_t_star), cat(lambda r: r.stopped), trajectory)


FIT_TOLERANCE = 1e-3
"""A training point counts as fitted when y α(f − f₀) ≥ 1 − 10⁻³: the flow runs in float32 for α ≤ 10², and a point
held at the margin by the hinge's sliding mode sits at y F = 1 to float32's rounding times α, which the float64
recomputation of :func:`fitted_fraction` may put just below 1."""


def fitted_fraction(res: FlowResult, x: torch.Tensor, y: torch.Tensor, alpha: float, memory_gb: float) -> np.ndarray:
    """Per trial, the fraction of the training set fitted at the run's end, #{y α(f − f₀) ≥ 1 − 10⁻³}/p (S,): the
    state the claims about a trained network need (1: zero hinge loss)."""
    out = alpha * (network_output(res.net, x.double(), memory_gb) - res.f0_train.double())
    return (y.double() * out >= 1 - FIT_TOLERANCE).double().mean(-1).cpu().numpy()


def finite_indicator(values: np.ndarray) -> np.ndarray:
    """1.0 where t* (or any time) is finite, else 0.0: the per-run "t* reached" of the preconditions."""
    return np.isfinite(np.asarray(values, dtype=float)).astype(float)


def min_over_runs(runs: list[Mapping[str, Any]], key: str, transform, where: str) -> Measured:
    """Per realisation, the least over ``runs`` (one per p) of transform(run[key]): a precondition quantity that
    must hold at every p; the note gives the per-p minima and medians over realisations."""
    table = np.array([transform(r[key]) for r in runs], dtype=float)  # (n_runs, n_seeds)
    return Measured(table.min(0), f"{where}: least over realisations by p {np.round(table.min(1), 3).tolist()}, "
                                  f"median {np.round(np.median(table, 1), 3).tolist()}")


def thin(trajectory: Trajectory, n: int = 400) -> dict[str, np.ndarray]:
    """At most ``n`` of the recorded steps, evenly spread, of every series but the neurons: ``history_<name>`` (S, n),
    one row per trial."""
    length = len(trajectory)
    idx = np.unique(np.linspace(0, length - 1, min(n, length)).astype(int))
    return {f"history_{k}": trajectory[k][idx].T.contiguous().cpu().numpy() for k in trajectory if k != "neurons"}


def slope(p: np.ndarray, values: np.ndarray) -> float:
    """Least-squares slope of log(values) against log(p); NaN unless every value is finite and positive (a trial
    that never reached t* fails its claim instead of being dropped)."""
    values = np.asarray(values, dtype=float)
    if not (np.isfinite(values).all() and (values > 0).all()):
        return math.nan
    return float(np.polyfit(np.log(p), np.log(values), 1)[0])


def trial_slopes(p: np.ndarray, table: np.ndarray) -> np.ndarray:
    """table (len(p), n_trials) -> one log-log slope per trial (each trial is an independent realisation at every
    p, so its slope is an independent sample of the learning-curve / amplification exponent)."""
    return np.array([slope(p, table[:, s]) for s in range(table.shape[1])])


def flow_summary(res: FlowResult, d_parallel: int, net0) -> dict[str, np.ndarray]:
    lam0 = amplification(net0.w, d_parallel)
    return {"t_star": res.t_star.cpu().numpy(), "lambda_star": res.lambda_star.cpu().numpy(),
            "lambda_max": res.lambda_max.cpu().numpy(), "lambda0": lam0.cpu().numpy(),
            "stopped": res.stopped.cpu().numpy(), "steps": res.trajectory.stopped_at}


def svm_error(gram_train: torch.Tensor, y: torch.Tensor, gram_test: torch.Tensor, y_test: torch.Tensor) -> np.ndarray:
    """Test error of the frozen-kernel hinge learner, solved directly, per trial; gram_*: (S, n, p), y: (S, p).

    The frozen-kernel hinge flow of spec 003 §2.7 runs until every margin y F ≥ 1; its explicit Euler version needs
    > 2·10⁴ iterations on the ill-conditioned Gram matrices of a trained network (condition numbers ~10¹⁸) and
    stops early otherwise, which inflates the error. The flow's zero-loss limit is the hard-margin support vector
    classifier on the same kernel (the paper's own reading of the lazy regime, §3.1: "the SVC algorithm minimizes
    the hinge loss"), solved here by libsvm with C = 10⁸ (hard margin)."""
    return kernel_svm_error(lambda s: (gram_train[s], gram_test[s]), y, y_test)


def kernel_svm_error(grams, y: torch.Tensor, y_test: torch.Tensor) -> np.ndarray:
    """:func:`svm_error` with the Gram matrices of trial s built by ``grams(s) -> (train (p, p), test (n, p))``,
    one trial at a time (memory: one trial's Gram matrices, not S of them)."""
    errors = []
    for s in range(y.shape[0]):
        train_gram, test_gram = grams(s)
        svc = SVC(C=1e8, kernel="precomputed", tol=1e-4, cache_size=50)
        svc.fit(train_gram.cpu().numpy(), y[s].cpu().numpy())
        out = torch.as_tensor(svc.decision_function(test_gram.cpu().numpy()), dtype=y_test.dtype)
        errors.append(float(classification_error(out, y_test[s].cpu())))
    return np.array(errors)


def arccos_svm_error(x: torch.Tensor, y: torch.Tensor, xt: torch.Tensor, yt: torch.Tensor,
                     memory_gb: float) -> np.ndarray:
    """Hard-margin learner on the infinite-width initial NTK (the lazy learner), Gram rows chunked to
    ``memory_gb`` (about six (rows, p) float64 temporaries), at most :data:`SMALL_CHUNK_GB` (same numbers)."""
    rows = row_chunk(min(memory_gb, SMALL_CHUNK_GB), 6 * 8 * x.shape[1])
    return kernel_svm_error(lambda s: (by_rows(infinite_width_ntk, x[s], x[s], rows),
                                       by_rows(infinite_width_ntk, xt[s], x[s], rows)), y, yt)


def nested_arccos_svm_errors(x: torch.Tensor, y: torch.Tensor, xt: torch.Tensor, yt: torch.Tensor,
                             p_values: tuple[int, ...], memory_gb: float) -> np.ndarray:
    """:func:`arccos_svm_error` on the nested training sets x[:, :p] for every p of ``p_values`` (one test set),
    (len(p_values), S): per trial the kernels of the largest p are computed once and each smaller p uses their
    leading blocks (the same entries up to the rounding of the row chunking)."""
    p_max = max(p_values)
    rows = row_chunk(min(memory_gb, SMALL_CHUNK_GB), 6 * 8 * p_max)
    errors = np.empty((len(p_values), y.shape[0]))
    for s in range(y.shape[0]):
        train = by_rows(infinite_width_ntk, x[s, :p_max], x[s, :p_max], rows)
        test = by_rows(infinite_width_ntk, xt[s], x[s, :p_max], rows)
        for i, p in enumerate(p_values):
            blocks = (train[:p, :p], test[:, :p])
            errors[i, s] = kernel_svm_error(lambda _, b=blocks: b, y[s:s + 1, :p], yt[s:s + 1])[0]
    return errors


def trained_ntk_svm_error(net: HiddenLayerNet, xk: torch.Tensor, yk: torch.Tensor, xt: torch.Tensor,
                          yt: torch.Tensor, memory_gb: float) -> np.ndarray:
    """Hard-margin learner on the frozen NTK of ``net`` (trial s: kernel set xk[s], test set xt[s]), rows chunked to
    ``memory_gb`` (three (rows, h) and three (rows, p) float64 temporaries besides the kernel set's own), at most
    :data:`SMALL_CHUNK_GB`."""
    rows = ntk_rows(net.w.shape[1], xk.shape[1], memory_gb)
    return kernel_svm_error(lambda s: (trial_ntk(net, s, xk[s], xk[s], rows), trial_ntk(net, s, xt[s], xk[s], rows)),
                            yk, yt)


def ntk_rows(h: int, p: int, memory_gb: float) -> int:
    """Rows of a chunked :func:`trial_ntk` against p columns: three (rows, h) and three (rows, p) float64
    temporaries besides the columns' own three (p, h), at most :data:`SMALL_CHUNK_GB` a chunk."""
    return row_chunk(min(max(memory_gb - 3 * 8 * p * h / GIB, memory_gb / 4), SMALL_CHUNK_GB), 8 * 3 * (h + p))


def trial_ntk(net: HiddenLayerNet, s: int, x1: torch.Tensor, x2: torch.Tensor, rows: int,
              last_layer_only: bool = False) -> torch.Tensor:
    """The NTK (or the last-layer kernel) of trial s of ``net`` between x1 (n1, d) and x2 (n2, d), built ``rows``
    rows of x1 at a time against x2's factors computed once (the same entries as one call, to the rounding of the
    matrix products)."""
    def features(x):
        return ntk_features(net.w[s], net.b[s], net.beta[s], x, last_layer_only)
    columns = features(x2)
    return by_rows(lambda a, _: ntk_from_features(features(a), columns), x1, None, rows)


def network_output(net: HiddenLayerNet, x: torch.Tensor, memory_gb: float) -> torch.Tensor:
    """f(x) of every trial (S, n), one trial and a chunk of rows at a time (three (rows, h) float64 temporaries)."""
    rows = row_chunk(memory_gb, 3 * 8 * net.w.shape[1])
    parts = []
    for s in range(x.shape[0]):
        one = HiddenLayerNet(net.w[s:s + 1], net.b[s:s + 1], net.beta[s:s + 1])
        parts.append(by_rows(lambda a, _, one=one: hidden_layer_output(one, a), x[s:s + 1], None, rows, -1))
    return torch.cat(parts)


def label_modes(gram: torch.Tensor, labels: torch.Tensor, n_modes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kernel PCA of one Gram matrix against its ±1 labels (Figs. 9, 10), for the top ``n_modes`` modes: the label
    shares ω_r² (n_modes,), the mutual informations MI(φ_r; y) in bits (n_modes,) and the eigenfunctions φ
    (p, n_modes)."""
    pca = kernel_pca(gram, labels, n_modes)
    phi, y = pca.eigenfunctions.cpu().numpy(), labels.cpu().numpy()
    return (pca.fractions.cpu().numpy(), np.array([knn_label_mutual_information(phi[:, r], y) for r in range(n_modes)]),
            phi)
