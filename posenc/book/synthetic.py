"""Chapter 6's fixed-budget grid: its protocol, one trial of it, and the statistics of its verdicts.

**Protocol** (:class:`GridProtocol`; its defaults are the protocol that runs). Every
(task, scheme, variant) group trains the chapter's model (2 layers, width 32, 4 heads)
for the same fixed budget of steps at each learning rate of ``lrs`` and each seed of
``seeds``. Nothing stops early. Every ``loss_every`` steps the loss on a held-out set
drawn like the training data is recorded, and the state with the lowest held-out loss is
kept; every ``score_every`` steps the model is scored at every evaluation length (a
trajectory of the accuracy beyond the training length against the step). At the end both
the final model and the best held-out-loss model are scored with per-position curves:
every stopping rule can then be read from one run. Training lengths follow
:func:`length_rule`: drawn from ``U(1, L)`` less the lengths that score nothing
(:func:`~posenc.book.tasks.draw_lengths`) for
the tasks whose answer depends on the length and for randomized positions (whose
spacing depends on it: positions are drawn per sequence for its own length), fixed at
``L`` otherwise (for a causal model on a task that reads only earlier tokens, drawn
lengths would only re-weight the loss by position).

**Statistics.** A seed *fits* when its in-distribution accuracy reaches :data:`FIT`; a
group's fit label is ``k/n`` with a Wilson interval. Extrapolation is judged only on the
seeds that fit, by their *retention* (accuracy beyond the training length divided by the
in-distribution accuracy) with a bootstrap interval
(:func:`~posenc.book.results.summarize`), against the task's own floor
(:func:`~posenc.book.tasks.chance_floor`): ``"holds"`` (retention >= :data:`HOLD`),
``"floor"`` (beyond-length accuracy within :data:`FLOOR_MARGIN` of the floor) or
``"degrades"``, and ``"uncertain"`` when an interval crosses a threshold. Verdicts are
given at 2x (as Kazemnejad et al. 2023 report) and 4x. A ranking says "best" only when a
permutation test separates the first from the second (:func:`best_or_indistinguishable`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .._checks import check_choice, check_int
from ._validate import check_real, check_rows
from .models import SCHEMES, PositionalTransformer
from .results import acc_key, pos_key, summarize
from .tasks import ALL_TASKS, VARIABLE_LENGTH_TASKS, chance_floor, draw_lengths, make_task_batch
from .engine import TrialConfig, fit_batched, seeded
from .training import RunConfig, beyond_key

__all__ = [
    "FIT",
    "FLOOR_MARGIN",
    "GRID_SCHEMES",
    "HOLD",
    "LENGTH_RULE",
    "VARIANTS",
    "GridProtocol",
    "best_or_indistinguishable",
    "extrapolation_label",
    "first_losses",
    "fit_label",
    "grid_batch",
    "grid_verdicts",
    "group_verdict",
    "heldout_loss",
    "horizon",
    "length_rule",
    "lr_band",
    "permutation_p",
    "run_grid_pack",
    "run_grid_trial",
    "score_model",
    "still_improving",
    "task_floors",
    "trial_rows",
    "unstable",
    "wilson_interval",
]

#: The schemes of the grid (the learned table is left out, since it cannot run past its length).
GRID_SCHEMES = tuple(s for s in SCHEMES if s != "learned")

#: Without (``"plain"``) and with (``"bos"``) a beginning-of-sequence token.
VARIANTS = ("plain", "bos")

#: The training-length rule of :func:`length_rule`, in words (stored beside the protocol in results files).
LENGTH_RULE = (
    f"lengths drawn per sequence from U(1, train_len) less the lengths that score nothing, i.e. "
    f"U(min_length(task), train_len), for the tasks {list(VARIABLE_LENGTH_TASKS)} and for scheme 'randomized' "
    "(whose positions are drawn per sequence for its own length); separator_copy draws its copied part "
    "n ~ U(1, (train_len - 1) // 2) (2 n + 1 tokens); every other group trains at train_len"
)

#: A seed fits the task when its in-distribution accuracy reaches this.
FIT = 0.95

#: A group holds beyond the training length when its mean retention reaches this.
HOLD = 0.9

#: A beyond-length accuracy within this of the task's floor is at the floor.
FLOOR_MARGIN = 0.05


@dataclass(frozen=True)
class GridProtocol(TrialConfig):
    """The settings of the fixed-budget grid (the defaults are the protocol that runs).

    Attributes:
        train_len: ``L``, task tokens per training sequence (the longest, with drawn lengths).
        eval_factors: evaluation lengths as multiples of ``L`` (the first is 1).
        steps: the fixed budget of optimiser steps of every trial.
        batch_size: sequences per step.
        warmup: steps of linear learning-rate warm-up, then constant.
        vocab_size: token ids of the tasks.
        d_model, n_heads, n_layers: the model.
        eval_size: held-out sequences per evaluation length.
        heldout_size: sequences of the held-out loss (drawn like the training data).
        loss_every: steps between held-out losses (the best checkpoint is chosen among them).
        score_every: steps between full scorings (the trajectory; a multiple of ``loss_every``).
        lrs: the learning rates of every group.
        seeds: the seeds of every learning rate.
    """

    train_len: int = 16
    eval_factors: tuple[int, ...] = (1, 2, 4)
    steps: int = 2000
    batch_size: int = 32
    warmup: int = 100
    vocab_size: int = 16
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    eval_size: int = 256
    heldout_size: int = 256
    loss_every: int = 50
    score_every: int = 250
    lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2)
    seeds: tuple[int, ...] = (0, 1, 2, 3)

    def validate(self) -> None:
        """Check every field (``ValueError``/``TypeError`` naming it)."""
        for name in ("train_len", "steps", "batch_size", "vocab_size", "d_model", "n_heads", "n_layers",
                     "eval_size", "heldout_size", "loss_every", "score_every"):
            check_int(name, getattr(self, name))
        check_int("warmup", self.warmup, minimum=0)
        if self.score_every % self.loss_every:
            raise ValueError(f"score_every must be a multiple of loss_every={self.loss_every}, got {self.score_every}")
        if not isinstance(self.eval_factors, tuple) or not self.eval_factors or self.eval_factors[0] != 1:
            raise ValueError(f"eval_factors must be a tuple starting with 1, got {self.eval_factors!r}")
        for f in self.eval_factors:
            check_int("eval_factors", f)
        if not isinstance(self.lrs, tuple) or not self.lrs:
            raise TypeError(f"lrs must be a non-empty tuple of numbers, got {self.lrs!r}")
        for lr in self.lrs:
            check_real("lrs", lr, low=0.0, low_open=True)
        if not isinstance(self.seeds, tuple) or not self.seeds:
            raise TypeError(f"seeds must be a non-empty tuple of ints, got {self.seeds!r}")
        for s in self.seeds:
            check_int("seeds", s, minimum=0)

    def run_config(self, variant: str, lr: float) -> RunConfig:
        """The :class:`~posenc.book.training.RunConfig` that builds this protocol's model."""
        variant = check_choice("variant", variant, VARIANTS)
        return RunConfig(
            train_len=self.train_len, eval_factors=self.eval_factors, steps=self.steps, batch_size=self.batch_size,
            lr=lr, warmup=self.warmup, vocab_size=self.vocab_size, d_model=self.d_model, n_heads=self.n_heads,
            n_layers=self.n_layers, bos=variant == "bos", eval_size=self.eval_size,
        )

