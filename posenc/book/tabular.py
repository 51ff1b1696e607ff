"""Data sets, a seeded training loop and baselines for the tabular experiments of chapter 5.

Everything here is small enough to run on a laptop CPU in seconds and deterministic
given its seeds: the synthetic tasks are drawn from ``numpy.random.default_rng(seed)``,
the real data set is scikit-learn's bundled diabetes table (no download), and
:func:`fit_regressor` seeds ``torch`` before it builds a model.

Tables are float64 and every model is trained in float64 (:func:`fit_regressor` casts it
to the data's dtype): the last bits of a matrix product depend on the CPU's vector
kernels, and in float32 a few hundred optimiser steps amplify those differences into
the third decimal of a score; in float64 they stay far below the digits the chapter
prints, so its numbers are the same on every CPU.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .._checks import check_bool, check_choice, check_int, check_positive_float
from ..tabular import (
    ColumnEmbedding,
    FeatureTokenizer,
    PeriodicEmbedding,
    PiecewiseLinearEmbedding,
    SharedValueEmbedding,
    _uniform_,
    quantile_bins,
)
from .models import Block
from .results import to_numpy
from .engine import fit, seeded
from ._validate import (
    as_finite_array,
    check_callable,
    check_key,
    check_module,
    check_names,
    check_real,
    check_rows,
    check_seed,
    check_tensor,
)

__all__ = [
    "HIGH_FREQUENCY_SHAPES",
    "IDENTITY_MODELS",
    "TabularSplit",
    "best_by_validation",
    "bootstrap_r2",
    "TabularTransformer",
    "PeriodicWithValue",
    "nonlinear_share",
    "diabetes_split",
    "feature_identity_task",
    "feature_subset",
    "fit_regressor",
    "initial_model",
    "high_frequency_task",
    "log_uniform_candidates",
    "make_mlp",
    "make_mlp_plr",
    "paired_difference",
    "permutation_gap",
    "r2_score",
    "run_seeds",
    "scores_by_model",
    "sklearn_baselines",
    "tuned_baselines",
    "tuning_report",
    "validation_split",
    "value_embedding_configs",
    "first_losses",
    "identity_model",
    "grid_split",
]


@dataclass
class TabularSplit:
    """A fixed train/test split of a regression table, standardised with training statistics.

    Attributes:
        x_train, x_test: float64 tensors ``(n_train, n_features)``, ``(n_test, n_features)``.
        y_train, y_test: float64 tensors ``(n_train,)``, ``(n_test,)``.
        feature_names: one name per column.
        name: a short description of the data.
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    feature_names: list[str]
    name: str

    def __post_init__(self) -> None:
        for field in ("x_train", "y_train", "x_test", "y_test"):
            if not isinstance(getattr(self, field), torch.Tensor):
                raise TypeError(f"{field} must be a torch.Tensor, got {type(getattr(self, field)).__name__}")
        if self.x_train.ndim != 2:
            raise ValueError(f"x_train must have shape (n_train, n_features), got {tuple(self.x_train.shape)}")
        if self.x_test.ndim != 2 or self.x_test.shape[1] != self.x_train.shape[1]:
            raise ValueError(
                f"x_test must have shape (n_test, {self.x_train.shape[1]}) like x_train, got {tuple(self.x_test.shape)}"
            )
        for y, x in (("y_train", "x_train"), ("y_test", "x_test")):
            if tuple(getattr(self, y).shape) != (getattr(self, x).shape[0],):
                raise ValueError(
                    f"{y} must have shape ({getattr(self, x).shape[0]},), one target per row of {x}, "
                    f"got {tuple(getattr(self, y).shape)}"
                )
        if isinstance(self.feature_names, str) or len(self.feature_names) != self.x_train.shape[1]:
            raise ValueError(
                f"feature_names must name the {self.x_train.shape[1]} columns of x_train, got {self.feature_names!r}"
            )

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])


def check_split(name: str, value: object) -> TabularSplit:
    """``value`` if it is a :class:`TabularSplit`, else a ``TypeError`` naming ``name``."""
    if not isinstance(value, TabularSplit):
        raise TypeError(f"{name} must be a TabularSplit (e.g. from feature_identity_task), got {type(value).__name__}")
    return value


def _standardised_split(x: np.ndarray, y: np.ndarray, n_train: int, names: list[str], name: str) -> TabularSplit:
    x_tr, x_te, y_tr, y_te = x[:n_train], x[n_train:], y[:n_train], y[n_train:]
    mu, sd = x_tr.mean(0), x_tr.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    y_mu, y_sd = y_tr.mean(), y_tr.std()

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.tensor(a, dtype=torch.float64)

    return TabularSplit(
        t((x_tr - mu) / sd), t((y_tr - y_mu) / y_sd), t((x_te - mu) / sd), t((y_te - y_mu) / y_sd), names, name
    )


def feature_identity_task(n_train: int = 1024, n_test: int = 1024, n_features: int = 4, *, seed: int = 0) -> TabularSplit:
    """Synthetic task whose target depends on which feature is which: ``y = x_1 - x_2``.

    The features are independent standard normals (``x_3, x_4, ...`` are distractors).
    For any function ``f`` that is invariant to permuting the columns,
    ``E[y | multiset of values] = 0`` by symmetry, so the best such model predicts 0 and
    has test R^2 = 0 (up to sampling noise), while a model that can identify features can
    reach R^2 = 1.

    Args:
        n_train, n_test: rows in each part.
        n_features: number of columns (at least 2).
        seed: seed of the numpy generator.

    Returns:
        A :class:`TabularSplit` (the features are already standard, so standardising
        changes them only slightly).

    Example:
        >>> data = feature_identity_task(8, 8, seed=0)
        >>> data.x_train.shape, data.y_test.shape
        (torch.Size([8, 4]), torch.Size([8]))
    """
    n_train, n_test = check_int("n_train", n_train, minimum=2), check_int("n_test", n_test, minimum=2)
    n_features = check_int("n_features", n_features, minimum=2)
    rng = np.random.default_rng(check_seed("seed", seed))
    x = rng.standard_normal((n_train + n_test, n_features))
    y = x[:, 0] - x[:, 1]
    names = [f"x{j + 1}" for j in range(n_features)]
    return _standardised_split(x, y, n_train, names, "y = x1 - x2")


HIGH_FREQUENCY_SHAPES = ("sine", "chirp", "step")

#: jump points of the ``"step"`` target: irregular, so the target is not periodic
STEP_EDGES = (-0.8, -0.55, -0.45, -0.1, 0.0, 0.35, 0.45, 0.8)


