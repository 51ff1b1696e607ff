"""Relative position as a term inside attention: ALiBi, T5's bucketed bias, Shaw et al.

These schemes add nothing to the token embeddings. They change the attention score of
query ``i`` and key ``j`` by an amount that depends only on the offset ``j - i``:

* ALiBi (Press et al., 2022, section 3) adds ``-m_h * (i - j)``, a fixed penalty
  growing linearly with distance, with one slope ``m_h`` per head and no parameters;
* T5 (Raffel et al., 2020, section 2.1) adds a learned scalar per head and per *bucket*
  of offsets: exact buckets for short offsets, logarithmically wider ones up to
  ``max_distance``, one shared bucket beyond;
* Shaw et al. (2018, section 3) add ``q_i . a_{j-i} / sqrt(d)``, a learned vector per
  clipped offset.

Query/key alignment: when ``k_len > q_len`` (cached decoding: the queries are the last
``q_len`` tokens of a sequence of ``k_len``), query row ``i`` has position
``k_len - q_len + i``, so the offsets are measured from the *end* of the keys. This is
what Hugging Face's T5 does with ``past_seen_tokens``. ``k_len < q_len`` is rejected.

Every module here computes its tables on the device of its parameters or buffers, with
no host-device synchronisation, so that it can be captured by ``torch.compile(...,
fullgraph=True)``; ``reset_parameters()`` re-initialises the parameters and rebuilds the
non-persistent buffers (after a meta-device initialisation and ``to_empty``). A bias
tensor is refused (``ValueError``, before allocation) only where it cannot be built: more
memory than its device has, or lengths beyond ``2**31``; larger ones are written head by
head, so that the peak is the result and one ``(q_len, k_len)`` table. Beyond a few
thousand tokens, FlexAttention (:mod:`posenc.flex`) applies the biases without any tensor.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from ._checks import (
    MAX_PARAMETER_ELEMENTS,
    check_bool,
    check_device,
    check_float_dtype,
    check_int,
    check_memory,
    check_size,
    should_check_values,
)

__all__ = [
    "ALiBiBias",
    "AttentionBias",
    "ShawRelativePosition",
    "T5RelativeBias",
    "alibi_bias",
    "alibi_score_mod",
    "alibi_slopes",
    "relative_positions",
    "t5_relative_bucket",
]


MAX_LENGTH = 2**31


def _check_lengths(
    q_len: int,
    k_len: int | None,
    *heads: int,
    dtype: torch.dtype = torch.float32,
    device: torch.device | None = None,
) -> tuple[int, int]:
    """Checked ``(q_len, k_len)``; a table ``(*heads, q_len, k_len)`` of ``dtype`` must fit ``device``'s memory."""
    q_len = check_int("q_len", q_len)
    k_len = q_len if k_len is None else check_int("k_len", k_len)
    if k_len < q_len:
        raise ValueError(
            f"k_len must be >= q_len (queries are aligned to the end of the keys), "
            f"got q_len={q_len}, k_len={k_len}"
        )
    longest = max(q_len, k_len)
    if not isinstance(longest, torch.SymInt) and longest > MAX_LENGTH:
        raise ValueError(f"q_len and k_len must be at most the limit of {MAX_LENGTH} (2**31), got {longest}")
    # building it takes the (q_len, k_len) offsets: int64, once more after the clamp, and float32
    scratch = 20 * q_len * k_len if not isinstance(q_len * k_len, torch.SymInt) else 0
    check_memory("the bias table (q_len, k_len)" if not heads else "the bias table (n_heads, q_len, k_len)",
                 *heads, q_len, k_len, dtype=dtype, device=device, scratch=scratch)
    return q_len, k_len


