"""Chapter 4's probes of attention: the terms of an additive encoding's score, and a trained head.

:func:`attention_score_terms` splits the score of an attention head whose input is
``token + position`` into its four terms; :func:`train_offset_head` trains the query and
key projections of one head to look a fixed number of tokens back, so the chapter can
compare a head that has learned to use position with a random one.
:func:`train_rope_head` trains RoPE heads on a positional and a semantic task;
:func:`train_position_head` is the fair comparison of RoPE, an additive encoding and
none on the same positional task, with and without q/k biases; :class:`HybridRopeNope` is a
small decoder whose layers alternate RoPE and no positional encoding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from .._checks import check_choice, check_int
from ._validate import check_module, check_real, check_seed, check_tensor
from ..attention import SelfAttention
from ..rotary import rotary_frequencies
from ..sinusoidal import sinusoidal_encoding
from .engine import fit, seeded
from .results import Context, chosen_lr, timed_unit

__all__ = [
    "POSITION_HEAD_ENCODINGS",
    "ROPE_PROBE_TASKS",
    "HybridRopeNope",
    "attention_score_terms",
    "dynamic_rope_float32_error",
    "first_sign_change",
    "tf32_angle_error",
    "tf32_round",
    "mean_score_by_offset",
    "previous_token_chance",
    "rope_pair_usage",
    "train_offset_head",
    "train_position_head",
    "train_rope_head",
    "first_losses",
    "position_head_unit",
    "qk_norm_shift_gap",
]


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
        check_tensor(name, t)  # finite
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


def _check_budget(steps: object, batch: object, lr: object, seed: object) -> tuple[int, int, float, int]:
    """The training budget every probe takes: ``steps`` and ``batch`` >= 1, ``lr`` > 0, ``seed`` an int."""
    steps, batch = check_int("steps", steps), check_int("batch", batch)
    return steps, batch, check_real("lr", lr, low=0.0, low_open=True), check_seed("seed", seed)


def _fit_head(model: nn.Module, layers: list[nn.Module], batches, loss, *, lr: float, steps: int, **fit_options):
    """Adam at ``lr`` on the parameters of ``layers`` (the projections a probe trains), through the one loop
    :func:`~posenc.book.engine.fit` (one batch per step, in the order the probe draws them)."""
    params = [p for layer in layers for p in layer.parameters()]
    return fit(model, batches, loss, optimiser=torch.optim.Adam(params, lr=lr), steps=steps, **fit_options)


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
    steps, batch, lr, seed = _check_budget(steps, batch, lr, seed)
    content_scale = check_real("content_scale", content_scale, low=0.0)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    gen = torch.Generator().manual_seed(seed)
    with seeded(seed):
        attn = SelfAttention(d_model).to(dtype)
    pe = torch.from_numpy(sinusoidal_encoding(seq_len, d_model)).to(dtype)
    targets = torch.arange(offset, seq_len) - offset

    def draw() -> torch.Tensor:
        return content_scale * torch.randn(batch, seq_len, d_model, generator=gen, dtype=dtype) + pe

    def log_weights(x: torch.Tensor) -> torch.Tensor:
        q, k = attn.w_q(x), attn.w_k(x)
        scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim)
        return scores[:, offset:].log_softmax(-1)

    _fit_head(attn, [attn.w_q, attn.w_k], iter(draw, None),
              lambda _, x: -log_weights(x)[:, torch.arange(len(targets)), targets].mean(), lr=lr, steps=steps)
    with torch.no_grad():
        acc = (log_weights(draw()).argmax(-1) == targets).float().mean().item()
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
    seq_len = check_int("seq_len", seq_len, minimum=3)
    steps, batch, lr, seed = _check_budget(steps, batch, lr, seed)
    gen = torch.Generator().manual_seed(seed)
    with seeded(seed):
        w_q = nn.Linear(d_model, head_dim).double()
        w_k = nn.Linear(d_model, head_dim).double()
    rope = RotaryEmbedding(head_dim, base=base, layout="interleaved")
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

    heads = nn.ModuleList([w_q, w_k])
    _fit_head(heads, [w_q, w_k], iter(batch_and_targets, None),
              lambda _, b: -log_weights(b[0], b[1]).gather(-1, b[2][..., None]).mean(), lr=lr, steps=steps)
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
    check_module("w_q", w_q), check_module("w_k", w_k)
    x = check_tensor("x", x, ndim=(2, 3))
    with torch.no_grad():
        try:
            q, k = w_q(x), w_k(x)
        except RuntimeError as err:
            raise ValueError(f"x of shape {tuple(x.shape)} does not fit the projections w_q, w_k: {err}") from err
        if q.shape != k.shape or q.shape[-1] % 2:
            raise ValueError(
                f"w_q and w_k must map x to the same even head_dim, got {q.shape[-1]} and {k.shape[-1]} columns"
            )
        qn = q.unflatten(-1, (-1, 2)).norm(dim=-1).reshape(-1, q.shape[-1] // 2).mean(0)
        kn = k.unflatten(-1, (-1, 2)).norm(dim=-1).reshape(-1, k.shape[-1] // 2).mean(0)
        usage = (qn * kn).double()
        if not usage.sum() > 0:
            raise ValueError("x gives all-zero queries or keys: the usage of the pairs is undefined")
        return usage / usage.sum()


POSITION_HEAD_ENCODINGS = ("rope", "additive", "none")


def _check_nonnegative_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return value


def train_position_head(
    encoding: str,
    *,
    bias: bool = True,
    shared: float = 0.0,
    content_scale: float = 1.0,
    d_model: int = 32,
    head_dim: int = 32,
    seq_len: int = 32,
    base: float = 10000.0,
    steps: int = 300,
    batch: int = 32,
    lr: float = 1e-2,
    eval_every: int | None = None,
    patience: int = 5,
    seed: int = 0,
) -> dict:
    """Train one causal head to attend to the previous token, with RoPE, an additive encoding or none.

    The fair comparison of chapter 4: the same task, data, optimiser and budget for every
    ``encoding``, with and without biases on the query and key projections.

    * ``"rope"``: ``q = R_m (W_q x_m + b_q)``, ``k = R_n (W_k x_n + b_k)``, the rotation of
      :class:`posenc.RotaryEmbedding` (interleaved layout, ``base``).
    * ``"additive"``: the sinusoidal encoding is added to the tokens,
      ``q = W_q (x_m + PE(m)) + b_q`` (and likewise ``k``), no rotation.
    * ``"none"``: no positional encoding at all; only the causal mask.

    The tokens ``x`` are ``content_scale`` times standard normal vectors, independent
    across positions, plus ``shared`` times one fixed random vector ``u`` (standard
    normal entries, the same at every position and in every sequence): a content-free
    direction in the input, which a bias-free projection turns into the constant
    ``W_q u``. Every query ``m >= 1`` must put its largest weight on key ``m - 1`` among
    the keys ``n <= m``; the loss is the cross-entropy of the attention weights.

    With ``bias=False``, ``shared=0`` and zero-mean content, the expected score
    ``E[q_m^T R_{n-m} k_n]`` is 0 for every ``n != m``: nothing in the expected score
    prefers one offset over another, and a RoPE head cannot learn the task.

    Training: Adam at ``lr``, ``batch`` fresh sequences per step, in float64 (one thread
    gives the same numbers on any CPU). With ``eval_every=None`` it runs exactly
    ``steps`` steps (``train_rope_head``'s protocol); otherwise it evaluates the loss on
    1,024 held-out sequences every ``eval_every`` steps, keeps the weights of the best
    evaluation, and stops when ``patience`` evaluations in a row have not lowered that
    loss by more than 1e-4, or at ``steps``.

    Returns:
        A dict with ``"w_q"`` and ``"w_k"`` (the ``nn.Linear(d_model, head_dim)``
        layers), ``"accuracy"`` (the fraction of the 31 x 1,024 queries of fresh test
        sequences whose largest weight is on the previous token), ``"heldout_loss"``
        (at the kept weights; ``None`` without ``eval_every``), ``"best_step"``,
        ``"steps_run"`` and ``"train_loss"`` (the loss of every step).

    Example:
        >>> out = train_position_head("rope", bias=False, steps=2)
        >>> sorted(out)
        ['accuracy', 'best_step', 'heldout_loss', 'steps_run', 'train_loss', 'w_k', 'w_q']
    """
    from ..rotary import RotaryEmbedding

    encoding = check_choice("encoding", encoding, POSITION_HEAD_ENCODINGS)
    if not isinstance(bias, bool):
        raise TypeError(f"bias must be True or False, got {bias!r}")
    shared = _check_nonnegative_float("shared", shared)
    content_scale = _check_nonnegative_float("content_scale", content_scale)
    d_model, head_dim = check_int("d_model", d_model, minimum=2), check_int("head_dim", head_dim, minimum=2)
    if encoding == "rope" and head_dim % 2:
        raise ValueError(f"head_dim must be even for encoding='rope', got {head_dim}")
    if encoding == "additive" and d_model % 2:
        raise ValueError(f"d_model must be even for encoding='additive', got {d_model}")
    seq_len = check_int("seq_len", seq_len, minimum=2)
    steps, batch, lr, seed = _check_budget(steps, batch, lr, seed)
    if eval_every is not None:
        eval_every = check_int("eval_every", eval_every)
    patience = check_int("patience", patience)
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base) or base <= 1:
        raise ValueError(f"base must be a finite number > 1, got {base!r}")

    f64 = torch.float64
    gen = torch.Generator().manual_seed(seed)
    with seeded(seed):
        w_q = nn.Linear(d_model, head_dim, bias=bias).double()
        w_k = nn.Linear(d_model, head_dim, bias=bias).double()
    u = torch.randn(d_model, generator=torch.Generator().manual_seed(seed + 10_000), dtype=f64)
    pe = torch.from_numpy(sinusoidal_encoding(seq_len, d_model)).to(f64)
    rope = RotaryEmbedding(head_dim, base=float(base), layout="interleaved") if encoding == "rope" else None
    m = torch.arange(seq_len)
    allowed = (m[None, :] <= m[:, None])[1:]  # queries 1..seq-1, causal
    target = m[1:] - 1

    def draw(g: torch.Generator, n: int) -> torch.Tensor:
        x = content_scale * torch.randn(n, seq_len, d_model, generator=g, dtype=f64) + shared * u
        return x + pe if encoding == "additive" else x

    def log_weights(x: torch.Tensor) -> torch.Tensor:
        q, k = w_q(x), w_k(x)
        if rope is not None:
            q, k = rope(q), rope(k)
        scores = q[:, 1:] @ k.transpose(-2, -1) / math.sqrt(head_dim)
        return scores.masked_fill(~allowed, float("-inf")).log_softmax(-1)

    def loss_of(x: torch.Tensor) -> torch.Tensor:
        lw = log_weights(x)
        return -lw[:, torch.arange(len(target)), target].mean()

    heldout = draw(torch.Generator().manual_seed(seed + 20_000), 1024) if eval_every else None

    def heldout_loss_of(_: nn.Module) -> float:
        with torch.no_grad():
            return loss_of(heldout).item()

    heads = nn.ModuleList([w_q, w_k])
    run = _fit_head(heads, [w_q, w_k], iter(lambda: draw(gen, batch), None), lambda _, x: loss_of(x), lr=lr,
                    steps=steps, evaluate=heldout_loss_of if heldout is not None else None, every=eval_every or 0,
                    min_delta=1e-4, patience=patience, keep_best=True)
    with torch.no_grad():
        test = draw(torch.Generator().manual_seed(seed + 30_000), 1024)
        acc = (log_weights(test).argmax(-1) == target).double().mean().item()
        heldout_loss = None if heldout is None else loss_of(heldout).item()
    return {
        "w_q": w_q,
        "w_k": w_k,
        "accuracy": acc,
        "heldout_loss": heldout_loss,
        "best_step": run.best_step or run.steps_run,  # without a held-out evaluation: the last step
        "steps_run": run.steps_run,
        "train_loss": run.train_loss,
    }


def position_head_unit(
    unit: tuple,
    ctx: Context,
    *,
    variants: Mapping[str, Mapping],
    lrs: Sequence[float],
    tune_seed: int,
    protocol: Mapping,
    quick_protocol: Mapping,
) -> dict:
    """One unit of a tuned grid of :func:`train_position_head` (``experiments/rope_bias_*.py``): its row.

    ``unit`` is ``("tune", variant, lr)`` (seed ``tune_seed``) or ``("main", variant, seed)``
    (at the rate :func:`~posenc.book.results.chosen_lr` picks from ``ctx.saved``);
    ``variants[variant]`` holds the keyword arguments of the head (``encoding``, ``bias``,
    ``shared`` or ``content_scale``), ``protocol`` the training budget (``quick_protocol``
    when ``ctx.quick``).

    Returns:
        ``{"rows": [row]}``: the variant name, its settings, ``lr``, ``seed``, ``role``,
        ``accuracy`` and ``heldout_loss`` (6 decimals), ``best_step``, ``steps_run``,
        ``stop`` (``"budget"`` or ``"patience"``) and ``seconds``.

    Example:
        >>> ctx = Context(True, {"rows": []}, lambda msg: None)
        >>> unit = position_head_unit(("tune", "v", 0.01), ctx, variants={"v": {"encoding": "none", "bias": False}},
        ...     lrs=(0.01,), tune_seed=0, protocol={}, quick_protocol={"steps": 2})
        >>> unit["rows"][0]["stop"]
        'budget'
    """
    if not isinstance(unit, tuple) or len(unit) != 3 or unit[0] not in ("tune", "main"):
        raise ValueError(f"unit must be ('tune', variant, lr) or ('main', variant, seed), got {unit!r}")
    role, name, x = unit
    if not isinstance(variants, Mapping) or name not in variants:
        raise ValueError(f"unit names variant {name!r}, which variants does not hold")
    settings = dict(variants[name])
    lr, seed = (x, tune_seed) if role == "tune" else (chosen_lr(ctx.saved["rows"], name, lrs) or lrs[0], x)
    protocol = dict(quick_protocol if ctx.quick else protocol)

    def row() -> dict:
        out = train_position_head(lr=lr, seed=seed, **settings, **protocol)
        return {
            "variant": name, **settings, "lr": lr, "seed": seed,
            "role": role, "accuracy": round(out["accuracy"], 6), "heldout_loss": None if out["heldout_loss"] is None else round(out["heldout_loss"], 6),
            "best_step": out["best_step"], "steps_run": out["steps_run"],
            "stop": "budget" if out["steps_run"] >= protocol.get("steps", 300) else "patience",
        }

    return timed_unit(ctx, row)


def first_losses(config: dict, seed: int, n: int = 20, *, encoding: str, bias: bool, shared: float, lr: float,
                 **unit) -> list[float]:
    """The first ``n`` training losses of one head of chapter 4's ``rope_bias_heads`` grid, as it trained them.

    Args:
        config: the grid's ``"config"`` (``steps``, ``eval_every``, ``patience``, ``batch``,
            ``content_scale``), as in ``rope_bias_heads.json``.
        seed: the row's seed.
        n: how many losses (the run is cut at ``n`` steps: nothing before a step depends
            on the budget).
        encoding, bias, shared, lr: the unit keys of a row; its other keys (``variant``,
            ``role``, scores) are ignored.

    Example:
        >>> cfg = {"steps": 3000, "eval_every": 100, "patience": 5, "batch": 32, "content_scale": 1.0}
        >>> len(first_losses(cfg, 0, 3, encoding="rope", bias=False, shared=0.0, lr=0.01))
        3
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    steps = min(check_int("n", n), config["steps"])
    out = train_position_head(encoding, bias=bias, shared=shared, lr=lr, seed=seed, steps=steps,
                              batch=config["batch"], content_scale=config["content_scale"],
                              eval_every=config["eval_every"], patience=config["patience"])
    return out["train_loss"]


