"""The typed parts of a measurement, and the way back from the `details` dict of old results.

In: the `details` dict that results written before the typed parts existed carry instead
of them (UpstreamHealth accepts it when loading and calls `from_details`). Out: `Parts`,
the typed fields of a measured `UpstreamHealth` by name (health.py builds the record from
them); `from_details`, those parts rebuilt from an old `details`, a part whose keys are
missing or malformed (a hand-made or damaged file) left None, so a reader of any age of
file uses the typed fields alone.

`details` keys, each with the typed field holding the same value (`h` an UpstreamHealth):
branch, head_date, as_of_timestamp, commits_total, first_commit_date, repo_age_days,
weekly_commits, weekly_commits_start, bot_commits_365d, merged_prs_per_month,
merged_prs_90d, merged_prs_365d, recent_commits [{sha, date, author, subject}], paths
{path: {...}}: h.activity.<same name>; authors_total, authors_365d, authors_new_90d,
new_authors_90d, bus_factor, bus_factor_authors, top_authors_365d [{name, commits}]:
h.authors.total, .active_365d, .new_90d, .new_90d_names, .bus_factor, .bus_factor_names,
.top_365d; releases [{tag, date, commit, annotated}], release_count, releases_365d,
latest_release_date, median_release_interval_days, non_release_tags: h.releases.tags,
.count, .in_365d, .latest_date, .median_interval_days, .other_tags; fork (None, or the
fields of ForkDrift, with `reason` only when not measured and only repo, branch, head,
measured, reason then): h.fork; score_inputs {...}: h.score_inputs; shallow,
history_horizon, limited, lower_bounds: h.caveats.<same name> (h.caveats.notes holds the
note's sentences; one entry, the whole note, when rebuilt from an old result).
Nothing writes `details` any more: tests/test_upstream_details.py keeps the writer, to
check the way back against the format as it was.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, TypeVar

from evaluator.results import (
    AuthorCommits, ForkDrift, PathActivity, RecentCommit, Release, ScoreInputs, UpstreamActivity,
    UpstreamAuthors, UpstreamCaveats, UpstreamReleases,
)

T = TypeVar("T")


class Parts(NamedTuple):
    """The typed fields of a measured `UpstreamHealth`, by field name."""

    activity: UpstreamActivity | None
    authors: UpstreamAuthors | None
    releases: UpstreamReleases | None
    fork: ForkDrift | None
    score_inputs: ScoreInputs | None
    caveats: UpstreamCaveats | None


def from_details(d: dict[str, Any], note: str = "") -> Parts:
    """The typed parts from a `details` dict; a part whose keys are missing or malformed is None."""
    return Parts(
        activity=_part(lambda: UpstreamActivity(
            **{k: d[k] for k in ("branch", "head_date", "as_of_timestamp", "commits_total", "first_commit_date",
                                 "repo_age_days", "weekly_commits_start", "bot_commits_365d",
                                 "merged_prs_90d", "merged_prs_365d")},
            weekly_commits=tuple(d["weekly_commits"]),
            merged_prs_per_month=dict(d["merged_prs_per_month"]),
            recent_commits=tuple(RecentCommit(**x) for x in d["recent_commits"]),
            paths={k: PathActivity(**v) for k, v in d["paths"].items()})),
        authors=_part(lambda: UpstreamAuthors(
            total=d["authors_total"], active_365d=d["authors_365d"], new_90d=d["authors_new_90d"],
            new_90d_names=tuple(d["new_authors_90d"]), bus_factor=d["bus_factor"],
            bus_factor_names=tuple(d["bus_factor_authors"]),
            top_365d=tuple(AuthorCommits(**x) for x in d["top_authors_365d"]))),
        releases=_part(lambda: UpstreamReleases(
            tags=tuple(Release(**x) for x in d["releases"]), count=d["release_count"],
            in_365d=d["releases_365d"], latest_date=d["latest_release_date"],
            median_interval_days=d["median_release_interval_days"], other_tags=d["non_release_tags"])),
        fork=_part(lambda: _fork_from(d["fork"])),
        score_inputs=_part(lambda: ScoreInputs(**d["score_inputs"])),
        caveats=_part(lambda: UpstreamCaveats(
            shallow=d["shallow"], history_horizon=d["history_horizon"], limited=dict(d["limited"]),
            lower_bounds=dict(d["lower_bounds"]),
            # The note joined its sentences with "; ", which some sentences contain too.
            notes=(note,) if note else ())),
    )


def _fork_from(f: dict[str, Any] | None) -> ForkDrift | None:
    if f is None:
        return None
    return ForkDrift(**{**f, "missing_releases": tuple(f.get("missing_releases") or ())})


def _part(build: Callable[[], T]) -> T | None:
    # Results are written by this package, so a missing key means a hand-made or damaged
    # file: that part stays None rather than breaking whoever reads the rest.
    try:
        return build()
    except (KeyError, TypeError, AttributeError, ValueError):
        return None
