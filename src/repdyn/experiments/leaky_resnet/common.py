"""Shared pieces of the seed-002 experiments: the teacher task, the config fields every experiment shares (whose
defaults are the paper's settings, App. B), batched training of seeds x effective depths, and the float64
per-layer diagnostics of :mod:`repdyn.theory.leaky_resnet`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from repdyn.data.teacher import TEACHER_KINDS, bottleneck_teacher
from repdyn.framework.config import ConfigError, param
from repdyn.nn.leaky_resnet_fit import TrainingPlan, lbfgs_finish
from repdyn.nn.models.leaky_resnet import INITS, LeakyResNet, data_cost
from repdyn.probes.rank import effective_rank
from repdyn.theory import leaky_resnet as lr

NUMBER = "002"
SCHEMES = ("equidistant", "irregular", "adaptive")
TOP_SINGULAR_VALUES = 10
RANK_TAU = 0.1
"""Numerical rank of W_l: #{i : s_i >= 0.1 s_1} (spec 002 §3.13 CHOICE)."""
MIDDLE = (0.3, 0.7)
"""Layers with p_l in this range form the bottleneck region of spec 002 §3.13."""
STATIONARITY = "stationarity_residual"
"""Precondition quantity: per seed, the median over layers of r_l = ||W_l - L~ B_l sigma(A_{l-1})^T|| / ||W_l||
(spec 002 §3.12), 0 at a critical point of the objective."""
FIT = "relative_train_error"
"""Precondition quantity: per seed, the train error over the targets' variance ||Y - mean Y||^2 / N (the largest
over the networks the claim compares)."""
AT_CRITICAL = "at a critical point of the training objective (the representation geodesic the theory describes)"
FITTED = "trained: fits its training set"
FIT_THRESHOLD = 0.1
FIT_REASON = ("our choice, fixed before any run with it: a test-error comparison is about trained networks only if "
              "they fit their training set; a tenth of the targets' variance left (an untrained network leaves "
              "about all of it)")
UNTRAINED = {"adam_steps": 0, "gd_steps": 0, "lbfgs_steps": 0}
"""Config overrides of the negative control: the untrained network at initialisation."""


@dataclass(frozen=True)
class TeacherRunConfig:
    """Settings shared by the seed-002 experiments. The defaults are the paper's (App. B): width 200, lambda 0.002,
    1000 train / 1000 test points, 20000 Adam epochs then 10000 epochs of a smaller-rate gradient phase "to tighten
    the convergence", adaptive steps without a cap. Where the paper gives no value the digest's choice is used."""

    dims: tuple[int, ...] = param((20, 5, 20), ge=1, help="teacher dimensions d_in, k_1, ..., d_out (k* = min)")
    teacher: str = param("fcnn", choices=TEACHER_KINDS, help="teacher blocks (Fig. 1: fcnn)")
    teacher_hidden: int = param(100, ge=1, help="hidden width of the teacher blocks (not given; digest: 100)")
    task_seed: int = param(0, ge=0, help="seed of the teacher and its data (the run seed draws the students)")
    n_train: int = param(1000, ge=2, help="training points (paper: 1000)")
    n_test: int = param(1000, ge=1, help="test points (paper: 1000)")
    width: int = param(200, ge=2, help="w (paper: 200)")
    lam: float = param(0.002, gt=0, help="lambda of the lambda/(2L~) weight decay (paper: 0.002)")
    init_scale: float = param(1.0, ge=0, help="s in V ~ N(0, 2 (L~ s)^2 / w) (digest §4.2: s = 1)")
    init: str = param("he", choices=INITS, help="he: He x L~ noise; identity: L~ [I, 0] + that noise")
    seeds: int = param(3, ge=1, help="independent initialisations, trained as one batched computation")
    adam_steps: int = param(20000, ge=0, help="full-batch Adam steps (paper: 20000 epochs)")
    adam_lr: float = param(1e-3, gt=0)
    adam_lr_final: float = param(1e-4, gt=0, help="cosine decay of the Adam rate down to this value")
    gd_steps: int = param(10000, ge=0, help="tightening phase: full-batch GD steps after Adam (paper: 10000)")
    gd_lr: float = param(1e-4, gt=0, help="rate of the tightening phase (paper: 'a smaller learning rate')")
    adaptive_every: int = param(10, ge=1, help="steps between adaptive rho updates")
    adaptive_warmup: int = param(200, ge=0, help="steps before the first adaptive update")
    adaptive_damping: float = param(0.5, gt=0, le=1, help="rho <- (1-d) rho + d rho_new")
    max_rho_ltilde: float = param(0.0, ge=0, le=1, help="cap on adaptive rho_l L~; 0: no cap (the paper has none)")
    gamma0: float = param(1e-3, gt=0, help="gamma_l = gamma0 lambda_max(K_l) (§3.1; gamma0 not given)")
    dtype: str = param("float32", choices=("float64", "float32"), help="training dtype (analysis: float64)")
    lbfgs_steps: int = param(0, ge=0, help="float64 L-BFGS iterations per network after the Adam and GD phases, "
                                           "steps frozen (a finish to a critical point); 0: none, as in the paper")
    lbfgs_tolerance: float = param(0.0, ge=0, help="a network's L-BFGS finish stops once its median stationarity "
                                                   "residual is at most this (0: runs all lbfgs_steps)")
    lbfgs_history: int = param(50, ge=1, help="L-BFGS history size")


