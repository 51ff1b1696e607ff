"""Rotary embeddings (chapter 4): cross-checks against transformers and Meta's formulation.

* Half layout: identical (within float32 rounding of the angles) to Hugging Face's
  ``LlamaRotaryEmbedding`` + ``apply_rotary_pos_emb``, plain and with the scalings
  transformers implements (linear, dynamic, yarn, llama3); a Hugging Face dynamic dict
  taken as is with the model's ``max_position_embeddings``.
* Interleaved layout: identical to the complex-number formulation of Meta's Llama
  reference code (re-stated independently below: ``torch.polar`` + ``view_as_complex``
  on pairs ``(2j, 2j+1)``).
* Partial rotary: identical to GPT-NeoX's rotary (``partial_rotary_factor`` 0.25), down
  to its attention layer recomputed with posenc's tables on ``(batch, seq, heads,
  head_dim)`` tensors; the scalings' frequencies for a partial width as transformers
  computes them.

The whole file is skipped where ``transformers`` is not installed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc
import posenc.rotary

LlamaConfig = pytest.importorskip("transformers").LlamaConfig
llama = pytest.importorskip("transformers.models.llama.modeling_llama")


rope_utils = pytest.importorskip("transformers.modeling_rope_utils")


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
        ours = torch.cat(
            [posenc.apply_rotary(x[i : i + 1], position_ids[i], scaling=our_scaling(name)) for i in range(2)]
        )
        ref = torch.cat([hf_rotate(x[i : i + 1], position_ids[i : i + 1], name) for i in range(2)])
    else:
        ours = rope(x, positions=position_ids)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=angle_tolerance(position_ids, x))
    # the functional form gives the same numbers
    single = posenc.apply_rotary(x[:1], position_ids[0], scaling=our_scaling(name))
    torch.testing.assert_close(single, ours[:1], rtol=0, atol=2e-6)


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
    cos, sin, *_ = rope.tables(seq_len=300, offset=3)
    plain = torch.mul(x, torch.cat([cos, cos], -1))
    plain[..., :32].addcmul_(x[..., 32:], sin, value=-1.0)
    plain[..., 32:].addcmul_(x[..., :32], sin)
    assert torch.equal(fast, plain)
    hf = x * torch.cat([cos, cos], -1) + llama.rotate_half(x) * torch.cat([sin, sin], -1)
    torch.testing.assert_close(fast, hf)


# ------------------------------------------------------------- models' configurations


def test_hf_dynamic_dict_as_is_with_the_models_maximum_length():
    """The dict transformers stores ({"rope_type": "dynamic", "factor": 2}) plus the config's
    max_position_embeddings: the same rotation for a batch whose longest row exceeds it."""
    torch.manual_seed(3)
    x = torch.randn(2, 2, 200, HEAD_DIM)
    position_ids = torch.stack([torch.arange(200), torch.arange(200) + 57])  # up to 256 > 128
    ref = hf_rotate(x, position_ids, "dynamic")
    rope = posenc.RotaryEmbedding(
        HEAD_DIM, scaling=dict(hf_config("dynamic").rope_parameters), max_position_embeddings=MAX_POSITION_EMBEDDINGS
    )
    torch.testing.assert_close(rope(x, positions=position_ids), ref, rtol=1e-5, atol=angle_tolerance(position_ids, x))
    q, _ = posenc.apply_rotary_tables(x, x, rope.tables(position_ids))
    torch.testing.assert_close(q, rope(x, positions=position_ids), rtol=0, atol=0)


gpt_neox = pytest.importorskip("transformers.models.gpt_neox.modeling_gpt_neox")


def neox_config() -> object:
    """A GPT-NeoX-style configuration: 4 heads of 64, a quarter of each head rotated."""
    from transformers import GPTNeoXConfig

    cfg = GPTNeoXConfig(
        hidden_size=256, num_attention_heads=4, rotary_pct=0.25, max_position_embeddings=512, attention_bias=True
    )
    cfg._attn_implementation = "eager"
    return cfg


def test_partial_rotary_matches_gpt_neox():
    torch.manual_seed(4)
    cfg = neox_config()
    assert cfg.rope_parameters["partial_rotary_factor"] == 0.25
    x = torch.randn(2, 4, 50, 64)
    position_ids = torch.stack([torch.arange(50), torch.arange(50) + 300])
    cos, sin = gpt_neox.GPTNeoXRotaryEmbedding(cfg)(x, position_ids)  # (2, 50, 16): the rotated width
    ref, _ = gpt_neox.apply_rotary_pos_emb(x, x, cos, sin)
    ref_freq, _ = gpt_neox.GPTNeoXRotaryEmbedding.compute_default_rope_parameters(cfg)
    np.testing.assert_allclose(
        posenc.rotary_frequencies(64, scaling=dict(cfg.rope_parameters)), ref_freq.double().numpy(), rtol=2e-6
    )
    tol = angle_tolerance(position_ids, x)
    for rope in (
        posenc.RotaryEmbedding(64, scaling=dict(cfg.rope_parameters)),  # the config's dict as is
        posenc.RotaryEmbedding(64, partial_rotary_factor=cfg.rope_parameters["partial_rotary_factor"]),
        posenc.RotaryEmbedding(64, rotary_dim=16),
    ):
        assert rope.rotary_dim == 16
        torch.testing.assert_close(rope(x, positions=position_ids), ref, rtol=1e-5, atol=tol)
        assert torch.equal(rope(x, positions=position_ids)[..., 16:], x[..., 16:])


def test_gpt_neox_attention_layer_with_posenc_tables_on_batch_seq_heads_tensors():
    """GPT-NeoX's attention layer, recomputed with its weights, posenc's tables applied to
    (batch, seq, heads, head_dim) tensors (seq_dim=1) and torch's attention."""
    torch.manual_seed(5)
    cfg = neox_config()
    attn = gpt_neox.GPTNeoXAttention(cfg, layer_idx=0).eval()
    hidden = torch.randn(2, 50, 256)
    position_ids = torch.stack([torch.arange(50), torch.arange(50) + 7])
    with torch.no_grad():
        ref, _ = attn(hidden, attention_mask=None, position_embeddings=gpt_neox.GPTNeoXRotaryEmbedding(cfg)(hidden, position_ids))
        q, k, v = attn.query_key_value(hidden).view(2, 50, 4, 3 * 64).chunk(3, dim=-1)  # (batch, seq, heads, hd)
        rope = posenc.RotaryEmbedding(64, scaling=dict(cfg.rope_parameters), seq_dim=1)
        q, k = posenc.apply_rotary_tables(q, k, rope.tables(position_ids), seq_dim=1)
        out = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        ours = attn.dense(out.transpose(1, 2).reshape(2, 50, 256))
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["yarn", "llama3_small", "linear", "dynamic"])
def test_partial_rotary_frequencies_of_scalings_match_transformers(name):
    """transformers computes every scaling for the rotated width int(head_dim * factor)."""
    params = {"rope_theta": 10000.0, **HF_SCALINGS[name], "partial_rotary_factor": 0.5}
    cfg = LlamaConfig(
        hidden_size=HEAD_DIM * 2,
        num_attention_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITION_EMBEDDINGS,
        rope_parameters=params,
    )
    ref, ref_factor = rope_utils.ROPE_INIT_FUNCTIONS[params["rope_type"]](cfg, "cpu", seq_len=300)
    ours = posenc.rotary_frequencies(HEAD_DIM, scaling=params, seq_len=300, max_position_embeddings=MAX_POSITION_EMBEDDINGS)
    assert ours.shape == (HEAD_DIM // 4,)
    np.testing.assert_allclose(ours, ref.double().numpy(), rtol=2e-6)
    rope = posenc.RotaryEmbedding(HEAD_DIM, scaling=params, max_position_embeddings=MAX_POSITION_EMBEDDINGS)
    assert rope.rotary_dim == HEAD_DIM // 2 and rope.attention_factor == pytest.approx(ref_factor, rel=1e-12)
