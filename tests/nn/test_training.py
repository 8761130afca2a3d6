from functools import partial

import numpy as np
import pytest
import torch

from repdyn.nn import MLP, Diverged, Ensemble, Schedule, train
from repdyn.nn.models.cnn import ConvChain, SmallCNN
from repdyn.nn.recording import activation_recorder, output_recorder
from repdyn.probes.activations import activations

SEEDS = [11, 12, 13]
LRS = [0.01, 0.02, 0.005]


def one_by_one(factory, seed, x, y, lr, steps, make_opt, loss_fn, batches=None, **kwargs):
    """An ordinary PyTorch training loop on one member: the independent reference."""
    torch.manual_seed(0)
    model = factory(generator=torch.Generator().manual_seed(seed), **kwargs)
    opt = make_opt(model.parameters(), lr)
    losses = []
    for t in range(steps + 1):
        with torch.no_grad():
            losses.append(float(loss_fn(model(x), y)))
        if t == steps:
            break
        idx = batches[t] if batches is not None else slice(None)
        opt.zero_grad()
        loss_fn(model(x[idx]), y[idx]).backward()
        opt.step()
    return model, np.array(losses)


def half_mse(pred, target):
    return 0.5 * (pred - target).pow(2).sum(-1).mean()


def two_point_data(dtype=torch.float64):
    x = torch.tensor([[-1.0], [-0.5]], dtype=dtype)
    y = torch.tensor([[0.6], [1.6]], dtype=dtype)
    return x, y


@pytest.mark.parametrize("kind, make_opt", [
    ("gd", lambda p, lr: torch.optim.SGD(p, lr=lr)),
    ("momentum", lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.9)),
    ("adam", lambda p, lr: torch.optim.Adam(p, lr=lr)),
])
def test_ensemble_training_equals_one_by_one_runs(kind, make_opt):
    factory = partial(MLP, 1, 16, 6, 1, dtype=torch.float64)
    x, y = two_point_data()
    gains = [1.0, 1.2, 0.9]
    ens = Ensemble(factory, seeds=SEEDS, gains=gains)
    result = train(ens, x, y, steps=30, lr=torch.tensor(LRS, dtype=torch.float64), optimizer=kind)
    for k, (seed, lr, gain) in enumerate(zip(SEEDS, LRS, gains, strict=True)):
        ref, ref_loss = one_by_one(factory, seed, x, y, lr, 30, make_opt, half_mse, gain=gain)
        np.testing.assert_allclose(result.trajectory["loss"][:, k], ref_loss, rtol=1e-9, atol=1e-12)
        for (name, p), q in zip(ens.member(k).named_parameters(), ref.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-12, msg=name)


@pytest.mark.parametrize("activation", ["leaky_relu", "relu", "tanh", "elu", "silu", "identity"])
@pytest.mark.parametrize("skip", [0, 2])
def test_fused_gd_step_equals_autograd_step(activation, skip):
    factory = partial(MLP, 2, 6, 5, 2, activation=activation, skip=skip, dtype=torch.float64)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 5, 2, generator=g, dtype=torch.float64)  # per-member inputs
    y = torch.randn(3, 5, 2, generator=g, dtype=torch.float64)
    results = []
    for fused in (True, False):
        ens = Ensemble(factory, seeds=SEEDS)
        results.append((train(ens, x, y, steps=8, lr=LRS, fused_step=fused), ens))
    np.testing.assert_allclose(results[0][0].trajectory["loss"], results[1][0].trajectory["loss"], rtol=1e-10)
    for name, p in results[0][1].params.items():
        torch.testing.assert_close(p, results[1][1].params[name], rtol=1e-10, atol=1e-12, msg=name)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fused_closed_form_mse_gradient_is_bitwise_autograds(dtype):
    """The fused step's ½-MSE output gradient without a graph (losses.mse_half_output_grad) equals autograd's
    through the same loss bit for bit: the same callable wrapped in a lambda takes the autograd path."""
    from repdyn.nn.losses import mse_half

    factory = partial(MLP, 3, 7, 4, 2, activation="leaky_relu", dtype=dtype)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, 3, generator=g, dtype=dtype)
    y = torch.randn(6, 2, generator=g, dtype=dtype)
    runs = []
    for loss in ("mse", lambda pred, target: mse_half(pred, target)):
        ens = Ensemble(factory, seeds=SEEDS)
        runs.append((train(ens, x, y, steps=40, lr=LRS, loss=loss, optimizer="sgd", batch_size=4,
                           generator=torch.Generator().manual_seed(1)), ens))
    assert np.array_equal(runs[0][0].trajectory["loss"], runs[1][0].trajectory["loss"])
    for name, p in runs[0][1].params.items():
        assert torch.equal(p, runs[1][1].params[name]), name