def relative_positions(
    q_len: int, k_len: int | None = None, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Offsets ``key_position - query_position`` as an integer matrix.

    Queries are aligned to the end of the keys: query row ``i`` sits at position
    ``k_len - q_len + i`` (see the module docstring).

    Args:
        q_len: number of queries (>= 1).
        k_len: number of keys (>= ``q_len``; defaults to ``q_len``).
        device: where to build the tensor (default: the CPU).

    Returns:
        ``torch.long`` tensor of shape ``(q_len, k_len)``; entry ``(i, j)`` is
        ``j - (k_len - q_len + i)``, negative for keys in the past.

    Example:
        >>> relative_positions(2, 3)
        tensor([[-1,  0,  1],
                [-2, -1,  0]])
    """
    device = check_device("device", device)
    q_len, k_len = _check_lengths(q_len, k_len, dtype=torch.long, device=device)
    query = torch.arange(k_len - q_len, k_len, dtype=torch.long, device=device)[:, None]
    key = torch.arange(k_len, dtype=torch.long, device=device)[None, :]
    return key - query


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """The head slopes ``m_h`` of ALiBi (Press et al., 2022, section 3).

    For ``n`` heads with ``n`` a power of two the slopes are the geometric sequence
    ``2**(-8/n), 2**(-16/n), ..., 2**(-8)``. Otherwise, with ``p`` the largest power of two
    below ``n``, they are the ``p`` slopes of that rule followed by the first ``n - p`` of
    the odd-numbered slopes (1st, 3rd, 5th, ...) of the rule for ``2p`` heads, which is what
    the authors' code and BLOOM do. Computed in float64 and rounded once to float32.

    Args:
        n_heads: number of attention heads (>= 1).

    Returns:
        float32 tensor of shape ``(n_heads,)``, all in ``(0, 1)``.

    Example:
        >>> alibi_slopes(4)
        tensor([0.2500, 0.0625, 0.0156, 0.0039])
    """
    n_heads = check_int("n_heads", n_heads)
    check_size("the slopes of n_heads", n_heads, limit=2**20)
    p = 2 ** int(math.floor(math.log2(n_heads)))

    def geometric(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (k + 1) for k in range(n)]

    slopes = geometric(p) + geometric(2 * p)[0::2][: n_heads - p]
    return torch.tensor(slopes, dtype=torch.float32)  # each Python float rounded once to float32


def alibi_bias(
    n_heads: int,
    q_len: int | None = None,
    k_len: int | None = None,
    *,
    bidirectional: bool = False,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """The ALiBi score bias ``-m_h * distance`` for every head, query and key.

    Causal form (default, Press et al., 2022, section 3): keys at or before the query get
    ``-m_h * (i - j)`` (0 on the diagonal); keys *after* the query get 0, because the
    causal mask removes them, and this function does not apply that mask. Symmetric form
    (``bidirectional=True``, for encoders, as in the authors' discussion of encoder
    models and in many bidirectional ALiBi ports): ``-m_h * |i - j|`` everywhere. With
    ``k_len > q_len`` the queries are aligned to the end of the keys, as in cached
    decoding.

    With ``q_positions`` and/or ``k_positions`` the distance is that of the positions
    given, ``q_positions[i] - k_positions[j]``, not of the indices: packed sequences
    (positions restarting at 0), left padding, a cache whose keys are not ``0 .. k_len - 1``,
    or irregular times (floating-point positions). One of them alone serves for both
    (self-attention); with the positions of the length form, ``arange(k_len - q_len,
    k_len)`` and ``arange(k_len)``, the result is the length form's.

    Args:
        n_heads: number of heads (>= 1).
        q_len: number of queries (>= 1; may be left out when positions are given).
        k_len: number of keys (>= ``q_len``; defaults to ``q_len``).
        bidirectional: the symmetric form ``-m_h * |i - j|``.
        device, dtype: of the result (default: CPU, float32). The slopes are rounded
            to float32 first, as in BLOOM, whatever ``dtype``.
        q_positions: positions of the queries, integer or floating-point, ``(q_len,)`` or
            ``(batch, q_len)``, on ``device``.
        k_positions: positions of the keys, ``(k_len,)`` or ``(batch, k_len)``, likewise.

    Returns:
        Tensor of shape ``(n_heads, q_len, k_len)`` (``(batch, n_heads, q_len, k_len)``
        when a positions tensor has a batch), to be added to the attention scores
        ``q . k / sqrt(d)`` before the softmax.

    Example:
        >>> alibi_bias(1, 3)
        tensor([[[ 0.0000,  0.0000,  0.0000],
                 [-0.0039,  0.0000,  0.0000],
                 [-0.0078, -0.0039,  0.0000]]])

        As the float mask of ``scaled_dot_product_attention``, combined with the causal
        mask (a float mask and ``is_causal=True`` cannot be given together):

        >>> import torch.nn.functional as F
        >>> q = k = v = torch.randn(1, 4, 5, 8)
        >>> mask = alibi_bias(4, 5).masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf"))
        >>> F.scaled_dot_product_attention(q, k, v, attn_mask=mask).shape
        torch.Size([1, 4, 5, 8])

        Two packed sequences of lengths 2 and 3 (positions restart at 0); the keys of the
        other sequence are for a block-diagonal mask to remove:

        >>> alibi_bias(1, q_positions=torch.tensor([0, 1, 0, 1, 2]))[0, 4]
        tensor([-0.0078, -0.0039, -0.0078, -0.0039,  0.0000])
    """
    bidirectional = check_bool("bidirectional", bidirectional)
    dtype = check_float_dtype("dtype", dtype)
    device = check_device("device", device)
    n_heads = check_int("n_heads", n_heads)
    if q_positions is not None or k_positions is not None:
        rel = _position_offsets(q_positions, k_positions, q_len, k_len, n_heads, dtype=dtype or torch.float32,
                                device=device, floating=True)
        return _alibi_from_offsets(alibi_slopes(n_heads).to(device=rel.device), rel, bidirectional, dtype)
    _check_lengths(q_len, k_len, n_heads, dtype=dtype or torch.float32, device=device)
    return _alibi_from_slopes(alibi_slopes(n_heads).to(device=device), q_len, k_len, bidirectional, dtype)


_ONE_PASS = 2**26  # larger biases are written head by head: the peak is the result and one (q_len, k_len) table


def _alibi_from_slopes(
    slopes: torch.Tensor, q_len: int, k_len: int | None, bidirectional: bool, dtype: torch.dtype | None
) -> torch.Tensor:
    """``-slope * distance`` computed in float32 on the slopes' device, cast to ``dtype`` at the end."""
    rel = relative_positions(q_len, k_len, device=slopes.device)  # j - i
    rel = -rel.abs() if bidirectional else rel.clamp(max=0)
    rel = rel.to(torch.float32)
    slopes = slopes.to(torch.float32)
    n = slopes.shape[0] * rel.numel()
    if isinstance(n, torch.SymInt) or n <= _ONE_PASS or torch.compiler.is_compiling():
        bias = slopes[:, None, None] * rel[None]
        return bias if dtype is None else bias.to(dtype)
    out = torch.empty((slopes.shape[0], *rel.shape), dtype=dtype or torch.float32, device=slopes.device)
    for h in range(slopes.shape[0]):  # the same float32 products as above, one head at a time
        out[h].copy_(slopes[h] * rel)
    return out


def _check_position_tensor(name: str, positions: object, *, floating: bool) -> torch.Tensor:
    """A checked positions tensor of shape ``(len,)`` or ``(batch, len)``."""
    kinds = "integer or floating-point" if floating else "integer"
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"{name} must be an {kinds} torch.Tensor of shape (len,) or (batch, len), got {type(positions).__name__}"
        )
    if positions.dtype == torch.bool or positions.is_complex() or (positions.is_floating_point() and not floating):
        raise TypeError(f"{name} must hold {'real numbers' if floating else 'integers'}, got dtype {positions.dtype}")
    if positions.ndim not in (1, 2) or positions.shape[-1] == 0:
        raise ValueError(f"{name} must have shape (len,) or (batch, len) with len >= 1, got {tuple(positions.shape)}")
    if positions.is_floating_point() and should_check_values(None, positions) and not bool(positions.isfinite().all()):
        raise ValueError(f"{name} must be finite, got a nan or infinite value")
    return positions


