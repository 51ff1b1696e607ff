"""Positions beyond one dimension (chapter 8): cross-checks against ``transformers``.

* :func:`posenc.sinusoidal_encoding_2d` is the table ViT-MAE writes
  (``build_2d_sinusoidal_position_embedding`` with its half swap, in float64 to 1e-12;
  the float32 parameter that ``ViTMAEEmbeddings.initialize_weights`` fills, to float32
  rounding).
* :class:`posenc.AxialRotaryEmbedding` is Qwen2-VL's vision rotary embedding
  (``Qwen2VLVisionRotaryEmbedding`` + ``apply_rotary_pos_emb_vision``), positions ordered
  by ``transformers.vision_utils.get_vision_position_ids`` (merge blocks first).
* :func:`posenc.mrope_position_ids` is ``Qwen2VLModel.get_rope_index`` for images and
  short videos; after a video with more temporal patches than
  ``max(h, w) / spatial_merge_size`` the two differ, and the test pins how.
* :class:`posenc.MultimodalRotaryEmbedding` is ``Qwen2VLRotaryEmbedding`` (contiguous
  sections) and ``Qwen3VLTextRotaryEmbedding`` (interleaved) followed by
  ``apply_rotary_pos_emb``, also when built from the Hugging Face ``rope_parameters`` dict.
* The ids of the three models, batched with padding, and the decoding offset
  (``rope_deltas``): equal to ``get_rope_index`` of ``Qwen2VLModel``, ``Qwen2_5_VLModel``
  (absolute time, ``second_per_grid_ts`` x ``tokens_per_second``) and ``Qwen3VLModel``
  (per-frame segments after text timestamps) wherever ``transformers`` follows the paper;
  where it does not (a Qwen2-VL or Qwen2.5-VL video whose time ids reach past
  ``max(h, w) / merge``), equal to the paper's rule restated here, and the tests pin what
  ``transformers`` 5.23 does instead, including its prefill/decode jump.

The whole file is skipped where ``transformers`` is not installed.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

import posenc
from posenc import multimodal as mm

transformers = pytest.importorskip("transformers")
mae = pytest.importorskip("transformers.models.vit_mae.modeling_vit_mae")
q2 = pytest.importorskip("transformers.models.qwen2_vl.modeling_qwen2_vl")
q3 = pytest.importorskip("transformers.models.qwen3_vl.modeling_qwen3_vl")
q25 = pytest.importorskip("transformers.models.qwen2_5_vl.modeling_qwen2_5_vl")
vision_utils = pytest.importorskip("transformers.vision_utils")
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig, Qwen2VLVisionConfig  # noqa: E402
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig  # noqa: E402

# ----------------------------------------------------------------------------- helpers


def hf_rope_index(segments, spatial_merge_size=2):
    """Run ``Qwen2VLModel.get_rope_index`` on a sequence described by segments (no model built)."""
    pos, delta = hf_batch_rope_index([segments], merge=spatial_merge_size)
    return pos[:, 0], int(delta)


def paper_rope_index(segments, spatial_merge_size=2):
    """The rule of the Qwen2-VL paper (section 2.1) re-stated: the next modality starts at max id + 1."""
    t_ids, h_ids, w_ids, nxt = [], [], [], 0
    for kind, size in segments:
        if kind == "text":
            for i in range(size):
                t_ids.append(nxt + i), h_ids.append(nxt + i), w_ids.append(nxt + i)
        else:
            t, h, w = size
            for a in range(t):
                for b in range(h // spatial_merge_size):
                    for c in range(w // spatial_merge_size):
                        t_ids.append(nxt + a), h_ids.append(nxt + b), w_ids.append(nxt + c)
        nxt = max(t_ids + h_ids + w_ids) + 1
    return torch.tensor([t_ids, h_ids, w_ids])


SEGMENT_CASES = [
    [("text", 5)],
    [("text", 3), ("image", (1, 4, 6)), ("text", 4)],
    [("text", 2), ("image", (1, 8, 2)), ("text", 3), ("image", (1, 2, 2)), ("text", 1)],
    [("text", 3), ("image", (1, 4, 6)), ("text", 4), ("video", (2, 4, 4)), ("text", 2)],
    [("text", 1), ("video", (3, 6, 4)), ("text", 2)],  # t = max(h, w) / m: still equal
    [("text", 2), ("image", (1, 6, 6)), ("text", 2)],
]

LONG_VIDEO_CASES = [
    [("text", 3), ("video", (8, 4, 4)), ("text", 3)],
    [("text", 1), ("video", (5, 4, 8)), ("text", 2), ("image", (1, 4, 4)), ("text", 2)],
]


# ----------------------------------------------------------------------------- ViT-MAE


@pytest.mark.parametrize(("grid", "d_model"), [(2, 8), (4, 64), (14, 768), (7, 32)])
def test_2d_table_is_the_table_vit_mae_builds(grid, d_model):
    built = mae.build_2d_sinusoidal_position_embedding(grid, grid, embed_dim=d_model, dtype=torch.float64)
    half = d_model // 2  # initialize_weights swaps the halves (the layout of the original MAE code)
    swapped = torch.cat([built[..., half:], built[..., :half]], dim=-1).numpy()
    np.testing.assert_allclose(mm.sinusoidal_encoding_2d(grid, d_model), swapped, rtol=0, atol=1e-12)


def test_2d_table_is_the_parameter_vit_mae_initialises():
    config = transformers.ViTMAEConfig(hidden_size=64, image_size=32, patch_size=8)
    emb = mae.ViTMAEEmbeddings(config)
    emb.initialize_weights()
    table = emb.position_embeddings[0].detach()
    assert torch.all(table[0] == 0)  # the CLS row
    ours = torch.from_numpy(mm.sinusoidal_encoding_2d(4, 64)).float()
    torch.testing.assert_close(table[1:], ours, rtol=0, atol=1.2e-7)


# ----------------------------------------------------------------------------- Qwen2-VL vision tower


@pytest.mark.parametrize(("grid", "merge"), [((1, 4, 6), 2), ((2, 4, 4), 2), ((1, 6, 3), 1), ((1, 16, 8), 2)])
@pytest.mark.parametrize("head_dim", [16, 80])
def test_axial_rope_is_qwen2_vl_vision_rotary(grid, merge, head_dim):
    config = Qwen2VLVisionConfig(embed_dim=2 * head_dim, num_heads=2, depth=1, spatial_merge_size=merge)
    hf = q2.Qwen2VLVisionRotaryEmbedding(config)
    pos = vision_utils.get_vision_position_ids(torch.tensor([list(grid)]), merge)  # (seq, 2): row, column
    x = torch.randn(pos.shape[0], 2, head_dim)  # transformers' layout: (seq, heads, head_dim)
    cos, sin = hf(x, pos)
    q, _ = q2.apply_rotary_pos_emb_vision(x, x, cos, sin)
    ours = mm.AxialRotaryEmbedding(head_dim)(x.transpose(0, 1), positions=pos).transpose(0, 1)
    torch.testing.assert_close(ours, q, rtol=0, atol=2e-6)


@pytest.mark.parametrize(("head_dim", "grid", "bit_equal", "bound"), [
    (16, (1, 64, 64), True, 0.0), (64, (1, 64, 64), True, 0.0),
    (80, (1, 16, 8), False, 5e-7), (80, (1, 64, 64), False, 2e-6),  # Qwen2-VL's own head width
])
def test_axial_rope_against_qwen2_vl_to_the_bit_or_not(head_dim, grid, bit_equal, bound):
    # what the docstring states: bit-equal where 4 / head_dim is a power of two, float32 rounding otherwise
    torch.manual_seed(0)
    config = Qwen2VLVisionConfig(embed_dim=2 * head_dim, num_heads=2, depth=1, spatial_merge_size=2)
    pos = vision_utils.get_vision_position_ids(torch.tensor([list(grid)]), 2)
    x = torch.randn(pos.shape[0], 2, head_dim)
    cos, sin = q2.Qwen2VLVisionRotaryEmbedding(config)(x, pos)
    q, _ = q2.apply_rotary_pos_emb_vision(x, x, cos, sin)
    ours = mm.AxialRotaryEmbedding(head_dim)(x.transpose(0, 1), positions=pos).transpose(0, 1)
    assert torch.equal(ours, q) == bit_equal
    assert float((ours - q).abs().max()) <= bound


def test_get_vision_position_ids_orders_patches_by_merge_block():
    pos = vision_utils.get_vision_position_ids(torch.tensor([[1, 4, 4]]), 2)
    assert pos[:4].tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]  # one 2x2 block, then the next
    rope = mm.AxialRotaryEmbedding(16)
    x = torch.randn(1, 1, 16, 16)
    row_major = torch.cartesian_prod(torch.arange(4), torch.arange(4))
    perm = [int(((row_major == p).all(-1)).nonzero()) for p in pos]
    # the same patch gets the same rotation whatever the order of the sequence
    torch.testing.assert_close(rope(x[:, :, perm], positions=pos), rope(x, positions=row_major)[:, :, perm])


def test_mixed_with_axial_init_is_qwen2_vl_vision_rotary():
    config = Qwen2VLVisionConfig(embed_dim=64, num_heads=2, depth=1)
    hf = q2.Qwen2VLVisionRotaryEmbedding(config)
    pos = vision_utils.get_vision_position_ids(torch.tensor([[1, 4, 6]]), 2)
    x = torch.randn(pos.shape[0], 2, 32)
    cos, sin = hf(x, pos)
    q, _ = q2.apply_rotary_pos_emb_vision(x, x, cos, sin)
    mixed = mm.MixedRotaryEmbedding(32, 2, base=10000.0, init="axial")
    ours = mixed(x.transpose(0, 1)[None], positions=pos)[0].transpose(0, 1)
    torch.testing.assert_close(ours, q, rtol=0, atol=2e-6)


# ----------------------------------------------------------------------------- Qwen2-VL get_rope_index


@pytest.mark.parametrize("segments", SEGMENT_CASES)
def test_mrope_ids_equal_get_rope_index(segments):
    hf, delta = hf_rope_index(segments)
    ours = mm.mrope_position_ids(segments)
    assert torch.equal(ours, hf)
    assert torch.equal(ours, paper_rope_index(segments))
    # the decoding offset transformers keeps (rope_deltas): next id = seq_len + delta
    assert int(ours.max()) + 1 == ours.shape[1] + delta


@pytest.mark.parametrize("merge", [1, 2, 4])
def test_mrope_ids_equal_get_rope_index_for_other_merge_sizes(merge):
    segments = [("text", 2), ("image", (1, 8, 4)), ("text", 3), ("video", (2, 4, 8)), ("text", 1)]
    hf, _ = hf_rope_index(segments, merge)
    assert torch.equal(mm.mrope_position_ids(segments, spatial_merge_size=merge), hf)


@pytest.mark.parametrize("segments", LONG_VIDEO_CASES)
def test_after_a_long_video_transformers_departs_from_the_paper(segments):
    hf, _ = hf_rope_index(segments)
    ours = mm.mrope_position_ids(segments)
    assert torch.equal(ours, paper_rope_index(segments))
    assert not torch.equal(ours, hf)
    # where they part: the first text token after the first video
    (i_video,) = [i for i, (kind, _) in enumerate(segments) if kind == "video"]
    lengths = [n if kind == "text" else n[0] * n[1] * n[2] // 4 for kind, n in segments]
    first_text = sum(lengths[: i_video + 1])  # the first text token after the video
    t, h, w = segments[i_video][1]
    start = int(ours[0, first_text - lengths[i_video]])  # the id the video starts at
    assert int(hf[0, first_text]) == start + max(h, w) // 2  # transformers: advance by max(h, w) / merge
    assert int(ours[0, first_text]) == start + t  # the paper: largest id so far + 1
    # with transformers' ids, the text after the video reuses temporal ids of its frames
    video_t = set(hf[0, first_text - lengths[i_video] : first_text].tolist())
    assert int(hf[0, first_text]) in video_t


# ----------------------------------------------------------------------------- M-RoPE rotation


IDS = mm.mrope_position_ids([("text", 3), ("image", (1, 4, 6)), ("text", 4), ("video", (2, 4, 4)), ("text", 2)])


@pytest.mark.parametrize(("head_dim", "sections", "base"), [(64, [8, 12, 12], 1e6), (128, [16, 24, 24], 1e6), (16, [2, 3, 3], 1e4)])
def test_contiguous_mrope_is_qwen2_vl_text_rotary(head_dim, sections, base):
    config = Qwen2VLTextConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        rope_parameters={"rope_type": "default", "rope_theta": base, "mrope_section": sections},
    )
    hf = q2.Qwen2VLRotaryEmbedding(config)
    pos = torch.stack([IDS, IDS + 4])
    pos = pos.permute(1, 0, 2)  # (3, batch=2, seq)
    x = torch.randn(2, 2, pos.shape[-1], head_dim)
    cos, sin = hf(x, pos)
    q, _ = q2.apply_rotary_pos_emb(x, x, cos, sin)
    ours = mm.MultimodalRotaryEmbedding(head_dim, sections, base=base)(x, positions=pos)
    torch.testing.assert_close(ours, q, rtol=0, atol=2e-6)


@pytest.mark.parametrize(("head_dim", "sections"), [(64, [12, 10, 10]), (128, [24, 20, 20]), (32, [8, 4, 4])])
def test_interleaved_mrope_is_qwen3_vl_text_rotary(head_dim, sections):
    config = Qwen3VLTextConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        head_dim=head_dim,
        rope_parameters={"rope_type": "default", "rope_theta": 5e6, "mrope_section": sections, "mrope_interleaved": True},
    )
    hf = q3.Qwen3VLTextRotaryEmbedding(config)
    pos = IDS[:, None].expand(3, 2, -1)
    x = torch.randn(2, 2, pos.shape[-1], head_dim)
    cos, sin = hf(x, pos)
    q, _ = q3.apply_rotary_pos_emb(x, x, cos, sin)
    ours = mm.MultimodalRotaryEmbedding(head_dim, sections, base=5e6, interleaved=True)(x, positions=pos)
    torch.testing.assert_close(ours, q, rtol=0, atol=2e-6)


@pytest.mark.parametrize("interleaved", [False, True])
def test_text_only_ids_reduce_to_rope_in_transformers_too(interleaved):
    pos = torch.arange(12).expand(3, 1, 12)
    x = torch.randn(1, 2, 12, 64)
    ours = mm.MultimodalRotaryEmbedding(64, [12, 10, 10], base=1e6, interleaved=interleaved)(x, positions=pos)
    plain = posenc.RotaryEmbedding(64, base=1e6)(x)
    torch.testing.assert_close(ours, plain, rtol=0, atol=2e-5)


def test_mrope_from_the_hugging_face_dicts_is_transformers_rotary():
    ids = IDS[:, None].expand(3, 2, -1)
    x = torch.randn(2, 2, ids.shape[-1], 64)
    qwen2 = {"type": "mrope", "mrope_section": [8, 12, 12]}  # as in Qwen2-VL's config.json (rope_theta beside it)
    config = Qwen2VLTextConfig(hidden_size=128, num_attention_heads=2, rope_theta=1e6, rope_scaling=dict(qwen2))
    cos, sin = q2.Qwen2VLRotaryEmbedding(config)(x, ids)
    ours = mm.MultimodalRotaryEmbedding(64, base=1e6, scaling=qwen2)
    assert ours.sections == [8, 12, 12] and not ours.interleaved
    torch.testing.assert_close(ours(x, positions=ids), q2.apply_rotary_pos_emb(x, x, cos, sin)[0], rtol=0, atol=2e-6)
    qwen3 = {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [12, 10, 10], "mrope_interleaved": True}
    config = Qwen3VLTextConfig(hidden_size=128, num_attention_heads=2, head_dim=64, rope_parameters=dict(qwen3))
    cos, sin = q3.Qwen3VLTextRotaryEmbedding(config)(x, ids)
    ours = mm.MultimodalRotaryEmbedding(64, scaling=config.rope_parameters)
    assert (ours.sections, ours.base, ours.interleaved) == ([12, 10, 10], 5e6, True)
    torch.testing.assert_close(ours(x, positions=ids), q3.apply_rotary_pos_emb(x, x, cos, sin)[0], rtol=0, atol=2e-6)
    # the tables, applied once per layer, are transformers' cos/sin (their first half)
    t = ours.tables(ids)
    torch.testing.assert_close(t.cos, cos[..., :32], rtol=0, atol=2e-6)
    torch.testing.assert_close(t.sin, sin[..., :32], rtol=0, atol=2e-6)


@pytest.mark.parametrize(
    ("scaling", "kwargs", "exc", "match"),
    [
        ({"rope_type": "yarn", "factor": 2.0, "mrope_section": [2, 3, 3]}, {}, ValueError, "rope_type"),
        ({"rope_type": "default", "mrope_section": [2, 3, 3], "factor": 2.0}, {}, ValueError, "factor"),
        ({"rope_type": "default"}, {}, ValueError, "mrope_section"),
        ({"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 1e6}, {"base": 1e4}, ValueError, "base"),
        ({"rope_type": "default", "mrope_section": [2, 3, 3]}, {"sections": [4, 2, 2]}, ValueError, "sections"),
        ({"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True}, {"interleaved": False}, ValueError, "interleaved"),
        ([("rope_type", "default")], {}, TypeError, "scaling"),
        (None, {}, TypeError, "sections"),
    ],
)
def test_mrope_bad_hugging_face_dict_is_refused(scaling, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        mm.MultimodalRotaryEmbedding(16, scaling=scaling, **kwargs)


# ----------------------------------------------------------------------------- the ids of the three models

MODELS = {"qwen2": q2.Qwen2VLModel, "qwen2.5": q25.Qwen2_5_VLModel, "qwen3": q3.Qwen3VLModel}


def _hf_call(model, token_types, mask, images, videos, seconds, merge, tokens_per_second):
    cls = MODELS[model]
    vision = types.SimpleNamespace(spatial_merge_size=merge, tokens_per_second=tokens_per_second)
    fake = types.SimpleNamespace(
        config=types.SimpleNamespace(vision_config=vision),
        get_vision_position_ids=lambda *a, **k: cls.get_vision_position_ids(None, *a, **k),
    )
    kwargs = dict(
        image_grid_thw=torch.tensor(images) if images else None,
        video_grid_thw=torch.tensor(videos) if videos else None,
        attention_mask=mask,
    )
    if model == "qwen2.5":
        kwargs["second_per_grid_ts"] = torch.tensor(seconds) if seconds else None  # float32, as the processor returns it
    return cls.get_rope_index(fake, torch.zeros_like(token_types), token_types, **kwargs)


def hf_batch_rope_index(batch, model="qwen2", merge=2, tokens_per_second=2, padding_side="left", videos=None):
    """``get_rope_index`` of ``model`` on a padded batch of segment lists (no model built).

    ``videos``: the ``video_grid_thw`` rows to pass (Qwen3-VL takes one row per video and
    splits it into frames itself); by default one row per video segment.
    """
    rows, images, video_rows, seconds = [], [], [], []
    for segments in batch:
        tt = []
        for seg in segments:
            kind, size = seg[0], seg[1]
            if kind == "text":
                tt += [0] * size
            else:
                t, h, w = size
                tt += [1 if kind == "image" else 2] * (t * h * w // merge**2)
                (images if kind == "image" else video_rows).append(list(size))
                if kind == "video":
                    seconds.append(seg[2] if len(seg) == 3 else 1.0)
        rows.append(tt)
    length = max(map(len, rows))
    token_types = torch.zeros(len(rows), length, dtype=torch.long)
    mask = torch.zeros(len(rows), length, dtype=torch.long)
    for b, tt in enumerate(rows):
        sl = slice(length - len(tt), length) if padding_side == "left" else slice(0, len(tt))
        token_types[b, sl], mask[b, sl] = torch.tensor(tt), 1
    return _hf_call(model, token_types, mask, images, video_rows if videos is None else videos, seconds, merge, tokens_per_second)


@pytest.mark.parametrize("padding_side", ["left", "right"])
def test_qwen2_vl_batch_and_deltas_equal_get_rope_index(padding_side):
    batch = SEGMENT_CASES
    ours = mm.mrope_position_ids_batch(batch, padding_side=padding_side)
    hf, deltas = hf_batch_rope_index(batch, padding_side=padding_side)
    assert torch.equal(ours.position_ids, hf)
    assert torch.equal(ours.rope_deltas, deltas)
    for b, segments in enumerate(batch):  # each row is the row alone
        real = ours.attention_mask[b].bool()
        assert torch.equal(ours.position_ids[:, b, real], mm.mrope_position_ids(segments))


# Qwen2.5-VL: seconds per temporal patch = temporal_patch_size / fps; tokens_per_second = 2 (released configs)
QWEN25_CASES = [
    [("text", 3), ("image", (1, 4, 6)), ("text", 2)],  # images keep time 0 (transformers #45325 fixed)
    [("text", 2), ("video", (2, 8, 8), 1.0), ("text", 3)],  # 2 fps: time ids 0, 2 -> max(h, w) / 2 = 4 still ahead
    [("text", 2), ("video", (3, 12, 8), 2.0 / 3.0), ("text", 1)],  # 3 fps: 0, 1, 2
    [("text", 1), ("video", (2, 10, 10), 2.0), ("text", 2), ("image", (1, 4, 4)), ("text", 1)],  # 1 fps: 0, 4
    [("text", 4), ("video", (5, 16, 16), 2.0 / 24.0), ("text", 2)],  # 24 fps unsampled: 0, 0, 0, 0, 0
]


def test_qwen2_5_vl_absolute_time_equals_get_rope_index_where_it_follows_the_paper():
    ours = mm.mrope_position_ids_batch(QWEN25_CASES, tokens_per_second=2)
    hf, deltas = hf_batch_rope_index(QWEN25_CASES, model="qwen2.5", tokens_per_second=2)
    assert torch.equal(ours.position_ids, hf)
    assert torch.equal(ours.rope_deltas, deltas)
    # and the paper's rule: time id = start + floor(i * tokens_per_second * seconds per patch)
    ids = mm.mrope_position_ids(QWEN25_CASES[3], tokens_per_second=2)
    assert ids[0, 1:26].tolist() == [1] * 25 and ids[0, 26:51].tolist() == [5] * 25
    assert ids[:, 51].tolist() == [6, 6, 6]  # the text after: the largest id (5) plus one


@pytest.mark.parametrize("fps", [0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 23.976, 25.0, 29.97, 30.0])
def test_qwen2_5_vl_video_time_ids_equal_transformers_at_many_frame_rates(fps):
    segments = [("text", 2), ("video", (40, 4, 4), 2.0 / fps), ("text", 1)]
    ours = mm.mrope_position_ids(segments, tokens_per_second=2)
    hf, _ = hf_batch_rope_index([segments], model="qwen2.5", tokens_per_second=2)
    n = 2 + 40 * 4  # the text before and the video: the same ids whichever rule follows
    assert torch.equal(ours[:, :n], hf[:, 0, :n])


def test_qwen3_vl_frames_and_timestamps_equal_transformers():
    proc = pytest.importorskip("transformers.models.qwen3_vl.processing_qwen3_vl")
    frames = [0, 15, 30, 45, 60, 75, 90]
    ts = mm.qwen3_vl_timestamps(frames, 30.0)
    assert ts == proc.Qwen3VLProcessor._calculate_timestamps(None, list(frames), 30.0, 2)
    assert [f"<{t:.1f} seconds>" for t in ts] == ["<0.2 seconds>", "<1.2 seconds>", "<2.2 seconds>", "<3.0 seconds>"]
    video = mm.qwen3_vl_video_segments((4, 8, 12), [5, 5, 5, 5])  # 5 tokens per timestamp text (tokenizer-dependent)
    batch = [
        [("text", 3)] + video + [("text", 4)],
        [("text", 2), ("image", (1, 4, 4)), ("text", 2)] + mm.qwen3_vl_video_segments((2, 4, 4), [4, 6]) + [("text", 1)],
    ]
    ours = mm.mrope_position_ids_batch(batch)
    hf, deltas = hf_batch_rope_index(batch, model="qwen3", videos=[[4, 8, 12], [2, 4, 4]])
    assert torch.equal(ours.position_ids, hf)
    assert torch.equal(ours.rope_deltas, deltas)
    # one frame per segment: every video token has time id = the id its frame starts at
    ids = mm.mrope_position_ids(batch[0])
    frame0 = ids[:, 3 + 6 : 3 + 6 + 24]
    assert set(frame0[0].tolist()) == {9} and frame0[1].max() == 9 + 3 and frame0[2].max() == 9 + 5


# ----------------------------------------------------------------------------- the transformers regression, pinned

KEEP_TEXT_AFTER_VIDEO = [
    # (segments, tokens_per_second, model, paper's first text id after the video, transformers 5.23's)
    ([("text", 3), ("video", (8, 4, 4)), ("text", 3)], None, "qwen2", 11, 5),
    # the video of transformers issue #45381 (Qwen2.5-VL, fps 1, 84 temporal patches, 12 x 16 merged):
    # v5.2.0 printed the text after it at 348, 5.3 and later at 31
    ([("text", 15), ("video", (84, 24, 32), 2.0), ("text", 10)], 2, "qwen2.5", 348, 31),
    # an ordinary Qwen2.5-VL case: 30 s sampled at 2 fps (30 temporal patches of 2 frames), 448 x 448 px
    ([("text", 3), ("video", (30, 32, 32), 1.0), ("text", 3)], 2, "qwen2.5", 62, 19),
]


@pytest.mark.parametrize(("segments", "tps", "model", "paper", "hf_start"), KEEP_TEXT_AFTER_VIDEO)
def test_text_after_a_video_paper_against_transformers_5_3_and_later(segments, tps, model, paper, hf_start):
    ours = mm.mrope_position_ids(segments, tokens_per_second=tps)
    hf, _ = hf_batch_rope_index([segments], model=model, tokens_per_second=tps)
    hf = hf[:, 0]
    t, h, w = segments[1][1]
    first_text = segments[0][1] + t * h * w // 4
    video_time = ours[0, segments[0][1] : first_text]
    assert torch.equal(ours[:, :first_text], hf[:, :first_text])  # the same video ids
    assert int(ours[0, first_text]) == int(video_time.max()) + 1 == paper
    assert int(hf[0, first_text]) == segments[0][1] + max(h, w) // 2 == hf_start
    assert hf_start <= int(video_time.max())  # transformers' text reuses the video's time ids


def test_qwen2_5_vl_thirty_second_video_at_448_px():
    # 30 s sampled at 2 fps = 60 frames = 30 temporal patches of 2 frames (1 s each); 448 px = 32 patches of 14
    segments = [("text", 3), ("video", (30, 32, 32), 1.0), ("text", 3)]
    ids = mm.mrope_position_ids(segments, tokens_per_second=2)
    hf, _ = hf_batch_rope_index([segments], model="qwen2.5", tokens_per_second=2)
    video = slice(3, 3 + 30 * 16 * 16)
    assert (int(ids[0, video].min()), int(ids[0, video].max())) == (3, 61)  # time ids 3, 5, ..., 61
    assert ids[0, -3:].tolist() == [62, 63, 64]
    assert hf[0, 0, -3:].tolist() == [19, 20, 21]  # inside the video's time range, 21 s of video before its end


def _prefill_and_decode_step(segments):
    """transformers' Qwen2VLModel.compute_3d_position_ids: prefill, then one decoding step with a cache."""
    token_types = []
    videos = []
    for kind, size in segments:
        token_types += [0] * size if kind == "text" else [2] * (size[0] * size[1] * size[2] // 4)
        if kind == "video":
            videos.append(list(size))
    tt = torch.tensor([token_types])
    fake = types.SimpleNamespace(rope_deltas=None)
    fake.get_rope_index = lambda *a, **k: hf_batch_rope_index([segments])
    prefill = q2.Qwen2VLModel.compute_3d_position_ids(
        fake, torch.zeros_like(tt), None, video_grid_thw=torch.tensor(videos), mm_token_type_ids=tt
    )
    cache = types.SimpleNamespace(get_seq_length=lambda: tt.shape[1])
    step = q2.Qwen2VLModel.compute_3d_position_ids(
        fake, None, torch.zeros(1, 1, 8), video_grid_thw=torch.tensor(videos), past_key_values=cache, mm_token_type_ids=tt
    )
    return prefill[:, 0], step[:, 0], fake.rope_deltas


def test_transformers_prefill_and_decoding_disagree_after_a_long_video():
    segments = [("text", 3), ("video", (8, 4, 4)), ("text", 3)]
    prefill, step, deltas = _prefill_and_decode_step(segments)
    assert prefill[0, -3:].tolist() == [5, 6, 7]  # the prompt's text after the video: max(h, w) / 2 rule
    assert step[:, 0].tolist() == [11, 11, 11]  # the next token: rope_deltas assume max + 1; 8, 9, 10 skipped
    assert int(deltas) == 11 - prefill.shape[1]
    # posenc: one rule for prefill and decoding, the first new token continues at max + 1
    ours = mm.mrope_position_ids_batch([segments])
    nxt = mm.mrope_decode_position_ids(ours.rope_deltas, ours.attention_mask.sum(-1), 2)
    assert ours.position_ids[0, 0, -3:].tolist() == [11, 12, 13]
    assert nxt[:, 0].tolist() == [[14, 15]] * 3
    # where transformers follows the paper, its decoding offset and posenc's agree
    short = [("text", 3), ("video", (2, 4, 4)), ("text", 3)]
    prefill, step, _ = _prefill_and_decode_step(short)
    assert step[0, 0] == prefill[0, -1] + 1
    assert torch.equal(step[:, :, None].expand(3, 1, 1)[:, 0], mm.mrope_decode_position_ids(mm.mrope_rope_deltas(mm.mrope_position_ids(short)), prefill.shape[1])[:, 0])


def test_transformers_generate_continues_from_the_last_prompt_id():
    # generate() keeps its own position ids (last + 1), so it does not jump; a forward call with a
    # cache and no position_ids (a hand-written decoding loop) goes through rope_deltas and does
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    torch.manual_seed(0)
    cfg = Qwen2VLConfig(
        text_config=dict(vocab_size=160, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=2, rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]},
                         bos_token_id=0, eos_token_id=0, pad_token_id=0),
        vision_config=dict(depth=1, embed_dim=16, hidden_size=32, num_heads=2, patch_size=2, temporal_patch_size=2, spatial_merge_size=2),
        image_token_id=150, video_token_id=151, vision_start_token_id=152, vision_end_token_id=153,
    )
    model = Qwen2VLForConditionalGeneration(cfg).eval()
    input_ids = torch.tensor([[1, 2, 152] + [151] * 32 + [153, 5, 6]])
    mm = torch.tensor([[0, 0, 0] + [2] * 32 + [0, 0, 0]])
    video = dict(pixel_values_videos=torch.randn(8 * 4 * 4, 3 * 2 * 2 * 2), video_grid_thw=torch.tensor([[8, 4, 4]]))
    seen = []
    model.model.language_model.register_forward_pre_hook(lambda m, a, k: seen.append(k.get("position_ids")), with_kwargs=True)
    with torch.no_grad():
        model.generate(input_ids=input_ids, mm_token_type_ids=mm, attention_mask=torch.ones_like(input_ids),
                       max_new_tokens=2, do_sample=False, min_new_tokens=2, **video)
        assert seen[0][1:, 0, -3:].tolist() == [[5, 6, 7]] * 3 and seen[1][1:, 0].tolist() == [[8]] * 3
        seen.clear()
        model.model.rope_deltas = None
        out = model(input_ids=input_ids, mm_token_type_ids=mm, use_cache=True, **video)
        model(input_ids=out.logits[:, -1:].argmax(-1), past_key_values=out.past_key_values, use_cache=True)
    assert seen[-1][:, 0].tolist() == [[11]] * 3


def test_batched_decoding_ids_equal_transformers_with_an_attention_mask():
    batch = SEGMENT_CASES
    ours = mm.mrope_position_ids_batch(batch, padding_side="left")
    _, deltas = hf_batch_rope_index(batch)
    fake = types.SimpleNamespace(rope_deltas=deltas)
    mask = torch.cat([ours.attention_mask, torch.ones(len(batch), 1, dtype=torch.long)], dim=1)  # one new token
    cache = types.SimpleNamespace(get_seq_length=lambda: ours.attention_mask.shape[1])
    hf = q2.Qwen2VLModel.compute_3d_position_ids(fake, None, torch.zeros(len(batch), 1, 8), attention_mask=mask, past_key_values=cache)
    nxt = mm.mrope_decode_position_ids(ours.rope_deltas, ours.attention_mask.sum(-1))
    assert torch.equal(nxt, hf[..., -1:])
    # the first generated token of every row continues at the row's largest id + 1
    largest = ours.position_ids.masked_fill(~ours.attention_mask.bool()[None], -1).amax(dim=(0, 2))
    assert nxt[0, :, 0].tolist() == (largest + 1).tolist()
