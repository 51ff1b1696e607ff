"""Context extension by remapping positions: Self-Extend, Dual Chunk Attention and STRING.

PI, NTK and YaRN (:mod:`posenc.rope.scaling`) change the *frequencies*, so that a long
context's angles look like a short one's. The methods here keep the frequencies and change
the *positions* a query and a key are rotated by, so that every relative position a head
sees is one it saw in training (or one it saw often). Each is computed by several
attention passes whose scores are merged; what each pass rotates by is summarised by the
matrix of relative positions ``R[a, b] = (query position id) - (key position id)`` that
the score of query ``a`` and key ``b`` is computed at. The functions return that matrix.

* :func:`self_extend_positions`: Self-Extend (Jin et al. 2024, section 3 and algorithm 1;
  ``datamllab/LongLM``): exact relative positions inside a neighbour window ``w``,
  floor-divided ("grouped") ones beyond it. Its reach is :func:`self_extend_reach`.
* :func:`dual_chunk_positions`: Dual Chunk Attention (An et al. 2024, section 3 and
  figure 2; ``HKUNLP/ChunkLlama``, vLLM's ``DualChunkRotaryEmbedding``), which Qwen2.5-1M
  serves 1M tokens with: key ids restart in every chunk; a query uses one id set for its
  own chunk, one for the previous chunk and one constant id for all earlier chunks.
* :func:`string_positions`: STRING (An et al. 2024b, section 4 and figure 5;
  ``HKUNLP/STRING``): relative positions from ``shift`` on are moved down by
  ``shift - local``, so the rarely trained largest ones are never used.

Positions are absolute token indices (an int ``n`` meaning ``0..n-1``, or 1-D integer
arrays); entries with the key after the query hold ``query - key`` (negative), which the
causal mask removes. The matrices are ``torch.long``, of shape ``(q_len, k_len)``.
"""

from __future__ import annotations

import numpy as np
import torch

from .._checks import as_positions, check_int, check_size

__all__ = [
    "dual_chunk_positions",
    "self_extend_positions",
    "self_extend_reach",
    "string_positions",
]


def _int_positions(name: str, positions: object) -> torch.Tensor:
    """An int ``n`` (``0..n-1``) or a 1-D array-like of non-negative integers, as a long tensor."""
    arr = as_positions(name, positions)
    if not np.all(arr == np.round(arr)):
        raise TypeError(f"{name} must hold integer token positions, got fractional values")
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name} must be non-negative token positions, got {int(arr.min())}")
    if arr.size and arr.max() >= 2**53:
        raise ValueError(f"{name} must be below 2**53, got {arr.max():.0f}")
    return torch.from_numpy(arr.astype(np.int64))