def _position_offsets(
    q_positions: object,
    k_positions: object,
    q_len: int | None,
    k_len: int | None,
    *heads: int,
    dtype: torch.dtype,
    device: torch.device | None,
    floating: bool = False,
) -> torch.Tensor:
    """Offsets ``k_positions[j] - q_positions[i]``, shape ``(q_len, k_len)`` or ``(batch, q_len, k_len)``.

    One positions tensor alone is both (self-attention); a length given must equal the last
    dimension of its positions.
    """
    given = {}
    for name, pos in (("q_positions", q_positions), ("k_positions", k_positions)):
        if pos is not None:
            given[name] = _check_position_tensor(name, pos, floating=floating)
    if device is not None and any(p.device != device for p in given.values()):
        name, pos = next((n, p) for n, p in given.items() if p.device != device)
        raise ValueError(f"{name} must be on the bias's device ({device}), got {pos.device}")
    if len(given) == 2 and given["q_positions"].device != given["k_positions"].device:
        raise ValueError(
            f"k_positions must be on q_positions' device ({given['q_positions'].device}), got {given['k_positions'].device}"
        )
    if q_positions is None or k_positions is None:  # self-attention: the queries are the keys
        q_positions = k_positions = next(iter(given.values()))
    for name, pos, length in (("q", q_positions, q_len), ("k", k_positions, k_len)):
        if length is not None and check_int(f"{name}_len", length) != pos.shape[-1]:
            raise ValueError(
                f"{name}_len must equal the last dimension of {name}_positions ({pos.shape[-1]}), got {length}"
            )
    q_len, k_len, at = q_positions.shape[-1], k_positions.shape[-1], q_positions.device
    if q_positions.ndim == 2 and k_positions.ndim == 2 and q_positions.shape[0] != k_positions.shape[0]:
        raise ValueError(
            f"k_positions must have the batch of q_positions ({q_positions.shape[0]}), got {k_positions.shape[0]}"
        )
    batch = [p.shape[0] for p in (q_positions, k_positions) if p.ndim == 2][:1]
    check_memory("the bias table (batch, n_heads, q_len, k_len)" if batch else "the bias table (n_heads, q_len, k_len)",
                 *batch, *heads, q_len, k_len, dtype=dtype, device=at, scratch=20 * max(batch or [1]) * q_len * k_len)
    if q_positions.is_floating_point() or k_positions.is_floating_point():
        common = torch.promote_types(q_positions.dtype, k_positions.dtype)
        q_positions, k_positions = q_positions.to(common), k_positions.to(common)
    else:
        q_positions, k_positions = q_positions.long(), k_positions.long()
    return k_positions[..., None, :] - q_positions[..., :, None]


