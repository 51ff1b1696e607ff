"""Argument checks shared by the package: clear errors that name the argument.

Two size limits protect against a typo turning into an allocation of terabytes (which
would end in a ``MemoryError`` or an allocator error from deep inside numpy or torch):

* :data:`MAX_TABLE_ELEMENTS` (``2**28``, 2 GiB in float64) bounds every table that the
  package *computes* ahead of a model (a sinusoidal table, a rotary table);
  :func:`check_memory` bounds the attention biases, which a model needs at its length,
  by the memory of their device;
* :data:`MAX_PARAMETER_ELEMENTS` (``2**31``, 8 GiB in float32) bounds every single
  learned tensor a module allocates.

Sizes beyond them raise a ``ValueError`` before anything is allocated.

Data-dependent checks (positions within the table, finite values) need the values of a
tensor; on an accelerator reading them is a host-device synchronisation, and under
``torch.compile`` or ``torch.export`` it is a graph break. Modules that make such checks
take ``check_values``: ``None`` (the default) checks when the data is on the CPU and the
module is not being traced, ``True`` always checks (a sync on an accelerator, a graph
break under ``torch.compile``), ``False`` never does.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Iterable

import numpy as np
import torch

MAX_TABLE_ELEMENTS = 2**28
MAX_PARAMETER_ELEMENTS = 2**31


def check_int(name: str, value: object, *, minimum: int | None = 1) -> int:
    """Return ``value`` as an ``int`` or raise.

    ``bool`` and non-integral numbers raise ``TypeError``; integers below ``minimum``
    raise ``ValueError``. Integral numpy scalars and 0-d integer tensors are accepted;
    symbolic sizes (``torch.SymInt``, under ``torch.compile``) are passed through.
    """
    if isinstance(value, torch.SymInt):
        return value  # type: ignore[return-value]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 0:
            return check_int(name, value.item(), minimum=minimum)  # a float or bool item raises below
        raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_size(what: str, *dims: int, limit: int = MAX_TABLE_ELEMENTS) -> None:
    """Raise ``ValueError`` if a tensor with dimensions ``dims`` would exceed ``limit`` elements.

    Example:
        >>> check_size("the table (max_len, d_model)", 4, 8)
        >>> check_size("the table (max_len, d_model)", 10**9, 512)
        Traceback (most recent call last):
        ...
        ValueError: the table (max_len, d_model) would hold 512000000000 elements, more than the limit of 268435456 (2**28); use smaller sizes
    """
    n, largest = 1, 0
    for d in dims:
        if isinstance(d, torch.SymInt):
            return  # a symbolic size under torch.compile: checked when the graph was traced
        n, largest = n * int(d), max(largest, int(d))
    if n > limit or largest > limit:
        raise ValueError(
            f"{what} would hold {n} elements, more than the limit of {limit} (2**{limit.bit_length() - 1}); "
            "use smaller sizes"
        )


MAX_ELEMENTS = 2**40  # beyond any device's memory today: refused even where the memory is unknown


def device_memory(device: torch.device | None) -> int | None:
    """The total memory of ``device`` in bytes (the CPU's physical memory), or ``None`` where unknown."""
    device = torch.device("cpu") if device is None else device
    try:
        if device.type == "cpu":
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        if device.type == "cuda":
            return torch.cuda.get_device_properties(device.index if device.index is not None else torch.cuda.current_device()).total_memory
    except (ValueError, OSError, AttributeError, RuntimeError):
        return None
    return None


def check_memory(
    what: str, *dims: int, dtype: torch.dtype, device: torch.device | None, scratch: int = 0
) -> None:
    """Raise ``ValueError`` if a tensor ``dims`` of ``dtype`` (and ``scratch`` bytes to build it)
    cannot fit the memory of ``device``.

    Refuses only what cannot be built: more bytes than the device has in all, or more than
    :data:`MAX_ELEMENTS` elements (the meta device, or a device of unknown size).

    Example:
        >>> check_memory("the bias (n_heads, q_len, k_len)", 32, 4096, 4096, dtype=torch.float32, device=None)
        >>> check_memory("the bias (n_heads, q_len, k_len)", 2**20, 2**15, 2**15, dtype=torch.float32, device=None)
        Traceback (most recent call last):
        ...
        ValueError: the bias (n_heads, q_len, k_len) would hold 1125899906842624 elements, more than the limit of 1099511627776 (2**40); use smaller sizes
    """
    check_size(what, *dims, limit=MAX_ELEMENTS)
    if torch.compiler.is_compiling() or (device is not None and device.type == "meta"):
        return  # traced sizes were checked by the eager call, or nothing is allocated
    for d in dims:
        if isinstance(d, torch.SymInt):
            return
    bits = torch.finfo(dtype).bits if dtype.is_floating_point else torch.iinfo(dtype).bits
    need = math.prod(int(d) for d in dims) * bits // 8 + scratch
    have = device_memory(device)
    if have is not None and need > have:
        raise ValueError(
            f"{what} would take {need / 2**30:.1f} GiB, more than the {have / 2**30:.1f} GiB of {device or 'cpu'}; "
            "use FlexAttention (posenc.flex) or smaller sizes"
        )


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is ``True`` or ``False``, else raise ``TypeError``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_optional_bool(name: str, value: object) -> bool | None:
    """Return ``value`` if it is ``None``, ``True`` or ``False``, else raise ``TypeError``."""
    if value is None:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be None, True or False, got {value!r}")
    return bool(value)


def check_positive_float(name: str, value: object) -> float:
    """Return ``value`` as a finite ``float`` > 0 or raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value


def check_probability(name: str, value: object) -> float:
    """Return ``value`` as a ``float`` in ``[0, 1)`` (a dropout rate) or raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in [0, 1), got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1), got {value!r}")
    return value


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise ``ValueError`` listing them."""
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        accepted = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {accepted}, got {value!r}")
    return value


def check_device(name: str, device: object) -> torch.device | None:
    """Return ``device`` as a ``torch.device`` (or ``None``), else raise.

    Accepts ``None``, a ``torch.device``, a string such as ``"cpu"`` or ``"cuda:0"`` and
    an int (a CUDA index), as torch does.
    """
    if device is None:
        return None
    if isinstance(device, bool) or not isinstance(device, (torch.device, str, int)):
        raise TypeError(f"{name} must be a torch.device, a string such as 'cpu' or 'cuda', or None, got {device!r}")
    try:
        out = torch.device(device)
    except (RuntimeError, ValueError) as err:
        raise ValueError(f"{name} must name a device such as 'cpu' or 'cuda:0', got {device!r}") from err
    if out.type == "cuda" and (not torch.cuda.is_available() or (out.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"{name}={device!r} names a CUDA device this machine does not have ({torch.cuda.device_count()} visible)")
    return out


def check_float_dtype(name: str, dtype: object) -> torch.dtype | None:
    """Return ``dtype`` if it is ``None`` or a floating-point ``torch.dtype``, else raise ``TypeError``."""
    if dtype is not None and (not isinstance(dtype, torch.dtype) or not dtype.is_floating_point):
        raise TypeError(f"{name} must be a floating-point torch.dtype (e.g. torch.float32) or None, got {dtype!r}")
    return dtype


def as_positions(name: str, positions: object, *, width: int = 1) -> np.ndarray:
    """Turn an int ``n`` (meaning ``0..n-1``) or a 1-D array-like into a float64 array.

    Raises ``TypeError`` for non-numeric input and ``ValueError`` for arrays that are not
    1-D, that hold non-finite values, or whose table of ``width`` columns would exceed
    :data:`MAX_TABLE_ELEMENTS`.
    """
    if isinstance(positions, bool):
        raise TypeError(f"{name} must be an int or a 1-D array of numbers, got a bool")
    if isinstance(positions, numbers.Integral):
        n = check_int(name, positions, minimum=0)
        check_size(f"a table of {name}={n} rows and {width} columns", n, width)
        return np.arange(n, dtype=np.float64)
    if isinstance(positions, (str, bytes)) or positions is None:
        raise TypeError(f"{name} must be an int or a 1-D array of numbers, got {type(positions).__name__}")
    if isinstance(positions, torch.Tensor):
        if positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"{name} must be an int or a 1-D array of real numbers, got dtype {positions.dtype}")
        positions = positions.detach().cpu().numpy()
    try:
        arr = np.asarray(positions)
    except (TypeError, ValueError) as err:  # ragged nested lists
        raise ValueError(f"{name} must be an int or a 1-D array of numbers: {err}") from err
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must be an int or a 1-D array of numbers, got dtype {arr.dtype}")
    if arr.ndim == 0:
        raise TypeError(f"{name} must be an int or a 1-D array of numbers, got the scalar {positions!r}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be an int or a 1-D array, got an array of shape {arr.shape}")
    check_size(f"a table of {len(arr)} {name} and {width} columns", len(arr), width)
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite values")
    return arr


def check_sequence_input(name: str, x: object, width: int) -> torch.Tensor:
    """Return ``x`` if it is a floating-point tensor of shape ``(..., seq, width)``, else raise.

    Integer tensors are refused (``TypeError``): adding a float table to token ids would
    silently give a wrong result; embed the tokens first.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (..., seq, {width}), got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor (float16, bfloat16, float32 or float64), got dtype {x.dtype}"
        )
    if x.ndim < 2 or x.shape[-1] != width:
        raise ValueError(f"{name} must have shape (..., seq, {width}), got {tuple(x.shape)}")
    return x


