"""One measurement of an opened upstream repository, part by part, into an `UpstreamHealth`.

In: the open upstream `GitRepo`, the branch, the as-of time, the paths of interest, an
optional fork spec, the clone cache and the notes gathered while opening. Out: the
record: headline fields (None where a shallow clone leaves only a lower bound) and the
typed parts. The parts are measured in a fixed order because each records its
shallow-clone limits in the shared `Window` as it goes, and that order is the order of
`caveats.limited`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from evaluator.results import UpstreamCaveats, UpstreamHealth

from .activity import build_activity, commit_counts, commit_series, merged_prs, path_activity
from .authors import measure_authors
from .clock import DAY, as_of_text, days, iso
from ..results.upstream import Parts
from .fork import fork_drift
from .gitcmd import GitRepo
from .history import History, Window, read_history
from .releases import measure_releases
from .score import score, score_inputs

# A local clone whose newest commit is older than this may simply not have been fetched.
STALE_CLONE_DAYS = 30


def measure_open(
    up: GitRepo,
    branch: str | None,
    ts: int,
    at: datetime,
    wanted: list[str],
    fork: str | None,
    cache: Path,
    notes: list[str],
    *,
    default_now: bool,
) -> UpstreamHealth:
    hist = read_history(up, branch, ts, as_of_text(at))
    win = Window.of(hist, ts)
    shallow = bool(hist.shallow_commits)
    series = commit_series(hist.commits, win)
    authors, active_90 = measure_authors(hist.commits, win)
    releases, dated = measure_releases(up, win, shallow)
    prs = merged_prs(hist.commits, at, win)
    activity = build_activity(hist, at, series, prs, path_activity(up, hist, win, wanted))
    _note_clone(up, hist, win, notes, default_now)
    drift = fork_drift(up, hist.head, hist.by_sha, dated, fork, ts, cache, notes, shallow) if fork else None

    counts = commit_counts(hist.commits, ts)
    age = days(ts - hist.first)
    c90 = win.exact("commits_90d", counts[90], 90)
    value = score(counts[90], c90, age, win)
    # The remaining headline counts are bounded last, so their limits close caveats.limited.
    c30 = win.exact("commits_30d", counts[30], 30)
    c365 = win.exact("commits_365d", counts[365], 365)
    a90 = win.exact("authors_90d", active_90, 90)
    caveats = UpstreamCaveats(shallow, iso(win.horizon), dict(win.limited), dict(win.lower), tuple(notes))
    parts = Parts(activity, authors, releases, drift, score_inputs(counts[90], age), caveats)
    latest = dated[-1] if dated else None
    f = drift if drift is not None and drift.measured else None
    return UpstreamHealth(
        measured=True,
        repo=up.label,
        as_of=as_of_text(at),
        head=hist.head,
        days_since_last_commit=days(ts - hist.newest),
        commits_30d=c30,
        commits_90d=c90,
        commits_365d=c365,
        authors_90d=a90,
        latest_tag=latest.tag if latest else None,
        days_since_release=days(ts - latest.time) if latest else None,
        maintenance_score=value,
        fork_behind=f.behind if f else None,
        fork_ahead=f.ahead if f else None,
        fork_days_behind=f.days_behind if f else None,
        note="; ".join(notes),
        **parts._asdict(),
    )


def _note_clone(up: GitRepo, hist: History, win: Window, notes: list[str], default_now: bool) -> None:
    """Notes about the clone itself: shallow, behind its remote, or not fetched for a while.
    The last two only when as_of is now: for a past date a stale clone is no caveat."""
    if hist.shallow_commits:
        notes.insert(
            0,
            f"shallow clone: {win.cut}, limited metrics are listed in details.limited "
            "(run `git fetch --unshallow` for full history)"
            if win.horizon
            else "shallow clone, but the measured branch's history is complete",
        )
    if default_now and hist.branch not in ("HEAD (detached)",) and not up.bare:
        status, out, _ = up.call("rev-list", "--count", f"{hist.tip}..{hist.branch}@{{upstream}}")
        if status == 0 and out.strip() not in ("", "0"):
            notes.append(
                f"local {hist.branch} is {out.strip()} commits behind its remote-tracking branch; "
                "pull, or pass --branch origin/<name>, to measure the newer history"
            )
    stale_days = (int(datetime.now(timezone.utc).timestamp()) - hist.newest) / DAY
    if default_now and not up.from_url and stale_days > STALE_CLONE_DAYS:
        fetch_head = Path(up.repo.git_dir) / "FETCH_HEAD"
        fetched = (
            f", and it was last fetched {(datetime.now().timestamp() - fetch_head.stat().st_mtime) / DAY:.0f} days ago"
            if fetch_head.exists()
            else ""
        )
        notes.append(
            f"the newest commit is {stale_days:.0f} days old{fetched}: if this clone is not "
            "fresh, run `git fetch` there (or pass the URL) before trusting these numbers"
        )
