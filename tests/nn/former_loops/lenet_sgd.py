"""``repdyn.nn.batch1_sgd.train_batch1_sgd``: a few trials with ``val_every`` and ``check_every`` that do not divide the
step count, a run with a validation chunk smaller than the validation set, and a run whose large rate diverges (the
step its :class:`~repdyn.nn.divergence.Diverged` names, under two check intervals)."""

from __future__ import annotations

import numpy as np
import torch


def case() -> dict[str, np.ndarray]:
    from repdyn.nn import Diverged
    from repdyn.nn.batch1_sgd import train_batch1_sgd
    from repdyn.nn.models.lenet import lenet_ensemble

    data = torch.Generator().manual_seed(6)
    x = torch.randn(11, 1, 32, 32, dtype=torch.float64, generator=data)
    y = torch.arange(11) % 3

    def run(trials: int, **kwargs):
        model = lenet_ensemble(trials, 1, 3, torch.Generator().manual_seed(5))
        return model, train_batch1_sgd(model, x, y, x[:5], y[:5], generator=torch.Generator().manual_seed(7),
                                       **kwargs)

    out = {}
    for name, kwargs in {"odd": {"trials": 3, "steps": 23, "lr": 0.05, "val_every": 7, "check_every": 5},
                         "chunked": {"trials": 2, "steps": 12, "lr": 0.02, "val_every": 4, "val_chunk": 2}}.items():
        model, log = run(**kwargs)
        every, validation = log.trajectory, log.validation  # stored trial-major: (R, T, ...)
        stored = {"sample": every["sample"].T, "label": every["label"].T,
                  "logits": every["logits"].transpose(1, 0, 2), "train_loss": every["loss"].T,
                  "val_steps": validation.steps, "val_loss": validation["loss"], "val_acc": validation["accuracy"]}
        out.update({f"{name}.{key}": value for key, value in stored.items()})
        out.update({f"{name}.param.{key}": value.detach().numpy() for key, value in model.params.items()})
    for check_every in (1, 6, 1000):
        try:
            run(2, steps=40, lr=100.0, val_every=9, check_every=check_every)
            out[f"diverged_at.check{check_every}"] = np.array(-1)
        except Diverged as error:
            out[f"diverged_at.check{check_every}"] = np.array(error.step)
    return out
