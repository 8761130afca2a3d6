"""MNIST from IDX files in a folder the user names (nothing is downloaded; spec 000 §5).

Expected files (each optionally gzip-compressed with a ``.gz`` suffix): ``train-images-idx3-ubyte``,
``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``; the common variant with
``.`` instead of the last ``-`` (``train-images.idx3-ubyte``) is accepted too.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import BinaryIO

import numpy as np

SPLITS = {"train": "train", "test": "t10k"}
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
               0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def _parse_header(path: Path, head: bytes) -> tuple[np.dtype, tuple[int, ...], int]:
    """(element dtype, shape, header length) from the first bytes of an IDX file."""
    if len(head) < 4 or head[0] != 0 or head[1] != 0:
        raise ValueError(f"{path} is not an IDX file (bad magic number {head[:4].hex() or 'empty'})")
    code, ndim = head[2], head[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown IDX element type 0x{code:02x}")
    header = 4 + 4 * ndim
    if len(head) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = tuple(int.from_bytes(head[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    return np.dtype(_IDX_DTYPES[code]), shape, header


def _check_size(path: Path, dtype: np.dtype, shape: tuple[int, ...], data_bytes: int) -> None:
    expected = int(np.prod(shape)) * dtype.itemsize
    if data_bytes != expected:
        raise ValueError(f"{path}: IDX header announces shape {shape} ({expected} bytes of data) but the file "
                         f"holds {data_bytes} bytes")


def _open(path: Path) -> BinaryIO:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file (gzip or raw): magic 0x0000 + dtype byte + ndim byte, big-endian dims, data."""
    path = Path(path)
    with _open(path) as f:
        data = f.read()
    dtype, shape, header = _parse_header(path, data)
    _check_size(path, dtype, shape, len(data) - header)
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)


def idx_shape(path: str | Path) -> tuple[int, ...]:
    """The shape an IDX file announces, after checking that its data has exactly that size (a gzip file is
    decompressed in chunks to count; nothing is kept)."""
    path = Path(path)
    try:
        with _open(path) as f:
            head = f.read(4 + 4 * 255)
            dtype, shape, header = _parse_header(path, head)
            size = len(head)
            if path.suffix == ".gz":
                while chunk := f.read(1 << 22):
                    size += len(chunk)
            else:
                size = path.stat().st_size
    except (OSError, EOFError, zlib.error) as error:  # a truncated or foreign gzip file
        raise ValueError(f"{path} is not a readable IDX file: {error}") from None
    _check_size(path, dtype, shape, size - header)
    return shape


def _find(folder: Path, prefix: str, kind: str) -> Path:
    stems = [f"{prefix}-{kind}", f"{prefix}-{kind.replace('-idx', '.idx')}"]
    candidates = [folder / (stem + suffix) for stem in stems for suffix in ("", ".gz")]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no MNIST file {stems[0]}[.gz] in {folder}; expected the IDX files "
                            "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
                            "t10k-labels-idx1-ubyte (optionally .gz)")


def _check_split(folder: Path, split: str, images: tuple[int, ...], labels: np.ndarray) -> None:
    """Images of shape (n, rows, cols) and n labels in 0..9."""
    if len(images) != 3 or labels.ndim != 1:
        raise ValueError(f"{folder}: expected images of shape (n, rows, cols) and labels of shape (n,), got "
                         f"{images} and {labels.shape}")
    if images[0] != labels.shape[0]:
        raise ValueError(f"{folder}: {images[0]} images but {labels.shape[0]} labels in split {split!r}")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise ValueError(f"{folder}: labels must lie in 0..9, got range [{labels.min()}, {labels.max()}]")


def _check_split_name(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not allowed: choose one of {', '.join(SPLITS)}")


def _check_folder(folder: Path) -> None:
    if not folder.is_dir():
        raise FileNotFoundError(f"MNIST folder {folder} does not exist")


def check_mnist_folder(folder: str | Path, splits: tuple[str, ...] = tuple(SPLITS), *, n: int | None = None) -> None:
    """Check an MNIST folder before anything runs, without loading the images: the IDX files of ``splits`` are
    present, their headers readable and sizes right, images and labels agree, labels lie in 0..9 and, with ``n``,
    each split holds at least n images. Raises ValueError or FileNotFoundError naming the folder and file."""
    folder = Path(folder)
    _check_folder(folder)
    for split in splits:
        _check_split_name(split)
        images = idx_shape(_find(folder, SPLITS[split], "images-idx3-ubyte"))
        labels = read_idx(_find(folder, SPLITS[split], "labels-idx1-ubyte"))
        _check_split(folder, split, images, labels)
        if n is not None and labels.size < n:
            raise ValueError(f"{folder}: split {split!r} holds {labels.size} images, fewer than the {n} asked for")


def load_mnist(folder: str | Path, split: str = "train", *, n: int | None = None, scale: bool = True,
               flatten: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(images, labels) of the ``split`` ("train" or "test") read from IDX files in ``folder``.

    images: (n, 784) float64 in [0, 1] when ``scale`` (else uint8), or (n, 28, 28) when not ``flatten``;
    labels: (n,) int64. ``n`` keeps the first n. Errors name the folder, the file and what was expected.
    """
    _check_split_name(split)
    folder = Path(folder)
    _check_folder(folder)
    images = read_idx(_find(folder, SPLITS[split], "images-idx3-ubyte"))
    labels = read_idx(_find(folder, SPLITS[split], "labels-idx1-ubyte"))
    _check_split(folder, split, images.shape, labels)
    if n is not None:
        if not 1 <= n <= labels.size:
            raise ValueError(f"n={n!r} must be in [1, {labels.size}] for split {split!r}")
        images, labels = images[:n], labels[:n]
    out = images.astype(np.float64) / 255.0 if scale else images.copy()
    if flatten:
        out = out.reshape(out.shape[0], -1)
    return out, labels.astype(np.int64)
