"""Sphinx extension of the book: the whole book as one PDF, printed offline by Chromium.

When the HTML build has finished, every page of the table of contents (front page,
chapters, reference pages, in the order of ``_toc.yml``) is served on 127.0.0.1 and
printed to PDF by headless Chromium (Debian's, or Playwright's own), after MathJax has
typeset it; the pages are joined into ``_build/html/posenc-book.pdf`` with one bookmark
per page. The print style sheet (``book/_static/posenc-site.css``) prints the solutions
expanded, and the explorers as their static figures. Every page of the site links to the
PDF from its footer (``offline_site.py``).

Nothing is fetched from the network: the browser aborts every request that is not to the
local server. Where Playwright, Chromium or pypdf is missing, the PDF is not built and
the build says so (an info message, not a warning, so that ``-W`` builds still pass; the
test ``tests/site/test_pdf.py`` then skips, saying why).
"""

from __future__ import annotations

import functools
import http.server
import io
import os
import shutil
import threading
import time
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

PDF_NAME = "posenc-book.pdf"

_CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions"]

_READY_JS = """
async () => {
  for (const img of document.images) { img.loading = 'eager'; }
  await Promise.all(Array.from(document.images).map(img => img.complete ? null :
      new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r); })));
  if (window.MathJax) {
    const t0 = Date.now();
    while (!(MathJax.startup && MathJax.startup.promise)) {
      if (Date.now() - t0 > 20000) break;
      await new Promise(r => setTimeout(r, 50));
    }
    if (MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  }
  await document.fonts.ready;
  return document.title;
}
"""


def _chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM_PATH"), "chromium", "chromium-browser"):
        if name and (path := shutil.which(name)):
            return path
    return None


def book_pages(env) -> list[str]:
    """The documents of the book in table-of-contents order, the root first."""
    order: list[str] = []

    def walk(doc: str) -> None:
        if doc in order:
            return
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(env.config.root_doc)
    return order


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


def build_pdf(outdir: Path, pages: list[str], titles: dict[str, str] | None = None) -> Path | None:
    """Print ``pages`` (docnames) of the HTML site in ``outdir`` into one PDF; returns its path."""
    try:
        from playwright.sync_api import sync_playwright
        from pypdf import PdfReader, PdfWriter
    except ImportError as err:
        logger.info(f"[pdf] not built: {err.name} is not installed")
        return None
    chromium = _chromium()
    handler = functools.partial(_Quiet, directory=str(outdir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    writer = PdfWriter()
    t0 = time.time()
    try:
        with sync_playwright() as pw:
            try:
                browser = pw.chromium.launch(executable_path=chromium, args=_CHROMIUM_ARGS)
            except Exception as err:  # noqa: BLE001 - no browser: no PDF, said plainly
                logger.info(f"[pdf] not built: Chromium cannot be started ({str(err).splitlines()[0]})")
                return None
            try:
                context = browser.new_context(color_scheme="light", service_workers="block")
                context.add_init_script("try { localStorage.setItem('mode', 'light'); } catch (e) {}")
                context.route(
                    "**/*",
                    lambda r: r.continue_() if r.request.url.startswith((base, "data:", "blob:")) else r.abort(),
                )
                page = context.new_page()
                page.set_default_timeout(60_000)
                for doc in pages:
                    page.goto(base + doc + ".html", wait_until="load")
                    title = page.evaluate(_READY_JS)
                    data = page.pdf(
                        format="A4",
                        print_background=True,
                        margin={"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
                    )
                    start = len(writer.pages)
                    writer.append(PdfReader(io.BytesIO(data)))
                    label = (titles or {}).get(doc) or title.split(" \u2014 ")[0].split(" - ")[0]
                    writer.add_outline_item(label, start)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    writer.add_metadata({"/Title": "Positional Encodings in Transformers", "/Author": "The posenc book authors"})
    target = outdir / PDF_NAME
    with open(target, "wb") as fh:
        writer.write(fh)
    logger.info(f"[pdf] {target.name}: {len(writer.pages)} pages from {len(pages)} documents in {time.time() - t0:.0f} s")
    return target


def _build_finished(app, exc) -> None:
    if exc is not None or app.builder.name != "html":
        return
    env = app.env
    pages = [d for d in book_pages(env) if (Path(app.outdir) / f"{d}.html").is_file()]
    titles = {d: env.titles[d].astext() for d in pages if d in env.titles}
    build_pdf(Path(app.outdir), pages, titles)


def setup(app):
    # After offline_site's rewrites of the pages (build-finished, priority 900).
    app.connect("build-finished", _build_finished, priority=950)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
