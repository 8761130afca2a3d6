"""Optimisers on stacked parameters (leading dim K) with a per-member learning rate.

Each update is, member by member, the update of the corresponding ``torch.optim`` optimiser (plain SGD, SGD with
momentum and no dampening/Nesterov, Adam without AMSGrad); weight decay is added to the gradient as in
``torch.optim``. Full-batch gradient descent is "gd" (SGD on the whole training set).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

OPTIMIZERS = ("gd", "sgd", "momentum", "adam")


def member_values(value: float | Sequence[float] | Tensor, k: int, name: str, device: torch.device,
                  dtype: torch.dtype) -> Tensor:
    """A scalar or K per-member values as a (K,) tensor."""
    t = torch.as_tensor(value, dtype=dtype, device=device)
    if t.dim() == 0:
        t = t.expand(k).clone()
    if t.shape != (k,):
        raise ValueError(f"{name} must be a scalar or have one value per member (K={k}), got shape {tuple(t.shape)}")
    return t


class StackedOptimizer:
    """Updates a list of stacked parameters in place with per-member learning rates ``lr`` of shape (K,)."""

    def __init__(
        self,
        params: Sequence[Tensor],
        lr: Tensor,
        kind: str = "gd",
        *,
        momentum: float = 0.9,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        if kind not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {kind!r}; allowed: {', '.join(OPTIMIZERS)}")
        if kind == "momentum" and not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.params = list(params)
        self.kind = kind
        self.momentum = momentum
        self.betas = betas
        self.eps = eps
        self.weight_decay = weight_decay
        self.t = 0
        self.set_lr(lr)
        self.state: list[tuple[Tensor, ...]] = []
        self._scratch: list[tuple[Tensor, Tensor]] = []  # Adam's two temporaries per parameter, reused every step

    def state_dict(self) -> dict:
        """What a checkpoint needs to continue bit for bit: step count, per-member rates, moment buffers."""
        return {"t": self.t, "rates": self.rates.clone(), "state": [tuple(b.clone() for b in s) for s in self.state]}

    @torch.no_grad()
    def load_state_dict(self, saved: dict) -> None:
        self.t = saved["t"]
        self.set_lr(saved["rates"].to(self.rates.device))
        self.state = [tuple(b.to(p.device) for b in s) for s, p in zip(saved["state"], self.params)]

    def set_lr(self, lr: Tensor) -> None:
        """Per-member learning rates (K,), broadcast to every parameter's shape."""
        self.rates = lr
        self.lr = [lr.view(-1, *([1] * (p.dim() - 1))) for p in self.params]

    @property
    def loss_scale(self) -> Tensor | None:
        """For (momentum) gradient descent without weight decay, the (K,) weights to put on the member losses so
        that back-propagation returns lr-scaled gradients for :meth:`step_prescaled` (one cheap multiply on K
        numbers instead of a broadcast multiply over every parameter); None for the other optimisers."""
        return self.rates if self.kind != "adam" and not self.weight_decay else None

    @torch.no_grad()
    def step_prescaled(self, scaled_grads: Sequence[Tensor]) -> None:
        """The same update as :meth:`step` from gradients already multiplied by the per-member learning rate
        (the gradients of Σ_k loss_scale_k·L_k): p −= lr·g for gradient descent, and for momentum
        buf ← μ·buf + lr·g, p −= buf (= lr·(μ·buf_g + g) with a constant lr, PyTorch's update)."""
        if self.loss_scale is None:
            raise ValueError(f"optimizer {self.kind!r} with weight decay {self.weight_decay} cannot take "
                             "prescaled gradients")
        self.t += 1
        if self.kind == "momentum":
            if not self.state:
                self.state = [(g.clone(),) for g in scaled_grads]
            else:
                torch._foreach_mul_([buf for (buf,) in self.state], self.momentum)
                torch._foreach_add_([buf for (buf,) in self.state], list(scaled_grads))
            scaled_grads = [buf for (buf,) in self.state]
        torch._foreach_sub_(self.params, list(scaled_grads))

    @torch.no_grad()
    def step(self, grads: Sequence[Tensor]) -> None:
        self.t += 1
        if self.weight_decay:
            grads = [g + self.weight_decay * p for p, g in zip(self.params, grads, strict=True)]
        if self.kind in ("gd", "sgd"):
            for p, g, lr in zip(self.params, grads, self.lr, strict=True):
                p.addcmul_(lr, g, value=-1.0)
        elif self.kind == "momentum":
            if not self.state:
                self.state = [(g.clone(),) for g in grads]
            else:
                for (buf,), g in zip(self.state, grads, strict=True):
                    buf.mul_(self.momentum).add_(g)
            for p, (buf,), lr in zip(self.params, self.state, self.lr, strict=True):
                p.addcmul_(lr, buf, value=-1.0)
        else:
            beta1, beta2 = self.betas
            if not self.state:
                self.state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in self.params]
            if not self._scratch:
                self._scratch = [(torch.empty_like(p), torch.empty_like(p)) for p in self.params]
            correction1 = 1.0 - beta1**self.t
            root_correction2 = (1.0 - beta2**self.t) ** 0.5
            for p, g, (m, v), lr, (denom, step) in zip(self.params, grads, self.state, self.lr, self._scratch,
                                                       strict=True):
                m.lerp_(g, 1.0 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
                torch.sqrt(v, out=denom).div_(root_correction2).add_(self.eps)
                p.addcdiv_(torch.mul(m, lr / correction1, out=step), denom, value=-1.0)
