"""Plotting helpers shared by the chapters.

Every figure of the book is drawn on an opaque white background with dark text, so it
stays readable in both the light and the dark theme of the online book.
"""

from __future__ import annotations

import matplotlib as mpl

from ._validate import as_finite_array, check_axes, check_figure, check_names, check_rows
from .._checks import check_int

__all__ = [
    "BOOK_RC",
    "COLUMN_WIDTH_IN",
    "MIN_FONT_PT",
    "PIXEL_DENSITY",
    "SCHEME_STYLES",
    "figure_png",
    "figure_problems",
    "plot_encoding_heatmap",
    "plot_naive_candidates",
    "plot_noise_sweep",
    "plot_position_curves",
    "plot_scheme_bars",
    "plot_step_cost",
    "use_book_style",
]

#: The width of the book's text column in inches, in a desktop browser with a 1280-px
#: window, 672 CSS pixels at the CSS 96 pixels per inch. Figures are drawn at this width
#: so that they are shown at the size they were drawn, fonts included.
COLUMN_WIDTH_IN = 7.0

#: The smallest font size (points) a figure may use; at the column width it renders at
#: this size on screen.
MIN_FONT_PT = 9.0

#: How many PNG pixels the figures have per CSS pixel, 2 for sharp figures on
#: high-density screens.
PIXEL_DENSITY = 2

BOOK_RC: dict[str, object] = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "text.color": "black",
    "axes.labelcolor": "black",
    "xtick.color": "black",
    "ytick.color": "black",
    "figure.dpi": 96,  # one figure inch = one CSS inch
    "figure.figsize": (COLUMN_WIDTH_IN, 3.0),
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9,
    "figure.titlesize": 11,
    "axes.grid": False,
    "image.cmap": "RdBu_r",
}


def figure_problems(fig) -> list[str]:
    """What keeps ``fig`` from reading well in the book's column (empty when nothing).

    A figure must be at most :data:`COLUMN_WIDTH_IN` wide (wider ones are shrunk by the
    browser, fonts with them) and every visible text at least :data:`MIN_FONT_PT`.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots(figsize=(9, 3))
        >>> _ = ax.set_title("tiny", fontsize=6)
        >>> figure_problems(fig)  # doctest: +NORMALIZE_WHITESPACE
        ['9.0 in wide (the column is 7.0 in)', "text 'tiny' at 6.0 pt (at least 9.0)"]
        >>> plt.close(fig)
    """
    from matplotlib.text import Text

    check_figure("fig", fig)
    problems = []
    width = fig.get_size_inches()[0]
    if width > COLUMN_WIDTH_IN + 1e-6:
        problems.append(f"{width:.1f} in wide (the column is {COLUMN_WIDTH_IN} in)")
    for t in fig.findobj(Text):
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() < MIN_FONT_PT - 1e-6:
            problems.append(f"text {t.get_text()[:30]!r} at {t.get_fontsize():.1f} pt (at least {MIN_FONT_PT})")
    return problems


def figure_png(fig, *, colors: int = 256) -> tuple[bytes, dict[str, int]]:
    """``fig`` as a PNG at :data:`PIXEL_DENSITY` times its size, with its display size.

    Returns ``(png_bytes, metadata)`` as an IPython formatter does:
    ``metadata`` holds ``width`` and ``height`` in CSS pixels (half the
    pixels), so the page shows the figure at the size it was drawn. The image is reduced
    to a palette of ``colors`` colours (none of the book's figures needs more), which
    keeps a doubled resolution at about the bytes of a plain one. Problems found by
    :func:`figure_problems` are raised as a ``UserWarning``, so they show under the cell.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 2), dpi=96)
        >>> png, meta = figure_png(fig)
        >>> png[:4], meta["width"] <= 672
        (b'\x89PNG', True)
        >>> plt.close(fig)
    """
    import io
    import warnings

    from PIL import Image

    if not isinstance(colors, int) or isinstance(colors, bool) or not 2 <= colors <= 256:
        raise ValueError(f"colors must be an int in [2, 256], got {colors!r}")
    check_figure("fig", fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=PIXEL_DENSITY * fig.dpi, bbox_inches="tight", pad_inches=0.05)
    for problem in figure_problems(fig):  # after drawing: tick labels exist only then
        warnings.warn(f"figure not made for the book's column: {problem}", UserWarning, stacklevel=2)
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    image = image.quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    width, height = image.size
    size = {"width": round(width / PIXEL_DENSITY), "height": round(height / PIXEL_DENSITY)}
    return out.getvalue(), size


