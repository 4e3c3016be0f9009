"""Upstream health against real git repositories with scripted history (tests/upstream_repos.py).

In: repositories built in a temp folder. Out: every metric, headline field and typed part
(activity, authors, releases, fork, score inputs, caveats), checked exactly against the
script in `build_upstream` / `build_fork`, and the failure cases checked for a clear
message. Results written before the typed parts existed: test_upstream_details.py.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from datetime import date, datetime, timedelta, timezone

import pytest

from evaluator import upstream
from evaluator.errors import UpstreamError
from evaluator.results import (
    AuthorCommits,
    ForkDrift,
    PathActivity,
    RecentCommit,
    Release,
    ScoreInputs,
    UpstreamCaveats,
    UpstreamHealth,
    from_dict,
    to_dict,
)
from upstream_repos import AS_OF, XSS, Builder, fast_import_repo, git, health, world  # noqa: F401  (fixtures)


def iso(days_before: float) -> str:
    return (AS_OF - timedelta(days=days_before)).isoformat()


# ---------------------------------------------------------------- the headline fields


def test_headline_fields(health, world):
    root, ids = world
    assert health.measured is True
    assert health.repo == str((root / "up").resolve())
    assert health.as_of == "2026-01-01T00:00:00+00:00"  # an exact time: the date alone would mean the whole day
    assert health.head == ids["c10"]  # c11 is dated after as_of
    assert health.days_since_last_commit == 2.0
    assert (health.commits_30d, health.commits_90d, health.commits_365d) == (4, 7, 10)
    assert health.authors_90d == 3  # Alice, Carol, Dave; the bot is left out
    assert health.latest_tag == "v0.4.0"  # v0.5.0 is tagged after as_of
    assert health.days_since_release == 1.0
    assert health.maintenance_score == 5.0  # 10 * 7 // 12
    assert (health.fork_behind, health.fork_ahead, health.fork_days_behind) == (5, 3, 33.0)
    assert health.note == ""


def test_activity(health):
    a, c = health.activity, health.caveats
    assert a.branch == "main"
    assert a.head_date == iso(2)
    assert a.as_of_timestamp == AS_OF.isoformat()
    assert c == UpstreamCaveats(shallow=False, history_horizon=None, limited={}, lower_bounds={}, notes=())
    assert a.commits_total == 12  # c1..c10, f1, m (not r1, p1 on other branches, not c11)
    assert a.first_commit_date == iso(400)
    assert a.repo_age_days == 400.0
    expected = [0] * 52
    for age in (2, 5, 10, 20, 35, 40, 60, 100, 200, 300):  # committer ages < 364 days
        expected[51 - age // 7] += 1
    assert a.weekly_commits == tuple(expected)
    assert a.weekly_commits_start == iso(364)
    assert a.bot_commits_365d == 1


def test_authors_use_mailmap_and_skip_bots(health):
    au = health.authors
    assert au.total == 4  # Alice's old address is joined by .mailmap
    assert au.active_365d == 4
    assert au.new_90d == 1
    assert au.new_90d_names == ("Dave",)  # committed 10 days ago, though authored 500 days ago
    # Last year's human commits: Alice 4, Carol 3, Bob 1, Dave 1; half of 9 needs two people.
    assert au.bus_factor == 2
    assert au.bus_factor_names == ("Alice", "Carol")
    assert au.top_365d == (
        AuthorCommits("Alice", 4),
        AuthorCommits("Carol", 3),
        AuthorCommits("Bob", 1),
        AuthorCommits("Dave", 1),
    )


def test_releases(health, world):
    _, ids = world
    r = health.releases
    assert r.tags == (
        Release("v0.0.9", iso(390), ids["r1"], False),
        Release("v0.1.0", iso(380), ids["c2"], False),
        Release("v0.2.0", iso(199), ids["c4"], True),
        Release("v0.3.0", iso(60), ids["c6"], False),
        Release("v0.3.1", iso(30), ids["p1"], True),
        Release("v0.4.0", iso(1), ids["c10"], True),
    )
    assert r.tags[-1].tag == health.latest_tag
    assert r.count == 6
    assert r.in_365d == 4
    assert r.latest_date == iso(1)
    assert r.median_interval_days == 84.5  # gaps ending in the last year: 181, 139, 30, 29
    assert r.other_tags == 1  # "nightly"


def test_merged_prs(health):
    a = health.activity
    months = {f"2025-{m:02d}": 0 for m in range(2, 13)} | {"2026-01": 0}
    months.update({"2025-03": 1, "2025-06": 1, "2025-11": 1, "2025-12": 3})  # #101, #102, #123, #125 #130 #131
    assert a.merged_prs_per_month == months
    assert list(a.merged_prs_per_month) == sorted(months)
    assert a.merged_prs_90d == 4 and a.merged_prs_365d == 6


def test_paths(health):
    assert health.activity.paths == {
        "src/cuda": PathActivity(
            exists=True,
            commits_30d=0,
            commits_90d=1,
            commits_365d=3,
            authors_90d=1,
            days_since_last_commit=60.0,
            last_commit_date=iso(60),
            first_commit_date=iso(300),
        ),
        "src/rocm": PathActivity(
            exists=False,
            commits_30d=0,
            commits_90d=0,
            commits_365d=0,
            authors_90d=0,
            days_since_last_commit=None,
            last_commit_date=None,
            first_commit_date=None,
        ),
        "src/cpu": PathActivity(
            exists=True,
            commits_30d=1,
            commits_90d=1,
            commits_365d=2,
            authors_90d=1,
            days_since_last_commit=10.0,
            last_commit_date=iso(10),
            first_commit_date=iso(380),
        ),
    }


def test_custom_paths(world):
    root, _ = world
    h = upstream.measure(str(root / "up"), as_of=AS_OF, paths=["./src/cuda/", "feature.txt"])
    assert list(h.activity.paths) == ["src/cuda", "feature.txt"]
    assert h.activity.paths["feature.txt"].commits_90d == 1
    h = upstream.measure(str(root / "up"), as_of=AS_OF, paths=[])
    assert h.activity.paths == {} and h.fork is None  # no fork given


def test_fork_drift(health, world):
    root, ids = world
    assert health.fork == ForkDrift(
        repo=str((root / "fork").resolve()),
        branch="main",
        head=ids["e2"],  # e3 is dated after as_of
        measured=True,
        reason="",
        head_date=iso(25),
        days_since_last_commit=25.0,
        merge_base=ids["c7"],
        merge_base_date=iso(35),
        merge_base_age_days=35.0,
        behind=5,  # f1, m, c8, c9, c10
        ahead=3,  # e1, the sync merge, e2
        last_sync_commit=ids["c7"],
        last_sync_date=iso(35),
        days_behind=33.0,  # upstream head (2 days before as_of) minus the last sync (35)
        sync_age_days=35.0,
        # v0.0.9 sits on an old side branch: never the fork's to take.
        missing_releases=("v0.3.1", "v0.4.0"),
        missing_release_count=2,
        ahead_commits_90d=3,
        ahead_authors_90d=1,
        last_own_commit_date=iso(25),
    )
    # The headline fields are the fork's own numbers.
    assert (health.fork_behind, health.fork_ahead, health.fork_days_behind) == (
        health.fork.behind,
        health.fork.ahead,
        health.fork.days_behind,
    )


def test_fork_branch_suffix_and_fork_behind_nothing(world):
    root, ids = world
    h = upstream.measure(str(root / "up"), fork=f"{root / 'up'}#main", as_of=AS_OF)
    assert (h.fork_behind, h.fork_ahead, h.fork_days_behind) == (0, 0, 0.0)
    assert h.fork.missing_releases == ()
    with pytest.raises(UpstreamError, match="branch 'nope' not found in fork"):
        upstream.measure(str(root / "up"), fork=f"{root / 'fork'}#nope", as_of=AS_OF)


def test_repository_text_comes_back_verbatim(health):
    subjects = [c.subject for c in health.activity.recent_commits]
    assert XSS in subjects  # escaping is the report's job; the data stays exact
    assert health.activity.recent_commits[0] == RecentCommit(
        sha=health.head, date=iso(2), author="Carol", subject="Prepare release"
    )
    assert len(subjects) == 10


def test_serialises_and_round_trips(health):
    data = to_dict(health)
    text = json.dumps(data)
    assert XSS in json.loads(text)["activity"]["recent_commits"][2]["subject"]
    assert "details" not in data  # the old dict is read (test_upstream_details.py), never written
    assert from_dict(UpstreamHealth, json.loads(text)) == health


def test_summary_rows(health):
    rows = upstream.summary_rows(health)
    assert all(isinstance(r, tuple) and len(r) == 3 and all(isinstance(x, str) for x in r) for r in rows)
    table = {r[0]: r[1] for r in rows}
    assert table["Commits 30 / 90 / 365 d"] == "4 / 7 / 10"
    assert table["Bus factor"] == "2"
    assert table["Releases"] == "6, latest v0.4.0 (1.0 days ago)"
    assert table["Fork behind / ahead"] == "5 / 3 commits"
    assert table["Fork missing releases"] == "v0.3.1, v0.4.0"
    assert table["Maintenance score"] == "5 / 10"
    assert table["Path src/rocm"] == "not in the tree"
    assert len(table["Weekly commits (52 w)"]) == 52
    assert upstream.summary_rows(upstream.not_measured("no --upstream given")) == [
        ("Upstream health", "not measured", "no --upstream given")
    ]


def test_not_measured():
    h = upstream.not_measured("no --upstream given")
    assert h == UpstreamHealth(measured=False, note="no --upstream given")


# ---------------------------------------------------------------- as-of, branch, score


def test_as_of_moves_the_window(world):
    root, ids = world
    # A bare date string means the whole day, until 23:59:59.999999 UTC; c6 (60 days
    # before AS_OF) is then the newest commit, 10 days and (nearly) one more before it.
    h = upstream.measure(str(root / "up"), as_of=(AS_OF - timedelta(days=50)).date().isoformat())
    assert h.as_of == "2025-11-12"
    assert h.activity.as_of_timestamp == "2025-11-12T23:59:59.999999+00:00"
    assert h.head == ids["c6"]
    assert h.days_since_last_commit == 11.0  # 10.99999 days, to 2 decimals
    assert h.commits_90d == 2  # c6 and c5 (90 days before that as_of)
    assert h.latest_tag == "v0.3.0" and h.days_since_release == 11.0


@pytest.mark.parametrize(
    "given, expected",
    [
        ("2026-08-21", datetime(2026, 8, 21, 23, 59, 59, 999999, tzinfo=timezone.utc)),
        (date(2026, 8, 21), datetime(2026, 8, 21, 23, 59, 59, 999999, tzinfo=timezone.utc)),
        ("2026-08-21T00:00:00", datetime(2026, 8, 21, tzinfo=timezone.utc)),  # a timestamp stays exact
        ("2026-08-21T15:00:00.700+02:00", datetime(2026, 8, 21, 13, 0, tzinfo=timezone.utc)),  # to the second
        (
            datetime(2026, 8, 21, 23, 59, 59, 999999, tzinfo=timezone.utc),  # config hands over the resolved day
            datetime(2026, 8, 21, 23, 59, 59, 999999, tzinfo=timezone.utc),
        ),
    ],
)
def test_parse_as_of_bare_date_is_the_whole_day(given, expected):
    at = upstream.parse_as_of(given)
    assert at == expected
    assert upstream.as_of_text(at) == ("2026-08-21" if at.microsecond == 999999 else at.isoformat())


@pytest.fixture(scope="module")
def day_repo(tmp_path_factory):
    """Commits at 09:00 and 15:00 UTC on 2026-08-21 and at 01:00 the day after."""
    b = Builder(tmp_path_factory.mktemp("day") / "repo")
    day = datetime(2026, 8, 21, tzinfo=timezone.utc)
    ids = {}
    for name, hours in (("before", -48), ("morning", 9), ("afternoon", 15), ("next", 25)):
        days_before = (AS_OF - (day + timedelta(hours=hours))).total_seconds() / 86400
        ids[name] = b.commit(f"{name} work", days=days_before, files={"f.txt": name})
    return b.path, ids


def test_as_of_a_bare_date_includes_that_days_commits(day_repo):
    repo, ids = day_repo
    h = upstream.measure(str(repo), as_of="2026-08-21", paths=[])
    assert h.head == ids["afternoon"]  # 15:00 that day counts; 01:00 the next day does not
    assert h.as_of == "2026-08-21"
    assert h.activity.head_date == "2026-08-21T15:00:00+00:00"
    # a full timestamp stays exact: at 12:00 the afternoon commit is not there yet
    h = upstream.measure(str(repo), as_of="2026-08-21T12:00:00+00:00", paths=[])
    assert h.head == ids["morning"] and h.as_of == "2026-08-21T12:00:00+00:00"


def test_errors_name_the_option_the_user_typed(world, tmp_path):
    root, _ = world
    with pytest.raises(UpstreamError, match="pass --repo a local clone"):
        upstream.measure(str(tmp_path / "nope"), repo_option="--repo")
    with pytest.raises(UpstreamError, match="pass --upstream the top folder"):
        upstream.measure(str(tmp_path))
    with pytest.raises(UpstreamError, match="pass --fork a local clone"):
        upstream.measure(str(root / "up"), fork=str(tmp_path / "nope"), as_of=AS_OF, repo_option="--repo")


def test_as_of_with_time_of_day(world):
    root, ids = world
    h = upstream.measure(str(root / "up"), as_of=datetime(2025, 12, 30, 12, 0, tzinfo=timezone(timedelta(hours=2))))
    assert h.as_of == "2025-12-30T10:00:00+00:00"
    assert h.head == ids["c10"] and h.days_since_last_commit == round(10 / 24, 2)


def test_as_of_before_history_and_bad_dates(world):
    root, _ = world
    with pytest.raises(UpstreamError, match="no commits on main at or before 2020-01-01"):
        upstream.measure(str(root / "up"), as_of="2020-01-01")
    with pytest.raises(UpstreamError, match="not a date"):
        upstream.measure(str(root / "up"), as_of="last tuesday")


def test_branch(world):
    root, ids = world
    h = upstream.measure(str(root / "up"), as_of=AS_OF, branch="feature", paths=[])
    assert h.activity.branch == "feature"
    assert h.head == ids["f1"]
    assert h.days_since_last_commit == 40.0
    assert h.activity.commits_total == 7  # c1..c6 and f1
    with pytest.raises(UpstreamError, match="branch 'nope' not found in upstream"):
        upstream.measure(str(root / "up"), as_of=AS_OF, branch="nope")


def test_maintenance_score_rule():
    assert upstream.SCORE_THRESHOLD == 12
    assert upstream.maintenance_score(12, 400) == 10.0
    assert upstream.maintenance_score(500, 400) == 10.0
    assert upstream.maintenance_score(11, 400) == 9.0
    assert upstream.maintenance_score(0, 400) == 0.0
    assert upstream.maintenance_score(50, 89.9) == 0.0  # younger than 90 days: Scorecard's minimum


def test_score_inputs(health):
    assert health.score_inputs == ScoreInputs(
        commits_90d=7,
        lookback_days=90,
        commits_per_week_for_10=1,
        threshold=12,
        repo_age_days=400.0,
        young_repository=False,
        rule="min(10, 10 * commits_90d // 12); 0 when the repository is younger than "
        "90 days (Scorecard 'Maintained', commits only)",
    )


# ---------------------------------------------------------------- clones and URLs


def test_shallow_clone_is_marked_not_silently_wrong(world, tmp_path):
    root, ids = world
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "3", f"file://{root / 'up'}", str(shallow))  # c11, c10, c9
    h = upstream.measure(str(shallow), fork=str(root / "fork"), as_of=AS_OF)
    c = h.caveats
    assert c.shallow is True and c.history_horizon == iso(5)
    assert h.head == ids["c10"] and h.days_since_last_commit == 2.0  # still exact
    assert (h.commits_30d, h.commits_90d, h.commits_365d, h.authors_90d) == (None, None, None, None)
    assert c.lower_bounds == {
        "commits_30d": 2,
        "commits_90d": 2,
        "commits_365d": 2,
        "authors_90d": 1,
        "authors_365d": 1,
    }
    assert list(c.limited)[:3] == ["repo_age_days", "commits_total", "weekly_commits"]  # the order measured
    assert h.maintenance_score is None and h.authors.new_90d is None and h.authors.bus_factor is None
    assert h.authors.active_365d is None and h.authors.bus_factor_names == ()
    for key in ("commits_30d", "repo_age_days", "bus_factor", "releases", "paths", "maintenance_score"):
        assert key in c.limited
    # The boundary commit's diff is against nothing; it must not count as path activity.
    assert h.activity.paths["src/cuda"].commits_365d == 0 and h.activity.paths["src/cpu"].commits_365d == 0
    # Only repo, branch and head are known of a fork not measured, and the reason.
    assert h.fork == ForkDrift(
        repo=h.fork.repo,
        branch="main",
        head=ids["e2"],
        measured=False,
        reason="upstream is a shallow clone; run `git fetch --unshallow` there",
    )
    assert h.fork_behind is None
    assert "shallow clone" in h.note and "fork drift not measured" in h.note
    # The note's sentences one by one, as the caveats keep them.
    assert "; ".join(c.notes) == h.note and len(c.notes) == 2
    assert c.notes[0].startswith("shallow clone:") and c.notes[1].startswith("fork drift not measured")
    table = {r[0]: r[1] for r in upstream.summary_rows(h)}
    assert table["Commits 30 / 90 / 365 d"] == ">= 2 / >= 2 / >= 2"
    assert table["Repository age"].endswith("(limited: shallow clone)")


def test_shallow_clone_deep_enough_is_exact_for_short_windows(world, tmp_path):
    root, _ = world
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "6", f"file://{root / 'up'}", str(shallow))
    h = upstream.measure(str(shallow), as_of=AS_OF, paths=[])
    # Depth 6 from c11 stops at c7 and f1 (35 and 40 days before): the 30-day window is whole.
    assert h.caveats.history_horizon == iso(35)
    assert h.commits_30d == 4 and h.commits_90d is None and h.caveats.lower_bounds["commits_90d"] == 6


def test_file_url_is_cloned_into_the_cache_then_fetched(world, tmp_path):
    root, ids = world
    src = tmp_path / "src"
    shutil.copytree(root / "up", src)
    url = f"file://{src}"
    cache = tmp_path / "cache"
    h = upstream.measure(url, as_of=AS_OF, cache_dir=cache, paths=[])
    assert h.repo == url and h.head == ids["c10"] and h.commits_90d == 7 and h.note == ""
    assert h.authors.total == 4  # a bare clone reads .mailmap from HEAD
    clones = [p for p in cache.iterdir()]
    assert len(clones) == 1 and clones[0].name.endswith(".git")
    # New upstream work arrives through a fetch into the same cached clone.
    Builder(src, init=False).commit("Later (#150)", days=-10, files={"later.txt": "x\n"})
    h2 = upstream.measure(url, as_of=AS_OF + timedelta(days=20), cache_dir=cache, paths=[])
    assert h2.days_since_last_commit == 10.0 and h2.note == ""
    assert [p.name for p in cache.iterdir()] == [clones[0].name]
    # Unreachable later: the cached copy is used and the note says so.
    shutil.rmtree(src)
    h3 = upstream.measure(url, as_of=AS_OF, cache_dir=cache, paths=[])
    assert h3.head == ids["c10"] and "could not refresh the cached clone" in h3.note


def test_unreachable_url_fails_fast_and_leaves_no_partial_clone(tmp_path):
    start = time.monotonic()
    with pytest.raises(UpstreamError, match="could not clone upstream http://127.0.0.1:9/nothing.git") as e:
        upstream.measure("http://127.0.0.1:9/nothing.git", cache_dir=tmp_path / "cache")
    assert time.monotonic() - start < 15
    assert "\n" not in str(e.value)
    assert not (tmp_path / "cache").exists()  # probed before anything was written


def test_local_branch_behind_its_remote_is_noted(world, tmp_path):
    root, ids = world
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root / "up"), str(clone))
    git(clone, "reset", "-q", "--hard", ids["c8"])
    h = upstream.measure(str(clone), paths=[])  # as_of = now
    assert h.head == ids["c8"]
    assert "local main is 3 commits behind its remote-tracking branch" in h.note


def test_stale_local_clone_is_noted_when_as_of_is_now(world):
    root, _ = world
    # The fixture's newest commit is dated 2026-01-04 (c11); "now" is later than 30 days after.
    if datetime.now(timezone.utc) < AS_OF + timedelta(days=40):
        pytest.skip("the clock is too close to the fixture dates")
    h = upstream.measure(str(root / "up"), paths=[])
    assert "run `git fetch` there" in h.note
    assert "git fetch" not in upstream.measure(str(root / "up"), as_of=AS_OF, paths=[]).note


def test_bare_mirror_without_config(world, tmp_path):
    # Some mirrors are bare folders without a config file; gitpython mistakes them for a
    # work tree's .git, and the stage must still read them in place.
    root, ids = world
    mirror = tmp_path / "mirror"
    git(tmp_path, "clone", "-q", "--bare", str(root / "up"), str(mirror))
    (mirror / "config").unlink()
    h = upstream.measure(str(mirror), as_of=AS_OF, paths=["src/cuda"])
    assert h.head == ids["c10"] and h.authors.total == 4
    assert h.activity.paths["src/cuda"].commits_365d == 3


# ---------------------------------------------------------------- clear failures


def test_empty_repository(tmp_path):
    git(tmp_path, "init", "-q", "empty")
    with pytest.raises(UpstreamError, match="has no commits"):
        upstream.measure(str(tmp_path / "empty"))


def test_not_a_repository(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(UpstreamError, match="is not a git repository"):
        upstream.measure(str(tmp_path / "plain"))
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(UpstreamError, match="is a file"):
        upstream.measure(str(tmp_path / "file.txt"))
    with pytest.raises(UpstreamError, match="does not exist"):
        upstream.measure(str(tmp_path / "missing"))


def test_failure_messages_are_one_line(world, tmp_path):
    root, _ = world
    git(tmp_path, "init", "-q", "empty")
    cases = [
        ("",),
        (str(tmp_path / "empty"),),
        (str(tmp_path / "missing"),),
        (str(root / "up"), "nope"),
        ("http://127.0.0.1:9/x.git",),
    ]
    for args in cases:
        with pytest.raises(UpstreamError) as e:
            upstream.measure(args[0], branch=args[1] if len(args) > 1 else None, cache_dir=tmp_path / "c")
        message = str(e.value)
        assert message and "\n" not in message and ";" in message, message  # what went wrong; how to fix


def test_fork_without_common_history(world, tmp_path):
    root, _ = world
    other = Builder(tmp_path / "other")
    other.commit("Unrelated start", days=30, files={"x.txt": "x\n"})
    with pytest.raises(UpstreamError, match="shares no history with upstream"):
        upstream.measure(str(root / "up"), fork=str(tmp_path / "other"), as_of=AS_OF)


@pytest.mark.slow
def test_silent_host_times_out(tmp_path, monkeypatch):
    # A host that accepts the connection and then says nothing, like a firewalled proxy.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    monkeypatch.setattr(upstream.sources, "PROBE_TIMEOUT_S", 1.0)  # read where the probe runs
    url = f"http://127.0.0.1:{server.getsockname()[1]}/silent.git"
    start = time.monotonic()
    try:
        with pytest.raises(UpstreamError, match="no answer within 1 s"):
            upstream.measure(url, cache_dir=tmp_path / "cache")
    finally:
        server.close()
    assert time.monotonic() - start < 10


def test_release_tag_pattern():
    for name in ("v0.1.6", "0.1.6.post1", "v2.0-rc1", "release-1.2", "tilelang-v0.1.5", "rel/3.4"):
        assert upstream.RELEASE_TAG.match(name), name
    for name in ("nightly", "v1", "latest", "build-7"):
        assert not upstream.RELEASE_TAG.match(name), name


# ---------------------------------------------------------------- speed


@pytest.mark.slow
def test_two_thousand_commits_under_ten_seconds(tmp_path):
    repo = tmp_path / "big"
    fast_import_repo(repo, 2000)
    start = time.monotonic()
    h = upstream.measure(str(repo), fork=str(repo), as_of=AS_OF)
    elapsed = time.monotonic() - start
    assert elapsed < 10, f"measure() took {elapsed:.1f} s"
    assert h.activity.commits_total == 2000
    assert h.releases.count == 20
    step = 700 * 86400 // 2000  # fast_import_repo spreads the commits evenly over 700 days
    assert h.commits_365d == (365 * 86400 - 1) // step
    assert h.authors.total == 40 and h.fork_behind == 0
