"""Chapter 8's second experiment: the same tiny ViT tested on a resized image and on a larger canvas.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/vision_canvas.py --max-minutes 240 --commit  # resumes, commits each pack
    python experiments/vision_canvas.py --quick                                                 # a smoke run, nothing saved

Why (issue 35, and the prediction written before any data in ``experiments/README.md``,
"Chapter 8: resize against canvas"): the first resolution experiment (3 seeds, since retired)
changed only how many pixels the same view gets, so "positions are learned in units of the
object's size" and "coordinates must stay inside the trained range" predict the same
recoveries there. This grid adds the condition where they disagree.

Protocol: :class:`posenc.book.vision.CanvasConfig` with its defaults (no override here):
the resolution experiment's model, data and recipe (scikit-learn's digits at 16 x 16 in
4 x 4 patches, a 4 x 4 grid; AdamW at 2e-3, batch 128, at most 60 epochs, patience 8 on the
validation loss, best epoch kept; every training batch random zoomed crops with zoom
uniform in [1, 1.6]) except the weight decay, which follows the reference ViT code
(:func:`posenc.book.vision.reference_param_groups`: 0.05 on the weight matrices, none on
biases, norms, the learned table and RoPE-Mixed's frequencies). Six schemes
(:data:`posenc.book.vision.VISION_SCHEMES`), seeds 0-9 (:data:`SEEDS`). Every trained model
is scored (:func:`posenc.book.vision.run_canvas_trial`) on the 400 test digits

- resized to 12, 16, 20, 24 and 32 px (same view, more pixels: grids 3 x 3 to 8 x 8), and
- drawn at 16 px and pasted at a patch-aligned random place (seed 0, the same places for
  every model) on 20, 24 and 32 px canvases, the empty patches masked from attention and
  pooling (larger canvas, same scale),

each plain and, for 2-D sin-cos and the two RoPE schemes, with the coordinates scaled into
the training grid (``iacc``); every score keeps the per-image right/wrong bits, so paired
differences between conditions and schemes have a test-set sampling error as well as a
seed spread. A unit is one trial (``<scheme>:<seed>``), seed-major so that a stopped run
stays balanced; two trials a pack. Results: ``posenc/book/data/vision_canvas.json``, with
provenance and the first 20 training losses of seed 0 of every scheme as its fingerprint.
"""

from __future__ import annotations


from posenc.book.resources import DATA_DIR
from posenc.book.results import Experiment, loss_fingerprint, one_thread
from posenc.book.vision import VISION_SCHEMES, CanvasConfig, first_losses, run_canvas_trial

CONFIG = CanvasConfig()  # its defaults are the protocol
QUICK = CanvasConfig(max_epochs=1, patience=10, n_train=128)
SEEDS = tuple(range(10))
PLAN = [(scheme, seed) for seed in SEEDS for scheme in VISION_SCHEMES]


def run_unit(unit: tuple, ctx) -> dict:
    scheme, seed = unit
    row = run_canvas_trial(scheme, seed, QUICK if ctx.quick else CONFIG)
    ctx.log(", ".join(f"{k}={v}" for k, v in row.items() if "right" not in k and "loss" not in k))
    return {"rows": [row]}


def fingerprint() -> dict:
    """The first 20 training losses of seed 0 of every scheme, at this commit."""
    return loss_fingerprint(first_losses, CONFIG.to_dict(), [(0, {"scheme": s}) for s in VISION_SCHEMES])


EXPERIMENT = Experiment(
    "vision_canvas", DATA_DIR / "vision_canvas.json", run_unit, PLAN, pack=2, setup=one_thread,
    quick_plan=[("rope_axial", 0), ("sincos_2d", 0)],
    fingerprint=fingerprint,
    metadata={
        "config": CONFIG.to_dict(),
        "description": "Chapter 8's resize/canvas grid (issue 35): 6 schemes x 10 seeds, each model scored on "
        "resized digits (12-32 px) and on training-scale digits pasted on 20-32 px canvases (empty patches masked), "
        "plain and with coordinates scaled into the training grid; per-image right/wrong bits kept",
        "command": "OMP_NUM_THREADS=1 nice -n 10 python experiments/vision_canvas.py --max-minutes M --commit",
    },
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
