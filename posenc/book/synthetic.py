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

**Predictions and analysis.** :data:`PREDICTIONS` holds every phase-A group's predicted
labels, written before its rows were read. The analysis reads a results file whole or
partial: :func:`grid_coverage` says which groups are missing, :func:`group_table` gives
every group's verdicts beside its prediction (missing groups marked), and
:func:`paired_scheme_differences` pairs two schemes seed by seed within a task. The
mechanism checks test each scheme's predicted failure on the saved curves
(:func:`rope_alias_check`, :func:`sinusoidal_similarity_check`,
:func:`randomized_seen_check`, :func:`group_horizons`) and on the few trained models of
``ch6_checkpoints.json`` (:func:`load_checkpoint`; :func:`rope_head_profile`,
:func:`t5_bucket_check`, :func:`bos_position_probe`), from their analytic side
(:func:`rope_alias_table`, :func:`t5_buckets`, :func:`sinusoidal_novelty`,
:func:`randomized_spacing`, :func:`bos_feature_gap`); each has a figure (``plot_*``) that
draws its dict and says on the axes what is missing.

**Ablations.** :func:`ablation_table` puts each phase-D unit (``ablation_units``) beside
its phase-A counterpart at the same learning rate and judges the ablations' own
predictions (:data:`ABLATION_PREDICTIONS`), naming the units not in the results yet;
:func:`format_ablation_table` is its Markdown table.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .._checks import check_choice, check_int
from ._validate import as_finite_array, check_axes, check_real, check_rows
from .models import SCHEMES, PositionalTransformer
from .results import acc_key, pos_key, summarize
from .tasks import ALL_TASKS, VARIABLE_LENGTH_TASKS, chance_floor, draw_lengths, make_task_batch
from .engine import TrialConfig, fit_batched, seeded
from .training import RunConfig, beyond_key

