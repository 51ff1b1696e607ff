"""Reproductions of the incidents of the reference page "When positions go wrong" (book/incidents.md).

Each test computes the failing convention of a real bug report (written out here in a
few lines of plain torch) next to what ``posenc`` does, and shows the difference
numerically: the failing convention is far from the correct result, ``posenc`` is at the
float32 floor of it (or refuses the input with a clear error). The issue addresses are in
the page and in ``references.bib``.
"""

from __future__ import annotations

import math

import pytest
import torch

import posenc
from posenc import RotaryEmbedding, apply_rotary

DT = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _inv_freq(dim: int, base: float) -> torch.Tensor:
    """``base ** (-2i / dim)`` for ``i < dim / 2``, in float64."""
    return base ** (-torch.arange(0, dim, 2, dtype=DT) / dim)


def _rotate_half(x: torch.Tensor, pos: torch.Tensor, inv_freq: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Reference rotation in float64, half layout (pairs ``(j, j + n/2)``) over all of ``x``'s last axis."""
    ang = pos.to(DT)[..., None] * inv_freq  # (..., seq, n/2)
    cos, sin = torch.cos(ang) * scale, torch.sin(ang) * scale
    x1, x2 = x[..., : inv_freq.numel()], x[..., inv_freq.numel() :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


# --------------------------------------------------------------- 1. layouts and permutation


def test_meta_weights_need_the_permutation_for_the_half_layout():
    """transformers #25199: Meta's checkpoints rotate pairs (2j, 2j+1), Hugging Face's code
    pairs (j, j + d/2); the conversion script permutes the rows of W_q and W_k so that
    both give the same attention scores. Meta's weights in half-layout code without
    the permutation give other scores."""
    n_heads, head_dim, d_model, seq = 2, 8, 16, 7
    g = _gen(1)
    w_q, w_k = torch.randn(n_heads * head_dim, d_model, generator=g, dtype=DT), torch.randn(
        n_heads * head_dim, d_model, generator=g, dtype=DT
    )
    x = torch.randn(seq, d_model, generator=g, dtype=DT)
    pos = torch.arange(seq)

    def scores(wq, wk, layout):
        q = (x @ wq.T).view(seq, n_heads, head_dim).transpose(0, 1)
        k = (x @ wk.T).view(seq, n_heads, head_dim).transpose(0, 1)
        q, k = apply_rotary(q, pos, layout=layout), apply_rotary(k, pos, layout=layout)
        return q @ k.transpose(-1, -2)

    meta = scores(w_q, w_k, "interleaved")  # Meta's reference code
    perm = torch.as_tensor(posenc.rotary_permutation(head_dim, n_heads=n_heads))
    converted = scores(w_q[perm], w_k[perm], "half")  # HF code on converted weights
    unconverted = scores(w_q, w_k, "half")  # the failing convention
    assert (converted - meta).abs().max() < 1e-5 * meta.abs().max()
    assert (unconverted - meta).abs().max() > 0.1 * meta.abs().max()


# --------------------------------------------------------------- 2. a dropped rope_theta


def test_rope_theta_taken_from_the_dict_not_a_fallback_of_10000():
    """A loader that reads ``getattr(config, "rope_theta", 10000.0)`` gets 10,000 for a
    transformers 5 config, where the base lives in ``config.rope_parameters``; Code Llama
    and Llama 3 then rotate with the wrong base, and nothing fails."""
    theta = 1_000_000.0  # Code Llama
    params = {"rope_type": "default", "rope_theta": theta}
    rope = RotaryEmbedding(128, scaling=params)  # base=None: rope_theta of the dict
    x = torch.randn(1, 2048, 128, generator=_gen(2))
    pos = torch.arange(2048)
    right = _rotate_half(x.to(DT), pos, _inv_freq(128, theta))
    dropped = _rotate_half(x.to(DT), pos, _inv_freq(128, 10_000.0))
    assert (rope(x, positions=pos).to(DT) - right).abs().max() < 1e-5
    assert (dropped - right).abs().max() > 1.0
    # the slowest pair at position 2,047: 0.0025 rad with the right base, 0.24 rad with 10,000
    assert abs(2047 * float(_inv_freq(128, theta)[-1]) - 0.0025) < 1e-4
    assert abs(2047 * float(_inv_freq(128, 10_000.0)[-1]) - 0.236) < 1e-3

    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(rope_parameters=dict(params), max_position_embeddings=4096)
    assert getattr(config, "rope_theta", 10_000.0) == 10_000.0  # the silent fallback
    assert config.rope_parameters["rope_theta"] == theta


# --------------------------------------------------------------- 3. the Llama 3.1 schema

LLAMA31 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_theta": 500_000.0,
}


def _old_rope_scaling_validation(rope_scaling: dict) -> None:
    """The check of older transformers releases: exactly two fields, ``type`` and ``factor``."""
    if not isinstance(rope_scaling, dict) or len(rope_scaling) != 2:
        raise ValueError(
            "`rope_scaling` must be a dictionary with two fields, `type` and `factor`, " f"got {rope_scaling}"
        )


def _llama31_inv_freq(dim: int) -> torch.Tensor:
    """Llama 3.1's frequencies (Meta's ``apply_scaling``), restated in float64."""
    d = LLAMA31
    inv = _inv_freq(dim, d["rope_theta"])
    L, low, high, factor = d["original_max_position_embeddings"], d["low_freq_factor"], d["high_freq_factor"], d["factor"]
    wavelen = 2 * math.pi / inv
    smooth = (L / wavelen - low) / (high - low)
    mid = (1 - smooth) * inv / factor + smooth * inv
    return torch.where(wavelen < L / high, inv, torch.where(wavelen > L / low, inv / factor, mid))


def test_llama31_rope_scaling_dict_is_read_as_llama3_not_refused_or_linear():
    """Llama 3.1's config brought ``rope_type: llama3`` with four more keys: older
    transformers refused it with a ValueError, and a parser that keeps only ``factor``
    scales every frequency by 1/8 (linear), where Llama 3.1 leaves the fast ones alone."""
    with pytest.raises(ValueError, match="two fields"):
        _old_rope_scaling_validation(LLAMA31)
    x = torch.randn(1, 64, 128, generator=_gen(3))
    pos = torch.arange(0, 64_000, 1000)
    right = _rotate_half(x.to(DT), pos, _llama31_inv_freq(128))
    linear = _rotate_half(x.to(DT), pos, _inv_freq(128, LLAMA31["rope_theta"]) / LLAMA31["factor"])
    rope = RotaryEmbedding(128, scaling=dict(LLAMA31))
    assert (rope(x, positions=pos).to(DT) - right).abs().max() < 1e-5
    assert (linear - right).abs().max() > 1.0
    inv, llama31 = _inv_freq(128, LLAMA31["rope_theta"]), _llama31_inv_freq(128)
    assert int((llama31 == inv).sum()) == 29 and int(torch.isclose(llama31, inv / 8).sum()) == 29  # of 64 pairs
    # the pre-3.1 key ``type`` is still read
    old = RotaryEmbedding(128, scaling={"type": "linear", "factor": 2.0})
    assert (old(x, positions=pos).to(DT) - _rotate_half(x.to(DT), pos, _inv_freq(128, 10_000.0) / 2)).abs().max() < 1e-3


# --------------------------------------------------------------- 4. static YaRN on short prompts

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1_000_000.0}


