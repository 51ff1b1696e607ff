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

**Adding an explorer** (one registry, ``EXPLORERS``): write a function that draws its
static figure with posenc and matplotlib into a path, register it with
``@register("name", script="my_explorer.js")`` (the script defaults to ``explorers.js``;
a new one goes to ``book/_static/``), and in that script call
``window.posencExplorers.register("name", function (root) {...})``: ``explorers.js``
(loaded first on every page with an explorer) starts each registered explorer on the
``<div>`` the directive wrote, and offers its helpers (``slider``, ``lineChart``,
``panel``) on ``window.posencExplorers``. Only the scripts of the explorers a page shows
are added to it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

_BOOK = Path(__file__).resolve().parent.parent
FIGURES = _BOOK / "_generated" / "explorers"


@dataclass(frozen=True)
class Explorer:
    """A registered explorer: its static figure's drawing function and its script."""

    name: str
    draw: Callable  # draw(path): the static figure (a PNG) at the live explorer's defaults
    script: str = "explorers.js"
    data: Callable | None = None  # data(): JSON-able, embedded in the page for the script


EXPLORERS: dict[str, Explorer] = {}


def register(name: str, script: str = "explorers.js", data: Callable | None = None):
    """Register the decorated ``draw(path)`` as the static figure of explorer ``name``;
    ``data()``, if given, returns what the script needs (JSON), embedded in the page as
    ``<script type="application/json" class="explorer-data">`` inside the explorer."""

    def deco(draw: Callable) -> Callable:
        EXPLORERS[name] = Explorer(name, draw, script, data)
        return draw

    return deco


def names() -> tuple[str, ...]:
    return tuple(EXPLORERS)

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


STYLE = {"font.size": 10, "axes.titlesize": 10, "savefig.dpi": 200, "figure.dpi": 100}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@register("sinusoidal")
def draw_sinusoidal(path: Path) -> Path:
    """The table, positions by dimensions."""
    import posenc

    plt = _plt()
    s = SINUSOIDAL
    pe = posenc.sinusoidal_encoding(s["positions"], s["d"], base=s["base"])
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    im = ax.imshow(pe, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    fig.colorbar(im, ax=ax, fraction=0.04)
    return _save(fig, path)


@register("dot")
def draw_dot(path: Path) -> Path:
    """The dot product against the offset."""
    import numpy as np

    import posenc

    plt = _plt()
    s = DOT
    k = np.arange(-s["kmax"], s["kmax"] + 1)
    pe = posenc.sinusoidal_encoding(s["p"] + k, s["d"], base=s["base"])
    p0 = posenc.sinusoidal_encoding(np.array([s["p"]]), s["d"], base=s["base"])[0]
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    ax.plot(k, pe @ p0, color="C0")
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xlabel("offset k (the key at p + k)")
    ax.set_ylabel("PE(p) · PE(p + k)")
    return _save(fig, path)


@register("rope")
def draw_rope(path: Path) -> Path:
    """RoPE: a query and a key in the plane of pair 0, before and after a common shift."""
    import posenc

    plt = _plt()
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
    return _save(fig, path)


@register("scaling")
def draw_scaling(path: Path) -> Path:
    """The context-extension remap."""
    import posenc

    plt = _plt()
    s = SCALING
    inv = posenc.rotary_frequencies(s["dim"], base=s["base"])
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for (label, spec), c in zip(scaling_specs(s["factor"], s["original"]).items(), ("C0", "C1", "C2", "C3")):
        ax.plot(posenc.rotary_frequencies(s["dim"], base=s["base"], scaling=spec) / inv, label=label, color=c)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("pair index j (wavelength grows to the right)")
    ax.set_ylabel("new frequency / old")
    ax.legend(fontsize=9)
    return _save(fig, path)


# Chapter 6 (book/_static/explorers-ch6.js): the attention biases and RoPE's aliasing.
BIASES = {"heads": 12, "buckets": 32, "max_distance": 128, "distance": 20}
ALIAS = {"head_dim": 64, "base": 10000.0, "d0": 10, "pair": 2, "range": 256}


def alias_score(head_dim: int, base: float, d0: int, distances):
    """q·R(d)k / (|q||k|) at integer distances for the explorer's query and key: k of unit
    norm spread evenly over the pairs (each pair (c, 0)), q = R(d0)k, so that the score
    peaks at d = d0. Rotated by posenc (interleaved pairs), float64."""
    import numpy as np
    import torch

    import posenc

    pairs = head_dim // 2
    k = torch.zeros(head_dim, dtype=torch.float64)
    k[0::2] = 1 / pairs**0.5
    pos = [int(x) for x in np.asarray(distances)] + [int(d0)]
    x = k.expand(len(pos), head_dim)[None, None].contiguous()  # (1, 1, positions, head_dim)
    rot = posenc.apply_rotary(x, pos, base=base, layout="interleaved")[0, 0]
    return (rot[:-1] @ rot[-1]).numpy()


@register("biases", script="explorers-ch6.js")
def draw_biases(path: Path) -> Path:
    """ALiBi's slopes per head and T5's bucket per offset (both variants)."""
    import numpy as np
    import torch

    import posenc

    plt = _plt()
    s = BIASES
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(6.4, 3.0), gridspec_kw={"width_ratios": [1, 1.4]})
    m = posenc.alibi_slopes(s["heads"]).double().numpy()
    a1.bar(np.arange(1, s["heads"] + 1), m, color="C1")
    a1.set_yscale("log", base=2)
    a1.set_xlabel("head h")
    a1.set_ylabel("ALiBi slope m_h")
    a1.set_title(f"{s['heads']} heads")
    span = int(1.25 * s["max_distance"])
    off = torch.arange(-span, span + 1)
    for bidi, c, label in ((True, "C0", "bidirectional"), (False, "C3", "causal")):
        b = posenc.t5_relative_bucket(off, bidirectional=bidi, num_buckets=s["buckets"], max_distance=s["max_distance"])
        a2.step(off.numpy(), b.numpy(), where="mid", color=c, label=label)
    for x in (-s["distance"], s["distance"]):
        a2.axvline(x, color="0.5", lw=0.8, ls="--")
    a2.set_xlabel("offset j − i")
    a2.set_ylabel("T5 bucket")
    a2.set_title(f"{s['buckets']} buckets, max distance {s['max_distance']}")
    a2.legend(fontsize=9)
    return _save(fig, path)


