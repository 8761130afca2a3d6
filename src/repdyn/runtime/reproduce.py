"""Reproduction: plan (validate everything, write nothing), execute missing runs, analyse stored results.

The output folder holds ``manifest.json`` (what was asked for), ``runs/`` (the result store) and, after
:func:`repdyn.report.render.write_report`, the report. ``repdyn report DIR`` re-analyses from ``runs/`` alone.
Every stored run is verified against its checksum before it is skipped or analysed; a corrupt one is quarantined
and recomputed (:func:`stored_run`).
"""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from repdyn.experiments.base import SCALES, Experiment
from repdyn.experiments.claims import ClaimResult, evaluate, skip
from repdyn.experiments.config import ConfigError, apply_overrides, from_dict, to_dict
from repdyn.runtime import registry
from repdyn.runtime.atomic import atomic_write_text
from repdyn.runtime.executors import check_executor, run_tasks, threads_per_job
from repdyn.runtime.store import ResultStore, StoredRun, derive_seed, run_key
from repdyn.runtime.tasks import Task, execute_task

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class PlannedExperiment:
    experiment: Experiment
    config: Any
    skip_reason: str | None = None

    @property
    def name(self) -> str:
        return self.experiment.name


@dataclass(frozen=True)
class Plan:
    experiments: tuple[PlannedExperiment, ...]
    scale: str
    seed: int
    device: str
    out: Path

    @property
    def store(self) -> ResultStore:
        return ResultStore(self.out / "runs")


@dataclass
class ExperimentOutcome:
    """Everything the report shows for one experiment."""

    name: str
    title: str
    seed: str
    source: str
    config: dict[str, Any]
    claims: list[ClaimResult]
    figures: dict[str, bytes]  # name -> PNG
    metrics: list[dict[str, Any]]
    runs: list[dict[str, Any]]  # label, status, seconds, step
    notes: str = ""
    errors: list[str] = field(default_factory=list)


def check_scale(scale: str) -> str:
    if scale not in SCALES:
        raise ConfigError(f"unknown scale {scale!r}: choose one of {', '.join(SCALES)}")
    return scale


def check_device(device: str, *, here: bool = True) -> str:
    """Validate ``--device``; ``here`` is False when the runs execute on a remote cluster, whose workers check."""
    if device not in ("cpu", "cuda"):
        raise ConfigError(f"unknown device {device!r}: choose cpu or cuda")
    if here and device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is available on this machine (use --device cpu)")
    return device


def plan(names: Sequence[str] | None, *, scale: str = "quick", overrides: Mapping[str, str] | None = None,
         seed: int = 0, device: str = "cpu", out: str | os.PathLike[str] = "repdyn-out",
         cluster: str | None = None) -> Plan:
    """Resolve and validate a reproduction. Raises ConfigError on any bad input; writes nothing."""
    check_scale(scale)
    check_device(device, here=cluster is None or cluster.startswith("local:"))
    if seed < 0:
        raise ConfigError(f"--seed {seed} is out of range: must be >= 0")
    experiments = registry.select(names)
    planned = []
    for experiment in experiments:
        config = experiment.config(scale)
        if overrides:
            try:
                config = apply_overrides(config, overrides)
            except ConfigError as err:
                raise ConfigError(f"{experiment.name}: {err}") from None
        planned.append(PlannedExperiment(experiment, config, _prepare(experiment, config)))
    return Plan(tuple(planned), scale, seed, device, Path(out))


def _prepare(experiment: Experiment, config: Any) -> str | None:
    try:
        return experiment.prepare(config)
    except ConfigError as err:
        raise ConfigError(f"{experiment.name}: {err}") from None


def tasks_for(plan_: Plan, jobs: int = 1) -> list[Task]:
    tasks = []
    for item in plan_.experiments:
        if item.skip_reason is not None:
            continue
        config = to_dict(item.config)
        for run in item.experiment.runs(item.config):
            seed = derive_seed(plan_.seed, item.name, run.label)
            params = dict(run.params)
            key = run_key(item.name, config, run.label, params, seed, plan_.device)
            tasks.append(Task(item.name, config, run.label, params, seed, plan_.device, key,
                              str(plan_.store.root), threads=threads_per_job(jobs) if jobs > 1 else 0))
    return tasks


def write_json_atomic(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str))


def write_manifest(plan_: Plan) -> None:
    write_json_atomic(plan_.out / MANIFEST, {
        "scale": plan_.scale, "seed": plan_.seed, "device": plan_.device,
        "experiments": {item.name: to_dict(item.config) for item in plan_.experiments},
    })


def load_plan(out: str | os.PathLike[str]) -> Plan:
    """The plan recorded in ``out/manifest.json`` (for ``repdyn report``)."""
    path = Path(out) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{out}: no {MANIFEST} here; give the folder a `repdyn reproduce --out` wrote")
    manifest = json.loads(path.read_text())
    planned = []
    for name, config in manifest["experiments"].items():
        experiment = registry.get(name)
        config = from_dict(experiment.Config, config)
        planned.append(PlannedExperiment(experiment, config, _prepare(experiment, config)))
    return Plan(tuple(planned), manifest["scale"], manifest["seed"], manifest["device"], Path(out))