def test_static_yarn_changes_a_short_prompt_dynamic_scaling_does_not():
    """A serving engine with YaRN in the config applies it to every request: on a
    100-token prompt, far inside the original 32,768 positions, the scores are scaled by
    the attention temperature (0.1 ln 4 + 1)^2 = 1.30 and the slow pairs rotate 4 times
    slower. Scaling that starts only beyond the original length leaves the prompt alone."""
    q = torch.randn(1, 100, 128, generator=_gen(4))
    k = torch.randn(1, 100, 128, generator=_gen(5))
    pos = torch.arange(100)
    plain = RotaryEmbedding(128, base=1_000_000.0)
    yarn = RotaryEmbedding(128, scaling=dict(YARN))
    s_plain = plain(q, positions=pos) @ plain(k, positions=pos).transpose(-1, -2)
    s_yarn = yarn(q, positions=pos) @ yarn(k, positions=pos).transpose(-1, -2)
    temperature = (0.1 * math.log(4.0) + 1.0) ** 2
    diag = torch.diagonal(s_yarn, dim1=-2, dim2=-1) / torch.diagonal(s_plain, dim1=-2, dim2=-1)  # no rotation
    assert torch.allclose(diag, torch.full_like(diag, temperature), rtol=1e-4)
    assert 11.0 < (s_yarn - s_plain).abs().max() < 14.0 and 40.0 < s_plain.abs().max() < 45.0
    dynamic = RotaryEmbedding(
        128,
        base=1_000_000.0,
        scaling={"rope_type": "dynamic", "factor": 4.0},
        max_position_embeddings=32768,
    )
    s_dyn = dynamic(q, positions=pos) @ dynamic(k, positions=pos).transpose(-1, -2)
    assert (s_dyn - s_plain).abs().max() < 1e-4


