"""``repdyn.nn.training.train`` on every branch its callers take.

Full batch: the fused step (½-MSE closed form, and losses through autograd's head), a PassRecorder read off the fused
pass beside a plain recorder, autograd (``fused_step=False``), weight decay, per-member data, a model without the
stacked path, ``stop_loss`` and ``stop`` on and between recorded steps. Minibatches: SGD on a shared batch order and
on one order per member, momentum with dropout masks from the generator, Adam with a stopping criterion, and a
two-loop run killed in each loop that resumes from its checkpoints, RNG states included. Divergence: ``"mark"`` under
Adam, the fused GD step, momentum, minibatch SGD, at the last step and across a resume; ``"raise"`` (its step, and
the parameters it leaves behind).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import torch

from repdyn.data.two_points import two_point_data
from repdyn.nn import MLP, Diverged, Ensemble, Schedule, train
from repdyn.nn.checkpoint import Checkpointer, checkpointing
from repdyn.nn.models.cnn import SmallCNN
from repdyn.nn.recording import activation_recorder, output_recorder
from repdyn.probes.two_point import two_point_recorder


class Killed(Exception):
    """Stands for the process being killed at a recorded step."""


def case() -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    full_batch(out)
    minibatch(out)
    divergence(out)
    return out


def keep(out: dict[str, np.ndarray], name: str, result, model: Ensemble) -> None:
    trajectory = result.trajectory
    out.update({f"{name}.steps": trajectory.steps, f"{name}.loss": trajectory["loss"],
                f"{name}.diverged": result.diverged, f"{name}.diverged_at": result.diverged_at,
                f"{name}.stopped_at": np.array(trajectory.stopped_at)})
    out.update({f"{name}.records.{key}": trajectory[key] for key in trajectory if key != "loss"})
    out.update({f"{name}.{key}": p.detach().numpy() for key, p in model.params.items()})


def killable(x: torch.Tensor, kill_at: tuple[int, int] | None, loop: int) -> Callable:
    """A recorder of the outputs on ``x`` (in the model's mode) that is killed at ``kill_at`` = (loop, step)."""

    def record(step, ensemble):
        if kill_at == (loop, step):
            raise Killed
        return ensemble(x).detach()

    return record


def resumed(run: Callable, kills: list[tuple[int, int]]):
    """What ``run(kill_at)`` returns under a checkpointer that saves at every step, after it was killed at each of
    ``kills`` in turn, each time resuming from the checkpoint the killed attempt left."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.ckpt"
        for kill_at in kills:
            with checkpointing(Checkpointer(path, every=0.0)):
                try:
                    run(kill_at)
                except Killed:
                    pass
        with checkpointing(Checkpointer(path, every=0.0)):
            return run(None)


def full_batch(out: dict[str, np.ndarray]) -> None:
    seeds, lrs = [11, 12, 13], [0.05, 0.1, 0.02]
    mlp = partial(MLP, 1, 8, 4, 1, dtype=torch.float64)
    x, y = two_point_data(np.array([0.5, 0.7, 0.9]), np.array([1.0, 1.0, 0.5]))
    for fused in (True, False):  # the fused step with a PassRecorder read off its pass, and autograd
        model = Ensemble(mlp, seeds=seeds)
        result = train(model, x, y, steps=20, lr=lrs, schedule=Schedule.every(3, 20), fused_step=fused,
                       recorders={"pair": two_point_recorder(x, y, ["layer1", "layer3"]),
                                  "hidden": activation_recorder(x, "layer2")})
        keep(out, f"mse_fused{int(fused)}", result, model)
    model = Ensemble(mlp, seeds=seeds)  # stop_loss between recorded steps: the last state is recorded
    keep(out, "stop_loss", train(model, x, y, steps=400, lr=0.3, schedule=Schedule.every(50, 400), stop_loss=5e-3,
                                 recorders={"out": output_recorder(x)}), model)
    model = Ensemble(mlp, seeds=seeds)
    keep(out, "stop", train(model, x, y, steps=60, lr=lrs, schedule=Schedule.every(7, 60),
                            stop=lambda step, losses: step >= 14 and bool(losses.max() < 10.0)), model)

    g = torch.Generator().manual_seed(4)
    xs = torch.randn(12, 3, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 4, (12,), generator=g)
    signs = torch.where(labels % 2 == 0, 1.0, -1.0).to(torch.float64)
    for loss, d_out, target in (("cross_entropy", 4, labels), ("soft_hinge", 1, signs)):  # autograd's loss head
        model = Ensemble(partial(MLP, 3, 10, 3, d_out, dtype=torch.float64), seeds=seeds)
        keep(out, loss, train(model, xs, target, steps=15, lr=lrs, loss=loss, schedule=Schedule.every(4, 15)), model)
    model = Ensemble(partial(MLP, 3, 10, 3, 2, activation="tanh", dtype=torch.float64), seeds=seeds)
    xk = torch.randn(3, 6, 3, generator=g, dtype=torch.float64)  # per-member data, weight decay
    yk = torch.randn(3, 6, 2, generator=g, dtype=torch.float64)
    keep(out, "member_data", train(model, xk, yk, steps=12, lr=lrs, weight_decay=0.01), model)
    model = Ensemble(partial(SmallCNN, (1, 6, 6), [2, 3], 2, dtype=torch.float64), seeds=seeds[:2])
    ximg = torch.randn(5, 1, 6, 6, generator=g, dtype=torch.float64)
    yimg = torch.randn(5, 2, generator=g, dtype=torch.float64)
    keep(out, "cnn", train(model, ximg, yimg, steps=6, lr=[0.01, 0.02]), model)


def minibatch(out: dict[str, np.ndarray]) -> None:
    seeds, lrs = [21, 22, 23], [0.05, 0.1, 0.02]
    g = torch.Generator().manual_seed(9)
    x = torch.randn(10, 3, generator=g, dtype=torch.float64)
    y = torch.randn(10, 2, generator=g, dtype=torch.float64)
    mlp = partial(MLP, 3, 8, 3, 2, dtype=torch.float64)
    model = Ensemble(mlp, seeds=seeds)
    keep(out, "sgd", train(model, x, y, steps=23, lr=lrs, optimizer="sgd", batch_size=4,
                           schedule=Schedule.every(5, 23), generator=torch.Generator().manual_seed(1),
                           recorders={"out": output_recorder(x)}), model)
    model = Ensemble(mlp, seeds=seeds)
    xk = torch.randn(3, 10, 3, generator=g, dtype=torch.float64)
    yk = torch.randn(3, 10, 2, generator=g, dtype=torch.float64)
    keep(out, "independent", train(model, xk, yk, steps=17, lr=lrs, optimizer="sgd", batch_size=3,
                                   independent_batches=True, generator=torch.Generator().manual_seed(2)), model)
    model = Ensemble(partial(mlp, dropout=0.2), seeds=seeds)
    keep(out, "momentum_dropout", train(model, x, y, steps=14, lr=lrs, optimizer="momentum", batch_size=5,
                                        generator=torch.Generator().manual_seed(3), schedule=Schedule.every(4, 14)),
         model)
    model = Ensemble(mlp, seeds=seeds)
    keep(out, "adam_stop", train(model, x, y, steps=200, lr=[1e-2, 2e-2, 5e-3], optimizer="adam", batch_size=6,
                                 generator=torch.Generator().manual_seed(4), schedule=Schedule.every(25, 200),
                                 stop=lambda step, losses: bool(losses.min() < 0.35)), model)

    def run(kill_at):
        """Two loops of one run (momentum with dropout, then Adam), both minibatch from one generator; the recorder
        runs the model in train mode, so its dropout masks come from torch's global generator."""
        torch.manual_seed(6)
        generator = torch.Generator().manual_seed(5)
        model = Ensemble(partial(mlp, dropout=0.1), seeds=seeds)
        first = train(model, x, y, steps=30, lr=lrs, optimizer="momentum", batch_size=4, generator=generator,
                      schedule=Schedule.every(3, 30), recorders={"out": killable(x, kill_at, 0)})
        second = train(model, x, y, steps=25, lr=[1e-3, 2e-3, 3e-3], optimizer="adam", batch_size=4,
                       generator=generator, schedule=Schedule.every(4, 25), recorders={"out": killable(x, kill_at, 1)})
        return first, second, model

    first, second, model = resumed(run, [(0, 18), (1, 12)])
    keep(out, "resumed_first", first, model)
    keep(out, "resumed_second", second, model)


def divergence(out: dict[str, np.ndarray]) -> None:
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
        keep(out, f"mark_{name}", train(model, x, y, on_divergence="mark", **kwargs), model)

    def run(kill_at):  # killed after the divergence (step 3), resumed from its checkpoint
        model = Ensemble(mlp, seeds=seeds)
        return train(model, x, y, on_divergence="mark", recorders={"out": killable(x, kill_at, 0)},
                     **runs["gd"]), model

    keep(out, "mark_resumed", *resumed(run, [(0, 10)]))
    for name in ("gd", "sgd"):
        model = Ensemble(mlp, seeds=seeds)
        try:
            train(model, x, y, **runs[name])
        except Diverged as error:
            out[f"raise_{name}.step"] = np.array(error.step)
        out.update({f"raise_{name}.{key}": p.detach().numpy() for key, p in model.params.items()})
