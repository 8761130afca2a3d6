"""A 2-layer Transformer encoder on integer token ids, trained with AdamW and cross-entropy in a plain PyTorch loop,
with a repdyn Monitor attached at nested layer names (``encoder.layers.0``, ``encoder.layers.1``).

    python examples/transformer_monitor.py --out transformer-monitor     # trains (~10 s on a CPU), writes
    repdyn analyze transformer-monitor/monitor/transformer.npz           # the same report again, by hand

The task: a sequence of 12 tokens holds one "key" token (0-3) at a random position among noise tokens (4-15); the
class is the key, so the model has to attend to it. Lines that concern the monitor are marked ``# monitor``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from repdyn.monitor import Monitor
from repdyn.monitor.report import write_monitor_report

VOCAB, LENGTH, CLASSES = 16, 12, 4


class TokenTransformer(nn.Module):
    """Token and position embeddings -> nn.TransformerEncoder (2 layers) -> mean over tokens -> class logits."""

    def __init__(self, width: int = 32, heads: int = 4, layers: int = 2, dropout: float = 0.1) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.position = nn.Parameter(torch.randn(LENGTH, width) * 0.1)
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.head(self.encoder(self.embed(tokens) + self.position).mean(1))


def key_token_data(n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """(tokens (n, 12) int64, labels (n,)): noise tokens 4..15 with the key token (= the label) at a random place;
    the labels cycle through the classes, so every class has n/4 sequences."""
    labels = torch.arange(n) % CLASSES
    tokens = torch.randint(CLASSES, VOCAB, (n, LENGTH), generator=generator)
    tokens[torch.arange(n), torch.randint(0, LENGTH, (n,), generator=generator)] = labels
    return tokens, labels


@dataclass
class Run:
    model: TokenTransformer
    monitor: Monitor | None
    test_accuracy: float
    steps: int


def train(*, epochs: int = 10, batch_size: int = 32, lr: float = 3e-3, n_train: int = 2048, seed: int = 0,
          monitor: bool = True, probe_per_class: int = 20) -> Run:
    """Train TokenTransformer with AdamW on cross-entropy; the Monitor reads both encoder layers."""
    generator = torch.Generator().manual_seed(seed)
    x_train, y_train = key_token_data(n_train, generator)
    x_probe, y_probe = key_token_data(CLASSES * probe_per_class, generator)
    torch.manual_seed(seed)
    model = TokenTransformer()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    total = epochs * ((n_train + batch_size - 1) // batch_size)
    watcher = (Monitor(model, ["encoder.layers.0", "encoder.layers.1"], x_probe, y_probe,  # monitor
                       total_steps=total, loss_kind="cross_entropy", name="transformer")
               if monitor else None)
    step = 0
    for _ in range(epochs):
        for batch in torch.randperm(n_train, generator=generator).split(batch_size):
            loss = F.cross_entropy(model(x_train[batch]), y_train[batch])
            if watcher is not None:
                watcher.step(step, loss)  # monitor: before the update; the loss is read only at recorded steps
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
    if watcher is not None:
        watcher.finish()  # monitor: the trained model, step `total`
    model.eval()
    with torch.no_grad():
        accuracy = float((model(x_probe).argmax(1) == y_probe).float().mean())
    return Run(model=model, monitor=watcher, test_accuracy=accuracy, steps=total)


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("transformer-monitor"))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--n-train", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    run = train(epochs=args.epochs, n_train=args.n_train, seed=args.seed)
    assert run.monitor is not None
    recording = run.monitor.save(args.out)  # monitor
    index = write_monitor_report(recording, args.out / "report")
    print(f"probe accuracy {run.test_accuracy:.3f} after {run.steps} steps; recording {recording}; report {index}")
    return index


if __name__ == "__main__":
    main()
