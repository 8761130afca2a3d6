"""The experiment registry: every ``EXPERIMENTS`` tuple (and the ``PAPER`` record beside it) found in the topic
packages of :mod:`repdyn.experiments`, plus those of the modules named in the environment variable
``REPDYN_PLUGINS`` (comma-separated importable module names): the way to run your own experiments through
``repdyn run``/``reproduce``."""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from collections.abc import Iterable

import repdyn.experiments
from repdyn.framework.base import Experiment, Paper
from repdyn.framework.config import ConfigError


@functools.cache
def _collect() -> tuple[dict[str, Experiment], dict[str, Paper]]:
    experiments: dict[str, Experiment] = {}
    papers: dict[str, Paper] = {}
    builtin = sorted(f"repdyn.experiments.{m.name}" for m in pkgutil.iter_modules(repdyn.experiments.__path__))
    plugins = [name.strip() for name in os.environ.get("REPDYN_PLUGINS", "").split(",") if name.strip()]
    for module_name in builtin + plugins:
        module = importlib.import_module(module_name)
        for experiment in getattr(module, "EXPERIMENTS", ()):
            if experiment.name in experiments:
                raise RuntimeError(f"two experiments are named {experiment.name!r}")
            experiments[experiment.name] = experiment
        paper = getattr(module, "PAPER", None)
        if paper is not None:
            papers[paper.number] = paper
    return experiments, papers


def all_experiments() -> dict[str, Experiment]:
    """Name -> experiment, in a stable order (by module, then declaration)."""
    return _collect()[0]


def all_papers() -> dict[str, Paper]:
    """Paper number ("000") -> the paper its topic reproduces."""
    return _collect()[1]


def get(name: str) -> Experiment:
    experiments = all_experiments()
    if name not in experiments:
        raise ConfigError(f"unknown experiment {name!r}: choose one of {', '.join(experiments) or '(none)'}")
    return experiments[name]


def select(only: Iterable[str] | None) -> list[Experiment]:
    """Experiments named in ``only``; a topic name ("effective_theory") selects all of its experiments."""
    experiments = all_experiments()
    if not only:
        return list(experiments.values())
    chosen: list[Experiment] = []
    for item in only:
        matches = [e for n, e in experiments.items() if n == item or n.split(".")[0] == item]
        if not matches:
            topics = sorted({n.split(".")[0] for n in experiments})
            raise ConfigError(f"unknown experiment {item!r}: choose from the topics {', '.join(topics)} "
                              f"or the experiments {', '.join(experiments)}")
        chosen.extend(e for e in matches if e not in chosen)
    return chosen
