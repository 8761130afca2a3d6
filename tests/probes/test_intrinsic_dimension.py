import math

import numpy as np
import pytest
import torch

from repdyn.probes.intrinsic_dimension import curve_fraction, nearest_neighbour_ratios, two_nn


def test_two_nn_by_hand_on_a_line():
    """Points 0, 1, 3, 7: μ = 3/1, 2/1, 3/2, 6/4; with discard 1/4 the largest log μ is censored at log 2."""
    x = torch.tensor([[0.0], [1.0], [3.0], [7.0]])
    assert nearest_neighbour_ratios(x).tolist() == pytest.approx([3.0, 2.0, 1.5, 1.5])
    assert two_nn(x, discard=0.0) == pytest.approx(3 / (math.log(3) + math.log(2) + 2 * math.log(1.5)))
    assert two_nn(x, discard=0.25) == pytest.approx(2 / (2 * math.log(1.5) + 2 * math.log(2)))


def _embedded(z, dim, generator):
    q, _ = torch.linalg.qr(torch.randn(dim, z.shape[1], generator=generator, dtype=torch.float64))
    return z @ q.T


@pytest.mark.parametrize("d", [1, 2, 5])
@pytest.mark.parametrize("shape", ["cube", "sphere"])
def test_two_nn_recovers_the_dimension_of_embedded_manifolds(d, shape):
    """Uniform points in [0, 1]^d or on the unit d-sphere S^d ⊂ R^(d+1), isometrically embedded in R^12.

    Tolerance from the estimator's variance: d²/(k − 2) for independent μ (module docstring); the μ of mutual
    neighbours are correlated, which inflates the standard deviation by 1.17–1.35× (measured before this test was
    written: 100 spheres of 500 points, d = 1, 2, 5). 5 d/√(k − 2) is therefore at least 3.7 true standard deviations,
    and it separates d from d ± 1 at d = 5 (0.59). The cube's faces bias d = 5 low by about 0.2 at n = 2000
    (measured), inside the tolerance.
    """
    g = torch.Generator().manual_seed(10 * d + (shape == "cube"))
    n = 2000
    if shape == "cube":
        z = torch.rand(n, d, generator=g, dtype=torch.float64)
    else:
        z = torch.randn(n, d + 1, generator=g, dtype=torch.float64)
        z = z / z.norm(dim=1, keepdim=True)
    k = n - n // 10
    assert abs(two_nn(_embedded(z, 12, g)) - d) <= 5 * d / math.sqrt(k - 2)


def test_two_nn_chunks_change_no_number():
    x = torch.randn(300, 7, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    whole = nearest_neighbour_ratios(x)
    assert torch.equal(nearest_neighbour_ratios(x, chunk_bytes=8 * 300 * 7), whole)


def test_two_nn_rejects_duplicates_and_too_few_points():
    x = torch.randn(20, 3, generator=torch.Generator().manual_seed(4))
    with pytest.raises(ValueError, match="duplicate points"):
        two_nn(torch.cat([x, x[:1]]))
    with pytest.raises(ValueError, match="at least 3 points"):
        two_nn(x[:2])
    with pytest.raises(ValueError, match="needs at least 3"):
        two_nn(x[:3], discard=0.5)


def test_curve_fraction_on_a_curve_and_on_independent_noise():
    """On y = sin(3x) + noise of variance s² the fraction is 1 − s²(1 + 1/k)/Var y up to the curve's variation
    over k neighbours (n = 2000, x uniform on [−1, 1]: neighbours span ~0.01, a bias < 10⁻³); with y independent
    of x its mean over draws is 1 − (1 + 1/k) n/(n − 1) ≈ −1/k (the leave-one-out residual has variance
    σ²(1 + 1/k), the total sum of squares mean (n − 1)σ²)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 2000)
    s = 0.1
    y = np.sin(3 * x) + s * rng.standard_normal(x.size)
    expected = 1 - s**2 * (1 + 1 / 10) / y.var()
    assert curve_fraction(x, y) == pytest.approx(expected, abs=0.02)
    draws = [curve_fraction(rng.standard_normal(200), rng.standard_normal(200)) for _ in range(300)]
    assert abs(np.mean(draws) - (1 - 1.1 * 200 / 199)) <= 4 * np.std(draws) / np.sqrt(len(draws))
    ties = np.repeat(np.arange(50.0), 4)  # every x four times: the point itself may be hidden among its ties
    assert curve_fraction(ties, ties**2, k=3) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="constant"):
        curve_fraction(x, np.ones_like(x))
