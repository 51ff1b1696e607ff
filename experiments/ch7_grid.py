"""Chapter 7's grid (issue 31): character models that use their whole context, scored on the whole test split.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/ch7_grid.py --max-minutes 60 --commit   # resumes, commits each pack
    python experiments/ch7_grid.py --quick                                                  # a smoke run, nothing saved
    python experiments/ch7_grid.py --quick --out /tmp/ch7_quick.json                        # its sections, as a fixture

Protocol (``experiments/README.md``, chapter 7): :class:`posenc.book.realtext.GridConfig`
with its defaults (``L = 8``, the length at which this model uses its whole context; 2
layers, width 64, 8 heads of size 8, batches of 128 windows = 1,024 characters, Adam at a constant
rate after 200 warm-up steps, validation every 250 steps, stop after 4 evaluations
without an improvement of more than 0.005 bits, at most 8,000 steps, the best checkpoint
kept) for each variant of :data:`~posenc.book.realtext.GRID_VARIANTS` (T5 at maximum
distance ``L`` and 128). The lengths, contexts, probe distances and bins below follow
``L``. The units, in the order they run:

1. ``baselines``: the count models (:func:`~posenc.book.realtext.ngram_bits`, 0 to 5
   characters of context) on the scored test characters;
2. ``tune:<variant>``: the three learning rates of ``GridConfig.lrs`` on seed 100 (one
   pack, at most 3,000 steps); the rate is the one with the lowest best validation loss (ties within 0.005
   bits: the smaller rate);
3. ``main:<variant>``: seeds 0, 1, 2 at that rate (one pack), each scored on the whole
   test split (``bpc`` rows at ``L`` to ``16 L``, non-overlapping and sliding with stride
   ``n / 4``), with its context-use curve, loss by position at ``8 L``, and the controlled
   copy probe within and beyond ``L``;
4. ``ext:<seed>``: the RoPE model's context extensions, zero-shot and fine-tuned, with the
   keep-training-at-``L`` control;
5. ``copy:<variant>``: the positive control, seed 0 trained with a repeated span in a
   quarter of the windows, and its copy probe.

Every pack is saved atomically (and with ``--commit`` committed alone) to
``posenc/book/data/realtext.json``; a rerun skips the units in it.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from posenc.book import realtext as rt
from posenc.book.engine import seeded
from posenc.book.resources import DATA_DIR
from posenc.book.results import Experiment, loss_fingerprint, summarize
from posenc.rope.scaling import extension

HERE = Path(__file__).resolve().parent
OUT = DATA_DIR / "realtext.json"
CACHE = HERE / "results" / ".realtext_models" / "ch7_grid"  # RoPE weights for the ext units (git-ignored; retrained when missing)

CONFIG = rt.GridConfig()
L_TRAIN = CONFIG.train_len
QUICK = replace(CONFIG, d_model=16, n_layers=1, max_steps=8, eval_every=4, warmup=2, val_chars=256)
SEEDS = (0, 1, 2)
TUNE_SEED = 100
TUNE_MAX_STEPS = 3000           # the tuning trials: the same rule, capped at 3,000 steps
COPY_SEEDS = (0,)               # the positive control: one seed per variant (the budget)
LR_TIE = 0.005
FACTORS = (1, 2, 4, 8, 16)
CONTEXTS = tuple(2 ** i for i in range(L_TRAIN.bit_length()) if 2 ** i <= L_TRAIN)   # 1, 2, 4, ..., L
CONTEXT_EVERY = 4               # the context-use curve on every 4th scored character
LBP_FACTOR, LBP_BIN = 8, max(1, L_TRAIN // 4)   # loss by position at 8L, bins of L/4 positions
PROBE = {"span": max(3, L_TRAIN // 4), "prefix": L_TRAIN // 4, "n_probes": 256}   # L = 8: span 3, prefix 2
# windows of L, 2L, 4L and 8L: the first within L, the others beyond
PROBE_DISTANCES = tuple(m * L_TRAIN - PROBE["span"] - PROBE["prefix"] for m in (1, 2, 4, 8))
REPEAT_FRACTION = 0.25
EXT_ZERO_SHOT = ("pi", "ntk", "yarn", "yarn_no_temperature")
EXT_FINETUNE = (("control_at_L", 1), ("none", 4), ("pi", 4), ("ntk", 4), ("yarn", 4), ("yarn_s8", 4))
FT_STEPS, FT_LR_FRACTION = 500, 0.5    # fine-tunes: 500 steps of the same characters per step, at half the rate

PROTOCOL = {
    "config": CONFIG.to_dict(),
    "variants": [list(v) for v in rt.GRID_VARIANTS],
    "seeds": list(SEEDS),
    "tune": {"seed": TUNE_SEED, "max_steps": TUNE_MAX_STEPS,
             "rule": f"lowest best validation bpc; within {LR_TIE}: the smaller lr"},
    "eval": {"block": rt.EVAL_BLOCK, "lens": [f * CONFIG.train_len for f in FACTORS], "sliding_stride": "n/4",
             "contexts": list(CONTEXTS), "context_every": CONTEXT_EVERY,
             "loss_by_position": {"length": LBP_FACTOR * CONFIG.train_len, "bin": LBP_BIN}},
    "probe": {"distances": list(PROBE_DISTANCES), **PROBE, "repeat_fraction": REPEAT_FRACTION,
              "positive_control_seeds": list(COPY_SEEDS)},
    "extensions": {"zero_shot": list(EXT_ZERO_SHOT), "fine_tune": [list(f) for f in EXT_FINETUNE],
                   "fine_tune_steps": FT_STEPS, "fine_tune_lr": f"{FT_LR_FRACTION} x the scheme's lr",
                   "dynamic_ntk": "not run: over a whole window it equals NTK-aware at s = n / L"},
    "ngram": {"orders": list(range(6)), "discount": 0.75},
}


def _r(x, digits: int = 4):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), digits)


def _blocks(values) -> list[float]:
    return [round(v, 4) for v in values]


@functools.cache
def corpus():
    return rt.load_corpus()


@functools.cache
def scored():
    return rt.scored_text(corpus())


def variants_by_name() -> dict[str, tuple]:
    return {rt.variant_name(*v): v for v in rt.GRID_VARIANTS}


def chosen_lr(saved: dict, name: str) -> float | None:
    """The rate of ``name``'s tuning rows by the stated rule (``None`` before its tune unit ran)."""
    rows = [r for r in saved.get("tune", []) if r["variant"] == name and r.get("best_val_bpc") is not None]
    if not rows:
        return None
    best = min(r["best_val_bpc"] for r in rows)
    return min(r["lr"] for r in rows if r["best_val_bpc"] <= best + LR_TIE)


