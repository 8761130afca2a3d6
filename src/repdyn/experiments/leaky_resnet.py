"""Experiments of seed 002 (Leaky ResNets): bottleneck structures (Fig. 1, Fig. 3) and discretisation (Fig. 2).

- ``leaky_resnet.structures``: adaptive networks over a range of effective depths L~ on a teacher with a known
  bottleneck rank k* (spec 002 H1-H4): rescaled Hamiltonian, stable Hamiltonian, Cost of Identity and kinetic
  energy per layer, weight spectra, timescales and the adaptive steps, and the bounded quantities of Fig. 3.
- ``leaky_resnet.discretisation``: test error against the number of layers L for equidistant, irregular and
  adaptive steps at L~ = 3, several seeds (spec 002 H5).

Every member of a run (effective depths, or schemes x seeds) trains in one batched computation
(:class:`repdyn.nn.leaky_resnet.LeakyResNet`); the diagnostics are the model-agnostic functions of
:mod:`repdyn.theory.leaky_resnet`, computed in float64 after training (spec 002 §3.12).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from repdyn.data.teacher import TEACHER_KINDS, bottleneck_teacher
from repdyn.experiments.base import Analysis, Experiment, Paper, RunResult, RunSpec
from repdyn.experiments.claims import ClaimSpec, Holds, InRange, Measured, at_least, at_most
from repdyn.experiments.config import ConfigError, param
from repdyn.nn.leaky_resnet import INITS, LeakyResNet, TrainingPlan, data_cost, fit
from repdyn.probes.rank import effective_rank
from repdyn.theory import leaky_resnet as lr

NUMBER = "002"
SCHEMES = ("equidistant", "irregular", "adaptive")
TOP_SINGULAR_VALUES = 10
RANK_TAU = 0.1
"""Numerical rank of W_l: #{i : s_i >= 0.1 s_1} (spec 002 §3.13 CHOICE)."""
MIDDLE = (0.3, 0.7)
"""Layers with p_l in this range form the bottleneck region of spec 002 §3.13."""


def _plan(config: TeacherRunConfig) -> TrainingPlan:
    return TrainingPlan(config.adam_steps, config.adam_lr, config.gd_steps, config.gd_lr,
                        adam_lr_final=config.adam_lr_final,
                        adaptive_every=config.adaptive_every, adaptive_warmup=config.adaptive_warmup,
                        adaptive_damping=config.adaptive_damping, max_rho_ltilde=config.max_rho_ltilde)


def _check_steps(depths, ltildes, max_rho_ltilde: float) -> None:
    """Reject a config whose steps cannot keep ``rho_l L~ <= max_rho_ltilde`` (pitfall P9) before any run."""
    for depth in depths:
        for lt in ltildes:
            if depth * max_rho_ltilde <= lt:
                raise ConfigError(f"depth={depth} with ltilde={lt:g} is not allowed: rho_l L~ <= max_rho_ltilde="
                                  f"{max_rho_ltilde:g} needs L > {lt / max_rho_ltilde:g} layers")


def _task(config: TeacherRunConfig):
    """The teacher task, fixed by ``config.task_seed`` so that every run of a sweep sees the same data."""
    generator = torch.Generator().manual_seed(config.task_seed)
    return bottleneck_teacher(config.dims, config.n_train, config.n_test, generator, kind=config.teacher,
                              hidden=config.teacher_hidden)


def _test_error(model: LeakyResNet, task) -> np.ndarray:
    """Test cost ||Y - Y_hat||_F^2 / N_test per member (the same normalisation as training; spec 002 P2)."""
    with torch.no_grad():
        pred = model(task.x_test.to(model.weight.device))
        return data_cost(pred.transpose(-1, -2), task.y_test.T.to(pred)).cpu().numpy()


