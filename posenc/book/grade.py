"""Exercises that grade themselves, with :mod:`posenc` as the oracle.

Each "implement it" exercise of the book has a label ``ex-<chapter>-<n>``, a statement, a
stub (the signature the student fills in) and a check. The check calls the student's
function on a few inputs, compares the results with the book's reference implementation
(imported from :mod:`posenc`, never re-typed here), and reports the computed against the
expected values, a score (the fraction of entries or cases right) and, where the answer
matches a typical mistake (a 1-based index, the exponent ``i/d`` for ``2i/d``, the other
layout, a missing permutation, ...), which mistake it is. A mistake is recognised by
computing it with :mod:`posenc` itself (for example the exponent ``i/d`` is the reference
at base ``sqrt(base)``), so the diagnosis and the reference cannot drift apart.

In a notebook::

    from posenc.book.grade import check, stub
    print(stub("ex-4-6"))            # the signature to fill in
    check("ex-4-6", rope_half)       # a Result; its text is the report

From a shell, for a file that defines the function the stub names::

    python -m posenc.book.grade ex-4-6 my_answers.py
    python -m posenc.book.grade --list

A label of the chapter's own exercise (``ex-rotations-3``) is accepted for the
exercise it names (``ex-4-3``). The command exits with 0 when the answer passes, 1 when
it does not, and 2 on bad arguments.

Example:
    >>> import numpy as np, posenc
    >>> r = check("ex-2-8", posenc.layout_permutation)
    >>> r.passed, r.score
    (True, 1.0)
    >>> check("ex-2-8", lambda d: np.arange(d)).passed
    False
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

import posenc
from posenc.book import analysis
from posenc.book.analysis import offset_distance

__all__ = ["EXERCISES", "Exercise", "Result", "check", "exercise", "grade_file", "main", "problem_set",
           "reading_time", "stub", "write_pages"]


# ----------------------------------------------------------------------------- results


@dataclass
class Result:
    """The outcome of one check: ``passed``, ``score`` in [0, 1] and the report lines."""

    label: str
    passed: bool
    score: float
    lines: list[str] = field(default_factory=list)
    attempted: bool = True

    def report(self) -> str:
        """The report as text: a first line with the verdict, then the details."""
        if not self.attempted:
            head = f"{self.label}: not attempted yet"
        elif self.passed:
            head = f"{self.label}: passed"
        else:
            head = f"{self.label}: not yet (score {self.score:.2f})"
        return "\n".join([head, *("  " + line for line in self.lines)])

    def __repr__(self) -> str:
        return self.report()

    __str__ = report


class _StudentError(Exception):
    """An exception raised by the student's function (reported, not re-raised)."""