def plan(saved: dict) -> list[tuple]:
    names = list(variants_by_name())
    units: list[tuple] = [("baselines",)]
    for n in names:  # the headline first: each variant's rate, then its three seeds
        units += [("tune", n)] + ([("main", n)] if chosen_lr(saved, n) is not None else [])
    if chosen_lr(saved, "rope") is not None:
        units += [("ext", seed) for seed in SEEDS]
    units += [("copy", n) for n in names if chosen_lr(saved, n) is not None]
    return units


# --------------------------------------------------------------------------- units


def baselines_unit(ctx) -> dict:
    text = scored()
    rows = []
    for order in range(6):
        bits = rt.ngram_bits(corpus().split("train"), text, order)
        for eval_set, sub in (("all", bits), (f"every_{CONTEXT_EVERY}", bits[::CONTEXT_EVERY])):
            every = 1 if eval_set == "all" else CONTEXT_EVERY
            rows.append({"model": "ngram", "context": order, "eval_set": eval_set, "bpc": _r(sub.mean()),
                         "eval_chars": int(sub.size), "block_bpc": _blocks(text.blocks(sub, every))})
    return {"baselines": rows}


def _train(name: str, seeds, lrs, config, ctx):
    scheme, md = variants_by_name()[name]
    train, val = corpus().split("train"), corpus().split("val")
    L = config.train_len
    extra = lambda m: {"val_8L": _r(rt.evaluate_bpc(m, val[: 4096 + 1], LBP_FACTOR * L))} if scheme != "learned" else {}
    return rt.train_lm_pack(scheme, list(seeds), list(lrs), config, train, val, vocab_size=corpus().vocab_size,
                            t5_max_distance=md, extra_every=extra, log=ctx.log)


