"""Every kernel family built with nvcc for a CUDA target this machine does not have: the
step after the portability matrix's lowering, before any GPU time is spent. A target
older than the card it will run on takes `--card` (the card's machine code built from
the target's PTX beside the target's own), as `evaluate --target` builds it on that card.

    python3 benchmarks/nvcc_build.py [--target cuda:sm_80] [--card sm_90] [--configs 2] [--only gemm,conv2d] [--cached]

In: a target as --target spells it, the card's arch (or none), how many configs of each
family's search space at its first CUDA standard shape, fp16. Out: one line per build
(family, shape, config, seconds, or the error's last line), then the count built and
failed; exit 1 when any failed, 2 on bad input or without nvcc on PATH. Each build goes
through TileLang's own nvcc call, so a pass here means the source compiles and links as
the run would compile it.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import os
import re
import shutil
import sys
import tempfile
import time

# TileLang keeps built kernels on disk; a kernel found there was not compiled by this run.
# An empty cache of the run's own (set before TileLang is imported) makes each line an
# nvcc build, unless --cached keeps the user's cache.
if "--cached" not in sys.argv and "TILELANG_CACHE_DIR" not in os.environ:
    os.environ["TILELANG_CACHE_DIR"] = tempfile.mkdtemp(prefix="nvcc-build-")
    atexit.register(shutil.rmtree, os.environ["TILELANG_CACHE_DIR"], True)

from evaluator import kernels
from evaluator.device import arch as A
from evaluator.device import targets as T
from evaluator.errors import ConfigError


def builds(target: A.Target, configs: int, only: list[str] | None) -> list[tuple[str, tuple, dict, float, str]]:
    """(family, shape, config, seconds, error or "") for each build, in registry order."""
    # The limits a search space is sized by: the table's part of the target's arch.
    spec = next((s for s in T.TARGETS.values() if s.kind == target.kind and s.arch == target.arch), None)
    if spec is None:
        raise ConfigError(
            f"--target {target.flag}: no part in the target table has arch {target.arch}; "
            f"use one of {', '.join(sorted({s.arch for s in T.TARGETS.values() if s.kind == 'cuda'}))}"
        )
    hw = dataclasses.replace(spec.hardware(), target=target.build)
    rows = []
    for name in sorted(kernels.REGISTRY):
        if only and name not in only:
            continue
        fam = kernels.get(name)
        shape = tuple(fam.standard_shapes("cuda")[0])
        for cfg in fam.search_space(shape, "float16", hw)[:configs]:
            t0 = time.perf_counter()
            try:
                fam.build(shape, "float16", cfg, hw.target)
                rows.append((name, shape, cfg, time.perf_counter() - t0, ""))
            except Exception as exc:
                last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
                rows.append((name, shape, cfg, time.perf_counter() - t0, f"{type(exc).__name__}: {last[:300]}"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="cuda:sm_80", help="as evaluate --target spells it (cuda:sm_XY)")
    ap.add_argument("--card", default="sm_90", help="the card's arch it runs on, or 'none' for the target's alone")
    ap.add_argument("--configs", type=int, default=2, help="configs of each family's space (default 2)")
    ap.add_argument("--only", default="", help="comma-separated families")
    ap.add_argument("--cached", action="store_true", help="use TileLang's kernel cache (default: build everything)")
    args = ap.parse_args()
    if shutil.which("nvcc") is None:
        print("nvcc_build: needs nvcc on PATH", file=sys.stderr)
        return 2
    try:
        want = A.parse_flag(args.target)
        if want is None or want.kind != "cuda":
            raise ConfigError(f"--target {args.target}: expected a CUDA target, e.g. cuda:sm_80")
        if args.configs < 1:
            raise ConfigError(f"--configs {args.configs}: expected 1 or more")
        if args.card != "none" and not re.fullmatch(r"sm_\d{2,3}[af]?", args.card):
            raise ConfigError(f"--card {args.card}: expected an arch like sm_90, or none")
        only = [f.strip() for f in args.only.split(",") if f.strip()] or None
        unknown = [f for f in only or () if f not in kernels.REGISTRY]
        if unknown:
            known = ", ".join(sorted(kernels.REGISTRY))
            raise ConfigError(f"--only: unknown families {', '.join(unknown)}; known: {known}")
        code = () if args.card == "none" or args.card == want.arch else (want.arch, args.card)
        rows = builds(A.Target("cuda", want.arch, code), args.configs, only)
    except ConfigError as exc:
        print(f"nvcc_build: {exc}", file=sys.stderr)
        return 2
    for name, shape, cfg, secs, err in rows:
        what = "x".join(map(str, shape))
        print(f"{'FAIL' if err else 'ok  '}  {name:20s} {what:28s} {secs:5.1f} s  {cfg}")
        if err:
            print(f"      {err}")
    failed = sum(1 for r in rows if r[4])
    print(f"{len(rows) - failed} built, {failed} failed, for {A.Target('cuda', want.arch, code).build}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
