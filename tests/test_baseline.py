"""The baseline store against real git repositories in temp folders.

In: synthetic RunResults from tests/samples.py. Out: assertions on the store's folders,
commits, tags and work tree, on loading back, comparisons, trends and the tuning cache,
including interrupted and concurrent writes.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import multiprocessing
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from evaluator import baseline as bl
from evaluator.errors import BaselineError
from evaluator.tuning import cache_key
from evaluator.results import Hardware, to_dict
from samples import replace, sample_result

Q4 = "2026-11-29T12:00:00+00:00"
Q4_LATER = "2026-12-02T09:00:00+00:00"
Q1 = "2027-01-05T08:00:00+00:00"


def git(path: Path, *args: str, check: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, env=env)
    if check:
        assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def assert_clean(store: Path) -> None:
    assert git(store, "status", "--porcelain", "--untracked-files=all") == ""
    assert not list(store.glob(bl.TMP_PREFIX + "*"))
    assert git(store, "diff", "--cached", "--name-only") == ""


def with_hw(result, **changes):
    env = result.environment
    return replace(result, environment=dataclasses.replace(env, hardware=dataclasses.replace(env.hardware,
                                                                                              **changes)))


@pytest.fixture
def store(tmp_path) -> Path:
    return tmp_path / "baselines"


# ---------------------------------------------------------------- store and ids


def test_ids_are_path_and_ref_safe():
    assert bl.model_slug("bert-tiny") == "bert-tiny"
    assert bl.model_slug("pkg.mod:factory") == "pkg.mod-factory"
    assert bl.model_slug("models/My File.py:make") == "models-my-file.py-make"
    long = bl.model_slug("x" * 300)
    assert len(long) <= 80 and bl.model_slug(long) == long
    with pytest.raises(BaselineError, match="no letters"):
        bl.model_slug(":::")
    assert bl.baseline_id("pkg.mod:factory", "h200", "2026Q4-1") == "pkg.mod-factory/h200/2026Q4-1"


def test_open_store_creates_once_and_refuses_what_is_not_a_store(tmp_path, store):
    s = bl.open_store(store)
    assert (store / bl.MARKER).is_file() and git(store, "rev-list", "--count", "HEAD") == "1"
    assert bl.open_store(store).path == s.path and git(store, "rev-list", "--count", "HEAD") == "1"
    assert bl.list_baselines(s) == []

    with pytest.raises(BaselineError, match="no baseline store"):
        bl.open_store(tmp_path / "nowhere", create=False)
    with pytest.raises(BaselineError, match="no baseline store"):
        bl.list_baselines(tmp_path / "nowhere")
    assert bl.previous(tmp_path / "nowhere", "bert-tiny", "cpu-x86_64") is None
    assert bl.trend(tmp_path / "nowhere", "bert-tiny", "cpu-x86_64") == ()

    foreign = tmp_path / "project"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(BaselineError, match="not a baseline store"):
        bl.record(foreign, sample_result())
    git(foreign, "init", "-q")
    with pytest.raises(BaselineError, match="git repository but not a baseline store"):
        bl.open_store(foreign)
    (tmp_path / "file").write_text("x")
    with pytest.raises(BaselineError, match="is a file"):
        bl.open_store(tmp_path / "file")

    # A clone of an empty shared remote is initialised in place and keeps its origin.
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    with pytest.raises(BaselineError, match="bare git repository"):
        bl.open_store(remote)
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "clone"))
    ref = bl.record(tmp_path / "clone", sample_result())
    assert git(tmp_path / "clone", "remote") == "origin"
    git(tmp_path / "clone", "push", "-q", "origin", "HEAD", "--tags")
    assert ref.tag in git(remote, "tag")


def test_several_baselines_list_show_load_and_layout(store):
    first = bl.record(store, sample_result(created=Q4))
    second = bl.record(store, sample_result(created=Q4_LATER, run_id="r2"))
    third = bl.record(store, sample_result(created=Q1, run_id="r3"))
    other = bl.record(store, sample_result(created=Q4, platform="h200"))
    assert [r.version for r in (first, second, third, other)] == ["2026Q4-1", "2026Q4-2", "2027Q1-1", "2026Q4-1"]
    assert first.path == first.tag == "bert-tiny/cpu-x86_64/2026Q4-1"

    assert [r.path for r in bl.list_baselines(store, model="bert-tiny", platform="cpu-x86_64")] == [
        first.path, second.path, third.path]
    assert [r.path for r in bl.list_baselines(store, platform="h200")] == [other.path]
    assert len(bl.list_baselines(store)) == 4 and bl.list_baselines(store, model="gpt2") == []

    # One commit and one annotated tag per baseline, on top of the store's first commit.
    assert git(store, "rev-list", "--count", "HEAD") == "5"
    assert git(store, "cat-file", "-t", first.tag) == "tag"
    assert git(store, "rev-parse", f"{third.tag}^{{commit}}") == third.commit
    assert_clean(store)

    folder = store / first.path
    names = {p.name for p in folder.iterdir()}
    assert {"manifest.json", "result.json", "hot_ops.csv", "op_bench.csv", "op_ratios.csv", "tuning.csv",
            "verify.csv", "e2e.csv", "calls.csv", "soak.csv", "upstream.csv"} == names  # no verdict in the sample: no checklist.csv
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["schema_version"] == bl.SCHEMA_VERSION and manifest["run_id"] == "bert-tiny-20261129-120000"
    assert manifest["hardware"]["name"] == "Test CPU" and "driver" in manifest["hardware"]
    assert manifest["model"]["spec_hash"] == "abc123" and manifest["settings"]["timing"]["reps"] == 20
    assert manifest["torch"] == "2.13.0" and manifest["tilelang"] == "0.1.15"
    assert len((folder / "tuning.csv").read_text().splitlines()) == 1 + 3  # one row per candidate

    loaded = bl.load(store, second.path)
    assert loaded.baseline == dataclasses.replace(second, store=loaded.baseline.store)
    original = sample_result(created=Q4_LATER, run_id="r2")
    assert to_dict(dataclasses.replace(loaded, baseline=None)) == to_dict(original)
    assert bl.previous(store, "bert-tiny", "cpu-x86_64").run_id == "r3"

    rows = dict(bl.show_rows(loaded))
    assert rows["id"] == second.path and rows["run"] == "r2" and rows["device"].startswith("Test CPU")
    assert "speedup 1.10x" in rows["op gemm 256x128x128 float32"]

    with pytest.raises(BaselineError, match="no baseline bert-tiny/cpu-x86_64/2030Q1-1"):
        bl.load(store, "bert-tiny/cpu-x86_64/2030Q1-1")
    with pytest.raises(BaselineError, match="is not <model>/<platform>"):
        bl.load(store, "bert-tiny/latest")


# ---------------------------------------------------------------- regressions


def test_regression_detected_noise_not(store):
    bl.record(store, sample_result(created=Q4))
    slower = sample_result(created=Q4_LATER, scale=1.3)
    c = bl.compare(bl.previous(store, "bert-tiny", "cpu-x86_64"), slower)
    assert c.comparable and c.reference == "bert-tiny/cpu-x86_64/2026Q4-1" and c.candidate == slower.run_id
    assert {ch.key for ch in c.regressions} == {"gemm 256x128x128 float32", "softmax 1024x128 float32",
                                                bl.E2E_TILELANG, bl.E2E_TORCH}
    assert all(ch.ratio == pytest.approx(1.3) for ch in c.changes)
    assert all(0.05 <= ch.threshold < 0.3 for ch in c.changes)  # floor, widened by the measured spread

    noisy = bl.compare(bl.previous(store, "bert-tiny", "cpu-x86_64"), sample_result(created=Q4_LATER, scale=1.02))
    assert noisy.regressions == () and {ch.status for ch in noisy.changes} == {"unchanged"}

    faster = bl.compare(bl.previous(store, "bert-tiny", "cpu-x86_64"), sample_result(scale=0.7))
    assert {ch.status for ch in faster.changes} == {"improvement"}
    # A tighter configured floor and no noise allowance turns the 2% change into a regression.
    strict = bl.compare(bl.previous(store, "bert-tiny", "cpu-x86_64"), sample_result(scale=1.02),
                        threshold=0.01, noise_k=0.0)
    assert len(strict.regressions) == 4


def test_noisier_timings_widen_the_threshold():
    ref = sample_result()
    slower = sample_result(scale=1.3)
    cand = replace(slower, op_bench=tuple(
        dataclasses.replace(b, tilelang=dataclasses.replace(b.tilelang, p10_ms=b.tilelang.median_ms * 0.6,
                                                            p90_ms=b.tilelang.median_ms * 1.4))
        for b in slower.op_bench))
    ops = [ch for ch in bl.compare(ref, cand).changes if ch.kind == "op"]
    assert all(ch.status == "unchanged" and ch.threshold > 0.5 for ch in ops)


def test_diff_new_gone_and_rows(store):
    a = bl.record(store, sample_result(created=Q4))
    fewer = sample_result(created=Q4_LATER, scale=1.3)
    extra = dataclasses.replace(fewer.op_bench[0], shape=(512, 512, 512))
    b = bl.record(store, replace(fewer, op_bench=(fewer.op_bench[0], extra)))
    c = bl.diff(store, a.path, b.path)
    assert (c.reference, c.candidate) == (a.path, b.path)
    status = {ch.key: ch.status for ch in c.changes}
    assert status["softmax 1024x128 float32"] == "gone" and status["gemm 512x512x512 float32"] == "new"
    assert status["gemm 256x128x128 float32"] == "regression"
    rows = bl.comparison_rows(c)
    assert len(rows[0]) == len(bl.COMPARISON_COLUMNS) and rows[0][:2] == ("op", "gemm 256x128x128 float32")
    assert rows[0][4] == "1.300" and rows[0][6] == "regression"


def test_environment_changes_listed_as_likely_causes():
    ref = sample_result()
    cand = with_hw(sample_result(scale=1.3), driver="560.1", cuda="12.6")
    cand = replace(cand, environment=dataclasses.replace(cand.environment, torch="2.14.0"),
                   settings={**cand.settings, "ops": 3, "out": "reports/run-2"})
    c = bl.compare(ref, cand)
    changed = {f: (a, b) for f, a, b in c.environment_changes}
    assert changed["driver"] == ("", "560.1") and changed["cuda"] == ("", "12.6")
    assert changed["torch"] == ("2.13.0", "2.14.0") and changed["settings.ops"] == ("2", "3")
    assert "settings.out" not in changed and "tilelang" not in changed
    assert c.comparable and "likely causes: " in c.note and "torch 2.13.0 -> 2.14.0" in c.note
    assert ("torch", "2.13.0", "2.14.0") in bl.environment_rows(c)
    assert bl.compare(ref, sample_result()).environment_changes == ()


def test_different_timing_policies_are_marked_not_comparable():
    ref = sample_result()
    cand = replace(sample_result(scale=1.3), settings={**ref.settings, "timing": {"timer": "perf_counter",
                                                                                  "warmup": 3, "reps": 100}})
    c = bl.compare(ref, cand)
    assert not c.comparable and "NOT COMPARABLE" in c.note and "timing policies differ" in c.note
    assert all(row[6].endswith("(not comparable)") for row in bl.comparison_rows(c))
    assert ("settings.timing.reps", "20", "100") in c.environment_changes


def test_cross_platform_compare_ratio_of_candidate_to_reference(store):
    h200 = bl.record(store, with_hw(sample_result(platform="h200"), name="NVIDIA H200", device="cuda"))
    c500 = bl.record(store, with_hw(sample_result(platform="c500", scale=2.0), name="MetaX C500", device="cuda"))
    c = bl.diff(store, h200.path, c500.path)
    assert "cross-platform: candidate on c500 (MetaX C500) vs reference on h200 (NVIDIA H200)" in c.note
    assert all(ch.ratio == pytest.approx(2.0) for ch in c.changes) and len(c.changes) == 4
    assert ("device", "NVIDIA H200", "MetaX C500") in c.environment_changes


def test_trend_points_in_order(store):
    for created, scale in ((Q1, 1.2), (Q4, 1.0), (Q4_LATER, 1.1)):  # recorded out of order
        bl.record(store, sample_result(created=created, scale=scale))
    points = bl.trend(store, "bert-tiny", "cpu-x86_64")
    e2e = [p for p in points if p.key == bl.E2E_TILELANG]
    assert [p.version for p in e2e] == ["2026Q4-1", "2026Q4-2", "2027Q1-1"]
    assert [p.median_ms for p in e2e] == pytest.approx([11.0, 12.1, 13.2])
    assert [p.created for p in e2e] == [Q4, Q4_LATER, Q1]
    assert {p.key for p in points} == {"gemm 256x128x128 float32", "softmax 1024x128 float32", bl.E2E_TILELANG,
                                       bl.E2E_TORCH}


# ---------------------------------------------------------------- atomicity and concurrency


def _fail_on_third_csv(real):
    calls = []

    def write(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3:
            raise RuntimeError("disk vanished mid-write")
        return real(*args, **kwargs)
    return write


@pytest.mark.parametrize("where", ["csv", "tag", "interrupt"])
def test_interrupted_write_leaves_nothing(store, monkeypatch, where):
    bl.record(store, sample_result(created=Q4))
    head, tags = git(store, "rev-parse", "HEAD"), git(store, "tag")
    if where == "csv":
        monkeypatch.setattr(bl, "_write_csv", _fail_on_third_csv(bl._write_csv))
        expected = RuntimeError
    elif where == "tag":  # after the folder was renamed in and committed
        def tag(repo, bid, commit, message):
            git(store, "tag", "-a", "-m", "half", bid, commit)
            raise RuntimeError("killed while tagging")
        monkeypatch.setattr(bl, "_tag", tag)
        expected = RuntimeError
    else:
        def interrupt(*args, **kwargs):
            raise KeyboardInterrupt
        monkeypatch.setattr(bl, "_write_json", interrupt)
        expected = KeyboardInterrupt
    with pytest.raises(expected):
        bl.record(store, sample_result(created=Q4_LATER, scale=1.3))

    assert git(store, "rev-parse", "HEAD") == head and git(store, "tag") == tags
    assert not (store / "bert-tiny/cpu-x86_64/2026Q4-2").exists()
    assert_clean(store)
    assert [r.version for r in bl.list_baselines(store)] == ["2026Q4-1"]
    monkeypatch.undo()
    assert bl.record(store, sample_result(created=Q4_LATER)).version == "2026Q4-2"
    assert_clean(store)


def test_leftovers_of_a_killed_writer_are_cleaned_by_the_next(store):
    first = bl.record(store, sample_result(created=Q4))
    # What SIGKILL at each step would leave: a temp folder, a renamed but uncommitted
    # folder, a staged file, and a committed baseline whose tag was never written.
    (store / ".tmp-deadbeef").mkdir()
    (store / ".tmp-deadbeef" / "result.json").write_text("{")
    shutil.copytree(store / first.path, store / "bert-tiny/cpu-x86_64/2026Q4-2")
    (store / "staged.txt").write_text("x")
    git(store, "add", "staged.txt")
    git(store, "tag", "-d", first.tag)

    second = bl.record(store, sample_result(created=Q4_LATER))
    assert second.version == "2026Q4-2"
    assert git(store, "cat-file", "-t", first.tag) == "tag"  # restored
    assert git(store, "rev-parse", f"{first.tag}^{{commit}}") == first.commit
    assert not (store / ".tmp-deadbeef").exists()
    assert git(store, "show", "--name-only", "--format=", "HEAD").splitlines()[0].startswith(second.path)
    assert "staged.txt" not in git(store, "ls-files")


def _slow_record(store, created, run_id, barrier, queue):
    real = bl._write_folder

    def slow(*args):
        time.sleep(0.3)  # keeps the first writer inside the lock while the second arrives
        real(*args)
    bl._write_folder = slow
    barrier.wait()
    try:
        queue.put(("ok", bl.record(store, sample_result(created=created, run_id=run_id)).version))
    except BaseException as e:  # report, so the parent's assertion shows it
        queue.put(("error", repr(e)))


def test_two_concurrent_writers_both_land(store):
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_slow_record, args=(store, Q4, f"run-{i}", barrier, queue)) for i in range(2)]
    for p in procs:
        p.start()
    outcomes = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [o[0] for o in outcomes] == ["ok", "ok"], outcomes
    assert sorted(o[1] for o in outcomes) == ["2026Q4-1", "2026Q4-2"]
    assert sorted(bl.load(store, r.path).run_id for r in bl.list_baselines(store)) == ["run-0", "run-1"]
    assert git(store, "rev-list", "--count", "HEAD") == "3"
    assert len(git(store, "tag").splitlines()) == 2
    git(store, "fsck", "--full", "--strict")
    assert_clean(store)


def test_a_held_lock_times_out_with_a_message(store):
    bl.open_store(store)
    with open(store / bl.LOCK_NAME, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        with pytest.raises(BaselineError, match="stayed locked"):
            bl.record(store, sample_result(), lock_timeout=0.2)
    assert bl.list_baselines(store) == []


def test_store_git_is_isolated_from_the_callers_environment(tmp_path, store, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    # As inside another repository's git hook; and on a box with no git identity at all.
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    ref = bl.record(store, sample_result())
    assert git(other, "rev-parse", "-q", "--verify", "HEAD", check=False) == ""  # untouched
    assert git(other, "tag") == "" and not (other / bl.MARKER).exists()
    assert bl.load(store, ref.path).run_id == sample_result().run_id


# ---------------------------------------------------------------- schema versions


def test_future_schema_is_refused_with_the_version_needed(store):
    ref = bl.record(store, sample_result())
    manifest_path = store / ref.path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest.update(schema_version=bl.SCHEMA_VERSION + 1, written_by="0.9.0")
    manifest_path.write_text(json.dumps(manifest))
    git(store, "commit", "-qam", "written by a newer evaluator")
    assert [r.path for r in bl.list_baselines(store)] == [ref.path]  # still listed
    with pytest.raises(BaselineError) as err:
        bl.load(store, ref.path)
    message = str(err.value)
    assert f"schema_version {bl.SCHEMA_VERSION + 1}" in message and "evaluator 0.9.0" in message
    assert "\n" not in message


def test_older_schema_is_migrated(store, monkeypatch):
    ref = bl.record(store, sample_result())

    def one_to_two(data):
        return {**data, "settings": {**data["settings"], "migrated_from": 1}}
    monkeypatch.setattr(bl, "SCHEMA_VERSION", bl.SCHEMA_VERSION + 1)
    monkeypatch.setattr(bl, "_MIGRATIONS", {bl.SCHEMA_VERSION - 1: one_to_two})
    loaded = bl.load(store, ref.path)
    assert loaded.schema_version == bl.SCHEMA_VERSION and loaded.settings["migrated_from"] == 1

    monkeypatch.setattr(bl, "_MIGRATIONS", {})
    with pytest.raises(BaselineError, match="cannot migrate"):
        bl.load(store, ref.path)


# ---------------------------------------------------------------- tuning cache


def test_tuning_cache_hit_and_miss_on_a_changed_toolchain(store):
    hw = Hardware(target="cuda", device="cuda", name="NVIDIA H200", platform="h200", driver="550.54", cuda="12.4")
    key = cache_key("gemm", (256, 128, 128), "float16", hw, "0.1.15")
    assert bl.tuning_cache_lookup(store, key) is None  # no store yet
    config = {"block_M": 128, "block_N": 128, "block_K": 32, "num_stages": 3}
    bl.tuning_cache_save(store, key, config)
    assert bl.tuning_cache_lookup(store, key) == config
    assert bl.tuning_cache_lookup(store, dict(key, shape=[256, 128, 128])) == config  # tuple or list alike

    newer = cache_key("gemm", (256, 128, 128), "float16", hw, "0.1.16")
    assert bl.tuning_cache_lookup(store, newer) is None
    assert bl.tuning_cache_changes(store, newer) == (("tilelang", "0.1.15", "0.1.16"),)
    new_driver = cache_key("gemm", (256, 128, 128), "float16", dataclasses.replace(hw, driver="560.1"), "0.1.15")
    assert bl.tuning_cache_lookup(store, new_driver) is None
    assert bl.tuning_cache_lookup(store, cache_key("gemm", (512, 128, 128), "float16", hw, "0.1.15")) is None

    [path] = (store / bl.TUNING_DIR).rglob("*.json")
    assert json.loads(path.read_text())["key"]["tilelang"] == "0.1.15"  # the key is kept beside the config
    # The saved config travels in the next baseline's commit.
    ref = bl.record(store, sample_result())
    assert path.relative_to(store).as_posix() in git(store, "show", "--name-only", "--format=", ref.commit)
    assert_clean(store)


def test_failed_initialisation_leaves_no_half_store(store, monkeypatch):
    real = bl._git

    def no_commit(repo, *args):
        if args[0] == "commit":
            raise BaselineError("commit refused")
        return real(repo, *args)
    monkeypatch.setattr(bl, "_git", no_commit)
    with pytest.raises(BaselineError, match="commit refused"):
        bl.open_store(store)
    assert {p.name for p in store.iterdir()} <= {bl.LOCK_NAME}
    monkeypatch.undo()
    assert bl.record(store, sample_result()).version == "2026Q4-1"
