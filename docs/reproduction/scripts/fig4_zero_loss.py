"""Seed 003, Fig. 4 at the paper's setting: the single stripe in d = 2, p = h = 10⁴, α = 10⁻⁶, trained by the
adaptive hinge flow (max_dgrad 10⁻⁴, the paper scale of ``compression.single_neuron``) to zero hinge loss.

Draws data and initialisation exactly as ``single_neuron.execute`` does (seed s: the same network), integrates with
``train_gradient_flow`` and writes, per seed, ``fig4_seed<s>.npz``: ζ₁ = −√2 b/ω₁ of every neuron at t* and at the
end, ω₁ at 0, t* and the end, a thinned trace of ζ₁ and the fitted fraction / train loss / Λ against t, and the
test error at t* and at the end on 10⁴ fresh points. The step cap is set from a timed calibration so that the run
ends before ``--deadline`` seconds (then ``stopped`` says whether zero loss was reached). Needs a GPU to finish in
minutes (docs/reproduction/003.md, session 34); the analysis is ``single_neuron``'s (grown neurons, interface ratio).

    python docs/reproduction/scripts/fig4_zero_loss.py --device cuda --seeds 0 --deadline 300 --out DIR
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch

from repdyn.data.manifolds import sample_manifold
from repdyn.experiments.compression.common import generator, network_output
from repdyn.experiments.compression.single_neuron import SingleNeuronConfig, offset_along_e1
from repdyn.nn.gradient_flow import train_gradient_flow
from repdyn.nn.models.hidden_layer import init_hidden_layer, stack_params
from repdyn.theory.compression import classification_error


def test_error(net, net0, xt: torch.Tensor, yt: torch.Tensor, memory_gb: float) -> float:
    """Test error of the centred output f − f₀ (the sign of α(f − f₀))."""
    f = network_output(net, xt, memory_gb) - network_output(net0, xt, memory_gb)
    return float(classification_error(f, yt)[0])


def run_seed(cfg: SingleNeuronConfig, seed: int, device: str, deadline: float, out: Path) -> None:
    gen = generator(seed)
    x, y = sample_manifold("stripe", cfg.p, 2, gen, batch=(1,), device=device)
    net0 = init_hidden_layer(1, cfg.width, 2, gen, device=device)
    xt, yt = sample_manifold("stripe", 10000, 2, gen, batch=(1,), device=device)
    flow = dict(max_dgrad=cfg.max_dgrad, stop_fraction=cfg.fit_fraction)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    train_gradient_flow(net0, x, y, cfg.alpha, max_steps=50, record_every=0, **flow)  # warm-up
    sync()
    start = time.perf_counter()
    train_gradient_flow(net0, x, y, cfg.alpha, max_steps=500, record_every=0, **flow)
    sync()
    per_step = (time.perf_counter() - start) / 500
    max_steps = min(cfg.max_steps, int(deadline / per_step))
    start = time.perf_counter()
    res = train_gradient_flow(net0, x, y, cfg.alpha, max_steps=max_steps, trace_neurons=cfg.width,
                              record_every=max(1, math.ceil(max_steps / 400)), **flow)
    sync()
    wall = time.perf_counter() - start
    hist = {k: res.trajectory[k][:, 0].cpu().numpy() for k in res.trajectory if k != "neurons"}
    zeta_trace = offset_along_e1(res.trajectory["neurons"][:, 0].cpu().numpy())  # (T, h)
    start_p, star_p, end_p = (stack_params(n)[0].cpu().numpy() for n in (net0, res.at_t_star, res.net))
    np.savez_compressed(
        out / f"fig4_seed{seed}.npz", seed=seed, p=cfg.p, width=cfg.width, alpha=cfg.alpha,
        max_dgrad=cfg.max_dgrad, steps=res.trajectory.stopped_at, max_steps=max_steps, per_step_s=per_step,
        wall_s=wall,
        stopped=bool(res.stopped[0]), t_star=float(res.t_star[0]), t_end=float(res.t[0]),
        zeta_star=offset_along_e1(star_p), zeta_end=offset_along_e1(end_p),
        w1_init=start_p[:, 0], w1_star=star_p[:, 0], w1_end=end_p[:, 0],
        test_error_star=test_error(res.at_t_star, net0, xt, yt, cfg.memory_gb),
        test_error_end=test_error(res.net, net0, xt, yt, cfg.memory_gb),
        trace_t=hist["t"], trace_fitted=hist["fitted"], trace_loss=hist["loss"],
        trace_lambda=hist["amplification"], zeta_trace=zeta_trace[::max(1, len(zeta_trace) // 100)])
    print(f"seed {seed}: {res.trajectory.stopped_at} steps in {wall:.0f} s ({per_step * 1e3:.2f} ms/step), stopped="
          f"{bool(res.stopped[0])}, fitted {hist['fitted'][-1]:.4f}, t*={float(res.t_star[0]):.4g}, "
          f"t_end={float(res.t[0]):.4g}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--p", type=int, default=SingleNeuronConfig.p)
    parser.add_argument("--width", type=int, default=SingleNeuronConfig.width)
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds of integration per seed")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    cfg = SingleNeuronConfig(p=args.p, width=args.width)
    args.out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        run_seed(cfg, seed, args.device, args.deadline, args.out)


if __name__ == "__main__":
    main()
