"""Releases: the version tags dated at or before as_of.

In: an open `GitRepo` (one `git for-each-ref` over refs/tags) and the as-of time. Out:
`UpstreamReleases`, and the same releases with their unix times for fork drift. A
release is a tag whose name looks like a version (`v1.2`, `0.1.6.post1`, `v2.0-rc1`);
its date is the tagger date of an annotated tag, or the committer date of the commit a
lightweight tag names; several version tags on one commit count once (the oldest, then
the first by name). The median release interval is over the gaps whose later release
falls in the last 365 days.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from evaluator.results import Release, UpstreamReleases

from .clock import DAY, iso, within
from .gitcmd import GitRepo
from .history import Window

# "v0.1.6", "0.1.6.post1", "v2.0-rc1", "release-1.2", "tilelang-v0.1.5"
RELEASE_TAG = re.compile(r"^(?:[A-Za-z][\w.-]*?[-_/])?v?\d+(\.\d+)+")
_TAG_FORMAT = "--format=" + "%1f".join(
    [
        "%(refname)",
        "%(objecttype)",
        "%(objectname)",
        "%(*objecttype)",
        "%(*objectname)",
        "%(taggerdate:unix)",
        "%(committerdate:unix)",
        "%(*committerdate:unix)",
    ]
)


@dataclass(frozen=True)
class DatedRelease:
    """A `Release` with its date as unix seconds, for arithmetic."""

    release: Release
    time: int

    @property
    def tag(self) -> str:
        return self.release.tag


def read_releases(r: GitRepo, ts: int) -> tuple[list[DatedRelease], int]:
    """Version tags dated at or before ts, one per commit, oldest first; and the other tags' count."""
    by_commit: dict[str, DatedRelease] = {}
    other = 0
    for line in r.run("for-each-ref", _TAG_FORMAT, "refs/tags").splitlines():
        if not line.strip():
            continue
        ref, otype, oname, ptype, pname, tdate, cdate, pcdate = line.split("\x1f")
        name = ref.removeprefix("refs/tags/")
        if not RELEASE_TAG.match(name):
            other += 1
            continue
        if otype == "commit":
            commit, when, annotated = oname, cdate, False
        elif otype == "tag" and ptype == "commit":
            commit, when, annotated = pname, tdate or pcdate, True
        else:
            continue  # a tag of a tree or blob, or of another tag: not a release of code
        if not when or int(when) > ts:
            continue
        t = int(when)
        rel = DatedRelease(Release(name, iso(t), commit, annotated), t)
        prev = by_commit.get(commit)
        if prev is None or (t, name) < (prev.time, prev.tag):
            by_commit[commit] = rel
    return sorted(by_commit.values(), key=lambda x: (x.time, x.tag)), other


def measure_releases(r: GitRepo, win: Window, shallow: bool) -> tuple[UpstreamReleases, list[DatedRelease]]:
    """`shallow`: the clone is shallow at all, so it may lack tags even where history is whole."""
    ts = win.ts
    dated, other_tags = read_releases(r, ts)
    times = [d.time for d in dated]
    intervals = [(times[i] - times[i - 1]) / DAY for i in range(1, len(times)) if within(times[i], ts, 365)]
    if shallow:
        win.limited["releases"] = "may be incomplete: a shallow clone fetches only tags on the commits it has"
    return UpstreamReleases(
        tags=tuple(d.release for d in dated),
        count=len(dated),
        in_365d=sum(within(t, ts, 365) for t in times),
        latest_date=dated[-1].release.date if dated else None,
        median_interval_days=round(statistics.median(intervals), 2) if intervals else None,
        other_tags=other_tags,
    ), dated
