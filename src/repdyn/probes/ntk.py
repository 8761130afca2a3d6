"""Empirical neural tangent kernel Θ(x, x') = Σ_θ ∂f(x)/∂θ · ∂f(x')/∂θ of any ``torch.nn.Module``.

Two exact methods, chosen per parameter (``method="auto"``):

- ``nn.Linear`` layers applied once to (p, d_in) inputs: the per-sample gradient of f_a with respect to W is
  the outer product δ_a(x) a(x)ᵀ of the back-propagated signal δ_a = ∂f_a/∂z at the layer output z = Wa + b and
  the layer input a, so the layer contributes (δ_a(x)·δ_b(x'))·(a(x)·a(x') + 1) (the 1 from the bias) without
  ever forming a Jacobian: O(p²(d_in + d_out)) work and O(p(d_in + d_out)) memory per layer.
- every other parameter: per-sample Jacobians from ``torch.func`` (``jacrev`` under ``vmap`` over chunks of
  inputs; where vmap cannot trace the forward pass, e.g. data-dependent control flow on an attention mask, one
  ``jacrev`` per input), flattened to (p·d_out, P) and contracted with one GEMM when the whole Jacobian fits in
  ``max_jacobian_bytes`` (p = 2048 inputs of a 10⁵-parameter model need 0.8 GiB in float32); otherwise block
  by block, caching Jacobian chunks up to that size and recomputing the rest, in buffers allocated once, so
  memory stays bounded (also under glibc's dynamic mmap threshold).

``method="jacobian"`` uses the second for everything. The model must treat inputs independently (no batch
statistics), as in eval mode. Inputs may be integer token ids or a dict of tensors (:mod:`repdyn.probes.batch`):
the kernel differentiates with respect to the parameters only, and ``forward(model, batch)`` adapts a model whose
call or output is not ``model(x) -> tensor`` (e.g. ``lambda m, b: m(**b).logits``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, vmap

from repdyn.probes.batch import Batch, ForwardFn, batch_length, chunks, grad_leaves, take, unsqueeze


def _chosen_parameters(model: nn.Module, names: Iterable[str] | None) -> list[str]:
    named = dict(model.named_parameters())
    if names is None:
        chosen = [n for n, p in named.items() if p.requires_grad]
    else:
        chosen = list(names)
        missing = [n for n in chosen if n not in named]
        if missing:
            raise ValueError(f"unknown parameter name(s) {missing}; available: {', '.join(named)}")
    if not chosen:
        raise ValueError("the NTK needs at least one parameter to differentiate")
    return chosen


def _parameter_split(model: nn.Module, names: Iterable[str]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    named = {n: p.detach() for n, p in model.named_parameters()}
    wrt = {n: named[n] for n in names}
    frozen = {n: p for n, p in named.items() if n not in wrt}
    frozen.update({n: b for n, b in model.named_buffers()})
    return wrt, frozen


class _Applied(nn.Module):
    """``forward(model, batch)`` as a module, so that torch.func.functional_call can swap the model's parameters."""

    def __init__(self, model: nn.Module, forward: ForwardFn) -> None:
        super().__init__()
        self.model = model
        self.apply_fn = forward

    def forward(self, batch: Batch) -> Tensor:
        return self.apply_fn(self.model, batch)


def jacobian_fn(model: nn.Module, params: Iterable[str] | None = None, forward: ForwardFn | None = None
                ) -> Callable[[Batch, Tensor | None], Tensor]:
    """A function ``jac(chunk, out=None)`` giving the flattened Jacobian (c, d_out, P) of the outputs on a chunk
    of inputs (c, ...) with respect to the chosen parameters (all trainable ones by default); with ``out`` (a
    (c, d_out, P) view, e.g. rows of a preallocated whole Jacobian) it is written there without a temporary.
    Inputs are never differentiated (they may be integer token ids or a dict batch, see ``forward``)."""
    wrt, frozen = _parameter_split(model, _chosen_parameters(model, params))
    target: nn.Module = model
    if forward is not None:
        target = _Applied(model, forward)
        wrt = {f"model.{k}": v for k, v in wrt.items()}
        frozen = {f"model.{k}": v for k, v in frozen.items()}

    def single(p: dict[str, Tensor], xi: Batch) -> Tensor:
        return functional_call(target, (p, frozen), (unsqueeze(xi),)).reshape(-1)

    vmapped = vmap(jacrev(single), in_dims=(None, 0))
    one = jacrev(single)
    traced = [True]  # False once vmap failed to trace the forward pass: then one input at a time

    def per_sample(chunk: Batch) -> dict[str, Tensor]:
        if traced[0]:
            try:
                return vmapped(wrt, chunk)
            except RuntimeError as error:
                if "vmap" not in str(error):
                    raise
                traced[0] = False  # data-dependent control flow (e.g. an attention mask checked for padding)
        rows = [one(wrt, take(chunk, i)) for i in range(batch_length(chunk))]
        return {k: torch.stack([r[k] for r in rows]) for k in rows[0]}

    def jac(chunk: Batch, out: Tensor | None = None) -> Tensor:
        blocks = [b.reshape(b.shape[0], b.shape[1], -1) for b in per_sample(chunk).values()]  # 0-dim too
        if out is None:
            return torch.cat(blocks, dim=2)
        offset = 0
        for block in blocks:
            out[:, :, offset:offset + block.shape[2]].copy_(block)
            offset += block.shape[2]
        return out

    return jac


