"""Argument checks shared by the package: clear errors that name the argument."""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import numpy as np


def check_int(name: str, value: object, *, minimum: int | None = 1) -> int:
    """Return ``value`` as an ``int`` or raise.

    ``bool`` and non-integral numbers raise ``TypeError``; integers below ``minimum``
    raise ``ValueError``. Integral numpy scalars and 0-d tensors are accepted.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if hasattr(value, "ndim") and getattr(value, "ndim") == 0 and hasattr(value, "item"):
            return check_int(name, value.item(), minimum=minimum)
        raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_positive_float(name: str, value: object) -> float:
    """Return ``value`` as a finite ``float`` > 0 or raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise ``ValueError`` listing them."""
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        accepted = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {accepted}, got {value!r}")
    return value


def as_positions(name: str, positions: object) -> np.ndarray:
    """Turn an int ``n`` (meaning ``0..n-1``) or a 1-D array-like into a float64 array.

    Raises ``TypeError`` for non-numeric input and ``ValueError`` for arrays that are not
    1-D or that hold non-finite values.
    """
    if isinstance(positions, bool):
        raise TypeError(f"{name} must be an int or a 1-D array of numbers, got a bool")
    if isinstance(positions, numbers.Integral):
        n = check_int(name, positions, minimum=0)
        return np.arange(n, dtype=np.float64)
    if hasattr(positions, "detach"):  # a torch tensor
        positions = positions.detach().cpu().numpy()
    arr = np.asarray(positions)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must be an int or a 1-D array of numbers, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be an int or a 1-D array, got an array of shape {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite values")
    return arr


def check_sequence_input(name: str, x: object, width: int) -> None:
    """Raise unless ``x`` is a tensor of shape ``(..., seq, width)``."""
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim < 2 or x.shape[-1] != width:
        raise ValueError(f"{name} must have shape (..., seq, {width}), got {tuple(x.shape)}")
