"""`repdyn analyze`: the report of a stored recording, and bad input refused with exit code 2."""

from __future__ import annotations

import json

import torch
from typer.testing import CliRunner

from repdyn.cli import app
from repdyn.monitor import Monitor
from repdyn.report.render import ENVIRONMENT


def test_analyze_writes_the_report_of_a_stored_recording(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x, y = torch.randn(18, 4), torch.arange(18) % 3
    monitor = Monitor(model, ["1"], x, y, measures=("elasticity", "rank", "coi"), schedule=[0, 1, 2])
    for step in range(3):
        monitor.step(step)
        with torch.no_grad():
            model[2].weight.mul_(1.5)
    path = monitor.save(tmp_path / "store")
    result = CliRunner().invoke(app, ["analyze", str(path)])
    assert result.exit_code == 0, result.output
    index = tmp_path / "store" / "monitor" / "run-report" / "index.html"
    assert str(index.resolve()) in result.output
    html = index.read_text()
    assert ENVIRONMENT.get_template("_style.html").render() in html  # the experiments' stylesheet, shared
    assert 'id="elasticity"' in html and 'id="representations"' in html and 'id="two_point"' not in html
    tables = json.loads((index.parent / "tables.json").read_text())
    rows = tables["representations"]["per step"]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[0]["effective rank [1]"] == monitor.recording()["effective_rank"][0, 0]


def test_analyze_refuses_a_missing_or_foreign_file(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(app, ["analyze", str(tmp_path / "nothing.npz")])
    assert missing.exit_code == 2
    assert "must be an existing .npz file written by Monitor.save" in missing.output
    foreign = tmp_path / "a" / "b.npz"
    foreign.parent.mkdir()
    foreign.write_bytes(b"not a zip")
    result = runner.invoke(app, ["analyze", str(foreign)])
    assert result.exit_code == 2 and "is not a monitor recording" in result.output
