"""The Monitor inside the training frameworks researchers use: a PyTorch Lightning ``Callback``
(:func:`lightning_callback`) and a Hugging Face ``TrainerCallback`` (:func:`hf_callback`).

Both work with no arguments (``lightning_callback()``, ``hf_callback()``: the layers and a class-balanced probe
set are chosen as :func:`repdyn.watch` does), build the :class:`~repdyn.monitor.Monitor` when training starts,
with ``total_steps`` from the trainer
(Lightning's ``trainer.estimated_stepping_batches``, Hugging Face's ``state.max_steps``), record before each
optimiser update (so step 0 is the untrained model), record the trained model once at the end, and save the
recording into the run's log directory (``<log_dir>/monitor/<name>.npz``; then ``repdyn analyze`` it). The
Lightning callback also sends the scalars to the trainer's loggers (TensorBoard, W&B, CSV, ...).

    trainer = pl.Trainer(..., callbacks=[lightning_callback(["net.1", "net.3"], x_probe, y_probe,
                                                            loss_kind="cross_entropy")])
    trainer = transformers.Trainer(..., callbacks=[hf_callback(["net.encoder.layers.0"], {"input_ids": ids},
                                                               labels, loss_kind="cross_entropy")])

The frameworks are optional extras (``pip install 'repdyn[lightning]'`` / ``'repdyn[hf]'``), imported only when a
callback is made.
"""

from __future__ import annotations

import importlib
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from repdyn.monitor.monitor import Monitor
from repdyn.monitor.sinks import tensorboard_sink
from repdyn.monitor.watching import monitor_for


def _lightning() -> Any:
    """The Lightning package whose Trainer will take the callback: the one the user has imported already
    (``lightning.pytorch`` or the standalone ``pytorch_lightning``; a Trainer refuses the other's callbacks),
    else whichever is installed."""
    imported = [name for name in ("lightning.pytorch", "pytorch_lightning") if name in sys.modules]
    for name in [*imported, "lightning.pytorch", "pytorch_lightning"]:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError("the Lightning callback needs PyTorch Lightning: pip install 'repdyn[lightning]'")


class _Attached:
    """What both callbacks share: the Monitor's arguments until training starts, then the Monitor and the saved
    recording's path."""

    def __init__(self, layers: Any, probe_inputs: Any, labels: Any, save_dir: str | os.PathLike[str] | None,
                 kwargs: dict[str, Any]) -> None:
        if "total_steps" in kwargs:
            raise ValueError("total_steps is taken from the trainer; leave it out")
        self.probe_per_class = kwargs.pop("probe_per_class", 8)
        self.layers, self.probe_inputs, self.labels, self.kwargs = layers, probe_inputs, labels, kwargs
        self.save_dir = save_dir
        self.monitor: Monitor | None = None
        self.path: Path | None = None

    def start(self, model: Any, total_steps: float | int | None, sinks: list[Any], loader: Any = None) -> Monitor:
        total = int(total_steps) if total_steps is not None and math.isfinite(total_steps) and total_steps > 0 else None
        own = self.kwargs.get("on_record")
        own = [] if own is None else [own] if callable(own) else list(own)
        kwargs = {**self.kwargs, "on_record": own + sinks}
        self.monitor = monitor_for(model, loader, self.layers, self.probe_inputs, self.labels,
                                   probe_per_class=self.probe_per_class, total_steps=total, **kwargs)
        return self.monitor

    def end(self, step: int, log_dir: str | os.PathLike[str] | None) -> Path | None:
        assert self.monitor is not None, "training ended before it started"
        self.monitor.finish(step)
        self.path = self.monitor.save(self.save_dir or log_dir or ".")
        return self.path


def _loss_of(outputs: Any) -> Any:
    """The loss in what a framework's training step returned: the tensor itself, or its "loss" entry."""
    if isinstance(outputs, Mapping):
        return outputs.get("loss")
    return outputs if isinstance(outputs, torch.Tensor) and outputs.dim() == 0 else None


def lightning_callback(layers: Any = None, probe_inputs: Any = None, labels: Any = None, *,
                       save_dir: str | os.PathLike[str] | None = None, log_to_trainer: bool = True,
                       **monitor_kwargs: Any) -> Any:
    """A PyTorch Lightning ``Callback`` that monitors the ``LightningModule`` being fitted; usable with no
    arguments.

    ``layers`` are names in the LightningModule (e.g. ``"net.1"``) or its submodules (default
    :func:`~repdyn.monitor.watching.default_layers`); without ``probe_inputs`` a class-balanced probe set is drawn
    from the trainer's training DataLoader (:func:`~repdyn.monitor.watching.probe_from_loader`, ``probe_per_class``
    items per class). The other arguments are the :class:`~repdyn.monitor.Monitor`'s (``total_steps`` comes from
    the trainer). The training loss of each recorded step is the one ``training_step`` returned. The recording
    is saved into ``save_dir`` or the trainer's ``log_dir`` (``default_root_dir`` without a logger); its path is
    the callback's ``.path`` after fitting, the Monitor its ``.monitor``. With ``log_to_trainer`` the scalars go
    to ``trainer.loggers`` at each recording."""
    pl = _lightning()
    attached = _Attached(layers, probe_inputs, labels, save_dir, monitor_kwargs)

    class RepdynMonitorCallback(pl.Callback):
        """Records the repdyn Monitor before each optimiser step and at the end of fitting."""

        monitor = property(lambda self: attached.monitor, doc="the Monitor, once training has started")
        path = property(lambda self: attached.path, doc="the saved recording, once training has ended")

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            sinks = []
            if log_to_trainer and trainer.loggers:
                def to_loggers(scalars: dict[str, float], step: int) -> None:
                    for logger in trainer.loggers:
                        logger.log_metrics(scalars, step=step)
                sinks.append(to_loggers)
            attached.start(pl_module, trainer.estimated_stepping_batches, sinks,
                           getattr(trainer, "train_dataloader", None))

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            if attached.monitor is not None:
                self._step = trainer.global_step
                attached.monitor.step(self._step)

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                               batch_idx: int) -> None:
            loss = _loss_of(outputs)
            if attached.monitor is not None and loss is not None:
                attached.monitor.log_loss(self._step, loss)

        def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
            if attached.monitor is not None:
                attached.end(trainer.global_step, trainer.log_dir or trainer.default_root_dir)

    return RepdynMonitorCallback()


