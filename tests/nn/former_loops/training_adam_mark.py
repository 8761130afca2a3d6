"""``repdyn.nn.training.train`` when a member diverges: ``on_divergence="mark"`` freezes it and trains the others on
(full-batch Adam from the fused gradients, the fused in-place GD step, momentum through autograd, minibatch SGD whose
batch loss diverges first), and ``"raise"`` stops at the first NaN/inf loss (its step, and the parameters it leaves
behind); a marked run killed after the divergence resumes from its checkpoint."""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

import numpy as np
import torch


class Killed(Exception):
    """Stands for the process being killed at a recorded step."""


def case() -> dict[str, np.ndarray]:
    from repdyn.nn import MLP, Diverged, Ensemble, Schedule, train
    from repdyn.nn.checkpoint import Checkpointer, checkpointing

    out: dict[str, np.ndarray] = {}

    def keep(name, result, model):
        out.update({f"{name}.steps": result.steps, f"{name}.loss": result.loss, f"{name}.diverged": result.diverged,
                    f"{name}.diverged_at": result.diverged_at, f"{name}.stopped_at": np.array(result.stopped_at)})
        out.update({f"{name}.records.{key}": value for key, value in result.records.items()})
        out.update({f"{name}.{key}": p.detach().numpy() for key, p in model.params.items()})

    seeds = [31, 32, 33, 34]
    mlp = partial(MLP, 1, 8, 4, 1, gain=1.5, dtype=torch.float64)
    x = torch.tensor([[-1.0], [-0.5], [0.3]], dtype=torch.float64)
    y = torch.tensor([[0.6], [1.6], [-0.4]], dtype=torch.float64)
    runs = {
        "adam": dict(optimizer="adam", lr=[1e-3, 1e150, 2e-3, 1e-2], steps=40),
        "gd": dict(lr=[0.01, 50.0, 0.02, 0.01], steps=30, schedule=Schedule.every(5, 30)),
        "momentum": dict(optimizer="momentum", lr=[0.01, 0.005, 20.0, 0.01], steps=30, fused_step=False,
                         stop_loss=0.22),  # the diverged member is left out of the criterion
        "sgd": dict(optimizer="sgd", batch_size=2, generator=torch.Generator().manual_seed(8),
                    lr=[0.01, 60.0, 0.02, 0.01], steps=30, schedule=Schedule.every(4, 30)),
        "gd_at_the_end": dict(lr=[0.01, 50.0, 0.02, 0.01], steps=3),  # the last step only records
        "sgd_at_the_end": dict(optimizer="sgd", batch_size=2, generator=torch.Generator().manual_seed(8),
                               lr=[0.01, 60.0, 0.02, 0.01], steps=3),
    }
    for name, kwargs in runs.items():
        model = Ensemble(mlp, seeds=seeds)
        keep(f"mark_{name}", train(model, x, y, on_divergence="mark", **kwargs), model)
    with tempfile.TemporaryDirectory() as folder:  # killed after the divergence, resumed from its checkpoint
        path = Path(folder) / "run.ckpt"
        for kill in (True, False):
            def record(step, ensemble, kill=kill):
                if kill and step == 10:
                    raise Killed
                return ensemble(x).detach()
            model = Ensemble(mlp, seeds=seeds)
            with checkpointing(Checkpointer(path, every=0.0)):
                try:
                    result = train(model, x, y, on_divergence="mark", recorders={"out": record}, **runs["gd"])
                except Killed:
                    continue
        keep("mark_resumed", result, model)
    for name in ("gd", "sgd"):
        model = Ensemble(mlp, seeds=seeds)
        try:
            train(model, x, y, **runs[name])
        except Diverged as error:
            out[f"raise_{name}.step"] = np.array(error.step)
        out.update({f"raise_{name}.{key}": p.detach().numpy() for key, p in model.params.items()})
    return out
