import pytest
import torch

from repdyn.nn import MLP, Ensemble
from repdyn.probes.taylor import taylor_terms


def test_quadratic_map_terms_are_closed_form():
    """f(x) = A x + ½ [xᵀ B_k x]_k: J(x₁)Δ = AΔ + [x₁ᵀ B_k Δ]_k (B_k symmetric), the second-order term is
    ½ [Δᵀ B_k Δ]_k, and it is the whole remainder."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 4, generator=g, dtype=torch.float64)
    b = torch.randn(3, 4, 4, generator=g, dtype=torch.float64)
    b = b + b.transpose(1, 2)

    def f(x):
        return x @ a.T + 0.5 * torch.einsum("ni,kij,nj->nk", x, b, x)

    x1 = torch.randn(5, 4, generator=g, dtype=torch.float64)
    x2 = torch.randn(5, 4, generator=g, dtype=torch.float64)
    d = x2 - x1
    t = taylor_terms(f, x1, x2)
    first = d @ a.T + torch.einsum("ni,kij,nj->nk", x1, b, d)
    second = 0.5 * torch.einsum("ni,kij,nj->nk", d, b, d)
    torch.testing.assert_close(t.first, first.norm(dim=-1))
    torch.testing.assert_close(t.second, second.norm(dim=-1))
    torch.testing.assert_close(t.remainder, t.second)


def test_smooth_network_second_term_matches_finite_differences():
    net = MLP(3, 6, 2, 2, activation="tanh", generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    g = torch.Generator().manual_seed(2)
    x1 = torch.randn(4, 3, generator=g, dtype=torch.float64)
    x2 = x1 + 0.3 * torch.randn(4, 3, generator=g, dtype=torch.float64)
    d, eps = x2 - x1, 1e-3
    with torch.no_grad():
        first = (net(x1 + eps * d) - net(x1 - eps * d)) / (2 * eps)
        second = 0.5 * (net(x1 + eps * d) - 2 * net(x1) + net(x1 - eps * d)) / eps**2
    t = taylor_terms(net, x1, x2)
    torch.testing.assert_close(t.first, first.norm(dim=-1), rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(t.second, second.norm(dim=-1), rtol=1e-4, atol=1e-7)
    with torch.no_grad():
        exact = (net(x2) - net(x1) - first).norm(dim=-1)
    torch.testing.assert_close(t.remainder, exact, rtol=1e-4, atol=1e-7)


def test_leaky_relu_ensemble_has_no_second_order_term():
    """Piecewise linear: ∇²f = 0 a.e., so all higher orders sit in the remainder; an ensemble gives (K, n)."""
    model = Ensemble(lambda generator: MLP(3, 8, 3, 2, dtype=torch.float64, generator=generator), seeds=[0, 1])
    g = torch.Generator().manual_seed(3)
    x1, x2 = torch.randn(2, 6, 3, generator=g, dtype=torch.float64)
    t = taylor_terms(model, x1, x2)
    assert t.first.shape == (2, 6)
    assert torch.all(t.second == 0)
    assert torch.all(t.remainder > 0)


def test_mismatched_shapes_rejected():
    with pytest.raises(ValueError, match="same shape"):
        taylor_terms(lambda x: x, torch.zeros(2, 3), torch.zeros(3, 3))


def test_joint_outputs_in_chunks_equal_separate_whole_passes():
    """h and y from one function, 7 pairs at a time: the same norms as each map alone over all pairs in one pass,
    and no pass sees more than the chunk (what bounds the memory of the nested JVPs)."""
    model = Ensemble(lambda generator: MLP(5, 8, 3, 4, dtype=torch.float64, generator=generator), seeds=[0, 1, 2])
    g = torch.Generator().manual_seed(4)
    x1, x2 = torch.randn(2, 30, 5, generator=g, dtype=torch.float64)
    rows = []

    def h_and_y(z):
        rows.append(z.shape[0])
        found = model.activations(z, ["layer1", "output"])
        return found["layer1"], found["output"]

    joint = taylor_terms(h_and_y, x1, x2, chunk=7)
    separate = (taylor_terms(lambda z: model.activations(z, ["layer1"])["layer1"], x1, x2), taylor_terms(model, x1, x2))
    assert max(rows) == 7
    for got, want in zip(joint, separate, strict=True):
        assert got.first.shape == (3, 30)
        for name in ("first", "second", "remainder"):
            torch.testing.assert_close(getattr(got, name), getattr(want, name), rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="chunk"):
        taylor_terms(model, x1, x2, chunk=0)
