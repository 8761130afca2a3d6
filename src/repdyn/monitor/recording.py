"""A monitor recording: NumPy arrays indexed by recorded step, plus metadata, kept in the result store.

Arrays (T recorded steps, n probe inputs, C outputs, L layers, P pairs, m NTK points); each is present only when
its measure was on:

- ``steps`` (T,), ``loss`` (T,) (NaN where none was passed), ``record_seconds`` (T,) time spent recording;
- ``weight_change`` (T,) the relative movement ‖θ_t − θ₀‖/‖θ₀‖ of the trainable parameters from the Monitor's
  construction;
- ``outputs`` (T, n, C) the model's outputs on the probe set; ``labels`` (n,);
- ``effective_rank``, ``cost_of_identity``, ``hamiltonian`` (−2H/L̃), ``momentum_norm`` (‖B‖_F),
  ``nc_within_between``, ``nc_etf_distance``: (T, L), one value per layer; ``stationarity`` (T,) the stationarity
  residual ‖∇_θC + λθ‖/‖λθ‖ that says whether the Hamiltonian can be read;
- ``pairs`` (P, 2), ``pair_X``, ``pair_Y`` (P,) = ‖Δx‖², ‖Δy‖²; ``pair_u``, ``pair_v``, ``pair_w`` (T, P);
- ``ntk`` (T, m, m), the empirical NTK (trace over outputs) on m probe inputs (``ntk_index``), at ``ntk_steps``.

The metadata holds the run's ``total_steps``, ``coverage`` (last recorded step / total_steps), ``loss_kind`` and
the Monitor's settings.

Stored as ``<root>/monitor/<name>.npz`` through :class:`repdyn.runtime.store.ResultStore` (atomic write, the
metadata as JSON inside); :meth:`Recording.scalar_table` gives the per-step scalars as a pandas table (the
report writes it as ``steps.parquet`` and ``steps.csv``).
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from repdyn.runtime.store import ResultStore

if TYPE_CHECKING:
    import pandas

STORE_FOLDER = "monitor"


@dataclass(frozen=True)
class Recording:
    arrays: dict[str, np.ndarray]
    meta: dict[str, Any]

    @property
    def steps(self) -> np.ndarray:
        return self.arrays["steps"]

    def __contains__(self, key: str) -> bool:
        return key in self.arrays

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    def scalar_table(self) -> pandas.DataFrame:
        """One row per recorded step: steps, loss, record_seconds and every per-layer / per-pair series."""
        table: dict[str, np.ndarray] = {k: self.arrays[k] for k in ("steps", "loss", "record_seconds")}
        if "weight_change" in self.arrays:
            table["weight_change"] = self.arrays["weight_change"]
        if "stationarity" in self.arrays:
            table["stationarity_residual"] = self.arrays["stationarity"]
        for key in ("effective_rank", "cost_of_identity", "hamiltonian", "momentum_norm", "nc_within_between",
                    "nc_etf_distance"):
            if key in self.arrays:
                for l, layer in enumerate(self.meta["layers"]):
                    table[f"{key}[{layer}]"] = self.arrays[key][:, l]
        for key in ("pair_u", "pair_v", "pair_w"):
            if key in self.arrays:
                for p, (i, j) in enumerate(self.arrays["pairs"]):
                    table[f"{key}[{i},{j}]"] = self.arrays[key][:, p]
        import pandas

        return pandas.DataFrame(table)

    def save(self, root: str | os.PathLike[str]) -> Path:
        """Write ``<root>/monitor/<name>.npz`` atomically, via the result store; returns its path."""
        return ResultStore(root).write(STORE_FOLDER, self.meta["name"], self.arrays, self.meta)


def load_recording(path: str | os.PathLike[str]) -> Recording:
    """Read a recording written by :meth:`Recording.save` (the .npz path). Raises ValueError for a file that is
    not a monitor recording."""
    path = Path(path)
    if path.suffix != ".npz" or not path.is_file():
        raise ValueError(f"recording {str(path)!r} must be an existing .npz file written by Monitor.save")
    try:
        stored = ResultStore(path.parent.parent).read(path.parent.name, path.stem)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as error:
        raise ValueError(f"{str(path)!r} is not a monitor recording: {error}") from None
    if "steps" not in stored.result or "outputs" not in stored.result or "layers" not in stored.meta:
        raise ValueError(f"{str(path)!r} is not a monitor recording (no steps/outputs/layers)")
    arrays = {k: np.atleast_1d(v) if k in ("steps", "loss", "record_seconds") else v
              for k, v in stored.result.items()}
    return Recording(arrays=arrays, meta=stored.meta)
