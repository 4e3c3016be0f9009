"""`evaluate upgrade`: rehearse a TileLang upgrade on a model, in one command.

In: a checked `Config` (the model, the families and shapes, the tuning budget, the timing
policy, the store and reports folders) and a candidate interpreter (`--toolchain`,
already checked by `toolchain.check_interpreter`), and the regression threshold. Out: an
`UpgradeOutcome` — the `UpgradeResult` (written as upgrade.json in the run folder
`reports/runs/<model>-upgrade-<time>/`), its page (upgrade.html, or upgrade.<lang>.html)
and the pair of baselines it recorded.

The order: both toolchains' workers are started first, so their imports overlap the
rest; the model is loaded and profiled (this process, the current toolchain); the
candidate's worker must then be up — if it cannot start, nothing is tuned and the verdict
is BROKEN with its reason; each chosen family's shapes are tuned under the current
TileLang (the tuning cache serves configs found before); each tuned kernel is compared
(compare.py: built, verified and timed in both workers); the verdict is decided
(verdict.py); the pair is recorded as two baselines of the model and platform, the
candidate's first and the current one's last, so the newest baseline stays the current
toolchain's and a regular run still compares against the toolchain it runs on; the page
is rendered.

Each baseline is a `RunResult` holding what its toolchain measured: the hot operators, the
tuned configs (found under the current TileLang: the candidate built the same ones), its
side's verification and op benchmarks (TileLang against PyTorch, timed in its process in
the interleaved rounds), its interpreter's Python, torch and TileLang versions in the
environment (and so in the manifest), and under settings["toolchain"] its role and
interpreter. `evaluate baseline diff CURRENT CANDIDATE` compares them; a kernel the
candidate cannot build or verify has no op benchmark there and shows as gone.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .. import baseline, kernels, pipeline
from .. import config as config_mod
from ..config import Config
from ..context import Context, Reporter
from ..device import hardware
from ..errors import EvaluatorError
from ..profiling import stage as profiling
from ..report.html import render_upgrade
from ..results import (
    OpBench,
    RunResult,
    Toolchain,
    TunedKernel,
    UpgradeKernel,
    UpgradeResult,
    UpgradeSide,
    shape_str,
    to_dict,
)
from ..tuning import cache as tuning_cache
from ..tuning import search
from ..tuning import stage as tuning_stage
from .compare import PLACEMENT, Kernel, compare_kernel
from .toolchain import ToolchainWorker
from .verdict import decide

RESULT_NAME = "upgrade.json"


@dataclass(frozen=True)
class UpgradeOutcome:
    result: UpgradeResult
    run_dir: Path
    html: Path


def _tune_all(ctx: Context, result: RunResult) -> list[tuple[TunedKernel, str]]:
    """Every chosen family at the model's shapes, tuned under the current TileLang."""
    cfg, rep = ctx.cfg, ctx.rep
    work = [
        (kernels.get(f), shape, source)
        for f in result.hot_ops.selected
        for shape, source in tuning_stage.shapes_for(kernels.get(f), result.hot_ops, cfg)
    ]
    lookup = save = None
    if cfg.tune.use_cache:
        lookup = lambda key: tuning_cache.lookup(cfg.output.store, key)  # noqa: E731
        save = lambda key, conf: tuning_cache.save(cfg.output.store, key, conf)  # noqa: E731
    rep.stage(f"Tuning under the current TileLang {ctx.env.tilelang}", total=len(work))
    out = []
    for fam, shape, source in work:
        label = f"{fam.name} {shape_str(shape)}"
        rep.update(f"{label}: tuning")
        tk, _ = search.tune(
            fam,
            shape,
            cfg.model.dtype,
            ctx.hw,
            budget_s=cfg.tune.budget_s,
            tilelang_version=ctx.env.tilelang,
            lookup=lookup,
            save=save,
            fine_rounds=cfg.tune.fine_rounds,
            isolate=cfg.tune.isolate,
            devices=cfg.tune.devices,
            on_candidate=lambda c, lbl=label: rep.update(f"{lbl}: tuning ({c.phase}, {c.status})"),
        )
        out.append((tk, source))
        rep.advance()
    rep.done(f"{sum(1 for tk, _ in out if tk.config is not None)} of {len(out)} kernels have a working config")
    return out


