"""A seeded training loop and length-extrapolation evaluation for chapter 6's experiment.

One *run* trains a fresh :class:`~posenc.book.models.PositionalTransformer` with one
positional scheme on one task from one seed, then scores it on held-out sequences at
several lengths. With ``RunConfig(eval_every=n)`` the run is scored every ``n`` steps and
stops early once the in-distribution accuracy has not improved by ``min_delta`` for
``patience`` evaluations (or at ``steps``, the budget); the learning rate warms up
linearly over ``warmup`` steps and then stays constant. Everything random (initial weights, training batches, evaluation batches)
comes from generators seeded by the run's seed, so a run repeats exactly on the same
machine with ``torch.use_deterministic_algorithms(True)`` and a fixed thread count.
Evaluation batches depend on the seed and the length only, never on the scheme: every
scheme is scored on the same sequences.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from .._checks import check_choice, check_int
from ..rope import scaling as rope_scaling
from .engine import FitResult, TrialConfig, fit, fit_batched, seeded
from .models import SCHEMES, PositionalTransformer, count_parameters, random_positions
from .results import acc_key, pos_key, summarize
from .tasks import TASKS, first_scored, make_task_batch
from ._validate import check_names, check_real, check_rows

__all__ = [
    "CONTEXT_EXTENSIONS",
    "RunConfig",
    "accuracy_at_step",
    "final_rows",
    "grid_summary",
    "verdict",
    "beyond_key",
    "context_extension",
    "evaluate_accuracy",
    "run_trial",
    "seeded",
    "train_model",
    "first_losses",
    "train_pack",
]

#: The RoPE context extensions compared by :func:`context_extension`.
CONTEXT_EXTENSIONS = ("none", "position_interpolation", "ntk", "dynamic_ntk", "yarn")


def beyond_key(factor: int) -> str:
    """The result key of the accuracy on the positions beyond the training length only.

    Example:
        >>> beyond_key(4)
        'beyond_4x'
    """
    return f"beyond_{check_int('factor', factor)}x"


@dataclass(frozen=True)
class RunConfig(TrialConfig):
    """Settings shared by all runs of an experiment (the scheme, task and seed vary).

    The defaults are the protocol of chapter 6's grid (``experiments/results/alternatives.json``,
    ``"config"``): a budget of 12,000 steps with 100 steps of warm-up, scored every 200
    steps, stopped after 4 scores without a gain of 0.005; the grid chose ``lr`` per
    (task, scheme, variant) from 1e-3, 3e-3 and 1e-2.

    Attributes:
        train_len: sequence length during training (task tokens, without the BOS token).
        eval_factors: evaluation lengths as multiples of ``train_len`` (the first is 1).
        steps: optimiser steps (the budget; fewer with early stopping).
        batch_size: sequences per step.
        lr: Adam learning rate after warm-up.
        warmup: steps of linear learning-rate warm-up (0: none).
        vocab_size: token ids of the task; chance accuracy is ``1 / vocab_size``.
        d_model, n_heads, n_layers: model size.
        offset: look-back of the relative tasks (``None``: the task's default).
        index: position read by the absolute tasks (``None``: the task's default).
        bos: prepend a beginning-of-sequence token to every sequence.
        eval_size: held-out sequences per evaluation length.
        eval_every: score the model every this many steps and stop early (0: never).
        patience: stop after this many evaluations without an in-distribution gain of
            more than ``min_delta`` over the best so far.
        min_delta: the smallest gain that counts as an improvement.
        dtype: ``"float32"`` or ``"float64"`` (the latter makes short runs reproducible
            to many digits across CPUs).
        extra: further keyword arguments of :class:`PositionalTransformer`.
    """

    train_len: int = 16
    eval_factors: tuple[int, ...] = (1, 2, 4)
    steps: int = 12000
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 100
    vocab_size: int = 16
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    offset: int | None = None
    index: int | None = None
    bos: bool = False
    eval_size: int = 256
    eval_every: int = 200
    patience: int = 4
    min_delta: float = 0.005
    dtype: str = "float32"
    extra: dict = field(default_factory=dict)

    def validate(self) -> None:
        for name in ("train_len", "steps", "batch_size", "vocab_size", "d_model", "n_heads", "n_layers", "eval_size"):
            check_int(name, getattr(self, name))
        for name in ("warmup", "eval_every", "patience"):
            check_int(name, getattr(self, name), minimum=0)
        if not isinstance(self.eval_factors, tuple) or not self.eval_factors or self.eval_factors[0] != 1:
            raise ValueError(f"eval_factors must be a tuple starting with 1, got {self.eval_factors!r}")
        for f in self.eval_factors:
            check_int("eval_factors", f)
        for name in ("lr", "min_delta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number, got {type(value).__name__}")
            if not math.isfinite(value) or value < 0 or (name == "lr" and value == 0):
                raise ValueError(f"{name} must be a finite number {'> 0' if name == 'lr' else '>= 0'}, got {value}")
        if not isinstance(self.bos, bool):
            raise TypeError(f"bos must be a bool, got {type(self.bos).__name__}")
        check_choice("dtype", self.dtype, ("float32", "float64"))
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads must divide d_model={self.d_model}, got n_heads={self.n_heads}")

    def model(self, scheme: str) -> PositionalTransformer:
        """A fresh model with these settings.

        Learned embeddings get ``max_len = train_len`` (+1 for the BOS token); with a BOS
        token the vocabulary has one more id.
        """
        model = PositionalTransformer(
            self.vocab_size + int(self.bos),
            scheme=scheme,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            max_len=self.train_len + int(self.bos),
            **self.extra,
        )
        # parameters only: the cached tables (RoPE's complex one among them) keep their
        # dtype and are cast where they are used
        for param in model.parameters():
            param.data = param.data.to(self.torch_dtype)
        return model


def _batch(task: str, batch_size: int, length: int, config: RunConfig, generator: torch.Generator):
    return make_task_batch(
        task,
        batch_size,
        length,
        vocab_size=config.vocab_size,
        offset=config.offset,
        index=config.index,
        bos=config.bos,
        generator=generator,
    )


def _logits(model: nn.Module, inputs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    if getattr(model, "scheme", None) == "randomized":
        positions = random_positions(inputs.shape[0], inputs.shape[1], model.randomized_max_len, generator=generator)
        return model(inputs, positions)
    return model(inputs)


def _masked_loss(model: nn.Module, batch, generator: torch.Generator) -> torch.Tensor:
    logits = _logits(model, batch.inputs, generator)
    return nn.functional.cross_entropy(logits[batch.mask], batch.targets[batch.mask])


def _check_model(model: object) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")


def _check_config(config: object) -> RunConfig:
    if not isinstance(config, RunConfig):
        raise TypeError(f"config must be a RunConfig, got {type(config).__name__}")
    return config


def train_model(
    model: nn.Module,
    task: str,
    config: RunConfig,
    *,
    seed: int,
    callback: Callable[[int, nn.Module], bool | None] | None = None,
) -> list[float]:
    """Train ``model`` in place on ``task`` with Adam; returns the loss of every step.

    Args:
        model: a :class:`~posenc.book.models.PositionalTransformer` (or any module mapping
            ``(batch, seq)`` tokens to logits), in ``config.dtype``.
        task: one of :data:`~posenc.book.tasks.TASKS`.
        config: lengths, steps, batch size, learning rate and warm-up, task settings.
        seed: seeds the training batches (the caller seeds the initial weights).
        callback: called as ``callback(step, model)`` after every step (``step`` counts
            from 1); training stops when it returns ``True``. It must not consume the
            global random state if runs are to repeat.

    Raises:
        ValueError: if the loss becomes NaN or infinite (the message names the step).

    Example:
        >>> cfg = RunConfig(steps=2, batch_size=4)
        >>> _ = torch.manual_seed(0)
        >>> losses = train_model(cfg.model("alibi"), "offset_copy", cfg, seed=0)
        >>> len(losses)
        2
    """
    _check_model(model)
    task = check_choice("task", task, TASKS)
    config = _check_config(config)
    seed = check_int("seed", seed, minimum=0)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
    return _fit(model, task, config, seed, callback=callback).train_loss


def _fit(model: nn.Module, task: str, config: RunConfig, seed: int, **hooks) -> FitResult:
    """Chapter 6's batches (from a generator seeded by ``seed``), loss and warm-up under :func:`~posenc.book.engine.fit`."""
    generator = torch.Generator().manual_seed(seed)

    def batches() -> Iterator:
        while True:
            yield _batch(task, config.batch_size, config.train_len, config, generator)

    warmup = config.warmup
    return fit(
        model,
        batches(),
        lambda m, batch: _masked_loss(m, batch, generator),
        optimiser=torch.optim.Adam(model.parameters(), lr=config.lr),
        steps=config.steps,
        schedule=(lambda step: config.lr * min(1.0, step / warmup)) if warmup else None,
        **hooks,
    )


def first_losses(config: dict, seed: int, n: int = 20, *, scheme: str, task: str, **unit) -> list[float]:
    """The first ``n`` training losses of one trial of chapter 6's grid, exactly as it trained them.

    Args:
        config: the grid's ``"config"`` (a :meth:`~posenc.book.engine.TrialConfig.to_dict`, as in
            ``alternatives.json``); the unit's own settings override it.
        seed: the trial's seed.
        n: how many losses.
        scheme, task: the unit keys of a row; also ``variant`` (``"plain"`` or ``"bos"``)
            and ``lr``; any other key of :class:`RunConfig` overrides ``config``. Keys
            that do not change training (``role``) are ignored.

    Example:
        >>> cfg = RunConfig(batch_size=4).to_dict()
        >>> len(first_losses(cfg, 0, 3, scheme="rope", task="offset_copy", variant="bos", lr=0.01))
        3
    """
    settings = dict(config)
    variant = unit.pop("variant", None)
    if variant is not None:
        settings["bos"] = check_choice("variant", variant, ("plain", "bos")) == "bos"
    unit.pop("role", None)
    settings.update(unit)
    run = RunConfig.from_dict(settings)
    n = check_int("n", n)
    with seeded(seed):
        model = run.model(check_choice("scheme", scheme, SCHEMES))
    return _fit(model, check_choice("task", task, TASKS), run, seed, stop_after=n).train_loss


def train_pack(
    scheme: str,
    task: str,
    seeds: Sequence[int],
    lrs: Sequence[float],
    config: RunConfig | None = None,
    *,
    evaluate: Callable[[int, nn.Module], float] | None = None,
) -> tuple[list[PositionalTransformer], list[FitResult]]:
    """Train one trial per ``(seed, lr)`` of ``scheme`` on ``task`` as one batched model (:func:`~posenc.book.engine.fit_batched`).

    Trial ``i`` starts from ``config.model(scheme)`` built under ``seeded(seeds[i])`` and
    draws the batches (and a randomized model's positions) that :func:`train_model` draws
    for that seed; its loss is the mean cross-entropy over the scored positions, Adam at
    ``lrs[i]`` with ``config.warmup`` steps of warm-up, for the whole budget
    ``config.steps``. Every ``config.eval_every`` steps (and after the last) each trial is
    evaluated, and each model ends at its best evaluation. A trial's losses are the same
    in a pack of any size.

    Args:
        scheme, task: as for :func:`run_trial`.
        seeds, lrs: one entry per trial.
        config: shared settings (defaults to ``RunConfig()``).
        evaluate: ``evaluate(i, model)``, lower is better; by default the held-out loss
            of trial ``i`` on its ``config.eval_size`` evaluation sequences at
            ``train_len`` (those of :func:`evaluate_accuracy` for its seed).

    Returns:
        ``(models, results)``, one :class:`~posenc.book.engine.FitResult` per trial.

    Example:
        >>> cfg = RunConfig(steps=3, batch_size=4, eval_size=4, eval_every=2)
        >>> models, results = train_pack("rope", "offset_copy", [0, 1], [1e-3, 1e-2], cfg)
        >>> [len(r.train_loss) for r in results], [s for s, _ in results[0].history]
        ([3, 3], [2, 3])
    """
    scheme = check_choice("scheme", scheme, SCHEMES)
    task = check_choice("task", task, TASKS)
    config = RunConfig() if config is None else _check_config(config)
    seeds = [check_int("seeds", s, minimum=0) for s in seeds]
    if not seeds or len(lrs) != len(seeds):
        raise ValueError(f"lrs must have one entry per seed ({len(seeds)}), got {len(lrs)}")
    models = []
    for seed in seeds:
        with seeded(seed):
            models.append(config.model(scheme))
    randomized = scheme == "randomized"
    max_len = models[0].randomized_max_len

    def batches(seed: int) -> Iterator:
        generator = torch.Generator().manual_seed(seed)
        while True:
            batch = _batch(task, config.batch_size, config.train_len, config, generator)
            parts = (batch.inputs, batch.targets, batch.mask)
            if randomized:
                parts += (random_positions(batch.inputs.shape[0], batch.inputs.shape[1], max_len, generator=generator),)
            yield parts

    def loss(forward, inputs, targets, mask, *positions) -> torch.Tensor:
        logits = forward(inputs, *positions)
        per_token = nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        return (per_token * mask).sum() / mask.sum()

    def heldout(i: int, model: nn.Module) -> float:
        generator = torch.Generator().manual_seed(1_000_003 * (seeds[i] + 1) + config.train_len)
        batch = _batch(task, config.eval_size, config.train_len, config, generator)
        with torch.no_grad():
            return _masked_loss(model, batch, generator).item()

    warmup = config.warmup
    results = fit_batched(
        models,
        [batches(seed) for seed in seeds],
        loss,
        lrs=lrs,
        steps=config.steps,
        schedule=(lambda step: min(1.0, step / warmup)) if warmup else None,
        evaluate=heldout if evaluate is None else evaluate,
        every=config.eval_every,
    )
    return models, results


@torch.no_grad()
def evaluate_accuracy(
    model: nn.Module,
    task: str,
    length: int,
    config: RunConfig,
    *,
    seed: int,
    per_position: bool = False,
    start: int = 0,
) -> float | list[float]:
    """Token accuracy of ``model`` on held-out sequences of ``length``, over scored positions.

    Args:
        model: the trained model.
        task: one of :data:`~posenc.book.tasks.TASKS`.
        length: number of task tokens (the BOS token of ``config.bos`` comes on top).
        config: task settings and ``eval_size``.
        seed: selects the held-out sequences.
        per_position: return a list of ``length`` accuracies, one per task position
            (``nan`` at positions that are not scored, and everywhere when the model
            cannot run at this length).
        start: score only the task positions ``>= start`` (``start=config.train_len``:
            the positions beyond the training length).

    The evaluation sequences depend only on ``seed`` and ``length`` (they are drawn from a
    generator seeded with ``1_000_003 * (seed + 1) + length``, disjoint in practice from
    the training stream), never on the scheme. A learned-embedding model cannot process
    sequences longer than its ``max_len``; for those the result is ``nan``.

    Returns:
        Accuracy in ``[0, 1]``, or ``nan`` when the model cannot run at this length.

    Example:
        >>> cfg = RunConfig(eval_size=4)
        >>> with seeded(0):
        ...     model = cfg.model("alibi")
        >>> 0.0 <= evaluate_accuracy(model, "offset_copy", 32, cfg, seed=0, start=16) <= 1.0
        True
    """
    _check_model(model)
    task = check_choice("task", task, TASKS)
    config = _check_config(config)
    length = check_int("length", length)
    seed = check_int("seed", seed, minimum=0)
    start = check_int("start", start, minimum=0)
    if start >= length:
        raise ValueError(f"start must be < length={length}, got {start}")
    bos = int(config.bos)
    if getattr(model, "scheme", None) == "learned" and length + bos > model.max_len:
        return [math.nan] * length if per_position else math.nan
    correct, mask = _correct(model, task, length, config, seed)
    mask[:, :start] = False
    if per_position:
        return correct.mean(dim=0).masked_fill(~mask[0], math.nan).tolist()
    return correct[mask].mean().item()


def _correct(model: nn.Module, task: str, length: int, config: RunConfig, seed: int):
    """Correct predictions and scored positions ``(eval_size, length)`` on the held-out sequences, BOS dropped."""
    bos = int(config.bos)
    generator = torch.Generator().manual_seed(1_000_003 * (seed + 1) + length)
    batch = _batch(task, config.eval_size, length, config, generator)
    model.eval()
    with torch.no_grad():
        correct = (_logits(model, batch.inputs, generator).argmax(dim=-1) == batch.targets).double()[:, bos:]
    return correct, batch.mask[:, bos:].clone()


def _score(model: nn.Module, task: str, config: RunConfig, seed: int) -> dict[str, float]:
    """``acc_<f>x`` and ``beyond_<f>x`` for every evaluation factor, one forward pass per length."""
    scores = {}
    for f in config.eval_factors:
        length = f * config.train_len
        if getattr(model, "scheme", None) == "learned" and length + int(config.bos) > model.max_len:
            scores[acc_key(f)] = math.nan
            if f > 1:
                scores[beyond_key(f)] = math.nan
            continue
        correct, mask = _correct(model, task, length, config, seed)
        scores[acc_key(f)] = correct[mask].mean().item()
        if f > 1:
            mask[:, : config.train_len] = False
            scores[beyond_key(f)] = correct[mask].mean().item()
    return scores


def run_trial(
    scheme: str,
    task: str,
    seed: int,
    config: RunConfig | None = None,
    *,
    checkpoints: tuple[int, ...] = (),
    per_position: bool = False,
    keep_model: bool = False,
    extension: bool = False,
) -> dict:
    """Train one model from scratch and score it at every evaluation length.

    Args:
        scheme: one of :data:`~posenc.book.models.SCHEMES`.
        task: one of :data:`~posenc.book.tasks.TASKS`.
        seed: seeds the initial weights, the training batches and the evaluation batches.
        config: shared settings (defaults to ``RunConfig()``). With ``eval_every > 0`` the
            model is scored every ``eval_every`` steps and training stops early by the
            patience rule of :class:`RunConfig`.
        checkpoints: further step counts at which to score the model.
        per_position: also return the accuracy at every position of every length.
        keep_model: also return the trained model under ``"model"``.
        extension: for ``scheme="rope"``, also return :func:`context_extension` at the
            largest evaluation factor under ``"extension"``.

    Returns:
        A dict with ``scheme``, ``task``, ``seed``, ``params`` (whole model),
        ``scheme_params`` (trainable parameters of the positional scheme), ``steps``
        (steps trained), ``stop`` (``"patience"`` or ``"budget"``), ``converged``
        (stopped by patience, or the last two evaluations within 0.01),
        ``final_loss`` (mean of the last 10 steps), ``seconds`` (training wall time,
        machine-dependent, evaluation excluded), ``acc_<f>x`` for every evaluation factor
        ``f`` and ``beyond_<f>x`` (positions beyond the training length only) for
        ``f > 1``; ``"checkpoints"`` maps every scored step to its scores; with
        ``per_position``, ``pos_<f>x`` lists.

    Example:
        >>> r = run_trial("rope", "offset_copy", 0, RunConfig(steps=2, batch_size=4, eval_size=4))
        >>> sorted(r)[:4]
        ['acc_1x', 'acc_2x', 'acc_4x', 'beyond_2x']
    """
    scheme = check_choice("scheme", scheme, SCHEMES)
    task = check_choice("task", task, TASKS)
    config = RunConfig() if config is None else _check_config(config)
    seed = check_int("seed", seed, minimum=0)
    first = first_scored(task, offset=config.offset, index=config.index)
    if config.train_len <= first:
        raise ValueError(f"train_len must exceed the task's first scored position {first}, got {config.train_len}")
    wanted = {check_int("checkpoints", c) for c in checkpoints}
    if wanted and max(wanted) > config.steps:
        raise ValueError(f"checkpoints must be steps within the budget config.steps={config.steps}, got {sorted(wanted)}")
    scores: dict[int, dict] = {}
    periodic: list[dict] = []
    eval_seconds = 0.0

    def evaluate(model: nn.Module) -> float:
        periodic.append(_score(model, task, config, seed))
        return periodic[-1][acc_key(1)]

    def callback(step: int, model: nn.Module) -> None:
        nonlocal eval_seconds
        if step in wanted and not (config.eval_every and step % config.eval_every == 0):
            t = time.perf_counter()
            scores[step] = _score(model, task, config, seed)
            eval_seconds += time.perf_counter() - t

    with seeded(seed):
        model = config.model(scheme)
    out = _fit(
        model, task, config, seed,
        evaluate=evaluate if config.eval_every else None, every=config.eval_every, at_end=False,
        mode="max", min_delta=config.min_delta, patience=config.patience, callback=callback,
    )
    scores.update({step: s for (step, _), s in zip(out.history, periodic)})
    seconds = out.seconds - out.eval_seconds - eval_seconds
    losses = out.train_loss
    steps = len(losses)
    if steps not in scores:
        scores[steps] = _score(model, task, config, seed)
    scores = dict(sorted(scores.items()))
    last = list(scores.values())[-2:]
    by_patience = out.stop == "patience"
    result = {
        "scheme": scheme,
        "task": task,
        "seed": seed,
        "params": count_parameters(model),
        "scheme_params": model.scheme_parameters(),
        "steps": steps,
        "stop": "patience" if by_patience else "budget",
        "converged": by_patience
        or (len(last) == 2 and abs(last[0][acc_key(1)] - last[1][acc_key(1)]) <= 0.01),
        "final_loss": sum(losses[-10:]) / len(losses[-10:]),
        "seconds": seconds,
        **scores[steps],
        "checkpoints": scores,
    }
    if per_position:
        for f in config.eval_factors:
            result[pos_key(f)] = evaluate_accuracy(
                model, task, f * config.train_len, config, seed=seed, per_position=True
            )
    if extension and scheme == "rope":
        result["extension"] = context_extension(model, task, config, seed=seed)
    if keep_model:
        result["model"] = model
    return result


@torch.no_grad()
def context_extension(
    model: PositionalTransformer, task: str, config: RunConfig, *, seed: int, factor: int | None = None
) -> dict[str, float]:
    """Accuracy beyond the training length of a trained RoPE model under each context extension.

    The model is not fine-tuned: its rotary module is swapped for one with the scaling
    (every other weight unchanged), the model is scored on the positions beyond
    ``config.train_len`` in sequences ``factor`` times as long, and the original module is
    put back. The scalings (see :class:`posenc.RotaryEmbedding`) use the trained length
    ``L = train_len`` (+1 with a BOS token) and ``s = factor``:

    * ``"none"``: plain RoPE;
    * ``"position_interpolation"``: every frequency divided by ``s`` (Chen et al. 2023);
    * ``"ntk"``: NTK-aware, the base multiplied by ``s**(d / (d - 2))``;
    * ``"dynamic_ntk"``: NTK-aware with ``s`` the ratio of the current length to ``L``
      (``transformers``' dynamic scaling with ``factor = 1``);
    * ``"yarn"``: YaRN (NTK-by-parts plus the attention temperature, Peng et al. 2024).

    Returns:
        ``{method: accuracy}`` for every method of :data:`CONTEXT_EXTENSIONS`.

    Example:
        >>> cfg = RunConfig(eval_size=4)
        >>> with seeded(0):
        ...     model = cfg.model("rope")
        >>> sorted(context_extension(model, "offset_copy", cfg, seed=0))[:2]
        ['dynamic_ntk', 'none']
    """
    from ..rotary import RotaryEmbedding

    if getattr(model, "scheme", None) != "rope":
        raise ValueError(f"model must be a PositionalTransformer with scheme='rope', got {getattr(model, 'scheme', model)!r}")
    config = _check_config(config)
    factor = max(config.eval_factors) if factor is None else check_int("factor", factor, minimum=2)
    original = model.positional
    out = {}
    try:
        for method in CONTEXT_EXTENSIONS:
            scaling = rope_scaling.extension(method, factor, config.train_len + int(config.bos), base=original.base)
            model.positional = RotaryEmbedding(original.head_dim, layout=original.layout, scaling=scaling)
            out[method] = evaluate_accuracy(
                model, task, factor * config.train_len, config, seed=seed, start=config.train_len
            )
    finally:
        model.positional = original
    return out


def final_rows(saved: dict, *, role: str = "main") -> list[dict]:
    """The last row of every trial of a saved grid (``final: true``) with the given ``role``.

    Example:
        >>> final_rows({"rows": [{"role": "main", "steps": 1}, {"role": "main", "steps": 2, "final": True}]})
        [{'role': 'main', 'steps': 2, 'final': True}]
    """
    if not isinstance(saved, dict) or not isinstance(saved.get("rows"), list):
        raise TypeError("saved must be a results dict with a list 'rows'")
    roles = {r.get("role") for r in check_rows("saved['rows']", saved["rows"], nonempty=False)}
    if saved["rows"] and role not in roles:
        raise ValueError(f"role={role!r} is not the role of any row; the rows have roles {sorted(map(str, roles))}")
    return [r for r in saved["rows"] if r.get("final") and r.get("role") == role]


def accuracy_at_step(saved: dict, group: tuple[str, str, str], step: int, *, key: str = "acc_1x") -> float:
    """The mean over a group's main seeds of ``key`` at training step ``step``.

    Each seed contributes its checkpoint at ``step``, or its last one before it (a seed
    that stopped earlier keeps its final score): what the group had reached had the
    budget been ``step``. ``group`` is ``(task, scheme, variant)``; nan if no seed has
    a checkpoint at or before ``step``.

    Example:
        >>> rows = [{"role": "main", "task": "t", "scheme": "s", "variant": "v", "seed": k,
        ...          "steps": n, "acc_1x": a} for k, n, a in [(0, 200, 0.5), (0, 400, 0.7), (1, 200, 0.9)]]
        >>> accuracy_at_step({"rows": rows}, ("t", "s", "v"), 400)
        0.8
    """
    if not isinstance(saved, dict) or not isinstance(saved.get("rows"), list):
        raise TypeError("saved must be a results dict with a list 'rows'")
    if not (isinstance(group, tuple) and len(group) == 3 and all(isinstance(g, str) for g in group)):
        raise TypeError(f"group must be a (task, scheme, variant) tuple of str, got {group!r}")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be a non-negative int, got {step!r}")
    members = [r for r in check_rows("saved['rows']", saved["rows"], ("steps",))
               if r.get("role") == "main" and (r.get("task"), r.get("scheme"), r.get("variant")) == group]
    if not members:
        raise ValueError(f"group={group!r} has no main rows in saved")
    if not any(key in r for r in members):
        raise ValueError(f"key={key!r} is in none of the rows of group {group!r}")
    reached: dict[int, float] = {}
    for r in sorted(saved["rows"], key=lambda r: r["steps"]):
        if r.get("role") == "main" and (r["task"], r["scheme"], r["variant"]) == group and r["steps"] <= step:
            reached[r["seed"]] = r[key]
    return summarize(list(reached.values()))[0]


def grid_summary(
    rows: list[dict], *, keys: tuple[str, ...] = ("acc_1x", "beyond_2x", "beyond_4x"), solved: float = 0.95
) -> dict[tuple[str, str, str], dict]:
    """Per ``(task, scheme, variant)``: mean, std, n of every key, and the protocol's bookkeeping.

    Args:
        rows: final rows of trials (see :func:`final_rows`).
        keys: the metrics to summarise with :func:`~posenc.book.results.summarize`.
        solved: a seed counts as fitting the task when its ``acc_1x`` reaches this.

    Returns:
        A dict keyed by ``(task, scheme, variant)``; each value is a dict holding
        ``(mean, std, n)`` under every key of ``keys``, and the bookkeeping ``"seeds"``
        (count), ``"solved"`` (seeds that fit), ``"converged"`` (seeds that stopped by
        the patience rule), ``"steps"`` (mean steps) and ``"lr"`` (the learning rate).

    Example:
        >>> rows = [{"task": "t", "scheme": "s", "variant": "bos", "acc_1x": a, "steps": 400,
        ...          "converged": True, "lr": 0.01} for a in (1.0, 0.5)]
        >>> g = grid_summary(rows, keys=("acc_1x",))[("t", "s", "bos")]
        >>> g["acc_1x"][0], g["solved"], g["converged"]
        (0.75, 1, 2)
    """
    rows = check_rows("rows", rows, ("task", "scheme", "variant", "steps"))
    keys = check_names("keys", keys)
    missing = [k for k in keys if not any(k in r for r in rows)]
    if missing:
        raise ValueError(f"keys: {missing[0]!r} is in none of the rows")
    solved = check_real("solved", solved, low=0.0, high=1.0)
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["task"], r["scheme"], r["variant"]), []).append(r)
    out = {}
    for group, members in groups.items():
        entry: dict = {k: summarize([m.get(k) for m in members]) for k in keys}
        entry["seeds"] = len(members)
        entry["solved"] = sum(1 for m in members if (m.get("acc_1x") or 0.0) >= solved)
        entry["converged"] = sum(1 for m in members if m.get("converged"))
        entry["steps"] = sum(m["steps"] for m in members) / len(members)
        entry["lr"] = members[0].get("lr")
        out[group] = entry
    return out


