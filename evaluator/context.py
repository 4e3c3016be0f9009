"""What the stages share besides the result: the run's context and its progress reporter.

In: the config, the loaded model, the device, the run folder. Out: a `Context` the stage
functions read (and whose kernel table they fill), and `Reporter`, the progress
callbacks the CLI draws as progress bars (the default does nothing: tests, library use).
A stage is `stage(context, result) -> result`, in the stage folder it belongs to
(`profiling/stage.py`, `tuning/stage.py`, ...); `pipeline.py` orders them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from . import kernels
from .config import Config
from .models import LoadedModel
from .results import Environment, Hardware, RunResult, parse_shape, to_dict
from .routing import router as swap


class Reporter:
    """Progress callbacks; the default does nothing (tests, library use)."""

    def stage(self, name: str, total: int | None = None) -> None: ...

    def update(self, text: str) -> None:
        """Say what the current stage is doing now."""

    def advance(self, text: str = "") -> None:
        """One unit of the current stage's total is done."""

    def done(self, text: str = "") -> None: ...

    def info(self, text: str) -> None: ...

    def folder(self, run_dir: Path) -> None:
        """The run's folder exists: files kept for the run can move there now, so that a
        run killed before its end leaves them in its folder, not beside it."""


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
            self.table = swap.KernelTable(
                dtype, target, build=lambda f, s, c: kernels.get(f).build(s, dtype, c, target)
            )
            self._cold_shapes(result)
        if self._table_from < 0 and result.tuned:
            verified = {(b.family, tuple(b.shape)): b.verified for b in result.op_bench}
            for t in result.tuned:
                if t.config is None:
                    self.table.add(t.family, t.shape, None, None, verified=False, why_not="no candidate worked")
                    continue
                kernel = kernels.get(t.family).build(t.shape, t.dtype, t.config, self.hw.target)
                ok = verified.get((t.family, tuple(t.shape)), False)
                self.table.add(
                    t.family, t.shape, t.config, kernel, verified=ok, why_not="" if ok else "kernel failed verification"
                )
        self._table_from = len(result.tuned)
        return self.table

    def _cold_shapes(self, result: RunResult) -> None:
        """Every profiled shape of a chosen family, entered without a kernel and with the
        reason the kernels stage leaves it: a tuned kernel takes its place, so what stays
        is the cold shapes --shape-share (or --max-shapes) left out, and a call at one
        falls back saying that, not that something failed to tune. Which shapes fall
        under the share follows their measured times, so on a busy CPU it can move."""
        hot = result.hot_ops
        if hot is None:
            return
        p = self.cfg.profile
        why = f"cold shape, left out by --shape-share {p.shape_share:g}" + (
            f" or --max-shapes {p.max_shapes}" if p.max_shapes else ""
        )
        for name in hot.selected:
            fam = kernels.get(name)
            fused = next((fu for fu in hot.fusions if fu.family == name), None)
            op = next((o for o in hot.ops if o.family == fam.profile_family), None)
            for text in fused.shapes if fused is not None else op.shapes if op is not None else ():
                self.table.add(name, parse_shape(text), None, None, verified=False, why_not=why)
