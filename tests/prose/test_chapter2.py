"""Claims of chapter 2 (the sinusoidal formula), asserted against ``posenc``."""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from posenc.book import analysis as lab


def _wrong_exponent(n, d):
    j = np.arange(d)
    angles = np.arange(n)[:, None] / 10000 ** (j / d)
    return np.where(j % 2 == 0, np.sin(angles), np.cos(angles))


def test_design_section_candidates_fail_as_stated():
    n = 512
    assert np.abs(lab.naive_encoding("integer", n, 8)).max() == 511
    assert lab.naive_encoding("fraction", 20, 1)[10, 0] != lab.naive_encoding("fraction", 100, 1)[10, 0]
    assert lab.naive_encoding("one_hot", n).shape[1] == n
    binary = lab.naive_encoding("binary", n, 9)
    steps = np.linalg.norm(np.diff(binary, axis=0), axis=1)
    assert steps.min() == 1.0 and steps.max() == 3.0
    assert lab.linear_shift_residual(binary, 1) > 0.2
    sin = posenc.sinusoidal_encoding(n, 16)
    sin_steps = np.linalg.norm(np.diff(sin, axis=0), axis=1)
    assert np.ptp(sin_steps) < 1e-12 and sin_steps[0] == pytest.approx(1.015, abs=5e-4)
    assert lab.linear_shift_residual(sin, 1) < 1e-10


def test_shift_matrix_stated_up_front():
    pe = posenc.sinusoidal_encoding(200, 16)
    for k in (1, 7, 50):
        m = posenc.relative_rotation(k, 16)
        assert np.abs(pe[:-k] @ m.T - pe[k:]).max() < 1e-12


def test_add_vs_concat_numbers():
    r16 = lab.add_vs_concat_readout(16, n_samples=4000, seed=0)
    r64 = lab.add_vs_concat_readout(64, n_samples=4000, seed=0)
    r512 = lab.add_vs_concat_readout(512, n_samples=4000, seed=0)
    for r in (r16, r64, r512):
        assert r["concat_token"] == r["concat_position"] == 1.0
    assert 0.8 < r16["add_token"] < 0.95 and r512["add_token"] > 0.995
    assert 0.4 < r64["add_position"] < 0.6 and 0.88 < r512["add_position"] < 0.98


def test_wrong_exponent_error_persists_at_d_512():
    bad = _wrong_exponent(400, 512)
    norms = np.linalg.norm(bad, axis=1)
    assert norms.min() < 15.9 and norms.max() > 16.1
    m = posenc.relative_rotation(3, 512)
    assert np.abs(bad[:-3] @ m.T - bad[3:]).max() > 1.0


def test_odd_width_layouts_end_differently():
    inter = posenc.sinusoidal_encoding(4, 5)
    concat = posenc.sinusoidal_encoding(4, 5, layout="concatenated")
    w = posenc.sinusoidal_frequencies(5)
    p = np.arange(4)
    assert np.allclose(inter[:, -1], np.sin(p * w[-1]))  # interleaved: unpaired sine last
    assert np.allclose(concat[:, 2], np.sin(p * w[-1]))  # concatenated: unpaired sine in the middle
    assert np.allclose(concat[:, -1], np.cos(p * w[1]))  # ... and a cosine last


def test_sines_only_code_has_no_linear_shift():
    w = 10000.0 ** (-np.arange(16) / 16)
    sines = np.sin(np.arange(400)[:, None] * w[None, :])
    assert lab.linear_shift_residual(sines, 1) > 0.1
