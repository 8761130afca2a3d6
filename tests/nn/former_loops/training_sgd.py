"""``repdyn.nn.training.train`` with minibatches: SGD on a shared batch order (the fused step) and on one order per
member over per-member data, momentum with dropout masks drawn from the generator (autograd), Adam's fused
gradients, a stopping criterion that evaluates the full training set at every step, and a run killed twice (inside
its first loop, then inside its second) that resumes from its checkpoints, RNG states included."""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

import numpy as np
import torch


class Killed(Exception):
    """Stands for the process being killed at a recorded step."""


def case() -> dict[str, np.ndarray]:
    from repdyn.nn import MLP, Ensemble, Schedule, train
    from repdyn.nn.checkpoint import Checkpointer, checkpointing
    from repdyn.nn.recording import output_recorder

    out: dict[str, np.ndarray] = {}

    def keep(name, result, model):
        out.update({f"{name}.steps": result.steps, f"{name}.loss": result.loss, f"{name}.diverged": result.diverged,
                    f"{name}.diverged_at": result.diverged_at, f"{name}.stopped_at": np.array(result.stopped_at)})
        out.update({f"{name}.records.{key}": value for key, value in result.records.items()})
        out.update({f"{name}.{key}": p.detach().numpy() for key, p in model.params.items()})

    seeds, lrs = [21, 22, 23], [0.05, 0.1, 0.02]
    g = torch.Generator().manual_seed(9)
    x = torch.randn(10, 3, generator=g, dtype=torch.float64)
    y = torch.randn(10, 2, generator=g, dtype=torch.float64)
    mlp = partial(MLP, 3, 8, 3, 2, dtype=torch.float64)
    model = Ensemble(mlp, seeds=seeds)
    keep("sgd", train(model, x, y, steps=23, lr=lrs, optimizer="sgd", batch_size=4, schedule=Schedule.every(5, 23),
                      generator=torch.Generator().manual_seed(1), recorders={"out": output_recorder(x)}), model)
    model = Ensemble(mlp, seeds=seeds)
    xk, yk = torch.randn(3, 10, 3, generator=g, dtype=torch.float64), torch.randn(3, 10, 2, generator=g,
                                                                                  dtype=torch.float64)
    keep("independent", train(model, xk, yk, steps=17, lr=lrs, optimizer="sgd", batch_size=3,
                              independent_batches=True, generator=torch.Generator().manual_seed(2)), model)
    model = Ensemble(partial(mlp, dropout=0.2), seeds=seeds)
    keep("momentum_dropout", train(model, x, y, steps=14, lr=lrs, optimizer="momentum", batch_size=5,
                                   generator=torch.Generator().manual_seed(3), schedule=Schedule.every(4, 14)), model)
    model = Ensemble(mlp, seeds=seeds)
    keep("adam_stop", train(model, x, y, steps=200, lr=[1e-2, 2e-2, 5e-3], optimizer="adam", batch_size=6,
                            generator=torch.Generator().manual_seed(4), schedule=Schedule.every(25, 200),
                            stop=lambda step, losses: bool(losses.min() < 0.35)), model)

    def run(kill_at: tuple[int, int] | None) -> tuple:
        """Two loops of one run (momentum with dropout, then Adam), both minibatch from one generator; the recorder
        runs the model in train mode, so its dropout masks come from torch's global generator."""
        torch.manual_seed(6)
        generator = torch.Generator().manual_seed(5)
        model = Ensemble(partial(mlp, dropout=0.1), seeds=seeds)

        def recorder(loop):
            def record(step, ensemble):
                if kill_at == (loop, step):
                    raise Killed
                return ensemble(x).detach()
            return record

        first = train(model, x, y, steps=30, lr=lrs, optimizer="momentum", batch_size=4, generator=generator,
                      schedule=Schedule.every(3, 30), recorders={"out": recorder(0)})
        second = train(model, x, y, steps=25, lr=[1e-3, 2e-3, 3e-3], optimizer="adam", batch_size=4,
                       generator=generator, schedule=Schedule.every(4, 25), recorders={"out": recorder(1)})
        return first, second, model

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.ckpt"
        for kill_at in ((0, 18), (1, 12), None):
            with checkpointing(Checkpointer(path, every=0.0)):
                try:
                    first, second, model = run(kill_at)
                except Killed:
                    continue
        keep("resumed_first", first, model)
        keep("resumed_second", second, model)
    return out
