"""The metric of this run against the previous baseline of the same model and platform.

In: a `RunResult`'s comparison (made by evaluator/baseline before the verdict). Out: the
`BASELINES` metric: how many measurements regressed; None when there is no previous
baseline, or when it is not comparable (another timing policy) and no kernel is gone.
"""

from __future__ import annotations

from ..results import RunResult
from .metric import Metric


def _regressions(r: RunResult) -> float | None:
    c = r.comparison
    # A kernel that worked in the previous baseline and is gone now is a regression
    # whatever the timing policy; slower times count only between comparable baselines.
    if c is None:
        return None
    gone = [x for x in c.changes if x.status == "gone"]
    if not c.comparable:
        return float(len(gone)) if gone else None
    return float(len(c.regressions))


def _baseline_explain(r: RunResult) -> str:
    c = r.comparison
    if c is None:
        return "no previous baseline to compare with"
    if not c.comparable:
        return f"previous baseline {c.reference} not comparable: {c.note}"
    regs = c.regressions
    text = f"against {c.reference}: {len(regs)} of {len(c.changes)} measurements regressed"
    if regs:
        text += " (" + ", ".join(f"{x.key} {x.ratio:.2f}x time" if x.ratio else x.key for x in regs[:5]) + ")"
    return text


BASELINES = [
    Metric("baseline.regressions", "count",
           "measurements slower than the previous baseline by more than the noise threshold "
           "(not measured when there is no comparable previous baseline)",
           _regressions, _baseline_explain),
]
