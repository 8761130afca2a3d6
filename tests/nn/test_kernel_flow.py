"""Frozen-kernel learning, the hinge-loss gradient flow on dual coefficients (spec 003 §2.7): it stops at zero
hinge loss, is close to the hard-margin SVM, its controller is spec 003 §2.4's, and a killed run resumes bit for
bit."""

from __future__ import annotations

import math

import pytest
import torch
from sklearn.svm import SVC

from repdyn.nn.driver import AdaptiveEuler
from repdyn.nn.kernel_flow import kernel_hinge_flow
from repdyn.theory.compression import kernel_predict


def _separable(seed: int, trials: int = 2, p: int = 30) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(trials, p, 2, generator=g, dtype=torch.float64)
    y = torch.sign(x[..., 0] + 0.3 * x[..., 1])
    x = x + 0.5 * y[..., None] * torch.tensor([1.0, 0.0], dtype=torch.float64)  # a margin between the classes
    return x @ x.transpose(1, 2) + 1.0, y


def test_kernel_flow_separable_data_stops_at_zero_hinge_loss() -> None:
    gram, y = _separable(5)
    res = kernel_hinge_flow(gram, y)
    assert bool(res.converged.all())
    margins = y * kernel_predict(gram, res.coefficients)
    assert float(margins.min()) >= 1.0
    assert float((1 - margins).clamp_min(0).sum()) == 0.0
    # only points that were once below the margin carry weight, and y·a ≥ 0 (a_μ grows along y_μ)
    assert float((y * res.coefficients).min()) >= 0.0


def test_kernel_flow_classifier_is_close_to_hard_margin_svm() -> None:
    g = torch.Generator().manual_seed(6)
    x = torch.randn(200, 2, generator=g, dtype=torch.float64)
    y = torch.where(x[:, 0] > 0.0, 1.0, -1.0).double()
    x[:, 0] += 0.3 * y
    gram = x @ x.T
    res = kernel_hinge_flow(gram, y)
    assert bool(res.converged)
    xt = torch.randn(2000, 2, generator=g, dtype=torch.float64)
    flow_pred = torch.sign(kernel_predict(xt @ x.T, res.coefficients))
    svm = SVC(kernel="precomputed", C=1e6).fit(gram.numpy(), y.numpy())
    svm_pred = svm.predict((xt @ x.T).numpy())
    assert float((flow_pred.numpy() != svm_pred).mean()) < 0.03


def test_kernel_flow_bad_input() -> None:
    with pytest.raises(ValueError, match="do not match"):
        kernel_hinge_flow(torch.eye(3), torch.ones(4))
    with pytest.raises(ValueError, match="max_dgrad"):
        kernel_hinge_flow(torch.eye(3), torch.ones(3), max_dgrad=0.0)


def test_the_controller_is_the_kernel_rule_of_spec_003() -> None:
    """AdaptiveEuler(calm = 0.1, jumps) decides as the kernel variant of spec 003 §2.4: accept when dout and dgrad
    are below their thresholds, or dout is and the step is a jump (a margin event, or dgrad fell by less than 10×
    since its rejection); grow when both are below 0.1× their thresholds; reject the running others."""
    g = torch.Generator().manual_seed(0)
    n, max_dgrad, max_dout = 4000, 1e-4, 0.1
    dgrad = max_dgrad * 10 ** (3 * torch.rand(n, generator=g, dtype=torch.float64) - 2)
    dout = max_dout * 10 ** (2 * torch.rand(n, generator=g, dtype=torch.float64) - 1.5)
    active = torch.rand(n, generator=g) < 0.8
    last = torch.where(torch.rand(n, generator=g) < 0.5, dgrad * 10 ** (2 * torch.rand(n, generator=g) - 0.5),
                       torch.full((n,), math.inf, dtype=torch.float64))
    event = torch.rand(n, generator=g) < 0.3
    jump = active & (dout < max_dout) & ((dgrad > 0.1 * last) | event)
    accept = active & (dout < max_dout) & ((dgrad < max_dgrad) | jump)
    grow = accept & (dgrad < 0.1 * max_dgrad) & (dout < 0.1 * max_dout)
    reject = active & ~accept
    verdict = AdaptiveEuler(max_dgrad, max_dout, calm=0.1, jumps=True).decide(dgrad, dout, active, last, event)
    assert torch.equal(verdict.accept, accept) and torch.equal(verdict.grow, grow)
    assert torch.equal(verdict.reject, reject)
    assert torch.equal(verdict.last_rejected, torch.where(reject & (dout < max_dout), dgrad, math.inf))
    for name in ("accept", "grow", "reject"):
        assert 0 < int(getattr(verdict, name).sum()) < n, name  # each outcome occurs and fails somewhere


@pytest.mark.parametrize("stop_at", [40, 300])
def test_an_interrupted_flow_resumes_from_its_checkpoint_bit_identical(tmp_path, stop_at) -> None:
    from interrupt import Killed, kill_at
    from repdyn.nn.checkpoint import Checkpointer, checkpointing
    from repdyn.nn.progress import reporting

    gram, y = _separable(7, trials=3)
    expected = kernel_hinge_flow(gram, y)
    assert expected.trajectory.stopped_at > stop_at
    path = tmp_path / "run.ckpt"
    with checkpointing(Checkpointer(path, every=0.0)), reporting(kill_at(stop_at)), pytest.raises(Killed):
        kernel_hinge_flow(gram, y)
    steps_seen = []
    with checkpointing(Checkpointer(path, every=0.0)), reporting(lambda step, total, loss: steps_seen.append(step)):
        found = kernel_hinge_flow(gram, y)
    assert steps_seen[0] == stop_at
    assert found.trajectory.stopped_at == expected.trajectory.stopped_at
    for name in ("coefficients", "time", "converged"):
        assert getattr(found, name).numpy().tobytes() == getattr(expected, name).numpy().tobytes(), name
    with checkpointing(Checkpointer(path, every=0.0)):  # a finished flow is read back, not run again
        again = kernel_hinge_flow(gram, y)
    assert again.coefficients.numpy().tobytes() == expected.coefficients.numpy().tobytes()
