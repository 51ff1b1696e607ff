"""Sphinx extension of the book: the whole book as one PDF, printed offline by Chromium.

When the HTML build has finished, every page of the table of contents (front page,
chapters, reference pages, in the order of ``_toc.yml``) but those of ``WEB_ONLY`` (the
laboratory's API reference) is served on 127.0.0.1 and
printed to PDF by headless Chromium (Debian's, or Playwright's own), after MathJax has
typeset it; the pages are joined into ``_build/html/posenc-book.pdf``, which reads like
a book:

* a cover: title, authors, version and release date (``CITATION.cff``), licences, the
  date it was printed;
* contents with the page number of every document and, indented under it, of each of its
  sections;
* the chapters' numbers in their headings (as the site shows them) and in the bookmarks
  (one per document, with one under it per section);
* beside the whole book, each chapter as a PDF of its own (``posenc-book-ch06.pdf``,
  ``chapter_pdfs``): its pages as the book prints them, its bookmarks, its own links (a
  teacher printing one chapter pays for that chapter only);
* links that stay in the book: every destination is named for its document
  (``notebooks/06_alternatives#summary``, so one chapter's "Summary" is not another's), and
  a link to another page of the book goes to its destination there, not to the local
  server that printed it, and a link to a page left out of the PDF (``WEB_ONLY``) to that
  page on the published site (``link_pdf``);
* code lines that wrap on paper indented under their start; the figures' plotting code,
  hidden on the web (``hide-input``), left out; a code cell's frame broken with its code
  (the print style sheet);
* a running head (the document's title) and the page number on every page after the
  cover (an overlay printed by Chromium, merged onto each page);
* solutions and other toggled boxes expanded, the explorers as their static figures (the
  print style sheet, ``book/_static/posenc-site.css``).

Every page of the site links to the PDF from its footer, and a chapter's page to the
chapter's own PDF (``offline_site.py``).

Nothing is fetched from the network: the browser aborts every request that is not to the
local server. Where Playwright, Chromium or pypdf is missing, the PDF is not built: the
build says so in capitals with the reason and what to install (an info message, not a
warning, so that ``-W`` builds still pass), removes any PDF left by an earlier build and
takes the footers' links to the PDFs out of every page; ``tests/site/test_pdf.py`` then
skips, saying why.
"""

from __future__ import annotations

import datetime
import functools
import html as html_lib
import http.server
import io
import os
import re
import shutil
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from offline_site import PDF_NAME, chapter_pdf_name  # the names the footers link to
from sphinx.util import logging
from sphinx.util.console import bold

logger = logging.getLogger(__name__)


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