def use_book_style() -> None:
    """Apply the book's figure style (call once at the top of a chapter).

    Sets the matplotlib parameters of :data:`BOOK_RC` and, inside IPython (a notebook or
    the book's build), shows figures through :func:`figure_png`: twice the pixels, shown
    at the size they were drawn. Outside IPython only the parameters change.

    Example:
        >>> use_book_style()
        >>> import matplotlib as mpl; mpl.rcParams["figure.facecolor"]
        'white'
    """
    mpl.rcParams.update(BOOK_RC)
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the notebooks
        return
    shell = get_ipython()
    if shell is None:
        return
    from matplotlib.figure import Figure

    # The inline backend (Jupyter) sets IPython's figure formatters when its module is
    # imported, which matplotlib does lazily, at the first figure: import it now, so that
    # the formatter set below is not replaced by the default one afterwards.
    if mpl.get_backend(auto_select=False) in ("inline", "module://matplotlib_inline.backend_inline"):
        import matplotlib_inline.backend_inline  # noqa: F401

    formatters = shell.display_formatter.formatters
    formatters["image/png"].for_type(Figure, figure_png)
    for mime in ("image/svg+xml", "application/pdf", "image/jpeg"):
        formatters[mime].type_printers.pop(Figure, None)


# --- chapter 6: length extrapolation ---------------------------------------------------

#: One colour and marker per positional scheme, shared by chapter 6's figures.
SCHEME_STYLES: dict[str, dict[str, str]] = {
    "none": {"color": "#7f7f7f", "marker": "o"},
    "sinusoidal": {"color": "#1f77b4", "marker": "s"},
    "learned": {"color": "#ff7f0e", "marker": "D"},
    "rope": {"color": "#2ca02c", "marker": "^"},
    "alibi": {"color": "#d62728", "marker": "v"},
    "t5": {"color": "#9467bd", "marker": "P"},
    "shaw": {"color": "#8c564b", "marker": "X"},
    "randomized": {"color": "#e377c2", "marker": "*"},
}


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

    check_axes("ax", ax)
    data = as_finite_array("table", table)
    if data.ndim != 2:
        raise ValueError(f"table must have shape (positions, dimensions), got {data.shape}")
    if label_every is not None:
        label_every = check_int("label_every", label_every)
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


# --- chapters 2-3: design candidates and the noise sweep ----------------------------------


def plot_noise_sweep(sigmas, sweep: dict, *, figsize: tuple[float, float] = (COLUMN_WIDTH_IN, 3.2)):
    """Two panels for :func:`posenc.book.analysis.band_noise_sweep`: exact rate and median error.

    Absolute decoding is drawn solid and relative decoding dashed, one colour per band.

    Args:
        sigmas: the noise levels, shape ``(s,)``.
        sweep: the dict returned by ``band_noise_sweep`` (band name -> results).
        figsize: figure size in inches.

    Returns:
        The matplotlib figure.

    Example:
        >>> import numpy as np
        >>> from posenc.book.analysis import band_noise_sweep
        >>> s = np.array([0.1, 0.2])
        >>> r = band_noise_sweep(16, 32, {"fast": np.arange(4)}, s, n_samples=20)
        >>> fig = plot_noise_sweep(s, r)
        >>> len(fig.axes)
        2
    """
    import matplotlib.pyplot as plt
    import numpy as np

    s = as_finite_array("sigmas", sigmas).ravel()
    if (s <= 0).any():
        raise ValueError(f"sigmas must be > 0 (they are drawn on a log axis), got {s.tolist()}")
    if not isinstance(sweep, dict) or not sweep:
        raise TypeError("sweep must be the non-empty dict returned by band_noise_sweep")
    for band, res in sweep.items():
        need = ("abs_exact", "abs_median", "rel_exact", "rel_median")
        if not isinstance(res, dict) or any(k not in res for k in need):
            raise ValueError(f"sweep[{band!r}] must hold {need}, as band_noise_sweep returns")
    fig, (left, right) = plt.subplots(1, 2, figsize=figsize, sharex=True)
    colours = ("black", "tab:orange", "tab:blue", "tab:red")
    for colour, (band, res) in zip(colours, sweep.items()):
        for kind, style, what in (("abs", "-", "absolute"), ("rel", "--", "relative")):
            if len(res[f"{kind}_exact"]) != s.size:
                raise ValueError(f"sweep[{band!r}] has {len(res[f'{kind}_exact'])} levels, sigmas has {s.size}")
            left.plot(s, res[f"{kind}_exact"], style, marker="o", color=colour, label=f"{band}, {what}")
            right.plot(s, res[f"{kind}_median"], style, marker="o", color=colour)
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xticks(s, [f"{x:g}" for x in s])
        ax.minorticks_off()
    left.set_ylim(-0.03, 1.03)
    left.set_xlabel("noise standard deviation")
    right.set_xlabel("noise standard deviation")
    left.set_ylabel("fraction decoded exactly")
    right.set_ylabel("median error (positions)")
    right.set_yscale("symlog", linthresh=1)
    right.set_ylim(bottom=0)
    left.legend(frameon=False)
    fig.tight_layout()
    return fig


