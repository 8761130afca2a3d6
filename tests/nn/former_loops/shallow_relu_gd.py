"""``repdyn.nn.full_batch_gd.train_full_batch_gd``: networks that stop at different steps (one never does, so the run
reaches ``max_steps``), a run in which every network stops between recorded steps (later records dropped), the
``max_move`` cap with lr_fraction halvings, tracked neurons and snapshots."""

from __future__ import annotations

from dataclasses import fields

import numpy as np


def case() -> dict[str, np.ndarray]:
    from repdyn.nn.full_batch_gd import train_full_batch_gd
    from repdyn.nn.models.shallow_relu import ShallowReLUBatch, uniform_init

    x = np.linspace(-1, 1, 6)
    sine, steps = np.sin(np.pi * x), np.array([1.0, 1.0, -1.0, -1.0, 1.0, 1.0])
    rng = np.random.default_rng(3)
    nets = [uniform_init(20, rng, 1.0), uniform_init(8, rng, 0.5), uniform_init(12, rng, 0.8),
            uniform_init(16, rng, 1.5)]
    alpha = [np.sqrt(len(p[0])) for p in nets]

    def batch(keep: list[int]) -> ShallowReLUBatch:
        return ShallowReLUBatch.stack([nets[i] for i in keep], [alpha[i] for i in keep],
                                      [[True, True, False, True][i] for i in keep],
                                      [[True, True, True, False][i] for i in keep])

    runs = {
        "cap": train_full_batch_gd(batch([0, 1, 2, 3]), x, sine, max_steps=1500, tol=3e-3, lr_fraction=1.0,
                                   lr_every=13, record_every=7, track=np.array([0, 3]), track_every=5,
                                   snapshot_steps=(0, 10, 1400)),
        "stop": train_full_batch_gd(batch([0, 1, 3]), x, sine, max_steps=1500, tol=3e-3, lr_fraction=1.0,
                                    lr_every=13, record_every=7, track=np.array([0, 3]), track_every=5,
                                    snapshot_steps=(0, 10, 700)),
        "move": train_full_batch_gd(batch([0, 1, 2, 3]), x, steps, max_steps=400, tol=0.0, lr_fraction=1.9,
                                    record_every=50, lr_every=40, max_move=0.05, track=np.array([1]),
                                    snapshot_steps=(100, 400)),
        "move_stop": train_full_batch_gd(batch([0, 1, 3]), x, sine, max_steps=1000, tol=1e-2, lr_fraction=1.5,
                                         record_every=10, max_move=0.1),
    }
    out = {}
    for name, result in runs.items():
        for item in fields(result):
            value = getattr(result, item.name)
            if item.name == "params":
                out.update({f"{name}.{p}": v for p, v in zip("abc", value)})
            elif item.name == "trajectory":
                out.update({f"{name}.loss_steps": value.steps, f"{name}.loss": value["loss"]})
            elif item.name == "tracked":
                out.update({f"{name}.track_steps": value.steps, f"{name}.trajectory": value["neurons"]})
            elif item.name == "snapshots":
                out[f"{name}.snapshot_steps"] = value.steps
                out.update({f"{name}.snapshot{s}.{p}": value[p][i] for i, s in enumerate(value.steps) for p in "abc"})
            else:
                out[f"{name}.{item.name}"] = np.asarray(value)
    return out
