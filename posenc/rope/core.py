"""Rotary position embedding (RoPE): frequencies, tables and rotation. This is the file to copy.

RoPE (Su et al. 2024) turns pair ``j`` of a query or key at position ``p`` by the angle
``p * omega_j``, ``omega_j = base**(-2j / d)``, so that ``q_m . k_n`` depends on ``m - n``
only. ``d`` is the number of rotated coordinates (``rotary_dim``); the rest pass through.
Two layouts pair the coordinates differently: ``"half"`` pairs ``(j, j + d/2)`` (GPT-NeoX,
Hugging Face), ``"interleaved"`` pairs ``(2j, 2j + 1)`` (RoFormer, Meta, torchtune).

Numerics, without any float64 tensor on the device:

* :func:`host_tables`: ``cos``/``sin`` for positions ``0 .. n-1``, computed once on the
  host in float64 (numpy) and kept in float32;
* :func:`cos_sin`: any other integer position, on the device, with the angle reduced
  modulo one turn *exactly* in int64 fixed point (``omega_j / 2 pi`` as a multiple of
  ``2**-60``, :func:`fixed_point_turns`), then cos and sin of an angle below pi in
  float32: within 5e-7 of the exact cos and sin of ``p`` times the float64 ``omega`` at
  any position below ``2**33``. Above, the rounding of ``omega / 2 pi`` to float64 shows
  (the error doubles with each bit: 4e-6 at ``2**36``, 6e-5 at ``2**40``, 5e-4 at
  ``2**43``); positions from :data:`MAX_POSITION` on would overflow int64;
* :func:`rotate`: the rotation itself, in plain real arithmetic that a compiler fuses.

Only ``torch`` and ``numpy`` are needed. For the context-extension scalings, copy
:mod:`posenc.rope.scaling` and ``posenc/_checks.py`` beside this file: they import each
other by name outside the package.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

LAYOUTS = ("half", "interleaved")
MAX_POSITION = 2**43  # |position| below it: the fixed-point products stay below 2**63


class RotaryTables(NamedTuple):
    """cos and sin ``(..., seq, rotary_dim // 2)`` for the pairs of ``layout``."""

    cos: torch.Tensor
    sin: torch.Tensor
    layout: str
    rotary_dim: int


def inv_frequencies(dim: int, base: float) -> tuple[float, ...]:
    """``omega_j = base**(-2j / dim)``, ``j = 0 .. dim/2 - 1``, as Python floats (float64)."""
    return tuple(1.0 / base ** (2 * j / dim) for j in range(dim // 2))


def host_tables(inv_freq: tuple[float, ...], n: int, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``scale * cos(p omega)`` and ``scale * sin(p omega)`` for ``p = 0 .. n-1``: float64 on the host, stored float32."""
    angles = np.arange(n, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)
    return (
        torch.from_numpy((scale * np.cos(angles)).astype(np.float32)),
        torch.from_numpy((scale * np.sin(angles)).astype(np.float32)),
    )


_LIMB = 20  # bits per limb: 3 limbs of 20 bits hold omega / 2 pi to 2**-60 turn


def turn_limbs(inv_freq: tuple[float, ...]) -> list[list[int]]:
    """``omega_j / 2 pi`` (turns per position) as integers times ``2**-60``, in three 20-bit limbs (high first)."""
    turns = [round(w / (2 * math.pi) * 2.0**60) for w in inv_freq]
    mask = (1 << _LIMB) - 1
    return [[(t >> (_LIMB * i)) & mask for t in turns] for i in (2, 1, 0)]


def fixed_point_turns(inv_freq: tuple[float, ...]) -> torch.Tensor:
    """:func:`turn_limbs` as an int64 tensor ``(3, n)``."""
    return torch.tensor(turn_limbs(inv_freq), dtype=torch.int64)


def cos_sin(
    positions: torch.Tensor,
    turns: torch.Tensor,
    inv_freq: torch.Tensor,
    scale: float = 1.0,
    table: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 ``scale * cos/sin(positions * omega)``, shape ``(*positions.shape, n)``.

    ``turns``: :func:`fixed_point_turns` on the device; ``inv_freq``: float32 ``omega``
    (used for the fractional part of float positions only); ``table``: optional
    :func:`host_tables` rows, used for the integer positions they hold (the same values
    as the computation, to float32 rounding).
    """
    p = positions
    frac = None
    if p.is_floating_point():
        k = torch.round(p)
        frac = (p - k).to(torch.float32)[..., None]
        p = k.to(torch.int64)
    k = p.to(torch.int64)[..., None]
    one = 1 << (3 * _LIMB)  # one turn
    # frac(k * t) * 2**60, exactly: each limb product stays below 2**63 for |k| < 2**43
    acc = (
        ((k * turns[0]) % (1 << _LIMB) << (2 * _LIMB))
        + ((k * turns[1]) % (1 << (2 * _LIMB)) << _LIMB)
        + (k * turns[2]) % one
    ) % one
    shift = 3 * _LIMB - 24  # keep 24 bits of the turn, rounded: exact in float32
    t = ((acc + (1 << (shift - 1))) >> shift).to(torch.float32) * 2.0**-24
    if frac is not None:
        t = t + frac * (inv_freq / (2 * math.pi))
    angle = (t - torch.round(t)) * (2 * math.pi)  # in [-pi, pi]
    cos, sin = torch.cos(angle), torch.sin(angle)
    if scale != 1.0:
        cos, sin = cos * scale, sin * scale
    if table is not None and frac is None and table[0].shape[0] > 0:
        n = table[0].shape[0]
        inside = (k >= 0) & (k < n)
        row = p.clamp(0, n - 1)
        cos = torch.where(inside, table[0][row], cos)
        sin = torch.where(inside, table[1][row], sin)
    return cos, sin


def table_view(t: torch.Tensor, ndim: int, seq_axis: int) -> torch.Tensor:
    """Reshape a ``(seq, n)`` or ``(batch, seq, n)`` table to broadcast against an ``ndim`` tensor."""
    shape = [1] * ndim
    shape[seq_axis], shape[-1] = t.shape[-2], t.shape[-1]
    if t.ndim == 3:
        shape[0] = t.shape[0]
    return t.reshape(shape)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, seq_axis: int) -> torch.Tensor:
    """Rotate the first ``2 * cos.shape[-1]`` coordinates of ``x`` by the tables; the rest pass through.

    ``x``: ``(..., seq, ..., head_dim)`` with the sequence on the non-negative axis
    ``seq_axis``; 16-bit inputs are rotated in float32 and cast back at the end.
    ``cos``/``sin``: ``(seq, n)`` or ``(batch, seq, n)``. This is the reference: every
    faster kernel must give the same numbers.
    """
    width = 2 * cos.shape[-1]
    if width < x.shape[-1]:
        return torch.cat([rotate(x[..., :width], cos, sin, layout, seq_axis), x[..., width:]], dim=-1)
    work = x if x.dtype == cos.dtype else x.to(cos.dtype)
    c, s = table_view(cos, x.ndim, seq_axis), table_view(sin, x.ndim, seq_axis)
    if layout == "half":
        x1, x2 = work.chunk(2, dim=-1)
        out = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    else:
        x1, x2 = work[..., 0::2], work[..., 1::2]
        out = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)
    return out.to(x.dtype)
