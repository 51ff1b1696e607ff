"""Plain scaled dot-product self-attention, written out so that chapters can look inside."""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_int


def causal_mask(seq_len: int, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean mask of shape ``(seq_len, seq_len)``: ``True`` where query ``i`` may see key ``j <= i``.

    Example:
        >>> causal_mask(3).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
    """
    seq_len = check_int("seq_len", seq_len)
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


class SelfAttention(nn.Module):
    """Single-head scaled dot-product self-attention with explicit projections.

    ``softmax(Q K^T / sqrt(d_head) + bias, masked) V`` followed by an output projection,
    with ``Q = x W_q^T``, ``K = x W_k^T``, ``V = x W_v^T`` (no biases, so that the maths
    of the chapters holds term by term). Nothing in it depends on a token's position:
    any positional signal must come from ``x`` or from ``bias``.

    Args:
        d_model: width of the input and output.
        d_head: width of queries and keys (defaults to ``d_model``).

    Shapes:
        ``forward(x, mask=None, bias=None)``: ``x`` is ``(batch, seq, d_model)``; ``mask`` a
        boolean ``(seq, seq)`` (``True`` = may attend); ``bias`` an additive ``(seq, seq)``
        score bias. Returns ``(batch, seq, d_model)``. After a call, ``last_weights``
        holds the attention weights ``(batch, seq, seq)``.

    Example:
        >>> attn = SelfAttention(8)
        >>> attn(torch.randn(2, 5, 8)).shape
        torch.Size([2, 5, 8])
    """

    def __init__(self, d_model: int, d_head: int | None = None) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.d_head = self.d_model if d_head is None else check_int("d_head", d_head)
        self.w_q = nn.Linear(self.d_model, self.d_head, bias=False)
        self.w_k = nn.Linear(self.d_model, self.d_head, bias=False)
        self.w_v = nn.Linear(self.d_model, self.d_model, bias=False)
        self.w_o = nn.Linear(self.d_model, self.d_model, bias=False)
        self.last_weights: torch.Tensor | None = None

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != self.d_model:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be a tensor of shape (batch, seq, {self.d_model}), got {shape}")
        seq = x.shape[1]
        if mask is not None:
            if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
                got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
                raise TypeError(f"mask must be a boolean tensor (True = may attend) or None, got {got}")
            if mask.shape != (seq, seq):
                raise ValueError(f"mask must have shape (seq, seq) = ({seq}, {seq}), got {tuple(mask.shape)}")
        if bias is not None:
            if not isinstance(bias, torch.Tensor):
                raise TypeError(f"bias must be a tensor of shape ({seq}, {seq}) or None, got {type(bias).__name__}")
            if bias.shape[-2:] != (seq, seq):
                raise ValueError(f"bias must end in shape (seq, seq) = ({seq}, {seq}), got {tuple(bias.shape)}")
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        if bias is not None:
            scores = scores + bias
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        self.last_weights = weights.detach()
        return self.w_o(weights @ v)
