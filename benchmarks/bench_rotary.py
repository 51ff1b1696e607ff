"""How fast is posenc's RoPE, measured against the memory roofline and Hugging Face's eager code.

Workload (issue 4): a float32 tensor of shape (4, 16, 2048, 64) = (batch, heads, seq,
head_dim), 2 threads, the output freshly allocated as a caller gets it. Candidates, run
interleaved (every repetition runs each candidate once, in a rotating order) and
summarised by the median time:

* ``copy``: ``x.clone()``, one read and one write of the tensor: the memory roofline.
* ``posenc half`` / ``posenc interleaved``: ``posenc.RotaryEmbedding(64, layout=...)(x)``,
  the module call as a user makes it (table lookup included).
* ``HF eager half``: ``x * cos + rotate_half(x) * sin`` with ``rotate_half`` from
  ``transformers``' Llama code (cos/sin precomputed at full width, not timed).
* ``HF eager interleaved``: the same with ``rotate_every_two`` from ``transformers``'
  GPT-J code (cos/sin repeated per pair, precomputed, not timed).
* ``complex (Meta style)``: ``view_as_complex`` times a precomputed complex table, for
  reference.

Targets: posenc interleaved <= 1.3x copy, posenc half <= 1.8x copy, and each posenc
layout at least 2.5x faster than the HF eager formulation of the same layout.

Run from the repository root:  python benchmarks/bench_rotary.py  [--repeats 40]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import posenc

TARGETS = {  # name: (ratio to copy at most, speed-up over HF eager at least)
    "posenc interleaved": (1.3, 2.5),
    "posenc half": (1.8, 2.5),
}
HF_OF = {"posenc interleaved": "HF eager interleaved", "posenc half": "HF eager half"}


def make_candidates(x: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    from transformers.models.gptj.modeling_gptj import rotate_every_two
    from transformers.models.llama.modeling_llama import rotate_half

    seq, head_dim = x.shape[-2], x.shape[-1]
    rope_half = posenc.RotaryEmbedding(head_dim, layout="half")
    rope_inter = posenc.RotaryEmbedding(head_dim, layout="interleaved")
    cos, sin, *_ = rope_half.tables(seq_len=seq)  # (seq, head_dim/2), float32
    cos_half, sin_half = torch.cat([cos, cos], -1)[None, None], torch.cat([sin, sin], -1)[None, None]
    cos_pair = cos.repeat_interleave(2, -1)[None, None]
    sin_pair = sin.repeat_interleave(2, -1)[None, None]
    rotation = torch.complex(cos, sin)
    assert cos.shape == (seq, head_dim // 2)

    def complex_meta() -> torch.Tensor:
        pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)))
        return torch.view_as_real(pairs * rotation).flatten(-2)

    candidates = {
        "copy": lambda: x.clone(),
        "posenc interleaved": lambda: rope_inter(x),
        "posenc half": lambda: rope_half(x),
        "HF eager interleaved": lambda: x * cos_pair + rotate_every_two(x) * sin_pair,
        "HF eager half": lambda: x * cos_half + rotate_half(x) * sin_half,
        "complex (Meta style)": complex_meta,
    }
    # every candidate must compute the same thing before we time it
    torch.testing.assert_close(candidates["posenc half"](), candidates["HF eager half"]())
    torch.testing.assert_close(candidates["posenc interleaved"](), candidates["HF eager interleaved"]())
    torch.testing.assert_close(candidates["posenc interleaved"](), complex_meta())
    return candidates


def measure(candidates: dict[str, Callable[[], torch.Tensor]], repeats: int, warmup: int = 3) -> dict[str, list[float]]:
    names = list(candidates)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(warmup + repeats):
        order = names[r % len(names) :] + names[: r % len(names)]  # rotate the order
        for name in order:
            t0 = time.perf_counter()
            out = candidates[name]()
            dt = time.perf_counter() - t0
            del out
            if r >= warmup:
                times[name].append(dt)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=40, help="timed repetitions per candidate")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--shape", type=int, nargs=4, default=[4, 16, 2048, 64], metavar=("B", "H", "S", "D"))
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(*args.shape, dtype=torch.float32)
    mb = x.numel() * x.element_size() / 2**20
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, x {tuple(x.shape)} float32 ({mb:.0f} MiB), "
          f"{args.repeats} interleaved repetitions, medians")
    times = measure(make_candidates(x), args.repeats)
    med = {n: statistics.median(t) for n, t in times.items()}
    copy = med["copy"]
    print(f"{'candidate':<22} {'median ms':>10} {'IQR ms':>14} {'x copy':>8}")
    for name, t in times.items():
        q1, _, q3 = statistics.quantiles(t, n=4)
        print(f"{name:<22} {med[name] * 1e3:>10.2f} {q1 * 1e3:>6.2f}-{q3 * 1e3:<7.2f} {med[name] / copy:>8.2f}")
    ok = True
    print("\nTargets, judged on the medians:")
    for name, (max_ratio, min_speedup) in TARGETS.items():
        ratio = med[name] / copy
        speedup = med[HF_OF[name]] / med[name]
        good = ratio <= max_ratio and speedup >= min_speedup
        ok &= good
        print(f"{name}: {ratio:.2f}x copy (target <= {max_ratio}), {speedup:.2f}x faster than "
              f"{HF_OF[name]} (target >= {min_speedup}): {'met' if good else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
