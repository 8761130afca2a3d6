"""Theorem 5's Gaussian case as a fit, and Fig. 4's all-layers variant at δ = −100: two variants of the kernel
regime of Fig. 4 (kept apart from ``kernel_spline`` so that each control reruns only its own run)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from repdyn.data.univariate import UNIVARIATE_SETS, univariate_samples
from repdyn.experiments.shallow_relu.common import FITTED, NUMBER, evaluate, hull, paired_base
from repdyn.framework.base import Analysis, Experiment, RunResult, RunSpec
from repdyn.framework.claims import ClaimSpec, Control, Measured, Precondition, at_most
from repdyn.framework.config import param
from repdyn.nn.full_batch_gd import train_full_batch_gd
from repdyn.nn.models.shallow_relu import ShallowReLUBatch, with_imbalance
from repdyn.theory import shallow_relu as sr
from repdyn.theory import shallow_relu_kernels as kr


@dataclass(frozen=True)
class KernelVariantsConfig:
    gaussian_width: int = param(25_000, ge=2, help="Theorem 5's Gaussian case: width of the train-only-c GD limit "
                                                   "with a, b ~ N(0, 1) (Fig. 3's m = 25000)")
    gaussian_init: bool = param(True, help="a, b ~ N(0, 1) in the Gaussian run (False: U(−1, 1), the control)")
    seeds: int = param(10, ge=1, help="initialisations of the Gaussian run")
    all_layers_width: int = param(2000, ge=2, help="width of the all-layers variant (Fig. 4's caption: δ = −100)")
    all_layers_delta: float = param(-100.0, help="δ_i of every neuron in the all-layers variant (Fig. 4 caption)")
    all_layers_seeds: int = param(5, ge=1, help="initialisations of the all-layers variant (one batch)")
    dataset: str = param("SQ10", choices=UNIVARIATE_SETS, help="Fig. 4's 10 points of a square wave")
    c_scale: float = param(1.0, gt=0, help="c⁰ = (c_scale/√m) U(−1, 1), paired (f_0 ≡ 0)")
    gd_steps: int = param(10_000, ge=1, help="GD steps of the all-layers run (kernel_spline's GD check)")
    lr_fraction: float = param(1.0, gt=0, lt=2, help="η = lr_fraction/λ_max(Θ_0), fixed over the run")


class KernelVariants(Experiment):
    name = "shallow_relu.kernel_variants"
    title = "Kernel-regime variants: Gaussian first layer (not a cubic spline) and all layers trained at δ = −100"
    paper = NUMBER
    source = "Theorem 5 (Gaussian case, erratum E9), Fig. 4 caption (δ = −100)"
    Config = KernelVariantsConfig
    scales = {"smoke": KernelVariantsConfig(seeds=3, gaussian_width=2000, all_layers_width=200, all_layers_seeds=3,
                                            gd_steps=500),
              "quick": KernelVariantsConfig(), "full": KernelVariantsConfig(), "paper": KernelVariantsConfig()}
    claims = (
        ClaimSpec("gaussian_not_spline_fit",
                  "a, b ~ N(0, 1), train only c to its GD limit at m = 25000: the share RMS(f − S_G)/(RMS(f − S_G) + "
                  "RMS(f − S_cub)), S_G the Gaussian (arc-cosine) kernel interpolant, which minimises ∫ f''²/ν with "
                  "Theorem 5's ν for the Gaussian (|a|³ weight, erratum E9), one value per seed",
                  "seed 001, Theorem 5 and §3.3", at_most(0.5),
                  quote="In particular, independent uniform initialization yields cubic splines, but radial "
                        "distributions, such as A, B being jointly Gaussian, don't",
                  band_reason="derived: the paper's statement is an ordering: below 1/2 the network is nearer the "
                              "Gaussian kernel's minimiser than the cubic spline",
                  control=Control("a, b ~ U(−1, 1) (the uniform case: the fit is the cubic spline)",
                                  {"gaussian_init": False}),
                  figure="kernel_variants",
                  preconditions=(Precondition(
                      quantity="gaussian_limit_fit", expectation=at_most(FITTED),
                      state="the exact train-only-c limit fits the targets",
                      reason="derived: the share compares f with two interpolants of the targets; a change of f of "
                             "RMS ε moves it by at most ε/RMS(S_G − S_cub) to first order, so a sample residual of "
                             "0.1 of that separation (the fitted criterion) keeps it within about 0.1"),)),
        ClaimSpec("all_layers_kernel",
                  "all layers trained at δ_i = −100 (the same initial neurons and function), 10000 GD steps at a "
                  "fixed η: RMS(f_all − f_c) / RMS(S_cub − S_lin), f_c the train-only-c network after the same steps "
                  "at the same η (exact, Eq. 22), one value per seed",
                  "seed 001, Fig. 4 caption and §4", at_most(0.10),
                  quote="is approximated by a neural network ($\\delta = -100$) while varying the number m of neurons",
                  band_reason="our choice, the 10 % of the cubic-to-linear separation used by "
                              "kernel_spline.cubic_at_largest_width: below it the two trainings give the same fit on "
                              "Fig. 4's scale",
                  control=Control("δ_i = −1 (first layer not dominant; 3 seeds): all layers move and the fit departs "
                                  "from the train-only-c one", {"all_layers_delta": -1.0, "all_layers_seeds": 3}),
                  figure="kernel_variants",
                  no_precondition="compares two trainings after the same GD steps at the same η, not an end state"),
    )

    def runs(self, config: KernelVariantsConfig) -> list[RunSpec]:
        # each claim's control changes one field and reruns only the run that field enters
        defaults = KernelVariantsConfig()
        if not config.gaussian_init:
            return [RunSpec("gaussian")]
        if config.all_layers_delta != defaults.all_layers_delta:
            return [RunSpec("all_layers")]
        return [RunSpec("gaussian"), RunSpec("all_layers")]

    def execute(self, config: KernelVariantsConfig, run: RunSpec, seed: int, device: str) -> RunResult:
        x, y = univariate_samples(config.dataset)
        rng = np.random.default_rng(seed)
        if run.label == "gaussian":
            return self._gaussian(config, x, y, rng)
        return self._all_layers(config, x, y, rng, device)

    def _gaussian(self, config: KernelVariantsConfig, x: np.ndarray, y: np.ndarray, rng: np.random.Generator
                  ) -> RunResult:
        """Theorem 5 with a, b ~ N(0, 1): the train-only-c GD limit against S_G, the minimiser of ∫ f''²/ν with
        ν = 2/(π(1 + u²)²) (the |a|³ weight, erratum E9; its Euler-Lagrange form is test T13), which is the
        arc-cosine-kernel interpolant, and against the natural cubic spline."""
        grid, cubic, _ = hull(x, y)
        s_g = kr.kernel_interpolant(kr.gaussian_rf_kernel, x, y)(grid)
        m = config.gaussian_width
        alpha = np.sqrt(m)
        to_g, to_cub, curves, residual = [], [], [], []
        for _ in range(config.seeds):
            half = rng.normal(size=(2, m // 2)) if config.gaussian_init else rng.uniform(-1, 1, (2, m // 2))
            c_half = config.c_scale * rng.uniform(-1, 1, m // 2) / alpha
            a, b, c0 = np.tile(half[0], 2), np.tile(half[1], 2), np.concatenate([c_half, -c_half])
            lam_max = np.linalg.eigvalsh(sr.tangent_kernel(x, a, b, c0, alpha, train_ab=False)).max()
            c = kr.output_weights_after_gd(x, y, a, b, c0, alpha, 1 / lam_max, np.inf)
            f = evaluate(grid, a[None], b[None], c[None], np.array([alpha]))[0]
            to_g.append(sr.rms_distance(f, s_g))
            to_cub.append(sr.rms_distance(f, cubic))
            residual.append(sr.rms_distance(sr.network(x, a, b, c, alpha), y))
            curves.append(f)
        return {"to_gaussian": np.array(to_g), "to_cubic": np.array(to_cub), "f": curves[0], "s_g": s_g,
                "fit": np.array(residual) / sr.rms_distance(s_g, cubic),
                "g_to_cubic": float(sr.rms_distance(s_g, cubic))}

    def _all_layers(self, config: KernelVariantsConfig, x: np.ndarray, y: np.ndarray, rng: np.random.Generator,
                    device: str) -> RunResult:
        """Fig. 4's caption: all layers trained at δ_i = δ (the same neurons (r_i, θ_i), hence the same f_0, as the
        train-only-c network), GD for gd_steps at η = lr_fraction/λ_max(Θ_0) fixed, against the exact
        train-only-c function after the same steps at the same η (Eq. 22, finite t)."""
        m = config.all_layers_width
        alpha = np.sqrt(m)
        bases = [paired_base(m, rng, config.c_scale) for _ in range(config.all_layers_seeds)]
        nets = [with_imbalance(base, config.all_layers_delta) for base in bases]
        batch = ShallowReLUBatch.stack(nets, [alpha] * len(nets), device=device)
        res = train_full_batch_gd(batch, x, y, max_steps=config.gd_steps, lr_fraction=config.lr_fraction, tol=0.0,
                                  lr_every=max(config.gd_steps, 1), record_every=max(config.gd_steps, 1))
        grid, cubic, linear = hull(x, y)
        f_all = evaluate(grid, *res.params, np.full(len(nets), alpha))
        gaps, d_all, d_c, curves = [], [], [], []
        for i, (a, b, c0) in enumerate(nets):
            lr = res.time[i] / max(res.steps[i], 1)
            c_t = kr.output_weights_after_gd(x, y, a, b, c0, alpha, lr, float(res.steps[i]))
            f_c = evaluate(grid, a[None], b[None], c_t[None], np.array([alpha]))[0]
            gaps.append(sr.rms_distance(f_all[i], f_c))
            d_all.append(sr.rms_distance(f_all[i], cubic))
            d_c.append(sr.rms_distance(f_c, cubic))
            curves.append(f_c)
        loss = res.trajectory["loss"]
        return {"gap": np.array(gaps), "d_cub_all": np.array(d_all), "d_cub_c": np.array(d_c),
                "f_all": f_all[0], "f_c": curves[0],
                "loss_ratio": loss[-1] / loss[0], "halved": res.lr_fraction < config.lr_fraction,
                "separation": float(sr.rms_distance(cubic, linear))}

    @staticmethod
    def _all_layers_measured(config: KernelVariantsConfig, al: RunResult) -> Measured:
        sep = al["separation"]
        return Measured(al["gap"] / sep, (
            f"m = {config.all_layers_width}, δ = {config.all_layers_delta:g}, {config.gd_steps} steps: L/L0 = "
            f"{np.median(al['loss_ratio']):.3g}; d_cub/sep of the all-layers network "
            f"{np.median(al['d_cub_all']) / sep:.3g}, of the train-only-c network "
            f"{np.median(al['d_cub_c']) / sep:.3g} (medians; neither has "
            f"converged: GD needs ~10⁶ steps on SQ10); step halvings: {int(np.sum(al['halved']))}"))

    @staticmethod
    def _gaussian_measured(config: KernelVariantsConfig, gs: RunResult, x: np.ndarray, y: np.ndarray) -> Measured:
        _, cubic, linear = hull(x, y)
        separation = sr.rms_distance(cubic, linear)
        return Measured(
            gs["to_gaussian"] / (gs["to_gaussian"] + gs["to_cubic"]),
            f"m = {config.gaussian_width}, {'Gaussian' if config.gaussian_init else 'uniform'} a, b: RMS(f − S_G) = "
            f"{np.median(gs['to_gaussian']):.3g}, RMS(f − S_cub) = {np.median(gs['to_cubic']):.3g} (medians); the "
            f"two limits differ by RMS(S_G − S_cub) = {gs['g_to_cubic']:.3g} = {gs['g_to_cubic'] / separation:.2f} "
            "RMS(S_cub − S_lin)")

    def analyse(self, config: KernelVariantsConfig, results: Mapping[str, RunResult]) -> Analysis:
        x, y = univariate_samples(config.dataset)
        grid, cubic, linear = hull(x, y)
        measured, states = {}, {}
        fig = Figure(figsize=(9, 3.4))
        ax_g, ax_a = fig.subplots(1, 2)
        for ax in (ax_g, ax_a):
            ax.plot(grid, cubic, color="tab:blue", lw=2, label="natural cubic spline")
            ax.plot(x, y, "x", color="tab:red")
        if "gaussian" in results:
            gs = results["gaussian"]
            measured["gaussian_not_spline_fit"] = self._gaussian_measured(config, gs, x, y)
            states["gaussian_limit_fit"] = Measured(gs["fit"], "sample residual RMS over RMS(S_G − S_cub)")
            ax_g.plot(grid, gs["s_g"], color="tab:purple", ls=":", lw=1.5, label="S_G (ν ∝ (1 + u²)⁻²)")
            ax_g.plot(grid, gs["f"], color="black", lw=1, label=f"network, m = {config.gaussian_width}")
        if "all_layers" in results:
            al = results["all_layers"]
            measured["all_layers_kernel"] = self._all_layers_measured(config, al)
            ax_a.plot(grid, al["f_all"], color="black", lw=1, label=f"all layers, δ = {config.all_layers_delta:g}")
            ax_a.plot(grid, al["f_c"], color="tab:green", ls="--", lw=1, label="train only c, same steps")
        ax_g.set_title("a, b ~ N(0, 1), train only c, GD limit", fontsize=9)
        ax_a.set_title(f"m = {config.all_layers_width}, {config.gd_steps} GD steps", fontsize=9)
        for ax in (ax_g, ax_a):
            ax.legend(fontsize=7)
        fig.tight_layout()
        return Analysis(measured, {"kernel_variants": fig}, [],
                        f"{config.dataset}, α = √m, c⁰ = U(±1)/√m paired (f_0 ≡ 0). S_G is the arc-cosine-kernel "
                        "interpolant: the minimiser of Theorem 5's ∫ f''²/ν with the Gaussian ν (test T13 checks its "
                        "Euler-Lagrange form; the paper's |a| weight fails it).", states=states)
