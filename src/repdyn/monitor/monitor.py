"""The Monitor: attach the theories' measurements to any ``torch.nn.Module`` trained in an ordinary loop.

Usage (see examples/digits_cnn_monitor.py)::

    monitor = Monitor(model, layers=["layer0", "layer1"], probe_inputs=x_probe, labels=y_probe, total_steps=n,
                      loss_kind="cross_entropy")
    for step in range(n):
        loss = loss_fn(model(x), y)
        monitor.step(step, loss)     # before the update: step 0 is the untrained model; the loss is kept
        optimizer.zero_grad(); loss.backward(); optimizer.step()
    path = monitor.save("runs")      # records the trained model as step n, then runs/monitor/<name>.npz

A measure that fails at a recorded step is recorded as NaN with a :class:`MeasureFailedWarning`; ``step``,
``finish`` and ``save`` never raise into the training loop (the constructor raises ValueError for bad input).

At a recorded step the monitor runs the probe set through the model in eval mode under ``torch.no_grad()``
(the module's mode is restored), reads the named layers with temporary forward hooks, and copies what it
measures to NumPy: it holds no autograd graph, adds no hook between recordings, and does not touch parameters,
gradients, buffers or any random-number generator, so training is the same with and without it. (The optional
hamiltonian measure differentiates the cost with respect to the layer outputs and the parameters without
writing ``.grad``, and frees that graph before returning.) Everything that can be derived from the recorded
outputs (class-mean logits, elasticity estimates, separability, collapse of the logits) is left to the analysis
(:mod:`repdyn.monitor.analysis`), off the training path.

Any model: probe inputs may be float tensors, integer token ids or dict batches (:mod:`repdyn.probes.batch`);
``forward_fn(model, batch)`` and ``output_fn(output)`` adapt how the model is called and which tensor is its
(n, d_out) output; ``select`` picks the tensor of a layer whose output is a tuple. Every such problem is found at
construction, with the fix in the message.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from repdyn.monitor import measures
from repdyn.monitor.recording import STORE_FOLDER, Recording
from repdyn.nn.recording import Schedule
from repdyn.probes.activations import check_layers
from repdyn.probes.batch import Batch, batch_length, default_forward, describe, grad_leaves, take, to_device
from repdyn.probes.ntk import empirical_ntk

MEASURES = ("two_point", "ntk", "elasticity", "rank", "coi", "hamiltonian")
"""two_point: seed 000; ntk: seed 003; elasticity (class-mean logits, Â/B̂, α̂/β̂, separability, neural
collapse): seed 004; rank: effective rank per layer; coi, hamiltonian: Cost of Identity and Hamiltonian profiles
of seed 002 along a residual stream (not on by default; hamiltonian needs ``cost`` and ``weight_decay``)."""
DEFAULT_MEASURES = ("two_point", "ntk", "elasticity", "rank")
LABEL_MEASURES = ("two_point", "ntk", "elasticity", "hamiltonian")
LOSS_KINDS = ("cross_entropy", "squared_error", "other")
"""The training loss, as the report needs it: the two-point theory (seed 000) assumes the squared error."""
RECORDS_PER_DECADE = 6

Sink = Callable[[dict[str, float], int], Any]
Selector = int | str | Callable[[Any], Tensor]


class MeasureFailedWarning(RuntimeWarning):
    """A measure failed at a recorded step (e.g. the effective rank of a layer whose ReLUs all died, an
    eigensolver on a run gone to NaN): it is recorded as NaN and training goes on."""


class IncompleteRecordingWarning(UserWarning):
    """The recording stops before the last scheduled step (``total_steps``): the end of training is missing."""


def geometric_steps(records_per_decade: int = RECORDS_PER_DECADE, limit: int = 10**9) -> np.ndarray:
    """0 and the distinct integers round(10^(k/records_per_decade)) up to ``limit``: a log-spaced schedule for a
    run of unknown length (about ``records_per_decade`` recordings per decade of steps)."""
    if records_per_decade < 1:
        raise ValueError(f"records_per_decade must be >= 1, got {records_per_decade}")
    exponents = np.arange(0, int(np.log10(limit) * records_per_decade) + 1) / records_per_decade
    return np.unique(np.concatenate([[0], np.round(10.0**exponents).astype(np.int64)]))


def _default_pairs(labels: Tensor, count: int) -> Tensor:
    """Up to ``count`` pairs of probe indices from different classes (‖Δy‖² = 2, the case in which Eq. (10) of
    seed 000 predicts a nonzero final distance from the data): classes (c_k, c_{k+1}), first unused point each."""
    labels = labels.cpu()
    classes = torch.unique(labels).tolist()
    by_class = {c: (labels == c).nonzero().flatten().tolist() for c in classes}
    pairs: list[tuple[int, int]] = []
    for k in range(len(classes) if len(classes) > 2 else 1):
        a, b = classes[k], classes[(k + 1) % len(classes)]
        if len(pairs) < count and by_class[a] and by_class[b] and a != b:
            pairs.append((by_class[a].pop(0), by_class[b].pop(0)))
    return torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)


def _round_robin(labels: Tensor | None, count: int) -> Tensor:
    """``count`` probe indices: the first of every class, then the second of every class, ... (the first
    ``count`` indices without labels)."""
    if labels is None:
        return torch.arange(count)
    rank_in_class = torch.zeros_like(labels)
    for c in torch.unique(labels):
        members = labels == c
        rank_in_class[members] = torch.arange(int(members.sum()))
    order = torch.from_numpy(np.lexsort((labels.numpy(), rank_in_class.numpy())))
    return order[:count]


def _shape(value: Any) -> str:
    if isinstance(value, Tensor):
        return str(tuple(value.shape))
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of " + ", ".join(_shape(v) for v in value)
    return type(value).__name__


def default_output(output: Any) -> Any:
    """The (n, d_out) tensor of a model's output: the output itself, or its ``logits`` (a Hugging Face
    ``ModelOutput`` or a dict with a "logits" entry)."""
    if isinstance(output, Tensor):
        return output
    logits = output.get("logits") if isinstance(output, Mapping) else getattr(output, "logits", None)
    return logits if isinstance(logits, Tensor) else output


def _layer_name(layer: str | nn.Module, names: dict[int, str]) -> str:
    if isinstance(layer, nn.Module):
        if id(layer) not in names:
            raise ValueError(f"layer {type(layer).__name__} is not a submodule of the model; pass a module of "
                             f"model.named_modules() or its name")
        return names[id(layer)]
    if not isinstance(layer, str):
        raise ValueError(f"a layer must be a name (str) or a submodule of the model, got {type(layer).__name__}")
    return layer


class Monitor:
    """Records the five theories' measurements of ``model`` on a fixed probe set at scheduled training steps.

    Args:
        model: any ``torch.nn.Module``.
        layers: the layers to read (their outputs), as names of ``model.named_modules()`` (nested names such as
            ``"encoder.layers.0"``) or as the submodules themselves; an unknown one raises ValueError listing the
            names.
        probe_inputs: a fixed probe set of n >= 2 model inputs: a tensor (n, ...) (float inputs or integer
            token ids) or a dict / tuple of such tensors (e.g. ``{"input_ids": ..., "attention_mask": ...}``).
        labels: (n,) integer classes in [0, d_out) of the probe inputs; needed by two_point (one-hot targets),
            ntk (label projection and alignment) and elasticity.
        measures: any of :data:`MEASURES` (default :data:`DEFAULT_MEASURES`).
        total_steps: the number of training steps (optimiser updates), for a schedule of ``n_records`` steps
            log-spaced in log(1 + t) over [0, total_steps]; the last, ``total_steps``, is the trained model
            (recorded by :meth:`finish`, or by :meth:`save` after a loop over ``range(total_steps)``). Without it,
            :func:`geometric_steps` (about 6 per decade) and the coverage of training is unknown.
        schedule: explicit steps to record (overrides the log-spaced default).
        every_n_steps: record at steps 0, n, 2n, ... (and ``total_steps``), e.g. the logging interval of a
            dashboard, instead of log-spaced steps.
        loss_kind: the training loss, "cross_entropy", "squared_error" or "other": the report draws only the
            measures whose theory applies to it (None: not stated, the report says so).
        forward_fn: ``forward_fn(model, batch) -> output`` when the model is not called as ``model(x)``
            (default ``model(**batch)`` for a dict batch, else ``model(batch)``).
        output_fn: ``output_fn(output) -> (n, d_out) tensor`` (e.g. ``lambda out: out[0]`` for a model returning
            ``(logits, hidden)``); by default the output itself or its ``.logits``.
        select: for layers whose output is not one tensor: ``{layer: index, key or function of the output}``
            (e.g. ``{"encoder.layers.0.self_attn": 0}``), or one selector for every layer.
        on_record: a function ``sink(scalars, step)`` (or a list of them) called after each recording with
            :meth:`latest` (see :mod:`repdyn.monitor.sinks` for TensorBoard and Weights & Biases).
        pairs: (P, 2) probe indices for the two-point measure, or a number of pairs to pick from different
            classes (default 4, see ``_default_pairs``).
        pair_layer: the layer at which u is measured (default the last of ``layers``).
        ntk_points: the NTK Gram matrix is taken on this many probe inputs: with labels, taken in turn from each
            class (the first of every class, then the second, ...), else the first ones.
        ntk_records: the NTK (the costliest measure) is taken at this many of the scheduled steps, spread evenly
            over the schedule's indices (so log-spaced too) and including its first and last; without a known
            last step, at about 2 steps per decade, and always at :meth:`finish`.
        coi_gamma0: γ₀ of the γ-stable Cost of Identity (spec 002 §7 P5(c)).
        cost: for the hamiltonian measure, the data cost C(outputs, labels) -> scalar of the probe set (the loss
            the model is trained on, without the weight decay).
        weight_decay: for the hamiltonian measure, λ of the training's L2 penalty; momenta are −(1/λ)∂C/∂A_l.
        name: the recording's name in the store (default ``<model class>-<date>-<time>``, made unique in the
            store when saved).

    All input problems raise ValueError here, before training starts.

    Example: record before each update, save at the end.

        >>> import tempfile, torch, repdyn
        >>> _ = torch.manual_seed(0)
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        >>> x = torch.randn(32, 4)
        >>> y = (x[:, 0] > 0).long()
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> monitor = repdyn.Monitor(model, layers=["1"], probe_inputs=x[:16], labels=y[:16], total_steps=5,
        ...                          loss_kind="cross_entropy")
        >>> for step in range(5):
        ...     loss = torch.nn.functional.cross_entropy(model(x), y)
        ...     _ = monitor.step(step, loss)
        ...     optimizer.zero_grad()
        ...     loss.backward()
        ...     optimizer.step()
        >>> path = monitor.save(tempfile.mkdtemp())
        >>> repdyn.monitor.load_recording(path).steps.tolist()[-1]
        5
    """

    def __init__(
        self,
        model: nn.Module,
        layers: Sequence[str | nn.Module],
        probe_inputs: Batch,
        labels: Tensor | np.ndarray | Sequence[int] | None = None,
        *,
        measures: Iterable[str] = DEFAULT_MEASURES,
        total_steps: int | None = None,
        schedule: Iterable[int] | None = None,
        every_n_steps: int | None = None,
        n_records: int = 12,
        loss_kind: str | None = None,
        forward_fn: Callable[[nn.Module, Batch], Any] | None = None,
        output_fn: Callable[[Any], Tensor] | None = None,
        select: Mapping[str | nn.Module, Selector] | Selector | None = None,
        on_record: Sink | Sequence[Sink] | None = None,
        pairs: Tensor | Sequence[tuple[int, int]] | int = 4,
        pair_layer: str | nn.Module | None = None,
        ntk_points: int = 32,
        ntk_records: int = 4,
        coi_gamma0: float = 1e-3,
        cost: Callable[[Tensor, Tensor], Tensor] | None = None,
        weight_decay: float | None = None,
        name: str | None = None,
    ) -> None:
        cpu_start = time.process_time()
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.measures = tuple(dict.fromkeys(measures))
        unknown = [m for m in self.measures if m not in MEASURES]
        if unknown or not self.measures:
            raise ValueError(f"unknown measure(s) {unknown or '(none given)'}; allowed: {', '.join(MEASURES)}")
        if loss_kind is not None and loss_kind not in LOSS_KINDS:
            raise ValueError(f"loss_kind={loss_kind!r}; allowed: {', '.join(LOSS_KINDS)} (or None)")
        self.loss_kind = loss_kind
        names = {id(m): n for n, m in model.named_modules() if n}
        if isinstance(layers, str | nn.Module):
            layers = [layers]
        self.layers = check_layers(model, [_layer_name(layer, names) for layer in layers])
        self.pair_layer = (self.layers[-1] if pair_layer is None
                           else check_layers(model, [_layer_name(pair_layer, names)])[0])
        self._selectors = self._check_select(select, names)
        self._default_name = name is None
        if name is None:
            name = f"{type(model).__name__.lower()}-{time.strftime('%Y%m%d-%H%M%S')}"
        if not isinstance(name, str) or not name or any(c in name for c in "/\\") or name.startswith("."):
            raise ValueError(f"name={name!r} must be a non-empty file name without '/'")
        self.name = name
        self._saved_to: Path | None = None
        for label, fn in (("forward_fn", forward_fn), ("output_fn", output_fn)):
            if fn is not None and not callable(fn):
                raise ValueError(f"{label} must be a function, got {type(fn).__name__}")
        self.forward_fn, self.output_fn = forward_fn, output_fn
        sinks = [] if on_record is None else [on_record] if callable(on_record) else on_record
        if not isinstance(sinks, Sequence) or not all(callable(s) for s in sinks):
            raise ValueError("on_record must be a function sink(scalars, step) or a list of them")
        self.sinks: list[Sink] = list(sinks)

        if isinstance(probe_inputs, Tensor) and (probe_inputs.dim() < 2 or probe_inputs.shape[0] < 2):
            raise ValueError(f"probe_inputs must be a tensor (n, ...) of n >= 2 model inputs, got "
                             f"{tuple(probe_inputs.shape)}")
        try:
            n = batch_length(probe_inputs)
        except ValueError as error:
            raise ValueError(f"probe_inputs: {error}") from None
        if n < 2:
            raise ValueError(f"probe_inputs must hold n >= 2 model inputs, got {describe(probe_inputs)}")
        self.device = _model_device(model)
        self.x = to_device(probe_inputs, self.device)
        self.n = n
        d_out = self.d_out = self._check_forward()
        self._check_layer_outputs()

        needs_labels = [m for m in self.measures if m in LABEL_MEASURES]
        if labels is None:
            self.labels = None
            if needs_labels:
                raise ValueError(f"measure(s) {needs_labels} need labels=(n,) class indices of the probe inputs; "
                                 f"pass labels, or measures={tuple(m for m in self.measures if m not in needs_labels)}")
        else:
            self.labels = self._check_labels(labels, d_out, needs_labels)

        self.pairs = torch.zeros(0, 2, dtype=torch.long)
        if "two_point" in self.measures:
            assert self.labels is not None
            self.pairs = (_default_pairs(self.labels, pairs) if isinstance(pairs, int)
                          else self._check_pairs(pairs))
            if len(self.pairs) == 0:
                raise ValueError(f"no pair for the two_point measure (pairs={pairs!r}; the default pairs need two "
                                 "classes among the probe labels)")
        if "ntk" in self.measures and (ntk_points < 2 or ntk_records < 1):
            raise ValueError(f"ntk_points={ntk_points} must be >= 2 and ntk_records={ntk_records} >= 1")
        self.ntk_index = _round_robin(self.labels, min(ntk_points, n))
        if "ntk" in self.measures:
            self._check_ntk()
        if coi_gamma0 <= 0:
            raise ValueError(f"coi_gamma0={coi_gamma0} must be > 0")
        self.coi_gamma0 = coi_gamma0
        self.cost, self.weight_decay = cost, weight_decay
        if "hamiltonian" in self.measures:
            if not callable(cost) or weight_decay is None or not weight_decay > 0:
                raise ValueError(f"the hamiltonian measure needs cost=C(outputs, labels) (got {cost!r}) and "
                                 f"weight_decay=λ > 0 (got {weight_decay!r})")
            self._hamiltonian()  # a cost that does not fit the outputs fails here

        # θ₀ of the trainable parameters, for the relative weight movement ‖θ_t − θ₀‖/‖θ₀‖: one copy, in host
        # memory (an accelerator's memory is left to training)
        self._initial = [p.detach().to("cpu", copy=True) for p in model.parameters() if p.requires_grad]
        self._set_schedule(total_steps, schedule, every_n_steps, n_records, ntk_records)
        self._ntk: list[np.ndarray] = []
        self._ntk_steps: list[int] = []
        self._rows: list[dict[str, np.ndarray]] = []
        self._steps: list[int] = []
        self._losses: list[float] = []
        self._seconds: list[float] = []
        self._latest: dict[str, float] = {}
        self._last_seen: int | None = None
        self._failures: list[tuple[int, str]] = []
        self.cpu_seconds = time.process_time() - cpu_start
        """CPU time (user + system, this process) the Monitor has spent: construction, recordings, saving."""

    # ------------------------------------------------------------------------------------------ validation

    def _set_schedule(self, total_steps: int | None, schedule: Iterable[int] | None, every_n_steps: int | None,
                      n_records: int, ntk_records: int) -> None:
        if total_steps is not None and (isinstance(total_steps, bool) or int(total_steps) != total_steps
                                        or total_steps < 1):
            raise ValueError(f"total_steps={total_steps!r} must be the number of training steps, an integer >= 1")
        if every_n_steps is not None and (int(every_n_steps) != every_n_steps or every_n_steps < 1):
            raise ValueError(f"every_n_steps={every_n_steps!r} must be an integer >= 1")
        if every_n_steps is not None and schedule is not None:
            raise ValueError("give either schedule= or every_n_steps=, not both")
        self.total_steps = None if total_steps is None else int(total_steps)
        self.every_n_steps = None if every_n_steps is None else int(every_n_steps)
        self._open_every = self.every_n_steps is not None and self.total_steps is None
        if schedule is not None:
            self.schedule = np.unique(np.asarray(list(schedule), dtype=np.int64))
            if self.schedule.size == 0 or self.schedule[0] < 0:
                raise ValueError(f"schedule must be non-negative step indices, got {self.schedule[:5].tolist()}")
            if self.total_steps is not None and self.schedule[-1] > self.total_steps:
                raise ValueError(f"schedule steps must lie in [0, total_steps={self.total_steps}], got "
                                 f"{self.schedule[self.schedule > self.total_steps][:5].tolist()}")
        elif self.every_n_steps is not None:
            self.schedule = (Schedule.every(self.every_n_steps, self.total_steps).steps if self.total_steps
                             else self.every_n_steps * geometric_steps(1, 10**6))  # open-ended: see _is_scheduled
        elif self.total_steps is not None:
            self.schedule = Schedule.log_spaced(n_records, self.total_steps).steps
        else:
            self.schedule = geometric_steps()
        self._scheduled = frozenset(self.schedule.tolist())
        if self._open_every:
            assert self.every_n_steps is not None
            self.ntk_schedule = frozenset((self.every_n_steps * geometric_steps(2)).tolist())
        elif schedule is None and self.total_steps is None:
            self.ntk_schedule = frozenset(geometric_steps(2).tolist())
        else:
            chosen = np.unique(np.round(np.linspace(0, len(self.schedule) - 1, ntk_records)).astype(int))
            self.ntk_schedule = frozenset(self.schedule[chosen].tolist())

    def _check_select(self, select: Any, names: dict[int, str]) -> dict[str, Selector]:
        taps = dict.fromkeys([*self.layers, self.pair_layer])
        if select is None:
            return {}
        if not isinstance(select, Mapping):
            return {name: select for name in taps}
        chosen = {_layer_name(k, names): v for k, v in select.items()}
        extra = [k for k in chosen if k not in taps]
        if extra:
            raise ValueError(f"select names layer(s) {extra} that are not among layers={self.layers}")
        return chosen

    def _outputs(self, output: Any) -> Any:
        return default_output(output) if self.output_fn is None else self.output_fn(output)

    def apply(self, model: nn.Module, batch: Batch) -> Tensor:
        """The model's (n, d_out) outputs on ``batch``: ``output_fn(forward_fn(model, batch))``."""
        output = (default_forward if self.forward_fn is None else self.forward_fn)(model, batch)
        return self._outputs(output)

    def _check_forward(self) -> int:
        """Run two probe inputs through the model (eval, no grad) and return the output dimension."""
        two = take(self.x, slice(0, 2))
        try:
            out = self._forward(two)
        except (RuntimeError, ValueError, TypeError, IndexError, KeyError, AttributeError) as error:
            hint = ("" if self.forward_fn is not None else
                    "; if the model is not called as model(x), pass forward_fn=lambda model, batch: ...")
            raise ValueError(f"probe_inputs of shape {describe(self.x)} do not fit the model "
                             f"({type(self.model).__name__}): {str(error).splitlines()[0]}{hint}") from None
        if isinstance(out, tuple | list):
            raise ValueError(f"the model returns {_shape(out)}, not one (n, d_out) tensor: pass output_fn to pick "
                             "it, e.g. output_fn=lambda out: out[0]")
        if not isinstance(out, Tensor) or out.dim() != 2 or out.shape[0] != 2:
            raise ValueError(f"the model must map (n, ...) inputs to (n, d_out) outputs; it returned {_shape(out)} "
                             f"for probe inputs of shape {describe(two)}: pass output_fn to turn its output into "
                             "(n, d_out) logits (e.g. output_fn=lambda out: out[:, 0] for the first token)")
        # the NTK calls the model directly when nothing needs adapting (the common case)
        self._plain = self.forward_fn is None and self.output_fn is None and isinstance(self.x, Tensor)
        return int(out.shape[1])

    def _check_layer_outputs(self) -> None:
        """One forward pass of two probe inputs with the layer hooks: each layer must be called and give one
        tensor (after ``select``) with the batch first."""
        _, found = self._forward_with_layers(take(self.x, slice(0, 2)), raw=True)
        self._layer_dims: dict[str, int] = {}
        for name in dict.fromkeys([*self.layers, self.pair_layer]):
            if name not in found:
                raise ValueError(f"layer {name!r} was not called in the model's forward pass (a fused fast path, "
                                 "e.g. nn.TransformerEncoderLayer's in eval mode, skips its submodules): choose a "
                                 "module the forward pass calls, e.g. the enclosing layer")
            raw = found[name]
            try:
                value = self._select(name, raw)
            except (IndexError, KeyError, TypeError, AttributeError) as error:
                raise ValueError(f"select[{name!r}] failed on the layer's output {_shape(raw)}: {error}") from None
            if not isinstance(value, Tensor):
                raise ValueError(f"layer {name!r} returns {_shape(raw)}, not one tensor: pass "
                                 f"select={{{name!r}: 0}} (an index, key or function of the output) to read one")
            self._layer_dims[name] = value.dim()
            if value.dim() < 1 or value.shape[0] != 2:
                raise ValueError(f"layer {name!r} gives shape {tuple(value.shape)} for 2 probe inputs: its first "
                                 f"dimension must be the batch; pass select={{{name!r}: lambda out: ...}} to "
                                 "reorder it (e.g. out.transpose(0, 1) for a sequence-first layer)")

    def _weight_change(self) -> float:
        """‖θ_t − θ₀‖/‖θ₀‖ over the trainable parameters (θ₀ at construction), in float64."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        if len(params) != len(self._initial):
            raise ValueError("the model's trainable parameters changed since the Monitor was made")
        with torch.no_grad():
            gap = sum((p.detach().cpu().double() - q.double()).pow(2).sum() for p, q in zip(params, self._initial))
            size = sum(q.double().pow(2).sum() for q in self._initial)
        return float((gap / size).sqrt()) if float(size) > 0 else float("nan")

    def _pooling(self) -> dict[str, str]:
        """{layer: how its feature map is reduced before NC1} for the layers whose outputs are image-like maps."""
        return {n: measures.POOLING for n, dims in self._layer_dims.items() if dims >= 4}

    def _select(self, name: str, value: Any) -> Any:
        selector = self._selectors.get(name)
        if selector is None:
            return value
        return selector(value) if callable(selector) else value[selector]

    def _ntk_gram(self, x: Batch) -> Tensor:
        with warnings.catch_warnings():  # torch.func's note that attention has no batching rule yet: not actionable
            warnings.filterwarnings("ignore", message="There is a performance drop")
            return empirical_ntk(self.model, x, forward=None if self._plain else self.apply)

    def _check_ntk(self) -> None:
        """Take the NTK of two probe inputs once, so that a model torch.func cannot differentiate fails here (this
        also pays torch.func's one-time import before training rather than during it)."""
        try:
            self._ntk_gram(take(self.x, slice(0, 2)))
        except (RuntimeError, ValueError, TypeError) as error:
            raise ValueError(f"the empirical NTK of {type(self.model).__name__} cannot be computed "
                             f"({str(error).splitlines()[0]}); leave 'ntk' out of measures") from None

    def _check_labels(self, labels: Tensor | np.ndarray | Sequence[int], d_out: int,
                      needs_labels: list[str]) -> Tensor:
        y = torch.as_tensor(np.asarray(labels.cpu() if isinstance(labels, Tensor) else labels))
        n = self.n
        if y.dim() != 1 or y.shape[0] != n or y.dtype.is_floating_point or y.dtype == torch.bool:
            raise ValueError(f"labels must be (n,) = ({n},) integer classes of the probe inputs, got shape "
                             f"{tuple(y.shape)} dtype {y.dtype}")
        y = y.long()
        if bool(((y < 0) | (y >= d_out)).any()):
            raise ValueError(f"labels must lie in [0, {d_out}) (the model's output dimension), got range "
                             f"[{int(y.min())}, {int(y.max())}]")
        if "elasticity" in needs_labels:
            counts = torch.bincount(y, minlength=d_out)
            if bool((counts < 2).any()):
                missing = (counts < 2).nonzero().flatten().tolist()
                raise ValueError(f"the elasticity measure needs at least 2 probe inputs of every class 0..{d_out - 1}"
                                 f" (one per output logit); classes {missing} have fewer")
        return y

    def _check_pairs(self, pairs: Tensor | Sequence[tuple[int, int]]) -> Tensor:
        p = torch.as_tensor(np.asarray(pairs.cpu() if isinstance(pairs, Tensor) else pairs), dtype=torch.long)
        n = self.n
        if p.dim() != 2 or p.shape[1] != 2 or p.shape[0] == 0:
            raise ValueError(f"pairs must be (P, 2) probe indices, got shape {tuple(p.shape)}")
        if bool(((p < 0) | (p >= n)).any()) or bool((p[:, 0] == p[:, 1]).any()):
            raise ValueError(f"pairs must hold two different indices in [0, {n}), got {p.tolist()}")
        return p

    # ------------------------------------------------------------------------------------------- recording

    def _forward(self, x: Batch, grad: bool = False) -> Any:
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.set_grad_enabled(grad):
                return self.apply(self.model, x)
        finally:
            self.model.train(was_training)

    def _forward_with_layers(self, x: Batch, grad: bool = False, raw: bool = False) -> tuple[Tensor, dict[str, Any]]:
        """One eval-mode forward pass (no grad unless ``grad``): (outputs, {layer: its output}), read by temporary
        forward hooks (the ``select``-ed tensor unless ``raw``)."""
        modules = dict(self.model.named_modules())
        found: dict[str, Any] = {}

        def keep(name: str, out: Any) -> None:
            found[name] = out if raw else self._select(name, out)

        handles = [modules[name].register_forward_hook(lambda _m, _i, out, name=name: keep(name, out))
                   for name in dict.fromkeys([*self.layers, self.pair_layer])]
        try:
            outputs = self._forward(x, grad)
        finally:
            for handle in handles:
                handle.remove()
        return outputs, found

    def _hamiltonian(self) -> tuple[list[tuple[float, float]], float]:
        """((−2H/L̃, ‖B‖_F) per layer, stationarity residual): one eval-mode forward and backward pass of the cost
        on the probe set, differentiated with respect to the layer outputs and the parameters (their .grad are
        not touched; the graph is freed on return)."""
        assert self.labels is not None and self.cost is not None and self.weight_decay is not None
        params = [p for p in self.model.parameters() if p.requires_grad]
        with torch.enable_grad():
            # float inputs require grad so that layers before any parameter (A_0) have momenta too
            outputs, found = self._forward_with_layers(grad_leaves(self.x), grad=True)
            try:
                cost = self.cost(outputs, self.labels.to(outputs.device))
                grads = torch.autograd.grad(cost, [found[n] for n in self.layers] + params, allow_unused=True)
            except (RuntimeError, ValueError, TypeError) as error:
                raise ValueError(f"the hamiltonian measure's cost(outputs, labels) failed: "
                                 f"{str(error).splitlines()[0]}") from None
        layer_grads, param_grads = grads[:len(self.layers)], grads[len(self.layers):]
        profile = [measures.layer_hamiltonian(found[n].detach(), torch.zeros_like(found[n]) if g is None else g,
                                              self.weight_decay)
                   for n, g in zip(self.layers, layer_grads)]
        return profile, measures.stationarity_residual(params, param_grads, self.weight_decay)

    def __call__(self, step: int, loss: float | None = None) -> bool:
        """Same as :meth:`step` (for loops that take a callback)."""
        return self.step(step, loss)

    def _is_scheduled(self, step: int) -> bool:
        if self._open_every:
            assert self.every_n_steps is not None
            return step % self.every_n_steps == 0
        return step in self._scheduled

    def step(self, step: int, loss: float | Tensor | None = None) -> bool:
        """Call once per training step, *before* the update of step ``step`` (so step 0 is the untrained model);
        records if ``step`` is scheduled and returns whether it did. ``loss`` is the step's training loss (a
        float or the loss tensor: read with ``.item()`` only at the steps that are recorded), kept beside the
        recording: call after the forward pass and before ``optimizer.step()``.

        Never raises: a failure is recorded as NaN with a :class:`MeasureFailedWarning`."""
        try:
            self._last_seen = int(step)
            if self._is_scheduled(step) and (not self._steps or step > self._steps[-1]):
                self.record(step, loss)
                return True
        except Exception as error:  # noqa: BLE001 - the instrument never stops the training it watches
            self._warn_failed(f"step({step!r})", error)
        return False

    def log_loss(self, step: int, loss: float | Tensor) -> None:
        """Keep ``loss`` (a float or the loss tensor) as the training loss of step ``step`` when that step was the
        last recorded one without a loss, e.g. from a framework that reports the loss after the update (read with
        ``.item()`` only then). Never raises."""
        try:
            if self._steps and self._steps[-1] == int(step) and math.isnan(self._losses[-1]):
                self._losses[-1] = float(loss.detach() if isinstance(loss, Tensor) else loss)
        except Exception as error:  # noqa: BLE001
            self._warn_failed(f"log_loss({step!r})", error)

    def _warn_failed(self, what: str, error: BaseException) -> None:
        warnings.warn(MeasureFailedWarning(f"repdyn Monitor {self.name!r}: {what} failed ({type(error).__name__}: "
                                           f"{str(error).splitlines()[0] if str(error) else ''}); nothing recorded, "
                                           "training goes on"), stacklevel=3)

    def finish(self, step: int | None = None, loss: float | Tensor | None = None) -> bool:
        """Record the trained model at the end of training: step ``total_steps`` (or ``step``; without either,
        the step after the last one seen), with the NTK, unless that step is already recorded. Returns whether
        it recorded (never raises: a failure is a warning)."""
        if step is None:
            step = (self.total_steps if self.total_steps is not None
                    else None if self._last_seen is None else self._last_seen + 1)
        if step is None:
            self._warn_failed("finish()", ValueError("it needs total_steps (given to the Monitor) or step=the number "
                                                     "of steps trained"))
            return False
        if self._steps and step <= self._steps[-1]:
            return False
        try:
            self.record(step, loss, ntk=True)
        except Exception as error:  # noqa: BLE001
            self._warn_failed(f"finish({step!r})", error)
            return False
        return True

    def record(self, step: int, loss: float | Tensor | None = None, *, ntk: bool | None = None) -> None:
        """Record now, whatever the schedule (integer steps, increasing). The NTK is taken at steps of
        ``ntk_schedule`` (``ntk=True`` / ``False`` forces it on / off).

        A measure that fails (a zero representation has no effective rank; an eigensolver does not converge on a
        run gone to NaN; a sink that cannot write) is recorded as NaN with a :class:`MeasureFailedWarning` naming
        the measure, the step and the reason: the instrument never stops the training it watches."""
        if isinstance(step, bool) or int(step) != step:
            raise ValueError(f"step must be an integer training step, got {step!r}")
        if self._steps and step <= self._steps[-1]:
            raise ValueError(f"recorded steps must increase: step {step} after {self._steps[-1]}")
        start, cpu_start = time.perf_counter(), time.process_time()
        step = int(step)
        failed: list[str] = []

        def measured(name: str, fn: Callable[[], Any], shape: tuple[int, ...]) -> Any:
            try:
                return fn()
            except Exception as error:  # noqa: BLE001 - any failure of an instrument is recorded, never raised
                reason = str(error).splitlines()[0] if str(error) else type(error).__name__
                failed.append(name)
                warnings.warn(MeasureFailedWarning(
                    f"repdyn Monitor {self.name!r}: {name} failed at step {step} ({type(error).__name__}: {reason}); "
                    "recorded as NaN, training goes on"), stacklevel=4)
                return np.full(shape, np.nan) if shape else float("nan")

        device = _model_device(self.model)
        if device != self.device:
            self.x, self.device = to_device(self.x, device), device
        layers = len(self.layers)
        forward = measured("the probe forward pass", lambda: self._forward_with_layers(self.x), (0,))
        outputs, found = (None, {}) if isinstance(forward, np.ndarray) else forward
        row: dict[str, np.ndarray] = {
            "outputs": (np.full((self.n, self.d_out), np.nan, dtype=np.float32) if outputs is None
                        else outputs.float().cpu().numpy())}
        if "rank" in self.measures:
            row["effective_rank"] = np.array([
                measured(f"effective rank of layer {n!r}", lambda n=n: measures.layer_effective_rank(found[n]), ())
                for n in self.layers])
        if "coi" in self.measures:
            row["cost_of_identity"] = np.array([
                measured(f"Cost of Identity of layer {n!r}",
                         lambda n=n: measures.layer_cost_of_identity(found[n], self.coi_gamma0), ())
                for n in self.layers])
        if self.labels is not None and "elasticity" in self.measures:
            labels = self.labels.to(device)
            collapse = np.array([
                measured(f"neural collapse (NC1) of layer {n!r}",
                         lambda n=n: measures.layer_collapse(found[n], labels), (2,)) for n in self.layers],
                dtype=float).reshape(layers, 2)
            row["nc_within_between"], row["nc_etf_distance"] = collapse[:, 0], collapse[:, 1]
        if "two_point" in self.measures:
            assert self.labels is not None
            pairs = len(self.pairs)

            def two_point() -> dict[str, np.ndarray]:
                assert outputs is not None
                targets = torch.nn.functional.one_hot(self.labels, outputs.shape[1]).to(device, outputs.dtype)
                return measures.two_point_state(found[self.pair_layer], outputs, self.pairs.to(device), targets)

            state = measured("the two-point state (u, v, w)", two_point, (0,))
            if isinstance(state, np.ndarray):
                state = {k: np.full(pairs, np.nan) for k in ("u", "v", "w")}
            row.update({f"pair_{k}": v for k, v in state.items()})
        if "hamiltonian" in self.measures:
            result = measured("the Hamiltonian", self._hamiltonian, (0,))
            if isinstance(result, np.ndarray):
                result = ([(np.nan, np.nan)] * layers, np.nan)
            profile, residual = result
            array = np.array(profile, dtype=float)
            row["hamiltonian"], row["momentum_norm"] = array[:, 0], array[:, 1]
            row["stationarity"] = np.array(residual)
        row["weight_change"] = np.array(measured("the weight movement", self._weight_change, ()))
        gram = None
        if "ntk" in self.measures and (step in self.ntk_schedule if ntk is None else ntk):
            m = len(self.ntk_index)
            gram = measured("the empirical NTK", lambda: self._ntk_gram(take(self.x, self.ntk_index.to(device)))
                            .double().cpu().numpy(), (m, m))
            self._ntk.append(gram)
            self._ntk_steps.append(step)
        self._rows.append(row)
        self._steps.append(step)
        value = measured("the training loss", lambda: float("nan") if loss is None
                         else float(loss.detach() if isinstance(loss, Tensor) else loss), ())
        self._losses.append(value)
        self._failures.extend((step, name) for name in failed)
        self._seconds.append(time.perf_counter() - start)
        self._latest = measured("the dashboard scalars", lambda: self._scalars(row, gram, value), (0,))
        if isinstance(self._latest, np.ndarray):
            self._latest = {}
        for sink in self.sinks:
            measured(f"the sink {getattr(sink, '__name__', type(sink).__name__)}",
                     lambda sink=sink: sink(dict(self._latest), step), ())
        self.cpu_seconds += time.process_time() - cpu_start

    def _scalars(self, row: dict[str, np.ndarray], gram: np.ndarray | None, loss: float) -> dict[str, float]:
        """The flat scalars of one recording, named ``repdyn/<measure>[/<layer>]``."""
        scalars: dict[str, float] = {}
        if not math.isnan(loss):
            scalars["repdyn/train_loss"] = float(loss)
        if self.labels is not None:
            outputs = torch.as_tensor(row["outputs"], dtype=torch.float64)
            labels = self.labels.cpu()
            scalars["repdyn/probe_accuracy"] = float((outputs.argmax(1) == labels).double().mean())
            if self.loss_kind != "squared_error":
                scalars["repdyn/probe_cross_entropy"] = float(torch.nn.functional.cross_entropy(outputs, labels))
            if self.loss_kind in (None, "squared_error"):
                onehot = torch.nn.functional.one_hot(labels, outputs.shape[1]).double()
                scalars["repdyn/probe_squared_error"] = float(0.5 * (outputs - onehot).pow(2).sum(1).mean())
        for key, short in (("effective_rank", "effective_rank"), ("nc_within_between", "nc1"),
                           ("cost_of_identity", "cost_of_identity"), ("hamiltonian", "hamiltonian")):
            if key in row:
                scalars.update({f"repdyn/{short}/{layer}": float(v) for layer, v in zip(self.layers, row[key])})
        if "stationarity" in row:
            scalars["repdyn/stationarity_residual"] = float(row["stationarity"])
        if gram is not None and self.labels is not None:
            targets = np.eye(row["outputs"].shape[1])[self.labels[self.ntk_index].numpy()]
            scalars["repdyn/ntk_alignment"] = measures.centred_alignment(gram, targets)
        return scalars

    def latest(self) -> dict[str, float]:
        """The scalars of the last recording as a flat dict with slash names (``repdyn/nc1/layer1``,
        ``repdyn/effective_rank/layer0``, ``repdyn/ntk_alignment`` when the NTK was taken, ``repdyn/probe_accuracy``,
        ...), for a dashboard; empty before the first recording."""
        return dict(self._latest)

    # ---------------------------------------------------------------------------------------------- output

    def coverage(self) -> float | None:
        """The fraction of training the recording covers: last recorded step / ``total_steps`` (None when
        ``total_steps`` is unknown or nothing is recorded)."""
        if self.total_steps is None or not self._steps:
            return None
        return min(self._steps[-1] / self.total_steps, 1.0)

    def recording(self) -> Recording:
        """What has been recorded so far, as a :class:`Recording`."""
        if not self._rows:
            raise ValueError("nothing recorded yet: call monitor.step(step) in the training loop")
        arrays = {key: np.stack([row[key] for row in self._rows]) for key in self._rows[0]}
        arrays.update(steps=np.asarray(self._steps, dtype=np.int64), loss=np.asarray(self._losses),
                      record_seconds=np.asarray(self._seconds))
        if self._ntk:
            arrays.update(ntk=np.stack(self._ntk), ntk_steps=np.asarray(self._ntk_steps, dtype=np.int64),
                          ntk_index=self.ntk_index.numpy())
        if self.labels is not None:
            arrays["labels"] = self.labels.numpy()
        vector_inputs = isinstance(self.x, Tensor) and self.x.is_floating_point()
        if "two_point" in self.measures:
            i, j = self.pairs[:, 0], self.pairs[:, 1]
            arrays["pairs"] = self.pairs.numpy()
            if vector_inputs:
                x = self.x.reshape(self.n, -1).double().cpu()
                arrays["pair_X"] = (x[j] - x[i]).pow(2).sum(1).numpy()
            else:  # token ids or a dict batch: no input distance ‖Δx‖²
                arrays["pair_X"] = np.full(len(self.pairs), np.nan)
            arrays["pair_Y"] = 2.0 * (self.labels[i] != self.labels[j]).double().numpy()
        meta = {"name": self.name, "model": type(self.model).__name__, "layers": self.layers,
                "pair_layer": self.pair_layer, "measures": list(self.measures), "device": str(self.device),
                "probe_shape": (list(self.x.shape) if isinstance(self.x, Tensor) else describe(self.x)),
                "inputs": "vectors" if vector_inputs else "tokens or batch",
                "ntk_points": len(self.ntk_index), "coi_gamma0": self.coi_gamma0,
                "weight_decay": self.weight_decay, "loss_kind": self.loss_kind, "total_steps": self.total_steps,
                "every_n_steps": self.every_n_steps, "coverage": self.coverage(),
                "failures": [[step, what] for step, what in self._failures], "nc_pooling": self._pooling(),
                "parameters": int(sum(p.numel() for p in self.model.parameters()))}
        return Recording(arrays=arrays, meta=meta)

    def save(self, root: str | Path) -> Path | None:
        """Write the recording into the result store at ``root`` (``root/monitor/<name>.npz``), atomically;
        returns its path (None, with a :class:`MeasureFailedWarning`, when there is nothing to write or the write
        fails: saving never raises into the training script).

        When the loop's last :meth:`step` was ``total_steps - 1`` (a loop over ``range(total_steps)``), the
        trained model is recorded first as step ``total_steps`` (:meth:`finish`). Without ``total_steps`` it is
        recorded as the step after the last one seen, with an :class:`IncompleteRecordingWarning` saying so. If
        the recording still stops before ``total_steps``, the same warning says how much of training it covers.

        A default name (no ``name=``) that is taken in ``root`` gets the first free suffix ``-2``, ``-3``, ...;
        a given name that is taken is overwritten with a warning."""
        cpu_start = time.process_time()
        try:
            if (self.total_steps is not None and self._last_seen is not None
                    and self._last_seen >= self.total_steps - 1 and self._steps
                    and self._steps[-1] < self.total_steps):
                self.finish()
            elif self.total_steps is None and self._last_seen is not None and self._steps:
                if self._steps[-1] <= self._last_seen:
                    self.finish(self._last_seen + 1)
                warnings.warn(IncompleteRecordingWarning(
                    f"repdyn Monitor {self.name!r}: total_steps was not given, so the trained model is taken to be "
                    f"step {self._last_seen + 1} (the step after the last monitor.step) and the fraction of "
                    "training covered is unknown; pass total_steps= to the Monitor"), stacklevel=2)
            if not self._rows:
                raise ValueError("nothing recorded yet: call monitor.step(step) in the training loop")
            path = Path(root) / STORE_FOLDER / f"{self.name}.npz"
            if path.exists() and self._default_name:
                base, k = self.name, 2
                while (Path(root) / STORE_FOLDER / f"{base}-{k}.npz").exists():
                    k += 1
                self.name = f"{base}-{k}"
            elif path.exists() and self._saved_to != path.resolve():
                warnings.warn(f"repdyn Monitor: {path} exists and is overwritten by this run's recording (pass "
                              "another name= to keep both)", stacklevel=2)
            recording = self.recording()
            coverage = recording.meta["coverage"]
            if coverage is not None and coverage < 1:
                warnings.warn(IncompleteRecordingWarning(
                    f"repdyn Monitor {self.name!r}: the recording ends at step {self._steps[-1]} of total_steps="
                    f"{self.total_steps} ({100 * coverage:.0f} % of training); the last scheduled step was never "
                    "recorded. Call monitor.step(step) before each update of a loop over range(total_steps) "
                    "(save() then records the end), or monitor.finish() after training."), stacklevel=2)
            saved = recording.save(root)
        except Exception as error:  # noqa: BLE001 - the instrument never stops the training it watches
            warnings.warn(MeasureFailedWarning(f"repdyn Monitor {self.name!r}: save({str(root)!r}) failed "
                                               f"({type(error).__name__}: {error}); nothing written"), stacklevel=2)
            return None
        self._saved_to = saved.resolve()
        self.cpu_seconds += time.process_time() - cpu_start
        return saved


def _model_device(model: nn.Module) -> torch.device:
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return torch.device("cpu")
