"""The command line: parse -> Config -> pipeline -> exit code. Nothing else lives here.

In: argv. Out: tables and progress on the terminal, files under reports/, and an exit
code: 0 done (or a verdict that `--fail-on` tolerates), 1 the verdict `--fail-on`
rejects, 2 anything else that went wrong: bad input, an unusable environment, or a bug
(one line on stderr, never a traceback; a bug's traceback goes to a file the line
names), 130 interrupted (the run folder keeps the stages that finished). Every command
goes through one error handler, `reported_errors`, so they all fail the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import sys
import tempfile
import traceback
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterator, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from .errors import EvaluatorError

try:  # typer >= 0.2x carries its own click; before that its usage errors were click's
    from typer import TyperException as _UsageError
except ImportError:  # pragma: no cover - older typer
    from click.exceptions import ClickException as _UsageError

# Piped output (CI logs, `| tee`) would otherwise wrap every table at 80 columns.
console = Console(width=None if sys.stdout.isatty() else 140)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 140)

app = typer.Typer(add_completion=False, no_args_is_help=False, rich_markup_mode=None,
                  help="Evaluate whether a PyTorch model should move onto TileLang: profile, rewrite the hot "
                       "operators, tune, verify, benchmark, soak, check upstream health, record a baseline and "
                       "render a go/no-go report.")
baseline_app = typer.Typer(help="List, show, diff and record the versioned baselines in a store.")
checklist_app = typer.Typer(help="Validate checklists and list the metrics they may use.")
app.add_typer(baseline_app, name="baseline")
app.add_typer(checklist_app, name="checklist")

STORE_OPT = typer.Option(None, "--store", help="Baseline store: a folder (a git repository), or a shared "
                         "remote's git URL or bare repository, used through a local clone in "
                         "~/.cache/evaluator/stores. Default: reports/baselines.")


def _read_store(spec: Optional[str]):
    """A store to read from: a shared one is pulled first, so baselines other hosts recorded
    are compared and trended too; offline, its clone is read as it is."""
    from . import baseline
    from .config import OutputSettings
    from .errors import BaselineError

    spec = spec or str(OutputSettings().store)
    if not baseline.is_remote(spec):
        return Path(spec)
    st = baseline.open_store(spec)
    try:
        baseline.pull(st)
    except BaselineError as exc:
        _say_error(f"warning: {exc}")
    return st
# Spelled out rather than read from the registries, which import torch (a second on every
# --help); tests/test_cli_commands.py checks both against kernels.REGISTRY and targets.TARGETS.
FAMILIES_HELP = ("gemm, gemm_gelu, gemm_relu, gemm_silu, softmax, layernorm, layernorm_residual, rmsnorm, "
                 "attention, conv2d")
TARGETS_HELP = ("Accelerators to lower the rewritten kernels for (not run there): comma-separated keys of "
                "a100, h100, h200, b200, v100, t4, mi250x, mi300x, c500, local (this machine's GPU); all; or "
                "none to skip. Default: a100, h100, mi300x, c500, plus this machine's GPU.")


class RichReporter:
    """Draws the pipeline's progress with rich; one bar per stage."""

    def __init__(self, progress: Progress):
        self.p = progress
        self.task = None

    def stage(self, name: str, total: int | None = None) -> None:
        self._finish()
        self.name = name
        self.task = self.p.add_task(name, total=total)

    def update(self, text: str) -> None:
        if self.task is not None:
            self.p.update(self.task, description=f"{self.name} [dim]{text}[/]")

    def advance(self, text: str = "") -> None:
        if self.task is not None:
            self.p.advance(self.task)
            if text:
                self.update(text)

    def done(self, text: str = "") -> None:
        if self.task is not None:
            t = self.p.tasks[self.task]
            self.p.update(self.task, completed=t.total or 1, total=t.total or 1,
                          description=f"[green]✓[/] {self.name}" + (f" [dim]— {text}[/]" if text else ""))
            self.task = None

    def info(self, text: str) -> None:
        self.p.console.print(f"  {text}")

    def _finish(self) -> None:
        if self.task is not None:
            self.done()


def _config_text(config: dict) -> str:
    short = {"num_stages": "stages", "threads": "thr", "swizzle": "swz"}
    return " ".join(f"{short.get(k, k.replace('block_', 'b'))}={v}" for k, v in config.items())


def _say_error(text: str) -> None:
    # Plain print: an error is one line whatever the width, so scripts can grep it.
    print(re.sub(r"\s*[\r\n]+\s*", " ", text).strip(), file=sys.stderr, flush=True)


