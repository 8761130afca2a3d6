"""The two-point state (u, v, w, ȳ) of seed 000 measured on any network, at any layers, for any input pair.

u = ‖h(x_2) − h(x_1)‖² at a hidden layer, v = ‖dy‖² with dy = f(x_2) − f(x_1) the difference of the predicted
outputs, w = ‖dy‖² − dyᵀ(y_2 − y_1) (Eq. 8) and ȳ = (f(x_1) + f(x_2))/2, the mean prediction that makes Eq. 9 exact
(spec 000 §2.5 and §7.10). Measurements run in eval mode without gradients (spec 000 §3.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from repdyn.nn.ensemble import Ensemble
from repdyn.nn.recording import PassRecorder, Recorder
from repdyn.probes.activations import activations, check_layers, layer_names

OUTPUT = "output"
"""The layer name of the network output (:class:`repdyn.nn.models.mlp.MLP`, :class:`repdyn.nn.models.cnn.ConvChain`)."""


@dataclass(frozen=True)
class TwoPointState:
    """u: (..., L) one squared distance per requested layer; v, w: (...); ybar: (..., d_out)."""

    u: Tensor
    v: Tensor
    w: Tensor
    ybar: Tensor

    def packed(self) -> Tensor:
        """(..., L + 2 + d_out): u per layer, v, w, ȳ — one tensor, for a training recorder."""
        return torch.cat([self.u, self.v.unsqueeze(-1), self.w.unsqueeze(-1), self.ybar], dim=-1)

    @staticmethod
    def unpack(packed: Tensor, n_layers: int) -> TwoPointState:
        """Inverse of :meth:`packed` (works on NumPy-converted recordings too, via torch.as_tensor)."""
        packed = torch.as_tensor(packed)
        return TwoPointState(u=packed[..., :n_layers], v=packed[..., n_layers], w=packed[..., n_layers + 1],
                             ybar=packed[..., n_layers + 2:])


def _split_pair(t: Tensor, name: str) -> tuple[Tensor, Tensor]:
    if t.dim() < 2 or t.shape[-2] != 2:
        raise ValueError(f"{name} must hold exactly two points on its second-to-last axis (..., 2, d); "
                         f"got shape {tuple(t.shape)}")
    return t[..., 0, :], t[..., 1, :]


def pair_statistics(hidden: Sequence[Tensor], outputs: Tensor, targets: Tensor) -> TwoPointState:
    """(u, v, w, ȳ) from representations and outputs of the two points.

    ``hidden``: one tensor per layer, shape (..., 2, f...) (features flattened); ``outputs``: (..., 2, d_out);
    ``targets``: (2, d_out) or (..., 2, d_out).
    """
    us = []
    for h in hidden:
        h1, h2 = _split_pair(h, "representations")
        us.append((h2 - h1).pow(2).sum(-1))
    f1, f2 = _split_pair(outputs, "outputs")
    y1, y2 = _split_pair(targets.to(outputs.dtype), "targets")
    dy = f2 - f1
    v = dy.pow(2).sum(-1)
    w = v - (dy * (y2 - y1)).sum(-1)
    return TwoPointState(u=torch.stack(us, dim=-1), v=v, w=w, ybar=0.5 * (f1 + f2))


def _state_of(found: Mapping[str, Tensor], layers: Sequence[str], outputs: Tensor, y: Tensor, lead: int
              ) -> TwoPointState:
    """:func:`pair_statistics` of the representations ``found`` at ``layers``, each (lead dims..., f...) with the
    per-point feature dims (conv maps etc.) flattened; ``lead`` = 2 for an ensemble's (K, 2, ...), 1 for (2, ...)."""
    return pair_statistics([found[name].flatten(start_dim=lead) for name in layers], outputs, y)


@torch.no_grad()
def measure_two_point(model: nn.Module, x: Tensor, y: Tensor, layers: Sequence[str]) -> TwoPointState:
    """Measure (u at each of ``layers``, v, w, ȳ) for the input pair ``x`` ((2, d) or, for an ensemble,
    per-member (K, 2, d)) with targets ``y``. Works for any module whose layers are named submodules and for an
    :class:`repdyn.nn.ensemble.Ensemble` (leading K axis on every result). Eval mode; the mode is restored."""
    layers = check_layers(model, layers)
    if OUTPUT in layer_names(model):  # the output from the same (eval-mode) forward pass as the hidden layers
        found = activations(model, x, layers if OUTPUT in layers else [*layers, OUTPUT])
        outputs = found[OUTPUT]
    else:
        was_training = model.training
        model.eval()
        try:
            found = activations(model, x, layers)
            outputs = model(x)
        finally:
            model.train(was_training)
    return _state_of(found, layers, outputs, y, 2 if isinstance(model, Ensemble) else 1)


def two_point_recorder(x: Tensor, y: Tensor, layers: Sequence[str]) -> Recorder:
    """A training recorder returning :meth:`TwoPointState.packed` (K, L + 2 + d_out) at recorded steps."""

    def record(_step: int, model: nn.Module) -> Tensor:
        return measure_two_point(model, x, y, layers).packed()

    def from_pass(found: Mapping[str, Tensor]) -> Tensor:  # an ensemble's forward pass: (K, 2, f...) per layer
        return _state_of(found, layers, found[OUTPUT], y, 2).packed()

    layers = list(layers)
    return PassRecorder(record, x, [*layers, OUTPUT], from_pass)
