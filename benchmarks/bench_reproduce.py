"""Total wall time of ``repdyn reproduce --scale quick --jobs 2`` (the target: at most 15 minutes on a 2-core CPU,
aim for 10) with a per-paper CPU budget check and a per-experiment breakdown taken from the stored runs' own
timings, slowest first.

The command runs once, from an empty output folder, in a child process; its peak memory is the largest maximum
resident set size of its processes. Exit code 1 (a verdict differs from the recorded one) is a valid outcome here;
the verdicts are counted per experiment. This benchmark takes minutes, not seconds.
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

TARGET_S, AIM_S = 15 * 60, 10 * 60
JOBS = 2
PAPER_BUDGET_S = {"effective_theory": 6 * 60, "shallow_relu": 4 * 60, "leaky_resnet": 8 * 60,
                  "compression": 6 * 60, "elastic_sde": 4 * 60}
"""Each paper's share of the quick reproduction, in CPU-seconds of its runs (the topic issues' budgets)."""
COMMAND = "python benchmarks/bench_reproduce.py"
SHORT = {"reproduced": "R", "not reproduced (documented)": "D", "not reproduced": "N",
         "not reproduced (no effect)": "E", "inconclusive": "I", "undecided": "U",
         "vacuous": "V", "skipped": "S"}


def stored_runs(runs_root: Path) -> list[dict]:
    """The metadata of every stored run (experiment, label, status, seconds)."""
    metas = []
    for path in sorted(runs_root.glob("*/*.npz")):
        with np.load(path) as data:
            metas.append(json.loads(str(data["__meta__"])))
    return metas


def reference_seconds() -> float:
    """CPU-seconds of a fixed workload (400 full-batch gradient steps of a float64 tanh MLP, 32-256-256-1 on 512
    points, one thread): this machine's speed at the moment of the benchmark. A shared machine's speed drifts with
    its host's load, so run CPU times of two benchmarks compare only in units of this."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rng = torch.Generator().manual_seed(0)
        x, y = (torch.randn(512, n, generator=rng, dtype=torch.float64) for n in (32, 1))
        weights = [(torch.randn(a, b, generator=rng, dtype=torch.float64) / a**0.5).requires_grad_()
                   for a, b in ((32, 256), (256, 256), (256, 1))]
        start = time.process_time()
        for _ in range(400):
            h = x
            for w in weights[:-1]:
                h = torch.tanh(h @ w)
            grads = torch.autograd.grad(((h @ weights[-1] - y) ** 2).mean(), weights)
            with torch.no_grad():
                for w, g in zip(weights, grads, strict=True):
                    w -= 1e-3 * g
        return time.process_time() - start
    finally:
        torch.set_num_threads(threads)


