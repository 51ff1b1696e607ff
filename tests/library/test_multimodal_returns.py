"""What the laboratory computed for chapter 8 and the library now provides: same numbers.

* ``sinusoidal_encoding_2d(None, d_model, positions=...)``: the 2-D sin-cos table at real
  (row, column) coordinates, bit for bit the formula the laboratory once held (``vision._sincos_2d_at``, now gone)
  (copied below as the laboratory wrote it), and equal to the grid table at integer
  coordinates;
* ``MixedRotaryEmbedding(..., init_angle=a, dtype=torch.float64)``: RoPE-Mixed started
  from a chosen direction, bit for bit the frequencies ``posenc.book.vision.query_scores``
  writes into an ``init="axial"`` module (copied below), and the float32 random start
  unchanged;
* the rotations of ``posenc.multimodal`` go through ``posenc.rope.core.rotate``; the
  numbers are those of the module's former private rotation (copied below), bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from posenc.multimodal import (
    AxialRotaryEmbedding,
    MixedRotaryEmbedding,
    MultimodalRotaryEmbedding,
    mrope_position_ids,
    sinusoidal_encoding_2d,
)
from test_multimodal import grid_positions  # the same (row, column) grid as the main multimodal tests


# ----------------------------------------------------------------------------- copies of the formulas replaced


def lab_sincos_2d_at(pos: np.ndarray, d_model: int) -> torch.Tensor:
    """``posenc.book.vision._sincos_2d_at`` as the laboratory wrote it."""
    omega = 10000.0 ** (-4.0 * np.arange(d_model // 4) / d_model)
    ang_c, ang_r = np.outer(pos[:, 1], omega), np.outer(pos[:, 0], omega)
    return torch.from_numpy(np.concatenate([np.sin(ang_c), np.cos(ang_c), np.sin(ang_r), np.cos(ang_r)], axis=1))


def lab_mixed_freqs(head_dim: int, angle: float) -> torch.Tensor:
    """The frequencies ``posenc.book.vision.query_scores`` copies into a float64 one-head RoPE-Mixed."""
    rope = MixedRotaryEmbedding(head_dim, 1, base=10.0, init="axial").double()
    q4 = head_dim // 4
    mag = torch.tensor(10.0 ** (-4.0 * np.arange(q4) / head_dim), dtype=torch.float64)
    a = torch.tensor([angle, angle + math.pi / 2], dtype=torch.float64).repeat_interleave(q4)
    with torch.no_grad():
        rope.freqs.copy_(torch.stack([torch.cat([mag, mag]) * torch.sin(a), torch.cat([mag, mag]) * torch.cos(a)])[:, None])
    return rope.freqs.detach().clone()


def former_rotate(x: torch.Tensor, angles: torch.Tensor, layout: str) -> torch.Tensor:
    """``posenc.multimodal._rotate`` before it called ``posenc.rope.core.rotate``."""
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    xw = x.to(work)
    cos, sin = angles.cos(), angles.sin()
    if layout == "half":
        h = x.shape[-1] // 2
        x1, x2 = xw[..., :h], xw[..., h:]
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:
        x1, x2 = xw[..., 0::2], xw[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    return out.to(x.dtype)


# ----------------------------------------------------------------------------- 2-D sin-cos at real coordinates


@pytest.mark.parametrize(("grid", "train_grid", "d_model"), [(8, 4, 64), (6, 4, 64), (3, 4, 64), (5, 4, 32)])
def test_sincos_at_scaled_coordinates_is_the_labs_table(grid, train_grid, d_model):
    # what TinyViT.forward does with position_scale = train_grid / grid
    pos = grid_positions(grid, grid).to(torch.float64) * (train_grid / grid)
    ours = torch.from_numpy(sinusoidal_encoding_2d(None, d_model, positions=pos.numpy()))
    assert torch.equal(ours, lab_sincos_2d_at(pos.numpy(), d_model))
    # the tensor itself is accepted too
    assert np.array_equal(sinusoidal_encoding_2d(None, d_model, positions=pos), ours.numpy())


@pytest.mark.parametrize(("h", "w"), [(4, 4), (3, 7)])
def test_sincos_at_integer_coordinates_is_the_grid_table(h, w):
    pos = grid_positions(h, w)
    assert np.array_equal(sinusoidal_encoding_2d(None, 16, positions=pos), sinusoidal_encoding_2d((h, w), 16))
    assert np.array_equal(sinusoidal_encoding_2d(None, 16, positions=pos.tolist(), base=100.0), sinusoidal_encoding_2d((h, w), 16, base=100.0))


# ----------------------------------------------------------------------------- RoPE-Mixed start angle


@pytest.mark.parametrize("head_dim", [8, 16, 32])
@pytest.mark.parametrize("angle", [0.0, 0.3, 2.0, 5.9, -1.25])
def test_mixed_init_angle_in_float64_is_the_labs_patch(head_dim, angle):
    ours = MixedRotaryEmbedding(head_dim, 1, base=10.0, init_angle=angle, dtype=torch.float64)
    assert ours.freqs.dtype == torch.float64
    assert torch.equal(ours.freqs.detach(), lab_mixed_freqs(head_dim, angle))
    # the scores query_scores computes from it, bit for bit
    pos = grid_positions(5, 5).double()
    ones = torch.ones(1, 1, 25, head_dim, dtype=torch.float64)
    lab = MixedRotaryEmbedding(head_dim, 1, base=10.0, init="axial").double()
    with torch.no_grad():
        lab.freqs.copy_(lab_mixed_freqs(head_dim, angle))
        k_lab, k_ours = lab(ones, positions=pos)[0, 0], ours(ones, positions=pos)[0, 0]
    assert torch.equal(k_ours @ k_ours[12], k_lab @ k_lab[12])


def test_mixed_random_init_in_float32_is_unchanged():
    def former(head_dim, n_heads, base=10.0):
        q = head_dim // 4
        mag = torch.from_numpy(base ** (-4.0 * np.arange(q, dtype=np.float64) / head_dim)).to(torch.float32)
        a = torch.rand(n_heads, 1) * (2 * torch.pi)
        cols = torch.cat((mag * torch.cos(a), mag * torch.cos(a + torch.pi / 2)), dim=-1)
        rows = torch.cat((mag * torch.sin(a), mag * torch.sin(a + torch.pi / 2)), dim=-1)
        return torch.stack((rows, cols))

    for seed in range(3):
        torch.manual_seed(seed)
        ours = MixedRotaryEmbedding(16, 4).freqs.detach()
        torch.manual_seed(seed)
        assert ours.dtype == torch.float32 and torch.equal(ours, former(16, 4))


def test_mixed_init_angle_per_head_and_in_float32():
    angles = [0.0, math.pi / 2, 1.0]
    m = MixedRotaryEmbedding(8, 3, init_angle=angles)
    one = [MixedRotaryEmbedding(8, 1, init_angle=a).freqs.detach() for a in angles]
    assert torch.equal(m.freqs.detach(), torch.cat(one, dim=1))
    assert torch.equal(MixedRotaryEmbedding(8, 3, init_angle=torch.tensor(angles)).freqs, m.freqs)
    # a set angle draws nothing: the global generator is left as it was
    torch.manual_seed(0)
    MixedRotaryEmbedding(8, 3, init_angle=0.5)
    after = torch.rand(1)
    torch.manual_seed(0)
    assert torch.equal(after, torch.rand(1))
    # reset_parameters comes back to the same start
    with torch.no_grad():
        m.freqs.add_(1.0)
    m.reset_parameters()
    assert torch.equal(m.freqs.detach(), torch.cat(one, dim=1))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"init_angle": float("nan")}, TypeError, "init_angle"),
        ({"init_angle": "north"}, TypeError, "init_angle"),
        ({"init_angle": True}, TypeError, "init_angle"),
        ({"init_angle": [0.0, 1.0, 2.0]}, ValueError, "init_angle"),
        ({"init_angle": 0.0, "init": "axial"}, ValueError, "init_angle"),
        ({"dtype": torch.long}, TypeError, "dtype"),
        ({"dtype": "float64"}, TypeError, "dtype"),
    ],
)
def test_mixed_bad_start_is_refused(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        MixedRotaryEmbedding(8, 2, **kwargs)


# ----------------------------------------------------------------------------- the rotation of posenc.rope.core


def _rotation_cases():
    torch.manual_seed(0)
    ids = mrope_position_ids([("text", 2), ("image", (1, 2, 4)), ("text", 2)])
    batched = torch.stack([grid_positions(2, 3), grid_positions(3, 2)])
    return [
        (AxialRotaryEmbedding(16), grid_positions(2, 3), "half"),
        (AxialRotaryEmbedding(16, layout="interleaved"), grid_positions(2, 3).float() * 0.75, "interleaved"),
        (AxialRotaryEmbedding(16), batched, "half"),
        (MixedRotaryEmbedding(16, 2), grid_positions(2, 3), "half"),
        (MixedRotaryEmbedding(16, 2, layout="interleaved"), batched, "interleaved"),
        (MultimodalRotaryEmbedding(16, [2, 3, 3]), ids[:, None].expand(3, 2, 6), "half"),
        (MultimodalRotaryEmbedding(16, [2, 3, 3], interleaved=True), ids, "half"),
    ]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("case", range(7))
def test_rotation_numbers_are_unchanged(case, dtype):
    mod, pos, layout = _rotation_cases()[case]
    mod = mod.double() if dtype == torch.float64 else mod
    x = torch.randn(2, 2, 6, 16).to(dtype)
    work = torch.float64 if dtype == torch.float64 else torch.float32
    if isinstance(mod, MultimodalRotaryEmbedding):
        p = pos[:, None] if pos.ndim == 2 else pos
        ang = mod.angles(p, work)[:, None]
    elif pos.ndim == 3:
        ang = mod.angles(pos.reshape(2, 1, 6, 2).to(work), work)
    else:
        ang = mod.angles(pos.to(work), work)
    assert torch.equal(mod(x, positions=pos), former_rotate(x, ang, layout))


def test_mrope_tables_rotate_as_forward():
    from posenc.rope.core import rotate

    ids = mrope_position_ids([("text", 2), ("image", (1, 4, 4)), ("text", 2)])
    mrope = MultimodalRotaryEmbedding(32, [4, 6, 6], base=1e6)
    x = torch.randn(1, 3, ids.shape[1], 32)
    t = mrope.tables(ids)
    assert t.cos.shape == (1, ids.shape[1], 16) and t.layout == "half" and t.rotary_dim == 32
    assert torch.equal(rotate(x, t.cos, t.sin, "half", 2), mrope(x, positions=ids))
    t64 = mrope.tables(ids[:, None], dtype=torch.float64)
    assert t64.cos.dtype == torch.float64
    torch.testing.assert_close(t64.cos.float(), t.cos, rtol=0, atol=1e-6)