def test_minibatch_sgd_equals_one_by_one_with_same_batches():
    factory = partial(MLP, 3, 8, 2, 2, activation="tanh", dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10, 3, generator=g, dtype=torch.float64)
    y = torch.randn(10, 2, generator=g, dtype=torch.float64)
    ens = Ensemble(factory, seeds=SEEDS)
    result = train(ens, x, y, steps=7, lr=0.1, optimizer="sgd", batch_size=4,
                   generator=torch.Generator().manual_seed(9))
    # the loop draws one permutation per epoch of floor(10/4) = 2 batches
    perm_gen = torch.Generator().manual_seed(9)
    batches = []
    while len(batches) < 7:
        order = torch.randperm(10, generator=perm_gen)
        batches += [order[0:4], order[4:8]]
    for k, seed in enumerate(SEEDS):
        _, ref_loss = one_by_one(factory, seed, x, y, 0.1, 7, lambda p, lr: torch.optim.SGD(p, lr=lr),
                                 half_mse, batches=batches)
        np.testing.assert_allclose(result.trajectory["loss"][:, k], ref_loss, rtol=1e-9)


def test_independent_batches_follow_each_members_own_order():
    factory = partial(MLP, 3, 8, 2, 1, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, generator=g, dtype=torch.float64)
    y = torch.randn(6, 1, generator=g, dtype=torch.float64)
    ens = Ensemble(factory, seeds=SEEDS)
    result = train(ens, x, y, steps=5, lr=0.1, optimizer="sgd", batch_size=3, independent_batches=True,
                   generator=torch.Generator().manual_seed(4))
    perm_gen = torch.Generator().manual_seed(4)
    orders = []
    for _ in range(3):  # epochs of 2 batches
        orders.append(torch.argsort(torch.rand(3, 6, generator=perm_gen), dim=1))
    for k, seed in enumerate(SEEDS):
        batches = [o[k, s:s + 3] for o in orders for s in (0, 3)]
        _, ref_loss = one_by_one(factory, seed, x, y, 0.1, 5, lambda p, lr: torch.optim.SGD(p, lr=lr),
                                 half_mse, batches=batches)
        np.testing.assert_allclose(result.trajectory["loss"][:, k], ref_loss, rtol=1e-9)


@pytest.mark.parametrize("factory, x", [
    (partial(ConvChain, 1, 3, 4, 3, kernel_size=3, dtype=torch.float64), torch.tensor([[-1.0], [-0.5], [0.3]])),
    (partial(SmallCNN, (1, 4, 4), [2], 1, dtype=torch.float64), torch.linspace(-1, 1, 48).reshape(3, 1, 4, 4)),
])
def test_generic_and_conv_paths_equal_one_by_one(factory, x):
    """SmallCNN runs through vmap, ConvChain through its own stacked forward; both equal torch.optim one by one."""
    x = x.to(torch.float64)
    y = torch.tensor([[0.1], [0.5], [-0.2]], dtype=torch.float64)
    ens = Ensemble(factory, seeds=SEEDS[:2])
    assert ens._stacked == (factory.func is ConvChain)
    result = train(ens, x, y, steps=5, lr=[0.05, 0.1], optimizer="adam")
    for k, (seed, lr) in enumerate(zip(SEEDS[:2], [0.05, 0.1], strict=True)):
        ref, ref_loss = one_by_one(factory, seed, x, y, lr, 5, lambda p, lr: torch.optim.Adam(p, lr=lr), half_mse)
        np.testing.assert_allclose(result.trajectory["loss"][:, k], ref_loss, rtol=1e-8)
        torch.testing.assert_close(ens(x)[k], ref(x))
        torch.testing.assert_close(ens.activations(x, ["layer0"])["layer0"][k],
                                   activations(ref, x, ["layer0"], eval_mode=False)["layer0"])


