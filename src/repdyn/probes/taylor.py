"""First- and second-order Taylor terms of a map between pairs of inputs (seed 000, App. C.4, Fig. 14).

For pairs (x₁, x₂) with Δ = x₂ − x₁ and a map f (a hidden representation h or the output y):

- first: ‖J_f(x₁) Δ‖, the linear term (a forward-mode JVP);
- second: ‖½ Δᵀ ∇²f(x₁) Δ‖, the second-order term (a JVP of the JVP, both along Δ);
- remainder: ‖f(x₂) − f(x₁) − J_f(x₁) Δ‖, every term beyond the linear one.

For a piecewise-linear network (ReLU, leaky ReLU) ∇²f vanishes almost everywhere, so ``second`` is 0 and the
higher-order terms are all in ``remainder`` (the kinks between x₁ and x₂). ``f`` acts row by row: it maps a
batch (n, d) to (..., n, m) (an :class:`repdyn.nn.ensemble.Ensemble` adds a leading K) with row i depending on
input i only; the norms are over the last dimension. ``f`` may return a tuple of such maps (e.g. h and y from one
forward pass), which shares the passes between them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import jvp


@dataclass(frozen=True)
class TaylorTerms:
    """Norms per pair, shape (..., n): first, second and remainder as in the module docstring."""

    first: Tensor
    second: Tensor
    remainder: Tensor


def _terms(f: Callable[[Tensor], Tensor | tuple[Tensor, ...]], x1: Tensor, x2: Tensor
           ) -> tuple[list[TaylorTerms], bool]:
    """The terms of each output of ``f`` for these pairs, and whether ``f`` returns a tuple."""
    delta = x2 - x1

    def directional(x: Tensor) -> Tensor | tuple[Tensor, ...]:
        return jvp(f, (x,), (delta,))[1]

    def listed(value: Tensor | tuple[Tensor, ...]) -> list[Tensor]:
        return list(value) if isinstance(value, tuple) else [value]

    (f1, linear), (_, curvature) = jvp(f, (x1,), (delta,)), jvp(directional, (x1,), (delta,))
    terms = [TaylorTerms(lin.detach().norm(dim=-1), (0.5 * curv).detach().norm(dim=-1),
                         (end - start - lin).detach().norm(dim=-1))
             for start, lin, curv, end in zip(listed(f1), listed(linear), listed(curvature), listed(f(x2)),
                                              strict=True)]
    return terms, isinstance(f1, tuple)


def taylor_terms(f: Callable[[Tensor], Tensor | tuple[Tensor, ...]], x1: Tensor, x2: Tensor,
                 chunk: int | None = None) -> TaylorTerms | tuple[TaylorTerms, ...]:
    """The Taylor terms of ``f`` at ``x1`` along ``x2 - x1``, one pair per row of ``x1`` and ``x2`` (a tuple of
    them when ``f`` returns a tuple). With ``chunk``, the pairs are taken ``chunk`` rows at a time (the same
    values; the memory of the nested JVPs then grows with ``chunk``, not with the number of pairs)."""
    if x1.shape != x2.shape:
        raise ValueError(f"x1 and x2 must have the same shape, got {tuple(x1.shape)} and {tuple(x2.shape)}")
    if chunk is not None and chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    x1, x2 = x1.detach(), x2.detach()
    size = chunk or max(len(x1), 1)
    parts, tupled = zip(*(_terms(f, a, b) for a, b in zip(torch.split(x1, size), torch.split(x2, size),
                                                              strict=True)), strict=True)
    joined = tuple(TaylorTerms(*(torch.cat([getattr(p[i], name) for p in parts], dim=-1)
                                 for name in ("first", "second", "remainder"))) for i in range(len(parts[0])))
    return joined if tupled[0] else joined[0]
