"""Fast paths of the rotation, chosen in one place (:func:`rotate_fast`).

:func:`posenc.rope.core.rotate` is the reference, and the one a compiler traces. In eager
mode three faster kernels compute the same numbers (to float32 rounding, one unit in the
last place at most):

* half layout on CUDA with Triton installed: one fused kernel (``posenc._rotary_triton``),
  one read and one write of ``x``;
* half layout elsewhere: ``out = x * [cos | cos]`` (the only allocation), then
  ``out1 -= x2 sin`` and ``out2 += x1 sin`` in place;
* interleaved layout: one complex multiplication by ``cos + i sin``.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from .core import rotate, table_view


@functools.lru_cache(maxsize=1)
def _triton() -> Any:
    """``posenc._rotary_triton``, or ``None`` where Triton is missing."""
    try:
        from .. import _rotary_triton
    except Exception:  # no triton, or a triton that cannot compile here
        return None
    return _rotary_triton


def _half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, axis: int, rot: torch.Tensor | None) -> torch.Tensor:
    half = x.shape[-1] // 2
    s = table_view(sin, x.ndim, axis)
    cos2 = torch.cat([cos, cos], dim=-1) if rot is None else rot
    out = torch.mul(x, table_view(cos2, x.ndim, axis))
    out[..., :half].addcmul_(x[..., half:], s, value=-1.0)
    out[..., half:].addcmul_(x[..., :half], s)
    return out


def _interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, axis: int, rot: torch.Tensor | None) -> torch.Tensor:
    if x.stride(-1) != 1 or x.storage_offset() % 2 or any(s % 2 for s in x.stride()[:-1]):
        x = x.clone(memory_format=torch.contiguous_format)  # strides not compatible with a complex view
    xc = torch.view_as_complex(x.unflatten(-1, (-1, 2)))
    table = torch.complex(cos, sin) if rot is None else torch.view_as_complex(rot)
    return torch.view_as_real(xc * table_view(table, x.ndim, axis)).flatten(-2)


def rotation_table(cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """What the eager kernel of ``layout`` multiplies by, kept real: ``[cos | cos]`` or the pairs ``(cos, sin)``."""
    return torch.cat([cos, cos], dim=-1) if layout == "half" else torch.stack([cos, sin], dim=-1)


def rotate_fast(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, axis: int, rot: torch.Tensor | None = None
) -> torch.Tensor:
    """:func:`~posenc.rope.core.rotate` with the fastest kernel that applies (same arguments; ``rot``:
    an optional precomputed :func:`rotation_table` of the tables)."""
    width = 2 * cos.shape[-1]
    if torch.compiler.is_compiling() or cos.requires_grad or sin.requires_grad:
        return rotate(x, cos, sin, layout, axis)
    if width < x.shape[-1]:
        return torch.cat([rotate_fast(x[..., :width], cos, sin, layout, axis, rot), x[..., width:]], dim=-1)
    if (
        layout == "half"
        and x.is_cuda
        and x.dtype in (torch.float16, torch.bfloat16, torch.float32)
        and x.is_contiguous()
        and cos.dtype == torch.float32
        and _triton() is not None
    ):
        return _triton().rotate_half(x, cos, sin, seq_axis=axis)
    work = x if x.dtype == cos.dtype else x.to(cos.dtype)
    if rot is not None and rot.dtype != work.dtype:
        rot = None
    out = _half(work, cos, sin, axis, rot) if layout == "half" else _interleaved(work, cos, sin, axis, rot)
    return out if out.dtype == x.dtype else out.to(x.dtype)
