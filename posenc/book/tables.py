"""Result tables as a reader sees them: Markdown tables and HTML heat-tables.

A chapter that shows results as a table calls one of these instead of printing aligned
text (which a phone cuts) or gluing numbers one cell at a time (which the book splits into
boxes):

- :func:`markdown_table` for a plain table, displayed with ``IPython.display.Markdown``;
- :func:`heat_table` for a grid of numbers whose cells are shaded by value (a verdict grid,
  an accuracy table), displayed as HTML in the page and in print.

Both take strings for what the cell shows, so every chapter keeps its own formatting
(``"0.97 (4/4)"``, ``"+0.12 [+0.03, +0.21]"``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

__all__ = ["HeatTable", "markdown_table", "heat_table", "shade"]

#: the two ends of the heat-table's colour ramp (a light and a dark blue), as RGB in 0..255
LOW_RGB = (247, 251, 255)
HIGH_RGB = (8, 48, 107)
#: the fill of a cell without a value
MISSING_RGB = (224, 224, 224)


def _check_header(header: object, name: str) -> list[str]:
    if isinstance(header, str) or not isinstance(header, Sequence):
        raise TypeError(f"{name} must be a sequence of strings, got {type(header).__name__}")
    if not all(isinstance(h, str) for h in header):
        raise TypeError(f"{name} must hold strings only")
    return list(header)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]], *, align: str | Sequence[str] = "l") -> str:
    """A Markdown table: one header row, then ``rows``, each cell ``str()``-ed.

    ``align`` is one letter per column (``"l"``, ``"r"`` or ``"c"``), or one letter for all
    columns. A ``|`` inside a cell is escaped, so a cell cannot split its row.

    Example:
        >>> print(markdown_table(["scheme", "bpc"], [["ALiBi", 2.65], ["RoPE", 2.47]], align="lr"))
        | scheme | bpc |
        |:--|--:|
        | ALiBi | 2.65 |
        | RoPE | 2.47 |
    """
    head = _check_header(header, "header")
    if not head:
        raise ValueError("header must name at least one column")
    if isinstance(rows, str) or not isinstance(rows, Sequence):
        raise TypeError(f"rows must be a sequence of rows, got {type(rows).__name__}")
    aligns = [align] * len(head) if isinstance(align, str) and len(align) == 1 else list(align)
    if len(aligns) != len(head) or any(a not in ("l", "r", "c") for a in aligns):
        raise ValueError(f"align must be one of 'l', 'r', 'c' per column ({len(head)} columns), got {align!r}")
    rule = {"l": ":--", "r": "--:", "c": ":-:"}

    def cell(value: object) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "|".join(rule[a] for a in aligns) + "|"]
    for k, row in enumerate(rows):
        if isinstance(row, str) or not isinstance(row, Sequence):
            raise TypeError(f"rows[{k}] must be a sequence of cells, got {type(row).__name__}")
        if len(row) != len(head):
            raise ValueError(f"rows[{k}] has {len(row)} cells for {len(head)} columns")
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


def shade(value: float | None, vmin: float = 0.0, vmax: float = 1.0) -> tuple[str, str]:
    """The fill and the text colour (CSS ``#rrggbb``) of a heat-table cell holding ``value``.

    The fill runs linearly from ``LOW_RGB`` at ``vmin`` to ``HIGH_RGB`` at ``vmax``
    (values outside are clipped); ``None`` or NaN gets ``MISSING_RGB``. The text is
    black or white, whichever contrasts more with the fill (WCAG relative luminance), so
    every cell keeps a contrast of at least 4.5.

    Example:
        >>> shade(0.0), shade(1.0), shade(None)
        (('#f7fbff', '#000000'), ('#08306b', '#ffffff'), ('#e0e0e0', '#000000'))
    """
    if not (isinstance(vmin, (int, float)) and isinstance(vmax, (int, float))) or not vmax > vmin:
        raise ValueError(f"vmin must be below vmax, got vmin={vmin!r}, vmax={vmax!r}")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        rgb = MISSING_RGB
    else:
        if not isinstance(value, (int, float)):
            raise TypeError(f"value must be a number or None, got {type(value).__name__}")
        t = min(max((float(value) - vmin) / (vmax - vmin), 0.0), 1.0)
        rgb = tuple(round(lo + t * (hi - lo)) for lo, hi in zip(LOW_RGB, HIGH_RGB))

    def lum(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    y = 0.2126 * lum(rgb[0]) + 0.7152 * lum(rgb[1]) + 0.0722 * lum(rgb[2])
    text = "#000000" if (y + 0.05) / 0.05 >= 1.05 / (y + 0.05) else "#ffffff"
    return "#" + "".join(f"{c:02x}" for c in rgb), text


class HeatTable:
    """A heat-table: shown as HTML in a notebook and the book, as Markdown in a console.

    Made by :func:`heat_table`; ``html`` and ``markdown`` hold the two renderings.
    """

    def __init__(self, html_text: str, markdown_text: str) -> None:
        self.html = html_text
        self.markdown = markdown_text

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.markdown

    __str__ = __repr__


def heat_table(
    values: Sequence[Sequence[float | None]],
    *,
    rows: Sequence[str],
    columns: Sequence[str],
    text: Sequence[Sequence[str]] | None = None,
    vmin: float = 0.0,
    vmax: float = 1.0,
    corner: str = "",
    caption: str | None = None,
    groups: Sequence[tuple[str, int]] | None = None,
) -> HeatTable:
    """A table whose cells are shaded by ``values`` and show ``text`` (default: the value, two decimals).

    ``values`` is ``len(rows) x len(columns)``; ``None`` or NaN marks a cell without a value
    (grey, text ``"—"`` unless ``text`` says otherwise); a line break in a cell's text
    breaks the line in the HTML (a space in the Markdown). ``groups``, if given, is a list of
    ``(label, n_columns)`` drawn as a header row above ``columns`` (for example the plain and
    BOS variants of a verdict grid); the counts must add up to ``len(columns)``. The HTML sits
    in a horizontally scrolling box, so a wide table never widens a phone's page.

    Example:
        >>> t = heat_table([[0.97, None], [0.25, 1.0]], rows=["RoPE", "ALiBi"], columns=["2x", "4x"],
        ...                text=[["0.97 (4/4)", "—"], ["0.25 (0/4)", "1.00 (4/4)"]], corner="scheme")
        >>> print(t)
        | scheme | 2x | 4x |
        |:--|--:|--:|
        | RoPE | 0.97 (4/4) | — |
        | ALiBi | 0.25 (0/4) | 1.00 (4/4) |
        >>> t.html.count("<td")
        4
    """
    row_labels = _check_header(rows, "rows")
    col_labels = _check_header(columns, "columns")
    if isinstance(values, str) or not isinstance(values, Sequence) or len(values) != len(row_labels):
        raise ValueError(f"values must have one row per label in rows ({len(row_labels)})")
    if any(isinstance(r, str) or not isinstance(r, Sequence) or len(r) != len(col_labels) for r in values):
        raise ValueError(f"every row of values must have one value per column ({len(col_labels)})")
    if text is None:
        text = [["—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}" for v in r]
                for r in values]
    elif (isinstance(text, str) or not isinstance(text, Sequence) or len(text) != len(row_labels)
          or any(isinstance(r, str) or not isinstance(r, Sequence) or len(r) != len(col_labels) for r in text)):
        raise ValueError("text must have the shape of values")
    if groups is not None:
        if (isinstance(groups, str) or not isinstance(groups, Sequence)
                or any(not (isinstance(g, tuple) and len(g) == 2 and isinstance(g[0], str) and isinstance(g[1], int)
                            and g[1] > 0) for g in groups)
                or sum(g[1] for g in groups) != len(col_labels)):
            raise ValueError(f"groups must be (label, n_columns) pairs whose counts add up to {len(col_labels)}")
    cells = [[shade(v, vmin, vmax) for v in r] for r in values]  # checks vmin, vmax and every value

    esc = html.escape
    out = ['<div class="posenc-heat-table" style="overflow-x:auto;max-width:100%">',
           '<table style="border-collapse:collapse;font-variant-numeric:tabular-nums">']
    if caption is not None:
        out.append(f'<caption style="caption-side:top;text-align:left">{esc(str(caption))}</caption>')
    out.append("<thead>")
    if groups is not None:
        out.append('<tr><th scope="col"></th>' + "".join(
            f'<th scope="colgroup" colspan="{n}" style="text-align:center">{esc(label)}</th>' for label, n in groups)
            + "</tr>")
    out.append(f'<tr><th scope="col" style="text-align:left">{esc(corner)}</th>'
               + "".join(f'<th scope="col" style="text-align:right">{esc(c)}</th>' for c in col_labels) + "</tr>")
    out.append("</thead><tbody>")
    for label, shades, texts in zip(row_labels, cells, text):
        tds = "".join(
            f'<td style="background:{bg};color:{fg};text-align:right;padding:2px 6px;white-space:nowrap">'
            f"{'<br>'.join(esc(line) for line in str(t).split(chr(10)))}</td>" for (bg, fg), t in zip(shades, texts))
        out.append(f'<tr><th scope="row" style="text-align:left;white-space:nowrap">{esc(label)}</th>{tds}</tr>')
    out.append("</tbody></table></div>")
    md = markdown_table([corner] + col_labels, [[label] + list(t) for label, t in zip(row_labels, text)],
                        align="l" + "r" * len(col_labels))
    return HeatTable("\n".join(out), md)
