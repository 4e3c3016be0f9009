"""Timing, the single-operator benchmark, the end-to-end swap-in and the soak.

In: callables (a compiled TileLang kernel and PyTorch's reference), a model with the
chosen families' kernels, a timing policy. Out: `Timing`, `OpBench`, `E2EBench`, `Soak`.

Timing policy: warm-up calls, then `reps` timed calls. On CUDA each call is bracketed by
CUDA events and the L2 cache is flushed between calls (so a small shape is not timed
from a warm cache); on CPU `perf_counter`. The policy is recorded with every result so
two baselines are only compared when measured alike.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from .kernels.base import KernelFamily
from .results import E2EBench, LaunchOverhead, OpBench, Shape, Soak, Timing


@dataclass(frozen=True)
class TimingPolicy:
    warmup: int = 3
    reps: int = 20
    max_seconds: float = 2.0  # per measured callable; fewer reps if it is slow
    flush_l2: bool = True
    max_cv_cpu: float = 0.15  # a wider spread is re-measured once, then flagged unstable
    max_cv_cuda: float = 0.05

    def describe(self, device: str) -> dict:
        return {"timer": "cuda_event" if device == "cuda" else "perf_counter", "warmup": self.warmup,
                "reps": self.reps, "max_seconds": self.max_seconds,
                "flush_l2": self.flush_l2 and device == "cuda",
                "max_cv": self.max_cv_cuda if device == "cuda" else self.max_cv_cpu}


def summarize(samples_ms: list[float], timer: str) -> Timing:
    xs = sorted(samples_ms)
    n = len(xs)

    def q(p: float) -> float:
        return xs[min(n - 1, max(0, int(round(p * (n - 1)))))]

    mean = statistics.fmean(xs)
    sd = statistics.pstdev(xs) if n > 1 else 0.0
    return Timing(median_ms=statistics.median(xs), p10_ms=q(0.1), p90_ms=q(0.9), mean_ms=mean,
                  cv=(sd / mean if mean > 0 else 0.0), reps=n, timer=timer)


_L2_FLUSH: dict[int, torch.Tensor] = {}


def _flush_l2() -> None:
    dev = torch.cuda.current_device()
    buf = _L2_FLUSH.get(dev)
    if buf is None:
        # 256 MiB is larger than any current GPU's L2 (H200: 60 MiB)
        buf = _L2_FLUSH[dev] = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    buf.zero_()


def time_callable(fn: Callable[[], object], device: str, policy: TimingPolicy = TimingPolicy()) -> Timing:
    """Median and spread of repeated calls of `fn` (which takes no arguments).

    A spread above the policy's CV limit is measured once more (a neighbour's burst on a
    shared machine is usually over by then); if it is still too wide the result says so.
    """
    t = _time_once(fn, device, policy)
    limit = policy.max_cv_cuda if device == "cuda" else policy.max_cv_cpu
    if t.cv <= limit:
        return t
    again = _time_once(fn, device, policy)
    best = again if again.cv < t.cv else t
    return dataclasses.replace(best, unstable=best.cv > limit)


def _time_once(fn: Callable[[], object], device: str, policy: TimingPolicy) -> Timing:
    for _ in range(policy.warmup):
        fn()
    samples: list[float] = []
    if device == "cuda":
        torch.cuda.synchronize()
        budget_end = time.perf_counter() + policy.max_seconds
        for _ in range(policy.reps):
            if policy.flush_l2:
                _flush_l2()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
            if time.perf_counter() > budget_end and len(samples) >= 5:
                break
        return summarize(samples, "cuda_event")
    budget_end = time.perf_counter() + policy.max_seconds
    for _ in range(policy.reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
        if time.perf_counter() > budget_end and len(samples) >= 5:
            break
    return summarize(samples, "perf_counter")


def _rate(amount: float, t: Timing | None, scale: float) -> float | None:
    if t is None or t.median_ms <= 0:
        return None
    return amount / (t.median_ms * 1e-3) / scale


def bench_op(family: KernelFamily, shape: Shape, dtype: str, kernel: Callable | None, device: str,
             *, source: str, config: dict | None, policy: TimingPolicy = TimingPolicy(), seed: int = 0,
             error: str = "", roof: tuple[float | None, float | None] = (None, None)) -> OpBench:
    """TileLang against PyTorch on one shape, same inputs, same timer.

    `roof` is (TFLOP/s, GB/s) of the device; with it each side gets its share of the
    roofline's attainable rate at this shape's arithmetic intensity.
    """
    inputs = family.make_inputs(shape, dtype, device, seed)
    t_torch = time_callable(lambda: family.reference(*inputs), device, policy)
    t_tl = None
    if kernel is not None:
        try:
            t_tl = time_callable(lambda: kernel(*inputs), device, policy)
        except Exception as exc:  # a kernel that fails at run time is a result, not a crash
            error = f"{type(exc).__name__}: {exc}"
    flops, nbytes = float(family.flops(shape)), float(family.bytes(shape, dtype))
    attainable = roofline_attainable(flops, nbytes, *roof)
    return OpBench(
        family=family.name, shape=tuple(shape), dtype=dtype, source=source, tilelang=t_tl, torch=t_torch,
        speedup=(t_torch.median_ms / t_tl.median_ms) if t_tl and t_tl.median_ms > 0 else None,
        flops=flops, bytes=nbytes,
        tilelang_tflops=_rate(flops, t_tl, 1e12), tilelang_gbps=_rate(nbytes, t_tl, 1e9),
        torch_tflops=_rate(flops, t_torch, 1e12), torch_gbps=_rate(nbytes, t_torch, 1e9),
        config=config, error=error[:500],
        tilelang_roof_pct=_pct(flops, t_tl, attainable), torch_roof_pct=_pct(flops, t_torch, attainable),
    )


def roofline_attainable(flops: float, nbytes: float, tflops: float | None, gbps: float | None) -> float | None:
    """Attainable FLOP/s at this arithmetic intensity: min(compute roof, intensity x bandwidth)."""
    if not tflops or not gbps or nbytes <= 0:
        return None
    return min(tflops * 1e12, flops / nbytes * gbps * 1e9)


def _pct(flops: float, t: Timing | None, attainable: float | None) -> float | None:
    if t is None or attainable is None or t.median_ms <= 0:
        return None
    return 100.0 * flops / (t.median_ms * 1e-3) / attainable


def _max_abs(a: object, b: object) -> float:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return max((_max_abs(x, y) for x, y in zip(a, b)), default=0.0)
    return 0.0 if a == b else math.inf


def end_to_end(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], device: str, batch_size: int,
               swaps: list[tuple[KernelFamily, Callable]], *, coverage: float, op_speedups: dict[str, float],
               shares: dict[str, float], atol: float, policy: TimingPolicy = TimingPolicy()) -> E2EBench:
    """The model as is, then with the families' modules swapped for TileLang ones, same inputs.

    `swaps` pairs each family with its `kernel_for(shape)` lookup. The Amdahl estimate
    uses the op speedups and each family's share of the profiled time.
    """
    families = tuple(f.name for f, _ in swaps)
    with torch.inference_mode():
        ref_out = module(*inputs)
        t_ref = time_callable(lambda: module(*inputs), device, policy)
        swapped = copy.deepcopy(module)
        replaced = sum(fam.swap_in(swapped, kernel_for) for fam, kernel_for in swaps)
        try:
            out = swapped(*inputs)
            err = _max_abs(out, ref_out)
            t_sw = time_callable(lambda: swapped(*inputs), device, policy)
            error = ""
        except Exception as exc:
            err, t_sw, error = None, None, f"{type(exc).__name__}: {exc}"[:500]
    amdahl = None
    if op_speedups:
        remaining = 1.0 - sum(shares.get(f, 0.0) for f in op_speedups)
        accelerated = sum(shares.get(f, 0.0) / s for f, s in op_speedups.items() if s and s > 0)
        amdahl = 1.0 / (remaining + accelerated) if remaining + accelerated > 0 else None
    return E2EBench(
        families=families, reference=t_ref, swapped=t_sw,
        speedup=(t_ref.median_ms / t_sw.median_ms) if t_sw else None,
        samples_per_s_reference=batch_size / (t_ref.median_ms * 1e-3),
        samples_per_s_swapped=(batch_size / (t_sw.median_ms * 1e-3)) if t_sw else None,
        max_abs_err=err, outputs_match=err is not None and err <= atol, replaced_modules=replaced,
        coverage=coverage, amdahl_speedup=amdahl, error=error,
    )


def launch_overhead(family: KernelFamily, shape: Shape, dtype: str, kernel: Callable, device: str,
                    calls: int = 200) -> LaunchOverhead:
    """Per-call host time of back-to-back calls at a tiny shape (device work ~0), in µs.

    Timed as wall time over `calls` calls with one synchronisation at the end, which is
    what a model pays per swapped module when the device is not the bottleneck.
    """
    inputs = family.make_inputs(shape, dtype, device, 0)

    def per_call(fn: Callable) -> float:
        best = math.inf
        for _ in range(3):
            fn()
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            if device == "cuda":
                torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        return best

    return LaunchOverhead(family.name, tuple(shape), per_call(lambda: kernel(*inputs)),
                          per_call(lambda: family.reference(*inputs)))


def _gpu_clock() -> tuple[float | None, str]:
    """SM clock (MHz) and active throttle reasons, from nvidia-smi (present wherever the driver is)."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks_throttle_reasons.active",
                              "--format=csv,noheader,nounits", "-i", str(torch.cuda.current_device())],
                             capture_output=True, text=True, timeout=10)
        sm, reasons = [x.strip() for x in out.stdout.strip().splitlines()[0].split(",")[:2]]
        return float(sm), reasons
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None, ""