def high_frequency_task(
    n_train: int = 512,
    n_test: int = 1024,
    n_features: int = 4,
    *,
    frequency: float = 3.0,
    noise: float = 0.05,
    shape: str = "sine",
    seed: int = 0,
) -> TabularSplit:
    """Synthetic regression with high-frequency structure in one feature.

    ``x_j ~ Uniform(-1, 1)`` and ``y = g(x_1) + x_2 + noise``: ``x_2`` enters linearly,
    the other columns are distractors, and ``g`` has fine structure along ``x_1``:

    * ``"sine"``: ``g(x) = sin(2 pi f x)``, periodic, ``2 f`` full cycles over the range;
    * ``"chirp"``: ``g(x) = sin(pi f (x + 1)^2)``, whose local frequency ``f (x + 1)``
      rises from 0 to ``2 f`` cycles per unit: also ``2 f`` cycles, but no single
      frequency describes it;
    * ``"step"``: ``g(x) = +1`` or ``-1``, switching sign at the irregular points
      :data:`STEP_EDGES` (``frequency`` is ignored): jumps, no oscillation at all.

    A network that sees ``x_1`` through a linear map has to build ``g`` out of ReLU
    pieces; a periodic embedding can represent the sine with a single learned frequency,
    and the chirp and the step test whether it helps when no frequency fits.

    Args:
        n_train, n_test: rows in each part.
        n_features: number of columns (at least 2).
        frequency: ``f``, in cycles per unit of ``x_1``.
        noise: standard deviation of the Gaussian noise added to ``y``.
        shape: ``"sine"``, ``"chirp"`` or ``"step"``.
        seed: seed of the numpy generator.

    Example:
        >>> high_frequency_task(16, 16, seed=1).n_features
        4
        >>> high_frequency_task(16, 16, shape="chirp").name
        'y = sin(pi 3 (x1 + 1)^2) + x2'
    """
    n_train, n_test = check_int("n_train", n_train, minimum=2), check_int("n_test", n_test, minimum=2)
    n_features = check_int("n_features", n_features, minimum=2)
    frequency = check_positive_float("frequency", frequency)
    noise = check_real("noise", noise, low=0.0)
    shape = check_choice("shape", shape, HIGH_FREQUENCY_SHAPES)
    rng = np.random.default_rng(check_seed("seed", seed))
    x = rng.uniform(-1.0, 1.0, (n_train + n_test, n_features))
    if shape == "sine":
        g, name = np.sin(2 * np.pi * frequency * x[:, 0]), f"y = sin(2 pi {frequency:g} x1) + x2"
    elif shape == "chirp":
        g, name = np.sin(np.pi * frequency * (x[:, 0] + 1) ** 2), f"y = sin(pi {frequency:g} (x1 + 1)^2) + x2"
    else:
        g, name = 1.0 - 2.0 * (np.searchsorted(STEP_EDGES, x[:, 0]) % 2), "y = step(x1) + x2"
    y = g + x[:, 1] + noise * rng.standard_normal(n_train + n_test)
    names = [f"x{j + 1}" for j in range(n_features)]
    return _standardised_split(x, y, n_train, names, name)


def diabetes_split(test_fraction: float = 0.25, *, seed: int = 0) -> TabularSplit:
    """The diabetes regression table bundled with scikit-learn, split once at random.

    442 patients, 10 baseline variables (age, sex, body-mass index, blood pressure and
    six blood serum measurements) and a measure of disease progression one year later
    (Efron et al. 2004, *Least Angle Regression*, Annals of Statistics 32(2); the file
    ships inside scikit-learn, so nothing is downloaded). The rows are shuffled with
    ``numpy.random.default_rng(seed)`` and the last ``test_fraction`` held out; features
    and target are standardised with the training statistics.

    Example:
        >>> data = diabetes_split()
        >>> data.x_train.shape, data.x_test.shape
        (torch.Size([332, 10]), torch.Size([110, 10]))
    """
    from sklearn.datasets import load_diabetes

    test_fraction = check_real("test_fraction", test_fraction, low=0.0, high=1.0, low_open=True, high_open=True)
    seed = check_seed("seed", seed)
    bunch = load_diabetes(scaled=False)
    x, y = np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target, dtype=np.float64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_train = len(y) - int(round(test_fraction * len(y)))
    if not 2 <= n_train <= len(y) - 2:
        raise ValueError(
            f"test_fraction={test_fraction} leaves {n_train} training and {len(y) - n_train} test rows of {len(y)}; "
            "both parts need at least 2"
        )
    return _standardised_split(x[order], y[order], n_train, list(bunch.feature_names), "diabetes (scikit-learn)")


def r2_score(y_true: object, y_pred: object) -> float:
    """Coefficient of determination ``1 - SSE / SST`` in float64 (1 is perfect, 0 predicts the mean).

    Example:
        >>> r2_score([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
        1.0
    """
    yt = as_finite_array("y_true", y_true, min_size=2).ravel()
    yp = as_finite_array("y_pred", y_pred).ravel()
    if yt.shape != yp.shape:
        raise ValueError(f"y_true and y_pred must have the same length, got {yt.shape} and {yp.shape}")
    sst = float(((yt - yt.mean()) ** 2).sum())
    if sst == 0.0:
        raise ValueError("y_true is constant: R^2 is undefined")
    r2 = 1.0 - float(((yt - yp) ** 2).sum()) / sst
    if not math.isfinite(r2):  # a spread of y_true that underflows against the errors
        raise ValueError(f"R^2 overflows: y_true varies by {sst:.3g} (sum of squares) against errors of y_pred far larger")
    return r2


def make_mlp(n_features: int, d_hidden: int = 64, n_hidden: int = 2) -> nn.Module:
    """A plain ReLU MLP ``(batch, n_features) -> (batch, 1)``, the honest neural baseline.

    Example:
        >>> make_mlp(3)(torch.zeros(2, 3)).shape
        torch.Size([2, 1])
    """
    n_features, d_hidden = check_int("n_features", n_features), check_int("d_hidden", d_hidden)
    layers: list[nn.Module] = []
    d_in = n_features
    for _ in range(check_int("n_hidden", n_hidden)):
        layers += [nn.Linear(d_in, d_hidden), nn.ReLU()]
        d_in = d_hidden
    layers.append(nn.Linear(d_in, 1))
    return nn.Sequential(*layers)


def make_mlp_plr(
    n_features: int,
    d_embedding: int = 8,
    *,
    n_frequencies: int = 8,
    sigma: float = 1.0,
    d_hidden: int = 64,
    n_hidden: int = 2,
) -> nn.Module:
    """An MLP on periodic embeddings ("MLP-PLR" of Gorishniy et al. 2022, section 4).

    Every feature goes through its own :class:`~posenc.PeriodicEmbedding` (``cos``/``sin``
    of learned frequencies, a per-feature linear layer, ReLU); the ``n_features`` embeddings
    are concatenated and fed to :func:`make_mlp`. The paper's main finding is that such
    embeddings help plain MLPs, not only transformers.

    Shapes:
        ``(batch, n_features) -> (batch, 1)``.

    Example:
        >>> make_mlp_plr(3, 4, n_frequencies=2)(torch.zeros(5, 3)).shape
        torch.Size([5, 1])
    """
    n_features, d_embedding = check_int("n_features", n_features), check_int("d_embedding", d_embedding)
    return nn.Sequential(
        PeriodicEmbedding(n_features, d_embedding, n_frequencies=n_frequencies, sigma=sigma),
        nn.Flatten(1),
        make_mlp(n_features * d_embedding, d_hidden, n_hidden),
    )


def _split_validation(data: TabularSplit, validation: int | None) -> tuple[TabularSplit, TabularSplit | None]:
    if validation is None:
        return data, None
    fit_part = validation_split(data, validation)
    return TabularSplit(fit_part.x_train, fit_part.y_train, data.x_test, data.y_test, data.feature_names, data.name), fit_part