def _run_row(name, info, config) -> dict:
    scheme, md = variants_by_name()[name]
    return {"variant": name, "scheme": scheme, "t5_max_distance": md, "seed": info["seed"], "lr": info["lr"],
            "train_len": config.train_len, "best_step": info["best_step"], "best_val_bpc": info["best_val_bpc"],
            "stop": info["stop"], "stop_step": info["stop_step"], "steps_run": info["steps_run"],
            "train_chars": info["steps_run"] * config.batch_size * config.train_len,
            "seconds": info["seconds"], "history": info["history"]}


def tune_unit(name: str, ctx) -> dict:
    config = QUICK if ctx.quick else replace(CONFIG, max_steps=min(CONFIG.max_steps, TUNE_MAX_STEPS))
    try:
        _, infos = _train(name, [TUNE_SEED] * len(config.lrs), config.lrs, config, ctx)
        return {"tune": [_run_row(name, info, config) for info in infos]}
    except ValueError as err:  # a rate diverged (non-finite loss): each rate alone, the diverged ones recorded
        ctx.log(f"  {name}: {err}; training each rate alone")
    rows = []
    for lr in config.lrs:
        try:
            _, infos = _train(name, [TUNE_SEED], [lr], config, ctx)
            rows.append(_run_row(name, infos[0], config))
        except ValueError as err:
            scheme, md = variants_by_name()[name]
            rows.append({"variant": name, "scheme": scheme, "t5_max_distance": md, "seed": TUNE_SEED, "lr": lr,
                         "best_val_bpc": None, "stop": "diverged", "error": str(err)})
    return {"tune": rows}


def bpc_rows(model, base: dict, config, lens, *, scaling_for=None) -> list[dict]:
    text = scored()
    rows = []
    for n in lens:
        for mode in rt.EVAL_MODES:
            row = {**base, "train_len": config.train_len, "eval_len": n, "mode": mode}
            try:
                if scaling_for is None:
                    bits = rt.char_bits(model, text, n, mode=mode)
                else:
                    with rt.with_rotary_scaling(model, scaling_for(n)):
                        bits = rt.char_bits(model, text, n, mode=mode)
                # the whole-split scorer: the same text.count characters in every mode and at every n
                row.update(bpc=_r(bits.mean()), eval_chars=int(bits.size), block_bpc=_blocks(text.blocks(bits)))
            except ValueError as err:  # learned positions beyond their table
                row.update(bpc=None, eval_chars=0, error=str(err))
            rows.append(row)
    return rows


def probe_rows(model, base: dict, condition: str, distances) -> list[dict]:
    test = corpus().split("test")
    rows = []
    for d in distances:
        row = {**base, "condition": condition, "distance": d}
        try:
            p = rt.copy_probe(model, test, d, **PROBE)
            s = summarize(p["gains"], interval="bootstrap")
            row.update(gain=_r(s.mean), gain_bootstrap95=[_r(v) for v in s.interval], copy_bpc=_r(p["copy"]),
                       control_bpc=_r(p["control"]), length=p["length"])
        except ValueError as err:
            row.update(gain=None, error=str(err))
        rows.append(row)
    return rows


