"""The kernels stage: each chosen family tuned, verified and timed at the model's shapes.

In: the context and the result with its hot operators. Out: the result with the tuned
configs, verification cases, op benchmarks (TileLang against PyTorch and torch.compile)
and launch overheads; the context's kernel table filled for the router. A family's
shapes are taken hottest first until they hold --shape-share of its profiled time
(`hottest`). Also `bench_shapes`, the same for one family alone (`evaluate bench`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

from .. import kernels
from ..context import Context, Reporter
from ..config import Config
from ..measuring import bench
from ..measuring.compiled import progress_text as compiled_text
from ..profiling import profile as profiling
from ..results import Hardware, OpBench, RunResult, Shape, parse_shape, shape_str
from . import cache as tuning_cache
from .ahead import Ahead
from . import search as tuning
from . import verify


def hottest(shapes: tuple[str, ...], shape_ms: tuple[float, ...], share: float, cap: int | None) -> tuple[str, ...]:
    """Shapes hottest first until they hold `share` of their summed time (every shape where
    the times are unknown), at most `cap` of them."""
    if len(shape_ms) != len(shapes) or not sum(shape_ms):
        return shapes[:cap]
    total, held, out = sum(shape_ms), 0.0, []
    for s, ms in zip(shapes, shape_ms):
        if held >= share * total - 1e-12:
            break
        out.append(s)
        held += ms
    return tuple(out[:cap])


def shapes_for(family: kernels.KernelFamily, hot: profiling.HotOps, cfg: Config) -> list[tuple[Shape, str]]:
    """The model's shapes for a family, hottest first until they hold --shape-share of its
    profiled time, at most --max-shapes (fused variants take the shapes of the family they
    extend, where the scan saw their pattern), plus the standard shapes when none or with
    --sweep."""
    op = next((o for o in hot.ops if o.family == family.profile_family), None)
    times = dict(zip(op.shapes, op.shape_ms)) if op is not None and len(op.shape_ms) == len(op.shapes) else {}
    fused = next((fu for fu in hot.fusions if fu.family == family.name), None)
    # fused: where the scan saw its pattern, not every shape of the base family
    found = fused.shapes if fused is not None else op.shapes if op else ()
    found = hottest(
        tuple(found),
        tuple(times.get(s, 0.0) for s in found) if times else (),
        cfg.profile.shape_share,
        cfg.profile.max_shapes,
    )
    model_shapes = [parse_shape(s) for s in found]
    shapes = [(s, "model") for s in model_shapes]
    if not shapes or cfg.bench.sweep:
        shapes += [(tuple(s), "standard") for s in family.standard_shapes(cfg.device) if tuple(s) not in model_shapes]
    return shapes


def profiled_ms(hot, family: str, shape: Shape) -> float | None:
    """A plain family's profiled time per forward pass at this shape: every call of the shape
    together, so no single call can take longer. None for a fused family, whose reference
    is two calls of which the profile counted one under this shape."""
    if hot is None or kernels.get(family).profile_family != family:
        return None
    key = shape_str(tuple(shape))
    for o in hot.ops:
        if o.family == family and key in o.shapes and len(o.shape_ms) == len(o.shapes):
            return o.shape_ms[o.shapes.index(key)]
    return None


def failed_because(candidates) -> str:
    """Why no candidate worked, in one line: their statuses and the commonest error, so
    the terminal says why without opening results.json."""
    reasons = "; ".join(sorted({c.status for c in candidates})) or "no candidate"
    errors = Counter(" ".join(c.error.split())[:200] for c in candidates if c.error)
    return reasons + (f": {errors.most_common(1)[0][0]}" if errors else "")


def _tune_one(
    ctx: Context, fam: kernels.KernelFamily, shape: Shape, source: str, profiled: float | None = None
) -> tuple:
    """Tune, verify (before timing) and benchmark one model shape of one family. `profiled`:
    the shape's profiled time per forward pass, what PyTorch's side must not be far above."""
    cfg, rep, hw, env = ctx.cfg, ctx.rep, ctx.hw, ctx.env
    lookup = save = None
    if cfg.tune.use_cache:
        lookup = lambda key: tuning_cache.lookup(cfg.output.store, key)  # noqa: E731
        save = lambda key, conf: tuning_cache.save(cfg.output.store, key, conf)  # noqa: E731
    label = f"{fam.name} {'x'.join(map(str, shape))}"
    rep.update(f"{label}: tuning")
    tk, kernel = tuning.tune(
        fam,
        shape,
        cfg.model.dtype,
        hw,
        budget_s=cfg.tune.budget_s,
        tilelang_version=env.tilelang,
        lookup=lookup,
        save=save,
        fine_rounds=cfg.tune.fine_rounds,
        isolate=cfg.tune.isolate,
        devices=cfg.tune.devices,
        device_log=tuning.DeviceLog() if cfg.tune.devices else None,
        on_candidate=lambda c: rep.update(f"{label}: tuning ({c.phase}, {c.status})"),
    )
    if lookup is not None and not tk.cached:
        changed = tuning_cache.changes(cfg.output.store, _cache_key(ctx, fam, shape))
        if changed:
            what = "the search space" if {f for f, _, _ in changed} == {"space"} else "the toolchain"
            rep.info(
                f"{label}: re-tuned because {what} changed: " + ", ".join(f"{f} {a} -> {b}" for f, a, b in changed)
            )
    table = ctx.table  # filled by tune_verify_bench before the first kernel
    if kernel is None:
        reasons = failed_because(tk.candidates)
        why = f"no candidate worked ({reasons})"
        ob = bench.bench_op(
            fam,
            shape,
            cfg.model.dtype,
            None,
            cfg.device,
            source=source,
            config=None,
            policy=cfg.bench.timing,
            error=why,
            verified=False,
        )
        table.add(fam.name, shape, None, None, verified=False, why_not=why)
        rep.info(f"[red]{label}: no working TileLang kernel ({reasons})[/]")
        return tk, None, ob
    # Verify before timing: an unverified kernel is neither timed, averaged nor swapped in.
    rep.update(f"{label}: verifying")
    vr = verify.verify(fam, shape, cfg.model.dtype, tk.config, hw.target, cfg.device, seeds=cfg.bench.seeds)
    why = (
        ""
        if vr.passed
        else "kernel failed verification: "
        + "; ".join(sorted({c.reason or "mismatch" for c in vr.cases if not c.passed}))[:200]
    )
    table.add(fam.name, shape, tk.config, kernel, verified=vr.passed, why_not=why)
    rep.update(f"{label}: benchmarking" + _against_compile(cfg.bench.timing.compile_mode, vr.passed))
    evidence = {}
    if profiled:
        evidence["PyTorch"] = (profiled, "for every call of this shape in the profiled forward pass")
    tuned = [c.latency_ms for c in tk.candidates if c.status == "ok" and c.config == tk.config and c.latency_ms]
    if tuned:
        evidence["TileLang"] = (min(tuned), "when the tuner timed this config")
    ob = bench.bench_op(
        fam,
        shape,
        cfg.model.dtype,
        kernel,
        cfg.device,
        source=source,
        config=tk.config,
        policy=cfg.bench.timing,
        roof=(hw.measured_tflops, hw.measured_gbps),
        verified=vr.passed,
        error=why,
        evidence=evidence,
    )
    rep.info(
        f"{label}: TileLang {ob.tilelang.median_ms:.4g} ms vs PyTorch {ob.torch.median_ms:.4g} ms "
        f"-> {ob.speedup:.3g}x{compiled_text(ob.compiled)}"
        if ob.tilelang and ob.speedup
        else f"[red]{label}: {ob.error}[/]"
    )
    return tk, vr, ob


def _cache_key(ctx: Context, fam: kernels.KernelFamily, shape: Shape) -> dict:
    """The tuning cache's key for a family's shape on this run's hardware and toolchain."""
    dtype = ctx.cfg.model.dtype
    return tuning.cache_key(fam.name, shape, dtype, ctx.hw, ctx.env.tilelang, fam.search_space(shape, dtype, ctx.hw))


