"""The LeNet-style classifier of seed 004 (the paper's "AlexNet variant", spec 004 §3.4).

Architecture (reference code ``SimpleConv``): Conv2d(C_in→6, 5×5) → ReLU → MaxPool 2 → Conv2d(6→16, 5×5) → ReLU →
MaxPool 2 → flatten (400) → Linear 120 → ReLU → Linear 84 → ReLU → Linear K (the logits). PyTorch's default
initialisation, U(−1/√fan_in, 1/√fan_in) for weights and biases, drawn from an explicit generator.

Trials are the members of a :class:`repdyn.nn.ensemble.Ensemble` (:func:`lenet_ensemble`); ``LeNet.forward_stacked``
gives it a fast stacked-weight path (``unfold`` + batched matmuls, ~2× faster than ``vmap`` over conv2d on CPU).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from repdyn.nn.ensemble import Ensemble

__all__ = ["SHARED_GROUP", "LeNet", "lenet_ensemble"]


def _default_init_(module: nn.Conv2d | nn.Linear, generator: torch.Generator | None) -> None:
    """PyTorch's default init (kaiming_uniform with a = √5, i.e. U(±1/√fan_in), and the same bound for the bias)."""
    fan_in = module.weight[0].numel()
    bound = 1.0 / math.sqrt(fan_in)
    with torch.no_grad():
        nn.init.uniform_(module.weight, -bound, bound, generator=generator)
        nn.init.uniform_(module.bias, -bound, bound, generator=generator)


