"""Measurements on any torch.nn.Module: layer activations, representational distances, empirical NTK and kernel
PCA, effective rank, TwoNN intrinsic dimension, neural-collapse metrics, local elasticity, Taylor terms between
input pairs."""

from repdyn.probes.activations import activations, layer_names
from repdyn.probes.collapse import NeuralCollapse, etf_deviation, neural_collapse, within_between_ratio
from repdyn.probes.distances import cosine_similarities, pairwise_sq_distances, representational_distance
from repdyn.probes.elasticity import Elasticity, local_elasticity
from repdyn.probes.intrinsic_dimension import two_nn
from repdyn.probes.kernel_pca import KernelPCA, kernel_pca
from repdyn.probes.ntk import empirical_ntk
from repdyn.probes.rank import effective_rank, nuclear_rank_ratio, numerical_rank, participation_ratio, stable_rank
from repdyn.probes.taylor import TaylorTerms, taylor_terms

__all__ = [
    "Elasticity", "KernelPCA", "NeuralCollapse", "TaylorTerms", "activations", "cosine_similarities", "effective_rank",
    "empirical_ntk", "etf_deviation", "kernel_pca", "layer_names", "local_elasticity", "neural_collapse",
    "nuclear_rank_ratio", "numerical_rank", "pairwise_sq_distances", "participation_ratio",
    "representational_distance", "stable_rank", "taylor_terms", "two_nn", "within_between_ratio",
]
