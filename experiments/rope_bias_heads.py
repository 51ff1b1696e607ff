"""Chapter 4's fair comparison: a previous-token head with RoPE, an additive encoding or none, with and without q/k biases.

    python experiments/rope_bias_heads.py            # writes posenc/book/data/rope_bias_heads.json (resumable)
    python experiments/rope_bias_heads.py --quick    # smoke test, nothing saved

Every variant is trained with :func:`posenc.book.probes.train_position_head` under one
protocol: Adam, batch 32, held-out loss on 1,024 sequences every 100 steps, the best
weights kept, stop after 5 evaluations without improvement or at 3,000 steps. The learning
rate is chosen per variant from {3e-3, 1e-2, 3e-2} on seed 100 by held-out loss (units
``tune:<variant>:<lr>``); seeds 0-2 then run at the chosen rate (``main:<variant>:<seed>``,
planned once the variant's tuning units are in). :class:`posenc.book.results.Experiment`
saves after every pack, resumes, and records provenance and the fingerprint.
"""

from __future__ import annotations

from posenc.book.probes import first_losses, position_head_unit
from posenc.book.resources import DATA_DIR
from posenc.book.results import Experiment, loss_fingerprint, one_thread, tuning_plan

# (name, encoding, bias, shared)
VARIANTS = [
    ("rope, bias", "rope", True, 0.0),
    ("rope, no bias", "rope", False, 0.0),
    ("rope, no bias, shared direction", "rope", False, 1.0),
    ("additive, bias", "additive", True, 0.0),
    ("additive, no bias", "additive", False, 0.0),
    ("none, no bias", "none", False, 0.0),
]
SETTINGS = {name: {"encoding": e, "bias": b, "shared": s} for name, e, b, s in VARIANTS}
LRS = (3e-3, 1e-2, 3e-2)
TUNE_SEED, SEEDS = 100, (0, 1, 2)
PROTOCOL = {"steps": 3000, "eval_every": 100, "patience": 5, "batch": 32, "content_scale": 1.0}
QUICK = dict(PROTOCOL, steps=20, eval_every=10)
CONFIG = {**PROTOCOL, "lrs": list(LRS), "tune_seed": TUNE_SEED, "seeds": list(SEEDS)}


def plan(saved: dict) -> list[tuple]:
    return tuning_plan(saved, [v[0] for v in VARIANTS], LRS, SEEDS)


def done(saved: dict) -> list[str]:  # the rows of a file written before the harness
    return [f"{r['role']}:{r['variant']}:{r['lr'] if r['role'] == 'tune' else r['seed']}" for r in saved["rows"]]


def run_unit(unit: tuple, ctx) -> dict:
    return position_head_unit(unit, ctx, variants=SETTINGS, lrs=LRS, tune_seed=TUNE_SEED, protocol=PROTOCOL,
                              quick_protocol=QUICK)


def fingerprint() -> dict:
    """The first 20 training losses of every variant's tuning run at the middle rate (all ran), at this commit."""
    return loss_fingerprint(first_losses, CONFIG, [
        (TUNE_SEED, {"encoding": e, "bias": b, "shared": s, "lr": LRS[1]}) for _, e, b, s in VARIANTS])


EXPERIMENT = Experiment(
    "rope_bias_heads", DATA_DIR / "rope_bias_heads.json", run_unit, plan, pack=3, done=done, setup=one_thread,
    fingerprint=fingerprint, metadata={"config": CONFIG},
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
