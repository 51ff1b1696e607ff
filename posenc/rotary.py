"""Rotary position embeddings (RoPE) of Su et al. (2024), with context-extension scalings.

RoPE rotates each pair of coordinates of a query or key vector by the angle
``position * omega_j`` with ``omega_j = base**(-2j / head_dim)``, ``j = 0 .. head_dim/2 - 1``.
After the rotation the dot product of a query at position ``m`` and a key at position
``n`` depends on the positions only through ``m - n``.

Two layouts are in use, and they differ only in which coordinates form a pair:

* ``"half"``: pair ``(j, j + head_dim/2)``, as in GPT-NeoX and Hugging Face
  ``transformers`` (``rotate_half``);
* ``"interleaved"``: pair ``(2j, 2j + 1)``, as in RoFormer, Meta's Llama reference code
  (complex numbers) and torchtune.

A model trained with one layout runs with the other only after its ``W_q`` and ``W_k``
rows are permuted by :func:`rotary_permutation`; mixing them without the permutation
gives wrong scores and no error.

Scalings (context extension), selected by a dict with a ``"type"`` key
(``"rope_type"`` is accepted as a synonym so a Hugging Face ``rope_parameters`` dict can
be passed as is; its ``rope_theta``, if present, must equal ``base``, and a
``partial_rotary_factor`` other than 1 is refused rather than ignored):

* ``{"type": "linear", "factor": s}``: position interpolation (Chen et al. 2023):
  every frequency divided by ``s``.
* ``{"type": "ntk", "factor": s}``: "NTK-aware" scaling (bloc97 2023, described in
  section 3.1 of Peng et al. 2024): the base becomes ``base * s**(d / (d - 2))``.
* ``{"type": "dynamic", "factor": s, "original_max_position_embeddings": L}``: dynamic
  NTK as in ``transformers``: for a call whose largest position is ``p >= L``, the base
  becomes ``base * (s * (p + 1) / L - (s - 1))**(d / (d - 2))``; shorter calls use the
  unscaled frequencies.
* ``{"type": "yarn", "factor": s, "original_max_position_embeddings": L,
  "beta_fast": 32, "beta_slow": 1}``: YaRN (Peng et al. 2024, sections 3.2 to 3.4):
  "NTK-by-parts" interpolation of the frequencies plus the attention temperature: cos
  and sin are multiplied by ``attention_factor``, by default ``0.1 * ln(s) + 1`` (so the
  logits are multiplied by its square), as ``transformers`` does. ``mscale``,
  ``mscale_all_dim``, ``attention_factor`` and ``truncate`` are accepted with the
  meaning they have in ``transformers``.
* ``{"type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
  "original_max_position_embeddings": 8192}``: Llama 3.1 scaling (Dubey et al. 2024):
  wavelengths longer than ``L / low_freq_factor`` are interpolated by ``factor``,
  wavelengths shorter than ``L / high_freq_factor`` are kept, a smooth blend in between.

Precision: angles, cosines and sines are computed in float64 and stored in float32 (or
kept in float64 for float64 inputs); float16 and bfloat16 inputs are rotated in float32
and cast back at the end, so a bf16 query at position 10,000 gets exactly the rotation a
float32 query gets. Positions in float16/bfloat16 are refused: bf16 cannot even
represent the integer 257.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from ._checks import check_choice, check_int, check_positive_float

ROTARY_LAYOUTS = ("half", "interleaved")
SCALING_TYPES = ("linear", "ntk", "dynamic", "yarn", "llama3")

_REQUIRED = {
    "linear": ("factor",),
    "ntk": ("factor",),
    "dynamic": ("factor", "original_max_position_embeddings"),
    "yarn": ("factor", "original_max_position_embeddings"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}
_OPTIONAL = {
    "linear": (),
    "ntk": (),
    "dynamic": (),
    "yarn": ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"),
    "llama3": (),
}
# keys of a Hugging Face rope_parameters dict that carry no scaling information
_IGNORED = ("type", "rope_type", "rope_theta", "partial_rotary_factor")


# ----------------------------------------------------------------------------- checks


def _check_head_dim(head_dim: object) -> int:
    head_dim = check_int("head_dim", head_dim, minimum=2)
    if head_dim % 2:
        raise ValueError(
            f"head_dim must be even (RoPE rotates pairs of coordinates), got {head_dim}"
        )
    return head_dim


def normalize_scaling(scaling: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Validate a ``scaling`` specification and return it as a plain dict (or ``None``).

    Args:
        scaling: ``None`` (plain RoPE) or a mapping with ``"type"`` (or ``"rope_type"``)
            in ``"linear"``, ``"ntk"``, ``"dynamic"``, ``"yarn"``, ``"llama3"`` and the
            parameters listed in the module docstring. ``rope_type="default"`` means
            no scaling.

    Returns:
        A dict with key ``"type"`` and the parameters as floats (``truncate`` as bool,
        the ``original_max_position_embeddings`` as int), defaults filled in.

    Example:
        >>> normalize_scaling({"rope_type": "linear", "factor": 4})
        {'type': 'linear', 'factor': 4.0}
    """
    if scaling is None:
        return None
    if not isinstance(scaling, Mapping):
        raise TypeError(
            f"scaling must be None or a dict such as {{'type': 'linear', 'factor': 4}}, "
            f"got {type(scaling).__name__}"
        )
    partial = scaling.get("partial_rotary_factor")
    if partial is not None and float(partial) != 1.0:
        raise ValueError(
            f"scaling['partial_rotary_factor']={partial!r}: partial RoPE is not supported; rotate the "
            "first head_dim * factor coordinates with RotaryEmbedding(head_dim * factor) instead"
        )
    kind = scaling.get("type", scaling.get("rope_type"))
    if kind == "default":
        return None
    kind = check_choice("scaling['type']", kind, SCALING_TYPES)
    missing = [k for k in _REQUIRED[kind] if scaling.get(k) is None]
    if missing:
        raise ValueError(f"scaling of type {kind!r} needs the key(s) {', '.join(missing)}")
    allowed = set(_REQUIRED[kind]) | set(_OPTIONAL[kind]) | set(_IGNORED)
    unknown = sorted(set(scaling) - allowed)
    if unknown:
        raise ValueError(
            f"scaling of type {kind!r} does not take {', '.join(unknown)}; accepted keys: "
            f"{', '.join(_REQUIRED[kind] + _OPTIONAL[kind])}"
        )
    out: dict[str, Any] = {"type": kind}
    for key in _REQUIRED[kind] + _OPTIONAL[kind]:
        value = scaling.get(key)
        if value is None:
            continue
        if key == "original_max_position_embeddings":
            out[key] = check_int(f"scaling[{key!r}]", value)
        elif key == "truncate":
            if not isinstance(value, bool):
                raise TypeError(f"scaling['truncate'] must be a bool, got {value!r}")
            out[key] = value
        else:
            out[key] = check_positive_float(f"scaling[{key!r}]", value)
    if kind == "yarn":
        out.setdefault("beta_fast", 32.0)
        out.setdefault("beta_slow", 1.0)
        out.setdefault("truncate", True)
    if kind == "llama3" and out["high_freq_factor"] <= out["low_freq_factor"]:
        raise ValueError("scaling['high_freq_factor'] must be larger than scaling['low_freq_factor']")
    if kind in ("linear", "ntk", "dynamic", "llama3") and out["factor"] < 1.0:
        raise ValueError(f"scaling['factor'] must be >= 1 for type {kind!r}, got {out['factor']}")
    return out


