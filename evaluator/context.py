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
from .results import Environment, Hardware, RunResult, to_dict
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
