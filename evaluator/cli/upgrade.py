"""`evaluate upgrade --model M --toolchain PYTHON`: rehearse a TileLang upgrade on a model.

In: the model and the options of the main command that a rehearsal reads (the model's
shape and dtype, the families, the tuning budget, the timing repetitions, the folders,
the language, the regression threshold), the candidate interpreter, and `--fail-on`
(never, regressions, broken). Out: progress on the terminal, one line per kernel and the
verdict with its reasons, the run folder and upgrade.html; exit 0, 1 when `--fail-on`
rejects the verdict, 2 for bad input (a --toolchain that is not an executable Python, or
whose torch or TileLang does not import: one line, before any profiling) or any other
error, through the one error handler.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer

from ..config import DEFAULTS
from .errors import RunFolder, reported_errors
from .logs import adopt, settle, third_party_output
from .options import DTYPE_HELP, REPORTS_HELP, RUN_STORE_HELP
from .output import RichReporter, console, err_console, progress


def upgrade_command(
    model: str = typer.Option(..., "--model", "-m", help="The model, as the main command takes it."),
    toolchain: str = typer.Option(
        ...,
        "--toolchain",
        help="A Python interpreter with the candidate TileLang installed (a vendor fork, the next "
        "release), e.g. /opt/tl-next/bin/python.",
    ),
    name: Optional[str] = typer.Option(None, "--name", help="The model's name in baseline ids and the page."),
    device: str = typer.Option(DEFAULTS["device"], help="auto, cpu or cuda."),
    batch_size: Optional[int] = typer.Option(None, help="Override the model's batch size."),
    seq_len: Optional[int] = typer.Option(None, help="Override the sequence length (image side for ResNet)."),
    dtype: Optional[str] = typer.Option(None, help=DTYPE_HELP),
    ops: int = typer.Option(DEFAULTS["ops"], help="How many hot operator families to rewrite."),
    families: Optional[str] = typer.Option(None, help="Comma-separated families to rewrite (overrides --ops)."),
    max_shapes: Optional[int] = typer.Option(None, help="At most this many distinct shapes per family."),
    budget: float = typer.Option(DEFAULTS["budget"], help="Tuning budget per shape under the current TileLang (s)."),
    no_cache: bool = typer.Option(DEFAULTS["no_cache"], "--no-cache", help="Re-tune even when the cache has a config."),
    reps: int = typer.Option(DEFAULTS["reps"], help="Timed rounds per kernel (each samples both toolchains)."),
    reports: Optional[str] = typer.Option(None, help=REPORTS_HELP),
    store: Optional[str] = typer.Option(None, help=RUN_STORE_HELP),
    lang: str = typer.Option(DEFAULTS["lang"], help="Page language: en or zh."),
    regression_threshold: float = typer.Option(
        DEFAULTS["regression_threshold"], help="Smallest relative slow-down under the candidate that counts."
    ),
    fail_on: str = typer.Option("never", help="Exit 1 on this verdict or worse: never, regressions or broken."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show other tools' output on the terminal."),
) -> None:
    """Rehearse a TileLang upgrade: each rewritten kernel built, verified and timed under the
    current TileLang and the one --toolchain brings, side by side, with a verdict."""
    folder = RunFolder()
    log = None
    try:
        with reported_errors(run_dir=folder.find, scratch=lambda: folder.reports):
            from .. import config as config_mod
            from ..upgrade import rehearsal, toolchain as tc, verdict

            verdict.check_fail_on(fail_on)
            python = tc.check_interpreter(toolchain)
            cfg = config_mod.build(
                model=model,
                label=name,
                device=device,
                batch_size=batch_size,
                seq_len=seq_len,
                dtype=dtype,
                ops=ops,
                families=families,
                max_shapes=max_shapes,
                budget=budget,
                no_cache=no_cache,
                reps=reps,
                reports=reports,
                store=store,
                lang=lang,
                regression_threshold=regression_threshold,
                e2e=False,
                soak_seconds=0,
                sweep=False,
                pdf=False,
            )
            found = tc.probe(python)  # a TileLang that does not import: one line, exit 2, nothing run
            err_console.print(
                f"Candidate toolchain {python}: Python {found['python']}, torch {found['torch']}, "
                f"TileLang {found['tilelang']}",
                markup=False,
                highlight=False,
            )
            folder.watch(cfg)
            start_log = cfg.output.reports / "runs" / f"upgrade-{datetime.now():%Y%m%d-%H%M%S}-{os.getpid()}.log"
            with progress(console) as p, third_party_output(start_log, verbose) as log:

                def into_folder(run_dir: Path) -> None:
                    nonlocal log
                    log = adopt(log, run_dir)

                outcome = rehearsal.rehearse(cfg, python, RichReporter(p, on_folder=into_folder))
            _print(outcome, settle(log, outcome.run_dir))
            code = verdict.exit_code(outcome.result.verdict, fail_on)
            if code:
                raise typer.Exit(code)
    finally:
        settle(log, folder.find())


def _print(outcome, log) -> None:
    from rich.table import Table

    from ..results import shape_str

    r = outcome.result
    table = Table(title=f"TileLang {r.current.tilelang or '?'} (current) -> {r.candidate.tilelang or '?'} (candidate)")
    for col in ("kernel", "current", "candidate", "speed (cur/cand)", "PyTorch control", "outcome"):
        table.add_column(col, justify="right" if col.startswith(("speed", "PyTorch")) else "left")
    for k in r.kernels:

        def side(s) -> str:
            return f"{s.status} {s.tilelang.median_ms:.4g} ms" if s.tilelang else s.status

        table.add_row(
            f"{k.family} {shape_str(k.shape)}",
            side(k.current),
            side(k.candidate),
            f"{k.speed.value:.3g}x [{k.speed.low:.3g}-{k.speed.high:.3g}]" if k.speed else "",
            f"{k.control.value:.3g}x" if k.control else "",
            k.status,
        )
    if r.kernels:
        console.print(table)
    colour = {"SAFE": "green", "REGRESSIONS": "yellow", "BROKEN": "red"}.get(r.verdict.decision, "magenta")
    console.print(f"\nUpgrade verdict: [bold {colour}]{r.verdict.decision}[/]")
    for why in r.verdict.reasons:
        console.print(f"  {why}", markup=False, highlight=False)
    console.print(f"\nRun folder: {outcome.run_dir}", highlight=False)
    console.print(f"Report: {outcome.html}", highlight=False)
    if r.baselines:
        pair = ", ".join(f"{role} {bid}" for role, bid in r.baselines.items())
        console.print(f"Baselines: {pair}", highlight=False)
    elif r.baseline_error:
        console.print(f"Baselines: {r.baseline_error}", highlight=False)
    if log is not None:
        console.print(f"Other tools' output (TileLang, warnings): {log}; -v shows it here", highlight=False)