@pytest.mark.parametrize("shared", [True, False])
def test_conv_chain_stacked_path_is_vmaps_bit_for_bit(shared):
    """ConvChain.forward_stacked (one grouped convolution, bias added after it) against vmap's batching of the
    module: outputs, every layer's representation, and 6 GD steps (non-zero biases from step 1 on) equal bit for
    bit, with shared and per-member inputs; the representations keep the module's shapes."""
    factory = partial(ConvChain, 1, 4, 6, 4, kernel_size=5, dtype=torch.float64)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn((5, 1) if shared else (3, 5, 1), generator=gen, dtype=torch.float64)
    y = torch.randn(3, 5, 1, generator=gen, dtype=torch.float64)
    if shared:
        y = y[0]
    names = ["layer0", "layer2", "layer3", "output"]
    runs = {}
    for stacked in (True, False):
        ens = Ensemble(factory, seeds=SEEDS, gains=[0.9, 1.0, 1.1])
        ens._stacked = stacked  # False: the generic vmap path
        result = train(ens, x, y, steps=6, lr=[0.3, 0.2, 0.1])
        runs[stacked] = result.trajectory["loss"], ens.activations(x, names), ens
    (loss, acts, ens), (loss_v, acts_v, ens_v) = runs[True], runs[False]
    assert np.array_equal(loss, loss_v) and not np.array_equal(loss[-1], loss[0])  # the steps moved the losses
    for name in names:
        assert acts[name].shape == acts_v[name].shape
        assert torch.equal(acts[name], acts_v[name])
    for name, p in ens.params.items():
        assert torch.equal(p, ens_v.params[name])
    assert ens.params["conv1.bias"].abs().min() > 0  # the bias path was exercised
    member = ens.member(1)
    xs = x if shared else x[1]
    torch.testing.assert_close(acts["layer2"][1], activations(member, xs, ["layer2"], eval_mode=False)["layer2"],
                               rtol=0, atol=1e-15)


def test_per_member_inputs_and_activations():
    factory = partial(MLP, 2, 5, 2, 1, dtype=torch.float64)
    ens = Ensemble(factory, seeds=SEEDS)
    x = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    acts = ens.activations(x, ["layer1", "output"])
    for k in range(3):
        m = ens.member(k)
        torch.testing.assert_close(acts["output"][k], m(x[k]))
        torch.testing.assert_close(acts["layer1"][k], torch.nn.functional.leaky_relu(m.linear1(
            torch.nn.functional.leaky_relu(m.linear0(x[k])))))
    with pytest.raises(ValueError, match="available: preact0, layer0"):
        ens.activations(x, ["hidden3"])
    with pytest.raises(ValueError, match="leading dim K"):
        ens(torch.zeros(5, 4, 2))


def test_divergence_raises_or_marks_member():
    factory = partial(MLP, 1, 16, 4, 1, gain=1.5, dtype=torch.float64)
    x, y = two_point_data()
    with pytest.raises(Diverged) as info:
        train(Ensemble(factory, seeds=SEEDS), x, y, steps=30, lr=[0.01, 50.0, 0.01])
    assert info.value.step > 0
    ens = Ensemble(factory, seeds=SEEDS)
    result = train(ens, x, y, steps=30, lr=[0.01, 50.0, 0.01], on_divergence="mark")
    assert result.diverged.tolist() == [False, True, False]
    assert result.diverged_at[1] == info.value.step
    assert np.isnan(result.final_loss[1]) and np.isfinite(result.final_loss[[0, 2]]).all()
    _, ref_loss = one_by_one(factory, SEEDS[2], x, y, 0.01, 30, lambda p, lr: torch.optim.SGD(p, lr=lr), half_mse)
    np.testing.assert_allclose(result.trajectory["loss"][:, 2], ref_loss, rtol=1e-9)


