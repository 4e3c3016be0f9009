"""The stages of an evaluation, one function each: `(context, result) -> result`.

In: a `Context` (the config, the loaded model, the device, the run folder, the progress
reporter and the kernel table the router reads) and the `RunResult` so far. Out: the
`RunResult` with this stage's field filled. `pipeline.py` orders them and runs each in
one wrapper (timing, saving `results.json`, optional stages' errors as data, resume).

A stage may save partial results itself where a long stage should not lose finished
work (the kernels stage saves each kernel as it completes). Nothing a stage needs later
lives only in memory: the kernel table is rebuilt from `result.tuned` and TileLang's
compile cache when a resumed run reaches the end-to-end stage.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
import torch

from . import baseline, checklist, kernels, profiling, upstream
from .measuring import bench
from .routing import router as swap, written
from .tuning import search as tuning, cache as tuning_cache, verify
from .config import Config
from .models import LoadedModel
from .results import (CallCount, Environment, Hardware, OpBench, Ratio, RunResult, Shape, parse_shape, shape_str,
                      to_dict)


class Reporter:
    """Progress callbacks; the default does nothing (tests, library use)."""

    def stage(self, name: str, total: int | None = None) -> None: ...

    def update(self, text: str) -> None:
        """Say what the current stage is doing now."""

    def advance(self, text: str = "") -> None:
        """One unit of the current stage's total is done."""

    def done(self, text: str = "") -> None: ...

    def info(self, text: str) -> None: ...


@dataclass
class Context:
    """What the stages share besides the result. Mutable on purpose: the kernel table
    fills as kernels finish, and is rebuilt from the result when a run resumes."""

    cfg: Config
    rep: Reporter
    hw: Hardware
    env: Environment
    loaded: LoadedModel
    run_dir: Path
    table: swap.KernelTable | None = None
    push_error: Exception | None = None  # --push failed; the baseline is recorded locally
    latest: RunResult | None = None  # the newest saved result, partial progress of a stage included
    _table_from: int = field(default=-1, repr=False)  # how many tuned kernels the table holds

    def save(self, result: RunResult) -> None:
        self.latest = result
        tmp = self.run_dir / "results.json.tmp"
        tmp.write_text(json.dumps(to_dict(result), indent=1))
        tmp.replace(self.run_dir / "results.json")  # atomic: an interrupted write never leaves half a file

    def kernel_table(self, result: RunResult) -> swap.KernelTable:
        """The tuned kernels the router may use: the kernels stage fills it as it goes; a
        resumed run rebuilds it from the recorded configs (TileLang's compile cache makes
        that a load, not a compile)."""
        if self.table is None:
            dtype, target = self.cfg.model.dtype, self.hw.target
            self.table = swap.KernelTable(dtype, target,
                                          build=lambda f, s, c: kernels.get(f).build(s, dtype, c, target))
        if self._table_from < 0 and result.tuned:
            verified = {(b.family, tuple(b.shape)): b.verified for b in result.op_bench}
            for t in result.tuned:
                if t.config is None:
                    self.table.add(t.family, t.shape, None, None, verified=False, why_not="no candidate worked")
                    continue
                kernel = kernels.get(t.family).build(t.shape, t.dtype, t.config, self.hw.target)
                ok = verified.get((t.family, tuple(t.shape)), False)
                self.table.add(t.family, t.shape, t.config, kernel, verified=ok,
                               why_not="" if ok else "kernel failed verification")
        self._table_from = len(result.tuned)
        return self.table


def profile_family(name: str) -> str:
    return kernels.get(name).profile_family


