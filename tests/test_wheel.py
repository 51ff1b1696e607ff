"""The built package is whole: the wheel installs and runs outside the checkout.

An editable install (what the test suite runs against) reads ``posenc`` from the source
tree, so it cannot show a subpackage or a data file that the wheel leaves out. This test
builds the wheel from a copy of what the build reads (``pyproject.toml``, ``README.md``,
``LICENSE``, ``posenc/``), installs it into an empty folder with ``pip --target``, and runs
``posenc`` and ``posenc.book`` in a fresh interpreter started with ``-S`` (no ``site``, so
no ``.pth`` file and no editable finder) from another empty folder: only the wheel's files
can be imported. torch, numpy and the ``book`` extra's packages come from the current
environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# what the fresh interpreter runs: every module imports, the library rotates, the
# laboratory finds its corpus and a saved result, and every file it loaded is the wheel's
RUN_INSTALLED = r"""
import importlib, importlib.resources, json, pkgutil, sys
import torch
import posenc
from posenc.book import realtext, results

modules = ["posenc"] + [m.name for m in pkgutil.walk_packages(posenc.__path__, "posenc.")]
for name in modules:
    if not name.endswith("_triton"):  # needs triton, which a CPU environment lacks
        importlib.import_module(name)
rope = posenc.RotaryEmbedding(8)
q = rope(torch.ones(1, 2, 5, 8))
corpus = realtext.load_corpus()
saved = results.read_results("alternatives.json")
loaded = {n: getattr(m, "__file__", None) for n, m in sys.modules.items() if n == "posenc" or n.startswith("posenc.")}
print(json.dumps({
    "modules": modules,
    "files": loaded,
    "shape": list(q.shape),
    "corpus": [corpus.vocab_size, len(corpus.text)],
    "rows": len(saved["rows"]),
    "typed": importlib.resources.files("posenc").joinpath("py.typed").is_file(),
}))
"""


def _source_packages() -> list[str]:
    """Every package (a folder with ``__init__.py``) under ``posenc/``, dotted."""
    return sorted(".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "posenc").rglob("__init__.py"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    from importlib.metadata import version

    # offline: the build uses this environment's setuptools (requirements.txt asks for 77+)
    major = int(version("setuptools").split(".")[0])
    assert major >= 77, f"setuptools {version('setuptools')} is too old to build posenc (77+: pip install -r requirements.txt)"
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "posenc", src / "posenc", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (whl,) = out.glob("posenc-*.whl")
    return whl


def test_wheel_holds_every_package_the_types_marker_and_the_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [p for p in _source_packages() if p.replace(".", "/") + "/__init__.py" not in names]
    assert not missing, f"packages missing from the wheel: {missing}"
    shipped = {p.name for p in (ROOT / "posenc" / "book" / "data").iterdir() if p.is_file()}
    assert {"tinyshakespeare.txt", "README.md", "realtext.json"} <= shipped
    for name in ["posenc/py.typed"] + [f"posenc/book/data/{n}" for n in sorted(shipped)]:
        assert name in names, f"{name} is not in the wheel"
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in meta
    torch_floor = next(line for line in meta.splitlines() if line.startswith("Requires-Dist: torch"))
    assert torch_floor == "Requires-Dist: torch>=2.10", torch_floor  # the oldest torch tested (pyproject.toml)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_wheel_installs_and_runs_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # the wheel first, then this environment's packages (torch, numpy, the book extra)
    # without its .pth files, so the editable install of the checkout stays invisible
    paths = [str(site), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env |= {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-S", "-c", RUN_INSTALLED], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    outside = {n: f for n, f in got["files"].items() if f is None or not Path(f).resolve().is_relative_to(site.resolve())}
    assert not outside, f"modules not loaded from the installed wheel: {outside}"
    assert set(_source_packages()) <= set(got["modules"])
    assert got["shape"] == [1, 2, 5, 8]
    assert got["corpus"] == [65, 1115394]
    assert got["rows"] > 0
    assert got["typed"]


def test_wheel_metadata_passes_twine_check(wheel):
    pytest.importorskip("twine", reason="twine is not installed (the release workflow runs twine check)")
    check = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
