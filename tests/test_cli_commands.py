"""The sub-commands as a user runs them, on real git repositories and a real baseline store."""
import dataclasses
import json
from datetime import datetime, timedelta, timezone

import pytest

from samples import sample_result
from test_cli import evaluate
from upstream_repos import AS_OF, Builder, build_fork, build_upstream

from evaluator import baseline, checklist
from evaluator.resources import SHIPPED_CHECKLISTS
from evaluator.results import RunResult, from_dict, to_dict


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


def test_upstream_as_of_a_day_includes_that_days_commits(tmp_path):
    b = Builder(tmp_path / "repo")
    day = datetime(2026, 8, 21, tzinfo=timezone.utc)

    def days_before_as_of(when: datetime) -> float:
        return (AS_OF - when).total_seconds() / 86400

    early = b.commit("Monday work", days=days_before_as_of(day - timedelta(days=3)), files={"a": "1"})
    late = b.commit("Afternoon fix (#7)", days=days_before_as_of(day + timedelta(hours=15)), files={"a": "2"})
    p = evaluate("upstream", "--repo", str(b.path), "--as-of", "2026-08-21", "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["head"] == late and data["as_of"] == "2026-08-21"  # 15:00 that day was left out before
    p = evaluate("upstream", "--repo", str(b.path), "--as-of", "2026-08-21T14:59:59+00:00", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["head"] == early  # a timestamp stays exact


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
    assert "bert-tiny" in html
    from tests.test_pdf_env import skip_reason
    if not skip_reason("zh"):  # the PDF needs pango, harfbuzz-subset and a CJK font: checked, never assumed
        assert (tmp_path / "r" / "report.pdf").stat().st_size > 10_000


def test_checklist_commands():
    p = evaluate("checklist", "validate", "checklists/production.yaml")
    assert p.returncode == 0 and "valid" in p.stdout
    p = evaluate("checklist", "metrics")
    assert p.returncode == 0 and "ops.speedup_geomean" in p.stdout


def _finished_run(reports, run_id="bert-tiny-20261129-120000"):
    """A run folder as the pipeline leaves it when only recording the baseline failed."""
    result = sample_result(run_id=run_id)
    result = dataclasses.replace(result, verdict=checklist.evaluate(
        checklist.load(SHIPPED_CHECKLISTS / "default.yaml"), result))
    folder = reports / "runs" / run_id
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(to_dict(result), indent=1))
    return folder


def test_baseline_record_a_finished_run(tmp_path):
    folder = _finished_run(tmp_path / "reports")
    store = tmp_path / "store"
    p = evaluate("baseline", "record", str(folder), "--store", str(store))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Recorded bert-tiny/cpu-x86_64/2026Q4-1 in ")
    tag = "bert-tiny/cpu-x86_64/2026Q4-1"
    assert baseline.load(store, tag).run_id == "bert-tiny-20261129-120000"
    # the run folder now says where its baseline is, so it cannot be recorded twice
    assert json.loads((folder / "baseline.json").read_text())["tag"] == tag
    assert from_dict(RunResult, json.loads((folder / "results.json").read_text())).baseline.tag == tag
    again = evaluate("baseline", "record", str(folder), "--store", str(store))
    assert again.returncode == 2 and again.stderr.strip() == (
        f"error: run bert-tiny-20261129-120000 is already recorded as {tag} in {store}; "
        f"`evaluate baseline show {tag}` shows it")
    assert [r.tag for r in baseline.list_baselines(store)] == [tag]


def test_baseline_record_defaults_to_the_store_next_to_the_run(tmp_path):
    folder = _finished_run(tmp_path / "reports")
    p = evaluate("baseline", "record", str(folder / "results.json"))  # the file works as well as its folder
    assert p.returncode == 0, p.stderr
    assert [r.tag for r in baseline.list_baselines(tmp_path / "reports" / "baselines")] == [
        "bert-tiny/cpu-x86_64/2026Q4-1"]
