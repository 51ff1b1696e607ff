"""Chapter 1: what happens to an added position code after the first layer.

Two measurements:

* **Depth.** :class:`DepthNet` is a small bidirectional transformer (pre-norm blocks,
  the sinusoidal encoding added once at the input) whose blocks can drop their residual
  connections. It is trained on sequence reversal (:func:`reversal_batch`), a task that
  needs every token's absolute position. :func:`layer_probe` then fits a linear probe
  (ridge regression onto the one-hot position, closed form) to the hidden state after
  each layer and reports the held-out accuracy with which it names the position.
* **Normalisation.** :func:`norm_share` measures how much of the sum ``token + PE`` the
  encoding makes up before and after LayerNorm and RMSNorm: LayerNorm's centring removes
  the encoding's mean across dimensions (nonzero for sinusoidal rows), RMSNorm rescales
  the whole vector and leaves the share unchanged.

``experiments/position_depth.py`` trains the models; the chapter reads its results file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from .._checks import check_choice, check_int
from ..attention import SelfAttention
from ..sinusoidal import sinusoidal_encoding
from ._validate import as_finite_array, check_module, check_real, check_seed, check_tensor
from .engine import fit, seeded

__all__ = [
    "DEPTH_PROTOCOL", "DepthNet", "reversal_batch", "build_depth_net", "train_depth_net", "first_losses",
    "probe_accuracy", "layer_probe", "norm_share",
]

#: The protocol of ``experiments/position_depth.py`` (the defaults of :func:`train_depth_net`).
DEPTH_PROTOCOL = {
    "vocab": 16, "length": 16, "d_model": 64, "n_heads": 4, "n_layers": 4,
    "steps": 2000, "batch": 64, "lr": 3e-3, "probe_sequences": 1024, "ridge": 1e-3,
}


class DepthNet(nn.Module):
    """A bidirectional transformer with the sinusoidal encoding added once, residuals optional.

    Each block is pre-norm: ``x + Attn(LN(x))`` then ``x + MLP(LN(x))`` with
    ``residual=True``, and ``Attn(LN(x))`` then ``MLP(LN(x))`` without, so that without
    residual connections whatever reaches a layer must pass through the one before.

    Args:
        vocab: number of token ids.
        length: sequence length (the encoding's table has this many rows).
        d_model: model width.
        n_heads: attention heads.
        n_layers: blocks.
        residual: keep the residual connections.

    Shapes:
        tokens ``(batch, length)`` -> logits ``(batch, length, vocab)``; with
        ``hidden=True`` also a list of ``n_layers + 1`` tensors ``(batch, length,
        d_model)``: the input sum and the residual stream after each block.

    Example:
        >>> net = DepthNet(8, 6, d_model=16, n_heads=2, n_layers=2)
        >>> logits, states = net(torch.zeros(3, 6, dtype=torch.long), hidden=True)
        >>> logits.shape, len(states), states[0].shape
        (torch.Size([3, 6, 8]), 3, torch.Size([3, 6, 16]))
    """

    def __init__(self, vocab: int, length: int, *, d_model: int = 64, n_heads: int = 4, n_layers: int = 4,
                 residual: bool = True) -> None:
        super().__init__()
        if not isinstance(residual, bool):
            raise TypeError(f"residual must be a bool, got {type(residual).__name__}")
        self.vocab, self.length = check_int("vocab", vocab, minimum=2), check_int("length", length)
        self.d_model, self.residual = check_int("d_model", d_model, minimum=2), residual
        n_layers = check_int("n_layers", n_layers)
        self.embed = nn.Embedding(self.vocab, self.d_model)
        self.register_buffer("pe", torch.as_tensor(sinusoidal_encoding(self.length, self.d_model), dtype=torch.float32))
        self.norms1 = nn.ModuleList(nn.LayerNorm(self.d_model) for _ in range(n_layers))
        self.attns = nn.ModuleList(SelfAttention(self.d_model, n_heads) for _ in range(n_layers))
        self.norms2 = nn.ModuleList(nn.LayerNorm(self.d_model) for _ in range(n_layers))
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(self.d_model, 4 * self.d_model), nn.GELU(), nn.Linear(4 * self.d_model, self.d_model))
            for _ in range(n_layers))
        self.norm = nn.LayerNorm(self.d_model)
        self.head = nn.Linear(self.d_model, self.vocab)

    def forward(self, tokens: torch.Tensor, hidden: bool = False):
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.shape[1] != self.length:
            got = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
            raise ValueError(f"tokens must be a (batch, {self.length}) tensor of ids, got {got}")
        if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
            raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
        if tokens.numel() and not (0 <= int(tokens.min()) and int(tokens.max()) < self.vocab):
            raise ValueError(f"tokens must be ids in 0..{self.vocab - 1}, got {int(tokens.min())}..{int(tokens.max())}")
        x = self.embed(tokens) * math.sqrt(self.d_model) + self.pe
        states = [x]
        for n1, attn, n2, mlp in zip(self.norms1, self.attns, self.norms2, self.mlps):
            x = x + attn(n1(x)) if self.residual else attn(n1(x))
            x = x + mlp(n2(x)) if self.residual else mlp(n2(x))
            states.append(x)
        logits = self.head(self.norm(x))
        return (logits, states) if hidden else logits


def reversal_batch(batch: int, length: int, vocab: int, generator: torch.Generator | None = None):
    """Random token sequences and their reversals: the target at position ``p`` is the token at ``length - 1 - p``.

    Example:
        >>> x, y = reversal_batch(2, 4, 9, torch.Generator().manual_seed(0))
        >>> bool((y == x.flip(1)).all())
        True
    """
    batch, length, vocab = check_int("batch", batch), check_int("length", length), check_int("vocab", vocab, minimum=2)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    x = torch.randint(0, vocab, (batch, length), generator=generator)
    return x, x.flip(1)


def _loss(model: nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return nn.functional.cross_entropy(model(x).transpose(1, 2), y)


def _batches(config: dict, seed: int):
    gen = torch.Generator().manual_seed(seed)
    while True:
        yield reversal_batch(config["batch"], config["length"], config["vocab"], gen)


def _depth_config(config: object, *, complete: bool = False) -> dict:
    """``config`` checked against :data:`DEPTH_PROTOCOL`: a mapping of its keys only (all of them if ``complete``)."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict of keys of DEPTH_PROTOCOL, got {type(config).__name__}")
    unknown = sorted(set(config) - set(DEPTH_PROTOCOL))
    missing = sorted(set(DEPTH_PROTOCOL) - set(config)) if complete else []
    if unknown or missing:
        raise ValueError(f"config has unknown keys {unknown} and lacks {missing}; its keys are those of DEPTH_PROTOCOL")
    return dict(config)


