"""Frozen-kernel learning: hinge-loss gradient flow on the dual coefficients of a fixed Gram matrix (spec 003 §2.7),
a step rule of :func:`repdyn.nn.driver.drive` with the adaptive Euler controller of spec 003 §2.4."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from repdyn.nn.driver import AdaptiveEuler, StepRule, drive
from repdyn.nn.trajectory import Trajectory

__all__ = ["KernelFlowResult", "kernel_hinge_flow"]


@dataclass
class KernelFlowResult:
    """Dual coefficients a (S, p) with F = K a, integrated time and convergence per trial; trajectory: the steps taken
    (``stopped_at``, accepted and rejected), no series recorded."""

    coefficients: Tensor
    time: Tensor
    converged: Tensor
    trajectory: Trajectory


class _KernelFlow(StepRule):
    """The step rule of :func:`kernel_hinge_flow`: one tentative Euler step of every running trial, judged by the
    controller; a trial runs while a margin is below 1."""

    what = "output"

    def __init__(self, gram: Tensor, y: Tensor, controller: AdaptiveEuler) -> None:
        self.gram, self.y, self.controller = gram, y, controller
        self.a = torch.zeros_like(y)
        self.out = torch.zeros_like(y)
        self.dt = torch.ones(y.shape[0], dtype=y.dtype, device=y.device)
        self.t = torch.zeros_like(self.dt)
        self.da = self.direction(self.out)
        self.v = torch.einsum("spq,sq->sp", gram, self.da)
        self.active = (y * self.out < 1).any(dim=1)
        self.last_rejected = torch.full_like(self.dt, math.inf)

    def direction(self, out: Tensor) -> Tensor:
        """ȧ = (1/p) y Θ(1 − y F)."""
        return self.y * (self.y * out < 1).to(self.y.dtype) / self.y.shape[1]

    def step(self, step: int, due: tuple[str, ...]) -> None:
        y, dt, out, v = self.y, self.dt, self.out, self.v
        a_new = self.a + dt[:, None] * self.da
        out_new = out + dt[:, None] * v
        da_new = self.direction(out_new)
        v_new = torch.einsum("spq,sq->sp", self.gram, da_new)
        norms = v.norm(dim=1) * v_new.norm(dim=1)
        dgrad = torch.where(norms > 0, (v - v_new).pow(2).sum(dim=1) / norms.clamp_min(1e-300),
                            torch.zeros_like(norms))
        dout = (dt[:, None] * v).abs().amax(dim=1)
        margin_event = ((y * out_new < 1) != (y * out < 1)).any(dim=1)
        verdict = self.controller.decide(dgrad, dout, self.active, self.last_rejected, margin_event)
        self.last_rejected = verdict.last_rejected
        accept = verdict.accept
        self.t = torch.where(accept, self.t + dt, self.t)
        sel = accept[:, None]
        self.a = torch.where(sel, a_new, self.a)
        self.out = torch.where(sel, out_new, out)
        self.da = torch.where(sel, da_new, self.da)
        self.v = torch.where(sel, v_new, v)
        self.dt = self.controller.next_dt(dt, verdict)
        self.active = (y * self.out < 1).any(dim=1)

    def finite(self) -> bool:
        return True  # a step moves F by less than max_dout: a finite Gram matrix keeps every value finite

    def first_bad_step(self, step: int) -> int:
        return step

    def done(self) -> bool:
        return not bool(self.active.any())

    _STATE = ("a", "out", "dt", "t", "da", "v", "active", "last_rejected")

    def state(self) -> dict[str, Any]:
        return {name: getattr(self, name).clone() for name in self._STATE}

    def load(self, state: dict[str, Any]) -> None:
        for name in self._STATE:
            setattr(self, name, state[name].to(self.y.device))

    def result(self, steps: int) -> KernelFlowResult:
        return KernelFlowResult(self.a, self.t, ~self.active, Trajectory(np.zeros(0, dtype=np.int64), {}, steps))

    def final(self) -> dict[str, Any]:
        return {}

    def restore(self, final: dict[str, Any]) -> None:
        pass


def kernel_hinge_flow(gram: Tensor, y: Tensor, max_dgrad: float = 1e-4, max_dout: float = 0.1,
                      max_steps: int = 100_000) -> KernelFlowResult:
    """Hinge-loss gradient flow with a frozen Gram matrix, batched over trials (spec 003 §2.7, P13).

    Not an SVM and not ridge: F = K a with a(0) = 0 and ȧ_μ = (1/p) y_μ Θ(1 − y_μ F_μ) (Eq. 3 with Θ
    frozen, α = 1 since for the hinge α only rescales time). Adaptive Euler of spec 003 §2.4 with the
    kernel variant: the function-space step v = K ȧ, dgrad = ‖v − v_new‖²/(‖v‖‖v_new‖), dout = max|dt v|;
    accept if both are below threshold, dt ×1.1 if both are below 0.1× threshold, else reject and dt ÷10,
    with the jump rule of :func:`repdyn.nn.gradient_flow.train_gradient_flow`: v is piecewise constant and
    jumps when a point crosses its margin, so a step with a margin event is judged by dout alone
    (:class:`~repdyn.nn.driver.AdaptiveEuler` with calm = 0.1). Each trial stops when every margin y F ≥ 1 (zero
    training hinge loss) or at ``max_steps`` iterations. Run by :func:`repdyn.nn.driver.drive` (checkpoints,
    progress).

    gram: (S, p, p) or (p, p); y: (S, p) or (p,) with entries ±1.
    """
    single = gram.dim() == 2
    if single:
        gram, y = gram.unsqueeze(0), y.unsqueeze(0)
    if gram.shape[-1] != gram.shape[-2] or gram.shape[:-1] != y.shape:
        raise ValueError(f"gram {tuple(gram.shape)} and labels {tuple(y.shape)} do not match")
    if max_dgrad <= 0 or max_dout <= 0:
        raise ValueError(f"max_dgrad={max_dgrad} and max_dout={max_dout} must be > 0")
    controller = AdaptiveEuler(max_dgrad=max_dgrad, max_dout=max_dout, calm=0.1, grow=1.1, shrink=10.0, jumps=True)
    result = drive(_KernelFlow(gram, y, controller), max_steps, capped=True)
    if single:
        result = KernelFlowResult(result.coefficients[0], result.time[0], result.converged[0], result.trajectory)
    return result
