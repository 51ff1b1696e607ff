"""Chapter 6's fixed-budget grid, phase A: every task, scheme and variant at three learning rates and four seeds.

    OMP_NUM_THREADS=1 nice -n 5 python experiments/ch6_grid.py --max-minutes 60 --commit   # resumes, commits each pack
    python experiments/ch6_grid.py --quick                                                  # a smoke run, nothing saved
    python experiments/ch6_grid.py --phase B --max-minutes 60 --commit                       # phases B, C, D (own files)

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


# --------------------------------------------------------------------------- phases B, C and D (``--phase B|C|D``)
#
# Each phase writes its own file beside phase A's (the running phase A rewrites its file from its own state, so no
# other process may write there) and reads phase A's rows for its rules, which were fixed before the runs
# (posenc.book.synthetic: phase_b_members, needs_more_seeds and band_centre, ablation_lr and ABLATIONS). A phase
# plans only the groups phase A has finished, so it can run while A is still running; run it again when A grows.

PROTOCOL_B = S.GridProtocol(steps=S.PHASE_B_STEPS)
QUICK_B = S.GridProtocol(steps=30, loss_every=10, score_every=10, eval_size=16, heldout_size=16, seeds=(0,))
PHASE_FILES = {phase: DATA_DIR / f"alternatives_v2_{phase}.json" for phase in "BCD"}


def phase_a_rows() -> list[dict]:
    """Phase A's rows as they stand (an empty list if its file does not exist yet)."""
    return S.load_grid(OUT)["rows"] if OUT.exists() else []


def _done_groups(rows: list[dict]) -> set[tuple]:
    full = len(PROTOCOL.lrs) * len(PROTOCOL.seeds)
    trials: dict[tuple, set] = {}
    for r in rows:
        if r.get("checkpoint") == "final":
            trials.setdefault((r["task"], r["scheme"], r["variant"]), set()).add((r["seed"], r["lr"]))
    return {g for g, t in trials.items() if len(t) == full}


_VERDICTS: dict = {}


def _verdicts(rows: list[dict]) -> dict:
    # grid_verdicts of phase A's rows, computed once per size of the file (the plan is asked after every unit)
    if _VERDICTS.get("n") != len(rows):
        _VERDICTS.update(n=len(rows), v=S.grid_verdicts(rows) if rows else {})
    return _VERDICTS["v"]


def _rows_of(trials: list[dict], phase: str, **extra) -> list[dict]:
    return [{**r, "phase": phase, **extra} for trial in trials for r in S.trial_rows(trial)]


def plan_b(saved: dict) -> list[tuple]:
    rows = phase_a_rows()
    done = _done_groups(rows)
    return [("B", *g) for g in S.PHASE_A_GROUPS if g in done and S.phase_b_members(rows, g)]


def run_unit_b(unit: tuple, ctx) -> dict:
    _, task, scheme, variant = unit
    rows = [] if ctx.quick else phase_a_rows()
    members = S.phase_b_members(rows, (task, scheme, variant)) or [(0, 1e-3)]
    protocol = QUICK_B if ctx.quick else PROTOCOL_B
    trials = S.run_grid_pack(task, scheme, variant, members, protocol)
    out = []
    for trial in trials:  # the replay reproduces phase A's first 2,000 steps: say whether it did, bit for bit
        a = [r for r in rows if (r["task"], r["scheme"], r["variant"], r["seed"], r["lr"], r.get("checkpoint"),
                                 r["steps"]) == (task, scheme, variant, trial["seed"], trial["lr"], "trajectory",
                                                 PROTOCOL.steps)]
        b = [t for t in S.trial_rows(trial) if t["checkpoint"] == "trajectory" and t["steps"] == PROTOCOL.steps]
        same = bool(a and b) and all(a[0].get(k) == b[0].get(k) for k in ("heldout_loss", "acc_1x", "beyond_4x"))
        out += _rows_of([trial], "B", replays_a=same)
    return {"rows": out}


def plan_c(saved: dict) -> list[tuple]:
    rows = phase_a_rows()
    done, verdicts = _done_groups(rows), _verdicts(rows)
    return [("C", *g) for g in S.PHASE_A_GROUPS if g in done and S.needs_more_seeds(verdicts[g])]


def run_unit_c(unit: tuple, ctx) -> dict:
    _, task, scheme, variant = unit
    if ctx.quick:
        lr, protocol, seeds = 1e-3, QUICK, S.PHASE_C_SEEDS[:1]
    else:
        lr, protocol, seeds = S.band_centre(_verdicts(phase_a_rows())[(task, scheme, variant)]["band"]), PROTOCOL, S.PHASE_C_SEEDS
    trials = S.run_grid_pack(task, scheme, variant, [(seed, lr) for seed in seeds], protocol)
    return {"rows": _rows_of(trials, "C", band_centre=lr)}


