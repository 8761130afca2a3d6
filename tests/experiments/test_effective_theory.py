"""Seed-000 specifics: registry order, the paper's architecture sizes at every scale, helpers, purity of runs and
rejection of bad configs (the smoke runs with their controls are in tests/experiments/test_contract.py)."""

import numpy as np
import pytest

from repdyn.data.context_blobs import context_blobs
from repdyn.experiments.effective_theory import EXPERIMENTS
from repdyn.experiments.effective_theory.blobs import classical_mds, context_separation, irrelevant_ratio
from repdyn.experiments.effective_theory.common import (
    TABLE1,
    loss_fit,
    plateau_fraction,
    readout_layer,
    target_mean,
    width_of,
)
from repdyn.framework.base import SCALES
from repdyn.framework.config import ConfigError, apply_overrides, validate
from repdyn.theory import effective_theory as et

NAMES = [e.name for e in EXPERIMENTS]


def test_registered_in_issue_order():
    assert NAMES == ["effective_theory.two_point", "effective_theory.init_scale", "effective_theory.final_distance",
                     "effective_theory.control", "effective_theory.depth", "effective_theory.xor",
                     "effective_theory.blobs", "effective_theory.digits", "effective_theory.adam"]
    for exp in EXPERIMENTS:
        for scale in SCALES:
            validate(exp.config(scale))
        assert len({c.id for c in exp.claims}) == len(exp.claims)


def test_execute_is_pure():
    exp = EXPERIMENTS[0]
    config = exp.config("smoke")
    run = exp.runs(config)[0]
    a, b = exp.execute(config, run, 3, "cpu"), exp.execute(config, run, 3, "cpu")
    np.testing.assert_array_equal(a["u"], b["u"])
    c = exp.execute(config, run, 4, "cpu")
    assert not np.array_equal(a["u"], c["u"])


def test_helpers():
    # the authors' hidden_layer (model_settings): 10 for 20 hidden layers, 5 for 10, 1 for 2, 0 for 1
    assert [readout_layer(n) for n in (20, 10, 4, 2, 1)] == ["layer10", "layer5", "layer2", "layer1", "layer0"]
    t = np.arange(10.0)
    u = np.array([0, 0, 0, 0, 0, 0.01, 0.5, 1, 1, 1.0])
    assert plateau_fraction(t, u) == pytest.approx(6 / 9)
    assert np.isnan(plateau_fraction(t, np.zeros(10)))  # nothing learnt: no plateau to measure
    # Table 1's sizes at reduced widths: the narrow net keeps 50 units, the conv net 20 channels.
    assert width_of(TABLE1["narrow"], 64) == 50 and width_of(TABLE1["narrow"], 500) == 50
    assert width_of(TABLE1["conv"], 64) == 500 and width_of(TABLE1["conv"], 500) == 500
    data = context_blobs(grid=5)
    # Representation = (relevant, irrelevant) coordinates: ratio 1; relevant only: ratio 0.
    relevant = np.where(data.context == 0, data.feature_x, data.feature_y).astype(float)
    irrelevant = np.where(data.context == 0, data.feature_y, data.feature_x).astype(float)
    assert irrelevant_ratio(np.stack([relevant, irrelevant], 1), data) == pytest.approx(1.0)
    assert irrelevant_ratio(np.stack([relevant, 0 * irrelevant], 1), data) == pytest.approx(0.0)
    # Both contexts on one line ordered by target: context separation 0.
    assert context_separation(data.targets.copy(), data) == pytest.approx(0.0)
    # Classical MDS of planar points reproduces their distances.
    points = np.random.default_rng(0).standard_normal((12, 2))
    sq = ((points[:, None] - points[None]) ** 2).sum(-1)
    embedded = classical_mds(sq)
    np.testing.assert_allclose(((embedded[:, None] - embedded[None]) ** 2).sum(-1), sq, atol=1e-10)


