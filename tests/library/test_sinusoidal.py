"""Core tests of posenc.sinusoidal: the paper's formula, layouts, rotation, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import (
    SinusoidalPositionalEncoding,
    layout_permutation,
    relative_rotation,
    sinusoidal_encoding,
)


def paper_formula(positions, d_model, base=10000.0):
    """Section 3.5 of Vaswani et al. (2017), written out cell by cell in plain Python."""
    table = []
    for pos in positions:
        row = []
        for col in range(d_model):
            i = col // 2
            angle = pos / base ** (2 * i / d_model)
            row.append(math.sin(angle) if col % 2 == 0 else math.cos(angle))
        table.append(row)
    return np.array(table, dtype=np.float64)


@pytest.mark.parametrize("d_model", [1, 2, 3, 4, 7, 16, 96, 512])
def test_matches_paper_formula(d_model):
    positions = [0, 1, 2, 3, 10, 63, 100, 1000, 12345, *range(0, 100_000, 997)]
    got = sinusoidal_encoding(np.array(positions), d_model)
    want = paper_formula(positions, d_model)
    assert got.dtype == np.float64
    assert got.shape == (len(positions), d_model)
    np.testing.assert_array_equal(got, want)  # bit for bit


def test_int_positions_mean_range():
    np.testing.assert_array_equal(sinusoidal_encoding(5, 8), sinusoidal_encoding(np.arange(5), 8))
    assert sinusoidal_encoding(0, 8).shape == (0, 8)


def test_negative_and_fractional_positions():
    pos = np.array([-3.0, -0.5, 0.25, 2.5])
    np.testing.assert_allclose(sinusoidal_encoding(pos, 6), paper_formula(pos, 6), atol=1e-15)
    # sin is odd and cos even: PE(-p) mirrors PE(p).
    pe, pe_neg = sinusoidal_encoding(pos, 6), sinusoidal_encoding(-pos, 6)
    np.testing.assert_allclose(pe[:, 0::2], -pe_neg[:, 0::2], atol=1e-15)
    np.testing.assert_allclose(pe[:, 1::2], pe_neg[:, 1::2], atol=1e-15)


def test_accepts_lists_and_tensors():
    want = sinusoidal_encoding(np.array([0, 4, 9]), 10)
    np.testing.assert_array_equal(sinusoidal_encoding([0, 4, 9], 10), want)
    np.testing.assert_array_equal(sinusoidal_encoding(torch.tensor([0, 4, 9]), 10), want)


def test_first_row_and_bounds():
    pe = sinusoidal_encoding(200, 64)
    np.testing.assert_array_equal(pe[0, 0::2], 0.0)
    np.testing.assert_array_equal(pe[0, 1::2], 1.0)
    assert np.all(np.abs(pe) <= 1.0)
    np.testing.assert_allclose(np.linalg.norm(pe, axis=1), math.sqrt(32), rtol=1e-13)


@pytest.mark.parametrize("d_model", [1, 2, 5, 8, 33, 96])
def test_concatenated_is_a_column_permutation(d_model):
    pos = np.linspace(-50, 500, 37)
    inter = sinusoidal_encoding(pos, d_model)
    concat = sinusoidal_encoding(pos, d_model, layout="concatenated")
    perm = layout_permutation(d_model)
    np.testing.assert_array_equal(concat, inter[:, perm])
    np.testing.assert_array_equal(concat[:, np.argsort(perm)], inter)
    half = (d_model + 1) // 2
    np.testing.assert_array_equal(concat[:, :half], inter[:, 0::2])  # the sines first


def test_odd_d_model_is_documented_behaviour():
    """Odd widths: ceil(d/2) sines, floor(d/2) cosines, the last column an unpaired sine."""
    pe = sinusoidal_encoding(10, 7)
    assert pe.shape == (10, 7)
    np.testing.assert_allclose(pe, paper_formula(range(10), 7), atol=1e-15)
    np.testing.assert_allclose(pe[:, 6], np.sin(np.arange(10) / 10000 ** (6 / 7)), atol=1e-15)
    # the popular slice-assignment implementation crashes on the same input:
    with pytest.raises(ValueError):
        table = np.zeros((10, 7))
        angles = np.arange(10)[:, None] / 10000 ** (np.arange(0, 7, 2) / 7)
        table[:, 0::2] = np.sin(angles)
        table[:, 1::2] = np.cos(angles)  # 4 columns of cos into 3 slots
    with pytest.raises(ValueError, match="d_model must be even"):
        relative_rotation(1, 7)
    module = SinusoidalPositionalEncoding(7, max_len=10)
    assert module(torch.zeros(1, 10, 7)).shape == (1, 10, 7)


@settings(max_examples=200, deadline=None)
@given(
    pos=st.floats(-1e4, 1e4, allow_nan=False),
    offset=st.floats(-1e4, 1e4, allow_nan=False),
    half=st.integers(1, 64),
)
def test_rotation_identity(pos, offset, half):
    d = 2 * half
    m = relative_rotation(offset, d)
    shifted = sinusoidal_encoding(np.array([pos]), d) @ m.T
    np.testing.assert_allclose(shifted, sinusoidal_encoding(np.array([pos + offset]), d), atol=1e-9)


@settings(max_examples=100, deadline=None)
@given(offset=st.floats(-1e3, 1e3, allow_nan=False), half=st.integers(1, 32))
def test_rotation_is_orthogonal_and_composes(offset, half):
    d = 2 * half
    m = relative_rotation(offset, d)
    np.testing.assert_allclose(m @ m.T, np.eye(d), atol=1e-12)
    np.testing.assert_allclose(relative_rotation(-offset, d), m.T, atol=1e-12)
    np.testing.assert_allclose(m @ relative_rotation(1.0, d), relative_rotation(offset + 1.0, d), atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    p=st.integers(0, 20000),
    q=st.integers(0, 20000),
    shift=st.integers(-5000, 5000),
    half=st.integers(1, 128),
)
def test_dot_product_depends_only_on_offset(p, q, shift, half):
    d = 2 * half
    pe = sinusoidal_encoding(np.array([p, q, p + shift, q + shift]), d)
    assert pe[0] @ pe[1] == pytest.approx(pe[2] @ pe[3], abs=1e-9)
    # and it is symmetric: PE(p).PE(q) = PE(q).PE(p) = sum_i cos(w_i (p - q))
    w = posenc.sinusoidal_frequencies(d)
    assert pe[0] @ pe[1] == pytest.approx(np.sum(np.cos(w * (p - q))), abs=1e-9)


def test_module_adds_the_table_with_offset():
    torch.manual_seed(0)
    module = SinusoidalPositionalEncoding(16, max_len=50)
    x = torch.randn(3, 10, 16)
    table = torch.from_numpy(sinusoidal_encoding(50, 16)).float()
    torch.testing.assert_close(module(x), x + table[:10])
    torch.testing.assert_close(module(x, offset=40), x + table[40:50])
    assert "pe" not in module.state_dict()  # non-persistent buffer
    assert module.pe.dtype == torch.float32
    assert module(x.double()).dtype == torch.float64
    assert module(x[0]).shape == (10, 16)


def test_module_dropout_is_applied_in_training_only():
    torch.manual_seed(0)
    module = SinusoidalPositionalEncoding(8, max_len=20, dropout=0.5)
    x = torch.ones(2, 20, 8)
    assert (module(x) == 0).any()
    module.eval()
    assert not (module(x) == 0).any()


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: sinusoidal_encoding(10, 0), ValueError, "d_model"),
        (lambda: sinusoidal_encoding(10, -4), ValueError, "d_model"),
        (lambda: sinusoidal_encoding(10, 4.5), TypeError, "d_model"),
        (lambda: sinusoidal_encoding(10, True), TypeError, "d_model"),
        (lambda: sinusoidal_encoding(-1, 4), ValueError, "positions"),
        (lambda: sinusoidal_encoding(np.zeros((2, 3)), 4), ValueError, "positions"),
        (lambda: sinusoidal_encoding(["a", "b"], 4), TypeError, "positions"),
        (lambda: sinusoidal_encoding([0.0, np.nan], 4), ValueError, "positions"),
        (lambda: sinusoidal_encoding(10, 4, layout="split"), ValueError, "layout"),
        (lambda: sinusoidal_encoding(10, 4, base=0), ValueError, "base"),
        (lambda: relative_rotation("1", 4), TypeError, "offset"),
        (lambda: relative_rotation(1, 0), ValueError, "d_model"),
        (lambda: SinusoidalPositionalEncoding(0), ValueError, "d_model"),
        (lambda: SinusoidalPositionalEncoding(8, max_len=2.5), TypeError, "max_len"),
        (lambda: SinusoidalPositionalEncoding(8, dropout=1.5), ValueError, "dropout"),
        (lambda: SinusoidalPositionalEncoding(8, max_len=4)(torch.zeros(1, 5, 8)), ValueError, "max_len"),
        (lambda: SinusoidalPositionalEncoding(8, max_len=4)(torch.zeros(1, 2, 8), offset=3), ValueError, "max_len"),
        (lambda: SinusoidalPositionalEncoding(8)(torch.zeros(1, 2, 6)), ValueError, "x must have shape"),
        (lambda: SinusoidalPositionalEncoding(8)(np.zeros((1, 2, 8))), TypeError, "x must be"),
        (lambda: SinusoidalPositionalEncoding(8)(torch.zeros(1, 2, 8), offset=-1), ValueError, "offset"),
    ],
)
def test_bad_input_is_rejected_clearly(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("n, d", [(50, 16), (300, 512), (64, 96), (40, 7), (40, 1)])
def test_interleaved_matches_xlm_table_bit_for_bit(n, d):
    """XLM (and DistilBERT) build the paper's interleaved table in float64, stored as float32."""
    xlm = pytest.importorskip("transformers.models.xlm.modeling_xlm")
    out = torch.empty(n, d)
    xlm.create_sinusoidal_embeddings(n, d, out)
    np.testing.assert_array_equal(sinusoidal_encoding(n, d).astype(np.float32), out.numpy())


