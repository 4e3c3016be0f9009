"""Upstream TileLang's health and the fork's drift, as the upstream stage measured them.

In: a RunResult's upstream (an UpstreamHealth: the headline counts, score and note, and
the typed parts `activity`, `authors`, `releases`, `fork` and `caveats`) and a language's
`Strings`/`Fmt`. Out: the section's rows, the fork's rows (or None), the weekly-commits
and releases charts and the commit and author tables; or, when nothing was measured,
one sentence saying why. A part can be None (a hand-made or damaged results.json whose
old `details` could not rebuild it): whatever that part would show is left out, the
rest of the section still renders.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from .. import charts
from ...results import RunResult, UpstreamHealth
from ..notes import notes_in_words
from ..strings import Fmt, Strings, as_date, ct, day, finite


def upstream_section(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    u = result.upstream
    if u is None or not u.measured:
        note = (u.note if u is not None else "") or result.stage_errors.get("upstream", "")
        return {
            "measured": False,
            "text": t("text.upstream_not_measured", note=notes_in_words(note, t) if note else t("text.stage_not_run")),
        }
    a, au, r = u.activity, u.authors, u.releases
    weekly = _weekly(result, t)  # before the releases chart: charts number their SVG ids in drawing order
    rels = [(as_date(x.date), x.tag) for x in (r.tags if r else ())]
    releases = charts.releases(
        [(dd, tag) for dd, tag in rels if dd is not None],
        as_of=as_date(u.as_of),
        xlabel=ct("chart.release_date", t),
        today_label=ct("chart.as_of", t),
    )
    commits = [
        {"sha": c.sha[:10], "date": day(c.date), "author": c.author, "subject": c.subject}
        for c in (a.recent_commits if a else ())[:15]
    ]
    authors = [{"name": x.name, "commits": str(x.commits)} for x in (au.top_365d if au else ())[:10]]
    return {
        "measured": True,
        "kv": _kv(u, t, f),
        "fork": _fork(u, t, f),
        "weekly": weekly,
        "releases": releases,
        "commits": commits,
        "authors": authors,
        "note": notes_in_words(u.note, t),
        "text": t("text.upstream_as_of", repo=u.repo or "?", head=(u.head or "?")[:12], as_of=u.as_of or "?"),
    }


def _kv(u: UpstreamHealth, t: Strings, f: Fmt) -> list[tuple[str, str]]:
    kv = [
        (t("kv.last_commit"), f.num(u.days_since_last_commit)),
        (t("kv.commits_30d"), f.num(u.commits_30d)),
        (t("kv.commits_90d"), f.num(u.commits_90d)),
        (t("kv.commits_365d"), f.num(u.commits_365d)),
        (t("kv.authors_90d"), f.num(u.authors_90d)),
        (t("kv.latest_tag"), u.latest_tag or f.na),
        (t("kv.days_since_release"), f.num(u.days_since_release)),
        (t("kv.score"), f.num(u.maintenance_score)),
    ]
    # Each only when measured: None on a shallow clone, or when its part is missing.
    for value, label in (
        (u.authors and u.authors.bus_factor, "kv.bus_factor"),
        (u.activity and u.activity.merged_prs_90d, "kv.merged_prs_90d"),
        (u.releases and u.releases.median_interval_days, "kv.release_interval"),
    ):
        if finite(value):
            kv.append((t(label), f.num(value)))
    limited = u.caveats.limited if u.caveats else {}
    if limited:
        kv.append((t("kv.limited"), "; ".join(f"{k}: {v}" for k, v in limited.items())))
    return kv


def _fork(u: UpstreamHealth, t: Strings, f: Fmt) -> list[tuple[str, str]] | None:
    """The fork's rows; None when no fork was given. The headline numbers alone still make
    rows when the fork part is missing."""
    d = u.fork
    if d is None and u.fork_behind is None and u.fork_days_behind is None:
        return None
    rows = [(t("kv.fork_repo"), f"{d.repo} ({d.branch})")] if d else []
    if d and not d.measured:
        rows.append((t("kv.fork_not_measured"), notes_in_words(d.reason, t)))
    rows += [
        (t("kv.fork_behind"), f.num(u.fork_behind)),
        (t("kv.fork_ahead"), f.num(u.fork_ahead)),
        (t("kv.fork_days_behind"), f.num(u.fork_days_behind)),
    ]
    if d and d.last_sync_date:
        rows.append((t("kv.fork_last_sync"), day(d.last_sync_date)))
    if d and d.missing_releases:
        rows.append((t("kv.fork_missing_releases"), ", ".join(d.missing_releases[-8:])))
    return rows


def _weekly(result: RunResult, t: Strings) -> str | None:
    """Commits per week, oldest first, under the checklist's floor; dated from the first
    week's start, or counted back from the last week when the start does not parse."""
    a = result.upstream.activity
    counts = list(a.weekly_commits) if a else []
    start = as_date(a.weekly_commits_start) if a else None
    labels = [(start + timedelta(days=7 * i)).isoformat() for i in range(len(counts))] if start and counts else []
    guide = next(
        (
            o.threshold
            for o in (result.verdict.outcomes if result.verdict else ())
            if o.metric == "upstream.commits_per_week_90d"
        ),
        None,
    )
    return charts.weekly_commits(
        counts,
        labels=labels or None,
        xlabel="" if labels else ct("chart.weeks_ago", t),
        ylabel=ct("chart.commits", t),
        guide=guide,
    )
