"""Browser test of the built book: every page, offline, in Debian's headless Chromium.

The test serves the built HTML on 127.0.0.1 and drives Chromium (through Playwright,
with ``executable_path`` pointing at the system Chromium) through every page. Each page is
loaded once at 1280 px, as a first visit (a fresh browser profile), in the light theme,
then switched to the dark theme with its own theme button and checked again, and each page
of the book once more on a phone (390 px): one load per width, every check below made on
those loads (the explorers' tests too). It checks that

* no page writes an error to the console or throws;
* no page requests anything outside the site (every off-site request is aborted and
  recorded), and every request to the site succeeds;
* every image has loaded, with a non-zero size, and has alt text;
* every formula has been rendered by the MathJax copy served by the site, without a
  MathJax error;
* every internal link points at a file of the site and every anchor (``#...``) at an
  element that exists on the target page;
* the dark theme is really applied when chosen (with the page's theme button);
* axe-core (the copy installed by ``npm ci`` from ``package.json`` into ``node_modules/``,
  injected into each page by the test, never fetched by the page) finds no colour-contrast,
  no ARIA and no label-content-name-mismatch violation on any page, in either theme;
* on a first visit (a fresh browser profile for every page: empty cache, nothing in
  localStorage) no page logs a console error, and each page (chapters, reference pages,
  the API reference's, one per module) transfers at most 2.5 MB, counting everything it
  loads (HTML, CSS, scripts, fonts, every image);
* the interactive explorers sit in the chapters that teach their idea (``EXPLORER_PAGES``)
  and respond there: moving a slider redraws the figure, with no console error and no
  off-site request; their numbers are posenc's; the explorers page links to each;
* no display equation is cut at 1280 px (on any page), at most
  ``MAX_SPLIT_EQUATIONS_DESKTOP`` of the book are broken into lines there (MathJax's line
  boxes), and no page shows LaTeX as text (item 1);
* at 1280 px at most a quarter of the code blocks of each chapter, and of all chapters
  together, scroll sideways, collapsed (``hide-input``) cells measured opened (item 2);
* every figure of the chapters is shown at 1280 px at the size it was drawn (not
  shrunk), at twice the resolution, within the column and at least 3/4 of its width
  (item 3; the fonts' 9 pt are checked in the notebooks by
  ``tests/prose/test_notebook_layout.py``).

On a phone (390 px, each page loaded at that width): no page wider than the
screen (nothing pans sideways), at most
``MAX_CUT_EQUATIONS_PHONE`` display equations cut across the book (MathJax 4 breaks long
ones to the width of the screen), and every chapter figure either shown at the size it
was drawn (its 9 pt text stays 9 pt) or a link to the image at full size (a tap
enlarges it), and the explorers draw no text under their minimum
(``EXPLORER_MIN_TEXT_PX_PHONE``: chapter 8's 10 px, its grid's ids were about 6 px;
the charts of chapters 2, 3, 4 and 6 11 px, they drew 6.9 px; every explorer's smallest
text is printed). The code blocks on a phone
are printed, not asserted; run with ``-s`` to see every number.

Which HTML it checks: the directory named by ``POSENC_SITE_DIR`` if set; otherwise
``_build/html`` if it is newer than every source of the book (CI builds the book right
before ``pytest``); otherwise it builds the book into a temporary directory first (a
few minutes: it executes every notebook). It
skips, saying why, only where Playwright or a Chromium executable is missing (install
it with ``apt-get install chromium``) or where jupyter-book is not installed.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from freshness import why_not_fresh

ROOT = Path(__file__).resolve().parents[2]


BUILT = ROOT / "_build" / "html"


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers (CI) have a tiny /dev/shm
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
]


PAGE_TIMEOUT_MS = 60_000  # a loaded 2-core machine took over 30 s for one page


THEMES = ("light", "dark")


# axe-core, installed by `npm ci` (package.json at the repository root); the test injects
# it into each page itself, so the page requests nothing for it.
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"

# The axe rules the site must pass on every page: colour contrast and every ARIA rule.
AXE_ASSERTED = re.compile(r"^(color-contrast|aria-.*|label-content-name-mismatch)$")

# Item 5 of the reading issue: a page transfers at most this on a cold load (the chapters;
# and the other pages too since the single API page weighed 2.87 MB).
MAX_PAGE_BYTES = 2_500_000
# The search page, loaded with a query, fetches the pages it finds to show their snippets
# (5.6 MB for "rotation"): its weight is the hits', printed, not asserted.
SEARCH_PAGES = frozenset({"search.html"})


# ----------------------------------------------------------------------------- helpers
def _chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM_PATH"), "chromium", "chromium-browser"):
        if name and (path := shutil.which(name)):
            return path
    return None


def _html_ids(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return set(re.findall(r"""\s(?:id|name)=["']([^"']+)["']""", text))


def _pages(html: Path) -> list[str]:
    """Every HTML page of the site, as a path relative to its root (posix)."""
    skip = ("_static/", "_sources/", "_images/", "_downloads/")
    pages = sorted(
        p.relative_to(html).as_posix()
        for p in html.rglob("*.html")
        if not p.relative_to(html).as_posix().startswith(skip)
    )
    return pages


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


@dataclass
class SiteReport:
    """What the crawl saw; the tests below assert on it."""

    pages: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    offsite_requests: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    bad_images: list[str] = field(default_factory=list)
    math_problems: list[str] = field(default_factory=list)
    broken_links: list[str] = field(default_factory=list)
    theme_problems: list[str] = field(default_factory=list)
    search_problems: list[str] = field(default_factory=list)
    axe_violations: list[str] = field(default_factory=list)  # asserted rules
    axe_other: list[str] = field(default_factory=list)  # every other rule: reported only
    icon_problems: list[str] = field(default_factory=list)
    n_icons: int = 0
    n_images: int = 0
    n_formulas: int = 0
    n_internal_links: int = 0
    n_anchored_links: int = 0
    n_external_links: int = 0
    n_page_loads: int = 0

    def summary(self) -> dict:
        return {
            "pages": len(self.pages),
            "page_loads (1280 px and 390 px)": self.n_page_loads,
            "images": self.n_images,
            "formulas": self.n_formulas,
            "internal_links": self.n_internal_links,
            "of_which_with_anchor": self.n_anchored_links,
            "external_links_not_requested": self.n_external_links,
            "icons_shown": self.n_icons,
            "axe_violations (contrast, ARIA)": len(self.axe_violations),
            "axe_other_violations": len(self.axe_other),
        }


@dataclass
class ColdReport:
    """A first visit to every page, each in a fresh browser profile."""

    console_errors: list[str] = field(default_factory=list)
    offsite_requests: list[str] = field(default_factory=list)
    bytes_per_page: dict[str, int] = field(default_factory=dict)
    requests_per_page: dict[str, int] = field(default_factory=dict)
    biggest: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    layout: dict[str, dict] = field(default_factory=dict)  # _LAYOUT_JS at 1280 px
    layout_phone: dict[str, dict] = field(default_factory=dict)  # at 390 px, each page loaded at that width
    texts: dict[str, dict] = field(default_factory=dict)  # _TEXT_JS: text that may hold LaTeX
    explorer_text_phone: dict[str, list[dict]] = field(default_factory=dict)  # _EXPLORER_TEXT_JS at 390 px


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def site_dir() -> Path:
    """The built site: ``POSENC_SITE_DIR``, else ``_build/html`` when it is newer than every source.

    No fixture builds the book (a build takes minutes and executes every notebook): where
    the site is missing or older than a source, the site tests skip and say what to run,
    except under CI (``CI`` set), where README command 1 builds it first and a missing or
    stale site is a failure.
    """
    if os.environ.get("POSENC_SITE_DIR"):
        html = Path(os.environ["POSENC_SITE_DIR"]).resolve()
        assert (html / "index.html").is_file(), f"POSENC_SITE_DIR={html} has no index.html"
        return html
    why = why_not_fresh(BUILT)
    if why is None:
        return BUILT
    message = f"the built site is {why}: run `jupyter-book build . -n -W --keep-going` (README command 1) first"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser_base(site_dir: Path):
    """(browser, base URL): Chromium, and the built site served on 127.0.0.1."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -r requirements.txt)")
    chromium = _chromium()
    if chromium is None:
        pytest.skip(
            "no Chromium executable found (install Debian's with `apt-get install chromium`, "
            "or set CHROMIUM_PATH); the browser test of the site cannot run"
        )

    handler = functools.partial(_QuietHandler, directory=str(site_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                yield browser, base
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Crawl:
    """One pass over the site: every page loaded once at 1280 px and once at 390 px."""

    report: SiteReport
    cold: ColdReport
    # browser loads of each page at each width: (width, page) -> count
    loads: dict[tuple[int, str], int] = field(default_factory=dict)
    # the pages that hold explorers, kept open after the crawl for the explorer tests:
    # page name -> (Playwright page, the problems seen on it), and their contexts
    kept: dict[str, tuple[object, list[str]]] = field(default_factory=dict)
    contexts: list = field(default_factory=list)


# The crawl's open explorer pages, for the explorer tests (filled while the crawl fixture
# lives; when only explorer tests run, explorer_at opens each page itself).
_KEPT: dict[str, tuple[object, list[str]]] = {}


@pytest.fixture(scope="module")
def crawl(browser_base, site_dir: Path):
    browser, base = browser_base
    c = _crawl(browser, base, site_dir)
    _KEPT.update(c.kept)
    try:
        yield c
    finally:
        _KEPT.clear()
        for context in c.contexts:
            context.close()


@pytest.fixture(scope="module")
def report(crawl: Crawl) -> SiteReport:
    return crawl.report


@pytest.fixture(scope="module")
def cold(crawl: Crawl) -> ColdReport:
    return crawl.cold


# ----------------------------------------------------------------------------- the crawl
_IMAGES_JS = """
async () => {
  const imgs = Array.from(document.images);
  for (const img of imgs) { img.loading = 'eager'; }
  await Promise.all(imgs.map(img => img.complete ? null :
      new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r); })));
  return imgs.map(img => ({
      src: img.currentSrc || img.src,
      alt: (img.getAttribute('alt') || '').trim(),
      w: img.naturalWidth, h: img.naturalHeight, complete: img.complete}));
}
"""


_MATH_JS = """
async () => {
  const sources = document.querySelectorAll('span.math, div.math');
  if (!window.MathJax) {
    return {sources: sources.length, mathjax: false, containers: 0, unrendered: sources.length,
            errors: []};
  }
  const t0 = Date.now();
  while (!(MathJax.startup && MathJax.startup.promise)) {
    if (Date.now() - t0 > 20000) throw new Error('MathJax did not start');
    await new Promise(r => setTimeout(r, 50));
  }
  await MathJax.startup.promise;
  await document.fonts.ready;
  const unrendered = Array.from(sources).filter(el => !el.querySelector('mjx-container'));
  const errors = Array.from(document.querySelectorAll('mjx-merror, [data-mjx-error]'))
      .map(e => e.getAttribute('data-mjx-error') || e.textContent);
  // TeX errors and undefined macros (shown in red by MathJax's noundefined extension),
  // found in MathJax's own internal MathML of every typeset formula.
  for (const item of MathJax.startup.document.math) {
    const mml = MathJax.startup.toMML(item.root);
    if (/<merror|mathcolor="red"/.test(mml)) errors.push(String(item.math).slice(0, 80));
  }
  return {sources: sources.length, mathjax: true,
          containers: document.querySelectorAll('mjx-container').length,
          unrendered: unrendered.length,
          unrendered_text: unrendered.slice(0, 3).map(e => e.textContent.slice(0, 80)),
          errors: errors};
}
"""


def _router(base: str, theme: str, rep: SiteReport):
    """A route handler for a page visited outside the crawl (the config explorer's test):
    requests to the site go through, every other request is aborted and recorded."""

    def route(r):
        url = r.request.url
        if url.startswith(base) or url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            rep.offsite_requests.append(f"[{theme}] {url}")
            r.abort()

    return route


def _crawl(browser, base: str, html: Path) -> Crawl:
    """Every page once at 1280 px (a first visit, in a fresh profile) and, for the book's
    pages, once at 390 px; every check of this file is made on these loads.

    At 1280 px each page is loaded in the light theme (a fresh profile, the browser
    preferring light), measured and checked there, then switched to the dark theme with
    the page's own theme button (as a reader chooses it) and checked again: theme
    applied, images, formulas, icons and axe in both themes, without a second load.
    ``index.html`` redirects to the front page: the front page is loaded through it.
    The search page is loaded with a query (``search.html?q=rotation``)."""
    rep = SiteReport(pages=_pages(html))
    out = Crawl(report=rep, cold=ColdReport())
    ids_cache: dict[Path, set[str]] = {}
    checked_links: set[str] = set()
    via: dict[str, str] = {}  # page -> the redirecting page it is loaded through
    for name in rep.pages:
        source = (html / name).read_text(encoding="utf-8", errors="replace")
        redirect = re.search(r"""http-equiv=["']refresh["'][^>]*url=([^"'>]+)""", source, re.I)
        if not redirect:
            continue
        target = ((html / name).parent / redirect.group(1).strip()).resolve()
        if not target.is_file():
            rep.broken_links.append(f"{name}: redirect to missing {redirect.group(1)}")
        else:
            via[target.relative_to(html.resolve()).as_posix()] = name
    explorer_pages = {p for pages in _explorers_in_site(html).values() for p in pages}
    for name in rep.pages:
        if name in via.values():
            continue  # a redirect: checked when its target is loaded through it
        _visit_desktop(browser, base, html, name, via.get(name), out, ids_cache, checked_links,
                       keep=name in explorer_pages)
        if name.startswith(("notebooks/", "book/")):
            _visit_phone(browser, base, html, name, out)
    return out


def _count_load(out: Crawl, width: int, name: str) -> None:
    out.loads[(width, name)] = out.loads.get((width, name), 0) + 1
    out.report.n_page_loads += 1


_DARK_JS = """
() => {
  const button = document.querySelector('.theme-switch-button');
  if (!button) return 'no theme button';
  button.click();
  return document.documentElement.dataset.theme || '';
}
"""


def _visit_desktop(browser, base: str, html: Path, name: str, via: str | None, out: Crawl,
                   ids_cache: dict, checked_links: set, keep: bool) -> None:
    rep, cold = out.report, out.cold
    context = browser.new_context(color_scheme="light", viewport={"width": 1280, "height": 900},
                                  service_workers="block")
    problems: list[str] = []  # this page's own, handed to the explorer tests if it is kept
    theme = {"now": THEMES[0]}

    def route(r):
        url = r.request.url
        if url.startswith(base) or url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            line = f"[{theme['now']}] {name}: {url}"
            rep.offsite_requests.append(line)
            cold.offsite_requests.append(line)
            problems.append(f"off-site request: {url}")
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    loaded: dict[str, int] = {}

    def on_response(resp):
        if resp.status >= 400:
            rep.failed_requests.append(f"[{theme['now']}] {name}: {resp.url} -> HTTP {resp.status}")
        elif resp.url.startswith(base):
            f = _site_file(html, resp.url, base)
            if f is not None:
                loaded[urlsplit(resp.url).path] = f.stat().st_size

    def on_error(text: str) -> None:
        line = f"[{theme['now']}] {name}: {text}"
        rep.console_errors.append(line)
        cold.console_errors.append(line)
        problems.append(f"{name}: {text}")

    page.on("response", on_response)
    page.on("console", lambda m: m.type == "error" and on_error(m.text))
    page.on("pageerror", lambda e: on_error(str(e)))
    page.on("requestfailed", lambda req: req.url.startswith(base) and rep.failed_requests.append(
        f"[{theme['now']}] {name}: {req.url} ({req.failure})"))

    _count_load(out, 1280, name)
    url = base + ("search.html?q=rotation" if name == "search.html" else name)
    if via:
        page.goto(base + via)
        try:
            page.wait_for_url(base + name)
            page.wait_for_load_state("load")
        except Exception:  # noqa: BLE001 - reported as a failure, then the page itself is loaded
            rep.broken_links.append(f"{via}: the redirect was not followed")
            _count_load(out, 1280, name)
            page.goto(url, wait_until="load")
    else:
        page.goto(url, wait_until="load")

    _check_images(page, name, theme["now"], rep, count=True)
    _check_math(page, name, theme["now"], rep, count=True)
    try:
        page.wait_for_load_state("networkidle", timeout=10_000)
    except Exception:  # noqa: BLE001 - the sizes so far are still a lower bound
        pass
    cold.layout[name] = page.evaluate(_LAYOUT_JS)
    cold.texts[name] = page.evaluate(_TEXT_JS)
    cold.bytes_per_page[name] = sum(loaded.values())
    cold.requests_per_page[name] = len(loaded)
    cold.biggest[name] = sorted(((v, k) for k, v in loaded.items()), reverse=True)[:6]

    got = page.evaluate("() => document.documentElement.dataset.theme || ''")
    if got != THEMES[0]:
        rep.theme_problems.append(f"{name}: a first visit preferring {THEMES[0]} shows '{got}'")
    _check_icons(page, name, theme["now"], rep, count=True)
    if AXE.is_file():
        _run_axe(page, name, theme["now"], rep)
    for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
        _check_link(href, name, base, html, rep, ids_cache, checked_links)
    if name == "search.html":
        _check_search(page, rep)

    # the dark theme, chosen with the page's own button (no second load); checked once the
    # theme's colour transitions have ended (axe measured mid-transition colours otherwise)
    theme["now"] = THEMES[1]
    got = page.evaluate(_DARK_JS)
    if got != THEMES[1]:
        rep.theme_problems.append(f"{name}: asked for {THEMES[1]}, page shows '{got}'")
    try:
        page.wait_for_function("() => document.getAnimations().every(a => a.playState !== 'running')",
                               timeout=5_000)
    except Exception:  # noqa: BLE001 - an endless animation: measured as it is
        pass
    page.wait_for_timeout(300)
    _check_images(page, name, theme["now"], rep, count=False)
    _check_math(page, name, theme["now"], rep, count=False)
    _check_icons(page, name, theme["now"], rep, count=False)
    if AXE.is_file():
        _run_axe(page, name, theme["now"], rep)
    if keep:
        out.kept[name] = (page, problems)
        out.contexts.append(context)
    else:
        context.close()


def _visit_phone(browser, base: str, html: Path, name: str, out: Crawl) -> None:
    """The page loaded on a phone (MathJax breaks lines when it typesets, at that width)."""
    cold = out.cold
    phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2,
                                is_mobile=True, has_touch=True, service_workers="block")

    def route(r):
        if r.request.url.startswith(base) or r.request.url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            cold.offsite_requests.append(f"{name} (390 px): {r.request.url}")
            r.abort()

    phone.route("**/*", route)
    page = phone.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.on("console", lambda m: m.type == "error" and cold.console_errors.append(f"{name} (390 px): {m.text}"))
    page.on("pageerror", lambda e: cold.console_errors.append(f"{name} (390 px): {e}"))
    _count_load(out, 390, name)
    page.goto(base + name, wait_until="load")
    page.evaluate(_IMAGES_JS)
    page.evaluate(_MATH_JS)
    try:
        page.wait_for_load_state("networkidle", timeout=10_000)
    except Exception:  # noqa: BLE001 - measured as it is
        pass
    cold.layout_phone[name] = page.evaluate(_LAYOUT_JS)
    if page.locator(".posenc-explorer").count():
        try:
            page.wait_for_function("document.querySelectorAll('.posenc-explorer:not(.is-live)').length === 0",
                                   timeout=10_000)
        except Exception:  # noqa: BLE001 - measured as it is (an explorer that did not start has no text)
            pass
        page.evaluate(_OPEN_EXPLORER_DROPDOWNS_JS)  # measured opened, as a reader opens it
        cold.explorer_text_phone[name] = page.evaluate(_EXPLORER_TEXT_JS)
    phone.close()


def _check_images(page, name: str, theme: str, rep: SiteReport, count: bool) -> None:
    for img in page.evaluate(_IMAGES_JS):
        if count:
            rep.n_images += 1
        if not img["complete"] or img["w"] == 0 or img["h"] == 0:
            rep.bad_images.append(f"[{theme}] {name}: not loaded or empty: {img['src']}")
        if not img["alt"]:
            rep.bad_images.append(f"[{theme}] {name}: no alt text: {img['src']}")


def _check_math(page, name: str, theme: str, rep: SiteReport, count: bool) -> None:
    math = page.evaluate(_MATH_JS)
    if count:
        rep.n_formulas += math["containers"]
    if math["sources"] and not math["mathjax"]:
        rep.math_problems.append(f"{name}: has math but MathJax is not loaded")
    if math["unrendered"]:
        rep.math_problems.append(
            f"[{theme}] {name}: {math['unrendered']} formulas not rendered, e.g. {math.get('unrendered_text')}"
        )
    for err in math["errors"]:
        rep.math_problems.append(f"[{theme}] {name}: MathJax error: {err}")


def _check_icons(page, name: str, theme: str, rep: SiteReport, count: bool) -> None:
    icons = page.evaluate(_ICONS_JS)
    if count:
        rep.n_icons += icons["shown"]
    rep.icon_problems.extend(f"[{theme}] {name}: {p}" for p in icons["problems"])


# Icons are drawn by the theme's CSS from the Font Awesome web fonts it ships (the
# 1.5 MB fontawesome.js is not loaded): every icon shown has a glyph, and no icon font
# failed to load.
_ICONS_JS = """
async () => {
  await document.fonts.ready;
  const problems = [];
  let shown = 0;
  const icons = document.querySelectorAll('i[class*="fa-"], span[class*="fa-"]');
  for (const el of icons) {
    if (el.getClientRects().length === 0) continue;  // inside a closed menu
    shown += 1;
    const before = getComputedStyle(el, '::before');
    const r = el.getBoundingClientRect();
    if (!before.content || before.content === 'none' || before.content === 'normal' ||
        r.width < 1 || !/Font Awesome/.test(before.fontFamily)) {
      problems.push(`icon not drawn: ${el.className} (content ${before.content}, ` +
                    `width ${r.width}, font ${before.fontFamily})`);
    }
  }
  for (const f of document.fonts) {
    if (/Font Awesome/.test(f.family) && f.status === 'error') {
      problems.push(`icon font failed to load: ${f.family} ${f.weight}`);
    }
  }
  return {shown, problems};
}
"""


_AXE_JS = r"""
async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.map(v => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map(n => n.target.join(' ') + ' ' + (n.failureSummary || '')
                                .replace(/\s+/g, ' ').slice(0, 160))}));
}
"""


def _run_axe(page, name: str, theme: str, rep: SiteReport) -> None:
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE))
    for v in page.evaluate(_AXE_JS):
        nodes = v["nodes"]
        line = f"[{theme}] {name}: {v['id']} ({v['impact']}, {len(nodes)} nodes): {v['help']}; e.g. {nodes[:3]}"
        (rep.axe_violations if AXE_ASSERTED.match(v["id"]) else rep.axe_other).append(line)


