"""Upstream TileLang's health and the fork's drift, as the upstream stage measured them.

In: a RunResult's upstream (an UpstreamHealth: counts, score, note, and the `details`
dict of weekly commits, releases, recent commits, authors, fork data) and a language's
`Strings`/`Fmt`. Out: the section's rows, the fork's rows (or None), the weekly-commits
and releases charts and the commit and author tables; or, when nothing was measured,
one sentence saying why. `details` is read tolerantly: a list of another shape, or a key
an older upstream stage did not write, is skipped rather than breaking the report.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ... import charts
from ...results import RunResult
from ..notes import _notes
from ..strings import Fmt, Strings, _as_date, _ct, _day, _finite


def _records(value: Any, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Tolerant reader for the upstream stage's `details` lists: dicts, or tuples in
    `keys` order. Anything else is skipped rather than breaking the report."""
    out = []
    if not isinstance(value, (list, tuple)):
        return out
    for item in value:
        if isinstance(item, dict):
            out.append(item)
        elif isinstance(item, (list, tuple)):
            out.append(dict(zip(keys, item)))
    return out


def _upstream(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    u = result.upstream
    if u is None or not u.measured:
        note = (u.note if u is not None else "") or result.stage_errors.get("upstream", "")
        return {"measured": False, "text": t("text.upstream_not_measured", note=_notes(note, t) if note else t("text.stage_not_run"))}
    d = u.details or {}
    kv = [(t("kv.last_commit"), f.num(u.days_since_last_commit)), (t("kv.commits_30d"), f.num(u.commits_30d)),
          (t("kv.commits_90d"), f.num(u.commits_90d)), (t("kv.commits_365d"), f.num(u.commits_365d)),
          (t("kv.authors_90d"), f.num(u.authors_90d)), (t("kv.latest_tag"), u.latest_tag or f.na),
          (t("kv.days_since_release"), f.num(u.days_since_release)), (t("kv.score"), f.num(u.maintenance_score))]
    for key, label in (("bus_factor", "kv.bus_factor"), ("merged_prs_90d", "kv.merged_prs_90d"),
                       ("median_release_interval_days", "kv.release_interval")):
        if _finite(d.get(key)):
            kv.append((t(label), f.num(d[key])))
    limited = d.get("limited")
    if isinstance(limited, dict) and limited:
        kv.append((t("kv.limited"), "; ".join(f"{k}: {v}" for k, v in limited.items())))
    fork_d = d.get("fork") if isinstance(d.get("fork"), dict) else {}
    fork = None
    if u.fork_behind is not None or u.fork_days_behind is not None or fork_d:
        fork = [(t("kv.fork_repo"), f"{fork_d.get('repo', '?')} ({fork_d.get('branch', '?')})")] if fork_d else []
        if fork_d and not fork_d.get("measured", True):
            fork.append((t("kv.fork_not_measured"), _notes(str(fork_d.get("reason", "")), t)))
        fork += [(t("kv.fork_behind"), f.num(u.fork_behind)), (t("kv.fork_ahead"), f.num(u.fork_ahead)),
                 (t("kv.fork_days_behind"), f.num(u.fork_days_behind))]
        if fork_d.get("last_sync_date"):
            fork.append((t("kv.fork_last_sync"), _day(str(fork_d["last_sync_date"]))))
        missing_rel = fork_d.get("missing_releases")
        if isinstance(missing_rel, list) and missing_rel:
            tags = [str(r.get("tag", r)) if isinstance(r, dict) else str(r) for r in missing_rel]
            fork.append((t("kv.fork_missing_releases"), ", ".join(tags[-8:])))
    # weekly_commits: ints, oldest week first, starting at weekly_commits_start (upstream.py).
    weekly_raw = d.get("weekly_commits") or []
    counts, labels = [], []
    for w in weekly_raw if isinstance(weekly_raw, (list, tuple)) else []:
        if isinstance(w, dict):
            counts.append(w.get("commits", w.get("count", 0)) or 0)
            labels.append(str(w.get("week", w.get("start", ""))))
        elif isinstance(w, (int, float)):
            counts.append(w)
    start = _as_date(d.get("weekly_commits_start"))
    if start is not None and counts and not labels:
        labels = [(start + timedelta(days=7 * i)).isoformat() for i in range(len(counts))]
    guide = next((o.threshold for o in (result.verdict.outcomes if result.verdict else ())
                  if o.metric == "upstream.commits_per_week_90d"), None)
    weekly = charts.weekly_commits(counts, labels=labels if all(labels) and labels else None,
                                   xlabel=_ct("chart.weeks_ago", t) if not (labels and all(labels)) else "",
                                   ylabel=_ct("chart.commits", t), guide=guide)
    rels = [(_as_date(r.get("date")), str(r.get("tag", ""))) for r in _records(d.get("releases"), ("tag", "date"))]
    releases = charts.releases([(dd, tag) for dd, tag in rels if dd is not None], as_of=_as_date(u.as_of),
                               xlabel=_ct("chart.release_date", t), today_label=_ct("chart.as_of", t))
    commits = [{"sha": str(c.get("sha", ""))[:10], "date": _day(str(c.get("date", ""))),
                "author": str(c.get("author", "")), "subject": str(c.get("subject", ""))}
               for c in _records(d.get("recent_commits"), ("sha", "date", "author", "subject"))[:15]]
    authors = [{"name": str(a.get("name", "")), "commits": str(a.get("commits", ""))}
               for a in _records(d.get("top_authors_365d"), ("name", "commits"))[:10]]
    return {"measured": True, "kv": kv, "fork": fork, "weekly": weekly, "releases": releases,
            "commits": commits, "authors": authors, "note": _notes(u.note, t),
            "text": t("text.upstream_as_of", repo=u.repo or "?", head=(u.head or "?")[:12], as_of=u.as_of or "?")}
