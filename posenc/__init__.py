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
    attention_score_terms,
    normalize_scaling,
    rotary_attention_factor,
    rotary_frequencies,
    rotary_permutation,
    train_offset_head,
)

__all__ += [
    "RotaryEmbedding",
    "apply_rotary",
    "attention_score_terms",
    "normalize_scaling",
    "rotary_attention_factor",
    "rotary_frequencies",
    "rotary_permutation",
    "train_offset_head",
]

# --- tabular (chapter 5) ---
from .tabular import (  # noqa: E402
    ColumnEmbedding,
    FeatureTokenizer,
    PeriodicEmbedding,
    PiecewiseLinearEmbedding,
    PiecewiseLinearEncoding,
    SharedValueEmbedding,
    TabularTransformer,
    quantile_bins,
)
from .tabular_data import (  # noqa: E402
    TabularSplit,
    diabetes_split,
    feature_identity_task,
    fit_regressor,
    high_frequency_task,
    make_mlp,
    permutation_gap,
    r2_score,
    run_seeds,
    sklearn_baselines,
    summarize,
    validation_split,
    value_embedding_configs,
)

__all__ += [
    "ColumnEmbedding", "FeatureTokenizer", "PeriodicEmbedding", "PiecewiseLinearEmbedding",
    "PiecewiseLinearEncoding", "SharedValueEmbedding", "TabularTransformer", "quantile_bins",
    "TabularSplit", "diabetes_split", "feature_identity_task", "fit_regressor", "high_frequency_task",
    "make_mlp", "permutation_gap", "r2_score", "run_seeds", "sklearn_baselines", "summarize",
    "validation_split", "value_embedding_configs",
]

# --- bias, models, tasks (chapter 6) ---
from .bias import (  # noqa: E402
    ShawRelativePosition,
    T5RelativeBias,
    alibi_bias,
    alibi_slopes,
    relative_positions,
    t5_relative_bucket,
)
from .models import SCHEMES, CausalSelfAttention, PositionalTransformer, count_parameters  # noqa: E402
from .tasks import TASKS, TaskBatch, make_task_batch  # noqa: E402
from .training import RunConfig, evaluate_accuracy, run_trial, summarize_trials, train_model  # noqa: E402

__all__ += [
    "SCHEMES",
    "TASKS",
    "CausalSelfAttention",
    "PositionalTransformer",
    "RunConfig",
    "ShawRelativePosition",
    "T5RelativeBias",
    "TaskBatch",
    "alibi_bias",
    "alibi_slopes",
    "count_parameters",
    "evaluate_accuracy",
    "make_task_batch",
    "relative_positions",
    "run_trial",
    "summarize_trials",
    "t5_relative_bucket",
    "train_model",
]

# --- analysis (chapters 2-3) ---
from .analysis import (  # noqa: E402
    decade_above,
    float32_encoding,
    float32_row_error,
    min_distance_by_length,
    min_distance_float32,
    min_pairwise_distance,
    nearest_position,
    offset_distance,
    offset_dot_product,
    round_significant,
)
from .plotting import plot_encoding_heatmap  # noqa: E402
from .variants import (  # noqa: E402
    fairseq_positions,
    fairseq_sinusoidal_table,
    tensor2tensor_frequencies,
    tensor2tensor_timing_signal,
    timing_signal,
)

__all__ += [
    "decade_above",
    "fairseq_positions",
    "fairseq_sinusoidal_table",
    "float32_encoding",
    "float32_row_error",
    "min_distance_by_length",
    "min_distance_float32",
    "min_pairwise_distance",
    "nearest_position",
    "offset_distance",
    "offset_dot_product",
    "plot_encoding_heatmap",
    "round_significant",
    "tensor2tensor_frequencies",
    "tensor2tensor_timing_signal",
    "timing_signal",
]
