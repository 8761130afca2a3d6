"""Fully connected networks with named layers, Xavier-normal init with a gain, and a stacked-weights fast path.

Layer names (what probes and :meth:`repdyn.nn.ensemble.Ensemble.activations` accept):

- ``"preact{l}"``: the pre-activation W_l h_{l-1} + b_l of hidden layer l (l = 0 .. depth-1);
- ``"layer{l}"``: the hidden representation h_l after the activation (and after the skip connection and dropout,
  when present);
- ``"output"``: the network output.

``depth`` counts hidden layers, as "hidden layers N" in Table 1 of seed 000 (spec 000 §3.2): Linear(d_in, W) ->
(depth - 1) x Linear(W, W) -> Linear(W, d_out). The read-out layer "halfway through" the seed-000 default
(depth 20) is ``"layer10"`` (spec 000 §3.1). Parameters are named ``linear{l}.weight``, ``linear{l}.bias`` and
``output.weight``, ``output.bias``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ACTIVATIONS", "BMM_ROWS", "MLP", "activation_backward", "activation_function", "xavier_normal_linear_"]

BMM_ROWS = 256
"""From this many points per member on, the fused forward pass takes b + hWᵀ as a batched matmul and an in-place add
instead of one baddbmm: MKL's baddbmm with a broadcast bias took 1.4-1.6 × as long at 500 points (the quick digits
run's hidden layers; the same values bit for bit there), and was as fast or faster at 2-200 points."""

ACTIVATIONS = ("leaky_relu", "relu", "tanh", "elu", "silu", "identity")
"""Activation names accepted by :func:`activation_function` (silu = swish, x·sigmoid(x))."""


def activation_function(name: str, negative_slope: float = 0.01) -> Callable[[Tensor], Tensor]:
    """The element-wise activation called ``name``. Leaky ReLU uses PyTorch's default slope 0.01 and ELU alpha 1
    (spec 000 §3.1: the paper does not state them)."""
    if name == "leaky_relu":
        return lambda t: F.leaky_relu(t, negative_slope)
    functions: dict[str, Callable[[Tensor], Tensor]] = {
        "relu": F.relu,
        "tanh": torch.tanh,
        "elu": F.elu,
        "silu": F.silu,
        "identity": lambda t: t,
    }
    if name not in functions:
        raise ValueError(f"unknown activation {name!r}; allowed: {', '.join(ACTIVATIONS)}")
    return functions[name]


def activation_backward(name: str, negative_slope: float = 0.01) -> Callable[[Tensor, Tensor], Tensor]:
    """(∂L/∂φ(z), z) -> ∂L/∂z for :func:`activation_function`, with autograd's conventions (subgradient 0 at
    z = 0 for ReLU, slope at z <= 0 for leaky ReLU); one fused kernel where PyTorch has one."""
    aten = torch.ops.aten

    def silu(grad: Tensor, z: Tensor) -> Tensor:
        sig = torch.sigmoid(z)
        return grad * sig * (1 + z * (1 - sig))

    backward: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
        "leaky_relu": lambda grad, z: aten.leaky_relu_backward(grad, z, negative_slope, False),
        "relu": lambda grad, z: aten.threshold_backward(grad, z, 0),
        "tanh": lambda grad, z: aten.tanh_backward(grad, torch.tanh(z)),
        "elu": lambda grad, z: torch.where(z > 0, grad, grad * torch.exp(z)),
        "silu": silu,
        "identity": lambda grad, z: grad,
    }
    if name not in backward:
        raise ValueError(f"unknown activation {name!r}; allowed: {', '.join(ACTIVATIONS)}")
    return backward[name]


def xavier_normal_linear_(linear: nn.Linear, gain: float, generator: torch.Generator | None) -> None:
    """Xavier (Glorot) normal weights, std = gain·sqrt(2/(fan_in+fan_out)), and zero biases (spec 000 §3.1)."""
    with torch.no_grad():
        nn.init.xavier_normal_(linear.weight, gain=gain, generator=generator)
        if linear.bias is not None:
            linear.bias.zero_()