# Run on each page after _READY_JS, before it is printed:
# * each line of a code block in a span.posenc-line, so that a line wrapped on paper is
#   indented under its start (the print style sheet, posenc-site.css);
# * a hidden link to every id of the page: Chromium writes a named destination only for
#   the targets of the page's own links, and the other pages' links need theirs too;
# * the page's sections (h2), for the bookmarks.
_PREPARE_JS = """
() => {
  for (const pre of document.querySelectorAll('div.highlight pre')) {
    const lines = [[]];
    for (const child of Array.from(pre.childNodes)) {
      const segs = child.textContent.split('\\n');
      segs.forEach((seg, i) => {
        if (i > 0) lines.push([]);
        if (seg === '') return;
        let part;
        if (child.nodeType === Node.TEXT_NODE) part = document.createTextNode(seg);
        else if (segs.length === 1) part = child.cloneNode(true);
        else { part = child.cloneNode(false); part.textContent = seg; }
        lines[lines.length - 1].push(part);
      });
    }
    if (lines.length > 1 && lines[lines.length - 1].length === 0) lines.pop();
    pre.textContent = '';
    // a code cell's frame breaks with its code (posenc-site.css): a short cell moves whole,
    // a long one keeps two lines on either side of a break
    const cell = pre.closest('div.cell_input');
    if (cell && lines.length <= 6) cell.classList.add('posenc-short');
    lines.forEach((parts, i) => {
      const span = document.createElement('span');
      span.className = 'posenc-line';
      if (!parts.length) span.appendChild(document.createTextNode('\\u200b'));
      parts.forEach(p => span.appendChild(p));
      // a wrapped line continues 4 columns right of where its own text starts
      const hang = span.textContent.match(/^ */)[0].length + 4;
      span.style.cssText = `display: block; padding-left: ${hang}ch; text-indent: -${hang}ch;`;
      // no break between the frame's top and its first two lines, nor between its last
      // two lines and its bottom: a frame never starts or ends a page empty
      if (i < 1) { span.style.breakBefore = 'avoid'; span.style.breakAfter = 'avoid'; }
      if (i >= lines.length - 1) { span.style.breakBefore = 'avoid'; span.style.breakAfter = 'avoid'; }
      pre.appendChild(span);
    });
  }
  const targets = document.createElement('div');
  targets.hidden = true;
  for (const el of document.querySelectorAll('.bd-article [id]')) {
    const a = document.createElement('a');
    a.href = '#' + encodeURIComponent(el.id);
    targets.appendChild(a);
  }
  document.body.appendChild(targets);
  const sections = [];
  for (const h of document.querySelectorAll('.bd-article section > h2')) {
    const clone = h.cloneNode(true);
    clone.querySelectorAll('.headerlink').forEach(x => x.remove());
    sections.push([h.parentElement.id, clone.textContent.trim()]);
  }
  return sections;
}
"""


def _chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM_PATH"), "chromium", "chromium-browser"):
        if name and (path := shutil.which(name)):
            return path
    return None


# Pages of the website that the PDF leaves out: the laboratory's API reference
# (``posenc.book``, one page per module), which only readers of the chapters' code look up,
# on the site: 250 of the 832 pages the book printed with it (the library's took 104). The PDF
# keeps the library's reference (what a reader copies into a model) and the laboratory's
# overview page (``book/api/laboratory``), whose links to the left-out pages go to the site.
WEB_ONLY = ("book/api/laboratory/",)


def printed_pages(pages: list[str]) -> list[str]:
    """The documents of ``pages`` that the PDF prints: all but those under ``WEB_ONLY``."""
    return [d for d in pages if not d.startswith(WEB_ONLY)]


def site_url(url: str, doc: str, frag: str = "") -> str | None:
    """The address of ``doc`` (and its ``frag``) on the published site at ``url``, or None
    where the book has no site address (``CITATION.cff``)."""
    if not url.startswith(("https://", "http://")):
        return None
    return url.rstrip("/") + "/" + urllib.parse.quote(doc) + ".html" + (
        "#" + urllib.parse.quote(frag) if frag and frag != "__start" else "")


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


def chapter_numbers(env, pages: list[str]) -> dict[str, str]:
    """The number of each numbered document ("2" for chapter 2), as the site numbers it."""
    out = {}
    for doc in pages:
        num = (getattr(env, "toc_secnumbers", {}).get(doc) or {}).get("")
        if num:
            out[doc] = ".".join(map(str, num))
    return out


class _NotBuilt(Exception):
    """The PDF cannot be printed here (no Playwright, pypdf or Chromium)."""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


@dataclass
class BookMeta:
    """What the cover says."""

    title: str = "Positional Encodings in Transformers"
    authors: str = "The posenc book authors"
    version: str = ""
    released: str = ""
    licence: str = "Text and figures: CC-BY-4.0. Code: MIT."
    url: str = ""
    printed: str = field(default_factory=lambda: datetime.date.today().isoformat())


