"""What one experiment's reproduction produced, as plain data: its judged claims, figures, metrics and runs. The
report renders it; the runner (:mod:`repdyn.runtime.reproduce`) builds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from repdyn.framework.claims import ClaimResult


@dataclass
class ExperimentOutcome:
    """Everything the report shows for one experiment."""

    name: str
    title: str
    paper: str
    source: str
    config: dict[str, Any]
    claims: list[ClaimResult]
    figures: dict[str, bytes]  # name -> PNG
    metrics: list[dict[str, Any]]
    runs: list[dict[str, Any]]  # label, status, seconds, step
    notes: str = ""
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Python warnings raised by its runs and its analysis (collected here, not printed)."""
    analysis_seconds: float = 0.0
    """CPU-seconds of this process spent reading the stored runs, analysing them and drawing the figures."""
