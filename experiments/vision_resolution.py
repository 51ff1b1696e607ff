"""Chapter 8's experiment: a tiny ViT trained at one resolution, evaluated at larger ones.

    nice -n 10 python experiments/vision_resolution.py            # the saved results
    python experiments/vision_resolution.py --quick               # a smoke run, nothing saved

Protocol (see ``experiments/README.md``): scikit-learn's digits upsampled to 16 x 16 and
cut into 4 x 4 patches (a 4 x 4 grid); six positional schemes
(:data:`posenc.book.vision.VISION_SCHEMES`); one recipe for all (AdamW, lr 2e-3, weight
decay 0.05, batch 128, random zoomed crops with zoom in [1, 1.6]), stopped on the
validation loss (patience 8 epochs, at most 60, best epoch kept); seeds 0-2; test accuracy
and loss at 12, 16, 20, 24 and 32 pixels (grids 3 x 3 to 8 x 8), and for 2-D sin-cos and
the RoPE schemes also with the patch coordinates interpolated into the training range
(keys ``iacc_<size>``). One process, one thread; the file is rewritten atomically after
every trial and a re-run skips the trials already in it.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import torch

import posenc
from posenc.book import results as res
from posenc.book.resources import DATA_DIR  # the saved results ship with posenc.book
from posenc.book.vision import VISION_SCHEMES, VisionConfig, config_dict, run_vision_trial

HERE = Path(__file__).resolve().parent
CONFIG = VisionConfig(batch_size=128, lr=2e-3, max_epochs=60, patience=8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=DATA_DIR / "vision_resolution.json")
    ap.add_argument("--quick", action="store_true", help="2 epochs, one seed, nothing saved")
    ap.add_argument("--max-minutes", type=float, default=None, help="start no trial after this many minutes")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    config = VisionConfig(max_epochs=2, patience=10) if args.quick else CONFIG
    saved = res.read_results(args.out) if args.out.exists() and not args.quick else {"rows": []}
    if saved.get("config") not in (None, config_dict(config)):
        raise SystemExit(f"{args.out} holds results of another config; move it away first")
    rows = saved["rows"]
    done = {(r["scheme"], r["seed"]) for r in rows}
    t0 = time.perf_counter()
    for seed in range(1 if args.quick else args.seeds):  # seed-major: a stopped run stays balanced
        for scheme in VISION_SCHEMES:
            if (scheme, seed) in done:
                continue
            if args.max_minutes is not None and time.perf_counter() - t0 > 60 * args.max_minutes:
                print("time budget reached; re-run to continue", flush=True)
                return
            row = run_vision_trial(scheme, seed, config)
            row = {k: round(v, 4) if isinstance(v, float) and k != "seconds" else v for k, v in row.items()}
            print(row, flush=True)
            if args.quick:
                continue
            rows.append(row)
            sessions = saved.get("sessions", [])
            meta = {
                "config": config_dict(config),
                "posenc_version": posenc.__version__,
                "torch_version": torch.__version__,
                "sessions": sessions,
                "machine": platform.machine(),
                "threads": 1,
            }
            res.write_results(args.out, rows, **meta)
    if not args.quick:
        saved = res.read_results(args.out)
        sessions = saved.get("sessions", []) + [{"wall_seconds": round(time.perf_counter() - t0, 1), "trials": len(rows)}]
        res.write_results(args.out, saved["rows"], **{k: v for k, v in saved.items() if k not in ("rows", "sessions")}, sessions=sessions)


if __name__ == "__main__":
    main()
