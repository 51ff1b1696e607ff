"""A small causal transformer whose positional scheme is a constructor argument.

The same network (token embedding, ``n_layers`` pre-norm blocks of multi-head causal
self-attention and an MLP, a final norm and a linear read-out) can get its sense of
position from any of :data:`SCHEMES`:

* ``"none"``: nothing (NoPE); only the causal mask breaks the symmetry;
* ``"sinusoidal"``: the fixed table of Vaswani et al. added to the token embeddings;
* ``"learned"``: a trained vector per position added to the token embeddings, only for
  positions below ``max_len``;
* ``"rope"``: queries and keys rotated by their positions in every layer (RoFormer);
* ``"alibi"``: the linear distance penalty of Press et al. added to the scores;
* ``"t5"``: T5's learned bucketed bias, computed once and shared by all layers;
* ``"shaw"``: Shaw et al.'s learned vector per clipped offset, one table per layer;
* ``"randomized"``: the sinusoidal table read at a random ordered subset of the positions
  ``0 .. randomized_max_len - 1`` (Ruoss et al. 2023), drawn afresh for every sequence in
  training and in evaluation, so positions far beyond the training length are seen in
  training.

Nothing else changes between schemes, so a comparison measures the scheme alone.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_choice, check_int
from ..attention import SelfAttention
from ..bias import ALiBiBias, ShawRelativePosition, T5RelativeBias
from ..learned import LearnedPositionalEmbedding
from ..sinusoidal import SinusoidalPositionalEncoding

#: The positional schemes accepted by :class:`PositionalTransformer`.
SCHEMES = ("none", "sinusoidal", "learned", "rope", "alibi", "t5", "shaw", "randomized")

#: Length of the sinusoidal table built by :class:`PositionalTransformer` (the formula has
#: no maximum length; the table is a cache).
SINUSOIDAL_TABLE_LEN = 4096

__all__ = ["SCHEMES", "Block", "PositionalTransformer", "count_parameters", "random_positions"]


def random_positions(
    batch_size: int, length: int, max_len: int, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Sorted random positions for randomized positional encodings (Ruoss et al. 2023).

    Each row is an increasing sample of ``length`` distinct positions from
    ``0 .. max_len - 1``, drawn uniformly without replacement.

    Returns:
        ``(batch_size, length)`` integer tensor.

    Example:
        >>> p = random_positions(2, 5, 100, generator=torch.Generator().manual_seed(0))
        >>> p.shape, bool((p.diff(dim=1) > 0).all()), bool(p.max() < 100)
        (torch.Size([2, 5]), True, True)
    """
    batch_size = check_int("batch_size", batch_size)
    length = check_int("length", length)
    max_len = check_int("max_len", max_len)
    if length > max_len:
        raise ValueError(f"length must be <= max_len={max_len} (distinct positions), got {length}")
    keys = torch.rand(batch_size, max_len, generator=generator)
    return keys.argsort(dim=1)[:, :length].sort(dim=1).values


