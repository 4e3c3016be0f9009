"""The accumulation loop's unroll factor, measured: one config at each factor, timed and checked.

    python3 benchmarks/unroll.py [--family gemm|bmm] [--shape 4096x4096x1024] [--device cuda|cpu] [--json OUT]

In: a family with a register-tile program (gemm, bmm), an fp32 shape written with x, the
device. Out: per unroll factor, the median latency of the family's first search-space
config (the tuner's best guess) rebuilt with that factor, whether it matched PyTorch, and
its speed against the full unroll (CUDA: factor 0) or against the loop as written (CPU:
factor 1), printed and optionally written as JSON.

Why: an accumulation loop unrolled 4 times or 16 can differ by 20-30% where registers
allow. The tuner searches the factor (kernels/common.py, `accumulation_loop`); this
prints what it is worth on one shape. CPU timings on a shared machine are for
correctness, not for a verdict: the CPU line says so.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evaluator import kernels  # noqa: E402
from evaluator.device import hardware  # noqa: E402
from evaluator.measuring.bench import TimingPolicy  # noqa: E402
from evaluator.measuring.checks import measure  # noqa: E402

FACTORS = {"cuda": (0, 2, 4, 8, 16, 32), "cpu": (1, 2, 4, 8, 16, 32)}


def sweep(family: str, shape: tuple[int, ...], device: str) -> list[dict]:
    fam = kernels.REGISTRY[family]
    hw = hardware.detect(device)
    first = dict(fam.search_space(shape, "float32", hw)[0])
    inputs = fam.make_inputs(shape, "float32", device, 0)
    ref = fam.reference(*inputs)
    atol, rtol = fam.tolerance("float32", shape)
    policy = TimingPolicy(warmup=3, reps=30, max_seconds=2.0)
    rows = []
    for u in FACTORS[device]:
        cfg = {**first, "unroll": u}
        bad = fam.config_error(shape, "float32", cfg, hw.target)
        if bad:
            rows.append({"unroll": u, "status": "refused", "error": bad})
            continue
        kernel = fam.build(shape, "float32", cfg, hw.target)
        status, ms, err = measure(kernel, inputs, ref, atol, rtol, device, policy)
        rows.append({"unroll": u, "status": status, "ms": ms, "error": err, "config": cfg})
    base = next((r["ms"] for r in rows if r.get("ms") and r["unroll"] == FACTORS[device][0]), None)
    for r in rows:
        r["vs_first"] = base / r["ms"] if base and r.get("ms") else None
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", default="gemm", choices=("gemm", "bmm"))
    ap.add_argument("--shape", default=None, help="e.g. 4096x4096x1024 (gemm) or 48x512x512x64 (bmm)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    default = {"gemm": "4096x4096x1024", "bmm": "48x512x512x64"}[args.family]
    if args.device == "cpu":
        default = {"gemm": "512x768x768", "bmm": "12x128x128x64"}[args.family]
    try:
        shape = tuple(int(v) for v in (args.shape or default).split("x"))
    except ValueError:
        sys.exit(f"unroll: --shape wants integers joined by x (e.g. {default}), got {args.shape!r}")
    rows = sweep(args.family, shape, args.device)
    name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(f"{args.family} {'x'.join(map(str, shape))} float32 on {name}; first config {rows[0].get('config')}")
    if args.device == "cpu":
        print("(a shared CPU: these timings check that every factor builds and matches, not which is fastest)")
    for r in rows:
        ms = f"{r['ms']:.4f} ms" if r.get("ms") else r["status"]
        ratio = f"{r['vs_first']:.3f}x" if r.get("vs_first") else ""
        print(f"  unroll {r['unroll']:>2}: {ms:>12} {ratio:>8} {r.get('error') or ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"family": args.family, "shape": shape, "device": name, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