def test_loss_fit_recovers_the_output_mean_rate_of_an_eq9_curve():
    """Fig. 12's loss fit: on a loss built from Eq. 9 (an Eq. 7 solution, ȳ decaying at a known 1/τ_ȳ) it returns
    that rate and a relative error of ~0; the same curve with (v, w) frozen at their start fits far worse."""
    t = np.linspace(0.0, 400.0, 401)
    theory = et.integrate_dynamics((0.05, 1e-3, -0.02), 0.25, 1.0, 0.2, 0.1, t)  # a whole transition
    m = target_mean(1.0)
    loss = et.loss(et.output_mean(t, [0.1], m, 0.03), m, theory.v, theory.w, 1.0)
    rate, error, predicted = loss_fit(t, loss, 0.1, m, theory, 1.0)
    assert rate == pytest.approx(0.03, rel=1e-4) and error < 1e-8
    np.testing.assert_allclose(predicted, loss, rtol=1e-3, atol=1e-9)
    frozen = et.Trajectory(t, *(np.full(t.size, a[0]) for a in (theory.u, theory.v, theory.w)))
    assert loss_fit(t, loss, 0.1, m, frozen, 1.0)[1] > 0.1


def test_depth_trend_needs_three_accurate_layers():
    from repdyn.experiments.effective_theory.depth import spearman

    assert spearman(np.arange(3), np.array([1.0, 2.0, 4.0])) == pytest.approx(1.0)
    assert np.isnan(spearman(np.arange(2), np.array([1.0, 2.0])))  # "in this regime" with < 3 layers: no trend


def test_bad_override_is_rejected():
    exp = EXPERIMENTS[0]
    with pytest.raises(ConfigError, match="architectures"):
        apply_overrides(exp.config("smoke"), {"architectures": "default,lstm"})


def test_digits_at_paper_scale_without_mnist_is_skipped_not_run_on_the_stand_in():
    import dataclasses

    exp = next(e for e in EXPERIMENTS if e.name == "effective_theory.digits")
    paper = exp.scales["paper"]
    assert "no MNIST folder given" in exp.prepare(paper) and "stand_in=true" in exp.prepare(paper)
    assert exp.prepare(dataclasses.replace(paper, stand_in=True)) is None  # the user opted into the stand-in
    assert exp.prepare(exp.scales["quick"]) is None
    assert (paper.lr, paper.trajectory_lr) == (0.005, 0.003)  # Table 2: structure and trajectory runs
    assert [r.label for r in exp.runs(paper)] == ["train", "trajectory", "adam"]  # Adam: Fig. 18
    assert [r.label for r in exp.runs(exp.scales["quick"])] == ["train", "adam"]


def test_digits_reads_mnist_from_the_folder_the_user_names(tmp_path):
    """The MNIST path on small IDX files written here: prepare checks the folder (a bad one is a ConfigError, exit
    2), execute trains on it, the trajectory run has Table 2's own learning rate, and the report names MNIST."""
    import dataclasses
    import struct

    exp = next(e for e in EXPERIMENTS if e.name == "effective_theory.digits")
    rng = np.random.default_rng(0)
    n = 120
    labels = np.arange(n, dtype=np.uint8) % 10
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    for name, array in (("train-images-idx3-ubyte", images), ("train-labels-idx1-ubyte", labels)):
        header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + b"".join(struct.pack(">I", d) for d in array.shape)
        (tmp_path / name).write_bytes(header + array.tobytes())
    config = dataclasses.replace(exp.scales["paper"], data_dir=str(tmp_path), n_train=n, width=8, epochs=2,
                                 batch_size=40, seeds=2, record_every=1, taylor_pairs=20, taylor_bins=4)
    assert exp.prepare(config) is None
    with pytest.raises(ConfigError, match="data_dir="):
        exp.prepare(dataclasses.replace(config, n_train=n + 1))
    with pytest.raises(ConfigError, match="data_dir="):
        exp.prepare(dataclasses.replace(config, data_dir=str(tmp_path / "missing")))
    results = {run.label: exp.execute(config, run, 0, "cpu") for run in exp.runs(config)}
    assert set(results) == {"train", "trajectory", "adam"} and "hidden" not in results["trajectory"]
    # Fig. 18: the same initial networks, trained with Adam instead of SGD
    np.testing.assert_array_equal(results["adam"]["hidden0"], results["train"]["hidden0"])
    assert not np.allclose(results["adam"]["hidden"], results["train"]["hidden"])
    np.testing.assert_array_equal(results["train"]["u"][0], results["trajectory"]["u"][0])  # same initial networks
    assert not np.array_equal(results["train"]["u"][-1], results["trajectory"]["u"][-1])  # different learning rates
    assert results["train"]["hidden"].shape == (2, 100, 8)
    assert "MNIST from" in exp.analyse(config, results).notes


