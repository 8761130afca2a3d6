"""The Monitor in one line: :func:`watch` (as ``wandb.watch``), and the defaults it and the framework callbacks
share when they are given nothing but the model: which layers to read (:func:`default_layers`) and a
class-balanced probe set drawn from the training data (:func:`probe_from_loader`).

    monitor = repdyn.watch(model, loader, total_steps=len(loader) * epochs, loss_kind="cross_entropy")
    for x, y in loader:                      # your loop, unchanged
        loss = loss_fn(model(x), y)
        optimizer.zero_grad(); loss.backward(); optimizer.step()
    # the recording is saved when the optimiser has made total_steps updates: repdyn analyze runs/monitor/*.npz

:func:`watch` counts the updates of the optimisers that step the model's parameters (a global
``torch.optim`` step pre-hook), records just before an update (the model of step t, so step 0 is the untrained
model), keeps the loss of a model whose output carries one (a Hugging Face output's ``.loss``), and saves into
``save_dir`` when ``total_steps`` updates are done (else at :meth:`Watched.close` or interpreter exit).
"""

from __future__ import annotations

import atexit
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from repdyn.monitor.monitor import Monitor, default_output

MAX_DEFAULT_LAYERS = 6
"""At most this many layers are read by default (spread evenly over the blocks found)."""
PROBE_SCAN_LIMIT = 20_000
"""At most this many dataset items are read to draw the probe set."""


def _has_params(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


def _spread(names: list[str], count: int = MAX_DEFAULT_LAYERS) -> list[str]:
    if len(names) <= count:
        return names
    picks = sorted({round(i * (len(names) - 1) / (count - 1)) for i in range(count)})
    return [names[i] for i in picks]


def default_layers(model: nn.Module) -> list[str]:
    """The layers a monitor reads when none are named: the blocks of the model's main stack.

    - the repeated blocks of a transformer (the largest ``nn.ModuleList`` of one block type, e.g.
      ``bert.encoder.layer.0 ...``, ``transformer.h.0 ...``, ``encoder.layers.0 ...``);
    - else the blocks of the longest ``nn.Sequential`` of one parametrised block type (a ResNet stage);
    - else the hidden representations of the ``nn.Sequential`` with most of them: the output of the module just
      before each of its parametrised children after the first, and its last module when that has no
      parameters (for ``Linear, ReLU, Linear, ReLU, Linear``: the two ReLUs).

    At most :data:`MAX_DEFAULT_LAYERS`, spread evenly. Raises ValueError when the model has neither."""
    lists = [(name, m) for name, m in model.named_modules()
             if isinstance(m, nn.ModuleList) and len(m) >= 2 and len({type(c) for c in m}) == 1
             and all(_has_params(c) for c in m)]
    if lists:
        name, blocks = max(lists, key=lambda item: len(item[1]))
        return _spread([f"{name}.{i}" if name else str(i) for i in range(len(blocks))])
    stacks = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Sequential) and len(m) >= 2]
    blocks = [(name, m) for name, m in stacks if len({type(c) for c in m}) == 1 and all(_has_params(c) for c in m)]
    if blocks:  # a stack of residual / conv blocks
        name, stack = max(blocks, key=lambda item: len(item[1]))
        return _spread([f"{name}.{child}" if name else child for child, _ in stack.named_children()])
    best: list[str] = []
    for name, stack in stacks:
        children = list(stack.named_children())
        hidden = [children[i - 1][0] for i in range(1, len(children)) if _has_params(children[i][1])]
        if not _has_params(children[-1][1]):
            hidden.append(children[-1][0])
        hidden = [f"{name}.{child}" if name else child for child in hidden]
        if len(hidden) > len(best):
            best = hidden
    if not best:
        raise ValueError(f"no layers to read found in {type(model).__name__} (no nn.Sequential of blocks, no "
                         "nn.ModuleList of transformer layers): pass layers=[...] (names of model.named_modules())")
    return _spread(best)


