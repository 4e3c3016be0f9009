"""The only place that knows the stage order.

In: a `Config` and a `Reporter` (progress callbacks; the CLI's draws rich progress bars).
Out: a `RunOutcome` — the `RunResult`, the run folder and the report files.

Order: load model -> profile -> for each chosen family and shape: tune, verify, bench ->
portability (the rewritten kernels lowered for other accelerators) -> end-to-end swap-in
-> soak -> upstream health -> compare with the previous baseline -> verdict -> record the
baseline -> report. After every stage the partial `RunResult` is
written to `<run folder>/results.json`, so a run stopped by an error or Ctrl-C keeps
what it finished.
"""

from __future__ import annotations

import dataclasses
import json
import math
import platform
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from . import __version__, baseline, bench, checklist, hardware, kernels, models, profiling, report, swap, tuning, upstream, verify
from .config import Config
from .errors import BaselineError, ConfigError, EvaluatorError
from .results import Environment, Hardware, OpBench, Ratio, RunResult, Shape, TunedKernel, parse_shape, to_dict


class Reporter:
    """Progress callbacks; the default does nothing (tests, library use)."""

    def stage(self, name: str, total: int | None = None) -> None: ...

    def update(self, text: str) -> None:
        """Say what the current stage is doing now."""

    def advance(self, text: str = "") -> None:
        """One unit of the current stage's total is done."""

    def done(self, text: str = "") -> None: ...

    def info(self, text: str) -> None: ...


@dataclass(frozen=True)
class RunOutcome:
    result: RunResult
    run_dir: Path
    html: Path | None
    pdf: Path | None
    pdf_note: str = ""


def quiet_tilelang() -> None:
    """TileLang logs every compile at INFO (its logger is set at import); progress bars say it already."""
    import logging

    try:
        import tilelang  # noqa: F401
    except Exception:
        return
    logging.getLogger("tilelang").setLevel(logging.WARNING)


def tilelang_version() -> str:
    try:
        import tilelang
        return str(getattr(tilelang, "__version__", "unknown"))
    except Exception as exc:  # an unusable TileLang is recorded, the stages that need it fail later
        return f"unavailable ({type(exc).__name__})"


def environment(hw: Hardware) -> Environment:
    return Environment(evaluator=__version__, python=platform.python_version(),
                       os=f"{platform.system()} {platform.release()}", cpu=hardware._cpu_name(),
                       torch=torch.__version__, tilelang=tilelang_version(), hardware=hw)


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name.rsplit("/", 1)[-1]).strip("-")[:60] or "model"


def _save(run_dir: Path, result: RunResult) -> None:
    tmp = run_dir / "results.json.tmp"
    tmp.write_text(json.dumps(to_dict(result), indent=1))
    tmp.replace(run_dir / "results.json")  # atomic: an interrupted write never leaves half a file


def _profile_family(name: str) -> str:
    return getattr(kernels.get(name), "profile_family", name)


def _geomean_ratio(rows: list) -> "Ratio | float":
    """Geometric mean of op speedups, interval ends combined the same way."""
    vals = [r.value if isinstance(r, Ratio) else r for r in rows]
    if not all(isinstance(r, Ratio) for r in rows):
        return math.exp(sum(math.log(v) for v in vals) / len(vals))
    g = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    return Ratio(g(vals), g([r.low for r in rows]), g([r.high for r in rows]), min(r.rounds for r in rows))


def _shapes_for(family: kernels.KernelFamily, hot: "profiling.HotOps", cfg: Config) -> list[tuple[Shape, str]]:
    # Fused variants (gemm_gelu, layernorm_residual) have no aten op of their own; they
    # take the shapes profiled for the family they extend.
    op = next((o for o in hot.ops if o.family == _profile_family(family.name)), None)
    model_shapes = [parse_shape(s) for s in (op.shapes if op else ())][: cfg.profile.max_shapes]
    shapes = [(s, "model") for s in model_shapes]
    if not shapes or cfg.bench.sweep:
        shapes += [(tuple(s), "standard") for s in family.standard_shapes(cfg.device) if tuple(s) not in model_shapes]
    return shapes