def _short(text: str, limit: int = 300) -> str:
    # An unexpected exception's message can be pages long (a tensor repr); the whole of
    # it is in the traceback file.
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _save_traceback(exc: BaseException, folders: list[Path | None]) -> str:
    """Write the traceback (causes included) into the first folder that takes it, else a
    temp file; the path written, or why none could be."""
    text = (f"evaluate {' '.join(sys.argv[1:])}\n{datetime.now().isoformat(timespec='seconds')}\n\n"
            + "".join(traceback.format_exception(exc)))
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for folder in folders:
        if folder is None:
            continue
        path = folder / "traceback.txt" if (folder / "results.json").exists() else folder / f"traceback-{stamp}.txt"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return str(path)
        except OSError:
            continue
    try:
        fd, name = tempfile.mkstemp(prefix="evaluate-traceback-", suffix=".txt")
        with open(fd, "w") as f:
            f.write(text)
        return name
    except OSError as e:
        return f"nowhere: could not write a file ({e.strerror})"


def _call(hint: Callable[[], Path | None]) -> Path | None:
    try:
        return hint()
    except Exception:  # a hint that fails must not hide the error being reported
        return None


@contextmanager
def reported_errors(*, run_dir: Callable[[], Path | None] = lambda: None,
                    scratch: Callable[[], Path | None] = lambda: None) -> Iterator[None]:
    """The CLI's one error handler, around every command.

    `EvaluatorError` -> "error: <message>", exit 2. Any other exception -> "error: internal
    error <Type>: <message> (full traceback in <file>)", exit 2, the file being in the run
    folder (`run_dir()`), else in `scratch()`, else a temp file. Ctrl-C -> "interrupted;
    finished stages are kept in <run folder>", exit 130. Exits the commands ask for
    (`typer.Exit`, e.g. the verdict's exit 1) and click's own usage errors pass through.
    """
    try:
        yield
    except (typer.Exit, typer.Abort, _UsageError):
        raise
    except EvaluatorError as exc:
        _say_error(f"error: {exc}")
        raise typer.Exit(2) from exc
    except KeyboardInterrupt as exc:
        where = getattr(exc, "run_dir", None) or _call(run_dir)
        _say_error(f"interrupted; finished stages are kept in {where}" if where
                   else "interrupted before a run folder was made; nothing was recorded")
        raise typer.Exit(130) from None
    except Exception as exc:
        where = getattr(exc, "run_dir", None) or _call(run_dir)
        path = _save_traceback(exc, [Path(where) if where else None, _call(scratch)])
        _say_error(f"error: internal error {type(exc).__name__}: {_short(exc)} (full traceback in {path})")
        raise typer.Exit(2) from exc


