"""Checks of a reproduction made after planning and before anything is written (``manifest.json``, a lock, a run):
the executor (``--jobs``, ``--cluster``: a scheduler address must answer), the output folder (it must be a folder
this user can write), the workers (more than the processors is warned about), and the memory of a changed config.

Memory: an experiment whose config differs from its scale's (``--set``) is tried before anything is written: its
first run starts in a forked process limited to the memory available to one of ``--jobs`` workers, and is stopped
after its first training step or :data:`PROBE_CPU_S` CPU-seconds. A run that cannot allocate its memory there, or
whose memory so far (a lower bound of its peak) times ``--jobs`` exceeds what is available, is refused with the
numbers (:class:`~repdyn.framework.config.ConfigError`, exit 2). The scales as shipped are sized by the project
(``repdyn plan`` measures them) and are not tried.
"""

from __future__ import annotations

import errno
import logging
import multiprocessing
import resource
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from repdyn.framework.base import RunSpec
from repdyn.framework.config import ConfigError, from_dict, run_view, to_dict
from repdyn.nn.progress import reporting
from repdyn.runtime.atomic import WriteError
from repdyn.runtime.estimate import workers
from repdyn.runtime.executors import check_executor
from repdyn.runtime.progress import collecting_warnings
from repdyn.runtime.reproduce import Plan, tasks_for
from repdyn.runtime.tasks import Task, run_threads

PROBE_CPU_S = 2.0
GIB = 2**30
log = logging.getLogger("repdyn")


def preflight(plan_: Plan, jobs: int, cluster: str | None) -> None:
    """Raise ConfigError (bad input, exit 2) for what cannot work, before anything is written."""
    check_executor(jobs, cluster)
    if cluster is not None and not cluster.startswith("local:"):
        from repdyn.runtime.cluster import check_reachable

        check_reachable(cluster)
    cores = workers()
    if cluster is None and jobs > cores:
        log.warning("warning: --jobs %d is more than the %d processors here: the runs share them, and each worker "
                    "holds its own memory", jobs, cores)
    if cluster is None and plan_.device == "cpu":
        check_memory(plan_, jobs)
    check_out(plan_.out)


def check_out(out: Path) -> None:
    """``out`` must be a folder this process can create and write in (a full disk is a WriteError, exit 1)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise WriteError(err.errno, f"cannot write in the folder {out}: {err.strerror}") from None
        raise ConfigError(f"--out {out} cannot be written: {err.strerror or err}") from None


def available_bytes() -> int | None:
    """Memory this process may still use: MemAvailable, or less where a cgroup limit leaves less (Linux)."""
    found = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            found.append(int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def _vm_size() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class _Enough(Exception):
    """Raised inside the probed run once its first step is done or its CPU time is up."""


def _probe_in_child(task: Task, allowed: int | None, queue: Any) -> None:
    """Run ``task`` until its first step is done or PROBE_CPU_S CPU-seconds, with at most ``allowed`` more bytes of
    address space; put ("memory", message) when it could not allocate, else ("ok", peak bytes so far)."""
    vm = _vm_size()
    if allowed is not None and vm is not None:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = vm + allowed if hard == resource.RLIM_INFINITY else min(vm + allowed, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    first: list[int] = []

    def listener(step: int, total: int, loss: Any = None) -> None:
        if first and step > first[0]:
            raise _Enough
        first[:] = first or [step]

    def out_of_time(signum: int, frame: Any) -> None:
        raise _Enough

    signal.signal(signal.SIGPROF, out_of_time)
    signal.setitimer(signal.ITIMER_PROF, PROBE_CPU_S)
    from repdyn.runtime import registry

    experiment = registry.get(task.experiment)
    config = run_view(from_dict(experiment.Config, task.config), shared=bool(task.shared))
    try:
        with run_threads(), reporting(listener), collecting_warnings():  # the run itself reports its warnings
            experiment.execute(config, RunSpec(task.label, task.params, shared=task.shared), task.seed, task.device)
    except _Enough:
        pass
    except MemoryError as err:
        queue.put(("memory", f"MemoryError: {err}"))
        return
    except Exception as err:  # noqa: BLE001 - the run itself reports any other failure
        message = str(err).splitlines()[0] if str(err) else ""
        if "alloc" in message.lower() or "out of memory" in message.lower():
            queue.put(("memory", f"{type(err).__name__}: {message}"))
            return
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    queue.put(("ok", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - baseline))


def _probe(task: Task, allowed: int | None) -> tuple[str, Any]:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_probe_in_child, args=(task, allowed, queue), daemon=True)
    child.start()
    deadline = time.monotonic() + 10 * PROBE_CPU_S + 10  # a child that sleeps, or cannot get the processor
    while child.is_alive() and queue.empty() and time.monotonic() < deadline:
        time.sleep(0.01)
    found = ("ok", 0) if queue.empty() else queue.get()
    child.kill()
    child.join()
    return found


def check_memory(plan_: Plan, jobs: int) -> None:
    """Try the first run of each experiment whose config was changed from its scale's (see the module's doc)."""
    changed = {item.name for item in plan_.experiments
               if item.skip_reason is None and to_dict(item.config) != to_dict(item.experiment.config(plan_.scale))}
    if not changed:
        return
    available = available_bytes()
    per_worker = None if available is None else available // jobs
    seen: set[str] = set()
    for task in tasks_for(plan_):
        if task.experiment not in changed or task.experiment in seen or plan_.store.has(task.folder, task.key):
            continue
        seen.add(task.experiment)
        kind, found = _probe(task, per_worker)
        where = "" if available is None else (f" ({available / GIB:.1f} GiB available here"
                                               + (f", {per_worker / GIB:.1f} GiB to each of --jobs {jobs}"
                                                  if jobs > 1 else "") + ")")
        if kind == "memory":
            raise ConfigError(f"{task.experiment}: run {task.label!r} does not fit in memory{where}: {found}")
        if available is not None and found * jobs > available:
            raise ConfigError(f"{task.experiment}: run {task.label!r} used {found / GIB:.1f} GiB in its first step "
                              f"alone; --jobs {jobs} of them need more than the {available / GIB:.1f} GiB available")
