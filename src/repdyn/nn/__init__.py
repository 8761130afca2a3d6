"""Models, batched ensembles, losses, optimisers, the training loop and its recording callbacks."""

from repdyn.nn.divergence import Diverged, check_finite
from repdyn.nn.ensemble import Ensemble
from repdyn.nn.mlp import MLP
from repdyn.nn.recording import Schedule
from repdyn.nn.training import TrainResult, train
from repdyn.nn.trajectory import Trajectory

__all__ = ["MLP", "Diverged", "Ensemble", "Schedule", "TrainResult", "Trajectory", "check_finite", "train"]
