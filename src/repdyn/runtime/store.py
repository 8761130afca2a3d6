"""The result store: one file per run, content-addressed, checksummed, written atomically, locked per run, read
back instead of recomputed.

A run is keyed by the SHA-256 of its experiment name, full config, run label and params, seed, device and the
package version. Its file ``<root>/<experiment>/<key>.npz`` is written to a temporary name in the same folder
and renamed into place, so a killed run or a full disk never leaves a file that is later read as a valid result.
A diverged run is stored too (status "diverged" with the step), so a resumed reproduction does not retry it.

Integrity: the run's metadata carries the SHA-256 of its arrays and of the rest of its metadata
(:func:`content_checksum`) and, in a store of runs (``keyed``), the inputs its key hashes (:func:`key_inputs`). A run
that cannot be read (truncated, not a zip, a partial copy), whose checksum does not match (bit rot, an edited array)
or whose key inputs do not hash to the key it is stored under (another run's file copied over it) is
:class:`CorruptRun`; :meth:`ResultStore.verified` moves it to ``<root>/.quarantine/<experiment>/`` with a one-line
warning (logger ``repdyn``) and reports it missing, so it is recomputed. Files are read with ``allow_pickle=False``:
nothing in a store is code. A run's checkpoint ``<key>.ckpt`` (:mod:`repdyn.nn.checkpoint`) is checked the same way
when its run resumes and by :meth:`ResultStore.verify`. A corrupt file that cannot be moved (a read-only or
immutable file) raises :class:`~repdyn.runtime.atomic.WriteError` naming it.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout

import repdyn
from repdyn.runtime.atomic import TEMP_PREFIX, WriteError, atomic_write

_META = "__meta__"
CHECKSUM = "checksum"
QUARANTINE = ".quarantine"
LOCKS = ".locks"
log = logging.getLogger("repdyn")


def key_inputs(experiment: str, config: Mapping[str, Any], label: str, params: Mapping[str, Any], seed: int,
               device: str) -> dict[str, Any]:
    """Everything a run's result depends on, as JSON reads it back (a stored run's metadata carries it)."""
    payload = {"experiment": experiment, "config": config, "label": label, "params": params, "seed": seed,
               "device": device, "version": repdyn.__version__}
    return json.loads(json.dumps(payload, sort_keys=True, default=str))


def key_of(inputs: Mapping[str, Any]) -> str:
    """The run key: a content hash of :func:`key_inputs`."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:24]


def run_key(experiment: str, config: Mapping[str, Any], label: str, params: Mapping[str, Any], seed: int,
            device: str) -> str:
    """Content hash of everything a run's result depends on."""
    return key_of(key_inputs(experiment, config, label, params, seed, device))


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


def _check_key(meta: Mapping[str, Any], name: Path) -> None:
    """A stored run's key inputs must hash to the key it is stored under, in its experiment's folder."""
    inputs = meta.get("key")
    if not isinstance(inputs, dict):
        raise CorruptRun(name, "its metadata does not record the inputs of its key")
    if key_of(inputs) != name.stem or inputs.get("experiment") != name.parent.name:
        raise CorruptRun(name, f"it is the run {inputs.get('experiment')}/{key_of(inputs)} (label "
                               f"{inputs.get('label')!r}, seed {inputs.get('seed')}), stored under another run's key")


def _parse(source: Path | io.BytesIO, name: Path, keyed: bool = False) -> StoredRun:
    """Read and verify a stored run (with ``keyed``, its key too); raises CorruptRun (FileNotFoundError when there
    is no file)."""
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
    if keyed:
        _check_key(meta, name)
    result = {key: _decode(array) for key, array in arrays.items()}
    meta = {k: v for k, v in meta.items() if k != CHECKSUM}  # the store's own field: callers get what they wrote
    return StoredRun(status=meta.get("status", "ok"), result=result, meta=meta)


@dataclass
class Verification:
    """What :meth:`ResultStore.verify` found: intact runs and checkpoints, where it moved the corrupt ones, and the
    corrupt ones it could not move (with why)."""

    runs: int = 0
    checkpoints: int = 0
    quarantined: list[Path] = field(default_factory=list)
    unmovable: list[str] = field(default_factory=list)


