"""Sphinx extension of the book: the API reference, one page per module, and the cross-references
of posenc's docstrings.

The API reference has one page per module: ``book/api/library/<module>.md`` for the
library (``posenc``, ``posenc.rope``), ``book/api/laboratory/<module>.md`` for the
laboratory (``posenc.book``), each an ``automodule`` under an ``api-<module>`` label
(``api-bias``, ``api-rope-core``, ``api-book-synthetic``); ``_toc.yml`` takes them in by
glob. The directive ``posenc-modules <package>`` lists a package's public modules, found
by walking it (no list kept by hand), each linked to its page with its docstring's first
paragraph. A module without a page is an undefined label there, so a build with ``-n -W``
fails until its page is written (``tests/book/test_api_docs.py`` says which file to add).

Docstrings name objects the way readers import them (``posenc.sinusoidal_frequencies``,
or a bare ``SCHEMES`` inside ``posenc.models``), while autodoc documents each object
under its defining module (``posenc.sinusoidal.sinusoidal_frequencies``). Under
``-n -W`` every such reference would be a warning. On a reference Sphinx cannot resolve
this extension

* maps a top-level name ``posenc.X`` (any name in ``posenc.__all__``) to the module that
  defines it, and a bare or partly qualified name to the posenc module that holds it;
* links a module-level constant that has no entry of its own (no ``#:`` doc comment) to
  the documentation of its module.

References that still cannot be resolved are left alone, so Sphinx reports them.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

def public_modules(package: str) -> list[str]:
    """The public modules of ``package`` (itself excluded, subpackages not entered), sorted."""
    pkg = importlib.import_module(package)
    return sorted(
        m.name
        for m in pkgutil.iter_modules(pkg.__path__, package + ".")
        if not m.name.rsplit(".", 1)[-1].startswith("_") and not m.ispkg
    )


def _all_modules() -> list[str]:
    return ["posenc", *public_modules("posenc"), "posenc.book", *public_modules("posenc.book")]


def api_label(module: str) -> str:
    """The label of a module's API page: ``posenc.book.synthetic`` -> ``api-book-synthetic``."""
    return "api-" + module.removeprefix("posenc.").replace(".", "-")


# The laboratory is the library's subpackage but a floor of its own, with its own list.
LABORATORY = "posenc.book"


def listed_modules(package: str) -> list[str]:
    """The modules ``posenc-modules <package>`` lists: its public modules and subpackages
    (the laboratory left out of the library's list), sorted."""
    pkg = importlib.import_module(package)
    return sorted(
        m.name
        for m in pkgutil.iter_modules(pkg.__path__, package + ".")
        if not m.name.rsplit(".", 1)[-1].startswith("_") and m.name != LABORATORY
    )


class PosencModules(SphinxDirective):
    """``posenc-modules <package>``: a list of the package's public modules, each linked to
    its API page (label ``api_label``) with the first paragraph of its docstring."""

    required_arguments = 1

    def run(self):
        package = self.arguments[0]
        lines = ["```{eval-rst}"]
        for name in listed_modules(package):
            module = importlib.import_module(name)
            doc = " ".join((inspect.getdoc(module) or name).split("\n\n")[0].split()).rstrip(".")
            lines.append(f"* :ref:`{name} <{api_label(name)}>`: {doc}.")
        lines += ["```", ""]
        content = StringList(lines, source=f"<posenc-modules {package}>")
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, content, node)
        return node.children


def _candidates(target: str, current_module: str | None) -> list[str]:
    """Fully qualified names the target may stand for, best first."""
    out = []
    name = target.split(".")[-1]
    mods = []
    if current_module:
        mods.append(current_module)
    for mod in _all_modules():
        try:
            module = importlib.import_module(mod)
        except Exception:  # a module that does not exist (yet) is simply skipped
            continue
        if hasattr(module, name):
            obj = getattr(module, name)
            defining = getattr(obj, "__module__", None)
            if isinstance(defining, str) and defining.startswith("posenc"):
                mods.insert(0, defining)
            mods.append(mod)
    for mod in dict.fromkeys(mods):
        out.append(f"{mod}.{name}")
    return out


def _resolve(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not target or (not target.startswith("posenc") and "." in target):
        return None
    domain = env.get_domain("py")
    builder = app.builder
    current = node.get("py:module")
    for full in _candidates(target, current):
        if full == target:
            continue
        if full in domain.objects:
            found = domain.resolve_any_xref(env, node["refdoc"], builder, full, node, contnode)
            if found:
                return found[0][1]
    # An undocumented module-level constant: link to its module's documentation.
    if node.get("reftype") in ("data", "const", "attr", "obj"):
        for full in _candidates(target, current):
            module_name, _, attr = full.rpartition(".")
            try:
                module = importlib.import_module(module_name)
            except Exception:
                continue
            if hasattr(module, attr) and module_name in domain.modules:
                refs = domain.resolve_xref(
                    env, node["refdoc"], builder, "mod", module_name, node, contnode
                )
                if refs is not None:
                    return refs
    return None


def setup(app):
    app.add_directive("posenc-modules", PosencModules)
    app.connect("missing-reference", _resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