def _split(item: Any) -> tuple[Any, int]:
    """(model input, integer label) of one dataset item: ``(x, y)``, or a dict with a "labels" / "label" key."""
    if isinstance(item, Mapping):
        key = "labels" if "labels" in item else "label" if "label" in item else None
        if key is None:
            raise ValueError(f"a dict item needs a 'labels' (or 'label') entry for a class-balanced probe set, got "
                             f"keys {sorted(item)}")
        return {k: v for k, v in item.items() if k != key}, int(torch.as_tensor(item[key]))
    if isinstance(item, Sequence) and len(item) >= 2:
        return item[0], int(torch.as_tensor(item[1]))
    raise ValueError(f"dataset items must be (input, label) pairs or dicts with 'labels', got {type(item).__name__}")


def probe_from_loader(loader: Any, per_class: int = 8, classes: int | None = None) -> tuple[Any, Tensor]:
    """A class-balanced probe set (inputs, labels) of ``per_class`` items of every class, read from the
    DataLoader's dataset in index order (no random number is drawn, so training is unchanged) and collated by the
    loader's ``collate_fn``; ``classes`` (e.g. the model's output dimension) are the classes to fill (default:
    those found). Items are (input, label) pairs or dicts with a "labels" key (a Hugging Face dataset)."""
    dataset = getattr(loader, "dataset", loader)
    if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        raise ValueError("probe_from_loader needs a DataLoader over a map-style dataset (with __len__ and "
                         "__getitem__); pass probe_inputs= and labels= instead")
    taken: dict[int, list[int]] = {}
    wanted = None if classes is None else set(range(classes))
    tensors = getattr(dataset, "tensors", None)  # a TensorDataset: its labels at once
    labels_all = tensors[1].tolist() if isinstance(tensors, tuple) and len(tensors) >= 2 else None
    for i in range(min(len(dataset), PROBE_SCAN_LIMIT)):
        label = int(labels_all[i]) if labels_all is not None else _split(dataset[i])[1]
        if wanted is not None and label not in wanted:
            continue
        chosen = taken.setdefault(label, [])
        if len(chosen) < per_class:
            chosen.append(i)
        if wanted is not None and len(taken) == len(wanted) and all(len(v) == per_class for v in taken.values()):
            break
    if not taken:
        raise ValueError("no labelled items found in the loader's dataset")
    order = [i for rank in range(per_class) for label in sorted(taken) for i in taken[label][rank:rank + 1]]
    items = [_split(dataset[i]) for i in order]
    collate = getattr(loader, "collate_fn", None)
    if collate is None:
        from torch.utils.data import default_collate as collate
    if isinstance(items[0][0], Mapping):
        batch = collate([{**x, "labels": y} for x, y in items])
        batch = {k: v for k, v in batch.items() if k not in ("labels", "label")}
    else:
        batch = collate([(x, y) for x, y in items])[0]
    return batch, torch.tensor([y for _, y in items], dtype=torch.long)


def _output_dim(model: nn.Module, batch: Any) -> int | None:
    """The model's output dimension on two probe inputs (eval, no grad), or None when it cannot be read."""
    from repdyn.probes.batch import default_forward, take

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = default_output(default_forward(model, take(batch, slice(0, 2))))
        return int(out.shape[-1]) if isinstance(out, Tensor) and out.dim() == 2 else None
    except Exception:  # noqa: BLE001 - only a hint for the probe draw; the Monitor checks the model itself
        return None
    finally:
        model.train(was_training)


def monitor_for(model: nn.Module, loader: Any = None, layers: Any = None, probe_inputs: Any = None,
                labels: Any = None, *, probe_per_class: int = 8, **kwargs: Any) -> Monitor:
    """A Monitor with the defaults filled in: ``layers`` by :func:`default_layers`, the probe set (and its
    labels) drawn from ``loader`` by :func:`probe_from_loader` when ``probe_inputs`` is not given."""
    if layers is None:
        layers = default_layers(model)
    if probe_inputs is None:
        if loader is None:
            raise ValueError("give probe_inputs= (and labels=) or a DataLoader to draw a probe set from")
        first, _ = probe_from_loader(loader, per_class=1)
        probe_inputs, labels = probe_from_loader(loader, probe_per_class, classes=_output_dim(model, first))
    return Monitor(model, layers, probe_inputs, labels, **kwargs)


