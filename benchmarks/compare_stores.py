"""Compare two result stores run by run: every stored array of every run present in both, bit for bit.

The equality check of a refactor that must not change any result (issue: one training driver): run the same scale
with the old and the new code into two stores, then ``python benchmarks/compare_stores.py OLD NEW``. A run is keyed
by its experiment, config, label, seed, device and package version (:mod:`repdyn.runtime.store`), so the same key in
both stores is the same run. Prints one line per experiment (runs compared, runs identical, the first differing
arrays), then per topic the CPU-seconds of its runs in each store (the runs' own ``cpu_seconds``) and their ratio,
new over old: run the two reproductions at the same time, so that both see the same machine. Exits 1 when any array
differs or a run is missing from one store.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

META = "__meta__"  # timings and provenance, which differ between any two runs


def differing(old: Path, new: Path) -> list[str]:
    """The names of the arrays of run file ``old`` that ``new`` lacks or holds with other bits."""
    with np.load(old, allow_pickle=False) as a, np.load(new, allow_pickle=False) as b:
        names = (set(a.files) | set(b.files)) - {META}
        return sorted(n for n in names if n not in a.files or n not in b.files or a[n].dtype != b[n].dtype
                      or a[n].shape != b[n].shape or a[n].tobytes() != b[n].tobytes())


def cpu_seconds(path: Path) -> float:
    with np.load(path, allow_pickle=False) as data:
        return float(json.loads(str(data[META]))["cpu_seconds"])


def main(old_root: str, new_root: str) -> int:
    old_runs, new_runs = Path(old_root) / "runs", Path(new_root) / "runs"
    failed = False
    cpu: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for folder in sorted(p for p in old_runs.iterdir() if p.is_dir() and not p.name.startswith(".")):
        keys = {p.name for p in folder.glob("*.npz")}
        other = {p.name for p in (new_runs / folder.name).glob("*.npz")}
        same, diffs = 0, []
        topic = cpu[folder.name.split(".")[0]]
        for key in sorted(keys & other):
            topic[0] += cpu_seconds(folder / key)
            topic[1] += cpu_seconds(new_runs / folder.name / key)
            names = differing(folder / key, new_runs / folder.name / key)
            same += not names
            if names:
                diffs.append(f"{key[:8]}: {', '.join(names[:4])}")
        missing = len(keys ^ other)
        failed |= bool(diffs) or bool(missing)
        print(f"{folder.name}: {len(keys & other)} runs compared, {same} identical"
              + (f", {missing} in one store only" if missing else "") + (f"; differ: {'; '.join(diffs[:3])}"
                                                                          if diffs else ""))
    for topic, (old, new) in sorted(cpu.items()):
        print(f"{topic}: CPU-s of the compared runs, old {old:.1f}, new {new:.1f}, new/old {new / old:.3f}"
              if old else f"{topic}: no run compared")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python benchmarks/compare_stores.py OLD_STORE NEW_STORE")
    sys.exit(main(*sys.argv[1:]))
