"""The maintenance score, OpenSSF Scorecard's "Maintained" check with commits only.

In: commits in the last 90 days (exact, or only a lower bound from a shallow clone), the
repository's age and the history `Window`. Out: the score (None when a shallow clone
leaves it unknown) and the `ScoreInputs` it came from. With no forge, issue activity is
left out: 10 * commits_90d // 12, at most 10, where 12 = 90 days // 7 at one commit a
week; 0 for a repository younger than 90 days.
"""

from __future__ import annotations

from evaluator.results import ScoreInputs

from .history import Window

SCORE_LOOKBACK_DAYS = 90
SCORE_COMMITS_PER_WEEK = 1
# Scorecard divides with integers: 1 * 90 // 7 = 12 commits score 10.
SCORE_THRESHOLD = SCORE_COMMITS_PER_WEEK * SCORE_LOOKBACK_DAYS // 7


def maintenance_score(commits_90d: int, repo_age_days: float) -> float:
    """Scorecard's "Maintained" arithmetic on commits alone."""
    if repo_age_days < SCORE_LOOKBACK_DAYS:
        return 0.0
    return float(min(10, 10 * commits_90d // SCORE_THRESHOLD))


def score(counted_90d: int, exact_90d: int | None, age_days: float, win: Window) -> float | None:
    """`counted_90d`: commits seen in 90 days; `exact_90d`: the same, or None when only a lower bound."""
    if win.horizon is not None and age_days < SCORE_LOOKBACK_DAYS:
        value: float | None = None  # it may only look young because its history is cut
    elif exact_90d is not None:
        value = maintenance_score(exact_90d, age_days)
    elif counted_90d >= SCORE_THRESHOLD:
        value = 10.0  # the lower bound already earns the top score
    else:
        value = None
    if value is None:
        win.limit("maintenance_score", "unknown")
    return value


def score_inputs(counted_90d: int, age_days: float) -> ScoreInputs:
    return ScoreInputs(
        commits_90d=counted_90d,
        lookback_days=SCORE_LOOKBACK_DAYS,
        commits_per_week_for_10=SCORE_COMMITS_PER_WEEK,
        threshold=SCORE_THRESHOLD,
        repo_age_days=age_days,
        young_repository=age_days < SCORE_LOOKBACK_DAYS,
        rule=f"min(10, 10 * commits_90d // {SCORE_THRESHOLD}); 0 when the repository is younger "
        f"than {SCORE_LOOKBACK_DAYS} days (Scorecard 'Maintained', commits only)",
    )