def fit_regressor(
    make_model: Callable[[], nn.Module],
    data: TabularSplit,
    *,
    seed: int = 0,
    steps: int = 200,
    lr: float = 3e-3,
    weight_decay: float = 1e-4,
    batch_size: int | None = None,
    validation: int | None = None,
    eval_every: int = 10,
    patience: int | None = None,
    curve: bool = False,
    return_model: bool = False,
) -> dict[str, object] | tuple[dict[str, object], nn.Module]:
    """Build a model under a seeded generator, train it with AdamW on mean-squared error, and score it.

    The model is cast to the dtype of the data (float64 for the book's tables), and
    training is full-batch when ``batch_size`` is None (otherwise minibatches drawn with
    a seeded generator), so given ``seed`` the run is deterministic on a CPU.

    With ``validation=n`` the last ``n`` training rows are held out (as
    :func:`validation_split` does) and the model is trained on the others with early
    stopping: every ``eval_every`` steps its validation R^2 is measured, the best
    parameters so far are kept, training stops after ``patience`` evaluations without
    improvement (never, if ``patience`` is None) or at ``steps``, and the best
    parameters are restored. The test rows are never used to choose anything.

    Args:
        make_model: builds a fresh ``nn.Module`` mapping ``(batch, n_features)`` to
            ``(batch, 1)`` (called after seeding, so its initialisation depends on ``seed``).
        data: the split to train on (``x_train``/``y_train``) and score on.
        seed: seeds the initialisation and the minibatch order.
        steps: optimiser steps (the most, with early stopping).
        lr, weight_decay: AdamW settings.
        batch_size: rows per step, or None for the whole training set.
        validation: training rows held out for early stopping, or None.
        eval_every: steps between validation measurements.
        patience: evaluations without improvement before stopping, or None.
        curve: also return the learning curve (needs ``validation``).
        return_model: also return the trained model (in eval mode).

    Returns:
        ``{"train_r2", "test_r2", "final_loss"}``; with ``validation`` also ``"val_r2"``
        (the best), ``"best_step"`` and ``"stopped_step"``; with ``curve`` also
        ``"curve"``, a dict of equal-length lists ``"step"``, ``"train_r2"``, ``"val_r2"``,
        ``"test_r2"`` (the test column is for plotting only). With ``return_model=True``,
        ``(that dict, model)``.

    Example:
        >>> data = high_frequency_task(64, 32, seed=0)
        >>> scores = fit_regressor(lambda: make_mlp(4), data, steps=30, validation=16, eval_every=5)
        >>> sorted(scores)
        ['best_step', 'final_loss', 'stopped_step', 'test_r2', 'train_r2', 'val_r2']
    """
    check_callable("make_model", make_model)
    data = check_split("data", data)
    seed = check_seed("seed", seed)
    steps = check_int("steps", steps)
    lr = check_real("lr", lr, low=0.0, low_open=True)
    weight_decay = check_real("weight_decay", weight_decay, low=0.0)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size)
    eval_every = check_int("eval_every", eval_every)
    if patience is not None:
        patience = check_int("patience", patience)
    curve, return_model = check_bool("curve", curve), check_bool("return_model", return_model)
    if curve and validation is None:
        raise ValueError("curve=True needs validation=n (the curve is measured on the validation rows)")
    train, val = _split_validation(data, validation)
    model = _build(make_model, train, data, seed)
    out, history = _fit(model, train, val, seed, steps, lr, weight_decay, batch_size, eval_every, patience, curve)
    model.eval()
    with torch.no_grad():
        train_r2 = r2_score(train.y_train, model(train.x_train))
        test_r2 = r2_score(train.y_test, model(train.x_test))
    scores: dict[str, object] = {"train_r2": train_r2, "test_r2": test_r2, "final_loss": out.train_loss[-1]}
    if val is not None:
        scores |= {"val_r2": out.best_value, "best_step": out.best_step, "stopped_step": out.steps_run}
    if curve:
        scores["curve"] = history
    return (scores, model) if return_model else scores


def initial_model(make_model: Callable[[], nn.Module], data: TabularSplit, *, seed: int = 0) -> nn.Module:
    """The model :func:`fit_regressor` starts from for ``seed``: built under the same seed, in the data's dtype.

    Compare it with the trained model to see what training changed (chapter 5 measures how
    far a periodic embedding moved from its initial frequencies).

    Example:
        >>> data = high_frequency_task(16, 8, seed=0)
        >>> start = initial_model(lambda: make_mlp(4), data, seed=3)
        >>> _, trained = fit_regressor(lambda: make_mlp(4), data, seed=3, steps=1, return_model=True)
        >>> bool(torch.equal(start[0].weight, trained[0].weight))
        False
        >>> bool(torch.equal(start[0].weight, initial_model(lambda: make_mlp(4), data, seed=3)[0].weight))
        True
    """
    check_callable("make_model", make_model)
    data = check_split("data", data)
    return _build(make_model, data, data, check_seed("seed", seed)).eval()


def _build(make_model: Callable[[], nn.Module], train: TabularSplit, data: TabularSplit, seed: int) -> nn.Module:
    """The model of ``make_model`` built under :func:`~posenc.book.engine.seeded`, in the data's dtype, its shapes checked."""
    with seeded(seed):
        model = make_model()
    if not isinstance(model, nn.Module):
        raise TypeError(f"make_model must return a torch.nn.Module, got {type(model).__name__}")
    model = model.to(train.x_train.dtype)
    try:
        model.eval()  # a shape check only: no dropout draw, no batch statistics
        with torch.no_grad():
            out_shape = tuple(model(train.x_train[:2]).shape)
    except (RuntimeError, ValueError, TypeError, IndexError) as err:
        raise ValueError(
            f"make_model builds a model that cannot take rows of {data.n_features} features: {err}"
        ) from err
    if out_shape not in ((2,), (2, 1)):
        raise ValueError(f"make_model must build a model mapping (batch, n_features) to (batch, 1), got {out_shape}")
    return model


def _fit(model, train, val, seed, steps, lr, weight_decay, batch_size, eval_every, patience, curve, stop_after=None):
    """Chapter 5's batches, loss and validation R^2 under :func:`~posenc.book.engine.fit`."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    n = train.x_train.shape[0]
    history: dict[str, list] = {"step": [], "train_r2": [], "val_r2": [], "test_r2": []}

    def batches():
        while True:
            if batch_size is None:
                yield train.x_train, train.y_train
            else:
                idx = torch.randint(0, n, (batch_size,), generator=gen)
                yield train.x_train[idx], train.y_train[idx]

    def score(x: torch.Tensor, y: torch.Tensor) -> float:
        with torch.no_grad():
            return r2_score(y, model(x))

    def evaluate(m: nn.Module) -> float:
        val_r2 = score(val.x_test, val.y_test)
        if curve:
            history["train_r2"].append(score(train.x_train, train.y_train))
            history["val_r2"].append(val_r2)
            history["test_r2"].append(score(train.x_test, train.y_test))
        return val_r2

    out = fit(
        model,
        batches(),
        lambda m, batch: nn.functional.mse_loss(m(batch[0]).squeeze(-1), batch[1]),
        optimiser=opt,
        steps=steps,
        evaluate=evaluate if val is not None else None,
        every=eval_every,
        mode="max",
        patience=patience,
        keep_best=True,
        stop_after=stop_after,
    )
    history["step"] = [step for step, _ in out.history] if curve else []
    return out, history


def grid_split(task: str, split: int) -> TabularSplit:
    """Split ``split`` of a task of chapter 5's resampling grid: a random 332/110 split of the diabetes
    table, or a fresh draw of 640 training and 1,024 test rows of a synthetic target (frequency 3).

    Example:
        >>> grid_split("sine", 0).x_train.shape
        torch.Size([640, 4])
    """
    task = check_choice("task", task, ("diabetes", "sine", "chirp", "step"))
    if task == "diabetes":
        return diabetes_split(test_fraction=0.25, seed=split)
    return high_frequency_task(n_train=640, n_test=1024, frequency=3.0, shape=task, seed=split)


#: The four two-block transformers of the feature-identity experiment of chapter 5, by name
#: (the settings of :class:`TabularTransformer` besides its 4 features, width 16, d_ff 32 and
#: 2 layers).
IDENTITY_MODELS = {
    "shared linear, no identity": {"identity": "none"},
    "shared periodic, no identity": {"identity": "none", "value_embedding": "periodic", "n_frequencies": 8, "sigma": 0.5},
    "shared linear + column embedding": {"identity": "column"},
    "FT tokenizer (per-feature W_j, b_j)": {"identity": "per_feature"},
}


def identity_model(name: str) -> Callable[[], nn.Module]:
    """The maker of the feature-identity transformer ``name`` (a key of :data:`IDENTITY_MODELS`).

    Example:
        >>> identity_model("shared linear + column embedding")().identity
        'column'
    """
    kw = {"value_embedding": "linear", **IDENTITY_MODELS[check_choice("name", name, tuple(IDENTITY_MODELS))]}
    return lambda: TabularTransformer(4, d_model=16, d_ff=32, n_layers=2, **kw)


def first_losses(config: dict, seed: int, n: int = 20, *, task: str, model: str, lr: float, **unit) -> list[float]:
    """The first ``n`` training losses of one fit of chapter 5's resampling grid, as it trained them.

    Args:
        config: the grid's ``"config"`` (``steps``, ``eval_every``, ``patience`` and, for
            the diabetes search, ``validation``), as in ``tabular_*.json``.
        seed: the row's ``split`` (the grid seeds every fit with its split).
        n: how many losses.
        task, model, lr: unit keys of a row (``task`` one of ``"diabetes"``, ``"sine"``,
            ``"chirp"``, ``"step"``, ``model`` a name of :func:`value_embedding_configs`;
            or ``"identity"``, ``model`` a name of :data:`IDENTITY_MODELS`);
            optional unit keys ``sigma``, ``n_bins`` (the grid's defaults: 0.1 and 8 for
            diabetes, 1.0 and 16 otherwise), ``stage`` (``"refit"``: no validation rows,
            bins from all training rows) and ``split`` (must equal ``seed``). Other keys
            of a row (scores, ``candidate``, ``curve``) are ignored.

    Example:
        >>> cfg = {"steps": 3000, "eval_every": 25, "patience": 20}
        >>> len(first_losses(cfg, 0, 3, task="sine", model="MLP", lr=0.01))
        3
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    if unit.get("split", seed) != seed:
        raise ValueError(f"split must equal seed={seed} (the grid seeds a fit with its split), got {unit['split']}")
    if task == "identity":  # added by H2 (issue 29): the feature-identity part, one data set, the seed varies
        data = feature_identity_task(n_train=256, n_test=512, seed=0)
        make = identity_model(check_choice("model", model, tuple(IDENTITY_MODELS)))
        net = _build(make, data, data, seed)
        out, _ = _fit(net, data, None, seed, config["steps"], lr, 1e-4, None, 10, None, False,
                      stop_after=check_int("n", n))
        return out.train_loss
    data = grid_split(task, seed)
    diabetes = task == "diabetes"
    sigma = unit.get("sigma") or (0.1 if diabetes else 1.0)
    n_bins = unit.get("n_bins") or (8 if diabetes else 16)
    validation = None if unit.get("stage") == "refit" else (config.get("validation") or int(round(0.2 * data.x_train.shape[0])))
    fit_rows = data if validation is None else validation_split(data, validation)
    makers = value_embedding_configs(fit_rows, sigma=sigma, n_bins=n_bins)
    make = makers[check_choice("model", model, tuple(makers))]
    train, val = _split_validation(data, validation)
    net = _build(make, train, data, seed)
    out, _ = _fit(net, train, val, seed, config["steps"], lr, 1e-4, None, config.get("eval_every", 10),
                  config.get("patience"), False, stop_after=check_int("n", n))
    return out.train_loss


