"""The device timer: both sides of a comparison in interleaved rounds, on the device.

In: callables (one per rotated input set) for a reference and a candidate (and, through
`time_sides`, any further side: torch.compile), a device and a `TimingPolicy`. Out: a
`Timing` per side and a `Ratio` (reference / candidate) with a 95% bootstrap interval
over the rounds; with several sides, any two sides' ratio from the same rounds.

On CUDA a side is a CUDA graph of many back-to-back calls, replayed and timed with
events; per call = replay / calls. Per-call events around a 5 µs kernel read ~50 µs of
launch; a replay does not. Where a callable cannot be captured it is timed back-to-back
between two events and the result says so. On a CPU (a shared, noisy machine) each side
is timed on the host in the same interleaved rounds, and rounds disturbed by outside load
(either side over twice its own median) are dropped and counted. `kernel_time_ms` is the
profiler's (CUPTI) kernel time, the cross-check; `graph_kernel_events` the kernels one
captured replay runs, which need not be the eager call's (see there).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

import torch
from torch.overrides import TorchFunctionMode

from ..device.hardware import CPU_THREADS
from ..results import Ratio, Timing

T = TypeVar("T")


@dataclass(frozen=True)
class TimingPolicy:
    warmup: int = 3
    reps: int = 20  # interleaved rounds per comparison (samples per side)
    max_seconds: float = 2.0  # per side; fewer rounds if it is slow
    flush_l2: bool = True  # rotate inputs through buffers larger than L2 (CUDA)
    max_cv_cpu: float = 0.15  # a wider spread (`spread`) is re-measured once, then flagged unstable
    max_cv_cuda: float = 0.05
    graph_ms: float = 2.0  # device time one CUDA-graph replay aims at
    sample_ms_cpu: float = 1.0  # wall time one CPU sample aims at (several calls if fast)
    # torch.compile as a third side (bench.py): "max-autotune", "default" or "none". The
    # timer's own default is "none": a library caller times what it asks for, and compiling
    # costs seconds per shape. The command line's default depends on the device
    # (config.device_defaults). Not part of `describe`: it adds a side to the rounds and
    # leaves the other two timed as before (its spread never re-measures or flags them),
    # so baselines with and without it stay comparable.
    compile_mode: str = "none"

    def describe(self, device: str) -> dict:
        return {
            "timer": "cuda_graph" if device == "cuda" else "perf_counter_interleaved",
            # both sides on the same threads: a CPU's are pinned (hardware.pin_threads)
            **({"threads": CPU_THREADS} if device == "cpu" else {}),
            "warmup": self.warmup,
            "reps": self.reps,
            "max_seconds": self.max_seconds,
            "rotate_inputs": self.flush_l2 and device == "cuda",
            "max_cv": self.max_cv_cuda if device == "cuda" else self.max_cv_cpu,
        }


def summarize(samples_ms: list[float], timer: str, dropped: int = 0) -> Timing:
    xs = sorted(samples_ms)
    n = len(xs)

    def q(p: float) -> float:
        return xs[min(n - 1, max(0, int(round(p * (n - 1)))))]

    mean = statistics.fmean(xs)
    sd = statistics.pstdev(xs) if n > 1 else 0.0
    return Timing(
        median_ms=statistics.median(xs),
        p10_ms=q(0.1),
        p90_ms=q(0.9),
        mean_ms=mean,
        cv=(sd / mean if mean > 0 else 0.0),
        reps=n,
        timer=timer,
        dropped=dropped,
    )


def spread(t: Timing) -> float:
    """The rounds' spread as a fraction of the median, from the 10th and 90th percentiles
    (scaled so a normal spread reads as its coefficient of variation). What flags a number
    unstable: a CV moves with a single disturbed round, which the median does not (bert-base
    on the H200: layernorm_residual's rounds lay within 3.25-3.33 us, one round at about
    5 us made its CV 11%, and the flag turned a 2.3x kernel into a failed blocker)."""
    return (t.p90_ms - t.p10_ms) / (2.5631 * t.median_ms) if t.median_ms > 0 else 0.0


def bootstrap_ratio(
    ref_ms: Sequence[float], cand_ms: Sequence[float], *, seed: int = 0, resamples: int = 2000
) -> Ratio:
    """Median of the paired per-round ratios ref/cand with a 95% bootstrap interval."""
    ratios = [r / c for r, c in zip(ref_ms, cand_ms) if c > 0 and r > 0]
    if not ratios:
        return Ratio(math.nan, math.nan, math.nan, 0)
    rng = random.Random(seed)
    n = len(ratios)
    meds = sorted(statistics.median(rng.choices(ratios, k=n)) for _ in range(resamples))
    return Ratio(statistics.median(ratios), meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1], n)


# ---------------------------------------------------------------- samplers: one sample of one side


class _ScalarsOnDevice(TorchFunctionMode):
    """While the timer captures: `torch.tensor(0.0, device="cuda")` (a Python number made
    on the host and copied over) as `torch.full((), 0.0, device="cuda")`, the same value
    filled on the device. A capture cannot hold a copy from pageable host memory, and
    transformers' eager attention mask makes one every forward pass (masking_utils'
    `eager_mask`): GPT-J, which has only eager attention in transformers 5.17, failed to
    capture on the H100 and was timed with its launch gaps. Anything else runs as called.
    Only where a capture failed without it (`captured`'s last try): an active function mode
    turns PyTorch's fused fast paths off (nn.MultiheadAttention's), which must not change
    what a reference that captures anyway runs."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (
            func is torch.tensor
            and len(args) == 1
            and isinstance(args[0], (bool, int, float))
            and kwargs.get("device") is not None
            and set(kwargs) <= {"device", "dtype"}
            and torch.device(kwargs["device"]).type != "cpu"
        ):
            return torch.full((), args[0], dtype=kwargs.get("dtype"), device=kwargs["device"])
        return func(*args, **kwargs)