def previous_token_chance(seq_len: int = 32) -> float:
    """Accuracy of a causal head that spreads its weight evenly: the mean of ``1/(m+1)`` over queries ``m = 1..seq_len-1``.

    Query ``m`` sees ``m + 1`` keys, one of them the previous token. (A head that only
    learns to avoid its own key does a little better: the mean of ``1/m``.)

    Example:
        >>> round(previous_token_chance(2), 3)
        0.5
    """
    seq_len = check_int("seq_len", seq_len, minimum=2)
    return sum(1.0 / (m + 1) for m in range(1, seq_len)) / (seq_len - 1)


def mean_score_by_offset(
    w_q: nn.Module, w_k: nn.Module, x: torch.Tensor, *, base: float = 10000.0, spread: bool = False
) -> torch.Tensor:
    """The mean RoPE score ``q_m^T R_{n-m} k_n / sqrt(d_head)`` at each offset ``m - n >= 0``.

    ``x``: tokens ``(batch, seq, d_model)``; the projections are applied, both rotated
    by :class:`posenc.RotaryEmbedding` (interleaved layout), and the scores averaged over
    the batch and over all pairs ``(m, n)`` with the same offset. With ``spread=True``,
    the standard deviation of those scores instead (offsets up to ``seq - 2``, so that
    every offset has at least two pairs).

    Returns:
        ``(seq,)`` float64 tensor, offset 0 first (``(seq - 1,)`` with ``spread``).

    Example:
        >>> w = nn.Linear(4, 4, bias=False).double()
        >>> mean_score_by_offset(w, w, torch.randn(3, 5, 4, dtype=torch.float64)).shape
        torch.Size([5])
    """
    from ..rotary import RotaryEmbedding

    if not isinstance(x, torch.Tensor) or x.ndim != 3:
        raise TypeError("x must be a (batch, seq, d_model) torch.Tensor")
    check_module("w_q", w_q), check_module("w_k", w_k), check_tensor("x", x)  # finite
    with torch.no_grad():
        try:
            q, k = w_q(x), w_k(x)
        except RuntimeError as err:
            raise ValueError(f"x of shape {tuple(x.shape)} does not fit the projections w_q, w_k: {err}") from err
        rope = RotaryEmbedding(q.shape[-1], base=base, layout="interleaved")
        s = rope(q) @ rope(k).transpose(-2, -1) / math.sqrt(q.shape[-1])
        if spread:
            return torch.stack([s.diagonal(-off, -2, -1).std() for off in range(s.shape[-1] - 1)]).double()
        s = s.mean(0)
        return torch.stack([s.diagonal(-off).mean() for off in range(s.shape[0])]).double()


