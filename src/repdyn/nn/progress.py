"""Progress of a long loop, reported to whoever runs it, without the loop knowing who.

A training loop calls :func:`report` each step; it costs a context-variable look-up when nobody listens. The
runtime installs a listener with :func:`reporting` around a run (a progress bar on a terminal, a log line at most
every minute elsewhere, the calibration of ``repdyn plan``). ``loss`` may be a tensor: a listener converts it only
when it shows it, so the loop never waits on the device for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any

Listener = Callable[[int, int, Any], None]
"""``(step, total_steps, loss or None)``."""

_LISTENER: ContextVar[Listener | None] = ContextVar("repdyn_progress_listener", default=None)


class Cap(int):
    """A loop's step count that is only its cap: the loop stops earlier once it has converged or fitted (so a rate
    times it bounds the loop's cost from above)."""


def report(step: int, total: int, loss: Any = None) -> None:
    """Tell the listener, if any, that ``step`` of ``total`` is reached."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(step, total, loss)


@contextmanager
def bound(variable: ContextVar[Any], value: Any) -> Iterator[None]:
    """``variable`` holds ``value`` inside this block (the way the runtime hands a loop its listeners)."""
    token = variable.set(value)
    try:
        yield
    finally:
        variable.reset(token)


def reporting(listener: Listener | None) -> AbstractContextManager[None]:
    """Send the reports of the loops run inside this block to ``listener``."""
    return bound(_LISTENER, listener)
