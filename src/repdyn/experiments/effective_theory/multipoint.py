"""Shared pieces of the multi-point experiments of seed 000 (XOR, blobs, digits): training an ensemble of MLPs on a
dataset while recording the read-out representation and outputs, and pairwise Eq. 10 predictions (spec 000 §2.14)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch

from repdyn.nn import MLP, Ensemble, Schedule, train
from repdyn.nn.recording import activation_recorder, output_recorder
from repdyn.probes.distances import pairwise_sq_distances
from repdyn.theory import effective_theory as et


def train_recording(x: np.ndarray, y: np.ndarray, probe_x: np.ndarray, *, activation: str, depth: int, width: int,
                    gains: Sequence[float], lrs: Sequence[float], seeds: Sequence[int], steps: int,
                    layer: str, record_steps: Sequence[int] = (), optimizer: str = "gd",
                    batch_size: int | None = None, device: str = "cpu", generator_seed: int = 0,
                    dtype: torch.dtype = torch.float64) -> dict[str, np.ndarray]:
    """Train K MLPs (one per gain/lr/seed) on (x, y) as one ensemble; record the representation at ``layer`` and
    the outputs of ``probe_x`` at step 0, at ``record_steps`` and at the end.

    Returns steps (T,), hidden (T, K, n, f), outputs (T, K, n, d_out) and loss (T, K).
    """
    factory = functools.partial(MLP, x.shape[1], width, depth, y.shape[1], activation=activation, dtype=dtype)
    model = Ensemble(factory, seeds=list(seeds), gains=list(gains), device=device)
    xt, yt = (torch.as_tensor(a, dtype=dtype, device=device) for a in (x, y))
    probe = torch.as_tensor(probe_x, dtype=dtype, device=device)
    generator = torch.Generator(device=device).manual_seed(generator_seed)
    result = train(model, xt, yt, steps=steps, lr=list(lrs), optimizer=optimizer, batch_size=batch_size,
                   generator=generator, schedule=Schedule(record_steps, steps),
                   recorders={"hidden": activation_recorder(probe, layer), "outputs": output_recorder(probe)})
    trajectory = result.trajectory
    return {"steps": trajectory.steps.astype(float), "hidden": trajectory["hidden"], "outputs": trajectory["outputs"],
            "loss": trajectory["loss"]}


def pairwise(a: np.ndarray) -> np.ndarray:
    """Squared distances between the rows of a (..., n, f) array -> (..., n, n) (differences, not Gram)."""
    return pairwise_sq_distances(torch.as_tensor(a)).numpy()


def pairwise_prediction(hidden0: np.ndarray, outputs0: np.ndarray, x: np.ndarray, y: np.ndarray,
                        tau_ratio: float) -> np.ndarray:
    """Eq. 10 for every pair (spec 000 §2.14): u_ij(0), v_ij(0) from the network at init, X_ij, Y_ij from the
    data, one τ_y/τ_h. Works on a leading ensemble axis of hidden0/outputs0."""
    return et.fixed_point_distance(pairwise(hidden0), pairwise(outputs0), pairwise(x), pairwise(y), tau_ratio)
