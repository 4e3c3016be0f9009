"""Why the test suite runs one torch thread per xdist worker: the profile's family
ranking of resnet-tiny beside busy processes, on one torch thread and on two.

    python3 benchmarks/profile_contention.py [--busy 2] [--runs 8] [--threads 1,2]

Starts `--busy` processes that multiply 512x512 matrices until it is done (a shared CI
host, or the other xdist worker), then per thread count profiles resnet-tiny `--runs`
times (three passes each, as the test does) and prints each run's conv2d time per pass,
the range, and how many runs ranked conv2d first.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time


def _busy(stop_at: float) -> None:
    import torch

    torch.set_num_threads(1)
    a = torch.randn(512, 512)
    while time.time() < stop_at:
        a @ a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", type=int, default=2)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    import torch

    from evaluator.profiling import profile as profiling
    from evaluator.models import load_model

    model = load_model("resnet-tiny")
    threads = [int(t) for t in args.threads.split(",")]
    stop_at = time.time() + 30 + 20 * args.runs * len(threads)
    procs = [mp.Process(target=_busy, args=(stop_at,), daemon=True) for _ in range(args.busy)]
    for p in procs:
        p.start()
    try:
        for n in threads:
            torch.set_num_threads(n)
            conv, first = [], 0
            for _ in range(args.runs):
                hot = profiling.hot_ops(model, iters=3)
                conv.append(next(o.time_ms for o in hot.ops if o.family == "conv2d"))
                first += hot.ops[0].family == "conv2d"
            print(
                f"{n} thread(s), {args.busy} busy: conv2d ms/pass {' '.join(f'{c:.3g}' for c in conv)}; "
                f"range {min(conv):.3g}-{max(conv):.3g}; conv2d ranked first in {first} of {args.runs}"
            )
    finally:
        for p in procs:
            p.terminate()


if __name__ == "__main__":
    main()
