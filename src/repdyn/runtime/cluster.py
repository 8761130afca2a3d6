"""Dask execution: each run is a Dask task; results flow into the same result store.

``address`` is a running scheduler (``tcp://host:8786``) or ``local:N`` for a LocalCluster of N worker
processes started for this sweep. A task whose worker dies is retried by Dask on another worker; since a task
writes its result atomically and skips work already stored, retries and resumed sweeps never duplicate work.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace

from repdyn.experiments.config import ConfigError
from repdyn.runtime.tasks import Task, execute_task

RETRIES = 3


def parse_cluster(address: str) -> tuple[str, int | None]:
    """("local", N) for ``local:N``; (address, None) for a scheduler address."""
    if address.startswith("local:"):
        count = address.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise ConfigError(f"--cluster {address!r}: write local:N with N >= 1 workers")
        return "local", int(count)
    if "://" not in address:
        raise ConfigError(f"--cluster {address!r} is not a scheduler address (tcp://host:8786) or local:N")
    return address, None


def run_on_cluster(tasks: Sequence[Task], address: str, on_done: Callable[[Task, str], None]) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ConfigError("--cluster needs Dask: pip install 'repdyn[cluster]'") from None
    kind, workers = parse_cluster(address)
    with ExitStack() as stack:
        if kind == "local":
            cluster = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                       dashboard_address=None))
            threads = max(1, (os.cpu_count() or 1) // workers)
            tasks = [replace(task, threads=threads) for task in tasks]
            client = stack.enter_context(Client(cluster))
        else:
            client = stack.enter_context(Client(address))
        futures = {client.submit(execute_task, task, key=f"repdyn-{task.experiment}-{task.key}",
                                 retries=RETRIES, pure=False): task for task in tasks}
        for future in as_completed(futures):
            on_done(futures[future], future.result())