def _check_theta(scaling: object, base: float) -> None:
    """A Hugging Face ``rope_parameters`` dict carries the base as ``rope_theta``: it must agree."""
    if isinstance(scaling, Mapping) and scaling.get("rope_theta") is not None:
        if float(scaling["rope_theta"]) != float(base):
            raise ValueError(
                f"scaling['rope_theta']={scaling['rope_theta']!r} differs from base={base!r}; "
                f"pass base={scaling['rope_theta']!r}"
            )


# ------------------------------------------------------------------------ frequencies


def _yarn_attention_factor(sc: Mapping[str, Any]) -> float:
    if "attention_factor" in sc:
        return float(sc["attention_factor"])

    def get_mscale(scale: float, mscale: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    factor = sc["factor"]
    if sc.get("mscale") and sc.get("mscale_all_dim"):
        return get_mscale(factor, sc["mscale"]) / get_mscale(factor, sc["mscale_all_dim"])
    return get_mscale(factor)


def rotary_frequencies(
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: Mapping[str, Any] | None = None,
    seq_len: int | None = None,
) -> np.ndarray:
    """The RoPE angular frequencies ``omega_j`` (radians per position), float64.

    Without scaling ``omega_j = base**(-2j / head_dim)`` for ``j = 0 .. head_dim/2 - 1``,
    the frequencies of :func:`posenc.sinusoidal_frequencies`. With ``scaling`` the
    context-extension rule of the module docstring is applied.

    Args:
        head_dim: the (even) width of a query/key head.
        base: the constant 10000 (Llama 3 uses 500000).
        scaling: ``None`` or a scaling dict, see :func:`normalize_scaling`.
        seq_len: only for ``"dynamic"``: the length ``p + 1`` the frequencies are for.

    Returns:
        Array of shape ``(head_dim // 2,)``.

    Example:
        >>> rotary_frequencies(4)
        array([1.  , 0.01])
        >>> rotary_frequencies(4, scaling={"type": "linear", "factor": 4})
        array([0.25  , 0.0025])
    """
    head_dim = _check_head_dim(head_dim)
    base = check_positive_float("base", base)
    _check_theta(scaling, base)
    sc = normalize_scaling(scaling)
    exponents = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim
    inv_freq = base**-exponents
    if sc is None:
        return inv_freq
    kind, factor = sc["type"], sc["factor"]
    if kind == "linear":
        return inv_freq / factor
    if kind == "ntk":
        return (base * factor ** (head_dim / (head_dim - 2))) ** -exponents
    if kind == "dynamic":
        original = sc["original_max_position_embeddings"]
        n = original if seq_len is None else max(check_int("seq_len", seq_len), original)
        new_base = base * (factor * n / original - (factor - 1)) ** (head_dim / (head_dim - 2))
        return new_base**-exponents
    if kind == "yarn":
        original = sc["original_max_position_embeddings"]

        def correction_dim(n_rotations: float) -> float:
            # the pair index whose wavelength fits n_rotations times in the original context
            return head_dim * math.log(original / (n_rotations * 2 * math.pi)) / (2 * math.log(base))

        low, high = correction_dim(sc["beta_fast"]), correction_dim(sc["beta_slow"])
        if sc["truncate"]:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, head_dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(head_dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
        keep = 1.0 - ramp  # 1: extrapolate (keep the frequency), 0: interpolate (divide by s)
        return inv_freq / factor * (1.0 - keep) + inv_freq * keep
    # llama3
    original = sc["original_max_position_embeddings"]
    low_wavelen = original / sc["low_freq_factor"]
    high_wavelen = original / sc["high_freq_factor"]
    wavelen = 2 * math.pi / inv_freq
    smooth = (original / wavelen - sc["low_freq_factor"]) / (sc["high_freq_factor"] - sc["low_freq_factor"])
    blended = (1.0 - smooth) * inv_freq / factor + smooth * inv_freq
    return np.where(wavelen > low_wavelen, inv_freq / factor, np.where(wavelen < high_wavelen, inv_freq, blended))


def rotary_attention_factor(scaling: Mapping[str, Any] | None) -> float:
    """The factor applied to cos and sin (1 except for YaRN's attention temperature).

    Example:
        >>> round(rotary_attention_factor({"type": "yarn", "factor": 4,
        ...     "original_max_position_embeddings": 2048}), 4)
        1.1386
    """
    sc = normalize_scaling(scaling)
    return _yarn_attention_factor(sc) if sc is not None and sc["type"] == "yarn" else 1.0


def rotary_permutation(head_dim: int, n_heads: int = 1) -> np.ndarray:
    """Row permutation that converts ``W_q``/``W_k`` from the interleaved to the half layout.

    Pair ``(2j, 2j+1)`` of the interleaved layout becomes pair ``(j, j + head_dim/2)``
    of the half layout. For a projection ``W`` of shape ``(n_heads * head_dim, d_model)``
    (``nn.Linear.weight``, heads stacked along the rows), ``W[rotary_permutation(hd, h)]``
    gives in the half layout exactly the scores ``W`` gives in the interleaved layout.
    The inverse (half to interleaved) is ``np.argsort`` of it. This is the permutation
    that Hugging Face's Llama conversion script applies to Meta's checkpoints.

    Example:
        >>> rotary_permutation(6)
        array([0, 2, 4, 1, 3, 5])
        >>> rotary_permutation(4, n_heads=2)
        array([0, 2, 1, 3, 4, 6, 5, 7])
    """
    head_dim = _check_head_dim(head_dim)
    n_heads = check_int("n_heads", n_heads)
    one = np.concatenate([np.arange(0, head_dim, 2), np.arange(1, head_dim, 2)])
    return (one[None, :] + head_dim * np.arange(n_heads)[:, None]).reshape(-1)


# --------------------------------------------------------------------------- tables


def _check_x(x: object, head_dim: int | None = None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., seq, head_dim), got {tuple(x.shape)}")
    if head_dim is not None and x.shape[-1] != head_dim:
        raise ValueError(f"x must have shape (..., seq, {head_dim}), got {tuple(x.shape)}")
    if head_dim is None:
        _check_head_dim(x.shape[-1])
    return x


def _as_position_tensor(positions: object, x: torch.Tensor) -> torch.Tensor:
    """Validate ``positions`` against ``x`` and return them as an int64 or float64 tensor."""
    if isinstance(positions, (bool, int, float)):
        raise TypeError(
            "positions must be a 1-D sequence of length seq (or a 2-D (batch, seq) tensor), "
            f"got the scalar {positions!r} (RotaryEmbedding.forward takes offset= for positions "
            "offset, offset + 1, ...)"
        )
    if not isinstance(positions, torch.Tensor):
        if isinstance(positions, (Sequence, np.ndarray)):
            arr = np.asarray(positions)
            if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)) or arr.dtype == np.float16:
                raise TypeError(f"positions must hold integers or float32/float64 numbers, got dtype {arr.dtype}")
            positions = torch.from_numpy(np.ascontiguousarray(arr))
        else:
            raise TypeError(f"positions must be a tensor or a sequence of numbers, got {type(positions).__name__}")
    p = positions
    if p.dtype in (torch.float16, torch.bfloat16):
        raise TypeError(
            f"positions must be integers or float32/float64, got {p.dtype}: a 16-bit float "
            "cannot represent large positions (bf16 rounds 257 to 256)"
        )
    if p.dtype == torch.bool or p.is_complex():
        raise TypeError(f"positions must be integers or float32/float64, got {p.dtype}")
    seq = x.shape[-2]
    if p.ndim == 1:
        ok = p.shape[0] == seq
    elif p.ndim == 2:
        ok = x.ndim >= 3 and p.shape[1] == seq and p.shape[0] in (1, x.shape[0])
    else:
        ok = False
    if not ok:
        raise ValueError(
            f"positions must have shape (seq,) = ({seq},) or (batch, seq) = "
            f"({x.shape[0] if x.ndim >= 3 else 'batch'}, {seq}) for x of shape {tuple(x.shape)}, "
            f"got {tuple(p.shape)}"
        )
    p = p.to(device=x.device)
    if p.is_floating_point():
        p = p.to(torch.float64)
        if not bool(torch.isfinite(p).all()):
            raise ValueError("positions must be finite")
    else:
        p = p.to(torch.int64)
    return p


