"""Chapter 4's probes of attention: the terms of an additive encoding's score, and a trained head.

:func:`attention_score_terms` splits the score of an attention head whose input is
``token + position`` into its four terms; :func:`train_offset_head` trains the query and
key projections of one head to look a fixed number of tokens back, so the chapter can
compare a head that has learned to use position with a random one.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._checks import check_choice, check_int
from ..attention import SelfAttention
from ..sinusoidal import sinusoidal_encoding
from .training import seeded

__all__ = ["ROPE_PROBE_TASKS", "attention_score_terms", "rope_pair_usage", "train_offset_head", "train_rope_head"]


def attention_score_terms(
    tokens: torch.Tensor, encoding: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor
) -> dict[str, torch.Tensor]:
    """The four terms of the attention score when the encoding is *added* to the tokens.

    With ``A = W_q^T W_k / sqrt(d_head)``, the score of query ``i`` and key ``j`` is
    ``(x_i + p_i)^T A (x_j + p_j)``, the sum of content-content ``x_i^T A x_j``,
    content-position ``x_i^T A p_j``, position-content ``p_i^T A x_j`` and
    position-position ``p_i^T A p_j``.

    Args:
        tokens: token embeddings ``x``, ``(seq, d_model)``.
        encoding: positional encodings ``p``, ``(seq, d_model)``.
        w_q, w_k: projection weights ``(d_head, d_model)`` (``nn.Linear.weight``).

    Returns:
        Dict with keys ``"content-content"``, ``"content-position"``,
        ``"position-content"``, ``"position-position"``, each ``(seq, seq)``; they add up
        to the score ``softmax`` sees.

    Example:
        >>> x, p, w = torch.randn(5, 8), torch.randn(5, 8), torch.randn(4, 8)
        >>> terms = attention_score_terms(x, p, w, w)
        >>> full = ((x + p) @ w.T) @ ((x + p) @ w.T).T / 2
        >>> bool(torch.allclose(sum(terms.values()), full, atol=1e-4))
        True
    """
    for name, t in (("tokens", tokens), ("encoding", encoding), ("w_q", w_q), ("w_k", w_k)):
        if not isinstance(t, torch.Tensor) or t.ndim != 2:
            raise TypeError(f"{name} must be a 2-D torch.Tensor")
    if tokens.shape != encoding.shape:
        raise ValueError(f"tokens and encoding must have the same shape, got {tuple(tokens.shape)} and {tuple(encoding.shape)}")
    if w_q.shape != w_k.shape or w_q.shape[1] != tokens.shape[1]:
        raise ValueError(f"w_q and w_k must both be (d_head, {tokens.shape[1]}), got {tuple(w_q.shape)} and {tuple(w_k.shape)}")
    scale = 1.0 / math.sqrt(w_q.shape[0])
    qx, qp = tokens @ w_q.T, encoding @ w_q.T
    kx, kp = tokens @ w_k.T, encoding @ w_k.T
    return {
        "content-content": qx @ kx.T * scale,
        "content-position": qx @ kp.T * scale,
        "position-content": qp @ kx.T * scale,
        "position-position": qp @ kp.T * scale,
    }


def train_offset_head(
    d_model: int = 32,
    seq_len: int = 32,
    offset: int = 1,
    *,
    steps: int = 300,
    batch: int = 16,
    lr: float = 1e-2,
    content_scale: float = 1.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> tuple[nn.Module, float]:
    """Train the query/key projections of one attention head to look ``offset`` tokens back.

    The input is random token content (standard normal times ``content_scale``) plus
    the sinusoidal encoding (so only the
    position can tell the head where to look); the loss is the cross-entropy of the
    attention weights of query ``i`` against key ``i - offset`` (queries
    ``i >= offset``). This gives the chapter a pair ``W_q, W_k`` that has learned to
    use position, to compare with random projections. Deterministic for a given seed
    (one thread). The head is trained in ``dtype``, float64 by default: in float32 the
    last-bit differences between the vector kernels of different CPUs grow over a few
    hundred Adam steps until they change the reported accuracy; in float64 they stay
    far below it.

    Returns:
        ``(attention, accuracy)``: the trained :class:`posenc.SelfAttention` and the
        fraction of queries of a fresh batch whose largest weight is on key ``i - offset``.

    Example:
        >>> attn, acc = train_offset_head(steps=5, seed=1)
        >>> attn.w_q.weight.shape
        torch.Size([32, 32])
    """
    d_model = check_int("d_model", d_model, minimum=2)
    seq_len = check_int("seq_len", seq_len, minimum=2)
    offset = check_int("offset", offset, minimum=0)
    if offset >= seq_len:
        raise ValueError(f"offset must be < seq_len={seq_len}, got {offset}")
    steps = check_int("steps", steps)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    gen = torch.Generator().manual_seed(seed)
    with seeded(seed):
        attn = SelfAttention(d_model).to(dtype)
    pe = torch.from_numpy(sinusoidal_encoding(seq_len, d_model)).to(dtype)
    targets = torch.arange(offset, seq_len) - offset
    opt = torch.optim.Adam(list(attn.w_q.parameters()) + list(attn.w_k.parameters()), lr=lr)

    def log_weights(x: torch.Tensor) -> torch.Tensor:
        q, k = attn.w_q(x), attn.w_k(x)
        scores = q @ k.transpose(-2, -1) / math.sqrt(attn.d_head)
        return scores[:, offset:].log_softmax(-1)

    for _ in range(steps):
        x = content_scale * torch.randn(batch, seq_len, d_model, generator=gen, dtype=dtype) + pe
        lw = log_weights(x)
        loss = -lw[:, torch.arange(len(targets)), targets].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        x = content_scale * torch.randn(batch, seq_len, d_model, generator=gen, dtype=dtype) + pe
        acc = (log_weights(x).argmax(-1) == targets).float().mean().item()
    return attn, acc


ROPE_PROBE_TASKS = ("previous", "match")


def train_rope_head(
    task: str,
    *,
    d_model: int = 32,
    head_dim: int = 32,
    seq_len: int = 32,
    base: float = 10000.0,
    steps: int = 300,
    batch: int = 32,
    lr: float = 1e-2,
    seed: int = 0,
) -> tuple[nn.Module, nn.Module, float]:
    """Train one causal attention head with RoPE, in float64, on a positional or a semantic task.

    The head is ``q = W_q x + b_q``, ``k = W_k x + b_k`` rotated by
    :class:`posenc.RotaryEmbedding` (interleaved layout, so pair ``i`` is coordinates
    ``2i, 2i + 1`` with frequency ``base ** (-2i / head_dim)``, pair 0 the fastest). The
    tokens are standard normal vectors. The loss is the cross-entropy of the attention
    weights against the target key:

    * ``"previous"``: every query ``m >= 1`` must attend to key ``m - 1``, whatever the
      content: a purely positional head (the biases give it content-free directions).
    * ``"match"``: the last token is a copy of one earlier token at a random position,
      and the last query must attend to that copy among the keys before it: a purely
      semantic head (the distance is random).

    Returns:
        ``(w_q, w_k, accuracy)``: the two trained ``nn.Linear(d_model, head_dim)`` layers
        and the fraction of queries of a fresh batch whose largest weight is on the target.

    Example:
        >>> w_q, w_k, acc = train_rope_head("previous", steps=3)
        >>> w_q.weight.shape, w_q.weight.dtype
        (torch.Size([32, 32]), torch.float64)
    """
    from ..rotary import RotaryEmbedding

    task = check_choice("task", task, ROPE_PROBE_TASKS)
    d_model, head_dim = check_int("d_model", d_model), check_int("head_dim", head_dim, minimum=2)
    seq_len, steps = check_int("seq_len", seq_len, minimum=3), check_int("steps", steps)
    gen = torch.Generator().manual_seed(seed)
    with seeded(seed):
        w_q = nn.Linear(d_model, head_dim).double()
        w_k = nn.Linear(d_model, head_dim).double()
    rope = RotaryEmbedding(head_dim, base=base, layout="interleaved")
    opt = torch.optim.Adam(list(w_q.parameters()) + list(w_k.parameters()), lr=lr)
    m = torch.arange(seq_len)

    def batch_and_targets() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = torch.randn(batch, seq_len, d_model, generator=gen, dtype=torch.float64)
        if task == "previous":
            allowed = m[None, :] <= m[:, None]  # causal
            return x, allowed[1:], (m[1:] - 1).expand(batch, -1)
        source = torch.randint(0, seq_len - 1, (batch,), generator=gen)
        x[:, -1] = x[torch.arange(batch), source]
        allowed = (m < seq_len - 1)[None, :]  # the keys before the last token
        return x, allowed, source[:, None]

    def log_weights(x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        q, k = rope(w_q(x)), rope(w_k(x))
        queries = q[:, 1:] if task == "previous" else q[:, -1:]
        scores = queries @ k.transpose(-2, -1) / math.sqrt(head_dim)
        return scores.masked_fill(~allowed, float("-inf")).log_softmax(-1)

    for _ in range(steps):
        x, allowed, target = batch_and_targets()
        lw = log_weights(x, allowed)
        loss = -lw.gather(-1, target[..., None]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        x, allowed, target = batch_and_targets()
        acc = (log_weights(x, allowed).argmax(-1) == target).double().mean().item()
    return w_q, w_k, acc


def rope_pair_usage(w_q: nn.Module, w_k: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """How much a RoPE head uses each rotation pair: the mean norm of the query pair times that of the key pair.

    For pair ``i`` (coordinates ``2i, 2i + 1``, interleaved layout) this is
    ``E||q_i|| * E||k_i||`` over the tokens ``x``, normalised to sum to 1: the size of
    the part of the score ``q^T R k`` that pair ``i`` can contribute. (Barbero et al.
    measure the usage of frequencies in Gemma with the norms of queries and keys per
    pair.)

    Returns:
        ``(head_dim // 2,)`` float64 tensor, pair 0 (the fastest) first.

    Example:
        >>> w = nn.Linear(4, 4).double()
        >>> rope_pair_usage(w, w, torch.randn(10, 4, dtype=torch.float64)).shape
        torch.Size([2])
    """
    with torch.no_grad():
        q, k = w_q(x), w_k(x)
        qn = q.unflatten(-1, (-1, 2)).norm(dim=-1).reshape(-1, q.shape[-1] // 2).mean(0)
        kn = k.unflatten(-1, (-1, 2)).norm(dim=-1).reshape(-1, k.shape[-1] // 2).mean(0)
        usage = (qn * kn).double()
        return usage / usage.sum()
