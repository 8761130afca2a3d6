"""The ``repdyn`` command. Exit codes: 0 every evaluated claim passes, 1 a claim fails (named) or a run
crashed, 2 bad input (one line naming the value and what is allowed; nothing written)."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from repdyn.experiments.config import ConfigError, describe_fields, parse_assignments
from repdyn.runtime import registry
from repdyn.runtime.reproduce import Plan, analyse, execute, load_plan, plan
from repdyn.runtime.tasks import TaskFailed

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="repdyn: theories of representation-learning dynamics, tested against real networks.")
err = Console(stderr=True)

ScaleOpt = typer.Option("quick", "--scale", help="smoke (seconds), quick (minutes on a CPU) or paper (GPU/cluster)")
SeedOpt = typer.Option(0, "--seed", help="Base seed; each run derives its own from it")
DeviceOpt = typer.Option("cpu", "--device", help="cpu or cuda")
JobsOpt = typer.Option(1, "--jobs", help="Local worker processes")
ClusterOpt = typer.Option(None, "--cluster", help="Dask scheduler address (tcp://host:8786) or local:N")
ForceOpt = typer.Option(False, "--force", help="Recompute runs that are already stored")
JsonOpt = typer.Option(False, "--json", help="Print a JSON summary on stdout")


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn bad input into one line on stderr and exit code 2; a crashed run into exit code 1."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ConfigError as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(2) from None
        except TaskFailed as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("interrupted: finished runs are stored; run the same command again to resume", err=True)
            raise typer.Exit(130) from None

    return wrapper


def _execute_with_progress(plan_: Plan, jobs: int, cluster: str | None, force: bool) -> None:
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=False, disable=not err.is_terminal) as progress:
        bar = progress.add_task("runs", total=0)

        def on_start(total: int, todo: int) -> None:
            progress.update(bar, total=todo, description=f"runs ({total - todo} of {total} stored)")

        def on_done(task: Any, status: str) -> None:
            progress.update(bar, advance=1, description=f"{task.experiment} {task.label}: {status}")

        execute(plan_, jobs=jobs, cluster=cluster, force=force, on_done=on_done, on_start=on_start)


def _finish(plan_: Plan, as_json: bool) -> None:
    from repdyn.report.render import write_report

    outcomes = analyse(plan_)
    index = write_report(plan_.out, outcomes, scale=plan_.scale, seed=plan_.seed, device=plan_.device)
    claims = [c for o in outcomes for c in o.claims]
    failed = [c for c in claims if c.status == "FAIL"]
    passed = sum(c.passed for c in claims)
    skipped = sum(c.skipped for c in claims)
    if as_json:
        print(json.dumps({"report": str(index), "passed": passed, "skipped": skipped, "total": len(claims),
                          "failed": [f"{c.experiment}:{c.id}" for c in failed],
                          "claims": [c.to_json() for c in claims]}, indent=2))
    else:
        print(f"{passed} of {len(claims)} claims pass" + (f" ({skipped} skipped)" if skipped else ""))
        for claim in failed:
            print(f"FAIL {claim.experiment}:{claim.id}: measured {claim.measured}, expected {claim.expected}"
                  f"{' (' + claim.note + ')' if claim.note else ''}")
        print(f"report: {index.resolve()}")
    if failed:
        raise typer.Exit(1)


@app.command("list")
@user_errors
def list_experiments(as_json: bool = JsonOpt) -> None:
    """List the experiments with their claims and sources."""
    experiments = registry.all_experiments()
    if as_json:
        print(json.dumps([{
            "name": e.name, "title": e.title, "seed": e.seed, "source": e.source,
            "settings": [name for name, _, _ in describe_fields(e.Config)],
            "claims": [{"id": c.id, "statement": c.statement, "source": c.source,
                        "expected": c.expectation.describe()} for c in e.claims],
        } for e in experiments.values()], indent=2))
        return
    for e in experiments.values():
        print(f"{e.name}  [seed {e.seed}, {e.source}]  {e.title}")
        for c in e.claims:
            print(f"    {c.id}: {c.statement}  (expected {c.expectation.describe()}; {c.source})")


@app.command()
@user_errors
def run(name: str = typer.Argument(..., help="Experiment name (see `repdyn list`)"),
        scale: str = ScaleOpt,
        set_: list[str] = typer.Option([], "--set", help="Override a config value: key=value (repeatable)"),
        seed: int = SeedOpt, device: str = DeviceOpt,
        out: Path = typer.Option(None, "--out", help="Output folder [default: repdyn-out/NAME]"),
        jobs: int = JobsOpt, cluster: str = ClusterOpt, force: bool = ForceOpt, as_json: bool = JsonOpt) -> None:
    """Run one experiment and write its report."""
    registry.get(name)
    plan_ = plan([name], scale=scale, overrides=parse_assignments(set_), seed=seed, device=device,
                 out=out or Path("repdyn-out") / name, cluster=cluster)
    _execute_with_progress(plan_, jobs, cluster, force)
    _finish(plan_, as_json)


@app.command()
@user_errors
def reproduce(scale: str = ScaleOpt,
              only: str = typer.Option(None, "--only", help="Comma-separated experiments or topics"),
              out: Path = typer.Option(Path("repdyn-out"), "--out", help="Output folder"),
              jobs: int = JobsOpt, cluster: str = ClusterOpt, force: bool = ForceOpt,
              seed: int = SeedOpt, device: str = DeviceOpt, as_json: bool = JsonOpt) -> None:
    """Run every experiment (or --only some) and write the report of theory against experiment."""
    names = [n.strip() for n in only.split(",") if n.strip()] if only else None
    plan_ = plan(names, scale=scale, seed=seed, device=device, out=out, cluster=cluster)
    _execute_with_progress(plan_, jobs, cluster, force)
    _finish(plan_, as_json)


@app.command()
@user_errors
def report(folder: Path = typer.Argument(..., help="A folder written by `repdyn reproduce` or `repdyn run`"),
           as_json: bool = JsonOpt) -> None:
    """Re-render a report from stored results (no run is recomputed)."""
    _finish(load_plan(folder), as_json)


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
