"""Chapter 8: the numbers and claims the chapter states, recomputed (and from the saved results)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import posenc
from posenc.book import results, vision

RESULTS = "vision_resolution.json"  # shipped with posenc.book


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


# ----------------------------------------------------------------------------- the saved experiment


def _rows():
    return results.read_results(RESULTS)["rows"]


def test_saved_experiment_is_complete_and_follows_the_protocol():
    saved = results.read_results(RESULTS)
    cfg = saved["config"]
    assert cfg["train_size"] == 16 and cfg["patch"] == 4 and cfg["eval_sizes"] == [12, 16, 20, 24, 32]
    rows = saved["rows"]
    assert sorted((r["scheme"], r["seed"]) for r in rows) == sorted(
        (s, seed) for s in vision.VISION_SCHEMES for seed in range(3)
    )
    for r in rows:
        assert 0 <= r["best_epoch"] < r["epochs"] <= cfg["max_epochs"]


def _means(key_prefix="acc"):
    rows = _rows()
    out = {}
    for s in vision.VISION_SCHEMES:
        for n in (12, 16, 20, 24, 32):
            vals = [r.get(f"{key_prefix}_{n}") for r in rows if r["scheme"] == s]
            if all(v is not None for v in vals) and vals:
                out[(s, n)] = float(np.mean(vals))
    return out


def test_reading_of_the_resolution_experiment():
    m = _means()
    positional = [s for s in vision.VISION_SCHEMES if s != "none"]
    for s in positional:  # "every scheme with positions reaches 0.9 or more"
        assert m[(s, 16)] >= 0.9 and m[(s, 16)] > m[("none", 16)] + 0.05
    for n in (20, 24, 32):  # 1-D sin-cos near chance (0.1) at every other size
        assert m[("sincos_1d", n)] < 0.2
    # 2-D sin-cos: down to the position-free level at 24 px, below it at 32 px
    assert m[("sincos_2d", 24)] < m[("none", 24)] + 0.05
    assert m[("sincos_2d", 32)] < m[("none", 32)] - 0.1
    # axial, mixed, learned stay far above the position-free model
    for s in ("rope_axial", "rope_mixed", "learned_2d"):
        for n in (24, 32):
            assert m[(s, n)] > 0.6 and m[(s, n)] > m[("none", n)] + 0.15
    # RoPE-Mixed at least as good as axial (within 0.03) at the larger sizes
    for n in (20, 24, 32):
        assert m[("rope_mixed", n)] >= m[("rope_axial", n)] - 0.03
    # ... but with three seeds the 95% intervals of mixed and axial overlap at every size
    from scipy import stats

    rows = _rows()
    for n in (20, 24, 32):
        iv = {}
        for s in ("rope_axial", "rope_mixed"):
            v = np.array([r[f"acc_{n}"] for r in rows if r["scheme"] == s])
            h = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
            iv[s] = (v.mean() - h, v.mean() + h)
        assert iv["rope_mixed"][0] < iv["rope_axial"][1] and iv["rope_axial"][0] < iv["rope_mixed"][1]
    # the interpolated learned table at 32 px: as good as the rotary schemes or better
    assert m[("learned_2d", 32)] >= max(m[("rope_axial", 32)], m[("rope_mixed", 32)]) - 0.03


def test_position_interpolation_prediction_holds():
    m, i = _means(), _means("iacc")
    for s in ("sincos_2d", "rope_axial", "rope_mixed"):
        gains = [i[(s, n)] - m[(s, n)] for n in (20, 24, 32)]
        assert gains[-1] > 0.1, s  # a large recovery at 32 px
        assert gains[0] <= gains[-1] + 0.02, s  # larger the further the plain coordinates extrapolate
    assert i[("sincos_2d", 32)] > m[("sincos_2d", 32)] + 0.3


def test_the_12_pixel_row_goes_against_staying_in_range():
    # 12 px is a 3 x 3 grid: every coordinate (0-2) and offset (|d| <= 2) inside the trained 0-3
    m = _means()
    rows = _rows()
    assert m[("sincos_2d", 12)] < m[("none", 12)]  # below the position-free model ...
    gains = [r["iacc_12"] - r["acc_12"] for r in rows if r["scheme"] == "sincos_2d"]
    assert len(gains) == 3 and min(gains) > 0.2  # ... and stretching by 4/3 helps in every seed
    d = results.paired_difference([r["iacc_12"] for r in rows if r["scheme"] == "sincos_2d"],
                                  [r["acc_12"] for r in rows if r["scheme"] == "sincos_2d"])
    assert round(d["mean"], 2) == 0.31 and d["t95"][0] > 0.25
    # the scaled coordinates at 24 and 32 px are not inside the range: the last patch lands at 4 - 4/G
    assert [round(4 - 4 / g, 2) for g in (6, 8)] == [3.33, 3.5]
    assert results.read_results(RESULTS)["config"]["max_zoom"] == 1.6


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
