"""Estimating local-elasticity strengths from training logs (seed 004 §4, App. D; spec 004 §2.10–§2.11).

Logs are per trial r and iteration t: the label y_r(t) of the one example sampled at that iteration and its
pre-update logits z_r(t) ∈ R^K. Class means are Xbar[t, k, j] (iteration, class, logit coordinate).
"""

from __future__ import annotations

import numpy as np
from scipy.signal import savgol_filter

from repdyn.theory.elastic_sde import margin_directions


def class_mean_logits(labels: np.ndarray, logits: np.ndarray, K: int) -> np.ndarray:
    """X̄^k(t) = mean over trials {r : y_r(t) = k} of z_r(t) (spec 004 §2.10.0, code `groupby(['itr','y'])`).

    labels: (R, T) ints in [0, K); logits: (R, T, K). Returns (T, K, K) with NaN in empty (t, k) cells (the
    reference code's reshape silently misaligns there; spec 004 §7 pitfall 14).
    """
    labels = np.asarray(labels)
    logits = np.asarray(logits, dtype=float)
    if labels.shape != logits.shape[:2] or logits.shape[2] != K:
        raise ValueError(f"labels (R, T) and logits (R, T, K={K}) disagree: {labels.shape} vs {logits.shape}")
    if labels.min() < 0 or labels.max() >= K:
        raise ValueError(f"labels must lie in [0, {K}), got range [{labels.min()}, {labels.max()}]")
    onehot = labels[..., None] == np.arange(K)                         # (R, T, K)
    counts = onehot.sum(axis=0)                                        # (T, K)
    sums = np.einsum("rtk,rtj->tkj", onehot.astype(float), logits)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts[..., None] > 0, sums / counts[..., None], np.nan)


def fill_empty_cells(xbar: np.ndarray) -> np.ndarray:
    """Linear interpolation over t of NaN cells of Xbar (T, K, K), per (k, j); edges take the nearest value."""
    out = np.array(xbar, dtype=float)
    t = np.arange(out.shape[0])
    for idx in np.ndindex(out.shape[1:]):
        col = out[(slice(None),) + idx]
        bad = np.isnan(col)
        if bad.all():
            raise ValueError(f"class-mean cell {idx} is empty at every iteration")
        if bad.any():
            col[bad] = np.interp(t[bad], t[~bad], col[~bad])
    return out


def _masked_log_abs(ratio: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.abs(ratio))
    out[~np.isfinite(out)] = np.nan
    return out


