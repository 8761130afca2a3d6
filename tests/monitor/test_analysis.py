"""The analysis of a recording against closed forms: recordings built from each theory's own solution must give
back the theory's parameters."""

from __future__ import annotations

import numpy as np
import pytest

from repdyn.monitor.analysis import centred_alignment, elasticity, ntk, two_point
from repdyn.monitor.recording import Recording
from repdyn.theory.effective_theory import fixed_point_distance, integrate_dynamics
from repdyn.theory.elastic_sde import isotropic_mean


def _meta(**extra) -> dict:
    return {"name": "synthetic", "layers": ["h"], "pair_layer": "h", "measures": ["two_point", "ntk", "elasticity"],
            **extra}


def test_two_point_fit_recovers_the_rates_and_eq10_matches_the_final_distance():
    t = np.unique(np.round(np.expm1(np.linspace(0, np.log1p(3000), 40))))
    X, Y, rate_h, rate_y = 2.0, 2.0, 0.004, 0.002
    traj = integrate_dynamics((0.05, 1e-4, 1e-4 * 0.0), X, Y, rate_h, rate_y, t)
    rec = Recording(arrays={"steps": t.astype(np.int64), "pairs": np.array([[0, 1]]), "pair_X": np.array([X]),
                            "pair_Y": np.array([Y]), "pair_u": traj.u[:, None], "pair_v": traj.v[:, None],
                            "pair_w": traj.w[:, None]}, meta=_meta())
    row = two_point(rec).tables[0][1][0]
    assert row["status"] == "fitted"
    assert row["1/τ_h"] == pytest.approx(rate_h, rel=0.02)
    assert row["1/τ_y"] == pytest.approx(rate_y, rel=0.02)
    predicted = float(fixed_point_distance(0.05, 1e-4, X, Y, rate_h / rate_y))  # τ_y/τ_h = rate_h/rate_y
    assert row["u final (Eq. 10)"] == pytest.approx(predicted, rel=0.02)
    assert row["u final (measured)"] == pytest.approx(predicted, rel=0.02)  # the trajectory has converged


def test_centred_alignment_closed_forms():
    rng = np.random.default_rng(0)
    labels = np.arange(12) % 3
    targets = np.eye(3)[labels]
    assert centred_alignment(targets @ targets.T, targets) == pytest.approx(1.0)
    assert centred_alignment(targets @ targets.T + 5.0, targets) == pytest.approx(1.0)  # constants are centred out
    noise = rng.standard_normal((12, 40))
    gram = noise @ noise.T
    value = centred_alignment(gram, targets)
    h = np.eye(12) - 1 / 12
    kc, yc = h @ gram @ h, h @ targets @ targets.T @ h
    assert value == pytest.approx(np.trace(kc @ yc) / np.sqrt(np.trace(kc @ kc) * np.trace(yc @ yc)))


def test_ntk_section_label_shares_sum_to_one_and_a_label_kernel_is_aligned():
    labels = np.arange(12) % 3
    targets = np.eye(3)[labels]
    rng = np.random.default_rng(1)
    noise = rng.standard_normal((12, 30))
    grams = np.stack([noise @ noise.T, 50 * targets @ targets.T + 0.01 * noise @ noise.T])
    rec = Recording(arrays={"steps": np.array([0, 10]), "ntk_steps": np.array([0, 10]), "ntk": grams,
                            "ntk_index": np.arange(12), "labels": labels, "outputs": np.zeros((2, 12, 3))},
                    meta=_meta(ntk_points=12))
    rows = ntk(rec).tables[0][1]
    assert rows[1]["kernel alignment"] > 0.99 > rows[0]["kernel alignment"]
    # a kernel built from the labels puts all of the centred label norm on its top modes
    assert rows[1]["label share on top 3 modes"] == pytest.approx(1.0, abs=1e-3)


def test_elasticity_estimates_recover_the_l_model_strengths():
    """Logits whose class means follow Eq. (7) of seed 004 exactly (probe points = mean ± a symmetric offset):
    Â, B̂ equal the integrated strengths A, B and α̂, β̂ their derivatives."""
    K, steps = 3, np.array([0, 1, 2, 4, 8, 16, 32, 64])
    alpha, beta = 0.05, 0.01
    A, B = alpha * steps, beta * steps
    xbar0 = np.random.default_rng(2).standard_normal((K, K))
    means = isotropic_mean(xbar0, A, B)                                   # (T, K, K)
    offset = np.random.default_rng(3).standard_normal((K, K)) * 0.1
    outputs = np.concatenate([means + offset, means - offset], axis=1)  # (T, 2K, K): two points per class
    labels = np.concatenate([np.arange(K), np.arange(K)])
    rec = Recording(arrays={"steps": steps, "outputs": outputs, "labels": labels}, meta=_meta(layers=[]))
    rows = elasticity(rec).tables[0][1]
    np.testing.assert_allclose([r["Â"] for r in rows], A, atol=1e-9)
    np.testing.assert_allclose([r["B̂"] for r in rows], B, atol=1e-9)
    np.testing.assert_allclose([r["α̂"] for r in rows], alpha, atol=1e-9)
    np.testing.assert_allclose([r["γ̂"] for r in rows], min(alpha - beta, alpha + (K - 1) * beta), atol=1e-9)


def test_ntk_verdicts_read_alignment_rising_falling_and_the_kernel_change():
    labels = np.arange(12) % 3
    targets = np.eye(3)[labels]
    noise = np.random.default_rng(1).standard_normal((12, 30))
    random_kernel, label_kernel = noise @ noise.T, 50 * targets @ targets.T + 0.01 * noise @ noise.T
    verdicts = {}
    for name, grams in (("rising", [random_kernel, label_kernel]), ("falling", [label_kernel, random_kernel]),
                        ("lazy", [random_kernel, 1.01 * random_kernel])):
        rec = Recording(arrays={"steps": np.array([0, 10]), "ntk_steps": np.array([0, 10]), "ntk": np.stack(grams),
                                "ntk_index": np.arange(12), "labels": labels, "outputs": np.zeros((2, 12, 3))},
                        meta=_meta(ntk_points=12))
        verdicts[name] = ntk(rec).verdicts
    assert verdicts["rising"][0][0] == "good" and "alignment rose" in verdicts["rising"][0][1]
    assert verdicts["falling"][0][0] == "warn" and verdicts["falling"][0][1].startswith("kernel alignment falling")
    assert "rich regime" in verdicts["rising"][1][1]
    assert verdicts["lazy"][1] == ("info", "the NTK changed by 0.01 of its initial norm: lazy (kernel) regime: the NTK "
                                           "barely moved")