def should_check_values(check_values: bool | None, t: torch.Tensor) -> bool:
    """Whether to run a data-dependent check on ``t`` (see the module docstring)."""
    if check_values is not None:
        return check_values
    return t.device.type == "cpu" and not torch.compiler.is_compiling()


def check_positions(
    name: str,
    positions: object,
    x: torch.Tensor,
    *,
    max_len: int,
    check_values: bool | None,
) -> torch.Tensor:
    """Validate per-example integer positions for an input ``x`` of shape ``(..., seq, d)``.

    ``positions`` must be an integer tensor on ``x``'s device, of shape ``(seq,)`` or
    ``x.shape[:-1]`` (e.g. ``(batch, seq)``). Values must lie in ``[0, max_len)``; that is
    checked as :func:`should_check_values` says.
    """
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"{name} must be an integer torch.Tensor of shape (seq,) or (batch, seq), got {type(positions).__name__}"
        )
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers (torch.long or torch.int32), got dtype {positions.dtype}")
    seq = x.shape[-2]
    # compare the rank first: an element-wise comparison of a (batch, seq) shape with (seq,)
    # would add the guard seq != batch to an exported graph
    fits = positions.shape[0] == seq if positions.ndim == 1 else positions.shape == x.shape[:-1]
    if not fits:
        raise ValueError(
            f"{name} must have shape (seq,) = ({seq},) or x.shape[:-1] = {tuple(x.shape[:-1])}, "
            f"got {tuple(positions.shape)}"
        )
    if positions.device != x.device:
        raise ValueError(f"{name} must be on x's device ({x.device}), got {positions.device}")
    if positions.numel() and should_check_values(check_values, positions):
        lo, hi = int(positions.min()), int(positions.max())
        if lo < 0 or hi >= max_len:
            raise ValueError(
                f"{name} must lie in [0, max_len={max_len}), got values from {lo} to {hi}; "
                "build the module with a larger max_len"
            )
    return positions


