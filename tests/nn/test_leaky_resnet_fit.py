"""The batched Leaky ResNet of seed 002 §4 and its training (spec 002 §3.4, §7 P2-P3, P11)."""

import pytest
import torch

from interrupt import Killed, kill_at
from repdyn.nn import Diverged
from repdyn.nn.leaky_resnet_fit import TrainingPlan, fit
from repdyn.nn.models.leaky_resnet import LeakyResNet, data_cost, objective_gradient
from repdyn.theory import leaky_resnet as lr


def _model(ltildes=(1.0, 2.5), depth=4, width=6, d_in=3, d_out=2, seed=0):
    rho = torch.stack([lr.equidistant_steps(depth), lr.irregular_steps(depth, 0.5)])[: len(ltildes)]
    return LeakyResNet.initialise(depth, width, d_in, d_out, ltildes, rho, torch.Generator().manual_seed(seed))


def _data(n=9, d_in=3, d_out=2, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d_in, generator=g, dtype=torch.float64), torch.randn(n, d_out, generator=g,
                                                                               dtype=torch.float64)


def test_forward_matches_the_discrete_recursion_member_by_member():
    model, (x, _) = _model(), _data()
    out = model(x)
    assert out.shape == (2, 9, 2)
    for k in range(2):
        reps = lr.leaky_forward(model.weight[k], model.rho[k], model.u_in[k] @ x.T, float(model.ltilde[k]))
        torch.testing.assert_close(out[k], (model.u_out[k] @ reps[-1]).T)
    # the in/out maps are semi-orthogonal (spec 002 §3.4 CHOICE)
    torch.testing.assert_close(model.u_in[0].T @ model.u_in[0], torch.eye(3, dtype=torch.float64))
    torch.testing.assert_close(model.u_out[0] @ model.u_out[0].T, torch.eye(2, dtype=torch.float64))


def test_objective_gradient_is_the_stationarity_gap():
    # grad_W [C + lambda/(2L~) sum rho ||W||^2] = (lambda / L~) rho_l (W_l - L~ B_l sigma(A_{l-1})^T) exactly,
    # so a critical point of the explicit-decay objective is W_l = L~ B_l sigma(A_{l-1})^T (spec 002 §3.12).
    model, (x, y) = _model(), _data()
    lam = 0.01
    objective = data_cost(model.u_out @ model.representations(x)[:, -1], y.T) + model.regulariser(lam)
    (grad,) = torch.autograd.grad(objective.sum(), [model.weight])
    for k in range(2):
        lt = float(model.ltilde[k])
        reps, B = model.momenta(x, y, lam, k)
        gap = model.weight[k].detach() - lr.stationary_weights(reps, B, lt)
        torch.testing.assert_close(grad[k], lam / lt * model.rho[k][:, None, None] * gap)


def test_hand_written_gradient_equals_autograd():
    # the fused forward/backward that fit trains with, against autograd through the theory's forward: random
    # steps per member, several L~, non-zero biases, dead and live ReLUs; and the norms the adaptive rule reads
    g = torch.Generator().manual_seed(3)
    rho = torch.rand(4, 5, generator=g, dtype=torch.float64)
    model = LeakyResNet.initialise(5, 6, 3, 2, (0.5, 1.0, 2.5, 4.0), rho / rho.sum(-1, keepdim=True), g)
    with torch.no_grad():
        model.weight[..., -1] = torch.randn(4, 5, 6, generator=g, dtype=torch.float64)
    x, y = _data()
    lam = 0.03
    reps = model.representations(x)
    expected = data_cost(model.u_out @ reps[:, -1], y.T) + model.regulariser(lam)
    (grad,) = torch.autograd.grad(expected.sum(), [model.weight])
    objective, cost, found, (rep_norms, step_norms) = objective_gradient(model, model.input_representation(x),
                                                                           y.T, lam, norms=True)
    torch.testing.assert_close(objective, expected.detach(), rtol=1e-13, atol=0)
    torch.testing.assert_close(cost, data_cost(model.u_out @ reps[:, -1], y.T).detach(), rtol=1e-13, atol=0)
    torch.testing.assert_close(found, grad, rtol=1e-11, atol=1e-14)
    torch.testing.assert_close(rep_norms, reps[:, 1:].detach().norm(dim=(-2, -1)))
    torch.testing.assert_close(step_norms, (reps[:, 1:] - reps[:, :-1]).detach().norm(dim=(-2, -1)))
    assert (reps[:, :-1] < 0).any() and (reps[:, :-1] > 0).any()  # both branches of the ReLU are exercised


