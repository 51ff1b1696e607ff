"""Sphinx extension of the book: a bibliography whose labels match the author-year citations.

The chapters cite in author-year form ("Vaswani et al., 2017"), but sphinxcontrib-bibtex's
default style labels the bibliography entries alphanumerically ("[VSP+17]"), so a reader
cannot match a citation to its entry at a glance. This extension registers the pybtex
style ``authoryear``: the entries of ``unsrt`` sorted by author, year and title, each
labelled as the text cites it ("Vaswani et al., 2017"; two authors joined by "and"; a
letter appended where two entries would otherwise share a label). ``_config.yml`` selects
it with ``bibtex_default_style: authoryear``.

The text's citations follow the same rule: an entry whose author list BibTeX truncates
(``Dubey, Abhimanyu and others``) is cited "Dubey et al.", as every longer list is,
not "Dubey and others" (sphinxcontrib-bibtex counts "others" as a second author).
"""

from __future__ import annotations

import codecs
from collections import Counter

import latexcodec  # noqa: F401 - registers the "ulatex" codec

from docutils import nodes
from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle


def _last_names(person) -> str:
    # "von" parts stay with the surname; LaTeX accents become Unicode (G\\'eron -> Géron)
    name = " ".join(person.prelast_names + person.last_names)
    return codecs.decode(name, "ulatex").replace("{", "").replace("}", "")


def author_year_label(entry) -> str:
    """``Vaswani et al., 2017`` for an entry, as the author-year citations print it."""
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_last_names(p) for p in persons]
    if "others" in names:  # BibTeX's "and others": the list is truncated
        names = names[: names.index("others")] + ["", ""]
    if not names:
        who = entry.fields.get("title", entry.key)
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabelStyle(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [author_year_label(e) for e in entries]
        counts = Counter(labels)
        seen: Counter = Counter()
        for label in labels:
            if counts[label] > 1:
                seen[label] += 1
                yield f"{label}{chr(ord('a') + seen[label] - 1)}"
            else:
                yield label


class AuthorYearStyle(UnsrtStyle):
    default_label_style = AuthorYearLabelStyle
    default_sorting_style = SortingStyle


_AND_OTHERS = " and others"


def _in_citation(node) -> bool:
    """Inside a citation: a reference, or the text of a textual citation ("Dubey and
    others [2024]", an inline of class bibtex-citation)."""
    while node is not None:
        if isinstance(node, nodes.reference) or "bibtex-citation" in getattr(node, "get", lambda *_: [])("classes", []):
            return True
        node = node.parent
    return False


def et_al_citations(app, doctree, docname) -> int:
    """In every citation, "Dubey and others" becomes "Dubey *et al.*"; returns how many."""
    n = 0
    for text in list(doctree.findall(nodes.Text)):
        value = str(text)
        if _AND_OTHERS in value and _in_citation(text.parent):
            head, _, tail = value.partition(_AND_OTHERS)
            parent = text.parent
            at = parent.index(text)
            parent.remove(text)
            new = [nodes.Text(head + " "), nodes.emphasis("", "et al.")] + ([nodes.Text(tail)] if tail else [])
            for i, node in enumerate(new):
                parent.insert(at + i, node)
            n += 1
    return n


def setup(app):
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    app.connect("doctree-resolved", et_al_citations)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
