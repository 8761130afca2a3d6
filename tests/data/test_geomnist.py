"""GeoMNIST generator (spec 004 §3.1) and label corruption (§3.2)."""

import numpy as np
import pytest

from repdyn.data import geomnist as gm


def test_shapes_sizes_and_labels():
    xt, yt, xv, yv = gm.geomnist(6, 4, np.random.default_rng(0))
    assert xt.shape == (18, 1, 32, 32) and xv.shape == (12, 1, 32, 32)
    np.testing.assert_array_equal(np.bincount(yt), [6, 6, 6])
    np.testing.assert_array_equal(np.bincount(yv), [4, 4, 4])
    # blurred binary shapes: values in [0, 1] up to cubic-spline ringing, mass centred on the canvas
    assert -0.05 < xt.min() and xt.max() < 1.05
    mass = xt.sum(axis=(1, 2, 3))
    rows = np.arange(32)
    centre = (xt[:, 0].sum(axis=2) * rows).sum(axis=1) / mass
    assert np.all(np.abs(centre - 16) < 3)


def test_base_shapes_match_geometry():
    base = gm.base_shapes(3)
    # rectangle: inclusive 9 × 17 pixels for every shift
    np.testing.assert_array_equal(base[1].sum(axis=(1, 2)), [153, 153, 153])
    # ellipse: lattice points strictly inside, within half a perimeter (≈ 15–23 px) of the area π ρ (2ρ)
    area = 2 * np.pi * np.array([5, 6, 7]) ** 2
    assert np.all(np.abs(base[2].sum(axis=(1, 2)) - area) < 0.5 * 3 * np.pi * np.array([5, 6, 7]))
    # triangle: base 20 px, height 8 + 8√3 ≈ 21.9 px
    np.testing.assert_allclose(base[0].sum(axis=(1, 2)), 0.5 * 20 * (8 + 8 * np.sqrt(3)), rtol=0.08)


def test_label_corruption_split_and_rate():
    labels = np.repeat(np.arange(3), 100)
    out = gm.corrupt_labels(labels, 0.5, np.random.default_rng(1), 3)
    for c in range(3):
        moved = out[labels == c]
        others = [k for k in range(3) if k != c]
        assert np.sum(moved != c) == 50
        assert np.sum(moved == others[0]) == 25 and np.sum(moved == others[1]) == 25
    odd = gm.corrupt_labels(labels, 0.33, np.random.default_rng(2), 3)
    assert np.sum(odd[labels == 0] == 1) == 16 and np.sum(odd[labels == 0] == 2) == 17
    np.testing.assert_array_equal(gm.corrupt_labels(labels, 0.0, np.random.default_rng(3), 3), labels)
    with pytest.raises(ValueError, match="p_err"):
        gm.corrupt_labels(labels, 1.5, np.random.default_rng(0), 3)