def _member_diagnostics(model: LeakyResNet, task, lam: float, member: int, gamma0: float) -> dict[str, np.ndarray]:
    """Per-layer diagnostics (spec 002 §3.12, §4.4) of one member, float64 on the CPU."""
    weights = model.weight[member].detach().cpu().double()
    rho = model.rho[member].cpu().double()
    lt = float(model.ltilde[member])
    cpu = LeakyResNet(weights[None], rho[None], model.ltilde[member:member + 1].cpu().double(),
                      model.u_in[member:member + 1].cpu().double(), model.u_out[member:member + 1].cpu().double())
    reps, momenta = cpu.momenta(task.x_train, task.y_train, lam, 0)
    diag = lr.layer_diagnostics(weights, rho, reps, momenta, lt, gamma0=gamma0)
    out = {name: getattr(diag, name).numpy() for name in
           ("p", "rho", "h", "h_gamma", "coi_gamma", "kappa", "speed", "momentum_norm", "momentum_feature_norm",
            "weight_norm_sq", "bias_norm_sq", "stationarity", "theorem4_residual", "eq3_gap", "eq3_bound",
            "negativity", "relative_step")}
    out["h_same_index"] = diag.h_same_index.numpy()
    out["weight_sv"] = diag.weight_singular_values[:, :TOP_SINGULAR_VALUES].numpy()
    out["weight_rank"] = (diag.weight_singular_values >= RANK_TAU * diag.weight_singular_values[:, :1]).sum(
        -1).numpy()
    out["effective_rank"] = effective_rank(reps[1:]).numpy()
    out["path_length"] = np.float64(lr.path_length(reps))
    for name, g0 in (("min_coi_gamma_low", gamma0 / 10), ("min_coi_gamma_high", gamma0 * 10)):
        out[name] = np.float64(lr.cost_of_identity(reps[:-1], lr.adaptive_gamma(reps[:-1], g0)).min())
    return out


def _middle(p: np.ndarray) -> np.ndarray:
    inside = (p >= MIDDLE[0]) & (p <= MIDDLE[1])
    return inside if inside.any() else np.abs(p - 0.5) == np.abs(p - 0.5).min()


def _spread(values: np.ndarray) -> float:
    """(max - min) / |median| over layers: the conservation metric of spec 002 §3.12."""
    return float((values.max() - values.min()) / abs(np.median(values)))


# ---------------------------------------------------------------------------------------------------------
# 1. Structures (Fig. 1, Fig. 3; H1-H4)
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TeacherRunConfig:
    """Settings shared by the seed-002 experiments: the teacher task, the student and its training plan."""

    dims: tuple[int, ...] = param((10, 3, 10), ge=1, help="teacher dimensions d_in, k_1, ..., d_out (k* = min)")
    teacher: str = param("fcnn", choices=TEACHER_KINDS, help="teacher blocks (task A of seed 002: fcnn)")
    teacher_hidden: int = param(32, ge=1, help="hidden width of the teacher blocks")
    task_seed: int = param(0, ge=0, help="seed of the teacher and its data (the run seed draws the student)")
    n_train: int = param(200, ge=2, help="training points (paper: 1000)")
    n_test: int = param(200, ge=1, help="test points (paper: 1000)")
    width: int = param(32, ge=2, help="w (paper: 200)")
    lam: float = param(0.01, gt=0, help="lambda of the lambda/(2L~) weight decay (paper: 0.002)")
    init_scale: float = param(0.1, ge=0, help="s in V ~ N(0, 2 (L~ s)^2 / w) (spec 002 §4.2: s = 1)")
    init: str = param("he", choices=INITS, help="he: He x L~ noise; identity: L~ [I, 0] + that noise (§4.2)")
    adam_steps: int = param(4000, ge=0, help="full-batch Adam steps (paper: 20000)")
    adam_lr: float = param(3e-3, gt=0)
    adam_lr_final: float = param(1e-5, gt=0, help="cosine decay of the Adam rate down to this value")
    gd_steps: int = param(0, ge=0, help="full-batch GD steps after Adam (paper: 10000)")
    gd_lr: float = param(1e-4, gt=0)
    adaptive_every: int = param(10, ge=1, help="steps between adaptive rho updates")
    adaptive_warmup: int = param(200, ge=0, help="steps before the first adaptive update")
    adaptive_damping: float = param(0.5, gt=0, le=1, help="rho <- (1-d) rho + d rho_new")
    max_rho_ltilde: float = param(0.9, gt=0, le=1, help="cap on adaptive rho_l L~ (pitfall P9; paper: none)")
    dtype: str = param("float64", choices=("float64", "float32"), help="training dtype (analysis: float64)")


@dataclass(frozen=True)
class StructuresConfig(TeacherRunConfig):
    depth: int = param(12, ge=2, help="L (paper: 50)")
    ltildes: tuple[float, ...] = param((1.0, 2.0, 4.0, 6.0), gt=0, help="effective depths L~ (one member each)")
    gamma0: float = param(1e-3, gt=0, help="gamma_l = gamma0 lambda_max(K_l) (erratum P5(c))")


