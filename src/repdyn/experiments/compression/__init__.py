"""Experiments of seed 003 (compression of invariant manifolds by a one-hidden-layer network), one module each.

amplification: Λ* ∝ √p on the stripe and the cylinder (Figs. 5, 7 top; spec 003 R1, R5).
learning_curves: feature vs lazy (infinite-width NTK) vs compressed-data lazy vs final NTK (Fig. 2; R2).
ntk_pca: kernel PCA of the initial and final NTK, label projections and mutual information (Figs. 9, 10; R3).
alpha_scan: t* ∝ 1/α (lazy) and ≈ (τ*/2) log(1/α) (feature), Λ*/Λ(0) → 1 for large α (Fig. 11; R4).
single_neuron: Eq. (5) + (7) ODE vs the network's neurons up to t*, and the attractors of Fig. 3c.
real_images: the CNN of spec 003 §2.13 on digit parity, frozen init vs final NTK (Figs. 8, 9c,d; §5.2).
"""

from repdyn.experiments.compression.alpha_scan import AlphaScan
from repdyn.experiments.compression.amplification import Amplification
from repdyn.experiments.compression.learning_curves import LearningCurves
from repdyn.experiments.compression.ntk_pca import NtkPca
from repdyn.experiments.compression.real_images import RealImages
from repdyn.experiments.compression.single_neuron import SingleNeuron
from repdyn.framework.base import Paper

PAPER = Paper("003", "compression", "Compressing invariant manifolds in neural nets",
              "Paccolat, Petrini, Geiger, Tyloo & Wyart",
              "Feature learning compresses directions the label does not depend on: amplification ~ sqrt(p), "
              "better learning-curve exponents than the lazy (NTK) regime, informative NTK eigenvectors.")

EXPERIMENTS = (Amplification(), LearningCurves(), NtkPca(), AlphaScan(), SingleNeuron(), RealImages())

__all__ = ["AlphaScan", "Amplification", "EXPERIMENTS", "LearningCurves", "NtkPca", "PAPER", "RealImages",
           "SingleNeuron"]
