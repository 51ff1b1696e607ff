"""Throughput of chapter 6's trials trained as one batched model, against one model at a time.

Workload: chapter 6's model (``RunConfig()``: width 32, 4 heads, 2 layers, batches of 32
sequences of 16 tokens), ``E`` trials (seeds 0..E-1, three learning rates) of one scheme
on ``offset_copy`` for ``S`` steps, on ONE thread (``torch.set_num_threads(1)``):

* ``loop``: :func:`posenc.book.training.train_model`, one trial after the other (Adam,
  the masked loss), as the saved grid trained them;
* ``pack``: :func:`posenc.book.training.train_pack`, the ``E`` trials as one batched
  model (stacked weights, ``vmap``, per-trial Adam and learning rate), one held-out
  evaluation per trial at the end included.

The two run interleaved (each repetition runs both, the order alternating), and each is
timed in CPU seconds of this process (``time.process_time``), which other jobs on a
shared machine disturb less than wall time. The result is trial-steps per CPU second
and the ratio pack / loop per scheme, in one run.

Run from the repository root:  python benchmarks/bench_batched_trials.py  [--trials 12] [--steps 30] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch

from posenc.book.engine import seeded
from posenc.book.training import RunConfig, train_model, train_pack

LRS = (1e-3, 3e-3, 1e-2)


def run_loop(scheme: str, config: RunConfig, trials: int) -> float:
    t = time.process_time()
    for seed in range(trials):
        with seeded(seed):
            model = config.model(scheme)
        train_model(model, "offset_copy", dataclasses.replace(config, lr=LRS[seed % 3]), seed=seed)
    return time.process_time() - t


def run_pack(scheme: str, config: RunConfig, trials: int) -> float:
    t = time.process_time()
    train_pack(scheme, "offset_copy", list(range(trials)), [LRS[s % 3] for s in range(trials)], config)
    return time.process_time() - t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--schemes", nargs="*", default=["none", "rope", "t5", "randomized"])
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    config = RunConfig(steps=args.steps, warmup=10, eval_every=0)
    trial_steps = args.trials * args.steps
    print(f"{args.trials} trials x {args.steps} steps, 1 thread, torch {torch.__version__}; CPU ms per trial-step (median of {args.repeats})")
    print(f"{'scheme':12s} {'loop':>8s} {'pack':>8s} {'pack/loop throughput':>22s}")
    ratios = []
    for scheme in args.schemes:
        times: dict[str, list[float]] = {"loop": [], "pack": []}
        for r in range(args.repeats):
            order = ("loop", "pack") if r % 2 == 0 else ("pack", "loop")
            for name in order:
                run = run_loop if name == "loop" else run_pack
                times[name].append(run(scheme, config, args.trials))
        loop, pack = (statistics.median(times[k]) * 1000 / trial_steps for k in ("loop", "pack"))
        ratios.append(loop / pack)
        print(f"{scheme:12s} {loop:8.2f} {pack:8.2f} {loop / pack:21.2f}x")
    print(f"geometric mean of the ratios: {statistics.geometric_mean(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
