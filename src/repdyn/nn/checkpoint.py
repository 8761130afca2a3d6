"""Checkpoints inside long runs: the training loops of a run save their state every few minutes, and a run that is
killed resumes from its last checkpoint, ending bit-identical to an uninterrupted run.

The runtime installs a :class:`Checkpointer` around a run (:func:`checkpointing`); each training loop the run
enters asks it for its slot (:meth:`Checkpointer.next_loop`, the loops of a run numbered in the order they start),
restores what is saved there and, when a save is due, saves its whole state: parameters, optimiser, random number
generators and what it has recorded so far. A loop that finished keeps its result and final parameters, so a
resumed run passes it without recomputing. Without a checkpointer a loop does none of this.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import torch

from repdyn.nn.progress import bound

_CURRENT: ContextVar[Checkpointer | None] = ContextVar("repdyn_checkpointer", default=None)


class Checkpointer:
    """The checkpoint file of one run (``path``), saved at most every ``every`` seconds."""

    def __init__(self, path: str | os.PathLike[str], every: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path, self.every, self.clock = Path(path), every, clock
        self.last = clock()
        self.loops = 0
        self.saved: dict[int, dict[str, Any]] = (torch.load(self.path, weights_only=False)
                                                 if self.path.is_file() else {})

    def next_loop(self) -> int:
        self.loops += 1
        return self.loops - 1

    def load(self, loop: int) -> dict[str, Any] | None:
        return self.saved.get(loop)

    def due(self) -> bool:
        return self.clock() - self.last >= self.every

    def save(self, loop: int, state: dict[str, Any]) -> None:
        """Write every loop's state, atomically (a temporary file renamed into place)."""
        self.saved[loop] = state
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".tmp-{self.path.name}-{os.getpid()}")
        try:
            torch.save(self.saved, temporary)
            os.replace(temporary, self.path)
        finally:
            temporary.unlink(missing_ok=True)
        self.last = self.clock()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def current() -> Checkpointer | None:
    return _CURRENT.get()


def checkpointing(checkpointer: Checkpointer | None) -> AbstractContextManager[None]:
    """The training loops run inside this block save to and resume from ``checkpointer``."""
    return bound(_CURRENT, checkpointer)


def rng_state(generator: torch.Generator | None) -> dict[str, Any]:
    """The random number generators a loop draws from: torch's global one and the loop's own."""
    return {"global": torch.get_rng_state(), "generator": None if generator is None else generator.get_state()}


def restore_rng(state: dict[str, Any], generator: torch.Generator | None) -> None:
    torch.set_rng_state(state["global"])
    if generator is not None and state["generator"] is not None:
        generator.set_state(state["generator"])
