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

import math
import numbers

import numpy as np
import torch

from .._checks import as_positions, check_int, check_positive_float
from ..sinusoidal import sinusoidal_frequencies

__all__ = [
    "float32_encoding",
    "float32_row_error",
    "min_distance_by_length",
    "min_distance_float32",
    "min_pairwise_distance",
    "nearest_position",
    "offset_distance",
    "offset_dot_product",
    "decade_above",
    "round_significant",
]

_CHUNK = 8192


def _even_frequencies(d_model: int, base: float) -> np.ndarray:
    d_model = check_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be even (complete sin/cos pairs), got {d_model}")
    return sinusoidal_frequencies(d_model, base=check_positive_float("base", base))


def offset_distance(offsets: int | np.ndarray, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """Exact distance ``|PE(p + k) - PE(p)|`` for each offset ``k`` (any ``p``), float64.

    Computed as ``2 * sqrt(sum_i sin(k omega_i / 2)**2)``, in chunks of offsets.

    Args:
        offsets: an int ``n`` (offsets ``0..n-1``) or a 1-D array of offsets.
        d_model: even encoding width.
        base: the constant 10000 of the paper.

    Returns:
        Array of shape ``(len(offsets),)``.

    Example:
        >>> bool(np.isclose(offset_distance([3], 8)[0],
        ...      np.linalg.norm(sinusoidal_encoding([7], 8) - sinusoidal_encoding([4], 8))))
        True
    """
    k = as_positions("offsets", offsets)
    w = _even_frequencies(d_model, base)
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


def min_distance_by_length(max_len: int, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """Smallest distance between the exact encodings of two of the first ``L`` positions.

    Args:
        max_len: largest length ``L`` considered (>= 2).
        d_model: even encoding width.
        base: the constant 10000 of the paper.

    Returns:
        Array ``m`` of shape ``(max_len + 1,)``: ``m[L]`` is the minimum over
        ``0 <= p < q < L``; ``m[0] = m[1] = inf`` (no pair).

    Example:
        >>> m = min_distance_by_length(5, 8)
        >>> bool(m[2] == offset_distance([1], 8)[0])
        True
    """
    max_len = check_int("max_len", max_len, minimum=2)
    dist = offset_distance(np.arange(1, max_len, dtype=np.float64), d_model, base=base)
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
    t = np.asarray(table, dtype=np.float64)
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
    q = np.asarray(queries, dtype=np.float64)
    t = np.asarray(table, dtype=np.float64)
    if q.ndim != 2 or t.ndim != 2 or q.shape[1] != t.shape[1]:
        raise ValueError(f"queries (m, d) and table (n, d) must share d, got {q.shape} and {t.shape}")
    tn = np.sum(t * t, axis=1)
    out = np.empty(q.shape[0], dtype=np.int64)
    for s in range(0, q.shape[0], 1024):
        qq = q[s : s + 1024]
        d2 = tn[None, :] - 2.0 * qq @ t.T
        out[s : s + qq.shape[0]] = np.argmin(d2, axis=1)
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