def _grid(q_positions: object, k_positions: object) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q_len, 1)`` and ``(1, k_len)`` long tensors, the matrix size checked."""
    q = _int_positions("q_positions", q_positions)
    k = _int_positions("k_positions", k_positions)
    check_size("the relative-position matrix (q_len, k_len)", len(q), len(k))
    return q[:, None], k[None, :]


def self_extend_positions(q_positions: object, k_positions: object, *, group: int, window: int) -> torch.Tensor:
    """Self-Extend's relative positions: exact within ``window``, grouped by ``group`` beyond.

    A query at ``i`` and a key at ``j`` with ``i - j < window`` (the neighbour attention)
    keep ``i - j``. Farther keys (the grouped attention) are rotated by ``j // group`` and
    the query by ``i // group + window - window // group``, the shift of algorithm 1 of Jin
    et al. (2024) that makes the grouped positions continue where the window ends, so

        ``R[i, j] = i - j``                                         if ``i - j < window``
        ``R[i, j] = i // group - j // group + window - window // group``  otherwise.

    The largest entry, query ``N - 1`` against key 0, stays below a trained length ``L``
    exactly while ``N <= self_extend_reach(L, group=group, window=window)``.

    Args:
        q_positions: query positions, an int ``n`` (``0..n-1``) or a 1-D integer array of
            length ``q_len`` (one ``[N - 1]`` for a decoding step).
        k_positions: key positions, likewise, ``(k_len,)``.
        group: the group size ``G >= 1`` (``--grp-attn-n`` in llama.cpp; 1 is plain RoPE).
        window: the neighbour window ``w >= 1``.

    Returns:
        ``torch.long`` of shape ``(q_len, k_len)``.

    Example:
        >>> R = self_extend_positions(12, 12, group=2, window=4)
        >>> R[11, :].tolist()  # the last query: exact up to 3, then grouped
        [7, 7, 6, 6, 5, 5, 4, 4, 3, 2, 1, 0]
    """
    group = check_int("group", group)
    window = check_int("window", window)
    i, j = _grid(q_positions, k_positions)
    grouped = i // group - j // group + (window - window // group)
    return torch.where(i - j < window, i - j, grouped)


def self_extend_reach(trained_length: int, *, group: int, window: int) -> int:
    """The longest input whose Self-Extend relative positions all stay below ``trained_length``.

    ``group * (trained_length - window + window // group)``, which is the formula of the
    Self-Extend paper and its README, ``(L - w) * G + w``, when ``group`` divides
    ``window`` (otherwise up to ``group - 1`` shorter); with ``window == trained_length``
    nothing is grouped and the reach is ``trained_length``. It is exact for
    :func:`self_extend_positions`: at this length the largest relative position is at most
    ``trained_length - 1``, and one token more makes it ``trained_length``.

    Args:
        trained_length: the training context ``L`` (relative positions ``0..L-1`` seen).
        group: the group size ``G >= 1``.
        window: the neighbour window, ``1 <= w <= L``.

    Returns:
        The reach ``N`` (an int).

    Example:
        >>> self_extend_reach(4096, group=4, window=1024)  # (4096 - 1024) * 4 + 1024
        13312
        >>> int(self_extend_positions([13311], 13312, group=4, window=1024).max())
        4095
        >>> self_extend_reach(4096, group=5, window=1024)  # 5 does not divide 1024: not 16,384
        16380
    """
    trained_length = check_int("trained_length", trained_length)
    group = check_int("group", group)
    window = check_int("window", window)
    if window > trained_length:
        raise ValueError(f"window must be at most trained_length={trained_length}, got {window}")
    # a window as long as the training covers every position it could group
    return max(trained_length, group * (trained_length - window + window // group))


def dual_chunk_positions(
    q_positions: object,
    k_positions: object,
    *,
    chunk_size: int,
    local_size: int,
    cap: int | None = None,
) -> torch.Tensor:
    """Dual Chunk Attention's relative positions, as ``dual_chunk_attention_config`` sets them.

    The sequence is cut into chunks of ``s = chunk_size - local_size`` tokens. A key at
    ``j`` is rotated by ``j mod s``. A query at ``i`` uses three position ids, one per
    attention pass:

    * its own chunk (intra-chunk): ``i mod s``, so ``R = i - j``, exact;
    * the previous chunk (successive-chunk): ``min(s + i mod s, cap)``, exact for the
      first ``cap - s`` queries of a chunk, then held at ``cap``;
    * every earlier chunk (inter-chunk): the successive id of a chunk's last query,
      ``min(2s - 1, cap)``, which is ``cap`` whenever ``local_size < s`` (the configs in use).

    ``cap`` defaults to ``chunk_size``, as ChunkLlama's code and vLLM's
    ``DualChunkRotaryEmbedding`` set it; figure 2 of An et al. (2024) uses ``chunk_size - 1``
    (its pretraining length minus one), so that no entry exceeds a trained position. The
    largest entry is at most ``cap`` at any length: DCA has no reach limit.

    Args:
        q_positions: query positions, an int ``n`` or a 1-D integer array, ``(q_len,)``.
        k_positions: key positions, likewise, ``(k_len,)``.
        chunk_size: ``chunk_size`` of the config (Qwen2.5-1M: 262,144, its training length).
        local_size: ``local_size`` of the config (Qwen2.5-1M: 8,192), ``< chunk_size``.
        cap: the largest query position id, ``chunk_size - local_size <= cap <= chunk_size``
            (default ``chunk_size``).

    Returns:
        ``torch.long`` of shape ``(q_len, k_len)``.

    Example:
        >>> R = dual_chunk_positions(18, 18, chunk_size=10, local_size=4, cap=9)  # figure 2
        >>> R[17, :].tolist()  # chunks of 6: inter, successive, intra
        [9, 8, 7, 6, 5, 4, 9, 8, 7, 6, 5, 4, 5, 4, 3, 2, 1, 0]
    """
    chunk_size = check_int("chunk_size", chunk_size, minimum=2)
    local_size = check_int("local_size", local_size, minimum=0)
    if local_size >= chunk_size:
        raise ValueError(f"local_size must be smaller than chunk_size={chunk_size}, got {local_size}")
    s = chunk_size - local_size
    cap = chunk_size if cap is None else check_int("cap", cap)
    if not s <= cap <= chunk_size:
        raise ValueError(f"cap must lie in [chunk_size - local_size, chunk_size] = [{s}, {chunk_size}], got {cap}")
    i, j = _grid(q_positions, k_positions)
    qc, kc = i // s, j // s
    key = j % s
    intra = i % s - key
    successive = torch.clamp(s + i % s, max=cap) - key
    inter = min(2 * s - 1, cap) - key
    out = torch.where(qc - kc >= 2, inter, successive)
    out = torch.where(qc - kc <= 0, intra, out)
    # keys after the query (masked): their true offset, like the other functions
    return torch.where(j > i, i - j, out)


def string_positions(q_positions: object, k_positions: object, *, shift: int, local: int) -> torch.Tensor:
    """STRING's relative positions: from ``shift`` on, moved down by ``shift - local``.

    ``R[i, j] = i - j`` if ``i - j < shift``, else ``i - j - shift + local`` (An et al.
    2024b, figure 5: the largest ``shift`` positions are dropped, the rest shifted onto the
    lower-left triangle, and ``local`` added back so the nearest keys keep a margin). On a
    sequence of the training length ``L`` the largest entry is ``L - 1 - shift + local``;
    the released code suggests ``shift`` = 0.25 to 0.4 of ``L`` and ``local`` = 128 to 512.
    (The released FlashAttention code counts the key at exactly ``shift`` in both passes.)

    Args:
        q_positions: query positions, an int ``n`` or a 1-D integer array, ``(q_len,)``.
        k_positions: key positions, likewise, ``(k_len,)``.
        shift: the shifted offset ``S >= 1`` (``shifted_offset`` in the released code).
        local: the local value ``W``, ``0 <= W <= S``.

    Returns:
        ``torch.long`` of shape ``(q_len, k_len)``.

    Example:
        >>> string_positions(9, 9, shift=3, local=1)[8, :].tolist()  # L = 9 as in figure 5
        [6, 5, 4, 3, 2, 1, 2, 1, 0]
    """
    shift = check_int("shift", shift)
    local = check_int("local", local, minimum=0)
    if local > shift:
        raise ValueError(f"local must be at most shift={shift}, got {local}")
    i, j = _grid(q_positions, k_positions)
    d = i - j
    return torch.where(d < shift, d, d - shift + local)
