"""The command line: parse -> Config -> pipeline -> exit code. Nothing else lives here.

In: argv. Out: tables and progress on the terminal, files under reports/, and an exit
code: 0 done (or a verdict that `--fail-on` tolerates), 1 the verdict `--fail-on`
rejects, 2 bad input or an unusable environment (one line on stderr, no traceback).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from .errors import EvaluatorError

# Piped output (CI logs, `| tee`) would otherwise wrap every table at 80 columns.
console = Console(width=None if sys.stdout.isatty() else 140)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 140)

app = typer.Typer(add_completion=False, no_args_is_help=False, rich_markup_mode=None,
                  help="Evaluate whether a PyTorch model should move onto TileLang: profile, rewrite the hot "
                       "operators, tune, verify, benchmark, soak, check upstream health, record a baseline and "
                       "render a go/no-go report.")
baseline_app = typer.Typer(help="List, show and diff the versioned baselines in a store.")
checklist_app = typer.Typer(help="Validate checklists and list the metrics they may use.")
app.add_typer(baseline_app, name="baseline")
app.add_typer(checklist_app, name="checklist")

STORE_OPT = typer.Option(None, "--store", help="Baseline store (a git repository). Default: reports/baselines.")


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
    print(text, file=sys.stderr, flush=True)


def _fail(exc: EvaluatorError) -> None:
    _say_error(f"error: {exc}")
    raise typer.Exit(2)


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
        console.print(f"PDF: {outcome.pdf_note}")
    if r.baseline:
        console.print(f"Baseline: {r.baseline.tag} ({r.baseline.store})")


@app.callback(invoke_without_command=True)
def main_command(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Zoo name (bert-tiny, bert-base, resnet-tiny, "
                                        "resnet50, llama-tiny, llama), pkg.module:factory or path/file.py:factory."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    batch_size: Optional[int] = typer.Option(None, help="Override the model's batch size."),
    seq_len: Optional[int] = typer.Option(None, help="Override the sequence length (image side for ResNet)."),
    dtype: Optional[str] = typer.Option(None, help="fp32, fp16 or bf16 (default: fp32 on CPU, fp16 on CUDA)."),
    ops: int = typer.Option(2, help="How many hot operator families to rewrite."),
    families: Optional[str] = typer.Option(None, help="Comma-separated families to rewrite (overrides --ops)."),
    max_shapes: int = typer.Option(6, help="At most this many distinct shapes per family."),
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
    checklist: Optional[Path] = typer.Option(None, help="Checklist YAML, or a shipped one by name: default, production."),
    reports: Optional[Path] = typer.Option(None, help="Output folder (default: reports/)."),
    store: Optional[Path] = typer.Option(None, help="Baseline store (default: <reports>/baselines)."),
    lang: str = typer.Option("en", help="Report language: en or zh."),
    pdf: bool = typer.Option(True, "--pdf/--no-pdf", help="Render the PDF as well as the HTML."),
    fail_on: str = typer.Option("never", help="Exit 1 on this verdict or worse: never, no-go or conditional."),
    regression_threshold: float = typer.Option(0.05, help="Smallest relative slow-down against the previous "
                                               "baseline that counts (raised further by measured noise)."),
) -> None:
    """Run the whole evaluation: evaluate --model bert-tiny"""
    if ctx.invoked_subcommand is not None:
        return
    if model is None:
        _say_error("error: --model is required, e.g. evaluate --model bert-tiny (see evaluate --help)")
        raise typer.Exit(2)
    from . import config as config_mod, pipeline

    try:
        cfg = config_mod.build(model=model, device=device, batch_size=batch_size, seq_len=seq_len, dtype=dtype,
                               ops=ops, families=families, max_shapes=max_shapes, budget=budget, no_cache=no_cache,
                               reps=reps, sweep=sweep, e2e=e2e, soak_seconds=soak_seconds, upstream=upstream,
                               fork=fork, as_of=as_of, branch=branch, reports=reports, store=store,
                               checklist=checklist, lang=lang, pdf=pdf, fail_on=fail_on,
                               regression_threshold=regression_threshold, fine_rounds=fine_rounds,
                               isolate=isolate)
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=False) as progress:
            outcome = pipeline.run(cfg, RichReporter(progress))
    except EvaluatorError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        _say_error("interrupted: the run folder keeps the stages that finished (results.json)")
        raise typer.Exit(130)
    _print_summary(outcome)
    if fail_on != "never":
        from . import checklist
        code = checklist.exit_code(outcome.result.verdict, fail_on)
        if code:
            raise typer.Exit(code)


@app.command("bench")
def bench_command(
    family: str = typer.Option(..., help="Kernel family: gemm, gemm_gelu, gemm_relu, gemm_silu, softmax, layernorm, "
                               "layernorm_residual, rmsnorm, attention, conv2d."),
    shape: list[str] = typer.Option([], help="Problem shape like 4096x4096x4096 (repeatable); default: standard shapes."),
    dtype: Optional[str] = typer.Option(None, help="fp32, fp16 or bf16 (default: fp32 on CPU, fp16 on CUDA)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    budget: float = typer.Option(60.0, help="Tuning budget per shape, in seconds."),
    reps: int = typer.Option(50, help="Timed repetitions."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Tune and benchmark one kernel family alone against PyTorch."""
    from . import bench as bench_mod, hardware, pipeline
    from .kernels.base import DTYPE_ALIASES
    from .results import parse_shape, to_dict

    try:
        dev = hardware.resolve_device(device)
        dt = DTYPE_ALIASES.get(dtype or ("float16" if dev == "cuda" else "float32"))
        if dt is None:
            raise EvaluatorError(f"unknown dtype '{dtype}'; use fp32, fp16 or bf16")
        try:
            shapes = [parse_shape(s) for s in shape]
        except ValueError:
            raise EvaluatorError(f"bad --shape {shape}; write it like 4096x4096x4096") from None
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err_console) as progress:
            rows = pipeline.bench_family(family, shapes, dt, dev, budget_s=budget,
                                         policy=bench_mod.TimingPolicy(reps=reps), reporter=RichReporter(progress))
    except EvaluatorError as exc:
        _fail(exc)
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


