"""Learned absolute position embeddings (BERT, GPT-2): one trained vector per position."""

from __future__ import annotations

import torch
from torch import nn

from ._checks import (
    MAX_PARAMETER_ELEMENTS,
    check_int,
    check_optional_bool,
    check_positive_float,
    check_sequence_input,
    check_size,
    position_rows,
)


class LearnedPositionalEmbedding(nn.Module):
    """A trainable table of ``max_len`` position vectors added to the input.

    There is no vector for a position at or beyond ``max_len``: asking for one raises a
    ``ValueError`` that says so, instead of an index error from inside ``torch``.

    Args:
        max_len: number of positions with a vector (512 in BERT, 1024 in GPT-2).
        d_model: width of the embeddings.
        init_std: standard deviation of the normal initialisation (0.02 as in BERT and
            GPT-2).
        check_values: whether ``forward`` checks that tensor positions lie in
            ``[0, max_len)``: ``None`` (default) on the CPU outside ``torch.compile``,
            ``True`` always (a host-device sync on an accelerator), ``False`` never.

    Shapes:
        ``weight``: ``(max_len, d_model)``.
        ``forward(x, *, offset=0, positions=None)``: ``x`` is ``(batch, seq, d_model)`` (or
        ``(seq, d_model)``), floating point; returns ``x + weight[offset : offset + seq]``
        for an int ``offset``, or ``x + weight[positions]`` for integer ``positions`` of
        shape ``(seq,)`` or ``x.shape[:-1]`` (left-padded or packed batches); a tensor
        ``offset`` (0-d or ``(batch,)``) means ``offset + arange(seq)``.

    Example:
        >>> emb = LearnedPositionalEmbedding(max_len=8, d_model=4)
        >>> emb(torch.zeros(1, 3, 4)).shape
        torch.Size([1, 3, 4])
        >>> out = emb(torch.zeros(2, 3, 4), positions=torch.tensor([[0, 0, 1], [0, 1, 2]]))
        >>> bool((out[0, 2] == emb.weight[1]).all())
        True
    """

    def __init__(
        self, max_len: int, d_model: int, *, init_std: float = 0.02, check_values: bool | None = None
    ) -> None:
        super().__init__()
        self.max_len = check_int("max_len", max_len)
        self.d_model = check_int("d_model", d_model)
        check_size("the weight (max_len, d_model)", self.max_len, self.d_model, limit=MAX_PARAMETER_ELEMENTS)
        self.init_std = check_positive_float("init_std", init_std)
        self.check_values = check_optional_bool("check_values", check_values)
        self.weight = nn.Parameter(torch.empty(self.max_len, self.d_model))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight again from ``N(0, init_std**2)``."""
        nn.init.normal_(self.weight, std=self.init_std)

    def forward(
        self, x: torch.Tensor, *, offset: int | torch.Tensor = 0, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = check_sequence_input("x", x, self.d_model)
        table = position_rows(self.weight, x, offset, positions, check_values=self.check_values, overflow=self._overflow)
        return x + table.to(x.dtype)

    def _overflow(self, offset: int, seq: int) -> str:
        return (
            f"position {offset + seq - 1} is at or beyond max_len={self.max_len}: a learned absolute "
            "embedding has no vector for positions it was not built with"
        )

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"
