"""Synthetic sequence tasks whose answer depends on position, for chapter 6's experiment.

Every task maps a batch of random token sequences to a target token at every position
and a boolean mask of the positions that are scored (a causal model cannot answer before
the token it needs has been seen). The tasks are defined for any length, so a model
trained at one length can be scored at longer ones.

* ``"offset_copy"`` (relative position): the target at position ``t`` is the token at
  ``t - offset``. The rule is the same at every position, so a model that knows the
  distance between two tokens can solve it at any length.
* ``"fixed_retrieve"`` (absolute position): the target at every position ``t >= index``
  is the token at absolute position ``index``. The distance to that token grows with
  ``t``: the model has to know where position ``index`` is, not how far away it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._checks import check_choice, check_int

#: The task names accepted by :func:`make_task_batch`.
TASKS = ("offset_copy", "fixed_retrieve")

__all__ = ["TASKS", "TaskBatch", "make_task_batch"]


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


def make_task_batch(
    task: str,
    batch_size: int,
    length: int,
    *,
    vocab_size: int = 16,
    offset: int = 3,
    index: int = 2,
    generator: torch.Generator | None = None,
) -> TaskBatch:
    """Draw a batch of uniformly random tokens and the task's targets.

    Args:
        task: ``"offset_copy"`` (target at ``t`` is the token at ``t - offset``) or
            ``"fixed_retrieve"`` (target at ``t >= index`` is the token at ``index``).
        batch_size: number of sequences (>= 1).
        length: sequence length; must exceed ``offset`` (or ``index``) so that at least
            one position is scored.
        vocab_size: number of token ids (>= 2); chance accuracy is ``1 / vocab_size``.
        offset: the look-back distance of ``"offset_copy"`` (>= 1).
        index: the absolute position read by ``"fixed_retrieve"`` (>= 0).
        generator: a seeded ``torch.Generator`` for reproducible batches.

    Returns:
        A :class:`TaskBatch` of ``(batch_size, length)`` tensors.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> b = make_task_batch("offset_copy", 1, 6, vocab_size=10, offset=2, generator=g)
        >>> bool(torch.equal(b.targets[0, 2:], b.inputs[0, :4]))
        True
        >>> b.mask.int()
        tensor([[0, 0, 1, 1, 1, 1]], dtype=torch.int32)
    """
    task = check_choice("task", task, TASKS)
    batch_size = check_int("batch_size", batch_size)
    length = check_int("length", length)
    vocab_size = check_int("vocab_size", vocab_size, minimum=2)
    offset = check_int("offset", offset, minimum=1)
    index = check_int("index", index, minimum=0)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    first = offset if task == "offset_copy" else index
    if length <= first:
        name = "offset" if task == "offset_copy" else "index"
        raise ValueError(f"length must be > {name}={first} so that some position is scored, got {length}")
    inputs = torch.randint(0, vocab_size, (batch_size, length), generator=generator)
    targets = torch.zeros_like(inputs)
    mask = torch.zeros(batch_size, length, dtype=torch.bool)
    mask[:, first:] = True
    if task == "offset_copy":
        targets[:, offset:] = inputs[:, :-offset]
    else:
        targets[:, index:] = inputs[:, index : index + 1]
    return TaskBatch(inputs, targets, mask)
