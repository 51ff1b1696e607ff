"""The laboratory's engine: one seeding policy, one base trial config and one training loop.

Every chapter that trains a model (5, 6, 7 and 8) calls :func:`fit` and keeps only what
is its own: the batches, the loss and the held-out metric. The loop is the one place
where the order of the operations of a step is written down, and that order is what
makes a saved result reproducible:

1. ``model.train()``; the learning rate of every parameter group set from ``schedule``;
2. the next batch drawn from ``batches``;
3. the loss computed (``loss(model, batch)``) and checked to be finite;
4. ``zero_grad``, ``backward``, optional gradient-norm clipping, ``optimiser.step()``;
5. every ``every`` steps (and after the last one with ``at_end``): the held-out value
   ``evaluate(model)`` in eval mode, the best one kept (with ``keep_best``, its weights
   too) and the patience counted.

Whatever draws random numbers (batches, random positions) draws them from the chapter's
own generators in that order; the global generator is touched only by :func:`seeded`
around the model's construction. Several trials of the same shapes train as one batched
model with :func:`fit_batched`.

Example:
    >>> model = torch.nn.Linear(2, 1)
    >>> batches = iter(lambda: (torch.ones(4, 2), torch.zeros(4, 1)), None)
    >>> out = fit(model, batches, lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(),
    ...           optimiser=torch.optim.SGD(model.parameters(), lr=0.1), steps=3)
    >>> len(out.train_loss), out.stop
    (3, 'budget')
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from .._checks import check_choice, check_int

__all__ = ["FitResult", "TrialConfig", "fit", "fit_batched", "seeded"]


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
class TrialConfig:
    """Base of the chapters' trial configurations (``RunConfig``, ``TextConfig``, ``VisionConfig``, ...).

    A subclass is a frozen dataclass of one experiment's settings. Its defaults are the
    protocol of that experiment's main runs (``RunConfig``, ``GridConfig``) or a base
    (``TextConfig``, ``VisionConfig``), and the experiment scripts override fields where
    a run differs: ``RunConfig``'s ``lr`` and ``bos`` per group
    (``experiments/alternatives_extrapolation.py``); the step cap of chapter 7's tuning
    runs and the repeats of its copy probe's positive control (``GridConfig``);
    ``TextConfig`` in ``experiments/learned_table.py`` and chapter 7's fine-tunes;
    ``VisionConfig`` through ``CanvasConfig``. Each subclass's docstring says what its
    defaults are. What ran is the config a results file stores (:meth:`to_dict`) or,
    where a script does not store it, the script's own settings.
    It checks its fields in :meth:`validate`, called once on construction.

    Example:
        >>> @dataclass(frozen=True)
        ... class Demo(TrialConfig):
        ...     sizes: tuple = (1, 2)
        >>> Demo.from_dict(Demo().to_dict()) == Demo()
        True
    """

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check the fields (a subclass raises ``ValueError``/``TypeError`` naming the field)."""

    @property
    def torch_dtype(self) -> torch.dtype:
        """``torch.float64`` for ``dtype="float64"``, else ``torch.float32`` (also without a ``dtype`` field)."""
        return torch.float64 if getattr(self, "dtype", "float32") == "float64" else torch.float32

    def to_dict(self) -> dict:
        """The settings as a JSON-ready dict (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, settings: dict):
        """The config stored by :meth:`to_dict` (lists become tuples where the default is a tuple).

        Raises:
            ValueError: if ``settings`` names a field the config does not have.
        """
        if not isinstance(settings, dict):
            raise TypeError(f"settings must be a dict, got {type(settings).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(settings) - set(fields))
        if unknown:
            raise ValueError(f"settings: {cls.__name__} has no field {unknown[0]!r}")
        kw = {
            k: tuple(v) if isinstance(v, list) and isinstance(fields[k].default, tuple) else v
            for k, v in settings.items()
        }
        return cls(**kw)


@dataclass
class FitResult:
    """What :func:`fit` returns.

    Attributes:
        train_loss: the training loss of every step run, as Python floats.
        history: ``(step, value)`` of every held-out evaluation.
        best_step: the step of the best held-out value (0: none evaluated).
        best_value: that value (``inf``/``-inf`` when none).
        steps_run: steps trained.
        stop: ``"budget"``, ``"patience"``, ``"callback"`` or ``"stop_after"``.
        seconds: wall time of the loop; eval_seconds: the part spent in ``evaluate``.
    """

    train_loss: list[float] = field(default_factory=list)
    history: list[tuple[int, float]] = field(default_factory=list)
    best_step: int = 0
    best_value: float = math.nan
    steps_run: int = 0
    stop: str = "budget"
    seconds: float = 0.0
    eval_seconds: float = 0.0


def fit(
    model: nn.Module,
    batches: Iterable,
    loss: Callable[[nn.Module, object], torch.Tensor],
    *,
    optimiser: torch.optim.Optimizer,
    steps: int,
    schedule: Callable[[int], float] | None = None,
    clip: float | None = None,
    evaluate: Callable[[nn.Module], float] | None = None,
    every: int = 0,
    at_end: bool = True,
    mode: str = "min",
    min_delta: float = 0.0,
    patience: int | None = None,
    keep_best: bool = False,
    callback: Callable[[int, nn.Module], bool | None] | None = None,
    log: Callable[[int, float, float], None] | None = None,
    stop_after: int | None = None,
) -> FitResult:
    """Train ``model`` in place for at most ``steps`` steps; the book's one training loop.

    Args:
        model: the module to train.
        batches: an iterable of batches; one is drawn per step (a generator draws its
            random numbers when the step asks for the batch).
        loss: ``loss(model, batch)``, a scalar tensor.
        optimiser: the optimiser over ``model``'s parameters.
        steps: the step budget (a schedule sees it through its own closure).
        schedule: ``schedule(step)``, the learning rate of step ``step`` (from 1), set on
            every parameter group before the step; ``None``: the optimiser's own.
        clip: clip the gradient norm to this (``None`` or 0: no clipping).
        evaluate: ``evaluate(model)``, the held-out value, called in eval mode every
            ``every`` steps and, with ``at_end``, after the last step of the budget.
        mode: ``"min"`` (a loss) or ``"max"`` (an accuracy): which held-out value is better.
        min_delta: an evaluation improves on the best only by more than this.
        patience: stop after this many evaluations in a row without improvement.
        keep_best: load back the weights of the best evaluation at the end.
        callback: ``callback(step, model)`` after every step (and evaluation); training
            stops when it returns ``True``.
        log: ``log(step, train_loss, held_out)`` after every evaluation.
        stop_after: stop after this many steps (the schedule still sees ``steps``): the
            first losses of a run exactly as the whole run trains them.

    Raises:
        ValueError: if the loss becomes NaN or infinite (the message names the step).

    Returns:
        A :class:`FitResult`.
    """
    steps = check_int("steps", steps)
    mode = check_choice("mode", mode, ("min", "max"))
    every = check_int("every", every, minimum=0)
    if patience is not None:
        patience = check_int("patience", patience)
    if stop_after is not None:
        stop_after = check_int("stop_after", stop_after)
    it = iter(batches)
    out = FitResult(best_value=math.inf if mode == "min" else -math.inf)
    best_state = None
    since_best = 0
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        if stop_after is not None and step > stop_after:
            out.stop = "stop_after"
            break
        model.train()
        if schedule is not None:
            lr = schedule(step)
            for group in optimiser.param_groups:
                group["lr"] = lr
        value = loss(model, next(it))
        if not torch.isfinite(value):
            raise ValueError(f"the training loss became {value.item()} at step {step}; lower lr")
        optimiser.zero_grad(set_to_none=True)
        value.backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimiser.step()
        out.train_loss.append(value.item())
        out.steps_run = step
        if evaluate is not None and every and (step % every == 0 or (at_end and step == steps)):
            t = time.perf_counter()
            model.eval()
            held_out = float(evaluate(model))
            out.eval_seconds += time.perf_counter() - t
            out.history.append((step, held_out))
            if log is not None:
                log(step, out.train_loss[-1], held_out)
            if held_out < out.best_value - min_delta if mode == "min" else held_out > out.best_value + min_delta:
                out.best_value, out.best_step, since_best = held_out, step, 0
                if keep_best:
                    best_state = copy.deepcopy(model.state_dict())
            else:
                since_best += 1
                if patience is not None and since_best >= patience:
                    out.stop = "patience"
                    break
        if callback is not None and callback(step, model):
            out.stop = "callback"
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    out.seconds = time.perf_counter() - t0
    return out


def fit_batched(
    models: Sequence[nn.Module],
    batches: Sequence[Iterable],
    loss: Callable[..., torch.Tensor],
    *,
    lrs: Sequence[float],
    steps: int,
    schedule: Callable[[int], float] | None = None,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    evaluate: Callable[[int, nn.Module], float] | None = None,
    every: int = 0,
    mode: str = "min",
) -> list[FitResult]:
    """Train several trials of the same shapes as one batched model: a fixed budget, the best checkpoint per trial.

    The trials' weights are stacked (``torch.func.stack_module_state``) and one step of
    every trial is one call of ``vmap(grad_and_value(loss))``; each trial has its own
    batches, its own learning rate and its own Adam state (Adam written out below, with
    torch's formula). Every operation acts on each trial's slice alone, so a trial's
    numbers do not depend on the pack it runs in (a pack of 1 or of 12 gives the same
    losses, bit for bit); they differ from :func:`fit` with ``torch.optim.Adam`` in the
    last digits.

    There is no early stop: every trial runs ``steps`` steps, is evaluated (one model at
    a time, which is cheaper than batched evaluation) every ``every`` steps and after the
    last, and ends with the weights of its best evaluation (any patience rule can be
    applied afterwards to the returned histories).

    Args:
        models: the trials' initial models (same class and shapes; built by the caller,
            e.g. under :func:`seeded`); each ends holding its trial's best weights.
        batches: one iterable per trial; a batch is a tuple of tensors of the same
            shapes in every trial (draw random positions here, not in ``loss``).
        loss: ``loss(forward, *batch)``, a scalar; ``forward(*inputs)`` runs the trial's
            model. It runs under ``vmap``: no Python decisions on tensor values.
        lrs: one learning rate per trial.
        steps: the budget.
        schedule: ``schedule(step)``, a factor on every trial's learning rate (warm-up).
        betas, eps: Adam's.
        evaluate: ``evaluate(i, model)``, the held-out value of trial ``i`` (its model in
            eval mode); ``mode="min"``: lower is better.
        every: steps between evaluations (0: only after the last step).

    Returns:
        One :class:`FitResult` per trial.

    Example:
        >>> models = [torch.nn.Linear(3, 1) for _ in range(2)]
        >>> data = iter(lambda: (torch.ones(4, 3), torch.zeros(4, 1)), None)
        >>> out = fit_batched(models, [data, data], lambda f, x, y: ((f(x) - y) ** 2).mean(),
        ...                   lrs=[0.1, 0.01], steps=3, evaluate=lambda i, m: 0.0)
        >>> [len(r.train_loss) for r in out]
        [3, 3]
    """
    from torch.func import functional_call, grad_and_value, stack_module_state, vmap

    models = list(models)
    if not models or not all(isinstance(m, nn.Module) for m in models):
        raise TypeError("models must be a non-empty sequence of torch.nn.Module")
    if len(batches) != len(models) or len(lrs) != len(models):
        raise ValueError(f"batches and lrs must have one entry per model ({len(models)}), got {len(batches)} and {len(lrs)}")
    steps = check_int("steps", steps)
    every = check_int("every", every, minimum=0)
    mode = check_choice("mode", mode, ("min", "max"))
    for lr in lrs:
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
            raise ValueError(f"lrs must be finite numbers > 0, got {lr!r}")
    params, buffers = stack_module_state(models)
    params = {k: v.detach() for k, v in params.items()}
    base = copy.deepcopy(models[0]).to("meta")
    first = next(iter(params.values()))
    lr = torch.tensor([float(x) for x in lrs], dtype=first.dtype, device=first.device)
    exp_avg = {k: torch.zeros_like(v) for k, v in params.items()}
    exp_avg_sq = {k: torch.zeros_like(v) for k, v in params.items()}
    beta1, beta2 = betas

    def trial_loss(p, b, *batch):
        return loss(lambda *inputs: functional_call(base, (p, b), inputs), *batch)

    step_fn = vmap(grad_and_value(trial_loss))
    its = [iter(b) for b in batches]
    results = [FitResult(best_value=math.inf if mode == "min" else -math.inf) for _ in models]
    best = [None] * len(models)
    t0 = time.perf_counter()

    stacked = {**buffers, **params}

    def load(i: int) -> None:  # trial i's weights into its model (persistent tensors only)
        models[i].load_state_dict({k: stacked[k][i] for k in models[i].state_dict()})

    def check_point(step: int) -> None:
        for i, (model, result) in enumerate(zip(models, results)):
            load(i)
            model.eval()
            t = time.perf_counter()
            value = float(evaluate(i, model))
            result.eval_seconds += time.perf_counter() - t
            result.history.append((step, value))
            if value < result.best_value if mode == "min" else value > result.best_value:
                result.best_value, result.best_step = value, step
                best[i] = copy.deepcopy(model.state_dict())

    base.train()
    for step in range(1, steps + 1):
        drawn = [next(it) for it in its]
        batch = [torch.stack(parts).to(first.device) for parts in zip(*drawn)]
        grads, values = step_fn(params, buffers, *batch)
        if not torch.isfinite(values).all():
            bad = [i for i, v in enumerate(values.tolist()) if not math.isfinite(v)]
            raise ValueError(f"the training loss of trials {bad} became non-finite at step {step}; lower lr")
        factor = 1.0 if schedule is None else schedule(step)
        step_size = (lr * factor) / (1 - beta1**step)
        bias2 = math.sqrt(1 - beta2**step)
        with torch.no_grad():
            for k, p in params.items():
                g, m, v = grads[k], exp_avg[k], exp_avg_sq[k]
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                shape = (-1,) + (1,) * (p.ndim - 1)
                p.sub_(step_size.view(shape) * m / (v.sqrt() / bias2 + eps))
        for result, value in zip(results, values.tolist()):
            result.train_loss.append(value)
            result.steps_run = step
        if evaluate is not None and ((every and step % every == 0) or step == steps):
            check_point(step)
    for i, model in enumerate(models):
        if best[i] is not None:
            model.load_state_dict(best[i])
        else:
            load(i)
    seconds = time.perf_counter() - t0
    for result in results:
        result.seconds = seconds
    return results
