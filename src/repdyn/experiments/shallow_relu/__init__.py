"""Experiments of seed 001 (Williams et al., shallow univariate ReLU networks): kernel vs adaptive regimes."""

from repdyn.experiments.shallow_relu.init_scale import InitScale
from repdyn.experiments.shallow_relu.kernel_spline import KernelSpline
from repdyn.experiments.shallow_relu.kernel_terms import KernelTerms
from repdyn.experiments.shallow_relu.kernel_variants import KernelVariants
from repdyn.experiments.shallow_relu.lazy_width import LazyWidth
from repdyn.experiments.shallow_relu.local_dynamics import LocalDynamics
from repdyn.experiments.shallow_relu.regime_crossover import RegimeCrossover
from repdyn.experiments.shallow_relu.trajectories import NeuronTrajectories
from repdyn.framework.base import Paper

PAPER = Paper("001", "shallow_relu", "Gradient Dynamics of Shallow Univariate ReLU Networks",
              "Williams, Trager, Silva, Panozzo, Zorin & Bruna (NeurIPS 2019)",
              "Canonical dynamics of one-hidden-layer ReLU nets on 1-D data: kernel regime (cubic spline) vs "
              "adaptive regime (linear interpolant), set by the layer balance δ.")

EXPERIMENTS = (RegimeCrossover(), KernelSpline(), NeuronTrajectories(), InitScale(), KernelTerms(), LazyWidth(),
               LocalDynamics(), KernelVariants())

__all__ = ["EXPERIMENTS", "InitScale", "KernelSpline", "KernelTerms", "KernelVariants", "LazyWidth", "LocalDynamics",
           "NeuronTrajectories", "PAPER", "RegimeCrossover"]
