"""Executors: run independent tasks in this process, in local worker processes (loky), or on a Dask cluster.

Every executor writes results through the store inside the task itself, so an interrupted sweep loses only the
runs in flight, and a resumed one computes only the missing runs. A local worker process watches its parent and
exits when the parent is gone (killed, even by SIGKILL), so no orphaned worker computes on.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

from repdyn.framework.config import ConfigError
from repdyn.runtime.tasks import Task, execute_task

OnDone = Callable[[Task, str], None]
FollowUp = Callable[[], Any]  # picklable: a functools.partial of a module-level function
# the thread pools a worker process limits to its share of the cores (joblib's loky backend limits the same)
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMBA_NUM_THREADS", "NUMEXPR_NUM_THREADS")


PARENT_POLL_S = 0.5
# loky replaces a worker whose resident memory grew by 300 MB since its first task, and warns that a worker
# "stopped". A worker here holds whole experiments of differing sizes and is replaced between tasks, so nothing is
# lost and the warning tells a user of repdyn nothing.
WORKER_REPLACED = "A worker stopped while some jobs were given to the executor"


def _exit_with_parent(parent: int) -> None:
    """Worker initialiser: a daemon thread that ends this process once its parent has died (it is re-parented)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="repdyn-parent-watch", daemon=True).start()


def threads_per_job(jobs: int) -> int:
    """Split the machine's cores between local worker processes (at least one thread each)."""
    return max(1, (os.cpu_count() or 1) // max(1, jobs))


def run_local(tasks: Sequence[Task], jobs: int, on_done: OnDone, *, first: Sequence[FollowUp] = (),
              then: Callable[[Task, str], Sequence[FollowUp]] = lambda task, status: (),
              on_result: Callable[[Any], None] = lambda value: None) -> None:
    """Run tasks here (jobs == 1) or in ``jobs`` worker processes. Follow-ups are further work for the same
    workers: ``first`` at once, and whatever ``then(task, status)`` returns once a task is done (the analysis of an
    experiment whose runs are all stored); each one's return value goes to ``on_result``. A follow-up goes ahead of
    the tasks still waiting, so follow-ups fill the workers that the last long runs leave idle. Here, a run whose
    lock another process holds (a second reproduction on the same folder) is put off until the others are done,
    then waited for."""
    if jobs == 1:
        def finish(task: Task, status: str) -> None:
            on_done(task, status)
            for follow_up in then(task, status):
                on_result(follow_up())

        for follow_up in first:
            on_result(follow_up())
        busy = []
        for task in tasks:
            status = execute_task(task, wait=False)
            if status == "busy":
                busy.append(task)
            else:
                finish(task, status)
        for task in busy:
            finish(task, execute_task(task))
        return
    from joblib.externals.loky import ProcessPoolExecutor

    with warnings.catch_warnings():  # a process-wide filter: loky warns from its manager thread
        warnings.filterwarnings("ignore", message=WORKER_REPLACED, category=UserWarning)
        threads = str(threads_per_job(jobs))
        env = {var: os.environ.get(var, threads) for var in THREAD_VARS}
        executor = ProcessPoolExecutor(max_workers=jobs, env=env, initializer=_exit_with_parent,
                                       initargs=(os.getpid(),))
        waiting, ready = deque(tasks), deque(first)
        running: dict[Future, Task | None] = {}  # None: a follow-up
        try:
            while waiting or ready or running:
                while len(running) < jobs and (ready or waiting):
                    if ready:
                        running[executor.submit(ready.popleft())] = None
                    else:
                        task = waiting.popleft()
                        running[executor.submit(execute_task, task)] = task
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    task = running.pop(future)
                    if task is None:
                        on_result(future.result())
                        continue
                    status = future.result()
                    on_done(task, status)
                    ready.extend(then(task, status))
        except BaseException:  # a failed run or Ctrl-C: stop the runs in flight too
            executor.shutdown(wait=False, kill_workers=True)
            raise
        executor.shutdown()


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