# Reading item 6 (phones): the smallest text of each live explorer as a reader sees it
# (the font size times the scale of its SVG on the screen), as loaded and, for chapter 8's,
# also on its densest grid (3 frames of 8 x 8 tokens, M-RoPE ids, the longest labels).
_EXPLORER_TEXT_JS = """
() => {
  const smallest = (root) => {
    let px = null, text = '';
    for (const t of root.querySelectorAll('.explorer-live svg text')) {
      const svg = t.ownerSVGElement, m = svg && svg.getScreenCTM();
      if (!m || !t.textContent.trim() || svg.getBoundingClientRect().width === 0) continue;
      const size = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
      if (px === null || size < px) { px = Math.round(size * 10) / 10; text = t.textContent; }
    }
    // a canvas's text: its size in the canvas's units (data-text-px) times the canvas's scale
    for (const c of root.querySelectorAll('.explorer-live canvas[data-text-px]')) {
      const w = c.getBoundingClientRect().width;
      if (!w) continue;
      const size = parseFloat(c.dataset.textPx) * w / (c.width / window.devicePixelRatio);
      if (px === null || size < px) { px = Math.round(size * 10) / 10; text = '(canvas)'; }
    }
    return {px, text};
  };
  const out = [];
  for (const root of document.querySelectorAll('.posenc-explorer.is-live')) {
    const name = root.dataset.explorer;
    out.push(Object.assign({explorer: name, state: 'as loaded'}, smallest(root)));
    if (name === 'multidim') {
      for (const [n, v] of [['frames', 3], ['height', 8], ['width', 8]]) {
        const input = root.querySelector(`input[name="${n}"]`);
        if (input) { input.value = v; input.dispatchEvent(new Event('input', {bubbles: true})); }
      }
      out.push(Object.assign({explorer: name, state: '3 frames of 8 x 8'}, smallest(root)));
    }
  }
  return out;
}
"""


