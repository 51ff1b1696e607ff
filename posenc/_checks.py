"""Argument checks shared by the package: clear errors that name the argument.

Two size limits protect against a typo turning into an allocation of terabytes (which
would end in a ``MemoryError`` or an allocator error from deep inside numpy or torch):

* :data:`MAX_TABLE_ELEMENTS` (``2**28``, 2 GiB in float64) bounds every table that the
  package *computes* (a sinusoidal or ALiBi table, a matrix of relative positions);
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


# ----------------------------------------------------------------------------- rotary
#
# Every argument check of posenc.rope, at its one boundary (the public functions and
# RotaryEmbedding.forward); the kernels behind it assume valid input.

MAX_HEAD_DIM = 1 << 16  # wider heads are refused with a clear error, not a MemoryError


def check_head_dim(name: str, value: object) -> int:
    """An int in ``[2, 2**16]``."""
    value = check_int(name, value, minimum=2)
    if value > MAX_HEAD_DIM:
        raise ValueError(f"{name} must be at most {MAX_HEAD_DIM}, got {value}")
    return value


def check_seq_dim(seq_dim: object) -> int:
    """An integer axis other than ``-1`` (the last axis holds the head's coordinates)."""
    if isinstance(seq_dim, bool) or not isinstance(seq_dim, numbers.Integral):
        raise TypeError(f"seq_dim must be an integer axis such as -2 or 1, got {seq_dim!r}")
    if int(seq_dim) == -1:
        raise ValueError("seq_dim must not be -1: the last axis holds the head's coordinates")
    return int(seq_dim)


def check_rotary_input(name: str, x: object, seq_dim: int, head_dim: int | None = None) -> tuple[torch.Tensor, int]:
    """A floating-point tensor ``(..., seq, ..., head_dim)`` and its non-negative sequence axis."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor (float16/bfloat16/float32/float64), got dtype {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"{name} must have shape (..., seq, head_dim), got {tuple(x.shape)}")
    if head_dim is not None and x.shape[-1] != head_dim:
        raise ValueError(f"{name} must have shape (..., seq, {head_dim}) (head_dim={head_dim}), got {tuple(x.shape)}")
    axis = seq_dim + x.ndim if seq_dim < 0 else seq_dim
    if not 0 <= axis < x.ndim - 1:
        raise ValueError(
            f"seq_dim={seq_dim} is not a sequence axis of {name} with shape {tuple(x.shape)}: "
            f"accepted {-x.ndim} .. -2 or 0 .. {x.ndim - 2}"
        )
    return x, axis


def check_rotary_width(head_dim: int, rotary_dim: object, partial_rotary_factor: object) -> int:
    """The rotated width: ``rotary_dim``, ``int(head_dim * partial_rotary_factor)`` or ``head_dim``; even."""
    width = head_dim
    if partial_rotary_factor is not None:
        if isinstance(partial_rotary_factor, bool) or not isinstance(partial_rotary_factor, numbers.Real):
            raise TypeError(f"partial_rotary_factor must be a number in (0, 1], got {partial_rotary_factor!r}")
        if not 0.0 < float(partial_rotary_factor) <= 1.0:
            raise ValueError(f"partial_rotary_factor must be a number in (0, 1], got {partial_rotary_factor}")
        width = int(head_dim * float(partial_rotary_factor))  # as transformers computes it
        if width < 2 or width % 2:
            raise ValueError(
                f"partial_rotary_factor={partial_rotary_factor} gives int(head_dim * factor) = {width} rotated "
                f"coordinates for head_dim={head_dim}; RoPE needs an even number >= 2"
            )
    if rotary_dim is not None:
        rotary_dim = check_int("rotary_dim", rotary_dim, minimum=2)
        if partial_rotary_factor is not None and rotary_dim != width:
            raise ValueError(f"rotary_dim={rotary_dim} differs from int(head_dim * partial_rotary_factor) = {width}; pass one")
        if rotary_dim > head_dim:
            raise ValueError(f"rotary_dim must be at most head_dim={head_dim}, got {rotary_dim}")
        width = rotary_dim
    if width % 2:
        name = "head_dim" if width == head_dim else "rotary_dim"
        raise ValueError(f"{name} must be even (RoPE rotates pairs of coordinates), got {width}")
    return width


def check_rotary_positions(positions: object, x: torch.Tensor | None, axis: int, device: torch.device | None) -> torch.Tensor:
    """Type, dtype, rank, device and shape of rotary ``positions`` (never their values: no sync)."""
    if isinstance(positions, (bool, numbers.Number)):
        raise TypeError(
            "positions must be a 1-D sequence of length seq (or a 2-D (batch, seq) tensor), "
            f"got the scalar {positions!r} (pass offset= for positions offset, offset + 1, ...)"
        )
    if not isinstance(positions, torch.Tensor):
        if not isinstance(positions, (list, tuple, np.ndarray)):
            raise TypeError(f"positions must be a tensor or a sequence of numbers, got {type(positions).__name__}")
        try:
            arr = np.asarray(positions)
        except (ValueError, TypeError) as err:
            raise TypeError(f"positions must be a rectangular sequence of numbers: {err}") from None
        if arr.dtype == np.float16 or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
            raise TypeError(f"positions must hold integers or float32/float64 numbers, got dtype {arr.dtype}")
        positions = torch.as_tensor(np.ascontiguousarray(arr.astype(np.int64 if arr.dtype.kind in "iu" else arr.dtype)), device=device)
    p = positions
    if p.dtype in (torch.float16, torch.bfloat16):
        raise TypeError(
            f"positions must be integers or float32/float64, got {p.dtype}: a 16-bit float "
            "cannot represent large positions (bf16 rounds 257 to 256)"
        )
    if p.dtype == torch.bool or p.is_complex():
        raise TypeError(f"positions must be integers or float32/float64, got {p.dtype}")
    if p.ndim not in (1, 2):
        raise ValueError(f"positions must have shape (seq,) or (batch, seq), got {tuple(p.shape)}")
    if device is not None and p.device != device:
        raise ValueError(
            f"positions are on {p.device} but must be on {device} (the device of x); move them with positions.to(x.device)"
        )
    if x is not None:
        seq = x.shape[axis]
        ok = p.shape[0] == seq if p.ndim == 1 else (axis >= 1 and p.shape[1] == seq and p.shape[0] in (1, x.shape[0]))
        if not ok:
            raise ValueError(
                f"positions must have shape (seq,) = ({seq},) or (batch, seq) = ({x.shape[0]}, {seq}) with "
                f"the batch on axis 0 and the sequence on axis {axis} of x of shape {tuple(x.shape)}, got {tuple(p.shape)}"
            )
    return p


def check_finite_positions(p: torch.Tensor, check_values: bool | None) -> None:
    """Finite float positions, checked as :func:`should_check_values` says."""
    if p.is_floating_point() and p.device.type != "meta" and should_check_values(check_values, p):
        if not bool(torch.isfinite(p).all()):
            raise ValueError("positions must be finite numbers, got NaN or infinity")


def rotary_offset(offset: object, positions: object, x: torch.Tensor, axis: int) -> tuple[int, torch.Tensor | None]:
    """``(offset, None)`` for an int offset, or ``(0, offset + arange(seq))`` for a tensor one (no sync)."""
    if positions is not None:
        if not (isinstance(offset, numbers.Integral) and not isinstance(offset, bool) and offset == 0):
            raise ValueError("pass either positions or offset, not both (offset is added only to the default positions)")
        return 0, None
    if isinstance(offset, torch.Tensor):
        if offset.is_floating_point() or offset.is_complex() or offset.dtype == torch.bool:
            raise TypeError(f"offset must be an int or an integer tensor, got dtype {offset.dtype}")
        if offset.ndim > 1 or (offset.ndim == 1 and (axis == 0 or offset.shape[0] not in (1, x.shape[0]))):
            raise ValueError(
                f"a tensor offset must be 0-d, or (batch,) for x of shape (batch, ..., seq, ...), got shape "
                f"{tuple(offset.shape)} for x of shape {tuple(x.shape)}"
            )
        if offset.device != x.device:
            raise ValueError(f"offset must be on x's device ({x.device}), got {offset.device}")
        return 0, offset[..., None] + torch.arange(x.shape[axis], device=x.device, dtype=offset.dtype)
    return check_int("offset", offset, minimum=0), None


def check_rotary_tables(
    q: object, k: object, tables: object, sin: object, layout: object, rotary_dim: object, seq_dim: object, check_values: bool | None
):
    """Validate the arguments of ``apply_rotary_tables``: ``(cos, sin, layout, [(q, axis), (k, axis)])``."""
    from .rope.core import LAYOUTS, RotaryTables

    seq_dim = check_seq_dim(seq_dim)
    if isinstance(tables, RotaryTables):
        if sin is not None:
            raise TypeError("pass RotaryTables alone, or the raw cos and sin tensors, not both")
        if layout is not None and layout != tables.layout:
            raise ValueError(f"layout={layout!r} differs from the layout of the tables ({tables.layout!r}); they were made for another layout")
        if rotary_dim is not None and rotary_dim != tables.rotary_dim:
            raise ValueError(f"rotary_dim={rotary_dim!r} differs from the tables' rotary_dim ({tables.rotary_dim})")
        cos, sin, layout, rotary_dim = tables
    elif isinstance(tables, torch.Tensor) and isinstance(sin, torch.Tensor):
        cos = tables
    else:
        raise TypeError(
            "tables must be the RotaryTables of RotaryEmbedding.tables (or the raw cos and sin tensors), "
            f"got {type(tables).__name__}"
        )
    layout = check_choice("layout", "half" if layout is None else layout, LAYOUTS)
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tables.{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"tables.{name} must be float32 or float64 (16-bit tables lose the rotation's precision), got {t.dtype}")
        if t.ndim not in (2, 3) or t.shape[-1] < 1:
            raise ValueError(f"tables.{name} must have shape (seq, rotary_dim/2) or (batch, seq, rotary_dim/2), got {tuple(t.shape)}")
    if cos.shape != sin.shape or cos.dtype != sin.dtype or cos.device != sin.device:
        raise ValueError(
            f"cos and sin must have the same shape, dtype and device, got {tuple(cos.shape)} {cos.dtype} "
            f"{cos.device} and {tuple(sin.shape)} {sin.dtype} {sin.device}"
        )
    n = cos.shape[-1]
    full_width = "Hugging Face's full-width [cos | cos] format; pass cos[..., : rotary_dim // 2] and the same of sin"
    if rotary_dim is not None:
        rotary_dim = check_int("rotary_dim", rotary_dim, minimum=2)
        if n == rotary_dim and n % 2 == 0 and not isinstance(n, torch.SymInt):
            raise ValueError(f"the tables have rotary_dim = {rotary_dim} columns, not rotary_dim / 2 pairs: {full_width}")
        if 2 * n != rotary_dim:
            raise ValueError(f"the tables hold {n} pairs but rotary_dim={rotary_dim} needs {rotary_dim} / 2")
    if should_check_values(check_values, cos) and cos.numel() and cos.device.type != "meta":
        half = n // 2
        if n % 2 == 0 and torch.equal(cos[..., :half], cos[..., half:]) and torch.equal(sin[..., :half], sin[..., half:]) and bool(sin.any()):
            raise ValueError(f"the tables repeat their first half: {full_width}")
        if bool(((cos == 0).all(-1) & (sin != 0).all(-1)).any()):
            raise ValueError(
                "cos and sin look swapped: a row of cos is 0 for every pair where sin is not (position 0 has cos 1, sin 0)"
            )
    out = []
    for name, t in (("q", q), ("k", k)):
        t, axis = check_rotary_input(name, t, seq_dim)
        if t.device != cos.device:
            raise ValueError(f"{name} is on {t.device} but the tables are on {cos.device}; they must share a device")
        if t.shape[-1] < 2 * n:
            raise ValueError(f"{name} has head_dim {t.shape[-1]} but the tables rotate {2 * n} coordinates ({n} pairs)")
        seq = t.shape[axis]
        if cos.shape[-2] != seq or (cos.ndim == 3 and (axis == 0 or cos.shape[0] not in (1, t.shape[0]))):
            raise ValueError(
                f"tables of shape {tuple(cos.shape)} do not fit {name} of shape {tuple(t.shape)} "
                f"(sequence on axis {axis}: expected ({seq}, {n}) or ({t.shape[0]}, {seq}, {n}))"
            )
        out.append((t, axis))
    return cos, sin, layout, out
