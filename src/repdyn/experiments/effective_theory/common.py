"""Shared pieces of the seed-000 experiments: Table 1 architectures, two-point training, fits and figures."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from repdyn.data.two_points import CODE_DX, CODE_DY, two_point_data
from repdyn.framework.base import RunSpec
from repdyn.framework.claims import Control, Precondition, at_least, at_most
from repdyn.framework.config import ConfigError, param
from repdyn.nn import MLP, Ensemble, Schedule, train
from repdyn.nn.models.cnn import ConvChain
from repdyn.probes.two_point import TwoPointState, two_point_recorder
from repdyn.theory import effective_theory as et

PAPER_WIDTH = 500
CONV_CHANNELS = 20
"""Channels of the convolutional row (App. B.1: "each with 20 channels and kernel size 11"), at every width."""
CONVERGED_LOSS = 1e-3
"""Final training loss (½ convention; Y/8 = 0.0625 on the plateau at the default data) below which a run counts as
converged."""
ESCAPE_FRACTION = 0.5
"""A run has escaped the loss plateau when its final loss is below this fraction of the plateau Y/8, i.e. below Y/16
(the precondition of every claim about a trained two-point network)."""


@dataclass(frozen=True)
class DeepRunConfig:
    """Settings shared by the experiments that train Table 1's default deep network on two points."""

    width: int = param(500, ge=2)
    depth: int = param(20, ge=2, help="hidden layers (Table 1: 20; smaller only for smoke tests)")
    steps: int = param(6000, ge=0, help="full-batch GD steps (0: the untrained negative control)")
    time_compression: float = param(1.0, gt=0, help="learning rate × this")
    record_every: int = param(1, ge=1)


@dataclass(frozen=True)
class DefaultRunConfig(DeepRunConfig):
    """Table 1's default network on one two-point dataset, ``trials`` independent networks as one ensemble."""

    trials: int = param(3, ge=1, help="independent default networks analysed: the first `trials` of the shared "
                        "ensemble (the paper shows one)")
    dx: float = param(CODE_DX, gt=0, help="input distance (the authors' notebook: 1; App. B.1's text: 0.5)")
    dy: float = param(CODE_DY, gt=0, help="target distance (the authors' notebook: √0.5; App. B.1's text: 1)")
    networks: int = param(3, ge=1, help="default networks of the ensemble shared by the experiments that read it "
                          "(depth, control, init_scale's gain 1.0; trained once, see DEFAULT_NETWORKS); >= trials")


DEFAULT_RUN_SCALES = {
    "smoke": DefaultRunConfig(width=32, depth=4, steps=400, time_compression=31.25, record_every=5),
    "quick": DefaultRunConfig(width=500, steps=3000, time_compression=2.0, record_every=10),
    "full": DefaultRunConfig(width=500, steps=3000, time_compression=2.0, record_every=10, trials=10, networks=10),
    "paper": DefaultRunConfig(),
}
"""The default network's scales, shared by the control (Fig. 11) and depth (Fig. 10) experiments. Quick and full train
as the authors' 2_points_depth.ipynb does: lr 0.01 (2 × Table 1's) for 3000 epochs, the flow time of Table 1's 0.005 ×
6000 (2_points.ipynb, 2_points_alternative.ipynb), at the paper's width 500 (at width 64 the second half of the
network does not follow Eq. 7 where the authors' width-500 network does, docs/reproduction/000.md). ``networks`` is
the largest ``trials`` of the experiments that read the shared ensemble: 3 at quick (the pre-registered power rule of
docs/reproduction/000.md found 3 members decide every depth claim), 5 at full."""


@dataclass(frozen=True)
class Architecture:
    """One row of Table 1 of seed 000 (App. B.1): activation, Xavier gain, learning rate, hidden layers, width
    relative to the default 500, skip connections (spec 000 §3.2: skip over two layers) and dropout."""

    activation: str
    gain: float
    lr: float
    """Table 1's learning rate, used at every width. Spec 000 §6.2 suggested Table-1 × (500/width); that assumes a
    tangent kernel growing with width, which these networks do not have: with 1-D inputs, Xavier-normal weights
    keep every hidden norm and the squared parameter gradient of the output O(1) in width (measured ‖∂f/∂θ‖² ≈ 2-4
    at widths 64, 128 and 500; test_tangent_kernel_does_not_grow_with_width). Scaling by 500/64 multiplied the
    effective step 7.8-fold and made GD jump off the plateau."""
    depth: int = 20
    width_fraction: float = 1.0
    skip: int = 0
    dropout: float = 0.0
    conv: bool = False
    reduced_width_lr_factor: float = 1.0
    """Extra learning-rate factor below the paper's width (spec 000 §7.23: retune and report)."""


