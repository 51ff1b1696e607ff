"""Chapter 6: a few phase-A trials retrained to their saved scores, their best weights kept (issue 30, item 4).

    OMP_NUM_THREADS=1 nice -n 5 python experiments/ch6_checkpoints.py   # writes posenc/book/data/ch6_checkpoints.json (resumable)
    python experiments/ch6_checkpoints.py --quick                          # smoke run, nothing saved

Phase A of the grid (``ch6_grid.py``) keeps no weights. The mechanism figures that need
them (a trained RoPE head's q . R(d) k, T5's untrained buckets, NoPE + BOS's 1/(t+2)
probe) read the trials below, retrained by ``posenc.book.synthetic.train_checkpoint``
through the grid's own training path and compared with the saved best row of phase A
(``matches_saved``: every score within 1e-3). One unit per trial, about 35 s of CPU each
on one thread; the weights are stored exactly (float32, base64), about 140 kB a trial.
Not a checkpoint per group: the issue's one-seed-per-group run (98 trials, about an hour of
CPU) is left for a machine with time for it.
"""

from __future__ import annotations

import torch

from posenc.book import synthetic as S
from posenc.book.resources import DATA_DIR
from posenc.book.results import Experiment, loss_fingerprint, read_results

PROTOCOL = S.GridProtocol()
QUICK = S.GridProtocol(steps=4, loss_every=2, score_every=4, eval_size=4, heldout_size=4, batch_size=4, warmup=0)
OUT = DATA_DIR / "ch6_checkpoints.json"
#: (task, scheme, variant, seed, lr): seed 0 at the group's rate chosen on held-out loss in phase A (1e-2 for the
#: last three; RoPE at 1e-3, all of whose seeds fit)
TRIALS = [
    ("offset_copy", "rope", "plain", 0, 1e-3),
    ("offset_copy", "t5", "plain", 0, 1e-2),
    ("far_retrieve", "none", "bos", 0, 1e-2),
    ("offset_copy", "none", "bos", 0, 1e-2),
]


def run_unit(unit: tuple, ctx) -> dict:
    task, scheme, variant, seed, lr = unit
    saved = None if ctx.quick else read_results(DATA_DIR / "alternatives_v2.json")
    trained = S.train_checkpoint(task, scheme, variant, seed, lr, protocol=QUICK if ctx.quick else PROTOCOL,
                                 saved=saved)
    ctx.log(f"{unit}: best step {trained['best_step']}, differences from phase A {trained['differences']}")
    return {"rows": [S.checkpoint_row(trained, task, scheme, variant, seed, lr)]}


def fingerprint() -> dict:
    trials = [(seed, {"task": task, "scheme": scheme, "variant": variant, "lr": lr})
              for task, scheme, variant, seed, lr in TRIALS]
    return loss_fingerprint(S.first_losses, PROTOCOL.to_dict(), trials, n=20)


def setup(quick: bool) -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


EXPERIMENT = Experiment(
    "ch6_checkpoints",
    OUT,
    run_unit,
    TRIALS,
    protocol=PROTOCOL.to_dict(),
    fingerprint=fingerprint,
    setup=setup,
    metadata={
        "description": "Chapter 6: phase-A trials retrained by train_checkpoint, best held-out-loss weights kept "
        "(float32, base64) beside the differences from the saved row",
        "command": "OMP_NUM_THREADS=1 nice -n 5 python experiments/ch6_checkpoints.py",
        "config": PROTOCOL.to_dict(),
    },
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
