"""Embeddings for transformers over the columns of a table (chapter 5).

A row of a table with ``n_features`` numerical columns becomes ``n_features`` tokens. Two
different things have to be put into each token:

* the feature's **value** (a number), embedded linearly (FT-Transformer), with periodic
  functions of learned frequencies (Gorishniy et al. 2022, section 3.3) or with a
  piecewise-linear encoding (same paper, section 3.2);
* the feature's **identity** (which column the number came from), either as a learned
  column vector added to or concatenated with the token (TabTransformer, SAINT) or
  implicitly, by giving every feature its own embedding weights (FT-Transformer's
  feature tokenizer).

Self-attention has no notion of token order, so without the second ingredient the model
treats a row as an unordered set of numbers. :class:`TabularTransformer` lets a chapter
switch each ingredient on and off.

Every module takes a floating tensor ``x`` of shape ``(batch, n_features)`` (the periodic
embedding, like ``rtdl_num_embeddings``, any ``(*, n_features)``) and checks it: wrong
rank, wrong number of columns, non-floating dtype, another device than the module's, and
NaN or infinite values raise a ``ValueError`` or ``TypeError`` that says what was
expected. The finiteness check reads the data, which on an accelerator is a host-device
synchronisation and under ``torch.compile`` a graph break, so it is controlled by each
module's ``check_values``: ``None`` (default) checks on the CPU outside ``torch.compile``,
``True`` always, ``False`` never. ``reset_parameters()`` re-initialises every module (after a
meta-device initialisation and ``to_empty``) with the same random draws, in the same order,
as its constructor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from ._checks import (
    MAX_PARAMETER_ELEMENTS,
    MAX_TABLE_ELEMENTS,
    check_bool,
    check_choice,
    check_int,
    check_optional_bool,
    check_positive_float,
    check_size,
    should_check_values,
)

__all__ = [
    "ColumnEmbedding",
    "FeatureTokenizer",
    "PeriodicEmbedding",
    "PiecewiseLinearEmbedding",
    "PiecewiseLinearEncoding",
    "SharedValueEmbedding",
    "check_table",
    "quantile_bins",
]


def check_table(
    name: str,
    x: object,
    n_features: int,
    *,
    check_values: bool | None = True,
    any_batch: bool = False,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Return ``x`` if it is a finite floating tensor of shape ``(batch, n_features)``, else raise.

    Args:
        name: the argument's name, for the messages.
        x: the tensor to check.
        n_features: the number of columns.
        check_values: check finiteness (``True``, the default), never (``False``), or only
            on the CPU outside ``torch.compile`` (``None``; the module default, so that a
            forward on an accelerator never waits for the host).
        any_batch: accept ``(*, n_features)`` (any number of leading dimensions, zero
            included) instead of exactly ``(batch, n_features)``.
        device: the device ``x`` must be on (``None``: any).

    Raises:
        TypeError: ``x`` is not a ``torch.Tensor`` or not floating point.
        ValueError: ``x`` has the wrong rank, another number of columns, is on another
            device, or holds NaN/inf.

    Example:
        >>> check_table("x", torch.zeros(3, 2), 2).shape
        torch.Size([3, 2])
    """
    want = f"(*, n_features={n_features})" if any_batch else f"(batch, n_features={n_features})"
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {want}, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor (float16, bfloat16, float32 or float64), got dtype {x.dtype}"
        )
    if (x.ndim < 1) if any_batch else (x.ndim != 2):
        rank = "at least 1-D" if any_batch else "2-D"
        raise ValueError(f"{name} must be {rank} of shape {want}, got shape {tuple(x.shape)}")
    if x.shape[-1] != n_features:
        raise ValueError(
            f"{name} must have n_features={n_features} columns, got {x.shape[-1]} (shape {tuple(x.shape)})"
        )
    if device is not None and x.device != device:
        raise ValueError(f"{name} must be on the module's device ({device}), got {x.device}")
    if should_check_values(check_values, x) and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must hold finite values: it contains NaN or infinite entries")
    return x


