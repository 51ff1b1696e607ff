"""posenc: positional encodings for transformers, as taught in the positional-encoding book.

``posenc.__all__`` lists what a model needs. The reproductions of other code bases'
tables (tensor2tensor, fairseq, XLM, Marian layouts) and the chapters' mathematics
(frequency ladders, the shift matrix, scaling dicts) are in :mod:`posenc.reference`;
they stay importable from the top level for the chapters. RoPE's implementation is the
subpackage :mod:`posenc.rope` (the file to copy: :mod:`posenc.rope.core`).

The library depends on torch and numpy only. Numpy functions compute in float64; torch
modules take ``(batch, seq, dim)`` or ``(batch, heads, seq, head_dim)`` tensors. The
book's laboratory (measurements, plots, tasks, training loops, data sets) is the
subpackage :mod:`posenc.book` (its modules imported by name: ``from posenc.book import
analysis``; needs the ``book`` extra), which ``import posenc`` does not load.

Example:
    >>> import torch, posenc
    >>> rope = posenc.RotaryEmbedding(64)
    >>> rope(torch.randn(1, 8, 10, 64)).shape
    torch.Size([1, 8, 10, 64])
"""

from .attention import SelfAttention, causal_mask
from .bias import (
    ALiBiBias,
    AttentionBias,
    ShawRelativePosition,
    T5RelativeBias,
    alibi_bias,
    alibi_slopes,
    relative_positions,
    t5_relative_bucket,
)
from . import reference, rope
from .rope.hf_config import inspect_config, rope_layers_from_config
from .learned import LearnedPositionalEmbedding
from .multimodal import (
    AxialRotaryEmbedding,
    MixedRotaryEmbedding,
    MultimodalRotaryEmbedding,
    mrope_position_ids,
    sinusoidal_encoding_2d,
)
from .rotary import (
    RotaryEmbedding,
    RotaryTables,
    apply_rotary,
    apply_rotary_tables,
    normalize_scaling,
    rotary_attention_factor,
    rotary_frequencies,
    rotary_permutation,
)
from .sinusoidal import (
    SinusoidalPositionalEncoding,
    layout_permutation,
    relative_rotation,
    sinusoidal_encoding,
    sinusoidal_frequencies,
)
from .tabular import (
    ColumnEmbedding,
    FeatureTokenizer,
    PeriodicEmbedding,
    PiecewiseLinearEmbedding,
    PiecewiseLinearEncoding,
    SharedValueEmbedding,
    quantile_bins,
)
from .variants import (
    fairseq_positions,
    fairseq_sinusoidal_table,
    tensor2tensor_frequencies,
    tensor2tensor_timing_signal,
    timing_signal,
)

__version__ = "0.1.0"

__all__ = [
    # absolute positions added to the input (chapters 2 to 4 and 6)
    "SinusoidalPositionalEncoding",
    "sinusoidal_encoding",
    "relative_rotation",
    "LearnedPositionalEmbedding",
    # rotary embeddings (chapter 4; posenc.rope)
    "RotaryEmbedding",
    "RotaryTables",
    "apply_rotary",
    "apply_rotary_tables",
    "rotary_permutation",
    "rope_layers_from_config",
    "inspect_config",
    # images, video and multimodal sequences
    "sinusoidal_encoding_2d",
    "AxialRotaryEmbedding",
    "MixedRotaryEmbedding",
    "MultimodalRotaryEmbedding",
    "mrope_position_ids",
    # attention and the biases added to its scores (chapters 1 and 6)
    "SelfAttention",
    "causal_mask",
    "AttentionBias",
    "ALiBiBias",
    "T5RelativeBias",
    "ShawRelativePosition",
    "alibi_bias",
    "alibi_slopes",
    "t5_relative_bucket",
    # tabular feature embeddings (chapter 5)
    "ColumnEmbedding",
    "FeatureTokenizer",
    "PeriodicEmbedding",
    "PiecewiseLinearEmbedding",
    "PiecewiseLinearEncoding",
    "SharedValueEmbedding",
    "quantile_bins",
]
