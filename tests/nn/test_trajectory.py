"""The one type of what a training loop recorded over time."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from repdyn.nn import MLP, Ensemble, Trajectory, train


def test_a_trajectory_reads_its_series_by_name_and_by_step():
    loss = np.array([[1.0, 2.0], [0.5, 1.5], [0.25, 1.0]])
    trajectory = Trajectory(np.array([0, 5, 9]), {"loss": loss, "rate": torch.tensor([0.1, 0.2, 0.3])}, 9)
    assert len(trajectory) == 3 and list(trajectory) == ["loss", "rate"] and "loss" in trajectory
    assert trajectory["loss"] is loss and trajectory.stopped_at == 9
    assert trajectory.at(5)["loss"].tolist() == [0.5, 1.5] and float(trajectory.at(5)["rate"]) == pytest.approx(0.2)
    assert trajectory.last("loss").tolist() == [0.25, 1.0]
    with pytest.raises(KeyError, match="step 4 was not recorded"):
        trajectory.at(4)


def test_a_series_of_another_length_than_the_steps_is_refused():
    with pytest.raises(ValueError, match="series 'loss' has 2 entries for 3 recorded steps"):
        Trajectory(np.arange(3), {"loss": np.zeros((2, 4))}, 2)


def test_train_refuses_a_recorder_named_like_the_loss_series():
    model = Ensemble(lambda generator: MLP(2, 4, 1, 1, generator=generator), seeds=[0])
    x, y = torch.zeros(3, 2), torch.zeros(3, 1)
    with pytest.raises(ValueError, match="recorder may not be named 'loss'"):
        train(model, x, y, steps=2, lr=0.1, recorders={"loss": lambda step, m: torch.zeros(1)})