def _uniform_(t: torch.Tensor, fan: int) -> torch.Tensor:
    bound = fan**-0.5
    with torch.no_grad():
        return nn.init.uniform_(t, -bound, bound)


class FeatureTokenizer(nn.Module):
    """FT-Transformer's feature tokenizer: one weight and one bias vector per feature.

    Token ``j`` of a row is ``T_j = b_j + x_j * W_j`` (Gorishniy et al. 2021, section 3.3),
    with ``W_j, b_j`` of width ``d_token`` learned separately for every feature. Because
    the weights differ between features, a token carries its feature's identity as well
    as its value: ``b_j`` alone already tells the features apart. With ``cls=True`` a
    learned ``[CLS]`` vector is put in front (index 0), as in the authors' package
    ``rtdl_revisiting_models``; its output representation is what the model predicts
    from.

    Args:
        n_features: number of numerical columns.
        d_token: width of each token.
        cls: prepend a learned ``[CLS]`` token.
        bias: use the per-feature bias ``b_j`` (the paper does).
        check_values: when ``forward`` checks that ``x`` is finite (see the module
            docstring).

    Shapes:
        ``weight``, ``bias``: ``(n_features, d_token)``; ``cls_token``: ``(d_token,)``.
        ``forward(x)``: ``x`` is ``(batch, n_features)``; returns
        ``(batch, n_features + 1, d_token)`` with ``cls=True``, else
        ``(batch, n_features, d_token)``.

    Example:
        >>> tok = FeatureTokenizer(3, 8)
        >>> tok(torch.randn(5, 3)).shape
        torch.Size([5, 4, 8])
    """

    def __init__(
        self,
        n_features: int,
        d_token: int,
        *,
        cls: bool = True,
        bias: bool = True,
        check_values: bool | None = None,
    ) -> None:
        super().__init__()
        self.n_features = check_int("n_features", n_features)
        self.d_token = check_int("d_token", d_token)
        check_size("the weight (n_features, d_token)", self.n_features, self.d_token, limit=MAX_PARAMETER_ELEMENTS)
        self.check_values = check_optional_bool("check_values", check_values)
        self.weight = nn.Parameter(torch.empty(self.n_features, self.d_token))
        self.bias = nn.Parameter(torch.empty(self.n_features, self.d_token)) if check_bool("bias", bias) else None
        self.cls_token = nn.Parameter(torch.empty(self.d_token)) if check_bool("cls", cls) else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw ``weight``, ``bias`` and ``cls_token`` from ``U(-1/sqrt(d_token), 1/sqrt(d_token))``, in that order."""
        for p in (self.weight, self.bias, self.cls_token):
            if p is not None:
                _uniform_(p, self.d_token)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = check_table("x", x, self.n_features, check_values=self.check_values, device=self.weight.device)
        tokens = x[..., None] * self.weight.to(x.dtype)
        if self.bias is not None:
            tokens = tokens + self.bias.to(x.dtype)
        if self.cls_token is not None:
            cls = self.cls_token.to(x.dtype).expand(x.shape[0], 1, self.d_token)
            tokens = torch.cat([cls, tokens], dim=1)
        return tokens

    def extra_repr(self) -> str:
        return f"n_features={self.n_features}, d_token={self.d_token}, cls={self.cls_token is not None}"


class _PerFeatureLinear(nn.Module):
    """``n`` separate linear layers, one per feature: ``(batch, n, d_in) -> (batch, n, d_out)``."""

    def __init__(self, n: int, d_in: int, d_out: int) -> None:
        super().__init__()
        check_size("the weight (n_features, d_in, d_out)", n, d_in, d_out, limit=MAX_PARAMETER_ELEMENTS)
        self.weight = nn.Parameter(torch.empty(n, d_in, d_out))
        self.bias = nn.Parameter(torch.empty(n, d_out))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _uniform_(self.weight, self.weight.shape[1])
        _uniform_(self.bias, self.weight.shape[1])

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.einsum("...ni,nio->...no", z, self.weight.to(z.dtype)) + self.bias.to(z.dtype)


class PeriodicEmbedding(nn.Module):
    """Periodic embedding of numerical values with learned frequencies ("PLR").

    For feature ``j`` with learned frequencies ``w_j1 .. w_jk`` (``k = n_frequencies``)
    the periodic features are

        ``p_j(x) = [cos(2 pi w_j1 x), ..., cos(2 pi w_jk x), sin(2 pi w_j1 x), ..., sin(2 pi w_jk x)]``

    (equation 2 in section 3.3 of Gorishniy et al. 2022; the paper lists ``sin`` first, the
    authors' package ``rtdl_num_embeddings`` puts ``cos`` first, as here: the order is a
    fixed permutation that the following linear layer absorbs). The frequencies are
    initialised from ``N(0, sigma)`` and trained. The embedding is then
    ``ReLU(Linear_j(p_j(x)))`` with a separate linear layer per feature (the paper's "PLR";
    ``activation=False`` gives "PL"). With ``shared=True`` all features use the *same*
    frequencies and linear layer: a pure value embedding that says nothing about which
    feature a token came from (used in chapter 5 to show why identity is needed).

    These are the sinusoids of the sinusoidal positional encoding with the position
    replaced by a feature value and the geometric frequency ladder replaced by learned,
    random-initialised frequencies, i.e. random Fourier features (Tancik et al. 2020) made
    trainable.

    Args:
        n_features: number of numerical columns.
        d_embedding: width of each output token.
        n_frequencies: ``k``, frequencies per feature.
        sigma: standard deviation of the frequency initialisation (the most important
            hyperparameter according to the paper; in cycles per unit of ``x``).
        activation: apply the final ReLU.
        shared: share frequencies and linear layer between all features.
        check_values: when ``forward`` checks that ``x`` is finite (see the module
            docstring).

    Shapes:
        ``frequencies``: ``(n_features, n_frequencies)`` (``(1, n_frequencies)`` if shared).
        ``periodic(x)``: ``(*, n_features)`` -> ``(*, n_features, 2 * n_frequencies)``.
        ``forward(x)``: ``(*, n_features)`` -> ``(*, n_features, d_embedding)``; any number
        of leading dimensions, as in ``rtdl_num_embeddings``.

    Example:
        >>> emb = PeriodicEmbedding(3, 8, n_frequencies=4, sigma=0.5)
        >>> emb(torch.randn(5, 3)).shape
        torch.Size([5, 3, 8])
        >>> emb.periodic(torch.randn(5, 3)).shape
        torch.Size([5, 3, 8])
    """

    def __init__(
        self,
        n_features: int,
        d_embedding: int,
        *,
        n_frequencies: int = 16,
        sigma: float = 1.0,
        activation: bool = True,
        shared: bool = False,
        check_values: bool | None = None,
    ) -> None:
        super().__init__()
        self.n_features = check_int("n_features", n_features)
        self.d_embedding = check_int("d_embedding", d_embedding)
        self.n_frequencies = check_int("n_frequencies", n_frequencies)
        self.sigma = check_positive_float("sigma", sigma)
        self.shared = check_bool("shared", shared)
        self.check_values = check_optional_bool("check_values", check_values)
        n_sets = 1 if self.shared else self.n_features
        check_size("the frequencies (n_features, n_frequencies)", n_sets, self.n_frequencies, limit=MAX_PARAMETER_ELEMENTS)
        check_size("the linear layer (2 * n_frequencies, d_embedding)", 2 * self.n_frequencies, self.d_embedding,
                   limit=MAX_PARAMETER_ELEMENTS)
        self.frequencies = nn.Parameter(torch.randn(n_sets, self.n_frequencies) * self.sigma)
        if self.shared:
            self.linear: nn.Module = nn.Linear(2 * self.n_frequencies, self.d_embedding)
        else:
            self.linear = _PerFeatureLinear(self.n_features, 2 * self.n_frequencies, self.d_embedding)
        self.activation = nn.ReLU() if check_bool("activation", activation) else nn.Identity()

    def reset_parameters(self) -> None:
        """Draw the frequencies from ``N(0, sigma**2)``, then re-initialise the linear layer."""
        f = self.frequencies
        with torch.no_grad():  # randn * sigma as in __init__ (normal_(0, sigma) rounds differently)
            f.copy_(torch.randn(f.shape, device=f.device, dtype=f.dtype) * self.sigma)
        self.linear.reset_parameters()

    def periodic(self, x: torch.Tensor) -> torch.Tensor:
        """The ``[cos | sin]`` features before the linear layer, computed in float32 or better."""
        x = check_table(
            "x", x, self.n_features, check_values=self.check_values, any_batch=True, device=self.frequencies.device
        )
        compute = torch.promote_types(x.dtype, torch.float32)
        angles = 2 * math.pi * self.frequencies.to(compute) * x.to(compute)[..., None]
        return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1).to(x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.periodic(x)
        if self.shared:
            out = nn.functional.linear(p, self.linear.weight.to(p.dtype), self.linear.bias.to(p.dtype))
        else:
            out = self.linear(p)
        return self.activation(out)

    def extra_repr(self) -> str:
        return (
            f"n_features={self.n_features}, d_embedding={self.d_embedding}, "
            f"n_frequencies={self.n_frequencies}, sigma={self.sigma}, shared={self.shared}"
        )


def quantile_bins(x: object, n_bins: int) -> list[np.ndarray]:
    """Bin edges from the empirical quantiles of each column (Gorishniy et al. 2022, section 3.2.1).

    Edge ``t`` of feature ``i`` is the ``t / n_bins`` quantile of column ``i`` of the
    training data (so the first edge is the minimum and the last the maximum); repeated
    edges (bins of zero width) are removed, so a column may get fewer than ``n_bins``
    bins. Computed in float64 with numpy's default (linear) quantile rule, the same rule
    as ``torch.quantile``.

    Args:
        x: training data, array-like or tensor of shape ``(n_samples, n_features)``.
        n_bins: number of bins per feature (at least 1, fewer than ``n_samples``).

    Returns:
        A list with one sorted float64 array of edges per feature (length ``<= n_bins + 1``).

    Example:
        >>> [e.tolist() for e in quantile_bins([[0.0], [1.0], [2.0], [3.0], [4.0]], 2)]
        [[0.0, 2.0, 4.0]]
    """
    if isinstance(x, torch.Tensor):
        if x.is_complex() or x.dtype == torch.bool:
            raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
        x = x.detach().cpu().numpy()
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"x must be an array-like or tensor of shape (n_samples, n_features), got {type(x).__name__}")
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"x must be an array-like or tensor of real numbers of shape (n_samples, n_features): {err}") from err
    if arr.ndim != 2:
        raise ValueError(f"x must be 2-D of shape (n_samples, n_features), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("x must hold finite values: it contains NaN or infinite entries")
    n_bins = check_int("n_bins", n_bins)
    check_size("the bin edges (n_bins + 1, n_features)", n_bins + 1, arr.shape[1])
    if n_bins >= arr.shape[0]:
        raise ValueError(f"n_bins must be smaller than the number of rows ({arr.shape[0]}), got {n_bins}")
    qs = np.quantile(arr, np.linspace(0.0, 1.0, n_bins + 1), axis=0)
    edges = [np.unique(q) for q in qs.T]
    for i, e in enumerate(edges):
        if len(e) < 2:
            raise ValueError(f"column {i} of x is constant: it needs at least two distinct values to be binned")
    return edges


class PiecewiseLinearEncoding(nn.Module):
    """Piecewise-linear encoding (PLE) of each feature into its bins (Gorishniy et al. 2022, eq. 1).

    With bin edges ``b_0 < b_1 < ... < b_T`` of one feature, component ``t`` (1-based)
    of ``PLE(x)`` is ``0`` if ``x < b_{t-1}`` (for ``t > 1``), ``1`` if ``x >= b_t``
    (for ``t < T``) and ``(x - b_{t-1}) / (b_t - b_{t-1})`` otherwise: a "thermometer" of
    full bins followed by the fraction of the current bin. The first component is not
    clipped below and the last not clipped above, so values outside the training range
    extrapolate linearly, as in the paper (and as in ``rtdl_num_embeddings``). Features
    with fewer bins than the largest are padded with zeros at the end. No parameters.

    Args:
        bins: one increasing 1-D sequence of at least two edges per feature, e.g. from
            :func:`quantile_bins`.
        check_values: when ``forward`` checks that ``x`` is finite (see the module
            docstring).

    Shapes:
        ``forward(x)``: ``(batch, n_features)`` -> ``(batch, n_features, max_n_bins)``;
        ``mask``: ``(n_features, max_n_bins)``, ``True`` where a component is a real bin.

    Example:
        >>> ple = PiecewiseLinearEncoding([[0.0, 1.0, 2.0, 4.0]])
        >>> ple(torch.tensor([[1.5]]))
        tensor([[[1.0000, 0.5000, 0.0000]]])
    """

    def __init__(self, bins: Sequence[object], *, check_values: bool | None = None) -> None:
        super().__init__()
        if isinstance(bins, (str, bytes)) or not isinstance(bins, Sequence):
            raise TypeError(
                f"bins must be a non-empty list with one 1-D sequence of edges per feature, got {type(bins).__name__}"
            )
        if len(bins) == 0:
            raise ValueError("bins must be a non-empty list with one 1-D sequence of edges per feature, got []")
        self.check_values = check_optional_bool("check_values", check_values)
        edges = []
        for i, b in enumerate(bins):
            if isinstance(b, torch.Tensor):
                b = b.detach().cpu().numpy()
            if isinstance(b, (str, bytes)) or b is None:
                raise TypeError(f"bins[{i}] must be a 1-D sequence of numbers, got {type(b).__name__}")
            try:
                e = np.asarray(b, dtype=np.float64)
            except (TypeError, ValueError) as err:
                raise TypeError(f"bins[{i}] must be a 1-D sequence of real numbers: {err}") from err
            if e.ndim != 1 or len(e) < 2:
                raise ValueError(f"bins[{i}] must be a 1-D sequence of at least two edges, got shape {e.shape}")
            if not np.all(np.isfinite(e)) or not np.all(np.diff(e) > 0):
                raise ValueError(f"bins[{i}] must be finite and strictly increasing")
            edges.append(e)
        self.n_features = len(edges)
        self.n_bins = [len(e) - 1 for e in edges]
        self.max_n_bins = max(self.n_bins)
        check_size("the encoding (n_features, max_n_bins)", self.n_features, self.max_n_bins, limit=MAX_TABLE_ELEMENTS)
        self._edges = edges
        shape = (self.n_features, self.max_n_bins)
        for name in ("left", "width", "lower", "upper"):
            self.register_buffer(name, torch.empty(shape, dtype=torch.float64), persistent=False)
        self.register_buffer("mask", torch.empty(shape, dtype=torch.bool), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Rebuild the (non-persistent) bin tables from the edges, in place; a no-op on ``meta``."""
        if self.left.device.type == "meta":
            return
        edges = self._edges
        left = np.zeros((self.n_features, self.max_n_bins))
        width = np.ones((self.n_features, self.max_n_bins))
        lower = np.zeros((self.n_features, self.max_n_bins))
        upper = np.ones((self.n_features, self.max_n_bins))
        mask = np.zeros((self.n_features, self.max_n_bins), dtype=bool)
        for i, e in enumerate(edges):
            t = len(e) - 1
            left[i, :t] = e[:-1]
            width[i, :t] = np.diff(e)
            mask[i, :t] = True
            lower[i, 0] = -np.inf  # the first bin extrapolates below the data
            upper[i, t - 1] = np.inf  # the last bin extrapolates above it
        with torch.no_grad():
            for name, value in (("left", left), ("width", width), ("lower", lower), ("upper", upper), ("mask", mask)):
                getattr(self, name).copy_(torch.from_numpy(value))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = check_table("x", x, self.n_features, check_values=self.check_values, device=self.left.device)
        compute = torch.promote_types(x.dtype, torch.float32)
        left, width = self.left.to(compute), self.width.to(compute)
        e = (x.to(compute)[..., None] - left) / width
        e = torch.minimum(torch.maximum(e, self.lower.to(compute)), self.upper.to(compute))
        return (e * self.mask).to(x.dtype)

    def extra_repr(self) -> str:
        return f"n_features={self.n_features}, max_n_bins={self.max_n_bins}"


