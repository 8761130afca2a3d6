"""The training loop for an :class:`repdyn.nn.ensemble.Ensemble`: all K members take each step together.

The loss of member k is the mean over training points of a per-point loss (:mod:`repdyn.nn.losses`; "mse" is
½‖y − ŷ‖² as in Eq. (1) of seed 000). Summing the K member losses and back-propagating once gives every
member its own gradient, since no parameter is shared; the optimiser (:mod:`repdyn.nn.optim`) then applies
per-member learning rates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from repdyn.nn import checkpoint
from repdyn.nn.divergence import Diverged
from repdyn.nn.ensemble import Ensemble
from repdyn.nn.losses import PointLoss, get_loss, mse_half, mse_half_output_factor, mse_half_output_grad
from repdyn.nn.optim import StackedOptimizer, member_values
from repdyn.nn.progress import report
from repdyn.nn.recording import PassRecorder, Recorder, Schedule

StopCriterion = Callable[[int, Tensor], bool]
"""``(step, losses (K,)) -> bool``: stop after recording this step when it returns True."""


@dataclass
class TrainResult:
    """What :func:`train` returns (NumPy arrays; index t runs over recorded steps, k over members).

    steps: (T,) recorded steps (0 = initial model). loss: (T, K) full training-set loss at those steps.
    records: recorder name -> (T, K, ...). diverged: (K,) bool. diverged_at: (K,) first step whose loss was
    NaN/inf, -1 if none. stopped_at: the last step taken (== steps[-1]).
    """

    steps: np.ndarray
    loss: np.ndarray
    records: dict[str, np.ndarray] = field(default_factory=dict)
    diverged: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    diverged_at: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    stopped_at: int = 0

    @property
    def final_loss(self) -> np.ndarray:
        return self.loss[-1]


def _member_batch(t: Tensor, k: int, data_ndim: int) -> bool:
    """Whether ``t`` holds per-member data (leading dim K) rather than one shared dataset."""
    return t.dim() == data_ndim + 1 and t.shape[0] == k


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
        schedule: steps at which the full training-set loss and every recorder are recorded
            (default: every step). Recorders run in no-grad mode only at those steps.
        stop_loss: stop once every live member's training loss is <= this value; ``stop`` is a custom criterion.
        on_divergence: "raise" raises :class:`repdyn.nn.Diverged` at the first NaN/inf loss of any member;
            "mark" marks that member diverged, freezes it, and trains the others on (raising only when all
            members have diverged).
        fused_step: for (minibatch) gradient descent without weight decay on a model that offers it
            (:class:`repdyn.nn.mlp.MLP` without dropout), take each step with its hand-written back-propagation
            that fuses gradient and update (same result as autograd, less memory traffic); for the other optimisers
            take the gradients from that back-propagation where the model's ``supports_fused_grads`` says they are
            autograd's bit for bit (no graph is built); False forces autograd.

    The model trains (and is left) in train mode. The recorded loss is that of the full training set: with
    full-batch training it is the loss of the step itself (train mode, so with dropout masks if any); with
    minibatches it is an extra no-grad evaluation in eval mode, done only at recorded steps (or every step when
    a stopping criterion needs it).
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if on_divergence not in ("raise", "mark"):
        raise ValueError(f"on_divergence must be 'raise' or 'mark', got {on_divergence!r}")
    if optimizer == "sgd" and batch_size is None:
        raise ValueError("optimizer 'sgd' needs a batch_size (use 'gd' for full-batch gradient descent)")
    k = model.k
    data_ndim = model._input_dim()
    n = x.shape[1] if _member_batch(x, k, data_ndim) else x.shape[0]
    if batch_size is not None and not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in [1, {n}], got {batch_size}")
    full_batch = batch_size is None or batch_size == n
    if not full_batch and generator is None:
        raise ValueError("minibatch training needs a torch.Generator for the batch order")
    point_loss = get_loss(loss)
    schedule = schedule if schedule is not None else Schedule.every(1, steps)
    if schedule.total != steps:
        raise ValueError(f"schedule was built for {schedule.total} steps, training runs {steps}")
    recorders = dict(recorders or {})

    params = list(model.params.values())
    any_param = params[0]
    rates = member_values(lr, k, "lr", any_param.device, any_param.dtype)
    opt = StackedOptimizer(params, rates, "gd" if optimizer == "sgd" else optimizer, momentum=momentum,
                           betas=betas, eps=eps, weight_decay=weight_decay)
    x_member = _member_batch(x, k, data_ndim)
    y_member = x_member
    alive = torch.ones(k, dtype=torch.bool, device=any_param.device)
    diverged_at = np.full(k, -1, dtype=np.int64)

    def losses_on(xb: Tensor, yb: Tensor) -> Tensor:
        return point_loss(model(xb, generator=generator), yb).mean(-1)

    base = model.base
    in_place = optimizer in ("gd", "sgd") and not weight_decay  # the step updates the weights as it back-propagates
    fused = fused_step and model._stacked and getattr(
        base, "supports_fused_step" if in_place else "supports_fused_grads", False)
    fused_state: list[Any] = []
    plan = base.fused_plan(model.params) if fused else None
    closed_form = point_loss is mse_half
    unit_scale = torch.ones(k, dtype=any_param.dtype, device=any_param.device)  # autograd's d(Σ_k L_k)/dL_k
    factors: list[Any] = [None, 0, None]  # (scale, n, mse_half_output_factor(scale, n)) of the last step

    def output_grad(residual: Tensor, scale: Tensor) -> Tensor:
        """:func:`mse_half_output_grad`, its factor recomputed only when the scale (learning rates) or n change."""
        if factors[0] is not scale or factors[1] != residual.shape[-2]:
            factors[:] = [scale, residual.shape[-2], mse_half_output_factor(scale, residual.shape[-2])]
        return mse_half_output_grad(residual, factors[2])

    def step_losses(xb: Tensor, yb: Tensor) -> Tensor:
        """Member losses of a training step; the fused path keeps the forward cache and a graph of the loss
        head only (none for ½-MSE, whose output gradient it keeps instead: see :func:`mse_half_output_grad`)."""
        if not fused:
            return losses_on(xb, yb)
        out, cache = base.fused_gd_forward(plan, xb)
        if closed_form:
            residual = out - yb
            fused_state[:] = [residual, cache, out]
            return (0.5 * residual.pow(2).sum(-1)).mean(-1)
        out.requires_grad_()
        fused_state[:] = [out, cache, out.detach()]
        return point_loss(out, yb).mean(-1)

    member_rows = torch.arange(k, device=x.device).unsqueeze(1)

    @torch.no_grad()
    def record_all(step: int) -> None:
        """Every recorder at ``step``; a :class:`PassRecorder` of the full-batch inputs reads the fused step's own
        forward pass on them (taken at this step's parameters, before the update)."""
        for name, recorder in recorders.items():
            if fused and full_batch and isinstance(recorder, PassRecorder) and recorder.inputs is x:
                _, cache, out = fused_state
                value = recorder.from_pass(base.fused_taps(cache, out, recorder.layers))
            else:
                value = recorder(step, model)
            recorded[name].append(value.detach().clone())

    def select(t: Tensor, per_member: bool, idx: Tensor) -> Tensor:
        if idx.dim() == 2:  # (K, b) per-member indices
            return t[member_rows, idx] if per_member else t[idx]
        return t[:, idx] if per_member else t[idx]

    everyone = [True]  # whether every member is alive (``alive`` changes only in check and on a restore)

    def check(step: int, values: Tensor) -> None:
        if bool(torch.isfinite(values).all()):  # the common case in one reduction: no member has diverged
            return
        bad = ~torch.isfinite(values) & alive
        if bool(bad.any()):
            if on_divergence == "raise":
                raise Diverged(step)
            newly = bad.nonzero().flatten().tolist()
            diverged_at[newly] = step
            alive[bad] = False
            everyone[0] = False
            if not bool(alive.any()):
                raise Diverged(step)
            opt.set_lr(torch.where(alive, rates, torch.zeros_like(rates)))

    recorded_steps: list[int] = []
    recorded_loss: list[Tensor] = []
    recorded: dict[str, list[Tensor]] = {name: [] for name in recorders}
    order = torch.empty(0, dtype=torch.long)
    cursor = 0
    step = first = 0
    checkpoints = checkpoint.current()
    slot = checkpoints.next_loop() if checkpoints is not None else -1
    saved = checkpoints.load(slot) if checkpoints is not None else None
    if saved is not None:
        model.restore(saved["model"])
        checkpoint.restore_rng(saved["rng"], generator)
        if "result" in saved:  # this loop finished before the run was interrupted
            return saved["result"]
        opt.load_state_dict(saved["optimizer"])
        recorded_steps, recorded_loss, recorded = saved["recorded_steps"], saved["recorded_loss"], saved["recorded"]
        order, cursor, first = saved["order"], saved["cursor"], saved["step"]
        alive.copy_(saved["alive"])
        everyone[0] = bool(alive.all())
        diverged_at[:] = saved["diverged_at"]
    model.train()
    for step in range(first, steps + 1):
        if checkpoints is not None and step > first and checkpoints.due():
            checkpoints.save(slot, {
                "step": step, "model": model.snapshot(), "optimizer": opt.state_dict(),
                "rng": checkpoint.rng_state(generator), "recorded_steps": list(recorded_steps),
                "recorded_loss": list(recorded_loss), "recorded": {n: list(v) for n, v in recorded.items()},
                "order": order.clone(), "cursor": cursor, "alive": alive.clone(), "diverged_at": diverged_at.copy()})
        record = step in schedule
        if full_batch:
            batch_loss = step_losses(x, y)
            current = batch_loss.detach()
            report(step, steps, current)
        else:
            report(step, steps)
            if record or stop_loss is not None or stop is not None:
                model.eval()
                with torch.no_grad():
                    current = losses_on(x, y)
                model.train()
            if step < steps:
                if cursor + batch_size > n or step == 0:
                    on = generator.device
                    order = (torch.argsort(torch.rand(k, n, generator=generator, device=on), dim=1)
                             if independent_batches else torch.randperm(n, generator=generator, device=on)
                             ).to(x.device)
                    cursor = 0
                idx = order[..., cursor:cursor + batch_size]
                cursor += batch_size
                batch_loss = step_losses(select(x, x_member, idx), select(y, y_member, idx))
                check(step, batch_loss.detach())
        if full_batch or record or stop_loss is not None or stop is not None:
            check(step, current)
        if record:
            recorded_steps.append(step)
            recorded_loss.append(current.clone())
            record_all(step)
        if step == steps:
            break
        done = (stop_loss is not None and bool((current[alive] <= stop_loss).all())) or (
            stop is not None and stop(step, current))
        if done:
            if not record:  # the last state is always recorded
                recorded_steps.append(step)
                recorded_loss.append(current.clone())
                record_all(step)
            break
        scale = opt.loss_scale
        if fused:  # ∂L/∂output from the fused forward pass, then the hand-written back-propagation
            head, cache, _ = fused_state
            if closed_form:
                grad_out = output_grad(head, unit_scale if scale is None else scale)
            else:
                (grad_out,) = torch.autograd.grad(_weighted_sum(batch_loss, scale), head)
            if in_place:
                if not everyone[0]:
                    grad_out = torch.where(alive.view(-1, 1, 1), grad_out, torch.zeros_like(grad_out))
                base.fused_gd_update(plan, cache, grad_out)
                continue
            found = base.fused_grads(plan, cache, grad_out)  # the gradients themselves (Adam, momentum)
            grads = [found[name] for name in model.params]
        else:
            grads = torch.autograd.grad(_weighted_sum(batch_loss, scale), params)
        if not everyone[0]:
            grads = [torch.where(alive.view(-1, *([1] * (g.dim() - 1))), g, torch.zeros_like(g)) for g in grads]
        if scale is not None:
            opt.step_prescaled(grads)
        else:
            opt.step(grads)

    result = TrainResult(
        steps=np.array(recorded_steps, dtype=np.int64),
        loss=torch.stack(recorded_loss).cpu().numpy(),
        records={name: torch.stack(v).cpu().numpy() for name, v in recorded.items()},
        diverged=diverged_at >= 0,
        diverged_at=diverged_at,
        stopped_at=step,
    )
    if checkpoints is not None and checkpoints.due():
        checkpoints.save(slot, {"result": result, "model": model.snapshot(), "rng": checkpoint.rng_state(generator)})
    return result


def _weighted_sum(losses: Tensor, scale: Tensor | None) -> Tensor:
    """Σ_k of the member losses (K,), each weighted by the optimiser's loss scale where it has one."""
    return losses.sum() if scale is None else (losses * scale).sum()
