"""Monitor overhead: the digits CNN example (examples/digits_cnn_monitor.py, default 30 epochs) trained without and
with a Monitor at its default schedule, side by side in one process.

One fresh subprocess trains plain, monitored, plain, monitored, ... (same seed, so the same model and data
order); the fastest run of each kind is compared (so the first monitored run's one-time torch.func set-up is left
out), in wall time and in the process's CPU time (user + system; one torch
thread), which other jobs on a shared machine disturb less. The timed span is the whole training function: data,
model, the Monitor's construction and checks, the loop with its recordings; the monitored runs also save the
recording. torch.func's first use imports torch._dynamo, a one-time cost of the process that the Monitor pays at
construction (its NTK check): it is imported and timed before the first run and reported apart. Peak memory:
max RSS after the plain runs minus the RSS after imports, and the further rise during the monitored runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = "python benchmarks/bench_monitor.py"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "digits_cnn_monitor.py"
REPEATS = 3


def _worker() -> dict[str, object]:
    import importlib.util
    import resource

    import torch

    torch.set_num_threads(1)
    spec = importlib.util.spec_from_file_location("digits_cnn_monitor", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example
    spec.loader.exec_module(example)

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    start = time.perf_counter()
    import torch._dynamo  # noqa: F401  (the one-time import behind torch.func's first call)

    import_seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    runs: dict[str, list[dict[str, float]]] = {"plain": [], "monitor": []}
    peaks = {}
    for _ in range(REPEATS):
        for mode in ("plain", "monitor"):
            wall, cpu0 = time.perf_counter(), cpu()
            run = example.train(monitor=mode == "monitor")
            if run.monitor is not None:
                with tempfile.TemporaryDirectory() as tmp:
                    run.monitor.save(tmp)
            runs[mode].append({
                "seconds": time.perf_counter() - wall, "cpu_seconds": cpu() - cpu0, "accuracy": run.test_accuracy,
                "steps": run.steps, "records": len(run.monitor._steps) if run.monitor else 0,
                "record_seconds": float(sum(run.monitor._seconds)) if run.monitor else 0.0})
            peaks[mode] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"runs": runs, "import_seconds": import_seconds, "plain_peak_mib": (peaks["plain"] - rss) / 1024,
            "monitor_extra_peak_mib": max(peaks["monitor"] - peaks["plain"], 0) / 1024}


def _times(rows: list[dict[str, float]]) -> str:
    return ", ".join(f"{r['seconds']:.2f}" for r in rows)


def run() -> str:
    out = subprocess.run([sys.executable, __file__, "--worker"], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    result = json.loads(out.stdout.strip().splitlines()[-1])
    runs = result["runs"]
    plain = min(runs["plain"], key=lambda r: r["seconds"])
    watched = min(runs["monitor"], key=lambda r: r["seconds"])
    plain_cpu = min(r["cpu_seconds"] for r in runs["plain"])
    watched_cpu = min(r["cpu_seconds"] for r in runs["monitor"])
    lines = [
        "### Monitor overhead (`repdyn.Monitor`, examples/digits_cnn_monitor.py)",
        "",
        f"SmallCNN (1×8×8 → conv16 → conv32 → 10) on scikit-learn's digits, squared error, SGD + momentum, batch 32, "
        f"{plain['steps']} steps; the Monitor at its default schedule: {watched['records']} log-spaced recordings "
        f"(layers layer0, layer1; 200 probe inputs; two-point on 4 pairs, NTK on 32 inputs at 4 of the recordings, "
        f"elasticity, effective rank). One process, runs alternating plain / monitored, fastest of {REPEATS} each; "
        f"1 torch thread, {os.cpu_count()} CPUs (shared machine: other jobs were running).",
        "",
        "| run | wall time (s) | CPU time (s) | time in recordings (s) | peak memory (MiB) | test accuracy |",
        "|---|---:|---:|---:|---:|---:|",
        f"| plain PyTorch loop | {plain['seconds']:.2f} | {plain_cpu:.2f} | — | {result['plain_peak_mib']:.0f} | "
        f"{plain['accuracy']:.3f} |",
        f"| same loop + Monitor | {watched['seconds']:.2f} | {watched_cpu:.2f} | {watched['record_seconds']:.2f} | "
        f"+{result['monitor_extra_peak_mib']:.0f} | {watched['accuracy']:.3f} |",
        "",
        f"Overhead of the Monitor: **{100 * (watched_cpu / plain_cpu - 1):+.1f} % CPU time** (target ≤ 10 %), "
        f"{100 * (watched['seconds'] / plain['seconds'] - 1):+.1f} % wall time; with one torch thread the CPU time "
        "is the wall time an idle machine would take, while wall times on a shared machine vary by up to 2× between "
        "identical runs (below). Not included: the one-time import of torch._dynamo by torch.func's first call "
        f"({result['import_seconds']:.2f} s wall, once per process). Equal accuracies: the monitor does not change "
        "training.",
        "",
        f"All runs, wall (s): plain {_times(runs['plain'])}; monitored {_times(runs['monitor'])}.",
        "",
        f"Reproduce: `{COMMAND}`",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        print(json.dumps(_worker()))
    else:
        print(run())
