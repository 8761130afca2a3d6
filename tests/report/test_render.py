import json

import pandas as pd

from repdyn.experiments.claims import ClaimSpec, InRange, evaluate
from repdyn.report.render import write_report
from repdyn.runtime.reproduce import ExperimentOutcome


def outcome(name: str, metrics: list[dict]) -> ExperimentOutcome:
    spec = ClaimSpec("c", "a <b>statement</b>", "seed 000, Eq. 7", InRange(0, 1))
    return ExperimentOutcome(name, "Title", "000", "Fig. 2", {"width": 3}, [evaluate(name, spec, 2.0)], {},
                             metrics, [{"label": "r", "status": "ok", "seconds": 0.1, "step": None}], notes="why")


def test_report_files_escape_html_and_keep_mixed_metrics(tmp_path):
    index = write_report(tmp_path, [outcome("a.x", [{"v": 1.0}]), outcome("b.y", [{"v": "text"}])],
                         scale="smoke", seed=3, device="cpu")
    html = index.read_text()
    assert "a &lt;b&gt;statement&lt;/b&gt;" in html and "0 of 2 pass" in html and "why" in html
    claims = json.loads((tmp_path / "claims.json").read_text())
    assert (claims["passed"], claims["total"], claims["claims"][0]["measured"]) == (0, 2, 2.0)
    frame = pd.read_parquet(tmp_path / "metrics.parquet")
    assert list(frame["experiment"]) == ["a.x", "b.y"] and list(frame["v"]) == ["1.0", "text"]
    assert list(pd.read_csv(tmp_path / "metrics.csv")["v"]) == ["1.0", "text"]