def run(only: str | None = None) -> str:
    """Time the whole quick reproduction (``only``: a comma-separated subset, for checking this benchmark)."""
    subset = ["--only", only] if only else []
    load = os.getloadavg()[0]
    reference = reference_seconds()
    with tempfile.TemporaryDirectory(prefix="repdyn-bench-") as folder:
        out = Path(folder) / "out"
        began = time.time()
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "repdyn", "reproduce", "--scale", "quick", *subset,
                               "--jobs", str(JOBS), "--out", str(out), "--json", "--quiet"], capture_output=True,
                              text=True)
        total = time.perf_counter() - start
        ended = time.time()
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if done.returncode not in (0, 1) or not done.stdout.strip():  # exit 1 without JSON: a run crashed
            raise RuntimeError(f"repdyn reproduce exited with {done.returncode}:\n{done.stderr[-3000:]}")
        summary = json.loads(done.stdout)
        metas = stored_runs(out / "runs")
    per_experiment: dict[str, dict] = defaultdict(lambda: {"runs": 0, "cpu": 0.0, "longest": 0.0, "diverged": 0,
                                                           "analysis": 0.0, "verdicts": defaultdict(int)})
    for meta in metas:
        row = per_experiment[meta["experiment"]]
        row["runs"] += 1
        row["cpu"] += meta.get("cpu_seconds", meta.get("seconds", 0.0))
        row["longest"] = max(row["longest"], meta.get("seconds", 0.0))
        row["diverged"] += meta.get("status") == "diverged"
    for name, seconds in summary["analysis_seconds"].items():
        per_experiment[name]["analysis"] = seconds
    for claim in summary["claims"]:
        documented = claim["verdict"] == "not reproduced" == claim["recorded"]
        per_experiment[claim["experiment"]]["verdicts"][claim["verdict"] + " (documented)" * documented] += 1
    first = min(meta["started_at"] for meta in metas)
    last = max(meta["finished_at"] for meta in metas)
    run_cpu = sum(meta["cpu_seconds"] for meta in metas)
    verdict = "within the 15-minute target" if total <= TARGET_S else "OVER the 15-minute target"
    verdict += " and the 10-minute aim" if total <= AIM_S else ""
    counts = ", ".join(f"{n} {v}" for v, n in summary["verdicts"].items() if n)
    lines = [
        f"### `repdyn reproduce --scale quick --jobs {JOBS}{' --only ' + only if only else ''}`",
        "",
        f"Total wall time **{total / 60:.1f} min** ({total:.0f} s; {verdict}), {JOBS} worker processes, "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the start. Peak memory (max RSS of one process) "
        f"{peak_mib:.0f} MiB. Verdicts of the {summary['total']} claims: {counts}; "
        f"{len(summary['differ'])} differ from the recorded verdict.",
        "",
        f"Machine speed: the fixed reference workload (`reference_seconds`) took {reference:.2f} CPU-s just before "
        "the reproduction; compare run CPU times of two benchmarks in units of it.",
        "",
        f"Where the wall time goes: {first - began:.0f} s before the first run starts (planning, data preparation, "
        f"worker start-up), {last - first:.0f} s from the first run's start to the last run's end (the runs' CPU "
        f"time, {run_cpu:.0f} s, fills {run_cpu / (JOBS * (last - first)):.0%} of the {JOBS} workers' time "
        f"there; the analyses of the experiments finished by then run in the rest), {ended - last:.0f} s after it "
        f"(the analyses of the last experiments to finish, and the report).",
        "",
        f"The analyses took {sum(row['analysis'] for row in per_experiment.values()):.0f} CPU-s in all (reading the "
        "runs, fits, figures; not part of a topic's budget, which counts its runs).",
        "",
        "| paper (topic) | CPU time of its runs (s) | budget (s) | CPU time of its analyses (s) | verdicts |",
        "|---|---:|---:|---:|---|",
    ]
    for topic, budget in PAPER_BUDGET_S.items():
        rows = [row for name, row in per_experiment.items() if name.split(".")[0] == topic]
        tally: dict[str, int] = defaultdict(int)
        for row in rows:
            for key, n in row["verdicts"].items():
                tally[key] += n
        cpu = sum(row["cpu"] for row in rows)
        lines.append(f"| {topic} | {cpu:.0f} | {budget}{' (over)' if cpu > budget else ''} | "
                     f"{sum(row['analysis'] for row in rows):.0f} | "
                     + ", ".join(f"{tally[v]} {v}" for v in SHORT if tally[v]) + " |")
    lines += ["", "| experiment | runs | CPU time of runs (s) | longest run, wall (s) | diverged runs | "
              "analysis CPU (s) | verdicts (R reproduced, D not reproduced as documented, N not reproduced, "
              "E no effect, I inconclusive, U undecided (at quick: a precondition not met, or a claim decided at full "
              "only), V vacuous, S skipped) |",
              "|---|---:|---:|---:|---:|---:|---|"]
    for name, row in sorted(per_experiment.items(), key=lambda item: -item[1]["cpu"]):
        tags = " ".join(f"{n}{SHORT[v]}" for v, n in sorted(row["verdicts"].items()))
        lines.append(f"| {name} | {row['runs']} | {row['cpu']:.1f} | {row['longest']:.1f} | {row['diverged']} | "
                     f"{row['analysis']:.1f} | {tags} |")
    lines += ["", f"Reproduce: `{COMMAND}{' --only ' + only if only else ''}`"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run(sys.argv[2] if len(sys.argv) == 3 and sys.argv[1] == "--only" else None))