def _tables(
    positions: torch.Tensor, inv_freq: np.ndarray, factor: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of ``positions * inv_freq`` (computed in float64), shape ``(*p.shape, hd/2)``."""
    freq = torch.as_tensor(inv_freq, dtype=torch.float64, device=positions.device)
    angles = positions.to(torch.float64)[..., None] * freq
    cos, sin = torch.cos(angles), torch.sin(angles)
    if factor != 1.0:
        cos, sin = cos * factor, sin * factor
    return cos.to(dtype), sin.to(dtype)


def _broadcast_tables(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Reshape a ``(seq, n)`` or ``(batch, seq, n)`` table to broadcast against ``x``."""
    if t.ndim == 3:  # (batch, seq, n): insert the head (and other middle) axes
        t = t.reshape(t.shape[0], *([1] * (x.ndim - 3)), t.shape[1], t.shape[2])
    return t


# --------------------------------------------------------------------------- kernels


def _rotate_interleaved(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rot: torch.Tensor | None = None
) -> torch.Tensor:
    """Complex multiply: pairs (2j, 2j+1) are complex numbers, multiplied by exp(i angle).

    The product is the only full-size allocation; ``view_as_real`` and ``flatten`` are views.
    """
    if rot is None:
        rot = torch.complex(cos, sin)
    try:
        xc = torch.view_as_complex(x.unflatten(-1, (-1, 2)))
    except RuntimeError:  # strides not compatible with a complex view
        xc = torch.view_as_complex(x.contiguous().unflatten(-1, (-1, 2)))
    return torch.view_as_real(xc * _broadcast_tables(rot, x)).flatten(-2)


def _rotate_half(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cos2: torch.Tensor | None = None
) -> torch.Tensor:
    """Half layout: ``out1 = x1 cos - x2 sin``, ``out2 = x2 cos + x1 sin``, one allocation.

    Three passes: ``out = x * [cos | cos]`` (the only allocation), then ``out1 -= x2 * sin``
    and ``out2 += x1 * sin`` in place on the two halves of ``out``, each parallelised by
    torch itself. Hugging Face's ``x * cos + rotate_half(x) * sin`` makes five full-size
    temporaries instead. ``cos2`` is an optional precomputed ``[cos | cos]``.
    """
    half = x.shape[-1] // 2
    if cos2 is None:
        cos2 = torch.cat([cos, cos], dim=-1)
    cos2 = _broadcast_tables(cos2, x)
    sin = _broadcast_tables(sin, x)
    out = torch.mul(x, cos2)
    out[..., :half].addcmul_(x[..., half:], sin, value=-1.0)
    out[..., half:].addcmul_(x[..., :half], sin)
    return out


def _rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, rot: torch.Tensor | None = None
) -> torch.Tensor:
    """Rotate ``x`` (16-bit inputs in float32). ``rot`` is an optional cached table:
    ``cos + i sin`` (interleaved) or ``[cos | cos]`` (half)."""
    work = x if x.dtype in (torch.float32, torch.float64) else x.to(torch.float32)
    if layout == "half":
        out = _rotate_half(work, cos, sin, rot)
    else:
        out = _rotate_interleaved(work, cos, sin, rot)
    return out if out.dtype == x.dtype else out.to(x.dtype)


