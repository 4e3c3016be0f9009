"""An upstream measurement as the upstream stage records it, without reading any git
repository: every typed part filled (activity, authors, releases, score inputs, caveats;
no fork given), numbers that agree with one another. For the tests of the stages that
only read a RunResult (checklist, report, baseline); real measurements are in
test_upstream.py. Tests that need other values replace a part with dataclasses.replace.
"""

from __future__ import annotations

from evaluator.results import (
    AuthorCommits,
    PathActivity,
    RecentCommit,
    Release,
    ScoreInputs,
    UpstreamActivity,
    UpstreamAuthors,
    UpstreamCaveats,
    UpstreamHealth,
    UpstreamReleases,
)

AS_OF = "2026-11-29"
HEAD = "deadbeef"


def sample_upstream(repo: str = "/tmp/tilelang") -> UpstreamHealth:
    """TileLang as of 2026-11-29: busy (120 commits in 90 days, 500 in the year's 52 weeks),
    v0.1.15 released 20 days before, no shallow clone."""
    activity = UpstreamActivity(
        branch="main",
        head_date="2026-11-28T23:59:59+00:00",
        as_of_timestamp="2026-11-29T23:59:59.999999+00:00",
        commits_total=1900,
        first_commit_date="2024-01-10T08:00:00+00:00",
        repo_age_days=1054.7,
        weekly_commits=(10,) * 38 + (9,) * 13 + (3,),
        weekly_commits_start="2025-11-30T23:59:59.999999+00:00",
        bot_commits_365d=3,
        merged_prs_per_month={f"{y}-{m:02d}": 10 for y, m in [(2025, 12)] + [(2026, k) for k in range(1, 12)]},
        merged_prs_90d=30,
        merged_prs_365d=120,
        recent_commits=(
            RecentCommit(HEAD, "2026-11-28T23:59:59+00:00", "Wei Zhang", "Fix the CUDA layout pass"),
            RecentCommit("c0ffee12", "2026-11-27T10:00:00+00:00", "Ann Lee", "Bump version"),
        ),
        paths={
            "src/cuda": PathActivity(
                True, 12, 40, 150, 6, 1.0, "2026-11-28T23:59:59+00:00", "2024-01-10T08:00:00+00:00"
            )
        },
    )
    authors = UpstreamAuthors(
        total=71,
        active_365d=40,
        new_90d=3,
        new_90d_names=("Ann Lee", "Bo Chen", "Cai Wu"),
        bus_factor=4,
        bus_factor_names=("Wei Zhang", "Ann Lee", "Bo Chen", "Cai Wu"),
        top_365d=(AuthorCommits("Wei Zhang", 120), AuthorCommits("Ann Lee", 60), AuthorCommits("Bo Chen", 30)),
    )
    releases = UpstreamReleases(
        tags=(
            Release("v0.1.13", "2026-08-02T00:00:00+00:00", "13" * 20, True),
            Release("v0.1.14", "2026-09-30T00:00:00+00:00", "14" * 20, True),
            Release("v0.1.15", "2026-11-09T00:00:00+00:00", "15" * 20, True),
        ),
        count=3,
        in_365d=3,
        latest_date="2026-11-09T00:00:00+00:00",
        median_interval_days=49.5,
        other_tags=0,
    )
    score = ScoreInputs(
        commits_90d=120,
        lookback_days=90,
        commits_per_week_for_10=1,
        threshold=12,
        repo_age_days=1054.7,
        young_repository=False,
        rule="min(10, 10 * commits_90d // 12); 0 when the repository is younger than 90 days "
        "(Scorecard 'Maintained', commits only)",
    )
    return UpstreamHealth(
        measured=True,
        repo=repo,
        as_of=AS_OF,
        head=HEAD,
        days_since_last_commit=1.0,
        commits_30d=40,
        commits_90d=120,
        commits_365d=500,
        authors_90d=12,
        latest_tag="v0.1.15",
        days_since_release=20.0,
        maintenance_score=10.0,
        activity=activity,
        authors=authors,
        releases=releases,
        fork=None,
        score_inputs=score,
        caveats=UpstreamCaveats(shallow=False, history_horizon=None),
    )
