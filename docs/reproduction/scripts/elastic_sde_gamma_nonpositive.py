"""Seed 004, §3's γ ≤ 0 sentence: separation at α − β > 0 > α + (K − 1)β, three simulators, draw by draw.

K = 3 classes of n = 20 particles in p = 3 dimensions, σ = 1, class centres N(0, I) plus 0.1 N(0, I) per particle
(as ``elastic_sde.synthetic``). Settings with the same α − β = 0.2 and α + 2β of either sign, (0.1, −0.1),
(0.15, −0.05), (0.2, 0), the mirrored (α ↔ β) ones, and (0.1, 0.15) (α < β, α + β/(K − 1) > 0). For each, the
pairwise-separability frequency (Definition C.1, LP) at t = 20, 35, 50 (separation still partial) and 200, and the
fraction of draws whose verdict is the same in all three equal-gap settings (the same random draws for each):

- ``exact``: repdyn's exact sampler of the l-model (H = I; ``theory.elastic_sde.sample_isotropic_exact``);
- ``em``: repdyn's Euler–Maruyama of Eq. (5), l-model, dt = 0.25 (``simulate_le_sde``, particles stepped);
- ``authors``: the authors' ``src/utils.py::fwd_euler`` (the L-model LE-ODE of the class means, step 1, drift / 3,
  its own N(0, σ_k²) initial class means), particles added as (C.12) prescribes: X_i^k(t) = X_i^k(0) + X̄^k(t) −
  X̄^k(0) + σ W_i^k(t). fwd_euler knows only the L-model (H̄^l = d_l d_lᵀ/‖d_l‖²), so it is the L-model's answer.

The authors' repository (github.com/zjiayao/le_sde) is imported from the folder given by ``--le-sde`` (it needs
numpy, torch, pandas and tqdm); nothing of it is copied here.

    python docs/reproduction/scripts/elastic_sde_gamma_nonpositive.py --le-sde PATH/le_sde \\
        [--runs 200 --seeds 5 --only exact,em,authors]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

import numpy as np

from repdyn.theory import elastic_sde as es

K, N, P, SIGMA = 3, 20, 3, 1.0
TIMES = (20, 35, 50, 200)
EQUAL_GAP = ((0.1, -0.1), (0.15, -0.05), (0.2, 0.0))
OTHERS = ((-0.1, 0.1), (-0.05, 0.15), (0.0, 0.2), (0.1, 0.15))


def initial(rng: np.random.Generator, runs: int) -> np.ndarray:
    return rng.standard_normal((runs, K, 1, P)) + 0.1 * rng.standard_normal((runs, K, N, P))


def verdicts(x: np.ndarray) -> np.ndarray:
    return np.array([es.pairwise_separable(xr) for xr in x])


def exact(a: float, b: float, t: float, runs: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, int(t)])
    x = es.sample_isotropic_exact(initial(rng, runs), lambda s: a * s, lambda s: b * s, SIGMA, t, rng)
    return verdicts(x)


def em(a: float, b: float, t: float, runs: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, int(t), 1])
    x, _ = es.simulate_le_sde(initial(rng, runs), a, b, es.isotropic_blocks(K, P), SIGMA, t, int(4 * t), rng,
                              method="particles")
    return verdicts(x)


PATHS: dict = {}


def authors(fwd_euler, a: float, b: float, t: float, runs: int, seed: int) -> np.ndarray:
    if (a, b, runs, seed) not in PATHS:          # one path to max(TIMES) per setting and seed; t reads a prefix
        np.random.seed(seed)  # noqa: NPY002 (fwd_euler draws its initial class means from np.random)
        with contextlib.redirect_stderr(io.StringIO()):
            PATHS[a, b, runs, seed] = fwd_euler(np.eye(3) * np.sqrt(3), runs, max(TIMES) + 1, lambda i: a,
                                                lambda i: b)                     # σ_k = ‖x0[k]‖/√3 = 1
    means = PATHS[a, b, runs, seed][:, : int(t) + 1]
    rng = np.random.default_rng([seed, int(t), 2])
    start, end = means[:, 0], means[:, -1]                                      # (runs, class, logit)
    x0 = start[:, :, None, :] + 0.1 * rng.standard_normal((runs, K, N, P))
    x = x0 + (end - start)[:, :, None, :] + SIGMA * np.sqrt(t) * rng.standard_normal(x0.shape)
    return verdicts(x)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--le-sde", type=Path, required=True, help="folder of the authors' repository (has src/)")
    parser.add_argument("--runs", type=int, default=200, help="draws per seed and setting")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--only", default="exact,em,authors", help="comma-separated simulators to run")
    args = parser.parse_args()
    unknown = [name for name in args.only.split(",") if name not in ("exact", "em", "authors")]
    if unknown:
        print(f"error: --only {','.join(unknown)}: choose from exact, em, authors", file=sys.stderr)
        return 2
    if not (args.le_sde / "src" / "utils.py").is_file():
        print(f"error: {args.le_sde}/src/utils.py not found: give the le_sde repository folder", file=sys.stderr)
        return 2
    sys.path.insert(0, str(args.le_sde))
    from src.utils import fwd_euler

    simulators = {"exact": exact, "em": em,
                  "authors": lambda a, b, t, r, s: authors(fwd_euler, a, b, t, r, s)}
    for name in args.only.split(","):
        sim = simulators[name]
        print(f"== {name}")
        for t in TIMES:
            per_setting = {ab: np.concatenate([sim(*ab, t, args.runs, s) for s in range(args.seeds)])
                           for ab in EQUAL_GAP + OTHERS}
            eq = np.stack([per_setting[ab] for ab in EQUAL_GAP])
            same = float(np.mean((eq == eq[0]).all(axis=0)))
            freqs = "  ".join(f"{ab}: {v.mean():.3f}" for ab, v in per_setting.items())
            print(f"t = {t:3d}  equal-gap draws agreeing {same:.3f}  frequencies {freqs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
