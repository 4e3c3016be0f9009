"""What one kernel config compiles to for a GPU this machine does not have: TileLang lowers
it for the target arch, nvcc builds the source, and the script prints the wgmma/mma shapes
the PTX issues and what ptxas reports (registers, spills, shared memory). No GPU and no
device time: it answered, here, why 152-column ping-pong tiles ran 3x slower on the H200
(304 `wgmma m64n8k16` where 144 columns take 32 `m64n144k16` at 3152x3072x768).

    python3 benchmarks/ptx_stats.py gemm 3152x3072x768 '{"block_M": 128, "block_N": 152, ...}' [--arch sm_90a]

In: a family, its shape written with x, a config as JSON (merged over the family's CUDA
defaults; the family's own check is skipped, so refused configs can be looked at). Out:
one line per instruction shape with its count, then ptxas's lines (registers, spills, and
its performance warnings: C7511 and C7514 say it serialized the kernel's wgmmas), and, where
cuobjdump is on PATH, the kernel's static SASS instruction count. Needs nvcc on PATH.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from evaluator import kernels
from evaluator.kernels import common as C

# One instruction per line of cuobjdump -sass: "/*0a40*/  FFMA R1, ... ;".
SASS_LINE = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+\S", re.M)
# The tensor-core shapes, and how exp2 and fp32 division came out (ex2.approx.ftz.f32 and
# div.approx under --use_fast_math; ex2.approx.f32 with denormal guards, div.rn otherwise).
MMA = re.compile(
    r"\b(wgmma\.mma_async\.sync\.aligned\.m\d+n\d+k\d+|mma\.sync\.aligned\.m\d+n\d+k\d+"
    r"|ex2\.approx(?:\.ftz)?\.f32|div\.(?:rn|approx|full)(?:\.ftz)?\.f32)"
)


def stats(family: str, shape: tuple[int, ...], cfg: dict, arch: str = "sm_90a") -> tuple[dict[str, int], list[str]]:
    """(instruction shape -> count in the PTX, ptxas's register/spill/smem lines)."""
    import tilelang

    fam = kernels.get(family)
    target = f"cuda -arch={arch}"
    sched = fam.schedule(shape, "float16", "cuda")
    # The family's kernel parameters (layernorm's eps) ride in the config, as `resolve` does.
    params = {k: float(v) for k, v in fam.params.items()}
    prim = sched.program(shape, "float16", {**sched.defaults, **params, **cfg})
    source = C.lower_source(prim, target)
    root = Path(tilelang.__file__).parent
    # The flags TileLang's own build adds from the program's pass configs.
    passes = dict(prim.attrs["tilelang_pass_configs"]) if prim.attrs and "tilelang_pass_configs" in prim.attrs else {}
    fast = ["--use_fast_math"] if passes.get("tl.enable_fast_math") else []
    with tempfile.TemporaryDirectory() as tmp:
        cu, ptx, cubin = Path(tmp, "k.cu"), Path(tmp, "k.ptx"), Path(tmp, "k.cubin")
        cu.write_text(source)
        flags = [
            "-std=c++17",
            f"-gencode=arch={arch.replace('sm_', 'compute_')},code={arch}",
            "-O3",
            "-w",
            f"-I{root / 'src'}",
            f"-I{root / '3rdparty/cutlass/include'}",
            *fast,
        ]
        subprocess.run(["nvcc", *flags, "-ptx", str(cu), "-o", str(ptx)], check=True, timeout=600)
        built = subprocess.run(
            ["nvcc", *flags, "-cubin", "-Xptxas", "-v", str(cu), "-o", str(cubin)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        counts = collections.Counter(MMA.findall(ptx.read_text()))
        lines = [
            ln.split("ptxas info    : ")[-1].strip()
            for ln in built.stderr.splitlines()
            if "registers" in ln or "spill" in ln or "Performance Loss" in ln
        ]
        if fast:
            lines.append("built with --use_fast_math (the program's tl.enable_fast_math)")
        if shutil.which("cuobjdump") and cubin.exists():
            sass = subprocess.run(
                ["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True, timeout=600
            ).stdout
            lines.append(f"{len(SASS_LINE.findall(sass))} SASS instructions")
    return dict(counts), lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("family")
    ap.add_argument("shape", help="the family's shape written with x, e.g. 3152x3072x768")
    ap.add_argument("config", nargs="?", default="{}", help="a JSON object over the family's CUDA defaults")
    ap.add_argument("--arch", default="sm_90a")
    args = ap.parse_args()
    if shutil.which("nvcc") is None:
        print("ptx_stats: needs nvcc on PATH", file=sys.stderr)
        return 2
    try:
        shape = tuple(int(x) for x in args.shape.split("x"))
        cfg = json.loads(args.config)
    except ValueError:
        print(
            f"ptx_stats: expected a shape like 3152x3072x768 and a JSON object, got {args.shape!r} {args.config!r}",
            file=sys.stderr,
        )
        return 2
    counts, lines = stats(args.family, shape, cfg, args.arch)
    for name, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"{n:6d}  {name}")
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
