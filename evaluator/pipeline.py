"""The only place that knows the stage order: one table of stages, one wrapper.

In: a `Config` and a `Reporter` (progress callbacks; the CLI's draws rich progress bars),
or a run folder to resume. Out: a `RunOutcome` — the `RunResult`, the run folder and the
report files.

`STAGES` lists the stages in order: profile -> kernels (tune, verify, bench each model
shape) -> portability -> end to end -> soak -> upstream -> compare -> verdict ->
baseline; then the report. `run_stage` runs one: it times it, records it as finished,
writes `<run folder>/results.json`, and turns an optional stage's error into data. The
run folder also keeps `config.json`, so `evaluate --resume RUN_DIR` rebuilds the same
config and continues after the last finished stage (a stopped kernels stage resumes
after its last finished kernel). Each stage function lives in the folder of its step
(`profiling/stage.py`, `tuning/stage.py`, `measuring/stage.py`, ...); what they share is
`context.Context`.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import platform
import re
import shlex
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from . import __version__, kernels, models, report
from . import config as config_mod
from .baseline import stage as recording
from .checklist import stage as deciding
from .config import Config
from .context import Context, Reporter
from .device import hardware
from .errors import BaselineError, ConfigError, EvaluatorError
from .measuring import bench
from .measuring import stage as measuring
from .portability import stage as porting
from .profiling import stage as profiling
from .results import Environment, Hardware, OpBench, RunResult, Shape, TunedKernel, from_dict
from .tuning import stage as tuning
from .upstream import stage as upstream

__all__ = ["Reporter", "RunOutcome", "STAGES", "Stage", "run", "bench_family"]


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


MODEL_LIBRARIES = ("transformers", "timm", "torchvision", "triton")


def library_versions() -> dict[str, str]:
    """The installed model libraries' versions, from their package metadata (nothing imported)."""
    out = {}
    for name in MODEL_LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def environment(hw: Hardware) -> Environment:
    return Environment(
        evaluator=__version__,
        python=platform.python_version(),
        os=f"{platform.system()} {platform.release()}",
        cpu=hardware._cpu_name(),
        torch=torch.__version__,
        tilelang=tilelang_version(),
        hardware=hw,
        libraries=library_versions(),
    )


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name.rsplit("/", 1)[-1]).strip("-")[:60] or "model"


@dataclass(frozen=True)
class Stage:
    """One step of the evaluation: `run(context, result) -> result`. An optional stage's
    failure is recorded as data and the run goes on; `needed` skips a stage that has
    nothing to do in this run (no e2e with --no-e2e, no soak of zero seconds...)."""

    name: str
    run: Callable[[Context, RunResult], RunResult]
    optional: bool = False
    needed: Callable[[Context, RunResult], bool] = lambda ctx, r: True


def _usable(ctx: Context, r: RunResult) -> bool:
    return any(b.verified and b.tilelang is not None for b in r.op_bench)


STAGES: tuple[Stage, ...] = (
    Stage("profile", profiling.profile),
    Stage("kernels", tuning.tune_verify_bench),
    Stage(
        "portability",
        porting.portability_check,
        optional=True,
        needed=lambda ctx, r: bool(r.tuned) and ctx.cfg.portability.targets != (),
    ),
    Stage("e2e", measuring.end_to_end, optional=True, needed=lambda ctx, r: ctx.cfg.bench.e2e and bool(r.families)),
    Stage("soak", measuring.soak, optional=True, needed=lambda ctx, r: ctx.cfg.bench.soak_s > 0 and _usable(ctx, r)),
    Stage("upstream", upstream.upstream_health, optional=True),
    Stage("compare", recording.compare_previous, optional=True),
    Stage("verdict", deciding.decide),
    Stage("baseline", recording.record),
)


