"""The batch-1 SGD logging loop of seed 004 (spec 004 §3.5) on LeNet ensembles."""

import numpy as np
import pytest
import torch

from interrupt import Killed, kill_at
from repdyn.nn import Diverged, batch1_sgd
from repdyn.nn.batch1_sgd import train_batch1_sgd
from repdyn.nn.losses import cross_entropy
from repdyn.nn.models.lenet import lenet_ensemble


@pytest.mark.parametrize("channels, blank", [(1, False), (3, False), (1, True)])
def test_batch1_sgd_matches_torch_sgd_member_by_member(channels, blank):
    """The written-out step against autograd + ``torch.optim.SGD`` on each member. ``blank``: images with a constant
    zero half (like GeoMNIST's background), where a first-layer pooling window holds equal values (the bias): the
    gradient must go to the first of them, as ``max_pool2d``'s."""
    gen = torch.Generator().manual_seed(2)
    ens = lenet_ensemble(3, channels, 3, gen)
    with torch.no_grad():
        ens.params["conv1.bias"].abs_()                # positive biases: the ties in blank regions are not ReLU'd off
    members = [ens.member(k) for k in range(3)]
    x = torch.randn(6, channels, 32, 32, dtype=torch.float64, generator=gen)
    if blank:
        x[:, :, :, 16:] = 0
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    steps = 12
    log = train_batch1_sgd(ens, x, y, x, y, steps=steps, lr=0.05, generator=torch.Generator().manual_seed(3),
                           val_every=steps)
    for k, net in enumerate(members):
        opt = torch.optim.SGD(net.parameters(), lr=0.05)
        for t in range(steps):
            i = log.trajectory["sample"][t, k]
            z = net(x[i:i + 1])
            np.testing.assert_allclose(z[0].detach().numpy(), log.trajectory["logits"][t, k], rtol=1e-10, atol=1e-12)
            loss = cross_entropy(z, y[i:i + 1]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        for name, value in net.named_parameters():
            np.testing.assert_allclose(ens.params[name][k].detach().numpy(), value.detach().numpy(),
                                       rtol=1e-10, atol=1e-13)
        with torch.no_grad():
            out = net(x)
        np.testing.assert_allclose(log.validation["loss"][-1, k], cross_entropy(out, y).mean().item(), rtol=1e-10)
    np.testing.assert_array_equal(log.validation.steps, [0, steps])
    np.testing.assert_array_equal(log.trajectory["label"], y.numpy()[log.trajectory["sample"]])


def test_first_layer_columns_pool_in_windows():
    """The pooled-order columns gathered from the images: the convolution in (pooled row, pooled column, window row,
    window column) order, so a max over each 4 adjacent columns is ``max_pool2d`` of the convolution."""
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    w = torch.randn(6, 3, 5, 5, dtype=torch.float64)
    conv = torch.nn.functional.conv2d(x, w)
    z = (w.view(6, -1) @ batch1_sgd._conv1_columns(x)).view(2, 6, 14, 14, 2, 2)
    torch.testing.assert_close(z.permute(0, 1, 2, 4, 3, 5).reshape(2, 6, 28, 28), conv, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(z.amax((-2, -1)), torch.nn.functional.max_pool2d(conv, 2), rtol=1e-12, atol=1e-12)


def test_divergence_raises():
    ens = lenet_ensemble(2, 1, 3, torch.Generator().manual_seed(4))
    x = torch.full((3, 1, 32, 32), float("nan"), dtype=torch.float64)
    with pytest.raises(Diverged):
        train_batch1_sgd(ens, x, torch.tensor([0, 1, 2]), x, torch.tensor([0, 1, 2]), steps=2, lr=0.1,
                         generator=torch.Generator().manual_seed(0), val_every=1)


def _small_run(device: str, **kw):
    ens = lenet_ensemble(3, 1, 3, torch.Generator().manual_seed(5), device=device)
    data = torch.Generator().manual_seed(6)
    x = torch.randn(9, 1, 32, 32, dtype=torch.float64, generator=data).to(device)
    y = torch.arange(9, device=device) % 3
    return train_batch1_sgd(ens, x, y, x[:5], y[:5], steps=30, lr=0.05, generator=torch.Generator().manual_seed(7),
                            val_every=10, **kw)


def test_log_kept_on_device_is_bit_identical_whatever_the_check_and_close_whatever_the_validation_chunk():
    ref = _small_run("cpu", check_every=1)
    for kw in ({"check_every": 7}, {"check_every": 1000}):
        log = _small_run("cpu", **kw)
        for part in ("trajectory", "validation"):
            for name in getattr(ref, part):
                np.testing.assert_array_equal(getattr(log, part)[name], getattr(ref, part)[name])
    chunked = _small_run("cpu", val_chunk=2)
    np.testing.assert_allclose(chunked.validation["loss"], ref.validation["loss"], rtol=1e-12)
    np.testing.assert_array_equal(chunked.validation["accuracy"], ref.validation["accuracy"])
    with pytest.raises(ValueError, match="val_chunk"):
        _small_run("cpu", val_chunk=0)


def test_divergence_names_the_same_step_whatever_the_check_interval():
    x = torch.randn(4, 1, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    x[3] = float("nan")
    y = torch.tensor([0, 1, 2, 0])
    steps = []
    for check_every in (1, 5, 1000):
        ens = lenet_ensemble(2, 1, 3, torch.Generator().manual_seed(9))
        with pytest.raises(Diverged) as caught:
            train_batch1_sgd(ens, x, y, x[:3], y[:3], steps=40, lr=0.05, generator=torch.Generator().manual_seed(1),
                             val_every=100, check_every=check_every)
        steps.append(caught.value.step)
    order = torch.randint(0, 4, (2, 40), generator=torch.Generator().manual_seed(1))
    assert steps == [int((order == 3).any(0).nonzero()[0, 0])] * 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_loop_runs_on_cuda_and_matches_cpu():
    cpu, gpu = _small_run("cpu"), _small_run(torch.device("cuda"))
    np.testing.assert_array_equal(gpu.trajectory["sample"], cpu.trajectory["sample"])
    np.testing.assert_allclose(gpu.trajectory["logits"], cpu.trajectory["logits"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(gpu.validation["loss"], cpu.validation["loss"], rtol=1e-8)


@pytest.mark.parametrize("stop_at", [4, 17])
def test_an_interrupted_sgd_run_resumes_from_its_checkpoint_bit_identical(tmp_path, stop_at):
    from repdyn.nn.checkpoint import Checkpointer, checkpointing
    from repdyn.nn.progress import reporting

    reference = _small_run("cpu")
    path = tmp_path / "run.ckpt"
    with checkpointing(Checkpointer(path, every=0.0)), reporting(kill_at(stop_at)), pytest.raises(Killed):
        _small_run("cpu")
    steps_seen = []
    with checkpointing(Checkpointer(path, every=0.0)), reporting(lambda step, total, loss: steps_seen.append(step)):
        resumed = _small_run("cpu")
    assert steps_seen[0] == stop_at  # it went on from the last checkpoint, not from step 0
    for part in ("trajectory", "validation"):
        old, new = getattr(reference, part), getattr(resumed, part)
        assert new.steps.tobytes() == old.steps.tobytes() and new.stopped_at == old.stopped_at
        for name in old:
            assert new[name].tobytes() == old[name].tobytes(), (part, name)
    with checkpointing(Checkpointer(path, every=0.0)), reporting(lambda *a: steps_seen.append(-1)):
        finished = _small_run("cpu")  # the loop's result was saved when it ended: nothing is recomputed
    assert -1 not in steps_seen and finished.trajectory["logits"].tobytes() == reference.trajectory["logits"].tobytes()
