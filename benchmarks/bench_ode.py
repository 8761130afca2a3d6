"""Effective-theory ODE: repdyn.theory.effective_theory.integrate_dynamics against scipy's solve_ivp applied
directly to the same system, Eq. 7 of seed 000 in (u, v, w), at the same relative tolerance.

repdyn integrates in (log u, v/u, w) with LSODA (spec 000 §2.13): u spans decades and Eq. 7 has 1/u terms. The
references solve Eq. 7 as written with each solve_ivp method, rtol 1e-9 (repdyn's default) and an absolute
tolerance of 1e-9 times each variable's initial magnitude (scipy's default atol of 1e-6 would ignore v(0) ~ 1e-12).
Accuracy is checked against two things the solvers do not use: the final distance u(∞) of Eq. 10 and the conserved
quantity of Eq. 24 (its drift relative to the size of its two terms). Peak memory is the tracemalloc peak of one
solve (Python and NumPy allocations). A solve still running after ``BUDGET_S`` seconds is stopped and reported.

Scenarios: the experiments' use (every epoch of 6000, the two-point task of spec 000 §3.2: X = 0.25, Y = 1,
rates 0.02/epoch, u(0) from 1e-6 (XOR-like, rich) to 0.3 (lazy), v(0) 3-6 decades smaller, scalar output), and
the fit's use (fit_rates solves the normalised system, rate_y = 1, out to t = 1e9 on a log grid).
"""

from __future__ import annotations

import math
import os
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
from scipy.integrate import solve_ivp

from repdyn.theory import effective_theory as et

X, Y, RTOL, BUDGET_S = 0.25, 1.0, 1e-9, 8.0
METHODS = ("RK45", "DOP853", "LSODA", "BDF", "Radau")
COMMAND = "python benchmarks/bench_ode.py"


class OverBudget(Exception):
    pass


def scalar_output_start(u0: float, v_over_u: float) -> tuple[float, float, float]:
    """(u, v, w) at initialisation with a scalar output dy = +sqrt(v): w = v − dy·Δy (Eq. 8)."""
    v0 = u0 * v_over_u
    return u0, v0, v0 - math.sqrt(v0 * Y)


def repdyn_solver(start: tuple[float, float, float], rates: tuple[float, float], t: np.ndarray,
                  budget: float = BUDGET_S) -> tuple:
    trajectory = et.integrate_dynamics(start, X, Y, *rates, t, rtol=RTOL)
    return trajectory.u, trajectory.v, math.nan


def scipy_solver(method: str) -> Callable[..., tuple]:
    def solve(start: tuple[float, float, float], rates: tuple[float, float], t: np.ndarray,
              budget: float = BUDGET_S) -> tuple:
        deadline = time.perf_counter() + budget

        def rhs(_t: float, z: np.ndarray) -> np.ndarray:
            if time.perf_counter() > deadline:
                raise OverBudget
            return et.vector_field(z, X, Y, *rates)

        atol = RTOL * np.abs(np.asarray(start))
        sol = solve_ivp(rhs, (0.0, float(t[-1])), list(start), method=method, t_eval=t, rtol=RTOL, atol=atol)
        if sol.status != 0 or sol.y.shape[1] != t.size:
            raise RuntimeError(sol.message)
        return sol.y[0], sol.y[1], sol.nfev

    return solve


