"""What one checklist metric is: a number measured from a run, with its evidence.

In: a `RunResult`. Out: `Metric(result)` is a finite float, or None when the stage that
measures it did not run (an item on it is then "not evaluated", never passed); `explain`
says where the number came from or why there is none, and `doubt` why it cannot be
trusted. The metric modules (metrics_*.py) each build the metrics of one area on this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ..results import RunResult


@dataclass(frozen=True)
class Metric:
    """One measurable number. `measure` returns None when it was not measured, and
    `explain` says where the number came from (or why there is none): the evidence."""

    name: str
    unit: str
    meaning: str
    measure: Callable[[RunResult], float | None]
    explain: Callable[[RunResult], str] = field(default=lambda r: "")
    # Why the number cannot be trusted (unstable timing, a timer or Amdahl check that
    # disagrees), or "": an item measured on such a number fails, it never passes.
    doubt: Callable[[RunResult], str] = field(default=lambda r: "")
    # A value the true number cannot exceed whatever the doubted evidence hides (a minimum
    # over the rows nothing casts doubt on), or None: a "more is better" item that fails on
    # it fails on clean evidence, however the flagged rows read.
    ceiling: Callable[[RunResult], float | None] = field(default=lambda r: None)

    def __call__(self, result: RunResult) -> float | None:
        value = self.measure(result)
        if value is None:
            return None
        value = float(value)
        return value if math.isfinite(value) else None


def stage_note(result: RunResult, stage: str, fallback: str) -> str:
    """Why a stage's numbers are missing: its recorded error, else `fallback` (it did not run)."""
    err = result.stage_errors.get(stage)
    return f"{stage} stage failed: {err}" if err else fallback
