"""k-nearest-neighbour mutual information between a continuous variable and a balanced binary label.

The estimator of App. D of seed 003 (Eq. 16): with P(y = ±) = 1/2,
Î(x; y) = 1 − (1/n) Σ_i h₂(q̂₊(x_i)),  q̂₊(x_i) = 1 / (1 + (r₊(x_i)/r₋(x_i))^d),
where r_y(x_i) is the distance from x_i to its k-th nearest neighbour of label y (k = 5, footnote 9), h₂ the
binary entropy and all logs base 2 (bits, at most 1).

scikit-learn's ``mutual_info_classif`` is *not* this estimator (it is the digamma-based estimator of Ross
2014, in nats, which does not assume balanced labels), so it is used only as an independent cross-check in the
tests. Implementation details follow spec 003 §2.12 (the reference code): each column is standardised, 10⁻¹⁰ is
added to the radii, q̂₊ is clipped to [10⁻¹⁰, 1 − 10⁻¹⁰] and labels are split y > 0 vs y ≤ 0, with two
conscious changes. (i) The query point is *not* its own neighbour, as App. D describes ("the k nearest
neighbours of x which are labelled y"); the code's self-inclusion makes r for the own class the (k−1)-th other
neighbour, which biases independent labels to ≈ 0.08 bit at k = 5 (measured), against ≈ 0.02 bit without it.
(ii) The code's tiny random jitter is omitted so that the estimator is deterministic; the 10⁻¹⁰ added to the
radii keeps ratios finite for tied points.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree


def binary_entropy(q: np.ndarray) -> np.ndarray:
    """h₂(q) = −q log₂ q − (1 − q) log₂(1 − q) (App. D, footnote 8), with h₂(0) = h₂(1) = 0."""
    q = np.asarray(q, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(q * np.log2(q) + (1 - q) * np.log2(1 - q))
    return np.where((q <= 0) | (q >= 1), 0.0, h)


def knn_label_mutual_information(x: np.ndarray, y: np.ndarray, k: int = 5) -> float:
    """Î(x; y) in bits by Eq. (16) of seed 003 (App. D) for samples x (n,) or (n, d) and labels y (n,).

    Assumes balanced labels, as the paper does. Each class needs at least k points.
    """
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    y = np.asarray(y)
    if x.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x of shape {x.shape} and y of shape {y.shape} must have the same number of rows")
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    positive = y > 0
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if min(n_pos, n_neg) < k:
        raise ValueError(f"each class needs at least k={k} points, got {n_pos} positive and {n_neg} negative")
    std = x.std(axis=0)
    x = (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)
    d = x.shape[1]

    def kth_radius(members: np.ndarray) -> np.ndarray:
        # k + 1 neighbours within the query's own class, whose nearest is the query itself
        dist, _ = cKDTree(x[members]).query(x, k=k + 1)
        return np.where(members, dist[:, k], dist[:, k - 1]) + 1e-10

    r_pos, r_neg = kth_radius(positive), kth_radius(~positive)
    q_pos = 1.0 / (1.0 + (r_pos / r_neg) ** d)
    q_pos = np.clip(q_pos, 1e-10, 1 - 1e-10)
    return float(1.0 - binary_entropy(q_pos).mean())
