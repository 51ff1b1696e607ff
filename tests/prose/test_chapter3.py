"""Periodicity facts of chapter 3, asserted against ``posenc`` (and ``posenc.analysis``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import posenc
from posenc.book.analysis import (
    dirichlet_bound,
    dot_product_log_decay,
    float32_row_error,
    min_distance_by_length,
    min_distance_float32,
    nearest_position,
    offset_distance,
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


def test_chapter3_design_exercise_mechanism_and_sweep():
    """Corrected solution: at 7,100 pair 1 (omega 0.1) nearly completes turns, pair 0 follows
    with ten times the error; the sweep's best is capped by Dirichlet's bound; with the range
    requirement the best base is in the millions; large bases fall to pair 0's value at 44."""
    def turn_error(angle):
        return abs(angle - 2 * np.pi * round(angle / (2 * np.pi)))

    assert turn_error(7100 * 0.1) < 1e-4 and 5e-4 < turn_error(7100.0) < 7e-4
    assert turn_error(710 * 0.1) > 1.0  # at 710 it is pair 0, not pair 1, that nearly repeats
    assert int(np.argmin(offset_distance(10_000, 4, base=100.0)[1:])) + 1 == 7100
    bases = np.logspace(1, 8, 141)
    mins = np.array([min_distance_by_length(10_000, 4, base=b)[10_000] for b in bases])
    bound = dirichlet_bound(10_000, 4)
    assert mins.max() <= bound and 0.05 < mins.max() < 0.065
    reach = bases >= (10_000 / (2 * np.pi)) ** 2
    best_r = bases[reach][np.argmax(mins[reach])]
    assert 1e6 < best_r < 1e7 and 0.025 < mins[reach].max() < 0.04
    assert mins[-1] == pytest.approx(offset_distance([44], 2)[0], rel=0.05)


def test_chapter3_commensurate_widths_at_base_10000():
    """d = 4 and 8 at base 1e4 have integer frequency ratios; nearby bases do several times better."""
    L = 100_000
    for d, at_1e4, others_min in ((4, 0.0017, 0.004), (8, 0.039, 0.13)):
        assert min_distance_by_length(L, d)[L] < at_1e4
        for b in (7000, 9000, 9500, 10500, 12000, 15000, 20000, 30000, 50000):
            assert min_distance_by_length(L, d, base=b)[L] > others_min
    m8 = [min_distance_by_length(L, 8, base=b)[L] for b in np.logspace(3, 6, 31)]
    assert np.median(m8) > 4 * min_distance_by_length(L, 8)[L]


def test_chapter3_dirichlet_bound_explains_separation():
    L = 100_000
    assert min_distance_by_length(L, 2)[L] <= dirichlet_bound(L, 2) < 1.1 * min_distance_by_length(L, 2)[L]
    for d in (4, 8):
        assert min_distance_by_length(L, d)[L] <= dirichlet_bound(L, d)
    # wide encodings: the bound exceeds the distance between neighbours, so it forces nothing
    for d in (64, 512):
        assert dirichlet_bound(L, d) > offset_distance([1], d)[0]


def test_chapter3_dot_product_closed_form_decay():
    """(d/2) ln(b / (e^gamma k)) / ln b against the exact sum, averaged over the ripple."""
    k = np.array([10, 100, 1000, 3000])
    env = dot_product_log_decay(k, 512)
    exact = offset_dot_product(k, 512)
    assert exact[1] == pytest.approx(env[1], abs=1.0)  # offset 100: 112.0 both
    avg = np.array([offset_dot_product(np.arange(int(0.8 * x), int(1.2 * x) + 1), 512).mean() for x in k])
    assert np.abs(avg - env).max() < 2.0
    far = offset_dot_product(np.arange(0, 20_001), 512)
    running = np.convolve(far, np.ones(1001) / 1001, mode="valid")
    zero = int(np.argmax(running < 0)) + 500
    predicted = 1e4 * np.exp(-np.euler_gamma)
    assert predicted == pytest.approx(5615, abs=1) and 0 < zero - predicted < 800


def test_chapter3_noise_sweep_fast_band_decodes_offsets_slow_band_does_not():
    from posenc.book.analysis import band_noise_sweep

    res = band_noise_sweep(64, 2048, {"fast": np.arange(0, 16), "slow": np.arange(48, 64)},
                           np.array([0.05, 0.2, 0.8]), n_samples=2000, seed=1)
    fast, slow = res["fast"], res["slow"]
    assert fast["rel_exact"][1] > 0.95 and fast["abs_exact"][1] > 0.95
    assert slow["rel_exact"].max() < 0.05 and slow["abs_exact"].max() < 0.05
    assert np.all(fast["rel_median"][:2] < slow["rel_median"][:2])
    assert fast["rel_exact"][2] < 0.2  # at high noise the fast band fails too
