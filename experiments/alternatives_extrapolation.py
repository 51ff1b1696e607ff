"""Chapter 6's experiment: every positional scheme on every task, trained until it stops improving.

    python experiments/alternatives_extrapolation.py --pack 16     # the saved results (resumable)
    python experiments/alternatives_extrapolation.py --quick       # a smoke run, nothing saved

Protocol (see ``experiments/README.md``, :data:`PROTOCOL`):

* tasks: :data:`posenc.book.tasks.TASKS`; schemes: :data:`posenc.book.models.SCHEMES`;
  two variants of every run: without (``"plain"``) and with (``"bos"``) a
  beginning-of-sequence token;
* every run is scored every 200 steps and stops once its in-distribution accuracy has not
  improved by more than 0.005 for 4 evaluations (or at the budget of 12,000 steps);
* the learning rate of every (task, scheme, variant) is chosen from {1e-3, 3e-3, 1e-2}
  (linear warm-up over 100 steps, then constant) on the held-out seed 100, by the
  in-distribution accuracy only (units ``tune:<task>:<scheme>:<variant>:100:<lr>``); the
  chosen rate is then run with seeds 0-4 (``main:<task>:<scheme>:<variant>:<seed>:<lr>``,
  planned once the group's tuning units are in).

Results go to ``posenc/book/data/alternatives.json``: a dict with a list ``rows``, one per
trial and evaluation step, with ``task``, ``scheme``, ``variant``, ``seed``, ``role``
(``"tune"`` or ``"main"``), ``lr``, ``steps``, ``acc_1x``, ``acc_2x``, ``acc_4x`` (all
scored positions) and ``beyond_2x``, ``beyond_4x`` (only the positions beyond the training
length); the last row of a trial has ``final: true`` and the per-position accuracies at
4x, the parameter counts, the stopping reason and, for RoPE, the context extensions
``ext_<method>``. Accuracies are rounded to 4 decimals. The units run under
:class:`posenc.book.results.Experiment`, one after another: the file is rewritten
atomically after every pack of ``--pack`` units, ``--workers N`` runs packs in ``N``
processes (as for every script on the harness: the same rows, in the same order), and a
re-run skips the trials already in it.
"""

from __future__ import annotations

import math
import sys


from posenc.book.models import SCHEMES
from posenc.book.resources import DATA_DIR  # the saved results ship with posenc.book
from posenc.book.results import Experiment, loss_fingerprint, one_thread
from posenc.book.tasks import TASKS
from posenc.book.training import RunConfig, first_losses, run_trial

VARIANTS = ("plain", "bos")
SCORE_KEYS = ("acc_1x", "acc_2x", "beyond_2x", "acc_4x", "beyond_4x")
SHARED = {"steps": 12000, "eval_every": 200, "patience": 4, "min_delta": 0.005, "warmup": 100}
LRS = (1e-3, 3e-3, 1e-2)
TUNE_SEED, SEEDS = 100, 5
PROTOCOL = {
    "shared": SHARED, "lrs": list(LRS), "tune_seed": TUNE_SEED, "seeds": SEEDS,
    "selection": "highest final acc_1x of the tuning seed; within 0.005 of it: fewest steps, then smaller lr",
}
QUICK = dict(SHARED, steps=40, eval_every=20, patience=1)
GROUPS = [(t, s, v) for t in TASKS for s in SCHEMES for v in VARIANTS]
DESCRIPTION = (
    "Chapter 6 experiment: a small causal transformer per positional scheme, task and "
    "variant (plain / with a beginning-of-sequence token), trained until it stops improving; "
    "accuracy in distribution (acc_1x), over all scored positions at 2x and 4x the training length "
    "(acc_2x, acc_4x) and over the positions beyond the training length only (beyond_2x, beyond_4x). "
    "null = the model cannot run at that length (learned embeddings past max_len)."
)

def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or math.isnan(x) else round(x, digits)


def trial_key(row: dict) -> tuple:
    """The unit of a trial (or of its saved row): ``(role, task, scheme, variant, seed, lr)``."""
    return (row["role"], row["task"], row["scheme"], row["variant"], row["seed"], row["lr"])


