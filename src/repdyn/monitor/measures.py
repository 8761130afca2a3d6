"""What the monitor measures at one recorded step, from the probe set's representations and outputs.

Each function takes tensors already read from the model (no autograd history) and returns NumPy arrays, so the
same code serves the monitor and its tests. Sources:

- two-point state (u, v, w) of chosen input pairs at a layer: Eq. (8) of seed 000 via
  :func:`repdyn.probes.two_point.pair_statistics`;
- per-layer effective rank (Roy & Vetterli) of the centred representation, :func:`repdyn.probes.effective_rank`;
- neural collapse of each layer (NC1 = Tr(Σ_W Σ_B⁺)/C and the simplex-ETF distance of the class means,
  spec 004 §2.8), :func:`repdyn.probes.neural_collapse`, on globally average-pooled features for a
  convolutional feature map (n, C, H, W);
- Cost of Identity ‖A‖²_(K+γI) of each layer's representation (spec 002 §3.5–3.6, γ = γ₀ λ_max(K) by spec 002
  §7 P5(c)), :func:`repdyn.theory.leaky_resnet.cost_of_identity`: along the residual stream of a residual
  network this is the COI profile of seed 002;
- the rescaled Hamiltonian −2H/L̃ = 2⟨B, A⟩ − ‖Bσ(A)ᵀ‖²_F of Eq. (1) of seed 002 with the momenta
  B_l = −(1/λ) ∂C/∂A_l (seed 002 §2.4, spec 002 §3.12: the back-propagated gradient of the data cost C with
  respect to the representation, λ the weight decay), :func:`repdyn.theory.leaky_resnet.rescaled_hamiltonian`;
  it is constant across the layers of a Leaky ResNet at a critical point and tends to the bottleneck rank;
- the stationarity residual r = ‖∇_θC + λθ‖/‖λθ‖ of all trainable parameters θ: spec 002 §3.12's
  r_l = ‖W_l − L̃B_lσ(A_{l−1})ᵀ‖/‖W_l‖ written for any model (W = −(1/λ)∇_W C at a critical point of
  C + (λ/2)‖θ‖²), 0 exactly where the Hamiltonian's conservation can be read;
- centred kernel alignment ⟨HKH, HYYᵀH⟩/(‖HKH‖‖HYYᵀH‖) of the NTK with the labels (Cortes, Mohri &
  Rostamizadeh 2012).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from repdyn.probes.collapse import neural_collapse
from repdyn.probes.rank import effective_rank
from repdyn.probes.two_point import pair_statistics
from repdyn.theory.leaky_resnet import adaptive_gamma, cost_of_identity, rescaled_hamiltonian


def flat(h: Tensor) -> Tensor:
    """(n, ...) -> (n, features)."""
    return h.reshape(h.shape[0], -1)


def two_point_state(hidden: Tensor, outputs: Tensor, pairs: Tensor, targets: Tensor) -> dict[str, np.ndarray]:
    """{u, v, w}: (P,) each, for the input pairs ``pairs`` (P, 2) of the probe set (Eq. (8) of seed 000).

    ``hidden`` (n, ...) is the pair layer's representation, ``outputs`` (n, d_out) and ``targets`` (n, d_out)."""
    state = pair_statistics([flat(hidden)[pairs]], outputs[pairs], targets[pairs])
    return {"u": state.u[:, 0].double().cpu().numpy(), "v": state.v.double().cpu().numpy(),
            "w": state.w.double().cpu().numpy()}


def layer_effective_rank(h: Tensor) -> float:
    """Effective rank of the centred (n, features) representation (:func:`repdyn.probes.effective_rank`), its
    singular values taken as the square roots of the eigenvalues of the smaller Gram matrix in float64 (the same
    values as the SVD to ~1e-7 relative on the large ones that dominate the entropy, at a third of its cost)."""
    a = flat(h).to(torch.float64)
    a = a - a.mean(0)
    gram = a @ a.T if a.shape[0] <= a.shape[1] else a.T @ a
    s = torch.linalg.eigvalsh(gram).clamp_min(0).sqrt()
    if not bool(s.sum() > 0):
        return float(effective_rank(a))  # a zero representation: its error message
    q = s / s.sum()
    return float(torch.exp(-torch.special.xlogy(q, q).sum()))


POOLING = "global average pool over the spatial dimensions (n, C, H, W) -> (n, C)"
"""How a convolutional feature map is read by NC1: the classes separate in the pooled features a classifier head
sees, not pixel by pixel (NC1 of the flattened map counts the spatial spread within an image as class spread)."""


def pooled(h: Tensor) -> Tensor:
    """(n, C, H, W, ...) feature maps -> (n, C) by their mean over the spatial dimensions; (n, d) or (n, L, d)
    unchanged."""
    return h.mean(dim=tuple(range(2, h.dim()))) if h.dim() >= 4 else h


def layer_collapse(h: Tensor, labels: Tensor) -> tuple[float, float]:
    """(NC1 within/between ratio, simplex-ETF Gram distance of the centred class means) of one layer; a
    convolutional feature map is pooled first (:data:`POOLING`)."""
    features = flat(pooled(h))
    if not bool((features != features[:1]).any()):
        raise ValueError("NC1 is undefined for a constant representation (every probe input maps to one point, "
                         "e.g. all ReLUs dead)")
    collapse = neural_collapse(features, labels, center=True)
    return collapse.within_between, collapse.etf_gram_distance


def layer_cost_of_identity(h: Tensor, gamma0: float) -> float:
    """‖A‖²_(K+γI) of the representation A = hᵀ (features × points), γ = γ₀ λ_max(K), in float64."""
    a = flat(h).to(torch.float64).T
    return float(cost_of_identity(a, gamma=adaptive_gamma(a, gamma0)))


def layer_hamiltonian(h: Tensor, cost_gradient: Tensor, weight_decay: float) -> tuple[float, float]:
    """(−2H/L̃, ‖B‖_F) of one layer from its representation h (n, ...) and ∂C/∂h, with A = hᵀ and
    B = −(∂C/∂h)ᵀ/λ (features × points), in float64. −2H/L̃ does not depend on L̃ (Eq. (1) of seed 002)."""
    a = flat(h).to(torch.float64).T
    b = -flat(cost_gradient).to(torch.float64).T / weight_decay
    return float(rescaled_hamiltonian(a, b, 1.0)), float(torch.linalg.norm(b))


def stationarity_residual(params: Sequence[Tensor], grads: Sequence[Tensor | None], weight_decay: float) -> float:
    """‖∇_θC + λθ‖ / ‖λθ‖ over all the given parameters (float64): 0 at a critical point of C + (λ/2)‖θ‖²."""
    gap = torch.zeros((), dtype=torch.float64)
    size = torch.zeros((), dtype=torch.float64)
    for p, g in zip(params, grads):
        decay = weight_decay * p.detach().double()
        gap += (decay if g is None else g.detach().double() + decay).pow(2).sum().cpu()
        size += decay.pow(2).sum().cpu()
    return float(gap.sqrt() / size.sqrt()) if size > 0 else float("nan")


def centred_alignment(gram: np.ndarray, targets: np.ndarray) -> float:
    """⟨HKH, HYYᵀH⟩_F / (‖HKH‖_F ‖HYYᵀH‖_F), H = I − 11ᵀ/m: centred kernel alignment with the labels."""
    m = gram.shape[0]
    h = np.eye(m) - 1.0 / m
    kc, yc = h @ gram @ h, h @ targets @ targets.T @ h
    return float((kc * yc).sum() / (np.linalg.norm(kc) * np.linalg.norm(yc)))
