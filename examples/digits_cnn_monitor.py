"""A small CNN trained on scikit-learn's bundled digits in a plain PyTorch loop, with a repdyn Monitor attached.

    python examples/digits_cnn_monitor.py --out digits-monitor            # trains (~30 s on a CPU), writes
    repdyn analyze digits-monitor/monitor/digits_cnn.npz                   # the same report again, by hand

The only lines that concern the monitor are marked ``# monitor``: construct it before training (it checks the
layer names, the probe set and the labels there), call ``monitor.step(step)`` once per step before the update
(step 0 is the untrained model), save at the end (which records the trained model as step ``total_steps``).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn import functional as F

from repdyn.data.digits import load_digits
from repdyn.monitor import Monitor
from repdyn.monitor.report import write_monitor_report
from repdyn.nn.models.cnn import SmallCNN

PROBE_PER_CLASS = 20


@dataclass
class Run:
    model: SmallCNN
    monitor: Monitor | None
    test_accuracy: float
    steps: int


def digits_split(seed: int, device: str, probe_per_class: int = PROBE_PER_CLASS
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x_train, y_train, x_test, y_test): images (n, 1, 8, 8); the test set holds ``probe_per_class`` images of
    each digit (the monitor's probe set), drawn with ``seed``, the rest is training data."""
    images, labels = load_digits()
    x = torch.tensor(images, dtype=torch.float32).reshape(-1, 1, 8, 8)
    y = torch.tensor(labels)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    test = torch.cat([order[y[order] == c][:probe_per_class] for c in range(10)])
    train = order[~torch.isin(order, test)]
    return x[train].to(device), y[train].to(device), x[test].to(device), y[test].to(device)


def train(*, epochs: int = 30, batch_size: int = 32, lr: float = 0.05, seed: int = 0, device: str = "cpu",
          monitor: bool = True, probe_per_class: int = PROBE_PER_CLASS, pairs: int = 4) -> Run:
    """Train SmallCNN(1x8x8 -> conv16 -> conv32 -> 10) with SGD + momentum on the squared error ½‖f(x) − y‖² to
    one-hot targets (the loss of the two-point theory, Eq. (1) of seed 000)."""
    x_train, y_train, x_test, y_test = digits_split(seed, device, probe_per_class)
    generator = torch.Generator().manual_seed(seed)
    model = SmallCNN((1, 8, 8), [16, 32], 10, generator=generator).to(device)
    targets = F.one_hot(y_train, 10).float()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    per_epoch = math.ceil(len(y_train) / batch_size)
    total = epochs * per_epoch
    watcher = (Monitor(model, layers=["layer0", "layer1"], probe_inputs=x_test, labels=y_test,  # monitor
                       total_steps=total, pairs=pairs, loss_kind="squared_error", name="digits_cnn")
               if monitor else None)
    step = 0
    for _ in range(epochs):
        order = torch.randperm(len(y_train), generator=generator).to(device)
        for batch in order.split(batch_size):
            loss = 0.5 * (model(x_train[batch]) - targets[batch]).pow(2).sum(1).mean()
            if watcher is not None:
                watcher.step(step, loss)  # monitor: before the update; the loss is read only at recorded steps
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
    if watcher is not None:
        watcher.finish()  # monitor: the trained model, step `total` (save() would also do it)
    model.eval()
    with torch.no_grad():
        accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
    return Run(model=model, monitor=watcher, test_accuracy=accuracy, steps=total)


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("digits-monitor"))
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--probe-per-class", type=int, default=PROBE_PER_CLASS)
    parser.add_argument("--pairs", type=int, default=4, help="input pairs for the two-point measure")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args(argv)
    run = train(epochs=args.epochs, seed=args.seed, device=args.device, probe_per_class=args.probe_per_class,
                pairs=args.pairs)
    assert run.monitor is not None
    recording = run.monitor.save(args.out)  # monitor
    index = write_monitor_report(recording, args.out / "report")
    print(f"test accuracy {run.test_accuracy:.3f} after {run.steps} steps; recording {recording}; report {index}")
    return index


if __name__ == "__main__":
    main()