def run_stage(ctx: Context, stage: Stage, result: RunResult) -> RunResult:
    """Run one stage: time it, save the result after it, mark it finished. An optional
    stage's error becomes data; a required one's is saved and raised."""
    t0 = time.perf_counter()
    try:
        result = stage.run(ctx, result)
    except KeyboardInterrupt:
        raise  # what the stage finished is saved already (the kernels stage saves each kernel)
    except Exception as exc:
        message = str(exc) if isinstance(exc, EvaluatorError) else f"{type(exc).__name__}: {exc}"
        # Keep the stage's own partial progress (the newest save), with the error added.
        base = ctx.latest if ctx.latest is not None else result
        result = dataclasses.replace(base, stage_errors={**base.stage_errors, stage.name: message[:500]})
        if not stage.optional:
            ctx.save(result)
            raise
        ctx.rep.info(f"[yellow]{stage.name} failed: {message[:300]}[/]")
    result = dataclasses.replace(
        result,
        finished=result.finished + (stage.name,),
        stage_seconds={**result.stage_seconds, stage.name: time.perf_counter() - t0},
    )
    ctx.save(result)
    return result


def load(cfg: Config, rep: Reporter, hw: Hardware):
    """The model the config names, under its --name (`evaluate` and `evaluate upgrade` alike)."""
    if cfg.tune.devices:
        # The first of --gpus is where everything but the concurrent candidate timing
        # runs (verify, bench, end to end, the final re-timing): one device for every number.
        torch.cuda.set_device(cfg.tune.devices[0])
    rep.stage("Loading model")
    loaded = models.load_model(
        cfg.model.name,
        batch_size=cfg.model.batch_size,
        seq_len=cfg.model.seq_len,
        dtype=cfg.model.dtype,
        device=cfg.device,
        seed=cfg.model.seed,
        lengths=cfg.model.lengths,
        layout=cfg.model.layout,
    )
    label = cfg.model.label or cfg.model.name
    if label != loaded.spec.name:  # a stable --name: baseline ids survive moving the factory file
        loaded = dataclasses.replace(loaded, spec=dataclasses.replace(loaded.spec, name=label, origin=cfg.model.name))
    rep.done(
        f"{loaded.spec.name}: {loaded.spec.parameters / 1e6:.1f}M parameters, batch {loaded.spec.batch_size}, "
        f"{loaded.spec.dtype}{', channels_last' if loaded.spec.layout == 'channels-last' else ''} on {hw.name}"
    )
    return loaded


def run(cfg: Config, reporter: Reporter | None = None) -> RunOutcome:
    """A new evaluation: a run folder, then every stage in order, then the report."""
    rep = reporter or Reporter()
    quiet_tilelang()
    hardware.pin_threads(cfg.device)
    hw = hardware.measure_ceilings(hardware.detect(cfg.device, cfg.target), cfg.model.dtype)
    env = environment(hw)
    created = datetime.now(timezone.utc)
    loaded = load(cfg, rep, hw)
    run_id = f"{slug(loaded.spec.name)}-{created.strftime('%Y%m%d-%H%M%S')}"
    run_dir = cfg.output.reports / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(config_mod.to_json(cfg))
    rep.folder(run_dir)
    result = RunResult(
        run_id=run_id,
        created=created.isoformat(timespec="seconds"),
        model=loaded.spec,
        environment=env,
        settings=cfg.settings_dict(),
    )
    ctx = Context(cfg, rep, hw, env, loaded, run_dir)
    ctx.save(result)
    return _finish(ctx, result)


def resume(run_dir: Path, reporter: Reporter | None = None) -> RunOutcome:
    """Continue a stopped run in its own folder, with its own config, after its last
    finished stage. Finished stages are not rerun; their results are kept as they were."""
    rep = reporter or Reporter()
    run_dir = Path(run_dir)
    results, saved_cfg = run_dir / "results.json", run_dir / "config.json"
    if not results.is_file() or not saved_cfg.is_file():
        raise ConfigError(
            f"--resume {run_dir}: not a run folder (it needs the results.json and config.json "
            "a run writes there); give reports/runs/<run id>"
        )
    cfg = config_mod.from_json(saved_cfg.read_text())
    try:
        result = from_dict(RunResult, json.loads(results.read_text()))
    except Exception as exc:  # a damaged file is the user's to know about, in one line
        raise ConfigError(
            f"--resume {run_dir}: results.json does not load ({type(exc).__name__}); start a new run"
        ) from exc
    if result.baseline is not None:
        raise ConfigError(
            f"--resume {run_dir}: this run finished (baseline {result.baseline.tag}); re-render it with "
            f"evaluate report --baseline {shlex.quote(result.baseline.tag)} "
            f"--store {shlex.quote(str(result.baseline.store))}"
        )
    quiet_tilelang()
    hardware.pin_threads(cfg.device)
    hw = hardware.measure_ceilings(hardware.detect(cfg.device, cfg.target), cfg.model.dtype)
    if hw.name != result.environment.hardware.name:
        raise ConfigError(
            f"--resume {run_dir}: the run started on {result.environment.hardware.name}, "
            f"this machine is {hw.name}; resume it there or start a new run"
        )
    loaded = load(cfg, rep, hw)
    rep.info(f"resuming {result.run_id} after: {', '.join(result.finished) or 'nothing'}")
    return _finish(Context(cfg, rep, hw, result.environment, loaded, run_dir), result)


