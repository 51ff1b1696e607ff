"""Positions beyond one dimension (chapter 8): properties, traceability and bad input.

The cross-checks against ``transformers`` are in ``test_multimodal_vs_transformers.py``;
here: the 2-D table's layout and per-axis rotation property, the offset-only scores of
axial and mixed 2-D RoPE, equality with Heo et al.'s complex-number formulation
(re-stated independently), float32 angles for float32 input, no state kept between calls,
``torch.compile(fullgraph=True)``, ``torch.export``, the meta device, and errors that name
the argument.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import posenc
from posenc.multimodal import (
    AxialRotaryEmbedding,
    MixedRotaryEmbedding,
    MultimodalRotaryEmbedding,
    mrope_decode_position_ids,
    mrope_position_ids,
    mrope_position_ids_batch,
    mrope_rope_deltas,
    qwen3_vl_timestamps,
    qwen3_vl_video_segments,
    sinusoidal_encoding_2d,
)


def grid_positions(h, w):
    return torch.cartesian_prod(torch.arange(h), torch.arange(w))


# ----------------------------------------------------------------------------- 2-D sin-cos


def test_2d_table_halves_are_1d_codes_of_column_and_row():
    h, w, d = 3, 5, 16
    t = sinusoidal_encoding_2d((h, w), d)
    assert t.shape == (h * w, d) and t.dtype == np.float64
    omega = 10000.0 ** (-4 * np.arange(d // 4) / d)
    for r in range(h):
        for c in range(w):
            row = t[r * w + c]
            np.testing.assert_allclose(row, np.concatenate([np.sin(c * omega), np.cos(c * omega), np.sin(r * omega), np.cos(r * omega)]))


def test_2d_table_rotation_property_per_axis():
    d, h, w = 32, 6, 7
    t = sinusoidal_encoding_2d((h, w), d)
    q = d // 4
    omega = 10000.0 ** (-4 * np.arange(q) / d)
    for dr, dc in [(1, 0), (0, 2), (3, 4)]:
        a, b = t[1 * w + 2], t[(1 + dr) * w + 2 + dc]
        # column half: (sin, cos) pairs turn by dc * omega; row half by dr * omega
        for off, shift in [(0, dc), (2 * q, dr)]:
            s, c = a[off : off + q], a[off + q : off + 2 * q]
            s2 = s * np.cos(shift * omega) + c * np.sin(shift * omega)
            c2 = c * np.cos(shift * omega) - s * np.sin(shift * omega)
            np.testing.assert_allclose(b[off : off + q], s2, atol=1e-12)
            np.testing.assert_allclose(b[off + q : off + 2 * q], c2, atol=1e-12)


def test_2d_table_rectangular_and_square_forms():
    np.testing.assert_array_equal(sinusoidal_encoding_2d(4, 8), sinusoidal_encoding_2d((4, 4), 8))
    assert sinusoidal_encoding_2d((2, 9), 12).shape == (18, 12)


# ----------------------------------------------------------------------------- axial and mixed RoPE


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("kind", ["axial", "mixed"])
def test_score_depends_only_on_the_2d_offset(layout, kind):
    torch.manual_seed(0)
    if kind == "axial":
        rope = AxialRotaryEmbedding(16, layout=layout)
    else:
        rope = MixedRotaryEmbedding(16, 2, layout=layout)
    q, k = torch.randn(1, 2, 1, 16, dtype=torch.float64), torch.randn(1, 2, 1, 16, dtype=torch.float64)

    def score(p, p2):
        a = rope(q, positions=torch.tensor([p], dtype=torch.float64))
        b = rope(k, positions=torch.tensor([p2], dtype=torch.float64))
        return (a * b).sum(-1)

    ref = score((2, 3), (5, 1))
    for shift in [(1, 0), (0, 7), (-4, 11), (30, -2)]:
        moved = score((2 + shift[0], 3 + shift[1]), (5 + shift[0], 1 + shift[1]))
        torch.testing.assert_close(moved, ref, rtol=0, atol=1e-10)
    assert not torch.allclose(score((2, 3), (5, 2)), ref)


def test_axial_pairs_turn_with_row_then_column():
    rope = AxialRotaryEmbedding(8, base=100.0)
    ang = rope.angles(torch.tensor([[2.0, 5.0]]))
    w = 100.0 ** (-4 * torch.arange(2) / 8)
    torch.testing.assert_close(ang[0], torch.cat([2 * w, 5 * w]))


def heo_axial(x, positions, base):
    """Heo et al.'s RoPE-Axial restated with complex numbers: first quarter of pairs with x (column)."""
    d = x.shape[-1]
    freqs = 1.0 / base ** (torch.arange(0, d, 4)[: d // 4].double() / d)
    tx, ty = positions[:, 1].double(), positions[:, 0].double()
    ang = torch.cat([torch.outer(tx, freqs), torch.outer(ty, freqs)], dim=-1)
    xc = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * torch.polar(torch.ones_like(ang), ang)).flatten(-2)


def test_interleaved_layout_is_heo_et_al_with_x_first():
    pos = grid_positions(4, 5)
    x = torch.randn(2, 3, 20, 16, dtype=torch.float64)
    ours = AxialRotaryEmbedding(16, base=100.0, layout="interleaved")(x, positions=pos.flip(-1))
    torch.testing.assert_close(ours, heo_axial(x, pos, 100.0), rtol=0, atol=1e-12)


def test_mixed_random_init_follows_the_papers_recipe():
    torch.manual_seed(3)
    m = MixedRotaryEmbedding(16, 4, base=10.0)
    rows, cols = m.freqs.detach()
    mag = 10.0 ** (-4 * torch.arange(4) / 16)
    length = torch.sqrt(rows**2 + cols**2)
    torch.testing.assert_close(length, torch.cat([mag, mag]).expand(4, 8), rtol=1e-6, atol=0)
    # the two pairs of each length point at right angles
    dot = rows[:, :4] * rows[:, 4:] + cols[:, :4] * cols[:, 4:]
    torch.testing.assert_close(dot, torch.zeros_like(dot), atol=1e-7, rtol=0)
    # one direction per head, different heads different directions
    direction = torch.atan2(rows[:, :4], cols[:, :4])
    assert torch.allclose(direction, direction[:, :1].expand(4, 4), atol=1e-6)
    assert len(set(np.round(direction[:, 0].numpy(), 4))) == 4


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_mixed_with_axial_init_equals_axial(layout):
    pos = grid_positions(3, 4)
    x = torch.randn(2, 3, 12, 16)
    mixed = MixedRotaryEmbedding(16, 3, base=100.0, init="axial", layout=layout)
    axial = AxialRotaryEmbedding(16, base=100.0, layout=layout)
    torch.testing.assert_close(mixed(x, positions=pos), axial(x, positions=pos), rtol=0, atol=1e-6)


def test_mixed_frequencies_learn():
    torch.manual_seed(0)
    m = MixedRotaryEmbedding(8, 2)
    x = torch.randn(1, 2, 6, 8)
    m(x, positions=grid_positions(2, 3)).square().sum().backward()
    assert m.freqs.grad is not None and m.freqs.grad.abs().sum() > 0


@pytest.mark.parametrize("kind", ["axial", "mixed", "mrope"])
def test_batched_positions_equal_one_call_per_sequence(kind):
    x = torch.randn(2, 2, 6, 16)
    if kind == "mrope":
        mod = MultimodalRotaryEmbedding(16, [2, 3, 3])
        pos = torch.stack([mrope_position_ids([("text", 2), ("image", (1, 2, 4)), ("text", 2)]), torch.arange(6).expand(3, 6) + 3], dim=1)
        out = mod(x, positions=pos)
        for b in range(2):
            torch.testing.assert_close(out[b : b + 1], mod(x[b : b + 1], positions=pos[:, b]))
        return
    mod = AxialRotaryEmbedding(16) if kind == "axial" else MixedRotaryEmbedding(16, 2)
    pos = torch.stack([grid_positions(2, 3), grid_positions(3, 2) + 1])
    out = mod(x, positions=pos)
    for b in range(2):
        torch.testing.assert_close(out[b : b + 1], mod(x[b : b + 1], positions=pos[b]))


# ----------------------------------------------------------------------------- M-RoPE


def test_mrope_ids_example_and_jump_after_an_image():
    ids = mrope_position_ids([("text", 2), ("image", (1, 4, 6)), ("text", 2)])
    assert ids.dtype == torch.long and ids.shape == (3, 10)
    assert ids[:, :2].tolist() == [[0, 1]] * 3
    assert ids[:, -2:].tolist() == [[5, 6]] * 3  # image ids reach 2 + 2 = 4; text resumes at 5


def test_mrope_video_ids_are_frame_major():
    ids = mrope_position_ids([("text", 1), ("video", (3, 2, 4)), ("text", 1)], spatial_merge_size=2)
    assert ids[0, 1:7].tolist() == [1, 1, 2, 2, 3, 3]
    assert ids[1, 1:7].tolist() == [1] * 6
    assert ids[2, 1:7].tolist() == [1, 2, 1, 2, 1, 2]
    assert int(ids[0, -1]) == 4  # after the largest id, 3


@pytest.mark.parametrize("interleaved", [False, True])
def test_mrope_on_text_ids_is_rope(interleaved):
    mod = MultimodalRotaryEmbedding(32, [4, 6, 6], interleaved=interleaved)
    x = torch.randn(2, 3, 9, 32)
    pos = torch.arange(9).expand(3, 2, 9)
    torch.testing.assert_close(mod(x, positions=pos), posenc.RotaryEmbedding(32)(x), rtol=0, atol=1e-5)


def test_interleaved_axes_spread_over_the_ladder():
    contiguous = MultimodalRotaryEmbedding(128, [24, 20, 20]).axis_of_pair()
    interleaved = MultimodalRotaryEmbedding(128, [24, 20, 20], interleaved=True).axis_of_pair()
    for axes in (contiguous, interleaved):
        assert torch.bincount(axes).tolist() == [24, 20, 20]
    assert set(contiguous[:24].tolist()) == {0} and set(contiguous[-20:].tolist()) == {2}
    assert interleaved[:6].tolist() == [0, 1, 2, 0, 1, 2] and set(interleaved[-4:].tolist()) == {0}
    # every axis has a pair among the fastest ten and among the slowest half
    for a in range(3):
        assert a in interleaved[:10].tolist() and a in interleaved[32:].tolist()


# ----------------------------------------------------------------------------- dtypes, state, tracing


class _DtypeRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.dtypes = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.dtypes.add(t.dtype)
        return out


def _modules_and_positions():
    ids = mrope_position_ids([("text", 2), ("image", (1, 2, 4)), ("text", 2)])[:, None]
    return [
        (AxialRotaryEmbedding(16), grid_positions(2, 3)),
        (AxialRotaryEmbedding(16, layout="interleaved"), grid_positions(2, 3).float()),
        (MixedRotaryEmbedding(16, 2), grid_positions(2, 3)),
        (MultimodalRotaryEmbedding(16, [2, 3, 3], interleaved=True), ids),
    ]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_angles_in_float32_never_float64(dtype):
    for mod, pos in _modules_and_positions():
        x = torch.randn(1, 2, pos.shape[-2] if pos.shape[0] != 3 else pos.shape[-1], 16).to(dtype)
        with _DtypeRecorder() as rec:
            out = mod(x, positions=pos)
        assert out.dtype == dtype
        assert torch.float64 not in rec.dtypes, type(mod).__name__
        ref = mod.double()(x.double(), positions=pos)
        mod.float()
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(out.double(), ref, rtol=0, atol=tol)


def test_forward_keeps_no_state():
    for mod, pos in _modules_and_positions():
        before = {k: v.clone() for k, v in mod.state_dict(keep_vars=True).items()}
        buffers = {k: v.clone() for k, v in mod.named_buffers()}
        x = torch.randn(1, 2, pos.shape[-1] if pos.shape[0] == 3 else pos.shape[0], 16)
        mod(x, positions=pos)
        mod(x[:, :, :1], positions=pos[..., :1] if pos.shape[0] == 3 else pos[:1])
        for k, v in mod.state_dict(keep_vars=True).items():
            assert torch.equal(v, before[k])
        assert {k: v for k, v in mod.named_buffers()}.keys() == buffers.keys()


class _TinyVisionAttention(torch.nn.Module):
    def __init__(self, rope):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)
        self.rope = rope

    def forward(self, x, positions):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, 2, 16).permute(2, 0, 3, 1, 4)
        q, k = self.rope(q, positions=positions), self.rope(k, positions=positions)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def _cases():
    ids = mrope_position_ids([("text", 2), ("image", (1, 2, 4)), ("text", 2)])
    return [
        ("axial", AxialRotaryEmbedding(16), grid_positions(2, 3)),
        ("axial-batched", AxialRotaryEmbedding(16, layout="interleaved"), torch.stack([grid_positions(2, 3), grid_positions(3, 2)])),
        ("mixed", MixedRotaryEmbedding(16, 2), grid_positions(2, 3)),
        ("mrope", MultimodalRotaryEmbedding(16, [2, 3, 3], interleaved=True), ids[:, None].expand(3, 2, 6).contiguous()),
    ]