def geomean_ratio(rows: list) -> "Ratio | float":
    """Geometric mean of op speedups, interval ends combined the same way."""
    vals = [r.value if isinstance(r, Ratio) else r for r in rows]
    if not all(isinstance(r, Ratio) for r in rows):
        return math.exp(sum(math.log(v) for v in vals) / len(vals))
    g = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    return Ratio(g(vals), g([r.low for r in rows]), g([r.high for r in rows]), min(r.rounds for r in rows))


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
    op = next((o for o in hot.ops if o.family == profile_family(family.name)), None)
    times = dict(zip(op.shapes, op.shape_ms)) if op is not None and len(op.shape_ms) == len(op.shapes) else {}
    fused = next((fu for fu in hot.fusions if fu.family == family.name), None)
    # fused: where the scan saw its pattern, not every shape of the base family
    found = fused.shapes if fused is not None else op.shapes if op else ()
    found = hottest(tuple(found), tuple(times.get(s, 0.0) for s in found) if times else (),
                    cfg.profile.shape_share, cfg.profile.max_shapes)
    model_shapes = [parse_shape(s) for s in found]
    shapes = [(s, "model") for s in model_shapes]
    if not shapes or cfg.bench.sweep:
        shapes += [(tuple(s), "standard") for s in family.standard_shapes(cfg.device) if tuple(s) not in model_shapes]
    return shapes


# ---------------------------------------------------------------- the stages


def profile(ctx: Context, result: RunResult) -> RunResult:
    cfg = ctx.cfg
    ctx.rep.stage("Profiling with torch.profiler")
    hot = profiling.hot_ops(ctx.loaded, top=cfg.profile.ops, families=cfg.profile.families, iters=cfg.profile.iters,
                            fuse=cfg.profile.fuse)
    ctx.rep.done(f"{len(hot.ops)} operator families; rewriting {', '.join(hot.selected) or 'none'}")
    for fu in hot.fusions:
        if fu.shapes:
            ctx.rep.info(f"{fu.family}: the model has its pattern {fu.calls} times a forward pass "
                         f"({', '.join(fu.shapes)}); each runs as one fused kernel")
        if fu.reused:
            ctx.rep.info(f"{fu.family} not fused at {', '.join(fu.reused)}: the first call's result is read "
                         "again after the second (a pre-norm residual), so fusing would compute it twice")
    for o in profiling.unnamed(hot):
        ctx.rep.info(f"[yellow]{o.family}: {o.calls} calls a pass ({o.share:.0%} of the time) at no shape its kernel "
                     f"takes; they run in PyTorch, counted end to end[/]")
    missed = profiling.left_out(hot) if not cfg.profile.families else ()
    if missed:
        ctx.rep.info("not rewritten, with a kernel: " + ", ".join(f"{o.family} ({o.share:.0%} of the time)"
                                                                  for o in missed)
                     + f"; --ops {len(hot.selected) + len(missed)} rewrites {'it' if len(missed) == 1 else 'them'} too")
    return dataclasses.replace(result, hot_ops=hot)


def profiled_ms(hot, family: str, shape: Shape) -> float | None:
    """A plain family's profiled time per forward pass at this shape: every call of the shape
    together, so no single call can take longer. None for a fused family, whose reference
    is two calls of which the profile counted one under this shape."""
    if hot is None or profile_family(family) != family:
        return None
    key = shape_str(tuple(shape))
    for o in hot.ops:
        if o.family == family and key in o.shapes and len(o.shape_ms) == len(o.shapes):
            return o.shape_ms[o.shapes.index(key)]
    return None