def run_seeds(
    configs: Mapping[str, Callable[[], nn.Module]],
    data: TabularSplit,
    seeds: Iterable[int],
    *,
    metric: str | None = "test_r2",
    keep_models: bool = False,
    **fit_kwargs: object,
) -> dict[str, object] | tuple[dict[str, object], dict[str, list[nn.Module]]]:
    """Train every configuration once per seed and collect a metric over the seeds.

    Returns, per configuration name, an array ``(n_seeds,)`` of ``metric`` (a key of
    :func:`fit_regressor`'s result, by default the test R^2); with ``metric=None``, a dict
    of such arrays for every key (so train and test scores come from the same runs).
    With ``keep_models=True`` it returns ``(results, models)``, where ``models[name]`` is
    the list of trained models, one per seed.

    Example:
        >>> data = feature_identity_task(32, 32)
        >>> out = run_seeds({"mlp": lambda: make_mlp(4)}, data, seeds=[0, 1], steps=5)
        >>> out["mlp"].shape
        (2,)
    """
    if not isinstance(configs, Mapping) or not configs:
        raise TypeError(f"configs must be a non-empty mapping name -> model factory, got {configs!r}")
    for name, make in configs.items():
        check_callable(f"configs[{name!r}]", make)
    data = check_split("data", data)
    seeds = _check_seeds(seeds)
    keys = ["train_r2", "test_r2", "final_loss"]
    if fit_kwargs.get("validation") is not None:
        keys += ["val_r2", "best_step", "stopped_step"]
    if metric is not None:
        check_key("metric", metric, keys)
    out: dict[str, object] = {}
    models: dict[str, list[nn.Module]] = {}
    for name, make in configs.items():
        fitted = [fit_regressor(make, data, seed=s, return_model=True, **fit_kwargs) for s in seeds]
        runs = [scores for scores, _ in fitted]
        models[name] = [model for _, model in fitted]
        table = {key: np.array([r[key] for r in runs]) for key in runs[0] if key != "curve"}
        out[name] = table if metric is None else table[metric]
    return (out, models) if keep_models else out


def _check_seeds(seeds: object) -> list[int]:
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Iterable):
        raise TypeError(f"seeds must be a list of integer seeds, got {seeds!r}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must hold at least one seed, got none")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, (numbers.Integral, np.integer)) or s < 0:
            raise TypeError(f"seeds must be non-negative integers, got {s!r} in {seeds!r}")
    return [int(s) for s in seeds]


RIDGE_ALPHAS = tuple(float(a) for a in np.logspace(-3, 3, 13))


def sklearn_baselines(
    data: TabularSplit, seeds: Iterable[int] = (0,), *, validation: int | None = None, max_trees: int = 500
) -> dict[str, np.ndarray]:
    """Test R^2 of two non-neural baselines on the same split.

    Without ``validation``: ``"ridge"`` is ``sklearn.linear_model.Ridge(alpha=1.0)``
    (deterministic, so every seed gives the same value) and ``"gradient boosting"`` is
    ``sklearn.ensemble.GradientBoostingRegressor(subsample=0.8, random_state=seed)`` with
    its other defaults (100 trees of depth 3).

    With ``validation=n`` they are tuned as the networks of :func:`fit_regressor` are:
    both are fitted on the training rows except the last ``n``, ridge's ``alpha`` is the
    one of :data:`RIDGE_ALPHAS` with the best validation R^2, and boosting grows up to
    ``max_trees`` trees and keeps the number with the best validation R^2 (early
    stopping).

    Example:
        >>> data = high_frequency_task(64, 32, seed=0)
        >>> sorted(sklearn_baselines(data, [0, 1], validation=16, max_trees=20))
        ['gradient boosting', 'ridge']
    """
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import Ridge

    data = check_split("data", data)
    seeds = _check_seeds(seeds)
    max_trees = check_int("max_trees", max_trees)
    train, val = _split_validation(data, validation)
    xtr, ytr = train.x_train.double().numpy(), train.y_train.double().numpy()
    xte, yte = train.x_test.double().numpy(), train.y_test.double().numpy()
    if val is None:
        ridge = r2_score(yte, Ridge(alpha=1.0).fit(xtr, ytr).predict(xte))
        gbdt = [
            r2_score(yte, GradientBoostingRegressor(subsample=0.8, random_state=s).fit(xtr, ytr).predict(xte))
            for s in seeds
        ]
        return {"ridge": np.full(len(seeds), ridge), "gradient boosting": np.array(gbdt)}
    xva, yva = val.x_test.double().numpy(), val.y_test.double().numpy()
    fits = [Ridge(alpha=a).fit(xtr, ytr) for a in RIDGE_ALPHAS]
    best_ridge = max(fits, key=lambda m: r2_score(yva, m.predict(xva)))
    ridge = r2_score(yte, best_ridge.predict(xte))
    gbdt = []
    for s in seeds:
        model = GradientBoostingRegressor(n_estimators=check_int("max_trees", max_trees), subsample=0.8, random_state=s)
        model.fit(xtr, ytr)
        val_scores = [r2_score(yva, p) for p in model.staged_predict(xva)]
        n_trees = int(np.argmax(val_scores))
        gbdt.append(r2_score(yte, list(model.staged_predict(xte))[n_trees]))
    return {"ridge": np.full(len(seeds), ridge), "gradient boosting": np.array(gbdt)}