def _untuned(tk: TunedKernel, source: str) -> UpgradeKernel:
    """A kernel no config of which works under the current toolchain: nothing to compare."""
    why = "no config works under the current toolchain: " + (
        "; ".join(sorted({c.status for c in tk.candidates})) or "no candidate"
    )
    return UpgradeKernel(
        family=tk.family,
        shape=tuple(tk.shape),
        dtype=tk.dtype,
        source=source,
        config={},
        current=UpgradeSide("compile_error", why),
        candidate=UpgradeSide("not_run", "not tried: the current toolchain has no working config"),
        status="current_fails",
        note=why,
    )


def _op_bench(k: UpgradeKernel, side: UpgradeSide) -> OpBench | None:
    """One side's op benchmark for its baseline: TileLang against PyTorch in its process."""
    if side.tilelang is None or side.torch is None:
        return None
    fam = kernels.get(k.family)
    return OpBench(
        family=k.family,
        shape=tuple(k.shape),
        dtype=k.dtype,
        source=k.source,
        tilelang=side.tilelang,
        torch=side.torch,
        speedup=side.torch.median_ms / side.tilelang.median_ms if side.tilelang.median_ms > 0 else None,
        flops=float(fam.flops(k.shape)),
        bytes=float(fam.bytes(k.shape, k.dtype)),
        config=dict(k.config),
        verified=True,
        ratio=side.speedup,
        flags=("unstable",) if side.tilelang.unstable or side.torch.unstable else (),
    )


def baseline_result(
    base: RunResult, tc: Toolchain, tuned: tuple[TunedKernel, ...], compared: list[UpgradeKernel], current_tl: str
) -> RunResult:
    """What one toolchain measured, as a RunResult its baseline records (see the module)."""
    role = tc.role
    env = dataclasses.replace(
        base.environment,
        python=tc.python_version or base.environment.python,
        torch=tc.torch or base.environment.torch,
        tilelang=tc.tilelang or base.environment.tilelang,
    )
    sides = [(k, getattr(k, role)) for k in compared]
    return dataclasses.replace(
        base,
        run_id=f"{base.run_id}-{role}",
        environment=env,
        tuned=tuned,
        verify=tuple(s.verify for _, s in sides if s.verify is not None),
        op_bench=tuple(b for b in (_op_bench(k, s) for k, s in sides) if b is not None),
        settings={
            **base.settings,
            "toolchain": {
                "role": role,
                "interpreter": tc.python,
                "rehearsal": base.run_id,
                "configs_tuned_with": f"TileLang {current_tl}",
                "timing": PLACEMENT,
            },
        },
        finished=("profile", "kernels"),
    )


def _record(cfg: Config, pair: list[RunResult]) -> tuple[dict[str, str], str]:
    """The pair recorded, the candidate's first: ({role: id}, "") or what stopped it."""
    store = cfg.output.store_remote or cfg.output.store
    ids: dict[str, str] = {}
    try:
        for r in pair:
            ref = baseline.record(store, r)
            ids[r.settings["toolchain"]["role"]] = ref.tag
    except EvaluatorError as exc:
        return ids, f"not recorded: {str(exc).splitlines()[0][:300]}"
    return ids, ""


