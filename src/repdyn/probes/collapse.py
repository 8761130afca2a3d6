"""Neural-collapse metrics of features h (N, f) with class labels in {0, ..., C−1}.

- NC1 (Papyan, Han & Donoho 2020): Tr(Σ_W Σ_B⁺)/C, with Σ_W = (1/N) Σ_i (h_i − μ_{c_i})(h_i − μ_{c_i})ᵀ and
  Σ_B = (1/C) Σ_c (μ_c − μ_G)(μ_c − μ_G)ᵀ; → 0 as within-class variability collapses.
- Simplex-ETF distance of the normalised class means u_c = μ_c/‖μ_c‖ (spec 004 §2.8): the largest deviation
  max_{c≠c'} |cos(u_c, u_c') + 1/(C−1)|, and ‖G/‖G‖_F − (I − 11ᵀ/C)/√(C−1)‖_F with G the Gram matrix of the
  u_c (Papyan's NC2); both 0 exactly for a simplex ETF. Spec 004 uses the uncentred class means of the logits
  (``center=False``); Papyan subtracts the global mean μ_G first (``center=True``).
- The coefficient of variation of the class-mean norms ‖μ_c‖ (spec 004 §2.8 (ii)).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def _class_means(h: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    if h.dim() != 2:
        raise ValueError(f"features must be (N, f), got shape {tuple(h.shape)}")
    labels = labels.reshape(-1).long()
    if labels.shape[0] != h.shape[0]:
        raise ValueError(f"need one label per point: {h.shape[0]} points, {labels.shape[0]} labels")
    classes = int(labels.max()) + 1
    counts = torch.bincount(labels, minlength=classes)
    if classes < 2 or bool((counts == 0).any()):
        raise ValueError(f"labels must cover classes 0..C-1 with C >= 2, got counts {counts.tolist()}")
    h = h.to(torch.float64)
    sums = torch.zeros(classes, h.shape[1], dtype=h.dtype, device=h.device).index_add_(0, labels, h)
    return sums / counts.unsqueeze(1).to(h.dtype), labels


def within_between_ratio(h: Tensor, labels: Tensor, rcond: float = 1e-10) -> Tensor:
    """NC1 = Tr(Σ_W Σ_B⁺)/C. Σ_B⁺ is formed from the SVD of the centred class means (rank ≤ C − 1), singular
    values below ``rcond``·s_max being treated as zero."""
    means, labels = _class_means(h, labels)
    h = h.to(torch.float64)
    classes = means.shape[0]
    centred = means - h.mean(0)
    # Σ_B = MᵀM/C with M = centred (C, f); Σ_B⁺ = C Σ_r v_r v_rᵀ / s_r² over its nonzero singular values.
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)
    keep = s > rcond * s[0]
    directions, s = vh[keep], s[keep]
    residual = (h - means[labels]) @ directions.T  # (N, r): within-class deviations along Σ_B's range
    within = residual.pow(2).mean(0)  # v_rᵀ Σ_W v_r
    return (classes * within / s.pow(2)).sum() / classes


def etf_deviation(h: Tensor, labels: Tensor, center: bool = False) -> tuple[Tensor, Tensor]:
    """(max_{c≠c'} |cos(u_c, u_c') + 1/(C−1)|, ‖G/‖G‖_F − (I − 11ᵀ/C)/√(C−1)‖_F) of the normalised class means."""
    means, _ = _class_means(h, labels)
    if center:
        means = means - h.to(torch.float64).mean(0)
    classes = means.shape[0]
    unit = torch.nn.functional.normalize(means, dim=1)
    gram = unit @ unit.T
    off = ~torch.eye(classes, dtype=torch.bool, device=gram.device)
    max_cos_error = (gram[off] + 1.0 / (classes - 1)).abs().max()
    ideal = (torch.eye(classes, dtype=gram.dtype, device=gram.device) - 1.0 / classes) / (classes - 1) ** 0.5
    return max_cos_error, torch.linalg.norm(gram / torch.linalg.norm(gram) - ideal)


def mean_norm_variation(h: Tensor, labels: Tensor, center: bool = False) -> Tensor:
    """Coefficient of variation std/mean of the class-mean norms ‖μ_c‖."""
    means, _ = _class_means(h, labels)
    if center:
        means = means - h.to(torch.float64).mean(0)
    norms = means.norm(dim=1)
    return norms.std(unbiased=False) / norms.mean()


@dataclass(frozen=True)
class NeuralCollapse:
    within_between: float
    etf_max_cos_error: float
    etf_gram_distance: float
    mean_norm_cv: float


def neural_collapse(h: Tensor, labels: Tensor, center: bool = False) -> NeuralCollapse:
    """All metrics at once (``center`` applies to the ETF and norm metrics; NC1 always centres)."""
    max_cos, gram_distance = etf_deviation(h, labels, center)
    return NeuralCollapse(
        within_between=float(within_between_ratio(h, labels)),
        etf_max_cos_error=float(max_cos),
        etf_gram_distance=float(gram_distance),
        mean_norm_cv=float(mean_norm_variation(h, labels, center)),
    )
