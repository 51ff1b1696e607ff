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

import math

import numpy as np
import pytest
import torch

import posenc
import posenc.rotary
from posenc.book import probes, results


def _check_trained_offset_head():
    trained, acc = probes.train_offset_head(32, 32, offset=1, lr=3e-2, content_scale=0.25, seed=0)
    assert acc > 0.75
    torch.manual_seed(1)
    fresh = posenc.SelfAttention(32).double()
    tokens = 0.25 * torch.randn(32, 32, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    p = torch.from_numpy(posenc.sinusoidal_encoding(32, 32))

    def spread(head):
        pp = probes.attention_score_terms(tokens, p, head.w_q.weight.detach(), head.w_k.weight.detach())[
            "position-position"
        ].numpy()
        return np.mean([np.diagonal(pp, -k).std() for k in range(1, 9)]) / pp.std()

    assert spread(fresh) > 0.8 and spread(trained) < 0.3
    _, acc_noisy = probes.train_offset_head(32, 32, offset=1, lr=3e-2, content_scale=1.0, seed=0)
    assert acc_noisy < 0.5 < acc
    with pytest.raises(ValueError, match="offset"):
        probes.train_offset_head(8, 4, offset=4)


def test_chapter_numbers_trained_offset_head():
    # the chapter's claims: training makes the position-position term nearly relative,
    # random projections do not; more content makes the task harder
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the chapter trains on one thread
    try:
        _check_trained_offset_head()
    finally:
        torch.set_num_threads(threads)


def test_chapter_numbers_context_extension():
    hd, base, L, s = 128, 500_000.0, 8192, 8
    w = posenc.rotary_frequencies(hd, base=base)
    wavelength = 2 * np.pi / w
    methods = {
        "linear": {"type": "linear", "factor": s},
        "ntk": {"type": "ntk", "factor": s},
        "yarn": {"type": "yarn", "factor": s, "original_max_position_embeddings": L},
        "llama3": {
            "type": "llama3",
            "factor": s,
            "low_freq_factor": 1,
            "high_freq_factor": 4,
            "original_max_position_embeddings": L,
        },
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
    f64 = dict(dtype=torch.float64)
    wq, wk = torch.randn(n_heads * hd, width, **f64), torch.randn(n_heads * hd, width, **f64)
    xs = torch.randn(n, width, **f64)

    def attention(wq, wk, layout):
        q = (xs @ wq.T).view(n, n_heads, hd).transpose(0, 1)
        k = (xs @ wk.T).view(n, n_heads, hd).transpose(0, 1)
        rope = posenc.RotaryEmbedding(hd, layout=layout)
        return torch.softmax(rope(q) @ rope(k).transpose(-1, -2) / math.sqrt(hd), dim=-1)

    reference = attention(wq, wk, "interleaved")
    perm = posenc.rotary_permutation(hd, n_heads)
    torch.testing.assert_close(attention(wq[perm], wk[perm], "half"), reference, atol=1e-12, rtol=0)
    changed = (attention(wq, wk, "half").argmax(-1) != reference.argmax(-1)).float().mean().item()
    assert changed > 0.5


def minimal_rope(x, base=10000.0):
    """The chapter's ten-line RoPE (section sec-rotations-rope), restated."""
    seq, d = x.shape[-2], x.shape[-1]
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = torch.arange(seq, dtype=torch.float64)[:, None] * omega
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    u, v = x[..., 0::2], x[..., 1::2]
    return torch.stack([u * cos - v * sin, u * sin + v * cos], dim=-1).flatten(-2)


@pytest.mark.parametrize("d, base", [(64, 10000.0), (8, 500_000.0), (2, 10.0)])
def test_minimal_rope_equals_the_module(d, base):
    x = torch.randn(2, 3, 40, d, dtype=torch.float64, generator=torch.Generator().manual_seed(d))
    expected = posenc.RotaryEmbedding(d, base=base, layout="interleaved")(x)
    torch.testing.assert_close(minimal_rope(x, base), expected, rtol=0, atol=1e-12)
    # and the half layout is the same rotation after the weight permutation of the chapter
    perm = torch.as_tensor(posenc.rotary_permutation(d, 1))
    torch.testing.assert_close(posenc.RotaryEmbedding(d, base=base, layout="half")(x[..., perm]), expected[..., perm], rtol=0, atol=1e-12)


def test_rope_requirement_two_dimensions():
    """Equation eq-rotations-2d: rotating each pair by m * theta makes the score a function of m - n."""
    q, k = torch.randn(2, dtype=torch.float64), torch.randn(2, dtype=torch.float64)
    theta = 0.3

    def f(x, m):
        c, s = math.cos(m * theta), math.sin(m * theta)
        return torch.stack([c * x[0] - s * x[1], s * x[0] + c * x[1]])

    for m in range(-3, 6):
        for n in range(-3, 6):
            assert float(f(q, m) @ f(k, n)) == pytest.approx(float(f(q, m - n) @ k), abs=1e-12)


def test_rope_heads_split_the_frequencies():
    """sec-rotations-frequencies: a positional head uses the fast pairs, a semantic head the slow ones."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x = torch.randn(64, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
        usage, acc = {}, {}
        for task in ("previous", "match"):
            w_q, w_k, acc[task] = probes.train_rope_head(task, steps=300, seed=0)
            usage[task] = probes.rope_pair_usage(w_q, w_k, x)
    finally:
        torch.set_num_threads(threads)
    assert acc["previous"] > 0.9 and acc["match"] > 0.9
    assert float(usage["previous"][:4].sum()) > 2 * float(usage["previous"][-4:].sum())
    assert float(usage["match"][:4].sum()) < 0.5 * float(usage["match"][-4:].sum())
    assert float(usage["match"].sum()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="task"):
        probes.train_rope_head("copy", steps=1)


def test_rope_requirement_general_solution_and_reflection():
    """thm-rotations-general: a reflection meets the requirement on integers; exp(m Omega) is a group of rotations."""
    from scipy.linalg import expm

    S = np.diag([1.0, -1.0])
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal(2), rng.standard_normal(2)
    P = np.linalg.matrix_power
    for m in range(-4, 5):
        for n in range(-4, 5):
            assert (P(S, m) @ q) @ (P(S, n) @ k) == pytest.approx((P(S, m - n) @ q) @ k, abs=1e-15)
    assert np.linalg.det(S) == pytest.approx(-1.0)
    g = np.random.default_rng(11).standard_normal((5, 5))
    omega = (g - g.T) / 2
    for a in (-1.5, 0.5, 2.0):
        A = expm(a * omega)
        np.testing.assert_allclose(A.T @ A, np.eye(5), atol=1e-12)  # orthogonal
        assert np.linalg.det(A) == pytest.approx(1.0)  # never a reflection
        for b in (-2.0, 0.25, 3.0):
            np.testing.assert_allclose(A.T @ expm(b * omega), expm((b - a) * omega), atol=1e-12)
    eig = np.linalg.eigvals(omega)
    assert np.abs(eig.real).max() < 1e-12 and int((np.abs(eig) < 1e-9).sum()) == 1  # one unrotated channel


def test_decay_first_sign_changes():
    """sec-rotations-long-range: the mean cosine of a 128-wide head first turns negative near these distances
    (glued rounded), in a dip of a few positions, and not monotonically in the base."""
    got = {b: probes.first_sign_change(b) for b in (10_000.0, 500_000.0, 1_000_000.0)}
    assert {b: c["distance"] for b, c in got.items()} == {10_000.0: 1707, 500_000.0: 18438, 1_000_000.0: 27115}
    assert got[10_000.0]["distance"] < 4096  # below Llama 2's context
    sweep = [probes.first_sign_change(float(b)) for b in np.arange(900_000, 1_100_001, 20_000)]
    r = np.array([c["distance"] for c in sweep])
    assert (round(int(r.min()), -3), round(int(r.max()), -3)) == (19_000, 33_000)
    assert (np.diff(r) < 0).sum() == 4  # not monotone: the first crossing moves closer in 4 of 10 steps up
    every = list(got.values()) + sweep
    assert max(c["width"] for c in every) <= 3 and round(min(c["depth"] for c in every), 2) == -0.03
    # the trend over the wide range holds
    assert got[10_000.0]["distance"] < got[500_000.0]["distance"] < got[1_000_000.0]["distance"]


def test_bias_free_rope_head_score_spread_peaks_at_offset_1():
    """sec-rotations-bias: the bias-free RoPE head's scores have mean ~0 beyond offset 0 but a larger spread at
    offset 1 (0.27) than from offset 4 on (0.22 on average)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = results.read_results("rope_bias_heads.json")["rows"]
        row0 = next(r for r in rows if r["role"] == "main" and r["variant"] == "rope, no bias" and r["seed"] == 0)
        live = probes.train_position_head(
            "rope", bias=False, lr=row0["lr"], seed=0, steps=3000, eval_every=100, patience=5
        )
    finally:
        torch.set_num_threads(threads)
    x = torch.randn(64, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(9))  # the chapter's probe_x
    sd = probes.mean_score_by_offset(live["w_q"], live["w_k"], x, spread=True)
    assert sd.shape == (31,)
    assert sd[1] > sd[2] > sd[4:].mean() and round(float(sd[4:].mean()), 2) == 0.22
    assert round(float(sd[1]), 2) == 0.27


def test_tf32_rope_angles_and_posenc_immunity():
    """sec-rotations-tf32: a TF32 matmul of positions and frequencies (transformers #48428) is wrong by up to pi
    at 16k tokens; posenc's tables (no matmul) stay at the float32 floor."""
    assert probes.tf32_round(torch.tensor([2048.0, 2049.0, 4097.0, 16383.0])).tolist() == [2048, 2050, 4096, 16384]
    err = probes.tf32_angle_error(16_384, head_dim=128, base=500_000.0)
    assert round(float(err.max()), 2) == 3.14 and round(float(err[:2048].max()), 2) == 0.34
    tab = posenc.RotaryEmbedding(128, base=500_000.0).tables(torch.arange(16_384))
    exact = torch.arange(16_384, dtype=torch.float64)[:, None] * torch.from_numpy(
        posenc.rotary_frequencies(128, base=500_000.0)
    )
    assert (tab.cos.double() - exact.cos()).abs().max() < 1e-6
    assert (tab.sin.double() - exact.sin()).abs().max() < 1e-6
    with pytest.raises(TypeError, match="x must be a float32"):
        probes.tf32_round(torch.zeros(2, dtype=torch.float64))


def test_dynamic_ntk_float32_is_the_one_inexact_path():
    """sec-rotations-precision: posenc's dynamic NTK in float32 is off by about 0.1 at 2**20 and 1.8 at 10 * 2**20
    (the stated exception); plain RoPE is at the float32 floor; float64 inputs are the reference."""
    errs = {n: probes.dynamic_rope_float32_error(n) for n in (2**20, 10 * 2**20)}
    assert all(e["plain"] < 2e-6 for e in errs.values())
    # float32 rounding: 0.148 with AVX-512 kernels, 0.134 with scalar ones; the chapter glues one digit
    assert round(errs[2**20]["dynamic"], 1) == 0.1 and round(errs[10 * 2**20]["dynamic"], 1) == 1.8
    with pytest.raises(ValueError, match="seq"):
        probes.dynamic_rope_float32_error(8, seq=16)


def test_bias_experiment_ordering():
    """sec-rotations-bias: from the saved runs, RoPE + bias >> additive + bias; RoPE without bias fails; a shared
    direction restores it."""

    rows = results.read_results("rope_bias_heads.json")["rows"]
    main = [r for r in rows if r["role"] == "main"]

    def acc(variant):
        a = [r["accuracy"] for r in main if r["variant"] == variant]
        assert len(a) >= 3, variant
        return np.array(a)

    rope_b, rope_nb = acc("rope, bias"), acc("rope, no bias")
    shared = acc("rope, no bias, shared direction")
    add_b, add_nb, none = acc("additive, bias"), acc("additive, no bias"), acc("none, no bias")
    assert rope_b.min() > 0.95 and shared.min() > 0.95
    assert add_b.max() < 0.6 and add_nb.max() < 0.6
    assert rope_nb.max() < 0.3 and none.max() < 0.3
    assert rope_b.min() > add_b.max() + 0.3 > rope_nb.max()
    chance = probes.previous_token_chance(32)
    assert chance == pytest.approx(0.0987, abs=1e-4) and none.mean() < 0.2


def test_float32_angle_errors_at_long_context():
    """sec-rotations-precision: float32 angles, base 500,000, d_h = 128, last 8,192 positions before each length."""
    w = posenc.rotary_frequencies(128, base=500_000.0)
    w32 = torch.from_numpy(w).float()
    errs = {}
    for length in (2**20, 10 * 2**20):
        m = np.arange(length - 8192, length)
        exact = m[:, None] * w
        a32 = (torch.from_numpy(m).float()[:, None] * w32).double().numpy()
        errs[length] = np.abs(np.remainder(a32 - exact + np.pi, 2 * np.pi) - np.pi).max()
        reduced = np.remainder(exact, 2 * np.pi).astype(np.float32)
        assert np.abs(np.remainder(reduced - exact + np.pi, 2 * np.pi) - np.pi).max() < 1e-6
    assert round(errs[2**20], 2) == 0.05 and round(errs[10 * 2**20], 2) == 0.68
    # gpt-neox #1003: the cosine at position 1,857 moved by 0.715 (0.78 is the table's maximum)
    assert round(abs(math.cos(1044.2678) - math.cos(1045.0)), 3) == 0.715


def test_llama3_rule_is_ntk_by_parts_with_the_papers_ramp():
    hd, base, L, s = 128, 500_000.0, 8192, 8
    w = posenc.rotary_frequencies(hd, base=base)
    llama3 = posenc.rotary_frequencies(
        hd,
        base=base,
        scaling={
            "type": "llama3",
            "factor": s,
            "low_freq_factor": 1,
            "high_freq_factor": 4,
            "original_max_position_embeddings": L,
        },
    )
    gamma = np.clip((L * w / (2 * np.pi) - 1) / 3, 0, 1)
    np.testing.assert_allclose(llama3, (1 - gamma) * w / s + gamma * w, rtol=1e-9, atol=0)


def test_partial_rotary_half_layout_pairs_inside_the_rotated_width():
    neox = posenc.RotaryEmbedding(64, rotary_dim=16)
    e0 = torch.zeros(1, 64, dtype=torch.float64)
    e0[0, 0] = 1.0
    moved = neox(e0, offset=1)[0]
    assert torch.nonzero(moved.abs() > 1e-12).flatten().tolist() == [0, 8]  # (j, j + r/2), not (j, j + d_h/2)
    x = torch.randn(5, 64, dtype=torch.float64)
    assert torch.equal(neox(x, offset=3)[:, 16:], x[:, 16:])


def test_released_models_table_agrees_with_the_config_inspector():
    """Section "RoPE as released models use it": each row's stated layout, rule and length
    is what posenc.inspect_config reads from the configuration class printed below it."""
    import json
    import pathlib

    from posenc.book.released import released_configs, released_rope_rows

    nb = json.loads((pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "04_rotations.ipynb").read_text())
    table = next("".join(c["source"]) for c in nb["cells"] if "(sec-rotations-released)=" in "".join(c["source"]))
    line = {row.split("|")[1].strip(): row for row in table.splitlines() if row.startswith("| ")}
    rows = {(r["model"], r["layer_type"]): r for r in released_rope_rows()}
    g3 = rows["Gemma 3", "full_attention"]
    assert "divide by 8 (linear scaling" in line["Gemma 3"] and g3["scaling"] == "linear x8"
    assert rows["Gemma 3", "sliding_attention"]["scaling"] == "none"
    ds = rows["DeepSeek-V3", "full_attention"]
    assert "interleaved layout" in line["DeepSeek-V2, V3"] and ds["layout"] == "interleaved"
    assert "YaRN, factor 40 from 4,096" in line["DeepSeek-V2, V3"] and (ds["scaling"], ds["trained_length"]) == ("yarn x40", 4096)
    assert "64 rotated dimensions" in line["DeepSeek-V2, V3"] and ds["rotary_dim"] == 64
    cmd = rows["Command A", "sliding_attention"]
    assert "interleaved layout" in line["Command R7B, Command A"] and cmd["layout"] == "interleaved"
    assert "three sliding-window layers" in line["Command R7B, Command A"] and cmd["nope"] == "10 of 40"
    gpt = rows["gpt-oss", "full_attention"]
    assert "factor 32 from 4,096" in line["gpt-oss"] and "base 150,000" in line["gpt-oss"]
    assert (gpt["scaling"], gpt["trained_length"], gpt["base"]) == ("yarn x32", 4096, 150000.0)
    llama = rows["Llama 3.1", "full_attention"]
    assert "factor 8, low 1, high 4, $L$ = 8,192" in line["Llama 3, 3.1"]
    assert (llama["scaling"], llama["trained_length"], llama["base"]) == ("llama3 x8", 8192, 500000.0)
    g4 = rows["Gemma 4", "full_attention"]
    assert "first quarter of the pairs" in line["Gemma 4"] and g4["rotated_pairs"] * 4 == g4["head_dim"] // 2
    llama4 = line["Llama 4 Scout, Maverick"]
    scout, maverick = rows["Llama 4 Scout", "chunked_attention"], rows["Llama 4 Maverick", "chunked_attention"]
    assert "every fourth layer" in line["SmolLM3"] and "every fourth layer" in llama4
    assert rows["SmolLM3", "full_attention"]["nope"] == "9 of 36"
    assert scout["nope"] == maverick["nope"] == "12 of 48" and scout["layout"] == maverick["layout"] == "interleaved"
    assert "base 500,000" in llama4 and scout["base"] == maverick["base"] == 500000.0
    assert "`llama3` rule: factor 16, low 1, high 1, $L$ = 8,192" in llama4 and "meta2025llama4code" in llama4
    assert (scout["scaling"], scout["trained_length"]) == ("llama3 x16", 8192)
    scout_rule = released_configs()["Llama 4 Scout"].rope_parameters
    assert scout_rule["low_freq_factor"] == scout_rule["high_freq_factor"] == 1.0
    assert "Maverick ships no scaling" in llama4 and maverick["scaling"] == "none"


def test_llama4_scout_step_rule_in_transformers():
    """sec-rotations-released: with low = high = 1 Scout's llama3 rule is a step (Meta's apply_scaling): pairs
    with wavelength below 8,192 keep their frequency, the others turn 16 times slower; transformers 5.23 warns
    about low = high yet computes the same frequencies (to float32 rounding)."""
    from transformers.models.llama4.modeling_llama4 import Llama4TextRotaryEmbedding

    from posenc.book.released import released_configs

    plain = 5e5 ** (-torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    meta = torch.where(2 * math.pi / plain < 8192, plain, plain / 16)
    hf = Llama4TextRotaryEmbedding(released_configs()["Llama 4 Scout"]).inv_freq.double()
    assert ((hf - meta).abs() / meta).max() < 2e-7
    assert int((meta == plain).sum()) == 35 and int((meta == plain / 16).sum()) == 29


def test_additive_head_depends_on_the_ratio_of_encoding_to_content():
    """sec-rotations-bias: the additive head with biases (34 % at content scale 1) reaches 65 % and 91 % with the
    encoding 2x and 4x larger relative to the tokens (saved runs, same protocol and seeds)."""
    snr = results.read_results("rope_bias_snr.json")
    assert snr["config"]["content_scales"] == [0.5, 0.25]
    main = [r for r in snr["rows"] if r["role"] == "main"]
    acc = {c: np.array([r["accuracy"] for r in main if r["content_scale"] == c]) for c in (0.5, 0.25)}
    assert all(len(a) == 3 for a in acc.values())
    assert sorted(r["seed"] for r in main if r["content_scale"] == 0.5) == [0, 1, 2]
    base = np.array([r["accuracy"] for r in results.read_results("rope_bias_heads.json")["rows"]
                     if r["role"] == "main" and r["variant"] == "additive, bias"])
    assert round(base.mean() * 100) == 34
    assert round(acc[0.5].mean() * 100) == 65 and round(acc[0.25].mean() * 100) == 91
    assert base.max() < acc[0.5].min() and acc[0.5].max() < acc[0.25].min()
    # |PE| = 4 for d = 32 (16 pairs of sin^2 + cos^2), |x| ~ sqrt(32) * content scale
    assert np.allclose(np.linalg.norm(posenc.sinusoidal_encoding(32, 32), axis=1), 4.0)


def test_released_q_k_biases_and_gpt_oss_sinks():
    """sec-rotations-bias, sec-rotations-sinks: Qwen2 and gpt-oss have q/k biases, Llama not; gpt-oss's per-head
    sink logit takes weight from the keys: 8 keys scoring 0 against a sink of 2 keep 8 / (8 + e^2) = 0.52."""
    from transformers import GptOssConfig, LlamaConfig, Qwen2Config
    from transformers.models.gpt_oss import modeling_gpt_oss as gpt_oss
    from transformers.models.qwen2.modeling_qwen2 import Qwen2Attention

    small = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8)
    qwen = Qwen2Attention(Qwen2Config(**small), layer_idx=0)
    oss = gpt_oss.GptOssAttention(GptOssConfig(**small, num_local_experts=2), layer_idx=0)
    for attn in (qwen, oss):
        assert attn.q_proj.bias is not None and attn.k_proj.bias is not None
    assert LlamaConfig().attention_bias is False and GptOssConfig().attention_bias is True
    assert tuple(oss.sinks.shape) == (4,)
    with torch.no_grad():
        oss.sinks.fill_(2.0)
        _, w = gpt_oss.eager_attention_forward(
            oss, torch.zeros(1, 4, 1, 8), torch.zeros(1, 2, 8, 8), torch.zeros(1, 2, 8, 8), None, scaling=1.0
        )
    assert torch.allclose(w.sum(-1), torch.full((1, 4, 1), 8 / (8 + math.e**2)))
    assert round(8 / (8 + math.e**2), 2) == 0.52


def test_vllm_static_dynamic_ntk_base():
    """sec-rotations-extension: vLLM's dynamic NTK (issue #5093) used the rule's base at length s L at every
    length: growth s^2 - s + 1 = 57 for s = 8, a base about 61 times the original for d_h = 128."""
    s, L, d = 8, 8192, 128
    growth = s * (s * L) / L - (s - 1)
    assert growth == 57
    assert round(growth ** (d / (d - 2))) == 61
    # the same as posenc's dynamic rule evaluated at the longest length s L
    dyn = posenc.rope.scaling.Dynamic(factor=s, original_max_position_embeddings=L)
    assert dyn.growth(s * L) == growth and dyn.growth(L) == 1.0


def test_remapped_positions_reach_and_largest_entries():
    """sec-rotations-remap: Self-Extend reaches G (L - w + w // G) tokens, exactly; (L - w) G + w only where G
    divides w (Llama 2, w = 1,024, G = 5: 16,380, not 16,384); DCA under Qwen2.5-1M's config reaches 262,144, one
    past its training; STRING with S = 0.33 L, W = 128 on Llama 3.1 stays at 87,946."""
    from posenc.rope import remap

    def largest(n, **kw):
        return int(remap.self_extend_positions([n - 1], n, **kw).max())

    se = dict(group=4, window=16)
    reach = remap.self_extend_reach(64, **se)
    assert reach == (64 - 16) * 4 + 16 == 208
    assert largest(reach, **se) == 63 and largest(reach + 1, **se) == 64
    llama2 = dict(group=5, window=1024)
    assert remap.self_extend_reach(4096, **llama2) == 16_380
    assert largest(16_380, **llama2) == 4095 and largest(16_384, **llama2) == 4096
    dca = remap.dual_chunk_positions([999_999], 1_000_000, chunk_size=262_144, local_size=8_192)
    assert int(dca.max()) == 262_144 and int(dca.min()) == 0
    stg = remap.string_positions([131_071], 131_072, shift=int(0.33 * 131_072), local=128)
    assert int(stg.max()) == 131_071 - 43_253 + 128 == 87_946


def test_qk_norm_before_rope_keeps_scores_relative():
    """sec-rotations-qk-norm: RMSNorm with free per-channel weights before RoPE keeps the scores a function of
    m - n; after RoPE it does not (0.7 of the largest score), unless the weights are tied within each pair."""
    gaps = {(o, t): probes.qk_norm_shift_gap(o, tied=t) for o in ("before", "after") for t in (False, True)}
    assert max(gaps["before", False], gaps["before", True], gaps["after", True]) < 1e-12
    assert round(gaps["after", False], 1) == 0.7
    for seed in (1, 2, 3):
        assert probes.qk_norm_shift_gap("after", seed=seed) > 0.05
    with pytest.raises(ValueError, match="order"):
        probes.qk_norm_shift_gap("inside")
    with pytest.raises(ValueError, match="head_dim"):
        probes.qk_norm_shift_gap("before", head_dim=7)
    with pytest.raises(TypeError, match="tied"):
        probes.qk_norm_shift_gap("before", tied=1)


def test_llama4_weightless_qk_norm_after_rope_keeps_scores_relative():
    """sec-rotations-qk-norm: Llama 4 normalises after the rotation with no weight (Meta's model.py,
    rmsnorm(xq, eps)); the RMS factor commutes with the rotation, so the scores stay a function of m - n."""
    for seed in (0, 1, 2):
        for order in ("after", "before"):
            assert probes.qk_norm_shift_gap(order, weighted=False, seed=seed) < 1e-12
    assert probes.qk_norm_shift_gap("after", weighted=False, tied=True) < 1e-12  # tied is moot without a weight
    with pytest.raises(TypeError, match="weighted"):
        probes.qk_norm_shift_gap("after", weighted=0)


# --- reading time (the chapter's introduction) -------------------------------------------


def test_reading_time_as_stated():
    """The introduction's reading time: core about 115 minutes, optional sections about 30
    (TF32, remapping positions, RoPE as released models use it, QK-norm), exercises about 5."""
    import json
    from pathlib import Path

    from posenc.book.analysis import reading_time

    path = Path(__file__).resolve().parents[2] / "notebooks" / "04_rotations.ipynb"
    t = reading_time(path)
    for part, minutes in (("core", 115), ("optional", 30), ("exercises", 5)):
        assert abs(t[part]["minutes"] - minutes) <= 5, (part, t[part])
    assert abs(t["core"]["words"] - 8400) <= 150 and abs(t["core"]["code_lines"] - 570) <= 10, t["core"]
    headings = [ln for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "markdown"
                for ln in "".join(c["source"]).splitlines() if ln.startswith("#") and ln.endswith("(optional)")]
    assert [h.split()[1] for h in headings] == ["When", "Remapping", "RoPE", "QK-norm"], headings
