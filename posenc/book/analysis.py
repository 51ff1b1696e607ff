"""Measurements on the sinusoidal encoding: distances, dot products, float32 error.

Chapters 2 and 3 of the book use these to answer "is every position distinct?", "does the
dot product depend only on the offset?" and "where does float32 blur positions?" with
numbers rather than pictures.

Two identities make long sequences cheap (``PE`` is the paper's encoding, even ``d``,
``omega_i`` its frequencies)::

    PE(p) . PE(p + k)      = sum_i cos(k omega_i)
    |PE(p + k) - PE(p)|**2 = 4 sum_i sin(k omega_i / 2)**2

Both depend on the offset ``k`` only, so the smallest distance between any two of the
first ``L`` positions is the smallest of ``L - 1`` offset distances: ``O(L d)`` work instead
of ``O(L**2 d)``. The second form has no cancellation, so tiny distances are accurate.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re

import numpy as np
import torch

from .._checks import (
    as_positions,
    check_bool,
    check_choice,
    check_int,
    check_positive_float,
    check_probability,
)
from ..sinusoidal import sinusoidal_encoding, sinusoidal_frequencies
from ._validate import as_finite_array

__all__ = [
    "NAIVE_KINDS",
    "add_vs_concat_readout",
    "band_noise_sweep",
    "code_depends_on_length",
    "base_for_wavelength",
    "dirichlet_bound",
    "dot_product_ci_envelope",
    "dot_product_ci_zero",
    "dot_product_log_decay",
    "decode_offsets",
    "linear_shift_residual",
    "longest_wavelength",
    "naive_encoding",
    "float32_encoding",
    "float32_row_error",
    "min_distance_by_length",
    "min_distance_float32",
    "min_pairwise_distance",
    "nearest_position",
    "reading_time",
    "offset_distance",
    "offset_dot_product",
    "decade_above",
    "round_significant",
]

_CHUNK = 8192


def _pair_frequencies(d_model: int, base: float, frequencies: object) -> np.ndarray:
    """The paper's frequencies, or ``frequencies`` checked against ``d_model``."""
    if frequencies is None:
        return _even_frequencies(d_model, base)
    d_model = check_int("d_model", d_model)
    w = as_finite_array("frequencies", frequencies, ndim=1)
    if np.any(w <= 0):
        raise ValueError("frequencies must be > 0 (angular frequencies of the pairs)")
    if 2 * w.size != d_model:
        raise ValueError(f"d_model must be 2 * len(frequencies) = {2 * w.size}, got {d_model}")
    return w


def _even_frequencies(d_model: int, base: float) -> np.ndarray:
    d_model = check_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be even (complete sin/cos pairs), got {d_model}")
    return sinusoidal_frequencies(d_model, base=check_positive_float("base", base))


def offset_distance(
    offsets: int | np.ndarray, d_model: int, *, base: float = 10000.0, frequencies: np.ndarray | None = None
) -> np.ndarray:
    """Exact distance ``|PE(p + k) - PE(p)|`` for each offset ``k`` (any ``p``), float64.

    Computed as ``2 * sqrt(sum_i sin(k omega_i / 2)**2)``, in chunks of offsets.

    Args:
        offsets: an int ``n`` (offsets ``0..n-1``) or a 1-D array of offsets.
        d_model: even encoding width.
        base: the constant 10000 of the paper.
        frequencies: optional 1-D array of ``d_model / 2`` angular frequencies ``omega_i > 0``
            to use instead of the paper's ``base**(-2i/d)`` (any code of sin/cos pairs);
            then ``base`` is ignored and ``d_model`` must equal ``2 * len(frequencies)``.

    Returns:
        Array of shape ``(len(offsets),)``.

    Example:
        >>> bool(np.isclose(offset_distance([3], 8)[0],
        ...      np.linalg.norm(sinusoidal_encoding([7], 8) - sinusoidal_encoding([4], 8))))
        True
    """
    k = as_positions("offsets", offsets)
    w = _pair_frequencies(d_model, base, frequencies)
    out = np.empty(k.shape[0], dtype=np.float64)
    for s in range(0, k.shape[0], _CHUNK):
        half = np.sin(k[s : s + _CHUNK, None] * w[None, :] / 2.0)
        out[s : s + _CHUNK] = 2.0 * np.sqrt(np.sum(half * half, axis=1))
    return out


