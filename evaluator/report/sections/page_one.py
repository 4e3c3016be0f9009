"""Page one, for a manager: the verdict and five numbers that cannot contradict it.

In: a RunResult (its verdict from checklist.evaluate, or none) and a language's
`Strings`/`Fmt`. Out: `_summary`, the verdict banner's dict (decision, one sentence,
every failed item in plain words, what would change the verdict, the CPU caveat,
unmeasured, optional and waived items, next steps, and one line on how TileLang compares
with torch.compile where the run measured it), and `_headlines`, the five key-number
cards; a card is green only when its item passed and nothing casts doubt on the number.
The helpers that name items and conditions (`_item_title`, `_SYMBOL`, ...) are shared
with the checklist table (evidence.py).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from ...checklist import METRICS, kernel_status, op_label, op_rows, op_speedup
from ...results import Outcome, Ratio, RunResult, Verdict, family_calls
from ..notes import e2e_flags, flag_in_words, flagged_op_labels, flags_words, mapped, op_flags
from ..strings import Fmt, Strings, finite, plural_form, num
from .e2e import view_name, compiled_sentence


SYMBOL = {">=": "≥", "<=": "≤", "==": "=", "!=": "≠", ">": ">", "<": "<"}
_DECISION_CLASS = {"GO": "go", "CONDITIONAL GO": "conditional", "NO-GO": "nogo", "INCONCLUSIVE": "inconclusive"}
SEVERITY_ORDER = {"blocker": 0, "major": 1, "minor": 2}


def _outcome(verdict: Verdict | None, metric: str) -> Outcome | None:
    if verdict is None:
        return None
    got = [o for o in verdict.outcomes if o.metric == metric]
    for status in ("fail", "waived", "pass", "not_evaluated"):
        for o in got:
            if o.status == status:
                return o
    return None


def _metric_status(verdict: Verdict | None, metric: str) -> str:
    o = _outcome(verdict, metric)
    return "none" if o is None or o.status == "not_evaluated" else o.status


def _is_optional(o: Outcome) -> bool:
    return "optional item" in o.evidence


def _waiver_date(o: Outcome) -> str:
    m = re.search(r"until (\d{4}-\d{2}-\d{2})", o.evidence)
    return m.group(1) if m else "?"


def item_title(o: Outcome, t: Strings, f: Fmt) -> str:
    """The item's own title in English; in other languages a description built from the
    metric (checklist files are written in one language, the report in several)."""
    if t.lang == "en":
        return o.title
    return f"{t.metric(o.metric, 'label')} {SYMBOL.get(o.comparator, o.comparator)} {f.unit(o.threshold, o.unit)}"


_DOUBT = "cannot pass on this number: "


def _doubt(o: Outcome) -> str:
    """Why a failed item's number could not pass whatever it read (a flag the checklist
    put in its evidence: unstable, contradicted), or ""."""
    head, sep, tail = (o.evidence or "").partition(_DOUBT)
    return tail.split("; waiver")[0].strip() if sep and o.status == "fail" else ""


def _doubt_words(doubt: str, t: Strings) -> str:
    """A doubt in the report's language: the flags of one op ("flagged: softmax 1024x128
    float32 (TileLang faster than ...)"), or the end-to-end number's "; "-joined flags."""
    ops = flagged_op_labels(doubt)
    if ops is not None:
        return t("list_semi").join(t("summary.flagged_op", op=op, flags=flags_words(flags, t)) for op, flags in ops)
    return flag_in_words(doubt, t)


def _condition(o: Outcome, t: Strings, f: Fmt) -> str:
    """ "Slowest op speedup ≥ 0.50× (now 0.31×)": an item as a condition on its number; one
    failed on a flagged number asks for a number that can be trusted instead, since its
    reading may already meet the threshold (transformers GPT-2's 1.36x against >= 0.95x on
    the H200, 2026-12-02)."""
    kw = dict(
        label=t.metric(o.metric, "label"),
        comparator=SYMBOL.get(o.comparator, o.comparator),
        threshold=f.unit(o.threshold, o.unit),
        value=f.unit(o.value, o.unit),
    )
    if _doubt(o):
        return t("flip.condition_doubted", **kw)
    return t("flip.condition", **kw)


