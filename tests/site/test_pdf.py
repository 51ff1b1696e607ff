"""The PDF of the whole book (``_build/html/posenc-book.pdf``, printed offline by
Chromium at the end of the book build, see ``book/_ext/pdf_book.py``): it was built, and
it reads like a book:

* a cover (page 1): title, authors, version, licence, date;
* a contents page listing every document with the page it starts on (the bookmarks'
  pages);
* the chapters' numbers in their bookmarks and in their printed headings;
* a page number printed on every page after the cover (the page's own number);
* no missing glyph: no replacement character, every icon drawn with an icon font (the
  note admonition's icon once printed as an empty box);
* every page's title (every chapter's included), every numbered figure's caption, every
  solution's text (solutions expanded) and at least as many images as the pages show;
* no link to the local server that printed it, every link to a destination of the book
  that lies in the document it names (each chapter's "Summary" its own), section
  bookmarks, and contents that list the sections too; the code hidden on the web ("Show
  code cell source") left out; no code cell's frame printed empty at the foot of a page;
* each chapter as a PDF of its own beside the book (``posenc-book-ch06.pdf``);
* the library's API reference printed, the laboratory's (``pdf_book.WEB_ONLY``) left to
  the website, the PDF's links to it going there.

It checks the site that ``tests/site/test_site.py`` checks (same fixture), and skips,
saying why, where the PDF could not be built: no Chromium, Playwright or pypdf.
"""

from __future__ import annotations

import html as html_lib
import re
import shutil
import unicodedata
from pathlib import Path

import pytest
from test_site import _chromium, site_dir  # noqa: F401 - site_dir is the shared fixture

PDF_NAME = "posenc-book.pdf"


def _squash(text: str) -> str:
    """Compare text without spaces, line breaks, hyphenation or ligatures."""
    text = unicodedata.normalize("NFKC", html_lib.unescape(text))
    return re.sub(r"[\s\u00ad\u200b]+", "", text).replace("\u2011", "-")


def _toc_pages(site: Path, printed: bool = True) -> list[Path]:
    """The pages of the book, in the order of the table of contents (front page first);
    those the PDF prints (not ``WEB_ONLY``) unless ``printed`` is False."""
    front = site / "book" / "intro.html"
    text = front.read_text(encoding="utf-8")
    nav = re.search(r'<nav class="[^"]*\bbd-docs-nav\b.*?</nav>', text, re.S)
    hrefs = re.findall(r'<a class="reference internal" href="([^"#]+)"', nav.group(0) if nav else "")
    pages = [front]
    for h in hrefs:
        p = (front.parent / h).resolve()
        if p.is_file() and p not in pages:
            pages.append(p)
    if printed:
        web_only = _pdf_book().WEB_ONLY
        pages = [p for p in pages if not str(p.relative_to(site).as_posix()).startswith(web_only)]
    return pages


