"""One GPU check of posenc, under 5 minutes on one H100/H200: correctness, syncs, graphs, speed.

Run on a machine with a CUDA GPU, from the repository root:

    python benchmarks/gpu_check.py --out gpu_check      # writes gpu_check.json and gpu_check.md

Steps (each prints its result; a failed check is reported and the script goes on, exit 1 at the end):

1. ``kernels``: :func:`posenc.rope.kernels.rotate_fast` (the fused Triton kernel where it
   applies: half layout, contiguous CUDA x) against :func:`posenc.rope.core.rotate` (the
   reference) for float32/bfloat16/float16 x both layouts x head widths 64, 80, 96, 128, 256
   x S 1, 37, 4096, contiguous ``(B, H, S, D)`` and the transposed view of a ``(B, S, H, D)``
   projection; how many cases are bit-exact, and the largest difference in units of the
   last place of the vector's largest coordinate (at most 2 for float32, whose operation
   order may differ, and 1 for 16 bits); each row says which path ran (Triton or eager).
2. ``syncs``: ``torch.cuda.set_sync_debug_mode("error")`` around every module and function
   a model calls per forward (after one warm-up call each): RotaryEmbedding with position
   ids / offsets, tables, apply_rotary_tables, apply_rotary, HuggingFaceRotary, ALiBiBias,
   T5RelativeBias, the sinusoidal and learned modules.
3. ``graphs``: CUDA-graph capture of a decoding step (module path and tables path), replayed
   with new position ids written in place, equal to eager.
4. ``timing``: bfloat16 q and k ``(4, 32, 4096, 128)`` (contiguous, and the transposed view):
   copy, posenc module, posenc tables + apply, HF eager, HF compiled, posenc compiled; GB/s
   (one read and one write of q and k) and the fraction of the device's peak bandwidth.
5. ``tests``: the CUDA tests of ``tests/library/test_rotary.py`` (``-k cuda``), unless ``--no-tests``.

``--device cpu`` runs steps 1 and 4 on small shapes on the CPU (a smoke test of the script
itself: nothing it prints is a GPU number).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable

import torch

import posenc
import posenc.rope.kernels as kernels
from posenc.rope import HuggingFaceRotary, core

PEAK_GBS = {"H100": 3350.0, "H200": 4800.0, "A100": 2039.0}  # HBM bandwidth of the SXM parts, GB/s
ULP = {torch.float32: 2.0**-23, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
failures: list[str] = []
report: dict[str, object] = {}


def check(name: str, ok: bool, detail: str = "") -> None:
    print(f"  [{'ok' if ok else 'FAIL'}] {name} {detail}")
    if not ok:
        failures.append(f"{name} {detail}")


def step(fn: Callable[[], None]) -> None:
    print(f"\n== {fn.__name__}")
    t0 = time.perf_counter()
    try:
        fn()
    except Exception:  # a crash in one step must not hide the others
        failures.append(f"{fn.__name__} crashed")
        traceback.print_exc()
    print(f"   ({time.perf_counter() - t0:.1f} s)")


def qk(shape, dtype, device, transposed: bool, gen) -> torch.Tensor:
    """``(B, H, S, D)`` contiguous, or the ``view(B, S, H, D).transpose(1, 2)`` a model's projection gives."""
    b, h, s, d = shape
    if transposed:
        return torch.randn(b, s, h, d, device=device, generator=gen).to(dtype).transpose(1, 2)
    return torch.randn(b, h, s, d, device=device, generator=gen).to(dtype)


def kernels_step(device: str, small: bool) -> None:
    gen = torch.Generator(device=device).manual_seed(0)
    rows = []
    lengths = (1, 37) if small else (1, 37, 4096)
    widths = (64, 80) if small else (64, 80, 96, 128, 256)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for layout in core.LAYOUTS:
            for d in widths:
                for s in lengths:
                    for transposed in (False, True):
                        x = qk((2, 4, s, d), dtype, device, transposed, gen)
                        rope = posenc.RotaryEmbedding(d, layout=layout, max_len=8192).to(device)
                        t = rope.tables(torch.randint(0, 100_000, (2, s), device=device, generator=gen))
                        triton = (
                            layout == "half" and x.is_cuda and x.is_contiguous() and kernels._triton() is not None
                        )
                        got = kernels.rotate_fast(x, t.cos, t.sin, layout, 2)
                        ref = core.rotate(x, t.cos, t.sin, layout, 2)
                        diff = (got.float() - ref.float()).abs()
                        # in units of the last place of the vector's largest coordinate: a rotation's
                        # outputs are sums of two products, so that is the scale of its rounding
                        scale = x.float().abs().amax(-1, keepdim=True).clamp_min(1e-30) * ULP[dtype]
                        ulps = float((diff / scale).max())
                        ok = ulps <= (2.0 if dtype == torch.float32 else 1.0)
                        rows.append(dict(dtype=str(dtype)[6:], layout=layout, d=d, s=s, transposed=transposed,
                                         path="triton" if triton else "eager", exact=not bool(diff.any()),
                                         max_ulps=ulps, ok=ok))
                        if not ok:
                            check(f"kernel {dtype} {layout} d={d} s={s} transposed={transposed}", False, f"{ulps:.2f} ulp")
    paths = {r["path"] for r in rows}
    for path in sorted(paths):
        mine = [r for r in rows if r["path"] == path]
        check(f"kernels ({path})", all(r["ok"] for r in mine), f"{len(mine)} cases, {sum(r['exact'] for r in mine)} "
              f"bit-exact, max {max(r['max_ulps'] for r in mine):.2f} ulp (fp32 <= 2, 16-bit <= 1)")
    report["kernels"] = rows


