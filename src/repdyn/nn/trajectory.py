"""What a training loop recorded over time: one type for every loop run by :func:`repdyn.nn.driver.drive`.

A :class:`Trajectory` is, in the manner of diffrax's ``Solution`` (``ts``, ``ys``, ``stats``), the recorded steps
``steps`` (T,), the named series recorded at those steps (each (T, ...): index t runs over recorded steps) and the
number of steps the loop took, ``stopped_at``. A loop's result holds its end state in its own typed fields and what
it recorded over time as a Trajectory (a loop that records on two schedules, such as a loss at every step and a
validation pass every few, holds one Trajectory per schedule).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Trajectory"]


@dataclass(frozen=True)
class Trajectory:
    """Series recorded at ``steps`` by a loop that took ``stopped_at`` steps.

    steps: (T,) the recorded steps, ascending (step t: after t steps of the loop). series: name -> (T, ...) the
    values at those steps (NumPy arrays, or tensors where the loop's result is on its device). stopped_at: the number
    of steps the loop took. ``trajectory["loss"]`` reads a series, ``"loss" in trajectory`` asks for one.
    """

    steps: np.ndarray
    series: Mapping[str, Any] = field(default_factory=dict)
    stopped_at: int = 0

    def __post_init__(self) -> None:
        for name, values in self.series.items():
            if len(values) != len(self.steps):
                raise ValueError(f"series {name!r} has {len(values)} entries for {len(self.steps)} recorded steps")

    def __getitem__(self, name: str) -> Any:
        return self.series[name]

    def __contains__(self, name: object) -> bool:
        return name in self.series

    def __iter__(self) -> Iterator[str]:
        return iter(self.series)

    def __len__(self) -> int:
        """T, the number of recorded steps."""
        return len(self.steps)

    def at(self, step: int) -> dict[str, Any]:
        """Every series at recorded step ``step`` (KeyError if it was not recorded)."""
        found = np.flatnonzero(np.asarray(self.steps) == step)
        if not found.size:
            raise KeyError(f"step {step} was not recorded (recorded: {len(self.steps)} steps)")
        return {name: values[int(found[0])] for name, values in self.series.items()}

    def last(self, name: str) -> Any:
        """The value of series ``name`` at the last recorded step."""
        return self.series[name][-1]
