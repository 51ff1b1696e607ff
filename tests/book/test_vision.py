"""Chapter 8's laboratory (posenc.book.vision): data, patches, model, training, measurements."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc
from posenc.book import vision


def test_split_is_fixed_disjoint_and_complete():
    a, b = vision.digits_split(), vision.digits_split()
    sizes = {k: len(a[k][1]) for k in a}
    assert sizes == {"train": 1097, "val": 300, "test": 400}
    for k in a:
        assert torch.equal(a[k][0], b[k][0])
    flat = {k: {tuple(x.flatten().tolist()) for x in a[k][0]} for k in a}
    assert sum(sizes.values()) == 1797
    assert a["train"][0].max() <= 1 and a["train"][0].min() >= 0


def test_patchify_is_row_major_and_upsample_keeps_range():
    x = torch.arange(64.0).reshape(1, 8, 8)
    p = vision.patchify(x, 4)
    assert p.shape == (1, 4, 16)
    assert p[0, 2, :4].tolist() == [32.0, 33.0, 34.0, 35.0]  # row 1, column 0 of the grid
    up = vision.upsample(vision.digits_split()["val"][0][:3], 16)
    assert up.shape == (3, 16, 16) and 0 <= float(up.min()) and float(up.max()) <= 1


def test_adjacency_distances_1d_vertical_neighbours_are_far():
    d = vision.adjacency_distances(4, 64)
    assert d["1d_vertical"] > 2 * d["1d_horizontal"]
    assert abs(d["2d_vertical"] - d["2d_horizontal"]) < 1e-9  # the two halves are alike
    wide = vision.adjacency_distances(8, 64)
    assert wide["1d_vertical"] != pytest.approx(d["1d_vertical"])  # "one row down" depends on the width


@pytest.mark.parametrize("scheme", vision.VISION_SCHEMES)
def test_tiny_vit_runs_at_every_grid(scheme):
    torch.manual_seed(0)
    m = vision.TinyViT(scheme, train_grid=4)
    for size in (12, 16, 24):
        assert m(torch.rand(2, size, size)).shape == (2, 10)


def test_learned_table_is_resized_to_the_grid_and_exact_at_the_training_grid():
    m = vision.TinyViT("learned_2d", train_grid=4)
    assert torch.equal(m.positional_table(4), m.table.reshape(16, -1))
    assert m.positional_table(6).shape == (36, m.d_model)


def test_axial_scores_depend_on_the_offset_only():
    s = vision.query_scores("rope_axial", 6, (2, 3), head_dim=16)
    t = vision.query_scores("rope_axial", 6, (3, 1), head_dim=16)
    np.testing.assert_allclose(s[2 - 1, 3 + 2], t[3 - 1, 1 + 2], atol=1e-12)
    mixed = vision.query_scores("rope_mixed", 6, (2, 2), head_dim=16)
    assert mixed.shape == (6, 6) and mixed[2, 2] == pytest.approx(16.0)
    sc = vision.query_scores("sincos_2d", 5, (0, 0), head_dim=16)
    assert sc[0, 0] == pytest.approx(8.0)  # |row|^2 = d/2 (sin^2 + cos^2 over d/2 pairs)


def test_training_stops_on_validation_loss_and_is_seeded():
    cfg = vision.VisionConfig(max_epochs=3, patience=1, n_train=128, dtype="float64", d_model=16, n_heads=2, d_ff=32, n_layers=1)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = vision.run_vision_trial("rope_axial", 0, cfg)
    after = torch.rand(1)
    torch.manual_seed(123)
    b = vision.run_vision_trial("rope_axial", 0, cfg)
    assert torch.rand(1) == after  # the caller's generator is left alone
    assert {k: v for k, v in a.items() if k != "seconds"} == {k: v for k, v in b.items() if k != "seconds"}
    assert a["epochs"] <= 3 and 0 <= a["best_epoch"] < a["epochs"]
    assert set(f"acc_{s}" for s in cfg.eval_sizes) <= a.keys()


def test_bad_input():
    with pytest.raises(ValueError, match="scheme"):
        vision.TinyViT("rope_3d")
    with pytest.raises(ValueError, match="d_model"):
        vision.TinyViT("none", d_model=20, n_heads=2)
    with pytest.raises(ValueError, match="patch"):
        vision.patchify(torch.rand(1, 6, 6), 4)
    with pytest.raises(ValueError, match="multiple"):
        vision.VisionConfig(eval_sizes=(18,))
    with pytest.raises(ValueError, match="query"):
        vision.query_scores("rope_axial", 4, (4, 0))
    with pytest.raises(ValueError, match="scheme"):
        vision.query_scores("learned_2d", 4, (0, 0))
    with pytest.raises(TypeError, match="config"):
        vision.train_vit("none", 0, {"lr": 1})
    with pytest.raises(TypeError, match="model"):
        vision.evaluate_vit(torch.nn.Linear(2, 2), 16)
    with pytest.raises(ValueError, match="width"):
        vision.adjacency_distances(1)


def test_position_interpolation_maps_a_larger_grid_into_the_training_range():
    torch.manual_seed(0)
    m = vision.TinyViT("rope_axial", train_grid=4, d_model=16, n_heads=2, n_layers=1, d_ff=16).double().eval()
    x = torch.rand(2, 16, 16, dtype=torch.float64)
    torch.testing.assert_close(m(x, position_scale=1.0), m(x))
    big = torch.rand(2, 24, 24, dtype=torch.float64)
    assert not torch.allclose(m(big, position_scale=4 / 6), m(big))
    s2 = vision.TinyViT("sincos_2d", train_grid=4, d_model=16, n_heads=2, n_layers=1, d_ff=16).double().eval()
    torch.testing.assert_close(s2(x, position_scale=1.0 + 0.0), s2(x))
    # the fractional table at integer coordinates is the library's table
    pos = vision.grid_positions(3, 3).double().numpy()
    np.testing.assert_allclose(posenc.sinusoidal_encoding_2d(None, 16, positions=pos), posenc.sinusoidal_encoding_2d(3, 16), atol=1e-15)
    with pytest.raises(ValueError, match="position_scale"):
        vision.TinyViT("learned_2d")(torch.rand(1, 16, 16), position_scale=0.5)
    with pytest.raises(TypeError, match="interpolate"):
        vision.evaluate_vit(m, 16, interpolate="yes")


# ----------------------------------------------------------------------------- resize against canvas


def test_paste_canvas_puts_the_training_scale_digit_on_whole_patches():
    x = vision.digits_split()["test"][0][:20]
    canvas, keep = vision.paste_canvas(x, 32, seed=5)
    assert canvas.shape == (20, 32, 32) and keep.shape == (20, 64) and keep.dtype == torch.bool
    assert keep.sum(dim=1).tolist() == [16] * 20
    up = vision.upsample(x, 16)
    for i in range(20):
        rows, cols = torch.nonzero(keep[i].reshape(8, 8), as_tuple=True)
        r, c = int(rows.min()) * 4, int(cols.min()) * 4
        torch.testing.assert_close(canvas[i, r : r + 16, c : c + 16], up[i])
        assert float(canvas[i].sum()) == pytest.approx(float(up[i].sum()))  # nothing outside the digit
    again, _ = vision.paste_canvas(x, 32, seed=5)
    assert torch.equal(canvas, again)
    same, whole = vision.paste_canvas(x, 16)
    torch.testing.assert_close(same, up)
    assert bool(whole.all())


@pytest.mark.parametrize("scheme", vision.VISION_SCHEMES)
def test_masked_canvas_changes_only_what_absolute_schemes_see(scheme):
    torch.manual_seed(0)
    m = vision.TinyViT(scheme).eval()
    x = vision.digits_split()["test"][0][:30]
    canvas, keep = vision.paste_canvas(x, 32, seed=3)
    with torch.no_grad():
        at16 = m(vision.upsample(x, 16).float())
        masked = m(canvas.float(), content=keep)
        unmasked = m(canvas.float())
    assert (at16 - unmasked).abs().max() > 0.05  # without the mask the empty patches count
    if scheme in ("none", "rope_axial", "rope_mixed"):
        torch.testing.assert_close(masked, at16, atol=2e-6, rtol=0)
    else:
        assert (masked - at16).abs().max() > 1e-3
    # an all-true mask is no mask
    torch.testing.assert_close(m(canvas.float(), content=torch.ones_like(keep)), unmasked, atol=1e-6, rtol=0)


def test_score_condition_none_is_blind_to_the_canvas():
    torch.manual_seed(0)
    m = vision.TinyViT("none", d_model=16, n_heads=2, n_layers=1, d_ff=16)
    loss16, right16 = vision.score_condition(m, "resize", 16)
    loss32, right32 = vision.score_condition(m, "canvas", 32)
    assert torch.equal(right16, right32) and loss32 == pytest.approx(loss16, abs=1e-6)
    assert right16.shape == (400,)
    with pytest.raises(ValueError, match="condition"):
        vision.score_condition(m, "crop", 32)
    with pytest.raises(ValueError, match="size"):
        vision.score_condition(m, "canvas", 18)


def test_reference_param_groups_leave_positions_and_norms_undecayed():
    for scheme, name in (("learned_2d", "table"), ("rope_mixed", "freqs")):
        m = vision.TinyViT(scheme)
        decay, keep = vision.reference_param_groups(m, 0.05)
        assert decay["weight_decay"] == 0.05 and keep["weight_decay"] == 0.0
        ids = lambda g: {id(p) for p in g["params"]}  # noqa: E731
        assert ids(decay).isdisjoint(ids(keep)) and len(ids(decay) | ids(keep)) == len(list(m.parameters()))
        named = dict(m.named_parameters())
        assert all(id(p) in ids(keep) for k, p in named.items() if k.endswith(name) or p.ndim <= 1)
        assert id(m.embed.weight) in ids(decay) and id(m.blocks[0].mlp[0].weight) in ids(decay)
    with pytest.raises(ValueError, match="weight_decay"):
        vision.reference_param_groups(m, -1.0)


def test_canvas_config_and_its_fingerprint_function():
    cfg = vision.CanvasConfig(max_epochs=1, n_train=384, d_model=16, n_heads=2, d_ff=16, n_layers=1)
    d = cfg.to_dict()
    assert d["decay_rule"] == "reference" and vision.CanvasConfig.from_dict(d) == cfg
    a = vision.first_losses(d, 0, 3, scheme="learned_2d")
    b = vision.first_losses({**d, "decay_rule": "all"}, 0, 3, scheme="learned_2d")
    assert len(a) == 3 and a[0] == b[0] and a != b  # the same start; the decay rule acts from the first update
    with pytest.raises(ValueError, match="decay_rule"):
        vision.CanvasConfig(decay_rule="some")
    with pytest.raises(ValueError, match="canvas"):
        vision.CanvasConfig(canvas_sizes=(12,))
    with pytest.raises(TypeError, match="CanvasConfig"):
        vision.run_canvas_trial("none", 0, vision.VisionConfig())


def test_bits_and_the_paired_sampling_error():
    right = torch.rand(401, generator=torch.Generator().manual_seed(0)) > 0.3
    assert torch.equal(vision.hex_bits(vision.bits_hex(right), 401), right)
    same = vision.image_paired_se(right, right)
    assert same == 0.0
    a = torch.tensor([True] * 60 + [False] * 40)
    b = torch.tensor([False] * 10 + [True] * 60 + [False] * 30)  # 10 only a, 10 only b
    assert vision.image_paired_se(a, b) == pytest.approx(np.sqrt(20) / 100)
    with pytest.raises(ValueError, match="length"):
        vision.image_paired_se(a, b[:50])
    with pytest.raises(TypeError, match="boolean"):
        vision.bits_hex(torch.ones(3))
    with pytest.raises(ValueError, match="hex"):
        vision.hex_bits("zz", 4)
    with pytest.raises(TypeError, match="canvas_sizes"):
        vision.CanvasConfig(canvas_sizes=32)
    with pytest.raises(TypeError, match="images"):
        vision.paste_canvas(None, 20)
    with pytest.raises(ValueError, match="size"):
        vision.paste_canvas(torch.rand(1, 8, 8), 12)
    with pytest.raises(ValueError, match="content"):
        vision.TinyViT("none")(torch.rand(1, 16, 16), content=torch.zeros(1, 16, dtype=torch.bool))
    with pytest.raises(ValueError, match="content"):
        vision.TinyViT("none")(torch.rand(1, 16, 16), content=torch.ones(1, 9, dtype=torch.bool))


def test_resize_vit_table_equals_transformers_interpolate_pos_encoding():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import ViTConfig
        from transformers.models.vit.modeling_vit import ViTEmbeddings
    torch.manual_seed(0)
    emb = ViTEmbeddings(ViTConfig(image_size=32, patch_size=8, hidden_size=16, num_channels=1)).eval()
    torch.nn.init.normal_(emb.position_embeddings)
    for h, w in ((48, 64), (24, 24), (32, 32)):
        with torch.no_grad():
            x = emb.patch_embeddings(torch.zeros(1, 1, h, w))
            theirs = emb.interpolate_pos_encoding(torch.zeros(1, 1 + x.shape[1], 16), h, w)
            ours = vision.resize_vit_table(emb.position_embeddings, (h // 8, w // 8))
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="square"):
        vision.resize_vit_table(torch.randn(18, 4), 3)
    with pytest.raises(ValueError, match="new_grid"):
        vision.resize_vit_table(torch.randn(17, 4), (3, 3, 3))
    with pytest.raises(TypeError, match="table"):
        vision.resize_vit_table(torch.arange(17), 3)
    t = torch.randn(16, 4)
    torch.testing.assert_close(vision.resize_vit_table(t, 4, prefix_tokens=0), t)  # same grid: unchanged


def test_transformers_helpers_qwen2_5_time_and_the_decode_jump():
    thirty_seconds = [("text", 3), ("video", (30, 32, 32), 1.0), ("text", 3)]
    hf = vision.transformers_rope_index(thirty_seconds, model="qwen2.5")
    ours = posenc.mrope_position_ids(thirty_seconds, tokens_per_second=2)
    assert torch.equal(hf[:, :-3], ours[:, :-3])  # the video's own ids agree
    assert hf[0, -3:].tolist() == [19, 20, 21] and ours[0, -3:].tolist() == [62, 63, 64]
    prefill, nxt = vision.transformers_decode_step([("text", 3), ("video", (8, 4, 4)), ("text", 3)])
    assert prefill[0, -3:].tolist() == [5, 6, 7] and nxt.tolist() == [11, 11, 11]
    short_prefill, short_next = vision.transformers_decode_step([("text", 3), ("video", (2, 4, 4)), ("text", 3)])
    assert int(short_next[0]) == int(short_prefill[0, -1]) + 1  # where it follows the paper, no jump
    with pytest.raises(ValueError, match="model"):
        vision.transformers_rope_index(thirty_seconds, model="qwen3")


def _fake_canvas_rows(canvas_gain, resize12_gain, seeds=10):
    gen = torch.Generator().manual_seed(0)
    rows = []
    for scheme in vision.REAL_COORDINATE_SCHEMES:
        for seed in range(seeds):
            noise = 0.01 * (seed % 3 - 1)
            right = vision.bits_hex(torch.rand(400, generator=gen) > 0.3)
            rows.append({
                "scheme": scheme, "seed": seed,
                "canvas_acc_32": 0.9, "canvas_iacc_32": 0.9 + canvas_gain + noise,
                "resize_acc_12": 0.5, "resize_iacc_12": 0.5 + resize12_gain + noise,
                "canvas_right_32": right, "canvas_iright_32": right,
                "resize_right_12": right, "resize_iright_12": right,
            })
    return rows


def test_canvas_differences_label_by_the_stated_rule():
    obj = vision.canvas_differences(_fake_canvas_rows(-0.3, 0.2))
    assert {(d["condition"], d["label"]) for d in obj} == {("canvas", "hurts"), ("resize", "helps")}
    assert all(d["n"] == 10 and d["image_se"] == 0.0 and len(d["per_seed"]) == 10 for d in obj)
    assert vision.canvas_verdict(obj) == "units of the object"
    rng = vision.canvas_differences(_fake_canvas_rows(0.0, 0.0))
    assert {d["label"] for d in rng} == {"about 0"}
    assert vision.canvas_verdict(rng) == "stay in range"
    mixed = vision.canvas_differences(_fake_canvas_rows(-0.3, 0.0))
    assert vision.canvas_verdict(mixed) == "not separated"
    small = vision.canvas_differences(_fake_canvas_rows(-0.03, 0.02))  # clear of 0 but below the threshold
    assert {d["label"] for d in small} == {"not separated"}
    with pytest.raises(TypeError, match="rows"):
        vision.canvas_differences({"rows": []})


def test_canvas_figure_and_table_show_every_difference():
    import matplotlib.pyplot as plt

    from posenc.book import plotting

    diffs = vision.canvas_differences(_fake_canvas_rows(-0.3, 0.2))
    fig = vision.plot_canvas_differences(diffs)
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["resize\n12 px", "canvas\n32 px"]
        # per scheme: one strip of 10 seeds per column, and one mean with its interval
        points = [c for c in ax.collections if c.get_offsets().shape[0] == 10]
        assert len(points) == 2 * len(vision.REAL_COORDINATE_SCHEMES)
        means = sorted(float(line.get_ydata()[0]) for line in ax.lines if line.get_marker() in ("^", "D", "P"))
        assert means == pytest.approx(sorted(d["mean"] for d in diffs))
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["2-D sin-cos", "axial RoPE", "RoPE-Mixed"]
        assert plotting.figure_problems(fig) == []
    finally:
        plt.close(fig)
    table = vision.canvas_table(diffs).splitlines()
    assert len(table) == 2 + len(diffs)
    assert table[2].startswith("| 2-D sin-cos | resize | 12 | +0.20 |") and table[2].endswith("| helps |")
    assert "| axial RoPE | canvas | 32 | -0.30 |" in vision.canvas_table(diffs)
    for bad in ([], [{"scheme": "rope_axial"}], None):
        with pytest.raises(TypeError, match="differences"):
            vision.plot_canvas_differences(bad)
        with pytest.raises(TypeError, match="differences"):
            vision.canvas_table(bad)