# --------------------------------------------------------------- 5. left padding


def _left_padding_row():
    """One row of 5 tokens in a batch that left-pads it with 3: ``(head_dim, n, pads, rope, keys, query, alone)``,
    where ``alone`` are the new query's RoPE scores against the keys in the row alone, no padding
    (keys at 0..n-1, the new token at n)."""
    head_dim, n, pads = 16, 5, 3
    rope = RotaryEmbedding(head_dim)
    g = _gen(6)
    keys = torch.randn(1, n, head_dim, generator=g)
    query = torch.randn(1, 1, head_dim, generator=g)
    alone = rope(query, positions=torch.tensor([n])) @ rope(keys, positions=torch.arange(n)).transpose(-1, -2)
    return head_dim, n, pads, rope, keys, query, alone


def test_left_padded_decode_step_uses_per_row_positions():
    """Batched generation with left padding: the prefill gives the padded row positions
    0..n-1 from its mask, so the decode step must continue at n for that row. Taking
    the shared cache position (pads counted) puts the new query P positions too far
    from every cached key."""
    head_dim, n, pads, rope, keys, query, alone = _left_padding_row()

    mask = torch.tensor([[0] * pads + [1] * n])  # the padded row of the batch
    prefill = (mask.cumsum(-1) - 1).clamp(min=0)  # 0 at the pads, then 0..n-1
    padded_keys = torch.cat([torch.zeros(1, pads, head_dim), keys], dim=1)
    cached = rope(padded_keys, positions=prefill)[:, pads:]
    right_pos = mask.sum(-1, keepdim=True)  # (batch, 1): n
    shared_pos = torch.tensor([[pads + n]])  # cache_position, pads counted
    right = rope(query, positions=right_pos) @ cached.transpose(-1, -2)
    shared = rope(query, positions=shared_pos) @ cached.transpose(-1, -2)
    assert (right - alone).abs().max() < 1e-5
    assert 2.5 < (shared - alone).abs().max() < 3.1 and 3.4 < alone.abs().max() < 4.0


