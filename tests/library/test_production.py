"""posenc as engineers install it (issue 32): layering, cheap decoding, FlexAttention,
Hugging Face drop-in tables and the small refusals."""

from __future__ import annotations

import ast
import pathlib

import pytest
import torch

import posenc

ROOT = pathlib.Path(posenc.__file__).parent


def _posenc_imports(path: pathlib.Path) -> set[str]:
    """The relative and ``posenc`` imports of a module, as written."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("posenc")):
            out.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("posenc"))
    return out


def test_the_shared_checks_import_nothing_of_posenc():
    assert _posenc_imports(ROOT / "_checks.py") == set()


def test_the_rotary_checks_import_only_the_shared_checks_and_the_core():
    assert _posenc_imports(ROOT / "rope" / "_checks.py") == {".._checks", ".core"}
