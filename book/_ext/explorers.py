"""Sphinx extension of the book: interactive explorers that work in the static site.

The directive ::

    :::{explorer} sinusoidal
    :alt: text describing the static figure
    Caption (MyST), shown under the explorer and under the static figure.
    :::

writes a ``<div class="posenc-explorer" data-explorer="sinusoidal">`` holding a numbered
figure: a static image drawn at build time with posenc and matplotlib (what print, the
PDF and readers without JavaScript see) and its caption. On the page, the site's own
hand-written script ``book/_static/explorers.js`` (added to the pages that have an
explorer, with ``explorers.css``; no library, no CDN, no kernel) puts the sliders and a
live figure above the caption. The explorers: ``sinusoidal`` (the table, sliders for d and
the base), ``dot`` (PE(p)·PE(p+k) against the offset), ``rope`` (a query and a key rotating
with their positions, the score unchanged by a common shift), ``scaling`` (the context-
extension remap of the RoPE frequencies: PI, NTK-aware, YaRN, Llama 3, with a factor
slider). The script's formulas are posenc's; ``tests/site/test_site.py`` checks its
numbers against posenc in the browser.

The static figures are written to ``book/_generated/explorers/`` (ignored by git) when the
builder starts, from the same default parameters as the live explorers.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

_BOOK = Path(__file__).resolve().parent.parent
FIGURES = _BOOK / "_generated" / "explorers"
NAMES = ("sinusoidal", "dot", "rope", "scaling")

# The defaults the live explorers start from (book/_static/explorers.js).
SINUSOIDAL = {"d": 96, "base": 10000.0, "positions": 64}
DOT = {"d": 128, "base": 10000.0, "p": 0, "kmax": 100}
ROPE = {"q": [0.9, 0.3, -0.4, 0.8, 0.5, -0.7, 0.2, 0.6], "k": [0.6, -0.5, 0.7, 0.2, -0.3, 0.8, 0.9, -0.1],
        "base": 10000.0, "m": 7, "n": 3}
SCALING = {"dim": 128, "base": 500000.0, "original": 8192, "factor": 8}


def scaling_specs(factor: float, original: int) -> dict[str, dict]:
    """The four context-extension rules of the ``scaling`` explorer, as posenc scalings."""
    return {
        "position interpolation (PI)": {"type": "linear", "factor": factor},
        "NTK-aware": {"type": "ntk", "factor": factor},
        "YaRN": {"type": "yarn", "factor": factor, "original_max_position_embeddings": original},
        "Llama 3": {"type": "llama3", "factor": factor, "original_max_position_embeddings": original,
                    "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    }


def _rotate(x, pos, freqs):
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    out = x.copy()
    c, s = np.cos(pos * freqs), np.sin(pos * freqs)
    out[0::2] = x[0::2] * c - x[1::2] * s
    out[1::2] = x[0::2] * s + x[1::2] * c
    return out


def make_figures(outdir: Path = FIGURES) -> list[Path]:
    """Draw the four static figures with posenc (PNG, 2x resolution)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    import posenc

    outdir.mkdir(parents=True, exist_ok=True)
    style = {"font.size": 10, "axes.titlesize": 10, "savefig.dpi": 200, "figure.dpi": 100}
    paths = []
    with plt.rc_context(style):
        # 1. the table
        s = SINUSOIDAL
        pe = posenc.sinusoidal_encoding(s["positions"], s["d"], base=s["base"])
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
        im = ax.imshow(pe, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
        ax.set_xlabel("dimension")
        ax.set_ylabel("position")
        fig.colorbar(im, ax=ax, fraction=0.04)
        paths.append(_save(fig, outdir / "sinusoidal.png"))

        # 2. the dot product against the offset
        s = DOT
        k = np.arange(-s["kmax"], s["kmax"] + 1)
        pe = posenc.sinusoidal_encoding(s["p"] + k, s["d"], base=s["base"])
        p0 = posenc.sinusoidal_encoding(np.array([s["p"]]), s["d"], base=s["base"])[0]
        fig, ax = plt.subplots(figsize=(6.4, 3.0))
        ax.plot(k, pe @ p0, color="C0")
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_xlabel("offset k (the key at p + k)")
        ax.set_ylabel("PE(p) · PE(p + k)")
        paths.append(_save(fig, outdir / "dot.png"))

        # 3. RoPE: a query and a key in the plane of pair 0, before and after a common shift
        s = ROPE
        f = posenc.rotary_frequencies(len(s["q"]), base=s["base"])
        fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.2))
        for ax, shift in zip(axes, (0, 20)):
            q = _rotate(s["q"], s["m"] + shift, f)
            kk = _rotate(s["k"], s["n"] + shift, f)
            ax.add_patch(plt.Circle((0, 0), 1, fill=False, color="0.7"))
            for v, name, c in ((q, "q", "C0"), (kk, "k", "C3")):
                ax.annotate("", xy=(v[0], v[1]), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": c, "lw": 2})
                ax.text(1.12 * v[0], 1.12 * v[1], name, color=c, ha="center", va="center")
            ax.set_xlim(-1.3, 1.3)
            ax.set_ylim(-1.3, 1.3)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"m = {s['m'] + shift}, n = {s['n'] + shift}: score {float(q @ kk):.4f}")
        paths.append(_save(fig, outdir / "rope.png"))

        # 4. the context-extension remap
        s = SCALING
        inv = posenc.rotary_frequencies(s["dim"], base=s["base"])
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        for (label, spec), c in zip(scaling_specs(s["factor"], s["original"]).items(), ("C0", "C1", "C2", "C3")):
            ax.plot(posenc.rotary_frequencies(s["dim"], base=s["base"], scaling=spec) / inv, label=label, color=c)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("pair index j (wavelength grows to the right)")
        ax.set_ylabel("new frequency / old")
        ax.legend(fontsize=9)
        paths.append(_save(fig, outdir / "scaling.png"))
    return paths


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


