"""Executors: run independent tasks in this process, in local worker processes (joblib), or on a Dask cluster.

Every executor writes results through the store inside the task itself, so an interrupted sweep loses only the
runs in flight, and a resumed one computes only the missing runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

from repdyn.experiments.config import ConfigError
from repdyn.runtime.tasks import Task, execute_task

OnDone = Callable[[Task, str], None]


def threads_per_job(jobs: int) -> int:
    """Split the machine's cores between local worker processes (at least one thread each)."""
    return max(1, (os.cpu_count() or 1) // max(1, jobs))


def run_local(tasks: Sequence[Task], jobs: int, on_done: OnDone) -> None:
    """Run tasks here (jobs == 1) or in ``jobs`` worker processes. Here, a run whose lock another process holds
    (a second reproduction on the same folder) is put off until the others are done, then waited for."""
    if jobs == 1:
        busy = []
        for task in tasks:
            status = execute_task(task, wait=False)
            if status == "busy":
                busy.append(task)
            else:
                on_done(task, status)
        for task in busy:
            on_done(task, execute_task(task))
        return
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")
    results: Iterator[tuple[Task, str]] = parallel(delayed(_execute_pair)(task) for task in tasks)
    for task, status in results:
        on_done(task, status)


def _execute_pair(task: Task) -> tuple[Task, str]:
    return task, execute_task(task)


def check_executor(jobs: int, cluster: str | None) -> None:
    """Validate ``--jobs``/``--cluster`` before anything is written."""
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs} is out of range: must be >= 1")
    if cluster is not None:
        from repdyn.runtime.cluster import parse_cluster

        parse_cluster(cluster)


def run_tasks(tasks: Sequence[Task], *, jobs: int = 1, cluster: str | None = None,
              on_done: OnDone = lambda task, status: None) -> None:
    """Dispatch to the local executor or a Dask cluster (``tcp://host:8786`` or ``local:N``)."""
    check_executor(jobs, cluster)
    if cluster is None:
        run_local(tasks, jobs, on_done)
        return
    from repdyn.runtime.cluster import run_on_cluster

    run_on_cluster(tasks, cluster, on_done)