def stationarity_reason(threshold: float, depth: int, ltilde: float, derived: float) -> str:
    """The reason text of a stationarity precondition whose threshold was derived by
    :func:`repdyn.experiments.leaky_resnet.critical.stationarity_threshold` at ``rho L~ = ltilde / depth``."""
    return (f"derived from leaky_resnet.critical's exact critical networks at the claim's rho L~ = {ltilde:g}/{depth} "
            f"(shot at L~ 3, L {round(3 * depth / ltilde)}; critical.stationarity_threshold): moved along a random "
            f"direction, an exact network's h spread stays within twice its own discretisation error up to a median "
            f"residual of {derived:.3g} (median over 5 draws), rounded down to {threshold:g}")


def relative_fit(train_error: np.ndarray, task) -> np.ndarray:
    """Train error over the targets' variance ``||Y - mean Y||^2 / N`` (the :data:`FIT` precondition)."""
    y = task.y_train.double()
    return np.asarray(train_error) / float(((y - y.mean(0)) ** 2).sum() / y.shape[0])


def plan(config: TeacherRunConfig) -> TrainingPlan:
    return TrainingPlan(config.adam_steps, config.adam_lr, config.gd_steps, config.gd_lr,
                        adam_lr_final=config.adam_lr_final,
                        adaptive_every=config.adaptive_every, adaptive_warmup=config.adaptive_warmup,
                        adaptive_damping=config.adaptive_damping, max_rho_ltilde=config.max_rho_ltilde or None)


def finish(model: LeakyResNet, task, config: TeacherRunConfig) -> tuple[LeakyResNet, dict[str, np.ndarray]]:
    """The float64 L-BFGS finish of at most ``config.lbfgs_steps`` iterations per member (none if 0): the model in
    float64 and, per member, the objective and median stationarity residual before and after it (shape (K, 2)) and
    the iterations used (NaN and 0 without a finish)."""
    if not config.lbfgs_steps:
        return model, {"objective": np.full((model.members, 2), np.nan),
                       "residual": np.full((model.members, 2), np.nan),
                       "iterations": np.zeros(model.members, dtype=np.int64)}
    model = model.to(dtype=torch.float64)
    device = model.weight.device
    record = lbfgs_finish(model, task.x_train.to(device), task.y_train.to(device), config.lam, config.lbfgs_steps,
                          tolerance=config.lbfgs_tolerance, history_size=config.lbfgs_history)
    return model, record


def check_steps(depths, ltildes, max_rho_ltilde: float) -> None:
    """Reject a config whose steps give ``rho_l L~ >= 1`` at the start (or above the cap) before any run."""
    bound = max_rho_ltilde or 1.0
    for depth in depths:
        for lt in ltildes:
            if depth * bound <= lt:
                raise ConfigError(f"depth={depth} with ltilde={lt:g} is not allowed: rho_l L~ < {bound:g} needs "
                                  f"L > {lt / bound:g} layers")


def task_of(config: TeacherRunConfig):
    """The teacher task, fixed by ``config.task_seed`` so that every run and seed sees the same data."""
    generator = torch.Generator().manual_seed(config.task_seed)
    return bottleneck_teacher(config.dims, config.n_train, config.n_test, generator, kind=config.teacher,
                              hidden=config.teacher_hidden)


