"""Attention biases (chapter 6): ALiBi slopes against BLOOM, T5 buckets against T5."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.book import models
from posenc.bias import relative_positions


def paper_slopes(n_heads: int) -> np.ndarray:
    """Press et al. section 3, written independently in float64 from the rule's wording."""

    def geometric(n):
        return np.array([2.0 ** (-8.0 * (k + 1) / n) for k in range(n)])

    p = 1 << (n_heads.bit_length() - 1)
    return np.concatenate([geometric(p), geometric(2 * p)[::2][: n_heads - p]])


def test_alibi_slopes_values_in_paper():
    # section 3: for 8 heads the slopes are 1/2, 1/4, ..., 1/256
    assert posenc.alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]
    # 16 heads interleave the 8-head slopes with their geometric means
    assert torch.equal(posenc.alibi_slopes(16)[1::2], posenc.alibi_slopes(8))


def test_alibi_bias_entries():
    bias = posenc.alibi_bias(4, 5)
    slopes = posenc.alibi_slopes(4)
    for h in range(4):
        for i in range(5):
            for j in range(5):
                expected = -slopes[h] * (i - j) if j <= i else 0.0
                assert bias[h, i, j] == pytest.approx(float(expected), abs=0)


def test_alibi_bias_cached_decoding_aligns_queries_to_the_end():
    full = posenc.alibi_bias(8, 7)
    assert torch.equal(posenc.alibi_bias(8, 3, 7), full[:, -3:, :])
    assert torch.equal(posenc.alibi_bias(8, 1, 7)[:, 0], full[:, -1])


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 40), st.integers(0, 40), st.integers(-60, 60))
def test_biases_depend_on_offset_only(q_len, extra, shift):
    k_len = q_len + extra
    rel = relative_positions(q_len, k_len)
    bias = posenc.alibi_bias(3, q_len, k_len)
    # entries with the same offset j - i hold the same value
    for off in {int(rel.min()), 0, int(rel.max())}:
        sel = rel == off
        assert torch.all(bias[:, sel] == bias[:, sel][:, :1])
    # bucketing is a function of the offset alone: shifting both positions changes nothing
    assert torch.equal(posenc.t5_relative_bucket(rel), posenc.t5_relative_bucket((rel + shift) - shift))


def test_shaw_term_depends_on_clipped_offset():
    torch.manual_seed(0)
    shaw = posenc.ShawRelativePosition(4, max_distance=2)
    q = torch.randn(1, 6, 4)
    with torch.no_grad():
        term = shaw(q)
        for i in range(6):
            for j in range(6):
                r = max(-2, min(2, j - i))
                assert float(term[0, i, j]) == pytest.approx(
                    float(q[0, i] @ shaw.weight[r + 2] / 2.0), rel=1e-5, abs=1e-7
                )
    assert models.count_parameters(shaw) == 5 * 4


@pytest.mark.parametrize("bad", [0, -3])
def test_zero_or_negative_heads_rejected(bad):
    with pytest.raises(ValueError, match="n_heads"):
        posenc.alibi_slopes(bad)
    with pytest.raises(ValueError, match="n_heads"):
        posenc.alibi_bias(bad, 4)
    with pytest.raises(ValueError, match="n_heads"):
        posenc.T5RelativeBias(bad)


@pytest.mark.parametrize("bad", [2.0, 2.5, "4", True, None])
def test_non_integer_heads_rejected(bad):
    with pytest.raises(TypeError, match="n_heads"):
        posenc.alibi_slopes(bad)


def test_non_integer_positions_rejected():
    with pytest.raises(TypeError, match="relative_position"):
        posenc.t5_relative_bucket(torch.tensor([0.5, 1.0]))
    with pytest.raises(TypeError, match="relative_position"):
        posenc.t5_relative_bucket(torch.tensor([True, False]))
    with pytest.raises(TypeError, match="relative_position"):
        posenc.t5_relative_bucket([1, 2])
    with pytest.raises(TypeError, match="q_len"):
        posenc.alibi_bias(4, 3.0)


def test_bad_lengths_and_buckets_rejected():
    with pytest.raises(ValueError, match="k_len"):
        posenc.alibi_bias(4, 5, 3)
    with pytest.raises(ValueError, match="q_len"):
        posenc.alibi_bias(4, 0)
    with pytest.raises(ValueError, match="num_buckets"):
        posenc.t5_relative_bucket(torch.tensor([1]), num_buckets=2)
    with pytest.raises(ValueError, match="max_distance"):
        posenc.t5_relative_bucket(torch.tensor([1]), num_buckets=32, max_distance=8)
    with pytest.raises(TypeError, match="bidirectional"):
        posenc.T5RelativeBias(4, bidirectional="yes")


@pytest.mark.parametrize("n_heads", range(1, 65))
def test_alibi_slopes_are_the_float64_rule_of_the_paper_rounded_once(n_heads):
    assert torch.equal(posenc.alibi_slopes(n_heads), torch.from_numpy(paper_slopes(n_heads)).float())


