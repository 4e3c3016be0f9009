"""A run's routed model, eager: host time and Python work per forward pass.

    python3 benchmarks/routed_host.py RUN_DIR [--rounds 60]

In: a run folder `evaluate` wrote (reports/runs/<run id>, with config.json and
results.json). The model is loaded as the run loaded it, its tuned kernels are built
again (TileLang's cache makes that a load), and the model runs eagerly, plain and under
the router, in interleaved rounds on the run's device. Out: the fastest round of each
(a busy shared host moves the fastest least), their difference, and the Python function
calls one routed forward pass makes (cProfile's count: the router's own work, which
repeats exactly where CPU timings are noise).

Why: without a CUDA graph a routed model pays the router's host time on every pass
(docs/results.md, "Open gaps"); this measures it on any run, before and after a change
to the router.

Bad input (no such run folder, a run on a device this machine lacks): one line on
stderr, exit 2.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

import torch


def fail(message: str) -> None:
    print(f"routed_host: {message}", file=sys.stderr)
    sys.exit(2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path, help="a run folder: reports/runs/<run id>")
    ap.add_argument("--rounds", type=int, default=60, help="interleaved rounds (default 60)")
    args = ap.parse_args()
    if not (args.run_dir / "config.json").is_file() or not (args.run_dir / "results.json").is_file():
        fail(f"{args.run_dir} is not a run folder (config.json and results.json); give reports/runs/<run id>")
    if args.rounds < 1:
        fail("--rounds must be a positive integer")

    from evaluator import config as config_mod, kernels, models
    from evaluator.device import hardware
    from evaluator.results import RunResult, from_dict
    from evaluator.routing import router as swap

    from evaluator.errors import EvaluatorError

    try:
        cfg = config_mod.from_json((args.run_dir / "config.json").read_text())
        result = from_dict(RunResult, json.loads((args.run_dir / "results.json").read_text()))
    except (EvaluatorError, ValueError, TypeError, KeyError) as exc:
        fail(f"{args.run_dir}: {exc}")
    if cfg.device == "cuda" and not torch.cuda.is_available():
        fail("the run was made on CUDA and this machine has no CUDA device")
    hardware.pin_threads(cfg.device)  # the threads evaluate times with
    m = cfg.model
    loaded = models.load_model(
        m.name, batch_size=m.batch_size, seq_len=m.seq_len, dtype=m.dtype, device=cfg.device, seed=m.seed,
        lengths=m.lengths, layout=result.model.layout,
    )  # fmt: skip
    target = result.environment.hardware.target
    table = swap.KernelTable(m.dtype, target)
    verified = {(b.family, tuple(b.shape)): b.verified for b in result.op_bench}
    for t in result.tuned:
        if t.config is not None and verified.get((t.family, tuple(t.shape)), False):
            table.add(t.family, t.shape, t.config, kernels.get(t.family).build(t.shape, t.dtype, t.config, target))
    router = swap.Router([kernels.get(f) for f in result.families], table, model=loaded.module)
    model, inputs = loaded.module, loaded.inputs
    sync = torch.cuda.synchronize if cfg.device == "cuda" else (lambda: None)

    def once(routed: bool) -> float:
        sync()
        t0 = time.perf_counter()
        if routed:
            with router:
                model(*inputs)
        else:
            model(*inputs)
        sync()
        return (time.perf_counter() - t0) * 1e3

    with torch.inference_mode():
        for _ in range(3):
            once(False), once(True)
        plain, routed = [], []
        for _ in range(args.rounds):
            plain.append(once(False))
            routed.append(once(True))
        router.reset()
        prof = cProfile.Profile()
        prof.enable()
        once(True)
        prof.disable()
    calls = pstats.Stats(prof).total_calls
    ran = sum(router.ran.values())
    fell = sum(sum(c.values()) for c in router.fell_back.values())
    print(f"{result.model.name} ({args.run_dir.name}), {cfg.device}, eager, fastest of {args.rounds} rounds")
    print(f"  plain    {min(plain):8.2f} ms a forward pass")
    print(f"  routed   {min(routed):8.2f} ms a forward pass (+{min(routed) - min(plain):.2f} ms)")
    print(f"  routed:  {calls} Python function calls a pass; {ran} calls in TileLang, {fell} in PyTorch")


if __name__ == "__main__":
    main()
