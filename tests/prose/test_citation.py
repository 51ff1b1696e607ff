"""The book is citable and linkable: bibliography, citation metadata, stable labels.

* ``references.bib`` parses, has no duplicate keys, and every entry carries what a reader
  needs to find the work (authors, title, year, venue, and a DOI, arXiv id, ISBN or URL,
  each well formed);
* every ``{cite}`` in the chapters and pages names an entry of ``references.bib``;
* ``CITATION.cff`` has the fields the citation tools read and names both licences, and
  the BibTeX entry of the README is the one on the "How to cite" page (the CFF schema
  itself is validated by ``cffconvert --validate`` in ``.ci/run``);
* every chapter, section, figure, display equation and exercise has an explicit,
  stable label of the documented form, so course material can link to it; every
  chapter opens with learning objectives and ends with a summary and exercises whose
  solutions are collapsed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


BIB = ROOT / "references.bib"


CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


PAGES = sorted((ROOT / "book").glob("*.md"))


CITE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]+)`")


VENUE_FIELD = {
    "article": "journal",
    "inproceedings": "booktitle",
    "incollection": "booktitle",
    "book": "publisher",
    "techreport": "institution",
}


# ----------------------------------------------------------------------------- helpers
def _markdown_cells(nb_path: Path) -> list[str]:
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


def _all_text() -> dict[str, str]:
    texts = {p.relative_to(ROOT).as_posix(): "\n".join(_markdown_cells(p)) for p in CHAPTERS}
    texts.update({p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in PAGES})
    return texts


@pytest.fixture(scope="module")
def bib():
    from pybtex.database import parse_file

    # strict parsing: a duplicate key raises instead of being silently dropped
    return parse_file(str(BIB), bib_format="bibtex")


def _bibtex_block(text: str) -> str:
    m = re.search(r"```bibtex\n(.*?)```", text, re.S)
    assert m, "no ```bibtex block"
    return m.group(1).strip()


# ----------------------------------------------------------------------------- labels
LABEL_LINE = re.compile(r"^\(([A-Za-z0-9_.:-]+)\)=\s*$")


def _chapter_problems(nb_path: Path) -> list[str]:
    cells = _markdown_cells(nb_path)
    name = nb_path.name
    problems = []
    lines = "\n".join(cells).splitlines()
    # chapter label before the title
    first = [ln for ln in lines if ln.strip()][:2]
    if not (first and LABEL_LINE.match(first[0]) and first[0].startswith("(ch-")):
        problems.append(f"{name}: the first line is not a (ch-...)= label")
    # every section heading has a label line right before it
    for i, ln in enumerate(lines):
        if re.match(r"^#{2,4} ", ln):
            prev = next((p for p in reversed(lines[:i]) if p.strip()), "")
            m = LABEL_LINE.match(prev)
            if not (m and m.group(1).startswith("sec-")):
                problems.append(f"{name}: section {ln.strip()!r} has no (sec-...)= label")
    text = "\n".join(cells)
    # figures
    for m in re.finditer(r"```\{(?:glue:figure|figure)\}[^\n]*\n((?::[^\n]*\n)*)", text):
        opts = m.group(1)
        if not re.search(r"^:name: fig-", opts, re.M):
            problems.append(f"{name}: figure without ':name: fig-...'")
        if not re.search(r"^:alt: \S", opts, re.M):
            problems.append(f"{name}: figure without alt text")
    # display equations: $$ ... $$ (eq-label); steps inside a proof are linked through
    # the labelled theorem they prove
    outside_proofs = re.sub(r"```\{prf:proof\}.*?\n```", "", text, flags=re.S)
    for m in re.finditer(r"\$\$(.+?)\$\$([^\n]*)", outside_proofs, re.S):
        if not re.match(r"\s*\(eq-[A-Za-z0-9_-]+\)", m.group(2)):
            problems.append(f"{name}: display equation without (eq-...) label: {m.group(1)[:50]!r}")
    for m in re.finditer(r"```\{math\}[^\n]*\n((?::[^\n]*\n)*)", text):
        if not re.search(r"^:label: eq-", m.group(1), re.M):
            problems.append(f"{name}: math directive without ':label: eq-...'")
    # exercises and solutions
    exercises = re.findall(r"```\{exercise\}[^\n]*\n((?::[^\n]*\n)*)", text)
    labels = []
    for opts in exercises:
        m = re.search(r"^:label: (ex-\S+)", opts, re.M)
        if not m:
            problems.append(f"{name}: exercise without ':label: ex-...'")
        else:
            labels.append(m.group(1))
    if not labels:
        problems.append(f"{name}: no exercises")
    for lab in labels:
        sol = re.search(r"```\{solution(?:-start)?\} " + re.escape(lab) + r"\s*\n((?::[^\n]*\n)*)", text)
        if not sol:
            problems.append(f"{name}: exercise {lab} has no solution")
        elif ":class: dropdown" not in sol.group(1):
            problems.append(f"{name}: solution of {lab} is not collapsed (:class: dropdown)")
    # learning objectives at the top, a summary at the end
    head = "\n".join(cells[:3]).lower()
    if not re.search(r"objective|you will learn|what you will|learning goals", head):
        problems.append(f"{name}: no learning objectives in the first cells")
    if not re.search(r"^#{2,3} .*summary", text, re.M | re.I):
        problems.append(f"{name}: no summary section")
    return problems


# ----------------------------------------------------------------------------- bibliography
def test_bib_has_no_duplicate_keys():
    keys = re.findall(r"^@\w+\s*\{\s*([^,\s]+)\s*,", BIB.read_text(encoding="utf-8"), re.M)
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    assert not dupes, f"duplicate keys in references.bib: {dupes}"
    lower = [k.lower() for k in keys]
    assert len(set(lower)) == len(lower), "keys differing only in case"


def test_bib_entries_are_complete_and_well_formed(bib):
    problems = []
    for key, entry in bib.entries.items():
        f = {k.lower(): v for k, v in entry.fields.items()}
        kind = entry.type.lower()
        if not entry.persons.get("author"):
            problems.append(f"{key}: no author")
        if not f.get("title"):
            problems.append(f"{key}: no title")
        if not re.fullmatch(r"(19|20)\d\d", f.get("year", "")):
            problems.append(f"{key}: year {f.get('year')!r}")
        venue = VENUE_FIELD.get(kind)
        if venue and not f.get(venue):
            problems.append(f"{key}: @{kind} without {venue}")
        if not any(f.get(k) for k in ("doi", "eprint", "isbn", "url")):
            problems.append(f"{key}: no DOI, arXiv id, ISBN or URL")
        if f.get("doi") and not re.fullmatch(r"10\.\d{4,9}/\S+", f["doi"]):
            problems.append(f"{key}: malformed DOI {f['doi']!r}")
        if f.get("eprint"):
            if f.get("archiveprefix", "arXiv").lower() != "arxiv":
                problems.append(f"{key}: eprint from an unknown archive")
            elif not re.fullmatch(r"\d{4}\.\d{4,5}", f["eprint"]):
                problems.append(f"{key}: malformed arXiv id {f['eprint']!r}")
        if f.get("url") and not f["url"].startswith("https://"):
            problems.append(f"{key}: URL should be https: {f['url']}")
        if f.get("pages") and not re.fullmatch(r"\d+(--\d+)?|[A-Za-z]?\d+", f["pages"]):
            problems.append(f"{key}: pages {f['pages']!r} (use 12--34)")
    assert not problems, "\n".join(problems)


def test_every_citation_names_a_bib_entry(bib):
    missing = []
    for name, text in _all_text().items():
        for group in CITE.findall(text):
            for key in (k.strip() for k in group.split(",")):
                if key not in bib.entries:
                    missing.append(f"{name}: {key}")
    assert not missing, "cited but not in references.bib:\n" + "\n".join(missing)


# ----------------------------------------------------------------------------- citation
def test_citation_cff_fields():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    for field in ("message", "title", "authors", "version", "license", "repository-code"):
        assert cff.get(field), field
    assert set(cff["license"]) == {"CC-BY-4.0", "MIT"}
    pref = cff["preferred-citation"]
    assert pref["type"] == "book" and pref["title"] and pref["authors"] and pref["year"]
    version = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert str(cff["version"]) == version, "CITATION.cff and pyproject.toml disagree on the version"


def test_readme_and_citing_page_give_the_same_bibtex():
    readme = _bibtex_block((ROOT / "README.md").read_text(encoding="utf-8"))
    page = _bibtex_block((ROOT / "book" / "citing.md").read_text(encoding="utf-8"))
    assert readme == page
    from pybtex.database import parse_string

    parsed = parse_string(readme, "bibtex")
    (entry,) = parsed.entries.values()
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert entry.fields["title"] == cff["preferred-citation"]["title"]
    assert entry.fields["year"] == str(cff["preferred-citation"]["year"])


def test_licences_stated():
    assert "MIT License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "CC-BY-4.0" in (ROOT / "LICENSE-TEXT.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "CC-BY-4.0" in readme and "MIT" in readme
    footer = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["html"]["extra_footer"]
    assert "CC-BY-4.0" in footer and "MIT" in footer


@pytest.mark.parametrize("nb_path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_is_course_ready_with_stable_labels(nb_path):
    problems = _chapter_problems(nb_path)
    assert not problems, "\n".join(problems)


def test_labels_are_unique_across_the_book():
    seen: dict[str, str] = {}
    dupes = []
    for name, text in _all_text().items():
        labels = [m.group(1) for ln in text.splitlines() if (m := LABEL_LINE.match(ln))]
        labels += re.findall(r"^:(?:name|label): (\S+)", text, re.M)
        for lab in labels:
            if lab in seen and seen[lab] != name:
                dupes.append(f"{lab}: {seen[lab]} and {name}")
            seen.setdefault(lab, name)
    assert not dupes, "\n".join(dupes)


def test_every_misconception_has_verdict_evidence_and_source():
    text = (ROOT / "book" / "misconceptions.md").read_text(encoding="utf-8")
    claims = re.split(r"^\(sec-misconceptions-[a-z0-9-]+\)=\n### ", text, flags=re.M)[1:]
    assert len(claims) >= 20
    problems = []
    for claim in claims:
        title = claim.splitlines()[0]
        body = claim.split("\n(sec-misconceptions-")[0]
        if not re.search(r"\*\*Verdict: [a-z]", body):
            problems.append(f"{title}: no verdict")
        if not re.search(r"\*\*Evidence\.\*\*[^\n]*\{(?:ref|numref|eq)\}", body):
            problems.append(f"{title}: no evidence linked to the book")
        if not re.search(r"\*\*Primary source\.\*\*.*\{cite:[tp]\}", body, re.S):
            problems.append(f"{title}: no primary source cited")
    assert not problems, "\n".join(problems)


def test_bibliography_labels_are_author_year_like_the_citations():
    import importlib.util

    from pybtex.database import parse_file

    spec = importlib.util.spec_from_file_location("bib_style", ROOT / "book" / "_ext" / "bib_style.py")
    bib_style = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bib_style)
    entries = list(parse_file(str(ROOT / "references.bib")).entries.values())
    labels = list(bib_style.AuthorYearLabelStyle().format_labels(entries))
    pattern = re.compile(r"^[^\W\d][\w' .-]*( and [^\W\d][\w' .-]*| et al\.)?, \d{4}[a-z]?$")
    bad = [label for label in labels if not pattern.match(label)]
    assert not bad, bad
    assert len(set(labels)) == len(labels), "two entries share a label"
    config = (ROOT / "_config.yml").read_text()
    assert "bibtex_reference_style: author_year" in config and "bibtex_default_style: authoryear" in config