@contextlib.contextmanager
def unobserved_capture():
    """While the timer captures, the model's Python cannot see it: torch.cuda's
    is_current_stream_capturing answers False. transformers counts a capturing stream as
    tracing and then takes its traced path; on the H200 (benchmarks/capture_path.py,
    reports/examples/benchmarks/h200-2026-12-02/capture_path_hf-bert.json) BertModel's
    12 SDPA calls went from cuDNN attention with no mask to an expanded bool mask
    [8, 1, 128, 128] on the MATH backend (24 fp32 GEMMs), 1771 µs of kernels a replay
    against 810 eagerly, so graph replay timed a program the model never runs. PyTorch's
    own capture checks are in C++ and are unaffected. A model whose eager path
    synchronises (a data-dependent branch) then fails to capture, and the sampler retries
    with the capture visible (`_sampler`); inside `scalars_filled_on_device` a Python
    number the model makes into a device tensor is filled on the device."""
    with _ScalarsOnDevice() if _fill_scalars else contextlib.nullcontext():
        if not _hide_capture:
            yield
            return
        saved = torch.cuda.is_current_stream_capturing
        torch.cuda.is_current_stream_capturing = lambda: False
        try:
            yield
        finally:
            torch.cuda.is_current_stream_capturing = saved


# Switched off only inside `model_sees_capture` (the sampler's retry).
_hide_capture = True


# Switched on only inside `scalars_filled_on_device` (`captured`'s last try).
_fill_scalars = False


@contextlib.contextmanager
def scalars_filled_on_device():
    """Captures inside make Python numbers into device tensors on the device (`_ScalarsOnDevice`)."""
    global _fill_scalars
    saved, _fill_scalars = _fill_scalars, True
    try:
        yield
    finally:
        _fill_scalars = saved


@contextlib.contextmanager
def model_sees_capture():
    """Captures inside see the capture (the model's own capture path)."""
    global _hide_capture
    saved, _hide_capture = _hide_capture, False
    try:
        yield
    finally:
        _hide_capture = saved