def _table_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


# ------------------------------------------------------------------------ functional


def apply_rotary(
    x: torch.Tensor,
    positions: torch.Tensor | Sequence[float] | np.ndarray,
    *,
    base: float = 10000.0,
    layout: str = "half",
    scaling: Mapping[str, Any] | None = None,
) -> torch.Tensor:
    """Rotate the pairs of coordinates of ``x`` by ``position * omega_j`` (RoPE, no cache).

    Args:
        x: queries or keys, ``(..., seq, head_dim)`` with an even ``head_dim``, any float
            dtype (16-bit inputs are rotated in float32 and cast back).
        positions: ``(seq,)`` positions, or ``(batch, seq)`` for ``x`` of shape
            ``(batch, ..., seq, head_dim)``; integers or float32/float64 (fractional and
            negative positions are allowed).
        base: the RoPE base (10000 in RoFormer and Llama 2, 500000 in Llama 3).
        layout: ``"half"`` (Hugging Face, GPT-NeoX) or ``"interleaved"`` (RoFormer,
            Meta, torchtune).
        scaling: ``None`` or a context-extension dict, see :class:`RotaryEmbedding`.

    Returns:
        A new tensor of the shape and dtype of ``x``.

    Example:
        >>> q = torch.randn(2, 4, 8, 16)
        >>> apply_rotary(q, torch.arange(8)).shape
        torch.Size([2, 4, 8, 16])
        >>> bool(torch.allclose(apply_rotary(q, torch.zeros(8, dtype=torch.long)), q))
        True
    """
    x = _check_x(x)
    layout = check_choice("layout", layout, ROTARY_LAYOUTS)
    _check_theta(scaling, check_positive_float("base", base))
    sc = normalize_scaling(scaling)
    pos = _as_position_tensor(positions, x)
    seq_len = None
    if sc is not None and sc["type"] == "dynamic":
        seq_len = int(math.floor(float(pos.max()))) + 1 if pos.numel() else None
    inv_freq = rotary_frequencies(x.shape[-1], base=base, scaling=sc, seq_len=seq_len)
    cos, sin = _tables(pos, inv_freq, rotary_attention_factor(sc), _table_dtype(x))
    return _rotate(x, cos, sin, layout)


