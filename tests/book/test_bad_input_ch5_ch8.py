"""Bad input to the laboratory modules of chapters 1, 3-5 and 8: refused, naming the argument.

The same rule and the same classifier as ``test_bad_input_book.py`` (a ``ValueError`` or
``TypeError`` whose message names the argument; never an internal error and never a result
computed from the bad value), for the public callables of ``vision``, ``tabular``,
``depth``, ``recipes`` and ``released``. The last test keeps every public callable of those
modules covered: by a case here or by one in ``test_bad_input_book.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_bad_input_book import CASES as BOOK_CASES, NAN, INF, _public_callables, classify

from posenc.book import depth as _dp, recipes as _rc, released as _rl, tabular as _tb, vision as _vi
from posenc.book.models import PositionalTransformer

#: the modules whose public callables this file keeps covered
MODULES = ("vision", "tabular", "depth", "recipes", "released")

_WAVE = _tb.high_frequency_task(16, 8, seed=0)
_NET = _dp.DepthNet(8, 6, d_model=16, n_heads=2, n_layers=1)
_LEARNED = PositionalTransformer(10, scheme="learned", max_len=4, d_model=8, n_heads=2, n_layers=1)
_CODE = np.eye(6)
_TINY = {"steps": 2, "batch": 2, "length": 6, "vocab": 8, "d_model": 16, "n_heads": 2, "n_layers": 1}
_T = torch.randn(4, 8)
_RIGHT = _vi.bits_hex(torch.ones(4, dtype=torch.bool))
_CANVAS_ROWS = [{"scheme": "rope_axial", "seed": s, "canvas_acc_32": 0.9, "canvas_iacc_32": 0.5 + 0.01 * s,
                 "canvas_right_32": _RIGHT, "canvas_iright_32": _RIGHT} for s in range(3)]
_PAIR_ROWS = [{"scheme": s, "seed": k, "resize_acc_32": v + 0.01 * k}
              for k in range(3) for s, v in (("learned_2d", 0.8), ("rope_mixed", 0.6))]
_PAIR = [("learned_2d", "rope_mixed")]
_VIT_TABLE = torch.randn(1 + 16, 8)
_ROPE_ROW = {"model": "m", "layer_type": "full_attention", "share": "2 of 2", "rotated_pairs": 4, "head_dim": 8,
             "layout": "half", "base": 10000.0, "scaling": "none", "reach": None, "nope": "-", "sections": None}


def _vit():
    return _vi.TinyViT("none")


# (id, call, the argument the message must name); the id's first word is the callable
CASES: list[tuple[str, object, str]] = [
    # --- vision -------------------------------------------------------------------------
    ("CanvasConfig canvas_sizes empty", lambda: _vi.CanvasConfig(canvas_sizes=()), "canvas_sizes"),
    ("CanvasConfig canvas_sizes small", lambda: _vi.CanvasConfig(canvas_sizes=(8,)), "canvas"),
    ("CanvasConfig decay_rule", lambda: _vi.CanvasConfig(decay_rule="none"), "decay_rule"),
    ("CanvasConfig canvas_seed -1", lambda: _vi.CanvasConfig(canvas_seed=-1), "canvas_seed"),
    ("CanvasConfig weight_decay -1", lambda: _vi.CanvasConfig(weight_decay=-1.0), "weight_decay"),
    ("CanvasConfig batch_size 0", lambda: _vi.CanvasConfig(batch_size=0), "batch_size"),
    ("CanvasConfig d_model 0", lambda: _vi.CanvasConfig(d_model=0), "d_model"),
    ("bits_hex float", lambda: _vi.bits_hex(torch.ones(4)), "right"),
    ("bits_hex 2-D", lambda: _vi.bits_hex(torch.ones(2, 2, dtype=torch.bool)), "right"),
    ("hex_bits not hex", lambda: _vi.hex_bits("xy", 4), "text"),
    ("hex_bits too short", lambda: _vi.hex_bits("8", 5), "text"),
    ("hex_bits n -1", lambda: _vi.hex_bits("8", -1), "n"),
    ("hex_bits text int", lambda: _vi.hex_bits(8, 4), "text"),
    ("image_paired_se lengths", lambda: _vi.image_paired_se(torch.ones(3, dtype=torch.bool),
                                                            torch.ones(4, dtype=torch.bool)), "right_a"),
    ("image_paired_se float", lambda: _vi.image_paired_se(torch.ones(3), torch.ones(3, dtype=torch.bool)), "right_a"),
    ("image_paired_se empty", lambda: _vi.image_paired_se(torch.ones(0, dtype=torch.bool),
                                                          torch.ones(0, dtype=torch.bool)), "right_a"),
    ("paste_canvas images 2-D", lambda: _vi.paste_canvas(torch.ones(8, 8), 24), "images"),
    ("paste_canvas images nan", lambda: _vi.paste_canvas(torch.full((1, 8, 8), NAN), 24), "images"),
    ("paste_canvas size small", lambda: _vi.paste_canvas(torch.ones(1, 8, 8), 12), "size"),
    ("paste_canvas size not multiple", lambda: _vi.paste_canvas(torch.ones(1, 8, 8), 22), "size"),
    ("paste_canvas seed -1", lambda: _vi.paste_canvas(torch.ones(1, 8, 8), 24, seed=-1), "seed"),
    ("reference_param_groups model", lambda: _vi.reference_param_groups("vit", 0.05), "model"),
    ("reference_param_groups weight_decay str", lambda: _vi.reference_param_groups(_vit(), "0.05"), "weight_decay"),
    ("reference_param_groups weight_decay -1", lambda: _vi.reference_param_groups(_vit(), -1.0), "weight_decay"),
    ("reference_param_groups weight_decay nan", lambda: _vi.reference_param_groups(_vit(), NAN), "weight_decay"),
    ("resize_vit_table table nan", lambda: _vi.resize_vit_table(torch.full((17, 8), NAN), 6), "table"),
    ("resize_vit_table not square", lambda: _vi.resize_vit_table(torch.randn(16, 8), 6), "table"),
    ("resize_vit_table new_grid 0", lambda: _vi.resize_vit_table(_VIT_TABLE, 0), "new_grid"),
    ("resize_vit_table new_grid list", lambda: _vi.resize_vit_table(_VIT_TABLE, [6, 8]), "new_grid"),
    ("resize_vit_table new_grid triple", lambda: _vi.resize_vit_table(_VIT_TABLE, (6, 8, 2)), "new_grid"),
    ("resize_vit_table prefix_tokens -1", lambda: _vi.resize_vit_table(_VIT_TABLE, 6, prefix_tokens=-1), "prefix_tokens"),
    ("resize_vit_table batch 2", lambda: _vi.resize_vit_table(torch.randn(2, 17, 8), 6), "table"),
    ("resize_vit_table int table", lambda: _vi.resize_vit_table(torch.ones(17, 8, dtype=torch.long), 6), "table"),
    ("run_canvas_trial scheme", lambda: _vi.run_canvas_trial("foo", 0), "scheme"),
    ("run_canvas_trial seed -1", lambda: _vi.run_canvas_trial("none", -1), "seed"),
    ("run_canvas_trial config", lambda: _vi.run_canvas_trial("none", 0, {"lr": 0.1}), "config"),
    ("scheme_differences rows str", lambda: _vi.scheme_differences("rows", _PAIR, [32]), "rows"),
    ("scheme_differences row without seed", lambda: _vi.scheme_differences(
        [{k: v for k, v in r.items() if k != "seed"} for r in _PAIR_ROWS], _PAIR, [32]), "rows"),
    ("scheme_differences pairs scheme", lambda: _vi.scheme_differences(_PAIR_ROWS, [("learned_2d", "foo")], [32]),
     "pairs"),
    ("scheme_differences pairs empty", lambda: _vi.scheme_differences(_PAIR_ROWS, [], [32]), "pairs"),
    ("scheme_differences pairs triple", lambda: _vi.scheme_differences(_PAIR_ROWS, [("a", "b", "c")], [32]), "pairs"),
    ("scheme_differences sizes empty", lambda: _vi.scheme_differences(_PAIR_ROWS, _PAIR, []), "sizes"),
    ("scheme_differences sizes str", lambda: _vi.scheme_differences(_PAIR_ROWS, _PAIR, ["32"]), "sizes"),
    ("scheme_differences size missing", lambda: _vi.scheme_differences(_PAIR_ROWS, _PAIR, [24]), "rows"),
    ("scheme_differences accuracy str", lambda: _vi.scheme_differences(
        [dict(r, resize_acc_32="0.8") for r in _PAIR_ROWS], _PAIR, [32]), "rows"),
    ("scheme_differences accuracy nan", lambda: _vi.scheme_differences(
        [dict(r, resize_acc_32=NAN) for r in _PAIR_ROWS], _PAIR, [32]), "rows"),
    ("scheme_differences condition", lambda: _vi.scheme_differences(_PAIR_ROWS, _PAIR, [32], condition="crop"),
     "condition"),
    ("scheme_differences threshold -1", lambda: _vi.scheme_differences(_PAIR_ROWS, _PAIR, [32], threshold=-1.0),
     "threshold"),
    ("canvas_differences rows str", lambda: _vi.canvas_differences("rows"), "rows"),
    ("canvas_differences rows empty", lambda: _vi.canvas_differences([]), "rows"),
    ("canvas_differences threshold nan", lambda: _vi.canvas_differences(_CANVAS_ROWS, threshold=NAN), "threshold"),
    ("canvas_differences accuracy str", lambda: _vi.canvas_differences(
        [dict(r, canvas_iacc_32="0.5") for r in _CANVAS_ROWS]), "rows"),
    ("canvas_differences bad size key", lambda: _vi.canvas_differences(
        [dict(r, canvas_iacc_big=0.5) for r in _CANVAS_ROWS]), "rows"),
    ("canvas_verdict str", lambda: _vi.canvas_verdict("differences"), "differences"),
    ("canvas_verdict items", lambda: _vi.canvas_verdict(["a"]), "differences"),
    ("canvas_verdict keys", lambda: _vi.canvas_verdict([{"scheme": "rope_axial"}]), "differences"),
    ("canvas_table empty", lambda: _vi.canvas_table([]), "differences"),
    ("canvas_table keys", lambda: _vi.canvas_table([{"scheme": "rope_axial"}]), "differences"),
    ("plot_canvas_differences empty", lambda: _vi.plot_canvas_differences([]), "differences"),
    ("plot_canvas_differences threshold 0", lambda: _vi.plot_canvas_differences(
        _vi.canvas_differences(_CANVAS_ROWS), threshold=0.0), "threshold"),
    ("score_condition model", lambda: _vi.score_condition("vit", "resize", 16), "model"),
    ("score_condition condition", lambda: _vi.score_condition(_vit(), "crop", 16), "condition"),
    ("score_condition size not multiple", lambda: _vi.score_condition(_vit(), "resize", 18), "size"),
    ("score_condition size 0", lambda: _vi.score_condition(_vit(), "resize", 0), "size"),
    ("score_condition canvas small", lambda: _vi.score_condition(_vit(), "canvas", 12), "size"),
    ("score_condition interpolate", lambda: _vi.score_condition(_vit(), "resize", 16, interpolate=1), "interpolate"),
    ("score_condition split", lambda: _vi.score_condition(_vit(), "resize", 16, split="dev"), "split"),
    ("score_condition seed", lambda: _vi.score_condition(_vit(), "resize", 16, seed="a"), "seed"),
    ("transformers_decode_step segments", lambda: _vi.transformers_decode_step("text"), "segments"),
    ("transformers_decode_step merge 0", lambda: _vi.transformers_decode_step([("text", 3)], spatial_merge_size=0),
     "spatial_merge_size"),
    # --- tabular ------------------------------------------------------------------------
    ("PeriodicWithValue d_embedding 1", lambda: _tb.PeriodicWithValue(3, 1), "d_embedding"),
    ("PeriodicWithValue d_embedding str", lambda: _tb.PeriodicWithValue(3, "8"), "d_embedding"),
    ("PeriodicWithValue n_features 0", lambda: _tb.PeriodicWithValue(0, 8), "n_features"),
    ("PeriodicWithValue sigma nan", lambda: _tb.PeriodicWithValue(3, 8, sigma=NAN), "sigma"),
    ("PeriodicWithValue n_frequencies 0", lambda: _tb.PeriodicWithValue(3, 8, n_frequencies=0), "n_frequencies"),
    ("PeriodicWithValue forward width", lambda: _tb.PeriodicWithValue(3, 8)(torch.randn(5, 2)), "x"),
    ("PeriodicWithValue forward nan", lambda: _tb.PeriodicWithValue(3, 8)(torch.full((5, 3), NAN)), "x"),
    ("nonlinear_share embedding", lambda: _tb.nonlinear_share("emb", torch.randn(5, 3)), "embedding"),
    ("nonlinear_share x rows", lambda: _tb.nonlinear_share(_tb.PeriodicWithValue(3, 8), torch.randn(2, 3)), "x"),
    ("nonlinear_share x nan", lambda: _tb.nonlinear_share(_tb.PeriodicWithValue(3, 8), torch.full((5, 3), NAN)), "x"),
    ("nonlinear_share x 1-D", lambda: _tb.nonlinear_share(_tb.PeriodicWithValue(3, 8), torch.randn(5)), "x"),
    ("nonlinear_share x int", lambda: _tb.nonlinear_share(_tb.PeriodicWithValue(3, 8), torch.ones(5, 3, dtype=torch.long)),
     "x"),
    ("nonlinear_share x width", lambda: _tb.nonlinear_share(_tb.PeriodicWithValue(3, 8), torch.randn(5, 2)), "x"),
    ("nonlinear_share output", lambda: _tb.nonlinear_share(torch.nn.Linear(3, 4), torch.randn(5, 3)), "embedding"),
    ("feature_subset data", lambda: _tb.feature_subset("data", [0]), "data"),
    ("feature_subset columns empty", lambda: _tb.feature_subset(_WAVE, []), "columns"),
    ("feature_subset columns range", lambda: _tb.feature_subset(_WAVE, [9]), "columns"),
    ("feature_subset columns repeat", lambda: _tb.feature_subset(_WAVE, [0, 0]), "columns"),
    ("feature_subset columns str", lambda: _tb.feature_subset(_WAVE, "01"), "columns"),
    ("feature_subset columns float", lambda: _tb.feature_subset(_WAVE, [0.5]), "columns"),
    ("initial_model make_model", lambda: _tb.initial_model("mlp", _WAVE), "make_model"),
    ("initial_model data", lambda: _tb.initial_model(lambda: _tb.make_mlp(4), "data"), "data"),
    ("initial_model seed", lambda: _tb.initial_model(lambda: _tb.make_mlp(4), _WAVE, seed=-1), "seed"),
    ("initial_model returns", lambda: _tb.initial_model(lambda: "m", _WAVE), "make_model"),
    ("identity_model name", lambda: _tb.identity_model("foo"), "name"),
    ("identity_model name int", lambda: _tb.identity_model(3), "name"),
    # --- depth --------------------------------------------------------------------------
    ("DepthNet vocab 1", lambda: _dp.DepthNet(1, 6), "vocab"),
    ("DepthNet length 0", lambda: _dp.DepthNet(8, 0), "length"),
    ("DepthNet residual int", lambda: _dp.DepthNet(8, 6, residual=1), "residual"),
    ("DepthNet n_heads", lambda: _dp.DepthNet(8, 6, d_model=10, n_heads=4), "n_heads"),
    ("DepthNet n_layers 0", lambda: _dp.DepthNet(8, 6, n_layers=0), "n_layers"),
    ("DepthNet forward length", lambda: _NET(torch.zeros(2, 5, dtype=torch.long)), "tokens"),
    ("DepthNet forward float", lambda: _NET(torch.zeros(2, 6)), "tokens"),
    ("DepthNet forward id too big", lambda: _NET(torch.full((2, 6), 8)), "tokens"),
    ("DepthNet forward id negative", lambda: _NET(torch.full((2, 6), -1)), "tokens"),
    ("reversal_batch batch 0", lambda: _dp.reversal_batch(0, 4, 8), "batch"),
    ("reversal_batch vocab 1", lambda: _dp.reversal_batch(2, 4, 1), "vocab"),
    ("reversal_batch generator", lambda: _dp.reversal_batch(2, 4, 8, generator=0), "generator"),
    ("build_depth_net config str", lambda: _dp.build_depth_net("config", True), "config"),
    ("build_depth_net config missing", lambda: _dp.build_depth_net({"vocab": 8}, True), "config"),
    ("build_depth_net residual", lambda: _dp.build_depth_net(_dp.DEPTH_PROTOCOL, "yes"), "residual"),
    ("train_depth_net config unknown", lambda: _dp.train_depth_net(True, seed=0, config=dict(_TINY, lenght=8)), "config"),
    ("train_depth_net config str", lambda: _dp.train_depth_net(True, seed=0, config="small"), "config"),
    ("train_depth_net lr -1", lambda: _dp.train_depth_net(True, seed=0, config=dict(_TINY, lr=-1.0)), "lr"),
    ("train_depth_net lr nan", lambda: _dp.train_depth_net(True, seed=0, config=dict(_TINY, lr=NAN)), "lr"),
    ("train_depth_net steps 0", lambda: _dp.train_depth_net(True, seed=0, config=dict(_TINY, steps=0)), "steps"),
    ("train_depth_net seed", lambda: _dp.train_depth_net(True, seed=-1, config=_TINY), "seed"),
    ("train_depth_net stop_after 0", lambda: _dp.train_depth_net(True, seed=0, config=_TINY, stop_after=0),
     "stop_after"),
    ("first_losses depth n 0", lambda: _dp.first_losses(_TINY, 0, 0, residual=True), "n"),
    ("first_losses depth residual", lambda: _dp.first_losses(_TINY, 0, 2, residual=None), "residual"),
    ("probe_accuracy shapes", lambda: _dp.probe_accuracy(np.zeros((4, 2)), np.zeros(3, int), train=np.ones(4, bool)),
     "features"),
    ("probe_accuracy features nan", lambda: _dp.probe_accuracy(np.full((4, 2), NAN), np.arange(4) % 2,
                                                               train=np.arange(4) < 2), "features"),
    ("probe_accuracy labels negative", lambda: _dp.probe_accuracy(np.eye(4), np.array([0, 1, -1, 1]),
                                                                  train=np.arange(4) < 2), "labels"),
    ("probe_accuracy labels float", lambda: _dp.probe_accuracy(np.eye(4), np.array([0, 1, 0.5, 1]),
                                                               train=np.arange(4) < 2), "labels"),
    ("probe_accuracy train all", lambda: _dp.probe_accuracy(np.eye(4), np.arange(4) % 2, train=np.ones(4, bool)),
     "train"),
    ("probe_accuracy train ints", lambda: _dp.probe_accuracy(np.eye(4), np.arange(4) % 2, train=np.array([0, 1, 2, 3])),
     "train"),
    ("probe_accuracy ridge -1", lambda: _dp.probe_accuracy(np.eye(4), np.arange(4) % 2, train=np.arange(4) < 2,
                                                           ridge=-1.0), "ridge"),
    ("probe_accuracy ridge nan", lambda: _dp.probe_accuracy(np.eye(4), np.arange(4) % 2, train=np.arange(4) < 2,
                                                            ridge=NAN), "ridge"),
    ("layer_probe model", lambda: _dp.layer_probe(torch.nn.Linear(2, 2)), "model"),
    ("layer_probe sequences 1", lambda: _dp.layer_probe(_NET, sequences=1), "sequences"),
    ("layer_probe ridge", lambda: _dp.layer_probe(_NET, sequences=8, ridge=INF), "ridge"),
    ("layer_probe seed", lambda: _dp.layer_probe(_NET, sequences=8, seed="a"), "seed"),
    ("norm_share norm", lambda: _dp.norm_share(_T, _T, "batch"), "norm"),
    ("norm_share widths", lambda: _dp.norm_share(_T, torch.randn(4, 6), "rms"), "pe"),
    ("norm_share broadcast", lambda: _dp.norm_share(_T, torch.randn(3, 8), "rms"), "pe"),
    ("norm_share nan", lambda: _dp.norm_share(torch.full((4, 8), NAN), _T, "rms"), "tokens"),
    ("norm_share empty", lambda: _dp.norm_share(torch.randn(0, 8), torch.randn(0, 8), "rms"), "tokens"),
    ("norm_share array", lambda: _dp.norm_share(np.ones((4, 8)), _T, "rms"), "tokens"),
    # --- recipes ------------------------------------------------------------------------
    ("extend_learned_table model", lambda: _rc.extend_learned_table(PositionalTransformer(10, scheme="rope", max_len=4,
                                                                    d_model=8, n_heads=2, n_layers=1), 8), "model"),
    ("extend_learned_table new_len shorter", lambda: _rc.extend_learned_table(_LEARNED, 4), "new_len"),
    ("extend_learned_table new_len str", lambda: _rc.extend_learned_table(_LEARNED, "8"), "new_len"),
    ("extend_learned_table init", lambda: _rc.extend_learned_table(_LEARNED, 8, init="zeros"), "init"),
    ("mean_cosine_nonnegative base 1", lambda: _rc.mean_cosine_nonnegative(1.0, 100), "base"),
    ("mean_cosine_nonnegative base inf", lambda: _rc.mean_cosine_nonnegative(INF, 100), "base"),
    ("mean_cosine_nonnegative length -1", lambda: _rc.mean_cosine_nonnegative(1e4, -1), "length"),
    ("mean_cosine_nonnegative head_dim odd", lambda: _rc.mean_cosine_nonnegative(1e4, 100, 7), "head_dim"),
    ("mean_cosine_nonnegative chunk 0", lambda: _rc.mean_cosine_nonnegative(1e4, 100, chunk=0), "chunk"),
    ("base_for_length length 0", lambda: _rc.base_for_length(0), "length"),
    ("base_for_length length float", lambda: _rc.base_for_length(8192.5), "length"),
    ("base_for_length head_dim odd", lambda: _rc.base_for_length(8192, head_dim=127), "head_dim"),
    ("base_for_length criterion", lambda: _rc.base_for_length(8192, criterion="ntk"), "criterion"),
    ("base_for_length grid decreasing", lambda: _rc.base_for_length(100, criterion="decay", grid=[1e5, 1e4]), "grid"),
    ("base_for_length grid nan", lambda: _rc.base_for_length(100, criterion="decay", grid=[1e4, NAN]), "grid"),
    ("base_for_length grid empty", lambda: _rc.base_for_length(100, criterion="decay", grid=[]), "grid"),
    ("previous_token_weight code 1-D", lambda: _rc.previous_token_weight(np.ones(4), 1.0), "code"),
    ("previous_token_weight code one row", lambda: _rc.previous_token_weight(np.ones((1, 4)), 1.0), "code"),
    ("previous_token_weight code nan", lambda: _rc.previous_token_weight(np.full((3, 4), NAN), 1.0), "code"),
    ("previous_token_weight scale inf", lambda: _rc.previous_token_weight(_CODE, INF), "scale"),
    ("scalar_previous_token_bound n 1", lambda: _rc.scalar_previous_token_bound(1), "n"),
    ("scalar_previous_token_bound slopes nan", lambda: _rc.scalar_previous_token_bound(8, np.array([NAN])), "slopes"),
    ("scalar_previous_token_bound slopes empty", lambda: _rc.scalar_previous_token_bound(8, np.array([])), "slopes"),
    ("nearest_code_accuracy noise -1", lambda: _rc.nearest_code_accuracy(_CODE, -1.0), "noise"),
    ("nearest_code_accuracy trials 0", lambda: _rc.nearest_code_accuracy(_CODE, 0.1, trials=0), "trials"),
    ("nearest_code_accuracy seed", lambda: _rc.nearest_code_accuracy(_CODE, 0.1, seed=-1), "seed"),
    ("nearest_code_accuracy code str", lambda: _rc.nearest_code_accuracy("code", 0.1), "code"),
    # --- released -----------------------------------------------------------------------
    ("rope_table_text rows str", lambda: _rl.rope_table_text("rows"), "rows"),
    ("rope_table_text rows empty", lambda: _rl.rope_table_text([]), "rows"),
    ("rope_table_text row missing", lambda: _rl.rope_table_text([{"model": "m"}]), "rows"),
    ("rope_table_text row not dict", lambda: _rl.rope_table_text([["m"]]), "rows"),
]

#: callables that take no argument (nothing to get wrong)
NO_ARGUMENTS = {"released_configs", "released_rope_rows"}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_naming_the_argument(case):
    _, call, name = case
    outcome, detail = classify(call, name)
    assert outcome == "clear", f"{outcome}: {detail}"


def test_every_public_callable_of_these_modules_is_probed():
    probed = {c[0].split()[0] for c in CASES + BOOK_CASES}
    public = _public_callables(MODULES)
    assert {c[0].split()[0] for c in CASES} <= public | {"first_losses"}
    missing = sorted(public - probed - NO_ARGUMENTS)
    assert not missing, f"public callables of {MODULES} without a bad-input case: {missing}"
