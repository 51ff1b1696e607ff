"""Attention biases (chapter 6): ALiBi slopes against BLOOM, T5 buckets against T5."""

from __future__ import annotations

import math

import pytest
import torch

import posenc
from posenc.book import models
from posenc.bias import relative_positions

bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")


t5 = pytest.importorskip("transformers.models.t5.modeling_t5")


def test_alibi_bias_matches_bloom_after_softmax():
    # BLOOM adds slope * key_position (not -slope * distance): the two differ by a constant
    # per query row, which the softmax removes over the causally visible keys.
    n_heads, seq = 12, 9
    ours = posenc.alibi_bias(n_heads, seq)
    ref = bloom.build_alibi_tensor(torch.ones(1, seq), n_heads, torch.float32).reshape(n_heads, 1, seq)
    mask = posenc.causal_mask(seq)
    scores = torch.randn(n_heads, seq, seq, generator=torch.Generator().manual_seed(0))
    a = (scores + ours).masked_fill(~mask, -math.inf).softmax(-1)
    b = (scores + ref).masked_fill(~mask, -math.inf).softmax(-1)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 64), (8, 20), (64, 256), (4, 300), (10, 50)])
def test_t5_bucket_matches_transformers(bidirectional, num_buckets, max_distance):
    rel = torch.arange(-300, 301)
    ours = posenc.t5_relative_bucket(
        rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    ref = t5.T5Attention._relative_position_bucket(
        rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(ours, ref)
    assert int(ours.min()) >= 0 and int(ours.max()) < num_buckets


def test_t5_bucket_2d_matches_compute_bias_layout():
    rel = relative_positions(6, 10)
    assert torch.equal(posenc.t5_relative_bucket(rel), t5.T5Attention._relative_position_bucket(rel))


def test_t5_bias_module_matches_transformers_compute_bias():
    config = t5.T5Config(
        d_model=16,
        d_kv=4,
        num_heads=4,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        is_decoder=True,
    )
    torch.manual_seed(0)
    ref = t5.T5Attention(config, has_relative_attention_bias=True, layer_idx=0)
    ours = posenc.T5RelativeBias(4, bidirectional=False)
    with torch.no_grad():
        ours.weight.copy_(ref.relative_attention_bias.weight)
        expected = ref.compute_bias(5, 9, past_seen_tokens=4)[0]
    assert torch.equal(ours(5, 9), expected)
    assert models.count_parameters(ours) == 32 * 4


def bloom_slopes(n_heads: int) -> torch.Tensor:
    """Slopes as BLOOM builds them: the ALiBi row for key position 1 (position 0 gives 0)."""
    alibi = bloom.build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32)
    return alibi.reshape(n_heads, 2)[:, 1]


@pytest.mark.parametrize("n_heads", range(1, 65))
def test_alibi_slopes_match_bloom(n_heads):
    ours, ref = posenc.alibi_slopes(n_heads), bloom_slopes(n_heads)
    assert ours.dtype == torch.float32 and ours.shape == (n_heads,)
    # BLOOM raises a float32 base to integer powers, which drifts by a few units in the
    # last place (up to about 4 float32 epsilons relative for 64 heads); ours is the
    # float64 value rounded once. Allow 8 epsilons relative.
    torch.testing.assert_close(ours, ref, rtol=8 * torch.finfo(torch.float32).eps, atol=0)