# ---------------------------------------------------------------------------- module


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE) as a module with a cached cos/sin table.

    ``forward(x)`` rotates queries or keys ``x`` of shape ``(..., seq, head_dim)`` by
    their positions; apply it to ``q`` and ``k`` (never to ``v``) after the projections
    and the split into heads. The score ``q_m . k_n`` then depends on ``m - n`` only.

    Args:
        head_dim: width of one head; must be even.
        base: the RoPE base ``theta`` (10000 in RoFormer and Llama 2, 500000 in Llama 3).
        layout: ``"half"`` pairs ``(j, j + head_dim/2)`` (GPT-NeoX, Hugging Face);
            ``"interleaved"`` pairs ``(2j, 2j + 1)`` (RoFormer, Meta, torchtune).
        scaling: ``None`` or a dict selecting context extension:
            ``{"type": "linear", "factor": s}`` (position interpolation, Chen et al. 2023),
            ``{"type": "ntk", "factor": s}`` (NTK-aware base change),
            ``{"type": "dynamic", "factor": s, "original_max_position_embeddings": L}``
            (dynamic NTK as in ``transformers``),
            ``{"type": "yarn", "factor": s, "original_max_position_embeddings": L,
            "beta_fast": 32, "beta_slow": 1}`` (Peng et al. 2024; cos and sin carry the
            attention factor ``0.1 ln s + 1``),
            ``{"type": "llama3", "factor": 8, "low_freq_factor": 1,
            "high_freq_factor": 4, "original_max_position_embeddings": 8192}``
            (Llama 3.1). See the module docstring for the formulas.
        max_len: number of positions cached at construction; the cache grows on demand.

    Shapes:
        ``forward(x, positions=None, offset=0)``: ``x`` is ``(..., seq, head_dim)``
        (typically ``(batch, heads, seq, head_dim)``); ``positions`` is ``(seq,)`` or
        ``(batch, seq)`` and defaults to ``offset + arange(seq)`` (``offset`` is the
        number of tokens already in the key/value cache during decoding). Returns a new
        tensor of the shape and dtype of ``x``.

    The cos/sin tables are non-persistent float32 buffers (not in ``state_dict``). If a
    cast such as ``module.half()`` lowers their precision they are rebuilt in float32 at
    the next call, so angles are never formed in 16-bit floats. With ``"dynamic"``
    scaling the frequencies depend on the largest position of each call (computed
    afresh, not cached; ``transformers`` instead keeps the grown frequencies between
    calls).

    Example:
        >>> rope = RotaryEmbedding(16)
        >>> q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
        >>> rope(q).shape
        torch.Size([1, 2, 5, 16])
        >>> step = rope(q[:, :, 4:], offset=4)  # decoding the 5th token
        >>> bool(torch.allclose(step, rope(q)[:, :, 4:], atol=1e-6))
        True
    """

    cos_cached: torch.Tensor
    sin_cached: torch.Tensor
    rot_cached: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        layout: str = "half",
        scaling: Mapping[str, Any] | None = None,
        max_len: int = 2048,
    ) -> None:
        super().__init__()
        self.head_dim = _check_head_dim(head_dim)
        self.base = check_positive_float("base", base)
        self.layout = check_choice("layout", layout, ROTARY_LAYOUTS)
        _check_theta(scaling, self.base)
        self.scaling = normalize_scaling(scaling)
        self.attention_factor = rotary_attention_factor(self.scaling)
        # frequencies as a float64 numpy array: not a buffer, so module casts never touch them
        self.inv_freq = rotary_frequencies(self.head_dim, base=self.base, scaling=self.scaling)
        max_len = check_int("max_len", max_len)
        self.register_buffer("cos_cached", torch.empty(0, self.head_dim // 2), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0, self.head_dim // 2), persistent=False)
        # the table the kernel of the layout reads: cos + i sin, or [cos | cos]
        self.register_buffer("rot_cached", torch.empty(0), persistent=False)
        self._build_cache(max_len, torch.device("cpu"))

    def _build_cache(self, length: int, device: torch.device) -> None:
        pos = torch.arange(length, dtype=torch.float64, device=device)
        cos, sin = _tables(pos, self.inv_freq, self.attention_factor, torch.float32)
        self.cos_cached, self.sin_cached = cos, sin
        self.rot_cached = self._rotation_table(cos, sin)

    def _rotation_table(self, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        if self.layout == "interleaved":
            return torch.complex(cos, sin)
        return torch.cat([cos, cos], dim=-1)

    def _cached(self, length: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        if (
            self.cos_cached.shape[0] < length
            or self.cos_cached.dtype != torch.float32
            or self.cos_cached.device != device
        ):
            n = max(length, self.cos_cached.shape[0])
            self._build_cache(1 << max(n - 1, 1).bit_length(), device)
        return self.cos_cached, self.sin_cached

    def _lookup(
        self, x: torch.Tensor, positions: object, offset: int
    ) -> tuple[torch.Tensor, torch.Tensor, slice | torch.Tensor | None]:
        """cos, sin, and the index into the cache they came from (``None`` if computed afresh)."""
        x = _check_x(x, self.head_dim)
        offset = check_int("offset", offset, minimum=0)
        seq = x.shape[-2]
        dtype = _table_dtype(x)
        if positions is not None and offset != 0:
            raise ValueError("pass either positions or offset, not both (offset is added only to the default positions)")
        dynamic = self.scaling is not None and self.scaling["type"] == "dynamic"
        if positions is None:
            if dtype == torch.float32 and not (
                dynamic and offset + seq > self.scaling["original_max_position_embeddings"]
            ):
                cos, sin = self._cached(offset + seq, x.device)
                index = slice(offset, offset + seq)
                return cos[index], sin[index], index
            pos = torch.arange(offset, offset + seq, dtype=torch.float64, device=x.device)
        else:
            pos = _as_position_tensor(positions, x)
            if dtype == torch.float32 and not dynamic and not pos.is_floating_point() and pos.numel():
                lo, hi = int(pos.min()), int(pos.max())
                if lo >= 0:
                    cos, sin = self._cached(hi + 1, x.device)
                    return cos[pos], sin[pos], pos
        inv_freq = self.inv_freq
        if dynamic and pos.numel():
            seq_len = int(math.floor(float(pos.max()))) + 1
            inv_freq = rotary_frequencies(self.head_dim, base=self.base, scaling=self.scaling, seq_len=seq_len)
        cos, sin = _tables(pos, inv_freq, self.attention_factor, dtype)
        return cos, sin, None

    def tables(
        self, x: torch.Tensor, positions: object = None, offset: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The cos and sin tables ``forward`` uses for ``x``: ``(seq, hd/2)`` or ``(batch, seq, hd/2)``.

        Values include YaRN's attention factor. Float32, or float64 for float64 ``x``.
        """
        cos, sin, _ = self._lookup(x, positions, offset)
        return cos, sin

    def forward(self, x: torch.Tensor, positions: object = None, offset: int = 0) -> torch.Tensor:
        cos, sin, index = self._lookup(x, positions, offset)
        rotation = None
        if index is not None:
            if (
                self.rot_cached.ndim != 2
                or self.rot_cached.shape[0] != self.cos_cached.shape[0]
                or self.rot_cached.device != x.device
                or self.rot_cached.dtype not in (torch.complex64, torch.float32)
            ):
                self.rot_cached = self._rotation_table(self.cos_cached, self.sin_cached)
            rotation = self.rot_cached[index]
        return _rotate(x, cos, sin, self.layout, rotation)

    def extra_repr(self) -> str:
        s = f"head_dim={self.head_dim}, base={self.base:g}, layout={self.layout!r}"
        return s + (f", scaling={self.scaling}" if self.scaling else "")
