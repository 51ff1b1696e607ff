"""``RotaryEmbedding`` and the functional API: the checked boundary around :mod:`posenc.rope.core`."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from .._checks import (
    check_choice,
    check_int,
    check_memory,
    check_optional_bool,
    check_positive_float,
    should_check_values,
)
from ._checks import (
    check_finite_positions,
    check_head_dim,
    check_rotary_input,
    check_rotary_positions,
    check_rotary_tables,
    check_rotary_width,
    check_seq_dim,
    remember,
    rotary_offset,
)
from . import scaling as sc
from .core import LAYOUTS, MAX_POSITION, RotaryTables, cos_sin, fixed_point_turns, host_tables, inv_frequencies, turn_limbs
from .kernels import rotate_fast, rotation_table


def _resolve(
    head_dim: object,
    base: object,
    scaling: object,
    rotary_dim: object,
    partial_rotary_factor: object,
    max_position_embeddings: object,
) -> tuple[int, float, int, Any]:
    """``(head_dim, base, rotary_dim, scaling)`` from the arguments, a Hugging Face dict taken as is."""
    head_dim = check_head_dim("head_dim", head_dim)
    theta = None
    if isinstance(scaling, Mapping) or scaling is None:
        theta, partial_in_dict, scaling = sc.from_hf(scaling, max_position_embeddings=max_position_embeddings)
        if partial_in_dict is not None:
            if partial_rotary_factor is not None and partial_rotary_factor != partial_in_dict:
                raise ValueError(
                    f"partial_rotary_factor={partial_rotary_factor} differs from scaling['partial_rotary_factor']="
                    f"{partial_in_dict}; pass one"
                )
            partial_rotary_factor = partial_in_dict
    elif not isinstance(scaling, tuple(sc.SCALINGS.values())):
        raise TypeError(
            f"scaling must be None, a dataclass of posenc.rope.scaling (Linear, NTK, Dynamic, YaRN, Llama3, "
            f"LongRoPE, Proportional) or a Hugging Face dict, got {type(scaling).__name__}"
        )
    if base is None:
        base = 10000.0 if theta is None else theta
    base = check_positive_float("base", base)
    if base <= 1.0:
        raise ValueError(f"base must be a finite number > 1 (frequencies base**(-2j/d) must decrease), got {base}")
    if theta is not None and theta != base:
        raise ValueError(f"scaling['rope_theta']={theta!r} differs from base={base!r}; pass one")
    width = check_rotary_width(head_dim, rotary_dim, partial_rotary_factor)
    return head_dim, base, width, scaling


def _frequencies(scaling: Any, dim: int, base: float, *, long: bool = False) -> tuple[float, ...]:
    if scaling is None:
        return inv_frequencies(dim, base)
    if long:
        return scaling.frequencies(dim, base, long=True)
    return scaling.frequencies(dim, base)


def _grown(scaling: sc.Dynamic, inv: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """Dynamic NTK on the device: ``omega_j * g**(-2j / (d - 2))``, ``g`` the growth at length ``n`` (1 up to L)."""
    d, s, L = 2 * inv.shape[-1], scaling.factor, scaling.original_max_position_embeddings
    g = torch.clamp(s * n.to(inv.dtype) / L - (s - 1), min=1.0)
    return inv * g ** (-(torch.arange(0, d, 2, device=inv.device, dtype=inv.dtype) / (d - 2)))


def _tables_at(
    p: torch.Tensor, dtype: torch.dtype, scaling: Any, dim: int, base: float, buffers: Mapping[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin at positions ``p``; ``buffers`` (on ``p``'s device): ``turns``, ``inv_freq`` and,
    optionally, the host table ``cos``/``sin`` and LongRoPE's ``long_turns``/``long_inv_freq``.

    The only place that knows the types whose frequencies depend on the call's length.
    """
    factor = 1.0 if scaling is None else float(scaling.attention_scaling())
    switch = isinstance(scaling, (sc.Dynamic, sc.LongRoPE)) and p.numel() > 0
    longer = p.max() + 1 > scaling.original_max_position_embeddings if switch else None
    if dtype == torch.float64:  # x is float64, so the device has float64
        inv = torch.tensor(_frequencies(scaling, dim, base), dtype=torch.float64, device=p.device)
        if isinstance(scaling, sc.LongRoPE) and switch:
            long = torch.tensor(_frequencies(scaling, dim, base, long=True), dtype=torch.float64, device=p.device)
            inv = torch.where(longer, long, inv)
        elif switch:
            inv = _grown(scaling, inv, p.max() + 1)
        angles = p.to(torch.float64)[..., None] * inv
        return factor * torch.cos(angles), factor * torch.sin(angles)
    table = (buffers["cos"], buffers["sin"]) if "cos" in buffers else None
    cos, sin = cos_sin(p, buffers["turns"], buffers["inv_freq"], factor, table)
    if not switch:
        return cos, sin
    if isinstance(scaling, sc.LongRoPE):
        lc, ls = cos_sin(p, buffers["long_turns"], buffers["long_inv_freq"], factor)
    else:  # dynamic: float32 frequencies and angles on the device, as transformers computes them (not exact)
        angles = p.to(torch.float32)[..., None] * _grown(scaling, buffers["inv_freq"], p.max() + 1)
        lc, ls = torch.cos(angles), torch.sin(angles)
    return torch.where(longer, lc, cos), torch.where(longer, ls, sin)