class Watched:
    """What :func:`watch` returns: the Monitor (``.monitor``), attached to the model's optimiser updates until
    :meth:`close`; ``.path`` is the saved recording once saved."""

    def __init__(self, monitor: Monitor, save_dir: str | os.PathLike[str]) -> None:
        self.monitor = monitor
        self.save_dir = Path(save_dir)
        self.path: Path | None = None
        self.updates = 0
        self._losses: list[Tensor] = []
        params = {id(p) for p in monitor.model.parameters()}
        self._params = params
        self._closed = False

        def before_update(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            if not any(id(p) in params for group in optimizer.param_groups for p in group["params"]):
                return
            closure = bool(args and callable(args[0])) or callable(kwargs.get("closure"))
            if closure and self._losses:  # the forward runs inside step(closure): these are the last step's
                self.monitor.log_loss(self.updates - 1, sum(self._losses) / len(self._losses))
                self._losses.clear()
            recorded = self.monitor.step(self.updates)
            if recorded and self._losses:
                self.monitor.log_loss(self.updates, sum(self._losses) / len(self._losses))
            self._losses.clear()
            self.updates += 1
            total = self.monitor.total_steps
            if total is not None and self.updates >= total:
                self.close()

        def keep_loss(module: nn.Module, args: Any, output: Any) -> None:
            loss = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
            if module.training and isinstance(loss, Tensor) and loss.dim() == 0:
                self._losses.append(loss.detach())  # a tensor: read with .item() only if this step is recorded

        self._handles = [register_optimizer_step_pre_hook(before_update),
                         monitor.model.register_forward_hook(keep_loss)]
        atexit.register(self.close)

    def close(self) -> Path | None:
        """Stop watching, record the trained model (step = updates made) and save; returns the path (None when
        nothing was recorded). Called by itself after ``total_steps`` updates and at interpreter exit."""
        if self._closed:
            return self.path
        self._closed = True
        for handle in self._handles:
            handle.remove()
        atexit.unregister(self.close)
        if not self.monitor._steps:
            warnings.warn(f"repdyn.watch: the model {type(self.monitor.model).__name__} was never updated by an "
                          "optimiser while watched: nothing recorded", stacklevel=2)
            return None
        self.monitor.finish(self.updates)
        self.path = self.monitor.save(self.save_dir)
        return self.path


def watch(model: nn.Module, loader: Any = None, *, layers: Any = None, probe_inputs: Any = None, labels: Any = None,
          total_steps: int | None = None, save_dir: str | os.PathLike[str] = "runs", probe_per_class: int = 8,
          **monitor_kwargs: Any) -> Watched:
    """Watch ``model`` while any loop trains it: one line, no change to the loop.

    Layers default to :func:`default_layers` (the blocks of a Sequential, the encoder layers of a transformer);
    the probe set to ``probe_per_class`` items of every class of ``loader``'s dataset (:func:`probe_from_loader`,
    no random number drawn). The Monitor records just before each update of an optimiser that holds the
    model's parameters (step 0 is the untrained model), keeps the training loss when the model's output carries
    it (``output.loss``), names the run ``<model class>-<date>-<time>`` (unique in ``save_dir``) and saves
    ``save_dir/monitor/<name>.npz`` after ``total_steps`` updates, at :meth:`Watched.close`, or at exit. Other
    keyword arguments are the :class:`~repdyn.monitor.Monitor`'s (``loss_kind``, ``measures``, ``name``, ...).

    Example: a loop of 20 updates, watched; the recording is saved after the last one.

        >>> import tempfile, torch, repdyn
        >>> from torch import nn
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> _ = torch.manual_seed(0)
        >>> x = torch.randn(64, 4)
        >>> loader = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=16)
        >>> model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> watched = repdyn.watch(model, loader, total_steps=20, save_dir=tempfile.mkdtemp(),
        ...                        loss_kind="cross_entropy")
        >>> for epoch in range(5):
        ...     for xb, yb in loader:
        ...         optimizer.zero_grad()
        ...         nn.functional.cross_entropy(model(xb), yb).backward()
        ...         optimizer.step()
        >>> path = watched.close()
        >>> path.parent.name, path.suffix
        ('monitor', '.npz')
    """
    monitor = monitor_for(model, loader, layers, probe_inputs, labels, probe_per_class=probe_per_class,
                          total_steps=total_steps, **monitor_kwargs)
    return Watched(monitor, save_dir)