def execute(plan_: Plan, *, jobs: int = 1, cluster: str | None = None, force: bool = False,
            on_done: Callable[[Task, str], None] = lambda task, status: None,
            on_start: Callable[[int, int], None] = lambda total, todo: None) -> None:
    """Run every task of the plan whose result is not stored yet (all of them with ``force``)."""
    check_executor(jobs, cluster)
    write_manifest(plan_)
    store = plan_.store
    store.clean_temporaries()
    tasks = tasks_for(plan_, jobs)
    if force:
        for task in tasks:
            store.remove(task.experiment, task.key)
    todo = [t for t in tasks if store.verified(t.experiment, t.key) is None]
    on_start(len(tasks), len(todo))
    run_tasks(todo, jobs=jobs, cluster=cluster, on_done=on_done)


def figure_png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def stored_run(plan_: Plan, task: Task, *, recompute: bool = True) -> StoredRun:
    """A task's stored run, verified against its checksum. One that vanished or is corrupt (then quarantined) is
    recomputed here when ``recompute``; otherwise ConfigError names it."""
    store = plan_.store
    present = store.has(task.experiment, task.key)
    run = store.verified(task.experiment, task.key)
    if run is None and recompute:
        if not present:
            logging.getLogger("repdyn").warning("warning: stored run %s is missing; recomputing it",
                                                store.path(task.experiment, task.key))
        execute_task(task)
        run = store.verified(task.experiment, task.key)
    if run is None:
        raise ConfigError(f"{task.experiment}: run {task.label!r} has no stored result in {store.root}; "
                          f"run `repdyn reproduce --out {plan_.out}` to finish it")
    return run


def analyse(plan_: Plan, *, recompute: bool = True) -> list[ExperimentOutcome]:
    """Analyse stored results (a run missing or corrupt by now is recomputed when ``recompute``, see
    :func:`stored_run`). Claims that depend on a diverged run fail with that reason."""
    outcomes = []
    by_experiment: dict[str, list[Task]] = {}
    for task in tasks_for(plan_):
        by_experiment.setdefault(task.experiment, []).append(task)
    for item in plan_.experiments:
        experiment = item.experiment
        stored: dict[str, StoredRun] = {}
        for task in by_experiment.get(item.name, []):
            stored[task.label] = stored_run(plan_, task, recompute=recompute)
        if item.skip_reason is not None:
            outcomes.append(ExperimentOutcome(
                item.name, experiment.title, experiment.seed, experiment.source, to_dict(item.config),
                [skip(item.name, spec, item.skip_reason) for spec in experiment.claims], {}, [], [],
                notes=f"skipped: {item.skip_reason}"))
            continue
        outcomes.append(_analyse_one(experiment, item.config, stored))
    return outcomes


def _analyse_one(experiment: Experiment, config: Any, stored: Mapping[str, StoredRun]) -> ExperimentOutcome:
    diverged = {label: run for label, run in stored.items() if run.diverged}
    results = {label: run.result for label, run in stored.items() if not run.diverged}
    failures: dict[str, str] = {}
    for spec in experiment.claims:
        hit = [label for label in diverged if spec.depends_on_run(label)]
        if hit:
            first = diverged[hit[0]].meta
            failures[spec.id] = (f"run {hit[0]!r} diverged at step {first.get('step')} "
                                 f"({first.get('reason', 'loss NaN/inf')})")
    errors: list[str] = []
    figures: dict[str, bytes] = {}
    metrics: list[dict[str, Any]] = []
    notes = ""
    measured: Mapping[str, Any] = {}
    try:
        analysis = experiment.analyse(config, results)
        measured, metrics, notes = analysis.measured, analysis.metrics, analysis.notes
        for name, figure in analysis.figures.items():
            figures[name] = figure_png(figure)
    except Exception as err:  # noqa: BLE001 - shown in the report; the claims fail with the reason
        reason = f"analysis failed: {type(err).__name__}: {err}"
        if diverged:
            reason += f" (runs diverged: {', '.join(diverged)})"
        errors.append(reason)
    claims = []
    for spec in experiment.claims:
        failure = failures.get(spec.id)
        if failure is None and spec.id not in measured and errors:
            failure = errors[0]
        claims.append(evaluate(experiment.name, spec, measured.get(spec.id), failure))
    runs = [{"label": label, "status": run.status, "seconds": run.meta.get("seconds"),
             "step": run.meta.get("step")} for label, run in stored.items()]
    return ExperimentOutcome(experiment.name, experiment.title, experiment.seed, experiment.source,
                             to_dict(config), claims, figures, metrics, runs, notes, errors)
