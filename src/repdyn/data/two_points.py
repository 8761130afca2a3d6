"""The two-point dataset of seed 000 (App. B.1): inputs −1 and −1 + dx, targets 0.6 and 0.6 + dy (spec 000 §3.2;
the minus signs are lost in the paper's rendered text, the LaTeX has them)."""

from __future__ import annotations

import numpy as np
import torch


def two_point_data(dx: float | np.ndarray = 0.5, dy: float | np.ndarray = 1.0, *, x_first: float = -1.0,
                   y_first: float = 0.6, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) of shape (2, 1) each; with array-valued dx, dy (same shape S) a batch (S, 2, 1) of pairs, e.g. one
    per ensemble member for a (dx, dy) sweep (Fig. 5)."""
    dx_arr, dy_arr = np.asarray(dx, dtype=float), np.asarray(dy, dtype=float)
    if dx_arr.shape != dy_arr.shape:
        raise ValueError(f"dx and dy must have the same shape, got {dx_arr.shape} and {dy_arr.shape}")
    if np.any(dx_arr <= 0) or not np.all(np.isfinite(dx_arr)):
        raise ValueError(f"dx={dx!r} must be finite and > 0 (two distinct inputs)")
    if not np.all(np.isfinite(dy_arr)):
        raise ValueError(f"dy={dy!r} must be finite")
    x = np.stack([np.full(dx_arr.shape, x_first), x_first + dx_arr], axis=-1)[..., None]
    y = np.stack([np.full(dy_arr.shape, y_first), y_first + dy_arr], axis=-1)[..., None]
    return torch.as_tensor(x, dtype=dtype), torch.as_tensor(y, dtype=dtype)