def _tune_one(ctx: Context, fam: kernels.KernelFamily, shape: Shape, source: str,
              profiled: float | None = None) -> tuple:
    """Tune, verify (before timing) and benchmark one model shape of one family. `profiled`:
    the shape's profiled time per forward pass, what PyTorch's side must not be far above."""
    cfg, rep, hw, env = ctx.cfg, ctx.rep, ctx.hw, ctx.env
    lookup = save = None
    if cfg.tune.use_cache:
        lookup = lambda key: tuning_cache.lookup(cfg.output.store, key)  # noqa: E731
        save = lambda key, conf: tuning_cache.save(cfg.output.store, key, conf)  # noqa: E731
    label = f"{fam.name} {'x'.join(map(str, shape))}"
    rep.update(f"{label}: tuning")
    tk, kernel = tuning.tune(fam, shape, cfg.model.dtype, hw, budget_s=cfg.tune.budget_s,
                             tilelang_version=env.tilelang, lookup=lookup, save=save,
                             fine_rounds=cfg.tune.fine_rounds, isolate=cfg.tune.isolate,
                             devices=cfg.tune.devices, device_log=tuning.DeviceLog() if cfg.tune.devices else None,
                             on_candidate=lambda c: rep.update(f"{label}: tuning ({c.phase}, {c.status})"))
    if lookup is not None and not tk.cached:
        changed = tuning_cache.changes(cfg.output.store, tuning.cache_key(
            fam.name, shape, cfg.model.dtype, hw, env.tilelang, fam.search_space(shape, cfg.model.dtype, hw)))
        if changed:
            what = "the search space" if {f for f, _, _ in changed} == {"space"} else "the toolchain"
            rep.info(f"{label}: re-tuned because {what} changed: "
                     + ", ".join(f"{f} {a} -> {b}" for f, a, b in changed))
    table = ctx.table  # filled by tune_verify_bench before the first kernel
    if kernel is None:
        reasons = "; ".join(sorted({c.status for c in tk.candidates})) or "no candidate"
        why = f"no candidate worked ({reasons})"
        ob = bench.bench_op(fam, shape, cfg.model.dtype, None, cfg.device, source=source, config=None,
                            policy=cfg.bench.timing, error=why, verified=False)
        table.add(fam.name, shape, None, None, verified=False, why_not=why)
        rep.info(f"[red]{label}: no working TileLang kernel ({reasons})[/]")
        return tk, None, ob
    # Verify before timing: an unverified kernel is neither timed, averaged nor swapped in.
    rep.update(f"{label}: verifying")
    vr = verify.verify(fam, shape, cfg.model.dtype, tk.config, hw.target, cfg.device, seeds=cfg.bench.seeds)
    why = "" if vr.passed else "kernel failed verification: " + "; ".join(
        sorted({c.reason or "mismatch" for c in vr.cases if not c.passed}))[:200]
    table.add(fam.name, shape, tk.config, kernel, verified=vr.passed, why_not=why)
    rep.update(f"{label}: benchmarking" + _against_compile(cfg.bench.timing.compile_mode, vr.passed))
    evidence = {}
    if profiled:
        evidence["PyTorch"] = (profiled, "for every call of this shape in the profiled forward pass")
    tuned = [c.latency_ms for c in tk.candidates if c.status == "ok" and c.config == tk.config and c.latency_ms]
    if tuned:
        evidence["TileLang"] = (min(tuned), "when the tuner timed this config")
    ob = bench.bench_op(fam, shape, cfg.model.dtype, kernel, cfg.device, source=source, config=tk.config,
                        policy=cfg.bench.timing, roof=(hw.measured_tflops, hw.measured_gbps),
                        verified=vr.passed, error=why, evidence=evidence)
    rep.info(f"{label}: TileLang {ob.tilelang.median_ms:.4g} ms vs PyTorch {ob.torch.median_ms:.4g} ms "
             f"-> {ob.speedup:.3g}x{compiled_text(ob.compiled)}" if ob.tilelang and ob.speedup
             else f"[red]{label}: {ob.error}[/]")
    return tk, vr, ob


def _against_compile(mode: str, verified: bool) -> str:
    """What the progress line adds while the torch.compile side compiles (seconds to minutes)."""
    return f" (and torch.compile, {mode})" if mode != "none" and verified else ""