class MLP(nn.Module):
    """Multi-layer perceptron with named hidden layers.

    Args:
        in_features, out_features: input and output dimensions.
        width: units in every hidden layer.
        depth: number of hidden layers (>= 1).
        activation: one of :data:`ACTIVATIONS`.
        gain: Xavier-normal gain of every weight matrix, the "initial weight scale" of seed 000; biases start at 0.
        bias: whether layers have biases.
        dropout: dropout probability applied to every hidden representation (train mode only).
        skip: 0 for none; s >= 1 adds h_{l-s} to h_l whenever l - s >= 0, i.e.
            h_l = phi(W_l h_{l-1} + b_l) + h_{l-s}. ``skip=2`` is the seed-000 "skip connection on each layer
            jumping over the next two layers" (spec 000 §3.2); ``skip=1`` is a plain residual MLP.
        negative_slope: slope of leaky ReLU.
        generator: seeds the initialisation (no global RNG).
        dtype, device: of the parameters.
    """

    def __init__(
        self,
        in_features: int,
        width: int,
        depth: int,
        out_features: int = 1,
        *,
        activation: str = "leaky_relu",
        gain: float = 1.0,
        bias: bool = True,
        dropout: float = 0.0,
        skip: int = 0,
        negative_slope: float = 0.01,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        for label, value in (("in_features", in_features), ("width", width), ("depth", depth),
                             ("out_features", out_features)):
            if int(value) < 1:
                raise ValueError(f"{label} must be a positive integer, got {value}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if skip < 0:
            raise ValueError(f"skip must be >= 0 (0 = no skip connections), got {skip}")
        if gain <= 0:
            raise ValueError(f"gain must be positive, got {gain}")
        self.depth = depth
        self.width = width
        self.activation = activation
        self.phi = activation_function(activation, negative_slope)
        self.phi_backward = activation_backward(activation, negative_slope)
        self.skip = skip
        self.dropout_p = dropout
        factory = {"dtype": dtype, "device": device}
        dims = [in_features] + [width] * depth
        for l in range(depth):
            self.add_module(f"linear{l}", nn.Linear(dims[l], width, bias=bias, **factory))
            self.add_module(f"preact{l}", nn.Identity())
            self.add_module(f"layer{l}", nn.Identity())
        self.output = nn.Linear(width, out_features, bias=bias, **factory)
        self.dropout = nn.Dropout(dropout)
        self.reset_parameters(gain, generator)

    def reset_parameters(self, gain: float, generator: torch.Generator | None = None) -> None:
        """Re-initialise every layer in order linear0, ..., output (Xavier normal with ``gain``, zero biases)."""
        for l in range(self.depth):
            xavier_normal_linear_(getattr(self, f"linear{l}"), gain, generator)
        xavier_normal_linear_(self.output, gain, generator)

    def forward(self, x: Tensor) -> Tensor:
        history: list[Tensor] = []
        h = x
        for l in range(self.depth):
            z = getattr(self, f"preact{l}")(getattr(self, f"linear{l}")(h))
            h = self.dropout(self.phi(z))
            if self.skip and l >= self.skip:
                h = h + history[l - self.skip]
            h = getattr(self, f"layer{l}")(h)
            history.append(h)
        return self.output(h)

    def forward_stacked(
        self,
        params: Mapping[str, Tensor],
        x: Tensor,
        taps: Collection[str] = (),
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """K networks at once from stacked parameters (leading dim K) with batched matmuls.

        ``x`` is (n, d_in), shared by all members, or (K, n, d_in). Returns the (K, n, d_out) output and the
        representations named in ``taps``, each (K, n, ...). In train mode with dropout, masks are drawn from
        ``generator``. This is the fast path :class:`repdyn.nn.ensemble.Ensemble` uses for MLPs; it computes the
        same function as :meth:`forward` member by member.
        """
        drop = self.training and self.dropout_p > 0
        keep = 1.0 - self.dropout_p
        found: dict[str, Tensor] = {}
        history: list[Tensor] = []
        h = x

        def linear(name: str, h: Tensor) -> Tensor:
            weight = params[f"{name}.weight"]
            bias = params.get(f"{name}.bias")
            if h.dim() == 2:
                out = torch.matmul(h, weight.transpose(1, 2))
                return out if bias is None else out + bias.unsqueeze(1)
            if bias is None:
                return torch.bmm(h, weight.transpose(1, 2))
            return torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2))

        for l in range(self.depth):
            z = linear(f"linear{l}", h)
            h = self.phi(z)
            if drop:
                mask = torch.rand(h.shape, generator=generator, device=h.device, dtype=h.dtype) < keep
                h = h * mask / keep
            if self.skip and l >= self.skip:
                h = h + history[l - self.skip]
            if f"preact{l}" in taps:
                found[f"preact{l}"] = z
            if f"layer{l}" in taps:
                found[f"layer{l}"] = h
            history.append(h)
        out = linear("output", h)
        if "output" in taps:
            found["output"] = out
        return out, found

    @property
    def supports_fused_step(self) -> bool:
        """Whether :meth:`fused_gd_update` applies (no dropout, every layer with a bias)."""
        return self.dropout_p == 0 and self.output.bias is not None

    def fused_plan(self, params: Mapping[str, Tensor]) -> list[tuple[Tensor, Tensor, Tensor, Tensor]]:
        """Per layer (linear0, ..., output): (W, Wᵀ, b, b[:, None]) of the stacked ``params``, for
        :meth:`fused_gd_forward` and :meth:`fused_gd_update`. The views stay valid while the parameters are updated
        in place, so a training loop builds them once instead of every step (the same tensors: bit for bit the same
        steps)."""
        return [(params[f"{n}.weight"], params[f"{n}.weight"].transpose(1, 2), params[f"{n}.bias"],
                 params[f"{n}.bias"].unsqueeze(1)) for n in self._layer_modules()]

    def _layer_modules(self) -> list[str]:
        """The layers of :meth:`fused_plan`, input to output."""
        return [f"linear{l}" for l in range(self.depth)] + ["output"]

    @torch.no_grad()
    def fused_gd_forward(self, plan: list[tuple[Tensor, Tensor, Tensor, Tensor]], x: Tensor
                         ) -> tuple[Tensor, list[Tensor]]:
        """The stacked forward pass without an autograd graph, keeping what :meth:`fused_gd_update` needs:
        returns the (K, n, d_out) output and the cache [input, z_0, h_0, ..., z_{depth-1}, h_{depth-1}] (``plan``:
        :meth:`fused_plan` of the parameters)."""
        cache = [x]
        h = x
        for l in range(self.depth):
            _, weight_t, _, bias_row = plan[l]
            if h.dim() == 2:
                z = torch.matmul(h, weight_t) + bias_row
            elif h.shape[1] >= BMM_ROWS:
                z = torch.bmm(h, weight_t).add_(bias_row)
            else:
                z = torch.baddbmm(bias_row, h, weight_t)
            h = self.phi(z)
            if self.skip and l >= self.skip:
                h = h + cache[2 * (l - self.skip) + 2]
            cache += [z, h]
        _, weight_t, _, bias_row = plan[-1]
        out = torch.baddbmm(bias_row, h, weight_t)
        return out, cache

    def fused_taps(self, cache: list[Tensor], out: Tensor, names: Collection[str]) -> dict[str, Tensor]:
        """The representations ``names`` ("preact{l}", "layer{l}", "output") from :meth:`fused_gd_forward`'s cache
        and output: what :meth:`forward_stacked` returns for them on the same inputs and parameters (no dropout)."""
        found = {}
        for name in names:
            if name == "output":
                found[name] = out
            elif name.startswith("preact"):
                found[name] = cache[2 * int(name.removeprefix("preact")) + 1]
            else:
                found[name] = cache[2 * int(name.removeprefix("layer")) + 2]
        return found

    @property
    def supports_fused_grads(self) -> bool:
        """Whether :meth:`fused_grads` returns autograd's gradients bit for bit (tested): the fused step's layers,
        no skip connection (autograd sums a skipped gradient in another order) and an activation whose backward is
        autograd's own kernel."""
        return self.supports_fused_step and not self.skip and self.activation in ("leaky_relu", "relu", "tanh",
                                                                                   "identity")

    def _fused_backward(self, plan: list[tuple[Tensor, Tensor, Tensor, Tensor]], cache: list[Tensor],
                        delta: Tensor) -> Iterator[tuple[int, Tensor, Tensor]]:
        """Hand-written back-propagation from ∂L/∂output ``delta`` (K, n, d_out): yields (layer index in ``plan``,
        ∂L/∂z of that layer, its input) from the output layer down. Each layer's gradient into the layer below is
        taken before the yield, so the consumer may update that layer's weight in place."""
        grad_h: list[Tensor | None] = [None] * self.depth
        weight = plan[-1][0]
        grad_h[-1] = torch.bmm(delta, weight)
        yield self.depth, delta, cache[-1]
        tanh = self.activation == "tanh"
        for l in range(self.depth - 1, -1, -1):
            z, below, upstream = cache[2 * l + 1], cache[2 * l], grad_h[l]
            skipped = self.skip and l >= self.skip
            if tanh and not skipped:
                dz = torch.ops.aten.tanh_backward(upstream, cache[2 * l + 2])
            else:
                dz = self.phi_backward(upstream, z)
            if skipped:
                earlier = grad_h[l - self.skip]
                grad_h[l - self.skip] = upstream if earlier is None else earlier + upstream
            if l > 0:
                propagated = torch.bmm(dz, plan[l][0])
                grad_h[l - 1] = propagated if grad_h[l - 1] is None else grad_h[l - 1] + propagated
            yield l, dz, below

    @torch.no_grad()
    def fused_gd_update(self, plan: list[tuple[Tensor, Tensor, Tensor, Tensor]], cache: list[Tensor],
                        scaled_grad_out: Tensor) -> None:
        """One gradient-descent step in place, by hand-written back-propagation: each weight's update
        W ← W − δᵀh is fused into one in-place batched matmul, so no gradient tensor is ever stored.

        ``scaled_grad_out`` is lr_k·∂L_k/∂output (K, n, d_out) for member k. The result equals autograd + SGD
        (tested against one-by-one torch.optim runs); it reads every weight twice instead of the four passes of
        backward + optimizer. tanh's derivative is taken from the cached activation tanh(z) where no skip
        connection was added to it (the same tensor a recomputation gives, without the recomputation).
        """
        for l, dz, below in self._fused_backward(plan, cache, scaled_grad_out):
            weight, _, bias, _ = plan[l]
            if below.dim() == 2:
                weight.sub_(torch.matmul(dz.transpose(1, 2), below))
            else:
                weight.baddbmm_(dz.transpose(1, 2), below, alpha=-1.0)
            bias.sub_(dz.sum(1))

    @torch.no_grad()
    def fused_grads(self, plan: list[tuple[Tensor, Tensor, Tensor, Tensor]], cache: list[Tensor], grad_out: Tensor
                    ) -> dict[str, Tensor]:
        """{parameter name: gradient} from ∂L/∂output ``grad_out``, without an autograd graph, for an optimiser that
        needs the gradients themselves (Adam). Each weight gradient is the matmul autograd takes, hᵀδ transposed (δᵀh
        sums the points in another order), so they are autograd's bit for bit where :attr:`supports_fused_grads`."""
        grads = {}
        names = self._layer_modules()
        for l, dz, below in self._fused_backward(plan, cache, grad_out):
            if below.dim() == 2:  # shared inputs: autograd's matmul expands them over the members
                below = below.expand(dz.shape[0], *below.shape)
            grads[f"{names[l]}.weight"] = torch.bmm(below.transpose(1, 2), dz).transpose(1, 2)
            grads[f"{names[l]}.bias"] = dz.sum(1)
        return grads

    def layer_names(self) -> list[str]:
        """Names of the representations a probe can read, input to output."""
        names = [n for l in range(self.depth) for n in (f"preact{l}", f"layer{l}")]
        return names + ["output"]