def test_final_distance_splits_its_repetitions_into_independent_runs_at_paper_scale():
    import dataclasses

    from repdyn.runtime import registry

    experiment = registry.get("effective_theory.final_distance")
    paper = experiment.config("paper")
    assert [r.label for r in experiment.runs(paper)] == [f"{name} repeat={r}" for name in paper.architectures
                                                         for r in range(paper.repeats)]
    config = dataclasses.replace(experiment.config("smoke"), run_per_repeat=True, repeats=2)
    batched = dataclasses.replace(config, run_per_repeat=False)
    (sweep,) = experiment.runs(batched)
    whole = experiment.execute(batched, sweep, 7, "cpu")
    first = experiment.execute(config, experiment.runs(config)[0], 7, "cpu")
    size = config.fit_trials + config.grid**2
    np.testing.assert_array_equal(first["u"], whole["u"][:, :size])  # the same trials, trained alone
    split = {run.label: experiment.execute(config, run, 7, "cpu") for run in experiment.runs(config)}
    assert experiment.analyse(config, split).measured["slope"].values[0] == \
        experiment.analyse(batched, {"default sweep": whole}).measured["slope"].values[0]


def test_tangent_kernel_does_not_grow_with_width():
    """Why the Table-1 learning rates are used unchanged at reduced widths: ‖∂f/∂θ‖² of the default 20-layer network
    at a 1-D input is O(1) in width under Xavier init (spec 000 §6.2's 500/width factor assumed it grows)."""
    import torch

    from repdyn.nn import MLP

    def kernel(width: int) -> float:
        values = []
        for seed in range(3):
            torch.manual_seed(seed)
            model = MLP(1, width, 20, 1, activation="leaky_relu", dtype=torch.float64)
            out = model(torch.tensor([[-1.0]], dtype=torch.float64))[0, 0]
            values.append(sum(float((g**2).sum()) for g in torch.autograd.grad(out, list(model.parameters()))))
        return float(np.median(values))

    assert 0.5 < kernel(64) / kernel(500) < 2.0


def test_w_never_dips_below_minus_a_quarter_of_Y():
    """Fig. 2's dip of w stops at −Y/4: for 1-D outputs w = ‖dy‖² − dy·Δy ≥ −Y/4 identically (an algebraic bound,
    reached when dy = Δy/2; formerly the claim two_point.w_dip, which could fail only by not converging)."""
    from repdyn.experiments.effective_theory.common import train_two_point

    res = train_two_point(activation="leaky_relu", depth=4, width=16, gains=[1.0, 1.0], lrs=[0.2, 0.2], seeds=[0, 1],
                          steps=400, record_every=1, dx=[0.5, 1.0], dy=[1.0, 0.5])
    Y = res["Y"]
    assert np.all(res["w"] >= -Y / 4 - 1e-12)
    np.testing.assert_allclose(np.abs(res["v"] - res["w"]), np.sqrt(res["v"] * Y), rtol=1e-9, atol=1e-15)  # |dy·Δy|
    assert res["w"].min() < -0.9 * Y.min() / 4  # the bound is reached during training


def test_fig14_pairs_are_distinct_and_bins_give_spearman():
    from repdyn.experiments.effective_theory.digits import binned_trend, taylor_pairs

    pairs = taylor_pairs(50, 1000, seed=3)
    assert pairs.shape == (1000, 2) and np.all(pairs[:, 0] != pairs[:, 1]) and pairs.max() < 50
    assert np.array_equal(pairs, taylor_pairs(50, 1000, seed=3))
    distance = np.arange(100.0)
    rho, d, r = binned_trend(distance, 1.0 / (1.0 + distance), 10)
    assert rho == pytest.approx(-1.0) and len(d) == len(r) == 10
    np.testing.assert_allclose(d, np.arange(10) * 10 + 4.5)