class PiecewiseLinearEmbedding(nn.Module):
    """A piecewise-linear encoding followed by a linear layer per feature ("Q-L", optionally "Q-LR").

    ``f_j(x) = v_0 + sum_t e_t(x) v_t = Linear_j(PLE_j(x))``: every bin of every feature
    has its own learned vector ``v_t`` (Gorishniy et al. 2022, section 3.2, who note that
    for attention-based models this per-feature linear layer is what adds the feature's
    identity). With ``shared=True`` one linear layer serves all features (a value-only
    embedding; bins still come from each column's own quantiles).

    Args:
        bins: bin edges per feature (see :class:`PiecewiseLinearEncoding`).
        d_embedding: width of each output token.
        activation: apply a ReLU after the linear layer.
        shared: one linear layer for all features.
        check_values: when ``forward`` checks that ``x`` is finite (see the module
            docstring).

    Shapes:
        ``forward(x)``: ``(batch, n_features)`` -> ``(batch, n_features, d_embedding)``.

    Example:
        >>> emb = PiecewiseLinearEmbedding([[0.0, 1.0, 2.0], [0.0, 5.0, 6.0, 9.0]], 4)
        >>> emb(torch.tensor([[0.5, 7.0]])).shape
        torch.Size([1, 2, 4])
    """

    def __init__(
        self,
        bins: Sequence[object],
        d_embedding: int,
        *,
        activation: bool = False,
        shared: bool = False,
        check_values: bool | None = None,
    ) -> None:
        super().__init__()
        self.encoding = PiecewiseLinearEncoding(bins, check_values=check_values)
        self.n_features = self.encoding.n_features
        self.d_embedding = check_int("d_embedding", d_embedding)
        self.shared = check_bool("shared", shared)
        n_in = self.encoding.max_n_bins
        check_size("the linear layer (max_n_bins, d_embedding)", n_in, self.d_embedding, limit=MAX_PARAMETER_ELEMENTS)
        if self.shared:
            self.linear: nn.Module = nn.Linear(n_in, self.d_embedding)
        else:
            self.linear = _PerFeatureLinear(self.n_features, n_in, self.d_embedding)
        self.activation = nn.ReLU() if check_bool("activation", activation) else nn.Identity()

    def reset_parameters(self) -> None:
        """Rebuild the encoding's tables and re-initialise the linear layer."""
        self.encoding.reset_parameters()
        self.linear.reset_parameters()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.encoding(x)
        if self.shared:
            out = nn.functional.linear(e, self.linear.weight.to(e.dtype), self.linear.bias.to(e.dtype))
        else:
            out = self.linear(e)
        return self.activation(out)


