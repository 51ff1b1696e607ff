"""Rotary embeddings (chapter 4): cross-checks against transformers and Meta's formulation.

* Half layout: identical (within float32 rounding of the angles) to Hugging Face's
  ``LlamaRotaryEmbedding`` + ``apply_rotary_pos_emb``, plain and with the scalings
  transformers implements (linear, dynamic, yarn, llama3).
* Interleaved layout: identical to the complex-number formulation of Meta's Llama
  reference code (re-stated independently below: ``torch.polar`` + ``view_as_complex``
  on pairs ``(2j, 2j+1)``).
* Properties: scores depend on m - n only, norms are preserved, the weight permutation
  makes the two layouts agree; angles never formed in 16-bit floats.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
import posenc.rotary

llama = pytest.importorskip("transformers.models.llama.modeling_llama")
rope_utils = pytest.importorskip("transformers.modeling_rope_utils")
from transformers import LlamaConfig  # noqa: E402

HEAD_DIM = 64

# The scalings of transformers, with the parameters their docs and the models use.
HF_SCALINGS = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128},
    "yarn_betas": {
        "rope_type": "yarn",
        "factor": 8.0,
        "original_max_position_embeddings": 256,
        "beta_fast": 16.0,
        "beta_slow": 2.0,
    },
    "yarn_no_truncate": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 128,
        "truncate": False,
    },
    "yarn_mscale": {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "mscale": 1.0,
        "mscale_all_dim": 0.707,
    },
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "llama3_small": {
        "rope_type": "llama3",
        "factor": 4.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 256,
    },
}
MAX_POSITION_EMBEDDINGS = 128  # the "original" length for dynamic NTK in transformers


def hf_config(name: str, base: float = 10000.0) -> LlamaConfig:
    params = {"rope_theta": base, **HF_SCALINGS[name]}
    return LlamaConfig(
        hidden_size=HEAD_DIM * 2,
        num_attention_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITION_EMBEDDINGS,
        rope_parameters=params,
    )


def our_scaling(name: str) -> dict | None:
    sc = dict(HF_SCALINGS[name])
    if sc["rope_type"] == "default":
        return None
    if sc["rope_type"] == "dynamic":
        sc["original_max_position_embeddings"] = MAX_POSITION_EMBEDDINGS
    return sc


def hf_rotate(x: torch.Tensor, position_ids: torch.Tensor, name: str, base: float = 10000.0) -> torch.Tensor:
    rope = llama.LlamaRotaryEmbedding(hf_config(name, base))
    cos, sin = rope(x, position_ids)
    return llama.apply_rotary_pos_emb(x, x, cos, sin)[0]


def hf_inv_freq(name: str, base: float = 10000.0, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    cfg = hf_config(name, base)
    kind = HF_SCALINGS[name]["rope_type"]
    if kind == "default":
        return llama.LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
    return rope_utils.ROPE_INIT_FUNCTIONS[kind](cfg, "cpu", seq_len=seq_len)


def meta_rotate(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Meta's formulation, restated: pairs (2j, 2j+1) as complex numbers times scale*e^(i p w)."""
    angles = torch.outer(positions.to(torch.float32), inv_freq.to(torch.float32))
    rotations = torch.polar(torch.full_like(angles, scale), angles)  # (seq, d/2) complex64
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * rotations).reshape(x.shape).type_as(x)


def angle_tolerance(positions: torch.Tensor, x: torch.Tensor) -> float:
    """Float32 rounding of an angle p * w (half an ulp of p, w <= 1) times the size of x, doubled."""
    return 4 * 2.0**-24 * max(1.0, float(positions.abs().max())) * float(x.abs().max()) + 1e-6


# --------------------------------------------------------------------- cross-checks


@pytest.mark.parametrize("name", sorted(HF_SCALINGS))
def test_frequencies_match_transformers(name):
    for seq_len in (None, 300):
        ref, ref_factor = hf_inv_freq(name, seq_len=seq_len)
        ours = posenc.rotary_frequencies(HEAD_DIM, scaling=our_scaling(name), seq_len=seq_len)
        np.testing.assert_allclose(ours, ref.double().numpy(), rtol=2e-6)
        assert posenc.rotary_attention_factor(our_scaling(name)) == pytest.approx(ref_factor, rel=1e-12)


