"""What the commands draw on the terminal: the progress bars and the rich tables.

In: results (a run's outcome, op benchmarks, a portability matrix, a comparison, upstream
health, baselines, the metric catalogue). Out: tables printed on `console` (stdout) and
progress on the console a command chooses; nothing here decides or computes anything.
Piped output (CI logs, `| tee`) is 140 columns wide rather than wrapped at 80.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

console = Console(width=None if sys.stdout.isatty() else 140)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 140)


class _Progress(Progress):
    """A stage an error or Ctrl-C stopped is not left spinning above the error line, and a
    display with no finished stage leaves nothing (not even a blank line) behind."""

    def __exit__(self, exc_type, exc_val, exc_tb) -> None:
        if exc_type is not None:
            for task in list(self.tasks):
                if not task.finished:
                    self.remove_task(task.id)
            if not self.tasks:
                # Live alone: Progress.stop adds a blank line on a console that is not a terminal.
                self.live.transient = True
                self.live.stop()
                return
        super().__exit__(exc_type, exc_val, exc_tb)


def progress(on: Console) -> Progress:
    """The progress display every long command uses; `on` says which stream it goes to."""
    return _Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=on,
    )


class RichReporter:
    """Draws the pipeline's progress with rich; one bar per stage."""

    def __init__(self, progress: Progress, on_folder: Callable[[Path], None] | None = None):
        self.p = progress
        self.task = None
        self.on_folder = on_folder

    def folder(self, run_dir: Path) -> None:
        if self.on_folder is not None:
            self.on_folder(run_dir)

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
            self.p.update(
                self.task,
                completed=t.total or 1,
                total=t.total or 1,
                description=f"[green]✓[/] {self.name}" + (f" [dim]— {text}[/]" if text else ""),
            )
            self.task = None

    def info(self, text: str) -> None:
        self.p.console.print(f"  {text}")

    def _finish(self) -> None:
        if self.task is not None:
            self.done()


def config_text(config: dict) -> str:
    short = {"num_stages": "stages", "threads": "thr", "swizzle": "swz"}
    return " ".join(f"{short.get(k, k.replace('block_', 'b'))}={v}" for k, v in config.items())


def _seconds(s: float | None) -> str:
    # Two digits below a second: a compile Inductor's on-disk cache served takes 0.05 s, not 0.0.
    return "—" if s is None else (f"{s:.2g}" if s < 1 else f"{s:.1f}")


def compiled_cells(c) -> tuple[str | Text, str, str]:
    """The torch.compile side as (ms, TileLang vs compiled, compile seconds); where it did
    not run, its reason stands in the first cell instead of a number."""
    if c is None:
        return "—", "—", "—"
    if c.timing is None:
        # Text, not markup: Dynamo's reasons quote code, which may hold [brackets].
        return Text(c.error or "not measured"), "—", _seconds(c.compile_s)
    ratio = f"{c.ratio.value:.3g}x" if c.ratio is not None and c.ratio.value == c.ratio.value else "—"
    return f"{c.timing.median_ms:.4g}", ratio, _seconds(c.compile_s)


def _has_compiled(rows) -> bool:
    return any(getattr(b, "compiled", None) is not None for b in rows)


# ---------------------------------------------------------------- evaluate --model: the summary


def _hot_ops_table(r) -> Table:
    t = Table(title="Hot operators (one forward pass)")
    for col in ("family", "time ms", "share", "calls", "TileLang kernel", "shapes"):
        t.add_column(col)
    for o in r.hot_ops.ops:
        mark = "rewritten" if o.family in r.hot_ops.selected else ("available" if o.has_kernel else "no")
        t.add_row(
            o.family,
            f"{o.time_ms:.3f}",
            f"{100 * o.share:.1f}%",
            str(o.calls),
            mark,
            " ".join(o.shapes[:4]) + (" …" if len(o.shapes) > 4 else ""),
        )
    return t


