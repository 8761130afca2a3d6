"""Intrinsic dimension of a point cloud by TwoNN (Facco, d'Errico, Rodriguez & Laio 2017, Sci. Rep. 7, 12140),
the estimator of seed 003's footnote 6 (d_eff ≈ 6 for the last hidden layer on MNIST), and
:func:`curve_fraction`, how far a planar cloud is one-dimensional (seed 003, Fig. 10 right).

For each point, μ = r₂/r₁ is the ratio of the distances to its second and first nearest neighbours. If the density is
locally uniform on a d-dimensional manifold, μ follows the Pareto law F(μ) = 1 − μ^(−d) (Facco et al., Eq. 1), i.e.
log μ is exponential with rate d, whatever the density and the embedding.

Form used here: **maximum likelihood** (the form of the authors' code, ``kernels.py::intrinsic_dimension``), not
Facco et al.'s straight-line fit of −log(1 − F_emp) against log μ. Facco et al.'s discard rule is kept: the fraction
``discard`` (10 %) of points with the largest μ, which deviate from the Pareto law where the density varies, is not
used except as right-censored at the largest kept log μ. With N points, k = N − ⌊discard·N⌋ kept and
T = Σ_{i≤k} log μ₍ᵢ₎ + (N − k) log μ₍ₖ₎ (the total time on test of a type-II censored exponential sample),
T ~ Gamma(k, rate d) exactly for independent μ, so d̂ = (k − 1)/T is unbiased with variance d²/(k − 2). With
``discard = 0`` it is (N − 1)/Σ log μ, the authors' (N + 1)/Σ log μ up to 2/N.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch import Tensor

DISCARD = 0.1  # Facco et al. 2017: the 10 % of points with the highest μ are discarded


def nearest_neighbour_ratios(points: Tensor, chunk_bytes: int = 2**27) -> Tensor:
    """μ_i = r₂/r₁ for every point of ``points`` (n, f) -> (n,), in float64.

    Distances are computed from differences (``torch.cdist`` without the Gram expansion), ``chunk_bytes`` bounding
    the (rows × n) distance block in memory. Raises ValueError for fewer than three points or for duplicate points
    (r₁ = 0), where μ is undefined.
    """
    x = torch.as_tensor(points).to(torch.float64)
    if x.dim() != 2:
        raise ValueError(f"points need shape (n, f), got {tuple(x.shape)}")
    n = x.shape[0]
    if n < 3:
        raise ValueError(f"TwoNN needs at least 3 points (two neighbours each), got {n}")
    rows = max(1, chunk_bytes // (8 * n))
    ratios = []
    for start in range(0, n, rows):
        block = torch.cdist(x[start:start + rows], x, compute_mode="donot_use_mm_for_euclid_dist")
        idx = torch.arange(start, start + block.shape[0])
        block[idx - start, idx] = math.inf  # a point is not its own neighbour
        r = block.topk(2, dim=1, largest=False).values
        if bool((r[:, 0] == 0).any()):
            raise ValueError("TwoNN is undefined for duplicate points (a nearest-neighbour distance is 0)")
        ratios.append(r[:, 1] / r[:, 0])
    return torch.cat(ratios)


def two_nn(points: Tensor, discard: float = DISCARD) -> float:
    """TwoNN intrinsic dimension of ``points`` (n, f): the censored maximum-likelihood d̂ = (k − 1)/T of the module
    docstring, standard deviation d/√(k − 2). Returns inf when every μ is 1 (e.g. a regular lattice)."""
    if not 0 <= discard < 1:
        raise ValueError(f"discard must be in [0, 1), got {discard}")
    log_mu = nearest_neighbour_ratios(points).log().sort().values
    n = log_mu.numel()
    k = n - math.floor(discard * n)
    if k < 3:
        raise ValueError(f"TwoNN keeps {k} of {n} points; it needs at least 3")
    total = float(log_mu[:k].sum() + (n - k) * log_mu[k - 1])
    return math.inf if total == 0 else (k - 1) / total


def curve_fraction(x: np.ndarray, y: np.ndarray, k: int = 10) -> float:
    """Fraction of the variance of y that is a function of x, for samples (x_i, y_i) of a planar cloud:
    1 − Σ (y_i − m_i)² / Σ (y_i − ȳ)², m_i the mean of y over the k nearest neighbours of x_i in x, i itself
    excluded (leave-one-out k-NN regression). Near 1 when the points lie on a curve y = g(x) (up to g's variation
    over k neighbours); −1/k in expectation when y is independent of x."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape or x.size <= k + 1 or k < 1:
        raise ValueError(f"need x and y of one length > k + 1 = {k + 1}, got {x.size} and {y.size}")
    spread = np.sum((y - y.mean()) ** 2)
    if spread == 0:
        raise ValueError("y is constant: the fraction of its variance is undefined")
    _, idx = cKDTree(x[:, None]).query(x[:, None], k=k + 1)
    drop = idx == np.arange(x.size)[:, None]  # the point itself; where ties hid it, the farthest neighbour
    drop[~drop.any(axis=1), -1] = True
    keep = np.take_along_axis(idx, np.argsort(drop, axis=1, kind="stable")[:, :k], axis=1)
    return float(1.0 - np.sum((y - y[keep].mean(axis=1)) ** 2) / spread)
