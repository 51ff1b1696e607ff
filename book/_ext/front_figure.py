"""Sphinx extension of the book: the front page's figure, drawn by posenc at build time.

When the builder starts, :func:`draw` writes ``book/_generated/front.png`` (ignored by
git; rewritten only when its bytes change, so an unchanged build stays incremental): three
panels computed by posenc, one per family of encodings the book teaches,

* the sinusoidal table of the original Transformer (``posenc.sinusoidal_encoding``,
  64 positions by 64 dimensions, base 10000);
* RoPE's score of a query against a key at offset d, with q and k spread evenly over the
  pairs of a 64-wide head (``posenc.rotary_frequencies``, the mean over pairs of
  cos(omega_j d)): 1 at d = 0, decaying and oscillating;
* ALiBi's bias against the distance, one line per head of eight (``posenc.alibi_slopes``).

``book/intro.md`` shows it with its alt text (``ALT``); ``tests/site/test_site.py`` checks
that it loads, has that alt text and sits on the front page. Nothing is fetched: matplotlib
draws with its own fonts.
"""

from __future__ import annotations

import io
from pathlib import Path

_BOOK = Path(__file__).resolve().parent.parent
TARGET = _BOOK / "_generated" / "front.png"

ALT = ("Three panels drawn by posenc. Left: the sinusoidal table, 64 positions by 64 dimensions, "
       "fast stripes in the first columns and slow ones in the last. Middle: RoPE's score of a query "
       "against a key at offset -128 to 128, 1 at offset 0 and decaying with ripples. Right: ALiBi's "
       "bias against the distance for 8 heads, straight lines falling at slopes from 1/2 to 1/256.")

# drawn for the 617 px column at 1280 px: 6.4 x 2.3 inches at 96 px per inch, 2x pixels
WIDTH_PX = 616
_SIZE = (6.4, 2.3)
_DPI = 200


def draw() -> bytes:
    """The front figure as PNG bytes (deterministic: no timestamp, no software tag)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    import posenc

    style = {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "xtick.labelsize": 9,
             "ytick.labelsize": 9, "svg.hashsalt": "posenc", "figure.dpi": 100}
    with plt.rc_context(style):
        fig, (a, b, c) = plt.subplots(1, 3, figsize=_SIZE, gridspec_kw={"width_ratios": [1.0, 1.15, 1.15]})
        pe = posenc.sinusoidal_encoding(64, 64)
        a.imshow(pe, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
        a.set(title="sinusoidal table", xlabel="dimension", ylabel="position", xticks=[0, 32, 63], yticks=[0, 32, 63])

        w = posenc.rotary_frequencies(64, base=10000.0)
        d = np.arange(-128, 129)
        b.plot(d, np.cos(np.outer(d, w)).mean(axis=1), color="#1f77b4", lw=1.2)
        b.axhline(0, color="#999", lw=0.6)
        b.set(title="RoPE: score vs offset", xlabel="offset d", xticks=[-128, 0, 128], yticks=[0, 0.5, 1])

        slopes = posenc.alibi_slopes(8).numpy()
        dist = np.arange(0, 65)
        colors = matplotlib.colormaps["viridis"](np.linspace(0, 0.9, len(slopes)))
        for m, col in zip(slopes, colors):
            c.plot(dist, -m * dist, color=col, lw=1.1)
        c.set(title="ALiBi: bias per head", xlabel="distance", xticks=[0, 32, 64], yticks=[-32, -16, 0])
        for ax in (b, c):
            ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout(pad=0.4, w_pad=1.0)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
        plt.close(fig)
    return buf.getvalue()


def write(target: Path = TARGET) -> bool:
    """Draw the figure into ``target``; True when the file was (re)written."""
    data = draw()
    if target.is_file() and target.read_bytes() == data:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return True


def _builder_inited(app) -> None:
    write()


def setup(app):
    app.connect("builder-inited", _builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
