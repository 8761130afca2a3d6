"""mkdocs hooks: the README and DESIGN.md as pages (their links rewritten to the site's paths), and one API
reference page per package of src/repdyn, each listing its public modules for mkdocstrings, so a new module is
documented without editing the site's configuration."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "repdyn"
# the README's and DESIGN.md's links to repository files, as the site's pages
LINKS = {"](docs/cluster.md)": "](cluster.md)", "](DESIGN.md)": "](design.md)"}
# API pages in the order of DESIGN.md's layers
# a docstring's Sphinx role before its rendered name (":class:`Monitor`"), which markdown leaves as text
ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):(?=<code>)")
PACKAGES = ("theory", "data", "nn", "probes", "framework", "experiments", "runtime", "report", "monitor")


def _page(config, uri: str, text: str) -> File:
    return File.generated(config, uri, content=text)


def _modules(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        if any(part.startswith("_") for part in parts if part != "__init__"):
            continue
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def _summary(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""


def api_pages() -> dict[str, str]:
    """``api/<package>.md`` -> its markdown: the package's summary, then each public module."""
    pages = {}
    for name in PACKAGES:
        package = SRC / name
        body = [f"# repdyn.{name}", "", _summary(package), ""]
        body += [f"::: {module}\n    options:\n      show_submodules: false\n" for module in _modules(package)
                 if module != f"repdyn.{name}"]
        pages[f"api/{name}.md"] = "\n".join(body)
    return pages


def on_files(files: Files, config) -> Files:
    for uri, source in (("index.md", "README.md"), ("design.md", "DESIGN.md")):
        text = (ROOT / source).read_text()
        for old, new in LINKS.items():
            text = text.replace(old, new)
        files.append(_page(config, uri, text))
    for uri, text in api_pages().items():
        files.append(_page(config, uri, text))
    return files


def on_page_content(html: str, page, config, files) -> str:
    return ROLE.sub("", html)
