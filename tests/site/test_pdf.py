"""The PDF of the whole book (``_build/html/posenc-book.pdf``, printed offline by
Chromium at the end of the book build, see ``book/_ext/pdf_book.py``): it was built, and
it holds every page's title (every chapter's included), every numbered figure's caption
and at least as many images as the pages show.

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


def _toc_pages(site: Path) -> list[Path]:
    """The pages of the book, in the order of the table of contents (front page first)."""
    front = site / "book" / "intro.html"
    text = front.read_text(encoding="utf-8")
    nav = re.search(r'<nav class="[^"]*\bbd-docs-nav\b.*?</nav>', text, re.S)
    hrefs = re.findall(r'<a class="reference internal" href="([^"#]+)"', nav.group(0) if nav else "")
    pages = [front]
    for h in hrefs:
        p = (front.parent / h).resolve()
        if p.is_file() and p not in pages:
            pages.append(p)
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
    bookmarks = [o.title for o in reader.outline if not isinstance(o, list)]
    assert [_squash(b) for b in bookmarks] == [_squash(_title(p)) for p in pages], bookmarks
    print(f"\nPDF: {len(reader.pages)} pages, {len(pages)} documents")


def test_pdf_holds_every_figure(pdf, site_dir: Path):  # noqa: F811
    """Every numbered figure's caption is in the PDF, and each document's part of the PDF
    holds at least as many images as the page shows distinct ones."""
    reader, text = pdf
    pages = _toc_pages(site_dir)
    starts = [reader.get_destination_page_number(o) for o in reader.outline if not isinstance(o, list)]
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