def one_line_errors(command: Callable) -> Callable:
    """Decorator form of `reported_errors` for the sub-commands (no run folder of their own)."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        with reported_errors():
            return command(*args, **kwargs)
    return wrapper


class _RunFolder:
    """Finds the run folder this invocation's pipeline made, for the error and interrupt
    messages: the pipeline creates it early but cannot return it when a stage raises."""

    def __init__(self) -> None:
        self.reports: Path | None = None
        self.runs: Path | None = None
        self.before: set[Path] = set()
        self.prefixes: tuple[str, ...] = ()

    def watch(self, cfg) -> None:
        from .pipeline import slug

        self.reports = cfg.output.reports
        self.runs = cfg.output.reports / "runs"
        self.before = set(self.runs.iterdir()) if self.runs.is_dir() else set()
        self.prefixes = tuple({f"{slug(cfg.model.label)}-", f"{slug(cfg.model.name)}-"})

    def find(self) -> Path | None:
        if self.runs is None or not self.runs.is_dir():
            return None
        new = [p for p in self.runs.iterdir() if p.is_dir() and p not in self.before]
        # Another run writing into the same reports folder may have made one too.
        ours = [p for p in new if p.name.startswith(self.prefixes)] or new
        return max(ours, key=lambda p: p.stat().st_mtime, default=None)


def _print_summary(outcome) -> None:
    r = outcome.result
    if r.hot_ops:
        t = Table(title="Hot operators (one forward pass)")
        for col in ("family", "time ms", "share", "calls", "TileLang kernel", "shapes"):
            t.add_column(col)
        for o in r.hot_ops.ops:
            mark = "rewritten" if o.family in r.hot_ops.selected else ("available" if o.has_kernel else "no")
            t.add_row(o.family, f"{o.time_ms:.3f}", f"{100 * o.share:.1f}%", str(o.calls), mark,
                      " ".join(o.shapes[:4]) + (" …" if len(o.shapes) > 4 else ""))
        console.print(t)
    if r.op_bench:
        t = Table(title=f"Rewritten: {', '.join(r.families)} — TileLang against PyTorch")
        for col in ("family", "shape", "TileLang ms", "PyTorch ms", "speedup", "correct", "config"):
            t.add_column(col)
        for b in r.op_bench:
            passed = [v.passed for v in r.verify if v.family == b.family and any(c.shape == b.shape for c in v.cases)]
            t.add_row(b.family, "x".join(map(str, b.shape)),
                      f"{b.tilelang.median_ms:.4g}" if b.tilelang else "—", f"{b.torch.median_ms:.4g}",
                      f"{b.speedup:.3g}x" if b.speedup else "—",
                      ("yes" if all(passed) else "NO") if passed else "—",
                      _config_text(b.config) if b.config else (b.error or "—"))
        console.print(t)
    if r.portability:
        console.print(_portability_table(r.portability))
    if r.e2e:
        e = r.e2e
        console.print(f"End to end: {e.reference.median_ms:.3f} ms -> "
                      f"{e.swapped.median_ms:.3f} ms ({e.speedup:.3g}x), outputs "
                      f"{'match' if e.outputs_match else 'DIFFER'} (max abs err {e.max_abs_err:.2g})"
                      if e.swapped else f"End to end: swap-in failed ({e.error})")
    if r.verdict:
        colour = {"GO": "green", "CONDITIONAL GO": "yellow", "NO-GO": "red"}.get(r.verdict.decision, "white")
        console.print(f"\nVerdict: [bold {colour}]{r.verdict.decision}[/]  ({r.verdict.checklist})")
        for o in r.verdict.outcomes:
            if o.status in ("fail", "not_evaluated"):
                console.print(f"  {o.status.replace('_', ' '):>13}  [{o.severity}] {o.title}", markup=False)
    console.print(f"\nRun folder: {outcome.run_dir}")
    if outcome.html:
        console.print(f"Report: {outcome.html}")
    if outcome.pdf:
        console.print(f"PDF: {outcome.pdf}")
    elif outcome.pdf_note:
        console.print(outcome.pdf_note)
    if r.baseline:
        console.print(f"Baseline: {r.baseline.tag} ({r.baseline.store})")


_PORT_STYLE = {"lowers": "green", "needs_retuning": "yellow", "fails": "red"}


def _portability_table(p) -> Table:
    """The kernel x target matrix: one row per kernel and config (the tuned one, the
    family's default), one column per target; each cell lowers / re-tune / fails with
    its reason and, where one was found, the config that fits."""
    from .portability import cell_text, kernel_label

    t = Table(title="Portability (lowered for each target, not run there)")
    t.add_column("kernel")
    t.add_column("config")
    for key in p.targets:
        t.add_column(key)
    cells = {(kernel_label(c.family, c.shape, c.dtype), c.config_kind, c.target): c for c in p.cells}
    for label in p.kernels:
        for kind in ("tuned", "default"):
            row = [cells.get((label, kind, key)) for key in p.targets]
            if not any(row):
                continue
            # Text, not markup: reasons are compiler messages and may hold [brackets].
            t.add_row(Text(label), Text(kind), *(Text("—") if c is None else
                                                 Text(cell_text(c), style=_PORT_STYLE.get(c.status, "")) for c in row))
    return t


@app.callback(invoke_without_command=True)
def main_command(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Zoo name (bert-tiny, bert-base, resnet-tiny, "
                                        "resnet50, llama-tiny, llama), hf:Class, timm:name, torchvision:name, "
                                        "pkg.module:factory or path/file.py:factory."),
    name: Optional[str] = typer.Option(None, "--name", help="The model's name in baseline ids and reports "
                                       "(default: the zoo name, pkg.module:factory, or file:factory without "
                                       "the file's folder)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    batch_size: Optional[int] = typer.Option(None, help="Override the model's batch size."),
    seq_len: Optional[int] = typer.Option(None, help="Override the sequence length (image side for ResNet)."),
    dtype: Optional[str] = typer.Option(None, help="fp32, fp16 or bf16 (default: fp32 on CPU, fp16 on CUDA)."),
    ops: int = typer.Option(2, help="How many hot operator families to rewrite."),
    families: Optional[str] = typer.Option(None, help="Comma-separated families to rewrite (overrides --ops)."),
    max_shapes: int = typer.Option(6, help="At most this many distinct shapes per family."),
    profile_iters: int = typer.Option(3, help="Profiled forward passes (after one warm-up)."),
    budget: float = typer.Option(60.0, help="Tuning budget per shape, in seconds."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Re-tune even when the tuning cache has a config."),
    fine_rounds: Optional[int] = typer.Option(None, help="Rounds of neighbours around the best coarse config "
                                              "(default 3 on CUDA, 1 on CPU; 0: coarse grid only)."),
    isolate: str = typer.Option("auto", help="Time candidates in a worker process: auto (on CUDA), on or off."),
    reps: int = typer.Option(20, help="Timed repetitions per measurement."),
    sweep: bool = typer.Option(False, help="Also benchmark each family's standard shapes."),
    e2e: bool = typer.Option(True, "--e2e/--no-e2e", help="Measure the model with the kernels swapped in."),
    soak_seconds: Optional[float] = typer.Option(None, help="Soak length (default 60 s on CUDA, 5 s on CPU; 0 skips)."),
    upstream: Optional[str] = typer.Option(None, help="Local clone (or URL) of upstream TileLang for health metrics."),
    fork: Optional[str] = typer.Option(None, help="A vendor fork to compare with upstream."),
    as_of: Optional[str] = typer.Option(None, help="Compute upstream metrics as of this date (YYYY-MM-DD)."),
    branch: Optional[str] = typer.Option(None, help="Upstream branch, where the default is not obvious."),
    checklist: Optional[str] = typer.Option(None, help="Checklist YAML, or a name: ./checklists/NAME.yaml, else a "
                                            "shipped one (default, production)."),
    reports: Optional[Path] = typer.Option(None, help="Output folder (default: reports/)."),
    store: Optional[str] = typer.Option(None, help="Baseline store: a folder, or a shared remote's git URL or bare "
                                        "repository (default: <reports>/baselines)."),
    push: bool = typer.Option(False, "--push", help="Push the recorded baseline to the store's shared remote."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue a stopped run from its folder "
                                          "(reports/runs/<run id>) after its last finished stage."),
    lang: str = typer.Option("en", help="Report language: en or zh."),
    pdf: bool = typer.Option(True, "--pdf/--no-pdf", help="Render the PDF as well as the HTML."),
    fail_on: str = typer.Option("never", help="Exit 1 on this verdict or worse: never, no-go or conditional."),
    regression_threshold: float = typer.Option(0.05, help="Smallest relative slow-down against the previous "
                                               "baseline that counts (raised further by measured noise)."),
    targets: Optional[str] = typer.Option(None, "--targets", help=TARGETS_HELP),
) -> None:
    """Run the whole evaluation: evaluate --model bert-tiny"""
    if ctx.invoked_subcommand is not None:
        return
    if resume is not None:
        with reported_errors(run_dir=lambda: resume):
            from . import config as config_mod, pipeline

            with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=console, transient=False) as progress:
                outcome = pipeline.resume(resume, RichReporter(progress))
            _print_summary(outcome)
            saved = config_mod.from_json((resume / "config.json").read_text()).output.fail_on
            gate = fail_on if fail_on != "never" else saved
            if gate != "never":
                from . import checklist as checklist_mod
                code = checklist_mod.exit_code(outcome.result.verdict, gate)
                if code:
                    raise typer.Exit(code)
        return
    if model is None:
        _say_error("error: --model is required, e.g. evaluate --model bert-tiny (or --resume RUN_DIR; "
                   "see evaluate --help)")
        raise typer.Exit(2)
    folder = _RunFolder()
    with reported_errors(run_dir=folder.find, scratch=lambda: folder.reports):
        from . import config as config_mod, pipeline

        cfg = config_mod.build(model=model, device=device, batch_size=batch_size, seq_len=seq_len, dtype=dtype,
                               ops=ops, families=families, max_shapes=max_shapes, profile_iters=profile_iters,
                               budget=budget, no_cache=no_cache, reps=reps, sweep=sweep, e2e=e2e,
                               soak_seconds=soak_seconds, upstream=upstream, fork=fork, as_of=as_of, branch=branch,
                               reports=reports, store=store, checklist=checklist, lang=lang, pdf=pdf,
                               fail_on=fail_on, regression_threshold=regression_threshold,
                               fine_rounds=fine_rounds, isolate=isolate, label=name, targets=targets, push=push)
        folder.watch(cfg)
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=False) as progress:
            outcome = pipeline.run(cfg, RichReporter(progress))
        _print_summary(outcome)
        if fail_on != "never":
            from . import checklist as checklist_mod
            code = checklist_mod.exit_code(outcome.result.verdict, fail_on)
            if code:
                raise typer.Exit(code)


# Sizes that are flags or offsets rather than extents: attention's causal (0 or 1) and
# conv2d's padding may be 0; every other size must be at least 1.
_MAY_BE_ZERO = frozenset({"causal", "pad"})


def _parse_shape(text: str, names: tuple[str, ...], error: type[Exception]):
    """--shape "4096x4096x4096" -> (4096, 4096, 4096); `error` with what was expected."""
    from .results import parse_shape

    expected = "x".join(names)
    try:
        shape = parse_shape(text)
    except ValueError as exc:
        raise error(f"--shape {text} is not a shape; write integer sizes joined by x, {expected}") from exc
    zero_ok = [n for n in names if n in _MAY_BE_ZERO]
    if not shape or any(v < 0 for v in shape) or any(
            v == 0 and (i >= len(names) or names[i] not in _MAY_BE_ZERO) for i, v in enumerate(shape)):
        raise error(f"--shape {text}: the sizes must be positive integers, {expected}"
                    + (f" ({' and '.join(zero_ok)} may be 0)" if zero_ok else ""))
    return shape


@app.command("bench")
@one_line_errors
def bench_command(
    family: str = typer.Option(..., help=f"Kernel family: {FAMILIES_HELP}."),
    shape: list[str] = typer.Option([], help="Problem shape like 4096x4096x4096 (repeatable); default: standard shapes."),
    dtype: Optional[str] = typer.Option(None, help="fp32, fp16 or bf16 (default: fp32 on CPU, fp16 on CUDA)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    budget: float = typer.Option(60.0, help="Tuning budget per shape, in seconds."),
    reps: int = typer.Option(50, help="Timed repetitions."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Tune and benchmark one kernel family alone against PyTorch."""
    from . import bench as bench_mod, config as config_mod, hardware, kernels, pipeline
    from .errors import ConfigError
    from .kernels.base import DTYPE_ALIASES
    from .results import to_dict

    fam = kernels.get(family)  # an unknown family: one line naming the known ones
    config_mod.check_count("--reps", reps, 1)
    config_mod.check_seconds("--budget", budget)
    shapes = [_parse_shape(text, fam.shape_names, ConfigError) for text in shape]
    dev = hardware.resolve_device(device)
    dt = DTYPE_ALIASES.get(dtype or ("float16" if dev == "cuda" else "float32"))
    if dt is None:
        raise ConfigError(f"unknown dtype '{dtype}'; use fp32, fp16 or bf16")
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console) as progress:
        rows = pipeline.bench_family(family, shapes, dt, dev, budget_s=budget,
                                     policy=bench_mod.TimingPolicy(reps=reps), reporter=RichReporter(progress))
    if json_out:
        print(json.dumps([{"tuned": to_dict(t), "bench": to_dict(b)} for t, b in rows], indent=1))
        return
    t = Table(title=f"{family} ({dt}) — TileLang against PyTorch")
    for col in ("shape", "TileLang ms", "PyTorch ms", "ratio", "TileLang TFLOP/s", "TileLang GB/s",
                "% of roof (TL / PyTorch)", "config"):
        t.add_column(col)
    for tk, b in rows:
        t.add_row("x".join(map(str, b.shape)), f"{b.tilelang.median_ms:.4g}" if b.tilelang else "—",
                  f"{b.torch.median_ms:.4g}", f"{b.speedup:.3g}x" if b.speedup else "—",
                  f"{b.tilelang_tflops:.3g}" if b.tilelang_tflops else "—",
                  f"{b.tilelang_gbps:.3g}" if b.tilelang_gbps else "—",
                  f"{b.tilelang_roof_pct or 0:.0f}% / {b.torch_roof_pct or 0:.0f}%" if b.torch_roof_pct else "—",
                  _config_text(tk.config) if tk.config else b.error)
    console.print(t)