@pytest.mark.parametrize("case", range(4))
def test_compile_fullgraph(case):
    torch._dynamo.reset()
    torch.manual_seed(0)
    _, rope, pos = _cases()[case]
    model = _TinyVisionAttention(rope)
    x = torch.randn(2, 6, 32)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, pos), model(x, pos), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(compiled(x, pos + 3), model(x, pos + 3), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", range(4))
def test_export(case):
    torch.manual_seed(0)
    _, rope, pos = _cases()[case]
    model = _TinyVisionAttention(rope)
    x = torch.randn(2, 6, 32)
    exported = torch.export.export(model, (x, pos))
    torch.testing.assert_close(exported.module()(x, pos + 5), model(x, pos + 5), rtol=1e-5, atol=1e-6)


def test_meta_device_construction_and_forward():
    with torch.device("meta"):
        mods = [AxialRotaryEmbedding(16), MixedRotaryEmbedding(16, 2), MultimodalRotaryEmbedding(16, [2, 3, 3])]
    for mod in mods:
        n = 6
        pos = torch.empty(3, 1, n, dtype=torch.long, device="meta") if isinstance(mod, MultimodalRotaryEmbedding) else torch.empty(n, 2, dtype=torch.long, device="meta")
        out = mod(torch.empty(1, 2, n, 16, device="meta"), positions=pos)
        assert out.device.type == "meta" and out.shape == (1, 2, n, 16)
    mixed = mods[1].to_empty(device="cpu")
    torch.manual_seed(0)
    mixed.reset_parameters()
    assert torch.isfinite(mixed.freqs).all() and mixed.freqs.abs().sum() > 0
    mrope = mods[2].to_empty(device="cpu")
    mrope.reset_parameters()
    assert mrope.axis_index.tolist() == [0, 0, 1, 1, 1, 2, 2, 2]


# ----------------------------------------------------------------------------- bad input

_X = torch.randn(1, 2, 6, 16)
_P = grid_positions(2, 3)
_IDS = torch.arange(6).expand(3, 1, 6)

BAD = [
    (lambda: sinusoidal_encoding_2d(4, 10), ValueError, "d_model"),
    (lambda: sinusoidal_encoding_2d(4.0, 8), TypeError, "grid_size"),
    (lambda: sinusoidal_encoding_2d((4, 0), 8), ValueError, "grid_size"),
    (lambda: sinusoidal_encoding_2d((4, 4, 4), 8), ValueError, "grid_size"),
    (lambda: sinusoidal_encoding_2d(4, 8, base=-1.0), ValueError, "base"),
    (lambda: sinusoidal_encoding_2d(10**6, 1024), ValueError, "table"),
    (lambda: sinusoidal_encoding_2d(None, 8), ValueError, "grid_size"),
    (lambda: sinusoidal_encoding_2d(4, 8, positions=[[0, 0]]), ValueError, "grid_size"),
    (lambda: sinusoidal_encoding_2d(None, 8, positions=[0.0, 1.0]), ValueError, "positions"),
    (lambda: sinusoidal_encoding_2d(None, 8, positions=[[0.0, float("inf")]]), ValueError, "positions"),
    (lambda: sinusoidal_encoding_2d(None, 8, positions=torch.ones(3, 2, dtype=torch.bool)), TypeError, "positions"),
    (lambda: sinusoidal_encoding_2d(None, 8, positions=[["a", "b"]]), TypeError, "positions"),
    (lambda: sinusoidal_encoding_2d(None, 8, positions=object()), TypeError, "positions"),
    (lambda: AxialRotaryEmbedding(10), ValueError, "head_dim"),
    (lambda: AxialRotaryEmbedding(16, layout="complex"), ValueError, "layout"),
    (lambda: AxialRotaryEmbedding(16, base=0.0), ValueError, "base"),
    (lambda: AxialRotaryEmbedding(16)(_X, positions=_P[:5]), ValueError, "positions"),
    (lambda: AxialRotaryEmbedding(16)(_X, positions=_P[:, :1]), ValueError, "positions"),
    (lambda: AxialRotaryEmbedding(16)(_X, positions=_P.tolist()), TypeError, "positions"),
    (lambda: AxialRotaryEmbedding(16)(_X, positions=_P.bool()), TypeError, "positions"),
    (lambda: AxialRotaryEmbedding(16)(_X, positions=torch.full((6, 2), float("nan"))), ValueError, "positions"),
    (lambda: AxialRotaryEmbedding(16)(_X.long(), positions=_P), TypeError, "x"),
    (lambda: AxialRotaryEmbedding(16)(_X[..., :8], positions=_P), ValueError, "x"),
    (lambda: AxialRotaryEmbedding(16)(_X, positions=torch.stack([_P] * 3)), ValueError, "batch"),
    (lambda: MixedRotaryEmbedding(16, 0), ValueError, "n_heads"),
    (lambda: MixedRotaryEmbedding(16, 2, init="zeros"), ValueError, "init"),
    (lambda: MixedRotaryEmbedding(16, 3)(_X, positions=_P), ValueError, "n_heads"),
    (lambda: MixedRotaryEmbedding(16, 2)(_X[0], positions=_P), ValueError, "x"),
    (lambda: mrope_position_ids([("audio", 3)]), ValueError, "segments"),
    (lambda: mrope_position_ids("text"), TypeError, "segments"),
    (lambda: mrope_position_ids([]), ValueError, "segments"),
    (lambda: mrope_position_ids([("text", 0)]), ValueError, "segments"),
    (lambda: mrope_position_ids([("image", (1, 3, 4))]), ValueError, "spatial_merge_size"),
    (lambda: mrope_position_ids([("image", (1, 4))]), TypeError, "segments"),
    (lambda: mrope_position_ids([("image", (1, 4, 4)), ("video", (2, 4, 4))]), ValueError, "separated"),
    (lambda: mrope_position_ids([("text", 2.5)]), TypeError, "segments"),
    (lambda: mrope_position_ids([("text", 2)], spatial_merge_size=0), ValueError, "spatial_merge_size"),
    (lambda: mrope_position_ids(["text"]), TypeError, "segments"),
    (lambda: mrope_position_ids([("video", (2, 4, 4), 1.0)]), ValueError, "tokens_per_second"),
    (lambda: mrope_position_ids([("video", (2, 4, 4), -1.0)], tokens_per_second=2), ValueError, "seconds"),
    (lambda: mrope_position_ids([("image", (1, 4, 4), 1.0)], tokens_per_second=2), ValueError, "segments"),
    (lambda: mrope_position_ids([("text", 2)], tokens_per_second=0), ValueError, "tokens_per_second"),
    (lambda: mrope_position_ids_batch([]), TypeError, "batch"),
    (lambda: mrope_position_ids_batch([[("text", 2)], [("text", 0)]]), ValueError, r"batch\[1\]"),
    (lambda: mrope_position_ids_batch([[("text", 2)]], padding_side="top"), ValueError, "padding_side"),
    (lambda: mrope_rope_deltas(_IDS.float()), TypeError, "position_ids"),
    (lambda: mrope_rope_deltas(_IDS[:2]), ValueError, "position_ids"),
    (lambda: mrope_rope_deltas(_IDS, torch.ones(2, 6)), ValueError, "attention_mask"),
    (lambda: mrope_decode_position_ids(torch.zeros(1), 3), TypeError, "rope_deltas"),
    (lambda: mrope_decode_position_ids(torch.zeros(2, 1, dtype=torch.long), torch.ones(3, dtype=torch.long)), ValueError, "n_seen"),
    (lambda: mrope_decode_position_ids(torch.zeros(2, 1, dtype=torch.long), -1), ValueError, "n_seen"),
    (lambda: mrope_decode_position_ids(torch.zeros(2, 1, dtype=torch.long), 3, 0), ValueError, "n_new"),
    (lambda: qwen3_vl_timestamps([], 30.0), ValueError, "frame_indices"),
    (lambda: qwen3_vl_timestamps("0 1", 30.0), TypeError, "frame_indices"),
    (lambda: qwen3_vl_timestamps([0, 1], 0.0), ValueError, "fps"),
    (lambda: qwen3_vl_video_segments((2, 4), 3), TypeError, "grid_thw"),
    (lambda: qwen3_vl_video_segments((2, 4, 4), [3]), ValueError, "timestamp_tokens"),
    (lambda: qwen3_vl_video_segments((2, 4, 4), 0), ValueError, "timestamp_tokens"),
    (lambda: MultimodalRotaryEmbedding(16, [2, 3, 3]).tables(_IDS.float()), TypeError, "positions"),
    (lambda: MultimodalRotaryEmbedding(16, [2, 3, 3]).tables(_IDS, dtype=torch.float16), TypeError, "dtype"),
    (lambda: MultimodalRotaryEmbedding(16, [2, 3, 4]), ValueError, "sections"),
    (lambda: MultimodalRotaryEmbedding(16, [4, 4]), ValueError, "sections"),
    (lambda: MultimodalRotaryEmbedding(16, 8), TypeError, "sections"),
    (lambda: MultimodalRotaryEmbedding(15, [2, 3, 3]), ValueError, "head_dim"),
    (lambda: MultimodalRotaryEmbedding(16, [2, 3, 3], interleaved=1), TypeError, "interleaved"),
    (lambda: MultimodalRotaryEmbedding(16, [2, 3, 3])(_X, positions=_IDS[:2]), ValueError, "positions"),
    (lambda: MultimodalRotaryEmbedding(16, [2, 3, 3])(_X, positions=_IDS.float()), TypeError, "positions"),
    (lambda: MultimodalRotaryEmbedding(16, [2, 3, 3])(_X, positions=_IDS[..., :5]), ValueError, "positions"),
    (lambda: MultimodalRotaryEmbedding(16, [2, 3, 3])(_X[..., :8], positions=_IDS), ValueError, "x"),
]


@pytest.mark.parametrize(("call", "exc", "match"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_input_is_refused_with_an_error_naming_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_docstring_examples_state_math_consistently():
    # the axial score of two patches depends on the offset: same offset, same score, in float32 too
    rope = AxialRotaryEmbedding(64)
    q, k = torch.randn(1, 1, 1, 64), torch.randn(1, 1, 1, 64)
    s1 = (rope(q, positions=torch.tensor([[0, 0]])) * rope(k, positions=torch.tensor([[3, 4]]))).sum()
    s2 = (rope(q, positions=torch.tensor([[20, 30]])) * rope(k, positions=torch.tensor([[23, 34]]))).sum()
    assert math.isclose(float(s1), float(s2), abs_tol=1e-4)
