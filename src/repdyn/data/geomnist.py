"""GeoMNIST: the synthetic 3-class dataset of rotated, blurred geometric shapes of seed 004 (Fig. 2), generated as
in spec 004 §3.1 (the reference code's ``gen_geomnist_data``), and the label corruption of §3.2.

Rasterisation is re-implemented in NumPy (scikit-image is not a dependency): the open ellipse inequality, the
inclusive rectangle with the code's ``np.arange`` + ``astype(int)`` corners, and point-in-triangle for pixel
centres; this may move edge pixels by ±1 relative to scikit-image (spec 004 §5, §7 item 20).
"""

from __future__ import annotations

import numpy as np
from matplotlib.path import Path
from scipy import ndimage

SIZE = 32
CENTRE = 16
CLASS_NAMES = ("triangle", "rectangle", "ellipse")
"""Label order of the generator: 0 triangle, 1 rectangle, 2 ellipse (spec 004 §3.1)."""


def _grid() -> tuple[np.ndarray, np.ndarray]:
    return np.meshgrid(np.arange(SIZE), np.arange(SIZE), indexing="ij")


def ellipse_mask(rho: float) -> np.ndarray:
    """Pixels with ((r−16)/ρ)² + ((c−16)/(2ρ))² < 1 (``skimage.draw.ellipse(16, 16, ρ, 2ρ)``)."""
    r, c = _grid()
    return ((r - CENTRE) / rho) ** 2 + ((c - CENTRE) / (2 * rho)) ** 2 < 1


def rectangle_mask(delta: float) -> np.ndarray:
    """``skimage.draw.rectangle(start=(12+δ, 8+δ), end=(20+δ, 24+δ))`` (inclusive) then ``astype(int)``."""
    mask = np.zeros((SIZE, SIZE), dtype=bool)
    rows = np.arange(12 + delta, 20 + delta + 1).astype(int)
    cols = np.arange(8 + delta, 24 + delta + 1).astype(int)
    rows, cols = rows[(rows >= 0) & (rows < SIZE)], cols[(cols >= 0) & (cols < SIZE)]
    mask[np.ix_(rows, cols)] = True
    return mask


def triangle_mask(delta: float) -> np.ndarray:
    """Triangle with vertex rows [16, 26, 6] + δ and cols [16 − 8√3, 24, 24] + δ (``skimage.draw.polygon``)."""
    vertices = np.stack([np.array([16.0, 26.0, 6.0]) + delta,
                         np.array([16.0 - 8.0 * np.sqrt(3.0), 24.0, 24.0]) + delta], axis=1)
    r, c = _grid()
    inside = Path(vertices).contains_points(np.stack([r.ravel(), c.ravel()], axis=1), radius=1e-9)
    return inside.reshape(SIZE, SIZE)


def base_shapes(n: int) -> np.ndarray:
    """Unrotated, unblurred images (3, n, 32, 32): triangles and rectangles shifted by δ_i = linspace(−1, 1, n)[i],
    ellipses of radius ρ_i = linspace(5, 7, n)[i] (spec 004 §3.1)."""
    deltas = np.linspace(-1, 1, n)
    rhos = np.linspace(5, 7, n)
    out = np.zeros((3, n, SIZE, SIZE))
    for i in range(n):
        out[0, i] = triangle_mask(deltas[i])
        out[1, i] = rectangle_mask(deltas[i])
        out[2, i] = ellipse_mask(rhos[i])
    return out


def geomnist(n_train: int, n_val: int, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """GeoMNIST with ``n_train`` + ``n_val`` images per class (spec 004 §3.1).

    Image i of each class is rotated by 176·i/N degrees (``scipy.ndimage.rotate``, cubic spline, no reshape) and
    blurred with σ_i ~ U[0.9, 1.1]; each class is shuffled and split into the first n_train (training) and the
    next n_val (validation) images. Returns x_train (3 n_train, 1, 32, 32), y_train, x_val, y_val (float64 images,
    int64 labels 0 triangle / 1 rectangle / 2 ellipse), classes concatenated in label order.
    """
    if int(n_train) != n_train or int(n_val) != n_val or n_train < 1 or n_val < 0:
        raise ValueError(f"need integer n_train >= 1 and n_val >= 0, got n_train={n_train}, n_val={n_val}")
    n = n_train + n_val
    shapes = base_shapes(n)
    images = np.empty_like(shapes)
    for k in range(3):
        for i in range(n):
            rotated = ndimage.rotate(shapes[k, i], 176.0 * i / n, reshape=False)
            images[k, i] = ndimage.gaussian_filter(rotated, sigma=rng.uniform(0.9, 1.1))
        images[k] = images[k, rng.permutation(n)]
    labels = np.repeat(np.arange(3), n_train), np.repeat(np.arange(3), n_val)
    x_train = images[:, :n_train].reshape(3 * n_train, 1, SIZE, SIZE)
    x_val = images[:, n_train:].reshape(3 * n_val, 1, SIZE, SIZE)
    return x_train, labels[0], x_val, labels[1]


def corrupt_labels(labels: np.ndarray, p_err: float, rng: np.random.Generator, n_classes: int) -> np.ndarray:
    """Label corruption of spec 004 §3.2 (code): for each true class c, n_pert = int(p_err · n_c) distinct examples
    are relabelled, the first ⌊n_pert/2⌋ to the lower other class and the rest to the higher (K = 3); for other
    K the n_pert examples are split over the other classes in order, the remainder going to the last ones."""
    if not 0.0 <= p_err <= 1.0:
        raise ValueError(f"p_err={p_err!r} must lie in [0, 1]")
    labels = np.asarray(labels)
    out = labels.copy()
    for c in range(n_classes):
        members = np.flatnonzero(labels == c)
        n_pert = int(p_err * len(members))
        chosen = rng.choice(members, size=n_pert, replace=False)
        others = [k for k in range(n_classes) if k != c]
        base, extra = divmod(n_pert, len(others))
        sizes = [base + (1 if j >= len(others) - extra else 0) for j in range(len(others))]
        start = 0
        for other, size in zip(others, sizes, strict=True):
            out[chosen[start:start + size]] = other
            start += size
    return out