def test_static_ntk_matches_transformers_dynamic_ntk_at_the_equivalent_length():
    """transformers has no static NTK; its dynamic NTK with factor a - 1 at length 2L uses
    the base ``base * (2(a - 1) - (a - 2))**(d/(d-2)) = base * a**(d/(d-2))``, the static one."""
    a = 8.0
    cfg = LlamaConfig(
        hidden_size=HEAD_DIM * 2,
        num_attention_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITION_EMBEDDINGS,
        rope_parameters={"rope_theta": 10000.0, "rope_type": "dynamic", "factor": a - 1},
    )
    ref, _ = rope_utils.ROPE_INIT_FUNCTIONS["dynamic"](cfg, "cpu", seq_len=2 * MAX_POSITION_EMBEDDINGS)
    ours = posenc.rotary_frequencies(HEAD_DIM, scaling={"type": "ntk", "factor": a})
    np.testing.assert_allclose(ours, ref.double().numpy(), rtol=2e-6)


def test_llama3_frequencies_with_llama31_parameters():
    # Llama 3.1: base 500000, factor 8, low 1, high 4, original 8192.
    ref, _ = hf_inv_freq("llama3", base=500000.0)
    ours = posenc.rotary_frequencies(HEAD_DIM, base=500000.0, scaling=our_scaling("llama3"))
    np.testing.assert_allclose(ours, ref.double().numpy(), rtol=2e-6)