def build_depth_net(config: dict, residual: bool) -> DepthNet:
    """A fresh :class:`DepthNet` of the sizes in ``config`` (keys of :data:`DEPTH_PROTOCOL`)."""
    config = _depth_config(config, complete=True)
    return DepthNet(config["vocab"], config["length"], d_model=config["d_model"], n_heads=config["n_heads"],
                    n_layers=config["n_layers"], residual=residual)


def train_depth_net(residual: bool, *, seed: int, config: dict | None = None, stop_after: int | None = None):
    """Train a :class:`DepthNet` on reversal; returns ``(model, losses)``.

    Adam at ``config["lr"]`` with a cosine decay to 0 over ``config["steps"]`` steps,
    batches of ``config["batch"]`` fresh random sequences (generator seeded by ``seed``),
    weights drawn under ``seeded(seed)``. ``config`` defaults to :data:`DEPTH_PROTOCOL`.
    """
    seed = check_seed("seed", seed)
    config = dict(DEPTH_PROTOCOL, **_depth_config({} if config is None else config))
    check_real("lr", config["lr"], low=0.0, low_open=True)
    with seeded(seed):
        model = build_depth_net(config, residual)
    opt = torch.optim.Adam(model.parameters(), lr=config["lr"])
    steps = config["steps"]
    out = fit(model, _batches(config, seed), _loss, optimiser=opt, steps=steps, clip=1.0,
              schedule=lambda s: config["lr"] * 0.5 * (1 + math.cos(math.pi * (s - 1) / steps)),
              stop_after=stop_after)
    return model, out.train_loss


def first_losses(config: dict, seed: int, n: int = 20, *, residual: bool) -> list[float]:
    """The first ``n`` training losses of :func:`train_depth_net` (the results file's fingerprint)."""
    return train_depth_net(residual, seed=seed, config=config, stop_after=n)[1]


def probe_accuracy(features: np.ndarray, labels: np.ndarray, *, train: np.ndarray, ridge: float = 1e-3) -> float:
    """Held-out accuracy of a linear probe: ridge regression onto one-hot ``labels``, then argmax.

    Args:
        features: ``(n, d)`` array.
        labels: ``(n,)`` integer classes.
        train: ``(n,)`` boolean mask of the rows the probe is fitted on; the rest are scored.
        ridge: the ridge penalty, relative to the mean squared feature.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> y = np.arange(200) % 4
        >>> X = np.eye(4)[y] + 0.1 * rng.normal(size=(200, 4))
        >>> probe_accuracy(X, y, train=np.arange(200) < 100)
        1.0
    """
    X = as_finite_array("features", features)
    y = np.asarray(labels)
    if y.dtype.kind not in "iu" or (y.size and int(y.min()) < 0):
        raise ValueError(f"labels must be integer classes >= 0, got dtype {y.dtype}")
    train = np.asarray(train)
    if train.dtype != bool:
        raise TypeError(f"train must be a boolean mask, got dtype {train.dtype}")
    ridge = check_real("ridge", ridge, low=0.0)
    if X.ndim != 2 or y.shape != (X.shape[0],) or train.shape != y.shape:
        raise ValueError(f"features must be (n, d) with labels and train of shape (n,), got {X.shape}, {y.shape}, "
                         f"{train.shape}")
    if not train.any() or train.all():
        raise ValueError("train must select some rows and leave some to score")
    X = np.hstack([X, np.ones((X.shape[0], 1))])
    Y = np.eye(int(y.max()) + 1)[y]
    A = X[train]
    lam = ridge * float((A**2).mean()) * A.shape[0]
    W = np.linalg.solve(A.T @ A + lam * np.eye(A.shape[1]), A.T @ Y[train])
    return float((np.argmax(X[~train] @ W, axis=1) == y[~train]).mean())


