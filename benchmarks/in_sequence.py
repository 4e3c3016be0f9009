"""A kernel's own duration back to back with itself, and right after other work, as it
runs inside a model: the check between the op benchmark and the model.

In: a family, a shape written with x, and one or more configs (JSON objects, the sweep's
or the tuner's). Out: per config, the kernel's median duration from CUPTI (torch.profiler)
in two CUDA graphs, and their ratio:
- `alone`: the kernel `--calls` times back to back, as the op benchmark replays it;
- `after`: each call right after the family's PyTorch reference on other inputs (for a
  fused GEMM: cuBLAS and the activation's elementwise kernel), so every call starts with
  other code and other data in the caches, as in a model;
- `flushed`: each call right after a write over twice the L2's size, so its code and data
  start from DRAM but no other kernel's code ran on the SMs (Nsight Compute's cold cache).

Why: at ViT-B's 3152x3072x768 on the H200 (2026-12-02,
reports/examples/benchmarks/h200-2026-12-02/) the ping-pong gemm_gelu ran 36.1 µs in the
op sweep and 48.7 µs a call inside the model (Nsight Compute, caches flushed: 48.4), while
the wave tile ran 39.4 µs in both; the tuner, which times the first way, had picked the
ping-pong tile. If `after` reproduces the model's number, the tuner can time the second
way. It does there: 46.0 µs after the reference, 37.8 µs after an L2 flush
(in_sequence_gelu.json in that folder).

    python3 benchmarks/in_sequence.py gemm_gelu 3152x3072x768 '{"block_M": 128, ...}' '{...}' [--calls 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evaluator.device import hardware
from evaluator import kernels  # noqa: E402
from evaluator.measuring.timing import graph_kernel_events  # noqa: E402


def durations(fn, names: set[str], replays: int) -> list[float]:
    """The durations (µs) of the kernels named `names` in `replays` replays of `fn` captured."""
    return [e["dur"] for r in graph_kernel_events(fn, replays) for e in r if e["name"] in names]


def measure(fam, shape, dtype: str, cfg: dict, target: str, calls: int, replays: int) -> dict:
    kernel = fam.build(shape, dtype, cfg, target)
    mine, other = fam.make_inputs(shape, dtype, "cuda", 0), fam.make_inputs(shape, dtype, "cuda", 1)
    names = {e["name"] for r in graph_kernel_events(lambda: kernel(*mine), 1) for e in r}

    def alone():
        for _ in range(calls):
            kernel(*mine)

    def after():
        for _ in range(calls):
            fam.reference(*other)
            kernel(*mine)

    scrub = torch.empty(
        2 * torch.cuda.get_device_properties(0).L2_cache_size // 4 + 1, dtype=torch.float32, device="cuda"
    )

    def flushed():
        for _ in range(calls):
            scrub.zero_()
            kernel(*mine)

    a, b, f = (statistics.median(durations(fn, names, replays)) for fn in (alone, after, flushed))
    return {
        "config": cfg,
        "kernels": sorted(names),
        "alone_us": a,
        "after_us": b,
        "flushed_us": f,
        "after_over_alone": b / a,
        "flushed_over_alone": f / a,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("family")
    ap.add_argument("shape")
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--replays", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    fam = kernels.get(args.family)
    shape = tuple(int(x) for x in args.shape.split("x"))
    hw = hardware.detect("cuda")
    rows = [measure(fam, shape, args.dtype, json.loads(c), hw.target, args.calls, args.replays) for c in args.configs]
    for r in rows:
        print(
            f"{args.family} {args.shape}: alone {r['alone_us']:7.1f} us, after the reference {r['after_us']:7.1f} us "
            f"({r['after_over_alone']:.2f}x), after an L2 flush {r['flushed_us']:7.1f} us "
            f"({r['flushed_over_alone']:.2f}x) | {r['config']}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": hw.name, "family": args.family, "shape": list(shape), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
