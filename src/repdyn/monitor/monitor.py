"""The Monitor: attach the theories' measurements to any ``torch.nn.Module`` trained in an ordinary loop.

Usage (see examples/digits_cnn_monitor.py)::

    monitor = Monitor(model, layers=["layer0", "layer1"], probe_inputs=x_probe, labels=y_probe, total_steps=n)
    for step in range(n):
        monitor.step(step)           # records only at scheduled steps (log-spaced by default)
        train_one_step()
    monitor.step(n)                  # the final model
    path = monitor.save("runs")      # runs/monitor/<name>.npz; then `repdyn analyze PATH`

At a recorded step the monitor runs the probe set through the model in eval mode under ``torch.no_grad()``
(the module's mode is restored), reads the named layers with temporary forward hooks, and copies what it
measures to NumPy: it holds no autograd graph, adds no hook between recordings, and does not touch parameters,
gradients, buffers or any random-number generator, so training is the same with and without it. (The optional
hamiltonian measure differentiates the cost with respect to the layer outputs, never the parameters, and frees
that graph before returning.) Everything that
can be derived from the recorded outputs (class-mean logits, elasticity estimates, separability, collapse of the
logits) is left to the analysis (:mod:`repdyn.monitor.analysis`), off the training path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from repdyn.monitor import measures
from repdyn.monitor.recording import Recording
from repdyn.nn.recording import Schedule
from repdyn.probes.activations import check_layers
from repdyn.probes.ntk import empirical_ntk

MEASURES = ("two_point", "ntk", "elasticity", "rank", "coi", "hamiltonian")
"""two_point: seed 000; ntk: seed 003; elasticity (class-mean logits, Â/B̂, α̂/β̂, separability, neural
collapse): seed 004; rank: effective rank per layer; coi, hamiltonian: Cost of Identity and Hamiltonian profiles
of seed 002 along a residual stream (not on by default; hamiltonian needs ``cost`` and ``weight_decay``)."""
DEFAULT_MEASURES = ("two_point", "ntk", "elasticity", "rank")
LABEL_MEASURES = ("two_point", "ntk", "elasticity", "hamiltonian")
RECORDS_PER_DECADE = 6


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


class Monitor:
    """Records the five theories' measurements of ``model`` on a fixed probe set at scheduled training steps.

    Args:
        model: any ``torch.nn.Module`` whose layers are named submodules (``model.named_modules()``).
        layers: layer names to read (their outputs); an unknown name raises ValueError listing the names.
        probe_inputs: (n, ...) inputs of the model, a fixed probe set (held-out or training points).
        labels: (n,) integer classes in [0, d_out) of the probe inputs; needed by two_point (one-hot targets),
            ntk (label projection and alignment) and elasticity.
        measures: any of :data:`MEASURES` (default :data:`DEFAULT_MEASURES`).
        total_steps: the number of training steps, for a schedule of ``n_records`` steps log-spaced in
            log(1 + t) over [0, total_steps]; without it, :func:`geometric_steps` (about 6 per decade).
        schedule: explicit steps to record (overrides the log-spaced default).
        pairs: (P, 2) probe indices for the two-point measure, or a number of pairs to pick from different
            classes (default 4, see ``_default_pairs``).
        pair_layer: the layer at which u is measured (default the last of ``layers``).
        ntk_points: the NTK Gram matrix is taken on this many probe inputs: with labels, taken in turn from each
            class (the first of every class, then the second, ...), else the first ones.
        ntk_records: the NTK (the costliest measure) is taken at this many of the scheduled steps, spread evenly
            over the schedule's indices (so log-spaced too) and including its first and last; without a known
            last step, at about 2 steps per decade.
        coi_gamma0: γ₀ of the γ-stable Cost of Identity (spec 002 §7 P5(c)).
        cost: for the hamiltonian measure, the data cost C(outputs, labels) -> scalar of the probe set (the loss
            the model is trained on, without the weight decay).
        weight_decay: for the hamiltonian measure, λ of the training's L2 penalty; momenta are −(1/λ)∂C/∂A_l.
        name: the recording's name in the store.

    All input problems raise ValueError here, before training starts.
    """

    def __init__(
        self,
        model: nn.Module,
        layers: Sequence[str],
        probe_inputs: Tensor,
        labels: Tensor | np.ndarray | Sequence[int] | None = None,
        *,
        measures: Iterable[str] = DEFAULT_MEASURES,
        total_steps: int | None = None,
        schedule: Iterable[int] | None = None,
        n_records: int = 12,
        pairs: Tensor | Sequence[tuple[int, int]] | int = 4,
        pair_layer: str | None = None,
        ntk_points: int = 32,
        ntk_records: int = 4,
        coi_gamma0: float = 1e-3,
        cost: Callable[[Tensor, Tensor], Tensor] | None = None,
        weight_decay: float | None = None,
        name: str = "run",
    ) -> None:
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.measures = tuple(dict.fromkeys(measures))
        unknown = [m for m in self.measures if m not in MEASURES]
        if unknown or not self.measures:
            raise ValueError(f"unknown measure(s) {unknown or '(none given)'}; allowed: {', '.join(MEASURES)}")
        self.layers = check_layers(model, layers)
        self.pair_layer = pair_layer if pair_layer is not None else self.layers[-1]
        check_layers(model, [self.pair_layer])
        if not name or any(c in name for c in "/\\") or name.startswith("."):
            raise ValueError(f"name={name!r} must be a non-empty file name without '/'")
        self.name = name

        if not isinstance(probe_inputs, Tensor) or probe_inputs.dim() < 2 or probe_inputs.shape[0] < 2:
            shape = tuple(probe_inputs.shape) if isinstance(probe_inputs, Tensor) else type(probe_inputs).__name__
            raise ValueError(f"probe_inputs must be a tensor (n, ...) of n >= 2 model inputs, got {shape}")
        self.device = _model_device(model)
        self.x = probe_inputs.detach().to(self.device)
        d_out = self._check_forward()

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
        n = self.x.shape[0]
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

        if schedule is not None:
            self.schedule = np.unique(np.asarray(list(schedule), dtype=np.int64))
            if self.schedule.size == 0 or self.schedule[0] < 0:
                raise ValueError(f"schedule must be non-negative step indices, got {self.schedule[:5].tolist()}")
        elif total_steps is not None:
            self.schedule = Schedule.log_spaced(n_records, int(total_steps)).steps
        else:
            self.schedule = geometric_steps()
        self._scheduled = frozenset(self.schedule.tolist())
        if schedule is None and total_steps is None:
            self.ntk_schedule = frozenset(geometric_steps(2).tolist())
        else:
            chosen = np.unique(np.round(np.linspace(0, len(self.schedule) - 1, ntk_records)).astype(int))
            self.ntk_schedule = frozenset(self.schedule[chosen].tolist())
        self._ntk: list[np.ndarray] = []
        self._ntk_steps: list[int] = []
        self._rows: list[dict[str, np.ndarray]] = []
        self._steps: list[int] = []
        self._losses: list[float] = []
        self._seconds: list[float] = []

    # ------------------------------------------------------------------------------------------ validation

    def _check_forward(self) -> int:
        """Run two probe inputs through the model (eval, no grad) and return the output dimension."""
        try:
            out = self._forward(self.x[:2])
        except (RuntimeError, ValueError, TypeError, IndexError) as error:
            raise ValueError(f"probe_inputs of shape {tuple(self.x.shape)} do not fit the model "
                             f"({type(self.model).__name__}): {str(error).splitlines()[0]}") from None
        if not isinstance(out, Tensor) or out.dim() != 2 or out.shape[0] != 2:
            shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(f"the model must map (n, ...) inputs to (n, d_out) outputs; it returned {shape} "
                             f"for probe inputs of shape {tuple(self.x[:2].shape)}")
        return int(out.shape[1])

    def _check_ntk(self) -> None:
        """Take the NTK of two probe inputs once, so that a model torch.func cannot differentiate fails here (this
        also pays torch.func's one-time import before training rather than during it)."""
        try:
            empirical_ntk(self.model, self.x[:2])
        except (RuntimeError, ValueError, TypeError) as error:
            raise ValueError(f"the empirical NTK of {type(self.model).__name__} cannot be computed "
                             f"({str(error).splitlines()[0]}); leave 'ntk' out of measures") from None

    def _check_labels(self, labels: Tensor | np.ndarray | Sequence[int], d_out: int,
                      needs_labels: list[str]) -> Tensor:
        y = torch.as_tensor(np.asarray(labels.cpu() if isinstance(labels, Tensor) else labels))
        n = self.x.shape[0]
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
        n = self.x.shape[0]
        if p.dim() != 2 or p.shape[1] != 2 or p.shape[0] == 0:
            raise ValueError(f"pairs must be (P, 2) probe indices, got shape {tuple(p.shape)}")
        if bool(((p < 0) | (p >= n)).any()) or bool((p[:, 0] == p[:, 1]).any()):
            raise ValueError(f"pairs must hold two different indices in [0, {n}), got {p.tolist()}")
        return p

    # ------------------------------------------------------------------------------------------- recording

    def _forward(self, x: Tensor, grad: bool = False) -> Tensor:
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.set_grad_enabled(grad):
                return self.model(x)
        finally:
            self.model.train(was_training)

    def _forward_with_layers(self, x: Tensor, grad: bool = False) -> tuple[Tensor, dict[str, Tensor]]:
        """One eval-mode forward pass (no grad unless ``grad``): (outputs, {layer: its output}), read by temporary
        forward hooks."""
        modules = dict(self.model.named_modules())
        found: dict[str, Tensor] = {}
        handles = [modules[name].register_forward_hook(
            lambda _m, _i, out, name=name: found.__setitem__(name, out))
            for name in dict.fromkeys([*self.layers, self.pair_layer])]
        try:
            outputs = self._forward(x, grad)
        finally:
            for handle in handles:
                handle.remove()
        return outputs, found

    def _hamiltonian(self) -> list[tuple[float, float]]:
        """(−2H/L̃, ‖B‖_F) per layer: one eval-mode forward and backward pass of the cost on the probe set,
        differentiated with respect to the layer outputs only (parameters' .grad are not touched; the graph is
        freed on return)."""
        assert self.labels is not None and self.cost is not None and self.weight_decay is not None
        with torch.enable_grad():
            # the input requires grad so that layers before any parameter (A_0) have momenta too
            outputs, found = self._forward_with_layers(self.x.detach().requires_grad_(True), grad=True)
            try:
                cost = self.cost(outputs, self.labels.to(outputs.device))
                grads = torch.autograd.grad(cost, [found[n] for n in self.layers])
            except (RuntimeError, ValueError, TypeError) as error:
                raise ValueError(f"the hamiltonian measure's cost(outputs, labels) failed: "
                                 f"{str(error).splitlines()[0]}") from None
        return [measures.layer_hamiltonian(found[n].detach(), g, self.weight_decay)
                for n, g in zip(self.layers, grads)]

    def __call__(self, step: int, loss: float | None = None) -> bool:
        """Same as :meth:`step` (for loops that take a callback)."""
        return self.step(step, loss)

    def step(self, step: int, loss: float | None = None) -> bool:
        """Record if ``step`` is scheduled (returns whether it recorded). ``loss`` is an optional float to keep
        beside the recording (pass a Python float, e.g. ``loss.item()``, only if you compute it anyway)."""
        if step in self._scheduled and (not self._steps or step > self._steps[-1]):
            self.record(step, loss)
            return True
        return False

    def record(self, step: int, loss: float | None = None) -> None:
        """Record now, whatever the schedule (integer steps, increasing). The NTK is taken only at steps of
        ``ntk_schedule``."""
        if isinstance(step, bool) or int(step) != step:
            raise ValueError(f"step must be an integer training step, got {step!r}")
        if self._steps and step <= self._steps[-1]:
            raise ValueError(f"recorded steps must increase: step {step} after {self._steps[-1]}")
        start = time.perf_counter()
        device = _model_device(self.model)
        if device != self.x.device:
            self.x = self.x.to(device)
        outputs, found = self._forward_with_layers(self.x)
        row: dict[str, np.ndarray] = {"outputs": outputs.float().cpu().numpy()}
        if "rank" in self.measures:
            row["effective_rank"] = np.array([measures.layer_effective_rank(found[n]) for n in self.layers])
        if "coi" in self.measures:
            row["cost_of_identity"] = np.array([measures.layer_cost_of_identity(found[n], self.coi_gamma0)
                                                for n in self.layers])
        if self.labels is not None and "elasticity" in self.measures:
            labels = self.labels.to(device)
            collapse = np.array([measures.layer_collapse(found[n], labels) for n in self.layers])
            row["nc_within_between"], row["nc_etf_distance"] = collapse[:, 0], collapse[:, 1]
        if "two_point" in self.measures:
            assert self.labels is not None
            targets = torch.nn.functional.one_hot(self.labels, outputs.shape[1]).to(device, outputs.dtype)
            state = measures.two_point_state(found[self.pair_layer], outputs, self.pairs.to(device), targets)
            row.update({f"pair_{k}": v for k, v in state.items()})
        if "hamiltonian" in self.measures:
            profile = np.array(self._hamiltonian())
            row["hamiltonian"], row["momentum_norm"] = profile[:, 0], profile[:, 1]
        if "ntk" in self.measures and step in self.ntk_schedule:
            self._ntk.append(empirical_ntk(self.model, self.x[self.ntk_index.to(device)]).double().cpu().numpy())
            self._ntk_steps.append(int(step))
        self._rows.append(row)
        self._steps.append(int(step))
        self._losses.append(float("nan") if loss is None else float(loss))
        self._seconds.append(time.perf_counter() - start)

    # ---------------------------------------------------------------------------------------------- output

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
        if "two_point" in self.measures:
            x = self.x.reshape(self.x.shape[0], -1).double().cpu()
            i, j = self.pairs[:, 0], self.pairs[:, 1]
            arrays["pairs"] = self.pairs.numpy()
            arrays["pair_X"] = (x[j] - x[i]).pow(2).sum(1).numpy()
            arrays["pair_Y"] = 2.0 * (self.labels[i] != self.labels[j]).double().numpy()
        meta = {"name": self.name, "model": type(self.model).__name__, "layers": self.layers,
                "pair_layer": self.pair_layer, "measures": list(self.measures), "device": str(self.device),
                "probe_shape": list(self.x.shape), "ntk_points": len(self.ntk_index), "coi_gamma0": self.coi_gamma0,
                "weight_decay": self.weight_decay,
                "parameters": int(sum(p.numel() for p in self.model.parameters()))}
        return Recording(arrays=arrays, meta=meta)

    def save(self, root: str | Path) -> Path:
        """Write the recording into the result store at ``root`` (``root/monitor/<name>.npz``), atomically;
        returns its path."""
        return self.recording().save(root)


def _model_device(model: nn.Module) -> torch.device:
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return torch.device("cpu")
