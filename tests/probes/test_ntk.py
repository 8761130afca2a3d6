import pytest
import torch

from repdyn.nn import MLP
from repdyn.probes import empirical_ntk
from repdyn.probes.ntk import _symmetric_gram


def small_net(out=1):
    return MLP(3, 7, 2, out, activation="tanh", generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def explicit_jacobian(model, x):
    """(n, d_out, P) by one backward pass per output entry (plain autograd, no torch.func)."""
    rows = []
    for i in range(x.shape[0]):
        out = model(x[i:i + 1]).reshape(-1)
        per_out = []
        for a in range(out.shape[0]):
            grads = torch.autograd.grad(out[a], list(model.parameters()), retain_graph=True)
            per_out.append(torch.cat([g.reshape(-1) for g in grads]))
        rows.append(torch.stack(per_out))
    return torch.stack(rows)


class SharedLayerNet(torch.nn.Module):
    """A linear layer applied twice, a learnable scale and a conv: parameters the linear-layer factorisation
    must leave to the Jacobian path."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(4)
        self.inner = torch.nn.Linear(3, 3).double()
        self.conv = torch.nn.Conv1d(1, 2, 2).double()
        self.scale = torch.nn.Parameter(torch.tensor([1.3], dtype=torch.float64))
        self.head = torch.nn.Linear(4, 2).double()
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))

    def forward(self, x):
        h = torch.tanh(self.inner(torch.tanh(self.inner(x))))
        c = torch.tanh(self.conv(h.unsqueeze(1))).flatten(1)
        return self.head(self.scale * c)


@pytest.mark.parametrize("model", [small_net(out=2), SharedLayerNet()], ids=["mlp", "mixed"])
@pytest.mark.parametrize("method", ["auto", "jacobian"])
def test_ntk_matches_explicit_jacobian_for_every_chunking(model, method):
    x = torch.randn(9, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    jac = explicit_jacobian(model, x)
    full = torch.einsum("iap,jbp->ijab", jac, jac)
    for chunk, budget in [(9, 2**30), (2, 2**30), (4, 0), (2, 5000)]:  # whole, none and partly cached
        torch.testing.assert_close(empirical_ntk(model, x, output="full", method=method, chunk_size=chunk,
                                                 max_jacobian_bytes=budget), full)
        torch.testing.assert_close(empirical_ntk(model, x, method=method, chunk_size=chunk,
                                                 max_jacobian_bytes=budget), full.diagonal(dim1=2, dim2=3).sum(-1))


@pytest.mark.parametrize("method", ["auto", "jacobian"])
def test_ntk_entries_match_finite_differences(method):
    """Θ(x_i, x_j) = d/dε f(x_i; θ + ε ∇f(x_j)) at ε = 0, by central differences in float64."""
    model = small_net()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 3, generator=g, dtype=torch.float64)
    ntk = empirical_ntk(model, x, method=method)
    params = list(model.parameters())
    eps = 1e-6
    for j in range(4):
        grads = torch.autograd.grad(model(x[j:j + 1]).sum(), params)
        with torch.no_grad():
            for p, d in zip(params, grads, strict=True):
                p.add_(eps * d)
            plus = model(x).reshape(-1)
            for p, d in zip(params, grads, strict=True):
                p.sub_(2 * eps * d)
            minus = model(x).reshape(-1)
            for p, d in zip(params, grads, strict=True):
                p.add_(eps * d)
        torch.testing.assert_close(ntk[:, j], (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-8)


def test_symmetric_block_gram_equals_one_gemm():
    jac = torch.randn(700, 2, 30, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    full = torch.einsum("iap,jbp->ijab", jac, jac)
    torch.testing.assert_close(_symmetric_gram(jac, "full", blocks=3, min_rows=100), full)
    torch.testing.assert_close(_symmetric_gram(jac, "trace", blocks=8, min_rows=100),
                               full.diagonal(dim1=2, dim2=3).sum(-1))


def test_cross_kernel_and_last_layer_kernel():
    model = small_net()
    g = torch.Generator().manual_seed(3)
    x, x2 = torch.randn(5, 3, generator=g, dtype=torch.float64), torch.randn(3, 3, generator=g, dtype=torch.float64)
    both = empirical_ntk(model, torch.cat([x, x2]))
    torch.testing.assert_close(empirical_ntk(model, x, x2, chunk_size=2), both[:5, 5:])
    torch.testing.assert_close(empirical_ntk(model, x, x2, chunk_size=2, method="jacobian"), both[:5, 5:])
    # last layer only: Θ = h(x)·h(x') + 1 (weight and bias of the read-out)
    h, h2 = torch.tanh(model.linear1(torch.tanh(model.linear0(x)))), torch.tanh(model.linear1(torch.tanh(
        model.linear0(x2))))
    torch.testing.assert_close(empirical_ntk(model, x, x2, params=["output.weight", "output.bias"]),
                               (h @ h2.T + 1).detach())
    with pytest.raises(ValueError, match="available: linear0.weight"):
        empirical_ntk(model, x, params=["fc.weight"])
    with pytest.raises(ValueError, match="output"):
        empirical_ntk(model, x, output="diag")


class _ScalarBias(torch.nn.Module):
    """f(x) = w·x + b with a 0-dimensional bias, whose NTK term is exactly 1."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64))
        self.bias = torch.nn.Parameter(torch.tensor(0.3, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.w + self.bias).unsqueeze(-1)


def test_zero_dimensional_parameters_have_their_exact_term():
    x = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    model = _ScalarBias()
    full = empirical_ntk(model, x, method="jacobian")
    torch.testing.assert_close(full, x @ x.T + 1.0)
    torch.testing.assert_close(empirical_ntk(model, x, params=["bias"], method="jacobian"), torch.ones(5, 5,
                               dtype=torch.float64))


class TokenNet(torch.nn.Module):
    """Integer token ids -> embedding -> a 2-layer TransformerEncoder -> mean over tokens -> 3 logits."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(11, 8)
        layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, tokens):
        return self.head(self.encoder(self.emb(tokens)).mean(1))


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_ntk_of_a_model_on_token_ids_differentiates_parameters_only():
    model = TokenNet()
    tokens = torch.randint(0, 11, (5, 4), generator=torch.Generator().manual_seed(1))
    fast = empirical_ntk(model, tokens)
    reference = empirical_ntk(model, tokens, method="jacobian")
    torch.testing.assert_close(fast, reference, rtol=1e-4, atol=1e-4)
    as_dict = empirical_ntk(model, {"ids": tokens}, forward=lambda m, b: m(b["ids"]))
    torch.testing.assert_close(as_dict, reference, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("max_bytes", [2**30, 1000])
def test_cross_kernel_with_gram_is_two_calls_bit_for_bit(max_bytes):
    """empirical_ntk_with_gram forms x2's Jacobian once (a CNN, as seed 003's real_images uses it); the kernels are
    the bits of two empirical_ntk calls, also on the bounded-memory path (max_bytes = 1000: the two calls)."""
    from repdyn.nn.models.mnas_cnn import MnasCNN
    from repdyn.probes.ntk import empirical_ntk_with_gram
    torch.manual_seed(0)
    model = MnasCNN(2)
    x, x2 = torch.randn(7, 1, 12, 12), torch.randn(5, 1, 12, 12)
    weights = [n for n, _ in model.named_parameters() if n != "bias"]
    cross, gram = empirical_ntk_with_gram(model, x, x2, params=weights, chunk_size=3, max_jacobian_bytes=max_bytes)
    kw = {"params": weights, "method": "jacobian", "chunk_size": 3, "max_jacobian_bytes": max_bytes}
    assert torch.equal(cross, empirical_ntk(model, x, x2, **kw)) and cross.shape == (7, 5)
    assert torch.equal(gram, empirical_ntk(model, x2, **kw))
    assert torch.allclose(gram, gram.T) and model.training
