import functools
import math

import numpy as np
import pytest
import torch

from repdyn.data.two_points import TEXT_DX, TEXT_DY, two_point_data
from repdyn.nn import MLP, Ensemble
from repdyn.probes.two_point import TwoPointState, measure_two_point, pair_statistics
from repdyn.theory import effective_theory as et


def test_pair_statistics_by_hand():
    h = torch.tensor([[0.0, 1.0], [3.0, 5.0]])
    out = torch.tensor([[1.0], [4.0]])
    y = torch.tensor([[0.0], [1.0]])
    s = pair_statistics([h], out, y)
    assert s.u.item() == 25.0 and s.v.item() == 9.0 and s.w.item() == 9.0 - 3.0 and s.ybar.item() == 2.5
    with pytest.raises(ValueError, match="exactly two points"):
        pair_statistics([torch.zeros(3, 2)], torch.zeros(3, 1), torch.zeros(3, 1))


def test_measured_network_satisfies_scalar_constraint_and_loss_identity():
    """w = v − sign·sqrt(vY) for scalar outputs and Eq. 9 = the real two-point loss (spec 000 §2.1, §2.5); at App.
    B.1's data (Y = 1, target mean 1.1)."""
    x, y = two_point_data(TEXT_DX, TEXT_DY)
    factory = functools.partial(MLP, 1, 16, 4, 1, dtype=torch.float64)
    ens = Ensemble(factory, seeds=[0, 1, 2], gains=[1.0, 1.5, 2.0])
    s = measure_two_point(ens, x, y, ["layer1", "output"])
    assert s.u.shape == (3, 2) and s.v.shape == (3,)
    dy = ens(x)[:, 1, 0] - ens(x)[:, 0, 0]
    expected_w = s.v - torch.sign(dy) * torch.sqrt(s.v * 1.0)
    torch.testing.assert_close(s.w, expected_w.detach())
    # The "output" layer's u is v.
    torch.testing.assert_close(s.u[:, 1], s.v)
    preds = ens(x).detach()
    true_loss = 0.5 * ((preds - y) ** 2).sum(-1).mean(-1)
    eq9 = et.loss(s.ybar.numpy(), np.array([1.1]), s.v.numpy(), s.w.numpy(), 1.0)
    np.testing.assert_allclose(eq9, true_loss.numpy(), rtol=1e-12)


def test_single_module_and_homogeneity_at_init():
    """Zero biases and leaky ReLU: h(x_2) = (x_2/x_1) h(x_1) at init (spec 000 §3.2), so u = (dx/|x_1|)²‖h(x_1)‖²."""
    model = MLP(1, 8, 3, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x, y = two_point_data(TEXT_DX, TEXT_DY)  # x = −1, −0.5: u = 0.25 ‖h(x_1)‖²
    s = measure_two_point(model, x, y, ["layer2"])
    hidden = {}
    model.layer2.register_forward_hook(lambda _m, _i, out: hidden.__setitem__("h", out))
    model(x[:1])
    assert s.u.item() == pytest.approx(0.25 * hidden["h"].pow(2).sum().item(), rel=1e-12)
    assert model.training  # mode restored


def test_packed_round_trip():
    s = TwoPointState(u=torch.ones(4, 3, 2), v=torch.full((4, 3), 2.0), w=torch.zeros(4, 3),
                      ybar=torch.full((4, 3, 1), math.pi))
    back = TwoPointState.unpack(s.packed(), 2)
    for a, b in zip((s.u, s.v, s.w, s.ybar), (back.u, back.v, back.w, back.ybar), strict=True):
        torch.testing.assert_close(a, b)


def test_two_point_recorder_flattens_conv_maps_alike_from_a_pass_and_a_measurement():
    """The recorder's two routes (a separate eval-mode measurement, and the training step's forward pass) flatten
    the (channels, positions) maps of a ConvChain through one function: equal bit for bit, and u is the squared
    distance of the flattened maps computed by hand on each member."""
    from repdyn.nn.models.cnn import ConvChain
    from repdyn.probes.two_point import two_point_recorder

    ens = Ensemble(functools.partial(ConvChain, 1, 3, 4, 3, kernel_size=3, dtype=torch.float64), seeds=[1, 2])
    x = torch.tensor([[[-1.0], [-0.5]], [[0.2], [0.7]]], dtype=torch.float64)
    y = torch.tensor([[0.6], [1.6]], dtype=torch.float64)
    recorder = two_point_recorder(x, y, ["layer0", "layer1"])
    ens.eval()
    from_pass = recorder.from_pass(ens.activations(x, ["layer0", "layer1", "output"]))
    measured = recorder(0, ens)
    assert torch.equal(from_pass, measured)
    state = TwoPointState.unpack(measured, 2)
    for k in range(2):
        member = ens.member(k)
        h = member.layer1(member.phi(member.conv1(member.phi(member.linear0(x[k])).reshape(2, 3, 4))))
        assert state.u[k, 1].item() == pytest.approx(float((h[1] - h[0]).pow(2).sum()), rel=1e-12)
        out = member(x[k])
        assert state.v[k].item() == pytest.approx(float((out[1] - out[0]).pow(2).sum()), rel=1e-12)
