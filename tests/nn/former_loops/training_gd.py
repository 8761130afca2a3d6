"""``repdyn.nn.training.train``, full-batch gradient descent: the fused step (½-MSE closed form and a loss through
autograd's head), a PassRecorder read off the fused pass beside a plain recorder, autograd (``fused_step=False``),
weight decay (the fused gradients with the optimiser's update), per-member data, a model without the stacked path,
``stop_loss`` and a custom ``stop`` between recorded steps."""

from __future__ import annotations

from functools import partial

import numpy as np
import torch


def case() -> dict[str, np.ndarray]:
    from repdyn.data.two_points import two_point_data
    from repdyn.nn import MLP, Ensemble, Schedule, train
    from repdyn.nn.cnn import SmallCNN
    from repdyn.nn.recording import activation_recorder, output_recorder
    from repdyn.probes.two_point import two_point_recorder

    out: dict[str, np.ndarray] = {}

    def keep(name, result, model):
        out.update({f"{name}.steps": result.steps, f"{name}.loss": result.loss, f"{name}.diverged": result.diverged,
                    f"{name}.diverged_at": result.diverged_at, f"{name}.stopped_at": np.array(result.stopped_at)})
        out.update({f"{name}.records.{key}": value for key, value in result.records.items()})
        out.update({f"{name}.{key}": p.detach().numpy() for key, p in model.params.items()})

    seeds, lrs = [11, 12, 13], [0.05, 0.1, 0.02]
    mlp = partial(MLP, 1, 8, 4, 1, dtype=torch.float64)
    x, y = two_point_data(np.array([0.5, 0.7, 0.9]), np.array([1.0, 1.0, 0.5]))
    for fused in (True, False):  # the fused step with a PassRecorder read off its pass, and autograd
        model = Ensemble(mlp, seeds=seeds)
        result = train(model, x, y, steps=20, lr=lrs, schedule=Schedule.every(3, 20), fused_step=fused,
                       recorders={"pair": two_point_recorder(x, y, ["layer1", "layer3"]),
                                  "hidden": activation_recorder(x, "layer2")})
        keep(f"mse_fused{int(fused)}", result, model)

    model = Ensemble(mlp, seeds=seeds)  # stop_loss between recorded steps: the last state is recorded
    keep("stop_loss", train(model, x, y, steps=400, lr=0.3, schedule=Schedule.every(50, 400), stop_loss=5e-3,
                            recorders={"out": output_recorder(x)}), model)
    model = Ensemble(mlp, seeds=seeds)
    keep("stop", train(model, x, y, steps=60, lr=lrs, schedule=Schedule.every(7, 60),
                       stop=lambda step, losses: step >= 14 and bool(losses.max() < 10.0)), model)

    g = torch.Generator().manual_seed(4)
    xs = torch.randn(12, 3, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 4, (12,), generator=g)
    signs = torch.where(labels % 2 == 0, 1.0, -1.0).to(torch.float64)
    for loss, d_out, target in (("cross_entropy", 4, labels), ("soft_hinge", 1, signs)):  # autograd's loss head
        model = Ensemble(partial(MLP, 3, 10, 3, d_out, dtype=torch.float64), seeds=seeds)
        keep(loss, train(model, xs, target, steps=15, lr=lrs, loss=loss, schedule=Schedule.every(4, 15)), model)
    model = Ensemble(partial(MLP, 3, 10, 3, 2, activation="tanh", dtype=torch.float64), seeds=seeds)
    xk = torch.randn(3, 6, 3, generator=g, dtype=torch.float64)  # per-member data, weight decay
    yk = torch.randn(3, 6, 2, generator=g, dtype=torch.float64)
    keep("member_data", train(model, xk, yk, steps=12, lr=lrs, weight_decay=0.01), model)
    model = Ensemble(partial(SmallCNN, (1, 6, 6), [2, 3], 2, dtype=torch.float64), seeds=seeds[:2])
    ximg = torch.randn(5, 1, 6, 6, generator=g, dtype=torch.float64)
    yimg = torch.randn(5, 2, generator=g, dtype=torch.float64)
    keep("cnn", train(model, ximg, yimg, steps=6, lr=[0.01, 0.02]), model)
    return out