class SharedValueEmbedding(nn.Module):
    """A linear value embedding shared by all features: token ``j`` is ``x_j * w + b``.

    The same ``w`` and ``b`` serve every column, so two features with equal values get
    equal tokens: the token holds the value and nothing about which feature it is. This
    is the embedding under which a transformer sees a row as an unordered set.

    Args:
        n_features: number of numerical columns (only checked, nothing is per feature).
        d_embedding: width of each token.
        check_values: when ``forward`` checks that ``x`` is finite (see the module
            docstring).

    Shapes:
        ``forward(x)``: ``(batch, n_features)`` -> ``(batch, n_features, d_embedding)``.

    Example:
        >>> emb = SharedValueEmbedding(3, 4)
        >>> out = emb(torch.tensor([[1.0, 2.0, 1.0]]))
        >>> bool((out[0, 0] == out[0, 2]).all())
        True
    """

    def __init__(self, n_features: int, d_embedding: int, *, check_values: bool | None = None) -> None:
        super().__init__()
        self.n_features = check_int("n_features", n_features)
        self.d_embedding = check_int("d_embedding", d_embedding)
        check_size("the weight (d_embedding,)", self.d_embedding, limit=MAX_PARAMETER_ELEMENTS)
        self.check_values = check_optional_bool("check_values", check_values)
        self.weight = nn.Parameter(torch.empty(self.d_embedding))
        self.bias = nn.Parameter(torch.empty(self.d_embedding))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw ``weight`` then ``bias`` from ``U(-1/sqrt(d_embedding), 1/sqrt(d_embedding))``."""
        _uniform_(self.weight, self.d_embedding)
        _uniform_(self.bias, self.d_embedding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = check_table("x", x, self.n_features, check_values=self.check_values, device=self.weight.device)
        return x[..., None] * self.weight.to(x.dtype) + self.bias.to(x.dtype)


class ColumnEmbedding(nn.Module):
    """Learned column (feature-identity) embeddings, as in TabTransformer and SAINT.

    One trainable vector ``c_j`` per column is combined with the value token of that
    column: added (``mode="add"``) or concatenated in front of it (``mode="concat"``,
    TabTransformer's default, where ``c_j`` takes ``d_column`` of the token's
    dimensions). It plays the role a positional embedding plays for words, with the
    column index as the "position": without it, a transformer over feature tokens built
    by a shared value embedding cannot tell the columns apart.

    Args:
        n_features: number of columns.
        d_column: width of ``c_j``; must equal the token width for ``mode="add"``.
        mode: ``"add"`` or ``"concat"``.
        init_std: standard deviation of the normal initialisation.

    Shapes:
        ``weight``: ``(n_features, d_column)``.
        ``forward(tokens)``: ``tokens`` is ``(batch, n_features, d)``; returns
        ``(batch, n_features, d)`` for ``"add"`` (with ``d == d_column``) or
        ``(batch, n_features, d_column + d)`` for ``"concat"``.

    Example:
        >>> col = ColumnEmbedding(3, 4)
        >>> col(torch.zeros(2, 3, 4)).shape
        torch.Size([2, 3, 4])
        >>> ColumnEmbedding(3, 2, mode="concat")(torch.zeros(2, 3, 4)).shape
        torch.Size([2, 3, 6])
    """

    def __init__(self, n_features: int, d_column: int, *, mode: str = "add", init_std: float = 1.0) -> None:
        super().__init__()
        self.n_features = check_int("n_features", n_features)
        self.d_column = check_int("d_column", d_column)
        self.mode = check_choice("mode", mode, ("add", "concat"))
        self.init_std = check_positive_float("init_std", init_std)
        check_size("the weight (n_features, d_column)", self.n_features, self.d_column, limit=MAX_PARAMETER_ELEMENTS)
        self.weight = nn.Parameter(torch.randn(self.n_features, self.d_column) * self.init_std)

    def reset_parameters(self) -> None:
        """Draw the weight again from ``N(0, init_std**2)``."""
        w = self.weight
        with torch.no_grad():  # randn * init_std as in __init__
            w.copy_(torch.randn(w.shape, device=w.device, dtype=w.dtype) * self.init_std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"tokens must be a torch.Tensor of shape (batch, n_features, d), got {type(tokens).__name__}")
        if not tokens.is_floating_point():
            raise TypeError(
                f"tokens must be a floating-point tensor (float16, bfloat16, float32 or float64), got dtype {tokens.dtype}"
            )
        if tokens.ndim != 3 or tokens.shape[1] != self.n_features:
            raise ValueError(
                f"tokens must have shape (batch, n_features={self.n_features}, d), got {tuple(tokens.shape)}"
            )
        if tokens.device != self.weight.device:
            raise ValueError(f"tokens must be on the module's device ({self.weight.device}), got {tokens.device}")
        col = self.weight.to(tokens.dtype)
        if self.mode == "add":
            if tokens.shape[-1] != self.d_column:
                raise ValueError(
                    f"mode='add' needs tokens of width d_column={self.d_column}, got {tokens.shape[-1]}"
                )
            return tokens + col
        return torch.cat([col.expand(tokens.shape[0], -1, -1), tokens], dim=-1)

    def extra_repr(self) -> str:
        return f"n_features={self.n_features}, d_column={self.d_column}, mode={self.mode!r}"