class ResultStore:
    """``keyed``: a store of runs, whose metadata must carry the inputs of their keys (:func:`key_inputs`); other
    stores (monitor recordings) name their files freely."""

    def __init__(self, root: str | os.PathLike[str], *, keyed: bool = False) -> None:
        self.root = Path(root)
        self.keyed = keyed

    def path(self, experiment: str, key: str) -> Path:
        return self.root / experiment / f"{key}.npz"

    def checkpoint_path(self, experiment: str, key: str) -> Path:
        return self.root / experiment / f"{key}.ckpt"

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
        """Atomically write a run (temp file + rename) with its checksum in its metadata; in a keyed store its
        metadata's ``key`` (:func:`key_inputs`) must hash to ``key``."""
        if self.keyed and (not isinstance(meta.get("key"), Mapping) or key_of(meta["key"]) != key):
            raise ValueError(f"run {experiment}/{key}: its metadata's key inputs do not hash to its key")
        arrays = _serialise(result, meta)
        return atomic_write(self.path(experiment, key), lambda handle: np.savez(handle, **arrays))

    def write_bytes(self, experiment: str, key: str, data: bytes) -> Path:
        """Atomically store a run file produced elsewhere (e.g. by a Dask worker without this file system), after
        checking it (raises CorruptRun for bytes damaged on the way)."""
        path = self.path(experiment, key)
        _parse(io.BytesIO(data), path, self.keyed)
        with self.lock(experiment, key):
            return atomic_write(path, lambda handle: handle.write(data))

    def read(self, experiment: str, key: str) -> StoredRun:
        """The stored run, checked against its checksum. Raises CorruptRun, or FileNotFoundError when absent."""
        path = self.path(experiment, key)
        return _parse(path, path, self.keyed)

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

    def verify(self) -> Verification:
        """Check every stored run (checksum, and key in a keyed store) and every checkpoint, quarantining the
        corrupt ones."""
        found = Verification()
        for experiment, key in list(self.stored_keys()):
            try:
                run, moved = self.check(experiment, key)
            except WriteError as error:
                found.unmovable.append(str(error))
                continue
            found.runs += run is not None
            found.quarantined += [moved] if moved is not None else []
        for path in sorted(self.root.glob("*/*.ckpt")):
            if path.parent.name.startswith(".") or path.name.startswith(TEMP_PREFIX):
                continue
            try:
                intact, moved = self.check_checkpoint(path.parent.name, path.stem)
            except WriteError as error:
                found.unmovable.append(str(error))
                continue
            found.checkpoints += intact
            found.quarantined += [moved] if moved is not None else []
        return found

    def check_checkpoint(self, experiment: str, key: str) -> tuple[bool, Path | None]:
        """(whether the run's checkpoint is intact, where a damaged one was quarantined or None)."""
        from repdyn.nn.checkpoint import DamagedCheckpoint, read_checkpoint

        path = self.checkpoint_path(experiment, key)
        try:
            read_checkpoint(path)
            return True, None
        except FileNotFoundError:
            return False, None
        except DamagedCheckpoint as error:
            with self.lock(experiment, key):
                return False, self.quarantine(experiment, key, error.reason, suffix=".ckpt")

    def quarantine(self, experiment: str, key: str, reason: str, *, suffix: str = ".npz") -> Path | None:
        """Move a run's file (``suffix`` ".ckpt": its checkpoint) to ``.quarantine/<experiment>/`` (call with its
        lock held); returns where it went. Raises WriteError naming the file when it cannot be moved."""
        source = self.root / experiment / f"{key}{suffix}"
        folder = self.root / QUARANTINE / experiment
        target = folder / source.name
        try:
            folder.mkdir(parents=True, exist_ok=True)
            n = 1
            while target.exists():
                target, n = folder / f"{source.stem}.{n}{source.suffix}", n + 1
            os.replace(source, target)
        except FileNotFoundError:
            if not source.exists():
                return None  # another process moved or replaced it
            raise WriteError(2, f"{source} is corrupt ({reason}) and cannot be moved to {folder}; remove it by hand"
                             ) from None
        except OSError as error:
            raise WriteError(error.errno, f"{source} is corrupt ({reason}) and cannot be moved to {folder} "
                                          f"({type(error).__name__}: {error.strerror or error}); remove it by hand"
                             ) from None
        if suffix == ".ckpt":
            log.warning("warning: quarantined checkpoint %s (%s) to %s; its run starts again from the beginning",
                        source, reason, target)
        else:
            log.warning("warning: quarantined stored run %s (%s) to %s; it will be recomputed", source, reason,
                        target)
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
            key = tmp.name.removeprefix(TEMP_PREFIX).rsplit("-", 1)[0].split(".")[0]  # .tmp-<key>-<random>.<suffix>
            with self.lock(tmp.parent.name, key, wait=False) as free:
                if free and tmp.exists():
                    tmp.unlink(missing_ok=True)
                    removed += 1
        return removed
