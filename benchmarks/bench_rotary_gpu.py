"""RoPE on a CUDA GPU: posenc against a memory copy and Hugging Face's ``apply_rotary_pos_emb``.

Workload: queries and keys of shape (4, 32, 4096, 128) = (batch, heads, seq, head_dim),
position ids (batch, seq), float32 and bfloat16, both layouts, eager and
``torch.compile``. Every candidate rotates q and k (two tensors), as an attention layer
does:

* ``copy``: ``q.clone(), k.clone()``: one read and one write of each tensor, the
  memory roofline every ratio below is taken against (always eager).
* ``HF``: half layout: ``apply_rotary_pos_emb(q, k, cos, sin)`` of ``transformers``'
  Llama code with the tables of its ``LlamaRotaryEmbedding`` (precomputed, not timed;
  in bf16 it rotates in bf16). Interleaved layout: ``x * cos + rotate_every_two(x) * sin``
  with ``rotate_every_two`` of its GPT-J code (tables precomputed, repeated per pair).
* ``posenc tables``: ``apply_rotary_tables(q, k, cos, sin)`` with ``cos, sin =
  rope.tables(position_ids)`` precomputed (once per forward in a model).
* ``posenc module``: ``rope(q, positions=position_ids), rope(k, positions=position_ids)``
  (tables included).
* ``posenc no Triton``: the module's eager torch code with the fused kernel switched off.

Also a decoding step, (4, 32, 1, 128) with position ids (4, 1): the module (tables
computed for q and for k), and ``tables`` + ``apply_rotary_tables`` (once), against
``LlamaRotaryEmbedding`` + ``apply_rotary_pos_emb``, wall-clock per step (launch-bound).

Where CUDA is not available the script says so and exits with status 0.
Run from the repository root:  python benchmarks/bench_rotary_gpu.py  [--json out.json]
(``--device cpu --shape 1 2 64 16 --no-compile`` runs the same code on the CPU as a smoke test.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch

import posenc
import posenc.rope.kernels
import posenc.rotary

Fn = Callable[[], object]


def hf_functions():
    from transformers import LlamaConfig
    from transformers.models.gptj.modeling_gptj import rotate_every_two
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    return LlamaConfig, LlamaRotaryEmbedding, apply_rotary_pos_emb, rotate_every_two


def cuda_time(fn: Fn, repeats: int, warmup: int = 3) -> list[float]:
    """Seconds per call, each call timed by CUDA events (plain wall-clock on the CPU)."""
    for _ in range(warmup):
        fn()
    times = []
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    for _ in range(repeats):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return times


def without_fused(fn: Fn) -> Fn:
    """``fn`` with the fused Triton kernel switched off (``rotate_fast`` asks ``kernels._triton()``)."""

    def call():
        saved = posenc.rope.kernels._triton
        posenc.rope.kernels._triton = lambda: None
        try:
            return fn()
        finally:
            posenc.rope.kernels._triton = saved

    return call


def candidates(q, k, pos, layout: str, compile_: bool) -> dict[str, Fn]:
    LlamaConfig, LlamaRotaryEmbedding, apply_rotary_pos_emb, rotate_every_two = hf_functions()
    batch, heads, seq, head_dim = q.shape
    config = LlamaConfig(hidden_size=heads * head_dim, num_attention_heads=heads, head_dim=head_dim)
    hf_rope = LlamaRotaryEmbedding(config).to(q.device)
    cos_hf, sin_hf = hf_rope(q, pos)  # (batch, seq, head_dim) in q's dtype, [cos | cos]
    rope = posenc.RotaryEmbedding(head_dim, layout=layout).to(q.device)
    cos, sin, *_ = rope.tables(pos)  # (batch, seq, head_dim / 2) float32

    if layout == "half":

        def hf(q, k):
            return apply_rotary_pos_emb(q, k, cos_hf, sin_hf)

    else:
        cos_pair = cos_hf[..., : head_dim // 2].repeat_interleave(2, -1)[:, None]
        sin_pair = sin_hf[..., : head_dim // 2].repeat_interleave(2, -1)[:, None]

        def hf(q, k):
            return q * cos_pair + rotate_every_two(q) * sin_pair, k * cos_pair + rotate_every_two(k) * sin_pair

    def tables(q, k):
        return posenc.apply_rotary_tables(q, k, cos, sin, layout=layout)

    def module(q, k, pos):
        return rope(q, positions=pos), rope(k, positions=pos)

    if compile_:
        hf_c = torch.compile(hf, fullgraph=True, dynamic=False)
        tables_c = torch.compile(tables, fullgraph=True, dynamic=False)
        module_c = torch.compile(module, fullgraph=True, dynamic=False)
        return {
            "HF": lambda: hf_c(q, k),
            "posenc tables": lambda: tables_c(q, k),
            "posenc module": lambda: module_c(q, k, pos),
        }
    return {
        "HF": lambda: hf(q, k),
        "posenc tables": lambda: tables(q, k),
        "posenc module": lambda: module(q, k, pos),
        "posenc no Triton": without_fused(lambda: module(q, k, pos)),
    }


def reference(x: torch.Tensor, pos: torch.Tensor, layout: str) -> torch.Tensor:
    return posenc.apply_rotary(x.double(), pos, layout=layout)


def decode_step(batch: int, heads: int, head_dim: int, device: str, steps: int) -> dict[str, float]:
    """Wall-clock microseconds per decoding step (q and k of one new token each)."""
    LlamaConfig, LlamaRotaryEmbedding, apply_rotary_pos_emb, _ = hf_functions()
    config = LlamaConfig(hidden_size=heads * head_dim, num_attention_heads=heads, head_dim=head_dim)
    hf_rope = LlamaRotaryEmbedding(config).to(device)
    rope = posenc.RotaryEmbedding(head_dim).to(device)
    q = torch.randn(batch, heads, 1, head_dim, device=device, dtype=torch.bfloat16)
    k = torch.randn_like(q)
    pos = torch.full((batch, 1), 1000, device=device)

    def ours():
        return rope(q, positions=pos), rope(k, positions=pos)

    def ours_tables():
        cos, sin, *_ = rope.tables(pos)
        return posenc.apply_rotary_tables(q, k, cos, sin)

    def hf():
        cos, sin = hf_rope(q, pos)
        return apply_rotary_pos_emb(q, k, cos, sin)

    result = {}
    for name, fn in (
        ("posenc module (q and k)", ours),
        ("posenc tables + apply_rotary_tables", ours_tables),
        ("HF rotary_emb + apply_rotary_pos_emb", hf),
    ):
        for _ in range(20):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        result[name] = (time.perf_counter() - t0) / steps * 1e6
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", type=int, nargs=4, default=[4, 32, 4096, 128], metavar=("B", "H", "S", "D"))
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    parser.add_argument("--json", help="also write the medians to this file")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("CUDA is not available on this machine: the GPU benchmark is skipped (nothing measured).")
        return 0
    device = args.device
    torch.manual_seed(0)
    batch, heads, seq, head_dim = args.shape
    pos = (torch.arange(seq, device=device) + 0).expand(batch, seq)
    fused = device == "cuda" and posenc.rope.kernels._triton() is not None
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"torch {torch.__version__}, {name}, fused Triton kernel available: {fused}")
    print(f"q and k of shape {tuple(args.shape)}, position ids (batch, seq); medians of {args.repeats} timed calls\n")
    results = {"device": name, "torch": torch.__version__, "shape": args.shape, "fused": fused, "rows": []}
    header = f"{'dtype':<9} {'layout':<12} {'mode':<8} {'candidate':<17} {'median ms':>10} {'x copy':>7} {'x HF':>6}"
    print(header)
    print("-" * len(header))
    for dtype in (torch.float32, torch.bfloat16):
        q = torch.randn(*args.shape, device=device, dtype=dtype)
        k = torch.randn_like(q)
        copy = statistics.median(cuda_time(lambda: (q.clone(), k.clone()), args.repeats))
        for layout in posenc.rotary.ROTARY_LAYOUTS:
            ref_q = reference(q[:1], pos[0], layout)
            for compile_ in (False, True) if not args.no_compile else (False,):
                mode = "compiled" if compile_ else "eager"
                cands = candidates(q, k, pos, layout, compile_)
                # every posenc candidate computes the float32 rotation (bf16: rounded once at the end)
                for cname, fn in cands.items():
                    if cname.startswith("posenc"):
                        got = fn()[0][:1].double()
                        tol = dict(rtol=0, atol=2e-5) if dtype == torch.float32 else dict(rtol=2**-7, atol=1e-6)  # 1 bf16 ulp
                        torch.testing.assert_close(got, ref_q.to(dtype).double(), **tol)
                med = {c: statistics.median(cuda_time(fn, args.repeats)) for c, fn in cands.items()}
                for cname, t in med.items():
                    row = {
                        "dtype": str(dtype).removeprefix("torch."),
                        "layout": layout,
                        "mode": mode,
                        "candidate": cname,
                        "ms": t * 1e3,
                        "x_copy": t / copy,
                        "x_hf": t / med["HF"],
                        "copy_ms": copy * 1e3,
                    }
                    results["rows"].append(row)
                    print(
                        f"{row['dtype']:<9} {layout:<12} {mode:<8} {cname:<17} {t * 1e3:>10.3f} "
                        f"{t / copy:>7.2f} {t / med['HF']:>6.2f}"
                    )
        print(f"{'':<9} {'copy (q and k)':<21} {'':<17} {copy * 1e3:>10.3f}")
    steps = 200 if device == "cuda" else 20
    decode = decode_step(batch, heads, head_dim, device, steps)
    results["decode_us"] = decode
    print(f"\nDecoding step, q and k of shape ({batch}, {heads}, 1, {head_dim}) bf16, position ids ({batch}, 1), eager:")
    for cname, us in decode.items():
        print(f"  {cname:<40} {us:8.1f} us per step")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
