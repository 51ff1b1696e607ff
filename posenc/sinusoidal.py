"""The sinusoidal positional encoding of Vaswani et al. (2017, section 3.5).

Numpy functions compute in float64. Two column layouts are supported:

* ``"interleaved"`` (the paper): column ``2i`` holds ``sin(pos / base**(2i/d))`` and
  column ``2i + 1`` holds ``cos`` of the same angle;
* ``"concatenated"``: the same numbers arranged ``[sin ... | cos ...]``, i.e. the
  interleaved matrix with its columns permuted by :func:`layout_permutation`.

Odd ``d_model``: the formula is applied column by column, so there are ``ceil(d/2)``
frequencies and the last column is a sine whose cosine partner would be column ``d``
(which does not exist). Nothing crashes, nothing is padded with zeros, and the first
``d - 1`` columns keep the paper's formula with the true ``d`` in the exponent ``2i/d``.
:func:`relative_rotation` needs complete sin/cos pairs and therefore rejects odd
``d_model``.

Sizes: a table of more than ``MAX_TABLE_ELEMENTS`` (``2**28``) entries is refused with a
``ValueError`` before anything is allocated.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ._checks import (
    MAX_TABLE_ELEMENTS,
    as_positions,
    check_choice,
    check_int,
    check_optional_bool,
    check_positive_float,
    check_probability,
    check_sequence_input,
    check_size,
    position_rows,
)

LAYOUTS = ("interleaved", "concatenated")


def sinusoidal_frequencies(d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """Angular frequencies ``omega_i = 1 / base**(2i / d_model)``, float64.

    Args:
        d_model: encoding width (>= 1).
        base: the constant 10000 of the paper.

    Returns:
        Array of shape ``(ceil(d_model / 2),)``, decreasing from 1.

    Example:
        >>> sinusoidal_frequencies(4)
        array([1.  , 0.01])
    """
    d_model = check_int("d_model", d_model)
    check_size("the frequencies of d_model", d_model)
    base = check_positive_float("base", base)
    return 1.0 / _denominators(d_model, base)


def _denominators(d_model: int, base: float) -> np.ndarray:
    """``base**(2i/d_model)`` for ``i = 0..ceil(d/2)-1``, each computed by the C library's
    ``pow`` (numpy's vectorised power can differ from it in the last bit, and the book
    promises the paper's formula bit for bit)."""
    return np.array([base ** (2 * i / d_model) for i in range((d_model + 1) // 2)], dtype=np.float64)


def layout_permutation(d_model: int) -> np.ndarray:
    """Column permutation from the interleaved to the concatenated layout.

    ``sinusoidal_encoding(p, d, layout="concatenated") ==
    sinusoidal_encoding(p, d)[:, layout_permutation(d)]`` exactly, for every ``d``
    (odd included). The inverse permutation is ``np.argsort(layout_permutation(d))``.

    Returns:
        Integer array of shape ``(d_model,)``: the even columns, then the odd ones.

    Example:
        >>> layout_permutation(6)
        array([0, 2, 4, 1, 3, 5])
    """
    d_model = check_int("d_model", d_model)
    check_size("the permutation of d_model", d_model)
    return np.concatenate([np.arange(0, d_model, 2), np.arange(1, d_model, 2)])


def sinusoidal_encoding(
    positions: int | np.ndarray,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> np.ndarray:
    """The sinusoidal encoding table, in float64.

    ``PE[pos, 2i] = sin(pos / base**(2i/d_model))`` and
    ``PE[pos, 2i+1] = cos(pos / base**(2i/d_model))`` (0-based ``i``), computed exactly
    as written: the angle is ``pos`` divided by ``base**(2i/d_model)``.

    Args:
        positions: an int ``n`` (positions ``0..n-1``) or a 1-D array of positions, which
            may be negative or fractional.
        d_model: encoding width (>= 1; odd widths end with an unpaired sine column).
        base: the constant 10000 of the paper.
        layout: ``"interleaved"`` (the paper's sin/cos alternation) or
            ``"concatenated"`` (``[sin | cos]``, same frequencies).

    Returns:
        Array of shape ``(len(positions), d_model)``.

    Example:
        >>> sinusoidal_encoding(2, 4).round(4)
        array([[0.    , 1.    , 0.    , 1.    ],
               [0.8415, 0.5403, 0.01  , 1.    ]])
    """
    d_model = check_int("d_model", d_model)
    check_size("the table of d_model", d_model)
    pos = as_positions("positions", positions, width=d_model)
    base = check_positive_float("base", base)
    layout = check_choice("layout", layout, LAYOUTS)
    angles = pos[:, None] / _denominators(d_model, base)
    sin, cos = np.sin(angles), np.cos(angles[:, : d_model // 2])
    if layout == "concatenated":
        return np.concatenate([sin, cos], axis=1)
    out = np.empty((pos.shape[0], d_model), dtype=np.float64)
    out[:, 0::2] = sin
    out[:, 1::2] = cos
    return out


def relative_rotation(offset: float, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """The matrix ``M_k`` that shifts the (interleaved) encoding by ``offset = k``.

    ``sinusoidal_encoding([p + k], d) == sinusoidal_encoding([p], d) @ M.T`` for every
    ``p`` (up to float64 rounding). ``M`` is block-diagonal with one 2x2 block per
    frequency ``w``, ``[[cos(k w), sin(k w)], [-sin(k w), cos(k w)]]``, acting on the
    pair ``(sin(p w), cos(p w))``; it does not depend on ``p``.

    Args:
        offset: the shift ``k`` (any real number, negative and fractional included).
        d_model: encoding width; must be even, since every sine needs its cosine.
        base: the constant 10000 of the paper.

    Returns:
        Orthogonal array of shape ``(d_model, d_model)``.

    Example:
        >>> M = relative_rotation(3, 8)
        >>> bool(np.allclose(sinusoidal_encoding([5], 8) @ M.T, sinusoidal_encoding([8], 8)))
        True
    """
    if isinstance(offset, bool) or not np.isscalar(offset) or not np.isreal(offset):
        raise TypeError(f"offset must be a real number, got {offset!r}")
    offset = float(offset)
    if not np.isfinite(offset):
        raise ValueError(f"offset must be finite, got {offset}")
    d_model = check_int("d_model", d_model)
    check_size("the matrix (d_model, d_model)", d_model, d_model)
    if d_model % 2:
        raise ValueError(
            f"d_model must be even for relative_rotation (each sine needs its cosine), got {d_model}"
        )
    angles = offset * sinusoidal_frequencies(d_model, base=base)
    c, s = np.cos(angles), np.sin(angles)
    m = np.zeros((d_model, d_model), dtype=np.float64)
    idx = np.arange(0, d_model, 2)
    m[idx, idx] = c
    m[idx, idx + 1] = s
    m[idx + 1, idx] = -s
    m[idx + 1, idx + 1] = c
    return m


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to a batch of embeddings.

    The table (``max_len`` rows) is computed once in float64, stored as a float32
    non-persistent buffer (so it is not saved in ``state_dict``) and cast to the input's
    dtype in ``forward``. :meth:`reset_parameters` recomputes it in place, which is what
    a model initialised on the ``meta`` device needs after ``to_empty``. This module
    does not scale the token embeddings: the paper multiplies them by ``sqrt(d_model)``
    before the addition (section 3.4), which is the embedding layer's job.

    Args:
        d_model: width of the embeddings.
        max_len: number of positions in the table (``max_len * d_model`` at most
            ``2**28``).
        base: the constant 10000 of the paper.
        dropout: dropout probability applied to the sum (0.1 in the paper).
        layout: ``"interleaved"`` or ``"concatenated"``, see :func:`sinusoidal_encoding`.
        check_values: whether ``forward`` checks that tensor positions lie in
            ``[0, max_len)``: ``None`` (default) on the CPU outside ``torch.compile``,
            ``True`` always (a host-device sync on an accelerator), ``False`` never (an
            out-of-range position is then an indexing error of the device).

    Shapes:
        ``forward(x, *, offset=0, positions=None)``: ``x`` is ``(batch, seq, d_model)`` (or
        ``(seq, d_model)``, or any ``(..., seq, d_model)``), floating point. Returns the
        same shape: ``x + PE[offset : offset + seq]`` for an int ``offset``, or
        ``x + PE[positions]`` for integer ``positions`` of shape ``(seq,)`` or
        ``x.shape[:-1]`` (one row of positions per example: left-padded or packed
        batches). A tensor ``offset`` (0-d, or ``(batch,)``) means the positions
        ``offset + arange(seq)``, without a host-device sync.

    Example:
        >>> pe = SinusoidalPositionalEncoding(16, max_len=32)
        >>> pe(torch.zeros(2, 5, 16)).shape
        torch.Size([2, 5, 16])
        >>> left_padded = torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]])
        >>> out = pe(torch.zeros(2, 5, 16), positions=left_padded)
        >>> bool((out[0, 3] == pe.pe[1]).all())
        True
    """

    pe: torch.Tensor

    def __init__(
        self,
        d_model: int,
        max_len: int = 5000,
        *,
        base: float = 10000.0,
        dropout: float = 0.0,
        layout: str = "interleaved",
        check_values: bool | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.max_len = check_int("max_len", max_len)
        check_size("the table (max_len, d_model)", self.max_len, self.d_model, limit=MAX_TABLE_ELEMENTS)
        self.base = check_positive_float("base", base)
        self.layout = check_choice("layout", layout, LAYOUTS)
        self.check_values = check_optional_bool("check_values", check_values)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.register_buffer("pe", torch.empty(self.max_len, self.d_model, dtype=torch.float32), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Recompute the table in place (on its device, in its dtype); a no-op on ``meta``."""
        if self.pe.device.type == "meta":
            return
        table = sinusoidal_encoding(self.max_len, self.d_model, base=self.base, layout=self.layout)
        with torch.no_grad():
            self.pe.copy_(torch.from_numpy(table.astype(np.float32)))  # float64 on the host only

    def forward(
        self, x: torch.Tensor, *, offset: int | torch.Tensor = 0, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = check_sequence_input("x", x, self.d_model)
        table = position_rows(self.pe, x, offset, positions, check_values=self.check_values, overflow=self._overflow)
        return self.dropout(x + table.to(x.dtype))

    def _overflow(self, offset: int, seq: int) -> str:
        return (
            f"positions {offset}..{offset + seq - 1} reach past max_len={self.max_len}; "
            "build the module with a larger max_len"
        )

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"
