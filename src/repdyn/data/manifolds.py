"""Invariant-manifold data of seed 003: Gaussian inputs whose label depends on a linear subspace only.

Stripe model (d_∥ = 1, §3): y = −1 if x_min < x₁ < x_max, else +1. Cylinder model (d_∥ = 2, §4): y = +1 if
‖(x₁, x₂)‖ > R, else −1 (the paper's sign; the reference code flips it, which is statistically irrelevant).
Informative coordinates come first (App. A: the statistics are invariant to rotating the subspace).
"""

from __future__ import annotations

import torch

from repdyn.theory.compression import CYLINDER_RADIUS, STRIPE_X_MAX, STRIPE_X_MIN

MODELS = {"stripe": 1, "cylinder": 2}
"""Model name → informative dimension d_∥."""


def informative_dimension(model: str) -> int:
    """d_∥ of ``model`` ("stripe": 1, "cylinder": 2)."""
    if model not in MODELS:
        raise ValueError(f"model={model!r} is unknown: choose one of {', '.join(MODELS)}")
    return MODELS[model]


def manifold_labels(x: torch.Tensor, model: str) -> torch.Tensor:
    """Labels ±1 of inputs x (..., d) under the stripe or cylinder model (seed 003 §3, §4)."""
    d_par = informative_dimension(model)
    if x.shape[-1] <= d_par:
        raise ValueError(f"the {model} model needs d > {d_par}, got d={x.shape[-1]}")
    if model == "stripe":
        inside = (x[..., 0] > STRIPE_X_MIN) & (x[..., 0] < STRIPE_X_MAX)
    else:
        inside = x[..., :2].norm(dim=-1) <= CYLINDER_RADIUS
    return torch.where(inside, -1.0, 1.0).to(x.dtype)


def sample_manifold(model: str, n: int, d: int, generator: torch.Generator, batch: tuple[int, ...] = (),
                    dtype: torch.dtype = torch.float64, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y): x ~ N(0, I_d) of shape (*batch, n, d) and its labels (*batch, n), float64 by default."""
    if n < 1:
        raise ValueError(f"n={n} must be >= 1")
    x = torch.randn(*batch, n, d, generator=generator, dtype=dtype, device="cpu").to(device)
    return x, manifold_labels(x, model)


def compress(x: torch.Tensor, d_parallel: int, factor: torch.Tensor | float) -> torch.Tensor:
    """x_⊥ → x_⊥ / factor (Fig. 2 caption of seed 003: the compressed dataset, factor Λ* per trial).

    ``factor`` is a scalar or has the batch shape of x[..., 0, 0].
    """
    factor = torch.as_tensor(factor, dtype=x.dtype, device=x.device)
    if bool((factor <= 0).any()):
        raise ValueError(f"compression factor must be > 0, got {factor}")
    scale = torch.ones(x.shape[:-2] + (1, x.shape[-1]), dtype=x.dtype, device=x.device)
    scale[..., d_parallel:] = 1.0 / factor.reshape(factor.shape + (1, 1))
    return x * scale
