"""The end-to-end and soak stages: the model as users run it, with its calls routed.

In: the context (the loaded model, the kernel table) and the result with its hot
operators and op benchmarks. Out: the result with its `E2EBench` (every call of every
family counted, the chosen ones' and the others') and its `Soak`.
"""

from __future__ import annotations

import dataclasses

import torch

from .. import kernels
from ..context import Context
from ..results import CallCount, RunResult, geomean
from ..routing import router as swap, written
from . import bench
from .compiled import progress_text as compiled_text


def not_chosen(families: tuple[str, ...], hot) -> tuple[list, tuple[CallCount, ...]]:
    """The families not chosen for rewriting whose calls the end-to-end pass counts (every
    family with torch functions of its own), and the calls of those a router cannot see
    as they are written (written-out norms and rotary embeddings: `written.FAMILIES`), as
    the profile counted them."""
    chosen = {kernels.get(f).profile_family for f in families} | set(families)
    mine = [f for f in kernels.REGISTRY.values() if f.functions and f.name not in chosen]
    watch = [f for f in mine if f.name not in written.FAMILIES]
    rows = []
    for o in hot.ops if hot is not None else ():
        if o.family in written.FAMILIES and o.family not in chosen and o.calls:
            per = o.shape_calls if len(o.shape_calls) == len(o.shapes) else (0,) * len(o.shapes)
            rows += [
                CallCount(o.family, s, 0, {swap.Router.NOT_CHOSEN: n}, profiled_ms=ms)
                for s, n, ms in zip(o.shapes, per, o.shape_ms or (0.0,) * len(o.shapes))
                if n
            ]
            rest = o.calls - sum(per)
            if rest > 0:
                rows.append(CallCount(o.family, "", 0, {swap.Router.NOT_CHOSEN: rest}))
    return watch, tuple(rows)


def end_to_end(ctx: Context, result: RunResult) -> RunResult:
    """The model as its authors wrote it, its calls routed to TileLang at the operator."""
    cfg, rep, loaded = ctx.cfg, ctx.rep, ctx.loaded
    mode = cfg.bench.timing.compile_mode
    rep.stage(
        "End-to-end: the model with its calls routed to TileLang"
        + (f", and through torch.compile ({mode})" if mode != "none" else "")
    )
    router = swap.Router([kernels.get(f) for f in result.families], ctx.kernel_table(result), model=loaded.module)
    hot = result.hot_ops
    shares = {o.family: o.share for o in hot.ops}
    fused_at = {fu.family: set(fu.shapes) for fu in hot.fusions}  # a fused family: only where it fuses
    profiled = {
        (f, s): ms
        for o in hot.ops
        for f in result.families
        if kernels.get(f).profile_family == o.family
        for s, ms in zip(o.shapes, o.shape_ms)
        if f not in fused_at or s in fused_at[f]
    }
    ratios = {}
    for f in result.families:
        rows = [b for b in result.op_bench if b.family == f and b.source == "model"]
        if rows and all(b.speedup for b in rows):  # a shape without a working kernel has no estimate
            ratios[f] = geomean([b.ratio or b.speedup for b in rows])
    share_of = {
        f: sum(ms for (g, _), ms in profiled.items() if g == f) / hot.total_ms if hot.total_ms else 0.0
        for f in result.families
    }
    watch, unwatched = not_chosen(result.families, hot)
    e2e = bench.end_to_end(
        loaded.module,
        loaded.inputs,
        cfg.device,
        loaded.spec.batch_size,
        router,
        dtype=cfg.model.dtype,
        profiled_ms=profiled,
        total_profiled_ms=hot.total_ms or sum(profiled.values()),
        op_ratios=ratios,
        shares={**shares, **share_of},
        policy=cfg.bench.timing,
        profiled_wall_ms=hot.wall_ms or None,
        watch=watch,
        not_chosen=unwatched,
        ms_a_call={o.family: o.time_ms / o.calls for o in hot.ops if o.calls and not o.has_kernel},
    )
    if e2e.speedup:
        # With nothing routed the model was compared with itself: neither a match nor a difference.
        outputs = (
            "outputs not compared"
            if not e2e.tilelang_calls
            else f"outputs {'match' if e2e.outputs_match else 'DIFFER'}"
        )
        rep.done(
            f"{e2e.tilelang_calls} calls in TileLang, {e2e.fallback_calls} fell back; "
            f"{e2e.speedup:.3g}x ({e2e.method}), {outputs}{compiled_text(e2e.compiled)}"
        )
        inside = ", ".join(f"{r.family} {r.ratio:.3g}x" for r in e2e.in_model if r.ratio)
        if inside:
            rep.info(f"inside the model, each family's time against PyTorch's own calls: {inside}")
        alone = ", ".join(f"{r.family} {r.alone.value:.3g}x" for r in e2e.in_model if r.alone)
        if alone:
            rep.info(f"the model with each family routed alone, end to end: {alone}")
        if e2e.kept:
            k = e2e.kept
            rep.info(
                f"with {', '.join(k.left)} left to PyTorch, the model is {k.ratio.value:.3g}x "
                f"[{k.ratio.low:.3g}-{k.ratio.high:.3g}] end to end ({', '.join(k.families)} in TileLang)"
            )
    else:
        rep.done(f"swap-in failed: {e2e.error}")
    # Fused variants have no single torch function to route: say so plainly rather than
    # let a tuned, benchmarked kernel look as if it ran in the model.
    unrouted = [f for f in result.families if not kernels.get(f).functions and not kernels.get(f).fuses]
    if unrouted:
        e2e = dataclasses.replace(
            e2e,
            flags=e2e.flags
            + tuple(
                f"{f} was not swapped in: it has no torch function or pattern the router can take; its kernel "
                "was tuned and benchmarked only"
                for f in unrouted
            ),
        )
    for flag in e2e.flags:
        rep.info(f"[yellow]end to end: {flag}[/]")
    return dataclasses.replace(result, e2e=e2e)


def soak(ctx: Context, result: RunResult) -> RunResult:
    cfg, rep, loaded = ctx.cfg, ctx.rep, ctx.loaded
    rep.stage(f"Soak: {cfg.bench.soak_s:g} s of continuous inference")
    router = swap.Router([kernels.get(f) for f in result.families], ctx.kernel_table(result), model=loaded.module)

    def step():
        with router:
            return loaded.module(*loaded.inputs)

    with torch.inference_mode():
        s = bench.soak(step, cfg.device, cfg.bench.soak_s)
    rep.done(f"{s.iterations} iterations ({s.timer}), drift {100 * s.drift:+.1f}%, CV {100 * s.cv:.1f}%")
    return dataclasses.replace(result, soak=s)
