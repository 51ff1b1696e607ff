"""Periodicity facts of chapter 3, asserted against ``posenc`` (and ``posenc.analysis``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import posenc
from posenc.book.analysis import (
    float32_row_error,
    min_distance_by_length,
    min_distance_float32,
    nearest_position,
    offset_dot_product,
)


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


def test_chapter3_one_pair_is_distinct_but_not_well_separated():
    # pair 0 alone (d = 2): positions 0 and 710 are distinct but only ~6e-5 apart
    m = min_distance_by_length(100_000, 2)[100_000]
    assert 5e-5 < m < 7e-5
    from posenc.book.analysis import offset_distance

    assert int(np.argmin(offset_distance(100_000, 2)[1:])) + 1 == 710


def test_chapter3_design_exercise_base_100_is_the_worst():
    m = {b: min_distance_by_length(10_000, 4, base=b)[10_000] for b in (10.0, 100.0, 1e4, 1e6)}
    assert m[100.0] < 0.01 < min(m[10.0], m[1e4], m[1e6])


def test_chapter3_noise_sweep_fast_band_decodes_offsets_slow_band_does_not():
    from posenc.book.analysis import band_noise_sweep

    res = band_noise_sweep(64, 2048, {"fast": np.arange(0, 16), "slow": np.arange(48, 64)},
                           np.array([0.05, 0.2, 0.8]), n_samples=2000, seed=1)
    fast, slow = res["fast"], res["slow"]
    assert fast["rel_exact"][1] > 0.95 and fast["abs_exact"][1] > 0.95
    assert slow["rel_exact"].max() < 0.05 and slow["abs_exact"].max() < 0.05
    assert np.all(fast["rel_median"][:2] < slow["rel_median"][:2])
    assert fast["rel_exact"][2] < 0.2  # at high noise the fast band fails too
