"""The book's laboratory: what the chapters need beyond the library.

``from posenc import book`` gives the measurements of the encodings and the rounding of
the numbers quoted in the prose (:mod:`~posenc.book.analysis`), the plotting helpers
(:mod:`~posenc.book.plotting`), the synthetic tasks, the small causal transformer and its
seeded training loop of chapter 6 (:mod:`~posenc.book.tasks`,
:mod:`~posenc.book.models`, :mod:`~posenc.book.training`), the tabular data sets, model
and baselines of chapter 5 (:mod:`~posenc.book.tabular`), and the results files of
``experiments/`` (:mod:`~posenc.book.results`). It needs the ``book`` extra
(matplotlib, scipy, scikit-learn): ``pip install posenc[book]``.
"""

from .analysis import (
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
from .models import SCHEMES, Block, PositionalTransformer, count_parameters
from .probes import attention_score_terms, rope_pair_usage, train_offset_head, train_rope_head
from .plotting import (
    SCHEME_STYLES,
    book_style,
    plot_encoding_heatmap,
    plot_length_extrapolation,
    use_book_style,
)
from .results import acc_key, pos_key, read_results, summarize, summarize_trials, to_numpy, write_results
from .tabular import (
    TabularSplit,
    TabularTransformer,
    best_by_validation,
    bootstrap_r2,
    diabetes_split,
    feature_identity_task,
    fit_regressor,
    high_frequency_task,
    make_mlp,
    make_mlp_plr,
    paired_difference,
    permutation_gap,
    r2_score,
    run_seeds,
    scores_by_model,
    sklearn_baselines,
    validation_split,
    value_embedding_configs,
)
from .tasks import TASKS, TaskBatch, make_task_batch
from .training import RunConfig, config_dict, evaluate_accuracy, run_trial, score_keys, seeded, train_model

__all__ = [
    # measurements and the numbers of the prose (chapters 2-3)
    "decade_above",
    "float32_encoding",
    "float32_row_error",
    "min_distance_by_length",
    "min_distance_float32",
    "min_pairwise_distance",
    "nearest_position",
    "offset_distance",
    "offset_dot_product",
    "round_significant",
    # probes of attention heads (chapter 4)
    "attention_score_terms",
    "rope_pair_usage",
    "train_offset_head",
    "train_rope_head",
    # plotting
    "SCHEME_STYLES",
    "book_style",
    "plot_encoding_heatmap",
    "plot_length_extrapolation",
    "use_book_style",
    # tasks, model and training loop (chapter 6)
    "SCHEMES",
    "TASKS",
    "Block",
    "PositionalTransformer",
    "RunConfig",
    "TaskBatch",
    "config_dict",
    "count_parameters",
    "evaluate_accuracy",
    "make_task_batch",
    "run_trial",
    "score_keys",
    "seeded",
    "train_model",
    # tabular data, model and baselines (chapter 5)
    "TabularSplit",
    "TabularTransformer",
    "best_by_validation",
    "bootstrap_r2",
    "diabetes_split",
    "feature_identity_task",
    "fit_regressor",
    "high_frequency_task",
    "make_mlp",
    "make_mlp_plr",
    "paired_difference",
    "permutation_gap",
    "r2_score",
    "run_seeds",
    "scores_by_model",
    "sklearn_baselines",
    "validation_split",
    "value_embedding_configs",
    # results files and summaries
    "acc_key",
    "pos_key",
    "read_results",
    "summarize",
    "summarize_trials",
    "to_numpy",
    "write_results",
]
