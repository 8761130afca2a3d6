import math

import pytest
import torch

from repdyn.nn.models.cnn import ConvChain, SmallCNN
from repdyn.nn.models.mlp import ACTIVATIONS, MLP


def test_xavier_normal_std_and_zero_biases():
    g = torch.Generator().manual_seed(0)
    net = MLP(300, 300, 2, 1, gain=1.3, generator=g, dtype=torch.float64)
    w = net.linear1.weight
    assert w.std().item() == pytest.approx(1.3 * math.sqrt(2 / 600), rel=0.01)
    assert net.output.weight.std().item() == pytest.approx(1.3 * math.sqrt(2 / 301), rel=0.15)
    assert all(float(b.detach().abs().max()) == 0.0 for n, b in net.named_parameters() if n.endswith("bias"))


def test_same_generator_seed_gives_same_network():
    a = MLP(2, 8, 3, generator=torch.Generator().manual_seed(5))
    b = MLP(2, 8, 3, generator=torch.Generator().manual_seed(5))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_forward_matches_hand_computation(activation):
    g = torch.Generator().manual_seed(1)
    net = MLP(3, 5, 2, 2, activation=activation, generator=g, dtype=torch.float64)
    x = torch.randn(4, 3, generator=g, dtype=torch.float64)
    phi = {"leaky_relu": lambda t: torch.where(t > 0, t, 0.01 * t), "relu": lambda t: t.clamp(min=0),
           "tanh": torch.tanh, "elu": lambda t: torch.where(t > 0, t, torch.exp(t) - 1),
           "silu": lambda t: t / (1 + torch.exp(-t)), "identity": lambda t: t}[activation]
    h0 = phi(x @ net.linear0.weight.T + net.linear0.bias)
    h1 = phi(h0 @ net.linear1.weight.T + net.linear1.bias)
    expected = h1 @ net.output.weight.T + net.output.bias
    torch.testing.assert_close(net(x), expected)


def test_skip_connection_jumps_two_layers():
    g = torch.Generator().manual_seed(2)
    net = MLP(2, 4, 4, 1, skip=2, activation="tanh", generator=g, dtype=torch.float64)
    x = torch.randn(3, 2, generator=g, dtype=torch.float64)
    hs = []
    h = x
    for l in range(4):
        h = torch.tanh(getattr(net, f"linear{l}")(h)) + (hs[l - 2] if l >= 2 else 0)
        hs.append(h)
    torch.testing.assert_close(net(x), net.output(hs[-1]))


def test_stacked_forward_equals_module_forward_with_taps():
    g = torch.Generator().manual_seed(3)
    nets = [MLP(2, 6, 3, 2, skip=1, generator=g, dtype=torch.float64) for _ in range(3)]
    params = {n: torch.stack([dict(m.named_parameters())[n] for m in nets]) for n, _ in nets[0].named_parameters()}
    x = torch.randn(5, 2, generator=g, dtype=torch.float64)
    out, taps = nets[0].forward_stacked(params, x, taps=["layer1", "preact2"])
    for k, m in enumerate(nets):
        torch.testing.assert_close(out[k], m(x))
        h = m.layer0(torch.nn.functional.leaky_relu(m.linear0(x)))
        h = torch.nn.functional.leaky_relu(m.linear1(h)) + h
        torch.testing.assert_close(taps["layer1"][k], h)
        torch.testing.assert_close(taps["preact2"][k], m.linear2(h))


@pytest.mark.parametrize("kwargs, match", [({"activation": "gelu"}, "activation"), ({"dropout": 1.0}, "dropout"),
                                           ({"skip": -1}, "skip"), ({"gain": 0.0}, "gain")])
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MLP(1, 4, 2, **kwargs)


def test_conv_chain_shapes_and_names():
    net = ConvChain(1, 4, 5, 3, kernel_size=3, generator=torch.Generator().manual_seed(0))
    x = torch.randn(6, 1)
    assert net(x).shape == (6, 1)
    assert net.layer_names() == ["layer0", "layer1", "layer2", "output"]
    with pytest.raises(ValueError, match="odd"):
        ConvChain(1, 4, 5, 3, kernel_size=4)


def test_small_cnn_shapes():
    net = SmallCNN((1, 8, 8), [3, 4], 10, generator=torch.Generator().manual_seed(0))
    assert net(torch.randn(2, 1, 8, 8)).shape == (2, 10)
    with pytest.raises(ValueError, match="poolings"):
        SmallCNN((1, 2, 2), [3, 4], 10)


def test_stacked_dropout_masks_are_seeded_and_rescaled():
    net = MLP(4, 400, 1, 1, activation="identity", dropout=0.25, generator=torch.Generator().manual_seed(0),
              dtype=torch.float64)
    params = {n: p.detach().unsqueeze(0).repeat(2, *([1] * p.dim())) for n, p in net.named_parameters()}
    x = torch.ones(3, 4, dtype=torch.float64)
    draw = [net.forward_stacked(params, x, ["layer0"], torch.Generator().manual_seed(7))[1]["layer0"]
            for _ in range(2)]
    assert torch.equal(draw[0], draw[1])
    dense = net.linear0(x).detach()
    kept = draw[0] != 0
    assert abs(1 - kept.double().mean().item() - 0.25) < 0.03
    torch.testing.assert_close(draw[0][kept], (dense.expand(2, 3, 400)[kept] / 0.75))
    net.eval()
    torch.testing.assert_close(net.forward_stacked(params, x, ["layer0"])[1]["layer0"][0], dense)
