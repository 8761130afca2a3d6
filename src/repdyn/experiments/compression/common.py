"""Shared helpers of the seed-003 experiments: data + init + gradient flow, per-trial slopes, frozen-kernel solves.

Integrator note (quick scale): the dgrad threshold is 10⁻² instead of the reference 10⁻⁴. At h p² far below the
paper's 10¹², a single ReLU gate crossing a training point changes the gradient by dgrad ~ 100/(h p²), so 10⁻⁴ would
make the step track gate crossings instead of the smooth flow. Below dt = τ/160 the dgrad test is skipped (see
:func:`repdyn.nn.hidden_layer.train_gradient_flow`), which removes the stall of the plain rule.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
from sklearn.svm import SVC

from repdyn.data.manifolds import informative_dimension, sample_manifold
from repdyn.experiments.claims import Control
from repdyn.nn.hidden_layer import FlowResult, HiddenLayerNet, init_hidden_layer, train_gradient_flow
from repdyn.theory.compression import amplification, classification_error

UNTRAINED = Control("the untrained network (max_steps = 0)", {"max_steps": 0})
"""Negative control of every claim about what training does: the same protocol with the network left at init."""


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def train(model: str, d: int, p: int, n_seeds: int, h: int, alpha: float, max_dgrad: float, stop_fraction: float,
          max_steps: int, gen: torch.Generator, device: str):
    """Data (train set per trial, seeds batched) + init + gradient flow; data and init share the seed (P17).

    Data and init are drawn in float64 (the same draws as before); the flow runs in float32 (same t* and Λ* to
    ~10⁻⁵ relative, a third less CPU time) and the trained weights come back in float64 for the evaluations."""
    x, y = sample_manifold(model, p, d, gen, batch=(n_seeds,), device=device)
    net0 = init_hidden_layer(n_seeds, h, d, gen, device=device)
    single = HiddenLayerNet(net0.w.float(), net0.b.float(), net0.beta.float())
    res = train_gradient_flow(single, x.float(), y, alpha, d_parallel=informative_dimension(model),
                              max_dgrad=max_dgrad, stop_fraction=stop_fraction, max_steps=max_steps)
    double = {k: HiddenLayerNet(v.w.double(), v.b.double(), v.beta.double())
              for k, v in (("net", res.net), ("at_t_star", res.at_t_star))}
    return x, y, net0, dataclasses.replace(res, **double, lambda_star=res.lambda_star.double(),
                                           lambda_max=res.lambda_max.double())


def thin(history: dict[str, torch.Tensor], n: int = 400) -> dict[str, np.ndarray]:
    length = history["t"].shape[-1]
    idx = np.unique(np.linspace(0, length - 1, min(n, length)).astype(int))
    return {f"history_{k}": v[..., idx].cpu().numpy() for k, v in history.items() if k != "neurons"}


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
            "stopped": res.stopped.cpu().numpy(), "steps": res.steps}


def svm_error(gram_train: torch.Tensor, y: torch.Tensor, gram_test: torch.Tensor, y_test: torch.Tensor) -> np.ndarray:
    """Test error of the frozen-kernel hinge learner, solved directly, per trial.

    The frozen-kernel hinge flow of spec 003 §2.7 runs until every margin y F ≥ 1; its explicit Euler version needs
    > 2·10⁴ iterations on the ill-conditioned Gram matrices of a trained network (condition numbers ~10¹⁸) and
    stops early otherwise, which inflates the error. The flow's zero-loss limit is the hard-margin support vector
    classifier on the same kernel (the paper's own reading of the lazy regime, §3.1: "the SVC algorithm minimizes
    the hinge loss"), solved here by libsvm with C = 10⁸ (hard margin). gram_*: (S, n, p); y: (S, p).
    """
    errors = []
    for s in range(y.shape[0]):
        svc = SVC(C=1e8, kernel="precomputed", tol=1e-4, cache_size=50)
        svc.fit(gram_train[s].cpu().numpy(), y[s].cpu().numpy())
        out = torch.as_tensor(svc.decision_function(gram_test[s].cpu().numpy()), dtype=y_test.dtype)
        errors.append(float(classification_error(out, y_test[s].cpu())))
    return np.array(errors)
