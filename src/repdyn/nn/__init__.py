"""Models (the package :mod:`repdyn.nn.models`), batched ensembles, losses, optimisers, recording callbacks, the
training loops (each in a module named for it) and the training driver that runs every training loop as a step rule
(:func:`drive`) and returns what it recorded as a :class:`Trajectory`."""

from repdyn.nn.divergence import Diverged, check_finite
from repdyn.nn.driver import AdaptiveEuler, Divergence, StepRule, drive
from repdyn.nn.ensemble import Ensemble
from repdyn.nn.models.mlp import MLP
from repdyn.nn.recording import Schedule
from repdyn.nn.training import TrainResult, train
from repdyn.nn.trajectory import Trajectory

__all__ = ["MLP", "AdaptiveEuler", "Diverged", "Divergence", "Ensemble", "Schedule", "StepRule", "TrainResult",
           "Trajectory", "check_finite", "drive", "train"]
