"""Chapter 8: the numbers and claims the chapter states, recomputed (and from the saved results)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import posenc
from posenc.book import results, vision

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "08_multidim.ipynb"

def test_flattening_puts_vertical_neighbours_far_and_width_dependent():
    d4, d8 = vision.adjacency_distances(4, 64), vision.adjacency_distances(8, 64)
    for d in (d4, d8):
        assert d["1d_vertical"] > 2 * d["1d_horizontal"]
        assert d["2d_vertical"] == pytest.approx(d["2d_horizontal"], abs=1e-9)
    assert round(d4["1d_vertical"], 2) != round(d8["1d_vertical"], 2)


def test_mae_column_half_first_moco_row_half_first():
    t = posenc.sinusoidal_encoding_2d((3, 5), 16)
    col1 = posenc.sinusoidal_encoding(5, 8, layout="concatenated")
    row1 = posenc.sinusoidal_encoding(3, 8, layout="concatenated")
    for r in range(3):
        for c in range(5):
            np.testing.assert_allclose(t[r * 5 + c, :8], col1[c], atol=1e-15)
            np.testing.assert_allclose(t[r * 5 + c, 8:], row1[r], atol=1e-15)


def test_score_maps_axial_symmetric_mixed_not():
    maps = {s: vision.query_scores(s, 9, (4, 4), seed=0) for s in ("sincos_2d", "rope_axial", "rope_mixed")}
    assert np.allclose(maps["sincos_2d"], maps["sincos_2d"].T)
    assert np.allclose(maps["rope_axial"], maps["rope_axial"].T)
    assert not np.allclose(maps["rope_mixed"], maps["rope_mixed"].T, atol=1e-3)


def test_mrope_example_sequence():
    segments = [("text", 4), ("image", (1, 8, 12)), ("text", 5), ("video", (3, 4, 4)), ("text", 4)]
    ids = posenc.mrope_position_ids(segments)
    assert ids.shape == (3, 4 + 24 + 5 + 12 + 4)
    assert ids[:, 28].tolist() == [10, 10, 10]  # text after the image: 4 + max(1, 4, 6)
    assert int(ids[0, 28]) - int(ids[0, 4]) == 6  # md-mrope-jump: the image's larger side, 6 merged tokens
    assert int(ids.max()) < ids.shape[1] / 2


def test_absolute_time_ids_match_across_frame_rates():
    def ids(n, fps):
        return (torch.arange(n) * (2 * 2 / fps)).long().tolist()

    assert ids(8, 2.0) == [0, 2, 4, 6, 8, 10, 12, 14]
    assert ids(4, 1.0) == [0, 4, 8, 12]


def test_interleaving_spreads_every_axis_over_the_ladder():
    ladder = 2 * np.pi * 1e6 ** (2 * np.arange(64) / 128)
    cont = posenc.MultimodalRotaryEmbedding(128, [16, 24, 24]).axis_of_pair().numpy()
    inter = posenc.MultimodalRotaryEmbedding(128, [24, 20, 20], interleaved=True).axis_of_pair().numpy()
    assert ladder[cont == 0].max() < 200  # time: fast pairs only
    assert ladder[cont == 2].min() > 1000  # width: slow pairs only
    for a in range(3):
        assert ladder[inter == a].min() < 20 and ladder[inter == a].max() > 1e4
    moved = 1 - np.mean(posenc.MultimodalRotaryEmbedding(128, [24, 20, 20]).axis_of_pair().numpy() == inter)
    assert 0.6 < moved < 0.7  # the share of pairs that turn with another axis in a contiguous port


def test_glued_wavelengths_are_the_tables():
    """The wavelengths the prose states (glued) are the table's beside it, digit for digit
    (the prose once said 35,300 beside the table's 35,333), and its bounds for the
    interleaved layout ("from 10 positions or fewer to 1,720,600 or more") hold for every axis."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    outputs = [o for c in cells if c["cell_type"] == "code" for o in c["outputs"]]
    glued = {o["metadata"]["scrapbook"]["name"]: o["data"]["application/papermill.record/text/plain"]
             for o in outputs if "application/papermill.record/text/plain" in o.get("data", {})}
    table = next("".join(o["data"]["text/markdown"]) for o in outputs
                 if "| pairs dealt |" in "".join(o.get("data", {}).get("text/markdown", "")))
    shown = {}
    for row in table.splitlines()[2:]:
        layout, axis, _, low, high = (x.strip() for x in row.strip("|").split("|"))
        shown[("int" if layout.startswith("inter") else "cont", axis)] = (low, high)
    assert len(shown) == 6, table
    for (key, axis), (low, high) in shown.items():
        assert f"{int(glued[f'md-wl-{key}-{axis}-min']):,}" == low, (key, axis)
        assert f"{int(glued[f'md-wl-{key}-{axis}-max']):,}" == high, (key, axis)
    lows = [int(low.replace(",", "")) for (k, _), (low, _) in shown.items() if k == "int"]
    highs = [int(high.replace(",", "")) for (k, _), (_, high) in shown.items() if k == "int"]
    assert int(glued["md-wl-int-width-min"]) == max(lows) and int(glued["md-wl-int-height-max"]) == min(highs)
    prose = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert "{glue:text}`md-wl-cont-width-min:,.0f`" in prose
    assert ("from {glue:text}`md-wl-int-width-min:,.0f` positions or fewer to\n"
            "{glue:text}`md-wl-int-height-max:,.0f` or more") in prose


def test_transformers_starts_text_inside_a_long_video():
    pytest.importorskip("transformers")
    segs = [("text", 3), ("video", (8, 4, 4)), ("text", 3)]
    paper = posenc.mrope_position_ids(segs)
    hf = vision.transformers_rope_index(segs)
    assert paper[0, -3:].tolist() == [11, 12, 13]
    assert hf[0, -3:].tolist() == [5, 6, 7]
    assert set(hf[0, -3:].tolist()) <= set(paper[0, 3:-3].tolist())


def test_decoding_offset():
    ids = posenc.mrope_position_ids([("text", 10), ("image", (1, 28, 28)), ("text", 10)])
    delta = int(ids.max()) + 1 - ids.shape[1]
    assert ids.shape[1] == 216 and int(ids.max()) == 33 and delta == -182


def test_exercise_3_wide_image():
    for (h, w), tokens, advance in (((448, 448), 256, 16), ((448, 1344), 768, 48)):
        e = posenc.mrope_position_ids([("text", 5), ("image", (1, h // 14, w // 14)), ("text", 5)])
        assert e.shape[1] - 10 == tokens
        assert int(e[0, -5] - e[0, 5]) == advance


# ----------------------------------------------------------------------------- the resolution tests (resize columns)

# The chapter's resolution section reads the resize columns of the 10-seed run (vision_canvas.json).
PAIRS = [(s, "none") for s in vision.VISION_SCHEMES if s != "none"] + [
    ("rope_axial", "sincos_2d"), ("rope_mixed", "sincos_2d"), ("rope_mixed", "rope_axial"),
    ("learned_2d", "rope_mixed"), ("learned_2d", "rope_axial")]
SIZES = [12, 16, 20, 24, 32]


def _scheme_cells():
    rows = results.read_results("vision_canvas.json")["rows"]
    return {(d["a"], d["b"], d["size"]): d for d in vision.scheme_differences(rows, PAIRS, SIZES)}


def _resize_mean(scheme, n):
    return float(np.mean([r[f"resize_acc_{n}"] for r in results.read_results("vision_canvas.json")["rows"]
                          if r["scheme"] == scheme]))


def test_scheme_differences_labels_follow_the_stated_rule():
    for d in _scheme_cells().values():
        lo, hi = d["t95"]
        assert d["n"] == 10
        if d["label"] == "indistinguishable":
            assert lo <= 0 <= hi
        elif d["label"] == "higher":
            assert lo > 0 and d["mean"] >= vision.CANVAS_THRESHOLD
        elif d["label"] == "lower":
            assert hi < 0 and d["mean"] <= -vision.CANVAS_THRESHOLD
        else:
            assert d["label"] == "under threshold" and abs(d["mean"]) < vision.CANVAS_THRESHOLD
    with pytest.raises(ValueError, match="pairs"):
        vision.scheme_differences([], [("rope", "none")], [32])
    one_seed = [{"scheme": s, "seed": 0, "resize_acc_32": 0.5} for s in ("rope_axial", "none")]
    with pytest.raises(ValueError, match="at least 2"):
        vision.scheme_differences(one_seed, [("rope_axial", "none")], [32])
    with pytest.raises(TypeError, match="pairs"):
        vision.scheme_differences([], "rope_axial", [32])


def test_reading_of_the_resolution_tests():
    c = _scheme_cells()
    label = {k: d["label"] for k, d in c.items()}
    positional = [s for s in vision.VISION_SCHEMES if s != "none"]
    for s in positional:  # 0.9 or more at 16 px, higher than the position-free model in every seed
        assert _resize_mean(s, 16) >= 0.9
        assert label[(s, "none", 16)] == "higher" and c[(s, "none", 16)]["a_lower"] == 0
    assert (round(_resize_mean("rope_axial", 16), 2), round(_resize_mean("sincos_1d", 16), 2),
            round(_resize_mean("none", 16), 2), round(_resize_mean("none", 24), 2)) == (0.95, 0.95, 0.78, 0.42)
    for n in (12, 20, 24, 32):  # 1-D sin-cos: near chance, lower than no positions
        assert _resize_mean("sincos_1d", n) < 0.2 and label[("sincos_1d", "none", n)] == "lower"
    assert round(_resize_mean("sincos_1d", 24), 2) == 0.13
    # 2-D sin-cos against no positions: indistinguishable at 24, lower at 32
    assert label[("sincos_2d", "none", 24)] == "indistinguishable"
    assert label[("sincos_2d", "none", 32)] == "lower"
    d24, d32 = c[("sincos_2d", "none", 24)], c[("sincos_2d", "none", 32)]
    assert (round(d24["mean"], 2), round(d24["t95"][0], 2), round(d24["t95"][1], 2)) == (0.01, -0.12, 0.13)
    assert (round(d32["mean"], 2), round(d32["t95"][0], 2), round(d32["t95"][1], 2)) == (-0.35, -0.39, -0.31)


def test_rope_against_the_fixed_2d_table():
    c = _scheme_cells()
    for s in ("rope_axial", "rope_mixed"):
        for n in (12, 20, 24, 32):
            assert c[(s, "sincos_2d", n)]["label"] == "higher", (s, n)
        assert c[(s, "sincos_2d", 16)]["label"] == "indistinguishable"
    d = c[("rope_axial", "sincos_2d", 32)]
    assert (round(d["mean"], 2), round(d["t95"][0], 2), round(d["t95"][1], 2)) == (0.47, 0.38, 0.56)
    d = c[("rope_axial", "sincos_2d", 20)]
    assert round(d["mean"], 2) == 0.19 and d["a_lower"] == 1  # lower in 1 of 10 seeds


def test_mixed_against_axial_indistinguishable_except_at_24():
    c = _scheme_cells()
    for n in (12, 16, 20, 32):
        assert c[("rope_mixed", "rope_axial", n)]["label"] == "indistinguishable", n
    assert c[("rope_mixed", "rope_axial", 24)]["label"] == "higher"
    glued = {12: (-0.03, -0.09, 0.03), 24: (0.08, 0.01, 0.16), 32: (-0.05, -0.20, 0.11)}
    for n, (m, lo, hi) in glued.items():
        d = c[("rope_mixed", "rope_axial", n)]
        assert (round(d["mean"], 2), round(d["t95"][0], 2), round(d["t95"][1], 2)) == (m, lo, hi), n


def test_learned_table_beats_both_ropes_at_32_and_loses_at_20_24():
    c = _scheme_cells()
    d = c[("learned_2d", "rope_mixed", 32)]
    assert d["label"] == "higher" and d["a_lower"] == 0 and min(d["per_seed"]) > 0  # in every seed
    assert (round(d["mean"], 2), round(d["t95"][0], 2), round(d["t95"][1], 2)) == (0.25, 0.19, 0.31)
    d = c[("learned_2d", "rope_axial", 32)]
    assert d["label"] == "higher" and round(d["mean"], 2) == 0.20
    for n in (20, 24):
        assert c[("learned_2d", "rope_mixed", n)]["label"] == "lower"
    assert [round(c[("learned_2d", "rope_mixed", n)]["mean"], 2) for n in (20, 24)] == [-0.07, -0.11]
    # plain RoPE-Mixed at 32 px cannot be told from the position-free model
    d = c[("rope_mixed", "none", 32)]
    assert d["label"] == "indistinguishable"
    assert (round(d["mean"], 2), round(d["t95"][0], 2), round(d["t95"][1], 2)) == (0.07, -0.02, 0.16)


def test_scaled_coordinates_on_the_resized_images():
    rows = results.read_results("vision_canvas.json")["rows"]
    cells = {(d["scheme"], d["condition"], d["size"]): d for d in vision.canvas_differences(rows)}
    iacc = lambda s, n: round(float(np.mean([r[f"resize_iacc_{n}"] for r in rows if r["scheme"] == s])), 2)  # noqa: E731
    # at 32 px scaling recovers much, not all, of the 16-pixel accuracy
    assert [(round(_resize_mean(s, 32), 2), iacc(s, 32)) for s in vision.REAL_COORDINATE_SCHEMES] == [
        (0.14, 0.74), (0.61, 0.85), (0.56, 0.87)]
    for s in vision.REAL_COORDINATE_SCHEMES:
        assert iacc(s, 32) < _resize_mean(s, 16) - 0.05
    # the 12-pixel row: 2-D sin-cos below the position-free model, and stretching by 4/3 helps in every seed
    d = cells[("sincos_2d", "resize", 12)]
    assert (round(d["mean"], 2), round(d["t95"][0], 2), round(d["t95"][1], 2)) == (0.31, 0.26, 0.36)
    assert sum(x > 0 for x in d["per_seed"]) == 10
    assert round(_resize_mean("sincos_2d", 12), 2) == 0.37 and round(_resize_mean("none", 12), 2) == 0.44
    # the scaled coordinates at 24 and 32 px are not inside the range: the last patch lands at 4 - 4/G
    assert [round(4 - 4 / g, 2) for g in (6, 8)] == [3.33, 3.5]
    cfg = results.read_results("vision_canvas.json")["config"]
    assert cfg["max_zoom"] == 1.6 and cfg["max_epochs"] == 60
    assert sum(r["epochs"] == 60 for r in rows) == 15  # md-at-budget of md-n-runs
    assert round(60 * results.read_results("vision_canvas.json")["provenance"]["core_hours"]) == 15  # md-core-minutes
    # 12 px: the 2-D table is lower than the position-free model, paired by seed
    d = _scheme_cells()[("sincos_2d", "none", 12)]
    assert d["label"] == "lower"
    assert (round(d["mean"], 2), round(d["t95"][0], 2), round(d["t95"][1], 2)) == (-0.08, -0.14, -0.01)


def test_hunyuan_video_temporal_ladder_repeats_at_201_frames():
    omega = posenc.RotaryEmbedding(16, base=256.0).inv_freq.double().numpy()
    periods = 2 * np.pi / omega
    assert [round(p, 1) for p in periods[:5]] == [6.3, 12.6, 25.1, 50.3, 100.5]
    latent = lambda f: (f - 1) // 4 + 1  # noqa: E731
    assert latent(129) == 33 and latent(201) == 51
    lags = np.arange(1, 101)
    echo = np.cos(np.outer(lags, omega[:4])).mean(axis=1)
    assert int(lags[np.argmax(echo)]) == 50 and echo.max() > 0.98
    # RIFLEx's identify_k: the pair whose rounded period is closest to the first repetition (50)
    k = int(np.argmin(np.abs(np.round(periods) - 50))) + 1
    assert (k, int(np.round(periods[k - 1]))) == (4, 50)


def test_ntk_scaling_leaves_middle_pairs_overshooting():
    plain = posenc.RotaryEmbedding(56, base=1e4).inv_freq.double().numpy()
    seen = plain * 63
    unfinished = seen < 2 * np.pi
    assert unfinished.sum() == 20
    ntk = posenc.RotaryEmbedding(56, base=1e4, scaling={"rope_type": "ntk", "factor": 4.0}).inv_freq.double().numpy()
    ratio = ntk * 255 / seen
    assert abs(ratio[-1] - 255 / 63 / 4) < 0.02  # the slowest pair holds its trained angle (up to 255/252)
    assert 2.5 < ratio[unfinished].max() < 4  # the worst unfinished pair still overshoots, less than plain's 4x


# ----------------------------------------------------------------------------- resize against canvas

CANVAS = "vision_canvas.json"  # shipped with posenc.book


def _canvas_rows():
    return results.read_results(CANVAS)["rows"]


def _canvas_cells():
    return {(d["scheme"], d["condition"], d["size"]): d for d in vision.canvas_differences(_canvas_rows())}


def _canvas_mean(scheme, key):
    return float(np.mean([r[key] for r in _canvas_rows() if r["scheme"] == scheme]))


def test_canvas_grid_is_complete_and_follows_the_protocol():
    saved = results.read_results(CANVAS)
    cfg = saved["config"]
    assert cfg["train_size"] == 16 and cfg["patch"] == 4 and cfg["max_zoom"] == 1.6
    assert cfg["eval_sizes"] == [12, 16, 20, 24, 32] and cfg["canvas_sizes"] == [20, 24, 32]
    assert cfg["decay_rule"] == "reference" and cfg["weight_decay"] == 0.05  # md-cv-wd
    rows = saved["rows"]
    assert sorted((r["scheme"], r["seed"]) for r in rows) == sorted(
        (s, seed) for s in vision.VISION_SCHEMES for seed in range(10)
    )  # md-cv-n-seeds, md-cv-n-models
    for r in rows:
        assert 0 <= r["best_epoch"] < r["epochs"] <= cfg["max_epochs"]


def test_the_mask_leaves_the_canvas_to_the_positions():
    for r in _canvas_rows():
        if r["scheme"] == "none":  # exactly its 16-pixel predictions on every canvas
            for n in (20, 24, 32):
                assert r[f"canvas_right_{n}"] == r["resize_right_16"]
        if r["scheme"] in ("rope_axial", "rope_mixed"):  # offsets only: the same up to rounding
            for n in (20, 24, 32):
                assert abs(r[f"canvas_acc_{n}"] - r["resize_acc_16"]) <= 0.01


def test_canvas_verdict_and_the_decisive_cells():
    cells = _canvas_cells()
    assert vision.canvas_verdict(list(cells.values())) == "units of the object"  # md-cv-verdict
    label = {k: d["label"] for k, d in cells.items()}
    assert label[("rope_axial", "canvas", 32)] == label[("rope_mixed", "canvas", 32)] == "hurts"
    assert label[("sincos_2d", "resize", 12)] == label[("rope_mixed", "resize", 12)] == "helps"
    assert label[("rope_axial", "resize", 12)] == "about 0"  # the prose says so
    glued = {  # (mean, low, high) as the prose shows them
        ("rope_axial", "canvas", 32): (-0.25, -0.31, -0.19),
        ("rope_mixed", "canvas", 32): (-0.24, -0.30, -0.18),
        ("sincos_2d", "resize", 12): (0.31, 0.26, 0.36),
        ("rope_mixed", "resize", 12): (0.07, 0.05, 0.10),
        ("rope_axial", "resize", 12): (0.03, -0.00, 0.05),
    }
    for key, (m, lo, hi) in glued.items():
        d = cells[key]
        assert (round(d["mean"], 2), round(d["t95"][0], 2), round(d["t95"][1], 2)) == (m, lo, hi), key
    for key in (("rope_axial", "canvas", 32), ("rope_mixed", "canvas", 32)):
        assert cells[key]["seeds_lower"] == 10  # lower in every seed
    assert sum(x > 0 for x in cells[("sincos_2d", "resize", 12)]["per_seed"]) == 10
    # test-set sampling error of one model's difference in the decisive cells, and of one accuracy
    se = [cells[k]["image_se"] for k in glued]
    assert (round(min(se), 3), round(max(se), 3)) == (0.019, 0.026)
    assert min(abs(cells[k]["mean"]) for k in glued if cells[k]["label"] != "about 0") > max(se)
    assert round(math.sqrt(0.25 / 400), 3) == 0.025


def test_canvas_cells_the_verdict_does_not_read():
    cells = _canvas_cells()
    # the RoPE loss on the canvas grows with the canvas
    for s in ("rope_axial", "rope_mixed"):
        ds = [cells[(s, "canvas", n)]["mean"] for n in (20, 24, 32)]
        assert ds[0] > ds[1] > ds[2] and ds[0] < 0
    assert [round(cells[("rope_axial", "canvas", n)]["mean"], 2) for n in (20, 24, 32)] == [-0.02, -0.08, -0.25]
    # 2-D sin-cos on the 32 px canvas: scaling brings no recovery worth a label
    d = cells[("sincos_2d", "canvas", 32)]
    assert d["label"] == "not separated" and 0 < d["t95"][0] and d["mean"] < vision.CANVAS_THRESHOLD
    assert round(_canvas_mean("sincos_2d", "canvas_iacc_32"), 2) == 0.24
    assert _canvas_mean("sincos_2d", "canvas_iacc_32") < _canvas_mean("sincos_2d", "resize_acc_16") - 0.6
    # at 12 px the rotations already beat the 2-D table, and the position-free model falls too
    for s in ("rope_axial", "rope_mixed"):
        assert _canvas_mean(s, "resize_acc_12") > _canvas_mean("sincos_2d", "resize_acc_12") + 0.2
    assert _canvas_mean("none", "resize_acc_12") < _canvas_mean("none", "resize_acc_16") - 0.3


def test_canvas_lesson_fixed_view_against_growing_canvas():
    cells = _canvas_cells()
    m = lambda s, k: round(_canvas_mean(s, k), 2)  # noqa: E731
    # fixed field of view: scaling lifts every real-coordinate scheme at 32 px
    assert [round(cells[(s, "resize", 32)]["mean"], 2) for s in vision.REAL_COORDINATE_SCHEMES] == [0.60, 0.24, 0.31]
    assert all(cells[(s, "resize", 32)]["label"] == "helps" for s in vision.REAL_COORDINATE_SCHEMES)
    assert m("learned_2d", "resize_acc_32") == 0.81
    # at the trained zoom scales (20, 24 px) the rotations gain little or nothing
    for s in ("rope_axial", "rope_mixed"):
        for n in (20, 24):
            assert abs(cells[(s, "resize", n)]["mean"]) <= 0.06
    # growing canvas: the rotations keep their 16 px accuracy with plain patch coordinates
    for s in ("rope_axial", "rope_mixed"):
        assert m(s, "canvas_acc_32") == m(s, "resize_acc_16") == 0.95
    # the absolute schemes have no good choice
    assert m("sincos_2d", "canvas_acc_32") == 0.21 and m("learned_2d", "canvas_acc_32") == 0.15
    learned = [_canvas_mean("learned_2d", f"canvas_acc_{n}") for n in (20, 24, 32)]
    assert learned[0] > learned[1] > learned[2]
    assert learned[0] < _canvas_mean("learned_2d", "resize_acc_16") - 0.4


def test_dinov3_coordinates_are_the_scaled_ones_halved():
    pytest.importorskip("transformers")
    from transformers.models.dinov3_vit import modeling_dinov3_vit as dino

    for g in (4, 8):
        yx = dino.get_patches_center_coordinates(g, g, torch.float64, "cpu")
        scaled = (torch.arange(g, dtype=torch.float64) + 0.5) * 4 / g
        assert torch.allclose(yx[:g, 1], scaled / 2 - 1) and torch.allclose(yx[::g, 0], scaled / 2 - 1)
    coords = dino.get_patches_center_coordinates(2, 2, torch.float64, "cpu")
    torch.manual_seed(0)
    out = dino.augment_patches_center_coordinates(coords, rescale=2.0)
    ratio = float(out[0, 0] / coords[0, 0])
    assert 0.5 <= ratio <= 2.0 and torch.allclose(out, coords * ratio)  # one scale for both axes
    assert dino.DINOv3ViTConfig().pos_embed_rescale == 2.0
