"""`evaluate --model NAME`: the whole evaluation, and `evaluate --resume RUN_DIR`.

In: the main command's options, which are `config.build`'s keywords by name (--name is
its `label`; their defaults are config.DEFAULTS). Out: the pipeline's progress, the
summary tables and the run folder on the terminal; exit 0, 1 when `--fail-on` rejects the
verdict, 2 or 130 through the one error handler (errors.py). A resumed run continues with
its own saved config; its `--fail-on` gate is the one given now, else the one it ran with.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import typer

from ..config import DEFAULTS
from .errors import RunFolder, reported_errors, say_error
from .logs import adopt, settle, third_party_output
from .options import (
    COMPILE_HELP,
    DTYPE_HELP,
    FINE_ROUNDS_HELP,
    LAYOUT_HELP,
    LENGTHS_HELP,
    REPORTS_HELP,
    RUN_STORE_HELP,
    SOAK_HELP,
    TARGET_HELP,
    TARGETS_HELP,
)
from .output import RichReporter, console, print_summary, progress

# Options of the main command that are not config.build keywords.
NOT_BUILD_OPTIONS = ("resume", "verbose")
# The options that go with --resume: every other one is the saved run's.
RESUME_OPTIONS = ("resume", "verbose", "fail_on")


def main_command(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(
        None,
        "--model",
        "-m",
        help="Zoo name (bert-tiny, bert-base, resnet-tiny, "
        "resnet50, llama-tiny, llama), hf:Class, timm:name, torchvision:name, "
        "pkg.module:factory or path/file.py:factory.",
    ),
    name: Optional[str] = typer.Option(
        None,
        "--name",
        help="The model's name in baseline ids and reports "
        "(default: the zoo name, pkg.module:factory, or file:factory without "
        "the file's folder).",
    ),
    device: str = typer.Option(DEFAULTS["device"], help="auto, cpu or cuda."),
    target: Optional[str] = typer.Option(None, "--target", help=TARGET_HELP),
    batch_size: Optional[int] = typer.Option(None, help="Override the model's batch size."),
    seq_len: Optional[int] = typer.Option(None, help="Override the sequence length (image side for ResNet)."),
    lengths: Optional[str] = typer.Option(None, "--lengths", help=LENGTHS_HELP),
    layout: str = typer.Option(DEFAULTS["layout"], "--layout", help=LAYOUT_HELP),
    dtype: Optional[str] = typer.Option(None, help=DTYPE_HELP),
    ops: int = typer.Option(DEFAULTS["ops"], help="How many hot operator families to rewrite."),
    families: Optional[str] = typer.Option(
        None, help="Comma-separated families to rewrite (overrides --ops); `evaluate families` lists them."
    ),
    max_shapes: Optional[int] = typer.Option(
        None, help="At most this many distinct shapes per family (default: no cap; --shape-share decides)."
    ),
    shape_share: float = typer.Option(
        DEFAULTS["shape_share"],
        help="Per family, tune its shapes hottest first until they hold this share of its profiled time.",
    ),
    fuse: bool = typer.Option(
        DEFAULTS["fuse"],
        "--fuse/--no-fuse",
        help="Also rewrite the chosen families' "
        "fused variants (linear+GELU, add+LayerNorm, ...) where the model has the pattern.",
    ),
    profile_iters: int = typer.Option(DEFAULTS["profile_iters"], help="Profiled forward passes (after one warm-up)."),
    budget: float = typer.Option(DEFAULTS["budget"], help="Tuning budget per shape, in seconds."),
    no_cache: bool = typer.Option(
        DEFAULTS["no_cache"], "--no-cache", help="Re-tune even when the tuning cache has a config."
    ),
    fine_rounds: Optional[int] = typer.Option(None, help=FINE_ROUNDS_HELP),
    isolate: str = typer.Option(
        DEFAULTS["isolate"], help="Time candidates in a worker process: auto (on CUDA), on or off."
    ),
    gpus: Optional[str] = typer.Option(
        None,
        "--gpus",
        help="Time tuning candidates on several GPUs "
        "at once, one worker each: all, a count N, or indices 0,2 (1, for GPU 1 "
        "alone); the best configs are re-timed on the first. Default: one GPU.",
    ),
    reps: int = typer.Option(DEFAULTS["reps"], help="Timed repetitions per measurement."),
    compile_mode: Optional[str] = typer.Option(None, "--compile-mode", help=COMPILE_HELP),
    sweep: bool = typer.Option(DEFAULTS["sweep"], help="Also benchmark each family's standard shapes."),
    e2e: bool = typer.Option(DEFAULTS["e2e"], "--e2e/--no-e2e", help="Measure the model with the kernels swapped in."),
    soak_seconds: Optional[float] = typer.Option(None, help=SOAK_HELP),
    upstream: Optional[str] = typer.Option(None, help="Local clone (or URL) of upstream TileLang for health metrics."),
    fork: Optional[str] = typer.Option(None, help="A vendor fork to compare with upstream."),
    as_of: Optional[str] = typer.Option(None, help="Compute upstream metrics as of this date (YYYY-MM-DD)."),
    branch: Optional[str] = typer.Option(None, help="Upstream branch, where the default is not obvious."),
    checklist: Optional[str] = typer.Option(
        None, help="Checklist YAML, or a name: ./checklists/NAME.yaml, else a shipped one (default, production)."
    ),
    # A string, not a Path: Path('') is '.', and --reports '' must be refused, not run in the current folder.
    reports: Optional[str] = typer.Option(None, help=REPORTS_HELP),
    store: Optional[str] = typer.Option(None, help=RUN_STORE_HELP),
    push: bool = typer.Option(
        DEFAULTS["push"], "--push", help="Push the recorded baseline to the store's shared remote."
    ),
    resume: Optional[Path] = typer.Option(
        None,
        "--resume",
        help="Continue a stopped run from its folder (reports/runs/<run id>) after its last finished stage.",
    ),
    lang: str = typer.Option(DEFAULTS["lang"], help="Report language: en or zh."),
    pdf: bool = typer.Option(DEFAULTS["pdf"], "--pdf/--no-pdf", help="Render the PDF as well as the HTML."),
    fail_on: str = typer.Option(
        DEFAULTS["fail_on"], help="Exit 1 on this verdict or worse: never, no-go or conditional."
    ),
    regression_threshold: float = typer.Option(
        DEFAULTS["regression_threshold"],
        help="Smallest relative slow-down "
        "against the previous baseline that counts (raised further by "
        "measured noise).",
    ),
    targets: Optional[str] = typer.Option(None, "--targets", help=TARGETS_HELP),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Show other tools' output (TileLang, Inductor, "
        "warnings) on the terminal; by default it goes to the run folder's "
        "third_party.log.",
    ),
) -> None:
    """Run the whole evaluation: evaluate --model bert-tiny"""
    if ctx.invoked_subcommand is not None:
        return
    if resume is not None:
        _check_resume_options(ctx, fail_on)
        _resume(resume, fail_on, verbose)
        return
    if model is None:
        say_error(
            "error: --model is required, e.g. evaluate --model bert-tiny (or --resume RUN_DIR; see evaluate --help)"
        )
        raise typer.Exit(2)
    _run(build_options(ctx.params), fail_on, verbose)


def _check_resume_options(ctx: typer.Context, fail_on: str) -> None:
    """A resumed run keeps its saved config, so an option that would change it is refused
    rather than ignored, and --fail-on is checked before the run continues, not after."""
    # By the source's name: typer may carry its own copy of click's ParameterSource.
    given = [
        p.secondary_opts[0] if getattr(p, "secondary_opts", None) and ctx.params.get(p.name) is False else p.opts[0]
        for p in ctx.command.params
        if p.name not in RESUME_OPTIONS and getattr(ctx.get_parameter_source(p.name), "name", "") == "COMMANDLINE"
    ]
    if given:
        say_error(
            f"error: --resume continues the run with its own saved config; leave out {', '.join(given)} "
            "(only --fail-on and --verbose go with --resume; start a new run to change the others)"
        )
        raise typer.Exit(2)
    if fail_on not in ("never", "no-go", "conditional"):
        say_error(f"error: --fail-on '{fail_on}' is not allowed; use never, no-go or conditional")
        raise typer.Exit(2)


def build_options(params: dict[str, Any]) -> dict[str, Any]:
    """The main command's parsed options as config.build's keywords: the same names
    (tests/test_config.py checks it), but --name is `label`."""
    options = {k: v for k, v in params.items() if k not in NOT_BUILD_OPTIONS}
    options["label"] = options.pop("name")
    return options


def _log_path(reports: Path) -> Path:
    """Where other tools' output goes until the run folder exists (then: third_party.log in it)."""
    from datetime import datetime

    return reports / "runs" / f"evaluate-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.third_party.log"