# Item 1 (display equations) and item 2 (code blocks) of the reading issue, and the rendered
# size of the chapters' figures (item 3), measured with every collapsed block of the
# article open, as a reader opens it: code cells tagged hide-input sit in a
# <details class="hide above-input"> ("Show code cell source", MyST-NB 1.x), solutions and
# dropdowns in <details> too. A closed <details> lays out its content at zero size in some
# browsers (and in others only when asked), so the script opens them, measures, and closes
# them again. A code block counts when it is shown (opened); an equation is cut when its
# formula, or its container with the equation number, is wider than its box (it scrolls
# or overflows).
_LAYOUT_JS = """
() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('main') ||
                  document.body;
  const closed = Array.from(article.querySelectorAll('details:not([open])'));
  for (const d of closed) d.open = true;
  try {
    const cut = [];
    const eqs = document.querySelectorAll('mjx-container[display="true"]');
    for (const c of eqs) {
      const m = c.querySelector('mjx-math');
      const box = c.closest('div.math') || c.parentElement;
      if (!m || !box) continue;
      const w = m.getBoundingClientRect().width, bw = box.getBoundingClientRect().width;
      if (w > bw + 1 || c.scrollWidth > c.clientWidth + 1 || box.scrollWidth > box.clientWidth + 1) {
        const no = box.querySelector('.eqno');
        cut.push({number: no ? no.textContent.replace(/[^0-9.()]/g, '') : '',
                  id: box.id || (box.closest('[id]') || {}).id || '',
                  formula: Math.round(w), box: Math.round(bw),
                  scroll: Math.round(Math.max(c.scrollWidth - c.clientWidth,
                                              box.scrollWidth - box.clientWidth))});
      }
    }
    // an equation MathJax broke into lines (mjx-linebox): on a desktop, a formula that
    // fits the column should be drawn whole
    const split = [];
    for (const c of eqs) {
      const lines = c.querySelectorAll('mjx-linebox').length;
      if (!lines) continue;
      const box = c.closest('div.math') || c.parentElement;
      const no = box.querySelector('.eqno');
      split.push({number: no ? no.textContent.replace(/[^0-9.()]/g, '') : '',
                  id: box.id || (box.closest('[id]') || {}).id || '', lines,
                  height: Math.round(c.getBoundingClientRect().height)});
    }
    const blocks = [];
    for (const p of article.querySelectorAll('div.highlight pre')) {
      if (p.getClientRects().length === 0) continue;  // not shown (e.g. display: none)
      const kind = p.closest('.cell_output, div.output') ? 'output' :
                   p.closest('.cell_input') ? 'input' : 'prose';
      const longest = p.textContent.split('\\n').reduce((a, b) => b.length > a.length ? b : a, '');
      blocks.push({kind, collapsed: closed.some(d => d.contains(p)),
                   scrolls: p.scrollWidth > p.clientWidth + 1,
                   over: p.scrollWidth - p.clientWidth, width: p.clientWidth,
                   chars: longest.length, line: longest.trim().slice(0, 50)});
    }
    const cs = getComputedStyle(article);
    const column = article.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    const figures = [];
    for (const img of article.querySelectorAll('img')) {
      if (img.naturalWidth <= 100 || img.getClientRects().length === 0) continue;  // icons
      const attr = (img.getAttribute('width') || '').trim();
      let intended = null;
      if (/^[0-9.]+(px)?$/.test(attr)) intended = parseFloat(attr);
      else if (/^[0-9.]+px$/.test(img.style.width)) intended = parseFloat(img.style.width);
      const holder = img.closest('figure[id]') || img.closest('[id]');
      const link = img.closest('a[href]');
      figures.push({id: holder ? holder.id : '', src: (img.getAttribute('src') || '').split('/').pop(),
                    rendered: img.getBoundingClientRect().width, intended,
                    natural: img.naturalWidth, collapsed: closed.some(d => d.contains(img)),
                    link: link ? link.href : null, url: img.currentSrc || img.src});
    }
    return {display_equations: eqs.length, cut_equations: cut, split_equations: split,
            document_width: document.documentElement.scrollWidth, viewport_width: window.innerWidth,
            code_blocks: blocks.length,
            scrolling_code_blocks: blocks.filter(b => b.scrolls).length, blocks,
            column, figures};
  } finally {
    for (const d of closed) d.open = false;
  }
}
"""


