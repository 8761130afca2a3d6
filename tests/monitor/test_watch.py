"""The one-liner and the defaults: repdyn.watch on a plain loop (layers chosen, a class-balanced probe set drawn
from the DataLoader without touching the RNG, the run named and saved, training unchanged), the loss captured,
unique run names, the tidy frame of a sweep, and the standalone functions against the Monitor's own numbers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import repdyn
from monitor_scripts import ResNet, TokenClassifier, make
from repdyn.monitor import IncompleteRecordingWarning, Monitor, analyze, default_layers, load_recording
from repdyn.monitor.watching import probe_from_loader
from repdyn.theory.effective_theory import integrate_dynamics


def _loader(script, seed=0):
    return DataLoader(TensorDataset(script.x, script.y), batch_size=32, shuffle=True,
                      generator=torch.Generator().manual_seed(seed))


def _train(script, loader, epochs=2):
    optimizer = script.optimizer(script.model.parameters())
    for _ in range(epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(script.model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def test_watch_in_one_line_records_all_of_a_plain_loop_and_leaves_training_unchanged(tmp_path):
    plain = make("mlp")
    _train(plain, _loader(plain))
    script = make("mlp")
    loader = _loader(script)
    rng = torch.get_rng_state()
    watched = repdyn.watch(script.model, loader, total_steps=2 * len(loader), save_dir=tmp_path,
                           loss_kind="cross_entropy", probe_per_class=4, ntk_points=8)
    assert torch.equal(rng, torch.get_rng_state())  # the probe draw took no random number
    _train(script, loader)  # the loop is unchanged
    for (name, a), b in zip(plain.model.state_dict().items(), script.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert watched.path is not None and watched.path.is_file()  # saved after total_steps updates
    recording = load_recording(watched.path)
    assert recording.meta["layers"] == ["1", "3"]  # the ReLUs of the Sequential
    assert recording.steps[0] == 0 and recording.steps[-1] == 6 and recording.meta["coverage"] == 1.0
    assert np.bincount(recording["labels"]).tolist() == [4, 4, 4, 4]
    assert watched.path.stem.startswith("sequential-")


def test_default_layers_are_the_blocks_of_the_model():
    assert default_layers(make("mlp").model) == ["1", "3"]
    assert default_layers(ResNet()) == ["blocks.0", "blocks.1"]
    assert default_layers(TokenClassifier()) == ["encoder.layers.0", "encoder.layers.1"]
    transformers = pytest.importorskip("transformers", reason="the hf extra is missing: pip install 'repdyn[hf]'")
    config = transformers.BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16)
    bert = transformers.BertForSequenceClassification(config)
    assert default_layers(bert) == ["bert.encoder.layer.0", "bert.encoder.layer.1", "bert.encoder.layer.2"]
    with pytest.raises(ValueError, match="pass layers="):
        default_layers(nn.Linear(3, 2))


def test_probe_from_loader_is_class_balanced_for_dict_items():
    items = [{"input_ids": torch.full((5,), i), "labels": i % 3} for i in range(30)]
    loader = DataLoader(items, batch_size=4, shuffle=True)
    batch, labels = probe_from_loader(loader, per_class=2)
    assert labels.tolist() == [0, 1, 2, 0, 1, 2]
    assert batch["input_ids"][:, 0].tolist() == [0, 1, 2, 3, 4, 5] and set(batch) == {"input_ids"}


def test_the_loss_is_kept_and_read_only_at_recorded_steps(tmp_path):
    script = make("mlp")
    reads = []

    class Loss:  # a loss whose value is read only when the Monitor needs it
        def __init__(self, value):
            self.value = value

        def __float__(self):
            reads.append(self.value)
            return self.value

    monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, total_steps=50,
                      measures=("rank",), n_records=5, name="loss")
    for step in range(50):
        monitor.step(step, Loss(float(step)))
    recording = monitor.recording()
    assert reads == [float(s) for s in recording.steps]  # one read per recorded step, none elsewhere
    assert recording["loss"].tolist() == [float(s) for s in recording.steps]


def test_unnamed_runs_never_overwrite_and_a_named_one_says_it_does(tmp_path):
    script = make("mlp")
    paths = []
    for _ in range(2):
        monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, total_steps=2,
                          measures=("rank",))
        monitor.step(0)
        monitor.step(1)
        paths.append(monitor.save(tmp_path))
    assert paths[0] != paths[1] and all(p.is_file() for p in paths)
    for attempt in range(2):
        monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, total_steps=1,
                          measures=("rank",), name="mine")
        monitor.step(0)
        if attempt:
            with pytest.warns(UserWarning, match="mine.npz exists and is overwritten"):
                monitor.save(tmp_path)
        else:
            monitor.save(tmp_path)


def test_without_total_steps_save_records_the_trained_model_and_says_so(tmp_path):
    script = make("mlp")
    monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, measures=("rank",), name="open")
    for step in range(5):
        monitor.step(step)
    with pytest.warns(IncompleteRecordingWarning, match="total_steps was not given, so the trained model is taken "
                                                        "to be step 5"):
        path = monitor.save(tmp_path)
    assert load_recording(path).steps[-1] == 5


def test_a_sweep_gives_one_tidy_frame_of_run_step_layer_metric(tmp_path):
    paths = []
    for name, lr in (("small", 1e-3), ("large", 3e-2)):
        script = make("mlp")
        monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, total_steps=6,
                          loss_kind="cross_entropy", n_records=4, ntk_points=8, name=name)
        optimizer = torch.optim.SGD(script.model.parameters(), lr=lr)
        for step in range(6):
            loss = nn.functional.cross_entropy(script.model(script.x), script.y)
            monitor.step(step, loss)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        paths.append(monitor.save(tmp_path))
    sweep = analyze(str(tmp_path / "monitor" / "*.npz"))
    frame = sweep.frame
    assert frame.columns.tolist() == ["run", "step", "layer", "metric", "value"]
    assert set(frame["run"]) == {"small", "large"}
    nc1 = frame[(frame.metric == "nc1") & (frame.run == "large")]
    recording = load_recording(tmp_path / "monitor" / "large.npz")
    assert nc1.pivot(index="step", columns="layer", values="value")[["1", "3"]].to_numpy() == pytest.approx(
        recording["nc_within_between"])
    loss = frame[(frame.metric == "loss") & (frame.run == "small")]
    assert np.isfinite(loss["value"].to_numpy()[:-1]).all()  # captured at every recorded step but the end
    assert {"weight_change", "probe_accuracy", "ntk_alignment", "effective_rank"} <= set(frame.metric)
    assert sweep.summary.set_index("run").loc["large", "weight_change"] > sweep.summary.set_index("run").loc[
        "small", "weight_change"]


def test_standalone_functions_are_the_monitors_own_numbers():
    script = make("mlp")
    monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, total_steps=1, ntk_points=8,
                      name="f")
    monitor.step(0)
    recording = monitor.recording()
    with torch.no_grad():
        hidden = script.model[:2](script.probe_x)
    assert repdyn.nc1(hidden, script.probe_y) == recording["nc_within_between"][0, 0]
    assert repdyn.effective_rank(hidden) == recording["effective_rank"][0, 0]
    index = monitor.ntk_index
    assert repdyn.ntk_alignment(script.model, script.probe_x[index], script.probe_y[index]) == pytest.approx(
        monitor.latest()["repdyn/ntk_alignment"], rel=1e-6)
    t = np.linspace(0, 40, 30)
    truth = integrate_dynamics((1.0, 0.5, 0.2), X=2.0, Y=2.0, rate_h=0.05, rate_y=0.2, t=t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = repdyn.two_point_rates(t, truth.u, truth.v, truth.w, 2.0, 2.0)
    assert fit.rate_h == pytest.approx(0.05, rel=1e-2) and fit.rate_y == pytest.approx(0.2, rel=1e-2)