def _guarded(func: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as err:  # noqa: BLE001 - the student's code may raise anything
            raise _StudentError(f"{type(err).__name__}: {err}") from err

    return call


class _Fail(Exception):
    """Raised inside a grader to stop at the first failing property, with its score."""

    def __init__(self, lines: list[str], score: float = 0.0) -> None:
        super().__init__(lines)
        self.lines, self.score = lines, score


def _fmt(v: Any) -> str:
    a = np.asarray(v)
    if a.ndim == 0:
        x = a.item()
        return f"{x:.6g}" if isinstance(x, float) else repr(x)
    return np.array2string(a, precision=6, threshold=12, edgeitems=3, max_line_width=100)


def _as_array(name: str, value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().to(torch.float64 if value.is_floating_point() else value.dtype).numpy()
    try:
        return np.asarray(value)
    except Exception as err:  # noqa: BLE001 - the student's object is arbitrary
        raise _Fail([f"{name}: could not read the result as an array ({err})"]) from err


def _compare(
    what: str,
    got: Any,
    expected: Any,
    *,
    atol: float = 1e-9,
    rtol: float = 1e-7,
    mistakes: dict[str, Any] | None = None,
) -> float:
    """Compare ``got`` with ``expected`` entry by entry; raise ``_Fail`` unless all match.

    The report names the first wrong entry (computed against expected), the fraction of
    entries right (the score) and the first typical mistake in ``mistakes`` (a dict
    ``message -> what that mistake computes``) whose values ``got`` equals.
    """
    g, e = _as_array(what, got), np.asarray(expected)
    if g.shape != e.shape:
        lines = [f"{what}: shape {tuple(g.shape)}, expected {tuple(e.shape)}"]
        lines += _which_mistake(g, mistakes, atol, rtol)
        raise _Fail(lines)
    if g.dtype == object or not (np.issubdtype(g.dtype, np.number) or g.dtype == bool):
        raise _Fail([f"{what}: entries of type {g.dtype}, expected numbers"])
    ok = np.isclose(g.astype(np.float64), e.astype(np.float64), atol=atol, rtol=rtol)
    if ok.all():
        return 1.0
    frac = float(ok.mean())
    idx = tuple(int(i) for i in np.argwhere(~ok)[0])
    lines = [
        f"{what}: {ok.sum()} of {ok.size} entries right ({100 * frac:.1f} %)",
        f"first wrong entry {idx}: computed {_fmt(g[idx])}, expected {_fmt(e[idx])}",
    ]
    lines += _which_mistake(g, mistakes, atol, rtol)
    raise _Fail(lines, frac)


def _which_mistake(g: np.ndarray, mistakes: dict[str, Any] | None, atol: float, rtol: float) -> list[str]:
    for message, wrong in (mistakes or {}).items():
        w = np.asarray(wrong)
        if w.shape == g.shape and np.allclose(g.astype(np.float64), w.astype(np.float64), atol=atol, rtol=rtol):
            return [f"hint: {message}"]
    return []


# ----------------------------------------------------------------------------- exercises


@dataclass(frozen=True)
class Exercise:
    """One checkable exercise.

    ``label`` is ``ex-<chapter>-<n>``; ``alias`` the label of the chapter's exercise it
    implements (or ``None`` for an exercise of the problem set only); ``function`` the
    name the stub gives the student's function; ``grader`` takes that function and returns
    the score (1.0 when everything matches) or raises ``_Fail``.
    """

    label: str
    alias: str | None
    title: str
    statement: str
    stub: str
    grader: Callable[[Callable[..., Any]], float]

    @property
    def chapter(self) -> int:
        return int(self.label.split("-")[1])

    @property
    def function(self) -> str:
        return self.stub.split("def ", 1)[1].split("(", 1)[0]


EXERCISES: dict[str, Exercise] = {}


def _exercise(label: str, alias: str | None, title: str, statement: str, stub: str):
    def register(grader: Callable[[Callable[..., Any]], float]) -> Callable[[Callable[..., Any]], float]:
        body = textwrap.dedent(stub).strip("\n")
        EXERCISES[label] = Exercise(label, alias, title, textwrap.dedent(statement).strip(), body, grader)
        return grader

    return register


def _sqrt_base(base: float) -> float:
    """The base at which the reference computes the exponent ``i/d`` instead of ``2i/d``."""
    return math.sqrt(base)


# -- chapter 1 -----------------------------------------------------------------------


@_exercise(
    "ex-1-7", None, "The causal mask",
    """
    Write `causal_mask(n)`: a boolean array of shape `(n, n)` that is `True` where query
    `i` may attend to key `j` in a causal (decoder) layer. Compare it with
    `posenc.causal_mask`.
    """,
    '''
    def causal_mask(n):
        """Boolean (n, n): True where query i may see key j."""
        raise NotImplementedError
    ''',
)
def _grade_causal_mask(f: Callable[..., Any]) -> float:
    for n in (1, 2, 5, 9):
        ref = posenc.causal_mask(n).numpy()
        _compare(f"causal_mask({n})", f(n), ref, mistakes={
            "this is the transpose: query i must see the keys at or before it (j <= i), not after it": ref.T,
            "the diagonal is missing: every token may attend to itself": np.tril(ref, -1),
            "True must mean 'may attend'; you built the mask of the blocked entries": ~ref,
        })
    return 1.0


@_exercise(
    "ex-1-8", None, "Relative positions",
    """
    Write `relative_positions(q_len, k_len)`: the integer matrix of offsets
    `key_position - query_position`, with the queries aligned to the *end* of the keys
    (query row `i` sits at position `k_len - q_len + i`, as in a decoder with a cache).
    Compare with `posenc.relative_positions`.
    """,
    '''
    def relative_positions(q_len, k_len):
        """Integer (q_len, k_len): entry (i, j) is j - (k_len - q_len + i)."""
        raise NotImplementedError
    ''',
)
def _grade_relative_positions(f: Callable[..., Any]) -> float:
    for q, k in ((3, 3), (2, 5), (1, 4)):
        ref = posenc.relative_positions(q, k).numpy()
        start = np.arange(k)[None, :] - np.arange(q)[:, None]
        _compare(f"relative_positions({q}, {k})", f(q, k), ref, mistakes={
            "the sign is flipped: the offset is key minus query, negative for keys in the past": -ref,
            "the queries start at position 0; align them with the end of the keys (k_len - q_len + i)": start,
        })
    return 1.0


# -- chapter 2 -----------------------------------------------------------------------


@_exercise(
    "ex-2-1", "ex-sinusoidal-1", "The sinusoidal table in both layouts",
    """
    Write `sinusoidal_table(n, d, layout)`: the table of the positions `0, ..., n-1` for an
    even width `d` and base 10,000, with `PE[p, 2i] = sin(p / 10000**(2i/d))` and
    `PE[p, 2i+1] = cos(...)` in the paper's `"interleaved"` layout and `[sin | cos]` in the
    `"concatenated"` layout. Compare with `posenc.sinusoidal_encoding`.
    """,
    '''
    def sinusoidal_table(n, d, layout="interleaved"):
        """float64 (n, d) table of the positions 0..n-1; layout "interleaved" or "concatenated"."""
        raise NotImplementedError
    ''',
)
def _grade_sinusoidal_table(f: Callable[..., Any]) -> float:
    n, d = 40, 16
    scores = []
    lines: list[str] = []
    for layout, other in (("interleaved", "concatenated"), ("concatenated", "interleaved")):
        ref = posenc.sinusoidal_encoding(n, d, layout=layout)
        shifted = posenc.sinusoidal_encoding(np.arange(1, n + 1), d, layout=layout)
        perm = posenc.layout_permutation(d)
        swapped = ref[:, np.argsort(perm)] if layout == "interleaved" else ref[:, perm]
        swap_sc = (ref.reshape(n, d // 2, 2)[:, :, ::-1].reshape(n, d) if layout == "interleaved"
                   else np.concatenate([ref[:, d // 2:], ref[:, : d // 2]], axis=1))
        try:
            scores.append(_compare(f"sinusoidal_table({n}, {d}, {layout!r})", f(n, d, layout), ref, mistakes={
                "the positions start at 1; row p must encode position p, starting at 0": shifted,
                "the exponent is i/d; the paper's is 2i/d (i counts pairs, 2i the columns)":
                    posenc.sinusoidal_encoding(n, d, base=_sqrt_base(1e4), layout=layout),
                f"this is the {other} layout": posenc.sinusoidal_encoding(n, d, layout=other),
                "the columns of the two layouts are mixed up (check which permutation you applied)": swapped,
                "sine and cosine are swapped: the sine comes first in each pair": swap_sc,
            }))
        except _Fail as fail:
            scores.append(fail.score)
            lines += fail.lines
    if lines:
        raise _Fail(lines, float(np.mean(scores)))
    return 1.0


@_exercise(
    "ex-2-2", "ex-sinusoidal-2", "tensor2tensor's frequencies",
    """
    Write `t2t_frequencies(n)`: the `n` inverse timescales of tensor2tensor's
    `get_timing_signal_1d` with its defaults (from 1 down to exactly 1/10,000, evenly spaced
    in the logarithm). Compare with `posenc.tensor2tensor_frequencies`, then answer
    the exercise: by what factor does each differ from the paper's
    `posenc.sinusoidal_frequencies(2 * n)`?
    """,
    '''
    def t2t_frequencies(n):
        """float64 (n,): the inverse timescales of tensor2tensor, 1 down to 1e-4."""
        raise NotImplementedError
    ''',
)
def _grade_t2t(f: Callable[..., Any]) -> float:
    for n in (4, 256):
        ref = posenc.tensor2tensor_frequencies(n)
        _compare(f"t2t_frequencies({n})", f(n), ref, mistakes={
            "these are the paper's frequencies 10000**(-2i/d) = exp(-i ln(10000) / n); tensor2tensor divides "
            "the logarithm by n - 1, so that its last frequency is exactly 1e-4":
                posenc.sinusoidal_frequencies(2 * n),
        })
    return 1.0


@_exercise(
    "ex-2-4", "ex-sinusoidal-4", "fairseq's position numbers",
    """
    Write `fairseq_positions(tokens, padding_idx)`: the position number fairseq gives each
    token of a `(batch, seq)` integer array: the non-padding tokens of a row are numbered
    `padding_idx + 1, padding_idx + 2, ...` (padding skipped in the count) and padding
    tokens get `padding_idx`. Compare with `posenc.fairseq_positions`.
    """,
    '''
    def fairseq_positions(tokens, padding_idx):
        """Integer array of the shape of tokens: fairseq's position numbers."""
        raise NotImplementedError
    ''',
)
def _grade_fairseq(f: Callable[..., Any]) -> float:
    tokens = np.array([[5, 6, 7, 1, 1], [4, 4, 4, 4, 4], [1, 1, 8, 9, 3]])
    for pad in (1, 0):
        t = np.where(tokens == 1, pad, tokens + 1)
        ref = posenc.fairseq_positions(t, pad)
        counted = np.cumsum(t != pad, axis=1)
        _compare(f"fairseq_positions(tokens, padding_idx={pad})", f(t.copy(), pad), ref, mistakes={
            "the positions start at 0 and ignore padding; fairseq starts at padding_idx + 1":
                np.broadcast_to(np.arange(t.shape[1]), t.shape),
            "the count is right but not offset: add padding_idx to the running count":
                np.where(t != pad, counted, pad),
            "padding tokens must get padding_idx (its table row is zero), not a position number":
                np.where(t != pad, ref, np.cumsum(t != pad, axis=1) + pad),
        })
    return 1.0


@_exercise(
    "ex-2-7", None, "The shift matrix M_k",
    """
    Write `shift_matrix(k, d)`: the `(d, d)` matrix `M_k` with
    `PE(p + k) = PE(p) @ M_k.T` for every position `p` (interleaved layout, base 10,000),
    block-diagonal with one 2x2 rotation per frequency. Compare with
    `posenc.relative_rotation`.
    """,
    '''
    def shift_matrix(k, d):
        """float64 (d, d): PE(p + k) == PE(p) @ M.T for every p."""
        raise NotImplementedError
    ''',
)
def _grade_shift_matrix(f: Callable[..., Any]) -> float:
    d = 8
    for k in (3, -5, 0.5):
        ref = posenc.relative_rotation(k, d)
        got = _as_array(f"shift_matrix({k}, {d})", f(k, d))
        if got.shape == ref.shape and np.issubdtype(got.dtype, np.number):
            pe = posenc.sinusoidal_encoding(np.arange(0, 50, 7), d)
            moved = posenc.sinusoidal_encoding(np.arange(0, 50, 7) + k, d)
            if not np.allclose(pe @ got.T, moved, atol=1e-9):
                err = float(np.abs(pe @ got.T - moved).max())
                lines = [f"the property fails first: PE(p + {k}) != PE(p) @ M.T (largest error {err:.3g})"]
                lines += _which_mistake(got, {
                    "this is M for -k (the transpose): the block is [[cos, sin], [-sin, cos]] acting on (sin, cos)":
                        posenc.relative_rotation(-k, d),
                    "the exponent is i/d; the paper's is 2i/d":
                        posenc.relative_rotation(k, d, base=_sqrt_base(1e4)),
                }, 1e-9, 1e-7)
                ok = np.isclose(got, ref, atol=1e-9)
                raise _Fail(lines + [f"{ok.sum()} of {ok.size} entries of M right"], float(ok.mean()))
        _compare(f"shift_matrix({k}, {d})", got, ref)
    return 1.0


@_exercise(
    "ex-2-8", None, "From one layout to the other",
    """
    Write `layout_permutation(d)`: the column permutation `perm` with
    `table_concatenated == table_interleaved[:, perm]`, for every width `d` (odd widths
    included). Compare with `posenc.layout_permutation`.
    """,
    '''
    def layout_permutation(d):
        """Integer (d,): the columns of the interleaved table in concatenated order."""
        raise NotImplementedError
    ''',
)
def _grade_layout_permutation(f: Callable[..., Any]) -> float:
    for d in (4, 8, 7):
        ref = posenc.layout_permutation(d)
        _compare(f"layout_permutation({d})", f(d), ref, mistakes={
            "this is the inverse permutation (concatenated -> interleaved); np.argsort of it is the answer":
                np.argsort(ref),
            "the identity: the layouts differ, the permutation is needed": np.arange(d),
        })
    return 1.0


# -- chapter 3 -----------------------------------------------------------------------


@_exercise(
    "ex-3-1", "ex-periodicity-1", "The distance between two encodings",
    """
    Write `offset_distance(k, d)`: for an array of offsets `k` (any real numbers), the
    Euclidean distance `|PE(p + k) - PE(p)|` (base 10,000, even `d`), which does not depend
    on `p`. It must stay accurate for tiny offsets such as `1e-7`. Compare with
    `posenc.book.offset_distance`.
    """,
    '''
    def offset_distance(k, d):
        """float64 (len(k),): |PE(p + k) - PE(p)| for each offset k."""
        raise NotImplementedError
    ''',
)
def _grade_offset_distance(f: Callable[..., Any]) -> float:
    d = 64
    for name, k in (("k = 0..199", np.arange(200.0)), ("tiny k", np.array([1e-7, 1e-5, 1e-3]))):
        ref = offset_distance(k, d)
        w = posenc.sinusoidal_frequencies(d)
        _compare(f"offset_distance({name}, {d})", f(k.copy(), d), ref, rtol=1e-6, atol=1e-12, mistakes={
            "this is the squared distance; take the square root": ref**2,
            "off by a factor 2: |PE(p+k) - PE(p)|**2 = 4 sum sin^2(w k / 2)": ref / 2,
            "d - 2 sum cos(w k) loses the small differences to cancellation; use 4 sum sin^2(w k / 2)":
                np.sqrt(np.abs(d - 2 * np.cos(k[:, None] * w).sum(axis=1))),
        })
    return 1.0


@_exercise(
    "ex-3-3", "ex-periodicity-3", "The mean of a cosine column",
    """
    Write `cosine_column_mean(L, w)`: for each frequency in the array `w`, the mean of
    `cos(p w)` over the positions `p = 0, ..., L-1`, in closed form. Checked against the
    column means of `posenc.sinusoidal_encoding(L, d)` for the frequencies
    `posenc.sinusoidal_frequencies(d)`.
    """,
    '''
    def cosine_column_mean(L, w):
        """float64 (len(w),): mean of cos(p w) over p = 0..L-1."""
        raise NotImplementedError
    ''',
)
def _grade_cosine_mean(f: Callable[..., Any]) -> float:
    d = 32
    w = posenc.sinusoidal_frequencies(d)
    for L in (1, 10, 1000):
        ref = posenc.sinusoidal_encoding(L, d)[:, 1::2].mean(axis=0)
        over = posenc.sinusoidal_encoding(L + 1, d)[1:, 1::2].mean(axis=0)
        _compare(f"cosine_column_mean({L}, w)", f(L, w.copy()), ref, atol=1e-10, rtol=1e-8, mistakes={
            "this averages the positions 1..L; the table starts at position 0": over,
            "this is the mean of the sine column": posenc.sinusoidal_encoding(L, d)[:, 0::2].mean(axis=0),
        })
    return 1.0


# -- chapter 4 -----------------------------------------------------------------------


def _rope_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, 12, 16, generator=g, dtype=torch.float64), torch.arange(12)


def _grade_rope(f: Callable[..., Any], layout: str) -> float:
    other = "interleaved" if layout == "half" else "half"
    x, pos = _rope_inputs()
    ref = posenc.apply_rotary(x, pos, layout=layout)
    _compare(f"rope_{layout}(x, positions)", f(x.clone(), pos.clone()), ref, atol=1e-5, rtol=1e-5, mistakes={
        f"this is the {other} layout: pair j is " + ("(j, j + d/2)" if layout == "half" else "(2j, 2j + 1)"):
            posenc.apply_rotary(x, pos, layout=other),
        "the exponent is j/d; RoPE's is 2j/d (j counts pairs)":
            posenc.apply_rotary(x, pos, layout=layout, base=_sqrt_base(1e4)),
        "the rotation turns the wrong way (sin has the wrong sign): angle -p w":
            posenc.apply_rotary(x, -pos, layout=layout),
        "the positions start at 1; the first token has position 0":
            posenc.apply_rotary(x, pos + 1, layout=layout),
        "the output is the input: nothing rotated": x,
    })
    return 1.0


_ROPE_STATEMENT = """
    Write `rope_{layout}(x, positions)`: rotate `x` of shape `(batch, heads, seq, d)` by the
    integer `positions` of shape `(seq,)`, pair `j` turning by `positions * 10000**(-2j/d)`,
    with the pairs of the {what}. Compare with
    `posenc.apply_rotary(x, positions, layout="{layout}")`.
    """


@_exercise(
    "ex-4-6", None, "RoPE in the half layout",
    _ROPE_STATEMENT.format(layout="half", what="half layout `(j, j + d/2)` (Hugging Face, GPT-NeoX)"),
    '''
    def rope_half(x, positions):
        """Rotated copy of x (batch, heads, seq, d); pair j is (j, j + d/2)."""
        raise NotImplementedError
    ''',
)
def _grade_rope_half(f: Callable[..., Any]) -> float:
    return _grade_rope(f, "half")


@_exercise(
    "ex-4-7", None, "RoPE in the interleaved layout",
    _ROPE_STATEMENT.format(layout="interleaved", what="interleaved layout `(2j, 2j + 1)` (RoFormer, Meta's code)"),
    '''
    def rope_interleaved(x, positions):
        """Rotated copy of x (batch, heads, seq, d); pair j is (2j, 2j + 1)."""
        raise NotImplementedError
    ''',
)
def _grade_rope_interleaved(f: Callable[..., Any]) -> float:
    return _grade_rope(f, "interleaved")


@_exercise(
    "ex-4-3", "ex-rotations-3", "From a half-layout checkpoint to the interleaved layout",
    """
    Write `half_to_interleaved(head_dim, n_heads)`: the row permutation `perm` such that
    for a query or key projection `W_half` of shape `(n_heads * head_dim, d_model)` trained
    with the half layout, `W_half[perm]` gives the same attention scores with the
    interleaved layout. (`posenc.rotary_permutation` goes the other way.)
    """,
    '''
    def half_to_interleaved(head_dim, n_heads):
        """Integer (n_heads * head_dim,): rows of W_half in interleaved order."""
        raise NotImplementedError
    ''',
)
def _grade_half_to_interleaved(f: Callable[..., Any]) -> float:
    hd, h = 8, 2
    forward = posenc.rotary_permutation(hd, h)
    ref = np.argsort(forward)
    one = np.argsort(posenc.rotary_permutation(hd))
    got = _as_array(f"half_to_interleaved({hd}, {h})", f(hd, h))
    mistakes = {
        "the permutation is missing (the identity); the two layouts pair different coordinates": np.arange(hd * h),
        "this is the permutation interleaved -> half (posenc.rotary_permutation); you need its inverse": forward,
        "every head must be permuted within its own rows (add head * head_dim)": np.tile(one, h),
        "only the first head is permuted": np.concatenate([one, np.arange(hd, hd * h)]),
    }
    if got.shape == ref.shape and np.issubdtype(got.dtype, np.integer) and sorted(got.tolist()) == list(range(hd * h)):
        g = torch.Generator().manual_seed(1)
        wq, wk = torch.randn(h * hd, 24, generator=g, dtype=torch.float64), torch.randn(h * hd, 24, generator=g, dtype=torch.float64)
        x, pos = torch.randn(10, 24, generator=g, dtype=torch.float64), torch.arange(10)

        def scores(a: torch.Tensor, b: torch.Tensor, layout: str) -> torch.Tensor:
            q = posenc.apply_rotary((x @ a.T).view(10, h, hd).transpose(0, 1), pos, layout=layout)
            k = posenc.apply_rotary((x @ b.T).view(10, h, hd).transpose(0, 1), pos, layout=layout)
            return q @ k.mT

        p = torch.as_tensor(got)
        if not torch.allclose(scores(wq, wk, "half"), scores(wq[p], wk[p], "interleaved"), atol=1e-8):
            ok = got == ref
            raise _Fail(["the property fails first: the scores of the permuted weights in the interleaved "
                         "layout differ from the original scores in the half layout",
                         f"computed {_fmt(got)}, expected {_fmt(ref)}",
                         *_which_mistake(got, mistakes, 0, 0)], float(ok.mean()))
    return _compare(f"half_to_interleaved({hd}, {h})", got, ref, atol=0, rtol=0, mistakes=mistakes)


def _yarn(head_dim: int, base: float, factor: float, original: int, **extra: Any) -> np.ndarray:
    return posenc.rotary_frequencies(head_dim, base=base, scaling={
        "rope_type": "yarn", "factor": factor, "original_max_position_embeddings": original, **extra})


@_exercise(
    "ex-4-4", "ex-rotations-4", "YaRN's frequencies",
    """
    Write `yarn_frequencies(head_dim, base, factor, original_max, beta_fast=32, beta_slow=1)`:
    the RoPE frequencies of YaRN's "NTK-by-parts" rule (Peng et al. 2024, section 3.2):
    pairs that turn more than `beta_fast` times over the original length keep their
    frequency, pairs that turn fewer than `beta_slow` times are divided by `factor`, and a
    linear ramp over the pair index blends the two in between, with the ramp's ends rounded
    outwards to whole pairs as in `transformers`. Compare with
    `posenc.rotary_frequencies(head_dim, base=base, scaling={"rope_type": "yarn", ...})`.
    """,
    '''
    def yarn_frequencies(head_dim, base, factor, original_max, beta_fast=32, beta_slow=1):
        """float64 (head_dim // 2,): YaRN's frequencies."""
        raise NotImplementedError
    ''',
)
def _grade_yarn(f: Callable[..., Any]) -> float:
    for hd, base, s, L in ((128, 10000.0, 4.0, 4096), (64, 500000.0, 8.0, 8192)):
        ref = _yarn(hd, base, s, L)
        w = posenc.rotary_frequencies(hd, base=base)
        got = f(hd, base, s, L)
        try:
            _compare(f"yarn_frequencies({hd}, {base:g}, {s:g}, {L})", got, ref, rtol=1e-9, atol=0, mistakes={
                "the ramp's ends are not rounded to whole pairs (transformers floors the low end, ceils the high end)":
                    _yarn(hd, base, s, L, truncate=False),
                "every frequency is divided by the factor: that is linear interpolation, not YaRN": w / s,
                "the ramp runs the wrong way: the fast pairs (small j) keep their frequency, the slow ones are divided":
                    np.where(np.isclose(ref, w), w / s, np.where(np.isclose(ref, w / s), w, ref)),
                "this is NTK-aware scaling (a larger base), not YaRN's by-parts rule":
                    posenc.rotary_frequencies(hd, base=base, scaling={"rope_type": "ntk", "factor": s}),
            })
        except _Fail as fail:
            g = _as_array("yarn_frequencies", got)
            if g.shape == ref.shape:
                kept = lambda v: int(np.isclose(v, w, rtol=1e-12).sum())  # noqa: E731
                div = lambda v: int(np.isclose(v, w / s, rtol=1e-12).sum())  # noqa: E731
                fail.lines.append(f"pairs kept / divided by the factor: computed {kept(g)} / {div(g)}, "
                                  f"expected {kept(ref)} / {div(ref)}")
            raise
    return 1.0


# -- chapter 5 -----------------------------------------------------------------------


@_exercise(
    "ex-5-4", "ex-tabular-4", "Periodic features of a number",
    """
    Write `periodic_features(x, frequencies)`: for `x` of shape `(batch, n_features)` and
    `frequencies` of shape `(n_features, k)`, the features
    `[cos(2 pi f_1 x), ..., cos(2 pi f_k x), sin(2 pi f_1 x), ..., sin(2 pi f_k x)]` of each
    feature, shape `(batch, n_features, 2k)`: the periodic embedding's input to its
    linear layer. Compare with `posenc.PeriodicEmbedding(...).periodic`.
    """,
    '''
    def periodic_features(x, frequencies):
        """(batch, n_features, 2k): [cos | sin] of 2 pi f x, per feature."""
        raise NotImplementedError
    ''',
)
def _grade_periodic(f: Callable[..., Any]) -> float:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(6, 3, generator=g, dtype=torch.float64)
    freqs = torch.randn(3, 4, generator=g, dtype=torch.float64) * 0.7
    emb = posenc.PeriodicEmbedding(3, 8, n_frequencies=4).to(torch.float64)
    with torch.no_grad():
        emb.frequencies.copy_(freqs)
        ref = emb.periodic(x)
        emb.frequencies.copy_(freqs / (2 * math.pi))
        no_2pi = emb.periodic(x)
    _compare("periodic_features(x, frequencies)", f(x.clone(), freqs.clone()), ref, atol=1e-6, mistakes={
        "sin comes first here (the paper's order); the book and rtdl_num_embeddings put cos first":
            torch.cat([ref[..., 4:], ref[..., :4]], dim=-1),
        "the factor 2 pi is missing: the frequencies count cycles per unit of x": no_2pi,
    })
    return 1.0


@_exercise(
    "ex-5-5", "ex-tabular-5", "Piecewise-linear encoding",
    """
    Write `ple(x, edges)`: the piecewise-linear encoding of the values `x` (shape
    `(batch,)`) of one feature into the `T` bins of the increasing `edges` (shape
    `(T + 1,)`): component `t` is 1 for a bin fully below `x`, 0 for a bin above it and the
    fraction of the bin in between; the first component is not clipped below and the last
    not above (values outside the edges extrapolate). Shape `(batch, T)`. Compare with
    `posenc.PiecewiseLinearEncoding([edges])`.
    """,
    '''
    def ple(x, edges):
        """(batch, T): thermometer of full bins, then the fraction of the current one."""
        raise NotImplementedError
    ''',
)
def _grade_ple(f: Callable[..., Any]) -> float:
    edges = np.array([0.0, 1.0, 2.0, 4.0, 8.0])
    x = torch.tensor([-1.0, 0.0, 0.5, 1.5, 3.0, 7.9, 8.0, 10.0], dtype=torch.float64)
    ref = posenc.PiecewiseLinearEncoding([edges])(x[:, None])[:, 0, :]
    frac = ((x[:, None] - torch.as_tensor(edges[:-1])) / torch.as_tensor(np.diff(edges)))
    _compare("ple(x, edges)", f(x.clone(), edges.copy()), ref, atol=1e-9, mistakes={
        "the ends are clipped to [0, 1]; the first and last components extrapolate": frac.clamp(0, 1),
        "this is a one-hot bin index; PLE is a thermometer (1 for every full bin below x)":
            torch.nn.functional.one_hot(torch.bucketize(x, torch.as_tensor(edges[1:-1]), right=True), 4).double(),
    })
    return 1.0


# -- chapter 6 -----------------------------------------------------------------------


@_exercise(
    "ex-6-5", None, "ALiBi's slopes for any head count",
    """
    Write `alibi_slopes(n)`: the `n` head slopes of ALiBi (Press et al. 2022, section 3),
    `2**(-8/n), 2**(-16/n), ..., 2**(-8)` for a power of two; for other head counts, the
    rule of the authors' code (the slopes of the largest power of two below `n`, then every
    other slope of the rule for twice that many heads). Compare with `posenc.alibi_slopes`.
    """,
    '''
    def alibi_slopes(n):
        """float (n,): the slope of each head."""
        raise NotImplementedError
    ''',
)
def _grade_alibi(f: Callable[..., Any]) -> float:
    counts = (1, 2, 4, 8, 16, 3, 5, 6, 12, 24)
    right = 0
    for n in counts:
        ref = posenc.alibi_slopes(n).double().numpy()
        naive = 2.0 ** (-8.0 * np.arange(1, n + 1) / n)
        try:
            _compare(f"alibi_slopes({n})", f(n), ref, atol=0, rtol=1e-6, mistakes={
                f"{n} is not a power of two: the geometric rule 2**(-8k/n) is not what the paper's code does; "
                "take the slopes of the largest power of two below n, then every other slope for twice as many":
                    naive,
                "the slopes are in the reverse order: the first head has the largest slope": ref[::-1],
            })
            right += 1
        except _Fail as fail:
            raise _Fail(fail.lines + [f"head counts right before this one: {right} of {len(counts)}"],
                        right / len(counts)) from None
    return 1.0


@_exercise(
    "ex-6-2", "ex-alternatives-2", "T5's relative-position buckets",
    """
    Write `t5_bucket(relative_position, bidirectional, num_buckets=32, max_distance=128)`:
    T5's bucket of each offset `memory_position - query_position` in an integer tensor:
    exact buckets for small distances, logarithmically wider ones up to `max_distance`;
    bidirectional uses half the buckets for keys after the query; causal sends keys after
    the query to bucket 0. Compare with `posenc.t5_relative_bucket`.
    """,
    '''
    def t5_bucket(relative_position, bidirectional, num_buckets=32, max_distance=128):
        """Integer tensor of the shape of relative_position: T5's buckets."""
        raise NotImplementedError
    ''',
)
def _grade_t5(f: Callable[..., Any]) -> float:
    rel = torch.arange(-300, 301)
    for bidirectional in (True, False):
        ref = posenc.t5_relative_bucket(rel, bidirectional=bidirectional)
        _compare(f"t5_bucket(-300..300, bidirectional={bidirectional})", f(rel.clone(), bidirectional), ref,
                 atol=0, rtol=0, mistakes={
                     "the offset is memory minus query; you bucketed query minus memory":
                         posenc.t5_relative_bucket(-rel, bidirectional=bidirectional),
                     "bidirectional and causal are swapped":
                         posenc.t5_relative_bucket(rel, bidirectional=not bidirectional),
                 })
    return 1.0


# -- chapter 7 -----------------------------------------------------------------------


@_exercise(
    "ex-7-1", "ex-realtext-1", "The buckets a causal T5 model has trained",
    """
    Write `trained_buckets(L)`: the sorted list of the buckets (32 buckets, maximum distance
    128, causal) that a model trained on sequences of length `L` has met, i.e. those of the
    offsets of every query and every key at or before it. Checked at `L` = 16, 64, 128 and
    512 against `posenc.t5_relative_bucket` of `posenc.relative_positions`.
    """,
    '''
    def trained_buckets(L):
        """Sorted list of ints: the buckets met at length L."""
        raise NotImplementedError
    ''',
)
def _grade_trained_buckets(f: Callable[..., Any]) -> float:
    lengths = (16, 64, 128, 512)
    for i, L in enumerate(lengths):
        rel = posenc.relative_positions(L)
        seen = posenc.t5_relative_bucket(rel[posenc.causal_mask(L)], bidirectional=False)
        ref = np.array(sorted(set(seen.tolist())))
        every = np.array(sorted(set(posenc.t5_relative_bucket(rel, bidirectional=False).flatten().tolist())))
        both = np.array(sorted(set(posenc.t5_relative_bucket(rel, bidirectional=True).flatten().tolist())))
        try:
            got = sorted(int(b) for b in f(L))
        except TypeError as err:
            raise _Fail([f"trained_buckets({L}) must return a list of ints ({err})"], i / len(lengths)) from None
        try:
            _compare(f"trained_buckets({L})", got, ref, atol=0, rtol=0, mistakes={
                "these are the buckets of a bidirectional model; the decoder's are causal": both,
                "masked keys (after the query) never train a bucket; bucket 0 counts only from offset 0": every,
            })
        except _Fail as fail:
            raise _Fail(fail.lines, i / len(lengths)) from None
    return 1.0


@_exercise(
    "ex-7-5", None, "NTK-aware frequencies",
    """
    Write `ntk_frequencies(head_dim, base, factor)`: the RoPE frequencies after NTK-aware
    scaling by `factor`, which raises the base to `base * factor**(d / (d - 2))` so that the
    slowest pair is interpolated by exactly `factor` and the fastest is kept. Compare with
    `posenc.rotary_frequencies(head_dim, base=base, scaling={"rope_type": "ntk", ...})`.
    """,
    '''
    def ntk_frequencies(head_dim, base, factor):
        """float64 (head_dim // 2,): the frequencies with the NTK-aware base."""
        raise NotImplementedError
    ''',
)
def _grade_ntk(f: Callable[..., Any]) -> float:
    for hd, base, s in ((128, 10000.0, 4.0), (64, 500000.0, 8.0)):
        ref = posenc.rotary_frequencies(hd, base=base, scaling={"rope_type": "ntk", "factor": s})
        _compare(f"ntk_frequencies({hd}, {base:g}, {s:g})", f(hd, base, s), ref, rtol=1e-9, atol=0, mistakes={
            "the base is multiplied by the factor itself; NTK-aware raises it by factor**(d / (d - 2))":
                posenc.rotary_frequencies(hd, base=base * s),
            "every frequency is divided by the factor: that is linear position interpolation":
                posenc.rotary_frequencies(hd, base=base) / s,
        })
    return 1.0


# -- chapter 8 -----------------------------------------------------------------------


@_exercise(
    "ex-8-1", "ex-multidim-1", "The 2-D sin-cos table",
    """
    Write `sincos_2d(h, w, d)`: MAE's table for an `h x w` grid of patches, rows in
    row-major order, shape `(h * w, d)`: the patch at row `r`, column `c` gets
    `[sin(c w) | cos(c w) | sin(r w) | cos(r w)]` with `w_k = 10000**(-4k/d)`. Compare with
    `posenc.sinusoidal_encoding_2d`.
    """,
    '''
    def sincos_2d(h, w, d):
        """float64 (h * w, d): MAE's 2-D table, column half first."""
        raise NotImplementedError
    ''',
)
def _grade_sincos_2d(f: Callable[..., Any]) -> float:
    for h, w, d in ((4, 4, 16), (3, 5, 8)):
        ref = posenc.sinusoidal_encoding_2d((h, w), d)
        q = d // 2
        rows_first = np.concatenate([ref[:, q:], ref[:, :q]], axis=1)
        col_major = ref.reshape(h, w, d).transpose(1, 0, 2).reshape(h * w, d) if h == w else None
        mistakes = {
            "the row half comes first (MoCo v3's order); MAE puts the column half first": rows_first,
            "the exponent is 2k/d; each half is a 1-D table of width d/2, so w_k = 10000**(-4k/d)":
                posenc.sinusoidal_encoding_2d((h, w), d, base=_sqrt_base(1e4)),
        }
        if col_major is not None:
            mistakes["the patches are in column-major order; MAE walks the grid row by row"] = col_major
        _compare(f"sincos_2d({h}, {w}, {d})", f(h, w, d), ref, mistakes=mistakes)
    return 1.0


@_exercise(
    "ex-8-3", "ex-multidim-3", "M-RoPE position ids of text and images",
    """
    Write `mrope_ids(segments, spatial_merge_size=2)`: Qwen2-VL's temporal, height and width
    ids, shape `(3, seq)`, for segments `[("text", n), ("image", (1, h, w)), ...]` (`h`, `w`
    the patch grid before the merge): text tokens get the same id on all three axes, one
    more than the token before; the merged patch at row `j`, column `k` of an image
    starting at id `s` gets `(s, s + j, s + k)`; text after an image starts at the largest
    id so far plus one. Compare with `posenc.mrope_position_ids`.
    """,
    '''
    def mrope_ids(segments, spatial_merge_size=2):
        """Integer (3, seq): rows time, height, width."""
        raise NotImplementedError
    ''',
)
def _grade_mrope(f: Callable[..., Any]) -> float:
    cases = ([("text", 2), ("image", (1, 4, 6)), ("text", 2)],
             [("text", 5), ("image", (1, 32, 96)), ("text", 5), ("image", (1, 4, 4)), ("text", 1)])
    for segs in cases:
        ref = posenc.mrope_position_ids(segs).numpy()
        counted = np.broadcast_to(np.arange(ref.shape[1]), ref.shape)
        got = _as_array(f"mrope_ids({segs})", f([tuple(s) for s in segs]))
        if got.shape == ref.shape:
            ends = np.cumsum([s if k == "text" else (s[1] // 2) * (s[2] // 2) for k, s in segs])
            for e, (kind, _) in zip(ends[:-1], segs[:-1]):
                if kind == "image" and not np.array_equal(got[:, e], ref[:, e]):
                    ok = got == ref
                    raise _Fail([f"the text after an image starts at {_fmt(got[:, e])}, expected {_fmt(ref[:, e])}: "
                                 "one more than the largest id so far, not one more than the last token's",
                                 f"{ok.sum()} of {ok.size} ids right"], float(ok.mean()))
        _compare(f"mrope_ids({segs})", got, ref, atol=0, rtol=0, mistakes={
            "height and width are swapped: the second row is the patch row, the third its column": ref[[0, 2, 1]],
            "these are 1-D positions; the image's tokens share the time id and take row and column ids": counted,
        })
    return 1.0


@_exercise(
    "ex-8-4", "ex-multidim-4", "2-D axial RoPE",
    """
    Write `axial_rope(x, positions)`: rotate `x` of shape `(batch, heads, seq, d)` by 2-D
    `positions` of shape `(seq, 2)` holding (row, column), in the half layout: pair
    `j < d/4` turns by `row * w_j` and pair `d/4 + j` by `column * w_j`, with
    `w_j = 10000**(-4j/d)` and pair `j` the coordinates `(j, j + d/2)`. Compare with
    `posenc.AxialRotaryEmbedding(d)`.
    """,
    '''
    def axial_rope(x, positions):
        """Rotated copy of x (batch, heads, seq, d) by (row, column) positions (seq, 2)."""
        raise NotImplementedError
    ''',
)
def _grade_axial(f: Callable[..., Any]) -> float:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 2, 12, 16, generator=g, dtype=torch.float64)
    pos = torch.stack(torch.meshgrid(torch.arange(3), torch.arange(4), indexing="ij"), -1).reshape(12, 2)
    ref = posenc.AxialRotaryEmbedding(16)(x, positions=pos)
    _compare("axial_rope(x, positions)", f(x.clone(), pos.clone()), ref, atol=1e-5, rtol=1e-5, mistakes={
        "rows and columns are swapped: the first quarter of the pairs turns with the row":
            posenc.AxialRotaryEmbedding(16)(x, positions=pos.flip(-1)),
        "the exponent is 2j/d; each axis has d/4 pairs, so w_j = 10000**(-4j/d)":
            posenc.AxialRotaryEmbedding(16, base=_sqrt_base(1e4))(x, positions=pos),
        "this is the interleaved layout; pair j is (j, j + d/2) here":
            posenc.AxialRotaryEmbedding(16, layout="interleaved")(x, positions=pos),
    })
    return 1.0


# ----------------------------------------------------------------------------- entry points


def exercise(label: str) -> Exercise:
    """The exercise of ``label`` (``"ex-4-3"``, or the chapter's label ``"ex-rotations-3"``)."""
    if not isinstance(label, str):
        raise TypeError(f"label must be a string such as 'ex-4-3', got {type(label).__name__}")
    if label in EXERCISES:
        return EXERCISES[label]
    for ex in EXERCISES.values():
        if ex.alias == label:
            return ex
    raise ValueError(f"label {label!r} is not a checkable exercise; known labels: {', '.join(EXERCISES)}")


def stub(label: str) -> str:
    """The stub (signature and docstring) to fill in for ``label``."""
    return exercise(label).stub


def check(label: str, func: Callable[..., Any]) -> Result:
    """Grade ``func`` as the answer to exercise ``label``; returns a :class:`Result`.

    A function that raises ``NotImplementedError`` (the stub as given) is "not attempted
    yet"; any other exception it raises is reported, not re-raised.

    Example:
        >>> check("ex-6-5", lambda n: [2.0 ** (-8 * k / n) for k in range(1, n + 1)]).score
        0.5
    """
    ex = exercise(label)
    if not callable(func):
        raise TypeError(f"func must be the function you wrote for {ex.label} ({ex.function}), got {type(func).__name__}")
    try:
        score = float(ex.grader(_guarded(func)))
    except NotImplementedError:
        return Result(ex.label, False, 0.0, [f"fill in {ex.function}: python -m posenc.book.grade --stub {ex.label}"],
                      attempted=False)
    except _Fail as fail:
        return Result(ex.label, False, fail.score, fail.lines)
    except _StudentError as err:
        return Result(ex.label, False, 0.0, [f"your function raised {err}"])
    return Result(ex.label, score == 1.0, score)


def grade_file(label: str, path: str | Path, *, function: str | None = None) -> Result:
    """Import the Python file ``path`` and grade its function (the stub's name, or ``function``)."""
    ex = exercise(label)
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a file name, got {type(path).__name__}")
    p = Path(path)
    if p.suffix != ".py" or not p.is_file():
        raise ValueError(f"path must be an existing .py file, got {str(path)!r}")
    name = ex.function if function is None else function
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"function must be a Python name, got {name!r}")
    spec = importlib.util.spec_from_file_location(f"_posenc_answers_{p.stem}", p)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, name, None)):
        raise ValueError(f"path {str(path)!r} defines no function {name!r} (the stub of {ex.label} names it)")
    return check(ex.label, getattr(module, name))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``python -m posenc.book.grade LABEL FILE`` (``--list``, ``--stub LABEL``)."""
    parser = argparse.ArgumentParser(prog="python -m posenc.book.grade", description=__doc__.split("\n")[0])
    parser.add_argument("label", nargs="?", help="exercise label, e.g. ex-4-3")
    parser.add_argument("path", nargs="?", help="your .py file")
    parser.add_argument("--function", help="name of your function, if not the stub's")
    parser.add_argument("--list", action="store_true", help="list the checkable exercises")
    parser.add_argument("--stub", metavar="LABEL", help="print the stub of an exercise")
    parser.add_argument("--write-pages", metavar="ROOT", help="write the problem-set pages of the book at ROOT")
    if argv is not None and (isinstance(argv, (str, bytes)) or not all(isinstance(a, str) for a in argv)):
        raise TypeError(f"argv must be a list of str (the command-line words) or None, got {argv!r}")
    args = parser.parse_args(argv)
    if args.write_pages:
        for page in write_pages(args.write_pages):
            print(page)
        return 0
    if args.list:
        for ex in EXERCISES.values():
            print(f"{ex.label:8} {ex.alias or '':20} {ex.title}")
        return 0
    if args.stub:
        print(stub(args.stub))
        return 0
    if args.label is None or args.path is None:
        raise ValueError("label and path are required, e.g. python -m posenc.book.grade ex-4-3 my_answers.py")
    result = grade_file(args.label, args.path, function=args.function)
    print(result.report())
    return 0 if result.passed else 1


# ----------------------------------------------------------------------------- course pages

_EXERCISE = re.compile(r"```\{exercise\}[^\n]*\n:label: (ex-[\w-]+)\n(.*?)```", re.S)


def _notebook(path: Path) -> list[dict[str, Any]]:
    return json.loads(Path(path).read_text(encoding="utf-8"))["cells"]


def _chapters(root: object) -> list[Path]:
    if not isinstance(root, (str, os.PathLike)):
        raise TypeError(f"root must be a str or a pathlib.Path (the repository), got {type(root).__name__}")
    return sorted((Path(root) / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def reading_time(path: str | Path) -> dict[str, Any]:
    """Reading length of a chapter notebook, for the teaching page and the problem sets.

    The counting and the reading rates are :func:`posenc.book.analysis.reading_time`'s
    (the one measure the chapters state too); this adds the chapter's title and its number
    of exercises. Returns ``{"title", "words", "code_lines", "minutes", "core_minutes",
    "optional_minutes", "exercises"}``, where ``words``, ``code_lines`` and ``minutes`` count
    the core path and the optional sections, not the exercises.
    """
    p = Path(path)
    if p.suffix != ".ipynb" or not p.is_file():
        raise ValueError(f"path must be an existing .ipynb file, got {str(path)!r}")
    parts = analysis.reading_time(p)
    title, exercises = "", 0
    for cell in _notebook(p):
        if cell["cell_type"] == "markdown":
            src = "".join(cell["source"])
            title = title or next((ln[2:].strip() for ln in src.splitlines() if ln.startswith("# ")), "")
            exercises += len(_EXERCISE.findall(src))
    core, optional = parts["core"], parts["optional"]
    return {
        "title": title,
        "words": int(core["words"] + optional["words"]),
        "code_lines": int(core["code_lines"] + optional["code_lines"]),
        "minutes": int(round(core["minutes"] + optional["minutes"])),
        "core_minutes": int(round(core["minutes"])),
        "optional_minutes": int(round(optional["minutes"])),
        "exercises": exercises,
    }


def problem_set(chapter: int, root: str | Path = ".") -> str:
    """The problem set of ``chapter`` (1-8) as a MyST page: every exercise of the chapter
    without its solution, with its label, and the checkable exercises with their stub and
    the ``check`` call. ``root`` is the repository (its ``notebooks/`` are read)."""
    if isinstance(chapter, bool) or not isinstance(chapter, int):
        raise TypeError(f"chapter must be an int from 1 to 8, got {chapter!r}")
    paths = {int(p.name[:2]): p for p in _chapters(root)}
    if chapter not in paths:
        raise ValueError(f"chapter must be one of {sorted(paths)}, got {chapter}")
    path = paths[chapter]
    info = reading_time(path)
    text = "\n".join("".join(c["source"]) for c in _notebook(path) if c["cell_type"] == "markdown")
    chapter_label = re.search(r"^\((ch-[\w-]+)\)=", text, re.M).group(1)
    checkable = [ex for ex in EXERCISES.values() if ex.chapter == chapter]
    by_alias = {ex.alias: ex for ex in checkable if ex.alias}
    out = [
        "% Generated by `python -m posenc.book.grade --write-pages`; edit the chapter or grade.py, not this file.",
        "",
        f"(problems-ch{chapter})=",
        f"# Problem set {chapter}: {info['title']}",
        "",
        f"The exercises of {{ref}}`{chapter_label}`, without solutions (the chapter has them, collapsed).",
        "Each carries a stable label for a syllabus or an assignment. Exercises marked *checked*",
        "grade themselves: write the function of the stub and run",
        "",
        "```python",
        "from posenc.book.grade import check",
        f"check(\"{checkable[0].label}\", {checkable[0].function})",
        "```",
        "",
        "in a notebook, or `python -m posenc.book.grade LABEL my_answers.py` in a shell, which",
        "compares the function with the book's reference implementation and says which entries",
        "differ and which common mistake they look like. See {ref}`teaching`.",
        "",
    ]

    def checked(ex: Exercise) -> list[str]:
        return [
            f"({ex.label})=",
            f"*Checked* (`{ex.label}`): {ex.statement}",
            "",
            "```python",
            ex.stub,
            "",
            f"check(\"{ex.label}\", {ex.function})",
            "```",
            "",
        ]

    for n, (label, body) in enumerate(_EXERCISE.findall(text), start=1):
        out += [f"## Exercise {chapter}.{n} (`{label}`)", "", body.strip(), ""]
        if label in by_alias:
            out += checked(by_alias[label])
    new = [ex for ex in checkable if ex.alias is None]
    if new:
        out += ["## Implement it", "", "Exercises of this problem set only, all checked.", ""]
        for ex in new:
            out += [f"### {ex.title}", "", *checked(ex)]
    return "\n".join(out).rstrip() + "\n"


def write_pages(root: str | Path = ".") -> list[Path]:
    """Write ``book/problems/ch<N>.md`` for every chapter; returns the paths written."""
    written = []
    for path in _chapters(root):
        n = int(path.name[:2])
        page = Path(root) / "book" / "problems" / f"ch{n}.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(problem_set(n, root), encoding="utf-8")
        written.append(page)
    return written


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (TypeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
