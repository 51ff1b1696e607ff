"""One place for the repository URL: ``repository.url`` in ``_config.yml``.

The site takes it from there (launch and repository buttons, and the footer link written
by ``book/_ext/offline_site.py``). Files that cannot read the configuration (the README,
``CITATION.cff``, the pages and notebooks, e.g. a first cell that installs posenc on
Colab) must write the same URL: every GitHub link to this repository, under its owner or
its name, starts with ``repository.url``. Change the URL in ``_config.yml`` and this test
lists every place still pointing at the old one.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _repository_url() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return str(config["repository"]["url"]).rstrip("/")


def _files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CITATION.cff", ROOT / "pyproject.toml"]
    files += sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "notebooks").glob("*.ipynb"))
    return [f for f in files if f.is_file()]


def test_repository_url_written_once():
    url = _repository_url()
    m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+)", url)
    assert m, f"repository.url in _config.yml is not a GitHub repository URL: {url}"
    owner, name = m.groups()
    link = re.compile(r"github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)")
    stale = []
    for f in _files():
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            for hit in link.finditer(line):
                o, n = hit.group(1), hit.group(2).removesuffix(".git")
                if (o == owner or n == name) and (o, n) != (owner, name):
                    stale.append(f"{f.relative_to(ROOT)}:{i}: github.com/{o}/{n}")
    assert not stale, f"links to the repository other than repository.url ({url}):\n" + "\n".join(stale)


def test_footer_link_comes_from_the_configuration():
    """The footer text in _config.yml no longer repeats the URL (the extension adds it)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert _repository_url() not in config["html"].get("extra_footer", "")
    source = (ROOT / "book" / "_ext" / "offline_site.py").read_text(encoding="utf-8")
    assert 'get("repository_url")' in source
