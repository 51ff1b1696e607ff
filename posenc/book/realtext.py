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
  every character is scored with whatever precedes it *in its window* (on average
  ``n / 2`` characters of context; the first character of a window has none);
* ``"sliding"``: windows of ``n`` characters advance by ``stride`` (default ``n / 4``)
  and only the last ``stride`` characters of each window are scored, so every scored
  character sees at least ``n - stride`` characters of context.

Press et al. (2022) use the pair to separate a model that merely survives long inputs
from one that uses the extra context: a model that cannot use more than ``L``
characters gains under non-overlapping evaluation as ``n`` grows (fewer characters near a
window's start) and not at all under sliding evaluation.
"""

from __future__ import annotations

import contextlib
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
from .results import summarize

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
    "fine_tune_extension",
    "load_corpus",
    "long_range_probe",
    "loss_by_position",
    "random_windows",
    "sha256_of",
    "train_lm",
    "with_rotary_scaling",
    "first_losses",
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
    """One training recipe for every scheme (chapter 7).

    The defaults are the protocol that ran (``experiments/results/realtext.json``,
    ``"protocol"``/``"config"``): two layers of width 64 with 4 heads, 1,000 steps of 8
    windows of 64 characters at a peak learning rate of 1e-2.

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
    """The first ``n`` training losses (nats per character) of one run of chapter 7's grid, as it trained them.

    Args:
        config: the grid's ``protocol["config"]`` (a :meth:`~posenc.book.engine.TrialConfig.to_dict`, as in
            ``realtext.json``).
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

    if getattr(model, "scheme", None) != "rope":
        raise ValueError(f"model must be a PositionalTransformer with scheme='rope', got {getattr(model, 'scheme', model)!r}")
    original = model.positional
    model.positional = RotaryEmbedding(original.head_dim, layout=original.layout, base=original.base, scaling=scaling)
    try:
        yield model
    finally:
        model.positional = original


def fine_tune_extension(
    model: PositionalTransformer,
    method: str,
    factor: int,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    config: TextConfig,
    *,
    seed: int,
    steps: int,
    lr: float = 1e-3,
    batch_size: int | None = None,
) -> tuple[PositionalTransformer, dict]:
    """A copy of a trained RoPE model fine-tuned at ``factor * L`` with an extension's scaling.

    The copy's rotary module uses ``extension_scaling(method, factor, L)`` (for
    ``"dynamic_ntk"`` the factor is then reached at the fine-tuning length), and it is
    trained for ``steps`` steps on windows of ``factor * L`` characters with the same
    number of characters per step as the main training (``batch_size`` defaults to
    ``config.batch_size // factor``, at least 1), a 10 % warm-up to ``lr`` and cosine
    decay; the checkpoint with the lowest validation loss at the new length is kept.
    """
    from ..rotary import RotaryEmbedding

    if getattr(model, "scheme", None) != "rope":
        raise ValueError(f"model must be a PositionalTransformer with scheme='rope', got {getattr(model, 'scheme', model)!r}")
    factor = check_int("factor", factor, minimum=2)
    steps = check_int("steps", steps)
    tuned = copy.deepcopy(model)
    rope = tuned.positional
    tuned.positional = RotaryEmbedding(
        rope.head_dim, layout=rope.layout, base=rope.base, scaling=extension_scaling(method, factor, config.train_len)
    )
    batch_size = max(1, config.batch_size // factor) if batch_size is None else check_int("batch_size", batch_size)
    info = train_lm(
        tuned,
        train_ids,
        val_ids,
        replace(config, eval_every=max(1, steps // 4)),
        seed=seed,
        length=factor * config.train_len,
        steps=steps,
        lr=lr,
        warmup=max(1, steps // 10),
        batch_size=batch_size,
    )
    return tuned, info


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
        saved: the results dict of ``experiments/realtext.py`` (a list ``rows``).
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
