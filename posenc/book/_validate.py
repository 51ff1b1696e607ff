"""Argument checks of the laboratory that the library's :mod:`posenc._checks` does not have.

Every check raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind, bad
value) with a message that starts with the argument's name, so that a wrong call stops at
the boundary of the public function instead of deep inside numpy, torch, scikit-learn or
matplotlib, and never turns into a NaN score.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping

import numpy as np
import torch
from torch import nn

from .._checks import check_int


def check_real(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` in the given range, or raise naming ``name``."""
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {v}")
    if low is not None and (v <= low if low_open else v < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {v}")
    if high is not None and (v >= high if high_open else v > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {v}")
    return v


def check_seed(name: str, value: object) -> int:
    """A seed: an integer ``>= 0`` (what numpy and torch accept)."""
    return check_int(name, value, minimum=0)


def as_finite_array(name: str, x: object, *, ndim: int | None = None, min_size: int = 1) -> np.ndarray:
    """``x`` as a float64 numpy array with only finite entries, or raise naming ``name``."""
    from .results import to_numpy

    try:
        arr = to_numpy(x)
    except TypeError as err:
        raise TypeError(f"{name} must be a tensor, array or sequence of real numbers, got {type(x).__name__}") from err
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if arr.size < min_size:
        raise ValueError(f"{name} must hold at least {min_size} value(s), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must hold finite numbers, got {int((~np.isfinite(arr)).sum())} NaN or infinite value(s)")
    return arr


def check_tensor(name: str, x: object, *, ndim: int | tuple[int, ...] | None = None, finite: bool = True) -> torch.Tensor:
    """``x`` if it is a floating tensor of the right rank (and finite), else raise naming ``name``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if ndim is not None and x.ndim not in ((ndim,) if isinstance(ndim, int) else ndim):
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(x.shape)}")
    if finite and x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must hold finite numbers, got NaN or infinite values")
    return x


def check_module(name: str, value: object) -> nn.Module:
    if not isinstance(value, nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module, got {type(value).__name__}")
    return value


def check_callable(name: str, value: object) -> object:
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {type(value).__name__}")
    return value


def check_axes(name: str, value: object) -> object:
    from matplotlib.axes import Axes

    if not isinstance(value, Axes):
        raise TypeError(f"{name} must be a matplotlib Axes, got {type(value).__name__}")
    return value


def check_figure(name: str, value: object) -> object:
    from matplotlib.figure import Figure

    if not isinstance(value, Figure):
        raise TypeError(f"{name} must be a matplotlib Figure, got {type(value).__name__}")
    return value


def check_names(name: str, value: object, *, nonempty: bool = True) -> tuple[str, ...]:
    """A list or tuple of strings (not a single string, which would iterate by character)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not all(
        isinstance(v, str) for v in value
    ):
        raise TypeError(f"{name} must be a list or tuple of strings, got {value!r}")
    if nonempty and not value:
        raise ValueError(f"{name} must not be empty")
    return tuple(value)


def check_rows(name: str, rows: object, fields: Iterable[str] = (), *, nonempty: bool = True) -> list[Mapping]:
    """A list of mappings (result rows), each holding ``fields``."""
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise TypeError(f"{name} must be a list of dicts (result rows), got {type(rows).__name__}")
    rows = list(rows)
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"{name}[{i}] must be a dict (a result row), got {type(row).__name__}")
        missing = [f for f in fields if f not in row]
        if missing:
            raise ValueError(f"{name}[{i}] has no field {missing[0]!r}; got fields {sorted(row)}")
    if nonempty and not rows:
        raise ValueError(f"{name} must hold at least one row, got none")
    return rows


def check_key(name: str, key: object, available: Iterable[object]) -> object:
    """``key`` if it is one of ``available``, else a ``ValueError`` listing them."""
    available = list(available)
    if key not in available:
        shown = ", ".join(repr(a) for a in available[:12]) + (", ..." if len(available) > 12 else "")
        raise ValueError(f"{name}={key!r} is not available; choose one of {shown}")
    return key
