"""The files that travel with the package: the book's corpus and its saved results.

Everything a chapter reads from disk ships inside ``posenc.book`` (the folder
``posenc/book/data/``), so a notebook runs wherever ``posenc[book]`` is installed: in a
clone, on Colab or Binder, or in an empty folder. The folder holds

- ``tinyshakespeare.txt``, chapter 7's corpus (its source, licence and SHA-256 are in the
  folder's ``README.md``, which ships too);
- the saved results of the scripts in the repository's ``experiments/`` (one JSON file per
  experiment, e.g. ``alternatives.json``), which the chapters plot and quote.

:func:`resource_path` is the one way to these files: :func:`posenc.book.results.read_results`
uses it for a bare file name (``read_results("alternatives.json")``) and
:func:`posenc.book.realtext.load_corpus` for the default corpus.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DATA_DIR", "resource_path", "resource_names"]

#: The folder of the shipped files (``posenc/book/data/`` inside the installed package).
DATA_DIR = Path(__file__).resolve().parent / "data"


def resource_names() -> list[str]:
    """The names of the shipped files, sorted (the README of the folder excluded).

    Example:
        >>> "tinyshakespeare.txt" in resource_names(), "alternatives.json" in resource_names()
        (True, True)
    """
    return sorted(p.name for p in DATA_DIR.iterdir() if p.is_file() and p.name != "README.md")


def resource_path(name: str) -> Path:
    """The path of the shipped file ``name`` (a bare file name such as ``"realtext.json"``).

    Raises ``TypeError`` if ``name`` is not a str and ``ValueError`` if it names a folder or
    a file that does not ship (the message lists the files that do).

    Example:
        >>> resource_path("tinyshakespeare.txt").name
        'tinyshakespeare.txt'
        >>> resource_path("alternatives.json").parent == DATA_DIR
        True
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str (a file name such as 'realtext.json'), got {type(name).__name__}")
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise ValueError(f"name must be a bare file name without a folder, got {name!r}")
    path = DATA_DIR / name
    if not path.is_file():
        raise ValueError(f"name must be one of the files shipped with posenc.book ({', '.join(resource_names())}), got {name!r}")
    return path
