"""Tests of the tabular embeddings and experiment helpers of chapter 5 (posenc.tabular, posenc.book.tabular)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import (
    ColumnEmbedding,
    FeatureTokenizer,
    PeriodicEmbedding,
    PiecewiseLinearEmbedding,
    PiecewiseLinearEncoding,
    SharedValueEmbedding,
    quantile_bins,
)
from posenc.book.tabular import TabularTransformer

BAD_INPUTS = [
    (torch.randn(4, 5), ValueError, "n_features=3"),  # wrong number of features
    (torch.tensor([[0.0, float("nan"), 1.0]]), ValueError, "NaN"),
    (torch.tensor([[0.0, float("inf"), 1.0]]), ValueError, "NaN or infinite"),
    (torch.randn(2, 3, 1), ValueError, "2-D|n_features=3 columns"),  # PeriodicEmbedding takes (*, n_features)
    (torch.ones(2, 3, dtype=torch.long), TypeError, "floating-point"),
    (np.zeros((2, 3)), TypeError, "torch.Tensor"),
]


def _modules_on_three_features():
    return [
        FeatureTokenizer(3, 4),
        PeriodicEmbedding(3, 4),
        PiecewiseLinearEncoding([[0.0, 1.0]] * 3),
        PiecewiseLinearEmbedding([[0.0, 1.0]] * 3, 4),
        SharedValueEmbedding(3, 4),
        TabularTransformer(3, d_model=8),
    ]


@pytest.mark.parametrize("cls", [True, False])
def test_feature_tokenizer_shape(cls):
    out = FeatureTokenizer(5, 7, cls=cls)(torch.randn(3, 5))
    assert out.shape == (3, 6 if cls else 5, 7)


def test_embedding_shapes():
    x = torch.randn(4, 3)
    assert PeriodicEmbedding(3, 6, n_frequencies=5)(x).shape == (4, 3, 6)
    assert PeriodicEmbedding(3, 6, n_frequencies=5).periodic(x).shape == (4, 3, 10)
    assert PeriodicEmbedding(3, 6, n_frequencies=5, shared=True)(x).shape == (4, 3, 6)
    bins = [[0.0, 1.0], [0.0, 1.0, 2.0, 3.0], [-1.0, 0.0, 1.0]]
    assert PiecewiseLinearEncoding(bins)(x).shape == (4, 3, 3)
    assert PiecewiseLinearEmbedding(bins, 6)(x).shape == (4, 3, 6)
    assert SharedValueEmbedding(3, 6)(x).shape == (4, 3, 6)
    tokens = torch.randn(4, 3, 6)
    assert ColumnEmbedding(3, 6)(tokens).shape == (4, 3, 6)
    assert ColumnEmbedding(3, 2, mode="concat")(tokens).shape == (4, 3, 8)


def test_dtype_is_preserved():
    x = torch.randn(2, 3, dtype=torch.float64)
    assert PeriodicEmbedding(3, 4).double()(x).dtype == torch.float64
    assert PiecewiseLinearEncoding([[0.0, 1.0]] * 3)(x).dtype == torch.float64
    assert FeatureTokenizer(3, 4).double()(x).dtype == torch.float64


def test_feature_tokenizer_matches_rtdl_linear_embeddings():
    rtdl = pytest.importorskip("rtdl_revisiting_models")
    ref = rtdl.LinearEmbeddings(5, 8)
    tok = FeatureTokenizer(5, 8, cls=False)
    with torch.no_grad():
        tok.weight.copy_(ref.weight)
        tok.bias.copy_(ref.bias)
    x = torch.randn(6, 5)
    torch.testing.assert_close(tok(x), ref(x), rtol=0, atol=0)


def test_feature_tokenizer_formula_and_cls_first():
    tok = FeatureTokenizer(3, 4)
    x = torch.randn(2, 3)
    out = tok(x)
    torch.testing.assert_close(out[:, 0], tok.cls_token.expand(2, 4))
    for j in range(3):  # T_j = b_j + x_j W_j (Gorishniy et al. 2021, section 3.3)
        torch.testing.assert_close(out[:, j + 1], tok.bias[j] + x[:, j : j + 1] * tok.weight[j])


def test_periodic_matches_rtdl_periodic_embeddings():
    rne = pytest.importorskip("rtdl_num_embeddings")
    for activation in (True, False):
        ref = rne.PeriodicEmbeddings(4, 6, n_frequencies=5, frequency_init_scale=0.7, activation=activation, lite=False)
        ours = PeriodicEmbedding(4, 6, n_frequencies=5, sigma=0.7, activation=activation)
        with torch.no_grad():
            ours.frequencies.copy_(ref.periodic.weight)
            ours.linear.weight.copy_(ref.linear.weight)
            ours.linear.bias.copy_(ref.linear.bias)
        x = torch.randn(7, 4)
        torch.testing.assert_close(ours.periodic(x), ref.periodic(x))
        torch.testing.assert_close(ours(x), ref(x))


def test_periodic_is_cos_sin_of_two_pi_w_x():
    emb = PeriodicEmbedding(3, 4, n_frequencies=6, sigma=2.0).double()
    x = torch.randn(5, 3, dtype=torch.float64)
    w = emb.frequencies.detach().numpy()
    angles = 2 * np.pi * w[None] * x.numpy()[..., None]
    expected = np.concatenate([np.cos(angles), np.sin(angles)], axis=-1)
    np.testing.assert_allclose(emb.periodic(x).detach().numpy(), expected, rtol=0, atol=1e-12)
    # float32 input: computed in float32, cast back; still within float32 rounding
    p32 = emb.float().periodic(x.float()).detach().double().numpy()
    np.testing.assert_allclose(p32, expected, atol=2e-5)


def test_periodic_frequency_initialisation_scale():
    torch.manual_seed(0)
    emb = PeriodicEmbedding(50, 4, n_frequencies=40, sigma=0.3)
    std = float(emb.frequencies.detach().std())
    assert abs(std - 0.3) < 0.02
    assert abs(float(emb.frequencies.detach().mean())) < 0.02


def test_quantile_bins_match_rtdl_compute_bins():
    rne = pytest.importorskip("rtdl_num_embeddings")
    x = torch.randn(300, 4, dtype=torch.float64)
    x[:, 3] = torch.round(x[:, 3])  # few distinct values: repeated quantiles are dropped
    ours = quantile_bins(x, 10)
    ref = rne.compute_bins(x, n_bins=10)
    for a, b in zip(ours, ref):  # rtdl builds the quantile levels with a float32 linspace
        np.testing.assert_allclose(a, b.numpy(), rtol=0, atol=1e-6)
    assert len(ours[3]) < 11


def test_piecewise_linear_encoding_matches_rtdl():
    rne = pytest.importorskip("rtdl_num_embeddings")
    from rtdl_num_embeddings import _PiecewiseLinearEncodingImpl

    # equal numbers of bins: identical layout
    bins = [torch.tensor([-1.0, 0.0, 0.5, 2.0]), torch.tensor([0.0, 1.0, 2.0, 3.0])]
    x = torch.tensor([[-3.0, 0.5], [0.25, 1.0], [1.0, 2.5], [5.0, -1.0]])
    torch.testing.assert_close(PiecewiseLinearEncoding(bins)(x), rne.PiecewiseLinearEncoding(bins)(x).reshape(4, 2, 3))
    # unequal: rtdl moves each feature's last bin to the end, we pad at the end instead
    bins = [torch.tensor([-1.0, 1.0]), torch.tensor([0.0, 1.0, 2.0, 3.0, 5.0])]
    x = torch.randn(20, 2) * 3
    ours, ref = PiecewiseLinearEncoding(bins)(x), _PiecewiseLinearEncodingImpl(bins)(x)
    for i, b in enumerate(bins):
        t = len(b) - 1
        torch.testing.assert_close(ours[:, i, : t - 1], ref[:, i, : t - 1])
        torch.testing.assert_close(ours[:, i, t - 1], ref[:, i, -1])
        assert (ours[:, i, t:] == 0).all()


def test_piecewise_linear_encoding_paper_example():
    ple = PiecewiseLinearEncoding([[0.0, 1.0, 2.0, 4.0]])
    out = ple(torch.tensor([[-1.0], [0.5], [1.0], [3.0], [6.0]]))[:, 0]
    expected = torch.tensor([[-1.0, 0.0, 0.0], [0.5, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.5], [1.0, 1.0, 2.0]])
    torch.testing.assert_close(out, expected)


@settings(max_examples=40, deadline=None)
@given(
    edges=st.lists(st.floats(-100, 100, allow_nan=False), min_size=2, max_size=8, unique=True),
    x=st.floats(-300, 300, allow_nan=False),
)
def test_piecewise_linear_encoding_reconstructs_the_value(edges, x):
    # x = b_0 + sum_t e_t (b_t - b_{t-1}) for every x, inside or outside the bins
    edges = np.sort(np.array(edges))
    if np.min(np.diff(edges)) < 1e-6:
        return
    e = PiecewiseLinearEncoding([edges]).double()(torch.tensor([[x]], dtype=torch.float64))[0, 0].numpy()
    assert math.isclose(edges[0] + float(e @ np.diff(edges)), x, rel_tol=1e-9, abs_tol=1e-9)
    inner = e[1:-1] if len(e) > 2 else np.array([])
    assert np.all((inner >= 0) & (inner <= 1))
    if edges[0] <= x <= edges[-1]:  # inside the data range: a thermometer in [0, 1]
        assert np.all((e >= 0) & (e <= 1)) and np.all(np.diff(e) <= 1e-12)


@pytest.mark.parametrize("x, error, message", BAD_INPUTS)
def test_bad_input_raises_clear_error(x, error, message):
    for module in _modules_on_three_features():
        with pytest.raises(error, match=message):
            module(x)


def test_one_dimensional_input_is_refused_except_by_the_periodic_embedding():
    for module in _modules_on_three_features():
        if isinstance(module, PeriodicEmbedding):
            assert module(torch.randn(3)).shape == (3, 4)
        else:
            with pytest.raises(ValueError, match="2-D|shape"):
                module(torch.randn(3))


# --- (*, n_features), sync-free checks, meta-device initialisation (issues 14 and 16) ---


@pytest.mark.parametrize("shape", [(6,), (2, 6), (3, 2, 6), (2, 1, 2, 6)])
def test_periodic_accepts_any_leading_dimensions_as_rtdl_does(shape):
    rne = pytest.importorskip("rtdl_num_embeddings")
    x = torch.randn(*shape)
    for lite, shared in ((False, False), (True, None)):
        ref = rne.PeriodicEmbeddings(6, 5, n_frequencies=4, frequency_init_scale=0.3, lite=lite)
        ours = PeriodicEmbedding(6, 5, n_frequencies=4, sigma=0.3)
        with torch.no_grad():
            ours.frequencies.copy_(ref.periodic.weight)
            if lite:  # rtdl's "lite" shares the linear layer only: compare the periodic part
                torch.testing.assert_close(ours.periodic(x), ref.periodic(x), rtol=0, atol=0)
                continue
            ours.linear.weight.copy_(ref.linear.weight)
            ours.linear.bias.copy_(ref.linear.bias)
        assert ours(x).shape == (*shape, 5)
        torch.testing.assert_close(ours.periodic(x), ref.periodic(x), rtol=0, atol=0)
        # rtdl's per-feature linear layer takes exactly one batch dimension: flatten for it
        flat = ref(x.reshape(-1, 6)).reshape(*shape[:-1], 6, 5)
        torch.testing.assert_close(ours(x), flat)
    shared = PeriodicEmbedding(6, 5, shared=True)
    torch.testing.assert_close(shared(x).reshape(-1, 6, 5), shared(x.reshape(-1, 6)))


def test_check_values_controls_the_finiteness_check():
    nan = torch.tensor([[0.0, float("nan"), 1.0]])
    for cls in (FeatureTokenizer, PeriodicEmbedding, SharedValueEmbedding):
        with pytest.raises(ValueError, match="NaN"):
            cls(3, 4)(nan)  # default: checked on the CPU in eager mode
        assert cls(3, 4, check_values=False)(nan).isnan().any()  # never checked
        with pytest.raises(TypeError, match="check_values"):
            cls(3, 4, check_values=1)
    ple = PiecewiseLinearEncoding([[0.0, 1.0]] * 3, check_values=False)
    assert ple(nan).isnan().any()


def test_tabular_embeddings_compile_without_graph_breaks():
    """The default finiteness check is skipped while tracing: no data-dependent branch in the graph."""
    torch._dynamo.reset()
    x = torch.randn(4, 3)
    for module in (FeatureTokenizer(3, 4), PeriodicEmbedding(3, 4, n_frequencies=2), SharedValueEmbedding(3, 4)):
        compiled = torch.compile(module, fullgraph=True, backend="eager")
        torch.testing.assert_close(compiled(x), module(x))


@pytest.mark.parametrize(
    "factory",
    [
        lambda: FeatureTokenizer(3, 4),
        lambda: FeatureTokenizer(3, 4, cls=False, bias=False),
        lambda: PeriodicEmbedding(3, 4, n_frequencies=5, sigma=0.4),
        lambda: PeriodicEmbedding(3, 4, n_frequencies=5, shared=True),
        lambda: PiecewiseLinearEncoding([[0.0, 1.0, 3.0], [-1.0, 1.0]]),
        lambda: PiecewiseLinearEmbedding([[0.0, 1.0, 3.0], [-1.0, 1.0]], 4),
        lambda: SharedValueEmbedding(3, 4),
        lambda: ColumnEmbedding(3, 4, init_std=0.5),
    ],
)
def test_reset_parameters_after_meta_init_equals_a_fresh_module(factory, meta_then_reset):
    fresh, module = meta_then_reset(factory)
    fresh_tensors = (*fresh.parameters(), *fresh.buffers())
    tensors = (*module.parameters(), *module.buffers())
    assert len(tensors) == len(fresh_tensors)
    for a, b in zip(fresh_tensors, tensors):
        assert torch.equal(a, b)


def test_tabular_modules_refuse_other_devices():
    x = torch.zeros(2, 3, device="meta")
    for module in _modules_on_three_features()[:-1]:
        with pytest.raises(ValueError, match="x must be on the module's device"):
            module(x)
    with pytest.raises(ValueError, match="tokens must be on the module's device"):
        ColumnEmbedding(3, 4)(torch.zeros(2, 3, 4, device="meta"))
    with pytest.raises(TypeError, match="tokens must be a floating-point tensor"):
        ColumnEmbedding(3, 4)(torch.zeros(2, 3, 4, dtype=torch.long))


def test_tabular_embeddings_export():
    """torch.export traces the forward: the default finiteness check is not part of the graph."""
    cases = [
        (FeatureTokenizer(3, 4), torch.randn(2, 3)),
        (PeriodicEmbedding(3, 4, n_frequencies=2), torch.randn(5, 2, 3)),
        (PiecewiseLinearEmbedding([[0.0, 1.0, 2.0]] * 3, 4), torch.randn(2, 3)),
        (ColumnEmbedding(3, 4), torch.randn(2, 3, 4)),
    ]
    for module, x in cases:
        exported = torch.export.export(module, (x,))
        torch.testing.assert_close(exported.module()(x), module(x))