# --- ALiBi with device/dtype, symmetric form, module; device-side T5; reset (issue 16) ---


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_alibi_bias_honours_dtype_and_device(dtype):
    bias = posenc.alibi_bias(6, 5, 9, dtype=dtype)
    assert bias.dtype == dtype and bias.device.type == "cpu"
    # computed in float32 from float32 slopes, cast once at the end (as BLOOM does)
    assert torch.equal(bias, posenc.alibi_bias(6, 5, 9).to(dtype))
    on_meta = posenc.alibi_bias(6, 5, 9, device="meta", dtype=dtype)
    assert on_meta.device.type == "meta" and on_meta.dtype == dtype and on_meta.shape == (6, 5, 9)
    assert posenc.alibi_bias(2, 3, device=torch.device("cpu")).device.type == "cpu"


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 20), st.integers(1, 12), st.integers(0, 12))
def test_alibi_symmetric_form(n_heads, q_len, extra):
    k_len = q_len + extra
    sym = posenc.alibi_bias(n_heads, q_len, k_len, bidirectional=True)
    causal = posenc.alibi_bias(n_heads, q_len, k_len)
    rel = relative_positions(q_len, k_len)
    slopes = posenc.alibi_slopes(n_heads)
    assert torch.equal(sym, slopes[:, None, None] * -rel.abs().float())
    past = rel <= 0
    assert torch.equal(sym[:, past], causal[:, past])  # the same where the causal form is defined
    assert (sym <= 0).all()
    if q_len == k_len:  # symmetric in i and j
        assert torch.equal(sym, sym.transpose(1, 2))


def test_alibi_as_sdpa_mask_with_causal_masking():
    """The docstring's recipe: ALiBi as the float mask of SDPA with the causal mask folded in."""
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 7, 8, generator=gen) for _ in range(3))
    causal = posenc.causal_mask(7)
    for alibi in (posenc.alibi_bias(4, 7), posenc.ALiBiBias(4)(7)):
        mask = alibi.masked_fill(~causal, float("-inf"))
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        scores = (q @ k.transpose(-2, -1)) / 8**0.5 + alibi
        want = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
        torch.testing.assert_close(got, want)
    # the bias alone (without -inf) leaves the future visible: it is not a causal mask
    leaky = F.scaled_dot_product_attention(q, k, v, attn_mask=posenc.alibi_bias(4, 7))
    assert (leaky - got).abs().max() > 1e-2
    # and through posenc.SelfAttention(causal=True), the module gives the same as the tensor
    torch.manual_seed(0)
    attn = posenc.SelfAttention(16, n_heads=4, causal=True)
    x = torch.randn(2, 7, 16)
    torch.testing.assert_close(attn(x, bias=posenc.ALiBiBias(4)), attn(x, bias=posenc.alibi_bias(4, 7)))


def test_alibi_module_matches_function_and_follows_its_device():
    for bidirectional in (False, True):
        alibi = posenc.ALiBiBias(5, bidirectional=bidirectional)
        assert torch.equal(alibi(4, 6), posenc.alibi_bias(5, 4, 6, bidirectional=bidirectional))
        q = torch.randn(2, 5, 4, 8, dtype=torch.float64)
        assert torch.equal(alibi.score_bias(q, 6), posenc.alibi_bias(5, 4, 6, bidirectional=bidirectional).double())
        assert alibi(3, dtype=torch.bfloat16).dtype == torch.bfloat16
    assert "slopes" not in alibi.state_dict()  # a non-persistent buffer
    # casting the module does not round the slopes: the bias is the float32 one, cast once
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        cast = posenc.ALiBiBias(12).to(dtype)
        assert torch.equal(cast(7), posenc.alibi_bias(12, 7))
        assert torch.equal(cast(7, dtype=dtype), posenc.alibi_bias(12, 7, dtype=dtype))
    assert alibi.to("meta")(3).device.type == "meta"
    with pytest.raises(ValueError, match="n_heads=5"):
        posenc.ALiBiBias(5).score_bias(torch.randn(2, 4, 3, 8))


def test_alibi_slopes_bit_exact_in_module_after_meta_init():
    with torch.device("meta"):
        alibi = posenc.ALiBiBias(12)
    alibi.to_empty(device="cpu")
    alibi.reset_parameters()
    assert torch.equal(alibi.slopes, posenc.alibi_slopes(12))
    assert torch.equal(alibi.slopes, torch.from_numpy(paper_slopes(12)).float())


def test_t5_buckets_are_built_on_the_weights_device():
    bias = posenc.T5RelativeBias(4, bidirectional=False).to("meta")
    assert bias.buckets(3, 5).device.type == "meta"
    assert bias(3, 5).device.type == "meta"
    # on the CPU, the same as building the buckets from relative_positions
    cpu = posenc.T5RelativeBias(4)
    idx = posenc.t5_relative_bucket(relative_positions(3, 5))
    assert torch.equal(cpu(3, 5), cpu.weight[idx].permute(2, 0, 1))
    with pytest.raises(ValueError, match="q must be on the module's device"):
        bias.score_bias(torch.randn(1, 4, 3, 8))
    with pytest.raises(ValueError, match="n_heads=4"):
        cpu.score_bias(torch.randn(1, 2, 3, 8))


@pytest.mark.parametrize(
    "factory",
    [
        lambda: posenc.T5RelativeBias(4, bidirectional=False, num_buckets=16, max_distance=40),
        lambda: posenc.ShawRelativePosition(8, max_distance=5),
        lambda: posenc.ALiBiBias(6, bidirectional=True),
    ],
)
def test_reset_parameters_after_meta_init(factory, meta_then_reset):
    fresh, module = meta_then_reset(factory)
    for a, b in zip((*fresh.parameters(), *fresh.buffers()), (*module.parameters(), *module.buffers())):
        assert torch.equal(a, b)


def test_shaw_refuses_integer_queries_and_other_devices():
    shaw = posenc.ShawRelativePosition(4, max_distance=2)
    with pytest.raises(TypeError, match="q must be a floating-point tensor"):
        shaw(torch.ones(1, 3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="q must be on the module's device"):
        shaw(torch.ones(1, 3, 4, device="meta"))
    with pytest.raises(ValueError, match="k_len must be >= q_len"):
        shaw(torch.ones(1, 3, 4), 2)