def compiled_text(c) -> str:
    """The torch.compile side in a progress line: its time and ratio, or why it has none.
    Escaped for rich markup: Dynamo's reasons quote code, which may hold [brackets]."""
    if c is None:
        return ""
    if c.timing is None:
        return f"; torch.compile: {c.error}".replace("[", "\\[")
    ratio = f", TileLang {c.ratio.value:.3g}x of it" if c.ratio is not None and math.isfinite(c.ratio.value) else ""
    took = "" if c.compile_s is None else f" (compiled in {c.compile_s:.2g} s)"  # 0.05 s: Inductor's cache
    return f"; torch.compile {c.timing.median_ms:.4g} ms{ratio}{took}"


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
            rows += [CallCount(o.family, s, 0, {swap.Router.NOT_CHOSEN: n}, profiled_ms=ms)
                     for s, n, ms in zip(o.shapes, per, o.shape_ms or (0.0,) * len(o.shapes)) if n]
            rest = o.calls - sum(per)
            if rest > 0:
                rows.append(CallCount(o.family, "", 0, {swap.Router.NOT_CHOSEN: rest}))
    return watch, tuple(rows)


def tune_verify_bench(ctx: Context, result: RunResult) -> RunResult:
    """Every chosen family on every model shape, hottest first; each kernel is saved as it
    finishes (Ctrl-C keeps it), and a resumed run skips the ones it already has."""
    cfg, rep = ctx.cfg, ctx.rep
    ctx.kernel_table(result)
    done = {(b.family, tuple(b.shape)) for b in result.op_bench}
    work = [(kernels.get(f), s, src) for f in result.hot_ops.selected
            for s, src in shapes_for(kernels.get(f), result.hot_ops, cfg) if (f, tuple(s)) not in done]
    for f in result.hot_ops.selected:
        op = next((o for o in result.hot_ops.ops if o.family == profile_family(f)), None)
        mine = [s for fam, s, src in work if fam.name == f and src == "model"]
        if kernels.get(f).fuses:  # a fused variant takes the shapes where the scan saw its pattern
            continue
        if op is not None and mine and len(op.shape_ms) == len(op.shapes) and sum(op.shape_ms):
            held = sum(ms for s, ms in zip(op.shapes, op.shape_ms) if parse_shape(s) in mine) / sum(op.shape_ms)
            rep.info(f"{f}: {len(mine)} of {len(op.shapes)} shapes, {held:.0%} of its profiled time "
                     f"(--shape-share {cfg.profile.shape_share:g}"
                     + (f", --max-shapes {cfg.profile.max_shapes}" if cfg.profile.max_shapes else "")
                     + f"); up to {len(mine) * cfg.tune.budget_s:.0f} s of tuning")
    rep.stage("Tuning, verifying and benchmarking TileLang kernels", total=len(work))
    for fam, shape, source in work:
        tk, vr, ob = _tune_one(ctx, fam, shape, source, profiled_ms(result.hot_ops, fam.name, shape))
        result = dataclasses.replace(result, tuned=result.tuned + (tk,), verify=result.verify + ((vr,) if vr else ()),
                                     op_bench=result.op_bench + (ob,))
        ctx.save(result)
        rep.advance()
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
        rep.info(f"{o.family} launch at {'x'.join(map(str, o.shape))}: TileLang {o.tilelang_us:.1f} µs "
                 f"vs PyTorch {o.torch_us:.1f} µs per call")
    rep.done()
    return dataclasses.replace(result, overhead=tuple(overheads))


def portability_check(ctx: Context, result: RunResult) -> RunResult:
    """The rewritten kernels lowered for accelerators not on this machine (never run there)."""
    from . import portability

    cfg, rep = ctx.cfg, ctx.rep
    targets, dtype = cfg.portability.targets, cfg.portability.dtype or cfg.model.dtype
    checked = portability.from_tuned(result.tuned)
    if any(k.dtype != dtype for k in checked):
        # A config tuned at another dtype says nothing about this one: defaults only.
        checked = [dataclasses.replace(k, dtype=dtype, config=None) for k in checked]
    rep.stage(f"Portability: lowering {len(checked)} kernels ({dtype}) for "
              f"{', '.join(targets) if targets else 'the default targets'}")
    port = portability.check(checked, targets)
    # The reporter reads rich markup; reasons quote compiler errors, which may hold [brackets].
    lines = [line.replace("[", "\\[") for line in port.summary]
    rep.done(lines[0] if lines else "")
    for line in lines[1:]:
        rep.info(line)
    return dataclasses.replace(result, portability=port)


