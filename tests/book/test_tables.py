"""posenc.book.tables: Markdown and heat-tables, their contrast and their bad input."""

from __future__ import annotations

import math

import pytest

from posenc.book import tables


def _contrast(bg: str, fg: str) -> float:
    def lum(h: str) -> float:
        out = 0.0
        for w, k in zip((0.2126, 0.7152, 0.0722), (1, 3, 5)):
            c = int(h[k:k + 2], 16) / 255
            out += w * (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
        return out
    a, b = sorted((lum(bg), lum(fg)))
    return (b + 0.05) / (a + 0.05)


@pytest.mark.parametrize("value", [None, math.nan, -1.0, 0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0, 2.0])
def test_every_cell_keeps_a_contrast_of_4_5(value):
    bg, fg = tables.shade(value)
    assert _contrast(bg, fg) >= 4.5


def test_heat_table_html_has_headers_groups_and_escapes():
    t = tables.heat_table([[0.5, None]], rows=["a<b"], columns=["x", "y"], groups=[("plain", 1), ("BOS", 1)],
                          caption="c")
    assert "a&lt;b" in t.html and 'scope="row"' in t.html and 'colspan="1"' in t.html
    assert t.html.count("<td") == 2 and "—" in t.html and "overflow-x:auto" in t.html
    assert t._repr_html_() == t.html and str(t).startswith("|  | x | y |")


def test_markdown_table_escapes_pipes():
    assert tables.markdown_table(["a"], [["x|y"]]).splitlines()[2] == "| x\\|y |"


@pytest.mark.parametrize("call, name", [
    (lambda: tables.markdown_table("ab", [["x"]]), "header"),
    (lambda: tables.markdown_table([], []), "header"),
    (lambda: tables.markdown_table(["a"], "x"), "rows"),
    (lambda: tables.markdown_table(["a"], [["x", "y"]]), "rows"),
    (lambda: tables.markdown_table(["a"], [["x"]], align="q"), "align"),
    (lambda: tables.shade(0.5, 1.0, 0.0), "vmin"),
    (lambda: tables.shade("0.5"), "value"),
    (lambda: tables.heat_table([[0.5]], rows=["a", "b"], columns=["x"]), "values"),
    (lambda: tables.heat_table([[0.5, 0.1]], rows=["a"], columns=["x"]), "values"),
    (lambda: tables.heat_table([[0.5]], rows=["a"], columns=["x"], text=[["a", "b"]]), "text"),
    (lambda: tables.heat_table([[0.5]], rows=["a"], columns=["x"], groups=[("g", 2)]), "groups"),
    (lambda: tables.heat_table([[0.5]], rows="a", columns=["x"]), "rows"),
])
def test_bad_input_is_refused_by_name(call, name):
    with pytest.raises((TypeError, ValueError), match=name):
        call()


def test_a_line_break_in_a_cell_breaks_the_html_line_only():
    t = tables.heat_table([[0.5]], rows=["a"], columns=["b"], text=[["0.50 [0.4, 0.6]\n4/4 <fit>"]])
    assert "0.50 [0.4, 0.6]<br>4/4 &lt;fit&gt;</td>" in t.html
    assert "| a | 0.50 [0.4, 0.6] 4/4 <fit> |" in t.markdown
