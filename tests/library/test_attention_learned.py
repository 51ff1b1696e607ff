"""Tests of posenc.learned and posenc.attention (chapter 1's attention layer)."""

from __future__ import annotations

import pytest
import torch

import posenc
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
    assert (attn(x[:, perm], mask=mask) - attn(x, mask=mask, need_weights=True)[:, perm]).abs().max() > 1e-3
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


# --- per-example positions, meta-device initialisation, torch.compile (issue 16) ---


def test_learned_positions_equal_gathering_the_weight():
    emb = LearnedPositionalEmbedding(max_len=10, d_model=4)
    x = torch.randn(2, 3, 4)
    pos = torch.tensor([[0, 0, 1], [4, 5, 6]])
    torch.testing.assert_close(emb(x, positions=pos), x + emb.weight[pos], rtol=0, atol=0)
    torch.testing.assert_close(emb(x, positions=torch.tensor([7, 8, 9])), emb(x, offset=7), rtol=0, atol=0)
    torch.testing.assert_close(emb(x, offset=torch.tensor([0, 4])), x + emb.weight[torch.tensor([[0, 1, 2], [4, 5, 6]])])
    with pytest.raises(ValueError, match=r"positions must lie in \[0, max_len=10\)"):
        emb(x, positions=torch.tensor([8, 9, 10]))
    with pytest.raises(ValueError, match="max_len=10"):
        emb(x, offset=torch.tensor([0, 8]))
    with pytest.raises(TypeError, match="positions must hold integers"):
        emb(x, positions=torch.tensor([0.0, 1.0, 2.0]))
    # gradients flow to exactly the rows that were used
    emb(x, positions=pos).sum().backward()
    used = emb.weight.grad.abs().sum(-1) > 0
    assert used.tolist() == [True, True, False, False, True, True, True, False, False, False]


def test_integer_input_is_refused_not_silently_added():
    tokens = torch.tensor([[1, 2, 3]])
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        LearnedPositionalEmbedding(8, 3)(tokens)
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        SinusoidalPositionalEncoding(3, max_len=8)(tokens)
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        SelfAttention(3)(tokens[None].float().long())


def test_learned_and_attention_reset_after_meta_init(meta_then_reset):
    for factory in (lambda: LearnedPositionalEmbedding(16, 8, init_std=0.5), lambda: SelfAttention(8, n_heads=2)):
        fresh, module = meta_then_reset(factory)
        for (name, a), (_, b) in zip(fresh.state_dict().items(), module.state_dict().items()):
            assert torch.equal(a, b), name


class _TinyModel(torch.nn.Module):
    """Sinusoidal positions per example, then causal attention with an attention-bias module."""

    def __init__(self, bias):
        super().__init__()
        self.pe = SinusoidalPositionalEncoding(16, max_len=64)
        self.attn = SelfAttention(16, n_heads=4, causal=True)
        self.bias = bias

    def forward(self, x, positions):
        return self.attn(self.pe(x, positions=positions), bias=self.bias)


@pytest.mark.parametrize("bias", ["alibi", "t5", "shaw"])
def test_compile_fullgraph_with_positions_and_bias_modules(bias):
    from posenc import ALiBiBias, ShawRelativePosition, T5RelativeBias

    module = {"alibi": ALiBiBias(4), "t5": T5RelativeBias(4, bidirectional=False), "shaw": ShawRelativePosition(4, 3)}
    torch._dynamo.reset()
    model = _TinyModel(module[bias]).eval()
    compiled = torch.compile(model, fullgraph=True, backend="eager")  # fullgraph: any graph break is an error
    x = torch.randn(2, 6, 16)
    pos = torch.tensor([[0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]])
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, pos), model(x, pos))
        x2, pos2 = torch.randn(3, 9, 16), torch.arange(9)  # new shapes: a dynamic-shape recompile
        torch.testing.assert_close(compiled(x2, pos2), model(x2, pos2))


def test_export_with_positions_and_t5_bias():
    from posenc import T5RelativeBias

    model = _TinyModel(T5RelativeBias(4, bidirectional=False)).eval()
    x, pos = torch.randn(2, 6, 16), torch.tensor([[0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]])
    exported = torch.export.export(model, (x, pos))
    torch.testing.assert_close(exported.module()(x, pos), model(x, pos))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: torch.cuda.set_sync_debug_mode checks for host syncs")
