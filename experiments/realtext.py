"""Chapter 7's experiment: length extrapolation of a character-level model on real text.

    nice -n 10 python experiments/realtext.py             # the saved results (resumable)
    python experiments/realtext.py --quick                # smoke test (about a minute), nothing saved

Protocol (see ``experiments/README.md``): one model (4 layers, width 64, 4 heads) per
scheme of :data:`posenc.book.realtext.TEXT_SCHEMES` and seed, trained at ``L = 64``
characters of Tiny Shakespeare with the same budget, learning rate, schedule and batches
(the seed fixes the batches and the initial weights); bits per character on the test text
at ``L, 2L, 4L, 8L`` under non-overlapping and sliding-window evaluation; the loss by
position at ``8L``; a copy probe at distances beyond ``L``; and on the RoPE models the
context extensions (PI, NTK-aware, dynamic NTK, YaRN) zero-shot and after a short
fine-tune at ``4L``.

The results file (``posenc/book/data/realtext.json``) is rewritten atomically after
every unit of work (one trained model with its evaluations, or the extensions of one
RoPE seed) and a re-run skips the units already in it, so a stop loses at most one unit.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posenc.book import results as res  # noqa: E402
from posenc.book.realtext import (  # noqa: E402
    EVAL_MODES,
    TEXT_SCHEMES,
    TextConfig,
    evaluate_bpc,
    extension_scaling,
    fine_tune_extension,
    load_corpus,
    long_range_probe,
    loss_by_position,
    train_lm,
    with_rotary_scaling,
)
from posenc.book.resources import DATA_DIR  # noqa: E402  (the saved results ship with posenc.book)
from posenc.book.training import seeded  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = DATA_DIR / "realtext.json"
CACHE = HERE / "results" / ".realtext_models"  # trained RoPE weights for the extension units (not committed)

CONFIG = TextConfig(train_len=64, d_model=64, n_heads=4, n_layers=2, batch_size=8, steps=1000, lr=1e-2,
                    warmup=100, eval_every=250, val_chars=4096, randomized_max_len=1024)
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
FT_STEPS = 100
FT_LR = 1e-3


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), digits)


def protocol() -> dict:
    return {
        "config": CONFIG.as_dict(),
        "seeds": list(SEEDS),
        "eval_lens": [f * CONFIG.train_len for f in FACTORS],
        "eval_chars": EVAL_CHARS,
        "sliding_stride": f"n/{STRIDE_FRACTION}",
        "loss_by_position": {"chars": LBP_CHARS, "length": FACTORS[-1] * CONFIG.train_len, "bin": LBP_BIN},
        "probe": {"distances": list(PROBE_DISTANCES), **PROBE},
        "extensions": {"zero_shot": list(ZERO_SHOT), "fine_tune": list(FINE_TUNE), "fine_tune_factor": FT_FACTOR,
                       "fine_tune_steps": FT_STEPS, "fine_tune_lr": FT_LR},
    }


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


def main_unit(corpus, scheme: str, seed: int, config: TextConfig, log) -> tuple[list[dict], dict]:
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
        CACHE.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), CACHE / f"rope_seed{seed}.pt")
    return rows, run


def ext_unit(corpus, seed: int, config: TextConfig, log) -> tuple[list[dict], dict]:
    train, val, test = corpus.split("train"), corpus.split("val"), corpus.split("test")
    with seeded(seed):
        model = config.model("rope", corpus.vocab_size)
    path = CACHE / f"rope_seed{seed}.pt"
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
                                          steps=FT_STEPS, lr=FT_LR)
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
    return rows, {"seed": seed, "fine_tune": tuned_info}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--quick", action="store_true", help="a smoke run (tiny budget), nothing saved")
    ap.add_argument("--max-minutes", type=float, default=None, help="start no new unit after this time")
    args = ap.parse_args(argv)

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    corpus = load_corpus()
    config = CONFIG
    global FT_STEPS
    if args.quick:
        config = replace(CONFIG, steps=20, eval_every=10, n_layers=1)
        FT_STEPS = 4
    log = lambda msg: print(time.strftime("%H:%M:%S"), msg, flush=True)  # noqa: E731

    saved = res.read_results(args.out) if (args.out.exists() and not args.quick) else {}
    proto = protocol()
    if saved and saved.get("protocol") != proto:
        sys.exit(f"{args.out} was made with another protocol; move it away to start afresh")
    rows = saved.get("rows", [])
    runs = saved.get("runs", [])
    ext_runs = saved.get("extension_runs", [])
    sessions = saved.get("sessions", [])
    units = saved.get("units", [])
    session = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu_seconds": 0.0,
        "wall_seconds": 0.0,
    }
    sessions.append(session)
    t_start = time.perf_counter()
    c_start = time.process_time()

    plan = []
    for seed in SEEDS:
        plan += [("main", s, seed) for s in TEXT_SCHEMES]
        plan.append(("ext", "rope", seed))
    if args.quick:
        plan = [("main", "rope", 0), ("main", "learned", 0), ("ext", "rope", 0)]

    for kind, scheme, seed in plan:
        key = f"{kind}:{scheme}:{seed}"
        if key in [u["key"] for u in units]:
            continue
        if args.max_minutes and time.perf_counter() - t_start > 60 * args.max_minutes:
            log("time limit reached; stopping before " + key)
            break
        log(f"start {key}")
        w0, c0 = time.perf_counter(), time.process_time()
        if kind == "main":
            new_rows, run = main_unit(corpus, scheme, seed, config, log)
            runs.append(run)
        else:
            new_rows, run = ext_unit(corpus, seed, config, log)
            ext_runs.append(run)
        rows += new_rows
        units.append({"key": key, "wall_seconds": round(time.perf_counter() - w0, 1),
                      "cpu_seconds": round(time.process_time() - c0, 1)})
        session["wall_seconds"] = round(time.perf_counter() - t_start, 1)
        session["cpu_seconds"] = round(time.process_time() - c_start, 1)
        log(f"done {key}: {units[-1]}")
        for r in new_rows[:8]:
            log(f"    {r.get('extension', '')} {r['eval_len']:4d} {r['mode']:15s} {r['bpc']}")
        if not args.quick:
            cpu_total = sum(u["cpu_seconds"] for u in units)
            res.write_results(args.out, rows, corpus=corpus.record(), protocol=proto, runs=runs,
                              extension_runs=ext_runs, units=units, sessions=sessions,
                              core_hours=round(cpu_total / 3600, 3))
    log("finished")


if __name__ == "__main__":
    main()