def log_uniform_candidates(
    space: Mapping[str, tuple[float, float]], n_candidates: int, *, seed: int = 0, integer: Iterable[str] = ()
) -> list[dict[str, float]]:
    """``n_candidates`` settings drawn log-uniformly from ``space``, one Latin-hypercube stratum each.

    Every hyperparameter ``name`` with range ``(low, high)`` is sampled on a log scale:
    the range of ``log(value)`` is cut into ``n_candidates`` equal strata, every stratum
    gets exactly one candidate (at a uniform point inside it), and the strata are paired
    across hyperparameters by independent random permutations. That is random search
    with log-uniform marginals, as in the tuning spaces of Gorishniy et al. (2022), but
    with no two candidates crowding one end of a range: the smallest candidate of every
    hyperparameter lies in the lowest ``1/n_candidates`` of its log-range and the largest
    in the highest. Names in ``integer`` are rounded to the nearest integer.

    Example:
        >>> c = log_uniform_candidates({"lr": (1e-4, 1e-2)}, 4, seed=0)
        >>> len(c), all(1e-4 <= x["lr"] <= 1e-2 for x in c)
        (4, True)
        >>> sorted(int(np.log10(x["lr"]) * 2 + 8) for x in c)   # one per half-decade
        [0, 1, 2, 3]
    """
    n_candidates = check_int("n_candidates", n_candidates)
    integer = set(integer)
    if not isinstance(space, Mapping) or not space:
        raise TypeError(f"space must be a non-empty mapping name -> (low, high), got {space!r}")
    unknown = integer - set(space)
    if unknown:
        raise ValueError(f"integer names {sorted(unknown)} are not in space")
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    columns: dict[str, np.ndarray] = {}
    for name, bounds in space.items():
        if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
            raise ValueError(f"space[{name!r}] must be a pair (low, high), got {bounds!r}")
        low, high = (check_positive_float(f"space[{name!r}] low", bounds[0]),
                     check_positive_float(f"space[{name!r}] high", bounds[1]))
        if not low < high:
            raise ValueError(f"space[{name!r}] must have low < high, got {bounds!r}")
        u = (rng.permutation(n_candidates) + rng.uniform(size=n_candidates)) / n_candidates
        columns[name] = np.exp(np.log(low) + u * (np.log(high) - np.log(low)))
    # four significant digits: a candidate written to a results file reads back exactly
    return [
        {name: (int(round(float(v[i]))) if name in integer else float(f"{v[i]:.4g}")) for name, v in columns.items()}
        for i in range(n_candidates)
    ]


def tuned_baselines(
    data: TabularSplit, *, validation: int, seed: int = 0, max_trees: int = 500, n_knots: int = 5
) -> dict[str, dict[str, float]]:
    """Three non-neural baselines, tuned on a validation part and refitted on all training rows.

    The last ``validation`` training rows choose the setting, then every model is fitted
    again on all training rows with it and scored once on the test rows:

    * ``"ridge"``: ``Ridge(alpha)`` with ``alpha`` from :data:`RIDGE_ALPHAS`;
    * ``"spline ridge"``: an *additive* cubic spline model, ``SplineTransformer(n_knots,
      degree=3)`` on every feature separately (no interactions) followed by ``Ridge(alpha)``,
      ``alpha`` from the same grid: it can bend along each feature, so it shows how much
      fine structure along single features there is to find;
    * ``"gradient boosting"``: ``GradientBoostingRegressor(subsample=0.8,
      random_state=seed)``, the number of trees (up to ``max_trees``) chosen on the
      validation part.

    Returns ``{name: {"val_r2", "test_r2", "alpha" or "n_trees"}}``.

    Example:
        >>> out = tuned_baselines(high_frequency_task(64, 32, seed=0), validation=16, max_trees=20)
        >>> sorted(out), sorted(out["ridge"])
        (['gradient boosting', 'ridge', 'spline ridge'], ['alpha', 'test_r2', 'val_r2'])
    """
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import SplineTransformer

    validation = check_int("validation", validation)
    max_trees, n_knots = check_int("max_trees", max_trees), check_int("n_knots", n_knots, minimum=2)
    seed = check_int("seed", seed, minimum=0)
    train, val = _split_validation(data, validation)
    assert val is not None
    x_fit, y_fit = train.x_train.double().numpy(), train.y_train.double().numpy()
    x_val, y_val = val.x_test.double().numpy(), val.y_test.double().numpy()
    x_all, y_all = data.x_train.double().numpy(), data.y_train.double().numpy()
    x_test, y_test = data.x_test.double().numpy(), data.y_test.double().numpy()
    makers = {
        "ridge": lambda a: Ridge(alpha=a),
        "spline ridge": lambda a: make_pipeline(SplineTransformer(n_knots=n_knots, degree=3), Ridge(alpha=a)),
    }
    out: dict[str, dict[str, float]] = {}
    for name, make in makers.items():
        val_r2 = [r2_score(y_val, make(a).fit(x_fit, y_fit).predict(x_val)) for a in RIDGE_ALPHAS]
        best = int(np.argmax(val_r2))
        model = make(RIDGE_ALPHAS[best]).fit(x_all, y_all)
        out[name] = {"val_r2": val_r2[best], "test_r2": r2_score(y_test, model.predict(x_test)), "alpha": RIDGE_ALPHAS[best]}
    gbdt = GradientBoostingRegressor(n_estimators=max_trees, subsample=0.8, random_state=seed).fit(x_fit, y_fit)
    val_r2 = [r2_score(y_val, p) for p in gbdt.staged_predict(x_val)]
    n_trees = int(np.argmax(val_r2)) + 1
    refit = GradientBoostingRegressor(n_estimators=n_trees, subsample=0.8, random_state=seed).fit(x_all, y_all)
    out["gradient boosting"] = {"val_r2": val_r2[n_trees - 1], "test_r2": r2_score(y_test, refit.predict(x_test)), "n_trees": n_trees}
    return out


def paired_difference(
    a: object, b: object, *, test_fraction: float | None = None, confidence: float = 0.95
) -> dict[str, float]:
    """Mean of the paired differences ``a - b`` over repeated splits, with a t confidence interval.

    ``a[i]`` and ``b[i]`` must be the scores of two methods on the same split ``i``:
    pairing removes what the split does to both (an easy test set lifts every method).
    The ``n`` differences are not independent when the splits are random splits of one
    table (the training sets overlap), and the plain t interval is then too narrow.
    With ``test_fraction`` given, the variance of the mean is inflated from
    ``s^2 / n`` to ``(1 / n + n_test / n_train) s^2``, the "corrected resampled t-test" of
    Nadeau and Bengio (2003, *Inference for the Generalization Error*, Machine
    Learning 52).

    Returns:
        ``{"mean", "low", "high", "n"}``: the mean difference and the interval.

    Example:
        >>> out = paired_difference([0.5, 0.6, 0.7], [0.4, 0.6, 0.5])
        >>> round(out["mean"], 3), out["n"]
        (0.1, 3)
    """
    from scipy import stats

    x, y = as_finite_array("a", a).ravel(), as_finite_array("b", b).ravel()
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same length (one score per split), got {x.shape} and {y.shape}")
    if x.size < 2:
        raise ValueError("a and b need at least two splits")
    confidence = check_real("confidence", confidence, low=0.0, high=1.0, low_open=True, high_open=True)
    diff = x - y
    n = diff.size
    factor = 1.0 / n
    if test_fraction is not None:
        check_real("test_fraction", test_fraction, low=0.0, high=1.0, low_open=True, high_open=True)
        factor += float(test_fraction) / (1.0 - float(test_fraction))
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * math.sqrt(factor * diff.var(ddof=1))
    mean = float(diff.mean())
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": n}


