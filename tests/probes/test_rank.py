import math

import pytest
import torch

from repdyn.probes import effective_rank, nuclear_rank_ratio, numerical_rank, participation_ratio, stable_rank


def matrix_with_singular_values(s, n=8, f=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(f, f, generator=g, dtype=torch.float64))
    sigma = torch.zeros(n, f, dtype=torch.float64)
    sigma[range(len(s)), range(len(s))] = torch.tensor(s, dtype=torch.float64)
    return u @ sigma @ v.T


def test_rank_measures_against_hand_values():
    equal = matrix_with_singular_values([2.0, 2.0, 2.0])
    assert float(effective_rank(equal)) == pytest.approx(3.0)
    assert float(participation_ratio(equal)) == pytest.approx(3.0)
    a = matrix_with_singular_values([3.0, 1.0])
    q = torch.tensor([0.75, 0.25])
    assert float(effective_rank(a)) == pytest.approx(math.exp(-(q * q.log()).sum().item()))
    assert float(participation_ratio(a)) == pytest.approx(100 / 82)  # (9 + 1)² / (81 + 1)
    assert float(stable_rank(a)) == pytest.approx(10 / 9)
    assert float(nuclear_rank_ratio(a)) == pytest.approx(16 / 10)
    assert int(numerical_rank(matrix_with_singular_values([1.0, 0.5, 0.09]))) == 2
    assert int(numerical_rank(torch.zeros(3, 3))) == 0


def test_prop1_ordering_and_batching():
    """Rank ≥ ‖A‖_*²/‖A‖_F² ≥ ‖A‖_F²/‖A‖_op² (Prop. 1 of seed 002, spec 002 §3.13)."""
    a = torch.randn(10, 7, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    nuc, st = nuclear_rank_ratio(a), stable_rank(a)
    assert nuc.shape == (10,)
    assert bool((5 + 1e-12 >= nuc).all() and (nuc >= st - 1e-12).all())
    with pytest.raises(ValueError, match="zero matrix"):
        effective_rank(torch.zeros(3, 3))