def book_meta(srcdir: Path, title: str = "", authors: str = "") -> BookMeta:
    """The cover's metadata: title and authors from the book's configuration, version,
    release date, licences and address from ``CITATION.cff``."""
    meta = BookMeta()
    if title:
        meta.title = title
    if authors:
        meta.authors = authors
    try:
        import yaml

        cff = yaml.safe_load((srcdir / "CITATION.cff").read_text(encoding="utf-8")) or {}
    except Exception:  # noqa: BLE001 - no CITATION.cff: a cover without version
        cff = {}
    meta.version = str(cff.get("version", ""))
    meta.released = str(cff.get("date-released", ""))
    meta.url = str(cff.get("url", ""))
    if cff.get("authors"):
        meta.authors = ", ".join(a.get("name") or " ".join(filter(None, (a.get("given-names"), a.get("family-names"))))
                                 for a in cff["authors"])
    return meta


_PAGE_CSS = """
@page { size: A4; margin: 0; }
html, body { margin: 0; padding: 0; }
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #222; }
"""


def _cover_html(meta: BookMeta) -> str:
    e = html_lib.escape
    version = f"Version {e(meta.version)}" + (f", released {e(meta.released)}" if meta.released else "")
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{e(meta.title)}</title>
<style>{_PAGE_CSS}
.cover {{ box-sizing: border-box; height: 296mm; padding: 60mm 25mm 25mm; display: flex; flex-direction: column; }}
h1 {{ font-size: 30pt; line-height: 1.2; margin: 0 0 10mm; }}
.authors {{ font-size: 15pt; margin: 0 0 30mm; }}
.rule {{ border-top: 2pt solid #1358c4; width: 40mm; margin: 0 0 10mm; }}
.meta {{ font-size: 11pt; line-height: 1.7; margin-top: auto; }}
</style></head><body><div class="cover">
<h1>{e(meta.title)}</h1><div class="rule"></div>
<p class="authors">{e(meta.authors)}</p>
<div class="meta"><p>{version}<br>Printed {e(meta.printed)}<br>Licence: {e(meta.licence)}<br>{e(meta.url)}</p></div>
</div></body></html>"""


def _toc_html(entries: list[tuple[str, str, int, int]]) -> str:
    """The contents pages: (number, title, page, level) per document (level 0) and per
    section of a document (level 1, indented under it), page numbers at the right."""
    e = html_lib.escape
    rows = "".join(
        f'<li class="{"section" if level else "chapter" if num else "other"}"><span class="num">{e(num)}</span>'
        f'<span class="title">{e(title)}</span><span class="dots"></span><span class="page">{page}</span></li>'
        for num, title, page, level in entries
    )
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Contents</title>
<style>{_PAGE_CSS}
.toc {{ padding: 30mm 25mm 20mm; }}
h1 {{ font-size: 22pt; margin: 0 0 12mm; }}
ol {{ list-style: none; padding: 0; margin: 0; font-size: 12pt; }}
li {{ display: flex; align-items: baseline; margin: 0 0 4mm; break-inside: avoid; }}
li.chapter {{ font-weight: bold; }}
li.section {{ font-size: 10pt; margin: 0 0 1.6mm 9mm; }}
li.section .num {{ min-width: 0; }}
li.section + li:not(.section) {{ margin-top: 4mm; }}
.num {{ min-width: 9mm; }}
.dots {{ flex: 1; border-bottom: 1pt dotted #888; margin: 0 2mm; }}
.page {{ min-width: 8mm; text-align: right; font-variant-numeric: tabular-nums; }}
</style></head><body><div class="toc"><h1>Contents</h1><ol>{rows}</ol></div></body></html>"""


def _running_html(heads: list[str], first_number: int) -> str:
    """One page per page of the book from ``first_number`` on: the running head (the
    document's title) at the top, the page number at the bottom, in the margins."""
    e = html_lib.escape
    pages = "".join(
        f'<div class="p"><div class="head">{e(h)}</div><div class="foot">{first_number + i}</div></div>'
        for i, h in enumerate(heads)
    )
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>running heads</title>
<style>{_PAGE_CSS}
html, body {{ background: transparent; }}
.p {{ position: relative; height: 296mm; overflow: hidden; break-after: page; }}
.p:last-child {{ break-after: auto; }}
.head, .foot {{ position: absolute; left: 14mm; right: 14mm; font-size: 8.5pt; color: #555; }}
.head {{ top: 7mm; text-align: right; }}
.foot {{ bottom: 7mm; text-align: center; }}
</style></head><body>{pages}</body></html>"""


def _print_html(page, content: str, reader_cls, margin: str = "0") -> "object":
    page.set_content(content, wait_until="load")
    page.evaluate("() => document.fonts.ready.then(() => true)")
    data = page.pdf(format="A4", print_background=False,
                    margin={"top": margin, "bottom": margin, "left": margin, "right": margin})
    return reader_cls(io.BytesIO(data))


def build_pdf(outdir: Path, pages: list[str], titles: dict[str, str] | None = None,
              numbers: dict[str, str] | None = None, meta: BookMeta | None = None) -> Path | None:
    """Print ``pages`` (docnames) of the HTML site in ``outdir`` into one PDF; returns its path.

    The book opens with a cover (``meta``) and a contents page with page numbers; every
    page after the cover carries a running head (its document's title) and its page
    number; the chapters' titles and bookmarks carry their numbers (``numbers``: docname
    to "2", as in the site's navigation).
    """
    try:
        from playwright.sync_api import sync_playwright
        from pypdf import PdfReader, PdfWriter
    except ImportError as err:
        raise _NotBuilt(f"{err.name} is not installed") from None
    meta = meta or BookMeta()
    numbers = numbers or {}
    chromium = _chromium()
    handler = functools.partial(_Quiet, directory=str(outdir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    parts: list[tuple[str, str, object]] = []  # (docname, label, its pages)
    sections: dict[str, list] = {}  # docname: [(id, title)] of its h2 sections
    t0 = time.time()
    try:
        with sync_playwright() as pw:
            try:
                browser = pw.chromium.launch(executable_path=chromium, args=_CHROMIUM_ARGS)
            except Exception as err:  # noqa: BLE001 - no browser: no PDF, said plainly
                raise _NotBuilt(f"Chromium cannot be started ({str(err).splitlines()[0]})") from None
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
                    sections[doc] = page.evaluate(_PREPARE_JS)
                    data = page.pdf(
                        format="A4",
                        print_background=True,
                        margin={"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
                    )
                    label = (titles or {}).get(doc) or title.split(" \u2014 ")[0].split(" - ")[0]
                    parts.append((doc, label, PdfReader(io.BytesIO(data))))
                # front matter: the cover, then the contents (printed again if its own
                # length moves the page numbers)
                cover = _print_html(page, _cover_html(meta), PdfReader)
                # each section's page within its document (its named destination there)
                within: dict[str, list[tuple[str, int]]] = {}
                for doc, label, reader in parts:
                    named = {str(k).lstrip("/"): v for k, v in reader.named_destinations.items()}
                    within[doc] = [(stitle, reader.get_destination_page_number(named[sid]))
                                   for sid, stitle in sections.get(doc, []) if sid in named]
                n_toc, toc = 1, None
                for _ in range(4):
                    first = len(cover.pages) + n_toc + 1
                    entries, at = [], first
                    for doc, label, reader in parts:
                        entries.append((numbers.get(doc, ""), label, at, 0))
                        entries += [("", stitle, at + k, 1) for stitle, k in within[doc]]
                        at += len(reader.pages)
                    toc = _print_html(page, _toc_html(entries), PdfReader)
                    if len(toc.pages) == n_toc:
                        break
                    n_toc = len(toc.pages)
                heads = ["Contents"] * len(toc.pages)
                for doc, label, reader in parts:
                    head = f"{numbers[doc]}. {label}" if numbers.get(doc) else label
                    heads += [head] * len(reader.pages)
                running = _print_html(page, _running_html(heads, len(cover.pages) + 1), PdfReader)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    writer = PdfWriter()
    writer.append(cover)
    writer.append(toc)
    writer.add_outline_item("Contents", len(cover.pages))
    starts: dict[str, tuple[int, int]] = {}  # docname: (first page, page after its last)
    dests: dict[str, tuple[int, float, float]] = {}  # "doc#id": (page, left, top)
    for doc, label, reader in parts:
        start = len(writer.pages)
        for name, dest in reader.named_destinations.items():
            at = reader.get_destination_page_number(dest)
            if at is not None and at >= 0:
                dests[f"{doc}#{str(name).lstrip('/')}"] = (start + at, float(dest.left or 0), float(dest.top or 0))
        writer.append(reader, import_outline=False)
        starts[doc] = (start, len(writer.pages))
        item = writer.add_outline_item(f"{numbers[doc]}. {label}" if numbers.get(doc) else label, start)
        for sid, stitle in sections.get(doc, []):
            if f"{doc}#{sid}" in dests:
                writer.add_outline_item(stitle, dests[f"{doc}#{sid}"][0], parent=item)
    link_pdf(writer, base, starts, dests, online=lambda doc, frag: site_url(meta.url, doc, frag))
    if len(running.pages) != len(writer.pages) - len(cover.pages):
        raise RuntimeError(f"running heads: {len(running.pages)} pages for {len(writer.pages) - len(cover.pages)}")
    for i, over in enumerate(running.pages):
        writer.pages[len(cover.pages) + i].merge_page(over)
    writer.add_metadata({"/Title": meta.title, "/Author": meta.authors,
                         "/Subject": f"Version {meta.version}" if meta.version else meta.title})
    target = outdir / PDF_NAME
    with open(target, "wb") as fh:
        writer.write(fh)
    labels = {doc: label for doc, label, _ in parts}
    chapters = chapter_pdfs(target, starts, dests, numbers, labels, sections, meta)
    logger.info(f"[pdf] {target.name}: {len(writer.pages)} pages (cover, {len(toc.pages)} of contents, "
                f"{len(pages)} documents) in {time.time() - t0:.0f} s; one PDF per chapter: "
                + ", ".join(f"{p.name} ({n} pages)" for p, n in chapters))
    return target


def chapter_pdfs(book: Path, starts: dict[str, tuple[int, int]], dests: dict[str, tuple[int, float, float]],
                 numbers: dict[str, str], labels: dict[str, str], sections: dict[str, list],
                 meta: BookMeta) -> list[tuple[Path, int]]:
    """Each numbered chapter of the joined ``book`` as a PDF of its own beside it
    (``chapter_pdf_name``): its pages as the book prints them (running head and page
    number included), a bookmark for the chapter and one per section, its own named
    destinations; a link into another document of the book (a citation, a reference to
    another chapter), which is not in the file, goes to that page of the published site
    (``meta.url``, from CITATION.cff), or is removed where there is none. Returns (path,
    pages) per chapter."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import ArrayObject, DictionaryObject, FloatObject, NameObject, NullObject, TextStringObject

    def online(dest: str) -> str | None:
        doc_, _, frag = dest.partition("#")
        return site_url(meta.url, doc_, frag)

    reader = PdfReader(book)
    out = []
    for doc, num in numbers.items():
        if doc not in starts:
            continue
        first, end = starts[doc]
        w = PdfWriter()
        for i in range(first, end):  # add_page keeps every link (append drops those that leave the range)
            w.add_page(reader.pages[i])
        root_names = w._root_object.get("/Names")
        if root_names is not None and "/Dests" in root_names.get_object():
            del root_names.get_object()["/Dests"]
        own = {name: (at - first, left, top) for name, (at, left, top) in dests.items()
               if name.startswith(doc + "#") and first <= at < end}
        own[f"{doc}#__start"] = (0, 0.0, 0.0)
        for name, (at, left, top) in sorted(own.items()):
            w.add_named_destination_array(
                TextStringObject(name),
                ArrayObject([w.pages[at].indirect_reference, NameObject("/XYZ"), FloatObject(left),
                             FloatObject(top), NullObject()]))
        for pg in w.pages:
            annots = pg.get("/Annots")
            if annots is None:
                continue
            keep = ArrayObject()
            for ref in annots.get_object():
                annot = ref.get_object()
                dest = annot.get("/Dest") if annot.get("/Subtype") == "/Link" else None
                if dest is not None and not isinstance(dest.get_object(), list) and str(dest) not in own:
                    url = online(str(dest))  # into another document of the book
                    if url is None:
                        continue
                    del annot["/Dest"]
                    annot[NameObject("/A")] = DictionaryObject(
                        {NameObject("/S"): NameObject("/URI"), NameObject("/URI"): TextStringObject(url)})
                keep.append(ref)
            pg[NameObject("/Annots")] = keep
        title = f"{num}. {labels.get(doc, doc)}"
        item = w.add_outline_item(title, 0)
        for sid, stitle in sections.get(doc, []):
            if f"{doc}#{sid}" in own:
                w.add_outline_item(stitle, own[f"{doc}#{sid}"][0], parent=item)
        w.add_metadata({"/Title": f"{meta.title}: {title}", "/Author": meta.authors,
                        "/Subject": f"Chapter {num} of {meta.title}" + (f", version {meta.version}" if meta.version else "")})
        path = book.parent / chapter_pdf_name(num)
        with open(path, "wb") as fh:
            w.write(fh)
        out.append((path, end - first))
    return out


def _link_target(annot, doc: str, base: str) -> tuple[str, str] | None:
    """(document, fragment) a link annotation of ``doc``'s pages points to, or None when it
    is not a link into the book (an address outside the local server stays as it is)."""
    if "/Dest" in annot and not isinstance(annot["/Dest"].get_object(), list):
        return doc, str(annot["/Dest"]).lstrip("/")
    action = annot.get("/A")
    action = action.get_object() if action is not None else None
    if not action:
        return None
    if action.get("/S") == "/GoTo" and not isinstance(action.get("/D"), list):
        return doc, str(action["/D"]).lstrip("/")
    uri = str(action.get("/URI", "")) if action.get("/S") == "/URI" else ""
    if not uri.startswith(base):
        return None
    path, _, frag = uri[len(base):].partition("#")
    path = path.split("?")[0]
    return (path[: -len(".html")] if path.endswith(".html") else path), urllib.parse.unquote(frag)


def link_pdf(writer, base: str, starts: dict[str, tuple[int, int]],
             dests: dict[str, tuple[int, float, float]], online=None) -> dict[str, int]:
    """Point the links of the joined PDF inside it instead of at the server that printed it.

    Every destination is named ``<document>#<id>`` (``notebooks/06_alternatives#summary``),
    so that the "Summary" of one chapter is not another's; a link to a page of the book
    (``http://127.0.0.1:<port>/notebooks/04_rotations.html#eq-x``) or to a destination of
    its own page (``/summary``) goes to that named destination, or to the first page of the
    document when the id has none; a link to a page the PDF leaves out (``WEB_ONLY``) goes
    to that page on the published site, ``online(document, fragment)``, where it gives an
    address; a link to any other file of the local server (a figure's image) is removed.
    Returns the counts of each kind.
    """
    from pypdf.generic import ArrayObject, DictionaryObject, FloatObject, NameObject, NullObject, TextStringObject

    counts = {"named": 0, "document": 0, "online": 0, "removed": 0}
    root_names = writer._root_object.get("/Names")
    if root_names is not None and "/Dests" in root_names.get_object():
        del root_names.get_object()["/Dests"]  # the pages' own names ("/summary"), which collide
    for name, (at, left, top) in sorted(dests.items()):
        writer.add_named_destination_array(
            TextStringObject(name),
            ArrayObject([writer.pages[at].indirect_reference, NameObject("/XYZ"), FloatObject(left),
                         FloatObject(top), NullObject()]))
    names = {doc: f"{doc}#__start" for doc in starts}
    for doc, (first, _) in starts.items():
        writer.add_named_destination_array(
            TextStringObject(names[doc]),
            ArrayObject([writer.pages[first].indirect_reference, NameObject("/Fit")]))
    for doc, (first, end) in starts.items():
        for i in range(first, end):
            page = writer.pages[i]
            annots = page.get("/Annots")
            if annots is None:
                continue
            annots = annots.get_object()
            keep = ArrayObject()
            for ref in annots:
                annot = ref.get_object()
                target = _link_target(annot, doc, base) if annot.get("/Subtype") == "/Link" else None
                if target is None:
                    keep.append(ref)
                    continue
                tdoc, frag = target
                if f"{tdoc}#{frag}" in dests:
                    dest, kind = f"{tdoc}#{frag}", "named"
                elif tdoc in starts:
                    dest, kind = names[tdoc], "document"
                elif online is not None and tdoc.startswith(WEB_ONLY) and (url := online(tdoc, frag)):
                    annot.pop("/Dest", None)
                    annot[NameObject("/A")] = DictionaryObject(
                        {NameObject("/S"): NameObject("/URI"), NameObject("/URI"): TextStringObject(url)})
                    counts["online"] += 1
                    keep.append(ref)
                    continue
                else:
                    counts["removed"] += 1
                    continue
                annot.pop("/A", None)
                annot[NameObject("/Dest")] = TextStringObject(dest)
                counts[kind] += 1
                keep.append(ref)
            page[NameObject("/Annots")] = keep
    return counts


# The left border of a code cell's frame (MyST-NB's --mystnb-source-margin-color: green),
# as Chromium fills it on each page the frame spans.
FRAME_RGB = (0.0, 0.502, 0.0)


def _affine(a: list[float], b: list[float]) -> list[float]:
    """The PDF matrix product a x b of two [a b c d e f] affine maps."""
    return [a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
            a[2] * b[1] + a[3] * b[3], a[4] * b[0] + a[5] * b[2] + b[4], a[4] * b[1] + a[5] * b[3] + b[5]]


def _page_paint(page, reader) -> tuple[list[tuple[tuple, tuple]], list[tuple[float, float]]]:
    """What a page paints: (fill colour, bounding box clipped to the clip in force) of each
    filled path, and the origin of each text run, in page coordinates (points)."""
    from pypdf.generic import ContentStream

    def at(m, x, y):
        return m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5]

    ctm, clip, fill, stack, path, clipping = [1.0, 0, 0, 1.0, 0, 0], None, None, [], [], False
    fills, runs, tm = [], [], [1.0, 0, 0, 1.0, 0, 0]
    for args, op in ContentStream(page.get_contents(), reader).operations:
        if op == b"q":
            stack.append((ctm, clip, fill))
        elif op == b"Q" and stack:
            ctm, clip, fill = stack.pop()
        elif op == b"cm":
            ctm = _affine([float(x) for x in args], ctm)
        elif op in (b"rg", b"sc", b"scn") and len(args) == 3:
            fill = tuple(round(float(x), 3) for x in args)
        elif op in (b"m", b"l"):
            path.append(at(ctm, float(args[0]), float(args[1])))
        elif op == b"c":
            path.append(at(ctm, float(args[4]), float(args[5])))
        elif op == b"re":
            x, y, w, h = map(float, args)
            path += [at(ctm, x, y), at(ctm, x + w, y + h), at(ctm, x, y + h), at(ctm, x + w, y)]
        elif op in (b"W", b"W*"):
            clipping = True
        elif op in (b"n", b"f", b"f*", b"F", b"B", b"B*", b"b", b"b*", b"S", b"s"):
            if path:
                xs, ys = [p[0] for p in path], [p[1] for p in path]
                box = (min(xs), min(ys), max(xs), max(ys))
                if clip is not None:
                    box = (max(clip[0], box[0]), max(clip[1], box[1]), min(clip[2], box[2]), min(clip[3], box[3]))
                if clipping:
                    clip = box
                elif op not in (b"n", b"S", b"s") and box[2] > box[0] and box[3] > box[1]:
                    fills.append((fill, box))
            path, clipping = [], False
        elif op == b"BT":
            tm = [1.0, 0, 0, 1.0, 0, 0]
        elif op == b"Tm":
            tm = [float(x) for x in args]
        elif op in (b"Td", b"TD"):
            tm = _affine([1.0, 0, 0, 1.0, float(args[0]), float(args[1])], tm)
        elif op in (b"Tj", b"TJ", b"'", b'"'):
            runs.append(at(_affine(tm, ctm), 0, 0))
    return fills, runs


def code_frames(path: Path, pages: range | None = None) -> list[dict]:
    """Every piece of a code cell's frame in the PDF at ``path`` (its left border as filled
    on one page), with the number of text runs beside it: a piece with none is an empty
    frame (the frame's top at the foot of a page, its code on the next). ``pages``: the
    page indices to read (all by default)."""
    from pypdf import PdfReader

    reader = PdfReader(path)
    out = []
    for i in pages if pages is not None else range(len(reader.pages)):
        fills, runs = _page_paint(reader.pages[i], reader)
        for colour, (x0, y0, x1, y1) in fills:
            if colour != FRAME_RGB or x1 - x0 > 8:
                continue
            text = sum(1 for x, y in runs if y0 - 1 <= y <= y1 + 1 and x > x1)
            out.append({"page": i + 1, "top": round(y1, 1), "height": round(y1 - y0, 1), "text_runs": text})
    return out


_PDF_LINK = re.compile(r'\s*(?:The whole book|This chapter alone) as a <a class="posenc-pdf-link" href="[^"]*">PDF</a>\.')


def _drop_pdf_links(outdir: Path) -> int:
    """Remove the footer's link to the PDF from every page (no PDF was built)."""
    n = 0
    for page in outdir.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        new = _PDF_LINK.sub("", text)
        if new != text:
            page.write_text(new, encoding="utf-8")
            n += 1
    return n


def _not_built(outdir: Path, why: str) -> None:
    """Say plainly that there is no PDF, and take its links out of the pages."""
    for stale in [outdir / PDF_NAME, *outdir.glob(chapter_pdf_name("1").replace("01", "[0-9][0-9]"))]:
        stale.unlink(missing_ok=True)  # a PDF left by an earlier build would not match the site
    n = _drop_pdf_links(outdir)
    logger.info(bold(f"[pdf] THE PDF WAS NOT BUILT: {why}. ") + f"The footers of {n} pages no longer link to it. "
                "To print it, install Chromium (Debian/Ubuntu: apt-get install chromium, or: "
                "playwright install chromium) and build again.")


def _build_finished(app, exc) -> None:
    if exc is not None or app.builder.name != "html":
        return
    env = app.env
    outdir = Path(app.outdir)
    pages = [d for d in printed_pages(book_pages(env)) if (outdir / f"{d}.html").is_file()]
    titles = {d: env.titles[d].astext() for d in pages if d in env.titles}
    numbers = chapter_numbers(env, pages)
    meta = book_meta(Path(app.srcdir), app.config.html_title or app.config.project, app.config.author)
    if os.environ.get("POSENC_PDF", "").strip().lower() in ("0", "no", "off"):
        _not_built(outdir, "POSENC_PDF=0 asked for the site only")
        return
    try:
        target = build_pdf(outdir, pages, titles, numbers, meta)
    except _NotBuilt as err:
        _not_built(outdir, str(err))
        return
    if target is None:
        _not_built(outdir, "see the message above")


def setup(app):
    # After offline_site's rewrites of the pages (build-finished, priority 900).
    app.connect("build-finished", _build_finished, priority=950)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