@app.command("port")
@one_line_errors
def port_command(
    family: str = typer.Option(..., help=f"Kernel family: {FAMILIES_HELP}."),
    shape: str = typer.Option(..., help="Problem shape, e.g. 4096x4096x4096 for gemm (MxNxK); the family's "
                              "sizes joined by x, as in `evaluate bench`."),
    dtype: str = typer.Option("fp16", help="fp16, bf16 or fp32 (what the kernel would run at there)."),
    targets: Optional[str] = typer.Option(None, "--targets", help=TARGETS_HELP),
    config: Optional[str] = typer.Option(None, "--config", help="A tuned config as a JSON object, checked as "
                                         "'tuned' beside each target's default, e.g. "
                                         "'{\"block_M\": 128, \"block_N\": 256, \"block_K\": 64}'."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Lower one kernel for accelerators that are not on this machine: the kernel x target
    matrix (lowers / needs re-tuning / fails, and why), lowered, never run."""
    from . import config as config_mod, kernels, portability
    from .errors import ConfigError
    from .kernels.base import DTYPE_ALIASES
    from .results import to_dict

    fam = kernels.get(family)  # an unknown family: one line naming the known ones
    shp = _parse_shape(shape, fam.shape_names, ConfigError)
    if len(shp) != len(fam.shape_names):
        raise ConfigError(f"--shape {shape} does not fit {family}: it takes {len(fam.shape_names)} sizes, "
                          f"{'x'.join(fam.shape_names)}")
    dt = DTYPE_ALIASES.get(dtype)
    if dt is None:
        raise ConfigError(f"unknown dtype '{dtype}'; use fp16, bf16 or fp32")
    keys = config_mod.parse_targets(targets)
    if not keys:
        raise ConfigError("--targets none leaves nothing to check; name targets, all, or leave --targets out "
                          "for the default set")
    tuned = None
    if config is not None:
        try:
            tuned = json.loads(config)
        except ValueError as exc:
            raise ConfigError(f"--config is not JSON ({exc.msg}); give an object such as "
                              "'{\"block_M\": 128, \"num_stages\": 3}'") from None
        if not isinstance(tuned, dict) or not tuned:
            raise ConfigError("--config must be a JSON object of config keys, e.g. '{\"block_M\": 128}'")
    # A line, not a spinner: lowering for HIP targets holds stderr for a moment (portability.py).
    err_console.print(f"Lowering {family} {'x'.join(map(str, shp))} {dt} for {', '.join(keys)} "
                      "(compiled, not run)…", markup=False, highlight=False)
    p = portability.port(family, shp, dt, keys, config=tuned)
    if json_out:
        print(json.dumps({**to_dict(p), "metrics": portability.metrics(p)}, indent=1))
        return
    console.print(_portability_table(p))
    for line in p.summary:  # one line each, whatever the width, so scripts can grep them
        console.print(line, markup=False, highlight=False, soft_wrap=True)


@app.command("upstream")
@one_line_errors
def upstream_command(
    repo: str = typer.Option(..., help="Local clone (or URL) of the upstream repository."),
    fork: Optional[str] = typer.Option(None, help="A vendor fork to compare with upstream."),
    as_of: Optional[str] = typer.Option(None, help="Compute as of this date (YYYY-MM-DD)."),
    branch: Optional[str] = typer.Option(None, help="Branch to read."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Print the upstream repository's health table (git history only)."""
    from . import config as config_mod, upstream
    from .results import to_dict

    # repo_option: the messages must name the option typed here, --repo, not the run's --upstream.
    health = upstream.measure(repo, fork=fork, as_of=config_mod.parse_as_of(as_of), branch=branch,
                              repo_option="--repo")
    if json_out:
        print(json.dumps(to_dict(health), indent=1))
        return
    t = Table(title=f"Upstream health: {repo}")
    for col in ("metric", "value", "meaning"):
        t.add_column(col)
    for row in upstream.summary_rows(health):
        t.add_row(*(Text(v) for v in row))  # repository text must not be read as rich markup
    console.print(t)


@app.command("report")
@one_line_errors
def report_command(
    baseline_id: str = typer.Option(..., "--baseline", help="Baseline id, e.g. bert-tiny/cpu-x86_64/2026Q4-1."),
    store: Optional[str] = STORE_OPT,
    out: Optional[Path] = typer.Option(None, help="Output folder (default: reports/rerendered/<id>)."),
    lang: str = typer.Option("en", help="en or zh."),
) -> None:
    """Re-render the HTML/PDF report from a stored baseline, without rerunning anything."""
    from . import baseline, report
    from .config import OutputSettings, check_writable_folder

    result = baseline.load(_read_store(store), baseline_id)
    folder = out or OutputSettings().reports / "rerendered" / baseline_id.replace("/", "_")
    check_writable_folder("--out", folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = report.render(result, folder, lang=lang)
    console.print(f"Report: {files.html}")
    console.print(f"PDF: {files.pdf}" if files.pdf else files.pdf_note)


@app.command("compare")
@one_line_errors
def compare_command(
    candidate: str = typer.Option(..., help="Baseline id of the candidate platform/version."),
    reference: str = typer.Option(..., help="Baseline id of the reference platform/version."),
    store: Optional[str] = STORE_OPT,
    threshold: float = typer.Option(0.05, help="Smallest relative change that counts."),
    out: Optional[Path] = typer.Option(None, help="Also render the candidate's report with this comparison here."),
    lang: str = typer.Option("en", help="Report language for --out: en or zh."),
) -> None:
    """Compare two baselines op by op and end to end (e.g. two platforms, or two driver versions)."""
    from . import baseline, report
    from .config import check_writable_folder

    store = _read_store(store)
    if out is not None:
        check_writable_folder("--out", out)
    cand = baseline.load(store, candidate)
    comp = baseline.compare(baseline.load(store, reference), cand,
                            threshold=threshold, reference_id=reference, candidate_id=candidate)
    _print_comparison(comp)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        files = report.render(dataclasses.replace(cand, comparison=comp), out, lang=lang)
        console.print(f"Report: {files.html}")


def _print_comparison(comp) -> None:
    from . import baseline

    rows = baseline.comparison_rows(comp)
    t = Table(title=f"{comp.candidate} against {comp.reference}")
    for col in baseline.COMPARISON_COLUMNS:
        t.add_column(col)
    for row in rows:
        t.add_row(*[str(x) for x in row])
    console.print(t)
    if not comp.comparable:
        console.print(f"[yellow]Not comparable: {comp.note}[/]")
    for field, a, b in comp.environment_changes:
        console.print(f"  changed: {field}: {a} -> {b}", markup=False)


@baseline_app.command("list")
@one_line_errors
def baseline_list(model: Optional[str] = typer.Option(None), platform: Optional[str] = typer.Option(None),
                  store: Optional[str] = STORE_OPT) -> None:
    """List baselines, oldest first."""
    from . import baseline

    refs = baseline.list_baselines(_read_store(store), model=model, platform=platform)
    t = Table(title="Baselines")
    for col in ("id", "commit"):
        t.add_column(col)
    for r in refs:
        t.add_row(r.tag, r.commit[:10])
    console.print(t)


@baseline_app.command("show")
@one_line_errors
def baseline_show(baseline_id: str = typer.Argument(..., help="Baseline id."), store: Optional[str] = STORE_OPT) -> None:
    """Show one baseline's manifest and headline numbers."""
    from . import baseline

    result = baseline.load(_read_store(store), baseline_id)
    t = Table(title=baseline_id, show_header=False)
    for k, v in baseline.show_rows(result):
        t.add_row(k, str(v))
    console.print(t)


@baseline_app.command("diff")
@one_line_errors
def baseline_diff(a: str = typer.Argument(..., help="Reference baseline id."),
                  b: str = typer.Argument(..., help="Candidate baseline id."),
                  store: Optional[str] = STORE_OPT) -> None:
    """Compare two baselines of the same model and platform."""
    from . import baseline

    _print_comparison(baseline.diff(_read_store(store), a, b))


@baseline_app.command("record")
@one_line_errors
def baseline_record(
    run_dir: Path = typer.Argument(..., help="A finished run's folder (reports/runs/<run id>), or its results.json."),
    store: Optional[str] = typer.Option(None, "--store", help="Baseline store (a folder, or a shared remote's git "
                                        "URL). Default: the store next to the run, <reports>/baselines for "
                                        "<reports>/runs/<id>."),
) -> None:
    """Record a finished run's results.json as a baseline (when recording failed at the end of the run)."""
    from . import baseline
    from .config import OutputSettings, check_writable_folder
    from .errors import ConfigError
    from .results import RunResult, from_dict, to_dict

    results = run_dir / "results.json" if run_dir.is_dir() else run_dir
    folder = results.parent
    if not results.is_file():
        raise ConfigError(f"{run_dir} has no results.json; give the folder of a run (reports/runs/<run id>)")
    try:
        result = from_dict(RunResult, json.loads(results.read_text()))
    except (OSError, ValueError) as exc:  # unreadable, not JSON, or not a RunResult (pydantic's error is a ValueError)
        raise ConfigError(f"{results} is not a readable results.json of a run ({type(exc).__name__}); "
                          "give the folder of a run that evaluate wrote") from exc
    if result.verdict is None:
        missing = ", ".join(result.stage_errors) or "the stages after " + ("profiling" if result.hot_ops else "loading")
        raise ConfigError(f"run {result.run_id} did not finish (no verdict; failed: {missing}); "
                          "only a finished run can be recorded, rerun it")
    if result.baseline is not None:
        raise ConfigError(f"run {result.run_id} is already recorded as {result.baseline.tag} in "
                          f"{result.baseline.store}; `evaluate baseline show {result.baseline.tag}` shows it")
    # The store the run itself would have used when none is given: <reports>/baselines.
    if store is None:
        store = folder.parent.parent / "baselines" if folder.parent.name == "runs" else OutputSettings().store
    if not baseline.is_remote(store):
        check_writable_folder("--store", Path(store))
    ref = baseline.record(store, result)
    note = ""
    try:  # as the pipeline does: the run folder says where its baseline is, so it is not recorded twice
        (folder / "baseline.json").write_text(json.dumps(to_dict(ref), indent=1))
        tmp = folder / "results.json.tmp"
        tmp.write_text(json.dumps(to_dict(dataclasses.replace(result, baseline=ref)), indent=1))
        tmp.replace(folder / "results.json")
    except OSError as exc:
        note = f" (could not note it in {folder}: {exc.strerror})"
    console.print(f"Recorded {ref.tag} in {ref.store}{note}", markup=False)


@baseline_app.command("push")
@one_line_errors
def baseline_push(store: Optional[str] = STORE_OPT) -> None:
    """Push the store's new baselines (and tuned configs) to its shared remote: fetch, rebase, push, retry; never forced."""
    from . import baseline
    from .config import OutputSettings

    s = baseline.push(store or str(OutputSettings().store))
    for old, new in s.renumbered:
        console.print(f"Renumbered {old} -> {new} (the remote already had {old})", markup=False)
    console.print(f"Pushed {len(s.pushed)} baseline(s) to {s.remote}: {', '.join(s.pushed) or 'nothing new'}"
                  + (f"; pulled {len(s.pulled)} from other hosts" if s.pulled else "")
                  + (f" ({s.attempts} attempts: another host pushed meanwhile)" if s.attempts > 1 else ""),
                  markup=False)


@baseline_app.command("pull")
@one_line_errors
def baseline_pull(store: Optional[str] = STORE_OPT) -> None:
    """Bring the store's local clone up to its shared remote (baselines other hosts recorded)."""
    from . import baseline
    from .config import OutputSettings

    s = baseline.pull(store or str(OutputSettings().store))
    console.print(f"Pulled {len(s.pulled)} baseline(s) from {s.remote}"
                  + (": " + ", ".join(s.pulled) if s.pulled else " (up to date)"), markup=False)


@app.command("fleet")
def fleet_command(
    plan: Path = typer.Argument(..., help="Fleet plan (YAML): models x settings x platforms."),
    ray_address: Optional[str] = typer.Option(None, "--ray", help="Address of a running Ray cluster "
                                              "(default: start Ray on this machine)."),
    reports: Optional[Path] = typer.Option(None, "--reports", help="Output folder (default: the plan's reports)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Baseline store (default: the plan's store)."),
    fail_on: str = typer.Option("never", "--fail-on", help="never, failed, no-go or conditional: exit 1 when a "
                                "cell is that or worse (a failed run is worse than NO-GO)."),
) -> None:
    """Run a plan of models x platforms as Ray tasks (one per GPU, or per CPU) and write one summary."""
    from . import fleet

    with reported_errors():
        fleet.require_ray()  # the one line saying what to install comes before anything else
        fleet.check_fail_on(fail_on)
        p = fleet.load_plan(plan, reports=reports, store=store)
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err_console) as progress:
            result = fleet.run_plan(p, ray_address=ray_address, reporter=RichReporter(progress))
        html = fleet.summary(result, result.folder)
        code = fleet.exit_code(result, fail_on)
    console.print(f"{len(result.cells) - len(result.failed)} ok, {len(result.failed)} failed", markup=False)
    console.print(f"Summary: {html}", markup=False)
    if code:
        raise typer.Exit(code)


@checklist_app.command("validate")
@one_line_errors
def checklist_validate(file: Path = typer.Argument(..., help="Checklist YAML.")) -> None:
    """Validate a checklist file."""
    from . import checklist

    cl = checklist.validate(file)
    console.print(f"{file}: valid ({len(cl.items)} items)")


@checklist_app.command("metrics")
@one_line_errors
def checklist_metrics() -> None:
    """The catalogue of metric names a checklist may use."""
    from . import checklist

    t = Table(title="Checklist metrics")
    for col in ("metric", "unit", "meaning"):
        t.add_column(col)
    for name, m in sorted(checklist.METRICS.items()):
        t.add_row(name, m.unit, m.meaning)
    console.print(t)


def main() -> None:
    # Not click's standalone mode: its usage errors are three lines (usage, hint, error);
    # here they are one, like every other error.
    try:
        code = app(standalone_mode=False)
    except _UsageError as exc:
        where = exc.ctx.command_path if getattr(exc, "ctx", None) else "evaluate"
        _say_error(f"error: {exc.format_message()} (see {where} --help)")
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        _say_error("interrupted")
        sys.exit(130)
    except EvaluatorError as exc:  # pragma: no cover - reported_errors handles these; the last net
        _say_error(f"error: {exc}")
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