def main_unit(name: str, ctx) -> dict:
    config = QUICK if ctx.quick else CONFIG
    lr = chosen_lr(ctx.saved, name) if not ctx.quick else config.lrs[0]
    models, infos = _train(name, SEEDS, [lr] * len(SEEDS), config, ctx)
    scheme, md = variants_by_name()[name]
    L = config.train_len
    text = scored()
    out = {"rows": [], "runs": [], "context_use": [], "copy_probe": []}
    for model, info in zip(models, infos):
        t = time.perf_counter()
        base = {"variant": name, "scheme": scheme, "t5_max_distance": md, "seed": info["seed"], "lr": lr}
        lens = [f * L for f in FACTORS] if not ctx.quick else [L, 2 * L]
        out["rows"] += bpc_rows(model, base, config, lens)
        contexts = [k for k in CONTEXTS if k <= L] if not ctx.quick else [1, 2]
        for k, bits in rt.context_use(model, text, contexts, every=CONTEXT_EVERY).items():
            out["context_use"].append({**base, "context": k, "bpc": _r(bits.mean()), "eval_chars": int(bits.size),
                                       "block_bpc": _blocks(text.blocks(bits, CONTEXT_EVERY))})
        out["copy_probe"] += probe_rows(model, {**base, "trained_on": "text"}, "text", PROBE_DISTANCES)
        lbp_len = LBP_FACTOR * L if scheme != "learned" else L
        bits = rt.char_bits(model, text, lbp_len, mode="nonoverlapping")
        lbp = bits.reshape(-1, lbp_len).mean(0).reshape(-1, LBP_BIN).mean(1)
        out["runs"].append({**_run_row(name, info, config), "eval_seconds": round(time.perf_counter() - t, 1),
                            "loss_by_position": {"length": lbp_len, "bin": LBP_BIN, "bpc": _blocks(lbp)}})
        if scheme == "rope":
            CACHE.mkdir(parents=True, exist_ok=True)
            torch.save(model.state_dict(), CACHE / f"{'quick_' if ctx.quick else ''}rope_seed{info['seed']}.pt")
        ctx.log(f"  {name} seed {info['seed']}: evaluated in {time.perf_counter() - t:.0f} s")
    return out


def _scaling(method: str, factor: float, L: int):
    if method == "yarn_no_temperature":
        return {**extension("yarn", factor, L), "attention_factor": 1.0}
    if method == "yarn_s8":
        return extension("yarn", 8, L)
    if method == "control_at_L":
        return None
    return extension(method, factor, L)


