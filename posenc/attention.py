"""Scaled dot-product self-attention, written out so that every positional scheme can plug in.

One implementation serves the whole book and any model built from ``posenc``: single- or
multi-head, optionally causal, with three hooks where position can enter *inside*
attention:

* ``bias``: an additive score term, either a tensor broadcastable to
  ``(batch, n_heads, q_len, k_len)`` or an :class:`~posenc.bias.AttentionBias` module
  (ALiBi, T5, Shaw) that computes it from the queries;
* ``rotary``: a callable (typically :class:`~posenc.rotary.RotaryEmbedding`) applied to
  queries and keys of shape ``(batch, n_heads, seq, head_dim)`` before the dot product;
* position added to the input ``x`` itself (sinusoidal, learned) needs no hook.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from ._checks import MAX_PARAMETER_ELEMENTS, check_bool, check_device, check_int, check_size
from .bias import AttentionBias

__all__ = ["SelfAttention", "causal_mask"]


def causal_mask(seq_len: int, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean mask of shape ``(seq_len, seq_len)``: ``True`` where query ``i`` may see key ``j <= i``.

    Example:
        >>> causal_mask(3).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
    """
    seq_len = check_int("seq_len", seq_len)
    check_size("the mask (seq_len, seq_len)", seq_len, seq_len)
    device = check_device("device", device)
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention with explicit projections and position hooks.

    ``softmax(Q K^T / sqrt(head_dim) + bias, masked) V`` per head, followed by an output
    projection, with ``Q = x W_q^T``, ``K = x W_k^T``, ``V = x W_v^T`` (no projection
    biases, so that the maths of the chapters holds term by term). Nothing in it depends on
    a token's position: any positional signal must come from ``x``, ``bias`` or ``rotary``.

    Args:
        d_model: width of the input and output.
        n_heads: number of heads (default 1); with one head, ``head_dim`` may differ from
            ``d_model``; with several, ``head_dim`` defaults to ``d_model // n_heads``.
        head_dim: width of queries and keys of one head.
        causal: apply the causal mask (query ``i`` sees keys ``j <= i``) on every call.

    Shapes:
        ``forward(x, mask=None, bias=None, rotary=None, *, positions=None, need_weights=False)``: ``x`` is
        ``(batch, seq, d_model)``; ``mask`` a boolean ``(seq, seq)`` (``True`` = may
        attend), or one mask per example ``(batch, seq, seq)`` or per example and head
        ``(batch, n_heads, seq, seq)`` (packed or padded batches; a size of 1 broadcasts),
        combined with the causal mask when ``causal`` (with a per-example mask, a query
        that may see no key, such as a padding row, gets zero attention weights instead
        of NaN); ``bias`` a tensor
        broadcastable to ``(batch, n_heads, seq, seq)`` (a ``(seq, seq)`` bias applies to
        every head) or an :class:`~posenc.bias.AttentionBias` module called as
        ``bias.score_bias(q)`` on the queries ``(batch, n_heads, seq, head_dim)``; ``rotary`` a
        callable applied to queries and keys of that shape, called as
        ``rotary(q, positions=positions)`` when ``positions`` (``(seq,)`` or
        ``(batch, seq)`` position ids: left padding, packed documents, a KV cache's
        offsets) are given. Returns ``(batch, seq, d_model)``. With
        ``need_weights=True`` the attention weights are kept in ``last_weights``,
        ``(batch, seq, seq)`` for one head and ``(batch, n_heads, seq, seq)`` for several
        (eager mode only); otherwise nothing is kept.

    Example:
        >>> attn = SelfAttention(8)
        >>> attn(torch.randn(2, 5, 8)).shape
        torch.Size([2, 5, 8])
        >>> from posenc import RotaryEmbedding, ALiBiBias
        >>> mha = SelfAttention(16, n_heads=4, causal=True)
        >>> mha(torch.randn(2, 5, 16), bias=ALiBiBias(4), rotary=RotaryEmbedding(4)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, d_model: int, n_heads: int = 1, *, head_dim: int | None = None, causal: bool = False) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.n_heads = check_int("n_heads", n_heads)
        if head_dim is None:
            if self.d_model % self.n_heads:
                raise ValueError(f"n_heads must divide d_model={self.d_model}, got n_heads={self.n_heads}")
            head_dim = self.d_model // self.n_heads
        self.head_dim = check_int("head_dim", head_dim)
        if self.n_heads > 1 and self.head_dim * self.n_heads != self.d_model:
            raise ValueError(
                f"with n_heads={self.n_heads}, head_dim must be d_model / n_heads = {self.d_model / self.n_heads:g}, "
                f"got {self.head_dim}"
            )
        self.causal = check_bool("causal", causal)
        check_size(
            "a projection (d_model, n_heads * d_head)",
            self.d_model,
            self.n_heads * self.head_dim,
            limit=MAX_PARAMETER_ELEMENTS,
        )
        self.w_q = nn.Linear(self.d_model, self.n_heads * self.head_dim, bias=False)
        self.w_k = nn.Linear(self.d_model, self.n_heads * self.head_dim, bias=False)
        self.w_v = nn.Linear(self.d_model, self.d_model, bias=False)
        self.w_o = nn.Linear(self.d_model, self.d_model, bias=False)
        self.last_weights: torch.Tensor | None = None

    @property
    def d_head(self) -> int:
        """The old name of ``head_dim``, kept for code written against it."""
        return self.head_dim

    def reset_parameters(self) -> None:
        """Draw the four projections again (``nn.Linear``'s initialisation), e.g. after meta-device init."""
        for lin in (self.w_q, self.w_k, self.w_v, self.w_o):
            lin.reset_parameters()
        self.last_weights = None

    def _heads(self, t: torch.Tensor, width: int) -> torch.Tensor:
        b, s, _ = t.shape
        return t.view(b, s, self.n_heads, width).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        bias: torch.Tensor | AttentionBias | None = None,
        rotary: Callable[..., torch.Tensor] | None = None,
        *,
        positions: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor of shape (batch, seq, {self.d_model}), got {type(x).__name__}")
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be a tensor of shape (batch, seq, {self.d_model}), got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(
                f"x must be a floating-point tensor (float16, bfloat16, float32 or float64), got dtype {x.dtype}"
            )
        if x.device != self.w_q.weight.device:
            raise ValueError(f"x must be on the module's device ({self.w_q.weight.device}), got {x.device}")
        if x.dtype != self.w_q.weight.dtype and not torch.is_autocast_enabled(x.device.type):
            raise TypeError(
                f"x has dtype {x.dtype} but the module's weights are {self.w_q.weight.dtype}: cast one to the other "
                f"(e.g. module.to({x.dtype}) or x.to({self.w_q.weight.dtype}))"
            )
        check_bool("need_weights", need_weights)
        b, seq, _ = x.shape
        if mask is not None:
            if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
                got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
                raise TypeError(f"mask must be a boolean tensor (True = may attend) or None, got {got}")
            if (
                mask.ndim not in (2, 3, 4)
                or mask.shape[-2:] != (seq, seq)
                or (mask.ndim >= 3 and mask.shape[0] not in (1, b))
                or (mask.ndim == 4 and mask.shape[1] not in (1, self.n_heads))
            ):
                raise ValueError(
                    f"mask must have shape (seq, seq), (batch, seq, seq) or (batch, n_heads, seq, seq) with "
                    f"batch={b}, n_heads={self.n_heads}, seq={seq} (1 broadcasts), got {tuple(mask.shape)}"
                )
            if mask.ndim == 3:
                mask = mask[:, None]  # one mask per example, shared by the heads
            if mask.device != x.device:
                raise ValueError(f"mask must be on x's device ({x.device}), got {mask.device}")
        if bias is not None and not isinstance(bias, (torch.Tensor, AttentionBias)):
            raise TypeError(
                f"bias must be a tensor ending in ({seq}, {seq}), an AttentionBias module or None, "
                f"got {type(bias).__name__}"
            )
        if isinstance(bias, torch.Tensor):
            self._check_bias("bias", bias, b, seq, x.device)
        elif isinstance(bias, AttentionBias) and type(bias).score_bias is AttentionBias.score_bias:
            raise TypeError(f"bias: {type(bias).__name__} must implement score_bias(q, k_len) (see AttentionBias)")
        if rotary is not None and not callable(rotary):
            raise TypeError(f"rotary must be a callable such as RotaryEmbedding or None, got {type(rotary).__name__}")
        if positions is not None:
            if rotary is None:
                raise ValueError("positions are passed to the rotary hook: give rotary= with them")
            if not isinstance(positions, torch.Tensor) or positions.shape not in ((seq,), (b, seq)):
                got = tuple(positions.shape) if isinstance(positions, torch.Tensor) else type(positions).__name__
                raise ValueError(f"positions must be a tensor of shape (seq,) = ({seq},) or (batch, seq) = ({b}, {seq}), got {got}")
        q = self._heads(self.w_q(x), self.head_dim)
        k = self._heads(self.w_k(x), self.head_dim)
        v = self._heads(self.w_v(x), self.d_model // self.n_heads)
        if rotary is not None:
            if positions is None:
                q, k = rotary(q), rotary(k)
            else:
                q, k = rotary(q, positions=positions), rotary(k, positions=positions)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if isinstance(bias, AttentionBias):
            term = bias.score_bias(q)
            self._check_bias(f"{type(bias).__name__}.score_bias(q)", term, b, seq, x.device)
            scores = scores + term.to(scores.dtype)
        elif bias is not None:
            scores = scores + bias.to(scores.dtype)
        if self.causal:
            causal = causal_mask(seq, device=x.device)
            mask = causal if mask is None else mask & causal
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        if mask is not None and mask.ndim > 2:
            # a query that may see no key (a padding row of a padded batch) gets zero weights, not
            # NaN, so that its NaN cannot reach the other rows through the next layer's values
            weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        if need_weights and not torch.compiler.is_compiling():  # kept only when asked
            self.last_weights = (weights[:, 0] if self.n_heads == 1 else weights).detach()
        out = (weights @ v).transpose(1, 2).reshape(b, seq, self.d_model)
        return self.w_o(out)

    def _check_bias(self, name: str, bias: object, b: int, seq: int, device: torch.device) -> None:
        """An additive score term: a floating-point tensor on ``device`` broadcastable to ``(b, n_heads, seq, seq)``."""
        if not isinstance(bias, torch.Tensor):
            raise TypeError(f"{name} must be a tensor ending in ({seq}, {seq}), got {type(bias).__name__}")
        if bias.ndim < 2 or bias.shape[-2:] != (seq, seq) or bias.ndim > 4:
            raise ValueError(
                f"{name} must have shape (seq, seq), (n_heads, seq, seq) or (batch, n_heads, seq, seq) "
                f"with seq={seq}, got {tuple(bias.shape)}"
            )
        if bias.ndim >= 3 and bias.shape[-3] not in (1, self.n_heads):
            raise ValueError(f"{name} must have n_heads={self.n_heads} (or 1) heads in dim -3, got {tuple(bias.shape)}")
        if bias.ndim == 4 and bias.shape[0] not in (1, b):
            raise ValueError(f"{name} must have batch={b} (or 1) in dim 0, got {tuple(bias.shape)}")
        if not bias.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor (an additive score term), got dtype {bias.dtype}")
        if bias.device != device:
            raise ValueError(f"{name} must be on x's device ({device}), got {bias.device}")

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, head_dim={self.head_dim}, causal={self.causal}"