def _run(options: dict[str, Any], fail_on: str, verbose: bool = False) -> None:
    folder = RunFolder()
    log = None
    try:
        with reported_errors(run_dir=folder.find, scratch=lambda: folder.reports):
            from .. import config as config_mod
            from .. import pipeline

            cfg = config_mod.build(**options)
            folder.watch(cfg)
            with progress(console) as p, third_party_output(_log_path(cfg.output.reports), verbose) as log:

                def into_folder(run_dir: Path) -> None:
                    nonlocal log
                    log = adopt(log, run_dir)

                outcome = pipeline.run(cfg, RichReporter(p, on_folder=into_folder))
            print_summary(outcome, settle(log, outcome.run_dir))
            _gate(outcome, fail_on)
    finally:
        settle(log, folder.find())


def _resume(run_dir: Path, fail_on: str, verbose: bool = False) -> None:
    log = None
    try:
        with reported_errors(run_dir=lambda: run_dir):
            from .. import config as config_mod
            from .. import pipeline

            with progress(console) as p, third_party_output(run_dir / "third_party.resumed.log", verbose) as log:
                outcome = pipeline.resume(run_dir, RichReporter(p))
            print_summary(outcome, settle(log, run_dir))
            saved = config_mod.from_json((run_dir / "config.json").read_text()).output.fail_on
            _gate(outcome, fail_on if fail_on != "never" else saved)
    finally:
        settle(log, run_dir)


def _gate(outcome, fail_on: str) -> None:
    """`--fail-on` as a CI gate: exit 1 when the verdict is that level or worse."""
    if fail_on != "never":
        from .. import checklist

        code = checklist.exit_code(outcome.result.verdict, fail_on)
        if code:
            # one line on stderr saying why a CI job failed, beside the summary on stdout
            verdict = outcome.result.verdict
            say_error(f"exit 1: the verdict is {verdict.decision if verdict else 'missing'} (--fail-on {fail_on})")
            raise typer.Exit(code)
