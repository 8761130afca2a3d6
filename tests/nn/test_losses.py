import pytest
import torch
import torch.nn.functional as F

from repdyn.nn.losses import cross_entropy, get_loss, hinge, mse_half, soft_hinge


def test_mse_half_is_half_squared_error_and_relates_to_mseloss():
    pred = torch.tensor([[1.0, 2.0], [0.0, -1.0]], dtype=torch.float64)
    target = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    assert mse_half(pred, target).tolist() == [2.5, 2.5]
    # spec 000 §2.5: MSELoss(mean) = (2 / d_out) * L
    assert float(F.mse_loss(pred, target)) == pytest.approx(2 / 2 * float(mse_half(pred, target).mean()))


def test_two_point_plateau_is_y_over_8():
    """A network that predicts the target mean on the two-point task sits at L = Y/8 (spec 000 §2.5)."""
    target = torch.tensor([[0.6], [1.6]])
    pred = torch.full((2, 1), 1.1)
    assert float(mse_half(pred, target).mean()) == pytest.approx(1.0 / 8)


def test_hinge_losses():
    pred = torch.tensor([[2.0], [0.5], [-1.0]])
    y = torch.tensor([1.0, 1.0, 1.0])
    assert hinge(pred, y).tolist() == [0.0, 0.5, 2.0]
    assert hinge(pred, -y).tolist() == [3.0, 1.5, 0.0]
    soft = soft_hinge(pred, y, beta=20.0)
    torch.testing.assert_close(soft, torch.log1p(torch.exp(20 * (1 - pred.squeeze(-1)))) / 20)
    assert float((soft_hinge(pred, y, beta=1e4) - hinge(pred, y)).abs().max()) < 1e-3
    with pytest.raises(ValueError, match="scalar output"):
        hinge(torch.zeros(3, 2), y)


def test_cross_entropy_matches_torch_and_broadcasts_over_members():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 4, generator=g)
    labels = torch.tensor([0, 3, 1, 1, 2])
    ours = cross_entropy(logits, labels)
    for k in range(2):
        torch.testing.assert_close(ours[k], F.cross_entropy(logits[k], labels, reduction="none"))
    with pytest.raises(ValueError, match="integer"):
        cross_entropy(logits, labels.float())
    with pytest.raises(ValueError, match="unknown loss"):
        get_loss("l1")
