"""The monitor's HTML report: ``index.html`` (figures embedded, opens offline), ``steps.csv`` and
``steps.parquet`` (the per-step scalars), ``tables.json`` (every table of the report) and ``summary.json`` (the
summary of :func:`repdyn.monitor.analysis.analyze`), each written atomically.

The report is short by default: each section shows its first reading, every warning and its figures; the other
readings, the notes and every table are folded (``<details>``). One recording gives its report; several
(``repdyn analyze a.npz b.npz ...``) give one report that opens with the runs overlaid and a table of their
regimes and end values, followed by each run's sections (``steps.csv`` etc. then hold every
run, with a ``run`` column).

The page shares the experiments' report stylesheet (``templates/_style.html``) and template environment.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from collections.abc import Sequence
from pathlib import Path

import repdyn
from repdyn.monitor.analysis import Analysis, Section, analyze_one, compare
from repdyn.monitor.recording import Recording, load_recording
from repdyn.report.render import ENVIRONMENT, write_table
from repdyn.runtime.atomic import atomic_write_text

RecordingLike = Recording | str | os.PathLike[str]


def _jsonable(value: object) -> object:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def _section(s: Section, prefix: str = "", run: str | None = None) -> dict[str, object]:
    """The section as the template reads it: its first reading and every warning shown, the other readings, the
    notes and the tables folded."""
    shown = [v for i, v in enumerate(s.verdicts) if i == 0 or v[0] == "warn"]
    more = [v for i, v in enumerate(s.verdicts) if not (i == 0 or v[0] == "warn")]
    return {"key": prefix + s.key, "title": s.title, "source": s.source, "text": s.text, "tables": s.tables,
            "notes": s.notes, "verdicts": shown, "more": more, "run": run,
            "figures": [(n, base64.b64encode(png).decode()) for n, png in s.figures.items() if png]}


def _labels(recordings: list[Recording], sources: list[str]) -> list[str]:
    """Run names for the overlay: the recordings' names, made unique by their file's folder where they clash."""
    names = [r.meta["name"] for r in recordings]
    if len(set(names)) == len(names):
        return names
    labels = [f"{n} ({Path(s).parent.parent.name})" if s != "(in memory)" else f"{n} #{i + 1}"
              for i, (n, s) in enumerate(zip(names, sources))]
    return labels if len(set(labels)) == len(labels) else [f"{n} #{i + 1}" for i, n in enumerate(names)]


def write_monitor_report(recording: RecordingLike | Sequence[RecordingLike], out: str | os.PathLike[str]) -> Path:
    """Analyse one recording or several (or the .npz paths of them) and write the report into ``out``; returns
    index.html."""
    items = list(recording) if isinstance(recording, list | tuple) else [recording]
    if not items:
        raise ValueError("no recording to report")
    recordings, sources = [], []
    for item in items:
        if isinstance(item, Recording):
            recordings.append(item)
            sources.append("(in memory)")
        else:
            sources.append(str(Path(item).resolve()))
            recordings.append(load_recording(item))
    out = Path(out)
    analyses: list[Analysis] = [analyze_one(r, figures=True) for r in recordings]
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _write(recordings, sources, analyses, out)
    except BaseException:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # never leave an empty report folder behind
        raise


def _comparison(labels: list[str], recordings: list[Recording], analyses: list[Analysis]) -> dict[str, object]:
    try:
        return _section(compare(list(zip(labels, recordings, analyses))))
    except Exception as error:  # noqa: BLE001 - the runs' own sections are still written
        return _section(Section("comparison", f"Comparison of {len(recordings)} runs", "all recordings",
                                "", verdicts=[("warn", f"the comparison could not be computed "
                                                       f"({type(error).__name__}: {error})")]))


def _write(recordings: list[Recording], sources: list[str], analyses: list[Analysis], out: Path) -> Path:
    labels = _labels(recordings, sources)
    single = len(recordings) == 1
    if single:
        write_table(analyses[0].tables["steps"], out / "steps.csv", out / "steps.parquet")
    else:
        import pandas

        frames = [a.tables["steps"].assign(run=label) for label, a in zip(labels, analyses)]
        write_table(pandas.concat(frames, ignore_index=True), out / "steps.csv", out / "steps.parquet")
    tables = {label: {s.key: {caption: [{k: _jsonable(v) for k, v in row.items()} for row in rows]
                              for caption, rows in s.tables} for s in a.sections}
              for label, a in zip(labels, analyses)}
    atomic_write_text(out / "tables.json", json.dumps(tables[labels[0]] if single else tables, indent=1,
                                                      ensure_ascii=False))
    summaries = {label: _jsonable(a.summary) for label, a in zip(labels, analyses)}
    atomic_write_text(out / "summary.json", json.dumps(summaries[labels[0]] if single else summaries, indent=1,
                                                       ensure_ascii=False))
    comparison = None if single else _comparison(labels, recordings, analyses)
    runs = []
    for i, (label, rec, analysis, source) in enumerate(zip(labels, recordings, analyses, sources)):
        prefix = "" if single else f"run{i + 1}-"
        run_sections = [_section(s, prefix, None if single else label) for s in analysis.sections]
        meta = rec.meta
        runs.append({"label": label, "meta": meta, "source": source, "steps": rec.steps.tolist(),
                     "record_seconds": float(rec["record_seconds"].sum()), "prefix": prefix,
                     "verdicts": [(level, text) for key, level, text in analysis.verdicts if key == "run"],
                     "omitted": analysis.omitted, "failed": analysis.failed, "sections": run_sections,
                     "coverage": meta.get("coverage"), "total_steps": meta.get("total_steps")})
    title = (f"repdyn monitor: {recordings[0].meta['name']}" if single
             else f"repdyn monitor: {len(recordings)} runs ({', '.join(labels)})")
    html = ENVIRONMENT.get_template("monitor.html").render(
        title=title, version=repdyn.__version__, runs=runs, single=single, comparison=comparison,
        generated=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    index = out / "index.html"
    atomic_write_text(index, html)
    return index
