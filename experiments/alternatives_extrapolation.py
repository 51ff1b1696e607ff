"""Chapter 6's experiment: every positional scheme on every task, trained until it stops improving.

    python experiments/alternatives_extrapolation.py --workers 16   # the saved results
    python experiments/alternatives_extrapolation.py --quick        # a smoke run, nothing saved

Protocol (see ``experiments/README.md``):

* tasks: :data:`posenc.book.tasks.TASKS`; schemes: :data:`posenc.book.models.SCHEMES`;
  two variants of every run: without (``"plain"``) and with (``"bos"``) a
  beginning-of-sequence token;
* every run is scored every ``--eval-every`` steps and stops once its in-distribution
  accuracy has not improved by more than ``--min-delta`` for ``--patience`` evaluations
  (or at the ``--steps`` budget);
* the learning rate of every (task, scheme, variant) is chosen from ``--lrs`` (linear
  warm-up over ``--warmup`` steps, then constant) on the held-out seed ``--tune-seed``,
  by the in-distribution accuracy only; the chosen rate is then run with seeds
  ``0 .. --seeds - 1``.

Results go to ``posenc/book/data/alternatives.json`` (``--out``): a dict with a list
``rows``, one per trial and evaluation step, with ``task``, ``scheme``, ``variant``,
``seed``, ``role`` (``"tune"`` or ``"main"``), ``lr``, ``steps``, ``acc_1x``, ``acc_2x``,
``acc_4x`` (all scored positions) and ``beyond_2x``, ``beyond_4x`` (only the positions
beyond the training length); the last row of a trial has ``final: true`` and the
per-position accuracies at 4x, the parameter counts, the stopping reason and, for RoPE,
the context extensions ``ext_<method>``. The file is rewritten (atomically) after every
trial, and a re-run skips the trials already in it: a stopped run loses only the trials
in progress (one per worker). Accuracies are rounded to 4 decimals.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

import torch

import posenc
from posenc.book import results as res
from posenc.book.resources import DATA_DIR  # the saved results ship with posenc.book
from posenc.book.models import SCHEMES
from posenc.book.tasks import TASKS
from posenc.book.training import RunConfig, run_trial

HERE = Path(__file__).resolve().parent
VARIANTS = ("plain", "bos")
SCORE_KEYS = ("acc_1x", "acc_2x", "beyond_2x", "acc_4x", "beyond_4x")


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or math.isnan(x) else round(x, digits)


def trial_key(row: dict) -> tuple:
    return (row["task"], row["scheme"], row["variant"], row["role"], row["seed"], row["lr"])


def run_one(spec: dict) -> list[dict]:
    """Train one trial (in a worker process) and return its rows."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    config = RunConfig(bos=spec["variant"] == "bos", lr=spec["lr"], **spec["config"])
    r = run_trial(spec["scheme"], spec["task"], spec["seed"], config, per_position=True, extension=True)
    base = {k: spec[k] for k in ("task", "scheme", "variant", "role", "seed", "lr")}
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
    return rows


def fingerprint(saved: dict) -> dict:
    """The first 20 training losses of one trial per scheme (seed 0 at its group's chosen rate; the
    tasks and variants taken in turn, so every one appears), at this commit
    (:func:`posenc.book.training.first_losses`)."""
    from posenc.book.results import loss_fingerprint
    from posenc.book.training import first_losses

    tasks = list(dict.fromkeys(r["task"] for r in saved["rows"]))
    trials = []
    for i, scheme in enumerate(dict.fromkeys(r["scheme"] for r in saved["rows"])):
        task, variant = tasks[i % len(tasks)], VARIANTS[i % len(VARIANTS)]
        lr = saved["chosen_lr"][f"{task}/{scheme}/{variant}"]
        trials.append((0, {"task": task, "scheme": scheme, "variant": variant, "lr": lr}))
    return loss_fingerprint(first_losses, saved["config"], trials)