def _op_bench_table(r) -> Table:
    with_compiled = _has_compiled(r.op_bench)
    t = Table(
        title=f"Rewritten: {', '.join(r.families)} — TileLang against PyTorch"
        + (" and torch.compile" if with_compiled else "")
    )
    cols = ["family", "shape", "TileLang ms", "PyTorch ms", "speedup"]
    cols += ["compiled ms", "vs compiled"] if with_compiled else []
    for col in (*cols, "correct", "config"):
        t.add_column(col)
    for b in r.op_bench:
        passed = [v.passed for v in r.verify if v.family == b.family and any(c.shape == b.shape for c in v.cases)]
        t.add_row(
            b.family,
            "x".join(map(str, b.shape)),
            f"{b.tilelang.median_ms:.4g}" if b.tilelang else "—",
            f"{b.torch.median_ms:.4g}",
            f"{b.speedup:.3g}x" if b.speedup else "—",
            *(compiled_cells(b.compiled)[:2] if with_compiled else ()),
            ("yes" if all(passed) else "NO") if passed else "—",
            config_text(b.config) if b.config else (b.error or "—"),
        )
    return t


def compiled_line(c) -> str:
    """End to end against torch.compile in one line, or why it could not be compared."""
    if c is None:
        return ""
    if c.timing is None:
        return f"torch.compile ({c.mode}): {c.error}"
    vs = (
        f"TileLang is {c.ratio.value:.3g}x torch.compile end to end"
        if c.ratio is not None and c.ratio.value == c.ratio.value
        else "torch.compile"
    )
    return f"{vs} ({c.timing.median_ms:.3f} ms compiled, mode {c.mode}; compile {_seconds(c.compile_s)} s)" + (
        f"; {c.note}" if c.note else ""
    )


def print_summary(outcome, log=None) -> None:
    """A finished (or resumed) run: its tables, the verdict with what failed, and its files."""
    r = outcome.result
    if r.hot_ops:
        console.print(_hot_ops_table(r))
    if r.op_bench:
        console.print(_op_bench_table(r))
    if r.portability:
        console.print(portability_table(r.portability))
    if r.e2e:
        e = r.e2e
        console.print(_e2e_line(e), markup=False, highlight=False)
        if e.calls or e.not_chosen:
            console.print(calls_table(e))
        if compiled_line(getattr(e, "compiled", None)):
            console.print(compiled_line(e.compiled), markup=False, highlight=False)
    if r.verdict:
        colour = {"GO": "green", "CONDITIONAL GO": "yellow", "NO-GO": "red", "INCONCLUSIVE": "magenta"}.get(
            r.verdict.decision, "white"
        )
        console.print(f"\nVerdict: [bold {colour}]{r.verdict.decision}[/]  ({r.verdict.checklist})")
        for why in r.verdict.inconclusive:
            console.print(f"  why: {why}", markup=False, highlight=False)
        for step in r.verdict.rerun:
            console.print(f"  rerun: {step}", markup=False, highlight=False)
        for o in r.verdict.outcomes:
            if o.status in ("fail", "not_evaluated"):
                console.print(f"  {o.status.replace('_', ' '):>13}  [{o.severity}] {o.title}", markup=False)
    console.print(f"\nRun folder: {outcome.run_dir}")
    if outcome.html:
        console.print(f"Report: {outcome.html}")
    if outcome.pdf:
        console.print(f"PDF: {outcome.pdf}" + (f" ({outcome.pdf_note})" if outcome.pdf_note else ""))
    elif outcome.pdf_note:
        console.print(outcome.pdf_note)
    if r.baseline:
        console.print(f"Baseline: {r.baseline.tag} ({r.baseline.store})")
    if log is not None:
        console.print(f"Other tools' output (TileLang, Inductor, warnings): {log}; -v shows it here")


def calls_table(e) -> Table:
    """Every call a family knows, in the checked forward pass: in TileLang or in PyTorch,
    and why (the three most frequent reasons)."""
    from ..results import family_calls

    t = Table(title="Calls by family (one forward pass)")
    for col, just in (("family", "left"), ("TileLang", "right"), ("PyTorch", "right"), ("why in PyTorch", "left")):
        t.add_column(col, justify=just)
    for row in family_calls(e):
        why = "; ".join(f"{r} ({n})" for r, n in row.reasons[:3]) + ("; ..." if len(row.reasons) > 3 else "")
        t.add_row(Text(row.family), str(row.tilelang), str(row.pytorch), Text(why or "-"))
    return t


