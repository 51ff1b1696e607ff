"""Positions beyond one dimension: images, video and multimodal sequences (chapter 8).

Four schemes, each equal to the code of the models that use it:

* :func:`sinusoidal_encoding_2d`: the fixed 2-D sin-cos table of MoCo v3 and MAE, added
  to the patch embeddings of a ViT (a quarter of the channels for each of sin/cos of the
  column and of the row);
* :class:`AxialRotaryEmbedding`: 2-D RoPE as two 1-D rotations, half of the pairs turning
  with the row and half with the column (RoPE-Axial of Heo et al. 2024, the vision tower
  of Qwen2-VL);
* :class:`MixedRotaryEmbedding`: RoPE-Mixed (Heo et al. 2024), every pair turning with a
  learned combination ``f_row * row + f_col * col`` of both coordinates;
* :func:`mrope_position_ids` and :class:`MultimodalRotaryEmbedding`: the three-axis
  (time, height, width) rotary embedding of Qwen2-VL (M-RoPE), with the contiguous
  frequency blocks of Qwen2-VL / Qwen2.5-VL or the interleaved assignment of Qwen3-VL.

The rotations compute their angles in float32 for float32, float16 and bfloat16 input
(float64 for float64 input), never keep state between calls, and trace with
``torch.compile(fullgraph=True)`` and ``torch.export``. Pairs are rotated in the "half"
layout (pair ``j`` is coordinates ``(j, j + head_dim/2)``, as in Hugging Face
``transformers``) unless a module takes ``layout="interleaved"`` (pair ``j`` is
``(2j, 2j + 1)``, as in the complex-number code of Heo et al.).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from ._checks import (
    MAX_PARAMETER_ELEMENTS,
    check_choice,
    check_int,
    check_positive_float,
    check_size,
    should_check_values,
)

__all__ = [
    "sinusoidal_encoding_2d",
    "AxialRotaryEmbedding",
    "MixedRotaryEmbedding",
    "mrope_position_ids",
    "MultimodalRotaryEmbedding",
]

_LAYOUTS = ("half", "interleaved")


# ----------------------------------------------------------------------------- checks


def _grid(grid_size: object) -> tuple[int, int]:
    if isinstance(grid_size, (tuple, list)):
        if len(grid_size) != 2:
            raise ValueError(f"grid_size must be an int or a pair (height, width), got {grid_size!r}")
        return check_int("grid_size[0] (height)", grid_size[0]), check_int("grid_size[1] (width)", grid_size[1])
    if isinstance(grid_size, bool) or not isinstance(grid_size, numbers.Integral):
        raise TypeError(f"grid_size must be an int or a pair (height, width) of ints, got {grid_size!r}")
    n = check_int("grid_size", grid_size)
    return n, n


def _head_dim(head_dim: object, multiple: int) -> int:
    head_dim = check_int("head_dim", head_dim)
    if head_dim % multiple:
        raise ValueError(f"head_dim must be divisible by {multiple}, got {head_dim}")
    return head_dim


def _check_x(x: object, head_dim: int, min_ndim: int = 2) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of shape (..., seq, {head_dim}), got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor (queries or keys), got dtype {x.dtype}")
    if x.ndim < min_ndim or x.shape[-1] != head_dim:
        raise ValueError(f"x must have shape (..., seq, {head_dim}) (head_dim={head_dim}), got {tuple(x.shape)}")
    return x


def _check_positions_tensor(positions: object, x: torch.Tensor) -> torch.Tensor:
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be a torch.Tensor, got {type(positions).__name__}")
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"positions must hold integers or real numbers, got dtype {positions.dtype}")
    if positions.device != x.device:
        raise ValueError(f"positions must be on the device of x ({x.device}), got {positions.device}")
    if positions.is_floating_point() and should_check_values(None, positions):
        if not bool(torch.isfinite(positions).all()):
            raise ValueError("positions must hold finite values")
    return positions


def _work_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _rotate(x: torch.Tensor, angles: torch.Tensor, layout: str) -> torch.Tensor:
    """Rotate pair ``j`` of ``x`` (..., seq, head_dim) by ``angles[..., j]`` (..., seq, head_dim/2)."""
    work = _work_dtype(x)
    xw = x.to(work)
    cos, sin = angles.cos(), angles.sin()
    if layout == "half":
        h = x.shape[-1] // 2
        x1, x2 = xw[..., :h], xw[..., h:]
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:
        x1, x2 = xw[..., 0::2], xw[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    return out.to(x.dtype)


def _ladder(n: int, exponent_scale: float, base: float, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``1 / base ** (k * exponent_scale)`` for ``k < n``, computed like ``transformers`` (in ``dtype``)."""
    k = torch.arange(n, dtype=dtype, device=device)
    return 1.0 / (base ** (k * exponent_scale))


