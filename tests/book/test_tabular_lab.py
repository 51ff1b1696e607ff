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
    PiecewiseLinearEncoding,
    quantile_bins,
)
from posenc.book import tabular
from posenc.book import results as res
from posenc.book.tabular import TabularTransformer

VALUE_KINDS = ["linear", "periodic", "piecewise"]


def _bins(n_features: int, n_bins: int = 6, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return quantile_bins(rng.standard_normal((200, n_features)), n_bins)


def _model(n_features: int, kind: str, identity: str, seed: int = 0, dtype=torch.float64) -> TabularTransformer:
    torch.manual_seed(seed)
    bins = None
    if kind == "piecewise":
        # per-column quantile bins differ between columns and would tell them apart; a
        # model meant to be blind to identity must use one set of edges for every column
        bins = _bins(n_features) if identity != "none" else _bins(1) * n_features
    model = TabularTransformer(
        n_features, value_embedding=kind, identity=identity, d_model=8, d_ff=16, n_layers=2, bins=bins
    )
    return model.to(dtype).eval()


@pytest.mark.parametrize("kind", VALUE_KINDS)
@pytest.mark.parametrize("identity", ["none", "column", "per_feature"])
def test_tabular_transformer_shapes(kind, identity):
    model = _model(4, kind, identity, dtype=torch.float32)
    x = torch.randn(5, 4)
    assert model.tokens(x).shape == (5, 5, 8)
    assert model(x).shape == (5, 1)


def test_gradients_flow_to_frequencies():
    emb = PeriodicEmbedding(3, 4, n_frequencies=5)
    emb(torch.randn(8, 3)).pow(2).sum().backward()
    g = emb.frequencies.grad
    assert g is not None and torch.isfinite(g).all() and g.abs().sum() > 0
    model = TabularTransformer(3, value_embedding="periodic", d_model=8)
    model(torch.randn(8, 3)).sum().backward()
    assert model.embed.frequencies.grad.abs().sum() > 0


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(VALUE_KINDS),
    perm=st.permutations(list(range(5))),
    seed=st.integers(0, 2**16),
)
def test_no_identity_model_is_invariant_to_column_permutations(kind, perm, seed):
    model = _model(5, kind, "none", seed=seed % 7)
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(model(x[:, perm]), model(x), rtol=0, atol=1e-12)
        # and the tokens are permuted along with the columns (equivariance)
        torch.testing.assert_close(model.tokens(x[:, perm])[:, 1:], model.tokens(x)[:, 1:][:, perm])


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(VALUE_KINDS),
    identity=st.sampled_from(["column", "per_feature"]),
    perm=st.permutations(list(range(5))),
    seed=st.integers(0, 2**16),
)
def test_identity_embeddings_break_the_invariance(kind, identity, perm, seed):
    if list(perm) == list(range(5)):
        return
    model = _model(5, kind, identity, seed=seed % 7)
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    assert tabular.permutation_gap(model, x, perm) > 1e-6


def test_per_column_bins_leak_feature_identity():
    torch.manual_seed(0)
    model = TabularTransformer(5, value_embedding="piecewise", identity="none", d_model=8, bins=_bins(5)).double()
    x = torch.randn(6, 5, dtype=torch.float64)
    assert tabular.permutation_gap(model, x, [1, 0, 2, 3, 4]) > 1e-6


