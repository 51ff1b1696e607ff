"""The measurements of ``posenc.book.analysis`` (chapters 2 and 3): distances, float32
error, the naive candidate encodings, the add-versus-concatenate read-out and the noisy
decoding of bands, checked against brute force and against their definitions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
import posenc.rotary
from posenc.book import probes
from posenc.book.analysis import (
    float32_encoding,
    float32_row_error,
    min_distance_by_length,
    min_distance_float32,
    min_pairwise_distance,
    nearest_position,
    offset_distance,
    offset_dot_product,
)


def test_wavelengths_are_geometric_and_end_below_2pi_10000():
    d = 512
    lam = 2 * np.pi / posenc.sinusoidal_frequencies(d)
    assert lam[0] == pytest.approx(2 * np.pi)
    assert lam[-1] == pytest.approx(2 * np.pi * 10000 ** (510 / 512), rel=1e-13)
    assert 10000 ** (510 / 512) == pytest.approx(9646.6, abs=0.05)
    np.testing.assert_allclose(lam[1:] / lam[:-1], 10000 ** (2 / d), rtol=1e-12)
    assert lam[-1] < 2 * np.pi * 10000


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


def test_attention_score_terms_add_up_and_validate():
    torch.manual_seed(9)
    x, p = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    wq, wk = torch.randn(4, 8, dtype=torch.float64), torch.randn(4, 8, dtype=torch.float64)
    terms = probes.attention_score_terms(x, p, wq, wk)
    full = ((x + p) @ wq.T) @ ((x + p) @ wk.T).T / 2.0
    torch.testing.assert_close(sum(terms.values()), full, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="same shape"):
        probes.attention_score_terms(x, p[:5], wq, wk)
    with pytest.raises(ValueError, match="w_q and w_k"):
        probes.attention_score_terms(x, p, wq, wk[:, :7])
    with pytest.raises(TypeError, match="tokens"):
        probes.attention_score_terms(x.numpy(), p, wq, wk)


def test_identity_projection_keeps_position_terms_relative():
    # with A = I the position-position term is PE(i).PE(j), a function of i - j only
    p = torch.from_numpy(posenc.sinusoidal_encoding(20, 16))
    eye = torch.eye(16, dtype=torch.float64)
    pp = probes.attention_score_terms(torch.zeros_like(p), p, eye, eye)["position-position"]
    for k in range(-18, 19):
        diag = pp.diagonal(k)
        assert float((diag - diag[0]).abs().max()) < 1e-12


# ---------------------------------------------------------------- chapter 2-3 design helpers

from posenc.book import analysis as lab  # noqa: E402


def test_naive_encodings_have_the_documented_shapes_and_values():
    n, d = 10, 4
    assert np.array_equal(lab.naive_encoding("integer", n, d)[:, 0], np.arange(n))
    assert lab.naive_encoding("integer", n, d).shape == (n, d)
    frac = lab.naive_encoding("fraction", n, d)
    assert frac.max() < 1 and frac[5, 0] == 0.5
    # p / n depends on the length: the same position gets another code in a longer sequence
    assert lab.naive_encoding("fraction", 20, d)[5, 0] != frac[5, 0]
    assert np.array_equal(lab.naive_encoding("one_hot", n), np.eye(n))
    binary = lab.naive_encoding("binary", 16, 4)
    assert np.array_equal(binary @ (2 ** np.arange(4)), np.arange(16))


def test_linear_shift_residual_separates_sinusoid_from_binary():
    sin = posenc.sinusoidal_encoding(64, 12)
    assert lab.linear_shift_residual(sin, 1) < 1e-10
    assert lab.linear_shift_residual(sin, 5) < 1e-10
    assert lab.linear_shift_residual(lab.naive_encoding("binary", 64, 6), 1) > 0.1


def test_add_vs_concat_readout_is_exact_for_concatenation_and_improves_with_width():
    small = lab.add_vs_concat_readout(16, n_samples=1000)
    large = lab.add_vs_concat_readout(512, n_samples=1000)
    assert small["concat_token"] == small["concat_position"] == 1.0
    assert large["concat_token"] == large["concat_position"] == 1.0
    assert large["add_token"] > 0.99 and large["add_position"] > small["add_position"] + 0.3
    assert lab.add_vs_concat_readout(64, n_samples=300, seed=3) == lab.add_vs_concat_readout(64, n_samples=300, seed=3)


def test_add_vs_concat_readout_corrupts_both_arms_alike():
    clean = lab.add_vs_concat_readout(64, n_samples=500)
    noisy = lab.add_vs_concat_readout(64, n_samples=500, noise=1.0)
    dropped = lab.add_vs_concat_readout(64, n_samples=500, dropout=0.5)
    for r in (clean, noisy, dropped):
        for arm in ("add", "concat"):
            assert r[f"{arm}_position"] <= r[f"{arm}_position_near"]
            assert 0.0 <= r[f"{arm}_position_far"] <= 1 - r[f"{arm}_position_near"]
    # the concatenation is no longer exact once corrupted
    assert noisy["concat_token"] < 1.0 and noisy["concat_position"] < 1.0
    assert dropped["concat_position"] < 1.0


def test_linear_shift_residual_relative_and_affine():
    integer = lab.naive_encoding("integer", 100, 4)
    fraction = lab.naive_encoding("fraction", 100, 4)
    assert lab.linear_shift_residual(integer, 1, relative=True) == pytest.approx(
        lab.linear_shift_residual(fraction, 1, relative=True), rel=1e-9)
    assert lab.linear_shift_residual(integer, 1, bias=True) < 1e-9
    assert lab.linear_shift_residual(integer, 1) == pytest.approx(100 * lab.linear_shift_residual(fraction, 1))


def test_code_depends_on_length():
    assert lab.code_depends_on_length("fraction", 3, (10, 20))
    for kind in ("integer", "one_hot", "binary", "sinusoidal"):
        assert not lab.code_depends_on_length(kind, 3, (10, 20, 30), max_len=64)


def test_dot_product_log_decay_matches_the_exact_sum_between_its_limits():
    k = np.array([100.0, 300.0, 1000.0])
    exact = lab.offset_dot_product(k, 512)
    assert np.allclose(lab.dot_product_log_decay(k, 512), exact, atol=6.0)
    zero = 10000 * np.exp(-np.euler_gamma)
    assert abs(lab.dot_product_log_decay(zero, 512)) < 1e-9
    assert lab.dot_product_log_decay(1.0, 512) == pytest.approx(256 * (1 - np.euler_gamma / np.log(1e4)))


def test_dirichlet_bound_holds_for_any_base():
    for d, L in ((2, 5000), (4, 5000), (6, 3000)):
        bound = lab.dirichlet_bound(L, d)
        for base in (7.0, 100.0, 1e4, 3.3e5):
            assert lab.min_distance_by_length(L, d, base=base)[L] <= bound + 1e-12


def test_decode_offsets_recovers_exact_offsets_and_ignores_the_start():
    pe = posenc.sinusoidal_encoding(300, 16)
    w = posenc.sinusoidal_frequencies(16)
    p = np.array([0, 17, 100, 5])
    k = np.array([0, 3, 150, 290])
    assert np.array_equal(lab.decode_offsets(pe[p], pe[p + k], w, 300), k)


def test_band_noise_sweep_without_noise_is_exact_and_degrades_with_noise():
    bands = {"fast": np.arange(0, 8), "slow": np.arange(24, 32)}
    res = lab.band_noise_sweep(32, 256, bands, np.array([0.0, 1.0]), n_samples=300)
    for band in bands:
        assert res[band]["abs_exact"][0] == 1.0 and res[band]["rel_exact"][0] == 1.0
        assert res[band]["abs_exact"][1] < 0.9 and res[band]["rel_exact"][1] < 0.9



def test_add_vs_concat_readout_equal_energy_scales_only_the_concatenation():
    plain = lab.add_vs_concat_readout(64, n_samples=500, noise=1.0)
    equal = lab.add_vs_concat_readout(64, n_samples=500, noise=1.0, equal_energy=True)
    # the sum carries about d + d/2, the concatenation d/2 + d/4; sqrt(2) closes the gap
    assert plain["add_energy"] == pytest.approx(96, rel=0.05)
    assert plain["concat_energy"] == pytest.approx(48, rel=0.05)
    assert equal["concat_energy"] == pytest.approx(2 * plain["concat_energy"])
    assert all(equal[k] == plain[k] for k in plain if k.startswith("add_"))  # same draws
    # clean and dropout read-outs are scale-free
    for kw in ({}, {"dropout": 0.2}):
        a = lab.add_vs_concat_readout(32, n_samples=300, **kw)
        b = lab.add_vs_concat_readout(32, n_samples=300, equal_energy=True, **kw)
        assert {k: v for k, v in a.items() if "energy" not in k} == {k: v for k, v in b.items() if "energy" not in k}


def test_offset_distance_with_own_frequencies():
    w = posenc.sinusoidal_frequencies(16)
    k = np.arange(50, dtype=float)
    assert np.array_equal(lab.offset_distance(k, 16, frequencies=w), lab.offset_distance(k, 16))
    # commensurate frequencies 2 pi j / 10 repeat exactly after 10 positions
    w10 = 2 * np.pi * np.arange(1, 4) / 10
    assert lab.offset_distance([10, 20], 6, frequencies=w10).max() < 1e-12
    assert lab.min_distance_by_length(12, 6, frequencies=w10)[12] < 1e-12
    assert lab.min_distance_by_length(10, 6, frequencies=w10)[10] > 0.5


def test_cosine_integral_envelope_and_its_zero():
    k = np.array([100.0, 1000.0])
    assert np.allclose(lab.dot_product_ci_envelope(k, 512), lab.dot_product_log_decay(k, 512), atol=0.5)
    zero = lab.dot_product_ci_zero()
    assert zero == pytest.approx(6166, abs=1)
    assert abs(lab.dot_product_ci_envelope(zero, 512)[0]) < 1e-6
    assert lab.dot_product_ci_zero(base=1e5) == pytest.approx(0.6165 * 1e5, rel=1e-3)


def test_longest_wavelength_and_the_base_that_reaches_a_length():
    assert lab.longest_wavelength(512) == pytest.approx(2 * np.pi * 1e4 ** (510 / 512))
    assert lab.longest_wavelength(8, base=1e5) == pytest.approx(2 * np.pi * 1e5 ** 0.75)
    for d, length in ((4, 1e4), (8, 1e5), (64, 3e3)):
        b = lab.base_for_wavelength(length, d)
        assert lab.longest_wavelength(d, base=b) == pytest.approx(length)


def test_reading_time_splits_core_optional_and_exercises(tmp_path):
    import json

    cells = [
        {"cell_type": "markdown", "source": ["(sec-a)=\n", "## A\n", "one two three\n", ":alt: not read"]},
        {"cell_type": "code", "metadata": {}, "source": ["x = 1\n", "\n", "y = 2"]},
        {"cell_type": "code", "metadata": {"tags": ["hide-input"]}, "source": ["plot()"]},
        {"cell_type": "markdown", "source": ["### B (optional)\n", "four five\n"]},
        {"cell_type": "code", "metadata": {}, "source": ["z = 3"]},
        {"cell_type": "markdown", "source": ["## C\n", "six"]},
        {"cell_type": "markdown", "source": ["## Exercises\n", "seven eight"]},
    ]
    path = tmp_path / "chapter.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    t = lab.reading_time(path)
    assert (t["core"]["words"], t["core"]["code_lines"]) == (6, 2)
    assert (t["optional"]["words"], t["optional"]["code_lines"]) == (4, 1)
    assert t["exercises"]["words"] == 3
    assert t["core"]["minutes"] == pytest.approx(6 / 100 + 2 / 20)

@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: lab.naive_encoding("gray", 4), ValueError, "kind"),
        (lambda: lab.naive_encoding("binary", 0), ValueError, "length"),
        (lambda: lab.linear_shift_residual(np.zeros((4, 2)), 4), ValueError, "offset"),
        (lambda: lab.linear_shift_residual(np.zeros(4), 1), ValueError, "table"),
        (lambda: lab.add_vs_concat_readout(18), ValueError, "d_model"),
        (lambda: lab.add_vs_concat_readout(16.0), TypeError, "d_model"),
        (lambda: lab.add_vs_concat_readout(16, noise=-1.0), ValueError, "noise"),
        (lambda: lab.add_vs_concat_readout(16, dropout=1.0), ValueError, "dropout"),
        (lambda: lab.add_vs_concat_readout(16, noise="a"), TypeError, "noise"),
        (lambda: lab.linear_shift_residual(np.ones((4, 2)), 1, relative=True), ValueError, "relative"),
        (lambda: lab.linear_shift_residual(np.eye(4), 1, bias=1), TypeError, "bias"),
        (lambda: lab.code_depends_on_length("fraction", 30, (20, 100)), ValueError, "position"),
        (lambda: lab.code_depends_on_length("fraction", 3, (20,)), ValueError, "lengths"),
        (lambda: lab.code_depends_on_length("one_hot", 3, (20, 100), max_len=50), ValueError, "max_len"),
        (lambda: lab.dot_product_log_decay(0.0, 8), ValueError, "offsets"),
        (lambda: lab.dot_product_log_decay(5.0, 7), ValueError, "d_model"),
        (lambda: lab.dot_product_log_decay(5.0, 8, base=1.0), ValueError, "base"),
        (lambda: lab.dirichlet_bound(1, 4), ValueError, "max_len"),
        (lambda: lab.add_vs_concat_readout(16, equal_energy=1), TypeError, "equal_energy"),
        (lambda: lab.reading_time(3), TypeError, "notebook"),
        (lambda: lab.reading_time("/nonexistent/chapter.ipynb"), ValueError, "notebook"),
        (lambda: lab.offset_distance(4, 4, frequencies=np.array([1.0, -1.0])), ValueError, "frequencies"),
        (lambda: lab.offset_distance(4, 6, frequencies=np.array([1.0, 0.5])), ValueError, "d_model"),
        (lambda: lab.offset_distance(4, 4, frequencies="ab"), TypeError, "frequencies"),
        (lambda: lab.dot_product_ci_envelope(0.0, 8), ValueError, "offsets"),
        (lambda: lab.dot_product_ci_envelope(5.0, 7), ValueError, "d_model"),
        (lambda: lab.dot_product_ci_zero(base=10.0), ValueError, "base"),
        (lambda: lab.longest_wavelength(7), ValueError, "d_model"),
        (lambda: lab.base_for_wavelength(1e4, 2), ValueError, "d_model"),
        (lambda: lab.base_for_wavelength(-1.0, 8), ValueError, "length"),
        (lambda: lab.dirichlet_bound(10, 5), ValueError, "d_model"),
        (lambda: lab.decode_offsets(np.zeros((2, 4)), np.zeros((2, 2)), np.ones(2), 5), ValueError, "first and second"),
        (lambda: lab.band_noise_sweep(16, 32, {"b": np.array([1, 2])}, np.array([0.1])), ValueError, "whole pairs"),
        (lambda: lab.band_noise_sweep(16, 32, {"b": np.arange(4)}, np.array([-0.1])), ValueError, "sigmas"),
    ],
)
def test_design_helpers_reject_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
