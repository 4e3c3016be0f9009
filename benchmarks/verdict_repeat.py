"""The same command, several times, beside a busy process: does the verdict repeat, and is
every op ratio either inside the roofline's plausible range or flagged?

    python3 benchmarks/verdict_repeat.py [--runs 3] [--busy 1] [-- EVALUATE ARGS...]

Starts `--busy` processes that multiply 512x512 matrices on one thread each (another job
on a shared machine), then runs `evaluate --model bert-tiny` (README's demo; other
arguments after `--`) `--runs` times, each into its own reports folder, and prints per
run: the verdict, the end-to-end ratio and its flags, and each op's speedup, its share
of the roofline and its flags. Exits 1 when the verdicts differ or an op faster than the
roof allows is not flagged.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# A TileLang side above this share of the attainable rate at its arithmetic intensity is
# faster than the measured roof allows (bench.roof_flags' 1.25).
PLAUSIBLE_ROOF_PCT = 125.0


def _busy(stop_at: float) -> None:
    import torch

    torch.set_num_threads(1)
    a = torch.randn(512, 512)
    while time.time() < stop_at:
        a @ a


def one_run(args: list[str], reports: Path) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "evaluator.cli", *args, "--reports", str(reports)], capture_output=True, text=True
    )
    if p.returncode != 0:
        raise SystemExit(f"evaluate exited {p.returncode}: {(p.stdout + p.stderr)[-2000:]}")
    [run] = list((reports / "runs").iterdir())
    return json.loads((run / "results.json").read_text())


def implausible(result: dict) -> list[str]:
    """Op rows whose TileLang side is faster than the roof allows and carry no flag."""
    return [
        f"{b['family']} {'x'.join(map(str, b['shape']))}"
        for b in result["op_bench"]
        if (b.get("tilelang_roof_pct") or 0) > PLAUSIBLE_ROOF_PCT and not b.get("flags")
    ]


def summary(result: dict) -> str:
    e = result.get("e2e") or {}
    ops = "; ".join(
        f"{b['family']} {'x'.join(map(str, b['shape']))} {b['speedup'] or 0:.3g}x"
        + (f" roof {b['tilelang_roof_pct']:.0f}%" if b.get("tilelang_roof_pct") else "")
        + (f" [{', '.join(b['flags'])}]" if b.get("flags") else "")
        for b in result["op_bench"]
    )
    flags = f" [{'; '.join(e['flags'])}]" if e.get("flags") else ""
    return f"{result['verdict']['decision']:<14} e2e {e.get('speedup') or 0:.3g}x{flags}\n    ops: {ops}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--busy", type=int, default=1)
    ap.add_argument("evaluate_args", nargs="*", default=["--model", "bert-tiny"])
    args = ap.parse_args()
    stop_at = time.time() + 600 * args.runs
    procs = [mp.Process(target=_busy, args=(stop_at,), daemon=True) for _ in range(args.busy)]
    for p in procs:
        p.start()
    verdicts, bad = [], []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.runs):
                t0 = time.perf_counter()
                r = one_run(args.evaluate_args, Path(tmp) / f"run{i}")
                verdicts.append(r["verdict"]["decision"])
                bad += implausible(r)
                print(f"run {i + 1} ({time.perf_counter() - t0:.0f} s, {args.busy} busy): {summary(r)}", flush=True)
    finally:
        for p in procs:
            p.terminate()
    same = len(set(verdicts)) == 1
    print(
        f"verdicts: {', '.join(verdicts)} -> {'the same each time' if same else 'DIFFERENT'}; "
        f"unflagged ops past the roof: {', '.join(bad) or 'none'}"
    )
    return 0 if same and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
