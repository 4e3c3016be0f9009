"""Small ops timed three ways on CUDA, side by side: per-call CUDA events (what the tool
used to report), CUDA-graph replay of back-to-back calls over rotated inputs (what it
reports now), and the profiler's kernel time (CUPTI). Prints a table; --json writes it.

    python3 benchmarks/timer_check.py [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from evaluator.measuring import bench
from evaluator.device import hardware
from evaluator import kernels

CASES = [
    ("gemm", (1024, 768, 768)),
    ("gemm", (1024, 3072, 768)),
    ("gemm", (1024, 768, 3072)),
    ("layernorm", (1024, 768)),
    ("softmax", (1024, 128)),
    ("attention", (8, 12, 128, 128, 64, 0)),
]


def per_call_events(fn, reps=50):
    for _ in range(5):
        fn()
    xs = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        xs.append(a.elapsed_time(b))
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--dtype", default="float16")
    args = ap.parse_args()
    hw = hardware.detect("cuda")
    rows = []
    for name, shape in CASES:
        fam = kernels.get(name)
        kernel = fam.build(shape, args.dtype, fam.search_space(shape, args.dtype, hw)[0], hw.target)
        inputs = fam.make_inputs(shape, args.dtype, "cuda", 0)
        ob = bench.bench_op(
            fam, shape, args.dtype, kernel, "cuda", source="standard", config={}, policy=bench.TimingPolicy(reps=15)
        )
        row = {
            "family": name,
            "shape": "x".join(map(str, shape)),
            "events_tilelang_us": 1e3 * per_call_events(lambda: kernel(*inputs)),
            "events_torch_us": 1e3 * per_call_events(lambda: fam.reference(*inputs)),
            "graph_tilelang_us": 1e3 * ob.tilelang.median_ms,
            "graph_torch_us": 1e3 * ob.torch.median_ms,
            "cupti_tilelang_us": 1e3 * (ob.tilelang_kernel_ms or 0),
            "cupti_torch_us": 1e3 * (ob.torch_kernel_ms or 0),
            "ratio_graph": ob.speedup,
            "ratio_low": ob.ratio.low,
            "ratio_high": ob.ratio.high,
        }
        row["ratio_events"] = row["events_torch_us"] / row["events_tilelang_us"]
        rows.append(row)
        print(
            f"{name:10s} {row['shape']:22s} events TL {row['events_tilelang_us']:7.1f} "
            f"PT {row['events_torch_us']:7.1f} "
            f"({row['ratio_events']:.2f}x) | graph TL {row['graph_tilelang_us']:7.1f} PT {row['graph_torch_us']:7.1f} "
            f"({row['ratio_graph']:.2f}x [{row['ratio_low']:.2f}-{row['ratio_high']:.2f}]) | "
            f"CUPTI TL {row['cupti_tilelang_us']:7.1f} PT {row['cupti_torch_us']:7.1f}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": hw.name, "dtype": args.dtype, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
