"""Layouts and frequency spacings of the sinusoidal table (chapter 2).

The tensor2tensor and fairseq tables of ``posenc.variants`` are checked (1) bit for bit
against an independent element-by-element restatement of the published formulas written
here with the ``math`` module, and (2) against the float32 reference implementations that
ship with ``transformers`` (FSMT and M2M100 port fairseq's ``get_embedding`` and
``make_positions``), within float32 rounding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.variants import (
    fairseq_positions,
    fairseq_sinusoidal_table,
    tensor2tensor_frequencies,
    tensor2tensor_timing_signal,
    timing_signal,
)


def t2t_formula(length, channels, min_timescale=1.0, max_timescale=1.0e4, start_index=0):
    """tensor2tensor get_timing_signal_1d, written out one entry at a time."""
    n = channels // 2
    incr = math.log(float(max_timescale) / float(min_timescale)) / max(float(n) - 1.0, 1.0)
    out = np.zeros((length, channels))
    for r in range(length):
        t = float(r + start_index)
        for j in range(n):
            inv = min_timescale * math.exp(float(j) * -incr)
            out[r, j] = math.sin(t * inv)
            out[r, n + j] = math.cos(t * inv)
    return out


def fairseq_formula(num, dim, padding_idx=None):
    """fairseq get_embedding, written out one entry at a time."""
    half = dim // 2
    step = math.log(10000) / (half - 1)
    out = np.zeros((num, dim))
    for r in range(num):
        for j in range(half):
            angle = float(r) * math.exp(float(j) * -step)
            out[r, j], out[r, half + j] = math.sin(angle), math.cos(angle)
    if padding_idx is not None:
        out[padding_idx] = 0.0
    return out


def paper_formula(n, d):
    """The paper's PE(pos, 2i), PE(pos, 2i+1), 0-based, entry by entry."""
    out = np.zeros((n, d))
    for pos in range(n):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            out[pos, 2 * i], out[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return out


def one_based_formula(n, d, l_max=10000, *, literal):
    """The 1-based form of the source note: W_p[2i-1, t], W_p[2i, t], 0 < i <= d/2.

    ``literal=True`` keeps the note's exponent 2i/d; ``literal=False`` uses the corrected
    2(i-1)/d. Positions t = 1..n stand for the paper's pos = t - 1.
    """
    w = np.zeros((d + 1, n + 1))  # 1-based indices; row/column 0 unused
    for t in range(1, n + 1):
        for i in range(1, d // 2 + 1):
            e = 2 * i / d if literal else 2 * (i - 1) / d
            w[2 * i - 1, t] = math.sin((t - 1) / l_max**e)
            w[2 * i, t] = math.cos((t - 1) / l_max**e)
    return w[1:, 1:].T  # (positions, dimensions), 0-based


def wrong_exponent(n, d):
    j = np.arange(d)
    angles = np.arange(n)[:, None] / 10000 ** (j / d)
    return np.where(j % 2 == 0, np.sin(angles), np.cos(angles))


def classic_slices(n, d):
    """The common slice-assignment implementation (written here for the test)."""
    pe = torch.zeros(n, d)
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


@pytest.mark.parametrize("channels", [2, 3, 4, 7, 16, 96, 512])
@pytest.mark.parametrize("start_index", [0, 5])
def test_t2t_bit_for_bit(channels, start_index):
    ours = tensor2tensor_timing_signal(40, channels, start_index=start_index)
    np.testing.assert_array_equal(ours, t2t_formula(40, channels, start_index=start_index))


def test_t2t_custom_timescales_bit_for_bit():
    ours = tensor2tensor_timing_signal(30, 10, min_timescale=2.0, max_timescale=500.0)
    np.testing.assert_array_equal(ours, t2t_formula(30, 10, 2.0, 500.0))


@pytest.mark.parametrize("dim", [4, 5, 8, 33, 512])
@pytest.mark.parametrize("padding_idx", [None, 0, 1])
def test_fairseq_bit_for_bit(dim, padding_idx):
    ours = fairseq_sinusoidal_table(50, dim, padding_idx=padding_idx)
    np.testing.assert_array_equal(ours, fairseq_formula(50, dim, padding_idx))


def test_fairseq_equals_t2t_except_padding_row():
    f = fairseq_sinusoidal_table(64, 96)
    np.testing.assert_array_equal(f, tensor2tensor_timing_signal(64, 96))


def test_t2t_spacing_differs_from_paper_and_ends_at_max_timescale():
    d = 512
    w_paper = posenc.sinusoidal_frequencies(d)
    w_t2t = tensor2tensor_frequencies(d // 2)
    assert w_t2t[0] == w_paper[0] == 1.0
    assert w_t2t[-1] == pytest.approx(1e-4, rel=1e-14)
    assert w_paper[-1] == pytest.approx(10000 ** (-510 / 512), rel=1e-14)
    assert np.all(w_t2t[1:] < w_paper[1:])  # d/2 - 1 in the denominator: faster decay
    # the paper is the t2t formula with max_timescale = 10000**((d-2)/d)
    np.testing.assert_allclose(
        tensor2tensor_frequencies(d // 2, max_timescale=10000 ** ((d - 2) / d)), w_paper, rtol=1e-13
    )


def test_fairseq_matches_transformers_fsmt_reference():
    fsmt = pytest.importorskip("transformers.models.fsmt.modeling_fsmt")
    for dim in (4, 5, 16, 33, 512):
        ref = fsmt.SinusoidalPositionalEmbedding.get_embedding(300, dim, 1).double().numpy()
        ours = fairseq_sinusoidal_table(300, dim, padding_idx=1)
        # float32 rounding of the angle grows with the position: about pos * 2**-24
        tol = 4 * 2.0**-24 * (1 + np.arange(300))[:, None]
        assert np.all(np.abs(ref - ours) <= tol), dim
        np.testing.assert_array_equal(ref[1], 0.0)
        if dim % 2:
            np.testing.assert_array_equal(ref[:, -1], ours[:, -1])


def test_fairseq_matches_m2m100_reference_module():
    m2m = pytest.importorskip("transformers.models.m2m_100.modeling_m2m_100")
    emb = m2m.M2M100SinusoidalPositionalEmbedding(20, 16, padding_idx=1)
    tokens = torch.tensor([[5, 6, 7, 8, 1, 1], [1, 1, 9, 9, 4, 3]])
    with torch.no_grad():
        ref = emb(input_ids=tokens).double().numpy()
    pos = fairseq_positions(tokens.numpy(), padding_idx=1)
    np.testing.assert_array_equal(
        pos, m2m.M2M100SinusoidalPositionalEmbedding.create_position_ids_from_input_ids(tokens, 1).numpy()
    )
    ours = fairseq_sinusoidal_table(30, 16, padding_idx=1)[pos]
    np.testing.assert_allclose(ours, ref, atol=1e-6)
    assert pos[0, 0] == 2  # the first real token sits at position padding_idx + 1


def test_fairseq_positions_reference():
    fsmt = pytest.importorskip("transformers.models.fsmt.modeling_fsmt")
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 5, size=(6, 12))
    ref = fsmt.SinusoidalPositionalEmbedding.make_positions(torch.from_numpy(tokens), 1).numpy()
    np.testing.assert_array_equal(fairseq_positions(tokens, 1), ref)


@given(d=st.integers(2, 300), n=st.integers(1, 40))
@settings(max_examples=40, deadline=None)
def test_t2t_layout_is_a_column_permutation(d, n):
    inter = timing_signal(n, d, layout="interleaved")
    concat = timing_signal(n, d, layout="concatenated")
    perm = posenc.layout_permutation(d - d % 2)
    np.testing.assert_array_equal(concat[:, : d - d % 2], inter[:, perm])
    if d % 2:
        np.testing.assert_array_equal(concat[:, -1], 0.0)
        np.testing.assert_array_equal(inter[:, -1], 0.0)


@given(d=st.integers(1, 300))
@settings(max_examples=40, deadline=None)
def test_paper_layouts_are_a_column_permutation(d):
    inter = posenc.sinusoidal_encoding(17, d)
    concat = posenc.sinusoidal_encoding(17, d, layout="concatenated")
    np.testing.assert_array_equal(concat, inter[:, posenc.layout_permutation(d)])
    np.testing.assert_array_equal(inter, concat[:, np.argsort(posenc.layout_permutation(d))])


@pytest.mark.parametrize("d", [4, 8, 96])
def test_one_based_corrected_form_is_the_paper(d):
    np.testing.assert_allclose(one_based_formula(64, d, literal=False), paper_formula(64, d), atol=0, rtol=0)
    np.testing.assert_allclose(posenc.sinusoidal_encoding(64, d), paper_formula(64, d), rtol=0, atol=1e-15)


@pytest.mark.parametrize("d", [8, 96])
def test_one_based_literal_form_shifts_the_frequencies(d):
    lit = one_based_formula(64, d, literal=True)
    paper = paper_formula(64, d)
    assert not np.allclose(lit, paper)
    # the note's exponent 2i/d (i from 1) is the paper's pair i+1: columns move two places left
    np.testing.assert_allclose(lit[:, :-2], paper[:, 2:], atol=1e-12)
    # and its last pair has frequency exactly 1/l_max
    np.testing.assert_allclose(lit[:, -2], np.sin(np.arange(64) / 10000), atol=1e-15)


def test_i_up_to_d_over_2_inclusive_gives_two_extra_columns():
    d = 8
    cols = [2 * i + r for i in range(0, d // 2 + 1) for r in (0, 1)]
    assert len(cols) == d + 2 and max(cols) == d + 1


def test_wrong_exponent_breaks_pairs_and_rotation():
    d, n = 16, 400
    good, bad = posenc.sinusoidal_encoding(n, d), wrong_exponent(n, d)
    np.testing.assert_allclose(good[:, 0::2], bad[:, 0::2], rtol=0, atol=1e-14)  # sines agree
    np.testing.assert_allclose(np.linalg.norm(good, axis=1), np.sqrt(d / 2), rtol=1e-13)
    assert np.ptp(np.linalg.norm(bad, axis=1)) > 0.1  # norms now depend on the position
    k = 3
    res_good = np.linalg.lstsq(good[:-k], good[k:], rcond=None)[1].sum()
    res_bad = np.linalg.lstsq(bad[:-k], bad[k:], rcond=None)[1].sum()
    assert res_good < 1e-20 and res_bad > 1e-6


def test_classic_slices_crash_on_odd_width_and_posenc_does_not():
    classic_slices(4, 6)
    with pytest.raises(RuntimeError):
        classic_slices(4, 5)
    pe = posenc.sinusoidal_encoding(4, 5)
    assert pe.shape == (4, 5)
    np.testing.assert_allclose(pe[:, 4], np.sin(np.arange(4) / 10000 ** (4 / 5)), rtol=1e-15)
    assert np.all(tensor2tensor_timing_signal(4, 5)[:, 4] == 0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="embedding_dim"):
        fairseq_sinusoidal_table(10, 3)
    with pytest.raises(ValueError, match="padding_idx"):
        fairseq_sinusoidal_table(10, 8, padding_idx=10)
    with pytest.raises(TypeError, match="padding_idx"):
        fairseq_sinusoidal_table(10, 8, padding_idx=1.5)
    with pytest.raises(ValueError, match="channels"):
        timing_signal(5, 1)
    with pytest.raises(ValueError, match="layout"):
        timing_signal(5, 4, layout="blocks")
    with pytest.raises(ValueError, match="max_timescale"):
        tensor2tensor_frequencies(4, max_timescale=-1.0)
    with pytest.raises(TypeError, match="n_timescales"):
        tensor2tensor_frequencies(2.5)
    with pytest.raises(TypeError, match="tokens"):
        fairseq_positions(np.array([[1.0, 2.0]]), 1)
    with pytest.raises(ValueError, match="tokens"):
        fairseq_positions(np.zeros((2, 2, 2), dtype=int), 1)


def test_chapter2_exercise_numbers():
    pe2 = posenc.sinusoidal_encoding([2], 4)[0]
    np.testing.assert_allclose(pe2, [0.909, -0.416, 0.020, 1.000], atol=5e-4)
    assert list(posenc.layout_permutation(4)) == [0, 2, 1, 3]
    ratio = tensor2tensor_frequencies(256) / posenc.sinusoidal_frequencies(512)
    assert ratio.min() == pytest.approx(10000 ** (-1 / 256), rel=1e-12)
    assert ratio.min() == pytest.approx(0.9647, abs=5e-5)
    assert int(np.argmin(ratio)) == 255


def test_chapter2_scaling_balance():
    """Norm of the encoding for d = 512 and the expected token norms with/without sqrt(d)."""
    d = 512
    assert math.sqrt(d / 2) == 16.0
    rng = np.random.default_rng(0)
    tok = rng.normal(0.0, d**-0.5, size=(2000, d))
    ratio = np.linalg.norm(tok, axis=1).mean() / math.sqrt(d / 2)
    assert ratio == pytest.approx(1 / 16, rel=0.02)
    assert ratio * math.sqrt(d) == pytest.approx(math.sqrt(2), rel=0.02)


def test_chapter2_wrong_exponent_numbers():
    """The norms, rotation error and best-linear-map error quoted in chapter 2."""
    d, n, k = 16, 400, 3
    good, bad = posenc.sinusoidal_encoding(n, d), wrong_exponent(n, d)
    norms = np.linalg.norm(bad, axis=1)
    assert norms.min() == pytest.approx(2.306, abs=1e-3)
    assert norms.max() == pytest.approx(3.363, abs=1e-3)
    m = posenc.relative_rotation(k, d)
    assert np.abs(good[:-k] @ m.T - good[k:]).max() < 1e-12
    assert np.abs(bad[:-k] @ m.T - bad[k:]).max() == pytest.approx(1.625, abs=1e-3)
    fit, *_ = np.linalg.lstsq(bad[:-k], bad[k:], rcond=None)
    residual = bad[:-k] @ fit - bad[k:]
    # least squares minimises the rms error over all matrices: no linear map does better
    assert np.sqrt(np.mean(residual**2)) == pytest.approx(0.2490, abs=1e-3)
    assert np.abs(residual).max() == pytest.approx(1.0936, abs=1e-3)


def test_chapter2_table_of_posenc_calls():
    """Each row of chapter 2's table of library tables, as the chapter states it."""
    n, d = 20, 12
    pos = np.arange(n)
    np.testing.assert_array_equal(tensor2tensor_timing_signal(n, d), timing_signal(pos, d))
    np.testing.assert_array_equal(
        timing_signal(pos, d), timing_signal(pos, d, layout="interleaved")[:, posenc.layout_permutation(d)]
    )
    tokens = np.array([[7, 8, 9, 1], [5, 6, 7, 8]])
    seq = tokens.shape[1]
    looked_up = fairseq_sinusoidal_table(seq + 2, d, padding_idx=1)[fairseq_positions(tokens, 1)]
    np.testing.assert_array_equal(looked_up[1], timing_signal(np.arange(2, seq + 2), d))
    np.testing.assert_array_equal(looked_up[0, 3], 0.0)  # the padding token
