"""The monitor's HTML report: ``index.html`` (figures embedded, opens offline), ``steps.csv`` and
``steps.parquet`` (the per-step scalars) and ``tables.json`` (every table of the report), each written atomically.

The page shares the experiments' report stylesheet (``templates/_style.html``) and template environment.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from pathlib import Path

import repdyn
from repdyn.monitor.analysis import analyse_recording
from repdyn.monitor.recording import Recording, load_recording
from repdyn.report.render import ENVIRONMENT, write_table
from repdyn.runtime.atomic import atomic_write_text


def _jsonable(value: object) -> object:
    if isinstance(value, float) and value != value:
        return None
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def write_monitor_report(recording: Recording | str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Analyse a recording (or the .npz path of one) and write its report into ``out``; returns index.html."""
    source = "(in memory)"
    if not isinstance(recording, Recording):
        source = str(Path(recording).resolve())
        recording = load_recording(recording)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sections = analyse_recording(recording)
    write_table(recording.scalar_table(), out / "steps.csv", out / "steps.parquet")
    tables = {s.key: {caption: [{k: _jsonable(v) for k, v in row.items()} for row in rows]
                      for caption, rows in s.tables} for s in sections}
    atomic_write_text(out / "tables.json", json.dumps(tables, indent=1, ensure_ascii=False))
    html = ENVIRONMENT.get_template("monitor.html").render(
        title=f"repdyn monitor: {recording.meta['name']}", version=repdyn.__version__, meta=recording.meta,
        source=source, steps=recording.steps.tolist(), record_seconds=float(recording["record_seconds"].sum()),
        generated=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        sections=[{"key": s.key, "title": s.title, "source": s.source, "text": s.text, "tables": s.tables,
                   "notes": s.notes,
                   "figures": [(n, base64.b64encode(png).decode()) for n, png in s.figures.items()]}
                  for s in sections],
    )
    index = out / "index.html"
    atomic_write_text(index, html)
    return index