@pytest.mark.parametrize("n, d", [(50, 16), (300, 512), (64, 96), (40, 7), (40, 1)])
def test_concatenated_matches_marian_table_bit_for_bit(n, d):
    """Marian uses the paper's frequencies laid out [sin | cos] (ceil(d/2) sines for odd d)."""
    marian = pytest.importorskip("transformers.models.marian.modeling_marian")
    weight = marian.MarianSinusoidalPositionalEmbedding(n, d).create_weight().numpy()
    np.testing.assert_array_equal(sinusoidal_encoding(n, d, layout="concatenated").astype(np.float32), weight)


# --- per-example positions, tensor offsets, meta-device initialisation (issue 16) ---


def test_module_positions_equal_gathering_the_table():
    module = SinusoidalPositionalEncoding(8, max_len=20)
    x = torch.randn(2, 5, 8)
    left_padded = torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]])  # two real tokens after padding
    packed = torch.tensor([[0, 1, 2, 0, 1], [0, 1, 0, 1, 2]])  # two documents per row
    for pos in (left_padded, packed, left_padded.to(torch.int32)):
        torch.testing.assert_close(module(x, positions=pos), x + module.pe[pos.long()], rtol=0, atol=0)
    shared = torch.tensor([3, 4, 5, 6, 7])
    torch.testing.assert_close(module(x, positions=shared), module(x, offset=3), rtol=0, atol=0)
    # a tensor offset: one per example, as in a batch of caches of different lengths
    torch.testing.assert_close(module(x, offset=torch.tensor([3, 0])), x + module.pe[torch.tensor([[3, 4, 5, 6, 7], [0, 1, 2, 3, 4]])])
    torch.testing.assert_close(module(x, offset=torch.tensor(3)), module(x, offset=3), rtol=0, atol=0)


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 3),
    seq=st.integers(1, 9),
    max_len=st.integers(9, 30),
    seed=st.integers(0, 2**31 - 1),
)
def test_module_positions_property(batch, seq, max_len, seed):
    gen = torch.Generator().manual_seed(seed)
    module = SinusoidalPositionalEncoding(6, max_len=max_len).double()
    x = torch.randn(batch, seq, 6, generator=gen, dtype=torch.float64)
    pos = torch.randint(0, max_len, (batch, seq), generator=gen)
    table = torch.from_numpy(sinusoidal_encoding(max_len, 6)).float().double()
    assert torch.equal(module(x, positions=pos), x + table[pos])


