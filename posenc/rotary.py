"""Rotary position embeddings: the names of the book's chapter 4, on top of :mod:`posenc.rope`.

:mod:`posenc.rope` holds the implementation (the file to copy is
:mod:`posenc.rope.core`). This module keeps the functions that work with scaling dicts,
as the chapters write them, and the weight permutation between the two layouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ._checks import check_int, check_positive_float
from .rope._checks import check_head_dim
from .rope import RotaryEmbedding, RotaryTables, apply_rotary, apply_rotary_tables
from .rope import frequencies as _frequencies
from .rope.core import LAYOUTS as ROTARY_LAYOUTS
from .rope.scaling import SCALINGS, as_dict, from_hf
from .sinusoidal import layout_permutation

__all__ = [
    "ROTARY_LAYOUTS",
    "SCALING_TYPES",
    "RotaryEmbedding",
    "RotaryTables",
    "apply_rotary",
    "apply_rotary_tables",
    "normalize_scaling",
    "rotary_attention_factor",
    "rotary_frequencies",
    "rotary_permutation",
]

SCALING_TYPES = tuple(SCALINGS)


def normalize_scaling(
    scaling: Mapping[str, Any] | None, *, max_position_embeddings: int | None = None
) -> dict[str, Any] | None:
    """Validate a scaling dict and return it as a plain dict with its defaults (or ``None``).

    ``rope_theta`` and ``partial_rotary_factor`` are left out (they are the base and the
    rotated width, see :class:`RotaryEmbedding`), except for ``"proportional"``.

    Example:
        >>> normalize_scaling({"rope_type": "linear", "factor": 4})
        {'type': 'linear', 'factor': 4.0}
        >>> normalize_scaling({"rope_type": "dynamic", "factor": 2}, max_position_embeddings=4096)
        {'type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 4096}
    """
    if type(scaling) in SCALINGS.values():
        return as_dict(scaling)
    return as_dict(from_hf(scaling, max_position_embeddings=max_position_embeddings)[2])


def rotary_frequencies(
    head_dim: int,
    *,
    base: float | None = None,
    scaling: Any = None,
    seq_len: int | None = None,
    max_position_embeddings: int | None = None,
) -> np.ndarray:
    """The RoPE angular frequencies ``omega_j`` (radians per position), float64.

    ``base**(-2j / d)`` without scaling (bit-identical to
    :func:`posenc.sinusoidal_frequencies`), else the scaling's formula; ``seq_len`` is
    the length of a ``"dynamic"`` (or ``"longrope"``) call. A ``partial_rotary_factor``
    in a Hugging Face dict gives the frequencies of the rotated width.

    Example:
        >>> rotary_frequencies(4)
        array([1.  , 0.01])
        >>> rotary_frequencies(4, scaling={"type": "linear", "factor": 4})
        array([0.25  , 0.0025])
    """
    return _frequencies(head_dim, base=base, scaling=scaling, max_position_embeddings=max_position_embeddings, seq_len=seq_len)


def rotary_attention_factor(scaling: Any, *, head_dim: int = 128, base: float = 10000.0) -> float:
    """The factor on cos and sin (1 except for YaRN's and LongRoPE's attention scaling).

    Example:
        >>> round(rotary_attention_factor({"type": "yarn", "factor": 4,
        ...     "original_max_position_embeddings": 2048}), 4)
        1.1386
    """
    check_head_dim("head_dim", head_dim)
    check_positive_float("base", base)
    if scaling is not None and not isinstance(scaling, (Mapping, *SCALINGS.values())):
        raise TypeError(
            "scaling must be None, a Hugging Face dict or a dataclass of posenc.rope.scaling, "
            f"got {type(scaling).__name__}"
        )
    sc = from_hf(scaling)[2] if scaling is None or isinstance(scaling, Mapping) else scaling
    return 1.0 if sc is None else float(sc.attention_scaling())


def rotary_permutation(head_dim: int, n_heads: int = 1) -> np.ndarray:
    """Row permutation that converts ``W_q``/``W_k`` from the interleaved to the half layout.

    Pair ``(2j, 2j+1)`` of the interleaved layout becomes pair ``(j, j + head_dim/2)``
    of the half layout: per head, :func:`posenc.layout_permutation` (even coordinates
    first, then odd ones). For a projection ``W`` of shape ``(n_heads * head_dim,
    d_model)``, ``W[rotary_permutation(hd, h)]`` gives in the half layout exactly the
    scores ``W`` gives in the interleaved layout; ``np.argsort`` of it is the inverse.
    This is the permutation Hugging Face's Llama conversion script applies to Meta's
    checkpoints.

    Example:
        >>> rotary_permutation(6)
        array([0, 2, 4, 1, 3, 5])
        >>> rotary_permutation(4, n_heads=2)
        array([0, 2, 1, 3, 4, 6, 5, 7])
    """
    head_dim = check_head_dim("head_dim", head_dim)
    if head_dim % 2:
        raise ValueError(f"head_dim must be even (RoPE rotates pairs of coordinates), got {head_dim}")
    n_heads = check_int("n_heads", n_heads)
    if n_heads * head_dim > 1 << 26:
        raise ValueError(f"n_heads * head_dim must be at most {1 << 26}, got {n_heads * head_dim}")
    one = layout_permutation(head_dim)
    return (one[None, :] + head_dim * np.arange(n_heads)[:, None]).reshape(-1)