def _article(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    m = re.search(r'<article class="bd-article">(.*?)</article>', text, re.S)
    return m.group(1) if m else text


def _strip(fragment: str) -> str:
    fragment = re.sub(r'<a class="headerlink".*?</a>', "", fragment, flags=re.S)
    return re.sub(r"<[^>]+>", "", fragment)


@pytest.fixture(scope="module")
def pdf(site_dir: Path):  # noqa: F811 - the fixture imported above
    try:
        from pypdf import PdfReader
    except ImportError:
        pytest.skip("pypdf is not installed (pip install -r requirements.txt)")
    path = site_dir / PDF_NAME
    if not path.is_file():
        try:
            import playwright  # noqa: F401
        except ImportError:
            pytest.skip("playwright is not installed, so the book build could not print the PDF")
        if _chromium() is None and not shutil.which("chromium"):
            pytest.skip("no Chromium executable, so the book build could not print the PDF")
        pytest.fail(f"the book build produced no {PDF_NAME} in {site_dir} (see its [pdf] messages)")
    reader = PdfReader(path)
    texts = [page.extract_text() or "" for page in reader.pages]
    return reader, _squash("\n".join(texts))


def _doc_outline(reader) -> list:
    """The bookmarks of the documents (the front matter's "Contents" left out)."""
    return [o for o in reader.outline if not isinstance(o, list) and o.title != "Contents"]


def _doc_bookmarks(reader) -> list[str]:
    return [o.title for o in _doc_outline(reader)]


def _unnumbered(title: str) -> str:
    return re.sub(r"^\d+(\.\d+)*\.\s+", "", title)


def _number(page: Path) -> str:
    """The chapter number the site gives the page ("2"), or ""."""
    h1 = re.search(r"<h1[^>]*>(.*?)</h1>", _article(page), re.S)
    m = re.search(r'<span class="section-number">\s*([0-9.]+?)\.?\s*</span>', h1.group(1) if h1 else "")
    return m.group(1) if m else ""


def _title(page: Path) -> str:
    """The page's title as printed (the PDF prints the h1 without its section number)."""
    h1 = re.search(r"<h1[^>]*>(.*?)</h1>", _article(page), re.S)
    if not h1:
        return ""
    return _strip(re.sub(r'<span class="section-number">.*?</span>', "", h1.group(1), flags=re.S)).strip()


def test_pdf_holds_every_page_title(pdf, site_dir: Path):  # noqa: F811
    reader, text = pdf
    pages = _toc_pages(site_dir)
    chapters = [p for p in pages if p.parent.name == "notebooks"]
    assert len(chapters) >= 6, [p.name for p in pages]
    missing = [f"{p.relative_to(site_dir)}: {_title(p)!r}" for p in pages if _squash(_title(p)) not in text]
    assert not missing, "titles missing from the PDF:\n" + "\n".join(missing)
    bookmarks = _doc_bookmarks(reader)
    assert [_squash(_unnumbered(b)) for b in bookmarks] == [_squash(_title(p)) for p in pages], bookmarks
    print(f"\nPDF: {len(reader.pages)} pages, {len(pages)} documents")


def test_pdf_holds_every_figure(pdf, site_dir: Path):  # noqa: F811
    """Every numbered figure's caption is in the PDF, and each document's part of the PDF
    holds at least as many images as the page shows distinct ones."""
    reader, text = pdf
    pages = _toc_pages(site_dir)
    starts = [reader.get_destination_page_number(o) for o in _doc_outline(reader)]
    assert len(starts) == len(pages), "one bookmark per document expected"
    ends = starts[1:] + [len(reader.pages)]
    captions, short = [], []
    for page, a, b in zip(pages, starts, ends):
        art = _article(page)
        shown = len(set(re.findall(r'<img\b[^>]*\ssrc="([^"]+)"', art)))
        printed = sum(len(reader.pages[i].images) for i in range(a, b))
        if printed < shown:
            short.append(f"{page.relative_to(site_dir)}: {printed} images printed, {shown} shown")
        captions += [_strip(c).strip() for c in re.findall(r'<span class="caption-number">(.*?)</span>', art, re.S)]
    assert captions, "no numbered figure found in the site"
    missing = [c for c in captions if _squash(c) not in text]
    assert not missing, f"figure captions missing from the PDF: {missing}"
    assert not short, "\n".join(short)


def _page_texts(reader) -> list[str]:
    return [page.extract_text() or "" for page in reader.pages]


def test_pdf_cover(pdf):
    """Page 1 is a cover: the title, the authors, the version, the licence and a date."""
    reader, _ = pdf
    cover = reader.pages[0].extract_text() or ""
    flat = " ".join(cover.split())
    assert "Positional Encodings in Transformers" in flat, flat
    assert "The posenc book authors" in flat, flat
    assert re.search(r"Version \d+\.\d+\.\d+", flat), flat
    assert "CC-BY-4.0" in flat and "MIT" in flat, flat
    assert re.search(r"\d{4}-\d{2}-\d{2}", flat), flat
    assert len(reader.pages[0].images) == 0 and len(cover) < 600, "the cover holds more than the cover"


def test_pdf_contents_with_page_numbers(pdf, site_dir: Path):  # noqa: F811
    """The contents page lists every document, each with the page its bookmark points to
    (1-based, as printed at the foot of that page)."""
    reader, _ = pdf
    outline = _doc_outline(reader)
    contents = [o for o in reader.outline if not isinstance(o, list) and o.title == "Contents"]
    assert contents, "no Contents bookmark"
    first = reader.get_destination_page_number(contents[0])
    last = reader.get_destination_page_number(outline[0])
    toc = _squash(" ".join((reader.pages[i].extract_text() or "") for i in range(first, last)))
    assert toc.startswith(_squash("Contents")), toc[:200]
    missing = []
    for o in outline:
        entry = _squash(_unnumbered(o.title)) + str(reader.get_destination_page_number(o) + 1)
        if entry not in toc:
            missing.append(f"{o.title} ... {reader.get_destination_page_number(o) + 1}")
    assert not missing, "contents entries missing or with the wrong page:\n" + "\n".join(missing)


def test_pdf_chapter_numbers(pdf, site_dir: Path):  # noqa: F811
    """Every chapter's bookmark starts with its number, as the site numbers it, and so
    does its printed heading (the first page of the chapter)."""
    reader, _ = pdf
    pages = _toc_pages(site_dir)
    numbered = [(p, _number(p)) for p in pages if _number(p)]
    assert len(numbered) >= 6, [p.name for p in pages]
    outline = _doc_outline(reader)
    problems = []
    for (page, num), o in zip(((p, _number(p)) for p in pages), outline):
        if not num:
            continue
        if not o.title.startswith(f"{num}. "):
            problems.append(f"bookmark {o.title!r}: no chapter number {num}")
        first = _squash(reader.pages[reader.get_destination_page_number(o)].extract_text() or "")
        # the running head says "2. Title" too: the heading makes it a second time
        if first.count(_squash(f"{num}. {_title(page)}")) < 2:
            problems.append(f"{page.name}: the heading on its first page has no number {num}: {first[:120]!r}")
    assert not problems, "\n".join(problems)


def test_pdf_page_numbers(pdf):
    """Every page after the cover prints its own page number (alone on its line)."""
    reader, _ = pdf
    missing = []
    for i, page in enumerate(reader.pages[1:], start=2):
        lines = [ln.strip() for ln in (page.extract_text() or "").splitlines()]
        if str(i) not in lines:
            missing.append(i)
    assert not missing, f"{len(missing)} pages without their number, e.g. {missing[:10]}"


def test_pdf_no_missing_glyph(pdf):
    """No replacement character, and every icon (Font Awesome's private-use characters:
    the admonitions' title icons) drawn with an icon font, not a fallback that prints a box."""
    reader, text = pdf
    assert "\ufffd" not in text, "a replacement character (a glyph that could not be mapped)"
    wrong: list[str] = []
    icons = 0
    for number, page in enumerate(reader.pages, start=1):
        def visit(t, cm, tm, font, size, _n=number):
            nonlocal icons
            pua = [c for c in t if 0xE000 <= ord(c) <= 0xF8FF]
            if not pua:
                return
            icons += len(pua)
            name = str((font or {}).get("/BaseFont", "")) if font is not None else ""
            if not re.search(r"awesome|fa-|brands|solid", name, re.I):
                wrong.append(f"page {_n}: {[hex(ord(c)) for c in pua]} drawn with {name or 'no font'}")

        page.extract_text(visitor_text=visit)
    print(f"\nicons printed: {icons}")
    assert not wrong, "icons drawn without their icon font (printed as boxes):\n" + "\n".join(wrong[:20])


def test_pdf_solutions_expanded(pdf, site_dir: Path):  # noqa: F811
    """Every solution of the chapters is printed expanded: its text is in the PDF."""
    _, text = pdf
    missing, n = [], 0
    for page in _toc_pages(site_dir):
        art = _article(page)
        for m in re.finditer(r'<div class="solution[^"]*"[^>]*>(.*?)</section>\s*</div>', art, re.S):
            body = re.split(r'</p>\s*</div>', m.group(1), maxsplit=1)[-1]  # after the title
            para = re.search(r"<p>(.*?)</p>", body, re.S)
            if not para:
                continue
            # the longest run of text between formulas (MathJax prints those its own way)
            chunks = re.split(r"\\\(.*?\\\)|\\\[.*?\\\]|\$.*?\$", html_lib.unescape(_strip(para.group(1))), flags=re.S)
            words = max((c.split() for c in chunks), key=len)[:10]
            if len(words) < 3:
                continue
            n += 1
            if _squash(" ".join(words)) not in text:
                missing.append(f"{page.name}: {' '.join(words)!r}")
    assert n > 0, "no solution found in the site"
    assert not missing, f"{len(missing)} of {n} solutions not printed:\n" + "\n".join(missing[:20])


def test_without_chromium_no_pdf_and_no_link(tmp_path: Path, caplog):
    """Where the PDF cannot be printed, the build says so plainly, removes a PDF left by
    an earlier build, and no page's footer links to a PDF (no browser needed)."""
    import logging
    import sys

    pdf_book = _pdf_book()
    page = tmp_path / "notebooks" / "a.html"
    page.parent.mkdir()
    footer = ('<p>Source: <a href="https://example.org/repo">the repository</a>. The whole book as a '
              '<a class="posenc-pdf-link" href="../posenc-book.pdf">PDF</a>.</p>')
    page.write_text(f"<html><body><footer>{footer}</footer></body></html>", encoding="utf-8")
    (tmp_path / PDF_NAME).write_bytes(b"%PDF-1.4 stale")
    with caplog.at_level(logging.INFO):
        pdf_book._not_built(tmp_path, "Chromium cannot be started (test)")
    text = page.read_text(encoding="utf-8")
    assert "posenc-pdf-link" not in text and "the repository</a>.</p>" in text, text
    assert not (tmp_path / PDF_NAME).exists(), "a stale PDF was left behind"
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "THE PDF WAS NOT BUILT" in said and "Chromium" in said, said


def test_laboratory_reference_left_to_the_website():
    """The PDF leaves out the laboratory's API pages (``WEB_ONLY``), keeps the library's and
    the laboratory's overview page, and a link to a left-out page goes to the site."""
    pdf_book = _pdf_book()
    pages = ["book/intro", "notebooks/01_motivation", "book/api", "book/api/library", "book/api/library/posenc.bias",
             "book/api/library/posenc.rope.core", "book/api/laboratory", "book/api/laboratory/posenc.book.synthetic"]
    assert pdf_book.printed_pages(pages) == pages[:-1]
    assert (pdf_book.site_url("https://example.org/book/", "book/api/laboratory/posenc.book.synthetic",
                              "posenc.book.synthetic.run_trial")
            == "https://example.org/book/book/api/laboratory/posenc.book.synthetic.html#posenc.book.synthetic.run_trial")
    assert pdf_book.site_url("", "book/api", "") is None


def test_links_to_left_out_pages_go_to_the_site():
    """``link_pdf`` on a one-page PDF: a link to a laboratory page (left out of the PDF) goes
    to that page on the site, a link to a printed document to its destination, a link to
    another file of the print server is removed (no browser needed)."""
    pypdf = pytest.importorskip("pypdf")
    from pypdf.annotations import Link
    from pypdf.generic import RectangleObject

    pdf_book = _pdf_book()
    base = "http://127.0.0.1:8000/"
    writer = pypdf.PdfWriter()
    writer.add_blank_page(595, 842)
    for i, target in enumerate([base + "book/api/laboratory/posenc.book.tables.html#posenc.book.tables.markdown_table",
                                base + "book/intro.html", base + "_images/x.png"]):
        writer.add_annotation(0, Link(rect=RectangleObject([10, 10 + 30 * i, 100, 30 + 30 * i]), url=target))
    counts = pdf_book.link_pdf(writer, base, {"book/intro": (0, 1)}, {},
                               online=lambda doc, frag: pdf_book.site_url("https://example.org/", doc, frag))
    assert counts == {"named": 0, "document": 1, "online": 1, "removed": 1}, counts
    annots = [a.get_object() for a in writer.pages[0]["/Annots"]]
    uris = [str(a["/A"]["/URI"]) for a in annots if "/A" in a]
    assert uris == ["https://example.org/book/api/laboratory/posenc.book.tables.html"
                    "#posenc.book.tables.markdown_table"], uris
    assert [str(a["/Dest"]) for a in annots if "/Dest" in a] == ["book/intro#__start"]


def test_pdf_prints_the_library_reference_only(pdf, site_dir: Path):  # noqa: F811
    """In the built PDF: a bookmark for each library module's page, none for the
    laboratory's; the laboratory's overview links to its modules on the site."""
    reader, _ = pdf
    everything = _toc_pages(site_dir, printed=False)
    lab = [p for p in everything if "api/laboratory/" in p.as_posix()]
    lib = [p for p in everything if "api/library/" in p.as_posix()]
    assert len(lab) >= 10 and len(lib) >= 10, (len(lab), len(lib))
    bookmarks = {_squash(_unnumbered(b)) for b in _doc_bookmarks(reader)}
    assert all(_squash(_title(p)) in bookmarks for p in lib), "a library module's page is not printed"
    assert not [p.name for p in lab if _squash(_title(p)) in bookmarks], "a laboratory module's page is printed"
    uris = [str(a["/A"].get_object().get("/URI", "")) for _, a in _links(reader) if a.get("/A") is not None]
    online = [u for u in uris if "/book/api/laboratory/" in u]
    print(f"\nPDF: {len(lib)} library module pages printed, {len(lab)} laboratory pages left to the site, "
          f"{len(online)} links to them")
    assert online, "no link of the PDF leads to the laboratory's pages on the site"


def _doc_ranges(reader, site_dir: Path) -> dict[str, range]:
    """docname ("notebooks/06_alternatives"): the range of its pages in the PDF."""
    starts = [reader.get_destination_page_number(o) for o in _doc_outline(reader)]
    docs = [str(p.relative_to(site_dir).with_suffix("")) for p in _toc_pages(site_dir)]
    assert len(starts) == len(docs), (len(starts), len(docs))
    ends = starts[1:] + [len(reader.pages)]
    return {d: range(s, e) for d, s, e in zip(docs, starts, ends)}


def _bad_links(reader) -> tuple[list[str], list[str], int]:
    """(links to the print server, links to a named destination the PDF lacks, all links)."""
    named = reader.named_destinations
    local, dangling, n = [], [], 0
    for i, annot in _links(reader):
        n += 1
        action = annot.get("/A")
        uri = str(action.get_object().get("/URI", "")) if action is not None else ""
        if re.match(r"https?://(127\.0\.0\.1|localhost|\[::1\])[:/]", uri):
            local.append(f"p. {i + 1}: {uri}")
        dest = annot.get("/Dest")
        if dest is not None and not isinstance(dest.get_object(), list) and str(dest) not in named:
            dangling.append(f"p. {i + 1}: {dest}")
    return local, dangling, n


def _links(reader):
    """(page index, link annotation) of every link of the PDF."""
    for i, page in enumerate(reader.pages):
        for ref in page.get("/Annots") or []:
            annot = ref.get_object()
            if annot.get("/Subtype") == "/Link":
                yield i, annot


def test_pdf_links_stay_in_the_book(pdf, site_dir: Path):  # noqa: F811
    """Reading item 2: no link of the PDF points to the local server that printed it
    (``http://127.0.0.1:<port>/...``, dead once printed), and every link to a named
    destination finds it. (Before: 846 of 1,694 links pointed to the print server.)"""
    reader, _ = pdf
    local, dangling, n = _bad_links(reader)
    print(f"\nPDF links: {n}, to the local server: {len(local)}, to a missing destination: {len(dangling)}")
    assert n > 100, f"only {n} links in the PDF"
    assert not local, f"{len(local)} links to the print server:\n" + "\n".join(local[:20])
    assert not dangling, f"{len(dangling)} links to missing destinations:\n" + "\n".join(dangling[:20])


def test_pdf_links_land_in_the_right_chapter(pdf, site_dir: Path):  # noqa: F811
    """Reading item 2: each destination is named for its document
    (``notebooks/06_alternatives#summary``) and lies in that document's pages, so the
    "Summary" and "Exercises" of chapter 6 are chapter 6's (they once all led to chapter
    1's); every chapter's links to its own sections land in the chapter; its section
    bookmarks too."""
    reader, _ = pdf
    ranges = _doc_ranges(reader, site_dir)
    wrong = []
    for name, dest in reader.named_destinations.items():
        doc = str(name).partition("#")[0]
        at = reader.get_destination_page_number(dest)
        if doc not in ranges:
            wrong.append(f"destination {name}: no such document")
        elif at not in ranges[doc]:
            wrong.append(f"destination {name}: p. {at + 1}, outside pp. {ranges[doc].start + 1}-{ranges[doc].stop}")
    own = 0
    for i, annot in _links(reader):
        dest = annot.get("/Dest")
        if dest is None or isinstance(dest.get_object(), list):
            continue
        doc = next(d for d, r in ranges.items() if i in r) if any(i in r for r in ranges.values()) else None
        if doc and str(dest).startswith(doc + "#"):
            own += 1
    sections = 0
    outline = reader.outline
    for item, kids in zip(outline, outline[1:] + [None]):
        if isinstance(item, list) or not isinstance(kids, list):
            continue
        doc = next((d for d, r in ranges.items() if reader.get_destination_page_number(item) == r.start), None)
        for kid in kids:
            if isinstance(kid, list):
                continue
            sections += 1
            if doc and reader.get_destination_page_number(kid) not in ranges[doc]:
                wrong.append(f"bookmark {kid.title!r} of {doc} outside its pages")
    print(f"\nPDF: {len(reader.named_destinations)} named destinations, {own} links within their own "
          f"document, {sections} section bookmarks")
    assert own > 0 and sections > 0
    assert not wrong, f"{len(wrong)} destinations outside their document:\n" + "\n".join(wrong[:20])


def test_pdf_leaves_out_hidden_code(pdf):
    """Reading item 3: the figures' plotting code, hidden on the web behind "Show code cell
    source" (tag hide-input), is not printed (it once took about 14 pages, under that label)."""
    _, text = pdf
    assert _squash("Show code cell source") not in text


def _pdf_book():
    """book/_ext/pdf_book.py, the extension that prints the PDF."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book" / "_ext"))
    try:
        import pdf_book
    finally:
        sys.path.pop(0)
    return pdf_book


def _chapter_ranges(reader, site_dir: Path) -> dict[str, tuple[str, range]]:
    """docname: (chapter number, its pages in the whole book) for each numbered chapter."""
    ranges = _doc_ranges(reader, site_dir)
    out = {}
    for page in _toc_pages(site_dir):
        num = _number(page)
        if num:
            doc = str(page.relative_to(site_dir).with_suffix(""))
            out[doc] = (num, ranges[doc])
    return out


SLIVER_PT = 12.0


def test_pdf_no_empty_code_frames(pdf, site_dir: Path):  # noqa: F811
    """Reading item 3: no code cell's frame is printed empty, its top at the foot of a page
    and its code on the next (the reader review counted at least 42 such pages; the print
    of chapters 2 and 6 had 15 before the print style kept the frame with its code). Every
    piece of every frame of the chapters (its left border, as filled on each page) has
    code beside it. Prints each chapter's page count."""
    reader, _ = pdf
    pdf_book = _pdf_book()
    chapters = _chapter_ranges(reader, site_dir)
    assert len(chapters) >= 6, sorted(chapters)
    empty, n = [], 0
    print("\nprinted chapters (pages, code frame pieces, empty):")
    for doc, (num, pages) in chapters.items():
        frames = pdf_book.code_frames(site_dir / PDF_NAME, pages)
        n += len(frames)
        # a piece shorter than one printed code line (12 pt) is the frame's bottom padding
        # carried past a page break after the code: printed here, not a frame without code
        slivers = [f for f in frames if f["text_runs"] == 0 and f["height"] < SLIVER_PT]
        bad = [f for f in frames if f["text_runs"] == 0 and f["height"] >= SLIVER_PT]
        empty += [f"{doc}: p. {f['page']}, {f['height']} pt of empty frame" for f in bad]
        print(f"  chapter {num}: {len(pages)} pages, {len(frames)} frame pieces, {len(bad)} empty,",
              f"{len(slivers)} padding slivers under {SLIVER_PT} pt")
    assert n > 100, f"only {n} code frames found: is the frames' colour still {pdf_book.FRAME_RGB}?"
    assert not empty, f"{len(empty)} empty code frames:\n" + "\n".join(empty[:20])


def test_pdf_one_per_chapter(pdf, site_dir: Path):  # noqa: F811
    """Reading item 3: beside the whole book, each chapter is a PDF of its own
    (``posenc-book-ch06.pdf``): the chapter's pages as the book prints them, its bookmark
    with one per section, no link to the print server, no link to a destination it lacks,
    links out of the chapter (citations, other chapters) to the published site."""
    from pypdf import PdfReader

    reader, _ = pdf
    pdf_book = _pdf_book()
    site_url = pdf_book.book_meta(Path(__file__).resolve().parents[2]).url
    chapters = _chapter_ranges(reader, site_dir)
    outline = reader.outline
    kids = {}
    for item, nxt in zip(outline, outline[1:] + [None]):
        if not isinstance(item, list) and isinstance(nxt, list):
            kids[reader.get_destination_page_number(item)] = [k.title for k in nxt if not isinstance(k, list)]
    problems = []
    for doc, (num, pages) in chapters.items():
        path = site_dir / pdf_book.chapter_pdf_name(num)
        if not path.is_file():
            problems.append(f"chapter {num}: no {path.name}")
            continue
        ch = PdfReader(path)
        if len(ch.pages) != len(pages):
            problems.append(f"{path.name}: {len(ch.pages)} pages, the book prints the chapter on {len(pages)}")
        first = _squash(ch.pages[0].extract_text() or "")
        if _squash(reader.pages[pages.start].extract_text() or "") != first:
            problems.append(f"{path.name}: its first page is not the chapter's first page in the book")
        top = [o for o in ch.outline if not isinstance(o, list)]
        sub = [k.title for k in (ch.outline[1] if len(ch.outline) > 1 and isinstance(ch.outline[1], list) else [])]
        if not top or not top[0].title.startswith(f"{num}. "):
            problems.append(f"{path.name}: bookmark {top[0].title if top else None!r}")
        if sub != kids.get(pages.start, []) or not sub:
            problems.append(f"{path.name}: section bookmarks {sub[:3]}... differ from the book's")
        local, dangling, _ = _bad_links(ch)
        problems += [f"{path.name} {x} (the print server)" for x in local]
        problems += [f"{path.name} {x} (a missing destination)" for x in dangling]
        # a citation or a reference to another chapter leads to the published site
        online = sum(1 for _, a in _links(ch) if a.get("/A") is not None
                     and str(a["/A"].get_object().get("/URI", "")).startswith(site_url))
        if site_url and not online:
            problems.append(f"{path.name}: no link out of the chapter goes to the published site {site_url}")
        print(f"\n{path.name}: {len(ch.pages)} pages, {len(sub)} section bookmarks, {online} links to the site")
    assert not problems, "\n".join(problems[:30])


def test_pdf_contents_list_sections(pdf, site_dir: Path):  # noqa: F811
    """Reading item 3: the printed contents list every section (each section bookmark)
    with the page it starts on, not only the documents."""
    reader, _ = pdf
    outline = reader.outline
    contents = [o for o in outline if not isinstance(o, list) and o.title == "Contents"]
    first = reader.get_destination_page_number(contents[0])
    last = reader.get_destination_page_number(_doc_outline(reader)[0])
    toc = _squash(" ".join((reader.pages[i].extract_text() or "") for i in range(first, last)))
    missing, n = [], 0
    for item in outline:
        if not isinstance(item, list):
            continue
        for kid in item:
            if isinstance(kid, list):
                continue
            n += 1
            entry = _squash(kid.title) + str(reader.get_destination_page_number(kid) + 1)
            if entry not in toc:
                missing.append(f"{kid.title} ... {reader.get_destination_page_number(kid) + 1}")
    print(f"\ncontents: {last - first} pages, {n} sections")
    assert n >= 50, n
    assert not missing, f"{len(missing)} sections missing from the contents:\n" + "\n".join(missing[:20])