def test_permutation_gap_float32_is_rounding_only():
    model = _model(4, "linear", "none", dtype=torch.float32)
    x = torch.randn(64, 4)
    assert tabular.permutation_gap(model, x, [3, 1, 0, 2]) < 1e-5


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="sigma"):
        PeriodicEmbedding(3, 4, sigma=0.0)
    with pytest.raises(ValueError, match="n_features"):
        FeatureTokenizer(0, 4)
    with pytest.raises(TypeError, match="d_token"):
        FeatureTokenizer(3, 4.5)
    with pytest.raises(ValueError, match="mode"):
        ColumnEmbedding(3, 4, mode="multiply")
    with pytest.raises(ValueError, match="identity"):
        TabularTransformer(3, identity="positional")
    with pytest.raises(ValueError, match="value_embedding"):
        TabularTransformer(3, value_embedding="fourier")
    with pytest.raises(ValueError, match="needs bins"):
        TabularTransformer(3, value_embedding="piecewise")
    with pytest.raises(ValueError, match="strictly increasing"):
        PiecewiseLinearEncoding([[0.0, 0.0, 1.0]])
    with pytest.raises(ValueError, match="at least two edges"):
        PiecewiseLinearEncoding([[0.0]])
    with pytest.raises(ValueError, match="constant"):
        quantile_bins(np.ones((10, 2)), 3)
    with pytest.raises(ValueError, match="width d_column"):
        ColumnEmbedding(3, 4)(torch.zeros(1, 3, 5))
    with pytest.raises(ValueError, match="permutation"):
        tabular.permutation_gap(torch.nn.Identity(), torch.zeros(1, 3), [0, 0, 1])


def test_feature_identity_task_is_deterministic_and_linear():
    a, b = tabular.feature_identity_task(64, 32, seed=3), tabular.feature_identity_task(64, 32, seed=3)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    # y is an exact linear function of x1 - x2 (after standardisation)
    x = torch.cat([a.x_train, a.x_test]).double()
    y = torch.cat([a.y_train, a.y_test]).double()
    design = torch.stack([x[:, 0], x[:, 1], torch.ones_like(y)], 1)
    coef = torch.linalg.lstsq(design, y[:, None]).solution[:, 0]
    assert float((design @ coef - y).abs().max()) < 1e-5
    assert abs(float(coef[0] + coef[1] * (a.x_train[:, 1].std() / a.x_train[:, 0].std()))) < 0.1


def test_diabetes_split_is_fixed_and_standardised():
    a, b = tabular.diabetes_split(), tabular.diabetes_split()
    assert a.x_train.shape == (332, 10) and a.x_test.shape == (110, 10)
    assert torch.equal(a.x_test, b.x_test)
    assert a.x_train.mean(0).abs().max() < 1e-5
    assert abs(float(a.y_train.mean())) < 1e-5
    assert a.feature_names[2] == "bmi"


