"""The Monitor inside PyTorch Lightning and the Hugging Face Trainer: the three issue-20 scripts trained for real
(tiny), total_steps from the trainer, step 0 and the end recorded (100 % of training), saved into the run's log
directory, training unchanged; and scalars read back from TensorBoard event files and an offline W&B run.
Each test skips with the extra to install where its framework is missing (CI installs them with .[dev])."""

from __future__ import annotations

import csv
import time
import warnings
from typing import Any

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from monitor_scripts import KINDS, Script, make
from repdyn.monitor import Monitor, load_recording
from repdyn.monitor.monitor import IncompleteRecordingWarning

EPOCHS = 2
TOTAL = EPOCHS * 3  # 96 training points in batches of 32
REPORTS: dict[str, Any] = {}
"""The reports of the runs trained in this file, rendered in Chromium by its last test."""


def _report(framework: str, kind: str, path: Any, out: Any) -> None:
    from repdyn.monitor.report import write_monitor_report

    index = write_monitor_report(path, out)
    html = index.read_text()
    assert all(f'id="{key}"' in html for key in ("training", "ntk", "elasticity", "representations"))
    assert "covers 100 % of training" in html
    REPORTS[f"{framework}-{kind}"] = index


def _lightning() -> Any:
    from repdyn.monitor.integrations import _lightning as load

    try:
        return load()
    except ImportError as error:
        pytest.skip(f"{error}")


