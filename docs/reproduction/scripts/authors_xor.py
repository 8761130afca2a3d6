"""Seed 000, Fig. 6 against the authors' own code: their XOR networks, judged as repdyn's xor experiment judges ours.

Runs the public code of van Rossem & Saxe (github.com/loekvanrossem/universality; pass its checkout with
``--authors``; nothing of it is copied here) the way experiments/XOR.ipynb does: a row of
experiments/model_settings/XOR.txt (rich, intermediate, lazy, shallow), their ``models.MLP`` built with ReLU (the
notebook passes ``torch.nn.functional.relu`` whatever the row says), Xavier-normal init at the row's gain, float32,
``nn.MSELoss()``, torch.optim.SGD at the row's rate for the row's epochs, batch size 100 over the 4 points (shuffled).
The read-out is the row's ``hidden_layer``.

Per trial it prints one JSON line: the final loss, the largest same-output-pair / mean cross-pair final squared
distance, the smallest same-pair final / initial distance, and the relative error of pairwise Eq. 10
(``repdyn.experiments.effective_theory.multipoint.pairwise_prediction`` from the network's own initial state, at
``--tau-ratio`` = τ_y/τ_h = η_h/η_y) against the final distances, as ``repdyn.experiments.effective_theory.xor``
computes them for its networks.

    python docs/reproduction/scripts/authors_xor.py --authors PATH --setting rich --tau-ratio R [--trials 3]
        [--seed 0] [--leaky]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from universality_checkout import settings_row, use_checkout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--authors", type=Path, required=True, help="checkout of loekvanrossem/universality")
    parser.add_argument("--setting", default="rich", help="row of experiments/model_settings/XOR.txt")
    parser.add_argument("--tau-ratio", type=float, required=True, help="τ_y/τ_h for Eq. 10 (> 0)")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="torch seed of trial k is seed + k")
    parser.add_argument("--leaky", action="store_true", help="leaky ReLU as Table 2 says, instead of the notebook's "
                                                             "ReLU")
    args = parser.parse_args()
    if args.tau_ratio <= 0 or args.trials < 1:
        raise SystemExit("error: --tau-ratio and --trials must be positive")
    use_checkout(args.authors)
    import models
    from preprocessing import Direct

    from repdyn.experiments.effective_theory.multipoint import pairwise, pairwise_prediction
    from repdyn.experiments.effective_theory.xor import kept_fraction, merge_ratios, relative_error

    row = settings_row(args.authors, "XOR.txt", args.setting)
    # XOR.ipynb's order of the points; repdyn's xor experiment pairs them the same way by output
    inputs = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=torch.float32)
    outputs = torch.tensor([[0], [1], [1], [0]], dtype=torch.float32)
    order = [0, 2, 1, 3]  # to repdyn's xor_data order (0,0), (1,0), (0,1), (1,1)
    data = torch.utils.data.TensorDataset(inputs, outputs)
    layer = int(row["hidden_layer"])
    for k in range(args.trials):
        torch.manual_seed(args.seed + k)
        model = getattr(models, row["model_type"])(
            encoding=Direct(), input_size=2, output_size=1, hidden_dim=int(row["P"]), n_hid_layers=int(row["L"]),
            device="cpu", init_std=float(row["gain"]),
            non_linearity=torch.nn.functional.leaky_relu if args.leaky else torch.nn.functional.relu)
        criterion = torch.nn.MSELoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=float(row["lr"]))
        loader = torch.utils.data.DataLoader(data, batch_size=100, shuffle=True)
        model.eval()
        with torch.no_grad():
            out0, acts0 = model(inputs)
        for _ in range(int(row["n_epochs"])):
            model.train_step(optimizer, criterion, loader)
        model.eval()
        with torch.no_grad():
            out1, acts1 = model(inputs)
            loss = criterion(torch.squeeze(out1), torch.squeeze(outputs)).item()
        h0 = acts0[layer].numpy()[order].astype(float)
        h1 = acts1[layer].numpy()[order].astype(float)
        y0 = out0.numpy()[order].astype(float)
        x, y = inputs.numpy()[order].astype(float), outputs.numpy()[order].astype(float)
        initial, final = pairwise(h0), pairwise(h1)
        predicted = pairwise_prediction(h0[None], y0[None], x, y, args.tau_ratio)[0]
        same, cross = merge_ratios(final)
        print(json.dumps({"setting": args.setting, "seed": args.seed + k, "relu": not args.leaky,
                          "final_loss_mse": loss, "same_over_cross_max": float(same.max() / cross),
                          "same_kept_min": kept_fraction(initial, final),
                          "eq10_relative_error": relative_error(final, predicted), "tau_ratio": args.tau_ratio}),
              flush=True)


if __name__ == "__main__":
    main()
