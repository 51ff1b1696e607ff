"""Chapter 8's experiment: a tiny ViT trained at one resolution, evaluated at larger ones.

    nice -n 10 python experiments/vision_resolution.py            # the saved results (resumable)
    python experiments/vision_resolution.py --quick               # a smoke run, nothing saved
    python experiments/vision_resolution.py --max-minutes 20 --commit   # stop before 20 minutes, commit every pack

Protocol (see ``experiments/README.md``): :class:`posenc.book.vision.VisionConfig`'s
defaults, which are the protocol that ran: scikit-learn's digits upsampled to 16 x 16 and
cut into 4 x 4 patches (a 4 x 4 grid); six positional schemes
(:data:`posenc.book.vision.VISION_SCHEMES`); one recipe for all (AdamW, lr 2e-3, weight
decay 0.05, batch 128, random zoomed crops with zoom in [1, 1.6]), stopped on the
validation loss (patience 8 epochs, at most 60, best epoch kept); seeds 0-2; test accuracy
and loss at 12, 16, 20, 24 and 32 pixels (grids 3 x 3 to 8 x 8), and for 2-D sin-cos and
the RoPE schemes also with the patch coordinates interpolated into the training range
(keys ``iacc_<size>``). A unit is one trial (``<scheme>:<seed>``), seed-major so that a
stopped run stays balanced; :class:`posenc.book.results.Experiment` saves after every
pack, resumes, and records provenance and the fingerprint.
"""

from __future__ import annotations

import torch

from posenc.book.resources import DATA_DIR
from posenc.book.results import Experiment, loss_fingerprint
from posenc.book.vision import VISION_SCHEMES, VisionConfig, first_losses, run_vision_trial

CONFIG = VisionConfig()  # its defaults are the protocol that ran
QUICK = VisionConfig(max_epochs=2, patience=10)
SEEDS = (0, 1, 2)
PLAN = [(scheme, seed) for seed in SEEDS for scheme in VISION_SCHEMES]


def setup(quick: bool) -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def run_unit(unit: tuple, ctx) -> dict:
    scheme, seed = unit
    row = run_vision_trial(scheme, seed, QUICK if ctx.quick else CONFIG)
    row = {k: round(v, 4) if isinstance(v, float) and k != "seconds" else v for k, v in row.items()}
    ctx.log(str(row))
    return {"rows": [row]}


def fingerprint() -> dict:
    """The first 20 training losses of seed 0 of every scheme, at this commit."""
    return loss_fingerprint(first_losses, CONFIG.to_dict(), [(0, {"scheme": s}) for s in VISION_SCHEMES])


EXPERIMENT = Experiment(
    "vision_resolution", DATA_DIR / "vision_resolution.json", run_unit, PLAN, pack=3, setup=setup,
    done=lambda saved: [f"{r['scheme']}:{r['seed']}" for r in saved["rows"]],
    fingerprint=fingerprint, metadata={"config": CONFIG.to_dict()},
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
