"""Empirical NTK: repdyn.probes.empirical_ntk against the torch.func recipe of the PyTorch NTK tutorial.

The reference computes per-sample Jacobians of both input sets with ``vmap(jacrev(f))`` and contracts them
parameter by parameter with einsum ("Naf,Mbf->NMab"). Each method runs in a fresh subprocess so that its peak
resident memory (ru_maxrss, minus the RSS after model set-up) is its own; wall times exclude process start-up.
Model: MLP(32 -> 300 -> 300 -> 1), tanh, 100,501 parameters, float32.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

IN, WIDTH, DEPTH = 32, 300, 2
COMMAND = "python benchmarks/bench_ntk.py"


def _worker(method: str, p: int) -> dict[str, float]:
    import resource

    import torch
    from torch.func import functional_call, jacrev, vmap

    from repdyn.nn import MLP
    from repdyn.probes import empirical_ntk

    model = MLP(IN, WIDTH, DEPTH, 1, activation="tanh", generator=torch.Generator().manual_seed(0)).eval()
    x = torch.randn(p, IN, generator=torch.Generator().manual_seed(1))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def tutorial() -> torch.Tensor:
        def f(prm: dict[str, torch.Tensor], xi: torch.Tensor) -> torch.Tensor:
            return functional_call(model, prm, (xi.unsqueeze(0),)).squeeze(0)

        jac1 = [j.flatten(2) for j in vmap(jacrev(f), (None, 0))(params, x).values()]
        jac2 = [j.flatten(2) for j in vmap(jacrev(f), (None, 0))(params, x).values()]
        return torch.stack([torch.einsum("Naf,Mbf->NMab", a, b) for a, b in zip(jac1, jac2, strict=True)]).sum(0)

    run = {
        "tutorial": tutorial,
        "auto": lambda: empirical_ntk(model, x, output="full", method="auto"),
        "jacobian": lambda: empirical_ntk(model, x, output="full", method="jacobian", chunk_size=128),
    }[method]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    kernel = run()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    check = empirical_ntk(model, x[:64], output="full", method="auto" if method == "jacobian" else "jacobian")
    error = float((kernel[:64, :64] - check).abs().max() / check.abs().max())
    return {"seconds": seconds, "peak_mib": (peak - before) / 1024, "rel_error": error}


def _measure(method: str, p: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--worker", method, str(p)], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def run() -> str:
    import torch

    rows = [("tutorial (vmap(jacrev) + einsum)", "tutorial", 1024),
            ("repdyn auto (linear-layer factorisation)", "auto", 1024),
            ("repdyn jacobian (chunked Jacobians + GEMM)", "jacobian", 1024),
            ("repdyn auto (linear-layer factorisation)", "auto", 2048),
            ("repdyn jacobian (chunked Jacobians + GEMM)", "jacobian", 2048)]
    results = [(label, p, _measure(method, p)) for label, method, p in rows]
    ref = results[0][2]
    lines = [
        "### Empirical NTK (`repdyn.probes.empirical_ntk`)",
        "",
        f"MLP {IN}→{WIDTH}→{WIDTH}→1 (tanh, 100,501 parameters, float32), full Gram matrix on p inputs; "
        f"{torch.get_num_threads()} torch threads, {os.cpu_count()} CPUs (shared machine: other jobs were running). "
        "Peak memory = max RSS of a fresh process minus its RSS after set-up. The difference column compares the "
        "first 64×64 block with the other repdyn method (jacobian for tutorial and auto, auto for jacobian).",
        "",
        "| method | p | wall time (s) | speed-up vs tutorial | peak extra memory (MiB) | max rel. difference |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, p, r in results:
        speed = f"{ref['seconds'] / r['seconds']:.1f}×" if p == 1024 else "–"
        lines.append(f"| {label} | {p} | {r['seconds']:.2f} | {speed} | {r['peak_mib']:.0f} | {r['rel_error']:.1e} |")
    lines += ["", "The auto method never forms a Jacobian for linear layers. The jacobian method (used for parameters "
              "outside plain linear layers) holds one copy of the Jacobian (at most `max_jacobian_bytes`, default "
              "1 GiB; beyond that it works block by block) and computes only the upper block triangle of J Jᵀ; "
              "the tutorial recipe holds two full Jacobians plus vmap temporaries.", "", f"Reproduce: `{COMMAND}`"]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        print(json.dumps(_worker(sys.argv[2], int(sys.argv[3]))))
    else:
        print(run())
