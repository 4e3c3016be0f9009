"""The metrics of the upstream TileLang repository's health and of a vendor fork's drift.

In: a `RunResult`'s upstream (measured from git history by evaluator/upstream). Out: the
`UPSTREAM` and `FORK` metrics; None when upstream was not measured (no --upstream), and
the fork metrics also when no fork was given (those items are optional in the shipped
checklists).
"""

from __future__ import annotations

from typing import Any, Callable

from ..results import RunResult
from .metric import Metric, stage_note


def _up(getter: Callable[[Any], float | None]) -> Callable[[RunResult], float | None]:
    def measure(r: RunResult) -> float | None:
        u = r.upstream
        if u is None or not u.measured:
            return None
        return getter(u)

    return measure


def _up_explain(r: RunResult) -> str:
    u = r.upstream
    if u is None:
        return stage_note(r, "upstream", "upstream stage not run")
    if not u.measured:
        return f"upstream not measured: {u.note or 'no reason recorded'}"
    text = f"{u.repo or 'upstream'} at {u.head[:10] or '?'} as of {u.as_of or '?'}"
    return text + (f"; {u.note}" if u.note else "")


def _fork_explain(r: RunResult) -> str:
    u = r.upstream
    if u is None or not u.measured:
        return _up_explain(r)
    if u.fork_days_behind is None:
        if u.fork is not None and u.fork.reason:
            return f"fork drift not measured: {u.fork.reason}"
        return "no vendor fork given (only applies when evaluating a fork)"
    return f"fork {u.fork_behind} commits behind, {u.fork_ahead} ahead of upstream"


UPSTREAM = [
    Metric(
        "upstream.commits_per_week_90d",
        "commits/week",
        "commits to the upstream TileLang repository per week over the last 90 days",
        _up(lambda u: None if u.commits_90d is None else u.commits_90d / (90 / 7)),
        _up_explain,
    ),
    Metric(
        "upstream.active_authors_90d",
        "authors",
        "distinct commit authors upstream over the last 90 days",
        _up(lambda u: u.authors_90d),
        _up_explain,
    ),
    Metric(
        "upstream.days_since_release",
        "days",
        "days since the latest upstream release tag",
        _up(lambda u: u.days_since_release),
        _up_explain,
    ),
    Metric(
        "upstream.days_since_last_commit",
        "days",
        "days since the latest upstream commit",
        _up(lambda u: u.days_since_last_commit),
        _up_explain,
    ),
    Metric(
        "upstream.maintenance_score",
        "score",
        "0-10, OpenSSF Scorecard's 'Maintained' check from commits only: min(10, 10 x commits in 90 days // 12)",
        _up(lambda u: u.maintenance_score),
        _up_explain,
    ),
]

FORK = [
    Metric(
        "fork.days_behind",
        "days",
        "upstream head's commit date minus that of the newest upstream commit the vendor fork contains "
        "(0 when in sync)",
        _up(lambda u: u.fork_days_behind),
        _fork_explain,
    ),
    Metric(
        "fork.commits_behind",
        "commits",
        "upstream commits the vendor fork has not merged",
        _up(lambda u: u.fork_behind),
        _fork_explain,
    ),
]
