"""The report's readings on runs whose regime is known by construction (monitor_rich_lazy: the digits MLP from a
small initialisation, rich, and as the centred f = α(g − g₀) with α = 100, lazy), and NC1 of convolutional feature
maps read on their global average pool."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

from monitor_rich_lazy import train
from repdyn.monitor import Monitor, analyze, measures
from repdyn.monitor.analysis import THRESHOLDS, compare
from repdyn.probes import neural_collapse


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {regime: train(regime, root)[0].recording() for regime in ("rich", "lazy")}


def _texts(analysis, section):
    return [text for key, _, text in analysis.verdicts if key == section]


def test_headline_regime_reads_rich_and_lazy_with_the_weights_ntk_and_u(pair):
    rich, lazy = analyze(pair["rich"]), analyze(pair["lazy"])
    assert rich.summary["regime"] == "rich" and lazy.summary["regime"] == "lazy"
    # ground truth: the weights move several times their initial norm in the rich run, not at all in the lazy one
    assert rich.summary["weight_change"] > 3 and lazy.summary["weight_change"] < 0.01
    assert rich.summary["ntk_change"] > THRESHOLDS["regime_rich"]
    assert lazy.summary["ntk_change"] < THRESHOLDS["regime_lazy"]
    assert rich.summary["u_change"] > 1 and lazy.summary["u_change"] < 0.05
    assert _texts(lazy, "run")[0].startswith("Regime: lazy — the kernel (lazy) regime")
    assert "weight movement ‖θ_T − θ₀‖/‖θ₀‖ = 0.00" in _texts(lazy, "run")[0]
    table = compare([("rich", pair["rich"], rich), ("lazy", pair["lazy"], lazy)], figures=False).tables[0][1]
    assert [row["regime"] for row in table] == ["rich", "lazy"]


def test_nc1_collapse_is_read_only_after_a_relative_drop(pair):
    rich, lazy = analyze(pair["rich"]), analyze(pair["lazy"])
    assert rich.summary["nc1_last"] < THRESHOLDS["nc1_drop"] * rich.summary["nc1_first"]
    assert any("collapse onto their means" in t for t in _texts(rich, "elasticity"))
    first, last = lazy.summary["nc1_first"], lazy.summary["nc1_last"]
    assert last < 1 and abs(last / first - 1) < 0.1  # below 1 from the start, and flat
    lazy_nc1 = [t for t in _texts(lazy, "elasticity") if t.startswith("NC1")]
    assert len(lazy_nc1) == 1 and "no collapse through training" in lazy_nc1[0]
    assert not any("collapse onto" in t for t in _texts(lazy, "elasticity"))


def test_two_point_reads_a_distance_that_did_not_move_as_lazy(pair):
    lazy = analyze(pair["lazy"])
    two_point = _texts(lazy, "two_point")
    assert len(two_point) == 1 and two_point[0].startswith("u did not move")
    assert "lazy regime" in two_point[0] and "does not describe" not in two_point[0]
    assert not analyze(pair["rich"]).summary["u_change"] < THRESHOLDS["regime_lazy"]


def test_nc1_of_a_conv_feature_map_is_taken_on_its_global_average_pool():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(30) % 3
    # class c lights channel c at a random pixel: what a pooled head sees, wherever it is
    images = 0.01 * torch.randn(30, 3, 8, 8, generator=g)
    where = torch.randint(0, 8, (30, 2), generator=g)
    images[torch.arange(30), labels, where[:, 0], where[:, 1]] += 1.0
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 3, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 3))
    monitor = Monitor(model, ["0"], images, labels, measures=("elasticity",), total_steps=1, name="conv")
    monitor.step(0)
    recorded = monitor.recording()
    with torch.no_grad():
        maps = model[0](images)
    pooled = neural_collapse(maps.mean((2, 3)).double(), labels, center=True).within_between
    flattened = neural_collapse(maps.flatten(1).double(), labels, center=True).within_between
    assert recorded["nc_within_between"][0, 0] == pytest.approx(pooled, rel=1e-6)
    assert pooled < 0.02 and flattened > 5 * pooled
    assert recorded.meta["nc_pooling"] == {"0": measures.POOLING} and "global average pool" in measures.POOLING
    analysis = analyze(recorded)
    assert any("layer 0 (feature map globally average-pooled)" in t for t in _texts(analysis, "elasticity"))
    assert np.isfinite(analysis.summary["nc1_last"])