@pytest.mark.parametrize("name", sorted(HF_SCALINGS))
def test_half_layout_matches_transformers(name):
    torch.manual_seed(0)
    x = torch.randn(2, 2, 200, HEAD_DIM)
    position_ids = torch.stack([torch.arange(200), torch.arange(200) + 57])  # two sequences
    ref = hf_rotate(x, position_ids, name)
    rope = posenc.RotaryEmbedding(HEAD_DIM, scaling=our_scaling(name))
    if HF_SCALINGS[name]["rope_type"] == "dynamic":
        # transformers picks the dynamic base from the largest position of the whole batch
        ours = torch.cat([posenc.apply_rotary(x[i : i + 1], position_ids[i], scaling=our_scaling(name)) for i in range(2)])
        ref = torch.cat([hf_rotate(x[i : i + 1], position_ids[i : i + 1], name) for i in range(2)])
    else:
        ours = rope(x, positions=position_ids)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=angle_tolerance(position_ids, x))
    # the functional form gives the same numbers
    single = posenc.apply_rotary(x[:1], position_ids[0], scaling=our_scaling(name))
    torch.testing.assert_close(single, ours[:1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", sorted(HF_SCALINGS))
def test_interleaved_layout_matches_meta_complex_formulation(name):
    torch.manual_seed(1)
    seq = 200
    x = torch.randn(2, 3, seq, HEAD_DIM)
    positions = torch.arange(seq) + 40
    inv_freq, factor = hf_inv_freq(name, seq_len=seq + 40)
    ref = meta_rotate(x, positions, inv_freq, factor)
    ours = posenc.apply_rotary(x, positions, layout="interleaved", scaling=our_scaling(name))
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=angle_tolerance(positions, x))
    rope = posenc.RotaryEmbedding(HEAD_DIM, layout="interleaved", scaling=our_scaling(name))
    torch.testing.assert_close(rope(x, offset=40), ref, rtol=1e-5, atol=angle_tolerance(positions, x))


def test_large_positions_differ_from_transformers_only_by_float32_angle_rounding():
    torch.manual_seed(2)
    x = torch.randn(1, 1, 64, HEAD_DIM)
    position_ids = torch.arange(64)[None] * 131 + 5000  # up to 13,253
    ref = hf_rotate(x, position_ids, "default")
    ours = posenc.RotaryEmbedding(HEAD_DIM)(x, positions=position_ids)
    torch.testing.assert_close(ours, ref, rtol=0, atol=angle_tolerance(position_ids, x))
    # and ours is the more accurate: compare both with a float64 computation
    exact = posenc.apply_rotary(x.double(), position_ids[0])
    assert (ours.double() - exact).abs().max() < (ref.double() - exact).abs().max()
    assert (ours.double() - exact).abs().max() < 1e-6


def test_meta_checkpoint_permutation_reproduces_hf_conversion():
    # transformers' conversion script permutes Meta's wq/wk rows per head as
    # w.view(h, d//h//2, 2, dim).transpose(1, 2).reshape(d, dim); ours must be that.
    n_heads, hd, dim = 3, 8, 5
    w = torch.randn(n_heads * hd, dim)
    hf_style = w.view(n_heads, hd // 2, 2, dim).transpose(1, 2).reshape(n_heads * hd, dim)
    assert torch.equal(w[posenc.rotary_permutation(hd, n_heads)], hf_style)


# ----------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(-5000, 5000),
    n=st.integers(-5000, 5000),
    shift=st.integers(-20000, 20000),
    layout=st.sampled_from(posenc.rotary.ROTARY_LAYOUTS),
    seed=st.integers(0, 2**16),
)
def test_score_depends_only_on_offset(m, n, shift, layout, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, HEAD_DIM, generator=g, dtype=torch.float64), torch.randn(1, HEAD_DIM, generator=g, dtype=torch.float64)

    def score(a, b):
        qa = posenc.apply_rotary(q, [a], layout=layout)
        kb = posenc.apply_rotary(k, [b], layout=layout)
        return float((qa * kb).sum())

    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=1e-9)
    # and it is the plain score rotated by the offset only
    assert score(m, n) == pytest.approx(score(m - n, 0), abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(
    p=st.floats(-1e5, 1e5, allow_nan=False),
    layout=st.sampled_from(posenc.rotary.ROTARY_LAYOUTS),
    scaling=st.sampled_from([None, {"type": "ntk", "factor": 4}, {"type": "linear", "factor": 2}]),
)
def test_norm_is_preserved(p, layout, scaling):
    x = torch.randn(3, 5, HEAD_DIM, dtype=torch.float64)
    y = posenc.apply_rotary(x, [p] * 5, layout=layout, scaling=scaling)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=1e-12)
    # the pairs keep their norms too
    torch.testing.assert_close(
        posenc.apply_rotary(x, torch.zeros(5), layout=layout), x, rtol=0, atol=0
    )