@register("alias", script="explorers-ch6.js")
def draw_alias(path: Path) -> Path:
    """RoPE's score against the distance, with pair j's alias peaks marked."""
    import math

    import numpy as np

    import posenc

    plt = _plt()
    s = ALIAS
    d = np.arange(0, s["range"] + 1)
    w = posenc.rotary_frequencies(s["head_dim"], base=s["base"])[s["pair"]]
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    period = 2 * math.pi / w
    for i, p in enumerate(s["d0"] + period * np.arange(1, int(s["range"] / period) + 1)):
        ax.axvline(p, color="0.5", lw=0.8, ls="--", label="d₀ + 2πm/ω_j" if i == 0 else None)
    ax.plot(d, np.cos(w * (d - s["d0"])), color="C1", lw=1, label=f"pair j = {s['pair']} alone")
    ax.plot(d, alias_score(s["head_dim"], s["base"], s["d0"], d), color="C0", label="whole head")
    ax.set_xlabel("distance d")
    ax.set_ylabel("score / |q||k|")
    ax.set_ylim(-1.05, 1.1)
    ax.legend(fontsize=9, loc="lower right")
    return _save(fig, path)


# Chapter 8 (book/_static/explorers-ch8.js): the ids of an image/video grid and the score
# of one query patch over it (posenc.mrope_position_ids, posenc.book.vision.query_scores).
MULTIDIM = {"frames": 2, "height": 4, "width": 6, "text": 2, "query": (1, 2), "scheme": "rope_axial"}


