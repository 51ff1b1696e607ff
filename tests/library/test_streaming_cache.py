"""StreamingLLM's rolling cache with RoPE (book/production.md, "Evicting tokens from the cache").

A small random two-layer model with RoPE decodes one token after a 24-token prompt from
which all but two sink tokens and the last eight were evicted. The cached keys are kept
before rotation and rotated at their positions within the cache, as section 3.2 of Xiao et
al. (2024) prescribes. Layer 1 then equals a fresh pass over the retained tokens; layer 2
does not, because the retained tokens' layer-2 keys and values were computed while they
could still attend to the evicted ones.
"""

from __future__ import annotations

import math

import torch

from posenc import RotaryEmbedding

D, H, T, SINKS, WINDOW = 32, 2, 24, 2, 8
HD = D // H


def _model(seed: int = 11):
    g = torch.Generator().manual_seed(seed)
    weights = [{k: torch.randn(D, D, generator=g) / math.sqrt(D) for k in "qkvo"} for _ in range(2)]
    emb = torch.randn(T + 1, D, generator=g)
    return weights, emb


def _heads(x: torch.Tensor) -> torch.Tensor:  # (seq, D) -> (H, seq, HD)
    return x.view(x.shape[0], H, HD).transpose(0, 1)


def _merge(x: torch.Tensor) -> torch.Tensor:  # (H, seq, HD) -> (seq, D)
    return x.transpose(0, 1).reshape(x.shape[1], D)


def _layer(w, h, rope, q_pos, k_pos, past=None):
    """One pre-norm attention layer; ``past``: cached pre-rotation keys and values."""
    a = torch.nn.functional.layer_norm(h, (D,))
    q, k, v = _heads(a @ w["q"]), _heads(a @ w["k"]), _heads(a @ w["v"])
    keys, values = (k, v) if past is None else (torch.cat([past[0], k], 1), torch.cat([past[1], v], 1))
    s = rope(q, positions=q_pos) @ rope(keys, positions=k_pos).transpose(-1, -2) / math.sqrt(HD)
    s = s.masked_fill(q_pos[:, None] < k_pos[None, :], float("-inf"))
    return h + _merge(s.softmax(-1) @ values) @ w["o"], (k, v)


def test_rolling_cache_is_exact_in_layer_one_only():
    weights, emb = _model()
    rope = RotaryEmbedding(HD)
    # the prompt, with every layer's keys and values cached before rotation
    h, cache, pos = emb[:T], [], torch.arange(T)
    for w in weights:
        h, kv = _layer(w, h, rope, pos, pos)
        cache.append(kv)
    keep = torch.cat([torch.arange(SINKS), torch.arange(T - WINDOW, T)])
    m = len(keep)
    # StreamingLLM: positions within the cache, 0..m-1 for the kept keys and m for the new token
    streamed, h = [], emb[T:]
    for w, (k, v) in zip(weights, cache):
        h, _ = _layer(w, h, rope, torch.tensor([m]), torch.arange(m + 1), past=(k[:, keep], v[:, keep]))
        streamed.append(h)
    # a fresh pass over the retained tokens and the new one
    fresh, h, pos = [], torch.cat([emb[keep], emb[T:]]), torch.arange(m + 1)
    for w in weights:
        h, _ = _layer(w, h, rope, pos, pos)
        fresh.append(h[-1:])
    errors = [float((s - f).abs().max() / f.abs().max()) for s, f in zip(streamed, fresh)]
    assert errors[0] < 1e-6  # layer 1: 1.3e-7
    assert 0.1 < errors[1] < 0.4  # layer 2: 0.20 of the largest output


def test_rerotating_rotated_keys_by_the_shift_equals_rotating_them_at_their_new_positions():
    k = torch.randn(H, T, HD, generator=torch.Generator().manual_seed(3))
    rope = RotaryEmbedding(HD)
    keep = torch.cat([torch.arange(SINKS), torch.arange(T - WINDOW, T)])
    new = torch.arange(len(keep))
    shifted = rope(rope(k[:, keep], positions=keep), positions=new - keep)
    assert (shifted - rope(k[:, keep], positions=new)).abs().max() < 2e-6