@settings(max_examples=15, deadline=None)
@given(n_heads=st.integers(1, 4), half_dim=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_permuted_weights_make_the_layouts_agree(n_heads, half_dim, seed):
    hd, d_model, seq = 2 * half_dim, 12, 7
    g = torch.Generator().manual_seed(seed)
    w_q = torch.randn(n_heads * hd, d_model, generator=g, dtype=torch.float64)
    w_k = torch.randn(n_heads * hd, d_model, generator=g, dtype=torch.float64)
    tokens = torch.randn(seq, d_model, generator=g, dtype=torch.float64)
    perm = posenc.rotary_permutation(hd, n_heads)

    def scores(wq, wk, layout):
        q = (tokens @ wq.T).view(seq, n_heads, hd).transpose(0, 1)
        k = (tokens @ wk.T).view(seq, n_heads, hd).transpose(0, 1)
        rope = posenc.RotaryEmbedding(hd, layout=layout)
        return rope(q) @ rope(k).transpose(-1, -2)

    reference = scores(w_q, w_k, "interleaved")
    torch.testing.assert_close(scores(w_q[perm], w_k[perm], "half"), reference, rtol=1e-12, atol=1e-10)
    # and back
    inverse = np.argsort(perm)
    torch.testing.assert_close(
        scores(w_q[perm][inverse], w_k[perm][inverse], "interleaved"), reference, rtol=0, atol=0
    )


def test_mixing_layouts_without_permutation_is_silently_wrong():
    torch.manual_seed(3)
    q, k = torch.randn(1, 1, 32, HEAD_DIM), torch.randn(1, 1, 32, HEAD_DIM)
    good = posenc.apply_rotary(q, torch.arange(32), layout="interleaved") @ posenc.apply_rotary(
        k, torch.arange(32), layout="interleaved"
    ).transpose(-1, -2)
    mixed = posenc.apply_rotary(q, torch.arange(32), layout="half") @ posenc.apply_rotary(
        k, torch.arange(32), layout="half"
    ).transpose(-1, -2)
    assert torch.isfinite(mixed).all()  # no error, no NaN ...
    assert (mixed - good).abs().max() > 1.0  # ... just different scores
    torch.testing.assert_close(mixed.diagonal(dim1=-2, dim2=-1), good.diagonal(dim1=-2, dim2=-1), atol=1e-4, rtol=1e-4)


# ------------------------------------------------------------------------ precision


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", posenc.rotary.ROTARY_LAYOUTS)
def test_low_precision_input_gets_the_float32_rotation(dtype, layout):
    torch.manual_seed(4)
    x = torch.randn(2, 3, 1, HEAD_DIM).to(dtype)
    rope = posenc.RotaryEmbedding(HEAD_DIM, layout=layout)
    low = rope(x, positions=torch.tensor([10_000]))
    full = rope(x.float(), positions=torch.tensor([10_000]))
    assert low.dtype == dtype
    assert torch.equal(low, full.to(dtype))
    assert torch.equal(rope(x, offset=10_000), low)
    # forming the position in bf16 would have rotated to position 9984 instead
    assert torch.tensor(10_000.0, dtype=torch.bfloat16).item() == 9984.0
    wrong = posenc.apply_rotary(x.float(), [9984], layout=layout).to(dtype)
    assert not torch.equal(wrong, low)


def test_module_cast_to_half_does_not_lower_angle_precision():
    torch.manual_seed(5)
    x = torch.randn(1, 1, 4, HEAD_DIM, dtype=torch.float16)
    rope = posenc.RotaryEmbedding(HEAD_DIM).half()
    assert rope.cos_cached.dtype == torch.float16
    out = rope(x, offset=10_000)
    assert rope.cos_cached.dtype == torch.float32  # rebuilt
    assert torch.equal(out, posenc.RotaryEmbedding(HEAD_DIM)(x.float(), offset=10_000).half())


def test_float64_input_is_rotated_in_float64():
    x = torch.randn(1, 3, HEAD_DIM, dtype=torch.float64)
    y = posenc.RotaryEmbedding(HEAD_DIM)(x, offset=123_456)
    angles = torch.tensor(123_456 + np.arange(3.0))[:, None] * torch.from_numpy(posenc.rotary_frequencies(HEAD_DIM))
    x1, x2 = x[..., :32], x[..., 32:]
    expected = torch.cat([x1 * angles.cos() - x2 * angles.sin(), x2 * angles.cos() + x1 * angles.sin()], -1)
    torch.testing.assert_close(y, expected, rtol=0, atol=1e-12)


# --------------------------------------------------------------------- module usage


@pytest.mark.parametrize("layout", posenc.rotary.ROTARY_LAYOUTS)
def test_cached_decoding_matches_full_sequence(layout):
    torch.manual_seed(6)
    rope = posenc.RotaryEmbedding(16, layout=layout, max_len=4)  # the cache has to grow
    x = torch.randn(2, 3, 10, 16)
    full = rope(x)
    steps = torch.cat([rope(x[:, :, t : t + 1], offset=t) for t in range(10)], dim=2)
    torch.testing.assert_close(steps, full, rtol=0, atol=0)
    torch.testing.assert_close(rope(x, positions=torch.arange(10)), full, rtol=0, atol=0)
    assert rope.cos_cached.shape[0] >= 10
    assert "cos_cached" not in rope.state_dict()


@pytest.mark.parametrize("layout", posenc.rotary.ROTARY_LAYOUTS)
def test_layouts_and_shapes(layout):
    torch.manual_seed(7)
    x = torch.randn(2, 6, 4, 16)  # (batch, seq, heads, head_dim) ...
    xt = x.transpose(1, 2)  # ... viewed as (batch, heads, seq, head_dim): not contiguous
    ours = posenc.apply_rotary(xt, torch.arange(6), layout=layout)
    torch.testing.assert_close(ours, posenc.apply_rotary(xt.contiguous(), torch.arange(6), layout=layout))
    # 2-D and 3-D inputs
    torch.testing.assert_close(posenc.apply_rotary(xt[0, 0], torch.arange(6), layout=layout), ours[0, 0])
    torch.testing.assert_close(posenc.apply_rotary(xt[:, 0], torch.arange(6), layout=layout), ours[:, 0])
    # the input is not modified
    assert torch.equal(xt, x.transpose(1, 2))


def test_fractional_and_negative_positions():
    x = torch.randn(1, 3, 8, dtype=torch.float64)
    a = posenc.apply_rotary(x, [-2.5, 0.0, 7.25])
    b = posenc.apply_rotary(posenc.apply_rotary(x, [-2.0, 1.0, 7.0]), [-0.5, -1.0, 0.25])
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)  # rotations add up