def syncs_step(device: str) -> None:
    b, s, d = 2, 16, 64
    x = torch.randn(b, 4, s, d, device=device, dtype=torch.bfloat16)
    p = torch.arange(s, device=device).expand(b, s) + 3000
    rope = posenc.RotaryEmbedding(d, scaling={"rope_type": "yarn", "factor": 4.0}, max_position_embeddings=1024).to(device)
    tables = rope.tables(p)
    emb = torch.randn(b, s, 32, device=device)
    calls = {
        "rope positions": lambda: rope(x, positions=p),
        "rope int offset": lambda: rope(x, offset=5000),
        "rope tensor offset": lambda: rope(x, offset=torch.tensor([3, 9], device=device)),
        "tables": lambda: rope.tables(p),
        "apply_rotary_tables": lambda: posenc.apply_rotary_tables(x, x, tables),
        "apply_rotary": lambda: posenc.apply_rotary(x, p),
        "HuggingFaceRotary": (lambda m: lambda: m(x, p))(HuggingFaceRotary(rope)),
        "ALiBiBias": (lambda m: lambda: m(s))(posenc.ALiBiBias(4).to(device)),
        "T5RelativeBias": (lambda m: lambda: m(s))(posenc.T5RelativeBias(4).to(device)),
        "sinusoidal": (lambda m: lambda: m(emb))(posenc.SinusoidalPositionalEncoding(32, 64).to(device)),
        "learned": (lambda m: lambda: m(emb))(posenc.LearnedPositionalEmbedding(64, 32).to(device)),
    }
    for name, fn in calls.items():
        fn()  # warm-up: first calls may create cached constants
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            fn()
            check(f"no sync: {name}", True)
        except RuntimeError as err:
            check(f"no sync: {name}", False, str(err).splitlines()[0][:120])
        finally:
            torch.cuda.set_sync_debug_mode("default")