def plot_naive_candidates(axes, tables: dict, *, max_rows: int | None = None) -> None:
    """Draw each candidate encoding of chapter 2's design section as a small heat map.

    Args:
        axes: a sequence of matplotlib axes, one per entry of ``tables``.
        tables: title -> array of shape ``(n, w)`` (rows are positions).
        max_rows: draw at most this many rows of each table.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> import numpy as np
        >>> fig, axes = plt.subplots(1, 2)
        >>> plot_naive_candidates(axes, {"a": np.eye(3), "b": np.ones((3, 2))})
        >>> plt.close(fig)
    """
    if not isinstance(tables, dict) or not tables:
        raise TypeError(f"tables must be a non-empty dict title -> (n, w) array, got {tables!r}")
    if max_rows is not None:
        max_rows = check_int("max_rows", max_rows)
    if len(axes) != len(tables):
        raise ValueError(f"need one axis per table, got {len(axes)} axes and {len(tables)} tables")
    for title, table in tables.items():
        arr = as_finite_array(f"tables[{title!r}]", table)
        if arr.ndim != 2:
            raise ValueError(f"tables[{title!r}] must have shape (positions, width), got {arr.shape}")
    for ax, (title, table) in zip(axes, tables.items()):
        t = table[:max_rows] if max_rows else table
        im = ax.imshow(t, aspect="auto", interpolation="nearest", cmap="viridis")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("dimension")
        ax.figure.colorbar(im, ax=ax, fraction=0.08)
    axes[0].set_ylabel("position")


# --- chapter 6: the protocol grid (beyond-length accuracy, per position, cost) -----------


def plot_scheme_bars(
    ax,
    summary: dict,
    task: str,
    schemes: list[str] | tuple[str, ...],
    *,
    key: str = "beyond_4x",
    variants: tuple[str, ...] = ("plain", "bos"),
    chance: float | None = None,
) -> None:
    """One group of bars per scheme (one bar per variant), mean and one std over seeds.

    Args:
        ax: a matplotlib ``Axes``.
        summary: ``{(task, scheme, variant): {key: (mean, std, n)}}``, as
            :func:`posenc.book.training.grid_summary` returns.
        task: which task to draw.
        schemes: the schemes, in order along the x-axis.
        key: the metric (``"acc_1x"``, ``"beyond_2x"``, ``"beyond_4x"``, ...).
        variants: the bars of each group (``"plain"`` solid, ``"bos"`` hatched).
        chance: draw a dotted line at this accuracy.

    A scheme with no value (learned embeddings past ``max_len``) is marked "n/a".

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> s = {("t", "none", "plain"): {"beyond_4x": (0.5, 0.1, 5)}, ("t", "none", "bos"): {"beyond_4x": (0.9, 0.0, 5)}}
        >>> plot_scheme_bars(ax, s, "t", ["none"])
        >>> plt.close(fig)
    """
    import math

    check_axes("ax", ax)
    schemes, variants = check_names("schemes", schemes), check_names("variants", variants)
    if not isinstance(summary, dict) or not summary:
        raise TypeError("summary must be the non-empty dict {(task, scheme, variant): {key: (mean, std, n)}} of training.grid_summary")
    if not any(isinstance(g, tuple) and g[:1] == (task,) for g in summary):
        raise ValueError(f"task={task!r} has no entry in summary")
    for scheme in schemes:
        for variant in variants:
            if (task, scheme, variant) not in summary:
                raise ValueError(f"schemes/variants: summary has no entry {(task, scheme, variant)!r}")
            if key not in summary[(task, scheme, variant)]:
                raise ValueError(f"key={key!r} is not in summary[{(task, scheme, variant)!r}]")
    width = 0.8 / len(variants)
    for k, scheme in enumerate(schemes):
        style = SCHEME_STYLES.get(scheme, {})
        for j, variant in enumerate(variants):
            mean, std, n = summary[(task, scheme, variant)][key]
            x = k - 0.4 + width * (j + 0.5)
            if not n:
                ax.text(x, 0.02, "n/a", ha="center", va="bottom", fontsize=MIN_FONT_PT, rotation=90)
                continue
            ax.bar(
                x,
                mean,
                width,
                yerr=0.0 if math.isnan(std) else std,
                capsize=2,
                color=style.get("color"),
                alpha=1.0 if j == 0 else 0.55,
                hatch=None if j == 0 else "//",
                edgecolor="black",
                linewidth=0.5,
            )
    if chance is not None:
        ax.axhline(chance, color="gray", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(schemes)), schemes, rotation=45, ha="right")
    ax.set_ylim(0, 1.05)


