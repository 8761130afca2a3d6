"""The training driver: every training loop of repdyn is a step rule that :func:`drive` runs.

A step rule (:class:`StepRule`) knows one thing: how to take a step of its dynamics (gradient descent, Adam, batch-1
SGD, the Leaky-ResNet phases, an adaptive Euler integration of a gradient flow) and what it records. The driver owns
the rest, once, for every loop (in the manner of diffrax's ``diffeqsolve``, whose solvers and step-size controllers
are plugged into one loop):

- the loop itself, with the host looking at the device state only every ``sync_every`` steps;
- divergence: at each look, a non-finite watched value raises :class:`~repdyn.nn.divergence.Diverged` naming the
  first step that produced it (:meth:`StepRule.first_bad_step`), or, under :class:`Divergence` ``"mark"``, the
  members that diverged are handed to the rule to freeze;
- stopping: the step cap, and the rule's own criterion (:meth:`StepRule.done`: zero loss, every member converged, a
  precondition reached), looked at at the same points;
- recording: which steps are recorded is the driver's ``record`` schedules, one per series a rule records (a
  :class:`~repdyn.nn.recording.Schedule`, a ``range``: any set of steps; in the manner of diffrax's ``SaveAt``).
  Each step is told which of them hold the state it starts from, the state after ``step`` steps, and records what
  the rule measures there. A loop whose final state is on a schedule runs one more step that only measures; a rule
  that stops by its own criterion records the state it stops in;
- progress: each step is reported to the runtime's listener (:mod:`repdyn.nn.progress`), with its loss;
- checkpoints: under a :class:`~repdyn.nn.checkpoint.Checkpointer` the driver saves the rule's declared state
  (:meth:`StepRule.state`) when a save is due, resumes a killed run from it bit for bit, and keeps a finished loop's
  result so a resumed run passes it without recomputing.

The adaptive Euler step of spec 003 §2.4 is one controller, :class:`AdaptiveEuler`, used by every rule that
integrates a gradient flow with it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import torch
from torch import Tensor

from repdyn.nn import checkpoint
from repdyn.nn.divergence import Diverged
from repdyn.nn.progress import Cap, report

R = TypeVar("R", covariant=True)
FORMAT = 3
"""The layout of a loop's saved state (``{"format", "step", "state"}`` or ``{"format", "result", "final"}``); a
checkpoint slot in any other layout is not resumed from: its loop starts from the beginning."""

__all__ = ["AdaptiveEuler", "Divergence", "StepRule", "Verdict", "drive", "restore_rng", "rng_state"]


class StepRule(Protocol, Generic[R]):
    """One training loop's dynamics and records, run by :func:`drive`. A rule subclasses it to inherit the defaults
    of :meth:`done` and :meth:`look`.

    ``what`` names the watched quantity in a :class:`Diverged` error ("loss", "objective", "gradient").
    """

    what: str

    def step(self, step: int, due: tuple[str, ...]) -> Any:
        """Take step ``step`` (0-based), first recording the state it starts from (the state after ``step`` steps)
        in each series named in ``due``, those of the driver's ``record`` schedules that hold ``step``. Returns what
        progress reports with it (a loss, possibly a device tensor, or None)."""

    def finite(self) -> bool | Tensor:
        """Whether every watched value so far is finite (a device tensor is read only at the driver's looks)."""

    def first_bad_step(self, step: int) -> int:
        """The step a :class:`Diverged` error names when the driver finds a non-finite value at ``step``."""

    def done(self) -> bool:
        """The rule's stopping criterion, looked at with the divergence check (none by default: the step cap)."""
        return False

    def look(self, step: int) -> None:
        """What the rule does when the host looks (every ``sync_every`` steps, after the checks): compacting finished
        members, for instance (nothing by default)."""
        return None

    def state(self) -> dict[str, Any]:
        """The whole state a checkpoint saves: tensors, NumPy arrays, plain data (:mod:`repdyn.nn.checkpoint`)."""

    def load(self, state: dict[str, Any]) -> None:
        """Continue from a saved :meth:`state`."""

    def result(self, steps: int) -> R:
        """What the loop returns, after ``steps`` steps."""

    def final(self) -> dict[str, Any]:
        """The parameters a finished loop leaves behind, saved with its result."""

    def restore(self, final: dict[str, Any]) -> None:
        """Put back what :meth:`final` saved (a resumed run that had finished this loop)."""


def drive(rule: StepRule[R], steps: int, *, record: Mapping[str, Iterable[int]] | None = None, sync_every: int = 1,
          capped: bool = False, inference: bool = False) -> R:
    """Run ``rule`` for at most ``steps`` steps and return its result.

    ``record``: per series the rule records, the steps whose starting state it records there (a
    :class:`~repdyn.nn.recording.Schedule`, a ``range``, a set; None: nothing is recorded on a schedule).

    The host looks every ``sync_every`` steps (and after the last one): it raises :class:`Diverged` if a watched
    value is not finite, stops if the rule is done, then lets the rule act on the look (:meth:`StepRule.look`).
    ``capped``: ``steps`` is only a cap (the rule usually stops earlier), which progress listeners are told
    (:class:`~repdyn.nn.progress.Cap`). ``inference``: the steps and looks run in :func:`torch.inference_mode` (the
    same kernels without autograd's bookkeeping, most of the cost of a step made of small operations); the rule's
    state is loaded and its result built outside it, so the tensors it returns are ordinary ones.
    """
    if steps < 0 or sync_every < 1:
        raise ValueError(f"steps={steps} must be >= 0 and sync_every={sync_every} >= 1")
    checkpoints = checkpoint.current()
    slot = checkpoints.next_loop() if checkpoints is not None else -1
    saved = checkpoints.load(slot) if checkpoints is not None else None
    if saved is not None and saved.get("format") != FORMAT:  # another layout's state: this loop starts afresh
        saved = None
    if saved is not None and "result" in saved:  # this loop finished before the run was interrupted
        rule.restore(saved["final"])
        return saved["result"]
    first = 0
    if saved is not None:
        rule.load(saved["state"])
        first = saved["step"]
    total = Cap(steps) if capped else steps
    schedules = _Schedules(record, first)
    step = first
    with torch.inference_mode() if inference else contextlib.nullcontext():
        while step < steps:
            if step % sync_every == 0:
                _check(rule, step)
                if rule.done():
                    break
                rule.look(step)
            if checkpoints is not None and step > first and checkpoints.due():
                checkpoints.save(slot, {"format": FORMAT, "step": step, "state": rule.state()})
            report(step, total, rule.step(step, schedules.pop(step) if step == schedules.soonest else ()))
            step += 1
    _check(rule, step)
    result = rule.result(step)
    if checkpoints is not None and checkpoints.due():
        checkpoints.save(slot, {"format": FORMAT, "result": result, "final": rule.final()})
    return result


def rng_state(generator: torch.Generator | None) -> dict[str, Any]:
    """The random number generators a rule draws from, for its :meth:`~StepRule.state`: torch's global one and the
    rule's own."""
    return {"global": torch.get_rng_state(), "generator": None if generator is None else generator.get_state()}


def restore_rng(state: dict[str, Any], generator: torch.Generator | None) -> None:
    """Put back what :func:`rng_state` saved."""
    torch.set_rng_state(state["global"])
    if generator is not None and state["generator"] is not None:
        generator.set_state(state["generator"])


class _Schedules:
    """The ``record`` schedules as the steps come: each one's next step, so that a step which no schedule holds
    costs one comparison (``soonest``), and the names of those that hold a step (:meth:`pop`)."""

    def __init__(self, record: Mapping[str, Iterable[int]] | None, first: int) -> None:
        self.upcoming = {name: _ascending(when, first) for name, when in (record or {}).items()}
        self.heads = {name: next(steps_, math.inf) for name, steps_ in self.upcoming.items()}
        self.soonest = min(self.heads.values(), default=math.inf)

    def pop(self, step: int) -> tuple[str, ...]:
        """The names of the schedules holding ``step`` (== :attr:`soonest`), each moved on to its next step."""
        names = tuple(name for name, head in self.heads.items() if head == step)
        for name in names:
            self.heads[name] = next(self.upcoming[name], math.inf)
        self.soonest = min(self.heads.values())
        return names


def _ascending(when: Iterable[int], first: int) -> Iterator[int]:
    """The steps of a schedule from ``first`` on, in order (a ``range`` is walked as it is, not stored)."""
    if isinstance(when, range) and when.step > 0:
        return iter(when[max(0, -(-(first - when.start) // when.step)):])
    return iter(sorted({int(s) for s in when if s >= first}))


def _check(rule: StepRule[Any], step: int) -> None:
    if not bool(rule.finite()):
        raise Diverged(rule.first_bad_step(step), rule.what)


class Divergence:
    """What a loop over K members does at a non-finite loss: ``"raise"`` :class:`Diverged` at once, or ``"mark"``
    the members whose loss is not finite as diverged (with the step), so the rule freezes them and trains the others
    on; :class:`Diverged` is raised when every member has diverged."""

    def __init__(self, mode: str, members: int, device: torch.device | str = "cpu") -> None:
        if mode not in ("raise", "mark"):
            raise ValueError(f"on_divergence must be 'raise' or 'mark', got {mode!r}")
        self.mode = mode
        self.alive = torch.ones(members, dtype=torch.bool, device=device)
        self.at = [-1] * members
        self.everyone = True  # every member is alive

    def check(self, values: Tensor, step: int, what: str = "loss") -> bool:
        """Look at the members' ``values`` (K,) at ``step``; True when members were newly marked diverged."""
        if bool(torch.isfinite(values).all()):  # the common case in one reduction
            return False
        bad = ~torch.isfinite(values) & self.alive
        if not bool(bad.any()):
            return False
        if self.mode == "raise":
            raise Diverged(step, what)
        for k in bad.nonzero().flatten().tolist():
            self.at[k] = step
        self.alive[bad] = False
        self.everyone = False
        if not bool(self.alive.any()):
            raise Diverged(step, what)
        return True

    def state(self) -> dict[str, Any]:
        return {"alive": self.alive.clone(), "at": list(self.at)}

    def load(self, state: dict[str, Any]) -> None:
        self.alive.copy_(state["alive"])
        self.at = list(state["at"])
        self.everyone = bool(self.alive.all())


class Verdict:
    """The controller's decision for each trial of a batch (bool tensors): ``accept``, ``grow``, ``reject``, and
    ``last_rejected``, the dgrad of each trial's rejection (∞: not rejected for dgrad). ``reject`` and
    ``last_rejected`` are computed when first read, from the tensors :meth:`AdaptiveEuler.decide` was given (which the
    caller leaves as they are): a step whose every trial accepts needs neither."""

    __slots__ = ("_dgrad", "_last", "_reject", "_running", "_small", "accept", "grow")

    def __init__(self, accept: Tensor, grow: Tensor, running: Tensor | None, small: Tensor, dgrad: Tensor) -> None:
        self.accept, self.grow = accept, grow
        self._running, self._small, self._dgrad = running, small, dgrad
        self._reject: Tensor | None = None
        self._last: Tensor | None = None

    @property
    def reject(self) -> Tensor:
        if self._reject is None:
            self._reject = ~self.accept if self._running is None else self._running & ~self.accept
        return self._reject

    @property
    def last_rejected(self) -> Tensor:
        if self._last is None:
            self._last = torch.where(self.reject & self._small, self._dgrad, torch.full_like(self._dgrad, math.inf))
        return self._last


@dataclass(frozen=True)
class AdaptiveEuler:
    """The adaptive Euler step of spec 003 §2.4, batched over trials.

    A tentative step of size dt is accepted when the gradient change ``dgrad = ‖g − g'‖²/(‖g‖‖g'‖)`` is below
    ``max_dgrad`` and the output change ``dout`` below ``max_dout``; dt is multiplied by ``grow`` when both are below
    ``calm`` times their thresholds; a rejected step is undone and dt divided by ``shrink``.

    ``jumps`` (ours, not in the paper or its code) judges a step of a piecewise-smooth flow by dout alone where it is a
    jump: a step across which a training point enters or leaves the hinge's active set (``margin_event``), or a
    retry after a dgrad rejection whose dgrad fell by less than 10× (a smooth change falls ~100× per ÷10 of dt).
    Trials that :meth:`decide` is told are ``dgrad_free`` (a rule's dt below its limit) skip the dgrad test: only dout
    is checked. ``grow_on_jumps``: a step accepted without the dgrad test may grow dt when dout allows it.
    """

    max_dgrad: float = 1e-4
    max_dout: float = 0.1
    calm: float = 0.5
    grow: float = 1.1
    shrink: float = 10.0
    jumps: bool = True
    grow_on_jumps: bool = False

    def __post_init__(self) -> None:
        if not (self.max_dgrad > 0 and self.max_dout > 0):
            raise ValueError(f"max_dgrad={self.max_dgrad}, max_dout={self.max_dout} must both be > 0")

    def decide(self, dgrad: Tensor, dout: Tensor, running: Tensor | None, last_rejected: Tensor | None,
               margin_event: Tensor | None = None, dgrad_free: Tensor | None = None) -> Verdict:
        """Accept, grow and reject per trial, and the dgrad of each trial's rejection (∞: not rejected for dgrad).

        ``running`` (None: every trial runs) masks stopped trials, which neither accept nor reject;
        ``last_rejected`` is the previous verdict's (None: no trial's previous step was rejected); ``dgrad_free``
        marks the trials whose dt is below the dgrad-free limit."""
        small = dout < self.max_dout
        ran_small = small if running is None else running & small
        unchecked = None
        if self.jumps:
            event = margin_event if last_rejected is None else (
                (dgrad > 0.1 * last_rejected) if margin_event is None else
                (dgrad > 0.1 * last_rejected) | margin_event)
            unchecked = None if event is None else ran_small & event
        if dgrad_free is not None:
            unchecked = dgrad_free if unchecked is None else unchecked | dgrad_free
        passes = dgrad < self.max_dgrad if unchecked is None else (dgrad < self.max_dgrad) | unchecked
        accept = ran_small & passes
        smooth = dgrad < self.calm * self.max_dgrad
        if self.grow_on_jumps and unchecked is not None:
            smooth = smooth | unchecked
        grow = accept & (dout < self.calm * self.max_dout) & smooth
        return Verdict(accept, grow, running, small, dgrad)

    def next_dt(self, dt: Tensor, verdict: Verdict) -> Tensor:
        """dt × ``grow`` where the step grows, ÷ ``shrink`` where it was rejected."""
        return torch.where(verdict.grow, dt * self.grow, torch.where(verdict.reject, dt / self.shrink, dt))
