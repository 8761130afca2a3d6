import numpy as np
import pytest

from repdyn.data.digits import load_digits, one_hot


def test_bundled_digits():
    x, y = load_digits()
    assert x.shape == (1797, 64) and y.shape == (1797,)
    assert 0.0 <= x.min() and x.max() == 1.0
    x01, y01 = load_digits(n=20, classes=(0, 1))
    assert set(y01.tolist()) == {0, 1} and x01.shape == (20, 64)
    raw, _ = load_digits(n=5, scale=False)
    assert raw.max() == 16.0


def test_one_hot_and_errors():
    t = one_hot(np.array([0, 3]))
    assert t.shape == (2, 10) and t[1, 3] == 1 and np.sum((t[0] - t[1]) ** 2) == 2
    with pytest.raises(ValueError, match="n="):
        load_digits(n=0)
    with pytest.raises(ValueError, match="classes"):
        load_digits(classes=(12,))
    with pytest.raises(ValueError, match="labels"):
        one_hot(np.array([10]))