class HybridRopeNope(nn.Module):
    """A small causal decoder whose layers use RoPE or no positional encoding, chosen per layer.

    ``rope_layers`` holds one flag per layer in the convention of the ``no_rope_layers``
    field of Hugging Face's Llama 4 and SmolLM3 configurations: **1 means the layer
    applies RoPE, 0 means it is a NoPE layer** (the field's name reads the other way).
    SmolLM3 and Llama 4 default to a NoPE layer every fourth layer,
    ``[1, 1, 1, 0, 1, 1, 1, 0, ...]``. The blocks are :class:`posenc.book.models.Block`
    (pre-norm, :class:`posenc.SelfAttention`); the RoPE layers share one
    :class:`posenc.RotaryEmbedding` (half layout, ``base``), which has no parameters, so
    the flags change no weight: two models with different flags can load the same
    ``state_dict``.

    Args:
        vocab_size: number of token ids.
        rope_layers: a sequence of 0/1 flags, one per layer.
        d_model, n_heads, d_ff: widths (``d_ff`` defaults to ``4 * d_model``).
        base: the RoPE base of the RoPE layers.

    Shapes:
        ``forward(tokens, *, offset=0)``: ``tokens`` ``(batch, seq)`` integers; the
        positions are ``offset + arange(seq)``. Returns logits ``(batch, seq, vocab_size)``.

    Example:
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> m = HybridRopeNope(10, [1, 1, 1, 0])
        >>> m(torch.zeros(2, 5, dtype=torch.long)).shape
        torch.Size([2, 5, 10])
        >>> m.rope_layers
        (1, 1, 1, 0)
    """

    def __init__(
        self,
        vocab_size: int,
        rope_layers,
        *,
        d_model: int = 32,
        n_heads: int = 4,
        d_ff: int | None = None,
        base: float = 10000.0,
    ) -> None:
        super().__init__()
        from ..rotary import RotaryEmbedding
        from .models import Block

        vocab_size = check_int("vocab_size", vocab_size)
        if isinstance(rope_layers, (str, bytes)) or not hasattr(rope_layers, "__iter__"):
            raise TypeError(f"rope_layers must be a sequence of 0/1 flags, got {type(rope_layers).__name__}")
        flags = tuple(rope_layers)
        if not flags or any(isinstance(f, bool) or f not in (0, 1) for f in flags):
            raise ValueError(f"rope_layers must be a non-empty sequence of 0 (NoPE) and 1 (RoPE) flags, got {flags!r}")
        self.rope_layers = tuple(int(f) for f in flags)
        d_model, n_heads = check_int("d_model", d_model), check_int("n_heads", n_heads)
        if d_model % n_heads or (d_model // n_heads) % 2:
            raise ValueError(f"n_heads must divide d_model={d_model} into an even head width, got n_heads={n_heads}")
        d_ff = 4 * d_model if d_ff is None else check_int("d_ff", d_ff)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_ff) for _ in self.rope_layers)
        self.rope = RotaryEmbedding(d_model // n_heads, base=base)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor, *, offset: int = 0) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.is_floating_point():
            raise ValueError("tokens must be an integer tensor of shape (batch, seq)")
        vocab = self.embed.num_embeddings
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab):
            raise ValueError(f"tokens must be ids in [0, vocab_size={vocab})")
        offset = check_int("offset", offset, minimum=0)

        def rotate(t: torch.Tensor) -> torch.Tensor:
            return self.rope(t, offset=offset)

        x = self.embed(tokens)
        for flag, block in zip(self.rope_layers, self.blocks):
            x = block(x, None, rotate if flag else None)
        return self.head(self.norm(x))

    def extra_repr(self) -> str:
        return f"rope_layers={self.rope_layers}"