def end_to_end(ctx: Context, result: RunResult) -> RunResult:
    """The model as its authors wrote it, its calls routed to TileLang at the operator."""
    cfg, rep, loaded = ctx.cfg, ctx.rep, ctx.loaded
    mode = cfg.bench.timing.compile_mode
    rep.stage("End-to-end: the model with its calls routed to TileLang"
              + (f", and through torch.compile ({mode})" if mode != "none" else ""))
    router = swap.Router([kernels.get(f) for f in result.families], ctx.kernel_table(result), model=loaded.module)
    hot = result.hot_ops
    shares = {o.family: o.share for o in hot.ops}
    fused_at = {fu.family: set(fu.shapes) for fu in hot.fusions}  # a fused family: only where it fuses
    profiled = {(f, s): ms for o in hot.ops for f in result.families if profile_family(f) == o.family
                for s, ms in zip(o.shapes, o.shape_ms) if f not in fused_at or s in fused_at[f]}
    ratios = {}
    for f in result.families:
        rows = [b for b in result.op_bench if b.family == f and b.source == "model"]
        if rows and all(b.speedup for b in rows):  # a shape without a working kernel has no estimate
            ratios[f] = geomean_ratio([b.ratio or b.speedup for b in rows])
    share_of = {f: sum(ms for (g, _), ms in profiled.items() if g == f) / hot.total_ms if hot.total_ms else 0.0
                for f in result.families}
    watch, unwatched = not_chosen(result.families, hot)
    e2e = bench.end_to_end(loaded.module, loaded.inputs, cfg.device, loaded.spec.batch_size, router,
                           dtype=cfg.model.dtype, profiled_ms=profiled,
                           total_profiled_ms=hot.total_ms or sum(profiled.values()), op_ratios=ratios,
                           shares={**shares, **share_of}, policy=cfg.bench.timing,
                           profiled_wall_ms=hot.wall_ms or None, watch=watch, not_chosen=unwatched)
    if e2e.speedup:
        rep.done(f"{e2e.tilelang_calls} calls in TileLang, {e2e.fallback_calls} fell back; "
                 f"{e2e.speedup:.3g}x ({e2e.method}), outputs {'match' if e2e.outputs_match else 'DIFFER'}"
                 f"{compiled_text(e2e.compiled)}")
        inside = ", ".join(f"{r.family} {r.ratio:.3g}x" for r in e2e.in_model if r.ratio)
        if inside:
            rep.info(f"inside the model, each family's time against PyTorch's own calls: {inside}")
        alone = ", ".join(f"{r.family} {r.alone.value:.3g}x" for r in e2e.in_model if r.alone)
        if alone:
            rep.info(f"the model with each family routed alone, end to end: {alone}")
        if e2e.kept:
            k = e2e.kept
            rep.info(f"with {', '.join(k.left)} left to PyTorch, the model is {k.ratio.value:.3g}x "
                     f"[{k.ratio.low:.3g}-{k.ratio.high:.3g}] end to end ({', '.join(k.families)} in TileLang)")
    else:
        rep.done(f"swap-in failed: {e2e.error}")
    # Fused variants have no single torch function to route: say so plainly rather than
    # let a tuned, benchmarked kernel look as if it ran in the model.
    unrouted = [f for f in result.families if not kernels.get(f).functions and not kernels.get(f).fuses]
    if unrouted:
        e2e = dataclasses.replace(e2e, flags=e2e.flags + tuple(
            f"{f} was not swapped in: it has no torch function or pattern the router can take; its kernel "
            "was tuned and benchmarked only" for f in unrouted))
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


