"""Plotting helpers shared by the chapters.

Every figure of the book is drawn on an opaque white background with dark text, so it
stays readable in both the light and the dark theme of the online book.
"""

from __future__ import annotations

from contextlib import contextmanager
from collections.abc import Iterator

import matplotlib as mpl

BOOK_RC: dict[str, object] = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "text.color": "black",
    "axes.labelcolor": "black",
    "xtick.color": "black",
    "ytick.color": "black",
    "figure.dpi": 100,
    "font.size": 10,
    "axes.grid": False,
    "image.cmap": "RdBu_r",
}


def use_book_style() -> None:
    """Apply the book's matplotlib style globally (call once at the top of a chapter).

    Example:
        >>> use_book_style()
        >>> import matplotlib as mpl; mpl.rcParams["figure.facecolor"]
        'white'
    """
    mpl.rcParams.update(BOOK_RC)


@contextmanager
def book_style() -> Iterator[None]:
    """Context manager form of :func:`use_book_style` that restores the previous style."""
    with mpl.rc_context(BOOK_RC):
        yield