@torch.no_grad()
def layer_probe(model: DepthNet, *, sequences: int = 1024, seed: int = 0, ridge: float = 1e-3) -> dict:
    """Position decodability after every layer of ``model``, and its task accuracy.

    ``sequences`` fresh random sequences (generator ``seed``) go through the model; half
    of them fit one probe per layer (:func:`probe_accuracy`), the other half score it.

    Returns:
        ``{"probe": [accuracy at the input, after block 1, ...], "task": token accuracy}``.

    Example:
        >>> net = DepthNet(8, 6, d_model=16, n_heads=2, n_layers=1)
        >>> layer_probe(net, sequences=256)["probe"][0]   # the input: token + PE, untrained
        1.0
    """
    model = check_module("model", model)
    if not isinstance(model, DepthNet):
        raise TypeError(f"model must be a DepthNet, got {type(model).__name__}")
    sequences = check_int("sequences", sequences, minimum=2)
    ridge = check_real("ridge", ridge, low=0.0)
    x, y = reversal_batch(sequences, model.length, model.vocab, torch.Generator().manual_seed(check_seed("seed", seed)))
    was = model.training
    model.eval()
    logits, states = model(x, hidden=True)
    model.train(was)
    labels = np.tile(np.arange(model.length), sequences)
    train = np.repeat(np.arange(sequences) < sequences // 2, model.length)
    probe = [probe_accuracy(s.reshape(-1, model.d_model).numpy(), labels, train=train, ridge=ridge) for s in states]
    return {"probe": probe, "task": float((logits.argmax(-1) == y).float().mean())}


def norm_share(tokens: torch.Tensor, pe: torch.Tensor, norm: str) -> float:
    """The encoding's share of the energy of ``norm(tokens + pe)``, averaged over rows.

    Both normalisations act row-wise and are linear in the vector once the row's statistics
    are fixed, so ``norm(t + p)`` splits into a token part and a position part:
    ``"none"`` keeps ``p``; ``"rms"`` (RMSNorm, no gain) gives ``p / rms(t + p)``;
    ``"layer"`` (LayerNorm, no gain or bias) gives ``(p - mean(p)) / sd(t + p)``. The share is
    ``|position part|^2 / (|token part|^2 + |position part|^2)``, the fraction of the
    row's energy the position part carries if the two were orthogonal.

    Args:
        tokens: ``(..., d)`` token embeddings.
        pe: ``(..., d)`` position codes (broadcast against ``tokens``).
        norm: ``"none"``, ``"rms"`` or ``"layer"``.

    Example:
        >>> t, p = torch.tensor([[1.0, -1.0, 1.0, -1.0]]), torch.tensor([[1.0, 1.0, 1.0, 1.0]])
        >>> norm_share(t, p, "none"), norm_share(t, p, "layer")   # LayerNorm removes a constant code
        (0.5, 0.0)
    """
    tokens = check_tensor("tokens", tokens)
    pe = check_tensor("pe", pe)
    norm = check_choice("norm", norm, ("none", "rms", "layer"))
    if tokens.shape[-1] != pe.shape[-1]:
        raise ValueError(f"tokens and pe must have the same last dimension, got {tokens.shape[-1]} and {pe.shape[-1]}")
    try:
        shape = torch.broadcast_shapes(tokens.shape, pe.shape)
    except RuntimeError as err:
        raise ValueError(f"pe of shape {tuple(pe.shape)} does not broadcast against tokens {tuple(tokens.shape)}") from err
    if math.prod(shape) == 0:
        raise ValueError(f"tokens and pe must hold at least one row, got shape {tuple(shape)}")
    t, p = torch.broadcast_tensors(tokens.double(), pe.double())
    if norm == "layer":
        t, p = t - t.mean(-1, keepdim=True), p - p.mean(-1, keepdim=True)
    tp, pp = t.pow(2).sum(-1), p.pow(2).sum(-1)
    share = pp / (tp + pp).clamp_min(1e-300)
    return float(share.mean())
