"""Bad input to the laboratory: its public functions refuse it clearly.

Each case feeds one wrong argument (a wrong type, a wrong size, an empty list, a zero or
negative size, NaN or inf data, an unknown name, a string where an array goes) and expects
a ``ValueError`` or ``TypeError`` whose message names that argument: never an internal
error from numpy, torch or scikit-learn (``IndexError``, ``KeyError``, ``AttributeError``,
a torch ``RuntimeError``) and never a result computed from the bad value (a NaN score, an
empty table).

Run as a script to count the outcomes by kind::

    python tests/book/test_bad_input_book.py
"""

from __future__ import annotations

import math
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch import nn  # noqa: E402

from posenc import book  # noqa: E402
from posenc.book import models, plotting, resources, results, tasks  # noqa: E402
from posenc.book import analysis as _an, probes as _pr, realtext as _rt, tabular as _tb, vision as _vi  # noqa: E402
from posenc.book import engine as _en, training as _tr  # noqa: E402

NAN, INF = float("nan"), float("inf")


def _data():
    return _tb.feature_identity_task(16, 8, seed=0)


def _ax():
    fig, ax = plt.subplots()
    return ax


def _model(scheme="none"):
    return models.PositionalTransformer(16, scheme=scheme, d_model=8, n_heads=2, n_layers=1, max_len=32)


def _config(**kw):
    return _tr.RunConfig(train_len=8, steps=2, batch_size=2, d_model=8, n_heads=2, n_layers=1, **kw)


_ROW = {"task": "offset_copy", "scheme": "none", "variant": "plain", "seed": 0, "role": "main", "steps": 2,
        "acc_1x": 0.5, "beyond_2x": 0.2, "beyond_4x": 0.1, "pos_4x": [None, 0.5]}
_BARS = {("offset_copy", "none", "plain"): {"beyond_4x": (0.5, 0.1, 3)},
         ("offset_copy", "none", "bos"): {"beyond_4x": (0.6, 0.1, 3)}}
_COST = [{"scheme": s, "length": n, "ms_per_step": 1.0, "ms_min": 1.0, "ms_max": 1.0}
         for s in ("none", "rope") for n in (16, 32)]
_TAB_ROWS = [{"task": "t", "split": s, "model": m, "test_r2": 0.1 * s, "val_r2": 0.2}
             for s in (0, 1) for m in "ab"]
_SWEEP = {"fast": {k: np.zeros(2) for k in
                   ("abs_exact", "abs_median", "abs_far", "rel_exact", "rel_median", "rel_far")}}
_TABLE = _an.naive_encoding("binary", 8, 4)
_W = nn.Linear(4, 4).double()
_X4 = torch.randn(6, 4, dtype=torch.float64)

