"""The verdict: every checklist item measured against a run, and the decision.

In: a validated `Checklist` and a `RunResult`. Out: a `Verdict` whose outcomes carry the
measured value, its status (pass, fail, waived, not_evaluated) and its evidence. NO-GO
when a blocker fails on a number nothing casts doubt on; INCONCLUSIVE when the evidence
cannot carry a decision (nothing was rewritten, no call ran in TileLang, the model's own
output is broken, or a blocker's or the end-to-end number stayed flagged after
re-measurement), with what to rerun and how; CONDITIONAL GO when anything else fails or
a required item could not be evaluated; GO only when every required item passed (or
failed under a waiver that has not expired). An item whose metric is None is "not
evaluated": listed, never passed. `exit_code` turns the decision into `--fail-on`'s exit
code; INCONCLUSIVE trips it as NO-GO does (no evidence is no licence to proceed).
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..results import Outcome, RunResult, Verdict
from .catalogue import METRICS
from .loading import COMPARATORS, Checklist

DECISIONS = ("GO", "CONDITIONAL GO", "NO-GO", "INCONCLUSIVE")


def evaluate(checklist: Checklist, result: RunResult, today: date | None = None) -> Verdict:
    """Measure every item against the run and decide GO / CONDITIONAL GO / NO-GO / INCONCLUSIVE."""
    today = today or date.today()
    outcomes: list[Outcome] = []
    counted_fail: set[str] = set()  # severities that count as failed for the decision
    clean_fail: set[str] = set()  # severities failed on a number nothing casts doubt on
    doubted: list[tuple[Any, str]] = []  # blocker or end-to-end items (checklist items) failed only for doubt
    held_back = False  # something keeps the decision from a plain GO
    for item in checklist.items:
        metric = METRICS[item.metric]
        value = metric(result)
        evidence = metric.explain(result)
        waiver = item.waiver
        waiver_active = waiver is not None and today <= waiver.expires
        passes = value is not None and COMPARATORS[item.comparator](value, item.threshold)
        doubt = metric.doubt(result) if value is not None else ""
        # the rows nothing casts doubt on fail it already: its flags cannot change that
        stands = bool(doubt) and not passes and _fails_on_clean_rows(item, metric.ceiling(result))
        if value is None:
            status = "not_evaluated"
            if not item.required:
                evidence += "; optional item, does not affect the verdict"
            elif checklist.on_not_evaluated == "fail":
                counted_fail.add(item.severity)
                evidence += "; counts as failed under this checklist"
            else:
                held_back = True
        elif doubt and not waiver_active and not stands and (passes or _undermines_fail(doubt)):
            # An unstable, stalled or contradicted number cannot pass an item, whatever it
            # reads; a number that fails anyway fails on it, unless the flag is one that can
            # only have made it worse (a stalled TileLang side).
            status = "fail"
            counted_fail.add(item.severity)
            evidence += f"; cannot pass on this number: {doubt}"
            if item.severity == "blocker" or item.metric == "e2e.speedup":
                doubted.append((item, doubt))
        elif passes:
            status = "pass"
        elif waiver_active:
            status = "waived"
            evidence += f"; waived by {waiver.who} until {waiver.expires.isoformat()}: {waiver.reason}"
        else:
            status = "fail"
            counted_fail.add(item.severity)
            clean_fail.add(item.severity)
            if doubt:  # flags that only flatter the number: it fails on it all the same
                evidence += f"; flagged, the fail stands: {doubt}"
        if waiver is not None and not waiver_active and status == "fail":
            evidence += f"; waiver by {waiver.who} expired on {waiver.expires.isoformat()}"
        outcomes.append(
            Outcome(
                id=item.id,
                title=item.title,
                severity=item.severity,
                metric=item.metric,
                comparator=item.comparator,
                threshold=item.threshold,
                value=value,
                status=status,
                rationale=item.rationale,
                evidence=evidence.strip("; "),
                unit=metric.unit,
            )
        )
    reasons, rerun = _inconclusive(result, doubted)
    if "blocker" in clean_fail:
        decision = "NO-GO"  # a blocker failed on clean evidence: no doubt elsewhere changes that
    elif reasons:
        decision = "INCONCLUSIVE"
    elif "blocker" in counted_fail:
        decision = "NO-GO"
    elif counted_fail or held_back:
        decision = "CONDITIONAL GO"
    else:
        decision = "GO"
    if decision != "INCONCLUSIVE":
        reasons, rerun = (), ()
    label = f"{checklist.name} ({Path(checklist.source).name})" if checklist.source else checklist.name
    return Verdict(
        decision=decision,
        checklist=label,
        outcomes=tuple(outcomes),
        inconclusive=tuple(reasons),
        rerun=tuple(dict.fromkeys(rerun)),
    )


# Flags that can only have made a speedup look better than it is (TileLang timed faster
# than the roof allows, PyTorch's side stalled): they cast doubt on a pass, never on a fail.
_FLATTERING = ("TileLang faster than", "stalled: PyTorch")


def _flags_of(doubt: str) -> list[str]:
    """The single flags in a doubt: an op's "flagged: OP (a, b); OP2 (c)", or the end to
    end's "a; b"."""
    inner = re.findall(r"\(([^()]*)\)", doubt) if doubt.startswith("flagged: ") else []
    parts = [p for group in inner for p in group.split(", ")] if inner else doubt.split("; ")
    return [p.strip() for p in parts if p.strip()]