def tf32_round(x: torch.Tensor) -> torch.Tensor:
    """float32 ``x`` rounded to TF32, the tensor-core input format: 10 stored mantissa bits.

    Round to nearest, ties away from zero, on the bit pattern (the exponent is float32's,
    so the range is unchanged); integers are exact up to 2,048, then spaced 2, 4, 8, ...

    Example:
        >>> tf32_round(torch.tensor([2048.0, 2049.0, 16_383.0])).tolist()
        [2048.0, 2050.0, 16384.0]
    """
    x = check_tensor("x", x, finite=False)
    if x.dtype != torch.float32:
        raise TypeError(f"x must be a float32 tensor, got {x.dtype}")
    bits = x.view(torch.int32)
    return ((bits + (1 << 12)) & ~((1 << 13) - 1)).view(torch.float32)


def tf32_angle_error(n: int, *, head_dim: int = 128, base: float = 500_000.0) -> np.ndarray:
    """Absolute angle error (rad, wrapped to ``[0, pi]``) of RoPE angles formed by a TF32 matmul.

    The emulation of ``inv_freq @ positions`` on a tensor core: both inputs rounded to
    TF32, the product (one term, so no sum) formed and kept in float32, compared with
    float64 angles. Returns an array ``(n, head_dim // 2)`` for positions ``0 .. n-1``.

    Example:
        >>> err = tf32_angle_error(4096, head_dim=8)
        >>> bool(err[:2049].max() < 0.05 < 0.5 < err.max())
        True
    """
    n = check_int("n", n, minimum=1)
    head_dim = check_int("head_dim", head_dim, minimum=2)
    base = check_real("base", base, low=1.0, low_open=True)
    w = torch.from_numpy(rotary_frequencies(head_dim, base=base))
    m = torch.arange(n, dtype=torch.float32)
    tf32 = (tf32_round(m)[:, None] * tf32_round(w.float())[None, :]).double()
    exact = torch.arange(n, dtype=torch.float64)[:, None] * w
    return (torch.remainder(tf32 - exact + math.pi, 2 * math.pi) - math.pi).abs().numpy()


