"""Tests of posenc.learned and posenc.attention (chapter 1's attention layer)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import (
    LearnedPositionalEmbedding,
    SelfAttention,
    SinusoidalPositionalEncoding,
    causal_mask,
)


def test_learned_adds_its_rows():
    torch.manual_seed(0)
    emb = LearnedPositionalEmbedding(max_len=12, d_model=6)
    x = torch.randn(2, 5, 6)
    torch.testing.assert_close(emb(x), x + emb.weight[:5])
    torch.testing.assert_close(emb(x, offset=7), x + emb.weight[7:12])
    assert sum(p.numel() for p in emb.parameters()) == 12 * 6
    assert 0.015 < emb.weight.std().item() < 0.025


def test_learned_past_max_len_raises_clear_error():
    emb = LearnedPositionalEmbedding(max_len=8, d_model=4)
    with pytest.raises(ValueError, match=r"position 8 is at or beyond max_len=8"):
        emb(torch.zeros(1, 9, 4))
    with pytest.raises(ValueError, match=r"position 10 is at or beyond max_len=8"):
        emb(torch.zeros(1, 3, 4), offset=8)
    emb(torch.zeros(1, 8, 4))  # exactly max_len positions is fine


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: LearnedPositionalEmbedding(0, 4), ValueError),
        (lambda: LearnedPositionalEmbedding(8, 0), ValueError),
        (lambda: LearnedPositionalEmbedding(8.0, 4), TypeError),
        (lambda: LearnedPositionalEmbedding(8, 4)(torch.zeros(1, 2, 5)), ValueError),
        (lambda: LearnedPositionalEmbedding(8, 4)(torch.zeros(1, 2, 4), offset=1.5), TypeError),
        (lambda: SelfAttention(0), ValueError),
        (lambda: SelfAttention(4)(torch.zeros(2, 4)), ValueError),
        (lambda: causal_mask(0), ValueError),
    ],
)
def test_bad_input(call, error):
    with pytest.raises(error):
        call()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), seq=st.integers(2, 12))
def test_attention_without_positions_is_permutation_equivariant(seed, seq):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    attn = SelfAttention(8).double()
    x = torch.randn(1, seq, 8, generator=gen, dtype=torch.float64)
    perm = torch.randperm(seq, generator=gen)
    torch.testing.assert_close(attn(x[:, perm]), attn(x)[:, perm])
    # so a mean-pooled sentence vector is invariant
    torch.testing.assert_close(attn(x[:, perm]).mean(1), attn(x).mean(1))


def test_positions_or_causal_mask_break_the_symmetry():
    torch.manual_seed(0)
    attn = SelfAttention(8).double()
    pe = SinusoidalPositionalEncoding(8, max_len=16).double()
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    perm = torch.tensor([0, 4, 2, 3, 1, 5])  # swap two tokens, as cat <-> mouse
    pooled = lambda y: attn(pe(y)).mean(1)
    assert (pooled(x) - pooled(x[:, perm])).abs().max() > 1e-3
    mask = causal_mask(6)
    assert (attn(x[:, perm], mask=mask) - attn(x, mask=mask)[:, perm]).abs().max() > 1e-3
    assert attn.last_weights.shape == (1, 6, 6)
    assert torch.all(attn.last_weights.triu(1) == 0)


def test_uniform_causal_attention_leaks_position_through_the_norm():
    """Chapter 1: with a causal mask, the output norm at position t falls like 1/sqrt(t+1)."""
    torch.manual_seed(1)
    d, n = 64, 64
    attn = SelfAttention(d).double()
    torch.nn.init.zeros_(attn.w_q.weight)
    torch.nn.init.zeros_(attn.w_k.weight)
    x = torch.randn(512, n, d, dtype=torch.float64)
    with torch.no_grad():
        causal = attn(x, mask=causal_mask(n)).norm(dim=-1).mean(0)
        bidir = attn(x).norm(dim=-1).mean(0)
    ratio = (causal[0] / causal[-1]).item()
    assert ratio == pytest.approx(n**0.5, rel=0.05)
    assert (bidir[0] / bidir[-1]).item() == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        ({"mask": torch.ones(5, 5)}, TypeError, "mask"),  # float, not boolean
        ({"mask": causal_mask(4)}, ValueError, "mask"),  # wrong length
        ({"bias": torch.zeros(4, 5)}, ValueError, "bias"),
        ({"bias": [[0.0] * 5] * 5}, TypeError, "bias"),
    ],
)
def test_bad_mask_or_bias_names_the_argument(kwargs, error, name):
    with pytest.raises(error, match=name):
        SelfAttention(4)(torch.zeros(1, 5, 4), **kwargs)


def test_chapter1_sentence_vectors():
    """Chapter 1's numbers: the encoder layer, embeddings and sentences built as in the notebook."""
    from torch import nn

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(0)
        embed = nn.Embedding(4, 16)
        a = torch.tensor([[0, 1, 2, 0, 3]])  # the cat chased the mouse
        b = torch.tensor([[0, 3, 2, 0, 1]])  # the mouse chased the cat
        layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True).eval()
        pe = SinusoidalPositionalEncoding(16, max_len=32)
        with torch.no_grad():
            pooled = lambda t, pos: layer(pe(embed(t)) if pos else embed(t)).mean(1)
            gap_without = (pooled(a, False) - pooled(b, False)).abs().max().item()
            gap_with = (pooled(a, True) - pooled(b, True)).abs().max().item()
            mask = nn.Transformer.generate_square_subsequent_mask(5)
            causal_cat = (
                (
                    layer(embed(a), src_mask=mask, is_causal=True)[0, 1]
                    - layer(embed(b), src_mask=mask, is_causal=True)[0, 4]
                )
                .abs()
                .max()
                .item()
            )
    finally:
        torch.set_default_dtype(old)
    assert gap_without < 1e-12
    assert gap_with == pytest.approx(0.218, abs=1e-3)  # glued as gap_with in the chapter
    assert causal_cat == pytest.approx(0.290, abs=1e-3)  # "'cat' with a causal mask" in the chapter
