"""Writing the full-scale records (:mod:`repdyn.framework.records`) from a finished full reproduction.

``repdyn record DIR`` re-analyses the store of ``repdyn reproduce --scale full --out DIR`` and writes one record per
paper whose every experiment DIR holds at the code's full config: the claims, the commit, the machine, the
CPU-seconds of the runs and analyses, and the config hashes the staleness test checks.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repdyn.framework.claims import ClaimResult
from repdyn.framework.config import ConfigError
from repdyn.framework.outcome import ExperimentOutcome
from repdyn.framework.records import FORMAT, RECORDS, config_hash, full_verdicts
from repdyn.runtime import registry
from repdyn.runtime.atomic import atomic_write_text
from repdyn.runtime.reproduce import Plan


def machine() -> dict[str, Any]:
    """The host a record was produced on: enough to compare CPU-seconds between records."""
    import torch

    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__}


def commit(cwd: Path = RECORDS) -> str:
    """The source checkout's commit (with "+dirty" for uncommitted changes), or "unknown" outside git."""
    here = cwd if cwd.is_dir() else Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def build_record(paper: str, claims: Sequence[ClaimResult], configs: Mapping[str, Any],
                 cpu_seconds: Mapping[str, float], *, date: str, revision: str) -> dict[str, Any]:
    """The record of one paper's full-scale reproduction. ``configs``: experiment -> the config it ran;
    ``cpu_seconds``: experiment -> CPU-seconds of its runs and analysis."""
    undecided = [f"{c.experiment}:{c.id}" for c in claims if c.scale != "full"]
    if undecided:
        raise ConfigError(f"paper {paper}: a full record needs claims judged at the full scale; "
                          f"{', '.join(undecided[:3])} were not")
    return {
        "format": FORMAT, "paper": paper, "scale": "full", "commit": revision, "date": date,
        "machine": machine(),
        "cpu_seconds": {"total": round(sum(cpu_seconds.values()), 1),
                        **{name: round(value, 1) for name, value in sorted(cpu_seconds.items())}},
        "config_hashes": {name: config_hash(config) for name, config in sorted(configs.items())},
        "claims": [{k: v for k, v in c.to_json().items() if k != "full_record"} for c in claims],
    }


def write_record(record: Mapping[str, Any], folder: Path = RECORDS) -> Path:
    """Write ``record`` as ``<folder>/<paper>.json`` (atomically)."""
    path = Path(folder) / f"{record['paper']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def records_of(plan_: Plan, outcomes: Sequence[ExperimentOutcome], *, date: str | None = None,
               revision: str | None = None) -> list[dict[str, Any]]:
    """One record per paper of a full-scale reproduction. Every experiment of the paper must be in the plan at the
    registry's full config (no ``--set`` overrides), else ConfigError names what is missing or changed."""
    if plan_.scale != "full":
        raise ConfigError(f"{plan_.out}: a record is made from a full-scale reproduction, this one is {plan_.scale}")
    by_name = {o.name: o for o in outcomes}
    planned = {item.name: item for item in plan_.experiments}
    records = []
    date = date or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    revision = revision or commit()
    for paper in sorted({item.experiment.paper for item in plan_.experiments}):
        names = [e.name for e in registry.all_experiments().values() if e.paper == paper]
        missing = [name for name in names if name not in planned]
        if missing:
            raise ConfigError(f"paper {paper}: the record needs every experiment of the paper; {plan_.out} lacks "
                              f"{', '.join(missing)}")
        changed = [name for name in names
                   if config_hash(planned[name].config) != config_hash(planned[name].experiment.config("full"))]
        if changed:
            raise ConfigError(f"paper {paper}: {', '.join(changed)} ran at a config other than the code's full "
                              "config (a --set override or an older version); rerun them at --scale full")
        seconds = {}
        for name in names:
            outcome = by_name[name]
            runs = sum(float(run.get("cpu_seconds") or 0.0) for run in outcome.runs)
            seconds[name] = runs + outcome.analysis_seconds
        records.append(build_record(paper, [c for name in names for c in by_name[name].claims],
                                    {name: planned[name].config for name in names}, seconds, date=date,
                                    revision=revision))
    return records


def records_folder() -> Path:
    """Where the committed records are read from: ``$REPDYN_RECORDS`` if set, else :data:`RECORDS`."""
    return Path(os.environ.get("REPDYN_RECORDS") or RECORDS)


def with_records(outcomes: Sequence[ExperimentOutcome],
                 records: Mapping[str, Mapping[str, Any]]) -> list[ExperimentOutcome]:
    """``outcomes`` with each claim's committed full verdict attached (``ClaimResult.full_record``)."""
    found = full_verdicts(records)
    return [dataclasses.replace(o, claims=[dataclasses.replace(c, full_record=found.get((c.experiment, c.id)))
                                           for c in o.claims]) for o in outcomes]