def dynamic_rope_float32_error(
    length: int, *, head_dim: int = 128, base: float = 500_000.0, factor: float = 8.0,
    original: int = 8192, seq: int = 64, seed: int = 0,
) -> dict[str, float]:
    """Largest difference between float32 and float64 RoPE of ``posenc`` at positions just below ``length``.

    Rotates ``seq`` standard-normal vectors at positions ``length - seq .. length - 1``
    with :class:`posenc.RotaryEmbedding`, once in float32 and once in float64, plain and
    with dynamic NTK (``factor`` from ``original`` positions); returns the max absolute
    difference for each, keys ``"plain"`` and ``"dynamic"``.

    Example:
        >>> err = dynamic_rope_float32_error(2**14, head_dim=16)
        >>> bool(err["plain"] < 1e-5)
        True
    """
    from ..rope import RotaryEmbedding
    from ..rope import scaling as sc

    length = check_int("length", length, minimum=2)
    seq = check_int("seq", seq, minimum=1)
    if seq > length:
        raise ValueError(f"seq must be at most length={length}, got {seq}")
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    x = torch.randn(1, 1, seq, head_dim, dtype=torch.float64, generator=gen)
    pos = torch.arange(length - seq, length)
    ropes = {
        "plain": RotaryEmbedding(head_dim, base=base),
        "dynamic": RotaryEmbedding(
            head_dim, base=base, scaling=sc.Dynamic(factor=factor, original_max_position_embeddings=original)
        ),
    }
    return {
        k: float((r(x.float(), positions=pos).double() - r(x, positions=pos)).abs().max())
        for k, r in ropes.items()
    }


