"""Learned absolute position embeddings (BERT, GPT-2): one trained vector per position."""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_int, check_sequence_input


class LearnedPositionalEmbedding(nn.Module):
    """A trainable table of ``max_len`` position vectors added to the input.

    There is no vector for a position at or beyond ``max_len``: asking for one raises a
    ``ValueError`` that says so, instead of an index error from inside ``torch``.

    Args:
        max_len: number of positions with a vector (512 in BERT, 1024 in GPT-2).
        d_model: width of the embeddings.
        init_std: standard deviation of the normal initialisation (0.02 as in BERT and
            GPT-2).

    Shapes:
        ``weight``: ``(max_len, d_model)``.
        ``forward(x, offset=0)``: ``x`` is ``(batch, seq, d_model)`` (or ``(seq, d_model)``);
        returns ``x + weight[offset : offset + seq]`` with the same shape.

    Example:
        >>> emb = LearnedPositionalEmbedding(max_len=8, d_model=4)
        >>> emb(torch.zeros(1, 3, 4)).shape
        torch.Size([1, 3, 4])
    """

    def __init__(self, max_len: int, d_model: int, *, init_std: float = 0.02) -> None:
        super().__init__()
        self.max_len = check_int("max_len", max_len)
        self.d_model = check_int("d_model", d_model)
        self.weight = nn.Parameter(torch.empty(self.max_len, self.d_model))
        nn.init.normal_(self.weight, std=init_std)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        check_sequence_input("x", x, self.d_model)
        offset = check_int("offset", offset, minimum=0)
        last = offset + x.shape[-2] - 1
        if last >= self.max_len:
            raise ValueError(
                f"position {last} is at or beyond max_len={self.max_len}: a learned absolute "
                "embedding has no vector for positions it was not built with"
            )
        return x + self.weight[offset : last + 1].to(x.dtype)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"
