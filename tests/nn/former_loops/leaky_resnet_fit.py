"""``repdyn.nn.leaky_resnet_fit.fit``: both phases, a cosine-decayed Adam rate, adaptive steps in both phases."""

from __future__ import annotations

import numpy as np
import torch


def case() -> dict[str, np.ndarray]:
    from repdyn.nn.leaky_resnet_fit import TrainingPlan, fit
    from repdyn.nn.models.leaky_resnet import LeakyResNet

    generator = torch.Generator().manual_seed(3)
    x = torch.randn(24, 4, generator=generator, dtype=torch.float64)
    y = torch.randn(24, 3, generator=generator, dtype=torch.float64)
    model = LeakyResNet.initialise(6, 8, 4, 3, [1.0, 2.0, 3.0], torch.full((6,), 1 / 6, dtype=torch.float64),
                                   torch.Generator().manual_seed(5))
    plan = TrainingPlan(adam_steps=40, adam_lr=1e-2, adam_lr_final=1e-3, gd_steps=25, gd_lr=1e-3,
                        adaptive_every=5, adaptive_warmup=10, record_every=4)
    history = fit(model, x, y, 0.01, plan, adaptive=torch.tensor([False, True, True]))
    return {"step": history.steps, **history.series, "weight": model.weight.detach().numpy(), "rho": model.rho.numpy()}