def offset_dot_product(offsets: int | np.ndarray, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """Exact dot product ``PE(p) . PE(p + k) = sum_i cos(k omega_i)`` per offset, float64.

    Even in ``k`` (no notion of direction) and equal to ``d_model / 2`` at ``k = 0``.

    Args:
        offsets: an int ``n`` (offsets ``0..n-1``) or a 1-D array of offsets.
        d_model: even encoding width.
        base: the constant 10000 of the paper.

    Returns:
        Array of shape ``(len(offsets),)``.

    Example:
        >>> offset_dot_product([0], 8)
        array([4.])
    """
    k = as_positions("offsets", offsets)
    w = _even_frequencies(d_model, base)
    out = np.empty(k.shape[0], dtype=np.float64)
    for s in range(0, k.shape[0], _CHUNK):
        out[s : s + _CHUNK] = np.cos(k[s : s + _CHUNK, None] * w[None, :]).sum(axis=1)
    return out


def min_distance_by_length(
    max_len: int, d_model: int, *, base: float = 10000.0, frequencies: np.ndarray | None = None
) -> np.ndarray:
    """Smallest distance between the exact encodings of two of the first ``L`` positions.

    Args:
        max_len: largest length ``L`` considered (>= 2).
        d_model: even encoding width.
        base: the constant 10000 of the paper.
        frequencies: optional angular frequencies of the pairs instead of the paper's
            (see :func:`offset_distance`).

    Returns:
        Array ``m`` of shape ``(max_len + 1,)``: ``m[L]`` is the minimum over
        ``0 <= p < q < L``; ``m[0] = m[1] = inf`` (no pair).

    Example:
        >>> m = min_distance_by_length(5, 8)
        >>> bool(m[2] == offset_distance([1], 8)[0])
        True
    """
    max_len = check_int("max_len", max_len, minimum=2)
    dist = offset_distance(np.arange(1, max_len, dtype=np.float64), d_model, base=base, frequencies=frequencies)
    return np.concatenate([[np.inf, np.inf], np.minimum.accumulate(dist)])


def float32_encoding(positions: int | np.ndarray, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """The paper's encoding computed in float32 arithmetic, as a float32 model would.

    Positions and frequencies are rounded to float32, multiplied in float32 and passed
    through torch's float32 ``sin``/``cos`` (interleaved layout). The frequencies are the
    correctly rounded float64 ones, so the error measured is the least any float32
    computation incurs; it grows with the position because the angle ``pos * omega`` is
    rounded to 24 significant bits. Above ``2**24`` consecutive integer positions are no
    longer even representable.

    Args:
        positions: an int ``n`` (positions ``0..n-1``) or a 1-D array of positions.
        d_model: encoding width.
        base: the constant 10000 of the paper.

    Returns:
        float32 array of shape ``(len(positions), d_model)``.

    Example:
        >>> float32_encoding(3, 4).dtype
        dtype('float32')
    """
    pos = torch.from_numpy(as_positions("positions", positions)).to(torch.float32)
    d_model = check_int("d_model", d_model)
    w = torch.from_numpy(sinusoidal_frequencies(d_model, base=base)).to(torch.float32)
    angles = pos[:, None] * w[None, :]
    out = torch.empty(pos.shape[0], d_model, dtype=torch.float32)
    out[:, 0::2] = torch.sin(angles)
    out[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return out.numpy()


def float32_row_error(positions: int | np.ndarray, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """Euclidean error ``|PE32(p) - PE(p)|`` of :func:`float32_encoding` per position.

    The reference is the encoding evaluated in float64 (as ``pos * omega``), whose own
    error, about ``1e-16``, is negligible next to the float32 error measured.

    Args:
        positions: an int ``n`` (positions ``0..n-1``) or a 1-D array of positions.
        d_model: encoding width.
        base: the constant 10000 of the paper.

    Returns:
        float64 array of shape ``(len(positions),)``.

    Example:
        >>> bool(float32_row_error(100, 16).max() < 1e-4)
        True
    """
    pos = as_positions("positions", positions)
    d_model = check_int("d_model", d_model)
    out = np.empty(pos.shape[0], dtype=np.float64)
    for s in range(0, pos.shape[0], _CHUNK):
        low, exact = _concatenated_tables(pos[s : s + _CHUNK], d_model, base)
        out[s : s + _CHUNK] = torch.linalg.vector_norm(low - exact, dim=1).numpy()
    return out


def _concatenated_tables(pos: np.ndarray, d_model: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The float32-computed and the float64 table, both as float64 ``[sin | cos]``.

    Norms and distances do not depend on the column order, and the contiguous layout is
    several times faster than interleaving. The float32 values equal those of
    :func:`float32_encoding` exactly.
    """
    w = sinusoidal_frequencies(d_model, base=base)
    half = d_model // 2
    p64 = torch.from_numpy(pos)
    a64 = p64[:, None] * torch.from_numpy(w)[None, :]
    a32 = p64.to(torch.float32)[:, None] * torch.from_numpy(w).to(torch.float32)[None, :]
    low = torch.cat([torch.sin(a32), torch.cos(a32[:, :half])], dim=1).to(torch.float64)
    exact = torch.cat([torch.sin(a64), torch.cos(a64[:, :half])], dim=1)
    return low, exact


def min_distance_float32(lengths: np.ndarray, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """Smallest distance between two of the first ``L`` rows of the float32 table, per ``L``.

    The float32 table (:func:`float32_encoding`) no longer depends on the offset alone, so
    the pairs are searched, but only where the minimum can be: with ``E`` the largest
    row error (:func:`float32_row_error`) over the first ``max(lengths)`` rows, a pair at
    offset ``k`` is at least ``offset_distance(k) - 2E`` apart. Every offset with
    ``offset_distance(k) <= min_k offset_distance + 4E`` is measured on all its pairs; all
    other offsets are provably farther apart than the value returned. Distances between
    float32 rows are measured in float64.

    Args:
        lengths: 1-D integer array of lengths ``L >= 2``.
        d_model: even encoding width.
        base: the constant 10000 of the paper.

    Returns:
        float64 array of shape ``(len(lengths),)``.

    Example:
        >>> m32 = min_distance_float32(np.array([50]), 8)
        >>> bool(abs(m32[0] - min_distance_by_length(50, 8)[50]) < 1e-5)
        True
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer) or lengths.size == 0:
        raise TypeError("lengths must be a non-empty 1-D integer array")
    if lengths.min() < 2:
        raise ValueError(f"every length must be >= 2, got {int(lengths.min())}")
    max_len = int(lengths.max())
    exact = offset_distance(np.arange(max_len, dtype=np.float64), d_model, base=base)  # exact[k]
    two_e = 2.0 * float32_row_error(max_len, d_model, base=base).max()
    # first pass: which offsets must be measured, and up to which length
    needed: dict[int, int] = {}
    per_length = []
    for length in lengths.tolist():
        fmin = exact[1:length].min()
        candidates = (np.flatnonzero(exact[1:length] <= fmin + 2.0 * two_e) + 1).tolist()
        per_length.append(candidates)
        for k in candidates:
            needed[k] = max(needed.get(k, 0), length)
    # second pass: prefix minima of the pair distances at each needed offset
    prefix = {
        k: np.minimum.accumulate(_pair_distances_float32(upto, k, d_model, base)) for k, upto in needed.items()
    }
    result = np.empty(lengths.shape[0], dtype=np.float64)
    for j, (length, candidates) in enumerate(zip(lengths.tolist(), per_length)):
        result[j] = min(float(prefix[k][length - k - 1]) for k in candidates)
    return result


def _pair_distances_float32(max_len: int, k: int, d_model: int, base: float) -> np.ndarray:
    """``|PE32(p + k) - PE32(p)|`` for ``p = 0 .. max_len - k - 1``, in chunks."""
    n = max_len - k
    out = np.empty(n, dtype=np.float64)
    for s in range(0, n, _CHUNK):
        m = min(_CHUNK, n - s)
        if k < _CHUNK:  # one table covers both rows of every pair
            rows, _ = _concatenated_tables(np.arange(s, s + m + k, dtype=np.float64), d_model, base)
            a, b = rows[:m], rows[k : k + m]
        else:
            p = np.arange(s, s + m, dtype=np.float64)
            a, _ = _concatenated_tables(p, d_model, base)
            b, _ = _concatenated_tables(p + k, d_model, base)
        out[s : s + m] = torch.linalg.vector_norm(b - a, dim=1).numpy()
    return out


def min_pairwise_distance(table: np.ndarray) -> float:
    """Smallest Euclidean distance between two rows of ``table``, by brute force.

    Rows are compared in float64, in blocks of 1024 rows; use it to check the fast
    routines on a few thousand rows.

    Args:
        table: array of shape ``(n, d)`` with ``n >= 2`` (any float dtype).

    Returns:
        The minimum over ``i < j`` of ``|table[i] - table[j]|``.

    Example:
        >>> min_pairwise_distance(np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 5.0]]))
        1.0
    """
    t = as_finite_array("table", table)
    if t.ndim != 2 or t.shape[0] < 2:
        raise ValueError(f"table must have shape (n, d) with n >= 2, got {t.shape}")
    n = t.shape[0]
    sq = np.sum(t * t, axis=1)
    best, pair = np.inf, (0, 1)
    for s in range(0, n - 1, 1024):
        rows = t[s : s + 1024]
        # squared distances by the Gram expansion, to pick the closest pair quickly ...
        d2 = sq[s : s + 1024, None] + sq[None, :] - 2.0 * rows @ t.T
        r = np.arange(s, s + rows.shape[0])[:, None]
        d2 = np.where(np.arange(n)[None, :] > r, d2, np.inf)
        i, j = np.unravel_index(np.argmin(d2), d2.shape)
        if d2[i, j] < best:
            best, pair = float(d2[i, j]), (s + int(i), int(j))
    # ... and the distance of that pair measured directly, without cancellation
    return float(np.linalg.norm(t[pair[0]] - t[pair[1]]))


def nearest_position(queries: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Index of the nearest row of ``table`` for each query (Euclidean), in chunks.

    Args:
        queries: array of shape ``(m, d)``.
        table: array of shape ``(n, d)``.

    Returns:
        Integer array of shape ``(m,)``.

    Example:
        >>> t = sinusoidal_encoding(10, 8)
        >>> nearest_position(t[[3, 7]] + 0.01, t)
        array([3, 7])
    """
    q = as_finite_array("queries", queries, min_size=0)
    t = as_finite_array("table", table)
    if q.ndim != 2 or t.ndim != 2 or q.shape[1] != t.shape[1]:
        raise ValueError(f"queries (m, d) and table (n, d) must share d, got {q.shape} and {t.shape}")
    tn = np.sum(t * t, axis=1)
    out = np.empty(q.shape[0], dtype=np.int64)
    for s in range(0, q.shape[0], 1024):
        qq = q[s : s + 1024]
        d2 = tn[None, :] - 2.0 * qq @ t.T
        out[s : s + qq.shape[0]] = np.argmin(d2, axis=1)
    return out


# ---------------------------------------------------------------- designing an encoding (chapter 2)

NAIVE_KINDS = ("integer", "fraction", "one_hot", "binary")


def naive_encoding(kind: str, length: int, d_model: int = 8) -> np.ndarray:
    """The failed first attempts of chapter 2's "design it yourself", one row per position.

    ``kind`` is one of

    * ``"integer"``: the position ``p`` itself, repeated in all ``d_model`` columns;
    * ``"fraction"``: ``p / length``, repeated in all columns (depends on the length);
    * ``"one_hot"``: row ``p`` is the ``p``-th unit vector, of width ``length``;
    * ``"binary"``: the ``d_model`` lowest bits of ``p``, bit 0 in column 0, as 0.0/1.0.

    Args:
        kind: one of :data:`NAIVE_KINDS`.
        length: number of positions ``n`` (>= 1); positions are ``0..n-1``.
        d_model: width for ``"integer"``, ``"fraction"`` and ``"binary"`` (ignored for
            ``"one_hot"``, whose width is ``length``).

    Returns:
        float64 array of shape ``(length, d_model)``, or ``(length, length)`` for one-hot.

    Example:
        >>> naive_encoding("binary", 4, 3)
        array([[0., 0., 0.],
               [1., 0., 0.],
               [0., 1., 0.],
               [1., 1., 0.]])
        >>> naive_encoding("fraction", 4, 1).ravel()
        array([0.  , 0.25, 0.5 , 0.75])
    """
    kind = check_choice("kind", kind, NAIVE_KINDS)
    length = check_int("length", length)
    d_model = check_int("d_model", d_model)
    p = np.arange(length, dtype=np.float64)
    if kind == "integer":
        return np.repeat(p[:, None], d_model, axis=1)
    if kind == "fraction":
        return np.repeat((p / length)[:, None], d_model, axis=1)
    if kind == "one_hot":
        return np.eye(length)
    bits = (np.arange(length)[:, None] >> np.arange(d_model)[None, :]) & 1
    return bits.astype(np.float64)


def linear_shift_residual(table: np.ndarray, offset: int, *, bias: bool = False, relative: bool = False) -> float:
    """Root-mean-square error of the best linear map from row ``p`` to row ``p + offset``.

    Fits one matrix ``M`` (and, with ``bias=True``, one vector ``c``) by least squares over
    all rows, ``table[offset:] ~ table[:-offset] @ M (+ c)``, and returns the rms of the
    residual. It is 0 (up to rounding) exactly when shifting by ``offset`` is one linear
    (affine, with a bias) map for every position, as for the sinusoidal encoding; binary
    codes and other non-linear codes leave a residual. The last digits depend on the LAPACK
    build: report it rounded.

    The raw rms has the units of the code: a code ten times smaller has a ten times smaller
    residual. ``relative=True`` divides it by the rms per-entry step between neighbouring
    rows, ``sqrt(mean((table[p + 1] - table[p])**2))``, so that codes of different scales
    compare (the integer code and ``p / n`` then get the same number).

    Args:
        table: array of shape ``(n, d)``, one row per position.
        offset: shift ``k`` with ``1 <= k < n``.
        bias: also fit a constant vector (an affine map).
        relative: divide by the rms per-entry neighbour step.

    Returns:
        The rms error as a Python float.

    Example:
        >>> t = sinusoidal_encoding(50, 8)
        >>> linear_shift_residual(t, 3) < 1e-12
        True
        >>> linear_shift_residual(naive_encoding("integer", 50, 2), 1, bias=True) < 1e-10
        True
    """
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] < 2:
        raise ValueError(f"table must have shape (n, d) with n >= 2, got {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError("table must be finite")
    offset = check_int("offset", offset)
    if offset >= t.shape[0]:
        raise ValueError(f"offset must be smaller than the number of rows {t.shape[0]}, got {offset}")
    bias = check_bool("bias", bias)
    relative = check_bool("relative", relative)
    src, dst = t[:-offset], t[offset:]
    if bias:
        src = np.concatenate([src, np.ones((src.shape[0], 1))], axis=1)
    m, *_ = np.linalg.lstsq(src, dst, rcond=None)
    rms = float(np.sqrt(np.mean((src @ m - dst) ** 2)))
    if relative:
        step = float(np.sqrt(np.mean(np.diff(t, axis=0) ** 2)))
        if step == 0.0:
            raise ValueError("relative=True needs a table whose rows change")
        rms /= step
    return rms


def code_depends_on_length(kind: str, position: int, lengths: tuple[int, ...] = (20, 100), *,
                           d_model: int = 8, max_len: int = 512) -> bool:
    """Whether the code of ``position`` changes when the sequence length changes.

    Builds the code of ``position`` in a sequence of each length in ``lengths`` and
    compares them. ``kind`` is one of :data:`NAIVE_KINDS` or ``"sinusoidal"``. The one-hot
    code has the fixed width ``max_len`` (its vocabulary of positions), whatever the length
    of the sequence; the others have width ``d_model``.

    Args:
        kind: one of :data:`NAIVE_KINDS` or ``"sinusoidal"``.
        position: the position ``p`` compared, ``0 <= p < min(lengths)``.
        lengths: at least two sequence lengths.
        d_model: width of the integer, fraction, binary and sinusoidal codes (even for the
            sinusoid).
        max_len: width of the one-hot code, ``>= max(lengths)``.

    Returns:
        ``True`` if some length gives ``position`` another code.

    Example:
        >>> code_depends_on_length("fraction", 10), code_depends_on_length("binary", 10)
        (True, False)
    """
    kind = check_choice("kind", kind, NAIVE_KINDS + ("sinusoidal",))
    position = check_int("position", position, minimum=0)
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__len__") or len(lengths) < 2:
        raise ValueError(f"lengths must hold at least two sequence lengths, got {lengths!r}")
    lengths = tuple(check_int("lengths", n) for n in lengths)
    if position >= min(lengths):
        raise ValueError(f"position must be smaller than every length, got {position} and {lengths}")
    d_model = check_int("d_model", d_model)
    max_len = check_int("max_len", max_len)
    if kind == "one_hot" and max_len < max(lengths):
        raise ValueError(f"max_len must be >= the longest length {max(lengths)}, got {max_len}")

    def code(n: int) -> np.ndarray:
        if kind == "sinusoidal":
            return sinusoidal_encoding(n, d_model)[position]
        if kind == "one_hot":
            return naive_encoding("one_hot", max_len)[:n][position]
        return naive_encoding(kind, n, d_model)[position]

    first = code(lengths[0])
    return any(not np.array_equal(first, code(n)) for n in lengths[1:])


def add_vs_concat_readout(
    d_model: int,
    *,
    n_tokens: int = 1000,
    n_positions: int = 512,
    n_samples: int = 4000,
    seed: int = 0,
    noise: float = 0.0,
    dropout: float = 0.0,
    equal_energy: bool = False,
) -> dict[str, float]:
    """How well a linear read-out recovers token and position from ``token + PE`` vs ``[token | PE]``.

    Both arms have the same total width ``d`` and the same corruption:

    * **add**: ``x = e_t + PE(p)``, both of width ``d``;
    * **concatenate**: ``x = [e_t | PE(p)]``, each half of width ``d / 2``.

    Token embeddings have entries of standard deviation 1 in both arms (drawn with
    standard deviation ``w^-1/2`` and scaled by ``sqrt(w)``, the Transformer's recipe, for
    the width ``w`` they occupy), the encoding's entries lie in ``[-1, 1]``. Then the whole
    vector ``x`` is corrupted: Gaussian noise of standard deviation ``noise`` on every entry,
    and/or inverted dropout with rate ``dropout`` (entries zeroed with that probability,
    the others divided by ``1 - dropout``), which the Transformer applies to this very sum.

    With these conventions the two arms do not carry the same signal energy: the sum has
    ``E|x|^2 = d + d/2`` (token plus encoding, which are uncorrelated), the concatenation
    ``d/2 + d/4``, half as much, so the same noise is relatively twice as strong for it.
    ``equal_energy=True`` multiplies the concatenated vector (and the templates the read-out
    compares it with) by ``sqrt(2)`` before the corruption, so that both arms enter it with
    the same expected ``|x|^2``, as a normalisation layer before the first projection would
    enforce. The measured energies are returned.

    The read-out is the nearest token and the nearest position *by a linear score*, what one
    linear layer can compute: ``argmax_s x . E_s - |E_s|^2 / 2`` for the token and
    ``argmax_q x . P_q`` for the position, where ``E_s`` and ``P_q`` are the token embedding
    and the encoding *placed as in the arm* (zero-padded to width ``d`` for the
    concatenation). Adding gives each signal the full width but makes each the other's
    noise; concatenating removes that interference but gives each signal half the width
    against the same corruption. Without corruption the concatenation is exact by
    construction; with it either arm can win. The draws use numpy's seeded generator, so
    the results are the same on every machine.

    Args:
        d_model: total width, a multiple of 4 and >= 4 (so that each half is even).
        n_tokens: vocabulary size.
        n_positions: number of positions.
        n_samples: number of random (token, position) pairs.
        seed: seed of ``numpy.random.default_rng``.
        noise: standard deviation of the Gaussian noise added to every entry (>= 0).
        dropout: dropout rate in ``[0, 1)``.
        equal_energy: scale the concatenated arm by ``sqrt(2)`` to the sum's signal energy.

    Returns:
        For each arm ``a`` in ``("add", "concat")``: ``a_token`` (fraction of tokens read
        exactly), ``a_position`` (positions read exactly), ``a_position_near`` (off by at
        most 1), ``a_position_far`` (off by more than 10), all in ``[0, 1]``, and
        ``a_energy``, the mean ``|x|^2`` of the uncorrupted input. The draws do not depend
        on ``equal_energy``, so the two settings compare the same samples.

    Example:
        >>> r = add_vs_concat_readout(64, n_tokens=50, n_positions=32, n_samples=200)
        >>> r["concat_token"], r["concat_position"]
        (1.0, 1.0)
    """
    d_model = check_int("d_model", d_model, minimum=4)
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4 (two even halves), got {d_model}")
    n_tokens = check_int("n_tokens", n_tokens, minimum=2)
    n_positions = check_int("n_positions", n_positions, minimum=2)
    n_samples = check_int("n_samples", n_samples)
    seed = check_int("seed", seed, minimum=0)
    if isinstance(noise, bool) or not isinstance(noise, numbers.Real):
        raise TypeError(f"noise must be a real number, got {noise!r} of type {type(noise).__name__}")
    noise = float(noise)
    if not math.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be a finite number >= 0, got {noise}")
    dropout = check_probability("dropout", dropout)
    equal_energy = check_bool("equal_energy", equal_energy)
    rng = np.random.default_rng(seed)
    tok_id = rng.integers(0, n_tokens, n_samples)
    pos_id = rng.integers(0, n_positions, n_samples)
    out: dict[str, float] = {}
    for arm, width in (("add", d_model), ("concat", d_model // 2)):
        emb = rng.normal(0.0, width**-0.5, (n_tokens, width)) * math.sqrt(width)
        pe = sinusoidal_encoding(n_positions, width)
        if arm == "add":
            e_full, p_full = emb, pe
        else:
            e_full = np.concatenate([emb, np.zeros((n_tokens, width))], axis=1)
            p_full = np.concatenate([np.zeros((n_positions, width)), pe], axis=1)
            if equal_energy:
                e_full, p_full = e_full * math.sqrt(2.0), p_full * math.sqrt(2.0)
        x = e_full[tok_id] + p_full[pos_id]
        out[f"{arm}_energy"] = float(np.mean(np.sum(x * x, axis=1)))
        if noise > 0:
            x = x + rng.normal(0.0, noise, x.shape)
        if dropout > 0:
            x = x * (rng.random(x.shape) >= dropout) / (1.0 - dropout)
        t_hat = np.argmax(x @ e_full.T - 0.5 * np.sum(e_full * e_full, axis=1), axis=1)
        err = np.abs(np.argmax(x @ p_full.T, axis=1) - pos_id)
        out[f"{arm}_token"] = float(np.mean(t_hat == tok_id))
        out[f"{arm}_position"] = float(np.mean(err == 0))
        out[f"{arm}_position_near"] = float(np.mean(err <= 1))
        out[f"{arm}_position_far"] = float(np.mean(err > 10))
    return out


def _envelope_args(offsets: object, d_model: object, base: object) -> tuple[np.ndarray, int, float]:
    """The checked arguments of the dot-product envelopes: offsets ``k > 0``, even width, base > 1."""
    d_model = check_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be even (complete sin/cos pairs), got {d_model}")
    base = check_positive_float("base", base)
    if base <= 1.0:
        raise ValueError(f"base must be > 1, got {base}")
    if isinstance(offsets, bool):
        raise TypeError("offsets must be numbers, got a bool")
    try:
        k = np.asarray(offsets, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"offsets must be numbers, got {offsets!r}") from err
    if k.size == 0 or not np.all(np.isfinite(k)) or np.any(k <= 0):
        raise ValueError("offsets must be finite numbers > 0")
    return k, d_model, base


def dot_product_log_decay(offsets: float | np.ndarray, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """The logarithmic envelope of ``PE(p) . PE(p + k)`` for ``1 << k << base``.

    With ``u = 2i / d`` the frequencies are ``base**-u``; replacing the sum over pairs by
    ``d / 2`` times an integral over ``u`` in ``[0, 1]`` gives
    ``(d / 2) [Ci(k) - Ci(k / base)] / ln(base)``, and for ``1 << k << base``
    (``Ci(k) ~ 0``, ``Ci(x) ~ gamma + ln x`` for small ``x``)::

        PE(p) . PE(p + k)  ~  (d / 2) ln(base / (e**gamma k)) / ln(base)

    a straight line in ``ln k`` that reaches zero at ``k = base e**-gamma`` (about 5,615
    for base 10000). ``gamma`` is Euler's constant.

    Args:
        offsets: offsets ``k > 0`` (a number or an array).
        d_model: even encoding width.
        base: the constant 10000 of the paper.

    Returns:
        float64 array of the envelope at each offset.

    Example:
        >>> float(np.round(dot_product_log_decay(10000 * np.exp(-np.euler_gamma), 512), 12))
        0.0
    """
    k, d_model, base = _envelope_args(offsets, d_model, base)
    return (d_model / 2) * np.log(base / (np.exp(np.euler_gamma) * k)) / math.log(base)


def dirichlet_bound(max_len: int, d_model: int) -> float:
    """An upper bound on the closest pair among the first ``max_len`` positions, any frequencies.

    Dirichlet's simultaneous approximation theorem: for ``m = d / 2`` numbers
    ``omega_i / (2 pi)`` and ``N >= 1`` there is an integer ``1 <= k <= N**m`` that brings
    every ``k omega_i`` within ``2 pi / N`` of a whole number of turns. Each pair then
    contributes at most ``2 pi / N`` to the distance, so with ``N = floor((L - 1)**(1/m))``
    some offset ``k < L`` has ``|PE(p + k) - PE(p)| <= sqrt(m) 2 pi / N``, roughly
    ``2 pi sqrt(d / 2) L**(-2 / d)``. It holds for every choice of frequencies; for wide
    encodings it exceeds the distance between neighbours and says nothing, which is why
    only narrow encodings are forced into near-repetitions.

    Args:
        max_len: number of positions ``L`` (>= 2).
        d_model: even encoding width.

    Returns:
        The bound as a Python float.

    Example:
        >>> round(dirichlet_bound(100_001, 2), 10) == round(2 * np.pi / 100_000, 10)
        True
    """
    max_len = check_int("max_len", max_len, minimum=2)
    d_model = check_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be even (complete sin/cos pairs), got {d_model}")
    m = d_model // 2
    n = math.floor((max_len - 1) ** (1.0 / m) + 1e-9)
    while n**m > max_len - 1:  # guard the floating-point root
        n -= 1
    return float(math.sqrt(m) * 2.0 * math.pi / max(n, 1))


def dot_product_ci_envelope(offsets: float | np.ndarray, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """The cosine-integral envelope ``(d/2) [Ci(k) - Ci(k / base)] / ln(base)`` of the dot product.

    The step before :func:`dot_product_log_decay`: the sum ``sum_i cos(k omega_i)`` over the
    ``d / 2`` pairs replaced by ``d / 2`` times the integral over ``u = 2i / d`` in ``[0, 1]``,
    without the small-argument expansion of ``Ci``, so it also holds for ``k`` comparable
    to ``base``.

    Args:
        offsets: offsets ``k > 0`` (a number or an array).
        d_model: even encoding width.
        base: the constant 10000 of the paper (> 1).

    Returns:
        float64 array of the envelope at each offset.

    Example:
        >>> bool(abs(dot_product_ci_envelope(100.0, 512)[0] - 112.0) < 0.5)
        True
    """
    from scipy.special import sici

    k, d_model, base = _envelope_args(offsets, d_model, base)
    k = np.atleast_1d(k)
    return (d_model / 2) * (sici(k)[1] - sici(k / base)[1]) / math.log(base)


def dot_product_ci_zero(*, base: float = 10000.0) -> float:
    """The offset where :func:`dot_product_ci_envelope` first reaches zero (any width).

    ``Ci(k) = Ci(k / base)``: with ``Ci(k)`` small for large ``k``, close to
    ``k = 0.6165 base``, where ``Ci`` itself is zero (6,166 for base 10,000); the logarithmic form puts it at
    ``base e**-gamma = 0.5615 base`` instead.

    Args:
        base: the constant 10000 of the paper (> 20).

    Returns:
        The offset, a Python float.

    Example:
        >>> round(dot_product_ci_zero())
        6166
    """
    from scipy.optimize import brentq
    from scipy.special import sici

    base = check_positive_float("base", base)
    if base <= 20.0:
        raise ValueError(f"base must be > 20 (the envelope needs 1 << k << base), got {base}")
    return float(brentq(lambda k: sici(k)[1] - sici(k / base)[1], 0.3 * base, 0.95 * base, xtol=1e-9))


def longest_wavelength(d_model: int, *, base: float = 10000.0) -> float:
    """Wavelength of the slowest pair, ``2 pi base**((d - 2) / d)`` positions.

    Only for large ``d`` is it close to ``2 pi base``; for ``d = 8`` it is ``2 pi base**(3/4)``.

    Args:
        d_model: even encoding width (>= 2).
        base: the constant 10000 of the paper.

    Returns:
        The wavelength in positions, a Python float.

    Example:
        >>> round(longest_wavelength(8, base=1e5))
        35333
    """
    return float(2.0 * math.pi / _even_frequencies(d_model, base)[-1])


def base_for_wavelength(length: float, d_model: int) -> float:
    """The smallest base whose slowest pair has a wavelength of at least ``length`` positions.

    Inverts :func:`longest_wavelength`: ``base = (length / (2 pi))**(d / (d - 2))``.

    Args:
        length: the wavelength to reach, in positions (> 0).
        d_model: even encoding width, >= 4 (for ``d = 2`` the only wavelength is ``2 pi``).

    Returns:
        The base, a Python float.

    Example:
        >>> round(base_for_wavelength(100_000, 8), -3)
        400000.0
    """
    length = check_positive_float("length", length)
    d_model = check_int("d_model", d_model, minimum=4)
    if d_model % 2:
        raise ValueError(f"d_model must be even (complete sin/cos pairs), got {d_model}")
    return float((length / (2.0 * math.pi)) ** (d_model / (d_model - 2)))


# ---------------------------------------------------------------- reading time of a chapter

#: Reading rates behind :func:`reading_time`: words of prose and lines of code per minute.
PROSE_WORDS_PER_MINUTE = 100
CODE_LINES_PER_MINUTE = 20

_MYST_SKIP = re.compile(r"^\s*(:(alt|name|label|class|width):|```|\([\w-]+\)=|:::)")


def reading_time(notebook: str | os.PathLike) -> dict[str, dict[str, float]]:
    """Words of prose, lines of code and minutes to read each part of a chapter notebook.

    A chapter is split into ``core`` (everything not marked optional), ``optional``
    (sections whose ``##`` or ``###`` heading ends with ``(optional)``, down to the next
    heading of the same or a higher level) and ``exercises`` (from the ``## Exercises``
    heading on). Prose words are the whitespace-separated words of the markdown cells,
    without MyST directive lines, labels and figure alt texts; code lines are the
    non-blank lines of the code cells a reader sees (cells tagged ``remove-cell``,
    ``remove-input`` or ``hide-input`` are not counted). Minutes assume :data:`PROSE_WORDS_PER_MINUTE` words of
    technical prose (figures included) and :data:`CODE_LINES_PER_MINUTE` lines of code a
    minute: an estimate for a careful first reading, not a measurement of readers.

    Args:
        notebook: path of an ``.ipynb`` file.

    Returns:
        ``{part: {"words": int, "code_lines": int, "minutes": float}}`` for the parts
        ``core``, ``optional`` and ``exercises``.

    Example:
        >>> import json, os, tempfile
        >>> cells = [{"cell_type": "markdown", "source": ["## A\\n", "one two three"]},
        ...          {"cell_type": "markdown", "source": ["## B (optional)\\n", "four five"]},
        ...          {"cell_type": "code", "metadata": {}, "source": ["x = 1\\n", "y = 2"]}]
        >>> path = os.path.join(tempfile.mkdtemp(), "chapter.ipynb")
        >>> _ = open(path, "w").write(json.dumps({"cells": cells}))
        >>> t = reading_time(path)
        >>> t["core"]["words"], t["optional"]["words"], t["optional"]["code_lines"]
        (4, 4, 2)
    """
    if not isinstance(notebook, (str, os.PathLike)):
        raise TypeError(f"notebook must be a path, got {type(notebook).__name__}")
    try:
        with open(notebook, encoding="utf-8") as f:
            cells = json.load(f)["cells"]
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"notebook must be a readable .ipynb file, got {notebook!r}: {err}") from err
    parts = {name: {"words": 0, "code_lines": 0} for name in ("core", "optional", "exercises")}
    h2_optional = h3_optional = exercises = False
    for cell in cells:
        text = "".join(cell.get("source", []))
        if cell.get("cell_type") == "code":
            tags = cell.get("metadata", {}).get("tags", [])
            if {"remove-cell", "remove-input", "hide-input"} & set(tags):
                continue
            part = "exercises" if exercises else "optional" if (h2_optional or h3_optional) else "core"
            parts[part]["code_lines"] += sum(1 for line in text.splitlines() if line.strip())
            continue
        if cell.get("cell_type") != "markdown":
            continue
        for line in text.splitlines():
            if line.startswith("## "):
                exercises = exercises or line[3:].strip() == "Exercises"
                h2_optional, h3_optional = line.rstrip().endswith("(optional)"), False
            elif line.startswith("### "):
                h3_optional = line.rstrip().endswith("(optional)")
            if _MYST_SKIP.match(line):
                continue
            part = "exercises" if exercises else "optional" if (h2_optional or h3_optional) else "core"
            parts[part]["words"] += len(line.lstrip("#").split())
    return {
        name: {**v, "minutes": v["words"] / PROSE_WORDS_PER_MINUTE + v["code_lines"] / CODE_LINES_PER_MINUTE}
        for name, v in parts.items()
    }


# ---------------------------------------------------------------- decoding noisy encodings (chapter 3)


def decode_offsets(first: np.ndarray, second: np.ndarray, omegas: np.ndarray, max_offset: int) -> np.ndarray:
    """Estimate the offset ``k`` between two (noisy) encodings from their pairwise angles.

    Each sine/cosine pair of an encoding is a point on a circle at the angle
    ``omega_i p``. For two encodings, the angle from the first to the second is
    ``omega_i k`` (mod ``2 pi``) whatever ``p`` is: relative position. The estimate is the
    offset ``0 <= k < max_offset`` whose unit vectors ``(cos omega_i k, sin omega_i k)``
    lie nearest to the measured ones, the relative counterpart of
    :func:`nearest_position`.

    Args:
        first, second: arrays of shape ``(m, 2 * len(omegas))`` in the interleaved layout
            (sine, cosine of each pair), e.g. a band of columns of the encoding.
        omegas: the frequencies of those pairs, shape ``(h,)``.
        max_offset: number of candidate offsets (>= 1).

    Returns:
        Integer array of shape ``(m,)``.

    Example:
        >>> pe = sinusoidal_encoding(100, 8)
        >>> decode_offsets(pe[[10, 20]], pe[[13, 60]], sinusoidal_frequencies(8), 100)
        array([ 3, 40])
    """
    a = as_finite_array("first", first, min_size=0)
    b = as_finite_array("second", second, min_size=0)
    w = as_finite_array("omegas", omegas).ravel()
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] != 2 * w.size:
        raise ValueError(
            f"first and second must both have shape (m, 2 * len(omegas)) = (m, {2 * w.size}), "
            f"got {a.shape} and {b.shape}"
        )
    max_offset = check_int("max_offset", max_offset)
    angle = np.arctan2(b[:, 0::2], b[:, 1::2]) - np.arctan2(a[:, 0::2], a[:, 1::2])
    measured = np.concatenate([np.cos(angle), np.sin(angle)], axis=1)
    k = np.arange(max_offset, dtype=np.float64)[:, None] * w[None, :]
    candidates = np.concatenate([np.cos(k), np.sin(k)], axis=1)
    return nearest_position(measured, candidates)


def band_noise_sweep(
    d_model: int,
    length: int,
    bands: dict[str, np.ndarray],
    sigmas: np.ndarray,
    *,
    n_samples: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, np.ndarray]]:
    """Decode absolute positions and relative offsets from noisy bands of the encoding.

    For each band (a set of complete sin/cos pairs, given by their columns in the
    interleaved layout) and each noise level ``sigma``, Gaussian noise of standard
    deviation ``sigma`` is added to every entry of the band, then

    * **absolute**: a random position ``p < length`` is decoded as the nearest row of the
      band's table (:func:`nearest_position`);
    * **relative**: for a random pair ``p``, ``p + k`` with ``0 <= k < length`` and
      ``p + k < length``, both noisy, the offset is decoded by :func:`decode_offsets`.

    Positions, offsets and noise come from ``numpy.random.default_rng(seed)``: the
    results are the same on every machine.

    Args:
        d_model: even width of the encoding.
        length: number of positions (and of candidate offsets).
        bands: name -> column indices, each band made of whole pairs ``2i, 2i + 1``.
        sigmas: noise levels, shape ``(s,)``, each >= 0.
        n_samples: number of positions (and of position pairs) per noise level.
        seed: seed of the generator.

    Returns:
        ``{band: {"abs_exact", "abs_median", "abs_far", "rel_exact", "rel_median", "rel_far"}}``,
        each an array of shape ``(s,)``: the fraction decoded exactly, the median absolute
        error, and the fraction off by more than ``length / 20``.

    Example:
        >>> r = band_noise_sweep(16, 64, {"fast": np.arange(4)}, np.array([0.0]), n_samples=50)
        >>> float(r["fast"]["abs_exact"][0]), float(r["fast"]["rel_exact"][0])
        (1.0, 1.0)
    """
    d_model = check_int("d_model", d_model, minimum=2)
    length = check_int("length", length, minimum=2)
    n_samples = check_int("n_samples", n_samples)
    seed = check_int("seed", seed, minimum=0)
    s = as_finite_array("sigmas", sigmas, min_size=0).ravel()
    if s.size == 0 or np.any(~np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"sigmas must be a non-empty array of finite numbers >= 0, got {sigmas!r}")
    if not isinstance(bands, dict) or not bands:
        raise TypeError(f"bands must be a non-empty dict name -> column indices, got {bands!r}")
    table = sinusoidal_encoding(length, d_model)
    omegas_all = _even_frequencies(d_model, 10000.0)
    rng = np.random.default_rng(seed)
    far = length / 20
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, cols in bands.items():
        c = np.asarray(cols)
        if c.ndim != 1 or c.size % 2 or np.any(c[0::2] % 2) or np.any(c[1::2] != c[0::2] + 1):
            raise ValueError(f"bands[{name!r}] must list whole pairs of columns 2i, 2i + 1, got {cols!r}")
        if c.min() < 0 or c.max() >= d_model:
            raise ValueError(f"bands[{name!r}] has columns outside 0..{d_model - 1}")
        sub, omegas = table[:, c], omegas_all[c[0::2] // 2]
        res = {key: np.empty(s.size) for key in ("abs_exact", "abs_median", "abs_far", "rel_exact", "rel_median", "rel_far")}
        for j, sigma in enumerate(s):
            p = rng.integers(0, length, n_samples)
            guess = nearest_position(sub[p] + rng.normal(0.0, sigma, (n_samples, c.size)), sub)
            err = np.abs(guess - p)
            res["abs_exact"][j], res["abs_median"][j], res["abs_far"][j] = np.mean(err == 0), np.median(err), np.mean(err > far)
            k = rng.integers(0, length, n_samples)
            q = (rng.random(n_samples) * (length - k)).astype(np.int64)
            noisy_q = sub[q] + rng.normal(0.0, sigma, (n_samples, c.size))
            noisy_qk = sub[q + k] + rng.normal(0.0, sigma, (n_samples, c.size))
            err = np.abs(decode_offsets(noisy_q, noisy_qk, omegas, length) - k)
            res["rel_exact"][j], res["rel_median"][j], res["rel_far"][j] = np.mean(err == 0), np.median(err), np.mean(err > far)
        out[name] = res
    return out


# ---------------------------------------------------------------- reporting numbers in prose


def _as_real(name: str, x: object) -> float:
    if hasattr(x, "ndim") and getattr(x, "ndim") == 0 and hasattr(x, "item"):
        x = x.item()  # numpy scalar or 0-d array / tensor
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {x!r} of type {type(x).__name__}")
    value = float(x)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def round_significant(x: float, digits: int = 10) -> float:
    """``x`` rounded to ``digits`` significant decimal digits.

    The chapters glue measured numbers into their prose; rounding them first keeps the
    stored notebook outputs independent of last-bit differences between CPUs (float32
    kernels, BLAS), which nbval would otherwise flag. For a value computed in float32, pass
    exactly the number of digits the prose shows, so that no digit is invented.

    Args:
        x: a finite real number (Python, numpy or 0-d torch scalar).
        digits: number of significant digits, at least 1.

    Returns:
        A Python ``float``.

    Example:
        >>> round_significant(2 ** 0.5, 4)
        1.414
        >>> round_significant(-123456.0, 2)
        -120000.0
    """
    digits = check_int("digits", digits)
    return float(f"{_as_real('x', x):.{digits}g}")


def decade_above(x: float) -> float:
    """The smallest power of ten that is ``>= x``: a machine-independent bound on an error.

    Reporting "below 1e-12" instead of the measured 3.1e-13 keeps the text true on every
    CPU, where the last bits of a rounding error differ.

    Args:
        x: a finite number > 0.

    Returns:
        ``10.0 ** ceil(log10(x))`` as a Python ``float``.

    Example:
        >>> decade_above(3.1e-13)
        1e-12
        >>> decade_above(100.0)
        100.0
    """
    value = _as_real("x", x)
    if value <= 0:
        raise ValueError(f"x must be a finite number > 0, got {value}")
    return float(10.0 ** math.ceil(math.log10(value)))
