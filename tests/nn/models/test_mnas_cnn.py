"""Tests of the MnasNet-like CNN of spec 003 §2.13."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import integrate

from repdyn.nn.models.mnas_cnn import SWISH_GAIN, MnasCNN, ScaledConv2d, swish


def test_parameter_count_and_conv_count() -> None:
    torch.manual_seed(0)
    net = MnasCNN()
    assert sum(p.numel() for p in net.parameters()) == 23251
    assert sum(isinstance(m, ScaledConv2d) for m in net.modules()) == 16
    assert net(torch.randn(3, 1, 28, 28)).shape == (3,)
    assert net(torch.randn(2, 1, 8, 8)).shape == (2,)


def test_swish_has_unit_second_moment() -> None:
    second = integrate.quad(lambda z: (z / (1 + math.exp(-z))) ** 2 * math.exp(-z * z / 2) / math.sqrt(2 * math.pi),
                            -30, 30)[0]
    assert SWISH_GAIN == pytest.approx(1 / math.sqrt(second), abs=1e-4)
    assert float(swish(torch.tensor(0.0))) == 0.0


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="width"):
        MnasCNN(width=0)


def test_swish_gradient_matches_its_closed_form() -> None:
    """The in-place gain keeps autograd exact: d/dx c·x·σ(x) = c·(σ + x·σ·(1 − σ))."""
    x = torch.linspace(-6, 6, 101, dtype=torch.float64, requires_grad=True)
    swish(x).sum().backward()
    s = torch.sigmoid(x.detach())
    torch.testing.assert_close(x.grad, SWISH_GAIN * (s + x.detach() * s * (1 - s)))


def test_channels_last_weights_change_no_number() -> None:
    """real_images trains with the weights in channels-last layout (faster CPU convolutions): the outputs and
    gradients are those of the default layout to float32 rounding."""
    torch.manual_seed(0)
    net, x = MnasCNN(2), torch.randn(8, 1, 28, 28)
    other = MnasCNN(2)
    other.load_state_dict(net.state_dict())
    other.to(memory_format=torch.channels_last)
    grads = []
    for model in (net, other):
        out = model(x)
        grads.append(torch.autograd.grad(out.square().sum(), list(model.parameters())))
        torch.testing.assert_close(out, net(x))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
