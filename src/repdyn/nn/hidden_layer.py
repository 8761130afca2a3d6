"""One-hidden-layer network of seed 003 (Eq. 1) trained by adaptive-step gradient flow on the hinge loss.

f(x) = (1/h) Σ_n β_n σ(ω_n·x/√d + b_n), σ(u) = √2 max(0, u), all weights N(0, 1) (b included, spec 003 P6);
predictor F = α(f − f₀) with f₀ the frozen network at initialisation. Loss (spec 003 §2.3, P1):
L = (1/(αp)) Σ_μ max(0, 1 − α y^μ (f − f₀)(x^μ)), whose negative gradient is exactly Eq. (2) (no α in front of
∂_W f). The integrator is the adaptive-step explicit Euler of spec 003 §2.4 (defined only in the reference
code), with the stopping rule and t* of §2.5. Trials (seeds) are stacked on a leading axis and integrated as
one batched computation; every trial keeps its own step size and stops on its own.

Gradients are written out in closed form (Eq. 4) instead of autograd: the network is three tensors and the
closed form is ~3× cheaper; tests check it against autograd.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from repdyn.nn.divergence import check_finite
from repdyn.nn.progress import report
from repdyn.theory.compression import amplification

SQRT2 = math.sqrt(2.0)


@dataclass
class HiddenLayerNet:
    """Stacked weights of S networks: w (S, h, d), b (S, h), beta (S, h)."""

    w: torch.Tensor
    b: torch.Tensor
    beta: torch.Tensor

    def clone(self) -> HiddenLayerNet:
        return HiddenLayerNet(self.w.clone(), self.b.clone(), self.beta.clone())

    def flat(self) -> torch.Tensor:
        """(S, h d + 2 h) view of all parameters of each trial."""
        return torch.cat([self.w.flatten(1), self.b, self.beta], dim=1)


class HiddenLayerModule(nn.Module):
    """One trial of a :class:`HiddenLayerNet` as an ``nn.Module`` (f of Eq. 1), for the model-agnostic probes."""

    def __init__(self, net: HiddenLayerNet, trial: int = 0) -> None:
        super().__init__()
        self.w = nn.Parameter(net.w[trial].detach().clone())
        self.b = nn.Parameter(net.b[trial].detach().clone())
        self.beta = nn.Parameter(net.beta[trial].detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = x @ self.w.T / math.sqrt(self.w.shape[1]) + self.b
        return SQRT2 * torch.relu(u) @ self.beta / self.w.shape[0]


def init_hidden_layer(n_trials: int, h: int, d: int, generator: torch.Generator,
                      dtype: torch.dtype = torch.float64, device: str = "cpu") -> HiddenLayerNet:
    """All weights i.i.d. N(0, 1) (seed 003 §2.2), ``n_trials`` independent networks."""
    if min(n_trials, h, d) < 1:
        raise ValueError(f"need n_trials, h, d >= 1, got {n_trials}, {h}, {d}")
    w = torch.randn(n_trials, h, d, generator=generator, dtype=dtype)
    b = torch.randn(n_trials, h, generator=generator, dtype=dtype)
    beta = torch.randn(n_trials, h, generator=generator, dtype=dtype)
    return HiddenLayerNet(w.to(device), b.to(device), beta.to(device))


def _preact(net: HiddenLayerNet, x: torch.Tensor) -> torch.Tensor:
    return torch.baddbmm(net.b.unsqueeze(1), x, net.w.transpose(1, 2), alpha=1 / math.sqrt(net.w.shape[-1]))


def hidden_layer_output(net: HiddenLayerNet, x: torch.Tensor) -> torch.Tensor:
    """f(x) of Eq. (1) for x (S, n, d) → (S, n)."""
    u = _preact(net, x)
    return SQRT2 * torch.einsum("snh,sh->sn", u.clamp_min(0), net.beta) / net.w.shape[1]


def hinge_loss(f_centered: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """L = (1/(αp)) Σ_μ max(0, 1 − α y f̃) per trial (spec 003 §2.3: the 1/α makes −∇L equal Eq. 2)."""
    return (1 - alpha * y * f_centered).clamp_min(0).mean(dim=-1) / alpha


def hinge_descent_direction(net: HiddenLayerNet, x: torch.Tensor, y: torch.Tensor, f0: torch.Tensor,
                            alpha: float) -> tuple[torch.Tensor, HiddenLayerNet]:
    """(f̃ = f − f₀ on x, −∇L) with −∇L = (1/p) Σ_μ ∂_W f(x^μ) y^μ Θ(1 − y^μ F^μ) (Eqs. 2 and 4)."""
    h, d = net.w.shape[1], net.w.shape[2]
    p = x.shape[1]
    u = _preact(net, x)
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
    (else capped by ``max_steps``); history: per-iteration arrays t, Λ, fitted fraction, loss (S columns)
    and optionally the traced neurons' weights (S, T, k, d + 2) as columns (ω, b, β).
    """

    net: HiddenLayerNet
    f0_train: torch.Tensor
    t: torch.Tensor
    t_star: torch.Tensor
    lambda_star: torch.Tensor
    lambda_max: torch.Tensor
    at_t_star: HiddenLayerNet
    stopped: torch.Tensor
    steps: int
    history: dict[str, torch.Tensor] = field(default_factory=dict)


