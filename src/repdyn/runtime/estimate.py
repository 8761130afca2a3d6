"""Cost estimates before anything runs (``repdyn plan``): per experiment, the runs to compute, their CPU time and
peak memory.

A stored run's cost is known (its metadata records its seconds). For the others, one run per experiment is
calibrated on this machine: it starts in a forked process that watches its training loop's progress reports
(:mod:`repdyn.nn.progress`) for ``budget`` CPU-seconds, then stops it; its rate gives the CPU time of the whole
loop, and the memory it added to the process while calibrating is its peak memory (a lower bound). A run that
finishes within the budget is timed whole. The experiment's runs are assumed to cost alike, and a run of several
loops is estimated from its first: the table says which basis each estimate has.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from repdyn.experiments.base import RunSpec
from repdyn.experiments.config import from_dict
from repdyn.nn.progress import reporting
from repdyn.runtime import registry
from repdyn.runtime.reproduce import Plan, tasks_for
from repdyn.runtime.tasks import Task


@dataclass(frozen=True)
class Estimate:
    experiment: str
    runs: int
    stored: int
    cpu_seconds: float | None
    peak_mib: float | None
    basis: str


class _Enough(Exception):
    """Raised inside the calibrated run once its rate is known."""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _calibrate_in_child(task: Task, budget: float, queue: Any) -> None:
    """Run ``task`` until ``budget`` CPU-seconds have passed with progress reported; put what was seen."""
    torch.set_num_threads(1)  # a forked child must not use the parent's OpenMP pool; CPU time is what counts
    start = _cpu()
    baseline_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # what the fork shares
    seen: list[tuple[float, int, int]] = []

    def listener(step: int, total: int, loss: Any = None) -> None:
        now = _cpu() - start
        if not seen or step < seen[-1][1]:
            seen.append((now, step, total))  # the first report of a loop
        elif now > budget and step > seen[-1][1]:
            seen.append((now, step, total))
            raise _Enough

    experiment = registry.get(task.experiment)
    config = from_dict(experiment.Config, task.config)
    finished = False
    try:
        with reporting(listener):
            experiment.execute(config, RunSpec(task.label, task.params), task.seed, task.device)
        finished = True
    except _Enough:
        pass
    except Exception as err:  # noqa: BLE001 - a run that fails here fails in the reproduction too; say so
        queue.put(("error", f"{type(err).__name__}: {err}", 0.0))
        return
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - baseline_mib
    elapsed = _cpu() - start
    if finished:
        queue.put(("timed", elapsed, peak_mib))
    else:
        (t0, s0, _), (t1, s1, total) = seen[-2], seen[-1]
        rate = (s1 - s0) / max(t1 - t0, 1e-9)
        queue.put(("rate", t0 + (total - s0) / rate, peak_mib, s1, total))


def _cpu_of(pid: int | None) -> float:
    """CPU-seconds a process has used (Linux /proc; 0 where unavailable, leaving the wall-clock guard)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _calibrate(task: Task, budget: float, limit: float) -> tuple[float | None, float | None, str]:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_calibrate_in_child, args=(task, budget, queue), daemon=True)
    child.start()
    deadline = time.monotonic() + 30 * limit  # a guard for a child that cannot get the processor at all
    while child.is_alive() and queue.empty() and _cpu_of(child.pid) < limit and time.monotonic() < deadline:
        time.sleep(0.02)
    if queue.empty():
        child.kill()
        child.join()
        return None, None, f"no estimate: run {task.label!r} reported no progress within {limit:g} CPU-s"
    found = queue.get()
    child.join()
    if found[0] == "error":
        return None, None, f"run {task.label!r} failed while calibrating: {found[1]}"
    if found[0] == "timed":
        return found[1], found[2], f"run {task.label!r} timed whole"
    _, seconds, peak, steps, total = found
    return seconds, peak, f"run {task.label!r}: {steps} of {total} steps calibrated"


def estimate(plan_: Plan, *, budget: float = 1.0, limit: float = 2.0) -> list[Estimate]:
    """The cost of what ``execute(plan_)`` would compute, per experiment (skipped experiments cost nothing)."""
    store = plan_.store
    by_experiment: dict[str, list[Task]] = {}
    for task in tasks_for(plan_):
        by_experiment.setdefault(task.experiment, []).append(task)
    estimates = []
    for item in plan_.experiments:
        tasks = by_experiment.get(item.name, [])
        todo = [task for task in tasks if store.verified(task.experiment, task.key) is None]
        stored = len(tasks) - len(todo)
        if item.skip_reason is not None or not todo:
            reason = f"skipped: {item.skip_reason}" if item.skip_reason else "every run is stored"
            estimates.append(Estimate(item.name, 0, stored, 0.0, None, reason))
            continue
        seconds, peak, basis = _calibrate(todo[0], budget, limit)
        total = None if seconds is None else seconds * len(todo)
        estimates.append(Estimate(item.name, len(todo), stored, total, peak, basis))
    return estimates


def total_seconds(estimates: Sequence[Estimate]) -> float | None:
    """The sum of the estimates, None when any is unknown."""
    values = [e.cpu_seconds for e in estimates]
    return None if any(v is None for v in values) else float(sum(values))


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"



