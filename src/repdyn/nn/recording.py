"""Which training steps to record, and the recorder callbacks that read the model at those steps.

Step t means "after t updates"; step 0 is the initial model. A schedule always contains 0 and the last step.
A recorder is any callable ``(step, model) -> Tensor`` returning one value per ensemble member, shape (K, ...);
it runs under ``torch.no_grad()`` only at recorded steps, so it costs nothing on the other steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from torch import Tensor, nn

Recorder = Callable[[int, nn.Module], Tensor]


@dataclass(frozen=True)
class PassRecorder:
    """A recorder whose value depends only on the representations of ``inputs`` at ``layers`` (and the output),
    read in eval mode. Where the training step's own forward pass ran on ``inputs`` (the same tensor) without dropout,
    the training loop reads them off that pass (``from_pass``, given {layer: (K, n, ...)}) instead of running the
    same forward pass again: the same tensors, bit for bit."""

    record: Recorder
    inputs: Tensor
    layers: Sequence[str]
    from_pass: Callable[[Mapping[str, Tensor]], Tensor]

    def __call__(self, step: int, model: nn.Module) -> Tensor:
        return self.record(step, model)


class Schedule:
    """A sorted set of steps in [0, steps]."""

    def __init__(self, steps: Iterable[int], total: int) -> None:
        if total < 0:
            raise ValueError(f"the number of training steps must be >= 0, got {total}")
        chosen = {int(s) for s in steps}
        bad = sorted(s for s in chosen if not 0 <= s <= total)
        if bad:
            raise ValueError(f"recording steps must lie in [0, {total}], got {bad[:5]}")
        self.total = total
        self.steps = np.array(sorted(chosen | {0, total}), dtype=np.int64)
        self._set = frozenset(self.steps.tolist())

    @classmethod
    def every(cls, n: int, total: int) -> Schedule:
        """Steps 0, n, 2n, ... and ``total``."""
        if n < 1:
            raise ValueError(f"record every n steps needs n >= 1, got {n}")
        return cls(range(0, total + 1, n), total)

    @classmethod
    def log_spaced(cls, num: int, total: int) -> Schedule:
        """About ``num`` steps spaced evenly in log(1 + t) between 0 and ``total`` (duplicates merged)."""
        if num < 2:
            raise ValueError(f"a log-spaced schedule needs num >= 2 points, got {num}")
        return cls(np.unique(np.round(np.expm1(np.linspace(0.0, np.log1p(total), num)))).astype(int), total)

    def __contains__(self, step: int) -> bool:
        return step in self._set

    def __iter__(self) -> Iterator[int]:
        return iter(self.steps.tolist())

    def __len__(self) -> int:
        return len(self.steps)


def activation_recorder(x: Tensor, layer: str) -> Recorder:
    """Records the ensemble's representation of ``x`` at ``layer`` (K, n, ...), in eval mode."""

    def record(_step: int, model: nn.Module) -> Tensor:
        was_training = model.training
        model.eval()
        try:
            return model.activations(x, [layer])[layer]
        finally:
            model.train(was_training)

    return record


def output_recorder(x: Tensor) -> Recorder:
    """Records the ensemble's outputs on ``x`` (K, n, d_out), in eval mode."""

    def record(_step: int, model: nn.Module) -> Tensor:
        was_training = model.training
        model.eval()
        try:
            return model(x)
        finally:
            model.train(was_training)

    return record
