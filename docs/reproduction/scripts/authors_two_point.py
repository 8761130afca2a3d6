"""Seed 000 against the authors' own code: train their two-point networks and fit Eq. 7 with their fit and ours.

Runs the public code of van Rossem & Saxe (github.com/loekvanrossem/universality; pass its checkout with
``--authors``; nothing of it is copied here) the way experiments/2_points.ipynb and rich_structure.ipynb do: a row of
experiments/model_settings/"2 points.txt", their ``two_points.data_set`` (float32), their model class with its Xavier
init, ½·MSELoss, torch.optim.SGD at the row's rate × ``--lr-scale`` (the notebooks: ½) for the row's epochs ×
``--epochs-scale`` (2), batch size 100 over the two points. Per epoch (before the step, as their trackers do) it
records ‖dh‖², ‖dy‖², w at the read-out layer (the row's ``hidden_layer`` unless ``--layers``) and the loss.

Per trial it prints one JSON line: the epoch at which the loss first falls below Y/16 (escape from the plateau Y/8),
the final loss, their fitted (η_h, η_y) from ``simulate.optimize_eta`` (``--their-fit``; slow) and repdyn's
normalised Eq. 49 fit loss with its own fitted rates (``repdyn.experiments.effective_theory.common.fit_member``),
the plateau fraction (``common.plateau_fraction``, the quantity of the plateau claims) and, with ``--their-fit``, the
fit loss at their rates. ``--out DIR`` also writes the trajectories (trial<k>.npz).

    python docs/reproduction/scripts/authors_two_point.py --authors PATH [--setting default] [--dx2 0.25 --dy2 1]
        [--trials 5] [--seed 0] [--layers all] [--lr-scale 1 --epochs-scale 1] [--width 64] [--their-fit] [--out DIR]

numba (which their simulate.py imports) is replaced by a no-op ``njit`` when it is not installed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import numpy as np
import torch
from universality_checkout import settings_row, use_checkout


def import_authors(path: Path):
    """Their source/ modules (models, two_points, simulate)."""
    use_checkout(path)
    import models
    import simulate
    import two_points
    return models, two_points, simulate


def train_trial(models, two_points, row: dict, dx2: float, dy2: float, seed: int, lr_scale: float,
                epochs_scale: float, layers: list[int]) -> dict:
    torch.manual_seed(seed)
    data, encoding = two_points.data_set(dx2, dy2, 1, 1, "cpu")
    nonlinearity = None if row["nonlinearity"] == "none" else getattr(torch.nn.functional, row["nonlinearity"])
    model = getattr(models, row["model_type"])(encoding=encoding, input_size=1, output_size=1,
                                               hidden_dim=int(row["P"]), n_hid_layers=int(row["L"]), device="cpu",
                                               init_std=float(row["gain"]), non_linearity=nonlinearity)
    criterion = lambda x, y: 0.5 * torch.nn.functional.mse_loss(x, y)  # noqa: E731 (the notebooks' loss)
    optimizer = torch.optim.SGD(model.parameters(), lr=float(row["lr"]) * lr_scale)
    loader = torch.utils.data.DataLoader(data, batch_size=100, shuffle=True)
    x, y = data.tensors
    epochs = int(round(int(row["n_epochs"]) * epochs_scale))
    u, v, w, loss = [], [], [], []
    dy_true = (y[1] - y[0]).numpy()
    for _ in range(epochs + 1):
        model.eval()
        with torch.no_grad():
            out, acts = model(x)
            hidden = [(acts[k][1] - acts[k][0]).pow(2).sum().item() for k in layers]
            dy = (out[1] - out[0]).numpy()
            loss.append(criterion(torch.squeeze(out), torch.squeeze(y)).item())
        u.append(hidden)
        v.append(float(np.sum(dy**2)))
        w.append(float(np.sum(dy**2) - np.dot(dy_true, dy)))
        if len(loss) <= epochs:
            model.train_step(optimizer, criterion, loader)
    return {"u": np.array(u), "v": np.array(v), "w": np.array(w), "loss": np.array(loss)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--authors", type=Path, required=True, help="checkout of loekvanrossem/universality")
    parser.add_argument("--setting", default="default", help="row of experiments/model_settings/'2 points.txt'")
    parser.add_argument("--dx2", type=float, help="squared input distance (default: the row's; the text: 0.25)")
    parser.add_argument("--dy2", type=float, help="squared target distance (default: the row's; the text: 1)")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="torch seed of trial k is seed + k")
    parser.add_argument("--lr-scale", type=float, default=0.5, help="2_points.ipynb: ½ (2_points_depth: 1)")
    parser.add_argument("--epochs-scale", type=float, default=2.0, help="2_points.ipynb: 2 (2_points_depth: 1)")
    parser.add_argument("--layers", default="", help="'all' or comma-separated hidden-layer indices (default: the "
                                                     "row's hidden_layer)")
    parser.add_argument("--width", type=int, default=0, help="hidden units (0: the row's P)")
    parser.add_argument("--their-fit", action="store_true", help="also run simulate.optimize_eta (slow)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.trials < 1 or args.lr_scale <= 0 or args.epochs_scale <= 0 or args.width < 0:
        raise SystemExit("error: --trials, --lr-scale and --epochs-scale must be positive, --width >= 0")
    models, two_points, simulate = import_authors(args.authors.resolve())
    from repdyn.experiments.effective_theory.common import fit_member, plateau_fraction, relative_fit_loss
    from repdyn.theory import effective_theory as et

    row = settings_row(args.authors, "2 points.txt", args.setting)
    if args.width:
        row["P"] = args.width
    dx2 = float(row["dx2"]) if args.dx2 is None else args.dx2
    dy2 = float(row["dy2"]) if args.dy2 is None else args.dy2
    n_layers = int(row["L"])
    layers = (list(range(n_layers)) if args.layers == "all" else
              [int(a) for a in args.layers.split(",")] if args.layers else [int(row["hidden_layer"])])
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    for k in range(args.trials):
        res = train_trial(models, two_points, row, dx2, dy2, args.seed + k, args.lr_scale, args.epochs_scale, layers)
        t = np.arange(res["loss"].size, dtype=float)
        below = np.nonzero(res["loss"] < dy2 / 16)[0]
        record = {"setting": args.setting, "dx2": dx2, "dy2": dy2, "seed": args.seed + k,
                  "width": int(row["P"]), "lr": float(row["lr"]) * args.lr_scale, "epochs": int(t[-1]),
                  "escape_epoch": int(below[0]) if below.size else None, "final_loss": float(res["loss"][-1]),
                  "layers": {}}
        for j, layer in enumerate(layers):
            u = res["u"][:, j]
            member = fit_member(t, u, res["v"], res["w"], dx2, dy2)
            entry = {"repdyn_fit_loss": member.relative_loss,
                     "repdyn_rates": [member.fit.rate_h, member.fit.rate_y] if member.fit else None,
                     "u0": float(u[0]), "u_final": float(u[-1]), "plateau_fraction": plateau_fraction(t, u)}
            if args.their_fit:
                with contextlib.redirect_stdout(sys.stderr):  # it prints "Loss: ..."
                    eta_h, eta_y, their_loss = simulate.optimize_eta(u, res["v"], res["w"], dx2, dy2,
                                                                     guesses=np.logspace(-6, 2, 100))
                entry.update(their_rates=[float(eta_h), float(eta_y)], their_fit_loss=float(their_loss))
                try:
                    theory = et.integrate_dynamics((u[0], res["v"][0], res["w"][0]), dx2, dy2, eta_h, eta_y, t)
                    entry["repdyn_fit_loss_at_their_rates"] = relative_fit_loss(theory, t, u, res["v"], res["w"])
                except (RuntimeError, ValueError) as err:
                    entry["repdyn_fit_loss_at_their_rates"] = f"integration failed: {err}"
            record["layers"][str(layer)] = entry
        print(json.dumps(record), flush=True)
        if args.out:
            np.savez(args.out / f"trial{k}.npz", t=t, layers=np.array(layers), **res)


if __name__ == "__main__":
    main()