def _cached(ctx: Context):
    """The tuning cache's winner for a family and shape, or None (with --no-cache, always)."""
    if not ctx.cfg.tune.use_cache:
        return None
    return lambda fam, shape: tuning_cache.lookup(ctx.cfg.output.store, _cache_key(ctx, fam, shape))


def _against_compile(mode: str, verified: bool) -> str:
    """What the progress line adds while the torch.compile side compiles (seconds to minutes)."""
    return f" (and torch.compile, {mode})" if mode != "none" and verified else ""


def tune_verify_bench(ctx: Context, result: RunResult) -> RunResult:
    """Every chosen family on every model shape, hottest first; each kernel is saved as it
    finishes (Ctrl-C keeps it), and a resumed run skips the ones it already has."""
    cfg, rep = ctx.cfg, ctx.rep
    ctx.kernel_table(result)
    done = {(b.family, tuple(b.shape)) for b in result.op_bench}
    work = [
        (kernels.get(f), s, src)
        for f in result.hot_ops.selected
        for s, src in shapes_for(kernels.get(f), result.hot_ops, cfg)
        if (f, tuple(s)) not in done
    ]
    for f in result.hot_ops.selected:
        op = next((o for o in result.hot_ops.ops if o.family == kernels.get(f).profile_family), None)
        mine = [s for fam, s, src in work if fam.name == f and src == "model"]
        if kernels.get(f).fuses:  # a fused variant takes the shapes where the scan saw its pattern
            continue
        if op is not None and mine and len(op.shape_ms) == len(op.shapes) and sum(op.shape_ms):
            held = sum(ms for s, ms in zip(op.shapes, op.shape_ms) if parse_shape(s) in mine) / sum(op.shape_ms)
            rep.info(
                f"{f}: {len(mine)} of {len(op.shapes)} shapes, {held:.0%} of its profiled time "
                f"(--shape-share {cfg.profile.shape_share:g}"
                + (f", --max-shapes {cfg.profile.max_shapes}" if cfg.profile.max_shapes else "")
                + f"); up to {len(mine) * cfg.tune.budget_s:.0f} s of tuning"
            )
    rep.stage("Tuning, verifying and benchmarking TileLang kernels", total=len(work))
    # On a GPU the next kernels compile while this one is verified and timed (ahead.py).
    pending = None
    if cfg.device == "cuda":
        pending = Ahead([(f, s) for f, s, _ in work], cfg.model.dtype, ctx.hw, _cached(ctx))
    try:
        for fam, shape, source in work:
            tk, vr, ob = _tune_one(ctx, fam, shape, source, profiled_ms(result.hot_ops, fam.name, shape))
            result = dataclasses.replace(
                result,
                tuned=result.tuned + (tk,),
                verify=result.verify + ((vr,) if vr else ()),
                op_bench=result.op_bench + (ob,),
            )
            ctx.save(result)
            rep.advance()
    except BaseException:
        if pending is not None:
            pending.abandon()  # Ctrl-C: stop without waiting for the compiles in flight
        raise
    if pending is not None:
        pending.close()  # before the launch overheads, which are timed on the host
    overheads = []
    for fname in result.hot_ops.selected:
        if not any(f == fname and e.kernel is not None for (f, _), e in ctx.table.entries().items()):
            continue
        fam = kernels.get(fname)
        tiny = tuple(fam.standard_shapes("cpu")[0])
        rep.update(f"{fname} {'x'.join(map(str, tiny))}: launch overhead")
        try:
            kernel = fam.build(tiny, cfg.model.dtype, fam.search_space(tiny, cfg.model.dtype, ctx.hw)[0], ctx.hw.target)
            overheads.append(bench.launch_overhead(fam, tiny, cfg.model.dtype, kernel, cfg.device))
        except Exception as exc:  # a measurement we could not make is noted, not fatal
            rep.info(f"[yellow]{fname}: launch overhead not measured ({type(exc).__name__}: {exc})[/]")
    for o in overheads:
        rep.info(
            f"{o.family} launch at {'x'.join(map(str, o.shape))}: TileLang {o.tilelang_us:.1f} µs "
            f"vs PyTorch {o.torch_us:.1f} µs per call"
        )
    rep.done()
    return dataclasses.replace(result, overhead=tuple(overheads))


