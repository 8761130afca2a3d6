"""Experiments of seed 004 (locally elastic SDEs), spec 004 §3–§4, one module each.

- ``synthetic``: the synthetic checks S-A..S-F of spec 004 §3.8 (★H1, ★H2): the separation phase transition of the
  LE-SDE on both sides of its boundary and near it, the Θ(1/t) boundary at γ0 = K/2, closed forms against numerical
  integration, the estimator round trip, neural collapse, and the γ ≤ 0 case of §3.1.
- ``geomnist``: LeNets trained by batch-1 SGD on GeoMNIST (Figs. 1, 3, 5, D.8, D.9; ★H3, ★H5): Â, B̂, α̂, β̂ from the
  per-class mean logits, the L-model LE-ODE estimated on half of the trials and scored on the other half.
- ``label_noise``: the p_err sweep of Fig. 4 (★H4).
- ``general_h``: Theorem 3.1 with a non-identity H and a time-varying β: simulated class means against the exact
  law of the theorem's proof, (C.11) with ∫μ_j (C.18).
- ``cifar``: Fig. 3 / D.4 on CIFAR-10, K ∈ {2, 3}, only with ``--set data_dir=…``.
"""

from repdyn.experiments.elastic_sde.cifar import CifarElasticity
from repdyn.experiments.elastic_sde.general_h import GeneralHLaw
from repdyn.experiments.elastic_sde.geomnist import GeoMNISTDynamics
from repdyn.experiments.elastic_sde.label_noise import LabelNoisePhaseTransition
from repdyn.experiments.elastic_sde.synthetic import SyntheticChecks
from repdyn.framework.base import Paper

PAPER = Paper("004", "elastic_sde", "Imitating Deep Learning Dynamics via Locally Elastic Stochastic Differential "
              "Equations", "Zhang, Wang & Su (NeurIPS 2021)",
              "Features evolve by a locally elastic SDE: a phase transition in linear separability when intra-class "
              "impact exceeds inter-class impact, and neural collapse.")

EXPERIMENTS = (SyntheticChecks(), GeoMNISTDynamics(), LabelNoisePhaseTransition(), CifarElasticity(),
               GeneralHLaw())

__all__ = ["CifarElasticity", "EXPERIMENTS", "GeneralHLaw", "GeoMNISTDynamics", "LabelNoisePhaseTransition", "PAPER",
           "SyntheticChecks"]
