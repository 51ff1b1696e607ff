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
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from .rope.core import RotaryTables
from .rope.core import rotate as _core_rotate
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
    "mrope_position_ids_batch",
    "mrope_rope_deltas",
    "mrope_decode_position_ids",
    "MRopeBatch",
    "qwen3_vl_timestamps",
    "qwen3_vl_video_segments",
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
    """Rotate pair ``j`` of ``x`` (..., seq, head_dim) by ``angles[..., j]``, with :func:`posenc.rope.core.rotate`.

    ``angles`` broadcasts against ``x`` without its last axis halved: ``(seq, n)``,
    ``(batch, 1, ..., seq, n)`` or ``(batch or 1, heads, seq, n)``; cos and sin are taken in
    the dtype of ``angles`` (the work dtype), the result is cast back to ``x.dtype``.
    """
    cos, sin = angles.cos(), angles.sin()
    seq_axis = x.ndim - 2
    if cos.ndim <= 2:  # (seq, n): one table for every leading axis
        return _core_rotate(x, cos, sin, layout, seq_axis)
    # fold every leading axis into one batch axis that core.rotate reads as (batch, seq, n)
    lead = torch.broadcast_shapes(x.shape[:-2], cos.shape[:-2])
    xb = x.expand(*lead, *x.shape[-2:]).reshape(-1, *x.shape[-2:])
    cb = cos.expand(*lead, *cos.shape[-2:]).reshape(-1, *cos.shape[-2:])
    sb = sin.expand(*lead, *sin.shape[-2:]).reshape(-1, *sin.shape[-2:])
    return _core_rotate(xb, cb, sb, layout, 1).reshape(*lead, *x.shape[-2:])


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


def _real_positions(positions: object) -> np.ndarray:
    """Check (row, column) coordinates ``(n, 2)`` and return them as a float64 array."""
    if isinstance(positions, torch.Tensor):
        if positions.dtype == torch.bool or positions.is_complex():
            raise TypeError(f"positions must hold real (row, column) coordinates, got dtype {positions.dtype}")
        positions = positions.detach().to("cpu", torch.float64).numpy()
    try:
        p = np.asarray(positions)
    except (TypeError, ValueError) as err:
        raise TypeError(f"positions must be an array (n, 2) of real (row, column) coordinates, got {type(positions).__name__}") from err
    if p.dtype == np.bool_ or not (np.issubdtype(p.dtype, np.integer) or np.issubdtype(p.dtype, np.floating)):
        raise TypeError(f"positions must hold real (row, column) coordinates, got dtype {p.dtype}")
    if p.ndim != 2 or p.shape[1] != 2:
        raise ValueError(f"positions must have shape (n, 2) holding (row, column), got {p.shape}")
    p = p.astype(np.float64)
    if not np.isfinite(p).all():
        raise ValueError("positions must hold finite coordinates")
    return p


