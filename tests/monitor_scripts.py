"""The three kinds of training script a new user writes from the README, at test size:

- ``mlp``: an MLP on Gaussian blobs, cross-entropy and Adam;
- ``resnet``: a small ResNet with BatchNorm and Dropout on 8x8 images, SGD with a OneCycle schedule;
- ``transformer``: a 2-layer ``nn.TransformerEncoder`` on integer token ids, read at nested layer names.

Each kind gives its model, data, probe set, the layers to read and one optimiser step, so the same script runs
in a plain loop (as the README shows it), under the Lightning callback and under the Hugging Face callback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

CLASSES = 4
KINDS = ("mlp", "resnet", "transformer")


class Block(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class ResNet(nn.Module):
    def __init__(self, channels: int = 6) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels),
                                  nn.ReLU())
        self.blocks = nn.Sequential(Block(channels), Block(channels))
        self.dropout = nn.Dropout(0.2)
        self.head = nn.Linear(channels, CLASSES)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.dropout(self.blocks(self.stem(x)).mean((2, 3))))


class TokenClassifier(nn.Module):
    def __init__(self, vocab: int = 12, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, 2, 32, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.head(self.encoder(self.embed(tokens)).mean(1))


@dataclass
class Script:
    kind: str
    model: nn.Module
    x: Tensor
    y: Tensor
    probe_x: Tensor
    probe_y: Tensor
    layers: list[str]
    select: dict[str, Any]
    lr: float

    def optimizer(self, params: Any) -> torch.optim.Optimizer:
        if self.kind == "resnet":
            return torch.optim.SGD(params, lr=self.lr, momentum=0.9)
        return torch.optim.Adam(params, lr=self.lr)

    def scheduler(self, optimizer: torch.optim.Optimizer, steps: int) -> Any:
        if self.kind != "resnet":
            return None
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=self.lr, total_steps=steps)


def _data(kind: str, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    y = torch.arange(n) % CLASSES
    if kind == "mlp":
        centres = torch.randn(CLASSES, 8, generator=generator) * 2
        return centres[y] + torch.randn(n, 8, generator=generator), y
    if kind == "resnet":
        patterns = torch.randn(CLASSES, 1, 8, 8, generator=generator)
        return patterns[y] + 0.5 * torch.randn(n, 1, 8, 8, generator=generator), y
    tokens = torch.randint(0, 12, (n, 6), generator=generator)
    tokens[:, 0] = y + 4 * torch.randint(0, 2, (n,), generator=generator)  # the class is the first token mod 4
    return tokens, y


def make(kind: str, seed: int = 0) -> Script:
    """A fresh model (seeded) with its data and probe set."""
    torch.manual_seed(seed)
    if kind == "mlp":
        model: nn.Module = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                                         nn.Linear(32, CLASSES))
        layers, select, lr = ["1", "3"], {}, 1e-2
    elif kind == "resnet":
        model, layers, select, lr = ResNet(), ["stem", "blocks.0", "blocks.1"], {}, 0.05
    else:
        model, lr = TokenClassifier(), 3e-3
        layers = ["embed", "encoder.layers.0.self_attn", "encoder.layers.0", "encoder.layers.1"]
        select = {"encoder.layers.0.self_attn": 0}
    g = torch.Generator().manual_seed(seed + 1)
    x, y = _data(kind, 96, g)
    probe_x, probe_y = _data(kind, 24, g)
    return Script(kind, model, x, y, probe_x, probe_y, layers, select, lr)


def batches(script: Script, epochs: int, batch_size: int = 32, seed: int = 0) -> list[Tensor]:
    """The index batches of ``epochs`` shuffled epochs (a fixed order, the same for every run)."""
    g = torch.Generator().manual_seed(seed)
    return [b for _ in range(epochs) for b in torch.randperm(len(script.y), generator=g).split(batch_size)]


def plain_loop(script: Script, epochs: int, monitor_kwargs: dict[str, Any] | None) -> Any:
    """The README's loop: ``monitor.step(step)`` before each update, ``monitor.save`` after the loop. Returns
    the Monitor (or None without one); the model is trained in place."""
    from repdyn import Monitor

    order = batches(script, epochs)
    steps = len(order)
    optimizer = script.optimizer(script.model.parameters())
    scheduler = script.scheduler(optimizer, steps)
    monitor = None
    if monitor_kwargs is not None:
        monitor = Monitor(script.model, script.layers, script.probe_x, script.probe_y, total_steps=steps,
                          loss_kind="cross_entropy", select=script.select, **monitor_kwargs)
    torch.manual_seed(7)  # dropout draws from the global generator: the Monitor must not
    for step in range(steps):
        if monitor is not None:
            monitor.step(step)
        batch = order[step]
        loss = F.cross_entropy(script.model(script.x[batch]), script.y[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    return monitor


class Residual(nn.Module):
    """A_l = A_{l-1} + V_l relu(A_{l-1}) + b_l (two blocks), then the identity read-out: outputs = A_2ᵀ."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.blocks = nn.ModuleList([nn.Linear(3, 3) for _ in range(2)])
        self.stream = nn.ModuleList([nn.Identity() for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.stream[0](x)
        for block, out in zip(self.blocks, self.stream[1:]):
            a = out(a + block(torch.relu(a)))
        return a
