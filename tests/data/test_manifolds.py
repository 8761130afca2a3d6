"""Tests of the stripe and cylinder models (spec 003 §7 test 1)."""

from __future__ import annotations

import math

import pytest
import torch

from repdyn.data.manifolds import compress, informative_dimension, manifold_labels, sample_manifold


@pytest.mark.parametrize(("model", "d"), [("stripe", 5), ("cylinder", 3)])
def test_labels_are_balanced(model: str, d: int) -> None:
    n = 200_000
    _, y = sample_manifold(model, n, d, torch.Generator().manual_seed(0))
    assert float((y > 0).double().mean()) == pytest.approx(0.5, abs=3 / math.sqrt(n))


def test_labels_depend_on_the_informative_subspace_only() -> None:
    x = torch.tensor([[0.0, 9.0, -9.0], [2.0, 0.0, 0.0], [-0.31, 0.0, 0.0], [1.0, 0.5, 7.0]], dtype=torch.float64)
    assert manifold_labels(x, "stripe").tolist() == [-1.0, 1.0, 1.0, -1.0]
    assert manifold_labels(x, "cylinder").tolist() == [1.0, 1.0, -1.0, -1.0]
    assert informative_dimension("cylinder") == 2


def test_compress_divides_perpendicular_coordinates() -> None:
    x = torch.ones(2, 4, 3, dtype=torch.float64)
    out = compress(x, 1, torch.tensor([2.0, 4.0], dtype=torch.float64))
    assert out[0, :, 0].tolist() == [1.0] * 4
    assert out[1, 0].tolist() == [1.0, 0.25, 0.25]


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown"):
        informative_dimension("torus")
    with pytest.raises(ValueError, match="d > 2"):
        manifold_labels(torch.zeros(3, 2), "cylinder")
