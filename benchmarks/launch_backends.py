"""The host cost of one TileLang launch under each of TileLang's execution backends.

    python3 benchmarks/launch_backends.py [--family layernorm] [--shape 128x768] [--calls 2000] [--json OUT]

In: a family and a small shape (the kernel's own time should be a few microseconds), a
CUDA device. Out: the host time of one call (`--calls` calls back to back, no
synchronisation between them, divided by their number) of PyTorch's own operator, of the
family's first config as the router launches it (`routed`: its input checks included),
and of the same program compiled under each execution backend TileLang offers for CUDA
(`tvm_ffi`, its default, and `cython`), each checked against PyTorch.

Why: without a CUDA graph a routed model pays this cost on every call, and on the H100
(2026-12-05) every routed model ran eagerly at about a third to two thirds of PyTorch's
speed (docs/results.md, "Open gaps"). The router's
own share is `router_overhead.py`'s; this is the launch's. The backend the kernels are
built with is `kernels.common.compile_program`'s choice.

Bad input (no CUDA device, an unknown family or backend, a malformed shape): one line on
stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evaluator import kernels  # noqa: E402
from evaluator.device import hardware  # noqa: E402
from evaluator.kernels import common as C  # noqa: E402

BACKENDS = ("tvm_ffi", "cython")


def host_us(fn, inputs: tuple, calls: int) -> float:
    """Mean host time of one call, back to back: the launch, not the kernel."""
    for _ in range(20):
        fn(*inputs)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*inputs)
    t = time.perf_counter() - t0
    torch.cuda.synchronize()
    return t / calls * 1e6


def measure(family: str, shape: tuple[int, ...], calls: int) -> list[dict]:
    fam = kernels.REGISTRY[family]
    hw = hardware.detect("cuda")
    dtype = "float16"
    cfg = dict(fam.search_space(shape, dtype, hw)[0])
    inputs = fam.make_inputs(shape, dtype, "cuda", 0)
    ref = fam.reference(*inputs)
    atol, rtol = fam.tolerance(dtype, shape)

    def row(side: str, make) -> dict:
        try:
            fn = make()
            ok = bool(torch.allclose(fn(*inputs).float(), ref.float(), atol=atol, rtol=rtol))
            return {"side": side, "host_us": host_us(fn, inputs, calls), "correct": ok}
        except Exception as exc:  # a backend this TileLang cannot use for the program: a row, not a crash
            return {"side": side, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}

    # The family's own build is what the router launches (its input checks included).
    rows = [{"side": "PyTorch", "host_us": host_us(fam.reference, inputs, calls)}]
    rows.append(row("routed", lambda: fam.build(shape, dtype, cfg, hw.target)))
    resolved = fam.resolve(shape, dtype, cfg, hw.target)
    n_in = len(fam.input_shapes(shape))
    for b in BACKENDS:
        rows.append(row(b, lambda b=b: C.compile_program(resolved.program(), [n_in], hw.target, execution_backend=b)))
    return rows


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="layernorm")
    ap.add_argument("--shape", default="128x768", help="the family's shape, written with x")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    try:
        shape = tuple(int(v) for v in args.shape.split("x"))
    except ValueError:
        fail(f"--shape {args.shape}: expected integers joined by x, e.g. 128x768")
    if args.family not in kernels.REGISTRY:
        fail(f"--family {args.family}: expected one of {', '.join(sorted(kernels.REGISTRY))}")
    if args.calls < 1:
        fail(f"--calls {args.calls}: expected 1 or more")
    if not torch.cuda.is_available():
        fail("needs a CUDA device: this measures the host cost of a GPU kernel launch")
    rows = measure(args.family, shape, args.calls)
    print(f"{args.family} {args.shape} float16 on {torch.cuda.get_device_name()}, {args.calls} calls back to back")
    for r in rows:
        what = f"{r['host_us']:7.1f} us a call" if "host_us" in r else f"failed: {r['error']}"
        print(f"  {r['side']:8s} {what}" + ("" if r.get("correct", True) else "  (WRONG ANSWER)"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"family": args.family, "shape": shape, "calls": args.calls, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
