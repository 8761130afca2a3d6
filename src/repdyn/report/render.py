"""The report: a self-contained ``index.html`` (figures embedded as base64 PNG, opens offline), ``claims.json``,
``metrics.csv`` + ``metrics.parquet`` (one row per run or condition), and ``runs.csv`` (per-run status and time).
"""

from __future__ import annotations

import base64
import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

import repdyn
from repdyn.framework.claims import VERDICTS, ClaimResult
from repdyn.framework.outcome import ExperimentOutcome
from repdyn.runtime import registry
from repdyn.runtime.atomic import atomic_write, atomic_write_text, write_json_atomic

ENVIRONMENT = jinja2.Environment(loader=jinja2.PackageLoader("repdyn.report", "templates"),
                          autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)


def format_value(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


ENVIRONMENT.filters["fmt"] = format_value


def write_table(frame: pd.DataFrame, csv_path: Path, parquet_path: Path | None = None) -> None:
    """Write a table as CSV (and Parquet) atomically."""
    frame = frame.copy()
    atomic_write(csv_path, lambda handle: frame.to_csv(handle, index=False))
    if parquet_path is not None:
        # Mixed-type columns (a metric that is a string in one experiment, a number in another) become text.
        for column in frame.columns:
            if frame[column].dtype == object:
                frame[column] = frame[column].map(lambda v: v if v is None else str(v))
        atomic_write(parquet_path, lambda handle: frame.to_parquet(handle, index=False))


def verdict_counts(claims: Sequence[ClaimResult]) -> dict[str, int]:
    """Verdict -> number of claims, in the order of VERDICTS (documented "not reproduced" counted as such)."""
    return {verdict: sum(c.verdict == verdict for c in claims) for verdict in VERDICTS}


def write_report(out: str | os.PathLike[str], outcomes: Sequence[ExperimentOutcome], *, scale: str, seed: int,
                 device: str) -> Path:
    """Write the report files into ``out`` (index.html, claims.json, metrics.csv and .parquet, runs.csv); returns
    the path of index.html.

    Example:

        >>> import tempfile, repdyn
        >>> p = repdyn.plan(["shallow_relu.lazy_width"], scale="smoke", out=tempfile.mkdtemp())
        >>> index = repdyn.write_report(p.out, repdyn.reproduce(p), scale="smoke", seed=0, device="cpu")
        >>> index.name, sorted(path.name for path in index.parent.glob("*.csv"))
        ('index.html', ['metrics.csv', 'runs.csv'])
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    claims = [claim for outcome in outcomes for claim in outcome.claims]
    write_json_atomic(out / "claims.json", {
        "version": repdyn.__version__, "scale": scale, "seed": seed, "device": device,
        "verdicts": verdict_counts(claims), "total": len(claims),
        "as_recorded": sum(c.as_recorded for c in claims), "claims": [c.to_json() for c in claims],
    })
    metrics = [{"experiment": o.name, **row} for o in outcomes for row in o.metrics]
    write_table(pd.DataFrame(metrics or [{"experiment": None}]), out / "metrics.csv", out / "metrics.parquet")
    runs = [{"experiment": o.name, **run} for o in outcomes for run in o.runs]
    write_table(pd.DataFrame(runs or [{"experiment": None}]), out / "runs.csv")
    papers = registry.all_papers()
    sections = []
    for number in sorted({o.paper for o in outcomes}):
        mine = [o for o in outcomes if o.paper == number]
        sections.append({
            "number": number, "paper": papers.get(number),
            "counts": verdict_counts([c for o in mine for c in o.claims]),
            "experiments": [{"outcome": o, "figures": _figures(o)} for o in mine],
        })
    html = ENVIRONMENT.get_template("report.html").render(
        title="repdyn report", version=repdyn.__version__, scale=scale, seed=seed, device=device,
        generated=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        claims=claims, counts=verdict_counts(claims), differ=[c for c in claims if not c.as_recorded],
        sections=sections, verdicts=VERDICTS,
    )
    index = out / "index.html"
    atomic_write_text(index, html)
    return index


def _figures(outcome: ExperimentOutcome) -> list[tuple[str, str]]:
    """(name, base64 PNG) of the experiment's figures, the claims figure first (drawn by the analysis)."""
    return [(name, base64.b64encode(png).decode()) for name, png in outcome.figures.items()]
