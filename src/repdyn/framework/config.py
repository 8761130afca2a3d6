"""Typed experiment configs with declared bounds, ``--set key=value`` overrides and clear errors.

A config is a frozen dataclass whose fields are declared with :func:`param`. Supported field types: int, float,
bool, str and tuples of those (written ``a,b,c`` on the command line).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

C = TypeVar("C")


class ConfigError(ValueError):
    """Bad user input: the message names the value and what is allowed (the CLI prints it, exit code 2)."""


def param(default: Any, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
          lt: float | None = None, choices: Sequence[Any] | None = None, analysis: bool = False,
          help: str = "") -> Any:
    """Declare a config field with bounds (applied to every element of a tuple) and allowed choices.

    ``analysis=True`` marks a field that only ``analyse`` reads (a threshold, a fitting window, which runs a claim
    pools): it is left out of the run key, so configs differing only there, such as a negative control that changes
    how the runs are measured, share their runs. ``execute`` may not read it (see :func:`run_view`).
    """
    meta = {"ge": ge, "gt": gt, "le": le, "lt": lt, "choices": tuple(choices) if choices else None, "help": help,
            "analysis": analysis}
    return dataclasses.field(default=default, metadata=meta)


def analysis_fields(config: Any) -> frozenset[str]:
    """Names of the fields of ``config`` (an instance or a config class) declared with ``analysis=True``."""
    return frozenset(f.name for f in dataclasses.fields(config) if f.metadata.get("analysis"))


def run_dict(config: Any) -> dict[str, Any]:
    """What a run's result depends on: :func:`to_dict` without the analysis-only fields (the run key hashes it)."""
    hidden = analysis_fields(config)
    return {name: value for name, value in to_dict(config).items() if name not in hidden}


def run_view(config: C, *, shared: bool = False) -> C:
    """``config`` as a run sees it: reading an analysis-only field raises, since runs are shared across its
    values (they are not in the run key) and a run that read one would be stored under the wrong key. With
    ``shared`` (a run several experiments read, :attr:`RunSpec.shared`, keyed by its params alone) reading any
    field raises."""
    hidden = frozenset(f.name for f in dataclasses.fields(config)) if shared else analysis_fields(config)
    if not hidden:
        return config
    base = type(config)
    why = ("is a field of the declaring experiment's config: a shared run (RunSpec.shared) must read its params only, "
           "which alone key it" if shared else
           "is an analysis-only field (param(analysis=True)): a run must not read it, only analyse() may")

    class RunView(base):  # type: ignore[valid-type, misc]
        def __getattribute__(self, name: str) -> Any:
            if name in hidden:
                raise RuntimeError(f"{base.__name__}.{name} {why}")
            return super().__getattribute__(name)

    RunView.__name__ = RunView.__qualname__ = base.__name__
    return RunView(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)})


def _field_types(config_cls: type) -> dict[str, Any]:
    return typing.get_type_hints(config_cls)


def _scalar_type(tp: Any) -> tuple[type, bool]:
    """(element type, is_tuple) for a field annotation such as ``float`` or ``tuple[float, ...]``."""
    origin = typing.get_origin(tp)
    if origin is tuple:
        return typing.get_args(tp)[0], True
    return tp, False


def _parse_scalar(key: str, text: str, tp: type) -> Any:
    if tp is bool:
        lowered = text.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{key}={text!r} is not a boolean: use true or false")
    try:
        return tp(text.strip())
    except ValueError:
        raise ConfigError(f"{key}={text!r} is not a valid {tp.__name__}") from None


def _check_value(key: str, value: Any, meta: Mapping[str, Any]) -> None:
    if meta.get("choices") and value not in meta["choices"]:
        allowed = ", ".join(map(str, meta["choices"]))
        raise ConfigError(f"{key}={value!r} is not allowed: choose one of {allowed}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key}={value!r} must be a finite number")
    bounds = (("ge", lambda v, b: v >= b, ">="), ("gt", lambda v, b: v > b, ">"),
              ("le", lambda v, b: v <= b, "<="), ("lt", lambda v, b: v < b, "<"))
    for name, ok, symbol in bounds:
        bound = meta.get(name)
        if bound is not None and not ok(value, bound):
            raise ConfigError(f"{key}={value!r} is out of range: must be {symbol} {bound:g}")


def validate(config: Any) -> None:
    """Check every field of ``config`` against its declared bounds; raise ConfigError on the first bad one."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        for item in value if isinstance(value, tuple) else (value,):
            _check_value(f.name, item, f.metadata)
        if isinstance(value, tuple) and len(value) == 0:
            raise ConfigError(f"{f.name} is empty: give at least one value")


def apply_overrides(config: C, overrides: Mapping[str, str]) -> C:
    """Return ``config`` with ``key=value`` strings applied and validated."""
    types = _field_types(type(config))
    changes: dict[str, Any] = {}
    for key, text in overrides.items():
        if key not in types:
            allowed = ", ".join(f.name for f in dataclasses.fields(config))
            raise ConfigError(f"unknown setting {key!r}: allowed keys are {allowed}")
        tp, is_tuple = _scalar_type(types[key])
        if is_tuple:
            changes[key] = tuple(_parse_scalar(key, part, tp) for part in text.split(",") if part.strip())
        else:
            changes[key] = _parse_scalar(key, text, tp)
    updated = dataclasses.replace(config, **changes)
    validate(updated)
    return updated


def parse_assignments(items: Sequence[str]) -> dict[str, str]:
    """Parse ``["a=1", "b=x,y"]`` from the command line into a dict."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r} is not of the form key=value")
        out[key.strip()] = value
    return out


def to_dict(config: Any) -> dict[str, Any]:
    """JSON-able dict of a config (tuples become lists)."""
    return {f.name: (list(v) if isinstance(v := getattr(config, f.name), tuple) else v)
            for f in dataclasses.fields(config)}


def from_dict(config_cls: type[C], data: Mapping[str, Any]) -> C:
    """Inverse of :func:`to_dict`; unknown keys are an error (a stored config from another version)."""
    types = _field_types(config_cls)
    unknown = set(data) - set(types)
    if unknown:
        raise ConfigError(f"stored config has unknown keys {sorted(unknown)} for {config_cls.__name__}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    config = config_cls(**values)
    validate(config)
    return config


def describe_fields(config_cls: type) -> list[tuple[str, str, str]]:
    """(name, type, help) per field, for ``repdyn list`` and error messages."""
    types = _field_types(config_cls)
    return [(f.name, getattr(types[f.name], "__name__", str(types[f.name])), f.metadata.get("help", ""))
            for f in dataclasses.fields(config_cls)]


def check_data_folder(setting: str, folder: str, check: typing.Callable[[str], object]) -> None:
    """For ``Experiment.prepare``: run a data-folder check (e.g. :func:`repdyn.data.mnist.check_mnist_folder`) on a
    setting's value, turning what it finds into a ConfigError naming the setting (exit 2 before anything runs).
    An empty value (no folder given) is not checked."""
    if not folder:
        return
    try:
        check(folder)
    except (OSError, ValueError) as error:
        raise ConfigError(f"{setting}={folder!r}: {error}") from None