def _nanmean(x: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    ok = ~np.isnan(x)
    return np.where(ok.any(axis=axis), np.nansum(x, axis=axis) / np.maximum(ok.sum(axis=axis), 1), np.nan)


def integrated_strengths_isotropic(xbar: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Â(t), B̂(t) of the l-model by the log-ratio formulas (Eq. (11)/(D.1), exact form (D.4)–(D.6), code
    `estimate_AB_I`; spec 004 §2.10.1, erratum 6: Eq. (11) is garbled in the paper).

    With c_0 = mean_l X̄^l(0), c_k = X̄^k(0) − c_0 and X̃(t) = mean_l X̄^l(t), coordinate-wise:
    Â = avg_j avg_k log|X̃_j (X̄^k_j − X̃_j)^{K−1} / (c_{0,j} c_{k,j}^{K−1})|,
    B̂ = −avg_j avg_k log|c_{0,j}(X̄^k_j − X̃_j) / (c_{k,j} X̃_j)|. ±inf are masked as NaN before averaging.
    """
    xbar = np.asarray(xbar, dtype=float)
    K = xbar.shape[1]
    c0 = xbar[0].mean(axis=0)                                          # (K,) over j
    ck = xbar[0] - c0                                                  # (K, K)
    tilde = xbar.mean(axis=1)                                          # (T, K)
    dev = xbar - tilde[:, None, :]                                     # (T, K, K)
    log_a = (_masked_log_abs(tilde / c0)[:, None, :]
             + (K - 1) * _masked_log_abs(dev / ck[None]))
    log_b = -(_masked_log_abs(dev / ck[None]) - _masked_log_abs(tilde / c0)[:, None, :])
    # code order: classes first, then coordinates (np.nanmean twice)
    A = _nanmean(_nanmean(log_a, axis=1), axis=1)
    B = _nanmean(_nanmean(log_b, axis=1), axis=1)
    return A, B


def logit_projection_vectors() -> tuple[np.ndarray, np.ndarray]:
    """v1, v2 ∈ R⁹ of (D.2)/(D.8) for K = 3 (class-major): v1ᵀd = 1, v2ᵀd = 4/3, v1 ⟂ f-modes, v2 = [d_1; d_2; 0]."""
    v1 = np.array([1, -1, -1, -1, 1, -1, -2, -2, 0], dtype=float) / 4
    v2 = np.array([2, -1, -1, -1, 2, -1, 0, 0, 0], dtype=float) / 3
    return v1, v2


def integrated_strengths_logit(xbar: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Â(t), B̂(t) of the L-model for K = 3, (D.11)–(D.16) and code `estimate_AB_L` (spec 004 §2.10.2).

    q1 = v1ᵀx, q2 = (v2 − (4/3)v1)ᵀx; Â_B1 = K log|q1(t)/q1(0)| ≈ A − B, Â_B2 = K log|q2(t)/q2(0)| ≈ A + B/2;
    Â = (Â_B1 + (K−1) Â_B2)/K, B̂ = (K−1)(Â_B2 − Â_B1)/K. Follows the code (no "−1" inside the log, §7 item 6);
    exact when the null-space constant κ_1 vanishes, otherwise asymptotically.
    """
    xbar = np.asarray(xbar, dtype=float)
    if xbar.shape[1:] != (3, 3):
        raise ValueError(f"the L-model estimator is defined for K = 3 logits, got class means {xbar.shape[1:]}")
    K = 3
    v1, v2 = logit_projection_vectors()
    x = xbar.reshape(len(xbar), 9)
    q1 = x @ v1
    q2 = x @ (v2 - 4.0 / 3.0 * v1)
    ab1 = K * _masked_log_abs(q1 / q1[0])
    ab2 = K * _masked_log_abs(q2 / q2[0])
    return (ab1 + (K - 1) * ab2) / K, (K - 1) * (ab2 - ab1) / K


def odd_window(window: int, length: int, polyorder: int = 2) -> int:
    """The largest odd Savitzky–Golay window ≤ ``window`` that fits a series of ``length`` (≥ polyorder + 2)."""
    w = min(int(window), length if length % 2 else length - 1)
    w = w if w % 2 else w - 1
    if w <= polyorder:
        raise ValueError(f"series of length {length} is too short for a window > polyorder={polyorder}")
    return w


def strengths_from_integrated(integrated: np.ndarray, window: int, times: np.ndarray | None = None) -> np.ndarray:
    """α̂ (or β̂) as the Savitzky–Golay first derivative of Â (or B̂): at every point, the slope of a least-squares
    quadratic through the ``window`` nearest points (polyorder 2, mode 'interp' at the edges: the edge windows'
    quadratics; spec 004 §2.10.3, the code's defaults). The one estimator of α̂, β̂ in repdyn.

    ``times``: the iterations of the entries (default 0, 1, 2, …: ``scipy.signal.savgol_filter`` with delta 1).
    Non-uniform times (a monitor's log-spaced recordings) use the same local quadratic fit on those times; with
    window 3 its interior values are the second-order finite differences of ``numpy.gradient``. NaN entries are
    interpolated first."""
    series = np.asarray(integrated, dtype=float)
    if np.isnan(series).any():
        ok = ~np.isnan(series)
        if not ok.any():
            raise ValueError("integrated strength is NaN everywhere")
        idx = np.arange(series.size)
        series = np.interp(idx, idx[ok], series[ok])
    w = odd_window(window, series.size)
    if times is None:
        return savgol_filter(series, window_length=w, polyorder=2, deriv=1)
    t = np.asarray(times, dtype=float)
    if t.shape != series.shape or np.any(np.diff(t) <= 0):
        raise ValueError(f"times must be increasing and match the series ({series.shape}), got {t.shape}")
    out = np.empty_like(series)
    half = w // 2
    for i in range(series.size):
        lo = min(max(i - half, 0), series.size - w)
        tt = t[lo:lo + w] - t[i]
        c = np.polyfit(tt, series[lo:lo + w], 2)
        out[i] = c[1]                                                   # d/dt of c0 t² + c1 t + c2 at t = t_i
    return out


def tail_index(integrated: np.ndarray, tail_n: int = 1000) -> float:
    """r̂ = 1 − nanmean_{last tail_n t} log(Â(t)) / log(1+t), (D.17)–(D.19) with the code's sign flip when more
    than half the tail is negative (spec 004 §2.10.4; erratum 7: applied to the integrated Â, B̂, not α̂;
    (D.19)'s "log(1+r)" read as log(1+t)). t is the 0-based iteration; non-positive entries are skipped."""
    series = np.asarray(integrated, dtype=float)
    t = np.arange(series.size)[-tail_n:]
    tail = series[-tail_n:]
    if np.mean(tail < 0) > 0.5:
        tail = -tail
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(tail) / np.log1p(t)
    ratio[~np.isfinite(ratio)] = np.nan
    if np.isnan(ratio).all():
        return float("nan")
    return float(1.0 - np.nanmean(ratio))


def separating_direction(xbar: np.ndarray, k: int, l: int, last: int = 2) -> np.ndarray:
    """ν = (X̄^k(T) − X̄^l(T))/‖·‖ of (C.24), with X̄ averaged over the last ``last`` iterations (code)."""
    end = np.nanmean(np.asarray(xbar, dtype=float)[-last:], axis=0)
    v = end[k] - end[l]
    norm = np.linalg.norm(v)
    if not norm > 0:
        raise ValueError(f"class means {k} and {l} coincide at the end; no separating direction")
    return v / norm


def relative_difference(genuine: np.ndarray, simulated: np.ndarray, model: str) -> np.ndarray:
    """RD_k(t) = ‖X̄^k − Ȳ^k‖_{H^k} / ((‖X̄^k‖ + ‖Ȳ^k‖)/2), (D.21); H^k = I ("isotropic") or H̄^k ("logit",
    where ‖x‖_{H̄^k} = |d_kᵀx|/‖d_k‖). genuine, simulated: (T, K, K). Returns (T, K), values in [0, 2]."""
    X, Y = np.asarray(genuine, dtype=float), np.asarray(simulated, dtype=float)
    diff = X - Y
    if model == "isotropic":
        num = np.linalg.norm(diff, axis=-1)
    elif model == "logit":
        d = margin_directions(X.shape[-1])
        num = np.abs(np.einsum("tkj,kj->tk", diff, d)) / np.linalg.norm(d, axis=-1)
    else:
        raise ValueError(f"model={model!r} is not allowed: use 'isotropic' or 'logit'")
    with np.errstate(invalid="ignore", divide="ignore"):  # NaN where both paths are zero
        return num / ((np.linalg.norm(X, axis=-1) + np.linalg.norm(Y, axis=-1)) / 2)


def simulation_initial_values(xbar0: np.ndarray, n_runs: int, rng: np.random.Generator) -> np.ndarray:
    """Y^k(0) ~ N(0, σ_k² I_K) with σ_k = ‖X̄^k(0)‖/√K used as the standard deviation, as in the code
    (spec 004 §2.11; the paper's "N(0, σ_k I)" is ambiguous). Returns (n_runs, K, K)."""
    xbar0 = np.asarray(xbar0, dtype=float)
    K = xbar0.shape[0]
    sd = np.linalg.norm(xbar0, axis=-1) / np.sqrt(K)
    return rng.standard_normal((n_runs, K, K)) * sd[None, :, None]


def rescale_to_genuine(genuine: np.ndarray, simulated_mean: np.ndarray, k: int = 0, j: int = 0,
                       tail_n: int = 1000) -> np.ndarray:
    """Multiply the simulated mean path by s = mean_tail X̄^k_j / mean_tail Ȳ^k_j (code `viz_leode`, spec 004
    §2.11): the single scalar that matches coordinate (k, j) at convergence."""
    g = np.nanmean(np.asarray(genuine)[-tail_n:, k, j])
    s = np.mean(np.asarray(simulated_mean)[-tail_n:, k, j])
    if s == 0:
        raise ValueError("simulated coordinate is zero at the end; cannot rescale")
    return simulated_mean * (g / s)
