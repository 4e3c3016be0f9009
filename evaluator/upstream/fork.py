"""Fork drift: how far a vendor fork has fallen behind upstream, and what it adds.

In: the open upstream `GitRepo`, its as-of head and commits, its dated releases, the
fork spec ("PATH", a URL, or "PATH#BRANCH") and the as-of time. Out: `ForkDrift`, and
notes appended to the caller's list. The fork is read in the upstream repository with
the fork's objects added as alternates through the environment (neither repository is
modified): merge base, commits behind (upstream commits missing from the fork) and
ahead (fork-only commits), last sync = the newest upstream commit contained in the fork
(the newest of `git merge-base --all`), and `days_behind` = upstream head's commit date
minus the last sync's (measured against the upstream head, not as_of, so a quiet
upstream does not make a fork look stale). Not measured when either side is shallow.
"""

from __future__ import annotations

import os
from pathlib import Path

from evaluator.errors import UpstreamError
from evaluator.results import ForkDrift

from .clock import days, iso, within
from .gitcmd import GitRepo, one_line
from .history import Commit, head_as_of, log, resolve_tip
from .releases import DatedRelease
from .sources import open_repo, split_branch


def fork_drift(
    up: GitRepo,
    up_head: str,
    up_commits: dict[str, Commit],
    releases: list[DatedRelease],
    spec: str,
    ts: int,
    cache: Path,
    notes: list[str],
    up_shallow: bool,
) -> ForkDrift:
    path, fbranch = split_branch(spec)
    fk = open_repo(path, "fork", cache, notes, "--fork")
    try:
        tip, fname = resolve_tip(fk, fbranch)
        fhead = head_as_of(fk, tip, ts)
        if fhead is None:
            raise UpstreamError(
                f"fork {fk.label} has no commits on {fname} at or before {iso(ts)}; pass a later --as-of"
            )
        why = (
            "upstream is a shallow clone" if up_shallow else "the fork is a shallow clone" if fk.shallow_commits else ""
        )
        if why:
            notes.append(f"fork drift not measured: {why} (run `git fetch --unshallow` there)")
            return ForkDrift(fk.label, fname, fhead, measured=False, reason=f"{why}; run `git fetch --unshallow` there")
        return _drift(up, fk, up_head, fhead, fname, up_commits, releases, ts)
    finally:
        fk.close()


def _alternates_env(extra: Path) -> dict[str, str]:
    entry = str(extra.resolve())
    if any(ch in entry for ch in ':"\\'):
        entry = '"' + entry.replace("\\", "\\\\").replace('"', '\\"') + '"'
    prior = os.environ.get("GIT_ALTERNATE_OBJECT_DIRECTORIES")
    return {"GIT_ALTERNATE_OBJECT_DIRECTORIES": entry + (os.pathsep + prior if prior else "")}


def _merge_bases(up: GitRepo, fk: GitRepo, up_head: str, fhead: str, env: dict[str, str]) -> list[str]:
    status, out, err = up.call("merge-base", "--all", up_head, fhead, env=env)
    bases = out.split()
    if status == 1 and not bases:
        raise UpstreamError(
            f"fork {fk.label} shares no history with upstream {up.label}; pass a fork of this upstream (or drop --fork)"
        )
    if status != 0:
        raise UpstreamError(
            f"git merge-base failed between fork {fk.label} and upstream {up.label}: "
            f"{one_line(err)}; check both repositories with `git fsck`"
        )
    return bases


def _missing_releases(
    up: GitRepo, up_head: str, fhead: str, releases: list[DatedRelease], sync_t: int, env: dict[str, str]
) -> list[str]:
    """Upstream releases not in the fork, oldest first. An old tag on an upstream side
    branch (a release branch, say) was never the fork's to take; one on the upstream
    branch or made after the last sync is."""
    in_fork = set(up.run("for-each-ref", "--merged", fhead, "--format=%(refname)", "refs/tags", env=env).split())
    on_branch = set(up.run("for-each-ref", "--merged", up_head, "--format=%(refname)", "refs/tags").split())
    return [
        r.tag
        for r in releases
        if f"refs/tags/{r.tag}" not in in_fork and (f"refs/tags/{r.tag}" in on_branch or r.time > sync_t)
    ]


def _drift(
    up: GitRepo,
    fk: GitRepo,
    up_head: str,
    fhead: str,
    fname: str,
    up_commits: dict[str, Commit],
    releases: list[DatedRelease],
    ts: int,
) -> ForkDrift:
    # The fork's objects join the upstream's for these reads only: neither repository is written to.
    env = _alternates_env(fk.objects_dir)
    bases = _merge_bases(up, fk, up_head, fhead, env)
    ahead_s, behind_s = up.run("rev-list", "--left-right", "--count", f"{fhead}...{up_head}", env=env).split()
    own = log(up, f"{fhead}", f"^{up_head}", env=env)
    fhead_time = ({c.sha: c for c in own}.get(fhead) or up_commits[fhead]).time
    sync = max(bases, key=lambda s: up_commits[s].time)
    sync_t = up_commits[sync].time
    base_t = up_commits[bases[0]].time
    up_t = up_commits[up_head].time
    missing = _missing_releases(up, up_head, fhead, releases, sync_t, env)
    own = [c for c in own if c.time <= ts]
    return ForkDrift(
        repo=fk.label,
        branch=fname,
        head=fhead,
        measured=True,
        head_date=iso(fhead_time),
        days_since_last_commit=days(ts - max([fhead_time, *[c.time for c in own]])),
        merge_base=bases[0],
        merge_base_date=iso(base_t),
        merge_base_age_days=days(ts - base_t),
        behind=int(behind_s),
        ahead=int(ahead_s),
        last_sync_commit=sync,
        last_sync_date=iso(sync_t),
        days_behind=days(max(0, up_t - sync_t)),
        sync_age_days=days(ts - sync_t),
        missing_releases=tuple(missing),
        missing_release_count=len(missing),
        ahead_commits_90d=sum(within(c.time, ts, 90) for c in own),
        ahead_authors_90d=len({c.author for c in own if not c.bot and within(c.time, ts, 90)}),
        last_own_commit_date=iso(max((c.time for c in own), default=None)) if own else None,
    )
