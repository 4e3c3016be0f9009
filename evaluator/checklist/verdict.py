"""The verdict: every checklist item measured against a run, and the decision.

In: a validated `Checklist` and a `RunResult`. Out: a `Verdict` whose outcomes carry the
measured value, its status (pass, fail, waived, not_evaluated) and its evidence. NO-GO
when a blocker fails; CONDITIONAL GO when anything else fails or a required item could
not be evaluated; GO only when every required item passed (or failed under a waiver that
has not expired). An item whose metric is None is "not evaluated": listed, never passed.
`exit_code` turns the decision into `--fail-on`'s exit code.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from ..errors import ConfigError
from ..results import Outcome, RunResult, Verdict
from .catalogue import METRICS
from .loading import COMPARATORS, Checklist

DECISIONS = ("GO", "CONDITIONAL GO", "NO-GO")


def evaluate(checklist: Checklist, result: RunResult, today: date | None = None) -> Verdict:
    """Measure every item against the run and decide GO / CONDITIONAL GO / NO-GO."""
    today = today or date.today()
    outcomes: list[Outcome] = []
    counted_fail: set[str] = set()  # severities that count as failed for the decision
    held_back = False  # something keeps the decision from a plain GO
    for item in checklist.items:
        metric = METRICS[item.metric]
        value = metric(result)
        evidence = metric.explain(result)
        waiver = item.waiver
        waiver_active = waiver is not None and today <= waiver.expires
        if value is None:
            status = "not_evaluated"
            if not item.required:
                evidence += "; optional item, does not affect the verdict"
            elif checklist.on_not_evaluated == "fail":
                counted_fail.add(item.severity)
                evidence += "; counts as failed under this checklist"
            else:
                held_back = True
        elif (doubt := metric.doubt(result)) and not waiver_active:
            # An unstable or contradicted number cannot pass an item, whatever it reads.
            status = "fail"
            counted_fail.add(item.severity)
            evidence += f"; cannot pass on this number: {doubt}"
        elif COMPARATORS[item.comparator](value, item.threshold):
            status = "pass"
        elif waiver_active:
            status = "waived"
            evidence += f"; waived by {waiver.who} until {waiver.expires.isoformat()}: {waiver.reason}"
        else:
            status = "fail"
            counted_fail.add(item.severity)
        if waiver is not None and not waiver_active and status == "fail":
            evidence += f"; waiver by {waiver.who} expired on {waiver.expires.isoformat()}"
        outcomes.append(Outcome(id=item.id, title=item.title, severity=item.severity, metric=item.metric,
                                comparator=item.comparator, threshold=item.threshold, value=value,
                                status=status, rationale=item.rationale, evidence=evidence.strip("; "),
                                unit=metric.unit))
    if "blocker" in counted_fail:
        decision = "NO-GO"
    elif counted_fail or held_back:
        decision = "CONDITIONAL GO"
    else:
        decision = "GO"
    label = f"{checklist.name} ({Path(checklist.source).name})" if checklist.source else checklist.name
    return Verdict(decision=decision, checklist=label, outcomes=tuple(outcomes))


FAIL_ON = ("no-go", "conditional")


def exit_code(verdict: Verdict | None, fail_on: str | None) -> int:
    """`--fail-on` as a CI gate: 1 when the decision is at or below the named level, else 0.
    Without a verdict a gate cannot pass (there is no evidence either way)."""
    if fail_on is None:
        return 0
    if fail_on not in FAIL_ON:
        raise ConfigError(f"--fail-on '{fail_on}' is not allowed; use one of {', '.join(FAIL_ON)}")
    if verdict is None:
        return 1
    tripped = {"no-go": ("NO-GO",), "conditional": ("NO-GO", "CONDITIONAL GO")}[fail_on]
    return 1 if verdict.decision in tripped else 0
