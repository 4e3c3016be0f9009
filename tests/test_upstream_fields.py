"""The typed parts of an upstream measurement (activity, authors, releases, fork,
score_inputs, caveats) on the scripted repositories of tests/upstream_repos.py.

In: the same fixture history as tests/test_upstream.py, which checks `details`. Out: each
typed field checked against the script, the typed fields and `details` shown to carry
the same numbers both ways (evaluator/upstream/details.py), and results written before
the typed fields existed shown to load, and to get their typed fields back from `details`.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import pytest

from evaluator import upstream
from evaluator.results import (
    AuthorCommits, ForkDrift, PathActivity, RecentCommit, Release, RunResult, ScoreInputs, UpstreamCaveats,
    UpstreamHealth, from_dict, to_dict,
)
from evaluator.upstream.details import Parts, to_details
from samples import sample_result
from upstream_repos import AS_OF, XSS, build_world, git

TYPED = tuple(Parts._fields)  # activity, authors, releases, fork, score_inputs, caveats


def iso(days_before: float) -> str:
    return (AS_OF - timedelta(days=days_before)).isoformat()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("upstream_fields")
    return root, build_world(root)


@pytest.fixture(scope="module")
def health(world):
    root, _ = world
    return upstream.measure(str(root / "up"), fork=str(root / "fork"), as_of=AS_OF, cache_dir=root / "cache")


@pytest.fixture(scope="module")
def shallow(world, tmp_path_factory):
    root, _ = world
    clone = tmp_path_factory.mktemp("shallow") / "clone"
    git(clone.parent, "clone", "-q", "--depth", "3", f"file://{root / 'up'}", str(clone))  # c11, c10, c9
    return upstream.measure(str(clone), fork=str(root / "fork"), as_of=AS_OF)


def parts(h: UpstreamHealth) -> Parts:
    return Parts(*(getattr(h, name) for name in TYPED))


def test_activity(health):
    a = health.activity
    assert (a.branch, a.head_date, a.as_of_timestamp) == ("main", iso(2), AS_OF.isoformat())
    assert (a.commits_total, a.first_commit_date, a.repo_age_days) == (12, iso(400), 400.0)
    weekly = [0] * 52
    for age in (2, 5, 10, 20, 35, 40, 60, 100, 200, 300):
        weekly[51 - age // 7] += 1
    assert a.weekly_commits == tuple(weekly) and a.weekly_commits_start == iso(364)
    assert a.bot_commits_365d == 1
    assert a.merged_prs_90d == 4 and a.merged_prs_365d == 6
    assert list(a.merged_prs_per_month) == [f"2025-{m:02d}" for m in range(2, 13)] + ["2026-01"]
    assert a.merged_prs_per_month["2025-12"] == 3
    assert a.recent_commits[0] == RecentCommit(health.head, iso(2), "Carol", "Prepare release")
    assert len(a.recent_commits) == 10 and XSS in [c.subject for c in a.recent_commits]
    assert a.paths == {
        "src/cuda": PathActivity(True, 0, 1, 3, 1, 60.0, iso(60), iso(300)),
        "src/rocm": PathActivity(False, 0, 0, 0, 0, None, None, None),
        "src/cpu": PathActivity(True, 1, 1, 2, 1, 10.0, iso(10), iso(380)),
    }


def test_authors(health):
    au = health.authors
    assert (au.total, au.active_365d, au.new_90d, au.new_90d_names) == (4, 4, 1, ("Dave",))
    assert (au.bus_factor, au.bus_factor_names) == (2, ("Alice", "Carol"))
    assert au.top_365d == (AuthorCommits("Alice", 4), AuthorCommits("Carol", 3), AuthorCommits("Bob", 1),
                           AuthorCommits("Dave", 1))


def test_releases(health, world):
    _, ids = world
    r = health.releases
    assert r.tags == (Release("v0.0.9", iso(390), ids["r1"], False), Release("v0.1.0", iso(380), ids["c2"], False),
                      Release("v0.2.0", iso(199), ids["c4"], True), Release("v0.3.0", iso(60), ids["c6"], False),
                      Release("v0.3.1", iso(30), ids["p1"], True), Release("v0.4.0", iso(1), ids["c10"], True))
    assert (r.count, r.in_365d, r.latest_date, r.median_interval_days, r.other_tags) == (6, 4, iso(1), 84.5, 1)
    assert r.tags[-1].tag == health.latest_tag


def test_fork(health, world):
    root, ids = world
    assert health.fork == ForkDrift(
        repo=str((root / "fork").resolve()), branch="main", head=ids["e2"], measured=True, reason="",
        head_date=iso(25), days_since_last_commit=25.0, merge_base=ids["c7"], merge_base_date=iso(35),
        merge_base_age_days=35.0, behind=5, ahead=3, last_sync_commit=ids["c7"], last_sync_date=iso(35),
        days_behind=33.0, sync_age_days=35.0, missing_releases=("v0.3.1", "v0.4.0"), missing_release_count=2,
        ahead_commits_90d=3, ahead_authors_90d=1, last_own_commit_date=iso(25))
    # The headline fields are the fork's own numbers.
    assert (health.fork_behind, health.fork_ahead, health.fork_days_behind) == (
        health.fork.behind, health.fork.ahead, health.fork.days_behind)


def test_score_inputs_and_caveats(health):
    assert health.score_inputs == ScoreInputs(
        commits_90d=7, lookback_days=90, commits_per_week_for_10=1, threshold=12, repo_age_days=400.0,
        young_repository=False, rule=health.details["score_inputs"]["rule"])
    assert health.caveats == UpstreamCaveats(shallow=False, history_horizon=None, limited={}, lower_bounds={}, notes=())


def test_no_fork_and_no_paths(world):
    root, _ = world
    h = upstream.measure(str(root / "up"), as_of=AS_OF, paths=[])
    assert h.fork is None and h.details["fork"] is None
    assert h.activity.paths == {}


def test_shallow_clone_in_the_typed_fields(shallow, world):
    _, ids = world
    c = shallow.caveats
    assert c.shallow is True and c.history_horizon == iso(5)
    assert c.lower_bounds == {"authors_365d": 1, "commits_90d": 2, "commits_30d": 2, "commits_365d": 2,
                              "authors_90d": 1}
    assert list(c.limited)[:3] == ["repo_age_days", "commits_total", "weekly_commits"]  # the order measured
    assert "; ".join(c.notes) == shallow.note and len(c.notes) == 2
    assert c.notes[0].startswith("shallow clone:") and c.notes[1].startswith("fork drift not measured")
    assert shallow.authors.active_365d is None and shallow.authors.new_90d is None
    assert shallow.authors.bus_factor is None and shallow.authors.bus_factor_names == ()
    assert shallow.activity.paths["src/cuda"].commits_365d == 0  # the boundary commit is no path activity
    f = shallow.fork
    assert f == ForkDrift(repo=f.repo, branch="main", head=ids["e2"], measured=False,
                          reason="upstream is a shallow clone; run `git fetch --unshallow` there")
    assert shallow.details["fork"] == {"repo": f.repo, "branch": "main", "head": ids["e2"], "measured": False,
                                       "reason": f.reason}


@pytest.mark.parametrize("case", ["health", "shallow"])
def test_details_and_typed_fields_carry_the_same_numbers(case, request):
    h = request.getfixturevalue(case)
    assert to_details(parts(h)) == h.details
    assert json.dumps(to_details(parts(h))) == json.dumps(h.details)  # the key order too
    rebuilt = upstream.from_details(h.details, h.note)
    # The note's sentences cannot be told apart once joined ("; " occurs inside some).
    assert rebuilt._replace(caveats=None) == parts(h)._replace(caveats=None)
    assert rebuilt.caveats == dataclasses.replace(h.caveats, notes=(h.note,) if h.note else ())


def test_typed_fields_round_trip_through_json(health, shallow):
    for h in (health, shallow):
        data = json.loads(json.dumps(to_dict(h)))
        assert set(TYPED) <= set(data)
        assert from_dict(UpstreamHealth, data) == h


def old_style(h: UpstreamHealth) -> dict:
    """`h` as a results.json written before the typed fields existed: `details` only."""
    return {k: v for k, v in json.loads(json.dumps(to_dict(h))).items() if k not in TYPED}


def test_an_old_details_only_dict_still_loads(health):
    old = from_dict(UpstreamHealth, old_style(health))
    assert all(getattr(old, name) is None for name in TYPED)
    assert old == dataclasses.replace(health, **{name: None for name in TYPED})
    # A reader that wants the fields gets them back from `details`.
    assert upstream.with_typed_fields(old) == health
    assert upstream.summary_rows(old) == upstream.summary_rows(health)


def test_an_old_run_result_with_upstream_details_still_loads(health):
    r = sample_result()
    data = json.loads(json.dumps(to_dict(dataclasses.replace(r, upstream=health))))
    data["upstream"] = old_style(health)
    loaded = from_dict(RunResult, data)
    assert loaded.upstream.details == health.details and loaded.upstream.activity is None


def test_hand_made_partial_details_leave_parts_none():
    h = UpstreamHealth(measured=True, repo="/tmp/tilelang", head="deadbeef", commits_90d=3,
                       details={"branch": "main", "weekly_commits": [1, 2], "fork": None})
    typed = upstream.with_typed_fields(h)
    assert typed.activity is None and typed.authors is None and typed.fork is None
    rows = {r[0]: r[1] for r in upstream.summary_rows(h)}
    assert rows["Commits 30 / 90 / 365 d"] == "n/a / 3 / n/a" and rows["Bus factor"] == "n/a"


def test_not_measured_has_no_typed_fields():
    h = upstream.not_measured("no --upstream given")
    assert all(getattr(h, name) is None for name in TYPED)
    assert upstream.with_typed_fields(h) is h
