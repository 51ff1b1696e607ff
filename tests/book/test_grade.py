"""The self-grading exercises (posenc.book.grade): the reference answer passes, typical
wrong answers are caught with a message that says which mistake they are, and bad input
to check and to the command line is refused naming the argument.

The wrong answers below are written out as a student would write them (numpy or torch
from the formulas); the right answers call posenc, the oracle.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import posenc
from posenc.book import grade
from posenc.book.analysis import offset_distance
from posenc.book.grade import EXERCISES, check, main

# ----------------------------------------------------------------------------- right answers

REFERENCE = {
    "ex-1-7": lambda n: posenc.causal_mask(n).numpy(),
    "ex-1-8": lambda q, k: posenc.relative_positions(q, k),
    "ex-2-1": lambda n, d, layout="interleaved": posenc.sinusoidal_encoding(n, d, layout=layout),
    "ex-2-2": lambda n: posenc.tensor2tensor_frequencies(n),
    "ex-2-4": lambda t, pad: posenc.fairseq_positions(t, pad),
    "ex-2-7": lambda k, d: posenc.relative_rotation(k, d),
    "ex-2-8": lambda d: posenc.layout_permutation(d),
    "ex-3-1": lambda k, d: offset_distance(k, d),
    "ex-3-3": lambda L, w: (np.sin(L * w / 2) * np.cos((L - 1) * w / 2)) / (L * np.sin(w / 2)),
    "ex-4-3": lambda hd, h: np.argsort(posenc.rotary_permutation(hd, h)),
    "ex-4-4": lambda hd, b, s, L, beta_fast=32, beta_slow=1: posenc.rotary_frequencies(hd, base=b, scaling={
        "rope_type": "yarn", "factor": s, "original_max_position_embeddings": L,
        "beta_fast": beta_fast, "beta_slow": beta_slow}),
    "ex-4-6": lambda x, p: posenc.apply_rotary(x, p, layout="half"),
    "ex-4-7": lambda x, p: posenc.apply_rotary(x, p, layout="interleaved"),
    "ex-5-4": lambda x, f: torch.cat([torch.cos(2 * math.pi * f * x[..., None]),
                                      torch.sin(2 * math.pi * f * x[..., None])], dim=-1),
    "ex-5-5": lambda x, e: posenc.PiecewiseLinearEncoding([e])(x[:, None])[:, 0, :],
    "ex-6-2": lambda r, bi, num_buckets=32, max_distance=128: posenc.t5_relative_bucket(r, bidirectional=bi),
    "ex-6-5": lambda n: posenc.alibi_slopes(n),
    "ex-7-1": lambda L: sorted(set(posenc.t5_relative_bucket(
        posenc.relative_positions(L)[posenc.causal_mask(L)], bidirectional=False).tolist())),
    "ex-7-5": lambda hd, b, s: posenc.rotary_frequencies(hd, base=b, scaling={"rope_type": "ntk", "factor": s}),
    "ex-8-1": lambda h, w, d: posenc.sinusoidal_encoding_2d((h, w), d),
    "ex-8-3": lambda segs, spatial_merge_size=2: posenc.mrope_position_ids(segs),
    "ex-8-4": lambda x, p: posenc.AxialRotaryEmbedding(x.shape[-1])(x, positions=p),
}


def test_at_least_16_exercises_two_per_chapter() -> None:
    assert len(EXERCISES) >= 16
    for chapter in range(1, 9):
        assert sum(ex.chapter == chapter for ex in EXERCISES.values()) >= 2, chapter
    for label, ex in EXERCISES.items():
        assert label == ex.label and label.startswith(f"ex-{ex.chapter}-")
        assert f"def {ex.function}(" in ex.stub and "NotImplementedError" in ex.stub


@pytest.mark.parametrize("label", sorted(EXERCISES))
def test_reference_passes(label: str) -> None:
    r = check(label, REFERENCE[label])
    assert r.passed and r.score == 1.0, r.report()
    assert r.report() == f"{label}: passed"


@pytest.mark.parametrize("label", sorted(EXERCISES))
def test_stub_is_not_attempted(label: str) -> None:
    namespace: dict = {}
    exec(EXERCISES[label].stub, namespace)
    r = check(label, namespace[EXERCISES[label].function])
    assert not r.passed and not r.attempted and "not attempted yet" in r.report()


# ----------------------------------------------------------------------------- wrong answers


def _table(n: int, d: int, layout: str = "interleaved", *, first: int = 0, two: float = 2.0, swap: bool = False):
    p = np.arange(first, first + n)[:, None]
    w = 1.0 / 10000 ** (two * np.arange(d // 2) / d)
    s, c = np.sin(p * w), np.cos(p * w)
    if swap:
        s, c = c, s
    if layout == "concatenated":
        return np.concatenate([s, c], axis=1)
    out = np.empty((n, d))
    out[:, 0::2], out[:, 1::2] = s, c
    return out


def _rope(x, p, *, layout="half", two=2.0, sign=1.0, first=0):
    d = x.shape[-1]
    w = 1.0 / 10000 ** (two * torch.arange(d // 2, dtype=torch.float64) / d)
    a = (p.double() + first)[:, None] * w
    cos, sin = torch.cos(a), sign * torch.sin(a)
    if layout == "half":
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def _yarn_untruncated(hd, b, s, L, beta_fast=32, beta_slow=1):
    w = 1.0 / b ** (np.arange(0, hd, 2) / hd)
    dim = lambda r: hd * math.log(L / (r * 2 * math.pi)) / (2 * math.log(b))  # noqa: E731
    lo, hi = max(dim(beta_fast), 0), min(dim(beta_slow), hd - 1)
    ramp = np.clip((np.arange(hd // 2) - lo) / (hi - lo), 0, 1)
    return w / s * ramp + w * (1 - ramp)


def _naive_slopes(n):
    return [2 ** (-8 * k / n) for k in range(1, n + 1)]


def _mrope_1d_restart(segs, spatial_merge_size=2):
    """Right inside the image, but the text after it continues from the token count."""
    ids, start = [], 0
    for kind, size in segs:
        if kind == "text":
            ids += [[start + i] * 3 for i in range(size)]
            start += size
        else:
            _, h, w = size
            gh, gw = h // 2, w // 2
            ids += [[start, start + j, start + k] for j in range(gh) for k in range(gw)]
            start += gh * gw
    return np.array(ids).T


WRONG = [
    ("ex-1-7", lambda n: np.triu(np.ones((n, n), bool)), "transpose"),
    ("ex-1-7", lambda n: np.tril(np.ones((n, n), bool), -1), "diagonal is missing"),
    ("ex-1-8", lambda q, k: (k - q + np.arange(q))[:, None] - np.arange(k)[None, :], "sign is flipped"),
    ("ex-1-8", lambda q, k: np.arange(k)[None, :] - np.arange(q)[:, None], "align them with the end"),
    ("ex-2-1", lambda n, d, layout="interleaved": _table(n, d, layout, first=1), "start at 1"),
    ("ex-2-1", lambda n, d, layout="interleaved": _table(n, d, layout, two=1.0), "exponent is i/d"),
    ("ex-2-1", lambda n, d, layout="interleaved": _table(n, d, "interleaved"), "this is the interleaved layout"),
    ("ex-2-1", lambda n, d, layout="interleaved": _table(n, d, layout, swap=True), "sine and cosine are swapped"),
    ("ex-2-2", lambda n: 1.0 / 10000 ** (np.arange(n) / n), "paper's frequencies"),
    ("ex-2-2", lambda n: np.exp(-np.arange(n) * math.log(1e4) / n), "divides the logarithm by n - 1"),
    ("ex-2-4", lambda t, pad: np.broadcast_to(np.arange(t.shape[1]), t.shape), "start at 0 and ignore padding"),
    ("ex-2-4", lambda t, pad: np.where(t != pad, np.cumsum(t != pad, axis=1), pad), "not offset"),
    ("ex-2-7", lambda k, d: posenc.relative_rotation(k, d).T, "this is M for -k"),
    ("ex-2-8", lambda d: np.argsort(np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])), "inverse permutation"),
    ("ex-2-8", lambda d: np.arange(d), "identity"),
    ("ex-3-1", lambda k, d: 4 * (np.sin(np.outer(k, posenc.sinusoidal_frequencies(d)) / 2) ** 2).sum(1), "squared"),
    ("ex-3-1", lambda k, d: np.sqrt(np.abs(d - 2 * np.cos(np.outer(k, posenc.sinusoidal_frequencies(d))).sum(1))),
     "cancellation"),
    ("ex-3-3", lambda L, w: (np.sin(L * w / 2) * np.cos((L + 1) * w / 2)) / (L * np.sin(w / 2)), "positions 1..L"),
    ("ex-4-6", lambda x, p: _rope(x, p, layout="interleaved"), "interleaved layout"),
    ("ex-4-6", lambda x, p: _rope(x, p, two=1.0), "exponent is j/d"),
    ("ex-4-6", lambda x, p: _rope(x, p, sign=-1.0), "wrong way"),
    ("ex-4-6", lambda x, p: _rope(x, p, first=1), "start at 1"),
    ("ex-4-7", lambda x, p: _rope(x, p, layout="half"), "half layout"),
    ("ex-4-3", lambda hd, h: np.arange(hd * h), "permutation is missing"),
    ("ex-4-3", lambda hd, h: posenc.rotary_permutation(hd, h), "you need its inverse"),
    ("ex-4-3", lambda hd, h: np.tile(np.argsort(posenc.rotary_permutation(hd)), h), "within its own rows"),
    ("ex-4-4", _yarn_untruncated, "not rounded to whole pairs"),
    ("ex-4-4", lambda hd, b, s, L, **kw: posenc.rotary_frequencies(hd, base=b) / s, "linear interpolation"),
    ("ex-5-4", lambda x, f: torch.cat([torch.sin(2 * math.pi * f * x[..., None]),
                                       torch.cos(2 * math.pi * f * x[..., None])], dim=-1), "sin comes first"),
    ("ex-5-4", lambda x, f: torch.cat([torch.cos(f * x[..., None]), torch.sin(f * x[..., None])], dim=-1), "2 pi"),
    ("ex-5-5", lambda x, e: ((x[:, None] - torch.as_tensor(e[:-1])) / torch.as_tensor(np.diff(e))).clamp(0, 1),
     "clipped"),
    ("ex-6-5", _naive_slopes, "not a power of two"),
    ("ex-6-5", lambda n: posenc.alibi_slopes(n).flip(0), "reverse order"),
    ("ex-6-2", lambda r, bi, **kw: posenc.t5_relative_bucket(-r, bidirectional=bi), "query minus memory"),
    ("ex-7-1", lambda L: sorted(set(posenc.t5_relative_bucket(posenc.relative_positions(L), bidirectional=True).flatten().tolist())),
     "bidirectional"),
    ("ex-7-5", lambda hd, b, s: posenc.rotary_frequencies(hd, base=b * s), "factor**(d / (d - 2))"),
    ("ex-8-1", lambda h, w, d: np.concatenate([posenc.sinusoidal_encoding_2d((h, w), d)[:, d // 2:],
                                               posenc.sinusoidal_encoding_2d((h, w), d)[:, : d // 2]], 1),
     "row half comes first"),
    ("ex-8-3", lambda segs, spatial_merge_size=2: posenc.mrope_position_ids(segs)[[0, 2, 1]], "swapped"),
    ("ex-8-3", _mrope_1d_restart, "largest id so far"),
    ("ex-8-4", lambda x, p: posenc.AxialRotaryEmbedding(x.shape[-1])(x, positions=p.flip(-1)), "rows and columns"),
]


@pytest.mark.parametrize("label, func, hint", WRONG, ids=[f"{w[0]}-{w[2][:20]}" for w in WRONG])
def test_typical_mistakes_are_named(label, func, hint) -> None:
    r = check(label, func)
    assert not r.passed and r.attempted and r.score < 1.0
    assert hint in r.report(), r.report()


def test_report_shows_computed_against_expected_and_partial_credit() -> None:
    r = check("ex-2-1", lambda n, d, layout="interleaved": _table(n, d, layout, first=1))
    text = r.report()
    assert "first wrong entry (0, 0): computed 0.841471, expected 0" in text
    assert "entries right" in text and 0 < r.score < 1
    naive = check("ex-6-5", _naive_slopes)
    assert naive.score == 0.5 and "head counts right before this one: 5 of 10" in naive.report()
    yarn = check("ex-4-4", _yarn_untruncated)
    assert "pairs kept / divided by the factor" in yarn.report()


def test_student_exceptions_are_reported_not_raised() -> None:
    r = check("ex-2-8", lambda d: 1 / 0)
    assert not r.passed and "raised ZeroDivisionError" in r.report()
    assert "shape (3,), expected (4,)" in check("ex-2-8", lambda d: np.arange(3)).report()


def test_chapter_labels_are_aliases() -> None:
    assert grade.exercise("ex-rotations-3") is EXERCISES["ex-4-3"]
    assert check("ex-rotations-3", REFERENCE["ex-4-3"]).passed


# ----------------------------------------------------------------------------- bad input and CLI


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(TypeError, match="label"):
        check(43, REFERENCE["ex-4-3"])
    with pytest.raises(ValueError, match="label 'ex-99-1'"):
        check("ex-99-1", REFERENCE["ex-4-3"])
    with pytest.raises(TypeError, match="func"):
        check("ex-4-3", "np.argsort")
    with pytest.raises(ValueError, match="path"):
        main(["ex-4-3", "no_such_file.py"])
    with pytest.raises(ValueError, match="label and path"):
        main(["ex-4-3"])


def test_command_line(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text("import numpy as np, posenc\n"
                    "def half_to_interleaved(head_dim, n_heads):\n"
                    "    return np.argsort(posenc.rotary_permutation(head_dim, n_heads))\n")
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy as np\ndef half_to_interleaved(head_dim, n_heads):\n"
                   "    return np.arange(head_dim * n_heads)\n")
    assert main(["ex-4-3", str(good)]) == 0
    assert main(["ex-rotations-3", str(bad)]) == 1
    with pytest.raises(ValueError, match="no function 'rope_half'"):
        main(["ex-4-6", str(good)])
    out = subprocess.run([sys.executable, "-m", "posenc.book.grade", "ex-4-3", str(bad)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "permutation is missing" in out.stdout
    out = subprocess.run([sys.executable, "-m", "posenc.book.grade", "ex-0-0", str(bad)],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "label 'ex-0-0'" in out.stderr


# ----------------------------------------------------------------------------- course pages

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("chapter", range(1, 9))
def test_problem_set_pages_are_generated_from_the_chapters(chapter: int) -> None:
    page = (ROOT / "book" / "problems" / f"ch{chapter}.md").read_text(encoding="utf-8")
    assert page == grade.problem_set(chapter, ROOT), "run python -m posenc.book.grade --write-pages ."
    assert "{solution" not in page and "solution-start" not in page
    for ex in EXERCISES.values():
        if ex.chapter == chapter:
            assert f"({ex.label})=" in page and f'check("{ex.label}", {ex.function})' in page
            if ex.alias:
                assert f"(`{ex.alias}`)" in page, ex.alias


def test_problem_sets_are_in_the_table_of_contents_and_aliases_exist() -> None:
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    assert "book/teaching" in toc
    notebooks = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "notebooks").glob("0*.ipynb"))
    for chapter in range(1, 9):
        assert f"book/problems/ch{chapter}" in toc
    for ex in EXERCISES.values():
        if ex.alias:
            assert f":label: {ex.alias}" in notebooks, ex.alias


def test_teaching_page_times_are_the_measured_ones() -> None:
    page = (ROOT / "book" / "teaching.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "notebooks").glob("0*.ipynb")):
        t = grade.reading_time(path)
        n = int(path.name[:2])
        row = next(ln for ln in page.splitlines() if ln.startswith(f"| {n} {{ref}}"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        # measured when the page was written; prose edits may move it a little, not far
        for column, key in ((3, "core_minutes"), (4, "optional_minutes")):
            assert abs(int(cells[column]) - t[key]) <= max(3, 0.1 * t[key]), (row, t)
        assert abs(int(cells[1].replace(",", "")) - t["words"]) <= 0.1 * t["words"], (row, t)
    for label in set(re.findall(r"`(ex-\d-\d+)`", page)):
        assert label in EXERCISES, label


def test_release_metadata_agree() -> None:
    import json

    import yaml

    zenodo = json.loads((ROOT / ".zenodo.json").read_text(encoding="utf-8"))
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert zenodo["version"] == str(cff["version"]) == posenc.__version__
    assert [c["name"] for c in zenodo["creators"]] == [a["name"] for a in cff["authors"]]
    assert zenodo["license"] == "cc-by-4.0" and "CC-BY-4.0" in cff["license"]
    assert zenodo["upload_type"] == "publication" and zenodo["publication_type"] == "book"


def test_reading_time_bad_input() -> None:
    with pytest.raises(ValueError, match="path"):
        grade.reading_time("no_such.ipynb")
    with pytest.raises(TypeError, match="chapter"):
        grade.problem_set("4", ROOT)
    with pytest.raises(ValueError, match="chapter"):
        grade.problem_set(9, ROOT)
