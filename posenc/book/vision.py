"""Chapter 8's laboratory: a tiny vision transformer on scikit-learn's digits, and 2-D position measurements.

The data are the 1,797 handwritten digits (8 x 8 pixels, 16 grey levels) that ship with
scikit-learn, upsampled bilinearly to a larger square and cut into ``patch x patch``
patches: at 16 x 16 pixels and 4-pixel patches a digit is a 4 x 4 grid of 16 tokens, at
32 x 32 an 8 x 8 grid of 64. A model trained at one size and evaluated at a larger one
sees the same digits drawn over more patches: the resolution-extrapolation setting of
Heo et al. (2024, section 4.1, "multi-resolution"), in miniature.

:class:`TinyViT` takes one positional scheme of :data:`VISION_SCHEMES`:

* ``"none"``: no position at all (a bag of patches);
* ``"learned_2d"``: a learned table, one vector per patch of the training grid, resized
  bicubically to another grid (as ViT and DeiT do before fine-tuning at a higher
  resolution);
* ``"sincos_1d"``: the 1-D sinusoidal table of the flattened index ``row * width + col``;
* ``"sincos_2d"``: :func:`posenc.sinusoidal_encoding_2d`;
* ``"rope_axial"``: :class:`posenc.AxialRotaryEmbedding` (base 100, as Heo et al.);
* ``"rope_mixed"``: :class:`posenc.MixedRotaryEmbedding` (base 10, one per layer).

Everything random comes from generators seeded by the run's seed; the split of the data
is fixed (seed 0) and shared by every run.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

import posenc

from .. import AxialRotaryEmbedding, MixedRotaryEmbedding, sinusoidal_encoding, sinusoidal_encoding_2d
from .._checks import check_choice, check_int, check_positive_float
from .engine import TrialConfig, fit, seeded
from ._validate import check_real, check_rows, check_seed
from .models import Block
from .results import paired_difference

__all__ = [
    "CanvasConfig",
    "REAL_COORDINATE_SCHEMES",
    "VISION_SCHEMES",
    "VisionConfig",
    "CANVAS_THRESHOLD",
    "bits_hex",
    "CANVAS_NAMES",
    "canvas_differences",
    "canvas_table",
    "plot_canvas_differences",
    "canvas_verdict",
    "hex_bits",
    "image_paired_se",
    "paste_canvas",
    "reference_param_groups",
    "resize_vit_table",
    "run_canvas_trial",
    "scheme_differences",
    "score_condition",
    "TinyViT",
    "adjacency_distances",
    "digits_split",
    "evaluate_vit",
    "grid_positions",
    "patchify",
    "query_scores",
    "random_zoom",
    "run_vision_trial",
    "train_vit",
    "transformers_decode_step",
    "transformers_rope_index",
    "upsample",
    "first_losses",
]

#: The positional schemes :class:`TinyViT` accepts.
VISION_SCHEMES = ("none", "learned_2d", "sincos_1d", "sincos_2d", "rope_axial", "rope_mixed")


def grid_positions(height: int, width: int) -> torch.Tensor:
    """(row, column) of every patch of a ``height x width`` grid, row-major: ``(height * width, 2)`` long.

    Example:
        >>> grid_positions(2, 3).tolist()
        [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    """
    height, width = check_int("height", height), check_int("width", width)
    return torch.cartesian_prod(torch.arange(height), torch.arange(width))


@functools.lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images / 16.0).astype(np.float64), d.target.astype(np.int64)


def digits_split(n_val: int = 300, n_test: int = 400) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """scikit-learn's digits (8 x 8, values in [0, 1]) in a fixed split: ``{"train"|"val"|"test": (images, labels)}``.

    The split is a permutation seeded by 0, the same for every run; ``images`` are float64
    ``(n, 8, 8)``, ``labels`` long ``(n,)``.

    Example:
        >>> s = digits_split()
        >>> [tuple(s[k][0].shape) for k in ("train", "val", "test")]
        [(1097, 8, 8), (300, 8, 8), (400, 8, 8)]
    """
    n_val, n_test = check_int("n_val", n_val), check_int("n_test", n_test)
    images, labels = _digits()
    if n_val + n_test >= len(images):
        raise ValueError(f"n_val + n_test must leave training images (there are {len(images)}), got {n_val} + {n_test}")
    perm = np.random.default_rng(0).permutation(len(images))
    parts = {"test": perm[:n_test], "val": perm[n_test : n_test + n_val], "train": perm[n_test + n_val :]}
    return {k: (torch.from_numpy(images[idx]), torch.from_numpy(labels[idx])) for k, idx in parts.items()}


def upsample(images: torch.Tensor, size: int) -> torch.Tensor:
    """Resize ``(n, h, w)`` images to ``(n, size, size)`` bilinearly (``align_corners=False``)."""
    if not isinstance(images, torch.Tensor) or images.ndim != 3 or not images.is_floating_point():
        raise TypeError("images must be a floating-point tensor of shape (n, height, width)")
    if not bool(torch.isfinite(images).all()):
        raise ValueError("images must hold finite numbers, got NaN or infinite pixels")
    size = check_int("size", size)
    return nn.functional.interpolate(images[:, None], size=(size, size), mode="bilinear", align_corners=False)[:, 0]


def random_zoom(images: torch.Tensor, size: int, max_zoom: float, generator: torch.Generator) -> torch.Tensor:
    """Random zoomed crops of ``(n, h, w)`` images, resized to ``size x size`` (bilinear).

    Each image is magnified by a factor drawn uniformly from ``[1, max_zoom]`` and a window
    of ``1 / zoom`` of its side, at a uniformly random place, is resampled to
    ``size x size``: the scale augmentation (a square ``RandomResizedCrop``) of the ViT
    recipes of DeiT and Heo et al. With ``max_zoom=1`` it equals :func:`upsample`.
    """
    if not isinstance(images, torch.Tensor) or images.ndim != 3 or not images.is_floating_point():
        raise TypeError("images must be a floating-point tensor of shape (n, height, width)")
    if not bool(torch.isfinite(images).all()):
        raise ValueError("images must hold finite numbers, got NaN or infinite pixels")
    size = check_int("size", size)
    max_zoom = check_positive_float("max_zoom", max_zoom)
    if max_zoom < 1:
        raise ValueError(f"max_zoom must be >= 1, got {max_zoom}")
    n = images.shape[0]
    zoom = 1 + (max_zoom - 1) * torch.rand(n, generator=generator, dtype=torch.float64)
    room = 1 - 1 / zoom
    tx = (2 * torch.rand(n, generator=generator, dtype=torch.float64) - 1) * room
    ty = (2 * torch.rand(n, generator=generator, dtype=torch.float64) - 1) * room
    theta = torch.zeros(n, 2, 3, dtype=torch.float64)
    theta[:, 0, 0] = theta[:, 1, 1] = 1 / zoom
    theta[:, 0, 2], theta[:, 1, 2] = tx, ty
    theta = theta.to(images.dtype)
    grid = nn.functional.affine_grid(theta, [n, 1, size, size], align_corners=False)
    return nn.functional.grid_sample(images[:, None], grid, mode="bilinear", padding_mode="border", align_corners=False)[:, 0]


def patchify(images: torch.Tensor, patch: int) -> torch.Tensor:
    """Cut ``(n, H, W)`` images into ``(n, (H/patch) * (W/patch), patch * patch)`` patches, row-major.

    Example:
        >>> x = torch.arange(16.0).reshape(1, 4, 4)
        >>> patchify(x, 2)[0, 1].tolist()  # the patch at row 0, column 1
        [2.0, 3.0, 6.0, 7.0]
    """
    patch = check_int("patch", patch)
    if not isinstance(images, torch.Tensor) or images.ndim != 3:
        raise TypeError("images must be a tensor of shape (n, height, width)")
    n, h, w = images.shape
    if h % patch or w % patch:
        raise ValueError(f"the image size ({h} x {w}) must be a multiple of patch={patch}")
    x = images.reshape(n, h // patch, patch, w // patch, patch).permute(0, 1, 3, 2, 4)
    return x.reshape(n, (h // patch) * (w // patch), patch * patch)


def adjacency_distances(width: int, d_model: int = 64, *, height: int | None = None) -> dict[str, float]:
    """Mean distance between the codes of horizontally and of vertically adjacent patches.

    For the 1-D sinusoidal code of the flattened index (``sincos_1d``) and the 2-D table
    (``sincos_2d``) of a ``height x width`` grid: a horizontal neighbour is one index away
    in 1-D, a vertical one ``width`` indices away, so in 1-D the two kinds of neighbour
    are not alike, and what "one row down" looks like changes with the width.

    Returns:
        ``{"1d_horizontal", "1d_vertical", "2d_horizontal", "2d_vertical"}``: mean
        Euclidean distances over all adjacent pairs (float).

    Example:
        >>> d = adjacency_distances(8)
        >>> d["1d_vertical"] > d["1d_horizontal"]
        True
    """
    width = check_int("width", width)
    height = width if height is None else check_int("height", height)
    if width < 2 or height < 2:
        raise ValueError("width and height must be at least 2 (a grid with both kinds of neighbour)")
    one = sinusoidal_encoding(height * width, d_model, layout="concatenated").reshape(height, width, d_model)
    two = sinusoidal_encoding_2d((height, width), d_model).reshape(height, width, d_model)
    out = {}
    for name, t in (("1d", one), ("2d", two)):
        out[f"{name}_horizontal"] = float(np.linalg.norm(t[:, 1:] - t[:, :-1], axis=-1).mean())
        out[f"{name}_vertical"] = float(np.linalg.norm(t[1:] - t[:-1], axis=-1).mean())
    return out


def query_scores(
    scheme: str, grid: object, query: tuple[int, int], *, head_dim: int = 32, seed: int = 0, angle: float | None = None
) -> np.ndarray:
    """Score of one query patch against every key of a grid, with position only.

    For ``"rope_axial"`` (base 100) and ``"rope_mixed"`` (base 10) the query and key
    vectors are the same all-ones vector rotated to their positions, so the score
    ``<R(p) 1, R(p') 1>`` is a function of the offset only; RoPE-Mixed starts from the
    paper's initialisation, its direction drawn from ``seed`` or set to ``angle``
    (radians). For ``"sincos_2d"`` the score is the dot product of the two rows of the
    2-D table (width ``head_dim``).

    Args:
        grid: ``n`` for an ``n x n`` grid or ``(height, width)``.
        query: (row, column) of the query patch.

    Returns:
        A ``(height, width)`` float64 array.

    Example:
        >>> s = query_scores("rope_axial", 5, (2, 2), head_dim=8)
        >>> round(float(s[2, 2]), 9)  # the query against itself: |1|^2
        8.0
    """
    check_choice("scheme", scheme, ("rope_axial", "rope_mixed", "sincos_2d"))
    if isinstance(grid, (tuple, list)) and len(grid) == 2:
        height, width = check_int("grid[0]", grid[0]), check_int("grid[1]", grid[1])
    else:
        height = width = check_int("grid", grid)
    head_dim = check_int("head_dim", head_dim)
    if not (isinstance(query, (tuple, list)) and len(query) == 2):
        raise TypeError(f"query must be a (row, column) pair, got {query!r}")
    r, c = check_int("query[0]", query[0], minimum=0), check_int("query[1]", query[1], minimum=0)
    if r >= height or c >= width:
        raise ValueError(f"query {tuple(query)} must lie in the {height} x {width} grid")
    if scheme == "sincos_2d":
        t = sinusoidal_encoding_2d((height, width), head_dim)
        return (t @ t[r * width + c]).reshape(height, width)
    pos = grid_positions(height, width).double()
    if scheme == "rope_axial":
        rope = AxialRotaryEmbedding(head_dim, base=100.0)
    else:
        if angle is None:
            g = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
            angle = float(torch.rand(1, generator=g, dtype=torch.float64)) * 2 * math.pi
        if isinstance(angle, bool) or not isinstance(angle, (int, float)) or not math.isfinite(angle):
            raise TypeError(f"angle must be a finite number (radians) or None, got {angle!r}")
        rope = MixedRotaryEmbedding(head_dim, 1, base=10.0, init_angle=angle, dtype=torch.float64)
    ones = torch.ones(1, 1, height * width, head_dim, dtype=torch.float64)
    with torch.no_grad():
        k = rope(ones, positions=pos)[0, 0]
    return (k @ k[r * width + c]).reshape(height, width).numpy()


# ----------------------------------------------------------------------------- the model


class TinyViT(nn.Module):
    """A small vision transformer with one positional scheme of :data:`VISION_SCHEMES`.

    Patches (flattened pixels) are embedded linearly; pre-norm blocks of
    :class:`posenc.SelfAttention` and a GELU MLP; mean pooling over the patches; a linear
    classifier. It accepts any square image whose side is a multiple of ``patch``: the
    grid is read from the input, and the positions follow it (the learned table is
    resized bicubically to that grid; the sinusoidal tables and rotations are computed for
    it).

    Args:
        scheme: one of :data:`VISION_SCHEMES`.
        train_grid: side of the patch grid of the training images (the learned table's size).
        patch: side of a patch in pixels.
        d_model, n_heads, n_layers, d_ff: widths and depth.
        n_classes: outputs.

    Shapes:
        ``forward(images)``: ``(batch, H, W)`` with ``H == W`` a multiple of ``patch``;
        returns logits ``(batch, n_classes)``.

    Example:
        >>> m = TinyViT("rope_axial", train_grid=4)
        >>> m(torch.rand(2, 24, 24)).shape  # a 6 x 6 grid
        torch.Size([2, 10])
    """

    def __init__(
        self,
        scheme: str,
        *,
        train_grid: int = 4,
        patch: int = 4,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 128,
        n_classes: int = 10,
    ) -> None:
        super().__init__()
        self.scheme = check_choice("scheme", scheme, VISION_SCHEMES)
        self.train_grid = check_int("train_grid", train_grid)
        self.patch = check_int("patch", patch)
        self.d_model = check_int("d_model", d_model)
        self.n_heads = check_int("n_heads", n_heads)
        if self.d_model % (4 * self.n_heads):
            raise ValueError(f"d_model must be divisible by 4 * n_heads = {4 * self.n_heads}, got {self.d_model}")
        head_dim = self.d_model // self.n_heads
        self.embed = nn.Linear(self.patch * self.patch, self.d_model)
        self.blocks = nn.ModuleList(
            Block(self.d_model, self.n_heads, check_int("d_ff", d_ff), causal=False)
            for _ in range(check_int("n_layers", n_layers))
        )
        self.norm = nn.LayerNorm(self.d_model)
        self.head = nn.Linear(self.d_model, check_int("n_classes", n_classes))
        self.table = None
        self.rotary = None
        if scheme == "learned_2d":
            self.table = nn.Parameter(torch.randn(self.train_grid, self.train_grid, self.d_model) * 0.02)
        elif scheme == "rope_axial":
            self.rotary = AxialRotaryEmbedding(head_dim, base=100.0)
        elif scheme == "rope_mixed":
            self.rotary = nn.ModuleList(MixedRotaryEmbedding(head_dim, self.n_heads, base=10.0) for _ in self.blocks)

    def positional_table(self, grid: int) -> torch.Tensor | None:
        """The table added to the patch embeddings of a ``grid x grid`` image, ``(grid * grid, d_model)`` (or ``None``)."""
        dtype = self.embed.weight.dtype
        if self.scheme == "learned_2d":
            t = self.table
            if grid != self.train_grid:
                t = nn.functional.interpolate(t.permute(2, 0, 1)[None], size=(grid, grid), mode="bicubic", align_corners=False)[0].permute(1, 2, 0)
            return t.reshape(grid * grid, self.d_model)
        if self.scheme == "sincos_1d":
            return torch.from_numpy(sinusoidal_encoding(grid * grid, self.d_model, layout="concatenated")).to(dtype)
        if self.scheme == "sincos_2d":
            return torch.from_numpy(sinusoidal_encoding_2d(grid, self.d_model)).to(dtype)
        return None

    def forward(
        self, images: torch.Tensor, *, position_scale: float = 1.0, content: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits for ``images``; ``position_scale`` multiplies the patch coordinates.

        ``content`` (boolean ``(batch, n_patches)``, row-major, ``True`` where a patch holds
        the object) masks the others out: no patch attends to them and the mean pooling
        leaves them out. With it, a digit pasted at a patch-aligned place on a larger empty
        canvas (:func:`paste_canvas`) gives the position-free model exactly the numbers it
        gives at the training size, and the RoPE models too (their scores depend on offsets
        only), up to rounding: the canvas then changes only what an absolute scheme sees.

        ``position_scale < 1`` squeezes a larger grid into the coordinate range of the
        training grid (position interpolation, as for RoPE in chapter 4). With
        ``train_grid / grid`` (``evaluate_vit(..., interpolate=True)``) patch ``c`` of a
        ``G``-patch side goes to ``c * T / G`` (``T = train_grid``, 4 in chapter 8): patch 0
        stays at 0 and patch ``G - 1`` lands at ``T - T / G`` (3.5 for ``T = 4, G = 8``), not
        at the training grid's last coordinate ``T - 1``; aligning the patch centres instead
        would take ``(c + 0.5) * T / G - 0.5``. Only for the schemes that take real coordinates
        (``"sincos_2d"``, ``"rope_axial"``, ``"rope_mixed"``).
        """
        if not isinstance(images, torch.Tensor) or images.ndim != 3 or images.shape[1] != images.shape[2]:
            raise ValueError("images must be a tensor of shape (batch, H, H) (square images)")
        scale = check_positive_float("position_scale", position_scale)
        if scale != 1.0 and self.scheme not in ("sincos_2d", "rope_axial", "rope_mixed"):
            raise ValueError(f"position_scale applies to sincos_2d and the RoPE schemes, not to {self.scheme!r}")
        grid = images.shape[1] // self.patch
        x = self.embed(patchify(images.to(self.embed.weight.dtype), self.patch))
        if content is not None:
            if not isinstance(content, torch.Tensor) or content.dtype != torch.bool or content.shape != x.shape[:2]:
                got = tuple(content.shape) if isinstance(content, torch.Tensor) else type(content).__name__
                raise ValueError(f"content must be a boolean tensor of shape (batch, n_patches) = {tuple(x.shape[:2])}, got {got}")
            if not bool(content.any(dim=1).all()):
                raise ValueError("content must mark at least one patch of every image")
        pos = grid_positions(grid, grid).to(x.device)
        if scale != 1.0:
            pos = pos.to(torch.float64) * scale
        if self.scheme == "sincos_2d" and scale != 1.0:
            table = torch.from_numpy(sinusoidal_encoding_2d(None, self.d_model, positions=pos.numpy())).to(x.dtype)
        else:
            table = self.positional_table(grid)
        if table is not None:
            x = x + table
        for i, block in enumerate(self.blocks):
            rot = None
            if self.scheme == "rope_axial":
                rot = functools.partial(self.rotary, positions=pos.to(x.dtype))
            elif self.scheme == "rope_mixed":
                rot = functools.partial(self.rotary[i], positions=pos.to(x.dtype))
            if content is None:
                x = block(x, rotary=rot)
            else:  # Block's two residual steps, with the keys restricted to the object's patches
                mask = content[:, None, :].expand(-1, x.shape[1], -1)
                x = x + block.attn(block.norm1(x), mask=mask, rotary=rot)
                x = x + block.mlp(block.norm2(x))
        x = self.norm(x)
        if content is None:
            return self.head(x.mean(dim=1))
        w = content.to(x.dtype)[..., None]
        return self.head((x * w).sum(dim=1) / w.sum(dim=1))


# ----------------------------------------------------------------------------- training


@dataclass(frozen=True)
class VisionConfig(TrialConfig):
    """One training recipe for every scheme (the one tuning rule of the experiment).

    The defaults are the base of :class:`CanvasConfig`, the protocol that ran
    (``vision_canvas.json``, ``"config"``): AdamW at 2e-3, batches of 128, at most 60
    epochs, patience 8.

    AdamW at ``lr`` with weight decay ``weight_decay``, batches of ``batch_size``, at most
    ``max_epochs`` epochs; after every epoch the loss on the validation images (at the
    training size) is measured and training stops when it has not improved for
    ``patience`` epochs; the weights of the best epoch are kept. Every training batch is
    a set of random zoomed crops (zoom uniform in ``[1, max_zoom]``, see
    :func:`random_zoom`), so that the model sees digits drawn at several scales, as ViTs
    trained with random resized crops do; validation and test images are whole digits.
    """

    train_size: int = 16
    eval_sizes: tuple[int, ...] = (12, 16, 20, 24, 32)
    patch: int = 4
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    lr: float = 2e-3
    weight_decay: float = 0.05
    batch_size: int = 128
    max_epochs: int = 60
    patience: int = 8
    max_zoom: float = 1.6
    dtype: str = "float32"
    n_train: int | None = None

    def validate(self) -> None:
        check_int("train_size", self.train_size)
        check_int("patch", self.patch)
        for s in (self.train_size, *self.eval_sizes):
            if check_int("eval_sizes", s) % self.patch:
                raise ValueError(f"image sizes must be multiples of patch={self.patch}, got {s}")
        for name in ("d_model", "n_heads", "n_layers", "d_ff", "batch_size"):
            check_int(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads})")
        check_positive_float("lr", self.lr)
        check_real("weight_decay", self.weight_decay, low=0.0)
        if self.n_train is not None:
            check_int("n_train", self.n_train)
        check_int("max_epochs", self.max_epochs)
        check_int("patience", self.patience)
        check_choice("dtype", self.dtype, ("float32", "float64"))
        if check_positive_float("max_zoom", self.max_zoom) < 1:
            raise ValueError(f"max_zoom must be >= 1, got {self.max_zoom}")


def _scores(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch: int = 500, scale: float = 1.0,
    content: torch.Tensor | None = None,
) -> tuple[float, torch.Tensor]:
    """(mean loss, boolean ``(n,)`` right or wrong per image)."""
    model.eval()
    total, right = 0.0, []
    with torch.no_grad():
        for i in range(0, len(images), batch):
            kw = {} if scale == 1.0 else {"position_scale": scale}
            if content is not None:
                kw["content"] = content[i : i + batch]
            logits = model(images[i : i + batch], **kw)
            total += float(nn.functional.cross_entropy(logits, labels[i : i + batch], reduction="sum"))
            right.append(logits.argmax(-1) == labels[i : i + batch])
    return total / len(images), torch.cat(right)


def _loss_acc(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch: int = 500, scale: float = 1.0
) -> tuple[float, float]:
    loss, right = _scores(model, images, labels, batch, scale)
    return loss, int(right.sum()) / len(images)


def train_vit(scheme: str, seed: int, config: VisionConfig = VisionConfig()) -> tuple[TinyViT, dict]:
    """Train :class:`TinyViT` with ``scheme`` from ``seed`` at ``config.train_size``; stop on validation loss.

    Returns the model at its best validation epoch and a history dict (``val_loss`` per
    epoch, ``best_epoch``, ``epochs``, ``seconds``). The caller's global random state is
    left unchanged.
    """
    check_choice("scheme", scheme, VISION_SCHEMES)
    seed = check_int("seed", seed, minimum=0)
    if not isinstance(config, VisionConfig):
        raise TypeError(f"config must be a VisionConfig, got {type(config).__name__}")
    xs, ys, xval, yval = _train_data(config)
    model = _model(scheme, seed, config)
    out, per_epoch = _fit(model, xs, ys, xval, yval, seed, config)
    model.eval()
    history = [v for _, v in out.history]
    return model, {"val_loss": history, "best_epoch": out.best_step // per_epoch - 1, "epochs": len(history),
                   "seconds": out.seconds}


def _fit(model, xs, ys, xval, yval, seed, config, stop_after=None):
    """Chapter 8's epochs of zoomed crops, loss and validation loss under :func:`~posenc.book.engine.fit`."""
    gen = torch.Generator().manual_seed(seed + 1_000_003)
    if getattr(config, "decay_rule", "all") == "reference":
        opt = torch.optim.AdamW(reference_param_groups(model, config.weight_decay), lr=config.lr)
    else:  # the resolution experiment's recipe, as it ran: decay on every parameter
        opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    per_epoch = math.ceil(len(xs) / config.batch_size)

    def batches():
        while True:  # an epoch: a permutation drawn when its first batch is asked for
            order = torch.randperm(len(xs), generator=gen)
            for i in range(0, len(xs), config.batch_size):
                idx = order[i : i + config.batch_size]
                yield random_zoom(xs[idx], config.train_size, config.max_zoom, gen), ys[idx]

    out = fit(
        model,
        batches(),
        lambda m, batch: nn.functional.cross_entropy(m(batch[0]), batch[1]),
        optimiser=opt,
        steps=config.max_epochs * per_epoch,
        evaluate=lambda m: _loss_acc(m, xval, yval)[0],
        every=per_epoch,
        patience=config.patience,
        keep_best=True,
        stop_after=stop_after,
    )
    return out, per_epoch


def _model(scheme: str, seed: int, config: VisionConfig) -> TinyViT:
    with seeded(seed):
        return TinyViT(
            scheme,
            train_grid=config.train_size // config.patch,
            patch=config.patch,
            d_model=config.d_model,
            n_heads=config.n_heads,
            n_layers=config.n_layers,
            d_ff=config.d_ff,
        ).to(config.torch_dtype)


def _train_data(config: VisionConfig):
    split = digits_split()
    xs, ys = split["train"]
    if config.n_train is not None:
        xs, ys = xs[: config.n_train], ys[: config.n_train]
    xval = upsample(split["val"][0], config.train_size).to(config.torch_dtype)
    return xs.to(config.torch_dtype), ys, xval, split["val"][1]


def first_losses(config: dict, seed: int, n: int = 20, *, scheme: str, **unit) -> list[float]:
    """The first ``n`` training losses of one run of chapter 8's grid, exactly as it trained them.

    Args:
        config: the grid's ``"config"`` (a :meth:`~posenc.book.engine.TrialConfig.to_dict`, as in
            ``vision_canvas.json``; one with ``decay_rule`` is a :class:`CanvasConfig`).
        seed: the run's seed.
        n: how many losses.
        scheme: the unit key of a row (one of :data:`VISION_SCHEMES`); the row's other
            keys (scores, epochs) do not change training and are ignored.

    Example:
        >>> len(first_losses(VisionConfig(n_train=64, d_model=16, d_ff=16).to_dict(), 0, 2, scheme="none"))
        2
    """
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict (a TrialConfig.to_dict()), got {type(config).__name__}")
    cfg = (CanvasConfig if "decay_rule" in config else VisionConfig).from_dict(config)
    scheme = check_choice("scheme", scheme, VISION_SCHEMES)
    n = check_int("n", n)
    xs, ys, xval, yval = _train_data(cfg)
    model = _model(scheme, seed, cfg)
    return _fit(model, xs, ys, xval, yval, seed, cfg, stop_after=n)[0].train_loss


def evaluate_vit(model: TinyViT, size: int, *, split: str = "test", interpolate: bool = False) -> tuple[float, float]:
    """(loss, accuracy) of ``model`` on the ``split`` digits upsampled to ``size x size``.

    With ``interpolate`` the patch coordinates are scaled by ``train_grid / grid`` (see
    :meth:`TinyViT.forward`), for the schemes that take real coordinates.
    """
    if not isinstance(model, TinyViT):
        raise TypeError(f"model must be a TinyViT, got {type(model).__name__}")
    size = check_int("size", size)
    if size % model.patch:
        raise ValueError(f"size must be a multiple of the model's patch ({model.patch}), got {size}")
    split = check_choice("split", split, ("train", "val", "test"))
    if not isinstance(interpolate, bool):
        raise TypeError(f"interpolate must be True or False, got {interpolate!r}")
    x, y = digits_split()[split]
    scale = model.train_grid / (size // model.patch) if interpolate else 1.0
    return _loss_acc(model, upsample(x, size).to(model.embed.weight.dtype), y, scale=scale)


def run_vision_trial(scheme: str, seed: int, config: VisionConfig = VisionConfig()) -> dict:
    """Train one model and score it at every ``config.eval_sizes``: one JSON row.

    ``loss_<size>``, ``acc_<size>``: test loss and accuracy at that size; for the schemes
    with real coordinates also ``iloss_<size>``, ``iacc_<size>`` with the coordinates
    interpolated into the training grid's range (``evaluate_vit(..., interpolate=True)``).
    """
    model, hist = train_vit(scheme, seed, config)
    row = {"scheme": scheme, "seed": seed, "best_epoch": hist["best_epoch"], "epochs": hist["epochs"], "seconds": round(hist["seconds"], 1)}
    for s in config.eval_sizes:
        loss, acc = evaluate_vit(model, s)
        row[f"loss_{s}"], row[f"acc_{s}"] = loss, acc
        if scheme in ("sincos_2d", "rope_axial", "rope_mixed") and s != config.train_size:
            loss, acc = evaluate_vit(model, s, interpolate=True)
            row[f"iloss_{s}"], row[f"iacc_{s}"] = loss, acc
    return row


def _transformers_inputs(segments, m):
    token_types, images, videos, seconds = [], [], [], []
    for seg in segments:
        kind, size = seg[0], seg[1]
        if kind == "text":
            token_types += [0] * size
        else:
            t, h, w = size
            token_types += [1 if kind == "image" else 2] * (t * h * w // m**2)
            (images if kind == "image" else videos).append(list(size))
            if kind == "video":
                seconds.append(float(seg[2]) if len(seg) == 3 else 1.0)
    return torch.tensor([token_types]), images, videos, seconds


def _qwen_model(model: str):
    import warnings

    with warnings.catch_warnings():  # transformers' import may warn about tqdm widgets
        warnings.simplefilter("ignore")
        if model == "qwen2":
            from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel as cls
        else:
            from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel as cls
    return cls


def transformers_rope_index(
    segments, *, spatial_merge_size: int = 2, model: str = "qwen2", tokens_per_second: int = 2
) -> torch.Tensor:
    """The M-RoPE ids ``transformers`` computes (``get_rope_index``) for ``segments``.

    ``segments`` as for :func:`posenc.mrope_position_ids` (a video may carry its seconds per
    temporal patch as a third element, used by ``model="qwen2.5"``); ``model`` is
    ``"qwen2"`` (``Qwen2VLModel``) or ``"qwen2.5"`` (``Qwen2_5_VLModel``, with
    ``tokens_per_second``). No model is built (the method reads only the merge size and
    ``tokens_per_second`` from its model). Returns a long tensor ``(3, seq)``. Needs
    ``transformers`` (the book extra).
    """
    model = check_choice("model", model, ("qwen2", "qwen2.5"))
    posenc.mrope_position_ids(segments, spatial_merge_size=spatial_merge_size, tokens_per_second=tokens_per_second)
    return _hf_rope_index(segments, spatial_merge_size, model, tokens_per_second)[0][:, 0]


def _hf_rope_index(segments, m, model, tokens_per_second):
    """``get_rope_index`` of ``transformers`` itself: ``(ids (3, 1, seq), rope_deltas (1, 1))``."""
    import types

    token_types, images, videos, seconds = _transformers_inputs(segments, m)
    cls = _qwen_model(model)
    fake = types.SimpleNamespace(
        config=types.SimpleNamespace(
            vision_config=types.SimpleNamespace(spatial_merge_size=m, tokens_per_second=tokens_per_second)
        ),
        get_vision_position_ids=lambda *a, **k: cls.get_vision_position_ids(None, *a, **k),
    )
    kwargs = dict(
        image_grid_thw=torch.tensor(images) if images else None,
        video_grid_thw=torch.tensor(videos) if videos else None,
    )
    if model == "qwen2.5":
        kwargs["second_per_grid_ts"] = torch.tensor(seconds) if seconds else None
    return cls.get_rope_index(fake, torch.zeros_like(token_types), token_types, **kwargs)


def transformers_decode_step(segments, *, spatial_merge_size: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Qwen2-VL's ids in ``transformers`` for a prompt and for the first token decoded after it with a cache.

    Runs ``Qwen2VLModel.compute_3d_position_ids`` twice, as a forward call does: once on the
    prompt (prefill, through ``get_rope_index``, which stores ``rope_deltas``) and once for
    one new token with a cache of the prompt's length and no position ids (a hand-written
    decoding loop: the id is *tokens so far + rope_deltas*). Returns ``(prefill (3, seq),
    next (3,))``. ``generate()`` does not take this path (it keeps its own ids).
    """
    import types

    posenc.mrope_position_ids(segments, spatial_merge_size=spatial_merge_size)
    m = spatial_merge_size
    token_types, images, videos, _ = _transformers_inputs(segments, m)
    cls = _qwen_model("qwen2")
    fake = types.SimpleNamespace(rope_deltas=None)
    fake.get_rope_index = lambda *a, **k: _hf_rope_index(segments, m, "qwen2", 2)
    grids = dict(
        image_grid_thw=torch.tensor(images) if images else None,
        video_grid_thw=torch.tensor(videos) if videos else None,
    )
    prefill = cls.compute_3d_position_ids(fake, torch.zeros_like(token_types), None, mm_token_type_ids=token_types, **grids)
    cache = types.SimpleNamespace(get_seq_length=lambda: token_types.shape[1])
    step = cls.compute_3d_position_ids(
        fake, None, torch.zeros(1, 1, 8), past_key_values=cache, mm_token_type_ids=token_types, **grids
    )
    return prefill[:, 0], step[:, 0, 0]

# ----------------------------------------------------------------------------- resize against canvas

#: The schemes whose coordinates can be rescaled (``position_scale``).
REAL_COORDINATE_SCHEMES = ("sincos_2d", "rope_axial", "rope_mixed")


def paste_canvas(
    images: torch.Tensor, size: int, *, train_size: int = 16, patch: int = 4, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Digits drawn at the training scale and pasted onto a larger empty canvas.

    Each ``(h, w)`` image is upsampled to ``train_size`` (as the training-size test images
    are) and pasted at a patch-aligned place, uniform over the places that fit, on a zero
    canvas of ``size x size``: the "larger canvas, same scale" condition (a document or a
    screenshot that grows, Qwen2-VL's native resolution), against :func:`upsample`'s
    "same view, more pixels". The places come from a generator seeded by ``seed``, the
    same for every model.

    Returns:
        ``(canvases, content)``: ``(n, size, size)`` in the images' dtype, and a boolean
        ``(n, (size // patch) ** 2)``, row-major, ``True`` on the patches of the digit (the
        ``content`` of :meth:`TinyViT.forward`).

    Example:
        >>> x, keep = paste_canvas(torch.ones(2, 8, 8), 24, seed=1)
        >>> tuple(x.shape), keep.sum(dim=1).tolist(), float(x.sum(dim=(1, 2))[0])
        ((2, 24, 24), [16, 16], 256.0)
    """
    if not isinstance(images, torch.Tensor) or images.ndim != 3 or not images.is_floating_point():
        raise TypeError("images must be a floating-point tensor of shape (n, height, width)")
    size, train_size, patch = check_int("size", size), check_int("train_size", train_size), check_int("patch", patch)
    seed = check_int("seed", seed, minimum=0)
    if train_size % patch or size % patch:
        raise ValueError(f"size ({size}) and train_size ({train_size}) must be multiples of patch={patch}")
    if size < train_size:
        raise ValueError(f"size must be at least train_size={train_size}, got {size}")
    digits = upsample(images, train_size)
    n, g, t = len(images), size // patch, train_size // patch
    gen = torch.Generator().manual_seed(seed)
    rows = torch.randint(0, g - t + 1, (n,), generator=gen).tolist()
    cols = torch.randint(0, g - t + 1, (n,), generator=gen).tolist()
    out = torch.zeros(n, size, size, dtype=images.dtype)
    content = torch.zeros(n, g, g, dtype=torch.bool)
    for i, (r, c) in enumerate(zip(rows, cols)):
        out[i, r * patch : r * patch + train_size, c * patch : c * patch + train_size] = digits[i]
        content[i, r : r + t, c : c + t] = True
    return out, content.reshape(n, g * g)


def reference_param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW parameter groups as the reference ViT code builds them: no decay on positions.

    timm's optimizer factory (used by DeiT and by Heo et al.'s rope-vit) leaves out of the
    weight decay every parameter with one dimension or fewer (biases, LayerNorm gains) and
    the names the model lists in ``no_weight_decay`` (rope-vit: ``pos_embed``, ``cls_token``,
    ``freqs``). Here: 1-D parameters, the learned table (``table``) and RoPE-Mixed's
    frequencies (``freqs``) get no decay; every other weight gets ``weight_decay``.

    Example:
        >>> groups = reference_param_groups(TinyViT("learned_2d"), 0.05)
        >>> [g["weight_decay"] for g in groups], sum(len(g["params"]) for g in groups) == len(list(TinyViT("none").parameters())) + 1
        ([0.05, 0.0], True)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    weight_decay = check_real("weight_decay", weight_decay, low=0.0)
    decay, keep = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        last = name.rsplit(".", 1)[-1]
        (keep if p.ndim <= 1 or last in ("table", "freqs") else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": keep, "weight_decay": 0.0}]


@dataclass(frozen=True)
class CanvasConfig(VisionConfig):
    """:class:`VisionConfig` with the reference weight decay and the canvas sizes of the resize/canvas grid.

    ``decay_rule="reference"``: :func:`reference_param_groups` (``"all"``: decay on every
    parameter, the resolution experiment's recipe). ``canvas_sizes``: the canvases the
    training-scale digit is pasted on; ``canvas_seed``: the places (:func:`paste_canvas`).
    Everything else is :class:`VisionConfig`'s, the training zoom included (uniform in
    ``[1, max_zoom] = [1, 1.6]``: the content scales of the 20 and 24 px resize tests,
    1.25 and 1.5 times the training scale, are seen in training; 12 px, 0.75 times, and
    32 px, 2 times, are not).
    """

    decay_rule: str = "reference"
    canvas_sizes: tuple[int, ...] = (20, 24, 32)
    canvas_seed: int = 0

    def validate(self) -> None:
        super().validate()
        check_choice("decay_rule", self.decay_rule, ("reference", "all"))
        check_int("canvas_seed", self.canvas_seed, minimum=0)
        if not isinstance(self.canvas_sizes, (tuple, list)) or not self.canvas_sizes:
            raise TypeError(f"canvas_sizes must be a non-empty tuple of ints, got {self.canvas_sizes!r}")
        for s in self.canvas_sizes:
            if check_int("canvas_sizes", s) % self.patch or s < self.train_size:
                raise ValueError(f"canvas sizes must be multiples of patch={self.patch} and >= train_size, got {s}")


def score_condition(
    model: TinyViT, condition: str, size: int, *, interpolate: bool = False, split: str = "test", seed: int = 0
) -> tuple[float, torch.Tensor]:
    """(mean loss, per-image right or wrong ``(n,)`` bool) of ``model`` under one test condition.

    ``condition="resize"``: the digits upsampled to ``size`` (:func:`upsample`, same view,
    more pixels); ``"canvas"``: drawn at the training size and pasted on a ``size`` canvas
    (:func:`paste_canvas` with ``seed``), the empty patches masked. ``interpolate`` scales
    the coordinates by ``train_grid / grid`` (:meth:`TinyViT.forward`).

    Example:
        >>> m = TinyViT("none")
        >>> a = score_condition(m, "canvas", 24)[1]
        >>> b = score_condition(m, "resize", 16)[1]
        >>> bool((a == b).all())  # the position-free model does not see the canvas
        True
    """
    if not isinstance(model, TinyViT):
        raise TypeError(f"model must be a TinyViT, got {type(model).__name__}")
    condition = check_choice("condition", condition, ("resize", "canvas"))
    size = check_int("size", size)
    if size % model.patch:
        raise ValueError(f"size must be a multiple of the model's patch ({model.patch}), got {size}")
    if not isinstance(interpolate, bool):
        raise TypeError(f"interpolate must be True or False, got {interpolate!r}")
    seed = check_seed("seed", seed)
    x, y = digits_split()[check_choice("split", split, ("train", "val", "test"))]
    dtype = model.embed.weight.dtype
    content = None
    if condition == "resize":
        images = upsample(x, size)
    else:
        images, content = paste_canvas(x, size, train_size=model.train_grid * model.patch, patch=model.patch, seed=seed)
    scale = model.train_grid / (size // model.patch) if interpolate else 1.0
    return _scores(model, images.to(dtype), y, scale=scale, content=content)


def bits_hex(right: torch.Tensor) -> str:
    """Pack a boolean vector into a hex string (4 images a digit), for results files.

    Example:
        >>> bits_hex(torch.tensor([True, False, False, False, True]))
        '88'
        >>> hex_bits('88', 5).tolist()
        [True, False, False, False, True]
    """
    if not isinstance(right, torch.Tensor) or right.dtype != torch.bool or right.ndim != 1:
        raise TypeError("right must be a 1-D boolean tensor")
    bits = right.tolist() + [False] * (-len(right) % 4)
    return "".join(f"{8 * a + 4 * b + 2 * c + d:x}" for a, b, c, d in zip(*[iter(bits)] * 4))


def hex_bits(text: str, n: int) -> torch.Tensor:
    """The inverse of :func:`bits_hex`: the first ``n`` booleans of ``text``."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str of hex digits, got {type(text).__name__}")
    n = check_int("n", n, minimum=0)
    if any(ch not in "0123456789abcdef" for ch in text):
        raise ValueError(f"text must hold lower-case hex digits only (bits_hex's output), got {text[:20]!r}")
    if len(text) * 4 < n:
        raise ValueError(f"text holds {len(text) * 4} bits, fewer than n={n}")
    return torch.tensor([bool(int(ch, 16) >> (3 - k) & 1) for ch in text for k in range(4)][:n])


def run_canvas_trial(scheme: str, seed: int, config: CanvasConfig = CanvasConfig()) -> dict:
    """Train one model and score it under both conditions: one JSON row of the resize/canvas grid.

    Keys, for every ``size`` of ``config.eval_sizes`` (resize) and ``config.canvas_sizes``
    (canvas): ``<cond>_acc_<size>``, ``<cond>_loss_<size>`` and ``<cond>_right_<size>`` (per
    test image, :func:`bits_hex`); for :data:`REAL_COORDINATE_SCHEMES` also the same with
    ``iacc``/``iloss``/``iright``, the coordinates scaled into the training grid. The
    learned table is resized bicubically to every grid (its only way to meet one), so it
    has no separate interpolated score.
    """
    if not isinstance(config, CanvasConfig):
        raise TypeError(f"config must be a CanvasConfig, got {type(config).__name__}")
    model, hist = train_vit(scheme, seed, config)
    row = {"scheme": scheme, "seed": seed, "best_epoch": hist["best_epoch"], "epochs": hist["epochs"],
           "seconds": round(hist["seconds"], 1)}
    conditions = [("resize", s) for s in config.eval_sizes] + [("canvas", s) for s in config.canvas_sizes]
    for cond, s in conditions:
        for interp in (False, True):
            if interp and (scheme not in REAL_COORDINATE_SCHEMES or s == config.train_size):
                continue
            loss, right = score_condition(model, cond, s, interpolate=interp, seed=config.canvas_seed)
            i = "i" if interp else ""
            row[f"{cond}_{i}loss_{s}"] = round(loss, 4)
            row[f"{cond}_{i}acc_{s}"] = round(int(right.sum()) / len(right), 4)
            row[f"{cond}_{i}right_{s}"] = bits_hex(right)
    return row


def image_paired_se(right_a: torch.Tensor, right_b: torch.Tensor) -> float:
    """The test-set sampling standard error of ``acc(a) - acc(b)`` on the same images.

    ``sqrt(n01 + n10 - (n01 - n10)**2 / n) / n`` with ``n01``, ``n10`` the images only one
    of the two gets right (the paired, McNemar-style standard error): what drawing another
    test set of the same size would move the difference by, for one trained model.

    Example:
        >>> a = torch.tensor([True] * 6 + [False] * 4)
        >>> b = torch.tensor([True] * 4 + [False] * 6)
        >>> round(image_paired_se(a, b), 4)  # two images differ, both in a's favour
        0.1265
    """
    for name, v in (("right_a", right_a), ("right_b", right_b)):
        if not isinstance(v, torch.Tensor) or v.dtype != torch.bool or v.ndim != 1:
            raise TypeError(f"{name} must be a 1-D boolean tensor")
    if right_a.shape != right_b.shape or len(right_a) == 0:
        raise ValueError(f"right_a and right_b must have the same non-zero length, got {len(right_a)} and {len(right_b)}")
    n = len(right_a)
    n10, n01 = int((right_a & ~right_b).sum()), int((~right_a & right_b).sum())
    return math.sqrt(max(n10 + n01 - (n10 - n01) ** 2 / n, 0.0)) / n


def _grid_rows(rows: list[dict]) -> list[dict]:
    """``rows`` checked as rows of :func:`run_canvas_trial`: a non-empty list of dicts with a scheme and a seed."""
    if not isinstance(rows, list):
        raise TypeError(f"rows must be a list of dicts (the rows of run_canvas_trial), got {type(rows).__name__}")
    return check_rows("rows", rows, ("scheme", "seed"))


def _accuracy(row: dict, key: str) -> float:
    """``row[key]``, an accuracy: a number in [0, 1], or a ValueError naming ``rows``."""
    return check_real(f"rows: {key} of {row['scheme']!r} seed {row['seed']}", row[key], low=0.0, high=1.0)


#: The smallest paired difference (in accuracy) the resize/canvas grid labels (``experiments/README.md``).
CANVAS_THRESHOLD = 0.05


def canvas_differences(rows: list[dict], *, threshold: float = CANVAS_THRESHOLD) -> list[dict]:
    """The resize/canvas grid's paired differences *interpolated minus plain*, labelled by its stated rule.

    For every scheme of :data:`REAL_COORDINATE_SCHEMES`, condition (``"resize"``,
    ``"canvas"``) and size with both scores in ``rows`` (rows of :func:`run_canvas_trial`):
    the per-seed differences ``iacc - acc`` (same model, same images), their mean and 95 %
    t-interval over seeds (:func:`~posenc.book.results.paired_difference`), the mean over
    seeds of the test-set sampling error of each difference (:func:`image_paired_se`, from
    the stored per-image bits), and a label, as ``experiments/README.md`` states it before
    the data: ``"helps"`` where the interval is above 0 and the mean at least
    ``threshold``; ``"hurts"`` where it is below 0 and the mean at most ``-threshold``;
    ``"about 0"`` where the interval contains 0 and the mean is within ``threshold``;
    ``"not separated"`` otherwise.

    Returns:
        One dict per (scheme, condition, size) with the keys ``scheme``, ``condition``,
        ``size``, ``per_seed``, ``mean``, ``t95``, ``n``, ``seeds_lower``, ``image_se``
        and ``label``.

    Example:
        >>> right = bits_hex(torch.ones(4, dtype=torch.bool))
        >>> rows = [{"scheme": "rope_axial", "seed": s, "canvas_acc_32": 0.9, "canvas_iacc_32": 0.5 + 0.01 * s,
        ...          "canvas_right_32": right, "canvas_iright_32": right} for s in range(5)]
        >>> [(d["condition"], d["size"], d["label"]) for d in canvas_differences(rows)]
        [('canvas', 32, 'hurts')]
    """
    threshold = check_positive_float("threshold", threshold)
    rows = _grid_rows(rows)
    for r in rows:
        for k in r:
            if k.startswith(("resize_", "canvas_")) and "acc_" in k:
                _accuracy(r, k)
                if not k.rsplit("_", 1)[1].isdigit():
                    raise ValueError(f"rows: {k!r} of {r['scheme']!r} seed {r['seed']} does not end in a size in pixels")
    out = []
    for scheme in REAL_COORDINATE_SCHEMES:
        mine = sorted((r for r in rows if r.get("scheme") == scheme), key=lambda r: r.get("seed", 0))
        for cond in ("resize", "canvas"):
            sizes = sorted({int(k.rsplit("_", 1)[1]) for r in mine for k in r if k.startswith(f"{cond}_iacc_")})
            for size in sizes:
                sel = [r for r in mine if f"{cond}_iacc_{size}" in r and f"{cond}_acc_{size}" in r]
                if len(sel) < 2:
                    continue
                a = [r[f"{cond}_iacc_{size}"] for r in sel]
                b = [r[f"{cond}_acc_{size}"] for r in sel]
                d = paired_difference(a, b)
                ses = []
                for r in sel:
                    ia, pa = r.get(f"{cond}_iright_{size}"), r.get(f"{cond}_right_{size}")
                    if isinstance(ia, str) and isinstance(pa, str) and len(ia) == len(pa):
                        ses.append(image_paired_se(hex_bits(ia, 4 * len(ia)), hex_bits(pa, 4 * len(pa))))
                lo, hi = d["t95"]
                if lo > 0 and d["mean"] >= threshold:
                    label = "helps"
                elif hi < 0 and d["mean"] <= -threshold:
                    label = "hurts"
                elif lo <= 0 <= hi and abs(d["mean"]) < threshold:
                    label = "about 0"
                else:
                    label = "not separated"
                out.append({
                    "scheme": scheme, "condition": cond, "size": size,
                    "per_seed": [x - y for x, y in zip(a, b)], "mean": d["mean"], "t95": d["t95"], "n": d["n"],
                    "seeds_lower": d["a_lower"], "image_se": float(np.mean(ses)) if ses else math.nan, "label": label,
                })
    return out


def scheme_differences(
    rows: list[dict], pairs: list[tuple[str, str]], sizes: list[int], *, condition: str = "resize",
    threshold: float = CANVAS_THRESHOLD,
) -> list[dict]:
    """Paired per-seed accuracy differences *a minus b* between two schemes, labelled by a stated rule.

    For every ``(a, b)`` of ``pairs`` and every size: the seeds both schemes have in
    ``rows`` (rows of :func:`run_canvas_trial`), each seed's ``<condition>_acc_<size>`` of
    ``a`` minus that of ``b`` (same seed, same test images), their mean and 95 %
    t-interval (:func:`~posenc.book.results.paired_difference`) and a label:
    ``"indistinguishable"`` where the interval contains 0; ``"higher"`` (``"lower"``)
    where it lies above (below) 0 and the mean is at least ``threshold`` in size;
    ``"under threshold"`` where it excludes 0 with a smaller mean.

    Returns:
        One dict per (pair, size) with the keys ``a``, ``b``, ``size``, ``per_seed``,
        ``mean``, ``t95``, ``n``, ``a_lower`` (seeds where ``a`` scored lower) and ``label``.

    Example:
        >>> rows = [{"scheme": s, "seed": k, "resize_acc_32": v + 0.01 * k}
        ...         for k in range(5) for s, v in (("learned_2d", 0.8), ("rope_mixed", 0.6))]
        >>> [(d["size"], round(d["mean"], 2), d["label"]) for d in scheme_differences(rows, [("learned_2d", "rope_mixed")], [32])]
        [(32, 0.2, 'higher')]
    """
    if not isinstance(pairs, (list, tuple)) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
        raise TypeError(f"pairs must be a list of (scheme, scheme) pairs, got {pairs!r}")
    if not isinstance(sizes, (list, tuple)):
        raise TypeError(f"sizes must be a list of ints, got {sizes!r}")
    if not pairs or not sizes:
        raise ValueError(f"pairs and sizes must not be empty, got {len(pairs)} pair(s) and {len(sizes)} size(s)")
    condition = check_choice("condition", condition, ("resize", "canvas"))
    threshold = check_positive_float("threshold", threshold)
    for a, b in pairs:
        check_choice("pairs", a, VISION_SCHEMES), check_choice("pairs", b, VISION_SCHEMES)
    rows = _grid_rows(rows)
    out = []
    for a, b in pairs:
        for size in sizes:
            key = f"{condition}_acc_{check_int('sizes', size)}"
            by_seed = {s: {r["seed"]: _accuracy(r, key) for r in rows if r["scheme"] == s and key in r} for s in (a, b)}
            seeds = sorted(set(by_seed[a]) & set(by_seed[b]))
            if len(seeds) < 2:
                raise ValueError(f"rows must hold {key} of {a!r} and {b!r} for at least 2 common seeds, got {len(seeds)}")
            x, y = [by_seed[a][k] for k in seeds], [by_seed[b][k] for k in seeds]
            d = paired_difference(x, y)
            lo, hi = d["t95"]
            if lo <= 0 <= hi:
                label = "indistinguishable"
            elif abs(d["mean"]) >= threshold:
                label = "higher" if lo > 0 else "lower"
            else:
                label = "under threshold"
            out.append({"a": a, "b": b, "size": size, "per_seed": [u - v for u, v in zip(x, y)], "mean": d["mean"],
                        "t95": d["t95"], "n": d["n"], "a_lower": d["a_lower"], "label": label})
    return out


def canvas_verdict(differences: list[dict]) -> str:
    """Which explanation the labelled differences support, by the rule written before the data.

    ``"units of the object"``: both RoPE schemes' canvas differences at 32 px ``"hurts"``,
    and the 12 px resize differences of 2-D sin-cos and of at least one RoPE scheme
    ``"helps"``. ``"stay in range"``: both RoPE canvas differences at 32 px and the three
    12 px resize differences ``"about 0"``. Otherwise ``"not separated"``.

    Example:
        >>> canvas_verdict([])
        'not separated'
    """
    if not isinstance(differences, list):
        raise TypeError("differences must be the list canvas_differences returns")
    check_rows("differences", differences, ("scheme", "condition", "size", "label"), nonempty=False)
    label = {(d["scheme"], d["condition"], d["size"]): d["label"] for d in differences}
    rope = ("rope_axial", "rope_mixed")
    if all(label.get((s, "canvas", 32)) == "hurts" for s in rope) and label.get(("sincos_2d", "resize", 12)) == "helps" \
            and any(label.get((s, "resize", 12)) == "helps" for s in rope):
        return "units of the object"
    if all(label.get((s, "canvas", 32)) == "about 0" for s in rope) \
            and all(label.get((s, "resize", 12)) == "about 0" for s in REAL_COORDINATE_SCHEMES):
        return "stay in range"
    return "not separated"



#: The names the figure and the table of the resize/canvas grid give the schemes.
CANVAS_NAMES = {"sincos_2d": "2-D sin-cos", "rope_axial": "axial RoPE", "rope_mixed": "RoPE-Mixed"}
_CANVAS_COLORS = {"sincos_2d": "tab:orange", "rope_axial": "tab:blue", "rope_mixed": "tab:green"}
_CANVAS_MARKERS = {"sincos_2d": "^", "rope_axial": "D", "rope_mixed": "P"}


def _check_differences(differences: list[dict]) -> list[dict]:
    keys = ("scheme", "condition", "size", "per_seed", "mean", "t95", "label")
    if not isinstance(differences, list) or not differences or not all(
        isinstance(d, dict) and all(k in d for k in keys) for d in differences
    ):
        raise TypeError("differences must be the non-empty list canvas_differences returns")
    return sorted(differences, key=lambda d: (d["condition"] != "resize", d["size"]))


def plot_canvas_differences(differences: list[dict], *, threshold: float = CANVAS_THRESHOLD, figsize=None):
    """The resize/canvas grid's paired differences, per seed and with their 95 % intervals.

    One column per test condition (the resized sizes, then the canvas sizes, divided by a
    vertical line); inside each, one strip per scheme of :data:`REAL_COORDINATE_SCHEMES`:
    the per-seed differences *scaled coordinates minus plain* (small points) and their
    mean with its 95 % t-interval over seeds (large marker and bar). The band
    ``+/- threshold`` is shaded: a difference is labelled only outside it with an interval
    that excludes 0 (:func:`canvas_differences`). The two columns the verdict reads (the
    12 px resize and the largest canvas) have a grey background.

    Args:
        differences: what :func:`canvas_differences` returns.
        threshold: the half-width of the shaded band.
        figsize: ``(width, height)`` in inches; the book's column width and 3.4 by default.

    Returns:
        The matplotlib ``Figure``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> right = bits_hex(torch.ones(4, dtype=torch.bool))
        >>> rows = [{"scheme": "rope_axial", "seed": s, "canvas_acc_32": 0.9, "canvas_iacc_32": 0.5 + 0.01 * s,
        ...          "canvas_right_32": right, "canvas_iright_32": right} for s in range(5)]
        >>> fig = plot_canvas_differences(canvas_differences(rows))
        >>> len(fig.axes), fig.axes[0].get_ylabel()
        (1, 'scaled minus plain accuracy')
        >>> plt.close(fig)
    """
    import matplotlib.pyplot as plt

    from .plotting import COLUMN_WIDTH_IN

    diffs = _check_differences(differences)
    threshold = check_positive_float("threshold", threshold)
    cols = sorted({(d["condition"], d["size"]) for d in diffs}, key=lambda c: (c[0] != "resize", c[1]))
    schemes = [s for s in REAL_COORDINATE_SCHEMES if any(d["scheme"] == s for d in diffs)]
    fig, ax = plt.subplots(figsize=figsize or (COLUMN_WIDTH_IN, 3.4), layout="constrained")
    decisive = {("resize", min((c[1] for c in cols if c[0] == "resize"), default=None)),
                ("canvas", max((c[1] for c in cols if c[0] == "canvas"), default=None))}
    for i, col in enumerate(cols):
        if col in decisive:
            ax.axvspan(i - 0.45, i + 0.45, color="0.92", zorder=0)
    ax.axhspan(-threshold, threshold, color="0.85", alpha=0.6, zorder=0, lw=0)
    ax.axhline(0, color="k", lw=0.8)
    n_resize = sum(c[0] == "resize" for c in cols)
    if 0 < n_resize < len(cols):
        ax.axvline(n_resize - 0.5, color="k", lw=0.8, ls="--")
    rng = np.random.default_rng(0)
    width = 0.8 / max(len(schemes), 1)
    for j, s in enumerate(schemes):
        for i, col in enumerate(cols):
            d = next((d for d in diffs if d["scheme"] == s and (d["condition"], d["size"]) == col), None)
            if d is None:
                continue
            x = i - 0.4 + width * (j + 0.5)
            pts = np.asarray(d["per_seed"], dtype=float)
            ax.scatter(x + rng.uniform(-0.25, 0.25, len(pts)) * width, pts, s=9, color=_CANVAS_COLORS[s],
                       alpha=0.55, lw=0, zorder=2)
            lo, hi = d["t95"]
            ax.errorbar(x, d["mean"], yerr=[[d["mean"] - lo], [hi - d["mean"]]], color=_CANVAS_COLORS[s],
                        marker=_CANVAS_MARKERS[s], ms=6, mec="k", mew=0.5, capsize=3, lw=1.2, zorder=3,
                        label=CANVAS_NAMES[s] if i == 0 else None)
    ax.set_xticks(range(len(cols)), [f"{c[0]}\n{c[1]} px" for c in cols])
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylabel("scaled minus plain accuracy")
    ax.legend(loc="lower left", ncols=len(schemes), frameon=True)
    return fig


def canvas_table(differences: list[dict]) -> str:
    """The resize/canvas grid's paired differences as a Markdown table, one row per scheme and condition.

    Columns: the mean difference *scaled minus plain*, its 95 % t-interval over seeds,
    the seeds in which scaling lowered the accuracy, the test-set sampling error of one
    seed's difference (:func:`image_paired_se`, mean over seeds) and the label of
    :func:`canvas_differences`; two decimals (three for the sampling error).

    Example:
        >>> right = bits_hex(torch.ones(4, dtype=torch.bool))
        >>> rows = [{"scheme": "rope_axial", "seed": s, "canvas_acc_32": 0.9, "canvas_iacc_32": 0.5 + 0.01 * s,
        ...          "canvas_right_32": right, "canvas_iright_32": right} for s in range(5)]
        >>> print(canvas_table(canvas_differences(rows)).splitlines()[2])
        | axial RoPE | canvas | 32 | -0.38 | -0.40 to -0.36 | 5/5 | 0.000 | hurts |
    """
    diffs = _check_differences(differences)
    lines = ["| scheme | condition | pixels | mean | 95 % interval | seeds lower | test-set SE | label |",
             "|---|---|--:|--:|--:|--:|--:|---|"]
    order = {s: k for k, s in enumerate(REAL_COORDINATE_SCHEMES)}
    for d in sorted(diffs, key=lambda d: (order[d["scheme"]], d["condition"] != "resize", d["size"])):
        lo, hi = d["t95"]
        lines.append(f"| {CANVAS_NAMES[d['scheme']]} | {d['condition']} | {d['size']} | {d['mean']:+.2f} "
                     f"| {lo:+.2f} to {hi:+.2f} | {d['seeds_lower']}/{d['n']} | {d['image_se']:.3f} | {d['label']} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- a ViT's table at a new resolution


def resize_vit_table(table: torch.Tensor, new_grid: int | tuple[int, int], *, prefix_tokens: int = 1) -> torch.Tensor:
    """A ViT's learned position table resized to a new patch grid, with the [CLS] row kept aside.

    ``table`` is ``(prefix_tokens + G * G, d)`` or ``(1, prefix_tokens + G * G, d)``: the
    rows of the prefix tokens ([CLS], and distillation or register tokens where a model
    has them) first, then one row per patch of a square ``G x G`` grid, row-major. The
    patch rows are reshaped to a ``d``-channel ``G x G`` image, resized bicubically
    (``align_corners=False``) to ``new_grid`` (an int or ``(height, width)``) and flattened
    back; the prefix rows are returned unchanged in front. This is what ``transformers``'
    ``ViTEmbeddings.interpolate_pos_encoding`` computes when a ViT is called with
    ``interpolate_pos_encoding=True`` (there on every call, here once). Resizing all the
    rows as one sequence would mix [CLS] into the grid and shift every patch.

    Example:
        >>> t = torch.randn(1 + 4 * 4, 8)
        >>> out = resize_vit_table(t, (6, 8))
        >>> tuple(out.shape), torch.equal(out[0], t[0])
        ((49, 8), True)
    """
    if not isinstance(table, torch.Tensor) or table.ndim not in (2, 3) or not table.is_floating_point():
        raise TypeError("table must be a floating-point tensor of shape (rows, d) or (1, rows, d)")
    if not bool(torch.isfinite(table).all()):
        raise ValueError("table must hold finite numbers, got NaN or infinite values")
    prefix_tokens = check_int("prefix_tokens", prefix_tokens, minimum=0)
    batched = table.ndim == 3
    if batched and table.shape[0] != 1:
        raise ValueError(f"a batched table must have batch size 1, got {table.shape[0]}")
    t = table[0] if batched else table
    n = t.shape[0] - prefix_tokens
    side = math.isqrt(max(n, 0))
    if n <= 0 or side * side != n:
        raise ValueError(f"table must hold prefix_tokens={prefix_tokens} rows and then a square grid, got {t.shape[0]} rows")
    if isinstance(new_grid, tuple):
        if len(new_grid) != 2:
            raise ValueError(f"new_grid must be an int or (height, width), got {new_grid!r}")
        h, w = check_int("new_grid", new_grid[0]), check_int("new_grid", new_grid[1])
    else:
        h = w = check_int("new_grid", new_grid)
    grid = t[prefix_tokens:].reshape(1, side, side, -1).permute(0, 3, 1, 2)
    grid = nn.functional.interpolate(grid, size=(h, w), mode="bicubic", align_corners=False)
    out = torch.cat([t[:prefix_tokens], grid.permute(0, 2, 3, 1).reshape(h * w, -1)])
    return out[None] if batched else out
