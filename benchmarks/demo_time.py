"""How long README's demo takes here, cold and warm, and under what load.

    python3 benchmarks/demo_time.py [--runs 1] [-- EVALUATE ARGS...]

Runs `evaluate --model bert-tiny` (other arguments after `--`) into a scratch reports
folder: first cold (TileLang's kernel cache, Inductor's cache and the tuning cache all
empty, as on a fresh clone after installing), then warm (the same caches again). Prints
each run's wall time, the stages' own seconds from results.json, the machine's cores and
its load average before and after: a time is only worth quoting with those beside it
(on 2 cores at load 5 the same demo took four times as long as idle).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one(args: list[str], reports: Path, env: dict[str, str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "evaluator.cli", *args, "--reports", str(reports)],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"evaluate exited {p.returncode}: {(p.stdout + p.stderr)[-2000:]}")
    run = max((reports / "runs").iterdir(), key=lambda d: d.stat().st_mtime)
    return wall, json.loads((run / "results.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1, help="warm runs after the cold one")
    ap.add_argument("evaluate_args", nargs="*", default=["--model", "bert-tiny"])
    args = ap.parse_args()
    print(f"{os.cpu_count()} cores; load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TILELANG_CACHE_DIR": f"{tmp}/tilelang", "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor"}
        for i in range(1 + args.runs):
            label = "cold" if i == 0 else "warm"
            wall, r = one(args.evaluate_args, Path(tmp) / "reports", env)
            stages = ", ".join(f"{k} {v:.1f}" for k, v in r["stage_seconds"].items())
            print(
                f"{label}: {wall:.1f} s wall ({stages}); load average now "
                f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}",
                flush=True,
            )


if __name__ == "__main__":
    main()
