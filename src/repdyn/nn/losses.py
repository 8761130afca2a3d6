"""Per-point losses for batched predictions.

Every loss maps predictions of shape (..., n, d_out) and targets to per-point losses of shape (..., n); the
training loop averages over points. The leading dims are the ensemble's K (or absent for a single model).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

PointLoss = Callable[[Tensor, Tensor], Tensor]


def mse_half(pred: Tensor, target: Tensor) -> Tensor:
    """½‖y − ŷ‖² per point, the convention of Eq. (1) of seed 000: its mean over points is
    L = ½⟨‖f(x_i) − y_i‖²⟩. (``torch.nn.MSELoss(reduction='mean')`` is (2/d_out)·L, spec 000 §2.5.)"""
    return 0.5 * (pred - target).pow(2).sum(-1)


def mse_half_output_factor(scale: Tensor, n: int) -> Tensor:
    """The factor scale_k/n (K, 1, 1) of :func:`mse_half_output_grad` for ``n`` points: a training loop computes it
    once per learning-rate change instead of every step."""
    return (scale / n).view(-1, 1, 1)


def mse_half_output_grad(residual: Tensor, factor: Tensor) -> Tensor:
    """∂/∂ŷ of Σ_k scale_k·mean_i ½‖ŷ_ki − y_ki‖² from the residual ŷ − y (K, n, d_out) and
    ``factor`` = :func:`mse_half_output_factor` (scale, n): scale_k/n × residual, bit for bit what autograd returns
    through :func:`mse_half` (its factors 0.5 and 2 are exact), without building a graph: the training loop's fused
    step for the ½-MSE."""
    return residual * factor


def _margins(pred: Tensor, target: Tensor) -> Tensor:
    if pred.shape[-1] != 1:
        raise ValueError(f"hinge losses need a scalar output (d_out = 1), got predictions of shape {tuple(pred.shape)}")
    target = target.squeeze(-1) if target.dim() == pred.dim() else target
    return target * pred.squeeze(-1)


def hinge_of_margins(margins: Tensor) -> Tensor:
    """max(0, 1 − z) of each margin z = y·f (spec 003 §2.3): the hinge every hinge loss of repdyn is built from."""
    return (1.0 - margins).clamp_min(0.0)


def softplus_hinge(margins: Tensor, beta: float) -> Tensor:
    """softplus(β(1 − z)) of each margin z: β times the smooth hinge, which tends to the hinge as β → ∞."""
    return F.softplus(beta * (1.0 - margins))


def hinge(pred: Tensor, target: Tensor) -> Tensor:
    """max(0, 1 − y·f) per point, labels y = ±1, margin fixed at 1 (spec 003 §2.3)."""
    return hinge_of_margins(_margins(pred, target))


def soft_hinge(pred: Tensor, target: Tensor, beta: float = 20.0) -> Tensor:
    """softplus(β(1 − y·f))/β per point, the smooth hinge of seed 003's code (default β = 20, spec 003 §2.3)."""
    return softplus_hinge(_margins(pred, target), beta) / beta


def cross_entropy(pred: Tensor, target: Tensor) -> Tensor:
    """−log softmax(logits)[label] per point; ``target`` holds integer class labels of shape (..., n)."""
    if target.dtype.is_floating_point:
        raise ValueError("cross_entropy needs integer class labels, got a floating-point target")
    logp = torch.log_softmax(pred, dim=-1)
    target = target.expand(pred.shape[:-1])
    return -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)


LOSSES: dict[str, PointLoss] = {
    "mse": mse_half,
    "hinge": hinge,
    "soft_hinge": soft_hinge,
    "cross_entropy": cross_entropy,
}


def get_loss(loss: str | PointLoss) -> PointLoss:
    """A per-point loss by name (``"mse"`` is ½‖y − ŷ‖²) or a callable with the same contract."""
    if callable(loss):
        return loss
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; allowed: {', '.join(LOSSES)} or a callable (pred, target) -> (.., n)")
    return LOSSES[loss]