def verdict(acc_1x: float, beyond_4x: float | None) -> str:
    """A short verdict on one (task, scheme, variant) from its mean accuracies.

    In distribution: ``fits`` (``acc_1x >= 0.95``), ``partly`` (``>= 0.5``) or ``fails``.
    Beyond the training length at 4x: ``holds`` (``>= 0.9``), ``degrades`` (``>= 0.3``),
    ``chance`` (below 0.3; chance is 1/16 here) or ``cannot run`` (``None`` or ``nan``).

    Example:
        >>> verdict(1.0, 0.07), verdict(0.9, 0.95), verdict(1.0, None)
        ('fits, chance', 'partly, holds', 'fits, cannot run')
    """
    for name, value in (("acc_1x", acc_1x), ("beyond_4x", beyond_4x)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise TypeError(f"{name} must be a number or None, got {type(value).__name__}")
    if acc_1x is None or math.isnan(acc_1x):
        raise ValueError("acc_1x must be a number, got nan/None")
    for name, value in (("acc_1x", acc_1x), ("beyond_4x", beyond_4x)):
        if value is not None and not math.isnan(value) and not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be an accuracy in [0, 1], got {value}")
    fit = "fits" if acc_1x >= 0.95 else "partly" if acc_1x >= 0.5 else "fails"
    if beyond_4x is None or math.isnan(beyond_4x):
        return f"{fit}, cannot run"
    far = "holds" if beyond_4x >= 0.9 else "degrades" if beyond_4x >= 0.3 else "chance"
    return f"{fit}, {far}"
