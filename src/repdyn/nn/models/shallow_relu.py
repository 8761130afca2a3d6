"""Batched shallow univariate ReLU networks (Eq. 1 of seed 001) and their initialisation families I1-I6.

Many networks (widths, δ values, seeds) train as one computation: parameters are stacked as (B, M) tensors and
narrower networks are padded with inert neurons a = b = c = 0 (all three of their gradients vanish, so they
never move and never contribute). Each network has its own α, its own frozen layers (δ = ±∞ by freezing, I5)
and its own step size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from repdyn.theory.shallow_relu import from_canonical, tangent_kernel, to_canonical

__all__ = ["Params", "ShallowReLUBatch", "adaptive_limit_init", "mean_amplitude", "pytorch_default_init", "rescale",
           "uniform_init", "with_imbalance"]

Params = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(a, b, c) of one network, float64 arrays of shape (m,)."""


# ---------------------------------------------------------------------------------------------------------
# Initialisation families I1-I6 (spec 001 §2.9); each returns (a, b, c)
# ---------------------------------------------------------------------------------------------------------

def pytorch_default_init(m: int, rng: np.random.Generator, c_bound: str = "sqrt") -> Params:
    """I1: PyTorch's nn.Linear default for α = 1 without output bias: a, b ~ U(−1, 1) and
    c ~ U(−1/√m, 1/√m) (``c_bound="sqrt"``, what PyTorch draws, spec 001 erratum E12) or U(−1/m, 1/m)
    (``"paper"``, App. D of seed 001)."""
    if c_bound not in ("sqrt", "paper"):
        raise ValueError(f"c_bound={c_bound!r} is not allowed: use 'sqrt' (PyTorch) or 'paper' (1/m)")
    _check_width(m)
    bound = 1 / np.sqrt(m) if c_bound == "sqrt" else 1 / m
    a, b = rng.uniform(-1, 1, (2, m))
    return a, b, rng.uniform(-bound, bound, m)


def uniform_init(m: int, rng: np.random.Generator, c_scale: float, paired: bool = True) -> Params:
    """I2 (+ I3 when ``paired``): a, b ~ U(−1, 1) i.i.d., c = c_scale · U(−1, 1).

    Pairing (I3, needs m even): neuron i + m/2 copies (a_i, b_i) with c_{i+m/2} = −c_i, so f_0 ≡ 0 and the
    kernel-regime limit is the interpolant of y itself (pitfall P1). spec 001 recommends c_scale = 1/√m at
    α = √m (canonical radius O(1)); c_scale = 1 is the lazier paper-faithful variant.
    """
    _check_width(m)
    if c_scale <= 0:
        raise ValueError(f"c_scale={c_scale} must be positive")
    if not paired:
        a, b, c = rng.uniform(-1, 1, (3, m))
        return a, b, c_scale * c
    if m % 2:
        raise ValueError(f"paired initialisation needs an even width, got m={m}")
    a, b, c = rng.uniform(-1, 1, (3, m // 2))
    return np.tile(a, 2), np.tile(b, 2), c_scale * np.concatenate([c, -c])


def with_imbalance(params: Params, delta: float, kappa: float = 1.0) -> Params:
    """I4: the same neurons (r_i, θ_i), hence the same function, with δ_i = δ for every neuron (inverse map of
    Eq. 45, spec 001 §2.2). κ only has to match between the two maps; the result does not depend on it."""
    r, theta = to_canonical(*params, kappa)
    return from_canonical(r, theta, delta, kappa)


def mean_amplitude(params: Params) -> float:
    """r̄ = mean_i |r̂_i| = mean_i |c_i| √(a_i² + b_i²), the unit of δ in λ = δ/r̄ (spec 001 P2, I4)."""
    a, b, c = params
    return float(np.mean(np.abs(c) * np.hypot(a, b)))


def adaptive_limit_init(params: Params, c_value: float = 1.0) -> Params:
    """I5 for δ = +∞: c_i = sign(c_i) c_∞ and √(a_i² + b_i²) = |r̂_i|/c_∞ at the same θ_i (same function, uniform
    mobility κ² c_∞²); train (a, b) only. For δ = −∞ keep the parameters and train c only."""
    if c_value <= 0:
        raise ValueError(f"c_value={c_value} must be positive")
    a, b, c = params
    scale = np.abs(c) / c_value
    return a * scale, b * scale, np.where(c >= 0, c_value, -c_value)


def rescale(params: Params, k: float) -> Params:
    """I6: (a, b, c) ↦ (k a, k b, c/k), the same function with δ_i(k) = c_i²/k² − k²(a_i² + b_i²) (Fig. 7)."""
    if k <= 0:
        raise ValueError(f"k={k} must be positive")
    a, b, c = params
    return k * a, k * b, c / k


def _check_width(m: int) -> None:
    if m < 1:
        raise ValueError(f"width m={m} must be at least 1")


# ---------------------------------------------------------------------------------------------------------
# A batch of networks
# ---------------------------------------------------------------------------------------------------------

@dataclass
class ShallowReLUBatch:
    """B networks of Eq. (1) stacked as (B, M) float64 tensors (padding neurons are a = b = c = 0).

    alpha: (B,) output normalisations; train_ab / train_c: (B,) which layers gradient descent updates.
    """

    a: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor
    alpha: torch.Tensor
    train_ab: torch.Tensor
    train_c: torch.Tensor

    @classmethod
    def stack(cls, nets: Sequence[Params], alpha: Sequence[float], train_ab: Sequence[bool] | bool = True,
              train_c: Sequence[bool] | bool = True, device: str = "cpu") -> ShallowReLUBatch:
        """Stack networks of possibly different widths, padding with inert zero neurons."""
        if not nets:
            raise ValueError("need at least one network")
        n = len(nets)
        width = max(len(p[0]) for p in nets)
        stacked = np.zeros((3, n, width))
        for i, p in enumerate(nets):
            stacked[:, i, : len(p[0])] = np.stack(p)

        def flags(v: Sequence[bool] | bool, name: str) -> torch.Tensor:
            v = [v] * n if isinstance(v, bool) else list(v)
            if len(v) != n:
                raise ValueError(f"{name} has {len(v)} entries for {n} networks")
            return torch.tensor(v, dtype=torch.bool, device=device)

        if len(alpha) != n:
            raise ValueError(f"alpha has {len(alpha)} entries for {n} networks")
        t = torch.tensor(stacked, dtype=torch.float64, device=device)
        return cls(t[0], t[1], t[2], torch.tensor(alpha, dtype=torch.float64, device=device),
                   flags(train_ab, "train_ab"), flags(train_c, "train_c"))

    def params(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a, b, c) as NumPy arrays of shape (B, M)."""
        return tuple(t.detach().cpu().numpy().copy() for t in (self.a, self.b, self.c))

    def tangent_kernel(self, x: torch.Tensor) -> torch.Tensor:
        """Θ of the trained parameters on x, shape (B, n, n) (Eq. 3 of seed 001)."""
        return tangent_kernel(x, self.a, self.b, self.c, self.alpha, self.train_ab, self.train_c)
