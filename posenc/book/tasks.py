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

With ``bos=True`` a beginning-of-sequence token (id ``vocab_size``) is prepended to
every sequence: positions shift by one, the token is never scored, and the model needs
``vocab_size + 1`` input ids. Such an anchor lets a causal model without positional
encoding count positions (Kazemnejad et al. 2023, Theorem 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._checks import check_choice, check_int

#: The task names accepted by :func:`make_task_batch`.
TASKS = ("offset_copy", "fixed_retrieve", "long_offset_copy", "far_retrieve")

#: The default look-back (relative tasks) or read position (absolute tasks) of each task.
TASK_DEFAULTS = {"offset_copy": 3, "fixed_retrieve": 2, "long_offset_copy": 10, "far_retrieve": 12}

#: Tasks whose answer depends on the distance between two tokens (the others on an absolute position).
RELATIVE_TASKS = ("offset_copy", "long_offset_copy")

__all__ = ["RELATIVE_TASKS", "TASKS", "TASK_DEFAULTS", "TaskBatch", "first_scored", "make_task_batch"]


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
) -> TaskBatch:
    """Draw a batch of uniformly random tokens and the task's targets.

    Args:
        task: one of :data:`TASKS`: ``"offset_copy"`` or ``"long_offset_copy"`` (target
            at ``t`` is the token at ``t - offset``), ``"fixed_retrieve"`` or
            ``"far_retrieve"`` (target at ``t >= index`` is the token at ``index``).
        batch_size: number of sequences (>= 1).
        length: sequence length without the BOS token; must exceed ``offset`` (or
            ``index``) so that at least one position is scored.
        vocab_size: number of token ids (>= 2); chance accuracy is ``1 / vocab_size``.
        offset: the look-back distance of the relative tasks (>= 1; ``None``: the task's
            entry in :data:`TASK_DEFAULTS`).
        index: the absolute position read by the absolute tasks (>= 0; ``None``: the
            task's default), counted without the BOS token.
        bos: prepend the beginning-of-sequence token ``vocab_size`` (unscored).
        generator: a seeded ``torch.Generator`` for reproducible batches.

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
    """
    task = check_choice("task", task, TASKS)
    batch_size = check_int("batch_size", batch_size)
    length = check_int("length", length)
    vocab_size = check_int("vocab_size", vocab_size, minimum=2)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if not isinstance(bos, bool):
        raise TypeError(f"bos must be a bool, got {type(bos).__name__}")
    first = first_scored(task, offset=offset, index=index)
    if length <= first:
        name = "offset" if task in RELATIVE_TASKS else "index"
        raise ValueError(f"length must be > {name}={first} so that some position is scored, got {length}")
    inputs = torch.randint(0, vocab_size, (batch_size, length), generator=generator)
    targets = torch.zeros_like(inputs)
    mask = torch.zeros(batch_size, length, dtype=torch.bool)
    mask[:, first:] = True
    if task in RELATIVE_TASKS:
        targets[:, first:] = inputs[:, :-first]
    else:
        targets[:, first:] = inputs[:, first : first + 1]
    if bos:
        inputs = torch.cat([torch.full((batch_size, 1), vocab_size, dtype=inputs.dtype), inputs], dim=1)
        targets = torch.cat([torch.zeros(batch_size, 1, dtype=targets.dtype), targets], dim=1)
        mask = torch.cat([torch.zeros(batch_size, 1, dtype=torch.bool), mask], dim=1)
    return TaskBatch(inputs, targets, mask)
