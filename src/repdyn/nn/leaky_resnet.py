"""Leaky ResNets with effective depth L~ and per-layer steps rho_l, trained as one batched computation.

Seed 002 §2 and §4, spec 002 §3.1-3.4: ``A_0 = U_in x``, ``A_l = (1 - rho_l L~) A_{l-1} + rho_l W_l sigma(A_{l-1})``
with ``sigma(a) = ([a]_+, 1)``, prediction ``U_out A_L``. ``K`` members (seeds, effective depths, step
schemes) share the depth ``L`` and width ``w`` and are stacked: weights ``(K, L, w, w+1)``, steps ``(K, L)``,
leaks ``(K,)``. The objective is [E-DLOSS]

    C + lambda / (2 L~) sum_l rho_l ||W_l||_F^2,   C = ||Y - Y_hat||_F^2 / N (sum over outputs, mean over points),

with the rho-weighted decay as an explicit loss term, never the optimiser's weight decay (spec 002 §7 P2, P3).
The in/out maps are fixed and semi-orthogonal (spec 002 §3.4 CHOICE, pitfall P8). Inputs are rows (N, d_in),
as elsewhere in repdyn; the representations are columns (w x N), as in the paper.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from repdyn.nn.driver import StepRule, drive
from repdyn.nn.optim import StackedOptimizer
from repdyn.nn.trajectory import Trajectory
from repdyn.theory.leaky_resnet import adaptive_steps_from_norms, leaky_forward, momenta_by_backprop

INITS = ("he", "identity")
"""Initialisations of :meth:`LeakyResNet.initialise` (spec 002 §4.2)."""


def _semi_orthogonal(k: int, rows: int, cols: int, generator: torch.Generator, dtype: torch.dtype) -> Tensor:
    """``k`` random ``rows x cols`` matrices with orthonormal columns (rows >= cols) or rows (QR of a Gaussian)."""
    tall = max(rows, cols), min(rows, cols)
    q, r = torch.linalg.qr(torch.randn(k, *tall, generator=generator, dtype=dtype))
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
    return q if rows >= cols else q.transpose(-1, -2)


class LeakyResNet(torch.nn.Module):
    """``K`` stacked Leaky ResNets (seed 002 §4 [E-DISC]); build one with :meth:`initialise`."""

    def __init__(self, weights: Tensor, rho: Tensor, ltilde: Tensor, u_in: Tensor, u_out: Tensor) -> None:
        super().__init__()
        k, depth, width, cols = weights.shape
        if cols != width + 1:
            raise ValueError(f"weights have shape {tuple(weights.shape)}: expected (K, L, w, w+1)")
        if rho.shape != (k, depth) or ltilde.shape != (k,):
            raise ValueError(f"rho {tuple(rho.shape)} and ltilde {tuple(ltilde.shape)} must be ({k}, {depth}) "
                             f"and ({k},)")
        if u_in.shape[:2] != (k, width) or u_out.shape[0] != k or u_out.shape[2] != width:
            raise ValueError(f"u_in {tuple(u_in.shape)} must be ({k}, {width}, d_in) and u_out "
                             f"{tuple(u_out.shape)} ({k}, d_out, {width})")
        if bool((ltilde <= 0).any()):
            raise ValueError(f"ltilde={ltilde.tolist()} is not allowed: every effective depth must be > 0")
        self.weight = torch.nn.Parameter(weights)
        self.register_buffer("rho", rho)
        self.register_buffer("ltilde", ltilde)
        self.register_buffer("u_in", u_in)
        self.register_buffer("u_out", u_out)

    @classmethod
    def initialise(cls, depth: int, width: int, d_in: int, d_out: int, ltilde: Sequence[float], rho: Tensor,
                   generator: torch.Generator, *, init_scale: float = 1.0, init: str = "he",
                   dtype: torch.dtype = torch.float64) -> LeakyResNet:
        """``K = len(ltilde)`` members with ``V_l ~ N(0, 2 (L~ s)^2 / w)``, zero bias (spec 002 §4.2 CHOICE
        "He x L~", ``s = init_scale``) and random semi-orthogonal in/out maps; ``rho`` is ``(L,)`` or ``(K, L)``.

        ``init="identity"`` adds ``L~ [I_w, 0]`` (spec 002 §4.2 alternative): each layer then keeps the positive
        part of the representation, which avoids the ``exp(-L~)`` signal decay of pitfall P10 at large ``L~``.
        """
        if width < max(d_in, d_out):
            raise ValueError(f"width={width} is not allowed: must be >= d_in={d_in} and d_out={d_out}")
        if init_scale < 0:
            raise ValueError(f"init_scale={init_scale!r} is not allowed: must be >= 0")
        if init not in INITS:
            raise ValueError(f"init={init!r} is not allowed: choose one of {', '.join(INITS)}")
        lt = torch.as_tensor(list(ltilde), dtype=dtype)
        k = lt.shape[0]
        std = (2.0 / width) ** 0.5 * init_scale * lt
        weights = torch.zeros(k, depth, width, width + 1, dtype=dtype)
        weights[..., :width] = std[:, None, None, None] * torch.randn(k, depth, width, width, generator=generator,
                                                                      dtype=dtype)
        if init == "identity":
            weights[..., :width] += lt[:, None, None, None] * torch.eye(width, dtype=dtype)
        rho = rho.to(dtype).expand(k, depth).clone()
        u_in = _semi_orthogonal(k, width, d_in, generator, dtype)
        u_out = _semi_orthogonal(k, d_out, width, generator, dtype)
        return cls(weights, rho, lt, u_in, u_out)

    @property
    def members(self) -> int:
        return self.weight.shape[0]

    def input_representation(self, x: Tensor) -> Tensor:
        """``A_0 = U_in x^T`` per member, ``(K, w, N)``."""
        return self.u_in @ x.T.to(self.weight.dtype)

    def representations(self, x: Tensor) -> Tensor:
        """``A_0..A_L`` per member, ``(K, L+1, w, N)``."""
        return leaky_forward(self.weight, self.rho, self.input_representation(x), self.ltilde)

    def readout(self, a_out: Tensor) -> Tensor:
        """Predictions ``(U_out A_L)^T``, ``(K, N, d_out)``."""
        return (self.u_out @ a_out).transpose(-1, -2)

    def forward(self, x: Tensor) -> Tensor:
        return self.readout(self.representations(x)[:, -1])

    def regulariser(self, lam: float) -> Tensor:
        """``lambda / (2 L~) sum_l rho_l ||W_l||_F^2`` per member (bias column included), ``(K,)``."""
        return lam / (2 * self.ltilde) * (self.rho * (self.weight**2).sum((-1, -2))).sum(-1)

    def momenta(self, x: Tensor, y: Tensor, lam: float, member: int) -> tuple[Tensor, Tensor]:
        """``(A_0..A_L, B_0..B_L)`` of one member with ``B_l = -dC/dA_l / lambda`` by autograd (seed 002 §2.4)."""
        u_out = self.u_out[member]
        target = y.T.to(self.weight.dtype)

        def cost(a_out: Tensor) -> Tensor:
            return data_cost(u_out @ a_out, target)

        return momenta_by_backprop(self.weight[member], self.rho[member], self.input_representation(x)[member],
                                   float(self.ltilde[member]), cost, lam)


def data_cost(prediction: Tensor, target: Tensor) -> Tensor:
    """``C = ||target - prediction||_F^2 / N`` for columns ``(..., d_out, N)``: sum over outputs, mean over the
    ``N`` points (spec 002 §2, pitfall P2)."""
    return ((target - prediction) ** 2).sum((-1, -2)) / prediction.shape[-1]


def _buffers(workspace: dict[str, Tensor] | None, like: Tensor, depth: int, k: int, width: int, n: int
             ) -> dict[str, Tensor]:
    """The tensors :func:`objective_gradient` writes into, kept in ``workspace`` from one step to the next: a
    training loop that allocated them at every step would page-fault on the fresh memory of every large one."""
    shapes = {"features": (depth, k, width + 1, n), "outer": (depth, k, width + 1, width),
              "scaled": (k, depth, width, width + 1), "rep0": (k, width, n), "rep1": (k, width, n),
              "back": (k, width, n), "g0": (k, width, n), "g1": (k, width, n)}
    if workspace is None:
        workspace = {}
    if not workspace or workspace["features"].shape != shapes["features"] or workspace["features"].dtype != like.dtype \
            or workspace["features"].device != like.device:
        workspace.clear()
        workspace.update({name: like.new_empty(shape) for name, shape in shapes.items()})
        workspace["features"][:, :, width] = 1  # the bias rows of sigma, never overwritten
    return workspace


@torch.no_grad()
def objective_gradient(model: LeakyResNet, a0: Tensor, target: Tensor, lam: float, norms: bool = False,
                       workspace: dict[str, Tensor] | None = None
                       ) -> tuple[Tensor, Tensor, Tensor, tuple[Tensor, Tensor] | None]:
    """The training objective per member and its gradient in the weights by a hand-written backward pass (the
    adjoint of [E-DISC], seed 002 §2.4 / spec 002 §3.12; equal to autograd's, tests/nn/test_leaky_resnet.py).

    Forward ``A_l = c_l A_{l-1} + (rho_l W_l) sigma(A_{l-1})`` with ``c_l = 1 - rho_l L~`` (one ``bmm`` per
    layer); backward with ``G_l = dC/dA_l``, ``G_L = -2 U_out^T (Y - U_out A_L) / N``:

        dObj/dW_l = rho_l (G_l sigma(A_{l-1})^T + lambda / L~ W_l),
        G_{l-1} = c_l G_l + 1[A_{l-1} > 0] * ((rho_l V_l)^T G_l).

    Three matrix products per layer and a few in-place element-wise passes into preallocated tensors, no autograd
    graph: a training step at the quick shapes is 1.5-1.7x cheaper than autograd through
    :func:`repdyn.theory.leaky_resnet.leaky_forward_layers`, and
    reusing the tensors of ``workspace`` (a dict the caller keeps between steps; filled on the first call) saves
    the page faults of fresh memory. ``a0`` is ``A_0`` ``(K, w, N)``, ``target``
    ``(K or 1, d_out, N)``. Returns ``(objective, cost, grad, norms)``: objective and data cost ``(K,)``, the
    gradient shaped like the weights (a workspace tensor, overwritten by the next call with the same workspace)
    and, if ``norms``, ``(||A_l||, ||A_l - A_{l-1}||)`` for l = 1..L, ``(K, L)`` each (what the adaptive rule
    needs, :func:`repdyn.theory.leaky_resnet.adaptive_steps_from_norms`).
    """
    weights, rho, lt = model.weight.detach(), model.rho, model.ltilde
    k, depth, width, _ = weights.shape
    n = a0.shape[-1]
    ws = _buffers(workspace, weights, depth, k, width, n)
    features, outer = ws["features"], ws["outer"]
    keep = (1 - rho * lt[:, None])[..., None, None].unbind(1)  # c_l, (K, 1, 1) each
    scaled_all = torch.mul(rho[..., None, None], weights, out=ws["scaled"])  # rho_l W_l, (K, L, w, w+1)
    scaled = scaled_all.unbind(1)
    back_maps = scaled_all[..., :width].transpose(-1, -2).unbind(1)  # (rho_l V_l)^T, (K, w, w) each
    rep_norms, step_norms = [], []
    a = a0
    for layer in range(depth):
        sigma = features[layer]  # sigma(A_{l-1}) = ([A_{l-1}]_+, 1)
        torch.clamp(a, min=0, out=sigma[:, :width])
        new = torch.bmm(scaled[layer], sigma, out=ws[f"rep{layer % 2}"]).addcmul_(a, keep[layer])
        if norms:
            rep_norms.append(torch.linalg.vector_norm(new, dim=(-2, -1)))
            step_norms.append(torch.linalg.vector_norm(new - a, dim=(-2, -1)))
        a = new
    residual = target - model.u_out @ a
    cost = (residual**2).sum((-1, -2)) / n
    objective = cost + model.regulariser(lam)
    g = model.u_out.transpose(-1, -2) @ residual * (-2.0 / n)
    spare = (ws["g0"], ws["g1"])
    for layer in reversed(range(depth)):
        sigma = features[layer]
        # G_l sigma(A_{l-1})^T computed as (sigma G^T)^T: the faster layout of the product on the CPU
        torch.bmm(sigma, g.transpose(-1, -2), out=outer[layer])
        if layer:
            back = torch.bmm(back_maps[layer], g, out=ws["back"])
            # ReLU'(A_{l-1}) = 1[sigma > 0], applied without building the mask (autograd's own ReLU backward)
            new = spare[layer % 2]
            torch.ops.aten.threshold_backward.grad_input(back, sigma[:, :width], 0, grad_input=new)
            g = new.addcmul_(g, keep[layer])
    # rho_l (G_l sigma^T + lambda / L~ W_l), written over rho_l W_l (no longer needed)
    grad = scaled_all.mul_((lam / lt)[:, None, None, None]).addcmul_(outer.permute(1, 0, 3, 2), rho[..., None, None])
    found = (torch.stack(rep_norms, -1), torch.stack(step_norms, -1)) if norms else None
    return objective, cost, grad, found


@dataclass(frozen=True)
class TrainingPlan:
    """Full-batch Adam, then full-batch GD "to tighten the convergence" (seed 002 App. B), with adaptive steps.

    ``adam_lr_final`` (optional) decays the Adam rate from ``adam_lr`` along a cosine (spec 002 §4.3 CHOICE).

    The adaptive rule (spec 002 §3.14) runs every ``adaptive_every`` steps after ``adaptive_warmup`` steps, in
    both phases, for the members flagged adaptive; ``damping`` and ``floor`` are spec 002 CHOICEs.
    ``adaptive_in_gd=False`` freezes the steps during the GD phase, so that it converges to a critical point of one
    fixed objective (every rho update changes the objective). ``max_rho_ltilde`` caps the adaptive steps at
    ``max_rho_ltilde / L~`` (pitfall P9: ``rho_l L~ < 1`` keeps the prefactor ``1 - rho_l L~`` positive; the
    paper's rule has no cap).
    """

    adam_steps: int
    adam_lr: float
    gd_steps: int
    gd_lr: float
    adam_lr_final: float | None = None
    adaptive_every: int = 10
    adaptive_warmup: int = 200
    adaptive_damping: float = 0.5
    adaptive_floor: float = 1e-3
    max_rho_ltilde: float | None = None
    record_every: int = 100
    adaptive_in_gd: bool = True

    def __post_init__(self) -> None:
        for name in ("adam_steps", "gd_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)!r} is not allowed: must be >= 0")
        for name in ("adam_lr", "gd_lr", "adam_lr_final"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)!r} is not allowed: must be > 0")
        if self.max_rho_ltilde is not None and not 0 < self.max_rho_ltilde <= 1:
            raise ValueError(f"max_rho_ltilde={self.max_rho_ltilde!r} is not allowed: must be in (0, 1]")
        if self.adaptive_every < 1 or self.record_every < 1:
            raise ValueError("adaptive_every and record_every must be >= 1")


class _Fit(StepRule):
    """The step rule of :func:`fit`: Adam for ``plan.adam_steps`` steps, then GD for ``plan.gd_steps``, each step
    followed by the adaptive rule where it is due."""

    what = "objective"

    def __init__(self, model: LeakyResNet, x: Tensor, y: Tensor, lam: float, plan: TrainingPlan,
                 adaptive: Tensor) -> None:
        self.model, self.lam, self.plan, self.adaptive = model, lam, plan, adaptive
        self.target = y.T.to(model.weight.dtype)
        with torch.no_grad():
            self.a0 = model.input_representation(x)
        self.adapts = bool(adaptive.any())
        self.workspace: dict[str, Tensor] = {}
        self.history: dict[str, list] = {"step": [], "objective": [], "data_cost": [], "max_rho_ltilde": []}
        self.ones = torch.ones(model.members, dtype=model.weight.dtype, device=model.weight.device)
        self.ceiling = None if plan.max_rho_ltilde is None else plan.max_rho_ltilde / model.ltilde
        self.optimiser = StackedOptimizer([model.weight], plan.adam_lr * self.ones, "adam")
        self.ok = True  # every objective so far is finite

    def phase(self, step: int) -> tuple[str, int, float]:
        """The phase of ``step``: its optimiser, its step within the phase, its learning rate."""
        if step < self.plan.adam_steps:
            return "adam", step, self.plan.adam_lr
        return "gd", step - self.plan.adam_steps, self.plan.gd_lr

    def step(self, step: int) -> Tensor:
        plan, model = self.plan, self.model
        kind, t, lr = self.phase(step)
        if kind == "gd" and t == 0:
            self.optimiser = StackedOptimizer([model.weight], lr * self.ones, "gd")
        if kind == "adam" and plan.adam_lr_final is not None:
            decay = 0.5 * (1 + math.cos(math.pi * t / plan.adam_steps))
            self.optimiser.set_lr((plan.adam_lr_final + (lr - plan.adam_lr_final) * decay) * self.ones)
        adapting = kind == "adam" or plan.adaptive_in_gd
        adapt = adapting and self.adapts and step >= plan.adaptive_warmup and step % plan.adaptive_every == 0
        objective, cost, grad, norms = objective_gradient(model, self.a0, self.target, self.lam, norms=adapt,
                                                          workspace=self.workspace)
        self.ok = bool(torch.isfinite(objective).all())
        if not self.ok:
            return objective  # the driver raises at once (sync_every = 1), before the step
        self.optimiser.step([grad])
        if step % plan.record_every == 0:
            self.history["step"].append(step)
            self.history["objective"].append(objective.cpu().numpy())
            self.history["data_cost"].append(cost.cpu().numpy())
            self.history["max_rho_ltilde"].append((model.rho.max(-1).values * model.ltilde).cpu().numpy())
        if norms is not None:
            with torch.no_grad():
                new = adaptive_steps_from_norms(model.rho, *norms, plan.adaptive_damping,
                                                floor=plan.adaptive_floor, ceiling=self.ceiling)
                model.rho.copy_(torch.where(self.adaptive[:, None], new, model.rho))
        return objective

    def finite(self) -> bool:
        return self.ok

    def first_bad_step(self, step: int) -> int:
        return step - 1



    def state(self) -> dict:
        return {"optimizer": self.optimiser.state_dict(), "kind": self.optimiser.kind, **self.final(),
                "history": {name: list(values) for name, values in self.history.items()}}

    def load(self, state: dict) -> None:
        self.restore(state)
        lr = self.plan.adam_lr if state["kind"] == "adam" else self.plan.gd_lr
        self.optimiser = StackedOptimizer([self.model.weight], lr * self.ones, state["kind"])
        self.optimiser.load_state_dict(state["optimizer"])
        self.history = state["history"]

    def result(self, steps: int) -> Trajectory:
        series = {name: np.asarray(values) for name, values in self.history.items() if name != "step"}
        return Trajectory(np.asarray(self.history["step"], dtype=np.int64), series, steps)

    def final(self) -> dict:
        return {"weight": self.model.weight.detach().clone(), "rho": self.model.rho.clone()}

    def restore(self, final: dict) -> None:
        with torch.no_grad():
            self.model.weight.copy_(final["weight"])
            self.model.rho.copy_(final["rho"])


def fit(model: LeakyResNet, x: Tensor, y: Tensor, lam: float, plan: TrainingPlan,
        adaptive: Tensor | None = None) -> Trajectory:
    """Train all members on the full batch ``(x, y)`` (rows); ``adaptive`` (K,) flags members whose steps adapt.

    Returns what it recorded every ``plan.record_every`` steps: the series ``objective``, ``data_cost`` (T, K) and
    ``max_rho_ltilde`` (T, K), the quantity pitfall P9 of spec 002 asks to log. Raises :class:`repdyn.nn.Diverged`
    on NaN/inf. Run by :func:`repdyn.nn.driver.drive` (checkpoints, progress, divergence).
    """
    if not lam > 0:
        raise ValueError(f"lam={lam!r} is not allowed: must be > 0")
    device = model.weight.device
    adaptive = torch.zeros(model.members, dtype=torch.bool, device=device) if adaptive is None else adaptive.bool()
    if adaptive.shape != (model.members,):
        raise ValueError(f"adaptive has shape {tuple(adaptive.shape)}, expected ({model.members},)")
    return drive(_Fit(model, x, y, lam, plan, adaptive), plan.adam_steps + plan.gd_steps)


def median_stationarity(model: LeakyResNet, grad: Tensor, lam: float) -> Tensor:
    """Per member, the median over layers of ``r_l = ||W_l - L~ B_l sigma(A_{l-1})^T|| / ||W_l||`` from the
    objective's gradient: ``dObj/dW_l = rho_l lambda / L~ (W_l - L~ B_l sigma^T)`` (:func:`objective_gradient`), so
    ``r_l = L~ ||dObj/dW_l|| / (lambda rho_l ||W_l||)``, the residual of
    :func:`repdyn.theory.leaky_resnet.stationarity_residual` without a second backward pass."""
    norms = torch.linalg.vector_norm(grad, dim=(-2, -1)) / torch.linalg.vector_norm(model.weight.detach(), dim=(-2, -1))
    return (norms * model.ltilde[:, None] / (lam * model.rho)).median(-1).values


class _LBFGSFinish(StepRule):
    """The step rule of :func:`lbfgs_finish`: a step is one chunk of L-BFGS iterations of the current member; a
    member whose iterations are spent or whose residual reached the tolerance hands over to the next."""

    what = "objective"

    def __init__(self, model: LeakyResNet, x: Tensor, y: Tensor, lam: float, iterations: int, tolerance: float,
                 history_size: int, chunk: int) -> None:
        self.model, self.lam, self.iterations, self.tolerance = model, lam, iterations, tolerance
        self.history_size, self.chunk = history_size, chunk
        self.target = y.T.to(model.weight.dtype)
        with torch.no_grad():
            self.a0 = model.input_representation(x)
        self.record = {"objective": np.full((model.members, 2), np.nan),
                       "residual": np.full((model.members, 2), np.nan),
                       "iterations": np.zeros(model.members, dtype=np.int64)}
        self.k, self.single, self.optimiser, self.done_iterations = 0, None, None, 0
        self.objective, self.residual, self.bad = math.nan, math.nan, False

    def _begin(self, state: dict | None = None) -> None:
        """Set up member ``k``'s optimiser (from a checkpoint's ``state`` when given) and measure it."""
        k, model = self.k, self.model
        self.single = LeakyResNet(model.weight.detach()[k:k + 1].clone(), model.rho[k:k + 1], model.ltilde[k:k + 1],
                                  model.u_in[k:k + 1], model.u_out[k:k + 1])
        self.optimiser = torch.optim.LBFGS([self.single.weight], lr=1, max_iter=self.chunk,
                                           history_size=self.history_size, line_search_fn="strong_wolfe",
                                           tolerance_grad=0, tolerance_change=0)
        self.workspace: dict[str, Tensor] = {}
        if state is not None:
            self.optimiser.load_state_dict(state["lbfgs"])
            self.done_iterations = state["done"]
            self.objective, self.residual = self._measure()
        else:
            self.done_iterations = 0
            self.objective, self.residual = self._measure()
            self.record["objective"][k, 0], self.record["residual"][k, 0] = self.objective, self.residual

    def _measure(self) -> tuple[float, float]:
        objective, _, grad, _ = objective_gradient(self.single, self.a0[self.k:self.k + 1], self.target, self.lam,
                                                   workspace=self.workspace)
        return float(objective.sum()), float(median_stationarity(self.single, grad, self.lam)[0])

    def _closure(self) -> Tensor:
        objective, _, grad, _ = objective_gradient(self.single, self.a0[self.k:self.k + 1], self.target, self.lam,
                                                   workspace=self.workspace)
        self.bad |= not bool(torch.isfinite(objective).all())
        self.single.weight.grad = grad.clone()
        return objective.sum()

    def _finished(self) -> bool:
        return self.done_iterations >= self.iterations or self.residual <= self.tolerance

    def _settle(self) -> None:
        """Close every member that needs no more chunks and open the next one, until one needs a chunk."""
        while self.k < self.model.members:
            if self.single is None:
                self._begin()
            if not self._finished():
                return
            k = self.k
            self.record["objective"][k, 1], self.record["residual"][k, 1] = self.objective, self.residual
            self.record["iterations"][k] = self.done_iterations
            self._put_back()
            self.k, self.single = k + 1, None

    def _put_back(self) -> None:
        with torch.no_grad():
            self.model.weight[self.k].copy_(self.single.weight[0])

    def step(self, step: int) -> float:
        self._settle()
        self.optimiser.param_groups[0]["max_iter"] = min(self.chunk, self.iterations - self.done_iterations)
        self.optimiser.step(self._closure)
        self.done_iterations += self.optimiser.param_groups[0]["max_iter"]
        self.objective, self.residual = self._measure()
        self._settle()
        return self.objective

    def finite(self) -> bool:
        return not self.bad

    def first_bad_step(self, step: int) -> int:
        return step - 1

    def done(self) -> bool:
        self._settle()
        return self.k >= self.model.members


    def state(self) -> dict:
        self._put_back()
        return {"member": self.k, "optimizer": {"lbfgs": self.optimiser.state_dict(), "done": self.done_iterations},
                **self.final(), "record": {key: value.copy() for key, value in self.record.items()}}

    def load(self, state: dict) -> None:
        self.restore(state)
        self.record, self.k = state["record"], state["member"]
        self._begin(state["optimizer"])

    def result(self, steps: int) -> dict[str, np.ndarray]:
        return self.record

    def final(self) -> dict:
        return {"weight": self.model.weight.detach().clone()}

    def restore(self, final: dict) -> None:
        with torch.no_grad():
            self.model.weight.copy_(final["weight"])


def lbfgs_finish(model: LeakyResNet, x: Tensor, y: Tensor, lam: float, iterations: int, tolerance: float = 0.0,
                 history_size: int = 50, chunk: int = 10) -> dict[str, np.ndarray]:
    """Full-batch L-BFGS (strong-Wolfe line search) on each member's training objective in turn, the steps
    ``rho`` frozen: a finish after :func:`fit` towards a critical point of the objective (the state the
    Hamiltonian claims of seed 002 are about), in the model's dtype and on its device.

    Each member gets its own optimiser (members are independent; one line search over their sum would tie their
    step lengths together) and at most ``iterations`` iterations, in chunks of ``chunk``; after each chunk the
    member's median stationarity residual (:func:`median_stationarity`) is computed, and the member stops once it
    is at most ``tolerance`` (the usual gradient-norm stopping rule, on the residual's scale; 0: never). The
    gradient is :func:`objective_gradient`'s. Run by :func:`repdyn.nn.driver.drive`, a step a chunk, so a killed
    run resumes bit for bit from a checkpoint between chunks. Returns per member ``objective`` and ``residual``
    (start, end) and ``iterations`` used.
    """
    if iterations < 0 or chunk < 1 or history_size < 1 or tolerance < 0:
        raise ValueError(f"iterations={iterations}, chunk={chunk}, history_size={history_size}, tolerance="
                         f"{tolerance}: need iterations, tolerance >= 0 and chunk, history_size >= 1")
    if not lam > 0:
        raise ValueError(f"lam={lam!r} is not allowed: must be > 0")
    rule = _LBFGSFinish(model, x, y, lam, iterations, tolerance, history_size, chunk)
    return drive(rule, model.members * -(-iterations // chunk), capped=True)
