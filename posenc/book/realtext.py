"""Character-level language modelling on real text, for chapter 7's length-extrapolation experiment.

The corpus is a file that ships with the package (``posenc/book/data/tinyshakespeare.txt``, checked
against its SHA-256 on loading); nothing is downloaded. It is split by position into
train, validation and test text (the first 90 %, the next 5 %, the last 5 %). A model is
:class:`~posenc.book.models.PositionalTransformer` trained on random windows of ``L``
characters, with everything random drawn from generators seeded by the run's seed, so
every scheme sees the same batches in the same order.

Evaluation reports bits per character (the mean negative log2-likelihood of the next
character):

* ``"nonoverlapping"``: the text is cut into consecutive windows of ``n`` characters and
  every character is scored from the characters of its window up to and including the
  one before it (the target at position ``k`` is predicted from ``k + 1`` inputs: on
  average ``(n + 1) / 2`` characters of context, at least one);
* ``"sliding"``: windows of ``n`` characters advance by ``stride`` (default ``n / 4``)
  and only the last ``stride`` characters of each window are scored, so every scored
  character sees at least ``n - stride + 1`` characters of context.

Press et al. (2022) use the pair to separate a model that merely survives long inputs
from one that uses the extra context: a model that cannot use more than ``L``
characters gains under non-overlapping evaluation as ``n`` grows (fewer characters near a
window's start) and not at all under sliding evaluation.
"""

from __future__ import annotations

import contextlib
import time
import copy
import hashlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .._checks import check_choice, check_int
from ..rope.scaling import extension
from .engine import TrialConfig, fit, seeded
from .models import PositionalTransformer, random_positions
from .resources import DATA_DIR, resource_path
from .results import paired_difference, summarize

__all__ = [
    "CORPUS_FILE",
    "CORPUS_SHA256",
    "EVAL_MODES",
    "EXTENSIONS",
    "TEXT_SCHEMES",
    "CharCorpus",
    "TextConfig",
    "bpc_summary",
    "evaluate_bpc",
    "extension_scaling",
    "fine_tune",
    "fine_tune_extension",
    "load_corpus",
    "long_range_probe",
    "loss_by_position",
    "random_windows",
    "sha256_of",
    "train_lm",
    "with_rotary_scaling",
    "first_losses",
    "EVAL_BLOCK",
    "GRID_VARIANTS",
    "GridConfig",
    "ScoredText",
    "bpc_intervals",
    "char_bits",
    "context_use",
    "copy_probe",
    "grid_first_losses",
    "train_grid_slice",
    "ngram_bits",
    "paired_bpc",
    "repeat_spans",
    "rope_break",
    "t5_first_untrained",
    "scored_text",
    "train_lm_pack",
    "variant_name",
]

#: The corpus that ships with the package, Shakespeare as in Karpathy's char-rnn repository.
CORPUS_FILE = DATA_DIR / "tinyshakespeare.txt"
#: Its SHA-256 (also recorded in ``posenc/book/data/README.md``).
CORPUS_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
#: The two evaluation modes of :func:`evaluate_bpc`.
EVAL_MODES = ("nonoverlapping", "sliding")
#: The schemes of chapter 7's grid (``"none"`` is NoPE).
TEXT_SCHEMES = ("sinusoidal", "learned", "rope", "alibi", "t5", "none", "randomized")
#: The RoPE context extensions of :func:`extension_scaling` (``"none"``: plain RoPE).
EXTENSIONS = ("none", "pi", "ntk", "dynamic_ntk", "yarn")

LOG2E = 1.0 / math.log(2.0)


