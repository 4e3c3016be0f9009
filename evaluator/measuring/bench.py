"""The single-operator benchmark and the end-to-end measurement (the soak is soak.py).

In: a kernel family and its compiled TileLang kernel (or a model with a `swap.Router`
sending its calls to TileLang), a device and a timing policy. Out: `OpBench`, `E2EBench`,
`LaunchOverhead`, `Soak`. The timer itself is `timing.py` (CUDA-graph replay, both sides
interleaved, ratios with intervals) and the output comparison `outputs.py`; their names
are re-exported here for the stages and tests that reach them through `bench`.

The policy's `compile_mode` adds a third side: `torch.compile` of the same PyTorch code
(the family's reference, or the whole model), compiled by `compiled.py` and timed in the
same interleaved rounds. It is an optional comparison: its spread never re-measures or
flags the other two, and where it cannot run its `Compiled.error` says why while the
TileLang and PyTorch numbers, flags and verdict stand as without it.

Guards against numbers that cannot be true: an op faster than the measured roofline
allows is flagged; an end-to-end ratio the Amdahl estimate (from the operator times inside
the model where every routed family has them, else from the op ratios) cannot
explain is flagged; an unstable timing is flagged; flags reach the report and the
checklist, where a flagged number cannot pass an item.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from typing import Any, Callable, Sequence

import torch

from .. import kernels
from ..kernels import rope
from ..profiling.profile import family_times
from ..routing import router as swap, written
from . import compiled as compiled_mod
from . import compile_path as paths
from ..kernels.base import KernelFamily
from .outputs import OUTPUT_TOLERANCE, OutputCheck, compare_outputs, leaves, signal  # noqa: F401  (re-exported)
from ..results import (
    CallCount,
    Compiled,
    E2EBench,
    E2EView,
    FamilyTime,
    KeptFamilies,
    LaunchOverhead,
    OpBench,
    Ratio,
    Shape,
    Timing,
)
from .soak import THROTTLE_BITS, soak  # noqa: F401  (re-exported: the soak stage and tests reach it here)
from .timing import (  # noqa: F401  (re-exported: callers time through bench)
    Sides,
    TimingPolicy,
    bootstrap_ratio,
    graph_kernel_ms,
    interleaved,
    kernel_time_ms,
    make_sampler,
    spread,
    summarize,
    time_callable,
    time_pair,
    time_sides,
)

__all__ = [
    "bench_op",
    "end_to_end",
    "launch_overhead",
    "soak",
    "amdahl",
    "rotated_inputs",
    "roof_flags",
    "roofline_attainable",
    "ROTATE_BYTES",
    "THROTTLE_BITS",
    # re-exported from timing.py and outputs.py
    "TimingPolicy",
    "bootstrap_ratio",
    "interleaved",
    "kernel_time_ms",
    "summarize",
    "time_callable",
    "time_pair",
    "OUTPUT_TOLERANCE",
    "OutputCheck",
    "compare_outputs",
    "leaves",
]


def _rate(amount: float, t: Timing | None, scale: float) -> float | None:
    if t is None or t.median_ms <= 0:
        return None
    return amount / (t.median_ms * 1e-3) / scale


ROTATE_BYTES = 192 * 2**20  # more than any current GPU's L2 (H200: 60 MiB), so no call reads a warm cache


def rotated_inputs(
    family: KernelFamily, shape: Shape, dtype: str, device: str, seed: int, policy: TimingPolicy
) -> list[tuple[torch.Tensor, ...]]:
    """Enough input sets that cycling through them streams from memory, not L2."""
    first = family.make_inputs(shape, dtype, device, seed)
    if device != "cuda" or not policy.flush_l2:
        return [first]
    per_set = sum(t.numel() * t.element_size() for t in first)
    sets = max(1, min(64, math.ceil(ROTATE_BYTES / max(per_set, 1))))
    return [first] + [family.make_inputs(shape, dtype, device, seed + i) for i in range(1, sets)]


def roof_flags(
    flops: float,
    nbytes: float,
    t: Timing | None,
    roof: tuple[float | None, float | None],
    side: str,
    *,
    memory: bool = True,
) -> list[str]:
    """A time faster than the measured ceilings allow is a measurement error, not a win.
    `memory`: whether the memory roof binds (inputs streamed from memory, not cache)."""
    if t is None or t.median_ms <= 0:
        return []
    tflops, gbps = roof
    out = []
    if tflops and flops / (t.median_ms * 1e-3) > 1.25 * tflops * 1e12:
        out.append(f"{side} faster than the compute roof allows")
    if memory and gbps and nbytes / (t.median_ms * 1e-3) > 1.25 * gbps * 1e9:
        out.append(f"{side} faster than the memory roof allows")
    return out


# A side whose rounds took this many times its own other evidence (its profiled time in the
# model, the tuner's time, the same call timed again alone) was stalled by something else
# on the machine: a shared CPU's other jobs made PyTorch's side of a 0.03 ms op take 7.5 ms.
STALL_FACTOR = 3.0


def stalled_sides(
    timings: Sequence[Timing | None],
    fns: Sequence[Sequence[Callable]],
    names: Sequence[str],
    evidence: dict[str, tuple[float, str]],
    device: str,
    policy: TimingPolicy,
) -> list[str]:
    """One "stalled: ..." line per side whose median is over STALL_FACTOR x its own other
    evidence: the times in `evidence` (name -> (ms, where from)) and the same call timed
    again alone, right now, on the same rotated inputs (`fns`: each side's callables).
    [] where every side agrees with its evidence."""
    out = []
    quick = dataclasses.replace(policy, reps=5, max_seconds=0.5, compile_mode="none")
    for t, fn, name in zip(timings, fns, names):
        if t is None or t.median_ms <= 0:
            continue
        seen = [evidence[name]] if name in evidence and evidence[name][0] > 0 else []
        if not any(t.median_ms > STALL_FACTOR * ms for ms, _ in seen):
            try:
                alone = time_sides([make_sampler(fn, device, quick)], device, quick).timings[0].median_ms
            except Exception:  # the guard is evidence, not a gate on the measurement itself
                alone = 0.0
            if alone > 0:
                seen.append((alone, "when timed again alone"))
        worst = [(ms, where) for ms, where in seen if t.median_ms > STALL_FACTOR * ms]
        if worst:
            ms, where = min(worst)
            # no parentheses or commas: an op's flags are listed in parentheses, comma-separated
            out.append(f"stalled: {name} {_ms(t.median_ms)} in the rounds against {_ms(ms)} {where}")
    return out


def _ms(v: float) -> str:
    return f"{v * 1e3:.3g} us" if v < 0.1 else f"{v:.3g} ms"


def _not_graph_replay(made: tuple) -> bool:
    """A sampler (`make_sampler`'s triple) whose note says it fell back from graph replay.
    A graph on the model's own capture path carries a note too, but is graph replay still."""
    return bool(made[2]) and made[1] != "cuda_graph"


def _compiled_side(prep: compiled_mod.Prepared, device: str, policy: TimingPolicy) -> tuple[Any, str]:
    """The compiled side's sampler, or why it cannot be timed like the others. On CUDA a
    side that cannot be captured in a graph is left out rather than timed back-to-back:
    its number would include launch gaps the other two do not."""
    try:
        made = make_sampler(prep.fns, device, policy)
    except Exception as exc:
        return None, f"failed under the timer: {compiled_mod.one_line(exc)}"
    if _not_graph_replay(made):
        return None, f"not timed: the compiled code could not be captured in a CUDA graph ({made[2]})"
    return made, ""


def time_with_compiled(
    made: list, prep: compiled_mod.Prepared | None, device: str, policy: TimingPolicy
) -> tuple[Sides, int | None, str]:
    """The sides in `made` and, where it was compiled, torch.compile's as one more, all in
    the same interleaved rounds. Returns the sides, the compiled side's index (None when
    it was left out) and why it was left out. A failure while the three are timed is
    retried without the compiled side, so it can never cost the other two their numbers."""
    why = ""
    if prep is not None and prep.ok:
        side, why = _compiled_side(prep, device, policy)
        if side is not None:
            try:
                return time_sides([*made, side], device, policy, judged=len(made)), len(made), ""
            except Exception as exc:  # retried below without it; if that fails too, the caller's error
                why = f"failed under the timer: {compiled_mod.one_line(exc)}"
    return time_sides(made, device, policy), None, why


def compiled_result(
    prep: compiled_mod.Prepared | None,
    sides: Sides | None = None,
    index: int | None = None,
    versus: int | None = None,
    why: str = "",
    output_check: Any = None,
) -> Compiled | None:
    """The `Compiled` record of a third side: its timing and its ratio against side `versus`
    (TileLang), or the reason it has no number. None where nothing was compiled because
    the mode is none: the comparison was not asked for."""
    if prep is None:
        return None
    notes = list(prep.notes)
    if output_check is not None and not output_check.ok:
        notes.append(f"outputs differ from PyTorch eager: {output_check.reason}")
    timing = ratio = None
    if sides is not None and index is not None:
        timing = sides.timings[index]
        if timing.unstable:  # said here, never a flag: an optional side does not gate anything
            notes.append(f"unstable (spread {100 * spread(timing):.0f}%)")
        if versus is not None:
            ratio = sides.ratio(index, versus)
    error = prep.error or (why if timing is None else "")
    if not error and timing is None:
        error = why or "not timed"
    return Compiled(prep.mode, prep.inductor_mode, timing, ratio, prep.compile_s, error[:300], "; ".join(notes)[:500])


def bench_op(
    family: KernelFamily,
    shape: Shape,
    dtype: str,
    kernel: Callable | None,
    device: str,
    *,
    source: str,
    config: dict | None,
    policy: TimingPolicy = TimingPolicy(),
    seed: int = 0,
    error: str = "",
    roof: tuple[float | None, float | None] = (None, None),
    verified: bool = True,
    evidence: dict[str, tuple[float, str]] | None = None,
) -> OpBench:
    """TileLang against PyTorch on one shape, same inputs, same timer, interleaved.

    `roof` is (TFLOP/s, GB/s) of the device; with it each side gets its share of the
    roofline's attainable rate at this shape's arithmetic intensity. An unverified
    kernel is not timed: a fast wrong kernel has no speed worth reporting. `evidence`
    holds each side's time from elsewhere ("PyTorch": its profiled time inside the model,
    "TileLang": the tuner's), (ms, where from, as words after "against X ms"): a side far slower than its own other
    evidence is re-measured, and flagged "stalled" if it stays so (`stalled_sides`).
    """
    sets = rotated_inputs(family, shape, dtype, device, seed, policy)
    ref_fns = [(lambda ins=ins: family.reference(*ins)) for ins in sets]
    t_tl = ratio = None
    note, flags, k_tl, k_torch = "", [], None, None
    comp: Compiled | None = None
    if kernel is not None and not verified:
        error = error or "kernel failed verification; not timed"
        kernel = None
    mode = policy.compile_mode
    if kernel is None and mode != "none":
        comp = Compiled(
            mode,
            compiled_mod.INDUCTOR_MODES.get(mode, ""),
            error="not measured: no verified TileLang kernel to compare with",
        )
    if kernel is not None:
        tl_fns = [(lambda ins=ins: kernel(*ins)) for ins in sets]
        prep = check = None
        if mode != "none":
            prep = compiled_mod.prepare(family.reference, sets, device, mode, fullgraph=True)
            if prep.ok:
                check = compare_outputs(prep.first_output, family.reference(*sets[0]), dtype)
        try:
            made = [make_sampler(ref_fns, device, policy), make_sampler(tl_fns, device, policy)]
            sides, at, why = time_with_compiled(made, prep, device, policy)
            stalls = stalled_sides(
                sides.timings[:2], (ref_fns, tl_fns), ("PyTorch", "TileLang"), evidence or {}, device, policy
            )
            if stalls:  # measured once more; the run with fewer stalled sides is kept
                again = time_with_compiled(made, prep, device, policy)
                stalls_again = stalled_sides(
                    again[0].timings[:2], (ref_fns, tl_fns), ("PyTorch", "TileLang"), evidence or {}, device, policy
                )
                if len(stalls_again) <= len(stalls):
                    (sides, at, why), stalls = again, stalls_again
                flags += stalls
            t_torch, t_tl = sides.timings[:2]
            ratio, note = sides.ratio(0, 1), "; ".join(n for n in sides.notes[:2] if n)
            comp = compiled_result(prep, sides, at, 1, why, check)
        except Exception as exc:  # a kernel that fails at run time is a result, not a crash
            error = f"{type(exc).__name__}: {exc}"
            t_torch = time_callable(ref_fns[0], device, policy)
            t_tl = None
            comp = compiled_result(prep, why="not timed: the TileLang kernel failed at run time")
        if prep is not None:
            compiled_mod.release()
        if t_tl is not None and device == "cuda":
            try:
                k_torch, k_tl = kernel_time_ms(ref_fns[0]), kernel_time_ms(tl_fns[0])
            except Exception as exc:  # the cross-check is evidence, not a gate
                note = "; ".join(x for x in (note, f"profiler cross-check failed: {type(exc).__name__}") if x)
            for side, t, k in (("TileLang", t_tl, k_tl), ("PyTorch", t_torch, k_torch)):
                if k and t and abs(t.median_ms - k) > max(0.15 * k, 0.003):
                    note = "; ".join(
                        x
                        for x in (
                            note,
                            f"{side}: graph replay {t.median_ms * 1e3:.1f} µs vs "
                            f"profiler kernel time {k * 1e3:.1f} µs per call",
                        )
                        if x
                    )
    else:
        t_torch = time_callable(ref_fns[0], device, policy)
    flops, nbytes = float(family.flops(shape)), float(family.bytes(shape, dtype))
    attainable = roofline_attainable(flops, nbytes, *roof)
    # The memory roof binds only where the inputs stream from memory: rotated past the cache
    # on CUDA; on a CPU the same inputs stay in cache between calls, and beat DRAM's rate.
    streamed = device == "cuda" and policy.flush_l2
    flags += roof_flags(flops, nbytes, t_tl, roof, "TileLang", memory=streamed) + roof_flags(
        flops, nbytes, t_torch, roof, "PyTorch", memory=streamed
    )
    if (t_tl and t_tl.unstable) or t_torch.unstable:
        flags.append("unstable")
    speedup = (
        ratio.value
        if ratio is not None and math.isfinite(ratio.value)
        else ((t_torch.median_ms / t_tl.median_ms) if t_tl and t_tl.median_ms > 0 else None)
    )
    return OpBench(
        family=family.name,
        shape=tuple(shape),
        dtype=dtype,
        source=source,
        tilelang=t_tl,
        torch=t_torch,
        speedup=speedup,
        flops=flops,
        bytes=nbytes,
        tilelang_tflops=_rate(flops, t_tl, 1e12),
        tilelang_gbps=_rate(nbytes, t_tl, 1e9),
        torch_tflops=_rate(flops, t_torch, 1e12),
        torch_gbps=_rate(nbytes, t_torch, 1e9),
        config=config,
        error=error[:500],
        tilelang_roof_pct=_pct(flops, t_tl, attainable),
        torch_roof_pct=_pct(flops, t_torch, attainable),
        verified=verified,
        ratio=ratio,
        tilelang_kernel_ms=k_tl,
        torch_kernel_ms=k_torch,
        timer_note=note[:500],
        flags=tuple(flags),
        compiled=comp,
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


# ---------------------------------------------------------------- end to end


def amdahl(op_ratios: dict[str, Ratio | float], shares: dict[str, float]) -> tuple[float, float, float] | None:
    """The model speedup the op speedups predict over their share of profiled time:
    (estimate, low, high) from the ops' ratio values and interval ends."""
    if not op_ratios:
        return None

    def predict(pick: Callable[[Ratio | float], float]) -> float | None:
        remaining = 1.0 - sum(shares.get(f, 0.0) for f in op_ratios)
        accel = 0.0
        for f, r in op_ratios.items():
            v = pick(r)
            if not v or v <= 0 or not math.isfinite(v):
                return None
            accel += shares.get(f, 0.0) / v
        total = remaining + accel
        return 1.0 / total if total > 0 else None

    mid = predict(lambda r: r.value if isinstance(r, Ratio) else r)
    low = predict(lambda r: r.low if isinstance(r, Ratio) else r)
    high = predict(lambda r: r.high if isinstance(r, Ratio) else r)
    if mid is None:
        return None
    return mid, low if low is not None else mid, high if high is not None else mid


def amdahl_in_model(
    rows: tuple[FamilyTime, ...], total_ms: float, ran: dict[str, int]
) -> tuple[float, float, float] | None:
    """The model speedup the operator times inside the model predict: the reference's
    operator time over itself less what each routed family saves there. Where a fused
    kernel replaces more than its op benchmark's pair (GPT-2's gelu_new is eight
    elementwise kernels after the GEMM; the benchmark's reference is F.linear and one
    F.gelu), only this counts what the model loses. None unless every family that ran
    in TileLang has its row."""
    have = {r.family for r in rows if r.reference_ms > 0 and r.swapped_ms > 0}
    if total_ms <= 0 or not rows or any(n and f not in have for f, n in ran.items()):
        return None
    left = total_ms - sum(r.reference_ms - r.swapped_ms for r in rows if r.family in have)
    if left <= 0:
        return None
    return (total_ms / left,) * 3


def _timers_disagree(ref_fn: Callable, graph_ms: float, eager_kernel_ms: float) -> str:
    """Why graph replay and the eager kernel sum of the unmodified model disagree: the
    kernels of one captured replay tell apart time between kernels (the same kernels,
    many small launches) from another program (the model takes another path while a
    stream is capturing: transformers' BertModel replayed 1773 µs of kernels against
    810 eagerly on the H200, with 24 fp32 GEMMs and no cuDNN attention kernel among them)."""
    try:
        captured, n = graph_kernel_ms(ref_fn)
    except Exception:  # the explanation is supplementary; the gap reading stands alone
        captured, n = None, 0
    if captured and captured > 1.25 * eager_kernel_ms:
        return (
            f"graph replay runs {captured:.3f} ms of kernels ({n} kernels) against {eager_kernel_ms:.3f} ms "
            "eagerly for the unmodified model: the model takes another path while a CUDA graph is captured "
            "(transformers counts a capturing stream as tracing), and graph replay times that path on both "
            "sides; the eager view times the eager path"
        )
    return (
        f"graph replay {graph_ms:.3f} ms vs kernel sum {eager_kernel_ms:.3f} ms "
        "for the unmodified model: the difference is device time between kernels "
        "(many small launches), which graph replay includes and the kernel sum does not"
    )


def _kernel_sum_view(ref: Callable, cand: Callable, rounds: int = 5) -> E2EView:
    a, b = [], []
    for _ in range(rounds):  # interleaved, like the other views
        a.append(kernel_time_ms(ref, calls=2) or 0.0)
        b.append(kernel_time_ms(cand, calls=2) or 0.0)
    if not all(a) or not all(b):
        return E2EView(
            "kernel_sum", summarize(a or [0.0], "profiler"), None, None, "the profiler recorded no kernel time"
        )
    return E2EView("kernel_sum", summarize(a, "profiler"), summarize(b, "profiler"), bootstrap_ratio(a, b))


def _in_model(
    ref_fn: Callable,
    cand_fn: Callable,
    families: tuple[str, ...],
    device: str,
    ran: dict[str, int],
    op_ratios: dict[str, Ratio | float],
    table: Any = None,
    model: Any = None,
) -> tuple[tuple[FamilyTime, ...], list[str], float]:
    """Each routed family's operator time per forward pass inside the model, PyTorch's
    calls against the routed ones, both profiled the same way (profiling.family_times),
    and flags: a family whose TileLang calls got no time (the profiler could not see
    them), and one that does clearly worse in the model than its op benchmarks said
    (they time cold inputs; in the model the inputs were just written). A fused family's
    PyTorch side is the pairs of calls its kernel replaces (linear and GELU), found on the
    reference side by the router's scan where `table` has the fused kernel, so neither
    its base family nor the elementwise ops count them twice. The third value is the
    reference's operator time per forward pass, every family's (0 where not measured).
    `model`'s written-out norms count, on the reference side, as their family's calls,
    as written (the profile's way: `written.marked`), and a residual add with the norm
    after it as the fused family's pair (without the pairs, transformers llama at
    TinyLlama's widths on the H200, 2026-12-04, showed its 9 written norms against the one
    rmsnorm left unfused: "131x")."""

    fused = [kernels.get(f) for f in families if kernels.get(f).fuses]
    marker = None
    if fused and table is not None:
        # with the model: its written norms reach the scan as one call each, run as written
        marker = swap.Router(fused, swap.KernelTable(table.dtype, table.target), scan=True, where=table, model=model)

    def ref_side():
        with written.marked(model, rope_shape=rope.call_shape) if model is not None else contextlib.nullcontext():
            if marker is None:
                return ref_fn()
            with marker:
                return ref_fn()

    try:
        ref, _ = family_times(ref_side, device)
        swapped, routed = family_times(cand_fn, device)
    except Exception as exc:  # supplementary evidence: its failure is said, the run stands
        return (), [f"in-model family times not measured: {type(exc).__name__}: {str(exc)[:150]}"], 0.0
    rows, flags = [], []
    for f in families:
        pf = kernels.get(f).profile_family  # fallbacks are attributed under it, routed calls under f
        tl = routed.get(f, 0.0)
        if ran.get(f) and tl <= 0:
            flags.append(f"the profiler attributed no time to {f}'s TileLang calls: no in-model time for {f}")
            continue
        if kernels.get(f).fuses:  # its TileLang calls against the PyTorch pairs they replace
            row = FamilyTime(f, ref.get(f, 0.0), tl, tl)
        else:
            row = FamilyTime(f, ref.get(pf, 0.0), swapped.get(pf, 0.0) + (tl if pf != f else 0.0), tl)
        rows.append(row)
        op = op_ratios.get(f)
        op_value = op.value if isinstance(op, Ratio) else op
        if row.ratio and op_value and math.isfinite(op_value) and row.ratio * 1.1 < op_value:
            flags.append(
                f"{f} runs {row.ratio:.2f}x of PyTorch's kernels inside the model against {op_value:.2f}x "
                "in the op benchmarks"
            )
    return tuple(rows), flags, sum(ref.values())


def _alone(
    ref_fn: Callable, router: Any, rows: tuple[FamilyTime, ...], device: str, policy: TimingPolicy
) -> tuple[tuple[FamilyTime, ...], list[str], KeptFamilies | None]:
    """Each routed family alone, end to end: the model with only that family's calls
    routed, against the model as is, all sides in the same interleaved rounds of the
    verdict's timer. The profiled operator time (`_in_model`) leaves out the device time
    between kernels; graph replay counts it, and on the H200 it decided the sign: bert-base
    with attention routed ran its kernels 1.10x faster by the profiler and the model 1.00x,
    against 1.09x without attention (b8 s128, 2026-12-02). A family that makes
    the model slower on its own is flagged: leaving it to PyTorch would be faster. Where
    some do and others do not, the model with only the others routed is timed too (`kept`)."""
    if len(rows) < 2:
        return rows, [], None  # one family: the end-to-end ratio is its own

    def routed_only(*family: str) -> Callable:
        only = router.only(*family)

        def fn():
            with only:
                return ref_fn()

        return fn

    try:
        made = [make_sampler([ref_fn], device, policy)] + [
            make_sampler([routed_only(r.family)], device, policy) for r in rows
        ]
        # Timed eagerly, the router's own host cost would count against every family.
        notes = [m[2] for m in made if _not_graph_replay(m)]
        if notes:
            return rows, [f"each family alone not measured: {notes[0]}"], None
        sides = time_sides(made, device, policy)
    except Exception as exc:  # supplementary evidence: its failure is said, the run stands
        return rows, [f"each family alone not measured: {type(exc).__name__}: {str(exc)[:150]}"], None
    out, flags = [], []
    for i, row in enumerate(rows, start=1):
        ratio = sides.ratio(0, i)
        out.append(dataclasses.replace(row, alone=ratio))
        if out[-1].slows_model:
            inside = (
                f" although its operators run at {row.ratio:.2f}x PyTorch's speed inside the model (profiled): "
                "the time it adds between operators outweighs what its kernels save"
                if row.ratio and row.ratio >= 1.0
                else ""
            )
            flags.append(
                f"routing {row.family} alone makes the model {ratio.value:.2f}x end to end "
                f"[{ratio.low:.2f}-{ratio.high:.2f}]{inside}; leaving {row.family} to PyTorch would be faster"
            )
    keep = tuple(r.family for r in out if not r.slows_model)
    left = tuple(r.family for r in out if r.slows_model)
    kept = None
    if keep and left:
        try:
            pair = time_sides(
                [make_sampler([ref_fn], device, policy), make_sampler([routed_only(*keep)], device, policy)],
                device,
                policy,
            )
            kept = KeptFamilies(families=keep, left=left, ratio=pair.ratio(0, 1))
        except Exception as exc:
            flags.append(
                f"the model with {', '.join(keep)} routed not measured: {type(exc).__name__}: {str(exc)[:150]}"
            )
    return tuple(out), flags, kept


def layout_copies(counts: Sequence[CallCount]) -> int:
    """The copies the router made on the way to kernels (the calls' layout notes); a fused
    pattern's "fused into ..." note is not one."""
    return sum(n for c in counts for note, n in c.notes.items() if not note.startswith(swap.FUSED_INTO))


def end_to_end(
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    device: str,
    batch_size: int,
    router: Any,
    *,
    dtype: str,
    profiled_ms: dict[tuple[str, str], float],
    total_profiled_ms: float,
    op_ratios: dict[str, Ratio | float],
    shares: dict[str, float],
    policy: TimingPolicy = TimingPolicy(),
    profiled_wall_ms: float | None = None,
    watch: Sequence[Any] = (),
    not_chosen: Sequence[CallCount] = (),
    ms_a_call: dict[str, float] | None = None,
) -> E2EBench:
    """The model as is, and with the router sending the chosen families' calls to TileLang.

    Outputs are compared leaf by leaf with tolerances relative to the reference's
    magnitude. Calls are counted on one forward pass. On CUDA the verdict's number is
    CUDA-graph replay; eager (host path) and the profiler's kernel sum are shown beside
    it, all interleaved. On CPU one interleaved perf_counter view. Each routed family's
    operator time inside the model is profiled on both sides (`in_model`), and, where more
    than one family is routed, the model with each family routed alone is timed (`alone`).

    With `policy.compile_mode` the whole model through torch.compile (graph breaks
    allowed, as users compile it) is a third side of the view the verdict uses; its
    compile time is the wall time of its first call.

    A side of the verdict's view far slower than its other evidence (the profiled forward
    pass's wall time `profiled_wall_ms`, the same forward timed again alone) is measured
    once more, and flagged "stalled" if it stays so (`stalled_sides`).

    Every call is accounted for: the forward pass whose output is checked also counts the
    calls of the families in `watch` (those not chosen), at their shapes, as ran in
    PyTorch (`E2EBench.not_chosen`, with `not_chosen`: counts from elsewhere, the written
    out norms of families not chosen as the profile saw them).

    `ms_a_call`: the profile's mean time a call of each family without a kernel (batch
    norm, elementwise), with which coverage credits the calls fused kernels take in.
    """

    families = tuple(sorted(router.families()))
    tol = OUTPUT_TOLERANCE.get(dtype, OUTPUT_TOLERANCE["float32"])

    def ref_fn():
        return module(*inputs)

    def cand_fn():
        with router:
            return module(*inputs)

    redrawn, tried = False, ""
    with torch.inference_mode():
        ref_out = ref_fn()
        if signal(ref_out, dtype):
            # A reference without signal cannot show a wrong kernel: draw the inputs once
            # more with another seed before the comparison is flagged.
            other = redraw_inputs(inputs, seed=1)
            tried = (
                "; inputs drawn with another seed gave none either"
                if other is not None
                else "; the inputs have nothing to draw again"
            )
            if other is not None:
                other_out = module(*other)
                if not signal(other_out, dtype):
                    inputs, ref_out, redrawn = other, other_out, True
        router.reset()
        # The checked pass also counts the calls of families not chosen: the same routes,
        # with their calls seen too (only here: the timed passes carry no such host cost).
        watcher = router.watching(watch) if watch else router
        try:
            with watcher:
                out = module(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:  # a crashed swap-in is a failed item, with its error
            counts = watcher.counts(profiled_ms)
            mode = policy.compile_mode
            skipped = (
                None
                if mode == "none"
                else Compiled(
                    mode,
                    compiled_mod.INDUCTOR_MODES.get(mode, ""),
                    error="not measured: the model with TileLang kernels did not run",
                )
            )
            return E2EBench(
                families=families,
                reference=time_callable(ref_fn, device, policy),
                swapped=None,
                speedup=None,
                samples_per_s_reference=0.0,
                samples_per_s_swapped=None,
                max_abs_err=None,
                outputs_match=False,
                calls=counts,
                error=f"{type(exc).__name__}: {exc}"[:500],
                tilelang_calls=sum(c.tilelang for c in counts),
                fallback_calls=sum(sum(c.fallback.values()) for c in counts),
                tolerance=dict(tol),
                flags=("swap-in crashed",),
                compiled=skipped,
            )
        counts = watcher.counts(profiled_ms)
        chosen = router.families()
        unrouted = tuple(c for c in counts if c.family not in chosen) + tuple(not_chosen)
        counts = tuple(c for c in counts if c.family in chosen)
        check = compare_outputs(out, ref_out, dtype)
        views: list[E2EView] = []
        flags: list[str] = []
        overhead = None
        prep = None
        if policy.compile_mode != "none":
            prep = compiled_mod.prepare(module, [tuple(inputs)], device, policy.compile_mode, fullgraph=False)
            if prep.ok:  # first among its notes: it changes how the ratio reads
                path = paths.compile_path_note(ref_fn, shown=2)
                prep.notes[:0] = [path] if path else []
        same = compare_outputs(prep.first_output, ref_out, dtype) if prep is not None and prep.ok else None
        made = [make_sampler([ref_fn], device, policy), make_sampler([cand_fn], device, policy)]
        sides, at, why = time_with_compiled(made, prep, device, policy)
        evidence = {"PyTorch": (profiled_wall_ms, "in the profiled forward pass")} if profiled_wall_ms else {}
        stalls = stalled_sides(
            sides.timings[:2], ([ref_fn], [cand_fn]), ("PyTorch", "TileLang"), evidence, device, policy
        )
        if stalls:  # measured once more; the run with fewer stalled sides is kept
            again = time_with_compiled(made, prep, device, policy)
            stalls_again = stalled_sides(
                again[0].timings[:2], ([ref_fn], [cand_fn]), ("PyTorch", "TileLang"), evidence, device, policy
            )
            if len(stalls_again) <= len(stalls):
                (sides, at, why), stalls = again, stalls_again
        comp = compiled_result(prep, sides, at, 1, why, same)
        if prep is not None:
            compiled_mod.release()
        t_ref, t_sw = sides.timings[:2]
        # Both sides usually carry the same note (both captured on the model's own path).
        ratio, note = sides.ratio(0, 1), "; ".join(dict.fromkeys(n for n in sides.notes[:2] if n))
        if device == "cuda":
            method = t_ref.timer
            if note:  # launch gaps only where a side fell back to back-to-back events
                eager_events = any(t.timer != "cuda_graph" for t in (t_ref, t_sw))
                flags.append(note + ("; the device number includes launch gaps" if eager_events else ""))
            views.append(E2EView(method, t_ref, t_sw, ratio, note))
            e_ref, e_sw, e_ratio, _ = time_pair([ref_fn], [cand_fn], device, policy, eager=True)
            passthrough = router.passthrough()

            def pass_fn():
                with passthrough:
                    return module(*inputs)

            with contextlib.suppress(Exception):
                p_ref, p_pass, _, _ = time_pair([ref_fn], [pass_fn], device, policy, eager=True)
                overhead = p_pass.median_ms - p_ref.median_ms
            views.append(
                E2EView(
                    "eager",
                    e_ref,
                    e_sw,
                    e_ratio,
                    "host path: each forward synchronised, launches "
                    "included"
                    + (f"; the router itself adds {overhead:.2f} ms per forward" if overhead is not None else ""),
                )
            )
            with contextlib.suppress(Exception):
                ks = _kernel_sum_view(ref_fn, cand_fn)
                if ks.swapped is not None and ks.reference.median_ms > 0:
                    gap = t_ref.median_ms / ks.reference.median_ms
                    if abs(gap - 1) > 0.25:  # the timers disagree beyond noise: say what the difference is
                        ks = dataclasses.replace(
                            ks, note=_timers_disagree(ref_fn, t_ref.median_ms, ks.reference.median_ms)
                        )
                views.append(ks)
        else:
            method = "perf_counter"
            views.append(E2EView(method, t_ref, t_sw, ratio, "interleaved rounds; disturbed rounds dropped"))
    tl_calls = sum(c.tilelang for c in counts)
    fb_calls = sum(sum(c.fallback.values()) for c in counts)
    if check.no_signal:
        flags.append(check.no_signal + tried)
    flags.extend(stalls)
    ran: dict[str, int] = {}
    for c in counts:
        ran[c.family] = ran.get(c.family, 0) + c.tilelang
    in_model, in_flags, ref_total = _in_model(
        ref_fn, cand_fn, families, device, ran, op_ratios, table=router.table, model=module
    )
    flags.extend(in_flags)
    kept = None
    if check.ok and tl_calls:
        in_model, alone_flags, kept = _alone(ref_fn, router, in_model, device, policy)
        flags.extend(alone_flags)
    if tl_calls == 0:
        flags.append("no call ran in TileLang")
    if t_ref.unstable or t_sw.unstable:
        flags.append("unstable")
    # The estimate the measured ratio must agree with: from the operator times inside the
    # model where every routed family has them (they count what a fused kernel replaces),
    # else from the op benchmarks and the profiled shares.
    est, source = amdahl_in_model(in_model, ref_total, ran), "the operator times inside the model"
    if est is None:
        est, source = amdahl(op_ratios, shares), "the op speedups"
    if est and ratio and math.isfinite(ratio.value):
        # 15% slack for what the estimate leaves out (layout copies, fusion lost or gained).
        if est[2] * 1.15 < ratio.low or est[1] / 1.15 > ratio.high:
            copies = layout_copies(counts)
            why = (
                f"; the op benchmarks leave out the {copies} layout copies counted per call"
                if copies and est[1] / 1.15 > ratio.high
                else ""
            )
            flags.append(
                f"contradicts the Amdahl estimate ({est[0]:.2f}x from {source}, measured "
                f"{ratio.low:.2f}-{ratio.high:.2f}x){why}"
            )
    speedup = ratio.value if ratio and math.isfinite(ratio.value) else None
    return E2EBench(
        families=families,
        reference=t_ref,
        swapped=t_sw,
        speedup=speedup,
        samples_per_s_reference=batch_size / (t_ref.median_ms * 1e-3),
        samples_per_s_swapped=batch_size / (t_sw.median_ms * 1e-3) if t_sw.median_ms > 0 else None,
        max_abs_err=check.max_abs,
        outputs_match=check.ok and tl_calls > 0,
        coverage=swap.coverage(
            counts,
            total_profiled_ms,
            {f.name: f.profile_family for f in router.all},
            {f.name: f.absorbs for f in router.all},
            ms_a_call,
        ),
        amdahl_speedup=est[0] if est else None,
        error=check.reason
        if not check.ok
        else ("" if tl_calls else "no call ran in TileLang: the model was compared with itself"),
        views=tuple(views),
        method=method,
        ratio=ratio,
        calls=counts,
        tilelang_calls=tl_calls,
        fallback_calls=fb_calls,
        rel_l2_err=check.rel_l2,
        rel_max_err=check.rel_max,
        tolerance=dict(tol),
        flags=tuple(flags),
        router_overhead_ms=overhead,
        compiled=comp,
        in_model=in_model,
        kept=kept,
        nonfinite=dict(check.nonfinite),
        no_signal=check.no_signal,
        inputs_redrawn=redrawn,
        not_chosen=unrouted,
    )


def redraw_inputs(inputs: tuple[torch.Tensor, ...], seed: int) -> tuple[torch.Tensor, ...] | None:
    """The same inputs drawn again from another seed: floating-point tensors from a normal
    with each tensor's own mean and spread, integer tensors of more than two values (token
    ids) uniformly over their own range; masks, flags and constants kept. None where
    nothing could be drawn again."""
    gen = torch.Generator().manual_seed(seed)
    out, changed = [], False
    for t in inputs:
        if t.is_floating_point() and t.numel() > 1:
            f = t.detach().float()
            std = float(f.std())
            if std > 0:
                fresh = torch.randn(t.shape, generator=gen) * std + float(f.mean())
                out.append(fresh.to(device=t.device, dtype=t.dtype))
                changed = True
                continue
        elif not t.is_floating_point() and t.dtype != torch.bool and t.numel() > 1:
            lo, hi = int(t.min()), int(t.max())
            if t.unique().numel() > 2:
                out.append(torch.randint(lo, hi + 1, t.shape, generator=gen).to(device=t.device, dtype=t.dtype))
                changed = True
                continue
        out.append(t)
    return tuple(out) if changed else None


def launch_overhead(
    family: KernelFamily, shape: Shape, dtype: str, kernel: Callable, device: str, calls: int = 200
) -> LaunchOverhead:
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

    return LaunchOverhead(
        family.name, tuple(shape), per_call(lambda: kernel(*inputs)), per_call(lambda: family.reference(*inputs))
    )
