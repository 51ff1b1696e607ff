"""Which laboratory modules may import which: imports point down, and there is no circle.

Every import is read from the source (``ast``), those inside function bodies included,
because a lazy import is where a circle hides.

* The shared modules (``engine``, ``results``, ``models``, ``plotting``, ``tables``, ``resources``,
  ``_validate``) never import a chapter module.
* The modules of ``posenc.book`` import one another without a circle.
* The library never imports the laboratory, and ``posenc/_checks.py`` (the ground floor)
  imports nothing from ``posenc``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "posenc"
BOOK = ROOT / "book"
SHARED = {"engine", "results", "models", "plotting", "figures", "resources", "tables", "_validate"}


def _imports(path: Path, package: tuple[str, ...]) -> set[str]:
    """Dotted names of the ``posenc`` modules ``path`` imports (anywhere in the file)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "posenc"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join(base + ((node.module,) if node.module else ()))
            else:
                name = node.module or ""
            if name.split(".")[0] != "posenc":
                continue
            out.add(name)
            out |= {f"{name}.{a.name}" for a in node.names}  # `from . import x` imports module x
    return out


def _book_graph() -> dict[str, set[str]]:
    modules = {p.stem for p in BOOK.glob("*.py") if p.stem != "__init__"}
    graph = {}
    for m in modules:
        names = _imports(BOOK / f"{m}.py", ("posenc", "book"))
        graph[m] = {n.split(".")[2] for n in names if n.startswith("posenc.book.") and n.split(".")[2] in modules}
        graph[m].discard(m)
    return graph


def test_shared_modules_import_no_chapter_module():
    graph = _book_graph()
    chapters = set(graph) - SHARED
    for m in SHARED & set(graph):
        assert not graph[m] & chapters, f"posenc/book/{m}.py imports chapter module(s) {sorted(graph[m] & chapters)}"


def test_the_laboratory_has_no_import_circle():
    graph = _book_graph()
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                raise AssertionError("import circle: " + " -> ".join(path[path.index(n):] + [n]))
            if n not in state:
                visit(n, path + [n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_the_library_never_imports_the_laboratory():
    for path in ROOT.rglob("*.py"):
        if BOOK in path.parents:
            continue
        package = ("posenc",) + path.relative_to(ROOT).parent.parts
        bad = {n for n in _imports(path, package) if n.startswith("posenc.book")}
        assert not bad, f"{path.relative_to(ROOT.parent)} imports {sorted(bad)}"


def test_the_ground_floor_imports_nothing_from_posenc():
    names = _imports(ROOT / "_checks.py", ("posenc",))
    assert not names, f"posenc/_checks.py imports {sorted(names)}"