# (id, call, the argument the message must name)
CASES: list[tuple[str, object, str]] = [
    # --- analysis -----------------------------------------------------------------------
    ("add_vs_concat_readout d_model str", lambda: _an.add_vs_concat_readout("8"), "d_model"),
    ("add_vs_concat_readout d_model odd half", lambda: _an.add_vs_concat_readout(6), "d_model"),
    ("add_vs_concat_readout n_tokens 0", lambda: _an.add_vs_concat_readout(8, n_tokens=0), "n_tokens"),
    ("add_vs_concat_readout n_positions -1", lambda: _an.add_vs_concat_readout(8, n_positions=-1), "n_positions"),
    ("add_vs_concat_readout n_samples 0", lambda: _an.add_vs_concat_readout(8, n_samples=0), "n_samples"),
    ("add_vs_concat_readout seed str", lambda: _an.add_vs_concat_readout(8, seed="a"), "seed"),
    ("band_noise_sweep bands empty", lambda: _an.band_noise_sweep(8, 16, {}, np.array([0.1])), "bands"),
    ("band_noise_sweep bands str", lambda: _an.band_noise_sweep(8, 16, "fast", np.array([0.1])), "bands"),
    ("band_noise_sweep band half pair", lambda: _an.band_noise_sweep(8, 16, {"a": np.array([0])}, np.array([0.1])), "bands"),
    ("band_noise_sweep band out of range", lambda: _an.band_noise_sweep(8, 16, {"a": np.array([8, 9])}, np.array([0.1])), "bands"),
    ("band_noise_sweep sigmas negative", lambda: _an.band_noise_sweep(8, 16, {"a": np.arange(2)}, np.array([-0.1])), "sigmas"),
    ("band_noise_sweep sigmas nan", lambda: _an.band_noise_sweep(8, 16, {"a": np.arange(2)}, np.array([NAN])), "sigmas"),
    ("band_noise_sweep sigmas empty", lambda: _an.band_noise_sweep(8, 16, {"a": np.arange(2)}, np.array([])), "sigmas"),
    ("band_noise_sweep sigmas str", lambda: _an.band_noise_sweep(8, 16, {"a": np.arange(2)}, "0.1"), "sigmas"),
    ("band_noise_sweep length 0", lambda: _an.band_noise_sweep(8, 0, {"a": np.arange(2)}, np.array([0.1])), "length"),
    ("band_noise_sweep n_samples 0", lambda: _an.band_noise_sweep(8, 16, {"a": np.arange(2)}, np.array([0.1]), n_samples=0), "n_samples"),
    ("decade_above 0", lambda: _an.decade_above(0.0), "x"),
    ("decade_above nan", lambda: _an.decade_above(NAN), "x"),
    ("decade_above inf", lambda: _an.decade_above(INF), "x"),
    ("decade_above str", lambda: _an.decade_above("1"), "x"),
    ("decode_offsets max_offset 0", lambda: _an.decode_offsets(np.zeros((2, 2)), np.zeros((2, 2)), [0.1], 0), "max_offset"),
    ("decode_offsets shapes", lambda: _an.decode_offsets(np.zeros((2, 2)), np.zeros((3, 2)), [0.1], 4), "first"),
    ("decode_offsets first nan", lambda: _an.decode_offsets(np.full((2, 2), NAN), np.zeros((2, 2)), [0.1], 4), "first"),
    ("decode_offsets omegas nan", lambda: _an.decode_offsets(np.zeros((2, 2)), np.zeros((2, 2)), [NAN], 4), "omegas"),
    ("decode_offsets first str", lambda: _an.decode_offsets("ab", np.zeros((2, 2)), [0.1], 4), "first"),
    ("float32_encoding positions nan", lambda: _an.float32_encoding([NAN], 8), "positions"),
    ("float32_encoding positions str", lambda: _an.float32_encoding("abc", 8), "positions"),
    ("float32_encoding d_model 0", lambda: _an.float32_encoding(4, 0), "d_model"),
    ("float32_encoding base negative", lambda: _an.float32_encoding(4, 8, base=-1.0), "base"),
    ("float32_encoding base nan", lambda: _an.float32_encoding(4, 8, base=NAN), "base"),
    ("float32_row_error positions inf", lambda: _an.float32_row_error([INF], 8), "positions"),
    ("float32_row_error base 0", lambda: _an.float32_row_error(4, 8, base=0.0), "base"),
    ("linear_shift_residual offset 0", lambda: _an.linear_shift_residual(_TABLE, 0), "offset"),
    ("linear_shift_residual offset too big", lambda: _an.linear_shift_residual(_TABLE, 8), "offset"),
    ("linear_shift_residual table 1-D", lambda: _an.linear_shift_residual(np.arange(8.0), 1), "table"),
    ("linear_shift_residual table nan", lambda: _an.linear_shift_residual(np.full((8, 2), NAN), 1), "table"),
    ("linear_shift_residual table str", lambda: _an.linear_shift_residual("table", 1), "table"),
    ("min_distance_by_length max_len 1", lambda: _an.min_distance_by_length(1, 8), "max_len"),
    ("min_distance_by_length d_model odd", lambda: _an.min_distance_by_length(8, 7), "d_model"),
    ("min_distance_by_length base nan", lambda: _an.min_distance_by_length(8, 8, base=NAN), "base"),
    ("min_distance_float32 lengths empty", lambda: _an.min_distance_float32(np.array([], dtype=int), 8), "lengths"),
    ("min_distance_float32 lengths 1", lambda: _an.min_distance_float32(np.array([1]), 8), "length"),
    ("min_distance_float32 lengths float", lambda: _an.min_distance_float32(np.array([2.5]), 8), "lengths"),
    ("min_distance_float32 d_model 0", lambda: _an.min_distance_float32(np.array([4]), 0), "d_model"),
    ("min_pairwise_distance one row", lambda: _an.min_pairwise_distance(np.zeros((1, 3))), "table"),
    ("min_pairwise_distance nan", lambda: _an.min_pairwise_distance(np.full((3, 2), NAN)), "table"),
    ("min_pairwise_distance 1-D", lambda: _an.min_pairwise_distance(np.arange(3.0)), "table"),
    ("min_pairwise_distance str", lambda: _an.min_pairwise_distance("abc"), "table"),
    ("naive_encoding kind", lambda: _an.naive_encoding("foo", 4), "kind"),
    ("naive_encoding kind int", lambda: _an.naive_encoding(3, 4), "kind"),
    ("naive_encoding length 0", lambda: _an.naive_encoding("binary", 0), "length"),
    ("naive_encoding d_model 0", lambda: _an.naive_encoding("binary", 4, 0), "d_model"),
    ("nearest_position widths", lambda: _an.nearest_position(np.zeros((2, 3)), np.zeros((4, 2))), "queries"),
    ("nearest_position empty table", lambda: _an.nearest_position(np.zeros((2, 3)), np.zeros((0, 3))), "table"),
    ("nearest_position queries nan", lambda: _an.nearest_position(np.full((2, 3), NAN), np.zeros((4, 3))), "queries"),
    ("nearest_position table str", lambda: _an.nearest_position(np.zeros((2, 3)), "abc"), "table"),
    ("offset_distance d_model 0", lambda: _an.offset_distance([1, 2], 0), "d_model"),
    ("offset_distance offsets nan", lambda: _an.offset_distance([NAN], 8), "offsets"),
    ("offset_distance offsets str", lambda: _an.offset_distance("a", 8), "offsets"),
    ("offset_distance base negative", lambda: _an.offset_distance([1], 8, base=-2.0), "base"),
    ("offset_dot_product d_model odd", lambda: _an.offset_dot_product([1], 7), "d_model"),
    ("offset_dot_product offsets inf", lambda: _an.offset_dot_product([INF], 8), "offsets"),
    ("round_significant nan", lambda: _an.round_significant(NAN), "x"),
    ("round_significant inf", lambda: _an.round_significant(INF), "x"),
    ("round_significant str", lambda: _an.round_significant("1.5"), "x"),
    ("round_significant digits 0", lambda: _an.round_significant(1.5, 0), "digits"),
    # --- probes -------------------------------------------------------------------------
    ("attention_score_terms shapes", lambda: _pr.attention_score_terms(torch.zeros(3, 4), torch.zeros(2, 4), torch.zeros(2, 4), torch.zeros(2, 4)), "tokens"),
    ("attention_score_terms str", lambda: _pr.attention_score_terms("abc", torch.zeros(3, 4), torch.zeros(2, 4), torch.zeros(2, 4)), "tokens"),
    ("attention_score_terms nan", lambda: _pr.attention_score_terms(torch.full((3, 4), NAN), torch.zeros(3, 4), torch.zeros(2, 4), torch.zeros(2, 4)), "tokens"),
    ("attention_score_terms w_q shape", lambda: _pr.attention_score_terms(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(2, 5), torch.zeros(2, 4)), "w_q"),
    ("rope_pair_usage w_q str", lambda: _pr.rope_pair_usage("w", _W, _X4), "w_q"),
    ("rope_pair_usage x str", lambda: _pr.rope_pair_usage(_W, _W, "x"), "x"),
    ("rope_pair_usage x nan", lambda: _pr.rope_pair_usage(_W, _W, torch.full((6, 4), NAN, dtype=torch.float64)), "x"),
    ("rope_pair_usage x width", lambda: _pr.rope_pair_usage(_W, _W, torch.zeros(6, 5, dtype=torch.float64)), "x"),
    ("rope_pair_usage odd head", lambda: _pr.rope_pair_usage(nn.Linear(4, 3).double(), nn.Linear(4, 3).double(), _X4), "w_q"),
    ("rope_pair_usage x zero", lambda: _pr.rope_pair_usage(nn.Linear(4, 4, bias=False).double(), _W, torch.zeros(6, 4, dtype=torch.float64)), "x"),
    ("train_offset_head d_model 1", lambda: _pr.train_offset_head(1), "d_model"),
    ("train_offset_head offset >= seq_len", lambda: _pr.train_offset_head(8, 4, 4), "offset"),
    ("train_offset_head steps 0", lambda: _pr.train_offset_head(8, 4, 1, steps=0), "steps"),
    ("train_offset_head batch 0", lambda: _pr.train_offset_head(8, 4, 1, steps=1, batch=0), "batch"),
    ("train_offset_head batch -2", lambda: _pr.train_offset_head(8, 4, 1, steps=1, batch=-2), "batch"),
    ("train_offset_head lr nan", lambda: _pr.train_offset_head(8, 4, 1, steps=1, lr=NAN), "lr"),
    ("train_offset_head lr -1", lambda: _pr.train_offset_head(8, 4, 1, steps=1, lr=-1.0), "lr"),
    ("train_offset_head content_scale nan", lambda: _pr.train_offset_head(8, 4, 1, steps=1, content_scale=NAN), "content_scale"),
    ("train_offset_head seed str", lambda: _pr.train_offset_head(8, 4, 1, steps=1, seed="a"), "seed"),
    ("train_offset_head dtype int", lambda: _pr.train_offset_head(8, 4, 1, steps=1, dtype=torch.int64), "dtype"),
    ("train_rope_head task", lambda: _pr.train_rope_head("foo"), "task"),
    ("train_rope_head head_dim odd", lambda: _pr.train_rope_head(_pr.ROPE_PROBE_TASKS[0], head_dim=5, steps=1), "head_dim"),
    ("train_rope_head batch 0", lambda: _pr.train_rope_head(_pr.ROPE_PROBE_TASKS[0], steps=1, batch=0), "batch"),
    ("train_rope_head batch -1", lambda: _pr.train_rope_head(_pr.ROPE_PROBE_TASKS[0], steps=1, batch=-1), "batch"),
    ("train_rope_head lr 0", lambda: _pr.train_rope_head(_pr.ROPE_PROBE_TASKS[0], steps=1, lr=0.0), "lr"),
    ("train_rope_head base -1", lambda: _pr.train_rope_head(_pr.ROPE_PROBE_TASKS[0], steps=1, base=-1.0), "base"),
    ("train_rope_head base nan", lambda: _pr.train_rope_head(_pr.ROPE_PROBE_TASKS[0], steps=1, base=NAN), "base"),
    ("train_rope_head seed str", lambda: _pr.train_rope_head(_pr.ROPE_PROBE_TASKS[0], steps=1, seed="s"), "seed"),
    # --- plotting -----------------------------------------------------------------------
    ("figure_png not a figure", lambda: plotting.figure_png("fig"), "fig"),
    ("figure_png colors 1", lambda: plotting.figure_png(plt.figure(), colors=1), "colors"),
    ("figure_problems not a figure", lambda: plotting.figure_problems("fig"), "fig"),
    ("plot_encoding_heatmap 1-D", lambda: plotting.plot_encoding_heatmap(_ax(), np.zeros(3)), "table"),
    ("plot_encoding_heatmap str", lambda: plotting.plot_encoding_heatmap(_ax(), "table"), "table"),
    ("plot_encoding_heatmap label_every 0", lambda: plotting.plot_encoding_heatmap(_ax(), np.zeros((3, 2)), label_every=-1), "label_every"),
    ("plot_encoding_heatmap ax str", lambda: plotting.plot_encoding_heatmap("ax", np.zeros((3, 2))), "ax"),
    ("plot_naive_candidates empty", lambda: plotting.plot_naive_candidates([], {}), "tables"),
    ("plot_naive_candidates max_rows -1", lambda: plotting.plot_naive_candidates([_ax()], {"a": np.eye(3)}, max_rows=-1), "max_rows"),
    ("plot_naive_candidates table 1-D", lambda: plotting.plot_naive_candidates([_ax()], {"a": np.arange(3.0)}), "tables"),
    ("plot_noise_sweep empty", lambda: plotting.plot_noise_sweep([0.1, 0.2], {}), "sweep"),
    ("plot_noise_sweep levels", lambda: plotting.plot_noise_sweep([0.1], _SWEEP), "sigmas"),
    ("plot_noise_sweep band keys", lambda: plotting.plot_noise_sweep([0.1, 0.2], {"fast": {}}), "sweep"),
    ("plot_noise_sweep sigmas str", lambda: plotting.plot_noise_sweep("ab", _SWEEP), "sigmas"),
    ("plot_noise_sweep sigmas 0", lambda: plotting.plot_noise_sweep([0.0, 0.1], _SWEEP), "sigmas"),
    ("plot_position_curves rows empty", lambda: plotting.plot_position_curves(_ax(), [], "offset_copy", "plain", ["none"]), "rows"),
    ("plot_position_curves key", lambda: plotting.plot_position_curves(_ax(), [_ROW], "offset_copy", "plain", ["none"], key="pos_8x"), "key"),
    ("plot_position_curves row fields", lambda: plotting.plot_position_curves(_ax(), [{"pos_4x": [0.5]}], "offset_copy", "plain", ["none"]), "rows"),
    ("plot_position_curves nothing drawn", lambda: plotting.plot_position_curves(_ax(), [_ROW], "foo", "plain", ["none"]), "task"),
    ("plot_position_curves rows str", lambda: plotting.plot_position_curves(_ax(), "rows", "offset_copy", "plain", ["none"]), "rows"),
    ("plot_scheme_bars key", lambda: plotting.plot_scheme_bars(_ax(), _BARS, "offset_copy", ["none"], key="acc_9x"), "key"),
    ("plot_scheme_bars variants empty", lambda: plotting.plot_scheme_bars(_ax(), _BARS, "offset_copy", ["none"], variants=()), "variants"),
    ("plot_scheme_bars scheme", lambda: plotting.plot_scheme_bars(_ax(), _BARS, "offset_copy", ["rope"]), "schemes"),
    ("plot_scheme_bars task", lambda: plotting.plot_scheme_bars(_ax(), _BARS, "foo", ["none"]), "task"),
    ("plot_scheme_bars summary str", lambda: plotting.plot_scheme_bars(_ax(), "summary", "offset_copy", ["none"]), "summary"),
    ("plot_step_cost relative_to", lambda: plotting.plot_step_cost(_ax(), _COST, ["none"], relative_to="alibi"), "relative_to"),
    ("plot_step_cost rows empty", lambda: plotting.plot_step_cost(_ax(), [], ["none"]), "cost_rows"),
    ("plot_step_cost row fields", lambda: plotting.plot_step_cost(_ax(), [{"scheme": "none"}], ["none"]), "cost_rows"),
    ("plot_step_cost scheme", lambda: plotting.plot_step_cost(_ax(), _COST, ["alibi"]), "schemes"),
    ("plot_step_cost lengths differ", lambda: plotting.plot_step_cost(_ax(), _COST + [{"scheme": "rope", "length": 64, "ms_per_step": 1.0, "ms_min": 1.0, "ms_max": 1.0}], ["rope"]), "cost_rows"),
    # --- tasks --------------------------------------------------------------------------
    ("first_scored task", lambda: tasks.first_scored("foo"), "task"),
    ("first_scored offset 0", lambda: tasks.first_scored(tasks.RELATIVE_TASKS[0], offset=0), "offset"),
    ("make_task_batch task", lambda: tasks.make_task_batch("foo", 2, 8), "task"),
    ("make_task_batch batch_size 0", lambda: tasks.make_task_batch("offset_copy", 0, 8), "batch_size"),
    ("make_task_batch batch_size -1", lambda: tasks.make_task_batch("offset_copy", -1, 8), "batch_size"),
    ("make_task_batch length 0", lambda: tasks.make_task_batch("offset_copy", 2, 0), "length"),
    ("make_task_batch vocab_size 1", lambda: tasks.make_task_batch("offset_copy", 2, 8, vocab_size=1), "vocab_size"),
    ("make_task_batch bos str", lambda: tasks.make_task_batch("offset_copy", 2, 8, bos="yes"), "bos"),
    ("make_task_batch generator", lambda: tasks.make_task_batch("offset_copy", 2, 8, generator=1), "generator"),
    ("TaskBatch str", lambda: tasks.TaskBatch("a", "b", "c"), "inputs"),
    ("TaskBatch shapes", lambda: tasks.TaskBatch(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long), torch.ones(2, 3, dtype=torch.bool)), "targets"),
    # --- models -------------------------------------------------------------------------
    ("Block d_model 0", lambda: models.Block(0, 2, 8), "d_model"),
    ("Block n_heads divides", lambda: models.Block(8, 3, 8), "n_heads"),
    ("Block n_heads 0", lambda: models.Block(8, 0, 8), "n_heads"),
    ("Block d_ff 0", lambda: models.Block(8, 2, 0), "d_ff"),
    ("Block activation", lambda: models.Block(8, 2, 8, activation="tanh"), "activation"),
    ("Block shaw_max_distance 0", lambda: models.Block(8, 2, 8, shaw_max_distance=0), "shaw_max_distance"),
    ("Block forward x str", lambda: models.Block(8, 2, 8)("x"), "x"),
    ("Block forward x width", lambda: models.Block(8, 2, 8)(torch.zeros(1, 3, 5)), "x"),
    ("count_parameters str", lambda: models.count_parameters("m"), "module"),
    ("PositionalTransformer vocab 0", lambda: models.PositionalTransformer(0), "vocab_size"),
    ("PositionalTransformer scheme", lambda: models.PositionalTransformer(16, scheme="foo"), "scheme"),
    ("PositionalTransformer n_heads", lambda: models.PositionalTransformer(16, n_heads=3), "n_heads"),
    ("PositionalTransformer max_len -1", lambda: models.PositionalTransformer(16, max_len=-1), "max_len"),
    ("PositionalTransformer d_ff 0", lambda: models.PositionalTransformer(16, d_ff=0), "d_ff"),
    ("PositionalTransformer tokens float", lambda: _model()(torch.zeros(1, 4)), "tokens"),
    ("PositionalTransformer tokens >= vocab", lambda: _model()(torch.full((1, 4), 16)), "tokens"),
    ("PositionalTransformer tokens negative", lambda: _model()(torch.full((1, 4), -1)), "tokens"),
    ("PositionalTransformer tokens too long learned", lambda: _model("learned")(torch.zeros(1, 40, dtype=torch.long)), "max_len"),
    ("PositionalTransformer tokens str", lambda: _model()("abc"), "tokens"),
    ("PositionalTransformer tokens empty", lambda: _model()(torch.zeros(1, 0, dtype=torch.long)), "tokens"),
    ("PositionalTransformer position_attention length 0", lambda: _model("learned").position_attention(0), "length"),
    ("random_positions batch 0", lambda: models.random_positions(0, 4, 8), "batch_size"),
    ("random_positions length > max_len", lambda: models.random_positions(2, 9, 8), "length"),
    ("random_positions max_len 0", lambda: models.random_positions(2, 4, 0), "max_len"),
    ("random_positions generator", lambda: models.random_positions(2, 4, 8, generator="g"), "generator"),
    # --- training -----------------------------------------------------------------------
    ("beyond_key 0", lambda: _tr.beyond_key(0), "factor"),
    ("beyond_key str", lambda: _tr.beyond_key("2"), "factor"),
    ("context_extension not rope", lambda: _tr.context_extension(_model(), "offset_copy", _config(), seed=0), "model"),
    ("context_extension factor 1", lambda: _tr.context_extension(_model("rope"), "offset_copy", _config(), seed=0, factor=1), "factor"),
    ("context_extension task", lambda: _tr.context_extension(_model("rope"), "foo", _config(), seed=0), "task"),
    ("context_extension seed -1", lambda: _tr.context_extension(_model("rope"), "offset_copy", _config(), seed=-1), "seed"),
    ("evaluate_accuracy task", lambda: _tr.evaluate_accuracy(_model(), "foo", 8, _config(), seed=0), "task"),
    ("evaluate_accuracy length 0", lambda: _tr.evaluate_accuracy(_model(), "offset_copy", 0, _config(), seed=0), "length"),
    ("evaluate_accuracy start", lambda: _tr.evaluate_accuracy(_model(), "offset_copy", 8, _config(), seed=0, start=8), "start"),
    ("evaluate_accuracy config", lambda: _tr.evaluate_accuracy(_model(), "offset_copy", 8, "config", seed=0), "config"),
    ("evaluate_accuracy model", lambda: _tr.evaluate_accuracy("model", "offset_copy", 8, _config(), seed=0), "model"),
    ("accuracy_at_step saved", lambda: _tr.accuracy_at_step({}, ("offset_copy", "none", "plain"), 2), "saved"),
    ("accuracy_at_step group", lambda: _tr.accuracy_at_step({"rows": [_ROW]}, ("offset_copy", "none"), 2), "group"),
    ("accuracy_at_step step -1", lambda: _tr.accuracy_at_step({"rows": [_ROW]}, ("offset_copy", "none", "plain"), -1), "step"),
    ("accuracy_at_step key", lambda: _tr.accuracy_at_step({"rows": [_ROW]}, ("offset_copy", "none", "plain"), 2, key="acc_9x"), "key"),
    ("accuracy_at_step no group", lambda: _tr.accuracy_at_step({"rows": [_ROW]}, ("offset_copy", "rope", "plain"), 2), "group"),
    ("final_rows saved", lambda: _tr.final_rows([]), "saved"),
    ("final_rows role", lambda: _tr.final_rows({"rows": [_ROW]}, role="foo"), "role"),
    ("grid_summary empty", lambda: _tr.grid_summary([]), "rows"),
    ("grid_summary row fields", lambda: _tr.grid_summary([{"acc_1x": 0.5}]), "rows"),
    ("grid_summary key", lambda: _tr.grid_summary([_ROW], keys=("acc_9x",)), "keys"),
    ("grid_summary solved 2", lambda: _tr.grid_summary([_ROW], solved=2.0), "solved"),
    ("grid_summary solved nan", lambda: _tr.grid_summary([_ROW], solved=NAN), "solved"),
    ("grid_summary rows str", lambda: _tr.grid_summary("rows"), "rows"),
    ("run_trial scheme", lambda: _tr.run_trial("foo", "offset_copy", 0, _config()), "scheme"),
    ("run_trial task", lambda: _tr.run_trial("none", "foo", 0, _config()), "task"),
    ("run_trial seed -1", lambda: _tr.run_trial("none", "offset_copy", -1, _config()), "seed"),
    ("run_trial checkpoints 0", lambda: _tr.run_trial("none", "offset_copy", 0, _config(), checkpoints=(0,)), "checkpoints"),
    ("run_trial checkpoints > steps", lambda: _tr.run_trial("none", "offset_copy", 0, _config(), checkpoints=(5,)), "checkpoints"),
    ("run_trial config", lambda: _tr.run_trial("none", "offset_copy", 0, "config"), "config"),
    ("RunConfig steps 0", lambda: _tr.RunConfig(steps=0), "steps"),
    ("RunConfig batch_size -1", lambda: _tr.RunConfig(batch_size=-1), "batch_size"),
    ("RunConfig lr nan", lambda: _tr.RunConfig(lr=NAN), "lr"),
    ("RunConfig eval_factors", lambda: _tr.RunConfig(eval_factors=(2,)), "eval_factors"),
    ("RunConfig dtype", lambda: _tr.RunConfig(dtype="float16"), "dtype"),
    ("RunConfig train_len 0", lambda: _tr.RunConfig(train_len=0), "train_len"),
    ("RunConfig n_heads divides", lambda: _tr.RunConfig(d_model=8, n_heads=3), "n_heads"),
    ("seeded -1", lambda: _en.seeded(-1).__enter__(), "seed"),
    ("seeded str", lambda: _en.seeded("a").__enter__(), "seed"),
    ("train_model model", lambda: _tr.train_model("m", "offset_copy", _config(), seed=0), "model"),
    ("train_model task", lambda: _tr.train_model(_model(), "foo", _config(), seed=0), "task"),
    ("train_model callback", lambda: _tr.train_model(_model(), "offset_copy", _config(), seed=0, callback=1), "callback"),
    ("train_model vocab mismatch", lambda: _tr.train_model(models.PositionalTransformer(4, d_model=8, n_heads=2, n_layers=1), "offset_copy", _config(), seed=0), "vocab_size"),
    ("verdict nan", lambda: _tr.verdict(NAN, None), "acc_1x"),
    ("verdict str", lambda: _tr.verdict("a", None), "acc_1x"),
    ("verdict acc_1x 2", lambda: _tr.verdict(2.0, None), "acc_1x"),
    ("verdict beyond_4x -1", lambda: _tr.verdict(0.9, -1.0), "beyond_4x"),
    # --- tabular ------------------------------------------------------------------------
    ("best_by_validation row fields", lambda: _tb.best_by_validation([{"model": "a"}]), "rows"),
    ("best_by_validation rows str", lambda: _tb.best_by_validation("rows"), "rows"),
    ("best_by_validation empty", lambda: _tb.best_by_validation([]), "rows"),
    ("best_by_validation by str", lambda: _tb.best_by_validation(_TAB_ROWS, by="task"), "by"),
    ("best_by_validation val_r2 nan", lambda: _tb.best_by_validation([dict(_TAB_ROWS[0], val_r2=NAN)]), "rows"),
    ("bootstrap_r2 nan", lambda: _tb.bootstrap_r2([1.0, 2.0, 3.0], [1.0, NAN, 3.0]), "y_pred"),
    ("bootstrap_r2 y_true nan", lambda: _tb.bootstrap_r2([1.0, NAN, 3.0], [1.0, 2.0, 3.0]), "y_true"),
    ("bootstrap_r2 empty", lambda: _tb.bootstrap_r2([], []), "y_true"),
    ("bootstrap_r2 constant", lambda: _tb.bootstrap_r2([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]), "y_true"),
    ("bootstrap_r2 two rows", lambda: _tb.bootstrap_r2([1.0, 2.0], [1.0, 2.0], n_resamples=200), "y_true"),
    ("bootstrap_r2 str", lambda: _tb.bootstrap_r2("abc", [1.0, 2.0, 3.0]), "y_true"),
    ("bootstrap_r2 n_resamples 0", lambda: _tb.bootstrap_r2([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], n_resamples=0), "n_resamples"),
    ("bootstrap_r2 seed str", lambda: _tb.bootstrap_r2([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], seed="a"), "seed"),
    ("diabetes_split 0.999", lambda: _tb.diabetes_split(0.999), "test_fraction"),
    ("diabetes_split 0.001", lambda: _tb.diabetes_split(0.001), "test_fraction"),
    ("diabetes_split nan", lambda: _tb.diabetes_split(NAN), "test_fraction"),
    ("diabetes_split str", lambda: _tb.diabetes_split("0.25"), "test_fraction"),
    ("diabetes_split seed str", lambda: _tb.diabetes_split(seed="a"), "seed"),
    ("feature_identity_task n_train 1", lambda: _tb.feature_identity_task(1), "n_train"),
    ("feature_identity_task n_test 0", lambda: _tb.feature_identity_task(8, 0), "n_test"),
    ("feature_identity_task n_test 1", lambda: _tb.feature_identity_task(8, 1), "n_test"),
    ("feature_identity_task n_features 1", lambda: _tb.feature_identity_task(8, 8, 1), "n_features"),
    ("feature_identity_task seed str", lambda: _tb.feature_identity_task(8, 8, seed="s"), "seed"),
    ("fit_regressor make_model", lambda: _tb.fit_regressor("mlp", _data()), "make_model"),
    ("fit_regressor make_model returns", lambda: _tb.fit_regressor(lambda: "m", _data(), steps=1), "make_model"),
    ("fit_regressor data", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), "data"), "data"),
    ("fit_regressor steps 0", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=0), "steps"),
    ("fit_regressor lr -1", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, lr=-1.0), "lr"),
    ("fit_regressor lr nan", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, lr=NAN), "lr"),
    ("fit_regressor lr str", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, lr="0.1"), "lr"),
    ("fit_regressor weight_decay -1", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, weight_decay=-1.0), "weight_decay"),
    ("fit_regressor batch_size 0", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, batch_size=0), "batch_size"),
    ("fit_regressor batch_size -3", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, batch_size=-3), "batch_size"),
    ("fit_regressor batch_size float", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, batch_size=2.5), "batch_size"),
    ("fit_regressor validation 0", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, validation=0), "validation"),
    ("fit_regressor validation 1", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, validation=1), "validation"),
    ("fit_regressor eval_every 0", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, eval_every=0), "eval_every"),
    ("fit_regressor patience 0", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, patience=0), "patience"),
    ("fit_regressor curve str", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, curve="yes"), "curve"),
    ("fit_regressor seed str", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, seed="s"), "seed"),
    ("fit_regressor width mismatch", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(3), _data(), steps=1), "make_model"),
    ("fit_regressor lr diverges", lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=30, lr=1e6), "lr"),
    ("high_frequency_task frequency 0", lambda: _tb.high_frequency_task(8, 8, frequency=0.0), "frequency"),
    ("high_frequency_task noise -1", lambda: _tb.high_frequency_task(8, 8, noise=-1.0), "noise"),
    ("high_frequency_task noise nan", lambda: _tb.high_frequency_task(8, 8, noise=NAN), "noise"),
    ("high_frequency_task noise inf", lambda: _tb.high_frequency_task(8, 8, noise=INF), "noise"),
    ("high_frequency_task shape", lambda: _tb.high_frequency_task(8, 8, shape="square"), "shape"),
    ("high_frequency_task n_train 1", lambda: _tb.high_frequency_task(1, 8), "n_train"),
    ("high_frequency_task n_test 1", lambda: _tb.high_frequency_task(8, 1), "n_test"),
    ("make_mlp 0", lambda: _tb.make_mlp(0), "n_features"),
    ("make_mlp d_hidden -1", lambda: _tb.make_mlp(3, -1), "d_hidden"),
    ("make_mlp n_hidden str", lambda: _tb.make_mlp(3, 4, "2"), "n_hidden"),
    ("make_mlp_plr 0", lambda: _tb.make_mlp_plr(0), "n_features"),
    ("make_mlp_plr d_embedding 0", lambda: _tb.make_mlp_plr(3, 0), "d_embedding"),
    ("make_mlp_plr sigma -1", lambda: _tb.make_mlp_plr(3, sigma=-1.0), "sigma"),
    ("make_mlp_plr n_frequencies 0", lambda: _tb.make_mlp_plr(3, n_frequencies=0), "n_frequencies"),
    ("make_mlp_plr d_hidden 0", lambda: _tb.make_mlp_plr(3, d_hidden=0), "d_hidden"),
    ("paired_difference lengths", lambda: _tb.paired_difference([1.0, 2.0], [1.0]), "a"),
    ("paired_difference one split", lambda: _tb.paired_difference([1.0], [1.0]), "a"),
    ("paired_difference confidence 1.5", lambda: _tb.paired_difference([1.0, 2.0], [1.0, 1.0], confidence=1.5), "confidence"),
    ("paired_difference confidence nan", lambda: _tb.paired_difference([1.0, 2.0], [1.0, 1.0], confidence=NAN), "confidence"),
    ("paired_difference a nan", lambda: _tb.paired_difference([1.0, NAN], [1.0, 1.0]), "a"),
    ("paired_difference b inf", lambda: _tb.paired_difference([1.0, 2.0], [1.0, INF]), "b"),
    ("paired_difference test_fraction 1", lambda: _tb.paired_difference([1.0, 2.0], [1.0, 1.0], test_fraction=1.0), "test_fraction"),
    ("paired_difference test_fraction nan", lambda: _tb.paired_difference([1.0, 2.0], [1.0, 1.0], test_fraction=NAN), "test_fraction"),
    ("paired_difference a str", lambda: _tb.paired_difference("ab", [1.0, 1.0]), "a"),
    ("permutation_gap repeated", lambda: _tb.permutation_gap(nn.Identity(), torch.ones(2, 3), [0, 0, 1]), "permutation"),
    ("permutation_gap x str", lambda: _tb.permutation_gap(nn.Identity(), "x", [0, 1]), "x"),
    ("permutation_gap x 1-D", lambda: _tb.permutation_gap(nn.Identity(), torch.ones(3), [0, 1, 2]), "x"),
    ("permutation_gap model", lambda: _tb.permutation_gap("model", torch.ones(2, 3), [2, 0, 1]), "model"),
    ("permutation_gap permutation str", lambda: _tb.permutation_gap(nn.Identity(), torch.ones(2, 3), "abc"), "permutation"),
    ("permutation_gap permutation float", lambda: _tb.permutation_gap(nn.Identity(), torch.ones(2, 3), [0.5, 1.5, 2.0]), "permutation"),
    ("permutation_gap x nan", lambda: _tb.permutation_gap(nn.Identity(), torch.full((2, 3), NAN), [2, 0, 1]), "x"),
    ("r2_score y_pred nan", lambda: _tb.r2_score([1.0, 2.0, 3.0], [1.0, NAN, 3.0]), "y_pred"),
    ("r2_score y_true nan", lambda: _tb.r2_score([1.0, NAN, 3.0], [1.0, 2.0, 3.0]), "y_true"),
    ("r2_score y_pred inf", lambda: _tb.r2_score([1.0, 2.0, 3.0], [1.0, INF, 3.0]), "y_pred"),
    ("r2_score empty", lambda: _tb.r2_score([], []), "y_true"),
    ("r2_score lengths", lambda: _tb.r2_score([1.0, 2.0], [1.0]), "y_pred"),
    ("r2_score str", lambda: _tb.r2_score("abc", [1.0, 2.0, 3.0]), "y_true"),
    ("r2_score constant", lambda: _tb.r2_score([2.0, 2.0], [1.0, 2.0]), "y_true"),
    ("run_seeds seeds empty", lambda: _tb.run_seeds({"mlp": lambda: _tb.make_mlp(4)}, _data(), seeds=[], steps=1), "seeds"),
    ("run_seeds metric", lambda: _tb.run_seeds({"mlp": lambda: _tb.make_mlp(4)}, _data(), seeds=[0], metric="accuracy", steps=1), "metric"),
    ("run_seeds configs empty", lambda: _tb.run_seeds({}, _data(), seeds=[0], steps=1), "configs"),
    ("run_seeds configs list", lambda: _tb.run_seeds([lambda: _tb.make_mlp(4)], _data(), seeds=[0], steps=1), "configs"),
    ("run_seeds data str", lambda: _tb.run_seeds({"mlp": lambda: _tb.make_mlp(4)}, "data", seeds=[0], steps=1), "data"),
    ("run_seeds seeds str", lambda: _tb.run_seeds({"mlp": lambda: _tb.make_mlp(4)}, _data(), seeds="01", steps=1), "seeds"),
    ("run_seeds seeds int", lambda: _tb.run_seeds({"mlp": lambda: _tb.make_mlp(4)}, _data(), seeds=3, steps=1), "seeds"),
    ("run_seeds batch_size -1", lambda: _tb.run_seeds({"mlp": lambda: _tb.make_mlp(4)}, _data(), seeds=[0], steps=1, batch_size=-1), "batch_size"),
    ("scores_by_model metric", lambda: _tb.scores_by_model(_TAB_ROWS, "t", metric="accuracy"), "metric"),
    ("scores_by_model row fields", lambda: _tb.scores_by_model([{"task": "t"}], "t"), "rows"),
    ("scores_by_model rows str", lambda: _tb.scores_by_model("rows", "t"), "rows"),
    ("scores_by_model task", lambda: _tb.scores_by_model(_TAB_ROWS, "u"), "task"),
    ("scores_by_model nan", lambda: _tb.scores_by_model([dict(r, test_r2=NAN) for r in _TAB_ROWS], "t"), "rows"),
    ("sklearn_baselines seeds empty", lambda: _tb.sklearn_baselines(_data(), []), "seeds"),
    ("sklearn_baselines data", lambda: _tb.sklearn_baselines("data"), "data"),
    ("sklearn_baselines validation 0", lambda: _tb.sklearn_baselines(_data(), validation=0), "validation"),
    ("sklearn_baselines max_trees 0", lambda: _tb.sklearn_baselines(_data(), validation=4, max_trees=0), "max_trees"),
    ("sklearn_baselines max_trees without validation", lambda: _tb.sklearn_baselines(_data(), max_trees=-5), "max_trees"),
    ("sklearn_baselines seeds negative", lambda: _tb.sklearn_baselines(_data(), [-1]), "seeds"),
    ("TabularSplit x_train str", lambda: _tb.TabularSplit("a", "b", "c", "d", ["x"], "n"), "x_train"),
    ("TabularSplit rows", lambda: _tb.TabularSplit(torch.zeros(4, 2), torch.zeros(3), torch.zeros(2, 2), torch.zeros(2), ["a", "b"], "n"), "y_train"),
    ("TabularSplit widths", lambda: _tb.TabularSplit(torch.zeros(4, 2), torch.zeros(4), torch.zeros(2, 3), torch.zeros(2), ["a", "b"], "n"), "x_test"),
    ("TabularSplit names", lambda: _tb.TabularSplit(torch.zeros(4, 2), torch.zeros(4), torch.zeros(2, 2), torch.zeros(2), ["a"], "n"), "feature_names"),
    ("TabularTransformer n_features 0", lambda: _tb.TabularTransformer(0), "n_features"),
    ("TabularTransformer value_embedding", lambda: _tb.TabularTransformer(3, value_embedding="foo"), "value_embedding"),
    ("TabularTransformer identity", lambda: _tb.TabularTransformer(3, identity="foo"), "identity"),
    ("TabularTransformer d_model 0", lambda: _tb.TabularTransformer(3, d_model=0), "d_model"),
    ("TabularTransformer n_layers -1", lambda: _tb.TabularTransformer(3, n_layers=-1), "n_layers"),
    ("TabularTransformer sigma -1", lambda: _tb.TabularTransformer(3, value_embedding="periodic", sigma=-1.0), "sigma"),
    ("TabularTransformer d_out 0", lambda: _tb.TabularTransformer(3, d_out=0), "d_out"),
    ("TabularTransformer forward width", lambda: _tb.TabularTransformer(3)(torch.zeros(2, 4)), "x"),
    ("TabularTransformer forward str", lambda: _tb.TabularTransformer(3)("x"), "x"),
    ("validation_split 0", lambda: _tb.validation_split(_data(), 0), "n_validation"),
    ("validation_split too many", lambda: _tb.validation_split(_data(), 15), "n_validation"),
    ("validation_split 1", lambda: _tb.validation_split(_data(), 1), "n_validation"),
    ("validation_split str", lambda: _tb.validation_split(_data(), "4"), "n_validation"),
    ("validation_split data", lambda: _tb.validation_split("data", 4), "data"),
    ("value_embedding_configs data", lambda: _tb.value_embedding_configs("data"), "data"),
    ("value_embedding_configs n_bins 0", lambda: _tb.value_embedding_configs(_data(), n_bins=0), "n_bins"),
    ("value_embedding_configs sigma -1", lambda: _tb.value_embedding_configs(_data(), n_bins=4, sigma=-1.0), "sigma"),
    ("value_embedding_configs n_frequencies 0", lambda: _tb.value_embedding_configs(_data(), n_bins=4, n_frequencies=0), "n_frequencies"),
    ("value_embedding_configs d_model 0", lambda: _tb.value_embedding_configs(_data(), n_bins=4, d_model=0), "d_model"),
    # --- results ------------------------------------------------------------------------
    ("acc_key 0", lambda: results.acc_key(0), "factor"),
    ("pos_key str", lambda: results.pos_key("2"), "factor"),
    ("read_results int", lambda: results.read_results(3), "path"),
    ("read_results empty", lambda: results.read_results(""), "path"),
    ("resource_path int", lambda: resources.resource_path(3), "name"),
    ("resource_path folder", lambda: resources.resource_path("../README.md"), "name"),
    ("resource_path missing", lambda: resources.resource_path("missing.json"), "name"),
    ("summarize str", lambda: results.summarize("abc"), "values"),
    ("summarize inf", lambda: results.summarize([1.0, INF]), "values"),
    ("summarize None", lambda: results.summarize(None), "values"),
    ("Experiment name empty", lambda: results.Experiment("", "r.json", lambda u, c: {}, []), "name"),
    ("Experiment run_unit", lambda: results.Experiment("x", "r.json", 1, []), "run_unit"),
    ("Experiment plan str", lambda: results.Experiment("x", "r.json", lambda u, c: {}, "ab"), "plan"),
    ("Experiment pack 0", lambda: results.Experiment("x", "r.json", lambda u, c: {}, [], pack=0), "pack"),
    ("Experiment workers 0", lambda: results.Experiment("x", "r.json", lambda u, c: {}, [], workers=0), "workers"),
    ("loss_fingerprint first_losses", lambda: results.loss_fingerprint(1, {}, []), "first_losses"),
    ("loss_fingerprint n 0", lambda: results.loss_fingerprint(lambda *a, **k: [], {}, [], n=0), "n"),
    ("provenance core_hours -1", lambda: results.provenance(core_hours=-1.0), "core_hours"),
    ("provenance core_hours str", lambda: results.provenance(core_hours="1"), "core_hours"),
    ("to_numpy str", lambda: results.to_numpy("abc"), "x"),
    ("to_numpy None", lambda: results.to_numpy(None), "x"),
    ("to_numpy dict", lambda: results.to_numpy({"a": 1}), "x"),
    ("to_numpy ragged", lambda: results.to_numpy([[1.0], [1.0, 2.0]]), "x"),
    ("write_results rows str", lambda: results.write_results("/tmp/_posenc_bad_input.json", "rows"), "rows"),
    ("write_results path int", lambda: results.write_results(3, []), "path"),
    ("one_thread quick str", lambda: results.one_thread("yes"), "quick"),
    ("chosen_lr rows str", lambda: results.chosen_lr("rows", "a", (0.01,)), "rows"),
    ("chosen_lr variant int", lambda: results.chosen_lr([], 1, (0.01,)), "variant"),
    ("chosen_lr lrs empty", lambda: results.chosen_lr([], "a", ()), "lrs"),
    ("chosen_lr score missing", lambda: results.chosen_lr([{"variant": "a", "role": "tune", "lr": 0.01}], "a", (0.01,)),
     "score"),
    ("tuning_plan saved list", lambda: results.tuning_plan([], ["a"], (0.01,), (0,)), "saved"),
    ("tuning_plan variants str", lambda: results.tuning_plan({"rows": []}, "a", (0.01,), (0,)), "variants"),
    ("tuning_plan seeds int", lambda: results.tuning_plan({"rows": []}, ["a"], (0.01,), 3), "seeds"),
    ("timed_unit ctx", lambda: results.timed_unit(None, dict), "ctx"),
    ("timed_unit row_of", lambda: results.timed_unit(results.Context(True, {"rows": []}, print), 1), "row_of"),
    ("timed_unit row_of returns list",
     lambda: results.timed_unit(results.Context(True, {"rows": []}, print), lambda: [1]), "row_of"),
]