def plot_position_curves(
    ax,
    rows: list[dict],
    task: str,
    variant: str,
    schemes: list[str] | tuple[str, ...],
    *,
    key: str = "pos_4x",
    train_len: int = 16,
    chance: float | None = None,
) -> None:
    """Accuracy at each position (mean over the rows of each scheme), one line per scheme.

    Args:
        ax: a matplotlib ``Axes``.
        rows: result rows holding ``task``, ``scheme``, ``variant`` and a per-position
            list under ``key`` (``None`` where a position is not scored).
        task, variant: which rows to draw.
        schemes: the schemes, in legend order (schemes without a value are skipped).
        key: the per-position list to average.
        train_len: marked by a vertical dashed line (positions right of it are new).
        chance: draw a dotted line at this accuracy.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> plot_position_curves(ax, [{"task": "t", "scheme": "none", "variant": "bos", "pos_4x": [None, 0.5, 1.0]}], "t", "bos", ["none"], train_len=2)
        >>> plt.close(fig)
    """
    import numpy as np

    check_axes("ax", ax)
    schemes = check_names("schemes", schemes)
    rows = check_rows("rows", rows, ("task", "scheme", "variant"))
    chosen = [r for r in rows if (r["task"], r["variant"]) == (task, variant)]
    if not chosen:
        raise ValueError(f"task={task!r} with variant={variant!r} matches none of the {len(rows)} rows")
    if not any(key in r for r in chosen):
        raise ValueError(f"key={key!r} is in none of the rows of task {task!r}, variant {variant!r}")
    for scheme in schemes:
        lists = [r[key] for r in rows if (r["task"], r["scheme"], r["variant"]) == (task, scheme, variant)]
        if not lists:
            continue
        table = np.array([[np.nan if a is None else a for a in lst] for lst in lists], dtype=float)
        if np.isnan(table).all():
            continue
        with np.errstate(all="ignore"):
            mean = np.nanmean(np.where(np.isnan(table).all(axis=0), 0.0, table), axis=0)
        mean[np.isnan(table).all(axis=0)] = np.nan
        style = SCHEME_STYLES.get(scheme, {})
        ax.plot(np.arange(len(mean)), mean, label=scheme, color=style.get("color"), linewidth=1.3)
    ax.axvline(train_len - 0.5, color="black", linewidth=0.8, linestyle="--")
    if chance is not None:
        ax.axhline(chance, color="gray", linewidth=0.8, linestyle=":")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("position")


def plot_step_cost(ax, cost_rows: list[dict], schemes: list[str] | tuple[str, ...], *, relative_to: str = "none") -> None:
    """Time per training step against sequence length, relative to one scheme.

    Args:
        ax: a matplotlib ``Axes``.
        cost_rows: rows with ``scheme``, ``length``, ``ms_per_step``, ``ms_min``, ``ms_max``
            (``experiments/results/alternatives_cost.json``).
        schemes: the schemes to draw.
        relative_to: the scheme whose time is 1 at every length.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> rows = [{"scheme": s, "length": n, "ms_per_step": m, "ms_min": m, "ms_max": m}
        ...         for s, m in (("none", 1.0), ("shaw", 1.5)) for n in (16, 32)]
        >>> plot_step_cost(ax, rows, ["none", "shaw"])
        >>> plt.close(fig)
    """
    check_axes("ax", ax)
    schemes = check_names("schemes", schemes)
    cost_rows = check_rows("cost_rows", cost_rows, ("scheme", "length", "ms_per_step"))
    base = {r["length"]: r["ms_per_step"] for r in cost_rows if r["scheme"] == relative_to}
    if not base:
        raise ValueError(f"relative_to={relative_to!r} has no rows")
    for scheme in schemes:
        lengths = {r["length"] for r in cost_rows if r["scheme"] == scheme}
        if not lengths:
            raise ValueError(f"schemes: {scheme!r} has no rows in cost_rows")
        if lengths - set(base):
            raise ValueError(
                f"cost_rows: {scheme!r} has lengths {sorted(lengths - set(base))} that relative_to={relative_to!r} lacks"
            )
    for scheme in schemes:
        rs = sorted((r for r in cost_rows if r["scheme"] == scheme), key=lambda r: r["length"])
        xs = [r["length"] for r in rs]
        style = SCHEME_STYLES.get(scheme, {})
        ax.plot(xs, [r["ms_per_step"] / base[r["length"]] for r in rs], label=scheme, linewidth=1.3, markersize=5, **style)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(base), [str(n) for n in sorted(base)])
    ax.minorticks_off()
    ax.axhline(1.0, color="gray", linewidth=0.8, linestyle=":")
    ax.set_xlabel("sequence length")
    ax.set_ylabel(f"time per step / {relative_to}")
