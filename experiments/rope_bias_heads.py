"""Chapter 4's fair comparison: a previous-token head with RoPE, an additive encoding or none, with and without q/k biases.

    python experiments/rope_bias_heads.py            # writes posenc/book/data/rope_bias_heads.json
    python experiments/rope_bias_heads.py --quick    # smoke test, nothing saved

Every variant is trained with :func:`posenc.book.probes.train_position_head` under one
protocol: Adam, batch 32, held-out loss on 1,024 sequences every 100 steps, the best
weights kept, stop after 5 evaluations without improvement or at 3,000 steps. The learning
rate is chosen per variant from {3e-3, 1e-2, 3e-2} on seed 100 by held-out loss; seeds
0-2 then run at the chosen rate. Resumable: finished trials are kept and skipped.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

from posenc.book import results as res
from posenc.book.resources import DATA_DIR  # the saved results ship with posenc.book
from posenc.book.probes import train_position_head

HERE = Path(__file__).resolve().parent
OUT = DATA_DIR / "rope_bias_heads.json"

# (name, encoding, bias, shared)
VARIANTS = [
    ("rope, bias", "rope", True, 0.0),
    ("rope, no bias", "rope", False, 0.0),
    ("rope, no bias, shared direction", "rope", False, 1.0),
    ("additive, bias", "additive", True, 0.0),
    ("additive, no bias", "additive", False, 0.0),
    ("none, no bias", "none", False, 0.0),
]
LRS = (3e-3, 1e-2, 3e-2)
TUNE_SEED, SEEDS = 100, (0, 1, 2)
PROTOCOL = {"steps": 3000, "eval_every": 100, "patience": 5, "batch": 32, "content_scale": 1.0}


def run(name: str, encoding: str, bias: bool, shared: float, lr: float, seed: int, role: str, protocol: dict) -> dict:
    t0 = time.perf_counter()
    out = train_position_head(encoding, bias=bias, shared=shared, lr=lr, seed=seed, **protocol)
    return {
        "variant": name, "encoding": encoding, "bias": bias, "shared": shared, "lr": lr, "seed": seed,
        "role": role, "accuracy": round(out["accuracy"], 6), "heldout_loss": round(out["heldout_loss"], 6),
        "best_step": out["best_step"], "steps_run": out["steps_run"],
        "stop": "budget" if out["steps_run"] >= protocol["steps"] else "patience",
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few steps per trial, nothing saved")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    protocol = dict(PROTOCOL, steps=20, eval_every=10) if args.quick else PROTOCOL
    rows = [] if args.quick or not args.out.exists() else res.read_results(args.out)["rows"]
    done = {(r["variant"], r["lr"], r["seed"], r["role"]) for r in rows}
    start = time.perf_counter()

    def save() -> None:
        if not args.quick:
            res.write_results(
                args.out, rows, config={**PROTOCOL, "lrs": list(LRS), "tune_seed": TUNE_SEED, "seeds": list(SEEDS)},
                session={"python": sys.version.split()[0], "torch": torch.__version__, "machine": platform.machine(),
                         "threads": 1},
            )

    for name, encoding, bias, shared in VARIANTS:
        for lr in LRS:
            if (name, lr, TUNE_SEED, "tune") not in done:
                rows.append(run(name, encoding, bias, shared, lr, TUNE_SEED, "tune", protocol))
                save()
                print(rows[-1], flush=True)
        tuned = [r for r in rows if r["variant"] == name and r["role"] == "tune"]
        lr = min(tuned, key=lambda r: (r["heldout_loss"], r["lr"]))["lr"]
        for seed in SEEDS:
            if (name, lr, seed, "main") not in done:
                rows.append(run(name, encoding, bias, shared, lr, seed, "main", protocol))
                save()
                print(rows[-1], flush=True)
    print(f"done in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
