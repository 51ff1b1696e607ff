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
  ``apply_rotary_pos_emb``.

The whole file is skipped where ``transformers`` is not installed.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

import posenc
from posenc.multimodal import (
    AxialRotaryEmbedding,
    MixedRotaryEmbedding,
    MultimodalRotaryEmbedding,
    mrope_position_ids,
    sinusoidal_encoding_2d,
)

transformers = pytest.importorskip("transformers")
mae = pytest.importorskip("transformers.models.vit_mae.modeling_vit_mae")
q2 = pytest.importorskip("transformers.models.qwen2_vl.modeling_qwen2_vl")
q3 = pytest.importorskip("transformers.models.qwen3_vl.modeling_qwen3_vl")
vision_utils = pytest.importorskip("transformers.vision_utils")
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig, Qwen2VLVisionConfig  # noqa: E402
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig  # noqa: E402

# ----------------------------------------------------------------------------- helpers


def hf_rope_index(segments, spatial_merge_size=2):
    """Run ``Qwen2VLModel.get_rope_index`` on a sequence described by segments (no model built)."""
    token_types, images, videos = [], [], []
    for kind, size in segments:
        if kind == "text":
            token_types += [0] * size
        else:
            t, h, w = size
            token_types += [1 if kind == "image" else 2] * (t * h * w // spatial_merge_size**2)
            (images if kind == "image" else videos).append(list(size))
    config = types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=spatial_merge_size))
    fake = types.SimpleNamespace(
        config=config,
        get_vision_position_ids=lambda *a, **k: q2.Qwen2VLModel.get_vision_position_ids(None, *a, **k),
    )
    input_ids = torch.zeros(1, len(token_types), dtype=torch.long)
    pos, delta = q2.Qwen2VLModel.get_rope_index(
        fake,
        input_ids,
        torch.tensor([token_types]),
        torch.tensor(images) if images else None,
        torch.tensor(videos) if videos else None,
    )
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
    np.testing.assert_allclose(sinusoidal_encoding_2d(grid, d_model), swapped, rtol=0, atol=1e-12)


def test_2d_table_is_the_parameter_vit_mae_initialises():
    config = transformers.ViTMAEConfig(hidden_size=64, image_size=32, patch_size=8)
    emb = mae.ViTMAEEmbeddings(config)
    emb.initialize_weights()
    table = emb.position_embeddings[0].detach()
    assert torch.all(table[0] == 0)  # the CLS row
    ours = torch.from_numpy(sinusoidal_encoding_2d(4, 64)).float()
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
    ours = AxialRotaryEmbedding(head_dim)(x.transpose(0, 1), positions=pos).transpose(0, 1)
    torch.testing.assert_close(ours, q, rtol=0, atol=2e-6)


def test_get_vision_position_ids_orders_patches_by_merge_block():
    pos = vision_utils.get_vision_position_ids(torch.tensor([[1, 4, 4]]), 2)
    assert pos[:4].tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]  # one 2x2 block, then the next
    rope = AxialRotaryEmbedding(16)
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
    mixed = MixedRotaryEmbedding(32, 2, base=10000.0, init="axial")
    ours = mixed(x.transpose(0, 1)[None], positions=pos)[0].transpose(0, 1)
    torch.testing.assert_close(ours, q, rtol=0, atol=2e-6)


# ----------------------------------------------------------------------------- Qwen2-VL get_rope_index


@pytest.mark.parametrize("segments", SEGMENT_CASES)
def test_mrope_ids_equal_get_rope_index(segments):
    hf, delta = hf_rope_index(segments)
    ours = mrope_position_ids(segments)
    assert torch.equal(ours, hf)
    assert torch.equal(ours, paper_rope_index(segments))
    # the decoding offset transformers keeps (rope_deltas): next id = seq_len + delta
    assert int(ours.max()) + 1 == ours.shape[1] + delta


@pytest.mark.parametrize("merge", [1, 2, 4])
def test_mrope_ids_equal_get_rope_index_for_other_merge_sizes(merge):
    segments = [("text", 2), ("image", (1, 8, 4)), ("text", 3), ("video", (2, 4, 8)), ("text", 1)]
    hf, _ = hf_rope_index(segments, merge)
    assert torch.equal(mrope_position_ids(segments, spatial_merge_size=merge), hf)


@pytest.mark.parametrize("segments", LONG_VIDEO_CASES)
def test_after_a_long_video_transformers_departs_from_the_paper(segments):
    hf, _ = hf_rope_index(segments)
    ours = mrope_position_ids(segments)
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


IDS = mrope_position_ids([("text", 3), ("image", (1, 4, 6)), ("text", 4), ("video", (2, 4, 4)), ("text", 2)])


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
    ours = MultimodalRotaryEmbedding(head_dim, sections, base=base)(x, positions=pos)
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
    ours = MultimodalRotaryEmbedding(head_dim, sections, base=5e6, interleaved=True)(x, positions=pos)
    torch.testing.assert_close(ours, q, rtol=0, atol=2e-6)


@pytest.mark.parametrize("interleaved", [False, True])
def test_text_only_ids_reduce_to_rope_in_transformers_too(interleaved):
    pos = torch.arange(12).expand(3, 1, 12)
    x = torch.randn(1, 2, 12, 64)
    ours = MultimodalRotaryEmbedding(64, [12, 10, 10], base=1e6, interleaved=interleaved)(x, positions=pos)
    plain = posenc.RotaryEmbedding(64, base=1e6)(x)
    torch.testing.assert_close(ours, plain, rtol=0, atol=2e-5)