def graphs_step(device: str) -> None:
    rope = posenc.RotaryEmbedding(128, scaling={"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=512).to(device)
    q = torch.randn(4, 32, 1, 128, device=device, dtype=torch.bfloat16)
    k = torch.randn(4, 8, 1, 128, device=device, dtype=torch.bfloat16)
    p = torch.full((4, 1), 100, device=device)

    def decode():
        a = (rope(q, positions=p), rope(k, positions=p))
        b = posenc.apply_rotary_tables(q, k, rope.tables(p))
        return a, b

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            decode()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = decode()
    for step_pos in (101, 900, 70_000):
        p.fill_(step_pos)
        graph.replay()
        torch.cuda.synchronize()
        want = decode()
        same = all(torch.equal(a, b) for pa, pb in zip(out, want) for a, b in zip(pa, pb))
        check(f"graph replay at position {step_pos}", same)


def timing_step(device: str, small: bool, repeats: int) -> None:
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    shape = (1, 4, 256, 128) if small else (4, 32, 4096, 128)
    b, h, s, d = shape
    gen = torch.Generator(device=device).manual_seed(0)
    pos = torch.arange(s, device=device).expand(b, s)
    rope = posenc.RotaryEmbedding(d, max_len=s).to(device)
    hf_rope = LlamaRotaryEmbedding(LlamaConfig(hidden_size=h * d, num_attention_heads=h, head_dim=d)).to(device)
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    peak = next((v for k, v in PEAK_GBS.items() if k in name), None)
    rows = []
    for transposed in (False, True):
        q = qk(shape, torch.bfloat16, device, transposed, gen)
        k = qk(shape, torch.bfloat16, device, transposed, gen)
        cos_hf, sin_hf = hf_rope(q, pos)
        tables = rope.tables(pos)
        hf_c = torch.compile(lambda q, k: apply_rotary_pos_emb(q, k, cos_hf, sin_hf), fullgraph=True, dynamic=False)
        ours_c = torch.compile(lambda q, k: posenc.apply_rotary_tables(q, k, tables), fullgraph=True, dynamic=False)
        cands = {
            "copy": lambda: (q.clone(), k.clone()),
            "posenc module": lambda: (rope(q, positions=pos), rope(k, positions=pos)),
            "posenc tables + apply": lambda: posenc.apply_rotary_tables(q, k, rope.tables(pos)),
            "posenc apply": lambda: posenc.apply_rotary_tables(q, k, tables),
            "posenc apply compiled": lambda: ours_c(q, k),
            "HF apply eager": lambda: apply_rotary_pos_emb(q, k, cos_hf, sin_hf),
            "HF apply compiled": lambda: hf_c(q, k),
        }
        times: dict[str, list[float]] = {c: [] for c in cands}
        for fn in cands.values():
            for _ in range(3):
                fn()
        for r in range(repeats):  # interleaved, rotating order
            names = list(cands)
            for c in names[r % len(names):] + names[: r % len(names)]:
                if device == "cuda":
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    cands[c]()
                    end.record()
                    end.synchronize()
                    times[c].append(start.elapsed_time(end) / 1e3)
                else:
                    t0 = time.perf_counter()
                    cands[c]()
                    times[c].append(time.perf_counter() - t0)
        nbytes = 2 * 2 * q.numel() * q.element_size()  # read and write of q and k
        copy = statistics.median(times["copy"])
        for c, t in times.items():
            med = statistics.median(t)
            gbs = nbytes / med / 1e9
            rows.append(dict(layout="transposed view" if transposed else "contiguous", candidate=c, ms=med * 1e3,
                             x_copy=med / copy, gbs=gbs, of_peak=None if peak is None else gbs / peak))
    print(f"  device {name}, peak {peak} GB/s, bf16 q and k {shape}, medians of {repeats}")
    print(f"  {'layout':<16} {'candidate':<24} {'ms':>8} {'x copy':>7} {'GB/s':>8} {'of peak':>8}")
    for r in rows:
        frac = "" if r["of_peak"] is None else f"{r['of_peak']:.2f}"
        print(f"  {r['layout']:<16} {r['candidate']:<24} {r['ms']:8.3f} {r['x_copy']:7.2f} {r['gbs']:8.0f} {frac:>8}")
    report["timing"] = dict(device=name, shape=shape, peak_gbs=peak, rows=rows)


def tests_step() -> None:
    cmd = [sys.executable, "-m", "pytest", "tests/library/test_rotary.py", "-q", "-p", "no:cacheprovider",
           "-o", "addopts=", "-k", "cuda or fused or graph or debug"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    tail = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-300:]
    check("CUDA tests", run.returncode == 0, tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-tests", action="store_true")
    parser.add_argument("--out", help="write OUT.json and OUT.md")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("CUDA is not available on this machine: nothing checked (use --device cpu for a smoke test).")
        return 0
    small = args.device != "cuda"
    print(f"torch {torch.__version__}, posenc {posenc.__version__}, Triton kernel: "
          f"{args.device == 'cuda' and kernels._triton() is not None}")

    def kernels_():
        kernels_step(args.device, small)

    def syncs():
        syncs_step(args.device)

    def graphs():
        graphs_step(args.device)

    def timing():
        timing_step(args.device, small, args.repeats if not small else 3)

    kernels_.__name__ = "kernels"
    for fn in (kernels_, syncs, graphs, timing) if not small else (kernels_, timing):
        step(fn)
    if not small and not args.no_tests:
        step(tests_step)
    report["failures"] = failures
    if args.out:
        with open(f"{args.out}.json", "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, default=str)
        with open(f"{args.out}.md", "w", encoding="utf-8") as f:
            t = report.get("timing", {})
            f.write(f"device: {t.get('device')}, bf16 q and k {t.get('shape')}\n\n")
            f.write("| layout | candidate | ms | x copy | GB/s | of peak |\n|---|---|---|---|---|---|\n")
            for r in t.get("rows", []):
                frac = "" if r["of_peak"] is None else f"{r['of_peak']:.2f}"
                f.write(f"| {r['layout']} | {r['candidate']} | {r['ms']:.3f} | {r['x_copy']:.2f} | {r['gbs']:.0f} | {frac} |\n")
    print("\nfailures:" if failures else "\nall checks passed", *failures, sep="\n  ")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