def test_forward_paths_do_not_synchronise_on_cuda():
    """With the default check_values, no forward of these modules waits for the device."""
    from posenc import ALiBiBias, FeatureTokenizer, PeriodicEmbedding, ShawRelativePosition, T5RelativeBias

    dev = torch.device("cuda")
    x = torch.randn(2, 6, 16, device=dev)
    pos = torch.tensor([[0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]], device=dev)
    learned = LearnedPositionalEmbedding(16, 16).to(dev)
    table = torch.randn(4, 3, device=dev)
    tabular = [FeatureTokenizer(3, 8).to(dev), PeriodicEmbedding(3, 8).to(dev)]
    models = [_TinyModel(b).to(dev) for b in (ALiBiBias(4), T5RelativeBias(4, bidirectional=False), ShawRelativePosition(4, 3))]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for model in models:
            model(x, pos)
        learned(x, positions=pos)
        learned(x, offset=torch.tensor([3, 0], device=dev))
        for module in tabular:
            module(table)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_per_example_masks_for_packed_batches():
    """Two documents packed in one row attend as if they were two rows (with per-example positions)."""
    torch.manual_seed(0)
    attn = SelfAttention(8, n_heads=2, causal=True).double()
    pe = SinusoidalPositionalEncoding(8, max_len=16).double()
    a, b = torch.randn(1, 3, 8, dtype=torch.float64), torch.randn(1, 4, 8, dtype=torch.float64)
    packed = torch.cat([a, b], dim=1)
    positions = torch.tensor([[0, 1, 2, 0, 1, 2, 3]])
    doc = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    same_doc = (doc[:, None] == doc[None, :])[None]  # (batch, seq, seq)
    out = attn(pe(packed, positions=positions), mask=same_doc)
    torch.testing.assert_close(out[:, :3], attn(pe(a)))
    torch.testing.assert_close(out[:, 3:], attn(pe(b)))
    # the same mask given per head
    torch.testing.assert_close(attn(pe(packed, positions=positions), mask=same_doc[:, None].expand(1, 2, 7, 7)), out)
    for bad in (torch.ones(2, 7, 7, dtype=torch.bool), torch.ones(1, 3, 7, 7, dtype=torch.bool), torch.ones(7, dtype=torch.bool)):
        with pytest.raises(ValueError, match="mask must have shape"):
            attn(packed, mask=bad)


def test_left_padded_batch_gives_the_unpadded_result_and_no_nan():
    torch.manual_seed(0)
    attn = SelfAttention(8, n_heads=2, causal=True).double()
    pe = LearnedPositionalEmbedding(16, 8).double()
    short = torch.randn(1, 3, 8, dtype=torch.float64)
    padded = torch.cat([torch.zeros(1, 2, 8, dtype=torch.float64), short], dim=1)  # 2 pads in front
    real = torch.tensor([False, False, True, True, True])
    positions = (real.long().cumsum(0) - 1).clamp(min=0)[None]  # 0, 0, 0, 1, 2
    key_mask = real[None, None, :].expand(1, 5, 5)  # (batch, seq, seq): keys that are real tokens
    out = attn(attn(pe(padded, positions=positions), mask=key_mask), mask=key_mask, need_weights=True)  # two layers
    # the padding queries see no key at all (causal + padding): zero weights, not NaN
    assert torch.equal(attn.last_weights[0, :, :2], torch.zeros(2, 2, 5, dtype=torch.float64))
    assert not out.isnan().any()
    torch.testing.assert_close(out[:, 2:], attn(attn(pe(short))))


# ------------------------------------------------------------ one API, production-shaped attention (issue 20)


def test_offset_and_positions_are_keyword_only_everywhere():
    x = torch.zeros(1, 3, 8)
    for module in (
        posenc.SinusoidalPositionalEncoding(8, 16),
        LearnedPositionalEmbedding(16, 8),
        posenc.RotaryEmbedding(8),
    ):
        with pytest.raises(TypeError, match="positional argument"):
            module(x, 5)
        assert module(x, offset=5).shape == x.shape
        assert module(x, positions=torch.arange(3)).shape == x.shape


def test_a_tensor_offset_reads_no_value():
    # check_values=False is what an accelerator runs by default (on the CPU the range is read
    # to gather from the table)
    rope = posenc.RotaryEmbedding(8, check_values=False)
    x = torch.randn(2, 3, 8)
    offset = torch.tensor([0, 4])
    with pytest.MonkeyPatch.context() as mp:
        for name in ("item", "__bool__", "__int__", "tolist"):
            mp.setattr(torch.Tensor, name, lambda self, *a, **k: (_ for _ in ()).throw(AssertionError(name)))
        out = rope(x, offset=offset)
    torch.testing.assert_close(out[1], rope(x[1:], offset=4)[0], rtol=0, atol=0)


def test_attention_keeps_weights_only_when_asked_and_passes_positions_to_the_hook():
    torch.manual_seed(0)
    attn = SelfAttention(16, n_heads=2, causal=True)
    rope = posenc.RotaryEmbedding(8)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        attn(x)
    assert attn.last_weights is None
    attn(x, need_weights=True)
    assert attn.last_weights.shape == (2, 2, 5, 5)
    # left padding through the hook: the padded row equals the unpadded sequence
    pos = torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]])
    mask = torch.tensor([[False, False, True, True, True], [True] * 5])[:, None, :].expand(2, 5, 5)
    padded = attn(x, mask=mask, rotary=rope, positions=pos)
    alone = attn(x[:1, 2:], rotary=rope)
    torch.testing.assert_close(padded[0, 2:], alone[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="positions"):
        attn(x, rotary=rope, positions=torch.arange(4))


def test_attention_reset_parameters_and_dtype_mismatch():
    attn = SelfAttention(8, n_heads=2)
    before = attn.w_q.weight.clone()
    attn.reset_parameters()
    assert not torch.equal(before, attn.w_q.weight)
    with pytest.raises(TypeError, match="dtype"):
        attn(torch.randn(1, 3, 8, dtype=torch.float64))
    assert attn.head_dim == 4


def test_t5_bucket_refuses_the_int64_minimum():
    lowest = torch.iinfo(torch.int64).min
    with pytest.raises(ValueError, match="relative_position"):
        posenc.t5_relative_bucket(torch.tensor([0, lowest]))
    assert int(posenc.t5_relative_bucket(torch.tensor([lowest + 1]))) == 15


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_device_the_machine_lacks_is_refused_by_name():
    with pytest.raises(ValueError, match="device"):
        posenc.alibi_bias(4, 3, device="cuda:7")
