"""Experiments of seed 002 (Jacot & Kaiser, Leaky ResNets): exact critical networks (the Hamiltonian mechanics
without an optimiser), bottleneck structures over L~ (Fig. 1, Fig. 3) and the discretisation schemes (Fig. 2)."""

from repdyn.experiments.leaky_resnet.critical import CriticalNetworks
from repdyn.experiments.leaky_resnet.discretisation import Discretisation
from repdyn.experiments.leaky_resnet.structures import Structures
from repdyn.framework.base import Paper

PAPER = Paper("002", "leaky_resnet", "Hamiltonian Mechanics of Feature Learning: Bottleneck Structure in Leaky ResNets",
          "Jacot & Kaiser",
          "Leaky ResNets as Hamiltonian systems: Cost of Identity, a low-dimensional bottleneck in the middle layers, "
          "and adaptive layer steps.")

EXPERIMENTS = (CriticalNetworks(), Structures(), Discretisation())

__all__ = ["CriticalNetworks", "Discretisation", "EXPERIMENTS", "PAPER", "Structures"]
