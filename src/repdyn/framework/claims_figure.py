"""The per-experiment figure of claims: each claim's per-seed values against its expectation band, with the
estimate's 90 % interval and the negative control's estimate, so a reader can see how decisive a verdict is."""

from __future__ import annotations

import math
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from repdyn.framework.claims import ClaimResult

COLUMNS = 4
VERDICT_COLOURS = {"reproduced": "#11772d", "not reproduced": "#b3261e", "not reproduced (no effect)": "#8a3b12",
                   "inconclusive": "#b36b00", "undecided": "#555555", "vacuous": "#6b3fa0", "skipped": "#777777"}


def _plotted(claim: ClaimResult) -> bool:
    return claim.statistic in ("median", "mean") and any(
        not isinstance(v, bool) and math.isfinite(v) for v in claim.values)


def claims_figure(claims: Sequence[ClaimResult]) -> Figure | None:
    """Small multiples, one per claim measured on seeds; None when no claim has per-seed values."""
    shown = [c for c in claims if _plotted(c)]
    if not shown:
        return None
    rows = math.ceil(len(shown) / COLUMNS)
    columns = min(COLUMNS, len(shown))
    figure = Figure(figsize=(3.2 * columns, 2.3 * rows), layout="constrained")
    for axes, claim in zip(figure.subplots(rows, columns, squeeze=False).flat, shown):
        values = [v for v in claim.values if math.isfinite(v)]
        colour = VERDICT_COLOURS[claim.verdict]
        axes.scatter(range(len(values)), values, color=colour, s=18, zorder=3, label="seeds")
        summary = [v for v in (claim.estimate, claim.ci_low, claim.ci_high) if math.isfinite(v)]
        if len(summary) == 3:  # a seed that could not be measured (NaN) leaves the summary undefined
            axes.axhline(claim.estimate, color=colour, lw=1.2, label=claim.statistic)
            axes.axhspan(claim.ci_low, claim.ci_high, color=colour, alpha=0.15, lw=0, label="90 % interval")
        control = claim.control_value if claim.control_value is not None and math.isfinite(claim.control_value) \
            else None
        if control is not None:
            axes.axhline(control, color="#555", ls=":", lw=1.2, label="control")
        lo, hi = claim.band
        shown_values = values + summary + [b for b in (lo, hi, control) if b is not None and math.isfinite(b)]
        span = (max(shown_values) - min(shown_values)) or abs(max(shown_values)) or 1.0
        bottom, top = min(shown_values) - 0.1 * span, max(shown_values) + 0.1 * span
        axes.axhspan(bottom if lo is None else lo, top if hi is None else hi, facecolor="none", edgecolor="#333",
                     hatch="//", lw=0, alpha=0.35, label="expected")
        axes.set_ylim(bottom, top)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_title(f"{claim.id}: {claim.verdict}", fontsize=8, color=colour)
        axes.set_xlabel("seed", fontsize=7)
        axes.set_ylabel(claim.statistic if len(claim.values) > 1 else "value", fontsize=7)
        axes.tick_params(labelsize=7)
    for axes in list(figure.axes)[len(shown):]:
        axes.set_visible(False)
    figure.axes[0].legend(fontsize=6, loc="best")
    return figure
