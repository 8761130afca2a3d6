import numpy as np
import pytest
import torch

from repdyn.probes import etf_deviation, neural_collapse, within_between_ratio


def simplex_etf(classes, dim, seed=0):
    q, _ = torch.linalg.qr(torch.randn(dim, classes, generator=torch.Generator().manual_seed(seed),
                                       dtype=torch.float64))
    return ((classes / (classes - 1)) ** 0.5 * q @ (torch.eye(classes, dtype=torch.float64) - 1 / classes)).T


def test_collapsed_etf_features_score_zero():
    means = 3.0 * simplex_etf(4, 6)
    labels = torch.arange(20) % 4
    h = means[labels]
    nc = neural_collapse(h, labels)
    assert nc.within_between == pytest.approx(0.0, abs=1e-20)
    assert nc.etf_max_cos_error == pytest.approx(0.0, abs=1e-12)
    assert nc.etf_gram_distance == pytest.approx(0.0, abs=1e-12)
    assert nc.mean_norm_cv == pytest.approx(0.0, abs=1e-12)


def test_within_between_ratio_matches_direct_pseudoinverse():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 10)
    h = rng.normal(size=(30, 5)) + 2.0 * rng.normal(size=(3, 5))[labels]
    mu = np.stack([h[labels == c].mean(0) for c in range(3)])
    sw = sum(np.outer(h[i] - mu[labels[i]], h[i] - mu[labels[i]]) for i in range(30)) / 30
    centred = mu - h.mean(0)
    sb = centred.T @ centred / 3
    expected = np.trace(sw @ np.linalg.pinv(sb)) / 3
    assert float(within_between_ratio(torch.from_numpy(h), torch.from_numpy(labels))) == pytest.approx(expected)


def test_etf_deviation_hand_example():
    # three class means at 90 degrees: cos = 0, deviation from -1/2 is 1/2
    h = torch.eye(3, dtype=torch.float64)
    max_err, _ = etf_deviation(h, torch.arange(3))
    assert float(max_err) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="C >= 2"):
        etf_deviation(h, torch.tensor([0, 0, 2]))