def run(cfg: Config, reporter: Reporter | None = None) -> RunOutcome:
    rep = reporter or Reporter()
    quiet_tilelang()
    hw = hardware.measure_ceilings(hardware.detect(cfg.device), cfg.model.dtype)
    env = environment(hw)
    created = datetime.now(timezone.utc)

    rep.stage("Loading model")
    loaded = models.load_model(cfg.model.name, batch_size=cfg.model.batch_size, seq_len=cfg.model.seq_len,
                               dtype=cfg.model.dtype, device=cfg.device, seed=cfg.model.seed)
    label = getattr(cfg.model, "label", "") or cfg.model.name
    if label != loaded.spec.name:  # a stable --name: baseline ids survive moving the factory file
        loaded = dataclasses.replace(loaded, spec=dataclasses.replace(loaded.spec, name=label, origin=cfg.model.name))
    run_id = f"{slug(label)}-{created.strftime('%Y%m%d-%H%M%S')}"
    run_dir = cfg.output.reports / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    result = RunResult(run_id=run_id, created=created.isoformat(timespec="seconds"), model=loaded.spec,
                       environment=env, settings=cfg.settings_dict())
    _save(run_dir, result)
    rep.done(f"{loaded.spec.name}: {loaded.spec.parameters / 1e6:.1f}M parameters, batch {loaded.spec.batch_size}, "
             f"{loaded.spec.dtype} on {hw.name}")

    def stage(name: str, fn: Callable[[], RunResult], *, optional: bool = False) -> None:
        nonlocal result
        try:
            result = fn()
        except KeyboardInterrupt:
            _save(run_dir, result)
            raise
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}" if not isinstance(exc, EvaluatorError) else str(exc)
            if not optional:
                _save(run_dir, dataclasses.replace(result, stage_errors={**result.stage_errors, name: message[:500]}))
                raise
            # An optional stage's failure is data: the run goes on and its report says so.
            result = dataclasses.replace(result, stage_errors={**result.stage_errors, name: message[:500]})
            rep.info(f"[yellow]{name} failed: {message[:300]}[/]")
        _save(run_dir, result)

    # ---- profile
    def do_profile() -> RunResult:
        rep.stage("Profiling with torch.profiler")
        hot = profiling.hot_ops(loaded, top=cfg.profile.ops, families=cfg.profile.families, iters=cfg.profile.iters)
        rep.done(f"{len(hot.ops)} operator families; rewriting {', '.join(hot.selected) or 'none'}")
        return dataclasses.replace(result, hot_ops=hot)

    stage("profile", do_profile)

    # ---- tune, verify, bench: each kernel saved as it finishes (Ctrl-C keeps them)
    table = swap.KernelTable(cfg.model.dtype, hw.target,
                             build=lambda f, shape, conf: kernels.get(f).build(shape, cfg.model.dtype, conf, hw.target))

    def do_kernels() -> RunResult:
        nonlocal result
        lookup = save = None
        if cfg.tune.use_cache:
            lookup = lambda key: baseline.tuning_cache_lookup(cfg.output.store, key)  # noqa: E731
            save = lambda key, conf: baseline.tuning_cache_save(cfg.output.store, key, conf)  # noqa: E731
        work = [(kernels.get(f), s, src) for f in result.hot_ops.selected
                for s, src in _shapes_for(kernels.get(f), result.hot_ops, cfg)]
        rep.stage("Tuning, verifying and benchmarking TileLang kernels", total=len(work))
        for fam, shape, source in work:
            label = f"{fam.name} {'x'.join(map(str, shape))}"
            rep.update(f"{label}: tuning")
            tk, kernel = tuning.tune(fam, shape, cfg.model.dtype, hw, budget_s=cfg.tune.budget_s,
                                     tilelang_version=env.tilelang, lookup=lookup, save=save,
                                     fine_rounds=cfg.tune.fine_rounds, isolate=cfg.tune.isolate,
                                     on_candidate=lambda c, lbl=label: rep.update(
                                         f"{lbl}: tuning ({c.phase}, {c.status})"))
            if lookup is not None and not tk.cached:
                changed = baseline.tuning_cache_changes(cfg.output.store, tuning.cache_key(
                    fam.name, shape, cfg.model.dtype, hw, env.tilelang))
                if changed:
                    rep.info(f"{label}: re-tuned because the toolchain changed: "
                             + ", ".join(f"{f} {a} -> {b}" for f, a, b in changed))
            vr = None
            if kernel is None:
                reasons = "; ".join(sorted({c.status for c in tk.candidates})) or "no candidate"
                why = f"no candidate worked ({reasons})"
                ob = bench.bench_op(fam, shape, cfg.model.dtype, None, cfg.device, source=source, config=None,
                                    policy=cfg.bench.timing, error=why, verified=False)
                table.add(fam.name, shape, None, None, verified=False, why_not=why)
                rep.info(f"[red]{label}: no working TileLang kernel ({reasons})[/]")
            else:
                # Verify before timing: an unverified kernel is neither timed, averaged nor swapped in.
                rep.update(f"{label}: verifying")
                vr = verify.verify(fam, shape, cfg.model.dtype, tk.config, hw.target, cfg.device,
                                   seeds=cfg.bench.seeds)
                why = "" if vr.passed else "kernel failed verification: " + "; ".join(
                    sorted({c.reason or "mismatch" for c in vr.cases if not c.passed}))[:200]
                table.add(fam.name, shape, tk.config, kernel, verified=vr.passed, why_not=why)
                rep.update(f"{label}: benchmarking")
                ob = bench.bench_op(fam, shape, cfg.model.dtype, kernel, cfg.device, source=source, config=tk.config,
                                    policy=cfg.bench.timing, roof=(hw.measured_tflops, hw.measured_gbps),
                                    verified=vr.passed, error=why)
                rep.info(f"{label}: TileLang {ob.tilelang.median_ms:.4g} ms vs PyTorch {ob.torch.median_ms:.4g} ms "
                         f"-> {ob.speedup:.3g}x" if ob.tilelang and ob.speedup else f"[red]{label}: {ob.error}[/]")
            result = dataclasses.replace(result, tuned=result.tuned + (tk,),
                                         verify=result.verify + ((vr,) if vr else ()),
                                         op_bench=result.op_bench + (ob,))
            _save(run_dir, result)
            rep.advance()
        overheads = []
        for fname in result.hot_ops.selected:
            if not any(f == fname and e.kernel is not None for (f, _), e in table.entries().items()):
                continue
            fam = kernels.get(fname)
            tiny = tuple(fam.standard_shapes("cpu")[0])
            rep.update(f"{fname} {'x'.join(map(str, tiny))}: launch overhead")
            try:
                kernel = fam.build(tiny, cfg.model.dtype, fam.search_space(tiny, cfg.model.dtype, hw)[0], hw.target)
                overheads.append(bench.launch_overhead(fam, tiny, cfg.model.dtype, kernel, cfg.device))
            except Exception as exc:  # a measurement we could not make is noted, not fatal
                rep.info(f"[yellow]{fname}: launch overhead not measured ({type(exc).__name__}: {exc})[/]")
        for o in overheads:
            rep.info(f"{o.family} launch at {'x'.join(map(str, o.shape))}: TileLang {o.tilelang_us:.1f} µs "
                     f"vs PyTorch {o.torch_us:.1f} µs per call")
        rep.done()
        return dataclasses.replace(result, overhead=tuple(overheads))

    stage("kernels", do_kernels)

    # ---- portability: the rewritten kernels lowered for accelerators not on this machine
    # (never run there); skipped with --targets none or when nothing was rewritten.
    if result.tuned and cfg.portability.targets != ():
        def do_portability() -> RunResult:
            from . import portability

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

        stage("portability", do_portability, optional=True)

    # ---- end to end and soak: the model as its authors wrote it, calls routed at the operator
    router = swap.Router([kernels.get(f) for f in result.families], table)
    usable = any(e.kernel is not None and e.verified for e in table.entries().values())

    if cfg.bench.e2e and result.families:
        def do_e2e() -> RunResult:
            rep.stage("End-to-end: the model with its calls routed to TileLang")
            hot = result.hot_ops
            shares = {o.family: o.share for o in hot.ops}
            profiled = {(f, s): ms for o in hot.ops for f in result.families if _profile_family(f) == o.family
                        for s, ms in zip(o.shapes, o.shape_ms)}
            ratios = {}
            for f in result.families:
                rows = [b for b in result.op_bench if b.family == f and b.source == "model"]
                if rows and all(b.speedup for b in rows):  # a shape without a working kernel has no estimate
                    ratios[f] = _geomean_ratio([b.ratio or b.speedup for b in rows])
            total = sum(ms for (f, s), ms in profiled.items())
            share_of = {f: sum(ms for (g, _), ms in profiled.items() if g == f) / hot.total_ms if hot.total_ms else 0.0
                        for f in result.families}
            e2e = bench.end_to_end(loaded.module, loaded.inputs, cfg.device, loaded.spec.batch_size, router,
                                   dtype=cfg.model.dtype, profiled_ms=profiled,
                                   total_profiled_ms=hot.total_ms or total, op_ratios=ratios,
                                   shares={**shares, **share_of}, policy=cfg.bench.timing)
            if e2e.speedup:
                rep.done(f"{e2e.tilelang_calls} calls in TileLang, {e2e.fallback_calls} fell back; "
                         f"{e2e.speedup:.3g}x ({e2e.method}), outputs {'match' if e2e.outputs_match else 'DIFFER'}")
            else:
                rep.done(f"swap-in failed: {e2e.error}")
            # Fused variants have no single torch function to route: say so plainly rather
            # than let a tuned, benchmarked kernel look as if it ran in the model.
            unrouted = [f for f in result.families if not kernels.get(f).functions]
            if unrouted:
                e2e = dataclasses.replace(e2e, flags=e2e.flags + tuple(
                    f"{f} was not swapped in: a fused pattern is two torch calls, and the first has run before "
                    "the second is seen; its kernel was tuned and benchmarked only" for f in unrouted))
            for flag in e2e.flags:
                rep.info(f"[yellow]end to end: {flag}[/]")
            return dataclasses.replace(result, e2e=e2e)

        stage("e2e", do_e2e, optional=True)

    if cfg.bench.soak_s > 0 and usable:
        def do_soak() -> RunResult:
            rep.stage(f"Soak: {cfg.bench.soak_s:g} s of continuous inference")

            def step():
                with router:
                    return loaded.module(*loaded.inputs)

            with torch.inference_mode():
                s = bench.soak(step, cfg.device, cfg.bench.soak_s)
            rep.done(f"{s.iterations} iterations ({s.timer}), drift {100 * s.drift:+.1f}%, CV {100 * s.cv:.1f}%")
            return dataclasses.replace(result, soak=s)

        stage("soak", do_soak, optional=True)

    # ---- upstream
    def do_upstream() -> RunResult:
        rep.stage("Upstream health (git)")
        if not cfg.upstream.repo:
            health = upstream.not_measured("no --upstream repository was given")
        else:
            health = upstream.measure(cfg.upstream.repo, fork=cfg.upstream.fork, as_of=cfg.upstream.as_of,
                                      branch=cfg.upstream.branch)
        rep.done(f"maintenance score {health.maintenance_score}/10" if health.measured else "not measured")
        return dataclasses.replace(result, upstream=health)

    stage("upstream", do_upstream, optional=True)

    # ---- previous baseline, verdict, record, report
    def do_compare() -> RunResult:
        rep.stage("Comparing with the previous baseline")
        prev = baseline.previous(cfg.output.store, result.model.name, hw.platform)
        if prev is None:
            rep.done("no previous baseline for this model and platform")
            return result
        ref_id = prev.baseline.tag if prev.baseline else prev.run_id
        comp = baseline.compare(prev, result, threshold=cfg.output.regression_threshold, reference_id=ref_id,
                                candidate_id="this run")
        rep.done(f"against {ref_id}: {len(comp.regressions)} regressions"
                 + ("" if comp.comparable else " (not comparable: timing policies differ)"))
        return dataclasses.replace(result, comparison=comp)

    stage("compare", do_compare, optional=True)

    def do_verdict() -> RunResult:
        rep.stage("Evaluating the checklist")
        verdict = checklist.evaluate(checklist.load(cfg.output.checklist), result)
        rep.done(verdict.decision)
        return dataclasses.replace(result, verdict=verdict)

    stage("verdict", do_verdict)

    def do_record() -> RunResult:
        rep.stage("Recording the baseline")
        ref = baseline.record(cfg.output.store, result)
        (run_dir / "baseline.json").write_text(json.dumps(to_dict(ref), indent=1))
        rep.done(f"{ref.tag} in {ref.store}")
        # the trend is read after recording so that this run is its newest point
        return dataclasses.replace(result, baseline=ref, trend=baseline.trend(cfg.output.store, result.model.name,
                                                                              hw.platform))

    record_error: EvaluatorError | None = None
    try:
        stage("baseline", do_record)
    except Exception as exc:  # the report is still written; the error says how to record later
        record_error = exc if isinstance(exc, EvaluatorError) else BaselineError(f"{type(exc).__name__}: {exc}")

    rep.stage("Rendering the report")
    files = report.render(result, run_dir, lang=cfg.output.lang, pdf=cfg.output.pdf)
    rep.done(str(files.html.parent))
    if record_error is not None:
        raise BaselineError(f"the baseline was not recorded ({str(record_error).splitlines()[0][:200]}); the report "
                            f"is in {run_dir}; record it later with: evaluate baseline record {run_dir} --store PATH"
                            ) from record_error
    return RunOutcome(result=result, run_dir=run_dir, html=files.html, pdf=files.pdf, pdf_note=files.pdf_note)


