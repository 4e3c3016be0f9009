"""The metric of this run against the previous baseline of the same model and platform.

In: a `RunResult`'s comparison (made by evaluator/baseline before the verdict). Out: the
`BASELINES` metric: how many measurements taken in both runs regressed; None when there
is no previous baseline, when the two runs measured nothing in common, or when they are
not comparable (another timing policy) and no kernel is gone. A measurement of the
previous baseline that this run did not take at all (a family it did not select, the end
to end under --no-e2e) is "not measured in this run", never a regression.
"""

from __future__ import annotations

from ..results import Change, RunResult
from .metric import Metric


def _not_measured(r: RunResult, c: Change) -> bool:
    """A measurement of the previous baseline that this run did not take: an op of a family
    it did not select (another --families, --ops or --no-fuse), or the end to end under
    --no-e2e. A selected family whose kernel failed is measured, and failed."""
    if c.status != "gone":
        return False
    if c.kind == "e2e":
        return (r.settings or {}).get("e2e") is False
    if r.hot_ops is None:
        return False  # the run stopped before choosing its families: everything gone counts
    measured = {*r.families, *(b.family for b in r.op_bench)}
    return c.key.split(" ", 1)[0] not in measured


def _counted(r: RunResult) -> list[Change]:
    """The comparison's changes that this run measured too (new ones included)."""
    return [x for x in r.comparison.changes if not _not_measured(r, x)]


def _regressions(r: RunResult) -> float | None:
    c = r.comparison
    # A kernel that worked in the previous baseline and is gone now is a regression
    # whatever the timing policy; slower times count only between comparable baselines.
    if c is None:
        return None
    counted = _counted(r)
    gone = [x for x in counted if x.status == "gone"]
    if not c.comparable:
        return float(len(gone)) if gone else None
    if not any(x.status != "new" for x in counted):
        return None  # nothing measured in both runs: no number to judge
    return float(sum(x.status in ("regression", "gone") for x in counted))


def _baseline_explain(r: RunResult) -> str:
    c = r.comparison
    if c is None:
        return "no previous baseline to compare with"
    skipped = [x for x in c.changes if _not_measured(r, x)]
    families = sorted({"end to end" if x.kind == "e2e" else x.key.split(" ", 1)[0] for x in skipped})
    note = ""
    if skipped:
        many = f"{len(skipped)} measurement{'s' if len(skipped) > 1 else ''}"
        note = f"; {many} of {', '.join(families)} not measured in this run"
    if not c.comparable:
        return f"previous baseline {c.reference} not comparable: {c.note}{note}"
    counted = _counted(r)
    if not any(x.status != "new" for x in counted):
        return f"against {c.reference}: nothing measured in both runs{note}"
    regs = [x for x in counted if x.status in ("regression", "gone")]
    both = sum(x.status != "new" for x in counted)
    text = f"against {c.reference}: {len(regs)} of {both} measurements regressed"
    if regs:
        text += " (" + ", ".join(f"{x.key} {x.ratio:.2f}x time" if x.ratio else x.key for x in regs[:5]) + ")"
    return text + note


BASELINES = [
    Metric(
        "baseline.regressions",
        "count",
        "measurements taken in both runs that are slower than the previous baseline by more than the noise "
        "threshold, or gone (a family or the end to end this run did not measure at all is not counted; not "
        "measured when there is no comparable previous baseline)",
        _regressions,
        _baseline_explain,
    ),
]
