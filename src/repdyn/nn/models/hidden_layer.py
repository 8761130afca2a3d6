"""The one-hidden-layer network of seed 003 (Eq. 1), S trials stacked on a leading axis.

f(x) = (1/h) Σ_n β_n σ(ω_n·x/√d + b_n), σ(u) = √2 max(0, u), all weights N(0, 1) (b included, spec 003 P6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["SQRT2", "HiddenLayerModule", "HiddenLayerNet", "hidden_layer_output", "init_hidden_layer", "preact",
           "stack_params", "unstack_params"]

SQRT2 = math.sqrt(2.0)
"""The gain √2 of σ(u) = √2 max(0, u)."""


@dataclass
class HiddenLayerNet:
    """Stacked weights of S networks: w (S, h, d), b (S, h), beta (S, h)."""

    w: torch.Tensor
    b: torch.Tensor
    beta: torch.Tensor

    def clone(self) -> HiddenLayerNet:
        return HiddenLayerNet(self.w.clone(), self.b.clone(), self.beta.clone())

    def flat(self) -> torch.Tensor:
        """(S, h d + 2 h) view of all parameters of each trial."""
        return torch.cat([self.w.flatten(1), self.b, self.beta], dim=1)


class HiddenLayerModule(nn.Module):
    """One trial of a :class:`HiddenLayerNet` as an ``nn.Module`` (f of Eq. 1), for the model-agnostic probes."""

    def __init__(self, net: HiddenLayerNet, trial: int = 0) -> None:
        super().__init__()
        self.w = nn.Parameter(net.w[trial].detach().clone())
        self.b = nn.Parameter(net.b[trial].detach().clone())
        self.beta = nn.Parameter(net.beta[trial].detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = x @ self.w.T / math.sqrt(self.w.shape[1]) + self.b
        return SQRT2 * torch.relu(u) @ self.beta / self.w.shape[0]


def init_hidden_layer(n_trials: int, h: int, d: int, generator: torch.Generator,
                      dtype: torch.dtype = torch.float64, device: str = "cpu") -> HiddenLayerNet:
    """All weights i.i.d. N(0, 1) (seed 003 §2.2), ``n_trials`` independent networks."""
    if min(n_trials, h, d) < 1:
        raise ValueError(f"need n_trials, h, d >= 1, got {n_trials}, {h}, {d}")
    w = torch.randn(n_trials, h, d, generator=generator, dtype=dtype)
    b = torch.randn(n_trials, h, generator=generator, dtype=dtype)
    beta = torch.randn(n_trials, h, generator=generator, dtype=dtype)
    return HiddenLayerNet(w.to(device), b.to(device), beta.to(device))


def preact(net: HiddenLayerNet, x: torch.Tensor) -> torch.Tensor:
    """The pre-activations ω_n·x/√d + b_n of x (S, n, d), (S, n, h)."""
    return torch.baddbmm(net.b.unsqueeze(1), x, net.w.transpose(1, 2), alpha=1 / math.sqrt(net.w.shape[-1]))


def hidden_layer_output(net: HiddenLayerNet, x: torch.Tensor) -> torch.Tensor:
    """f(x) of Eq. (1) for x (S, n, d) → (S, n)."""
    u = preact(net, x)
    return SQRT2 * torch.einsum("snh,sh->sn", u.clamp_min(0), net.beta) / net.w.shape[1]


def stack_params(net: HiddenLayerNet) -> torch.Tensor:
    """Every neuron's parameters as one (S, h, d + 2) tensor (ω, b, β): the θ that
    :func:`repdyn.nn.gradient_flow.train_gradient_flow` integrates and the layout of its traced neurons."""
    return torch.cat([net.w, net.b.unsqueeze(-1), net.beta.unsqueeze(-1)], dim=-1)


def unstack_params(theta: torch.Tensor) -> HiddenLayerNet:
    """The network whose parameters :func:`stack_params` stacked into θ (S, h, d + 2)."""
    d = theta.shape[-1] - 2
    return HiddenLayerNet(theta[..., :d].contiguous(), theta[..., d].contiguous(), theta[..., d + 1].contiguous())
