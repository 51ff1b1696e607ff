"""The book's figure output: 2x PNGs shown at the size they were drawn (issue 15, item 3)."""

from __future__ import annotations

import io
import struct
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib as mpl  # noqa: E402 - after choosing the backend
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from posenc.book import plotting
from posenc.book import results as res


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


@pytest.fixture
def column_figure():
    with mpl.rc_context(plotting.BOOK_RC):
        fig, axes = plt.subplots(1, 2, figsize=(plotting.COLUMN_WIDTH_IN, 2.5))
        axes[0].imshow(np.linspace(0, 1, 64 * 32).reshape(64, 32), aspect="auto")
        axes[1].plot(np.sin(np.arange(50) / 4), label="sin")
        axes[1].legend()
        axes[1].set_title("a title")
        yield fig
    plt.close(fig)


def test_png_has_twice_the_pixels_of_its_display_size(column_figure):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a figure made for the column raises no warning
        png, meta = plotting.figure_png(column_figure)
    width, height = _png_size(png)
    assert abs(width - plotting.PIXEL_DENSITY * meta["width"]) <= 1
    assert abs(height - plotting.PIXEL_DENSITY * meta["height"]) <= 1
    # drawn at the column width (672 CSS px), minus the margins cut by the tight box
    assert 0.8 * plotting.COLUMN_WIDTH_IN * 96 <= meta["width"] <= plotting.COLUMN_WIDTH_IN * 96


def test_png_is_a_palette_image_that_keeps_the_colours(column_figure):
    png, _ = plotting.figure_png(column_figure)
    image = Image.open(io.BytesIO(png))
    assert image.mode == "P"
    buf = io.BytesIO()
    column_figure.savefig(buf, format="png", dpi=plotting.PIXEL_DENSITY * column_figure.dpi, bbox_inches="tight",
                          pad_inches=0.05)
    full = np.asarray(Image.open(buf).convert("RGB"), dtype=float)
    reduced = np.asarray(image.convert("RGB"), dtype=float)
    assert full.shape == reduced.shape
    assert np.abs(full - reduced).mean() < 2.0  # of 255: invisible


def test_figure_problems_names_width_and_small_text():
    with mpl.rc_context(plotting.BOOK_RC):
        fig, ax = plt.subplots(figsize=(plotting.COLUMN_WIDTH_IN + 2, 2))
        ax.set_xlabel("small", fontsize=7)
        ax.tick_params(labelsize=8)
        fig.canvas.draw()
    problems = plotting.figure_problems(fig)
    assert any("in wide" in p for p in problems)
    assert any("'small' at 7.0 pt" in p for p in problems)
    assert any("at 8.0 pt" in p for p in problems)  # the tick labels
    with pytest.warns(UserWarning, match="not made for the book's column"):
        plotting.figure_png(fig)
    plt.close(fig)


def test_book_style_fonts_are_at_least_the_minimum():
    with mpl.rc_context(plotting.BOOK_RC):
        for key in ("font.size", "axes.titlesize", "axes.labelsize", "xtick.labelsize", "ytick.labelsize",
                    "legend.fontsize", "legend.title_fontsize", "figure.titlesize"):
            size = mpl.font_manager.FontProperties(size=mpl.rcParams[key]).get_size_in_points()
            assert size >= plotting.MIN_FONT_PT, key
        assert tuple(mpl.rcParams["figure.figsize"])[0] == plotting.COLUMN_WIDTH_IN


@pytest.mark.parametrize("colors", [1, 257, 2.5, True, "256"])
def test_figure_png_rejects_bad_colors(column_figure, colors):
    with pytest.raises(ValueError, match="colors"):
        plotting.figure_png(column_figure, colors=colors)


def test_use_book_style_shows_figures_through_figure_png():
    from IPython.core.formatters import format_display_data
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    saved = dict(mpl.rcParams)
    try:
        plotting.use_book_style()
        fig, ax = plt.subplots(figsize=(plotting.COLUMN_WIDTH_IN, 2))
        ax.plot([0, 1], [0, 1])
        data, meta = format_display_data(fig)
        plt.close(fig)
    finally:
        mpl.rcParams.update(saved)
        InteractiveShell.clear_instance()
    assert shell is not None
    width, _ = _png_size(data["image/png"])
    assert abs(width - plotting.PIXEL_DENSITY * meta["image/png"]["width"]) <= 1
    assert "image/svg+xml" not in data
