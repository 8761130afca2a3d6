"""XOR of seed 000 (App. B.2): (0,0)→0, (1,0)→1, (0,1)→1, (1,1)→0."""

from __future__ import annotations

import torch


def xor_data(dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """(x (4, 2), y (4, 1)) in the order of App. B.2; same-output pairs are (0, 3) and (1, 2)."""
    x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=dtype)
    y = torch.tensor([[0.0], [1.0], [1.0], [0.0]], dtype=dtype)
    return x, y
