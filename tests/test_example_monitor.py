"""examples/digits_cnn_monitor.py at small scale: it trains with the Monitor, stores the recording, writes the
report, and the report renders in headless Chromium."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from repdyn.monitor import load_recording
from report_browser import check_report_in_browser

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "digits_cnn_monitor.py"
SECTIONS = ("training", "two_point", "ntk", "elasticity", "representations")


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("digits_cnn_monitor", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = tmp_path_factory.mktemp("example")
    index = module.main(["--out", str(out), "--epochs", "2", "--probe-per-class", "4", "--pairs", "2"])
    return out, index


def test_example_stores_a_recording_and_writes_every_section(example_run):
    out, index = example_run
    recording = load_recording(out / "monitor" / "digits_cnn.npz")
    steps = recording.steps
    assert steps[0] == 0 and steps[-1] == 2 * 55 and len(steps) >= 8  # 1757 training digits, batch 32
    assert recording["outputs"].shape == (len(steps), 40, 10)
    assert np.isfinite(recording["loss"][:-1]).all()  # the loss at every recorded step but the trained model
    assert recording["ntk"].shape[1:] == (32, 32)
    html = index.read_text()
    for key in SECTIONS:
        assert f'id="{key}"' in html
    tables = json.loads((index.parent / "tables.json").read_text())
    assert len(tables["two_point"]["pairs"]) == 2
    accuracy = [row["probe accuracy"] for row in tables["training"]["per step"]]
    assert accuracy[-1] > 0.5 > accuracy[0]  # two epochs of training are visible in the probe accuracy
    assert (index.parent / "steps.parquet").is_file()


@pytest.mark.browser
def test_example_report_renders_in_chromium(example_run, browser, tmp_path):
    _, index = example_run
    check_report_in_browser(browser, index, tmp_path / "monitor.png")
    sections = browser.execute_script("return Array.from(document.querySelectorAll('section')).map(s => s.id)")
    assert sections == list(SECTIONS)
    figures = browser.execute_script("return Array.from(document.images).map(i => i.alt)")
    assert len(figures) == 5


TRANSFORMER = Path(__file__).resolve().parent.parent / "examples" / "transformer_monitor.py"


@pytest.fixture(scope="module")
def transformer_run(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("transformer_monitor", TRANSFORMER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = tmp_path_factory.mktemp("transformer")
    index = module.main(["--out", str(out), "--epochs", "2", "--n-train", "256"])
    return out, index


def test_transformer_example_records_all_of_training_on_token_ids(transformer_run):
    out, index = transformer_run
    recording = load_recording(out / "monitor" / "transformer.npz")
    assert recording.steps[0] == 0 and recording.steps[-1] == 2 * 8 and recording.meta["coverage"] == 1.0
    assert recording.meta["layers"] == ["encoder.layers.0", "encoder.layers.1"]
    assert recording["ntk_steps"][-1] == 16 and recording["ntk"].shape[1:] == (32, 32)
    assert np.isfinite(recording["loss"][:-1]).all()
    html = index.read_text()
    assert 'data-measure="two_point"' in html and 'id="two_point"' not in html  # cross-entropy: left out
    assert "covers 100 % of training" in html


@pytest.mark.browser
def test_transformer_example_report_renders_in_chromium(transformer_run, browser, tmp_path):
    _, index = transformer_run
    check_report_in_browser(browser, index, tmp_path / "transformer.png")
    sections = browser.execute_script("return Array.from(document.querySelectorAll('section')).map(s => s.id)")
    assert sections == ["training", "ntk", "elasticity", "representations"]