@app.command("upstream")
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

    try:
        health = upstream.measure(repo, fork=fork, as_of=config_mod.parse_as_of(as_of), branch=branch)
    except EvaluatorError as exc:
        _fail(exc)
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
def report_command(
    baseline_id: str = typer.Option(..., "--baseline", help="Baseline id, e.g. bert-tiny/cpu-x86_64/2026Q4-1."),
    store: Optional[Path] = STORE_OPT,
    out: Optional[Path] = typer.Option(None, help="Output folder (default: reports/rerendered/<id>)."),
    lang: str = typer.Option("en", help="en or zh."),
) -> None:
    """Re-render the HTML/PDF report from a stored baseline, without rerunning anything."""
    from . import baseline, report
    from .config import OutputSettings

    store = store or OutputSettings().store
    try:
        result = baseline.load(store, baseline_id)
        folder = out or OutputSettings().reports / "rerendered" / baseline_id.replace("/", "_")
        folder.mkdir(parents=True, exist_ok=True)
        files = report.render(result, folder, lang=lang)
    except EvaluatorError as exc:
        _fail(exc)
    console.print(f"Report: {files.html}")
    console.print(f"PDF: {files.pdf}" if files.pdf else f"PDF: {files.pdf_note}")


@app.command("compare")
def compare_command(
    candidate: str = typer.Option(..., help="Baseline id of the candidate platform/version."),
    reference: str = typer.Option(..., help="Baseline id of the reference platform/version."),
    store: Optional[Path] = STORE_OPT,
    threshold: float = typer.Option(0.05, help="Smallest relative change that counts."),
    out: Optional[Path] = typer.Option(None, help="Also render the candidate's report with this comparison here."),
    lang: str = typer.Option("en", help="Report language for --out: en or zh."),
) -> None:
    """Compare two baselines op by op and end to end (e.g. two platforms, or two driver versions)."""
    import dataclasses

    from . import baseline, report
    from .config import OutputSettings

    store = store or OutputSettings().store
    try:
        cand = baseline.load(store, candidate)
        comp = baseline.compare(baseline.load(store, reference), cand,
                                threshold=threshold, reference_id=reference, candidate_id=candidate)
        _print_comparison(comp)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            files = report.render(dataclasses.replace(cand, comparison=comp), out, lang=lang)
            console.print(f"Report: {files.html}")
    except EvaluatorError as exc:
        _fail(exc)


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
def baseline_list(model: Optional[str] = typer.Option(None), platform: Optional[str] = typer.Option(None),
                  store: Optional[Path] = STORE_OPT) -> None:
    """List baselines, oldest first."""
    from . import baseline
    from .config import OutputSettings

    try:
        refs = baseline.list_baselines(store or OutputSettings().store, model=model, platform=platform)
    except EvaluatorError as exc:
        _fail(exc)
    t = Table(title="Baselines")
    for col in ("id", "commit"):
        t.add_column(col)
    for r in refs:
        t.add_row(r.tag, r.commit[:10])
    console.print(t)


@baseline_app.command("show")
def baseline_show(baseline_id: str = typer.Argument(..., help="Baseline id."), store: Optional[Path] = STORE_OPT) -> None:
    """Show one baseline's manifest and headline numbers."""
    from . import baseline
    from .config import OutputSettings

    try:
        result = baseline.load(store or OutputSettings().store, baseline_id)
    except EvaluatorError as exc:
        _fail(exc)
    t = Table(title=baseline_id, show_header=False)
    for k, v in baseline.show_rows(result):
        t.add_row(k, str(v))
    console.print(t)


@baseline_app.command("diff")
def baseline_diff(a: str = typer.Argument(..., help="Reference baseline id."),
                  b: str = typer.Argument(..., help="Candidate baseline id."),
                  store: Optional[Path] = STORE_OPT) -> None:
    """Compare two baselines of the same model and platform."""
    from . import baseline
    from .config import OutputSettings

    try:
        comp = baseline.diff(store or OutputSettings().store, a, b)
    except EvaluatorError as exc:
        _fail(exc)
    _print_comparison(comp)


@checklist_app.command("validate")
def checklist_validate(file: Path = typer.Argument(..., help="Checklist YAML.")) -> None:
    """Validate a checklist file."""
    from . import checklist

    try:
        cl = checklist.validate(file)
    except EvaluatorError as exc:
        _fail(exc)
    console.print(f"{file}: valid ({len(cl.items)} items)")


@checklist_app.command("metrics")
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
    try:
        app()
    except EvaluatorError as exc:  # pragma: no cover - commands catch their own; this is the last net
        _say_error(f"error: {exc}")
        sys.exit(2)


if __name__ == "__main__":
    main()
