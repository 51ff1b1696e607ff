"""Chapter 6's cost benchmark: parameters and time per training step of every positional scheme.

    python experiments/alternatives_cost.py      # writes posenc/book/data/alternatives_cost.json

One training step (forward, backward, Adam update) of the chapter's model, batch 32, one
thread, at several sequence lengths. The repetitions are interleaved (every repetition
times every scheme at every length, in a shuffled order) so that a slow phase of the
machine affects all schemes alike; the reported time is the median over repetitions of
the mean over ``--steps`` steps, with the spread of the repetitions (min, max).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from posenc.book import results as res
from posenc.book.resources import DATA_DIR  # the saved results ship with posenc.book
from posenc.book.models import SCHEMES, count_parameters
from posenc.book.training import RunConfig

HERE = Path(__file__).resolve().parent


def time_steps(model: torch.nn.Module, length: int, batch: int, steps: int, generator: torch.Generator) -> float:
    """Mean seconds per training step over ``steps`` steps (after one untimed step)."""
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    vocab = model.head.out_features
    tokens = torch.randint(0, vocab, (batch, length), generator=generator)
    kwargs = {}
    if model.scheme == "randomized":
        kwargs["positions"] = torch.arange(length).expand(batch, length)

    def step() -> None:
        logits = model(tokens, **kwargs)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()

    step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="*", default=[16, 32, 64, 128, 256, 512])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--machine", default=None)
    parser.add_argument("--out", type=Path, default=DATA_DIR / "alternatives_cost.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    config = RunConfig()
    models = {}
    for length in args.lengths:
        for scheme in SCHEMES:
            extra = {"randomized_max_len": max(256, length)} if scheme == "randomized" else {}
            torch.manual_seed(0)
            models[scheme, length] = RunConfig(train_len=length, extra=extra).model(scheme)
    times: dict[tuple, list[float]] = {key: [] for key in models}
    order = list(models)
    rng = random.Random(0)
    t0 = time.perf_counter()
    for rep in range(args.repeats):
        rng.shuffle(order)
        for key in order:
            times[key].append(time_steps(models[key], key[1], args.batch, args.steps, generator))
        print(f"repetition {rep + 1}/{args.repeats} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    rows = []
    for (scheme, length), ts in sorted(times.items(), key=lambda kv: (kv[0][1], SCHEMES.index(kv[0][0]))):
        model = models[scheme, length]
        rows.append(
            {
                "scheme": scheme,
                "length": length,
                "ms_per_step": round(1000 * statistics.median(ts), 3),
                "ms_min": round(1000 * min(ts), 3),
                "ms_max": round(1000 * max(ts), 3),
                "params": count_parameters(model),
                "scheme_params": model.scheme_parameters(),
            }
        )
    for length in args.lengths:
        print(f"length {length:4d}: " + " ".join(f"{r['scheme']}={r['ms_per_step']:.1f}" for r in rows if r["length"] == length))
    res.write_results(
        args.out,
        rows,
        description="Time per training step (forward, backward, Adam; batch "
        f"{args.batch}, one thread) of the chapter-6 model per scheme and sequence length: median over "
        f"{args.repeats} interleaved repetitions of the mean over {args.steps} steps. Parameters: the whole "
        "model and the positional scheme's own (learned embeddings sized to the length). Machine-dependent.",
        command="python experiments/alternatives_cost.py " + " ".join(sys.argv[1:] if argv is None else argv),
        config={"d_model": config.d_model, "n_heads": config.n_heads, "n_layers": config.n_layers,
                "vocab_size": config.vocab_size, "batch": args.batch, "steps": args.steps, "repeats": args.repeats},
        machine=args.machine or f"{platform.machine()} {platform.processor() or ''}".strip(),
        cpus=os.cpu_count(),
        torch=torch.__version__,
        wall_seconds=round(time.perf_counter() - t0, 1),
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