def measure(solver: Callable[..., tuple], start: tuple[float, float, float], rates: tuple[float, float],
            t: np.ndarray) -> dict[str, float | str]:
    """Wall time (best of up to 3 when a solve is fast), nfev, accuracy vs Eq. 10 and Eq. 24, peak memory."""
    times = []
    try:
        for _ in range(3):
            begin = time.perf_counter()
            u, v, nfev = solver(start, rates, t)
            times.append(time.perf_counter() - begin)
            if sum(times) > 1.0:
                break
    except OverBudget:
        return {"status": f"stopped after {BUDGET_S:.0f} s"}
    except RuntimeError as err:
        return {"status": f"failed: {err}"}
    tracemalloc.start()
    try:
        solver(start, rates, t, budget=4 * BUDGET_S)  # tracemalloc slows a solve down several times
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    except OverBudget:
        peak = math.nan
    finally:
        tracemalloc.stop()
    rate_h, rate_y = rates
    expected = float(et.fixed_point_distance(start[0], start[1], X, Y, rate_h / rate_y))
    terms = v / u / rate_y, u / (X * rate_h)  # Eq. 24: τ_y v/u − τ_h u/X is constant
    conserved = terms[0] - terms[1]
    drift = np.max(np.abs(conserved - conserved[0])) / np.max(np.abs(terms[0]) + np.abs(terms[1]))
    return {"status": "ok", "seconds": min(times), "nfev": nfev, "final_error": abs(u[-1] / expected - 1),
            "drift": float(drift), "peak_mib": peak}


def run() -> str:
    epochs = np.arange(0.0, 6001.0)
    fit_grid = np.concatenate([[0.0], np.geomspace(1e-3, 1e9, 6000)])
    scenarios = [(f"epochs 0..6000, u(0) = {u0:g}, v(0)/u(0) = {ratio:g}", scalar_output_start(u0, ratio),
                  (0.02, 0.02), epochs) for u0, ratio in ((1e-6, 1e-6), (4e-4, 1e-4), (2e-2, 1e-3), (0.3, 0.3))]
    scenarios.append(("fit horizon t ≤ 1e9 (log grid), u(0) = 4e-4", scalar_output_start(4e-4, 1e-4), (1.0, 1.0),
                      fit_grid))
    solvers = [("repdyn (LSODA in log u, v/u, w)", repdyn_solver)]
    solvers += [(f"solve_ivp {m} on Eq. 7", scipy_solver(m)) for m in METHODS]
    lines = [
        "### Effective-theory ODE (`repdyn.theory.effective_theory.integrate_dynamics`)",
        "",
        f"Eq. 7 of seed 000 with X = {X:g}, Y = {Y:g}, rtol {RTOL:g} for every solver; {os.cpu_count()} CPUs "
        "(shared machine: other jobs were running). Time ratio = solver time / repdyn time (above 1: repdyn is "
        "faster). Errors: |u(T)/u(∞) − 1| against Eq. 10, and the drift of the Eq. 24 invariant relative to its "
        "terms. Peak memory: tracemalloc peak of one solve.",
        "",
    ]
    for title, start, rates, t in scenarios:
        results = [(name, measure(solver, start, rates, t)) for name, solver in solvers]
        base = results[0][1].get("seconds", math.nan)
        lines += [f"**{title}** (rates 1/τ_h = {rates[0]:g}, 1/τ_y = {rates[1]:g})", "",
                  "| solver | wall time (s) | time ratio | RHS evaluations | final-distance error | "
                  "Eq. 24 drift | peak memory (MiB) |", "|---|---:|---:|---:|---:|---:|---:|"]
        for name, r in results:
            if r["status"] != "ok":
                ratio = f"> {BUDGET_S / base:.0f}×" if r["status"].startswith("stopped") else "–"
                lines.append(f"| {name} | {r['status']} | {ratio} | – | – | – | – |")
                continue
            nfev = "–" if math.isnan(r["nfev"]) else f"{r['nfev']:,}"
            lines.append(f"| {name} | {r['seconds']:.3f} | {r['seconds'] / base:.1f}× | {nfev} | "
                         f"{r['final_error']:.1e} | {r['drift']:.1e} | {r['peak_mib']:.1f} |".replace("nan", "–"))
        lines.append("")
    lines += ["repdyn's RHS count is not shown: LSODA's count is internal to its log-coordinate field.",
              "", f"Reproduce: `{COMMAND}`"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