def count_parameters(module: nn.Module) -> int:
    """Number of trainable scalars in ``module`` (buffers such as cached tables excluded).

    Example:
        >>> count_parameters(nn.Linear(3, 2))
        8
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


class Block(nn.Module):
    """Pre-norm transformer block: ``x + Attn(LN(x))`` then ``x + MLP(LN(x))``.

    The attention is the library's :class:`posenc.SelfAttention`; position enters through
    its hooks (``bias``, ``rotary``) or through ``x``. The book's three models (chapter
    6's causal :class:`PositionalTransformer`, chapter 5's
    :class:`~posenc.book.tabular.TabularTransformer` and chapter 8's
    :class:`~posenc.book.vision.TinyViT`, with ``causal=False``) are built from it.

    Args:
        d_model: model width.
        n_heads: attention heads (must divide ``d_model``).
        d_ff: hidden width of the MLP.
        causal: causal attention.
        activation: ``"gelu"`` or ``"relu"``.
        shaw_max_distance: give the block its own Shaw et al. term with this clipping
            distance (``None``: none).

    Example:
        >>> Block(16, 4, 64)(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        *,
        causal: bool = True,
        activation: str = "gelu",
        shaw_max_distance: int | None = None,
    ) -> None:
        super().__init__()
        act = {"gelu": nn.GELU, "relu": nn.ReLU}[check_choice("activation", activation, ("gelu", "relu"))]
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = SelfAttention(d_model, n_heads, causal=causal)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, check_int("d_ff", d_ff)), act(), nn.Linear(d_ff, d_model))
        self.shaw = (
            None
            if shaw_max_distance is None
            else ShawRelativePosition(d_model // n_heads, check_int("shaw_max_distance", shaw_max_distance))
        )

    def forward(self, x: torch.Tensor, bias=None, rotary: nn.Module | None = None) -> torch.Tensor:
        d_model = self.norm1.normalized_shape[0]
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != d_model:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be a tensor of shape (batch, seq, d_model={d_model}), got {got}")
        bias = self.shaw if self.shaw is not None else bias
        x = x + self.attn(self.norm1(x), bias=bias, rotary=rotary)
        return x + self.mlp(self.norm2(x))


class PositionalTransformer(nn.Module):
    """A small decoder-only (causal) transformer with a pluggable positional scheme.

    Args:
        vocab_size: number of token ids (input and output).
        scheme: one of :data:`SCHEMES`.
        d_model: model width (default 32).
        n_heads: attention heads (default 4; must divide ``d_model``).
        n_layers: number of blocks (default 2).
        max_len: number of learned position vectors (``scheme="learned"`` only); such a
            model raises ``ValueError`` on longer inputs. The other schemes accept any
            length (the sinusoidal table is cached for :data:`SINUSOIDAL_TABLE_LEN`
            positions).
        d_ff: hidden width of the MLP (default ``4 * d_model``).
        shaw_max_distance: clipping distance of ``scheme="shaw"`` (default 8).
        t5_num_buckets, t5_max_distance: the bucketing of ``scheme="t5"`` (defaults 32
            and 128 as in T5; unidirectional, since the model is causal).
        randomized_max_len: the range of positions of ``scheme="randomized"`` (default
            256); sequences up to this length can be processed.

    Shapes:
        ``forward(tokens, positions=None)``: ``tokens`` is a ``(batch, seq)`` integer
        tensor; returns logits ``(batch, seq, vocab_size)``. ``positions``
        (``(batch, seq)`` integers) is used by ``scheme="randomized"`` only; without it
        such a model draws them from torch's global generator (see
        :func:`random_positions`).

    Attributes:
        positional: the module holding the scheme's own state (``None`` for ``"none"``
            and ``"shaw"``, whose terms live in the blocks); :meth:`scheme_parameters` counts its trainable parameters.

    Example:
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> model = PositionalTransformer(10, scheme="alibi")
        >>> model(torch.zeros(2, 7, dtype=torch.long)).shape
        torch.Size([2, 7, 10])
        >>> model.scheme_parameters()
        0
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        scheme: str = "none",
        d_model: int = 32,
        n_heads: int = 4,
        n_layers: int = 2,
        max_len: int = 64,
        d_ff: int | None = None,
        shaw_max_distance: int = 8,
        t5_num_buckets: int = 32,
        t5_max_distance: int = 128,
        randomized_max_len: int = 256,
    ) -> None:
        super().__init__()
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.scheme = check_choice("scheme", scheme, SCHEMES)
        self.d_model = check_int("d_model", d_model)
        self.n_heads = check_int("n_heads", n_heads)
        self.n_layers = check_int("n_layers", n_layers)
        self.max_len = check_int("max_len", max_len)
        self.randomized_max_len = check_int("randomized_max_len", randomized_max_len)
        d_ff = 4 * self.d_model if d_ff is None else check_int("d_ff", d_ff)
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads must divide d_model={self.d_model}, got n_heads={self.n_heads}")
        head_dim = self.d_model // self.n_heads
        shaw = check_int("shaw_max_distance", shaw_max_distance) if self.scheme == "shaw" else None

        self.embed = nn.Embedding(self.vocab_size, self.d_model)
        self.positional: nn.Module | None = None
        if self.scheme == "sinusoidal":
            self.positional = SinusoidalPositionalEncoding(self.d_model, max_len=SINUSOIDAL_TABLE_LEN)
        elif self.scheme == "randomized":
            self.positional = SinusoidalPositionalEncoding(self.d_model, max_len=self.randomized_max_len)
        elif self.scheme == "learned":
            self.positional = LearnedPositionalEmbedding(self.max_len, self.d_model)
        elif self.scheme == "rope":
            if head_dim % 2:
                raise ValueError(f"scheme='rope' needs an even head_dim, got d_model/n_heads={head_dim}")
            from ..rotary import RotaryEmbedding

            # RoFormer's interleaved pairing; the scores are the same as with the half
            # layout up to a fixed permutation of the q/k projection weights
            self.positional = RotaryEmbedding(head_dim, layout="interleaved")
        elif self.scheme == "alibi":
            self.positional = ALiBiBias(self.n_heads)
        elif self.scheme == "t5":
            self.positional = T5RelativeBias(
                self.n_heads,
                bidirectional=False,
                num_buckets=t5_num_buckets,
                max_distance=t5_max_distance,
            )
        self.blocks = nn.ModuleList(
            Block(self.d_model, self.n_heads, d_ff, shaw_max_distance=shaw) for _ in range(self.n_layers)
        )
        self.norm = nn.LayerNorm(self.d_model)
        self.head = nn.Linear(self.d_model, self.vocab_size)

    def scheme_parameters(self) -> int:
        """Trainable parameters that belong to the positional scheme (0 for fixed schemes)."""
        n = 0 if self.positional is None else count_parameters(self.positional)
        return n + sum(count_parameters(b.shaw) for b in self.blocks if b.shaw is not None)

    @torch.no_grad()
    def position_attention(self, length: int | None = None) -> torch.Tensor:
        """First-layer attention weights computed from the position vectors alone.

        For the additive schemes (``"sinusoidal"``, ``"learned"``) the input of the first
        layer is ``token + position``; feeding it the position vectors only (zero token
        embeddings) isolates the position-to-position part of the attention pattern:
        where each position looks before any content is taken into account. The causal
        mask is applied.

        Args:
            length: number of positions (defaults to ``max_len``; at most ``max_len`` for
                ``"learned"``).

        Returns:
            ``(n_heads, length, length)`` attention weights; each row sums to 1.

        Example:
            >>> m = PositionalTransformer(10, scheme="learned", max_len=6)
            >>> m.position_attention().sum(-1).allclose(torch.ones(4, 6))
            True
        """
        if self.scheme not in ("sinusoidal", "learned"):
            raise ValueError(
                f"position_attention needs an additive scheme ('sinusoidal' or 'learned'), got {self.scheme!r}"
            )
        length = self.max_len if length is None else check_int("length", length)
        weight = self.embed.weight
        x = self.positional(torch.zeros(1, length, self.d_model, device=weight.device, dtype=weight.dtype))
        block = self.blocks[0]
        block.attn(block.norm1(x), need_weights=True)
        weights = block.attn.last_weights
        return weights[0] if weights.ndim == 4 else weights

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.is_floating_point() or not tokens.shape[1]:
            shape = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
            raise ValueError(f"tokens must be an integer tensor of shape (batch, seq) with seq >= 1, got {shape}")
        vocab = self.embed.num_embeddings
        # the value checks read data (impossible under torch.func.vmap): a batched caller checks at its boundary
        values = not torch._C._are_functorch_transforms_active()
        if values and tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab):
            raise ValueError(
                f"tokens must be ids in [0, vocab_size={vocab}), got values from {int(tokens.min())} to {int(tokens.max())}"
            )
        seq = tokens.shape[1]
        if positions is not None and self.scheme != "randomized":
            raise ValueError(f"positions are used by scheme='randomized' only, got scheme={self.scheme!r}")
        x = self.embed(tokens)
        bias = rotary = None
        if self.scheme == "randomized":
            if positions is None:
                positions = random_positions(tokens.shape[0], seq, self.randomized_max_len).to(tokens.device)
            if not isinstance(positions, torch.Tensor) or positions.shape != tokens.shape or positions.is_floating_point():
                got = tuple(positions.shape) if isinstance(positions, torch.Tensor) else type(positions).__name__
                raise ValueError(f"positions must be an integer tensor shaped like tokens {tuple(tokens.shape)}, got {got}")
            if values and positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= self.randomized_max_len):
                raise ValueError(f"positions must lie in [0, randomized_max_len={self.randomized_max_len})")
            x = x + self.positional.pe[positions].to(x.dtype)
        elif self.scheme in ("sinusoidal", "learned"):
            x = self.positional(x)
        elif self.scheme == "rope":
            rotary = self.positional
        elif self.scheme in ("alibi", "t5"):
            bias = self.positional(seq).to(x.device)  # computed once, shared by all layers as in T5
        for block in self.blocks:
            x = block(x, bias, rotary)
        return self.head(self.norm(x))

    def extra_repr(self) -> str:
        return f"scheme={self.scheme!r}"