def test_orient_negates_the_output_layer_of_members_that_start_with_positive_w():
    """The intervention of docs/reproduction/000.md#depth-fig-10: negating the output layer turns w(0) > 0 into
    w(0) < 0 (and leaves the other members and every hidden representation alone)."""
    from repdyn.experiments.effective_theory.common import train_two_point

    kwargs = dict(activation="leaky_relu", depth=4, width=16, gains=[1.0] * 6, lrs=[0.1] * 6, seeds=list(range(6)),
                  steps=0, record_every=1, dx=[0.5] * 6, dy=[1.0] * 6)
    plain, oriented = train_two_point(**kwargs), train_two_point(**kwargs, orient=True)
    assert np.array_equal(oriented["flipped"], plain["w"][0] > 0) and 0 < oriented["flipped"].sum() < 6
    assert np.all(oriented["w"][0] < 0)
    np.testing.assert_array_equal(oriented["u"], plain["u"])
    np.testing.assert_allclose(oriented["v"], plain["v"])


def test_digits_probes_fig14_after_taylor_epochs_without_changing_the_training():
    """Fig. 14 is measured after 30 of Table 2's 200 epochs: training in two segments around the probe gives the same
    trajectory (full-batch GD) as one segment; the Taylor terms are those of the earlier network."""
    import dataclasses

    exp = next(e for e in EXPERIMENTS if e.name == "effective_theory.digits")
    end = dataclasses.replace(exp.scales["smoke"], width=8, epochs=6, seeds=2, record_every=4, taylor_pairs=20,
                              taylor_bins=4, taylor_epochs=6)
    early = dataclasses.replace(end, taylor_epochs=3)
    run = exp.runs(end)[0]
    a, b = exp.execute(end, run, 0, "cpu"), exp.execute(early, run, 0, "cpu")
    np.testing.assert_array_equal(a["epochs"], [0, 4, 6])
    np.testing.assert_array_equal(a["epochs"], b["epochs"])
    np.testing.assert_allclose(a["u"], b["u"], rtol=1e-12)
    np.testing.assert_allclose(a["hidden"], b["hidden"], rtol=1e-12)
    np.testing.assert_array_equal(a["taylor0_ratio_h"], b["taylor0_ratio_h"])
    assert not np.allclose(a["taylor_ratio_h"], b["taylor_ratio_h"])


def test_random_features_measures_the_ks_distance_from_eq47_in_critical_values():
    from repdyn.experiments.effective_theory.final_distance import FinalDistance

    rng = np.random.default_rng(1)
    gain, tau_ratio, n = 0.05, 0.5, 40
    X = np.tile([0.25, 1.0, 2.25], n)[:n]
    Y = np.tile([1.0, 0.25, 1.0, 0.0], n)[:n]
    a_low = et.a_low(X, Y, tau_ratio)
    a_high = np.sqrt(2) * X * gain * rng.standard_normal(n)  # App. A.6: A_high ~ N(0, 2X²G²)
    final = 0.5 * a_high + np.sqrt(0.25 * a_high**2 + a_low**2)
    final[Y == 0] = 1e-6  # merged: excluded (Eq. 47 has an atom at 0 there)

    def measure(final, loss=None, trained=True):
        res = {"X": X, "Y": Y, "u": np.stack([X * gain, final])[:, :, None],  # mean ‖dh(0)‖²/X = G
               "loss": np.stack([np.ones(n), np.zeros(n) if loss is None else loss])}
        notes = []
        return FinalDistance._random_features(res, slice(0, n), tau_ratio, 1e-3, trained, notes), notes

    kept = int((Y > 0).sum())
    own, notes = measure(final)
    assert own == pytest.approx(et.final_distance_ks(final[Y > 0], a_low[Y > 0], X[Y > 0], gain)
                                / et.ks_critical(kept))
    assert own < 1.0 and f"over {kept} of {kept}" in notes[0]
    # 5 % more than Eq. 47 at every point is far outside its width (√2 X G ≤ 0.16): rejected.
    assert measure(np.where(Y > 0, 1.05 * final, final))[0] > 1.5
    # non-converged trials are discarded, and an untrained run has none
    loss = np.where(np.arange(n) < 10, 1.0, 0.0)
    assert "over 22 of 30" in measure(final, loss)[1][0]
    assert np.isnan(measure(final, trained=False)[0])


