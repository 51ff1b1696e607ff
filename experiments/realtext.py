"""Chapter 7's experiment: length extrapolation of a character-level model on real text.

    nice -n 10 python experiments/realtext.py             # the saved results (resumable)
    python experiments/realtext.py --quick                # smoke test (about a minute), nothing saved
    python experiments/realtext.py --max-minutes 30 --commit   # stop before 30 minutes, commit every pack

Protocol (see ``experiments/README.md``): one model (:data:`CONFIG`: 2 layers, width 64, 4 heads) per
scheme of :data:`posenc.book.realtext.TEXT_SCHEMES` and seed, trained at ``L = 64``
characters of Tiny Shakespeare with the same budget, learning rate, schedule and batches
(the seed fixes the batches and the initial weights); bits per character on the test text
at ``L, 2L, 4L, 8L`` under non-overlapping and sliding-window evaluation; the loss by
position at ``8L``; a copy probe at distances beyond ``L``; and on the RoPE models the
context extensions (PI, NTK-aware, dynamic NTK, YaRN) zero-shot and after a short
fine-tune at ``4L``.

The units (one trained model with its evaluations, ``main:<scheme>:<seed>``, or the
extensions of one RoPE seed, ``ext:rope:<seed>``) run under
:class:`posenc.book.results.Experiment`: the results file (``posenc/book/data/realtext.json``)
is rewritten atomically after every pack, a re-run skips the units already in it, and the
file carries its ``provenance`` and ``fingerprint``.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import replace
from pathlib import Path

import torch

from posenc.book.engine import seeded
from posenc.book.realtext import (
    EVAL_MODES,
    TEXT_SCHEMES,
    TextConfig,
    evaluate_bpc,
    extension_scaling,
    fine_tune_extension,
    first_losses,
    load_corpus,
    long_range_probe,
    loss_by_position,
    train_lm,
    with_rotary_scaling,
)
from posenc.book.resources import DATA_DIR
from posenc.book.results import Experiment, loss_fingerprint, one_thread

HERE = Path(__file__).resolve().parent
OUT = DATA_DIR / "realtext.json"
CACHE = HERE / "results" / ".realtext_models"  # trained RoPE weights for the extension units (not committed)

CONFIG = TextConfig()  # its defaults are the protocol that ran (L = 64, 2 layers, 1,000 steps of 8 windows)
QUICK = replace(CONFIG, steps=20, eval_every=10, n_layers=1)
SEEDS = (0, 1, 2)
FACTORS = (1, 2, 4, 8)
EVAL_CHARS = 4096          # bpc on the first 4,096 characters of the test text (both modes score the same characters)
STRIDE_FRACTION = 4        # sliding windows advance by n / 4 (every scored character sees >= 3n/4 of context)
LBP_CHARS = 16384          # loss by position: non-overlapping windows of 8L over the first 16,384 test characters
LBP_BIN = 16
PROBE_DISTANCES = (32, 96, 192, 448)
PROBE = {"span": 16, "prefix": 16, "n_probes": 32}
ZERO_SHOT = ("pi", "ntk", "dynamic_ntk", "yarn")
FINE_TUNE = ("none", "pi", "ntk", "yarn")
FT_FACTOR = 4
FT_LR = 1e-3
FT_STEPS = {False: 100, True: 4}  # by ctx.quick

PROTOCOL = {
    "config": CONFIG.to_dict(),
    "seeds": list(SEEDS),
    "eval_lens": [f * CONFIG.train_len for f in FACTORS],
    "eval_chars": EVAL_CHARS,
    "sliding_stride": f"n/{STRIDE_FRACTION}",
    "loss_by_position": {"chars": LBP_CHARS, "length": FACTORS[-1] * CONFIG.train_len, "bin": LBP_BIN},
    "probe": {"distances": list(PROBE_DISTANCES), **PROBE},
    "extensions": {"zero_shot": list(ZERO_SHOT), "fine_tune": list(FINE_TUNE), "fine_tune_factor": FT_FACTOR,
                   "fine_tune_steps": FT_STEPS[False], "fine_tune_lr": FT_LR},
}
PLAN = [unit for seed in SEEDS for unit in [*(("main", s, seed) for s in TEXT_SCHEMES), ("ext", "rope", seed)]]
QUICK_PLAN = [("main", "rope", 0), ("main", "learned", 0), ("ext", "rope", 0)]


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), digits)


def eval_text(val, test, n: int, mode: str) -> torch.Tensor:
    """The evaluation ids: the first EVAL_CHARS + 1 test characters; for sliding windows preceded
    by the last n - stride validation characters, so that both modes score the same characters."""
    text = test[: EVAL_CHARS + 1]
    if mode == "sliding":
        text = torch.cat([val[-(n - max(1, n // STRIDE_FRACTION)):], text])
    return text


def bpc_rows(model, val, test, base: dict, lens, *, scaling_for=None) -> list[dict]:
    rows = []
    for n in lens:
        for mode in EVAL_MODES:
            row = {**base, "train_len": CONFIG.train_len, "eval_len": n, "mode": mode}
            stride = max(1, n // STRIDE_FRACTION)
            ids = eval_text(val, test, n, mode)
            try:
                if scaling_for is None:
                    bpc = evaluate_bpc(model, ids, n, mode=mode, stride=stride)
                else:
                    with with_rotary_scaling(model, scaling_for(n)):
                        bpc = evaluate_bpc(model, ids, n, mode=mode, stride=stride)
                row["bpc"] = _r(bpc)
            except ValueError as err:  # learned positions beyond their table
                row["bpc"] = None
                row["error"] = str(err)
            rows.append(row)
    return rows


def main_unit(corpus, scheme: str, seed: int, config: TextConfig, cache: Path, log) -> dict:
    train, val, test = corpus.split("train"), corpus.split("val"), corpus.split("test")
    with seeded(seed):
        model = config.model(scheme, corpus.vocab_size)
    info = train_lm(model, train, val, config, seed=seed, log=log)
    t_eval = time.perf_counter()
    L = config.train_len
    rows = bpc_rows(model, val, test, {"scheme": scheme, "seed": seed}, [f * L for f in FACTORS])
    lbp_len = FACTORS[-1] * L if scheme != "learned" else L
    lbp = loss_by_position(model, test[: LBP_CHARS + 1], lbp_len, bin_size=LBP_BIN)
    probe = {}
    for d in PROBE_DISTANCES:
        try:
            p = long_range_probe(model, test, d, **PROBE)
            probe[str(d)] = {"first": _r(p["first"]), "second": _r(p["second"]), "length": p["length"]}
        except ValueError as err:
            probe[str(d)] = {"first": None, "second": None, "error": str(err)}
    run = {
        "scheme": scheme,
        "seed": seed,
        "best_step": info["best_step"],
        "best_val_bpc": _r(info["best_val_bpc"]),
        "history": [[s, _r(v)] for s, v in info["history"]],
        "train_seconds": round(info["seconds"], 1),
        "eval_seconds": round(time.perf_counter() - t_eval, 1),
        "loss_by_position": {"length": lbp_len, "bin": LBP_BIN, "bpc": [_r(v) for v in lbp]},
        "probe": probe,
    }
    if scheme == "rope":
        cache.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), cache / f"rope_seed{seed}.pt")
    return {"rows": rows, "runs": [run]}


def ext_unit(corpus, seed: int, config: TextConfig, ft_steps: int, cache: Path, log) -> dict:
    train, val, test = corpus.split("train"), corpus.split("val"), corpus.split("test")
    with seeded(seed):
        model = config.model("rope", corpus.vocab_size)
    path = cache / f"rope_seed{seed}.pt"
    if path.exists():
        model.load_state_dict(torch.load(path))
    else:  # deterministic given the seed: retrain
        train_lm(model, train, val, config, seed=seed)
    model.eval()
    L = config.train_len
    rows = []
    for method in ZERO_SHOT:
        base = {"scheme": "rope", "seed": seed, "extension": method, "finetune_len": None}
        rows += bpc_rows(model, val, test, base, [f * L for f in FACTORS[1:]],
                         scaling_for=lambda n, m=method: extension_scaling(m, n / L, L))
        log(f"  zero-shot {method} done")
    tuned_info = {}
    for method in FINE_TUNE:
        tuned, info = fine_tune_extension(model, method, FT_FACTOR, train, val, config, seed=seed,
                                          steps=ft_steps, lr=FT_LR)
        base = {"scheme": "rope", "seed": seed, "extension": method, "finetune_len": FT_FACTOR * L,
                "factor": FT_FACTOR}
        rows += bpc_rows(tuned, val, test, base, [FT_FACTOR * L, FACTORS[-1] * L])
        p = long_range_probe(tuned, test, PROBE_DISTANCES[-1], **PROBE)
        tuned_info[method] = {
            "best_step": info["best_step"],
            "best_val_bpc": _r(info["best_val_bpc"]),
            "train_seconds": round(info["seconds"], 1),
            "probe": {str(PROBE_DISTANCES[-1]): {"first": _r(p["first"]), "second": _r(p["second"])}},
        }
        log(f"  fine-tune {method}: val {info['best_val_bpc']:.3f} at step {info['best_step']}")
    return {"rows": rows, "extension_runs": [{"seed": seed, "fine_tune": tuned_info}]}


@functools.cache
def corpus():
    return load_corpus()


def run_unit(unit: tuple, ctx) -> dict:
    kind, scheme, seed = unit
    config = QUICK if ctx.quick else CONFIG
    cache = CACHE / "quick" if ctx.quick else CACHE  # a smoke run never replaces the grid's weights
    if kind == "main":
        return main_unit(corpus(), scheme, seed, config, cache, ctx.log)
    return ext_unit(corpus(), seed, config, FT_STEPS[ctx.quick], cache, ctx.log)


def fingerprint() -> dict:
    """The first 20 training losses of seed 0 of every scheme (one trial per group), at this commit."""
    return loss_fingerprint(first_losses, CONFIG.to_dict(), [(0, {"scheme": s}) for s in TEXT_SCHEMES])


EXPERIMENT = Experiment(
    "realtext", OUT, run_unit, PLAN, protocol=PROTOCOL, quick_plan=QUICK_PLAN, pack=2, setup=one_thread,
    fingerprint=fingerprint,
    metadata={"corpus": lambda saved: corpus().record(),  # the chapter reads core_hours: all units' CPU time
              "core_hours": lambda saved: round(sum(u["cpu_seconds"] for u in saved["units"]) / 3600, 3)},
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
