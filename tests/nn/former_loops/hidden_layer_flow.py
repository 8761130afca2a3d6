"""``repdyn.nn.gradient_flow.train_gradient_flow``: trials that stop at different steps (compaction), records every
step, every third step and none, traced neurons, the host looking every step (its all-accept fast path) and every
4th, stop fractions below 1, the dgrad-free limit off and at its default, growth on jumps on and off, and a trial
whose output is not finite (the step the divergence error names)."""

from __future__ import annotations

import numpy as np
import torch


def case() -> dict[str, np.ndarray]:
    from repdyn.data.manifolds import sample_manifold
    from repdyn.nn.divergence import Diverged
    from repdyn.nn.gradient_flow import train_gradient_flow
    from repdyn.nn.models.hidden_layer import init_hidden_layer, stack_params

    gen = torch.Generator().manual_seed(7)
    x, y = sample_manifold("stripe", 60, 2, gen, batch=(5,))
    net = init_hidden_layer(5, 16, 2, gen)
    calls = {  # with stop fraction 0.3 the trials stop at steps 74 to 435, all of them by the cap
        "host": ({"stop_fraction": 0.3, "max_steps": 500, "trace_neurons": 2}, torch.float64),
        "sync4": ({"stop_fraction": 0.3, "max_steps": 500, "trace_neurons": 3, "sync_every": 4, "record_every": 3},
                  torch.float64),
        "plain": ({"stop_fraction": 0.2, "max_steps": 500, "dgrad_free_dt": 0.0, "grow_on_jumps": False,
                   "record_every": 0}, torch.float32),
        "no_grow": ({"stop_fraction": 1.0, "max_steps": 250, "grow_on_jumps": False, "sync_every": 4}, torch.float32),
        "capped": ({"stop_fraction": 0.5, "max_steps": 300, "record_every": 2, "max_dgrad": 1e-4, "max_dout": 0.05},
                   torch.float64),
    }
    found: dict[str, np.ndarray] = {}
    for name, (kwargs, dtype) in calls.items():
        start = type(net)(*(v.to(dtype) for v in (net.w, net.b, net.beta)))
        res = train_gradient_flow(start, x.to(dtype), y, 0.1, **{"max_dgrad": 1e-2, **kwargs})
        found[f"{name}/steps"] = np.asarray(res.trajectory.stopped_at)
        for key in ("t", "t_star", "lambda_star", "lambda_max", "stopped", "f0_train"):
            found[f"{name}/{key}"] = getattr(res, key).numpy()
        found[f"{name}/net"] = stack_params(res.net).numpy()
        found[f"{name}/at_t_star"] = stack_params(res.at_t_star).numpy()
        for key in res.trajectory:  # stored trial-major: (S, T, ...)
            found[f"{name}/history/{key}"] = res.trajectory[key].movedim(0, 1).numpy()
    bad = x.clone()
    bad[2, 5, 0] = float("nan")
    for sync_every in (1, 4):
        try:
            train_gradient_flow(net, bad, y, 0.1, max_dgrad=1e-2, max_steps=50, sync_every=sync_every)
            found[f"diverged{sync_every}"] = np.asarray(-1)
        except Diverged as error:
            found[f"diverged{sync_every}"] = np.asarray(error.step)
    return found
