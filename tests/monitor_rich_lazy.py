"""A rich/lazy pair whose regime is known by construction: a small ReLU MLP on the digits 0-3, trained by full-batch
gradient descent on the squared error from a small initialisation (rich: the weights move several times their
initial norm) and as the centred model f = α(g − g₀) with α = 100 and the step scaled by 1/α² (lazy: Chizat,
Oyallon & Bach 2019; the weights barely move). ``train`` runs one with the Monitor attached in the README's loop."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor, nn

from repdyn.data.digits import load_digits
from repdyn.monitor import Monitor

STEPS = 200
RICH_LR = 1.0
CLASSES = 4


class Centred(nn.Module):
    """f(x) = α (g(x) − g₀(x)), g₀ a frozen copy of g at initialisation: exactly 0 at step 0."""

    def __init__(self, net: nn.Module, alpha: float) -> None:
        super().__init__()
        self.net = net
        self.initial = copy.deepcopy(net).requires_grad_(False)
        self.alpha = alpha

    def forward(self, x: Tensor) -> Tensor:
        return self.alpha * (self.net(x) - self.initial(x))


def data(n: int = 300) -> tuple[Tensor, Tensor]:
    x, y = load_digits(n, classes=tuple(range(CLASSES)))
    return torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y)


def probe(x: Tensor, y: Tensor, per_class: int = 4) -> tuple[Tensor, Tensor]:
    index = torch.cat([(y == c).nonzero().flatten()[:per_class] for c in range(CLASSES)])
    return x[index], y[index]


def model(regime: str, seed: int = 0) -> tuple[nn.Module, list[str], float]:
    """(model, its layers to read, learning rate)."""
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    if regime == "rich":
        with torch.no_grad():
            for p in net.parameters():
                p.mul_(0.2)
        return net, ["1", "3"], RICH_LR
    if regime == "lazy":
        alpha = 100.0
        return Centred(net, alpha), ["net.1", "net.3"], 0.5 / alpha**2
    raise ValueError(regime)


def train(regime: str, root: Any, steps: int = STEPS, **monitor_kwargs: Any) -> tuple[Monitor, Any]:
    """Train one run of the pair with the Monitor in the README's loop; (monitor, saved path)."""
    x, y = data()
    px, py = probe(x, y)
    net, layers, lr = model(regime)
    targets = nn.functional.one_hot(y, CLASSES).float()
    optimizer = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=lr)
    kwargs = {"total_steps": steps, "loss_kind": "squared_error", "name": regime, "ntk_points": 20, **monitor_kwargs}
    monitor = Monitor(net, layers, px, py, **kwargs)
    for step in range(steps):
        loss = 0.5 * (net(x) - targets).pow(2).sum(1).mean()
        monitor.step(step, loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return monitor, monitor.save(root)
