"""First- and second-order Taylor terms of a map between pairs of inputs (seed 000, App. C.4, Fig. 14).

For pairs (x₁, x₂) with Δ = x₂ − x₁ and a map f (a hidden representation h or the output y):

- first: ‖J_f(x₁) Δ‖, the linear term (a forward-mode JVP);
- second: ‖½ Δᵀ ∇²f(x₁) Δ‖, the second-order term (a JVP of the JVP, both along Δ);
- remainder: ‖f(x₂) − f(x₁) − J_f(x₁) Δ‖, every term beyond the linear one.

For a piecewise-linear network (ReLU, leaky ReLU) ∇²f vanishes almost everywhere, so ``second`` is 0 and the
higher-order terms are all in ``remainder`` (the kinks between x₁ and x₂). ``f`` acts row by row: it maps a
batch (n, d) to (..., n, m) (an :class:`repdyn.nn.ensemble.Ensemble` adds a leading K) with row i depending on
input i only; the norms are over the last dimension.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor
from torch.func import jvp


@dataclass(frozen=True)
class TaylorTerms:
    """Norms per pair, shape (..., n): first, second and remainder as in the module docstring."""

    first: Tensor
    second: Tensor
    remainder: Tensor


def taylor_terms(f: Callable[[Tensor], Tensor], x1: Tensor, x2: Tensor) -> TaylorTerms:
    """The Taylor terms of ``f`` at ``x1`` along ``x2 - x1``, one pair per row of ``x1`` and ``x2``."""
    if x1.shape != x2.shape:
        raise ValueError(f"x1 and x2 must have the same shape, got {tuple(x1.shape)} and {tuple(x2.shape)}")
    x1, x2 = x1.detach(), x2.detach()
    delta = x2 - x1

    def directional(x: Tensor) -> Tensor:
        return jvp(f, (x,), (delta,))[1]

    (f1, linear), (_, curvature) = jvp(f, (x1,), (delta,)), jvp(directional, (x1,), (delta,))
    remainder = f(x2) - f1 - linear
    return TaylorTerms(linear.detach().norm(dim=-1), (0.5 * curvature).detach().norm(dim=-1),
                       remainder.detach().norm(dim=-1))
