"""Reproduction: plan (validate everything, write nothing), execute missing runs, analyse stored results.

The output folder holds ``manifest.json`` (what was asked for), ``runs/`` (the result store) and, after
:func:`repdyn.report.render.write_report`, the report. ``repdyn report DIR`` re-analyses from ``runs/`` alone.
Every stored run is verified against its checksum before it is skipped or analysed; a corrupt one is quarantined
and recomputed (:func:`stored_run`).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from repdyn.framework.base import SCALES, Experiment
from repdyn.framework.claims import Control
from repdyn.framework.claims_figure import claims_figure
from repdyn.framework.config import ConfigError, apply_overrides, from_dict, run_dict, to_dict, validate
from repdyn.framework.outcome import ExperimentOutcome
from repdyn.framework.verdicts import evaluate, skip
from repdyn.runtime import registry
from repdyn.runtime.atomic import write_json_atomic
from repdyn.runtime.executors import run_local, run_tasks
from repdyn.runtime.progress import collecting_warnings
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

    @property
    def controls(self) -> dict[Control, Any]:
        """Each distinct negative control of the experiment's claims -> the config it runs."""
        return {control: control_config(self.config, control) for control in controls_of(self.experiment)}

    def variants(self) -> list[tuple[Control | None, Any]]:
        """(None, config) for the experiment itself, then (control, config) per negative control."""
        return [(None, self.config), *self.controls.items()]


@dataclass(frozen=True)
class Plan:
    experiments: tuple[PlannedExperiment, ...]
    scale: str
    seed: int
    device: str
    out: Path

    @property
    def store(self) -> ResultStore:
        return ResultStore(self.out / "runs", keyed=True)


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
    """Resolve and validate a reproduction. Raises ConfigError on any bad input; writes nothing.

    Example: the plan names each experiment with its config at the scale; nothing is written yet.

        >>> import tempfile, repdyn
        >>> p = repdyn.plan(["shallow_relu.lazy_width"], scale="smoke", out=tempfile.mkdtemp())
        >>> [(item.name, p.scale) for item in p.experiments]
        [('shallow_relu.lazy_width', 'smoke')]
        >>> repdyn.plan(["shallow_relu.lazy_width"], scale="huge")
        Traceback (most recent call last):
        ...
        repdyn.framework.config.ConfigError: unknown scale 'huge': choose one of smoke, quick, full, paper
    """
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


def controls_of(experiment: Experiment) -> list[Control]:
    """The distinct negative controls of an experiment's claims, in the order the claims name them."""
    return list(dict.fromkeys(spec.control for spec in experiment.claims if spec.control is not None))


def control_config(config: Any, control: Control) -> Any:
    """The config a negative control runs: ``config`` with the control's overrides, validated."""
    try:
        changed = dataclasses.replace(config, **control.config_changes())
        validate(changed)
    except (TypeError, ConfigError) as err:
        raise ConfigError(f"control {control.description!r} does not fit the config: {err}") from None
    return changed


def _prepare(experiment: Experiment, config: Any) -> str | None:
    try:
        reason = experiment.prepare(config)
        for control in controls_of(experiment):
            experiment.prepare(control_config(config, control))
        return reason
    except ConfigError as err:
        raise ConfigError(f"{experiment.name}: {err}") from None


def _variant_tasks(plan_: Plan, item: PlannedExperiment, config: Any,
                   progress_every: float = 0.0, checkpoint_every: float = 0.0, variant: str = "") -> list[Task]:
    as_dict, keyed = to_dict(config), run_dict(config)
    tasks = []
    for run in item.experiment.runs(config):
        # a control run shares its seed with its original; runs of one seed group share theirs; a shared run is
        # seeded and keyed by its shared name, label and params alone, so every experiment declaring it finds it
        owner = run.shared or item.name
        seed = derive_seed(plan_.seed, owner, run.seed_group or run.label)
        params = dict(run.params)
        key = run_key(owner, {} if run.shared else keyed, run.label, params, seed, plan_.device)
        tasks.append(Task(item.name, as_dict, run.label, params, seed, plan_.device, key, str(plan_.store.root),
                          progress_every=progress_every, checkpoint_every=checkpoint_every, shared=run.shared,
                          variant=variant))
    return tasks


def tasks_for(plan_: Plan, progress_every: float = 0.0, checkpoint_every: float = 0.0) -> list[Task]:
    """Every run of the plan, the negative controls' runs included (a run two variants or two experiments share
    appears once);
    ``progress_every`` > 0 makes each run log its progress that often, ``checkpoint_every`` > 0 checkpoint its
    training loops that often (seconds)."""
    tasks: dict[str, Task] = {}
    for item in plan_.experiments:
        if item.skip_reason is not None:
            continue
        for control, config in item.variants():
            variant = "" if control is None else control.description
            for task in _variant_tasks(plan_, item, config, progress_every, checkpoint_every, variant):
                tasks.setdefault(task.key, task)
    return list(tasks.values())


