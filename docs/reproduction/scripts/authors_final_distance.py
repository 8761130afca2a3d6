"""Seed 000, Fig. 5 and App. A.6 against the authors' own code: their two-point networks, judged as repdyn's
final_distance experiment judges ours.

Runs the public code of van Rossem & Saxe (github.com/loekvanrossem/universality; pass its checkout with
``--authors``; nothing of it is copied here) the way experiments/rich_structure.ipynb builds its networks: the default
row of experiments/model_settings/"2 points.txt" (20 hidden layers, leaky ReLU, Xavier-normal gain 1, zero biases),
their ``two_points.data_set`` (inputs −1, −1 + dx; targets 0.6, 0.6 + dy), float32, ½-MSE (``0.5 * mse_loss``),
torch.optim.SGD on the full batch of 2 (their ``train_step`` with a DataLoader of batch 100), read-out
``hidden_layer`` = 10. The protocol is repdyn's, at the settings given: per repetition ``--fit-trials`` networks at
the code's data (dx = 1, dy = √0.5) and a ``--grid`` × ``--grid`` sweep of dx ∈ [0.5, 1.5], dy ∈ [0, 1], all at
``--width`` units, rate ``--lr`` for ``--steps`` steps, (‖dh‖², ‖dŷ‖², w, loss) recorded every ``--record-every``
steps. The trajectories go through ``repdyn.experiments.effective_theory.final_distance.FinalDistance.analyse``
unchanged (the Eq. 7 fits, the averaged rates, Eq. 10, the 1e-2 / 1e-3 discards, Eq. 47), so the printed JSON has
the per-repetition values of claims slope, r2, merge, converged and random_features and the analysis notes.

The defaults are the quick scale's settings (width 64, lr 0.005 × 11.71875, 2000 steps, 3 fit trials, a 3 × 3 grid,
3 repetitions); rich_structure.ipynb's own protocol (width 500, 50 fit trials at lr / 2 for 6000 epochs, the grid at
lr / 5 for up to 40 000 epochs) is beyond a CPU budget.

    python docs/reproduction/scripts/authors_final_distance.py --authors PATH [--width 64] [--lr 0.05859375]
        [--steps 2000] [--record-every 10] [--fit-trials 3] [--grid 3] [--repeats 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from universality_checkout import settings_row, use_checkout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--authors", type=Path, required=True, help="checkout of loekvanrossem/universality")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.005 * 11.71875)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--record-every", type=int, default=10)
    parser.add_argument("--fit-trials", type=int, default=3)
    parser.add_argument("--grid", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="torch seed of network i of repetition r is "
                                                            "seed + 1000 r + i")
    args = parser.parse_args()
    if min(args.width, args.steps, args.record_every, args.fit_trials, args.repeats) < 1 or args.grid < 2 \
            or not args.lr > 0 or args.steps % args.record_every:
        raise SystemExit("error: --width, --steps, --record-every, --fit-trials, --repeats must be >= 1, --grid >= 2, "
                         "--lr > 0, and --record-every must divide --steps")
    use_checkout(args.authors)
    import models
    import two_points

    from repdyn.data.two_points import CODE_DX, CODE_DY
    from repdyn.experiments.effective_theory.final_distance import FinalDistance, FinalDistanceConfig, grid_points

    row = settings_row(args.authors, "2 points.txt", "default")
    layer = int(row["hidden_layer"])
    config = FinalDistanceConfig(width=args.width, steps=args.steps, time_compression=args.lr / 0.005,
                                 record_every=args.record_every, fit_trials=args.fit_trials, grid=args.grid,
                                 repeats=args.repeats, run_per_repeat=True, architectures=("default",))
    experiment = FinalDistance()
    grid_dx, grid_dy = grid_points(args.grid)
    dxs = np.concatenate([np.full(args.fit_trials, CODE_DX), grid_dx])
    dys = np.concatenate([np.full(args.fit_trials, CODE_DY), grid_dy])
    criterion = lambda a, b: 0.5 * torch.nn.functional.mse_loss(a, b)  # noqa: E731 (the notebooks' loss)

    def state(model, data) -> tuple[float, float, float, float]:
        """(‖dh‖², ‖dŷ‖², w, ½-MSE) as two_points.get_h_y_w and the notebooks' loss tracker compute them."""
        h, y, w = two_points.get_h_y_w(data, model, layer)
        with torch.no_grad():
            out, _ = model(data.tensors[0])
            loss = criterion(torch.squeeze(out), torch.squeeze(data.tensors[1])).item()
        return float(h), float(y), float(w), loss

    results = {}
    for r, run in enumerate(experiment.runs(config)):
        records = []
        for i, (dx, dy) in enumerate(zip(dxs, dys, strict=True)):
            torch.manual_seed(args.seed + 1000 * r + i)
            data, encoding = two_points.data_set(dx**2, dy**2, 1, 1, "cpu")
            model = models.MLP(encoding=encoding, input_size=1, output_size=1, hidden_dim=args.width,
                               n_hid_layers=int(row["L"]), device="cpu", init_std=float(row["gain"]),
                               non_linearity=getattr(torch.nn.functional, row["nonlinearity"]))
            optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
            loader = torch.utils.data.DataLoader(data, batch_size=100, shuffle=True)
            trace = [state(model, data)]
            for step in range(1, args.steps + 1):
                model.train_step(optimizer, criterion, loader)
                if step % args.record_every == 0:
                    trace.append(state(model, data))
            records.append(np.array(trace))
        traces = np.stack(records, axis=1)  # (T, K, 4)
        results[run.label] = {"steps": np.arange(traces.shape[0], dtype=float) * args.record_every,
                              "u": traces[:, :, 0:1], "v": traces[:, :, 1], "w": traces[:, :, 2],
                              "loss": traces[:, :, 3], "X": dxs**2, "Y": dys**2}
    analysis = experiment.analyse(config, results)
    print(json.dumps({"width": args.width, "lr": args.lr, "steps": args.steps, "fit_trials": args.fit_trials,
                      "grid": args.grid, "repeats": args.repeats, "seed": args.seed,
                      **{claim: [float(v) for v in measured.values] for claim, measured in analysis.measured.items()},
                      "notes": analysis.notes}, ensure_ascii=False))


if __name__ == "__main__":
    main()