def _fit_lightning(script: Script, root: Any, callback: Any) -> Any:
    pl = _lightning()
    from torch.utils.data import DataLoader, TensorDataset

    class Lit(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = script.model

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: Any, _index: int) -> torch.Tensor:
            x, y = batch
            return F.cross_entropy(self(x), y)

        def configure_optimizers(self) -> Any:
            optimizer = script.optimizer(self.parameters())
            scheduler = script.scheduler(optimizer, TOTAL)
            if scheduler is None:
                return optimizer
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    loader = DataLoader(TensorDataset(script.x, script.y), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    module = Lit()
    trainer = pl.Trainer(max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=pl.loggers.CSVLogger(root),
                         callbacks=[] if callback is None else [callback], enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    torch.manual_seed(7)
    trainer.fit(module, loader)
    return trainer


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning:pytorch_lightning")
@pytest.mark.filterwarnings("ignore::UserWarning:lightning")
@pytest.mark.filterwarnings("ignore:`isinstance.treespec, LeafSpec.` is deprecated")
@pytest.mark.parametrize("kind", KINDS)
def test_lightning_callback_records_all_of_training_into_the_log_dir(kind, tmp_path):
    pl = _lightning()
    from repdyn.monitor.integrations import lightning_callback

    plain = make(kind)
    _fit_lightning(plain, tmp_path / "plain", None)
    script = make(kind)
    callback = lightning_callback([f"net.{layer}" for layer in script.layers], script.probe_x, script.probe_y,
                                  loss_kind="cross_entropy", select={f"net.{k}": v for k, v in script.select.items()},
                                  n_records=5, ntk_points=8)
    assert isinstance(callback, pl.Callback)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IncompleteRecordingWarning)
        trainer = _fit_lightning(script, tmp_path / "watched", callback)
    for (name, a), b in zip(plain.model.state_dict().items(), script.model.state_dict().values()):
        assert torch.equal(a, b), name
    recording = load_recording(callback.path)
    assert callback.path.parent.parent == __import__("pathlib").Path(trainer.log_dir)
    assert recording.steps[0] == 0 and recording.steps[-1] == TOTAL and recording.meta["coverage"] == 1.0
    assert recording.meta["total_steps"] == TOTAL and recording["ntk_steps"][-1] == TOTAL
    with open(next(__import__("pathlib").Path(trainer.log_dir).glob("metrics.csv"))) as handle:
        rows = [r for r in csv.DictReader(handle) if r.get("repdyn/probe_accuracy")]
    assert [int(r["step"]) for r in rows] == recording.steps.tolist()  # the trainer's logger got every recording
    assert np.isfinite(recording["loss"][:-1]).all()  # training_step's loss at every recorded step but the end
    _report("lightning", kind, callback.path, tmp_path / "report")


class _Hf:
    """A tiny Hugging Face PreTrainedModel wrapping one of the three scripts' networks, built from a config."""

    @staticmethod
    def classes() -> tuple[Any, Any]:
        try:
            from transformers import PretrainedConfig, PreTrainedModel
            from transformers.modeling_outputs import SequenceClassifierOutput
        except ImportError:
            pytest.skip("the hf extra is not installed: pip install 'repdyn[hf]'")

        class TinyConfig(PretrainedConfig):
            model_type = "repdyn-tiny"

            def __init__(self, kind: str = "mlp", **kwargs: Any) -> None:
                super().__init__(**kwargs)
                self.kind = kind

        class TinyModel(PreTrainedModel):
            config_class = TinyConfig

            def __init__(self, config: TinyConfig) -> None:
                super().__init__(config)
                self.net = make(config.kind).model

            def _init_weights(self, module: Any) -> None:  # keep the script's own initialisation
                pass

            def forward(self, inputs: torch.Tensor, labels: torch.Tensor | None = None) -> Any:
                logits = self.net(inputs)
                loss = None if labels is None else F.cross_entropy(logits, labels)
                return SequenceClassifierOutput(loss=loss, logits=logits)

        return TinyConfig, TinyModel


def _train_hf(kind: str, root: Any, callback: Any) -> Any:
    from transformers import Trainer, TrainingArguments

    config_class, model_class = _Hf.classes()
    torch.manual_seed(0)
    model = model_class(config_class(kind=kind))
    script = make(kind)
    model.net.load_state_dict(script.model.state_dict())
    optimizer = script.optimizer(model.parameters())
    scheduler = script.scheduler(optimizer, TOTAL) or torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    data = [{"inputs": script.x[i], "labels": script.y[i]} for i in range(len(script.y))]
    args = TrainingArguments(output_dir=str(root), per_device_train_batch_size=32, num_train_epochs=EPOCHS,
                             report_to=[], save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True,
                             dataloader_num_workers=0, logging_strategy="no")
    trainer = Trainer(model=model, args=args, train_dataset=data, optimizers=(optimizer, scheduler),
                      callbacks=[] if callback is None else [callback])
    trainer.train()
    return model, script


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_hf_callback_records_all_of_training_of_a_pretrained_model(kind, tmp_path):
    _Hf.classes()
    from repdyn.monitor.integrations import hf_callback

    plain, _ = _train_hf(kind, tmp_path / "plain", None)
    script = make(kind)
    callback = hf_callback([f"net.{layer}" for layer in script.layers], {"inputs": script.probe_x}, script.probe_y,
                           loss_kind="cross_entropy", select={f"net.{k}": v for k, v in script.select.items()},
                           n_records=5, ntk_points=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IncompleteRecordingWarning)
        watched, _ = _train_hf(kind, tmp_path / "watched", callback)
    for (name, a), b in zip(plain.state_dict().items(), watched.state_dict().values()):
        assert torch.equal(a, b), name
    recording = load_recording(callback.path)
    # the run's log directory: args.logging_dir (transformers 4) or args.output_dir (5)
    assert callback.path.stem.startswith("tinymodel-") and (tmp_path / "watched") in callback.path.parents
    assert np.isfinite(recording["loss"][:-1]).all()  # the model output's loss at every recorded step but the end
    assert recording.steps[0] == 0 and recording.steps[-1] == TOTAL and recording.meta["coverage"] == 1.0
    assert recording.meta["model"] == "TinyModel" and recording["ntk"].shape[1:] == (8, 8)
    _report("hf", kind, callback.path, tmp_path / "report")


@pytest.mark.filterwarnings("ignore::UserWarning:pytorch_lightning")
@pytest.mark.filterwarnings("ignore::UserWarning:lightning")
@pytest.mark.filterwarnings("ignore:`isinstance.treespec, LeafSpec.` is deprecated")
def test_lightning_callback_with_no_arguments(tmp_path):
    _lightning()
    from repdyn.monitor.integrations import lightning_callback

    script = make("mlp")
    callback = lightning_callback()
    trainer = _fit_lightning(script, tmp_path, callback)
    recording = load_recording(callback.path)
    assert recording.meta["layers"] == ["net.1", "net.3"]  # the ReLUs of the LightningModule's Sequential
    assert np.bincount(recording["labels"]).tolist() == [8, 8, 8, 8]  # drawn from the training DataLoader
    assert recording.steps[0] == 0 and recording.steps[-1] == TOTAL and recording.meta["coverage"] == 1.0
    assert np.isfinite(recording["loss"][:-1]).all()
    assert callback.path.stem.startswith("lit-") and callback.path.parent.parent == __import__("pathlib").Path(
        trainer.log_dir)


def test_hf_callback_with_no_arguments_logs_to_report_to(tmp_path):
    _Hf.classes()
    pytest.importorskip("tensorboard", reason="the tensorboard extra is missing: pip install 'repdyn[tensorboard]'")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from transformers import Trainer, TrainingArguments

    from repdyn.monitor.integrations import hf_callback

    config_class, model_class = _Hf.classes()
    torch.manual_seed(0)
    model = model_class(config_class(kind="mlp"))
    script = make("mlp")
    data = [{"inputs": script.x[i], "labels": script.y[i]} for i in range(len(script.y))]
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=32, num_train_epochs=EPOCHS,
                             report_to=["tensorboard"], save_strategy="no",
                             use_cpu=True, seed=0, disable_tqdm=True, dataloader_num_workers=0,
                             logging_strategy="no")
    callback = hf_callback()
    Trainer(model=model, args=args, train_dataset=data, callbacks=[callback]).train()
    recording = load_recording(callback.path)
    assert recording.meta["layers"] == ["net.1", "net.3"]
    assert np.bincount(recording["labels"]).tolist() == [8, 8, 8, 8]
    assert recording.steps[-1] == TOTAL and np.isfinite(recording["loss"][:-1]).all()
    events = list(tmp_path.rglob("events.out.tfevents.*"))
    tags = set()
    for path in events:
        accumulator = EventAccumulator(str(path))
        accumulator.Reload()
        tags |= set(accumulator.Tags()["scalars"])
    assert "repdyn/probe_accuracy" in tags and "repdyn/nc1/net.3" in tags  # through report_to's TensorBoard


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning:pytorch_lightning")
@pytest.mark.filterwarnings("ignore::UserWarning:lightning")
@pytest.mark.filterwarnings("ignore:`isinstance.treespec, LeafSpec.` is deprecated")
def test_watch_in_one_line_under_lightning_and_the_hf_trainer(tmp_path):
    import repdyn

    _lightning()
    _Hf.classes()
    script = make("mlp")
    from torch.utils.data import TensorDataset

    watched = repdyn.watch(script.model, TensorDataset(script.x, script.y), total_steps=TOTAL,
                           save_dir=tmp_path / "lightning", loss_kind="cross_entropy", name="lightning")
    _fit_lightning(script, tmp_path, None)  # the Trainer, unchanged
    lightning = load_recording(watched.path)
    assert lightning.meta["layers"] == ["1", "3"] and lightning.steps[-1] == TOTAL

    config_class, model_class = _Hf.classes()
    torch.manual_seed(0)
    model = model_class(config_class(kind="mlp"))
    data = [{"inputs": script.x[i], "labels": script.y[i]} for i in range(len(script.y))]
    watched = repdyn.watch(model, data, total_steps=TOTAL, save_dir=tmp_path / "hf", loss_kind="cross_entropy",
                           name="hf")
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=32,
                             num_train_epochs=EPOCHS, report_to=[], save_strategy="no", use_cpu=True, seed=0,
                             disable_tqdm=True, dataloader_num_workers=0, logging_strategy="no")
    Trainer(model=model, args=args, train_dataset=data).train()
    hf = load_recording(watched.path)
    assert hf.meta["layers"] == ["net.1", "net.3"] and hf.steps[-1] == TOTAL
    assert np.isfinite(hf["loss"][:-1]).all()  # output.loss, kept at every recorded step but the end
    sweep = repdyn.analyze([watched.path, tmp_path / "lightning" / "monitor" / "lightning.npz"])
    assert set(sweep.frame["run"]) == {"hf", "lightning"} and set(sweep.summary["run"]) == {"hf", "lightning"}


