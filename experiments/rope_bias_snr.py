"""Chapter 4's additive head at two more signal-to-noise ratios: the encoding 2x and 4x larger than the tokens.

    python experiments/rope_bias_snr.py            # writes posenc/book/data/rope_bias_snr.json (resumable)
    python experiments/rope_bias_snr.py --quick    # smoke test, nothing saved

The additive-encoding head with q/k biases of ``rope_bias_heads.py`` (34 % on the
previous-token task, with token content of scale 1 against an encoding of norm 4) rerun with
the token content scaled by 0.5 and by 0.25 (``content_scale``), everything else as there:
:func:`posenc.book.probes.train_position_head`, Adam, batch 32, held-out loss on 1,024
sequences every 100 steps, the best weights kept, stop after 5 evaluations without
improvement or at 3,000 steps; the learning rate chosen per scale from {3e-3, 1e-2, 3e-2}
on seed 100 by held-out loss (units ``tune:<variant>:<lr>``), then seeds 0-2 at that rate
(``main:<variant>:<seed>``). :class:`posenc.book.results.Experiment` saves after every
pack, resumes, and records provenance and the fingerprint.
"""

from __future__ import annotations

from posenc.book.probes import first_losses, position_head_unit
from posenc.book.resources import DATA_DIR
from posenc.book.results import Experiment, loss_fingerprint, one_thread, tuning_plan

# (name, content_scale): the additive head with biases; content scale 1 is in rope_bias_heads.json
VARIANTS = [
    ("additive, bias, content 0.5", 0.5),
    ("additive, bias, content 0.25", 0.25),
]
SETTINGS = {name: {"encoding": "additive", "bias": True, "content_scale": scale} for name, scale in VARIANTS}
LRS = (3e-3, 1e-2, 3e-2)
TUNE_SEED, SEEDS = 100, (0, 1, 2)
PROTOCOL = {"steps": 3000, "eval_every": 100, "patience": 5, "batch": 32}
QUICK = dict(PROTOCOL, steps=20, eval_every=10)
CONFIG = {**PROTOCOL, "lrs": list(LRS), "tune_seed": TUNE_SEED, "seeds": list(SEEDS),
          "encoding": "additive", "bias": True, "content_scales": [s for _, s in VARIANTS]}


def plan(saved: dict) -> list[tuple]:
    return tuning_plan(saved, [name for name, _ in VARIANTS], LRS, SEEDS)


def run_unit(unit: tuple, ctx) -> dict:
    return position_head_unit(unit, ctx, variants=SETTINGS, lrs=LRS, tune_seed=TUNE_SEED, protocol=PROTOCOL,
                              quick_protocol=QUICK)


def fingerprint() -> dict:
    """The first 20 training losses of the content-0.25 tuning run at the middle rate, at this commit.

    ``first_losses`` reads the content scale from the config, so the fingerprint covers one scale.
    """
    config = {**PROTOCOL, "content_scale": 0.25}
    return loss_fingerprint(first_losses, config, [
        (TUNE_SEED, {"encoding": "additive", "bias": True, "shared": 0.0, "lr": LRS[1]})], dtype="float64")


EXPERIMENT = Experiment(
    "rope_bias_snr", DATA_DIR / "rope_bias_snr.json", run_unit, plan, pack=2, setup=one_thread,
    fingerprint=fingerprint, metadata={"config": CONFIG},
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
