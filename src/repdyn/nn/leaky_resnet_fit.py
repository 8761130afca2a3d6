"""Training loops of the Leaky ResNets of :mod:`repdyn.nn.models.leaky_resnet` (seed 002, spec 002 §4.3): full-batch
Adam then GD with adaptive layer steps (:func:`fit`), and an L-BFGS finish towards a critical point of the objective
(:func:`lbfgs_finish`), each a step rule run by :func:`repdyn.nn.driver.drive`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from repdyn.nn.driver import StepRule, drive
from repdyn.nn.models.leaky_resnet import LeakyResNet, objective_gradient
from repdyn.nn.optim import StackedOptimizer
from repdyn.nn.trajectory import Trajectory
from repdyn.theory.leaky_resnet import adaptive_steps_from_norms

__all__ = ["TrainingPlan", "fit", "lbfgs_finish", "median_stationarity"]


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

    def step(self, step: int, due: tuple[str, ...]) -> Tensor:
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
        if "trajectory" in due:
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
    steps = plan.adam_steps + plan.gd_steps
    record = {"trajectory": range(0, steps, plan.record_every)}
    return drive(_Fit(model, x, y, lam, plan, adaptive), steps, record=record)


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

    def step(self, step: int, due: tuple[str, ...]) -> float:
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
