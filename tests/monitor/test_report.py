"""`repdyn analyze`: the report of a stored recording, and bad input refused with exit code 2."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

import repdyn
from repdyn.cli import app
from repdyn.monitor import IncompleteRecordingWarning, Monitor
from repdyn.monitor.report import write_monitor_report
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
    with pytest.warns(IncompleteRecordingWarning, match="total_steps was not given, so the trained model is taken "
                                                         "to be step 3"):
        path = monitor.save(tmp_path / "store")
    result = CliRunner().invoke(app, ["analyze", str(path)])
    assert result.exit_code == 0, result.output
    index = tmp_path / "store" / "monitor" / f"{path.stem}-report" / "index.html"
    assert str(index.resolve()) in result.output
    html = index.read_text()
    assert ENVIRONMENT.get_template("_style.html").render() in html  # the experiments' stylesheet, shared
    assert 'id="elasticity"' in html and 'id="representations"' in html and 'id="two_point"' not in html
    tables = json.loads((index.parent / "tables.json").read_text())
    rows = tables["representations"]["per step"]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]  # the trained model, recorded by save()
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


def _cross_entropy_run(tmp_path, name="run", steps=6, lr=0.05, **kwargs):
    from monitor_scripts import make, plain_loop

    script = make("mlp")
    script.lr = lr
    monitor = plain_loop(script, steps // 3, {"name": name, "n_records": 5, "ntk_points": 8, **kwargs})
    return monitor


def test_report_reads_each_measure_and_leaves_out_what_does_not_apply(tmp_path):
    monitor = _cross_entropy_run(tmp_path)
    path = monitor.save(tmp_path / "store")
    analysis = repdyn.analyze(path)
    assert set(analysis.tables) == {"steps", "training", "ntk", "elasticity", "representations"}
    assert analysis.tables["training"].columns.tolist()[:3] == ["step", "probe cross-entropy", "probe accuracy"]
    summary = analysis.summary
    assert summary["coverage"] == 1.0 and summary["last_step"] == summary["total_steps"] == 6
    assert summary["ntk_alignment_last"] == pytest.approx(analysis.tables["ntk"]["kernel alignment"].iloc[-1])
    assert "two_point" in summary["omitted"] and "cross-entropy" in summary["omitted"]["two_point"]
    assert {v["section"] for v in summary["verdicts"]} >= {"run", "training", "ntk", "elasticity", "representations"}
    index = write_monitor_report(path, tmp_path / "report")
    html = index.read_text()
    assert 'id="two_point"' not in html and 'data-measure="two_point"' in html
    assert "covers 100 % of training: steps 0 to 6" in html and "100.0 % (last recorded step 6 of 6)" in html
    assert "probe squared error" not in html  # not the loss of this run
    assert "separable (checked at" in html and "not checked" in html
    assert json.loads((index.parent / "summary.json").read_text())["coverage"] == 1.0


def test_report_warns_when_the_recording_ended_early_and_without_a_stated_loss(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x, y = torch.randn(18, 4), torch.arange(18) % 3
    monitor = Monitor(model, ["1"], x, y, measures=("two_point", "elasticity", "rank"), total_steps=100)
    for step in range(40):
        monitor.step(step)
    with pytest.warns(IncompleteRecordingWarning):
        path = monitor.save(tmp_path)
    html = write_monitor_report(path, tmp_path / "report").read_text()
    assert "Recording ended early: the last recorded step is 28 of total_steps=100 (28 % of training)" in html
    assert "the training loss was not stated" in html and 'id="two_point"' in html  # shown, with the caution


def test_hamiltonian_is_read_only_with_a_small_stationarity_residual(tmp_path):
    from monitor_scripts import Residual

    x, y = torch.randn(9, 3, generator=torch.Generator().manual_seed(2)), torch.arange(9) % 3
    lam = 0.1

    def cost(outputs, labels):
        return (torch.nn.functional.one_hot(labels, 3).to(outputs.dtype) - outputs).pow(2).sum() / len(labels)

    model = Residual()
    monitor = Monitor(model, ["stream.0", "stream.1", "stream.2"], x, y, measures=("rank", "coi", "hamiltonian"),
                      cost=cost, weight_decay=lam, schedule=[0, 1])
    monitor.step(0)
    monitor.step(1)
    recording = monitor.recording()
    # r = ‖∇C + λθ‖/‖λθ‖ by plain autograd
    with torch.enable_grad():
        grads = torch.autograd.grad(cost(model(x), y), list(model.parameters()))
    params = [p.detach().double() for p in model.parameters()]
    gap = sum((g.double() + lam * p).pow(2).sum() for g, p in zip(grads, params))
    size = sum((lam * p).pow(2).sum() for p in params)
    assert recording["stationarity"][0] == pytest.approx(float((gap / size).sqrt()), rel=1e-6)
    analysis = repdyn.analyze(recording)
    section = analysis.sections[-1]
    assert section.title == "Representations: effective rank, Cost of Identity, Hamiltonian"
    assert any(level == "warn" and "Hamiltonian not readable" in text for level, text in section.verdicts)
    assert "stationarity residual" in analysis.tables["representations"].columns
    assert section.figures  # effective rank and Cost of Identity are drawn, the Hamiltonian is not
    # at a critical point (r small) the Hamiltonian is read, with its spread over the layers
    import numpy as np

    from repdyn.monitor.analysis import representations
    from repdyn.monitor.recording import Recording

    critical = Recording(arrays={"steps": np.array([0, 10]), "hamiltonian": np.array([[1.0, 3.0], [2.0, 2.02]]),
                                 "momentum_norm": np.ones((2, 2)), "stationarity": np.array([0.5, 0.01])},
                         meta={"layers": ["a", "b"], "measures": ["hamiltonian"]})
    verdicts = representations(critical).verdicts
    assert verdicts == [("good", "stationarity residual r = 0.01 < 0.1: the Hamiltonian can be read; it varies by "
                                 "0.01 of its mean over the layers (0 at a critical point)")]


def test_analyze_overlays_several_runs_in_one_report(tmp_path):
    paths = [_cross_entropy_run(tmp_path, name=f"lr{lr:g}", lr=lr).save(tmp_path / "sweep") for lr in (0.01, 0.1)]
    result = CliRunner().invoke(app, ["analyze", *map(str, paths)])
    assert result.exit_code == 0, result.output
    index = tmp_path / "sweep" / "monitor" / "monitor-comparison-report" / "index.html"
    html = index.read_text()
    assert 'id="comparison"' in html and 'id="run1-ntk"' in html and 'id="run2-ntk"' in html
    comparison = html.split('id="comparison"')[1].split("</section>")[0]
    assert "<details open><summary>table: runs (2 rows)" in comparison and "<th>regime</th>" in comparison
    assert html.count("<details open") == 1  # every other table folded
    tables = json.loads((index.parent / "tables.json").read_text())
    assert set(tables) == {"lr0.01", "lr0.1"}
    steps = (index.parent / "steps.csv").read_text().splitlines()
    assert steps[0].endswith(",run") and len(steps) == 1 + 2 * 5


def test_step_axes_start_at_zero_and_keep_the_last_point_inside():
    from repdyn.monitor.analysis import _figure, _png, _step_axis

    fig, (ax,) = _figure(1)
    ax.plot([0, 1, 10, 250], [1.0, 2.0, 3.0, 4.0], "o-")
    _step_axis(ax)
    assert _png(fig)[:4] == b"\x89PNG"
    low, high = ax.get_xlim()
    assert low == -0.3 and high == pytest.approx(1.4 * 250)  # no tick at −10¹; the last marker inside
    assert all(t >= -0.3 for t in ax.get_xticks() if low <= t <= high)


def test_the_report_is_short_one_reading_per_section_and_tables_folded(tmp_path):
    monitor = _cross_entropy_run(tmp_path)
    path = monitor.save(tmp_path / "store")
    html = write_monitor_report(path, tmp_path / "report").read_text()
    assert "<details open" not in html and "<details><summary>table: per step" in html
    analysis = repdyn.analyze(path)
    for section in analysis.sections:
        body = html.split(f'id="{section.key}"')[1].split("</section>")[0]
        shown = body.split('<details class="more">')[0]
        expected = [v for i, v in enumerate(section.verdicts) if i == 0 or v[0] == "warn"]
        assert shown.count("<li class=") == len(expected), section.key
    # the two-point theory, inapplicable under cross-entropy, is left out quietly: one line, no warning
    assert not any("two-point" in text for _, level, text in analysis.verdicts if level == "warn")
    assert html.count('data-measure="two_point"') == 1
