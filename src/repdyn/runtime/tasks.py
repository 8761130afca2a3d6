"""A task is one run of one experiment, self-contained and picklable, so any executor (this process, local
worker processes, a Dask cluster) can run it; its result goes straight into the result store. A task runs under
its run's file lock, so two processes never compute the same run at once: the second finds it stored.

A run computes on one thread (torch's intra-op pool and the BLAS/OpenMP pools, :data:`RUN_THREADS`), whatever the
executor and ``--jobs``: a parallel reduction's result depends on how many threads share it, and the thread count
is not in the run key, so only a fixed count keeps a store's runs comparable and bit-identical across executors."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from threadpoolctl import threadpool_limits

from repdyn.framework.base import RunSpec
from repdyn.framework.config import from_dict, run_dict, run_view
from repdyn.nn.checkpoint import Checkpointer, DamagedCheckpoint, checkpointing
from repdyn.nn.divergence import Diverged
from repdyn.runtime import registry
from repdyn.runtime.atomic import WriteError
from repdyn.runtime.progress import collecting_warnings, watching
from repdyn.runtime.store import ResultStore, key_inputs, key_of

RUN_THREADS = 1


@dataclass(frozen=True)
class Task:
    experiment: str
    config: dict[str, Any]
    label: str
    params: dict[str, Any]
    seed: int
    device: str
    key: str
    store_root: str
    progress_every: float = 0.0  # seconds between progress log lines inside the run; 0: none
    checkpoint_every: float = 0.0  # seconds between checkpoints of the run's training loops; 0: none
    shared: str = ""  # RunSpec.shared: the run is stored under this name, and any experiment declaring it reads it
    variant: str = ""  # the negative control this run belongs to ("" for the experiment's own runs)

    @property
    def title(self) -> str:
        """The run named fully, as progress lines and the report show it: experiment, label, control, seed."""
        control = f" [control: {self.variant}]" if self.variant else ""
        return f"{self.experiment} {self.label}{control} (seed {self.seed})"

    @property
    def folder(self) -> str:
        """The store folder of the run: its shared name, or else its experiment's."""
        return self.shared or self.experiment


class TaskFailed(RuntimeError):
    """A run raised an exception other than divergence (a bug, or a resource limit). Nothing is stored."""

    def __init__(self, task: Task, detail: str) -> None:
        super().__init__(f"{task.experiment} run {task.label!r} failed: {detail}")
        self.task = task
        self.detail = detail

    def __reduce__(self) -> tuple:
        return type(self), (self.task, self.detail)  # crosses process boundaries (joblib, Dask)


def execute_task(task: Task, *, wait: bool = True) -> str:
    """Run one task and store its result atomically. Returns "ok", "diverged" or "cached" (a valid result is
    stored; a corrupt one is quarantined and recomputed), or "busy" when ``wait`` is False and another process
    holds the run's lock."""
    store = ResultStore(task.store_root, keyed=True)
    with store.lock(task.folder, task.key, wait=wait) as held:
        if not held:
            return "busy"
        if store.verified(task.folder, task.key, locked=True) is not None:
            return "cached"
        return _compute(task, store)


@contextmanager
def run_threads() -> Iterator[None]:
    """Inside: torch, BLAS and OpenMP compute on :data:`RUN_THREADS` threads (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(RUN_THREADS)
    try:
        with threadpool_limits(RUN_THREADS):
            yield
    finally:
        torch.set_num_threads(before)


def _compute(task: Task, store: ResultStore) -> str:
    with run_threads():
        return _compute_here(task, store)


def _compute_here(task: Task, store: ResultStore) -> str:
    experiment = registry.get(task.experiment)
    full = from_dict(experiment.Config, task.config)
    config = run_view(full, shared=bool(task.shared))
    identity = key_inputs(task.folder, {} if task.shared else run_dict(full), task.label, task.params, task.seed,
                          task.device)
    if key_of(identity) != task.key:
        raise TaskFailed(task, f"its key {task.key} is not the hash of its inputs ({key_of(identity)})")
    start, cpu_start = time.perf_counter(), time.process_time()
    meta: dict[str, Any] = {"experiment": task.experiment, "label": task.label, "params": task.params,
                            "seed": task.seed, "device": task.device, "config": task.config, "shared": task.shared,
                            "key": identity, "pid": os.getpid(), "started_at": time.time()}

    def damaged(error: DamagedCheckpoint) -> None:
        store.quarantine(task.folder, task.key, error.reason, suffix=".ckpt")  # the run's lock is held

    checkpoints = (Checkpointer(store.checkpoint_path(task.folder, task.key), task.checkpoint_every, damaged=damaged)
                   if task.checkpoint_every > 0 else None)
    with watching(task.title, task.progress_every) as end, checkpointing(checkpoints), \
            collecting_warnings() as caught:
        try:
            result = experiment.execute(config, RunSpec(task.label, task.params, shared=task.shared), task.seed,
                                        task.device)
            meta["status"] = "ok"
        except Diverged as err:
            result = {}
            meta.update(status="diverged", step=err.step, reason=str(err))
        except Exception as err:  # noqa: BLE001 - reported with its traceback, never stored as a result
            end("failed")
            raise TaskFailed(task, "".join(traceback.format_exception_only(type(err), err)).strip()) from err
        end(meta["status"])
    meta["warnings"] = caught
    meta["seconds"] = time.perf_counter() - start
    meta["cpu_seconds"] = time.process_time() - cpu_start
    meta["finished_at"] = time.time()  # epoch seconds, with started_at: a sweep's timeline (bench_reproduce)
    try:
        store.write(task.folder, task.key, result, meta)
    except WriteError as err:  # a full disk: nothing partial is left, the message names the folder
        raise TaskFailed(task, str(err)) from err
    if checkpoints is not None:
        checkpoints.remove()
    return meta["status"]
