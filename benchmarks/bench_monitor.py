"""Monitor overhead on three training scripts, each trained without and with a Monitor at its default schedule,
side by side in one process: an MLP on the digits in the README's loop (defined here, cross-entropy, the loss
passed to the Monitor), the digits CNN (examples/digits_cnn_monitor.py, squared error, 30 epochs) and the
Transformer encoder on token ids (examples/transformer_monitor.py, cross-entropy, AdamW, 10 epochs).

For each example one fresh subprocess trains plain, monitored, plain, monitored, ... (same seed, so the same model
and data order); the fastest run of each kind is compared (so the first monitored run's one-time torch.func set-up
is left out), in wall time and in the process's CPU time (user + system; one torch thread), which other jobs on a
shared machine disturb less. The timed span is the whole training function: data, model, the Monitor's construction
and checks, the loop with its recordings; the monitored runs also save the recording. torch.func's first use
imports torch._dynamo, a one-time cost of the process that the Monitor pays at construction (its NTK check): it is
imported and timed before the first run and reported apart. Peak memory: max RSS after the plain runs minus the RSS
after imports, and the further rise during the monitored runs.
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
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
REPEATS = 3
DESCRIPTIONS = {
    "mlp": "MLP (64 → 128 → 128 → 10, ReLU) on scikit-learn's digits in the README's loop, cross-entropy with the loss "
           "passed to monitor.step, SGD + momentum, batch 32, {steps} steps; the Monitor at its default schedule: "
           "{records} log-spaced recordings (the two ReLU layers; 200 probe inputs; two-point on 4 pairs, NTK on 32 "
           "inputs at 4 of the recordings, elasticity, effective rank, weight movement)",
    "mlp-long": "The same MLP trained 5× as long ({steps} steps), the same default schedule: {records} recordings",
    "digits_cnn_monitor": "SmallCNN (1×8×8 → conv16 → conv32 → 10) on scikit-learn's digits, squared error, SGD + "
                          "momentum, batch 32, {steps} steps; the Monitor at its default schedule: {records} "
                          "log-spaced recordings (layers layer0, layer1; 200 probe inputs; two-point on 4 pairs, NTK "
                          "on 32 inputs at 4 of the recordings, elasticity, effective rank)",
    "transformer_monitor": "2-layer nn.TransformerEncoder (width 32, 4 heads) on 12 integer token ids, cross-entropy, "
                           "AdamW, batch 32, {steps} steps; the Monitor at its default schedule: {records} log-spaced "
                           "recordings (layers encoder.layers.0, encoder.layers.1; 80 probe sequences; two-point on 4 "
                           "pairs, NTK on 32 sequences at 4 of the recordings, elasticity, effective rank)",
    "transformer_monitor-long": "The same Transformer trained 3× as long ({steps} steps), the same default schedule: "
                                "{records} recordings",
}


def _load(name: str) -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class _Mlp:
    """The MLP script: the CNN example's digits split, an nn.Sequential MLP, the README's loop order."""

    @staticmethod
    def train(*, epochs: int = 20, batch_size: int = 32, lr: float = 0.05, seed: int = 0,
              monitor: bool = True) -> object:
        import math

        import torch
        from torch import nn

        from repdyn.monitor import Monitor

        cnn = _load("digits_cnn_monitor")
        x_train, y_train, x_test, y_test = (t.flatten(1) if t.dim() > 1 else t
                                            for t in cnn.digits_split(seed, "cpu"))
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        total = epochs * math.ceil(len(y_train) / batch_size)
        watcher = (Monitor(model, ["1", "3"], x_test, y_test, total_steps=total, loss_kind="cross_entropy",
                           name="mlp") if monitor else None)
        generator = torch.Generator().manual_seed(seed)
        step = 0
        for _ in range(epochs):
            for batch in torch.randperm(len(y_train), generator=generator).split(batch_size):
                loss = nn.functional.cross_entropy(model(x_train[batch]), y_train[batch])
                if watcher is not None:
                    watcher.step(step, loss)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
        if watcher is not None:
            watcher.finish()
        model.eval()
        with torch.no_grad():
            accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
        return cnn.Run(model=model, monitor=watcher, test_accuracy=accuracy, steps=total)


def _worker(name: str) -> dict[str, object]:
    import resource

    import torch

    torch.set_num_threads(1)
    example = _Mlp if name.startswith("mlp") else _load(name.removesuffix("-long"))
    longer = {"mlp-long": 100, "transformer_monitor-long": 30}
    train = ((lambda monitor: example.train(monitor=monitor, epochs=longer[name])) if name in longer
             else (lambda monitor: example.train(monitor=monitor)))

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
            run = train(mode == "monitor")
            if run.monitor is not None:
                with tempfile.TemporaryDirectory() as tmp:
                    run.monitor.save(tmp)
            runs[mode].append({
                "seconds": time.perf_counter() - wall, "cpu_seconds": cpu() - cpu0, "accuracy": run.test_accuracy,
                "steps": run.steps, "records": len(run.monitor._steps) if run.monitor else 0,
                "record_seconds": float(sum(run.monitor._seconds)) if run.monitor else 0.0,
                "monitor_cpu_seconds": run.monitor.cpu_seconds if run.monitor else 0.0})
            peaks[mode] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"runs": runs, "import_seconds": import_seconds, "plain_peak_mib": (peaks["plain"] - rss) / 1024,
            "monitor_extra_peak_mib": max(peaks["monitor"] - peaks["plain"], 0) / 1024}


def _times(rows: list[dict[str, float]]) -> str:
    return ", ".join(f"{r['seconds']:.2f}" for r in rows)


def _section(name: str) -> list[str]:
    out = subprocess.run([sys.executable, __file__, "--worker", name], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    result = json.loads(out.stdout.strip().splitlines()[-1])
    runs = result["runs"]
    plain = min(runs["plain"], key=lambda r: r["seconds"])
    watched = min(runs["monitor"], key=lambda r: r["seconds"])
    plain_cpu = min(r["cpu_seconds"] for r in runs["plain"])
    watched_cpu = min(r["cpu_seconds"] for r in runs["monitor"])
    description = DESCRIPTIONS[name].format(steps=plain["steps"], records=watched["records"])
    own = min(r["monitor_cpu_seconds"] for r in runs["monitor"])
    return [
        "#### " + {"mlp": "an MLP in the README loop", "mlp-long": "the same MLP, 5× longer",
                   "transformer_monitor-long": "the same Transformer, 3× longer"}.get(name, f"examples/{name}.py"),
        "",
        f"{description}. One process, runs alternating plain / monitored, fastest of {REPEATS} each; 1 torch "
        f"thread, {os.cpu_count()} CPUs (shared machine: other jobs were running).",
        "",
        "| run | wall time (s) | CPU time (s) | time in recordings (s) | peak memory (MiB) | test accuracy |",
        "|---|---:|---:|---:|---:|---:|",
        f"| plain PyTorch loop | {plain['seconds']:.2f} | {plain_cpu:.2f} | — | {result['plain_peak_mib']:.0f} | "
        f"{plain['accuracy']:.3f} |",
        f"| same loop + Monitor | {watched['seconds']:.2f} | {watched_cpu:.2f} | {watched['record_seconds']:.2f} | "
        f"+{result['monitor_extra_peak_mib']:.0f} | {watched['accuracy']:.3f} |",
        "",
        f"Overhead of the Monitor: **{100 * own / plain_cpu:.1f} % CPU time** (target ≤ 5 %): the Monitor's own "
        f"CPU time ({1000 * own:.0f} ms: construction and checks, {watched['records']} recordings, saving; the "
        f"least of {REPEATS} runs) over the plain loop's; side by side the whole monitored run took "
        f"{100 * (watched_cpu / plain_cpu - 1):+.1f} % CPU time, "
        f"{100 * (watched['seconds'] / plain['seconds'] - 1):+.1f} % wall time (both within the machine's run-to-run "
        "noise when the overhead is small). Not included: the one-time import "
        f"of torch._dynamo by torch.func's first call ({result['import_seconds']:.2f} s wall, once per process). "
        "Equal accuracies: the monitor does not change training.",
        "",
        f"All runs, wall (s): plain {_times(runs['plain'])}; monitored {_times(runs['monitor'])}.",
        "",
    ]


def run() -> str:
    lines = ["### Monitor overhead (`repdyn.Monitor`)", "",
             "The timed span is the whole training function: data, model, the Monitor's construction and checks, the "
             "loop with its recordings, the final recording; the monitored runs also save the recording. With one "
             "torch thread the CPU time is the wall time an idle machine would take, while wall times on a shared "
             "machine vary by up to 2× between identical runs.", ""]
    for name in DESCRIPTIONS:
        lines += _section(name)
    lines.append(f"Reproduce: `{COMMAND}`")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        print(json.dumps(_worker(sys.argv[2])))
    else:
        print(run())
