"""Model inputs as batches: a tensor (n, ...) or a dict / tuple / list of tensors that share the leading n (a
Hugging Face batch ``{"input_ids": ..., "attention_mask": ...}``, integer token ids, several input streams).

The probes and the monitor index, split and move such batches with these helpers, so that a model that takes
token ids or keyword inputs is measured the same way as one that takes a float tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils._pytree import tree_leaves, tree_map

Batch = Any
"""A tensor (n, ...) or a dict / tuple / list (nested) of tensors sharing the leading dimension n."""

ForwardFn = Callable[[nn.Module, Batch], Any]


def default_forward(model: nn.Module, batch: Batch) -> Any:
    """``model(**batch)`` for a dict batch, else ``model(batch)``."""
    return model(**batch) if isinstance(batch, dict) else model(batch)


def batch_tensors(batch: Batch) -> list[Tensor]:
    """The tensors of a batch (its leaves); raises ValueError when there are none or one is not a tensor."""
    leaves = tree_leaves(batch)
    if not leaves or not all(isinstance(t, Tensor) for t in leaves):
        kinds = sorted({type(t).__name__ for t in leaves}) or ["nothing"]
        raise ValueError(f"a batch must be a tensor (n, ...) or a dict/tuple/list of tensors (n, ...), got {kinds}")
    return leaves


def batch_length(batch: Batch) -> int:
    """n, the shared leading dimension; raises ValueError when the tensors disagree or are 0-dimensional."""
    sizes = {t.shape[0] if t.dim() else None for t in batch_tensors(batch)}
    if len(sizes) != 1 or None in sizes:
        shapes = [tuple(t.shape) for t in batch_tensors(batch)]
        raise ValueError(f"the tensors of a batch must share their leading dimension n, got shapes {shapes}")
    return int(sizes.pop())


def take(batch: Batch, index: Tensor | slice) -> Batch:
    """The rows ``index`` of every tensor of the batch."""
    return tree_map(lambda t: t[index], batch)


def chunks(batch: Batch, size: int) -> list[Batch]:
    """Consecutive row blocks of at most ``size`` rows (``torch.split`` for batches)."""
    n = batch_length(batch)
    return [take(batch, slice(start, start + size)) for start in range(0, n, size)]


def to_device(batch: Batch, device: torch.device) -> Batch:
    return tree_map(lambda t: t.detach().to(device), batch)


def unsqueeze(batch: Batch) -> Batch:
    """One input as a batch of one (a leading dimension of size 1 on every tensor)."""
    return tree_map(lambda t: t.unsqueeze(0), batch)


def grad_leaves(batch: Batch) -> Batch:
    """Detached copies of the tensors, floating-point ones requiring grad (integer token ids cannot)."""
    return tree_map(lambda t: t.detach().requires_grad_(t.is_floating_point()), batch)


def describe(batch: Batch) -> str:
    """Shapes and dtypes, for messages: ``(24, 6) float32`` or ``{input_ids: (24, 8) int64, ...}``."""
    if isinstance(batch, Tensor):
        return f"{tuple(batch.shape)} {str(batch.dtype).removeprefix('torch.')}"
    if isinstance(batch, dict):
        return "{" + ", ".join(f"{k}: {describe(v)}" for k, v in batch.items()) + "}"
    if isinstance(batch, tuple | list):
        return "(" + ", ".join(describe(v) for v in batch) + ")"
    return type(batch).__name__