def write_manifest(plan_: Plan) -> None:
    write_json_atomic(plan_.out / MANIFEST, {
        "scale": plan_.scale, "seed": plan_.seed, "device": plan_.device,
        "experiments": {item.name: to_dict(item.config) for item in plan_.experiments},
    })


def load_plan(out: str | os.PathLike[str], only: str | None = None) -> Plan:
    """The plan recorded in ``out/manifest.json`` (for ``repdyn report``); with ``only``, of that experiment alone
    (what one analysis task needs: the others are not prepared again)."""
    path = Path(out) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{out}: no {MANIFEST} here; give the folder a `repdyn reproduce --out` wrote")
    planned = []
    try:
        manifest = json.loads(path.read_text())
        for name, config in manifest["experiments"].items():
            if only is not None and name != only:
                continue
            experiment = registry.get(name)
            config = from_dict(experiment.Config, config)
            planned.append(PlannedExperiment(experiment, config, _prepare(experiment, config)))
        return Plan(tuple(planned), manifest["scale"], manifest["seed"], manifest["device"], Path(out))
    except ConfigError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as err:  # not JSON, or not the fields repdyn writes
        raise ConfigError(f"{path} is damaged or not written by repdyn ({type(err).__name__}: {err}); run `repdyn "
                          f"reproduce --out {out}` again to rewrite it") from None


def _todo(plan_: Plan, jobs: int, cluster: str | None, force: bool, on_start: Callable[[int, int], None],
          progress_every: float, checkpoint_every: float) -> list[Task]:
    """Check what can be checked before writing (:func:`~repdyn.runtime.preflight.preflight`), write the manifest and
    return the tasks whose runs are not stored yet."""
    from repdyn.runtime.preflight import preflight

    preflight(plan_, jobs, cluster)
    write_manifest(plan_)
    store = plan_.store
    store.clean_temporaries()
    tasks = tasks_for(plan_, progress_every, checkpoint_every)
    if force:
        for task in tasks:
            store.remove(task.folder, task.key)
    todo = [t for t in tasks if store.verified(t.folder, t.key) is None]
    on_start(len(tasks), len(todo))
    return todo


def execute(plan_: Plan, *, jobs: int = 1, cluster: str | None = None, force: bool = False,
            on_done: Callable[[Task, str], None] = lambda task, status: None,
            on_start: Callable[[int, int], None] = lambda total, todo: None, progress_every: float = 0.0,
            checkpoint_every: float = 0.0) -> None:
    """Run every task of the plan whose result is not stored yet (all of them with ``force``); each run logs its
    progress every ``progress_every`` seconds when that is > 0 (see :mod:`repdyn.runtime.progress`) and
    checkpoints its training loops every ``checkpoint_every`` seconds (see :mod:`repdyn.nn.checkpoint`): a killed
    run resumes from its last checkpoint.

    Example: the runs land in the plan's store, ``out/runs/<experiment>/``.

        >>> import tempfile, repdyn
        >>> p = repdyn.plan(["shallow_relu.lazy_width"], scale="smoke", out=tempfile.mkdtemp())
        >>> repdyn.execute(p)
        >>> len(list((p.out / "runs" / "shallow_relu.lazy_width").glob("*.npz"))) > 0
        True
    """
    todo = _todo(plan_, jobs, cluster, force, on_start, progress_every, checkpoint_every)
    run_tasks(todo, jobs=jobs, cluster=cluster, on_done=on_done)