def _alibi_from_offsets(slopes: torch.Tensor, rel: torch.Tensor, bidirectional: bool, dtype: torch.dtype | None) -> torch.Tensor:
    """``-slope * distance`` from offsets ``(..., q_len, k_len)``: ``(..., n_heads, q_len, k_len)``."""
    rel = -rel.abs() if bidirectional else rel.clamp(max=0)
    bias = slopes.to(torch.float32)[:, None, None] * rel.to(torch.float32)[..., None, :, :]
    return bias if dtype is None else bias.to(dtype)


ScoreMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _check_query_offset(query_offset: object) -> int | torch.Tensor:
    if isinstance(query_offset, torch.Tensor):
        if query_offset.ndim or query_offset.is_floating_point() or query_offset.dtype == torch.bool:
            raise TypeError(f"query_offset must be an int or a 0-d integer tensor, got {query_offset!r}")
        return query_offset
    return check_int("query_offset", query_offset, minimum=0)


def alibi_score_mod(
    n_heads: int,
    *,
    bidirectional: bool = False,
    query_offset: int | torch.Tensor = 0,
    device: torch.device | str | None = None,
) -> ScoreMod:
    """ALiBi as a FlexAttention ``score_mod``: the bias of :func:`alibi_bias`, never materialised.

    ``flex_attention(q, k, v, score_mod=alibi_score_mod(H), block_mask=causal_block_mask(S))``
    equals ``scaled_dot_product_attention`` with ``alibi_bias(H, S)`` and the causal mask
    as its float mask, for any length (no ``(n_heads, q_len, k_len)`` tensor).

    Args:
        n_heads: number of heads (>= 1); must equal the heads of ``q``.
        bidirectional: the symmetric form ``-m_h * |i - j|`` (encoders).
        query_offset: the position of query 0 among the keys (``k_len - q_len`` when
            decoding with a cache, as :func:`alibi_bias` aligns them).
        device: where the slopes live: the device of ``q`` (default: the CPU).

    Returns:
        ``score_mod(score, batch, head, q_idx, kv_idx)``.

    The same slopes go to flash-attn as they are: ``flash_attn_func(q, k, v, causal=True,
    alibi_slopes=alibi_slopes(H).to(q.device))`` adds ``-m_h * |i + k_len - q_len - j|``,
    the convention of :func:`alibi_bias` (queries aligned to the end of the keys).

    Example:
        >>> score_mod = alibi_score_mod(4)
        >>> float(score_mod(torch.tensor(0.0), torch.tensor(0), torch.tensor(0), torch.tensor(5), torch.tensor(3)))
        -0.5
    """
    bidirectional = check_bool("bidirectional", bidirectional)
    slopes = alibi_slopes(n_heads).to(check_device("device", device))
    offset = _check_query_offset(query_offset)

    def score_mod(score, batch, head, q_idx, kv_idx):  # noqa: ARG001 (FlexAttention's signature)
        rel = kv_idx - (q_idx + offset)
        rel = -rel.abs() if bidirectional else rel.clamp(max=0)
        return score + slopes[head] * rel.to(torch.float32)

    return score_mod


