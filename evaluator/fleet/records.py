"""What a sweep produces: one `Cell` per model x platform, and the `FleetResult` holding them.

In: what a task or the driver knows about one run (its verdict, speedup, baseline, run
folder, report, error). Out: the frozen records fleet.json is written from and read back
into (page.py), and the one-line error text every part of the fleet uses (`_one_line`,
`_error_line`), so that a cell, a plan mistake and a crashed task read alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EvaluatorError

SCHEMA_VERSION = 1
ERROR_CHARS = 300


@dataclass(frozen=True)
class Cell:
    """One model on one platform: the run it made, or why it failed."""

    model: str  # the model's name (row)
    platform: str  # the platform's name (column)
    status: str  # "ok" | "failed"
    spec: str = ""
    device: str = ""  # asked for ("auto" | "cpu" | "cuda")
    verdict: str | None = None  # "GO" | "CONDITIONAL GO" | "NO-GO"; also on a failed run that reached it
    speedup: float | None = None  # end to end, the verdict's view
    baseline: str | None = None  # baseline id in the store
    run_dir: Path | None = None
    report: Path | None = None  # report.html
    error: str = ""  # one line
    traceback: Path | None = None  # for an error that is not an EvaluatorError
    wall_s: float = 0.0  # inside the task: build, run, report
    host: str = ""  # the node it ran on
    hardware: str = ""  # the device it measured, e.g. "NVIDIA H200"
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class FleetResult:
    name: str
    plan: Path
    folder: Path  # the sweep folder: each cell's runs, and the summary by default
    store: Path
    ray: str  # "local (N CPUs)" or the cluster's address
    created: str  # ISO timestamp
    models: tuple[str, ...]  # rows, in plan order
    platforms: tuple[str, ...]  # columns, in plan order
    cells: tuple[Cell, ...]  # model-major, plan order
    wall_s: float = 0.0
    interrupted: bool = False
    schema_version: int = SCHEMA_VERSION

    def cell(self, model: str, platform: str) -> Cell:
        return next(c for c in self.cells if c.model == model and c.platform == platform)

    @property
    def failed(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if not c.ok)


def one_line(text: str, limit: int = ERROR_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_line(exc: BaseException) -> str:
    # Our own errors are already a sentence for the user; anything else keeps its type.
    return one_line(str(exc) if isinstance(exc, EvaluatorError) else f"{type(exc).__name__}: {exc}")
