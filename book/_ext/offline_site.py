"""Sphinx extension of the book: keep every page self-contained and error-free offline.

Jupyter Book 1 registers sphinx-thebe and sphinx-togglebutton, and with Sphinx 7.4 two of
their inline scripts end up twice in every page (once with ``filename=None``, once with
``filename=""``, which Sphinx does not recognise as the same asset). The second copy of
``const THEBE_JS_URL = ...`` is a JavaScript ``SyntaxError`` on every page. This extension

* removes duplicate scripts from each page;
* gives the theme a default colour mode ("auto"), so a first visit logs no error;
* when live code (thebe) is not enabled among the launch buttons, which is the case for
  this book, removes thebe's scripts, stylesheet and page configuration, so that no page
  mentions a CDN at all (thebe would load its code from unpkg.com when started);
* adds the book's own style sheet ``book/_static/posenc-site.css`` (contrast fixes, print
  style);
* ends every page's footer with links to the repository (the one place its URL is
  written is ``repository.url`` in ``_config.yml``), to the PDF of the whole book and, on
  a chapter's page, to that chapter's own PDF (``pdf_book.py``, which removes these links
  again where it cannot print the PDF);
* gives the print title of a numbered page (the theme prints its own h1, without the
  number) the chapter's number, as the site's heading has it;
* keeps every glyph of the icon fonts that the theme's style sheet draws without an
  ``fa-*`` class (the admonitions' title icons: without it, a note's icon showed, and
  printed, as an empty box);
* labels the bibliography's entries ``role="listitem"`` (docutils writes the deprecated
  ARIA role ``doc-biblioentry``, which axe-core reports);
* keeps pages light (a chapter page transferred about 4 MB):

  - MathJax is loaded component by component (``startup.js`` with the TeX input, the
    CommonHTML output and the assistive MathML for screen readers, about 0.76 MB) instead
    of the combined ``tex-chtml.js`` (1.16 MB, most of the difference being the
    right-click menu), and only the files that configuration can load are kept of the
    24 MB distribution that ``sphinx-mathjax-offline`` copies (TeX extensions stay, since
    ``\\require`` and the autoloader fetch them on demand);
  - the theme's ``fontawesome.js`` (1.49 MB: every Font Awesome icon as SVG, drawn by
    script) is not loaded: the theme's style sheet already draws the same icons from the
    Font Awesome web fonts it ships, which a page fetches only for the icon styles it
    shows; those fonts (0.3 MB for the solid and brands styles) are cut down to the
    icons the site uses (every ``fa-*`` name in its pages and scripts), and so are the
    theme's icon rules (``.fa-NAME:before{content:...}``, 86 kB of its style sheet);
  - with search-as-you-type off (the theme's default), the search index and Sphinx's
    search scripts are loaded by the search page only (the theme put them in every page
    for a search-as-you-type box that is not shown; the index grows with the book).

MathJax is served from ``_static/mathjax``: MathJax 4 where ``npm ci`` has installed it
(``package.json``; its startup, TeX input, CommonHTML output, assistive MathML and the
CommonHTML data of its default font, about 3.5 MB on disk of which a page loads what its
formulas use), configured to break long display equations to the width of the column
instead of cutting them on a phone, and to take its font from the site, not a CDN;
otherwise the MathJax 3 that the ``sphinx-mathjax-offline`` extension copies (pruned as
above), with a message saying what is lost; the browser test in ``tests/site/test_site.py`` checks the result (formulas
rendered without error, icons drawn, page weight, axe-core).
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

PDF_NAME = "posenc-book.pdf"  # written by pdf_book.py


def chapter_pdf_name(number: str) -> str:
    """The file of chapter ``number``'s own PDF, beside the whole book's (pdf_book.py):
    ``posenc-book-ch06.pdf``."""
    return f"posenc-book-ch{int(str(number).split('.')[0]):02d}.pdf"
_STATIC = Path(__file__).resolve().parent.parent / "_static"
# MathJax 4 (package.json, installed by `npm ci`): it breaks long display equations to the
# width of the screen; MathJax 3 (sphinx-mathjax-offline, the fallback) cuts them.
_NODE = Path(__file__).resolve().parents[2] / "node_modules"
MATHJAX4 = _NODE / "mathjax"
MATHJAX4_FONT = _NODE / "@mathjax" / "mathjax-newcm-font"

# MathJax 3 components loaded by startup.js; everything else of the copied distribution
# is removed from the built site except what these can load on demand.
MATHJAX_LOAD = ["input/tex", "output/chtml", "a11y/assistive-mml"]
_MATHJAX_KEEP = (
    "startup.js",
    "core.js",
    "input/tex.js",
    "input/tex/extensions/",  # \require and the autoloader (\color, \boldsymbol, ...)
    "output/chtml.js",
    "output/chtml/fonts/tex.js",
    "output/chtml/fonts/woff-v2/",
    "a11y/assistive-mml.js",
)

_ICON_RULE = re.compile(r'((?:\.fa-[a-z0-9-]+:(?:before|after),?)+)\{content:"((?:\\[0-9a-fA-F]+|\\.|[^"\\])*)"\}')
# The theme's own icons, drawn by CSS from the same fonts without an fa-* class: the
# admonitions' title icons (note: info-circle, warning: exclamation-triangle, ...), the
# version-changed markers, the links' icons. Every glyph they name is kept.
_PST_ICON = re.compile(r'--pst-icon-[a-z0-9-]+:\s*"((?:\\[0-9a-fA-F]+|\\.|[^"\\])*)"')
_ICON_NAME = re.compile(r"\bfa-[a-z0-9]+(?:-[a-z0-9]+)*")
_SEARCH_SCRIPTS = re.compile(
    r"[ \t]*<script\b[^>]*\bsrc=\"[^\"]*(?:_static/searchtools\.js|_static/language_data\.js|searchindex\.js)\"[^>]*></script>\n?"
)
# MyST-NB's toggles of hidden code ("Show code cell source") carry the aria-label "Toggle
# hidden content", which differs from the text they show (axe: label-content-name-mismatch,
# WCAG 2.5.3): without it, their accessible name is the text a reader sees.
_TOGGLE_LABEL = re.compile(r'(<summary\b[^>]*?) aria-label="Toggle hidden content"')
# The theme's search field shows "Search... Ctrl+K" under the aria-label "Search": the
# same rule; without the label, its name is what it shows.
_SEARCH_LABEL = re.compile(r'(<button\b[^>]*\bsearch-button-field\b[^>]*?) aria-label="Search"')
_FONTAWESOME_JS = re.compile(r"[ \t]*<script\b[^>]*\bsrc=\"[^\"]*_static/scripts/fontawesome\.js[^\"]*\"[^>]*></script>\n?")

_THEBE_CONFIG = re.compile(
    r"\s*<script type=\"text/x-thebe-config\">.*?</script>\s*(<script>kernelName = [^<]*</script>)?",
    re.S,
)


def _thebe_enabled(app) -> bool:
    options = app.config.html_theme_options or {}
    launch = options.get("launch_buttons", {}) or {}
    return bool(launch.get("thebe")) or bool(
        (app.config.thebe_config or {}).get("always_load")
    )


def _script_key(js) -> tuple:
    attrs = tuple(sorted((k, str(v)) for k, v in js.attributes.items()))
    return (js.filename or "", js.priority, attrs)


def _is_thebe_asset(asset) -> bool:
    name = str(asset.filename or "")
    body = str(asset.attributes.get("body", ""))
    return "sphinx-thebe" in name or "THEBE_JS_URL" in body


def _clean_page(app, pagename, templatename, context, doctree) -> None:
    # The theme writes `dataset.mode = localStorage.getItem("mode") || "{{ default_mode }}"`;
    # with no default mode configured, a first visit logs "Got invalid theme mode: ."
    if not context.get("default_mode"):
        context["default_mode"] = "auto"
    _footer_links(app, context)
    if isinstance(context.get("body"), str) and 'role="doc-biblioentry"' in context["body"]:
        context["body"] = context["body"].replace('role="doc-biblioentry"', 'role="listitem"')
    drop_thebe = not _thebe_enabled(app)
    if "script_files" in context:
        seen: set[tuple] = set()
        scripts = []
        for js in context["script_files"]:
            key = _script_key(js)
            if key in seen or (drop_thebe and _is_thebe_asset(js)):
                continue
            seen.add(key)
            scripts.append(js)
        context["script_files"] = scripts
    if drop_thebe:
        if "css_files" in context:
            context["css_files"] = [c for c in context["css_files"] if not _is_thebe_asset(c)]
        if isinstance(context.get("body"), str):
            context["body"] = _THEBE_CONFIG.sub("\n", context["body"])


def _footer_links(app, context) -> None:
    repo = (app.config.html_theme_options or {}).get("repository_url") or ""
    pathto = context.get("pathto")
    links = []
    if repo:
        links.append(f'Source: <a href="{html.escape(repo)}">the repository</a>.')
    if pathto is not None:
        links.append(f'The whole book as a <a class="posenc-pdf-link" href="{pathto(PDF_NAME, 1)}">PDF</a>.')
        number = (getattr(app.env, "toc_secnumbers", {}).get(context.get("pagename"), {}) or {}).get("")
        if number:  # a chapter: its own PDF too
            links.append(f'This chapter alone as a <a class="posenc-pdf-link" '
                         f'href="{pathto(chapter_pdf_name(str(number[0])), 1)}">PDF</a>.')
    if links:
        context["theme_extra_footer"] = (context.get("theme_extra_footer") or "") + "<p>" + " ".join(links) + "</p>"


def mathjax4() -> tuple[Path, Path] | None:
    """MathJax 4 and its default font as ``npm ci`` installs them (package.json), or None."""
    try:
        version = json.loads((MATHJAX4 / "package.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        return None
    if not version.startswith("4.") or not (MATHJAX4_FONT / "chtml.js").is_file():
        return None
    return MATHJAX4, MATHJAX4_FONT


def _mathjax_components(app, pagename, templatename, context, doctree) -> None:
    # Runs before sphinx.ext.mathjax adds its two scripts to the page (priority 500).
    if app.config.mathjax_path in ("mathjax/tex-chtml.js", "mathjax/startup.js"):
        app.config.mathjax_path = "mathjax/startup.js"
        config = dict(app.config.mathjax3_config or {})
        config["loader"] = {**config.get("loader", {}), "load": list(MATHJAX_LOAD)}
        if mathjax4() is not None:
            # the font from the site (MathJax 4 would take it from a CDN), and long display
            # equations broken to the width of the column (a phone) instead of cut
            config["loader"]["paths"] = {**config["loader"].get("paths", {}), "fonts": "[mathjax]/fonts"}
            output = dict(config.get("output", {}))
            output.setdefault("displayOverflow", "linebreak")
            output.setdefault("linebreaks", {"inline": True, "width": "100%"})
            config["output"] = output
        app.config.mathjax3_config = config


def _install_mathjax4(app) -> None:
    """Serve MathJax 4 (from node_modules) instead of the MathJax 3 of sphinx-mathjax-offline:
    only the components ``MATHJAX_LOAD`` names, the TeX extensions, and the font's CommonHTML
    data (``_static/mathjax/fonts/mathjax-newcm-font``)."""
    found = mathjax4()
    root = Path(app.outdir) / "_static" / "mathjax"
    if found is None:
        logger.info("[offline_site] MathJax 4 not found in node_modules (run `npm ci`): serving "
                    "MathJax 3, which cuts long display equations on narrow screens instead of breaking them")
        return
    src, font = found
    shutil.rmtree(root, ignore_errors=True)
    for rel in _MATHJAX_KEEP:
        if rel.startswith("output/chtml/"):
            continue  # MathJax 3's font layout; MathJax 4's font is copied below
        if rel.endswith("/"):
            shutil.copytree(src / rel, root / rel, dirs_exist_ok=True)
        elif (src / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, root / rel)
    target = root / "fonts" / "mathjax-newcm-font"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(font / "chtml.js", target / "chtml.js")
    for sub in ("chtml/woff2", "chtml/dynamic"):
        shutil.copytree(font / sub, target / sub, dirs_exist_ok=True)
    for name in ("LICENSE",):
        if (src / name).is_file():
            shutil.copy2(src / name, root / name)


def _static_path(app, config) -> None:
    if str(_STATIC) not in [str(p) for p in config.html_static_path]:
        config.html_static_path.append(str(_STATIC))


def _prune_mathjax(outdir: Path) -> None:
    root = outdir / "_static" / "mathjax"
    if not (root / "startup.js").is_file():
        return
    for f in sorted(root.rglob("*"), reverse=True):
        rel = f.relative_to(root).as_posix()
        if f.is_file() and not any(rel == k or (k.endswith("/") and rel.startswith(k)) for k in _MATHJAX_KEEP):
            f.unlink()
        elif f.is_dir() and not any(f.iterdir()):
            f.rmdir()


_PRINT_TITLE = re.compile(r'(<div id="jb-print-docs-body" class="onlyprint">\s*<h1>)')
_SECTION_NUMBER = re.compile(r'<article class="bd-article">.*?<h1>(<span class="section-number">[^<]*</span>)', re.S)


def _number_print_title(text: str) -> str:
    """Print (and the PDF) shows the theme's print title instead of the article's h1,
    without the chapter's number: give it the number the h1 has."""
    m = _SECTION_NUMBER.search(text)
    if not m or "section-number" in text[text.find('id="jb-print-docs-body"'):][:400]:
        return text
    return _PRINT_TITLE.sub(lambda t: t.group(1) + m.group(1), text, count=1)


