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

HEAD_DIM = 64


def test_meta_checkpoint_permutation_reproduces_hf_conversion():
    # transformers' conversion script permutes Meta's wq/wk rows per head as
    # w.view(h, d//h//2, 2, dim).transpose(1, 2).reshape(d, dim); ours must be that.
    n_heads, hd, dim = 3, 8, 5
    w = torch.randn(n_heads * hd, dim)
    hf_style = w.view(n_heads, hd // 2, 2, dim).transpose(1, 2).reshape(n_heads * hd, dim)
    assert torch.equal(w[posenc.rotary_permutation(hd, n_heads)], hf_style)


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
    q, k = (
        torch.randn(1, HEAD_DIM, generator=g, dtype=torch.float64),
        torch.randn(1, HEAD_DIM, generator=g, dtype=torch.float64),
    )

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
    torch.testing.assert_close(posenc.apply_rotary(x, torch.zeros(5), layout=layout), x, rtol=0, atol=0)


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
    torch.testing.assert_close(scores(w_q[perm][inverse], w_k[perm][inverse], "interleaved"), reference, rtol=0, atol=0)


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
    for bad in (
        torch.arange(5).bool(),
        torch.arange(5).bfloat16(),
        torch.arange(5).half(),
        torch.zeros(5, dtype=torch.complex64),
    ):
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
