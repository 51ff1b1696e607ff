"""Rotary position embeddings (RoPE) as an engineer deploys them.

* :mod:`posenc.rope.core`: frequencies, tables and the rotation, the short file to copy;
* :mod:`posenc.rope.scaling`: one frozen dataclass per context-extension type, equal to
  ``transformers``' ``ROPE_INIT_FUNCTIONS``, and :func:`from_hf` for Hugging Face dicts;
* :mod:`posenc.rope.kernels`: the fast eager paths, chosen in one place;
* :mod:`posenc.rope.hf_config`: :func:`rope_layers_from_config` reads a whole Hugging Face
  config (layer types, NoPE layers, sections) and :func:`inspect_config` reports it;
* :mod:`posenc.rope.remap`: the relative positions of Self-Extend, Dual Chunk Attention
  and STRING, which extend a context by remapping positions instead of frequencies;
* :mod:`posenc.rope.module`: :class:`RotaryEmbedding`, :func:`apply_rotary`,
  :func:`apply_rotary_tables` and ``rotate``, with the argument checks, and
  ``posenc.rope.HuggingFaceRotary``, a drop-in ``rotary_emb`` for Hugging Face models.
"""

from .core import RotaryTables
from .module import HuggingFaceRotary, RotaryEmbedding, apply_rotary, apply_rotary_tables, frequencies, rotate
from .hf_config import ConfigReport, LayerRoPE, RopeConfig, inspect_config, rope_layers_from_config
from .remap import dual_chunk_positions, self_extend_positions, self_extend_reach, string_positions
from .scaling import NTK, Dynamic, Linear, Llama3, LongRoPE, Proportional, YaRN, from_hf

__all__ = [
    "ConfigReport",
    "HuggingFaceRotary",
    "LayerRoPE",
    "RopeConfig",
    "inspect_config",
    "rope_layers_from_config",
    "NTK",
    "Dynamic",
    "Linear",
    "Llama3",
    "LongRoPE",
    "Proportional",
    "RotaryEmbedding",
    "RotaryTables",
    "YaRN",
    "apply_rotary",
    "dual_chunk_positions",
    "apply_rotary_tables",
    "frequencies",
    "from_hf",
    "rotate",
    "self_extend_positions",
    "self_extend_reach",
    "string_positions",
]
