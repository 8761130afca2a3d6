"""The real-image CNN fits of ``repdyn.experiments.compression.real_images``: continuous momentum with the adaptive
step (a fit that stops on a look and one that stops between looks, a capped run, a gradient that is NaN at once
under sync_every 1 and 4) and full-batch Adam on the hinge loss (a fit, a capped run, a NaN loss), on a width-1
MnasCNN and eight digits at 28 × 28."""

from __future__ import annotations

import numpy as np
import torch


def case() -> dict[str, np.ndarray]:
    from repdyn.experiments.compression.real_images import _fit_cnn_adam, _fit_cnn_momentum, _pool, _seeded_cnn
    from repdyn.nn.divergence import Diverged

    x, y, _ = _pool("", 28, "cpu")
    x, y = x[:8], y[:8]
    broken = x.clone()
    broken[3, 0, 5, 5] = float("nan")
    runs = {
        "momentum_sync1": lambda m: _fit_cnn_momentum(m, x, y, 10.0, 1.0, 1e-3, 0.1, 160, sync_every=1),
        "momentum_sync7": lambda m: _fit_cnn_momentum(m, x, y, 10.0, 1.0, 1e-3, 0.1, 160, sync_every=7),
        "momentum_capped": lambda m: _fit_cnn_momentum(m, x, y, 1e-2, 1.0, 1e-3, 0.1, 30, sync_every=4),
        "momentum_nan_sync1": lambda m: _fit_cnn_momentum(m, broken, y, 10.0, 1.0, 1e-3, 0.1, 30, sync_every=1),
        "momentum_nan_sync4": lambda m: _fit_cnn_momentum(m, broken, y, 10.0, 1.0, 1e-3, 0.1, 30, sync_every=4),
        "adam_fit": lambda m: _fit_cnn_adam(m, x, y, 10.0, 1e-2, 100),
        "adam_capped": lambda m: _fit_cnn_adam(m, x, y, 1e-2, 2e-3, 30),
        "adam_nan": lambda m: _fit_cnn_adam(m, broken, y, 10.0, 1e-2, 30),
    }
    out = {}
    for name, run in runs.items():
        model = _seeded_cnn(1, 4, "cpu")
        try:
            fit = run(model)
            steps, fitted = fit.trajectory.stopped_at, fit.fitted
            out[f"{name}_steps"], out[f"{name}_fitted"] = np.asarray(steps), np.asarray(fitted)
        except Diverged as error:
            out[f"{name}_diverged"] = np.asarray([error.step])
            out[f"{name}_what"] = np.asarray(error.what)
        out[f"{name}_parameters"] = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()
    return out
