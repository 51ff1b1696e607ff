"""The sinusoidal tables of tensor2tensor and fairseq, restated from their published formulas.

The paper (Vaswani et al., 2017, section 3.5) interleaves sines and cosines and spaces the
frequencies as ``omega_i = 10000**(-2i/d)``. Two widely used code bases do neither:

* tensor2tensor's ``get_timing_signal_1d`` concatenates ``[sin | cos]`` and spaces the
  ``n = channels // 2`` inverse timescales geometrically,
  ``inv[i] = min_timescale * exp(-i * log(max_timescale / min_timescale) / max(n - 1, 1))``,
  so with the default ``min_timescale = 1`` they fall from 1 to ``1/max_timescale``
  (exactly, up to float rounding). (For ``min_timescale != 1`` the formula starts at
  ``min_timescale``, not at ``1/min_timescale``; it is reproduced as written.) An odd
  channel count gets a zero column at the end.
* fairseq's ``SinusoidalPositionalEmbedding`` uses the same numbers with ``n - 1``
  (``half_dim - 1``) in the denominator, a zero column for odd widths, zeroes the row of
  the padding index, and numbers real tokens from ``padding_idx + 1`` on, so with
  fairseq's usual ``padding_idx = 1`` the first token sits at position 2.

Both compute in float32; the functions here compute the same formulas in float64, each
frequency with the C library's ``exp`` (``math.exp``), so the result is the published
formula evaluated bit for bit in double precision.

Because the lowest frequency is ``1 / 10000``, these tables differ from the paper's (whose
lowest frequency is ``10000**(-(d-2)/d)``); with the same spacing, the two layouts are the
same matrix up to the column permutation :func:`posenc.layout_permutation`.

Tables of more than ``2**28`` entries are refused with a ``ValueError`` before anything
is allocated.
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import as_positions, check_choice, check_int, check_positive_float, check_size

__all__ = [
    "fairseq_positions",
    "fairseq_sinusoidal_table",
    "tensor2tensor_frequencies",
    "tensor2tensor_timing_signal",
    "timing_signal",
]


def tensor2tensor_frequencies(
    n_timescales: int, *, min_timescale: float = 1.0, max_timescale: float = 1.0e4
) -> np.ndarray:
    """Inverse timescales of tensor2tensor (and fairseq), in float64.

    ``inv[i] = min_timescale * exp(-i * log(max_timescale / min_timescale) / max(n - 1, 1))``
    for ``i = 0..n-1``, exactly the expression of tensor2tensor's ``get_timing_signal_1d``
    (fairseq's ``get_embedding`` is the case ``min_timescale = 1``,
    ``max_timescale = 10000``, ``n = d // 2``). With the defaults the frequencies fall
    from 1 to ``1/10000`` (up to rounding); the paper's fall from 1 to ``10000**(-(d-2)/d)``.

    Args:
        n_timescales: number of frequencies (``channels // 2``), >= 1.
        min_timescale: smallest timescale (wavelength divided by ``2 pi``).
        max_timescale: largest timescale.

    Returns:
        Array of shape ``(n_timescales,)``.

    Example:
        >>> tensor2tensor_frequencies(3).round(12).tolist()
        [1.0, 0.01, 0.0001]
    """
    n = check_int("n_timescales", n_timescales)
    check_size("the frequencies of n_timescales", n)
    lo = check_positive_float("min_timescale", min_timescale)
    hi = check_positive_float("max_timescale", max_timescale)
    increment = math.log(hi / lo) / max(n - 1, 1)
    # math.exp element by element: numpy's vectorised exp may differ in the last bit.
    return np.array([lo * math.exp(float(i) * -increment) for i in range(n)], dtype=np.float64)


def timing_signal(
    positions: int | np.ndarray,
    channels: int,
    *,
    min_timescale: float = 1.0,
    max_timescale: float = 1.0e4,
    layout: str = "concatenated",
) -> np.ndarray:
    """Sinusoids with tensor2tensor's frequency spacing at arbitrary positions, float64.

    Column ``j < n`` holds ``sin(pos * inv[j])`` and column ``n + j`` holds
    ``cos(pos * inv[j])``, with ``n = channels // 2`` and ``inv`` from
    :func:`tensor2tensor_frequencies`; odd ``channels`` add a final zero column.
    ``layout="interleaved"`` puts the same numbers in the paper's order (sine at even,
    cosine at odd columns, the zero column still last), which isolates the frequency
    spacing from the layout.

    Args:
        positions: an int ``n`` (positions ``0..n-1``) or a 1-D array of positions.
        channels: width of the signal (>= 2).
        min_timescale: smallest timescale, 1 in tensor2tensor and fairseq.
        max_timescale: largest timescale, 10000 in tensor2tensor and fairseq.
        layout: ``"concatenated"`` (the libraries') or ``"interleaved"`` (the paper's).

    Returns:
        Array of shape ``(len(positions), channels)``.

    Example:
        >>> timing_signal(2, 4).round(4).tolist()
        [[0.0, 0.0, 1.0, 1.0], [0.8415, 0.0001, 0.5403, 1.0]]
    """
    channels = check_int("channels", channels, minimum=2)
    check_size("the signal of channels", channels)
    pos = as_positions("positions", positions, width=channels)
    layout = check_choice("layout", layout, ("concatenated", "interleaved"))
    inv = tensor2tensor_frequencies(channels // 2, min_timescale=min_timescale, max_timescale=max_timescale)
    scaled = pos[:, None] * inv[None, :]
    sin, cos = np.sin(scaled), np.cos(scaled)
    out = np.zeros((pos.shape[0], channels), dtype=np.float64)
    n = inv.shape[0]
    if layout == "concatenated":
        out[:, :n], out[:, n : 2 * n] = sin, cos
    else:
        out[:, 0 : 2 * n : 2], out[:, 1 : 2 * n : 2] = sin, cos
    return out


def tensor2tensor_timing_signal(
    length: int,
    channels: int,
    *,
    min_timescale: float = 1.0,
    max_timescale: float = 1.0e4,
    start_index: int = 0,
) -> np.ndarray:
    """tensor2tensor's ``get_timing_signal_1d`` table, in float64 and without the batch axis.

    Rows are positions ``start_index .. start_index + length - 1``; columns are
    ``[sin | cos]`` of :func:`tensor2tensor_frequencies` (plus a zero column for odd
    ``channels``).

    Args:
        length: number of positions (>= 0).
        channels: width (>= 2).
        min_timescale: smallest timescale.
        max_timescale: largest timescale.
        start_index: position of the first row.

    Returns:
        Array of shape ``(length, channels)``.

    Example:
        >>> tensor2tensor_timing_signal(3, 6, start_index=1).shape
        (3, 6)
    """
    length = check_int("length", length, minimum=0)
    channels = check_int("channels", channels, minimum=2)
    check_size("the signal (length, channels)", length, channels)
    start_index = check_int("start_index", start_index, minimum=None)
    positions = np.arange(length, dtype=np.float64) + start_index
    return timing_signal(positions, channels, min_timescale=min_timescale, max_timescale=max_timescale)


def fairseq_sinusoidal_table(
    num_embeddings: int, embedding_dim: int, *, padding_idx: int | None = None
) -> np.ndarray:
    """fairseq's ``SinusoidalPositionalEmbedding.get_embedding`` table, in float64.

    Row ``r`` is the encoding of position number ``r`` with ``half = embedding_dim // 2``
    frequencies ``exp(-j * log(10000) / (half - 1))``, laid out ``[sin | cos]``, a zero
    column for odd widths, and row ``padding_idx`` set to zero. fairseq looks rows up by
    the position numbers of :func:`fairseq_positions`, which start at ``padding_idx + 1``.

    Args:
        num_embeddings: number of rows (>= 1).
        embedding_dim: width; at least 4, because fairseq divides by ``half - 1`` (its own
            code fails with a division by zero for widths 2 and 3).
        padding_idx: row to zero, or ``None``.

    Returns:
        Array of shape ``(num_embeddings, embedding_dim)``.

    Example:
        >>> fairseq_sinusoidal_table(4, 4, padding_idx=1)[1]
        array([0., 0., 0., 0.])
    """
    num_embeddings = check_int("num_embeddings", num_embeddings)
    embedding_dim = check_int("embedding_dim", embedding_dim)
    if embedding_dim < 4:
        raise ValueError(
            f"embedding_dim must be >= 4 (fairseq divides by embedding_dim // 2 - 1), got {embedding_dim}"
        )
    check_size("the table (num_embeddings, embedding_dim)", num_embeddings, embedding_dim)
    table = timing_signal(num_embeddings, embedding_dim)
    if padding_idx is not None:
        padding_idx = check_int("padding_idx", padding_idx, minimum=0)
        if padding_idx >= num_embeddings:
            raise ValueError(f"padding_idx must be < num_embeddings={num_embeddings}, got {padding_idx}")
        table[padding_idx] = 0.0
    return table


def fairseq_positions(tokens: np.ndarray, padding_idx: int) -> np.ndarray:
    """Position numbers as fairseq assigns them (its ``utils.make_positions``).

    Non-padding tokens are numbered ``padding_idx + 1, padding_idx + 2, ...`` along each
    row (padding tokens are skipped in the count); padding tokens get ``padding_idx``,
    whose table row is zero.

    Args:
        tokens: integer array of shape ``(batch, seq)`` (or ``(seq,)``).
        padding_idx: the padding token id (1 in fairseq's dictionaries).

    Returns:
        Integer array of the same shape.

    Example:
        >>> fairseq_positions(np.array([[5, 6, 7, 1, 1]]), padding_idx=1)
        array([[2, 3, 4, 1, 1]])
    """
    padding_idx = check_int("padding_idx", padding_idx, minimum=0)
    if hasattr(tokens, "detach"):
        tokens = tokens.detach().cpu().numpy()
    try:
        arr = np.asarray(tokens)
    except (TypeError, ValueError) as err:  # ragged nested lists
        raise ValueError(f"tokens must be an integer array of shape (seq,) or (batch, seq): {err}") from err
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"tokens must be an integer array, got dtype {arr.dtype}")
    if arr.ndim not in (1, 2):
        raise ValueError(f"tokens must have shape (seq,) or (batch, seq), got {arr.shape}")
    mask = (arr != padding_idx).astype(np.int64)
    return np.cumsum(mask, axis=-1) * mask + padding_idx