# Item 1 (no raw LaTeX in visible text): every text node of the page outside math and
# code that could hold LaTeX (the Python side applies RAW_LATEX), and the page title.
# A formula MathJax rendered (a .math element holding an mjx-container) is skipped; one
# it did not render is text the reader sees, and is checked.
_TEXT_JS = r"""
() => {
  const skip = 'mjx-container, script, style, pre, code, kbd, samp, textarea, noscript, svg, math';
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n.nodeValue;
    if (!/[\\^_$]/.test(t)) continue;
    const el = n.parentElement;
    if (!el || el.closest(skip)) continue;
    // the search page is loaded with a query: its hits quote the pages' source, formulas
    // included, as Sphinx's search shows them (the pages themselves are checked)
    if (el.closest('#search-results')) continue;
    const math = el.closest('.math');
    if (math && math.querySelector('mjx-container')) continue;
    const holder = el.closest('[id]');
    texts.push({text: t.replace(/\s+/g, ' ').trim().slice(0, 200),
                where: holder ? holder.id : el.tagName.toLowerCase(),
                shown: el.getClientRects().length > 0});
  }
  return {title: document.title, texts};
}
"""

# A LaTeX command (\sqrt, \text, \frac, \mathrm, \cdot, \le, \in, and \_ \{ \, ...), a
# super- or subscript group (^{, _{), display-math delimiters ($$, \[, \() or inline
# math left in dollars ($d$, $x_i$): what a reader sees when math is written as text or
# not rendered.
RAW_LATEX = re.compile(
    r"\\(?:[A-Za-z]+|[_{}%&#$,;:!|\[\]()])"
    r"|[\^_]\{"
    r"|\$\$"
    r"|(?<![\w$])\$[A-Za-z\\][^$\n]{0,60}?\$(?![\w$])"
)


def _site_file(html: Path, url: str, base: str) -> Path | None:
    rel = unquote(urlsplit(url).path)[1:]
    target = html / rel
    if rel == "" or target.is_dir():
        target = target / "index.html"
    return target if target.is_file() else None


def _check_search(page, rep: SiteReport) -> None:
    """The full-text search works offline: the query the page was loaded with
    (``search.html?q=rotation``) finds pages, chapter 4 among them."""
    try:
        page.wait_for_selector("ul.search li a", timeout=PAGE_TIMEOUT_MS)
    except Exception:  # noqa: BLE001 - reported as a failure below
        rep.search_problems.append("searching for 'rotation' found nothing")
        return
    hits = page.eval_on_selector_all("ul.search li a", "els => els.map(e => e.href)")
    if not any("04_rotations" in h for h in hits):
        rep.search_problems.append(f"searching for 'rotation' misses chapter 4: {hits[:5]}")


def _check_link(href, name, base, html, rep, ids_cache, checked) -> None:
    if href.startswith(("mailto:", "javascript:", "tel:")):
        return
    if not href.startswith(base):
        rep.n_external_links += 1
        return
    rep.n_internal_links += 1
    parts = urlsplit(href)
    fragment = unquote(parts.fragment)
    if fragment:
        rep.n_anchored_links += 1
    if href in checked:
        return
    checked.add(href)
    rel = unquote(parts.path)[1:]
    target = html / rel
    if rel == "" or target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        rep.broken_links.append(f"{name}: link to missing file {href}")
        return
    if fragment and target.suffix == ".html":
        if target not in ids_cache:
            ids_cache[target] = _html_ids(target)
        if fragment not in ids_cache[target]:
            rep.broken_links.append(f"{name}: anchor #{fragment} not found in {rel or 'index.html'}")


# ----------------------------------------------------------------------------- the tests
def _fmt(items: list[str], limit: int = 25) -> str:
    more = f"\n... and {len(items) - limit} more" if len(items) > limit else ""
    return "\n".join(items[:limit]) + more


def test_site_summary(report: SiteReport):
    """Prints what was checked (run with -s to see it) and sanity-checks the crawl."""
    print("\nbrowser test of the built site:", json.dumps(report.summary()))
    assert len(report.pages) >= 10, report.pages
    assert report.n_internal_links > 0


def test_each_page_loaded_once_per_width(crawl: Crawl):
    """Issue 29, item 5: the crawl loads each page once at 1280 px (both themes, every
    check, the explorers' tests) and each page of the book once at 390 px, not five times."""
    pages = [p for p in crawl.report.pages if (1280, p) in crawl.loads]
    twice = {f"{n} at {w} px": k for (w, n), k in sorted(crawl.loads.items()) if k > 1}
    phone = sum(1 for (w, _) in crawl.loads if w == 390)
    print(f"\npage loads: {sum(crawl.loads.values())} for {len(pages)} pages at 1280 px and {phone} at 390 px")
    assert len(pages) >= 10, sorted(crawl.loads)
    assert phone >= 10, sorted(crawl.loads)
    assert not twice, f"pages loaded more than once at one width: {twice}"


def test_no_console_errors(report: SiteReport):
    assert not report.console_errors, _fmt(report.console_errors)


def test_nothing_requested_off_site(report: SiteReport):
    assert not report.offsite_requests, _fmt(report.offsite_requests)


def test_every_request_to_the_site_succeeds(report: SiteReport):
    assert not report.failed_requests, _fmt(report.failed_requests)


def test_images_loaded_with_alt_text(report: SiteReport):
    assert not report.bad_images, _fmt(report.bad_images)


def test_formulas_rendered_offline(report: SiteReport):
    assert not report.math_problems, _fmt(report.math_problems)
    assert report.n_formulas > 0, "no formula rendered anywhere: is MathJax loaded?"


def test_internal_links_and_anchors_resolve(report: SiteReport):
    assert not report.broken_links, _fmt(report.broken_links)


def test_search_works_offline(report: SiteReport):
    assert not report.search_problems, _fmt(report.search_problems)


def test_dark_and_light_theme_applied(report: SiteReport):
    assert not report.theme_problems, _fmt(report.theme_problems)


def test_built_html_references_no_cdn(site_dir: Path):
    """Static check, complementing the browser: no script, stylesheet, font or image of
    any page (or of the site's own CSS) is loaded from another host."""
    pattern = re.compile(
        r"""<(?:script|img|iframe|source|audio|video)\b[^>]*\ssrc=["'](?:https?:)?//"""
        r"""|<link\b[^>]*\shref=["'](?:https?:)?//[^"']*["'][^>]*>""",
        re.I,
    )
    css_url = re.compile(r"""url\(\s*["']?(?:https?:)?//""", re.I)
    offenders = []
    for p in site_dir.rglob("*.html"):
        text = p.read_text(encoding="utf-8", errors="replace")
        for m in pattern.finditer(text):
            tag = m.group(0)
            # <link rel="canonical"/"alternate"> are plain links, not loaded resources.
            if tag.lower().startswith("<link") and re.search(
                r"""rel=["'](?:canonical|alternate|license)["']""", tag, re.I
            ):
                continue
            offenders.append(f"{p.relative_to(site_dir)}: {tag[:120]}")
    for p in (site_dir / "_static").rglob("*.css"):
        if css_url.search(p.read_text(encoding="utf-8", errors="replace")):
            offenders.append(f"{p.relative_to(site_dir)}: url(//...) in CSS")
    assert not offenders, _fmt(offenders)


def test_icons_drawn(report: SiteReport):
    assert not report.icon_problems, _fmt(report.icon_problems)
    assert report.n_icons > 0, "no icon shown anywhere: are the theme's icons gone?"


def test_accessibility_axe(report: SiteReport):
    """axe-core on every page, in both themes: no colour-contrast, ARIA or
    label-content-name-mismatch violation (a control's name differs from its text).
    Every other axe finding is printed (run with -s), not asserted."""
    if not AXE.is_file():
        pytest.skip(f"axe-core is not installed ({AXE} is missing): run `npm ci` at the repository root")
    if report.axe_other:
        print("\naxe findings not asserted:\n" + _fmt(report.axe_other, limit=40))
    assert not report.axe_violations, _fmt(report.axe_violations)


def test_first_visit_no_console_errors(cold: ColdReport):
    """A first visit to each page (empty cache, nothing in localStorage) logs no error."""
    assert not cold.console_errors, _fmt(cold.console_errors)
    assert not cold.offsite_requests, _fmt(cold.offsite_requests)


def test_pages_are_light(cold: ColdReport):
    """Each page transfers at most 2.5 MB on a cold load, images and fonts included
    (measured uncompressed, as served from disk: a real host's gzip only lowers it): the
    chapters, and every other page, the API reference's (one page per module) included,
    but the search page with a query (``SEARCH_PAGES``)."""
    chapters = {k: v for k, v in cold.bytes_per_page.items() if k.startswith("notebooks/")}
    api = [k for k in cold.bytes_per_page if k.startswith("book/api/")]
    print("\ncold load per page (bytes, requests):")
    for name, size in sorted(cold.bytes_per_page.items()):
        print(f"  {name}: {size / 1e6:.2f} MB in {cold.requests_per_page[name]} requests")
    assert len(chapters) >= 6 and len(api) >= 20, sorted(cold.bytes_per_page)
    heavy = [
        f"{k}: {v / 1e6:.2f} MB; largest: {[(round(s / 1e6, 2), u) for s, u in cold.biggest[k]]}"
        for k, v in cold.bytes_per_page.items()
        if v > MAX_PAGE_BYTES and k not in SEARCH_PAGES
    ]
    assert not heavy, _fmt(heavy)


# ----------------------------------------------------------------------------- layout
# Item 2: at most this share of the code blocks of a chapter (and of the whole book)
# scrolls sideways at 1280 px.
MAX_SCROLLING_SHARE = 0.25

# Item 3: the figures of the chapters are drawn for the column (posenc.book.plotting.use_book_style
# shows each as a PNG at twice the pixels, with its drawn size as width/height metadata,
# which MyST-NB writes as the <img> width).
NOT_SHRUNK = 0.97  # rendered width >= this times the width it was drawn at
MIN_DENSITY = 1.9  # image pixels >= this times the rendered width (2x PNGs)
MIN_COLUMN_SHARE = 0.75  # rendered width >= this times the column


def _chapter_pages(per_page: dict) -> dict:
    return {k: v for k, v in sorted(per_page.items()) if k.startswith("notebooks/")}


def _eq(c: dict) -> str:
    label = f"equation {c['number']}" if c["number"] else f"equation #{c['id'] or '?'} (unnumbered)"
    return (f"{label}: formula {c['formula']} px wide in a {c['box']} px box; "
            f"with its number it overflows by {c['scroll']} px")


