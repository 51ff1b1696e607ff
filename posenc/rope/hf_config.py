"""Read a Hugging Face model config as models ship it: what every layer does with positions.

A 2026 config spreads its position encoding over several keys: ``rope_parameters`` nested
by layer type (Gemma 3 and 4, OLMo 3, Laguna), ``layer_types``, ``partial_rotary_factor``
per type, NoPE layers as ``no_rope_layers`` (1 = RoPE; Llama 4, SmolLM3) or as
``layer_rope_theta`` = 0 (GraniteSWA), multimodal sections (``mrope_section``,
``mrope_interleaved``), the pairing layout (``rope_interleave``, or the model's code),
HunYuan's ``"dynamic"`` with ``alpha`` (fixed NTK-alpha in ``transformers``).

* :func:`rope_layers_from_config` reads a config (a dict as ``config.json`` or
  ``PretrainedConfig.to_dict()`` holds it, or a ``PretrainedConfig``) into a
  :class:`RopeConfig`: one :class:`LayerRoPE` per layer type (its base, scaling, rotated
  width, layout, sections and the layers that use it), the NoPE layers and the layers
  without attention. Frequencies and attention factors equal ``transformers`` 5.23.
* :func:`inspect_config` reports, per layer type, the rotated pairs and their layout, base
  and scaling rule, which pairs complete a turn within the trained length, and the
  effective reach of the scaling; ``str()`` of the report is a table.

A key read the wrong way is refused with an error that names the key and the fix. Only
the standard library and numpy are used (``transformers`` is never imported).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import scaling as sc
from .core import inv_frequencies

# model types whose code rotates interleaved pairs (2j, 2j + 1) without a config key saying so
_INTERLEAVED_MODELS = ("cohere", "cohere2", "gptj", "llama4", "llama4_text", "deepseek_v2")
# model types whose transformers config class sets rope_interleave=True when config.json omits it
# (DeepSeek-V3's released config.json has no such key)
_INTERLEAVE_BY_DEFAULT = ("deepseek_v3", "glm4_moe_lite", "mistral4", "youtu", "axk1")
# model types whose text RoPE always assigns pairs to axes in the interleaved (Qwen3-VL) way,
# and the sections transformers uses when rope_parameters has none
_MROPE_INTERLEAVED_MODELS = ("qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "qwen3_5",
                             "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_omni_moe")
_MROPE_DEFAULT_SECTIONS = {
    "qwen2_vl": (16, 24, 24), "qwen2_vl_text": (16, 24, 24), "qwen2_5_vl": (16, 24, 24),
    "qwen2_5_vl_text": (16, 24, 24), "qwen3_vl": (24, 20, 20), "qwen3_vl_text": (24, 20, 20),
    "qwen3_vl_moe": (24, 20, 20), "qwen3_vl_moe_text": (24, 20, 20), "qwen3_5": (11, 11, 10),
    "qwen3_5_text": (11, 11, 10), "qwen3_5_moe": (11, 11, 10), "qwen3_5_moe_text": (11, 11, 10),
}
# model types whose full-attention layers carry no positions (Cohere2: RoPE on sliding layers only)
_ROPE_ON_SLIDING_ONLY = ("cohere2",)
# model types whose config class applies a flat rope_scaling to the full-attention layers only, the
# sliding ones keeping the plain rotation (OLMo 3's config.json ships YaRN flat)
_SCALING_ON_FULL_ONLY = ("olmo3",)
# layer types without softmax attention: they see no position encoding
_NO_ATTENTION = ("linear_attention", "mamba", "conv", "short_conv", "recurrent", "deltanet")
_MULTIMODAL = ("mrope_section", "xdrope_section", "mrope_interleaved")


@dataclass(frozen=True)
class LayerRoPE:
    """How one layer type rotates queries and keys.

    ``frequencies()`` are the ``rotary_dim // 2`` angular frequencies (float64) that
    ``transformers`` holds as ``inv_freq`` for this type (``"proportional"``: zero for the
    pairs it leaves still); ``attention_scaling()`` the factor on cos and sin. The rotated
    coordinates are ``rotary_offset .. rotary_offset + rotary_dim`` of a ``head_dim``-wide
    head (DeepSeek's decoupled key puts them after ``qk_nope_head_dim`` unrotated ones).
    """

    layer_type: str
    layers: tuple[int, ...]
    head_dim: int
    rotary_dim: int
    base: float
    scaling: sc.Scaling | None
    layout: str = "half"
    rotary_offset: int = 0
    mrope_section: tuple[int, ...] | None = None
    mrope_interleaved: bool = False
    max_position_embeddings: int | None = None

    def frequencies(self, *, seq_len: int | None = None) -> np.ndarray:
        """The angular frequencies, float64 ``(rotary_dim // 2,)``; ``seq_len``: the length
        of a call, for the types that depend on it (``"dynamic"``, ``"longrope"``)."""
        s = self.scaling
        if s is None:
            return np.array(inv_frequencies(self.rotary_dim, self.base))
        if isinstance(s, sc.Dynamic):
            return np.array(s.frequencies(self.rotary_dim, self.base, seq_len=seq_len))
        if isinstance(s, sc.LongRoPE):
            long = seq_len is not None and seq_len > s.original_max_position_embeddings
            return np.array(s.frequencies(self.rotary_dim, self.base, long=long))
        return np.array(s.frequencies(self.rotary_dim, self.base))

    def attention_scaling(self) -> float:
        """The factor on cos and sin (YaRN's and LongRoPE's temperature; 1 otherwise)."""
        return 1.0 if self.scaling is None else float(self.scaling.attention_scaling())

    @property
    def rotated_pairs(self) -> int:
        """Pairs that turn at all (``"proportional"`` leaves the slow ones at frequency 0)."""
        return int(np.count_nonzero(self.frequencies()))

    @property
    def trained_length(self) -> int | None:
        """The pretraining length, which is the scaling's ``original_max_position_embeddings``; the
        config's ``max_position_embeddings`` when nothing extends it (no scaling, or
        ``"proportional"`` with factor 1); ``None`` for a scaling that does not say what
        length it extends (``"linear"``, NTK-alpha)."""
        L = getattr(self.scaling, "original_max_position_embeddings", None)
        if L is not None:
            return L
        if self.scaling is None or (isinstance(self.scaling, sc.Proportional) and self.scaling.factor == 1.0):
            return self.max_position_embeddings
        return None

    def rotary_embedding(self, **kwargs: Any) -> Any:
        """A :class:`posenc.RotaryEmbedding` for this layer type: of the whole ``head_dim``
        with ``rotary_dim`` rotated (partial rotary, ``"proportional"``), or, when the
        rotated slice does not lead the head (DeepSeek's, after ``rotary_offset``
        coordinates), of width ``rotary_dim``, to be given that slice. Refused for
        multimodal RoPE, which :class:`posenc.MultimodalRotaryEmbedding` implements."""
        from .module import RotaryEmbedding

        if self.mrope_section is not None:
            raise ValueError(
                f"layer type {self.layer_type!r} uses multimodal RoPE (mrope_section={list(self.mrope_section)}): "
                f"build posenc.MultimodalRotaryEmbedding({self.rotary_dim}, sections=..., "
                f"interleaved={self.mrope_interleaved})"
            )
        if self.rotary_offset or isinstance(self.scaling, sc.Proportional) or self.rotary_dim == self.head_dim:
            return RotaryEmbedding(self.rotary_dim, base=self.base, scaling=self.scaling, layout=self.layout, **kwargs)
        return RotaryEmbedding(self.head_dim, rotary_dim=self.rotary_dim, base=self.base, scaling=self.scaling,
                               layout=self.layout, **kwargs)


@dataclass(frozen=True)
class RopeConfig:
    """A model's positions, layer by layer: :func:`rope_layers_from_config`'s result."""

    model_type: str | None
    layer_types: tuple[str, ...]
    rope: dict[str, LayerRoPE]
    nope_layers: tuple[int, ...] = ()
    no_attention_layers: tuple[int, ...] = ()
    max_position_embeddings: int | None = None

    def layer(self, index: int) -> LayerRoPE | None:
        """The rotation of layer ``index`` (``None`` for a NoPE or non-attention layer)."""
        for r in self.rope.values():
            if index in r.layers:
                return r
        if 0 <= index < len(self.layer_types):
            return None
        raise ValueError(f"index must be in [0, {len(self.layer_types)}), got {index}")


# ------------------------------------------------------------------------------ reading


def _as_dict(config: Any) -> dict[str, Any]:
    if isinstance(config, Mapping):
        cfg = dict(config)
    elif hasattr(config, "to_dict") and callable(config.to_dict):
        cfg = config.to_dict()
        if not isinstance(cfg, Mapping):
            raise TypeError(f"config.to_dict() must return a dict, got {type(cfg).__name__}")
        cfg = dict(cfg)
    else:
        raise TypeError(f"config must be a dict (config.json) or a transformers PretrainedConfig, got {type(config).__name__}")
    has_rope = any(k in cfg for k in ("rope_parameters", "rope_scaling", "rope_theta"))
    if not has_rope and isinstance(cfg.get("text_config"), Mapping):
        return _as_dict(cfg["text_config"])  # a composite (vision-language) config: its language model
    return cfg


def _int(cfg: Mapping[str, Any], key: str) -> int | None:
    v = cfg.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise ValueError(f"config[{key!r}] must be a positive int, got {v!r}")
    return int(v)


def _layer_types(cfg: Mapping[str, Any]) -> tuple[str, ...]:
    n = _int(cfg, "num_hidden_layers")
    types = cfg.get("layer_types")
    if types is not None:
        if isinstance(types, (str, bytes)) or not isinstance(types, Sequence) or not all(isinstance(t, str) for t in types):
            raise TypeError(f"config['layer_types'] must be a list of strings, got {types!r}")
        if n is not None and len(types) != n:
            raise ValueError(f"config['layer_types'] has {len(types)} entries for num_hidden_layers={n}; give one per layer")
        return tuple(types)
    if n is None:
        raise ValueError("config needs 'num_hidden_layers' (or 'layer_types', one per layer)")
    pattern = _int(cfg, "sliding_window_pattern")  # Gemma 2/3 config.json: every pattern-th layer is global
    if pattern is not None and cfg.get("sliding_window"):
        return tuple("full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n))
    return ("full_attention",) * n


def _per_type_params(cfg: Mapping[str, Any], types: Sequence[str]) -> dict[str, Mapping[str, Any] | None]:
    """One rope dict per attention layer type (``None``: the type has no RoPE)."""
    rp = cfg.get("rope_parameters")
    if rp is None:
        rp = cfg.get("rope_scaling")  # config.json before transformers 5
    attention_types = [t for t in dict.fromkeys(types) if t not in _NO_ATTENTION]
    if rp is not None and not isinstance(rp, Mapping):
        raise TypeError(f"config['rope_parameters'] must be a dict, got {type(rp).__name__}")
    rp = dict(rp or {})
    nested = {k: v for k, v in rp.items() if isinstance(v, Mapping) or (v is None and k in types)}
    if nested:
        stray = sorted(set(rp) - set(nested))
        if stray:
            raise ValueError(
                f"config['rope_parameters'] mixes layer types ({', '.join(map(repr, nested))}) with the keys "
                f"{', '.join(map(repr, stray))}: move them into each layer type's dict"
            )
        missing = [t for t in attention_types if t not in nested]
        if missing:
            raise ValueError(
                f"config['rope_parameters'] has no entry for layer type {missing[0]!r} (it has "
                f"{', '.join(map(repr, nested))}): add rope_parameters[{missing[0]!r}] or fix config['layer_types']"
            )
        theta, partial = cfg.get("rope_theta"), cfg.get("partial_rotary_factor")
        out: dict[str, Mapping[str, Any] | None] = {}
        for t in attention_types:
            p = nested[t]
            if p is not None:
                p = dict(p)
                if "type" not in p:
                    p.setdefault("rope_type", "default")  # as transformers reads a dict without a type
                if theta is not None:
                    p.setdefault("rope_theta", theta)
                if partial is not None:
                    p.setdefault("partial_rotary_factor", partial)
            out[t] = p
        return out
    flat = dict(rp)
    if "type" not in flat:
        flat.setdefault("rope_type", "default")
    for key in ("rope_theta", "partial_rotary_factor"):
        if cfg.get(key) is not None:
            flat.setdefault(key, cfg[key])
    if "partial_rotary_factor" not in flat and cfg.get("rotary_pct") is not None:
        flat["partial_rotary_factor"] = cfg["rotary_pct"]  # GPT-NeoX
    local = cfg.get("rope_local_base_freq")  # Gemma 3 config.json: the sliding layers' base, unscaled
    full_only = cfg.get("model_type") in _SCALING_ON_FULL_ONLY
    out = {}
    for t in attention_types:
        if local is not None and t == "sliding_attention":
            out[t] = {"rope_type": "default", "rope_theta": local}
        elif full_only and t != "full_attention":
            out[t] = {k: v for k, v in flat.items() if k in ("rope_theta", "partial_rotary_factor")}
            out[t]["rope_type"] = "default"
        else:
            out[t] = flat
    return out


def _head_dim(cfg: Mapping[str, Any], layer_type: str, index: int) -> tuple[int, int, int]:
    """``(head_dim, rotary width before partial, rotary_offset)`` of layer ``index``."""
    per_layer = cfg.get("per_layer_config")  # Gemma 4 (transformers' to_dict): overrides keyed by layer index
    if isinstance(per_layer, Mapping):
        for key, override in per_layer.items():
            if str(key).isdigit() and int(key) == index and isinstance(override, Mapping) and override.get("head_dim"):
                d = _int(override, "head_dim")
                return d, d, 0
    if layer_type == "full_attention" and cfg.get("global_head_dim"):
        d = _int(cfg, "global_head_dim")  # Gemma 4 config.json
        return d, d, 0
    rope_dim = _int(cfg, "qk_rope_head_dim")
    if rope_dim is not None:  # DeepSeek MLA: the rotated slice follows qk_nope_head_dim unrotated coordinates
        nope = _int(cfg, "qk_nope_head_dim") or 0
        return nope + rope_dim, rope_dim, nope
    d = _int(cfg, "head_dim")
    if d is None:
        hidden, heads = _int(cfg, "hidden_size"), _int(cfg, "num_attention_heads")
        if hidden is None or heads is None:
            raise ValueError("config needs 'head_dim' (or 'hidden_size' and 'num_attention_heads')")
        d = hidden // heads
    return d, d, 0


def _layout(cfg: Mapping[str, Any], model_type: str | None) -> str:
    flag = cfg.get("rope_interleave")
    if flag is not None and not isinstance(flag, (bool, np.bool_)):
        raise TypeError(f"config['rope_interleave'] must be true or false, got {flag!r}")
    if flag is not None:
        return "interleaved" if flag else "half"
    return "interleaved" if model_type in _INTERLEAVED_MODELS + _INTERLEAVE_BY_DEFAULT else "half"


def _sections(p: Mapping[str, Any], model_type: str | None) -> tuple[tuple[int, ...] | None, bool]:
    section = p.get("mrope_section", p.get("xdrope_section"))
    if section is None:
        section = _MROPE_DEFAULT_SECTIONS.get(model_type or "")
    flag = p.get("mrope_interleaved")
    if flag is not None and not isinstance(flag, (bool, np.bool_)):
        raise TypeError(f"rope_parameters['mrope_interleaved'] must be true or false, got {flag!r}")
    if section is None:
        if flag is not None:
            raise ValueError(
                "rope_parameters['mrope_interleaved'] is given without 'mrope_section': it assigns pairs to the "
                "time, height and width axes (it is not the pairing layout, which 'rope_interleave' sets); add the sections"
            )
        return None, False
    if isinstance(section, (str, bytes)) or not isinstance(section, Sequence):
        raise TypeError(f"rope_parameters['mrope_section'] must be a list of ints, got {section!r}")
    interleaved = bool(flag) or model_type in _MROPE_INTERLEAVED_MODELS
    return tuple(int(s) for s in section), interleaved


def _check_per_layer(cfg: Mapping[str, Any], key: str, n: int) -> list[Any] | None:
    v = cfg.get(key)
    if v is None:
        return None
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or len(v) != n:
        raise ValueError(f"config[{key!r}] must be a list with one entry per layer ({n}), got {v!r}")
    return list(v)


def rope_layers_from_config(config: Any) -> RopeConfig:
    """Read the positions of every layer from a Hugging Face config.

    Args:
        config: a dict (``config.json``, or ``PretrainedConfig.to_dict()``) or a
            ``transformers`` ``PretrainedConfig``; a vision-language config is read through
            its ``text_config``.

    Returns:
        A :class:`RopeConfig`: ``rope[layer_type]`` a :class:`LayerRoPE` per rotating
        layer type (GraniteSWA's per-layer bases: one entry per base, named
        ``"<type>@<base>"``), ``nope_layers`` (``no_rope_layers`` 0, ``layer_rope_theta`` 0,
        Cohere2's full-attention layers, a ``None`` entry of a nested dict) and
        ``no_attention_layers`` (linear attention and other layers without positions).

    Example:
        >>> cfg = {"model_type": "gemma3_text", "num_hidden_layers": 6, "head_dim": 256,
        ...        "max_position_embeddings": 131072,
        ...        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
        ...        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        ...            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}}
        >>> r = rope_layers_from_config(cfg)
        >>> r.rope["full_attention"].layers, r.rope["full_attention"].scaling
        ((5,), Linear(factor=8.0))
    """
    cfg = _as_dict(config)
    model_type = cfg.get("model_type")
    types = _layer_types(cfg)
    n = len(types)
    max_pos = _int(cfg, "max_position_embeddings")
    params = _per_type_params(cfg, types)
    no_rope = _check_per_layer(cfg, "no_rope_layers", n)
    layer_theta = _check_per_layer(cfg, "layer_rope_theta", n)
    layout = _layout(cfg, model_type)

    dims = [None if t in _NO_ATTENTION else _head_dim(cfg, t, i) for i, t in enumerate(types)]
    groups: dict[str, list[int]] = {}
    bases: dict[str, float | None] = {}
    nope, no_attention = [], []
    for i, t in enumerate(types):
        if t in _NO_ATTENTION:
            no_attention.append(i)
            continue
        if params[t] is None or (no_rope is not None and not no_rope[i]):
            nope.append(i)
            continue
        if model_type in _ROPE_ON_SLIDING_ONLY and t != "sliding_attention":
            nope.append(i)
            continue
        name, base = t, None
        if len({d for d, tt in zip(dims, types) if tt == t}) > 1:
            name = f"{t} (head_dim {dims[i][0]})"
        if layer_theta is not None:
            theta = layer_theta[i]
            if isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta < 0:
                raise ValueError(f"config['layer_rope_theta'][{i}] must be a base >= 0 (0: NoPE), got {theta!r}")
            if theta == 0:
                nope.append(i)
                continue
            base = float(theta)
            if len({th for th, tt in zip(layer_theta, types) if tt == t and th}) > 1:
                name = f"{t}@{base:g}"
        groups.setdefault(name, []).append(i)
        bases[name] = base

    rope: dict[str, LayerRoPE] = {}
    for name, layers in groups.items():
        t = types[layers[0]]
        p = dict(params[t])  # type: ignore[arg-type]
        section, mrope_interleaved = _sections(p, model_type)
        one_d = {k: v for k, v in p.items() if k not in _MULTIMODAL}
        kinds = {one_d.get("type"), one_d.get("rope_type")} - {None}
        if "mrope" in kinds and kinds <= {"mrope", "default"}:  # Qwen2-VL's config.json: transformers reads "default"
            one_d.pop("type", None)
            one_d["rope_type"] = "default"
        theta, partial, scaling = sc.from_hf(one_d, max_position_embeddings=max_pos)
        base = bases[name] if bases[name] is not None else theta
        if base is None:
            raise ValueError(
                f"config has no rope_theta for layer type {t!r}: add rope_parameters['rope_theta'] (transformers' "
                "default differs between model classes; 10,000 is not always right)"
            )
        head_dim, width, offset = dims[layers[0]]
        rotary_dim = width if isinstance(scaling, sc.Proportional) else int(width * (1.0 if partial is None else partial))
        if rotary_dim < 2 or rotary_dim % 2:
            raise ValueError(f"layer type {t!r}: rotary width {rotary_dim} (head_dim {width} x partial_rotary_factor {partial}) must be even and >= 2")
        if section is not None and sum(section) != rotary_dim // 2:
            raise ValueError(
                f"rope_parameters['mrope_section']={list(section)} must sum to rotary_dim / 2 = {rotary_dim // 2} "
                f"for layer type {t!r}"
            )
        rope[name] = LayerRoPE(
            layer_type=t, layers=tuple(layers), head_dim=head_dim, rotary_dim=rotary_dim, base=float(base),
            scaling=scaling, layout=layout, rotary_offset=offset, mrope_section=section,
            mrope_interleaved=mrope_interleaved, max_position_embeddings=max_pos,
        )
    return RopeConfig(
        model_type=model_type, layer_types=types, rope=rope, nope_layers=tuple(nope),
        no_attention_layers=tuple(no_attention), max_position_embeddings=max_pos,
    )


# ------------------------------------------------------------------------------ inspecting


def reach(layer: LayerRoPE, trained_length: int | None = None) -> float | None:
    """The effective reach of a layer type's scaling: the longest length at which every
    pair's angle stays inside the range it saw in pretraining.

    A pair whose wavelength fits in the trained length ``L`` (unscaled frequency
    ``omega_j``, ``L omega_j >= 2 pi``) has seen every angle; a slower pair has seen angles
    up to ``L omega_j`` only, which the scaled frequency ``omega'_j`` reaches at
    ``L omega_j / omega'_j``. The reach is the smallest of these (``inf`` if every pair
    turns within ``L``; ``None`` for ``"dynamic"``, whose frequencies follow each call's
    length, or when neither the config nor ``trained_length`` gives ``L``). Linear
    scaling by ``s`` reaches ``s L``.
    """
    L = layer.trained_length if trained_length is None else trained_length
    if L is None or isinstance(layer.scaling, sc.Dynamic):
        return None
    width = layer.head_dim if isinstance(layer.scaling, sc.Proportional) else layer.rotary_dim
    trained = np.array(inv_frequencies(width, layer.base))[: layer.rotary_dim // 2]
    long = isinstance(layer.scaling, sc.LongRoPE)
    scaled = layer.frequencies(seq_len=L + 1 if long else None)
    out = math.inf
    for w, w2 in zip(trained, scaled):
        if w2 == 0.0 or L * w >= 2 * math.pi:
            continue
        out = min(out, float(L * w / w2))
    return out


@dataclass(frozen=True)
class ConfigReport:
    """:func:`inspect_config`'s result: ``rows`` (one dict per layer type) and the layers
    without positions; ``str()`` is a readable table."""

    model_type: str | None
    num_layers: int
    rows: tuple[dict[str, Any], ...]
    nope_layers: tuple[int, ...]
    no_attention_layers: tuple[int, ...]
    notes: tuple[str, ...] = field(default=())

    def __str__(self) -> str:
        cols = ("layer type", "layers", "pairs", "layout", "base", "scaling", "turn within L", "L", "reach", "sections")
        lines = [[str(c) for c in cols]]
        for r in self.rows:
            lines.append([
                r["layer_type"], _ranges(r["layers"]), f"{r['rotated_pairs']}/{r['head_dim'] // 2}", r["layout"],
                f"{r['base']:g}", r["scaling"], "-" if r["turning_pairs"] is None else str(r["turning_pairs"]), "-" if r["trained_length"] is None else f"{r['trained_length']:,}",
                _length(r["reach"], r["scaling"].startswith("dynamic")), "-" if r["sections"] is None else r["sections"],
            ])
        widths = [max(len(line[i]) for line in lines) for i in range(len(cols))]
        text = [f"{self.model_type or 'model'}: {self.num_layers} layers"]
        text += ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
        text.append(f"NoPE layers: {_ranges(self.nope_layers) or 'none'}")
        if self.no_attention_layers:
            text.append(f"layers without attention (no positions): {_ranges(self.no_attention_layers)}")
        text += list(self.notes)
        return "\n".join(text)


def _length(x: float | None, dynamic: bool = False) -> str:
    if x is None:
        return "per call" if dynamic else "-"
    return "all" if math.isinf(x) else f"{x:,.0f}"


def _ranges(idx: Sequence[int]) -> str:
    parts, idx = [], list(idx)
    i = 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        parts.append(str(idx[i]) if i == j else f"{idx[i]}-{idx[j]}")
        i = j + 1
    return ", ".join(parts)


def _rule(s: sc.Scaling | None) -> str:
    if s is None:
        return "none"
    if isinstance(s, sc.LongRoPE):
        return f"longrope (factor {s.factor:g})"
    if isinstance(s, sc.Proportional):
        return f"proportional {s.partial_rotary_factor:g}" + ("" if s.factor == 1 else f" / {s.factor:g}")
    if isinstance(s, sc.NTK):
        return f"ntk (alpha {s.factor:g})"
    return f"{s.type} x{s.factor:g}"


def inspect_config(config: Any, *, trained_length: int | None = None) -> ConfigReport:
    """What every layer of a model does with positions, from its Hugging Face config.

    Each row (one per layer type that rotates) holds: ``layers``; ``head_dim``,
    ``rotary_dim``, ``rotary_offset`` and ``rotated_pairs`` (pairs with a non-zero
    frequency); ``layout`` (``"half"``: pairs ``(j, j + d/2)``, ``"interleaved"``:
    ``(2j, 2j + 1)``); ``base``, ``scaling`` (the rule, in words) and
    ``attention_scaling``; ``trained_length`` ``L``; ``turning_pairs``, the pairs whose
    (scaled) wavelength fits within ``L``, so that they complete a turn there, and
    ``first_slow_pair``, the first that does not; ``reach`` (:func:`reach`); ``sections``
    (multimodal RoPE: ``mrope_section`` and whether the pairs are assigned to axes
    interleaved, which is not the pairing layout).

    ``trained_length`` overrides ``L`` for every layer type, for a config that does not
    state the length its scaling extends (Gemma 3's ``"linear"``, HunYuan's NTK-alpha).

    Example:
        >>> rep = inspect_config({"num_hidden_layers": 2, "head_dim": 64, "max_position_embeddings": 16384,
        ...     "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}},
        ...     trained_length=4096)
        >>> rep.rows[0]["turning_pairs"], rep.rows[0]["reach"]
        (18, 16384.0)
    """
    from .._checks import check_int

    if trained_length is not None:
        trained_length = check_int("trained_length", trained_length)
    rc = rope_layers_from_config(config)
    rows = []
    notes = []
    for name, r in rc.rope.items():
        w = r.frequencies()
        L = r.trained_length if trained_length is None else trained_length
        turning = None if L is None else [j for j, x in enumerate(w) if x > 0 and 2 * math.pi / x <= L]
        first_slow = None if L is None else next((j for j, x in enumerate(w) if x > 0 and 2 * math.pi / x > L), None)
        sections = None
        if r.mrope_section is not None:
            sections = f"{list(r.mrope_section)} {'interleaved' if r.mrope_interleaved else 'blocks'}"
            if len(r.mrope_section) != 3:
                notes.append(f"{name}: {len(r.mrope_section)} position axes (XD-RoPE); an engine with three axes cannot run it")
        rows.append({
            "layer_type": name, "layers": r.layers, "head_dim": r.head_dim, "rotary_dim": r.rotary_dim,
            "rotary_offset": r.rotary_offset, "rotated_pairs": r.rotated_pairs, "layout": r.layout, "base": r.base,
            "scaling": _rule(r.scaling), "attention_scaling": r.attention_scaling(), "trained_length": L,
            "turning_pairs": None if turning is None else len(turning), "first_slow_pair": first_slow,
            "reach": reach(r, L), "sections": sections,
        })
        if isinstance(r.scaling, sc.Dynamic):
            notes.append(f"{name}: dynamic NTK, frequencies recomputed from each call's length beyond {L:,}")
    return ConfigReport(
        model_type=rc.model_type, num_layers=len(rc.layer_types), rows=tuple(rows), nope_layers=rc.nope_layers,
        no_attention_layers=rc.no_attention_layers, notes=tuple(notes),
    )
