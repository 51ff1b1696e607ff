"""Engineering recipes of chapters 1 to 3: a learned table past its length, a RoPE base for a target length, p / L_max.

* :func:`extend_learned_table` gives a trained learned-position model (chapter 7's
  :class:`~posenc.book.models.PositionalTransformer` with ``scheme="learned"``) a longer
  table, its new rows copied from the trained ones (``"tile"``, as Longformer did) or
  interpolated between them (``"interpolate"``); ``experiments/learned_table.py`` compares
  it, fine-tuned and not, with truncating the input and sliding a window.
* :func:`base_for_length` states two monotone criteria for the RoPE base that a target
  context length needs: the slowest pair's wavelength reaching the length, and Men et
  al.'s decay bound (the mean cosine over the pairs nonnegative at every distance up to the
  length) made monotone by requiring it of every larger base on a grid as well.
* :func:`previous_token_weight` and :func:`nearest_code_accuracy` measure the fixed-range
  fraction ``p / L_max`` against the sinusoid: the most attention a dot product can put on
  the previous token, and how often the position is recovered from a noisy code.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from .._checks import check_choice, check_int
from ..learned import LearnedPositionalEmbedding
from ..rotary import rotary_frequencies
from ._validate import check_real, check_seed, as_finite_array
from .models import PositionalTransformer

__all__ = [
    "TABLE_INITS", "extend_learned_table", "mean_cosine_nonnegative", "base_for_length", "previous_token_weight",
    "scalar_previous_token_bound", "nearest_code_accuracy",
]

TABLE_INITS = ("tile", "interpolate")


def extend_learned_table(model: PositionalTransformer, new_len: int, init: str = "tile") -> PositionalTransformer:
    """A copy of a learned-position model with a table of ``new_len`` rows; the old rows kept or stretched.

    Args:
        model: a :class:`~posenc.book.models.PositionalTransformer` with ``scheme="learned"``.
        new_len: rows of the new table (> the old ``max_len``).
        init: ``"tile"``: row ``p`` is old row ``p mod max_len`` (the first ``max_len`` rows
            unchanged); ``"interpolate"``: the old table resampled linearly onto
            ``new_len`` rows (row 0 and the last row unchanged, positions squeezed by
            ``(max_len - 1) / (new_len - 1)``).

    Example:
        >>> m = PositionalTransformer(10, scheme="learned", max_len=4, d_model=8, n_heads=2, n_layers=1)
        >>> big = extend_learned_table(m, 10)
        >>> big.positional.weight.shape, bool((big.positional.weight[4] == m.positional.weight[0]).all())
        (torch.Size([10, 8]), True)
    """
    if not isinstance(model, PositionalTransformer) or model.scheme != "learned":
        raise TypeError(f"model must be a PositionalTransformer with scheme='learned', got {type(model).__name__}")
    old = model.positional.weight.detach()
    new_len = check_int("new_len", new_len, minimum=old.shape[0] + 1)
    init = check_choice("init", init, TABLE_INITS)
    if init == "tile":
        table = old[torch.arange(new_len) % old.shape[0]]
    else:
        x = torch.linspace(0, old.shape[0] - 1, new_len, dtype=torch.float64)
        lo = x.floor().long().clamp(max=old.shape[0] - 2)
        frac = (x - lo).to(old.dtype)[:, None]
        table = old[lo] * (1 - frac) + old[lo + 1] * frac
    out = copy.deepcopy(model)
    emb = LearnedPositionalEmbedding(new_len, old.shape[1])
    with torch.no_grad():
        emb.weight.copy_(table)
    out.positional, out.max_len = emb, new_len
    return out


# ------------------------------------------------------------------ a RoPE base for a target length


def mean_cosine_nonnegative(base: float, length: int, head_dim: int = 128, *, chunk: int = 1 << 16) -> bool:
    """Men et al.'s condition: the mean over the pairs of ``cos(r w_i)`` is >= 0 for every ``r = 0 .. length``.

    Evaluated in float64, ``chunk`` distances at a time (stops at the first negative mean).

    Example:
        >>> mean_cosine_nonnegative(10_000.0, 1000), mean_cosine_nonnegative(10_000.0, 2000)
        (True, False)
    """
    base = check_real("base", base, low=1.0, low_open=True)
    length = check_int("length", length, minimum=0)
    head_dim = check_int("head_dim", head_dim, minimum=2)
    chunk = check_int("chunk", chunk)
    w = rotary_frequencies(head_dim, base=base)
    for start in range(0, length + 1, chunk):
        r = np.arange(start, min(length + 1, start + chunk), dtype=np.float64)
        if (np.cos(r[:, None] * w).mean(axis=1) < 0).any():
            return False
    return True


def base_for_length(length: int, *, head_dim: int = 128, criterion: str = "wavelength",
                    grid: np.ndarray | None = None) -> float:
    """The smallest RoPE base a target context ``length`` needs, by a criterion monotone in the length.

    Args:
        length: target context length in tokens.
        head_dim: rotary dimensions per head.
        criterion:
            ``"wavelength"``: the slowest pair completes at most one turn over the
            context, ``2 pi base**((d - 2) / d) >= length``, in closed form;
            ``"decay"``: Men et al.'s condition, the mean of ``cos(r w_i)`` over the pairs
            nonnegative for every distance ``r <= length``
            (:func:`mean_cosine_nonnegative`), required of the base *and of every larger
            base on the grid*; the answer is the grid point above the largest grid base
            that fails. ``"decay_first"``: the smallest grid base that passes; monotone in
            the length, but not a safe choice of base: a larger base can fail again,
            because the first negative mean is a dip of a few positions whose place jumps
            as the base moves.
        grid: the bases searched by ``"decay"`` (default ``10**np.arange(3, 11.01, 0.05)``);
            increasing.

    Returns:
        The base, a Python float (``inf`` when even the largest grid base fails).

    Example:
        >>> round(base_for_length(8192, criterion="wavelength"))
        1461
    """
    length = check_int("length", length)
    head_dim = check_int("head_dim", head_dim, minimum=4)
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    criterion = check_choice("criterion", criterion, ("wavelength", "decay", "decay_first"))
    if criterion == "wavelength":
        return float((length / (2 * math.pi)) ** (head_dim / (head_dim - 2)))
    grid = 10 ** np.arange(3, 11.01, 0.05) if grid is None else as_finite_array("grid", grid, ndim=1)
    if (np.diff(grid) <= 0).any() or grid[0] <= 1:
        raise ValueError("grid must be increasing bases > 1")
    if criterion == "decay_first":
        for b in grid:  # from the bottom up, stop at the first pass
            if mean_cosine_nonnegative(float(b), length, head_dim):
                return float(b)
        return math.inf
    for k in range(len(grid) - 1, -1, -1):  # from the top down, stop at the first failure
        if not mean_cosine_nonnegative(float(grid[k]), length, head_dim):
            return float(grid[k + 1]) if k + 1 < len(grid) else math.inf
    return float(grid[0])


# ------------------------------------------------------------------ the fraction p / L_max


def previous_token_weight(code: np.ndarray, scale: float) -> float:
    """Mean causal attention on the previous token when query ``p`` looks for ``code[p - 1]``.

    The score of query ``p`` and key ``j <= p`` is ``scale * code[p - 1] . code[j]``, the
    best a single query/key product can do when the query may be any linear map of the
    code (for the sinusoid, ``M_{-1} PE(p) = PE(p - 1)`` is one). Averaged over ``p >= 1``.

    Example:
        >>> code = np.eye(5)                      # one-hot: exact
        >>> previous_token_weight(code, 50.0) > 0.99
        True
    """
    code = as_finite_array("code", code, ndim=2, min_size=2)
    if code.shape[0] < 2:
        raise ValueError(f"code must have at least 2 rows (positions), got shape {code.shape}")
    scale = check_real("scale", scale)
    n = code.shape[0]
    s = scale * code[:-1] @ code.T  # row p - 1 = query p
    s = np.where(np.arange(n)[None, :] <= np.arange(1, n)[:, None], s, -np.inf)
    s -= s.max(axis=1, keepdims=True)
    w = np.exp(s)
    w /= w.sum(axis=1, keepdims=True)
    return float(w[np.arange(n - 1), np.arange(n - 1)].mean())


def scalar_previous_token_bound(n: int, slopes: np.ndarray | None = None) -> float:
    """The most causal attention a score linear in the key's position puts on the previous token.

    A one-number code ``c(p)`` (``p``, ``p / n`` or ``p / L_max``) gives a dot-product score
    ``a c(p) c(j) + b c(p) + e c(j) + f``; for a fixed query ``p`` it is linear in ``c(j)``,
    so the weights over the keys ``0 .. p`` are ``exp(t j)`` for one slope ``t``. The best
    ``t`` per query is found on ``slopes`` (default: 401 values in [-10, 10]; the optimum
    for long prefixes is ``t = ln 2``).

    Returns:
        The mean over queries ``p = 1 .. n - 1`` of the largest weight on key ``p - 1``.

    Example:
        >>> round(scalar_previous_token_bound(512), 2)   # 1/4 for long prefixes: exp(-t) = 1/2
        0.25
    """
    n = check_int("n", n, minimum=2)
    slopes = np.linspace(-10, 10, 401) if slopes is None else as_finite_array("slopes", slopes, ndim=1)
    best = []
    for p in range(1, n):
        j = np.arange(p + 1)
        s = slopes[:, None] * j[None, :]
        s -= s.max(axis=1, keepdims=True)
        w = np.exp(s)
        best.append((w[:, p - 1] / w.sum(axis=1)).max())
    return float(np.mean(best))


def nearest_code_accuracy(code: np.ndarray, noise: float, *, trials: int = 4, seed: int = 0) -> float:
    """How often the position is recovered exactly from ``code[p] + noise`` by the nearest code.

    Every row gets Gaussian noise of standard deviation ``noise`` per entry, ``trials``
    times; the decoded position is the nearest row of ``code``.

    Example:
        >>> nearest_code_accuracy(np.eye(8), 0.1)
        1.0
    """
    code = as_finite_array("code", code, ndim=2, min_size=2)
    noise = check_real("noise", noise, low=0.0)
    trials = check_int("trials", trials)
    rng = np.random.default_rng(check_seed("seed", seed))
    sq = (code**2).sum(axis=1)
    hits = 0
    for _ in range(trials):
        y = code + noise * rng.standard_normal(code.shape)
        d = sq[None, :] - 2 * y @ code.T
        hits += int((d.argmin(axis=1) == np.arange(len(code))).sum())
    return hits / (trials * len(code))
