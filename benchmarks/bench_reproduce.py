"""Total wall time of ``repdyn reproduce --scale quick`` (the issue's target: at most 20 minutes on a 2-core CPU,
aim for 10) with a per-experiment breakdown taken from the stored runs' own timings, slowest first.

The command runs once, from an empty output folder, in a child process; its peak memory is the child's maximum
resident set size. Exit code 1 (a claim fails) is a valid outcome here; the claims are counted per experiment.
This benchmark takes minutes, not seconds.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

TARGET_S, AIM_S = 20 * 60, 10 * 60
COMMAND = "python benchmarks/bench_reproduce.py"


def stored_runs(runs_root: Path) -> list[dict]:
    """The metadata of every stored run (experiment, label, status, seconds)."""
    metas = []
    for path in sorted(runs_root.glob("*/*.npz")):
        with np.load(path) as data:
            metas.append(json.loads(str(data["__meta__"])))
    return metas


def run(only: str | None = None) -> str:
    """Time the whole quick reproduction (``only``: a comma-separated subset, for checking this benchmark)."""
    subset = ["--only", only] if only else []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="repdyn-bench-") as folder:
        out = Path(folder) / "out"
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "repdyn", "reproduce", "--scale", "quick", *subset,
                               "--out", str(out), "--json"], capture_output=True, text=True)
        total = time.perf_counter() - start
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if done.returncode not in (0, 1) or not done.stdout.strip():  # exit 1 without JSON: a run crashed
            raise RuntimeError(f"repdyn reproduce exited with {done.returncode}:\n{done.stderr[-3000:]}")
        summary = json.loads(done.stdout)
        metas = stored_runs(out / "runs")
    per_experiment: dict[str, dict] = defaultdict(lambda: {"runs": 0, "seconds": 0.0, "longest": 0.0,
                                                           "diverged": 0, "passed": 0, "claims": 0})
    for meta in metas:
        row = per_experiment[meta["experiment"]]
        row["runs"] += 1
        row["seconds"] += meta.get("seconds", 0.0)
        row["longest"] = max(row["longest"], meta.get("seconds", 0.0))
        row["diverged"] += meta.get("status") == "diverged"
    for claim in summary["claims"]:
        row = per_experiment[claim["experiment"]]
        row["claims"] += 1
        row["passed"] += bool(claim["passed"])
    runs_total = sum(row["seconds"] for row in per_experiment.values())
    verdict = "within the 20-minute target" if total <= TARGET_S else "OVER the 20-minute target"
    verdict += " and the 10-minute aim" if total <= AIM_S else ""
    lines = [
        f"### `repdyn reproduce --scale quick{' --only ' + only if only else ''}`",
        "",
        f"Total wall time **{total / 60:.1f} min** ({total:.0f} s; {verdict}), one process (`--jobs 1`), "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the start. "
        f"Peak memory (max RSS) {peak_mib:.0f} MiB. Claims: {summary['passed']} of {summary['total']} pass.",
        "",
        "| experiment | runs | Σ run time (s) | share | longest run (s) | diverged runs | claims passed |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in sorted(per_experiment.items(), key=lambda item: -item[1]["seconds"]):
        lines.append(f"| {name} | {row['runs']} | {row['seconds']:.1f} | {100 * row['seconds'] / total:.0f} % | "
                     f"{row['longest']:.1f} | {row['diverged']} | {row['passed']} of {row['claims']} |")
    lines.append(f"| start-up, analysis, figures, report | – | {total - runs_total:.1f} | "
                 f"{100 * (total - runs_total) / total:.0f} % | – | – | – |")
    lines += ["", f"Reproduce: `{COMMAND}{' --only ' + only if only else ''}`"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run(sys.argv[2] if len(sys.argv) == 3 and sys.argv[1] == "--only" else None))
