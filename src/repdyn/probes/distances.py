"""Pairwise representational distances.

For the two-point theory of seed 000 the representational distance is u = ‖h(x_2) − h(x_1)‖² at layer H
(spec 000 §3.1); :func:`pairwise_sq_distances` gives it for every pair at once.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from repdyn.nn.ensemble import Ensemble
from repdyn.probes.activations import activations


def pairwise_sq_distances(h: Tensor) -> Tensor:
    """‖h_i − h_j‖² for representations of shape (..., n, f) -> (..., n, n).

    Computed from differences (not the Gram expansion ‖a‖² + ‖b‖² − 2a·b) so that tiny distances between
    nearby points keep their relative accuracy. Flatten multi-dimensional features to f first.
    """
    if h.dim() < 2:
        raise ValueError(f"representations need shape (..., n, f), got {tuple(h.shape)}")
    return (h.unsqueeze(-2) - h.unsqueeze(-3)).pow(2).sum(-1)


def cosine_similarities(h: Tensor) -> Tensor:
    """Cosine similarity of every pair of representations, (..., n, f) -> (..., n, n)."""
    unit = torch.nn.functional.normalize(h, dim=-1)
    return unit @ unit.transpose(-1, -2)


def representational_distance(model: nn.Module, x1: Tensor, x2: Tensor, layer: str) -> Tensor:
    """‖h(x2) − h(x1)‖² at ``layer`` for paired batches x1, x2 of equal shape -> (n,) ((K, n) for an ensemble,
    whose inputs are shared by all members)."""
    if x1.shape != x2.shape:
        raise ValueError(f"x1 and x2 must have the same shape, got {tuple(x1.shape)} and {tuple(x2.shape)}")
    both = activations(model, torch.cat([x1, x2], dim=0), [layer])[layer]
    axis = 1 if isinstance(model, Ensemble) else 0
    n = x1.shape[0]
    diff = both.narrow(axis, n, n) - both.narrow(axis, 0, n)
    if diff.dim() == axis + 1:
        return diff.pow(2)
    return diff.pow(2).flatten(start_dim=axis + 1).sum(-1)
