"""Experiments of seed 000 (effective theory of two-point representation dynamics)."""

from repdyn.experiments.effective_theory.adam import AdamDynamics
from repdyn.experiments.effective_theory.blobs import FeatureCollapse
from repdyn.experiments.effective_theory.control import PerturbedDynamicsControl
from repdyn.experiments.effective_theory.depth import DepthDependence
from repdyn.experiments.effective_theory.digits import DigitsStructure
from repdyn.experiments.effective_theory.final_distance import FinalDistance
from repdyn.experiments.effective_theory.init_scale import InitialWeightScale
from repdyn.experiments.effective_theory.two_point import TwoPointDynamics
from repdyn.experiments.effective_theory.xor import XorStructure
from repdyn.framework.base import Paper

PAPER = Paper("000", "effective_theory", "When Representations Align: Universality in Representation Learning Dynamics",
          "van Rossem & Saxe",
          "An effective theory of two-point representation dynamics: three variables, two effective learning rates; "
          "rich (small init) vs lazy (large init) final structure.")

EXPERIMENTS = (TwoPointDynamics(), InitialWeightScale(), FinalDistance(), PerturbedDynamicsControl(),
               DepthDependence(), XorStructure(), FeatureCollapse(),
               DigitsStructure(), AdamDynamics())

__all__ = ["AdamDynamics", "DepthDependence", "DigitsStructure", "EXPERIMENTS", "FeatureCollapse", "FinalDistance",
           "InitialWeightScale", "PAPER", "PerturbedDynamicsControl", "TwoPointDynamics", "XorStructure"]