def _whole_jacobian(jac: Callable[[Batch, Tensor | None], Tensor], x: Batch, chunk_size: int, first: Tensor
                    ) -> Tensor:
    n = batch_length(x)
    whole = torch.empty((n, *first.shape[1:]), dtype=first.dtype, device=first.device)
    for start in range(0, n, chunk_size):
        jac(take(x, slice(start, start + chunk_size)), whole[start:start + chunk_size])
    return whole


@torch.no_grad()
def _gram(ja: Tensor, jb: Tensor, output: str) -> Tensor:
    ca, d, _ = ja.shape
    cb = jb.shape[0]
    if output == "trace":
        return torch.einsum("iap,jap->ij", ja, jb) if d > 1 else ja[:, 0] @ jb[:, 0].T
    return (ja.reshape(ca * d, -1) @ jb.reshape(cb * d, -1).T).reshape(ca, d, cb, d).permute(0, 2, 1, 3)


def _symmetric_gram(jac: Tensor, output: str, blocks: int = 8, min_rows: int = 256) -> Tensor:
    """J Jᵀ from the upper block triangle only: (b + 1)/(2b) of the full GEMM's work for b row blocks."""
    p = jac.shape[0]
    b = max(1, min(blocks, p // min_rows))
    edges = [round(i * p / b) for i in range(b + 1)]
    d = jac.shape[1]
    shape = (p, p) if output == "trace" else (p, p, d, d)
    kernel = torch.empty(shape, dtype=jac.dtype, device=jac.device)
    for i in range(b):
        rows = slice(edges[i], edges[i + 1])
        for j in range(i, b):
            cols = slice(edges[j], edges[j + 1])
            block = _gram(jac[rows], jac[cols], output)
            kernel[rows, cols] = block
            if j > i:
                kernel[cols, rows] = block.transpose(0, 1) if output == "trace" else block.permute(1, 0, 3, 2)
    return kernel


def _jacobian_ntk(model: nn.Module, x: Batch, x2: Batch | None, params: list[str], output: str,
                  chunk_size: int, max_jacobian_bytes: int, forward: ForwardFn | None) -> Tensor:
    jac = jacobian_fn(model, params, forward)
    symmetric = x2 is None
    x2 = x if x2 is None else x2
    first = jac(take(x, slice(0, 1)))
    row_bytes = first.numel() * first.element_size()
    if (batch_length(x) + (0 if symmetric else batch_length(x2))) * row_bytes <= max_jacobian_bytes:
        # everything fits: one Jacobian per input set and a single large GEMM
        ja = _whole_jacobian(jac, x, chunk_size, first)
        if not symmetric:
            return _gram(ja, _whole_jacobian(jac, x2, chunk_size, first), output)
        return _symmetric_gram(ja, output)
    return _blocked_jacobian_ntk(jac, x, x2, symmetric, output, chunk_size, max_jacobian_bytes, first)


def _blocked_jacobian_ntk(jac: Callable[[Batch, Tensor | None], Tensor], x: Batch, x2: Batch, symmetric: bool,
                          output: str, chunk_size: int, max_jacobian_bytes: int, first: Tensor) -> Tensor:
    """The kernel block by block: Jacobian chunks of x2 kept in slots up to ``max_jacobian_bytes``, the others
    recomputed for every block row. The kernel, the slots and one row and one column chunk are allocated before
    the loop and written in place, so every block row allocates and frees the same transients. (Fresh chunk and
    block tensors, alternating with long-lived ones, fragmented glibc's heap once its dynamic mmap threshold had
    risen to a chunk's size: 2.2 GiB above start at a 0.05 GiB setting.)"""
    n, n2 = batch_length(x), batch_length(x2)
    d = first.shape[1]
    like = {"dtype": first.dtype, "device": first.device}
    kernel = torch.empty((n, n2) if output == "trace" else (n, n2, d, d), **like)
    chunk_shape = (chunk_size, *first.shape[1:])
    # separate tensors, not views of one: the BLAS's rounding depends on the operands' alignment
    slots = [torch.empty(chunk_shape, **like)
             for _ in range(max_jacobian_bytes // (chunk_size * first[0].numel() * first.element_size()))]
    scratch = {"row": torch.empty(chunk_shape, **like), "col": torch.empty(chunk_shape, **like)}
    slot_of: dict[int, int] = {}  # chunk of x2 -> its slot
    free = list(range(len(slots)))[::-1]

    def jacobian(batch: Batch, index: slice, j: int | None, buffer: str) -> Tensor:
        size = index.stop - index.start
        if j is not None and j in slot_of:
            return slots[slot_of[j]][:size]
        if j is not None and free:
            slot_of[j] = free.pop()
            return jac(take(batch, index), slots[slot_of[j]][:size])
        return jac(take(batch, index), scratch[buffer][:size])

    blocks = [slice(start, min(start + chunk_size, n2)) for start in range(0, n2, chunk_size)]
    for i, start in enumerate(range(0, n, chunk_size)):
        rows = slice(start, min(start + chunk_size, n))
        ja = jacobian(x, rows, i if symmetric else None, "row")
        for j, cols in enumerate(blocks):
            if symmetric and j < i:  # written as the transpose of block (j, i)
                continue
            jb = ja if symmetric and j == i else jacobian(x2, cols, j, "col")
            block = _gram(ja, jb, output)
            kernel[rows, cols] = block
            if symmetric and j > i:
                kernel[cols, rows] = block.transpose(0, 1) if output == "trace" else block.permute(1, 0, 3, 2)
        if symmetric and i in slot_of:  # rows below i read block (i, j) transposed: chunk i is done
            free.append(slot_of.pop(i))
    return kernel


def _linear_factors(model: nn.Module, x: Batch, linears: dict[str, nn.Module], chunk_size: int,
                    forward: ForwardFn | None) -> dict[str, tuple[Tensor, Tensor]]:
    """{layer: (inputs a (p, d_in), signals δ (d_out_model, p, d_out_layer))} for those of the given linear
    layers that are applied exactly once, to a (chunk, d_in) input (the others are left out)."""
    parts: dict[str, list[tuple[Tensor, Tensor]]] = {}
    for chunk in chunks(x, chunk_size):
        size = batch_length(chunk)
        seen: dict[str, list[tuple[Tensor, Tensor]]] = {name: [] for name in linears}
        handles = [module.register_forward_hook(
            lambda _m, args, out, name=name, seen=seen: seen[name].append((args[0], out)))
            for name, module in linears.items()]
        try:
            with torch.enable_grad():  # parameters only: integer token ids cannot (and need not) require grad
                out = model(grad_leaves(chunk)) if forward is None else forward(model, grad_leaves(chunk))
        finally:
            for handle in handles:
                handle.remove()
        eligible = [name for name, v in seen.items()
                    if len(v) == 1 and v[0][0].dim() == 2 and v[0][0].shape[0] == size]
        if not parts:
            parts = {name: [] for name in eligible}
        elif set(eligible) != set(parts):
            raise RuntimeError("the model's layer structure changed between input chunks")
        if not parts:
            return {}
        names = list(parts)
        flat = out.reshape(size, -1)
        zs = [seen[name][0][1] for name in names]
        signals = [torch.autograd.grad(flat[:, a].sum(), zs, retain_graph=a + 1 < flat.shape[1],
                                       materialize_grads=True) for a in range(flat.shape[1])]
        for idx, name in enumerate(names):
            parts[name].append((seen[name][0][0].detach(), torch.stack([s[idx] for s in signals])))
    return {name: (torch.cat([a for a, _ in v]), torch.cat([d for _, d in v], dim=1)) for name, v in parts.items()}


def _linear_ntk(factors: dict[str, tuple[Tensor, Tensor]], factors2: dict[str, tuple[Tensor, Tensor]],
                terms: dict[str, tuple[bool, bool]], output: str) -> Tensor:
    """Σ_layers (δ_a·δ'_b)·(w·(a·a') + b) with w, b = whether the layer's weight / bias are differentiated."""
    total: Tensor | None = None
    for name, (weight, bias) in terms.items():
        a, d = factors[name]
        a2, d2 = factors2[name]
        inputs = (a @ a2.T if weight else torch.zeros(a.shape[0], a2.shape[0], dtype=a.dtype, device=a.device))
        inputs = inputs + 1.0 if bias else inputs
        if output == "trace":
            part = torch.einsum("aiu,aju->ij", d, d2) * inputs
        else:
            part = torch.einsum("aiu,bju->ijab", d, d2) * inputs[:, :, None, None]
        total = part if total is None else total + part
    assert total is not None
    return total


def empirical_ntk(
    model: nn.Module,
    x: Batch,
    x2: Batch | None = None,
    *,
    forward: ForwardFn | None = None,
    params: Iterable[str] | None = None,
    output: str = "trace",
    method: str = "auto",
    chunk_size: int = 128,
    max_jacobian_bytes: int = 2**30,
) -> Tensor:
    """The empirical NTK Gram matrix of ``model`` between inputs ``x`` (p, ...) and ``x2`` (default ``x``).

    Args:
        x, x2: tensors (p, ...), float inputs or integer token ids, or dict/tuple batches of them
            (:mod:`repdyn.probes.batch`); only the parameters are differentiated.
        forward: ``forward(model, batch) -> (p, d_out) tensor`` when the model is not called as ``model(x)`` or
            does not return a tensor (e.g. ``lambda m, b: m(**b).logits``); default ``model(x)``.
        params: parameter names to differentiate (e.g. only the last layer); default all trainable ones.
        output: "trace" sums Θ_ab over the output index a = b, giving (p, p2) (the plain kernel for scalar
            outputs); "full" gives (p, p2, d_out, d_out).
        method: "auto" (the linear-layer factorisation where it applies, Jacobians elsewhere) or "jacobian".
        chunk_size: inputs per forward/backward or vmapped Jacobian computation.
        max_jacobian_bytes: when the Jacobians of x and x2 fit in this many bytes they are formed whole and
            contracted in one GEMM; otherwise chunks are cached up to this size and the rest recomputed for
            every block row (slower, bounded memory).

    Runs in eval mode (the module's mode is restored) and returns a tensor without autograd history.
    """
    if output not in ("trace", "full"):
        raise ValueError(f"output must be 'trace' or 'full', got {output!r}")
    if method not in ("auto", "jacobian"):
        raise ValueError(f"method must be 'auto' or 'jacobian', got {method!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    chosen = _chosen_parameters(model, params)
    was_training = model.training
    model.eval()
    try:
        terms: dict[str, tuple[bool, bool]] = {}
        if method == "auto":
            for name, module in model.named_modules():
                if type(module) is nn.Linear:
                    prefix = f"{name}." if name else ""
                    weight, bias = f"{prefix}weight" in chosen, f"{prefix}bias" in chosen
                    if weight or bias:
                        terms[name] = (weight, bias)
        kernel: Tensor | None = None
        if terms:
            linears = {name: dict(model.named_modules())[name] for name in terms}
            factors = _linear_factors(model, x, linears, chunk_size, forward)
            factors2 = factors if x2 is None else _linear_factors(model, x2, linears, chunk_size, forward)
            terms = {name: terms[name] for name in factors}
            if terms:
                kernel = _linear_ntk(factors, factors2, terms, output)
        covered = {f"{name}.{kind}" if name else kind for name in terms for kind in ("weight", "bias")}
        rest = [n for n in chosen if n not in covered]
        if rest:
            jac_kernel = _jacobian_ntk(model, x, x2, rest, output, chunk_size, max_jacobian_bytes, forward)
            kernel = jac_kernel if kernel is None else kernel + jac_kernel
        assert kernel is not None
        return kernel.detach()
    finally:
        model.train(was_training)


def empirical_ntk_with_gram(
    model: nn.Module,
    x: Batch,
    x2: Batch,
    *,
    forward: ForwardFn | None = None,
    params: Iterable[str] | None = None,
    output: str = "trace",
    chunk_size: int = 128,
    max_jacobian_bytes: int = 2**30,
) -> tuple[Tensor, Tensor]:
    """(Θ(x, x2), Θ(x2, x2)): what ``empirical_ntk(model, x, x2, method="jacobian", …)`` and
    ``empirical_ntk(model, x2, method="jacobian", …)`` return, the same bits, with x2's Jacobian formed once
    (e.g. a test-set kernel and the training Gram matrix). When the two Jacobians do not fit
    ``max_jacobian_bytes`` it is those two calls."""
    kw = {"forward": forward, "params": params, "output": output, "method": "jacobian", "chunk_size": chunk_size,
          "max_jacobian_bytes": max_jacobian_bytes}
    if output not in ("trace", "full") or chunk_size < 1:
        return empirical_ntk(model, x, x2, **kw), empirical_ntk(model, x2, **kw)  # their errors
    was_training = model.training
    model.eval()
    try:
        jac = jacobian_fn(model, _chosen_parameters(model, params), forward)
        first = jac(take(x2, slice(0, 1)))
        if (batch_length(x) + batch_length(x2)) * first.numel() * first.element_size() > max_jacobian_bytes:
            return empirical_ntk(model, x, x2, **kw), empirical_ntk(model, x2, **kw)
        j2 = _whole_jacobian(jac, x2, chunk_size, first)
        return (_gram(_whole_jacobian(jac, x, chunk_size, first), j2, output).detach(),
                _symmetric_gram(j2, output).detach())
    finally:
        model.train(was_training)