def run_unit(unit: tuple, ctx) -> dict:
    """Train one trial and return its rows (one per evaluation step)."""
    role, task, scheme, variant, seed, lr = unit
    config = RunConfig(bos=variant == "bos", lr=lr, **(QUICK if ctx.quick else SHARED))
    r = run_trial(scheme, task, seed, config, per_position=True, extension=True)
    base = {"task": task, "scheme": scheme, "variant": variant, "role": role, "seed": seed, "lr": lr}
    rows = [{**base, "steps": step, **{k: _round(s.get(k)) for k in SCORE_KEYS}} for step, s in r["checkpoints"].items()]
    last = rows[-1]
    last.update(
        final=True,
        stop=r["stop"],
        converged=bool(r["converged"]),
        params=r["params"],
        scheme_params=r["scheme_params"],
        final_loss=_round(r["final_loss"]),
        seconds=round(r["seconds"], 1),
        pos_4x=[_round(a, 3) for a in r["pos_4x"]],
    )
    for method, acc in r.get("extension", {}).items():
        last[f"ext_{method}"] = _round(acc)
    ctx.log(f"{task:16s} {scheme:10s} {variant:5s} {role} seed {seed:3d} lr {lr:.0e}: {last['steps']:5d} steps "
            f"({last['stop']}) " + " ".join(f"{k}={last[k]}" for k in SCORE_KEYS))
    return {"rows": rows}


def choose_lr(tune_rows: list[dict]) -> float:
    """The learning rate with the best final in-distribution accuracy (ties within 0.005: fewer steps, then smaller lr)."""
    best = max(r["acc_1x"] for r in tune_rows)
    close = [r for r in tune_rows if r["acc_1x"] >= best - 0.005]
    return min(close, key=lambda r: (r["steps"], r["lr"]))["lr"]


def chosen_lrs(saved: dict) -> dict[str, float]:
    """The chosen rate of every group whose tuning trials are all in ``saved`` (``"task/scheme/variant"``)."""
    final = {trial_key(r): r for r in saved["rows"] if r.get("final")}
    chosen = {}
    for g in GROUPS:
        tune = [final.get(("tune", *g, TUNE_SEED, lr)) for lr in LRS]
        if all(tune):
            chosen["/".join(g)] = choose_lr(tune)
    return chosen


def plan(saved: dict) -> list[tuple]:
    """Every group's tuning trials, then its seeds at the chosen rate once those are in."""
    chosen = chosen_lrs(saved)
    units = [("tune", *g, TUNE_SEED, lr) for g in GROUPS for lr in LRS]
    units += [("main", *g, seed, chosen["/".join(g)]) for g in GROUPS if "/".join(g) in chosen for seed in range(SEEDS)]
    return units


def done(saved: dict) -> list[str]:  # the trials of a file written before the harness
    return [":".join(str(p) for p in trial_key(r)) for r in saved["rows"] if r.get("final")]


def fingerprint(saved: dict) -> dict:
    """The first 20 training losses of one trial per scheme (seed 0 at its group's chosen rate, or
    the default rate before one is chosen; the tasks and variants taken in turn, so every one
    appears), at this commit (:func:`posenc.book.training.first_losses`)."""
    tasks = list(dict.fromkeys(r["task"] for r in saved["rows"])) or list(TASKS)
    schemes = list(dict.fromkeys(r["scheme"] for r in saved["rows"])) or list(SCHEMES)
    chosen = saved.get("chosen_lr") or chosen_lrs(saved)
    trials = []
    for i, scheme in enumerate(schemes):
        task, variant = tasks[i % len(tasks)], VARIANTS[i % len(VARIANTS)]
        lr = chosen.get(f"{task}/{scheme}/{variant}", RunConfig().lr)
        trials.append((0, {"task": task, "scheme": scheme, "variant": variant, "lr": lr}))
    return loss_fingerprint(first_losses, RunConfig(**SHARED).to_dict(), trials)


EXPERIMENT = Experiment(
    "alternatives_extrapolation", DATA_DIR / "alternatives.json", run_unit, plan, protocol=PROTOCOL,
    quick_plan=[("tune", TASKS[0], "none", "plain", TUNE_SEED, 3e-3), ("tune", TASKS[0], "rope", "plain", TUNE_SEED, 1e-2)],
    pack=2, done=done, setup=one_thread, fingerprint=lambda: fingerprint(EXPERIMENT.load()),
    metadata={"description": DESCRIPTION, "command": "python experiments/alternatives_extrapolation.py",
              "config": RunConfig(**SHARED).to_dict(), "chosen_lr": chosen_lrs},
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main(sys.argv[1:]))