def test_no_display_equation_cut(cold: ColdReport):
    """Item 1: at 1280 px no display equation of any page is cut: neither the formula nor
    the formula with its equation number is wider than the box it sits in (which then
    scrolls sideways or spills over). The numbers on a phone (390 px) are printed."""
    print("\ndisplay equations cut at 1280 px (cut/all):")
    for name, lay in sorted(cold.layout.items()):
        if lay["display_equations"]:
            print(f"  {name}: {len(lay['cut_equations'])}/{lay['display_equations']}")
    assert len(cold.layout) >= 10, sorted(cold.layout)
    cut = [f"{name}: {_eq(c)}" for name, lay in sorted(cold.layout.items()) for c in lay["cut_equations"]]
    assert not cut, f"{len(cut)} display equations cut at 1280 px:\n" + _fmt(cut, limit=60)


# Reading issue, item 1: MathJax 4 breaks a display equation to the width it measures
# for it; at 1280 px every formula of the book fits the column, so at most this many
# (across the book) may be drawn on more than one line. (Measured before the grid
# layout of div.math in posenc-site.css: 31 of 40, one factor per line.)
MAX_SPLIT_EQUATIONS_DESKTOP = 1


def test_display_equations_whole_on_a_desktop(cold: ColdReport, site_dir: Path):
    """Reading item 1: at 1280 px at most ``MAX_SPLIT_EQUATIONS_DESKTOP`` display equations
    of the whole book are broken into lines (MathJax's line boxes, ``mjx-linebox``)."""
    if not _serves_mathjax4(site_dir):
        pytest.skip("the site serves MathJax 3, which does not break display equations")
    split = [f"{name}: equation {c['number'] or '#' + c['id']} in {c['lines']} line boxes, {c['height']} px tall"
             for name, lay in sorted(cold.layout.items()) for c in lay.get("split_equations", [])]
    total = sum(lay["display_equations"] for lay in cold.layout.values())
    print(f"\ndisplay equations split at 1280 px: {len(split)}/{total}")
    for line in split:
        print("  " + line)
    assert total > 0
    assert len(split) <= MAX_SPLIT_EQUATIONS_DESKTOP, (
        f"{len(split)} of {total} display equations split into lines at 1280 px "
        f"(at most {MAX_SPLIT_EQUATIONS_DESKTOP}):\n" + _fmt(split, limit=60))


def test_no_page_pans_on_a_phone(cold: ColdReport):
    """Reading item 4: on a phone (390 px) no page of the book is wider than the screen
    (long inline code, addresses and names break instead), so nothing pans sideways."""
    wide = [f"{name}: {lay['document_width']} px wide on a {lay['viewport_width']} px screen"
            for name, lay in sorted(cold.layout_phone.items())
            if lay["document_width"] > lay["viewport_width"]]
    print(f"\npages wider than a 390 px phone: {len(wide)}/{len(cold.layout_phone)}")
    assert len(cold.layout_phone) >= 10, sorted(cold.layout_phone)
    assert not wide, f"{len(wide)} pages pan sideways on a phone:\n" + _fmt(wide)


# Reading item 6 (phones): the explorers whose text must be legible on a phone, and how
# small it may be there (px as drawn). Chapter 8's id labels were about 6 px; the charts of
# chapter 3 (dot product), 4 (RoPE scalings) and 6 (biases, aliasing, results) drew 6.9 px
# (13 px in a 640-unit box), chapter 2's table (a canvas) too.
EXPLORER_MIN_TEXT_PX_PHONE = {"multidim": 10, "dot": 11, "scaling": 11, "biases": 11, "alias": 11, "results": 11,
                              "sinusoidal": 11}


def test_explorer_text_legible_on_a_phone(cold: ColdReport):
    """Reading item 6: on a phone (390 px) the explorers of ``EXPLORER_MIN_TEXT_PX_PHONE``
    draw no text under their minimum (chapter 8's: its ids, the score map's axes, values
    and colour bar; the line charts' ticks and labels), as loaded and on chapter 8's
    densest grid. The smallest text of every other explorer is printed."""
    rows = [(page, r) for page, found in sorted(cold.explorer_text_phone.items()) for r in found]
    print("\nsmallest explorer text at 390 px:")
    for page, r in rows:
        print(f"  {page} {r['explorer']} ({r['state']}): {r['px']} px {r['text']!r}")
    assert {r["explorer"] for _, r in rows} >= set(EXPLORER_MIN_TEXT_PX_PHONE), rows
    small = [f"{page} {r['explorer']} ({r['state']}): {r['px']} px, under {EXPLORER_MIN_TEXT_PX_PHONE[r['explorer']]} "
             f"({r['text']!r})" for page, r in rows
             if r["explorer"] in EXPLORER_MIN_TEXT_PX_PHONE
             and (r["px"] is None or r["px"] < EXPLORER_MIN_TEXT_PX_PHONE[r["explorer"]])]
    assert not small, "explorer text too small on a phone:\n" + _fmt(small)


# Item 2 of the reading issue (phones): MathJax 4 breaks long display equations to the
# width of the screen; at most this many may still be cut at 390 px, across the book.
MAX_CUT_EQUATIONS_PHONE = 3


def _serves_mathjax4(site: Path) -> bool:
    return (site / "_static" / "mathjax" / "fonts" / "mathjax-newcm-font" / "chtml.js").is_file()


def test_display_equations_fit_a_phone(cold: ColdReport, site_dir: Path):
    """Item 2: on a phone (390 px, each page loaded at that width) at most
    ``MAX_CUT_EQUATIONS_PHONE`` display equations of the whole book are cut."""
    print("\ndisplay equations cut at 390 px (cut/all):")
    for name, lay in sorted(cold.layout_phone.items()):
        if lay["display_equations"]:
            cut = ", ".join(f"{c['number'] or '#' + c['id']} ({c['formula']}>{c['box']})" for c in lay["cut_equations"])
            print(f"  {name}: {len(lay['cut_equations'])}/{lay['display_equations']} {cut}")
    assert len(_chapter_pages(cold.layout_phone)) >= 6, sorted(cold.layout_phone)
    if not _serves_mathjax4(site_dir):
        pytest.skip("the site serves MathJax 3 (node_modules had no MathJax 4 when it was built: run `npm ci` "
                    "before the build), which cuts long equations on phones")
    cut = [f"{name}: {_eq(c)}" for name, lay in sorted(cold.layout_phone.items()) for c in lay["cut_equations"]]
    total = sum(lay["display_equations"] for lay in cold.layout_phone.values())
    assert len(cut) <= MAX_CUT_EQUATIONS_PHONE, (
        f"{len(cut)} of {total} display equations cut at 390 px (at most {MAX_CUT_EQUATIONS_PHONE}):\n" + _fmt(cut, limit=60))


def test_figures_legible_on_a_phone(cold: ColdReport):
    """Item 2: on a phone (390 px) every figure of every chapter is legible: shown at
    (nearly) the size it was drawn, so that its text keeps the 9 pt or more it was drawn
    with, or a link to the image itself, which a tap opens at full size."""
    chapters = _chapter_pages(cold.layout_phone)
    assert len(chapters) >= 6, sorted(cold.layout_phone)
    problems, n, scales = [], 0, []
    print("\nfigures at 390 px (rendered/intended: the scale of their text; + a tap enlarges):")
    for name, lay in chapters.items():
        shown = []
        for f in lay["figures"]:
            n += 1
            scale = f["rendered"] / f["intended"] if f["intended"] else None
            if scale is not None:
                scales.append(scale)
            tap = bool(f["link"]) and f["link"].split("#")[0] == f["url"]
            shown.append(f"{scale:.2f}" if scale is not None else "?")
            shown[-1] += "+" if tap else ""
            if not tap and (scale is None or scale < NOT_SHRUNK):
                problems.append(f"{name} #{f['id'] or f['src']}: shown at {scale or 0:.2f} of its drawn size "
                                f"and no link to the full image (link: {f['link']})")
        print(f"  {name} (column {lay['column']:.0f} px): {', '.join(shown)}")
    if scales:
        print(f"  scale on a phone: {min(scales):.2f} to {max(scales):.2f}")
    assert n > 0, "no figure found in the chapters at 390 px"
    assert not problems, f"{len(problems)} figures illegible on a phone:\n" + _fmt(problems, limit=60)


def test_code_blocks_fit(cold: ColdReport):
    """Item 2: at 1280 px at most a quarter of the code blocks of each chapter page, and
    of all chapters together, scroll sideways. A code block is every block of code the
    reader can see: the input of each code cell that is shown, collapsed ones
    (``hide-input``, measured opened) included, and code blocks written in the text; a
    cell's printed output is measured and printed, not counted. (A code cell tagged
    ``hide-input`` sits inside the toggle's box, 18 px narrower than a plain cell: 75
    monospace characters fit there, 77 in a plain cell.)"""
    chapters = _chapter_pages(cold.layout)
    assert len(chapters) >= 6, sorted(cold.layout)
    too_many, total, total_scrolling = [], 0, 0
    print("\ncode blocks scrolling sideways at 1280 px (scrolling/shown):")
    for name, lay in chapters.items():
        code = [b for b in lay["blocks"] if b["kind"] != "output"]
        outputs = [b for b in lay["blocks"] if b["kind"] == "output"]
        scrolling = [b for b in code if b["scrolls"]]
        total += len(code)
        total_scrolling += len(scrolling)
        print(
            f"  {name}: code {len(scrolling)}/{len(code)} "
            f"({sum(b['collapsed'] for b in scrolling)} of them collapsed, e.g. hide-input); "
            f"outputs {sum(b['scrolls'] for b in outputs)}/{len(outputs)} (not counted)"
        )
        if len(scrolling) > MAX_SCROLLING_SHARE * len(code):
            lines = "\n".join(
                f"    {b['kind']}{' (collapsed)' if b['collapsed'] else ''}: {b['chars']} characters, "
                f"{b['over']} px too wide for {b['width']} px: {b['line']!r}"
                for b in scrolling
            )
            too_many.append(f"{name}: {len(scrolling)} of {len(code)} code blocks scroll sideways "
                            f"(at most {int(MAX_SCROLLING_SHARE * len(code))}):\n{lines}")
    for name, lay in sorted(cold.layout_phone.items()):
        code = [b for b in lay["blocks"] if b["kind"] != "output"]
        print(f"  at 390 px (a phone; not asserted) {name}: {sum(b['scrolls'] for b in code)}/{len(code)}")
    print(f"  all chapters at 1280 px: {total_scrolling}/{total}")
    assert total > 0, "no code block found in the chapters"
    assert not too_many, "\n".join(too_many)
    assert total_scrolling <= MAX_SCROLLING_SHARE * total, (
        f"{total_scrolling} of the {total} code blocks of the chapters scroll sideways "
        f"(at most a quarter)"
    )