def test_left_padding_a_consistent_shift_is_harmless_for_rope_not_for_a_learned_table():
    """What the left-padding fix needs depends on the encoding. If the prefill and the
    decode step both count the pads (prompt at P..P+n-1, new token at P+n), every
    query-key distance is unchanged and plain RoPE's scores equal the unpadded row's to
    rounding. A learned absolute table looks up different rows for the same tokens, so
    its inputs change. What the shift still costs under RoPE is reach: the pads consume
    positions, so a dynamic-NTK model reaches its original length, and rescales, P
    tokens early."""
    head_dim, n, pads, rope, keys, query, alone = _left_padding_row()
    shifted = rope(query, positions=torch.tensor([pads + n])) @ rope(
        keys, positions=torch.arange(pads, pads + n)
    ).transpose(-1, -2)
    assert (shifted - alone).abs().max() < 1e-5 and alone.abs().max() > 3.0

    table = posenc.LearnedPositionalEmbedding(16, head_dim)
    with torch.no_grad():
        table.weight.normal_(generator=_gen(8))
    x = torch.zeros(1, n, head_dim)
    moved = table(x, positions=torch.arange(pads, pads + n)) - table(x, positions=torch.arange(n))
    assert moved.abs().max() > 0.5

    # dynamic NTK: the frequencies follow the longest position seen, pads included
    dyn = RotaryEmbedding(head_dim, scaling={"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=n + 1)
    plain_len = dyn(keys, positions=torch.arange(n))
    padded_len = dyn(keys, positions=torch.arange(pads, pads + n))
    d_alone = dyn(query, positions=torch.tensor([n])) @ plain_len.transpose(-1, -2)
    d_shift = dyn(query, positions=torch.tensor([pads + n])) @ padded_len.transpose(-1, -2)
    assert (d_shift - d_alone).abs().max() > 0.05


# --------------------------------------------------------------- 6. packed documents


def test_packed_documents_need_positions_that_restart():
    """Two documents packed in one row: with positions that restart at each document the
    rotated queries and keys equal those of the documents run alone; with 0..8 across
    the row the second document is rotated as if it followed the first. Within the
    second document the scores of plain RoPE do not change (they depend on distances
    only); what is lost is the document boundary, which packed attention in
    transformers reads from the resets of ``position_ids``."""
    head_dim, la, lb = 16, 5, 4
    rope = RotaryEmbedding(head_dim)
    x = torch.randn(1, la + lb, head_dim, generator=_gen(7))
    restart = torch.cat([torch.arange(la), torch.arange(lb)])
    across = torch.arange(la + lb)
    alone = torch.cat([rope(x[:, :la], positions=torch.arange(la)), rope(x[:, la:], positions=torch.arange(lb))], 1)
    assert (rope(x, positions=restart) - alone).abs().max() < 1e-6
    assert (rope(x, positions=across)[:, la:] - alone[:, la:]).abs().max() > 0.1

    def document_ids(pos: torch.Tensor) -> torch.Tensor:  # a new document where positions reset to 0
        return (pos == 0).cumsum(-1)

    xk = torch.randn(1, la + lb, head_dim, generator=_gen(17))

    def mass_on_first(pos: torch.Tensor) -> float:
        scores = rope(x, positions=pos) @ rope(xk, positions=pos).transpose(-1, -2) / math.sqrt(head_dim)
        doc = document_ids(pos)
        allowed = torch.tril(torch.ones(la + lb, la + lb, dtype=torch.bool)) & (doc[:, None] == doc[None, :])
        w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        return float(w[0, la:, :la].sum(-1).max())  # second document's weight on the first

    assert mass_on_first(restart) == 0.0
    assert mass_on_first(across) > 0.3
    sb = lambda pos: (lambda r: r @ r.transpose(-1, -2))(rope(x[:, la:], positions=pos))  # noqa: E731
    assert (sb(across[la:]) - sb(restart[la:])).abs().max() < 1e-4


# --------------------------------------------------------------- 7. dynamic NTK and the KV cache

DYNAMIC = {"rope_type": "dynamic", "factor": 2.0}


def test_dynamic_ntk_with_a_kv_cache_mixes_two_bases():
    """transformers #25104: beyond the original length, dynamic NTK recomputes the base for
    each call. Keys cached from a 40-token prefill were rotated with the base of length 40;
    the query of the next step uses the base of length 41, so its score with a key is no
    longer a function of their distance. Rotating the un-rotated cached keys again with
    the step's base (or one base for the whole generation) keeps them consistent."""
    head_dim, L, T = 32, 16, 40
    rope = RotaryEmbedding(head_dim, scaling=dict(DYNAMIC), max_position_embeddings=L)
    g = _gen(8)
    k = torch.randn(1, T, head_dim, generator=g)
    q = torch.randn(1, 1, head_dim, generator=g)
    cached = rope(k, positions=torch.arange(T))  # base of length 40
    mixed = rope(q, positions=torch.tensor([T])) @ cached.transpose(-1, -2)  # query: base of length 41
    both = rope(torch.cat([k, q], 1), positions=torch.arange(T + 1))  # one call: one base
    consistent = both[:, T:] @ both[:, :T].transpose(-1, -2)
    assert (mixed - consistent).abs().max() > 0.01 * consistent.abs().max()
    # posenc keeps no state between calls: a short prompt after a long one is unchanged
    short = torch.randn(1, 12, head_dim, generator=g)
    before = rope(short, positions=torch.arange(12))
    rope(torch.randn(1, 150, head_dim), positions=torch.arange(150))
    assert torch.equal(rope(short, positions=torch.arange(12)), before)


# --------------------------------------------------------------- 8. partial rotary width


def test_partial_rotary_frequencies_come_from_the_rotated_width():
    """pie #602: with ``rotary_dim < head_dim`` a kernel used ``theta^(-2i/head_dim)`` and
    pairs ``(i, i + head_dim/2)``; transformers, mlx-lm and llama.cpp use the rotated
    width for both. The two agree at position 0 and drift apart with distance."""
    head_dim, rotary_dim = 64, 16
    x = torch.randn(1, 4, head_dim, generator=_gen(9))

    def hf(pos):  # frequencies and pairs over the rotated width, the rest passed through
        r = _rotate_half(x[..., :rotary_dim].to(DT), pos, _inv_freq(rotary_dim, 10_000.0))
        return torch.cat([r, x[..., rotary_dim:].to(DT)], -1)

    def head_width(pos):  # the failing kernel: head_dim in the exponent and in the pairing
        h, n = head_dim // 2, rotary_dim // 2
        ang = pos.to(DT)[:, None] * _inv_freq(head_dim, 10_000.0)[:n]
        out = x.to(DT).clone()
        a, b = x[..., :n].to(DT), x[..., h : h + n].to(DT)
        out[..., :n], out[..., h : h + n] = a * ang.cos() - b * ang.sin(), b * ang.cos() + a * ang.sin()
        return out

    rope = RotaryEmbedding(head_dim, rotary_dim=rotary_dim)
    near, far = torch.zeros(4, dtype=torch.long), torch.arange(1000, 1004)
    assert (head_width(near) - hf(near)).abs().max() < 1e-12
    assert (head_width(far) - hf(far)).abs().max() > 0.5
    assert (rope(x, positions=far).to(DT) - hf(far)).abs().max() < 1e-4


# --------------------------------------------------------------- 9. M-RoPE ids at decode


def test_mrope_decode_positions_carry_the_prefill_delta():
    """mlx-vlm #1619: after a multimodal prefill the next token's M-RoPE id is the cache
    offset plus the (negative) delta of the prompt, because an image's tokens share ids.
    Decoding at the raw cache offset puts the new token 12 ids too far from the prompt."""
    prompt = [("text", 3), ("image", (1, 8, 8)), ("text", 4)]  # 16 merged image tokens
    ids = posenc.mrope_position_ids(prompt)
    seq = ids.shape[1]
    delta = int(ids.max()) + 1 - seq
    extended = posenc.mrope_position_ids(prompt[:-1] + [("text", 5)])  # the prompt plus one token
    assert delta == -12 and torch.equal(extended[:, -1], torch.full((3,), seq + delta))
    # text tokens have three equal ids, where M-RoPE is the 1-D rotation
    rope = RotaryEmbedding(64)
    g = _gen(10)
    q, k = torch.randn(1, 1, 64, generator=g), torch.randn(1, 4, 64, generator=g)
    keys = rope(k, positions=ids[0, -4:])  # the prompt's last text tokens
    right = rope(q, positions=torch.tensor([seq + delta])) @ keys.transpose(-1, -2)
    offset_only = rope(q, positions=torch.tensor([seq])) @ keys.transpose(-1, -2)
    assert (offset_only - right).abs().max() > 0.1 * right.abs().max()


# --------------------------------------------------------------- 10. inverse frequencies in bf16


def test_module_cast_to_bf16_keeps_the_frequencies():
    """transformers #29496: a model cast to bfloat16 took its ``inv_freq`` buffer along, and
    tables rebuilt from it were wrong. Rounded to bf16, the frequencies put the angles
    at position 4,095 off by up to 5 radians. posenc's tables do not follow a module cast."""
    inv = _inv_freq(128, 10_000.0).float()
    pos = torch.arange(4096, dtype=torch.float32)
    exact = pos[:, None].to(DT) * inv.to(DT)
    rounded = pos[:, None] * inv.to(torch.bfloat16).float()
    assert 4.5 < (rounded.to(DT) - exact).abs().max() < 5.5  # radians
    x = torch.randn(1, 4096, 128, generator=_gen(11))
    rope = RotaryEmbedding(128)
    cast = RotaryEmbedding(128).to(torch.bfloat16)
    assert (cast(x, positions=pos.long()) - rope(x, positions=pos.long())).abs().max() < 1e-6


# --------------------------------------------------------------- 11. positions in bf16 / fp16


def test_positions_in_16_bit_floats_are_refused():
    """gpt-neox #1003: positions built with ``type_as(inv_freq)`` in fp16 turn position 1,857
    times the second frequency (head size 32) into 1,045 instead of 1,044.27, a cosine off
    by 0.715 there and by up to 0.78 over the issue's 2,048 x 16 table (at position 2,008,
    same pair); in bfloat16, 2,048 positions collapse onto 641 values. posenc takes
    positions as integers (or float32/float64) and refuses 16-bit ones."""
    inv = _inv_freq(32, 10_000.0).float()
    angle16 = (torch.tensor(1857.0).half() * inv[1].half()).float()
    angle32 = 1857.0 * inv[1].double()
    assert float(angle16) == 1045.0 and abs(float(angle32) - 1044.2678) < 1e-3
    assert round(math.cos(float(angle32)) - math.cos(float(angle16)), 3) == 0.715
    p = torch.arange(2048).float()
    table16 = (p.half()[:, None] * inv.half()[None]).double()
    diff = (table16.cos() - (p.double()[:, None] * inv.double()[None]).cos()).abs()
    assert round(float(diff.max()), 2) == 0.78 and divmod(int(diff.argmax()), 16) == (2008, 1)
    assert torch.arange(2048).to(torch.bfloat16).unique().numel() == 641
    rope = RotaryEmbedding(32)
    for dtype in (torch.bfloat16, torch.float16):
        with pytest.raises((TypeError, ValueError), match="positions"):
            rope(torch.randn(1, 4, 32), positions=torch.arange(4).to(dtype))


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 ``x`` rounded to TF32's 10 stored mantissa bits (to nearest, ties away from zero)."""
    return ((x.view(torch.int32) + (1 << 12)) & ~((1 << 13) - 1)).view(torch.float32)


def test_tf32_matmul_rounds_rope_positions():
    """transformers #48428: the angles ``inv_freq @ position_ids``, a float32 matmul, may run
    in TF32 under ``torch.set_float32_matmul_precision("high")``; positions above 2,048 are
    then rounded. Emulated (both inputs rounded to TF32, the product in float32), base
    500,000 and head size 128: the angles at positions below 16,384 are off by up to pi,
    and the rotated vectors by up to 2 times their largest coordinate. posenc forms no
    matmul: its rotation at the same positions is at the float32 floor."""
    inv = _inv_freq(128, 500_000.0)
    pos = torch.arange(16_384)
    exact = pos[:, None].to(DT) * inv
    tf32 = (_tf32(pos.float())[:, None] * _tf32(inv.float())[None]).to(DT)
    wrapped = torch.remainder(tf32 - exact + math.pi, 2 * math.pi) - math.pi
    assert round(float(wrapped.abs().max()), 2) == 3.14
    assert float(wrapped[:2048].abs().max()) < 0.5 < 3.0 < float(wrapped[8192:].abs().max())
    assert _tf32(torch.tensor([2048.0, 2049.0, 16_383.0])).tolist() == [2048.0, 2050.0, 16_384.0]
    x = torch.randn(1, 16_384, 128, generator=_gen(12), dtype=DT)
    ref = _rotate_half(x, pos, inv)
    c, s = tf32.cos(), tf32.sin()
    wrong = torch.cat([x[..., :64] * c - x[..., 64:] * s, x[..., 64:] * c + x[..., :64] * s], -1)
    assert (wrong - ref).abs().max() > 1.0
    rope = RotaryEmbedding(128, base=500_000.0)
    assert (rope(x.float(), positions=pos).to(DT) - ref).abs().max() < 1e-5


# --------------------------------------------------------------- 12. scaled RoPE leaking into sliding layers


def test_scaled_rope_stays_out_of_sliding_window_layers():
    """transformers #45945 (OLMo 3): after the layer-type refactor one YaRN rotary served every
    layer, sliding-window ones included. Inside a 4,096 window (half the original 8,192
    positions) the leaked rotation turns the slow pairs up to 8 times slower and multiplies
    every score by the temperature (0.1 ln 8 + 1)**2 = 1.46. posenc's config reader gives the
    sliding layers no scaling, as OLMo 3 documents."""
    yarn = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192}
    cfg = {"model_type": "olmo3", "num_hidden_layers": 4, "head_dim": 128, "max_position_embeddings": 65536,
           "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
           "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 5e5},
                               "full_attention": {**yarn, "rope_theta": 5e5}}}
    layers = posenc.rope_layers_from_config(cfg).rope
    assert layers["sliding_attention"].scaling is None and layers["full_attention"].scaling.factor == 8.0
    g = _gen(12)
    q, k = torch.randn(1, 1, 4096, 128, generator=g, dtype=DT), torch.randn(1, 1, 4096, 128, generator=g, dtype=DT)
    right = layers["sliding_attention"].rotary_embedding(max_len=0)
    leaked = layers["full_attention"].rotary_embedding(max_len=0)
    assert round(leaked.attention_factor ** 2, 2) == 1.46
    s_right = (right(q.float())[..., -1:, :] @ right(k.float()).transpose(-1, -2)).double()
    s_leak = (leaked(q.float())[..., -1:, :] @ leaked(k.float()).transpose(-1, -2)).double()
    # the last query against the 4,096 keys of its window: the scores move by 107 % of their
    # norm (80 % without the temperature); 45 of the 64 pairs turn slower, 29 of them 8 times
    assert round(float((s_leak - s_right).norm() / s_right.norm()), 2) == 1.07
    assert round(float((s_leak / leaked.attention_factor**2 - s_right).norm() / s_right.norm()), 2) == 0.80
    ratio = leaked.inv_freq.double() / right.inv_freq.double()
    assert int((ratio < 0.999).sum()) == 45 and int((ratio < 0.1251).sum()) == 29