def _fails_on_clean_rows(item: Any, ceiling: float | None) -> bool:
    """Whether a "more is better" item fails on its metric's ceiling (the most the number
    can be, whatever its flagged rows hide)."""
    if ceiling is None or item.comparator not in (">=", ">"):
        return False
    return not COMPARATORS[item.comparator](ceiling, item.threshold)


def _undermines_fail(doubt: str) -> bool:
    """Whether a doubt could have made a number fail that would otherwise pass: any flag
    but those that can only flatter it (an unstable or contradicted timing goes either
    way; PyTorch faster than the roof, a stalled TileLang side or a reference with NaN of
    its own can only make TileLang look worse)."""
    return any(not f.startswith(_FLATTERING) for f in _flags_of(doubt))


def _inconclusive(result: RunResult, doubted: list[tuple[Any, str]]) -> tuple[list[str], list[str]]:
    """Why the evidence cannot carry a decision, and what to rerun and how ([] where it can)."""
    reasons: list[str] = []
    rerun: list[str] = []
    hot = result.hot_ops
    if hot is not None and not result.families and "profile" in result.finished:
        top = ", ".join(f"{o.family} {o.share:.0%}" for o in hot.ops[:3]) or "no operator at all"
        reasons.append(
            f"nothing was rewritten: none of the model's profiled time is in a family with a TileLang kernel ({top})"
        )
        rerun.append(
            "nothing to rerun on this model as it is: its time is in operators TileLang has no kernel for "
            "here; `evaluate --model M --ops N` rewrites the N hottest families that have one"
        )
    e = result.e2e
    if e is not None and e.swapped is not None:
        if e.tilelang_calls == 0 and result.families:
            why = sorted(((n, r) for c in e.calls for r, n in c.fallback.items()), reverse=True)
            said = "; ".join(f"{r} ({n})" for n, r in why[:3]) or "no call of the chosen families was seen"
            reasons.append(f"no call ran in TileLang: every call of {', '.join(result.families)} fell back ({said})")
            rerun.append(
                "rerun with the families and shapes the model calls (`--families`, `--max-shapes`), "
                "as the fallback reasons say"
            )
    for item, doubt in doubted:
        reasons.append(f"'{item.title}' ({item.metric}) cannot be decided on its number: {doubt}")
        if "carries no signal" in doubt:  # outputs.NO_SIGNAL's words
            rerun.append("give the model inputs that make its output vary (a factory returning real data), then rerun")
        elif "the reference itself has" in doubt:
            rerun.append("fix the model or its inputs so that PyTorch's own output is finite, then rerun")
        else:
            rerun.append(
                "rerun on an idle machine (nothing else running), on the accelerator being evaluated "
                "(`--device cuda`), or with more rounds (`--reps 50`)"
            )
    return reasons, rerun


FAIL_ON = ("no-go", "conditional")


def exit_code(verdict: Verdict | None, fail_on: str | None) -> int:
    """`--fail-on` as a CI gate: 1 when the decision is at or below the named level, else 0.
    Without a verdict, or with an INCONCLUSIVE one, a gate cannot pass (there is no
    evidence either way)."""
    if fail_on is None:
        return 0
    if fail_on not in FAIL_ON:
        raise ConfigError(f"--fail-on '{fail_on}' is not allowed; use one of {', '.join(FAIL_ON)}")
    if verdict is None:
        return 1
    tripped = {"no-go": ("NO-GO", "INCONCLUSIVE"), "conditional": ("NO-GO", "INCONCLUSIVE", "CONDITIONAL GO")}[fail_on]
    return 1 if verdict.decision in tripped else 0
