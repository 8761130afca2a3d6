"""The result store: one file per run, content-addressed, written atomically, read back instead of recomputed.

A run is keyed by the SHA-256 of its experiment name, full config, run label and params, seed, device and the
package version. Its file ``<root>/<experiment>/<key>.npz`` is written to a temporary name in the same folder
and renamed into place, so a killed run never leaves a file that is later read as a valid result. A diverged run
is stored too (status "diverged" with the step), so a resumed reproduction does not retry it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import repdyn
from repdyn.runtime.atomic import atomic_write

_META = "__meta__"


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


class ResultStore:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path(self, experiment: str, key: str) -> Path:
        return self.root / experiment / f"{key}.npz"

    def has(self, experiment: str, key: str) -> bool:
        return self.path(experiment, key).is_file()

    def write(self, experiment: str, key: str, result: Mapping[str, Any], meta: Mapping[str, Any]) -> Path:
        """Atomically write a run (temp file + rename)."""
        arrays = _encode(result)
        arrays[_META] = np.asarray(json.dumps(dict(meta), sort_keys=True, default=str))
        return atomic_write(self.path(experiment, key), lambda handle: np.savez(handle, **arrays))

    def write_bytes(self, experiment: str, key: str, data: bytes) -> Path:
        """Atomically store a run file produced elsewhere (e.g. by a Dask worker without this file system)."""
        return atomic_write(self.path(experiment, key), lambda handle: handle.write(data))

    def read(self, experiment: str, key: str) -> StoredRun:
        with np.load(self.path(experiment, key), allow_pickle=False) as data:
            meta = json.loads(str(data[_META]))
            result = {name: _decode(data[name]) for name in data.files if name != _META}
        return StoredRun(status=meta.get("status", "ok"), result=result, meta=meta)

    def clean_temporaries(self) -> int:
        """Remove temp files left by killed writers; returns how many."""
        removed = 0
        for tmp in self.root.glob("*/.tmp-*"):
            tmp.unlink(missing_ok=True)
            removed += 1
        return removed
