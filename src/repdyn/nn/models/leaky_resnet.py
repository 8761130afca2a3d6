"""Leaky ResNets with effective depth L~ and per-layer steps rho_l as one batched model, their training objective and
its hand-written gradient.

Seed 002 §2 and §4, spec 002 §3.1-3.4: ``A_0 = U_in x``, ``A_l = (1 - rho_l L~) A_{l-1} + rho_l W_l sigma(A_{l-1})``
with ``sigma(a) = ([a]_+, 1)``, prediction ``U_out A_L``. ``K`` members (seeds, effective depths, step
schemes) share the depth ``L`` and width ``w`` and are stacked: weights ``(K, L, w, w+1)``, steps ``(K, L)``,
leaks ``(K,)``. The objective is [E-DLOSS]

    C + lambda / (2 L~) sum_l rho_l ||W_l||_F^2,   C = ||Y - Y_hat||_F^2 / N (sum over outputs, mean over points),

with the rho-weighted decay as an explicit loss term, never the optimiser's weight decay (spec 002 §7 P2, P3).
The in/out maps are fixed and semi-orthogonal (spec 002 §3.4 CHOICE, pitfall P8). Inputs are rows (N, d_in),
as elsewhere in repdyn; the representations are columns (w x N), as in the paper.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from repdyn.theory.leaky_resnet import leaky_forward, momenta_by_backprop

__all__ = ["INITS", "LeakyResNet", "data_cost", "objective_gradient"]

INITS = ("he", "identity")
"""Initialisations of :meth:`LeakyResNet.initialise` (spec 002 §4.2)."""


def _semi_orthogonal(k: int, rows: int, cols: int, generator: torch.Generator, dtype: torch.dtype) -> Tensor:
    """``k`` random ``rows x cols`` matrices with orthonormal columns (rows >= cols) or rows (QR of a Gaussian)."""
    tall = max(rows, cols), min(rows, cols)
    q, r = torch.linalg.qr(torch.randn(k, *tall, generator=generator, dtype=dtype))
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
    return q if rows >= cols else q.transpose(-1, -2)


class LeakyResNet(torch.nn.Module):
    """``K`` stacked Leaky ResNets (seed 002 §4 [E-DISC]); build one with :meth:`initialise`."""

    def __init__(self, weights: Tensor, rho: Tensor, ltilde: Tensor, u_in: Tensor, u_out: Tensor) -> None:
        super().__init__()
        k, depth, width, cols = weights.shape
        if cols != width + 1:
            raise ValueError(f"weights have shape {tuple(weights.shape)}: expected (K, L, w, w+1)")
        if rho.shape != (k, depth) or ltilde.shape != (k,):
            raise ValueError(f"rho {tuple(rho.shape)} and ltilde {tuple(ltilde.shape)} must be ({k}, {depth}) "
                             f"and ({k},)")
        if u_in.shape[:2] != (k, width) or u_out.shape[0] != k or u_out.shape[2] != width:
            raise ValueError(f"u_in {tuple(u_in.shape)} must be ({k}, {width}, d_in) and u_out "
                             f"{tuple(u_out.shape)} ({k}, d_out, {width})")
        if bool((ltilde <= 0).any()):
            raise ValueError(f"ltilde={ltilde.tolist()} is not allowed: every effective depth must be > 0")
        self.weight = torch.nn.Parameter(weights)
        self.register_buffer("rho", rho)
        self.register_buffer("ltilde", ltilde)
        self.register_buffer("u_in", u_in)
        self.register_buffer("u_out", u_out)

    @classmethod
    def initialise(cls, depth: int, width: int, d_in: int, d_out: int, ltilde: Sequence[float], rho: Tensor,
                   generator: torch.Generator, *, init_scale: float = 1.0, init: str = "he",
                   dtype: torch.dtype = torch.float64) -> LeakyResNet:
        """``K = len(ltilde)`` members with ``V_l ~ N(0, 2 (L~ s)^2 / w)``, zero bias (spec 002 §4.2 CHOICE
        "He x L~", ``s = init_scale``) and random semi-orthogonal in/out maps; ``rho`` is ``(L,)`` or ``(K, L)``.

        ``init="identity"`` adds ``L~ [I_w, 0]`` (spec 002 §4.2 alternative): each layer then keeps the positive
        part of the representation, which avoids the ``exp(-L~)`` signal decay of pitfall P10 at large ``L~``.
        """
        if width < max(d_in, d_out):
            raise ValueError(f"width={width} is not allowed: must be >= d_in={d_in} and d_out={d_out}")
        if init_scale < 0:
            raise ValueError(f"init_scale={init_scale!r} is not allowed: must be >= 0")
        if init not in INITS:
            raise ValueError(f"init={init!r} is not allowed: choose one of {', '.join(INITS)}")
        lt = torch.as_tensor(list(ltilde), dtype=dtype)
        k = lt.shape[0]
        std = (2.0 / width) ** 0.5 * init_scale * lt
        weights = torch.zeros(k, depth, width, width + 1, dtype=dtype)
        weights[..., :width] = std[:, None, None, None] * torch.randn(k, depth, width, width, generator=generator,
                                                                      dtype=dtype)
        if init == "identity":
            weights[..., :width] += lt[:, None, None, None] * torch.eye(width, dtype=dtype)
        rho = rho.to(dtype).expand(k, depth).clone()
        u_in = _semi_orthogonal(k, width, d_in, generator, dtype)
        u_out = _semi_orthogonal(k, d_out, width, generator, dtype)
        return cls(weights, rho, lt, u_in, u_out)

    @property
    def members(self) -> int:
        return self.weight.shape[0]

    def input_representation(self, x: Tensor) -> Tensor:
        """``A_0 = U_in x^T`` per member, ``(K, w, N)``."""
        return self.u_in @ x.T.to(self.weight.dtype)

    def representations(self, x: Tensor) -> Tensor:
        """``A_0..A_L`` per member, ``(K, L+1, w, N)``."""
        return leaky_forward(self.weight, self.rho, self.input_representation(x), self.ltilde)

    def readout(self, a_out: Tensor) -> Tensor:
        """Predictions ``(U_out A_L)^T``, ``(K, N, d_out)``."""
        return (self.u_out @ a_out).transpose(-1, -2)

    def forward(self, x: Tensor) -> Tensor:
        return self.readout(self.representations(x)[:, -1])

    def regulariser(self, lam: float) -> Tensor:
        """``lambda / (2 L~) sum_l rho_l ||W_l||_F^2`` per member (bias column included), ``(K,)``."""
        return lam / (2 * self.ltilde) * (self.rho * (self.weight**2).sum((-1, -2))).sum(-1)

    def momenta(self, x: Tensor, y: Tensor, lam: float, member: int) -> tuple[Tensor, Tensor]:
        """``(A_0..A_L, B_0..B_L)`` of one member with ``B_l = -dC/dA_l / lambda`` by autograd (seed 002 §2.4)."""
        u_out = self.u_out[member]
        target = y.T.to(self.weight.dtype)

        def cost(a_out: Tensor) -> Tensor:
            return data_cost(u_out @ a_out, target)

        return momenta_by_backprop(self.weight[member], self.rho[member], self.input_representation(x)[member],
                                   float(self.ltilde[member]), cost, lam)


def data_cost(prediction: Tensor, target: Tensor) -> Tensor:
    """``C = ||target - prediction||_F^2 / N`` for columns ``(..., d_out, N)``: sum over outputs, mean over the
    ``N`` points (spec 002 §2, pitfall P2)."""
    return ((target - prediction) ** 2).sum((-1, -2)) / prediction.shape[-1]


def _buffers(workspace: dict[str, Tensor] | None, like: Tensor, depth: int, k: int, width: int, n: int
             ) -> dict[str, Tensor]:
    """The tensors :func:`objective_gradient` writes into, kept in ``workspace`` from one step to the next: a
    training loop that allocated them at every step would page-fault on the fresh memory of every large one."""
    shapes = {"features": (depth, k, width + 1, n), "outer": (depth, k, width + 1, width),
              "scaled": (k, depth, width, width + 1), "rep0": (k, width, n), "rep1": (k, width, n),
              "back": (k, width, n), "g0": (k, width, n), "g1": (k, width, n)}
    if workspace is None:
        workspace = {}
    if not workspace or workspace["features"].shape != shapes["features"] or workspace["features"].dtype != like.dtype \
            or workspace["features"].device != like.device:
        workspace.clear()
        workspace.update({name: like.new_empty(shape) for name, shape in shapes.items()})
        workspace["features"][:, :, width] = 1  # the bias rows of sigma, never overwritten
    return workspace


@torch.no_grad()
def objective_gradient(model: LeakyResNet, a0: Tensor, target: Tensor, lam: float, norms: bool = False,
                       workspace: dict[str, Tensor] | None = None
                       ) -> tuple[Tensor, Tensor, Tensor, tuple[Tensor, Tensor] | None]:
    """The training objective per member and its gradient in the weights by a hand-written backward pass (the
    adjoint of [E-DISC], seed 002 §2.4 / spec 002 §3.12; equal to autograd's, tests/nn/test_leaky_resnet_fit.py).

    Forward ``A_l = c_l A_{l-1} + (rho_l W_l) sigma(A_{l-1})`` with ``c_l = 1 - rho_l L~`` (one ``bmm`` per
    layer); backward with ``G_l = dC/dA_l``, ``G_L = -2 U_out^T (Y - U_out A_L) / N``:

        dObj/dW_l = rho_l (G_l sigma(A_{l-1})^T + lambda / L~ W_l),
        G_{l-1} = c_l G_l + 1[A_{l-1} > 0] * ((rho_l V_l)^T G_l).

    Three matrix products per layer and a few in-place element-wise passes into preallocated tensors, no autograd
    graph: a training step at the quick shapes is 1.5-1.7x cheaper than autograd through
    :func:`repdyn.theory.leaky_resnet.leaky_forward_layers`, and
    reusing the tensors of ``workspace`` (a dict the caller keeps between steps; filled on the first call) saves
    the page faults of fresh memory. ``a0`` is ``A_0`` ``(K, w, N)``, ``target``
    ``(K or 1, d_out, N)``. Returns ``(objective, cost, grad, norms)``: objective and data cost ``(K,)``, the
    gradient shaped like the weights (a workspace tensor, overwritten by the next call with the same workspace)
    and, if ``norms``, ``(||A_l||, ||A_l - A_{l-1}||)`` for l = 1..L, ``(K, L)`` each (what the adaptive rule
    needs, :func:`repdyn.theory.leaky_resnet.adaptive_steps_from_norms`).
    """
    weights, rho, lt = model.weight.detach(), model.rho, model.ltilde
    k, depth, width, _ = weights.shape
    n = a0.shape[-1]
    ws = _buffers(workspace, weights, depth, k, width, n)
    features, outer = ws["features"], ws["outer"]
    keep = (1 - rho * lt[:, None])[..., None, None].unbind(1)  # c_l, (K, 1, 1) each
    scaled_all = torch.mul(rho[..., None, None], weights, out=ws["scaled"])  # rho_l W_l, (K, L, w, w+1)
    scaled = scaled_all.unbind(1)
    back_maps = scaled_all[..., :width].transpose(-1, -2).unbind(1)  # (rho_l V_l)^T, (K, w, w) each
    rep_norms, step_norms = [], []
    a = a0
    for layer in range(depth):
        sigma = features[layer]  # sigma(A_{l-1}) = ([A_{l-1}]_+, 1)
        torch.clamp(a, min=0, out=sigma[:, :width])
        new = torch.bmm(scaled[layer], sigma, out=ws[f"rep{layer % 2}"]).addcmul_(a, keep[layer])
        if norms:
            rep_norms.append(torch.linalg.vector_norm(new, dim=(-2, -1)))
            step_norms.append(torch.linalg.vector_norm(new - a, dim=(-2, -1)))
        a = new
    residual = target - model.u_out @ a
    cost = (residual**2).sum((-1, -2)) / n
    objective = cost + model.regulariser(lam)
    g = model.u_out.transpose(-1, -2) @ residual * (-2.0 / n)
    spare = (ws["g0"], ws["g1"])
    for layer in reversed(range(depth)):
        sigma = features[layer]
        # G_l sigma(A_{l-1})^T computed as (sigma G^T)^T: the faster layout of the product on the CPU
        torch.bmm(sigma, g.transpose(-1, -2), out=outer[layer])
        if layer:
            back = torch.bmm(back_maps[layer], g, out=ws["back"])
            # ReLU'(A_{l-1}) = 1[sigma > 0], applied without building the mask (autograd's own ReLU backward)
            new = spare[layer % 2]
            torch.ops.aten.threshold_backward.grad_input(back, sigma[:, :width], 0, grad_input=new)
            g = new.addcmul_(g, keep[layer])
    # rho_l (G_l sigma^T + lambda / L~ W_l), written over rho_l W_l (no longer needed)
    grad = scaled_all.mul_((lam / lt)[:, None, None, None]).addcmul_(outer.permute(1, 0, 3, 2), rho[..., None, None])
    found = (torch.stack(rep_norms, -1), torch.stack(step_norms, -1)) if norms else None
    return objective, cost, grad, found
