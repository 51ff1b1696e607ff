"""posenc.rope.remap: the relative positions of Self-Extend, Dual Chunk Attention and STRING.

Each function is compared with an independent transcription of its reference code (the
masks and position tables of ``datamllab/LongLM``'s ``self_extend_patch/Llama.py``, the
chunk loop of ``HKUNLP/ChunkLlama``'s ``chunkllama_attn_replace.py`` with the tables of
vLLM's ``DualChunkRotaryEmbedding``, and the two FlashAttention passes of
``HKUNLP/STRING``'s ``string_for_llama.py``); the reach formula of Self-Extend is checked
against the positions themselves, and bad input raises naming the argument.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc.rope as rope
from posenc.rope.remap import dual_chunk_positions, self_extend_positions, self_extend_reach, string_positions


def _causal(n: int) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool).tril()


# ---------------------------------------------------------------- Self-Extend


def _longlm_self_extend(n: int, group: int, window: int) -> torch.Tensor:
    """LongLM's prefill: neighbour ids = positions, grouped query ids = i // G + w - w / G,
    grouped key ids = j // G; the neighbour mask is tril minus tril(n - w) shifted by w."""
    pos = torch.arange(n, dtype=torch.float64)
    g_q = torch.div(pos, group, rounding_mode="floor") + window - window / group
    g_k = torch.div(pos, group, rounding_mode="floor")
    neighbour = pos[:, None] - pos[None, :]
    grouped = g_q[:, None] - g_k[None, :]
    mask = torch.ones(n, n).tril()
    if n - window > 0:
        mask[window:, :-window] -= torch.ones(n - window, n - window).tril()
    return torch.where(mask.bool(), neighbour, grouped)


@pytest.mark.parametrize("n, group, window", [(40, 4, 8), (33, 2, 6), (50, 8, 16), (20, 1, 5), (12, 3, 12)])
def test_self_extend_equals_longlm_where_the_group_divides_the_window(n, group, window):
    ours = self_extend_positions(n, n, group=group, window=window).double()
    ref = _longlm_self_extend(n, group, window)
    causal = _causal(n)
    assert torch.equal(ours[causal], ref[causal])