TABLE1: dict[str, Architecture] = {
    "default": Architecture("leaky_relu", 1.0, 0.005),
    "conv": Architecture("leaky_relu", 0.95, 0.002, depth=10, conv=True),
    "skip": Architecture("leaky_relu", 0.1, 0.01, skip=2),
    "shallow": Architecture("leaky_relu", 0.35, 0.01, depth=2),
    "narrow": Architecture("leaky_relu", 1.05, 0.005, width_fraction=0.1),
    "dropout": Architecture("leaky_relu", 1.0, 0.005, depth=10, dropout=0.1),
    "linear": Architecture("identity", 0.85, 0.00125),
    "relu": Architecture("relu", 1.0, 0.005),
    "elu": Architecture("elu", 0.95, 0.00045),
    "tanh": Architecture("tanh", 0.85, 0.00125),
    "swish": Architecture("silu", 1.7, 0.0025, reduced_width_lr_factor=0.5),  # diverged at step ~80 at width 64
}
"""Table 1 (verbatim gains and learning rates). The convolutional row uses the engine's ConvChain: 20 channels ×
25 positions = 500 units, kernel 11, "same" padding (spec 000 §3.2), channels scaled with the width."""

INIT_SCALES: dict[float, float] = {0.9: 0.015, 1.0: 0.005, 1.1: 0.0025, 1.3: 0.00075, 1.4: 0.00025}
"""Table 1, initial-weight rows: leaky-ReLU gain -> learning rate (20 x 500)."""


def readout_index(depth: int) -> int:
    """0-based index of the hidden layer "exactly halfway through the network" (App. B) as the authors' notebooks read
    it (``hidden_layer`` of experiments/model_settings: 10 for N = 20, 5 for N = 10, 1 for N = 2, 0 for N = 1), i.e.
    ⌊N/2⌋: the 11th of 20 hidden layers."""
    return depth // 2


def readout_layer(depth: int) -> str:
    """The engine's name of the post-activation of :func:`readout_index`: "layer10" for N = 20."""
    return f"layer{readout_index(depth)}"


def width_of(arch: Architecture, width: int) -> int:
    """Hidden width of ``arch`` when the default has ``width`` units: the narrow row keeps Table 1's 50 units and
    the convolutional row its 500 (20 channels × 25 positions) at every width: reduced copies never leave the
    plateau, and both are cheap at the paper's size (a kernel of 11 costs less than a dense layer)."""
    if arch.width_fraction < 1:
        return round(PAPER_WIDTH * arch.width_fraction)
    if arch.conv:
        return PAPER_WIDTH
    return width


def train_two_point(*, activation: str, depth: int, width: int, gains: Sequence[float], lrs: Sequence[float],
                    seeds: Sequence[int], steps: int, record_every: int, dx: Sequence[float], dy: Sequence[float],
                    layers: Sequence[str] | None = None, skip: int = 0, dropout: float = 0.0, conv: bool = False,
                    optimizer: str = "gd", device: str = "cpu", generator_seed: int = 0,
                    orient: bool = False) -> dict[str, np.ndarray]:
    """Train K MLPs (ConvChains when ``conv``), one per entry of gains/lrs/seeds/dx/dy, on their own two-point
    data as one ensemble and record (u at ``layers``, v, w, ȳ, loss) every ``record_every`` steps (full-batch GD
    unless ``optimizer``).

    float64 throughout (spec 000 §7.22). Returns arrays: steps (T,), u (T, K, L), v, w, loss (T, K), ybar (T, K),
    plus the per-member X, Y, gains and lrs. With ``orient``, members that start with w(0) > 0 get their output
    layer negated (then w(0) < 0; ``flipped`` (K,) says which).
    """
    layers = list(layers) if layers is not None else [readout_layer(depth)]
    if conv:  # Table 1's 20 channels at every width; positions fill the width
        channels = CONV_CHANNELS
        factory = functools.partial(ConvChain, 1, channels, width // channels, depth, 1, activation=activation,
                                    dtype=torch.float64)
    else:
        factory = functools.partial(MLP, 1, width, depth, 1, activation=activation, skip=skip, dropout=dropout,
                                    dtype=torch.float64)
    model = Ensemble(factory, seeds=list(seeds), gains=list(gains), device=device)
    x, y = two_point_data(np.asarray(dx, dtype=float), np.asarray(dy, dtype=float))
    x, y = x.to(device), y.to(device)
    flipped = orient_outputs(model, x, y) if orient else np.zeros(len(seeds), dtype=bool)
    generator = torch.Generator(device=device).manual_seed(generator_seed)
    result = train(model, x, y, steps=steps, lr=list(lrs), optimizer=optimizer, generator=generator,
                   schedule=Schedule.every(record_every, steps),
                   recorders={"pair": two_point_recorder(x, y, layers)})
    state = TwoPointState.unpack(torch.as_tensor(result.trajectory["pair"]), len(layers))
    return {"steps": result.trajectory.steps.astype(float), "u": state.u.numpy(), "v": state.v.numpy(),
            "w": state.w.numpy(), "ybar": state.ybar[..., 0].numpy(), "loss": result.trajectory["loss"],
            "X": np.asarray(dx, dtype=float) ** 2, "Y": np.asarray(dy, dtype=float) ** 2,
            "gains": np.asarray(gains, dtype=float), "lrs": np.asarray(lrs, dtype=float), "flipped": flipped}


