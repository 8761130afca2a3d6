"""Seed 000, Figs. 8 and 13 against the authors' own code: their blob networks, judged as repdyn's blobs experiment
judges ours.

Runs the public code of van Rossem & Saxe (github.com/loekvanrossem/universality; pass its checkout with
``--authors``; nothing of it is copied here) the way experiments/orthogonal.ipynb does: a row of
experiments/model_settings/orthogonal.txt (high_init, low_init, vlow_init: tanh, 4 × 100, the row's gain and rate),
their ``models.MLP`` (Xavier-normal init at the row's gain, zero biases), float32, ½-MSE
(``0.5 * mse_loss``), torch.optim.SGD in shuffled minibatches of ``--batch`` (the notebook: 64; 0 = full batch).
The data is repdyn's ``context_blobs`` generator: ``--generator code`` is the notebook's (30 × 30 centres, σ = 1 in
[−1, 1] coordinates = 2 px on the 5 × 5 image, unit-sum images), ``--generator quick`` is the quick and full scales'
stand-in (10 × 10 centres, σ = 1 px, unnormalised); ``--grid`` overrides the number of centres per axis.
The read-out is the row's ``hidden_layer`` (2, the post-activation of the third hidden layer, repdyn's "layer2").

Per trial it prints one JSON line: the final ½-MSE, the final / initial loss, and the final / initial context
separation and irrelevant-to-relevant variance ratio (``repdyn.experiments.effective_theory.blobs``'s
``context_separation`` and ``irrelevant_ratio``), the quantities of claims two_lines and squares_high.

    python docs/reproduction/scripts/authors_blobs.py --authors PATH --setting low_init [--generator code]
        [--batch 64] [--lr-scale 1] [--epochs N] [--trials 3] [--seed 0]
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
    parser.add_argument("--setting", default="low_init", help="row of experiments/model_settings/orthogonal.txt")
    parser.add_argument("--generator", choices=("code", "quick"), default="code")
    parser.add_argument("--grid", type=int, default=0, help="blob centres per axis (0: the generator's)")
    parser.add_argument("--batch", type=int, default=64, help="SGD minibatch (0: full batch)")
    parser.add_argument("--lr-scale", type=float, default=1.0, help="the row's rate × this")
    parser.add_argument("--epochs", type=int, default=0, help="epochs (0: the row's)")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="torch seed of trial k is seed + k")
    args = parser.parse_args()
    if args.trials < 1 or args.lr_scale <= 0 or args.batch < 0 or args.epochs < 0 or args.grid < 0:
        raise SystemExit("error: --trials and --lr-scale must be positive, --batch, --epochs and --grid >= 0")
    use_checkout(args.authors)
    import models
    from preprocessing import Direct

    from repdyn.data.context_blobs import context_blobs
    from repdyn.experiments.effective_theory.blobs import context_separation, irrelevant_ratio

    row = settings_row(args.authors, "orthogonal.txt", args.setting)
    grid, sigma, normalise = (30, 2.0, True) if args.generator == "code" else (10, 1.0, False)
    data = context_blobs(args.grid or grid, sigma, normalise=normalise)
    inputs = torch.tensor(data.inputs, dtype=torch.float32)
    outputs = torch.tensor(data.targets, dtype=torch.float32)
    dataset = torch.utils.data.TensorDataset(inputs, outputs)
    batch = args.batch if 0 < args.batch < len(inputs) else len(inputs)
    layer = int(row["hidden_layer"])
    lr = float(row["lr"]) * args.lr_scale
    epochs = args.epochs or int(row["n_epochs"])
    criterion = lambda a, b: 0.5 * torch.nn.functional.mse_loss(a, b)  # noqa: E731 (the notebook's loss)

    def state(model) -> tuple[float, object]:
        """(½-MSE, read-out representation) of every point."""
        model.eval()
        with torch.no_grad():
            out, acts = model(inputs)
            return criterion(torch.squeeze(out), torch.squeeze(outputs)).item(), acts[layer].numpy().astype(float)

    for k in range(args.trials):
        torch.manual_seed(args.seed + k)
        model = getattr(models, row["model_type"])(
            encoding=Direct(), input_size=inputs.shape[1], output_size=1, hidden_dim=int(row["P"]),
            n_hid_layers=int(row["L"]), device="cpu", init_std=float(row["gain"]),
            non_linearity=getattr(torch.nn.functional, row["nonlinearity"]))
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True)

        loss0, h0 = state(model)
        for _ in range(epochs):
            model.train_step(optimizer, criterion, loader)
        loss1, h1 = state(model)
        print(json.dumps({"setting": args.setting, "generator": args.generator, "points": len(inputs),
                          "batch": batch, "lr": lr, "epochs": epochs, "seed": args.seed + k,
                          "final_loss": loss1, "loss_ratio": loss1 / loss0,
                          "context_separation_ratio": context_separation(h1, data) / context_separation(h0, data),
                          "irrelevant_ratio_ratio": irrelevant_ratio(h1, data) / irrelevant_ratio(h0, data)}),
              flush=True)


if __name__ == "__main__":
    main()