class ExplorerDirective(SphinxDirective):
    required_arguments = 1
    has_content = True
    option_spec = {"alt": directives.unchanged_required, "name": directives.unchanged}

    def run(self):
        name = self.arguments[0]
        if name not in NAMES:
            raise self.error(f"unknown explorer {name!r}; known: {', '.join(NAMES)}")
        # the image, relative to the source root ("/..." in Sphinx's image URIs)
        uri = "/" + (FIGURES / f"{name}.png").relative_to(Path(self.env.srcdir).resolve()).as_posix()
        image = nodes.image(uri=uri, alt=self.options.get("alt", name), candidates={"*": uri})
        figure = nodes.figure("", image, classes=["explorer-static"])
        if self.content:
            caption_nodes = self.parse_content_to_nodes()
            para = caption_nodes[0] if caption_nodes and isinstance(caption_nodes[0], nodes.paragraph) else None
            if para is not None:
                caption = nodes.caption(para.rawsource, "", *para.children)
                caption.source, caption.line = self.get_source_info()
                figure += caption
                figure += caption_nodes[1:]
        if "name" in self.options:
            self.add_name(figure)
        self.set_source_info(figure)
        open_ = nodes.raw("", f'<div class="posenc-explorer" data-explorer="{name}">', format="html")
        close = nodes.raw("", "</div>", format="html")
        return [open_, figure, close]


def _write_figures(app) -> None:
    make_figures()


def _page_assets(app, pagename, templatename, context, doctree) -> None:
    if doctree is None:
        return
    for node in doctree.findall(nodes.raw):
        if "posenc-explorer" in node.astext():
            # per page, as sphinx.ext.mathjax adds its script
            app.builder.add_css_file("explorers.css")
            app.builder.add_js_file("explorers.js", loading_method="defer")
            return


def setup(app):
    app.add_directive("explorer", ExplorerDirective)
    app.connect("builder-inited", _write_figures)
    app.connect("html-page-context", _page_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