def reproduce(plan_: Plan, *, jobs: int = 1, cluster: str | None = None, force: bool = False,
              on_done: Callable[[Task, str], None] = lambda task, status: None,
              on_start: Callable[[int, int], None] = lambda total, todo: None, progress_every: float = 0.0,
              checkpoint_every: float = 0.0) -> list[ExperimentOutcome]:
    """:func:`execute`, then :func:`analyse`, with the same arguments. Without a cluster each experiment is
    analysed as soon as its last run is stored, by the same workers, ahead of the runs still waiting: the
    analyses fill the workers that the last long runs leave idle instead of all following the last run.

    Example: the runs, then each claim judged, in one call.

        >>> import tempfile, repdyn
        >>> p = repdyn.plan(["shallow_relu.lazy_width"], scale="smoke", out=tempfile.mkdtemp())
        >>> [(claim.id, claim.verdict) for outcome in repdyn.reproduce(p) for claim in outcome.claims]
        [('knot_speed_scaling', 'reproduced')]
    """
    if cluster is not None:
        execute(plan_, jobs=jobs, cluster=cluster, force=force, on_done=on_done, on_start=on_start,
                progress_every=progress_every, checkpoint_every=checkpoint_every)
        return analyse(plan_)
    todo = _todo(plan_, jobs, cluster, force, on_start, progress_every, checkpoint_every)
    todo_keys = {task.key for task in todo}
    waiting = {item.name: _keys_read(plan_, item) & todo_keys for item in plan_.experiments}

    def analysis(name: str) -> Callable[[], ExperimentOutcome]:
        return functools.partial(_analyse_named, str(plan_.out), name, True)

    def then(task: Task, status: str) -> list[Callable[[], ExperimentOutcome]]:
        ready = []
        for name, keys in waiting.items():  # a shared run unblocks every experiment that reads it
            if task.key in keys:
                keys.discard(task.key)
                ready += [] if keys else [analysis(name)]
        return ready

    outcomes: dict[str, ExperimentOutcome] = {}
    run_local(todo, jobs, on_done, first=[analysis(name) for name, keys in waiting.items() if not keys],
              then=then, on_result=lambda outcome: outcomes.__setitem__(outcome.name, outcome))
    return [outcomes[item.name] for item in plan_.experiments]


def _keys_read(plan_: Plan, item: PlannedExperiment) -> set[str]:
    """The keys of every run the experiment's analysis reads (its controls' and the shared runs it declares)."""
    if item.skip_reason is not None:
        return set()
    return {task.key for _, config in item.variants() for task in _variant_tasks(plan_, item, config)}


def figure_png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def stored_run(plan_: Plan, task: Task, *, recompute: bool = True) -> StoredRun:
    """A task's stored run, verified against its checksum. One that vanished or is corrupt (then quarantined) is
    recomputed here when ``recompute``; otherwise ConfigError names it."""
    store = plan_.store
    present = store.has(task.folder, task.key)
    run = store.verified(task.folder, task.key)
    if run is None and recompute:
        if not present:
            logging.getLogger("repdyn").warning("warning: stored run %s is missing; recomputing it",
                                                store.path(task.folder, task.key))
        execute_task(task)
        run = store.verified(task.folder, task.key)
    if run is None:
        raise ConfigError(f"{task.experiment}: run {task.label!r} has no stored result in {store.root}; "
                          f"run `repdyn reproduce --out {plan_.out}` to finish it")
    return run


def analyse(plan_: Plan, *, recompute: bool = True, jobs: int = 1) -> list[ExperimentOutcome]:
    """Analyse stored results (a run missing or corrupt by now is recomputed when ``recompute``, see
    :func:`stored_run`) and judge every claim against its negative control. Claims that depend on a diverged run
    are not reproduced, with that reason. With ``jobs`` > 1 the experiments are analysed side by side in that many
    worker processes, each reading the plan back from ``out/manifest.json`` (written by :func:`execute`).

    Example: each claim with its verdict, per-seed interval and band.

        >>> import tempfile, repdyn
        >>> p = repdyn.plan(["shallow_relu.lazy_width"], scale="smoke", out=tempfile.mkdtemp())
        >>> repdyn.execute(p)
        >>> (outcome,) = repdyn.analyse(p)
        >>> claim = outcome.claims[0]
        >>> claim.id, claim.verdict, claim.ci_low <= claim.estimate <= claim.ci_high
        ('knot_speed_scaling', 'reproduced', True)
    """
    if jobs == 1 or len(plan_.experiments) < 2:
        return [_analyse_item(plan_, item, recompute) for item in plan_.experiments]
    from joblib import Parallel, delayed

    return Parallel(n_jobs=jobs, backend="loky")(delayed(_analyse_named)(str(plan_.out), item.name, recompute)
                                                 for item in plan_.experiments)


def _analyse_named(out: str, name: str, recompute: bool) -> ExperimentOutcome:
    plan_ = load_plan(out, only=name)
    return _analyse_item(plan_, plan_.experiments[0], recompute)


def _analyse_item(plan_: Plan, item: PlannedExperiment, recompute: bool) -> ExperimentOutcome:
    start = time.process_time()
    with collecting_warnings() as caught:
        outcome = _outcome_of(plan_, item, recompute)
    return dataclasses.replace(outcome, analysis_seconds=time.process_time() - start,
                               warnings=[*outcome.warnings, *(f"analysis: {text}" for text in caught)])