# --- functions of the laboratory's later modules (chapters 2, 4, 5, 7 and 8) -------------

_IDS = torch.randint(0, 10, (200,), generator=torch.Generator().manual_seed(0))
_X3 = torch.randn(2, 6, 4, dtype=torch.float64)

CASES += [
    ("code_depends_on_length kind", lambda: _an.code_depends_on_length("foo", 1), "kind"),
    ("code_depends_on_length position -1", lambda: _an.code_depends_on_length("binary", -1), "position"),
    ("code_depends_on_length lengths str", lambda: _an.code_depends_on_length("binary", 1, "ab"), "lengths"),
    ("dirichlet_bound max_len 0", lambda: _an.dirichlet_bound(0, 8), "max_len"),
    ("dirichlet_bound d_model str", lambda: _an.dirichlet_bound(8, "8"), "d_model"),
    ("dot_product_log_decay offsets nan", lambda: _an.dot_product_log_decay([NAN], 8), "offsets"),
    ("dot_product_log_decay d_model 0", lambda: _an.dot_product_log_decay([1.0], 0), "d_model"),
    ("dot_product_log_decay offsets str", lambda: _an.dot_product_log_decay("a", 8), "offsets"),
    ("HybridRopeNope vocab 0", lambda: _pr.HybridRopeNope(0, [0]), "vocab_size"),
    ("HybridRopeNope rope_layers str", lambda: _pr.HybridRopeNope(16, "ab"), "rope_layers"),
    ("HybridRopeNope rope_layers out of range", lambda: _pr.HybridRopeNope(16, [5]), "rope_layers"),
    ("mean_score_by_offset w_q str", lambda: _pr.mean_score_by_offset("w", _W, _X3), "w_q"),
    ("mean_score_by_offset x nan", lambda: _pr.mean_score_by_offset(_W, _W, torch.full((2, 6, 4), NAN, dtype=torch.float64)), "x"),
    ("mean_score_by_offset x width", lambda: _pr.mean_score_by_offset(_W, _W, torch.zeros(2, 6, 5, dtype=torch.float64)), "x"),
    ("previous_token_chance 0", lambda: _pr.previous_token_chance(0), "seq_len"),
    ("previous_token_chance str", lambda: _pr.previous_token_chance("3"), "seq_len"),
    ("train_position_head encoding", lambda: _pr.train_position_head("foo"), "encoding"),
    ("train_position_head batch 0", lambda: _pr.train_position_head("rope", steps=1, batch=0), "batch"),
    ("train_position_head shared nan", lambda: _pr.train_position_head("rope", steps=1, shared=NAN), "shared"),
    ("train_position_head lr -1", lambda: _pr.train_position_head("rope", steps=1, lr=-1.0), "lr"),
    ("log_uniform_candidates n 0", lambda: _tb.log_uniform_candidates({"lr": (1e-4, 1e-2)}, 0), "n_candidates"),
    ("log_uniform_candidates low > high", lambda: _tb.log_uniform_candidates({"lr": (1e-2, 1e-4)}, 3), "space"),
    ("log_uniform_candidates nan", lambda: _tb.log_uniform_candidates({"lr": (NAN, 1e-2)}, 3), "space"),
    ("tuned_baselines data", lambda: _tb.tuned_baselines("data", validation=4), "data"),
    ("tuned_baselines validation 0", lambda: _tb.tuned_baselines(_data(), validation=0), "validation"),
    ("tuned_baselines n_knots 0", lambda: _tb.tuned_baselines(_data(), validation=4, n_knots=0), "n_knots"),
    ("tuning_report rows str", lambda: _tb.tuning_report("rows"), "rows"),
    ("tuning_report empty", lambda: _tb.tuning_report([]), "rows"),
    ("bpc_summary saved", lambda: _rt.bpc_summary({}), "saved"),
    ("evaluate_bpc model", lambda: _rt.evaluate_bpc("m", _IDS, 8), "model"),
    ("evaluate_bpc length 0", lambda: _rt.evaluate_bpc(_model(), _IDS, 0), "length"),
    ("evaluate_bpc ids str", lambda: _rt.evaluate_bpc(_model(), "ids", 8), "ids"),
    ("evaluate_bpc mode", lambda: _rt.evaluate_bpc(_model(), _IDS, 8, mode="foo"), "mode"),
    ("evaluate_bpc batch_size 0", lambda: _rt.evaluate_bpc(_model(), _IDS, 8, batch_size=0), "batch_size"),
    ("extension_scaling method", lambda: _rt.extension_scaling("foo", 2.0, 16), "method"),
    ("extension_scaling factor nan", lambda: _rt.extension_scaling("pi", NAN, 16), "factor"),
    ("load_corpus path int", lambda: _rt.load_corpus(3), "path"),
    ("long_range_probe distance 0", lambda: _rt.long_range_probe(_model(), _IDS, 0), "distance"),
    ("long_range_probe ids short", lambda: _rt.long_range_probe(_model(), _IDS[:10], 100), "ids"),
    ("loss_by_position bin_size 0", lambda: _rt.loss_by_position(_model(), _IDS, 8, bin_size=0), "bin_size"),
    ("random_windows length > ids", lambda: _rt.random_windows(_IDS, 500, 2, generator=torch.Generator()), "ids"),
    ("random_windows batch -1", lambda: _rt.random_windows(_IDS, 8, -1, generator=torch.Generator()), "batch_size"),
    ("random_windows generator None", lambda: _rt.random_windows(_IDS, 8, 2, generator=None), "generator"),
    ("sha256_of int", lambda: _rt.sha256_of(3), "path"),
    ("TextConfig steps 0", lambda: _rt.TextConfig(steps=0), "steps"),
    ("TextConfig lr nan", lambda: _rt.TextConfig(lr=NAN), "lr"),
    ("with_rotary_scaling model", lambda: _rt.with_rotary_scaling("m", None).__enter__(), "model"),
    ("train_lm model", lambda: _rt.train_lm("m", _IDS, _IDS, _rt.TextConfig(steps=1), seed=0), "model"),
    ("train_lm seed -1", lambda: _rt.train_lm(_model(), _IDS, _IDS, _rt.TextConfig(steps=1), seed=-1), "seed"),
    ("fine_tune_extension method", lambda: _rt.fine_tune_extension(
        _model("rope"), "foo", 2, _IDS, _IDS, _rt.TextConfig(steps=1), seed=0, steps=1), "method"),
    ("fine_tune_extension factor 0", lambda: _rt.fine_tune_extension(
        _model("rope"), "pi", 0, _IDS, _IDS, _rt.TextConfig(steps=1), seed=0, steps=1), "factor"),
    ("CharCorpus text empty", lambda: _rt.CharCorpus("n", "", (), "x"), "text"),
    ("CharCorpus chars", lambda: _rt.CharCorpus("n", "abc", ("a",), "x"), "chars"),
    ("CharCorpus fractions", lambda: _rt.CharCorpus("n", "abc", ("a", "b", "c"), "x", (0.9, 0.2)), "fractions"),
    ("VisionConfig patch 0", lambda: _vi.VisionConfig(patch=0), "patch"),
    ("TinyViT scheme", lambda: _vi.TinyViT("foo"), "scheme"),
    ("TinyViT patch 0", lambda: _vi.TinyViT("none", patch=0), "patch"),
    ("adjacency_distances width 0", lambda: _vi.adjacency_distances(0), "width"),
    ("digits_split n_val -1", lambda: _vi.digits_split(-1), "n_val"),
    ("digits_split n_test huge", lambda: _vi.digits_split(300, 100000), "n_test"),
    ("evaluate_vit model", lambda: _vi.evaluate_vit("m", 16), "model"),
    ("grid_positions 0", lambda: _vi.grid_positions(0, 4), "height"),
    ("patchify patch 0", lambda: _vi.patchify(torch.zeros(1, 8, 8), 0), "patch"),
    ("patchify not divisible", lambda: _vi.patchify(torch.zeros(1, 8, 8), 3), "patch"),
    ("patchify str", lambda: _vi.patchify("img", 4), "images"),
    ("query_scores scheme", lambda: _vi.query_scores("foo", 4, (0, 0)), "scheme"),
    ("query_scores query outside", lambda: _vi.query_scores("rope_axial", 4, (9, 9)), "query"),
    ("random_zoom max_zoom 0", lambda: _vi.random_zoom(torch.zeros(2, 8, 8), 8, 0.0, torch.Generator()), "max_zoom"),
    ("random_zoom nan", lambda: _vi.random_zoom(torch.full((2, 8, 8), NAN), 8, 1.5, torch.Generator()), "images"),
    ("run_vision_trial scheme", lambda: _vi.run_vision_trial("foo", 0), "scheme"),
    ("train_vit seed -1", lambda: _vi.train_vit("none", -1), "seed"),
    ("transformers_rope_index segments str", lambda: _vi.transformers_rope_index("ab"), "segments"),
    ("upsample size 0", lambda: _vi.upsample(torch.zeros(2, 8, 8), 0), "size"),
    ("upsample nan", lambda: _vi.upsample(torch.full((2, 8, 8), NAN), 16), "images"),
]

