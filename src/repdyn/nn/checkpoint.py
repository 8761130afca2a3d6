"""Checkpoints inside long runs: the training loops of a run save their state every few minutes, and a run that is
killed resumes from its last checkpoint, ending bit-identical to an uninterrupted run.

The runtime installs a :class:`Checkpointer` around a run (:func:`checkpointing`); the training driver
(:func:`repdyn.nn.driver.drive`) asks it for the slot of each loop the run enters (:meth:`Checkpointer.next_loop`,
the loops of a run numbered in the order they start), resumes the loop from what is saved there and, when a save is
due, saves the loop's whole declared state: parameters, optimiser, random number generators and what it has recorded
so far. A loop that finished keeps its result and final parameters, so a resumed run passes it without recomputing.
Without a checkpointer the driver does none of this.

The file holds data only, never code: a header line with the SHA-256 of the rest, then a ``torch.save`` archive
read back with ``weights_only=True``, which builds tensors, plain Python data, NumPy arrays and the dataclasses of
this package (whose construction runs no code) and refuses any other global, so a pickle payload in a checkpoint
executes nothing. The archive also names the run it belongs to (the file's stem), so a checkpoint copied under
another run's name is refused. A checkpoint that fails any of these checks is :class:`DamagedCheckpoint`; a
:class:`Checkpointer` hands it to its ``damaged`` callback (the runtime quarantines it) and its run starts from the
beginning. A checkpoint is written to a temporary file ``.tmp-<stem>-<random>.ckpt`` beside it, fsynced, and renamed
into place.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import io
import os
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import torch
from torch.serialization import get_unsafe_globals_in_checkpoint, safe_globals

from repdyn.nn.progress import bound

_CURRENT: ContextVar[Checkpointer | None] = ContextVar("repdyn_checkpointer", default=None)
HEADER = b"repdyn-checkpoint sha256:"
# the globals a pickled NumPy array or scalar needs (an empty array's data is bytes()); each builds data, runs
# nothing else
_NUMPY = {("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
          ("numpy._core.multiarray", "scalar"), ("numpy.core.multiarray", "scalar"), ("numpy", "ndarray"),
          ("numpy", "dtype"), ("builtins", "bytes")}


class DamagedCheckpoint(ValueError):
    """A checkpoint that cannot be read, does not match its checksum, holds more than data, or is another run's."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"checkpoint {path} is damaged: {reason}")
        self.path, self.reason = path, reason


def _allowed(name: str) -> Any:
    """The object a checkpoint's pickle may name: NumPy's array constructors, or a dataclass of this package."""
    module, _, attr = name.rpartition(".")
    numpy_global, found = (module, attr) in _NUMPY, None
    if numpy_global or module.startswith("repdyn."):
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            pass
    if found is not None and (numpy_global or (isinstance(found, type) and dataclasses.is_dataclass(found))):
        return found
    raise ValueError(f"it names the global {name}, which is not data (only tensors, plain Python data, NumPy arrays "
                     f"and repdyn's dataclasses are read)")


def _dtype_classes() -> list[type]:
    """The classes of NumPy's dtypes (``numpy.dtypes``, NumPy >= 1.25), which a pickled dtype is built as."""
    import numpy

    dtypes = getattr(numpy, "dtypes", None)
    return [getattr(dtypes, name) for name in getattr(dtypes, "__all__", ())]


def read_checkpoint(path: str | os.PathLike[str]) -> dict[int, dict[str, Any]]:
    """The saved state of each loop of the checkpoint at ``path``, checked (header, checksum, data only, and that it
    is this file's run). Raises DamagedCheckpoint, or FileNotFoundError when there is none."""
    path = Path(path)
    data = path.read_bytes()
    head, newline, body = data.partition(b"\n")
    if not newline or not head.startswith(HEADER):
        raise DamagedCheckpoint(path, "it is not a repdyn checkpoint (no checksum header)")
    if hashlib.sha256(body).hexdigest().encode() != head.removeprefix(HEADER):
        raise DamagedCheckpoint(path, "its content does not match its checksum")
    try:
        allowed = [_allowed(name) for name in get_unsafe_globals_in_checkpoint(io.BytesIO(body))]
        with safe_globals(allowed + _dtype_classes()):
            content = torch.load(io.BytesIO(body), weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unreadable archive or refused global
        raise DamagedCheckpoint(path, f"unreadable ({type(error).__name__}: {str(error).splitlines()[0]})") from None
    if not isinstance(content, dict) or not isinstance(content.get("loops"), dict):
        raise DamagedCheckpoint(path, "it does not hold the loops of a run")
    if content.get("run") != path.stem:
        raise DamagedCheckpoint(path, f"it is the checkpoint of run {content.get('run')!r}, not of {path.stem!r}")
    return content["loops"]


def write_checkpoint(path: Path, run: str, loops: dict[int, dict[str, Any]]) -> None:
    """Write ``loops`` of ``run`` atomically: a temporary ``.tmp-<stem>-<random>.ckpt`` beside ``path``, flushed
    and fsynced, then renamed into place."""
    buffer = io.BytesIO()
    torch.save({"run": run, "loops": loops}, buffer)
    body = buffer.getbuffer()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".tmp-{path.stem}-", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(HEADER + hashlib.sha256(body).hexdigest().encode() + b"\n")
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)


class Checkpointer:
    """The checkpoint file of one run (``path``, named ``<run key>.ckpt``), saved at most every ``every`` seconds.
    A damaged checkpoint goes to ``damaged(error)`` (by default it is raised) and the run starts afresh."""

    def __init__(self, path: str | os.PathLike[str], every: float, clock: Callable[[], float] = time.monotonic,
                 damaged: Callable[[DamagedCheckpoint], object] | None = None) -> None:
        self.path, self.every, self.clock = Path(path), every, clock
        self.last = clock()
        self.loops = 0
        self.saved: dict[int, dict[str, Any]] = {}
        try:
            self.saved = read_checkpoint(self.path)
        except FileNotFoundError:
            pass
        except DamagedCheckpoint as error:
            if damaged is None:
                raise
            damaged(error)

    def next_loop(self) -> int:
        self.loops += 1
        return self.loops - 1

    def load(self, loop: int) -> dict[str, Any] | None:
        return self.saved.get(loop)

    def due(self) -> bool:
        return self.clock() - self.last >= self.every

    def save(self, loop: int, state: dict[str, Any]) -> None:
        """Write every loop's state (see :func:`write_checkpoint`)."""
        self.saved[loop] = state
        write_checkpoint(self.path, self.path.stem, self.saved)
        self.last = self.clock()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def current() -> Checkpointer | None:
    return _CURRENT.get()


def checkpointing(checkpointer: Checkpointer | None) -> AbstractContextManager[None]:
    """The training loops run inside this block save to and resume from ``checkpointer``."""
    return bound(_CURRENT, checkpointer)
