"""Divergence: a run whose loss becomes NaN or inf stops and is stored as diverged (with the step)."""

from __future__ import annotations

import math

import torch


class Diverged(RuntimeError):
    """Raised by a training loop when a monitored quantity stops being finite."""

    def __init__(self, step: int, what: str = "loss") -> None:
        super().__init__(f"{what} became NaN/inf at step {step}")
        self.step = step
        self.what = what


def check_finite(value: torch.Tensor | float, step: int, what: str = "loss") -> None:
    """Raise :class:`Diverged` unless every entry of ``value`` is finite."""
    finite = bool(torch.isfinite(value).all()) if isinstance(value, torch.Tensor) else math.isfinite(value)
    if not finite:
        raise Diverged(step, what)