def test_schedule_recorders_and_stop_loss():
    factory = partial(MLP, 1, 16, 2, 1, dtype=torch.float64)
    x, y = two_point_data()
    ens = Ensemble(factory, seeds=SEEDS)
    schedule = Schedule.log_spaced(8, 500)
    result = train(ens, x, y, steps=500, lr=0.4, schedule=schedule,
                   recorders={"h": activation_recorder(x, "layer1")}, stop_loss=1e-3)
    assert result.trajectory.steps[0] == 0 and np.all(np.diff(result.trajectory.steps) > 0)
    assert result.trajectory["h"].shape == (len(result.trajectory.steps), 3, 2, 16)
    assert result.trajectory.stopped_at < 500 and result.trajectory.stopped_at == result.trajectory.steps[-1]
    assert np.all(result.final_loss <= 1e-3) and np.any(result.trajectory["loss"][-2] > 1e-3)
    torch.testing.assert_close(torch.from_numpy(result.trajectory["h"][-1]), ens.activations(x, ["layer1"])["layer1"]
                               .detach())


def test_schedules():
    assert Schedule.every(3, 10).steps.tolist() == [0, 3, 6, 9, 10]
    # evenly spaced in log(1 + t): 1001^(i/4) - 1 rounded = 0, 5, 31, 177, 1000
    assert Schedule.log_spaced(5, 1000).steps.tolist() == [0, 5, 31, 177, 1000]
    assert len(Schedule.log_spaced(50, 10)) == 11  # duplicates merged
    with pytest.raises(ValueError, match="lie in"):
        Schedule([11], 10)