class GraphSampler:
    """`calls` back-to-back calls of the rotated callables captured in one CUDA graph;
    a sample is one replay timed with events, divided by the calls."""

    def __init__(self, fns: Sequence[Callable[[], object]], policy: TimingPolicy):
        self.fns = list(fns)
        for f in self.fns:  # warm-up outside capture: lazy init, autotuners, allocator
            f()
        torch.cuda.synchronize()
        self.calls = max(len(self.fns), 8)
        self.graph = self._capture(self.calls)
        per_call = self._replay_ms() / self.calls
        want = int(policy.graph_ms / max(per_call, 1e-4))
        want = max(len(self.fns), min(2000, want))
        if want > self.calls * 1.5:
            self.calls = want
            self.graph = self._capture(want)

    def _capture(self, calls: int) -> "torch.cuda.CUDAGraph":
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # capture needs a side stream warmed up first
            for f in self.fns:
                f()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), unobserved_capture():
            for i in range(calls):
                self.fns[i % len(self.fns)]()
        torch.cuda.synchronize()
        return g

    def _replay_ms(self) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        self.graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def sample(self) -> float:
        return self._replay_ms() / self.calls


class _EagerCudaSampler:
    """Back-to-back calls between two events, used only when graph capture fails: the
    launch path is then partly in the number, and the result says so."""

    def __init__(self, fns: Sequence[Callable[[], object]], policy: TimingPolicy):
        self.fns = list(fns)
        for f in self.fns:
            f()
        torch.cuda.synchronize()
        self.calls = max(len(self.fns), 8)

    def sample(self) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(self.calls):
            self.fns[i % len(self.fns)]()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / self.calls


class _HostSampler:
    """Wall time per call on the host: CPU kernels, or the eager path on CUDA (each call
    synchronised, so the launch cost is in the number, as a user running eager pays it)."""

    def __init__(self, fns: Sequence[Callable[[], object]], policy: TimingPolicy, device: str):
        self.fns = list(fns)
        self.device = device
        t0 = time.perf_counter()
        for f in self.fns:
            f()
        self._sync()
        per_call = (time.perf_counter() - t0) * 1e3 / len(self.fns)
        target = policy.sample_ms_cpu if device == "cpu" else 0.0
        self.calls = max(1, min(1000, int(target / max(per_call, 1e-4)))) if target else 1

    def _sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def sample(self) -> float:
        self._sync()
        t0 = time.perf_counter()
        for i in range(self.calls):
            self.fns[i % len(self.fns)]()
        self._sync()
        return (time.perf_counter() - t0) * 1e3 / self.calls


def captured(make: Callable[[], T]) -> tuple[T, BaseException | None, str]:
    """`make()` (something that captures the model in a CUDA graph) with the capture hidden
    from the model (`unobserved_capture`); where that fails, again with the model seeing it,
    its own capture path; where that fails too, hidden again with the Python numbers the
    model makes into device tensors filled on the device (`scalars_filled_on_device`).
    Returns the result, the first failure (None where the hidden capture worked) and the
    way that worked ("hidden", "own path", "scalars filled"); raises the last failure. The
    timer and the soak both capture this way."""
    try:
        return make(), None, "hidden"
    except Exception as exc:
        first = exc
    with contextlib.suppress(Exception):
        torch.cuda.synchronize()
    try:
        with model_sees_capture():
            return make(), first, "own path"
    except Exception:
        with contextlib.suppress(Exception):
            torch.cuda.synchronize()
    try:
        with scalars_filled_on_device():
            return make(), first, "scalars filled"
    except Exception:
        with contextlib.suppress(Exception):
            torch.cuda.synchronize()
        raise


