"""Teacher tasks with a known bottleneck rank k* (seed 002 App. B, spec 002 §4.1).

``f* = g_m o ... o g_1`` where each ``g_i`` is a random network from dimension ``dims[i-1]`` to ``dims[i]``; the
smallest inner dimension is the bottleneck rank ``k* = min(dims[1:-1])``. Task A of seed 002 (Fig. 1) is
``dims=(20, 5, 20)`` with FCNN blocks; task B (Fig. 2) is ``dims=(30, 6, 3, 30)`` with ResNet blocks.

Choices (spec 002 §4.1, the paper gives none): inputs ``x ~ N(0, I)``; FCNN block = two hidden ReLU layers of
width ``hidden`` with He-normal weights, biases ``N(0, 0.1^2)`` and a linear read-out ``N(0, 1/fan_in)``;
ResNet block = linear in-map to width ``hidden``, three residual blocks ``h <- h + W_2 relu(W_1 h + b) / 3``
with He weights, linear out-map. "collectively augmented by demeaning and normalization": train and test are
concatenated, then every input and output feature is centred and divided by its standard deviation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

TEACHER_KINDS = ("fcnn", "resnet")


@dataclass(frozen=True)
class TeacherTask:
    """Train/test sets (rows are points) and the bottleneck rank of the teacher."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    bottleneck_rank: int


def _normal(shape: tuple[int, ...], std: float, generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    return std * torch.randn(*shape, generator=generator, dtype=dtype)


Block = Callable[[torch.Tensor], torch.Tensor]


def _fcnn_block(d_in: int, d_out: int, hidden: int, generator: torch.Generator, dtype: torch.dtype) -> Block:
    layers = []
    fan_in = d_in
    for _ in range(2):
        layers.append((_normal((fan_in, hidden), (2.0 / fan_in) ** 0.5, generator, dtype),
                       _normal((hidden,), 0.1, generator, dtype)))
        fan_in = hidden
    readout = _normal((hidden, d_out), hidden**-0.5, generator, dtype)

    def block(x: torch.Tensor) -> torch.Tensor:
        for W, b in layers:
            x = torch.relu(x @ W + b)
        return x @ readout

    return block


def _resnet_block(d_in: int, d_out: int, hidden: int, generator: torch.Generator, dtype: torch.dtype) -> Block:
    embed = _normal((d_in, hidden), d_in**-0.5, generator, dtype)
    residuals = [(_normal((hidden, hidden), (2.0 / hidden) ** 0.5, generator, dtype),
                  _normal((hidden,), 0.1, generator, dtype),
                  _normal((hidden, hidden), (2.0 / hidden) ** 0.5, generator, dtype)) for _ in range(3)]
    readout = _normal((hidden, d_out), hidden**-0.5, generator, dtype)

    def block(x: torch.Tensor) -> torch.Tensor:
        h = x @ embed
        for W1, b, W2 in residuals:
            h = h + torch.relu(h @ W1 + b) @ W2 / 3
        return h @ readout

    return block


def teacher_network(dims: tuple[int, ...], generator: torch.Generator, *, kind: str = "fcnn", hidden: int = 100,
                    dtype: torch.dtype = torch.float64) -> Block:
    """The random teacher ``f* = g_m o ... o g_1`` through ``dims`` (rows in, rows out)."""
    if kind not in TEACHER_KINDS:
        raise ValueError(f"kind={kind!r} is not allowed: choose one of {', '.join(TEACHER_KINDS)}")
    if len(dims) < 3 or min(dims) < 1:
        raise ValueError(f"dims={dims!r} is not allowed: need (d_in, k_1, ..., d_out) with positive sizes")
    if hidden < 1:
        raise ValueError(f"hidden={hidden!r} is not allowed: must be >= 1")
    make = _fcnn_block if kind == "fcnn" else _resnet_block
    blocks = [make(d_in, d_out, hidden, generator, dtype) for d_in, d_out in zip(dims[:-1], dims[1:], strict=True)]

    def teacher(x: torch.Tensor) -> torch.Tensor:
        for block in blocks:
            x = block(x)
        return x

    return teacher


def _standardise(z: torch.Tensor) -> torch.Tensor:
    return (z - z.mean(0)) / z.std(0)


def bottleneck_teacher(dims: tuple[int, ...], n_train: int, n_test: int, generator: torch.Generator, *,
                       kind: str = "fcnn", hidden: int = 100, dtype: torch.dtype = torch.float64) -> TeacherTask:
    """Sample a teacher (:func:`teacher_network`) and a normalised train/test set from it.

    The teacher weights and then the inputs are drawn from ``generator``, so one seed fixes the task.
    """
    if n_train < 2 or n_test < 1:
        raise ValueError(f"n_train={n_train}, n_test={n_test}: need n_train >= 2 and n_test >= 1")
    teacher = teacher_network(dims, generator, kind=kind, hidden=hidden, dtype=dtype)
    x = torch.randn(n_train + n_test, dims[0], generator=generator, dtype=dtype)
    x, y = _standardise(x), _standardise(teacher(x))
    return TeacherTask(x[:n_train], y[:n_train], x[n_train:], y[n_train:], int(min(dims[1:-1])))
