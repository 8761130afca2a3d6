"""The two-point dataset of seed 000: inputs −1 and −1 + dx, targets 0.6 and 0.6 + dy.

The default is the data of the authors' notebook experiments/2_points.ipynb with the default row of
experiments/model_settings/2 points.txt (dx² = 1, dy² = 0.5): inputs [−1, 0], targets [0.6, 0.6 + √0.5], the data
their figures were made from. App. B.1's text states dx = 0.5, dy = 1 (:data:`TEXT_DX`, :data:`TEXT_DY`)."""

from __future__ import annotations

import numpy as np
import torch

CODE_DX, CODE_DY = 1.0, float(np.sqrt(0.5))
"""(dx, dy) of the authors' notebooks (dx² = 1, dy² = 0.5): X = 1, Y = 0.5, loss plateau Y/8 = 0.0625."""
TEXT_DX, TEXT_DY = 0.5, 1.0
"""(dx, dy) as App. B.1's text states them: X = 0.25, Y = 1, plateau 0.125."""


def two_point_data(dx: float | np.ndarray = CODE_DX, dy: float | np.ndarray = CODE_DY, *, x_first: float = -1.0,
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
