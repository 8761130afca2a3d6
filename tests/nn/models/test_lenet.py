"""The seed-004 LeNet (spec 004 §3.4): its architecture and initialisation, its stacked path and its shared-input
path."""

import numpy as np
import pytest
import torch

from repdyn.nn.models import lenet
from repdyn.nn.models.lenet import LeNet, lenet_ensemble


def test_architecture_and_default_init_bounds():
    net = LeNet(3, 2, generator=torch.Generator().manual_seed(0))
    assert net(torch.zeros(2, 3, 32, 32, dtype=torch.float64)).shape == (2, 2)
    n_params = sum(p.numel() for p in net.parameters())
    assert n_params == (3 * 25 * 6 + 6) + (6 * 25 * 16 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 2 + 2)
    assert net.fc1.weight.abs().max() <= 1 / np.sqrt(400) and net.fc1.weight.abs().max() > 0.9 / np.sqrt(400)
    with pytest.raises(ValueError, match="32×32"):
        net(torch.zeros(1, 3, 28, 28, dtype=torch.float64))


def test_stacked_path_equals_members():
    ens = lenet_ensemble(3, 1, 3, torch.Generator().manual_seed(1))
    x = torch.randn(3, 2, 1, 32, 32, dtype=torch.float64)
    ref = torch.stack([ens.member(k)(x[k]) for k in range(3)])
    torch.testing.assert_close(ens(x), ref, rtol=1e-12, atol=1e-12)
    shared = torch.randn(4, 1, 32, 32, dtype=torch.float64)
    torch.testing.assert_close(ens(shared), torch.stack([ens.member(k)(shared) for k in range(3)]))
    acts = ens.activations(shared, ["conv2", "fc2"])
    assert acts["conv2"].shape == (3, 4, 16, 5, 5) and acts["fc2"].shape == (3, 4, 84)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shared_input_groups_and_pooling_give_the_same_bits(dtype):
    """LeNet._shared_input (SHARED_GROUP networks per convolution call, each pooling a maximum of strided entries
    before its ReLU) against the same convolutions of all networks at once with ReLU then ``max_pool2d``: equal bit
    for bit, for a number of networks that is not a multiple of the group and on images with a blank half (tied
    pooling windows)."""
    R = lenet.SHARED_GROUP + 5
    ens = lenet_ensemble(R, 1, 3, torch.Generator().manual_seed(6), dtype=dtype)
    p = ens.params
    x = torch.randn(9, 1, 32, 32, dtype=dtype, generator=torch.Generator().manual_seed(7))
    x[:, :, :, 16:] = 0
    w1, w2 = p["conv1.weight"], p["conv2.weight"]
    h = torch.nn.functional.conv2d(x, w1.reshape(R * 6, 1, 5, 5), p["conv1.bias"].reshape(-1))
    h = torch.nn.functional.max_pool2d(torch.relu(h), 2)
    h = torch.nn.functional.conv2d(h, w2.reshape(R * 16, 6, 5, 5), p["conv2.bias"].reshape(-1), groups=R)
    h = torch.nn.functional.max_pool2d(torch.relu(h), 2).reshape(9, R, -1).transpose(0, 1)
    for name in ("fc1", "fc2", "output"):
        h = torch.baddbmm(p[f"{name}.bias"].unsqueeze(1), h, p[f"{name}.weight"].transpose(1, 2))
        h = torch.relu(h) if name != "output" else h
    assert torch.equal(LeNet._shared_input(p, x), h)
    z = torch.randn(2, 5, 6, 8, dtype=dtype)
    assert torch.equal(lenet._pool2x2(z), torch.nn.functional.max_pool2d(z, 2))