# --------------------------------------------------------------- 13. mrope_interleaved read as the pairing


def test_mrope_interleaved_is_not_the_pairing_layout():
    """ohdearquant/lattice #96: Qwen3.5's ``mrope_interleaved: true`` was read as interleaved
    pairs (2j, 2j + 1); the model rotates pairs (j, j + 32) of its 64 rotated coordinates
    (a WikiText-2 perplexity gap of 0.77, 0.029 after the fix). The config reader keeps the two
    apart: layout "half", axes interleaved."""
    cfg = {"model_type": "qwen3_5_text", "num_hidden_layers": 4, "head_dim": 256, "max_position_embeddings": 262144,
           "layer_types": ["linear_attention"] * 3 + ["full_attention"],
           "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                               "mrope_section": [11, 11, 10], "mrope_interleaved": True}}
    layer = posenc.rope_layers_from_config(cfg).rope["full_attention"]
    assert (layer.layout, layer.mrope_interleaved, layer.rotary_dim) == ("half", True, 64)
    g = _gen(13)
    q, k = torch.randn(1, 1, 16, 256, generator=g), torch.randn(1, 1, 16, 256, generator=g)
    half = posenc.RotaryEmbedding(256, base=1e7, rotary_dim=64, layout="half")
    wrong = posenc.RotaryEmbedding(256, base=1e7, rotary_dim=64, layout="interleaved")
    s_half = half(q) @ half(k).transpose(-1, -2)
    s_wrong = wrong(q) @ wrong(k).transpose(-1, -2)
    # the scores of a text prompt (all three axes equal) move by 30 % of their norm, and by 62 %
    # for the rotated quarter of the head alone
    assert round(float((s_wrong - s_half).norm() / s_half.norm()), 2) == 0.30
    qr, kr = q.clone(), k.clone()
    qr[..., 64:], kr[..., 64:] = 0, 0
    r_half, r_wrong = half(qr) @ half(kr).transpose(-1, -2), wrong(qr) @ wrong(kr).transpose(-1, -2)
    assert round(float((r_wrong - r_half).norm() / r_half.norm()), 2) == 0.62


# --------------------------------------------------------------- 14. NoPE written as theta 0


def test_layer_rope_theta_zero_means_nope_not_a_base():
    """transformers #47179 (GraniteSWA): ``layer_rope_theta`` gives each layer its base, 0 for a
    NoPE layer. Read as a base, 0 makes the frequencies 1/0**(2j/d): infinite, and cos and sin
    NaN; read with ``theta or rope_theta``, the NoPE layer is rotated with the global base. The
    config reader lists the layer as NoPE and RotaryEmbedding refuses base 0."""
    cfg = {"model_type": "granite_swa", "num_hidden_layers": 4, "head_dim": 64, "rope_theta": 1e4,
           "layer_rope_theta": [0.0, 1e4, 1e4, 1e4]}
    r = posenc.rope_layers_from_config(cfg)
    assert r.nope_layers == (0,) and r.layer(0) is None and r.layer(1).base == 1e4
    naive = 1.0 / (torch.tensor(0.0, dtype=DT) ** (torch.arange(0, 64, 2, dtype=DT) / 64))
    assert torch.isinf(naive[1:]).all() and torch.isnan(torch.cos(5 * naive[1:])).all()
    g = _gen(14)
    q, k = torch.randn(1, 1, 64, 64, generator=g), torch.randn(1, 1, 64, 64, generator=g)
    fallback = posenc.RotaryEmbedding(64, base=0.0 or 1e4)
    nope_scores = q @ k.transpose(-1, -2)
    assert float((fallback(q) @ fallback(k).transpose(-1, -2) - nope_scores).abs().max()) > 1.0
    with pytest.raises(ValueError, match="base"):
        posenc.RotaryEmbedding(64, base=0.0)


# --------------------------------------------------------------- 15. positions under context parallelism


def _cp_rank_index(cu_seqlens: list[int], cp: int, rank: int, *, offset: bool = True) -> torch.Tensor:
    """Rows of a packed (THD) batch that context-parallel rank ``rank`` holds: each sequence is
    cut into ``2 cp`` chunks and the rank takes chunks ``rank`` and ``2 cp - 1 - rank``
    (load balancing under the causal mask). ``offset=False`` forgets ``cu_seqlens[i]``."""
    rows = []
    for i in range(len(cu_seqlens) - 1):
        n = cu_seqlens[i + 1] - cu_seqlens[i]
        chunk = n // (2 * cp)
        start = cu_seqlens[i] if offset else 0
        for c in (rank, 2 * cp - 1 - rank):
            rows += range(start + c * chunk, start + (c + 1) * chunk)
    return torch.tensor(rows)


def test_context_parallel_ranks_gather_positions_with_the_packed_offset():
    """Megatron-LM #5243: under context parallelism a rank holds the front and back chunks of
    every packed sequence; its rows of the per-token RoPE table must be picked with each
    sequence's ``cu_seqlens`` offset (cu_seqlens [0, 4, 8], 2 ranks: rows [0, 3, 4, 7], not
    [0, 3, 0, 3]). With equal lengths and positions restarting per sequence the wrong rows hold
    the right values, which hides the bug; with lengths 4 and 8 they do not. Positions that
    travel with the tokens (gathered with the same index) give the rank exactly the rotation of
    the whole packed batch."""
    assert _cp_rank_index([0, 4, 8], 2, 0).tolist() == [0, 3, 4, 7]
    assert _cp_rank_index([0, 4, 8], 2, 0, offset=False).tolist() == [0, 3, 0, 3]
    cu = [0, 4, 12]
    positions = torch.cat([torch.arange(cu[i + 1] - cu[i]) for i in range(2)])  # restart per sequence
    right, wrong = _cp_rank_index(cu, 2, 0), _cp_rank_index(cu, 2, 0, offset=False)
    assert positions[right].tolist() == [0, 3, 0, 1, 6, 7] and positions[wrong].tolist() == [0, 3, 0, 1, 2, 3]
    rope = RotaryEmbedding(64)
    x = torch.randn(1, 12, 64, generator=_gen(15))
    whole = rope(x, positions=positions)
    assert torch.allclose(rope(x[:, right], positions=positions[right]), whole[:, right], atol=1e-6)
    assert float((rope(x[:, right], positions=positions[wrong]) - whole[:, right]).abs().max()) > 0.5


# --------------------------------------------------------------- 16. the sign of ALiBi in a score_mod


def test_alibi_score_mod_sign():
    """attention-gym #86: PyTorch's FlexAttention example added ``slope * (q_idx - kv_idx)``,
    a bonus that grows with distance under the causal mask, instead of ``slope * (kv_idx - q_idx)``.
    With equal content scores, the reversed sign puts 0.86 of the last query's attention (slope
    1/2, 128 keys) on the 4 oldest keys, the right one 0.86 on the 4 nearest. posenc's
    alibi_bias is the right one."""
    n, heads = 128, 8
    q_idx, kv_idx = torch.arange(n)[:, None], torch.arange(n)[None, :]
    slopes = posenc.alibi_slopes(heads)[:, None, None]
    causal = kv_idx <= q_idx
    fixed = torch.where(causal, slopes * (kv_idx - q_idx), float("-inf"))
    reversed_ = torch.where(causal, slopes * (q_idx - kv_idx), float("-inf"))
    ours = posenc.alibi_bias(heads, n).masked_fill(~causal, float("-inf"))
    assert torch.allclose(ours, fixed)
    h = int((posenc.alibi_slopes(heads) == 0.5).nonzero())
    w_fixed, w_rev = fixed[h, -1].softmax(-1), reversed_[h, -1].softmax(-1)
    assert round(float(w_fixed[-4:].sum()), 2) == 0.86 and round(float(w_rev[:4].sum()), 2) == 0.86


def test_every_reproduction_named_on_the_page_exists():
    """Each test the page names (``test_...`` in backquotes) is defined in this file or the file it names."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[2]
    page = (root / "book" / "incidents.md").read_text(encoding="utf-8")
    here = pathlib.Path(__file__).read_text(encoding="utf-8")
    named = re.findall(r"`(?:(tests/[\w/]+\.py)::)?(test_\w+)`", page)
    assert len(named) >= 17
    for path, name in named:
        source = (root / path).read_text(encoding="utf-8") if path else here
        assert f"def {name}(" in source, name