def ext_unit(seed: int, ctx) -> dict:
    """RoPE's context extensions on one seed's model: zero-shot at 2L-16L, fine-tunes with the control."""
    config = QUICK if ctx.quick else CONFIG
    L = config.train_len
    lr = chosen_lr(ctx.saved, "rope") if not ctx.quick else config.lrs[0]
    path = CACHE / f"{'quick_' if ctx.quick else ''}rope_seed{seed}.pt"
    if path.exists():
        with seeded(seed):
            model = config.model("rope", corpus().vocab_size)
        model.load_state_dict(torch.load(path))
    else:  # deterministic given the seed: retrain
        models, _ = _train("rope", [seed], [lr], config, ctx)
        model = models[0]
    model.eval()
    lens = [f * L for f in FACTORS[1:]] if not ctx.quick else [2 * L]
    rows = []
    runs = []
    n_lbp = LBP_FACTOR * L
    for method in EXT_ZERO_SHOT:
        base = {"variant": "rope", "scheme": "rope", "seed": seed, "extension": method,
                "temperature": method == "yarn", "finetune": None}
        rows += bpc_rows(model, base, config, lens, scaling_for=lambda n, m=method: _scaling(m, n / L, L))
        with rt.with_rotary_scaling(model, _scaling(method, LBP_FACTOR, L)):  # where it breaks (NTK's prediction)
            bits = rt.char_bits(model, scored(), n_lbp)
        runs.append({"seed": seed, "zero_shot": method, "factor": LBP_FACTOR, "loss_by_position": {
            "length": n_lbp, "bin": LBP_BIN, "bpc": _blocks(bits.reshape(-1, n_lbp).mean(0).reshape(-1, LBP_BIN).mean(1))}})
    train, val = corpus().split("train"), corpus().split("val")
    text_cfg = rt.TextConfig(train_len=L, d_model=config.d_model, n_heads=config.n_heads, n_layers=config.n_layers,
                             batch_size=config.batch_size, eval_every=max(1, FT_STEPS // 5), val_chars=config.val_chars)
    steps = FT_STEPS if not ctx.quick else 4
    for method, factor in EXT_FINETUNE:
        scaling = _scaling(method, factor, L)
        tuned, info = rt.fine_tune(model, scaling, factor * L, train, val, text_cfg, seed=seed, steps=steps,
                                   lr=FT_LR_FRACTION * lr, batch_size=max(1, config.batch_size // factor))
        base = {"variant": "rope", "scheme": "rope", "seed": seed,
                "extension": "yarn" if method == "yarn_s8" else ("none" if method == "control_at_L" else method),
                "temperature": method in ("yarn", "yarn_s8"), "finetune": method, "finetune_len": factor * L,
                "factor": 8 if method == "yarn_s8" else factor}
        eval_lens = [L, 4 * L, 8 * L] if not ctx.quick else [L]
        rows += bpc_rows(tuned, base, config, eval_lens)
        runs.append({"seed": seed, "finetune": method, "best_step": info["best_step"],
                     "best_val_bpc": _r(info["best_val_bpc"]), "history": [[s, _r(v)] for s, v in info["history"]],
                     "seconds": round(info["seconds"], 1)})
        ctx.log(f"  fine-tune {method}: val {info['best_val_bpc']:.3f} at step {info['best_step']}")
    return {"extension_rows": rows, "extension_runs": runs}


def copy_unit(name: str, ctx) -> dict:
    """The positive control: the variant trained with a repeated span in a quarter of its windows."""
    config = replace(QUICK if ctx.quick else CONFIG, repeat_fraction=REPEAT_FRACTION)
    lr = chosen_lr(ctx.saved, name) if not ctx.quick else config.lrs[0]
    models, infos = _train(name, COPY_SEEDS, [lr] * len(COPY_SEEDS), config, ctx)
    scheme, md = variants_by_name()[name]
    out = {"copy_probe": [], "copy_runs": []}
    for model, info in zip(models, infos):
        base = {"variant": name, "scheme": scheme, "t5_max_distance": md, "seed": info["seed"], "lr": lr,
                "trained_on": "text_with_repeats"}
        out["copy_probe"] += probe_rows(model, base, "positive_control", PROBE_DISTANCES)
        bits = rt.char_bits(model, scored(), config.train_len, mode="sliding")
        out["copy_runs"].append({**_run_row(name, info, config), "bpc_at_L_sliding": _r(bits.mean())})
    return out


def run_unit(unit: tuple, ctx) -> dict:
    kind = unit[0]
    if kind == "baselines":
        return baselines_unit(ctx)
    if kind == "tune":
        return tune_unit(unit[1], ctx)
    if kind == "main":
        return main_unit(unit[1], ctx)
    if kind == "ext":
        return ext_unit(unit[1], ctx)
    return copy_unit(unit[1], ctx)


def fingerprint() -> dict:
    """The first 20 training losses of seed 0 of every variant at the middle rate, at this commit."""
    lr = CONFIG.lrs[len(CONFIG.lrs) // 2]
    trials = [(0, {"scheme": s, "t5_max_distance": md, "lr": lr}) for s, md in rt.GRID_VARIANTS]
    return loss_fingerprint(rt.grid_first_losses, CONFIG.to_dict(), trials)


def setup(quick: bool) -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def quick_plan() -> list[tuple]:
    return [("baselines",), ("tune", rt.variant_name("t5", L_TRAIN)), ("main", "rope"), ("main", "learned"), ("ext", 0), ("copy", "alibi")]


EXPERIMENT = Experiment(
    "ch7_grid", OUT, run_unit, plan, protocol=PROTOCOL, quick_plan=quick_plan(), pack=1, setup=setup,
    fingerprint=fingerprint,
    metadata={
        "description": f"Chapter 7's grid (issue 31): 8 variants x 3 seeds at L = {L_TRAIN}, per-scheme learning rates, "
                       "trained until the validation loss stops falling; whole-test-split scoring with blocks, "
                       "context use, count-model baselines, controlled copy probe, RoPE extensions",
        "command": "OMP_NUM_THREADS=1 nice -n 10 python experiments/ch7_grid.py --max-minutes M --commit",
        "corpus": lambda saved: corpus().record(),
        "core_hours": lambda saved: round(sum(u["cpu_seconds"] for u in saved.get("units", [])) / 3600, 3),
    },
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