def _rewrite_pages(outdir: Path, drop_search: bool) -> None:
    for page in outdir.rglob("*.html"):
        rel = page.relative_to(outdir)
        if rel.parts[0] == "_static":
            continue
        text = page.read_text(encoding="utf-8")
        new = _FONTAWESOME_JS.sub("", text)
        new = _TOGGLE_LABEL.sub(r"\1", new)
        new = _SEARCH_LABEL.sub(r"\1", new)
        new = _number_print_title(new)
        if drop_search and rel.as_posix() != "search.html":
            new = _SEARCH_SCRIPTS.sub("", new)
        if new != text:
            page.write_text(new, encoding="utf-8")
    scripts = outdir / "_static" / "scripts"
    for name in ("fontawesome.js", "fontawesome.js.map", "fontawesome.js.LICENSE.txt"):
        (scripts / name).unlink(missing_ok=True)


def _css_char(content: str) -> str:
    """The character of a CSS ``content`` string: ``\\f09b`` or ``\\+`` or ``Y``."""
    m = re.fullmatch(r"\\([0-9a-fA-F]+)", content)
    if m:
        return chr(int(m.group(1), 16))
    return content[1:] if content.startswith("\\") else content


def _used_icon_names(outdir: Path) -> set[str]:
    names: set[str] = set()
    for f in outdir.rglob("*"):
        rel = f.relative_to(outdir).as_posix()
        if rel.startswith("_static/mathjax/") or not f.is_file():
            continue
        if f.suffix == ".html" or (rel.startswith("_static/") and f.suffix == ".js"):
            names.update(_ICON_NAME.findall(f.read_text(encoding="utf-8", errors="replace")))
    return names


