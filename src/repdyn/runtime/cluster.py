"""Dask execution: each run is a Dask task; results flow into the same result store.

``address`` is a running scheduler (``tcp://host:8786``) or ``local:N`` for a LocalCluster of N worker
processes started for this sweep. A task whose worker dies (killed, out of memory, a lost node) is rescheduled by
the Dask scheduler on another worker (up to its ``distributed.scheduler.allowed-failures``, 3 by default); an
exception other than a failed run (say a file system that went away) is retried ``RETRIES`` times; a full disk
fails the run (:class:`~repdyn.runtime.tasks.TaskFailed`, naming the folder). Since a task writes its result
atomically and skips a run already stored, a retried task or a resumed sweep never repeats finished work.

Workers that share the store's file system (one machine, NFS, a cluster's scratch) write results straight into
it. A worker that does not see the store (it cannot read the client's store id, see :func:`store_id`) runs the
task against a store in its own temporary folder and sends the stored file back; the client writes it into the
store. Either way the files are byte for byte what the local executor writes.
"""

from __future__ import annotations

import os
import secrets
import socket
import tempfile
import traceback
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import torch

from repdyn.framework.config import ConfigError
from repdyn.runtime.store import CorruptRun, ResultStore
from repdyn.runtime.tasks import Task, TaskFailed, execute_task

RETRIES = 1
CONNECT_TIMEOUT_S = 20
STORE_ID_FILE = ".repdyn-store-id"
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")  # Dask's address schemes


def parse_cluster(address: str) -> tuple[str, int | None]:
    """("local", N) for ``local:N``; (address, None) for a scheduler address."""
    if address.startswith("local:"):
        count = address.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise ConfigError(f"--cluster {address!r}: write local:N with N >= 1 workers")
        return "local", int(count)
    scheme, separator, location = address.partition("://")
    if not separator or not location:
        raise ConfigError(f"--cluster {address!r} is not a scheduler address (tcp://host:8786) or local:N")
    if scheme not in SCHEMES:
        raise ConfigError(f"--cluster {address!r}: unknown scheme {scheme!r}: a Dask scheduler address starts with "
                          f"{', '.join(s + '://' for s in SCHEMES)}")
    return address, None


def check_reachable(address: str) -> None:
    """A scheduler at a ``tcp``/``tls``/``ws``/``wss`` address must accept a connection (checked before anything
    is written)."""
    scheme, _, location = address.partition("://")
    if scheme not in ("tcp", "tls", "ws", "wss"):
        return
    host, _, port = location.split("/")[0].rpartition(":")
    if not port.isdigit():
        raise ConfigError(f"--cluster {address!r}: give the scheduler's port ({scheme}://host:8786)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        raise ConfigError(f"--cluster {address!r}: no Dask scheduler answered ({err.strerror or err}); start one "
                          f"with `dask scheduler`") from None


def store_id(root: str | os.PathLike[str]) -> str:
    """The random id written once in ``root/.repdyn-store-id``; a worker that reads the same id shares the store."""
    path = Path(root) / STORE_ID_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "x") as handle:  # exclusive create: two clients starting at once agree on one id
            handle.write(secrets.token_hex(16))
    except FileExistsError:
        pass
    return path.read_text().strip()


def _shares_store(root: str, expected_id: str) -> bool:
    try:
        return (Path(root) / STORE_ID_FILE).read_text().strip() == expected_id
    except OSError:
        return False


def run_on_worker(task: Task, expected_store_id: str) -> tuple[str, bytes | None, str]:
    """Run one task on a Dask worker: (status, the stored file when the worker does not share the store, detail).

    A failed run comes back as status "failed" with its message rather than as an exception, so that Dask does
    not retry a deterministic failure and the client can raise :class:`TaskFailed` naming the run.
    """
    if task.device == "cuda" and not torch.cuda.is_available():
        return "failed", None, f"--device cuda: the Dask worker on {socket.gethostname()} has no CUDA device"
    shared = _shares_store(task.store_root, expected_store_id)
    if not shared:
        local_root = Path(tempfile.gettempdir()) / "repdyn-worker-stores" / expected_store_id
        task = replace(task, store_root=str(local_root))
    try:
        status = execute_task(task)
    except TaskFailed as err:
        cause = err.__cause__ or err
        return "failed", None, "".join(traceback.format_exception_only(type(cause), cause)).strip()
    data = None if shared else ResultStore(task.store_root, keyed=True).path(task.folder, task.key).read_bytes()
    return status, data, ""


def run_on_cluster(tasks: Sequence[Task], address: str, on_done: Callable[[Task, str], None]) -> None:
    """Run ``tasks`` as Dask tasks on ``address`` (a scheduler or ``local:N``), calling ``on_done`` as each ends.

    Raises ConfigError when Dask is missing or the scheduler cannot be reached, and TaskFailed for the first run
    that fails (its worker died on every allowed attempt, or the run raised); finished runs stay stored.
    """
    try:
        from dask.distributed import Client, KilledWorker, LocalCluster, as_completed
    except ImportError:
        raise ConfigError("--cluster needs Dask: pip install 'repdyn[cluster]'") from None
    kind, workers = parse_cluster(address)
    if not tasks:
        return
    ids = {root: store_id(root) for root in {task.store_root for task in tasks}}
    with ExitStack() as stack:
        if kind == "local":
            cluster = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                       dashboard_address=None))
            client = stack.enter_context(Client(cluster))
        else:
            try:
                client = stack.enter_context(Client(address, timeout=CONNECT_TIMEOUT_S))
            except (OSError, TimeoutError) as err:
                raise ConfigError(f"--cluster {address!r}: no Dask scheduler answered within {CONNECT_TIMEOUT_S} s "
                                  f"({type(err).__name__}); start one with `dask scheduler`") from None
        futures = {client.submit(run_on_worker, task, ids[task.store_root], key=f"repdyn-{task.folder}-{task.key}",
                                 retries=RETRIES, pure=False): task for task in tasks}
        for future in as_completed(futures):
            task = futures.pop(future)
            try:
                status, data, detail = future.result()
            except KilledWorker as err:
                raise TaskFailed(task, f"its Dask worker died on every allowed attempt ({err}); out of memory?") \
                    from None
            if status == "failed":
                raise TaskFailed(task, detail)
            if data is not None:
                try:
                    ResultStore(task.store_root, keyed=True).write_bytes(task.folder, task.key, data)
                except CorruptRun as err:
                    raise TaskFailed(task, f"its result came back damaged from the worker ({err.reason})") from None
            on_done(task, status)