def bench_shapes(
    family: str,
    shapes: list[Shape],
    dtype: str,
    device: str,
    hw: Hardware,
    tilelang: str,
    *,
    budget_s: float,
    policy: bench.TimingPolicy,
    store: Path | None,
    rep: Reporter,
) -> list[tuple]:
    """Tune, verify and time one family alone on the given (or standard) shapes."""
    fam = kernels.get(family)
    shapes = shapes or [tuple(s) for s in fam.standard_shapes(device)]
    out = []
    rep.stage(f"Benchmarking {family} on {hw.name}", total=len(shapes))
    lookup = save = None
    if store is not None:
        lookup = lambda key: tuning_cache.lookup(store, key)  # noqa: E731
        save = lambda key, conf: tuning_cache.save(store, key, conf)  # noqa: E731
    for shape in shapes:
        label = f"{family} {'x'.join(map(str, shape))}"
        rep.update(label)
        tk, kernel = tuning.tune(
            fam,
            shape,
            dtype,
            hw,
            budget_s=budget_s,
            tilelang_version=tilelang,
            lookup=lookup,
            save=save,
            on_candidate=lambda c, lbl=label: rep.update(f"{lbl}: tuning ({c.phase}, {c.status})"),
        )
        verified, why = False, "no candidate worked"
        if kernel is not None:
            # `evaluate bench` verifies too: a number for a wrong kernel is never printed as a speed.
            rep.update(f"{label}: verifying")
            vr = verify.verify(fam, shape, dtype, tk.config, hw.target, device)
            verified = vr.passed
            why = (
                ""
                if verified
                else "kernel failed verification: "
                + "; ".join(sorted({c.reason or "mismatch" for c in vr.cases if not c.passed}))[:200]
            )
        rep.update(f"{label}: benchmarking" + _against_compile(policy.compile_mode, verified))
        ob: OpBench = bench.bench_op(
            fam,
            shape,
            dtype,
            kernel,
            device,
            source="standard",
            config=tk.config,
            policy=policy,
            roof=(hw.measured_tflops, hw.measured_gbps),
            error=why,
            verified=verified,
        )
        out.append((tk, ob))
        rep.advance()
    rep.done()
    return out
