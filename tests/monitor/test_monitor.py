"""The Monitor: input checks before training, the schedule, training left unchanged, the recorded numbers against
independent computations, and the stored recording."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import repdyn
from monitor_scripts import Residual
from repdyn.monitor import Monitor, load_recording
from repdyn.monitor.monitor import geometric_steps
from repdyn.nn.models.cnn import SmallCNN
from repdyn.probes import effective_rank


def _mlp(seed: int = 0, dropout: float = 0.0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Dropout(dropout), nn.Linear(12, 10), nn.BatchNorm1d(10),
                         nn.Linear(10, 3))


def _probe(n: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 6, generator=g), torch.arange(n) % 3


def test_import_repdyn_is_lazy_and_exports_monitor():
    assert repdyn.Monitor is Monitor
    import subprocess
    import sys

    frameworks = ("pytorch_lightning", "lightning", "transformers", "wandb", "tensorboard")
    code = ("import sys, repdyn, repdyn.monitor, repdyn.monitor.integrations, repdyn.monitor.sinks; "
            f"print([m for m in {frameworks!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"  # the optional frameworks are imported only when a callback or sink is made


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"layers": ["1", "nope"]}, r"unknown layer name\(s\) \['nope'\]; available: 0, 1, 2, 3, 4, 5"),
    ({"probe_inputs": torch.randn(24, 5)}, r"probe_inputs of shape \(24, 5\) float32 do not fit the model"),
    ({"probe_inputs": torch.randn(6)}, r"probe_inputs must be a tensor \(n, \.\.\.\)"),
    ({"labels": None}, r"measure\(s\) \['two_point', 'ntk', 'elasticity'\] need labels"),
    ({"labels": torch.arange(23) % 3}, r"labels must be \(n,\) = \(24,\) integer classes"),
    ({"labels": torch.arange(24) % 4}, r"labels must lie in \[0, 3\)"),
    ({"labels": torch.zeros(24, dtype=torch.long)}, r"at least 2 probe inputs of every class 0\.\.2"),
    ({"labels": torch.rand(24)}, r"integer classes"),
    ({"measures": ["rank", "curvature"]}, r"unknown measure\(s\) \['curvature'\]"),
    ({"pairs": [(0, 0)]}, r"pairs must hold two different indices in \[0, 24\)"),
    ({"pairs": [(0, 30)]}, r"pairs must hold two different indices"),
    ({"loss_kind": "hinge"}, r"loss_kind='hinge'; allowed: cross_entropy, squared_error, other"),
    ({"every_n_steps": 5, "schedule": [0, 5]}, r"give either schedule= or every_n_steps=, not both"),
    ({"every_n_steps": 0}, r"every_n_steps=0 must be an integer >= 1"),
    ({"total_steps": 10, "schedule": [0, 20]}, r"schedule steps must lie in \[0, total_steps=10\], got \[20\]"),
    ({"select": {"3": 0}}, r"select names layer\(s\) \['3'\] that are not among layers=\['1'\]"),
    ({"output_fn": lambda out: out[:, :, None]}, r"it returned \(2, 3, 1\) .* pass output_fn to turn its output"),
    ({"on_record": 3}, r"on_record must be a function sink\(scalars, step\)"),
])
def test_bad_input_is_refused_before_training(kwargs, message):
    x, y = _probe()
    args = {"layers": ["1"], "probe_inputs": x, "labels": y, **kwargs}
    with pytest.raises(ValueError, match=message):
        Monitor(_mlp(), **args)


def test_label_free_measures_need_no_labels():
    x, _ = _probe()
    monitor = Monitor(_mlp(), ["1", "3"], x, measures=("rank", "coi"), total_steps=10)
    monitor.step(0)
    assert set(monitor.recording().arrays) >= {"effective_rank", "cost_of_identity", "outputs"}


def test_default_schedule_is_log_spaced_and_ntk_subset_spans_it():
    x, y = _probe()
    monitor = Monitor(_mlp(), ["1"], x, y, total_steps=1000, n_records=16, ntk_records=5, measures=("rank",))
    steps = monitor.schedule
    assert steps[0] == 0 and steps[-1] == 1000 and 12 <= len(steps) <= 16
    gaps = np.diff(np.log1p(steps))
    assert gaps.max() < 3 * np.median(gaps)  # evenly spread in log(1 + t), up to rounding at small t
    ntk = sorted(monitor.ntk_schedule)
    assert set(ntk) <= set(steps.tolist()) and ntk[0] == 0 and ntk[-1] == 1000 and len(ntk) == 5
    recorded = [s for s in range(1001) if monitor.step(s)]
    assert recorded == steps.tolist()
    assert not monitor.step(1000)  # already recorded


def test_ntk_points_are_taken_in_turn_from_each_class():
    x, _ = _probe(12)
    labels = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2])
    monitor = Monitor(_mlp(), ["1"], x, labels, ntk_points=7)
    assert monitor.ntk_index.tolist() == [0, 4, 8, 1, 5, 9, 2]


def test_geometric_steps_without_a_known_length():
    steps = geometric_steps(6, limit=1000)
    assert steps[:6].tolist() == [0, 1, 2, 3, 5, 7] and steps[-1] == 1000
    assert set(geometric_steps(2, limit=1000).tolist()) <= set(steps.tolist())


def _train(monitor_on: bool, steps: int = 12) -> tuple[nn.Module, Monitor | None]:
    model = _mlp(seed=3, dropout=0.3)
    x, y = _probe(48)
    probe_x, probe_y = _probe(24)
    monitor = Monitor(model, ["1", "4"], probe_x, probe_y, total_steps=steps, n_records=6) if monitor_on else None
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(11)  # dropout draws from the global generator: the monitor must not draw from it
    for step in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        if monitor is not None:  # record every step, between backward and update: gradients must stay as they are
            grads = [p.grad.clone() for p in model.parameters()]
            monitor.record(step)
            assert all(torch.equal(g, p.grad) for g, p in zip(grads, model.parameters()))
        optimizer.step()
    if monitor is not None:
        monitor.step(steps)
    return model, monitor


def test_training_is_bitwise_the_same_with_the_monitor_and_nothing_keeps_a_graph():
    plain, _ = _train(False)
    watched, monitor = _train(True)
    assert watched.training
    for (name, a), b in zip(plain.state_dict().items(), watched.state_dict().values()):
        assert torch.equal(a, b), name  # parameters and BatchNorm running statistics
    recording = monitor.recording()
    assert all(isinstance(v, np.ndarray) for v in recording.arrays.values())
    assert recording.steps.tolist() == list(range(13))
    assert recording["ntk_steps"].tolist() == sorted(monitor.ntk_schedule)


def test_recorded_numbers_match_independent_computations():
    model = _mlp(seed=5)
    x, y = _probe()
    pairs = [(0, 1), (4, 8)]
    monitor = Monitor(model, ["1", "4"], x, y, pairs=pairs, pair_layer="1", ntk_points=6, schedule=[0])
    assert monitor.ntk_index.tolist() == [0, 1, 2, 3, 4, 5]  # labels 0, 1, 2, 0, 1, 2: in turn per class already
    monitor.step(0)
    rec = monitor.recording()
    model.eval()
    with torch.no_grad():
        hidden = torch.tanh(model[0](x))
        out = model(x)
    onehot = nn.functional.one_hot(y, 3).float()
    for p, (i, j) in enumerate(pairs):
        dy = out[j] - out[i]
        assert rec["pair_u"][0, p] == pytest.approx(float((hidden[j] - hidden[i]).pow(2).sum()), rel=1e-5)
        assert rec["pair_v"][0, p] == pytest.approx(float(dy.pow(2).sum()), rel=1e-5)
        assert rec["pair_w"][0, p] == pytest.approx(float(dy.pow(2).sum() - dy @ (onehot[j] - onehot[i])),
                                                    rel=1e-5, abs=1e-6)
        assert rec["pair_X"][p] == pytest.approx(float((x[j] - x[i]).pow(2).sum()), rel=1e-6)
        assert rec["pair_Y"][p] == (2.0 if y[i] != y[j] else 0.0)
    assert rec["effective_rank"][0, 0] == pytest.approx(float(effective_rank(hidden, center=True)), rel=1e-6)
    np.testing.assert_allclose(rec["outputs"][0], out.numpy(), rtol=1e-6)
    # NTK against per-sample gradients from plain autograd, one backward per (point, output)
    params = [p for p in model.parameters()]
    jac = []
    for i in range(6):  # ntk_index = 0..5
        rows = []
        for a in range(3):
            grads = torch.autograd.grad(model(x[i:i + 1])[0, a], params)
            rows.append(torch.cat([g.flatten() for g in grads]))
        jac.append(torch.stack(rows))
    jac = torch.stack(jac).double()
    expected = torch.einsum("iap,jap->ij", jac, jac).numpy()
    np.testing.assert_allclose(rec["ntk"][0], expected, rtol=1e-4)
    assert rec["ntk_steps"].tolist() == [0]


def test_recording_round_trip_through_the_store(tmp_path):
    _, monitor = _train(True, steps=6)
    path = monitor.save(tmp_path)
    assert path == tmp_path / "monitor" / f"{monitor.name}.npz" and monitor.name.startswith("sequential-")
    loaded = load_recording(path)
    original = monitor.recording()
    assert loaded.meta == original.meta
    assert set(loaded.arrays) == set(original.arrays)
    for key, value in original.arrays.items():
        np.testing.assert_array_equal(loaded[key], value)
    table = loaded.scalar_table()
    assert table["steps"].tolist() == original.steps.tolist()
    assert table["effective_rank[1]"].tolist() == pytest.approx(original["effective_rank"][:, 0].tolist())
    assert not list(path.parent.glob(".tmp-*"))


def test_load_recording_refuses_other_files(tmp_path):
    with pytest.raises(ValueError, match="must be an existing .npz"):
        load_recording(tmp_path / "missing.npz")
    other = tmp_path / "monitor" / "other.npz"
    other.parent.mkdir()
    np.savez(other, a=np.ones(3))
    with pytest.raises(ValueError, match="not a monitor recording"):
        load_recording(other)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_monitor_on_cuda_matches_cpu():
    x = torch.rand(40, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    y = torch.arange(40) % 10
    results = []
    for device in ("cpu", "cuda"):
        model = SmallCNN((1, 8, 8), [4, 8], 10, generator=torch.Generator().manual_seed(0)).to(device)
        monitor = Monitor(model, ["layer0", "layer1"], x.to(device), y, schedule=[0], ntk_points=8)
        monitor.step(0)
        results.append(monitor.recording())
    for key in ("outputs", "effective_rank", "pair_u", "ntk", "nc_within_between"):
        np.testing.assert_allclose(results[1][key], results[0][key], rtol=2e-3, atol=1e-4, err_msg=key)


def test_hamiltonian_momenta_follow_the_backward_closed_form():
    """At the output, with C = ‖Y − A_L‖²_F/N and an identity read-out, B_L = (2/(λN))(Y − A_L) ([E-BWD] of spec
    002 §2.4); −2H/L̃ = 2⟨B, A⟩ − ‖Bσ(A)ᵀ‖² (Eq. (1) of seed 002) computed here by hand."""
    model = Residual()
    x, y = torch.randn(9, 3, generator=torch.Generator().manual_seed(2)), torch.arange(9) % 3
    lam = 0.1

    def cost(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return (nn.functional.one_hot(labels, 3).to(outputs.dtype) - outputs).pow(2).sum() / len(labels)

    monitor = Monitor(model, ["stream.0", "stream.2"], x, y, measures=("hamiltonian",), cost=cost,
                      weight_decay=lam, schedule=[0])
    monitor.step(0)
    rec = monitor.recording()
    with torch.no_grad():
        a = model(x).double().T                                         # A_L: 3 features × 9 points
    b = 2.0 / (lam * 9) * (nn.functional.one_hot(y, 3).double().T - a)
    sigma = torch.cat([torch.relu(a), torch.ones(1, 9, dtype=a.dtype)])
    expected = 2 * (b * a).sum() - (b @ sigma.T).pow(2).sum()
    assert rec["hamiltonian"][0, 1] == pytest.approx(float(expected), rel=1e-5)
    assert rec["momentum_norm"][0, 1] == pytest.approx(float(b.norm()), rel=1e-5)
    assert all(p.grad is None for p in model.parameters())
    with pytest.raises(ValueError, match="needs cost=C"):
        Monitor(model, ["stream.1"], x, y, measures=("hamiltonian",), weight_decay=lam)
