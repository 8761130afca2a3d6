"""Tests of the kNN mutual-information estimator of App. D of seed 003 (spec 003 §7 suggested test 8)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats
from sklearn.feature_selection import mutual_info_classif

from repdyn.theory.mutual_information import binary_entropy, knn_label_mutual_information


def _gaussian_mixture_mi(mu: float) -> float:
    """Exact I(x; y) in bits for y = ±1 equiprobable and x | y ~ N(y μ, 1)."""
    def integrand(x: float) -> float:
        pp = math.exp(-(x - mu) ** 2 / 2)
        pm = math.exp(-(x + mu) ** 2 / 2)
        q = pp / (pp + pm)
        mix = 0.5 * (pp + pm) / math.sqrt(2 * math.pi)
        return mix * float(binary_entropy(np.array(q)))
    return 1.0 - integrate.quad(integrand, -12, 12, limit=200)[0]


def test_binary_entropy() -> None:
    assert binary_entropy(np.array([0.0, 0.5, 1.0])) == pytest.approx([0.0, 1.0, 0.0])
    assert float(binary_entropy(np.array(0.25))) == pytest.approx(0.811278, abs=1e-6)


def test_independent_labels_give_the_known_small_null_value() -> None:
    """For independent labels the two k-th-neighbour radii in 1-D are i.i.d. Gamma(k) (locally Poisson
    points), so q̂₊ ~ Beta(k, k) and Î → 1 − E[h₂(Beta(k, k))] = 0.0685 bit at k = 5: ≈ 0 on the 1-bit scale,
    and exactly this value for an unbiased implementation."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(8000)
    y = rng.choice([-1, 1], 8000)
    null = 1 - integrate.quad(lambda q: stats.beta(5, 5).pdf(q) * float(binary_entropy(np.array(q))), 0, 1)[0]
    assert null == pytest.approx(0.0685, abs=1e-4)
    assert knn_label_mutual_information(x, y) == pytest.approx(null, abs=0.01)


def test_separated_classes_give_one_bit() -> None:
    rng = np.random.default_rng(1)
    y = rng.choice([-1, 1], 2000)
    x = y * 5.0 + 0.1 * rng.standard_normal(2000)
    assert knn_label_mutual_information(x, y) == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("mu", [0.5, 1.0])
def test_gaussian_mixture_matches_exact_mi_and_sklearn(mu: float) -> None:
    rng = np.random.default_rng(2)
    y = rng.choice([-1, 1], 6000)
    x = y * mu + rng.standard_normal(6000)
    exact = _gaussian_mixture_mi(mu)
    ours = knn_label_mutual_information(x, y)
    assert ours == pytest.approx(exact, abs=0.05)
    # an independent estimator (Ross 2014, nats) agrees with the same exact value
    theirs = mutual_info_classif(x[:, None], y, n_neighbors=5, random_state=0)[0] / math.log(2)
    assert theirs == pytest.approx(exact, abs=0.05)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="at least k"):
        knn_label_mutual_information(np.arange(10.0), np.array([1] * 8 + [-1] * 2))
    with pytest.raises(ValueError, match="same number of rows"):
        knn_label_mutual_information(np.arange(10.0), np.ones(9))