def plan_d(saved: dict) -> list[tuple]:
    done = _done_groups(phase_a_rows())
    return [("D", *u) for u in S.ablation_units() if u[1:] in done]


def run_unit_d(unit: tuple, ctx) -> dict:
    _, ablation, task, scheme, variant = unit
    if ctx.quick:
        lr, seeds = S.PHASE_D_LR, S.PHASE_D_SEEDS[:1]
    else:
        best = [r for r in phase_a_rows() if (r["task"], r["scheme"], r["variant"]) == (task, scheme, variant)
                and r.get("checkpoint") == "best"]
        lr, seeds = S.ablation_lr(S.lr_band(best)), S.PHASE_D_SEEDS
    a = S.ABLATIONS[ablation]
    protocol = S.ablation_protocol(ablation, QUICK if ctx.quick else PROTOCOL)
    modify = S.rope_base_modifier(a["rope_base"]) if a["rope_base"] else None
    trials = S.run_grid_pack(task, scheme, variant, [(seed, lr) for seed in seeds], protocol, modify=modify)
    return {"rows": _rows_of(trials, "D", ablation=ablation, overrides=a["overrides"], rope_base=a["rope_base"])}


def fingerprint_d() -> dict:
    trials = [(0, {"ablation": name, "task": S.ABLATIONS[name]["tasks"][0], "scheme": S.ABLATIONS[name]["schemes"][0],
                   "variant": "plain", "lr": S.PHASE_D_LR}) for name in S.ABLATIONS]
    return loss_fingerprint(S.ablation_first_losses, PROTOCOL.to_dict(), trials, n=20)


def _fingerprint_from(protocol):
    def fingerprint_phase() -> dict:
        trials = [(0, {"task": task, "scheme": scheme, "variant": "plain", "lr": 3e-3})
                  for task, scheme in (("offset_copy", "none"), ("far_retrieve", "t5"))]
        return loss_fingerprint(S.first_losses, protocol.to_dict(), trials, n=20)

    return fingerprint_phase


_PHASES = {
    "B": (plan_b, run_unit_b, {**PROTOCOL_B.to_dict(), "length_rule": S.LENGTH_RULE,
                               "rule": "phase_b_members: trials whose held-out loss fell > 2 % over their last 500 "
                                       "steps, replayed from step 0 to 5,000 (phase A saved no weights)"},
          _fingerprint_from(PROTOCOL_B), ("B", "offset_copy", "none", "plain")),
    "C": (plan_c, run_unit_c, {**PROTOCOL.to_dict(), "length_rule": S.LENGTH_RULE, "seeds_c": list(S.PHASE_C_SEEDS),
                               "rule": "needs_more_seeds (fit split, or a 2x/4x label uncertain): seeds 4-9 at "
                                       "band_centre (lower median of the fitting rates)"},
          _fingerprint_from(PROTOCOL), ("C", "offset_copy", "none", "plain")),
    "D": (plan_d, run_unit_d, {**PROTOCOL.to_dict(), "length_rule": S.LENGTH_RULE, "seeds_d": list(S.PHASE_D_SEEDS),
                               "ablations": {k: {**v, "variants": list(v["variants"]), "schemes": list(v["schemes"]),
                                                 "tasks": list(v["tasks"])} for k, v in S.ABLATIONS.items()},
                               "rule": "ablation_lr: 3e-3 if it fits in phase A, else the fitting rate nearest it"},
          fingerprint_d, ("D", "rope_base100", "offset_copy", "rope", "plain")),
}


def experiment(phase: str = "A") -> Experiment:
    """Phase A's :data:`EXPERIMENT`, or the experiment of phase B, C or D (its own results file)."""
    if phase == "A":
        return EXPERIMENT
    if phase not in _PHASES:
        raise ValueError(f"phase must be one of A, B, C, D, got {phase!r}")
    plan_fn, run_fn, protocol, fp, quick_unit = _PHASES[phase]
    return Experiment(
        f"ch6_grid_{phase}", PHASE_FILES[phase], run_fn, plan_fn, protocol=protocol, pack=1, fingerprint=fp,
        setup=setup, quick_plan=[quick_unit],
        metadata={"description": f"Chapter 6's grid (issue 30), phase {phase}; rules in the protocol's 'rule'",
                  "command": f"OMP_NUM_THREADS=1 nice -n 5 python experiments/ch6_grid.py --phase {phase} "
                             "--max-minutes M --commit", "config": protocol})


def main(argv: list[str] | None = None) -> int:
    """``--phase A|B|C|D`` (default A, the grid as it always ran) then the harness's own options."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--phase", default="A", choices=("A", "B", "C", "D"))
    args, rest = ap.parse_known_args(sys.argv[1:] if argv is None else argv)
    return experiment(args.phase).main(rest)


if __name__ == "__main__":
    raise SystemExit(main())
