"""Local elasticity: how much one SGD step on input x_j moves the representation of another input x_i.

For every source j, take one SGD step of size ``lr`` on the single-point loss ℓ(f(x_j), y_j), θ_j = θ − η∇ℓ_j,
and measure change[i, j] = ‖h(x_i; θ_j) − h(x_i; θ)‖ at a named layer (the output by default). The relative
elasticity change[i, j]/change[j, j] is the He & Su (2020) ratio: it is ≪ 1 for inputs the step leaves alone
and ≈ 1 for inputs it moves as much as the sampled one. Seed 004's impact matrix E_{k,l} (spec 004 §2.13) is
the class-averaged version. The steps are taken functionally (``torch.func``), in parallel over sources, and the
model is not modified.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from repdyn.nn.losses import PointLoss, get_loss
from repdyn.probes.activations import check_layers


@dataclass(frozen=True)
class Elasticity:
    """change: (n, m) ‖Δh(x_i)‖ after a step on source j. relative: change / change of the source itself
    (column j divided by change[sources[j], j]). sources: (m,) indices of the sources into x."""

    change: Tensor
    relative: Tensor
    sources: Tensor


def local_elasticity(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    *,
    lr: float,
    loss: str | PointLoss = "mse",
    layer: str | None = None,
    sources: Sequence[int] | Tensor | None = None,
    chunk_size: int = 32,
) -> Elasticity:
    """Local elasticity of ``model`` on inputs x (n, ...) with targets y (n, ...) (class labels for
    cross-entropy). ``sources`` are the indices j to step on (default all); ``layer`` defaults to the output.
    Runs in eval mode; the module's parameters are left unchanged."""
    if lr <= 0:
        raise ValueError(f"lr must be positive, got {lr}")
    if layer is not None:
        check_layers(model, [layer])
    point_loss = get_loss(loss)
    n = x.shape[0]
    src = torch.arange(n) if sources is None else torch.as_tensor(sources, dtype=torch.long).reshape(-1)
    if src.numel() == 0 or bool(((src < 0) | (src >= n)).any()):
        raise ValueError(f"sources must be indices in [0, {n}), got {src.tolist()}")
    params = {name: p.detach() for name, p in model.named_parameters()}
    buffers = dict(model.named_buffers())
    module = dict(model.named_modules())[layer] if layer is not None else None

    def represent(p: dict[str, Tensor], inputs: Tensor) -> Tensor:
        found: list[Tensor] = []
        handle = module.register_forward_hook(lambda _m, _i, out: found.append(out)) if module else None
        try:
            out = functional_call(model, (p, buffers), (inputs,))
        finally:
            if handle is not None:
                handle.remove()
        return (found[0] if found else out).reshape(inputs.shape[0], -1)

    def single_loss(p: dict[str, Tensor], xj: Tensor, yj: Tensor) -> Tensor:
        return point_loss(functional_call(model, (p, buffers), (xj.unsqueeze(0),)), yj.unsqueeze(0)).sum()

    def change_after_step(xj: Tensor, yj: Tensor) -> Tensor:
        g = grad(single_loss)(params, xj, yj)
        stepped = {name: params[name] - lr * g[name] for name in params}
        return (represent(stepped, x) - base).norm(dim=-1)

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            base = represent(params, x)
        columns = [vmap(change_after_step)(x[idx], y[idx]).T for idx in torch.split(src, chunk_size)]
    finally:
        model.train(was_training)
    change = torch.cat(columns, dim=1).detach()
    own = change[src, torch.arange(src.numel())]
    return Elasticity(change=change, relative=change / own, sources=src)
