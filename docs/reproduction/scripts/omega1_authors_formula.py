"""ntk_pca.omega1_top against the authors' own formula: ``kernels.eigenvectors`` of mariogeiger/feature_lazy, branch
compressing_invariant_manifolds, imported from the folder the user names.

The script trains the stripe networks of the ntk_pca experiment with repdyn (quick scale by default: d = 10, p = 1000,
h = 100, α = 10⁻⁶, 4000 steps, dgrad threshold 10⁻², the six realisations of `repdyn reproduce --scale quick`, seed 0).
It then builds each trained network's NTK on the independent kernel set and on the training set, and prints mode 1's
share of the top ten modes' label projection, ω₁²/Σ_{r≤10} ω_r², in several readings:

* repdyn: ``repdyn.probes.kernel_pca`` (uncentred, descending, ω_r = v_r·y/√p), the claim's value;
* authors: ``eigenvectors(k, y)`` from the authors' kernels.py (uncentred ``symeig``, ascending, ω_r = v_r·y), ranked
  from the top (its last ten entries);
* authors, ascending: the same output read from the bottom (its first ten entries), the other possible indexing,
  and those ten modes' whole label projection as a fraction of ‖y‖² (bottom_ten_of_y2);
* centred: the same share for H K H, H = I − 11ᵀ/p. An exploratory reading chosen after the fact; it is not the
  released code's definition and not a claim;
* |v₁·1|/√p: how close the uncentred mode 1 is to the constant vector (1: constant).

Usage (the authors' checkout is only read; nothing of it is copied):

    git clone -b compressing_invariant_manifolds https://github.com/mariogeiger/feature_lazy AUTHORS
    PYTHONPATH=src python docs/reproduction/scripts/omega1_authors_formula.py --authors AUTHORS [--width 100]
        [--steps 4000] [--seeds 6] [--seed 0] [--at-t-star]

``symeig`` was removed from torch after 1.x; on such a torch the script gives ``Tensor.symeig`` the replacement that
torch's own error message names (``torch.linalg.eigh(A, UPLO='U')``, symeig's default ``upper=True``), so the authors'
function runs unchanged. Exit status 2 on bad input, before anything runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from repdyn.data.manifolds import sample_manifold
from repdyn.experiments.compression.common import generator, ntk_rows, train, trial_ntk
from repdyn.experiments.compression.ntk_pca import centred_shares
from repdyn.probes.kernel_pca import kernel_pca
from repdyn.runtime.store import derive_seed

N_MODES = 10


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--authors", required=True, help="folder of feature_lazy at compressing_invariant_manifolds")
    parser.add_argument("--width", type=int, default=100, help="hidden width h (quick: 100, paper: 10⁴)")
    parser.add_argument("--steps", type=int, default=4000, help="iteration cap of the training (quick: 4000)")
    parser.add_argument("--seeds", type=int, default=6, help="realisations, batched (quick: 6)")
    parser.add_argument("--seed", type=int, default=0, help="base seed of `repdyn reproduce` (quick: 0)")
    parser.add_argument("--at-t-star", action="store_true", help="the kernel of the network at t* (10 %% fitted) "
                        "instead of at the end of training")
    args = parser.parse_args(argv)
    kernels = Path(args.authors) / "kernels.py"
    if not kernels.is_file():
        parser.error(f"--authors {args.authors!r}: no kernels.py there (a checkout of feature_lazy at the branch "
                     "compressing_invariant_manifolds is needed)")
    if "def eigenvectors" not in kernels.read_text():
        parser.error(f"{kernels}: no eigenvectors function (wrong branch?)")
    if min(args.width, args.steps, args.seeds) < 1:
        parser.error("--width, --steps and --seeds must be positive")
    return args


def authors_eigenvectors(folder: str):
    """The authors' ``kernels.eigenvectors``, imported from their folder (with ``symeig`` restored if needed)."""
    probe = torch.eye(2, dtype=torch.float64)
    try:
        probe.symeig(eigenvectors=True)
    except (AttributeError, RuntimeError):
        torch.Tensor.symeig = lambda self, eigenvectors=False, upper=True: torch.linalg.eigh(
            self, UPLO="U" if upper else "L")
    sys.path.insert(0, str(Path(folder).resolve()))
    from kernels import eigenvectors  # the authors' module

    return eigenvectors


def shares(gram: torch.Tensor, y: torch.Tensor, eigenvectors) -> dict[str, float]:
    """Mode 1's share of the top ten modes' label projection, in each reading of the module docstring."""
    ours = kernel_pca(gram, y, N_MODES).fractions.cpu().numpy()
    _, proj, top = eigenvectors(gram.double(), y.double())
    proj = proj.numpy() ** 2
    centred = centred_shares(gram, y, N_MODES)
    v1 = top[:, -1].numpy()
    return {"repdyn": ours[0] / ours.sum(), "authors": proj[-1] / proj[-N_MODES:].sum(),
            "authors_ascending": proj[0] / proj[:N_MODES].sum(), "mode2_authors": proj[-2] / proj[-N_MODES:].sum(),
            "bottom_ten_of_y2": proj[:N_MODES].sum() / float((y.double() ** 2).sum()),
            "centred_exploratory": centred[0] / centred.sum(), "v1_dot_1": abs(v1.sum()) / np.sqrt(len(v1))}


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    eigenvectors = authors_eigenvectors(args.authors)
    d, p, alpha = 10, 1000, 1e-6
    gen = generator(derive_seed(args.seed, "compression.ntk_pca", f"p={p}"))  # the experiment's realisations
    x, y, _, res = train("stripe", d, p, args.seeds, args.width, alpha, 1e-2, 1.0, args.steps, gen, "cpu",
                         history=False)
    xk, yk = sample_manifold("stripe", p, d, gen, batch=(args.seeds,), device="cpu")
    rows = ntk_rows(args.width, p, 16.0)
    net = res.at_t_star if args.at_t_star else res.net
    print(f"stripe d = {d}, p = {p}, h = {args.width}, α = {alpha:g}, {args.steps} steps; t/t* per realisation "
          f"{np.round((res.t / res.t_star).numpy(), 2).tolist()}")
    keys = ("repdyn", "authors", "authors_ascending", "mode2_authors", "bottom_ten_of_y2", "centred_exploratory",
            "v1_dot_1")
    for name, (xs, ys) in (("kernel set", (xk, yk)), ("training set", (x, y))):
        table = np.array([[shares(trial_ntk(net, s, xs[s], xs[s], rows), ys[s], eigenvectors)[k] for k in keys]
                          for s in range(args.seeds)])
        kernel = "NTK at t*" if args.at_t_star else "final NTK"
        print(f"\n{kernel} on the {name}: mode 1's share of the top ten modes' label projection")
        print("realisation  " + "  ".join(f"{k:>19}" for k in keys))
        for s, row in enumerate(table):
            print(f"{s:>11}  " + "  ".join(f"{v:19.4f}" for v in row))
        print(f"{'median':>11}  " + "  ".join(f"{v:19.4f}" for v in np.median(table, 0)))
        print(f"max |repdyn − authors| = {np.abs(table[:, 0] - table[:, 1]).max():.2e}")


if __name__ == "__main__":
    main()
