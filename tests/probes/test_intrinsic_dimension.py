import math

import pytest
import torch

from repdyn.probes.intrinsic_dimension import nearest_neighbour_ratios, two_nn


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
