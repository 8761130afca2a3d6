"""The experiments, one package per paper (seed 000-004), one module per experiment; each package lists its
``EXPERIMENTS`` beside its ``PAPER`` record."""

from repdyn._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, submodules=[
    "effective_theory", "shallow_relu", "leaky_resnet", "compression", "elastic_sde"])
