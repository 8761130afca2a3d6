"""Why a trained ReLU Leaky ResNet does not reach the stationarity residual target of spec 002 (T6).

The Hamiltonian of seed 002 is conserved only at a critical point, where ``W_l = L~ B_l sigma(A_{l-1})^T``
(spec 002 §3.12). This script trains the same small Leaky ResNet twice, with the ReLU of the paper and with
a smooth softplus, first with Adam and then with damped Newton steps (Levenberg-Marquardt on the exact
Hessian from ``torch.func``), and prints the gradient norm, the objective and the smallest Hessian eigenvalue.
With the softplus the gradient falls to rounding level; with the ReLU Newton stalls at a gradient norm of
order 1e-3 to 1e-2, its steps rejected again and again: the minimum sits on ReLU kinks, where the objective
is not differentiable and the backprop momenta (ReLU' = 0 at the kink) cannot satisfy the stationarity
equation. The residual of a trained ReLU network is therefore a floor, not only a matter of training longer.

Run: ``python examples/leaky_resnet_stationarity.py`` (about a minute on one CPU core).
"""

from __future__ import annotations

import argparse
import functools
import json

import torch

from repdyn.data.teacher import bottleneck_teacher
from repdyn.nn.models.leaky_resnet import data_cost
from repdyn.theory import leaky_resnet as lr

ACTIVATIONS = {"relu": torch.relu,
               "softplus": functools.partial(torch.nn.functional.softplus, beta=20.0)}


def _objective(activation, rho, A0, target, ltilde, lam, shape):
    """``C + lambda / (2 L~) sum_l rho_l ||W_l||^2`` ([E-DLOSS]) of the flattened weights."""
    def objective(flat: torch.Tensor) -> torch.Tensor:
        W = flat.reshape(shape)
        A_out = lr.leaky_forward(W, rho, A0, ltilde, activation)[-1]
        return data_cost(A_out, target) + lam / (2 * ltilde) * (rho * (W**2).sum((-1, -2))).sum()
    return objective


def polish(name: str, adam_steps: int, newton_steps: int, width: int = 8, n: int = 16, depth: int = 8,
           ltilde: float = 2.0, lam: float = 0.01, seed: int = 0) -> dict[str, float]:
    """Adam, then damped Newton, on one Leaky ResNet with the named activation; returns the final state."""
    task = bottleneck_teacher((width, 2, width), n, n, torch.Generator().manual_seed(seed), hidden=16)
    generator = torch.Generator().manual_seed(seed + 1)
    A0, target = task.x_train.T.double(), task.y_train.T.double()
    rho = lr.equidistant_steps(depth)
    shape = (depth, width, width + 1)
    objective = _objective(ACTIVATIONS[name], rho, A0, target, ltilde, lam, shape)
    theta = (0.3 * torch.randn(depth * width * (width + 1), generator=generator, dtype=torch.float64))
    theta.requires_grad_(True)
    adam = torch.optim.Adam([theta], lr=3e-3)
    for _ in range(adam_steps):
        adam.zero_grad()
        objective(theta).backward()
        adam.step()
    theta = theta.detach()
    gradient_after_adam = float(torch.linalg.norm(torch.func.grad(objective)(theta)))
    damping = 1e-6
    eye = torch.eye(theta.numel(), dtype=theta.dtype)
    for _ in range(newton_steps):
        gradient, hessian = torch.func.grad(objective)(theta), torch.func.hessian(objective)(theta)
        current = objective(theta)
        while damping < 1e12:
            candidate = theta - torch.linalg.solve(hessian + damping * eye, gradient)
            if objective(candidate) <= current:
                theta, damping = candidate, max(damping / 3, 1e-12)
                break
            damping *= 10
    gradient, hessian = torch.func.grad(objective)(theta), torch.func.hessian(objective)(theta)
    out = {"gradient_after_adam": gradient_after_adam, "gradient": float(torch.linalg.norm(gradient)),
           "objective": float(objective(theta)), "damping": damping,
           "min_hessian_eigenvalue": float(torch.linalg.eigvalsh(hessian)[0])}
    if name == "relu":
        W = theta.reshape(shape)
        reps, B = lr.momenta_by_backprop(W, rho, A0, ltilde, lambda A: data_cost(A, target), lam)
        out["median_stationarity_residual"] = float(lr.stationarity_residual(W, reps, B, ltilde).median())
    return out


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adam-steps", type=int, default=3000)
    parser.add_argument("--newton-steps", type=int, default=150)
    args = parser.parse_args(argv)
    results = {name: polish(name, args.adam_steps, args.newton_steps) for name in ACTIVATIONS}
    print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
