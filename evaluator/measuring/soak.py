"""The soak: a model (or any callable) run continuously for a while, to see whether its
latency holds.

In: the callable (one forward pass of the model with TileLang swapped in), the device,
the seconds and the number of windows. Out: `Soak`: latency per window, drift, spread,
memory growth, and on NVIDIA the SM clock per window and any throttling nvidia-smi
reports, with notes naming what went wrong. On CUDA each iteration is one CUDA-graph
replay timed on the device (the same sampler as `timing.py`), so drift is the device's.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from ..results import Soak
from .timing import TimingPolicy, GraphSampler, captured


def _gpu_clock() -> tuple[float | None, str]:
    """SM clock (MHz) and active throttle reasons, from nvidia-smi (present wherever the driver is)."""
    import subprocess

    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=clocks.sm,clocks_throttle_reasons.active",
                "--format=csv,noheader,nounits",
                "-i",
                str(torch.cuda.current_device()),
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
        sm, reasons = [x.strip() for x in out.stdout.strip().splitlines()[0].split(",")[:2]]
        return float(sm), reasons
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None, ""


# Bits of nvidia-smi's clocks_throttle_reasons.active that mean the clock was held down
# for a reason other than idling (idle 0x1 and application-clock setting 0x2 are ignored).
THROTTLE_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}


def _graph_step(fn: Callable[[], object]) -> tuple[Callable[[], float] | None, str]:
    """One replay of a one-call CUDA graph of `fn` as the soak's step, and a note when it
    took the model's own capture path: as the timer does (`timing._sampler`), the capture is
    hidden from the model first, and seen by it where its eager path cannot be captured
    (transformers' GPT-2 on the H200, 2026-12-02, whose soak otherwise ran eagerly and read
    host jitter as a 10.6% spread), then with the numbers it copies to the device filled
    there (`timing.captured`). (None, "") where no way captures."""

    def one_call_graph() -> GraphSampler:
        sampler = GraphSampler([fn], TimingPolicy(graph_ms=0.0))
        sampler.calls = 1
        sampler.graph = sampler._capture(1)
        return sampler

    try:
        sampler, first, how = captured(one_call_graph)
    except Exception:  # no way: eager, and the result says so
        return None, ""
    if first is None:
        return sampler._replay_ms, ""
    why = f"(its eager path did not capture: {type(first).__name__})"
    if how == "own path":
        return sampler._replay_ms, f"soaked on the model's own capture path {why}"
    filled = "soaked with the numbers the model copies to the device each call filled there instead"
    return sampler._replay_ms, f"{filled} {why}"


def soak(fn: Callable[[], object], device: str, seconds: float, windows: int = 10) -> Soak:
    """Run `fn` continuously for `seconds`; latency per window, drift, spread, memory growth,
    and on NVIDIA the SM clock per window and any throttling seen.

    On CUDA each iteration is one replay of a CUDA graph of `fn`, timed with events:
    the windows then show the device's drift, and the host's wall time per iteration
    is kept apart as `host_cv` (launch jitter). Where `fn` cannot be captured, each
    iteration is an eager call and the result says so (`timer`)."""
    import resource

    timer, own_path = "perf_counter", ""
    step: Callable[[], float] | None = None
    if device == "cuda":
        step, own_path = _graph_step(fn)
        timer = "cuda_graph" if step is not None else timer
    if step is None:

        def eager_step() -> float:
            t0 = time.perf_counter()
            fn()
            if device == "cuda":
                torch.cuda.synchronize()
            return (time.perf_counter() - t0) * 1e3

        step = eager_step

    def mem_mb() -> float:
        if device == "cuda":
            return torch.cuda.memory_allocated() / 2**20
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def reserved_mb() -> float | None:
        return torch.cuda.memory_reserved() / 2**20 if device == "cuda" else None

    # Warm up before the first window: on the H200 the first seconds ran 40% slower
    # (clocks ramping, allocator growing), which read as a large "drift" that was not one.
    warm_end = time.perf_counter() + min(2.0, 0.1 * seconds)
    step()
    while time.perf_counter() < warm_end:
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    mem0, res0 = mem_mb(), reserved_mb()
    window_s = seconds / windows
    medians, all_ms, iters, host = [], [], 0, []
    clocks: list[float] = []
    throttles: set[str] = set()
    for _ in range(windows):
        if device == "cuda":
            clock, reasons = _gpu_clock()
            if clock is not None:
                clocks.append(clock)
            try:
                bits = int(reasons, 16)
                throttles |= {name for bit, name in THROTTLE_BITS.items() if bits & bit}
            except ValueError:
                pass
        end = time.perf_counter() + window_s
        xs = []
        while time.perf_counter() < end or not xs:
            t0 = time.perf_counter()
            xs.append(step())
            host.append((time.perf_counter() - t0) * 1e3)
        medians.append(statistics.median(xs))
        all_ms += xs
        iters += len(xs)
    growth = mem_mb() - mem0
    res_growth = (reserved_mb() - res0) if res0 is not None else None
    drift = (medians[-1] - medians[0]) / medians[0] if medians[0] > 0 else 0.0
    mean = statistics.fmean(medians)
    cv = statistics.pstdev(medians) / mean if mean > 0 else 0.0
    notes = []
    if abs(drift) > 0.05:
        notes.append(f"latency drifted {100 * drift:+.1f}% from the first to the last window")
    if growth > 50:
        notes.append(f"memory grew by {growth:.0f} MB")
    if res_growth is not None and res_growth > 50:
        notes.append(f"reserved CUDA memory grew by {res_growth:.0f} MB")
    if throttles:
        notes.append("clock throttled: " + ", ".join(sorted(throttles)))
    if device == "cuda" and timer != "cuda_graph":
        notes.append("the model could not be captured in a CUDA graph: soaked eagerly, so host jitter is included")
    if own_path:
        notes.append(own_path)
    if len(clocks) >= 2 and clocks[-1] < 0.9 * clocks[0]:
        notes.append(f"SM clock fell from {clocks[0]:.0f} to {clocks[-1]:.0f} MHz")
    return Soak(
        seconds=seconds,
        window_ms=tuple(medians),
        drift=drift,
        cv=cv,
        memory_growth_mb=growth,
        iterations=iters,
        notes=tuple(notes),
        reserved_growth_mb=res_growth,
        clocks_mhz=tuple(clocks),
        throttle_reasons=tuple(sorted(throttles)),
        timer=timer,
        host_cv=(statistics.pstdev(host) / statistics.fmean(host)) if len(host) > 1 else None,
    )