def _e2e_line(e) -> str:
    """One line: both times, the ratio, and what the output check found (NaN counts, a
    reference without signal) in words."""
    if e.swapped is None:
        return f"End to end: swap-in failed ({e.error})"
    speed = f"{e.speedup:.3g}x" if e.speedup is not None else "no ratio"
    if e.nonfinite:
        said = f"outputs FAIL: {e.error}"
    elif e.tilelang_calls == 0:
        said = "no call ran in TileLang: the model was compared with itself"
    elif e.no_signal:
        said = f"outputs not compared with any signal: {e.no_signal}"
    elif e.outputs_match:
        said = f"outputs match (max abs err {e.max_abs_err:.2g})"
    else:
        said = f"outputs DIFFER: {e.error}"
    return f"End to end: {e.reference.median_ms:.3f} ms -> {e.swapped.median_ms:.3f} ms ({speed}), {said}"


# ---------------------------------------------------------------- the sub-commands' tables


_PORT_STYLE = {"lowers": "green", "needs_retuning": "yellow", "fails": "red"}


def portability_table(p) -> Table:
    """The kernel x target matrix: one row per kernel and config (the tuned one, the
    family's default), one column per target; each cell lowers / re-tune / fails with
    its reason and, where one was found, the config that fits."""
    from ..portability import cell_text, kernel_label

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
            t.add_row(
                Text(label),
                Text(kind),
                *(Text("—") if c is None else Text(cell_text(c), style=_PORT_STYLE.get(c.status, "")) for c in row),
            )
    return t


def bench_table(family: str, dtype: str, rows) -> Table:
    """`evaluate bench`: one row per shape, TileLang against PyTorch (and torch.compile:
    its time, TileLang's ratio to it and its compile seconds) with rates and roofs."""
    with_compiled = _has_compiled([b for _, b in rows])
    modes = sorted({b.compiled.mode for _, b in rows if b.compiled is not None})
    t = Table(
        title=f"{family} ({dtype}) — TileLang against PyTorch"
        + (f" and torch.compile ({', '.join(modes)})" if with_compiled else "")
    )
    cols = ["shape", "TileLang ms", "PyTorch ms", "ratio"]
    cols += ["compiled ms", "vs compiled", "compile s"] if with_compiled else []
    for col in (*cols, "TileLang TFLOP/s", "TileLang GB/s", "% of roof (TL / PyTorch)", "config"):
        t.add_column(col)
    for tk, b in rows:
        t.add_row(
            "x".join(map(str, b.shape)),
            f"{b.tilelang.median_ms:.4g}" if b.tilelang else "—",
            f"{b.torch.median_ms:.4g}",
            f"{b.speedup:.3g}x" if b.speedup else "—",
            *(compiled_cells(b.compiled) if with_compiled else ()),
            f"{b.tilelang_tflops:.3g}" if b.tilelang_tflops else "—",
            f"{b.tilelang_gbps:.3g}" if b.tilelang_gbps else "—",
            f"{b.tilelang_roof_pct or 0:.0f}% / {b.torch_roof_pct or 0:.0f}%" if b.torch_roof_pct else "—",
            config_text(tk.config) if tk.config else b.error,
        )
    return t


def print_comparison(comp) -> None:
    """`evaluate compare` and `baseline diff`: the changes, then what may explain them."""
    from .. import baseline

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


def upstream_table(repo: str, rows) -> Table:
    t = Table(title=f"Upstream health: {repo}")
    for col in ("metric", "value", "meaning"):
        t.add_column(col)
    for row in rows:
        t.add_row(*(Text(v) for v in row))  # repository text must not be read as rich markup
    return t


def baselines_table(refs) -> Table:
    t = Table(title="Baselines")
    for col in ("id", "commit"):
        t.add_column(col)
    for r in refs:
        t.add_row(r.tag, r.commit[:10])
    return t


def baseline_table(baseline_id: str, rows) -> Table:
    t = Table(title=baseline_id, show_header=False)
    for k, v in rows:
        t.add_row(k, str(v))
    return t


def metrics_table(metrics: dict) -> Table:
    t = Table(title="Checklist metrics")
    for col in ("metric", "unit", "meaning"):
        t.add_column(col)
    for name, m in sorted(metrics.items()):
        t.add_row(name, m.unit, m.meaning)
    return t
