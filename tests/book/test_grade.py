"""The self-grading exercises (posenc.book.grade): the reference answer passes, typical
wrong answers are caught with a message that says which mistake they are, and bad input
to check and to the command line is refused naming the argument.

The wrong answers below are written out as a student would write them (numpy or torch
from the formulas); the right answers call posenc, the oracle.
"""

from __future__ import annotations

import math
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
