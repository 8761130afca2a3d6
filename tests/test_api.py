"""The public API: every package declares ``__all__`` and each listed name resolves; ``repdyn`` exports the entry
points lazily (``import repdyn`` imports no torch); the README uses only public names; the packages depend on each
other in the directions DESIGN.md draws, and no module imports another's private name."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import repdyn

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "repdyn"
PACKAGES = sorted(".".join(("repdyn", *p.parent.relative_to(SRC).parts)).rstrip(".")
                  for p in SRC.rglob("__init__.py"))


@pytest.mark.parametrize("name", PACKAGES)
def test_every_package_declares_all_and_each_name_resolves(name):
    package = importlib.import_module(name)
    assert isinstance(package.__all__, list) and package.__all__, f"{name} has no __all__"
    assert len(set(package.__all__)) == len(package.__all__)
    for public in package.__all__:
        assert not public.startswith("_") and getattr(package, public) is not None, (name, public)
    assert set(package.__all__) <= set(dir(package))


def test_the_top_level_exports_the_entry_points_and_imports_no_torch():
    from repdyn.monitor.monitor import Monitor
    from repdyn.runtime import reproduce

    assert {"Monitor", "watch", "analyze", "plan", "execute", "analyse", "reproduce", "theory"} <= set(repdyn.__all__)
    assert repdyn.Monitor is Monitor and repdyn.plan is reproduce.plan and repdyn.analyse is reproduce.analyse
    assert repdyn.theory.leaky_resnet.__name__ == "repdyn.theory.leaky_resnet"
    with pytest.raises(AttributeError, match="has no attribute 'Monitr'"):
        repdyn.Monitr  # noqa: B018
    loaded = subprocess.run([sys.executable, "-c", "import sys, repdyn; print(sorted(m for m in ('torch', "
                             "'matplotlib', 'pandas') if m in sys.modules))"], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "[]"


def _readme_references() -> list[tuple[str, str]]:
    """(module, name) for every ``from repdyn... import a, b`` and every ``repdyn.x.y`` written in the README."""
    text = (ROOT / "README.md").read_text()
    found = [(module, name.strip()) for module, names in re.findall(r"from (repdyn[\w.]*) import ([\w, ]+)", text)
             for name in names.split(",")]
    for dotted in re.findall(r"\brepdyn(?:\.\w+)+", text):
        module, _, name = dotted.rpartition(".")
        found.append((module, name))
    return found


def test_the_readme_uses_only_public_names():
    references = _readme_references()
    assert len(references) > 10
    for module, name in references:
        owner = importlib.import_module(module)
        assert not name.startswith("_") and hasattr(owner, name), f"{module}.{name}"
        path = module.split(".")
        for depth in range(1, len(path) + 1):  # every package on the way lists the next step in its __all__
            parent = importlib.import_module(".".join(path[:depth]))
            step = path[depth] if depth < len(path) else name
            if hasattr(parent, "__path__"):
                assert step in parent.__all__, f"{'.'.join(path[:depth])} does not export {step!r}"


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


def _package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "repdyn" and len(parts) > 1 else None


# what each package may import from the rest of repdyn (DESIGN.md, "Layers")
ALLOWED = {
    "theory": set(), "framework": set(), "data": {"theory"}, "nn": {"theory"}, "probes": {"nn", "theory"},
    "experiments": {"framework", "theory", "data", "nn", "probes"},
}


def test_the_packages_depend_on_each_other_as_designed_and_no_private_name_is_imported():
    for path in SRC.rglob("*.py"):
        here = path.relative_to(SRC).parts[0].removesuffix(".py")
        for module, names in _imports(path):
            target = _package_of(module)
            if target is None:
                continue
            if here in ALLOWED and target != here and target != "_lazy":
                assert target in ALLOWED[here], f"{path.relative_to(ROOT)} imports {module}"
            private = [n for n in names if n.startswith("_") and n != "__version__"]
            assert not private, f"{path.relative_to(ROOT)} imports {private} from {module}"
    report_imports = {module for path in (SRC / "report").rglob("*.py") for module, _ in _imports(path)}
    assert not {m for m in report_imports if m.startswith(("repdyn.runtime.reproduce", "repdyn.runtime.executors"))}


ENTRY_POINTS = sorted(name for name in repdyn.__all__ if not hasattr(getattr(repdyn, name), "__path__"))


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_each_entry_point_of_the_top_level_has_an_example_that_runs(name, tmp_path, monkeypatch):
    import doctest

    monkeypatch.chdir(tmp_path)
    entry = getattr(repdyn, name)
    tests = doctest.DocTestFinder(recurse=False).find(entry, name, globs={})
    examples = sum(len(test.examples) for test in tests)
    assert examples >= 2, f"repdyn.{name}'s docstring has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
