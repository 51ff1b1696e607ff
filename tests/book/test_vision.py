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
