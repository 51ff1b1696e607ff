"""The site tests' staleness check (``freshness.py``): every kind of source counts, caches do not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from freshness import ROOT, SOURCE_GLOBS, source_files, why_not_fresh

BUILT_AT = 1_000_000_000.0  # the fake build's time; a source "changed" later is newer


def _book(tmp_path: Path) -> Path:
    """A tiny repository with a build in ``_build/html`` newer than its one page."""
    (tmp_path / "book").mkdir()
    page = tmp_path / "book" / "intro.md"
    page.write_text("# Intro\n")
    os.utime(page, (BUILT_AT - 10, BUILT_AT - 10))
    html = tmp_path / "_build" / "html"
    html.mkdir(parents=True)
    (html / "index.html").write_text("<html></html>")
    os.utime(html / "index.html", (BUILT_AT, BUILT_AT))
    return html


def _touch(path: Path, when: float = BUILT_AT + 10) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("changed\n")
    os.utime(path, (when, when))


def test_fresh_build_is_fresh(tmp_path):
    assert why_not_fresh(_book(tmp_path), tmp_path) is None


def test_missing_build(tmp_path):
    assert why_not_fresh(tmp_path / "_build" / "html", tmp_path).startswith("missing (_build/html/index.html")


SOURCES = [
    "book/intro.md",
    "book/_static/explorers.js",
    "book/_static/posenc-site.css",
    "book/_ext/explorers.py",
    "posenc/book/data/tabular_sigma.json",
    "posenc/book/data/tinyshakespeare.txt",
    "posenc/rope/core.py",
    "notebooks/05_tabular.ipynb",
    "CITATION.cff",
    "package-lock.json",
    "references.bib",
    "_config.yml",
    "_toc.yml",
]
NOT_SOURCES = [
    "book/_generated/front.png",  # drawn by the build itself
    "book/_ext/__pycache__/explorers.cpython-312.pyc",
    "notebooks/.ipynb_checkpoints/05_tabular-checkpoint.ipynb",
    "experiments/tabular_resampling.py",
    "tests/site/test_site.py",
]


@pytest.mark.parametrize(("path", "is_source"), [(p, True) for p in SOURCES] + [(p, False) for p in NOT_SOURCES])
def test_a_changed_source_makes_the_build_stale_and_nothing_else_does(tmp_path, path, is_source):
    html = _book(tmp_path)
    _touch(tmp_path / path)
    expected = f"older than 1 source file(s), e.g. {path}" if is_source else None
    assert why_not_fresh(html, tmp_path) == expected


def test_an_older_source_does_not(tmp_path):
    html = _book(tmp_path)
    _touch(tmp_path / "book" / "_static" / "explorers.js", when=BUILT_AT - 1)
    assert why_not_fresh(html, tmp_path) is None


def test_every_static_file_and_extension_of_this_repository_is_a_source():
    """The globs reach every file the build copies from book/_static and every extension."""
    sources = set(source_files(ROOT, SOURCE_GLOBS))
    static = [p for p in (ROOT / "book" / "_static").rglob("*") if p.is_file()]
    ext = [p for p in (ROOT / "book" / "_ext").glob("*.py")]
    assert static and ext
    assert not [p for p in static + ext if p not in sources]