@pytest.mark.parametrize("scale", ["quick", "paper"])
def test_depth_control_and_init_scale_read_one_shared_ensemble_of_default_networks(scale, tmp_path):
    """The three experiments train the same setting (Table 1's default row; init_scale's gain 1.0 has its learning
    rate), so the planner schedules one shared run (and one untrained control) for all three at the paper scale. At
    quick, depth and control read it at width 500 and init_scale at its width 64: one shared run per width."""
    from repdyn.experiments.effective_theory.common import INIT_SCALES
    from repdyn.experiments.effective_theory.init_scale import DEFAULT_GAIN
    from repdyn.runtime.reproduce import plan, tasks_for

    assert (DEFAULT_GAIN, INIT_SCALES[DEFAULT_GAIN]) == (TABLE1["default"].gain, TABLE1["default"].lr)
    names = ["effective_theory.init_scale", "effective_theory.control", "effective_theory.depth"]
    tasks = tasks_for(plan(names, scale=scale, out=tmp_path))
    shared = [t for t in tasks if t.shared]
    depth = next(e for e in EXPERIMENTS if e.name == "effective_theory.depth").config(scale)
    init = next(e for e in EXPERIMENTS if e.name == "effective_theory.init_scale").config(scale)
    widths = {depth.width, init.width}
    assert (depth.width == 500) and (init.width == (64 if scale == "quick" else 500))
    assert len(shared) == 2 * len(widths) and {t.params["steps"] for t in shared} == {0, depth.steps}
    assert {t.params["width"] for t in shared} == widths
    assert all(t.params["networks"] == depth.trials for t in shared)  # the largest reader: depth analyses all
    assert sorted(t.label for t in tasks if not t.shared) == ["gains", "gains"]  # init_scale's other gains
    with pytest.raises(ConfigError, match="trials = 4 > networks = 3"):
        plan(["effective_theory.control"], scale="quick", out=tmp_path, overrides={"trials": "4"})


def test_no_plateau_large_reads_its_own_run_at_the_notebooks_width_and_step():
    """With plateau_trials (full: 15), gain 1.3 gets a run of its own at plateau_width (2_points.ipynb: 500) for
    plateau_steps at Table 1's rate (0.00075), which no_plateau_large and its precondition read instead of the gains
    run's width-64 networks; quick and paper have none (quick: a width-500 network costs about 54 CPU-s; paper: the
    gains run is already at the notebook's settings); the untrained control trains it for 0 steps."""
    from repdyn.experiments.effective_theory.common import INIT_SCALES
    from repdyn.experiments.effective_theory.init_scale import PLATEAU_RUN

    exp = next(e for e in EXPERIMENTS if e.name == "effective_theory.init_scale")
    full = exp.config("full")
    assert (full.plateau_trials, full.plateau_width, full.plateau_steps, full.plateau_time_compression) == (
        15, 500, 6000, 1.0)
    assert INIT_SCALES[1.3] == 0.00075  # Table 1; 2_points.ipynb: the file's 0.0015 halved, 3000 epochs doubled
    for scale in ("quick", "paper"):
        assert PLATEAU_RUN not in [r.label for r in exp.runs(exp.config(scale))]
    config = apply_overrides(exp.config("smoke"), {"plateau_trials": "3", "plateau_width": "8", "plateau_steps": "40",
                                                   "plateau_time_compression": "50", "record_every": "2"})
    [wide] = [r for r in exp.runs(config) if r.label == PLATEAU_RUN]
    res = exp.execute(config, wide, 4, "cpu")
    assert res["u"].shape[:2] == (21, 3) and res["steps"][-1] == 40
    np.testing.assert_allclose(res["gains"], 1.3)
    np.testing.assert_allclose(res["lrs"], 0.00075 * 50)
    assert exp.execute(apply_overrides(config, {"steps": "0"}), wide, 4, "cpu")["steps"].tolist() == [0]
    results = {r.label: exp.execute(config, r, 4, "cpu") for r in exp.runs(config) if not r.shared}
    analysis = exp.analyse(config, results)
    assert len(analysis.measured["no_plateau_large"].values) == 3
    assert "width 8" in analysis.measured["no_plateau_large"].note
    assert len(analysis.states["gain13_escape"].values) == 3
    assert "at width 8" in analysis.notes and [row["width"] for row in analysis.metrics if "width" in row] == [8] * 3


