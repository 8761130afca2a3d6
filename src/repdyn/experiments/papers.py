"""The five papers (shared/seeds), for the report and ``repdyn list``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    seed: str
    topic: str
    title: str
    authors: str
    theory: str


PAPERS: dict[str, Paper] = {p.seed: p for p in (
    Paper("000", "effective_theory", "When Representations Align: Universality in Representation Learning Dynamics",
          "van Rossem & Saxe",
          "An effective theory of two-point representation dynamics: three variables, two effective learning rates; "
          "rich (small init) vs lazy (large init) final structure."),
    Paper("001", "shallow_relu", "Gradient Dynamics of Shallow Univariate ReLU Networks",
          "Williams, Trager, Silva, Panozzo, Zorin & Bruna (NeurIPS 2019)",
          "Canonical dynamics of one-hidden-layer ReLU nets on 1-D data: kernel regime (cubic spline) vs adaptive "
          "regime (linear interpolant), set by the layer balance δ."),
    Paper("002", "leaky_resnet", "Hamiltonian Mechanics of Feature Learning: Bottleneck Structure in Leaky ResNets",
          "Jacot & Kaiser",
          "Leaky ResNets as Hamiltonian systems: Cost of Identity, a low-dimensional bottleneck in the middle layers, "
          "and adaptive layer steps."),
    Paper("003", "compression", "Compressing invariant manifolds in neural nets",
          "Paccolat, Petrini, Geiger, Tyloo & Wyart",
          "Feature learning compresses directions the label does not depend on: amplification ~ sqrt(p), "
          "better learning-curve exponents than the lazy (NTK) regime, informative NTK eigenvectors."),
    Paper("004", "elastic_sde", "Imitating Deep Learning Dynamics via Locally Elastic Stochastic Differential "
          "Equations", "Zhang, Wang & Su (NeurIPS 2021)",
          "Features evolve by a locally elastic SDE: a phase transition in linear separability when intra-class "
          "impact exceeds inter-class impact, and neural collapse."),
)}
