"""The only place that knows the stage order.

In: a `Config` and a `Reporter` (progress callbacks; the CLI's draws rich progress bars).
Out: a `RunOutcome` — the `RunResult`, the run folder and the report files.

Order: load model -> profile -> for each chosen family and shape: tune, verify, bench ->
end-to-end swap-in -> soak -> upstream health -> compare with the previous baseline ->
verdict -> record the baseline -> report. After every stage the partial `RunResult` is
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

from . import __version__, baseline, bench, checklist, hardware, kernels, models, profiling, report, tuning, upstream, verify
from .config import Config
from .errors import ConfigError, EvaluatorError
from .results import Environment, Hardware, OpBench, RunResult, Shape, TunedKernel, VerifyResult, parse_shape, to_dict


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
    run_id = f"{slug(cfg.model.name)}-{created.strftime('%Y%m%d-%H%M%S')}"
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
        except EvaluatorError:
            _save(run_dir, result)
            raise
        except KeyboardInterrupt:
            _save(run_dir, result)
            raise
        except Exception as exc:
            if not optional:
                _save(run_dir, dataclasses.replace(result, stage_errors={**result.stage_errors,
                                                                         name: f"{type(exc).__name__}: {exc}"}))
                raise
            result = dataclasses.replace(result, stage_errors={**result.stage_errors,
                                                               name: f"{type(exc).__name__}: {exc}"[:500]})
            rep.info(f"[yellow]{name} failed: {type(exc).__name__}: {exc}[/]")
        _save(run_dir, result)

    # ---- profile
    def do_profile() -> RunResult:
        rep.stage("Profiling with torch.profiler")
        hot = profiling.hot_ops(loaded, top=cfg.profile.ops, families=cfg.profile.families, iters=cfg.profile.iters)
        rep.done(f"{len(hot.ops)} operator families; rewriting {', '.join(hot.selected) or 'none'}")
        return dataclasses.replace(result, hot_ops=hot)

    stage("profile", do_profile)

    # ---- tune, verify, bench
    compiled: dict[tuple[str, Shape], Callable] = {}

    def do_kernels() -> RunResult:
        lookup = save = None
        if cfg.tune.use_cache:
            lookup = lambda key: baseline.tuning_cache_lookup(cfg.output.store, key)  # noqa: E731
            save = lambda key, conf: baseline.tuning_cache_save(cfg.output.store, key, conf)  # noqa: E731
        tuned: list[TunedKernel] = []
        verified: list[VerifyResult] = []
        benches: list[OpBench] = []
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
            tuned.append(tk)
            if lookup is not None and not tk.cached:
                changed = baseline.tuning_cache_changes(cfg.output.store, tuning.cache_key(
                    fam.name, shape, cfg.model.dtype, hw, env.tilelang))
                if changed:
                    rep.info(f"{label}: re-tuned because the toolchain changed: "
                             + ", ".join(f"{f} {a} -> {b}" for f, a, b in changed))
            if kernel is None:
                reasons = "; ".join(sorted({c.status for c in tk.candidates}))
                benches.append(bench.bench_op(fam, shape, cfg.model.dtype, None, cfg.device, source=source,
                                              config=None, policy=cfg.bench.timing,
                                              error=f"no candidate worked ({reasons})"))
                rep.advance()
                rep.info(f"[red]{label}: no working TileLang kernel ({reasons})[/]")
                continue
            compiled[(fam.name, tuple(shape))] = kernel
            rep.update(f"{label}: verifying")
            verified.append(verify.verify(fam, shape, cfg.model.dtype, tk.config, hw.target, cfg.device,
                                          seeds=cfg.bench.seeds))
            rep.update(f"{label}: benchmarking")
            ob = bench.bench_op(fam, shape, cfg.model.dtype, kernel, cfg.device, source=source, config=tk.config,
                                policy=cfg.bench.timing, roof=(hw.measured_tflops, hw.measured_gbps))
            benches.append(ob)
            rep.advance()
            rep.info(f"{label}: TileLang {ob.tilelang.median_ms:.4g} ms vs PyTorch {ob.torch.median_ms:.4g} ms "
                     f"-> {ob.speedup:.3g}x" if ob.tilelang else f"{label}: {ob.error}")
        overheads = []
        for fname in result.hot_ops.selected:
            if not any(f == fname for f, _ in compiled):
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
        return dataclasses.replace(result, tuned=tuple(tuned), verify=tuple(verified), op_bench=tuple(benches),
                                   overhead=tuple(overheads))

    stage("kernels", do_kernels)

    # ---- end to end and soak
    swaps = []
    # Fused variants swap first: once plain gemm has replaced a Linear, the
    # Sequential(Linear, GELU) that gemm_gelu looks for is gone.
    for fname in sorted(result.families, key=lambda f: _profile_family(f) == f):
        fam = kernels.get(fname)
        swaps.append((fam, (lambda fn: lambda shape: compiled.get((fn, tuple(shape))))(fname)))

    if cfg.bench.e2e and compiled:
        def do_e2e() -> RunResult:
            rep.stage("End-to-end: model with TileLang kernels swapped in")
            shares = {o.family: o.share for o in result.hot_ops.ops}
            speedups = {}
            for f in result.families:
                rows = [b.speedup for b in result.op_bench if b.family == f and b.source == "model" and b.speedup]
                if rows:
                    speedups[f] = math.exp(sum(math.log(s) for s in rows) / len(rows))
            atol = 1e-3 if cfg.model.dtype == "float32" else 5e-2
            e2e = bench.end_to_end(loaded.module, loaded.inputs, cfg.device, loaded.spec.batch_size, swaps,
                                   coverage=sum(shares.get(f, 0.0) for f in {_profile_family(f) for f in result.families}),
                                   op_speedups=speedups, shares=shares, atol=atol, policy=cfg.bench.timing)
            rep.done(f"{e2e.replaced_modules} modules swapped; speedup "
                     f"{e2e.speedup:.3g}x, outputs {'match' if e2e.outputs_match else 'DIFFER'}"
                     if e2e.speedup else f"swap-in failed: {e2e.error}")
            return dataclasses.replace(result, e2e=e2e)

        stage("e2e", do_e2e, optional=True)

    if cfg.bench.soak_s > 0 and compiled:
        def do_soak() -> RunResult:
            import copy
            rep.stage(f"Soak: {cfg.bench.soak_s:g} s of continuous inference")
            model = copy.deepcopy(loaded.module)
            for fam, kernel_for in swaps:
                fam.swap_in(model, kernel_for)
            with torch.inference_mode():
                s = bench.soak(lambda: model(*loaded.inputs), cfg.device, cfg.bench.soak_s)
            rep.done(f"{s.iterations} iterations, drift {100 * s.drift:+.1f}%, CV {100 * s.cv:.1f}%")
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

    stage("upstream", do_upstream)

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

    stage("baseline", do_record)

    rep.stage("Rendering the report")
    files = report.render(result, run_dir, lang=cfg.output.lang, pdf=cfg.output.pdf)
    rep.done(str(files.html.parent))
    return RunOutcome(result=result, run_dir=run_dir, html=files.html, pdf=files.pdf, pdf_note=files.pdf_note)


def bench_family(family: str, shapes: list[Shape], dtype: str, device: str, *, budget_s: float = 60.0,
                 policy: bench.TimingPolicy | None = None, store: Path | None = None,
                 reporter: Reporter | None = None) -> list[tuple[TunedKernel, OpBench]]:
    """`evaluate bench`: tune and time one family alone on the given (or standard) shapes."""
    rep = reporter or Reporter()
    quiet_tilelang()
    fam = kernels.get(family)
    for shape in shapes:
        if len(shape) != len(fam.shape_names) or min(shape) < 0:
            raise ConfigError(f"--shape {'x'.join(map(str, shape))} does not fit {family}: it takes "
                              f"{len(fam.shape_names)} sizes, {'x'.join(fam.shape_names)}")
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
        ob = bench.bench_op(fam, shape, dtype, kernel, device, source="standard", config=tk.config, policy=policy,
                            roof=(hw.measured_tflops, hw.measured_gbps),
                            error="" if kernel else "no candidate worked")
        out.append((tk, ob))
        rep.advance()
    rep.done()
    return out
