"""single_neuron (seed 003, Figs. 3 and 4): the run past t* keeps the t* claims' records, the neuron traces are
bounded by memory_gb without changing the dynamics, the interface distance, the Fig. 4 metric."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from repdyn.data.manifolds import sample_manifold
from repdyn.experiments.compression import EXPERIMENTS
from repdyn.experiments.compression.common import generator
from repdyn.experiments.compression.single_neuron import T_STAR_FRACTION, interface_distance
from repdyn.nn.gradient_flow import train_gradient_flow
from repdyn.nn.models.hidden_layer import init_hidden_layer
from repdyn.theory.compression import STRIPE_X_MAX, STRIPE_X_MIN

EXP = next(e for e in EXPERIMENTS if e.name == "compression.single_neuron")


def test_interface_distance() -> None:
    zeta = np.array([STRIPE_X_MIN, STRIPE_X_MAX, 0.0, 2.0, -1.226])
    np.testing.assert_allclose(interface_distance(zeta), [0.0, 0.0, 0.3, 2.0 - STRIPE_X_MAX, 0.926])


def test_run_past_t_star_keeps_the_records_of_the_run_stopped_at_t_star() -> None:
    """The t* claims read the records up to the first with 0.1 + 1.5/p fitted: the same states as a run that stops
    there (the stop rule does not change the dynamics), while the run itself goes on to fit_fraction."""
    cfg = dataclasses.replace(EXP.config("smoke"), max_steps=400)
    out = EXP.execute(cfg, EXP.runs(cfg)[0], 4, "cpu")
    gen = generator(4)
    x, y = sample_manifold("stripe", cfg.p, 2, gen, batch=(1,))
    net0 = init_hidden_layer(1, cfg.width, 2, gen)
    stopped = train_gradient_flow(net0, x, y, cfg.alpha, max_dgrad=cfg.max_dgrad,
                                  stop_fraction=T_STAR_FRACTION + 1.5 / cfg.p, max_steps=cfg.max_steps,
                                  trace_neurons=cfg.width)
    assert bool(stopped.stopped[0]), "the smoke run should pass t* within its cap"
    assert out["t"][-1] == float(stopped.trajectory["t"][-1, 0])
    np.testing.assert_array_equal(out["network"][:, -1], stopped.trajectory["neurons"][-1, 0].numpy())
    assert out["run_t"][-1] > out["t"][-1] and out["fitted_end"] > T_STAR_FRACTION + 1.5 / cfg.p


def test_trace_memory_setting_thins_the_records_and_changes_no_dynamics() -> None:
    cfg = EXP.config("smoke")
    run = EXP.runs(cfg)[0]
    full = EXP.execute(cfg, run, 2, "cpu")
    # 8 neurons · 4 parameters · 8 bytes · 200 steps = 51200 bytes: a bound of 12800 bytes keeps one record in 4
    thin = EXP.execute(dataclasses.replace(cfg, memory_gb=12800 / 2**30), run, 2, "cpu")
    np.testing.assert_array_equal(full["end"], thin["end"])
    assert full["t_star"] == thin["t_star"] and full["fitted_end"] == thin["fitted_end"]
    steps = np.unique(full["run_t"]).size
    assert np.unique(thin["run_t"]).size <= math.ceil(steps / 4) + 2 < steps


def test_fitting_regime_claim_and_metric_from_the_stored_states() -> None:
    """Fig. 4: fixed_points_move is, per grown neuron, |ζ₁(end) − ζ₁(t*)| > 0.1, and the metric the grown neurons'
    median interface distance at the run's end over the same at t*, both recomputed here from the stored states."""
    cfg = dataclasses.replace(EXP.config("smoke"), max_steps=400)
    results = {run.label: EXP.execute(cfg, run, 4, "cpu") for run in EXP.runs(cfg)}
    r = results["d=2"]
    analysis = EXP.analyse(cfg, results)
    row = analysis.metrics[0]
    net = r["network"]
    grown = np.abs(net[:, -1, 0]) / np.maximum(np.abs(net[:, 0, 0]), 1e-12) > 20
    assert grown.any()
    at_t_star = -math.sqrt(2) * net[grown, -1, 2] / net[grown, -1, 0]
    at_end = -math.sqrt(2) * r["end"][grown, 2] / r["end"][grown, 0]
    expected = np.median(interface_distance(at_end) / interface_distance(at_t_star))
    assert row["interface_ratio_median"] == expected and np.isfinite(expected)
    assert row["fitted_end"] > T_STAR_FRACTION and row["t_end_over_t_star"] > 1
    moved = np.asarray(analysis.measured["fixed_points_move"].values)
    np.testing.assert_array_equal(moved, np.abs(at_end - at_t_star) > 0.1)
    assert moved.size == grown.sum()