def _outcome_of(plan_: Plan, item: PlannedExperiment, recompute: bool) -> ExperimentOutcome:
    experiment = item.experiment
    if item.skip_reason is not None:
        return ExperimentOutcome(
            item.name, experiment.title, experiment.paper, experiment.source, to_dict(item.config),
            [skip(item.name, spec, item.skip_reason, plan_.scale) for spec in experiment.claims], {}, [], [],
            notes=f"skipped: {item.skip_reason}")
    variants = [(control, config, _stored(plan_, item, config, recompute)) for control, config in item.variants()]
    return _analyse_one(experiment, variants, plan_.scale)


def _stored(plan_: Plan, item: PlannedExperiment, config: Any, recompute: bool) -> dict[str, StoredRun]:
    return {task.label: stored_run(plan_, task, recompute=recompute)
            for task in _variant_tasks(plan_, item, config)}


@dataclass
class _VariantAnalysis:
    measured: Mapping[str, Any]
    failures: dict[str, str]  # claim id -> why it has no value
    analysis: Any = None
    error: str = ""
    states: Mapping[str, Any] = field(default_factory=dict)


def _analyse_variant(experiment: Experiment, config: Any, stored: Mapping[str, StoredRun]) -> _VariantAnalysis:
    diverged = {label: run for label, run in stored.items() if run.diverged}
    results = {label: run.result for label, run in stored.items() if not run.diverged}
    failures: dict[str, str] = {}
    for spec in experiment.claims:
        hit = [label for label in diverged if spec.depends_on_run(label)]
        if hit:
            first = diverged[hit[0]].meta
            failures[spec.id] = (f"run {hit[0]!r} diverged at step {first.get('step')} "
                                 f"({first.get('reason', 'loss NaN/inf')})")
    try:
        analysis = experiment.analyse(config, results)
    except Exception as err:  # noqa: BLE001 - shown in the report; the claims fail with the reason
        reason = f"analysis failed: {type(err).__name__}: {err}"
        if diverged:
            reason += f" (runs diverged: {', '.join(diverged)})"
        for spec in experiment.claims:
            failures.setdefault(spec.id, reason)
        return _VariantAnalysis({}, failures, error=reason)
    return _VariantAnalysis(analysis.measured, failures, analysis, states=analysis.states)


def _analyse_one(experiment: Experiment, variants: Sequence[tuple[Control | None, Any, Mapping[str, StoredRun]]],
                 scale: str) -> ExperimentOutcome:
    (_, config, stored), *controls = variants
    main = _analyse_variant(experiment, config, stored)
    by_control = {control: _analyse_variant(experiment, control_cfg, control_stored)
                  for control, control_cfg, control_stored in controls}
    errors = [main.error] if main.error else []
    errors += [f"control {c.description!r}: {v.error}" for c, v in by_control.items() if v.error]
    figures: dict[str, bytes] = {}
    metrics: list[dict[str, Any]] = []
    notes = ""
    if main.analysis is not None:
        metrics, notes = main.analysis.metrics, main.analysis.notes
        for name, figure in main.analysis.figures.items():
            figures[name] = figure_png(figure)
    for variant in by_control.values():
        for figure in variant.analysis.figures.values() if variant.analysis is not None else ():
            figure.clear()
    claims = []
    for spec in experiment.claims:
        control = by_control.get(spec.control) if spec.control is not None else None
        claims.append(evaluate(
            experiment.name, spec, main.measured.get(spec.id), main.failures.get(spec.id),
            control=None if control is None else control.measured.get(spec.id),
            control_failure=None if control is None else control.failures.get(spec.id), states=main.states,
            scale=scale))
    summary = claims_figure(claims)
    if summary is not None:  # drawn where the experiment is analysed (a worker), not after the last run
        figures = {"claims": figure_png(summary), **figures}
    runs = [{"label": label, "status": run.status, "seconds": run.meta.get("seconds"),
             "cpu_seconds": run.meta.get("cpu_seconds"), "step": run.meta.get("step")}
            for label, run in stored.items()]
    for control, _, control_stored in controls:
        runs += [{"label": f"{label} [control: {control.description}]", "status": run.status,
                  "seconds": run.meta.get("seconds"), "cpu_seconds": run.meta.get("cpu_seconds"),
                  "step": run.meta.get("step")}
                 for label, run in control_stored.items()]
    run_warnings = [f"run {label}: {text}" for label, run in stored.items() for text in run.meta.get("warnings", ())]
    run_warnings += [f"run {label} [control: {control.description}]: {text}" for control, _, control_stored in controls
                     for label, run in control_stored.items() for text in run.meta.get("warnings", ())]
    return ExperimentOutcome(experiment.name, experiment.title, experiment.paper, experiment.source,
                             to_dict(config), claims, figures, metrics, runs, notes, errors, run_warnings)