__all__ = [
    "ABLATION_PREDICTIONS",
    "AS_PHASE_A",
    "FIT",
    "FLOOR_MARGIN",
    "GRID_SCHEMES",
    "HOLD",
    "HORIZON_SHARE",
    "LENGTH_RULE",
    "PHASE_A_GROUPS",
    "PREDICTIONS",
    "SCHEME_NAMES",
    "VARIANTS",
    "GridProtocol",
    "ablation_table",
    "best_or_indistinguishable",
    "best_schemes",
    "bos_feature_gap",
    "extrapolation_label",
    "first_losses",
    "fit_label",
    "format_ablation_table",
    "format_group_table",
    "format_phase_c_changes",
    "grid_batch",
    "grid_coverage",
    "grid_verdicts",
    "group_curves",
    "group_table",
    "group_verdict",
    "heldout_loss",
    "horizon",
    "length_rule",
    "load_grid",
    "lr_band",
    "paired_scheme_differences",
    "permutation_p",
    "phase_c_changes",
    "plot_scheme_curves",
    "plot_trajectories",
    "plot_verdict_heatmap",
    "prediction_outcome",
    "prediction_summary",
    "randomized_spacing",
    "rope_alias_positions",
    "rope_extended_frequencies",
    "rope_extended_score",
    "rope_template_score",
    "run_grid_pack",
    "run_grid_trial",
    "scheme_predictions",
    "score_model",
    "sinusoidal_novelty",
    "still_improving",
    "t5_buckets",
    "table_row",
    "task_floors",
    "trial_rows",
    "unstable",
    "verdict_heat_table",
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


def _pack(task, scheme, variant, members, protocol, modify=None):
    """The members' models (each built under ``seeded(seed)``, then ``modify(model)``), batch streams and the warm-up schedule."""
    bos, draw = variant == "bos", length_rule(task, scheme) == "uniform"
    models = []
    for seed, lr in members:
        with seeded(seed):
            models.append(protocol.run_config(variant, lr).model(scheme))
        if modify is not None:
            modify(models[-1])

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
    task: str, scheme: str, variant: str, members: Sequence[tuple[int, float]], protocol: GridProtocol | None = None,
    *, modify=None,
) -> list[dict]:
    """Train a pack of trials of one group as one batched model for the fixed budget; score best and final checkpoints.

    Each member ``(seed, lr)`` starts from weights drawn under ``seeded(seed)``, trains on
    batches from a generator seeded by ``seed`` (randomized positions from their own),
    with Adam at ``lr`` after a linear warm-up of ``protocol.warmup`` steps
    (:func:`~posenc.book.engine.fit_batched`: a member's numbers do not depend on its
    pack). Every ``loss_every`` steps each member's loss on its held-out set (drawn like
    its training data from ``2_000_003 * (seed + 1)``) is recorded; every
    ``score_every`` steps it is scored (:func:`score_model`); the final weights and the
    weights of the lowest held-out loss are scored with per-position curves. ``modify``
    (phase D's ablations, e.g. ``rope_base_modifier``) changes each freshly built
    model in place before training; without it the model is the protocol's.

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
    if modify is not None and not callable(modify):
        raise TypeError(f"modify must be a function of the model, got {type(modify).__name__}")
    models, streams, schedule = _pack(task, scheme, variant, members, protocol, modify)
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
        ``{"label", "uncertain", "n", "held", "retention", "retention_interval", "beyond",
        "beyond_interval", "per_seed"}`` (``held``: the seeds among the ``n`` that fit whose
        own retention is ``>= HOLD``): ``label`` is ``"holds"`` (mean retention
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
    out = {"n": int(fits.sum()), "held": 0, "uncertain": False, "retention": math.nan,
           "retention_interval": (math.nan, math.nan), "beyond": math.nan, "beyond_interval": (math.nan, math.nan),
           "per_seed": []}
    if not fits.any():
        return {**out, "label": "not fit"}
    if np.isnan(far[fits]).all():
        return {**out, "label": "cannot run"}
    keep = fits & ~np.isnan(far)
    retention = far[keep] / acc[keep]
    out.update(n=int(keep.sum()), held=int((retention >= HOLD).sum()), retention=float(retention.mean()),
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
    return dict(_floors(task, protocol.train_len, tuple(protocol.eval_factors), protocol.vocab_size, bool(bos)))


@functools.lru_cache(maxsize=64)
def _floors(task: str, L: int, factors: tuple[int, ...], vocab_size: int, bos: bool) -> tuple[tuple[str, float], ...]:
    # the floors are Monte-Carlo estimates from a fixed seed: the same numbers every call, computed once
    out = [("acc_1x", chance_floor(task, L, vocab_size=vocab_size, bos=bos))]
    for f in factors[1:]:
        out.append((beyond_key(f), chance_floor(task, f * L, start=L, vocab_size=vocab_size, bos=bos)))
    return tuple(out)


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


def grid_verdicts(rows: Sequence[Mapping], *, checkpoint: str = "best", protocol: GridProtocol | None = None,
                  more_seeds: Sequence[Mapping] | None = None) -> dict:
    """Every group's verdict from a results file's rows: the heatmap's cells.

    For each ``(task, scheme, variant)``: the learning-rate band (:func:`lr_band`, chosen
    on held-out loss), the verdict (:func:`group_verdict`) pooled over the seeds of every
    rate that fits (all rates if none fits), the verdict at the chosen rate alone, and the
    number of unstable trials (:func:`unstable`) among them.

    Args:
        rows: the rows of :func:`trial_rows` (trajectory, best and final).
        checkpoint: ``"best"`` (lowest held-out loss) or ``"final"``.
        protocol: for the floors (evaluation lengths, vocabulary); default ``GridProtocol()``.
        more_seeds: rows of further trials of some of these groups (phase C's extra seeds):
            the band is still chosen from ``rows`` alone, and each group's rows of the
            checkpoint in ``more_seeds`` join its pooled verdict (and its trajectories the
            unstable count); the verdict at the chosen rate stays that of ``rows``. A group
            of ``more_seeds`` absent from ``rows``, or a trial (seed, rate) in both, is a
            ``ValueError``.

    Returns:
        ``{(task, scheme, variant): {"band", "pooled", "chosen", "unstable", "trials"}}``;
        with ``more_seeds``, each entry adds ``"added"``, the trials ``more_seeds`` gave it.

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
    extra = _extra_rows(more_seeds, groups, checkpoint)
    out = {}
    for (task, scheme, variant), members in groups.items():
        if task not in floors:
            floors[task] = task_floors(task, protocol)
        kept = [r for r in members if r["checkpoint"] == checkpoint]
        if not kept:
            continue
        band = lr_band(kept)
        pool = set(band["fitting"]) or {r["lr"] for r in kept}
        added = (extra or {}).get((task, scheme, variant), [])
        trajectories: dict[tuple, list[Mapping]] = {}
        for r in sorted(list(members) + added, key=lambda r: r["steps"]):
            if r["checkpoint"] == "trajectory":
                trajectories.setdefault((r["seed"], r["lr"]), []).append(r)
        added = [r for r in added if r["checkpoint"] == checkpoint]
        out[(task, scheme, variant)] = {
            "band": band,
            "pooled": group_verdict([r for r in kept if r["lr"] in pool] + added, floors[task], factors=factors),
            "chosen": group_verdict([r for r in kept if r["lr"] == band["chosen"]], floors[task], factors=factors),
            "unstable": sum(unstable(t) for t in trajectories.values()),
            "trials": len(kept) + len(added),
        }
        if extra is not None:
            out[(task, scheme, variant)]["added"] = len(added)
    return out


def _extra_rows(more_seeds: Sequence[Mapping] | None, groups: Mapping[tuple, Sequence[Mapping]],
                checkpoint: str) -> dict[tuple, list[Mapping]] | None:
    """``more_seeds`` by group, checked against ``groups`` (phase A's rows by group): ``None`` when not given."""
    if more_seeds is None:
        return None
    extra_rows = check_rows("more_seeds", more_seeds, ("task", "scheme", "variant", "seed", "lr", "checkpoint"),
                            nonempty=False)
    extra: dict[tuple, list[Mapping]] = {}
    for r in extra_rows:
        extra.setdefault((r["task"], r["scheme"], r["variant"]), []).append(r)
    for group, added in extra.items():
        if group not in groups:
            raise ValueError(f"more_seeds has rows of {' / '.join(group)}, a group not in rows")
        have = {(r["seed"], r["lr"]) for r in groups[group] if r["checkpoint"] == checkpoint}
        twice = sorted({(r["seed"], r["lr"]) for r in added if r["checkpoint"] == checkpoint} & have)
        if twice:
            raise ValueError(f"more_seeds repeats the trials (seed, lr) {twice} of {' / '.join(group)} already in rows")
    return extra


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


#: The pre-registered prediction of every phase-A group, a dict from ``(task, scheme, variant)``
#: to ``{"fit", "beyond_2x", "beyond_4x"}`` (``None`` where the group is predicted not to
#: fit, so nothing beyond it is predicted).
PREDICTIONS = _parse_predictions(_PREDICTION_TABLE)


# --------------------------------------------------------------------------- analysis of a results file (partial or whole)

#: The groups of phase A in the order the grid runs them (task, then scheme, then variant).
PHASE_A_GROUPS = tuple((task, scheme, variant) for task in ALL_TASKS for scheme in GRID_SCHEMES for variant in VARIANTS)


def load_grid(source: object = None) -> dict:
    """A results file of the grid as a dict: ``source`` a path, an already loaded dict, or ``None`` (the shipped file).

    Example:
        >>> load_grid({"rows": []})["rows"]
        []
    """
    import json
    from pathlib import Path

    if source is None:
        from .resources import resource_path

        source = resource_path("alternatives_v2.json")
    if isinstance(source, Mapping):
        data = dict(source)
    elif isinstance(source, (str, Path)):
        data = json.loads(Path(source).read_text())
    else:
        raise TypeError(f"source must be a path, a results dict or None, got {type(source).__name__}")
    if not isinstance(data.get("rows"), list):
        raise ValueError("source has no 'rows' list: not a results file of the grid")
    return data


def _rows(results: object) -> list[dict]:
    return load_grid(results)["rows"]


def grid_coverage(results: object, *, phase: str = "A") -> dict:
    """Which of the phase's planned groups a (partial) results file holds.

    Returns ``{"planned", "done", "missing", "partial", "text"}``: ``done`` and ``missing`` list
    ``(task, scheme, variant)`` in plan order, ``partial`` the groups with fewer trials than
    the protocol's learning rates x seeds, ``text`` one line saying what is missing.

    Example:
        >>> c = grid_coverage({"rows": []})
        >>> c["planned"], len(c["missing"]), c["text"][:30]
        (98, 98, '0 of 98 groups of phase A done')
    """
    phase = check_choice("phase", phase, ("A",))
    rows = [r for r in _rows(results) if r.get("phase", "A") == phase]
    trials: dict[tuple, set] = {}
    for r in rows:
        if r.get("checkpoint") == "final":
            trials.setdefault((r["task"], r["scheme"], r["variant"]), set()).add((r["seed"], r["lr"]))
    full = len(GridProtocol().lrs) * len(GridProtocol().seeds)
    done = [g for g in PHASE_A_GROUPS if g in trials]
    missing = [g for g in PHASE_A_GROUPS if g not in trials]
    partial = [g for g in done if len(trials[g]) < full]
    tasks_missing = [t for t in ALL_TASKS if all(g in missing for g in PHASE_A_GROUPS if g[0] == t)]
    text = f"{len(done)} of {len(PHASE_A_GROUPS)} groups of phase {phase} done"
    if missing:
        text += f"; missing: {len(missing)} groups" + (f" (all of {', '.join(tasks_missing)})" if tasks_missing else "")
    return {"planned": len(PHASE_A_GROUPS), "done": done, "missing": missing, "partial": partial, "text": text}


def _median_horizon(rows: Sequence[Mapping], train_len: int, key: str = "pos_4x") -> float:
    values = [horizon(r[key], train_len) for r in rows if r.get(key) is not None and (r["acc_1x"] or 0) >= FIT]
    return float(np.median(values)) if values else math.nan


def group_table(results: object, *, checkpoint: str = "best", protocol: GridProtocol | None = None,
                more_seeds: object = None) -> list[dict]:
    """One row per planned group of phase A (plan order), its verdicts beside its prediction.

    Each row: ``task``, ``scheme``, ``variant``, ``status`` (``"done"`` or ``"missing"``);
    for a done group also ``fit`` (``"k/n"`` over the pooled rates), ``fit_label``,
    ``fit_interval`` (Wilson), ``lr`` (chosen on held-out loss), ``band_4x`` (beyond-4x
    accuracy over the fitting rates), ``unstable`` (trials), ``horizon`` (median over the
    fitting seeds of :func:`horizon` on the 4x curve), and per factor ``f``:
    ``label_<f>x`` (with ``"uncertain (...)"``), ``beyond_<f>x``, ``beyond_<f>x_interval``,
    ``retention_<f>x``, ``seeds_<f>x`` (the per-seed points), ``held_<f>x`` (fitting seeds
    that hold) and ``outcome_<f>x``
    (:func:`prediction_outcome`); ``predicted`` is :data:`PREDICTIONS`' entry.

    ``more_seeds`` (a path or results dict of phase C, whose rows all have ``phase ==
    "C"``; default ``None``: phase A alone) pools further seeds into the groups it holds:
    each group's learning-rate band is still chosen from phase A's rows, and its verdicts
    (``fit``, the labels, means, intervals, per-seed points, held counts, horizon and
    outcomes) are those of phase A's rows at the fitting rates together with the group's
    rows of ``more_seeds`` (:func:`grid_verdicts`). Every done row then also has
    ``added_seeds`` (the trials ``more_seeds`` added, 0 for the other groups) and
    ``added_lr`` (their rate, or ``None``).

    Example:
        >>> rows = group_table({"rows": []})
        >>> len(rows), rows[0]["status"], rows[0]["predicted"]["fit"]
        (98, 'missing', 'fails')
        >>> a = [{"task": "offset_copy", "scheme": "rope", "variant": "plain", "seed": s, "lr": 3e-3, "steps": 2000,
        ...       "checkpoint": "best", "acc_1x": 1.0, "heldout_loss": 0.1, "beyond_2x": 0.95, "beyond_4x": 0.5}
        ...      for s in range(4)]
        >>> c = [{**a[0], "seed": s, "phase": "C"} for s in range(4, 10)]
        >>> row = table_row(group_table({"rows": a}, more_seeds={"rows": c}), "offset_copy", "rope", "plain")
        >>> row["fit"], row["added_seeds"], row["added_lr"]
        ('10/10', 6, 0.003)
    """
    protocol = GridProtocol() if protocol is None else protocol
    data = [r for r in _rows(results) if r.get("phase", "A") == "A"]
    extra = None
    if more_seeds is not None:
        extra = _results_arg("more_seeds", more_seeds, "alternatives_v2_C.json")["rows"]
        phases = sorted({str(r.get("phase")) for r in extra} - {"C"})
        if phases:
            raise ValueError(f"more_seeds must hold phase C's rows (more seeds of phase A's groups), got phase {phases}")
    verdicts = grid_verdicts(data, checkpoint=checkpoint, protocol=protocol, more_seeds=extra) if data else {}
    if extra and not data:
        raise ValueError("more_seeds adds seeds to phase A's groups, but results holds no row of phase A")
    kept: dict[tuple, list] = {}
    for r in data:
        if r.get("checkpoint") == checkpoint:
            kept.setdefault((r["task"], r["scheme"], r["variant"]), []).append(r)
    out = []
    for group in PHASE_A_GROUPS:
        task, scheme, variant = group
        row = {"task": task, "scheme": scheme, "variant": variant, "predicted": PREDICTIONS[group]}
        if group not in verdicts:
            out.append({**row, "status": "missing"})
            continue
        v = verdicts[group]
        fit = v["pooled"]["fit"]
        pool = set(v["band"]["fitting"]) or {r["lr"] for r in kept[group]}
        added = [r for r in extra or () if (r["task"], r["scheme"], r["variant"]) == group
                 and r.get("checkpoint") == checkpoint]
        row.update(status="done", fit=f"{fit['k']}/{fit['n']}", fit_label=fit["label"], fit_interval=fit["interval"],
                   lr=v["band"]["chosen"], band_4x=v["band"]["band"], unstable=v["unstable"],
                   horizon=_median_horizon([r for r in kept[group] if r["lr"] in pool] + added, protocol.train_len))
        if extra is not None:
            lrs = sorted({r["lr"] for r in added})
            row.update(added_seeds=len(added), added_lr=(lrs[0] if len(lrs) == 1 else tuple(lrs)) if lrs else None)
        row["outcome_fit"] = "confirmed" if fit["label"] == row["predicted"]["fit"] else "refuted"
        for f in protocol.eval_factors[1:]:
            key = beyond_key(f)
            e = v["pooled"][key]
            row.update({f"label_{f}x": e["label"], key: e["beyond"], f"{key}_interval": e["beyond_interval"],
                        f"retention_{f}x": e["retention"], f"seeds_{f}x": e["per_seed"], f"held_{f}x": e["held"],
                        f"outcome_{f}x": prediction_outcome(row["predicted"].get(key), e["label"])})
        out.append(row)
    return out


def prediction_outcome(predicted: str | None, label: str) -> str:
    """``"confirmed"``, ``"refuted"`` or ``"open"`` (uncertain, not fit, or nothing predicted).

    Example:
        >>> prediction_outcome("holds", "holds"), prediction_outcome("holds", "uncertain (degrades)"), prediction_outcome("floor", "degrades")
        ('confirmed', 'open', 'refuted')
    """
    if predicted is None or label in ("not fit", "cannot run") or label.startswith("uncertain"):
        return "open"
    return "confirmed" if label == predicted else "refuted"


def prediction_summary(table: Sequence[Mapping]) -> dict:
    """Counts of confirmed, refuted and open predictions in a :func:`group_table`, and the refuted ones.

    Example:
        >>> prediction_summary(group_table({"rows": []}))["missing"]
        98
    """
    rows = check_rows("table", table, ("task", "scheme", "variant", "status"))
    counts = {"confirmed": 0, "refuted": 0, "open": 0}
    refuted = []
    for r in rows:
        if r["status"] != "done":
            continue
        for key in ("outcome_fit", *(k for k in r if k.startswith("outcome_") and k != "outcome_fit")):
            counts[r[key]] += 1
            if r[key] == "refuted":
                refuted.append((r["task"], r["scheme"], r["variant"], key[len("outcome_"):]))
    return {**counts, "refuted_cases": refuted, "missing": sum(r["status"] != "done" for r in rows)}


def paired_scheme_differences(
    results: object, task: str, variant: str, *, key: str = "beyond_4x", checkpoint: str = "best", lr: str = "chosen",
    more_seeds: object = None,
) -> dict:
    """Paired differences of ``key`` between every two schemes of one task and variant.

    Schemes share their training tokens and evaluation sequences seed by seed, so a
    pair is one seed (``lr="chosen"``: each scheme at its learning rate chosen on held-out
    loss) or one (seed, rate) (``lr="all"``). Each entry is
    :func:`~posenc.book.results.paired_difference` of ``a - b``. Only phase A's rows of
    ``results`` are read; ``more_seeds`` (phase C's results, as in :func:`group_table`)
    adds its rows of these schemes (at the chosen rate only, with ``lr="chosen"``; the rate
    is chosen on phase A's rows). Two schemes are paired only on the seeds (and rates) both
    have, so phase C's seeds pair only where both schemes were given them at the same rate.

    Returns:
        ``{"pairs": {(a, b): {...}}, "missing": [schemes without rows]}``, the schemes in
        :data:`GRID_SCHEMES` order; missing schemes are listed, never an error.

    Example:
        >>> paired_scheme_differences({"rows": []}, "offset_copy", "bos")["missing"][:2]
        ['none', 'sinusoidal']
    """
    from .results import paired_difference

    task = check_choice("task", task, ALL_TASKS)
    variant = check_choice("variant", variant, VARIANTS)
    lr = check_choice("lr", lr, ("chosen", "all"))
    checkpoint = check_choice("checkpoint", checkpoint, ("best", "final"))
    rows = [r for r in _rows(results) if r.get("phase", "A") == "A" and r["task"] == task and r["variant"] == variant
            and r.get("checkpoint") == checkpoint]
    extra = [] if more_seeds is None else [
        r for r in _results_arg("more_seeds", more_seeds, "alternatives_v2_C.json")["rows"]
        if r.get("phase") == "C" and r["task"] == task and r["variant"] == variant and r.get("checkpoint") == checkpoint]
    values: dict[str, dict] = {}
    for scheme in GRID_SCHEMES:
        mine = [r for r in rows if r["scheme"] == scheme]
        if not mine:
            continue
        added = [r for r in extra if r["scheme"] == scheme]
        if lr == "chosen":
            chosen = lr_band(mine)["chosen"]
            mine, added = [r for r in mine if r["lr"] == chosen], [r for r in added if r["lr"] == chosen]
        twice = {(r["seed"], r["lr"]) for r in mine} & {(r["seed"], r["lr"]) for r in added}
        if twice:
            raise ValueError(f"more_seeds repeats the trials (seed, lr) {sorted(twice)} of {task} / {scheme} / {variant}")
        values[scheme] = {(r["seed"], r["lr"] if lr == "all" else None): r.get(key) for r in mine + added}
    pairs = {}
    present = [s for s in GRID_SCHEMES if s in values]
    for i, a in enumerate(present):
        for b in present[i + 1:]:
            common = sorted(set(values[a]) & set(values[b]), key=str)
            if common:
                pairs[(a, b)] = paired_difference([values[a][c] for c in common], [values[b][c] for c in common])
    return {"pairs": pairs, "missing": [s for s in GRID_SCHEMES if s not in values]}


def format_group_table(table: Sequence[Mapping], *, task: str | None = None) -> str:
    """A markdown table of :func:`group_table` (one task, or all), missing groups marked.

    Each cell reads ``label mean [low, high]`` with the per-seed points; the last columns
    are the horizon and the prediction's outcome at 2x and 4x.

    Example:
        >>> print(format_group_table(group_table({"rows": []}), task="offset_copy").splitlines()[2])
        | offset_copy | none | plain | missing | | | | | |
    """
    rows = check_rows("table", table, ("task", "scheme", "variant", "status"))

    def cell(r, f):
        lo, hi = r[f"beyond_{f}x_interval"]
        seeds = ", ".join(f"{v:.2f}" for v in r[f"seeds_{f}x"])
        mean = "" if math.isnan(r[f"beyond_{f}x"]) else f" {r[f'beyond_{f}x']:.2f}"
        interval = "" if math.isnan(lo) else f" [{lo:.2f}, {hi:.2f}]"
        return f"{r[f'label_{f}x']}{mean}{interval}" + (f" ({seeds})" if seeds else "")

    lines = ["| task | scheme | variant | fit k/n | beyond 2x | beyond 4x | horizon | predicted 2x/4x | outcome 2x/4x |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if task is not None and r["task"] != task:
            continue
        head = f"| {r['task']} | {r['scheme']} | {r['variant']} |"
        if r["status"] != "done":
            lines.append(f"{head} missing | | | | | |")
            continue
        p = r["predicted"]
        hz = "" if math.isnan(r["horizon"]) else f"{r['horizon']:.0f}"
        lines.append(f"{head} {r['fit']} ({r['fit_label']}) | {cell(r, 2)} | {cell(r, 4)} | {hz} | "
                     f"{p['fit']} {p['beyond_2x'] or '-'}/{p['beyond_4x'] or '-'} | {r['outcome_2x']}/{r['outcome_4x']} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the chapter's verdict table and per-scheme reports

#: How the chapter names the schemes of the grid.
SCHEME_NAMES = {"none": "NoPE", "sinusoidal": "sinusoidal", "rope": "RoPE", "alibi": "ALiBi", "t5": "T5",
                "shaw": "Shaw", "randomized": "randomized"}


def table_row(table: Sequence[Mapping], task: str, scheme: str, variant: str) -> Mapping:
    """The row of one group in a :func:`group_table`.

    Example:
        >>> table_row(group_table({"rows": []}), "offset_copy", "rope", "bos")["status"]
        'missing'
    """
    for r in table:
        if (r["task"], r["scheme"], r["variant"]) == (task, scheme, variant):
            return r
    raise ValueError(f"table has no row for {task} / {scheme} / {variant}")


def _extrapolates(r: Mapping, f: int) -> bool:
    return r["status"] == "done" and r[f"label_{f}x"] not in ("not fit", "cannot run") and not math.isnan(r[f"beyond_{f}x"])


def best_schemes(results: object, table: Sequence[Mapping], task: str, variant: str, *, factor: int = 4,
                 more_seeds: object = None) -> dict:
    """Which scheme extrapolates a task best, and whether a paired test separates it.

    The candidates are the schemes of one task and variant that fit (their mean
    beyond-length accuracy over the fitting seeds, :func:`group_table`). The leader is
    compared with every other candidate pair by pair, a pair being one seed at one
    learning rate (:func:`paired_scheme_differences` with ``lr="all"``: the schemes see the
    same tokens there, and every rate counts, as in the robustness band): a candidate is
    *tied* with the leader when the 95 % t-interval of the paired difference contains 0.
    The pairs are the (seed, rate) trials both schemes have: phase A's 4 seeds at each of
    its 3 rates and, with ``more_seeds`` (phase C's results; pass the same as to
    :func:`group_table`), the added seeds where both schemes have them at the same rate.
    The order comes from ``table``, so a table pooled with phase C ranks on the pooled means.

    Returns:
        ``{"order", "claim", "tied"}``: ``order`` the candidates by mean, highest first;
        ``claim`` is ``"best"`` (the leader is above every other candidate), ``"tied"``
        (some candidate cannot be told apart from it), ``"only"`` (one candidate) or
        ``"none"``; ``tied`` the leader and the candidates tied with it.

    Example:
        >>> best_schemes({"rows": []}, group_table({"rows": []}), "offset_copy", "plain")["claim"]
        'none'
    """
    task = check_choice("task", task, ALL_TASKS)
    variant = check_choice("variant", variant, VARIANTS)
    f = check_int("factor", factor)
    rows = check_rows("table", table, ("task", "scheme", "variant", "status"))
    cands = [r for r in rows if (r["task"], r["variant"]) == (task, variant) and _extrapolates(r, f)]
    order = [r["scheme"] for r in sorted(cands, key=lambda r: -r[f"beyond_{f}x"])]
    if len(order) < 2:
        return {"order": order, "claim": "only" if order else "none", "tied": list(order)}
    pairs = paired_scheme_differences(results, task, variant, key=beyond_key(f), lr="all", more_seeds=more_seeds)["pairs"]
    top, tied = order[0], [order[0]]
    for other in order[1:]:
        d = pairs.get((top, other)) or pairs.get((other, top))
        lo, hi = d["t95"] if d is not None else (math.nan, math.nan)
        if d is None or math.isnan(lo) or lo <= 0 <= hi:
            tied.append(other)
    return {"order": order, "claim": "best" if len(tied) == 1 else "tied", "tied": tied}


def verdict_heat_table(table: Sequence[Mapping], *, factor: int = 4, bests: Mapping | None = None,
                       floors: Mapping[str, float] | None = None):
    """The verdicts as a heat-table: one row per task, one column per scheme, plain and BOS as column groups.

    Each cell: the mean beyond-length accuracy at ``factor`` x over the seeds that fit,
    with its 95 % bootstrap interval; the fit label with ``k/n`` (``"fits 12/12"``,
    ``"split 7/8"``, ``"fails 0/12"``: the seeds that fit) and ``hold j/k`` (of those, the
    seeds whose own retention is at least :data:`HOLD`); the extrapolation
    label (with ``"uncertain"``, and a dagger ``†`` where the row has ``added_seeds``: a
    group pooled with phase C's seeds, :func:`group_table`); ``best`` or ``tied best`` from ``bests`` (the
    :func:`best_schemes` of each ``(task, variant)``; nothing where a scheme is the only
    one that fits, since there is nothing to test it against). A group that fits nowhere reads
    ``not fit``; a group not in the results file ``—``. The shading is the accuracy
    above the task's floor, ``(beyond - floor) / (1 - floor)``, so that the floor is the
    lightest shade whatever the task.

    Example:
        >>> t = verdict_heat_table(group_table({"rows": []}), floors={task: 0.1 for task in ALL_TASKS})
        >>> t.html.count("<td"), "—" in t.markdown
        (98, True)
    """
    from .tables import heat_table

    f = check_int("factor", factor)
    rows = check_rows("table", table, ("task", "scheme", "variant", "status"))
    if floors is None:
        floors = {task: task_floors(task)[beyond_key(f)] for task in ALL_TASKS}
    bests = {} if bests is None else bests
    values, texts = [], []
    for task in ALL_TASKS:
        vrow, trow = [], []
        for variant in VARIANTS:
            best = bests.get((task, variant), {"claim": "none", "tied": []})
            for scheme in GRID_SCHEMES:
                r = table_row(rows, task, scheme, variant)
                if r["status"] != "done":
                    vrow.append(None)
                    trow.append("—")
                    continue
                fit = f"{r['fit_label']} {r['fit']}" + (" †" if r.get("added_seeds") else "")
                if not _extrapolates(r, f):
                    vrow.append(None)
                    trow.append(f"{r[f'label_{f}x']}\n{fit}")
                    continue
                mean, (lo, hi) = r[f"beyond_{f}x"], r[f"beyond_{f}x_interval"]
                k = len(r[f"seeds_{f}x"])
                label = r[f"label_{f}x"].split(" (")[0]
                if scheme in best["tied"] and best["claim"] in ("best", "tied"):
                    label += " · best" if best["claim"] == "best" else " · tied best"
                interval = "" if math.isnan(lo) else f" [{lo:.2f}, {hi:.2f}]"
                vrow.append(min(max((mean - floors[task]) / (1 - floors[task]), 0.0), 1.0))
                trow.append(f"{mean:.2f}{interval}\n{fit} · hold {r[f'held_{f}x']}/{k}\n{label}")
        values.append(vrow)
        texts.append(trow)
    labels = [f"{task.replace('_', ' ')} (floor {floors[task]:.2f})" for task in ALL_TASKS]
    columns = [SCHEME_NAMES[s] for s in GRID_SCHEMES] * len(VARIANTS)
    return heat_table(values, rows=labels, columns=columns, text=texts, corner="task",
                      groups=[("plain", len(GRID_SCHEMES)), ("with BOS token", len(GRID_SCHEMES))])


def scheme_predictions(table: Sequence[Mapping], scheme: str) -> dict:
    """How one scheme's predictions fared: counts and the refuted cases in words.

    Returns ``{"confirmed", "refuted", "open", "tested", "groups", "refuted_cases",
    "refuted_text"}``: ``tested`` is confirmed plus refuted, ``groups`` the scheme's
    groups in the file; ``refuted_text`` lists each refuted case as ``"<task>, <variant>,
    <what>: predicted <p>, observed <o>"`` joined by ``"; "`` (``"none"`` when there is
    none).

    Example:
        >>> scheme_predictions(group_table({"rows": []}), "rope")["refuted_text"]
        'none'
    """
    scheme = check_choice("scheme", scheme, GRID_SCHEMES)
    rows = [r for r in check_rows("table", table, ("task", "scheme", "variant", "status"))
            if r["scheme"] == scheme and r["status"] == "done"]
    counts = {"confirmed": 0, "refuted": 0, "open": 0}
    for r in rows:
        for what in ("fit", "2x", "4x"):
            counts[r[f"outcome_{what}"]] += 1
    cases = [f"{task.replace('_', ' ')}, {_WHERE[variant]}, {what}: predicted {predicted}, observed {observed}"
             for task, variant, what, predicted, observed in _refuted_cases(rows)]
    return {**counts, "tested": counts["confirmed"] + counts["refuted"], "groups": len(rows),
            "refuted_cases": cases, "refuted_text": "; ".join(cases) if cases else "none"}


_WHERE = {"plain": "plain", "bos": "with BOS"}


def _refuted_cases(rows: Sequence[Mapping]) -> list[tuple[str, str, str, str, str]]:
    """``(task, variant, what, predicted, observed)`` of every refuted prediction of ``rows``, in row order."""
    cases = []
    for r in rows:
        for what in ("fit", "2x", "4x"):
            if r[f"outcome_{what}"] == "refuted":
                predicted = r["predicted"]["fit" if what == "fit" else f"beyond_{what}"]
                observed = r["fit_label"] if what == "fit" else r[f"label_{what}"]
                cases.append((r["task"], r["variant"], what, predicted, observed))
    return cases


def refuted_brief(table: Sequence[Mapping], scheme: str) -> str:
    """One scheme's refuted predictions in few words: cases that differ only in the factor or the variant merged.

    Each entry reads ``"<task> <variants>, <what>: <observed> (predicted <p>)"``, e.g.
    ``"fixed retrieve plain and with BOS, 2x and 4x: holds (predicted degrades)"``; entries
    are joined by ``"; "`` in the order of the table (``"none"`` when nothing was refuted).
    The same cases as :func:`scheme_predictions`'s ``refuted_text``, fewer words.

    Example:
        >>> rows = [{"task": "offset_copy", "scheme": "rope", "variant": v, "status": "done",
        ...          "predicted": {"fit": "fits", "beyond_2x": "holds", "beyond_4x": "holds"}, "fit_label": "fits",
        ...          "label_2x": "floor", "label_4x": "floor", "outcome_fit": "confirmed",
        ...          "outcome_2x": "refuted", "outcome_4x": "refuted"} for v in ("plain", "bos")]
        >>> refuted_brief(rows, "rope")
        'offset copy plain and with BOS, 2x and 4x: floor (predicted holds)'
    """
    scheme = check_choice("scheme", scheme, GRID_SCHEMES)
    rows = [r for r in check_rows("table", table, ("task", "scheme", "variant", "status"))
            if r["scheme"] == scheme and r["status"] == "done"]
    whats: dict = {}  # (task, variant, predicted, observed) -> [what]
    for task, variant, what, predicted, observed in _refuted_cases(rows):
        whats.setdefault((task, variant, predicted, observed), []).append(what)
    variants: dict = {}  # (task, whats, predicted, observed) -> [variant]
    for (task, variant, predicted, observed), w in whats.items():
        variants.setdefault((task, tuple(w), predicted, observed), []).append(variant)
    out = [f"{task.replace('_', ' ')} {' and '.join(_WHERE[v] for v in vs)}, {' and '.join(w)}: "
           f"{observed} (predicted {predicted})" for (task, w, predicted, observed), vs in variants.items()]
    return "; ".join(out) if out else "none"


def plot_scheme_curves(ax, results: object, task: str, variant: str, *, train_len: int = 16,
                       more_seeds: object = None) -> dict:
    """Every scheme's mean accuracy by position at 4x (best checkpoint, seeds that fit), the task's floor dotted.

    ``more_seeds`` (phase C's results) adds each group's extra seeds, as :func:`group_curves`.

    Returns ``{"drawn": [schemes], "missing": [schemes not in the file], "not_fit": [schemes]}``;
    a panel with nothing to draw says so on its axes.
    """
    check_axes("ax", ax)
    task = check_choice("task", task, ALL_TASKS)
    variant = check_choice("variant", variant, VARIANTS)
    out: dict = {"drawn": [], "missing": [], "not_fit": []}
    for k, scheme in enumerate(GRID_SCHEMES):
        got = group_curves(results, task, scheme, variant, more_seeds=more_seeds)
        if got["missing"]:
            out["missing" if "not in the results" in got["missing"] else "not_fit"].append(scheme)
            continue
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # positions scored by no trial
            mean = np.nanmean(got["curves"], axis=0)
        ax.plot(np.arange(len(mean)), mean, color=f"C{k}", linewidth=1.3, label=SCHEME_NAMES[scheme])
        out["drawn"].append(scheme)
    ax.axvline(train_len - 0.5, color="black", linewidth=0.8, linestyle="--")
    ax.axhline(task_floors(task)["beyond_4x"], color="gray", linewidth=0.8, linestyle=":")
    ax.set_ylim(-0.02, 1.05)
    if not out["drawn"]:
        _note(ax, "not in the results file yet" if out["missing"] else "no scheme fits")
    return out


# --------------------------------------------------------------------------- mechanisms (analytic) and their figures

def rope_alias_positions(offset: int, max_len: int, *, omega: float = 1.0) -> list[float]:
    """The distances ``offset + 2 pi k / omega`` (``k >= 1``) below ``max_len``: where the pair ``omega`` repeats ``offset``.

    A head that finds its key at distance ``offset`` through the pair of frequency
    ``omega`` gives the same score at every one of these distances.

    Example:
        >>> [round(a, 1) for a in rope_alias_positions(3, 50)]
        [9.3, 15.6, 21.8, 28.1, 34.4, 40.7, 47.0]
    """
    offset = check_int("offset", offset, minimum=0)
    max_len = check_int("max_len", max_len)
    omega = check_real("omega", omega, low=0.0, low_open=True)
    period = 2 * math.pi / omega
    return [offset + k * period for k in range(1, int((max_len - offset) / period) + 1) if offset + k * period < max_len]


def rope_template_score(distances: Sequence[int], offset: int, *, omegas: Sequence[float] | None = None,
                        weights: Sequence[float] | None = None) -> np.ndarray:
    """The score a RoPE head tuned to ``offset`` gives distance ``d``: ``sum_i w_i cos(omega_i (d - offset)) / sum_i w_i``.

    A query equal to its key rotated by ``offset`` scores ``cos(omega_i (d - offset))`` in
    pair ``i``; the weights are the pairs' shares of the score. 1 at ``d = offset`` and
    wherever every weighted pair's phase gap is a multiple of ``2 pi``. ``omegas`` defaults
    to the chapter model's frequencies, :func:`rope_omegas` (1, 0.1, 0.01, 0.001).

    Example:
        >>> s = rope_template_score([3, 9, 41], 3, weights=[1, 0, 0, 0])
        >>> [round(float(v), 2) for v in s]
        [1.0, 0.96, 0.96]
    """
    d = as_finite_array("distances", distances, ndim=1)
    offset = check_int("offset", offset, minimum=0)
    om = rope_omegas() if omegas is None else as_finite_array("omegas", omegas, ndim=1)
    w = np.ones(len(om)) if weights is None else as_finite_array("weights", weights, ndim=1)
    if w.shape != om.shape or w.sum() <= 0:
        raise ValueError(f"weights must be one non-negative number per omega with a positive sum, got {w.tolist()}")
    return (w[None, :] * np.cos(om[None, :] * (d[:, None] - offset))).sum(axis=1) / w.sum()


def t5_buckets(max_len: int = 64, train_len: int = 16, *, bos: bool = False, num_buckets: int = 32,
               max_distance: int = 128) -> dict:
    """The causal T5 bucket of every distance ``0 .. max_len - 1`` and whether training at ``train_len`` reaches it.

    Returns ``{"distance", "bucket", "trained"}`` (arrays); a bucket is trained when some
    distance below ``train_len`` (plus one with BOS) falls in it.

    Example:
        >>> b = t5_buckets()
        >>> sorted(set(b["bucket"][~b["trained"]].tolist()))
        [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26]
    """
    from ..bias import t5_relative_bucket

    max_len, train_len = check_int("max_len", max_len), check_int("train_len", train_len)
    distance = np.arange(max_len)
    bucket = t5_relative_bucket(-torch.from_numpy(distance), bidirectional=False, num_buckets=num_buckets,
                                max_distance=max_distance).numpy()
    seen = set(bucket[: train_len + int(bos)].tolist())
    return {"distance": distance, "bucket": bucket, "trained": np.array([b in seen for b in bucket])}


def sinusoidal_novelty(max_len: int = 64, train_len: int = 16, d_model: int = 32) -> np.ndarray:
    """For every position, the largest cosine similarity of its sinusoidal encoding to a trained position's (``< train_len``).

    1 for the trained positions; below 1 for new ones, and higher where the table comes back
    near a trained row.

    Example:
        >>> s = sinusoidal_novelty(20, 16)
        >>> round(float(s[:16].min()), 9), bool(s[16] < 1)
        (1.0, True)
    """
    from ..sinusoidal import sinusoidal_encoding

    max_len, train_len = check_int("max_len", max_len), check_int("train_len", train_len)
    table = sinusoidal_encoding(max_len, check_int("d_model", d_model))
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    return (unit @ unit[:train_len].T).max(axis=1).clip(max=1.0)


def randomized_spacing(lengths: Sequence[int], max_len: int = 256) -> np.ndarray:
    """The mean gap between ``n`` sorted distinct positions drawn from ``0 .. max_len - 1``: ``(max_len + 1) / (n + 1)``.

    Example:
        >>> [round(float(v), 1) for v in randomized_spacing([16, 32, 64])]
        [15.1, 7.8, 4.0]
    """
    n = as_finite_array("lengths", lengths, ndim=1)
    max_len = check_int("max_len", max_len)
    if (n < 1).any():
        raise ValueError("lengths must be positive")
    if (n > max_len).any():
        raise ValueError(f"lengths must be at most max_len = {max_len} (n distinct positions from 0 .. max_len - 1); "
                         f"got {n.max():g}")
    return (max_len + 1) / (n + 1)


def bos_feature_gap(positions: Sequence[int], offset: int = 1) -> np.ndarray:
    """NoPE + BOS's position feature ``1/(t+2)`` (uniform attention over BOS and ``t+1`` tokens): its gap to ``t - offset``.

    The difference ``1/(t+2-offset) - 1/(t+2)`` a head must resolve to tell position ``t``
    from ``t - offset``; it shrinks as ``offset / t**2``.

    Example:
        >>> [round(float(v), 4) for v in bos_feature_gap([4, 16, 64], 3)]
        [0.1667, 0.0111, 0.0007]
    """
    t = as_finite_array("positions", positions, ndim=1)
    offset = check_int("offset", offset)
    if (t < offset).any():
        raise ValueError(f"positions must be >= offset={offset}")
    return 1 / (t + 2 - offset) - 1 / (t + 2)


def group_curves(results: object, task: str, scheme: str, variant: str, *, checkpoint: str = "best",
                 key: str = "pos_4x", fitting: bool = True, more_seeds: object = None) -> dict:
    """The per-trial per-position curves of one group (at the rates that fit, of the seeds that fit).

    ``more_seeds`` (phase C's results, as in :func:`group_table`) adds the group's extra
    trials; the rates that fit are chosen on phase A's rows alone.

    Returns ``{"curves": array (trials, positions), "trials": [(seed, lr)], "missing": str | None}``;
    ``missing`` says why there is nothing (group not in the file, no seed fits).

    Example:
        >>> group_curves({"rows": []}, "offset_copy", "rope", "plain")["missing"]
        'offset_copy / rope / plain is not in the results file yet'
    """
    task = check_choice("task", task, ALL_TASKS)
    scheme = check_choice("scheme", scheme, GRID_SCHEMES)
    variant = check_choice("variant", variant, VARIANTS)
    rows = [r for r in _rows(results) if (r["task"], r["scheme"], r["variant"]) == (task, scheme, variant)
            and r.get("checkpoint") == checkpoint and r.get("phase", "A") == "A"]
    empty = {"curves": np.zeros((0, 0)), "trials": []}
    if not rows:
        return {**empty, "missing": f"{task} / {scheme} / {variant} is not in the results file yet"}
    added = [] if more_seeds is None else [
        r for r in _results_arg("more_seeds", more_seeds, "alternatives_v2_C.json")["rows"]
        if r.get("phase") == "C" and (r["task"], r["scheme"], r["variant"]) == (task, scheme, variant)
        and r.get("checkpoint") == checkpoint]
    if fitting:
        pool = set(lr_band(rows)["fitting"])
        rows = [r for r in rows if r["lr"] in pool and (r["acc_1x"] or 0) >= FIT]
        added = [r for r in added if (r["acc_1x"] or 0) >= FIT]
        if not rows + added:
            return {**empty, "missing": f"{task} / {scheme} / {variant}: no seed fits"}
    rows = rows + added
    table = np.array([[np.nan if a is None else a for a in r[key]] for r in rows], dtype=float)
    return {"curves": table, "trials": [(r["seed"], r["lr"]) for r in rows], "missing": None}


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=9, wrap=True)


def plot_trajectories(ax, results: object, task: str, scheme: str, variant: str, *, key: str = "beyond_4x") -> dict:
    """``key`` against training step for every trial of a group (one line per trial, coloured by rate), unstable ones dashed.

    Returns ``{"unstable": [(seed, lr)], "missing": str | None}``.
    """
    check_axes("ax", ax)
    rows = [r for r in _rows(results) if (r["task"], r["scheme"], r["variant"]) == (task, scheme, variant)
            and r.get("checkpoint") == "trajectory"]
    if not rows:
        msg = f"{task} / {scheme} / {variant} is not in the results file yet"
        _note(ax, msg)
        return {"unstable": [], "missing": msg}
    trials: dict[tuple, list] = {}
    for r in sorted(rows, key=lambda r: r["steps"]):
        trials.setdefault((r["seed"], r["lr"]), []).append(r)
    colors = {lr: c for lr, c in zip(sorted({lr for _, lr in trials}), ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"))}
    flagged = []
    for (seed, lr), t in trials.items():
        bad = unstable(t, key=key)
        flagged += [(seed, lr)] if bad else []
        ax.plot([r["steps"] for r in t], [r.get(key) for r in t], color=colors[lr], linewidth=0.9,
                linestyle="--" if bad else "-", alpha=0.8)
    for lr, c in colors.items():
        ax.plot([], [], color=c, label=f"lr {lr:g}")
    ax.set_xlabel("training step")
    ax.set_ylabel(key.replace("_", " "))
    ax.set_ylim(-0.02, 1.05)
    ax.legend(fontsize=9, loc="lower right")
    return {"unstable": flagged, "missing": None}


def plot_verdict_heatmap(ax, table: Sequence[Mapping], variant: str, *, factor: int = 4) -> dict:
    """The task x scheme heatmap of mean beyond-length accuracy (fitting seeds), each cell with its k/n; missing cells blank.

    Returns ``{"values": array (tasks, schemes), "missing": [(task, scheme)]}``.
    """
    check_axes("ax", ax)
    variant = check_choice("variant", variant, VARIANTS)
    rows = check_rows("table", table, ("task", "scheme", "variant", "status"))
    key = beyond_key(check_int("factor", factor))
    values = np.full((len(ALL_TASKS), len(GRID_SCHEMES)), np.nan)
    missing = []
    for r in rows:
        if r["variant"] != variant:
            continue
        i, j = ALL_TASKS.index(r["task"]), GRID_SCHEMES.index(r["scheme"])
        if r["status"] != "done":
            missing.append((r["task"], r["scheme"]))
            ax.text(j, i, "\u2013", ha="center", va="center", fontsize=9, color="gray")
            continue
        values[i, j] = r.get(key, math.nan)
        v = "" if math.isnan(values[i, j]) else f"{values[i, j]:.2f}\n"
        ax.text(j, i, f"{v}{r['fit']}", ha="center", va="center", fontsize=9,
                color="white" if not math.isnan(values[i, j]) and values[i, j] > 0.75 else "black")
    ax.imshow(np.ma.masked_invalid(values), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(GRID_SCHEMES)), GRID_SCHEMES, rotation=30)
    ax.set_yticks(range(len(ALL_TASKS)), [t.replace("_", " ") for t in ALL_TASKS])
    ax.set_title(f"{variant}: beyond L at {factor}x; k/n fit", fontsize=10)
    return {"values": values, "missing": missing}


# --------------------------------------------------------------------------- phases B-D: their rules, fixed before the runs

#: Phase B's budget: the trials still improving at 2,000 steps are trained to this many steps.
PHASE_B_STEPS = 5000

#: Phase C's extra seeds (to 10 per group) at the band-centre learning rate.
PHASE_C_SEEDS = (4, 5, 6, 7, 8, 9)

#: Phase D's seeds and its preferred learning rate (the middle of phase A's three).
PHASE_D_SEEDS = (0, 1, 2, 3, 4)
PHASE_D_LR = 3e-3


def _group_rows(rows: Sequence[Mapping], group: tuple, checkpoint: str) -> list[Mapping]:
    return [r for r in rows if (r["task"], r["scheme"], r["variant"]) == tuple(group)
            and r.get("checkpoint") == checkpoint and r.get("phase", "A") == "A"]


#: Phase B's second condition: the held-out loss fell by more than this (nats) over the last 500 steps.
PHASE_B_MIN_DROP = 0.01


def phase_b_members(rows: Sequence[Mapping], group: tuple, *, loss_every: int = 50) -> list[tuple[int, float]]:
    """Phase B's rule on phase A's rows: the ``(seed, lr)`` of the group's trials whose held-out loss still falls.

    A trial qualifies when :func:`still_improving` holds for its held-out losses (the
    final row's ``heldout``, one every ``loss_every`` steps) and the loss fell by more than
    :data:`PHASE_B_MIN_DROP` over the last 500 steps: the relative rule alone also picks
    trials whose loss is already near 0 (a fall from 0.002 to 0.001 is 50 %).

    Example:
        >>> r = {"task": "offset_copy", "scheme": "none", "variant": "plain", "checkpoint": "final", "seed": 0,
        ...      "lr": 1e-3, "heldout": [1.0] * 30 + [0.5] * 10}
        >>> tiny = {**r, "seed": 1, "heldout": [0.002] * 30 + [0.001] * 10}
        >>> phase_b_members([r, tiny], ("offset_copy", "none", "plain"))
        [(0, 0.001)]
    """
    loss_every = check_int("loss_every", loss_every)
    out = []
    for r in sorted(_group_rows(rows, group, "final"), key=lambda r: (r["lr"], r["seed"])):
        pairs = [[loss_every * (i + 1), v] for i, v in enumerate(r["heldout"]) if v is not None]
        before = [v for step, v in pairs if step <= pairs[-1][0] - 500] if pairs else []
        if pairs and still_improving(pairs) and min(before) - pairs[-1][1] > PHASE_B_MIN_DROP:
            out.append((r["seed"], r["lr"]))
    return out


def band_centre(band: Mapping) -> float:
    """The learning rate at the centre of a group's band (:func:`lr_band`): the lower median of the rates that fit.

    With no rate fitting, the chosen one. Phase C adds its seeds there.

    Example:
        >>> band_centre({"fitting": [0.001, 0.003, 0.01], "chosen": 0.01}), band_centre({"fitting": [0.003, 0.01], "chosen": 0.01})
        (0.003, 0.003)
    """
    fitting = sorted(band["fitting"])
    return fitting[(len(fitting) - 1) // 2] if fitting else band["chosen"]


def needs_more_seeds(verdict: Mapping) -> bool:
    """Phase C's rule: a group whose seeds split (fit label ``"split"``) or whose 2x or 4x label is uncertain.

    ``verdict`` is a :func:`grid_verdicts` entry (its ``"pooled"`` verdict is read).

    Example:
        >>> needs_more_seeds({"pooled": {"fit": {"label": "split"}, "beyond_4x": {"uncertain": False}}})
        True
    """
    pooled = verdict["pooled"]
    return pooled["fit"]["label"] == "split" or any(
        v.get("uncertain", False) for k, v in pooled.items() if k.startswith("beyond_"))


_CHANGE_FIELDS = ("fit", "fit_label", "fit_interval", "label_2x", "beyond_2x", "beyond_2x_interval", "held_2x",
                  "seeds_2x", "label_4x", "beyond_4x", "beyond_4x_interval", "held_4x", "seeds_4x", "horizon")


def phase_c_changes(grid_a: object = None, grid_c: object = None, *, checkpoint: str = "best") -> list[dict]:
    """What phase C's extra seeds change: one row per group phase C added seeds to, in plan order.

    ``grid_a`` and ``grid_c`` are the results of phases A and C (a path, a results dict, or
    ``None`` for the shipped ``alternatives_v2.json`` and ``alternatives_v2_C.json``).
    *Before* is the group's row of :func:`group_table` on phase A alone, *after* the same
    with ``more_seeds=grid_c`` (phase A's rows at the fitting rates pooled with phase C's).

    Returns:
        A list of dicts with ``task``, ``scheme``, ``variant``, ``lr`` (the rate of the
        added seeds), ``added_seeds``; for each of ``fit`` (``"k/n"``), ``fit_label``,
        ``fit_interval``, ``label_<f>x``, ``beyond_<f>x``, ``beyond_<f>x_interval``,
        ``held_<f>x``, ``seeds_<f>x`` (``f`` = 2, 4) and ``horizon``, the value before and
        after as ``<name>_before`` and ``<name>_after``; ``changes`` (which of ``"fit"``,
        ``"2x"`` and ``"4x"`` changed its label, the label's text compared whole, so
        ``"uncertain (degrades)"`` to ``"uncertain (holds)"`` is a change), ``kinds`` (for
        each of them ``"resolved"``: uncertain before, not after; ``"became uncertain"``;
        ``"still uncertain"``: uncertain on the other side; or ``"relabelled"``: one
        decided label to another) and ``changed`` (any label changed).

    Example:
        >>> a = [{"task": "offset_copy", "scheme": "rope", "variant": "plain", "seed": s, "lr": 3e-3,
        ...       "steps": 2000, "checkpoint": "best", "acc_1x": 1.0 if s else 0.5, "heldout_loss": 0.1,
        ...       "beyond_2x": 0.95, "beyond_4x": 0.5} for s in range(4)]
        >>> c = [{**a[1], "seed": s, "phase": "C"} for s in range(4, 10)]
        >>> row = phase_c_changes({"rows": a}, {"rows": c})[0]
        >>> row["fit_before"], row["fit_after"], row["fit_label_before"], row["changes"], row["kinds"], row["changed"]
        ('3/4', '9/10', 'split', [], {}, False)
        >>> phase_c_changes({"rows": a}, {"rows": []})
        []
    """
    checkpoint = check_choice("checkpoint", checkpoint, ("best", "final"))
    a = _results_arg("grid_a", grid_a, "alternatives_v2.json")
    c = _results_arg("grid_c", grid_c, "alternatives_v2_C.json")
    before = group_table(a, checkpoint=checkpoint)
    after = group_table(a, checkpoint=checkpoint, more_seeds=c)
    out = []
    for b, p in zip(before, after):
        if p["status"] != "done" or not p["added_seeds"]:
            continue
        row = {k: p[k] for k in ("task", "scheme", "variant")}
        row.update(lr=p["added_lr"], added_seeds=p["added_seeds"])
        for name in _CHANGE_FIELDS:
            row[f"{name}_before"], row[f"{name}_after"] = b[name], p[name]
        row["changes"] = [what for what, name in (("fit", "fit_label"), ("2x", "label_2x"), ("4x", "label_4x"))
                          if b[name] != p[name]]
        row["kinds"] = {what: _change_kind(row[f"{name}_before"], row[f"{name}_after"])
                        for what, name in (("fit", "fit_label"), ("2x", "label_2x"), ("4x", "label_4x"))
                        if what in row["changes"]}
        row["changed"] = bool(row["changes"])
        out.append(row)
    return out


def _change_kind(before: str, after: str) -> str:
    was, now = before.startswith("uncertain"), after.startswith("uncertain")
    return ("still uncertain" if now else "resolved") if was else "became uncertain" if now else "relabelled"


def _verdict_text(label: str, mean: float, interval: tuple[float, float], *, short: bool) -> str:
    if short or math.isnan(mean):
        return label
    return f"{label} {mean:.2f}{_interval_text(interval)}"


def format_phase_c_changes(changes: Sequence[Mapping], *, compact: bool = False) -> str:
    """A Markdown table of :func:`phase_c_changes`: each group's verdicts before → after the added seeds.

    Columns: the group (scheme, task, variant); fit ``k/n`` and label; the 2x and 4x
    labels with the mean over the seeds that fit and its 95 % bootstrap interval, before →
    after; a label that changed is in bold. ``compact`` keeps the groups that changed a
    label, and the labels alone (with the ``k/n`` of fit), for a narrow column.

    Example:
        >>> row = {"task": "far_retrieve", "scheme": "t5", "variant": "bos", "lr": 0.003, "changed": True,
        ...        "fit_before": "12/12", "fit_after": "18/18", "fit_label_before": "fits", "fit_label_after": "fits",
        ...        "label_2x_before": "holds", "label_2x_after": "holds", "beyond_2x_before": 0.95,
        ...        "beyond_2x_after": 0.94, "beyond_2x_interval_before": (0.93, 0.97),
        ...        "beyond_2x_interval_after": (0.93, 0.96), "label_4x_before": "uncertain (degrades)",
        ...        "label_4x_after": "degrades", "beyond_4x_before": 0.5, "beyond_4x_after": 0.45,
        ...        "beyond_4x_interval_before": (0.2, 0.8), "beyond_4x_interval_after": (0.35, 0.55)}
        >>> print(format_phase_c_changes([row], compact=True).splitlines()[2].replace("\u00a0", " "))
        | T5 + BOS, far retrieve | fits 12/12 → 18/18 | holds → holds | uncertain (degrades) → **degrades** |
    """
    from .tables import markdown_table

    rows = check_rows("changes", changes, ("task", "scheme", "variant", "changed", "fit_before", "fit_after"),
                      nonempty=False)
    if not isinstance(compact, bool):
        raise TypeError(f"compact must be a bool, got {type(compact).__name__}")
    arrow = "\u00a0→\u00a0" if compact else " → "
    body = []
    for r in rows:
        if compact and not r["changed"]:
            continue
        group = SCHEME_NAMES[r["scheme"]] + (" + BOS" if r["variant"] == "bos" else "") + ", " + r["task"].replace("_", " ")
        fit_b, fit_a = r["fit_label_before"], r["fit_label_after"]
        fit = (f"{fit_b} {r['fit_before']}{arrow}" + (f"{r['fit_after']}" if fit_a == fit_b else f"**{fit_a}** {r['fit_after']}"))
        cells = [group, fit]
        for f in (2, 4):
            b, a = r[f"label_{f}x_before"], r[f"label_{f}x_after"]
            before = _verdict_text(b, r[f"beyond_{f}x_before"], r[f"beyond_{f}x_interval_before"], short=compact)
            after = _verdict_text(a, r[f"beyond_{f}x_after"], r[f"beyond_{f}x_interval_after"], short=compact)
            if a != b:
                after = after.replace(a, f"**{a}**", 1)
            cells.append(f"{before}{arrow}{after}")
        if not compact:
            cells.insert(1, f"{r['lr']:g}")
        body.append(cells)
    header = ["group", "fit", "2x", "4x"] if compact else ["group", "rate", "fit", "beyond 2x", "beyond 4x"]
    return markdown_table(header, body)


def ablation_lr(band: Mapping) -> float:
    """Phase D's learning rate for a group: :data:`PHASE_D_LR` if it fits in phase A, else the fitting rate nearest it.

    "Nearest" is in log scale, ties to the smaller rate; :data:`PHASE_D_LR` when no rate fits.

    Example:
        >>> ablation_lr({"fitting": [0.001, 0.003]}), ablation_lr({"fitting": [0.001, 0.01]}), ablation_lr({"fitting": []})
        (0.003, 0.001, 0.003)
    """
    fitting = sorted(band["fitting"])
    if not fitting or PHASE_D_LR in fitting:
        return PHASE_D_LR
    return min(fitting, key=lambda lr: (abs(math.log(lr / PHASE_D_LR)), lr))


def rope_base_modifier(base: float):
    """A ``modify`` for :func:`run_grid_pack`: the RoPE model's rotary table with ``base`` instead of 10,000.

    Example:
        >>> with seeded(0):
        ...     m = GridProtocol().run_config("plain", 1e-3).model("rope")
        >>> rope_base_modifier(100.0)(m)
        >>> round(float(m.positional.inv_freq[1]), 4)
        0.3162
    """
    base = check_real("base", base, low=1.0, low_open=True)

    def modify(model: nn.Module) -> None:
        from ..rope.module import RotaryEmbedding

        if getattr(model, "scheme", None) != "rope":
            raise ValueError(f"rope_base_modifier needs a RoPE model, got scheme {getattr(model, 'scheme', None)!r}")
        model.positional = RotaryEmbedding(model.d_model // model.n_heads, base=base, layout="interleaved")

    return modify


#: Phase D's ablations: name -> (protocol overrides, RoPE base or None, schemes, variants, tasks).
ABLATIONS: dict[str, dict] = {
    "depth4": {"overrides": {"n_layers": 4}, "rope_base": None, "schemes": ("none", "alibi"), "variants": ("plain",),
               "tasks": ("far_retrieve", "long_offset_copy", "associative_recall", "separator_copy", "latest_marker")},
    "rope_base100": {"overrides": {}, "rope_base": 100.0, "schemes": ("rope",), "variants": VARIANTS,
                     "tasks": ("offset_copy", "long_offset_copy", "fixed_retrieve", "associative_recall")},
    "rope_2heads": {"overrides": {"n_heads": 2}, "rope_base": None, "schemes": ("rope",), "variants": VARIANTS,
                    "tasks": ("offset_copy", "long_offset_copy", "fixed_retrieve", "associative_recall")},
    "alibi_8heads": {"overrides": {"n_heads": 8}, "rope_base": None, "schemes": ("alibi",), "variants": VARIANTS,
                     "tasks": ("far_retrieve", "offset_copy", "long_offset_copy", "associative_recall")},
}


def ablation_protocol(ablation: str, protocol: GridProtocol | None = None) -> GridProtocol:
    """The protocol of one phase-D ablation: ``protocol`` (default the grid's) with the ablation's overrides.

    Example:
        >>> ablation_protocol("depth4").n_layers, ablation_protocol("alibi_8heads").n_heads
        (4, 8)
    """
    import dataclasses

    ablation = check_choice("ablation", ablation, tuple(ABLATIONS))
    protocol = GridProtocol() if protocol is None else protocol
    return dataclasses.replace(protocol, **ABLATIONS[ablation]["overrides"])


def ablation_units() -> list[tuple[str, str, str, str]]:
    """Every phase-D unit ``(ablation, task, scheme, variant)``, in :data:`ABLATIONS` order.

    Example:
        >>> len(ablation_units()), ablation_units()[0]
        (34, ('depth4', 'far_retrieve', 'none', 'plain'))
    """
    return [(name, task, scheme, variant) for name, a in ABLATIONS.items() for scheme in a["schemes"]
            for task in a["tasks"] for variant in a["variants"]]


def ablation_first_losses(config: Mapping, seed: int, n: int, *, ablation: str, task: str, scheme: str, variant: str,
                          lr: float) -> list[float]:
    """:func:`first_losses` of a phase-D trial: the ablation's overrides and RoPE base applied (its fingerprint).

    Example:
        >>> len(ablation_first_losses(GridProtocol().to_dict(), 0, 2, ablation="rope_base100", task="offset_copy",
        ...                           scheme="rope", variant="plain", lr=3e-3))
        2
    """
    ablation = check_choice("ablation", ablation, tuple(ABLATIONS))
    a = ABLATIONS[ablation]
    base = GridProtocol.from_dict({k: v for k, v in config.items() if k != "length_rule"})
    protocol = ablation_protocol(ablation, base)
    n = check_int("n", n)
    task, scheme, variant, members, protocol = _checked(task, scheme, variant, [(seed, lr)], protocol)
    modify = rope_base_modifier(a["rope_base"]) if a["rope_base"] else None
    models, streams, schedule = _pack(task, scheme, variant, members, protocol, modify)
    return fit_batched(models, streams, _pack_loss, lrs=[lr], steps=n, schedule=schedule)[0].train_loss


# --------------------------------------------------------------------------- phase D read: each ablation beside phase A

#: Marks an ablation prediction "holds wherever the phase-A counterpart holds" (nothing predicted elsewhere).
AS_PHASE_A = "as phase A"

#: Phase D's predictions, written with phase A's before any ablation ran (experiments/README.md,
#: "Ablations (phase D), predicted now"), a dict from ``(ablation, task, scheme, variant)`` to
#: ``{what: predicted}``. ``what`` is ``"horizon"`` (the fitting seeds' :func:`horizon` lies in the
#: closed range ``(low, high)``), ``"fit"`` (the fit label) or ``"beyond_<f>x"`` (the
#: extrapolation label; :data:`AS_PHASE_A`: ``"holds"`` where the phase-A counterpart holds).
#: The README states the depth and 8-head predictions as a hypothesis and, in brackets, the
#: outcome that refutes it and is expected ("refuted: still fails", "refuted: degrades as with
#: 4"); what is stored is that expected outcome: depth 4 does not make the far pointers fit,
#: and 8 ALiBi heads extrapolate as 4 do.
ABLATION_PREDICTIONS: dict[tuple[str, str, str, str], dict[str, object]] = {
    **{(a, "offset_copy", "rope", v): {"horizon": (16, 22)} for a in ("rope_base100", "rope_2heads") for v in VARIANTS},
    **{("depth4", t, s, "plain"): {"fit": "fails"} for s in ("none", "alibi") for t in ("far_retrieve", "long_offset_copy")},
    **{("alibi_8heads", t, "alibi", v): {"beyond_2x": AS_PHASE_A, "beyond_4x": AS_PHASE_A}
       for t in ABLATIONS["alibi_8heads"]["tasks"] for v in VARIANTS},
    ("alibi_8heads", "far_retrieve", "alibi", "bos"): {"beyond_2x": AS_PHASE_A, "beyond_4x": "degrades"},
}

#: How the chapter names the ablations (the depth ablation after its scheme: "NoPE, 4 layers").
ABLATION_NAMES = {"depth4": "4 layers", "rope_base100": "RoPE, base 100", "rope_2heads": "RoPE, 2 heads",
                  "alibi_8heads": "ALiBi, 8 heads"}

#: Share of the fitting seeds a horizon prediction needs; held when the Wilson interval of that share lies above it.
HORIZON_SHARE = 0.5


def _results_arg(name: str, value: object, default: str) -> dict:
    """``load_grid`` of an argument, with errors naming the argument."""
    from .resources import resource_path

    try:
        return load_grid(resource_path(default) if value is None else value)
    except TypeError as err:
        raise TypeError(f"{name} must be a path, a results dict or None, got {type(value).__name__}") from err
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from err


def _unit_summary(rows: Sequence[Mapping], floors: Mapping[str, float], train_len: int,
                  factors: tuple[int, ...]) -> dict:
    """One unit's rows (one checkpoint, one rate): fit k/n, hold k/n per factor with Wilson intervals, horizons."""
    rows = sorted(rows, key=lambda r: r["seed"])
    v = group_verdict(rows, floors, factors=factors)
    fit = v["fit"]
    fitting = [r for r in rows if (r["acc_1x"] or 0.0) >= FIT]
    horizons = [horizon(r[pos_key(max(factors))], train_len) for r in fitting if r.get(pos_key(max(factors)))]
    out = {"seeds": [r["seed"] for r in rows], "fit": f"{fit['k']}/{fit['n']}", "fit_k": fit["k"], "fit_n": fit["n"],
           "fit_label": fit["label"], "fit_interval": fit["interval"], "horizons": horizons,
           "horizon": float(np.median(horizons)) if horizons else math.nan}
    for f in factors:
        e = v[beyond_key(f)]
        n = e["n"] if e["label"] not in ("not fit", "cannot run") else 0
        out.update({f"label_{f}x": e["label"], beyond_key(f): e["beyond"], f"{beyond_key(f)}_interval": e["beyond_interval"],
                    f"held_{f}x": e["held"], f"n_{f}x": n,
                    f"hold_{f}x_interval": wilson_interval(e["held"], n) if n else (math.nan, math.nan)})
    return out


def _alias_drops(rows: Sequence[Mapping], task: str, variant: str, protocol: GridProtocol, base: float) -> dict:
    """RoPE offset tasks: each fitting seed's falls (:func:`curve_drops`) against the untrained aliases."""
    offset = _ALIAS_OFFSETS[task]
    aliases = sorted({a["position"] for a in rope_alias_table(offset, protocol, base=base, bos=variant == "bos")
                      if a["position"] >= protocol.train_len})
    key = pos_key(max(protocol.eval_factors))
    drops = [curve_drops(r[key], protocol.train_len) for r in sorted(rows, key=lambda r: r["seed"])
             if (r["acc_1x"] or 0.0) >= FIT and r.get(key)]
    on_alias = sum(bool(d) and all(t in aliases for t in d) for d in drops)
    return {"aliases": aliases, "drops": drops, "on_alias": on_alias, "n": len(drops)}


def _resolve(unit: tuple, baseline: Mapping | None) -> list[tuple[str, object]]:
    """A unit's predictions as ``(what, predicted)``, :data:`AS_PHASE_A` resolved against phase A's counterpart."""
    out = []
    for what, predicted in ABLATION_PREDICTIONS.get(unit, {}).items():
        if predicted == AS_PHASE_A:
            if baseline is None or baseline[f"label_{what[7:]}"] != "holds":
                continue
            predicted = "holds"
        out.append((what, predicted))
    return out


def _predicted_text(what: str, predicted: object) -> str:
    if what == "horizon":
        return f"horizon {predicted[0]}-{predicted[1]}"
    return str(predicted) if what == "fit" else f"{predicted} at {what[7:]}"


def _judge(what: str, predicted: object, ablated: Mapping) -> dict:
    """One prediction's outcome: ``held``, ``refuted``, ``uncertain`` or ``not fit`` (nothing fits to test it)."""
    out = {"what": what, "predicted": _predicted_text(what, predicted)}
    if what == "horizon":
        low, high = predicted
        h = ablated["horizons"]
        k, n = sum(low <= x <= high for x in h), len(h)
        out.update(k=k, n=n, observed=f"{k}/{n} in {low}-{high} (" + ", ".join(map(str, h)) + ")" if n else "no seed fits")
        if not n:
            return {**out, "interval": (math.nan, math.nan), "outcome": "not fit"}
        lo, hi = wilson_interval(k, n)
        outcome = "held" if lo > HORIZON_SHARE else "refuted" if hi < HORIZON_SHARE else "uncertain"
        return {**out, "interval": (lo, hi), "outcome": outcome}
    if what == "fit":
        label = ablated["fit_label"]
        return {**out, "observed": f"{label} {ablated['fit']}", "k": ablated["fit_k"], "n": ablated["fit_n"],
                "interval": ablated["fit_interval"], "outcome": "held" if label == predicted else "refuted"}
    f = what[7:]
    label = ablated[f"label_{f}"]
    outcome = {"confirmed": "held", "refuted": "refuted"}.get(prediction_outcome(str(predicted), label))
    if outcome is None:
        outcome = "uncertain" if label.startswith("uncertain") else "not fit"
    k, n = ablated[f"held_{f}"], ablated[f"n_{f}"]
    return {**out, "observed": f"{label} ({k}/{n} hold)" if n else label, "k": k, "n": n,
            "interval": ablated[f"hold_{f}_interval"], "outcome": outcome}


def _unit_name(ablation: str, scheme: str) -> str:
    return f"{SCHEME_NAMES[scheme]}, {ABLATION_NAMES[ablation]}" if ablation == "depth4" else ABLATION_NAMES[ablation]


def ablation_table(results_d: object = None, results_a: object = None, *, checkpoint: str = "best") -> list[dict]:
    """Every phase-D ablation unit beside its phase-A counterpart, with its prediction's outcome.

    The counterpart is phase A's group of the same task, scheme and variant at the unit's
    learning rate (``ablation_lr`` of phase A's band, the rate the ablation ran at), so
    the two share the rate and the seeds 0-3 (the ablation adds seed 4). Both sides are
    summarised alike: fit ``k/n`` with its Wilson interval, per factor ``f`` the
    extrapolation label (:func:`extrapolation_label`), the mean beyond-length accuracy with
    its bootstrap interval, ``held_<f>x`` of the ``n_<f>x`` fitting seeds that keep at
    least :data:`HOLD`, with its Wilson interval, and the horizons of the fitting seeds
    (:func:`horizon` on the 4x curve) with their median.

    Predictions come from :data:`ABLATION_PREDICTIONS`. A horizon prediction counts the
    fitting seeds whose horizon lies in its range: ``held`` when the Wilson interval of
    that share lies above :data:`HORIZON_SHARE`, ``refuted`` when below, ``uncertain`` when
    it crosses; a fit prediction is refuted by another fit label; an extrapolation
    prediction follows :func:`prediction_outcome` (``uncertain`` where the label is).

    Args:
        results_d: phase D's results (path, dict or ``None``: the shipped
            ``alternatives_v2_D.json``), partial or whole.
        results_a: phase A's (``None``: the shipped ``alternatives_v2.json``).
        checkpoint: ``"best"`` (lowest held-out loss) or ``"final"``.

    Returns:
        One dict per unit of ``ablation_units``, in that order: ``ablation``, ``task``,
        ``scheme``, ``variant``, ``name`` (as the chapter says it), ``status`` (``"done"`` or
        ``"not in the results yet"``), ``lr``, ``baseline`` (phase A's summary; ``None``
        where phase A lacks the group), ``predictions`` (one dict per prediction:
        ``what``, ``predicted`` (text); for a done unit also ``observed``, ``k``, ``n``,
        ``interval`` and ``outcome``) and ``outcome`` (``"refuted"`` if any prediction is,
        else ``"uncertain"``, ``"held"``, ``"not fit"``; ``"none"`` without a prediction;
        the status for a unit not in the results). A done unit adds ``ablated`` (its
        summary) and, for the RoPE ablations on the offset tasks, ``alias`` and
        ``alias_baseline``: each fitting seed's falls (:func:`curve_drops`) against the
        untrained aliases (:func:`rope_alias_table` at the model's base and head width),
        ``on_alias`` of ``n`` seeds whose every fall is on one.

    Example:
        >>> t = ablation_table({"rows": []}, {"rows": []})
        >>> len(t), t[0]["status"], t[0]["name"]
        (34, 'not in the results yet', 'NoPE, 4 layers')
    """
    checkpoint = check_choice("checkpoint", checkpoint, ("best", "final"))
    d = _results_arg("results_d", results_d, "alternatives_v2_D.json")
    a = _results_arg("results_a", results_a, "alternatives_v2.json")
    rows_d = [r for r in d["rows"] if r.get("phase") == "D"]
    if d["rows"] and not rows_d:
        raise ValueError("results_d holds no phase-D row (rows with phase 'D' and an 'ablation'): pass phase D's file")
    rows_a = [r for r in a["rows"] if r.get("phase", "A") == "A"]
    if a["rows"] and not rows_a:
        raise ValueError("results_a holds no phase-A row: pass phase A's file (alternatives_v2.json)")
    check_rows("results_d rows", rows_d, ("ablation", "task", "scheme", "variant", "seed", "lr", "checkpoint", "acc_1x"),
               nonempty=False)
    check_rows("results_a rows", rows_a, ("task", "scheme", "variant", "seed", "lr", "checkpoint", "acc_1x",
                                          "heldout_loss"), nonempty=False)
    protocol = grid_protocol(a) if a["rows"] else GridProtocol()
    factors = tuple(protocol.eval_factors[1:])
    out = []
    for unit in ablation_units():
        ablation, task, scheme, variant = unit
        mine = [r for r in rows_d if (r["ablation"], r["task"], r["scheme"], r["variant"]) == unit
                and r["checkpoint"] == checkpoint]
        group = [r for r in rows_a if (r["task"], r["scheme"], r["variant"]) == (task, scheme, variant)
                 and r["checkpoint"] == checkpoint]
        lr = mine[0]["lr"] if mine else ablation_lr(lr_band(group)) if group else PHASE_D_LR
        floors = task_floors(task, protocol)
        theirs = [r for r in group if r["lr"] == lr]
        baseline = _unit_summary(theirs, floors, protocol.train_len, factors) if theirs else None
        predictions = _resolve(unit, baseline)
        row: dict = {"ablation": ablation, "task": task, "scheme": scheme, "variant": variant,
                     "name": _unit_name(ablation, scheme), "lr": lr, "baseline": baseline}
        if not mine:
            out.append({**row, "status": "not in the results yet", "outcome": "not in the results yet",
                        "predictions": [{"what": w, "predicted": _predicted_text(w, p)} for w, p in predictions]})
            continue
        ablated = _unit_summary(mine, floors, protocol.train_len, factors)
        judged = [_judge(what, p, ablated) for what, p in predictions]
        outcomes = {j["outcome"] for j in judged}
        overall = next((o for o in ("refuted", "uncertain", "held", "not fit") if o in outcomes), "none")
        row.update(status="done", ablated=ablated, predictions=judged, outcome=overall)
        if scheme == "rope" and task in _ALIAS_OFFSETS:
            base = ABLATIONS[ablation]["rope_base"] or 10000.0
            row["alias"] = _alias_drops(mine, task, variant, ablation_protocol(ablation, protocol), base)
            if theirs:
                row["alias_baseline"] = _alias_drops(theirs, task, variant, protocol, 10000.0)
        out.append(row)
    return out


def _k_of(summary: Mapping | None, f: int) -> str:
    if summary is None:
        return "—"
    if not summary[f"n_{f}x"]:
        return "not fit"
    return f"{summary[f'held_{f}x']}/{summary[f'n_{f}x']}"


def _interval_text(interval: tuple[float, float]) -> str:
    return "" if math.isnan(interval[0]) else f" [{interval[0]:.2f}, {interval[1]:.2f}]"


_SHORT_WHERE = {"plain": "", "bos": ", BOS"}


def _outcome_cell(preds: Sequence[Mapping]) -> str:
    """``held (0/5)`` (the seeds that fit, or fall in the range); labels first: ``2x holds 4/5, 4x degrades 0/5: held``."""
    beyond = [p for p in preds if p["what"].startswith("beyond_")]
    cells = [f"{p['outcome']} ({p['k']}/{p['n']})" for p in preds if p not in beyond]
    if beyond:
        labels = ", ".join(f"{p['what'][7:]} {p['observed'].split(' (')[0]} {p['k']}/{p['n']}" for p in beyond)
        outcomes = [p["outcome"] for p in beyond]
        overall = next((o for o in ("refuted", "uncertain", "not fit") if o in outcomes), "held")
        cells.append(f"{labels}: {overall}")
    return "; ".join(cells)


def format_ablation_table(table: Sequence[Mapping], *, compact: bool = False) -> str:
    """A Markdown table of :func:`ablation_table`: phase A's counterpart → the ablation, cell by cell.

    Columns: the ablation, task and variant; fit ``k/n``; the seeds that hold at 2x and at
    4x (``k/n`` of those that fit); the median horizon; the prediction, what was observed
    and the outcome with the Wilson interval of the observed ``k/n``. ``compact`` keeps the
    units that carry a prediction, names each ablation once and keeps fit, horizon and
    the outcome with its ``k/n`` (the seeds that fit, for a fit prediction; that fall in the
    range, for a horizon; the observed labels and the seeds that hold, for extrapolation
    labels), for a narrow column. A unit not in the results reads so.

    Example:
        >>> print(format_ablation_table(ablation_table({"rows": []}, {"rows": []})).splitlines()[2])
        | NoPE, 4 layers | far retrieve, plain | not in the results yet |  |  |  | fails |  |  |
        >>> print(format_ablation_table(ablation_table({"rows": []}, {"rows": []}), compact=True).splitlines()[2])
        | NoPE, 4 layers | far retrieve | — | — | not in the results yet |
    """
    from .tables import markdown_table

    rows = check_rows("table", table, ("ablation", "task", "variant", "status", "name", "predictions"))
    if not isinstance(compact, bool):
        raise TypeError(f"compact must be a bool, got {type(compact).__name__}")
    body = []
    last = None
    for r in rows:
        preds = r["predictions"]
        if compact and not preds:
            continue
        a, b = r.get("baseline"), r.get("ablated")

        def pair(fn):  # no break around the arrow in the compact table
            arrow = "\u00a0→\u00a0" if compact else " → "
            return f"{'—' if a is None else fn(a)}{arrow}{fn(b)}"

        def horizon_of(s):
            return "—" if math.isnan(s["horizon"]) else f"{s['horizon']:.0f}"

        if compact:
            name = "" if r["name"] == last else r["name"]
            last = r["name"]
            group = r["task"].replace("_", " ") + _SHORT_WHERE[r["variant"]]
            done = r["status"] == "done"
            horizons = pair(horizon_of) if done else "—"
            body.append([name, group, pair(lambda s: s["fit"]) if done else "—",
                         "—" if horizons == "—\u00a0→\u00a0—" else horizons,
                         _outcome_cell(preds) if done else r["status"]])
            continue
        predicted = "; ".join(p["predicted"] for p in preds) or "—"
        head = [r["name"], f"{r['task'].replace('_', ' ')}, {_WHERE[r['variant']]}"]
        if r["status"] != "done":
            body.append(head + [r["status"], "", "", "", predicted, "", ""])
            continue
        body.append(head + [pair(lambda s: s["fit"]), pair(lambda s: _k_of(s, 2)), pair(lambda s: _k_of(s, 4)),
                            pair(horizon_of), predicted, "; ".join(p["observed"] for p in preds) or "—",
                            "; ".join(p["outcome"] + _interval_text(p["interval"]) for p in preds) or "—"])
    if compact:
        return markdown_table(["ablation", "group", "fit", "horizon", "outcome"], body)
    header = ["ablation", "task", "fit", "hold 2x", "hold 4x", "horizon", "predicted", "observed", "outcome"]
    return markdown_table(header, body)


def rope_extended_frequencies(method: str, factor: float = 4.0, original: int = 16, head_dim: int = 8) -> np.ndarray:
    """The chapter model's RoPE frequencies after a context extension (``posenc.rope.scaling.extension``).

    Example:
        >>> [round(float(w), 4) for w in rope_extended_frequencies("yarn")]
        [1.0, 0.025, 0.0025, 0.0003]
    """
    from ..rope.module import RotaryEmbedding
    from ..rope.scaling import extension

    rope = RotaryEmbedding(check_int("head_dim", head_dim), layout="interleaved",
                           scaling=extension(method, factor, check_int("original", original)))
    return rope.inv_freq.double().numpy()


def rope_extended_score(distances: Sequence[int], offset: int, method: str, *, factor: float = 4.0,
                        original: int = 16, weights: Sequence[float] | None = None) -> np.ndarray:
    """:func:`rope_template_score` of a head trained to find ``offset``, read with extended frequencies.

    The head matches the phases ``omega_i * offset`` it was trained on; after the extension
    pair ``i`` turns at ``omega'_i``, so the score at distance ``d`` is
    ``sum_i w_i cos(omega'_i d - omega_i offset) / sum_i w_i``. NTK-aware and YaRN keep the
    fastest pair (``omega = 1``), so its aliases stay where they were; position
    interpolation slows it by ``factor`` and moves the head's peak (``offset * factor``).

    Example:
        >>> d = np.arange(64)
        >>> [int(d[np.argmax(rope_extended_score(d, 3, m, weights=[1, 0, 0, 0]))]) for m in ("none", "yarn", "pi")]
        [3, 3, 12]
    """
    d = as_finite_array("distances", distances, ndim=1)
    offset = check_int("offset", offset, minimum=0)
    trained = rope_omegas()
    new = rope_extended_frequencies(method, factor, original, head_dim=2 * len(trained))
    w = np.ones(len(trained)) if weights is None else as_finite_array("weights", weights, ndim=1)
    if w.shape != trained.shape or w.sum() <= 0:
        raise ValueError(f"weights must be one non-negative number per pair with a positive sum, got {w.tolist()}")
    return (w[None, :] * np.cos(new[None, :] * d[:, None] - trained[None, :] * offset)).sum(axis=1) / w.sum()


# =========================================================================== mechanism checks on the saved rows
# Issue 30, item 4 (and item 1's extrapolation horizon): each check reads the saved rows of
# phase A (and the encodings themselves) and returns the numbers a test and the chapter can
# assert; each figure function draws one check's dict and computes nothing of its own.
# Appended as one section so that it merges cleanly with edits above; it changes nothing
# that the grid's training path runs.


def _protocol_or_default(protocol: GridProtocol | None) -> GridProtocol:
    if protocol is None:
        return GridProtocol()
    if not isinstance(protocol, GridProtocol):
        raise TypeError(f"protocol must be a GridProtocol, got {type(protocol).__name__}")
    return protocol


_PHASE_KEYS = frozenset({"length_rule", "rule", "ablations", "seeds_c", "seeds_d"})


def grid_protocol(results: object) -> GridProtocol:
    """The :class:`GridProtocol` a results file was run with (its stored ``config``; the defaults if it has none).

    Works for every phase's file: the keys that describe a phase's rule rather than a
    setting (``length_rule``, ``rule``, ``ablations``, and the extra seeds ``seeds_c`` and
    ``seeds_d`` of phases C and D) are left out.

    Example:
        >>> grid_protocol({"rows": [], "config": {"train_len": 16, "n_heads": 4, "d_model": 32}}).d_model // 4
        8
    """
    data = load_grid(results)
    config = data.get("config")
    if not config:
        return GridProtocol()
    if not isinstance(config, Mapping):
        raise TypeError(f"results['config'] must be a dict of GridProtocol settings, got {type(config).__name__}")
    try:
        # the phases' own keys (the length rule, phase B/C's selection rule, phase D's ablations) are not settings
        protocol = GridProtocol.from_dict({k: v for k, v in config.items() if k not in _PHASE_KEYS})
        protocol.validate()
    except (TypeError, ValueError) as err:
        raise ValueError(f"results['config'] is not a GridProtocol: {err}") from None
    return protocol


def rope_omegas(protocol: GridProtocol | None = None, *, base: float = 10000.0) -> np.ndarray:
    """RoPE's frequencies in the protocol's model: ``base ** (-2 i / head_dim)``, one per pair (shape ``(head_dim // 2,)``).

    Example:
        >>> [round(float(w), 3) for w in rope_omegas()], [round(float(w), 3) for w in rope_omegas(base=100.0)]
        ([1.0, 0.1, 0.01, 0.001], [1.0, 0.316, 0.1, 0.032])
    """
    protocol = _protocol_or_default(protocol)
    base = check_real("base", base, low=1.0, low_open=True)
    head_dim = protocol.d_model // protocol.n_heads
    if head_dim % 2:
        raise ValueError(f"protocol's head width d_model/n_heads={head_dim} must be even for RoPE")
    return base ** (-2.0 * np.arange(head_dim // 2) / head_dim)


def _wrap(phase: np.ndarray) -> np.ndarray:
    return (phase + math.pi) % (2 * math.pi) - math.pi


def rope_alias_table(offset: int, protocol: GridProtocol | None = None, *, base: float = 10000.0,
                     bos: bool = False) -> list[dict]:
    """Every alias of distance ``offset`` below the longest evaluation length: ``offset + 2 pi k / omega_i``, ``k >= 1``.

    A head that finds its key at distance ``offset`` cannot tell, in pair ``i``, that
    distance from ``offset + 2 pi k / omega_i``. The integer distance nearest to an alias
    is where it bites: a query at position ``t`` first has a key at that distance when
    ``t`` reaches it (the key then is the first token), so the alias predicts a drop of
    accuracy at task position ``t = position``.

    Args:
        offset: the trained look-back distance (3 for offset copy, 10 for long offset copy).
        protocol: the model (head width ``d_model / n_heads``), ``train_len`` and the
            evaluation lengths; default ``GridProtocol()`` (head width 8).
        base: RoPE's base (10,000 in phase A; 100 in the phase-D ablation).
        bos: with a BOS token the trained distances reach ``train_len`` (else ``train_len - 1``).

    Returns:
        One dict per alias, in order of position, with ``pair`` (``i``), ``omega``, ``k``,
        ``distance`` (the real alias), ``position`` (the nearest integer distance),
        ``gaps`` (array ``(pairs,)``: every pair's phase gap at ``position``, wrapped to
        ``(-pi, pi]``) and ``trained`` (the distance occurs in training sequences).

    Example:
        >>> [(a["position"], a["trained"]) for a in rope_alias_table(3) if a["pair"] == 0][:4]
        [(9, True), (16, False), (22, False), (28, False)]
        >>> [a["position"] for a in rope_alias_table(10)]
        [16, 23, 29, 35, 41, 48, 54, 60]
        >>> [round(float(g), 2) for g in rope_alias_table(3)[5]["gaps"]]
        [0.3, -2.48, 0.38, 0.04]
    """
    protocol = _protocol_or_default(protocol)
    offset = check_int("offset", offset, minimum=0)
    if not isinstance(bos, bool):
        raise TypeError(f"bos must be a bool, got {type(bos).__name__}")
    omegas = rope_omegas(protocol, base=base)
    max_len = max(protocol.eval_factors) * protocol.train_len
    longest_trained = protocol.train_len - 1 + int(bos)
    out = []
    for i, omega in enumerate(omegas):
        for k, distance in enumerate(rope_alias_positions(offset, max_len, omega=float(omega)), start=1):
            position = int(round(distance))
            if position >= max_len:
                continue
            out.append({"pair": i, "omega": float(omega), "k": k, "distance": float(distance), "position": position,
                        "gaps": _wrap(omegas * (position - offset)), "trained": position <= longest_trained})
    return sorted(out, key=lambda a: (a["position"], a["pair"]))


def curve_drops(curve: Sequence[float | None], start: int, *, drop: float = 0.1, window: int = 3) -> list[int]:
    """The positions ``t >= start`` where a per-position accuracy curve falls: a cliff, not a slope.

    ``t`` is a drop when the mean of the ``window`` positions before it exceeds the mean of
    ``t`` and the ``window - 1`` after it by at least ``drop``; of consecutive such
    positions the one with the largest fall is kept. Unscored positions (``None``/``nan``)
    are left out of the means.

    Example:
        >>> c = [1.0] * 41 + [0.3] * 6 + [0.07] * 17
        >>> curve_drops(c, 16)
        [41, 47]
        >>> curve_drops(np.linspace(1, 0, 64), 16)  # a slope of 0.016 per position: no cliff
        []
    """
    start = check_int("start", start, minimum=1)
    drop = check_real("drop", drop, low=0.0, high=1.0, low_open=True)
    window = check_int("window", window)
    c = np.array([math.nan if v is None else v for v in curve], dtype=float) if not isinstance(curve, np.ndarray) \
        else np.asarray(curve, dtype=float)
    if c.ndim != 1:
        raise ValueError(f"curve must be one accuracy per position, got shape {c.shape}")
    falls = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a window with no scored position
        for t in range(start, len(c)):
            before, after = np.nanmean(c[max(0, t - window): t]), np.nanmean(c[t: t + window])
            if not math.isnan(before) and not math.isnan(after) and before - after >= drop:
                falls[t] = before - after
    out: list[int] = []
    for t in sorted(falls):
        if t - 1 in falls and out:  # the same cliff as the run before it: keep its largest fall
            if falls[t] > falls[out[-1]]:
                out[-1] = t
        else:
            out.append(t)
    return out


def _fitting_rows(results: object, task: str, scheme: str, variant: str, checkpoint: str) -> tuple[dict, list[Mapping]]:
    """:func:`group_curves` (fitting seeds at the fitting rates) and the saved rows of the same trials, in its order."""
    checkpoint = check_choice("checkpoint", checkpoint, ("best", "final"))
    got = group_curves(results, task, scheme, variant, checkpoint=checkpoint)
    rows = {(r["seed"], r["lr"]): r for r in _rows(results) if (r["task"], r["scheme"], r["variant"]) ==
            (task, scheme, variant) and r.get("checkpoint") == checkpoint and r.get("phase", "A") == "A"}
    return got, [rows[t] for t in got["trials"]]


_ALIAS_OFFSETS = {"offset_copy": 3, "long_offset_copy": 10}


def rope_alias_check(results: object, task: str = "offset_copy", variant: str = "plain", *, drop: float = 0.1,
                     tolerance: int = 0, base: float = 10000.0, checkpoint: str = "best") -> dict:
    """Where RoPE's per-position accuracy falls in each fitting trial, against the aliases the model predicts.

    The predicted positions are the untrained aliases of the task's distance
    (:func:`rope_alias_table`, every pair, at ``position >= train_len``); the observed
    ones are each trial's :func:`curve_drops` on its 4x curve. A trial *matches* when it
    has a drop and every drop lies within ``tolerance`` of a predicted position.

    Returns:
        ``{"task", "variant", "offset", "predicted" (sorted positions), "first_predicted",
        "silent" (predicted positions where no trial drops), "chance" (the share of new positions
        within ``tolerance`` of a predicted one: how often a drop at a random position would
        match), "curves" (array (trials, 4L): the fitting trials' 4x curves), "train_len",
        "trials" [(seed, lr)], "drops" [[positions] per trial], "horizons" (per trial),
        "matched" (bools), "k" (trials matched), "n" (trials), "counts" ({position: trials
        with a drop there}), "text", "missing"}``; with nothing to check (group not in the
        file, no seed fits) ``n`` is 0 and ``missing`` says why.

    Example:
        >>> rope_alias_check({"rows": []})["missing"]
        'offset_copy / rope / plain is not in the results file yet'
    """
    task = check_choice("task", task, tuple(_ALIAS_OFFSETS))
    variant = check_choice("variant", variant, VARIANTS)
    tolerance = check_int("tolerance", tolerance, minimum=0)
    protocol = grid_protocol(results)
    offset = _ALIAS_OFFSETS[task]
    table = rope_alias_table(offset, protocol, base=base, bos=variant == "bos")
    predicted = sorted({a["position"] for a in table if a["position"] >= protocol.train_len})
    new = range(protocol.train_len, max(protocol.eval_factors) * protocol.train_len)
    chance = sum(any(abs(t - p) <= tolerance for p in predicted) for t in new) / len(new)
    got, _ = _fitting_rows(results, task, "rope", variant, checkpoint)
    out = {"task": task, "variant": variant, "offset": offset, "predicted": predicted,
           "first_predicted": predicted[0] if predicted else None, "trials": got["trials"], "drops": [],
           "curves": got["curves"], "train_len": protocol.train_len,
           "horizons": [], "matched": [], "k": 0, "n": 0, "counts": {}, "silent": predicted,
           "chance": chance, "missing": got["missing"]}
    if got["missing"]:
        out["text"] = got["missing"]
        return out
    for curve in got["curves"]:
        found = curve_drops(curve, protocol.train_len, drop=drop)
        out["drops"].append(found)
        out["horizons"].append(horizon(curve, protocol.train_len))
        out["matched"].append(bool(found) and all(min(abs(t - p) for p in predicted) <= tolerance for t in found)
                              if predicted else False)
        for t in found:
            out["counts"][t] = out["counts"].get(t, 0) + 1
    out["counts"] = dict(sorted(out["counts"].items()))
    out["silent"] = [p for p in predicted if not any(abs(t - p) <= tolerance for t in out["counts"])]
    out["k"], out["n"] = sum(out["matched"]), len(out["matched"])
    where = ", ".join(f"{t} ({c}/{out['n']})" for t, c in out["counts"].items()) or "none"
    out["text"] = (f"RoPE, {task.replace('_', ' ')}, {variant}: drops at {where}; every drop at an alias of "
                   f"{offset} in {out['k']}/{out['n']} trials")
    return out


def group_horizons(results: object, task: str, scheme: str, variant: str, *, threshold: float = 0.9,
                   checkpoint: str = "best") -> dict:
    """The extrapolation horizon of every fitting trial of a group, beside its beyond-length accuracies.

    A trial's horizon is :func:`horizon` on its 4x curve: the first position ``>= L``
    whose accuracy is below ``threshold``. For a causal model the accuracy at a position
    does not depend on later tokens, so the horizon is also the longest sequence whose
    every position stays at or above ``threshold`` (``4 L`` when none falls).

    Returns:
        ``{"task", "scheme", "variant", "threshold", "trials", "horizons" (array), "median",
        "reach_2x" / "reach_4x" (trials whose horizon reaches ``2 L`` / ``4 L``), "n",
        "beyond_2x" / "beyond_4x" (the same trials' means), "missing"}``.

    Example:
        >>> group_horizons({"rows": []}, "offset_copy", "rope", "plain")["n"]
        0
    """
    threshold = check_real("threshold", threshold, low=0.0, high=1.0)
    protocol = grid_protocol(results)
    got, rows = _fitting_rows(results, task, scheme, variant, checkpoint)
    out = {"task": task, "scheme": scheme, "variant": variant, "threshold": threshold, "trials": got["trials"],
           "horizons": np.zeros(0, dtype=int), "median": math.nan, "reach_2x": 0, "reach_4x": 0, "n": 0,
           "beyond_2x": math.nan, "beyond_4x": math.nan, "missing": got["missing"]}
    if got["missing"]:
        return out
    L = protocol.train_len
    h = np.array([horizon(c, L, threshold=threshold) for c in got["curves"]], dtype=int)
    longest = max(protocol.eval_factors) * L
    out.update(horizons=h, median=float(np.median(h)), reach_2x=int((h >= 2 * L).sum()),
               reach_4x=int((h >= longest).sum()), n=int(h.size))
    for f in (2, 4):
        values = [r.get(beyond_key(f)) for r in rows if r.get(beyond_key(f)) is not None]
        out[beyond_key(f)] = float(np.mean(values)) if values else math.nan
    return out


def horizon_table(results: object, *, threshold: float = 0.9, checkpoint: str = "best") -> list[dict]:
    """:func:`group_horizons` of every planned group of phase A (plan order); missing groups have ``n == 0``.

    Example:
        >>> t = horizon_table({"rows": []})
        >>> len(t), t[0]["missing"]
        (98, 'offset_copy / none / plain is not in the results file yet')
    """
    return [group_horizons(results, *g, threshold=threshold, checkpoint=checkpoint) for g in PHASE_A_GROUPS]


def sinusoidal_similarity_check(results: object, task: str = "far_retrieve", variant: str = "plain", *,
                                checkpoint: str = "best") -> dict:
    """The sinusoidal model's accuracy at each new position against its encoding's similarity to the trained ones.

    The similarity of task position ``t`` is the largest cosine between its sinusoidal
    encoding and that of a trained position (:func:`sinusoidal_novelty`; with BOS the
    model's positions are the task's plus one, and ``L + 1`` of them are trained). Each
    fitting trial gives the Pearson correlation of accuracy with similarity over the new
    positions ``L .. 4L - 1``; the trials' mean has a 95 % bootstrap interval.

    Returns:
        ``{"task", "variant", "similarity" (array ``(4L,)``, by task position), "curves"
        (``(trials, 4L)``), "trials", "correlations" (per trial), "mean", "interval",
        "positive" (trials with a correlation above 0), "n", "pooled" (the correlation of
        the mean curve), "missing"}``.

    Example:
        >>> c = sinusoidal_similarity_check({"rows": []})
        >>> c["similarity"].shape, round(float(c["similarity"][15]), 6), c["n"]
        ((64,), 1.0, 0)
    """
    variant = check_choice("variant", variant, VARIANTS)
    protocol = grid_protocol(results)
    L, longest, shift = protocol.train_len, max(protocol.eval_factors) * protocol.train_len, int(variant == "bos")
    sim = sinusoidal_novelty(longest + shift, L + shift, protocol.d_model)[shift:]
    got, _ = _fitting_rows(results, task, "sinusoidal", variant, checkpoint)
    out = {"task": task, "variant": variant, "similarity": sim, "curves": got["curves"], "trials": got["trials"],
           "correlations": np.zeros(0), "mean": math.nan, "interval": (math.nan, math.nan), "positive": 0, "n": 0,
           "pooled": math.nan, "missing": got["missing"]}
    if got["missing"]:
        return out

    def corr(acc: np.ndarray) -> float:
        ok = ~np.isnan(acc[L:]) & (np.arange(L, len(acc)) < len(sim))
        a, s = acc[L:][ok], sim[L: len(acc)][ok[: len(sim) - L]]
        return float(np.corrcoef(a, s)[0, 1]) if a.size > 2 and a.std() > 0 else math.nan

    r = np.array([corr(c) for c in got["curves"]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean_curve = np.nanmean(got["curves"], axis=0)
    summary = summarize(r[~np.isnan(r)], interval="bootstrap")
    out.update(correlations=r, mean=summary.mean, interval=summary.interval, positive=int((r > 0).sum()),
               n=int((~np.isnan(r)).sum()), pooled=corr(mean_curve))
    return out


def eval_positions(task: str, variant: str, length: int, seed: int, protocol: GridProtocol | None = None) -> dict:
    """The randomized scheme's positions and the scored mask of the grid's held-out sequences of one length.

    Exactly the sequences :func:`score_model` scores for ``seed`` at ``length`` (they do
    not depend on the scheme; the positions are the randomized scheme's draw).

    Returns:
        A dict with ``positions`` (tensor ``(eval_size, length)``, one more column with
        BOS), ``mask`` (tensor ``(eval_size, length)``, the scored task positions) and
        ``spacing`` (the mean gap between consecutive positions of a sequence).

    Example:
        >>> e = eval_positions("offset_copy", "plain", 16, 0, GridProtocol(eval_size=64))
        >>> e["positions"].shape, 13 < e["spacing"] < 17
        (torch.Size([64, 16]), True)
    """
    task = check_choice("task", task, ALL_TASKS)
    variant = check_choice("variant", variant, VARIANTS)
    length, seed = check_int("length", length), check_int("seed", seed, minimum=0)
    protocol = _protocol_or_default(protocol)
    bos = variant == "bos"
    g, h = _eval_generators(seed, length)
    _, _, mask, positions = grid_batch(task, "randomized", protocol, bos, protocol.eval_size, length, g, h)
    gaps = (positions[:, 1:] - positions[:, :-1]).double()
    return {"positions": positions, "mask": mask[:, int(bos):], "spacing": float(gaps.mean())}


def randomized_seen_check(results: object, task: str = "offset_copy", variant: str = "bos", *,
                          checkpoint: str = "best", gap: float = 0.2) -> dict:
    """Randomized positions: accuracy at the positions seen in training (``< L``) in sequences of length L, 2L and 4L.

    At length ``L`` it is ``acc_1x``; at ``2L`` it is recovered exactly from ``acc_2x``
    and ``beyond_2x`` with the number of scored positions of the held-out sequences
    (:func:`eval_positions`); at ``4L`` it is the scored-position-weighted mean of the
    saved 4x curve over ``t < L``. The spacing is measured on the held-out positions of
    every seed (BOS included): a longer sequence packs its sorted positions closer
    (:func:`randomized_spacing`).

    Returns:
        ``{"task", "variant", "lengths" (L, 2L, 4L), "spacing" (measured, shape (3,)),
        "spacing_formula" ((256 + 1) / (n + 1) for the n positions drawn), "trials",
        "seen" (array (trials, 3)), "mean" (shape (3,)), "interval" (bootstrap per length),
        "below" (trials whose seen accuracy at 4L is more than ``gap`` below their acc_1x),
        "n", "missing"}``.

    Example:
        >>> randomized_seen_check({"rows": []})["missing"]
        'offset_copy / randomized / bos is not in the results file yet'
    """
    variant = check_choice("variant", variant, VARIANTS)
    gap = check_real("gap", gap, low=0.0, high=1.0)
    protocol = grid_protocol(results)
    L = protocol.train_len
    lengths = tuple(f * L for f in (1, 2, 4))
    if not {1, 2, 4} <= set(protocol.eval_factors):
        raise ValueError(f"the results' eval_factors must include 1, 2 and 4, got {protocol.eval_factors}")
    got, rows = _fitting_rows(results, task, "randomized", variant, checkpoint)
    shift = int(variant == "bos")
    out = {"task": task, "variant": variant, "lengths": lengths, "trials": got["trials"],
           "spacing_formula": randomized_spacing([n + shift for n in lengths]),
           "spacing": np.full(3, math.nan), "seen": np.zeros((0, 3)), "mean": np.full(3, math.nan),
           "interval": [(math.nan, math.nan)] * 3, "below": 0, "n": 0, "missing": got["missing"]}
    seeds = sorted({s for s, _ in got["trials"]}) or list(protocol.seeds)
    spacing = {n: [] for n in lengths}
    masks: dict[tuple[int, int], torch.Tensor] = {}
    for seed in seeds:
        for n in lengths:
            e = eval_positions(task, variant, n, seed, protocol)
            spacing[n].append(e["spacing"])
            masks[(seed, n)] = e["mask"]
    out["spacing"] = np.array([np.mean(spacing[n]) for n in lengths])
    if got["missing"]:
        return out
    seen = []
    for (seed, _), row, curve in zip(got["trials"], rows, got["curves"]):
        m2, m4 = masks[(seed, 2 * L)], masks[(seed, 4 * L)]
        n_all, n_seen = float(m2.sum()), float(m2[:, :L].sum())
        at_2 = (row["acc_2x"] * n_all - row["beyond_2x"] * (n_all - n_seen)) / n_seen
        counts = m4[:, :L].sum(dim=0).double().numpy()
        ok = counts > 0
        at_4 = float((curve[:L][ok] * counts[ok]).sum() / counts[ok].sum())
        seen.append([row["acc_1x"], at_2, at_4])
    out["seen"] = np.array(seen)
    out["mean"] = out["seen"].mean(axis=0)
    out["interval"] = [summarize(out["seen"][:, j], interval="bootstrap").interval for j in range(3)]
    out["below"] = int((out["seen"][:, 0] - out["seen"][:, 2] > gap).sum())
    out["n"] = len(seen)
    return out




def train_checkpoint(task: str, scheme: str, variant: str, seed: int, lr: float, *,
                     protocol: GridProtocol | None = None, saved: object = None) -> dict:
    """Retrain one trial of phase A exactly as the grid trained it and return its best held-out-loss weights.

    The grid keeps no weights; the mechanisms that need them (a trained RoPE head's
    ``q . R(d) k``, T5's untrained buckets, NoPE + BOS's ``1/(t+2)`` feature) retrain one
    trial through :func:`run_grid_pack` unchanged (its ``modify`` hook only keeps a
    reference to the model, which ends holding the trial's best weights). With ``saved``
    (a results file) the new scores are compared with the saved best row of the trial: on
    the machine that ran the grid they are equal.

    Returns:
        ``{"model" (the trained module, in eval mode), "best" (its scores with per-position
        curves), "best_step", "best_loss", "saved" (the saved best row or ``None``),
        "differences" ({key: new - saved} for acc_1x, beyond_2x, beyond_4x, heldout_loss),
        "matches" (every difference within 1e-3, ``None`` without a saved row), "seconds"}``.

    Example:
        >>> p = GridProtocol(steps=4, loss_every=2, score_every=4, eval_size=4, heldout_size=4, batch_size=4, warmup=0)
        >>> c = train_checkpoint("offset_copy", "rope", "plain", 0, 1e-3, protocol=p)
        >>> type(c["model"]).__name__, c["best_step"] in (2, 4), c["matches"]
        ('PositionalTransformer', True, None)
    """
    task, scheme, variant, members, protocol = _checked(task, scheme, variant, [(seed, lr)], protocol)
    kept: list[nn.Module] = []
    start = time.perf_counter()
    trial = run_grid_pack(task, scheme, variant, members, protocol, modify=kept.append)[0]
    seconds = time.perf_counter() - start
    model = kept[0].eval()
    out = {"model": model, "best": trial["best"], "best_step": trial["best_step"], "best_loss": trial["best_loss"],
           "saved": None, "differences": {}, "matches": None, "seconds": seconds}
    if saved is not None:
        found = [r for r in _rows(saved) if (r["task"], r["scheme"], r["variant"], r["seed"], r["checkpoint"]) ==
                 (task, scheme, variant, seed, "best") and math.isclose(r["lr"], lr) and r.get("phase", "A") == "A"]
        if found:
            row = found[0]
            new = {**trial["best"], "heldout_loss": trial["best_loss"]}
            out["saved"] = row
            out["differences"] = {k: new[k] - row[k] for k in ("acc_1x", "beyond_2x", "beyond_4x", "heldout_loss")
                                  if row.get(k) is not None and new.get(k) is not None}
            out["matches"] = all(abs(v) <= 1e-3 for v in out["differences"].values())
    return out



def _rope_model_args(model, task, variant, protocol):
    """Check the arguments of a trained-RoPE check; returns ``(task, variant, protocol)``."""
    if not isinstance(model, PositionalTransformer) or model.scheme != "rope":
        raise ValueError(f"model must be a PositionalTransformer with scheme 'rope', got {type(model).__name__}"
                         + (f" with scheme {model.scheme!r}" if isinstance(model, PositionalTransformer) else ""))
    task = check_choice("task", task, tuple(_ALIAS_OFFSETS))
    variant = check_choice("variant", variant, VARIANTS)
    return task, variant, _protocol_or_default(protocol)


@torch.no_grad()
def rope_head_profile(model: nn.Module, task: str = "offset_copy", variant: str = "plain", *, layer: int = -1,
                      seed: int = 0, margin: float = 1.0, protocol: GridProtocol | None = None) -> dict:
    """A trained RoPE model's score for a key at every distance, per head: ``q . R(d) k`` of the head's mean query and key.

    The queries and keys of ``layer`` (before rotation) are read on the grid's held-out
    sequences at length ``L`` (seed ``seed``); ``q`` is the mean query of the scored
    positions, ``k`` the mean key of all positions. By linearity ``q . R(d) k`` is then the
    mean score that a key at distance ``d`` gets from a query, whatever their contents:
    the head's preference for distances, read through the model's own rotary module. An
    untrained alias *rivals* the target in a head when its score is at least
    ``score(offset) - margin`` (it gets at least ``exp(-margin)`` of the target's weight).

    Returns:
        ``{"distance" (array (4L,)), "scores" (array (heads, 4L), pre-softmax logits),
        "offset", "target" (per head, the score at ``offset``), "trained_max" (per head, the
        highest score of the other trained distances), "selectivity" (``target - trained_max``:
        large in the layer that finds the key, near 0 in a layer with no preference for
        distance, whose ``predicted_drop`` means nothing), "aliases" (untrained alias positions
        of the fast pair), "alias_scores" (array (heads, aliases)), "rivals" (per alias, the
        heads where it rivals the target), "predicted_drop" (the first alias rivalling the
        target in at least half the heads, or ``None``), and the arguments ``margin``,
        ``layer`` (counted from 0, negative ones resolved), ``variant``, ``task``}``.

    Example:
        >>> p = GridProtocol(eval_size=8)
        >>> with seeded(0):
        ...     m = p.run_config("plain", 1e-3).model("rope")
        >>> prof = rope_head_profile(m, protocol=p)
        >>> prof["scores"].shape, prof["aliases"][:3]
        ((4, 64), [16, 22, 28])
    """
    task, variant, protocol = _rope_model_args(model, task, variant, protocol)
    seed = check_int("seed", seed, minimum=0)
    margin = check_real("margin", margin, low=0.0)
    if not isinstance(layer, int) or isinstance(layer, bool) or not -len(model.blocks) <= layer < len(model.blocks):
        raise ValueError(f"layer must be an int in [-{len(model.blocks)}, {len(model.blocks)}), got {layer!r}")
    bos, L, offset = variant == "bos", protocol.train_len, _ALIAS_OFFSETS[task]
    longest = max(protocol.eval_factors) * L
    g, h = _eval_generators(seed, L)
    inputs, _, _, _ = grid_batch(task, "rope", protocol, bos, protocol.eval_size, L, g, h)
    attn, seen = model.blocks[layer].attn, {}
    hook = attn.register_forward_pre_hook(lambda mod, args: seen.setdefault("x", args[0]))
    try:
        model.eval()(inputs)
    finally:
        hook.remove()
    q = attn._heads(attn.w_q(seen["x"]), attn.head_dim)[:, :, offset + int(bos):].mean(dim=(0, 2))
    k = attn._heads(attn.w_k(seen["x"]), attn.head_dim).mean(dim=(0, 2))
    heads, distance = q.shape[0], torch.arange(longest)
    rq = model.positional(q[None, :, None, :].expand(1, heads, longest, -1).contiguous(), positions=distance)
    rk = model.positional(k[None, :, None, :].contiguous(), positions=torch.zeros(1, dtype=torch.long))
    scores = ((rq * rk).sum(-1)[0] / math.sqrt(attn.head_dim)).double().numpy()
    trained = [d for d in range(L + int(bos)) if d != offset]
    aliases = [a["position"] for a in rope_alias_table(offset, protocol, bos=bos) if a["pair"] == 0 and not a["trained"]]
    target = scores[:, offset]
    alias_scores = scores[:, aliases]
    rivals = [[int(hh) for hh in np.flatnonzero(alias_scores[:, j] >= target - margin)] for j in range(len(aliases))]
    first = next((a for a, r in zip(aliases, rivals) if 2 * len(r) >= heads), None)
    trained_max = scores[:, trained].max(axis=1)
    return {"distance": distance.numpy(), "scores": scores, "offset": offset, "target": target,
            "trained_max": trained_max, "selectivity": target - trained_max, "aliases": aliases,
            "alias_scores": alias_scores, "rivals": rivals, "predicted_drop": first, "margin": margin,
            "layer": layer % len(model.blocks), "variant": variant, "task": task}



def _initial_model(scheme: str, variant: str, seed: int, protocol: GridProtocol) -> nn.Module:
    """The weights a trial of the grid starts from (built as :func:`run_grid_pack` builds them)."""
    with seeded(seed):
        return protocol.run_config(variant, protocol.lrs[0]).model(scheme)


#: how far a T5 bucket may sit from its rebuilt initial value and still count as untouched
#: (an untrained bucket gets no gradient and stays exactly there; a trained one moves by
#: 0.5 or more; rebuilding the initial values on a scalar CPU moves them by up to 3e-8)
T5_INIT_ATOL = 1e-6


@torch.no_grad()
def t5_bucket_check(model: nn.Module, seed: int, variant: str = "plain", *, protocol: GridProtocol | None = None) -> dict:
    """Which of a trained T5 model's buckets moved from their initial values, against the buckets training reaches.

    The trial's initial weights are rebuilt from ``seed`` (as the grid builds them). A
    bucket no training distance falls in (:func:`t5_buckets`) gets no gradient, so Adam
    leaves it exactly at its initial value (about ``N(0, 0.02^2)``): at a new distance a
    key meets a bias near 0, between the target's trained bias and the suppressed
    distractors'.

    Returns:
        A dict with ``bucket`` (array ``(buckets,)``), ``reached`` (bool per bucket, true
        where some training distance falls in it), ``initial`` and ``trained`` (arrays
        ``(buckets, heads)``), ``change`` (per bucket, the largest absolute change over
        heads), ``unchanged`` (buckets at their initial values, within ``T5_INIT_ATOL``:
        the initial values are rebuilt, and another CPU's random-number kernels round them
        differently in the last bits), ``predicted``
        (buckets not reached), ``bias`` (array ``(heads, 4L)``, the trained bias at every
        distance), ``new_bias`` (per head, the mean bias at distances ``L .. 4L - 1``) and
        ``trained_bias`` (per head, the bias at every trained distance).

    Example:
        >>> p = GridProtocol()
        >>> with seeded(0):
        ...     m = p.run_config("plain", 1e-3).model("t5")
        >>> c = t5_bucket_check(m, 0)
        >>> c["unchanged"] == list(range(32)), c["predicted"] == list(range(16, 32))  # an untrained model: all at init
        (True, True)
    """
    from .models import PositionalTransformer

    if not isinstance(model, PositionalTransformer) or model.scheme != "t5":
        raise ValueError(f"model must be a PositionalTransformer with scheme 't5', got {type(model).__name__}"
                         + (f" with scheme {model.scheme!r}" if isinstance(model, PositionalTransformer) else ""))
    seed = check_int("seed", seed, minimum=0)
    variant = check_choice("variant", variant, VARIANTS)
    protocol = _protocol_or_default(protocol)
    L, longest, bos = protocol.train_len, max(protocol.eval_factors) * protocol.train_len, variant == "bos"
    start = _initial_model("t5", variant, seed, protocol).positional.weight.detach().double().numpy()
    bias = model.positional
    if bias.weight.shape != start.shape:
        raise ValueError(f"model's bucket table {tuple(bias.weight.shape)} is not the protocol's {start.shape}")
    end = bias.weight.detach().double().numpy()
    table = t5_buckets(longest + int(bos), L, bos=bos, num_buckets=bias.num_buckets, max_distance=bias.max_distance)
    reached = np.zeros(bias.num_buckets, dtype=bool)
    reached[table["bucket"][table["trained"]]] = True
    change = np.abs(end - start).max(axis=1)
    by_distance = end[table["bucket"][:longest]].T  # (heads, distances)
    return {"bucket": np.arange(bias.num_buckets), "reached": reached, "initial": start, "trained": end,
            "change": change, "unchanged": [int(b) for b in np.flatnonzero(change <= T5_INIT_ATOL)],
            "predicted": [int(b) for b in np.flatnonzero(~reached)], "bias": by_distance,
            "new_bias": by_distance[:, L:].mean(axis=1), "trained_bias": by_distance[:, : L + int(bos)]}


@torch.no_grad()
def bos_position_probe(model: nn.Module, task: str = "far_retrieve", *, layer: int = 0, offset: int = 3,
                       ridge: float = 1e-3, protocol: GridProtocol | None = None) -> dict:
    """A linear probe for NoPE + BOS's position feature ``1/(t+2)`` in the residual stream after block ``layer``.

    The probe (ridge regression with an intercept) is fitted on the positions seen in
    training (``t < L``) of the grid's held-out sequences of seed 0 at length 4L, and read
    on those of seed 1 at every position. A head attending uniformly puts ``1/(t+2)`` of
    its weight on BOS, so the stream can carry that number. Position ``t`` is *resolved*
    from ``t - offset`` while the probe's mean readings at the two positions differ by
    more than twice the readings' standard deviation at ``t``.

    Returns:
        ``{"position" (array (4L,)), "target" (1/(t+2)), "mean", "sd" (of the reading per
        position, over sequences), "r2_seen" (positions < L), "r2_new" (positions >= L),
        "resolved" (bool per position >= offset), "resolution" (the first position >= L that
        is not resolved, or 4L), "gap" (:func:`bos_feature_gap`), and ``task``, ``layer`` (from
        0), ``offset``, ``train_len``}``.

    Example:
        >>> p = GridProtocol(eval_size=32)
        >>> with seeded(0):
        ...     m = p.run_config("bos", 1e-3).model("none")
        >>> probe = bos_position_probe(m, protocol=p)
        >>> probe["mean"].shape, probe["r2_seen"] > 0.5
        ((64,), True)
    """
    from .models import PositionalTransformer

    if not isinstance(model, PositionalTransformer) or model.scheme != "none":
        raise ValueError(f"model must be a PositionalTransformer with scheme 'none', got {type(model).__name__}"
                         + (f" with scheme {model.scheme!r}" if isinstance(model, PositionalTransformer) else ""))
    task = check_choice("task", task, ALL_TASKS)
    protocol = _protocol_or_default(protocol)
    offset = check_int("offset", offset)
    ridge = check_real("ridge", ridge, low=0.0)
    if not isinstance(layer, int) or isinstance(layer, bool) or not -len(model.blocks) <= layer < len(model.blocks):
        raise ValueError(f"layer must be an int in [-{len(model.blocks)}, {len(model.blocks)}), got {layer!r}")
    L = protocol.train_len
    longest = max(protocol.eval_factors) * L

    def stream(seed: int) -> np.ndarray:
        g, h = _eval_generators(seed, longest)
        inputs, _, _, _ = grid_batch(task, "none", protocol, True, protocol.eval_size, longest, g, h)
        seen = {}
        hook = model.blocks[layer].register_forward_hook(lambda mod, args, out: seen.setdefault("x", out))
        try:
            model.eval()(inputs)
        finally:
            hook.remove()
        return seen["x"][:, 1:].double().numpy()  # (batch, 4L, d_model): the task positions (BOS dropped)

    t = np.arange(longest)
    target = 1.0 / (t + 2)
    fit, read = stream(0), stream(1)
    x = fit[:, :L].reshape(-1, fit.shape[-1])
    y = np.broadcast_to(target[:L], fit.shape[:2][:1] + (L,)).reshape(-1)
    mu = x.mean(axis=0)
    xc = x - mu
    w = np.linalg.solve(xc.T @ xc + ridge * len(xc) * np.eye(xc.shape[1]), xc.T @ (y - y.mean()))
    pred = (read - mu) @ w + y.mean()  # (batch, 4L)
    mean, sd = pred.mean(axis=0), pred.std(axis=0)

    def r2(part: slice) -> float:
        err = pred[:, part] - target[part]
        tot = np.broadcast_to(target[part], err.shape)
        return float(1 - (err ** 2).sum() / ((tot - tot.mean()) ** 2).sum())

    resolved = np.zeros(longest, dtype=bool)
    resolved[offset:] = np.abs(mean[:-offset] - mean[offset:]) > 2 * sd[offset:]
    first = next((int(p) for p in range(L, longest) if not resolved[p]), longest)
    return {"position": t, "target": target, "mean": mean, "sd": sd, "r2_seen": r2(slice(0, L)),
            "r2_new": r2(slice(L, longest)), "resolved": resolved, "resolution": first,
            "gap": bos_feature_gap(t[offset:], offset), "task": task, "layer": layer % len(model.blocks),
            "offset": offset, "train_len": L}



def checkpoint_row(trained: Mapping, task: str, scheme: str, variant: str, seed: int, lr: float) -> dict:
    """One row of a checkpoint file: :func:`train_checkpoint`'s result with its weights as float32 base64 text.

    Every tensor of the model's state dict is stored exactly (``"shape"`` and the
    little-endian float32 bytes in base64, about 140 kB for the chapter's model), beside
    the trial's key, its best step and scores and the differences from the saved row.

    Example:
        >>> p = GridProtocol(steps=2, loss_every=1, score_every=2, eval_size=4, heldout_size=4, batch_size=4, warmup=0)
        >>> row = checkpoint_row(train_checkpoint("offset_copy", "rope", "plain", 0, 1e-3, protocol=p),
        ...                      "offset_copy", "rope", "plain", 0, 1e-3)
        >>> sorted(row["weights"])[:2], row["weights"]["embed.weight"]["shape"]
        (['blocks.0.attn.w_k.weight', 'blocks.0.attn.w_o.weight'], [16, 32])
    """
    import base64

    if not isinstance(trained, Mapping) or not isinstance(trained.get("model"), nn.Module):
        raise TypeError("trained must be the dict train_checkpoint returns (with its 'model')")
    task, scheme, variant, members, _ = _checked(task, scheme, variant, [(seed, lr)], None)
    weights = {}
    for name, tensor in trained["model"].state_dict().items():
        if not tensor.is_floating_point():
            raise ValueError(f"trained['model'] has a non-float tensor {name!r}; a checkpoint stores float32 only")
        data = tensor.detach().to(torch.float32).contiguous().numpy().astype("<f4")
        weights[name] = {"shape": list(data.shape), "float32": base64.b64encode(data.tobytes()).decode("ascii")}
    best = {k: _round(v) for k, v in trained["best"].items() if not k.startswith("pos_")}
    return {"task": task, "scheme": scheme, "variant": variant, "seed": members[0][0], "lr": members[0][1],
            "checkpoint": "best", "best_step": trained["best_step"], "heldout_loss": _round(trained["best_loss"]),
            **best, "differences": {k: float(f"{v:.3g}") for k, v in trained.get("differences", {}).items()},
            "matches_saved": trained.get("matches"), "weights": weights}


def load_checkpoint(task: str, scheme: str, variant: str, *, seed: int | None = None,
                    source: object = None) -> dict:
    """A trained model of chapter 6 from a checkpoint file (default: the shipped ``ch6_checkpoints.json``).

    Returns ``{"model" (the protocol's model with the stored weights, in eval mode),
    "row" (the file's row without its weights)}``; the first row of the group (of
    ``seed``, if given). A group without a checkpoint is refused by name.

    Example:
        >>> load_checkpoint("offset_copy", "rope", "plain", source={"rows": []})
        Traceback (most recent call last):
        ...
        ValueError: task, scheme, variant: no checkpoint of offset_copy / rope / plain in the file (it holds none)
    """
    import base64

    task = check_choice("task", task, ALL_TASKS)
    scheme = check_choice("scheme", scheme, GRID_SCHEMES)
    variant = check_choice("variant", variant, VARIANTS)
    if seed is not None:
        seed = check_int("seed", seed, minimum=0)
    if source is None:
        from .resources import resource_path

        source = resource_path("ch6_checkpoints.json")
    data = load_grid(source)
    rows = [r for r in data["rows"] if (r.get("task"), r.get("scheme"), r.get("variant")) == (task, scheme, variant)
            and (seed is None or r.get("seed") == seed)]
    if not rows:
        held = ", ".join(sorted({f"{r.get('task')} / {r.get('scheme')} / {r.get('variant')}" for r in data["rows"]}))
        raise ValueError(f"task, scheme, variant: no checkpoint of {task} / {scheme} / {variant}"
                         + (f" seed {seed}" if seed is not None else "") + f" in the file (it holds {held or 'none'})")
    row = rows[0]
    protocol = grid_protocol(data)
    model = _initial_model(scheme, variant, row["seed"], protocol)
    state = {}
    for name, w in row["weights"].items():
        values = np.frombuffer(base64.b64decode(w["float32"]), dtype="<f4").reshape(w["shape"])
        state[name] = torch.from_numpy(values.copy())
    model.load_state_dict(state)
    return {"model": model.eval(), "row": {k: v for k, v in row.items() if k != "weights"}}


# --- the figures of the mechanism checks: each draws one check's dict on ``ax`` and returns what it drew


def _check_dict(name: str, value: object, fields: tuple[str, ...]) -> Mapping:
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be the dict its check function returns, got {type(value).__name__}")
    missing = [f for f in fields if f not in value]
    if missing:
        raise ValueError(f"{name} has no {missing[0]!r}: not the dict of its check function")
    return value


def _title(ax, text: str) -> None:
    """``text`` as the axes' title, wrapped to the axes' width (about 13 characters per inch at 10 pt)."""
    import textwrap

    width = ax.get_position().width * ax.figure.get_size_inches()[0]
    ax.set_title(textwrap.fill(text, max(30, int(width * 13))), fontsize=10)


def plot_alias_check(ax, check: Mapping) -> dict:
    """Draw :func:`rope_alias_check`: every fitting trial's 4x curve, the predicted aliases as dotted lines, the drops as dots.

    The title says where the accuracy falls and in how many trials every fall lies on an
    alias (readable as the figure's alt text). Returns ``{"title", "aliases", "drops"}``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> plot_alias_check(ax, rope_alias_check({"rows": []}))["title"]
        'offset_copy / rope / plain is not in the results file yet'
        >>> plt.close(fig)
    """
    from .plotting import SCHEME_STYLES

    check_axes("ax", ax)
    c = _check_dict("check", check, ("task", "variant", "offset", "predicted", "curves", "drops", "k", "n", "counts",
                                     "missing", "train_len"))
    if c["missing"]:
        _note(ax, c["missing"])
        return {"title": c["missing"], "aliases": [], "drops": []}
    color = SCHEME_STYLES["rope"]["color"]
    x = np.arange(c["curves"].shape[1])
    for curve, drops in zip(c["curves"], c["drops"]):
        ax.plot(x, curve, color=color, linewidth=0.7, alpha=0.4)
        ax.plot(drops, curve[drops], "o", color="black", markersize=3)
    for p in c["predicted"]:
        ax.axvline(p, color="gray", linewidth=0.8, linestyle=":")
    ax.axvline(c["train_len"] - 0.5, color="black", linewidth=0.8, linestyle="--")
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlabel("position (dotted: aliases of distance %d)" % c["offset"])
    ax.set_ylabel("accuracy")
    where = " and ".join(f"{t} ({n}/{c['n']})" for t, n in c["counts"].items() if n * 4 >= c["n"]) or "no position"
    title = (f"RoPE, {c['task'].replace('_', ' ')}, {c['variant']}: accuracy falls at {where}; "
             f"every fall on an alias in {c['k']}/{c['n']} trials")
    _title(ax, title)
    return {"title": title, "aliases": list(c["predicted"]), "drops": [list(d) for d in c["drops"]]}


def plot_horizons(ax, horizons: Sequence[Mapping]) -> dict:
    """Draw :func:`group_horizons` dicts: one row per group, a dot per fitting trial's horizon, a bar at the median.

    Dashed lines mark ``L``, ``2L`` and ``4L``; each row's label carries ``k/n`` reaching 2L
    and 4L. Groups without fitting trials are listed as such. Returns ``{"labels", "medians"}``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> plot_horizons(ax, [group_horizons({"rows": []}, "offset_copy", "rope", "plain")])["labels"]
        ['rope, plain: no fitting trial']
        >>> plt.close(fig)
    """
    from .plotting import SCHEME_STYLES

    check_axes("ax", ax)
    rows = check_rows("horizons", horizons, ("task", "scheme", "variant", "horizons", "median", "reach_2x",
                                             "reach_4x", "n", "threshold"))
    L = GridProtocol().train_len
    labels, medians = [], []
    rng = np.random.default_rng(0)  # a fixed vertical jitter, so that equal horizons stay visible
    for i, r in enumerate(rows):
        name = f"{r['scheme']}, {r['variant']}"
        if not r["n"]:
            labels.append(f"{name}: no fitting trial")
            medians.append(math.nan)
            continue
        style = SCHEME_STYLES.get(r["scheme"], {"color": "black", "marker": "o"})
        h = np.asarray(r["horizons"], dtype=float)
        ax.plot(h, i + rng.uniform(-0.2, 0.2, h.size), linestyle="none", marker=style["marker"], color=style["color"],
                markersize=4, alpha=0.7)
        ax.plot([r["median"]] * 2, [i - 0.35, i + 0.35], color="black", linewidth=1.5)
        labels.append(f"{name}: {r['reach_2x']}/{r['n']} to 2L, {r['reach_4x']}/{r['n']} to 4L")
        medians.append(r["median"])
    for f in (1, 2, 4):
        ax.axvline(f * L, color="gray", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"horizon: first position below {rows[0]['threshold']:g} (dashed: L, 2L, 4L)")
    tasks = sorted({r["task"] for r in rows})
    _title(ax, f"Extrapolation horizon per trial, {', '.join(t.replace('_', ' ') for t in tasks)}; bar: median")
    return {"labels": labels, "medians": medians}


def plot_similarity_check(ax, check: Mapping) -> dict:
    """Draw :func:`sinusoidal_similarity_check`: the mean accuracy at each new position against its encoding's similarity.

    Each dot is one position ``>= L``; the title gives the per-trial correlation's mean,
    interval and sign count. Returns ``{"title", "x", "y"}``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> plot_similarity_check(ax, sinusoidal_similarity_check({"rows": []}))["title"]
        'far_retrieve / sinusoidal / plain is not in the results file yet'
        >>> plt.close(fig)
    """
    from .plotting import SCHEME_STYLES

    check_axes("ax", ax)
    c = _check_dict("check", check, ("task", "variant", "similarity", "curves", "mean", "interval", "positive", "n",
                                     "missing"))
    if c["missing"]:
        _note(ax, c["missing"])
        return {"title": c["missing"], "x": np.zeros(0), "y": np.zeros(0)}
    L = GridProtocol().train_len
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(c["curves"], axis=0)
    x, y = c["similarity"][L: len(mean)], mean[L:]
    ok = ~np.isnan(y)
    ax.plot(x[ok], y[ok], linestyle="none", marker=SCHEME_STYLES["sinusoidal"]["marker"],
            color=SCHEME_STYLES["sinusoidal"]["color"], markersize=4)
    ax.set_xlabel("largest cosine of the position's encoding to a trained one")
    ax.set_ylabel("mean accuracy")
    ax.set_ylim(-0.02, 1.05)
    lo, hi = c["interval"]
    title = (f"sinusoidal, {c['task'].replace('_', ' ')}, {c['variant']}: accuracy at new positions against similarity, "
             f"r = {c['mean']:.2f} [{lo:.2f}, {hi:.2f}], positive in {c['positive']}/{c['n']} trials")
    _title(ax, title)
    return {"title": title, "x": x[ok], "y": y[ok]}


def plot_seen_check(ax, check: Mapping) -> dict:
    """Draw :func:`randomized_seen_check`: accuracy at the trained indices against the mean spacing of the positions.

    One line per fitting trial through its lengths L, 2L and 4L (labelled "n = 16"), the mean in
    black. Returns ``{"title", "spacing", "mean"}``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> plot_seen_check(ax, randomized_seen_check({"rows": []}))["title"]
        'offset_copy / randomized / bos is not in the results file yet'
        >>> plt.close(fig)
    """
    from .plotting import SCHEME_STYLES

    check_axes("ax", ax)
    c = _check_dict("check", check, ("task", "variant", "lengths", "spacing", "seen", "mean", "below", "n", "missing"))
    if c["missing"]:
        _note(ax, c["missing"])
        return {"title": c["missing"], "spacing": c["spacing"], "mean": c["mean"]}
    style = SCHEME_STYLES["randomized"]
    for row in c["seen"]:
        ax.plot(c["spacing"], row, color=style["color"], linewidth=0.7, alpha=0.5, marker=style["marker"], markersize=4)
    ax.plot(c["spacing"], c["mean"], color="black", linewidth=1.6)
    for s, n, m in zip(c["spacing"], c["lengths"], c["mean"]):
        ax.annotate(f"n = {n}", (s, m), textcoords="offset points", xytext=(-10, -16), fontsize=9)
    ax.set_xlabel("mean spacing of the sampled positions")
    ax.set_ylabel("accuracy at trained indices")
    ax.set_ylim(-0.02, 1.05)
    title = (f"randomized, {c['task'].replace('_', ' ')}, {c['variant']}: accuracy at seen indices "
             + " / ".join(f"{m:.2f}" for m in c["mean"]) + " at " + " / ".join(str(n) for n in c["lengths"])
             + f" tokens; {c['below']}/{c['n']} trials lose more than 0.2")
    _title(ax, title)
    return {"title": title, "spacing": c["spacing"], "mean": c["mean"]}



def plot_head_profile(ax, profile: Mapping) -> dict:
    """Draw :func:`rope_head_profile`: each head's score against distance, the untrained aliases dotted.

    Scores are shown relative to each head's score at the trained distance (0 there), so a
    key at a distance where a line reaches ``-margin`` (dashed) rivals the target. The title
    names the aliases that rival it (alt-text ready). Returns ``{"title", "relative"}``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> p = GridProtocol(eval_size=8)
        >>> with seeded(0):
        ...     m = p.run_config("plain", 1e-3).model("rope")
        >>> fig, ax = plt.subplots()
        >>> plot_head_profile(ax, rope_head_profile(m, protocol=p))["relative"].shape
        (4, 64)
        >>> plt.close(fig)
    """
    from .plotting import SCHEME_STYLES

    check_axes("ax", ax)
    c = _check_dict("profile", profile, ("distance", "scores", "target", "aliases", "rivals", "offset", "margin",
                                         "layer", "task", "variant"))
    relative = c["scores"] - c["target"][:, None]
    heads = relative.shape[0]
    for hh, line in enumerate(relative):
        ax.plot(c["distance"], line, color=SCHEME_STYLES["rope"]["color"], linewidth=1.0, alpha=0.4 + 0.6 * hh / heads,
                label=f"head {hh}")
    for a in c["aliases"]:
        ax.axvline(a, color="gray", linewidth=0.8, linestyle=":")
    ax.axhline(-c["margin"], color="black", linewidth=0.8, linestyle="--")
    ax.axvline(c["offset"], color="black", linewidth=0.8)
    ax.set_xlabel(f"distance of the key (solid: trained distance {c['offset']}; dotted: untrained aliases)")
    ax.set_ylabel("score minus the target's")
    ax.legend(fontsize=9, loc="lower right", ncol=2)
    rival = [a for a, r in zip(c["aliases"], c["rivals"]) if 2 * len(r) >= heads]
    quiet = [a for a in c["aliases"] if a not in rival]
    title = (f"Trained RoPE heads, layer {c['layer'] + 1}, {c['task'].replace('_', ' ')}, {c['variant']}: keys at "
             + (", ".join(map(str, rival)) or "no alias") + f" score within {c['margin']:g} of the target"
             + (f"; {', '.join(map(str, quiet))} stay below" if quiet else ""))
    _title(ax, title)
    return {"title": title, "relative": relative}



def plot_bos_probe(ax, probe: Mapping) -> dict:
    """Draw :func:`bos_position_probe`: the probe's reading by position (mean, and +- 2 sd shaded) beside ``1/(t+2)``.

    Returns ``{"title"}``; the title gives the fit at seen and new positions and where
    ``t`` and ``t - offset`` stop being told apart (alt-text ready).

    Example:
        >>> import matplotlib.pyplot as plt
        >>> p = GridProtocol(eval_size=8)
        >>> with seeded(0):
        ...     m = p.run_config("bos", 1e-3).model("none")
        >>> fig, ax = plt.subplots()
        >>> plot_bos_probe(ax, bos_position_probe(m, protocol=p))["title"][:31]
        'NoPE + BOS, far retrieve, after'
        >>> plt.close(fig)
    """
    from .plotting import SCHEME_STYLES

    check_axes("ax", ax)
    c = _check_dict("probe", probe, ("position", "target", "mean", "sd", "r2_seen", "r2_new", "resolution", "task",
                                     "layer", "offset", "train_len"))
    color = SCHEME_STYLES["none"]["color"]
    ax.plot(c["position"], c["target"], color="black", linewidth=1.0, linestyle="--", label="1/(t+2)")
    floor = 0.1 * float(np.min(c["target"]))  # the log axis shows no reading at or below 0
    ax.plot(c["position"], np.clip(c["mean"], floor, None), color=color, linewidth=1.4, label="probe reading")
    ax.fill_between(c["position"], np.clip(c["mean"] - 2 * c["sd"], floor, None),
                    np.clip(c["mean"] + 2 * c["sd"], floor, None), color=color, alpha=0.25)
    ax.axvline(c["train_len"] - 0.5, color="black", linewidth=0.8, linestyle=":")
    if c["resolution"] < len(c["position"]):
        ax.axvline(c["resolution"], color=color, linewidth=0.8, linestyle="-.")
    ax.set_yscale("log")
    ax.set_xlabel("position t")
    ax.set_ylabel("feature value")
    ax.legend(fontsize=9, loc="upper right")
    title = (f"NoPE + BOS, {c['task'].replace('_', ' ')}, after block {c['layer'] + 1}: a linear probe reads 1/(t+2) "
             f"with R\u00b2 {c['r2_seen']:.3f} at trained positions and {c['r2_new']:.2f} at new ones; "
             f"t and t-{c['offset']} are told apart up to position {c['resolution'] - 1}")
    _title(ax, title)
    return {"title": title}



def plot_t5_bucket_check(ax, check: Mapping, *, target: int | None = None) -> dict:
    """Draw :func:`t5_bucket_check`: each head's trained bias against distance, the distances in unreached buckets shaded.

    ``target`` (a trained distance, e.g. 3 for offset copy) is marked. The title says which
    buckets kept their initial values and the bias range there (alt-text ready). Returns
    ``{"title"}``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> with seeded(0):
        ...     m = GridProtocol().run_config("plain", 1e-3).model("t5")
        >>> fig, ax = plt.subplots()
        >>> plot_t5_bucket_check(ax, t5_bucket_check(m, 0))["title"][-31:]  # untrained: nothing moved
        '16 reached buckets did not move'
        >>> plt.close(fig)
    """
    from .plotting import SCHEME_STYLES

    check_axes("ax", ax)
    c = _check_dict("check", check, ("bias", "trained_bias", "unchanged", "predicted", "initial"))
    color = SCHEME_STYLES["t5"]["color"]
    bias = np.asarray(c["bias"])
    heads, longest = bias.shape
    first_new = c["trained_bias"].shape[1]
    for hh in range(heads):
        ax.plot(np.arange(longest), bias[hh], color=color, linewidth=1.0, alpha=0.4 + 0.6 * hh / heads)
    ax.axvspan(first_new - 0.5, longest - 0.5, color=color, alpha=0.08)
    ax.axhline(0, color="gray", linewidth=0.8, linestyle=":")
    if target is not None:
        ax.axvline(check_int("target", target, minimum=0), color="black", linewidth=0.8)
    ax.set_xlabel("distance of the key (shaded: buckets never reached in training)")
    ax.set_ylabel("bias")
    kept, unreached = set(c["unchanged"]), list(c["predicted"])
    new = bias[:, first_new:]
    span = (f"{unreached[0]}-{unreached[-1]}" if unreached and unreached == list(range(unreached[0], unreached[-1] + 1))
            else ", ".join(map(str, unreached)) or "none")
    still = len(kept - set(unreached))
    title = (f"T5 bias by distance: the buckets {span} not reached in training "
             f"{'are' if kept >= set(unreached) else 'are not all'} at their initial values "
             f"(bias {new.min():+.2f} to {new.max():+.2f} past distance {first_new - 1}); "
             + (f"{still} reached buckets did not move" if still else "every reached bucket moved"))
    _title(ax, title)
    return {"title": title}


__all__ += [
    "curve_drops",
    "bos_position_probe",
    "checkpoint_row",
    "eval_positions",
    "grid_protocol",
    "group_horizons",
    "horizon_table",
    "load_checkpoint",
    "plot_alias_check",
    "plot_bos_probe",
    "plot_head_profile",
    "plot_horizons",
    "plot_seen_check",
    "plot_similarity_check",
    "plot_t5_bucket_check",
    "randomized_seen_check",
    "rope_alias_check",
    "rope_alias_table",
    "rope_head_profile",
    "rope_omegas",
    "sinusoidal_similarity_check",
    "t5_bucket_check",
    "train_checkpoint",
]


# =========================================================================== RoPE's aliases under a context extension
# Issue 30, item 4: the aliases read from a trained head's q . R(d) k (rope_head_profile),
# with the model's rotary module swapped for a scaled one (every weight unchanged), as the
# prediction; the same model scored with that module as the data. Reads trained weights
# only; trains nothing.

#: The context extensions of :func:`rope_extension_check`: ``(method, factor)``, plain RoPE first.
EXTENSION_SETTINGS = (("none", 1), ("ntk", 2), ("ntk", 4), ("yarn", 2), ("yarn", 4), ("pi", 2), ("pi", 4))


def _first_at_or_above(values: np.ndarray, level: float, skip: int) -> int | None:
    """The first index other than ``skip`` where ``values >= level`` (``None`` if there is none)."""
    hits = [int(i) for i in np.flatnonzero(values >= level) if i != skip]
    return hits[0] if hits else None


@torch.no_grad()
def rope_extension_check(model: nn.Module, task: str = "offset_copy", variant: str = "plain", *,
                         settings: Sequence[tuple[str, float]] = EXTENSION_SETTINGS, seed: int = 0,
                         margin: float = 1.0, threshold: float = 0.9,
                         protocol: GridProtocol | None = None) -> dict:
    """A trained RoPE model under each context extension: the fall its heads predict, and the fall it shows.

    For each ``(method, factor)`` the model's rotary module is replaced by
    ``posenc.rope.scaling.extension(method, factor, L)`` (``L`` the trained length, +1 with
    BOS; the trained base kept) and put back afterwards. *Prediction*, from the weights alone
    (:func:`rope_head_profile` read through the scaled module): ``rival`` is, per distance,
    the score relative to the trained distance that at least half the heads reach (the
    ``ceil(heads / 2)``-th largest over heads); a key at a distance where ``rival >= -margin``
    rivals the target in half the heads, and ``predicted`` is the first such distance, which
    is also the first query position that can see it. *Data*: the model scored on the grid's
    held-out sequences at 1x, 2x and 4x (:func:`score_model`) with the same module;
    ``observed`` is the first task position whose accuracy at 4x is below ``threshold``.

    Returns:
        a dict with ``settings`` (one dict per setting with ``method``, ``factor``,
        ``label``, ``rival`` (array of shape ``(4L,)``), ``predicted``, ``predicted_alias``
        (rope_head_profile's first rivalling alias), ``selectivity`` (per head), ``acc_1x``,
        ``beyond_2x``, ``beyond_4x``, ``pos_4x`` (a list) and ``observed``), ``aliases`` (the
        fast pair's untrained aliases), ``offset``, ``margin``, ``threshold``, ``train_len``,
        ``task`` and ``variant``; the method ``"none"`` is plain RoPE whatever its factor.

    Example:
        >>> p = GridProtocol(eval_size=8)
        >>> with seeded(0):
        ...     m = p.run_config("plain", 1e-3).model("rope")
        >>> c = rope_extension_check(m, settings=[("none", 1), ("yarn", 4)], protocol=p)
        >>> [s["label"] for s in c["settings"]], c["settings"][1]["rival"].shape
        (['plain', 'YaRN x4'], (64,))
    """
    from ..rope.scaling import extension
    from ..rotary import RotaryEmbedding

    task, variant, protocol = _rope_model_args(model, task, variant, protocol)
    margin = check_real("margin", margin, low=0.0)
    threshold = check_real("threshold", threshold, low=0.0, high=1.0)
    if isinstance(settings, (str, bytes)) or not isinstance(settings, Sequence) or not settings:
        raise TypeError(f"settings must be a non-empty sequence of (method, factor) pairs, got {settings!r}")
    checked = []
    for s in settings:
        if not isinstance(s, (tuple, list)) or len(s) != 2:
            raise TypeError(f"settings must hold (method, factor) pairs, got {s!r}")
        extension(s[0], s[1], 1)  # raises ValueError naming method or factor
        checked.append((s[0], float(s[1])))
    bos, L = variant == "bos", protocol.train_len
    original, out = model.positional, []
    names = {"none": "plain", "pi": "PI", "position_interpolation": "PI", "ntk": "NTK", "dynamic_ntk": "dynamic NTK",
             "yarn": "YaRN"}
    try:
        for method, factor in checked:
            model.positional = RotaryEmbedding(original.head_dim, layout=original.layout,
                                               scaling=extension(method, factor, L + int(bos), base=original.base))
            prof = rope_head_profile(model, task, variant, seed=seed, margin=margin, protocol=protocol)
            relative = prof["scores"] - prof["target"][:, None]
            rival = -np.sort(-relative, axis=0)[math.ceil(relative.shape[0] / 2) - 1]
            scored = score_model(model, task, "rope", protocol, bos, seed, per_position=True)
            curve = np.array(scored[pos_key(max(protocol.eval_factors))], dtype=float)
            below = [int(t) for t in np.flatnonzero(curve < threshold)]  # nan compares False: unscored positions
            out.append({"method": method, "factor": factor,
                        "label": names[method] + ("" if method == "none" else f" x{factor:g}"),
                        "rival": rival, "predicted": _first_at_or_above(rival, -margin, prof["offset"]),
                        "predicted_alias": prof["predicted_drop"], "selectivity": prof["selectivity"],
                        "acc_1x": scored["acc_1x"], "beyond_2x": scored["beyond_2x"],
                        "beyond_4x": scored["beyond_4x"], "pos_4x": curve.tolist(),
                        "observed": below[0] if below else None})
    finally:
        model.positional = original
    return {"settings": out, "aliases": prof["aliases"], "offset": prof["offset"], "margin": margin,
            "threshold": threshold, "train_len": L, "task": task, "variant": variant}


_EXTENSION_STYLES = {"none": ("black", "-"), "ntk": ("C0", "-"), "yarn": ("C1", "-"), "pi": ("C2", "-"),
                     "position_interpolation": ("C2", "-"), "dynamic_ntk": ("C4", "-")}


def plot_extension_check(axes, check: Mapping, *, methods: Sequence[str] = ("none", "ntk", "yarn"),
                         low: float = -12.0) -> dict:
    """Draw :func:`rope_extension_check` on two axes: the heads' prediction (left) and the accuracy (right).

    Left: ``rival`` against distance for every setting whose method is in ``methods``
    (dashed: ``-margin``, a key above it rivals the target; dotted: the fast pair's untrained
    aliases; values below ``low`` clipped). Right: the accuracy by position at 4x. A larger
    factor is drawn darker. The titles name the predicted and the observed falls (alt-text
    ready). Returns ``{"titles", "drawn"}``.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> p = GridProtocol(eval_size=8)
        >>> with seeded(0):
        ...     m = p.run_config("plain", 1e-3).model("rope")
        >>> fig, axes = plt.subplots(1, 2)
        >>> plot_extension_check(axes, rope_extension_check(m, settings=[("none", 1)], protocol=p))["drawn"]
        ['plain']
        >>> plt.close(fig)
    """
    if not isinstance(axes, (Sequence, np.ndarray)) or len(axes) != 2:
        raise TypeError(f"axes must be two matplotlib Axes (profile, accuracy), got {axes!r}")
    left, right = (check_axes("axes[0]", axes[0]), check_axes("axes[1]", axes[1]))
    c = _check_dict("check", check, ("settings", "aliases", "offset", "margin", "train_len", "task", "variant"))
    methods = tuple(check_choice("methods", m, tuple(_EXTENSION_STYLES)) for m in methods)
    low = check_real("low", low)
    shown = [s for s in c["settings"] if s["method"] in methods]
    largest = max((s["factor"] for s in shown), default=1.0)
    for s in shown:
        color, style = _EXTENSION_STYLES[s["method"]]
        alpha = 1.0 if s["method"] == "none" else 0.45 + 0.55 * s["factor"] / largest
        rival = np.maximum(np.asarray(s["rival"], dtype=float), low)
        left.plot(np.arange(len(rival)), rival, color=color, linestyle=style, alpha=alpha, linewidth=1.3,
                  label=s["label"])
        right.plot(np.arange(len(s["pos_4x"])), s["pos_4x"], color=color, linestyle=style, alpha=alpha,
                   linewidth=1.3, label=s["label"])
    for a in c["aliases"]:
        left.axvline(a, color="gray", linewidth=0.8, linestyle=":")
    left.axhline(-c["margin"], color="black", linewidth=0.8, linestyle="--")
    for ax in (left, right):
        ax.axvline(c["train_len"] - 0.5, color="gray", linewidth=0.8, linestyle="-", alpha=0.5)
    left.set_ylim(low - 0.5, None)
    left.set_ylabel("score minus the target's")
    right.set_ylabel("accuracy at 4x")
    right.set_ylim(-0.02, 1.05)

    def fall(v):
        return "none up to 63" if v is None else str(v)

    titles = [
        "Predicted first fall (a distance rivalling the target in half the heads): "
        + "; ".join(f"{s['label']} {fall(s['predicted'])}" for s in shown),
        "Observed first position below " + f"{c['threshold']:g}: "
        + "; ".join(f"{s['label']} {fall(s['observed'])}" for s in shown),
    ]
    _title(left, titles[0])
    _title(right, titles[1])
    return {"titles": titles, "drawn": [s["label"] for s in shown]}


__all__ += ["EXTENSION_SETTINGS", "plot_extension_check", "refuted_brief", "rope_extension_check"]


# --------------------------------------------------------------------------- phase B read: the same trials at 2,000 and 5,000 steps

def _trial_key(r: Mapping) -> tuple:
    return r["task"], r["scheme"], r["variant"], r["seed"], r["lr"]


_PHASE_B_FIELDS = ("task", "scheme", "variant", "seed", "lr", "checkpoint", "steps", "acc_1x", "heldout_loss")


def _phase_b_inputs(results_b: object, results_a: object) -> tuple[list[dict], list[dict], GridProtocol, GridProtocol]:
    """Phase B's and phase A's rows, checked, and the two protocols (phase A's budget is the early moment)."""
    b = _results_arg("results_b", results_b, "alternatives_v2_B.json")
    a = _results_arg("results_a", results_a, "alternatives_v2.json")
    rows_b = [r for r in b["rows"] if isinstance(r, Mapping) and r.get("phase") == "B"]
    if b["rows"] and not rows_b:
        raise ValueError("results_b holds no phase-B row (rows with phase 'B'): pass phase B's file")
    rows_a = [r for r in a["rows"] if isinstance(r, Mapping) and r.get("phase", "A") == "A"]
    if a["rows"] and not rows_a:
        raise ValueError("results_a holds no phase-A row: pass phase A's file (alternatives_v2.json)")
    check_rows("results_b rows", rows_b, _PHASE_B_FIELDS, nonempty=False)
    check_rows("results_a rows", rows_a, _PHASE_B_FIELDS, nonempty=False)
    protocol_a = grid_protocol(a) if a.get("config") else GridProtocol()
    protocol_b = grid_protocol(b) if b.get("config") else GridProtocol(steps=PHASE_B_STEPS)
    if protocol_b.steps <= protocol_a.steps:
        raise ValueError(f"results_b must run past phase A's {protocol_a.steps} steps, "
                         f"its protocol says {protocol_b.steps}")
    return rows_b, rows_a, protocol_a, protocol_b


def _same_scores(x: Mapping, y: Mapping) -> bool:
    keys = [k for k in x if k == "heldout_loss" or k == "acc_1x" or k.startswith("beyond_")]
    return all(x.get(k) == y.get(k) for k in keys if k in y)


def _phase_b_trial(rows: Sequence[Mapping], a: Mapping, early: int, loss_every: int) -> dict:
    """One trial of phase B: its best and final checkpoints at phase A's budget and at its own."""
    where = "/".join(map(str, _trial_key(rows[0])))
    kinds: dict[str, list[Mapping]] = {}
    for r in rows:
        kinds.setdefault(r["checkpoint"], []).append(r)
    if len(kinds.get("final", ())) != 1 or len(kinds.get("best", ())) != 1:
        raise ValueError(f"results_b: trial {where} must have one 'best' and one 'final' row")
    final, best = kinds["final"][0], kinds["best"][0]
    heldout = final.get("heldout")
    if isinstance(heldout, (str, bytes, Mapping)) or not isinstance(heldout, Sequence) or not heldout:
        raise ValueError(f"results_b: the final row of trial {where} has no 'heldout' list (one loss every "
                         f"{loss_every} steps)")
    pairs = [(loss_every * (i + 1), v) for i, v in enumerate(heldout)
             if v is not None and loss_every * (i + 1) <= early]
    if not pairs:
        raise ValueError(f"results_b: trial {where} has no held-out loss up to step {early}")
    low = min(v for _, v in pairs)
    argmins = [s for s, v in pairs if v == low]  # rounded losses may tie; phase A took the first of the exact ones
    scored = sorted([r for r in rows if r["checkpoint"] in ("trajectory", "best") and r["steps"] <= early],
                    key=lambda r: r["steps"])
    at_early = [r for r in kinds.get("trajectory", ()) if r["steps"] == early]
    replays = bool(final.get("replays_a", False))
    if replays and "best" in a and "final" in a:
        best_early, final_early, source = a["best"], a["final"], "phase A"
        agrees = best_early["steps"] in argmins and best_early["heldout_loss"] == low
        agrees &= all(_same_scores(r, best_early) for r in scored if r["steps"] == best_early["steps"])
        agrees &= all(_same_scores(r, final_early) for r in at_early)
    else:
        if not at_early:
            raise ValueError(f"results_b: trial {where} has no trajectory row at step {early}")
        exact = [r for r in scored if r["steps"] in argmins]
        best_early = exact[0] if exact else min(scored, key=lambda r: r["heldout_loss"])
        final_early, source, agrees = at_early[0], "phase B" if exact else "phase B, scored steps only", bool(exact)
    return {"task": final["task"], "scheme": final["scheme"], "variant": final["variant"], "seed": final["seed"],
            "lr": final["lr"], "replays_a": replays, "best_step": argmins[0], "source": source, "agrees": bool(agrees),
            "best": (best_early, best), "final": (final_early, final)}


def _phase_b_trials(rows_b: Sequence[Mapping], rows_a: Sequence[Mapping], protocol_a: GridProtocol,
                    protocol_b: GridProtocol) -> list[dict]:
    by_a: dict[tuple, dict] = {}
    for r in rows_a:
        if r["checkpoint"] in ("best", "final"):
            by_a.setdefault(_trial_key(r), {})[r["checkpoint"]] = r
    by_b: dict[tuple, list[Mapping]] = {}
    for r in rows_b:
        by_b.setdefault(_trial_key(r), []).append(r)
    order = {g: i for i, g in enumerate(PHASE_A_GROUPS)}
    keys = sorted(by_b, key=lambda k: (order.get(k[:3], len(order)), k[:3], k[4], k[3]))
    return [_phase_b_trial(by_b[k], by_a.get(k, {}), protocol_a.steps, protocol_b.loss_every) for k in keys]


def phase_b_trials(results_b: object = None, results_a: object = None) -> list[dict]:
    """Every trial of phase B at two moments: the best and final checkpoints up to phase A's budget and up to its own.

    Phase B replays each trial from step 0 (phase A saved no weights), so its first 2,000
    steps are phase A's trial again; its rows say whether the replay reproduced phase A's
    scores at step 2,000 (``replays_a``). The best checkpoint up to step 2,000 is chosen as
    phase A chose its own: the lowest held-out loss of the evaluations every ``loss_every``
    (50) steps, from the final row's ``heldout`` list. Phase B scored its weights only every
    ``score_every`` (250) steps (its trajectory rows), so where the replay holds the scores
    of that checkpoint are phase A's best row (and the final one at 2,000 phase A's final
    row); ``agrees`` then says that phase B's own rows agree with them: the lowest held-out
    loss of phase B's list up to 2,000 equals phase A's best, at phase A's best step
    (rounded losses may tie), and phase B's trajectory rows at that step and at 2,000 have
    phase A's scores. Without the replay the scores are phase B's scored row at a lowest
    step, or, where the lowest loss falls between scored steps, its scored row of lowest
    held-out loss up to 2,000 (``source`` says which; ``agrees`` is then false). The best
    up to 5,000 and the final at 5,000 are phase B's own best and final rows.

    Args:
        results_b: phase B's results (path, dict or ``None``: the shipped
            ``alternatives_v2_B.json``), partial or whole.
        results_a: phase A's (``None``: the shipped ``alternatives_v2.json``).

    Returns:
        One dict per trial of phase B (in phase A's group order, then by rate and seed)
        with ``task``, ``scheme``, ``variant``, ``seed``, ``lr``, ``replays_a``, ``best`` and
        ``final`` (each a pair of rows: up to phase A's budget, up to phase B's),
        ``best_step`` (the first step of lowest held-out loss up to 2,000 in phase B's own
        list), ``source`` (``"phase A"``, ``"phase B"`` or ``"phase B, scored steps
        only"``) and ``agrees``.

    Example:
        >>> t = phase_b_trials()
        >>> [r["steps"] for r in t[0]["final"]], all(x["agrees"] for x in t if x["replays_a"])
        ([2000, 5000], True)
    """
    return _phase_b_trials(*_phase_b_inputs(results_b, results_a))


def _decided(label: str) -> bool:
    return not label.startswith("uncertain") and label not in ("not fit", "cannot run")


def _newly_fitting(group: tuple, late: Mapping, factors: tuple[int, ...]) -> dict:
    """Prediction 3 for a group that fits no continued trial at 2,000 and some at 5,000."""
    predicted = PREDICTIONS.get(group, {})
    outcomes = {beyond_key(f): prediction_outcome(predicted.get(beyond_key(f)), late[f"label_{f}x"]) for f in factors}
    found = set(outcomes.values())
    overall = "refuted" if "refuted" in found else "open" if "open" in found else "confirmed"
    return {"predicted": {k: predicted.get(k) for k in outcomes}, "outcomes": outcomes, "outcome": overall}


def phase_b_table(results_b: object = None, results_a: object = None, *, checkpoint: str = "best") -> list[dict]:
    """One row per group of phase B: its continued trials at 2,000 and at 5,000 steps, and the three predictions.

    The groups are those of ``phase_b_members`` on phase A's rows (phase A's group
    order; a group phase B has not reached reads ``"not in the results yet"``). The two
    moments compare the same trials (:func:`phase_b_trials`): at each, the group's verdict
    is computed with phase A's rules (:func:`group_verdict` pooled over the continued
    trials' rates, floors from :func:`task_floors`) and summarised as phase D's ablations
    are: fit ``k/n`` with its Wilson interval (:func:`wilson_interval`), per factor ``f``
    the label, the mean beyond-length accuracy, ``held_<f>x`` of the ``n_<f>x`` fitting
    trials that keep at least :data:`HOLD` (Wilson interval) and the horizons on the 4x
    curve (the best rows carry it; trajectory rows, the final checkpoint at 2,000 without
    a replay, do not). This is done twice: over all the continued trials (``all``) and
    over those that fit at both moments (``both``).

    The predictions (``experiments/README.md``, "Phase B's predictions"), judged per
    group: ``p1`` (fit: how many trials fit at each moment, and for a group none of whose
    continued trials fits at 2,000 whether one fits at 5,000), ``p2`` (for the trials that
    fit at both moments, the factors whose label is decided at both moments and differs;
    a label reading ``"uncertain (...)"`` at either moment changes nothing) and ``p3`` (a
    group that fits no continued trial at 2,000 and some at 5,000: its labels at 5,000
    against :data:`PREDICTIONS` by :func:`prediction_outcome`). :func:`phase_b_summary`
    adds them up.

    Args:
        results_b: phase B's results (path, dict or ``None``: the shipped
            ``alternatives_v2_B.json``), partial or whole.
        results_a: phase A's (``None``: the shipped ``alternatives_v2.json``).
        checkpoint: ``"best"`` (lowest held-out loss up to each moment) or ``"final"``
            (the weights at step 2,000 and at step 5,000).

    Returns:
        One dict per group, with ``task``, ``scheme``, ``variant``, ``status`` (``"done"`` or
        ``"not in the results yet"``), ``steps`` (the two moments), ``n`` (trials
        continued), ``of`` (the group's trials in phase A), ``fit_a`` (:func:`fit_label`
        over all of them in phase A, continued or not, at the same checkpoint; ``None``
        without phase A's rows), ``predicted`` (:data:`PREDICTIONS`' entry); a done
        group adds ``lrs``, ``replays_a`` and ``agrees`` (trial counts, :func:`phase_b_trials`), ``acc_1x_median`` and
        ``acc_1x_max`` (over the continued trials, a pair), ``all`` and ``both`` (a pair of
        summaries, one per moment; ``both`` is ``None`` where no trial fits at both),
        ``n_both``, ``gained`` and ``lost`` (trials that fit at 5,000 and not at 2,000,
        and the reverse), ``p1`` (``{"fit": (k, k), "outcome"}``: ``"gains a fitting
        trial"`` or ``"gains none"`` where none fits at 2,000, else ``None``), ``p2``
        (``{"changed", "outcome"}``: ``"changed"`` or ``"unchanged"``; ``None`` where no
        trial fits at both) and ``p3`` (``{"predicted", "outcomes", "outcome"}``:
        ``"confirmed"``, ``"refuted"`` or ``"open"``; ``None`` unless the group newly fits).

    Example:
        >>> t = phase_b_table()
        >>> len(t), t[0]["scheme"], t[0]["steps"], t[0]["n"], t[0]["of"]
        (48, 'none', (2000, 5000), 12, 12)
    """
    checkpoint = check_choice("checkpoint", checkpoint, ("best", "final"))
    rows_b, rows_a, protocol_a, protocol_b = _phase_b_inputs(results_b, results_a)
    trials = _phase_b_trials(rows_b, rows_a, protocol_a, protocol_b)
    factors = tuple(protocol_a.eval_factors[1:])
    finals_a: dict[tuple, list[Mapping]] = {}
    kept_a: dict[tuple, list[Mapping]] = {}
    for r in rows_a:
        if r["checkpoint"] == "final":
            finals_a.setdefault((r["task"], r["scheme"], r["variant"]), []).append(r)
        if r["checkpoint"] == checkpoint:
            kept_a.setdefault((r["task"], r["scheme"], r["variant"]), []).append(r)
    planned = {g: len(phase_b_members(finals_a[g], g, loss_every=protocol_a.loss_every))
               for g in PHASE_A_GROUPS if g in finals_a}
    planned = {g: n for g, n in planned.items() if n}
    by_group: dict[tuple, list[dict]] = {}
    for t in trials:
        by_group.setdefault((t["task"], t["scheme"], t["variant"]), []).append(t)
    groups = [g for g in PHASE_A_GROUPS if g in planned or g in by_group]
    steps = (protocol_a.steps, protocol_b.steps)
    out = []
    for group in groups:
        task, scheme, variant = group
        mine = by_group.get(group, [])
        row: dict = {"task": task, "scheme": scheme, "variant": variant, "steps": steps,
                     "n": len(mine) or planned.get(group, 0), "of": len(finals_a.get(group, ())),
                     "predicted": PREDICTIONS.get(group),
                     "fit_a": fit_label([r["acc_1x"] for r in kept_a[group]]) if group in kept_a else None}
        if not mine:
            out.append({**row, "status": "not in the results yet"})
            continue
        floors = task_floors(task, protocol_a)
        fits = [[(t[checkpoint][i]["acc_1x"] or 0.0) >= FIT for i in (0, 1)] for t in mine]
        both = [t for t, f in zip(mine, fits) if all(f)]
        summary = [_unit_summary([t[checkpoint][i] for t in mine], floors, protocol_a.train_len, factors)
                   for i in (0, 1)]
        summary_both = [_unit_summary([t[checkpoint][i] for t in both], floors, protocol_a.train_len, factors)
                        for i in (0, 1)] if both else None
        k = (summary[0]["fit_k"], summary[1]["fit_k"])
        acc = [[t[checkpoint][i]["acc_1x"] for t in mine if t[checkpoint][i]["acc_1x"] is not None] for i in (0, 1)]
        row.update(acc_1x_median=tuple(float(np.median(a)) if a else math.nan for a in acc),
                   acc_1x_max=tuple(max(a) if a else math.nan for a in acc))
        row.update(status="done", lrs=sorted({t["lr"] for t in mine}), replays_a=sum(t["replays_a"] for t in mine),
                   agrees=sum(t["agrees"] for t in mine), all=tuple(summary),
                   both=None if summary_both is None else tuple(summary_both), n_both=len(both),
                   gained=sum(f == [False, True] for f in fits), lost=sum(f == [True, False] for f in fits))
        row["p1"] = {"fit": k, "outcome": None if k[0] else "gains a fitting trial" if k[1] else "gains none"}
        if summary_both is None:
            row["p2"] = None
        else:
            changed = [f"{f}x" for f in factors
                       if _decided(summary_both[0][f"label_{f}x"]) and _decided(summary_both[1][f"label_{f}x"])
                       and summary_both[0][f"label_{f}x"] != summary_both[1][f"label_{f}x"]]
            row["p2"] = {"changed": changed, "outcome": "changed" if changed else "unchanged"}
        row["p3"] = _newly_fitting(group, summary[1], factors) if k[0] == 0 and k[1] > 0 else None
        out.append(row)
    return out


#: A group that fits no trial at 5,000 steps is still climbing when its median accuracy in distribution rose by this much.
PHASE_B_CLIMB = 0.1


def phase_b_summary(table: Sequence[Mapping]) -> dict:
    """The counts each of phase B's three predictions is judged on, and its verdict (holds, refuted or untested).

    The thresholds are those written before the verdicts were read (``experiments/README.md``):

    1. ``fit``: refuted if the continued trials that fit at 5,000 are not more than at
       2,000, or if fewer than half of the groups none of whose continued trials fits at
       2,000 gain one at 5,000.
    2. ``labels``: refuted if more than a quarter of the groups with trials that fit at both
       moments change a decided label (``p2`` of :func:`phase_b_table`); untested without
       such a group.
    3. ``newly fitting``: refuted if any group that newly fits has a decided label other than
       the predicted one; holds if at least one such label is confirmed and none refuted;
       untested otherwise (no such group, or every label open).

    Returns:
        ``{"groups", "planned", "complete", "trials", "prediction_1", "prediction_2",
        "prediction_3"}``: ``groups`` done of ``planned``, ``trials`` continued in the done
        groups; ``prediction_1`` has ``fit`` (trials that fit at each moment), ``gained``,
        ``lost``, ``groups_none`` (the groups fitting no trial at 2,000), ``groups_gaining``,
        ``groups_still`` (those of ``groups_none`` that fit none at 5,000 either),
        ``groups_climbing`` (those of ``groups_still`` whose median accuracy in distribution
        rose by at least :data:`PHASE_B_CLIMB`: still learning, not stuck), ``closest`` (the
        one of ``groups_still`` whose best trial comes nearest the bar, or None) and
        ``verdict``; ``prediction_2`` has ``groups`` (with trials fitting at both
        moments), ``changed`` (the groups that change a decided label, with the factors)
        and ``verdict``; ``prediction_3`` has ``groups`` (each newly fitting group with its
        outcomes) and ``verdict``. Groups are ``(task, scheme, variant)``.

    Example:
        >>> s = phase_b_summary(phase_b_table())
        >>> s["planned"], sorted(s["prediction_1"])
        (48, ['closest', 'fit', 'gained', 'groups_climbing', 'groups_gaining', 'groups_none', 'groups_still', 'lost', 'verdict'])
    """
    rows = check_rows("table", table, ("task", "scheme", "variant", "status"))
    done = [r for r in rows if r["status"] == "done"]
    check_rows("table (done groups)", done, ("n", "all", "n_both", "gained", "lost", "p1", "p2", "p3", "acc_1x_median",
                                             "acc_1x_max"), nonempty=False)

    def name(r):
        return r["task"], r["scheme"], r["variant"]

    k = (sum(r["p1"]["fit"][0] for r in done), sum(r["p1"]["fit"][1] for r in done))
    none = [name(r) for r in done if r["p1"]["outcome"] is not None]
    gaining = [name(r) for r in done if r["p1"]["outcome"] == "gains a fitting trial"]
    v1 = "untested" if not done else "refuted" if k[1] <= k[0] or 2 * len(gaining) < len(none) else "holds"
    by_name = {name(r): r for r in done}
    still = [g for g in none if g not in gaining]
    climbing = [g for g in still
                if by_name[g]["acc_1x_median"][1] - by_name[g]["acc_1x_median"][0] >= PHASE_B_CLIMB]
    closest = max(still, key=lambda g: by_name[g]["acc_1x_max"][1]) if still else None
    with_both = [r for r in done if r["p2"] is not None]
    changed = [(*name(r), r["p2"]["changed"]) for r in with_both if r["p2"]["outcome"] == "changed"]
    v2 = "untested" if not with_both else "refuted" if 4 * len(changed) > len(with_both) else "holds"
    newly = [(*name(r), r["p3"]) for r in done if r["p3"] is not None]
    outcomes = {o for *_, p in newly for o in p["outcomes"].values()}
    v3 = "refuted" if "refuted" in outcomes else "holds" if "confirmed" in outcomes else "untested"
    return {"groups": len(done), "planned": len(rows), "complete": len(done) == len(rows),
            "trials": sum(r["n"] for r in done),
            "prediction_1": {"fit": k, "gained": sum(r["gained"] for r in done), "lost": sum(r["lost"] for r in done),
                             "groups_none": none, "groups_gaining": gaining, "groups_still": still,
                             "groups_climbing": climbing, "closest": closest, "verdict": v1},
            "prediction_2": {"groups": [name(r) for r in with_both], "changed": changed, "verdict": v2},
            "prediction_3": {"groups": newly, "verdict": v3}}


def _short_label(label: str) -> str:
    """``"uncertain (degrades)"`` → ``"degrades?"``, ``"not fit"`` → ``"–"``."""
    if label.startswith("uncertain ("):
        return label[len("uncertain ("):-1] + "?"
    return "\u2013" if label in ("not fit", "cannot run") else label


def _label_pair(pair: Sequence[Mapping] | None, f: int, *, compact: bool) -> str:
    if pair is None:
        return "\u2013"
    if compact:
        return " \u2192 ".join(_short_label(s[f"label_{f}x"]) for s in pair)
    return " \u2192 ".join(s[f"label_{f}x"] + (f" {s[f'held_{f}x']}/{s[f'n_{f}x']}" if s[f"n_{f}x"] else "")
                           for s in pair)


def _horizon_pair(pair: Sequence[Mapping] | None) -> str:
    if pair is None or all(math.isnan(s["horizon"]) for s in pair):
        return "\u2013"
    return " \u2192 ".join("\u2013" if math.isnan(s["horizon"]) else f"{s['horizon']:.0f}" for s in pair)


def _phase_b_notes(r: Mapping, *, compact: bool) -> str:
    notes = []
    if r["p1"]["outcome"] is not None:
        highest = f" (highest {r['acc_1x_max'][1]:.2f})"
        notes.append(("gains a fitting trial" if r["p1"]["outcome"] != "gains none" else "still none fits" + highest)
                     if compact else f"1: {r['p1']['outcome']}")
    if r["p2"] is not None and (r["p2"]["outcome"] == "changed" or not compact):
        factors = ", ".join(r["p2"]["changed"])
        if compact:
            notes.append(f"label changes at {factors}")
        else:
            notes.append(f"2: {r['p2']['outcome']}" + (f" ({factors})" if factors else ""))
    if r["p3"] is not None:
        outcomes = ", ".join(f"{k[7:]} {v}" for k, v in r["p3"]["outcomes"].items())
        notes.append(f"newly fits: {outcomes}" if compact else f"3: {outcomes}")
    return "; ".join(notes)


def format_phase_b_table(table: Sequence[Mapping], *, compact: bool = False) -> str:
    """A Markdown table of :func:`phase_b_table`: each group's continued trials at 2,000 → 5,000 steps.

    Columns: task; scheme and variant; the trials continued of the group's trials; fit
    ``k/n`` with its Wilson interval at each moment; the median (and highest) accuracy in
    distribution of the continued trials; the 2x and 4x labels over all the
    continued trials with the trials that hold of those that fit; how many fit at both
    moments, and their 2x and 4x labels and median horizon on the 4x curve; the
    predictions' outcomes for the group (``1``: none fit at 2,000 and one does, or not, at
    5,000; ``2``: the labels of the trials that fit at both moments, unchanged or changed;
    ``3``: a newly fitting group's labels against the prediction). ``compact`` keeps the
    task (named once), the scheme, fit ``k/n``, the 2x and 4x labels of all the continued
    trials in short (``"degrades?"`` for ``"uncertain (degrades)"``, ``–`` where none
    fits), the median horizon and a note where a prediction is tested by a change: a
    group that still fits none (with its highest accuracy in distribution at 5,000),
    gains a fitting trial, changes a decided label, or newly fits. Pass a subset of the
    table's rows to show only those groups; a group not in the results reads so.

    Example:
        >>> print(format_phase_b_table(phase_b_table(), compact=True).splitlines()[2])
        | offset copy | NoPE | 0/12 → 0/12 | – → – | – → – | – | still none fits (highest 0.67) |
    """
    from .tables import markdown_table

    rows = check_rows("table", table, ("task", "scheme", "variant", "status", "steps", "n", "of"))
    if not isinstance(compact, bool):
        raise TypeError(f"compact must be a bool, got {type(compact).__name__}")
    body = []
    last = None
    for r in rows:
        task = r["task"].replace("_", " ")
        scheme = SCHEME_NAMES.get(r["scheme"], r["scheme"])
        done = r["status"] == "done"
        if compact:
            body.append(["" if task == last else task, scheme + _SHORT_WHERE.get(r["variant"], f", {r['variant']}")]
                        + ([" \u2192 ".join(s["fit"] for s in r["all"]), _label_pair(r["all"], 2, compact=True),
                            _label_pair(r["all"], 4, compact=True), _horizon_pair(r["all"]),
                            _phase_b_notes(r, compact=True)] if done else ["\u2013"] * 4 + [r["status"]]))
            last = task
            continue
        head = [task, f"{scheme}, {_WHERE.get(r['variant'], r['variant'])}", f"{r['n']}/{r['of']}"]
        if not done:
            body.append(head + [r["status"]] + [""] * 8)
            continue
        body.append(head + [
            " \u2192 ".join(s["fit"] + _interval_text(s["fit_interval"]) for s in r["all"]),
            " \u2192 ".join(f"{m:.2f} ({x:.2f})" for m, x in zip(r["acc_1x_median"], r["acc_1x_max"])),
            _label_pair(r["all"], 2, compact=False), _label_pair(r["all"], 4, compact=False), str(r["n_both"]),
            _label_pair(r["both"], 2, compact=False), _label_pair(r["both"], 4, compact=False),
            _horizon_pair(r["both"]), _phase_b_notes(r, compact=False)])
    early, late = (f"{s:,}" for s in rows[0]["steps"])
    if compact:
        return markdown_table(["task", "scheme", f"fit {early} → {late}", "2x", "4x", "horizon", "note"], body)
    header = ["task", "scheme", "continued", f"fit {early} → {late}", "acc 1x, median (max)", "2x, all", "4x, all",
              "fit at both",
              "2x, both", "4x, both", "horizon, both", "predictions"]
    return markdown_table(header, body)


def plot_phase_b_group(axes, results_b: object, task: str, scheme: str, variant: str) -> dict:
    """One phase-B group's trials to 5,000 steps: ``acc_1x`` (left) and ``beyond_4x`` (right) against training step.

    One line per continued trial (coloured by learning rate) from its trajectory rows; a
    vertical line at phase A's budget (2,000 steps), where the comparison's first moment
    lies; the fit threshold :data:`FIT` (left) and the task's floor beyond 4x (right,
    :func:`task_floors`) dotted. Returns ``{"trials": [(seed, lr)], "missing": str |
    None, "titles"}`` (``missing`` says why nothing is drawn).

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, axes = plt.subplots(1, 2)
        >>> plot_phase_b_group(axes, None, "fixed_retrieve", "t5", "plain")["trials"][:2]
        [(0, 0.001), (1, 0.001)]
        >>> plt.close(fig)
    """
    if not isinstance(axes, (Sequence, np.ndarray)) or len(axes) != 2:
        raise TypeError(f"axes must be two matplotlib Axes (acc_1x, beyond_4x), got {axes!r}")
    left, right = check_axes("axes[0]", axes[0]), check_axes("axes[1]", axes[1])
    task = check_choice("task", task, ALL_TASKS)
    scheme = check_choice("scheme", scheme, GRID_SCHEMES)
    variant = check_choice("variant", variant, VARIANTS)
    data = _results_arg("results_b", results_b, "alternatives_v2_B.json")
    rows = [r for r in data["rows"] if isinstance(r, Mapping) and r.get("phase") == "B"
            and r.get("checkpoint") == "trajectory"
            and (r.get("task"), r.get("scheme"), r.get("variant")) == (task, scheme, variant)]
    check_rows("results_b rows", rows, ("seed", "lr", "steps", "acc_1x", "beyond_4x"), nonempty=False)
    name = f"{task.replace('_', ' ')}, {SCHEME_NAMES[scheme]}, {_WHERE[variant]}"
    if not rows:
        msg = f"{name}: not in phase B's results"
        for ax in (left, right):
            _note(ax, msg)
        return {"trials": [], "missing": msg, "titles": []}
    trials: dict[tuple, list[Mapping]] = {}
    for r in sorted(rows, key=lambda r: (r["lr"], r["seed"], r["steps"])):
        trials.setdefault((r["seed"], r["lr"]), []).append(r)
    lrs = sorted({lr for _, lr in trials})
    colors = {lr: f"C{i}" for i, lr in enumerate(lrs)}
    early = GridProtocol().steps
    for ax, key in ((left, "acc_1x"), (right, "beyond_4x")):
        for (seed, lr), t in trials.items():
            ax.plot([r["steps"] for r in t], [math.nan if r[key] is None else r[key] for r in t], color=colors[lr],
                    linewidth=0.9, alpha=0.8)
        ax.axvline(early, color="gray", linewidth=0.8, linestyle="--")
        ax.set_xlabel("training step")
        ax.set_ylim(-0.02, 1.05)
    left.axhline(FIT, color="black", linewidth=0.8, linestyle=":")
    right.axhline(task_floors(task)["beyond_4x"], color="black", linewidth=0.8, linestyle=":")
    left.set_ylabel("accuracy in distribution")
    right.set_ylabel("accuracy beyond L at 4x")
    for lr in lrs:
        left.plot([], [], color=colors[lr], label=f"lr {lr:g}")
    left.legend(fontsize=9, loc="lower right")
    titles = [f"{name}: {len(trials)} trials in distribution (dotted: fit at {FIT:g})",
              f"beyond L at 4x (dotted: the floor; dashed: step {early:,})"]
    _title(left, titles[0])
    _title(right, titles[1])
    return {"trials": sorted(trials, key=lambda k: (k[1], k[0])), "missing": None, "titles": titles}


__all__ += ["format_phase_b_table", "phase_b_summary", "phase_b_table", "phase_b_trials", "plot_phase_b_group"]
