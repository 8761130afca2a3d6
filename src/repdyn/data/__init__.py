"""Datasets: synthetic generators and real data shipped in a package (scikit-learn's digits) or read from a folder
the user names (MNIST, CIFAR-10); nothing is downloaded at run time."""

from repdyn._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, submodules=[
    "cifar10", "context_blobs", "digits", "geomnist", "manifolds", "mnist", "teacher", "two_points", "univariate",
    "xor"])
