"""Seed 000, Fig. 4 against the authors' own code: their digits networks, a random 0/1 pair each, fitted by their fit.

Trains the model class of van Rossem & Saxe (github.com/loekvanrossem/universality; pass its checkout with
``--authors``; nothing of it is copied here) the way experiments/mnist.ipynb does (their ``models.MLP``: Xavier-normal
weights at the gain, zero biases, leaky ReLU; ``0.5 * mse_loss``; ``torch.optim.SGD``; their ``train_step``), on the
data and at the settings of repdyn's ``effective_theory.digits`` full scale: the first ``--n-train`` images of
scikit-learn's 8 × 8 digits (the MNIST stand-in, read by ``repdyn.data.digits``), one-hot targets, full-batch steps.
Their criterion averages over the 10 outputs as well as the images, so their rate is repdyn's ``--lr`` × 10: the same
updates. Network k (torch seed ``--seed`` + k) tracks the 0/1 pair that repdyn's ``tracked_pair`` draws from the same
seed and records, every ``--record-every`` epochs, ‖dh‖² at the notebook's read-out layer (their
``activations[len(model) // 2]``), ‖dy‖² and w. Each trajectory is fitted twice: by their ``simulate.optimize_eta``
with the notebook's guesses (``logspace(-6, 1, 100)``) and repdyn's normalised Eq. 49 fit loss at their rates, and by
repdyn's own fit (``common.fit_member``), which is what ``digits.pair_fit`` reads. One JSON line per network, then
the medians.

    python docs/reproduction/scripts/authors_digits_pair.py --authors PATH [--networks 20] [--seed 0]

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
from universality_checkout import use_checkout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--authors", type=Path, required=True, help="checkout of loekvanrossem/universality")
    parser.add_argument("--networks", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="network k: torch seed and pair seed seed + k")
    parser.add_argument("--n-train", type=int, default=500)
    parser.add_argument("--width", type=int, default=100)
    parser.add_argument("--depth", type=int, default=4, help="hidden layers")
    parser.add_argument("--gain", type=float, default=0.5)
    parser.add_argument("--lr", type=float, default=0.5, help="repdyn's rate (½‖y − ŷ‖² averaged over images)")
    parser.add_argument("--epochs", type=int, default=800)
    parser.add_argument("--record-every", type=int, default=8)
    args = parser.parse_args()
    if min(args.networks, args.n_train, args.width, args.depth, args.epochs, args.record_every) < 1 or \
            args.gain <= 0 or args.lr <= 0:
        raise SystemExit("error: --networks, --n-train, --width, --depth, --epochs, --record-every must be >= 1 "
                         "and --gain, --lr > 0")
    use_checkout(args.authors)
    import models
    import simulate

    from repdyn.data.digits import load_digits, one_hot
    from repdyn.experiments.effective_theory.common import fit_member, relative_fit_loss
    from repdyn.experiments.effective_theory.digits import tracked_pair
    from repdyn.theory import effective_theory as et

    images, labels = load_digits(n=args.n_train)
    x = torch.as_tensor(images, dtype=torch.float32)
    y = torch.as_tensor(one_hot(labels), dtype=torch.float32)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=len(x), shuffle=True)
    criterion = lambda a, b: 0.5 * torch.nn.functional.mse_loss(a, b)  # noqa: E731 (the notebook's loss)
    Y = 2.0  # ‖y₁ − y₀‖² of two one-hot targets
    rows = []
    for k in range(args.networks):
        seed = args.seed + k
        torch.manual_seed(seed)
        model = models.MLP(input_size=x.shape[1], output_size=10, hidden_dim=args.width, n_hid_layers=args.depth,
                           device="cpu", init_std=args.gain)
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * y.shape[1])
        i0, i1 = tracked_pair(labels, seed)
        X = float(np.sum((images[i1] - images[i0]) ** 2))
        dy_true = (y[i1] - y[i0]).numpy()
        u, v, w, loss = [], [], [], []
        for epoch in range(args.epochs + 1):
            if epoch % args.record_every == 0 or epoch == args.epochs:
                model.eval()
                with torch.no_grad():
                    out, acts = model(x)
                    hidden = acts[len(model) // 2]
                    dy = (out[i1] - out[i0]).numpy()
                    u.append(float((hidden[i1] - hidden[i0]).pow(2).sum()))
                    v.append(float(np.sum(dy**2)))
                    w.append(float(np.sum(dy**2) - np.dot(dy_true, dy)))
                    loss.append(float(criterion(out, y)))
            if epoch < args.epochs:
                model.train_step(optimizer, criterion, loader)
        u, v, w = np.array(u), np.array(v), np.array(w)
        t = np.arange(u.size, dtype=float)
        ours = fit_member(t, u, v, w, X, Y)
        with contextlib.redirect_stdout(sys.stderr):  # it prints "Loss: ..."
            eta_h, eta_y, _ = simulate.optimize_eta(u, v, w, X, Y, guesses=np.logspace(-6, 1, 100))
        row = {"network": k, "pair": [i0, i1], "X": X, "final_over_initial_loss": loss[-1] / loss[0],
               "repdyn_fit_loss": ours.relative_loss, "their_rates": [float(eta_h), float(eta_y)]}
        grid = np.linspace(0, u.size, u.size)  # their time axis
        if eta_h > 0 and eta_y > 0:
            try:
                theirs = et.integrate_dynamics((u[0], v[0], w[0]), X, Y, eta_h, eta_y, grid)
                row["their_fit_loss"] = relative_fit_loss(theirs, grid, u, v, w)
            except (RuntimeError, ValueError, et.FitError) as err:
                row["their_fit_loss"] = f"integration failed: {err}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {"networks": len(rows)}
    for name in ("repdyn_fit_loss", "their_fit_loss"):
        values = [r[name] for r in rows if isinstance(r.get(name), float)]
        summary[f"median_{name}"] = float(np.median(values)) if values else None
        summary[f"{name}_above_0.2"] = int(sum(v > 0.2 for v in values))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