def rehearse(cfg: Config, toolchain: str, reporter: Reporter | None = None) -> UpgradeOutcome:
    """The whole rehearsal (see the module's docstring)."""
    rep = reporter or Reporter()
    t_start = time.perf_counter()
    pipeline.quiet_tilelang()
    hardware.pin_threads(cfg.device)
    hw = hardware.measure_ceilings(hardware.detect(cfg.device), cfg.model.dtype)
    env = pipeline.environment(hw)
    created = datetime.now(timezone.utc)
    loaded = pipeline.load(cfg, rep, hw)
    run_id = f"{pipeline.slug(loaded.spec.name)}-upgrade-{created.strftime('%Y%m%d-%H%M%S')}"
    run_dir = cfg.output.reports / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    rep.folder(run_dir)
    (run_dir / "config.json").write_text(config_mod.to_json(cfg))
    current = ToolchainWorker("current", None, run_dir)
    candidate = ToolchainWorker("candidate", toolchain, run_dir)
    current.start()
    candidate.start()  # both import while the model is profiled and tuned
    base = RunResult(
        run_id=run_id,
        created=created.isoformat(timespec="seconds"),
        model=loaded.spec,
        environment=env,
        settings=cfg.settings_dict(),
    )
    ctx = Context(cfg, rep, hw, env, loaded, run_dir)
    compared: list[UpgradeKernel] = []
    tuned: list[tuple[TunedKernel, str]] = []
    try:
        base = profiling.profile(ctx, base)
        rep.stage(f"Starting the candidate toolchain ({toolchain})")
        if candidate.ready():
            rep.done(f"TileLang {candidate.versions.get('tilelang')}, torch {candidate.versions.get('torch')}")
            tuned = _tune_all(ctx, base)
            current.ready()
            rep.stage(
                f"Each kernel under TileLang {env.tilelang} and {candidate.versions.get('tilelang')}",
                total=len(tuned),
            )
            for tk, source in tuned:
                rep.update(f"{tk.family} {shape_str(tk.shape)}: building, verifying, timing in both")
                if tk.config is None:
                    compared.append(_untuned(tk, source))
                else:
                    k = Kernel(tk.family, tuple(tk.shape), tk.dtype, dict(tk.config), source)
                    compared.append(
                        compare_kernel(
                            k,
                            current,
                            candidate,
                            target=hw.target,
                            device=cfg.device,
                            seeds=cfg.bench.seeds,
                            policy=cfg.bench.timing,
                            threshold=cfg.output.regression_threshold,
                        )
                    )
                last = compared[-1]
                rep.info(_line(last))
                rep.advance()
            rep.done()
        else:
            rep.done(f"[red]{candidate.start_error}[/]")
    finally:
        current.stop()
        candidate.stop()
    cur_info, cand_info = current.info(), candidate.info()
    verdict = decide(cand_info, compared)
    result = UpgradeResult(
        run_id=run_id,
        created=base.created,
        model=loaded.spec,
        hardware=hw,
        current=cur_info if cur_info.tilelang else dataclasses.replace(cur_info, tilelang=env.tilelang),
        candidate=cand_info,
        kernels=tuple(compared),
        verdict=verdict,
        threshold=cfg.output.regression_threshold,
        timing=cfg.bench.timing.describe(cfg.device),
        placement=PLACEMENT,
        families=base.hot_ops.selected if base.hot_ops else (),
    )
    if cand_info.error:
        ids, why = {}, "not recorded: the candidate toolchain did not start"
    else:
        rep.stage("Recording the pair of baselines")
        tuned_all = tuple(tk for tk, _ in tuned)
        pair = [baseline_result(base, tc, tuned_all, compared, env.tilelang) for tc in (cand_info, result.current)]
        ids, why = _record(cfg, pair)
        rep.done(", ".join(f"{role} {bid}" for role, bid in ids.items()) or why)
    result = dataclasses.replace(result, baselines=ids, baseline_error=why, seconds=time.perf_counter() - t_start)
    (run_dir / RESULT_NAME).write_text(json.dumps(to_dict(result), indent=1))
    html = render_upgrade(result, run_dir, lang=cfg.output.lang)
    return UpgradeOutcome(result=result, run_dir=run_dir, html=html)


def _line(k: UpgradeKernel) -> str:
    """One kernel's outcome as a progress line."""
    label = f"{k.family} {shape_str(k.shape)}"
    if k.speed is not None and k.current.tilelang and k.candidate.tilelang:
        return (
            f"{label}: {k.current.tilelang.median_ms:.4g} ms -> {k.candidate.tilelang.median_ms:.4g} ms, "
            f"{k.speed.value:.3g}x [{k.speed.low:.3g}-{k.speed.high:.3g}]: {k.status}"
        )
    colour = "red" if k.status in ("broken", "wrong") else "yellow"
    return f"[{colour}]{label}: {k.status}: {k.note}[/]"