def sinusoidal_encoding_2d(
    grid_size: object, d_model: int, *, base: float = 10000.0, positions: object = None
) -> np.ndarray:
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

    With ``positions`` the rows are those of arbitrary real coordinates instead of the
    integer grid (patch centres on a rescaled grid, interpolated or jittered coordinates):
    the same formula at ``r = positions[i, 0]``, ``c = positions[i, 1]``.

    Args:
        grid_size: ``n`` for an ``n x n`` grid, or ``(height, width)``; ``None`` with
            ``positions``.
        d_model: width of the table; divisible by 4.
        base: the frequency base (10000 in MAE and MoCo v3).
        positions: ``None``, or real (row, column) coordinates ``(n, 2)`` (a numpy array,
            a CPU tensor or nested lists); then ``grid_size`` must be ``None``.

    Returns:
        A float64 array of shape ``(height * width, d_model)``, rows in row-major order
        (patch ``r * width + c``), or ``(n, d_model)`` for ``positions``.

    Example:
        >>> t = sinusoidal_encoding_2d((2, 3), 8)
        >>> t.shape
        (6, 8)
        >>> bool(np.allclose(t[4, :4], sinusoidal_encoding_2d(3, 8)[1, :4]))  # column 1 in both
        True
        >>> at = sinusoidal_encoding_2d(None, 8, positions=[[1.0, 1.0], [0.5, 2.25]])
        >>> bool(np.array_equal(at[0], t[4]))  # (1, 1) is patch 4 of the 2 x 3 grid
        True
    """
    d_model = check_int("d_model", d_model)
    if d_model % 4:
        raise ValueError(f"d_model must be divisible by 4 (sin and cos of the row and of the column), got {d_model}")
    base = check_positive_float("base", base)
    if positions is None:
        if grid_size is None:
            raise ValueError("pass grid_size, or grid_size=None with positions (n, 2)")
        height, width = _grid(grid_size)
        check_size("the table (height * width, d_model)", height * width, d_model)
        rows, cols = np.meshgrid(np.arange(height, dtype=np.float64), np.arange(width, dtype=np.float64), indexing="ij")
        rows, cols = rows.ravel(), cols.ravel()
    else:
        if grid_size is not None:
            raise ValueError(f"pass either grid_size or positions, not both (grid_size={grid_size!r})")
        p = _real_positions(positions)
        check_size("the table (n, d_model)", p.shape[0], d_model)
        rows, cols = p[:, 0], p[:, 1]
    omega = base ** (-4.0 * np.arange(d_model // 4, dtype=np.float64) / d_model)
    ang_c = np.outer(cols, omega)
    ang_r = np.outer(rows, omega)
    return np.concatenate([np.sin(ang_c), np.cos(ang_c), np.sin(ang_r), np.cos(ang_r)], axis=1)


# ----------------------------------------------------------------------------- axial RoPE


class AxialRotaryEmbedding(nn.Module):
    """2-D rotary embedding as two 1-D rotations: RoPE-Axial of Heo et al. (2024, section 3.2, "Axial frequency").

    Pair ``j < head_dim / 4`` turns by ``row * w_j`` and pair ``head_dim / 4 + j`` by
    ``col * w_j``, with ``w_j = base ** (-4 j / head_dim)``. Since each pair turns with
    one coordinate, ``<R(r, c) q, R(r', c') k>`` depends only on the offset
    ``(r' - r, c' - c)``, never on where the two patches sit. With the defaults this is
    the rotary embedding of the vision tower of Qwen2-VL in ``transformers``
    (``Qwen2VLVisionRotaryEmbedding`` with ``apply_rotary_pos_emb_vision``), for
    positions as ``transformers.vision_utils.get_vision_position_ids`` orders them: bit
    for bit at head widths 16, 32 and 64, and to float32 rounding at Qwen2-VL's own head
    width 80, where the two round the frequencies' exponent differently (measured with
    random unit-variance queries: largest difference 2.4e-7 on a 16 x 8 patch grid,
    1.8e-6 on 64 x 64, for outputs up to about 5).

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
    """RoPE-Mixed of Heo et al. (2024, section 3.2, "Mixed learnable frequency"): learned 2-D frequencies, per pair and head.

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
        init_angle: with ``init="random"``, the start direction ``a`` (radians) instead of a
            random one: a number for every head, or one per head (a sequence or tensor of
            ``n_heads``); nothing is drawn from the generator then.
        dtype: the dtype of ``freqs`` (default ``torch.float32``). The initial frequencies
            are computed in float64 for ``torch.float64`` and in float32 otherwise, so
            that a float64 module starts from float64-exact values (``.double()`` after
            construction only widens float32 values).

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
        >>> east = MixedRotaryEmbedding(8, 1, init_angle=0.0)  # pair 0 turns with the column only
        >>> east.freqs[:, 0, 0].tolist()
        [0.0, 1.0]
    """

    def __init__(
        self,
        head_dim: int,
        n_heads: int,
        *,
        base: float = 10.0,
        init: str = "random",
        layout: str = "half",
        init_angle: object = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.head_dim = _head_dim(head_dim, 4)
        self.n_heads = check_int("n_heads", n_heads)
        check_size("freqs (2, n_heads, head_dim // 2)", 2, self.n_heads, self.head_dim // 2, limit=MAX_PARAMETER_ELEMENTS)
        self.base = check_positive_float("base", base)
        self.init = check_choice("init", init, ("random", "axial"))
        self.layout = check_choice("layout", layout, _LAYOUTS)
        self.init_angle = self._check_init_angle(init_angle)
        if dtype is not None and (not isinstance(dtype, torch.dtype) or not dtype.is_floating_point):
            raise TypeError(f"dtype must be a floating-point torch.dtype or None, got {dtype!r}")
        self.freqs = nn.Parameter(torch.empty(2, self.n_heads, self.head_dim // 2, dtype=dtype))
        self.reset_parameters()

    def _check_init_angle(self, init_angle: object) -> tuple[float, ...] | None:
        if init_angle is None:
            return None
        if self.init != "random":
            raise ValueError(f"init_angle sets the start direction of init='random', not of init={self.init!r}")
        if isinstance(init_angle, torch.Tensor):
            init_angle = init_angle.detach().cpu().reshape(-1).tolist() if init_angle.ndim else float(init_angle)
        if isinstance(init_angle, np.ndarray):
            init_angle = init_angle.reshape(-1).tolist() if init_angle.ndim else float(init_angle)
        values = [init_angle] * self.n_heads if not isinstance(init_angle, (Sequence, np.ndarray)) or isinstance(init_angle, (str, bytes)) else list(init_angle)
        if len(values) != self.n_heads:
            raise ValueError(f"init_angle must be one number or one per head ({self.n_heads}), got {len(values)} values")
        out = []
        for v in values:
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(float(v)):
                raise TypeError(f"init_angle must hold finite real numbers (radians), got {v!r}")
            out.append(float(v))
        return tuple(out)

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """(Re-)initialise ``freqs`` as ``init`` says (also after meta-device construction and ``to_empty``)."""
        q = self.head_dim // 4
        device = self.freqs.device
        work = torch.float64 if self.freqs.dtype == torch.float64 else torch.float32
        mag = torch.from_numpy(self.base ** (-4.0 * np.arange(q, dtype=np.float64) / self.head_dim)).to(work)
        mag = mag.to(device)
        if self.init == "axial":
            zeros = torch.zeros(self.n_heads, q, device=device)
            rows = torch.cat((mag.expand(self.n_heads, q), zeros), dim=-1)
            cols = torch.cat((zeros, mag.expand(self.n_heads, q)), dim=-1)
        else:
            if device.type == "meta":
                return
            if self.init_angle is None:
                a = torch.rand(self.n_heads, 1) * (2 * torch.pi)
                a = a.to(device, work)
            else:
                a = torch.tensor(self.init_angle, dtype=work, device=device)[:, None]
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


def _segment(i: int, seg: object) -> tuple[str, object, object]:
    if not isinstance(seg, (tuple, list)) or len(seg) not in (2, 3) or not isinstance(seg[0], str):
        raise TypeError(
            f"segments[{i}] must be a pair (kind, size) such as ('text', 5) or ('image', (1, 4, 6)), "
            f"or ('video', (t, h, w), second_per_grid), got {seg!r}"
        )
    kind = check_choice(f"segments[{i}][0]", seg[0], ("text", "image", "video"))
    if len(seg) == 3 and kind != "video":
        raise ValueError(f"segments[{i}]: only a video takes a third element (seconds per temporal patch), got {seg!r}")
    return kind, seg[1], (seg[2] if len(seg) == 3 else None)


def _time_ids(t: int, second_per_grid: object, tokens_per_second: object, where: str) -> torch.Tensor:
    """Temporal ids of ``t`` temporal patches: ``i`` (Qwen2-VL) or ``floor(i * tokens_per_second * second_per_grid)``."""
    if second_per_grid is None:
        return torch.arange(t)
    if tokens_per_second is None:
        raise ValueError(f"{where}: a video with seconds per temporal patch (Qwen2.5-VL) needs tokens_per_second (2 in the released checkpoints)")
    spg = check_positive_float(f"{where} (seconds per temporal patch)", second_per_grid)
    # as transformers (and Qwen's code) computes it: the interval in float32, then i * interval in float32, truncated
    interval = tokens_per_second * torch.tensor(spg, dtype=torch.float32)
    return (torch.arange(t) * interval).long()


def mrope_position_ids(
    segments: Sequence[tuple],
    *,
    spatial_merge_size: int = 2,
    tokens_per_second: float | None = None,
) -> torch.Tensor:
    """Temporal, height and width position ids of M-RoPE (Wang et al. 2024, section 2.1) for one sequence.

    A text token gets the same id on all three axes, one more than the token before. The
    tokens of an image or video of ``t x h x w`` patches (``h`` and ``w`` before the
    ``spatial_merge_size x spatial_merge_size`` merge, as in ``image_grid_thw``) are laid
    out frame by frame, row by row; the token of temporal patch ``i``, merged row ``j`` and
    column ``k`` gets ``(s + time(i), s + j, s + k)``, with ``s`` the id the segment starts
    at. Text after a vision segment starts at the largest id so far plus one, the rule of
    the paper and of the code the Qwen team contributed to ``transformers`` (up to 5.2).

    The three models:

    * Qwen2-VL: ``("video", (t, h, w))``, ``time(i) = i``.
    * Qwen2.5-VL (absolute time): ``("video", (t, h, w), second_per_grid)`` with the
      seconds one temporal patch spans (``temporal_patch_size / fps``, the processor's
      ``second_per_grid_ts``) and ``tokens_per_second`` (the vision config's; 2 in the
      released checkpoints): ``time(i) = floor(i * tokens_per_second * second_per_grid)``,
      computed in float32 as ``transformers`` does. Images keep ``time = 0``.
    * Qwen3-VL: every frame is its own ``("video", (1, h, w))`` segment after a text
      timestamp; :func:`qwen3_vl_video_segments` builds them.

    ``transformers`` from 5.3 on (``get_rope_index`` since the "Unify 3D position ids"
    change) advances the start by ``max(h, w) / spatial_merge_size`` after a vision segment
    instead. That equals the rule above for images and Qwen3-VL's one-frame segments, but
    after a Qwen2-VL or Qwen2.5-VL video whose last time id reaches past that, the text
    starts inside the video's time ids (the incidents page, "M-RoPE: text after a long
    video").

    Args:
        segments: ``[("text", n), ("image", (t, h, w)), ("video", (t, h, w)),
            ("video", (t, h, w), second_per_grid), ...]``; ``n >= 1`` counts every
            non-vision token (the vision start and end markers included); two vision
            segments must be separated by text.
        spatial_merge_size: side of the block of patches merged into one token (2 in the
            Qwen-VL models); ``h`` and ``w`` must be multiples of it.
        tokens_per_second: time ids per second of video (Qwen2.5-VL); needed by videos
            with ``second_per_grid``, unused otherwise.

    Returns:
        A ``torch.long`` tensor of shape ``(3, seq)``: rows time, height, width. The
        decoding offset is ``ids.max() + 1 - seq`` (:func:`mrope_rope_deltas`).

    Example:
        >>> mrope_position_ids([("text", 2), ("image", (1, 4, 6)), ("text", 2)])
        tensor([[0, 1, 2, 2, 2, 2, 2, 2, 5, 6],
                [0, 1, 2, 2, 2, 3, 3, 3, 5, 6],
                [0, 1, 2, 3, 4, 2, 3, 4, 5, 6]])
        >>> ids = mrope_position_ids([("text", 1), ("video", (3, 2, 2), 1.0), ("text", 1)], tokens_per_second=2)
        >>> ids[0].tolist()  # temporal patches 1 s apart: time ids 2 apart
        [0, 1, 3, 5, 6]
    """
    m = check_int("spatial_merge_size", spatial_merge_size)
    if tokens_per_second is not None:
        tokens_per_second = check_positive_float("tokens_per_second", tokens_per_second)
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence):
        raise TypeError(f"segments must be a list of (kind, size) pairs, got {type(segments).__name__}")
    if len(segments) == 0:
        raise ValueError("segments must hold at least one segment")
    parts: list[torch.Tensor] = []
    start, total, previous = 0, 0, None
    for i, seg in enumerate(segments):
        kind, size, seconds = _segment(i, seg)
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
            time = _time_ids(t, seconds, tokens_per_second, f"segments[{i}][2]")
            tt, hh, ww = torch.meshgrid(time, torch.arange(gh), torch.arange(gw), indexing="ij")
            parts.append(torch.stack((tt, hh, ww)).reshape(3, -1) + start)
            start += max(int(time[-1]), gh - 1, gw - 1) + 1
        previous = kind
    return torch.cat(parts, dim=1)


def qwen3_vl_timestamps(frame_indices: Sequence[int], fps: float, *, temporal_patch_size: int = 2) -> list[float]:
    """The time in seconds Qwen3-VL writes before each temporal patch of a video.

    The frames sampled from the video (their indices in the original video, at ``fps``
    frames per second) are grouped ``temporal_patch_size`` at a time (the last frame
    repeated to fill the last group); each group is stamped with the mean of the times of
    its first and last frame, as ``transformers``' ``Qwen3VLProcessor`` does. The text
    before the patch is ``f"<{time:.1f} seconds>"``.

    Example:
        >>> qwen3_vl_timestamps([0, 12, 24, 36, 48], fps=24.0)
        [0.25, 1.25, 2.0]
    """
    if isinstance(frame_indices, (str, bytes)) or not isinstance(frame_indices, (Sequence, np.ndarray, torch.Tensor)):
        raise TypeError(f"frame_indices must be a sequence of frame numbers, got {type(frame_indices).__name__}")
    idx = [int(check_int(f"frame_indices[{i}]", int(v) if isinstance(v, (np.integer, torch.Tensor)) else v, minimum=0)) for i, v in enumerate(frame_indices)]
    if not idx:
        raise ValueError("frame_indices must hold at least one frame")
    fps = check_positive_float("fps", fps)
    k = check_int("temporal_patch_size", temporal_patch_size)
    idx += [idx[-1]] * (-len(idx) % k)
    times = [i / fps for i in idx]
    return [(times[i] + times[i + k - 1]) / 2 for i in range(0, len(times), k)]


def qwen3_vl_video_segments(grid_thw: Sequence[int], timestamp_tokens: int | Sequence[int]) -> list[tuple[str, object]]:
    """The segments of one Qwen3-VL video: per temporal patch, a text timestamp and a one-frame vision segment.

    Qwen3-VL (Qwen team 2025, "text-based time alignment") replaces Qwen2.5-VL's absolute
    time ids by text: the ``t`` temporal patches of a video become ``t`` vision segments
    of one frame each (time id ``s``, height and width ids as for an image), each preceded
    by its timestamp text ``<x.x seconds>`` (:func:`qwen3_vl_timestamps`) and the vision
    start marker and followed by the vision end marker, as ``transformers``'
    ``Qwen3VLProcessor`` writes the prompt and ``Qwen3VLModel.get_rope_index`` splits
    ``video_grid_thw``. Pass the result (between other text) to :func:`mrope_position_ids`.

    Args:
        grid_thw: ``(t, h, w)`` of the video, as in ``video_grid_thw``.
        timestamp_tokens: how many tokens the tokenizer makes of each timestamp text: one
            count for every patch, or ``t`` counts.

    Returns:
        ``[("text", n_0 + 1), ("video", (1, h, w)), ("text", 1), ("text", n_1 + 1), ...]``:
        timestamp plus vision start, the frame, vision end, for each temporal patch.

    Example:
        >>> segs = qwen3_vl_video_segments((2, 4, 4), 5)
        >>> segs[:3]
        [('text', 6), ('video', (1, 4, 4)), ('text', 1)]
        >>> mrope_position_ids([("text", 1)] + segs)[0, -6:].tolist()  # the second frame starts at 16
        [15, 16, 16, 16, 16, 18]
    """
    if not isinstance(grid_thw, (tuple, list, torch.Tensor, np.ndarray)) or len(grid_thw) != 3:
        raise TypeError(f"grid_thw must be (t, h, w), got {grid_thw!r}")
    t, h, w = (check_int(f"grid_thw[{i}]", int(v) if isinstance(v, (np.integer, torch.Tensor)) else v) for i, v in enumerate(grid_thw))
    if isinstance(timestamp_tokens, (Sequence, np.ndarray, torch.Tensor)) and not isinstance(timestamp_tokens, (str, bytes)):
        counts = [check_int(f"timestamp_tokens[{i}]", int(v) if isinstance(v, (np.integer, torch.Tensor)) else v) for i, v in enumerate(timestamp_tokens)]
        if len(counts) != t:
            raise ValueError(f"timestamp_tokens must hold one count per temporal patch ({t}), got {len(counts)}")
    else:
        counts = [check_int("timestamp_tokens", timestamp_tokens)] * t
    out: list[tuple[str, object]] = []
    for n in counts:
        out += [("text", n + 1), ("video", (1, h, w)), ("text", 1)]
    return out


def mrope_rope_deltas(position_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The decoding offset of each row: largest id + 1 minus the number of tokens, ``(batch, 1)``.

    The token generated after ``n`` tokens of a row gets the id ``n + delta`` on all three
    axes (:func:`mrope_decode_position_ids`): with ids from :func:`mrope_position_ids` that
    is the largest id of the prompt plus one, continuing where the prompt stopped. This is
    ``transformers``' ``rope_deltas``.

    Args:
        position_ids: ``(3, seq)`` or ``(3, batch, seq)`` integer ids.
        attention_mask: ``(batch, seq)``, 1 for real tokens and 0 for padding (padding ids
            are ignored); ``None``: every token is real.

    Example:
        >>> ids = mrope_position_ids([("text", 2), ("image", (1, 4, 6)), ("text", 2)])
        >>> mrope_rope_deltas(ids)
        tensor([[-3]])
    """
    if not isinstance(position_ids, torch.Tensor) or position_ids.is_floating_point() or position_ids.dtype == torch.bool:
        raise TypeError("position_ids must be an integer tensor (3, seq) or (3, batch, seq)")
    p = position_ids[:, None] if position_ids.ndim == 2 else position_ids
    if p.ndim != 3 or p.shape[0] != 3:
        raise ValueError(f"position_ids must have shape (3, seq) or (3, batch, seq), got {tuple(position_ids.shape)}")
    if attention_mask is None:
        mask = torch.ones(p.shape[1:], dtype=torch.bool, device=p.device)
    else:
        if not isinstance(attention_mask, torch.Tensor) or tuple(attention_mask.shape) != tuple(p.shape[1:]):
            raise ValueError(f"attention_mask must be a tensor (batch, seq) = {tuple(p.shape[1:])}")
        mask = attention_mask.to(p.device).bool()
    low = torch.iinfo(p.dtype).min
    largest = p.masked_fill(~mask[None], low).amax(dim=(0, 2))
    return (largest + 1 - mask.sum(-1)).to(torch.long)[:, None]


class MRopeBatch(NamedTuple):
    """Ids of a padded batch: ``position_ids`` ``(3, batch, seq)``, ``attention_mask`` ``(batch, seq)``, ``rope_deltas`` ``(batch, 1)``."""

    position_ids: torch.Tensor
    attention_mask: torch.Tensor
    rope_deltas: torch.Tensor


def mrope_position_ids_batch(
    batch: Sequence[Sequence[tuple]],
    *,
    padding_side: str = "left",
    spatial_merge_size: int = 2,
    tokens_per_second: float | None = None,
) -> MRopeBatch:
    """:func:`mrope_position_ids` for several sequences, padded to the longest.

    Each row's ids are those of the row alone (padding does not move them); padding
    positions get id 0 and mask 0, as ``transformers``' ``get_rope_index`` with an
    ``attention_mask`` leaves them.

    Args:
        batch: one segment list per row.
        padding_side: ``"left"`` (generation) or ``"right"``.
        spatial_merge_size, tokens_per_second: as for :func:`mrope_position_ids`.

    Returns:
        :class:`MRopeBatch` ``(position_ids, attention_mask, rope_deltas)``.

    Example:
        >>> b = mrope_position_ids_batch([[("text", 3)], [("text", 1), ("image", (1, 4, 4)), ("text", 1)]])
        >>> b.position_ids[0].tolist()  # time ids, padded on the left
        [[0, 0, 0, 0, 1, 2], [0, 1, 1, 1, 1, 3]]
        >>> b.rope_deltas.tolist()
        [[0], [-2]]
    """
    side = check_choice("padding_side", padding_side, ("left", "right"))
    if isinstance(batch, (str, bytes)) or not isinstance(batch, Sequence) or len(batch) == 0:
        raise TypeError("batch must be a non-empty list of segment lists, one per row")
    rows = []
    for b, segments in enumerate(batch):
        try:
            rows.append(mrope_position_ids(segments, spatial_merge_size=spatial_merge_size, tokens_per_second=tokens_per_second))
        except (TypeError, ValueError) as err:
            raise type(err)(f"batch[{b}]: {err}") from err
    length = max(r.shape[1] for r in rows)
    ids = torch.zeros(3, len(rows), length, dtype=torch.long)
    mask = torch.zeros(len(rows), length, dtype=torch.long)
    for b, r in enumerate(rows):
        sl = slice(length - r.shape[1], length) if side == "left" else slice(0, r.shape[1])
        ids[:, b, sl] = r
        mask[b, sl] = 1
    return MRopeBatch(ids, mask, mrope_rope_deltas(ids, mask))


def mrope_decode_position_ids(rope_deltas: torch.Tensor, n_seen: int | torch.Tensor, n_new: int = 1) -> torch.Tensor:
    """Ids ``(3, batch, n_new)`` of the next ``n_new`` tokens, text on all three axes.

    Token ``k`` of the new ones gets ``n_seen + k + rope_deltas`` in each row, with
    ``n_seen`` the number of real tokens the row already holds (prompt and generated,
    padding excluded: ``attention_mask.sum(-1)``). With the deltas of
    :func:`mrope_rope_deltas` the first generated token continues at the prompt's largest
    id plus one.

    Example:
        >>> b = mrope_position_ids_batch([[("text", 2), ("image", (1, 4, 6)), ("text", 2)]])
        >>> mrope_decode_position_ids(b.rope_deltas, b.attention_mask.sum(-1), 2)[:, 0].tolist()
        [[7, 8], [7, 8], [7, 8]]
    """
    if not isinstance(rope_deltas, torch.Tensor) or rope_deltas.is_floating_point() or rope_deltas.ndim != 2 or rope_deltas.shape[1] != 1:
        raise TypeError("rope_deltas must be an integer tensor (batch, 1), as mrope_rope_deltas returns")
    n_new = check_int("n_new", n_new)
    if isinstance(n_seen, torch.Tensor):
        if n_seen.is_floating_point() or n_seen.dtype == torch.bool or n_seen.ndim > 1 or (n_seen.ndim == 1 and n_seen.shape[0] != rope_deltas.shape[0]):
            raise ValueError(f"n_seen must be an int or an integer tensor (batch,) = ({rope_deltas.shape[0]},)")
        seen = n_seen.to(rope_deltas.device, torch.long).reshape(-1, 1)
    else:
        seen = torch.tensor([[check_int("n_seen", n_seen, minimum=0)]], device=rope_deltas.device)
    ids = seen + torch.arange(n_new, device=rope_deltas.device) + rope_deltas  # (batch, n_new)
    return ids[None].expand(3, -1, -1)


# ----------------------------------------------------------------------------- M-RoPE rotation


_MROPE_KEYS = ("type", "rope_type", "rope_theta", "mrope_section", "mrope_interleaved")


def _from_hf_mrope(scaling: object, sections: object, base: object, interleaved: object) -> tuple[object, float, object]:
    """Merge a Hugging Face M-RoPE dict with the explicit arguments (which must agree with it)."""
    if scaling is None:
        if sections is None:
            raise TypeError("sections must be three ints (time, height, width), or pass scaling= a dict with 'mrope_section'")
        return sections, (10000.0 if base is None else base), (False if interleaved is None else interleaved)
    if not isinstance(scaling, Mapping):
        raise TypeError(f"scaling must be None or a Hugging Face rope_scaling / rope_parameters dict, got {type(scaling).__name__}")
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind not in ("default", "mrope") or scaling.get("type", kind) not in ("default", "mrope"):
        raise ValueError(f"scaling: M-RoPE takes rope_type 'default' (or the legacy type 'mrope'), got {kind!r}")
    unknown = sorted(set(map(str, scaling)) - set(_MROPE_KEYS))
    if unknown:
        raise ValueError(f"scaling: M-RoPE does not take {', '.join(unknown)}; accepted keys: {', '.join(_MROPE_KEYS)}")

    def merged(name: str, given: object, key: str) -> object:
        value = scaling.get(key)
        if given is not None and value is not None and (list(given) if key == "mrope_section" else given) != value:
            raise ValueError(f"{name}={given!r} and scaling[{key!r}]={value!r} differ; pass one")
        return given if given is not None else value

    sections = merged("sections", sections, "mrope_section")
    if sections is None:
        raise ValueError("scaling must hold 'mrope_section' (three counts of pairs: time, height, width), or pass sections")
    base = merged("base", base, "rope_theta")
    interleaved = merged("interleaved", interleaved, "mrope_interleaved")
    return sections, (10000.0 if base is None else base), (False if interleaved is None else interleaved)



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
            ``None``: the ``mrope_section`` of ``scaling``.
        base: the RoPE base (1e6 in Qwen2-VL, 5e6 in Qwen3-VL); ``None``: the
            ``rope_theta`` of ``scaling``, else 10,000.
        interleaved: the Qwen3-VL assignment instead of contiguous blocks; ``None``: the
            ``mrope_interleaved`` of ``scaling``, else ``False``.
        scaling: ``None``, or the Hugging Face ``rope_scaling`` / ``rope_parameters`` dict
            of a Qwen-VL text config as it is: ``{"type": "mrope", "mrope_section": [16,
            24, 24]}`` (Qwen2-VL's ``config.json``), ``{"rope_type": "default",
            "mrope_section": [...], "mrope_interleaved": True, "rope_theta": 5e6}``
            (Qwen3-VL, ``transformers`` 5). Context-extension types (``linear``,
            ``yarn``, ...) are refused: M-RoPE models ship without them.

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
        >>> qwen3 = MultimodalRotaryEmbedding(128, scaling={"rope_type": "default", "rope_theta": 5e6,
        ...                                   "mrope_section": [24, 20, 20], "mrope_interleaved": True})
        >>> qwen3.sections, qwen3.base, qwen3.interleaved
        ([24, 20, 20], 5000000.0, True)
    """

    axis_index: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        sections: Sequence[int] | None = None,
        *,
        base: float | None = None,
        interleaved: bool | None = None,
        scaling: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__()
        self.head_dim = _head_dim(head_dim, 2)
        sections, base, interleaved = _from_hf_mrope(scaling, sections, base, interleaved)
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

    def tables(self, positions: torch.Tensor, *, dtype: torch.dtype = torch.float32) -> RotaryTables:
        """cos and sin for ids ``(3, batch, seq)`` or ``(3, seq)``: compute once per forward pass, apply in every layer.

        Returns:
            :class:`~posenc.rope.core.RotaryTables` ``(cos, sin, "half", head_dim)`` with
            ``cos``/``sin`` ``(batch, seq, head_dim / 2)`` in ``dtype`` (float32 or float64);
            apply them with :func:`posenc.rope.apply_rotary_tables` (its fast eager kernel
            agrees with ``forward`` to float32 rounding; :func:`posenc.rope.core.rotate`
            with the tables gives ``forward``'s numbers exactly).

        Example:
            >>> mrope = MultimodalRotaryEmbedding(16, [2, 3, 3])
            >>> ids = mrope_position_ids([("text", 2), ("image", (1, 4, 4)), ("text", 1)])
            >>> t = mrope.tables(ids)
            >>> t.cos.shape
            torch.Size([1, 7, 8])
            >>> q = k = torch.randn(1, 2, 7, 16)
            >>> from posenc.rope import apply_rotary_tables
            >>> bool(torch.allclose(apply_rotary_tables(q, k, t)[0], mrope(q, positions=ids), atol=1e-6))
            True
        """
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
        p = self._check_ids(positions, None)
        ang = self.angles(p, dtype)
        return RotaryTables(ang.cos(), ang.sin(), "half", self.head_dim)

    def _check_ids(self, positions: object, x: torch.Tensor | None) -> torch.Tensor:
        if x is None:
            if not isinstance(positions, torch.Tensor):
                raise TypeError(f"positions must be a torch.Tensor of ids (3, batch, seq), got {type(positions).__name__}")
            if positions.dtype == torch.bool or positions.is_complex():
                raise TypeError(f"positions must be integer ids (time, height, width), got dtype {positions.dtype}")
            p = positions
        else:
            p = _check_positions_tensor(positions, x)
        if p.is_floating_point():
            raise TypeError(f"positions must be integer ids (time, height, width), got dtype {p.dtype}")
        if p.ndim == 2:
            p = p[:, None, :]
        if p.ndim != 3 or p.shape[0] != 3:
            raise ValueError(f"positions must have shape (3, batch, seq) or (3, seq), got {tuple(positions.shape)}")
        return p

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
        p = self._check_ids(positions, x)
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