def sha256_of(path: str | Path) -> str:
    """SHA-256 of a file's bytes, as a hex string."""
    if isinstance(path, bool) or not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or a pathlib.Path, got {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path must be an existing file, got {str(path)!r}")
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class CharCorpus:
    """A text, its character vocabulary and its split by position.

    Attributes:
        name: a label for the corpus.
        text: the whole text.
        chars: the sorted distinct characters (id ``i`` is ``chars[i]``).
        sha256: SHA-256 of the file the text came from.
        fractions: the train and validation fractions (the test text is the rest).
    """

    name: str
    text: str
    chars: tuple[str, ...]
    sha256: str
    fractions: tuple[float, float] = (0.9, 0.05)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text:
            raise ValueError(f"text must be a non-empty str, got {type(self.text).__name__} of length {len(self.text or '')}")
        if tuple(self.chars) != tuple(sorted(set(self.text))):
            raise ValueError("chars must be the sorted distinct characters of text")
        f = self.fractions
        if not (isinstance(f, tuple) and len(f) == 2 and all(0.0 < float(v) < 1.0 for v in f) and sum(f) < 1.0):
            raise ValueError(f"fractions must be (train, validation) in (0, 1) with a sum below 1, got {f!r}")

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """Character ids of ``text`` (a 1-D int64 tensor); unknown characters raise ``ValueError``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        index = {c: i for i, c in enumerate(self.chars)}
        unknown = sorted(set(text) - set(index))
        if unknown:
            raise ValueError(f"text has characters outside the corpus vocabulary: {unknown[:5]!r}")
        return torch.tensor([index[c] for c in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor) -> str:
        """The text of a 1-D tensor (or list) of ids."""
        return "".join(self.chars[int(i)] for i in ids)

    def split(self, part: str) -> torch.Tensor:
        """Ids of ``"train"`` (first 90 %), ``"val"`` (next 5 %) or ``"test"`` (last 5 %)."""
        part = check_choice("part", part, ("train", "val", "test"))
        n = len(self.text)
        a = int(n * self.fractions[0])
        b = int(n * (self.fractions[0] + self.fractions[1]))
        lo, hi = {"train": (0, a), "val": (a, b), "test": (b, n)}[part]
        return self.encode(self.text[lo:hi])

    def record(self) -> dict:
        """``{"name", "characters", "sha256", "vocab_size", "split"}`` for a results file."""
        n = len(self.text)
        a = int(n * self.fractions[0])
        b = int(n * (self.fractions[0] + self.fractions[1]))
        return {
            "name": self.name,
            "characters": n,
            "sha256": self.sha256,
            "vocab_size": self.vocab_size,
            "split": {"train": [0, a], "val": [a, b], "test": [b, n]},
        }


def load_corpus(path: str | Path | None = None, *, name: str | None = None) -> CharCorpus:
    """Read a UTF-8 text file as a :class:`CharCorpus`.

    Without ``path`` the book's corpus (:data:`CORPUS_FILE`) is read and its SHA-256 must
    equal :data:`CORPUS_SHA256` (``ValueError`` otherwise: a changed file would change
    every number of the chapter).

    Example:
        >>> corpus = load_corpus()
        >>> corpus.vocab_size, len(corpus.text)
        (65, 1115394)
    """
    default = path is None
    if default:
        path = resource_path(CORPUS_FILE.name)  # shipped with the package, wherever it is installed
    else:
        if not isinstance(path, (str, Path)):
            raise TypeError(f"path must be a str, a pathlib.Path or None, got {type(path).__name__}")
        path = Path(path)
    digest = sha256_of(path)
    if default and digest != CORPUS_SHA256:
        raise ValueError(f"{path} has SHA-256 {digest}, expected {CORPUS_SHA256} (see posenc/book/data/README.md)")
    text = path.read_text(encoding="utf-8")
    if len(text) < 100:
        raise ValueError(f"path must hold at least 100 characters of text, got {len(text)}")
    return CharCorpus(name or path.stem, text, tuple(sorted(set(text))), digest)


@dataclass(frozen=True)
class TextConfig(TrialConfig):
    """The recipe of :func:`train_lm` and :func:`fine_tune`: one learning rate for every scheme, a fixed step budget.

    The defaults (two layers of width 64 with 4 heads, 1,000 steps of 8 windows of 64
    characters at a peak learning rate of 1e-2) are a base, not a protocol that ran:
    ``experiments/learned_table.py`` overrides ``steps`` (2,000) and ``eval_every`` (500)
    and stores what ran (``learned_table.json``, ``"protocol"``/``"config"``). Chapter 7's
    grid trains with :class:`GridConfig` and builds a ``TextConfig`` only to fine-tune its
    RoPE models for the context extensions (``experiments/ch7_grid.py``): it takes
    ``train_len``, the model's size, ``batch_size`` and ``val_chars`` from the grid, and
    :func:`fine_tune` is given the steps, learning rate and batch size and sets its own
    warm-up and ``eval_every``. There the defaults still in force are ``min_lr_frac``,
    ``weight_decay`` and ``grad_clip``; the grid's results file does not store them.

    Attributes:
        train_len: training context ``L`` (characters).
        d_model, n_heads, n_layers: the model's size.
        batch_size: windows per step.
        steps: the token budget is ``steps * batch_size * train_len`` characters.
        lr: peak AdamW learning rate (the same for every scheme: no per-scheme tuning).
        warmup: steps of linear warm-up; then cosine decay to ``lr * min_lr_frac``.
        weight_decay: AdamW weight decay.
        grad_clip: gradient-norm clipping.
        eval_every: validation bits per character at ``L`` every this many steps; the
            checkpoint with the lowest validation loss is kept (held-out loss decides).
        val_chars: characters of validation text scored each time.
        randomized_max_len: position range of ``scheme="randomized"`` (inputs up to this
            length).
    """

    train_len: int = 64
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    batch_size: int = 8
    steps: int = 1000
    lr: float = 1e-2
    warmup: int = 100
    min_lr_frac: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    eval_every: int = 250
    val_chars: int = 4096
    randomized_max_len: int = 1024

    def validate(self) -> None:
        for name in ("train_len", "d_model", "n_heads", "n_layers", "batch_size", "steps", "eval_every",
                     "val_chars", "randomized_max_len"):
            check_int(name, getattr(self, name))
        check_int("warmup", self.warmup, minimum=0)
        for name in ("lr", "min_lr_frac", "weight_decay", "grad_clip"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.lr == 0:
            raise ValueError("lr must be > 0")

    def model(self, scheme: str, vocab_size: int) -> PositionalTransformer:
        """A fresh model with this configuration (weights from torch's global generator)."""
        scheme = check_choice("scheme", scheme, TEXT_SCHEMES)
        return PositionalTransformer(
            vocab_size,
            scheme=scheme,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            max_len=self.train_len,
            randomized_max_len=self.randomized_max_len,
        )



def random_windows(
    ids: torch.Tensor, length: int, batch_size: int, *, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of random windows: inputs ``ids[s : s + length]`` and targets shifted by one.

    Returns:
        ``(inputs, targets)``, each ``(batch_size, length)``.
    """
    length = check_int("length", length)
    batch_size = check_int("batch_size", batch_size)
    if not isinstance(ids, torch.Tensor) or ids.ndim != 1:
        raise ValueError("ids must be a 1-D tensor of character ids")
    if ids.numel() < length + 2:
        raise ValueError(f"ids must hold more than length + 1 = {length + 1} characters, got {ids.numel()}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator (the windows are seeded), got {type(generator).__name__}")
    starts = torch.randint(0, ids.numel() - length - 1, (batch_size,), generator=generator)
    offsets = torch.arange(length + 1)
    chunk = ids[starts[:, None] + offsets]
    return chunk[:, :-1], chunk[:, 1:]


def _positions_for(model: nn.Module, batch: int, length: int, generator: torch.Generator | None):
    if getattr(model, "scheme", None) != "randomized":
        return None
    return random_positions(batch, length, model.randomized_max_len, generator=generator)


def _forward(model: nn.Module, inputs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    positions = _positions_for(model, inputs.shape[0], inputs.shape[1], generator)
    if positions is None:
        return model(inputs)
    return model(inputs, positions=positions)


def _token_losses(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, generator=None) -> torch.Tensor:
    logits = _forward(model, inputs, generator)
    return nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")


def _lr_at(step: int, config: TextConfig, steps: int) -> float:
    if config.warmup and step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, steps - config.warmup)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return config.lr * (config.min_lr_frac + (1 - config.min_lr_frac) * cosine)


def train_lm(
    model: PositionalTransformer,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    config: TextConfig,
    *,
    seed: int,
    length: int | None = None,
    steps: int | None = None,
    lr: float | None = None,
    warmup: int | None = None,
    batch_size: int | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Train ``model`` on random windows of ``train_ids`` and keep its best validation checkpoint.

    The batches come from a generator seeded by ``seed`` (the same for every scheme); so
    do a randomized model's positions. Every ``config.eval_every`` steps (and at the
    end) the validation bits per character at the training length (non-overlapping, the
    first ``config.val_chars`` characters of ``val_ids``) is measured, and the weights
    with the lowest value are loaded back at the end.

    ``length``, ``steps``, ``lr``, ``warmup`` and ``batch_size`` override the
    configuration (a fine-tune at a longer length uses them).

    Returns:
        ``{"history": [(step, val_bpc), ...], "best_step", "best_val_bpc", "seconds"}``.
    """
    if not isinstance(model, PositionalTransformer):
        raise TypeError(f"model must be a PositionalTransformer, got {type(model).__name__}")
    if not isinstance(config, TextConfig):
        raise TypeError(f"config must be a TextConfig, got {type(config).__name__}")
    seed = check_int("seed", seed, minimum=0)
    length = config.train_len if length is None else check_int("length", length)
    steps = config.steps if steps is None else check_int("steps", steps)
    batch_size = config.batch_size if batch_size is None else check_int("batch_size", batch_size)
    cfg = replace(config, lr=config.lr if lr is None else lr, warmup=config.warmup if warmup is None else warmup)
    out = _fit(model, train_ids, val_ids, config, cfg, seed, length, steps, batch_size, log=log)
    return {
        "history": out.history,
        "best_step": out.best_step,
        "best_val_bpc": out.best_value,
        "seconds": out.seconds,
    }


def _fit(model, train_ids, val_ids, config, cfg, seed, length, steps, batch_size, *, log=None, stop_after=None):
    """Chapter 7's batches, loss and schedule under :func:`~posenc.book.engine.fit` (``cfg``: lr and warm-up)."""
    gen = torch.Generator().manual_seed(seed)
    pos_gen = torch.Generator().manual_seed(seed + 1_000_003)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.99),
    )
    val = val_ids[: config.val_chars + 1]
    # the weights before training are the first candidate (held-out value inf)
    initial = copy.deepcopy(model.state_dict())
    out = fit(
        model,
        iter(lambda: random_windows(train_ids, length, batch_size, generator=gen), None),
        lambda m, batch: _token_losses(m, *batch, pos_gen).mean(),
        optimiser=opt,
        steps=steps,
        schedule=lambda step: _lr_at(step - 1, cfg, steps),
        clip=cfg.grad_clip,
        evaluate=lambda m: evaluate_bpc(m, val, length, mode="nonoverlapping"),
        every=cfg.eval_every,
        keep_best=True,
        log=None if log is None else lambda step, train, v: log(f"step {step}: train {train * LOG2E:.3f} val {v:.3f} bpc"),
        stop_after=stop_after,
    )
    if not out.best_step and stop_after is None:
        model.load_state_dict(initial)
    model.eval()
    return out


def first_losses(config: dict, seed: int, n: int = 20, *, scheme: str, corpus: CharCorpus | None = None, **unit) -> list[float]:
    """The first ``n`` training losses (nats per character) of one :func:`train_lm` run, as it trained them.

    Args:
        config: a ``TextConfig.to_dict()`` (as in ``learned_table.json``'s ``protocol["config"]``).
        seed: the run's seed.
        n: how many losses.
        scheme: the unit key of a row (one of :data:`TEXT_SCHEMES`); ``corpus``: the
            corpus (default :func:`load_corpus`). Other unit keys of a row (``train_len``,
            ``eval_len``, ``mode``, ``bpc``) do not change training and are ignored.

    Example:
        >>> len(first_losses(TextConfig(n_layers=1).to_dict(), 0, 2, scheme="alibi"))
        2
    """
    cfg = TextConfig.from_dict(config)
    corpus = load_corpus() if corpus is None else corpus
    n = check_int("n", n)
    with seeded(seed):
        model = cfg.model(scheme, corpus.vocab_size)
    out = _fit(model, corpus.split("train"), corpus.split("val"), cfg, cfg, seed, cfg.train_len, cfg.steps,
               cfg.batch_size, stop_after=n)
    return out.train_loss


def _check_eval(model, ids, length):
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(ids, torch.Tensor) or ids.ndim != 1 or ids.is_floating_point():
        raise ValueError("ids must be a 1-D integer tensor of character ids")
    length = check_int("length", length)
    if ids.numel() < length + 1:
        raise ValueError(f"ids must hold at least length + 1 = {length + 1} characters, got {ids.numel()}")
    return length


@torch.no_grad()
def _window_losses(model, inputs, targets, seed, batch_size):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(0, inputs.shape[0], batch_size):
        out.append(_token_losses(model, inputs[i : i + batch_size], targets[i : i + batch_size], gen))
    return torch.cat(out)


@torch.no_grad()
def evaluate_bpc(
    model: nn.Module,
    ids: torch.Tensor,
    length: int,
    *,
    mode: str = "nonoverlapping",
    stride: int | None = None,
    batch_size: int = 16,
    seed: int = 0,
) -> float:
    """Bits per character of ``model`` on ``ids`` with windows of ``length`` characters.

    Args:
        model: a character-level language model (``model(tokens)`` gives logits).
        ids: 1-D character ids of the evaluation text.
        length: the window (evaluation input) length ``n``.
        mode: ``"nonoverlapping"`` (consecutive windows, every character scored) or
            ``"sliding"`` (windows advance by ``stride``; only the last ``stride``
            characters of each are scored, each with at least ``n - stride`` characters
            of context).
        stride: sliding stride (default ``length // 4``, at least 1).
        batch_size: windows per forward pass (does not change the result beyond rounding).
        seed: seeds the positions a randomized model draws.

    Raises:
        ValueError: for a learned-position model asked for a window longer than its table
            (the error comes from :class:`posenc.LearnedPositionalEmbedding`).

    Example:
        >>> corpus = load_corpus()
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> m = TextConfig(n_layers=1, d_model=16).model("alibi", corpus.vocab_size)
        >>> 5.5 < evaluate_bpc(m, corpus.split("test")[:257], 64) < 6.5   # untrained: ~log2(65)
        True
    """
    length = _check_eval(model, ids, length)
    mode = check_choice("mode", mode, EVAL_MODES)
    batch_size = check_int("batch_size", batch_size)
    was_training = model.training
    model.eval()
    try:
        if mode == "nonoverlapping":
            n_win = (ids.numel() - 1) // length
            chunk = ids[: n_win * length + 1]
            inputs = chunk[:-1].view(n_win, length)
            targets = chunk[1:].view(n_win, length)
            losses = _window_losses(model, inputs, targets, seed, batch_size)
        else:
            stride = max(1, length // 4) if stride is None else check_int("stride", stride)
            if stride > length:
                raise ValueError(f"stride must be <= length={length}, got {stride}")
            starts = torch.arange(0, ids.numel() - length, stride)
            offsets = torch.arange(length + 1)
            chunk = ids[starts[:, None] + offsets]
            losses = _window_losses(model, chunk[:, :-1], chunk[:, 1:], seed, batch_size)[:, -stride:]
    finally:
        model.train(was_training)
    return float(losses.mean()) * LOG2E


@torch.no_grad()
def loss_by_position(
    model: nn.Module, ids: torch.Tensor, length: int, *, bin_size: int = 8, batch_size: int = 16, seed: int = 0
) -> np.ndarray:
    """Bits per character at each position of non-overlapping windows of ``length`` characters.

    The loss at position ``t`` (0-based) is that of predicting the character after the
    ``t + 1``-th of a window, averaged over every window of ``ids``; positions are then
    averaged in bins of ``bin_size`` (``length`` must be a multiple of it).

    Returns:
        float64 array of ``length // bin_size`` values.
    """
    length = _check_eval(model, ids, length)
    bin_size = check_int("bin_size", bin_size)
    if length % bin_size:
        raise ValueError(f"bin_size must divide length={length}, got {bin_size}")
    was_training = model.training
    model.eval()
    try:
        n_win = (ids.numel() - 1) // length
        chunk = ids[: n_win * length + 1]
        losses = _window_losses(model, chunk[:-1].view(n_win, length), chunk[1:].view(n_win, length), seed, batch_size)
    finally:
        model.train(was_training)
    per_pos = losses.mean(0).double().numpy() * LOG2E
    return per_pos.reshape(-1, bin_size).mean(1)


def extension_scaling(method: str, factor: float, original: int) -> dict | None:
    """The ``scaling`` dict of :class:`posenc.RotaryEmbedding` for a context extension.

    ``method`` is one of :data:`EXTENSIONS`: ``"none"`` (plain RoPE), ``"pi"`` (position
    interpolation, Chen et al. 2023: every frequency divided by ``factor``), ``"ntk"``
    (NTK-aware: the base multiplied by ``factor ** (d / (d - 2))``), ``"dynamic_ntk"``
    (NTK-aware with the factor set per input to ``max(1, n / original)``) or ``"yarn"``
    (Peng et al. 2023: NTK-by-parts plus the attention temperature
    ``0.1 ln(factor) + 1``). ``original`` is the training length.

    Example:
        >>> extension_scaling("pi", 4, 64)
        {'type': 'linear', 'factor': 4.0}
    """
    return extension(check_choice("method", method, EXTENSIONS), factor, original)


def _check_rope(model) -> None:
    if getattr(model, "scheme", None) != "rope":
        raise ValueError(f"model must be a PositionalTransformer with scheme='rope', got {getattr(model, 'scheme', model)!r}")


@contextlib.contextmanager
def with_rotary_scaling(model: PositionalTransformer, scaling: dict | None) -> Iterator[PositionalTransformer]:
    """Within the block, ``model``'s rotary module is one with ``scaling`` (weights unchanged).

    Example:
        >>> m = TextConfig(n_layers=1, d_model=16).model("rope", 65)
        >>> with with_rotary_scaling(m, {"type": "linear", "factor": 2.0}):
        ...     m.positional.scaling is not None
        True
        >>> m.positional.scaling is None
        True
    """
    from ..rotary import RotaryEmbedding

    _check_rope(model)
    original = model.positional
    model.positional = RotaryEmbedding(original.head_dim, layout=original.layout, base=original.base, scaling=scaling)
    try:
        yield model
    finally:
        model.positional = original


def fine_tune(
    model: PositionalTransformer,
    scaling: dict | None,
    length: int,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    config: TextConfig,
    *,
    seed: int,
    steps: int,
    lr: float = 1e-3,
    batch_size: int | None = None,
) -> tuple[PositionalTransformer, dict]:
    """A copy of a trained RoPE model, its rotary module given ``scaling``, fine-tuned on windows of ``length``.

    ``scaling=None`` keeps the trained rotary module: with ``length = L`` that is the
    control that just keeps training at the training length. Training is
    :func:`train_lm` for ``steps`` steps of ``batch_size`` windows (default
    ``config.batch_size``) with a 10 % warm-up to ``lr`` and cosine decay; the checkpoint
    with the lowest validation loss at ``length`` is kept.

    Returns:
        ``(tuned copy, train_lm's info)``.
    """
    from ..rotary import RotaryEmbedding

    _check_rope(model)
    length = check_int("length", length)
    steps = check_int("steps", steps)
    tuned = copy.deepcopy(model)
    if scaling is not None:
        rope = tuned.positional
        tuned.positional = RotaryEmbedding(rope.head_dim, layout=rope.layout, base=rope.base, scaling=scaling)
    batch_size = config.batch_size if batch_size is None else check_int("batch_size", batch_size)
    info = train_lm(tuned, train_ids, val_ids, replace(config, eval_every=max(1, steps // 4)), seed=seed,
                    length=length, steps=steps, lr=lr, warmup=max(1, steps // 10), batch_size=batch_size)
    return tuned, info


def fine_tune_extension(
    model: PositionalTransformer,
    method: str,
    factor: int,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    config: TextConfig,
    **fine_tune_keywords,
) -> tuple[PositionalTransformer, dict]:
    """A copy of a trained RoPE model fine-tuned at ``factor * L`` with an extension's scaling.

    The copy's rotary module uses ``extension_scaling(method, factor, L)`` (for
    ``"dynamic_ntk"`` the factor is then reached at the fine-tuning length), and it is
    trained by :func:`fine_tune` (``fine_tune_keywords``: its ``seed``, ``steps``, ``lr``
    and ``batch_size``) on windows of ``factor * L`` characters with the same number of
    characters per step as the main training (``batch_size`` defaults to
    ``config.batch_size // factor``, at least 1).
    """
    _check_rope(model)
    factor = check_int("factor", factor, minimum=2)
    if fine_tune_keywords.get("batch_size") is None:
        fine_tune_keywords["batch_size"] = max(1, config.batch_size // factor)
    return fine_tune(model, extension_scaling(method, factor, config.train_len), factor * config.train_len,
                     train_ids, val_ids, config, **fine_tune_keywords)


@torch.no_grad()
def long_range_probe(
    model: nn.Module,
    ids: torch.Tensor,
    distance: int,
    *,
    span: int = 16,
    prefix: int = 16,
    n_probes: int = 64,
    seed: int = 0,
) -> dict[str, float]:
    """Can the model copy a span it saw ``distance`` characters earlier?

    Each probe is a window of ``prefix + distance + span`` characters of ``ids`` (windows
    at evenly spaced starts) whose last ``span`` characters are overwritten by a copy of
    the ``span`` characters that start ``distance`` earlier. The bits per character on the
    copy (its characters after the first, which the copy does not determine) are compared
    with those on the same characters where they first appear.

    Returns:
        ``{"first": bpc on the original span, "second": bpc on the copy, "length": window}``.
    """
    distance = check_int("distance", distance)
    span = check_int("span", span, minimum=2)
    prefix = check_int("prefix", prefix, minimum=0)
    n_probes = check_int("n_probes", n_probes)
    length = prefix + distance + span
    if distance < span:
        raise ValueError(f"distance must be >= span={span} (the copies must not overlap), got {distance}")
    _check_eval(model, ids, length)
    starts = torch.linspace(0, ids.numel() - length - 1, n_probes).long()
    windows = ids[starts[:, None] + torch.arange(length)].clone()
    first = slice(prefix, prefix + span)
    windows[:, length - span :] = windows[:, first]
    inputs, targets = windows[:, :-1], windows[:, 1:]
    was_training = model.training
    model.eval()
    try:
        losses = _window_losses(model, inputs, targets, seed, 16)
    finally:
        model.train(was_training)
    # the loss at index t is the prediction of character t + 1; score characters 2..span of each copy
    a = losses[:, prefix : prefix + span - 1]
    b = losses[:, length - span : length - 1]
    return {"first": float(a.mean()) * LOG2E, "second": float(b.mean()) * LOG2E, "length": length}


def bpc_summary(saved: dict, *, extension: str | None = None, finetune_len: int | None = None) -> dict:
    """Mean, standard deviation and count over seeds of the saved bits per character.

    Args:
        saved: a results dict with a list ``rows``, each with ``scheme``, ``seed``,
            ``eval_len``, ``mode`` and ``bpc`` (and ``extension``, ``finetune_len`` for
            the context extensions).
        extension: ``None`` for the main rows (no ``extension`` field), else the
            extension's name (rows with ``finetune_len`` equal to ``finetune_len``:
            ``None`` for zero-shot).

    Returns:
        ``{(scheme, eval_len, mode): summary}``, each the
        :func:`~posenc.book.results.summarize` ``(mean, sd, n)`` of the cell's seeds; rows
        whose ``bpc`` is ``None`` (a learned table asked for a longer input) are left out.

    Example:
        >>> rows = [{"scheme": "alibi", "seed": s, "train_len": 64, "eval_len": 64,
        ...          "mode": "sliding", "bpc": b} for s, b in ((0, 2.0), (1, 2.2))]
        >>> m, sd, n = bpc_summary({"rows": rows})[("alibi", 64, "sliding")]
        >>> round(m, 3), round(sd, 3), n
        (2.1, 0.141, 2)
    """
    if not isinstance(saved, dict) or not isinstance(saved.get("rows"), list):
        raise ValueError("saved must be a results dict with a list 'rows'")
    groups: dict[tuple, list[float]] = {}
    for r in saved["rows"]:
        if r.get("extension") != extension or r.get("bpc") is None:
            continue
        if extension is not None and r.get("finetune_len") != finetune_len:
            continue
        groups.setdefault((r["scheme"], r["eval_len"], r["mode"]), []).append(r["bpc"])
    return {k: summarize(v) for k, v in groups.items()}


# --------------------------------------------------------------------------- the grid of issue 31
#
# Models that use their whole training context: a smaller L, more characters, per-scheme
# learning rates, training until the validation loss stops falling; scored on the whole
# test split against count models, with the context each model uses measured directly.

#: The grid's variants, each a pair of scheme and T5 maximum distance (None for the other
#: schemes). T5 runs at a maximum distance equal to L = 8 (8 buckets, every one trained)
#: and at the book's default 128 (32 buckets, those from distance 8 on never trained);
#: :class:`GridConfig` gives T5 ``min(32, t5_max_distance)`` buckets.
GRID_VARIANTS = (("rope", None), ("alibi", None), ("t5", 8), ("t5", 128), ("sinusoidal", None), ("none", None),
                 ("randomized", None), ("learned", None))


def variant_name(scheme: str, t5_max_distance: int | None = None) -> str:
    """``"t5-32"`` for T5 at maximum distance 32, else the scheme's name.

    Example:
        >>> variant_name("t5", 32), variant_name("rope")
        ('t5-32', 'rope')
    """
    scheme = check_choice("scheme", scheme, TEXT_SCHEMES)
    if scheme == "t5":
        return f"t5-{check_int('t5_max_distance', t5_max_distance)}"
    if t5_max_distance is not None:
        raise ValueError(f"t5_max_distance is for scheme='t5' only, got scheme={scheme!r}")
    return scheme


@dataclass(frozen=True)
class GridConfig(TrialConfig):
    """The recipe of chapter 7's grid (issue 31); the defaults are its protocol.

    Every trial: Adam (``betas``) at a constant learning rate after ``warmup`` steps of
    linear warm-up, batches of ``batch_size`` random windows of ``train_len`` characters;
    every ``eval_every`` steps the validation bits per character at ``train_len``
    (non-overlapping, the first ``val_chars`` validation characters). The stopping rule:
    an evaluation improves when it is lower than the best so far by more than
    ``min_delta``; a trial stops after ``patience`` evaluations in a row without
    improvement (``stop: "patience"``) or at ``max_steps`` (``stop: "budget"``), and its
    weights are those of its best evaluation.

    The defaults train at ``L = 8`` with 128 windows (1,024 characters) per step: measured
    on this model (``experiments/README.md``, chapter 7's pilots), its context-use curve
    is flat beyond about 8 characters when trained at ``L = 16`` or 32, so 8 is the
    longest ``L`` it uses whole. Eight heads of size 8: with four of size 16, ALiBi's
    slopes (1/4 to 1/256) leave three heads nearly blind to position over a window of 8
    and its loss rose with context (the second pilot); with eight, its slopes start at 1/2.
    ``randomized_max_len`` is ``16 L``, the longest input scored.

    Attributes:
        lrs: the learning rates tuned per scheme; betas: Adam's. Tuples; a list (a
            config read back from JSON) is stored as the same tuple.
        repeat_fraction, repeat_span: the positive control of the copy probe: in this
            fraction of the training windows a span of ``repeat_span`` characters is
            copied to a later place in the same window (0: ordinary text).

    Example:
        >>> GridConfig(**GridConfig().to_dict()) == GridConfig()    # lists from JSON become tuples
        True
    """

    train_len: int = 8
    d_model: int = 64
    n_heads: int = 8
    n_layers: int = 2
    batch_size: int = 128
    max_steps: int = 8000
    warmup: int = 200
    lrs: tuple = (2e-3, 4e-3, 8e-3)
    betas: tuple = (0.9, 0.99)
    eval_every: int = 250
    patience: int = 4
    min_delta: float = 0.005
    val_chars: int = 16384
    randomized_max_len: int = 128
    repeat_fraction: float = 0.0
    repeat_span: int = 3

    def __post_init__(self) -> None:
        # a config read back from JSON (``GridConfig(**protocol["config"])``) has lists where the
        # defaults are tuples: the same values, stored as tuples so that equality and hashing hold
        for name in ("lrs", "betas"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        super().__post_init__()

    def validate(self) -> None:
        for name in ("train_len", "d_model", "n_heads", "n_layers", "batch_size", "max_steps", "eval_every",
                     "patience", "val_chars", "randomized_max_len", "repeat_span"):
            check_int(name, getattr(self, name))
        check_int("warmup", self.warmup, minimum=0)
        if not isinstance(self.lrs, tuple) or not self.lrs or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in self.lrs):
            raise ValueError(f"lrs must be a non-empty tuple of numbers > 0, got {self.lrs!r}")
        if not isinstance(self.betas, tuple) or len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be a pair in [0, 1), got {self.betas!r}")
        if not isinstance(self.min_delta, (int, float)) or isinstance(self.min_delta, bool) or not self.min_delta >= 0:
            raise ValueError(f"min_delta must be a number >= 0, got {self.min_delta!r}")
        if not isinstance(self.repeat_fraction, (int, float)) or not 0 <= self.repeat_fraction <= 1:
            raise ValueError(f"repeat_fraction must be in [0, 1], got {self.repeat_fraction!r}")
        if self.repeat_fraction and 2 * self.repeat_span + 1 > self.train_len:
            raise ValueError(f"repeat_span must leave room for two copies in train_len={self.train_len}, "
                             f"got {self.repeat_span}")

    def model(self, scheme: str, vocab_size: int, t5_max_distance: int | None = None) -> PositionalTransformer:
        """A fresh model (weights from torch's global generator: build it under :func:`seeded`).

        T5 gets ``min(32, t5_max_distance)`` buckets: T5's 32 from a maximum distance of 32
        on, and fewer below it (32 buckets need a maximum distance above their 16 exact
        ones), so that at ``t5_max_distance = train_len`` every bucket is trained.
        """
        variant_name(scheme, t5_max_distance)
        kw = {} if t5_max_distance is None else {"t5_max_distance": t5_max_distance,
                                                 "t5_num_buckets": min(32, t5_max_distance)}
        return PositionalTransformer(vocab_size, scheme=scheme, d_model=self.d_model, n_heads=self.n_heads,
                                     n_layers=self.n_layers, max_len=self.train_len,
                                     randomized_max_len=self.randomized_max_len, **kw)


def rope_break(train_len: int, head_dim: int, *, base: float = 10000.0, scaling: dict | None = None) -> tuple[int, float]:
    """Where RoPE is predicted to break: the first pair not yet past half a turn within ``train_len`` reaches it.

    With ``ω_i`` the pair frequencies (:func:`posenc.rotary_frequencies`, with ``scaling``
    for a context extension such as NTK-aware), ``j`` is the first pair with
    ``ω_j (train_len - 1) < π`` (the fastest pair that never saw the sign of its sine flip
    in training), and the first distance with a new half-turn is ``π / ω'_j``, with ``ω'``
    the frequencies under ``scaling`` (the same pair ``j``: which pairs were past half a
    turn is fixed by training).

    Returns:
        ``(j, distance)``.

    Example:
        >>> rope_break(8, 16)                         # L = 8, head size 16: pair 1, at L + 2
        (1, 9.934588265796101)
        >>> pair, d = rope_break(512, 128); pair, round(d - 512)   # Press et al.'s setting
        (36, 47)
    """
    from ..rotary import rotary_frequencies

    train_len = check_int("train_len", train_len, minimum=2)
    head_dim = check_int("head_dim", head_dim, minimum=2)
    omega = rotary_frequencies(head_dim, base=base)
    past = omega * (train_len - 1) < math.pi
    if not past.any():
        raise ValueError(f"train_len={train_len}: every pair of head_dim={head_dim} turns past half a turn within it")
    j = int(np.argmax(past))
    scaled = omega if scaling is None else rotary_frequencies(head_dim, base=base, scaling=scaling)
    return j, float(math.pi / scaled[j])


def t5_first_untrained(train_len: int, max_distance: int, num_buckets: int | None = None) -> int | None:
    """The first distance whose causal T5 bucket no training distance (0 to ``train_len - 1``) reaches.

    ``num_buckets`` defaults to the grid's ``min(32, max_distance)`` (:meth:`GridConfig.model`).
    ``None`` when every distance up to ``max(16 * train_len, max_distance)`` falls in a trained bucket.

    Example:
        >>> t5_first_untrained(8, 128), t5_first_untrained(32, 128), t5_first_untrained(8, 8)
        (8, 35, None)
    """
    from ..bias import t5_relative_bucket

    train_len = check_int("train_len", train_len)
    max_distance = check_int("max_distance", max_distance)
    n = min(32, max_distance) if num_buckets is None else check_int("num_buckets", num_buckets)
    distance = torch.arange(max(16 * train_len, max_distance) + 1)
    buckets = t5_relative_bucket(-distance, bidirectional=False, num_buckets=n, max_distance=max_distance)
    trained = torch.isin(buckets, buckets[:train_len])
    return None if bool(trained.all()) else int(distance[~trained][0])


def repeat_spans(inputs: torch.Tensor, targets: torch.Tensor, fraction: float, span: int, *,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Windows in which a span repeats: the copy probe's positive control.

    In each window with probability ``fraction``, the ``span`` characters at a random
    start ``a`` are written again at ``a + d`` with ``span <= d`` and the copy inside the
    window, so copying at distances up to the window's length is there to be learned.
    The inputs and targets (the window shifted by one) stay consistent.

    Example:
        >>> x = torch.arange(20).view(1, 20); y = x + 1
        >>> x2, y2 = repeat_spans(x, y, 1.0, 4, generator=torch.Generator().manual_seed(0))
        >>> bool(torch.equal(x2[:, 1:], y2[:, :-1]))
        True
    """
    batch, length = inputs.shape
    full = torch.cat([inputs, targets[:, -1:]], dim=1).clone()
    which = torch.rand(batch, generator=generator) < fraction
    n = length + 1
    for b in range(batch):
        draw_d = int(torch.randint(span, n - span + 1, (1,), generator=generator))
        start = int(torch.randint(0, n - span - draw_d + 1, (1,), generator=generator))
        if which[b]:
            full[b, start + draw_d : start + draw_d + span] = full[b, start : start + span]
    return full[:, :-1], full[:, 1:]


class _PackStopped(Exception):
    pass


def train_lm_pack(
    scheme: str,
    seeds: list[int],
    lrs: list[float],
    config: GridConfig,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    *,
    vocab_size: int = 65,
    t5_max_distance: int | None = None,
    extra_every: Callable[[nn.Module], dict] | None = None,
    log: Callable[[str], None] | None = None,
    stop_after: int | None = None,
) -> tuple[list[PositionalTransformer], list[dict]]:
    """Train one trial per ``(seeds[i], lrs[i])`` of a scheme as one batched model, each until its validation loss stops falling.

    Trial ``i`` starts from ``config.model(...)`` built under ``seeded(seeds[i])``; its
    batches (random windows, a randomized model's positions, the positive control's
    repeated spans) come from a generator seeded by ``seeds[i]``, so every scheme sees the
    same characters. Training is :func:`~posenc.book.engine.fit_batched` (a trial's numbers
    do not depend on its pack); the pack ends when every trial has stopped by
    :class:`GridConfig`'s rule or at ``max_steps``, and each model ends with its best
    weights (the best before its own stop).

    Args:
        extra_every: ``extra_every(model)``, more values recorded at each evaluation (e.g.
            bits per character beyond ``L``: the break against training step).
        vocab_size: the corpus's vocabulary (65 for the book's corpus).
        stop_after: stop every trial after this many steps (the first losses of a run).

    Returns:
        The pair ``(models, infos)``; an info is a dict with ``seed``, ``lr``, ``history``
        (a list of ``[step, val_bpc, extra]``), ``best_step``, ``best_val_bpc``, ``stop``,
        ``stop_step``, ``steps_run`` and ``train_loss``.
    """
    from .engine import fit_batched

    if not isinstance(config, GridConfig):
        raise TypeError(f"config must be a GridConfig, got {type(config).__name__}")
    seeds = [check_int("seeds", s, minimum=0) for s in seeds]
    if not seeds or len(lrs) != len(seeds):
        raise ValueError(f"lrs must have one entry per seed ({len(seeds)}), got {len(lrs)}")
    vocab = check_int("vocab_size", vocab_size)
    models = []
    for seed in seeds:
        with seeded(seed):
            models.append(config.model(scheme, vocab, t5_max_distance))
    L = config.train_len
    randomized = scheme == "randomized"

    def batches(seed: int) -> Iterator:
        gen = torch.Generator().manual_seed(seed)
        while True:
            x, y = random_windows(train_ids, L, config.batch_size, generator=gen)
            if config.repeat_fraction:
                x, y = repeat_spans(x, y, config.repeat_fraction, config.repeat_span, generator=gen)
            parts = (x, y)
            if randomized:
                parts += (random_positions(x.shape[0], L, config.randomized_max_len, generator=gen),)
            yield parts

    def loss(forward, inputs, targets, *positions):
        logits = forward(inputs, *positions)
        return nn.functional.cross_entropy(logits.transpose(1, 2), targets)

    val = val_ids[: config.val_chars + 1]
    k = len(seeds)
    infos = [{"seed": s, "lr": float(lr), "history": [], "best_step": 0, "best_val_bpc": math.inf, "stop": "budget",
              "stop_step": None} for s, lr in zip(seeds, lrs)]
    best_states: list = [None] * k
    since = [0] * k
    step_of = {"n": 0}

    def evaluate(i: int, model: nn.Module) -> float:
        if i == 0:
            step_of["n"] += 1
        step = min(step_of["n"] * config.eval_every, limit)
        info = infos[i]
        value = evaluate_bpc(model, val, L, mode="nonoverlapping")
        extra = {} if extra_every is None else extra_every(model)
        info["history"].append([step, round(value, 4), *([extra] if extra else [])])
        if info["stop_step"] is None:
            if value < info["best_val_bpc"] - config.min_delta:
                info["best_val_bpc"], info["best_step"], since[i] = value, step, 0
                best_states[i] = copy.deepcopy(model.state_dict())
            else:
                since[i] += 1
                if since[i] >= config.patience:
                    info["stop"], info["stop_step"] = "patience", step
        if i == k - 1:
            if log is not None:
                log(f"{scheme} step {step}: val " + " ".join(f"{r['history'][-1][1]:.3f}" for r in infos))
            if all(r["stop_step"] is not None for r in infos):
                raise _PackStopped
        return value

    limit = config.max_steps if stop_after is None else min(stop_after, config.max_steps)
    warmup = config.warmup
    t0 = time.perf_counter()
    out = None
    try:
        out = fit_batched(models, [batches(s) for s in seeds], loss, lrs=[float(v) for v in lrs], steps=limit,
                          schedule=(lambda step: min(1.0, step / warmup)) if warmup else None,
                          betas=tuple(config.betas), evaluate=evaluate, every=config.eval_every)
    except _PackStopped:
        pass
    for i, model in enumerate(models):
        if best_states[i] is not None:
            model.load_state_dict(best_states[i])
        model.eval()
        info = infos[i]
        info["steps_run"] = info["history"][-1][0] if info["history"] else 0
        if info["stop_step"] is None:
            info["stop_step"] = info["steps_run"]
        info["best_val_bpc"] = round(info["best_val_bpc"], 4)
        info["train_loss"] = None if out is None else out[i].train_loss
    seconds = time.perf_counter() - t0
    for info in infos:
        info["seconds"] = round(seconds, 1)
    return models, infos


# --------------------------------------------------------------------------- scoring on the whole test split

#: Characters per block of the whole-test evaluation, 27 blocks of 2,048 (a multiple of
#: every evaluation length up to 512, so every mode scores the same characters).
EVAL_BLOCK = 2048


@dataclass(frozen=True, eq=False)
class ScoredText:
    """The characters a grid scores: ``ids[start : start + count]``, each predicted from what precedes it in ``ids``.

    ``ids`` is the validation text followed by the test text, so that a scored test
    character near the start of the test split can still get its left context;
    ``start`` is the position of the second test character (the first is only context,
    as in a non-overlapping evaluation) and ``count`` a whole number of blocks of
    ``block`` characters. :func:`scored_text` builds the grid's.
    """

    ids: torch.Tensor
    start: int
    count: int
    block: int = EVAL_BLOCK

    @property
    def n_blocks(self) -> int:
        return self.count // self.block

    def blocks(self, bits: np.ndarray, every: int = 1) -> list[float]:
        """Mean bits per block of ``bits`` (one value per scored character, or per ``every``-th)."""
        per = self.block // every
        return [float(v) for v in np.asarray(bits, dtype=np.float64).reshape(self.n_blocks, per).mean(1)]


def scored_text(corpus: CharCorpus, *, block: int = EVAL_BLOCK) -> ScoredText:
    """The whole test split as scored by the grid: every test character after the first, in whole blocks.

    Example:
        >>> s = scored_text(load_corpus())
        >>> s.count, s.n_blocks
        (55296, 27)
    """
    block = check_int("block", block)
    val, test = corpus.split("val"), corpus.split("test")
    count = (test.numel() - 1) // block * block
    if not count:
        raise ValueError(f"block must be at most the test text's length - 1 = {test.numel() - 1}, got {block}")
    return ScoredText(torch.cat([val, test]), val.numel() + 1, count, block)


@torch.no_grad()
def char_bits(
    model: nn.Module,
    text: ScoredText,
    length: int,
    *,
    mode: str = "nonoverlapping",
    stride: int | None = None,
    context: int | None = None,
    every: int = 1,
    batch_size: int = 64,
    seed: int = 0,
) -> np.ndarray:
    """Bits on every scored character of ``text`` (``np.float64``, one per character), with windows of ``length``.

    Modes (each scores exactly the characters ``text.ids[start : start + count]``):

    * ``"nonoverlapping"``: consecutive windows of ``length`` characters; the ``j``-th
      character of a window (from 1) is predicted from the ``j`` characters before it in
      the window, so the mean context is ``(length + 1) / 2``;
    * ``"sliding"``: windows of ``length`` advancing by ``stride`` (default
      ``length // 4``); each scores its last ``stride`` characters, every one with at
      least ``length - stride + 1`` characters of context (reaching back into the
      validation text at the start);
    * ``"exact"``: every character predicted from exactly ``context`` characters (a window
      of ``context`` inputs per character; ``length`` is ignored): the context-use curve.

    ``every > 1`` scores every ``every``-th character only (``"exact"`` mode: a cheaper
    curve on a fixed subset).

    Example:
        >>> s = scored_text(load_corpus())
        >>> m = GridConfig(n_layers=1, d_model=16).model("alibi", 65)
        >>> char_bits(m, s, 32, mode="exact", context=4, every=64).shape
        (864,)
    """
    mode = check_choice("mode", mode, ("nonoverlapping", "sliding", "exact"))
    if not isinstance(text, ScoredText):
        raise TypeError(f"text must be a ScoredText (see scored_text), got {type(text).__name__}")
    length = check_int("length", length)
    every = check_int("every", every)
    if text.block % every:
        raise ValueError(f"every must divide the block size {text.block}, got {every}")
    ids, s, n = text.ids, text.start, text.count
    was_training = model.training
    model.eval()
    try:
        if mode == "exact":
            k = check_int("context", context)
            if k > s:
                raise ValueError(f"context must be at most {s} (the text before the first scored character), got {k}")
            targets = torch.arange(s, s + n, every)
            windows = ids[targets[:, None] - k + torch.arange(k + 1)]
            return _bits(model, windows, batch_size, seed, last=1)
        if mode == "nonoverlapping":
            if n % length:
                raise ValueError(f"length must divide the scored count {n}, got {length}")
            windows = ids[s - 1 : s + n].unfold(0, length + 1, length)
            return _bits(model, windows, batch_size, seed)[::every]
        stride = max(1, length // 4) if stride is None else check_int("stride", stride)
        if stride > length or n % stride:
            raise ValueError(f"stride must be <= length={length} and divide the scored count {n}, got {stride}")
        if s + stride - length - 1 < 0:
            raise ValueError(f"length {length} needs more text before the first scored character")
        ends = torch.arange(s + stride, s + n + 1, stride)  # each window's targets end just before `end`
        windows = ids[ends[:, None] - length - 1 + torch.arange(length + 1)]
        return _bits(model, windows, batch_size, seed, last=stride)[::every]
    finally:
        model.train(was_training)


def _bits(model, windows, batch_size, seed, last=None) -> np.ndarray:
    """Bits of each target of ``windows`` (``(w, n + 1)``: inputs then targets), the last ``last`` of each, flattened."""
    losses = _window_losses(model, windows[:, :-1], windows[:, 1:], seed, batch_size)
    if last is not None:
        losses = losses[:, -last:]
    return losses.reshape(-1).double().numpy() * LOG2E


@torch.no_grad()
def context_use(model: nn.Module, text: ScoredText, contexts, *, every: int = 4, batch_size: int = 256) -> dict[int, np.ndarray]:
    """The context-use curve: bits per scored character when it is predicted from exactly ``k`` characters, per ``k``.

    A model that uses ``c`` characters of context stops improving at ``k = c``; the
    grid asks that the curve still falls between ``L / 2`` and ``L``.

    Returns:
        ``{k: bits}``, each an array over every ``every``-th scored character.
    """
    return {int(k): char_bits(model, text, 1, mode="exact", context=int(k), every=every, batch_size=batch_size)
            for k in contexts}


def ngram_bits(train_ids: torch.Tensor, text: ScoredText, order: int, *, discount: float = 0.75,
               vocab_size: int | None = None) -> np.ndarray:
    """Bits per scored character of an interpolated absolute-discount character count model seeing ``order`` characters.

    The model (Ney, Essen and Kneser 1994): with ``c(h, x)`` the count in ``train_ids`` of
    character ``x`` after the context ``h`` (the ``k`` characters before it), ``c(h)``
    their sum and ``N(h)`` the number of distinct characters seen after ``h``,

    ``p_k(x | h) = max(c(h, x) - D_k, 0) / c(h) + D_k N(h) / c(h) * p_{k-1}(x | h')``,

    with ``h'`` the ``k - 1`` most recent characters of ``h``, ``p_k = p_{k-1}`` when
    ``h`` was never seen, one ``discount`` ``D_k = D`` for every order (0.75, the common
    choice; the review of issue 31 used it) and ``p_{-1}`` uniform: a normalised
    distribution over the vocabulary for every ``order >= 0``.

    Returns:
        ``np.float64`` bits (``-log2 p``) for each scored character of ``text``.

    Example:
        >>> c = load_corpus()
        >>> round(float(ngram_bits(c.split("train"), scored_text(c), 0).mean()), 2)   # unigram
        4.85
    """
    order = check_int("order", order, minimum=0)
    if isinstance(discount, bool) or not isinstance(discount, (int, float)) or not 0 < discount < 1:
        raise ValueError(f"discount must be a number in (0, 1), got {discount!r}")
    d = float(discount)
    if not isinstance(text, ScoredText):
        raise TypeError(f"text must be a ScoredText (see scored_text), got {type(text).__name__}")
    if not isinstance(train_ids, torch.Tensor) or train_ids.ndim != 1 or train_ids.is_floating_point():
        raise ValueError("train_ids must be a 1-D integer tensor of character ids")
    v = int(max(train_ids.max(), text.ids.max())) + 1 if vocab_size is None else check_int("vocab_size", vocab_size)
    if v ** (order + 1) >= 2**62:
        raise ValueError(f"order {order} is too large for codes of vocabulary {v}")
    tr = train_ids.numpy().astype(np.int64)
    ev = text.ids.numpy().astype(np.int64)
    targets = np.arange(text.start, text.start + text.count)
    if order > text.start:
        raise ValueError(f"order must be at most {text.start}, got {order}")
    p = np.full(targets.size, 1.0 / v)
    for k in range(order + 1):
        # codes of the (k+1)-grams: context characters then the character
        gram = np.zeros(tr.size - k, dtype=np.int64)
        for j in range(k + 1):
            gram = gram * v + tr[j : tr.size - k + j]
        codes, counts = np.unique(gram, return_counts=True)
        ctx_codes, ctx_first, ctx_distinct = np.unique(codes // v, return_index=True, return_counts=True)
        ctx_total = np.add.reduceat(counts, ctx_first)
        q = np.zeros(targets.size, dtype=np.int64)
        for j in range(k + 1):
            q = q * v + ev[targets - k + j]
        hc = q // v
        i = np.clip(np.searchsorted(codes, q), 0, codes.size - 1)
        c_hx = np.where(codes[i] == q, counts[i], 0)
        jh = np.clip(np.searchsorted(ctx_codes, hc), 0, ctx_codes.size - 1)
        seen = ctx_codes[jh] == hc
        c_h = np.where(seen, ctx_total[jh], 1)
        n_h = np.where(seen, ctx_distinct[jh], 0)
        p = np.where(seen, np.maximum(c_hx - d, 0) / c_h + d * n_h / c_h * p, p)
    return -np.log2(p)


@torch.no_grad()
def copy_probe(
    model: nn.Module,
    ids: torch.Tensor,
    distance: int,
    *,
    span: int = 8,
    prefix: int = 8,
    n_probes: int = 256,
    seed: int = 0,
) -> dict:
    """The controlled copy probe: what a model gains on a span from having seen it ``distance`` characters earlier.

    Each probe is a window of ``prefix + distance + span`` characters of ``ids`` (windows
    at evenly spaced starts in the first half of ``ids``) whose last ``span`` characters
    are replaced by the ``span`` characters at ``prefix`` (the first occurrence). The
    control is the same window with the first occurrence replaced by other text (the
    characters at the same place of a window from the second half of ``ids``); the
    second occurrence and everything else are identical. The gain is the control's bits
    minus the copy's on the second occurrence's characters after its first (which the
    copy does not determine): positive when the model copies, about zero when it does
    not, whatever the splice costs (both windows have the splice).

    Returns:
        A dict with ``gain`` (the mean gain in bits per character), ``gains`` (the
        per-probe gains, a list), ``copy`` (bits on the copy), ``control`` (bits on the
        control) and ``length`` (the window).

    Example:
        >>> c = load_corpus()
        >>> m = GridConfig(n_layers=1, d_model=16).model("alibi", 65)
        >>> out = copy_probe(m, c.split("test"), 16, n_probes=4)
        >>> out["length"], len(out["gains"])
        (32, 4)
    """
    distance = check_int("distance", distance)
    span = check_int("span", span, minimum=2)
    prefix = check_int("prefix", prefix, minimum=0)
    n_probes = check_int("n_probes", n_probes)
    if distance < span:
        raise ValueError(f"distance must be >= span={span} (the copies must not overlap), got {distance}")
    length = prefix + distance + span
    half = ids.numel() // 2
    _check_eval(model, ids[:half], length)
    offsets = torch.arange(length)
    starts = torch.linspace(0, half - length - 1, n_probes).long()
    copy_w = ids[starts[:, None] + offsets].clone()
    first = slice(prefix, prefix + span)
    copy_w[:, length - span :] = copy_w[:, first]
    control = copy_w.clone()
    control[:, first] = ids[(starts + half)[:, None] + offsets][:, first]
    was_training = model.training
    model.eval()
    try:
        a = _window_losses(model, copy_w[:, :-1], copy_w[:, 1:], seed, 32)[:, length - span : length - 1]
        b = _window_losses(model, control[:, :-1], control[:, 1:], seed, 32)[:, length - span : length - 1]
    finally:
        model.train(was_training)
    gains = ((b - a).mean(1).double() * LOG2E).tolist()
    return {"gain": float(np.mean(gains)), "gains": gains, "copy": float(a.mean()) * LOG2E,
            "control": float(b.mean()) * LOG2E, "length": length}


# --------------------------------------------------------------------------- chapter 7's live run
#
# A slice of the grid's model that a notebook can train in seconds: one trial of the
# grid's recipe (:func:`train_lm_pack`), with the grid's initial weights and batches, run
# in float64 so that the digits a reader sees do not depend on the CPU's kernels.


class _Float64Grid(GridConfig):
    """A :class:`GridConfig` whose models are built as the grid builds them, then cast to float64."""

    def model(self, scheme: str, vocab_size: int, t5_max_distance: int | None = None) -> PositionalTransformer:
        return super().model(scheme, vocab_size, t5_max_distance).double()


def train_grid_slice(
    scheme: str,
    config: GridConfig,
    corpus: CharCorpus,
    *,
    seed: int = 0,
    lr: float = 4e-3,
    dtype: torch.dtype = torch.float64,
    t5_max_distance: int | None = None,
) -> tuple[PositionalTransformer, dict]:
    """One trial of chapter 7's grid recipe (``config``, e.g. ``GridConfig`` with a short ``max_steps``), in ``dtype``.

    Trains ``scheme`` on ``corpus``'s training split with :func:`train_lm_pack` (one
    seed, learning rate ``lr``, the validation split for its evaluations). The model
    starts from the grid's initial weights for ``seed`` and sees the grid's batches;
    with ``dtype=torch.float64`` those weights are cast to float64 before training, so
    a run of a few hundred steps prints the same digits on any CPU (the grid trains in
    float32; ``dtype=torch.float32`` is exactly its trial).

    Returns:
        The pair ``(model, info)``; the model is in eval mode with the weights of its
        best evaluation, and ``info`` is :func:`train_lm_pack`'s info dict of the trial.

    Example:
        >>> cfg = GridConfig(n_layers=1, d_model=16, n_heads=2, batch_size=4, max_steps=2,
        ...                  eval_every=2, warmup=0, val_chars=64)
        >>> model, info = train_grid_slice("alibi", cfg, load_corpus())
        >>> next(model.parameters()).dtype, [h[0] for h in info["history"]]
        (torch.float64, [2])
    """
    if not isinstance(config, GridConfig):
        raise TypeError(f"config must be a GridConfig, got {type(config).__name__}")
    if not isinstance(corpus, CharCorpus):
        raise TypeError(f"corpus must be a CharCorpus (load_corpus()), got {type(corpus).__name__}")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    seed = check_int("seed", seed, minimum=0)
    variant_name(scheme, t5_max_distance)
    if dtype == torch.float64:
        config = _Float64Grid.from_dict(config.to_dict())
    (model,), (info,) = train_lm_pack(scheme, [seed], [float(lr)], config, corpus.split("train"), corpus.split("val"),
                                      vocab_size=corpus.vocab_size, t5_max_distance=t5_max_distance)
    return model, info


def grid_first_losses(config: dict, seed: int, n: int = 20, *, scheme: str, lr: float,
                      t5_max_distance: int | None = None, **unit) -> list[float]:
    """The first ``n`` training losses (nats) of one trial of chapter 7's grid, as :func:`train_lm_pack` trains it.

    ``config`` is the grid's ``GridConfig.to_dict()``; other unit keys are ignored.

    Example:
        >>> cfg = GridConfig(n_layers=1, d_model=16, eval_every=2, val_chars=64).to_dict()
        >>> len(grid_first_losses(cfg, 0, 2, scheme="rope", lr=1e-3))
        2
    """
    cfg = GridConfig.from_dict(config)
    corpus = load_corpus()
    _, infos = train_lm_pack(scheme, [seed], [lr], cfg, corpus.split("train"), corpus.split("val"),
                             vocab_size=corpus.vocab_size, t5_max_distance=t5_max_distance,
                             stop_after=check_int("n", n))
    return infos[0]["train_loss"][:n]


def bpc_intervals(rows: list[dict], key: str = "bpc", *, seed: int = 0) -> dict:
    """One cell's bits per character over seeds, with a t interval over seeds and a bootstrap over blocks of text.

    ``rows`` are the rows of one cell (one per seed), each with ``key`` and
    ``block_<key>`` (the per-block means of :meth:`ScoredText.blocks`).

    Returns:
        A dict with ``mean``, ``n_seeds``, ``seeds`` (the per-seed values), ``t95``
        (the interval over seeds), ``bootstrap95`` (the 95 % interval of the mean over
        resampled blocks, the per-block means averaged over seeds first) and ``n_blocks``.

    Example:
        >>> rows = [{"bpc": 2.0, "block_bpc": [1.9, 2.1]}, {"bpc": 2.2, "block_bpc": [2.1, 2.3]}]
        >>> out = bpc_intervals(rows)
        >>> round(out["mean"], 3), out["n_seeds"], out["n_blocks"]
        (2.1, 2, 2)
    """
    vals = [r.get(key) for r in rows]
    over_seeds = summarize(vals, interval="t95")
    blocks = [r["block_" + key] for r in rows if r.get("block_" + key) is not None]
    per_block = np.mean(np.asarray(blocks, dtype=np.float64), axis=0) if blocks else np.zeros(0)
    boot = summarize(per_block, interval="bootstrap", seed=seed)
    return {"mean": over_seeds.mean, "n_seeds": over_seeds.n, "seeds": vals, "t95": list(over_seeds.interval),
            "bootstrap95": list(boot.interval), "n_blocks": int(per_block.size)}


def paired_bpc(a_rows: list[dict], b_rows: list[dict], key: str = "bpc", *, seed: int = 0) -> dict:
    """``a - b`` for two cells scored on the same characters: paired over seeds and over blocks of text.

    Rows are matched by ``seed``; ``"seeds"`` is :func:`~posenc.book.results.paired_difference`
    of the per-seed values (``a_lower`` counts the seeds where ``a`` is lower), ``"blocks"``
    that of the per-block means averaged over the shared seeds. ``"indistinguishable"``
    is true when either 95 % interval (t over seeds, bootstrap over blocks) contains 0.

    Example:
        >>> a = [{"seed": s, "bpc": 2.0 + s / 10, "block_bpc": [1.9 + s / 10, 2.1 + s / 10]} for s in (0, 1, 2)]
        >>> b = [{**r, "bpc": r["bpc"] + 0.1, "block_bpc": [v + 0.1 for v in r["block_bpc"]]} for r in a]
        >>> d = paired_bpc(a, b)
        >>> round(d["seeds"]["mean"], 3), d["seeds"]["a_lower"], d["indistinguishable"]
        (-0.1, 3, False)
    """
    a_by = {r["seed"]: r for r in a_rows}
    b_by = {r["seed"]: r for r in b_rows}
    shared = sorted(set(a_by) & set(b_by))
    if not shared:
        raise ValueError("a_rows and b_rows must share at least one seed")
    over_seeds = paired_difference([a_by[s].get(key) for s in shared], [b_by[s].get(key) for s in shared], seed=seed)
    blk = "block_" + key
    if all(a_by[s].get(blk) is not None and b_by[s].get(blk) is not None for s in shared):
        a_blocks = np.mean([a_by[s][blk] for s in shared], axis=0)
        b_blocks = np.mean([b_by[s][blk] for s in shared], axis=0)
        over_blocks = paired_difference(a_blocks, b_blocks, seed=seed)
    else:
        over_blocks = None

    def crosses(interval) -> bool:
        lo, hi = interval
        return not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0 <= hi

    undecided = crosses(over_seeds["t95"]) or (over_blocks is not None and crosses(over_blocks["bootstrap"]))
    return {"seeds": over_seeds, "blocks": over_blocks, "shared_seeds": shared, "indistinguishable": undecided}