class LeNet(nn.Module):
    """LeNet-5 variant of spec 004 §3.4 for (n, C_in, 32, 32) images. Layer names: conv1, conv2, fc1, fc2, output
    (activations after ReLU/pooling for the convolutions, after ReLU for fc1 and fc2; the logits for output)."""

    input_ndim = 4

    def __init__(self, in_channels: int = 1, n_classes: int = 3, *, generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float64) -> None:
        super().__init__()
        if in_channels < 1 or n_classes < 2:
            raise ValueError(f"need in_channels >= 1 and n_classes >= 2, got {in_channels}, {n_classes}")
        self.conv1 = nn.Conv2d(in_channels, 6, 5, dtype=dtype)
        self.conv2 = nn.Conv2d(6, 16, 5, dtype=dtype)
        self.fc1 = nn.Linear(16 * 5 * 5, 120, dtype=dtype)
        self.fc2 = nn.Linear(120, 84, dtype=dtype)
        self.output = nn.Linear(84, n_classes, dtype=dtype)
        for module in (self.conv1, self.conv2, self.fc1, self.fc2, self.output):
            _default_init_(module, generator)
        self.pool = nn.MaxPool2d(2)
        self.relu = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-2:] != (32, 32):
            raise ValueError(f"LeNet expects 32×32 images, got {tuple(x.shape[-2:])}")
        h = self.pool(self.relu(self.conv1(x)))
        h = self.pool(self.relu(self.conv2(h)))
        h = self.relu(self.fc1(h.flatten(-3)))
        h = self.relu(self.fc2(h))
        return self.output(h)

    def layer_names(self) -> list[str]:
        return ["conv1", "conv2", "fc1", "fc2", "output"]

    def forward_stacked(self, params: Mapping[str, Tensor], x: Tensor, taps: Collection[str] = (),
                        generator: torch.Generator | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        """R networks at once from stacked parameters (leading dim R): each convolution is an ``unfold`` and a
        batched matmul, the fast path :class:`Ensemble` uses. ``x`` is (n, C, 32, 32) shared or (R, n, C, 32, 32).
        Returns (R, n, K) logits and the tapped layers, each (R, n, ...); same function as :meth:`forward`."""
        R = params["conv1.weight"].shape[0]
        if x.dim() == 4 and not taps:
            return self._shared_input(params, x), {}
        if x.dim() == 4:
            x = x.unsqueeze(0).expand(R, *x.shape)
        n = x.shape[1]
        found: dict[str, Tensor] = {}

        def conv(name: str, h: Tensor) -> Tensor:                       # h (R, n, C, H, W)
            w, b = params[f"{name}.weight"], params[f"{name}.bias"]     # (R, O, C, k, k), (R, O)
            _, out_ch, _, k, _ = w.shape
            side = h.shape[-1] - k + 1
            cols = F.unfold(h.reshape(R * n, *h.shape[2:]), k)          # (R n, C k k, side²)
            cols = cols.reshape(R, n, -1, side * side).transpose(1, 2).reshape(R, cols.shape[1], n * side * side)
            z = torch.baddbmm(b.unsqueeze(-1), w.reshape(R, out_ch, -1), cols)
            z = z.reshape(R, out_ch, n, side, side).transpose(1, 2)
            return F.max_pool2d(F.relu(z).reshape(R * n, out_ch, side, side), 2).reshape(R, n, out_ch,
                                                                                          side // 2, side // 2)

        def linear(name: str, h: Tensor) -> Tensor:
            return torch.baddbmm(params[f"{name}.bias"].unsqueeze(1), h,
                                 params[f"{name}.weight"].transpose(1, 2))

        h = conv("conv1", x)
        found["conv1"] = h
        h = conv("conv2", h)
        found["conv2"] = h
        h = F.relu(linear("fc1", h.reshape(R, n, -1)))
        found["fc1"] = h
        h = F.relu(linear("fc2", h))
        found["fc2"] = h
        out = linear("output", h)
        found["output"] = out
        return out, {name: found[name] for name in taps}

    @staticmethod
    def _shared_input(params: Mapping[str, Tensor], x: Tensor) -> Tensor:
        """(R, n, K) logits of R networks on the same images ``x`` (n, C, 32, 32): for SHARED_GROUP networks at a
        time, the first convolution of all of them at once (their filters stacked as output channels), the second a
        grouped convolution (one group per network); each pooling before its ReLU (max commutes with it), as the
        maximum of the four strided entries of its windows (:func:`_pool2x2`). About 5× faster than the ``unfold``
        path on CPU (validation and the untrained control's logits); the groups and the pooling cut its time by
        about half again, with the same values bit for bit (tests/nn/models/test_lenet.py)."""
        R, n = params["conv1.weight"].shape[0], len(x)
        features = []
        for first in range(0, R, SHARED_GROUP):
            group = slice(first, min(first + SHARED_GROUP, R))
            w1, w2 = params["conv1.weight"][group], params["conv2.weight"][group]
            r = len(w1)
            h = F.conv2d(x, w1.reshape(r * w1.shape[1], *w1.shape[2:]), params["conv1.bias"][group].reshape(-1))
            h = _pool2x2(h).relu_()                                                 # (n, r·6, 14, 14)
            h = F.conv2d(h, w2.reshape(r * w2.shape[1], *w2.shape[2:]), params["conv2.bias"][group].reshape(-1),
                         groups=r)
            features.append(_pool2x2(h).relu_().reshape(n, r, -1).transpose(0, 1))  # (r, n, 400)
        h = torch.cat(features)
        for name in ("fc1", "fc2", "output"):
            h = torch.baddbmm(params[f"{name}.bias"].unsqueeze(1), h, params[f"{name}.weight"].transpose(1, 2))
            h = F.relu(h) if name != "output" else h
        return h


SHARED_GROUP = 12
"""Networks per pair of convolution calls in :meth:`LeNet._shared_input` (measured: 12 at a time 0.7× the time of
all 48 of the quick GeoMNIST run at once; the values do not depend on it)."""


def _pool2x2(h: Tensor) -> Tensor:
    """2×2 max pooling (stride 2) of (N, C, H, W) as the elementwise maximum of the windows' four strided entries:
    the same values as ``max_pool2d`` (the maximum is exact), and faster on CPU for the wide outputs of
    :meth:`LeNet._shared_input` (with its ReLU moved after it: 522 → 317 ms for 64 images × 48 networks)."""
    v = h.view(*h.shape[:2], h.shape[2] // 2, 2, h.shape[3] // 2, 2)
    return torch.maximum(torch.maximum(v[:, :, :, 0, :, 0], v[:, :, :, 0, :, 1]),
                         torch.maximum(v[:, :, :, 1, :, 0], v[:, :, :, 1, :, 1]))


def lenet_ensemble(n_trials: int, in_channels: int, n_classes: int, generator: torch.Generator,
                   dtype: torch.dtype = torch.float64, device: str = "cpu") -> Ensemble:
    """``n_trials`` independently initialised LeNets as one :class:`Ensemble`."""
    return Ensemble(lambda generator: LeNet(in_channels, n_classes, generator=generator, dtype=dtype),
                    n_trials, generator=generator, device=device)