def length_rule(task: str, scheme: str) -> str:
    """``"uniform"`` (training lengths drawn from ``U(1, L)``) or ``"fixed"`` (always ``L``).

    Example:
        >>> length_rule("separator_copy", "rope"), length_rule("offset_copy", "randomized"), length_rule("offset_copy", "rope")
        ('uniform', 'uniform', 'fixed')
    """
    task = check_choice("task", task, ALL_TASKS)
    scheme = check_choice("scheme", scheme, SCHEMES)
    return "uniform" if task in VARIABLE_LENGTH_TASKS or scheme == "randomized" else "fixed"


def _positions(rows: torch.Tensor, seq: int, max_len: int, generator: torch.Generator) -> torch.Tensor:
    """Per row, ``rows[i]`` sorted distinct positions of ``[0, max_len)`` then ``max_len - 1`` (never scored)."""
    keys = torch.rand(rows.shape[0], max_len, generator=generator)
    chosen = keys.argsort(dim=1)[:, :seq]
    inside = torch.arange(seq)[None, :] < rows[:, None]
    positions = torch.where(inside, chosen, max_len).sort(dim=1).values
    return torch.where(inside, positions, max_len - 1)


def grid_batch(
    task: str,
    scheme: str,
    protocol: GridProtocol,
    bos: bool,
    batch_size: int,
    length: int,
    generator: torch.Generator,
    position_generator: torch.Generator,
    *,
    draw: bool = False,
):
    """One batch of the grid: ``(inputs, targets, mask, positions)``, ``positions`` ``None`` but for randomized.

    With ``draw=True`` the lengths are drawn by :func:`~posenc.book.tasks.draw_lengths`
    (the training rule ``"uniform"``); otherwise every row is ``length`` long. Randomized
    positions are drawn from ``position_generator`` (so that the token stream is the one
    every other scheme sees), one sorted sample per sequence for its own length, BOS
    included.

    Example:
        >>> g, h = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
        >>> x, y, m, p = grid_batch("latest_marker", "randomized", GridProtocol(), True, 4, 16, g, h, draw=True)
        >>> x.shape, p.shape, bool((p[:, 1:] >= p[:, :-1]).all())
        (torch.Size([4, 17]), torch.Size([4, 17]), True)
    """
    lengths = draw_lengths(task, batch_size, length, generator=generator) if draw else None
    batch = make_task_batch(task, batch_size, length, vocab_size=protocol.vocab_size, bos=bos,
                            generator=generator, lengths=lengths)
    positions = None
    if scheme == "randomized":
        rows = torch.full((batch_size,), length) if lengths is None else lengths
        seq = batch.inputs.shape[1]
        positions = _positions(rows + int(bos), seq, 256, position_generator)
    return batch.inputs, batch.targets, batch.mask, positions