def _pull(ctx: Context) -> None:
    """A shared store is pulled first (best effort): the tuning cache and the previous
    baseline may come from other hosts. Offline, the clone is read as it is."""
    if not ctx.cfg.output.store_remote:
        return
    from . import baseline

    try:
        sync = baseline.pull(ctx.cfg.output.store_remote)
        ctx.rep.info(f"baseline store {sync.remote}: {len(sync.pulled)} new baseline(s) from other hosts")
    except BaselineError as exc:
        ctx.rep.info(f"[yellow]{str(exc)[:300]}[/]")


def _finish(ctx: Context, result: RunResult) -> RunOutcome:
    _pull(ctx)
    record_error: Exception | None = None
    for stage in STAGES:
        if stage.name in result.finished or not stage.needed(ctx, result):
            continue
        if stage.name == "baseline":
            try:
                result = run_stage(ctx, stage, result)
            except Exception as exc:  # the report is still written; the error says how to record later
                record_error = exc
            continue
        result = run_stage(ctx, stage, result)
    ctx.rep.stage("Rendering the report")
    files = report.render(result, ctx.run_dir, lang=ctx.cfg.output.lang, pdf=ctx.cfg.output.pdf)
    ctx.rep.done(str(files.html.parent))
    if record_error is not None:
        why = str(record_error).splitlines()[0][:200] if str(record_error) else type(record_error).__name__
        raise BaselineError(
            f"the baseline was not recorded ({why}); the report is in {ctx.run_dir}; record it "
            f"later with: evaluate baseline record {ctx.run_dir} --store "
            f"{ctx.cfg.output.store_remote or ctx.cfg.output.store}"
        ) from record_error
    if ctx.push_error is not None:
        raise BaselineError(
            f"{str(ctx.push_error).splitlines()[0]}; the report is in {ctx.run_dir}"
        ) from ctx.push_error
    return RunOutcome(result=result, run_dir=ctx.run_dir, html=files.html, pdf=files.pdf, pdf_note=files.pdf_note)


def fit_shape(fam: kernels.KernelFamily, shape: Shape) -> Shape:
    """A --shape given on the command line as the family's checked shape (conv2d fills in
    an omitted layout flag), or ConfigError saying what the family takes."""
    text, names = "x".join(map(str, shape)), fam.shape_names
    try:
        return fam.check(shape)
    except kernels.KernelError as exc:
        least = len(names) - fam.optional_dims
        if not least <= len(shape) <= len(names):
            more = f" (or {len(names)}, adding {'x'.join(names[least:])})" if fam.optional_dims else ""
            raise ConfigError(
                f"--shape {text} does not fit {fam.name}: it takes {least} sizes, {'x'.join(names[:least])}{more}"
            ) from None
        raise ConfigError(f"--shape {text}: {str(exc).splitlines()[0]}") from None


def bench_family(
    family: str,
    shapes: list[Shape],
    dtype: str,
    device: str,
    *,
    budget_s: float = 60.0,
    policy: bench.TimingPolicy | None = None,
    store: Path | None = None,
    reporter: Reporter | None = None,
    target: str | None = None,
) -> list[tuple[TunedKernel, OpBench]]:
    """`evaluate bench`: tune, verify and time one family alone on the given (or standard) shapes."""
    rep = reporter or Reporter()
    quiet_tilelang()
    fam = kernels.get(family)
    shapes = [fit_shape(fam, shape) for shape in shapes]
    hardware.pin_threads(device)
    hw = hardware.measure_ceilings(hardware.detect(device, target), dtype)
    return tuning.bench_shapes(
        family,
        shapes,
        dtype,
        device,
        hw,
        tilelang_version(),
        budget_s=budget_s,
        policy=policy or bench.TimingPolicy(),
        store=store,
        rep=rep,
    )