def test_bad_training_arguments():
    ens = Ensemble(partial(MLP, 1, 4, 1, 1), seeds=[0, 1])
    x, y = two_point_data(torch.float32)
    with pytest.raises(ValueError, match="one value per member"):
        train(ens, x, y, steps=1, lr=[0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match="unknown optimizer"):
        train(ens, x, y, steps=1, lr=0.1, optimizer="lbfgs")
    with pytest.raises(ValueError, match="batch_size"):
        train(ens, x, y, steps=1, lr=0.1, optimizer="sgd")
    with pytest.raises(ValueError, match="ambiguous"):
        Ensemble(partial(MLP, 1, 4, 1, 1), 3, seeds=[0, 1])


def test_ensemble_construction_paths():
    factory = partial(MLP, 2, 4, 1, 1)
    a = Ensemble(factory, 3, generator=torch.Generator().manual_seed(0))
    b = Ensemble(factory, 3, generator=torch.Generator().manual_seed(0))
    assert a.seeds == b.seeds and len(set(a.seeds)) == 3
    rebuilt = factory(generator=torch.Generator().manual_seed(a.seeds[2]))
    x = torch.randn(5, 2)
    torch.testing.assert_close(a(x)[2], rebuilt(x))
    c = Ensemble.from_modules([a.member(0), rebuilt]).to(torch.float64)
    assert c.params["linear0.weight"].dtype == torch.float64 and c.k == 2
    torch.testing.assert_close(c(x.double())[1], rebuilt.double()(x.double()))
    assert a.num_parameters() == sum(p.numel() for p in rebuilt.parameters())


@pytest.mark.parametrize("activation, skip, steps", [("leaky_relu", 0, 30), ("tanh", 2, 30), ("tanh", 0, 30)])
def test_two_point_recorder_read_off_the_training_pass_is_bitwise_a_separate_pass(activation, skip, steps):
    """The fused full-batch step hands a PassRecorder of its own inputs the forward pass it already took (the
    same parameters, before the update): the records, losses and parameters equal those of a run whose recorder
    takes its own eval-mode pass, bit for bit (tanh's derivative from the cached activation included)."""
    from repdyn.data.two_points import two_point_data
    from repdyn.probes.two_point import two_point_recorder

    factory = partial(MLP, 1, 8, 5, 1, activation=activation, skip=skip, dtype=torch.float64)
    x, y = two_point_data(np.array([0.5, 0.7, 0.9]), np.array([1.0, 1.0, 0.5]))
    runs = []
    for reuse in (True, False):
        recorder = two_point_recorder(x, y, ["layer1", "layer3"])
        ens = Ensemble(factory, seeds=SEEDS)
        result = train(ens, x, y, steps=steps, lr=LRS, schedule=Schedule.every(3, steps),
                       recorders={"pair": recorder if reuse else lambda step, model, rec=recorder: rec(step, model)})
        runs.append((result, ens))
    (new, ens_new), (old, ens_old) = runs
    assert np.array_equal(new.trajectory["pair"], old.trajectory["pair"])
    assert np.array_equal(new.trajectory["loss"], old.trajectory["loss"])
    for name, p in ens_new.params.items():
        assert torch.equal(p, ens_old.params[name]), name
    assert np.ptp(new.trajectory["pair"][:, :, 0]) > 0  # the recorded u moved: not a comparison of constants


@pytest.mark.parametrize(("activation", "n", "depth", "d_in", "d_out", "dtype", "shared"), [
    ("leaky_relu", 2, 20, 1, 1, torch.float64, False),  # seed 000's two-point networks
    ("leaky_relu", 4, 6, 2, 1, torch.float64, True),  # XOR
    ("tanh", 200, 3, 27, 2, torch.float64, True),  # blobs
    ("leaky_relu", 300, 3, 64, 10, torch.float32, True),  # digits (>= BMM_ROWS points)
    ("relu", 5, 3, 3, 2, torch.float64, False),
    ("identity", 5, 3, 3, 2, torch.float64, True),
])
@pytest.mark.parametrize("optimizer", ["adam", "momentum"])
def test_fused_gradients_are_autograds_bit_for_bit(activation, n, depth, d_in, d_out, dtype, shared, optimizer):
    """Adam and momentum take their gradients from the MLP's hand-written back-propagation (MLP.fused_grads)
    without a graph: the same losses, records and parameters as autograd bit for bit, full batch and minibatch."""
    factory = partial(MLP, d_in, 16, depth, d_out, activation=activation, dtype=dtype)
    g = torch.Generator().manual_seed(7)
    lead = () if shared else (len(SEEDS),)
    x = torch.randn(*lead, n, d_in, generator=g, dtype=dtype)
    y = torch.randn(*lead, n, d_out, generator=g, dtype=dtype)
    for batch_size in (None, max(1, n // 2)):
        runs = []
        for fused in (True, False):
            ens = Ensemble(factory, seeds=SEEDS)
            lrs = [1e-3, 3e-3, 2e-3] if optimizer == "adam" else LRS
            runs.append((train(ens, x, y, steps=12, lr=lrs, optimizer=optimizer, batch_size=batch_size,
                               generator=torch.Generator().manual_seed(1), fused_step=fused,
                               recorders={"out": output_recorder(x)}), ens))
        (a, ens_a), (b, ens_b) = runs
        assert np.array_equal(a.trajectory["loss"], b.trajectory["loss"])
        assert np.array_equal(a.trajectory["out"], b.trajectory["out"])
        for name, p in ens_a.params.items():
            assert torch.equal(p, ens_b.params[name]), name


def test_fused_gradients_only_where_bitwise():
    """Skip connections and activations with a hand-written derivative keep autograd for the gradient optimisers."""
    assert MLP(2, 4, 3).supports_fused_grads
    assert not MLP(2, 4, 3, skip=2).supports_fused_grads
    assert not MLP(2, 4, 3, activation="silu").supports_fused_grads
    assert not MLP(2, 4, 3, dropout=0.1).supports_fused_grads