def test_reused_workspace_gives_the_fresh_computation_bit_for_bit():
    # fit passes one workspace to every step: a later call with other weights and steps (and a call of another
    # shape, which rebuilds it) must return exactly what a call with fresh tensors returns
    x, y = _data()
    workspace = {}
    g = torch.Generator().manual_seed(5)
    for depth, members in ((5, 3), (5, 3), (3, 2)):
        rho = torch.rand(members, depth, generator=g, dtype=torch.float64)
        model = LeakyResNet.initialise(depth, 6, 3, 2, torch.linspace(0.5, 3.0, members).tolist(),
                                       rho / rho.sum(-1, keepdim=True), g)
        with torch.no_grad():
            model.weight[..., -1] = torch.randn(members, depth, 6, generator=g, dtype=torch.float64)
        a0 = model.input_representation(x)
        fresh = objective_gradient(model, a0, y.T, 0.03, norms=True)
        reused = objective_gradient(model, a0, y.T, 0.03, norms=True, workspace=workspace)
        for got, expected in zip((*reused[:3], *reused[3]), (*fresh[:3], *fresh[3]), strict=True):
            assert torch.equal(got, expected)
        assert workspace["features"].shape == (depth, members, 7, 9)


def test_adaptive_rule_from_norms_is_the_rule_on_representations():
    g = torch.Generator().manual_seed(4)
    reps = torch.randn(3, 7, 4, 5, generator=g, dtype=torch.float64)
    rho = lr.equidistant_steps(6).expand(3, 6)
    norms = reps[:, 1:].norm(dim=(-2, -1)), (reps[:, 1:] - reps[:, :-1]).norm(dim=(-2, -1))
    torch.testing.assert_close(lr.adaptive_steps_from_norms(rho, *norms, 0.5, floor=1e-3, ceiling=0.3),
                               lr.adaptive_steps(rho, reps, 0.5, floor=1e-3, ceiling=0.3), rtol=0, atol=0)


def test_regulariser_is_rho_weighted_and_scaled_by_one_over_ltilde():
    model = _model()
    expected = [0.01 / (2 * lt) * sum(float(model.rho[k, i]) * float((model.weight[k, i] ** 2).sum())
                                      for i in range(4)) for k, lt in enumerate((1.0, 2.5))]
    torch.testing.assert_close(model.regulariser(0.01).detach(), torch.tensor(expected, dtype=torch.float64))


def test_momenta_match_the_adjoint_recursion_with_fixed_output_map():
    model, (x, y) = _model(), _data()
    lam, n = 0.01, x.shape[0]
    reps, B = model.momenta(x, y, lam, 1)
    B_out = 2 / (lam * n) * model.u_out[1].T @ (y.T - model.u_out[1] @ reps[-1])
    torch.testing.assert_close(B, lr.adjoint_momenta(model.weight[1].detach(), model.rho[1], reps, B_out, 2.5))


def test_members_train_independently_and_only_adaptive_steps_move():
    x, y = _data()
    plan = TrainingPlan(adam_steps=30, adam_lr=1e-2, gd_steps=5, gd_lr=1e-3, adaptive_every=5,
                        adaptive_warmup=5, record_every=10)
    both = _model()
    rho_before = both.rho.clone()
    history = fit(both, x, y, 0.01, plan, adaptive=torch.tensor([False, True]))
    alone = LeakyResNet(_model().weight.detach()[:1].clone(), rho_before[:1].clone(), torch.tensor([1.0],
                        dtype=torch.float64), both.u_in[:1], both.u_out[:1])
    fit(alone, x, y, 0.01, plan)
    torch.testing.assert_close(both.weight[0], alone.weight[0])
    torch.testing.assert_close(both.rho[0], rho_before[0])
    assert not torch.allclose(both.rho[1], rho_before[1])
    assert both.rho[1].sum().item() == pytest.approx(1.0, abs=1e-12)
    assert history.steps.tolist() == [0, 10, 20, 30] and history["objective"].shape == (4, 2)
    assert (history["objective"][-1] < history["objective"][0]).all()


