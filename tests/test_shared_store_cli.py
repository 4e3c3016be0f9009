"""Two hosts, one shared baseline store, through the command line as teams use it:
each records a run into its own clone of one bare remote and pushes at the same time;
both baselines and both tags land on the remote, and a pull shows each host the other's."""

from __future__ import annotations

import pytest
import dataclasses
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evaluator import checklist
from evaluator.results import to_dict
from tests.samples import sample_result

ROOT = Path(__file__).resolve().parents[1]


def _evaluate(*args, cache: Path):
    env = {
        **os.environ,
        "EVALUATOR_STORE_CACHE": str(cache),
        "COLUMNS": "200",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    return subprocess.run(
        [sys.executable, "-m", "evaluator.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def _finished_run(folder: Path, platform: str) -> Path:
    r = sample_result(platform=platform, run_id=f"bert-tiny-{platform}")
    r = dataclasses.replace(r, verdict=checklist.evaluate(checklist.load(checklist.DEFAULT_CHECKLIST), r))
    run = folder / "runs" / r.run_id
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps(to_dict(r)))
    return run


@pytest.mark.slow
def test_two_hosts_record_and_push_at_once_and_both_land(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    hosts = {name: (tmp_path / name / "cache", _finished_run(tmp_path / name, "h200")) for name in ("a", "b")}

    def record_and_push(name):
        cache, run = hosts[name]
        rec = _evaluate("baseline", "record", str(run), "--store", str(remote), cache=cache)
        push = _evaluate("baseline", "push", "--store", str(remote), cache=cache)
        return rec, push

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(record_and_push, hosts))
    for rec, push in outcomes:
        assert rec.returncode == 0, rec.stderr
        assert push.returncode == 0 and "Pushed 1 baseline" in push.stdout, push.stdout + push.stderr
    tags = subprocess.run(
        ["git", "ls-remote", "--tags", str(remote)], capture_output=True, text=True, check=True
    ).stdout.split()
    ids = sorted(
        t.removeprefix("refs/tags/")
        for t in tags
        if t.startswith("refs/tags/bert-tiny/h200/") and not t.endswith("^{}")
    )
    assert len(ids) == 2 and ids[0] != ids[1], tags

    # host a pulls and now lists host b's baseline too
    pull = _evaluate("baseline", "pull", "--store", str(remote), cache=hosts["a"][0])
    assert pull.returncode == 0, pull.stderr
    listing = _evaluate("baseline", "list", "--store", str(remote), cache=hosts["a"][0])
    assert listing.returncode == 0 and all(i in listing.stdout for i in ids), listing.stdout


@pytest.mark.slow
def test_push_without_a_shared_store_is_one_line(tmp_path):
    p = _evaluate("--model", "bert-tiny", "--push", "--reports", str(tmp_path), cache=tmp_path / "cache")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "--push needs a shared store" in lines[0]