def test_r2_and_summarize():
    assert tabular.r2_score([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) == 0.0
    ((name, (mean, std, n)),) = res.summarize({"x": [0.5, 0.7, 0.9]}).items()
    assert name == "x" and math.isclose(mean, 0.7) and math.isclose(std, 0.2) and n == 3
    # one summary rule for the whole book: one run has no spread, missing runs do not count
    assert math.isnan(res.summarize([0.5])[1])
    assert res.summarize([0.5, None, float("nan")])[2] == 1


def test_fit_regressor_is_deterministic():
    data = tabular.feature_identity_task(64, 64)
    make = lambda: TabularTransformer(4, d_model=8, d_ff=16)  # noqa: E731
    r1 = tabular.fit_regressor(make, data, seed=1, steps=20)
    r2 = tabular.fit_regressor(make, data, seed=1, steps=20)
    assert r1 == r2
    r3, model = tabular.fit_regressor(make, data, seed=1, steps=20, return_model=True)
    assert r3 == r1 and isinstance(model, TabularTransformer) and not model.training
    results, models = tabular.run_seeds({"t": make}, data, [1], metric=None, steps=20, keep_models=True)
    assert results["t"]["test_r2"][0] == r1["test_r2"] and len(models["t"]) == 1


def test_tables_are_float64_and_models_follow_them():
    data = tabular.high_frequency_task(32, 16, seed=0)
    assert data.x_train.dtype == torch.float64 and data.y_test.dtype == torch.float64
    _, model = tabular.fit_regressor(lambda: tabular.make_mlp(4), data, steps=2, return_model=True)
    assert next(model.parameters()).dtype == torch.float64


@pytest.mark.parametrize("shape", ["sine", "chirp", "step"])
def test_high_frequency_shapes(shape):
    data = tabular.high_frequency_task(64, 64, shape=shape, noise=0.0, seed=3)
    assert data.n_features == 4 and data.x_train.shape == (64, 4)
    assert torch.isfinite(data.y_train).all()


def test_high_frequency_targets_are_the_documented_functions():
    x1 = np.random.default_rng(5).uniform(-1.0, 1.0, (2048, 4))[:, 0]  # the draws of seed 5
    chirp = tabular.high_frequency_task(1024, 1024, shape="chirp", noise=0.0, seed=5)
    step = tabular.high_frequency_task(1024, 1024, shape="step", noise=0.0, seed=5)
    # the step target takes two values (+-1) plus x2: check the jump pattern through g = y - x2
    x = np.random.default_rng(5).uniform(-1.0, 1.0, (2048, 4))
    g_step = np.where(np.searchsorted(tabular.STEP_EDGES, x1) % 2 == 0, 1.0, -1.0)
    g_chirp = np.sin(np.pi * 3.0 * (x1 + 1) ** 2)
    for data, g in [(chirp, g_chirp), (step, g_step)]:
        y = g + x[:, 1]
        y_std = (y - y[:1024].mean()) / y[:1024].std()
        got = torch.cat([data.y_train, data.y_test]).numpy()
        np.testing.assert_allclose(got, y_std, atol=1e-12)
    with pytest.raises(ValueError, match="shape"):
        tabular.high_frequency_task(8, 8, shape="square")


def test_early_stopping_keeps_the_best_validation_model():
    data = tabular.high_frequency_task(96, 32, seed=0)
    make = lambda: tabular.make_mlp(4, 16)
    fit = dict(seed=0, steps=400, lr=3e-2, validation=24, eval_every=5, patience=4)
    scores = tabular.fit_regressor(make, data, curve=True, **fit)
    curve = scores["curve"]
    assert len({len(v) for v in curve.values()}) == 1
    assert scores["val_r2"] == max(curve["val_r2"])
    assert scores["best_step"] == curve["step"][int(np.argmax(curve["val_r2"]))]
    assert scores["stopped_step"] == curve["step"][-1]
    # stopped by patience: four scores after the best, and before the step budget
    assert scores["stopped_step"] == scores["best_step"] + 4 * 5 < 400
    # the restored model is the best one: its test score is the curve's at the best step
    assert scores["test_r2"] == pytest.approx(curve["test_r2"][int(np.argmax(curve["val_r2"]))], abs=1e-4)
    # deterministic, and run_seeds drops the curve
    assert tabular.fit_regressor(make, data, **fit)["test_r2"] == scores["test_r2"]
    out = tabular.run_seeds({"m": make}, data, [0], metric=None, steps=20, validation=24, curve=True)
    assert "curve" not in out["m"] and out["m"]["val_r2"].shape == (1,)
    with pytest.raises(ValueError, match="validation"):
        tabular.fit_regressor(make, data, steps=5, curve=True)
    with pytest.raises(ValueError, match="n_validation"):
        tabular.fit_regressor(make, data, steps=5, validation=96)


def test_mlp_plr_is_an_mlp_on_periodic_embeddings():
    model = tabular.make_mlp_plr(3, 4, n_frequencies=5, sigma=0.3)
    assert isinstance(model[0], PeriodicEmbedding) and model[0].frequencies.shape == (3, 5)
    assert model(torch.randn(7, 3)).shape == (7, 1)
    configs = tabular.value_embedding_configs(tabular.feature_identity_task(32, 8), sigma=0.2, n_frequencies=3)
    assert configs["MLP-PLR"]()[0].sigma == 0.2


def test_tuned_baselines_use_only_the_validation_rows():
    data = tabular.high_frequency_task(128, 64, seed=1)
    tuned = tabular.sklearn_baselines(data, [0, 1], validation=32, max_trees=30)
    assert tuned["ridge"].shape == (2,) and tuned["ridge"][0] == tuned["ridge"][1]
    # changing the test rows' targets cannot change the choice, only the score
    shuffled = tabular.TabularSplit(data.x_train, data.y_train, data.x_test, data.y_test.flip(0), data.feature_names, "x")
    again = tabular.sklearn_baselines(shuffled, [0], validation=32, max_trees=30)
    assert again["ridge"][0] != tuned["ridge"][0]
    with pytest.raises(ValueError, match="n_validation"):
        tabular.sklearn_baselines(data, [0], validation=200)


def test_paired_difference_interval():
    rng = np.random.default_rng(0)
    b = rng.normal(0.4, 0.1, 20)
    a = b + rng.normal(0.02, 0.01, 20)
    plain = tabular.paired_difference(a, b)
    corrected = tabular.paired_difference(a, b, test_fraction=0.25)
    d = a - b
    from scipy import stats

    half = stats.t.ppf(0.975, 19) * d.std(ddof=1) / math.sqrt(20)
    assert plain["mean"] == pytest.approx(d.mean()) and plain["high"] - plain["mean"] == pytest.approx(half)
    # Nadeau-Bengio: variance factor 1/n + n_test/n_train = 1/20 + 1/3
    ratio = (corrected["high"] - corrected["low"]) / (plain["high"] - plain["low"])
    assert ratio == pytest.approx(math.sqrt((1 / 20 + 1 / 3) / (1 / 20)))
    with pytest.raises(ValueError, match="same length"):
        tabular.paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="test_fraction"):
        tabular.paired_difference(a, b, test_fraction=1.5)


