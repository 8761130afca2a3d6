"""``repdyn.nn.leaky_resnet_fit.lbfgs_finish`` after a short fit: chunks that do not divide the iterations, one member
stopped by the tolerance and the others by the iteration budget."""

from __future__ import annotations

import numpy as np
import torch


def case() -> dict[str, np.ndarray]:
    from repdyn.nn.leaky_resnet_fit import TrainingPlan, fit, lbfgs_finish
    from repdyn.nn.models.leaky_resnet import LeakyResNet

    generator = torch.Generator().manual_seed(7)
    x = torch.randn(20, 3, generator=generator, dtype=torch.float64)
    y = torch.randn(20, 2, generator=generator, dtype=torch.float64)
    model = LeakyResNet.initialise(5, 6, 3, 2, [1.0, 2.0, 4.0], torch.full((5,), 0.2, dtype=torch.float64),
                                   torch.Generator().manual_seed(11))
    fit(model, x, y, 0.01, TrainingPlan(adam_steps=30, adam_lr=1e-2, gd_steps=0, gd_lr=1e-3))
    record = lbfgs_finish(model, x, y, 0.01, iterations=37, tolerance=5.0, chunk=8)
    return {**record, "weight": model.weight.detach().numpy()}
