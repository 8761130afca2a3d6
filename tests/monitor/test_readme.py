"""Every code block of the README's Monitor section, run in order in one namespace (the names it leaves to the
reader: a model, its data loader, loss and optimiser, a probe set, a tiny Hugging Face model and its Trainer
arguments, are made here), so the README cannot drift from the code."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from monitor_scripts import make

README = Path(__file__).resolve().parents[2] / "README.md"


def monitor_blocks() -> list[str]:
    text = README.read_text()
    section = text[text.index("The theories as instruments on your own model"):text.index("Leaky ResNet diagnostics")]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def _namespace() -> dict[str, object]:
    script = make("mlp")
    loader = DataLoader(TensorDataset(script.x, script.y), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    model = script.model
    with torch.no_grad():
        features = model[:2](script.probe_x)
    namespace = {"model": model, "loader": loader, "epochs": 2, "loss_fn": nn.functional.cross_entropy,
                 "optimizer": torch.optim.SGD(model.parameters(), lr=0.05), "x_probe": script.probe_x,
                 "y_probe": script.probe_y, "steps": 6, "batches": [(x, y) for _ in range(2) for x, y in loader],
                 "features": features, "labels": script.probe_y}
    try:
        from repdyn.monitor.integrations import _lightning

        namespace["pl"] = _lightning()
        import transformers
    except ImportError as error:
        pytest.skip(f"the README's framework block needs Lightning and transformers: {error}")
    config = transformers.BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16)
    namespace.update(transformers=transformers, hf_model=transformers.BertForSequenceClassification(config),
                     data=[{"input_ids": torch.tensor([1, 2, 3]), "labels": 0}],
                     args=transformers.TrainingArguments(output_dir="hf", report_to=[], use_cpu=True))
    return namespace


def test_every_monitor_snippet_of_the_readme_runs(tmp_path, monkeypatch):
    blocks = monitor_blocks()
    assert len(blocks) == 4
    monkeypatch.chdir(tmp_path)
    namespace = _namespace()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for block in blocks:
            exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    assert namespace["watched"].path.is_file() and namespace["path"].is_file()
    sweep = namespace["sweep"]
    assert len(sweep.runs) == 2 and set(sweep.frame.columns) == {"run", "step", "layer", "metric", "value"}
    callbacks = namespace["trainer"].callback_handler.callbacks  # the last trainer of the block: Hugging Face's
    assert any(type(c).__name__ == "RepdynMonitorCallback" for c in callbacks)