def _subset_icons(outdir: Path) -> None:
    """Keep of the Font Awesome fonts and icon rules only the icons the site uses."""
    css_path = outdir / "_static" / "styles" / "pydata-sphinx-theme.css"
    fonts = sorted((outdir / "_static" / "vendor" / "fontawesome" / "webfonts").glob("*.*"))
    if not css_path.is_file() or not fonts:
        return
    try:
        from fontTools import subset
        from fontTools.ttLib import TTFont
    except ImportError:
        logger.info("[offline_site] fonttools missing: the icon fonts are shipped whole")
        return
    used = _used_icon_names(outdir)
    css = css_path.read_text(encoding="utf-8")
    chars: set[str] = set()

    def keep(m: re.Match) -> str:
        names = {s.split(":")[0][1:] for s in m.group(1).split(",") if s}
        if names & used:
            chars.add(_css_char(m.group(2)))
            return m.group(0)
        return ""

    css = _ICON_RULE.sub(keep, css)
    chars.update(_css_char(m.group(1)) for m in _PST_ICON.finditer(css))
    if not chars:
        return
    for font_path in fonts:
        if font_path.suffix not in (".woff2", ".ttf"):
            continue
        try:
            font = TTFont(font_path)
            cmap = font.getBestCmap() or {}
            unicodes = sorted(ord(c) for c in chars if ord(c) in cmap)
            options = subset.Options()
            options.flavor = "woff2" if font_path.suffix == ".woff2" else None
            options.layout_features = ["*"]
            options.name_IDs = ["*"]
            options.notdef_outline = True
            sub = subset.Subsetter(options)
            sub.populate(unicodes=unicodes)
            sub.subset(font)
            font.flavor = options.flavor
            font.save(font_path)
        except Exception as err:  # noqa: BLE001 - e.g. no brotli for woff2: ship it whole
            logger.info(f"[offline_site] {font_path.name} not subset: {err}")
            return
    css_path.write_text(css, encoding="utf-8")


def _lighten_site(app, exc) -> None:
    # After sphinx-mathjax-offline has copied MathJax (build-finished, priority 500).
    if exc is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    if mathjax4() is None:
        _prune_mathjax(outdir)
    else:
        _install_mathjax4(app)
    options = app.config.html_theme_options or {}
    _rewrite_pages(outdir, drop_search=not options.get("search_as_you_type", False))
    _subset_icons(outdir)


def setup(app):
    app.connect("config-inited", _static_path)
    app.add_css_file("posenc-site.css")
    app.connect("html-page-context", _mathjax_components, priority=100)
    # Run after the themes and extensions that add page assets.
    app.connect("html-page-context", _clean_page, priority=900)
    app.connect("build-finished", _lighten_site, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
