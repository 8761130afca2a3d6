"""Small convolutional networks with named layers and Xavier-normal init with a gain (zero biases).

- :class:`ConvChain` is the "Convolution" variant of seed 000 (Table 1, spec 000 §3.2): the connections between
  hidden layers are 1-D convolutions with ``channels`` channels and kernel ``kernel_size`` ("same" padding), so a
  hidden representation of ``channels × positions`` units (20 × 25 = 500 in the paper) replaces a dense layer.
  Input (n, d_in) vectors -> Linear -> (depth − 1) convolutions -> Linear -> (n, d_out).
- :class:`SmallCNN` is a plain image classifier: 2-D convolutions ("same" padding) each followed by the
  activation and 2×2 max pooling, then a linear read-out. Input (n, c, h, w).

Layer names: ``"layer{l}"`` for hidden representation l (after the activation), ``"output"``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from repdyn.nn.models.mlp import activation_function

__all__ = ["ConvChain", "SmallCNN"]


def _xavier_(module: nn.Linear | nn.Conv1d | nn.Conv2d, gain: float, generator: torch.Generator | None) -> None:
    with torch.no_grad():
        nn.init.xavier_normal_(module.weight, gain=gain, generator=generator)
        if module.bias is not None:
            module.bias.zero_()


class ConvChain(nn.Module):
    """Seed-000 convolutional variant: Linear(d_in, C·P) -> (depth − 1) × Conv1d(C, C, k, padding k//2) ->
    Linear(C·P, d_out), the activation after every hidden layer (``depth`` hidden layers in all)."""

    input_ndim = 2

    def __init__(
        self,
        in_features: int,
        channels: int,
        positions: int,
        depth: int,
        out_features: int = 1,
        *,
        kernel_size: int = 11,
        activation: str = "leaky_relu",
        gain: float = 1.0,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if depth < 1 or channels < 1 or positions < 1:
            raise ValueError(f"depth, channels and positions must be >= 1, got {depth}, {channels}, {positions}")
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd (for 'same' padding), got {kernel_size}")
        self.depth, self.channels, self.positions = depth, channels, positions
        self.phi = activation_function(activation)
        width = channels * positions
        self.linear0 = nn.Linear(in_features, width, dtype=dtype)
        for l in range(1, depth):
            self.add_module(f"conv{l}", nn.Conv1d(channels, channels, kernel_size, padding=kernel_size // 2,
                                                  dtype=dtype))
        for l in range(depth):
            self.add_module(f"layer{l}", nn.Identity())
        self.output = nn.Linear(width, out_features, dtype=dtype)
        for module in [self.linear0, *(getattr(self, f"conv{l}") for l in range(1, depth)), self.output]:
            _xavier_(module, gain, generator)

    def forward(self, x: Tensor) -> Tensor:
        h = self.layer0(self.phi(self.linear0(x))).reshape(x.shape[0], self.channels, self.positions)
        for l in range(1, self.depth):
            h = getattr(self, f"layer{l}")(self.phi(getattr(self, f"conv{l}")(h)))
        return self.output(h.flatten(1))

    def forward_stacked(self, params: Mapping[str, Tensor], x: Tensor, taps: Collection[str] = (),
                        generator: torch.Generator | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        """K networks at once from stacked parameters (leading dim K): ``x`` (n, d_in) shared or (K, n, d_in);
        returns the (K, n, d_out) output and the representations named in ``taps`` ((K, n, channels, positions);
        "layer0" (K, n, channels·positions), "output" (K, n, d_out)). The K members' convolutions are one grouped
        convolution (groups = K) with the bias added after it, as vmap's batching rule builds them, so
        :class:`repdyn.nn.ensemble.Ensemble` takes this path instead of vmap with bit-for-bit the same outputs and
        gradients (tested) at about 0.7 × the CPU time (vmap's per-call overhead)."""
        found: dict[str, Tensor] = {}
        k = params["linear0.weight"].shape[0]
        h = self.phi(torch.matmul(x, params["linear0.weight"].transpose(1, 2)) + params["linear0.bias"].unsqueeze(1))
        if "layer0" in taps:  # (K, n, C·P), as the module's layer0 sees it
            found["layer0"] = h
        n = h.shape[1]
        h = h.transpose(0, 1).reshape(n, k * self.channels, self.positions)  # the members' channels side by side
        for l in range(1, self.depth):
            weight = params[f"conv{l}.weight"]  # (K, C_out, C_in, kernel)
            z = F.conv1d(h, weight.flatten(0, 1), padding=weight.shape[-1] // 2, groups=k)
            h = self.phi(z + params[f"conv{l}.bias"].reshape(-1, 1))
            if f"layer{l}" in taps:
                found[f"layer{l}"] = h.reshape(n, k, self.channels, self.positions).transpose(0, 1)
        flat = h.reshape(n, k, -1).transpose(0, 1)
        out = torch.matmul(flat, params["output.weight"].transpose(1, 2)) + params["output.bias"].unsqueeze(1)
        if "output" in taps:
            found["output"] = out
        return out, found

    def layer_names(self) -> list[str]:
        return [f"layer{l}" for l in range(self.depth)] + ["output"]


class SmallCNN(nn.Module):
    """Conv2d(c_in, channels[0], k) -> act -> maxpool2 -> ... -> flatten -> Linear(-, n_classes)."""

    input_ndim = 4

    def __init__(
        self,
        in_shape: tuple[int, int, int],
        channels: Sequence[int],
        out_features: int,
        *,
        kernel_size: int = 3,
        activation: str = "relu",
        gain: float = 1.0,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        c, hgt, wid = in_shape
        if not channels or min(channels) < 1:
            raise ValueError(f"channels must be a non-empty list of positive ints, got {list(channels)}")
        if hgt >> len(channels) < 1 or wid >> len(channels) < 1:
            raise ValueError(f"{len(channels)} 2x2 poolings do not fit an image of {hgt}x{wid}")
        self.phi = activation_function(activation)
        self.n_conv = len(channels)
        self.pool = nn.MaxPool2d(2)
        for l, (cin, cout) in enumerate(zip([c, *channels[:-1]], channels, strict=True)):
            self.add_module(f"conv{l}", nn.Conv2d(cin, cout, kernel_size, padding=kernel_size // 2, dtype=dtype))
            self.add_module(f"layer{l}", nn.Identity())
        flat = channels[-1] * (hgt >> len(channels)) * (wid >> len(channels))
        self.output = nn.Linear(flat, out_features, dtype=dtype)
        for module in [*(getattr(self, f"conv{l}") for l in range(self.n_conv)), self.output]:
            _xavier_(module, gain, generator)

    def forward(self, x: Tensor) -> Tensor:
        h = x
        for l in range(self.n_conv):
            h = getattr(self, f"layer{l}")(self.pool(self.phi(getattr(self, f"conv{l}")(h))))
        return self.output(h.flatten(1))

    def layer_names(self) -> list[str]:
        return [f"layer{l}" for l in range(self.n_conv)] + ["output"]
