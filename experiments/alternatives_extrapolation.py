"""Chapter 6's experiment at full size: every positional scheme, both tasks, several seeds.

    python experiments/alternatives_extrapolation.py            # the saved results
    python experiments/alternatives_extrapolation.py --quick    # a 1-minute smoke run

Writes ``experiments/results/alternatives.json`` (accuracies: deterministic, rounded to 4
decimals, reproduced exactly by a re-run on the same machine with the same package
versions) and ``experiments/results/alternatives_timing.json`` (training seconds: these
depend on the machine and its load, so they live in their own file). The chapter
``notebooks/06_alternatives.ipynb`` plots the first and quotes the second.

Each run trains a fresh model for ``--steps`` steps and is also scored at the earlier
``--checkpoints``, so the effect of the training budget is visible without extra runs.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch

import posenc
from posenc.training import RunConfig, config_dict, run_trial, score_keys

HERE = Path(__file__).resolve().parent


def _round(x: float, digits: int) -> float | None:
    return None if math.isnan(x) else round(x, digits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--checkpoints", type=int, nargs="*", default=[300, 750])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--schemes", nargs="*", default=list(posenc.SCHEMES))
    parser.add_argument("--tasks", nargs="*", default=list(posenc.TASKS))
    parser.add_argument("--quick", action="store_true", help="60 steps, 1 seed, no file written unless --out")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.checkpoints, args.seeds = 60, [30], 1
    out = args.out or (None if args.quick else HERE / "results" / "alternatives.json")

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    config = RunConfig(steps=args.steps)
    rows, timing = [], []
    t0 = time.perf_counter()
    for task in args.tasks:
        for scheme in args.schemes:
            for seed in range(args.seeds):
                r = run_trial(scheme, task, seed, config, checkpoints=tuple(args.checkpoints), per_position=True)
                for step, accs in r["checkpoints"].items():
                    rows.append(
                        {
                            "task": task,
                            "scheme": scheme,
                            "seed": seed,
                            "steps": step,
                            **{k: _round(accs[k], 4) for k in score_keys(config)},
                        }
                    )
                rows[-1]["final_loss"] = round(r["final_loss"], 4)
                rows[-1]["params"] = r["params"]
                rows[-1]["scheme_params"] = r["scheme_params"]
                f = max(config.eval_factors)
                rows[-1][f"pos_{f}x"] = [_round(a, 3) for a in r[f"pos_{f}x"]]
                timing.append({"task": task, "scheme": scheme, "seed": seed, "seconds": round(r["seconds"], 2)})
                print(
                    f"{task:15s} {scheme:10s} seed {seed}: "
                    + " ".join(f"{k}={rows[-1][k]}" for k in score_keys(config))
                    + f"  ({r['seconds']:.1f} s)",
                    flush=True,
                )
    total = time.perf_counter() - t0
    print(f"total {total:.0f} s", flush=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        result = {
            "description": "Chapter 6 experiment: accuracy of a small causal transformer per positional "
            "scheme, task, seed and training budget, at 1x, 2x and 4x the training length. "
            "null = the model cannot run at that length (learned embeddings past max_len).",
            "command": "python experiments/alternatives_extrapolation.py "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "config": config_dict(config),
            "checkpoints": sorted(set(args.checkpoints) | {args.steps}),
            "versions": {"torch": torch.__version__, "posenc": posenc.__version__},
            "rows": rows,
        }
        # one row per line: readable diffs, small file
        rows_text = ",\n  ".join(json.dumps(row) for row in result.pop("rows"))
        head = json.dumps(result, indent=1)[:-2]
        out.write_text(f'{head},\n "rows": [\n  {rows_text}\n ]\n}}\n')
        timing_out = out.with_name(out.stem + "_timing.json")
        timing_out.write_text(
            json.dumps(
                {
                    "note": "training wall time per run (machine- and load-dependent, not reproducible)",
                    "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
                    "threads": 1,
                    "total_seconds": round(total, 1),
                    "runs": timing,
                },
                indent=1,
            )
            + "\n"
        )
        print(f"wrote {out} and {timing_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
