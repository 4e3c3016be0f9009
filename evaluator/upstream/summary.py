"""The upstream measurement as (metric, value, meaning) rows for a printed table.

In: an `UpstreamHealth` (fresh, or loaded from a result of any age: UpstreamHealth
rebuilds an old result's typed parts when it loads; a part it could not rebuild is None
and its rows say n/a). Out: rows of plain, unescaped text; `evaluate upstream` prints
them with rich, which must not read them as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evaluator.results import UpstreamHealth

from .score import SCORE_LOOKBACK_DAYS, SCORE_THRESHOLD


def summary_rows(health: UpstreamHealth) -> list[tuple[str, str, str]]:
    """(metric, value, meaning) rows for a printed table; values are plain, unescaped text."""
    if not health.measured:
        return [("Upstream health", "not measured", health.note or "no upstream repository given")]
    return [*_activity_rows(health), *_path_rows(health), *_fork_rows(health), *_score_rows(health)]


def _get(part: Any, name: str) -> Any:
    """A typed part's field, None when the part itself is missing (a partial old result)."""
    return None if part is None else getattr(part, name)


def _mark(h: UpstreamHealth, value: str, key: str) -> str:
    limited = _get(h.caveats, "limited") or {}
    return f"{value} (limited: shallow clone)" if key in limited and value != "n/a" else value


def _activity_rows(h: UpstreamHealth) -> list[tuple[str, str, str]]:
    a, au, r = h.activity, h.authors, h.releases
    weekly = _get(a, "weekly_commits") or ()
    prs = f"{_fmt_opt(_get(a, 'merged_prs_90d'))} / {_fmt_opt(_get(a, 'merged_prs_365d'))}"
    branch = a.branch if a is not None else "?"
    return [
        ("Repository", h.repo, f"branch {branch}, history read with git only"),
        ("As of", h.as_of, "commits and tags after this time are ignored"),
        ("Head", h.head[:12], f"committed {_fmt_date(_get(a, 'head_date'))}"),
        ("Last commit", _fmt_days_ago(h.days_since_last_commit), "days since the newest commit"),
        (
            "Commits 30 / 90 / 365 d",
            " / ".join(_fmt_count(h, k) for k in ("commits_30d", "commits_90d", "commits_365d")),
            "commits on the branch in the last 30, 90 and 365 days",
        ),
        (
            "Weekly commits (52 w)",
            _mark(h, _sparkline(weekly), "weekly_commits"),
            f"oldest week first; peak {max(weekly or [0])} a week",
        ),
        ("Repository age", _mark(h, _fmt_days(_get(a, "repo_age_days")), "repo_age_days"), "since the first commit"),
        (
            "Active authors (90 d)",
            _fmt_count(h, "authors_90d"),
            f"people (bots left out); {_fmt_opt(_get(au, 'new_90d'))} new in 90 days, "
            f"{_fmt_opt(_get(au, 'active_365d'))} in the last year",
        ),
        ("Bus factor", _fmt_opt(_get(au, "bus_factor")), "fewest authors who made half of the last year's commits"),
        (
            "Releases",
            _mark(h, _fmt_releases(h), "releases"),
            f"version tags; {_fmt_opt(_get(r, 'in_365d'))} in the last year",
        ),
        (
            "Release interval",
            _fmt_days(_get(r, "median_interval_days")),
            "median gap between releases over the last year",
        ),
        ("Merged PRs 90 / 365 d", _mark(h, prs, "merged_prs"), "subjects ending in (#N) or 'Merge pull request #N'"),
    ]


def _path_rows(h: UpstreamHealth) -> list[tuple[str, str, str]]:
    rows = []
    for path, p in (_get(h.activity, "paths") or {}).items():
        if not p.exists and not p.commits_365d:
            value = "not in the tree"
        else:
            value = f"{_fmt_opt(p.commits_90d)} commits / 90 d, last {_fmt_days_ago(p.days_since_last_commit)}"
        rows.append((f"Path {path}", _mark(h, value, "paths"), "activity under this path of interest"))
    return rows


def _fork_rows(h: UpstreamHealth) -> list[tuple[str, str, str]]:
    f = h.fork
    if f is None:
        return []
    rows = [("Fork", f.repo, f"branch {f.branch}")]
    if not f.measured:
        return rows + [("Fork drift", "not measured", f.reason)]
    return rows + [
        (
            "Fork behind / ahead",
            f"{f.behind} / {f.ahead} commits",
            "upstream commits the fork lacks / fork-only commits",
        ),
        (
            "Fork last sync",
            f"{_fmt_date(f.last_sync_date)} ({_fmt_days(f.days_behind)} behind)",
            "newest upstream commit in the fork, and its lag behind the upstream head",
        ),
        ("Fork merge base age", _fmt_days(f.merge_base_age_days), "age of the merge base at as_of"),
        (
            "Fork missing releases",
            ", ".join(f.missing_releases) or "none",
            "upstream releases the fork does not contain",
        ),
        ("Fork own commits (90 d)", _fmt_opt(f.ahead_commits_90d), "fork-only commits in the last 90 days"),
    ]


def _score_rows(h: UpstreamHealth) -> list[tuple[str, str, str]]:
    si = h.score_inputs
    threshold = si.threshold if si is not None else SCORE_THRESHOLD
    rows = [
        (
            "Maintenance score",
            "n/a" if h.maintenance_score is None else f"{h.maintenance_score:g} / 10",
            f"Scorecard 'Maintained' from commits only: {_fmt_opt(_get(si, 'commits_90d'))} commits in "
            f"{SCORE_LOOKBACK_DAYS} days, {threshold} (one a week) score 10",
        )
    ]
    if h.note:
        rows.append(("Note", h.note, "caveats"))
    return rows


def _fmt_opt(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _fmt_count(h: UpstreamHealth, key: str) -> str:
    v = getattr(h, key)
    if v is None:
        lb = (_get(h.caveats, "lower_bounds") or {}).get(key)
        return f">= {lb}" if lb is not None else "n/a"
    return str(v)


def _fmt_days(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v / 365.25:.1f} years" if v >= 730 else f"{v:.0f} days" if v >= 10 else f"{v:.1f} days"


def _fmt_days_ago(v: Any) -> str:
    return "n/a" if v is None else f"{_fmt_days(v)} ago"


def _fmt_date(v: Any) -> str:
    return str(v)[:10] if v else "n/a"


def _fmt_releases(h: UpstreamHealth) -> str:
    if not _get(h.releases, "count"):
        return "none"
    return f"{h.releases.count}, latest {h.latest_tag} ({_fmt_days_ago(h.days_since_release)})"


def _sparkline(values: Sequence[int]) -> str:
    if not values:
        return "n/a"
    bars = "▁▂▃▄▅▆▇█"
    top = max(values) or 1
    return "".join(bars[max(1, round(v / top * 7))] if v else bars[0] for v in values)