def _forward(model: nn.Module, inputs: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    return model(inputs) if positions is None else model(inputs, positions)


def _eval_generators(seed: int, length: int) -> tuple[torch.Generator, torch.Generator]:
    # the token stream of chapter 6's first grid (same held-out sequences for the pointer tasks)
    return (torch.Generator().manual_seed(1_000_003 * (seed + 1) + length),
            torch.Generator().manual_seed(7_000_003 * (seed + 1) + length))


@torch.no_grad()
def score_model(
    model: nn.Module, task: str, scheme: str, protocol: GridProtocol, bos: bool, seed: int, *, per_position: bool = False
) -> dict:
    """``acc_<f>x`` (all scored positions) and ``beyond_<f>x`` (positions ``>= L``) at every evaluation length.

    The held-out sequences depend on ``seed`` and the length only (never on the scheme).
    With ``per_position`` also ``pos_<f>x``: the accuracy at every task position (``nan``
    where nothing is scored).

    Example:
        >>> p = GridProtocol(eval_size=8)
        >>> with seeded(0):
        ...     m = p.run_config("plain", 1e-3).model("alibi")
        >>> s = score_model(m, "separator_copy", "alibi", p, False, 0)
        >>> sorted(s)
        ['acc_1x', 'acc_2x', 'acc_4x', 'beyond_2x', 'beyond_4x']
    """
    out = {}
    model.eval()
    for f in protocol.eval_factors:
        length = f * protocol.train_len
        g, h = _eval_generators(seed, length)
        inputs, targets, mask, positions = grid_batch(task, scheme, protocol, bos, protocol.eval_size, length, g, h)
        correct = (_forward(model, inputs, positions).argmax(dim=-1) == targets)[:, int(bos):]
        mask = mask[:, int(bos):]
        out[acc_key(f)] = correct[mask].double().mean().item()
        if f > 1:
            beyond = mask.clone()
            beyond[:, : protocol.train_len] = False
            out[beyond_key(f)] = correct[beyond].double().mean().item() if beyond.any() else math.nan
        if per_position:
            counts = mask.sum(dim=0).double()
            acc = (correct & mask).sum(dim=0).double() / counts
            out[pos_key(f)] = acc.masked_fill(counts == 0, math.nan).tolist()
    return out


def _loss(model: nn.Module, inputs, targets, mask, positions) -> torch.Tensor:
    logits = _forward(model, inputs, positions)
    return nn.functional.cross_entropy(logits[mask], targets[mask])


@torch.no_grad()
def heldout_loss(model: nn.Module, heldout: tuple) -> float:
    """The mean cross-entropy of ``model`` on a held-out batch from :func:`grid_batch`."""
    model.eval()
    return _loss(model, *heldout).item()


def _pack_loss(forward, inputs, targets, mask, *positions) -> torch.Tensor:
    """The mean cross-entropy over the scored positions, written without data-dependent shapes (it runs under vmap)."""
    logits = forward(inputs, *positions)
    per_token = nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    return (per_token * mask).sum() / mask.sum()


def _checked(task, scheme, variant, members, protocol):
    task = check_choice("task", task, ALL_TASKS)
    scheme = check_choice("scheme", scheme, GRID_SCHEMES)
    variant = check_choice("variant", variant, VARIANTS)
    if isinstance(members, (str, bytes)) or not isinstance(members, Sequence) or not members:
        raise TypeError(f"members must be a non-empty list of (seed, lr) pairs, got {members!r}")
    members = [(check_int("members (seed)", s, minimum=0), check_real("members (lr)", lr, low=0.0, low_open=True))
               for s, lr in members]
    protocol = GridProtocol() if protocol is None else protocol
    if not isinstance(protocol, GridProtocol):
        raise TypeError(f"protocol must be a GridProtocol, got {type(protocol).__name__}")
    return task, scheme, variant, members, protocol


def _pack(task, scheme, variant, members, protocol):
    """The members' models (each built under ``seeded(seed)``), batch streams and the warm-up schedule."""
    bos, draw = variant == "bos", length_rule(task, scheme) == "uniform"
    models = []
    for seed, lr in members:
        with seeded(seed):
            models.append(protocol.run_config(variant, lr).model(scheme))

    def stream(seed: int):
        generator = torch.Generator().manual_seed(seed)
        position_generator = torch.Generator().manual_seed(3_000_017 * (seed + 1))
        while True:
            inputs, targets, mask, positions = grid_batch(task, scheme, protocol, bos, protocol.batch_size,
                                                          protocol.train_len, generator, position_generator, draw=draw)
            yield (inputs, targets, mask) if positions is None else (inputs, targets, mask, positions)

    warmup = protocol.warmup
    schedule = (lambda step: min(1.0, step / warmup)) if warmup else None
    return models, [stream(seed) for seed, _ in members], schedule


def first_losses(config: Mapping, seed: int, n: int, *, task: str, scheme: str, variant: str, lr: float) -> list[float]:
    """The first ``n`` training losses of a trial exactly as :func:`run_grid_pack` trains it (its fingerprint).

    ``config`` is :meth:`~posenc.book.engine.TrialConfig.to_dict` (a stored ``length_rule`` entry is ignored).
    A trial's losses do not depend on the pack it trains in.

    Example:
        >>> len(first_losses(GridProtocol().to_dict(), 0, 3, task="latest_marker", scheme="randomized", variant="bos", lr=1e-3))
        3
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict of GridProtocol settings, got {type(config).__name__}")
    protocol = GridProtocol.from_dict({k: v for k, v in config.items() if k != "length_rule"})
    n = check_int("n", n)
    task, scheme, variant, members, protocol = _checked(task, scheme, variant, [(seed, lr)], protocol)
    models, streams, schedule = _pack(task, scheme, variant, members, protocol)
    return fit_batched(models, streams, _pack_loss, lrs=[lr], steps=n, schedule=schedule)[0].train_loss


def run_grid_pack(
    task: str, scheme: str, variant: str, members: Sequence[tuple[int, float]], protocol: GridProtocol | None = None
) -> list[dict]:
    """Train a pack of trials of one group as one batched model for the fixed budget; score best and final checkpoints.

    Each member ``(seed, lr)`` starts from weights drawn under ``seeded(seed)``, trains on
    batches from a generator seeded by ``seed`` (randomized positions from their own),
    with Adam at ``lr`` after a linear warm-up of ``protocol.warmup`` steps
    (:func:`~posenc.book.engine.fit_batched`: a member's numbers do not depend on its
    pack). Every ``loss_every`` steps each member's loss on its held-out set (drawn like
    its training data from ``2_000_003 * (seed + 1)``) is recorded; every
    ``score_every`` steps it is scored (:func:`score_model`); the final weights and the
    weights of the lowest held-out loss are scored with per-position curves.

    Returns:
        One dict per member, with ``losses`` (every training step), ``heldout`` (``[step,
        loss]``), ``trajectory`` (``{"steps", "heldout_loss", acc/beyond keys}``),
        ``best_step``, ``best_loss``, ``best`` / ``final`` (scores with per-position
        curves), ``length_rule``, ``params``, ``seconds`` (the pack's wall time shared
        equally).

    Example:
        >>> p = GridProtocol(steps=4, loss_every=2, score_every=4, eval_size=4, heldout_size=4, batch_size=4, warmup=0)
        >>> a, b = run_grid_pack("associative_recall", "rope", "bos", [(0, 1e-3), (1, 1e-2)], p)
        >>> a["best_step"] in (2, 4), len(b["losses"]), b["trajectory"][-1]["steps"], b["lr"]
        (True, 4, 4, 0.01)
    """
    task, scheme, variant, members, protocol = _checked(task, scheme, variant, members, protocol)
    bos, draw = variant == "bos", length_rule(task, scheme) == "uniform"
    start = time.perf_counter()
    models, streams, schedule = _pack(task, scheme, variant, members, protocol)
    heldouts = [grid_batch(task, scheme, protocol, bos, protocol.heldout_size, protocol.train_len,
                           torch.Generator().manual_seed(2_000_003 * (seed + 1)),
                           torch.Generator().manual_seed(5_000_011 * (seed + 1)), draw=draw) for seed, _ in members]
    trajectories: list[list[dict]] = [[] for _ in members]
    finals: list[dict] = [{} for _ in members]
    calls = [0] * len(members)

    def evaluate(i: int, model: nn.Module) -> float:
        calls[i] += 1
        step = min(calls[i] * protocol.loss_every, protocol.steps)  # fit_batched evaluates every loss_every and at the end
        value = heldout_loss(model, heldouts[i])
        seed = members[i][0]
        if step % protocol.score_every == 0 or step == protocol.steps:
            trajectories[i].append({"steps": step, "heldout_loss": value,
                                    **score_model(model, task, scheme, protocol, bos, seed)})
        if step == protocol.steps:  # before fit_batched loads the best weights back
            finals[i] = score_model(model, task, scheme, protocol, bos, seed, per_position=True)
        return value

    results = fit_batched(models, streams, _pack_loss, lrs=[lr for _, lr in members], steps=protocol.steps,
                          schedule=schedule, evaluate=evaluate, every=protocol.loss_every)
    seconds = (time.perf_counter() - start) / len(members)
    out = []
    for (seed, lr), model, result, trajectory, final in zip(members, models, results, trajectories, finals):
        out.append({
            "task": task, "scheme": scheme, "variant": variant, "seed": seed, "lr": lr,
            "length_rule": length_rule(task, scheme), "params": sum(p.numel() for p in model.parameters()),
            "losses": result.train_loss, "heldout": [[s, v] for s, v in result.history], "trajectory": trajectory,
            "best_step": result.best_step, "best_loss": result.best_value,
            "best": score_model(model, task, scheme, protocol, bos, seed, per_position=True), "final": final,
            "final_loss": result.history[-1][1] if result.history else math.nan, "seconds": seconds,
        })
    return out


def run_grid_trial(task: str, scheme: str, variant: str, seed: int, lr: float, protocol: GridProtocol | None = None) -> dict:
    """One trial of the grid: :func:`run_grid_pack` with one member (the same numbers as in any pack).

    Example:
        >>> p = GridProtocol(steps=2, loss_every=1, score_every=2, eval_size=4, heldout_size=4, batch_size=4)
        >>> run_grid_trial("separator_copy", "t5", "plain", 0, 3e-3, p)["best_step"] in (1, 2)
        True
    """
    return run_grid_pack(task, scheme, variant, [(seed, lr)], protocol)[0]


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), digits)


def trial_rows(trial: Mapping, *, role: str = "main") -> list[dict]:
    """The results-file rows of one trial of :func:`run_grid_trial`: its trajectory, best and final checkpoints.

    Every row has ``task``, ``scheme``, ``variant``, ``role``, ``seed``, ``lr``,
    ``steps``, ``checkpoint`` (``"trajectory"``, ``"best"`` or ``"final"``),
    ``heldout_loss``, ``acc_1x`` and the ``beyond_<f>x`` accuracies,
    ``final`` (true on the final checkpoint only) and ``stop`` (``"budget"`` on the
    final row, ``"best_heldout_loss"`` on the best one). The best and final rows add the
    ``length_rule``, the ``acc_<f>x`` of every length and the per-position curve at the
    longest evaluation length (``pos_4x``); the final row adds
    ``heldout`` (the held-out loss every ``loss_every`` steps), ``params`` and
    ``seconds``. Accuracies and losses are rounded to 4 decimals, curves to 3.
    """
    base = {k: trial[k] for k in ("task", "scheme", "variant")}
    base.update(role=role, seed=trial["seed"], lr=trial["lr"], length_rule=trial["length_rule"])

    def scores(s: Mapping) -> dict:
        return {k: _round(v) for k, v in s.items() if k.startswith(("acc_", "beyond_"))}

    longest = f"pos_{max(int(k[4:-1]) for k in trial['final'] if k.startswith('pos_'))}x" if trial["final"] else None

    def curves(s: Mapping) -> dict:
        return {longest: [_round(a, 3) for a in s[longest]]} if longest in s else {}

    short = {k: v for k, v in base.items() if k != "length_rule"}
    rows = [{**short, "steps": t["steps"], "checkpoint": "trajectory", "heldout_loss": _round(t["heldout_loss"]),
             **{k: v for k, v in scores(t).items() if not k.startswith("acc_") or k == "acc_1x"},
             "final": False, "stop": None} for t in trial["trajectory"]]
    rows.append({**base, "steps": trial["best_step"], "checkpoint": "best", "heldout_loss": _round(trial["best_loss"]),
                 **scores(trial["best"]), "final": False, "stop": "best_heldout_loss", **curves(trial["best"])})
    last = trial["trajectory"][-1]["steps"] if trial["trajectory"] else len(trial["losses"])
    rows.append({**base, "steps": last, "checkpoint": "final", "heldout_loss": _round(trial["final_loss"]),
                 **scores(trial["final"]), "final": True, "stop": "budget", **curves(trial["final"]),
                 "heldout": [_round(v) for _, v in trial["heldout"]], "params": trial["params"],
                 "seconds": round(trial["seconds"], 1)})
    return rows


# --------------------------------------------------------------------------- statistics


def wilson_interval(k: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``k / n``.

    Example:
        >>> [round(x, 2) for x in wilson_interval(4, 4)], [round(x, 2) for x in wilson_interval(2, 4)]
        ([0.51, 1.0], [0.15, 0.85])
    """
    n = check_int("n", n)
    k = check_int("k", k, minimum=0)
    if k > n:
        raise ValueError(f"k must be <= n={n}, got {k}")
    level = check_real("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _finite(name: str, values: object) -> np.ndarray:
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
    arr = np.array([math.nan if v is None else v for v in values], dtype=np.float64)
    return arr[~np.isnan(arr)]


def fit_label(acc_1x: Sequence[float]) -> dict:
    """How many seeds fit (``acc_1x >= FIT``): ``k``, ``n``, the Wilson interval and a label.

    The label is ``"fits"`` (every seed), ``"fails"`` (none) or ``"split"``.

    Example:
        >>> fit_label([1.0, 0.99, 0.5])["label"], fit_label([1.0, 0.99])["label"]
        ('split', 'fits')
    """
    arr = _finite("acc_1x", acc_1x)
    if arr.size == 0:
        raise ValueError("acc_1x must hold at least one number")
    k, n = int((arr >= FIT).sum()), int(arr.size)
    label = "fits" if k == n else "fails" if k == 0 else "split"
    return {"k": k, "n": n, "interval": wilson_interval(k, n), "label": label}


def extrapolation_label(acc_1x: Sequence[float], beyond: Sequence[float | None], floor: float) -> dict:
    """The extrapolation verdict of a group over its seeds that fit.

    Args:
        acc_1x: in-distribution accuracy of every seed.
        beyond: the same seeds' accuracy beyond the training length (``None``/``nan``:
            the model cannot run there).
        floor: the task's floor on those positions (:func:`~posenc.book.tasks.chance_floor`).

    Returns:
        ``{"label", "uncertain", "n", "retention", "retention_interval", "beyond",
        "beyond_interval", "per_seed"}``: ``label`` is ``"holds"`` (mean retention
        ``>= HOLD``), ``"floor"`` (mean beyond-length accuracy ``<= floor +
        FLOOR_MARGIN``), ``"degrades"``, ``"not fit"`` (no seed fits) or ``"cannot
        run"``; ``uncertain`` is true when the retention interval crosses ``HOLD`` or the
        accuracy interval crosses ``floor + FLOOR_MARGIN`` (the label then reads
        ``"uncertain (<label>)"``). Intervals are the 95 % bootstrap intervals of the mean
        of :func:`~posenc.book.results.summarize` (``nan`` with one seed).

    Example:
        >>> extrapolation_label([1.0, 1.0, 1.0], [0.98, 0.97, 0.99], 0.1)["label"]
        'holds'
        >>> extrapolation_label([1.0, 1.0, 1.0, 1.0], [0.95, 0.3, 0.9, 0.5], 0.1)["label"]
        'uncertain (degrades)'
    """
    floor = check_real("floor", floor, low=0.0, high=1.0)
    acc = np.array([math.nan if v is None else v for v in acc_1x], dtype=np.float64)
    far = np.array([math.nan if v is None else v for v in beyond], dtype=np.float64)
    if acc.shape != far.shape:
        raise ValueError(f"acc_1x and beyond must have one value per seed, got {acc.size} and {far.size}")
    fits = acc >= FIT
    out = {"n": int(fits.sum()), "uncertain": False, "retention": math.nan, "retention_interval": (math.nan, math.nan),
           "beyond": math.nan, "beyond_interval": (math.nan, math.nan), "per_seed": []}
    if not fits.any():
        return {**out, "label": "not fit"}
    if np.isnan(far[fits]).all():
        return {**out, "label": "cannot run"}
    keep = fits & ~np.isnan(far)
    retention = far[keep] / acc[keep]
    out.update(n=int(keep.sum()), retention=float(retention.mean()),
               retention_interval=summarize(retention, interval="bootstrap").interval,
               beyond=float(far[keep].mean()), beyond_interval=summarize(far[keep], interval="bootstrap").interval,
               per_seed=[round(float(v), 4) for v in far[keep]])
    bar = floor + FLOOR_MARGIN
    label = "holds" if out["retention"] >= HOLD else "floor" if out["beyond"] <= bar else "degrades"
    r_lo, r_hi = out["retention_interval"]
    b_lo, b_hi = out["beyond_interval"]
    out["uncertain"] = bool((r_lo < HOLD <= r_hi) or (b_lo <= bar < b_hi))
    out["label"] = f"uncertain ({label})" if out["uncertain"] else label
    return out


def permutation_p(a: Sequence[float], b: Sequence[float], *, n_perm: int = 10000, seed: int = 0) -> float:
    """Two-sided permutation p-value of the difference of the means of ``a`` and ``b``.

    Example:
        >>> permutation_p([0.9, 0.95, 0.92, 0.97], [0.2, 0.3, 0.25, 0.1]) < 0.05
        True
        >>> permutation_p([0.9, 0.2], [0.8, 0.3]) > 0.5
        True
    """
    x, y = _finite("a", a), _finite("b", b)
    if x.size == 0 or y.size == 0:
        raise ValueError("a and b must each hold at least one number")
    n_perm = check_int("n_perm", n_perm)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    pooled = np.concatenate([x, y])
    observed = abs(x.mean() - y.mean())
    perms = np.argsort(rng.random((n_perm, pooled.size)), axis=1)
    shuffled = pooled[perms]
    diffs = np.abs(shuffled[:, : x.size].mean(axis=1) - shuffled[:, x.size:].mean(axis=1))
    return float((1 + (diffs >= observed - 1e-12).sum()) / (n_perm + 1))


def best_or_indistinguishable(groups: Mapping[str, Sequence[float]], *, alpha: float = 0.05) -> dict:
    """Rank groups by mean; call the first ``"best"`` only if a permutation test separates it from the second.

    Returns:
        A dict with the keys ``order`` (the names by mean, highest first), ``claim``
        (``"best"`` or ``"indistinguishable"``) and ``p`` (the p-value of the first against
        the second).

    Example:
        >>> best_or_indistinguishable({"a": [0.9, 0.91, 0.92, 0.9], "b": [0.5, 0.45, 0.55, 0.5]})["claim"]
        'best'
    """
    if not isinstance(groups, Mapping) or len(groups) < 2:
        raise ValueError("groups must map at least two names to their values")
    alpha = check_real("alpha", alpha, low=0.0, high=1.0, low_open=True, high_open=True)
    means = {name: float(_finite(name, v).mean()) if _finite(name, v).size else -math.inf for name, v in groups.items()}
    order = sorted(means, key=means.get, reverse=True)
    p = permutation_p(groups[order[0]], groups[order[1]])
    return {"order": order, "claim": "best" if p < alpha else "indistinguishable", "p": p}


def horizon(curve: Sequence[float | None], train_len: int, *, threshold: float = 0.9) -> int:
    """The extrapolation horizon: the first position ``>= train_len`` whose accuracy is below ``threshold``.

    Unscored positions (``None``/``nan``) are skipped; ``len(curve)`` if none falls below.

    Example:
        >>> horizon([1.0] * 16 + [0.99] * 25 + [0.45, 0.3], 16)
        41
    """
    train_len = check_int("train_len", train_len)
    threshold = check_real("threshold", threshold, low=0.0, high=1.0)
    for t, a in enumerate(curve):
        if t >= train_len and a is not None and not math.isnan(a) and a < threshold:
            return t
    return len(curve)


def unstable(trajectory: Sequence[Mapping], *, key: str = "beyond_4x", window: int = 4, tol: float = 0.1) -> bool:
    """Whether extrapolation still moves while the fit does not.

    True when, over the last ``window`` scored checkpoints, ``acc_1x`` stays at or above
    :data:`FIT` and ``key`` spans more than ``tol``.

    Example:
        >>> t = [{"acc_1x": 1.0, "beyond_4x": b} for b in (0.25, 0.41, 0.47, 0.58)]
        >>> unstable(t), unstable(t, tol=0.5)
        (True, False)
    """
    rows = check_rows("trajectory", trajectory, ("acc_1x",))
    window = check_int("window", window, minimum=2)
    last = rows[-window:]
    if len(last) < window or any((r["acc_1x"] or 0.0) < FIT for r in last):
        return False
    values = [r.get(key) for r in last if r.get(key) is not None and not math.isnan(r.get(key))]
    return len(values) >= 2 and max(values) - min(values) > tol


def still_improving(heldout: Sequence[Sequence[float]], *, last: int = 500, gain: float = 0.02) -> bool:
    """Phase B's rule, fixed before the run: the held-out loss fell by more than ``gain`` (relative) over the last ``last`` steps.

    ``heldout`` is a trial's ``[step, loss]`` list.

    Example:
        >>> still_improving([[1500, 0.10], [2000, 0.05]]), still_improving([[1500, 0.10], [2000, 0.099]])
        (True, False)
    """
    pairs = [(int(s), float(v)) for s, v in heldout]
    if not pairs:
        raise ValueError("heldout must hold at least one [step, loss] pair")
    end, final = pairs[-1]
    before = [v for s, v in pairs if s <= end - last]
    return bool(before) and final < (1 - gain) * min(before)


def lr_band(rows: Sequence[Mapping], *, key: str = "beyond_4x") -> dict:
    """The learning rate chosen on held-out loss and the beyond-length accuracy at every rate that fits.

    ``rows`` are one group's rows of one checkpoint kind (e.g. ``checkpoint == "best"``).
    A rate fits when at least half its seeds fit. The chosen rate has the lowest mean
    held-out loss among the rates that fit (among all, if none fits).

    Returns:
        A dict with the keys ``chosen`` (the learning rate), ``fitting`` (the rates that
        fit), ``per_lr`` (for each rate a dict of ``loss``, ``fit`` and ``key``) and ``band``
        (the lowest and highest mean ``key`` over the fitting rates).

    Example:
        >>> rows = [{"lr": lr, "seed": s, "acc_1x": 1.0, "heldout_loss": lr * 10, "beyond_4x": b}
        ...         for lr, b in ((0.001, 0.6), (0.01, 0.9)) for s in (0, 1)]
        >>> band = lr_band(rows)
        >>> band["chosen"], band["band"]
        (0.001, (0.6, 0.9))
    """
    rows = check_rows("rows", rows, ("lr", "acc_1x", "heldout_loss"))
    per: dict[float, dict] = {}
    for lr in sorted({r["lr"] for r in rows}):
        members = [r for r in rows if r["lr"] == lr]
        fit = fit_label([r["acc_1x"] for r in members])
        per[lr] = {"loss": float(np.mean([r["heldout_loss"] for r in members])), "fit": f"{fit['k']}/{fit['n']}",
                   key: float(np.nanmean([math.nan if r.get(key) is None else r[key] for r in members]))
                   if any(r.get(key) is not None for r in members) else math.nan, "_fits": fit["k"] * 2 >= fit["n"]}
    fitting = [lr for lr, v in per.items() if v["_fits"]]
    pool = fitting or list(per)
    chosen = min(pool, key=lambda lr: per[lr]["loss"])
    values = [per[lr][key] for lr in fitting if not math.isnan(per[lr][key])]
    for v in per.values():
        del v["_fits"]
    return {"chosen": chosen, "fitting": fitting, "per_lr": per,
            "band": (min(values), max(values)) if values else (math.nan, math.nan)}


def task_floors(task: str, protocol: GridProtocol | None = None, *, bos: bool = False) -> dict[str, float]:
    """The task's floor for every metric of the grid: ``acc_1x`` and ``beyond_<f>x``.

    Example:
        >>> f = task_floors("far_retrieve", GridProtocol(eval_factors=(1, 2)))
        >>> sorted(f), round(f["acc_1x"], 1)
        (['acc_1x', 'beyond_2x'], 0.4)
    """
    protocol = GridProtocol() if protocol is None else protocol
    L = protocol.train_len
    out = {"acc_1x": chance_floor(task, L, vocab_size=protocol.vocab_size, bos=bos)}
    for f in protocol.eval_factors[1:]:
        out[beyond_key(f)] = chance_floor(task, f * L, start=L, vocab_size=protocol.vocab_size, bos=bos)
    return out


def group_verdict(rows: Sequence[Mapping], floors: Mapping[str, float], *, factors: tuple[int, ...] = (2, 4)) -> dict:
    """A group's verdict from its rows of one checkpoint kind at one or more learning rates.

    Returns ``{"fit": fit_label(...), "beyond_2x": extrapolation_label(...), ...}``.

    Example:
        >>> rows = [{"acc_1x": 1.0, "beyond_2x": 0.99, "beyond_4x": 0.2} for _ in range(4)]
        >>> v = group_verdict(rows, {"beyond_2x": 0.15, "beyond_4x": 0.15})
        >>> v["fit"]["label"], v["beyond_2x"]["label"], v["beyond_4x"]["label"]
        ('fits', 'holds', 'floor')
    """
    rows = check_rows("rows", rows, ("acc_1x",))
    acc = [r["acc_1x"] for r in rows]
    out: dict = {"fit": fit_label(acc)}
    for f in factors:
        key = beyond_key(f)
        if key not in floors:
            raise ValueError(f"floors has no {key!r}; got {sorted(floors)}")
        out[key] = extrapolation_label(acc, [r.get(key) for r in rows], floors[key])
    return out


def grid_verdicts(rows: Sequence[Mapping], *, checkpoint: str = "best", protocol: GridProtocol | None = None) -> dict:
    """Every group's verdict from a results file's rows: the heatmap's cells.

    For each ``(task, scheme, variant)``: the learning-rate band (:func:`lr_band`, chosen
    on held-out loss), the verdict (:func:`group_verdict`) pooled over the seeds of every
    rate that fits (all rates if none fits), the verdict at the chosen rate alone, and the
    number of unstable trials (:func:`unstable`) among them.

    Args:
        rows: the rows of :func:`trial_rows` (trajectory, best and final).
        checkpoint: ``"best"`` (lowest held-out loss) or ``"final"``.
        protocol: for the floors (evaluation lengths, vocabulary); default ``GridProtocol()``.

    Returns:
        ``{(task, scheme, variant): {"band", "pooled", "chosen", "unstable", "trials"}}``.

    Example:
        >>> rows = [{"task": "offset_copy", "scheme": "rope", "variant": "plain", "seed": s, "lr": 1e-3,
        ...          "checkpoint": c, "steps": 2000, "acc_1x": 1.0, "heldout_loss": 0.1,
        ...          "beyond_2x": 0.9, "beyond_4x": 0.6} for s in range(4) for c in ("best", "trajectory")]
        >>> v = grid_verdicts(rows, protocol=GridProtocol(eval_factors=(1, 2, 4)))[("offset_copy", "rope", "plain")]
        >>> v["pooled"]["fit"]["label"], v["pooled"]["beyond_4x"]["label"], v["unstable"]
        ('fits', 'degrades', 0)
    """
    rows = check_rows("rows", rows, ("task", "scheme", "variant", "seed", "lr", "checkpoint"))
    checkpoint = check_choice("checkpoint", checkpoint, ("best", "final"))
    protocol = GridProtocol() if protocol is None else protocol
    factors = tuple(protocol.eval_factors[1:])
    floors: dict[str, dict] = {}
    groups: dict[tuple, list[Mapping]] = {}
    for r in rows:
        groups.setdefault((r["task"], r["scheme"], r["variant"]), []).append(r)
    out = {}
    for (task, scheme, variant), members in groups.items():
        if task not in floors:
            floors[task] = task_floors(task, protocol)
        kept = [r for r in members if r["checkpoint"] == checkpoint]
        if not kept:
            continue
        band = lr_band(kept)
        pool = set(band["fitting"]) or {r["lr"] for r in kept}
        trajectories: dict[tuple, list[Mapping]] = {}
        for r in sorted(members, key=lambda r: r["steps"]):
            if r["checkpoint"] == "trajectory":
                trajectories.setdefault((r["seed"], r["lr"]), []).append(r)
        out[(task, scheme, variant)] = {
            "band": band,
            "pooled": group_verdict([r for r in kept if r["lr"] in pool], floors[task], factors=factors),
            "chosen": group_verdict([r for r in kept if r["lr"] == band["chosen"]], floors[task], factors=factors),
            "unstable": sum(unstable(t) for t in trajectories.values()),
            "trials": len(kept),
        }
    return out


# --------------------------------------------------------------------------- predictions (written before the data)

# task, scheme: plain (fit 2x 4x) | bos (fit 2x 4x); "-" where nothing fits, so nothing is predicted past L.
# Written and committed before phase A's rows of these groups were read (experiments/README.md, chapter 6,
# "Predictions"); the mechanism behind each line is stated there.
_PREDICTION_TABLE = """
offset_copy        none        fails - -            | fits floor floor
offset_copy        sinusoidal  fits degrades floor  | fits degrades floor
offset_copy        rope        fits holds degrades  | fits holds degrades
offset_copy        alibi       split holds holds    | fits holds holds
offset_copy        t5          fits holds degrades  | fits holds degrades
offset_copy        shaw        fits holds holds     | fits holds holds
offset_copy        randomized  split degrades degrades | fits degrades degrades
fixed_retrieve     none        split holds holds    | fits holds holds
fixed_retrieve     sinusoidal  fits degrades degrades | fits degrades degrades
fixed_retrieve     rope        fits degrades degrades | fits degrades degrades
fixed_retrieve     alibi       split holds holds    | fits holds holds
fixed_retrieve     t5          fits holds holds     | fits holds holds
fixed_retrieve     shaw        fits holds holds     | fits holds holds
fixed_retrieve     randomized  split degrades degrades | fits degrades degrades
long_offset_copy   none        fails - -            | split floor floor
long_offset_copy   sinusoidal  fits degrades floor  | fits degrades floor
long_offset_copy   rope        fits floor floor     | fits floor floor
long_offset_copy   alibi       fails - -            | split holds holds
long_offset_copy   t5          fits holds degrades  | fits holds degrades
long_offset_copy   shaw        fits floor floor     | fits floor floor
long_offset_copy   randomized  fails - -            | split degrades floor
far_retrieve       none        fails - -            | fits holds holds
far_retrieve       sinusoidal  fits degrades degrades | fits degrades degrades
far_retrieve       rope        fits degrades floor  | fits degrades floor
far_retrieve       alibi       fails - -            | fits holds degrades
far_retrieve       t5          fails - -            | fits holds degrades
far_retrieve       shaw        split holds holds    | fits holds holds
far_retrieve       randomized  fails - -            | split degrades floor
associative_recall none        split degrades degrades | fits degrades degrades
associative_recall sinusoidal  fits degrades degrades | fits degrades degrades
associative_recall rope        fits holds degrades  | fits holds degrades
associative_recall alibi       fits holds holds     | fits holds holds
associative_recall t5          fits holds holds     | fits holds holds
associative_recall shaw        fits holds holds     | fits holds holds
associative_recall randomized  fits degrades degrades | fits degrades degrades
separator_copy     none        split floor floor    | fits degrades degrades
separator_copy     sinusoidal  fits floor floor     | fits floor floor
separator_copy     rope        fits floor floor     | fits floor floor
separator_copy     alibi       fits floor floor     | fits floor floor
separator_copy     t5          fits degrades floor  | fits degrades floor
separator_copy     shaw        fits floor floor     | fits floor floor
separator_copy     randomized  fits floor floor     | fits floor floor
latest_marker      none        split degrades degrades | fits degrades degrades
latest_marker      sinusoidal  fits degrades degrades | fits degrades degrades
latest_marker      rope        fits holds degrades  | fits holds degrades
latest_marker      alibi       fits holds holds     | fits holds holds
latest_marker      t5          fits holds holds     | fits holds holds
latest_marker      shaw        fits holds holds     | fits holds holds
latest_marker      randomized  fits holds degrades  | fits holds degrades
"""


def _parse_predictions(text: str) -> dict[tuple[str, str, str], dict[str, str | None]]:
    out = {}
    for line in text.strip().splitlines():
        head, bos = line.split("|")
        task, scheme, *plain = head.split()
        for variant, (fit, two, four) in (("plain", plain), ("bos", bos.split())):
            out[(task, scheme, variant)] = {"fit": fit, "beyond_2x": None if two == "-" else two,
                                            "beyond_4x": None if four == "-" else four}
    return out


#: The pre-registered prediction of every phase-A group: ``{(task, scheme, variant): {"fit", "beyond_2x", "beyond_4x"}}``
#: (``None``: not predicted, since the group is predicted not to fit).
PREDICTIONS = _parse_predictions(_PREDICTION_TABLE)
