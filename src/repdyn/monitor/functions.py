"""The Monitor's measures as plain functions, usable without a Monitor (as torchmetrics' functional API). Each is
the one implementation the Monitor and the report use (:mod:`repdyn.monitor.measures`, :mod:`repdyn.probes`,
:mod:`repdyn.theory.effective_theory`), exported here with its equation.

    from repdyn import effective_rank, nc1, ntk_alignment, two_point_rates
    nc1(features, labels)                      # features (n, ...) of one layer, labels (n,)
    ntk_alignment(model, inputs, labels)       # the empirical NTK's centred alignment with the labels
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from repdyn.monitor import measures
from repdyn.probes.batch import Batch, ForwardFn
from repdyn.probes.ntk import empirical_ntk
from repdyn.theory.effective_theory import RateFit, fit_rates


def effective_rank(features: Tensor) -> float:
    """Effective rank (Roy & Vetterli 2007) of a layer's representation of n inputs, features (n, ...):

        erank(A) = exp(−Σ_i p_i log p_i),  p_i = s_i / Σ_j s_j,

    s the singular values of the centred (n, features) matrix A (1 ≤ erank ≤ rank A; k equal singular values give
    k). Raises ValueError for a constant representation (A = 0 after centring).

    Example: three orthogonal directions of equal spread have effective rank 3.

        >>> import torch
        >>> from repdyn import effective_rank
        >>> features = torch.cat([torch.eye(3), -torch.eye(3)])
        >>> round(effective_rank(features), 6)
        3.0
    """
    return measures.layer_effective_rank(torch.as_tensor(features))


def nc1(features: Tensor, labels: Tensor | np.ndarray) -> float:
    """Neural collapse NC1 (Papyan, Han & Donoho 2020; spec 004 §2.8) of a layer's representation:

        NC1 = Tr(Σ_W Σ_B⁺) / C,

    Σ_W the within-class and Σ_B the between-class covariance of the features (n, ...) of C classes, Σ_B⁺ its
    pseudo-inverse: below 1 the classes are tighter than the separation of their means; neural collapse is
    NC1 → 0. A convolutional feature map (n, C, H, W) is globally average-pooled to (n, C) first. Raises
    ValueError for a constant representation.

    Example: two classes, each collapsed onto its mean, have NC1 = 0.

        >>> import torch
        >>> from repdyn import nc1
        >>> features = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
        >>> nc1(features, torch.tensor([0, 0, 1, 1]))
        0.0
    """
    return measures.layer_collapse(torch.as_tensor(features), torch.as_tensor(np.asarray(labels)).long())[0]


def ntk_alignment(model: nn.Module, inputs: Batch, labels: Tensor | np.ndarray, *,
                  forward: ForwardFn | None = None) -> float:
    """Centred kernel alignment (Cortes, Mohri & Rostamizadeh 2012) of the empirical NTK with the labels:

        A(K, Y) = ⟨HKH, HYYᵀH⟩_F / (‖HKH‖_F ‖HYYᵀH‖_F),  H = I − 11ᵀ/m,

    K_ij = Σ_a ∂f_a(x_i)/∂θ · ∂f_a(x_j)/∂θ the empirical NTK (trace over the outputs,
    :func:`repdyn.probes.empirical_ntk`) on the m inputs, Y (m, C) their one-hot labels over the model's C outputs.
    It rises as training turns the tangent kernel towards the task (feature learning, seed 003). ``inputs`` may
    be a tensor, token ids or a dict batch; ``forward(model, batch) -> (m, C)`` adapts other models (e.g.
    ``lambda m, b: m(**b).logits``).

    Example: the alignment is a cosine, in [−1, 1].

        >>> import torch
        >>> from repdyn import ntk_alignment
        >>> _ = torch.manual_seed(0)
        >>> model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        >>> inputs = torch.randn(6, 3)
        >>> -1.0 <= ntk_alignment(model, inputs, torch.tensor([0, 1, 0, 1, 0, 1])) <= 1.0
        True
    """
    kernel = empirical_ntk(model, inputs, forward=forward).double().cpu().numpy()
    y = np.asarray(torch.as_tensor(np.asarray(labels)).long())
    with torch.no_grad():
        was_training = model.training
        model.eval()
        try:
            from repdyn.monitor.monitor import default_output
            from repdyn.probes.batch import default_forward, take

            out = (forward or (lambda m, b: default_output(default_forward(m, b))))(model, take(inputs, slice(0, 1)))
        finally:
            model.train(was_training)
    classes = int(out.shape[-1])
    return measures.centred_alignment(kernel, np.eye(classes)[y])


def two_point_rates(steps: Any, u: Any, v: Any, w: Any, dx2: float, dy2: float) -> RateFit:
    """The effective learning rates 1/τ_h, 1/τ_y of the two-point theory (seed 000) fitted to a measured
    trajectory of one input pair by minimising Eq. (49) over the solutions of Eq. (7):

        du/dt = −(X/τ_h) w
        dv/dt = −w (u/τ_y + (X/τ_h) v/u)
        dw/dt = −(u/(2τ_y)) (3w − v + Y) − (X/(2τ_h)) (v + w) w/u,

    u = ‖Δh‖², v = ‖Δf‖², w = v − Δfᵀ Δy of the pair at a hidden layer and the output, X = ‖Δx‖², Y = ‖Δy‖²,

    dx2 = X and dy2 = Y (:func:`repdyn.theory.effective_theory.fit_rates`). Returns the fit
    (``rate_h``, ``rate_y``, ``tau_ratio`` = τ_y/τ_h, the fitted ``theory`` trajectory); Eq. (10) then predicts
    the final distance (:func:`repdyn.theory.effective_theory.fixed_point_distance`). Raises FitError when the
    optimum is on a search bound (e.g. a lazy run in which u does not move).

    Example: the rates of a trajectory that Eq. (7) itself generated are recovered.

        >>> import numpy as np
        >>> from repdyn import two_point_rates
        >>> from repdyn.theory.effective_theory import integrate_dynamics
        >>> t = np.linspace(0.0, 400.0, 400)
        >>> path = integrate_dynamics((0.05, 0.3, 0.3), X=1.0, Y=0.5, rate_h=0.02, rate_y=0.5, t=t)
        >>> fit = two_point_rates(t, path.u, path.v, path.w, dx2=1.0, dy2=0.5)
        >>> bool(np.isclose(fit.rate_h, 0.02, rtol=1e-3) and np.isclose(fit.rate_y, 0.5, rtol=1e-3))
        True
    """
    return fit_rates(np.asarray(steps, dtype=float), u, v, w, float(dx2), float(dy2))