def test_yarn_attention_factor_scales_cos_and_sin():
    sc = {"type": "yarn", "factor": 16, "original_max_position_embeddings": 4096}
    assert posenc.rotary_attention_factor(sc) == pytest.approx(0.1 * math.log(16) + 1)
    x = torch.randn(1, 5, HEAD_DIM)
    y = posenc.RotaryEmbedding(HEAD_DIM, scaling=sc)(x)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1) * (0.1 * math.log(16) + 1))


def test_scaling_normalisation_and_ntk_base():
    assert posenc.normalize_scaling(None) is None
    assert posenc.normalize_scaling({"rope_type": "default", "rope_theta": 1e4}) is None
    ntk = posenc.rotary_frequencies(HEAD_DIM, scaling={"type": "ntk", "factor": 8})
    new_base = 10000.0 * 8 ** (HEAD_DIM / (HEAD_DIM - 2))
    np.testing.assert_allclose(ntk, new_base ** -(np.arange(0, HEAD_DIM, 2) / HEAD_DIM), rtol=1e-14)
    # NTK keeps the highest frequency and divides the lowest one by exactly the factor
    plain = posenc.rotary_frequencies(HEAD_DIM)
    assert ntk[0] == plain[0] and ntk[-1] == pytest.approx(plain[-1] / 8, rel=1e-12)


# ------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("head_dim", [7, 1, 0])
def test_odd_or_tiny_head_dim(head_dim):
    with pytest.raises(ValueError, match="head_dim"):
        posenc.RotaryEmbedding(head_dim)
    if head_dim:
        with pytest.raises(ValueError, match="head_dim"):
            posenc.apply_rotary(torch.randn(2, head_dim), torch.arange(2))


def test_bad_positions():
    x = torch.randn(2, 3, 5, 8)
    rope = posenc.RotaryEmbedding(8)
    with pytest.raises(ValueError, match="positions"):
        rope(x, positions=torch.arange(4))
    with pytest.raises(ValueError, match="positions"):
        rope(x, positions=torch.zeros(3, 5, dtype=torch.long))  # batch 3 for x's batch 2
    with pytest.raises(ValueError, match="positions"):
        rope(x, positions=torch.zeros(2, 3, 5, dtype=torch.long))
    for bad in (torch.arange(5).bool(), torch.arange(5).bfloat16(), torch.arange(5).half(), torch.zeros(5, dtype=torch.complex64)):
        with pytest.raises(TypeError, match="positions"):
            rope(x, positions=bad)
    with pytest.raises(TypeError, match="positions"):
        posenc.apply_rotary(x, ["a"] * 5)
    with pytest.raises(TypeError, match="positions"):
        posenc.apply_rotary(x, 3)
    with pytest.raises(ValueError, match="positions"):
        posenc.apply_rotary(x, [0, 1, float("nan"), 3, 4])
    with pytest.raises(ValueError, match="either positions or offset"):
        rope(x, positions=torch.arange(5), offset=2)
    with pytest.raises(ValueError, match="offset"):
        rope(x, offset=-1)


