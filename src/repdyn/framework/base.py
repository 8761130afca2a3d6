"""The experiment contract: configs per scale, independent runs, and an analysis that returns figures and claims.

A topic is a package ``repdyn/experiments/<topic>/`` with one module per experiment; its ``__init__`` lists them in
``EXPERIMENTS`` beside the topic's :class:`Paper` record ``PAPER``; :mod:`repdyn.runtime.registry` finds both there.
An experiment declares its configs per scale as data (``scales``), with the config dataclass's defaults meaning the
paper's settings, and checks in ``prepare`` every constraint its config's declared bounds cannot express, so bad
input is rejected at planning, before anything runs.

The runtime expands ``runs(config)`` into independent units, executes each one (or reads it back from the result
store), and calls ``analyse(config, results)`` on the stored results. ``execute`` must be a pure function of
(config, run, seed, device): the store keys results by exactly those.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from repdyn.framework.claims import ClaimSpec, Measured
from repdyn.framework.config import ConfigError

SCALES = ("smoke", "quick", "full", "paper")
"""smoke: seconds, used by tests; quick (default): every experiment in minutes on a 2-core CPU; full: the smallest
setting at which every claim's precondition holds and its interval decides, on a CPU (each paper within 2 hours on 2
cores, checkpointed); paper: the papers' own sizes, for a GPU or a cluster."""

RunResult = dict[str, Any]
"""What ``execute`` returns: named NumPy arrays and Python scalars (int, float, bool, str)."""


@dataclass(frozen=True)
class Paper:
    """The paper a topic reproduces: its number in shared/seeds (e.g. "000"), the topic (package name) and the
    text shown in the report."""

    number: str
    topic: str
    title: str
    authors: str
    theory: str


@dataclass(frozen=True)
class RunSpec:
    """One independent unit of work, e.g. one (gain, seed-batch) of a sweep. ``label`` is unique within the
    experiment and readable ("gain=0.1"); ``params`` (JSON-able) are what distinguishes this run."""

    label: str
    params: Mapping[str, Any] = field(default_factory=dict)
    seed_group: str = ""
    """Runs of one experiment with the same non-empty ``seed_group`` get the same seed (e.g. the runs of an α scan
    share their data and initialisation); by default each label gets its own."""
    shared: str = ""
    """Non-empty: the name of a run that several experiments read (e.g. ``"effective_theory.default_networks"``). Its
    key and seed come from this name, the label and ``params`` alone, not from the declaring experiment or its
    config, so every experiment that declares the same (shared, label, params) reads one stored run, trained once.
    Its ``execute`` must therefore depend on ``params``, seed and device only: it gets a config whose every field
    raises when read (:func:`repdyn.framework.config.run_view`)."""


def batch_label(label: str, batch: int) -> str:
    """The label of seed batch ``batch`` of run ``label``: a further batch repeats the run under its own seed (its
    label seeds it), and batch 0 keeps the run's label, so a store made with fewer batches is extended, not redone."""
    return f"{label} b={batch}" if batch else label


@dataclass
class Analysis:
    """What ``analyse`` returns.

    measured: claim id -> value (or :class:`Measured` with a note of evidence).
    figures: name -> matplotlib Figure (closed by the report after rendering).
    metrics: one row per run or condition, for the report's metrics table (metrics.csv / .parquet).
    notes: explanation shown under the experiment's section, e.g. why a claim fails at this scale.
    states: precondition quantity -> its per-seed values (:class:`Measured`), e.g. the stationarity residual of each
    trained network; every claim whose :class:`~repdyn.framework.claims.Precondition` names it is judged on them.
    """

    measured: dict[str, Measured | float | bool] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    notes: str = ""
    states: dict[str, Measured | Any] = field(default_factory=dict)


class Experiment(ABC):
    """Base class. Subclasses set the class attributes and implement the four methods."""

    name: ClassVar[str]
    """Registry name: "<topic>.<short>", e.g. "effective_theory.two_point"; the topic is the module name."""
    title: ClassVar[str]
    paper: ClassVar[str]
    """The paper's number in shared/seeds, e.g. "000" (``seed`` always means a random seed)."""
    source: ClassVar[str]
    """Figures/sections reproduced, e.g. "Fig. 2, Table 1"."""
    claims: ClassVar[tuple[ClaimSpec, ...]]
    Config: ClassVar[type]
    scales: ClassVar[Mapping[str, Any]]
    """Scale (each of SCALES) -> config instance; ``Config()`` (the defaults) is the paper's settings."""

    def config(self, scale: str) -> Any:
        """The config instance for ``scale`` (one of SCALES)."""
        if scale not in self.scales:
            raise ConfigError(f"{self.name} declares no {scale!r} config: it has {', '.join(self.scales)}")
        return self.scales[scale]

    def prepare(self, config: Any) -> str | None:
        """Check what the config's declared bounds cannot (e.g. that a data folder exists) before anything runs.

        Raise :class:`repdyn.framework.config.ConfigError` for bad input. Return a reason to skip the experiment
        (optional data the user did not give); its claims are then reported as skipped, not failed. Default: run.
        """
        return None

    @abstractmethod
    def runs(self, config: Any) -> list[RunSpec]:
        """Independent units of work for ``config``."""

    @abstractmethod
    def execute(self, config: Any, run: RunSpec, seed: int, device: str) -> RunResult:
        """Do one run. Raise :class:`repdyn.nn.Diverged` when the loss becomes NaN/inf."""

    @abstractmethod
    def analyse(self, config: Any, results: Mapping[str, RunResult]) -> Analysis:
        """Turn the stored results (keyed by run label) into measured claims, figures and metrics."""