def test_scalars_reach_tensorboard_event_files(tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is missing: pip install 'repdyn[tensorboard]'")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    from repdyn.monitor.sinks import tensorboard_sink

    script = make("mlp")
    writer = SummaryWriter(str(tmp_path / "tb"))
    monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, total_steps=6, n_records=4,
                      ntk_points=8, on_record=tensorboard_sink(writer), measures=("ntk", "rank", "elasticity"))
    sent = {}
    for step in range(6):
        if monitor.step(step):
            sent[step] = monitor.latest()
    monitor.finish()
    sent[6] = monitor.latest()
    writer.close()
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"repdyn/nc1/1", "repdyn/nc1/3", "repdyn/ntk_alignment", "repdyn/probe_accuracy"} <= set(tags)
    read = [(e.step, e.value) for e in events.Scalars("repdyn/nc1/3")]
    assert [s for s, _ in read] == sorted(sent)
    np.testing.assert_allclose([v for _, v in read], [sent[s]["repdyn/nc1/3"] for s in sorted(sent)], rtol=1e-6)
    alignment = [e.step for e in events.Scalars("repdyn/ntk_alignment")]
    assert alignment == monitor.recording()["ntk_steps"].tolist()


def _leveldb_log_records(data: bytes, block: int = 32768) -> list[bytes]:
    """The records of a W&B transaction log (``run-*.wandb``): a 7-byte ":W&B" header, then LevelDB's log format
    (32 KiB blocks of chunks: 4-byte checksum, 2-byte length, 1-byte type FULL=1 / FIRST=2 / MIDDLE=3 / LAST=4)."""
    assert data[:4] == b":W&B"
    records, pending, pos = [], b"", 7
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # block trailer
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            records.append(pending)
            pending = b""
    return records


