"""The training loop for an :class:`repdyn.nn.ensemble.Ensemble`: all K members take each step together.

The loss of member k is the mean over training points of a per-point loss (:mod:`repdyn.nn.losses`; "mse" is
½‖y − ŷ‖² as in Eq. (1) of seed 000). Summing the K member losses and back-propagating once gives every
member its own gradient, since no parameter is shared; the optimiser (:mod:`repdyn.nn.optim`) then applies
per-member learning rates. :func:`train` is a step rule run by :func:`repdyn.nn.driver.drive`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from repdyn.nn.driver import Divergence, StepRule, drive, restore_rng, rng_state
from repdyn.nn.ensemble import Ensemble
from repdyn.nn.losses import PointLoss, get_loss, mse_half, mse_half_output_factor, mse_half_output_grad
from repdyn.nn.optim import StackedOptimizer, member_values
from repdyn.nn.recording import PassRecorder, Recorder, Schedule
from repdyn.nn.trajectory import Trajectory

StopCriterion = Callable[[int, Tensor], bool]
"""``(step, losses (K,)) -> bool``: stop after recording this step when it returns True."""


@dataclass
class TrainResult:
    """What :func:`train` returns (NumPy arrays; index t runs over recorded steps, k over members).

    trajectory: the recorded steps (0 = initial model) and, at those steps, the series ``"loss"`` (T, K), the full
    training-set loss, and one series (T, K, ...) per recorder; ``stopped_at`` the last step taken (== steps[-1]).
    diverged: (K,) bool. diverged_at: (K,) first step whose loss was NaN/inf, -1 if none.
    """

    trajectory: Trajectory
    diverged: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    diverged_at: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def final_loss(self) -> np.ndarray:
        return self.trajectory["loss"][-1]


def _member_batch(t: Tensor, k: int, data_ndim: int) -> bool:
    """Whether ``t`` holds per-member data (leading dim K) rather than one shared dataset."""
    return t.dim() == data_ndim + 1 and t.shape[0] == k


class _Train(StepRule):
    """The step rule of :func:`train`. Step t (0 <= t <= ``steps``) evaluates the model after t updates (the loss of
    the step itself at full batch; the full training set's in eval mode with minibatches, where it is recorded or a
    stopping criterion reads it), checks the losses, records where the driver's schedule says, and then, unless t is the
    last step or a stopping criterion holds, takes update t + 1: :func:`drive` runs ``steps + 1`` of them."""

    what = "loss"

    def __init__(self, model: Ensemble, x: Tensor, y: Tensor, *, steps: int, lr: float | Sequence[float] | Tensor,
                 optimizer: str, point_loss: PointLoss, batch_size: int | None, n: int,
                 generator: torch.Generator | None, momentum: float, betas: tuple[float, float], eps: float,
                 weight_decay: float, recorders: dict[str, Recorder], stop_loss: float | None,
                 stop: StopCriterion | None, on_divergence: str, independent_batches: bool, fused_step: bool) -> None:
        k = model.k
        self.model, self.x, self.y, self.steps, self.n = model, x, y, steps, n
        self.point_loss, self.generator, self.recorders = point_loss, generator, recorders
        self.stop_loss, self.stop, self.independent_batches = stop_loss, stop, independent_batches
        self.batch_size = batch_size
        self.full_batch = batch_size is None or batch_size == n
        self.evaluates = stop_loss is not None or stop is not None  # a stopping criterion reads every step's loss
        self.params = list(model.params.values())
        any_param = self.params[0]
        self.rates = member_values(lr, k, "lr", any_param.device, any_param.dtype)
        self.opt = StackedOptimizer(self.params, self.rates, "gd" if optimizer == "sgd" else optimizer,
                                    momentum=momentum, betas=betas, eps=eps, weight_decay=weight_decay)
        self.x_member = _member_batch(x, k, model._input_dim())
        self.divergence = Divergence(on_divergence, k, any_param.device)
        self.bad_step = -1  # the step of a non-finite loss under "raise", which drive raises at its next look
        self.base = base = model.base
        # the step updates the weights as it back-propagates
        self.in_place = optimizer in ("gd", "sgd") and not weight_decay
        self.fused = fused_step and model._stacked and getattr(
            base, "supports_fused_step" if self.in_place else "supports_fused_grads", False)
        self.fused_state: list[Any] = []
        self.plan = base.fused_plan(model.params) if self.fused else None
        self.closed_form = point_loss is mse_half
        self.unit_scale = torch.ones(k, dtype=any_param.dtype, device=any_param.device)  # d(Σ_k L_k)/dL_k
        self.factors: list[Any] = [None, 0, None]  # (scale, n, mse_half_output_factor(scale, n)) of the last step
        self.member_rows = torch.arange(k, device=x.device).unsqueeze(1)
        self.recorded_steps: list[int] = []
        self.recorded_loss: list[Tensor] = []
        self.recorded: dict[str, list[Tensor]] = {name: [] for name in recorders}
        self.order = torch.empty(0, dtype=torch.long)
        self.cursor = 0
        self.stopped_at = -1  # the last step, once taken
        model.train()

    def losses_on(self, xb: Tensor, yb: Tensor) -> Tensor:
        return self.point_loss(self.model(xb, generator=self.generator), yb).mean(-1)

    def output_grad(self, residual: Tensor, scale: Tensor) -> Tensor:
        """:func:`mse_half_output_grad`, its factor recomputed only when the scale (learning rates) or n change."""
        factors = self.factors
        if factors[0] is not scale or factors[1] != residual.shape[-2]:
            factors[:] = [scale, residual.shape[-2], mse_half_output_factor(scale, residual.shape[-2])]
        return mse_half_output_grad(residual, factors[2])

    def step_losses(self, xb: Tensor, yb: Tensor) -> Tensor:
        """Member losses of a training step; the fused path keeps the forward cache and a graph of the loss
        head only (none for ½-MSE, whose output gradient it keeps instead: see :func:`mse_half_output_grad`)."""
        if not self.fused:
            return self.losses_on(xb, yb)
        out, cache = self.base.fused_gd_forward(self.plan, xb)
        if self.closed_form:
            residual = out - yb
            self.fused_state[:] = [residual, cache, out]
            return (0.5 * residual.pow(2).sum(-1)).mean(-1)
        out.requires_grad_()
        self.fused_state[:] = [out, cache, out.detach()]
        return self.point_loss(out, yb).mean(-1)

    @torch.no_grad()
    def record(self, step: int, current: Tensor) -> None:
        """The loss and every recorder at ``step``; a :class:`PassRecorder` of the full-batch inputs reads the fused
        step's own forward pass on them (taken at this step's parameters, before the update)."""
        self.recorded_steps.append(step)
        self.recorded_loss.append(current.clone())
        for name, recorder in self.recorders.items():
            if self.fused and self.full_batch and isinstance(recorder, PassRecorder) and recorder.inputs is self.x:
                _, cache, out = self.fused_state
                value = recorder.from_pass(self.base.fused_taps(cache, out, recorder.layers))
            else:
                value = recorder(step, self.model)
            self.recorded[name].append(value.detach().clone())

    def select(self, t: Tensor, per_member: bool, idx: Tensor) -> Tensor:
        if idx.dim() == 2:  # (K, b) per-member indices
            return t[self.member_rows, idx] if per_member else t[idx]
        return t[:, idx] if per_member else t[idx]

    def checked(self, values: Tensor, step: int) -> bool:
        """False where a loss is not finite under "raise" (the step ends there and drive raises); under "mark" its
        members are marked diverged and their learning rates set to zero."""
        if self.divergence.mode == "raise":
            if bool(torch.isfinite(values).all()):
                return True
            self.bad_step = step
            return False
        if self.divergence.check(values, step):
            self.opt.set_lr(torch.where(self.divergence.alive, self.rates, torch.zeros_like(self.rates)))
        return True

    def step(self, step: int, due: tuple[str, ...]) -> Tensor | None:
        model, x, y = self.model, self.x, self.y
        record = "trajectory" in due
        if self.full_batch:
            batch_loss = self.step_losses(x, y)
            current = shown = batch_loss.detach()
        else:
            shown = None
            if record or self.evaluates:
                model.eval()
                with torch.no_grad():
                    current = self.losses_on(x, y)
                model.train()
            if step < self.steps:
                n, batch_size, generator = self.n, self.batch_size, self.generator
                if self.cursor + batch_size > n or step == 0:
                    on = generator.device
                    self.order = (torch.argsort(torch.rand(model.k, n, generator=generator, device=on), dim=1)
                                  if self.independent_batches else torch.randperm(n, generator=generator, device=on)
                                  ).to(x.device)
                    self.cursor = 0
                idx = self.order[..., self.cursor:self.cursor + batch_size]
                self.cursor += batch_size
                batch_loss = self.step_losses(self.select(x, self.x_member, idx), self.select(y, self.x_member, idx))
                if not self.checked(batch_loss.detach(), step):
                    return shown
        if (self.full_batch or record or self.evaluates) and not self.checked(current, step):
            return shown
        if record:
            self.record(step, current)
        if step == self.steps:
            self.stopped_at = step
            return shown
        alive = self.divergence.alive
        if (self.stop_loss is not None and bool((current[alive] <= self.stop_loss).all())) or (
                self.stop is not None and self.stop(step, current)):
            if not record:  # the last state is always recorded
                self.record(step, current)
            self.stopped_at = step
            return shown
        opt = self.opt
        scale = opt.loss_scale
        everyone = self.divergence.everyone
        if self.fused:  # ∂L/∂output from the fused forward pass, then the hand-written back-propagation
            head, cache, _ = self.fused_state
            if self.closed_form:
                grad_out = self.output_grad(head, self.unit_scale if scale is None else scale)
            else:
                (grad_out,) = torch.autograd.grad(_weighted_sum(batch_loss, scale), head)
            if self.in_place:
                if not everyone:
                    grad_out = torch.where(alive.view(-1, 1, 1), grad_out, torch.zeros_like(grad_out))
                self.base.fused_gd_update(self.plan, cache, grad_out)
                return shown
            found = self.base.fused_grads(self.plan, cache, grad_out)  # the gradients themselves (Adam, momentum)
            grads = [found[name] for name in model.params]
        else:
            grads = torch.autograd.grad(_weighted_sum(batch_loss, scale), self.params)
        if not everyone:
            grads = [torch.where(alive.view(-1, *([1] * (g.dim() - 1))), g, torch.zeros_like(g)) for g in grads]
        if scale is not None:
            opt.step_prescaled(grads)
        else:
            opt.step(grads)
        return shown

    def finite(self) -> bool:
        return self.bad_step < 0

    def first_bad_step(self, step: int) -> int:
        return self.bad_step

    def done(self) -> bool:
        return self.stopped_at >= 0

    def state(self) -> dict[str, Any]:
        return {"model": self.model.snapshot(), "optimizer": self.opt.state_dict(), "rng": rng_state(self.generator),
                "recorded_steps": list(self.recorded_steps), "recorded_loss": list(self.recorded_loss),
                "recorded": {name: list(values) for name, values in self.recorded.items()},
                "order": self.order.clone(), "cursor": self.cursor, "divergence": self.divergence.state()}

    def load(self, state: dict[str, Any]) -> None:
        self.restore(state)
        self.opt.load_state_dict(state["optimizer"])
        self.recorded_steps, self.recorded_loss = list(state["recorded_steps"]), list(state["recorded_loss"])
        self.recorded = {name: list(values) for name, values in state["recorded"].items()}
        self.order, self.cursor = state["order"], state["cursor"]
        self.divergence.load(state["divergence"])

    def result(self, steps: int) -> TrainResult:
        diverged_at = np.array(self.divergence.at, dtype=np.int64)
        series = {"loss": torch.stack(self.recorded_loss).cpu().numpy()}
        series.update({name: torch.stack(v).cpu().numpy() for name, v in self.recorded.items()})
        return TrainResult(Trajectory(np.array(self.recorded_steps, dtype=np.int64), series, self.stopped_at),
                           diverged=diverged_at >= 0, diverged_at=diverged_at)

    def final(self) -> dict[str, Any]:
        return {"model": self.model.snapshot(), "rng": rng_state(self.generator)}

    def restore(self, final: dict[str, Any]) -> None:
        self.model.restore(final["model"])
        restore_rng(final["rng"], self.generator)


def train(
    model: Ensemble,
    x: Tensor,
    y: Tensor,
    *,
    steps: int,
    lr: float | Sequence[float] | Tensor,
    optimizer: str = "gd",
    loss: str | PointLoss = "mse",
    batch_size: int | None = None,
    generator: torch.Generator | None = None,
    momentum: float = 0.9,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    schedule: Schedule | None = None,
    recorders: Mapping[str, Recorder] | None = None,
    stop_loss: float | None = None,
    stop: StopCriterion | None = None,
    on_divergence: str = "raise",
    independent_batches: bool = False,
    fused_step: bool = True,
) -> TrainResult:
    """Train every member of ``model`` for ``steps`` updates.

    Args:
        x, y: the training set, shared ((n, ...) inputs; (n, d_out) targets or (n,) class labels) or per member
            (x and y both with leading dim K).
        lr: one learning rate or K per-member rates.
        optimizer: "gd" (full batch), "sgd" (minibatches of ``batch_size``), "momentum" or "adam"; the last two
            are full batch unless ``batch_size`` is set. Minibatch order is drawn from ``generator``: one
            permutation per epoch, shared by all members, or one per member with ``independent_batches``.
        loss: "mse" (½‖y − ŷ‖²), "hinge", "soft_hinge", "cross_entropy" or a per-point callable.
        schedule: steps at which the full training-set loss (the trajectory's series "loss") and every
            recorder (a series of the recorder's name) are recorded (default: every step). Recorders run in
            no-grad mode only at those steps.
        stop_loss: stop once every live member's training loss is <= this value; ``stop`` is a custom criterion.
        on_divergence: "raise" raises :class:`repdyn.nn.Diverged` at the first NaN/inf loss of any member;
            "mark" marks that member diverged, freezes it, and trains the others on (raising only when all
            members have diverged).
        fused_step: for (minibatch) gradient descent without weight decay on a model that offers it
            (:class:`repdyn.nn.models.mlp.MLP` without dropout), take each step with its hand-written back-propagation
            that fuses gradient and update (same result as autograd, less memory traffic); for the other optimisers
            take the gradients from that back-propagation where the model's ``supports_fused_grads`` says they are
            autograd's bit for bit (no graph is built); False forces autograd.

    The model trains (and is left) in train mode. The recorded loss is that of the full training set: with
    full-batch training it is the loss of the step itself (train mode, so with dropout masks if any); with
    minibatches it is an extra no-grad evaluation in eval mode, done only at recorded steps (or every step when
    a stopping criterion needs it). Run by :func:`repdyn.nn.driver.drive` (checkpoints with the random number
    generators' states, progress, divergence).
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if recorders is not None and "loss" in recorders:
        raise ValueError("a recorder may not be named 'loss': the trajectory's 'loss' series is the training loss")
    if on_divergence not in ("raise", "mark"):
        raise ValueError(f"on_divergence must be 'raise' or 'mark', got {on_divergence!r}")
    if optimizer == "sgd" and batch_size is None:
        raise ValueError("optimizer 'sgd' needs a batch_size (use 'gd' for full-batch gradient descent)")
    n = x.shape[1] if _member_batch(x, model.k, model._input_dim()) else x.shape[0]
    if batch_size is not None and not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in [1, {n}], got {batch_size}")
    if not (batch_size is None or batch_size == n) and generator is None:
        raise ValueError("minibatch training needs a torch.Generator for the batch order")
    point_loss = get_loss(loss)
    schedule = schedule if schedule is not None else Schedule.every(1, steps)
    if schedule.total != steps:
        raise ValueError(f"schedule was built for {schedule.total} steps, training runs {steps}")
    rule = _Train(model, x, y, steps=steps, lr=lr, optimizer=optimizer, point_loss=point_loss, batch_size=batch_size,
                  n=n, generator=generator, momentum=momentum, betas=betas, eps=eps, weight_decay=weight_decay,
                  recorders=dict(recorders or {}), stop_loss=stop_loss, stop=stop,
                  on_divergence=on_divergence, independent_batches=independent_batches, fused_step=fused_step)
    return drive(rule, steps + 1, record={"trajectory": schedule})


def _weighted_sum(losses: Tensor, scale: Tensor | None) -> Tensor:
    """Σ_k of the member losses (K,), each weighted by the optimiser's loss scale where it has one."""
    return losses.sum() if scale is None else (losses * scale).sum()
