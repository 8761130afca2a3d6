"""The Monitor inside the training frameworks researchers use: a PyTorch Lightning ``Callback``
(:func:`lightning_callback`) and a Hugging Face ``TrainerCallback`` (:func:`hf_callback`).

Both build the :class:`~repdyn.monitor.Monitor` when training starts, with ``total_steps`` from the trainer
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
from pathlib import Path
from typing import Any

from repdyn.monitor.monitor import Monitor


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
        self.layers, self.probe_inputs, self.labels, self.kwargs = layers, probe_inputs, labels, kwargs
        self.save_dir = save_dir
        self.monitor: Monitor | None = None
        self.path: Path | None = None

    def start(self, model: Any, total_steps: float | int | None, sinks: list[Any]) -> Monitor:
        total = int(total_steps) if total_steps is not None and math.isfinite(total_steps) and total_steps > 0 else None
        own = self.kwargs.get("on_record")
        own = [] if own is None else [own] if callable(own) else list(own)
        kwargs = {**self.kwargs, "on_record": own + sinks}
        self.monitor = Monitor(model, self.layers, self.probe_inputs, self.labels, total_steps=total, **kwargs)
        return self.monitor

    def end(self, step: int, log_dir: str | os.PathLike[str] | None) -> Path:
        assert self.monitor is not None, "training ended before it started"
        self.monitor.finish(step)
        self.path = self.monitor.save(self.save_dir or log_dir or ".")
        return self.path


def lightning_callback(layers: Any, probe_inputs: Any, labels: Any = None, *,
                       save_dir: str | os.PathLike[str] | None = None, log_to_trainer: bool = True,
                       **monitor_kwargs: Any) -> Any:
    """A PyTorch Lightning ``Callback`` that monitors the ``LightningModule`` being fitted.

    ``layers`` are names in the LightningModule (e.g. ``"net.1"``) or its submodules; the other arguments are the
    :class:`~repdyn.monitor.Monitor`'s (``total_steps`` comes from the trainer). The recording is saved into
    ``save_dir`` or the trainer's ``log_dir`` (``default_root_dir`` without a logger); its path is the
    callback's ``.path`` after fitting, the Monitor its ``.monitor``. With ``log_to_trainer`` the scalars go to
    ``trainer.loggers`` at each recording."""
    pl = _lightning()
    attached = _Attached(layers, probe_inputs, labels, save_dir, monitor_kwargs)

    class RepdynMonitorCallback(pl.Callback):
        """Records the repdyn Monitor before each optimiser step and at the end of fitting."""

        monitor = property(lambda self: attached.monitor, doc="the Monitor, once training has started")
        path = property(lambda self: attached.path, doc="the saved recording, once training has ended")

        def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
            sinks = []
            if log_to_trainer and trainer.loggers:
                def to_loggers(scalars: dict[str, float], step: int) -> None:
                    for logger in trainer.loggers:
                        logger.log_metrics(scalars, step=step)
                sinks.append(to_loggers)
            attached.start(pl_module, trainer.estimated_stepping_batches, sinks)

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            assert attached.monitor is not None
            attached.monitor.step(trainer.global_step)

        def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
            attached.end(trainer.global_step, trainer.log_dir or trainer.default_root_dir)

    return RepdynMonitorCallback()


def hf_callback(layers: Any, probe_inputs: Any, labels: Any = None, *,
                save_dir: str | os.PathLike[str] | None = None, **monitor_kwargs: Any) -> Any:
    """A Hugging Face ``transformers.TrainerCallback`` that monitors the model the ``Trainer`` trains.

    ``probe_inputs`` is usually a dict batch (``{"input_ids": ..., "attention_mask": ...}``, called as
    ``model(**batch)``; the output's ``.logits`` are the outputs unless ``output_fn`` says otherwise). The other
    arguments are the :class:`~repdyn.monitor.Monitor`'s (``total_steps`` is ``state.max_steps``). The recording is
    saved into ``save_dir`` or ``args.logging_dir`` (else ``args.output_dir``)."""
    try:
        from transformers import TrainerCallback
    except ImportError:
        raise ImportError("the Hugging Face callback needs transformers: pip install 'repdyn[hf]'") from None
    attached = _Attached(layers, probe_inputs, labels, save_dir, monitor_kwargs)

    class RepdynMonitorCallback(TrainerCallback):
        """Records the repdyn Monitor before each optimiser step and at the end of training."""

        monitor = property(lambda self: attached.monitor, doc="the Monitor, once training has started")
        path = property(lambda self: attached.path, doc="the saved recording, once training has ended")

        def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            attached.start(model, state.max_steps, [])

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            assert attached.monitor is not None
            attached.monitor.step(state.global_step)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            attached.end(state.global_step, getattr(args, "logging_dir", None) or args.output_dir)

    return RepdynMonitorCallback()