def bench_family(family: str, shapes: list[Shape], dtype: str, device: str, *, budget_s: float = 60.0,
                 policy: bench.TimingPolicy | None = None, store: Path | None = None,
                 reporter: Reporter | None = None) -> list[tuple[TunedKernel, OpBench]]:
    """`evaluate bench`: tune and time one family alone on the given (or standard) shapes."""
    rep = reporter or Reporter()
    quiet_tilelang()
    fam = kernels.get(family)
    for shape in shapes:
        if len(shape) != len(fam.shape_names):
            raise ConfigError(f"--shape {'x'.join(map(str, shape))} does not fit {family}: it takes "
                              f"{len(fam.shape_names)} sizes, {'x'.join(fam.shape_names)}")
        # A trailing flag or padding (attention's causal, conv2d's pad) may be 0; sizes may not.
        zero_ok = fam.shape_names[-1] in ("causal", "pad")
        if min(shape[:-1] if zero_ok else shape) <= 0 or shape[-1] < 0:
            raise ConfigError(f"--shape {'x'.join(map(str, shape))}: sizes must be positive integers "
                              f"({'x'.join(fam.shape_names)})")
    hw = hardware.measure_ceilings(hardware.detect(device), dtype)
    shapes = shapes or [tuple(s) for s in fam.standard_shapes(device)]
    policy = policy or bench.TimingPolicy()
    out = []
    rep.stage(f"Benchmarking {family} on {hw.name}", total=len(shapes))
    lookup = save = None
    if store is not None:
        lookup = lambda key: baseline.tuning_cache_lookup(store, key)  # noqa: E731
        save = lambda key, conf: baseline.tuning_cache_save(store, key, conf)  # noqa: E731
    for shape in shapes:
        label = f"{family} {'x'.join(map(str, shape))}"
        rep.update(label)
        tk, kernel = tuning.tune(fam, shape, dtype, hw, budget_s=budget_s, tilelang_version=tilelang_version(),
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
        ob = bench.bench_op(fam, shape, dtype, kernel, device, source="standard", config=tk.config, policy=policy,
                            roof=(hw.measured_tflops, hw.measured_gbps), error=why, verified=verified)
        out.append((tk, ob))
        rep.advance()
    rep.done()
    return out