def first_sign_change(base: float, head_dim: int = 128, max_dist: int = 60_000) -> dict[str, float]:
    """Where the mean over the pairs of ``cos(r * omega_i)`` first turns negative.

    Returns a dict with ``"distance"`` (the first ``r`` with a negative mean, 0 if none
    up to ``max_dist``), ``"width"`` (how many consecutive distances stay negative there)
    and ``"depth"`` (the most negative mean in that run).

    Example:
        >>> first_sign_change(10_000.0)["distance"]
        1707
    """
    base = check_real("base", base, low=1.0, low_open=True)
    head_dim = check_int("head_dim", head_dim, minimum=2)
    max_dist = check_int("max_dist", max_dist, minimum=1)
    w = rotary_frequencies(head_dim, base=base)
    r = np.arange(max_dist + 1)
    mean = np.cos(r[:, None] * w).mean(axis=1)
    neg = mean < 0
    if not neg.any():
        return {"distance": 0, "width": 0, "depth": 0.0}
    r0 = int(np.argmax(neg))
    end = r0 + int(np.argmax(~neg[r0:])) if (~neg[r0:]).any() else max_dist + 1
    return {"distance": r0, "width": end - r0, "depth": float(mean[r0:end].min())}


QK_NORM_ORDERS = ("before", "after")


