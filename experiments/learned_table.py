"""Chapters 1 and 2: a learned position table meets inputs longer than the table.

    python experiments/learned_table.py            # writes posenc/book/data/learned_table.json (resumable)
    python experiments/learned_table.py --quick    # smoke test, nothing saved

Per seed (0, 1), one unit: a learned-position character model (chapter 7's
:class:`~posenc.book.realtext.TextConfig` with 2,000 steps instead of 1,000, table of
L = 64 rows) is trained on Tiny Shakespeare, then scored on the first 16,384 characters of
the test text in every way it can meet a longer text:

* ``truncate``: consecutive windows of L, each restarting the context;
* ``slide``: windows of L advancing by 16 (every scored character sees 48 to 63 before it),
  4 forward passes per character;
* ``extend`` with the table grown to 4L = 256 rows by tiling or by interpolation
  (:func:`posenc.book.recipes.extend_learned_table`), zero-shot and after 200 steps of
  fine-tuning on windows of 256 (batch 2: the characters per step of the main training),
  AdamW at 1e-3 with 20 warm-up steps, the best validation checkpoint kept;
* ``more training`` (the control): the model trained 200 more steps at L under the
  fine-tune's recipe, then truncated and slid, so that the extension's gain is not just
  200 more steps.

:class:`posenc.book.results.Experiment` saves after every unit, resumes, and records
provenance and the fingerprint.
"""

from __future__ import annotations

import copy
import time


from posenc.book import realtext as rt
from posenc.book.engine import seeded
from posenc.book.recipes import extend_learned_table
from posenc.book.resources import DATA_DIR
from posenc.book.results import Experiment, loss_fingerprint, one_thread

CONFIG = rt.TextConfig(steps=2000, eval_every=500)
PROTOCOL = {"config": CONFIG.to_dict(), "seeds": [0, 1], "factor": 4, "test_chars": 16384, "stride": 16,
            "fine_tune": {"steps": 200, "lr": 1e-3, "warmup": 20, "batch_size": 2}}
QUICK = rt.TextConfig(steps=10, eval_every=5, val_chars=512)


def run_unit(unit: tuple, ctx) -> dict:
    _, seed = unit
    cfg = QUICK if ctx.quick else CONFIG
    ft = dict(PROTOCOL["fine_tune"], steps=4 if ctx.quick else PROTOCOL["fine_tune"]["steps"])
    corpus = rt.load_corpus()
    train, val = corpus.split("train"), corpus.split("val")
    test = corpus.split("test")[: (1024 if ctx.quick else PROTOCOL["test_chars"]) + 1]
    L, long = cfg.train_len, PROTOCOL["factor"] * cfg.train_len
    t0 = time.perf_counter()
    with seeded(seed):
        model = cfg.model("learned", corpus.vocab_size)
    info = rt.train_lm(model, train, val, cfg, seed=seed)
    rows = []

    def score(name, m, length, mode, passes):
        bpc = rt.evaluate_bpc(m, test, length, mode=mode, stride=PROTOCOL["stride"] if mode == "sliding" else None)
        rows.append({"seed": seed, "method": name, "eval_len": length, "mode": mode, "passes_per_char": passes,
                     "bpc": round(bpc, 4)})

    score("truncate", model, L, "nonoverlapping", 1)
    score("slide", model, L, "sliding", L // PROTOCOL["stride"])
    fine = {}
    for init in ("tile", "interpolate"):
        big = extend_learned_table(model, long, init)
        score(f"extend ({init}), zero-shot", big, long, "nonoverlapping", 1)
        out = rt.train_lm(big, train, val, cfg, seed=seed + 100, length=long, steps=ft["steps"], lr=ft["lr"],
                          warmup=ft["warmup"], batch_size=ft["batch_size"])
        fine[init] = {"best_step": out["best_step"], "best_val_bpc": round(out["best_val_bpc"], 4)}
        score(f"extend ({init}), fine-tuned", big, long, "nonoverlapping", 1)
    more = copy.deepcopy(model)
    out = rt.train_lm(more, train, val, cfg, seed=seed + 100, length=L, steps=ft["steps"], lr=ft["lr"],
                      warmup=ft["warmup"], batch_size=ft["batch_size"] * PROTOCOL["factor"])
    fine["more training"] = {"best_step": out["best_step"], "best_val_bpc": round(out["best_val_bpc"], 4)}
    score("more training, truncate", more, L, "nonoverlapping", 1)
    score("more training, slide", more, L, "sliding", L // PROTOCOL["stride"])
    run = {"seed": seed, "best_step": info["best_step"], "best_val_bpc": round(info["best_val_bpc"], 4),
           "fine_tune": fine, "seconds": round(time.perf_counter() - t0, 1)}
    ctx.log(str(run))
    for r in rows:
        ctx.log(str(r))
    return {"rows": rows, "runs": [run]}


def fingerprint() -> dict:
    """The first 20 training losses of the seed-0 base model."""
    return loss_fingerprint(rt.first_losses, CONFIG.to_dict(), [(0, {"scheme": "learned"})])


EXPERIMENT = Experiment(
    "learned_table", DATA_DIR / "learned_table.json", run_unit, [("seed", s) for s in PROTOCOL["seeds"]],
    protocol=PROTOCOL, setup=one_thread, fingerprint=fingerprint,
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