def _spatial_positions(positions: object, x: torch.Tensor) -> torch.Tensor:
    """Check ``positions`` (seq, 2) or (batch, seq, 2) and return them in the work dtype, shaped to broadcast."""
    p = _check_positions_tensor(positions, x)
    if p.ndim not in (2, 3) or p.shape[-1] != 2:
        raise ValueError(f"positions must have shape (seq, 2) or (batch, seq, 2) holding (row, column), got {tuple(p.shape)}")
    if p.shape[-2] != x.shape[-2]:
        raise ValueError(f"positions must hold one (row, column) per token: {p.shape[-2]} positions for seq={x.shape[-2]}")
    if p.ndim == 3:
        if x.ndim < 3 or x.shape[0] != p.shape[0]:
            raise ValueError(
                f"batched positions {tuple(p.shape)} need x of shape (batch, seq, head_dim) or "
                f"(batch, heads, seq, head_dim) with the same batch, got {tuple(x.shape)}"
            )
        p = p.reshape(p.shape[0], *([1] * (x.ndim - 3)), p.shape[1], 2)
    return p.to(_work_dtype(x))


# ----------------------------------------------------------------------------- 2-D sin-cos


def sinusoidal_encoding_2d(grid_size: object, d_model: int, *, base: float = 10000.0) -> np.ndarray:
    """The 2-D sin-cos table of MAE (He et al. 2022), one row per patch of a ``height x width`` grid.

    The patch at row ``r`` and column ``c`` gets
    ``[sin(c w) | cos(c w) | sin(r w) | cos(r w)]`` with ``w_k = base ** (-4 k / d_model)``,
    ``k < d_model / 4``: the first half of the channels is a 1-D sinusoidal code of the
    column, the second half one of the row, each in the "sin block, cos block" layout. Each
    half therefore has the rotation property of chapter 4 along its own axis: moving ``dr``
    rows rotates every (sin, cos) pair of the row half by ``dr w_k`` and leaves the column
    half unchanged. For square grids this is exactly the table ``transformers`` writes into
    ``ViTMAEEmbeddings.position_embeddings`` (without its zero row for the CLS token).
    MoCo v3 (Chen, Xie and He 2021, section 4, "position embedding") builds the same
    quarters with the row half first, ``[sin(r w) | cos(r w) | sin(c w) | cos(c w)]``.

    Args:
        grid_size: ``n`` for an ``n x n`` grid, or ``(height, width)``.
        d_model: width of the table; divisible by 4.
        base: the frequency base (10000 in MAE and MoCo v3).

    Returns:
        A float64 array of shape ``(height * width, d_model)``, rows in row-major order
        (patch ``r * width + c``).

    Example:
        >>> t = sinusoidal_encoding_2d((2, 3), 8)
        >>> t.shape
        (6, 8)
        >>> bool(np.allclose(t[4, :4], sinusoidal_encoding_2d(3, 8)[1, :4]))  # column 1 in both
        True
    """
    height, width = _grid(grid_size)
    d_model = check_int("d_model", d_model)
    if d_model % 4:
        raise ValueError(f"d_model must be divisible by 4 (sin and cos of the row and of the column), got {d_model}")
    base = check_positive_float("base", base)
    check_size("the table (height * width, d_model)", height * width, d_model)
    omega = base ** (-4.0 * np.arange(d_model // 4, dtype=np.float64) / d_model)
    rows, cols = np.meshgrid(np.arange(height, dtype=np.float64), np.arange(width, dtype=np.float64), indexing="ij")
    ang_c = np.outer(cols.ravel(), omega)
    ang_r = np.outer(rows.ravel(), omega)
    return np.concatenate([np.sin(ang_c), np.cos(ang_c), np.sin(ang_r), np.cos(ang_r)], axis=1)


# ----------------------------------------------------------------------------- axial RoPE


class AxialRotaryEmbedding(nn.Module):
    """2-D rotary embedding as two 1-D rotations: RoPE-Axial (Heo et al. 2024, section 3.2).

    Pair ``j < head_dim / 4`` turns by ``row * w_j`` and pair ``head_dim / 4 + j`` by
    ``col * w_j``, with ``w_j = base ** (-4 j / head_dim)``. Since each pair turns with
    one coordinate, ``<R(r, c) q, R(r', c') k>`` depends only on the offset
    ``(r' - r, c' - c)``, never on where the two patches sit. With the defaults this is
    the rotary embedding of the vision tower of Qwen2-VL in ``transformers``
    (``Qwen2VLVisionRotaryEmbedding`` with ``apply_rotary_pos_emb_vision``), for
    positions as ``transformers.vision_utils.get_vision_position_ids`` orders them.

    Args:
        head_dim: width of one head; divisible by 4.
        base: the frequency base (10000 in Qwen2-VL; Heo et al. use 100).
        layout: ``"half"`` (pair ``j`` is coordinates ``(j, j + head_dim/2)``, as in
            ``transformers``) or ``"interleaved"`` (pair ``j`` is ``(2j, 2j + 1)``, the
            pairing of Heo et al.'s complex-number code, whose first quarter of pairs
            turns with the x coordinate, the column: pass ``positions.flip(-1)`` to get
            their order).

    Shapes:
        ``forward(x, *, positions)``: ``x`` is ``(..., seq, head_dim)``, typically
        ``(batch, heads, seq, head_dim)``; ``positions`` is ``(seq, 2)`` or
        ``(batch, seq, 2)`` holding (row, column), integers or real numbers, on the device
        of ``x``. Returns a tensor of the shape and dtype of ``x``.

    Example:
        >>> rope = AxialRotaryEmbedding(8)
        >>> pos = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]])
        >>> q, k = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
        >>> rope(q, positions=pos).shape
        torch.Size([1, 2, 4, 8])
        >>> s = rope(q, positions=pos) @ rope(k, positions=pos).mT
        >>> moved = pos + torch.tensor([3, 7])  # the same patches, 3 rows down, 7 columns right
        >>> bool(torch.allclose(s, rope(q, positions=moved) @ rope(k, positions=moved).mT, atol=1e-5))
        True
    """

    def __init__(self, head_dim: int, *, base: float = 10000.0, layout: str = "half") -> None:
        super().__init__()
        self.head_dim = _head_dim(head_dim, 4)
        self.base = check_positive_float("base", base)
        self.layout = check_choice("layout", layout, _LAYOUTS)

    def angles(self, positions: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Angles ``(..., seq, head_dim / 2)`` of every pair for ``positions`` ``(..., seq, 2)`` (row, column)."""
        w = _ladder(self.head_dim // 4, 4.0 / self.head_dim, self.base, positions.device, dtype)
        p = positions.to(dtype)
        return torch.cat((p[..., 0:1] * w, p[..., 1:2] * w), dim=-1)

    def forward(self, x: torch.Tensor, *, positions: torch.Tensor) -> torch.Tensor:
        x = _check_x(x, self.head_dim)
        p = _spatial_positions(positions, x)
        return _rotate(x, self.angles(p, _work_dtype(x)), self.layout)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}, layout={self.layout!r}"


# ----------------------------------------------------------------------------- RoPE-Mixed


class MixedRotaryEmbedding(nn.Module):
    """RoPE-Mixed (Heo et al. 2024, section 3.3): learned 2-D frequencies, per pair and head.

    Pair ``j`` of head ``h`` turns by ``row * freqs[0, h, j] + col * freqs[1, h, j]``: a
    frequency vector pointing in any direction of the image plane, so that a head can
    attend along diagonals, which an axial embedding (every frequency on one axis) cannot
    single out. The score still depends on the 2-D offset only.

    Args:
        head_dim: width of one head; divisible by 4.
        n_heads: number of heads.
        base: the base of the lengths of the frequency vectors (10 in Heo et al.).
        init: ``"random"`` as the paper's code: lengths ``base ** (-4 t / head_dim)`` for
            ``t < head_dim / 4``, a uniformly random direction ``a`` per head, pair ``t``
            pointing at ``a`` and pair ``head_dim / 4 + t`` at ``a + pi / 2`` (column
            component ``cos``, row component ``sin``); draws from torch's global
            generator (seed it with ``torch.manual_seed``). ``"axial"``: the frequencies
            of :class:`AxialRotaryEmbedding` (rows in the first quarter of the pairs,
            columns in the second), so that the module equals that one of the same
            ``base`` and ``layout`` until trained.
        layout: ``"half"`` or ``"interleaved"``, as for :class:`AxialRotaryEmbedding`.

    Attributes:
        freqs: learnable ``(2, n_heads, head_dim // 2)``: ``freqs[0]`` the row frequency,
            ``freqs[1]`` the column frequency of every pair of every head.

    Shapes:
        ``forward(x, *, positions)``: ``x`` is ``(batch, n_heads, seq, head_dim)``;
        ``positions`` ``(seq, 2)`` or ``(batch, seq, 2)`` (row, column). Returns a tensor
        of the shape and dtype of ``x``.

    Example:
        >>> torch.manual_seed(0) and None
        >>> mixed = MixedRotaryEmbedding(8, 2)
        >>> mixed.freqs.shape
        torch.Size([2, 2, 4])
        >>> pos = torch.tensor([[0, 0], [1, 1]])
        >>> mixed(torch.randn(1, 2, 2, 8), positions=pos).shape
        torch.Size([1, 2, 2, 8])
    """

    def __init__(
        self, head_dim: int, n_heads: int, *, base: float = 10.0, init: str = "random", layout: str = "half"
    ) -> None:
        super().__init__()
        self.head_dim = _head_dim(head_dim, 4)
        self.n_heads = check_int("n_heads", n_heads)
        check_size("freqs (2, n_heads, head_dim // 2)", 2, self.n_heads, self.head_dim // 2, limit=MAX_PARAMETER_ELEMENTS)
        self.base = check_positive_float("base", base)
        self.init = check_choice("init", init, ("random", "axial"))
        self.layout = check_choice("layout", layout, _LAYOUTS)
        self.freqs = nn.Parameter(torch.empty(2, self.n_heads, self.head_dim // 2))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """(Re-)initialise ``freqs`` as ``init`` says (also after meta-device construction and ``to_empty``)."""
        q = self.head_dim // 4
        device = self.freqs.device
        mag = torch.from_numpy(self.base ** (-4.0 * np.arange(q, dtype=np.float64) / self.head_dim)).to(torch.float32)
        mag = mag.to(device)
        if self.init == "axial":
            zeros = torch.zeros(self.n_heads, q, device=device)
            rows = torch.cat((mag.expand(self.n_heads, q), zeros), dim=-1)
            cols = torch.cat((zeros, mag.expand(self.n_heads, q)), dim=-1)
        else:
            if device.type == "meta":
                return
            a = torch.rand(self.n_heads, 1) * (2 * torch.pi)
            a = a.to(device)
            cols = torch.cat((mag * torch.cos(a), mag * torch.cos(a + torch.pi / 2)), dim=-1)
            rows = torch.cat((mag * torch.sin(a), mag * torch.sin(a + torch.pi / 2)), dim=-1)
        self.freqs.copy_(torch.stack((rows, cols)).to(self.freqs.dtype))

    def angles(self, positions: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Angles ``(..., n_heads, seq, head_dim / 2)`` for ``positions`` ``(seq, 2)`` or ``(batch, 1, seq, 2)``."""
        f = self.freqs.to(dtype)
        p = positions.to(dtype)
        if p.ndim == 2:  # (seq, 2) -> (1, seq, 1)
            row, col = p[None, :, 0:1], p[None, :, 1:2]
        else:  # (batch, 1, seq, 2) -> (batch, 1, seq, 1)
            row, col = p[..., 0:1], p[..., 1:2]
        return row * f[0][:, None, :] + col * f[1][:, None, :]

    def forward(self, x: torch.Tensor, *, positions: torch.Tensor) -> torch.Tensor:
        x = _check_x(x, self.head_dim, min_ndim=4)
        if x.ndim != 4 or x.shape[1] != self.n_heads:
            raise ValueError(f"x must have shape (batch, {self.n_heads}, seq, {self.head_dim}) (n_heads={self.n_heads}), got {tuple(x.shape)}")
        p = _spatial_positions(positions, x)
        return _rotate(x, self.angles(p, _work_dtype(x)), self.layout)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, n_heads={self.n_heads}, base={self.base}, init={self.init!r}, layout={self.layout!r}"


# ----------------------------------------------------------------------------- M-RoPE ids


def _segment(i: int, seg: object) -> tuple[str, object]:
    if not isinstance(seg, (tuple, list)) or len(seg) != 2 or not isinstance(seg[0], str):
        raise TypeError(f"segments[{i}] must be a pair (kind, size) such as ('text', 5) or ('image', (1, 4, 6)), got {seg!r}")
    kind = check_choice(f"segments[{i}][0]", seg[0], ("text", "image", "video"))
    return kind, seg[1]


def mrope_position_ids(segments: Sequence[tuple[str, object]], *, spatial_merge_size: int = 2) -> torch.Tensor:
    """Temporal, height and width position ids of Qwen2-VL's M-RoPE (Wang et al. 2024, section 2.1).

    A text token gets the same id on all three axes, one more than the token before. The
    tokens of an image or video of ``t x h x w`` patches (``h`` and ``w`` before the
    ``spatial_merge_size x spatial_merge_size`` merge, as in ``image_grid_thw``) are laid
    out frame by frame, row by row; the token of frame ``i``, merged row ``j`` and column
    ``k`` gets ``(s + i, s + j, s + k)``, with ``s`` the id the segment starts at. Text
    after a vision segment starts at the largest id so far plus one, the rule of the
    paper and of Qwen's reference code.

    ``transformers`` 5.x (``Qwen2VLModel.get_rope_index``) instead advances the start by
    ``max(h, w) / spatial_merge_size`` after a vision segment. The two agree for images
    and for videos with at most ``max(h, w) / spatial_merge_size`` temporal patches; after
    a longer video ``transformers`` starts the text below the video's last temporal ids,
    so that text and video frames share ids (chapter 8 and the incidents page show it).

    Args:
        segments: ``[("text", n), ("image", (t, h, w)), ("video", (t, h, w)), ...]``;
            ``n >= 1`` counts every non-vision token (the vision start and end markers
            included); two vision segments must be separated by text.
        spatial_merge_size: side of the block of patches merged into one token (2 in
            Qwen2-VL); ``h`` and ``w`` must be multiples of it.

    Returns:
        A ``torch.long`` tensor of shape ``(3, seq)``: rows time, height, width.

    Example:
        >>> mrope_position_ids([("text", 2), ("image", (1, 4, 6)), ("text", 2)])
        tensor([[0, 1, 2, 2, 2, 2, 2, 2, 5, 6],
                [0, 1, 2, 2, 2, 3, 3, 3, 5, 6],
                [0, 1, 2, 3, 4, 2, 3, 4, 5, 6]])
    """
    m = check_int("spatial_merge_size", spatial_merge_size)
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence):
        raise TypeError(f"segments must be a list of (kind, size) pairs, got {type(segments).__name__}")
    if len(segments) == 0:
        raise ValueError("segments must hold at least one segment")
    parts: list[torch.Tensor] = []
    start, total, previous = 0, 0, None
    for i, seg in enumerate(segments):
        kind, size = _segment(i, seg)
        if kind == "text":
            n = check_int(f"segments[{i}][1] (number of text tokens)", size)
            total += n
            check_size("the position ids (3, seq)", 3, total)
            parts.append(torch.arange(start, start + n).expand(3, n))
            start += n
        else:
            if previous is not None and previous != "text":
                raise ValueError(f"segments[{i}]: vision segments must be separated by text (the vision start/end markers count as text)")
            if not isinstance(size, (tuple, list)) or len(size) != 3:
                raise TypeError(f"segments[{i}][1] must be a grid (t, h, w) of ints, got {size!r}")
            t = check_int(f"segments[{i}][1][0] (t)", size[0])
            h = check_int(f"segments[{i}][1][1] (h)", size[1])
            w = check_int(f"segments[{i}][1][2] (w)", size[2])
            if h % m or w % m:
                raise ValueError(f"segments[{i}]: h={h} and w={w} must be multiples of spatial_merge_size={m}")
            gh, gw = h // m, w // m
            total += t * gh * gw
            check_size("the position ids (3, seq)", 3, total)
            tt, hh, ww = torch.meshgrid(torch.arange(t), torch.arange(gh), torch.arange(gw), indexing="ij")
            parts.append(torch.stack((tt, hh, ww)).reshape(3, -1) + start)
            start += max(t, gh, gw)
        previous = kind
    return torch.cat(parts, dim=1)


# ----------------------------------------------------------------------------- M-RoPE rotation


class MultimodalRotaryEmbedding(nn.Module):
    """M-RoPE: rotary embedding over three position axes (time, height, width).

    The ``head_dim / 2`` rotated pairs (frequency ``base ** (-2 f / head_dim)`` for pair
    ``f``, as in 1-D RoPE) are shared among the axes: pair ``f`` turns by
    ``positions[axis(f)] * w_f``. Qwen2-VL (Wang et al. 2024, section 2.1) and Qwen2.5-VL
    give the axes contiguous blocks of ``sections`` pairs: time the fastest
    ``sections[0]``, then height, then width (the slowest). Qwen3-VL (``interleaved=True``;
    Qwen team 2025, section 2 "Interleaved MRoPE") deals the pairs out in turn: pair ``f``
    to height if ``f % 3 == 1`` and ``f < 3 * sections[1]``, to width if ``f % 3 == 2``
    and ``f < 3 * sections[2]``, else to time, so that every axis has fast and slow pairs.
    Text tokens have three equal ids, and then every pair turns with the same position:
    the module reduces to 1-D RoPE (``posenc.RotaryEmbedding(head_dim)``).

    Equal to the query/key rotation of ``transformers``' ``Qwen2VLRotaryEmbedding``
    (contiguous) and ``Qwen3VLTextRotaryEmbedding`` (interleaved) followed by
    ``apply_rotary_pos_emb`` (half layout).

    Args:
        head_dim: width of one head; even.
        sections: three counts of pairs (time, height, width) summing to ``head_dim / 2``,
            e.g. ``[16, 24, 24]`` (Qwen2-VL, Qwen2.5-VL) or ``[24, 20, 20]`` (Qwen3-VL).
        base: the RoPE base (1e6 in Qwen2-VL, 5e6 in Qwen3-VL).
        interleaved: the Qwen3-VL assignment instead of contiguous blocks.

    Shapes:
        ``forward(x, *, positions)``: ``x`` is ``(batch, heads, seq, head_dim)`` or
        ``(batch, seq, head_dim)``; ``positions`` is ``(3, batch, seq)`` (or ``(3, seq)``,
        shared by the batch), integer ids as :func:`mrope_position_ids` returns them.
        Returns a tensor of the shape and dtype of ``x``.

    Example:
        >>> mrope = MultimodalRotaryEmbedding(16, [2, 3, 3])
        >>> ids = mrope_position_ids([("text", 2), ("image", (1, 4, 4)), ("text", 1)])
        >>> q = torch.randn(1, 2, ids.shape[1], 16)
        >>> mrope(q, positions=ids[:, None]).shape
        torch.Size([1, 2, 7, 16])
        >>> mrope.axis_of_pair().tolist()
        [0, 0, 1, 1, 1, 2, 2, 2]
    """

    axis_index: torch.Tensor

    def __init__(self, head_dim: int, sections: Sequence[int], *, base: float = 10000.0, interleaved: bool = False) -> None:
        super().__init__()
        self.head_dim = _head_dim(head_dim, 2)
        if isinstance(sections, (str, bytes)) or not isinstance(sections, (Sequence, torch.Tensor, np.ndarray)):
            raise TypeError(f"sections must be three ints (time, height, width), got {sections!r}")
        if len(sections) != 3:
            raise ValueError(f"sections must hold three counts (time, height, width), got {list(sections)!r}")
        self.sections = [check_int(f"sections[{i}]", s, minimum=0) for i, s in enumerate(sections)]
        if sum(self.sections) != self.head_dim // 2:
            raise ValueError(f"sections must sum to head_dim / 2 = {self.head_dim // 2}, got {self.sections} (sum {sum(self.sections)})")
        self.base = check_positive_float("base", base)
        if not isinstance(interleaved, (bool, np.bool_)):
            raise TypeError(f"interleaved must be True or False, got {interleaved!r}")
        self.interleaved = bool(interleaved)
        self.register_buffer("axis_index", torch.from_numpy(self._axes()), persistent=False)

    def _axes(self) -> np.ndarray:
        n = self.head_dim // 2
        if not self.interleaved:
            return np.repeat(np.arange(3), self.sections).astype(np.int64)
        f = np.arange(n)
        axis = np.zeros(n, dtype=np.int64)
        axis[(f % 3 == 1) & (f < 3 * self.sections[1])] = 1
        axis[(f % 3 == 2) & (f < 3 * self.sections[2])] = 2
        return axis

    def reset_parameters(self) -> None:
        """Rebuild the ``axis_index`` buffer (after meta-device construction and ``to_empty``)."""
        self.axis_index = torch.from_numpy(self._axes()).to(self.axis_index.device)

    def axis_of_pair(self) -> torch.Tensor:
        """The axis (0 time, 1 height, 2 width) each of the ``head_dim / 2`` pairs turns with."""
        return torch.from_numpy(self._axes())

    def angles(self, positions: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Angles ``(batch, seq, head_dim / 2)`` of every pair for ids ``(3, batch, seq)``."""
        n = self.head_dim // 2
        w = _ladder(n, 2.0 / self.head_dim, self.base, positions.device, dtype)
        freqs = positions.to(dtype)[..., None] * w  # (3, batch, seq, n)
        axes = self._axes_on(positions.device)
        onehot = (axes[None, :] == torch.arange(3, device=positions.device)[:, None]).to(dtype)  # (3, n)
        return (freqs * onehot[:, None, None, :]).sum(0)

    def _axes_on(self, device: torch.device) -> torch.Tensor:
        if self.axis_index.device.type == "meta" or self.axis_index.device != device:
            return torch.as_tensor(self._axes(), device=device)
        return self.axis_index

    def forward(self, x: torch.Tensor, *, positions: torch.Tensor) -> torch.Tensor:
        x = _check_x(x, self.head_dim, min_ndim=3)
        p = _check_positions_tensor(positions, x)
        if p.is_floating_point():
            raise TypeError(f"positions must be integer ids (time, height, width), got dtype {p.dtype}")
        if p.ndim == 2:
            p = p[:, None, :]
        if p.ndim != 3 or p.shape[0] != 3:
            raise ValueError(f"positions must have shape (3, batch, seq) or (3, seq), got {tuple(positions.shape)}")
        if x.ndim not in (3, 4):
            raise ValueError(f"x must have shape (batch, heads, seq, head_dim) or (batch, seq, head_dim), got {tuple(x.shape)}")
        if p.shape[2] != x.shape[-2] or p.shape[1] not in (1, x.shape[0]):
            raise ValueError(f"positions {tuple(p.shape)} do not fit x {tuple(x.shape)}: need (3, batch or 1, seq)")
        ang = self.angles(p, _work_dtype(x))  # (batch, seq, n)
        if x.ndim == 4:
            ang = ang[:, None]
        return _rotate(x, ang, "half")

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, sections={self.sections}, base={self.base}, interleaved={self.interleaved}"