class AttentionBias(nn.Module):
    """The one interface of every module that adds a position term to attention scores.

    Subclasses implement :meth:`score_bias`: given the queries ``q`` of shape
    ``(..., n_heads, q_len, head_dim)`` (after the split into heads) and the number of
    keys, return the additive score term, broadcastable to ``(..., n_heads, q_len,
    k_len)``, on ``q``'s device and in ``q``'s dtype. :class:`posenc.SelfAttention`
    calls it when such a module is passed as ``bias``; a model of your own can do the
    same. ALiBi and T5 use only the shape of ``q``; Shaw et al.'s term depends on its
    values.
    """

    def score_bias(self, q: torch.Tensor, k_len: int | None = None) -> torch.Tensor:
        """The additive score term for queries ``q`` ``(..., n_heads, q_len, head_dim)`` and ``k_len`` keys."""
        raise NotImplementedError(f"{type(self).__name__} must implement score_bias(q, k_len)")


def _check_queries(
    q: object, width: int | None = None, *, n_heads: int | None = None, device: torch.device | None = None
) -> torch.Tensor:
    if not isinstance(q, torch.Tensor):
        raise TypeError(f"q must be a torch.Tensor of shape (..., q_len, head_dim), got {type(q).__name__}")
    if not q.is_floating_point():
        raise TypeError(
            f"q must be a floating-point tensor (float16, bfloat16, float32 or float64), got dtype {q.dtype}"
        )
    if q.ndim < 2 or (width is not None and q.shape[-1] != width):
        want = "head_dim" if width is None else width
        raise ValueError(f"q must have shape (..., q_len, {want}), got {tuple(q.shape)}")
    if n_heads is not None and q.ndim >= 3 and q.shape[-3] != n_heads:
        raise ValueError(
            f"q must have shape (..., n_heads={n_heads}, q_len, head_dim), got {tuple(q.shape)}"
        )
    if device is not None and q.device != device:
        raise ValueError(f"q must be on the module's device ({device}), got {q.device}")
    return q


