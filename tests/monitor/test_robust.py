"""The Monitor never breaks the training it watches, and `repdyn analyze` reads every valid recording: a measure
that fails records NaN with a warning naming it, the step and the reason; a report section that cannot be
computed is left out with its reason and the rest is written; the empirical NTK works on Hugging Face models
with an attention mask (vmap cannot trace their mask checks; per-sample Jacobians can)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from monitor_rich_lazy import train
from repdyn.cli import app
from repdyn.monitor import MeasureFailedWarning, Monitor, analyze, load_recording
from repdyn.monitor.report import write_monitor_report
from repdyn.probes import empirical_ntk


def _mlp() -> tuple[nn.Sequential, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    return model, torch.randn(24, 6), torch.arange(24) % 3


def test_dead_relus_and_a_run_gone_to_nan_record_nan_and_training_goes_on(tmp_path):
    model, x, y = _mlp()
    monitor = Monitor(model, ["1", "2"], x, y, total_steps=4, name="dead")
    with torch.no_grad():
        model[0].bias.fill_(-100.0)  # every ReLU dead: layer 1 is the zero matrix, the outputs are constant
    with pytest.warns(MeasureFailedWarning) as caught:
        assert monitor.step(0)
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(float("nan"))  # the run diverged
        for step in range(1, 4):
            monitor.step(step)
        path = monitor.save(tmp_path)
    messages = [str(w.message) for w in caught if issubclass(w.category, MeasureFailedWarning)]
    assert ("repdyn Monitor 'dead': effective rank of layer '1' failed at step 0 (ValueError: effective rank is "
            "undefined for a zero matrix); recorded as NaN, training goes on") in messages
    assert any("effective rank of layer '1' failed at step 4" in m and "linalg" in m for m in messages)
    assert any("neural collapse (NC1) of layer '1' failed at step 0" in m and "constant representation" in m
               for m in messages)
    recording = load_recording(path)
    assert recording.steps.tolist() == [0, 1, 2, 3, 4]
    assert np.isnan(recording["effective_rank"][:, 0]).all()
    assert [0, "effective rank of layer '1'"] in recording.meta["failures"]
    analysis = analyze(path)  # the analysis reads it too
    assert analysis.summary["last_step"] == 4


def test_step_finish_and_save_warn_instead_of_raising(tmp_path):
    model, x, y = _mlp()
    monitor = Monitor(model, ["1"], x, y, measures=("rank",), name="empty")
    with pytest.warns(MeasureFailedWarning, match="finish\\(\\) failed .*needs total_steps"):
        assert monitor.finish() is False
    with pytest.warns(MeasureFailedWarning, match="save.* failed .*nothing recorded yet"):
        assert monitor.save(tmp_path) is None
    monitor.step(0)

    def broken_sink(scalars, step):
        raise OSError("the dashboard is down")

    monitor.sinks.append(broken_sink)
    with pytest.warns(MeasureFailedWarning, match="the sink broken_sink failed at step 1 .*the dashboard is down"):
        assert monitor.step(1)


@pytest.fixture(scope="module")
def rich_and_lazy(tmp_path_factory):
    """The digits pair of monitor_rich_lazy trained for 60 steps: the lazy model f = α(g − g₀) outputs exactly 0
    at step 0."""
    root = tmp_path_factory.mktemp("pair")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        paths = {regime: train(regime, root, steps=60)[1] for regime in ("rich", "lazy")}
    return paths


def test_analyze_reads_a_centred_lazy_model_whose_outputs_start_at_zero(rich_and_lazy, tmp_path):
    lazy = load_recording(rich_and_lazy["lazy"])
    assert not lazy["outputs"][0].any()  # f = α(g − g₀) = 0 at step 0
    analysis = analyze(lazy)
    assert analysis.failed == {}
    elasticity = next(s for s in analysis.sections if s.key == "elasticity")
    assert any("class-mean logits are exactly 0 at the first recorded step" in n for n in elasticity.notes)
    assert math.isfinite(analysis.summary["nc1_last"])


def test_a_section_that_cannot_be_computed_is_left_out_with_its_reason(rich_and_lazy, tmp_path):
    recording = load_recording(rich_and_lazy["rich"])
    recording.arrays["ntk"] = np.full_like(recording["ntk"], np.nan)  # every NTK failed
    analysis = analyze(recording)
    assert "ntk" in analysis.failed and "not finite at any step" in analysis.failed["ntk"]
    assert {s.key for s in analysis.sections} == {"training", "two_point", "elasticity", "representations"}
    assert any(v[1] == "warn" and "the ntk section could not be computed" in v[2] for v in analysis.verdicts)


def test_analyze_writes_the_rest_of_a_report_with_a_failed_section_and_the_lazy_run(rich_and_lazy, tmp_path):
    recording = load_recording(rich_and_lazy["rich"])
    recording.arrays["ntk"] = np.full_like(recording["ntk"], np.nan)
    broken = recording.save(tmp_path / "store")
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["analyze", str(broken), str(rich_and_lazy["lazy"]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = (out / "index.html").read_text()
    assert 'data-failed="ntk"' in html and 'id="run2-ntk"' in html and 'id="run1-ntk"' not in html
    assert 'id="run2-elasticity"' in html and 'id="run1-elasticity"' in html
    assert "class-mean logits are exactly 0 at the first recorded step" in html


def test_a_report_that_fails_leaves_no_empty_out_folder(rich_and_lazy, tmp_path, monkeypatch):
    import repdyn.monitor.report as report

    def fail(*args):
        raise RuntimeError("disk full")

    monkeypatch.setattr(report, "_write", fail)
    monkeypatch.setattr(report, "analyze_one", lambda recording, figures: analyze(recording))
    with pytest.raises(RuntimeError, match="disk full"):
        write_monitor_report(rich_and_lazy["rich"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _explicit_ntk(model, batch, forward):
    """Σ_θ ∂f_a(x_i)/∂θ ∂f_a(x_j)/∂θ by one plain backward pass per input and output (no torch.func)."""
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    model.eval()
    for i in range(batch["input_ids"].shape[0]):
        out = forward(model, {k: v[i:i + 1] for k, v in batch.items()}).reshape(-1)
        rows.append(torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(
            out[a], params, retain_graph=True, allow_unused=True, materialize_grads=True)])
            for a in range(out.shape[0])]))
    jac = torch.stack(rows)
    return torch.einsum("iap,jap->ij", jac, jac)


def _hf(kind: str):
    transformers = pytest.importorskip("transformers", reason="the hf extra is missing: pip install 'repdyn[hf]'")
    torch.manual_seed(0)
    if kind == "bert":
        config = transformers.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=32, max_position_embeddings=16, num_labels=3)
        return transformers.BertForSequenceClassification(config), ["bert.encoder.layer.0", "bert.encoder.layer.1"]
    config = transformers.GPT2Config(vocab_size=40, n_embd=16, n_layer=2, n_head=2, n_positions=16, num_labels=3,
                                     pad_token_id=0)
    return transformers.GPT2ForSequenceClassification(config), ["transformer.h.0", "transformer.h.1"]


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_ntk_of_hugging_face_models_with_an_attention_mask(kind):
    model, layers = _hf(kind)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 40, (12, 8), generator=g)
    mask = torch.ones_like(ids)
    mask[::2, 6:] = 0  # padded rows
    ids[mask == 0] = 0
    batch = {"input_ids": ids, "attention_mask": mask}
    labels = torch.arange(12) % 3

    def forward(m, b):
        return m(**b).logits

    kernel = empirical_ntk(model, {k: v[:5] for k, v in batch.items()}, forward=forward, method="jacobian")
    reference = _explicit_ntk(model, {k: v[:5] for k, v in batch.items()}, forward)
    torch.testing.assert_close(kernel, reference, rtol=1e-4, atol=1e-5)
    monitor = Monitor(model, layers, batch, labels, total_steps=2, ntk_points=6, name=kind, loss_kind="cross_entropy")
    with warnings.catch_warnings():
        warnings.simplefilter("error", MeasureFailedWarning)
        monitor.step(0)
    gram = monitor.recording()["ntk"][0]
    assert gram.shape == (6, 6) and np.isfinite(gram).all()
