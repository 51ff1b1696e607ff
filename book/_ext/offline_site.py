"""Sphinx extension of the book: keep every page self-contained and error-free offline.

Jupyter Book 1 registers sphinx-thebe and sphinx-togglebutton, and with Sphinx 7.4 two of
their inline scripts end up twice in every page (once with ``filename=None``, once with
``filename=""``, which Sphinx does not recognise as the same asset). The second copy of
``const THEBE_JS_URL = ...`` is a JavaScript ``SyntaxError`` on every page. This extension

* removes duplicate scripts from each page;
* gives the theme a default colour mode ("auto"), so a first visit logs no error;
* when live code (thebe) is not enabled among the launch buttons, which is the case for
  this book, removes thebe's scripts, stylesheet and page configuration, so that no page
  mentions a CDN at all (thebe would load its code from unpkg.com when started).

MathJax itself is served from ``_static/mathjax`` by the ``sphinx-mathjax-offline``
extension; the browser test in ``tests/test_site.py`` checks the result.
"""

from __future__ import annotations

import re

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


def setup(app):
    # Run after the themes and extensions that add page assets.
    app.connect("html-page-context", _clean_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
