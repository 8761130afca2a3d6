"""The batch-1 SGD loop of seed 004 with the per-iteration logit log of spec 004 §3.5, for ensembles of the LeNet of
:mod:`repdyn.nn.models.lenet`, many independent trials trained as one batched computation.

Each trial draws its own training example per iteration (the shared ``train`` loop draws one batch order for all
members, so the paper's independent SGD orders need this loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from repdyn.nn.driver import StepRule, drive
from repdyn.nn.ensemble import Ensemble
from repdyn.nn.losses import cross_entropy
from repdyn.nn.models.lenet import LeNet
from repdyn.nn.trajectory import Trajectory

__all__ = ["SGDLog", "train_batch1_sgd"]


@dataclass
class SGDLog:
    """What :func:`train_batch1_sgd` records (NumPy; t = iteration, r = trial).

    trajectory: every iteration t = 0..T−1 (``stopped_at`` = T), the series ``sample`` (T, R), the index of the
    training example drawn at iteration t, ``label`` (T, R) its (possibly corrupted) training label, ``logits``
    (T, R, K) its logits before that iteration's update and ``loss`` (T, R) its loss. validation: the iterations after
    whose update the clean validation set was evaluated (0 = initial model), the series ``loss`` and ``accuracy``
    (V, R), mean cross-entropy and accuracy.
    """

    trajectory: Trajectory
    validation: Trajectory


@torch.no_grad()
def _validate(model: Ensemble, x_val: Tensor, y_val: Tensor, chunk: int = 512) -> tuple[Tensor, Tensor]:
    """Mean loss and accuracy per trial on the validation set, ``chunk`` images at a time: the peak memory is about
    R·chunk images' activations (R = 100 trials and chunk = 512 in float64 need 16–24 GB), so it is a setting."""
    losses, correct = [], []
    for start in range(0, len(x_val), chunk):
        logits = model(x_val[start:start + chunk])                  # (R, n, K)
        yb = y_val[start:start + chunk]
        losses.append(cross_entropy(logits, yb).sum(-1))
        correct.append((logits.argmax(-1) == yb).sum(-1))
    n = len(x_val)
    return torch.stack(losses).sum(0) / n, torch.stack(correct).sum(0).to(losses[0].dtype) / n


def _conv1_index(channels: int, device: torch.device) -> Tensor:
    """(C·25·784,) position in a flattened C×32×32 image of each entry of its first-layer ``unfold`` columns, the 28²
    output positions ordered (pooled row, pooled column, row in the 2×2 window, column in it): each max-pooling
    window is 4 adjacent columns, so the pooling is a max over a last axis of 4 (window scan order, as
    ``max_pool2d``: the first maximum wins). The index is ``unfold`` applied to the pixel positions themselves."""
    where = torch.arange(channels * 1024, dtype=torch.float64).view(1, channels, 32, 32)
    cols = F.unfold(where, 5).view(1, -1, 14, 2, 14, 2).permute(0, 1, 2, 4, 3, 5)
    return cols.reshape(-1).to(device=device, dtype=torch.long)


def _conv1_columns(x: Tensor, index: Tensor | None = None) -> Tensor:
    """First-layer columns (n, C·25, 784) of 32×32 images in pooled order (:func:`_conv1_index`), gathered from the
    flattened images (one ``index_select``: 15× cheaper than ``unfold`` and a permuted copy, and no table of the
    whole training set to read from, docs/reproduction/004.md, seventh session)."""
    if index is None:
        index = _conv1_index(x.shape[1], x.device)
    return x.reshape(len(x), -1).index_select(1, index).view(len(x), -1, 784)


def _conv2_index(device: torch.device) -> Tensor:
    """(6·25·100,) position in the flattened 6×14×14 input of the second convolution of each entry of its ``unfold``
    columns (channel, kernel row, kernel column, output row, output column): ``index_select`` along it builds the
    columns, ``index_add_`` along it folds their gradient (the adjoint of ``unfold``)."""
    k, o = torch.arange(5, device=device), torch.arange(10, device=device)
    rows = (k[:, None, None, None] + o[None, None, :, None]) * 14
    within = (rows + k[None, :, None, None] + o[None, None, None, :]).reshape(-1)
    return (torch.arange(6, device=device)[:, None] * 196 + within).reshape(-1)