class Structures(Experiment):
    name = "leaky_resnet.structures"
    title = "Hamiltonian, Cost of Identity and bottleneck structure of adaptive Leaky ResNets over L~"
    paper = NUMBER
    source = "Fig. 1, Fig. 3 (App. B), Eq. (1)-(4), Theorem 4 (spec 002 H1-H4)"
    Config = StructuresConfig
    claims = (
        ClaimSpec("h1_hamiltonian_flat",
                  "At the largest L~ the rescaled Hamiltonian h_l = -2H/L~ is nearly constant across layers: "
                  "(max - min) / median over l (spec 002 H1 suggested pass)",
                  "seed 002, Fig. 1b-d, Eq. (1)", at_most(0.2)),
        ClaimSpec("h1_flatter_than_coi",
                  "At the largest L~ the spread of the gamma-COI across layers is at least 5x that of h_l",
                  "seed 002, Fig. 1b-d", at_least(5.0)),
        ClaimSpec("h2_hamiltonian_near_rank",
                  "Median h at the largest L~ estimates k* from below: median h - k* "
                  "(reduced-scale band of spec 002 §6.2)",
                  "seed 002, Fig. 1a, Eq. (4)", InRange(-1.0, 0.5)),
        ClaimSpec("h2_min_coi_near_rank",
                  "min_l gamma-COI at the largest L~ approaches k* from above: min COI - k* "
                  "(spec 002 H2 band [k*-0.2, k*+1.5])",
                  "seed 002, Fig. 1a, Eq. (4)", InRange(-0.2, 1.5)),
        ClaimSpec("h2_trends",
                  "As L~ grows the median h rises and the minimal gamma-COI falls (first vs largest L~)",
                  "seed 002, Fig. 1a", Holds()),
        ClaimSpec("h3_bottleneck_rank",
                  "At the largest L~ the middle layers (p in [0.3, 0.7]) have exactly k* large singular values "
                  "(s_i >= 0.1 s_1): median numerical rank of W_l minus k*",
                  "seed 002, Fig. 1 top", InRange(-0.5, 0.5)),
        ClaimSpec("h3_nonnegative",
                  "Bottleneck representations are non-negative: max over middle layers of ||A - [A]_+|| / ||A|| "
                  "at the largest L~",
                  "seed 002, Prop. 5", at_most(0.1)),
        ClaimSpec("h4_fast_ends",
                  "Separation of timescales at the largest L~: ||dA_l|| at the first and the last layer over the "
                  "median ||dA_l|| of the middle layers (the smaller of the two ratios)",
                  "seed 002, §3.1, Fig. 1", at_least(2.0)),
        ClaimSpec("h4_adaptive_steps",
                  "The adaptive steps are small at both ends and large in the middle at the largest L~: median "
                  "middle rho over the larger of rho_1 and rho_L",
                  "seed 002, §4, Fig. 2b", at_least(1.5)),
        ClaimSpec("stationarity",
                  "The trained networks are near a critical point: median stationarity residual "
                  "||W_l - L~ B_l sigma(A_{l-1})^T|| / ||W_l|| at the largest L~ (spec 002 T6)",
                  "spec 002 §3.12", at_most(1e-2)),
        ClaimSpec("fig3_bounded",
                  "Fig. 3: max_l ||B_l sigma(A_{l-1})^T|| stays bounded as L~ grows: largest over smallest "
                  "value across the L~ sweep",
                  "seed 002, Fig. 3 (App. B)", at_most(3.0)),
    )

    def config(self, scale: str) -> StructuresConfig:
        if scale == "smoke":
            return StructuresConfig(n_train=40, n_test=40, width=12, depth=6, ltildes=(1.0, 3.0), adam_steps=40,
                                    gd_steps=10, adaptive_warmup=10, teacher_hidden=16)
        if scale == "paper":
            return StructuresConfig(dims=(20, 5, 20), teacher_hidden=100, n_train=1000, n_test=1000, width=200,
                                    depth=50, ltildes=(1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 15.0, 20.0),
                                    lam=0.002, init_scale=1.0, adam_steps=20000, adam_lr=1e-3,
                                    adam_lr_final=1e-4, gd_steps=10000, dtype="float32")
        return StructuresConfig()

    def prepare(self, config: StructuresConfig) -> None:
        _check_steps([config.depth], config.ltildes, config.max_rho_ltilde)

    def runs(self, config: StructuresConfig) -> list[RunSpec]:
        return [RunSpec("sweep", {"ltildes": list(config.ltildes)})]

    def execute(self, config: StructuresConfig, run: RunSpec, seed: int, device: str) -> RunResult:
        task = _task(config)
        generator = torch.Generator().manual_seed(seed)
        dtype = getattr(torch, config.dtype)
        model = LeakyResNet.initialise(config.depth, config.width, config.dims[0], config.dims[-1], config.ltildes,
                                       lr.equidistant_steps(config.depth), generator,
                                       init_scale=config.init_scale, init=config.init).to(device=device, dtype=dtype)
        history = fit(model, task.x_train.to(device), task.y_train.to(device), config.lam, _plan(config),
                      adaptive=torch.ones(model.members, dtype=torch.bool, device=device))
        result: RunResult = {"history_step": history["step"], "history_objective": history["objective"],
                             "max_rho_ltilde": history["max_rho_ltilde"][-1],
                             "test_error": _test_error(model, task), "bottleneck_rank": task.bottleneck_rank}
        per_member = [_member_diagnostics(model, task, config.lam, k, config.gamma0) for k in range(model.members)]
        for key in per_member[0]:
            result[key] = np.stack([m[key] for m in per_member])
        return result

    def analyse(self, config: StructuresConfig, results: Mapping[str, RunResult]) -> Analysis:
        r = results["sweep"]
        k_star = int(r["bottleneck_rank"])
        lts = np.asarray(config.ltildes)
        last = int(np.argmax(lts))
        first = int(np.argmin(lts))
        medians_h = np.median(r["h"], axis=1)
        min_coi = r["coi_gamma"].min(axis=1)
        p = r["p"][last]
        middle = _middle(p)
        speed = r["speed"][last]
        rho = r["rho"][last]
        fast_ratio = min(speed[0], speed[-1]) / np.median(speed[middle])
        bounded = r["momentum_feature_norm"].max(axis=1)
        measured = {
            "h1_hamiltonian_flat": Measured(_spread(r["h"][last]),
                                            f"h_l in [{r['h'][last].min():.3g}, {r['h'][last].max():.3g}], "
                                            f"median {medians_h[last]:.3g}"),
            "h1_flatter_than_coi": Measured(_spread(r["coi_gamma"][last]) / _spread(r["h"][last]),
                                            f"COI spread {_spread(r['coi_gamma'][last]):.3g}, kappa spread "
                                            f"{_spread(r['kappa'][last]):.3g}, h spread "
                                            f"{_spread(r['h'][last]):.3g}"),
            "h2_hamiltonian_near_rank": Measured(float(medians_h[last] - k_star),
                                                 f"median h = {medians_h[last]:.3f}, k* = {k_star}"),
            "h2_min_coi_near_rank": Measured(float(min_coi[last] - k_star),
                                             f"min COI_gamma = {min_coi[last]:.3f}, k* = {k_star}"),
            "h2_trends": Measured(bool(medians_h[last] > medians_h[first] and min_coi[last] < min_coi[first]),
                                  "median h per L~: " + ", ".join(f"{v:.2f}" for v in medians_h)
                                  + "; min COI per L~: " + ", ".join(f"{v:.2f}" for v in min_coi)),
            "h3_bottleneck_rank": Measured(float(np.median(r["weight_rank"][last][middle]) - k_star),
                                           "numerical rank of W_l per layer: "
                                           + " ".join(str(int(v)) for v in r["weight_rank"][last])
                                           + "; middle layers: top-k* singular values / L~ = "
                                           f"{np.median(r['weight_sv'][last][middle][:, :k_star]) / lts[last]:.2f}"
                                           " (spec 002 §3.10 derives 1)"),
            "h3_nonnegative": Measured(float(r["negativity"][last][middle].max()),
                                       "negativity per layer: " + " ".join(f"{v:.2f}" for v in
                                                                            r["negativity"][last])),
            "h4_fast_ends": Measured(float(fast_ratio), "||dA_l|| per layer: "
                                     + " ".join(f"{v:.3g}" for v in speed)),
            "h4_adaptive_steps": Measured(float(np.median(rho[middle]) / max(rho[0], rho[-1])),
                                          "L rho_l: " + " ".join(f"{v:.2f}" for v in rho * len(rho))),
            "stationarity": Measured(float(np.median(r["stationarity"][last])),
                                     "median r_l per L~: " + ", ".join(f"{np.median(v):.2g}"
                                                                      for v in r["stationarity"])),
            "fig3_bounded": Measured(float(bounded.max() / bounded.min()),
                                     "max_l ||B sigma^T|| per L~: " + ", ".join(f"{v:.3g}" for v in bounded)
                                     + f" (sqrt(k*) = {np.sqrt(k_star):.3g})"),
        }
        metrics = [{"ltilde": float(lt), "median_h": float(np.median(r["h"][k])), "min_h": float(r["h"][k].min()),
                    "max_h": float(r["h"][k].max()), "median_h_gamma": float(np.median(r["h_gamma"][k])),
                    "min_coi_gamma": float(min_coi[k]), "median_stationarity": float(np.median(r["stationarity"][k])),
                    "max_theorem4_residual": float(r["theorem4_residual"][k].max()),
                    "test_error": float(r["test_error"][k]), "path_length": float(r["path_length"][k]),
                    "max_B_norm": float(r["momentum_norm"][k].max()), "max_B_sigma_norm": float(bounded[k]),
                    "min_coi_gamma0_low": float(r["min_coi_gamma_low"][k]),
                    "min_coi_gamma0_high": float(r["min_coi_gamma_high"][k])}
                   for k, lt in enumerate(lts)]
        figures = {"fig1_structures": _structures_figure(r, lts, k_star),
                   "fig3_boundedness": _boundedness_figure(r, lts, k_star)}
        return Analysis(measured=measured, figures=figures, metrics=metrics, notes=_structures_notes(config, r, lts))


