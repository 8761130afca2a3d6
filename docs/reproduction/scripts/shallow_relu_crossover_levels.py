"""Seed 001, Fig. 5: the per-level evidence behind regime_crossover's verdicts, read from a stored reproduction.

Run first (any scale; the full scale adds the δ = +∞ runs trained on towards a fit):

    repdyn run shallow_relu.regime_crossover --scale quick --out OUT

then

    python docs/reproduction/scripts/shallow_relu_crossover_levels.py OUT

It prints, per δ level, the seed medians of D_shape, N_eff, K_ε, the end-of-training regime position q and the fit
residual rms/sep; per twin seed and level, |Δ| between the η and η/2 runs (same gradient-flow time) over the seed
spread of each shape measure; the Spearman correlations of D_shape and N_eff with the level on the η/2 twins; and
the converge runs' D and rms/sep. Nothing is recomputed: the stored runs are read as the analysis reads them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from repdyn.experiments.shallow_relu.common import lambda_labels
from repdyn.runtime.store import ResultStore

EXPERIMENT = "shallow_relu.regime_crossover"
MEASURES = ("D_shape", "N_eff", "K")


def per_seed(result: dict, key: str) -> np.ndarray:
    return np.asarray(result[key], dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the --out folder of a regime_crossover run")
    args = parser.parse_args()
    store = ResultStore(args.out / "runs")
    runs: dict[str, dict] = {}
    for experiment, key in store.stored_keys():
        if experiment != EXPERIMENT:
            continue
        stored = store.read(experiment, key)
        if stored.meta["config"]["max_steps"] == 0:
            continue  # the untrained control
        runs[stored.meta["label"]] = stored.result
    if not runs:
        raise SystemExit(f"no trained {EXPERIMENT} runs under {args.out}")
    sweep = [runs[k] for k in sorted(runs) if ":" not in k]
    lambdas = sweep[0]["lambdas"]
    labels = lambda_labels(lambdas)
    stat = {k: np.concatenate([per_seed(r, k) for r in sweep]) for k in (*MEASURES, "q", "fit", "D")}
    index = np.concatenate([r["seed_index"] for r in sweep])
    print(f"{len(index)} seeds; per level the seed median (and for q the range)")
    print("level      D_shape  N_eff    K_eps  q_end (min, max)          rms/sep  D")
    for i, lab in enumerate(labels):
        q = stat["q"][:, i]
        print(f"{lab:>8}  {np.median(stat['D_shape'][:, i]):7.3f}  {np.median(stat['N_eff'][:, i]):6.2f}  "
              f"{np.median(stat['K'][:, i]):6.3f}  {np.median(q):8.3g} ({q.min():.3g}, {q.max():.3g})  "
              f"{np.median(stat['fit'][:, i]):7.3g}  {np.median(stat['D'][:, i]):.3f}")
    if "seeds=0:half" in runs:
        half = runs["seeds=0:half"]
        rows = [int(np.flatnonzero(index == s)[0]) for s in half["seed_index"]]
        print("\nη/2 twins: |Δ| / seed spread per level (largest over the twins), and the largest |Δ|")
        for key in MEASURES:
            spread = np.maximum(np.ptp(stat[key], axis=0), 1e-3)
            delta = np.abs(stat[key][rows] - per_seed(half, key))
            print(f"  {key:8} ratio: " + ", ".join(f"{lab} {v:.2f}" for lab, v in zip(labels, (delta / spread).max(0))))
            print(f"  {key:8} |Δ|:   " + ", ".join(f"{lab} {v:.3g}" for lab, v in zip(labels, delta.max(0))))
        rank = np.arange(lambdas.size)
        for key in ("D_shape", "N_eff"):
            at_eta = [spearmanr(rank, stat[key][r])[0] for r in rows]
            at_half = [spearmanr(rank, v)[0] for v in per_seed(half, key)]
            print(f"  Spearman of {key} with the level per twin seed: η " + ", ".join(f"{v:.2f}" for v in at_eta)
                  + "; η/2 " + ", ".join(f"{v:.2f}" for v in at_half))
    converge = [runs[k] for k in sorted(runs) if k.endswith(":converge")]
    if converge:
        print("\nδ = +∞ trained on (converge runs), per seed:")
        for key in ("D", "fit", "D_shape", "N_eff", "K"):
            print(f"  {key:8} " + ", ".join(f"{v:.3g}" for r in converge for v in per_seed(r, key)[:, -1]))


if __name__ == "__main__":
    main()
