"""A task is one run of one experiment, self-contained and picklable, so any executor (this process, local
worker processes, a Dask cluster) can run it; its result goes straight into the result store. A task runs under
its run's file lock, so two processes never compute the same run at once: the second finds it stored."""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass
from typing import Any

import torch

from repdyn.experiments.base import RunSpec
from repdyn.experiments.config import from_dict, run_view
from repdyn.nn.checkpoint import Checkpointer, checkpointing
from repdyn.nn.divergence import Diverged
from repdyn.runtime import registry
from repdyn.runtime.atomic import WriteError
from repdyn.runtime.progress import collecting_warnings, watching
from repdyn.runtime.store import ResultStore


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
    threads: int = 0  # torch intra-op threads in the worker; 0 keeps the process default
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
    store = ResultStore(task.store_root)
    with store.lock(task.folder, task.key, wait=wait) as held:
        if not held:
            return "busy"
        if store.verified(task.folder, task.key, locked=True) is not None:
            return "cached"
        return _compute(task, store)


def _compute(task: Task, store: ResultStore) -> str:
    if task.threads:
        torch.set_num_threads(task.threads)
    experiment = registry.get(task.experiment)
    config = run_view(from_dict(experiment.Config, task.config), shared=bool(task.shared))
    start, cpu_start = time.perf_counter(), time.process_time()
    meta: dict[str, Any] = {"experiment": task.experiment, "label": task.label, "params": task.params,
                            "seed": task.seed, "device": task.device, "config": task.config, "shared": task.shared,
                            "pid": os.getpid(),
                            "started_at": time.time()}
    checkpoints = (Checkpointer(store.path(task.folder, task.key).with_suffix(".ckpt"), task.checkpoint_every)
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
