"""The 16-convolution MnasNet-like CNN of seed 003 §5.2, as specified in spec 003 §2.13 (defined only in code).

NTK parameterisation without batch normalisation: every weight ~ N(0, 1) and scaled by 1/√fan_in in the forward
pass (fan_in = in_channels/groups · k²); the final linear layer is scaled by 1/fan_in (the analogue of the 1/h of
Eq. 1) and has a zero-initialised bias; all convolutions are bias-free. Activation swish(x) = c·x·sigmoid(x)
with c = 1/√E[(z sigmoid z)²] = 1.67653 for z ~ N(0, 1) (spec 003 §2.13; the reference code's 1.6768 gives
E = 1.0003). With ``width`` = 10 and a 1×28×28 input the network has 23,251 parameters.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["SWISH_GAIN", "InvertedResidual", "MnasCNN", "ScaledConv2d", "swish"]

SWISH_GAIN = 1.67653


def swish(x: torch.Tensor) -> torch.Tensor:
    """Unit-second-moment swish, c·x·sigmoid(x) (spec 003 §2.13). The gain is applied in place (silu's backward
    needs its input, not its output), which spares a temporary per activation."""
    return F.silu(x).mul_(SWISH_GAIN)


class ScaledConv2d(nn.Module):
    """Bias-free convolution with N(0, 1) weights scaled by 1/√fan_in in the forward pass."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(c_out, c_in // groups, kernel, kernel))
        self.stride, self.groups, self.padding = stride, groups, kernel // 2
        self.scale = 1.0 / math.sqrt(c_in // groups * kernel * kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.weight * self.scale, stride=self.stride, padding=self.padding, groups=self.groups)


class InvertedResidual(nn.Module):
    """Pointwise expansion (swish), depthwise k5 (swish), pointwise linear; skip (x + res)/√2 when shapes match."""

    def __init__(self, c_in: int, c_mid: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.expand = ScaledConv2d(c_in, c_mid, 1)
        self.depthwise = ScaledConv2d(c_mid, c_mid, 5, stride=stride, groups=c_mid)
        self.project = ScaledConv2d(c_mid, c_out, 1)
        self.skip = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        res = self.project(swish(self.depthwise(swish(self.expand(x)))))
        return (x + res) / math.sqrt(2) if self.skip else res


class MnasCNN(nn.Module):
    """Layers of spec 003 §2.13 with channels proportional to ``width`` (10 in the paper): stem k5 s2, a
    depthwise-separable block, four inverted-residual blocks (expansion 3; strides 2, 1, 2, 1), a 1×1 head,
    global average pooling and a 1/fan_in-scaled linear output."""

    def __init__(self, width: int = 10, in_channels: int = 1) -> None:
        super().__init__()
        if width < 1 or in_channels < 1:
            raise ValueError(f"width={width} and in_channels={in_channels} must be >= 1")
        c = [max(1, round(m * width / 10)) for m in (40, 20, 10, 30, 200)]
        self.stem = ScaledConv2d(in_channels, c[0], 5, stride=2)
        self.separable_dw = ScaledConv2d(c[0], c[0], 5, groups=c[0])
        self.separable_pw = ScaledConv2d(c[0], c[1], 1)
        self.blocks = nn.Sequential(
            InvertedResidual(c[1], 3 * c[1], c[2], stride=2),
            InvertedResidual(c[2], 3 * c[2], c[2], stride=1),
            InvertedResidual(c[2], 3 * c[2], c[3], stride=2),
            InvertedResidual(c[3], 3 * c[3], c[3], stride=1),
        )
        self.head = ScaledConv2d(c[3], c[4], 1)
        self.readout = nn.Parameter(torch.randn(c[4]))
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(n, C, H, W) → (n,) scalar outputs."""
        z = swish(self.stem(x))
        z = swish(self.separable_pw(swish(self.separable_dw(z))))
        z = swish(self.head(self.blocks(z)))
        features = z.mean(dim=(-1, -2))
        return features @ self.readout / self.readout.shape[0] + self.bias
