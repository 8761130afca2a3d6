import numpy as np
import pytest

from repdyn.data.two_points import two_point_data


def test_default_pair_matches_app_b1():
    x, y = two_point_data()
    assert x.squeeze().tolist() == [-1.0, -0.5]
    assert y.squeeze().tolist() == pytest.approx([0.6, 1.6])


def test_batched_pairs_and_errors():
    x, y = two_point_data(np.array([0.5, 1.5]), np.array([0.0, 1.0]))
    assert x.shape == (2, 2, 1) and y.shape == (2, 2, 1)
    assert (x[:, 1, 0] - x[:, 0, 0]).tolist() == [0.5, 1.5]
    assert (y[:, 1, 0] - y[:, 0, 0]).tolist() == pytest.approx([0.0, 1.0])
    with pytest.raises(ValueError, match="dx"):
        two_point_data(0.0, 1.0)
    with pytest.raises(ValueError, match="same shape"):
        two_point_data(np.ones(2), np.ones(3))
