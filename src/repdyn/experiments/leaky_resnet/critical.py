"""The Hamiltonian mechanics of seed 002 on exact critical networks: discrete Leaky ResNets shot from a random
(A_0, B_1) so that every layer satisfies the stationarity equation W_l = L~ B_l sigma(A_{l-1})^T (no training).

These measure the part of the theory that does not depend on an optimiser reaching a critical point: the Hamiltonian
is conserved up to the first-order error of the discretisation (O(rho L~)), Theorem 4's identity holds at every layer,
and balancedness (Prop. 10) holds up to O(rho L~). The spread of h at each L is the yardstick against which the
flat-h claims on trained networks (leaky_resnet.structures) are judged."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure

from repdyn.experiments.leaky_resnet.common import NUMBER
from repdyn.framework.base import Analysis, Experiment, RunResult, RunSpec
from repdyn.framework.claims import ClaimSpec, InRange, Measured, at_most, values_text
from repdyn.framework.config import ConfigError, param
from repdyn.nn.progress import report
from repdyn.theory import leaky_resnet as lr

NO_PRECONDITION = ("not about a trained network: the networks are exact critical points built by shooting "
                   "(stationarity residual ~1e-14 by construction), no optimiser")
NO_CONTROL = ("no training: the network is critical by construction (shooting); the untrained-network contrast is "
              "the control of the same quantities in leaky_resnet.structures")


@dataclass(frozen=True)
class CriticalConfig:
    width: int = param(8, ge=2, help="w of the shot networks")
    n_points: int = param(12, ge=2, help="N: columns of A_0")
    ltilde: float = param(3.0, gt=0, help="effective depth")
    lam: float = param(0.002, gt=0, help="lambda (paper: 0.002)")
    momentum_scale: float = param(0.02, gt=0, help="size of the entries of B_1 (small: the backward step converges)")
    depths: tuple[int, ...] = param((25, 50, 100, 200), ge=2, help="L: doublings through the paper's 50")
    seeds: int = param(5, ge=1, help="independent (A_0, B_1) draws")


def _draw(config: CriticalConfig, seed: int, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed * 1000 + index)
    a0 = torch.randn(config.width, config.n_points, generator=generator, dtype=torch.float64)
    b1 = config.momentum_scale * torch.randn(config.width, config.n_points, generator=generator, dtype=torch.float64)
    return a0, b1


def _relative_spread(diag) -> float:
    """(max - min) of h_l over the size of the two terms of Eq. (1), 2/L~ (|L~/2 ||B sigma^T||^2| + |L~ <B, A>|)."""
    terms = diag.momentum_feature_norm**2 + (diag.h + diag.momentum_feature_norm**2).abs()
    return float((diag.h.max() - diag.h.min()) / terms.median())


PERTURBATIONS = tuple(float(e) for e in np.geomspace(1e-4, 3e-2, 25))
"""Relative sizes of the weight perturbation in :func:`stationarity_threshold` (a log grid, fixed)."""


def stationarity_threshold(depth: int, config: CriticalConfig | None = None) -> tuple[float, np.ndarray]:
    """The largest stationarity residual that still counts as "at a critical point" at ``rho L~ = L~ / depth``,
    derived from exact critical networks (the precondition threshold of the trained-network claims).

    For each draw of ``config`` (default: this experiment's quick configuration, L~ = 3), the exact critical network
    at ``depth`` equidistant layers is moved along one random direction (per layer a perturbation of relative size
    eps, on the grid :data:`PERTURBATIONS`), its momenta recomputed by backprop for the same target, and the median
    stationarity residual ``||W_l - L~ B_l sigma(A_{l-1})^T|| / ||W_l||`` and the relative spread of h (over the
    terms of Eq. 1) measured. A draw's threshold is the largest residual at which the spread of h is at most twice
    the exact network's own, i.e. the departure from criticality adds no more than the discretisation error at the
    same rho L~ (which every flat-h band already allows). Returns the median over draws and the per-draw values.
    """
    config = config or CriticalConfig()
    if depth <= config.ltilde:
        raise ConfigError(f"depth={depth} must exceed ltilde={config.ltilde:g} (rho L~ < 1)")
    rho = lr.equidistant_steps(depth)
    found = np.full(config.seeds, np.nan)
    for s in range(config.seeds):
        a0, b1 = _draw(config, 0, s)
        net = lr.shoot_critical_network(a0, b1, rho, config.ltilde, config.lam)
        target, n = net.target, config.n_points
        direction = torch.randn(net.weights.shape, generator=torch.Generator().manual_seed(99 + s),
                                dtype=torch.float64)
        size = torch.linalg.norm(net.weights, dim=(-2, -1), keepdim=True)
        direction = direction / torch.linalg.norm(direction, dim=(-2, -1), keepdim=True) * size
        exact = None
        for eps in (0.0, *PERTURBATIONS):
            weights = net.weights + eps * direction
            reps, momenta = lr.momenta_by_backprop(weights, rho, a0, config.ltilde,
                                                   lambda a, t=target, n=n: ((t - a) ** 2).sum() / n, config.lam)
            spread = _relative_spread(lr.layer_diagnostics(weights, rho, reps, momenta, config.ltilde, gamma0=1e-3))
            if exact is None:
                exact = spread
                continue
            if spread > 2 * exact:
                break
            found[s] = float(lr.stationarity_residual(weights, reps, momenta, config.ltilde).median())
    return float(np.median(found)), found


class CriticalNetworks(Experiment):
    name = "leaky_resnet.critical"
    title = "Exact critical Leaky ResNets (shooting): Hamiltonian conservation, Theorem 4 and balancedness"
    paper = NUMBER
    source = "§2.4 Eq. (1), Theorem 4, Prop. 10 (App. A.3)"
    Config = CriticalConfig
    claims = (
        ClaimSpec("critical_h_first_order",
                  "On exact critical networks the spread of h_l across layers halves when the steps halve (first "
                  "order in rho L~): spread(L) / spread(2L), median over the doublings, per draw",
                  "seed 002, §2.4", InRange(1.6, 2.4),
                  quote="The Hamiltonian is a conserved quantity, i.e. it is constant in",
                  band_reason="derived: the discrete (symplectic Euler) Hamiltonian drifts at first order in the "
                              "step, so the ratio is 2; +-0.4 allows the second-order term at the coarsest L",
                  no_control=NO_CONTROL, no_precondition=NO_PRECONDITION,
                  figure="critical_spread"),
        ClaimSpec("critical_h_flatter_than_energies",
                  "At the paper's L = 50 an exact critical network's h_l varies less across layers than the kinetic "
                  "energy and the gamma-COI: spread of h over the smaller of the two spreads, per draw",
                  "seed 002, §2.4, §3.1, Fig. 1c", at_most(1.0),
                  quote="the hamiltonian and stable Hamiltonian are not exactly constant, but it still varies "
                        "significantly less than the kinetic and potential energies",
                  band_reason="the paper's ordering (less than), no threshold of our own",
                  no_control=NO_CONTROL, no_precondition=NO_PRECONDITION,
                  figure="critical_spread"),
        ClaimSpec("critical_theorem4",
                  "Theorem 4's identity H = ||dA + gamma L~ B||^2/(2L~) - L~/2 ||A||^2 - gamma L~/2 ||B||^2 in every "
                  "layer of every shot network: largest relative residual",
                  "seed 002, Theorem 4", at_most(1e-8), exact=True,
                  quote="For any geodesic, we have",
                  band_reason="an identity at a critical point: rounding level in float64",
                  no_precondition=NO_PRECONDITION, figure="critical_spread"),
        ClaimSpec("critical_balancedness",
                  "Prop. 10 on exact critical networks: the balancedness gap sum_l | ||W_l||^2 - ||W_{l-1}||^2 - 2 L~ "
                  "rho_l ||b_l||^2 | / mean ||W_l||^2 vanishes at first order as the steps shrink: gap(L) / gap(2L), "
                  "median over the doublings, per draw",
                  "seed 002, Prop. 10 (App. A.3), erratum P5(f)", InRange(1.6, 2.4),
                  quote="At any critical … we have",
                  band_reason="derived: Prop. 10 is exact in the continuum and the discrete increments differ from "
                              "it at first order in rho L~, so the ratio is 2 (+-0.4 for higher orders)",
                  no_control=NO_CONTROL, no_precondition=NO_PRECONDITION,
                  figure="critical_spread"),
    )
    scales = {
        "smoke": CriticalConfig(width=5, n_points=6, depths=(25, 50, 100), seeds=3),
        "quick": CriticalConfig(),
        "full": CriticalConfig(),
        "paper": CriticalConfig(),
    }

    def prepare(self, config: CriticalConfig) -> None:
        if 50 not in config.depths:
            raise ConfigError(f"depths={config.depths}: must include the paper's L = 50")
        if min(config.depths) <= config.ltilde:
            raise ConfigError(f"depths={config.depths}: every L must exceed ltilde={config.ltilde:g} (rho L~ < 1)")

    def runs(self, config: CriticalConfig) -> list[RunSpec]:
        return [RunSpec("shots", {"depths": list(config.depths)})]

    def execute(self, config: CriticalConfig, run: RunSpec, seed: int, device: str) -> RunResult:
        spreads, relative, t4, balance, flat = (np.zeros((config.seeds, len(config.depths))) for _ in range(5))
        for s in range(config.seeds):
            a0, b1 = _draw(config, seed, s)
            for j, depth in enumerate(config.depths):
                report(s * len(config.depths) + j, config.seeds * len(config.depths))
                rho = lr.equidistant_steps(depth)
                net = lr.shoot_critical_network(a0, b1, rho, config.ltilde, config.lam)
                target, n = net.target, config.n_points
                reps, momenta = lr.momenta_by_backprop(net.weights, rho, a0, config.ltilde,
                                                       lambda a, t=target, n=n: ((t - a) ** 2).sum() / n, config.lam)
                diag = lr.layer_diagnostics(net.weights, rho, reps, momenta, config.ltilde, gamma0=1e-3)
                spreads[s, j] = float(diag.h.max() - diag.h.min())
                relative[s, j] = _relative_spread(diag)
                inner = slice(1, None)  # gamma blows up at A_0: the first layer is left out, as on trained nets
                flat[s, j] = float((diag.h[inner].max() - diag.h[inner].min()) / min(
                    diag.kappa[inner].max() - diag.kappa[inner].min(),
                    diag.coi_gamma[inner].max() - diag.coi_gamma[inner].min()))
                t4[s, j] = float(diag.theorem4_residual.max())
                increments, predicted = lr.discrete_balancedness(net.weights, rho, config.ltilde)
                balance[s, j] = float((increments - predicted).abs().sum() / (net.weights**2).sum((-1, -2)).mean())
        return {"spread": spreads, "relative_spread": relative, "theorem4_residual": t4, "balancedness_gap": balance,
                "flat_ratio": flat}

    def analyse(self, config: CriticalConfig, results: Mapping[str, RunResult]) -> Analysis:
        r = results["shots"]
        depths = list(config.depths)
        doublings = [(i, depths.index(2 * d)) for i, d in enumerate(depths) if 2 * d in depths]
        paper = depths.index(50)

        def doubling(values: np.ndarray) -> np.ndarray:
            if not doublings:
                return np.full(config.seeds, np.nan)
            return np.median([[values[s, i] / values[s, j] for i, j in doublings] for s in range(config.seeds)], 1)

        ratios = np.array([[r["spread"][s, i] / r["spread"][s, j] for i, j in doublings]
                           for s in range(config.seeds)])
        measured = {
            "critical_h_first_order": Measured(doubling(r["spread"]),
                                               "spread(L)/spread(2L) per draw and doubling: "
                                               + "; ".join(values_text(row) for row in ratios)),
            "critical_h_flatter_than_energies": Measured(r["flat_ratio"][:, paper],
                                                         "relative spread of h (over the terms of Eq. 1) per L, "
                                                         "mean over draws: " + ", ".join(
                                                             f"L={d}: {v:.3g}" for d, v in
                                                             zip(depths, r["relative_spread"].mean(0), strict=True))),
            "critical_theorem4": Measured(float(r["theorem4_residual"].max()), "largest over draws, layers and L"),
            "critical_balancedness": Measured(doubling(r["balancedness_gap"]),
                                              "gap per L (mean over draws): " + ", ".join(
                                                  f"L={d}: {v:.3g}" for d, v in
                                                  zip(depths, r["balancedness_gap"].mean(0), strict=True))),
        }
        metrics = [{"L": int(d), "rho_ltilde": config.ltilde / d,
                    "relative_spread_mean": float(r["relative_spread"][:, j].mean()),
                    "balancedness_gap_mean": float(r["balancedness_gap"][:, j].mean()),
                    "theorem4_residual_max": float(r["theorem4_residual"][:, j].max())} for j, d in enumerate(depths)]
        fig = Figure(figsize=(5, 3.6))
        ax = fig.subplots()
        steps = config.ltilde / np.asarray(depths)
        for s in range(config.seeds):
            ax.loglog(steps, r["relative_spread"][s], marker="o", lw=0.8, color="tab:blue")
        ax.loglog(steps, steps * r["relative_spread"][:, 0].mean() / steps[0], "k--", lw=1, label="first order")
        ax.set_xlabel("$\\rho\\tilde L$")
        ax.set_ylabel("spread of $h_\\ell$ / size of the terms")
        ax.set_title("exact critical networks", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        notes = ("Exact critical networks (shooting, float64): the spread of h_l relative to the terms of Eq. (1) is "
                 "the discretisation error a perfectly trained network would show at the same rho L~.")
        return Analysis(measured=measured, figures={"critical_spread": fig}, metrics=metrics, notes=notes)
