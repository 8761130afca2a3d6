"""Where the Monitor's scalars go while training runs: ready ``on_record`` sinks for the dashboards researchers
watch. Each sink is a function ``sink(scalars, step)`` taking :meth:`repdyn.monitor.Monitor.latest`'s flat dict
(``repdyn/nc1/layer1``, ``repdyn/ntk_alignment``, ...) and the training step.

    from torch.utils.tensorboard import SummaryWriter
    monitor = Monitor(..., on_record=tensorboard_sink(SummaryWriter(log_dir)))
    monitor = Monitor(..., on_record=wandb_sink())           # the current wandb run (wandb.init first)

Neither framework is imported by ``import repdyn``; each sink uses the object it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Sink = Callable[[dict[str, float], int], None]


def tensorboard_sink(writer: Any) -> Sink:
    """Writes each scalar with ``writer.add_scalar(name, value, step)`` (a ``torch.utils.tensorboard``
    ``SummaryWriter`` or tensorboardX's), flushed after each recording so a running TensorBoard shows it."""
    if not callable(getattr(writer, "add_scalar", None)):
        raise ValueError(f"tensorboard_sink needs a SummaryWriter (with add_scalar), got {type(writer).__name__}")

    def log(scalars: dict[str, float], step: int) -> None:
        for name, value in scalars.items():
            writer.add_scalar(name, value, step)
        writer.flush()

    return log


def wandb_sink(run: Any = None) -> Sink:
    """Logs the scalars with ``run.log(scalars, step=step)``: ``run`` from ``wandb.init()``, by default the
    current one (``wandb.run``). W&B needs steps that never decrease: record before your own ``wandb.log`` of the
    same step (the Monitor's documented order)."""
    if run is None:
        try:
            import wandb
        except ImportError:
            raise ValueError("wandb_sink needs wandb: pip install 'repdyn[wandb]'") from None
        if wandb.run is None:
            raise ValueError("wandb_sink: no active W&B run; call wandb.init(...) first or pass run=")
        run = wandb.run
    if not callable(getattr(run, "log", None)):
        raise ValueError(f"wandb_sink needs a W&B run (with log), got {type(run).__name__}")

    def log(scalars: dict[str, float], step: int) -> None:
        run.log(dict(scalars), step=step)

    return log
