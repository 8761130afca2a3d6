import numpy as np
import pytest

from repdyn.data.two_points import CODE_DX, CODE_DY, TEXT_DX, TEXT_DY, two_point_data


def test_default_pair_is_the_authors_notebook_data():
    """experiments/2_points.ipynb, default row of model_settings (dx² = 1, dy² = 0.5): inputs [−1, 0], targets
    [0.6, 0.6 + √0.5]; App. B.1's text (dx = 0.5, dy = 1) as the variant."""
    x, y = two_point_data()
    assert (CODE_DX, CODE_DY**2) == (1.0, pytest.approx(0.5))
    assert x.squeeze().tolist() == [-1.0, 0.0]
    assert y.squeeze().tolist() == pytest.approx([0.6, 0.6 + np.sqrt(0.5)], rel=1e-15)
    x, y = two_point_data(TEXT_DX, TEXT_DY)
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
