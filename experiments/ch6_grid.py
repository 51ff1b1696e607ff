"""Chapter 6's fixed-budget grid, phase A: every task, scheme and variant at three learning rates and four seeds.

    OMP_NUM_THREADS=1 nice -n 5 python experiments/ch6_grid.py --max-minutes 60 --commit   # resumes, commits each pack
    python experiments/ch6_grid.py --quick                                                  # a smoke run, nothing saved

The protocol is :class:`posenc.book.synthetic.GridProtocol` with its defaults (no
override here): the chapter's model (2 layers, width 32, 4 heads), 2,000 steps for every
trial (nothing stops early), batch 32, warm-up 100 steps then constant, learning rates
1e-3, 3e-3 and 1e-2, seeds 0-3; the held-out loss every 50 steps (the best checkpoint is
the lowest), a full scoring every 250 steps (the trajectory), and the best and final
checkpoints scored with per-position curves. Training lengths follow
:data:`posenc.book.synthetic.LENGTH_RULE`. Tasks: the four pointer tasks first (the
headline), then associative recall, copy after a separator and the order-only task;
schemes: all but the learned table (it cannot run past its length).

A unit is one (task, scheme, variant) group: its 12 trials (3 learning rates x 4 seeds)
trained as one batched model (:func:`posenc.book.synthetic.run_grid_pack` on
:func:`posenc.book.engine.fit_batched`; a trial's numbers do not depend on its pack). Every
pack (one unit) is saved atomically and, with ``--commit``, committed alone
(``git commit -- <results file>``): a stop loses at most the group in progress. Rows:
:func:`posenc.book.synthetic.trial_rows` (trajectory, best and final checkpoints of every
trial), with ``phase = "A"``. Results:
``posenc/book/data/alternatives_v2.json``, with the protocol, the length rule, provenance
and the first 20 losses of one trial per (scheme, variant) as its fingerprint.
"""

from __future__ import annotations

import torch

from posenc.book import synthetic as S
from posenc.book.resources import DATA_DIR  # the saved results ship with posenc.book
from posenc.book.results import Experiment, loss_fingerprint
from posenc.book.tasks import NEW_TASKS, TASKS

PROTOCOL = S.GridProtocol()
QUICK = S.GridProtocol(steps=20, loss_every=10, score_every=10, eval_size=16, heldout_size=16, seeds=(0,))
OUT = DATA_DIR / "alternatives_v2.json"
ORDER = TASKS + NEW_TASKS  # the existing tasks first: the chapter's headline


def plan(saved: dict) -> list[tuple]:
    return [("A", task, scheme, variant) for task in ORDER for scheme in S.GRID_SCHEMES for variant in S.VARIANTS]


def run_unit(unit: tuple, ctx) -> dict:
    phase, task, scheme, variant = unit
    protocol = QUICK if ctx.quick else PROTOCOL
    members = [(seed, lr) for lr in protocol.lrs for seed in protocol.seeds]
    trials = S.run_grid_pack(task, scheme, variant, members, protocol)
    return {"rows": [{**r, "phase": phase} for trial in trials for r in S.trial_rows(trial)]}


def fingerprint() -> dict:
    # one trial per (scheme, variant), the tasks taken in turn so that every task is covered
    trials = [(0, {"task": ORDER[i % len(ORDER)], "scheme": scheme, "variant": variant, "lr": 3e-3})
              for i, (scheme, variant) in enumerate((s, v) for s in S.GRID_SCHEMES for v in S.VARIANTS)]
    return loss_fingerprint(S.first_losses, PROTOCOL.to_dict(), trials, n=20)


def setup(quick: bool) -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for scheme in S.GRID_SCHEMES:  # import now what models import lazily: a long run uses the code it started with
        PROTOCOL.run_config("bos", 1e-3).model(scheme)


EXPERIMENT = Experiment(
    "ch6_grid",
    OUT,
    run_unit,
    plan,
    protocol={**PROTOCOL.to_dict(), "length_rule": S.LENGTH_RULE},
    pack=1,
    fingerprint=fingerprint,
    setup=setup,
    metadata={
        "description": "Chapter 6's fixed-budget grid (issue 30), phase A: 7 tasks x 7 schemes x {plain, bos} "
        "x 3 learning rates x 4 seeds, 2,000 steps each; best held-out-loss and final checkpoints",
        "command": "OMP_NUM_THREADS=1 nice -n 5 python experiments/ch6_grid.py --max-minutes M --commit",
        "config": {**PROTOCOL.to_dict(), "length_rule": S.LENGTH_RULE},
    },
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
