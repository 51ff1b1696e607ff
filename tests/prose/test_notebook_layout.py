"""How the chapters read online (issue 15), checked on the committed notebooks.

Static checks of ``notebooks/*.ipynb`` as stored: no kernel, no build, each notebook
parsed once. The browser test of the built site (``tests/site/test_site.py``) measures
the same things on the rendered pages; these checks say which cell to fix.

* The first cell of every chapter installs posenc where it is missing (on Colab or
  Binder, which the launch buttons open): a code cell tagged ``remove-cell`` (not shown
  in the book), the same in every notebook, that tests
  ``importlib.util.find_spec("posenc") is None`` and installs from the repository named
  by ``repository.url`` in ``_config.yml``.
* Every line of code the book shows is at most 76 characters: the column holds 77
  monospace characters at 1280 px, so a code block scrolls sideways only when its lines
  are longer. (Inside a ``hide-input`` toggle the box is 18 px narrower and holds 75.)
  Cells tagged ``remove-input`` or ``remove-cell`` are not shown and not checked.
* The code that draws a figure is collapsed: every cell that glues a figure or shows one
  is tagged ``hide-input`` (or ``remove-input``/``remove-cell``).
* Every figure is stored as ``posenc.book.plotting.use_book_style`` shows it: a PNG at twice the
  pixels of the size it was drawn at, that size in the output's metadata (``width``,
  ``height``, in CSS pixels; MyST-NB writes them on the ``<img>``), and at most the
  column's 688 px wide.
* No output holds the warning ``use_book_style`` gives for a figure not made for the
  column (wider than 7 in, or text under 9 pt), nor any other ``UserWarning``.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

MAX_LINE = 76  # characters of a code line (77 fit in the column at 1280 px)
COLUMN_PX = 688  # the column's width in CSS pixels at 1280 px
DENSITY = 2  # image pixels per CSS pixel
DENSITY_SLACK_PX = 2  # the metadata size is the pixel size halved and rounded

FIGURE_MIMES = ("image/png", "image/svg+xml", "image/jpeg")
PNG_KEYS = ("image/png", "application/papermill.record/image/png")
TEXT_KEYS = ("text/plain", "application/papermill.record/text/plain")
HIDDEN_CODE_TAGS = {"hide-input", "remove-input", "remove-cell"}
SOURCE_NOT_SHOWN = {"remove-input", "remove-cell"}
GLUES_FIGURE = re.compile(r"""\bglue\(\s*f?["']fig""")
FORBIDDEN_OUTPUT = ("figure not made for the book's column", "UserWarning")
INSTALL_TEST = 'importlib.util.find_spec("posenc") is None'


@functools.cache
def _notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@functools.cache
def _repository_url() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return str(config["repository"]["url"]).rstrip("/")


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _code_cells(nb: dict):
    """(number, cell) of every code cell; cells are numbered from 1, as Jupyter shows them."""
    return [(i, c) for i, c in enumerate(nb["cells"], 1) if c["cell_type"] == "code"]


def _tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _png_size(data: bytes) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR chunk (bytes 16-24)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


# ----------------------------------------------------------------------------- checks
def first_cell_problems(nb: dict) -> list[str]:
    cell = nb["cells"][0] if nb["cells"] else None
    if cell is None or cell["cell_type"] != "code":
        return ["the first cell is not a code cell (the cell that installs posenc on Colab or Binder)"]
    problems = []
    source = _text(cell["source"])
    if "remove-cell" not in _tags(cell):
        problems.append(f"the first cell is not tagged remove-cell (tags: {sorted(_tags(cell))})")
    if INSTALL_TEST not in source:
        problems.append(f"the first cell does not test `{INSTALL_TEST}`")
    if _repository_url() not in source:
        problems.append(f"the first cell does not install from repository.url ({_repository_url()})")
    return problems


def long_line_problems(nb: dict) -> list[str]:
    """Lines too long for the column, in every code cell whose code the book shows
    (cells tagged remove-input or remove-cell, such as the install cell, are not)."""
    return [
        f"cell {i}, line {n}: {len(line)} characters: {line.strip()[:60]!r}"
        for i, cell in _code_cells(nb)
        if not (_tags(cell) & SOURCE_NOT_SHOWN)
        for n, line in enumerate(_text(cell["source"]).splitlines(), 1)
        if len(line) > MAX_LINE
    ]


def _shows_figure(cell: dict) -> bool:
    if GLUES_FIGURE.search(_text(cell["source"])):
        return True
    return any(
        key == mime or key.endswith("/" + mime)
        for out in cell.get("outputs", [])
        for key in out.get("data", {})
        for mime in FIGURE_MIMES
    )


def figure_code_problems(nb: dict) -> list[str]:
    return [
        f"cell {i} draws a figure and shows its code (tags: {sorted(_tags(cell))}): "
        f"{_text(cell['source']).strip().splitlines()[0][:60]!r}"
        for i, cell in _code_cells(nb)
        if _shows_figure(cell) and not (_tags(cell) & HIDDEN_CODE_TAGS)
    ]


def png_problems(nb: dict) -> list[str]:
    problems = []
    for i, cell in _code_cells(nb):
        for out in cell.get("outputs", []):
            for key in PNG_KEYS:
                if key not in out.get("data", {}):
                    continue
                name = out.get("metadata", {}).get("scrapbook", {}).get("name", "")
                where = f"cell {i}" + (f" (glue {name!r})" if name else "")
                meta = out.get("metadata", {})
                meta = meta.get(key) or meta.get("image/png") or {}
                try:
                    w, h = _png_size(base64.b64decode(_text(out["data"][key])))
                except (AssertionError, ValueError) as exc:
                    problems.append(f"{where}: {key} is not a PNG ({exc})")
                    continue
                if "width" not in meta or "height" not in meta:
                    problems.append(
                        f"{where}: a {w}x{h} PNG without width/height metadata (not shown through "
                        f"posenc.book.plotting.use_book_style: the page shows it at {w} px, at 1x)"
                    )
                    continue
                mw, mh = meta["width"], meta["height"]
                if abs(w - DENSITY * mw) > DENSITY_SLACK_PX or abs(h - DENSITY * mh) > DENSITY_SLACK_PX:
                    problems.append(f"{where}: {w}x{h} pixels shown at {mw}x{mh} (want {DENSITY}x)")
                if mw > COLUMN_PX:
                    problems.append(f"{where}: shown {mw} px wide, the column is {COLUMN_PX} px")
    return problems


def warning_problems(nb: dict) -> list[str]:
    problems = []
    for i, cell in _code_cells(nb):
        for out in cell.get("outputs", []):
            texts = []
            if out.get("output_type") == "stream":
                texts.append(_text(out.get("text", "")))
            texts += [_text(out.get("data", {})[k]) for k in TEXT_KEYS if k in out.get("data", {})]
            for text in texts:
                for line in text.splitlines():
                    if any(bad in line for bad in FORBIDDEN_OUTPUT):
                        problems.append(f"cell {i}: {line.strip()[-160:]!r}")
    return problems


# ----------------------------------------------------------------------------- tests
def _ids(paths):
    return [p.stem for p in paths]


def _fail(path: Path, what: str, problems: list[str]) -> str:
    return f"{path.relative_to(ROOT)}: {what}:\n" + "\n".join(f"  {p}" for p in problems)


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 6, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_first_cell_installs_posenc(path: Path):
    problems = first_cell_problems(_notebook(path))
    assert not problems, _fail(path, "the first cell", problems)


def test_install_cell_same_in_every_notebook():
    sources = {}
    for path in NOTEBOOKS:
        cells = _notebook(path)["cells"]
        if cells and cells[0]["cell_type"] == "code":
            sources.setdefault(_text(cells[0]["source"]), []).append(path.name)
    assert len(sources) == 1, "the first cells differ; notebooks grouped by their first cell:\n" + "\n".join(
        f"  {names}: {src[:80]!r}..." for src, names in sources.items()
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_code_lines_fit_the_column(path: Path):
    problems = long_line_problems(_notebook(path))
    assert not problems, _fail(path, f"{len(problems)} code lines longer than {MAX_LINE} characters", problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_figure_code_collapsed(path: Path):
    problems = figure_code_problems(_notebook(path))
    assert not problems, _fail(path, "cells drawing a figure must be tagged hide-input", problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_figures_stored_at_twice_their_drawn_size(path: Path):
    problems = png_problems(_notebook(path))
    assert not problems, _fail(path, "figures not stored as use_book_style shows them", problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_figure_warning_in_outputs(path: Path):
    problems = warning_problems(_notebook(path))
    assert not problems, _fail(path, "warnings in the stored outputs", problems)
