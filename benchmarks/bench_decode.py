"""Host cost of one decoding step's rotary embedding, posenc against Hugging Face (CPU or GPU).

Workload: one Llama-7B-shaped layer decoding one token: q ``(4, 32, 1, 128)``, k
``(4, 8, 1, 128)``, position ids ``(4, 1)`` at position 1000, float32 and bfloat16. At this
size the work is the Python and dispatcher overhead of each call (on a GPU: the launches),
so the script prints the number of non-view aten operations (each one a kernel launch on
a GPU) and the time per layer, all candidates timed interleaved in one run:

* ``HF``: ``LlamaRotaryEmbedding(x, position_ids)`` + ``apply_rotary_pos_emb`` (what a
  transformers decoder runs, the tables once per forward, here counted per layer);
* ``posenc module``: ``rope(q, positions=p)`` and ``rope(k, positions=p)``;
* ``posenc tables``: ``rope.tables(p)`` + ``apply_rotary_tables(q, k, tables)``;
* ``posenc apply only``: ``apply_rotary_tables`` with the tables of the forward pass (what
  each layer pays when the tables are computed once per forward, as transformers does);
* ``HF apply only``: ``apply_rotary_pos_emb`` with precomputed ``cos, sin``.

Run from the repository root:  python benchmarks/bench_decode.py  [--repeats N] [--device cuda]
Quote the ratios to HF of one run, never absolute microseconds from a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

import posenc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "library"))
from test_production import decode_op_counts  # noqa: E402  (the count the test asserts)


def candidates(dtype: torch.dtype, device: str) -> dict[str, object]:
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    torch.manual_seed(0)
    q = torch.randn(4, 32, 1, 128, dtype=dtype, device=device)
    k = torch.randn(4, 8, 1, 128, dtype=dtype, device=device)
    p = torch.full((4, 1), 1000, device=device)
    rope = posenc.RotaryEmbedding(128).to(device)
    hf = LlamaRotaryEmbedding(LlamaConfig(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128)).to(device)
    tables, (cos, sin) = rope.tables(p), hf(q, p)
    return {
        "HF": lambda: apply_rotary_pos_emb(q, k, *hf(q, p)),
        "posenc module": lambda: (rope(q, positions=p), rope(k, positions=p)),
        "posenc tables": lambda: posenc.apply_rotary_tables(q, k, rope.tables(p)),
        "HF apply only": lambda: apply_rotary_pos_emb(q, k, cos, sin),
        "posenc apply only": lambda: posenc.apply_rotary_tables(q, k, tables),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30, help="interleaved rounds of 100 calls each")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, device {args.device}, {args.threads} thread(s)")
    print("non-view aten ops per layer (float32):", decode_op_counts())
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    for dtype in (torch.float32, torch.bfloat16):
        cands = candidates(dtype, args.device)
        times: dict[str, list[float]] = {name: [] for name in cands}
        for fn in cands.values():
            for _ in range(20):
                fn()
        for r in range(args.repeats):
            names = list(cands)
            for name in names[r % len(names):] + names[: r % len(names)]:  # rotating order
                sync()
                t0 = time.perf_counter()
                for _ in range(100):
                    cands[name]()
                sync()
                times[name].append((time.perf_counter() - t0) / 100)
        med = {name: statistics.median(t) for name, t in times.items()}
        print(f"\n{str(dtype).removeprefix('torch.')}: median time per layer, ratio to HF (full) and to HF apply only")
        for name, t in med.items():
            print(f"  {name:<20} {t * 1e6:8.1f} us  {t / med['HF']:5.2f} x HF  {t / med['HF apply only']:5.2f} x HF apply")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
