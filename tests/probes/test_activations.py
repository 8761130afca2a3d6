import pytest
import torch

from repdyn.nn import MLP, Ensemble
from repdyn.probes import activations, pairwise_sq_distances, representational_distance


def test_activations_and_hand_computed_distance():
    net = MLP(1, 2, 1, 1, activation="relu", dtype=torch.float64)
    with torch.no_grad():
        net.linear0.weight.copy_(torch.tensor([[1.0], [-2.0]]))
        net.linear0.bias.copy_(torch.tensor([0.5, 0.0]))
    x1, x2 = torch.tensor([[1.0]], dtype=torch.float64), torch.tensor([[-1.0]], dtype=torch.float64)
    # h(1) = relu(1.5, -2) = (1.5, 0); h(-1) = relu(-0.5, 2) = (0, 2): distance² = 1.5² + 2² = 6.25
    assert float(representational_distance(net, x1, x2, "layer0")) == pytest.approx(6.25)
    h = activations(net, torch.cat([x1, x2]), ["layer0"])["layer0"]
    assert h.tolist() == [[1.5, 0.0], [0.0, 2.0]]
    assert pairwise_sq_distances(h).tolist() == [[0.0, 6.25], [6.25, 0.0]]
    assert not h.requires_grad


def test_unknown_layer_lists_available_names_and_mode_is_restored():
    net = MLP(1, 3, 2, 1, dropout=0.5)
    net.train()
    with pytest.raises(ValueError, match=r"available: .*layer1.*output"):
        activations(net, torch.zeros(2, 1), ["layer7"])
    a = activations(net, torch.ones(4, 1), ["layer1"])["layer1"]
    assert torch.equal(a, activations(net, torch.ones(4, 1), ["layer1"])["layer1"])  # eval: no dropout
    assert net.training


def test_ensemble_activations_in_chunks():
    ens = Ensemble(lambda generator: MLP(2, 4, 2, 1, generator=generator), seeds=[0, 1, 2])
    x = torch.randn(7, 2, generator=torch.Generator().manual_seed(0))
    whole = activations(ens, x, ["layer1"])["layer1"]
    assert whole.shape == (3, 7, 4)
    torch.testing.assert_close(activations(ens, x, ["layer1"], batch_size=3)["layer1"], whole)
    torch.testing.assert_close(whole[1], activations(ens.member(1), x, ["layer1"])["layer1"])
