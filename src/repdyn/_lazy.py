"""Lazy package attributes (PEP 562), in the manner of scientific-python's ``lazy_loader``: a package lists its
public names and the submodule each lives in, and a name's module is imported on first use, so ``import repdyn``
and ``import repdyn.monitor`` stay cheap and no package imports its heavier siblings before they are needed."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence


def attach(package: str, *, submodules: Sequence[str] = (), names: Mapping[str, str] | None = None,
           ) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """Return ``(__getattr__, __dir__, __all__)`` for ``package``. ``submodules`` are its modules (``package.x``),
    ``names`` maps a public name to the module, relative to ``package`` (``".analysis"``) or absolute, that
    defines it."""
    where = dict(names or {})
    public = sorted({*submodules, *where})

    def __getattr__(name: str) -> object:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        if name in where:
            return getattr(importlib.import_module(where[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return list(public)

    return __getattr__, __dir__, public
