"""One-dimensional sample sets of spec 001 §3.2."""

from __future__ import annotations

import numpy as np
import pytest

from repdyn.data.univariate import UNIVARIATE_SETS, univariate_samples


def test_named_sets_follow_the_spec():
    x, y = univariate_samples("SQ10")
    np.testing.assert_allclose(x, np.linspace(-1, 1, 10))
    np.testing.assert_array_equal(y, [1, 1, -1, -1, 1, 1, -1, -1, 1, 1])
    x, y = univariate_samples("SIN10")
    np.testing.assert_allclose(y, np.sin(np.pi * x))
    for name, s in (("SIN12", 12), ("SIN20", 20)):
        x, y = univariate_samples(name)
        assert x.size == s and x[0] == -1 and x[-1] == 1
        np.testing.assert_allclose(y, np.sin(2 * np.pi * x))
    for name in UNIVARIATE_SETS:
        x, _ = univariate_samples(name)
        assert x.dtype == np.float64 and np.all(np.diff(x) > 0)


def test_unknown_set_is_rejected():
    with pytest.raises(ValueError, match="SQ10"):
        univariate_samples("SQ11")
