"""Progress a person can watch: log lines for batch jobs, a bar per run on a terminal.

Training loops report their steps through :mod:`repdyn.nn.progress`; :func:`watching` installs the listener for
one run. Off a terminal (a SLURM log, ``2>log``) a run writes one line when it starts, at most one every
``every`` seconds inside it (step, loss, rate, ETA) and one when it ends. On a terminal the CLI shows a bar per
run instead (:func:`showing`), in the process that runs it.
"""

from __future__ import annotations

import collections
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TextIO

import torch

from repdyn.nn.progress import Listener, bound, reporting

Display = Callable[[str], "Listener"]
"""``run name -> listener`` for that run (a terminal bar)."""

_DISPLAY: ContextVar[Display | None] = ContextVar("repdyn_progress_display", default=None)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def loss_value(loss: Any) -> float | None:
    """One number for a loss report: the median over ensemble members of a tensor or array."""
    if loss is None:
        return None
    value = torch.as_tensor(loss).detach().float().reshape(-1)
    return float(value.median()) if value.numel() else None


class RunLog:
    """The log lines of one run, written to ``stream`` (standard error by default)."""

    def __init__(self, name: str, every: float, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name, self.every, self.stream, self.clock = name, every, stream, clock
        self.started = self.last = clock()
        self.loop_start = (self.started, 0)
        self.previous_step = -1

    def write(self, text: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(f"[{time.strftime('%H:%M:%S')}] {text}\n")
        stream.flush()

    def start(self) -> None:
        self.write(f"start {self.name}")

    def __call__(self, step: int, total: int, loss: Any = None) -> None:
        now = self.clock()
        if step < self.previous_step:  # a new loop of the same run
            self.loop_start = (now, step)
        self.previous_step = step
        if now - self.last < self.every:
            return
        self.last = now
        since, first = self.loop_start
        rate = (step - first) / (now - since) if now > since else math.nan
        eta = (total - step) / rate if rate and rate > 0 and math.isfinite(rate) else math.nan
        value = loss_value(loss)
        parts = [f"{self.name}: step {step}/{total}"]
        if value is not None:
            parts.append(f"loss {value:.4g}")
        if math.isfinite(rate):
            parts.append(f"{rate:.3g} steps/s")
        if math.isfinite(eta):
            parts.append(f"ETA {_clock(eta)}")
        parts.append(f"elapsed {_clock(now - self.started)}")
        self.write(", ".join(parts))

    def end(self, status: str) -> None:
        self.write(f"end {self.name}: {status} in {_clock(self.clock() - self.started)}")


def showing(display: Display | None) -> AbstractContextManager[None]:
    """Runs executed in this process inside this block report to ``display`` (a terminal bar per run)."""
    return bound(_DISPLAY, display)


@contextmanager
def watching(name: str, every: float) -> Iterator[Callable[[str], None]]:
    """Around one run: its progress goes to the terminal display if one is shown here, else to log lines every
    ``every`` seconds (0: silent). Yields ``end(status)``, to call when the run is done."""
    display = _DISPLAY.get()
    if display is not None:
        with reporting(display(name)):
            yield lambda status: None
        return
    if every <= 0:
        yield lambda status: None
        return
    log = RunLog(name, every)
    log.start()
    with reporting(log):
        yield log.end


@contextmanager
def collecting_warnings() -> Iterator[list[str]]:
    """Collect the Python warnings raised inside (numpy's "All-NaN slice", matplotlib's log-scale notices, ...)
    into the yielded list, one line per distinct warning with its count, instead of letting them reach the terminal:
    the report shows them beside the run or analysis that raised them."""
    found: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield found
    counts = collections.Counter(f"{w.category.__name__}: {w.message} ({Path(w.filename).name}:{w.lineno})"
                                 for w in caught)
    found.extend(f"{text} ×{n}" if n > 1 else text for text, n in counts.items())
