"""The ``repdyn`` command. Exit codes: 0 when every evaluated claim's verdict is the one recorded in code
(reproduced, or a documented not reproduced), 1 when any differs (named: a regression, an unexpected reproduction,
an inconclusive or vacuous claim), a run crashed, a write failed (a full disk; the folder is named) or ``verify``
quarantined a corrupt run, 2 bad input (one line naming the value and what is allowed; nothing written)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from repdyn.framework.config import ConfigError, describe_fields, parse_assignments
from repdyn.framework.outcome import ExperimentOutcome
from repdyn.runtime import registry
from repdyn.runtime.atomic import WriteError
from repdyn.runtime.executors import check_executor
from repdyn.runtime.progress import showing
from repdyn.runtime.reproduce import Plan, analyse, load_plan, plan
from repdyn.runtime.reproduce import reproduce as run_and_analyse
from repdyn.runtime.tasks import TaskFailed

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="repdyn: theories of representation-learning dynamics, tested against real networks.")
err = Console(stderr=True)

ScaleOpt = typer.Option("quick", "--scale", help="smoke (seconds), quick (minutes on a CPU), full (decides every "
                                                 "claim on a CPU, hours) or paper (GPU/cluster)")
SeedOpt = typer.Option(0, "--seed", help="Base seed; each run derives its own from it")
DeviceOpt = typer.Option("cpu", "--device", help="cpu or cuda")
JobsOpt = typer.Option(1, "--jobs", help="Local worker processes")
ClusterOpt = typer.Option(None, "--cluster", help="Dask scheduler address (tcp://host:8786) or local:N")
ForceOpt = typer.Option(False, "--force", help="Recompute runs that are already stored")
JsonOpt = typer.Option(False, "--json", help="Print a JSON summary on stdout")
QuietOpt = typer.Option(False, "--quiet", help="No progress output")
EveryOpt = typer.Option(60.0, "--progress-every", help="Off a terminal: seconds between progress lines inside a run")
CheckpointOpt = typer.Option(5.0, "--checkpoint-every", help="Minutes between checkpoints inside a run (0: none); "
                                                              "a killed run resumes from its last")


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn bad input into one line on stderr and exit code 2; a crashed run into exit code 1."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ConfigError as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(2) from None
        except (TaskFailed, WriteError) as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("interrupted: finished runs are stored; run the same command again to resume", err=True)
            raise typer.Exit(130) from None

    return wrapper


def _only(only: str | None) -> list[str] | None:
    """The experiments ``--only`` names; None without the option. One that names none (``--only ""``) is refused."""
    if only is None:
        return None
    names = [n.strip() for n in only.split(",") if n.strip()]
    if not names:
        raise ConfigError(f"--only {only!r} names no experiment: give experiments or topics, comma-separated "
                          f"(leave --only out to run them all)")
    return names


def _execute_with_progress(plan_: Plan, jobs: int, cluster: str | None, force: bool, quiet: bool,
                           every: float, checkpoint_minutes: float) -> list[ExperimentOutcome]:
    """Compute the runs that are not stored and analyse every experiment (:func:`run_and_analyse`). On a terminal:
    a bar over the runs and, for runs in this process, a bar per run that moves with its steps. Elsewhere (a batch
    job's log): a line when the reproduction starts, and from each run a line at its start, at most one every
    ``every`` seconds inside it, and one at its end. ``quiet``: nothing."""
    if not every > 0:
        raise ConfigError(f"--progress-every {every:g} is out of range: must be > 0 seconds")
    if not checkpoint_minutes >= 0:
        raise ConfigError(f"--checkpoint-every {checkpoint_minutes:g} is out of range: must be >= 0 minutes")
    checkpoint_every = 60 * checkpoint_minutes
    if quiet or not err.is_terminal:
        def on_start(total: int, todo: int) -> None:
            if not quiet:
                err.print(f"{todo} of {total} runs to compute ({total - todo} stored) in {plan_.out}",
                          highlight=False, soft_wrap=True)

        return run_and_analyse(plan_, jobs=jobs, cluster=cluster, force=force, on_start=on_start,
                               progress_every=0.0 if quiet else every, checkpoint_every=checkpoint_every)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=False) as progress:
        bar = progress.add_task("runs", total=0)

        def on_start(total: int, todo: int) -> None:
            progress.update(bar, total=todo, description=f"runs ({total - todo} of {total} stored)")

        def on_done(task: Any, status: str) -> None:
            progress.update(bar, advance=1, description=f"{task.title}: {status}")

        current: list[Any] = []

        def run_bar(name: str) -> Any:
            for finished in current:
                progress.remove_task(finished)
            current[:] = [progress.add_task(f"  {name}", total=None)]

            def listener(step: int, total: int, loss: Any = None) -> None:
                progress.update(current[0], completed=step, total=total)

            return listener

        with showing(run_bar if jobs == 1 and cluster is None else None):
            return run_and_analyse(plan_, jobs=jobs, cluster=cluster, force=force, on_done=on_done,
                                   on_start=on_start, checkpoint_every=checkpoint_every)


def _finish(plan_: Plan, outcomes: list[ExperimentOutcome], as_json: bool) -> None:
    from repdyn.framework.records import load_records
    from repdyn.report.render import verdict_counts, write_report
    from repdyn.runtime.records import records_folder, with_records

    outcomes = with_records(outcomes, load_records(records_folder()))
    index = write_report(plan_.out, outcomes, scale=plan_.scale, seed=plan_.seed, device=plan_.device)
    claims = [c for o in outcomes for c in o.claims]
    differ = [c for c in claims if not c.as_recorded]
    counts = verdict_counts(claims)
    if as_json:
        print(json.dumps({"report": str(index), "verdicts": counts, "total": len(claims),
                          "differ": [f"{c.experiment}:{c.id}" for c in differ],
                          "analysis_seconds": {o.name: round(o.analysis_seconds, 3) for o in outcomes},
                          "claims": [c.to_json() for c in claims]}, indent=2))
    else:
        print(f"{len(claims)} claims: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n))
        for claim in differ:
            interval = "" if claim.estimate is None else \
                f" {claim.estimate:.4g} [{claim.ci_low:.4g}, {claim.ci_high:.4g}] over {claim.n_seeds} seed(s);"
            print(f"{claim.verdict.upper()} (recorded: {claim.expected_verdict}) {claim.experiment}:{claim.id}:"
                  f"{interval} "
                  f"expected {claim.expected}{' (' + claim.note + ')' if claim.note else ''}")
        print(f"report: {index.resolve()}")
    if differ:
        raise typer.Exit(1)


@app.command("list")
@user_errors
def list_experiments(as_json: bool = JsonOpt) -> None:
    """List the experiments with their claims and sources."""
    experiments = registry.all_experiments()
    if as_json:
        print(json.dumps([{
            "name": e.name, "title": e.title, "paper": e.paper, "source": e.source,
            "settings": [name for name, _, _ in describe_fields(e.Config)],
            "scales": list(e.scales),
            "claims": [{"id": c.id, "statement": c.statement, "source": c.source, "quote": c.quote,
                        "expected": c.expectation.describe(), "band_reason": c.band_reason,
                        "recorded": c.recorded,
                        "preconditions": [{"quantity": p.quantity, "expected": p.expectation.describe(),
                                           "state": p.state, "reason": p.reason} for p in c.preconditions],
                        "no_precondition": c.no_precondition or None,
                        "null_effect": None if c.null_effect is None else
                        {"lo": c.null_effect.lo, "hi": c.null_effect.hi, "reason": c.null_effect.reason},
                        "full_only": c.full_only or None} for c in e.claims],
        } for e in experiments.values()], indent=2))
        return
    for e in experiments.values():
        print(f"{e.name}  [paper {e.paper}, {e.source}]  {e.title}")
        for c in e.claims:
            print(f"    {c.id}: {c.statement}  (expected {c.expectation.describe()}; {c.source})")
            if c.quote:
                print(f"        “{c.quote}”")


@app.command()
@user_errors
def run(name: str = typer.Argument(..., help="Experiment name (see `repdyn list`)"),
        scale: str = ScaleOpt,
        set_: list[str] = typer.Option([], "--set", help="Override a config value: key=value (repeatable)"),
        seed: int = SeedOpt, device: str = DeviceOpt,
        out: Path = typer.Option(None, "--out", help="Output folder [default: repdyn-out/NAME]"),
        jobs: int = JobsOpt, cluster: str = ClusterOpt, force: bool = ForceOpt, as_json: bool = JsonOpt,
        quiet: bool = QuietOpt, progress_every: float = EveryOpt, checkpoint_every: float = CheckpointOpt) -> None:
    """Run one experiment and write its report."""
    registry.get(name)
    plan_ = plan([name], scale=scale, overrides=parse_assignments(set_), seed=seed, device=device,
                 out=out or Path("repdyn-out") / name, cluster=cluster)
    _finish(plan_, _execute_with_progress(plan_, jobs, cluster, force, quiet, progress_every, checkpoint_every),
            as_json)


@app.command()
@user_errors
def reproduce(scale: str = ScaleOpt,
              only: str = typer.Option(None, "--only", help="Comma-separated experiments or topics"),
              out: Path = typer.Option(Path("repdyn-out"), "--out", help="Output folder"),
              jobs: int = JobsOpt, cluster: str = ClusterOpt, force: bool = ForceOpt,
              seed: int = SeedOpt, device: str = DeviceOpt, as_json: bool = JsonOpt, quiet: bool = QuietOpt,
              progress_every: float = EveryOpt, checkpoint_every: float = CheckpointOpt) -> None:
    """Run every experiment (or --only some) and write the report of theory against experiment."""
    names = _only(only)
    plan_ = plan(names, scale=scale, seed=seed, device=device, out=out, cluster=cluster)
    _finish(plan_, _execute_with_progress(plan_, jobs, cluster, force, quiet, progress_every, checkpoint_every),
            as_json)


@app.command("plan")
@user_errors
def plan_command(scale: str = ScaleOpt,
                 only: str = typer.Option(None, "--only", help="Comma-separated experiments or topics"),
                 out: Path = typer.Option(Path("repdyn-out"), "--out", help="Output folder (its stored runs cost "
                                                                            "nothing)"),
                 seed: int = SeedOpt, device: str = DeviceOpt,
                 within: float = typer.Option(45.0, "--within", help="Seconds the calibrations may take in all "
                                                                       "(they run side by side, one per processor)"),
                 as_json: bool = JsonOpt) -> None:
    """Estimate what a reproduction would cost, before anything runs: per experiment the runs to compute, their
    CPU time and peak memory, from a short calibration on this machine."""
    from repdyn.runtime.estimate import estimate, format_seconds, total_seconds

    if not within > 0:
        raise ConfigError(f"--within {within:g} is out of range: must be > 0 seconds")
    names = _only(only)
    estimates = estimate(plan(names, scale=scale, seed=seed, device=device, out=out), within=within)
    total = total_seconds(estimates)
    if as_json:
        print(json.dumps({"scale": scale, "cpu_seconds": total,
                          "experiments": [dataclasses.asdict(e) for e in estimates]}, indent=2))
        return
    table = Table(title=f"repdyn plan, scale {scale}")
    for column in ("experiment", "runs to compute", "stored", "CPU time", "peak memory per run", "basis"):
        table.add_column(column)
    for e in estimates:
        table.add_row(e.experiment, str(e.runs), str(e.stored), e.cost(),
                      "?" if e.peak_mib is None else f"{e.peak_mib:.0f} MiB", e.basis)
    Console(width=200).print(table)
    bounds = sorted({e.bound for e in estimates if e.bound})
    if total is None:
        print(f"total: unknown ({sum(e.cpu_seconds is None for e in estimates)} experiment(s) failed to start)")
    else:
        print(f"total: {format_seconds(total)} CPU" + (f" (some estimates are bounds: {', '.join(bounds)})"
                                                        if bounds else ""))


@app.command()
@user_errors
def report(folder: Path = typer.Argument(..., help="A folder written by `repdyn reproduce` or `repdyn run`"),
           as_json: bool = JsonOpt, jobs: int = JobsOpt) -> None:
    """Re-render a report from stored results (no run is recomputed), analysing ``--jobs`` experiments at once."""
    check_executor(jobs, None)
    plan_ = load_plan(folder)
    _finish(plan_, analyse(plan_, recompute=False, jobs=jobs), as_json)


@app.command()
@user_errors
def record(folder: Path = typer.Argument(..., help="A folder written by `repdyn reproduce --scale full`"),
           to: Path = typer.Option(None, "--to", help="Where the records go [default: the source checkout's "
                                                       "docs/reproduction/verdicts/full]"),
           jobs: int = JobsOpt) -> None:
    """Commit-ready full verdicts: one record per paper of a full-scale reproduction (claims, commit, machine,
    CPU-seconds, config hashes), from its stored runs (none is recomputed)."""
    from repdyn.runtime.records import records_folder, records_of, write_record

    check_executor(jobs, None)
    plan_ = load_plan(folder)
    for made in records_of(plan_, analyse(plan_, recompute=False, jobs=jobs)):
        path = write_record(made, to or records_folder())
        print(f"paper {made['paper']}: {len(made['claims'])} claims, {made['cpu_seconds']['total']:.0f} CPU-s -> "
              f"{path}")


@app.command()
@user_errors
def verify(folder: Path = typer.Argument(..., help="A folder written by `repdyn reproduce` or `repdyn run` "
                                                   "(or its runs/ store)")) -> None:
    """Check every stored run (its checksum, and that it is the run of the key it is stored under) and every
    checkpoint; move corrupt ones to runs/.quarantine (exit 1 if any, or if one cannot be moved)."""
    from repdyn.runtime.store import QUARANTINE, ResultStore

    store = ResultStore(folder / "runs" if (folder / "runs").is_dir() else folder, keyed=True)
    if not any(store.stored_keys()) and not any(store.root.glob("*/*.ckpt")):
        raise ConfigError(f"{folder}: no stored runs here; give the --out folder of `repdyn reproduce` or `repdyn run`")
    found = store.verify()
    runs = [p for p in found.quarantined if p.suffix == ".npz"]
    checkpoints = [p for p in found.quarantined if p.suffix == ".ckpt"]
    print(f"{found.runs + len(runs)} stored runs in {store.root}: {found.runs} intact, {len(runs)} quarantined"
          + (f"; {found.checkpoints + len(checkpoints)} checkpoints: {found.checkpoints} intact, {len(checkpoints)} "
             f"quarantined" if found.checkpoints or checkpoints else "")
          + (f" (moved to {store.root / QUARANTINE}; `repdyn reproduce` recomputes them)" if found.quarantined else ""))
    for path in found.quarantined:
        print(f"quarantined {path}")
    for message in found.unmovable:
        typer.echo(f"error: {message}", err=True)
    if found.quarantined or found.unmovable:
        raise typer.Exit(1)


@app.command()
@user_errors
def analyze(recordings: list[Path] = typer.Argument(..., help="Monitor recordings: the .npz files written by "
                                                                "Monitor.save; several are overlaid in one report"),
            out: Path = typer.Option(None, "--out", help="Report folder (default: <name>-report beside the recording, "
                                                         "or monitor-comparison-report beside the first of several)")
            ) -> None:
    """Write the HTML report of repdyn.Monitor recordings of your own training runs (several: compared)."""
    from repdyn.monitor.recording import load_recording
    from repdyn.monitor.report import write_monitor_report

    for recording in recordings:
        try:
            load_recording(recording)
        except ValueError as error:
            raise ConfigError(str(error)) from None
    first = recordings[0]
    default = (first.parent / f"{first.stem}-report" if len(recordings) == 1
               else first.parent / "monitor-comparison-report")
    index = write_monitor_report(recordings, out or default)
    print(f"report: {index.resolve()}")