def test_self_extend_with_a_window_the_group_does_not_divide_follows_the_paper_not_the_float_shift():
    # algorithm 1 of the paper shifts by w - w // G; LongLM's code by w - w / G (a float)
    n, group, window = 30, 4, 6
    ours = self_extend_positions(n, n, group=group, window=window).double()
    ref = _longlm_self_extend(n, group, window)
    grouped = _causal(n) & (torch.arange(n)[:, None] - torch.arange(n)[None, :] >= window)
    assert torch.allclose(ours[grouped] - ref[grouped], torch.tensor(window / group - window // group, dtype=torch.float64))


def test_self_extend_decoding_row_equals_the_prefill_row():
    full = self_extend_positions(64, 64, group=4, window=8)
    step = self_extend_positions([63], 64, group=4, window=8)
    assert torch.equal(step[0], full[63])


@pytest.mark.parametrize("trained, group", [(8, 3), (16, 2), (33, 5), (64, 4), (64, 1)])
def test_self_extend_reach_is_exact(trained, group):
    # the largest relative position stays below the trained length up to the reach, and not one token beyond
    for window in range(1, trained + 1):
        reach = self_extend_reach(trained, group=group, window=window)
        at = self_extend_positions(reach, reach, group=group, window=window)[_causal(reach)].max()
        beyond = self_extend_positions([reach], reach + 1, group=group, window=window).max()
        assert int(at) <= trained - 1 < int(beyond), (window, reach)
        if window % group == 0 and window < trained:
            assert reach == (trained - window) * group + window


def test_self_extend_reach_of_the_readme_example():
    # LongLM's README: Llama-2 (4,096), neighbour window 1,024, group 5 "equals 16,384"; the
    # formula (L - w) * G + w holds only where G divides w: the reach is 16,380
    assert self_extend_reach(4096, group=5, window=1024) == 16_380
    assert int(self_extend_positions([16_379], 16_380, group=5, window=1024).max()) == 4095
    assert int(self_extend_positions([16_383], 16_384, group=5, window=1024).max()) == 4096
    # in LongLM's float arithmetic (shift w - w / G) the last of 16,384 queries is at 4,095.2
    assert 16_383 // 5 + 1024 - 1024 / 5 - 0 // 5 == pytest.approx(4095.2)
    assert self_extend_reach(4096, group=4, window=1024) == (4096 - 1024) * 4 + 1024


def test_group_one_is_plain_rope():
    assert torch.equal(self_extend_positions(20, 20, group=1, window=3), torch.arange(20)[:, None] - torch.arange(20))


# ---------------------------------------------------------------- Dual Chunk Attention


def _chunk_loop(n: int, chunk_size: int, local_size: int, cap: int) -> torch.Tensor:
    """ChunkLlama's prefill loop with vLLM's tables: q_t = arange(s), qc_t = min(arange(s) + s,
    cap), k_t = arange % s; per query chunk: intra (same chunk, causal), successive
    (previous chunk) with qc_t, inter (earlier chunks) with qc_t[s - 1] = min(2s - 1, cap)."""
    s = chunk_size - local_size
    q_t = torch.arange(s)
    qc_t = (torch.arange(s) + s).clamp(max=cap)
    k_t = torch.arange(n) % s
    out = torch.full((n, n), -10**9, dtype=torch.long)
    for begin in range(0, n, s):
        end = min(begin + s, n)
        rows = torch.arange(begin, end)
        out[begin:end, begin:end] = q_t[rows % s][:, None] - k_t[begin:end][None, :]
        if begin >= s:
            out[begin:end, begin - s:begin] = qc_t[rows % s][:, None] - k_t[begin - s:begin][None, :]
        if begin >= 2 * s:
            out[begin:end, : begin - s] = qc_t[s - 1] - k_t[: begin - s][None, :]
    return out


@pytest.mark.parametrize("n, chunk_size, local_size, cap", [
    (40, 10, 4, None), (40, 10, 4, 9), (57, 12, 3, None), (30, 7, 0, None), (25, 8, 5, 6),
])
def test_dual_chunk_equals_the_reference_chunk_loop(n, chunk_size, local_size, cap):
    ours = dual_chunk_positions(n, n, chunk_size=chunk_size, local_size=local_size, cap=cap)
    ref = _chunk_loop(n, chunk_size, local_size, chunk_size if cap is None else cap)
    causal = _causal(n)
    assert torch.equal(ours[causal], ref[causal])


def test_dual_chunk_never_exceeds_its_cap_and_reaches_it():
    # the paper's figure 2 (s = 6, c = 10, w = 4): relative positions stay within 0..9 at any length
    for n in (12, 100, 1000):
        r = dual_chunk_positions(n, n, chunk_size=10, local_size=4, cap=9)[_causal(n)]
        assert int(r.min()) == 0 and int(r.max()) == 9


def test_dual_chunk_is_exact_where_the_distance_is_below_the_chunk_length_plus_cap_margin():
    # intra-chunk entries are the true distance; successive ones too while s + i mod s <= cap
    n, chunk_size, local_size = 60, 10, 4
    r = dual_chunk_positions(n, n, chunk_size=chunk_size, local_size=local_size)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    s = chunk_size - local_size
    same = (i // s == j // s) & (j <= i)
    assert torch.equal(r[same], (i - j).expand(n, n)[same])


def test_dual_chunk_with_qwen_1m_config_goes_one_past_its_training_length():
    # Qwen2.5-14B-Instruct-1M: chunk_size 262,144 (its training length), local_size 8,192
    q = [1_000_000 - 1]
    k = [0, 253_952, 2 * 253_952, 999_999]  # chunk starts and the query itself
    r = dual_chunk_positions(q, k, chunk_size=262_144, local_size=8_192)
    assert r[0].tolist() == [262_144, 262_144, 262_144, 0]


# ---------------------------------------------------------------- STRING


def _string_two_passes(n: int, shift: int, local: int) -> tuple[torch.Tensor, torch.Tensor]:
    """STRING's flash passes: the diagonal window (i - j <= S) at the original positions, the
    shifted triangle (j <= i - S) with queries at i - S + W; returns both (NaN where unused)."""
    i, j = torch.arange(n)[:, None].double(), torch.arange(n)[None, :].double()
    diag = torch.where((i - j >= 0) & (i - j <= shift), i - j, torch.nan)
    shifted = torch.where(j <= i - shift, (i - shift + local) - j, torch.nan)
    return diag, shifted


@pytest.mark.parametrize("n, shift, local", [(9, 3, 1), (40, 13, 4), (64, 21, 8), (10, 1, 0)])
def test_string_equals_the_two_flash_passes(n, shift, local):
    ours = string_positions(n, n, shift=shift, local=local).double()
    diag, shifted = _string_two_passes(n, shift, local)
    d = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    near, far = (d >= 0) & (d < shift), d > shift
    assert torch.equal(ours[near], diag[near])
    assert torch.equal(ours[far], shifted[far])
    # at exactly `shift` the released code counts the key in both passes; we use the shifted one
    assert torch.equal(ours[d == shift], shifted[d == shift])


def test_string_largest_position_on_the_training_length():
    L, shift, local = 1000, 330, 128
    r = string_positions(L, L, shift=shift, local=local)[_causal(L)]
    assert int(r.max()) == L - 1 - shift + local


# ---------------------------------------------------------------- the package and bad input


def test_exported_from_posenc_rope():
    for name in ("self_extend_positions", "self_extend_reach", "dual_chunk_positions", "string_positions"):
        assert getattr(rope, name) is getattr(rope.remap, name)
        assert name in rope.__all__


def test_positions_may_be_arrays_and_tensors():
    a = self_extend_positions(np.arange(5), torch.arange(5), group=2, window=2)
    b = self_extend_positions(5, [0, 1, 2, 3, 4], group=2, window=2)
    assert a.dtype == torch.long and torch.equal(a, b)


CALLS = {
    "self_extend": lambda **kw: self_extend_positions(kw.pop("q", 4), kw.pop("k", 4), **{"group": 2, "window": 2, **kw}),
    "reach": lambda **kw: self_extend_reach(kw.pop("trained_length", 8), **{"group": 2, "window": 2, **kw}),
    "dual_chunk": lambda **kw: dual_chunk_positions(kw.pop("q", 4), kw.pop("k", 4), **{"chunk_size": 4, "local_size": 1, **kw}),
    "string": lambda **kw: string_positions(kw.pop("q", 4), kw.pop("k", 4), **{"shift": 2, "local": 1, **kw}),
}


@pytest.mark.parametrize("call, kwargs, error, name", [
    ("self_extend", {"group": 0}, ValueError, "group"),
    ("self_extend", {"group": 2.0}, TypeError, "group"),
    ("self_extend", {"window": 0}, ValueError, "window"),
    ("self_extend", {"window": True}, TypeError, "window"),
    ("self_extend", {"q": [0.5, 1.0]}, TypeError, "q_positions"),
    ("self_extend", {"q": [-1, 0]}, ValueError, "q_positions"),
    ("self_extend", {"k": [[0, 1]]}, ValueError, "k_positions"),
    ("self_extend", {"k": "abc"}, TypeError, "k_positions"),
    ("self_extend", {"k": [0, float("nan")]}, ValueError, "k_positions"),
    ("self_extend", {"q": 10**6, "k": 10**6}, ValueError, "relative-position matrix"),
    ("reach", {"trained_length": 0}, ValueError, "trained_length"),
    ("reach", {"window": 9}, ValueError, "window"),
    ("reach", {"group": "2"}, TypeError, "group"),
    ("dual_chunk", {"chunk_size": 1}, ValueError, "chunk_size"),
    ("dual_chunk", {"local_size": 4}, ValueError, "local_size"),
    ("dual_chunk", {"local_size": -1}, ValueError, "local_size"),
    ("dual_chunk", {"cap": 2}, ValueError, "cap"),
    ("dual_chunk", {"cap": 5}, ValueError, "cap"),
    ("dual_chunk", {"cap": 3.0}, TypeError, "cap"),
    ("dual_chunk", {"q": None}, TypeError, "q_positions"),
    ("string", {"shift": 0}, ValueError, "shift"),
    ("string", {"local": 3}, ValueError, "local"),
    ("string", {"local": -1}, ValueError, "local"),
    ("string", {"k": torch.tensor([True, False])}, TypeError, "k_positions"),
])
def test_bad_input_is_refused_naming_the_argument(call, kwargs, error, name):
    with pytest.raises(error, match=name):
        CALLS[call](**kwargs)
