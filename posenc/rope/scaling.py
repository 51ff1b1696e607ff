"""Context-extension scalings of RoPE: one frozen dataclass per type, equal to ``transformers``.

Each class holds its parameters (validated in ``__post_init__``, defaults in the fields),
its frequency formula ``frequencies(dim, base)`` (Python floats, float64) and its
``attention_scaling()`` (the factor on cos and sin), as ``transformers``'
``ROPE_INIT_FUNCTIONS`` computes them. :func:`from_hf` reads a Hugging Face
``rope_parameters`` (or old ``rope_scaling``) dict as it is.

Two types depend on the length of the call (``transformers`` recomputes them from
``max(position_ids) + 1``): :class:`Dynamic` (the NTK base grows with the length) and
:class:`LongRoPE` (short factors up to ``original_max_position_embeddings``, long ones
beyond). Their ``original_max_position_embeddings`` is the length where that happens.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

try:
    from .._checks import check_bool, check_int, check_positive_float
    from .core import inv_frequencies
except ImportError:  # copied beside core.py and posenc/_checks.py, outside the package
    from _checks import check_bool, check_int, check_positive_float  # type: ignore[no-redef]
    from core import inv_frequencies  # type: ignore[no-redef]


def _at_least_one(cls_type: str, factor: float) -> None:
    if factor < 1.0:
        raise ValueError(f"scaling['factor'] must be >= 1 for type {cls_type!r}, got {factor}")


def _ntk_base(dim: int, base: float, factor: float, kind: str) -> float:
    if dim < 4:
        raise ValueError(
            f"scaling of type {kind!r} needs at least 4 rotated coordinates (its base change "
            f"base * s**(d/(d-2)) is undefined for d=2), got {dim}"
        )
    return base * factor ** (dim / (dim - 2))


@dataclass(frozen=True)
class Linear:
    """Position interpolation (Chen et al. 2023): every frequency divided by ``factor``."""

    factor: float
    type: ClassVar[str] = "linear"

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", check_positive_float("scaling['factor']", self.factor))
        _at_least_one(self.type, self.factor)

    def frequencies(self, dim: int, base: float) -> tuple[float, ...]:
        return tuple(w / self.factor for w in inv_frequencies(dim, base))

    def attention_scaling(self) -> float:
        return 1.0


@dataclass(frozen=True)
class NTK:
    """NTK-aware scaling (bloc97 2023; Peng et al. 2024, section 3.1): base ``* factor**(d/(d-2))``."""

    factor: float
    type: ClassVar[str] = "ntk"

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", check_positive_float("scaling['factor']", self.factor))
        _at_least_one(self.type, self.factor)

    def frequencies(self, dim: int, base: float) -> tuple[float, ...]:
        return inv_frequencies(dim, _ntk_base(dim, base, self.factor, self.type))

    def attention_scaling(self) -> float:
        return 1.0


@dataclass(frozen=True)
class Dynamic:
    """Dynamic NTK (``transformers``): for a call whose largest position is ``p``, with
    ``n = max(p + 1, L)``, the base becomes ``base * (factor * n / L - (factor - 1))**(d/(d-2))``;
    ``L`` is the model's ``max_position_embeddings``."""

    factor: float
    original_max_position_embeddings: int
    type: ClassVar[str] = "dynamic"

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", check_positive_float("scaling['factor']", self.factor))
        _at_least_one(self.type, self.factor)
        L = check_int("scaling['original_max_position_embeddings']", self.original_max_position_embeddings)
        object.__setattr__(self, "original_max_position_embeddings", L)

    def growth(self, n: float) -> float:
        """The NTK factor at length ``n`` (1 up to ``L``)."""
        L = self.original_max_position_embeddings
        return self.factor * max(n, L) / L - (self.factor - 1)

    def frequencies(self, dim: int, base: float, seq_len: int | None = None) -> tuple[float, ...]:
        g = self.growth(self.original_max_position_embeddings if seq_len is None else seq_len)
        return inv_frequencies(dim, _ntk_base(dim, base, g, self.type))

    def attention_scaling(self) -> float:
        return 1.0


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


