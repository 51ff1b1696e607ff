"""Chapter 1: how decodable position is after each layer, with and without residual connections.

    python experiments/position_depth.py            # writes posenc/book/data/position_depth.json (resumable)
    python experiments/position_depth.py --quick    # smoke test, nothing saved

A :class:`posenc.book.depth.DepthNet` (3 bidirectional pre-norm blocks of width 32, two
heads, the sinusoidal encoding added once at the input) is trained on reversing sequences
of 10 tokens (vocabulary 10), a task that needs every token's absolute position, with and
without residual connections, seeds 0-2: Adam at 3e-3, cosine decay over 1,500 steps of 32
fresh sequences. A unit ``init:<residual>:<seed>`` probes the untrained model, a unit
``trained:<residual>:<seed>`` trains it and probes it: :func:`posenc.book.depth.layer_probe`
fits a ridge probe onto the one-hot position after every layer on 512 sequences and scores
it on 512 others. :class:`posenc.book.results.Experiment` saves after every pack, resumes,
and records provenance and the fingerprint.
"""

from __future__ import annotations

from posenc.book.depth import DEPTH_PROTOCOL, first_losses, layer_probe, train_depth_net, build_depth_net
from posenc.book.engine import seeded
from posenc.book.resources import DATA_DIR
from posenc.book.results import Experiment, loss_fingerprint, one_thread, timed_unit

CONFIG = dict(DEPTH_PROTOCOL, d_model=32, n_heads=2, n_layers=3, length=10, vocab=10, batch=32, steps=1500)
QUICK = dict(CONFIG, steps=20)
SEEDS = (0, 1, 2)


def plan(saved: dict) -> list[tuple]:
    return [(role, res, seed) for role in ("init", "trained") for res in ("residual", "plain") for seed in SEEDS]


def run_unit(unit: tuple, ctx) -> dict:
    role, res, seed = unit
    config = QUICK if ctx.quick else CONFIG

    def row() -> dict:
        if role == "init":
            with seeded(seed):
                model, losses = build_depth_net(config, res == "residual"), []
        else:
            model, losses = train_depth_net(res == "residual", seed=seed, config=config)
        probe = layer_probe(model, sequences=config["probe_sequences"], seed=1000 + seed, ridge=config["ridge"])
        return {"role": role, "residual": res == "residual", "seed": seed,
                "probe": [round(a, 6) for a in probe["probe"]], "task_accuracy": round(probe["task"], 6),
                "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 6) if losses else None}

    return timed_unit(ctx, row)


def fingerprint() -> dict:
    """The first 20 training losses of seed 0, with and without residual connections."""
    return loss_fingerprint(first_losses, CONFIG, [(0, {"residual": True}), (0, {"residual": False})])


EXPERIMENT = Experiment(
    "position_depth", DATA_DIR / "position_depth.json", run_unit, plan, pack=2, setup=one_thread,
    fingerprint=fingerprint, metadata={"config": CONFIG}, quick_plan=[("trained", "plain", 0)],
)

if __name__ == "__main__":
    raise SystemExit(EXPERIMENT.main())