def upstream_health(ctx: Context, result: RunResult) -> RunResult:
    cfg, rep = ctx.cfg, ctx.rep
    rep.stage("Upstream health (git)")
    if not cfg.upstream.repo:
        health = upstream.not_measured("no --upstream repository was given")
    else:
        health = upstream.measure(cfg.upstream.repo, fork=cfg.upstream.fork, as_of=cfg.upstream.as_of,
                                  branch=cfg.upstream.branch)
    rep.done(f"maintenance score {health.maintenance_score}/10" if health.measured else "not measured")
    return dataclasses.replace(result, upstream=health)


def compare_previous(ctx: Context, result: RunResult) -> RunResult:
    cfg, rep = ctx.cfg, ctx.rep
    rep.stage("Comparing with the previous baseline")
    prev = baseline.previous(cfg.output.store, result.model.name, ctx.hw.platform)
    if prev is None:
        rep.done("no previous baseline for this model and platform")
        return result
    ref_id = prev.baseline.tag if prev.baseline else prev.run_id
    comp = baseline.compare(prev, result, threshold=cfg.output.regression_threshold, reference_id=ref_id,
                            candidate_id="this run")
    rep.done(f"against {ref_id}: {len(comp.regressions)} regressions"
             + ("" if comp.comparable else " (not comparable: timing policies differ)"))
    return dataclasses.replace(result, comparison=comp)


def decide(ctx: Context, result: RunResult) -> RunResult:
    ctx.rep.stage("Evaluating the checklist")
    verdict = checklist.evaluate(checklist.load(ctx.cfg.output.checklist), result)
    ctx.rep.done(verdict.decision)
    return dataclasses.replace(result, verdict=verdict)


def record(ctx: Context, result: RunResult) -> RunResult:
    """Record the baseline; with --push, send it to the shared remote too. A push that
    fails keeps the baseline recorded locally: the run goes on and says how to retry."""
    cfg, rep = ctx.cfg, ctx.rep
    rep.stage("Recording the baseline")
    store = cfg.output.store_remote or cfg.output.store
    note = ""
    if cfg.output.push:
        try:
            ref, sync = baseline.record_and_push(store, result)
            note = f", pushed to {sync.remote}"
        except baseline.PushError as exc:
            ref, note = exc.ref, " (not pushed)"
            ctx.push_error = exc
    else:
        ref = baseline.record(store, result)
    (ctx.run_dir / "baseline.json").write_text(json.dumps(to_dict(ref), indent=1))
    rep.done(f"{ref.tag} in {ref.store}{note}")
    # the trend is read after recording so that this run is its newest point
    return dataclasses.replace(result, baseline=ref, trend=baseline.trend(cfg.output.store, result.model.name,
                                                                          ctx.hw.platform))


# ---------------------------------------------------------------- `evaluate bench`


def bench_family(family: str, shapes: list[Shape], dtype: str, device: str, hw: Hardware, tilelang: str, *,
                 budget_s: float, policy: bench.TimingPolicy, store: Path | None,
                 rep: Reporter) -> list[tuple]:
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
        tk, kernel = tuning.tune(fam, shape, dtype, hw, budget_s=budget_s, tilelang_version=tilelang,
                                 lookup=lookup, save=save,
                                 on_candidate=lambda c, lbl=label: rep.update(f"{lbl}: tuning ({c.phase}, {c.status})"))
        verified, why = False, "no candidate worked"
        if kernel is not None:
            # `evaluate bench` verifies too: a number for a wrong kernel is never printed as a speed.
            rep.update(f"{label}: verifying")
            vr = verify.verify(fam, shape, dtype, tk.config, hw.target, device)
            verified = vr.passed
            why = "" if verified else "kernel failed verification: " + "; ".join(
                sorted({c.reason or "mismatch" for c in vr.cases if not c.passed}))[:200]
        rep.update(f"{label}: benchmarking" + _against_compile(policy.compile_mode, verified))
        ob: OpBench = bench.bench_op(fam, shape, dtype, kernel, device, source="standard", config=tk.config,
                                     policy=policy, roof=(hw.measured_tflops, hw.measured_gbps), error=why,
                                     verified=verified)
        out.append((tk, ob))
        rep.advance()
    rep.done()
    return out