def _sampler(fns: Sequence[Callable[[], object]], device: str, policy: TimingPolicy, *, eager: bool = False):
    """The device sampler (graph replay on CUDA), or why it could not be made. The capture
    is hidden from the model first; where its eager path cannot be captured, the model's
    own capture path is, and the note says so (`captured`)."""
    if device != "cuda" or eager:
        return _HostSampler(fns, policy, device), "perf_counter" if device != "cuda" else "eager", ""
    try:
        sampler, first, how = captured(lambda: GraphSampler(fns, policy))
    except Exception as exc:  # not capturable: timed back-to-back instead, and said so
        note = f"graph capture failed ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})"
        return _EagerCudaSampler(fns, policy), "cuda_event", note
    if first is None:
        return sampler, "cuda_graph", ""
    if how == "scalars filled":
        note = (
            f"graph captured with the numbers the model copies to the device each call filled "
            f"there instead, the same values (its eager path did not capture: {type(first).__name__})"
        )
    else:
        note = (
            f"graph captured on the model's own capture path (its eager path did not "
            f"capture: {type(first).__name__}): the device number is of the program the "
            f"model runs while captured, the eager view's of the one it runs eagerly"
        )
    return sampler, "cuda_graph", note


def interleaved(samplers: Sequence[Any], policy: TimingPolicy, device: str) -> tuple[list[list[float]], int]:
    """Samples of every sampler in rounds (one each per round, order alternating), and
    how many rounds were dropped as disturbed. A round is disturbed when any side took
    over twice its own median: on a shared CPU that is another job, not the kernel."""
    rounds: list[list[float]] = []
    end = time.perf_counter() + policy.max_seconds * max(1, len(samplers))
    for r in range(max(policy.reps, 3)):
        order = list(range(len(samplers)))
        if r % 2:
            order.reverse()
        row = [0.0] * len(samplers)
        for i in order:
            row[i] = samplers[i].sample()
        rounds.append(row)
        if time.perf_counter() > end and len(rounds) >= 5:
            break
    if device == "cuda":
        kept = rounds
    else:
        meds = [statistics.median(r[i] for r in rounds) for i in range(len(samplers))]
        kept = [r for r in rounds if all(r[i] <= 2.0 * meds[i] for i in range(len(samplers)))]
        if len(kept) < 3:
            kept = rounds
    return [[r[i] for r in kept] for i in range(len(samplers))], len(rounds) - len(kept)


@dataclass(frozen=True)
class Sides:
    """Several sides timed in the same interleaved rounds: a Timing per side and the
    samples behind them (kept rounds only), so any two sides' ratio is paired per round."""

    timings: tuple[Timing, ...]
    samples: tuple[tuple[float, ...], ...]
    notes: tuple[str, ...]  # per side: why the graph timer could not be used, or ""

    def ratio(self, ref: int, cand: int) -> Ratio:
        """Side `ref`'s time / side `cand`'s time, median of the per-round ratios with its interval."""
        return bootstrap_ratio(self.samples[ref], self.samples[cand])


def make_sampler(
    fns: Sequence[Callable[[], object]], device: str, policy: TimingPolicy, *, eager: bool = False
) -> tuple[Any, str, str]:
    """One side's sampler, its timer's name and a note (empty unless graph capture failed);
    made apart from the timing so a caller can leave out a side whose sampler cannot be made."""
    return _sampler(fns, device, policy, eager=eager)


def time_sides(
    made: Sequence[tuple[Any, str, str]],
    device: str,
    policy: TimingPolicy = TimingPolicy(),
    *,
    judged: int | None = None,
) -> Sides:
    """Samplers (from `make_sampler`) timed in interleaved rounds; a spread over the policy's
    limit on any of the first `judged` sides (all by default) is measured once more and the
    calmer run kept. A side past `judged` (torch.compile's) is timed in the same rounds but
    its spread never decides which run the others keep."""
    sams = [m[0] for m in made]
    limit = policy.max_cv_cuda if device == "cuda" else policy.max_cv_cpu
    judged = len(made) if judged is None else judged

    def measure() -> tuple[list[list[float]], list[Timing]]:
        xs, dropped = interleaved(sams, policy, device)
        return xs, [summarize(x, m[1], dropped) for x, m in zip(xs, made)]

    xs, ts = measure()
    if max(spread(t) for t in ts[:judged]) > limit:  # measured once more; the calmer run is kept
        xs2, ts2 = measure()
        if max(spread(t) for t in ts2[:judged]) < max(spread(t) for t in ts[:judged]):
            xs, ts = xs2, ts2
    ts = [dataclasses.replace(t, unstable=spread(t) > limit) for t in ts]
    return Sides(tuple(ts), tuple(tuple(x) for x in xs), tuple(m[2] for m in made))