def test_log_uniform_candidates_cover_every_stratum():
    from posenc.book.tabular import log_uniform_candidates

    space = {"lr": (3e-4, 3e-2), "sigma": (0.01, 100.0), "n_bins": (2, 64)}
    cands = log_uniform_candidates(space, 6, seed=3, integer=["n_bins"])
    assert cands == log_uniform_candidates(space, 6, seed=3, integer=["n_bins"])  # seeded
    for name in ("lr", "sigma"):
        low, high = space[name]
        u = sorted((math.log(c[name]) - math.log(low)) / (math.log(high) - math.log(low)) for c in cands)
        # one candidate in each sixth of the log-range (up to the rounding to 4 significant digits)
        assert [int(x * 6 + 1e-6) if x < 1 else 5 for x in u] == [0, 1, 2, 3, 4, 5]
    assert all(isinstance(c["n_bins"], int) and 2 <= c["n_bins"] <= 64 for c in cands)
    with pytest.raises(ValueError, match="low < high"):
        log_uniform_candidates({"lr": (1e-2, 1e-3)}, 4)
    with pytest.raises(ValueError, match="> 0"):
        log_uniform_candidates({"lr": (0.0, 1e-3)}, 4)
    with pytest.raises(ValueError, match="integer"):
        log_uniform_candidates({"lr": (1e-4, 1e-3)}, 4, integer=["bins"])
    with pytest.raises(TypeError, match="space"):
        log_uniform_candidates([("lr", (1e-4, 1e-3))], 4)
    with pytest.raises(ValueError, match="n_candidates"):
        log_uniform_candidates({"lr": (1e-4, 1e-3)}, 0)


