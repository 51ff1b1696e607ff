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


# --- chapters 2-3: the sinusoidal table as an image ------------------------------------


def plot_encoding_heatmap(ax, table, *, transpose: bool = False, colorbar: bool = True, label_every: int | None = None):
    """Draw a positional-encoding table as a heat map (values in [-1, 1], diverging colours).

    Position 0 is the first row (top) and dimension 0 the first column (left); with
    ``transpose=True`` dimensions run down the rows and positions along the columns (the
    layout of Geron's figure 16-9). White means 0, red +1, blue -1.

    Args:
        ax: a matplotlib ``Axes``.
        table: array of shape ``(positions, dimensions)``.
        transpose: draw dimensions as rows instead of positions.
        colorbar: add a colour bar labelled "value".
        label_every: tick spacing on both axes (default: matplotlib's choice).

    Returns:
        The ``AxesImage``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> from posenc import sinusoidal_encoding
        >>> fig, ax = plt.subplots()
        >>> im = plot_encoding_heatmap(ax, sinusoidal_encoding(8, 6))
        >>> im.get_array().shape
        (8, 6)
        >>> plt.close(fig)
    """
    import numpy as np
    from matplotlib.ticker import MultipleLocator

    data = np.asarray(table)
    if data.ndim != 2:
        raise ValueError(f"table must have shape (positions, dimensions), got {data.shape}")
    image = data.T if transpose else data
    im = ax.imshow(image, aspect="auto", cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest", origin="upper")
    pos_label, dim_label = "position $p$", "encoding dimension $j$"
    ax.set_xlabel(pos_label if transpose else dim_label)
    ax.set_ylabel(dim_label if transpose else pos_label)
    if label_every:
        ax.xaxis.set_major_locator(MultipleLocator(label_every))
        ax.yaxis.set_major_locator(MultipleLocator(label_every))
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label="value")
    return im
