"""CIFAR-10 from a local folder of the standard python batches (``data_batch_1`` … ``data_batch_5``, ``test_batch``),
read with a restricted unpickler, and the K-class subset of seed 004 (spec 004 §3.3). Nothing is downloaded.

The batches are pickles; unpickling can run arbitrary code, so :class:`CifarUnpickler` resolves only the globals
the format needs to rebuild its NumPy array (``numpy.core.multiarray._reconstruct``, ``numpy.ndarray``,
``numpy.dtype``, and ``_codecs.encode``, which Python-3 protocol-2 pickles use for bytes) and refuses anything
else with a :class:`CifarFormatError`. The loaded object must then be a dict with a uint8 ``data`` array of
shape (N, 3072) and N integer ``labels``.
"""

from __future__ import annotations

import pickle
import pickletools
from pathlib import Path

import numpy as np

TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
CLASS_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")

_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class CifarFormatError(ValueError):
    """A CIFAR-10 batch that is not in the python-batch format (or tries to load something else)."""


class CifarUnpickler(pickle.Unpickler):
    """Unpickler that accepts only the arrays, lists, dicts and bytes of the CIFAR-10 python batches."""

    def find_class(self, module: str, name: str) -> object:
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise CifarFormatError(f"refusing to load global {module}.{name} from a CIFAR-10 batch: the format holds "
                               f"only NumPy arrays, lists, dicts and bytes (allowed globals: "
                               f"{sorted('.'.join(g) for g in _ALLOWED_GLOBALS)})")


def read_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(images (N, 3, 32, 32) uint8, labels (N,) int64) of one python batch file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"CIFAR-10 batch {path} not found")
    with path.open("rb") as fh:
        try:
            batch = CifarUnpickler(fh, encoding="bytes").load()
        except CifarFormatError as exc:
            raise CifarFormatError(f"{path}: {exc}") from None
        except Exception as exc:  # a truncated or foreign file
            raise CifarFormatError(f"{path} is not a readable CIFAR-10 python batch: {exc}") from exc
    if not isinstance(batch, dict):
        raise CifarFormatError(f"{path}: expected a dict, got {type(batch).__name__}")
    batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
    data, labels = batch.get("data"), batch.get("labels")
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise CifarFormatError(f"{path}: 'data' must be a uint8 array of shape (N, 3072)")
    if not isinstance(labels, list) or len(labels) != len(data) or not all(isinstance(y, int) for y in labels):
        raise CifarFormatError(f"{path}: 'labels' must be a list of {len(data)} ints")
    return data.reshape(-1, 3, 32, 32), np.asarray(labels, dtype=np.int64)


def _check_files(folder: Path) -> Path:
    if not folder.is_dir():
        raise FileNotFoundError(f"CIFAR-10 folder {folder} does not exist: point it at 'cifar-10-batches-py'")
    missing = [f for f in (*TRAIN_FILES, TEST_FILE) if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(f"CIFAR-10 folder {folder} lacks {', '.join(missing)}: point it at "
                                "'cifar-10-batches-py'")
    return folder


def check_cifar10_folder(folder: str | Path) -> None:
    """Check a CIFAR-10 folder before anything runs: every batch is present and starts as a pickle does, and the
    first batch loads with the restricted unpickler (only the allowed globals) into the expected dict of a uint8
    (N, 3072) array and N labels. Raises FileNotFoundError or CifarFormatError naming the folder and file."""
    folder = _check_files(Path(folder))
    read_batch(folder / TRAIN_FILES[0])
    for name in (*TRAIN_FILES[1:], TEST_FILE):
        with (folder / name).open("rb") as fh:
            try:
                first = next(pickletools.genops(fh))[0].name
            except (ValueError, StopIteration):
                first = None
        if first not in ("PROTO", "MARK", "EMPTY_DICT"):  # how a pickled dict starts (protocol 2+, 0, 1)
            raise CifarFormatError(f"{folder / name} is not a CIFAR-10 python batch (not a pickled dict)")


def load_cifar10(folder: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test) as uint8 images (N, 3, 32, 32) and int64 labels from ``folder``
    (the ``cifar-10-batches-py`` directory)."""
    folder = _check_files(Path(folder))
    train = [read_batch(folder / f) for f in TRAIN_FILES]
    x_test, y_test = read_batch(folder / TEST_FILE)
    return np.concatenate([b[0] for b in train]), np.concatenate([b[1] for b in train]), x_test, y_test


def normalise(images: np.ndarray) -> np.ndarray:
    """``ToTensor`` then ``Normalize((0.5,)*3, (0.5,)*3)``: x/255·2 − 1 as float64 (spec 004 §3.3)."""
    return images.astype(np.float64) / 255.0 * 2.0 - 1.0


def cifar_subset(folder: str | Path, n_classes: int, n_train: int, n_val: int, rng: np.random.Generator
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The first ``n_classes`` CIFAR-10 classes with ``n_train`` training and ``n_val`` validation images per class
    drawn **with replacement** from that class's training and test images, as the reference code does
    (spec 004 §3.3, §7 item 3). Returns normalised float64 images and int64 labels."""
    if not 2 <= n_classes <= 10:
        raise ValueError(f"n_classes={n_classes} must be in [2, 10]")
    x_tr, y_tr, x_te, y_te = load_cifar10(folder)
    parts: list[list[np.ndarray]] = [[], [], [], []]
    for c in range(n_classes):
        tr, te = np.flatnonzero(y_tr == c), np.flatnonzero(y_te == c)
        if len(tr) == 0 or len(te) == 0:
            raise CifarFormatError(f"class {c} has no images in {folder}")
        pick_tr, pick_te = rng.choice(tr, n_train, replace=True), rng.choice(te, n_val, replace=True)
        parts[0].append(x_tr[pick_tr])
        parts[1].append(np.full(n_train, c))
        parts[2].append(x_te[pick_te])
        parts[3].append(np.full(n_val, c))
    return (normalise(np.concatenate(parts[0])), np.concatenate(parts[1]),
            normalise(np.concatenate(parts[2])), np.concatenate(parts[3]))