def extends(old: dict, new: dict) -> bool:
    """Whether protocol ``new`` only raises the step budget of ``old``.

    A trial is deterministic given its seed, so under a larger budget every trial that
    stopped by patience would stop at the same step with the same scores: it is kept.
    Only the trials that reached the old budget have to be run again (from scratch).
    """
    same = {k: v for k, v in old.items() if k != "steps"} == {k: v for k, v in new.items() if k != "steps"}
    return same and new["steps"] > old["steps"]


def drop_budget_stopped(rows: list[dict]) -> tuple[list[dict], int]:
    """The rows without the trials (all their checkpoints) whose last row says ``stop: budget``."""
    rerun = {trial_key(r) for r in rows if r.get("final") and r.get("stop") == "budget"}
    return [r for r in rows if trial_key(r) not in rerun], len(rerun)


def choose_lr(tune_rows: list[dict]) -> float:
    """The learning rate with the best final in-distribution accuracy (ties within 0.005: fewer steps, then smaller lr)."""
    best = max(r["acc_1x"] for r in tune_rows)
    close = [r for r in tune_rows if r["acc_1x"] >= best - 0.005]
    return min(close, key=lambda r: (r["steps"], r["lr"]))["lr"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)))
    parser.add_argument("--tasks", nargs="*", default=list(TASKS))
    parser.add_argument("--schemes", nargs="*", default=list(SCHEMES))
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--tune-seed", type=int, default=100)
    parser.add_argument("--lrs", type=float, nargs="*", default=[1e-3, 3e-3, 1e-2])
    parser.add_argument("--steps", type=int, default=4000, help="budget (maximum steps) per trial")
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--patience", type=int, default=4)
    parser.add_argument("--min-delta", type=float, default=0.005)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--max-minutes", type=float, default=math.inf, help="submit no new trial after this")
    parser.add_argument("--machine", default=None, help="a description of the machine, saved with the results")
    parser.add_argument("--quick", action="store_true", help="a tiny grid for a smoke test; nothing saved unless --out")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.eval_every, args.patience, args.seeds = 40, 20, 1, 1
        args.tasks, args.schemes, args.lrs = args.tasks[:1], ["none", "rope"], [3e-3, 1e-2]
    out = args.out or (None if args.quick else DATA_DIR / "alternatives.json")
    bad = sorted(set(args.tasks) - set(TASKS)) + sorted(set(args.schemes) - set(SCHEMES))
    bad += sorted(set(args.variants) - set(VARIANTS))
    if bad:
        parser.error(f"unknown task, scheme or variant: {bad}")
    shared = dict(
        steps=args.steps, eval_every=args.eval_every, patience=args.patience, min_delta=args.min_delta, warmup=args.warmup
    )

    rows: list[dict] = []
    meta: dict = {}
    if out is not None and out.exists():
        saved = res.read_results(out)
        old = saved.get("protocol", {}).get("shared")
        if old == shared:
            rows, meta = saved.pop("rows"), saved
            print(f"resuming: {sum(1 for r in rows if r.get('final'))} trials in {out}", flush=True)
        elif old is not None and extends(old, shared):
            rows, meta = saved.pop("rows"), saved
            rows, n_rerun = drop_budget_stopped(rows)
            meta.setdefault("budget_history", []).append({"from": old["steps"], "to": shared["steps"], "rerun": n_rerun})
            print(f"budget {old['steps']} -> {shared['steps']}: keeping the trials that stopped by patience, "
                  f"re-running the {n_rerun} that stopped at the budget", flush=True)
        else:
            print(f"{out} holds another protocol: starting afresh", flush=True)
    done = {trial_key(r): r for r in rows if r.get("final")}
    sessions = meta.get("sessions", [])

    groups = [(t, s, v) for t in args.tasks for s in args.schemes for v in args.variants]

    def spec(group: tuple, role: str, seed: int, lr: float) -> dict:
        t, s, v = group
        return dict(task=t, scheme=s, variant=v, role=role, seed=seed, lr=lr, config=shared)

    def ready_specs() -> list[dict]:
        """Trials whose prerequisites are met and that are not done."""
        todo = []
        for g in groups:
            tune = [spec(g, "tune", args.tune_seed, lr) for lr in args.lrs]
            missing = [sp for sp in tune if trial_key(sp) not in done]
            if missing:
                todo += missing
                continue
            lr = choose_lr([done[trial_key(sp)] for sp in tune])
            todo += [sp for seed in range(args.seeds) if trial_key(sp := spec(g, "main", seed, lr)) not in done]
        return todo

    def save(total: float, n_new: int) -> None:
        if out is None:
            return
        chosen = {}
        for g in groups:
            tune = [done.get(trial_key(spec(g, "tune", args.tune_seed, lr))) for lr in args.lrs]
            if all(tune):
                chosen["/".join(g)] = choose_lr(tune)
        # main trials at a rate that is no longer the chosen one (a re-run tuning trial
        # changed the choice) are not part of the protocol: drop them
        kept = [r for r in rows if r["role"] != "main" or chosen.get("/".join((r["task"], r["scheme"], r["variant"])), r["lr"]) == r["lr"]]
        for key in [k for k, r in done.items() if r["role"] == "main" and chosen.get("/".join(k[:3]), r["lr"]) != r["lr"]]:
            del done[key]
        rows[:] = kept
        res.write_results(
            out,
            rows,
            description="Chapter 6 experiment: a small causal transformer per positional scheme, task and "
            "variant (plain / with a beginning-of-sequence token), trained until it stops improving; "
            "accuracy in distribution (acc_1x), over all scored positions at 2x and 4x the training length "
            "(acc_2x, acc_4x) and over the positions beyond the training length only (beyond_2x, beyond_4x). "
            "null = the model cannot run at that length (learned embeddings past max_len).",
            command="python experiments/alternatives_extrapolation.py " + " ".join(sys.argv[1:] if argv is None else argv),
            config=RunConfig(**shared).to_dict(),
            protocol={
                "shared": shared,
                "lrs": args.lrs,
                "tune_seed": args.tune_seed,
                "seeds": args.seeds,
                "selection": "highest final acc_1x of the tuning seed; within 0.005 of it: fewest steps, then smaller lr",
            },
            budget_history=meta.get("budget_history", []),
            chosen_lr=chosen,
            versions={"torch": torch.__version__, "posenc": posenc.__version__, "python": platform.python_version()},
            sessions=sessions + [
                {
                    "machine": args.machine or f"{platform.machine()} {platform.processor() or ''}".strip(),
                    "cpus": os.cpu_count(),
                    "workers": args.workers,
                    "wall_seconds": round(total, 1),
                    "trials": n_new,
                }
            ],
        )

    t0 = time.perf_counter()
    n_new = 0
    running: dict = {}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        while True:
            if time.perf_counter() - t0 < 60 * args.max_minutes:
                in_flight = {trial_key(sp) for sp in running.values()}
                for sp in ready_specs():
                    if len(running) >= args.workers:
                        break
                    if trial_key(sp) not in in_flight:
                        running[pool.submit(run_one, sp)] = sp
                        in_flight.add(trial_key(sp))
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                sp = running.pop(fut)
                trial_rows = fut.result()
                rows.extend(trial_rows)
                done[trial_key(sp)] = trial_rows[-1]
                n_new += 1
                f = trial_rows[-1]
                print(
                    f"{time.perf_counter() - t0:7.0f}s {f['task']:16s} {f['scheme']:10s} {f['variant']:5s} {f['role']} "
                    f"seed {f['seed']:3d} lr {f['lr']:.0e}: {f['steps']:5d} steps ({f['stop']}) "
                    + " ".join(f"{k}={f[k]}" for k in SCORE_KEYS),
                    flush=True,
                )
                save(time.perf_counter() - t0, n_new)
    total = time.perf_counter() - t0
    left = len(ready_specs())
    print(f"{n_new} trials in {total:.0f} s; {left} ready trials left", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
