"""The checklist table: every item with the evidence behind it, in the report's language.

In: a RunResult with a verdict, and a language's `Strings`/`Fmt`. Out: `_checklist_rows`,
one row per item (failed first, then unmeasured, waived, passed; blockers first within
each), each with its evidence rebuilt from the run for the item's metric, plus what
checklist.evaluate appended (doubts, waivers, optional items) in words. A metric this
version does not know keeps the checklist's own English evidence, so a baseline written
by another version still renders.
"""

from __future__ import annotations

import re
from typing import Callable

from ...checklist import METRICS, fused_away, kernel_status, op_label, op_rows, op_speedup
from ...checklist.metrics_kernels import failing_reasons
from ...results import Outcome, RunResult
from ..notes import flag_in_words, flagged_op_labels, flags_words, mapped, notes_in_words
from ..strings import PER_TARGET, Fmt, Strings, finite
from .e2e import view_name
from .page_one import SEVERITY_ORDER, SYMBOL, item_title
from .portability import port_not_checked, port_sentences


def _stage(result: RunResult, stage: str, t: Strings) -> str:
    err = result.stage_errors.get(stage)
    return t("evidence.stage_failed", stage=stage, error=err) if err else t("evidence.stage_not_run", stage=stage)


def _ev_kernels(r: RunResult, t: Strings, f: Fmt) -> str:
    s = kernel_status(r)
    if s is None:
        return _stage(r, "verify", t)
    bad = [fam for fam, ok in s.items() if not ok]
    text = t("evidence.kernels", ok=sum(s.values()), n=len(s), count=len(s), k=len(r.verify))
    if bad:
        reasons = failing_reasons(r)
        text += t("list_semi") + t("evidence.kernels_failing", families=", ".join(bad))
        if reasons:
            text += f" ({'; '.join(dict.fromkeys(reasons))})"
    return text


def _ev_ops(r: RunResult, t: Strings, f: Fmt) -> str:
    rows, which = op_rows(r)
    if not rows:
        return _stage(r, "bench", t)
    sp = [(b, s) for b in rows if (s := op_speedup(b)) is not None]
    parts = [
        t(
            "evidence.ops",
            count=len(sp),
            n=len(sp),
            which=t("text.ops_model" if which == "model shapes" else "text.ops_standard"),
        )
    ]
    if sp:
        b, s = min(sp, key=lambda x: x[1])
        parts.append(t("evidence.ops_slowest", op=op_label(b), x=f.x_ci(s, b.ratio)))
    failed = [op_label(b) for b in rows if op_speedup(b) is None]
    if failed:
        parts.append(t("evidence.ops_failed", ops=", ".join(failed)))
    away = fused_away(r)
    if away:
        fams = ", ".join(sorted({b.family for b in away}))
        parts.append(t("evidence.ops_fused_away", count=len(away), n=len(away), families=fams))
    return t("list_semi").join(parts)


def _ev_e2e(r: RunResult, t: Strings, f: Fmt) -> str:
    e = r.e2e
    if e is None:
        return _stage(r, "e2e", t)
    if e.swapped is None:
        return t("evidence.e2e_failed", error=e.error or t("none"))
    method = getattr(e, "method", "") or e.reference.timer
    ci = f.interval(getattr(e, "ratio", None))
    parts = [
        t(
            "evidence.e2e",
            ref=f.ms(e.reference.median_ms),
            swapped=f.ms(e.swapped.median_ms),
            method=view_name(method, t) + (t("comma") + ci if ci else ""),
            families=", ".join(e.families) or t("none"),
        )
    ]
    if getattr(e, "calls", ()) or getattr(e, "tilelang_calls", 0) or getattr(e, "fallback_calls", 0):
        parts.append(t("evidence.e2e_calls", tilelang=f.num(e.tilelang_calls), fallback=f.num(e.fallback_calls)))
    if finite(getattr(e, "rel_l2_err", None)):
        parts.append(t("evidence.e2e_rel_l2", err=f.num(e.rel_l2_err, 2)))
    elif finite(e.max_abs_err):
        parts.append(t("evidence.e2e_abs", err=f.num(e.max_abs_err, 2)))
    parts.append(t("evidence.e2e_coverage", coverage=f.pct(e.coverage, 0)))
    if e.error:
        parts.append(e.error)
    return t("list_semi").join(parts)


def _ev_profile(r: RunResult, t: Strings, f: Fmt) -> str:
    if r.hot_ops is None:
        return _stage(r, "profile", t)
    return t("evidence.profile", selected=", ".join(r.hot_ops.selected) or t("none"), n=len(r.hot_ops.ops))


def _ev_soak(r: RunResult, t: Strings, f: Fmt) -> str:
    s = r.soak
    if s is None or not s.window_ms:
        return _stage(r, "soak", t)
    text = t(
        "evidence.soak",
        seconds=f.num(s.seconds),
        iterations=f.num(s.iterations),
        windows=len(s.window_ms),
        first=f.ms(s.window_ms[0]),
        last=f.ms(s.window_ms[-1]),
    )
    notes = notes_in_words("; ".join(s.notes), t)
    return text + (t("list_semi") + notes if notes else "")


def _ev_upstream(r: RunResult, t: Strings, f: Fmt) -> str:
    u = r.upstream
    if u is None:
        return _stage(r, "upstream", t)
    if not u.measured:
        return t("evidence.upstream_not_measured", note=notes_in_words(u.note, t) or t("none"))
    text = t("evidence.upstream", repo=u.repo or "upstream", head=u.head[:10] or "?", as_of=u.as_of or "?")
    note = notes_in_words(u.note, t)
    return text + (t("list_semi") + note if note else "")


