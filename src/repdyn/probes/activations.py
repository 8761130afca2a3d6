"""Hidden representations of any ``torch.nn.Module`` at named layers, read with forward hooks.

A layer name is a submodule name from ``model.named_modules()`` (e.g. ``"layer10"`` of
:class:`repdyn.nn.models.mlp.MLP`, ``"features.3"`` of a torchvision-style net); the representation is that
submodule's output. For an :class:`repdyn.nn.ensemble.Ensemble` the names are those of one member and every
result gets a leading K dimension.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

from repdyn.nn.ensemble import Ensemble, check_layer_names, representation_names


def layer_names(model: nn.Module) -> list[str]:
    """The layer names :func:`activations` accepts for ``model``."""
    return representation_names(model)


def check_layers(model: nn.Module, layers: Iterable[str]) -> list[str]:
    """``layers`` as a list; raises a ValueError listing the available names if any is unknown."""
    layers = list(layers)
    if not layers:
        raise ValueError("no layer names given; available: " + ", ".join(layer_names(model)))
    check_layer_names(layers, layer_names(model) if isinstance(model, Ensemble)
                    else [name for name, _ in model.named_modules() if name])
    return layers


@torch.no_grad()
def activations(
    model: nn.Module,
    x: Tensor,
    layers: Iterable[str],
    *,
    batch_size: int | None = None,
    eval_mode: bool = True,
) -> dict[str, Tensor]:
    """{name: representation of every input at that layer}, shape (n, ...) ((K, n, ...) for an ensemble).

    Runs without an autograd graph, in eval mode unless ``eval_mode=False`` (the module's mode is restored),
    in chunks of ``batch_size`` inputs when given.
    """
    layers = check_layers(model, layers)
    was_training = model.training
    model.train(not eval_mode and was_training)
    try:
        chunks = [x] if batch_size is None else list(torch.split(x, batch_size, dim=x.dim() - _ndim(model, x)))
        parts: dict[str, list[Tensor]] = {name: [] for name in layers}
        for chunk in chunks:
            for name, value in _forward_capture(model, chunk, layers).items():
                parts[name].append(value)
    finally:
        model.train(was_training)
    axis = 1 if isinstance(model, Ensemble) else 0
    return {name: torch.cat(values, dim=axis) for name, values in parts.items()}


def _ndim(model: nn.Module, x: Tensor) -> int:
    """Number of dims of one member's input batch: the split axis for chunking is x.dim() - this."""
    if isinstance(model, Ensemble):
        return model._input_dim()
    return x.dim()


def _forward_capture(model: nn.Module, x: Tensor, layers: list[str]) -> dict[str, Tensor]:
    if isinstance(model, Ensemble):
        return model.activations(x, layers)
    modules = dict(model.named_modules())
    found: dict[str, Tensor] = {}
    handles = [modules[name].register_forward_hook(lambda _m, _i, out, name=name: found.__setitem__(name, out))
               for name in layers]
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return found
