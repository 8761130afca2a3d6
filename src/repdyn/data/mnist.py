"""MNIST from IDX files in a folder the user names (nothing is downloaded; spec 000 §5).

Expected files (each optionally gzip-compressed with a ``.gz`` suffix): ``train-images-idx3-ubyte``,
``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``; the common variant with
``.`` instead of the last ``-`` (``train-images.idx3-ubyte``) is accepted too.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

SPLITS = {"train": "train", "test": "t10k"}
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
               0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file (gzip or raw): magic 0x0000 + dtype byte + ndim byte, big-endian dims, data."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path} is not an IDX file (bad magic number {data[:4].hex() or 'empty'})")
    code, ndim = data[2], data[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown IDX element type 0x{code:02x}")
    dtype = np.dtype(_IDX_DTYPES[code])
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise ValueError(f"{path}: IDX header announces shape {shape} ({expected} bytes of data) but the file "
                         f"holds {len(data) - header} bytes")
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)


def _find(folder: Path, prefix: str, kind: str) -> Path:
    stems = [f"{prefix}-{kind}", f"{prefix}-{kind.replace('-idx', '.idx')}"]
    candidates = [folder / (stem + suffix) for stem in stems for suffix in ("", ".gz")]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no MNIST file {stems[0]}[.gz] in {folder}; expected the IDX files "
                            "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
                            "t10k-labels-idx1-ubyte (optionally .gz)")


def load_mnist(folder: str | Path, split: str = "train", *, n: int | None = None, scale: bool = True,
               flatten: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(images, labels) of the ``split`` ("train" or "test") read from IDX files in ``folder``.

    images: (n, 784) float64 in [0, 1] when ``scale`` (else uint8), or (n, 28, 28) when not ``flatten``;
    labels: (n,) int64. ``n`` keeps the first n. Errors name the folder, the file and what was expected.
    """
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not allowed: choose one of {', '.join(SPLITS)}")
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"MNIST folder {folder} does not exist")
    images = read_idx(_find(folder, SPLITS[split], "images-idx3-ubyte"))
    labels = read_idx(_find(folder, SPLITS[split], "labels-idx1-ubyte"))
    if images.ndim != 3 or labels.ndim != 1:
        raise ValueError(f"{folder}: expected images of shape (n, rows, cols) and labels of shape (n,), got "
                         f"{images.shape} and {labels.shape}")
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{folder}: {images.shape[0]} images but {labels.shape[0]} labels in split {split!r}")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise ValueError(f"{folder}: labels must lie in 0..9, got range [{labels.min()}, {labels.max()}]")
    if n is not None:
        if not 1 <= n <= labels.size:
            raise ValueError(f"n={n!r} must be in [1, {labels.size}] for split {split!r}")
        images, labels = images[:n], labels[:n]
    out = images.astype(np.float64) / 255.0 if scale else images.copy()
    if flatten:
        out = out.reshape(out.shape[0], -1)
    return out, labels.astype(np.int64)
