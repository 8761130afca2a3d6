"""scikit-learn's bundled 8×8 handwritten digits (1797 images, shipped with scikit-learn, no download): the
offline stand-in for MNIST (spec 000 §5). Results on it are labelled as a stand-in."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits as _sklearn_digits

DIGITS_SIZE = 1797


def load_digits(n: int | None = None, *, scale: bool = True, classes: tuple[int, ...] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """(images, labels): images (n, 64) float64, labels (n,) int64, in scikit-learn's fixed order.

    ``scale`` maps pixel values 0..16 to [0, 1] (as MNIST's 0..255 -> [0, 1]); ``classes`` keeps only those
    digits (order preserved); ``n`` keeps the first n after that.
    """
    bunch = _sklearn_digits()
    images = bunch.data.astype(np.float64)
    labels = bunch.target.astype(np.int64)
    if classes is not None:
        bad = [c for c in classes if not 0 <= int(c) <= 9]
        if bad:
            raise ValueError(f"classes={classes!r}: digit classes must lie in 0..9")
        keep = np.isin(labels, np.asarray(classes))
        images, labels = images[keep], labels[keep]
    if n is not None:
        if not 1 <= n <= len(labels):
            raise ValueError(f"n={n!r} must be in [1, {len(labels)}] (images available after filtering)")
        images, labels = images[:n], labels[:n]
    if scale:
        images = images / 16.0
    return images, labels


def one_hot(labels: np.ndarray, n_classes: int = 10) -> np.ndarray:
    """One-hot targets (n, n_classes) for MSE training (spec 000 §3.8: ‖Δy‖² = 2 between different digits)."""
    labels = np.asarray(labels)
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(f"labels must lie in [0, {n_classes}), got range [{labels.min()}, {labels.max()}]")
    return np.eye(n_classes)[labels]