def test_no_raw_latex_in_text(cold: ColdReport):
    """Item 1: no page shows LaTeX as text: no text outside math and code (rendered
    formulas, <pre>, <code>, scripts and styles are skipped; a formula MathJax did not
    render is not) and no page title holds a LaTeX command (\\sqrt, \\text, \\frac,
    \\cdot, \\_ ...), a super- or subscript group (^{, _{) or math left between dollars."""
    assert len(cold.texts) >= 10, sorted(cold.texts)
    offenders = []
    for name, got in sorted(cold.texts.items()):
        if RAW_LATEX.search(got["title"]):
            offenders.append(f"{name}: page title {got['title']!r}")
        for t in got["texts"]:
            m = RAW_LATEX.search(t["text"])
            if m:
                shown = "" if t["shown"] else " (hidden)"
                offenders.append(f"{name} #{t['where']}{shown}: {m.group(0)!r} in {t['text'][:160]!r}")
    print(f"\nraw LaTeX in the text: {len(offenders)} places")
    assert not offenders, f"raw LaTeX shown as text in {len(offenders)} places:\n" + _fmt(offenders, limit=60)


def test_figures_drawn_for_the_column(cold: ColdReport):
    """Item 3 (rendered size): at 1280 px every figure of every chapter (an image of the
    article more than 100 pixels wide) is shown

    * at the size it was drawn: at least 97% of its intended width (the <img> width that
      MyST-NB writes from the PNG's width metadata), so its fonts render at the point
      size they were drawn at, not shrunk;
    * at twice the resolution: the image has at least 1.9 image pixels per CSS pixel;
    * within the column (not wider than it), and drawn for it: at least 75% of its width.

    Fonts: ``posenc.book.plotting.use_book_style`` warns ("figure not made for the book's column")
    on any figure wider than the column or with text under 9 pt when the figure is drawn,
    and ``tests/prose/test_notebook_layout.py`` asserts that no such warning is in the
    notebooks' outputs. On a phone (390 px): ``test_figures_legible_on_a_phone``."""
    chapters = _chapter_pages(cold.layout)
    assert len(chapters) >= 6, sorted(cold.layout)
    problems, n = [], 0
    print("\nfigures at 1280 px (rendered/intended CSS px, image px, column):")
    for name, lay in chapters.items():
        column = lay["column"]
        for f in lay["figures"]:
            n += 1
            r, want, natural = f["rendered"], f["intended"], f["natural"]
            label = f"{name} #{f['id'] or f['src']}"
            print(f"  {label}: {r:.0f}/{want} px, {natural} px, column {column:.0f}")
            if want is None:
                problems.append(f"{label}: no width on the image (the PNG has no width metadata); "
                                f"shown {r:.0f} px wide, {natural} image px")
            elif r < NOT_SHRUNK * want:
                problems.append(f"{label}: drawn {want:.0f} px wide, shown at {r:.0f} px "
                                f"(shrunk to {r / want:.0%}, fonts with it)")
            if natural < MIN_DENSITY * r:
                problems.append(f"{label}: {natural} image px for {r:.0f} px shown "
                                f"({natural / r:.2f}x, want 2x)")
            if r > column + 1:
                problems.append(f"{label}: {r:.0f} px wide, the column is {column:.0f} px")
            elif r < MIN_COLUMN_SHARE * column:
                problems.append(f"{label}: {r:.0f} px wide, under {MIN_COLUMN_SHARE:.0%} of the "
                                f"{column:.0f} px column")
    assert n > 0, "no figure found in the chapters"
    assert not problems, f"{len(problems)} figure problems:\n" + _fmt(problems, limit=60)


# ----------------------------------------------------------------------------- explorers
# Each explorer in the chapter that teaches its idea (issue 26, item 1); the explorers
# page (book/explore.html) is an index that links to each.
EXPLORER_PAGES = {
    "sinusoidal": "notebooks/02_sinusoidal.html",
    "dot": "notebooks/03_periodicity.html",
    "rope": "notebooks/04_rotations.html",
    "scaling": "notebooks/04_rotations.html",
    "biases": "notebooks/06_alternatives.html",
    "alias": "notebooks/06_alternatives.html",
    "results": "notebooks/06_alternatives.html",
    "multidim": "notebooks/08_multidim.html",
}
EXPLORERS = tuple(EXPLORER_PAGES)

_FINGERPRINT_JS = """
(root) => {
  const c = root.querySelector('.explorer-live canvas');
  const s = Array.from(root.querySelectorAll('.explorer-live svg')).map(e => e.innerHTML).join('');
  return (c ? c.toDataURL() : '') + s;
}
"""


def _explorers_in_site(site: Path) -> dict[str, list[str]]:
    """Which built page holds each explorer (name -> pages)."""
    found: dict[str, list[str]] = {}
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site).as_posix()
        if rel.startswith("_"):
            continue
        for name in re.findall(r'class="posenc-explorer" data-explorer="([^"]+)"', page.read_text(encoding="utf-8")):
            found.setdefault(name, []).append(rel)
    return found


_OPEN_EXPLORER_DROPDOWNS_JS = """
() => document.querySelectorAll('details:not([open])').forEach(d => {
  if (d.querySelector('.posenc-explorer')) d.open = true;
})
"""


@pytest.fixture(scope="module")
def explorer_at(browser_base, site_dir: Path):
    """A function name -> (page, problems): the page holding that explorer, its explorers
    started, every off-site request blocked. The crawl's own load of the page is used
    when the crawl ran (each page is loaded once per width); otherwise (only explorer
    tests selected) the page is opened here, in a fresh profile."""
    browser, base = browser_base
    where = _explorers_in_site(site_dir)
    contexts: list = []
    opened: dict[str, tuple[object, list[str]]] = {}

    def open_page(rel: str):
        context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
        contexts.append(context)
        problems: list[str] = []

        def route(r):
            if r.request.url.startswith(base) or r.request.url.startswith(("data:", "blob:")):
                r.continue_()
            else:
                problems.append(f"off-site request: {r.request.url}")
                r.abort()

        context.route("**/*", route)
        page = context.new_page()
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        page.on("console", lambda m: m.type == "error" and problems.append(f"{rel}: console error: {m.text}"))
        page.on("pageerror", lambda e: problems.append(f"{rel}: page error: {e}"))
        page.goto(base + rel, wait_until="load")
        return page, problems

    def get(name: str):
        if name not in where:
            pytest.fail(f"no page of the built site shows the explorer {name!r} (found: {sorted(where)})")
        rel = where[name][0]
        if rel not in opened:
            opened[rel] = _KEPT.get(rel) or open_page(rel)
            n = len([k for k, v in where.items() if rel in v])
            opened[rel][0].wait_for_function(f"document.querySelectorAll('.posenc-explorer.is-live').length >= {n}")
            # an explorer may sit in a collapsed dropdown (<details>): open it, as a reader does
            opened[rel][0].evaluate(_OPEN_EXPLORER_DROPDOWNS_JS)
        return opened[rel]

    yield get
    for context in contexts:
        context.close()


def test_explorers_in_their_chapters(site_dir: Path):
    """Every explorer sits in the chapter that teaches its idea, and the explorers page
    links to each there."""
    where = _explorers_in_site(site_dir)
    wrong = [f"{name}: in {where.get(name)}, expected in {page}" for name, page in EXPLORER_PAGES.items()
             if page not in where.get(name, [])]
    assert not wrong, "\n".join(wrong)
    index = site_dir / "book" / "explore.html"
    assert index.is_file(), "no explorers page (book/explore.html)"
    text = index.read_text(encoding="utf-8")
    links = set(re.findall(r'href="\.\./([^"#]+)#([^"]+)"', text))
    missing = []
    for name, page in EXPLORER_PAGES.items():
        html_text = (site_dir / page).read_text(encoding="utf-8")
        m = re.search(rf'data-explorer="{name}">\s*<figure[^>]*\bid="([^"]+)"', html_text)
        if not m or (page, m.group(1)) not in links:
            missing.append(f"{name} ({page}#{m.group(1) if m else '?'})")
    assert not missing, f"the explorers page does not link to: {missing} (links: {sorted(links)[:20]})"


@pytest.mark.parametrize("name", EXPLORERS)
def test_explorer_slider_redraws_figure(explorer_at, name):
    """Moving the explorer's first slider changes its state and redraws its figure,
    with no console error and no off-site request, in the chapter that shows it."""
    page, problems = explorer_at(name)
    root = page.locator(f'.posenc-explorer[data-explorer="{name}"]')
    assert root.locator("figure.explorer-static img").count() == 1, "no static figure for print"
    sliders = root.locator('.explorer-live input[type="range"]')
    selects = root.locator(".explorer-live select")
    assert sliders.count() + selects.count() >= 1, "no slider and no selector"
    before_state = root.get_attribute("data-state")
    before = root.evaluate(_FINGERPRINT_JS)
    if sliders.count():
        first = sliders.nth(0)
        lo, hi = float(first.get_attribute("min")), float(first.get_attribute("max"))
        current = float(first.input_value())
        first.fill(str(int(lo if current - lo > hi - current else hi)))
    else:
        first = selects.nth(0)
        values = first.evaluate("s => Array.from(s.options).map(o => o.value)")
        first.select_option([v for v in values if v != first.input_value()][-1])
    assert root.get_attribute("data-state") != before_state, "the slider did not change the explorer's state"
    assert root.evaluate(_FINGERPRINT_JS) != before, "the figure did not change"
    assert not problems, _fmt(problems)