# Bits of nvidia-smi's clocks_throttle_reasons.active that mean the clock was held down
# for a reason other than idling (idle 0x1 and application-clock setting 0x2 are ignored).
THROTTLE_BITS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
                 0x80: "hw_power_brake"}


def soak(fn: Callable[[], object], device: str, seconds: float, windows: int = 10) -> Soak:
    """Run `fn` continuously for `seconds`; latency per window, drift, spread, memory growth,
    and on NVIDIA the SM clock per window and any throttling seen."""
    import resource

    def mem_mb() -> float:
        if device == "cuda":
            return torch.cuda.memory_allocated() / 2**20
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def reserved_mb() -> float | None:
        return torch.cuda.memory_reserved() / 2**20 if device == "cuda" else None

    # Warm up before the first window: on the H200 the first seconds ran 40% slower
    # (clocks ramping, allocator growing), which read as a large "drift" that was not one.
    warm_end = time.perf_counter() + min(2.0, 0.1 * seconds)
    fn()
    while time.perf_counter() < warm_end:
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    mem0, res0 = mem_mb(), reserved_mb()
    window_s = seconds / windows
    medians, all_ms, iters = [], [], 0
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
            fn()
            if device == "cuda":
                torch.cuda.synchronize()
            xs.append((time.perf_counter() - t0) * 1e3)
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
    if len(clocks) >= 2 and clocks[-1] < 0.9 * clocks[0]:
        notes.append(f"SM clock fell from {clocks[0]:.0f} to {clocks[-1]:.0f} MHz")
    return Soak(seconds=seconds, window_ms=tuple(medians), drift=drift, cv=cv, memory_growth_mb=growth,
                iterations=iters, notes=tuple(notes), reserved_growth_mb=res_growth, clocks_mhz=tuple(clocks),
                throttle_reasons=tuple(sorted(throttles)))
