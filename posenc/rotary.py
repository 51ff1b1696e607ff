"""Rotary position embeddings (RoPE) of Su et al. (2024), with context-extension scalings.

RoPE rotates each pair of coordinates of a query or key vector by the angle
``position * omega_j`` with ``omega_j = base**(-2j / d)``, ``j = 0 .. d/2 - 1``, where
``d`` is the number of rotated coordinates (the head width, or ``rotary_dim`` for partial
rotary). After the rotation the dot product of a query at position ``m`` and a key at
position ``n`` depends on the positions only through ``m - n``.

Two layouts are in use, and they differ only in which coordinates form a pair:

* ``"half"``: pair ``(j, j + d/2)``, as in GPT-NeoX and Hugging Face ``transformers``
  (``rotate_half``);
* ``"interleaved"``: pair ``(2j, 2j + 1)``, as in RoFormer, Meta's Llama reference code
  (complex numbers) and torchtune.

A model trained with one layout runs with the other only after its ``W_q`` and ``W_k``
rows are permuted by :func:`rotary_permutation`; mixing them without the permutation
gives wrong scores and no error.

Partial rotary (GPT-NeoX, Phi, GLM): only the first ``rotary_dim`` coordinates of each
head are rotated, with the frequencies of a ``rotary_dim``-wide head; the others pass
through unchanged. Hugging Face writes it ``partial_rotary_factor`` (``rotary_dim =
int(head_dim * partial_rotary_factor)``), accepted here as an argument or in the dict.

Scalings (context extension) are selected by a dict with a ``"type"`` key
(``"rope_type"`` is accepted as a synonym so a Hugging Face ``rope_parameters`` dict can
be passed as is; its ``rope_theta``, if present, must equal ``base``). Each type is one
function in the registry :data:`ROTARY_SCALINGS` that returns the frequencies and the
attention factor, as ``transformers`` organises its ``ROPE_INIT_FUNCTIONS``:

* ``{"type": "linear", "factor": s}``: position interpolation (Chen et al. 2023):
  every frequency divided by ``s``.
* ``{"type": "ntk", "factor": s}``: "NTK-aware" scaling (bloc97 2023, described in
  section 3.1 of Peng et al. 2024): the base becomes ``base * s**(d / (d - 2))``.
* ``{"type": "dynamic", "factor": s, "original_max_position_embeddings": L}``: dynamic
  NTK as in ``transformers``: for a call whose largest position is ``p >= L``, the base
  becomes ``base * (s * (p + 1) / L - (s - 1))**(d / (d - 2))``; shorter calls use the
  unscaled frequencies. ``transformers`` takes ``L`` from the model's
  ``max_position_embeddings``: pass ``max_position_embeddings=L`` with such a dict.
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

Precision: frequencies are float64 (without scaling bit-identical to
:func:`posenc.sinusoidal_frequencies`); angles, cosines and sines are computed in float64
and stored in float32 (or kept in float64 for float64 inputs); float16 and bfloat16
inputs are rotated in float32 and cast back at the end, so a bf16 query at position
10,000 gets exactly the rotation a float32 query gets. Positions in float16/bfloat16 are
refused: bf16 cannot even represent the integer 257.

Engineering: the module's ``forward`` has no host-device synchronisation (no ``.item()``
and no branch on the values of position ids), so it runs under
``torch.compile(fullgraph=True)``, ``torch.export`` and CUDA graphs. Values of position
ids (finiteness) are checked where that is free, on CPU tensors in eager mode, and on
other devices only with ``debug=True``. ``cos, sin = rope.tables(position_ids)`` computes
the tables once per forward pass and :func:`apply_rotary_tables` applies them to the
queries and keys of every layer. On CUDA, when Triton is installed, the half layout runs
as one fused kernel (one read and one write of ``x``, float32 arithmetic in registers);
the interleaved layout's eager kernel is a single complex multiplication.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from ._checks import check_choice, check_int, check_positive_float
from .sinusoidal import layout_permutation, sinusoidal_frequencies

ROTARY_LAYOUTS = ("half", "interleaved")
MAX_HEAD_DIM = 1 << 16  # wider heads are refused with a clear error, not a MemoryError
MAX_TABLE_BYTES = 1 << 31  # the cos/sin cache a module may keep (2 GiB)

# ------------------------------------------------------------------ scaling registry
#
# One function per scaling type. Each takes (dim, base, params, seq_len), where ``dim``
# is the number of rotated coordinates and ``params`` a dict from normalize_scaling, and
# returns (inverse frequencies as a float64 array of shape (dim // 2,), attention factor).


def _default_scaling(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[np.ndarray, float]:
    """Plain RoPE: ``base**(-2j/dim)``, bit-identical to :func:`posenc.sinusoidal_frequencies`."""
    return sinusoidal_frequencies(dim, base=base), 1.0


def _linear_scaling(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[np.ndarray, float]:
    """Position interpolation (Chen et al. 2023): every frequency divided by ``factor``."""
    return sinusoidal_frequencies(dim, base=base) / params["factor"], 1.0


def _ntk_base(dim: int, base: float, factor: float) -> float:
    return base * factor ** (dim / (dim - 2))


def _ntk_scaling(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[np.ndarray, float]:
    """NTK-aware (bloc97 2023): the base becomes ``base * factor**(dim / (dim - 2))``."""
    return sinusoidal_frequencies(dim, base=_ntk_base(dim, base, params["factor"])), 1.0


def _dynamic_scaling(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[np.ndarray, float]:
    """Dynamic NTK (``transformers``): the NTK base for the length ``max(seq_len, L)``."""
    original = params["original_max_position_embeddings"]
    n = original if seq_len is None else max(seq_len, original)
    factor = params["factor"] * n / original - (params["factor"] - 1)
    return sinusoidal_frequencies(dim, base=_ntk_base(dim, base, factor)), 1.0


def _yarn_attention_factor(params: Mapping[str, Any]) -> float:
    if "attention_factor" in params:
        return float(params["attention_factor"])

    def get_mscale(scale: float, mscale: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    factor = params["factor"]
    if params.get("mscale") and params.get("mscale_all_dim"):
        return get_mscale(factor, params["mscale"]) / get_mscale(factor, params["mscale_all_dim"])
    return get_mscale(factor)


def _yarn_scaling(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[np.ndarray, float]:
    """YaRN (Peng et al. 2024): NTK-by-parts interpolation and the attention temperature."""
    original, factor = params["original_max_position_embeddings"], params["factor"]

    def correction_dim(n_rotations: float) -> float:
        # the pair index whose wavelength fits n_rotations times in the original context
        return dim * math.log(original / (n_rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(params["beta_fast"]), correction_dim(params["beta_slow"])
    if params["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    keep = 1.0 - ramp  # 1: extrapolate (keep the frequency), 0: interpolate (divide by s)
    inv_freq = sinusoidal_frequencies(dim, base=base)
    return inv_freq / factor * (1.0 - keep) + inv_freq * keep, _yarn_attention_factor(params)


def _llama3_scaling(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[np.ndarray, float]:
    """Llama 3.1 (Dubey et al. 2024): interpolate long wavelengths, keep short ones, blend between."""
    inv_freq = sinusoidal_frequencies(dim, base=base)
    original, factor = params["original_max_position_embeddings"], params["factor"]
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    wavelen = 2 * math.pi / inv_freq
    smooth = (original / wavelen - low) / (high - low)
    blended = (1.0 - smooth) * inv_freq / factor + smooth * inv_freq
    return (
        np.where(wavelen > original / low, inv_freq / factor, np.where(wavelen < original / high, inv_freq, blended)),
        1.0,
    )


_RotaryScaling = Callable[[int, float, Mapping[str, Any], "int | None"], "tuple[np.ndarray, float]"]

# The scaling functions by type: ROTARY_SCALINGS[kind](dim, base, params, seq_len)
# returns (inv_freq, attention_factor); "default" is plain RoPE.
ROTARY_SCALINGS: dict[str, _RotaryScaling] = {
    "default": _default_scaling,
    "linear": _linear_scaling,
    "ntk": _ntk_scaling,
    "dynamic": _dynamic_scaling,
    "yarn": _yarn_scaling,
    "llama3": _llama3_scaling,
}
SCALING_TYPES = tuple(k for k in ROTARY_SCALINGS if k != "default")

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
# keys of a Hugging Face rope_parameters dict that are not scaling parameters
_IGNORED = ("type", "rope_type", "rope_theta", "partial_rotary_factor")
# scalings whose base change base * s**(d/(d-2)) needs at least 4 rotated coordinates
_NEEDS_DIM_4 = ("ntk", "dynamic")


# ----------------------------------------------------------------------------- checks


def _compiling() -> bool:
    is_compiling = getattr(torch.compiler, "is_compiling", None)
    return bool(is_compiling()) if is_compiling is not None else False


def _check_head_dim(head_dim: object, name: str = "head_dim") -> int:
    head_dim = check_int(name, head_dim, minimum=2)
    if head_dim > MAX_HEAD_DIM:
        raise ValueError(f"{name} must be at most {MAX_HEAD_DIM}, got {head_dim}")
    return head_dim


def _check_even(width: int, name: str) -> int:
    if width % 2:
        raise ValueError(f"{name} must be even (RoPE rotates pairs of coordinates), got {width}")
    return width


def _check_base(base: object) -> float:
    base = check_positive_float("base", base)
    if base <= 1.0:
        raise ValueError(f"base must be a finite number > 1 (frequencies base**(-2j/d) must decrease), got {base}")
    return base


def _check_factor_value(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number in (0, 1], got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not (0.0 < value <= 1.0):
        raise ValueError(f"{name} must be a number in (0, 1], got {value}")
    return value


def _rotary_width(
    head_dim: int,
    rotary_dim: object = None,
    partial_rotary_factor: object = None,
    scaling: object = None,
) -> int:
    """The number of rotated coordinates: ``rotary_dim``, ``int(head_dim * factor)`` or ``head_dim``."""
    factor = None if partial_rotary_factor is None else _check_factor_value("partial_rotary_factor", partial_rotary_factor)
    if isinstance(scaling, Mapping) and scaling.get("partial_rotary_factor") is not None:
        in_dict = _check_factor_value("scaling['partial_rotary_factor']", scaling["partial_rotary_factor"])
        if factor is not None and factor != in_dict:
            raise ValueError(
                f"partial_rotary_factor={factor} differs from scaling['partial_rotary_factor']={in_dict}; pass one"
            )
        factor = in_dict
    width = head_dim
    if factor is not None:
        width = int(head_dim * factor)  # as transformers computes it
        if width < 2 or width % 2:
            raise ValueError(
                f"partial_rotary_factor={factor} gives int(head_dim * factor) = {width} rotated coordinates for "
                f"head_dim={head_dim}; RoPE needs an even number >= 2"
            )
    if rotary_dim is not None:
        rotary_dim = check_int("rotary_dim", rotary_dim, minimum=2)
        if factor is not None and rotary_dim != width:
            raise ValueError(
                f"rotary_dim={rotary_dim} differs from int(head_dim * partial_rotary_factor) = {width}; pass one"
            )
        if rotary_dim > head_dim:
            raise ValueError(f"rotary_dim must be at most head_dim={head_dim}, got {rotary_dim}")
        return _check_even(rotary_dim, "rotary_dim")
    return _check_even(width, "head_dim" if width == head_dim else "rotary_dim")


def normalize_scaling(
    scaling: Mapping[str, Any] | None, *, max_position_embeddings: int | None = None
) -> dict[str, Any] | None:
    """Validate a ``scaling`` specification and return it as a plain dict (or ``None``).

    Args:
        scaling: ``None`` (plain RoPE) or a mapping with ``"type"`` (or ``"rope_type"``)
            in ``"linear"``, ``"ntk"``, ``"dynamic"``, ``"yarn"``, ``"llama3"`` and the
            parameters listed in the module docstring. ``rope_type="default"`` means
            no scaling. ``rope_theta`` and ``partial_rotary_factor`` are accepted and
            left out of the result (they are the base and the rotated width, not scaling
            parameters; see :class:`RotaryEmbedding`).
        max_position_embeddings: the model's maximum length, as in a Hugging Face
            config: it fills a missing ``original_max_position_embeddings`` (which is
            where ``transformers`` takes the length of ``"dynamic"``, ``"yarn"`` and
            ``"llama3"`` from).

    Returns:
        A dict with key ``"type"`` and the parameters as floats (``truncate`` as bool,
        the ``original_max_position_embeddings`` as int), defaults filled in.

    Example:
        >>> normalize_scaling({"rope_type": "linear", "factor": 4})
        {'type': 'linear', 'factor': 4.0}
        >>> normalize_scaling({"rope_type": "dynamic", "factor": 2}, max_position_embeddings=4096)
        {'type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 4096}
    """
    if max_position_embeddings is not None:
        max_position_embeddings = check_int("max_position_embeddings", max_position_embeddings)
    if scaling is None:
        return None
    if not isinstance(scaling, Mapping):
        raise TypeError(
            f"scaling must be None or a dict such as {{'type': 'linear', 'factor': 4}}, "
            f"got {type(scaling).__name__}"
        )
    if scaling.get("partial_rotary_factor") is not None:
        _check_factor_value("scaling['partial_rotary_factor']", scaling["partial_rotary_factor"])
    kind, rope_type = scaling.get("type"), scaling.get("rope_type")
    if kind is not None and rope_type is not None and kind != rope_type:
        raise ValueError(f"scaling['type']={kind!r} and scaling['rope_type']={rope_type!r} differ; pass one")
    kind = rope_type if kind is None else kind
    if kind == "default":
        unknown = sorted(set(map(str, scaling)) - set(_IGNORED))
        if unknown:
            raise ValueError(f"scaling of type 'default' does not take {', '.join(unknown)}")
        return None
    kind = check_choice("scaling['type']", kind, SCALING_TYPES)
    params = {k: v for k, v in scaling.items() if v is not None}
    if "original_max_position_embeddings" in _REQUIRED[kind] and max_position_embeddings is not None:
        params.setdefault("original_max_position_embeddings", max_position_embeddings)
    missing = [k for k in _REQUIRED[kind] if k not in params]
    if missing:
        hint = (
            "; transformers takes it from the model config's max_position_embeddings: pass "
            "max_position_embeddings=<the model's maximum length>"
            if missing == ["original_max_position_embeddings"]
            else ""
        )
        raise ValueError(f"scaling of type {kind!r} needs the key(s) {', '.join(missing)}{hint}")
    allowed = set(_REQUIRED[kind]) | set(_OPTIONAL[kind]) | set(_IGNORED)
    unknown = sorted(set(map(str, params)) - allowed)
    if unknown:
        raise ValueError(
            f"scaling of type {kind!r} does not take {', '.join(unknown)}; accepted keys: "
            f"{', '.join(_REQUIRED[kind] + _OPTIONAL[kind])}"
        )
    out: dict[str, Any] = {"type": kind}
    for key in _REQUIRED[kind] + _OPTIONAL[kind]:
        if key not in params:
            continue
        value = params[key]
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
        theta = scaling["rope_theta"]
        if isinstance(theta, bool) or not isinstance(theta, numbers.Real):
            raise TypeError(f"scaling['rope_theta'] must be a number (the base), got {theta!r}")
        if float(theta) != float(base):
            raise ValueError(
                f"scaling['rope_theta']={theta!r} differs from base={base!r}; pass base={theta!r}"
            )


def _check_scaling_width(sc: Mapping[str, Any] | None, width: int) -> None:
    if sc is not None and sc["type"] in _NEEDS_DIM_4 and width < 4:
        raise ValueError(
            f"scaling of type {sc['type']!r} needs at least 4 rotated coordinates (its base change "
            f"base * s**(d/(d-2)) is undefined for d=2), got {width}"
        )


# ------------------------------------------------------------------------ frequencies


def rotary_frequencies(
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: Mapping[str, Any] | None = None,
    seq_len: int | None = None,
    max_position_embeddings: int | None = None,
) -> np.ndarray:
    """The RoPE angular frequencies ``omega_j`` (radians per position), float64.

    Without scaling ``omega_j = base**(-2j / head_dim)`` for ``j = 0 .. head_dim/2 - 1``,
    bit-identical to :func:`posenc.sinusoidal_frequencies`. With ``scaling`` the
    context-extension rule of its type (:data:`ROTARY_SCALINGS`) is applied. A
    ``partial_rotary_factor`` in ``scaling`` means, as in ``transformers``, that only
    ``int(head_dim * factor)`` coordinates rotate: the frequencies are those of that width.

    Args:
        head_dim: the width of a query/key head (even unless partial).
        base: the constant 10000 (Llama 3 uses 500000); must be > 1.
        scaling: ``None`` or a scaling dict, see :func:`normalize_scaling`.
        seq_len: only for ``"dynamic"``: the length ``p + 1`` the frequencies are for.
        max_position_embeddings: fills a missing ``original_max_position_embeddings``.

    Returns:
        Array of shape ``(rotated width // 2,)``.

    Example:
        >>> rotary_frequencies(4)
        array([1.  , 0.01])
        >>> rotary_frequencies(4, scaling={"type": "linear", "factor": 4})
        array([0.25  , 0.0025])
    """
    head_dim = _check_head_dim(head_dim)
    base = _check_base(base)
    _check_theta(scaling, base)
    width = _rotary_width(head_dim, scaling=scaling)
    sc = normalize_scaling(scaling, max_position_embeddings=max_position_embeddings)
    _check_scaling_width(sc, width)
    if seq_len is not None:
        seq_len = check_int("seq_len", seq_len)
    inv_freq, _ = ROTARY_SCALINGS["default" if sc is None else sc["type"]](width, base, sc or {}, seq_len)
    return inv_freq


def rotary_attention_factor(
    scaling: Mapping[str, Any] | None, *, head_dim: int = 128, base: float = 10000.0
) -> float:
    """The factor applied to cos and sin (1 except for YaRN's attention temperature).

    It is the second value the scaling's function in :data:`ROTARY_SCALINGS` returns;
    for the registered types it depends on neither ``head_dim`` nor ``base``.

    Example:
        >>> round(rotary_attention_factor({"type": "yarn", "factor": 4,
        ...     "original_max_position_embeddings": 2048}), 4)
        1.1386
    """
    head_dim = _check_head_dim(head_dim)
    base = _check_base(base)
    sc = normalize_scaling(scaling)
    if sc is None:
        return 1.0
    return float(ROTARY_SCALINGS[sc["type"]](max(_check_even(head_dim, "head_dim"), 4), base, sc, None)[1])


def rotary_permutation(head_dim: int, n_heads: int = 1) -> np.ndarray:
    """Row permutation that converts ``W_q``/``W_k`` from the interleaved to the half layout.

    Pair ``(2j, 2j+1)`` of the interleaved layout becomes pair ``(j, j + head_dim/2)``
    of the half layout: per head, the permutation of
    :func:`posenc.layout_permutation` (even coordinates first, then odd ones). For a
    projection ``W`` of shape ``(n_heads * head_dim, d_model)`` (``nn.Linear.weight``,
    heads stacked along the rows), ``W[rotary_permutation(hd, h)]`` gives in the half
    layout exactly the scores ``W`` gives in the interleaved layout. The inverse (half to
    interleaved) is ``np.argsort`` of it. This is the permutation that Hugging Face's
    Llama conversion script applies to Meta's checkpoints.

    Example:
        >>> rotary_permutation(6)
        array([0, 2, 4, 1, 3, 5])
        >>> rotary_permutation(4, n_heads=2)
        array([0, 2, 1, 3, 4, 6, 5, 7])
    """
    head_dim = _check_even(_check_head_dim(head_dim), "head_dim")
    n_heads = check_int("n_heads", n_heads)
    if n_heads * head_dim > 1 << 26:
        raise ValueError(f"n_heads * head_dim must be at most {1 << 26}, got {n_heads * head_dim}")
    one = layout_permutation(head_dim)
    return (one[None, :] + head_dim * np.arange(n_heads)[:, None]).reshape(-1)


# ------------------------------------------------------------------ inputs and tables


def _check_x(x: object, name: str = "x") -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor (float16/bfloat16/float32/float64), got dtype {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"{name} must have shape (..., seq, head_dim), got {tuple(x.shape)}")
    return x


def _check_seq_dim(seq_dim: object) -> int:
    if isinstance(seq_dim, bool) or not isinstance(seq_dim, numbers.Integral):
        raise TypeError(f"seq_dim must be an integer axis such as -2 or 1, got {seq_dim!r}")
    seq_dim = int(seq_dim)
    if seq_dim == -1:
        raise ValueError("seq_dim must not be -1: the last axis holds the head's coordinates")
    return seq_dim


def _seq_axis(x: torch.Tensor, seq_dim: int, name: str = "x") -> int:
    """The non-negative sequence axis of ``x``: any axis but the last."""
    axis = seq_dim + x.ndim if seq_dim < 0 else seq_dim
    if not 0 <= axis < x.ndim - 1:
        raise ValueError(
            f"seq_dim={seq_dim} is not a sequence axis of {name} with shape {tuple(x.shape)}: "
            f"accepted {-x.ndim} .. -2 or 0 .. {x.ndim - 2}"
        )
    return axis


def _as_positions(positions: object, device: torch.device | None) -> torch.Tensor:
    """Type, dtype, rank and device of ``positions`` (never their values: no synchronisation)."""
    if isinstance(positions, (bool, numbers.Number)):
        raise TypeError(
            "positions must be a 1-D sequence of length seq (or a 2-D (batch, seq) tensor), "
            f"got the scalar {positions!r} (RotaryEmbedding.forward takes offset= for positions "
            "offset, offset + 1, ...)"
        )
    if not isinstance(positions, torch.Tensor):
        if not isinstance(positions, (Sequence, np.ndarray)) or isinstance(positions, (str, bytes)):
            raise TypeError(f"positions must be a tensor or a sequence of numbers, got {type(positions).__name__}")
        try:
            arr = np.asarray(positions)
        except (ValueError, TypeError) as err:
            raise TypeError(f"positions must be a rectangular sequence of numbers: {err}") from None
        if arr.dtype == np.float16 or not (
            np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
        ):
            raise TypeError(f"positions must hold integers or float32/float64 numbers, got dtype {arr.dtype}")
        if arr.dtype == np.uint64:
            arr = arr.astype(np.float64)
        positions = torch.as_tensor(np.ascontiguousarray(arr), device=device)
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
    if device is not None and p.device != torch.device(device):
        raise ValueError(
            f"positions are on {p.device} but must be on {device} (the device of x); "
            "move them with positions.to(x.device)"
        )
    return p


def _fit_positions(p: torch.Tensor, x: torch.Tensor, axis: int, name: str = "x") -> None:
    """``p`` must be ``(seq,)`` or ``(batch, seq)`` for ``x`` with the sequence on ``axis``."""
    seq = x.shape[axis]
    if p.ndim == 1:
        ok = p.shape[0] == seq
    else:
        ok = axis >= 1 and p.shape[1] == seq and p.shape[0] in (1, x.shape[0])
    if not ok:
        raise ValueError(
            f"positions must have shape (seq,) = ({seq},) or (batch, seq) = ({x.shape[0]}, {seq}) with "
            f"the batch on axis 0 and the sequence on axis {axis} of {name} of shape {tuple(x.shape)}, "
            f"got {tuple(p.shape)}"
        )


def _check_finite(p: torch.Tensor, debug: bool) -> None:
    """Finite positions, checked where it costs no host-device synchronisation (or if ``debug``)."""
    if not p.is_floating_point() or _compiling() or p.device.type == "meta":
        return
    if (debug or p.device.type == "cpu") and not bool(torch.isfinite(p).all()):
        raise ValueError("positions must be finite numbers, got NaN or infinity")


def _dynamic_frequencies(
    p: torch.Tensor, inv_freq: torch.Tensor, base: float, params: Mapping[str, Any]
) -> torch.Tensor:
    """Dynamic NTK frequencies for the largest position of ``p``, on the device (no sync)."""
    if p.numel() == 0:
        return inv_freq
    dim = 2 * inv_freq.shape[0]
    original, factor = params["original_max_position_embeddings"], params["factor"]
    n = torch.floor(p.max().to(torch.float64)) + 1
    grown = base * (factor * torch.clamp(n, min=original) / original - (factor - 1)) ** (dim / (dim - 2))
    exponents = torch.arange(0, dim, 2, dtype=torch.float64, device=p.device) / dim
    return torch.where(n > original, 1.0 / grown**exponents, inv_freq)


def _compute_tables(
    p: torch.Tensor, inv_freq: torch.Tensor, factor: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of ``p * inv_freq`` computed in float64, shape ``(*p.shape, n)``, as ``dtype``.

    Under ``torch.compile`` and ``torch.export`` float32 tables are computed differently: a
    compiler fuses the tables into the rotation and recomputes them for every element of
    ``x``, where float64 sines would dominate the time. There the angles are reduced
    modulo ``2 pi`` in float64 (exact to about 1e-10 for positions up to 1e6) and their
    cos and sin taken in float32: within 3e-7 of the float64 values, against half a
    float32 unit (3e-8) in eager mode.
    """
    angles = p.to(torch.float64)[..., None] * inv_freq
    if dtype == torch.float32 and _compiling():
        turns = torch.round(angles * (0.5 / math.pi))
        reduced = (angles - turns * (2.0 * math.pi)).to(torch.float32)
        cos, sin = torch.cos(reduced), torch.sin(reduced)
    else:
        cos, sin = torch.cos(angles), torch.sin(angles)
    if factor != 1.0:
        cos, sin = cos * factor, sin * factor
    return cos.to(dtype), sin.to(dtype)


def _table_view(t: torch.Tensor, ndim: int, axis: int) -> torch.Tensor:
    """Reshape a ``(seq, n)`` or ``(batch, seq, n)`` table to broadcast against an ``ndim`` tensor."""
    shape = [1] * ndim
    shape[axis], shape[-1] = t.shape[-2], t.shape[-1]
    if t.ndim == 3:
        shape[0] = t.shape[0]
    return t.reshape(shape)


def _work_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


# --------------------------------------------------------------------------- kernels


def _rotation_table(cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """What the eager kernel of ``layout`` multiplies by: ``cos + i sin`` or ``[cos | cos]``."""
    return torch.complex(cos, sin) if layout == "interleaved" else torch.cat([cos, cos], dim=-1)


def _rotate_interleaved(x: torch.Tensor, rot: torch.Tensor, axis: int) -> torch.Tensor:
    """Complex multiply: pairs (2j, 2j+1) are complex numbers, multiplied by ``rot = exp(i angle)``.

    The product is the only full-size allocation; ``view_as_real`` and ``flatten`` are views.
    """
    if x.stride(-1) != 1 or x.storage_offset() % 2 or any(s % 2 for s in x.stride()[:-1]):
        x = x.clone(memory_format=torch.contiguous_format)  # strides not compatible with a complex view
    xc = torch.view_as_complex(x.unflatten(-1, (-1, 2)))
    return torch.view_as_real(xc * _table_view(rot, x.ndim, axis)).flatten(-2)


def _rotate_half(x: torch.Tensor, sin: torch.Tensor, cos2: torch.Tensor, axis: int) -> torch.Tensor:
    """Half layout: ``out1 = x1 cos - x2 sin``, ``out2 = x2 cos + x1 sin``, one allocation.

    Three passes: ``out = x * [cos | cos]`` (the only allocation), then ``out1 -= x2 * sin``
    and ``out2 += x1 * sin`` in place on the two halves of ``out``, each parallelised by
    torch itself. Hugging Face's ``x * cos + rotate_half(x) * sin`` makes five full-size
    temporaries instead.
    """
    half = x.shape[-1] // 2
    sin = _table_view(sin, x.ndim, axis)
    out = torch.mul(x, _table_view(cos2, x.ndim, axis))
    out[..., :half].addcmul_(x[..., half:], sin, value=-1.0)
    out[..., half:].addcmul_(x[..., :half], sin)
    return out


def _rotate_traceable(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, axis: int) -> torch.Tensor:
    """The same rotation in plain real arithmetic, which a compiler fuses into one kernel."""
    cos, sin = _table_view(cos, x.ndim, axis), _table_view(sin, x.ndim, axis)
    if layout == "half":
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    pairs = x.unflatten(-1, (-1, 2))
    x1, x2 = pairs[..., 0], pairs[..., 1]
    return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)


@functools.lru_cache(maxsize=1)
def _fused_kernels() -> Any:
    """The Triton kernels (``posenc._rotary_triton``), or ``None`` where Triton is missing."""
    try:
        from . import _rotary_triton
    except Exception:  # no triton, or a triton that cannot compile here
        return None
    return _rotary_triton


def _fused_applies(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> bool:
    return (
        layout == "half"
        and x.is_cuda
        and x.dtype in (torch.float16, torch.bfloat16, torch.float32)
        and x.is_contiguous()
        and cos.dtype == torch.float32
        and sin.dtype == torch.float32
        and not (cos.requires_grad or sin.requires_grad)
        and _fused_kernels() is not None
    )


def _rotate(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    axis: int,
    rot: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rotate the first ``2 * cos.shape[-1]`` coordinates of ``x`` (16-bit inputs in float32).

    ``cos``/``sin`` are ``(seq, n)`` or ``(batch, seq, n)``; ``rot`` an optional cached
    :func:`_rotation_table` for the eager kernels.
    """
    width = 2 * cos.shape[-1]
    if width < x.shape[-1]:  # partial rotary: the other coordinates pass through
        return torch.cat([_rotate(x[..., :width], cos, sin, layout, axis, rot), x[..., width:]], dim=-1)
    if _compiling():
        work = x.to(_work_dtype(x))
        return _rotate_traceable(work, cos.to(work.dtype), sin.to(work.dtype), layout, axis).to(x.dtype)
    if _fused_applies(x, cos, sin, layout):
        return _fused_kernels().rotate_half(x, cos, sin, seq_axis=axis)
    work = x if x.dtype in (torch.float32, torch.float64) else x.to(torch.float32)
    if rot is None:
        rot = _rotation_table(cos, sin, layout)
    if layout == "half":
        out = _rotate_half(work, sin, rot, axis)
    else:
        out = _rotate_interleaved(work, rot, axis)
    return out if out.dtype == x.dtype else out.to(x.dtype)


# ------------------------------------------------------------------------ functional


def apply_rotary(
    x: torch.Tensor,
    positions: torch.Tensor | Sequence[float] | np.ndarray,
    *,
    base: float = 10000.0,
    layout: str = "half",
    scaling: Mapping[str, Any] | None = None,
    rotary_dim: int | None = None,
    seq_dim: int = -2,
    max_position_embeddings: int | None = None,
) -> torch.Tensor:
    """Rotate the pairs of coordinates of ``x`` by ``position * omega_j`` (RoPE, no cache).

    Args:
        x: queries or keys, ``(..., seq, head_dim)`` (or with the sequence on ``seq_dim``),
            any float dtype (16-bit inputs are rotated in float32 and cast back).
        positions: ``(seq,)`` positions, or ``(batch, seq)`` for ``x`` of shape
            ``(batch, ..., head_dim)``; integers or float32/float64 (fractional and
            negative positions are allowed); a tensor on the device of ``x``.
        base: the RoPE base (10000 in RoFormer and Llama 2, 500000 in Llama 3).
        layout: ``"half"`` (Hugging Face, GPT-NeoX) or ``"interleaved"`` (RoFormer,
            Meta, torchtune).
        scaling: ``None`` or a context-extension dict, see :class:`RotaryEmbedding`.
        rotary_dim: rotate only the first ``rotary_dim`` coordinates (partial rotary).
        seq_dim: the sequence axis of ``x`` (``1`` for ``(batch, seq, heads, head_dim)``).
        max_position_embeddings: the model's maximum length (for a Hugging Face
            ``"dynamic"`` dict without ``original_max_position_embeddings``).

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
    base = _check_base(base)
    _check_theta(scaling, base)
    axis = _seq_axis(x, _check_seq_dim(seq_dim))
    width = _rotary_width(_check_head_dim(x.shape[-1], "head_dim (x.shape[-1])"), rotary_dim, None, scaling)
    sc = normalize_scaling(scaling, max_position_embeddings=max_position_embeddings)
    _check_scaling_width(sc, width)
    p = _as_positions(positions, x.device)
    _fit_positions(p, x, axis)
    _check_finite(p, debug=False)
    inv_np, factor = ROTARY_SCALINGS["default" if sc is None else sc["type"]](width, base, sc or {}, None)
    inv_freq = torch.as_tensor(inv_np, dtype=torch.float64, device=x.device)
    if sc is not None and sc["type"] == "dynamic":
        inv_freq = _dynamic_frequencies(p, inv_freq, base, sc)
    cos, sin = _compute_tables(p, inv_freq, factor, _work_dtype(x))
    return _rotate(x, cos, sin, layout, axis)


def _check_table(t: object, name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor from RotaryEmbedding.tables, got {type(t).__name__}")
    if t.dtype not in (torch.float32, torch.float64):
        raise TypeError(
            f"{name} must be float32 or float64 (16-bit tables lose the rotation's precision; "
            f"make them with RotaryEmbedding.tables), got {t.dtype}"
        )
    if t.ndim not in (2, 3) or t.shape[-1] < 1:
        raise ValueError(f"{name} must have shape (seq, rotary_dim/2) or (batch, seq, rotary_dim/2), got {tuple(t.shape)}")
    return t


def apply_rotary_tables(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    layout: str = "half",
    seq_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys by precomputed tables (compute once per forward, apply per layer).

    Args:
        q: queries ``(batch, heads, seq, head_dim)`` (or any ``(..., seq, head_dim)``, or
            with the sequence on ``seq_dim``), any float dtype.
        k: keys, the same layout as ``q`` (their head counts may differ: grouped queries).
        cos: the cosine table of :meth:`RotaryEmbedding.tables`, float32 or float64, shape
            ``(seq, rotary_dim/2)`` or ``(batch, seq, rotary_dim/2)``; the first
            ``rotary_dim`` coordinates of ``q`` and ``k`` are rotated, the others pass.
        sin: the sine table, of the shape, dtype and device of ``cos``.
        layout: ``"half"`` or ``"interleaved"``: the pairs, as in :class:`RotaryEmbedding`.
        seq_dim: the sequence axis of ``q`` and ``k`` (``1`` for ``(batch, seq, heads, head_dim)``).

    Returns:
        ``(q_rotated, k_rotated)``, new tensors of the shapes and dtypes of ``q`` and ``k``,
        equal to ``RotaryEmbedding(...)(q, positions)`` and the same for ``k``.

    Example:
        >>> rope = RotaryEmbedding(16)
        >>> pos = torch.arange(5).expand(2, 5)  # (batch, seq) position ids
        >>> cos, sin = rope.tables(pos)  # once per forward pass
        >>> q, k = torch.randn(2, 4, 5, 16), torch.randn(2, 1, 5, 16)
        >>> q_rot, k_rot = apply_rotary_tables(q, k, cos, sin)  # in every layer
        >>> bool(torch.equal(q_rot, rope(q, pos)))
        True
    """
    layout = check_choice("layout", layout, ROTARY_LAYOUTS)
    seq_dim = _check_seq_dim(seq_dim)
    cos, sin = _check_table(cos, "cos"), _check_table(sin, "sin")
    if cos.shape != sin.shape or cos.dtype != sin.dtype or cos.device != sin.device:
        raise ValueError(
            f"cos and sin must have the same shape, dtype and device, got {tuple(cos.shape)} {cos.dtype} "
            f"{cos.device} and {tuple(sin.shape)} {sin.dtype} {sin.device}"
        )
    width = 2 * cos.shape[-1]
    out = []
    for name, t in (("q", q), ("k", k)):
        t = _check_x(t, name)
        axis = _seq_axis(t, seq_dim, name)
        if t.device != cos.device:
            raise ValueError(f"{name} is on {t.device} but cos and sin are on {cos.device}; they must share a device")
        if t.shape[-1] < width:
            raise ValueError(
                f"{name} has head_dim {t.shape[-1]} but the tables rotate {width} coordinates "
                f"(cos.shape[-1] = {cos.shape[-1]} pairs)"
            )
        seq = t.shape[axis]
        if cos.shape[-2] != seq or (cos.ndim == 3 and (axis == 0 or cos.shape[0] not in (1, t.shape[0]))):
            raise ValueError(
                f"cos and sin of shape {tuple(cos.shape)} do not fit {name} of shape {tuple(t.shape)} "
                f"(sequence on axis {axis}: expected ({seq}, {cos.shape[-1]}) or "
                f"({t.shape[0]}, {seq}, {cos.shape[-1]}))"
            )
        out.append((t, axis))
    rot = None
    if not _compiling() and not _fused_applies(out[0][0], cos, sin, layout):
        rot = _rotation_table(cos, sin, layout)  # shared by q and k
    (q, q_axis), (k, k_axis) = out
    return _rotate(q, cos, sin, layout, q_axis, rot), _rotate(k, cos, sin, layout, k_axis, rot)


# ---------------------------------------------------------------------------- module


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE) as a module with a cached cos/sin table.

    ``forward(x)`` rotates queries or keys ``x`` of shape ``(..., seq, head_dim)`` by
    their positions; apply it to ``q`` and ``k`` (never to ``v``) after the projections
    and the split into heads. The score ``q_m . k_n`` then depends on ``m - n`` only.

    Args:
        head_dim: width of one head; must be even unless ``rotary_dim`` is smaller.
        base: the RoPE base ``theta`` (10000 in RoFormer and Llama 2, 500000 in Llama 3).
        layout: ``"half"`` pairs ``(j, j + d/2)`` (GPT-NeoX, Hugging Face);
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
            (Llama 3.1). See the module docstring for the formulas. A Hugging Face
            ``rope_parameters`` dict is accepted as is (``rope_type``, ``rope_theta``,
            ``partial_rotary_factor``).
        rotary_dim: rotate only the first ``rotary_dim`` (even) coordinates of each head,
            with the frequencies of a ``rotary_dim``-wide head; the rest pass through.
        partial_rotary_factor: Hugging Face's form of the same:
            ``rotary_dim = int(head_dim * partial_rotary_factor)``.
        seq_dim: the sequence axis of ``x``: ``-2`` for ``(batch, heads, seq, head_dim)``,
            ``1`` (or ``-3``) for ``(batch, seq, heads, head_dim)``.
        max_position_embeddings: the model's maximum length; it fills a missing
            ``original_max_position_embeddings`` (a Hugging Face ``"dynamic"`` dict).
        max_len: number of positions cached at construction.
        max_cache_len: the cache grows on demand up to this many positions (default
            ``max(max_len, 32768)``); beyond it the tables are computed for the call and
            not kept.
        debug: also check the values of position ids (finite) on accelerators, at the
            cost of a host-device synchronisation per call. On the CPU they are checked
            in eager mode anyway (it costs nothing there).

    Shapes:
        ``forward(x, positions=None, offset=0)``: ``x`` is ``(..., seq, head_dim)``
        (typically ``(batch, heads, seq, head_dim)``); ``positions`` is ``(seq,)`` or
        ``(batch, seq)`` on the device of ``x`` and defaults to ``offset + arange(seq)``
        (``offset`` is the number of tokens already in the key/value cache during
        decoding). Returns a new tensor of the shape and dtype of ``x``.

    The frequencies (float64) and the cos/sin tables are non-persistent buffers (not in
    ``state_dict``); :meth:`reset_parameters` rebuilds them, e.g. after meta-device
    initialisation and ``to_empty``. If a cast such as ``module.half()`` lowers their
    precision they are rebuilt at the next call, so angles are never formed in 16-bit
    floats. With ``"dynamic"`` scaling the frequencies depend on the largest position of
    each call (computed on the device, not cached; ``transformers`` instead keeps the
    grown frequencies between calls).

    Example:
        >>> rope = RotaryEmbedding(16)
        >>> q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
        >>> rope(q).shape
        torch.Size([1, 2, 5, 16])
        >>> step = rope(q[:, :, 4:], offset=4)  # decoding the 5th token
        >>> bool(torch.allclose(step, rope(q)[:, :, 4:], atol=1e-6))
        True
        >>> neox = RotaryEmbedding(64, partial_rotary_factor=0.25)  # rotates 16 of 64
        >>> neox.rotary_dim
        16
    """

    inv_freq: torch.Tensor
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
        rotary_dim: int | None = None,
        partial_rotary_factor: float | None = None,
        seq_dim: int = -2,
        max_position_embeddings: int | None = None,
        max_len: int = 2048,
        max_cache_len: int | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__()
        self.head_dim = _check_head_dim(head_dim)
        self.base = _check_base(base)
        self.layout = check_choice("layout", layout, ROTARY_LAYOUTS)
        _check_theta(scaling, self.base)
        self.rotary_dim = _rotary_width(self.head_dim, rotary_dim, partial_rotary_factor, scaling)
        self.scaling = normalize_scaling(scaling, max_position_embeddings=max_position_embeddings)
        _check_scaling_width(self.scaling, self.rotary_dim)
        self.seq_dim = _check_seq_dim(seq_dim)
        if not isinstance(debug, bool):
            raise TypeError(f"debug must be a bool, got {debug!r}")
        self.debug = debug
        max_len = check_int("max_len", max_len, minimum=0)
        self.max_cache_len = check_int(
            "max_cache_len", max(max_len, 1 << 15) if max_cache_len is None else max_cache_len, minimum=0
        )
        if max_len > self.max_cache_len:
            raise ValueError(f"max_len={max_len} must be at most max_cache_len={self.max_cache_len}")
        if self.max_cache_len * self.rotary_dim * 8 > MAX_TABLE_BYTES:
            raise ValueError(
                f"max_cache_len={self.max_cache_len} positions of {self.rotary_dim} rotated coordinates need "
                f"{self.max_cache_len * self.rotary_dim * 8 / 2**30:.1f} GiB of tables; at most "
                f"{MAX_TABLE_BYTES // 2**30} GiB (pass a smaller max_cache_len or max_len)"
            )
        kind = "default" if self.scaling is None else self.scaling["type"]
        self._scaling_fn = ROTARY_SCALINGS[kind]
        inv_freq, self.attention_factor = self._scaling_fn(self.rotary_dim, self.base, self.scaling or {}, None)
        self.register_buffer("inv_freq", torch.tensor(inv_freq, dtype=torch.float64), persistent=False)
        self.register_buffer("cos_cached", torch.empty(0, self.rotary_dim // 2), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0, self.rotary_dim // 2), persistent=False)
        # the table the eager kernel of the layout reads: cos + i sin, or [cos | cos]
        self.register_buffer("rot_cached", torch.empty(0), persistent=False)
        self._build_cache(max_len, self.inv_freq.device)

    # -- buffers

    def reset_parameters(self) -> None:
        """Rebuild every non-persistent buffer (frequencies and cos/sin tables) in place.

        Call it after ``to_empty`` (meta-device initialisation, as FSDP does): the
        buffers then hold uninitialised memory. The module has no parameters.

        Example:
            >>> with torch.device("meta"):
            ...     rope = RotaryEmbedding(8)
            >>> rope = rope.to_empty(device="cpu")
            >>> rope.reset_parameters()
            >>> bool(torch.equal(rope(torch.ones(1, 3, 8)), RotaryEmbedding(8)(torch.ones(1, 3, 8))))
            True
        """
        device = self.inv_freq.device
        inv_freq, _ = self._scaling_fn(self.rotary_dim, self.base, self.scaling or {}, None)
        self.inv_freq = torch.tensor(inv_freq, dtype=torch.float64, device=device)
        self._build_cache(self.cos_cached.shape[0], device)

    def _build_cache(self, length: int, device: torch.device) -> None:
        if self.inv_freq.dtype != torch.float64 or self.inv_freq.device != device:
            inv_freq, _ = self._scaling_fn(self.rotary_dim, self.base, self.scaling or {}, None)
            self.inv_freq = torch.tensor(inv_freq, dtype=torch.float64, device=device)
        pos = torch.arange(length, dtype=torch.float64, device=device)
        cos, sin = _compute_tables(pos, self.inv_freq, self.attention_factor, torch.float32)
        self.cos_cached, self.sin_cached = cos, sin
        self.rot_cached = _rotation_table(cos, sin, self.layout)

    def _frequencies(self, device: torch.device) -> torch.Tensor:
        if self.inv_freq.dtype != torch.float64 or self.inv_freq.device != device:  # after a module cast
            inv_freq, _ = self._scaling_fn(self.rotary_dim, self.base, self.scaling or {}, None)
            self.inv_freq = torch.tensor(inv_freq, dtype=torch.float64, device=device)
        return self.inv_freq

    def _cached(self, length: int, device: torch.device) -> None:
        """Make the cache hold ``length`` positions on ``device`` in float32."""
        if (
            self.cos_cached.shape[0] < length
            or self.cos_cached.dtype != torch.float32
            or self.cos_cached.device != device
            or self.rot_cached.device != device
            # a module cast such as .to(torch.float32) turns the complex table of the
            # interleaved layout into its real part: rebuild whatever is not the layout's type
            or self.rot_cached.dtype != (torch.complex64 if self.layout == "interleaved" else torch.float32)
            or self.rot_cached.shape[0] != self.cos_cached.shape[0]
        ):
            n = max(length, self.cos_cached.shape[0])
            self._build_cache(min(1 << max(n - 1, 1).bit_length(), self.max_cache_len), device)

    def _positions_tables(
        self, p: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq = self._frequencies(p.device)
        if self.scaling is not None and self.scaling["type"] == "dynamic":
            inv_freq = _dynamic_frequencies(p, inv_freq, self.base, self.scaling)
        return _compute_tables(p, inv_freq, self.attention_factor, dtype)

    def _default_tables(
        self, seq: int, offset: int, device: torch.device, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """cos, sin (and the cached rotation table, if any) for positions ``offset .. offset+seq-1``."""
        end = offset + seq
        dynamic = self.scaling is not None and self.scaling["type"] == "dynamic"
        if dtype == torch.float32 and end <= self.max_cache_len and not (
            dynamic and end > self.scaling["original_max_position_embeddings"]
        ):
            self._cached(end, device)
            return self.cos_cached[offset:end], self.sin_cached[offset:end], self.rot_cached[offset:end]
        pos = torch.arange(offset, end, dtype=torch.float64, device=device)
        cos, sin = self._positions_tables(pos, dtype)
        return cos, sin, None

    def _check_offset(self, positions: object, offset: object) -> int:
        if _compiling():
            return offset  # type: ignore[return-value]  # may be a symbolic int
        offset = check_int("offset", offset, minimum=0)
        if positions is not None and offset != 0:
            raise ValueError("pass either positions or offset, not both (offset is added only to the default positions)")
        return offset

    # -- public

    def tables(
        self,
        positions: torch.Tensor | Sequence[float] | np.ndarray | None = None,
        *,
        seq_len: int | None = None,
        offset: int = 0,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The cos and sin tables for ``positions``: compute once, apply in every layer.

        Args:
            positions: position ids ``(seq,)`` or ``(batch, seq)`` (integers or
                float32/float64), or ``None`` for ``offset + arange(seq_len)``.
            seq_len: the number of default positions (only without ``positions``).
            offset: the first default position (only without ``positions``).
            device: where the tables go; by default the device of ``positions`` (a
                tensor) or of the module's buffers.
            dtype: ``torch.float32`` (default) or ``torch.float64``.

        Returns:
            ``(cos, sin)``, each ``(*positions.shape, rotary_dim // 2)``, including
            YaRN's attention factor; new tensors. Apply them with
            :func:`apply_rotary_tables` (pass this module's ``layout``).

        Example:
            >>> rope = RotaryEmbedding(8)
            >>> cos, sin = rope.tables(torch.tensor([[0, 1, 2], [5, 6, 7]]))
            >>> cos.shape
            torch.Size([2, 3, 4])
            >>> bool(torch.equal(rope.tables(seq_len=3, offset=5)[0], cos[1]))
            True
        """
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
        if device is not None:
            try:
                device = torch.device(device)
            except (RuntimeError, TypeError) as err:
                raise TypeError(f"device must be a torch.device or a device string such as 'cpu', got {device!r}") from err
        if positions is None:
            if seq_len is None:
                raise ValueError("pass positions, or seq_len (with an optional offset) for offset + arange(seq_len)")
            seq_len = seq_len if _compiling() else check_int("seq_len", seq_len, minimum=0)
            offset = self._check_offset(None, offset)
            device = self.inv_freq.device if device is None else device
            cos, sin, _ = self._default_tables(seq_len, offset, device, dtype)
            return cos.clone(), sin.clone()
        if seq_len is not None:
            raise ValueError("pass either positions or seq_len, not both")
        self._check_offset(positions, offset)
        if device is None and not isinstance(positions, torch.Tensor):
            device = self.inv_freq.device
        p = _as_positions(positions, device)
        _check_finite(p, self.debug)
        return self._positions_tables(p, dtype)

    def forward(self, x: torch.Tensor, positions: object = None, offset: int = 0) -> torch.Tensor:
        """Rotate ``x`` by ``positions`` (default ``offset + arange(seq)``); see the class docstring."""
        x = _check_x(x)
        axis = _seq_axis(x, self.seq_dim)
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"x must have shape (..., seq, {self.head_dim}) (head_dim={self.head_dim}), got {tuple(x.shape)}")
        offset = self._check_offset(positions, offset)
        dtype = _work_dtype(x)
        if positions is None:
            cos, sin, rot = self._default_tables(x.shape[axis], offset, x.device, dtype)
            return _rotate(x, cos, sin, self.layout, axis, rot)
        p = _as_positions(positions, x.device)
        _fit_positions(p, x, axis)
        _check_finite(p, self.debug)
        cos, sin = self._positions_tables(p, dtype)
        return _rotate(x, cos, sin, self.layout, axis)

    def extra_repr(self) -> str:
        s = f"head_dim={self.head_dim}, base={self.base:g}, layout={self.layout!r}"
        if self.rotary_dim != self.head_dim:
            s += f", rotary_dim={self.rotary_dim}"
        if self.seq_dim != -2:
            s += f", seq_dim={self.seq_dim}"
        return s + (f", scaling={self.scaling}" if self.scaling else "")