def bootstrap_r2(y_true: object, y_pred: object, *, n_resamples: int = 2000, seed: int = 0) -> np.ndarray:
    """R^2 of fixed predictions on ``n_resamples`` bootstrap resamples of the test rows.

    The spread of the result (its standard deviation is the bootstrap standard error)
    is how much the score of *one* fitted model moves with the particular rows that
    happen to be in the test set; it says nothing about the variation between training
    sets, which repeated splits measure.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> y = rng.standard_normal(200)
        >>> boot = bootstrap_r2(y, y + 0.5 * rng.standard_normal(200), n_resamples=100)
        >>> boot.shape, bool(0.5 < boot.mean() < 0.9)
        ((100,), True)
    """
    yt = as_finite_array("y_true", y_true, min_size=2).ravel()
    yp = as_finite_array("y_pred", y_pred).ravel()
    if yt.shape != yp.shape:
        raise ValueError(f"y_true and y_pred must have the same length, got {yt.shape} and {yp.shape}")
    n_resamples = check_int("n_resamples", n_resamples)
    idx = np.random.default_rng(check_seed("seed", seed)).integers(0, yt.size, (n_resamples, yt.size))
    t, e = yt[idx], yp[idx]
    sst = ((t - t.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    if (sst == 0.0).any():
        raise ValueError(
            f"y_true is constant on {int((sst == 0.0).sum())} of {n_resamples} bootstrap resamples "
            f"({yt.size} rows, {np.unique(yt).size} distinct values): R^2 is undefined there; use more test rows"
        )
    return 1.0 - ((t - e) ** 2).sum(axis=1) / sst


def best_by_validation(rows: Iterable[Mapping[str, object]], *, by: Sequence[str] = ("task", "split", "model")) -> list[dict]:
    """Per group of result rows (one model on one split), the row with the best validation R^2.

    The rows of ``experiments/results/tabular_*.json`` hold one row per setting (for
    example per learning rate); this keeps, for every ``by`` group, the setting a
    practitioner would pick without seeing the test rows. Rows without ``"val_r2"``
    (baselines tuned inside :func:`sklearn_baselines`) are kept as they are.

    Example:
        >>> rows = [{"task": "t", "split": 0, "model": "m", "lr": lr, "val_r2": v, "test_r2": t}
        ...         for lr, v, t in [(0.1, 0.5, 0.2), (0.01, 0.6, 0.1)]]
        >>> best_by_validation(rows)[0]["lr"]
        0.01
    """
    by = check_names("by", by)
    rows = check_rows("rows", rows, by)
    for i, row in enumerate(rows):
        if "val_r2" in row:
            check_real(f"rows[{i}]['val_r2']", row["val_r2"])  # a NaN would never lose a comparison
    best: dict[tuple, dict] = {}
    for row in rows:
        key = tuple(row[f] for f in by)
        if key not in best or float(row.get("val_r2", -math.inf)) > float(best[key].get("val_r2", -math.inf)):
            best[key] = dict(row)
    return list(best.values())


def tuning_report(
    rows: Iterable[Mapping[str, object]], *, task: str = "diabetes", names: Sequence[str] = ("lr", "sigma", "n_bins")
) -> dict[str, dict[str, object]]:
    """How the per-split tuning of a saved run went, per network.

    ``rows`` are the rows of a tuned run (``experiments/tabular_resampling.py diabetes``):
    ``"search"`` rows, one per candidate setting, and ``"refit"`` rows that name the
    ``"chosen"`` candidate. For every network this returns ``"splits"`` and
    ``"best_step"`` (arrays, one entry per split: the step at which the chosen candidate
    was best on the validation part, which is how long the refit trains),
    ``"median_best_step"``, and ``"lowest"``/``"highest"``: for every tuned
    hyperparameter in ``names``, on how many splits the chosen value was the smallest
    (largest) of the candidates tried. A range that brackets the optimum puts few
    choices at its ends. ``"margin"`` (an array, one entry per split) is the chosen
    candidate's validation R^2 minus the best of the other candidates' (present when the
    search rows carry ``"val_r2"``): a margin far below the validation score's standard
    error means the choice is a coin toss, and counts at the ends say nothing.

    Example:
        >>> rows = [{"task": "t", "split": 0, "model": "m", "stage": "search", "candidate": i,
        ...          "lr": lr, "best_step": 10 * (i + 1), "val_r2": 0.4 + 0.1 * i}
        ...         for i, lr in enumerate([1e-3, 1e-2])]
        >>> rows.append({"task": "t", "split": 0, "model": "m", "stage": "refit", "chosen": 1})
        >>> out = tuning_report(rows, task="t")["m"]
        >>> out["median_best_step"], out["lowest"], out["highest"]
        (20.0, {'lr': 0}, {'lr': 1})
        >>> out["margin"].round(3)
        array([0.1])
    """
    rows = [r for r in check_rows("rows", rows) if r.get("task") == task]
    search: dict[tuple, list] = {}
    for r in rows:
        if r.get("stage") == "search":
            search.setdefault((r["split"], r["model"]), []).append(r)
    out: dict[str, dict[str, object]] = {}
    for r in sorted((r for r in rows if r.get("stage") == "refit" and "chosen" in r), key=lambda r: r["split"]):
        candidates = search.get((r["split"], r["model"]), [])
        chosen = [c for c in candidates if c["candidate"] == r["chosen"]]
        if len(chosen) != 1:
            raise ValueError(f"split {r['split']}, model {r['model']!r}: chosen candidate {r['chosen']} not among the search rows")
        report = out.setdefault(
            str(r["model"]), {"splits": [], "best_step": [], "lowest": {}, "highest": {}, "margin": []}
        )
        report["splits"].append(int(r["split"]))
        others = [float(c["val_r2"]) for c in candidates if c is not chosen[0] and "val_r2" in c]
        if others and "val_r2" in chosen[0]:
            report["margin"].append(float(chosen[0]["val_r2"]) - max(others))
        report["best_step"].append(int(chosen[0]["best_step"]))
        for name in names:
            if name in chosen[0]:
                values = [float(c[name]) for c in candidates]
                report["lowest"][name] = report["lowest"].get(name, 0) + int(float(chosen[0][name]) == min(values))
                report["highest"][name] = report["highest"].get(name, 0) + int(float(chosen[0][name]) == max(values))
    if not out:
        raise ValueError(f"no refit rows with a chosen candidate for task {task!r}")
    for report in out.values():
        report["splits"] = np.array(report["splits"])
        report["best_step"] = np.array(report["best_step"])
        report["margin"] = np.array(report["margin"])
        report["median_best_step"] = float(np.median(report["best_step"]))
    return out


def scores_by_model(rows: Iterable[Mapping[str, object]], task: str, *, metric: str = "test_r2") -> dict[str, np.ndarray]:
    """``{model: array of metric over splits}`` for one task, splits in increasing order.

    Every model must have a row for the same splits, so that ``a[i]`` and ``b[i]`` of two
    models are paired (the same split): what :func:`paired_difference` needs.

    Example:
        >>> rows = [{"task": "t", "split": s, "model": m, "test_r2": 0.1 * s} for s in (1, 0) for m in "ab"]
        >>> scores_by_model(rows, "t")["a"]
        array([0. , 0.1])
    """
    rows = check_rows("rows", rows, ("task", "split", "model"))
    table: dict[str, dict[int, float]] = {}
    for i, row in enumerate(rows):
        if row["task"] == task:
            if metric not in row:
                raise ValueError(f"metric={metric!r} is not a field of rows[{i}]; it has {sorted(row)}")
            table.setdefault(str(row["model"]), {})[int(row["split"])] = check_real(f"rows[{i}][{metric!r}]", row[metric])
    if not table:
        raise ValueError(f"no rows for task {task!r}")
    splits = sorted(next(iter(table.values())))
    for model, values in table.items():
        if sorted(values) != splits:
            raise ValueError(f"model {model!r} has splits {sorted(values)}, expected {splits}")
    return {model: np.array([values[s] for s in splits]) for model, values in table.items()}


def permutation_gap(model: nn.Module, x: torch.Tensor, permutation: object) -> float:
    """Largest absolute change of ``model(x)`` when the columns of ``x`` are permuted.

    Zero (up to floating-point rounding) means the model cannot tell the columns apart.

    Example:
        >>> permutation_gap(nn.Identity(), torch.ones(2, 3), [2, 0, 1])
        0.0
    """
    check_module("model", model)
    x = check_tensor("x", x, ndim=2)
    raw = np.asarray(permutation) if not isinstance(permutation, torch.Tensor) else permutation.numpy()
    if raw.dtype.kind not in "iu":
        raise TypeError(f"permutation must be a sequence of column indices (integers), got {permutation!r}")
    perm = torch.as_tensor(raw, dtype=torch.long)
    if perm.ndim != 1 or sorted(perm.tolist()) != list(range(x.shape[-1])):
        raise ValueError(f"permutation must be a permutation of range({x.shape[-1]}), got {perm.tolist()}")
    with torch.no_grad():
        return float((model(x) - model(x[:, perm])).abs().max())


def validation_split(data: TabularSplit, n_validation: int) -> TabularSplit:
    """Hold out the last ``n_validation`` training rows as a validation "test" set.

    Use it to choose hyperparameters without looking at the real test rows. (The rows
    keep the standardisation of ``data``, computed on all its training rows.)

    Example:
        >>> val = validation_split(diabetes_split(), 82)
        >>> val.x_train.shape, val.x_test.shape
        (torch.Size([250, 10]), torch.Size([82, 10]))
    """
    n = check_split("data", data).x_train.shape[0]
    n_validation = check_int("n_validation", n_validation, minimum=2)  # R^2 needs two rows
    if n_validation >= n - 1:
        raise ValueError(f"n_validation must be smaller than the {n} training rows minus one, got {n_validation}")
    k = n - n_validation
    return TabularSplit(
        data.x_train[:k], data.y_train[:k], data.x_train[k:], data.y_train[k:], data.feature_names,
        f"{data.name}, validation",
    )


def feature_subset(data: TabularSplit, columns: Sequence[int]) -> TabularSplit:
    """The same rows and targets with only the given feature columns, in that order.

    A control for distractor features: train a model on the columns the target depends
    on and compare it with the model that also sees the others.

    Example:
        >>> wave = high_frequency_task(n_train=8, n_test=4, seed=0)
        >>> feature_subset(wave, [0, 1]).x_train.shape
        torch.Size([8, 2])
    """
    data = check_split("data", data)
    if isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence) or len(columns) == 0:
        raise TypeError(f"columns must be a non-empty sequence of column indices, got {columns!r}")
    n = data.n_features
    for c in columns:
        if isinstance(c, bool) or not isinstance(c, numbers.Integral):
            raise TypeError(f"columns must hold integers, got {c!r}")
        if not 0 <= c < n:
            raise ValueError(f"columns must lie in 0..{n - 1}, got {c}")
    if len(set(columns)) != len(columns):
        raise ValueError(f"columns must not repeat, got {list(columns)}")
    keep = [int(c) for c in columns]
    return TabularSplit(
        data.x_train[:, keep], data.y_train, data.x_test[:, keep], data.y_test,
        [data.feature_names[c] for c in keep], f"{data.name}, columns {keep}",
    )


def value_embedding_configs(
    data: TabularSplit,
    *,
    sigma: float = 1.0,
    n_frequencies: int = 8,
    n_bins: int = 16,
    d_model: int = 16,
    n_layers: int = 1,
) -> dict[str, Callable[[], nn.Module]]:
    """The models compared in chapter 5: one transformer per value embedding, plus an MLP.

    Every transformer gives each feature its own embedding weights (so identity is
    never the problem) and differs only in how the value enters: ``"linear (FT)"``,
    ``"periodic (PLR)"`` (``sigma``, ``n_frequencies``) and ``"piecewise-linear (Q-L)"``
    (``n_bins`` quantile bins of the training rows). ``"MLP"`` is :func:`make_mlp` on the
    raw values, ``"MLP-PLR"`` is :func:`make_mlp_plr` (the same MLP on periodic
    embeddings with the same ``sigma`` and ``n_frequencies``). ``"periodic + raw value"``
    is the periodic transformer whose tokens also carry the raw value
    (:class:`PeriodicWithValue`: a linear term beside the periodic embedding, at the same
    token width).

    Example:
        >>> sorted(value_embedding_configs(feature_identity_task(32, 8)))[:3]
        ['MLP', 'MLP-PLR', 'linear (FT)']
        >>> len(value_embedding_configs(feature_identity_task(32, 8)))
        6
    """

    nf = check_split("data", data).n_features
    sigma, d_model = check_positive_float("sigma", sigma), check_int("d_model", d_model)
    n_frequencies, n_layers = check_int("n_frequencies", n_frequencies), check_int("n_layers", n_layers)
    bins = quantile_bins(data.x_train, check_int("n_bins", n_bins))
    common = dict(identity="per_feature", d_model=d_model, d_ff=2 * d_model, n_layers=n_layers)

    def transformer(value: str, **kw: object) -> Callable[[], nn.Module]:
        return lambda: TabularTransformer(nf, value_embedding=value, **common, **kw)

    return {
        "linear (FT)": transformer("linear"),
        "periodic (PLR)": transformer("periodic", sigma=sigma, n_frequencies=n_frequencies),
        "piecewise-linear (Q-L)": transformer("piecewise", bins=bins),
        "periodic + raw value": transformer("periodic+value", sigma=sigma, n_frequencies=n_frequencies),
        "MLP": lambda: make_mlp(nf),
        "MLP-PLR": lambda: make_mlp_plr(nf, n_frequencies=n_frequencies, sigma=sigma),
    }


class PeriodicWithValue(nn.Module):
    """A periodic embedding with a linear term beside it: the raw value as the token's last coordinate.

    Token ``j`` is ``[PLR_j(x_j), x_j]``: :class:`~posenc.PeriodicEmbedding` ("PLR", width
    ``d_embedding - 1``) with the value itself appended, so the token has the same width
    ``d_embedding`` as a plain periodic one. The layers above see the value linearly,
    beside its sines and cosines, without having to rebuild a straight line from them
    (the "DenseNet" option of the PBLD embedding of RealMLP, Holzmueller et al. 2024,
    which appends the original value to the periodic embedding in the same way).

    Args:
        n_features: number of numerical columns.
        d_embedding: width of each token (at least 2).
        n_frequencies, sigma, shared: passed to :class:`~posenc.PeriodicEmbedding`.

    Shapes:
        ``forward(x)``: ``(batch, n_features)`` -> ``(batch, n_features, d_embedding)``.

    Example:
        >>> emb = PeriodicWithValue(3, 8, n_frequencies=4)
        >>> x = torch.randn(5, 3)
        >>> out = emb(x)
        >>> out.shape, bool(torch.equal(out[..., -1], x))
        (torch.Size([5, 3, 8]), True)
    """

    def __init__(
        self, n_features: int, d_embedding: int, *, n_frequencies: int = 16, sigma: float = 1.0, shared: bool = False
    ) -> None:
        super().__init__()
        d_embedding = check_int("d_embedding", d_embedding)
        if d_embedding < 2:
            raise ValueError(f"d_embedding must be at least 2 (periodic part and the value), got {d_embedding}")
        self.plr = PeriodicEmbedding(n_features, d_embedding - 1, n_frequencies=n_frequencies, sigma=sigma,
                                     shared=shared)
        self.n_features = self.plr.n_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.plr(x)  # checks x
        return torch.cat([tokens, x[..., None].to(tokens.dtype)], dim=-1)


def nonlinear_share(embedding: nn.Module, x: object) -> np.ndarray:
    """How far a trained value embedding is from affine in its value, per feature, over the rows ``x``.

    For feature ``j`` the embedding maps the column ``x[:, j]`` to vectors ``E_j(x)``
    (``embedding(x)[:, j, :]``). Fit every coordinate by the best affine function
    ``a + b x_j`` (least squares over the rows) and return the share of the embedding's
    variance that this fit leaves unexplained:

        ``share_j = sum_i |E_j(x_i) - a - b x_ij|^2 / sum_i |E_j(x_i) - mean_i E_j(x_i)|^2``

    0 means the embedding is exactly affine in the value over these rows (a linear
    embedding, or any embedding of a column with two distinct values); 1 means no affine
    part at all. A feature whose embedding is constant over the rows (up to rounding) gets NaN.

    Args:
        embedding: a module mapping ``(batch, n_features)`` to ``(batch, n_features, d)``
            (e.g. :class:`~posenc.PeriodicEmbedding`, ``TabularTransformer(...).embed``).
        x: the rows, ``(batch, n_features)``, at least 3.

    Returns:
        ``(n_features,)`` float64 array of shares in ``[0, 1]``.

    Example:
        >>> from posenc import FeatureTokenizer
        >>> x = torch.randn(50, 2, dtype=torch.float64)
        >>> float(nonlinear_share(FeatureTokenizer(2, 4, cls=False).double(), x).max()) < 1e-12
        True
    """
    check_module("embedding", embedding)
    x = check_tensor("x", x, ndim=2)
    if x.shape[0] < 3:
        raise ValueError(f"x must have at least 3 rows (an affine fit needs more rows than 2), got {x.shape[0]}")
    with torch.no_grad():
        out = embedding(x)
    if out.ndim != 3 or tuple(out.shape[:2]) != tuple(x.shape):
        raise ValueError(f"embedding must map (batch, n_features) to (batch, n_features, d), got {tuple(out.shape)}")
    values, tokens = to_numpy(x).astype(np.float64), to_numpy(out).astype(np.float64)
    shares = np.full(values.shape[1], np.nan)
    for j in range(values.shape[1]):
        design = np.stack([np.ones(values.shape[0]), values[:, j]], axis=1)  # (batch, 2)
        e = tokens[:, j, :]  # (batch, d)
        total = float(((e - e.mean(0)) ** 2).sum())
        if total > 1e-12 * float((e**2).sum()):  # below: constant up to rounding
            coef, *_ = np.linalg.lstsq(design, e, rcond=None)
            shares[j] = min(max(float(((e - design @ coef) ** 2).sum()) / total, 0.0), 1.0)
    return shares


# ------------------------------------------------------------------ the chapter-5 model


VALUE_EMBEDDINGS = ("linear", "periodic", "piecewise", "periodic+value")
IDENTITIES = ("none", "column", "per_feature")


class TabularTransformer(nn.Module):
    """The small transformer over feature tokens trained in chapter 5.

    ``x -> value tokens (+ identity) -> [CLS] + tokens -> n_layers pre-norm blocks of
    single-head self-attention and a ReLU feed-forward (:class:`~posenc.book.models.Block`) -> LayerNorm, ReLU, Linear on the
    [CLS] token``. No positional encoding is used: the only way the model can know which
    column a token came from is ``identity``.

    Args:
        n_features: number of numerical columns.
        value_embedding: ``"linear"`` (``x_j w + b``), ``"periodic"``
            (:class:`PeriodicEmbedding`, "PLR"), ``"piecewise"``
            (:class:`PiecewiseLinearEmbedding` on quantile bins, "Q-L"; needs ``bins``)
            or ``"periodic+value"`` (:class:`PeriodicWithValue`: "PLR" of width
            ``d_model - 1`` with the raw value as the last coordinate).
        identity: how feature identity enters. ``"none"``: one value embedding shared by
            all features and nothing else (the model is then exactly invariant to
            permuting the columns); ``"column"``: shared value embedding plus an additive
            :class:`ColumnEmbedding` (TabTransformer/SAINT style); ``"per_feature"``:
            separate embedding weights per feature (for ``"linear"`` this is
            :class:`FeatureTokenizer`, FT-Transformer).
        d_model: token width.
        n_layers: number of transformer blocks.
        d_ff: hidden width of the feed-forward layers.
        d_out: number of outputs.
        n_frequencies, sigma: passed to :class:`PeriodicEmbedding`.
        bins: bin edges for ``"piecewise"`` (e.g. ``quantile_bins(x_train, 16)``). Note
            that per-column quantile bins differ between columns and so already tell the
            columns apart: with ``identity="none"`` the model is permutation-invariant
            only if every column gets the same edges.

    Shapes:
        ``tokens(x)``: ``(batch, n_features)`` -> ``(batch, n_features + 1, d_model)``.
        ``forward(x)``: ``(batch, n_features)`` -> ``(batch, d_out)``.

    Example:
        >>> model = TabularTransformer(4, value_embedding="periodic", identity="per_feature", d_model=8)
        >>> model(torch.randn(3, 4)).shape
        torch.Size([3, 1])
    """

    def __init__(
        self,
        n_features: int,
        *,
        value_embedding: str = "linear",
        identity: str = "per_feature",
        d_model: int = 32,
        n_layers: int = 1,
        d_ff: int = 64,
        d_out: int = 1,
        n_frequencies: int = 16,
        sigma: float = 1.0,
        bins: Sequence[object] | None = None,
    ) -> None:
        super().__init__()
        self.n_features = check_int("n_features", n_features)
        self.value_embedding = check_choice("value_embedding", value_embedding, VALUE_EMBEDDINGS)
        self.identity = check_choice("identity", identity, IDENTITIES)
        d_model = check_int("d_model", d_model)
        shared = self.identity != "per_feature"
        if self.value_embedding == "linear":
            self.embed: nn.Module = (
                SharedValueEmbedding(self.n_features, d_model)
                if shared
                else FeatureTokenizer(self.n_features, d_model, cls=False)
            )
        elif self.value_embedding == "periodic":
            self.embed = PeriodicEmbedding(
                self.n_features, d_model, n_frequencies=n_frequencies, sigma=sigma, shared=shared
            )
        elif self.value_embedding == "periodic+value":
            self.embed = PeriodicWithValue(
                self.n_features, d_model, n_frequencies=n_frequencies, sigma=sigma, shared=shared
            )
        else:
            if bins is None:
                raise ValueError("value_embedding='piecewise' needs bins, e.g. bins=quantile_bins(x_train, 16)")
            self.embed = PiecewiseLinearEmbedding(bins, d_model, shared=shared)
            if self.embed.n_features != self.n_features:
                raise ValueError(f"bins has {self.embed.n_features} features, expected n_features={self.n_features}")
        self.column = ColumnEmbedding(self.n_features, d_model) if self.identity == "column" else None
        self.cls_token = nn.Parameter(_uniform_(torch.empty(d_model), d_model))
        self.blocks = nn.ModuleList(Block(d_model, 1, check_int("d_ff", d_ff), causal=False, activation="relu") for _ in range(check_int("n_layers", n_layers)))
        self.head = nn.Sequential(nn.LayerNorm(d_model), nn.ReLU(), nn.Linear(d_model, check_int("d_out", d_out)))

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        """The input tokens ``[CLS, token_1, ..., token_n]`` before the first block."""
        t = self.embed(x)
        if self.column is not None:
            t = self.column(t)
        cls = self.cls_token.to(t.dtype).expand(t.shape[0], 1, -1)
        return torch.cat([cls, t], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tokens(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h[:, 0])

    def extra_repr(self) -> str:
        return f"n_features={self.n_features}, value_embedding={self.value_embedding!r}, identity={self.identity!r}"
