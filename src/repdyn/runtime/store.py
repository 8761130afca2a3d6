"""The result store: one file per run, content-addressed, checksummed, written atomically, locked per run, read
back instead of recomputed.

A run is keyed by the SHA-256 of its experiment name, full config, run label and params, seed, device and the
package version. Its file ``<root>/<experiment>/<key>.npz`` is written to a temporary name in the same folder
and renamed into place, so a killed run or a full disk never leaves a file that is later read as a valid result.
A diverged run is stored too (status "diverged" with the step), so a resumed reproduction does not retry it.

Integrity: the run's metadata carries the SHA-256 of its arrays and of the rest of its metadata
(:func:`content_checksum`). A run that cannot be read (truncated, not a zip, a partial copy) or whose checksum does
not match (bit rot, an edited array) is :class:`CorruptRun`; :meth:`ResultStore.verified` moves it to
``<root>/.quarantine/<experiment>/`` with a one-line warning (logger ``repdyn``) and reports it missing, so it is
recomputed.

Concurrency: :meth:`ResultStore.lock` is a file lock per run (``<root>/.locks/<experiment>/<key>.lock``). A run is
computed, written, quarantined or forced away only under its lock, so two reproductions on one folder never compute
the same run at once and never move a good file written by the other.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout

import repdyn
from repdyn.runtime.atomic import TEMP_PREFIX, atomic_write

_META = "__meta__"
CHECKSUM = "checksum"
QUARANTINE = ".quarantine"
LOCKS = ".locks"
log = logging.getLogger("repdyn")


def run_key(experiment: str, config: Mapping[str, Any], label: str, params: Mapping[str, Any], seed: int,
            device: str) -> str:
    """Content hash of everything a run's result depends on."""
    payload = {"experiment": experiment, "config": config, "label": label, "params": params, "seed": seed,
               "device": device, "version": repdyn.__version__}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:24]