def test_explorer_rope_score_depends_on_offset_only(explorer_at):
    page, problems = explorer_at("rope")
    root = page.locator('.posenc-explorer[data-explorer="rope"]')
    inputs = {n: root.locator(f'input[name="{n}"]') for n in ("m", "n", "shift")}
    inputs["m"].fill("9")
    inputs["n"].fill("4")
    inputs["shift"].fill("0")
    score = float(root.get_attribute("data-score"))
    inputs["shift"].fill("137")
    assert abs(float(root.get_attribute("data-score")) - score) < 1e-9
    inputs["n"].fill("5")
    assert abs(float(root.get_attribute("data-score")) - score) > 1e-3
    assert not problems, _fmt(problems)


def test_explorer_numbers_match_posenc(explorer_at):
    """The script's formulas give posenc's numbers (float64 on both sides)."""
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    import posenc

    page, _ = explorer_at("rope")
    js = "window.posencExplorers"
    for d, base in ((96, 10000.0), (7, 100.0), (128, 500000.0)):
        got = np.array(page.evaluate(f"{js}.frequencies({d}, {base})"))
        np.testing.assert_allclose(got, posenc.sinusoidal_frequencies(d, base=base), rtol=1e-13)
        got = np.array(page.evaluate(f"[...Array(64).keys()].map(p => {js}.encoding(p, {d}, {base}))"))
        np.testing.assert_allclose(got, posenc.sinusoidal_encoding(64, d, base=base), rtol=0, atol=1e-12)

    pe = posenc.sinusoidal_encoding(np.arange(37 - 100, 37 + 101), 64)
    got = np.array(page.evaluate(f"{js}.dotCurve(37, 64, 10000, 100)"))
    np.testing.assert_allclose(got, pe @ pe[100], rtol=0, atol=1e-10)

    q, k = page.evaluate(f"[{js}.Q, {js}.K]")
    for m, n in ((7, 3), (120, 116), (0, 50)):
        x = torch.tensor([q, k], dtype=torch.float64)[None, None]  # (1, 1, 2, 8): two positions
        rot = posenc.apply_rotary(x, [m, n], layout="interleaved")[0, 0].numpy()
        got = page.evaluate(f"{js}.ropeScore({js}.Q, {js}.K, {m}, {n}, 10000)")
        assert abs(got - float(rot[0] @ rot[1])) < 1e-12

    specs = {
        "linear": {"factor": 8.0},
        "ntk": {"factor": 4.0},
        "yarn": {"factor": 16.0, "original_max_position_embeddings": 8192},
        "llama3": {"factor": 8.0, "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0},
    }
    for kind, params in specs.items():
        for dim, base in ((128, 500000.0), (64, 10000.0)):
            want = posenc.rotary_frequencies(dim, base=base, scaling={"type": kind, **params})
            got = np.array(page.evaluate(f"{js}.scaledFrequencies('{kind}', {dim}, {base}, {json.dumps(params)})"))
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"{kind}, dim {dim}, base {base}")