@register("multidim", script="explorers-ch8.js")
def draw_multidim(path: Path) -> Path:
    """M-RoPE ids of a two-frame video of 4 x 6 merged tokens after two text tokens, and
    the axial-RoPE score of one query patch over the first frame."""
    import posenc
    from posenc.book.vision import query_scores

    plt = _plt()
    s = MULTIDIM
    t, h, w = s["frames"], s["height"], s["width"]
    ids = posenc.mrope_position_ids([("text", s["text"]), ("video", (t, 2 * h, 2 * w))])[:, s["text"]:]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(6.4, 2.6), gridspec_kw={"width_ratios": [2 * w + 1, w]})
    for f in range(t):
        for r in range(h):
            for c in range(w):
                i = (f * h + r) * w + c
                x = f * (w + 1) + c
                query = f == 0 and (r, c) == tuple(s["query"])
                a1.add_patch(plt.Rectangle((x, r), 0.95, 0.95, fill=query, color="#fde68a" if query else "0.6"))
                a1.text(x + 0.47, r + 0.5, ",".join(str(int(v)) for v in ids[:, i]), ha="center", va="center", fontsize=7)
    a1.set_xlim(-0.1, t * (w + 1) - 0.9)
    a1.set_ylim(h, -0.1)
    a1.set_axis_off()
    a1.set_title("M-RoPE ids (t, h, w), frames 0 and 1")
    m = query_scores(s["scheme"], (h, w), s["query"])
    vmax = abs(m).max()
    a2.imshow(m, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    a2.plot(s["query"][1], s["query"][0], "k*", ms=9)
    a2.set_xticks(range(w))
    a2.set_yticks(range(h))
    a2.set_title("axial RoPE score")
    return _save(fig, path)


# Chapter 6's results (alternatives_v2.json, the fixed-budget grid shipped with posenc.book,
# with the extra seeds of alternatives_v2_C.json pooled in): accuracy at each position of
# the 4x sequences, per scheme, as the chapter's figure of positions averages it (best
# held-out-loss checkpoint, the seeds that fit, every learning rate at which at least half
# the seeds fit, and the added seeds).
RESULTS = {"task": "offset_copy", "variant": "plain"}


def results_data() -> dict:
    """Per task, variant and scheme, the mean accuracy at each position (4 decimals;
    None where no seed scored it), as chapter 6's figure of positions draws it; a scheme
    with no seed that fits has no curve."""
    import numpy as np

    from posenc.book import plotting, resources, synthetic, tasks

    grid = synthetic.load_grid()
    grid_c = synthetic.load_grid(resources.resource_path("alternatives_v2_C.json"))
    curves: dict = {}
    for task in tasks.ALL_TASKS:
        for variant in synthetic.VARIANTS:
            for scheme in synthetic.GRID_SCHEMES:
                got = synthetic.group_curves(grid, task, scheme, variant, more_seeds=grid_c)
                if got["missing"]:
                    continue
                table = got["curves"]
                empty = np.isnan(table).all(axis=0)
                with np.errstate(all="ignore"):
                    mean = np.nanmean(np.where(np.isnan(table) & empty, 0.0, table), axis=0)
                curves.setdefault(task, {}).setdefault(variant, {})[scheme] = [
                    None if e else round(float(v), 4) for v, e in zip(mean, empty)]
    colors = {s: plotting.SCHEME_STYLES.get(s, {}).get("color") for s in synthetic.GRID_SCHEMES}
    return {"tasks": list(tasks.ALL_TASKS), "schemes": list(synthetic.GRID_SCHEMES), "colors": colors,
            "train_len": grid["config"]["train_len"], "chance": 1 / grid["config"]["vocab_size"],
            "curves": curves}


@register("results", script="explorers-ch6.js", data=results_data)
def draw_results(path: Path) -> Path:
    """The per-position accuracy of every scheme for the explorer's starting task."""
    plt = _plt()
    data = results_data()
    s = RESULTS
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for scheme, curve in data["curves"][s["task"]][s["variant"]].items():
        y = [float("nan") if v is None else v for v in curve]
        ax.plot(range(len(y)), y, label=scheme, color=data["colors"].get(scheme), lw=1.3)
    ax.axvline(data["train_len"] - 0.5, color="black", lw=0.8, ls="--")
    ax.axhline(data["chance"], color="gray", lw=0.8, ls=":")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("position (4x the training length; dashed: the training length)")
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=8, ncols=4, loc="lower left")
    return _save(fig, path)


def make_figures(outdir: Path = FIGURES, only: tuple[str, ...] | None = None) -> list[Path]:
    """Draw the static figures of the registered explorers with posenc (PNG, 2x resolution)."""
    plt = _plt()
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    with plt.rc_context(STYLE):
        for name, ex in EXPLORERS.items():
            if only is None or name in only:
                paths.append(ex.draw(outdir / f"{name}.png"))
    return paths


def _save(fig, path: Path) -> Path:
    """Save ``fig`` as a PNG reduced to a 256-colour palette (as the chapters' figures are)."""
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    image = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    image.save(path, format="PNG", optimize=True)
    return path


class ExplorerDirective(SphinxDirective):
    required_arguments = 1
    has_content = True
    option_spec = {"alt": directives.unchanged_required, "name": directives.unchanged}

    def run(self):
        name = self.arguments[0]
        if name not in EXPLORERS:
            raise self.error(f"unknown explorer {name!r}; known: {', '.join(EXPLORERS)}")
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
        close = "</div>"
        if EXPLORERS[name].data is not None:
            payload = json.dumps(EXPLORERS[name].data(), separators=(",", ":")).replace("</", "<\\/")
            close = f'<script type="application/json" class="explorer-data">{payload}</script></div>'
        close = nodes.raw("", close, format="html")
        return [open_, figure, close]


def _write_figures(app) -> None:
    make_figures()


_ROOT_DIV = re.compile(r'class="posenc-explorer" data-explorer="([^"]+)"')


def _page_assets(app, pagename, templatename, context, doctree) -> None:
    if doctree is None:
        return
    shown = [m.group(1) for node in doctree.findall(nodes.raw) for m in _ROOT_DIV.finditer(node.astext())]
    if not shown:
        return
    # per page, as sphinx.ext.mathjax adds its script; explorers.js first (the registry)
    app.builder.add_css_file("explorers.css")
    scripts = ["explorers.js"] + sorted({EXPLORERS[n].script for n in shown if n in EXPLORERS} - {"explorers.js"})
    for i, script in enumerate(scripts):
        app.builder.add_js_file(script, loading_method="defer", priority=500 + i)


def setup(app):
    app.add_directive("explorer", ExplorerDirective)
    app.connect("builder-inited", _write_figures)
    app.connect("html-page-context", _page_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
