"""Chapter 6's cost benchmark: parameters and time per training step of every positional scheme.

    python experiments/alternatives_cost.py           # writes posenc/book/data/alternatives_cost.json
    python experiments/alternatives_cost.py --quick   # a smoke run (two lengths, one step), nothing saved

One training step (forward, backward, Adam update) of the chapter's model, batch 32, one
thread, at several sequence lengths. A unit is one repetition (``rep:<i>``): it times every
scheme at every length in a shuffled order, so that a slow phase of the machine affects all
schemes alike. The rows are the median over the repetitions saved of the mean over
:data:`STEPS` steps, with the spread of the repetitions (min, max); the raw times are kept
under ``times``. The units run under :class:`posenc.book.results.Experiment`, which saves after
every pack and resumes.
"""

from __future__ import annotations

import functools
import os
import platform
import random
import statistics
import time

import torch

from posenc.book.models import SCHEMES, count_parameters
from posenc.book.resources import DATA_DIR  # the saved results ship with posenc.book
from posenc.book.results import Experiment
from posenc.book.training import RunConfig

LENGTHS = (16, 32, 64, 128, 256, 512)
REPEATS, STEPS, BATCH = 5, 4, 32
QUICK_LENGTHS, QUICK_STEPS = (16, 32), 1


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


@functools.cache
def model(scheme: str, length: int) -> torch.nn.Module:
    """The chapter's model for ``scheme`` at sequence length ``length`` (seed 0; built once per session)."""
    extra = {"randomized_max_len": max(256, length)} if scheme == "randomized" else {}
    torch.manual_seed(0)
    return RunConfig(train_len=length, extra=extra).model(scheme)


def run_unit(unit: tuple, ctx) -> dict:
    """One repetition: every scheme at every length, in an order shuffled by the repetition's number."""
    _, rep = unit
    lengths, steps = (QUICK_LENGTHS, QUICK_STEPS) if ctx.quick else (LENGTHS, STEPS)
    order = [(scheme, length) for length in lengths for scheme in SCHEMES]
    random.Random(rep).shuffle(order)
    generator = torch.Generator().manual_seed(rep)
    times = [{"rep": rep, "scheme": scheme, "length": length,
              "ms": round(1000 * time_steps(model(scheme, length), length, BATCH, steps, generator), 3)}
             for scheme, length in order]
    ctx.log(f"repetition {rep}: " + " ".join(f"{t['scheme']}@{t['length']}={t['ms']:.1f}" for t in times))
    return {"times": times}


def rows(saved: dict) -> list[dict]:
    """One row per scheme and length from the repetitions in ``saved["times"]`` (the saved rows if none)."""
    if not saved.get("times"):  # a file written before the harness keeps its rows
        return saved["rows"]
    out = []
    for length in LENGTHS:
        for scheme in SCHEMES:
            ms = [t["ms"] for t in saved["times"] if (t["scheme"], t["length"]) == (scheme, length)]
            if ms:
                m = model(scheme, length)
                out.append({"scheme": scheme, "length": length, "ms_per_step": round(statistics.median(ms), 3),
                            "ms_min": min(ms), "ms_max": max(ms), "params": count_parameters(m),
                            "scheme_params": m.scheme_parameters()})
    return out


def measured(key: str, value: object):
    """Metadata ``key``: ``value`` (a value or a function of the results) once this harness has timed
    repetitions; the saved value in a file written before it (so ``--stamp`` keeps the machine that ran)."""
    return lambda saved: (value(saved) if callable(value) else value) if saved.get("times") else saved.get(key)


def setup(quick: bool) -> None:
    torch.set_num_threads(1)


CONFIG = RunConfig()
EXPERIMENT = Experiment(
    "alternatives_cost", DATA_DIR / "alternatives_cost.json", run_unit, [("rep", i) for i in range(REPEATS)],
    pack=1, setup=setup,
    done=lambda saved: [] if "times" in saved else [f"rep:{i}" for i in range(saved.get("config", {}).get("repeats", 0))],
    metadata={"rows": rows} | {key: measured(key, value) for key, value in {
        "description": f"Time per training step (forward, backward, Adam; batch {BATCH}, one thread) of the "
        f"chapter-6 model per scheme and sequence length: median over {REPEATS} interleaved repetitions of "
        f"the mean over {STEPS} steps. Parameters: the whole model and the positional scheme's own (learned "
        "embeddings sized to the length). Machine-dependent.",
        "command": "python experiments/alternatives_cost.py",
        "config": {"d_model": CONFIG.d_model, "n_heads": CONFIG.n_heads, "n_layers": CONFIG.n_layers,
                   "vocab_size": CONFIG.vocab_size, "batch": BATCH, "steps": STEPS, "repeats": REPEATS},
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "wall_seconds": lambda saved: round(sum(u["wall_seconds"] for u in saved["units"]), 1),
    }.items()},
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
