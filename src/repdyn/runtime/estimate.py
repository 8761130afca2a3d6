"""Cost estimates before anything runs (``repdyn plan``): per experiment, the runs to compute, their CPU time and
peak memory.

A stored run's cost is known (its metadata records its seconds). For the others, one run per experiment is
calibrated on this machine: it starts in a forked process that watches its training loop's progress reports
(:mod:`repdyn.nn.progress`) for ``budget`` CPU-seconds, then stops it; its rate gives the CPU time of the whole
loop, and the memory it added to the process while calibrating is its peak memory (a lower bound). A run that
finishes within the budget is timed whole. The experiment's runs are assumed to cost alike, and a run of several
loops is estimated from its first: the table says which basis each estimate has. Calibrations run side by side,
one per processor; one whose set-up outlasts its CPU share, whose first step does, or whose loop reports a step
count that is only a cap (:class:`~repdyn.nn.progress.Cap`) gives a bound instead of a rate.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from repdyn.framework.base import RunSpec
from repdyn.framework.config import from_dict, run_view
from repdyn.nn.progress import Cap, reporting
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
    bound: str = ""
    """"at least" or "at most" where the calibration could only bound the cost, else ""."""

    def cost(self) -> str:
        """The CPU time as a table shows it: "?" when unknown, "≥ 5 min" for a lower bound."""
        sign = {"at least": "≥ ", "at most": "≤ "}.get(self.bound, "")
        return sign + format_seconds(self.cpu_seconds)


class _Enough(Exception):
    """Raised inside the calibrated run once its rate is known, or when its CPU-time limit is reached."""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _calibrate_in_child(task: Task, budget: float, limit: float, queue: Any) -> None:
    """Run ``task`` until ``budget`` CPU-seconds have passed with progress reported, or ``limit`` with a single
    report; put what was seen."""
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

    def out_of_time(signum: int, frame: Any) -> None:
        raise _Enough

    signal.signal(signal.SIGPROF, out_of_time)
    signal.setitimer(signal.ITIMER_PROF, limit)  # counts this process's CPU time, as the limit does
    experiment = registry.get(task.experiment)
    config = run_view(from_dict(experiment.Config, task.config), shared=bool(task.shared))
    finished = False
    try:
        with reporting(listener):
            experiment.execute(config, RunSpec(task.label, task.params, shared=task.shared), task.seed, task.device)
        finished = True
    except _Enough:
        pass
    except Exception as err:  # noqa: BLE001 - a run that fails here fails in the reproduction too; say so
        queue.put(("error", f"{type(err).__name__}: {err}", 0.0))
        return
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - baseline_mib
    elapsed = _cpu() - start
    if finished:
        queue.put(("timed", elapsed, peak_mib))
    elif len(seen) >= 2 and seen[-1][1] > seen[-2][1]:
        (t0, s0, _), (t1, s1, total) = seen[-2], seen[-1]
        rate = (s1 - s0) / max(t1 - t0, 1e-9)
        queue.put(("rate", t0 + (total - s0) / rate, peak_mib, s1, total))
    elif seen:  # one step of the first loop in the time allowed: its cost, set-up included, bounds the rate
        t0, s0, total = seen[0]
        queue.put(("first", t0 * total / (s0 + 1), peak_mib, s0 + 1, total))


def _cpu_of(pid: int | None) -> float:
    """CPU-seconds a process has used (Linux /proc; 0 where unavailable, leaving the wall-clock guard)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


class _Calibration:
    """One forked calibration of ``task``, stopped once it has used ``limit`` CPU-seconds."""

    def __init__(self, task: Task, budget: float, limit: float) -> None:
        context = multiprocessing.get_context("fork")
        self.task, self.limit, self.queue = task, limit, context.Queue()
        self.child = context.Process(target=_calibrate_in_child, args=(task, budget, limit, self.queue), daemon=True)
        self.child.start()
        self.deadline = time.monotonic() + 30 * limit + 30  # a guard for a child that cannot get the processor at all

    def running(self) -> bool:
        return (self.child.is_alive() and self.queue.empty() and _cpu_of(self.child.pid) < 1.5 * self.limit + 1
                and time.monotonic() < self.deadline)

    def result(self) -> tuple[float | None, float | None, str, str]:
        """CPU-seconds of the run, its peak MiB, the basis, and the bound ("at least", "at most" or "")."""
        label = self.task.label
        if self.queue.empty():
            self.child.kill()
            self.child.join()
            return self.limit, None, f"run {label!r} reported no progress within {self.limit:.3g} CPU-s", "at least"
        found = self.queue.get()
        self.child.join()
        if found[0] == "error":
            return None, None, f"run {label!r} failed while calibrating: {found[1]}", ""
        if found[0] == "timed":
            return found[1], found[2], f"run {label!r} timed whole", ""
        _, seconds, peak, steps, total = found
        of = f"{steps} of {'at most ' if isinstance(total, Cap) else ''}{total} steps"
        if found[0] == "first":
            return seconds, peak, f"run {label!r}: {of} in {self.limit:.3g} CPU-s, set-up included", "at most"
        return seconds, peak, f"run {label!r}: {of} calibrated", "at most" if isinstance(total, Cap) else ""


def workers() -> int:
    """The processors this process may use: calibrations run side by side on them."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def estimate(plan_: Plan, *, within: float = 45.0, budget: float | None = None) -> list[Estimate]:
    """The cost of what ``execute(plan_)`` would compute, per experiment (skipped experiments cost nothing).

    Calibrations run side by side, one per processor, each for at most ``limit`` CPU-seconds, chosen so that all
    of them end within about ``within`` seconds (never less than 2); ``budget`` (default ``limit / 2``) is how
    long a loop is watched before its rate is taken."""
    store = plan_.store
    by_experiment: dict[str, list[Task]] = {}
    for task in tasks_for(plan_):
        by_experiment.setdefault(task.experiment, []).append(task)
    found: dict[str, Estimate] = {}
    todo_of: dict[str, list[Task]] = {}
    for item in plan_.experiments:
        tasks = by_experiment.get(item.name, [])
        todo = [task for task in tasks if store.verified(task.folder, task.key) is None]
        if item.skip_reason is not None or not todo:
            reason = f"skipped: {item.skip_reason}" if item.skip_reason else "every run is stored"
            found[item.name] = Estimate(item.name, 0, len(tasks) - len(todo), 0.0, None, reason)
        else:
            todo_of[item.name] = todo
    slots = workers()
    limit = max(2.0, slots * within / max(len(todo_of), 1))
    budget = limit / 2 if budget is None else min(budget, limit)
    waiting, running = list(todo_of), {}
    while waiting or running:
        while waiting and len(running) < slots:
            name = waiting.pop(0)
            running[name] = _Calibration(todo_of[name][0], budget, limit)
        time.sleep(0.02)
        for name in [n for n, c in running.items() if not c.running()]:
            seconds, peak, basis, bound = running.pop(name).result()
            todo = todo_of[name]
            stored = len(by_experiment[name]) - len(todo)
            total = None if seconds is None else seconds * len(todo)
            found[name] = Estimate(name, len(todo), stored, total, peak, basis, bound)
    return [found[item.name] for item in plan_.experiments]


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