def offset_or_positions(
    x: torch.Tensor,
    offset: object,
    positions: object,
    *,
    max_len: int,
    check_values: bool | None,
    overflow: Callable[[int, int], str],
) -> tuple[int, torch.Tensor | None]:
    """Resolve the ``offset``/``positions`` arguments of an absolute position module.

    Returns ``(offset, None)`` when the rows ``offset .. offset + seq - 1`` of the table
    are meant (an int offset, checked against ``max_len`` without touching any data), or
    ``(0, positions)`` with an integer tensor to gather rows by. A tensor ``offset``
    (0-d, or ``(batch,)`` for one offset per example) becomes the positions
    ``offset + arange(seq)`` on ``x``'s device, with no host-device synchronisation.
    ``overflow(offset, seq)`` is the message of the ``ValueError`` raised when an int
    offset puts the last position ``offset + seq - 1`` at or beyond ``max_len``.
    """
    seq = x.shape[-2]
    if positions is not None:
        if not (isinstance(offset, numbers.Integral) and not isinstance(offset, bool) and offset == 0):
            raise ValueError(f"give either offset or positions, not both (got offset={offset!r} and positions)")
        return 0, check_positions("positions", positions, x, max_len=max_len, check_values=check_values)
    if isinstance(offset, torch.Tensor):
        if offset.is_floating_point() or offset.is_complex() or offset.dtype == torch.bool:
            raise TypeError(f"offset must be an int or an integer tensor, got dtype {offset.dtype}")
        if offset.ndim > 1 or (offset.ndim == 1 and (x.ndim != 3 or offset.shape[0] != x.shape[0])):
            raise ValueError(
                f"a tensor offset must be 0-d, or (batch,) for x of shape (batch, seq, d), got shape "
                f"{tuple(offset.shape)} for x of shape {tuple(x.shape)}"
            )
        if offset.device != x.device:
            raise ValueError(f"offset must be on x's device ({x.device}), got {offset.device}")
        pos = offset[..., None] + torch.arange(seq, device=x.device, dtype=offset.dtype)
        return 0, check_positions("offset + arange(seq)", pos, x, max_len=max_len, check_values=check_values)
    offset = check_int("offset", offset, minimum=0)
    if not isinstance(offset, torch.SymInt) and not isinstance(seq, torch.SymInt) and offset + seq > max_len:
        raise ValueError(overflow(offset, seq))
    return offset, None


def position_rows(
    table: torch.Tensor,
    x: torch.Tensor,
    offset: object,
    positions: object,
    *,
    check_values: bool | None,
    overflow: Callable[[int, int], str],
) -> torch.Tensor:
    """The rows of an absolute position ``table`` ``(max_len, d)`` that ``x`` is to receive.

    Shared by the sinusoidal and learned modules: ``x`` must be on the table's device;
    ``offset``/``positions`` are resolved by :func:`offset_or_positions`; the result is
    ``table[offset : offset + seq]`` or ``table[positions]`` (not cast to ``x``'s dtype).
    """
    if x.device != table.device:
        raise ValueError(f"x must be on the module's device ({table.device}), got {x.device}")
    offset, positions = offset_or_positions(
        x, offset, positions, max_len=table.shape[0], check_values=check_values, overflow=overflow
    )
    return table[offset : offset + x.shape[-2]] if positions is None else table[positions]