def batched_students(config: TeacherRunConfig, depth: int, ltildes, seed: int, repeats: int = 1,
                     first: int = 0) -> LeakyResNet:
    """``seeds x len(ltildes)`` students (seed-major), each seed its own initialisation (seeds ``first`` to
    ``first + config.seeds - 1`` of the run seed); the whole block is repeated ``repeats`` times (identical copies:
    paired comparisons of step schemes)."""
    inits = [LeakyResNet.initialise(depth, config.width, config.dims[0], config.dims[-1], ltildes,
                                    lr.equidistant_steps(depth), torch.Generator().manual_seed(seed * 1000 + i),
                                    init_scale=config.init_scale, init=config.init)
             for i in range(first, first + config.seeds)]

    def stack(name: str) -> torch.Tensor:
        block = torch.cat([getattr(m, name).detach() for m in inits])
        return block.repeat(repeats, *([1] * (block.dim() - 1)))

    model = LeakyResNet(stack("weight"), stack("rho"), stack("ltilde"), stack("u_in"), stack("u_out"))
    return model.to(dtype=getattr(torch, config.dtype))


def test_error(model: LeakyResNet, task) -> np.ndarray:
    """Test cost ||Y - Y_hat||_F^2 / N_test per member (the same normalisation as training)."""
    with torch.no_grad():
        pred = model(task.x_test.to(model.weight.device))
        return data_cost(pred.transpose(-1, -2), task.y_test.T.to(pred)).cpu().numpy()


def train_error(model: LeakyResNet, task) -> np.ndarray:
    with torch.no_grad():
        pred = model(task.x_train.to(model.weight.device))
        return data_cost(pred.transpose(-1, -2), task.y_train.T.to(pred)).cpu().numpy()


def member_diagnostics(model: LeakyResNet, task, lam: float, member: int, gamma0: float) -> dict[str, np.ndarray]:
    """Per-layer diagnostics of one member, float64 on the CPU."""
    weights = model.weight[member].detach().cpu().double()
    rho = model.rho[member].cpu().double()
    lt = float(model.ltilde[member])
    cpu = LeakyResNet(weights[None], rho[None], model.ltilde[member:member + 1].cpu().double(),
                      model.u_in[member:member + 1].cpu().double(), model.u_out[member:member + 1].cpu().double())
    reps, momenta = cpu.momenta(task.x_train, task.y_train, lam, 0)
    diag = lr.layer_diagnostics(weights, rho, reps, momenta, lt, gamma0=gamma0)
    out = {name: getattr(diag, name).numpy() for name in
           ("p", "rho", "h", "h_gamma", "coi_gamma", "kappa", "speed", "speed_gamma", "momentum_norm",
            "momentum_feature_norm", "weight_norm_sq", "bias_norm_sq", "stationarity", "theorem4_residual",
            "eq3_gap", "eq3_bound", "negativity", "relative_step", "gamma")}
    out["weight_sv"] = diag.weight_singular_values[:, :TOP_SINGULAR_VALUES].numpy()
    out["weight_rank"] = (diag.weight_singular_values >= RANK_TAU * diag.weight_singular_values[:, :1]).sum(
        -1).numpy()
    out["effective_rank"] = effective_rank(reps[1:]).numpy()
    out["path_length"] = np.float64(lr.path_length(reps))
    out["path_length_gamma"] = np.float64((diag.speed_gamma * rho).sum())
    out["max_b_sq"] = np.float64((diag.momentum_norm ** 2).max())
    increments, predicted = lr.discrete_balancedness(weights, rho, lt)
    norms = (weights**2).sum((-1, -2))
    out["balancedness_gap"] = np.float64((increments - predicted).abs().sum() / norms.mean())
    for name, g0 in (("min_coi_gamma_low", gamma0 / 10), ("min_coi_gamma_high", gamma0 * 10)):
        out[name] = np.float64(lr.cost_of_identity(reps[:-1], lr.adaptive_gamma(reps[:-1], g0)).min())
    return out


def stack_members(per_member: list[dict[str, np.ndarray]], shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Stack per-member diagnostics and reshape the member axis to ``shape`` (e.g. seeds x L~)."""
    return {key: np.stack([m[key] for m in per_member]).reshape(*shape, *np.shape(per_member[0][key]))
            for key in per_member[0]}


def middle(p: np.ndarray) -> np.ndarray:
    inside = (p >= MIDDLE[0]) & (p <= MIDDLE[1])
    return inside if inside.any() else np.abs(p - 0.5) == np.abs(p - 0.5).min()


def spread(values: np.ndarray, scale: float) -> float:
    """(max - min) over layers divided by a fixed scale (k*, or the size of the energies): never by |median|,
    which can be near 0."""
    return float((values.max() - values.min()) / scale)