def _report_to_sinks(args: Any, writers: list[Any]) -> list[Any]:
    """Sinks for the loggers of ``args.report_to`` (a TrainerCallback cannot reach the Trainer's own ``log``):
    TensorBoard, a writer of its own in ``<output_dir>/runs/repdyn`` (``$TENSORBOARD_LOGGING_DIR/repdyn``), which
    TensorBoard shows as the run "repdyn" beside the Trainer's; W&B, the current run (``wandb.run``), with the
    Trainer's ``train/global_step``. Other loggers get nothing (use ``on_record=``)."""
    report = args.report_to or []
    report = [report] if isinstance(report, str) else list(report)
    every = "all" in report
    sinks: list[Any] = []
    if every or "tensorboard" in report:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            SummaryWriter = None  # noqa: N806 - the Trainer itself reports a missing tensorboard
        if SummaryWriter is not None:
            root = os.getenv("TENSORBOARD_LOGGING_DIR") or os.path.join(args.output_dir, "runs")
            writers.append(SummaryWriter(log_dir=os.path.join(root, "repdyn")))
            sinks.append(tensorboard_sink(writers[-1]))
    if every or "wandb" in report:
        def to_wandb(scalars: dict[str, float], step: int) -> None:
            wandb = sys.modules.get("wandb")
            if wandb is not None and wandb.run is not None:
                wandb.run.log({**scalars, "train/global_step": step})

        sinks.append(to_wandb)
    return sinks


def hf_callback(layers: Any = None, probe_inputs: Any = None, labels: Any = None, *,
                save_dir: str | os.PathLike[str] | None = None, **monitor_kwargs: Any) -> Any:
    """A Hugging Face ``transformers.TrainerCallback`` that monitors the model the ``Trainer`` trains; usable
    with no arguments.

    ``layers`` default to the model's encoder layers (:func:`~repdyn.monitor.watching.default_layers`); without
    ``probe_inputs`` a class-balanced probe set is drawn from the training dataset through the Trainer's data
    collator (items with a "labels" entry). ``probe_inputs`` is usually a dict batch (``{"input_ids": ...,
    "attention_mask": ...}``, called as ``model(**batch)``; the output's ``.logits`` are the outputs unless
    ``output_fn`` says otherwise). The other arguments are the :class:`~repdyn.monitor.Monitor`'s (``total_steps``
    is ``state.max_steps``). The training loss of each recorded step is the model output's ``.loss``, averaged
    over the step's forward passes (gradient accumulation). The scalars go to the TensorBoard and W&B loggers of
    ``args.report_to`` (:func:`_report_to_sinks`). The recording is saved into ``save_dir`` or
    ``args.logging_dir`` (else ``args.output_dir``)."""
    try:
        from transformers import TrainerCallback
    except ImportError:
        raise ImportError("the Hugging Face callback needs transformers: pip install 'repdyn[hf]'") from None
    attached = _Attached(layers, probe_inputs, labels, save_dir, monitor_kwargs)
    losses: list[torch.Tensor] = []
    handles: list[Any] = []
    writers: list[Any] = []

    class RepdynMonitorCallback(TrainerCallback):
        """Records the repdyn Monitor before each optimiser step and at the end of training."""

        monitor = property(lambda self: attached.monitor, doc="the Monitor, once training has started")
        path = property(lambda self: attached.path, doc="the saved recording, once training has ended")

        def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            attached.start(model, state.max_steps, _report_to_sinks(args, writers), kwargs.get("train_dataloader"))

            def keep_loss(module: Any, inputs: Any, output: Any) -> None:
                loss = getattr(output, "loss", None)
                if module.training and isinstance(loss, torch.Tensor) and loss.dim() == 0:
                    losses.append(loss.detach())  # read with .item() only at a recorded step

            handles.append(model.register_forward_hook(keep_loss))

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            losses.clear()
            if attached.monitor is not None:
                attached.monitor.step(state.global_step)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if attached.monitor is not None and losses:
                attached.monitor.log_loss(state.global_step - 1, sum(losses) / len(losses))
            losses.clear()

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            for handle in handles:
                handle.remove()
            handles.clear()
            for writer in writers:
                writer.close()
            writers.clear()
            if attached.monitor is not None:
                attached.end(state.global_step, getattr(args, "logging_dir", None) or args.output_dir)

    return RepdynMonitorCallback()