def _headroom(o: Outcome) -> float | None:
    """How far a passing item is from failing, relative to its threshold (None: not comparable)."""
    if o.status != "pass" or not finite(o.value) or not finite(o.threshold) or o.threshold == 0:
        return None
    if o.unit == "1/0" or o.comparator in ("==", "!="):
        return None
    diff = o.value - o.threshold if o.comparator in (">=", ">") else o.threshold - o.value
    return diff / abs(o.threshold)


def _flip(result: RunResult, t: Strings, f: Fmt) -> str:
    """One line: what would change the verdict."""
    v = result.verdict
    if v is None:
        return ""
    failed = [o for o in v.outcomes if o.status == "fail"]
    blockers = [o for o in failed if o.severity == "blocker"]
    missing = [o for o in v.outcomes if o.status == "not_evaluated" and not _is_optional(o)]
    sep = t("list_sep")
    if v.decision == "NO-GO" and blockers:
        rest = len(failed) - len(blockers) + len(missing)
        return t("flip.nogo", count=len(blockers), items=sep.join(_condition(o, t, f) for o in blockers)) + (
            " " + t("flip.nogo_rest", count=rest, n=rest) if rest else ""
        )
    if v.decision == "CONDITIONAL GO":
        parts = [_condition(o, t, f) for o in failed]
        parts += [t("flip.measured", label=t.metric(o.metric, "label")) for o in missing]
        return t("flip.conditional", items=sep.join(parts)) if parts else ""
    if v.decision == "INCONCLUSIVE":
        doubted = [o for o in failed if _doubt(o)]
        return t("flip.inconclusive", items=sep.join(_condition(o, t, f) for o in doubted)) if doubted else ""
    if v.decision == "GO":
        close = [(h, o) for o in v.outcomes if (h := _headroom(o)) is not None]
        if not close:
            return ""
        h, o = min(close, key=lambda x: x[0])
        return t("flip.go", item=_condition(o, t, f), headroom=f.pct(h, 0))
    return ""


_INCONCLUSIVE = (
    (
        "nothing",
        re.compile(
            r"nothing was rewritten: none of the model's profiled time is in a family with a "
            r"TileLang kernel \((?P<top>.*)\)"
        ),
    ),
    ("no_calls", re.compile(r"no call ran in TileLang: every call of (?P<families>.+?) fell back \((?P<why>.*)\)")),
    ("doubted", re.compile(r"'(?P<title>.+)' \((?P<metric>[\w.]+)\) cannot be decided on its number: (?P<doubt>.*)")),
)


def _inconclusive_words(reason: str, t: Strings) -> str:
    """One of the verdict's reasons for INCONCLUSIVE in the report's language (the verdict
    writes them in English, for the terminal and the baseline); unknown ones as written."""
    for kind, pattern in _INCONCLUSIVE:
        m = pattern.fullmatch(reason)
        if m is None:
            continue
        if kind == "doubted":
            title = m["title"] if t.lang == "en" else t.metric(m["metric"], "label")
            return t("inconclusive.doubted", title=title, why=_doubt_words(m["doubt"], t))
        if kind == "no_calls":
            why = t("list_semi").join(mapped("fallbacks", part, t) for part in m["why"].split("; "))
            return t("inconclusive.no_calls", families=m["families"], why=why)
        return t("inconclusive.nothing", top=m["top"])
    return reason


def _pytorch_calls(result: RunResult, t: Strings) -> list[str] | None:
    """Per family with a kernel, the calls of the checked forward pass that ran in PyTorch
    and why, most first; [] where every call ran in TileLang; None with no end-to-end run."""
    e = result.e2e
    if e is None or e.swapped is None or not (e.calls or e.not_chosen):
        return None
    out = []
    for row in family_calls(e):
        if row.pytorch:
            why = t("list_semi").join(f"{mapped('fallbacks', r, t)}: {n}" for r, n in row.reasons[:3])
            out.append(
                t("summary.pytorch_family", family=row.family, n=row.pytorch, total=row.pytorch + row.tilelang, why=why)
            )
    return out