def time_pair(
    ref: Sequence[Callable[[], object]],
    cand: Sequence[Callable[[], object]],
    device: str,
    policy: TimingPolicy = TimingPolicy(),
    *,
    eager: bool = False,
) -> tuple[Timing, Timing, Ratio, str]:
    """Reference and candidate (each a list of callables over rotated inputs) timed in
    interleaved rounds: their Timings, the ratio ref/cand with its interval, and a note
    (empty unless the graph timer could not be used)."""
    made = [_sampler(ref, device, policy, eager=eager), _sampler(cand, device, policy, eager=eager)]
    sides = time_sides(made, device, policy)
    return (*sides.timings, sides.ratio(0, 1), "; ".join(n for n in sides.notes if n))


def time_callable(fn: Callable[[], object], device: str, policy: TimingPolicy = TimingPolicy()) -> Timing:
    """Median and spread of one callable (the tuner's timer): graph replay on CUDA."""
    s, timer, _ = _sampler([fn], device, policy)
    (xs,), dropped = interleaved([s], policy, device)
    t = summarize(xs, timer, dropped)
    limit = policy.max_cv_cuda if device == "cuda" else policy.max_cv_cpu
    return dataclasses.replace(t, unstable=spread(t) > limit)


def kernel_time_ms(fn: Callable[[], object], calls: int = 10) -> float | None:
    """Device kernel time per call from torch.profiler (CUPTI): the cross-check of the
    graph timer. None where no device activity was recorded."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total_us = sum(getattr(e, "self_device_time_total", 0.0) for e in prof.key_averages())
    return total_us / 1e3 / calls if total_us > 0 else None


def graph_kernel_events(fn: Callable[[], object], replays: int) -> list[list[dict]]:
    """Kernel events (name, ts, dur in µs) of each replay of `fn` captured as one CUDA
    graph, the capture hidden from the model as the timer hides it (`unobserved_capture`).
    Inside `model_sees_capture` the model sees it, and a captured call need not run the
    kernels the eager call runs: transformers counts a capturing stream as tracing
    (utils.import_utils.is_tracing) and takes its traced paths then; its BertModel replayed
    1773 µs of kernels where eagerly it ran 810, with 24 fp32 GEMMs and no cuDNN attention
    kernel among them (H200,
    reports/examples/benchmarks/h200-2026-12-02/graph_gaps_hf-bert-base.log)."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), unobserved_capture():
        fn()
    for _ in range(5):
        graph.replay()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
            torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    evs = sorted(
        (e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"), key=lambda e: e["ts"]
    )
    # Each replay is one whole forward: split by count (host synchronisation between
    # replays may leave only microseconds between them).
    n = len(evs) // replays if replays else 0
    if not n or n * replays != len(evs):
        raise RuntimeError(f"{len(evs)} kernel events over {replays} replays: not whole forwards")
    return [
        [{"name": e["name"], "ts": e["ts"], "dur": e["dur"]} for e in evs[i * n : (i + 1) * n]] for i in range(replays)
    ]


def graph_kernel_ms(fn: Callable[[], object], replays: int = 5) -> tuple[float, int]:
    """(kernel ms, kernels) of one captured replay of `fn`, the median over `replays`."""
    per = [(sum(e["dur"] for e in r) / 1e3, len(r)) for r in graph_kernel_events(fn, replays)]
    return statistics.median(p[0] for p in per), per[0][1]
