"""The authors' checkout of van Rossem & Saxe (github.com/loekvanrossem/universality), as the seed-000 comparison
scripts beside this file use it: its ``source/`` modules put first on ``sys.path`` and a row of one of its
``experiments/model_settings/*.txt`` tables. Nothing of it is copied here."""

from __future__ import annotations

import sys
import types
from pathlib import Path


def use_checkout(path: Path) -> Path:
    """Put ``path/source`` first on ``sys.path`` (numba, which their simulate.py imports to jit, replaced by a no-op
    ``njit`` when it is not installed) and return it; exit with one line naming the folder if it is no checkout."""
    source = path.resolve() / "source"
    if not (source / "models.py").exists():
        raise SystemExit(f"error: {source}/models.py not found: --authors must be a checkout of "
                         "loekvanrossem/universality")
    try:
        import numba  # noqa: F401
    except ImportError:
        stub = types.ModuleType("numba")
        stub.njit = lambda f=None, **_: f if f is not None else (lambda g: g)
        sys.modules["numba"] = stub
    sys.path.insert(0, str(source))
    return source


def settings_row(path: Path, table_name: str, setting: str) -> dict:
    """Row ``setting`` of ``experiments/model_settings/<table_name>``; exit naming the rows if it has none."""
    import pandas as pd

    table = pd.read_csv(path / "experiments" / "model_settings" / table_name, sep=" ", header=0)
    if setting not in table.index:
        raise SystemExit(f"error: setting {setting!r} not in {table_name!r} (rows: {', '.join(table.index)})")
    return table.loc[setting].to_dict()
