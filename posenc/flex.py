"""FlexAttention for the attention biases: ALiBi and T5 at any length, causal and document masks.

:func:`~posenc.bias.alibi_bias` and :class:`~posenc.bias.T5RelativeBias` build a
``(n_heads, q_len, k_len)`` tensor for ``scaled_dot_product_attention``'s ``attn_mask``:
4 bytes per head and pair of tokens (8 GiB for 32 heads at 8,192 tokens), and a float mask
keeps SDPA off its flash backend. FlexAttention (``torch.nn.attention.flex_attention``,
torch 2.5 and later) takes the bias as a function of ``(head, q_idx, kv_idx)`` instead and,
compiled, never forms the scores:

* :func:`~posenc.bias.alibi_score_mod` and :meth:`~posenc.bias.T5RelativeBias.score_mod`:
  the biases as ``score_mod`` functions, equal to SDPA with the bias tensors;
* :func:`causal_block_mask` and :func:`document_block_mask`: the ``BlockMask`` that skips
  the blocks above the diagonal, or across documents of a packed sequence.

flash-attn takes ALiBi's slopes directly: ``flash_attn_func(q, k, v, causal=True,
alibi_slopes=posenc.alibi_slopes(H).to(q.device))`` (float32 slopes, the same end-aligned
convention as :func:`~posenc.bias.alibi_bias`).

Example:
    >>> import torch
    >>> from torch.nn.attention.flex_attention import flex_attention
    >>> q = k = v = torch.randn(1, 4, 16, 8)
    >>> out = flex_attention(q, k, v, score_mod=alibi_score_mod(4), block_mask=causal_block_mask(16))
    >>> out.shape
    torch.Size([1, 4, 16, 8])
"""

from __future__ import annotations

from typing import Any

import torch

from ._checks import check_bool, check_device, check_int
from .bias import alibi_score_mod

__all__ = ["alibi_score_mod", "causal_block_mask", "document_block_mask"]


def _create_block_mask(mask_mod: Any, batch: int | None, q_len: int, k_len: int, device: torch.device | None) -> Any:
    from torch.nn.attention.flex_attention import create_block_mask

    device = torch.device("cpu") if device is None else device
    return create_block_mask(mask_mod, batch, None, q_len, k_len, device=device)


def causal_block_mask(q_len: int, k_len: int | None = None, *, device: torch.device | str | None = None) -> Any:
    """The causal ``BlockMask`` for ``q_len`` queries aligned to the end of ``k_len`` keys.

    Query ``i`` sees keys ``j <= i + k_len - q_len`` (cached decoding, as
    :func:`~posenc.bias.alibi_bias` aligns them). ``device``: that of ``q`` (default CPU).

    Example:
        >>> causal_block_mask(256).shape
        (1, 1, 256, 256)
    """
    q_len = check_int("q_len", q_len)
    k_len = q_len if k_len is None else check_int("k_len", k_len)
    if k_len < q_len:
        raise ValueError(f"k_len must be >= q_len (queries are aligned to the end of the keys), got q_len={q_len}, k_len={k_len}")
    offset = k_len - q_len

    def causal(batch, head, q_idx, kv_idx):  # noqa: ARG001 (FlexAttention's signature)
        return kv_idx <= q_idx + offset

    return _create_block_mask(causal, None, q_len, k_len, check_device("device", device))


def document_block_mask(document_ids: torch.Tensor, *, causal: bool = True) -> Any:
    """The ``BlockMask`` of packed documents: a query sees the keys of its own document only.

    Args:
        document_ids: integer ``(seq,)`` or ``(batch, seq)``: the document of each token
            (any integers; tokens of one document need not be adjacent), on ``q``'s device.
        causal: also hide the keys after the query.

    Example:
        >>> docs = torch.tensor([0] * 100 + [1] * 156)
        >>> document_block_mask(docs).shape
        (1, 1, 256, 256)
    """
    if not isinstance(document_ids, torch.Tensor):
        raise TypeError(f"document_ids must be an integer torch.Tensor (seq,) or (batch, seq), got {type(document_ids).__name__}")
    if document_ids.is_floating_point() or document_ids.is_complex() or document_ids.dtype == torch.bool:
        raise TypeError(f"document_ids must hold integers, got dtype {document_ids.dtype}")
    if document_ids.ndim not in (1, 2) or document_ids.shape[-1] == 0:
        raise ValueError(f"document_ids must have shape (seq,) or (batch, seq) with seq >= 1, got {tuple(document_ids.shape)}")
    causal = check_bool("causal", causal)
    seq = document_ids.shape[-1]
    if document_ids.ndim == 1:
        def same_document(batch, head, q_idx, kv_idx):  # noqa: ARG001 (FlexAttention's signature)
            keep = document_ids[q_idx] == document_ids[kv_idx]
            return keep & (kv_idx <= q_idx) if causal else keep

        return _create_block_mask(same_document, None, seq, seq, document_ids.device)

    def same_document_in_batch(batch, head, q_idx, kv_idx):  # noqa: ARG001
        keep = document_ids[batch, q_idx] == document_ids[batch, kv_idx]
        return keep & (kv_idx <= q_idx) if causal else keep

    return _create_block_mask(same_document_in_batch, document_ids.shape[0], seq, seq, document_ids.device)
