"""Results written before the typed upstream parts existed: they carry a `details` dict
instead, and must load, print and render as they did (evaluator/results/upstream.py, from_details).

In: the scripted repositories of tests/upstream_repos.py, measured as today (typed parts),
and the same measurements written the old way by `legacy_details`, the writer those
versions used, kept here as the format's definition. Out: `from_details` shown to invert
it; an old UpstreamHealth or RunResult shown to load with its typed parts rebuilt (and to
write no `details` back), to print the same summary, to give the checklist the same
evidence and to render the same report section; a hand-made, partial `details` shown to
leave the parts it cannot rebuild None without breaking the readers.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from evaluator import checklist as cl
from evaluator import upstream
from evaluator.results import ForkDrift, RunResult, UpstreamHealth, from_dict, to_dict
from evaluator.results.upstream import Parts
from report_samples import TODAY, html_of, section
from samples import sample_result
from upstream_repos import AS_OF, git, health, world  # noqa: F401  (fixtures)

TYPED = tuple(Parts._fields)  # activity, authors, releases, fork, score_inputs, caveats


def legacy_details(h: UpstreamHealth) -> dict[str, Any]:
    """`details` as versions before the typed parts wrote it, keys in their order."""
    a, au, r, c = h.activity, h.authors, h.releases, h.caveats
    return json.loads(
        json.dumps(
            {
                "branch": a.branch,
                "head_date": a.head_date,
                "as_of_timestamp": a.as_of_timestamp,
                "shallow": c.shallow,
                "history_horizon": c.history_horizon,
                "commits_total": a.commits_total,
                "first_commit_date": a.first_commit_date,
                "repo_age_days": a.repo_age_days,
                "weekly_commits": a.weekly_commits,
                "weekly_commits_start": a.weekly_commits_start,
                "bot_commits_365d": a.bot_commits_365d,
                "authors_total": au.total,
                "authors_365d": au.active_365d,
                "authors_new_90d": au.new_90d,
                "new_authors_90d": au.new_90d_names,
                "bus_factor": au.bus_factor,
                "bus_factor_authors": au.bus_factor_names,
                "top_authors_365d": [dataclasses.asdict(x) for x in au.top_365d],
                "releases": [dataclasses.asdict(x) for x in r.tags],
                "release_count": r.count,
                "releases_365d": r.in_365d,
                "latest_release_date": r.latest_date,
                "median_release_interval_days": r.median_interval_days,
                "non_release_tags": r.other_tags,
                "merged_prs_per_month": a.merged_prs_per_month,
                "merged_prs_90d": a.merged_prs_90d,
                "merged_prs_365d": a.merged_prs_365d,
                "recent_commits": [dataclasses.asdict(x) for x in a.recent_commits],
                "paths": {k: dataclasses.asdict(v) for k, v in a.paths.items()},
                "fork": _legacy_fork(h.fork),
                "score_inputs": dataclasses.asdict(h.score_inputs),
                "limited": c.limited,
                "lower_bounds": c.lower_bounds,
            }
        )
    )


def _legacy_fork(f: ForkDrift | None) -> dict[str, Any] | None:
    # A fork not measured had only these keys; a measured one had every field but `reason`.
    if f is None:
        return None
    d = dataclasses.asdict(f)
    if not f.measured:
        return {k: d[k] for k in ("repo", "branch", "head", "measured", "reason")}
    del d["reason"]
    return d


def old_style(h: UpstreamHealth) -> dict[str, Any]:
    """`h` as a results.json written before the typed parts existed: `details` instead."""
    data = {k: v for k, v in json.loads(json.dumps(to_dict(h))).items() if k not in TYPED}
    # `details` came between fork_days_behind and note; pydantic does not mind the order.
    return {**data, "details": legacy_details(h) if h.measured else {}}


def parts(h: UpstreamHealth) -> Parts:
    return Parts(*(getattr(h, name) for name in TYPED))


def same_notes_as_old(h: UpstreamHealth) -> UpstreamHealth:
    """`h` as rebuilt from an old result: its note's sentences cannot be told apart once
    joined ("; " occurs inside some), so caveats.notes holds the whole note."""
    return dataclasses.replace(h, caveats=dataclasses.replace(h.caveats, notes=(h.note,) if h.note else ()))


@pytest.fixture(scope="module")
def shallow(world, tmp_path_factory):
    """A shallow clone: limited metrics, lower bounds, a two-sentence note, a fork not measured."""
    root, _ = world
    clone = tmp_path_factory.mktemp("shallow") / "clone"
    git(clone.parent, "clone", "-q", "--depth", "3", f"file://{root / 'up'}", str(clone))  # c11, c10, c9
    return upstream.measure(str(clone), fork=str(root / "fork"), as_of=AS_OF)


@pytest.fixture(params=["health", "shallow"])
def measured(request) -> UpstreamHealth:
    return request.getfixturevalue(request.param)


def test_from_details_inverts_the_old_writer(measured):
    rebuilt = upstream.from_details(legacy_details(measured), measured.note)
    assert rebuilt == parts(same_notes_as_old(measured))


def test_typed_parts_round_trip_through_json_without_details(measured):
    data = json.loads(json.dumps(to_dict(measured)))
    assert set(TYPED) <= set(data) and "details" not in data
    assert from_dict(UpstreamHealth, data) == measured


def test_an_old_upstream_health_loads_with_its_parts_rebuilt(measured):
    old = from_dict(UpstreamHealth, old_style(measured))
    assert old == same_notes_as_old(measured)
    assert "details" not in to_dict(old)  # loaded once, written back the new way
    assert upstream.summary_rows(old) == upstream.summary_rows(measured)


def test_an_old_run_result_loads_with_its_parts_rebuilt(health):
    data = json.loads(json.dumps(to_dict(dataclasses.replace(sample_result(), upstream=health))))
    data["upstream"] = old_style(health)
    assert from_dict(RunResult, data).upstream == health  # no note: nothing to tell apart


def test_an_old_not_measured_result_loads():
    # Versions with `details` wrote an empty one when nothing was measured.
    old = {**to_dict(upstream.not_measured("no --upstream given")), "details": {}}
    loaded = from_dict(UpstreamHealth, old)
    assert loaded == upstream.not_measured("no --upstream given")
    assert all(getattr(loaded, name) is None for name in TYPED)


def test_a_result_with_both_keeps_its_typed_parts(health):
    # Results written while both existed (the CPU example in reports/examples) carry the
    # parts and `details`: the parts are read, `details` is dropped.
    data = {**json.loads(json.dumps(to_dict(health))), "details": {"branch": "elsewhere"}}
    assert from_dict(UpstreamHealth, data) == health


def _run(h: UpstreamHealth) -> RunResult:
    r = dataclasses.replace(sample_result(), upstream=h)
    return dataclasses.replace(r, verdict=cl.evaluate(cl.load(cl.DEFAULT_CHECKLIST), r, today=TODAY))


def _without_svg_ids(html: str) -> str:
    # Charts number their SVG ids per process, so two renders differ in those alone.
    return re.sub(r"\b([a-z_]+)\d+-", r"\1N-", html)


@pytest.mark.slow
def test_an_old_result_gets_the_same_evidence_and_report_section(measured, tmp_path):
    old = _run(from_dict(UpstreamHealth, old_style(measured)))
    new = _run(measured)
    assert [o.evidence for o in old.verdict.outcomes] == [o.evidence for o in new.verdict.outcomes]
    forks = {o.metric: o.evidence for o in new.verdict.outcomes if o.metric.startswith("fork.")}
    assert forks and all(("not measured" in e) == (measured.fork_behind is None) for e in forks.values())
    sections = [
        section(_without_svg_ids(html_of(r, tmp_path / name)), sid)
        for r, name in ((old, "old"), (new, "new"))
        for sid in ("upstream", "checklist")
    ]
    assert sections[:2] == sections[2:]


@pytest.mark.slow
def test_hand_made_partial_details_leave_parts_none(tmp_path):
    h = UpstreamHealth(
        measured=True,
        repo="/tmp/tilelang",
        head="deadbeef",
        commits_90d=3,
        details={"branch": "main", "weekly_commits": [1, 2], "fork": None},
    )
    assert all(getattr(h, name) is None for name in TYPED)
    rows = {r[0]: r[1] for r in upstream.summary_rows(h)}
    assert rows["Commits 30 / 90 / 365 d"] == "n/a / 3 / n/a" and rows["Bus factor"] == "n/a"
    # The report leaves out what the missing parts would show and renders the rest.
    html = section(html_of(_run(h), tmp_path), "upstream")
    assert "deadbeef" in html and "<svg" not in html