def test_init_scale_puts_the_shared_gain_one_networks_in_their_place():
    """by_gain: gain 1.0's columns are the shared ensemble's first `trials` members at the read-out layer, the other
    gains' the "gains" run's, in the order of config.gains; execute gives the other networks the seeds they had in
    the one 15-member ensemble (seed + place)."""
    from repdyn.experiments.effective_theory.init_scale import by_gain

    exp = next(e for e in EXPERIMENTS if e.name == "effective_theory.init_scale")
    config = apply_overrides(exp.config("smoke"), {"gains": "0.9,1.0,1.3", "trials": "2", "networks": "3"})
    T, depth = 4, config.depth
    own = {"steps": np.arange(T), "u": np.arange(4.0)[None, :, None] + np.zeros((T, 4, 1)),
           **{k: np.tile(np.arange(4.0), (T, 1)) for k in ("v", "w", "loss", "ybar")}, "lrs": np.arange(4.0)}
    layer = depth // 2  # the read-out layer (the authors' hidden_layer)
    u_shared = np.zeros((T, 3, depth))
    u_shared[:, :, layer] = 10 + np.arange(3.0)
    shared = {"steps": np.arange(T), "u": u_shared, "lrs": 10 + np.arange(3.0),
              **{k: np.tile(10 + np.arange(3.0), (T, 1)) for k in ("v", "w", "loss", "ybar")}}
    merged = by_gain(config, {"gains": own, "default_networks": shared})
    for name in ("u", "v", "w", "loss", "ybar"):
        np.testing.assert_array_equal(merged[name], np.tile([0, 1, 10, 11, 2, 3], (T, 1)))
    np.testing.assert_array_equal(merged["lrs"], [0, 1, 10, 11, 2, 3])
    [gains_run] = [r for r in exp.runs(config) if not r.shared]
    res = exp.execute(apply_overrides(config, {"steps": "0"}), gains_run, 5, "cpu")
    np.testing.assert_array_equal(res["gains"], [0.9, 0.9, 1.3, 1.3])
    alone = exp.execute(apply_overrides(config, {"steps": "0", "gains": "1.3"}), gains_run, 9, "cpu")
    np.testing.assert_array_equal(alone["w"], res["w"][:, 2:])  # seed 5 + places 4, 5 = seed 9 + places 0, 1


def test_digits_seed_batches_pool_every_per_seed_value_in_batch_order():
    """Two seed batches are two runs with their own seeds (so their own tracked pair), and every per-seed claim value
    of the pooled analysis is those of the batches analysed alone, in batch order."""
    import dataclasses

    from repdyn.experiments.effective_theory.digits import load_training_set, tracked_pair
    from repdyn.framework.base import batch_label

    exp = next(e for e in EXPERIMENTS if e.name == "effective_theory.digits")
    one = dataclasses.replace(exp.scales["smoke"], width=16, epochs=150, seeds=3, taylor_pairs=20, taylor_bins=4,
                              adam_seeds=0)
    two = dataclasses.replace(one, seed_batches=2)
    runs = exp.runs(two)
    assert [r.label for r in runs] == ["train", "train b=1"] and runs[0].seed_group != runs[1].seed_group
    parts = [exp.execute(two, run, seed, "cpu") for run, seed in zip(runs, (11, 12), strict=True)]
    assert not np.array_equal(parts[0]["hidden0"][0], parts[1]["hidden0"][0])
    labels = load_training_set(two)[1]
    pairs = np.concatenate([part["pair"] for part in parts])  # each network its own 0/1 pair, from its own seed
    assert pairs.shape == (6, 2) and (labels[pairs[:, 0]] == 0).all() and (labels[pairs[:, 1]] == 1).all()
    np.testing.assert_array_equal(pairs[:3], [tracked_pair(labels, 11 + i) for i in range(3)])
    assert len({tuple(p) for p in pairs}) > 1
    pooled = exp.analyse(two, {batch_label("train", b): part for b, part in enumerate(parts)}).measured
    alone = [exp.analyse(one, {"train": part}).measured for part in parts]
    for claim in ("pair_fit", "taylor_trend_h", "taylor_trend_y"):
        values = [v for a in alone for v in a[claim].values]
        np.testing.assert_array_equal(np.asarray(pooled[claim].values, dtype=float), np.asarray(values, dtype=float))
    assert len(pooled["pair_fit"].values) == 6