_FLOAT_BUFFERS = ("cos", "sin", "rot", "inv_freq", "long_inv_freq")


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE): rotates queries or keys by their positions.

    Apply it to ``q`` and ``k`` (never ``v``) after the projections and the split into
    heads; the score ``q_m . k_n`` then depends on ``m - n`` only.

    Args:
        head_dim: width of one head; even unless ``rotary_dim`` is smaller.
        base: the RoPE base (10,000 in RoFormer and Llama 2, 500,000 in Llama 3);
            ``None``: the ``rope_theta`` of a Hugging Face dict, else 10,000.
        layout: ``"half"`` pairs ``(j, j + d/2)`` (GPT-NeoX, Hugging Face);
            ``"interleaved"`` pairs ``(2j, 2j + 1)`` (RoFormer, Meta, torchtune).
        scaling: ``None``, a dataclass of :mod:`posenc.rope.scaling` (``Linear``,
            ``NTK``, ``Dynamic``, ``YaRN``, ``Llama3``, ``LongRoPE``, ``Proportional``)
            or a Hugging Face ``rope_parameters`` dict as it is (``rope_type``,
            ``rope_theta``, ``partial_rotary_factor``, ``original_max_position_embeddings``).
        rotary_dim: rotate only the first ``rotary_dim`` coordinates (partial rotary,
            with the frequencies of a ``rotary_dim``-wide head); the rest pass through.
        partial_rotary_factor: Hugging Face's form: ``rotary_dim = int(head_dim * factor)``.
        seq_dim: the sequence axis of ``x``: ``-2`` for ``(batch, heads, seq, head_dim)``,
            ``1`` for ``(batch, seq, heads, head_dim)``.
        max_position_embeddings: the model's maximum length, as in a Hugging Face config
            (the length of ``"dynamic"``; fills a missing ``original_max_position_embeddings``).
        max_len: positions ``0 .. max_len - 1`` get a table computed once on the host in
            float64 and kept in float32; other positions are computed per call (exact
            int64 range reduction, float32 cos and sin: within 5e-7 below ``2**33``,
            see :mod:`posenc.rope.core`); positions from ``2**43`` on are refused.
        check_values: check that float positions are finite: ``None`` on the CPU outside
            ``torch.compile``, ``True`` always (a host-device sync), ``False`` never.

    Shapes:
        ``forward(x, *, positions=None, offset=0)``: ``x`` is ``(..., seq, head_dim)``;
        ``positions`` ``(seq,)`` or ``(batch, seq)`` on the device of ``x`` (integers, or
        float32/float64 for fractional positions); by default ``offset + arange(seq)``,
        ``offset`` an int or an integer tensor (0-d or ``(batch,)``, no host-device sync).
        Returns a new tensor of the shape and dtype of ``x`` (16-bit inputs are rotated in
        float32, float64 inputs in float64).

    ``forward`` never assigns to the module (thread-safe, one graph under
    ``torch.compile``); a module cast such as ``.half()`` keeps the tables in float32.
    ``"dynamic"`` scaling beyond its length is the one path whose float32 angles are not
    exact: its frequencies depend on the call's positions, so they are grown on the
    device in float32 and multiplied by float32 positions, as ``transformers`` does (with
    ``base=5e5``, ``head_dim=128``, factor 8 from 8,192 the rotated vectors differ from
    float64 by 0.1 at position ``2**20`` and 1.8 at ``10 * 2**20``, as chapter 4
    measures on 64 standard-normal vectors); float64 inputs give exact angles there too.
    ``transformers`` also keeps the grown frequencies between calls, posenc does not.

    Example:
        >>> rope = RotaryEmbedding(16)
        >>> q = torch.randn(1, 2, 5, 16)
        >>> step = rope(q[:, :, 4:], offset=4)  # decoding the 5th token
        >>> bool(torch.allclose(step, rope(q)[:, :, 4:], atol=1e-6))
        True
        >>> RotaryEmbedding(64, scaling={"rope_type": "linear", "factor": 4.0, "rope_theta": 5e5}).base
        500000.0
    """

    cos: torch.Tensor
    sin: torch.Tensor
    turns: torch.Tensor
    inv_freq: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        *,
        base: float | None = None,
        layout: str = "half",
        scaling: Any = None,
        rotary_dim: int | None = None,
        partial_rotary_factor: float | None = None,
        seq_dim: int = -2,
        max_position_embeddings: int | None = None,
        max_len: int = 2048,
        check_values: bool | None = None,
    ) -> None:
        super().__init__()
        self.head_dim, self.base, self.rotary_dim, self.scaling = _resolve(
            head_dim, base, scaling, rotary_dim, partial_rotary_factor, max_position_embeddings
        )
        self.layout = check_choice("layout", layout, LAYOUTS)
        self.seq_dim = check_seq_dim(seq_dim)
        self.max_len = check_int("max_len", max_len, minimum=0)
        if self.max_len * self.rotary_dim > 1 << 28:
            raise ValueError(f"max_len={self.max_len} positions of {self.rotary_dim} rotated coordinates: more than 2**28 table entries")
        self.check_values = check_optional_bool("check_values", check_values)
        self.attention_factor = 1.0 if self.scaling is None else float(self.scaling.attention_scaling())
        # the length from which "dynamic" and "longrope" change their frequencies
        self._switch = None
        if isinstance(self.scaling, (sc.Dynamic, sc.LongRoPE)):
            self._switch = self.scaling.original_max_position_embeddings
        n = self.rotary_dim // 2
        self.register_buffer("cos", torch.empty(self.max_len, n), persistent=False)
        self.register_buffer("sin", torch.empty(self.max_len, n), persistent=False)
        self.register_buffer("turns", torch.empty(3, n, dtype=torch.int64), persistent=False)
        self.register_buffer("inv_freq", torch.empty(n), persistent=False)
        # the table the eager kernel of the layout multiplies by, for the default positions
        rot_shape = (self.max_len, 2 * n) if self.layout == "half" else (self.max_len, n, 2)
        self.register_buffer("rot", torch.empty(rot_shape), persistent=False)
        if isinstance(self.scaling, sc.LongRoPE):
            self.register_buffer("long_turns", torch.empty(3, n, dtype=torch.int64), persistent=False)
            self.register_buffer("long_inv_freq", torch.empty(n), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Recompute the buffers (after meta-device initialisation, or a cast of the tables that
        bypassed ``torch.nn.Module._apply``, such as FSDP's ``buffer_dtype``)."""
        self._float32_buffers()
        if self.cos.device.type == "meta":
            return
        inv = _frequencies(self.scaling, self.rotary_dim, self.base)
        cos, sin = host_tables(inv, self.max_len, self.attention_factor)
        with torch.no_grad():
            self.cos.copy_(cos)
            self.sin.copy_(sin)
            self.rot.copy_(rotation_table(cos, sin, self.layout))
            self.turns.copy_(fixed_point_turns(inv))
            self.inv_freq.copy_(torch.tensor(inv, dtype=torch.float32))
            if isinstance(self.scaling, sc.LongRoPE):
                long = _frequencies(self.scaling, self.rotary_dim, self.base, long=True)
                self.long_turns.copy_(fixed_point_turns(long))
                self.long_inv_freq.copy_(torch.tensor(long, dtype=torch.float32))

    def _float32_buffers(self) -> bool:
        """Replace the float buffers that are not float32 by empty float32 ones; whether any was."""
        replaced = False
        for name in _FLOAT_BUFFERS:
            b = getattr(self, name, None)
            if b is not None and b.dtype != torch.float32:
                setattr(self, name, torch.empty(b.shape, dtype=torch.float32, device=b.device))
                replaced = True
        return replaced

    def _apply(self, fn, recurse=True):  # type: ignore[override]
        """A module cast (``.half()``, ``.double()``) keeps the tables float32: angles are never formed in 16 bits.

        A move off the meta device (``to_empty``) recomputes the tables, which would otherwise be
        uninitialised memory.
        """
        was_meta = self.cos.device.type == "meta"
        super()._apply(fn, recurse)
        if self._float32_buffers() or (was_meta and self.cos.device.type != "meta"):
            self.reset_parameters()
        return self

    def _check_state(self, device: torch.device | None) -> None:
        """Refuse tables that cannot serve a call on ``device`` (metadata only: free under compile)."""
        if self.cos.device.type == "meta" and (device is None or device.type != "meta"):
            raise ValueError(
                "the module is on the meta device: move it with to_empty(device=...) (which recomputes the tables) "
                "or build it on the input's device"
            )
        if device is not None and device.type != "meta" and self.cos.device != device:  # meta x: shapes only
            raise ValueError(f"x must be on the module's device ({self.cos.device}), got {device}; move one of them")
        buffers = self._buffers  # not getattr: this runs on every call
        for name in _FLOAT_BUFFERS:
            b = buffers.get(name)
            if b is not None and b.dtype != torch.float32:
                raise ValueError(
                    f"the module's table {name!r} is {b.dtype}, not float32: something cast the buffers outside "
                    "Module._apply (FSDP's MixedPrecision(buffer_dtype=...) does); call reset_parameters() after "
                    "wrapping, or keep buffer_dtype=None or torch.float32"
                )

    # -- tables

    def _tables(self, p: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """cos, sin (and the kernel's table when gathered) at integer or float positions ``p``.

        Where the positions' values can be read without a host-device sync (the CPU outside
        ``torch.compile``, or ``check_values=True``) and they all lie in the table, the rows are
        gathered: no fixed-point work, the same numbers.
        """
        if p.numel() and p.device.type != "meta" and should_check_values(self.check_values, p):
            lo, hi = torch.aminmax(p)
            lo, hi = lo.item(), hi.item()
            if not -MAX_POSITION < lo <= hi < MAX_POSITION:
                raise ValueError(
                    f"positions must lie in (-2**43, 2**43) (the exact range reduction), got values from {lo} to {hi}"
                )
            end = self.max_len if self._switch is None else min(self.max_len, self._switch)
            if dtype == torch.float32 and not p.is_floating_point() and p.device == self.cos.device and lo >= 0 and hi < end:
                return self.cos[p], self.sin[p], self.rot[p]
        if p.device == self.cos.device:
            buffers = dict(self._buffers)
        else:  # tables(device=...) for another device than the module's
            buffers = {name: t.to(p.device) for name, t in self._buffers.items() if t is not None}
        return (*_tables_at(p, dtype, self.scaling, self.rotary_dim, self.base, buffers), None)

    def _default(
        self, seq: int, offset: int, device: torch.device, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """cos, sin (and the kernel's table) for ``offset .. offset + seq - 1``: slices where the table holds them."""
        end = offset + seq
        traced = isinstance(end, torch.SymInt) or torch.compiler.is_compiling()
        in_table = not traced and end <= self.max_len and (self._switch is None or end <= self._switch)
        if dtype == torch.float32 and in_table and self.cos.device == device:
            return self.cos[offset:end], self.sin[offset:end], self.rot[offset:end]
        if not traced and end > MAX_POSITION:
            raise ValueError(f"offset + seq must be at most 2**43 (the exact range reduction), got {end}")
        return self._tables(torch.arange(seq, device=device) + offset, dtype)

    def tables(
        self,
        positions: Any = None,
        *,
        seq_len: int | None = None,
        offset: int = 0,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> RotaryTables:
        """The tables for ``positions``: compute once per forward pass, apply in every layer.

        Args:
            positions: position ids ``(seq,)`` or ``(batch, seq)`` on the module's device, or
                ``None`` for ``offset + arange(seq_len)``.
            seq_len, offset: the default positions (without ``positions``).
            device: where default positions' tables go (default: the module's device).
            dtype: ``torch.float32`` (default) or ``torch.float64``.

        Returns:
            :class:`~posenc.rope.core.RotaryTables` ``(cos, sin, layout, rotary_dim)``,
            ``cos``/``sin`` of shape ``(*positions.shape, rotary_dim // 2)`` (YaRN's
            attention factor included). Apply them with :func:`apply_rotary_tables`.

        Example:
            >>> rope = RotaryEmbedding(8)
            >>> t = rope.tables(torch.tensor([[0, 1, 2], [5, 6, 7]]))
            >>> t.cos.shape, t.layout, t.rotary_dim
            (torch.Size([2, 3, 4]), 'half', 8)
        """
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
        if device is not None and not isinstance(device, (torch.device, str)) or isinstance(device, bool):
            raise TypeError(f"device must be a torch.device or a device string such as 'cpu', got {device!r}")
        try:
            device = self.cos.device if device is None else torch.device(device)
        except RuntimeError as err:
            raise TypeError(f"device must be a torch.device or a device string such as 'cpu', got {device!r}") from err
        if positions is None:
            if seq_len is None:
                raise ValueError("pass positions, or seq_len (with an optional offset) for offset + arange(seq_len)")
            seq_len = check_int("seq_len", seq_len, minimum=0)
            offset = check_int("offset", offset, minimum=0)
            check_memory("the tables (2, seq_len, rotary_dim / 2)", 2, seq_len, self.rotary_dim // 2, dtype=dtype,
                         device=device, scratch=16 * seq_len)
            cos, sin, _ = self._default(seq_len, offset, device, dtype)
            return self._made(cos.clone(), sin.clone())
        if seq_len is not None or not (isinstance(offset, int) and offset == 0):
            raise ValueError("pass either positions, or seq_len and offset, not both")
        self._check_state(None)
        p = check_rotary_positions(positions, None, 0, device)
        check_finite_positions(p, self.check_values)
        return self._made(*self._tables(p, dtype)[:2])

    def _made(self, cos: torch.Tensor, sin: torch.Tensor) -> RotaryTables:
        if not torch.compiler.is_compiling():
            remember(cos, sin)  # checked here: applying them skips the value checks
        return RotaryTables(cos, sin, self.layout, self.rotary_dim)

    def hf_tables(self, positions: Any, *, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
        """The tables for ``positions`` in Hugging Face's full-width format, for its ``apply_rotary_pos_emb``.

        ``cos`` and ``sin`` of shape ``(*positions.shape, rotary_dim)``: ``[cos | cos]`` for the
        half layout (Llama, Qwen, GPT-NeoX, Phi), each pair's value twice in a row for the
        interleaved one (GPT-J's ``repeat_interleave``). posenc's angles (exact at any
        position), cast to ``dtype`` at the end as Hugging Face does with ``x.dtype``.
        ``posenc.rope.HuggingFaceRotary`` puts them in place of a model's ``rotary_emb``.

        Example:
            >>> cos, sin = RotaryEmbedding(8).hf_tables(torch.arange(3)[None])
            >>> cos.shape, bool(torch.equal(cos[..., :4], cos[..., 4:]))
            (torch.Size([1, 3, 8]), True)
        """
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
        cos, sin, _, _ = self.tables(positions)
        if self.layout == "half":
            cos, sin = torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)
        else:
            cos, sin = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
        return cos.to(dtype), sin.to(dtype)

    def forward(self, x: torch.Tensor, *args: Any, positions: Any = None, offset: int | torch.Tensor = 0) -> torch.Tensor:
        """Rotate ``x`` ``(..., seq, head_dim)`` by ``positions`` (keyword) or ``offset + arange(seq)``."""
        if args:
            raise TypeError(
                f"RotaryEmbedding takes no positional argument after x (got {len(args)}): pass the position ids "
                "as a keyword, rope(x, positions=position_ids), or rope(x, offset=n) for n, n + 1, ..."
            )
        x, axis = check_rotary_input("x", x, self.seq_dim, self.head_dim)
        self._check_state(x.device)
        offset, from_offset = rotary_offset(offset, positions, x, axis)
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        rot = None
        if positions is None and from_offset is None:
            cos, sin, rot = self._default(x.shape[axis], offset, x.device, dtype)
        else:
            p = from_offset if from_offset is not None else check_rotary_positions(positions, x, axis, x.device)
            check_finite_positions(p, self.check_values)
            cos, sin, rot = self._tables(p, dtype)
        return rotate_fast(x, cos, sin, self.layout, axis, rot)

    def extra_repr(self) -> str:
        s = f"head_dim={self.head_dim}, base={self.base:g}, layout={self.layout!r}"
        if self.rotary_dim != self.head_dim:
            s += f", rotary_dim={self.rotary_dim}"
        if self.seq_dim != -2:
            s += f", seq_dim={self.seq_dim}"
        return s + (f", scaling={self.scaling}" if self.scaling is not None else "")


# ------------------------------------------------------------------------ functional


@functools.lru_cache(maxsize=64)
def _constants(head_dim: int, base: float, scaling: Any, rotary_dim: int) -> tuple[Any, ...]:
    """Frequencies of a configuration as Python numbers (no numpy: traceable, cached in eager mode)."""
    inv = _frequencies(scaling, rotary_dim, base)
    turns = turn_limbs(inv)
    long = None
    if isinstance(scaling, sc.LongRoPE):
        long_inv = _frequencies(scaling, rotary_dim, base, long=True)
        long = (turn_limbs(long_inv), long_inv)
    return inv, turns, long


@functools.lru_cache(maxsize=64)
def _device_constants(head_dim: int, base: float, scaling: Any, rotary_dim: int, device: torch.device) -> dict[str, torch.Tensor]:
    """The frequencies of a configuration as tensors on ``device`` (``turns``, ``inv_freq`` and LongRoPE's long ones)."""
    inv, turns, long = _constants(head_dim, base, scaling, rotary_dim)
    with torch.inference_mode(False):  # ordinary tensors, usable outside inference mode later
        out = {
            "turns": torch.tensor(turns, dtype=torch.int64, device=device),
            "inv_freq": torch.tensor(inv, dtype=torch.float32, device=device),
        }
        if long is not None:
            out["long_turns"] = torch.tensor(long[0], dtype=torch.int64, device=device)
            out["long_inv_freq"] = torch.tensor(long[1], dtype=torch.float32, device=device)
    return out


def apply_rotary(
    x: torch.Tensor,
    positions: Any,
    *,
    base: float | None = None,
    layout: str = "half",
    scaling: Any = None,
    rotary_dim: int | None = None,
    seq_dim: int = -2,
    max_position_embeddings: int | None = None,
) -> torch.Tensor:
    """Rotate ``x`` by ``positions`` without a module; compiles with ``torch.compile(fullgraph=True)``.

    Args:
        x: queries or keys ``(..., seq, head_dim)`` (or the sequence on ``seq_dim``).
        positions: ``(seq,)`` or ``(batch, seq)`` positions on the device of ``x``.
        base, layout, scaling, rotary_dim, seq_dim, max_position_embeddings: as in
            :class:`RotaryEmbedding`.

    Returns:
        A new tensor of the shape and dtype of ``x``.

    Example:
        >>> q = torch.randn(2, 4, 8, 16)
        >>> bool(torch.allclose(apply_rotary(q, torch.zeros(8, dtype=torch.long)), q))
        True
    """
    layout = check_choice("layout", layout, LAYOUTS)
    x, axis = check_rotary_input("x", x, check_seq_dim(seq_dim))
    head_dim, base, width, scaling = _resolve(x.shape[-1], base, scaling, rotary_dim, None, max_position_embeddings)
    p = check_rotary_positions(positions, x, axis, x.device)
    check_finite_positions(p, None)
    if torch.compiler.is_compiling():  # constants of the graph
        buffers = _device_constants.__wrapped__(head_dim, base, scaling, width, x.device)
    else:  # made once per configuration and device: no host-to-device copy per call
        buffers = _device_constants(head_dim, base, scaling, width, x.device)
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    cos, sin = _tables_at(p, dtype, scaling, width, base, buffers)
    return rotate_fast(x, cos, sin, layout, axis)


def apply_rotary_tables(
    q: torch.Tensor,
    k: torch.Tensor,
    tables: RotaryTables | torch.Tensor,
    sin: torch.Tensor | None = None,
    *,
    layout: str | None = None,
    rotary_dim: int | None = None,
    seq_dim: int = -2,
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys by tables (compute once per forward pass, apply in every layer).

    Args:
        q: queries ``(batch, heads, seq, head_dim)`` (or the sequence on ``seq_dim``).
        k: keys, the same layout (their head count may differ: grouped queries).
        tables: the :class:`~posenc.rope.core.RotaryTables` of :meth:`RotaryEmbedding.tables`
            (or a raw ``cos`` tensor ``(..., seq, rotary_dim // 2)``, with ``sin``).
        sin: only with a raw ``cos``.
        layout: must equal the tables' layout if given (raw tensors: default ``"half"``).
        rotary_dim: must equal the tables' if given; with raw tensors it lets
            Hugging Face's full-width ``[cos | cos]`` tables be recognised and refused.
        seq_dim: the sequence axis of ``q`` and ``k``.
        check_values: look at the tables' values for Hugging Face's full-width format and
            swapped cos/sin (``None``: on the CPU outside ``torch.compile``).

    Returns:
        ``(q_rotated, k_rotated)``, new tensors of the shapes and dtypes of ``q`` and ``k``.

    Example:
        >>> rope = RotaryEmbedding(16)
        >>> pos = torch.arange(5).expand(2, 5)  # (batch, seq) position ids
        >>> tables = rope.tables(pos)  # once per forward pass
        >>> q, k = torch.randn(2, 4, 5, 16), torch.randn(2, 1, 5, 16)
        >>> q_rot, k_rot = apply_rotary_tables(q, k, tables)  # in every layer
        >>> bool(torch.equal(q_rot, rope(q, positions=pos)))
        True
    """
    cos, sin, layout, ((q, q_axis), (k, k_axis)) = check_rotary_tables(
        q, k, tables, sin, layout, rotary_dim, seq_dim, check_optional_bool("check_values", check_values)
    )
    return rotate_fast(q, cos.to(_work(q)), sin.to(_work(q)), layout, q_axis), rotate_fast(
        k, cos.to(_work(k)), sin.to(_work(k)), layout, k_axis
    )


def _work(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str = "half", seq_dim: int = -2
) -> torch.Tensor:
    """Rotate ``x`` by given tables in either layout: the kernel, for other position schemes.

    ``cos``/``sin``: float32 or float64 ``(seq, n)`` or ``(batch, seq, n)``; the first
    ``2 n`` coordinates of ``x`` are rotated (pairs of ``layout``), the rest pass through.
    Used by the 2-D and multimodal rotary embeddings, whose tables mix several position
    axes. No value checks.

    Example:
        >>> x = torch.randn(1, 3, 8)
        >>> bool(torch.equal(rotate(x, torch.ones(3, 4), torch.zeros(3, 4)), x))
        True
    """
    cos, sin, layout, ((x, axis), _) = check_rotary_tables(x, x, cos, sin, layout, None, seq_dim, False)
    return rotate_fast(x, cos.to(_work(x)), sin.to(_work(x)), layout, axis)


def frequencies(head_dim: int, *, base: float | None = None, scaling: Any = None, max_position_embeddings: int | None = None, seq_len: int | None = None) -> np.ndarray:
    """The angular frequencies of a configuration, float64 (``seq_len``: the length of a ``"dynamic"`` call)."""
    head_dim, base, width, scaling = _resolve(head_dim, base, scaling, None, None, max_position_embeddings)
    if seq_len is not None:
        seq_len = check_int("seq_len", seq_len)
        if isinstance(scaling, sc.Dynamic):
            return np.array(scaling.frequencies(width, base, seq_len=seq_len))
        if isinstance(scaling, sc.LongRoPE):
            return np.array(_frequencies(scaling, width, base, long=seq_len > scaling.original_max_position_embeddings))
    return np.array(_frequencies(scaling, width, base))



class HuggingFaceRotary(nn.Module):
    """A drop-in ``rotary_emb`` for Hugging Face models, with posenc's angles.

    ``forward(x, position_ids)`` returns ``(cos, sin)`` in the full-width format and dtype of
    ``x`` that the model's own ``apply_rotary_pos_emb`` takes (:meth:`RotaryEmbedding.hf_tables`),
    so a model keeps its attention code and gains angles exact at any position. Build the
    ``RotaryEmbedding`` from the model's config: ``RotaryEmbedding(config.head_dim,
    scaling=config.rope_parameters, max_position_embeddings=config.max_position_embeddings)``.

    Example:
        >>> rotary = HuggingFaceRotary(RotaryEmbedding(8))
        >>> cos, sin = rotary(torch.randn(1, 3, 32, dtype=torch.bfloat16), torch.arange(3)[None])
        >>> cos.shape, cos.dtype
        (torch.Size([1, 3, 8]), torch.bfloat16)
    """

    def __init__(self, rope: RotaryEmbedding) -> None:
        super().__init__()
        if not isinstance(rope, RotaryEmbedding):
            raise TypeError(f"rope must be a posenc RotaryEmbedding, got {type(rope).__name__}")
        self.rope = rope

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` ``(batch, seq, rotary_dim)`` in ``x``'s dtype for ``position_ids`` ``(batch, seq)``."""
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TypeError(f"x must be a floating-point tensor (its dtype is the tables'), got {type(x).__name__}")
        if isinstance(position_ids, torch.Tensor) and position_ids.device != x.device:
            raise ValueError(f"position_ids must be on x's device ({x.device}), got {position_ids.device}")
        return self.rope.hf_tables(position_ids, dtype=x.dtype)