def test_divergence_and_bad_inputs():
    x, y = _data()
    with pytest.raises(Diverged):
        fit(_model(), x, 1e200 * y, 0.01, TrainingPlan(adam_steps=0, adam_lr=1e-3, gd_steps=5, gd_lr=1e10))
    with pytest.raises(ValueError, match="lam"):
        fit(_model(), x, y, 0.0, TrainingPlan(1, 1e-3, 0, 1e-4))
    with pytest.raises(ValueError, match="adam_lr"):
        TrainingPlan(1, -1.0, 0, 1e-4)
    with pytest.raises(ValueError, match="max_rho_ltilde"):
        TrainingPlan(1, 1e-3, 0, 1e-4, max_rho_ltilde=1.5)
    with pytest.raises(ValueError, match="init='orthogonal'"):
        LeakyResNet.initialise(3, 4, 3, 2, [1.0], lr.equidistant_steps(3), torch.Generator(), init="orthogonal")
    with pytest.raises(ValueError, match="width=2"):
        LeakyResNet.initialise(3, 2, 3, 2, [1.0], lr.equidistant_steps(3), torch.Generator())



def test_identity_initialisation_keeps_the_positive_part_of_the_representation():
    # init="identity" with no noise: W_l = L~ [I, 0], so A_l = (1 - rho L~) A_{l-1} + rho L~ [A_{l-1}]_+ keeps
    # positive entries and shrinks negative ones by (1 - rho L~) per layer.
    model = LeakyResNet.initialise(4, 5, 5, 5, [2.0], lr.equidistant_steps(4), torch.Generator().manual_seed(0),
                                   init_scale=0.0, init="identity")
    x = torch.randn(7, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    reps = model.representations(x)[0]
    A0 = reps[0]
    expected = torch.where(A0 > 0, A0, A0 * 0.5**4)
    torch.testing.assert_close(reps[-1], expected)


def test_adaptive_steps_respect_the_rho_ltilde_cap_during_training():
    x, y = _data()
    largest = {}
    for cap in (None, 0.38):
        model = _model(ltildes=(1.0, 1.5))
        plan = TrainingPlan(adam_steps=40, adam_lr=1e-2, gd_steps=0, gd_lr=1e-3, adaptive_every=2,
                            adaptive_warmup=0, adaptive_damping=1.0, max_rho_ltilde=cap)
        fit(model, x, y, 0.01, plan, adaptive=torch.tensor([True, True]))
        largest[cap] = float((model.rho * model.ltilde[:, None]).max())
        torch.testing.assert_close(model.rho.sum(-1), torch.ones(2, dtype=torch.float64))
    assert largest[None] > 0.38 >= largest[0.38] * (1 - 1e-12)


def test_adaptive_steps_can_be_frozen_for_the_gd_phase():
    # adaptive_in_gd=False: the steps after the Adam phase are those the GD phase ends with (one fixed objective)
    x, y = _data()
    adaptive = torch.tensor([True, True])
    frozen, moving = _model(), _model()
    common = dict(adam_steps=20, adam_lr=1e-2, gd_lr=1e-3, adaptive_every=5, adaptive_warmup=5)
    fit(frozen, x, y, 0.01, TrainingPlan(gd_steps=0, **common), adaptive=adaptive)
    after_adam = frozen.rho.clone()
    model = _model()
    fit(model, x, y, 0.01, TrainingPlan(gd_steps=20, adaptive_in_gd=False, **common), adaptive=adaptive)
    torch.testing.assert_close(model.rho, after_adam)
    fit(moving, x, y, 0.01, TrainingPlan(gd_steps=20, **common), adaptive=adaptive)
    assert not torch.allclose(moving.rho, after_adam)


@pytest.mark.parametrize("stop_at", [12, 33])  # inside the Adam phase, inside the tightening phase
def test_an_interrupted_fit_resumes_from_its_checkpoint_bit_identical(tmp_path, stop_at):
    from repdyn.nn.checkpoint import Checkpointer, checkpointing
    from repdyn.nn.progress import reporting

    x, y = _data()
    plan = TrainingPlan(adam_steps=30, adam_lr=1e-2, adam_lr_final=1e-3, gd_steps=10, gd_lr=1e-3,
                        adaptive_every=5, adaptive_warmup=5, record_every=3)
    adaptive = torch.tensor([False, True])
    reference = _model()
    expected = fit(reference, x, y, 0.01, plan, adaptive=adaptive)
    path = tmp_path / "run.ckpt"
    with checkpointing(Checkpointer(path, every=0.0)), reporting(kill_at(stop_at)), pytest.raises(Killed):
        fit(_model(), x, y, 0.01, plan, adaptive=adaptive)
    resumed, steps_seen = _model(), []
    with checkpointing(Checkpointer(path, every=0.0)), reporting(lambda step, total, loss: steps_seen.append(step)):
        history = fit(resumed, x, y, 0.01, plan, adaptive=adaptive)
    assert steps_seen[0] == stop_at  # it went on from the last checkpoint, not from step 0
    assert resumed.weight.detach().numpy().tobytes() == reference.weight.detach().numpy().tobytes()
    assert resumed.rho.numpy().tobytes() == reference.rho.numpy().tobytes()
    assert history.steps.tobytes() == expected.steps.tobytes() and history.stopped_at == expected.stopped_at == 40
    for name in expected:
        assert history[name].tobytes() == expected[name].tobytes(), name


def test_median_stationarity_from_the_gradient_is_the_theorys_residual():
    from repdyn.nn.leaky_resnet_fit import median_stationarity

    model, (x, y) = _model(), _data()
    fit(model, x, y, 0.01, TrainingPlan(adam_steps=30, adam_lr=1e-2, gd_steps=0, gd_lr=1e-3))
    _, _, grad, _ = objective_gradient(model, model.input_representation(x), y.T, 0.01)
    found = median_stationarity(model, grad, 0.01)
    for k in range(model.members):
        reps, momenta = model.momenta(x, y, 0.01, k)
        expected = lr.stationarity_residual(model.weight[k].detach(), reps, momenta, float(model.ltilde[k])).median()
        torch.testing.assert_close(found[k], expected, rtol=1e-10, atol=0)


def test_lbfgs_finish_lowers_the_residual_and_stops_at_its_tolerance():
    from repdyn.nn.leaky_resnet_fit import lbfgs_finish

    model, (x, y) = _model(), _data()
    fit(model, x, y, 0.01, TrainingPlan(adam_steps=50, adam_lr=1e-2, gd_steps=0, gd_lr=1e-3))
    record = lbfgs_finish(model, x, y, 0.01, iterations=3000, tolerance=1.0)
    assert (record["residual"][:, 0] > 1.5).all()  # 1.87 and 5.89 after the Adam steps
    assert (record["residual"][:, 1] <= 1.0).all() and (record["iterations"] < 3000).all()
    assert (record["objective"][:, 1] < record["objective"][:, 0]).all()
    for k in range(model.members):  # the model holds the finished weights
        reps, momenta = model.momenta(x, y, 0.01, k)
        assert float(lr.stationarity_residual(model.weight[k].detach(), reps, momenta,
                                              float(model.ltilde[k])).median()) <= 1.0


@pytest.mark.parametrize("stop_at", [2, 5])  # chunks: inside the first member's finish, inside the second's
def test_an_interrupted_lbfgs_finish_resumes_from_its_checkpoint_bit_identical(tmp_path, stop_at):
    from repdyn.nn.checkpoint import Checkpointer, checkpointing
    from repdyn.nn.leaky_resnet_fit import lbfgs_finish
    from repdyn.nn.progress import reporting

    x, y = _data()
    plan = TrainingPlan(adam_steps=20, adam_lr=1e-2, gd_steps=0, gd_lr=1e-3)
    reference = _model()
    fit(reference, x, y, 0.01, plan)
    start = reference.weight.detach().clone()
    expected = lbfgs_finish(reference, x, y, 0.01, iterations=40)
    path = tmp_path / "run.ckpt"

    def fresh():
        model = _model()
        with torch.no_grad():
            model.weight.copy_(start)
        return model

    with checkpointing(Checkpointer(path, every=0.0)), reporting(kill_at(stop_at)), pytest.raises(Killed):
        lbfgs_finish(fresh(), x, y, 0.01, iterations=40)
    resumed, seen = fresh(), []
    with checkpointing(Checkpointer(path, every=0.0)), reporting(lambda step, total, loss: seen.append(step)):
        record = lbfgs_finish(resumed, x, y, 0.01, iterations=40)
    assert seen[0] == stop_at  # went on from the last checkpoint
    assert resumed.weight.detach().numpy().tobytes() == reference.weight.detach().numpy().tobytes()
    for name, values in expected.items():
        assert record[name].tobytes() == values.tobytes(), name