@dataclass(frozen=True)
class YaRN:
    """YaRN (Peng et al. 2024, sections 3.2 to 3.4): NTK-by-parts interpolation and the
    attention temperature ``0.1 ln(factor) + 1`` on cos and sin (``mscale``,
    ``mscale_all_dim``, ``attention_factor`` and ``truncate`` as in ``transformers``)."""

    factor: float
    original_max_position_embeddings: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    truncate: bool = True
    type: ClassVar[str] = "yarn"

    def __post_init__(self) -> None:
        for name in ("factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_positive_float(f"scaling[{name!r}]", getattr(self, name)))
        L = check_int("scaling['original_max_position_embeddings']", self.original_max_position_embeddings)
        object.__setattr__(self, "original_max_position_embeddings", L)
        check_bool("scaling['truncate']", self.truncate)

    def frequencies(self, dim: int, base: float) -> tuple[float, ...]:
        L = self.original_max_position_embeddings

        def correction_dim(n_rotations: float) -> float:  # the pair whose wavelength fits n_rotations times in L
            return dim * math.log(L / (n_rotations * 2 * math.pi)) / (2 * math.log(base))

        low, high = correction_dim(self.beta_fast), correction_dim(self.beta_slow)
        if self.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        high = high + 0.001 if low == high else high
        out = []
        for j, w in enumerate(inv_frequencies(dim, base)):
            keep = 1.0 - min(max((j - low) / (high - low), 0.0), 1.0)  # 1: keep the frequency, 0: divide it
            out.append(w / self.factor * (1.0 - keep) + w * keep)
        return tuple(out)

    def attention_scaling(self) -> float:
        if self.attention_factor is not None:
            return self.attention_factor
        if self.mscale and self.mscale_all_dim:
            return _yarn_mscale(self.factor, self.mscale) / _yarn_mscale(self.factor, self.mscale_all_dim)
        return _yarn_mscale(self.factor)


@dataclass(frozen=True)
class Llama3:
    """Llama 3.1 (Dubey et al. 2024): wavelengths above ``L / low_freq_factor`` interpolated
    by ``factor``, below ``L / high_freq_factor`` kept, a smooth blend in between."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int
    type: ClassVar[str] = "llama3"

    def __post_init__(self) -> None:
        for name in ("factor", "low_freq_factor", "high_freq_factor"):
            object.__setattr__(self, name, check_positive_float(f"scaling[{name!r}]", getattr(self, name)))
        _at_least_one(self.type, self.factor)
        if self.high_freq_factor < self.low_freq_factor:  # equal (Llama 4 Scout's copies): no blended pairs
            raise ValueError("scaling['high_freq_factor'] must be at least scaling['low_freq_factor']")
        L = check_int("scaling['original_max_position_embeddings']", self.original_max_position_embeddings)
        object.__setattr__(self, "original_max_position_embeddings", L)

    def frequencies(self, dim: int, base: float) -> tuple[float, ...]:
        L, lo, hi, s = self.original_max_position_embeddings, self.low_freq_factor, self.high_freq_factor, self.factor
        out = []
        for w in inv_frequencies(dim, base):
            wavelength = 2 * math.pi / w
            if wavelength > L / lo:
                out.append(w / s)
            elif wavelength < L / hi or hi == lo:
                out.append(w)
            else:
                smooth = (L / wavelength - lo) / (hi - lo)
                out.append((1.0 - smooth) * w / s + smooth * w)
        return tuple(out)

    def attention_scaling(self) -> float:
        return 1.0


@dataclass(frozen=True)
class LongRoPE:
    """LongRoPE (Phi-3, Phi-3.5, Phi-4-mini): pair ``j``'s frequency divided by
    ``short_factor[j]`` for calls up to ``original_max_position_embeddings`` positions and
    by ``long_factor[j]`` beyond; cos and sin carry ``sqrt(1 + ln(factor) / ln(L))`` (or
    ``attention_factor``)."""

    short_factor: tuple[float, ...]
    long_factor: tuple[float, ...]
    original_max_position_embeddings: int
    factor: float = 1.0
    attention_factor: float | None = None
    type: ClassVar[str] = "longrope"

    def __post_init__(self) -> None:
        for name in ("short_factor", "long_factor"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                raise TypeError(f"scaling[{name!r}] must be a list of numbers (one per rotated pair), got {value!r}")
            object.__setattr__(self, name, tuple(check_positive_float(f"scaling[{name!r}]", v) for v in value))
        for name in ("factor", "attention_factor"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_positive_float(f"scaling[{name!r}]", getattr(self, name)))
        L = check_int("scaling['original_max_position_embeddings']", self.original_max_position_embeddings)
        object.__setattr__(self, "original_max_position_embeddings", L)

    def frequencies(self, dim: int, base: float, *, long: bool = False) -> tuple[float, ...]:
        ext = self.long_factor if long else self.short_factor
        if len(ext) != dim // 2:
            raise ValueError(
                f"scaling['{'long' if long else 'short'}_factor'] must hold rotary_dim / 2 = {dim // 2} numbers, got {len(ext)}"
            )
        return tuple(w / e for w, e in zip(inv_frequencies(dim, base), ext))

    def attention_scaling(self) -> float:
        if self.attention_factor is not None:
            return self.attention_factor
        if self.factor <= 1.0:
            return 1.0
        return math.sqrt(1 + math.log(self.factor) / math.log(self.original_max_position_embeddings))


@dataclass(frozen=True)
class Proportional:
    """p-RoPE (Barbero et al. 2025) as Gemma 4's global layers use it: the frequency ladder
    of the full head, ``base**(-2j / head_dim)``, for the first
    ``int(partial_rotary_factor * head_dim // 2)`` pairs; the other pairs get frequency 0
    (no rotation). All frequencies are divided by ``factor``."""

    partial_rotary_factor: float = 1.0
    factor: float = 1.0
    type: ClassVar[str] = "proportional"

    def __post_init__(self) -> None:
        p = check_positive_float("scaling['partial_rotary_factor']", self.partial_rotary_factor)
        if p > 1.0:
            raise ValueError(f"scaling['partial_rotary_factor'] must be in (0, 1], got {p}")
        object.__setattr__(self, "partial_rotary_factor", p)
        object.__setattr__(self, "factor", check_positive_float("scaling['factor']", self.factor))

    def frequencies(self, dim: int, base: float) -> tuple[float, ...]:
        rotated = int(self.partial_rotary_factor * dim // 2)
        ladder = inv_frequencies(dim, base)
        return tuple((w if j < rotated else 0.0) / self.factor for j, w in enumerate(ladder))

    def attention_scaling(self) -> float:
        return 1.0


Scaling = Linear | NTK | Dynamic | YaRN | Llama3 | LongRoPE | Proportional
SCALINGS: dict[str, type] = {c.type: c for c in (Linear, NTK, Dynamic, YaRN, Llama3, LongRoPE, Proportional)}
# each type's fields, and those without a default (read once: a compiler traces from_hf)
_FIELDS = {k: tuple(f.name for f in dataclasses.fields(c)) for k, c in SCALINGS.items()}
_REQUIRED = {
    k: tuple(f.name for f in dataclasses.fields(c) if f.default is dataclasses.MISSING) for k, c in SCALINGS.items()
}
# keys of a Hugging Face dict that are not scaling parameters
_NOT_SCALING = ("type", "rope_type", "rope_theta", "partial_rotary_factor")
# keys of multimodal RoPE (which pairs follow which axis), not of a 1-D scaling
_MULTIMODAL = ("mrope_section", "mrope_interleaved", "xdrope_section")
# types whose length comes from the model's max_position_embeddings when the dict has none
_LENGTH_FROM_MODEL = ("dynamic", "yarn", "llama3", "longrope")


def from_hf(
    params: Mapping[str, Any] | None, *, max_position_embeddings: int | None = None
) -> tuple[float | None, float | None, Scaling | None]:
    """Read a Hugging Face ``rope_parameters`` dict: ``(rope_theta, partial_rotary_factor, scaling)``.

    ``rope_type`` (or ``type``) selects the class (``"default"``: no scaling). The model's
    ``max_position_embeddings`` is where ``transformers`` takes the length of
    ``"dynamic"`` from (it ignores the dict's ``original_max_position_embeddings`` for that
    type, and so does this function when both are given; ``"dynamic"`` with an ``alpha``, as
    HunYuan ships it, is fixed NTK-alpha there and here: :class:`NTK` with ``factor=alpha``),
    and it fills a missing
    ``original_max_position_embeddings`` or ``factor`` of the others as ``transformers``
    does. ``proportional`` keeps its ``partial_rotary_factor`` (its pairs are those of the
    whole head).

    Example:
        >>> from_hf({"rope_type": "linear", "factor": 4.0, "rope_theta": 5e5})
        (500000.0, None, Linear(factor=4.0))
    """
    if max_position_embeddings is not None:
        max_position_embeddings = check_int("max_position_embeddings", max_position_embeddings)
    if params is None:
        return None, None, None
    if not isinstance(params, Mapping):
        raise TypeError(
            f"scaling must be None, a scaling such as Linear(4.0) or a dict such as "
            f"{{'rope_type': 'linear', 'factor': 4}}, got {type(params).__name__}"
        )
    nested = [k for k, v in params.items() if isinstance(v, Mapping)]
    if nested:
        raise ValueError(
            f"scaling is nested by layer type ({', '.join(map(repr, nested))}): pass one layer type's dict, "
            f"e.g. rope_parameters[{nested[0]!r}], or read the whole config with "
            "posenc.rope.rope_layers_from_config(config), which returns one scaling per layer type"
        )
    multimodal = sorted(set(map(str, params)) & set(_MULTIMODAL))
    if multimodal:
        raise ValueError(
            f"scaling[{multimodal[0]!r}] configures multimodal RoPE (which pairs follow time, height or width; "
            "'mrope_interleaved' is that assignment, not the pairing layout): build "
            "posenc.MultimodalRotaryEmbedding(head_dim, sections=..., interleaved=...), or read the whole config "
            "with posenc.rope.rope_layers_from_config(config)"
        )
    theta = params.get("rope_theta")
    theta = None if theta is None else check_positive_float("scaling['rope_theta']", theta)
    partial = params.get("partial_rotary_factor")
    if partial is not None:
        partial = check_positive_float("scaling['partial_rotary_factor']", partial)
        if partial > 1.0:
            raise ValueError(f"scaling['partial_rotary_factor'] must be in (0, 1], got {partial}")
    kind, rope_type = params.get("type"), params.get("rope_type")
    if kind is not None and rope_type is not None and kind != rope_type:
        raise ValueError(f"scaling['type']={kind!r} and scaling['rope_type']={rope_type!r} differ; pass one")
    kind = rope_type if kind is None else kind
    if kind in (None, "default"):
        unknown = sorted(set(map(str, params)) - set(_NOT_SCALING))
        if unknown or kind is None:
            raise ValueError(
                f"scaling needs a 'rope_type' in 'default', {', '.join(map(repr, SCALINGS))}"
                + (f"; type 'default' does not take {', '.join(unknown)}" if unknown and kind else "")
            )
        return theta, partial, None
    if kind not in SCALINGS:
        raise ValueError(f"scaling['rope_type'] must be one of 'default', {', '.join(map(repr, SCALINGS))}, got {kind!r}")
    if kind == "dynamic" and params.get("alpha"):
        # HunYuan: transformers reads "dynamic" with an alpha as fixed NTK-alpha (base * alpha**(d/(d-2)))
        # and ignores the dict's other keys (factor, mscale, beta_*)
        return theta, partial, NTK(factor=check_positive_float("scaling['alpha']", params["alpha"]))
    cls, fields = SCALINGS[kind], _FIELDS[kind]
    args = {k: v for k, v in params.items() if k not in _NOT_SCALING and v is not None}
    unknown = sorted(set(map(str, args)) - set(fields))
    if unknown:
        raise ValueError(f"scaling of type {kind!r} does not take {', '.join(unknown)}; accepted keys: {', '.join(fields)}")
    if kind == "proportional":
        if partial is not None:
            args["partial_rotary_factor"] = partial
        partial = None
    if kind in _LENGTH_FROM_MODEL and max_position_embeddings is not None:
        if kind == "dynamic" or "original_max_position_embeddings" not in args:
            args["original_max_position_embeddings"] = max_position_embeddings
    if kind in ("yarn", "longrope") and "factor" not in args and max_position_embeddings is not None:
        if "original_max_position_embeddings" in args:
            args["factor"] = max_position_embeddings / check_int(
                "scaling['original_max_position_embeddings']", args["original_max_position_embeddings"]
            )
    required = [name for name in _REQUIRED[kind] if name not in args]
    if required:
        hint = (
            "; transformers takes it from the model config's max_position_embeddings: pass "
            "max_position_embeddings=<the model's maximum length>"
            if "original_max_position_embeddings" in required
            else ""
        )
        raise ValueError(f"scaling of type {kind!r} needs the key(s) {', '.join(required)}{hint}")
    return theta, partial, cls(**args)


def as_dict(scaling: Scaling | None) -> dict[str, Any] | None:
    """A scaling as a plain dict with ``"type"`` and its parameters (``None`` fields left out)."""
    if scaling is None:
        return None
    out: dict[str, Any] = {"type": scaling.type}
    for f in dataclasses.fields(scaling):
        value = getattr(scaling, f.name)
        if value is not None:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


#: The context extensions of :func:`extension` (``"position_interpolation"`` is a synonym of ``"pi"``).
EXTENSIONS = ("none", "pi", "ntk", "dynamic_ntk", "yarn")


def extension(method: str, factor: float, original: int, *, base: float | None = None) -> dict[str, Any] | None:
    """The ``scaling`` dict of :class:`~posenc.RotaryEmbedding` that extends a model trained at ``original`` positions.

    ``"none"``: plain RoPE; ``"pi"`` (or ``"position_interpolation"``, Chen et al. 2023):
    every frequency divided by ``factor``; ``"ntk"``: NTK-aware, the base multiplied by
    ``factor ** (d / (d - 2))``; ``"dynamic_ntk"``: NTK-aware with the factor set per input
    to ``max(1, n / original)`` (``transformers``' dynamic type with factor 1); ``"yarn"``
    (Peng et al. 2023): NTK-by-parts plus the attention temperature. With ``base`` the dict
    carries it as ``rope_theta``, so the swapped module keeps the trained model's base.

    Example:
        >>> extension("pi", 4, 64)
        {'type': 'linear', 'factor': 4.0}
        >>> extension("none", 4, 64, base=500.0)
        {'type': 'default', 'rope_theta': 500.0}
    """
    if not isinstance(method, str) or method not in EXTENSIONS + ("position_interpolation",):
        raise ValueError(f"method must be one of {', '.join(map(repr, EXTENSIONS))}, got {method!r}")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor >= 1 or not math.isfinite(factor):
        raise ValueError(f"factor must be a finite number >= 1, got {factor!r}")
    original, factor = check_int("original", original), float(factor)
    out = {
        "none": None if base is None else {"type": "default"},
        "pi": {"type": "linear", "factor": factor},
        "position_interpolation": {"type": "linear", "factor": factor},
        "ntk": {"type": "ntk", "factor": factor},
        "dynamic_ntk": {"type": "dynamic", "factor": 1.0, "original_max_position_embeddings": original},
        "yarn": {"type": "yarn", "factor": factor, "original_max_position_embeddings": original},
    }[method]
    if base is not None:
        out["rope_theta"] = check_positive_float("base", base)
    return out
