"""Periodicity facts of chapter 3, asserted against ``posenc`` (and ``posenc.analysis``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.analysis import (
    float32_encoding,
    float32_row_error,
    min_distance_by_length,
    min_distance_float32,
    min_pairwise_distance,
    nearest_position,
    offset_distance,
    offset_dot_product,
)


# --- wavelengths ------------------------------------------------------------------------

def test_wavelengths_are_geometric_and_end_below_2pi_10000():
    d = 512
    lam = 2 * np.pi / posenc.sinusoidal_frequencies(d)
    assert lam[0] == pytest.approx(2 * np.pi)
    assert lam[-1] == pytest.approx(2 * np.pi * 10000 ** (510 / 512), rel=1e-13)
    assert 10000 ** (510 / 512) == pytest.approx(9646.6, abs=0.05)
    np.testing.assert_allclose(lam[1:] / lam[:-1], 10000 ** (2 / d), rtol=1e-12)
    assert lam[-1] < 2 * np.pi * 10000


# --- norms, bounds, means ---------------------------------------------------------------

@given(d=st.integers(1, 64).map(lambda x: 2 * x), pos=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=20))
@settings(max_examples=50, deadline=None)
def test_every_encoding_has_norm_sqrt_d_over_2(d, pos):
    pe = posenc.sinusoidal_encoding(np.array(pos), d)
    np.testing.assert_allclose(np.linalg.norm(pe, axis=1), math.sqrt(d / 2), rtol=1e-12)
    assert np.all(np.abs(pe) <= 1.0)


def test_columns_are_not_zero_centred_over_practical_lengths():
    pe = posenc.sinusoidal_encoding(512, 512)
    means = pe.mean(axis=0)
    assert means[1::2].max() > 0.99  # low-frequency cosines sit near 1
    assert means.mean() > 0.25  # the whole table is far from zero mean
    assert np.abs(means[:2]).max() < 0.01  # the fastest pair does average out


# --- dot product and distances depend on the offset only --------------------------------

@given(d=st.integers(1, 32).map(lambda x: 2 * x), p=st.integers(0, 5000), k=st.integers(-3000, 3000))
@settings(max_examples=60, deadline=None)
def test_dot_product_and_distance_depend_on_offset_only(d, p, k):
    a, b = posenc.sinusoidal_encoding(np.array([p, p + k]), d)
    assert a @ b == pytest.approx(offset_dot_product([k], d)[0], abs=1e-9)
    assert np.linalg.norm(b - a) == pytest.approx(offset_distance([k], d)[0], abs=1e-9)


def test_dot_product_is_symmetric_and_not_monotone():
    k = np.arange(-200, 201)
    dots = offset_dot_product(k, 512)
    np.testing.assert_array_equal(dots, dots[::-1])
    assert dots[200] == 256.0
    right = dots[200:]
    assert np.any(np.diff(right) > 0)  # it rises again somewhere: no monotone decay


def test_gram_matrix_is_toeplitz():
    pe = posenc.sinusoidal_encoding(300, 64)
    g = pe @ pe.T
    for k in (1, 17, 250):
        diag = np.diagonal(g, offset=k)
        assert np.ptp(diag) < 1e-10
        assert diag[0] == pytest.approx(offset_dot_product([k], 64)[0], abs=1e-10)


# --- smallest distance between positions ------------------------------------------------

@pytest.mark.parametrize("d", [4, 16, 64])
def test_min_distance_by_length_matches_brute_force(d):
    n = 1500
    assert min_distance_by_length(n, d)[n] == pytest.approx(
        min_pairwise_distance(posenc.sinusoidal_encoding(n, d)), rel=1e-9
    )


def test_min_distance_up_to_100000():
    m512 = min_distance_by_length(100_000, 512)
    assert m512[100_000] == m512[2] == pytest.approx(3.7142704, abs=1e-6)  # adjacent positions
    m4 = min_distance_by_length(100_000, 4)
    assert m4[100_000] < 0.002  # two dimensions pairs: a near-collision at a large offset
    assert int(np.argmin(offset_distance(100_000, 4)[1:])) + 1 == 84823


def test_float32_min_distance_certified_against_brute_force():
    lengths = np.array([10, 300, 1200])
    for d in (8, 64):
        got = min_distance_float32(lengths, d)
        for L, g in zip(lengths, got):
            assert g == pytest.approx(min_pairwise_distance(float32_encoding(int(L), d)), rel=1e-9)


def test_float32_error_grows_with_position_and_collapses_past_2_to_24():
    err = float32_row_error(np.array([10.0, 1e3, 1e5, 1e7]), 512)
    assert np.all(np.diff(err) > 0)
    assert err[-2] < 0.05  # still far below the 3.7 separation at 100,000
    t = float32_encoding(np.array([2.0**24, 2.0**24 + 1]), 512)
    np.testing.assert_array_equal(t[0], t[1])


def test_nearest_position_recovers_clean_positions():
    t = posenc.sinusoidal_encoding(500, 64)
    np.testing.assert_array_equal(nearest_position(t, t), np.arange(500))


def test_bad_arguments():
    with pytest.raises(ValueError, match="d_model"):
        offset_distance(5, 7)
    with pytest.raises(ValueError, match="max_len"):
        min_distance_by_length(1, 8)
    with pytest.raises(ValueError, match="length"):
        min_distance_float32(np.array([1, 5]), 8)
    with pytest.raises(TypeError, match="lengths"):
        min_distance_float32(np.array([2.5]), 8)
    with pytest.raises(ValueError, match="table"):
        min_pairwise_distance(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="share d"):
        nearest_position(np.zeros((2, 3)), np.zeros((4, 5)))


# --- numbers quoted in chapter 3 ---------------------------------------------------------

def test_chapter3_wavelength_numbers():
    lam = 2 * np.pi / posenc.sinusoidal_frequencies(512)
    assert lam[-1] == pytest.approx(60611.5, abs=0.1)
    assert 1 - lam[-1] / (2 * np.pi * 1e4) == pytest.approx(0.0353, abs=5e-4)
    assert lam[1] / lam[0] == pytest.approx(1.0366, abs=5e-5)
    t2t = 2 * np.pi / posenc.tensor2tensor_frequencies(256)
    assert t2t[-1] == pytest.approx(2 * np.pi * 1e4, rel=1e-12)


def test_chapter3_binary_counter():
    assert bin(127 ^ 128).count("1") == 8


def test_chapter3_distance_and_precision_numbers():
    m = {d: min_distance_by_length(100_000, d)[100_000] for d in (4, 64, 512)}
    assert m[512] == pytest.approx(3.7143, abs=1e-4)
    assert m[64] == pytest.approx(1.4718, abs=1e-4)
    assert m[4] == pytest.approx(0.0016, abs=1e-4)
    err = float32_row_error(np.array([1e5, 1e7]), 512)
    assert 1e-3 < err[0] < 0.05 and 0.5 < err[1] < 3.0
    assert 2**24 == 16_777_216


def test_chapter3_column_statistics():
    pe = posenc.sinusoidal_encoding(512, 512)
    means, stds = pe.mean(axis=0), pe.std(axis=0)
    assert pe.mean() == pytest.approx(0.267, abs=1e-3)
    assert np.mean(means[1::2] > 0.9) == pytest.approx(0.29, abs=0.01)
    assert stds.min() < 1e-3 and stds.max() == pytest.approx(0.736, abs=1e-3)
    # exercise 3: closed form of a cosine column's mean
    w, L = posenc.sinusoidal_frequencies(512)[-1], 512
    closed = np.sin(L * w / 2) * np.cos((L - 1) * w / 2) / (L * np.sin(w / 2))
    assert closed == pytest.approx(pe[:, -1].mean(), rel=1e-12)


def test_chapter3_dot_product_numbers():
    dots = offset_dot_product(np.arange(0, 1001), 512)
    rises = int(np.sum(np.diff(dots) > 0))
    assert 100 < rises < 900  # it goes up again at many steps: not monotone
    far = offset_dot_product(np.arange(0, 20_001), 512)
    assert far.min() < 0


def test_chapter3_fade_rms():
    late = posenc.sinusoidal_encoding(np.arange(5000, 5064), 96)
    assert np.sqrt((late**2).mean()) == pytest.approx(1 / math.sqrt(2), rel=1e-12)


def test_chapter3_fast_and_slow_bands():
    """Same experiment and seed as the chapter: fast pairs precise but aliased, slow coarse."""
    d, L, sigma = 64, 2048, 0.4
    rng = np.random.default_rng(0)
    table = posenc.sinusoidal_encoding(L, d)
    true = rng.integers(0, L, 3000)
    errs = []
    for cols in (np.arange(0, 16), np.arange(48, 64)):
        noisy = table[true][:, cols] + rng.normal(0.0, sigma, (true.size, cols.size))
        errs.append(np.abs(nearest_position(noisy, table[:, cols]) - true))
    fast, slow = errs
    assert np.mean(fast == 0) > 0.85 and np.mean(fast > 100) > 0.005 and fast.max() > 1000
    assert np.mean(slow == 0) < 0.02 and 100 < np.median(slow) < 250 and slow.max() < 1200


def test_chapter3_middle_band_exercise():
    """Exercise 4: the middle band at the chapter's noise level is graded, with no far-off errors."""
    d, L, sigma = 64, 2048, 0.4
    rng = np.random.default_rng(0)
    table = posenc.sinusoidal_encoding(L, d)
    true = rng.integers(0, L, 3000)
    cols = np.arange(24, 40)
    noisy = table[true][:, cols] + np.random.default_rng(1).normal(0.0, sigma, (true.size, cols.size))
    err = np.abs(nearest_position(noisy, table[:, cols]) - true)
    assert 0.02 < np.mean(err == 0) < 0.2 and 2 <= np.median(err) <= 20 and err.max() < 100
    lam = 2 * np.pi / posenc.sinusoidal_frequencies(d)[12:20]
    assert lam.max() == pytest.approx(1490.0, abs=1.0)


def test_chapter3_float32_changes_minimum_distance_by_under_half_a_percent():
    for d in (8, 64, 512):
        exact = min_distance_by_length(100_000, d)[100_000]
        single = min_distance_float32(np.array([100_000]), d)[0]
        assert abs(single - exact) / exact < 0.005, d
