"""This run against the previous baseline, and the trend across baselines.

In: a RunResult's comparison (from baseline.compare: changes, environment changes, its
note) and trend points, and a language's `Strings`/`Fmt`. Out: the comparison section
(counts, changed measurements first, the environment changes that can explain a
regression, the note without the parts this section says in its own words) and the
trend chart with first and latest value per measurement, once there are two baselines.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .. import charts
from ...baseline import plausible_cause
from ...results import RunResult
from ..notes import DROPPED_NOTES, notes_in_words
from ..strings import Fmt, Strings, ct

MAX_ROWS = 60  # long tables (candidates, unchanged comparisons) are cut; the baseline has them all


def comparison_section(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    c = result.comparison
    if c is None:
        return {"present": False, "text": t("text.comparison_none")}
    order = {"regression": 0, "improvement": 1, "new": 2, "gone": 3, "unchanged": 4}
    changes = sorted(c.changes, key=lambda x: (order.get(x.status, 9), x.key))
    shown = [x for x in changes if x.status != "unchanged"]
    rest = [x for x in changes if x.status == "unchanged"]
    room = max(0, MAX_ROWS - len(shown))
    shown += rest[:room]
    rows = [
        {
            "kind": t.get(f"kinds.{x.kind}", x.kind),
            "key": x.key,
            "ref": f.ms(x.reference_ms),
            "cand": f.ms(x.candidate_ms),
            "ratio": f.x(x.ratio),
            "threshold": f.pct(x.threshold),
            "status": t.get(f"change.{x.status}", x.status),
            "cls": {"regression": "bad", "improvement": "good"}.get(x.status, "none"),
        }
        for x in shown
    ]
    counts = {s: sum(x.status == s for x in c.changes) for s in order}
    summary = t("list_sep").join(t(f"counts.{s}", count=n, n=n) for s, n in counts.items() if n) or t("counts.nothing")
    # Causes are the environment fields whose change can plausibly explain a slower
    # measurement (baseline.plausible_cause): the software and hardware under the kernels
    # and the shape of the work. The upstream repo, the checklist, thresholds, soak length
    # and output paths change what is reported, not how fast anything runs.
    env = [{"field": a, "before": b, "now": n, "cause": plausible_cause(a)} for a, b, n in c.environment_changes]
    causes = [e for e in env if e["cause"]]
    cause_text = ""
    if c.regressions:
        cause_text = (
            t(
                "text.causes",
                causes=t("list_sep").join(f"{e['field']} {e['before'] or '-'} → {e['now'] or '-'}" for e in causes),
            )
            if causes
            else t("text.causes_none")
        )
    # The pipeline compares "this run" with the previous baseline: naming it again says nothing.
    same = c.candidate in ("", "this run")
    text = (
        t("text.comparison_ref_this", reference=c.reference)
        if same
        else t("text.comparison_ref", reference=c.reference, candidate=c.candidate)
    )
    return {
        "present": True,
        "text": text,
        "not_comparable": "" if c.comparable else t("text.not_comparable"),
        "summary": summary,
        "note": notes_in_words(c.note, t, drop=DROPPED_NOTES),
        "causes": cause_text,
        "rows": rows,
        "more": t("text.more_rows", count=len(rest) - room, n=len(rest) - room) if len(rest) > room else "",
        "env": env,
    }


def trend_section(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    """The trend chart and table, or None with fewer than two distinct baselines: a
    first baseline compared with itself is no trend (the section says so instead)."""
    if len({p.version for p in result.trend or ()}) < 2:
        return None
    series: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for p in sorted(result.trend, key=lambda p: p.created):
        series[p.key].append((p.version, p.median_ms))
    chart = charts.trend(series, ylabel=ct("chart.trend_y", t), xlabel=ct("chart.version", t))
    rows = []
    for key, pts in series.items():
        first, last = pts[0][1], pts[-1][1]
        rows.append(
            {
                "key": key,
                "first": f"{f.ms(first)} ({pts[0][0]})",
                "latest": f"{f.ms(last)} ({pts[-1][0]})",
                "change": f.x(last / first) if first else f.na,
            }
        )
    return {"chart": chart, "rows": rows[:MAX_ROWS]}
