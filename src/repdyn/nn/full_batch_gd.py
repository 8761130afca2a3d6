"""The full-batch gradient-descent protocol of spec 001 §3.3 for batches of shallow univariate ReLU networks
(:class:`repdyn.nn.models.shallow_relu.ShallowReLUBatch`).

This trainer is a step rule of its own, run by :func:`repdyn.nn.driver.drive`, not :func:`repdyn.nn.training.train`:
the protocol needs the λ_max(Θ) step rule with per-network halving, per-network stopping, layers frozen per network,
analytic float64 gradients (spec 001 §3.3, P7) and neuron-trajectory recording.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from repdyn.nn.driver import StepRule, drive
from repdyn.nn.models.shallow_relu import ShallowReLUBatch
from repdyn.nn.recording import Schedule
from repdyn.nn.trajectory import Trajectory
from repdyn.theory.shallow_relu import layer_imbalance, loss_gradients

__all__ = ["GDResult", "train_full_batch_gd"]


@dataclass
class GDResult:
    """What :func:`train_full_batch_gd` returns (NumPy arrays; B networks, M neurons, tracked neurons k).

    params: final (a, b, c), each (B, M). steps: (B,) steps taken per network; time: (B,) physical time Σ η_t;
    converged: (B,) bool; lr_fraction: (B,) the step-size fraction at the end (below the initial one after halvings).
    ntk_initial / ntk_final: (B, n, n). delta_drift: (B,) max over recorded steps and neurons of
    |δ_i(t) − δ_i(0)| / (|δ_i(0)| + |r̂_i(0)|) (M6). Recorded over time, each a :class:`Trajectory` whose
    ``stopped_at`` is the last step of the loop: trajectory, the series ``loss`` (T, B) every ``record_every`` steps
    and at the last; tracked, the series ``neurons`` (T', B, k, 3), the (a, b, c) of the tracked neurons, every
    ``track_every`` steps; snapshots, the series ``a``, ``b``, ``c`` (S, B, M) of every network at the snapshot steps.
    """

    params: tuple[np.ndarray, np.ndarray, np.ndarray]
    steps: np.ndarray
    time: np.ndarray
    converged: np.ndarray
    lr_fraction: np.ndarray
    ntk_initial: np.ndarray
    ntk_final: np.ndarray
    delta_drift: np.ndarray
    trajectory: Trajectory
    tracked: Trajectory
    snapshots: Trajectory


class _FullBatchGD(StepRule):
    """The step rule of :func:`train_full_batch_gd`: step ``t`` evaluates the loss and gradients, records what the
    driver's schedules ``trajectory`` (the loss, checked for finiteness and for every network having stopped),
    ``tracked`` and ``snapshots`` hold at ``t``, and (before ``max_steps``) takes the GD step; the final step
    ``max_steps`` only records. The loop is done once every network has stopped, looked at recorded steps."""

    what = "loss"

    def __init__(self, nets: ShallowReLUBatch, xt: torch.Tensor, yt: torch.Tensor, max_steps: int, lr_fraction: float,
                 lr_every: int, tol: float, track_idx: torch.Tensor, max_move: float | None) -> None:
        self.nets, self.xt, self.yt, self.max_steps, self.lr_every, self.tol = nets, xt, yt, max_steps, lr_every, tol
        self.track_idx, self.max_move = track_idx, max_move
        device, n_nets = nets.a.device, nets.a.shape[0]
        self.tab, self.tc = nets.train_ab[:, None].double(), nets.train_c[:, None].double()
        self.delta0 = layer_imbalance(nets.a, nets.b, nets.c)
        delta_scale = self.delta0.abs() + nets.c.abs() * torch.sqrt(nets.a**2 + nets.b**2)
        self.delta_scale = torch.where(delta_scale > 0, delta_scale, torch.ones_like(delta_scale))
        self.drift = torch.zeros(n_nets, dtype=torch.float64, device=device)
        self.ntk_initial = nets.tangent_kernel(xt)
        self.fraction = torch.full((n_nets,), lr_fraction, dtype=torch.float64, device=device)
        self.active = torch.ones(n_nets, dtype=torch.bool, device=device)
        self.steps = torch.zeros(n_nets, dtype=torch.int64, device=device)
        self.time = torch.zeros(n_nets, dtype=torch.float64, device=device)
        self.lam_max = torch.linalg.eigvalsh(self.ntk_initial)[:, -1]
        self.q90 = max(1, int(np.ceil(0.9 * nets.a.shape[1])))  # the 90th-percentile neuron (k-th smallest of M)
        # Everything recorded stays on the device and is copied to the host once, in result(): the only host
        # synchronisations are the finiteness and all-stopped looks at recorded steps (the trajectory's).
        self.loss_steps: list[int] = []
        self.losses: list[torch.Tensor] = []
        self.track_steps: list[int] = []
        self.trajectory: list[torch.Tensor] = []
        self.snapshots: dict[int, tuple[torch.Tensor, ...]] = {}
        self.previous: torch.Tensor | None = None
        self.threshold: torch.Tensor | None = None
        self.stopped_at = torch.full((), -1, dtype=torch.int64, device=device)  # first step every network stopped
        self.loss: torch.Tensor | None = None
        self.last = -1  # the last step taken
        self.bad = -1  # the step a non-finite recorded loss is named by (-1: none)
        self.stopped = False  # every network stopped, seen at a recorded step, or max_steps reached

    def step(self, step: int, due: tuple[str, ...]) -> torch.Tensor:
        nets = self.nets
        rho, ga, gb, gc = loss_gradients(self.xt, self.yt, nets.a, nets.b, nets.c, nets.alpha)
        loss = 0.5 * (rho**2).sum(-1)
        self.loss, self.last = loss, step
        if step == 0:
            self.threshold = self.tol * torch.maximum(loss, 0.5 * (self.yt**2).sum())
        if self.previous is not None:
            self.fraction = torch.where(loss > 1.01 * self.previous, self.fraction / 2, self.fraction)
        self.active = self.active & (loss > self.threshold)
        self.stopped_at = torch.where((self.stopped_at < 0) & ~self.active.any(), step, self.stopped_at)
        recorded = "trajectory" in due
        if recorded:
            stop = int(self.stopped_at)
            if not bool(torch.isfinite(loss).all()):
                self.bad = step if stop < 0 else stop
                return loss  # the driver raises at its look, before anything of this step is recorded
            self.loss_steps.append(step)
            self.losses.append(loss)
            self.drift = torch.maximum(self.drift, self._drift())
        if "tracked" in due and self.track_idx.numel():
            self.track_steps.append(step)
            self.trajectory.append(torch.stack([nets.a[:, self.track_idx], nets.b[:, self.track_idx],
                                                nets.c[:, self.track_idx]], -1))
        if "snapshots" in due:
            self.snapshots[step] = tuple(t.clone() for t in (nets.a, nets.b, nets.c))
        if step == self.max_steps or (recorded and stop >= 0):
            self.stopped = True
            return loss
        if step % self.lr_every == 0 and step > 0:
            self.lam_max = torch.linalg.eigvalsh(nets.tangent_kernel(self.xt))[:, -1]
        lam_max, tab, tc = self.lam_max, self.tab, self.tc
        lr = torch.where(self.active & (lam_max > 0), self.fraction / lam_max, torch.zeros_like(lam_max))
        if self.max_move is not None:
            speed = torch.sqrt(tab * (ga**2 + gb**2) + tc * gc**2) / torch.sqrt(nets.a**2 + nets.b**2 + nets.c**2
                                                                               ).clamp_min(1e-300)
            lr = torch.minimum(lr, self.max_move / torch.kthvalue(speed, self.q90, dim=-1).values.clamp_min(1e-300))
        nets.a -= lr[:, None] * tab * ga
        nets.b -= lr[:, None] * tab * gb
        nets.c -= lr[:, None] * tc * gc
        self.steps += self.active
        self.time += lr
        self.previous = loss
        return loss

    def _drift(self) -> torch.Tensor:
        nets = self.nets
        return ((layer_imbalance(nets.a, nets.b, nets.c) - self.delta0).abs() / self.delta_scale).amax(-1)

    def finite(self) -> bool:
        return self.bad < 0

    def first_bad_step(self, step: int) -> int:
        return self.bad

    def done(self) -> bool:
        return self.stopped

    _STATE = ("delta0", "delta_scale", "drift", "ntk_initial", "fraction", "active", "lam_max", "previous",
              "threshold", "stopped_at")

    def state(self) -> dict:
        return {**{name: getattr(self, name) for name in self._STATE}, **self.final(),
                "steps": self.steps.clone(), "time": self.time.clone(), "loss_steps": list(self.loss_steps),
                "losses": list(self.losses), "track_steps": list(self.track_steps),
                "trajectory": list(self.trajectory), "snapshots": dict(self.snapshots)}

    def load(self, state: dict) -> None:
        self.restore(state)
        for name in (*self._STATE, "steps", "time", "loss_steps", "losses", "track_steps", "trajectory",
                     "snapshots"):
            setattr(self, name, state[name])

    def result(self, steps: int) -> GDResult:
        # After every network stopped nothing changes (η = 0): what was recorded past that step is dropped, so the
        # result is the one of a loop that stopped there (the loss there is the last one, checked at its record).
        nets, loss = self.nets, self.loss
        last = int(self.stopped_at) if int(self.stopped_at) >= 0 else self.last
        kept = [i for i, s in enumerate(self.loss_steps) if s <= last]
        loss_steps, losses = [self.loss_steps[i] for i in kept], [self.losses[i] for i in kept]
        if loss_steps[-1] != last:
            loss_steps.append(last)
            losses.append(loss)
        track_steps = [s for s in self.track_steps if s <= last]
        trajectory = self.trajectory[:len(track_steps)]
        drift = torch.maximum(self.drift, self._drift())
        host = lambda t: t.detach().cpu().numpy()  # noqa: E731
        empty_track = np.zeros((0, nets.a.shape[0], self.track_idx.numel(), 3))
        snapshots = {s: p for s, p in self.snapshots.items() if s <= last}
        shape = (0, *nets.a.shape)
        return GDResult(
            params=nets.params(), steps=host(self.steps), time=host(self.time), converged=host(loss <= self.threshold),
            lr_fraction=host(self.fraction), ntk_initial=host(self.ntk_initial),
            ntk_final=host(nets.tangent_kernel(self.xt)), delta_drift=host(drift),
            trajectory=Trajectory(np.array(loss_steps), {"loss": host(torch.stack(losses))}, last),
            tracked=Trajectory(np.array(track_steps, dtype=np.int64),
                               {"neurons": host(torch.stack(trajectory)) if trajectory else empty_track}, last),
            snapshots=Trajectory(np.array(sorted(snapshots), dtype=np.int64),
                                 {name: host(torch.stack([snapshots[s][i] for s in sorted(snapshots)])) if snapshots
                                  else host(torch.zeros(shape, dtype=nets.a.dtype)) for i, name in enumerate("abc")},
                                 last))

    def final(self) -> dict:
        return {"params": tuple(t.clone() for t in (self.nets.a, self.nets.b, self.nets.c))}

    def restore(self, final: dict) -> None:
        for tensor, value in zip((self.nets.a, self.nets.b, self.nets.c), final["params"]):
            tensor.copy_(value)


def train_full_batch_gd(nets: ShallowReLUBatch, x: np.ndarray, y: np.ndarray, *, max_steps: int,
                        lr_fraction: float = 0.5, lr_every: int = 100, tol: float = 1e-8,
                        record_every: int = 100, track: np.ndarray | None = None, track_every: int = 20,
                        snapshot_steps: Sequence[int] = (), max_move: float | None = None) -> GDResult:
    """Full-batch GD on L = ½ Σ_j ρ_j² for every network at once (spec 001 §3.3; updates ``nets`` in place).

    Step size η_t = lr_fraction / λ_max(Θ_t) per network, recomputed every ``lr_every`` steps (P3); a network
    whose loss rises by more than 1% in one step has its lr_fraction halved for the rest of the run. A network
    stops when L ≤ tol · max(L_0, ½‖y‖²); the loop ends when all have stopped or after ``max_steps``.
    ``max_move`` (optional) also caps each step so that the 90th percentile over neurons of the relative move
    ‖Δz_i‖/‖z_i‖ of z_i = (a_i, b_i, c_i) is at most ``max_move``: the λ_max rule alone bounds the function-space
    step, not the motion of small neurons, which early in training can jump by more than their own norm.
    Raises :class:`repdyn.nn.Diverged` when a loss becomes NaN/inf. Run by :func:`repdyn.nn.driver.drive`
    (checkpoints, progress, divergence): steps 0 … ``max_steps`` are reported, the last one only records.
    """
    if max_steps < 0 or lr_every < 1 or record_every < 1 or track_every < 1:
        raise ValueError("max_steps must be >= 0 and lr_every, record_every, track_every >= 1")
    if not 0 < lr_fraction < 2:
        raise ValueError(f"lr_fraction={lr_fraction} must lie in (0, 2) (GD stability on the NTK)")
    device = nets.a.device
    xt = torch.tensor(x, dtype=torch.float64, device=device)
    yt = torch.tensor(y, dtype=torch.float64, device=device)
    track_idx = torch.as_tensor(np.zeros(0, dtype=np.int64) if track is None else track, device=device)
    rule = _FullBatchGD(nets, xt, yt, max_steps, lr_fraction, lr_every, tol, track_idx, max_move)
    record = {"trajectory": Schedule.every(record_every, max_steps), "tracked": range(0, max_steps + 1, track_every),
              "snapshots": frozenset(snapshot_steps)}
    return drive(rule, max_steps + 1, record=record, capped=True)
