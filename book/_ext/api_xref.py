"""Sphinx extension of the book: the API page, and the cross-references of posenc's docstrings.

The directive ``posenc-modules`` writes the API page by walking a package: one section
per public module (its docstring's first line as the title, an ``api-<module>`` label),
each an ``automodule`` with its members. No list of modules is kept by hand: a module
added to ``posenc`` or ``posenc.book`` appears on the page at the next build.

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


class PosencModules(SphinxDirective):
    """``posenc-modules <package>``: a section with an automodule for each public module."""

    required_arguments = 1

    def run(self):
        package = self.arguments[0]
        lines = []
        for name in public_modules(package):
            module = importlib.import_module(name)
            doc = (inspect.getdoc(module) or name).splitlines()[0].rstrip(".")
            label = "api-" + name.removeprefix("posenc.").replace(".", "-")
            # the page is MyST markdown, so the generated content is too
            lines += [f"({label})=", f"### `{name}`: {doc}", ""]
            lines += ["```{eval-rst}", f".. automodule:: {name}", "   :members:", "```", ""]
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