def _has_nan(value) -> bool:
    """Whether a returned value holds a NaN or inf anywhere (floats, arrays, tensors, containers)."""
    if isinstance(value, (float, np.floating)):
        return not math.isfinite(float(value))
    if isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        return bool(not np.isfinite(value).all())
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return bool(not torch.isfinite(value).all())
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_nan(v) for v in value)
    return False


def classify(call, name: str) -> tuple[str, str]:
    """``(outcome, detail)``: outcome is clear, unclear, internal, silent-nan or silent."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = call()
    except (ValueError, TypeError) as err:
        msg = str(err)
        if type(err).__module__ == "builtins" and name in msg:
            return "clear", f"{type(err).__name__}: {msg[:150]}"
        return "unclear", f"{type(err).__module__}.{type(err).__name__}: {msg[:150]}"
    except Exception as err:  # noqa: BLE001 - the point is to see which
        return "internal", f"{type(err).__module__}.{type(err).__name__}: {str(err)[:150]}"
    finally:
        plt.close("all")
    if _has_nan(result):
        return "silent-nan", repr(result)[:150]
    return "silent", repr(result)[:150]


# --- the engine (one loop, batched trials) and each chapter's first_losses --------------

_LIN = nn.Linear(1, 1)
_OPT = torch.optim.SGD(_LIN.parameters(), lr=0.1)
_BATCHES = iter(lambda: torch.ones(2, 1), None)

CASES += [
    ("fit steps 0", lambda: _en.fit(_LIN, _BATCHES, lambda m, b: m(b).sum(), optimiser=_OPT, steps=0), "steps"),
    ("fit mode", lambda: _en.fit(_LIN, _BATCHES, lambda m, b: m(b).sum(), optimiser=_OPT, steps=1, mode="best"), "mode"),
    ("fit patience 0", lambda: _en.fit(_LIN, _BATCHES, lambda m, b: m(b).sum(), optimiser=_OPT, steps=1, patience=0),
     "patience"),
    ("fit_batched models empty", lambda: _en.fit_batched([], [], lambda f, x: f(x).sum(), lrs=[], steps=1), "models"),
    ("fit_batched lrs short", lambda: _en.fit_batched([_LIN], [_BATCHES], lambda f, x: f(x).sum(), lrs=[], steps=1),
     "lrs"),
    ("fit_batched lrs nan", lambda: _en.fit_batched([_LIN], [_BATCHES], lambda f, x: f(x).sum(), lrs=[NAN], steps=1),
     "lrs"),
    ("TrialConfig from_dict list", lambda: _tr.RunConfig.from_dict([1]), "settings"),
    ("TrialConfig from_dict unknown", lambda: _vi.VisionConfig.from_dict({"colour": 1}), "colour"),
    ("train_pack lrs", lambda: _tr.train_pack("rope", "offset_copy", [0, 1], [1e-3]), "lrs"),
    ("train_pack scheme", lambda: _tr.train_pack("foo", "offset_copy", [0], [1e-3]), "scheme"),
    ("first_losses variant", lambda: _tr.first_losses(_tr.RunConfig().to_dict(), 0, 2, scheme="rope",
                                                      task="offset_copy", variant="x"), "variant"),
    ("first_losses n 0", lambda: _tr.first_losses(_tr.RunConfig().to_dict(), 0, 0, scheme="rope", task="offset_copy"),
     "n"),
    ("first_losses text config", lambda: _rt.first_losses({"layers": 2}, 0, scheme="rope"), "layers"),
    ("first_losses vision scheme", lambda: _vi.first_losses(_vi.VisionConfig().to_dict(), 0, scheme="foo"), "scheme"),
    ("first_losses tabular task", lambda: _tb.first_losses({"steps": 5}, 0, task="foo", model="MLP", lr=0.01), "task"),
    ("first_losses tabular split", lambda: _tb.first_losses({"steps": 5}, 0, task="sine", model="MLP", lr=0.01, split=1),
     "split"),
    ("first_losses probe config", lambda: _pr.first_losses([1], 0, encoding="rope", bias=True, shared=0.0, lr=0.01),
     "config"),
    ("grid_split task", lambda: _tb.grid_split("foo", 0), "task"),
]


# --- issue 29: the callables of probes, tabular, vision, analysis and grade added since ---------------

from posenc.book import grade as _gr  # noqa: E402

_DIFF = [{"pair": "a - b", "size": 16, "mean": 0.01, "low": -0.01, "high": 0.03}]

CASES += [
    ("position_head_unit unit", lambda: _pr.position_head_unit(("x", "v", 1), results.Context(True, {"rows": []}, print),
                                                               variants={}, lrs=(0.01,), tune_seed=0, protocol={},
                                                               quick_protocol={}), "unit"),
    ("position_head_unit variants", lambda: _pr.position_head_unit(("tune", "v", 0.01), results.Context(True, {"rows": []}, print),
                                                                   variants={}, lrs=(0.01,), tune_seed=0, protocol={},
                                                                   quick_protocol={}), "variant"),
    ("dynamic_rope_float32_error length 0", lambda: _pr.dynamic_rope_float32_error(0), "length"),
    ("dynamic_rope_float32_error factor nan", lambda: _pr.dynamic_rope_float32_error(128, factor=NAN), "factor"),
    ("first_sign_change base 1", lambda: _pr.first_sign_change(1.0), "base"),
    ("first_sign_change head_dim odd", lambda: _pr.first_sign_change(1e4, head_dim=7), "head_dim"),
    ("qk_norm_shift_gap order", lambda: _pr.qk_norm_shift_gap("sideways"), "order"),
    ("qk_norm_shift_gap n 0", lambda: _pr.qk_norm_shift_gap("pre", n=0), "n"),
    ("tf32_angle_error n 0", lambda: _pr.tf32_angle_error(0), "n"),
    ("tf32_angle_error base nan", lambda: _pr.tf32_angle_error(8, base=NAN), "base"),
    ("tf32_round list", lambda: _pr.tf32_round([1.0]), "x"),
    ("tf32_round int", lambda: _pr.tf32_round(torch.ones(2, dtype=torch.long)), "x"),
    ("PeriodicWithValue n_features 0", lambda: _tb.PeriodicWithValue(0, 4), "n_features"),
    ("PeriodicWithValue sigma nan", lambda: _tb.PeriodicWithValue(3, 4, sigma=NAN), "sigma"),
    ("feature_subset columns out of range", lambda: _tb.feature_subset(_data(), [99]), "columns"),
    ("feature_subset data", lambda: _tb.feature_subset([1, 2], [0]), "data"),
    ("identity_model name", lambda: _tb.identity_model("nope"), "name"),
    ("initial_model make_model", lambda: _tb.initial_model(3, _data()), "make_model"),
    ("initial_model data", lambda: _tb.initial_model(lambda: _tb.make_mlp(4), "data"), "data"),
    ("nonlinear_share embedding", lambda: _tb.nonlinear_share("emb", torch.zeros(2, 3)), "embedding"),
    ("nonlinear_share x nan", lambda: _tb.nonlinear_share(_tb.PeriodicWithValue(3, 4), torch.full((2, 3), NAN)), "x"),
    ("CanvasConfig train_size 0", lambda: _vi.CanvasConfig(train_size=0), "train_size"),
    ("bits_hex float", lambda: _vi.bits_hex(torch.ones(3)), "right"),
    ("hex_bits text", lambda: _vi.hex_bits("zz", 4), "text"),
    ("hex_bits n -1", lambda: _vi.hex_bits("ff", -1), "n"),
    ("image_paired_se shapes", lambda: _vi.image_paired_se(torch.ones(3, dtype=torch.bool), torch.ones(4, dtype=torch.bool)),
     "right_b"),
    ("paste_canvas size small", lambda: _vi.paste_canvas(torch.zeros(2, 16, 16), 8), "size"),
    ("paste_canvas images", lambda: _vi.paste_canvas("img", 20), "images"),
    ("canvas_differences rows", lambda: _vi.canvas_differences("rows"), "rows"),
    ("canvas_differences threshold", lambda: _vi.canvas_differences([], threshold=-1.0), "threshold"),
    ("canvas_table differences", lambda: _vi.canvas_table("d"), "differences"),
    ("canvas_verdict differences", lambda: _vi.canvas_verdict(3), "differences"),
    ("plot_canvas_differences differences", lambda: _vi.plot_canvas_differences("d"), "differences"),
    ("reference_param_groups model", lambda: _vi.reference_param_groups("m", 0.05), "model"),
    ("reference_param_groups weight_decay", lambda: _vi.reference_param_groups(nn.Linear(2, 2), NAN), "weight_decay"),
    ("resize_vit_table new_grid 0", lambda: _vi.resize_vit_table(torch.zeros(1, 17, 4), 0), "new_grid"),
    ("resize_vit_table table", lambda: _vi.resize_vit_table([1.0], 4), "table"),
    ("run_canvas_trial scheme", lambda: _vi.run_canvas_trial("foo", 0), "scheme"),
    ("scheme_differences pairs", lambda: _vi.scheme_differences([], "ab", [16]), "pairs"),
    ("scheme_differences condition", lambda: _vi.scheme_differences([], [("a", "b")], [16], condition="x"), "condition"),
    ("score_condition model", lambda: _vi.score_condition("m", "resize", 16), "model"),
    ("transformers_decode_step segments", lambda: _vi.transformers_decode_step("seg"), "segments"),
    ("base_for_wavelength length 0", lambda: _an.base_for_wavelength(0.0, 64), "length"),
    ("base_for_wavelength d_model odd", lambda: _an.base_for_wavelength(100.0, 7), "d_model"),
    ("dot_product_ci_envelope d_model 0", lambda: _an.dot_product_ci_envelope(1.0, 0), "d_model"),
    ("dot_product_ci_envelope offsets nan", lambda: _an.dot_product_ci_envelope(NAN, 64), "offsets"),
    ("dot_product_ci_zero base 1", lambda: _an.dot_product_ci_zero(base=1.0), "base"),
    ("longest_wavelength d_model 0", lambda: _an.longest_wavelength(0), "d_model"),
    ("longest_wavelength base nan", lambda: _an.longest_wavelength(64, base=NAN), "base"),
    ("reading_time notebook int", lambda: _an.reading_time(3), "notebook"),
    ("reading_time notebook missing", lambda: _an.reading_time("/nonexistent/x.ipynb"), "notebook"),
    ("check label", lambda: _gr.check("ex-0-0", lambda: None), "label"),
    ("check func", lambda: _gr.check(next(iter(_gr.EXERCISES)), 3), "func"),
    ("exercise label", lambda: _gr.exercise(3), "label"),
    ("grade_file path", lambda: _gr.grade_file(next(iter(_gr.EXERCISES)), 3), "path"),
    ("grade_file label", lambda: _gr.grade_file("ex-0-0", "x.py"), "label"),
    ("main argv", lambda: _gr.main("ex-1"), "argv"),
    ("problem_set chapter 9", lambda: _gr.problem_set(9), "chapter"),
    ("problem_set root int", lambda: _gr.problem_set(1, root=3), "root"),
    ("stub label", lambda: _gr.stub("nope"), "label"),
    ("write_pages root int", lambda: _gr.write_pages(3), "root"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_naming_the_argument(case):
    _, call, name = case
    outcome, detail = classify(call, name)
    assert outcome == "clear", f"{outcome}: {detail}"


#: the shared surface of the laboratory (used by two or more chapters): every public callable
#: of these modules keeps a case above; a chapter module's functions may carry their own
#: bad-input tests in that module's test file instead
SHARED = ("engine", "results", "plotting")
#: the callables the cases above probe
PROBED = {c[0].split()[0] for c in CASES}


def _public_callables(modules: tuple[str, ...] | None = None) -> set[str]:
    """The callables of the ``__all__`` of ``modules`` (default: every public submodule)."""
    import importlib
    import pkgutil

    if modules is None:
        modules = tuple(i.name for i in pkgutil.iter_modules(book.__path__) if not i.name.startswith("_"))
    names = set()
    for name in modules:
        module = importlib.import_module(f"posenc.book.{name}")
        names |= {n for n in getattr(module, "__all__", ()) if callable(getattr(module, n))}
    return names - {"use_book_style"}  # no arguments


def test_every_public_callable_is_probed():
    assert PROBED <= _public_callables(), sorted(PROBED - _public_callables())
    assert len(PROBED) >= 100, len(PROBED)
    missing = sorted(_public_callables(SHARED) - PROBED - {"Context", "FitResult", "Summary"})  # returned or handed over, not called by a user
    assert not missing, f"shared callables without a bad-input case in this file: {missing}"
    from test_bad_input_ch5_ch8 import CASES as CH5_CH8_CASES  # imports this file: imported here, not at the top

    newer = sorted(_public_callables() - PROBED - {c[0].split()[0] for c in CH5_CH8_CASES})
    if newer:  # chapter functions added after these cases: they carry their own bad-input tests
        warnings.warn(f"posenc.book callables without a case in this file: {newer}", stacklevel=1)


# --- property tests: finite input gives a finite score, NaN anywhere is refused ---------

_floats = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(_floats, min_size=2, max_size=30), st.data())
def test_r2_score_is_finite_or_refused(y_true, data):
    y_pred = data.draw(st.lists(_floats, min_size=len(y_true), max_size=len(y_true)))
    try:
        r2 = _tb.r2_score(y_true, y_pred)
    except ValueError as err:
        # refused only when y_true is constant, or varies so little that R^2 overflows
        assert "y_true" in str(err)
        return
    assert math.isfinite(r2) and r2 <= 1.0 + 1e-12


@settings(max_examples=60, deadline=None)
@given(st.lists(_floats, min_size=2, max_size=20), st.integers(0, 19),
       st.sampled_from([NAN, INF, -INF]), st.booleans())
def test_non_finite_scores_are_refused(values, where, bad, in_pred):
    values = list(values)
    other = list(values)
    target = other if in_pred else values
    target[where % len(target)] = bad
    name = "y_pred" if in_pred else "y_true"
    with pytest.raises(ValueError, match=name):
        _tb.r2_score(values, other)
    with pytest.raises(ValueError, match=name):
        _tb.bootstrap_r2(values, other, n_resamples=5)


@settings(max_examples=40, deadline=None)
@given(st.integers(-5, 0) | st.floats(0.5, 3.5).filter(lambda v: v != int(v)) | st.just("4"))
def test_sizes_below_one_or_not_integers_are_refused(size):
    for call, name in (
        (lambda: tasks.make_task_batch("offset_copy", size, 8), "batch_size"),
        (lambda: models.random_positions(size, 4, 8), "batch_size"),
        (lambda: _tb.make_mlp(size), "n_features"),
        (lambda: _tb.fit_regressor(lambda: _tb.make_mlp(4), _data(), steps=1, batch_size=size), "batch_size"),
    ):
        with pytest.raises((ValueError, TypeError), match=name):
            call()


@settings(max_examples=40, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not 0.0 < v < 1.0))
def test_fractions_outside_the_open_interval_are_refused(fraction):
    with pytest.raises(ValueError, match="test_fraction"):
        _tb.diabetes_split(fraction)
    with pytest.raises(ValueError, match="test_fraction"):
        _tb.paired_difference([1.0, 2.0], [1.0, 1.0], test_fraction=fraction)


if __name__ == "__main__":
    from collections import Counter

    counts: Counter = Counter()
    for case_id, call, name in CASES:
        outcome, detail = classify(call, name)
        counts[outcome] += 1
        if outcome != "clear":
            print(f"{outcome:10s} {case_id}: {detail}")
    print(dict(counts), "of", len(CASES))