@torch.no_grad()
def _sgd_step(params: Mapping[str, Tensor], cols1: Tensor, labels: Tensor, lr: float,
              conv2_index: Tensor) -> tuple[Tensor, Tensor]:
    """One plain SGD step of R LeNets, each on its own example, with the backward pass written out (no autograd):
    ``cols1`` (R, C·25, 784) are the examples' first-layer columns (:func:`_conv1_columns`), ``labels`` (R,).
    Updates ``params`` in place by −lr × the gradient of each trial's cross-entropy (the gradient outer products
    fused into the update); returns the pre-update logits (R, K) and losses (R,). The same function as autograd
    through :meth:`LeNet.forward` (tests/nn/test_batch1_sgd.py: against ``torch.optim.SGD`` member by member). Layouts
    chosen for CPU cost (docs/reproduction/004.md, sixth and seventh sessions): each ReLU after its pooling (max
    commutes with it), the first pooling a max over adjacent columns, the second layer's columns gathered by
    ``index_select`` (:func:`_conv2_index`) and their gradient folded by ``index_add_`` along the same index, the
    second unpooling a ``scatter_``, the linear layers as row vector × matrix."""
    R = cols1.shape[0]
    w1, w2 = params["conv1.weight"].view(R, 6, -1), params["conv2.weight"].view(R, 16, -1)
    z1 = torch.baddbmm(params["conv1.bias"].unsqueeze(-1), w1, cols1)             # (R, 6, 784), pooled order
    p1, i1 = z1.view(R, 6, 196, 4).max(-1)                                         # (R, 6, 196)
    a1 = p1.clamp_min(0).view(R, 6, 14, 14)
    cols2 = a1.view(R, 1176).index_select(1, conv2_index).view(R, 150, 100)
    z2 = torch.baddbmm(params["conv2.bias"].unsqueeze(-1), w2, cols2)             # (R, 16, 100)
    p2, i2 = F.max_pool2d_with_indices(z2.view(R, 16, 10, 10), 2)                  # (R, 16, 5, 5)
    hidden = [p2.clamp_min(0).view(R, 1, 400)]
    for name in ("fc1", "fc2", "output"):
        z = torch.baddbmm(params[f"{name}.bias"].unsqueeze(1), hidden[-1], params[f"{name}.weight"].transpose(1, 2))
        hidden.append(z if name == "output" else z.clamp_min(0))                   # (R, 1, out)
    logits = hidden.pop().squeeze(1)
    logp = torch.log_softmax(logits, -1)
    loss = -logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    grad = logp.exp()
    grad[torch.arange(R, device=grad.device), labels] -= 1                         # d loss / d logits
    grad = grad.unsqueeze(1)                                                       # (R, 1, K)
    for name, below in zip(("output", "fc2", "fc1"), reversed(hidden)):
        weight = params[f"{name}.weight"]
        down = torch.bmm(grad, weight)                                              # before the update
        weight.addcmul_(grad.transpose(1, 2), below, value=-lr)
        params[f"{name}.bias"].sub_(grad.squeeze(1), alpha=lr)
        grad = down * (below > 0)                                                   # through the ReLU (and pool)
    g2 = torch.zeros_like(z2).scatter_(2, i2.view(R, 16, 25), grad.view(R, 16, 25))    # max_unpool2d
    g_cols2 = torch.bmm(w2.transpose(1, 2), g2)                                    # (R, 150, 100), before the update
    w2.baddbmm_(g2, cols2.transpose(1, 2), alpha=-lr)
    params["conv2.bias"].sub_(g2.sum(-1), alpha=lr)
    g_a1 = torch.zeros_like(p1).view(R, 1176).index_add_(1, conv2_index, g_cols2.view(R, 15000)).view(R, 6, 196)
    g1 = torch.zeros_like(z1).view(R, 6, 196, 4).scatter_(-1, i1.unsqueeze(-1), (g_a1 * (p1 > 0)).unsqueeze(-1))
    g1 = g1.view(R, 6, 784)
    w1.baddbmm_(g1, cols1.transpose(1, 2), alpha=-lr)
    params["conv1.bias"].sub_(g1.sum(-1), alpha=lr)
    return logits, loss


