"""Whether a built book is older than what it is built from (the site tests' staleness check).

A build reads more than the pages: the notebooks import ``posenc`` and read its saved
results (``posenc/book/data``), the Sphinx extensions in ``book/_ext`` draw figures and
rewrite pages, the build copies ``book/_static`` (the explorers' scripts and the site's
style sheets) and the MathJax and font files of ``node_modules`` (pinned by
``package-lock.json``), and the PDF's links come from ``CITATION.cff``. A change to any of
them changes the site, so each is a source here.

The browser tests of the site skip (fail under CI) on a stale build.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Everything the built site is made from, as globs relative to the repository root.
SOURCE_GLOBS: tuple[str, ...] = (
    "_config.yml",
    "_toc.yml",
    "references.bib",
    "CITATION.cff",  # the PDF's links out of a chapter (book/_ext/pdf_book.py)
    "package-lock.json",  # the MathJax, fonts and axe-core copied from node_modules
    "book/**/*.md",
    "book/_static/**/*",  # copied as is: the explorers' scripts, the site's CSS
    "book/_ext/**/*.py",  # the Sphinx extensions: figures drawn, pages rewritten, the PDF
    "notebooks/*.ipynb",
    "posenc/**/*.py",
    "posenc/book/data/**/*",  # the saved results the chapters read
)

# Never sources, wherever a glob above reaches: caches and what a build writes itself.
IGNORED_PARTS = frozenset({"__pycache__", ".ipynb_checkpoints", "_generated", ".pytest_cache"})


def source_files(root: Path = ROOT, globs: tuple[str, ...] = SOURCE_GLOBS) -> list[Path]:
    """Every file under ``root`` that the build reads (``globs``), caches left out, sorted."""
    found = {
        p for pattern in globs for p in root.glob(pattern)
        if p.is_file() and not IGNORED_PARTS.intersection(p.relative_to(root).parts)
    }
    return sorted(found)


def why_not_fresh(html: Path, root: Path = ROOT, globs: tuple[str, ...] = SOURCE_GLOBS) -> str | None:
    """None where ``html`` holds a build newer than every source, else why it is not."""
    index = html / "index.html"
    if not index.is_file():
        shown = index.relative_to(root) if index.is_relative_to(root) else index
        return f"missing ({shown} does not exist)"
    built = index.stat().st_mtime
    newer = [p for p in source_files(root, globs) if p.stat().st_mtime > built]
    if newer:
        return f"older than {len(newer)} source file(s), e.g. {newer[0].relative_to(root)}"
    return None
