"""Attention biases (chapter 6): ALiBi slopes against BLOOM, T5 buckets against T5."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import book
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
    assert book.count_parameters(shaw) == 5 * 4


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