def orient_outputs(model: Ensemble, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Negate the output layer (weight and bias) of every member whose two-point start has w(0) = ‖dy‖² − dy·Δy > 0
    (K pairs x, y of shape (K, 2, 1)); returns which members were negated. Negating the output layer negates dy, so
    w(0) becomes ‖dy‖² + dy·Δy, which is < 0 whenever |dy·Δy| > ‖dy‖² (small initial outputs)."""
    with torch.no_grad():
        out = model(x)
        dy = out[:, 1] - out[:, 0]
        delta = y[:, 1] - y[:, 0]
        w0 = (dy**2).sum(-1) - (dy * delta).sum(-1)
        flip = w0 > 0
        sign = torch.where(flip, -1.0, 1.0).to(dy.dtype)
        for name in ("output.weight", "output.bias"):
            param = model.params[name]
            param.mul_(sign.view(-1, *([1] * (param.dim() - 1))))
    return flip.cpu().numpy()


@dataclass(frozen=True)
class MemberFit:
    """A fit of Eq. 7 to one recorded trajectory; ``fit`` is None when it failed (``error`` says why)."""

    fit: et.RateFit | None
    relative_loss: float
    error: str = ""


def plateau_fraction(t: np.ndarray, u: np.ndarray) -> float:
    """Fraction of the training time before ‖dh‖² has covered 5 % of its way from u(0) to its final value (NaN when
    u did not move: nothing was learnt, so there is no plateau to measure)."""
    if t.size < 2 or not abs(u[-1] - u[0]) > 1e-12:
        return float("nan")
    progress = (u - u[0]) / (u[-1] - u[0])
    crossed = np.nonzero(progress > 0.05)[0]
    return float(t[crossed[0]] / t[-1]) if crossed.size else 1.0


def relative_fit_loss(theory: et.Trajectory, t: np.ndarray, u: np.ndarray, v: np.ndarray, w: np.ndarray) -> float:
    """Eq. 49 normalised per variable: the mean over u, v, w of ∫(measured − theory)² dt / ∫(measured − final)² dt
    (0 = perfect overlay; 1 = no better than a constant at the final state). Scale-free, not dominated by v (range
    Y) over u (range about a tenth of it), and not diluted by a long converged tail that any fit matches."""
    measured = np.stack([u, v, w], axis=-1)
    fitted = theory.stacked()
    ratios = [et.fit_objective(measured[:, k:k + 1], fitted[:, k:k + 1], t)
              / et.fit_objective(measured[:, k:k + 1], np.broadcast_to(measured[-1, k], (t.size, 1)), t)
              for k in range(3)]
    return float(np.mean(ratios))


def fit_member(t: np.ndarray, u: np.ndarray, v: np.ndarray, w: np.ndarray, X: float, Y: float,
               variant: str = "original") -> MemberFit:
    """Fit (1/τ_h, 1/τ_y) to one trajectory; a FitError becomes a failed MemberFit with its message."""
    try:
        fit = et.fit_rates(t, u, v, w, X, Y, variant=variant)
    except (et.FitError, RuntimeError, ValueError) as err:  # ValueError: too short a trajectory (untrained)
        return MemberFit(None, float("nan"), str(err))
    return MemberFit(fit, relative_fit_loss(fit.theory, t, u, v, w))


def target_mean(dy: float) -> np.ndarray:
    """m = (y_1 + y_2)/2 of :func:`repdyn.data.two_points.two_point_data`'s targets (y_1 = 0.6, y_2 = 0.6 + dy)."""
    return np.array([0.6 + 0.5 * dy])


def loss_fit(t: np.ndarray, loss: np.ndarray, ybar0: float, m: np.ndarray, theory: et.Trajectory, Y: float
             ) -> tuple[float, float, np.ndarray]:
    """Fig. 12 (App. C.2): Eq. 9 on a measured loss curve with τ_h, τ_y re-used from the Eq. 7 fit (``theory``) and
    1/τ_ȳ fitted "using the same procedure"; returns (1/τ_ȳ, relative error Σ(L_theory − L)² / ΣL², L_theory).
    Raises et.FitError when the fit of 1/τ_ȳ does not converge."""
    rate_ybar, _ = et.fit_output_mean_rate(t, loss, [ybar0], m, theory, Y)
    predicted = et.loss(et.output_mean(t, [ybar0], m, rate_ybar), m, theory.v, theory.w, Y)
    return rate_ybar, float(np.sum((predicted - loss) ** 2) / np.sum(loss**2)), predicted


def trajectory_figure(title: str, panels: Mapping[str, tuple[np.ndarray, np.ndarray, et.Trajectory | None]],
                      Y: float = 1.0) -> Figure:
    """One row per entry: u, v, w against epochs, network (solid) and fitted theory (dashed), as Fig. 2/3."""
    fig = Figure(figsize=(9.0, 2.0 * len(panels) + 0.6))
    axes = fig.subplots(len(panels), 3, squeeze=False)
    for row, (label, (t, measured, theory)) in enumerate(panels.items()):
        for col, name in enumerate(("‖dh‖²", "‖dy‖²", "w")):
            ax = axes[row, col]
            ax.plot(t, measured[:, col], color="C0", lw=1.5, label="network")
            if theory is not None:
                ax.plot(theory.t, theory.stacked()[:, col], color="C3", ls="--", lw=1.2, label="theory")
            if name == "w":
                ax.axhline(-Y / 4, color="0.6", lw=0.8, ls=":")
            ax.set_title(f"{label}: {name}", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0, 0].legend(fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("epoch", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


UNTRAINED = Control("the untrained networks (steps = 0)", {"steps": 0})
"""The cheapest negative control of a claim about training: nothing is learnt, so no fit, plateau, merge or
convergence can be measured (NaN), and no claim about training may pass on it."""


def plateau_ratio(loss: np.ndarray, Y: np.ndarray | float) -> np.ndarray:
    """Each member's final training loss over the plateau Y/8 (last row of a (T, K) loss array; Y per member or
    one); an untrained run (one recorded step) has not left the plateau (∞). Escape: below ESCAPE_FRACTION."""
    loss = np.asarray(loss)
    ratio = loss[-1] / (np.asarray(Y, dtype=float) / 8)
    return np.where(loss.shape[0] > 1, ratio, np.inf)


def escaped(quantity: str, networks: str) -> Precondition:
    """The precondition of a claim about the two-point transition or the state after it: every one of ``networks``
    left the Y/8 plateau (state quantity ``quantity``: :func:`plateau_ratio` per seed, at most ESCAPE_FRACTION)."""
    return Precondition(
        quantity=quantity, expectation=at_most(ESCAPE_FRACTION),
        state=f"{networks} left the loss plateau (final loss < Y/16)",
        reason="the claim is about the transition off the Y/8 plateau or the state after it; a network still on the "
               "plateau has made no transition to fit or compare. Escape = final loss below half the plateau (Y/16)")


def final_loss_below(quantity: str, networks: str, threshold: float = CONVERGED_LOSS) -> Precondition:
    """The precondition of a claim about a final (converged) structure: every one of ``networks`` reached a final
    training loss below ``threshold`` (state quantity ``quantity``: the final losses)."""
    return Precondition(
        quantity=quantity, expectation=at_most(threshold), state=f"{networks} converged (final loss < {threshold:g})",
        reason="App. B.1: \"Trials which did not converge were discarded\"; the claim is about the converged "
               f"structure, and {threshold:g} is the convergence threshold of every converged-trial gate of the topic")


def learnt(quantity: str, networks: str, fraction: float) -> Precondition:
    """The precondition of a claim about the structure a multi-point network learnt: every one of ``networks``
    brought its training loss below ``fraction`` of its initial value (state quantity: final / initial loss)."""
    return Precondition(
        quantity=quantity, expectation=at_most(fraction),
        state=f"{networks} learnt the task (final loss < {fraction:g} × initial)",
        reason="a network that has not learnt the task carries no learnt structure to compare; the threshold is the "
               "topic's 'learnt' gate (blobs: 5 % of the initial loss), fixed before any run")


def share_at_least(quantity: str, what: str, lo: float, reason: str) -> Precondition:
    """A precondition on a per-seed share (e.g. of a grid's trials that converged)."""
    return Precondition(quantity=quantity, expectation=at_least(lo), state=f"{what} ≥ {lo:g}", reason=reason)


def converged(loss: np.ndarray, threshold: float = CONVERGED_LOSS) -> np.ndarray:
    """Whether each member's final training loss (last row of a (T, K) loss array) is below ``threshold``; an
    untrained run (one recorded step) has not converged."""
    loss = np.asarray(loss)
    return (loss[-1] < threshold) & (loss.shape[0] > 1)


def gated(values: np.ndarray, ok: np.ndarray) -> list[float]:
    """``values`` where ``ok``, NaN elsewhere (a claim about a trained network says nothing about one that did not
    converge)."""
    return np.where(ok, np.asarray(values, dtype=float), np.nan).tolist()


DEFAULT_NETWORKS = "effective_theory.default_networks"
"""The run several experiments read (:attr:`RunSpec.shared`): ``networks`` default networks (Table 1's first row) on
one two-point dataset, every hidden layer recorded. depth analyses its members, control and init_scale (as gain 1.0)
the first ``trials`` of them: one training instead of three of the same setting."""


def default_networks(config: DefaultRunConfig) -> RunSpec:
    """The shared run of :data:`DEFAULT_NETWORKS` at ``config``'s settings; raises ConfigError when the config reads
    more trials than the ensemble has networks."""
    if config.trials > config.networks:
        raise ConfigError(f"trials = {config.trials} > networks = {config.networks}: the analysis reads the first "
                          "`trials` networks of the shared ensemble; raise networks")
    params = {name: getattr(config, name) for name in ("width", "depth", "steps", "time_compression", "record_every",
                                                       "dx", "dy", "networks")}
    return RunSpec("default_networks", params, shared=DEFAULT_NETWORKS)


def train_default_networks(params: Mapping[str, float], seed: int, device: str) -> dict:
    """Execute :func:`default_networks`' run: ``params["networks"]`` default networks (seeds seed, seed + 1, ...) as
    one ensemble, every hidden layer recorded (u: (T, networks, depth))."""
    arch = TABLE1["default"]
    k, depth = int(params["networks"]), int(params["depth"])
    lr = arch.lr * params["time_compression"]
    return train_two_point(activation=arch.activation, depth=depth, width=int(params["width"]), gains=[arch.gain] * k,
                           lrs=[lr] * k, seeds=[seed + i for i in range(k)], steps=int(params["steps"]),
                           record_every=int(params["record_every"]), dx=[params["dx"]] * k, dy=[params["dy"]] * k,
                           layers=[f"layer{i}" for i in range(depth)], device=device, generator_seed=seed)


class ReadsDefaultNetworks:
    """The runs of an experiment that reads only the shared :data:`DEFAULT_NETWORKS` run (control, depth)."""

    def prepare(self, config: DefaultRunConfig) -> None:
        default_networks(config)  # raises when trials > networks

    def runs(self, config: DefaultRunConfig) -> list[RunSpec]:
        return [default_networks(config)]

    def execute(self, config: DefaultRunConfig, run: RunSpec, seed: int, device: str) -> dict:
        return train_default_networks(run.params, seed, device)


def select_networks(result: Mapping[str, np.ndarray], members: range, layer: int | None = None
                    ) -> dict[str, np.ndarray]:
    """The ``members`` of a :func:`train_two_point` result (for a reader of the shared ensemble: its first
    ``trials``, fixed before any run); with ``layer``, u at that recorded layer only, as (T, members)."""
    member_axis = {"u": 1, "v": 1, "w": 1, "loss": 1, "ybar": 1, "X": 0, "Y": 0, "gains": 0, "lrs": 0, "flipped": 0}
    out = {name: np.take(value, members, axis=member_axis[name]) if name in member_axis else value
           for name, value in result.items()}
    if layer is not None:
        out["u"] = out["u"][:, :, layer]
    return out
