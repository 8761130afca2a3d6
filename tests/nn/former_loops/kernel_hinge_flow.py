"""``kernel_hinge_flow``: three trials that reach zero hinge loss at different steps, the same capped before two of
them do, and a single (p, p) Gram matrix."""

from __future__ import annotations

import numpy as np
import torch


def case() -> dict[str, np.ndarray]:
    try:
        from repdyn.nn.kernel_flow import kernel_hinge_flow
    except ImportError:  # the reference checkout, where the flow is in theory.compression
        from repdyn.theory.compression import kernel_hinge_flow

    generator = torch.Generator().manual_seed(7)
    x = torch.randn(3, 30, 2, generator=generator, dtype=torch.float64)
    y = torch.sign(x[..., 0] + 0.3 * x[..., 1])
    gap = torch.tensor([0.3, 0.6, 1.0], dtype=torch.float64)[:, None]  # a margin between the classes per trial
    x[..., 0] += gap * y
    gram = x @ x.transpose(1, 2) + 1.0
    out = {}
    for name, res in (("batched", kernel_hinge_flow(gram, y)), ("capped", kernel_hinge_flow(gram, y, max_steps=200)),
                      ("single", kernel_hinge_flow(gram[2], y[2], max_dgrad=1e-3, max_dout=0.05))):
        out.update({f"{name}_coefficients": res.coefficients.numpy(), f"{name}_time": res.time.numpy(),
                    f"{name}_steps": np.asarray(res.trajectory.stopped_at), f"{name}_converged": res.converged.numpy()})
    return out