class _Batch1SGD(StepRule):
    """The step rule of :func:`train_batch1_sgd`: step ``t`` validates the model it starts from where the driver's
    ``validation`` schedule holds ``t``, then draws nothing (the sample order is drawn before the loop), takes every
    trial's SGD step on its example ``order[:, t]`` and logs its logits and loss in the preallocated device log; the
    last step, ``steps``, only validates. The driver's looks, every ``check_every`` steps, check the log since the
    last look."""

    what = "loss"

    def __init__(self, model: Ensemble, x_train: Tensor, y_train: Tensor, x_val: Tensor, y_val: Tensor, steps: int,
                 lr: float, generator: torch.Generator, val_chunk: int) -> None:
        self.model, self.x_val, self.y_val, self.lr, self.steps = model, x_val, y_val, lr, steps
        self.val_chunk = val_chunk
        R, n = model.k, len(x_train)
        self.params = model.params
        dtype, device = self.params["conv1.weight"].dtype, self.params["conv1.weight"].device
        self.flat, self.conv1_index = x_train.reshape(n, -1), _conv1_index(x_train.shape[1], device)
        self.conv2_index = _conv2_index(device)
        self.order = torch.randint(0, n, (R, steps), generator=generator).to(x_train.device)
        self.labels = y_train[self.order]                                 # (R, T)
        self.logits_log = torch.empty(R, steps, model.base.output.out_features, dtype=dtype, device=device)
        self.loss_log = torch.empty(R, steps, dtype=dtype, device=device)
        self.val_steps: list[int] = []
        self.val_loss: list[Tensor] = []
        self.val_acc: list[Tensor] = []
        self.taken = 0      # steps taken: the log holds iterations [0, taken)
        self.checked = 0    # the log is known finite on [0, checked)
        self.bad: Tensor | None = None

    def step(self, t: int, due: tuple[str, ...]) -> Tensor | None:
        if due:
            self._evaluate(t)
            self.model.train()
        if t == self.steps:
            return None
        cols = _conv1_columns(self.flat.index_select(0, self.order[:, t]), self.conv1_index)
        logits, loss = _sgd_step(self.params, cols, self.labels[:, t], self.lr, self.conv2_index)  # one per trial
        self.logits_log[:, t] = logits
        self.loss_log[:, t] = loss
        self.taken = t + 1
        return loss

    def _evaluate(self, step: int) -> None:
        loss, acc = _validate(self.model, self.x_val, self.y_val, self.val_chunk)
        self.val_steps.append(step)
        self.val_loss.append(loss)
        self.val_acc.append(acc)

    def finite(self) -> bool:
        """Whether the log since the last look is finite (one host synchronisation per look)."""
        if self.taken == self.checked:
            return True
        self.bad = ~torch.isfinite(self.loss_log[:, self.checked:self.taken]).all(0)
        return not bool(self.bad.any())

    def first_bad_step(self, step: int) -> int:
        """The first iteration whose loss is not finite for some trial: the same step whatever ``check_every``
        (the updates after a NaN only carry it on)."""
        return self.checked + int(torch.nonzero(self.bad)[0, 0])

    def look(self, step: int) -> None:
        self.checked = self.taken

    def state(self) -> dict:
        t = self.taken
        return {"taken": t, "checked": self.checked, "model": self.model.snapshot(),
                "logits": self.logits_log[:, :t].clone(), "loss": self.loss_log[:, :t].clone(),
                "val_steps": list(self.val_steps), "val_loss": list(self.val_loss), "val_acc": list(self.val_acc)}

    def load(self, state: dict) -> None:
        self.model.restore(state["model"])
        self.taken, self.checked = state["taken"], state["checked"]
        self.val_steps, self.val_loss, self.val_acc = state["val_steps"], state["val_loss"], state["val_acc"]
        self.logits_log[:, :self.taken], self.loss_log[:, :self.taken] = state["logits"], state["loss"]
        self.model.train()

    def result(self, steps: int) -> SGDLog:
        every = {"sample": self.order.cpu().numpy().T, "label": self.labels.cpu().numpy().T,
                 "logits": self.logits_log.cpu().numpy().transpose(1, 0, 2), "loss": self.loss_log.cpu().numpy().T}
        validation = {"loss": torch.stack(self.val_loss).cpu().numpy(),
                      "accuracy": torch.stack(self.val_acc).cpu().numpy()}
        return SGDLog(Trajectory(np.arange(self.steps), every, self.steps),
                      Trajectory(np.array(self.val_steps), validation, self.steps))

    def final(self) -> dict:
        return {"model": self.model.snapshot()}

    def restore(self, final: dict) -> None:
        self.model.restore(final["model"])


def train_batch1_sgd(model: Ensemble, x_train: Tensor, y_train: Tensor, x_val: Tensor, y_val: Tensor, *,
                     steps: int, lr: float, generator: torch.Generator, val_every: int, val_chunk: int = 512,
                     check_every: int = 1000) -> SGDLog:
    """Plain SGD with batch size 1 (no momentum, no weight decay), spec 004 §3.5: at each iteration every trial
    draws its own example uniformly from the whole training set, records its pre-update logits and loss, and
    steps; the clean validation set is evaluated after every ``val_every``-th update (and at initialisation),
    ``val_chunk`` images at a time. The log is preallocated on the model's device and copied to the host once at
    the end (no copy or synchronisation per iteration, so a GPU is not stalled). Run by
    :func:`repdyn.nn.driver.drive`, which looks every ``check_every`` iterations and at the end: it raises
    :class:`~repdyn.nn.divergence.Diverged` at the first non-finite loss of any trial (the step it names does not
    depend on ``check_every``: the updates after a NaN only carry it on), and under a :mod:`~repdyn.nn.checkpoint`
    checkpointer it saves the loop's state every few minutes and resumes from it bit for bit (the sample order is
    drawn from ``generator`` before the loop, so a rerun draws it again)."""
    if min(steps, val_every, val_chunk, check_every) < 1:
        raise ValueError(f"need steps, val_every, val_chunk, check_every >= 1, got {steps}, {val_every}, "
                         f"{val_chunk}, {check_every}")
    if lr <= 0:
        raise ValueError(f"learning rate lr={lr!r} must be > 0")
    if not isinstance(model.base, LeNet) or x_train.shape[-2:] != (32, 32):
        raise ValueError(f"train_batch1_sgd trains LeNet ensembles on 32×32 images, got {type(model.base).__name__} "
                         f"and {tuple(x_train.shape[-2:])}")
    rule = _Batch1SGD(model, x_train, y_train, x_val, y_val, steps, lr, generator, val_chunk)
    return drive(rule, steps + 1, record={"validation": range(0, steps + 1, val_every)}, sync_every=check_every)