def test_scalars_reach_an_offline_wandb_run(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb", reason="the wandb extra is not installed: pip install 'repdyn[wandb]'")
    from repdyn.monitor.sinks import wandb_sink

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    script = make("mlp")
    run = wandb.init(project="repdyn-test", dir=str(tmp_path), mode="offline")
    try:
        monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, total_steps=6, n_records=4,
                          measures=("rank", "elasticity"), on_record=wandb_sink())
        for step in range(6):
            monitor.step(step)
        monitor.finish()
        last = monitor.latest()
        assert run.summary["repdyn/nc1/3"] == pytest.approx(last["repdyn/nc1/3"])
    finally:
        run.finish()
    files = list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 1
    from wandb.proto import wandb_internal_pb2

    records: list[Any] = []
    for _ in range(100):  # wandb-core may still be writing the log when finish() returns: read up to its exit record
        records = []
        for data in _leveldb_log_records(files[0].read_bytes()):
            records.append(wandb_internal_pb2.Record())
            records[-1].ParseFromString(data)
        if records and records[-1].WhichOneof("record_type") == "exit":
            break
        time.sleep(0.1)
    history = [{item.key or "/".join(item.nested_key): item.value_json for item in r.history.item}
               for r in records if r.WhichOneof("record_type") == "history"]
    logged = [h for h in history if "repdyn/nc1/3" in h]
    assert [int(h["_step"]) for h in logged] == monitor.recording().steps.tolist()
    assert float(logged[-1]["repdyn/nc1/3"]) == pytest.approx(last["repdyn/nc1/3"])


@pytest.mark.browser
def test_reports_of_the_framework_runs_render_in_chromium(browser, tmp_path):
    """Last in this file: the reports written by the Lightning and Hugging Face tests above, in Chromium."""
    from report_browser import check_report_in_browser

    if not REPORTS:
        pytest.skip("no framework run in this session (the Lightning / Hugging Face tests above write the reports)")
    for name, index in REPORTS.items():
        check_report_in_browser(browser, index, tmp_path / f"{name}.png")
