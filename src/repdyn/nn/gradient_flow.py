"""Adaptive-step gradient flow on the hinge loss of the one-hidden-layer network of seed 003
(:mod:`repdyn.nn.models.hidden_layer`).

Predictor F = α(f − f₀) with f₀ the frozen network at initialisation. Loss (spec 003 §2.3, P1):
L = (1/(αp)) Σ_μ max(0, 1 − α y^μ (f − f₀)(x^μ)), whose negative gradient is exactly Eq. (2) (no α in front of
∂_W f). The integrator is the adaptive-step explicit Euler of spec 003 §2.4 (defined only in the reference
code), with the stopping rule and t* of §2.5. Trials (seeds) are stacked on a leading axis and integrated as
one batched computation; every trial keeps its own step size and stops on its own.

Gradients are written out in closed form (Eq. 4) instead of autograd: the network is three tensors and the
closed form is ~3× cheaper; tests check it against autograd.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from repdyn.nn.driver import AdaptiveEuler, StepRule, drive
from repdyn.nn.losses import hinge_of_margins
from repdyn.nn.models.hidden_layer import SQRT2, HiddenLayerNet, preact, stack_params, unstack_params
from repdyn.nn.trajectory import Trajectory
from repdyn.theory.compression import amplification

__all__ = ["FlowResult", "hinge_descent_direction", "hinge_loss", "margin_hinge_loss", "train_gradient_flow"]


def hinge_loss(f_centered: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """L = (1/(αp)) Σ_μ max(0, 1 − α y f̃) per trial (spec 003 §2.3: the 1/α makes −∇L equal Eq. 2)."""
    return margin_hinge_loss(alpha * y * f_centered, alpha)


def margin_hinge_loss(margins: torch.Tensor, alpha: float) -> torch.Tensor:
    """:func:`hinge_loss` from the margins α y f̃ (the integrator has them already)."""
    return hinge_of_margins(margins).mean(dim=-1) / alpha


def hinge_descent_direction(net: HiddenLayerNet, x: torch.Tensor, y: torch.Tensor, f0: torch.Tensor,
                            alpha: float) -> tuple[torch.Tensor, HiddenLayerNet]:
    """(f̃ = f − f₀ on x, −∇L) with −∇L = (1/p) Σ_μ ∂_W f(x^μ) y^μ Θ(1 − y^μ F^μ) (Eqs. 2 and 4)."""
    h, d = net.w.shape[1], net.w.shape[2]
    p = x.shape[1]
    u = preact(net, x)
    act = u.clamp_min(0)
    f_centered = torch.bmm(act, net.beta.unsqueeze(-1)).squeeze(-1) * (SQRT2 / h) - f0
    g = y * (alpha * y * f_centered < 1).to(u.dtype) * (SQRT2 / (h * p))
    dbeta = torch.bmm(g.unsqueeze(1), act).squeeze(1)
    a = (u > 0).to(u.dtype) * g.unsqueeze(-1)
    db = a.sum(dim=1) * net.beta
    dw = torch.bmm(a.transpose(1, 2), x) * (net.beta / math.sqrt(d)).unsqueeze(-1)
    return f_centered, HiddenLayerNet(dw, db, dbeta)


@dataclass
class FlowResult:
    """Outcome of :func:`train_gradient_flow`, one entry per trial.

    t_star: first time the fitted fraction #{y F ≥ 1}/p exceeds 0.1 (NaN if never); at_t_star: the weights at
    that step; lambda_star / lambda_max: Λ(t*) and max_t Λ(t) (Eq. 9); stopped: reached the stop fraction
    (else capped by ``max_steps``). trajectory: ``stopped_at`` the steps taken (accepted and rejected); the recorded
    steps (every ``record_every``-th and the last; none with ``record_every = 0``) and, at those steps, the series
    ``t``, ``amplification`` (Λ), ``fitted`` (the fitted fraction), ``loss`` and ``dt`` (T, S), and with traced
    neurons ``neurons`` (T, S, k, d + 2), their weights as columns (ω, b, β).
    """

    net: HiddenLayerNet
    f0_train: torch.Tensor
    t: torch.Tensor
    t_star: torch.Tensor
    lambda_star: torch.Tensor
    lambda_max: torch.Tensor
    at_t_star: HiddenLayerNet
    stopped: torch.Tensor
    trajectory: Trajectory


class _Workspace:
    """The (S, p, h) buffer of one batched integration, allocated once.

    The pre-activations u, their ReLU and the gate Θ(u) are the only large tensors of a step; all three are written
    into one fixed buffer in turn (``out=`` and in-place ops), which removes the per-step allocation of such
    tensors, whose page faults made ~40 % of the CPU time system time. Parameters are one (S, h, d + 2) tensor
    θ = [ω, b, β], so a trial step, an accept and the flat gradient are one op each. The inputs carry a ones column,
    xs = [x/√d, 1]: u = xs [ω, b]ᵀ and the gradient of [ω, b] is β ⊙ Θ(u)ᵀ (g xs) with g = y Θ(1 − y F) / (h p) · √2.
    The two products over the large buffer are written with it as the right-hand factor (f̃ᵀ = βᵀ σ(u)ᵀ and
    (g xs)ᵀ Θ(u)): MKL's batched matrix-vector and tall-skinny products with the (p, h) buffer on the left were 5-7×
    slower (h = 100, p = 1024: 1.26 and 2.16 ms against 0.18 and 0.32 ms). The sums are the same, in another order
    (float rounding).
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, alpha: float, h: int) -> None:
        n_trials, p, d = x.shape
        self.d, self.h, self.alpha = d, h, alpha
        self.xs = torch.cat([x / math.sqrt(d), torch.ones_like(x[..., :1])], dim=-1)
        self.y = y
        self.alpha_y = alpha * y
        self.y_scaled = y * (SQRT2 / (h * p))
        self.u = x.new_empty(n_trials, p, h)
        self.f0 = torch.zeros_like(y)

    def subset(self, keep: torch.Tensor) -> _Workspace:
        """The workspace of the trials ``keep`` only (new, smaller buffers)."""
        ws = _Workspace.__new__(_Workspace)
        ws.d, ws.h, ws.alpha = self.d, self.h, self.alpha
        ws.xs, ws.y, ws.alpha_y, ws.y_scaled, ws.f0 = (v[keep] for v in (self.xs, self.y, self.alpha_y,
                                                                         self.y_scaled, self.f0))
        ws.u = self.u.new_empty(keep.numel(), *self.u.shape[1:])
        return ws

    def direction(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(f̃ = f − f₀ on the training set (S, p), −∇L as (S, h, d + 2), the margins α y f̃ and the hinge's active
        set α y f̃ < 1) at parameters θ; the first two are :func:`hinge_descent_direction`'s."""
        d1 = self.d + 1
        torch.bmm(self.xs, theta[..., :d1].transpose(1, 2), out=self.u)
        act = self.u.clamp_min_(0)
        beta = theta[..., d1]
        f_centered = torch.bmm(beta.unsqueeze(1), act.transpose(1, 2)).squeeze(1).mul_(SQRT2 / self.h).sub_(self.f0)
        margins = self.alpha_y * f_centered
        active = margins < 1
        g = torch.where(active, self.y_scaled, 0.0)
        dbeta = torch.bmm(g.unsqueeze(1), act).squeeze(1)
        gate = act.sign_()  # Θ(u), in the same buffer (σ(u) is no longer needed)
        dwb = torch.bmm((self.xs * g.unsqueeze(-1)).transpose(1, 2), gate).transpose(1, 2).mul_(beta.unsqueeze(-1))
        return f_centered, torch.cat([dwb, dbeta.unsqueeze(-1)], dim=-1), margins, active


class _Records:
    """The per-step records (t, Λ, fitted fraction, loss, dt) of a batched integration, (5, S, T) at the end.

    A step's record is its own (S,) tensors, kept as they are (the loop makes new ones every step) and stacked once
    at the end: recording costs no tensor operation per step. After a compaction the records hold the running
    trials ``idx`` only; each stopped trial repeats the values it had when it was dropped (``freeze``)."""

    def __init__(self, n_trials: int, dtype: torch.dtype, device: torch.device) -> None:
        self.dtype = dtype
        self.blocks: list[torch.Tensor] = []  # (5, S, T) each, the steps before the latest compaction
        self.pending: list[tuple[torch.Tensor, ...]] = []  # (t, Λ, fitted, loss, dt) of the trials idx, a step each
        self.frozen = torch.zeros(5, n_trials, dtype=dtype, device=device)
        self.idx: torch.Tensor | None = None  # None: every trial

    def add(self, *values: torch.Tensor) -> None:
        self.pending.append(values)

    def _rows(self, columns: torch.Tensor) -> torch.Tensor:
        """(5, len(idx), T) → (5, S, T): the stopped trials' frozen values around the running ones."""
        if self.idx is None:
            return columns
        rows = self.frozen.unsqueeze(-1).expand(-1, -1, columns.shape[-1]).clone()
        return rows.index_copy_(1, self.idx, columns)

    def flush(self) -> None:
        if self.pending:
            columns = torch.stack([torch.stack(v, dim=-1).to(self.dtype) for v in zip(*self.pending, strict=True)])
            self.blocks.append(self._rows(columns))
            self.pending = []

    def freeze(self, *values: torch.Tensor) -> None:
        """Before a compaction: the current values of the running trials become those of every trial's record."""
        self.flush()
        self.frozen = self._rows(torch.stack([v.to(self.dtype) for v in values]).unsqueeze(-1)).squeeze(-1)

    def state(self) -> dict:
        self.flush()
        return {"blocks": list(self.blocks), "frozen": self.frozen}

    def compact(self, idx: torch.Tensor) -> None:
        """From here on the records hold the trials ``idx`` only (after :meth:`freeze`)."""
        self.idx = idx

    def restore(self, state: dict, idx: torch.Tensor) -> None:
        self.blocks, self.pending, self.frozen = list(state["blocks"]), [], state["frozen"]
        self.idx = idx if idx.numel() < self.frozen.shape[1] else None

    def stacked(self) -> torch.Tensor:
        """(5, S, T) of every record, outside inference mode."""
        self.flush()
        return torch.cat(self.blocks, dim=-1) if len(self.blocks) > 1 else self.blocks[0].clone()


def train_gradient_flow(net: HiddenLayerNet, x: torch.Tensor, y: torch.Tensor, alpha: float, *,
                        d_parallel: int = 1, max_dgrad: float = 1e-4, max_dout: float = 0.1,
                        stop_fraction: float = 1.0, max_steps: int = 100_000, trace_neurons: int = 0,
                        record_every: int = 1, dgrad_free_dt: float | None = None,
                        sync_every: int | None = None, grow_on_jumps: bool = True) -> FlowResult:
    """Integrate Eq. (2) with the adaptive Euler rule of spec 003 §2.4, batched over trials.

    Per trial: dt starts at 1; a tentative step θ − dt∇L is accepted when dgrad = ‖g − g_new‖²/(‖g‖‖g_new‖)
    < max_dgrad and dout = max_μ |f̃_new − f̃| < max_dout/α (so F moves by at most max_dout); dt grows ×1.1
    when both are below half their thresholds; a rejected step is undone and dt ÷ 10. Jump rule (ours, not
    in the paper or its code): a step across which a training point enters or leaves the hinge's active set,
    or a retry after a dgrad rejection whose dgrad fell by less than 10× (a smooth change falls ~100× per ÷10
    of dt), is a jump of the piecewise-smooth flow and is judged by dout alone. Without it the rule stalls
    (dt → 10⁻¹⁶) at the first ReLU-gate crossing whose jump alone exceeds max_dgrad (a dominant neuron
    crossing one point gives dgrad ~ 100/p², negligible only at the paper's p ~ 10⁴), and in every sliding
    mode where a point chatters on its margin during fitting. Small-step rule (ours): once dt < ``dgrad_free_dt``
    (default τ/160, τ = h√(d/2) the neuron time scale of Eq. 5) the dgrad test is skipped and only dout is checked.
    A dominant neuron's ReLU hyperplane can sit exactly on a training point; rounding-level gate flips then give
    dgrad spikes of 10⁻³-10⁻² at every dt, the ÷10 ratchet drives dt to 10⁻¹³ and time stops (seen at h = 100,
    p = 1024 with ~72 % fitted). Below τ/160 the Euler error of the smooth part is negligible, so skipping the
    test there changes neither t* nor Λ*; ``dgrad_free_dt=0`` restores the plain rule. Growth rule (ours): a step
    accepted without the dgrad test (a jump, or dt below ``dgrad_free_dt``) lets dt grow when dout allows it. Without
    it (``grow_on_jumps=False``) a point chattering on its margin keeps dgrad above max_dgrad/2 at every step, dt
    never grows again and the fitting regime crawls at dt ≈ 0.2 (h = 100: runs capped at 4000 steps with 50-80 %
    fitted); with it the same runs go 2-3× further in time per step, and t*, Λ* move by < 2 % (integration error).
    A trial stops when
    its fitted fraction #{y F ≥ 1}/p reaches ``stop_fraction`` (1: zero hinge loss, the paper's rule) or
    after ``max_steps`` iterations (recorded in ``stopped``). Raises :class:`~repdyn.nn.divergence.Diverged` on
    NaN/inf. The decisions and dt updates are :class:`repdyn.nn.driver.AdaptiveEuler`'s; the loop is run by
    :func:`repdyn.nn.driver.drive` (checkpoints: under a :mod:`~repdyn.nn.checkpoint` checkpointer it saves its whole
    state every few minutes and resumes bit for bit; progress; the divergence check).

    Trials that have stopped are dropped from the computation (at a look, once at most half of the integrated
    trials still run), so one slow trial does not make the others' zero steps cost full price.

    Device-resident: step control, t*, Λ* and the records stay on x's device; the host looks at them (to stop the
    loop, to check for NaN) only every ``sync_every`` steps (default 1 on the CPU, where looking is free, and 64 on
    a GPU). A stopped trial takes zero steps, so syncing later only repeats its final state in the records. Where
    the host looks at every step (``sync_every=1``) it also skips the selects that would change nothing: the
    accept selects when every trial accepts (~70 % of the steps of a 10-trial batch), the t* selects when no trial
    reaches t*, the running mask when every trial runs (the same bits; 10-20 % of a step at p = 128). The
    weights' dtype is the computation's (float32 suffices for the network); times are kept in float64.

    ``record_every``: steps between the trajectory's records; 0 records none (its series are empty, the loss of a
    step is not computed): the dynamics, t, t*, Λ*, Λ_max and the weights are the same bits either way.

    x: (S, p, d), y: (S, p); the input ``net`` is the initialisation f₀ and is not modified.
    """
    if not 0 < stop_fraction <= 1:
        raise ValueError(f"stop_fraction={stop_fraction} must be in (0, 1]")
    if alpha <= 0 or max_dgrad <= 0 or max_dout <= 0:
        raise ValueError(f"alpha={alpha}, max_dgrad={max_dgrad}, max_dout={max_dout} must all be > 0")
    if sync_every is None:
        sync_every = 1 if x.device.type == "cpu" else 64
    if sync_every < 1 or record_every < 0:
        raise ValueError(f"sync_every={sync_every} must be >= 1 and record_every={record_every} >= 0")
    if record_every == 0 and trace_neurons:
        raise ValueError("trace_neurons needs the per-step records (record_every >= 1)")
    if dgrad_free_dt is None:
        dgrad_free_dt = net.w.shape[1] * math.sqrt(net.w.shape[2] / 2) / 160
    control = AdaptiveEuler(max_dgrad, max_dout, grow_on_jumps=grow_on_jumps)
    rule = _Flow(net, x, y, alpha, d_parallel, control, dgrad_free_dt, stop_fraction, trace_neurons,
                 records=record_every > 0, host=sync_every == 1)
    record = {"trajectory": range(0, max_steps + 1, record_every)} if record_every else None
    return drive(rule, max_steps, record=record, sync_every=sync_every, capped=True, inference=True)


class _Flow(StepRule):
    """The step rule of :func:`train_gradient_flow`: a step is one tentative Euler step of every integrated trial,
    judged by the controller; a look drops the stopped trials from the batch once at most half of them still run.

    State: θ, its gradient, ‖g‖, f̃, margins and active set of the accepted point, per trial dt, t, t*, Λ, Λ*, Λ_max,
    θ(t*), fitted fraction, running flag and the dgrad of its last rejection, for the trials ``idx`` still
    integrated; ``full`` holds every trial's values as they were when it was dropped."""

    what = "network output"

    def __init__(self, net: HiddenLayerNet, x: torch.Tensor, y: torch.Tensor, alpha: float, d_parallel: int,
                 control: AdaptiveEuler, dgrad_free_dt: float, stop_fraction: float, trace_neurons: int,
                 records: bool, host: bool) -> None:
        n_trials, h = x.shape[0], net.w.shape[1]
        self.alpha, self.d_parallel, self.control, self.dgrad_free_dt = alpha, d_parallel, control, dgrad_free_dt
        self.stop_fraction, self.trace_neurons, self.records_on, self.host = (stop_fraction, trace_neurons, records,
                                                                             host)
        self.dtype = x.dtype
        ws = _Workspace(x, y.to(x.dtype), alpha, h)
        theta = stack_params(net).to(x.dtype)
        f0, *_ = ws.direction(theta)
        ws.f0 = f0.clone()
        self.f0, self.ws = f0, ws
        self.theta = theta
        self.out, self.grad, self.margins, self.active = ws.direction(theta)
        self.dt = torch.ones(n_trials, dtype=torch.float64, device=x.device)
        self.t = torch.zeros_like(self.dt)
        self.t_star = torch.full_like(self.dt, math.nan)
        self.lam = amplification(theta[..., :-2], d_parallel)
        self.lam_star, self.lam_max = torch.full_like(self.lam, math.nan), self.lam.clone()
        self.at_t_star = theta.clone()
        self.fitted = (self.margins >= 1).to(x.dtype).mean(dim=1)
        self.running = self.fitted < stop_fraction
        self.is_finite = torch.ones((), dtype=torch.bool, device=x.device)
        self.records = _Records(n_trials, x.dtype, x.device)
        self.neurons: list[torch.Tensor] = []
        self.idx = torch.arange(n_trials, device=x.device)  # the trials still integrated
        self.frozen_neurons = theta[:, :trace_neurons].clone()
        self.recorded: list[int] = []  # the steps of the records
        self.last_rejected: torch.Tensor | None = None  # the dgrad of each trial's last rejection (None: no trial's)
        self.full = [v.clone() for v in self._state()]
        self._derived()

    def _derived(self) -> None:
        """What follows from the state: ‖g‖ of the accepted gradient (kept across steps), whether some trial has no
        t* yet, whether every integrated trial runs (known at a look on the host)."""
        self.gnorm = torch.linalg.vector_norm(self.grad.flatten(1), dim=1)
        self.waiting = not self.host or bool(torch.isnan(self.t_star).any())
        self.all_running = False

    def _state(self) -> tuple[torch.Tensor, ...]:
        last_rejected = torch.full_like(self.lam, math.inf) if self.last_rejected is None else self.last_rejected
        return (self.theta, self.grad, self.out, self.dt, self.t, self.t_star, self.lam, self.lam_star, self.lam_max,
                self.at_t_star, self.fitted, self.running, last_rejected)

    def record(self, step: int) -> None:
        """Record the state after ``step`` steps (t, Λ, fitted fraction, loss, dt; the traced neurons)."""
        self.recorded.append(step)
        self.records.add(self.t, self.lam, self.fitted, margin_hinge_loss(self.margins, self.alpha) * self.alpha,
                         self.dt)
        if self.trace_neurons:
            self.neurons.append(self.frozen_neurons.index_copy(0, self.idx, self.theta[:, :self.trace_neurons]))

    def step(self, step: int, due: tuple[str, ...]) -> None:
        if due:  # the state this step starts from is on the trajectory's schedule
            self.record(step)
        control, dt, running, all_running = self.control, self.dt, self.running, self.all_running
        theta, grad, out = self.theta, self.grad, self.out
        trial = torch.addcmul(theta, (dt if all_running else dt * running).to(self.dtype)[:, None, None], grad)
        out_new, grad_new, margins_new, active_new = self.ws.direction(trial)
        dout = (out_new - out).abs().amax(dim=1) * self.alpha
        gnn = grad_new.flatten(1)
        gnorm_new = torch.linalg.vector_norm(gnn, dim=1)
        norms = self.gnorm * gnorm_new
        dgrad = torch.where(norms > 0, (grad.flatten(1) - gnn).pow(2).sum(dim=1) / norms.clamp_min(1e-300), 0.0)
        margin_event = (active_new != self.active).any(dim=1)
        verdict = control.decide(dgrad, dout, None if all_running else running, self.last_rejected, margin_event,
                                 dt < self.dgrad_free_dt)
        accept = verdict.accept
        if self.host and bool(accept.all()):  # the selects below would copy the new state: skipped (same bits)
            # dout < max_dout < ∞ for every trial, so finite stays as it is
            self.last_rejected = None
            theta, self.grad, self.gnorm, self.out, margins, self.active = (trial, grad_new, gnorm_new, out_new,
                                                                             margins_new, active_new)
            t = self.t = self.t + dt
            self.dt = torch.where(verdict.grow, dt * control.grow, dt)
            lam = amplification(theta[..., :-2], self.d_parallel)
            self.lam_max = torch.maximum(self.lam_max, lam)
        else:
            self.is_finite = self.is_finite & (dout < math.inf).all()  # NaN or ±inf in out_new (out: accepted or f̃(0))
            self.last_rejected = verdict.last_rejected
            sel = accept[:, None, None]
            theta = torch.where(sel, trial, theta)
            self.grad = torch.where(sel, grad_new, grad)
            self.gnorm = torch.where(accept, gnorm_new, self.gnorm)
            self.out = torch.where(accept[:, None], out_new, out)
            margins = torch.where(accept[:, None], margins_new, self.margins)
            self.active = torch.where(accept[:, None], active_new, self.active)
            t = self.t = torch.where(accept, self.t + dt, self.t)
            self.dt = control.next_dt(dt, verdict)
            lam = amplification(theta[..., :-2], self.d_parallel)
            self.lam_max = torch.where(accept, torch.maximum(self.lam_max, lam), self.lam_max)
        self.theta, self.margins, self.lam = theta, margins, lam
        fitted = self.fitted = (margins >= 1).to(self.dtype).mean(dim=1)
        if self.waiting:  # some trial has no t* yet
            first = accept & torch.isnan(self.t_star) & (fitted > 0.1)
            if not self.host or bool(first.any()):
                self.t_star = torch.where(first, t, self.t_star)
                self.lam_star = torch.where(first, lam, self.lam_star)
                self.at_t_star = torch.where(first[:, None, None], theta, self.at_t_star)
                self.waiting = not self.host or bool(torch.isnan(self.t_star).any())
        stop = fitted < self.stop_fraction
        self.running = stop if all_running else running & stop

    def finite(self) -> torch.Tensor:
        return self.is_finite

    def first_bad_step(self, step: int) -> int:
        return step

    def done(self) -> bool:
        self.n_running = int(self.running.sum())
        return self.n_running == 0

    def look(self, step: int) -> None:
        integrated = self.idx.numel()
        self.all_running = self.host and self.n_running == integrated
        if self.n_running <= integrated // 2:  # compact: integrate only the running trials from here on
            for holder, value in zip(self.full, self._state(), strict=True):
                holder.index_copy_(0, self.idx, value)
            if self.records_on:
                self.records.freeze(self.t, self.lam, self.fitted,
                                    margin_hinge_loss(self.margins, self.alpha) * self.alpha, self.dt)
            if self.trace_neurons:
                self.frozen_neurons = self.frozen_neurons.index_copy(0, self.idx,
                                                                     self.theta[:, :self.trace_neurons])
            keep = self.running.nonzero().squeeze(1)
            self.idx, self.ws = self.idx[keep], self.ws.subset(keep)
            self.records.compact(self.idx)
            (self.theta, self.grad, self.out, self.margins, self.dt, self.t, self.t_star, self.lam, self.lam_star,
             self.lam_max, self.at_t_star, self.fitted, self.running, self.last_rejected, self.gnorm,
             self.active) = (v[keep] for v in (self.theta, self.grad, self.out, self.margins, *self._state()[3:],
                                               self.gnorm, self.active))
            self.all_running = self.host

    def state(self) -> dict:
        return {"idx": self.idx, "finite": self.is_finite, "frozen_neurons": self.frozen_neurons,
                "records": self.records.state(), "recorded": list(self.recorded), "neurons": list(self.neurons),
                "full": [v.clone() for v in self.full],
                "state": tuple(v.clone() for v in (self.theta, self.grad, self.out, self.margins,
                                                   *self._state()[3:]))}

    def load(self, state: dict) -> None:
        self.idx, self.is_finite, self.frozen_neurons, self.full = (state[k] for k in ("idx", "finite",
                                                                                     "frozen_neurons", "full"))
        self.records.restore(state["records"], self.idx)
        self.recorded = list(state["recorded"])
        self.neurons[:] = state["neurons"]
        (self.theta, self.grad, self.out, self.margins, self.dt, self.t, self.t_star, self.lam, self.lam_star,
         self.lam_max, self.at_t_star, self.fitted, self.running, self.last_rejected) = state["state"]
        self.ws = self.ws.subset(self.idx)
        self.active = self.margins < 1  # what the direction returned with these margins
        self._derived()

    def result(self, steps: int) -> FlowResult:
        """The FlowResult after ``steps`` steps, outside inference mode."""
        if self.records_on:  # the state the flow ends in: no step starts from it
            self.record(steps)
        for holder, value in zip(self.full, self._state(), strict=True):
            holder.index_copy_(0, self.idx, value)
        theta, t, t_star, lam_star, lam_max, at_t_star, running = (self.full[i] for i in (0, 4, 5, 7, 8, 9, 11))
        series = ({name: v.T for name, v in zip(("t", "amplification", "fitted", "loss", "dt"), self.records.stacked(),
                                                strict=True)} if self.records_on else {})
        if self.trace_neurons:
            series["neurons"] = torch.stack(self.neurons)
        return FlowResult(unstack_params(theta), self.f0, t, t_star, lam_star, lam_max, unstack_params(at_t_star),
                          ~running, Trajectory(np.asarray(self.recorded, dtype=np.int64), series, steps))

    def final(self) -> dict:
        return {}  # the input network is not modified

    def restore(self, final: dict) -> None:
        pass
