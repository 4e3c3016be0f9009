"""Activity of the measured branch: commit counts and the weekly series, merged pull
requests, the newest commits, and the paths of interest.

In: the `History` up to as_of (for paths, the repository too: one `git log` per path)
and its `Window`. Out: the pieces of `UpstreamActivity`, which `build_activity` joins;
each piece records in the window what a shallow clone limits. Activity counts every
commit reachable from the head, merges and bots included, as `git rev-list --count`
and Scorecard count them. Merged pull requests are commits whose subject ends in "(#N)"
(squash merges) or starts with "Merge pull request #N" (merge commits), each number
counted once, at its oldest commit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from evaluator.results import PathActivity, RecentCommit, UpstreamActivity

from .clock import DAY, days, iso, last_months, within
from .gitcmd import GitRepo
from .history import BOT, Commit, History, Window

WEEKS = 52
PR_SQUASH = re.compile(r"\(#(\d+)\)\s*$")
PR_MERGE = re.compile(r"^Merge pull request #(\d+)\b")


def commit_counts(commits: Sequence[Commit], ts: int) -> dict[int, int]:
    """Commits in the last 30, 90 and 365 days, keyed by the window's days."""
    return {n: sum(within(c.time, ts, n) for c in commits) for n in (30, 90, 365)}


@dataclass(frozen=True)
class CommitSeries:
    commits_total: int
    first_commit_date: str
    repo_age_days: float
    weekly_commits: tuple[int, ...]
    weekly_commits_start: str
    bot_commits_365d: int


def commit_series(commits: Sequence[Commit], win: Window) -> CommitSeries:
    ts = win.ts
    weekly = [0] * WEEKS
    for c in commits:
        if within(c.time, ts, WEEKS * 7):
            weekly[WEEKS - 1 - (ts - c.time) // (7 * DAY)] += 1
    first = min(c.time for c in commits)
    if win.horizon is not None:
        win.limit("repo_age_days", "lower bound")
        win.limit("commits_total", "lower bound")
        if not win.complete(WEEKS * 7):
            win.limit("weekly_commits", "lower bounds")
    return CommitSeries(
        commits_total=len(commits),
        first_commit_date=iso(first),
        repo_age_days=days(ts - first),
        weekly_commits=tuple(weekly),
        weekly_commits_start=iso(ts - WEEKS * 7 * DAY),
        bot_commits_365d=sum(1 for c in commits if c.bot and within(c.time, ts, 365)),
    )


@dataclass(frozen=True)
class MergedPRs:
    per_month: dict[str, int]  # the 12 months up to as_of, oldest first
    in_90d: int
    in_365d: int


def merged_prs(commits: Sequence[Commit], at: datetime, win: Window) -> MergedPRs:
    ts = win.ts
    per_month = {m: 0 for m in last_months(at, 12)}
    seen: set[str] = set()
    prs_90 = prs_365 = 0
    for c in sorted(commits, key=lambda c: c.time):
        m = PR_SQUASH.search(c.subject) or PR_MERGE.match(c.subject)
        if not m or m.group(1) in seen:
            continue
        seen.add(m.group(1))
        key = datetime.fromtimestamp(c.time, timezone.utc).strftime("%Y-%m")
        if key in per_month:
            per_month[key] += 1
        prs_90 += within(c.time, ts, 90)
        prs_365 += within(c.time, ts, 365)
    if not win.complete(365):
        win.limit("merged_prs", "lower bounds")
    return MergedPRs(per_month, prs_90, prs_365)


def recent_commits(commits: Sequence[Commit], n: int = 10) -> tuple[RecentCommit, ...]:
    return tuple(
        RecentCommit(c.sha, iso(c.time), c.name, c.subject) for c in sorted(commits, key=lambda c: -c.time)[:n]
    )


def path_activity(r: GitRepo, history: History, win: Window, wanted: Sequence[str]) -> dict[str, PathActivity]:
    """Activity under each path of interest, in the order asked ("./src/cuda/" means src/cuda)."""
    if wanted and not win.complete(30):
        win.limit("paths", "lower bounds")
    clean = [p.strip().strip("/").removeprefix("./") for p in wanted if p.strip().strip("/")]
    if not clean:
        return {}
    present = {ln.split("\t", 1)[1] for ln in r.run("ls-tree", history.head, "--", *clean).splitlines() if "\t" in ln}
    return {p: _one_path(r, history, win.ts, p, p in present) for p in clean}


def _one_path(r: GitRepo, history: History, ts: int, path: str, exists: bool) -> PathActivity:
    text = r.run(
        "log",
        "-z",
        "--use-mailmap",
        "--no-show-signature",
        "--format=%H%x1f%ct%x1f%aE%x1f%aN",
        history.head,
        "--",
        path,
    )
    rows = []
    for rec in text.split("\0"):
        rec = rec.strip("\n")
        if rec:
            sha, ct, email, name = rec.split("\x1f", 3)
            # A shallow clone's boundary commit diffs against nothing, so it seems
            # to add every path: it says nothing about who changed what.
            if int(ct) <= ts and sha not in history.shallow_commits:
                rows.append((int(ct), (email or name).lower(), bool(BOT.search(name) or BOT.search(email))))
    last = max((t for t, _, _ in rows), default=None)
    first = min((t for t, _, _ in rows), default=None)
    return PathActivity(
        exists=exists,
        commits_30d=sum(within(t, ts, 30) for t, _, _ in rows),
        commits_90d=sum(within(t, ts, 90) for t, _, _ in rows),
        commits_365d=sum(within(t, ts, 365) for t, _, _ in rows),
        authors_90d=len({a for t, a, bot in rows if not bot and within(t, ts, 90)}),
        days_since_last_commit=days(ts - last) if last is not None else None,
        last_commit_date=iso(last),
        first_commit_date=iso(first),
    )


def build_activity(
    history: History, at: datetime, series: CommitSeries, prs: MergedPRs, paths: dict[str, PathActivity]
) -> UpstreamActivity:
    return UpstreamActivity(
        branch=history.branch,
        head_date=iso(history.by_sha[history.head].time),
        as_of_timestamp=at.isoformat(),
        commits_total=series.commits_total,
        first_commit_date=series.first_commit_date,
        repo_age_days=series.repo_age_days,
        weekly_commits=series.weekly_commits,
        weekly_commits_start=series.weekly_commits_start,
        bot_commits_365d=series.bot_commits_365d,
        merged_prs_per_month=prs.per_month,
        merged_prs_90d=prs.in_90d,
        merged_prs_365d=prs.in_365d,
        recent_commits=recent_commits(history.commits),
        paths=paths,
    )
