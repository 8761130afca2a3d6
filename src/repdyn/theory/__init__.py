"""The maths of the five papers, one module per topic, NumPy/SciPy/torch in, arrays out: no training loops, no
files, no plotting."""

from repdyn._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, submodules=[
    "effective_theory", "shallow_relu", "shallow_relu_kernels", "leaky_resnet", "compression", "mutual_information",
    "elastic_sde", "elasticity_estimators"])
