"""Argument checks of :mod:`posenc.rope`, at its one boundary (the public functions and
``RotaryEmbedding.forward``); the kernels behind it assume valid input.

The checks shared with the rest of the package live in :mod:`posenc._checks`.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

import weakref

from .._checks import check_choice, check_int, should_check_values
from .core import LAYOUTS, RotaryTables

# the tables RotaryEmbedding.tables made (checked when they were made): id(cos), id(sin) -> cos
_MADE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def remember(cos: torch.Tensor, sin: torch.Tensor) -> None:
    """Record tables made by posenc, so that applying them skips the value checks."""
    _MADE[id(cos), id(sin)] = cos


def made_here(cos: torch.Tensor, sin: torch.Tensor) -> bool:
    """Whether ``cos`` and ``sin`` are tables :func:`remember` recorded (and still alive)."""
    return _MADE.get((id(cos), id(sin))) is cos

MAX_HEAD_DIM = 1 << 16  # wider heads are refused with a clear error, not a MemoryError


def check_head_dim(name: str, value: object) -> int:
    """An int in ``[2, 2**16]``."""
    value = check_int(name, value, minimum=2)
    if value > MAX_HEAD_DIM:
        raise ValueError(f"{name} must be at most {MAX_HEAD_DIM}, got {value}")
    return value


def check_seq_dim(seq_dim: object) -> int:
    """An integer axis other than ``-1`` (the last axis holds the head's coordinates)."""
    if isinstance(seq_dim, bool) or not isinstance(seq_dim, numbers.Integral):
        raise TypeError(f"seq_dim must be an integer axis such as -2 or 1, got {seq_dim!r}")
    if int(seq_dim) == -1:
        raise ValueError("seq_dim must not be -1: the last axis holds the head's coordinates")
    return int(seq_dim)


def check_rotary_input(name: str, x: object, seq_dim: int, head_dim: int | None = None) -> tuple[torch.Tensor, int]:
    """A floating-point tensor ``(..., seq, ..., head_dim)`` and its non-negative sequence axis."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor (float16/bfloat16/float32/float64), got dtype {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"{name} must have shape (..., seq, head_dim), got {tuple(x.shape)}")
    if head_dim is not None and x.shape[-1] != head_dim:
        raise ValueError(f"{name} must have shape (..., seq, {head_dim}) (head_dim={head_dim}), got {tuple(x.shape)}")
    axis = seq_dim + x.ndim if seq_dim < 0 else seq_dim
    if not 0 <= axis < x.ndim - 1:
        raise ValueError(
            f"seq_dim={seq_dim} is not a sequence axis of {name} with shape {tuple(x.shape)}: "
            f"accepted {-x.ndim} .. -2 or 0 .. {x.ndim - 2}"
        )
    return x, axis


def check_rotary_width(head_dim: int, rotary_dim: object, partial_rotary_factor: object) -> int:
    """The rotated width: ``rotary_dim``, ``int(head_dim * partial_rotary_factor)`` or ``head_dim``; even."""
    width = head_dim
    if partial_rotary_factor is not None:
        if isinstance(partial_rotary_factor, bool) or not isinstance(partial_rotary_factor, numbers.Real):
            raise TypeError(f"partial_rotary_factor must be a number in (0, 1], got {partial_rotary_factor!r}")
        if not 0.0 < float(partial_rotary_factor) <= 1.0:
            raise ValueError(f"partial_rotary_factor must be a number in (0, 1], got {partial_rotary_factor}")
        width = int(head_dim * float(partial_rotary_factor))  # as transformers computes it
        if width < 2 or width % 2:
            raise ValueError(
                f"partial_rotary_factor={partial_rotary_factor} gives int(head_dim * factor) = {width} rotated "
                f"coordinates for head_dim={head_dim}; RoPE needs an even number >= 2"
            )
    if rotary_dim is not None:
        rotary_dim = check_int("rotary_dim", rotary_dim, minimum=2)
        if partial_rotary_factor is not None and rotary_dim != width:
            raise ValueError(f"rotary_dim={rotary_dim} differs from int(head_dim * partial_rotary_factor) = {width}; pass one")
        if rotary_dim > head_dim:
            raise ValueError(f"rotary_dim must be at most head_dim={head_dim}, got {rotary_dim}")
        width = rotary_dim
    if width % 2:
        name = "head_dim" if width == head_dim else "rotary_dim"
        raise ValueError(f"{name} must be even (RoPE rotates pairs of coordinates), got {width}")
    return width


def check_rotary_positions(positions: object, x: torch.Tensor | None, axis: int, device: torch.device | None) -> torch.Tensor:
    """Type, dtype, rank, device and shape of rotary ``positions`` (never their values: no sync)."""
    if isinstance(positions, (bool, numbers.Number)):
        raise TypeError(
            "positions must be a 1-D sequence of length seq (or a 2-D (batch, seq) tensor), "
            f"got the scalar {positions!r} (pass offset= for positions offset, offset + 1, ...)"
        )
    if not isinstance(positions, torch.Tensor):
        if not isinstance(positions, (list, tuple, np.ndarray)):
            raise TypeError(f"positions must be a tensor or a sequence of numbers, got {type(positions).__name__}")
        try:
            arr = np.asarray(positions)
        except (ValueError, TypeError) as err:
            raise TypeError(f"positions must be a rectangular sequence of numbers: {err}") from None
        if arr.dtype == np.float16 or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
            raise TypeError(f"positions must hold integers or float32/float64 numbers, got dtype {arr.dtype}")
        positions = torch.as_tensor(np.ascontiguousarray(arr.astype(np.int64 if arr.dtype.kind in "iu" else arr.dtype)), device=device)
    p = positions
    if p.dtype in (torch.float16, torch.bfloat16):
        raise TypeError(
            f"positions must be integers or float32/float64, got {p.dtype}: a 16-bit float "
            "cannot represent large positions (bf16 rounds 257 to 256)"
        )
    if p.dtype == torch.bool or p.is_complex():
        raise TypeError(f"positions must be integers or float32/float64, got {p.dtype}")
    if p.ndim not in (1, 2):
        raise ValueError(f"positions must have shape (seq,) or (batch, seq), got {tuple(p.shape)}")
    if device is not None and p.device != device:
        raise ValueError(
            f"positions are on {p.device} but must be on {device} (the device of x); move them with positions.to(x.device)"
        )
    if x is not None:
        seq = x.shape[axis]
        ok = p.shape[0] == seq if p.ndim == 1 else (axis >= 1 and p.shape[1] == seq and p.shape[0] in (1, x.shape[0]))
        if not ok:
            raise ValueError(
                f"positions must have shape (seq,) = ({seq},) or (batch, seq) = ({x.shape[0]}, {seq}) with "
                f"the batch on axis 0 and the sequence on axis {axis} of x of shape {tuple(x.shape)}, got {tuple(p.shape)}"
            )
    return p


def check_finite_positions(p: torch.Tensor, check_values: bool | None) -> None:
    """Finite float positions, checked as :func:`should_check_values` says."""
    if p.is_floating_point() and p.device.type != "meta" and should_check_values(check_values, p):
        if not bool(torch.isfinite(p).all()):
            raise ValueError("positions must be finite numbers, got NaN or infinity")


def rotary_offset(offset: object, positions: object, x: torch.Tensor, axis: int) -> tuple[int, torch.Tensor | None]:
    """``(offset, None)`` for an int offset, or ``(0, offset + arange(seq))`` for a tensor one (no sync)."""
    if positions is not None:
        if not (isinstance(offset, numbers.Integral) and not isinstance(offset, bool) and offset == 0):
            raise ValueError("pass either positions or offset, not both (offset is added only to the default positions)")
        return 0, None
    if isinstance(offset, torch.Tensor):
        if offset.is_floating_point() or offset.is_complex() or offset.dtype == torch.bool:
            raise TypeError(f"offset must be an int or an integer tensor, got dtype {offset.dtype}")
        if offset.ndim > 1 or (offset.ndim == 1 and (axis == 0 or offset.shape[0] not in (1, x.shape[0]))):
            raise ValueError(
                f"a tensor offset must be 0-d, or (batch,) for x of shape (batch, ..., seq, ...), got shape "
                f"{tuple(offset.shape)} for x of shape {tuple(x.shape)}"
            )
        if offset.device != x.device:
            raise ValueError(f"offset must be on x's device ({x.device}), got {offset.device}")
        return 0, offset[..., None] + torch.arange(x.shape[axis], device=x.device, dtype=offset.dtype)
    return check_int("offset", offset, minimum=0), None


def check_rotary_tables(
    q: object, k: object, tables: object, sin: object, layout: object, rotary_dim: object, seq_dim: object, check_values: bool | None
):
    """Validate the arguments of ``apply_rotary_tables``: ``(cos, sin, layout, [(q, axis), (k, axis)])``."""
    seq_dim = check_seq_dim(seq_dim)
    if isinstance(tables, RotaryTables):
        if sin is not None:
            raise TypeError("pass RotaryTables alone, or the raw cos and sin tensors, not both")
        if layout is not None and layout != tables.layout:
            raise ValueError(f"layout={layout!r} differs from the layout of the tables ({tables.layout!r}); they were made for another layout")
        if rotary_dim is not None and rotary_dim != tables.rotary_dim:
            raise ValueError(f"rotary_dim={rotary_dim!r} differs from the tables' rotary_dim ({tables.rotary_dim})")
        cos, sin, layout, rotary_dim = tables
    elif isinstance(tables, torch.Tensor) and isinstance(sin, torch.Tensor):
        cos = tables
    else:
        raise TypeError(
            "tables must be the RotaryTables of RotaryEmbedding.tables (or the raw cos and sin tensors), "
            f"got {type(tables).__name__}"
        )
    layout = check_choice("layout", "half" if layout is None else layout, LAYOUTS)
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tables.{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"tables.{name} must be float32 or float64 (16-bit tables lose the rotation's precision), got {t.dtype}")
        if t.ndim not in (2, 3) or t.shape[-1] < 1:
            raise ValueError(f"tables.{name} must have shape (seq, rotary_dim/2) or (batch, seq, rotary_dim/2), got {tuple(t.shape)}")
    if cos.shape != sin.shape or cos.dtype != sin.dtype or cos.device != sin.device:
        raise ValueError(
            f"cos and sin must have the same shape, dtype and device, got {tuple(cos.shape)} {cos.dtype} "
            f"{cos.device} and {tuple(sin.shape)} {sin.dtype} {sin.device}"
        )
    n = cos.shape[-1]
    full_width = "Hugging Face's full-width [cos | cos] format; pass cos[..., : rotary_dim // 2] and the same of sin"
    if rotary_dim is not None:
        rotary_dim = check_int("rotary_dim", rotary_dim, minimum=2)
        if n == rotary_dim and n % 2 == 0 and not isinstance(n, torch.SymInt):
            raise ValueError(f"the tables have rotary_dim = {rotary_dim} columns, not rotary_dim / 2 pairs: {full_width}")
        if 2 * n != rotary_dim:
            raise ValueError(f"the tables hold {n} pairs but rotary_dim={rotary_dim} needs {rotary_dim} / 2")
    if should_check_values(check_values, cos) and cos.numel() and cos.device.type != "meta" and not made_here(cos, sin):
        half = n // 2
        if n % 2 == 0 and torch.equal(cos[..., :half], cos[..., half:]) and torch.equal(sin[..., :half], sin[..., half:]) and bool(sin.any()):
            raise ValueError(f"the tables repeat their first half: {full_width}")
        if bool(((cos == 0).all(-1) & (sin != 0).all(-1)).any()):
            raise ValueError(
                "cos and sin look swapped: a row of cos is 0 for every pair where sin is not (position 0 has cos 1, sin 0)"
            )
    out = []
    for name, t in (("q", q), ("k", k)):
        t, axis = check_rotary_input(name, t, seq_dim)
        if t.device != cos.device:
            raise ValueError(f"{name} is on {t.device} but the tables are on {cos.device}; they must share a device")
        if t.shape[-1] < 2 * n:
            raise ValueError(f"{name} has head_dim {t.shape[-1]} but the tables rotate {2 * n} coordinates ({n} pairs)")
        seq = t.shape[axis]
        if cos.shape[-2] != seq or (cos.ndim == 3 and (axis == 0 or cos.shape[0] not in (1, t.shape[0]))):
            raise ValueError(
                f"tables of shape {tuple(cos.shape)} do not fit {name} of shape {tuple(t.shape)} "
                f"(sequence on axis {axis}: expected ({seq}, {n}) or ({t.shape[0]}, {seq}, {n}))"
            )
        out.append((t, axis))
    return cos, sin, layout, out
