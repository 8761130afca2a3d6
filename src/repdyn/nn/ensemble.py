"""K independent copies of a model trained as one batched computation.

The K members' parameters are stacked along a leading dimension (``Ensemble.params[name]`` has shape
(K, *shape)). Models that define ``forward_stacked(params, x, taps, generator)``
(e.g. :class:`repdyn.nn.models.mlp.MLP`) run with batched matmuls; any other ``nn.Module`` runs through
``torch.func.functional_call`` under ``vmap``.
Both paths compute, member by member, exactly what the ordinary module computes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

ModelFactory = Callable[..., nn.Module]
"""Builds one member: called as ``factory(generator=torch.Generator, **member_kwargs)``."""


def check_layer_names(requested: Iterable[str], available: Sequence[str]) -> None:
    """Raise one ``ValueError`` naming every requested layer that is not ``available``, and listing those that are."""
    missing = [name for name in requested if name not in available]
    if missing:
        raise ValueError(f"unknown layer name(s) {missing}; available: {', '.join(available)}")


def representation_names(model: nn.Module) -> list[str]:
    """Layer names a probe can read on ``model``: its own ``layer_names()`` if it has one, else every named
    submodule (``model.named_modules()``, without the root)."""
    if hasattr(model, "layer_names"):
        return list(model.layer_names())
    return [name for name, _ in model.named_modules() if name]


class Ensemble(nn.Module):
    """K copies of one architecture with stacked parameters.

    Build it from a factory and either per-member ``seeds`` or one ``generator`` (from which K seeds are drawn):
    member k is exactly ``factory(generator=torch.Generator().manual_seed(seeds[k]), **member_kwargs[k])``, so a
    one-by-one run can rebuild it. ``gains`` is shorthand for ``member_kwargs=[{"gain": g} for g in gains]``
    (per-member initial weight scales). ``device`` moves the stacked parameters after construction.

    Calling the ensemble on x of shape (n, d) (shared by all members) or (K, n, d) returns (K, n, d_out).
    """

    def __init__(
        self,
        factory: ModelFactory,
        k: int | None = None,
        *,
        seeds: Sequence[int] | None = None,
        generator: torch.Generator | None = None,
        gains: Sequence[float] | None = None,
        member_kwargs: Sequence[Mapping[str, Any]] | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        k = self._resolve_size(k, seeds, gains, member_kwargs)
        if seeds is None:
            if generator is None:
                raise ValueError("give per-member seeds or a torch.Generator to draw them from")
            seeds = torch.randint(0, 2**62, (k,), generator=generator, device=generator.device).tolist()
        kwargs: list[dict[str, Any]] = [dict(m) for m in member_kwargs] if member_kwargs else [{} for _ in range(k)]
        if gains is not None:
            for kw, gain in zip(kwargs, gains, strict=True):
                kw["gain"] = float(gain)
        self.seeds = [int(s) for s in seeds]
        members = [factory(generator=torch.Generator().manual_seed(s), **kw) for s, kw in zip(self.seeds, kwargs,
                                                                                               strict=True)]
        self._init_from(members, device)

    @classmethod
    def from_modules(cls, modules: Sequence[nn.Module], device: torch.device | str | None = None) -> Ensemble:
        """An ensemble whose members are copies of ``modules`` (same architecture, any weights)."""
        if not modules:
            raise ValueError("from_modules needs at least one module")
        ensemble = cls.__new__(cls)
        nn.Module.__init__(ensemble)
        ensemble.seeds = []
        ensemble._init_from(list(modules), device)
        return ensemble

    @staticmethod
    def _resolve_size(k: int | None, *sized: Sequence[Any] | None) -> int:
        sizes = {len(s) for s in sized if s is not None} | ({k} if k is not None else set())
        if len(sizes) != 1:
            raise ValueError(f"ensemble size is ambiguous or missing: k={k}, lengths of seeds/gains/member_kwargs "
                             f"give {sorted(sizes)}; give k or per-member sequences of one common length")
        size = sizes.pop()
        if size < 1:
            raise ValueError(f"an ensemble needs k >= 1 members, got {size}")
        return size

    def _init_from(self, members: list[nn.Module], device: torch.device | str | None) -> None:
        params, buffers = stack_module_state(members)
        base = copy.deepcopy(members[0])
        if device is not None:
            base = base.to(device)
        self.__dict__["base"] = base  # not a submodule: its own parameters are never trained
        self.k = len(members)
        self.params: dict[str, nn.Parameter] = {}
        self.buffers_: dict[str, Tensor] = {}
        for name, value in params.items():
            p = nn.Parameter(value.detach().to(device) if device is not None else value.detach())
            self.register_parameter(name.replace(".", "__"), p)
            self.params[name] = p
        for name, value in buffers.items():
            b = value.to(device) if device is not None else value
            self.register_buffer(name.replace(".", "__"), b)
            self.buffers_[name] = b
        self._stacked = hasattr(type(base), "forward_stacked")

    def _apply(self, fn: Callable[..., Any], recurse: bool = True) -> Ensemble:  # keep dict views in sync
        super()._apply(fn, recurse)
        self.__dict__["base"] = self.base._apply(fn)
        self.params = {name: getattr(self, name.replace(".", "__")) for name in self.params}
        self.buffers_ = {name: getattr(self, name.replace(".", "__")) for name in self.buffers_}
        return self

    def __len__(self) -> int:
        return self.k

    def train(self, mode: bool = True) -> Ensemble:
        super().train(mode)
        self.base.train(mode)
        return self

    def layer_names(self) -> list[str]:
        """Representations :meth:`activations` can return (those of one member)."""
        return representation_names(self.base)

    def forward(self, x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """(n, d) shared or (K, n, d) per-member inputs -> (K, n, d_out). ``generator`` draws dropout masks on
        the stacked path (train mode only)."""
        return self._run(x, (), generator)[0]

    def activations(self, x: Tensor, layers: Iterable[str]) -> dict[str, Tensor]:
        """{name: (K, n, ...)} for the named layers, in the current train/eval mode. An unknown name raises a
        ValueError listing the available ones."""
        layers = list(layers)
        check_layer_names(layers, self.layer_names())
        return self._run(x, layers, None)[1]

    def _run(self, x: Tensor, taps: Sequence[str], generator: torch.Generator | None
             ) -> tuple[Tensor, dict[str, Tensor]]:
        nd = self._input_dim()
        if x.dim() not in (nd, nd + 1) or (x.dim() == nd + 1 and x.shape[0] != self.k):
            raise ValueError(f"inputs must be one member's batch ({nd} dims) or K={self.k} batches ({nd + 1} dims, "
                             f"leading dim K), got shape {tuple(x.shape)}")
        if self._stacked:
            return self.base.forward_stacked(self.params, x, taps, generator)
        shared = x.dim() == nd
        modules = dict(self.base.named_modules())

        def one(params: dict[str, Tensor], buffers: dict[str, Tensor], xk: Tensor
                ) -> tuple[Tensor, dict[str, Tensor]]:
            found: dict[str, Tensor] = {}
            handles = [modules[name].register_forward_hook(
                lambda _m, _i, out, name=name: found.__setitem__(name, out)) for name in taps]
            try:
                out = functional_call(self.base, (params, buffers), (xk,))
            finally:
                for handle in handles:
                    handle.remove()
            return out, found

        batched = vmap(one, in_dims=(0, 0, None if shared else 0), randomness="different")
        return batched(self.params, self.buffers_, x)

    def _input_dim(self) -> int:
        """Number of dims of one member's input batch (2 for (n, d) vectors, 4 for (n, c, h, w) images)."""
        return getattr(self.base, "input_ndim", 2)

    def member(self, k: int) -> nn.Module:
        """Member ``k`` as an ordinary, independent ``nn.Module`` (a copy; changes do not flow back)."""
        if not 0 <= k < self.k:
            raise ValueError(f"member index must be in [0, {self.k}), got {k}")
        module = copy.deepcopy(self.base)
        state = {name: p[k].detach().clone() for name, p in self.params.items()}
        state.update({name: b[k].clone() for name, b in self.buffers_.items()})
        module.load_state_dict(state)
        return module

    def snapshot(self) -> dict[str, dict[str, Tensor]]:
        """A copy of every member's parameters and buffers (what a checkpoint keeps)."""
        return {"params": {n: p.detach().clone() for n, p in self.params.items()},
                "buffers": {n: b.clone() for n, b in self.buffers_.items()}}

    @torch.no_grad()
    def restore(self, state: dict[str, dict[str, Tensor]]) -> None:
        """Put back what :meth:`snapshot` copied, in place."""
        for name, value in state["params"].items():
            self.params[name].copy_(value)
        for name, value in state["buffers"].items():
            self.buffers_[name].copy_(value)

    def num_parameters(self) -> int:
        """Parameters of one member."""
        return sum(p[0].numel() for p in self.params.values())
