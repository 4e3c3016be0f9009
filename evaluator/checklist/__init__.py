"""Go/no-go checklists: load and validate the YAML, measure each item, decide.

In: a checklist file (YAML; see checklists/default.yaml) and a `RunResult`. Out: a frozen
`Checklist` (validated with pydantic; `ChecklistProblems` lists every problem, each naming
the file, the line, the item and what is allowed) and a `Verdict` whose outcomes carry the measured value and its
evidence.

Metrics come from one catalogue, `METRICS`: each maps a `RunResult` to a number, or to
None when the stage that measures it did not run. An item whose metric is None is "not
evaluated": it is listed, never passed. The decision is NO-GO when a blocker fails,
CONDITIONAL GO when anything else fails or a required item could not be evaluated, and
GO only when every required item passed (or failed under a waiver that has not expired).

The package: metric.py (what a metric is), metrics_*.py (the metrics by area: kernels,
ops and profile; end to end and soak; upstream and fork; baselines; portability),
catalogue.py (METRICS), loading.py (the file), verdict.py (the decision). Everything
callers use is imported here, so `from evaluator import checklist` is the whole API.
"""

from __future__ import annotations

from pathlib import Path

from ..resources import DEFAULT_CHECKLIST, SHIPPED_CHECKLISTS
from .catalogue import METRICS, describe_metrics
from .loading import COMPARATORS, SEVERITIES, Checklist, ChecklistProblems, Item, Waiver, load, validate
from .metric import Metric
from .metrics_kernels import fused_away, kernel_status, op_label, op_rows, op_speedup
from .verdict import DECISIONS, FAIL_ON, evaluate, exit_code

# Shipped with the package (top-level checklists/ in a checkout); `--checklist production`
# names one of them (or a team's own ./checklists/production.yaml), a path any other file.
CHECKLISTS: Path = SHIPPED_CHECKLISTS

__all__ = [
    "CHECKLISTS",
    "COMPARATORS",
    "DECISIONS",
    "DEFAULT_CHECKLIST",
    "FAIL_ON",
    "METRICS",
    "SEVERITIES",
    "Checklist",
    "ChecklistProblems",
    "Item",
    "Metric",
    "Waiver",
    "describe_metrics",
    "evaluate",
    "exit_code",
    "kernel_status",
    "load",
    "op_label",
    "op_rows",
    "fused_away",
    "op_speedup",
    "validate",
]