def test_module_positions_bad_input():
    module = SinusoidalPositionalEncoding(8, max_len=10)
    x = torch.zeros(2, 4, 8)
    cases = [
        (dict(positions=torch.tensor([0.0, 1.0, 2.0, 3.0])), TypeError, "positions must hold integers"),
        (dict(positions=torch.ones(4, dtype=torch.bool)), TypeError, "positions must hold integers"),
        (dict(positions=[0, 1, 2, 3]), TypeError, "positions must be an integer torch.Tensor"),
        (dict(positions=torch.arange(5)), ValueError, r"positions must have shape \(seq,\)"),
        (dict(positions=torch.zeros(3, 4, dtype=torch.long)), ValueError, "positions must have shape"),
        (dict(positions=torch.tensor([0, 1, 2, 10])), ValueError, r"positions must lie in \[0, max_len=10\)"),
        (dict(positions=torch.tensor([-1, 0, 1, 2])), ValueError, r"from -1 to 2"),
        (dict(positions=torch.arange(4, device="meta")), ValueError, "positions must be on x's device"),
        (dict(positions=torch.arange(4), offset=2), ValueError, "either offset or positions"),
        (dict(offset=torch.tensor(0.5)), TypeError, "offset must be an int or an integer tensor"),
        (dict(offset=torch.tensor([1, 2, 3])), ValueError, "a tensor offset must be 0-d, or"),
        (dict(offset=torch.tensor(7)), ValueError, "max_len=10"),
        (dict(offset="1"), TypeError, "offset must be an integer"),
    ]
    for kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            module(x, **kwargs)
    # the range check can be switched off (it reads the data: a host sync on an accelerator)
    unchecked = SinusoidalPositionalEncoding(8, max_len=10, check_values=False)
    assert unchecked(x, positions=torch.tensor([-1, 0, 1, 2])).shape == x.shape  # wraps around, unchecked
    with pytest.raises(TypeError, match="check_values"):
        SinusoidalPositionalEncoding(8, check_values="yes")