def train_gradient_flow(net: HiddenLayerNet, x: torch.Tensor, y: torch.Tensor, alpha: float, *,
                        d_parallel: int = 1, max_dgrad: float = 1e-4, max_dout: float = 0.1,
                        stop_fraction: float = 1.0, max_steps: int = 100_000, trace_neurons: int = 0,
                        record_every: int = 1, dgrad_free_dt: float | None = None) -> FlowResult:
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
    test there changes neither t* nor Λ*; ``dgrad_free_dt=0`` restores the plain rule. A trial stops when
    its fitted fraction #{y F ≥ 1}/p reaches ``stop_fraction`` (1: zero hinge loss, the paper's rule) or
    after ``max_steps`` iterations (recorded in ``stopped``). Raises :class:`Diverged` on NaN/inf.

    x: (S, p, d), y: (S, p); the input ``net`` is the initialisation f₀ and is not modified.
    """
    if not 0 < stop_fraction <= 1:
        raise ValueError(f"stop_fraction={stop_fraction} must be in (0, 1]")
    if alpha <= 0 or max_dgrad <= 0 or max_dout <= 0:
        raise ValueError(f"alpha={alpha}, max_dgrad={max_dgrad}, max_dout={max_dout} must all be > 0")
    n_trials = x.shape[0]
    if dgrad_free_dt is None:
        dgrad_free_dt = net.w.shape[1] * math.sqrt(net.w.shape[2] / 2) / 160
    f0 = hidden_layer_output(net, x)
    net = net.clone()
    out, grad = hinge_descent_direction(net, x, y, f0, alpha)
    g = grad.flat()
    dt = torch.ones(n_trials, dtype=x.dtype, device=x.device)
    t = torch.zeros_like(dt)
    nan = torch.full_like(dt, math.nan)
    t_star, lam_star = nan.clone(), nan.clone()
    at_t_star = net.clone()
    lam = amplification(net.w, d_parallel)
    lam_max = lam.clone()
    fitted = (alpha * y * out >= 1).to(x.dtype).mean(dim=1)
    running = fitted < stop_fraction
    records: dict[str, list[torch.Tensor]] = {"t": [], "amplification": [], "fitted": [], "loss": []}
    if trace_neurons:
        records["neurons"] = []

    def record() -> None:
        records["t"].append(t.clone())
        records["amplification"].append(lam.clone())
        records["fitted"].append(fitted.clone())
        records["loss"].append(hinge_loss(out, y, alpha) * alpha)
        if trace_neurons:
            k = trace_neurons
            records["neurons"].append(torch.cat([net.w[:, :k], net.b[:, :k, None], net.beta[:, :k, None]], -1))

    record()
    steps = 0
    last_rejected = torch.full_like(dt, math.inf)
    while bool(running.any()) and steps < max_steps:
        report(steps, max_steps)
        steps += 1
        step = (dt * running.to(dt.dtype))
        trial = HiddenLayerNet(net.w + step[:, None, None] * grad.w, net.b + step[:, None] * grad.b,
                               net.beta + step[:, None] * grad.beta)
        out_new, grad_new = hinge_descent_direction(trial, x, y, f0, alpha)
        check_finite(out_new, steps, "network output")
        g_new = grad_new.flat()
        norms = g.norm(dim=1) * g_new.norm(dim=1)
        dgrad = torch.where(norms > 0, (g - g_new).pow(2).sum(dim=1) / norms.clamp_min(1e-300),
                            torch.zeros_like(norms))
        dout = (out_new - out).abs().amax(dim=1) * alpha
        margin_event = ((alpha * y * out_new < 1) != (alpha * y * out < 1)).any(dim=1)
        jump = running & (dout < max_dout) & ((dgrad > 0.1 * last_rejected) | margin_event)
        accept = running & (dout < max_dout) & ((dgrad < max_dgrad) | jump | (dt < dgrad_free_dt))
        grow = accept & (dgrad < 0.5 * max_dgrad) & (dout < 0.5 * max_dout)
        reject = running & ~accept
        last_rejected = torch.where(reject & (dout < max_dout), dgrad, torch.full_like(dgrad, math.inf))
        sel = accept[:, None]
        net = HiddenLayerNet(torch.where(sel[..., None], trial.w, net.w), torch.where(sel, trial.b, net.b),
                             torch.where(sel, trial.beta, net.beta))
        grad = HiddenLayerNet(torch.where(sel[..., None], grad_new.w, grad.w), torch.where(sel, grad_new.b, grad.b),
                              torch.where(sel, grad_new.beta, grad.beta))
        g = torch.where(sel, g_new, g)
        out = torch.where(sel, out_new, out)
        t = torch.where(accept, t + dt, t)
        dt = torch.where(grow, dt * 1.1, torch.where(reject, dt / 10, dt))
        lam = amplification(net.w, d_parallel)
        lam_max = torch.where(accept, torch.maximum(lam_max, lam), lam_max)
        fitted = (alpha * y * out >= 1).to(x.dtype).mean(dim=1)
        first = accept & torch.isnan(t_star) & (fitted > 0.1)
        if bool(first.any()):
            t_star = torch.where(first, t, t_star)
            lam_star = torch.where(first, lam, lam_star)
            at_t_star = HiddenLayerNet(torch.where(first[:, None, None], net.w, at_t_star.w),
                                       torch.where(first[:, None], net.b, at_t_star.b),
                                       torch.where(first[:, None], net.beta, at_t_star.beta))
        running = running & (fitted < stop_fraction)
        if steps % record_every == 0 or not bool(running.any()):
            record()
    history = {k: torch.stack(v, dim=1 if k == "neurons" else -1) for k, v in records.items()}
    return FlowResult(net, f0, t, t_star, lam_star, lam_max, at_t_star, ~running, steps, history)
