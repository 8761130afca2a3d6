import torch

from repdyn.nn import MLP
from repdyn.probes import local_elasticity


def test_linear_model_elasticity_is_inner_product_ratio():
    """f(x) = w·x with ½(f − y)² loss: a step on x_j moves f(x_i) by η(f_j − y_j) x_j·x_i, so
    relative[i, j] = |x_i·x_j| / |x_j·x_j|."""
    model = torch.nn.Linear(3, 1, bias=False).double()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        model.weight.copy_(torch.randn(1, 3, generator=g, dtype=torch.float64))
    x = torch.randn(5, 3, generator=g, dtype=torch.float64)
    y = torch.randn(5, 1, generator=g, dtype=torch.float64)
    weight = model.weight.detach().clone()
    e = local_elasticity(model, x, y, lr=0.1, sources=[1, 4])
    assert torch.equal(model.weight, weight)  # the probe steps functionally
    gram = x @ x.T
    expected = (gram[:, [1, 4]] / gram[[1, 4], [1, 4]]).abs()
    torch.testing.assert_close(e.relative, expected)
    residual = (model(x) - y).detach().squeeze(-1)
    torch.testing.assert_close(e.change, (0.1 * residual[[1, 4]] * gram[:, [1, 4]]).abs())


def test_hidden_layer_elasticity_matches_explicit_step():
    net = MLP(2, 5, 2, 1, activation="tanh", generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    x = torch.randn(4, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    y = torch.zeros(4, 1, dtype=torch.float64)
    e = local_elasticity(net, x, y, lr=0.05, layer="layer1", sources=[2], chunk_size=1)
    rep = lambda: torch.tanh(net.linear1(torch.tanh(net.linear0(x))))  # noqa: E731
    base = rep().detach()
    loss = 0.5 * (net(x[2:3]) - y[2:3]).pow(2).sum()
    grads = torch.autograd.grad(loss, list(net.parameters()))
    with torch.no_grad():
        for p, g in zip(net.parameters(), grads, strict=True):
            p.sub_(0.05 * g)
        torch.testing.assert_close(e.change[:, 0], (rep() - base).norm(dim=1))
    torch.testing.assert_close(e.relative[:, 0], e.change[:, 0] / e.change[2, 0])
