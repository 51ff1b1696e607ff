"""Synthetic sequence tasks whose answer depends on position, for chapter 6's experiment.

Every task maps a batch of random token sequences to a target token at every position
and a boolean mask of the positions that are scored (a causal model cannot answer before
the token it needs has been seen). The tasks are defined for any length, so a model
trained at one length can be scored at longer ones.

* ``"offset_copy"`` (relative position): the target at position ``t`` is the token at
  ``t - offset`` (``offset = 3``). The rule is the same at every position, so a model that
  knows the distance between two tokens can solve it at any length.
* ``"long_offset_copy"``: the same with ``offset = 10``, beyond the clipping distance
  (8) of the book's Shaw et al. model, whose relative vectors cannot tell 10 from 8.
* ``"fixed_retrieve"`` (absolute position): the target at every position ``t >= index``
  is the token at absolute position ``index`` (``index = 2``). The distance to that token
  grows with ``t``: the model has to know where position ``index`` is, not how far away
  it is.
* ``"far_retrieve"``: the same with ``index = 12``, far from the start of the sequence,
  where counting from the first token is harder.

Three further tasks (:data:`NEW_TASKS`) cover the regimes of the literature that the
pointer tasks above do not:

* ``"associative_recall"`` (content-addressed): the sequence is key-value pairs, keys
  from the ids ``[0, vocab_size // 2)`` and values from the rest; each key keeps one
  value within a sequence. At every key that occurred before, the target is its value
  (the next token). Which pair to read is found by content, at whatever distance.
* ``"separator_copy"`` (copy after a separator, Kazemnejad et al. 2023's Copy): ``n`` data
  tokens, the separator ``vocab_size - 1``, then the same ``n`` tokens again. From the
  separator on, the target is the next token of the copy: the token ``n`` positions back,
  so the look-back changes from sequence to sequence.
* ``"latest_marker"`` (order only): random data tokens, some of them the marker
  ``vocab_size - 1`` (never two in a row). The target at ``t`` is the token that followed
  the latest marker before ``t``. "Latest" and "followed" are relations of order: the rule
  holds however the positions are spaced, so no fixed distance or position solves it.

Sequences of different lengths share a batch through ``lengths``: row ``i`` holds
``lengths[i]`` task tokens and the positions after them are filler that is never scored
(in a causal model they cannot change the earlier outputs). :func:`draw_lengths` draws
the training lengths of the protocol that samples them, ``U(1, L)`` less the lengths
too short to score anything.

With ``bos=True`` a beginning-of-sequence token (id ``vocab_size``) is prepended to
every sequence: positions shift by one, the token is never scored, and the model needs
``vocab_size + 1`` input ids. Such an anchor lets a causal model without positional
encoding count positions (Kazemnejad et al. 2023, Theorem 1).

Each task has a floor below which an accuracy shows nothing learned about the task:
:func:`trivial_accuracy` scores the rules that need no retrieval (a uniform guess over
the target's ids, the current token, the most frequent earlier token of the target's
kind) position by position, and :func:`chance_floor` averages the best of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import numpy as np

from .._checks import check_choice, check_int

#: The pointer tasks of chapter 6's first grid (the answer sits at a fixed distance or position).
TASKS = ("offset_copy", "fixed_retrieve", "long_offset_copy", "far_retrieve")

#: The content-addressed, variable-length copy and order-only tasks.
NEW_TASKS = ("associative_recall", "separator_copy", "latest_marker")

#: Every task accepted by :func:`make_task_batch`.
ALL_TASKS = TASKS + NEW_TASKS

#: Tasks whose answer depends on the sequence's own length (the separator's place), for
#: which training lengths are drawn by :func:`draw_lengths`.
VARIABLE_LENGTH_TASKS = ("separator_copy", "latest_marker")

#: The fraction of the positions of ``"latest_marker"`` that are markers (before the
#: rule that no two markers are adjacent removes some).
MARKER_RATE = 0.25

#: The default look-back (relative tasks) or read position (absolute tasks) of each task.
TASK_DEFAULTS = {"offset_copy": 3, "fixed_retrieve": 2, "long_offset_copy": 10, "far_retrieve": 12}

#: Tasks whose answer depends on the distance between two tokens (the others on an absolute position).
RELATIVE_TASKS = ("offset_copy", "long_offset_copy")

__all__ = [
    "ALL_TASKS",
    "MARKER_RATE",
    "NEW_TASKS",
    "RELATIVE_TASKS",
    "TASKS",
    "TASK_DEFAULTS",
    "VARIABLE_LENGTH_TASKS",
    "TaskBatch",
    "chance_floor",
    "draw_lengths",
    "first_scored",
    "make_task_batch",
    "min_length",
    "target_ids",
    "trivial_accuracy",
]


def first_scored(task: str, *, offset: int | None = None, index: int | None = None) -> int:
    """The first scored position of ``task`` (its offset or index), without a BOS token.

    Example:
        >>> first_scored("far_retrieve"), first_scored("offset_copy", offset=5)
        (12, 5)
    """
    task = check_choice("task", task, TASKS)
    if task in RELATIVE_TASKS:
        value = TASK_DEFAULTS[task] if offset is None else offset
        return check_int("offset", value, minimum=1)
    value = TASK_DEFAULTS[task] if index is None else index
    return check_int("index", value, minimum=0)


def min_length(task: str, *, offset: int | None = None, index: int | None = None) -> int:
    """The shortest sequence (task tokens, without BOS) in which ``task`` scores a position.

    Example:
        >>> min_length("offset_copy"), min_length("separator_copy")
        (4, 3)
    """
    task = check_choice("task", task, ALL_TASKS)
    if task in TASKS:
        return first_scored(task, offset=offset, index=index) + 1
    return 3


def target_ids(task: str, vocab_size: int = 16) -> tuple[int, int]:
    """The ids ``[low, high)`` a target of ``task`` can take (a uniform guess among them is chance).

    Example:
        >>> target_ids("offset_copy"), target_ids("associative_recall"), target_ids("latest_marker")
        ((0, 16), (8, 16), (0, 15))
    """
    task = check_choice("task", task, ALL_TASKS)
    vocab_size = check_int("vocab_size", vocab_size, minimum=_MIN_VOCAB[task])
    if task == "associative_recall":
        return vocab_size // 2, vocab_size
    if task in ("separator_copy", "latest_marker"):
        return 0, vocab_size - 1
    return 0, vocab_size


_MIN_VOCAB = {**{t: 2 for t in TASKS}, "associative_recall": 4, "separator_copy": 3, "latest_marker": 3}


@dataclass(frozen=True)
class TaskBatch:
    """One batch of a synthetic task.

    Attributes:
        inputs: ``(batch, length)`` token ids in ``[0, vocab_size)``.
        targets: ``(batch, length)`` target token ids (0 where ``mask`` is ``False``).
        mask: ``(batch, length)`` booleans, ``True`` at the positions that are scored.
    """

    inputs: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor

    def __post_init__(self) -> None:
        for name in ("inputs", "targets", "mask"):
            value = getattr(self, name)
            if not isinstance(value, torch.Tensor) or value.ndim != 2:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise TypeError(f"{name} must be a (batch, length) torch.Tensor, got {got}")
        if self.targets.shape != self.inputs.shape or self.mask.shape != self.inputs.shape:
            raise ValueError(
                f"targets and mask must have the shape of inputs {tuple(self.inputs.shape)}, "
                f"got {tuple(self.targets.shape)} and {tuple(self.mask.shape)}"
            )
        if self.mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor, got {self.mask.dtype}")


def draw_lengths(task: str, batch_size: int, max_length: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Training lengths ``U(m, max_length)``, one per sequence, for :func:`make_task_batch`'s ``lengths``.

    ``m`` is :func:`min_length`, the shortest sequence that scores a position: ``U(1, L)``
    as Kazemnejad et al. (2023) and Ruoss et al. (2023) draw it, less the lengths that
    would score nothing and so add nothing to the loss (this keeps every batch scored).
    For ``"separator_copy"`` the copied part is drawn, ``n ~ U(1, (max_length - 1) // 2)``,
    and the length is ``2 n + 1`` (the tokens, the separator, the copy). For a task whose
    target at ``t`` depends only on the tokens up to ``t`` (all but
    ``"separator_copy"``), a causal model's output at a position does not depend on what
    follows, so drawn lengths act as a loss weight on position ``t`` that falls with
    ``t``; they matter where the answer depends on the length (the separator's place)
    and for randomized positions, whose spacing depends on it.

    Returns:
        ``(batch_size,)`` int64 tensor of lengths in ``[m, max_length]``.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> n = draw_lengths("separator_copy", 1000, 16, generator=g)
        >>> int(n.min()), int(n.max()), bool((n % 2 == 1).all())
        (3, 15, True)
        >>> int(draw_lengths("far_retrieve", 1000, 16, generator=g).min())
        13
    """
    task = check_choice("task", task, ALL_TASKS)
    batch_size = check_int("batch_size", batch_size)
    shortest = min_length(task)
    max_length = check_int("max_length", max_length, minimum=shortest)
    _check_generator(generator)
    if task == "separator_copy":
        n = torch.randint(1, (max_length - 1) // 2 + 1, (batch_size,), generator=generator)
        return 2 * n + 1
    return torch.randint(shortest, max_length + 1, (batch_size,), generator=generator)


def _check_generator(generator: object) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")


def make_task_batch(
    task: str,
    batch_size: int,
    length: int,
    *,
    vocab_size: int = 16,
    offset: int | None = None,
    index: int | None = None,
    bos: bool = False,
    generator: torch.Generator | None = None,
    lengths: torch.Tensor | None = None,
) -> TaskBatch:
    """Draw a batch of a task: random tokens, the task's targets and the scored positions.

    Args:
        task: one of :data:`ALL_TASKS`: ``"offset_copy"`` or ``"long_offset_copy"`` (target
            at ``t`` is the token at ``t - offset``), ``"fixed_retrieve"`` or
            ``"far_retrieve"`` (target at ``t >= index`` is the token at ``index``),
            ``"associative_recall"``, ``"separator_copy"`` or ``"latest_marker"`` (see
            the module's description).
        batch_size: number of sequences (>= 1).
        length: sequence length without the BOS token; at least :func:`min_length` so
            that some position is scored.
        vocab_size: number of token ids (>= 2; >= 4 for ``"associative_recall"``, >= 3
            for the tasks with a separator or marker, which is id ``vocab_size - 1``).
        offset: the look-back distance of the relative tasks (>= 1; ``None``: the task's
            entry in :data:`TASK_DEFAULTS`).
        index: the absolute position read by the absolute tasks (>= 0; ``None``: the
            task's default), counted without the BOS token.
        bos: prepend the beginning-of-sequence token ``vocab_size`` (unscored).
        generator: a seeded ``torch.Generator`` for reproducible batches.
        lengths: ``(batch_size,)`` integers in ``[1, length]``: row ``i`` holds
            ``lengths[i]`` task tokens, the rest is unscored filler (``None``: every row
            is ``length`` long). For ``"separator_copy"`` a row of length ``m`` copies
            ``(m - 1) // 2`` tokens. The random draws do not depend on ``lengths``.

    Returns:
        A :class:`TaskBatch` of ``(batch_size, length)`` tensors
        (``(batch_size, length + 1)`` with ``bos``).

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> b = make_task_batch("offset_copy", 1, 6, vocab_size=10, offset=2, generator=g)
        >>> bool(torch.equal(b.targets[0, 2:], b.inputs[0, :4]))
        True
        >>> b.mask.int()
        tensor([[0, 0, 1, 1, 1, 1]], dtype=torch.int32)
        >>> make_task_batch("far_retrieve", 1, 14, bos=True, generator=g).inputs[0, 0].item()
        16
        >>> c = make_task_batch("separator_copy", 1, 7, vocab_size=10, generator=g)
        >>> c.inputs[0, 3].item(), bool(torch.equal(c.inputs[0, 4:], c.inputs[0, :3]))
        (9, True)
        >>> c.mask.int()
        tensor([[0, 0, 0, 1, 1, 1, 0]], dtype=torch.int32)
    """
    task = check_choice("task", task, ALL_TASKS)
    batch_size = check_int("batch_size", batch_size)
    length = check_int("length", length)
    vocab_size = check_int("vocab_size", vocab_size, minimum=_MIN_VOCAB[task])
    _check_generator(generator)
    if not isinstance(bos, bool):
        raise TypeError(f"bos must be a bool, got {type(bos).__name__}")
    shortest = min_length(task, offset=offset, index=index)
    if length < shortest:
        if task in TASKS:
            name = "offset" if task in RELATIVE_TASKS else "index"
            raise ValueError(f"length must be > {name}={shortest - 1} so that some position is scored, got {length}")
        raise ValueError(f"length must be >= {shortest} for task={task!r} so that some position is scored, got {length}")
    if lengths is not None:
        if not isinstance(lengths, torch.Tensor) or lengths.shape != (batch_size,) or lengths.is_floating_point():
            got = tuple(lengths.shape) if isinstance(lengths, torch.Tensor) else type(lengths).__name__
            raise ValueError(f"lengths must be an integer tensor of shape (batch_size={batch_size},), got {got}")
        if lengths.numel() and (int(lengths.min()) < 1 or int(lengths.max()) > length):
            raise ValueError(f"lengths must lie in [1, length={length}], got {int(lengths.min())}..{int(lengths.max())}")
    rows = torch.full((batch_size,), length, dtype=torch.long) if lengths is None else lengths.long()
    if task in TASKS:
        first = shortest - 1
        inputs = torch.randint(0, vocab_size, (batch_size, length), generator=generator)
        targets = torch.zeros_like(inputs)
        mask = torch.zeros(batch_size, length, dtype=torch.bool)
        mask[:, first:] = True
        if task in RELATIVE_TASKS:
            targets[:, first:] = inputs[:, :-first]
        else:
            targets[:, first:] = inputs[:, first : first + 1]
    else:
        inputs, targets, mask = _NEW[task](batch_size, length, vocab_size, rows, generator)
    mask &= torch.arange(length) < rows[:, None]
    if bos:
        inputs = torch.cat([torch.full((batch_size, 1), vocab_size, dtype=inputs.dtype), inputs], dim=1)
        targets = torch.cat([torch.zeros(batch_size, 1, dtype=targets.dtype), targets], dim=1)
        mask = torch.cat([torch.zeros(batch_size, 1, dtype=torch.bool), mask], dim=1)
    return TaskBatch(inputs, targets, mask)


def _associative_recall(batch_size, length, vocab_size, rows, generator):
    keys_n = vocab_size // 2
    pairs = (length + 1) // 2
    keys = torch.randint(0, keys_n, (batch_size, pairs), generator=generator)
    table = torch.randint(keys_n, vocab_size, (batch_size, keys_n), generator=generator)
    values = table.gather(1, keys)
    inputs = torch.stack([keys, values], dim=2).reshape(batch_size, 2 * pairs)[:, :length]
    onehot = torch.nn.functional.one_hot(keys, keys_n)
    seen = ((onehot.cumsum(dim=1) - onehot) * onehot).sum(dim=2) > 0  # the key occurred at an earlier pair
    targets = torch.zeros_like(inputs)
    mask = torch.zeros(batch_size, length, dtype=torch.bool)
    targets[:, 0::2] = values[:, : (length + 1) // 2]
    mask[:, 0::2] = seen[:, : (length + 1) // 2]
    return inputs, targets, mask


def _separator_copy(batch_size, length, vocab_size, rows, generator):
    data = torch.randint(0, vocab_size - 1, (batch_size, length), generator=generator)
    n = ((rows - 1) // 2)[:, None]
    t = torch.arange(length)[None, :]
    source = torch.where(t < n, t, torch.where((t > n) & (t <= 2 * n), t - n - 1, t))
    inputs = data.gather(1, source)
    inputs = torch.where(t == n, vocab_size - 1, inputs)
    mask = (t >= n) & (t < 2 * n)
    targets = torch.zeros_like(inputs)
    targets[:, :-1] = inputs[:, 1:]
    return inputs, torch.where(mask, targets, 0), mask


def _latest_marker(batch_size, length, vocab_size, rows, generator):
    data = torch.randint(0, vocab_size - 1, (batch_size, length), generator=generator)
    drawn = torch.rand(batch_size, length, generator=generator) < MARKER_RATE
    marker = drawn.clone()
    marker[:, 1:] = drawn[:, 1:] & ~drawn[:, :-1]  # never two markers in a row
    inputs = torch.where(marker, vocab_size - 1, data)
    t = torch.arange(length)[None, :]
    latest = torch.where(marker, t, -1).cummax(dim=1).values  # the latest marker at or before t
    mask = (latest >= 0) & (latest + 1 < t)
    targets = inputs.gather(1, (latest + 1).clamp(0, length - 1))
    return inputs, torch.where(mask, targets, 0), mask


_NEW = {"associative_recall": _associative_recall, "separator_copy": _separator_copy, "latest_marker": _latest_marker}


def trivial_accuracy(batch: TaskBatch, task: str, *, vocab_size: int = 16) -> dict[str, np.ndarray]:
    """Position by position, the accuracy of the rules that retrieve nothing, on ``batch``.

    The rules: ``"uniform"`` (a uniform guess among :func:`target_ids`), ``"current"``
    (the token at ``t`` itself: right at the retrieve tasks' own index), ``"earlier_mode"``
    (the most frequent token up to ``t`` among the target's ids, ties to the smaller id).
    ``"floor"`` is the best rule at each position. Positions never scored are ``nan``.
    A BOS token (id ``vocab_size``) is dropped first.

    Returns:
        ``{rule: (length,) float64 array}``.

    Example:
        >>> b = make_task_batch("far_retrieve", 512, 16, generator=torch.Generator().manual_seed(0))
        >>> floor = trivial_accuracy(b, "far_retrieve")["floor"]
        >>> float(floor[12]), bool(1 / 16 < floor[13] < 0.3)
        (1.0, True)
    """
    if not isinstance(batch, TaskBatch):
        raise TypeError(f"batch must be a TaskBatch, got {type(batch).__name__}")
    task = check_choice("task", task, ALL_TASKS)
    low, high = target_ids(task, vocab_size)
    inputs, targets, mask = batch.inputs, batch.targets, batch.mask
    if inputs.shape[1] and bool((inputs[:, 0] == vocab_size).all()) and not bool(mask[:, 0].any()):
        inputs, targets, mask = inputs[:, 1:], targets[:, 1:], mask[:, 1:]
    counts = mask.sum(dim=0).double()

    def rate(hit: torch.Tensor) -> np.ndarray:
        acc = (hit & mask).sum(dim=0).double() / counts
        return acc.masked_fill(counts == 0, float("nan")).numpy()

    onehot = torch.nn.functional.one_hot(inputs.clamp(0, high - 1), high)[..., low:high]
    onehot = onehot * (inputs >= low)[..., None]
    mode = low + onehot.cumsum(dim=1).argmax(dim=2)
    out = {
        "uniform": np.where(counts.numpy() > 0, 1.0 / (high - low), np.nan),
        "current": rate(inputs == targets),
        "earlier_mode": rate(mode == targets),
    }
    out["floor"] = np.fmax.reduce([out["uniform"], out["current"], out["earlier_mode"]])
    return out


def chance_floor(
    task: str,
    length: int,
    *,
    start: int = 0,
    vocab_size: int = 16,
    bos: bool = False,
    size: int = 4096,
    seed: int = 0,
) -> float:
    """The accuracy that needs no retrieval: :func:`trivial_accuracy`'s floor over the positions ``>= start``.

    Each scored position contributes its best trivial rule, weighted by how often it is
    scored, on ``size`` sequences of ``length`` task tokens drawn from ``seed`` (a
    Monte-Carlo estimate; its standard error is below ``0.5 / sqrt(size * positions)``).
    Far retrieve's floor in distribution is about 0.4, not 1/16: a quarter of its scored
    positions are its own index, where the answer is the current token, and elsewhere
    the most frequent earlier token is right more often than a uniform guess (what a
    model that attends to all earlier tokens alike gets).

    Example:
        >>> round(chance_floor("far_retrieve", 16), 1), round(chance_floor("far_retrieve", 64, start=16), 2)
        (0.4, 0.15)
    """
    task = check_choice("task", task, ALL_TASKS)
    length = check_int("length", length)
    start = check_int("start", start, minimum=0)
    if start >= length:
        raise ValueError(f"start must be < length={length}, got {start}")
    size = check_int("size", size)
    seed = check_int("seed", seed, minimum=0)
    batch = make_task_batch(task, size, length, vocab_size=vocab_size, bos=bos, generator=torch.Generator().manual_seed(seed))
    floor = trivial_accuracy(batch, task, vocab_size=vocab_size)["floor"]
    mask = batch.mask[:, int(bos):]
    counts = mask.sum(dim=0).double().numpy()
    counts[:start] = 0.0
    if counts.sum() == 0:
        raise ValueError(f"task={task!r} scores no position >= start={start} at length={length}")
    return float(np.nansum(np.where(counts > 0, floor, 0.0) * counts) / counts.sum())