def test_explorer_biases_and_alias_match_posenc(explorer_at):
    """Chapter 6's explorers: ALiBi's slopes (float32, exactly), T5's buckets (exactly, for
    both variants and several sizes), RoPE's score against the distance (to 1e-12) and the
    alias peaks (where the marked pair is back at its angle at d0) are posenc's."""
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    import posenc

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import explorers as ext
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    page, problems = explorer_at("biases")
    js = "window.posencExplorers"
    got = page.evaluate(f"[...Array(64).keys()].map(i => {js}.alibiSlopes(i + 1))")
    for n, slopes in enumerate(got, start=1):
        np.testing.assert_array_equal(np.array(slopes, dtype=np.float32), posenc.alibi_slopes(n).numpy(),
                                      err_msg=f"ALiBi slopes, {n} heads")
    offsets = torch.arange(-600, 601)
    for bidi in (True, False):
        for nb, md in ((32, 128), (8, 20), (64, 512), (10, 33), (4, 16)):
            want = posenc.t5_relative_bucket(offsets, bidirectional=bidi, num_buckets=nb, max_distance=md)
            got = page.evaluate(f"[...Array(1201).keys()].map(i => {js}.t5Bucket(i - 600, {str(bidi).lower()}, {nb}, {md}))")
            diff = np.nonzero(np.array(got) != want.numpy())[0]
            assert diff.size == 0, f"T5 buckets differ (bidirectional={bidi}, {nb} buckets, max {md}) at offsets {offsets[diff][:10].tolist()}"
    for dh, base, d0 in ((64, 10000.0, 10), (8, 100.0, 0), (256, 500000.0, 73)):
        ds = list(range(0, 600, 3))
        got = np.array(page.evaluate(f"{js}.aliasScore({dh}, {base}, {d0}, {json.dumps(ds)})"))
        np.testing.assert_allclose(got, ext.alias_score(dh, base, d0, ds), rtol=0, atol=1e-12)
        w = posenc.rotary_frequencies(dh, base=base)
        for j in (0, 1, dh // 4):
            peaks = np.array(page.evaluate(f"{js}.aliasPeaks({dh}, {base}, {j}, {d0}, 0, 2000)"))
            period = 2 * np.pi / w[j]
            want = [d0 + m * period for m in range(-int(d0 // period) - 1, int(2000 // period) + 2)
                    if m != 0 and 0 <= d0 + m * period <= 2000]
            np.testing.assert_allclose(peaks, want, rtol=1e-12, atol=1e-9)
            assert np.allclose(np.cos(w[j] * (peaks - d0)), 1.0, atol=1e-9)
    assert not problems, _fmt(problems)


def test_explorer_alias_reports_the_highest_other_peak(explorer_at):
    """Reading item 6: figure 6.3's explorer reports the whole head's highest local
    maximum other than d0 (the reader review found it reporting 0.783 at d 6.8, the flank
    of the peak at d0; the highest other peak of that head is 0.736 at d 4.04 and 15.96),
    as posenc's frequencies give it: the score to 1e-9, at a maximum (slope 0)."""
    np = pytest.importorskip("numpy")
    optimize = pytest.importorskip("scipy.optimize")
    import posenc

    page, problems = explorer_at("alias")
    js = "window.posencExplorers"
    for dh, base, d0, hi in ((64, 1e4, 10, 256), (16, 100.0, 0, 512), (128, 5e5, 73, 1024), (8, 1e4, 40, 64)):
        w = posenc.rotary_frequencies(dh, base=base)
        f = lambda d: float(np.mean(np.cos(w * (d - d0))))  # noqa: E731
        grid = np.arange(0, hi + 1e-9, 0.01)
        v = np.cos(np.outer(grid - d0, w)).mean(axis=1)
        peaks = []
        for i in np.nonzero((v[1:-1] >= v[:-2]) & (v[1:-1] >= v[2:]))[0] + 1:
            if grid[i - 1] <= d0 <= grid[i + 1]:
                continue  # the peak at d0
            r = optimize.minimize_scalar(lambda d: -f(d), bounds=(grid[i - 1], grid[i + 1]), method="bounded",
                                         options={"xatol": 1e-10})
            peaks.append((-r.fun, r.x))
        got, at = page.evaluate(f"{js}.aliasBestOther({dh}, {base}, {d0}, 0, {hi})")
        want = max(p[0] for p in peaks)
        assert abs(got - want) < 1e-9, (dh, base, d0, got, want)
        assert any(abs(at - x) < 1e-4 and abs(y - want) < 1e-9 for y, x in peaks), (dh, base, d0, at, peaks[:5])
        assert abs(float(np.mean(w * np.sin(w * (at - d0))))) < 1e-6, "not at a maximum: on a flank"
    got, at = page.evaluate(f"{js}.aliasBestOther(64, 10000, 10, 0, 256)")
    assert round(got, 3) == 0.736 and round(at, 2) == 4.04, (got, at)
    root = page.locator('.posenc-explorer[data-explorer="alias"]')
    for name, value in (("head_dim", "64"), ("base", "4"), ("d0", "10"), ("range", "256")):
        root.locator(f'input[name="{name}"]').fill(value)
    note = root.locator(".explorer-readout").inner_text()
    assert "0.736 at d \u2248 4.04" in note, note
    assert not problems, _fmt(problems)


def test_explorer_biases_numbers_read_plainly(explorer_at):
    """Reading item 6: ALiBi's subtracted amounts are printed to three significant digits
    ("10.0", "14.1"), never "10.000", which reads as ten thousand."""
    page, problems = explorer_at("biases")
    root = page.locator('.posenc-explorer[data-explorer="biases"]')
    root.locator('input[name="distance"]').fill("20")
    for heads, first, last in (("12", "10.0", "0.0781"), ("16", "14.1", "0.0781"), ("8", "10.0", "0.0781")):
        root.locator('input[name="heads"]').fill(heads)
        note = root.locator(".explorer-readout").inner_text()
        assert f"head 1 subtracts {first} from the score and the gentlest head {last} " in note, note
    assert page.evaluate("[10, 14.142, 0.078125, 150].map(window.posencExplorers.sig)") == ["10.0", "14.1", "0.0781", "150.0"]
    assert not problems, _fmt(problems)


def test_explorer_multidim_matches_posenc(explorer_at):
    """Chapter 8's explorer: the ids of its grid are posenc.mrope_position_ids (and the
    1-D and 2-D orders), its score maps are posenc.book.vision.query_scores (axial RoPE,
    RoPE-Mixed at a given direction, 2-D sin-cos) to 1e-12."""
    np = pytest.importorskip("numpy")
    import math

    import posenc
    from posenc.book.vision import query_scores

    page, problems = explorer_at("multidim")
    js = "window.posencExplorers.multidim"
    for t, h, w, text in ((1, 3, 5, 2), (3, 2, 4, 7), (2, 8, 1, 0)):
        want = posenc.mrope_position_ids([("text", max(text, 1)), ("video", (t, 2 * h, 2 * w))])[:, max(text, 1):]
        want = want - max(text, 1) + text
        got = page.evaluate(f"{js}.gridIds({t}, {h}, {w}, 'mrope', {text})")
        assert got == want.T.tolist(), (t, h, w, text)
        flat = page.evaluate(f"{js}.gridIds({t}, {h}, {w}, '1d', {text})")
        assert [v[0] for v in flat] == list(range(text, text + t * h * w))
    # with 1-D ids the map is the score over the index offset: RoPE over the index (base
    # 100, posenc.apply_rotary on all-ones vectors) or the 1-D sin-cos table
    torch = pytest.importorskip("torch")
    for scheme, (h, w), q in (("rope_axial", (4, 6), (1, 2)), ("rope_mixed", (3, 5), (2, 4)), ("sincos_2d", (5, 3), (0, 1))):
        n = h * w
        if scheme == "sincos_2d":
            t = posenc.sinusoidal_encoding(n, 32)
            want = t @ t[q[0] * w + q[1]]
        else:
            ones = torch.ones(1, 1, n, 32, dtype=torch.float64)
            k = posenc.apply_rotary(ones, torch.arange(n), base=100.0, layout="interleaved")[0, 0]
            want = (k @ k[q[0] * w + q[1]]).numpy()
        got = np.array(page.evaluate(f"{js}.scoreMap('{scheme}', {h}, {w}, {q[0]}, {q[1]}, 32, 0.5, '1d')"))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=f"1-D ids, {scheme}")
    for scheme, (h, w), q, angle in (("rope_axial", (4, 6), (1, 2), 0.0), ("rope_mixed", (5, 7), (2, 3), math.pi / 6),
                                     ("rope_mixed", (8, 8), (0, 7), 2.0), ("sincos_2d", (3, 8), (0, 5), 0.0)):
        got = np.array(page.evaluate(f"{js}.scoreMap('{scheme}', {h}, {w}, {q[0]}, {q[1]}, 32, {angle})"))
        want = query_scores(scheme, (h, w), q, angle=angle if scheme == "rope_mixed" else None)
        np.testing.assert_allclose(got, want.ravel(), rtol=0, atol=1e-12)
    # the page: categorical choices are selectors; choosing 1-D ids redraws the score map
    # (it once only relabelled the grid); the map has its axes, query cell and colour bar
    root = page.locator('.posenc-explorer[data-explorer="multidim"]')
    assert root.locator('select[name="ids"]').count() == 1 and root.locator('select[name="scheme"]').count() == 1
    assert root.locator('input[type="range"][name="ids"], input[type="range"][name="scheme"]').count() == 0
    root.locator('select[name="scheme"]').select_option("rope_mixed")
    root.locator('select[name="ids"]').select_option("mrope")
    maps = root.locator(".explorer-live svg")
    before = maps.nth(1).inner_html()
    root.locator('select[name="ids"]').select_option("1d")
    assert maps.nth(1).inner_html() != before, "choosing 1-D ids left the score map unchanged"
    assert "1-D ids" in root.locator(".explorer-readout").inner_text()
    assert maps.nth(1).locator("rect.query-cell").count() == 1
    labels = maps.nth(1).locator("text.label").all_text_contents()
    assert {"row", "column", "score"} <= set(labels), labels
    root.locator('select[name="ids"]').select_option("2d")
    root.locator('select[name="scheme"]').select_option("sincos_2d")
    note = root.locator(".explorer-readout").inner_text()
    assert "2-D sin-cos" in note and "Axial" not in note, note
    assert not problems, _fmt(problems)


def test_explorer_table_has_axes_and_colour_scale(explorer_at):
    """Reading item 6: chapter 2's table explorer draws its axes (positions, dimensions)
    and a colour scale beside the heat map: the canvas holds the theme's ink outside the
    map and the bar's colours from red (+1) to blue (-1)."""
    page, problems = explorer_at("sinusoidal")
    root = page.locator('.posenc-explorer[data-explorer="sinusoidal"]')
    got = root.evaluate("""r => {
      const c = r.querySelector('.explorer-live canvas'), ctx = c.getContext('2d');
      const px = (x, y) => Array.from(ctx.getImageData(x, y, 1, 1).data);
      let ink = 0;  // painted pixels in the left margin (tick labels, axis title)
      const left = ctx.getImageData(0, 0, 56, c.height).data;
      for (let i = 3; i < left.length; i += 4) if (left[i] > 0) ink++;
      const bx = c.width - 86 + 22 + 8;
      return {ink, top: px(bx, 12), mid: px(bx, 10 + (c.height - 56) / 2), bottom: px(bx, c.height - 48)};
    }""")
    assert got["ink"] > 200, got
    assert got["top"][:3] == [255, got["top"][1], got["top"][1]] and got["top"][1] < 30, got
    assert min(got["mid"][:3]) > 240, got
    assert got["bottom"][2] == 255 and got["bottom"][0] < 30, got
    assert not problems, _fmt(problems)




def test_explorer_results_match_the_saved_results(explorer_at):
    """Chapter 6's results explorer draws the saved results: its data are the mean
    accuracy per position of alternatives_v2.json (shipped with posenc.book), as the chapter's
    figure of positions averages them, and every task and variant can be chosen."""
    np = pytest.importorskip("numpy")
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import explorers as ext
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    page, problems = explorer_at("results")
    root = page.locator('.posenc-explorer[data-explorer="results"]')
    got = root.evaluate("r => window.posencExplorers.resultsData(r)")
    want = ext.results_data()
    assert got["schemes"] == want["schemes"] and got["train_len"] == want["train_len"]
    for task, variants in want["curves"].items():
        for variant, curves in variants.items():
            for scheme, curve in curves.items():
                a = np.array([np.nan if v is None else v for v in got["curves"][task][variant][scheme]], dtype=float)
                b = np.array([np.nan if v is None else v for v in curve], dtype=float)
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-12, err_msg=f"{task}/{variant}/{scheme}")
    for task in want["tasks"]:
        for variant in ("plain", "bos"):
            root.locator('select[name="task"]').select_option(task)
            root.locator('select[name="variant"]').select_option(variant)
            assert root.get_attribute("data-state") == f"{task}/{variant}"
            assert root.locator(".explorer-live svg path.series").count() == len(want["curves"][task][variant])
    assert not problems, _fmt(problems)


def test_icon_fonts_hold_every_icon_shown(site_dir: Path):
    """The build cuts the Font Awesome fonts down to the icons the site uses
    (book/_ext/offline_site.py): every icon named in a page still has its glyph."""
    ttlib = pytest.importorskip("fontTools.ttLib")
    css = (site_dir / "_static" / "styles" / "pydata-sphinx-theme.css").read_text(encoding="utf-8")
    rules = re.findall(r'((?:\.fa-[a-z0-9-]+:(?:before|after),?)+)\{content:"((?:\\[0-9a-fA-F]+|\\.|[^"\\])*)"\}', css)
    char = {}
    for selectors, content in rules:
        m = re.fullmatch(r"\\([0-9a-fA-F]+)", content)
        c = chr(int(m.group(1), 16)) if m else content.lstrip("\\")
        for sel in selectors.split(","):
            if sel:
                char[sel.split(":")[0][1:]] = c
    fonts = sorted((site_dir / "_static" / "vendor" / "fontawesome" / "webfonts").glob("*.woff2"))
    assert fonts, "no icon font in the site"
    glyphs: set[int] = set()
    for f in fonts:
        glyphs |= set(ttlib.TTFont(f).getBestCmap() or {})
    used = set()
    for page in _pages(site_dir):
        used |= set(re.findall(r"\bfa-[a-z0-9]+(?:-[a-z0-9]+)*", (site_dir / page).read_text(encoding="utf-8")))
    icons = {n for n in used if n in char}
    assert len(icons) >= 10, sorted(used)
    missing = sorted(n for n in icons if ord(char[n][0]) not in glyphs)
    assert not missing, f"icons without a glyph in the shipped fonts: {missing}"


def test_front_page_has_its_figure(site_dir: Path):
    """Reading item 7: the front page shows a picture: the figure that
    book/_ext/front_figure.py draws with posenc at build time (no network), with its alt
    text, at twice the pixels of its width (the crawl checks that it loads)."""
    import html as html_lib

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import front_figure
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    text = (site_dir / "book" / "intro.html").read_text(encoding="utf-8")
    imgs = [m.group(0) for m in re.finditer(r"<img\b[^>]*>", text) if "front" in m.group(0)]
    assert len(imgs) == 1, imgs
    alt = html_lib.unescape(re.search(r'alt="([^"]*)"', imgs[0]).group(1))
    assert alt == front_figure.ALT, alt
    src = (site_dir / "book" / re.search(r'src="([^"]+)"', imgs[0]).group(1)).resolve()
    width = int(re.search(r'width:\s*(\d+)px|width="(\d+)', imgs[0]).group(1) or 0) or front_figure.WIDTH_PX
    png = src.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = int.from_bytes(png[16:20], "big")
    assert pixels >= 1.9 * width, (pixels, width)


def test_citations_say_et_al(site_dir: Path):
    """Reading item 8: a work whose BibTeX author list is truncated ("Dubey, Abhimanyu and
    others") is cited "Dubey et al." like every other, not "Dubey and others"
    (book/_ext/bib_style.py); the bibliography keeps its full author list."""
    bad = []
    for page in sorted(site_dir.glob("notebooks/*.html")) + sorted(site_dir.glob("book/*.html")):
        if page.name == "bibliography.html":
            continue
        text = re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8"))
        bad += [f"{page.name}: ...{m.group(0)}..." for m in re.finditer(r"[A-Z]\w+ and others[ ,]*[\[(,]?\s*\d{4}", text)]
    assert not bad, "citations reading 'and others':\n" + "\n".join(bad[:20])