def test_hf_rope_parameters_that_posenc_cannot_honour_are_refused():
    """rope_theta is the base: a mismatch, or partial RoPE, must not be ignored silently."""
    params = {"rope_type": "linear", "factor": 4.0, "rope_theta": 500000.0}
    with pytest.raises(ValueError, match="rope_theta"):
        posenc.RotaryEmbedding(HEAD_DIM, scaling=params)
    with pytest.raises(ValueError, match="rope_theta"):
        posenc.apply_rotary(torch.randn(3, HEAD_DIM), torch.arange(3), scaling=params)
    with pytest.raises(ValueError, match="rope_theta"):
        posenc.rotary_frequencies(HEAD_DIM, scaling=params)
    ok = posenc.RotaryEmbedding(HEAD_DIM, base=500000.0, scaling=params)
    np.testing.assert_allclose(ok.inv_freq, posenc.rotary_frequencies(HEAD_DIM, base=500000.0) / 4)
    with pytest.raises(ValueError, match="partial_rotary_factor"):
        posenc.normalize_scaling({"rope_type": "default", "partial_rotary_factor": 0.25})
    assert posenc.normalize_scaling({"rope_type": "default", "partial_rotary_factor": 1.0}) is None


def test_bad_layout_scaling_and_x():
    with pytest.raises(ValueError, match="layout.*'half', 'interleaved'"):
        posenc.RotaryEmbedding(8, layout="neox")
    with pytest.raises(ValueError, match="layout"):
        posenc.apply_rotary(torch.randn(2, 8), torch.arange(2), layout="complex")
    with pytest.raises(ValueError, match=r"scaling\['type'\].*'linear'"):
        posenc.RotaryEmbedding(8, scaling={"type": "longrope", "factor": 2})
    with pytest.raises(ValueError, match="needs the key"):
        posenc.RotaryEmbedding(8, scaling={"type": "yarn", "factor": 2})
    with pytest.raises(ValueError, match="does not take"):
        posenc.RotaryEmbedding(8, scaling={"type": "linear", "factor": 2, "beta_fast": 3})
    with pytest.raises(TypeError, match="scaling"):
        posenc.RotaryEmbedding(8, scaling="linear")
    with pytest.raises(ValueError, match="factor"):
        posenc.RotaryEmbedding(8, scaling={"type": "linear", "factor": 0})
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        posenc.RotaryEmbedding(8)(np.zeros((2, 8)))
    with pytest.raises(TypeError, match="floating-point"):
        posenc.RotaryEmbedding(8)(torch.zeros(2, 8, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(\.\.\., seq, 8\)"):
        posenc.RotaryEmbedding(8)(torch.zeros(2, 6))


def test_docstring_examples():
    result = doctest.testmod(posenc.rotary, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("layout", posenc.rotary.ROTARY_LAYOUTS)
def test_gradients_flow_through_both_layouts(layout):
    rope = posenc.RotaryEmbedding(8, layout=layout)
    x = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: rope(t, offset=5), (x,))
    # the rotation is orthogonal, so the gradient of sum(y**2)/2 is x itself
    y = rope(x, offset=7)
    (0.5 * (y**2).sum()).backward()
    torch.testing.assert_close(x.grad, x.detach(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("contiguous", [True, False])
def test_half_kernel_is_the_three_plain_passes_and_matches_rotate_half(contiguous):
    """For contiguous and strided inputs: bit-identical to the three operations it documents
    (the earlier blocked kernel was checked against the same), close to transformers."""
    torch.manual_seed(8)
    x = torch.randn(3, 300, 5, 64)  # (batch, seq, heads, dim), 288,000 elements
    x = x.transpose(1, 2).contiguous() if contiguous else x.transpose(1, 2)
    rope = posenc.RotaryEmbedding(64)
    with torch.no_grad():
        fast = rope(x, offset=3)
    cos, sin = rope.tables(x, offset=3)
    plain = torch.mul(x, torch.cat([cos, cos], -1))
    plain[..., :32].addcmul_(x[..., 32:], sin, value=-1.0)
    plain[..., 32:].addcmul_(x[..., :32], sin)
    assert torch.equal(fast, plain)
    hf = x * torch.cat([cos, cos], -1) + llama.rotate_half(x) * torch.cat([sin, sin], -1)
    torch.testing.assert_close(fast, hf)


def test_half_kernel_is_quiet_thread_safe_and_deterministic():
    """No warning; concurrent callers get bit-identical results."""
    import threading
    import warnings

    torch.manual_seed(9)
    x = torch.randn(2, 4, 256, 64)
    rope = posenc.RotaryEmbedding(64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            first = rope(x)
    assert [str(w.message) for w in caught] == []
    results: list[torch.Tensor] = []

    def work() -> None:
        with torch.no_grad():
            for _ in range(5):
                results.append(rope(x))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 20 and all(torch.equal(r, first) for r in results)


# ----------------------------------------------------- chapter 4 helpers and numbers


def test_attention_score_terms_add_up_and_validate():
    torch.manual_seed(9)
    x, p = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    wq, wk = torch.randn(4, 8, dtype=torch.float64), torch.randn(4, 8, dtype=torch.float64)
    terms = posenc.attention_score_terms(x, p, wq, wk)
    full = ((x + p) @ wq.T) @ ((x + p) @ wk.T).T / 2.0
    torch.testing.assert_close(sum(terms.values()), full, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="same shape"):
        posenc.attention_score_terms(x, p[:5], wq, wk)
    with pytest.raises(ValueError, match="w_q and w_k"):
        posenc.attention_score_terms(x, p, wq, wk[:, :7])
    with pytest.raises(TypeError, match="tokens"):
        posenc.attention_score_terms(x.numpy(), p, wq, wk)


def test_identity_projection_keeps_position_terms_relative():
    # with A = I the position-position term is PE(i).PE(j), a function of i - j only
    p = torch.from_numpy(posenc.sinusoidal_encoding(20, 16))
    eye = torch.eye(16, dtype=torch.float64)
    pp = posenc.attention_score_terms(torch.zeros_like(p), p, eye, eye)["position-position"]
    for k in range(-18, 19):
        diag = pp.diagonal(k)
        assert float((diag - diag[0]).abs().max()) < 1e-12


def test_chapter_numbers_trained_offset_head():
    # the chapter's claims: training makes the position-position term nearly relative,
    # random projections do not; more content makes the task harder
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the chapter trains on one thread
    try:
        _check_trained_offset_head()
    finally:
        torch.set_num_threads(threads)


def _check_trained_offset_head():
    trained, acc = posenc.train_offset_head(32, 32, offset=1, lr=3e-2, content_scale=0.25, seed=0)
    assert acc > 0.75
    torch.manual_seed(1)
    fresh = posenc.SelfAttention(32)
    tokens = 0.25 * torch.randn(32, 32, generator=torch.Generator().manual_seed(2))
    p = torch.from_numpy(posenc.sinusoidal_encoding(32, 32)).float()

    def spread(head):
        pp = posenc.attention_score_terms(tokens, p, head.w_q.weight.detach(), head.w_k.weight.detach())[
            "position-position"
        ].numpy()
        return np.mean([np.diagonal(pp, -k).std() for k in range(1, 9)]) / pp.std()

    assert spread(fresh) > 0.8 and spread(trained) < 0.3
    _, acc_noisy = posenc.train_offset_head(32, 32, offset=1, lr=3e-2, content_scale=1.0, seed=0)
    assert acc_noisy < 0.5 < acc
    with pytest.raises(ValueError, match="offset"):
        posenc.train_offset_head(8, 4, offset=4)


def test_chapter_numbers_context_extension():
    hd, base, L, s = 128, 500_000.0, 8192, 8
    w = posenc.rotary_frequencies(hd, base=base)
    wavelength = 2 * np.pi / w
    methods = {
        "linear": {"type": "linear", "factor": s},
        "ntk": {"type": "ntk", "factor": s},
        "yarn": {"type": "yarn", "factor": s, "original_max_position_embeddings": L},
        "llama3": {"type": "llama3", "factor": s, "low_freq_factor": 1, "high_freq_factor": 4,
                   "original_max_position_embeddings": L},
    }
    unseen = {}
    for name, sc in methods.items():
        w_new = posenc.rotary_frequencies(hd, base=base, scaling=sc)
        unseen[name] = int(((wavelength > L) & (s * L * w_new > L * w * (1 + 1e-12))).sum())
    assert unseen == {"linear": 0, "ntk": 28, "yarn": 0, "llama3": 0}
    assert posenc.rotary_attention_factor(methods["yarn"]) == pytest.approx(0.1 * math.log(8) + 1)


def test_chapter_numbers_low_precision_positions():
    m = torch.arange(16_384)
    assert m.bfloat16().unique().numel() == 1025 and m.half().unique().numel() == 5121
    assert torch.tensor(257).bfloat16().item() == 256 and torch.tensor(2049).half().item() == 2048


def test_chapter_numbers_sines_alone_cannot_be_shifted_linearly():
    """Chapter 4: least squares finds an exact shift matrix for the full encoding only."""
    d = 64
    pos = np.random.default_rng(1).uniform(0, 10_000, 2000)
    before, after = posenc.sinusoidal_encoding(pos, d), posenc.sinusoidal_encoding(pos + 5, d)

    def unexplained(a, b):
        m = np.linalg.lstsq(a, b, rcond=None)[0]
        return np.linalg.norm(a @ m - b) / np.linalg.norm(b)

    assert unexplained(before, after) < 1e-10
    assert round(unexplained(before[:, 0::2], after[:, 0::2]), 2) == 0.41
    assert unexplained(before[:, 1::2], after[:, 1::2]) > 0.3


def test_chapter_numbers_translation_is_not_a_rotation():
    rng = np.random.default_rng(0)
    d = 64
    rng.uniform(-1000, 10_000, 190), rng.uniform(-5000, 5000, 100)  # the chapter's earlier draws
    x = rng.standard_normal(d)
    pe = posenc.sinusoidal_encoding(512, d)
    ratio = np.linalg.norm(x + pe, axis=1) / np.linalg.norm(x)
    assert round(ratio.min(), 2) == 1.16 and round(ratio.max(), 2) == 1.45  # a rotation gives 1
    assert np.linalg.norm(-pe[7] + pe[7]) == 0.0


def test_chapter_numbers_bf16_angle_and_mixed_layouts():
    w1 = float(posenc.rotary_frequencies(128)[1])
    m = torch.tensor(10_000)
    bf16_angle = (m.bfloat16() * torch.tensor(w1, dtype=torch.bfloat16)).double()
    wrapped = (bf16_angle - 10_000 * w1 + math.pi) % (2 * math.pi) - math.pi
    assert abs(float(wrapped)) > 0.5  # radians off at position 10,000
    # the chapter's mixed-layout example: most-attended keys change for most queries
    torch.manual_seed(4)
    n_heads, hd, width, n = 2, 16, 32, 24
    wq, wk = torch.randn(n_heads * hd, width), torch.randn(n_heads * hd, width)
    xs = torch.randn(n, width)

    def attention(wq, wk, layout):
        q = (xs @ wq.T).view(n, n_heads, hd).transpose(0, 1)
        k = (xs @ wk.T).view(n, n_heads, hd).transpose(0, 1)
        rope = posenc.RotaryEmbedding(hd, layout=layout)
        return torch.softmax(rope(q) @ rope(k).transpose(-1, -2) / math.sqrt(hd), dim=-1)

    reference = attention(wq, wk, "interleaved")
    perm = posenc.rotary_permutation(hd, n_heads)
    torch.testing.assert_close(attention(wq[perm], wk[perm], "half"), reference, atol=1e-5, rtol=1e-5)
    changed = (attention(wq, wk, "half").argmax(-1) != reference.argmax(-1)).float().mean().item()
    assert changed > 0.5