def test_tuned_baselines_refit_on_all_training_rows():
    from sklearn.linear_model import Ridge

    from posenc.book.tabular import tuned_baselines

    data = tabular.high_frequency_task(128, 64, frequency=1.0, seed=1)
    out = tuned_baselines(data, validation=32, max_trees=30)
    assert sorted(out) == ["gradient boosting", "ridge", "spline ridge"]
    # the chosen alpha, refitted on all 128 training rows, gives the reported test score
    refit = Ridge(alpha=out["ridge"]["alpha"]).fit(data.x_train.numpy(), data.y_train.numpy())
    assert out["ridge"]["test_r2"] == pytest.approx(tabular.r2_score(data.y_test, refit.predict(data.x_test.numpy())))
    # two periods of a sine along x1: structure along one feature that the additive spline model
    # finds and a linear model cannot (0.92 against 0.49)
    assert out["spline ridge"]["test_r2"] > out["ridge"]["test_r2"] + 0.3
    assert 1 <= out["gradient boosting"]["n_trees"] <= 30
    # test targets never choose anything
    flipped = tabular.TabularSplit(data.x_train, data.y_train, data.x_test, data.y_test.flip(0), data.feature_names, "x")
    again = tuned_baselines(flipped, validation=32, max_trees=30)
    assert all(again[m]["val_r2"] == out[m]["val_r2"] for m in out)
    with pytest.raises(ValueError, match="n_validation"):
        tuned_baselines(data, validation=200)
    with pytest.raises(ValueError, match="n_knots"):
        tuned_baselines(data, validation=32, n_knots=1)


def test_tuning_report_counts_range_ends():
    from posenc.book.tabular import tuning_report

    rows = []
    for split, chosen in [(0, 0), (1, 2)]:
        for i, (lr, sigma) in enumerate([(1e-4, 0.1), (1e-3, 1.0), (1e-2, 10.0)]):
            rows.append({"task": "t", "split": split, "model": "m", "stage": "search", "candidate": i,
                         "lr": lr, "sigma": sigma, "best_step": 10 * (i + 1) + split})
        rows.append({"task": "t", "split": split, "model": "m", "stage": "refit", "chosen": chosen})
    rows.append({"task": "t", "split": 0, "model": "ridge", "stage": "refit", "test_r2": 0.5})  # no candidates
    out = tuning_report(rows, task="t")
    assert list(out) == ["m"]
    assert out["m"]["best_step"].tolist() == [10, 31] and out["m"]["median_best_step"] == 20.5
    assert out["m"]["lowest"] == {"lr": 1, "sigma": 1} and out["m"]["highest"] == {"lr": 1, "sigma": 1}
    with pytest.raises(ValueError, match="chosen candidate 5"):
        tuning_report(rows + [{"task": "t", "split": 2, "model": "m", "stage": "refit", "chosen": 5}], task="t")
    with pytest.raises(ValueError, match="no refit rows"):
        tuning_report(rows, task="other")


def test_feature_subset_keeps_rows_and_targets():
    data = tabular.high_frequency_task(n_train=16, n_test=8, seed=0)
    sub = tabular.feature_subset(data, [1, 0])
    assert torch.equal(sub.x_train, data.x_train[:, [1, 0]])
    assert torch.equal(sub.y_test, data.y_test)
    assert sub.feature_names == [data.feature_names[1], data.feature_names[0]]


@pytest.mark.parametrize(
    "columns, error", [([], TypeError), ("01", TypeError), ([0, 0], ValueError), ([4], ValueError), ([1.0], TypeError)]
)
def test_feature_subset_rejects_bad_columns(columns, error):
    data = tabular.high_frequency_task(n_train=16, n_test=8, seed=0)
    with pytest.raises(error, match="columns"):
        tabular.feature_subset(data, columns)


def test_tuning_report_margin_is_chosen_minus_runner_up():
    rows = [
        {"task": "t", "split": 0, "model": "m", "stage": "search", "candidate": i, "lr": lr, "best_step": 10,
         "val_r2": v}
        for i, (lr, v) in enumerate([(1e-3, 0.5), (1e-2, 0.45), (3e-2, 0.3)])
    ]
    rows.append({"task": "t", "split": 0, "model": "m", "stage": "refit", "chosen": 0})
    assert tabular.tuning_report(rows, task="t")["m"]["margin"] == pytest.approx([0.05])