def _ev_fork(r: RunResult, t: Strings, f: Fmt) -> str:
    u = r.upstream
    if u is None or not u.measured:
        return _ev_upstream(r, t, f)
    if u.fork_days_behind is None:
        if u.fork is not None and u.fork.reason:
            return t("evidence.fork_not_measured", reason=notes_in_words(u.fork.reason, t))
        return t("evidence.fork_none")
    return t("evidence.fork", behind=f.num(u.fork_behind), ahead=f.num(u.fork_ahead))


def _ev_baseline(r: RunResult, t: Strings, f: Fmt) -> str:
    c = r.comparison
    if c is None:
        return t("evidence.baseline_none")
    if not c.comparable:
        return t("evidence.baseline_not_comparable", reference=c.reference)
    regs = c.regressions
    text = t("evidence.baseline", reference=c.reference, n=len(regs), total=len(c.changes), count=len(regs))
    if regs:
        text += " (" + ", ".join(f"{x.key} {f.x(x.ratio)}" if x.ratio else x.key for x in regs) + ")"
    return text


def _ev_portability(r: RunResult, t: Strings, f: Fmt, metric: str) -> str:
    p = r.portability
    if p is None:
        return port_not_checked(r, t)
    m = PER_TARGET.match(metric)
    if m:
        if m.group(1) not in p.targets:
            return t("evidence.port_not_target", target=m.group(1), targets=", ".join(p.targets))
        return port_sentences(p, t)[p.targets.index(m.group(1))]
    from ... import portability as P  # noqa: PLC0415 - lazy, as in sections/portability.py

    facts = P.target_facts(p)
    good = [x.target for x in facts if len(x.builds) == x.kernels]
    bad = [x.target for x in facts if len(x.builds) < x.kernels]
    text = t("evidence.port", ok=len(good), n=len(facts), count=len(facts), good=", ".join(good) or t("none"))
    return text + (t("list_semi") + t("evidence.port_bad", bad=", ".join(bad)) if bad else "")


_EVIDENCE: dict[str, Callable[[RunResult, Strings, Fmt], str]] = {
    "kernels": _ev_kernels,
    "ops": _ev_ops,
    "e2e": _ev_e2e,
    "profile": _ev_profile,
    "soak": _ev_soak,
    "upstream": _ev_upstream,
    "fork": _ev_fork,
    "baseline": _ev_baseline,
}
# What checklist.evaluate appends to an item's evidence (waivers, optional items).
_EVIDENCE_TAILS = [
    (kind, re.compile(rx))
    for kind, rx in (
        ("doubt", r"cannot pass on this number: (?P<doubt>.*?)(?=; waive|$)"),
        ("optional", r"optional item, does not affect the verdict"),
        ("counts_failed", r"counts as failed under this checklist"),
        ("waived", r"waived by (?P<who>.+?) until (?P<date>\d{4}-\d{2}-\d{2}): (?P<reason>.*)"),
        ("waiver_expired", r"waiver by (?P<who>.+?) expired on (?P<date>\d{4}-\d{2}-\d{2})"),
    )
]


def _doubt(text: str, t: Strings) -> str:
    """checklist's "why this number cannot pass" in words: "flagged: OP (flag, flag); ..."
    for ops, "flag; flag" for the end-to-end number."""
    ops = flagged_op_labels(text)
    if ops is not None:
        return t("evidence.doubt_ops", ops=t("list_semi").join(f"{op} ({flags_words(flags, t)})" for op, flags in ops))
    return t("list_semi").join(w for w in (flag_in_words(x, t) for x in text.split("; ") if x) if w)


def _evidence(o: Outcome, result: RunResult, t: Strings, f: Fmt) -> str:
    """An item's evidence in the report's language, rebuilt from the run; the checklist's
    own English text where the metric is one this version does not know."""
    build = _EVIDENCE.get(o.metric.split(".")[0]) if o.metric in METRICS else None
    if o.metric in METRICS and o.metric.startswith("portability."):
        build = lambda r, t, f: _ev_portability(r, t, f, o.metric)  # noqa: E731 - it needs the target
    if build is None:
        return o.evidence
    parts = [build(result, t, f)]
    for kind, rx in _EVIDENCE_TAILS:
        m = rx.search(o.evidence or "")
        if m:
            kw = m.groupdict()
            if "doubt" in kw:
                kw["doubt"] = _doubt(kw["doubt"], t)
            parts.append(t(f"evidence.{kind}", **kw))
    return t("list_semi").join(p for p in parts if p)


def checklist_rows(result: RunResult, t: Strings, f: Fmt) -> list[dict[str, str]]:
    if result.verdict is None:
        return []
    order = {"fail": 0, "not_evaluated": 1, "waived": 2, "pass": 3}
    rows = []
    for o in sorted(result.verdict.outcomes, key=lambda o: (order.get(o.status, 9), SEVERITY_ORDER.get(o.severity, 9))):
        rows.append(
            {
                "id": o.id,
                "title": item_title(o, t, f),
                "original": mapped("checklist_titles", o.title, t) if t.lang != "en" else "",
                "severity": o.severity,
                "severity_label": t.get(f"severity.{o.severity}", o.severity),
                "metric": o.metric,
                "required": f"{SYMBOL.get(o.comparator, o.comparator)} {f.unit(o.threshold, o.unit)}",
                "measured": f.unit(o.value, o.unit),
                "status": o.status,
                "status_label": t.get(f"status.{o.status}", o.status),
                "evidence": _evidence(o, result, t, f),
                "rationale": o.rationale,
            }
        )
    return rows
