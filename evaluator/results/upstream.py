"""Upstream health: is the core repository alive, and does a vendor fork keep up?

In: what evaluator/upstream/ reads from git history alone (its modules say how each
number is defined). Out: `UpstreamHealth`, the headline numbers as fields plus the typed
parts the report and the checklist read: `UpstreamActivity` (commit series, merged PRs,
`PathActivity` per path of interest, `RecentCommit`s), `UpstreamAuthors`
(`AuthorCommits`), `UpstreamReleases` (`Release`s), `ForkDrift`, `ScoreInputs` and
`UpstreamCaveats`. A results.json from before the typed parts carries one `details`
dict instead; `UpstreamHealth` rebuilds the parts from it while loading.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from typing import Any, Callable, NamedTuple, TypeVar

# The typed parts of an upstream measurement (evaluator/upstream/ says how each number is
# defined). Dates are ISO strings in UTC, ages and gaps are days as floats; names, e-mails
# and subjects are repository text, kept verbatim: whoever renders them must escape them.


@dataclass(frozen=True)
class RecentCommit:
    sha: str
    date: str
    author: str  # name after .mailmap
    subject: str


@dataclass(frozen=True)
class PathActivity:
    """Commits that touched one path of interest (src/cuda, ...) on the measured branch."""

    exists: bool  # in the tree at the measured head
    commits_30d: int
    commits_90d: int
    commits_365d: int
    authors_90d: int  # people, bots left out
    days_since_last_commit: float | None  # None: never touched
    last_commit_date: str | None
    first_commit_date: str | None


@dataclass(frozen=True)
class UpstreamActivity:
    """What was read, and how busy the branch is: commit series, merged PRs, paths."""

    branch: str  # the branch measured, as resolved ("main", "origin/main", "HEAD (detached)")
    head_date: str  # committer date of the measured head
    as_of_timestamp: str  # the exact as-of instant (a bare date ends at 23:59:59.999999)
    commits_total: int  # every commit reachable from the head (a lower bound when shallow)
    first_commit_date: str
    repo_age_days: float
    weekly_commits: tuple[int, ...]  # 52 weeks, oldest first, the last one ending at as_of
    weekly_commits_start: str  # start of the oldest week
    bot_commits_365d: int
    merged_prs_per_month: dict[str, int]  # "YYYY-MM" -> PRs, the 12 months up to as_of, oldest first
    merged_prs_90d: int
    merged_prs_365d: int
    recent_commits: tuple[RecentCommit, ...]  # the 10 newest, newest first
    paths: dict[str, PathActivity]  # in the order asked


@dataclass(frozen=True)
class AuthorCommits:
    name: str
    commits: int


@dataclass(frozen=True)
class UpstreamAuthors:
    """People (bots left out, keyed by e-mail after .mailmap), shown by their newest name."""

    total: int  # ever (a lower bound when shallow)
    active_365d: int | None  # None: the year reaches past a shallow clone's history
    new_90d: int | None  # first commit in the last 90 days; None when shallow (anyone could look new)
    new_90d_names: tuple[str, ...]
    bus_factor: int | None  # fewest authors making half of the last year's commits
    bus_factor_names: tuple[str, ...]
    top_365d: tuple[AuthorCommits, ...]  # at most 10, most commits first


@dataclass(frozen=True)
class Release:
    tag: str
    date: str  # tagger date (annotated) or the commit's committer date (lightweight)
    commit: str
    annotated: bool


@dataclass(frozen=True)
class UpstreamReleases:
    """Version tags dated at or before as_of, one per commit."""

    tags: tuple[Release, ...]  # oldest first
    count: int
    in_365d: int
    latest_date: str | None
    median_interval_days: float | None  # over the gaps ending in the last 365 days
    other_tags: int  # tags that do not look like a version ("nightly")


@dataclass(frozen=True)
class ForkDrift:
    """A vendor fork against upstream. Only repo, branch and head are known when
    `measured` is False, and `reason` says why; every other field is then None."""

    repo: str
    branch: str
    head: str  # the fork's newest first-parent commit at or before as_of
    measured: bool
    reason: str = ""
    head_date: str | None = None
    days_since_last_commit: float | None = None  # the fork's own newest commit, or its head
    merge_base: str | None = None
    merge_base_date: str | None = None
    merge_base_age_days: float | None = None  # at as_of
    behind: int | None = None  # upstream commits the fork lacks
    ahead: int | None = None  # fork-only commits
    last_sync_commit: str | None = None  # newest upstream commit in the fork
    last_sync_date: str | None = None
    days_behind: float | None = None  # upstream head's date minus the last sync's
    sync_age_days: float | None = None  # at as_of
    missing_releases: tuple[str, ...] = ()  # upstream release tags the fork lacks, oldest first
    missing_release_count: int | None = None
    ahead_commits_90d: int | None = None
    ahead_authors_90d: int | None = None
    last_own_commit_date: str | None = None


@dataclass(frozen=True)
class ScoreInputs:
    """What the maintenance score was computed from (Scorecard "Maintained", commits only)."""

    commits_90d: int  # as counted, a lower bound when shallow
    lookback_days: int
    commits_per_week_for_10: int
    threshold: int
    repo_age_days: float
    young_repository: bool
    rule: str


@dataclass(frozen=True)
class UpstreamCaveats:
    """How far the numbers can be trusted: a shallow clone's limits, and the notes."""

    shallow: bool
    history_horizon: str | None  # date of the newest shallow-boundary commit; None: history complete
    limited: dict[str, str] = field(default_factory=dict)  # metric -> why it is limited
    lower_bounds: dict[str, int] = field(default_factory=dict)  # headline field -> its lower bound
    notes: tuple[str, ...] = ()  # `UpstreamHealth.note`, one sentence each


