"""The sub-commands as a user runs them, on real git repositories and a real baseline store."""
import json

import pytest

from samples import sample_result
from test_cli import evaluate
from upstream_repos import AS_OF, build_fork, build_upstream

from evaluator import baseline


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("repos")
    ids = build_upstream(root / "upstream")
    build_fork(root / "upstream", root / "fork", ids)
    return root


def test_upstream_table_and_json(repos):
    day = AS_OF.date().isoformat()
    p = evaluate("upstream", "--repo", str(repos / "upstream"), "--as-of", day)
    assert p.returncode == 0, p.stderr
    assert "maintenance" in p.stdout.lower()
    j = evaluate("upstream", "--repo", str(repos / "upstream"), "--fork", str(repos / "fork"), "--as-of", day,
                 "--json")
    assert j.returncode == 0, j.stderr
    data = json.loads(j.stdout)
    assert data["measured"] and data["commits_90d"] >= 1 and data["fork_behind"] >= 1


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    a = baseline.record(path, sample_result(created="2026-10-02T10:00:00+00:00", run_id="a"))
    b = baseline.record(path, sample_result(created="2026-10-09T10:00:00+00:00", run_id="b", scale=1.3))
    c = baseline.record(path, sample_result(created="2026-10-10T10:00:00+00:00", run_id="c", platform="h200"))
    return path, a, b, c


def test_baseline_list_show_diff(store):
    path, a, b, _ = store
    p = evaluate("baseline", "list", "--store", str(path), "--platform", "cpu-x86_64")
    assert p.returncode == 0 and a.tag in p.stdout and b.tag in p.stdout and "h200" not in p.stdout
    p = evaluate("baseline", "show", a.tag, "--store", str(path))
    assert p.returncode == 0 and "bert-tiny" in p.stdout
    p = evaluate("baseline", "diff", a.tag, b.tag, "--store", str(path))
    assert p.returncode == 0 and "regression" in p.stdout


def test_compare_two_platforms(store):
    path, a, _, c = store
    p = evaluate("compare", "--candidate", c.tag, "--reference", a.tag, "--store", str(path),
                 "--out", str(path.parent / "cmp"))
    assert p.returncode == 0, p.stderr
    assert c.tag in p.stdout and a.tag in p.stdout
    html = (path.parent / "cmp" / "report.html").read_text()
    assert a.tag in html  # the comparison section names the reference platform's baseline


def test_report_from_store_alone(store, tmp_path):
    path, a, _, _ = store
    p = evaluate("report", "--baseline", a.tag, "--store", str(path), "--out", str(tmp_path / "r"), "--lang", "zh")
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "r" / "report.html").read_text()
    assert "bert-tiny" in html and (tmp_path / "r" / "report.pdf").stat().st_size > 10_000


def test_checklist_commands():
    p = evaluate("checklist", "validate", "evaluator/checklists/production.yaml")
    assert p.returncode == 0 and "valid" in p.stdout
    p = evaluate("checklist", "metrics")
    assert p.returncode == 0 and "ops.speedup_geomean" in p.stdout
