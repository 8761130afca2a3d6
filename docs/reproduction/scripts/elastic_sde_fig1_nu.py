"""Seed 004, Fig. 1 (b): the authors' projection direction against repdyn's, on a stored GeoMNIST run.

Reads the trained run of ``elastic_sde.geomnist`` from the store of ``repdyn reproduce --out OUT`` (the label
"replicates", not the untrained control) and writes each replicate's per-iteration log in the authors' layout (one
row per trial and iteration: trial, itr, y, y_logit0..2, as ``src/utils.py::train`` logs it). It builds the class
means as ``src/plotter.py::viz_sep_1d`` does (``groupby(['itr', 'y']).mean()`` reshaped to (T, 3, 3), for the last
two iterations) and the direction of the notebook's ``get_proj_vec(Xbar, 0, 1)`` (n_avg = 2). ``get_proj_vec`` is
defined in a cell of ``LE-SDE Data Analysis.ipynb``; the script executes that cell's source from the authors' folder
given by ``--le-sde`` (nothing of it is copied here). It prints, per replicate, the largest difference between that
ν and repdyn's ``separating_direction(xbar, 0, 1, last=2)``, and the claim's value on ν(0, 1).

    python docs/reproduction/scripts/elastic_sde_fig1_nu.py --le-sde PATH/le_sde --out OUT
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from repdyn.experiments.elastic_sde.common import split_replicates
from repdyn.experiments.elastic_sde.geomnist import _bands_overlap_left
from repdyn.runtime.store import ResultStore
from repdyn.theory import elasticity_estimators as ee


def authors_get_proj_vec(le_sde: Path):
    """``get_proj_vec`` from the notebook's cell that defines it, executed as the authors wrote it."""
    notebook = json.loads((le_sde / "LE-SDE Data Analysis.ipynb").read_text())
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    source = next(c for c in cells if c.lstrip().startswith("def get_proj_vec"))
    namespace = {"np": np}
    exec(source, namespace)  # noqa: S102 - the authors' own cell, from the folder the user gives
    return namespace["get_proj_vec"]


def authors_class_means(labels: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """viz_sep_1d's X_mat: the mean logit per (iteration, class) over the trials that drew that class."""
    import pandas as pd

    R, T = labels.shape
    frame = pd.DataFrame({"trial": np.repeat(np.arange(R), T), "itr": np.tile(np.arange(T), R),
                          "y": labels.reshape(-1)} | {f"y_logit{c}": logits[..., c].reshape(-1) for c in range(3)})
    df = frame.groupby(["itr", "y"]).mean().reset_index().sort_values(by=["itr", "y"])
    return np.array(df[[f"y_logit{c}" for c in range(3)]]).reshape(-1, 3, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--le-sde", type=Path, required=True, help="folder of the authors' repository")
    parser.add_argument("--out", type=Path, required=True, help="a `repdyn reproduce` output with elastic_sde.geomnist")
    args = parser.parse_args()
    if not (args.le_sde / "LE-SDE Data Analysis.ipynb").is_file():
        print(f"error: {args.le_sde}: no 'LE-SDE Data Analysis.ipynb'; give the le_sde repository folder",
              file=sys.stderr)
        return 2
    store = ResultStore(args.out / "runs")
    runs = [store.read(e, k) for e, k in store.stored_keys() if e == "elastic_sde.geomnist"]
    trained = [r for r in runs if r.meta["label"] == "replicates" and r.result["train_loss"][:, -1].mean() < 0.5]
    if not trained:
        print(f"error: {args.out}: no trained elastic_sde.geomnist run in its store", file=sys.stderr)
        return 2
    manifest = json.loads((args.out / "manifest.json").read_text())["experiments"]["elastic_sde.geomnist"]
    get_proj_vec = authors_get_proj_vec(args.le_sde)
    for i, part in enumerate(split_replicates(trained[0].result, manifest["seeds"], manifest["trials"])):
        labels, logits = part["label"].astype(int), part["logits"].astype(float)
        xbar = ee.fill_empty_cells(ee.class_mean_logits(labels, logits, 3))
        ours = ee.separating_direction(xbar, 0, 1, last=2)
        empty = int(np.isnan(ee.class_mean_logits(labels, logits, 3)[-2:, :, 0]).sum())
        # get_proj_vec reads the last n_avg = 2 rows of X_mat only; the authors' reshape needs every (itr, class)
        # cell present, which 100 trials give and 16 do not everywhere, so X_mat is built for those two iterations
        theirs = get_proj_vec(authors_class_means(labels[:, -2:], logits[:, -2:])) if empty == 0 else None
        diff = "n/a (a class not drawn in the last 2 iterations)" if theirs is None else \
            f"{np.abs(theirs - ours).max():.2e}"
        overlap = _bands_overlap_left(xbar, labels, logits, "0-1", 2)
        print(f"replicate {i}: max |ν_authors − ν_repdyn| = {diff}; claim value on ν(0, 1) = {overlap['left']:.4f} "
              f"(overlap {overlap['start']:.3f} → {overlap['end']:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
