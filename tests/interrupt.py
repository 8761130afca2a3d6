"""Interrupting a training loop at a chosen step, as a kill would, for the checkpoint tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Killed(Exception):
    """Raised by :func:`kill_at`'s listener."""


def kill_at(stop_at: int) -> Callable[..., None]:
    """A progress listener that stops the loop when it reports ``stop_at``."""
    def listener(step: int, total: int, loss: Any = None) -> None:
        if step == stop_at:
            raise Killed
    return listener