class ALiBiBias(AttentionBias):
    """ALiBi as a module: no parameters, the bias of :func:`alibi_bias` for each call.

    The slopes are a float32 non-persistent buffer (they follow the module to its device
    and are not saved in ``state_dict``; :meth:`reset_parameters` rebuilds them), so a
    call builds the bias on that device with no host-device copy.

    Args:
        n_heads: number of heads (>= 1).
        bidirectional: the symmetric form ``-m_h * |i - j|`` (encoders).

    Shapes:
        ``forward(q_len, k_len=None, *, dtype=None)``: ``(n_heads, q_len, k_len)`` on the
        module's device, float32 unless ``dtype`` says otherwise.
        ``forward(*, q_positions=..., k_positions=...)``: the bias at those positions, as
        :func:`alibi_bias` takes them (``(batch, n_heads, q_len, k_len)`` with a batch).
        ``score_bias(q, k_len=None)``: the same on ``q``'s device and in its dtype, for
        queries ``(..., n_heads, q_len, head_dim)``.

    Example:
        >>> alibi = ALiBiBias(4)
        >>> alibi(3).shape
        torch.Size([4, 3, 3])
        >>> alibi.score_bias(torch.randn(2, 4, 3, 8)).shape
        torch.Size([4, 3, 3])

        In a causal model, as the float mask of ``scaled_dot_product_attention`` with the
        causal mask folded in (``-inf`` above the diagonal):

        >>> import torch.nn.functional as F
        >>> q = k = v = torch.randn(1, 4, 5, 8)
        >>> mask = alibi(5).masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf"))
        >>> F.scaled_dot_product_attention(q, k, v, attn_mask=mask).shape
        torch.Size([1, 4, 5, 8])
    """

    slopes: torch.Tensor

    def __init__(self, n_heads: int, *, bidirectional: bool = False) -> None:
        super().__init__()
        self.n_heads = check_int("n_heads", n_heads)
        check_size("the slopes of n_heads", self.n_heads, limit=2**20)
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.register_buffer("slopes", torch.empty(self.n_heads, dtype=torch.float32), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Rebuild the slopes buffer in place (a no-op on ``meta``)."""
        if self.slopes.device.type != "meta":
            with torch.no_grad():
                self.slopes.copy_(alibi_slopes(self.n_heads))

    def _exact_slopes(self) -> torch.Tensor:
        """The float32 slopes; rebuilt (a host-to-device copy) if the module was cast to 16 bits."""
        if self.slopes.dtype in (torch.float32, torch.float64):  # float64 holds the float32 values exactly
            return self.slopes
        return alibi_slopes(self.n_heads).to(self.slopes.device)

    def forward(
        self,
        q_len: int | None = None,
        k_len: int | None = None,
        *,
        dtype: torch.dtype | None = None,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        dtype = check_float_dtype("dtype", dtype)
        if q_positions is not None or k_positions is not None:
            rel = _position_offsets(q_positions, k_positions, q_len, k_len, self.n_heads,
                                    dtype=dtype or torch.float32, device=self.slopes.device, floating=True)
            return _alibi_from_offsets(self._exact_slopes(), rel, self.bidirectional, dtype)
        _check_lengths(q_len, k_len, self.n_heads, dtype=dtype or torch.float32, device=self.slopes.device)
        return _alibi_from_slopes(self._exact_slopes(), q_len, k_len, self.bidirectional, dtype)

    def score_bias(self, q: torch.Tensor, k_len: int | None = None) -> torch.Tensor:
        q = _check_queries(q, n_heads=self.n_heads)
        _check_lengths(q.shape[-2], k_len, self.n_heads, dtype=q.dtype, device=q.device)
        slopes = self._exact_slopes().to(q.device)
        return _alibi_from_slopes(slopes, q.shape[-2], k_len, self.bidirectional, q.dtype)

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, bidirectional={self.bidirectional}"


def _check_integer_tensor(name: str, value: object) -> torch.Tensor:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer tensor or int, got a bool")
    if isinstance(value, int):
        return torch.tensor(value, dtype=torch.long)
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be an integer torch.Tensor or int, got {type(value).__name__}")
    if value.dtype == torch.bool or value.is_floating_point() or value.is_complex():
        raise TypeError(f"{name} must hold integers (relative positions are whole numbers), got dtype {value.dtype}")
    return value.to(torch.long)


def t5_relative_bucket(
    relative_position: torch.Tensor | int,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's bucket index for each offset ``memory_position - query_position``.

    Bidirectional: half of the buckets for keys after the query (offset > 0), half for the
    rest. Unidirectional (decoder): keys after the query all go to bucket 0 (they are
    masked anyway) and the distance is ``-offset``. Within each half, with ``n`` buckets
    there, distances below ``n // 2`` get their own bucket; larger distances share
    logarithmically wider buckets up to ``max_distance``, and every distance at or beyond
    it falls in the last bucket. The logarithm is taken in float32, as in T5, so that the
    result is bucket for bucket the same (Raffel et al., 2020, section 2.1).

    Args:
        relative_position: integer tensor (any shape) or int of offsets ``j - i``.
        bidirectional: ``True`` for an encoder, ``False`` for a causal decoder.
        num_buckets: total number of buckets (>= 2, and >= 4 when bidirectional, so that
            each half keeps at least one exact bucket).
        max_distance: distance from which all offsets share the last bucket; must exceed
            the number of exact buckets.

    Returns:
        ``torch.long`` tensor of the same shape, values in ``[0, num_buckets)``.

    Example:
        >>> t5_relative_bucket(torch.tensor([-200, -9, -1, 0, 1, 9, 200]))
        tensor([15,  8,  1,  0, 17, 24, 31])
    """
    rel = _check_integer_tensor("relative_position", relative_position)
    lowest = torch.iinfo(torch.int64).min
    if rel.numel() and should_check_values(None, rel) and bool((rel == lowest).any()):
        raise ValueError(
            f"relative_position must be > {lowest} (the int64 minimum, whose distance -x overflows int64)"
        )
    rel = rel.clamp(min=lowest + 1)  # where the values were not looked at: the same (last) bucket, no overflow
    bidirectional = check_bool("bidirectional", bidirectional)
    num_buckets = check_int("num_buckets", num_buckets, minimum=4 if bidirectional else 2)
    max_distance = check_int("max_distance", max_distance)
    check_size("the buckets of num_buckets", num_buckets, limit=MAX_PARAMETER_ELEMENTS)
    n = num_buckets // 2 if bidirectional else num_buckets
    if max_distance <= n // 2:
        raise ValueError(
            f"max_distance must be > {n // 2} (the number of exact buckets), got {max_distance}"
        )
    return _t5_bucket(rel, bidirectional, num_buckets, max_distance)


def _t5_bucket(rel: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> torch.Tensor:
    """:func:`t5_relative_bucket` on checked arguments: tensor operations only (FlexAttention's
    ``score_mod`` calls it on scalar tensors)."""
    n = num_buckets // 2 if bidirectional else num_buckets
    max_exact = n // 2
    buckets = torch.zeros_like(rel)
    if bidirectional:
        buckets = buckets + (rel > 0).long() * n
        distance = rel.abs()
    else:
        distance = (-rel).clamp(min=0)
    is_small = distance < max_exact
    # float32 like T5; the clamp avoids log(0) for the entries that is_small discards anyway
    ratio = distance.clamp(min=1).float() / max_exact
    large = max_exact + (torch.log(ratio) / math.log(max_distance / max_exact) * (n - max_exact)).long()
    large = large.clamp(max=n - 1)
    return buckets + torch.where(is_small, distance, large)


class T5RelativeBias(AttentionBias):
    """T5's learned relative position bias: one scalar per head and per bucket of offsets.

    T5 computes this bias once, in the first layer, and shares it across all layers
    (Raffel et al., 2020, section 2.1); a model using this module should do the same to
    match. It has ``num_buckets * n_heads`` parameters.

    Args:
        n_heads: number of heads (>= 1).
        bidirectional: ``True`` for an encoder, ``False`` for a causal decoder.
        num_buckets: number of buckets (32 in T5).
        max_distance: offsets at or beyond this distance share one bucket (128 in T5).

    Shapes:
        ``weight``: ``(num_buckets, n_heads)``.
        ``forward(q_len, k_len=None)``: returns ``(n_heads, q_len, k_len)``, the bias to add
        to the attention scores (queries aligned to the end of the keys).
        ``forward(*, q_positions=..., k_positions=...)``: the bias of the offsets between
        integer positions ``(q_len,)`` or ``(batch, q_len)`` and ``(k_len,)`` or
        ``(batch, k_len)`` (one alone serves for both), for packing, left padding or a cache: ``(n_heads, q_len, k_len)``, or ``(batch, n_heads, q_len, k_len)`` with a
        batch.

    Example:
        >>> bias = T5RelativeBias(4, bidirectional=False)
        >>> bias(3, 5).shape
        torch.Size([4, 3, 5])
        >>> bias(q_positions=torch.tensor([[0, 1, 2], [0, 0, 1]])).shape  # the second left-padded
        torch.Size([2, 4, 3, 3])
    """

    def __init__(
        self,
        n_heads: int,
        *,
        bidirectional: bool = True,
        num_buckets: int = 32,
        max_distance: int = 128,
    ) -> None:
        super().__init__()
        self.n_heads = check_int("n_heads", n_heads)
        t5_relative_bucket(0, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
        self.bidirectional = bidirectional
        self.num_buckets = int(num_buckets)
        self.max_distance = int(max_distance)
        check_size("the weight (num_buckets, n_heads)", self.num_buckets, self.n_heads, limit=MAX_PARAMETER_ELEMENTS)
        self.weight = nn.Parameter(torch.zeros(self.num_buckets, self.n_heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight again from ``N(0, 0.02**2)``."""
        nn.init.normal_(self.weight, std=0.02)

    def buckets(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        """The bucket index of every (query, key) pair, shape ``(q_len, k_len)``, on the weight's device.

        Built on the device with tensor operations only (no host-device copy or sync).
        """
        return t5_relative_bucket(
            relative_positions(q_len, k_len, device=self.weight.device),
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )

    def forward(
        self,
        q_len: int | None = None,
        k_len: int | None = None,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if q_positions is not None or k_positions is not None:
            rel = _position_offsets(q_positions, k_positions, q_len, k_len, self.n_heads,
                                    dtype=self.weight.dtype, device=self.weight.device)
            buckets = t5_relative_bucket(rel, bidirectional=self.bidirectional, num_buckets=self.num_buckets,
                                         max_distance=self.max_distance)
            return self.weight[buckets].movedim(-1, -3)
        _check_lengths(q_len, k_len, self.n_heads, dtype=self.weight.dtype, device=self.weight.device)
        return self.weight[self.buckets(q_len, k_len)].permute(2, 0, 1)

    def score_bias(self, q: torch.Tensor, k_len: int | None = None) -> torch.Tensor:
        """The bias for queries ``(..., n_heads, q_len, head_dim)``, in ``q``'s dtype."""
        q = _check_queries(q, n_heads=self.n_heads, device=self.weight.device)
        return self(q.shape[-2], k_len).to(q.dtype)

    def score_mod(self, *, query_offset: int | torch.Tensor = 0) -> ScoreMod:
        """This bias as a FlexAttention ``score_mod`` (the weight captured, gradients flow to it).

        ``flex_attention(q, k, v, score_mod=bias.score_mod())`` equals
        ``scaled_dot_product_attention`` with ``bias(q_len, k_len)`` as its float mask.
        ``query_offset``: the position of query 0 among the keys (``k_len - q_len`` when
        decoding with a cache).

        Example:
            >>> bias = T5RelativeBias(2)
            >>> s = bias.score_mod()(torch.tensor(0.0), torch.tensor(0), torch.tensor(1), torch.tensor(3), torch.tensor(5))
            >>> bool(s == bias(6)[1, 3, 5])
            True
        """
        offset = _check_query_offset(query_offset)
        weight, bidirectional, num_buckets, max_distance = self.weight, self.bidirectional, self.num_buckets, self.max_distance

        def score_mod(score, batch, head, q_idx, kv_idx):  # noqa: ARG001 (FlexAttention's signature)
            bucket = _t5_bucket(kv_idx - (q_idx + offset), bidirectional, num_buckets, max_distance)
            return score + weight[bucket, head]

        return score_mod

    def extra_repr(self) -> str:
        return (
            f"n_heads={self.n_heads}, bidirectional={self.bidirectional}, "
            f"num_buckets={self.num_buckets}, max_distance={self.max_distance}"
        )


class ShawRelativePosition(AttentionBias):
    """Relative position representations of Shaw et al. (2018), key term.

    A learned vector ``a_r`` of width ``head_dim`` for every clipped offset
    ``r = clip(j - i, -max_distance, max_distance)``; the score of query ``i`` and key
    ``j`` gains ``q_i . a_r / sqrt(head_dim)``, i.e. the key ``k_j`` is replaced by
    ``k_j + a_r`` in the dot product (Shaw et al., section 3, the term ``a^K``). The
    vectors are shared across heads, as in the paper. ``2 * max_distance + 1`` vectors,
    ``(2 * max_distance + 1) * head_dim`` parameters.

    Args:
        head_dim: width of queries and keys in one head.
        max_distance: largest offset with its own vector (``k`` in the paper; longer
            offsets are clipped to it).

    Shapes:
        ``weight``: ``(2 * max_distance + 1, head_dim)``.
        ``forward(q)``: ``q`` is ``(..., q_len, head_dim)``; ``k_len`` keys (default
        ``q_len``, queries aligned to their end); returns the score term
        ``(..., q_len, k_len)``.

    Example:
        >>> shaw = ShawRelativePosition(8, max_distance=4)
        >>> shaw(torch.randn(2, 3, 5, 8)).shape
        torch.Size([2, 3, 5, 5])
    """

    def __init__(self, head_dim: int, max_distance: int = 16) -> None:
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim)
        self.max_distance = check_int("max_distance", max_distance)
        check_size(
            "the weight (2 * max_distance + 1, head_dim)",
            2 * self.max_distance + 1,
            self.head_dim,
            limit=MAX_PARAMETER_ELEMENTS,
        )
        self.weight = nn.Parameter(torch.empty(2 * self.max_distance + 1, self.head_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight again from ``N(0, 0.02**2)``."""
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, q: torch.Tensor, k_len: int | None = None) -> torch.Tensor:
        q = _check_queries(q, self.head_dim, device=self.weight.device)
        _check_lengths(q.shape[-2], k_len, self.head_dim, dtype=q.dtype, device=q.device)  # the vectors a (q_len, k_len, head_dim)
        rel = relative_positions(q.shape[-2], k_len, device=q.device).clamp(-self.max_distance, self.max_distance)
        a = self.weight[rel + self.max_distance].to(q.dtype)  # (q_len, k_len, head_dim)
        return torch.einsum("...id,ijd->...ij", q, a) / math.sqrt(self.head_dim)

    def score_bias(self, q: torch.Tensor, k_len: int | None = None) -> torch.Tensor:
        """The same as ``forward``: Shaw's term depends on the queries' values."""
        return self(q, k_len)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_distance={self.max_distance}"