@dataclass(frozen=True)
class UpstreamHealth:
    """Git-only health of the upstream repository (and a fork, if given)."""

    measured: bool
    repo: str = ""
    as_of: str = ""  # ISO date the metrics are computed at
    head: str = ""
    days_since_last_commit: float | None = None
    commits_30d: int | None = None
    commits_90d: int | None = None
    commits_365d: int | None = None
    authors_90d: int | None = None
    latest_tag: str | None = None
    days_since_release: float | None = None
    maintenance_score: float | None = None
    fork_behind: int | None = None
    fork_ahead: int | None = None
    fork_days_behind: float | None = None
    note: str = ""  # why not measured, or caveats (shallow clone)
    # Typed parts; None when not measured.
    activity: UpstreamActivity | None = None
    authors: UpstreamAuthors | None = None
    releases: UpstreamReleases | None = None
    fork: ForkDrift | None = None  # also None when no fork was given
    score_inputs: ScoreInputs | None = None
    caveats: UpstreamCaveats | None = None
    # Results written before the typed parts existed carry the same numbers as one dict,
    # `details` (its keys in `from_details`). Accepted when loading, never
    # kept or written: the parts are rebuilt from it, and a part it cannot rebuild (a
    # hand-made or damaged file) stays None.
    details: InitVar[dict[str, Any] | None] = None

    def __post_init__(self, details: dict[str, Any] | None) -> None:
        if not details or not self.measured or self.activity is not None:
            return
        for name, part in from_details(details, self.note)._asdict().items():
            object.__setattr__(self, name, part)  # frozen: set once, while being built


# ---------------------------------------------------------------- the way back from `details`


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
    """The typed parts from a `details` dict; a part whose keys are missing or malformed is None.

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
    """
    return Parts(
        activity=_part(
            lambda: UpstreamActivity(
                **{
                    k: d[k]
                    for k in (
                        "branch",
                        "head_date",
                        "as_of_timestamp",
                        "commits_total",
                        "first_commit_date",
                        "repo_age_days",
                        "weekly_commits_start",
                        "bot_commits_365d",
                        "merged_prs_90d",
                        "merged_prs_365d",
                    )
                },
                weekly_commits=tuple(d["weekly_commits"]),
                merged_prs_per_month=dict(d["merged_prs_per_month"]),
                recent_commits=tuple(RecentCommit(**x) for x in d["recent_commits"]),
                paths={k: PathActivity(**v) for k, v in d["paths"].items()},
            )
        ),
        authors=_part(
            lambda: UpstreamAuthors(
                total=d["authors_total"],
                active_365d=d["authors_365d"],
                new_90d=d["authors_new_90d"],
                new_90d_names=tuple(d["new_authors_90d"]),
                bus_factor=d["bus_factor"],
                bus_factor_names=tuple(d["bus_factor_authors"]),
                top_365d=tuple(AuthorCommits(**x) for x in d["top_authors_365d"]),
            )
        ),
        releases=_part(
            lambda: UpstreamReleases(
                tags=tuple(Release(**x) for x in d["releases"]),
                count=d["release_count"],
                in_365d=d["releases_365d"],
                latest_date=d["latest_release_date"],
                median_interval_days=d["median_release_interval_days"],
                other_tags=d["non_release_tags"],
            )
        ),
        fork=_part(lambda: _fork_from(d["fork"])),
        score_inputs=_part(lambda: ScoreInputs(**d["score_inputs"])),
        caveats=_part(
            lambda: UpstreamCaveats(
                shallow=d["shallow"],
                history_horizon=d["history_horizon"],
                limited=dict(d["limited"]),
                lower_bounds=dict(d["lower_bounds"]),
                # The note joined its sentences with "; ", which some sentences contain too.
                notes=(note,) if note else (),
            )
        ),
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