@pytest.mark.parametrize("layout", ["interleaved", "concatenated"])
def test_module_reset_parameters_after_meta_init(layout):
    fresh = SinusoidalPositionalEncoding(12, max_len=30, base=500.0, layout=layout)
    with torch.device("meta"):
        module = SinusoidalPositionalEncoding(12, max_len=30, base=500.0, layout=layout)
    assert module.pe.device.type == "meta"
    module.to_empty(device="cpu")
    module.reset_parameters()
    assert torch.equal(module.pe, fresh.pe)
    x = torch.randn(1, 4, 12)
    assert torch.equal(module(x), fresh(x))
    # reset_parameters repairs a table overwritten in place
    module.pe.fill_(1e35)
    module.reset_parameters()
    assert torch.equal(module.pe, fresh.pe)


def test_huge_tables_are_refused_before_allocating():
    for call in (
        lambda: sinusoidal_encoding(10**9, 512),
        lambda: sinusoidal_encoding(np.zeros(3), 10**12),
        lambda: posenc.sinusoidal_frequencies(10**12),
        lambda: relative_rotation(1, 2**16),
        lambda: SinusoidalPositionalEncoding(4096, max_len=10**6),
    ):
        with pytest.raises(ValueError, match="limit of 268435456"):
            call()
    assert posenc.sinusoidal_frequencies(2**20).shape == (2**19,)  # large but under the limit