def _regression_lines(result: RunResult, t: Strings, f: Fmt) -> list[str]:
    c = result.comparison
    if c is None:
        return []
    return [t("summary.regression", key=x.key, ratio=f.x(x.ratio), limit=f.pct(x.threshold, 0)) for x in c.regressions]


def summary_section(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    v = result.verdict
    key = v.decision if v is not None and v.decision in _DECISION_CLASS else "NONE"
    outcomes = v.outcomes if v is not None else ()
    failed = sorted((o for o in outcomes if o.status == "fail"), key=lambda o: SEVERITY_ORDER.get(o.severity, 9))
    missing = [o for o in outcomes if o.status == "not_evaluated" and not _is_optional(o)]
    optional = [o for o in outcomes if o.status == "not_evaluated" and _is_optional(o)]
    waived = [o for o in outcomes if o.status == "waived"]
    blockers = sum(o.severity == "blocker" for o in failed)
    parts = ([t("summary.n_failed", count=len(failed), n=len(failed))] if failed else []) + (
        [t("summary.n_missing", count=len(missing), n=len(missing))] if missing else []
    )
    passed = sum(o.status == "pass" for o in outcomes)
    reasons = (
        tuple(_inconclusive_words(x, t) for x in v.inconclusive) if v is not None and key == "INCONCLUSIVE" else ()
    )
    count = blockers if key == "NO-GO" else len(reasons) if key == "INCONCLUSIVE" else None
    sentence = t(
        f"decision_summary.{key}",
        count=count,
        passed=passed,
        total=len(outcomes) - len(optional),
        blockers=blockers,
        parts=t("list_sep").join(parts),
    )

    def plain(o: Outcome) -> dict[str, Any]:
        kw = dict(
            value=f.unit(o.value, o.unit),
            threshold=f.unit(o.threshold, o.unit),
            comparator=SYMBOL.get(o.comparator, o.comparator),
            n=num(o.value) or f.na,
        )
        # Sentences that already quote the numbers need no "(measured …)" after them.
        text = t.raw_metric(o.metric, "fail")
        quotes = "{threshold}" in str(plural_form(text, o.value))
        details = _regression_lines(result, t, f) if o.metric == "baseline.regressions" else []
        doubt = _doubt(o)
        if doubt:  # the number may meet the threshold: say why it still failed
            return {
                "severity": o.severity,
                "severity_label": t.get(f"severity.{o.severity}", o.severity),
                "title": item_title(o, t, f),
                "plain": t("summary.doubted", why=_doubt_words(doubt, t), **kw),
                "measured": "",
                "id": o.id,
                "details": details,
            }
        return {
            "severity": o.severity,
            "severity_label": t.get(f"severity.{o.severity}", o.severity),
            "title": item_title(o, t, f),
            "plain": t.metric(o.metric, "fail", count=o.value, **kw),
            "measured": "" if quotes else t("summary.measured_vs", **kw),
            "id": o.id,
            "details": details,
        }

    steps: list[str] = [mapped("rerun", x, t) for x in v.rerun] if v is not None and key == "INCONCLUSIVE" else []
    if v is None:
        steps.append(t("next.no_verdict"))
    for o in failed:  # a flagged number needs its flag explained before any speed work
        steps.append(t("next.doubted", title=item_title(o, t, f)) if _doubt(o) else t.metric(o.metric, "next"))
    for o in missing:
        steps.append(t.metric(o.metric, "missing"))
    for o in waived:
        steps.append(t("next.waiver", title=item_title(o, t, f), date=_waiver_date(o)))
    if key == "GO":
        steps.append(t("next.go"))
        if result.hot_ops is not None:
            rest = [
                o.family for o in result.hot_ops.ops if o.family not in result.hot_ops.selected and o.family != "other"
            ][:3]
            if rest:
                steps.append(t("next.extend", families=", ".join(rest)))
    steps.append(t("next.rerun"))
    hw = result.environment.hardware
    return {
        "key": key,
        "css": _DECISION_CLASS.get(key, "none"),
        "label": t(f"decision.{key}"),
        "sentence": sentence,
        "meaning": t(f"decision_meaning.{key}"),
        # INCONCLUSIVE: why the evidence cannot carry a decision (the steps start with what to rerun)
        "inconclusive": list(reasons),
        "pytorch_calls": _pytorch_calls(result, t),
        # Every failed item, named in full: a manager must not have to open the checklist
        # to learn what the last one was.
        "failed": [plain(o) for o in failed],
        "flip": _flip(result, t, f),
        "cpu_caveat": t("caveat.cpu") if (hw.device or "").lower() == "cpu" else "",
        "eager_caveat": _eager_caveat(result, t, f),
        "missing": [
            {"title": item_title(o, t, f), "severity_label": t.get(f"severity.{o.severity}", o.severity)}
            for o in missing
        ],
        "optional": t("list_sep").join(item_title(o, t, f) for o in optional),
        "optional_n": len(optional),
        "waived": [{"title": item_title(o, t, f), "date": _waiver_date(o)} for o in waived],
        "steps": list(dict.fromkeys(steps)),  # several items can share one remedy
        # The alternative a team weighs against TileLang, in one line; not a checklist item.
        "compiled": compiled_sentence(result, t, f),
    }


# Said on page one where the eager view loses this much more than the verdict's view gains.
EAGER_CAVEAT_BELOW = 0.95


def _eager_caveat(result: RunResult, t: Strings, f: Fmt) -> str:
    """One plain sentence where the verdict's speed (graph replay) is a gain the model does
    not get eagerly: a team that serves without CUDA graphs would lose (transformers GPT-2
    on the H200, 2026-12-02: 1.34x as a graph, 0.353x eagerly, the router alone 10.25 ms a
    forward). "" where there is no eager view or it is not worse."""
    e = result.e2e
    views = {v.method: v for v in (getattr(e, "views", ()) or ())} if e is not None else {}
    eager, used = views.get("eager"), views.get(getattr(e, "method", "") if e is not None else "")
    if eager is None or used is None or used is eager or eager.ratio is None or used.ratio is None:
        return ""
    x_eager, x_used = eager.ratio.value, used.ratio.value
    if not (finite(x_eager) and finite(x_used)) or x_eager >= EAGER_CAVEAT_BELOW or x_used < x_eager:
        return ""
    ms = getattr(e, "router_overhead_ms", None)
    router = t("caveat.eager_router", ms=f.ms(ms)) if finite(ms) and ms > 0 else ""
    return t("caveat.eager", eager=f.x(x_eager), graph=f.x(x_used), router=router)


def _untrusted_speed(result: RunResult) -> str:
    """Why no speed number is evidence at all: a kernel or the model's output is wrong."""
    fams = kernel_status(result) or {}
    if any(ok is False for ok in fams.values()):
        return "kernels_wrong"
    e = result.e2e
    if e is not None and e.swapped is not None and not e.outputs_match:
        return "outputs_differ"
    return ""


CARD_NOTES = 2  # the notes a key number's card shows under its value


def _card(
    label: str,
    value: str,
    sub: str,
    status: str,
    *,
    flags: Iterable[str] = (),
    t: Strings,
    ci: str = "",
    crosses: bool = False,
) -> dict[str, str]:
    """A key number. Green only when its item passed and nothing casts doubt on it:
    flagged or unstable numbers, and intervals that reach across the threshold, are grey
    with the reason underneath, so a card never looks better than the evidence."""
    notes = [flag_in_words(x, t) for x in dict.fromkeys(flags)]
    if crosses:
        notes.append(t("headline.crosses"))
    doubtful = bool(notes)
    if len(notes) > CARD_NOTES:  # a card is a few lines wide: the rest are in the evidence
        rest = len(notes) - CARD_NOTES
        notes = notes[:CARD_NOTES] + [t("headline.more_flags", count=rest, n=rest)]
    shown = "flagged" if doubtful and status in ("pass", "none", "waived") else status
    return {
        "label": label,
        "value": value,
        "sub": sub,
        "status": shown,
        "dim": doubtful,
        "ci": t("headline.ci", ci=ci) if ci else "",
        "doubt": t("list_semi").join(notes),
    }


def _crosses(o: Outcome | None, r: Ratio | None) -> bool:
    """Does the 95% interval reach the other side of the item's threshold?"""
    if o is None or r is None or o.unit != "x" or not finite(o.threshold):
        return False
    if not (finite(r.low) and finite(r.high)):
        return False
    if o.comparator in (">=", ">"):
        return o.status == "pass" and r.low < o.threshold
    if o.comparator in ("<=", "<"):
        return o.status == "pass" and r.high > o.threshold
    return False


def headlines_section(result: RunResult, t: Strings, f: Fmt) -> list[dict[str, str]]:
    v = result.verdict
    rows, _ = op_rows(result)
    sp = [(b, s) for b in rows if (s := op_speedup(b)) is not None]
    geomean = METRICS["ops.speedup_geomean"](result)
    worst = min(sp, key=lambda x: x[1]) if sp else None
    wrong = _untrusted_speed(result)
    wrong_flag = [t(f"headline.{wrong}")] if wrong else []
    flagged_ops = [b for b, _ in sp if op_flags(b)]
    cards = [
        _card(
            t("headline.geomean"),
            f.x(geomean),
            t("headline.geomean_sub", count=len(sp), n=len(sp)) if sp else "",
            _metric_status(v, "ops.speedup_geomean"),
            t=t,
            flags=wrong_flag
            + (
                [t("headline.ops_flagged", count=len(flagged_ops), n=len(flagged_ops), total=len(sp))]
                if flagged_ops
                else []
            ),
        )
    ]
    no_time = [b for b in rows if op_speedup(b) is None]
    if no_time:
        # A model shape without a verified TileLang time is the slowest there is (the
        # checklist counts it as 0): name it rather than the slowest of the others.
        b = no_time[0]
        cards.append(
            _card(
                t("headline.worst"),
                t("headline.no_kernel"),
                op_label(b),
                _metric_status(v, "ops.speedup_min"),
                t=t,
                flags=wrong_flag + op_flags(b),
            )
        )
    elif worst:
        b, s = worst
        cards.append(
            _card(
                t("headline.worst"),
                f.x(s),
                op_label(b),
                _metric_status(v, "ops.speedup_min"),
                t=t,
                ci=f.interval(b.ratio),
                crosses=_crosses(_outcome(v, "ops.speedup_min"), b.ratio),
                flags=wrong_flag + op_flags(b),
            )
        )
    else:
        cards.append(_card(t("headline.worst"), f.na, "", _metric_status(v, "ops.speedup_min"), t=t))
    fams = kernel_status(result) or {}
    cards.append(
        _card(
            t("headline.correct"),
            f"{sum(fams.values())} / {len(fams)}" if result.verify else f.na,
            t("headline.correct_sub", n=len(result.verify)) if result.verify else "",
            _metric_status(v, "kernels.all_correct"),
            t=t,
        )
    )
    e = result.e2e
    e2e_value = METRICS["e2e.speedup"](result)
    sub = ""
    if e is not None:
        sub = t("headline.e2e_sub", method=view_name(e.method, t)) if e.method else t("headline.e2e_sub_plain")
        if finite(e.amdahl_speedup):
            sub += t("list_semi") + t("headline.amdahl", x=f.x(e.amdahl_speedup))
        if getattr(e, "kept", None):
            sub += t("list_semi") + t("headline.kept", x=f.x(e.kept.ratio.value), left=", ".join(e.kept.left))
    cards.append(
        _card(
            t("headline.e2e"),
            f.x(e2e_value),
            sub,
            _metric_status(v, "e2e.speedup"),
            t=t,
            ci=f.interval(e.ratio) if e is not None else "",
            crosses=_crosses(_outcome(v, "e2e.speedup"), e.ratio if e is not None else None),
            flags=(wrong_flag + e2e_flags(result)) if e is not None else (),
        )
    )
    score = METRICS["upstream.maintenance_score"](result)
    cpw = METRICS["upstream.commits_per_week_90d"](result)
    statuses = {_metric_status(v, m) for m in METRICS if m.startswith("upstream.")}
    up_status = "fail" if "fail" in statuses else ("pass" if "pass" in statuses else "none")
    if score is not None:
        value, sub = f"{f.num(score, 2)} / 10", t("headline.upstream_sub_score", commits=f.num(cpw, 2))
    else:
        value, sub = f.num(cpw, 2), (t("headline.upstream_sub_commits") if cpw is not None else "")
    cards.append(_card(t("headline.upstream"), value, sub, up_status, t=t))
    return cards