def qk_norm_shift_gap(
    order: str, *, tied: bool = False, weighted: bool = True, head_dim: int = 64, n: int = 16,
    shift: int = 1000, base: float = 10000.0, seed: int = 0,
) -> float:
    """How far QK-norm placed ``order`` RoPE keeps the scores a function of the offset only.

    Queries and keys (``n`` standard-normal vectors of width ``head_dim``) go through an
    RMSNorm with a per-channel weight ``g`` (entries ``1 + 0.5 z``, ``z`` standard normal;
    with ``tied=True`` equal within each rotated pair ``(j, j + head_dim/2)`` of the half
    layout; with ``weighted=False`` no weight at all, ``g = 1``, as Llama 4's QK-norm, and
    ``tied`` is moot) either ``"before"`` the rotation (Qwen3, OLMo 2, Gemma 3) or
    ``"after"`` it (Llama 4).
    The scores ``q_m . k_n`` at positions ``0..n-1`` are compared with those at positions
    ``shift..shift+n-1``. Returns the largest change relative to the largest score:
    float64 rounding when the scores depend on ``m - n`` only, order 1 when they do not.

    The RMS factor commutes with the rotation (a rotation keeps the norm); the weight
    ``g`` does only when it is equal within each pair, so normalising after the rotation
    makes the score depend on absolute positions unless the weights are tied.

    Example:
        >>> qk_norm_shift_gap("before") < 1e-12
        True
        >>> qk_norm_shift_gap("after") > 0.01
        True
        >>> qk_norm_shift_gap("after", weighted=False) < 1e-12
        True
    """
    from ..rope import RotaryEmbedding

    order = check_choice("order", order, QK_NORM_ORDERS)
    if not isinstance(tied, bool):
        raise TypeError(f"tied must be True or False, got {tied!r}")
    if not isinstance(weighted, bool):
        raise TypeError(f"weighted must be True or False, got {weighted!r}")
    head_dim = check_int("head_dim", head_dim, minimum=2)
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    n = check_int("n", n, minimum=2)
    shift = check_int("shift", shift, minimum=0)
    base = check_real("base", base, low=1.0, low_open=True)
    gen = torch.Generator().manual_seed(check_seed("seed", seed))
    f64 = torch.float64
    q = torch.randn(n, head_dim, generator=gen, dtype=f64)
    k = torch.randn(n, head_dim, generator=gen, dtype=f64)
    g = 1 + 0.5 * torch.randn(head_dim, generator=gen, dtype=f64)
    if tied:
        g = g[: head_dim // 2].repeat(2)
    if not weighted:
        g = torch.ones_like(g)
    rope = RotaryEmbedding(head_dim, base=base, layout="half")

    def norm(x: torch.Tensor) -> torch.Tensor:
        return g * x / x.pow(2).mean(-1, keepdim=True).sqrt()

    def scores(offset: int) -> torch.Tensor:
        if order == "before":
            qq, kk = rope(norm(q), offset=offset), rope(norm(k), offset=offset)
        else:
            qq, kk = norm(rope(q, offset=offset)), norm(rope(k, offset=offset))
        return qq @ kk.T

    s0 = scores(0)
    return float((scores(shift) - s0).abs().max() / s0.abs().max())