def _structures_figure(r: RunResult, lts: np.ndarray, k_star: int) -> Figure:
    """Fig. 1 of seed 002: (a) h, h_gamma, min COI against L~; per L~: top singular values of W_l and energies."""
    shown = sorted({0, len(lts) // 2, len(lts) - 1})
    fig = Figure(figsize=(4 * (len(shown) + 1), 7))
    axes = fig.subplots(2, len(shown) + 1, squeeze=False)
    ax = axes[0, 0]
    med = np.median(r["h"], axis=1)
    ax.errorbar(lts, med, yerr=[med - r["h"].min(axis=1), r["h"].max(axis=1) - med], marker="o", capsize=3,
                label="Hamiltonian $-2\\mathcal{H}/\\tilde L$")
    ax.plot(lts, np.median(r["h_gamma"], axis=1), marker="s", label="stable Hamiltonian")
    ax.plot(lts, r["coi_gamma"].min(axis=1), marker="^", label="min COI$_\\gamma$")
    ax.axhline(k_star, color="grey", ls="--", lw=1, label=f"$k^*={k_star}$")
    ax.set_xlabel("$\\tilde L$")
    ax.set_title("(a) Hamiltonian constants", fontsize=9)
    ax.legend(fontsize=7)
    axes[1, 0].plot(lts, np.median(r["stationarity"], axis=1), marker="o")
    axes[1, 0].set_yscale("log")
    axes[1, 0].set_xlabel("$\\tilde L$")
    axes[1, 0].set_title("median stationarity residual $r_\\ell$", fontsize=9)
    for col, k in enumerate(shown, start=1):
        p = r["p"][k]
        top, bottom = axes[0, col], axes[1, col]
        top.plot(p, r["weight_sv"][k], color="tab:blue", lw=0.8)
        top.set_yscale("log")
        top.set_title(f"$\\tilde L$={lts[k]:g}: top singular values of $W_\\ell$", fontsize=9)
        for value in p:
            top.axvline(value, color="0.85", lw=0.5)
        bottom.plot(p, r["h"][k], marker="o", ms=3, label="Hamiltonian")
        bottom.plot(p, r["h_gamma"][k], marker="s", ms=3, label="stable Hamiltonian")
        bottom.plot(p, r["coi_gamma"][k], marker="^", ms=3, label="COI$_\\gamma$")
        bottom.plot(p, r["kappa"][k], marker="v", ms=3, label="kinetic $\\kappa$")
        bottom.axhline(k_star, color="grey", ls="--", lw=1)
        bottom.set_yscale("symlog", linthresh=1.0)
        bottom.set_xlabel("$p_\\ell$")
        bottom.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _boundedness_figure(r: RunResult, lts: np.ndarray, k_star: int) -> Figure:
    """Fig. 3 of seed 002: path length, max ||B_l||, max ||B_l sigma(A_{l-1})^T|| against L~."""
    fig = Figure(figsize=(11, 3.4))
    axes = fig.subplots(1, 3)
    series = [("path length $\\sum_\\ell\\|A_\\ell - A_{\\ell-1}\\|$", r["path_length"]),
              ("$\\max_\\ell \\|B_\\ell\\|$", r["momentum_norm"].max(axis=1)),
              ("$\\max_\\ell \\|B_\\ell\\sigma(A_{\\ell-1})^T\\|$", r["momentum_feature_norm"].max(axis=1))]
    for ax, (label, values) in zip(axes, series, strict=True):
        ax.plot(lts, values, marker="o")
        ax.set_xlabel("$\\tilde L$")
        ax.set_title(label, fontsize=9)
        ax.set_ylim(bottom=0)
    axes[2].axhline(np.sqrt(k_star), color="grey", ls="--", lw=1, label="$\\sqrt{k^*}$")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _structures_notes(config: StructuresConfig, r: RunResult, lts: np.ndarray) -> str:
    last = int(np.argmax(lts))
    residual = float(np.median(r["stationarity"][last]))
    lines = [f"Largest L~ = {lts[last]:g}: median stationarity residual {residual:.2g}, max Theorem 4 residual "
             f"{r['theorem4_residual'][last].max():.2g} (exact only at a critical point, spec 002 §3.12), "
             f"test error {r['test_error'][last]:.3g}, max rho L~ = {r['max_rho_ltilde'][last]:.2g}."]
    lines.append("gamma-sensitivity of min COI_gamma at the largest L~ (gamma0/10, gamma0, 10 gamma0): "
                 + ", ".join(f"{v:.3g}" for v in (r["min_coi_gamma_low"][last], r["coi_gamma"][last].min(),
                                                  r["min_coi_gamma_high"][last])) + ".")
    if residual > 1e-2:
        lines.append("The networks are not at a critical point (median r_l above the 1e-2 target of spec 002 "
                     "T6): the Hamiltonian of Eq. (1) is conserved only where W_l = L~ B_l sigma(A_{l-1})^T, so "
                     "h_l built from the backprop momenta B_l is not expected to be flat nor to estimate k*, and "
                     "the h1/h2 Hamiltonian claims are not a test of the theory here (pitfall P7). Training "
                     "longer does not close the gap: a ReLU minimum sits on kinks of the activation, where the "
                     "gradient does not vanish (examples/leaky_resnet_stationarity.py: damped Newton on the exact "
                     "Hessian stalls at gradient norm ~6e-3 with the ReLU and reaches ~1e-15 with a softplus). "
                     "At an exact critical point the same diagnostics give a flat h_l and Theorem 4 to rounding "
                     "(tests/theory/test_leaky_resnet.py, shot critical networks). The structural claims (min "
                     "COI, weight ranks, non-negativity, timescales, adaptive steps) do not need stationarity.")
    if config.lam != 0.002 or config.init_scale != 1.0:
        lines.append(f"Deviations from the paper/spec defaults: lambda = {config.lam:g} (paper 0.002) and init "
                     f"scale {config.init_scale:g} (spec 1); with {config.adam_steps} Adam steps the defaults "
                     "gave no bottleneck in a pilot (weight ranks ~40 in every layer, stationarity residual ~2).")
    lines.append(f"Adaptive steps are capped at rho_l L~ <= {config.max_rho_ltilde:g} (pitfall P9; the paper "
                 "has no cap).")
    if max(config.ltildes) < 8:
        lines.append("In pilots at this scale an L~ = 8 member with 12 or 16 layers either ran with rho_l L~ up to "
                     "1.2 (uncapped) or collapsed to the trivial solution A_L -> 0 (capped; test error 9.96, the "
                     "output variance): the signal decay of pitfall P10. The grid therefore stops at L~ = 6.")
    return " ".join(lines)


# ---------------------------------------------------------------------------------------------------------
# 2. Discretisation (Fig. 2; H5)
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DiscretisationConfig(TeacherRunConfig):
    dims: tuple[int, ...] = param((10, 4, 2, 10), ge=1, help="teacher dimensions (task B of seed 002: 30,6,3,30)")
    teacher: str = param("resnet", choices=TEACHER_KINDS, help="teacher blocks (task B: resnet)")
    adam_steps: int = param(2000, ge=0, help="full-batch Adam steps (paper: 20000)")
    dtype: str = param("float32", choices=("float64", "float32"), help="training dtype")
    depths: tuple[int, ...] = param((4, 8, 12, 16), ge=2, help="numbers of layers L (paper: 4 to 22)")
    ltilde: float = param(3.0, gt=0, help="effective depth (paper: 3)")
    seeds: int = param(3, ge=1, help="initialisations per (L, scheme); paired across schemes")
    irregular_a: float = param(0.5, ge=0, lt=1, help="a of the irregular steps (not given; spec CHOICE 0.5)")


class Discretisation(Experiment):
    name = "leaky_resnet.discretisation"
    title = "Test error against the number of layers for equidistant, irregular and adaptive layer steps"
    paper = NUMBER
    source = "Fig. 2, §4 (spec 002 H5)"
    Config = DiscretisationConfig
    claims = (
        ClaimSpec("h5_adaptive_not_worse",
                  "Adaptive steps give a test error no larger than equidistant steps at most L: fraction of the "
                  "depths L where the seed-mean test error of adaptive <= equidistant",
                  "seed 002, Fig. 2a", at_least(0.75)),
        ClaimSpec("h5_irregular_not_worse",
                  "Irregular steps give a test error no larger than equidistant steps at most L: fraction of "
                  "the depths L where the seed-mean test error of irregular <= equidistant",
                  "seed 002, Fig. 2a", at_least(0.75)),
        ClaimSpec("adaptive_equalises_steps",
                  "The adaptive rule equalises the relative distances ||A_l - A_{l-1}|| / ||A_l|| (spec 002 T13): "
                  "their coefficient of variation over layers with adaptive steps over that with equidistant "
                  "steps, at the largest L (mean over seeds)",
                  "seed 002, §4", at_most(0.5)),
        ClaimSpec("h5_depth_helps",
                  "Larger L improves the test error: seed-mean test error (all schemes) at the largest L is "
                  "below that at the smallest L",
                  "seed 002, Fig. 2a", Holds()),
    )

    def config(self, scale: str) -> DiscretisationConfig:
        if scale == "smoke":
            return DiscretisationConfig(n_train=40, n_test=40, width=12, depths=(4, 6), seeds=2, adam_steps=40,
                                        gd_steps=10, adaptive_warmup=10, teacher_hidden=16)
        if scale == "paper":
            return DiscretisationConfig(dims=(30, 6, 3, 30), teacher_hidden=64, n_train=1000, n_test=1000,
                                        width=200, depths=tuple(range(4, 23, 2)), seeds=3, lam=0.002,
                                        init_scale=1.0, adam_steps=20000, adam_lr=1e-3, adam_lr_final=1e-4,
                                        gd_steps=10000)
        return DiscretisationConfig()

    def prepare(self, config: DiscretisationConfig) -> None:
        _check_steps(config.depths, [config.ltilde], config.max_rho_ltilde)

    def runs(self, config: DiscretisationConfig) -> list[RunSpec]:
        return [RunSpec(f"L={depth}", {"depth": depth}) for depth in config.depths]

    def execute(self, config: DiscretisationConfig, run: RunSpec, seed: int, device: str) -> RunResult:
        depth = int(run.params["depth"])
        task = _task(config)
        dtype = getattr(torch, config.dtype)
        # one initialisation per seed, repeated across the schemes (paired comparison, spec 002 P15)
        rho = torch.stack([lr.step_scheme(s, depth, config.irregular_a) for s in SCHEMES])
        rho = rho.repeat_interleave(config.seeds, dim=0)
        inits = [LeakyResNet.initialise(depth, config.width, config.dims[0], config.dims[-1], [config.ltilde],
                                        lr.equidistant_steps(depth), torch.Generator().manual_seed(seed * 1000 + i),
                                        init_scale=config.init_scale, init=config.init) for i in range(config.seeds)]
        model = LeakyResNet(torch.cat([m.weight.detach() for m in inits]).repeat(len(SCHEMES), 1, 1, 1), rho,
                            torch.full((rho.shape[0],), config.ltilde, dtype=torch.float64),
                            torch.cat([m.u_in for m in inits]).repeat(len(SCHEMES), 1, 1),
                            torch.cat([m.u_out for m in inits]).repeat(len(SCHEMES), 1, 1)).to(device=device,
                                                                                                dtype=dtype)
        adaptive = torch.tensor([s == "adaptive" for s in SCHEMES]).repeat_interleave(config.seeds)
        fit(model, task.x_train.to(device), task.y_train.to(device), config.lam, _plan(config),
            adaptive=adaptive.to(device))
        members = model.members
        shape = (len(SCHEMES), config.seeds)
        with torch.no_grad():
            reps = model.representations(task.x_train.to(device)).double().cpu()
        sv = torch.linalg.svdvals(model.weight.detach().double().cpu())[..., :TOP_SINGULAR_VALUES]
        return {"test_error": _test_error(model, task).reshape(shape),
                "rho": model.rho.double().cpu().numpy().reshape(*shape, depth),
                "weight_sv": sv.numpy().reshape(*shape, depth, -1),
                "path_projection": _path_projection(reps).reshape(*shape, depth + 1, 2),
                "relative_step": lr.relative_step_distances(reps).numpy().reshape(*shape, depth),
                "members": members}

    def analyse(self, config: DiscretisationConfig, results: Mapping[str, RunResult]) -> Analysis:
        depths = np.asarray(config.depths)
        errors = np.stack([results[f"L={d}"]["test_error"] for d in depths])  # (depths, schemes, seeds)
        mean, std = errors.mean(-1), errors.std(-1)
        eq, irr, ada = (SCHEMES.index(s) for s in ("equidistant", "irregular", "adaptive"))
        steps = results[f"L={depths[-1]}"]["relative_step"]  # (schemes, seeds, L)
        cv = steps.std(-1) / steps.mean(-1)
        table = "; ".join(f"L={d}: " + ", ".join(f"{s} {mean[i, j]:.4f}±{std[i, j]:.4f}"
                                                  for j, s in enumerate(SCHEMES)) for i, d in enumerate(depths))
        paired = errors[:, ada] - errors[:, eq]
        measured = {
            "h5_adaptive_not_worse": Measured(float((mean[:, ada] <= mean[:, eq]).mean()),
                                              "mean ± std over seeds: " + table + "; paired adaptive - equidistant "
                                              "per L: " + ", ".join(f"{v.mean():+.4f}±{v.std():.4f}"
                                                                     for v in paired)),
            "h5_irregular_not_worse": Measured(float((mean[:, irr] <= mean[:, eq]).mean()), table),
            "adaptive_equalises_steps": Measured(float(cv[ada].mean() / cv[eq].mean()),
                                                 f"CV at L={depths[-1]}: equidistant {cv[eq].mean():.3f}, "
                                                 f"irregular {cv[irr].mean():.3f}, adaptive {cv[ada].mean():.3f}"),
            "h5_depth_helps": Measured(bool(mean[-1].mean() < mean[0].mean()),
                                       f"mean over schemes: L={depths[0]}: {mean[0].mean():.4f}, "
                                       f"L={depths[-1]}: {mean[-1].mean():.4f}"),
        }
        metrics = [{"L": int(d), "scheme": s, "test_error_mean": float(mean[i, j]),
                    "test_error_std": float(std[i, j]), "seeds": int(errors.shape[-1])}
                   for i, d in enumerate(depths) for j, s in enumerate(SCHEMES)]
        notes = ("The paper calls the gain 'small but consistent' and gives no numbers; at this scale the "
                 "differences between schemes are compared with the seed spread (mean ± std, paired seeds).")
        return Analysis(measured=measured, figures={"fig2_discretisation": _discretisation_figure(results,
                                                                                                   depths, mean,
                                                                                                   std)},
                        metrics=metrics, notes=notes)


def _path_projection(reps: torch.Tensor) -> np.ndarray:
    """2-D PCA projection of the path A_0..A_L flattened to R^{wN} (spec 002 §5 Fig. 2c CHOICE), per member."""
    flat = reps.flatten(-2)
    centred = flat - flat.mean(-2, keepdim=True)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    return (centred @ vh[..., :2, :].transpose(-1, -2)).numpy()


def _discretisation_figure(results: Mapping[str, RunResult], depths: np.ndarray, mean: np.ndarray,
                           std: np.ndarray) -> Figure:
    fig = Figure(figsize=(14, 3.8))
    axes = fig.subplots(1, 2 + len(SCHEMES))
    for j, scheme in enumerate(SCHEMES):
        axes[0].errorbar(depths, mean[:, j], yerr=std[:, j], marker="o", capsize=3, label=scheme)
    axes[0].set_xlabel("number of layers $L$")
    axes[0].set_title("(a) test error (mean ± std over seeds)", fontsize=9)
    axes[0].legend(fontsize=7)
    deepest = results[f"L={depths[-1]}"]
    ada = SCHEMES.index("adaptive")
    p = np.cumsum(deepest["rho"][ada, 0])
    axes[1].plot(p, deepest["weight_sv"][ada, 0], color="tab:blue", lw=0.8)
    for value in p:
        axes[1].axvline(value, color="0.8", lw=0.6)
    axes[1].set_yscale("log")
    axes[1].set_xlabel("$p_\\ell$")
    axes[1].set_title(f"(b) spectra of $W_\\ell$, adaptive, L={depths[-1]}", fontsize=9)
    for j, scheme in enumerate(SCHEMES):
        ax = axes[2 + j]
        path = deepest["path_projection"][j, 0]
        ax.plot(path[:, 0], path[:, 1], marker="o", ms=3)
        ax.set_title(f"(c) path PCA, {scheme}", fontsize=9)
    fig.tight_layout()
    return fig


PAPER = Paper("002", "leaky_resnet", "Hamiltonian Mechanics of Feature Learning: Bottleneck Structure in Leaky ResNets",
          "Jacot & Kaiser",
          "Leaky ResNets as Hamiltonian systems: Cost of Identity, a low-dimensional bottleneck in the middle layers, "
          "and adaptive layer steps.")

EXPERIMENTS = (Structures(), Discretisation())
