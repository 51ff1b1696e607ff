"""The files that ship with ``posenc.book`` are found through one function, from anywhere."""

from __future__ import annotations

import json

import pytest

from posenc.book import realtext, resources, results


def test_every_shipped_file_is_found_by_its_bare_name():
    names = resources.resource_names()
    assert "tinyshakespeare.txt" in names and "README.md" not in names
    for name in names:
        assert resources.resource_path(name) == resources.DATA_DIR / name
    # every results file is one that read_results accepts
    for name in (n for n in names if n.endswith(".json")):
        assert isinstance(results.read_results(name)["rows"], list)


def test_bare_names_read_the_shipped_results_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shipped = results.read_results("realtext.json")
    assert shipped == json.loads(resources.resource_path("realtext.json").read_text())
    # a path with a folder is read as given, even with a shipped file's name
    (tmp_path / "realtext.json").write_text(json.dumps({"rows": [{"seed": 7}]}))
    assert results.read_results("./realtext.json")["rows"] == [{"seed": 7}]
    assert results.read_results(tmp_path / "realtext.json")["rows"] == [{"seed": 7}]
    # a bare name that does not ship is a file of the current folder, as before
    (tmp_path / "mine.json").write_text(json.dumps({"rows": []}))
    assert results.read_results("mine.json") == {"rows": []}


def test_the_default_corpus_is_the_shipped_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert realtext.CORPUS_FILE == resources.resource_path("tinyshakespeare.txt")
    corpus = realtext.load_corpus()
    assert corpus.sha256 == realtext.CORPUS_SHA256 and len(corpus.text) == 1115394


@pytest.mark.parametrize(
    "name, error",
    [(3, TypeError), (None, TypeError), ("", ValueError), ("..", ValueError), ("data/x.json", ValueError),
     ("../resources.py", ValueError), ("missing.json", ValueError)],
)
def test_names_that_do_not_ship_are_refused(name, error):
    with pytest.raises(error, match="name"):
        resources.resource_path(name)
