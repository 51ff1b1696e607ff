"""posenc: positional encodings for transformers, as taught in the positional-encoding book.

Every public name is documented in the book's API reference. Numpy functions compute in
float64; torch modules take ``(batch, seq, dim)`` or ``(batch, heads, seq, head_dim)``.
"""

from .attention import SelfAttention, causal_mask
from .learned import LearnedPositionalEmbedding
from .plotting import book_style, use_book_style
from .sinusoidal import (
    SinusoidalPositionalEncoding,
    layout_permutation,
    relative_rotation,
    sinusoidal_encoding,
    sinusoidal_frequencies,
)

__version__ = "0.1.0"

__all__ = [
    "LearnedPositionalEmbedding",
    "SelfAttention",
    "SinusoidalPositionalEncoding",
    "book_style",
    "causal_mask",
    "layout_permutation",
    "relative_rotation",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "use_book_style",
]

# Each chapter registers its public names in its own block below: an import and an
# `__all__ +=` line, added with small targeted edits.

# --- rotary (chapter 4) ---
from .rotary import (  # noqa: E402
    RotaryEmbedding,
    apply_rotary,
    normalize_scaling,
    rotary_attention_factor,
    rotary_frequencies,
    rotary_permutation,
)

__all__ += [
    "RotaryEmbedding",
    "apply_rotary",
    "normalize_scaling",
    "rotary_attention_factor",
    "rotary_frequencies",
    "rotary_permutation",
]

# --- tabular (chapter 5) ---

# --- bias, models, tasks (chapter 6) ---
