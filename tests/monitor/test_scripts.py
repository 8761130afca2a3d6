"""Three user scripts (CE + Adam MLP; BatchNorm/Dropout ResNet with OneCycle; Transformer encoder on token
ids with nested layer names) in the README's plain loop: first try, step 0 and the end recorded, training
bit-identical, and every problem with inputs, outputs or layers refused at construction with the fix."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

from monitor_scripts import KINDS, TokenClassifier, make, plain_loop
from repdyn.monitor import Monitor
from repdyn.monitor.monitor import IncompleteRecordingWarning


@pytest.mark.parametrize("kind", KINDS)
def test_readme_loop_records_step_zero_and_the_end_and_leaves_training_unchanged(kind, tmp_path):
    plain = make(kind)
    assert plain_loop(plain, 2, None) is None
    watched = make(kind)
    monitor = plain_loop(watched, 2, {"n_records": 5, "ntk_points": 8})
    for (name, a), b in zip(plain.model.state_dict().items(), watched.model.state_dict().values()):
        assert torch.equal(a, b), name  # parameters and BatchNorm running statistics, bit for bit
    with warnings.catch_warnings():
        warnings.simplefilter("error", IncompleteRecordingWarning)
        path = monitor.save(tmp_path)
    recording = monitor.recording()
    total = 2 * 3  # 96 points in batches of 32, two epochs
    assert recording.steps[0] == 0 and recording.steps[-1] == total
    assert recording.meta["total_steps"] == total and recording.meta["coverage"] == 1.0
    assert recording["ntk_steps"][-1] == total  # the trained model's NTK
    assert path.is_file()
    latest = monitor.latest()
    assert {f"repdyn/nc1/{layer}" for layer in watched.layers} <= set(latest)
    assert "repdyn/ntk_alignment" in latest and 0 < latest["repdyn/probe_accuracy"] <= 1


def test_old_loop_order_is_still_closed_and_an_unfinished_run_warns(tmp_path):
    script = make("mlp")
    monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, total_steps=10,
                      measures=("rank",))
    for step in range(6):  # stopped early: 6 of 10 steps
        monitor.step(step)
    with pytest.warns(IncompleteRecordingWarning, match=r"ends at step 5 of total_steps=10 \(50 % of training\)"):
        monitor.save(tmp_path)
    assert monitor.recording().meta["coverage"] == pytest.approx(0.5)
    monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, total_steps=10,
                      measures=("rank",), name="closed")
    for step in range(10):
        monitor.step(step)
    monitor.save(tmp_path)  # no warning: the loop ran to its end, save() recorded step 10
    assert monitor.recording().steps[-1] == 10


def test_every_n_steps_lines_up_with_a_dashboard_and_sinks_receive_each_recording():
    script = make("mlp")
    received = []
    monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, measures=("rank", "elasticity"),
                      every_n_steps=4, total_steps=10, on_record=lambda s, step: received.append((step, s)))
    for step in range(10):
        monitor.step(step)
    monitor.finish()
    assert [s for s, _ in received] == [0, 4, 8, 10]
    assert received[-1][1] == monitor.latest()
    assert set(received[0][1]) == {"repdyn/probe_accuracy", "repdyn/probe_cross_entropy",
                                   "repdyn/probe_squared_error", "repdyn/effective_rank/1",
                                   "repdyn/effective_rank/3", "repdyn/nc1/1", "repdyn/nc1/3"}
    open_ended = Monitor(script.model, script.layers, script.probe_x, script.probe_y, measures=("rank",),
                         every_n_steps=3)
    assert [s for s in range(10) if open_ended.step(s)] == [0, 3, 6, 9]


def test_layers_given_as_modules_and_a_tuple_valued_layer_with_its_selector():
    script = make("transformer")
    model = script.model
    attention = model.encoder.layers[0].self_attn
    with pytest.raises(ValueError, match=r"layer 'encoder.layers.0.self_attn' returns a tuple of \(2, 6, 16\), "
                                         r"NoneType, not one tensor: pass select=\{'encoder.layers.0.self_attn': 0\}"):
        Monitor(model, [attention], script.probe_x, script.probe_y)
    monitor = Monitor(model, [attention, model.encoder.layers[1]], script.probe_x, script.probe_y,
                      select={attention: 0}, schedule=[0], ntk_points=4)
    assert monitor.layers == ["encoder.layers.0.self_attn", "encoder.layers.1"]
    monitor.step(0)
    assert monitor.recording()["effective_rank"].shape == (1, 2)
    with pytest.raises(ValueError, match="is not a submodule of the model"):
        Monitor(model, [nn.Linear(2, 2)], script.probe_x, script.probe_y)


class _TupleModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = torch.tanh(self.body(x))
        return self.head(hidden), hidden


def test_outputs_and_inputs_are_adapted_or_refused_with_the_fix():
    script = make("mlp")
    x, y = script.probe_x, script.probe_y
    with pytest.raises(ValueError, match=r"returns a tuple of \(2, 4\), \(2, 16\), not one \(n, d_out\) tensor: "
                                         r"pass output_fn to pick it, e.g. output_fn=lambda out: out\[0\]"):
        Monitor(_TupleModel(), ["body"], x, y)
    monitor = Monitor(_TupleModel(), ["body"], x, y, output_fn=lambda out: out[0], schedule=[0], ntk_points=6)
    monitor.step(0)
    with torch.no_grad():
        expected = _TupleModel()(x)[0]
    np.testing.assert_allclose(monitor.recording()["outputs"][0], expected.numpy(), rtol=1e-6)
    # a dict batch and a model called with keywords, with a forward_fn
    batch = {"features": x}
    with pytest.raises(ValueError, match=r"\{features: \(24, 8\) float32\} do not fit the model .* pass forward_fn"):
        Monitor(script.model, script.layers, batch, y)
    monitor = Monitor(script.model, script.layers, batch, y, forward_fn=lambda m, b: m(b["features"]),
                      schedule=[0], ntk_points=6)
    monitor.step(0)
    reference = Monitor(script.model, script.layers, x, y, schedule=[0], ntk_points=6)
    reference.step(0)
    np.testing.assert_allclose(monitor.recording()["ntk"], reference.recording()["ntk"], rtol=1e-5)
    assert np.isnan(monitor.recording()["pair_X"]).all()  # no input distance for a batch of features


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_token_id_transformer_ntk_matches_the_jacobian_method():
    model = TokenClassifier()
    tokens = torch.randint(0, 12, (8, 6), generator=torch.Generator().manual_seed(0))
    labels = torch.arange(8) % 4
    monitor = Monitor(model, ["encoder.layers.1"], tokens, labels, schedule=[0], ntk_points=8)
    monitor.step(0)
    from repdyn.probes import empirical_ntk

    expected = empirical_ntk(model, tokens[monitor.ntk_index], method="jacobian").double().numpy()
    np.testing.assert_allclose(monitor.recording()["ntk"][0], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.browser
def test_reports_of_the_three_scripts_and_their_comparison_render_in_chromium(browser, tmp_path):
    from repdyn.monitor.report import write_monitor_report
    from report_browser import check_report_in_browser

    paths = []
    for kind in KINDS:
        monitor = plain_loop(make(kind), 2, {"n_records": 5, "ntk_points": 8, "name": kind})
        paths.append(monitor.save(tmp_path / "runs"))
        index = write_monitor_report(paths[-1], tmp_path / f"{kind}-report")
        check_report_in_browser(browser, index, tmp_path / f"{kind}.png")
        sections = browser.execute_script("return Array.from(document.querySelectorAll('section')).map(s => s.id)")
        assert sections == ["training", "ntk", "elasticity", "representations"]  # two_point: not under CE
        verdicts = browser.execute_script("return Array.from(document.querySelectorAll('ul.verdicts li'))"
                                          ".map(li => [li.className, li.innerText])")
        assert verdicts[0][1].startswith("Regime: ") and len(verdicts) >= 6  # the run's regime leads
        assert verdicts[1][0] == "good" and "covers 100 % of training" in verdicts[1][1]
        omitted = browser.execute_script("return document.querySelector('[data-measure=two_point]').innerText")
        assert "cross-entropy" in omitted
    index = write_monitor_report(paths, tmp_path / "comparison")
    check_report_in_browser(browser, index, tmp_path / "comparison.png")
    sections = browser.execute_script("return Array.from(document.querySelectorAll('section')).map(s => s.id)")
    assert sections[0] == "comparison" and len(sections) == 1 + 3 * 4
