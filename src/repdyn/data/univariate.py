"""One-dimensional sample sets of spec 001 §3.2 (seed 001: square wave, sinusoids), x sorted in [−1, 1]."""

from __future__ import annotations

import numpy as np

UNIVARIATE_SETS = ("SQ10", "SIN10", "SIN12", "SIN20")


def univariate_samples(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) in float64 for one of the named sets; x = linspace(−1, 1, s) (spec 001 §3.2).

    SQ10: square wave of period 4 samples, y = (1, 1, −1, −1, 1, 1, −1, −1, 1, 1) (Figs. 4, 6, H1).
    SIN10: y = sin(π x) (Figs. 5, 7). SIN12: y = sin(2π x), s = 12. SIN20: y = sin(2π x), s = 20 (Fig. 8).
    """
    if name == "SQ10":
        x = np.linspace(-1.0, 1.0, 10)
        return x, np.where((np.arange(10) // 2) % 2 == 0, 1.0, -1.0)
    if name == "SIN10":
        x = np.linspace(-1.0, 1.0, 10)
        return x, np.sin(np.pi * x)
    if name in ("SIN12", "SIN20"):
        x = np.linspace(-1.0, 1.0, int(name[3:]))
        return x, np.sin(2 * np.pi * x)
    raise ValueError(f"unknown sample set {name!r}: choose one of {', '.join(UNIVARIATE_SETS)}")