def test_periodic_with_value_appends_the_raw_value():
    torch.manual_seed(0)
    emb = tabular.PeriodicWithValue(3, 6, n_frequencies=2, sigma=0.5)
    x = torch.randn(4, 3)
    out = emb(x)
    assert out.shape == (4, 3, 6) and torch.equal(out[..., -1], x)
    assert torch.equal(out[..., :-1], emb.plr(x))  # the periodic part is a plain PLR of width 5
    model = TabularTransformer(3, value_embedding="periodic+value", d_model=8, n_frequencies=2)
    assert isinstance(model.embed, tabular.PeriodicWithValue) and model(x).shape == (4, 1)
    configs = tabular.value_embedding_configs(tabular.feature_identity_task(32, 8), sigma=0.2, n_frequencies=3)
    assert configs["periodic + raw value"]().embed.plr.sigma == 0.2
    with pytest.raises(ValueError, match="d_embedding"):
        tabular.PeriodicWithValue(3, 1)
    with pytest.raises(ValueError, match="x"):
        emb(torch.randn(4, 2))


def test_nonlinear_share_is_zero_for_affine_and_large_for_periodic_embeddings():
    x = torch.linspace(-1, 1, 200, dtype=torch.float64)[:, None].repeat(1, 2)
    affine = FeatureTokenizer(2, 4, cls=False).double()
    assert np.all(tabular.nonlinear_share(affine, x) < 1e-12)
    # cos and sin of 2 pi x over [-1, 1] (two full periods): nothing affine in them but the sine's slope
    wave = PeriodicEmbedding(2, 4, n_frequencies=1, activation=False).double()
    with torch.no_grad():
        wave.frequencies.fill_(1.0)
    share = tabular.nonlinear_share(wave, x)
    assert share.shape == (2,) and np.all(share > 0.5) and np.all(share <= 1)
    # a column with two values: any embedding is affine in it
    binary = torch.cat([x[:, :1], (x[:, 1:] > 0).double() * 0.3], dim=1)
    assert tabular.nonlinear_share(wave, binary)[1] < 1e-12
    # a constant column: no variance to explain
    assert np.isnan(tabular.nonlinear_share(affine, torch.ones(5, 2, dtype=torch.float64))).all()


@pytest.mark.parametrize("embedding, x, error, match", [
    ("not a module", torch.zeros(5, 2), TypeError, "embedding"),
    (FeatureTokenizer(2, 4, cls=False), [[0.0, 1.0]], TypeError, "x"),
    (FeatureTokenizer(2, 4, cls=False), torch.zeros(5), ValueError, "x"),
    (FeatureTokenizer(2, 4, cls=False), torch.zeros(2, 2), ValueError, "3 rows"),
    (FeatureTokenizer(2, 4, cls=False), torch.full((5, 2), float("nan")), ValueError, "x"),
    (torch.nn.Linear(2, 3), torch.zeros(5, 2), ValueError, "embedding"),
])
def test_nonlinear_share_rejects_bad_input(embedding, x, error, match):
    with pytest.raises(error, match=match):
        tabular.nonlinear_share(embedding, x)


def test_initial_model_is_where_fit_regressor_starts():
    data = tabular.high_frequency_task(32, 8, seed=0)
    make = tabular.value_embedding_configs(data)["periodic (PLR)"]
    start = tabular.initial_model(make, data, seed=2)
    _, trained = tabular.fit_regressor(make, data, seed=2, steps=0 + 1, lr=1e-12, return_model=True)
    assert start.embed.frequencies.dtype == torch.float64
    assert torch.allclose(start.embed.frequencies, trained.embed.frequencies, atol=1e-9)
    with pytest.raises(TypeError, match="make_model"):
        tabular.initial_model("model", data)
    with pytest.raises(TypeError, match="data"):
        tabular.initial_model(make, "data")
