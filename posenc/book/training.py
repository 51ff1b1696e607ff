"""A seeded training loop and length-extrapolation evaluation for chapter 6's experiment.

One *run* trains a fresh :class:`~posenc.models.PositionalTransformer` with one positional
scheme on one task from one seed, then scores it on held-out sequences at several
lengths. Everything random (initial weights, training batches, evaluation batches)
comes from generators seeded by the run's seed, so a run repeats exactly on the same
machine with ``torch.use_deterministic_algorithms(True)`` and a fixed thread count.
Evaluation batches depend on the seed and the length only, never on the scheme: every
scheme is scored on the same sequences.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from .._checks import check_choice, check_int
from .models import SCHEMES, PositionalTransformer, count_parameters
from .results import acc_key, pos_key
from .tasks import TASKS, make_task_batch

__all__ = ["RunConfig", "config_dict", "evaluate_accuracy", "run_trial", "score_keys", "seeded", "train_model"]


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block with torch's global generator seeded by ``seed``, then restore it.

    The one seeding policy of the book's training loops: whatever they draw from the
    global generator (initial weights) is fixed by ``seed``, and the caller's random
    state is left exactly as it was, so a notebook cell after a run draws the same
    numbers whether or not the run happened. A notebook that wants its own random
    numbers seeds them itself.

    Example:
        >>> with seeded(0):
        ...     a = torch.rand(1)
        >>> with seeded(0):
        ...     b = torch.rand(1)
        >>> bool(a == b)
        True
    """
    seed = check_int("seed", seed, minimum=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@dataclass(frozen=True)
class RunConfig:
    """Settings shared by all runs of an experiment (the scheme, task and seed vary).

    Attributes:
        train_len: sequence length during training.
        eval_factors: evaluation lengths as multiples of ``train_len``.
        steps: optimiser steps.
        batch_size: sequences per step.
        lr: Adam learning rate (constant).
        vocab_size: token ids; chance accuracy is ``1 / vocab_size``.
        d_model, n_heads, n_layers: model size.
        offset: look-back of ``"offset_copy"``.
        index: position read by ``"fixed_retrieve"``.
        eval_size: held-out sequences per evaluation length.
    """

    train_len: int = 16
    eval_factors: tuple[int, ...] = (1, 2, 4)
    steps: int = 300
    batch_size: int = 32
    lr: float = 3e-3
    vocab_size: int = 16
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    offset: int = 3
    index: int = 2
    eval_size: int = 256
    extra: dict = field(default_factory=dict)

    def model(self, scheme: str) -> PositionalTransformer:
        """A fresh model with these settings (learned embeddings get ``max_len = train_len``)."""
        return PositionalTransformer(
            self.vocab_size,
            scheme=scheme,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            max_len=self.train_len,
            **self.extra,
        )


def _masked_loss(model: nn.Module, batch) -> torch.Tensor:
    logits = model(batch.inputs)
    return nn.functional.cross_entropy(logits[batch.mask], batch.targets[batch.mask])


def train_model(
    model: nn.Module,
    task: str,
    config: RunConfig,
    *,
    seed: int,
    callback: Callable[[int, nn.Module], None] | None = None,
) -> list[float]:
    """Train ``model`` in place on ``task`` with Adam; returns the loss of every step.

    Args:
        model: a :class:`~posenc.models.PositionalTransformer` (or any module mapping
            ``(batch, seq)`` tokens to logits).
        task: one of :data:`~posenc.tasks.TASKS`.
        config: lengths, steps, batch size, learning rate, task settings.
        seed: seeds the training batches (the caller seeds the initial weights).
        callback: called as ``callback(step, model)`` after every step (``step`` counts
            from 1); it must not consume the global random state if runs are to repeat.

    Example:
        >>> cfg = RunConfig(steps=2, batch_size=4)
        >>> _ = torch.manual_seed(0)
        >>> losses = train_model(cfg.model("alibi"), "offset_copy", cfg, seed=0)
        >>> len(losses)
        2
    """
    task = check_choice("task", task, TASKS)
    seed = check_int("seed", seed, minimum=0)
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
    model.train()
    losses = []
    for step in range(1, config.steps + 1):
        batch = make_task_batch(
            task,
            config.batch_size,
            config.train_len,
            vocab_size=config.vocab_size,
            offset=config.offset,
            index=config.index,
            generator=generator,
        )
        loss = _masked_loss(model, batch)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
        if callback is not None:
            callback(step, model)
            model.train()
    return losses


@torch.no_grad()
def evaluate_accuracy(
    model: nn.Module,
    task: str,
    length: int,
    config: RunConfig,
    *,
    seed: int,
    per_position: bool = False,
) -> float | list[float]:
    """Token accuracy of ``model`` on held-out sequences of ``length``, over scored positions.

    With ``per_position=True`` the result is a list of ``length`` accuracies, one per
    position (``nan`` at positions that are not scored, and everywhere when the model
    cannot run at this length).

    The evaluation sequences depend only on ``seed`` and ``length`` (they are drawn from a
    generator seeded with ``1_000_003 * (seed + 1) + length``, disjoint in practice from
    the training stream). A learned-embedding model cannot process sequences longer than
    its ``max_len``; for those the result is ``nan`` (there is nothing to score).

    Returns:
        Accuracy in ``[0, 1]``, or ``nan`` when the model cannot run at this length.
    """
    task = check_choice("task", task, TASKS)
    length = check_int("length", length)
    seed = check_int("seed", seed, minimum=0)
    if getattr(model, "scheme", None) == "learned" and length > model.max_len:
        return [math.nan] * length if per_position else math.nan
    generator = torch.Generator().manual_seed(1_000_003 * (seed + 1) + length)
    batch = make_task_batch(
        task,
        config.eval_size,
        length,
        vocab_size=config.vocab_size,
        offset=config.offset,
        index=config.index,
        generator=generator,
    )
    model.eval()
    correct = (model(batch.inputs).argmax(dim=-1) == batch.targets).float()
    if per_position:
        acc = correct.mean(dim=0).masked_fill(~batch.mask[0], math.nan)
        return acc.tolist()
    return correct[batch.mask].mean().item()


def run_trial(
    scheme: str,
    task: str,
    seed: int,
    config: RunConfig | None = None,
    *,
    checkpoints: tuple[int, ...] = (),
    per_position: bool = False,
    keep_model: bool = False,
) -> dict:
    """Train one model from scratch and score it at every evaluation length.

    Args:
        scheme: one of :data:`~posenc.models.SCHEMES`.
        task: one of :data:`~posenc.tasks.TASKS`.
        seed: seeds the initial weights, the training batches and the evaluation batches.
        config: shared settings (defaults to ``RunConfig()``).
        checkpoints: earlier step counts at which to score the model as well (the same
            run, so a longer training budget costs nothing extra to compare).
        per_position: also return the accuracy at every position of every length.
        keep_model: also return the trained model under ``"model"``.

    Returns:
        A dict with ``scheme``, ``task``, ``seed``, ``params`` (whole model),
        ``scheme_params`` (trainable parameters of the positional scheme),
        ``final_loss`` (mean of the last 10 steps), ``seconds`` (training wall time,
        machine-dependent, evaluation excluded) and ``acc_<f>x`` for every evaluation
        factor ``f``; with ``checkpoints``, ``"checkpoints"`` maps each step to its
        ``acc_<f>x`` dict; with ``per_position``, ``pos_<f>x`` lists.

    Example:
        >>> r = run_trial("rope", "offset_copy", 0, RunConfig(steps=2, batch_size=4, eval_size=4))
        >>> sorted(r)[:4]
        ['acc_1x', 'acc_2x', 'acc_4x', 'final_loss']
    """
    scheme = check_choice("scheme", scheme, SCHEMES)
    config = RunConfig() if config is None else config
    seed = check_int("seed", seed, minimum=0)
    wanted = {check_int("checkpoints", c) for c in checkpoints}

    def score(model: nn.Module) -> dict:
        return {
            acc_key(f): evaluate_accuracy(model, task, f * config.train_len, config, seed=seed)
            for f in config.eval_factors
        }

    scores: dict[int, dict] = {}
    eval_seconds = 0.0

    def callback(step: int, model: nn.Module) -> None:
        nonlocal eval_seconds
        if step in wanted and step != config.steps:
            t = time.perf_counter()
            scores[step] = score(model)
            eval_seconds += time.perf_counter() - t

    with seeded(seed):
        model = config.model(scheme)
    start = time.perf_counter()
    losses = train_model(model, task, config, seed=seed, callback=callback if wanted else None)
    seconds = time.perf_counter() - start - eval_seconds
    result = {
        "scheme": scheme,
        "task": task,
        "seed": seed,
        "params": count_parameters(model),
        "scheme_params": model.scheme_parameters(),
        "final_loss": sum(losses[-10:]) / len(losses[-10:]),
        "seconds": seconds,
    }
    result.update(score(model))
    if wanted:
        scores[config.steps] = {k: result[k] for k in score_keys(config)}
        result["checkpoints"] = dict(sorted(scores.items()))
    if per_position:
        for f in config.eval_factors:
            result[pos_key(f)] = evaluate_accuracy(
                model, task, f * config.train_len, config, seed=seed, per_position=True
            )
    if keep_model:
        result["model"] = model
    return result


def score_keys(config: RunConfig) -> list[str]:
    """The accuracy keys of :func:`run_trial` for ``config``: ``["acc_1x", "acc_2x", ...]``."""
    return [acc_key(f) for f in config.eval_factors]


def config_dict(config: RunConfig) -> dict:
    """The settings of ``config`` as a plain dict (for saving next to results)."""
    d = asdict(config)
    d["eval_factors"] = list(d["eval_factors"])
    return d