def derive_seed(base_seed: int, experiment: str, label: str) -> int:
    """A per-run seed from the user's base seed, stable across machines and independent between runs."""
    digest = hashlib.sha256(f"{base_seed}:{experiment}:{label}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


@dataclass(frozen=True)
class StoredRun:
    status: str  # "ok" or "diverged"
    result: dict[str, Any]
    meta: dict[str, Any]

    @property
    def diverged(self) -> bool:
        return self.status == "diverged"


class CorruptRun(ValueError):
    """A stored run that cannot be read or whose content does not match its checksum."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"stored run {path} is corrupt: {reason}")
        self.path = path
        self.reason = reason


def _encode(result: Mapping[str, Any]) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for name, value in result.items():
        if name == _META:
            raise ValueError(f"result key {_META!r} is reserved")
        array = np.asarray(value)
        if array.dtype == object:
            raise TypeError(f"result {name!r} is not an array or scalar (got {type(value).__name__})")
        arrays[name] = array
    return arrays


def _decode(array: np.ndarray) -> Any:
    if array.ndim == 0:
        return array.item()
    return array


def content_checksum(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> str:
    """SHA-256 over every array (name, dtype, shape, bytes, in name order) and the metadata other than the
    checksum itself."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(json.dumps([name, array.dtype.str, list(array.shape)]).encode())
        digest.update(array.tobytes())
    rest = {k: v for k, v in meta.items() if k != CHECKSUM}
    digest.update(json.dumps(rest, sort_keys=True, default=str).encode())
    return "sha256:" + digest.hexdigest()


def _serialise(result: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, np.ndarray]:
    arrays = _encode(result)
    meta = json.loads(json.dumps(dict(meta), sort_keys=True, default=str))  # as it will be read back
    meta[CHECKSUM] = content_checksum(arrays, meta)
    arrays[_META] = np.asarray(json.dumps(meta, sort_keys=True))
    return arrays


def _parse(source: Path | io.BytesIO, name: Path) -> StoredRun:
    """Read and verify a stored run; raises CorruptRun (FileNotFoundError when there is no file)."""
    try:
        with np.load(source, allow_pickle=False) as data:
            if _META not in data.files:
                raise CorruptRun(name, "it has no metadata")
            meta = json.loads(str(data[_META]))
            arrays = {key: data[key] for key in data.files if key != _META}
    except (CorruptRun, FileNotFoundError):
        raise
    except Exception as error:  # noqa: BLE001 - any unreadable file (BadZipFile, EOFError, ValueError, OSError)
        raise CorruptRun(name, f"unreadable ({type(error).__name__}: {error})") from None
    if not isinstance(meta, dict) or CHECKSUM not in meta:
        raise CorruptRun(name, "it carries no checksum")
    if content_checksum(arrays, meta) != meta[CHECKSUM]:
        raise CorruptRun(name, "its content does not match its checksum")
    result = {key: _decode(array) for key, array in arrays.items()}
    meta = {k: v for k, v in meta.items() if k != CHECKSUM}  # the store's own field: callers get what they wrote
    return StoredRun(status=meta.get("status", "ok"), result=result, meta=meta)


class ResultStore:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path(self, experiment: str, key: str) -> Path:
        return self.root / experiment / f"{key}.npz"

    def has(self, experiment: str, key: str) -> bool:
        """Whether a file is stored (unverified; see :meth:`verified`)."""
        return self.path(experiment, key).is_file()

    @contextmanager
    def lock(self, experiment: str, key: str, *, wait: bool = True) -> Iterator[bool]:
        """Hold the run's file lock; yields False without waiting when ``wait`` is False and another holds it.
        Not reentrant: do not nest two locks on one run."""
        path = self.root / LOCKS / experiment / f"{key}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(path)
        try:
            lock.acquire(blocking=wait)
        except Timeout:
            yield False
            return
        try:
            yield True
        finally:
            lock.release()

    def write(self, experiment: str, key: str, result: Mapping[str, Any], meta: Mapping[str, Any]) -> Path:
        """Atomically write a run (temp file + rename) with its checksum in its metadata."""
        arrays = _serialise(result, meta)
        return atomic_write(self.path(experiment, key), lambda handle: np.savez(handle, **arrays))

    def write_bytes(self, experiment: str, key: str, data: bytes) -> Path:
        """Atomically store a run file produced elsewhere (e.g. by a Dask worker without this file system), after
        checking it (raises CorruptRun for bytes damaged on the way)."""
        path = self.path(experiment, key)
        _parse(io.BytesIO(data), path)
        with self.lock(experiment, key):
            return atomic_write(path, lambda handle: handle.write(data))

    def read(self, experiment: str, key: str) -> StoredRun:
        """The stored run, checked against its checksum. Raises CorruptRun, or FileNotFoundError when absent."""
        path = self.path(experiment, key)
        return _parse(path, path)

    def verified(self, experiment: str, key: str, *, locked: bool = False) -> StoredRun | None:
        """The stored run, or None when there is none or it was corrupt (then it is quarantined, with a warning).
        ``locked``: the caller holds this run's lock."""
        return self.check(experiment, key, locked=locked)[0]

    def check(self, experiment: str, key: str, *, locked: bool = False) -> tuple[StoredRun | None, Path | None]:
        """(the verified run or None, where a corrupt file was quarantined or None)."""
        try:
            return self.read(experiment, key), None
        except FileNotFoundError:
            return None, None
        except CorruptRun as error:
            if locked:
                return None, self.quarantine(experiment, key, error.reason)
        with self.lock(experiment, key):  # another process may have replaced it meanwhile: look again
            return self.check(experiment, key, locked=True)

    def verify(self) -> tuple[int, list[Path]]:
        """Check every stored run against its checksum, quarantining the corrupt ones: (how many are intact,
        where the quarantined ones went)."""
        intact, quarantined = 0, []
        for experiment, key in list(self.stored_keys()):
            run, moved = self.check(experiment, key)
            intact += run is not None
            quarantined += [moved] if moved is not None else []
        return intact, quarantined

    def quarantine(self, experiment: str, key: str, reason: str) -> Path | None:
        """Move a run's file to ``.quarantine/<experiment>/`` (call with its lock held); returns where it went."""
        source = self.path(experiment, key)
        folder = self.root / QUARANTINE / experiment
        folder.mkdir(parents=True, exist_ok=True)
        target, n = folder / source.name, 1
        while target.exists():
            target, n = folder / f"{source.stem}.{n}{source.suffix}", n + 1
        try:
            os.replace(source, target)
        except FileNotFoundError:
            return None
        log.warning("warning: quarantined stored run %s (%s) to %s; it will be recomputed", source, reason, target)
        return target

    def remove(self, experiment: str, key: str) -> None:
        """Delete a stored run (for ``--force``), under its lock."""
        with self.lock(experiment, key):
            self.path(experiment, key).unlink(missing_ok=True)

    def stored_keys(self) -> Iterator[tuple[str, str]]:
        """(experiment, key) of every stored run file."""
        for path in sorted(self.root.glob("*/*.npz")):
            if not path.parent.name.startswith(".") and not path.name.startswith(TEMP_PREFIX):
                yield path.parent.name, path.stem

    def clean_temporaries(self) -> int:
        """Remove temp files left by killed writers (not those of a writer at work, which holds the run's lock);
        returns how many."""
        removed = 0
        for tmp in self.root.glob(f"*/{TEMP_PREFIX}*"):
            key = tmp.name.removeprefix(TEMP_PREFIX).rsplit("-", 1)[0]
            with self.lock(tmp.parent.name, key, wait=False) as free:
                if free and tmp.exists():
                    tmp.unlink(missing_ok=True)
                    removed += 1
        return removed
