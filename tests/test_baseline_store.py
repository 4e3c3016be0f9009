"""The git store against real git repositories in temp folders (evaluator/baseline/store.py).

In: synthetic RunResults from tests/samples.py. Out: assertions on the store's folders,
commits, tags and work tree, on loading back, on comparisons, diffs and trends of stored
baselines, on interrupted and concurrent writes and on schema versions; and that the
package still offers every name its callers used when it was one module.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import multiprocessing
import os
import shutil
import time
from pathlib import Path

import pytest

import evaluator.baseline as bl
import evaluator.baseline.rows as rows_module
from evaluator.baseline import ids, lock, schema, tables
from evaluator.baseline import clone as clone_module, remote as remote_module
from evaluator.baseline import local
from evaluator.baseline import store as bs
from evaluator.baseline.compare import E2E_TILELANG, E2E_TORCH, compare, plausible_cause
from evaluator.baseline.rows import COMPARISON_COLUMNS, comparison_rows, show_rows
from evaluator.errors import BaselineError
from evaluator.results import SCHEMA_VERSION, to_dict
from gitutil import git
from samples import replace, sample_result

Q4 = "2026-11-29T12:00:00+00:00"
Q4_LATER = "2026-12-02T09:00:00+00:00"
Q1 = "2027-01-05T08:00:00+00:00"


def assert_clean(store: Path) -> None:
    assert git(store, "status", "--porcelain", "--untracked-files=all") == ""
    assert not list(store.glob(local.TMP_PREFIX + "*"))
    assert git(store, "diff", "--cached", "--name-only") == ""


def with_hw(result, **changes):
    env = result.environment
    return replace(result, environment=dataclasses.replace(env, hardware=dataclasses.replace(env.hardware, **changes)))


@pytest.fixture
def store(tmp_path) -> Path:
    return tmp_path / "baselines"


@pytest.fixture(autouse=True)
def clone_cache(tmp_path, monkeypatch):
    """Clones of shared remotes go to the test's folder, never to ~/.cache."""
    monkeypatch.setenv("EVALUATOR_STORE_CACHE", str(tmp_path / "clones"))


# ---------------------------------------------------------------- the package's names


def test_the_package_keeps_every_name_its_callers_use():
    # pipeline, cli, report, config and the tests call these as baseline.<name>; each is the
    # very object of the module that owns it.
    owners = {
        bs: (
            "DEFAULT_STORE",
            "open_store",
            "record",
            "list_baselines",
            "load",
            "previous",
            "trend",
            "diff",
            "check_health",
        ),
        local: ("MARKER", "TMP_PREFIX", "TUNING_DIR", "Store"),
        remote_module: ("pull", "push", "record_and_push", "PushError", "Sync"),
        clone_module: ("is_remote", "remote_of", "clone_path", "DEFAULT_CLONE_CACHE"),
        lock: ("LOCK_NAME", "LOCK_TIMEOUT_S"),
        ids: ("model_slug", "baseline_id", "VERSION_RE"),
        rows_module: ("show_rows", "comparison_rows", "environment_rows", "COMPARISON_COLUMNS"),
        tables: ("TABLES",),
    }
    for module, names in owners.items():
        for name in names:
            assert getattr(bl, name) is getattr(module, name), name
    from evaluator.baseline import compare as compare_function  # the function, not the module

    assert compare_function is compare and bl.plausible_cause is plausible_cause  # report.py imports it
    assert (bl.E2E_TILELANG, bl.E2E_TORCH, bl.SCHEMA_VERSION) == (E2E_TILELANG, E2E_TORCH, SCHEMA_VERSION)
    assert all(hasattr(bl, name) for name in bl.__all__)
    with pytest.raises(AttributeError):
        bl.no_such_name  # noqa: B018


# ---------------------------------------------------------------- store and ids


def test_ids_are_path_and_ref_safe():
    assert ids.model_slug("bert-tiny") == "bert-tiny"
    assert ids.model_slug("pkg.mod:factory") == "pkg.mod-factory"
    assert ids.model_slug("models/My File.py:make") == "models-my-file.py-make"
    long = ids.model_slug("x" * 300)
    assert len(long) <= 80 and ids.model_slug(long) == long
    with pytest.raises(BaselineError, match="no letters"):
        ids.model_slug(":::")
    assert ids.baseline_id("pkg.mod:factory", "h200", "2026Q4-1") == "pkg.mod-factory/h200/2026Q4-1"


def test_open_store_creates_once_and_refuses_what_is_not_a_store(tmp_path, store):
    s = bs.open_store(store)
    assert (store / local.MARKER).is_file() and git(store, "rev-list", "--count", "HEAD") == "1"
    assert bs.open_store(store).path == s.path and git(store, "rev-list", "--count", "HEAD") == "1"
    assert bs.list_baselines(s) == []

    with pytest.raises(BaselineError, match="no baseline store"):
        bs.open_store(tmp_path / "nowhere", create=False)
    with pytest.raises(BaselineError, match="no baseline store"):
        bs.list_baselines(tmp_path / "nowhere")
    assert bs.previous(tmp_path / "nowhere", "bert-tiny", "cpu-x86_64") is None
    assert bs.trend(tmp_path / "nowhere", "bert-tiny", "cpu-x86_64") == ()

    foreign = tmp_path / "project"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(BaselineError, match="not a baseline store"):
        bs.record(foreign, sample_result())
    git(foreign, "init", "-q")
    with pytest.raises(BaselineError, match="git repository but not a baseline store"):
        bs.open_store(foreign)
    (tmp_path / "file").write_text("x")
    with pytest.raises(BaselineError, match="is a file"):
        bs.open_store(tmp_path / "file")

    # A clone of an empty shared remote is initialised in place and keeps its origin; the
    # clone's ids carry its writer id (ids.py), and git's own push publishes them.
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "clone"))
    ref = bs.record(tmp_path / "clone", sample_result())
    assert git(tmp_path / "clone", "remote") == "origin" and ids.WRITER_RE.match(ref.version.split("-")[2])
    assert bs.open_store(tmp_path / "clone").remote == str(remote)
    git(tmp_path / "clone", "push", "-q", "origin", "HEAD", "--tags")
    assert ref.tag in git(remote, "tag")
    # A bare repository given as the store is a shared remote: worked on through a clone of its own.
    shared = bs.open_store(remote)
    assert shared.remote == str(remote) and shared.path.parent == tmp_path / "clones"
    assert [r.path for r in bs.list_baselines(shared)] == [ref.path]


def _damaged(root: Path, how: str) -> Path:
    """A store with one baseline, then broken as a crash, a bad copy or a hand edit leaves it."""
    bs.record(root, sample_result())
    if how == "garbage HEAD":
        (root / ".git" / "HEAD").write_text("this is not a ref\n")
    elif how == "missing object":
        tree = git(root, "rev-parse", "HEAD^{tree}")
        (root / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    elif how == "branch gone":
        branch = git(root, "symbolic-ref", "--short", "HEAD")
        (root / ".git" / "refs" / "heads" / branch).unlink()
    return root


@pytest.mark.parametrize(
    "how, words",
    [
        ("garbage HEAD", "its .git/HEAD names neither a branch nor a commit (it holds 'this is not a ref')"),
        ("missing object", "1 object is missing from its history (missing tree "),
        ("branch gone", "its HEAD (branch "),
    ],
)
def test_check_health_names_the_store_and_the_damage_and_changes_nothing(tmp_path, how, words):
    root = _damaged(tmp_path / "store", how)
    before = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    with pytest.raises(BaselineError) as exc:
        bs.check_health(root)
    msg = str(exc.value)
    assert msg.startswith(f"baseline store {root} is damaged: ") and words in msg and "\n" not in msg
    assert {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()} == before


def test_check_health_passes_a_whole_store_and_one_not_created_yet(tmp_path):
    bs.record(tmp_path / "whole", sample_result())
    bs.check_health(tmp_path / "whole")
    bs.check_health(tmp_path / "new")  # recording creates it
    (tmp_path / "empty").mkdir()
    bs.check_health(tmp_path / "empty")
    git(tmp_path, "init", "-q", str(tmp_path / "fresh"))
    bs.check_health(tmp_path / "fresh")
    assert not (tmp_path / "new").exists() and [p.name for p in (tmp_path / "empty").iterdir()] == []
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("mine")
    with pytest.raises(BaselineError, match="not a baseline store"):
        bs.check_health(tmp_path / "project")


@pytest.mark.slow
def test_several_baselines_list_show_load_and_layout(store):
    first = bs.record(store, sample_result(created=Q4))
    second = bs.record(store, sample_result(created=Q4_LATER, run_id="r2"))
    third = bs.record(store, sample_result(created=Q1, run_id="r3"))
    other = bs.record(store, sample_result(created=Q4, platform="h200"))
    assert [r.version for r in (first, second, third, other)] == ["2026Q4-1", "2026Q4-2", "2027Q1-1", "2026Q4-1"]
    assert first.path == first.tag == "bert-tiny/cpu-x86_64/2026Q4-1"

    assert [r.path for r in bs.list_baselines(store, model="bert-tiny", platform="cpu-x86_64")] == [
        first.path,
        second.path,
        third.path,
    ]
    assert [r.path for r in bs.list_baselines(store, platform="h200")] == [other.path]
    assert len(bs.list_baselines(store)) == 4 and bs.list_baselines(store, model="gpt2") == []

    # One commit and one annotated tag per baseline, on top of the store's first commit.
    assert git(store, "rev-list", "--count", "HEAD") == "5"
    assert git(store, "cat-file", "-t", first.tag) == "tag"
    assert git(store, "rev-parse", f"{third.tag}^{{commit}}") == third.commit
    assert_clean(store)

    folder = store / first.path
    names = {p.name for p in folder.iterdir()}
    assert {
        "manifest.json",
        "result.json",
        "hot_ops.csv",
        "op_bench.csv",
        "op_ratios.csv",
        "tuning.csv",
        "verify.csv",
        "e2e.csv",
        "calls.csv",
        "soak.csv",
        "upstream.csv",
    } == names  # no verdict in the sample: no checklist.csv
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION and manifest["run_id"] == "bert-tiny-20261129-120000"
    assert manifest["hardware"]["name"] == "Test CPU" and "driver" in manifest["hardware"]
    assert manifest["model"]["spec_hash"] == "abc123" and manifest["settings"]["timing"]["reps"] == 20
    assert manifest["torch"] == "2.13.0" and manifest["tilelang"] == "0.1.15"
    assert len((folder / "tuning.csv").read_text().splitlines()) == 1 + 3  # one row per candidate

    loaded = bs.load(store, second.path)
    assert loaded.baseline == dataclasses.replace(second, store=loaded.baseline.store)
    original = sample_result(created=Q4_LATER, run_id="r2")
    assert to_dict(dataclasses.replace(loaded, baseline=None)) == to_dict(original)
    assert bs.previous(store, "bert-tiny", "cpu-x86_64").run_id == "r3"

    rows = dict(show_rows(loaded))
    assert rows["id"] == second.path and rows["run"] == "r2" and rows["device"].startswith("Test CPU")
    assert "speedup 1.10x" in rows["op gemm 256x128x128 float32"]

    with pytest.raises(BaselineError, match="no baseline bert-tiny/cpu-x86_64/2030Q1-1"):
        bs.load(store, "bert-tiny/cpu-x86_64/2030Q1-1")
    with pytest.raises(BaselineError, match="is not <model>/<platform>"):
        bs.load(store, "bert-tiny/latest")


# ---------------------------------------------------------------- comparing stored baselines


def test_regression_detected_noise_not(store):
    bs.record(store, sample_result(created=Q4))
    slower = sample_result(created=Q4_LATER, scale=1.3)
    c = compare(bs.previous(store, "bert-tiny", "cpu-x86_64"), slower)
    assert c.comparable and c.reference == "bert-tiny/cpu-x86_64/2026Q4-1" and c.candidate == slower.run_id
    assert {ch.key for ch in c.regressions} == {
        "gemm 256x128x128 float32",
        "softmax 1024x128 float32",
        E2E_TILELANG,
        E2E_TORCH,
    }
    assert all(ch.ratio == pytest.approx(1.3) for ch in c.changes)
    assert all(0.05 <= ch.threshold < 0.3 for ch in c.changes)  # floor, widened by the measured spread

    noisy = compare(bs.previous(store, "bert-tiny", "cpu-x86_64"), sample_result(created=Q4_LATER, scale=1.02))
    assert noisy.regressions == () and {ch.status for ch in noisy.changes} == {"unchanged"}

    faster = compare(bs.previous(store, "bert-tiny", "cpu-x86_64"), sample_result(scale=0.7))
    assert {ch.status for ch in faster.changes} == {"improvement"}
    # A tighter configured floor and no noise allowance turns the 2% change into a regression.
    strict = compare(
        bs.previous(store, "bert-tiny", "cpu-x86_64"), sample_result(scale=1.02), threshold=0.01, noise_k=0.0
    )
    assert len(strict.regressions) == 4


def test_diff_new_gone_and_rows(store):
    a = bs.record(store, sample_result(created=Q4))
    fewer = sample_result(created=Q4_LATER, scale=1.3)
    extra = dataclasses.replace(fewer.op_bench[0], shape=(512, 512, 512))
    b = bs.record(store, replace(fewer, op_bench=(fewer.op_bench[0], extra)))
    c = bs.diff(store, a.path, b.path)
    assert (c.reference, c.candidate) == (a.path, b.path)
    status = {ch.key: ch.status for ch in c.changes}
    assert status["softmax 1024x128 float32"] == "gone" and status["gemm 512x512x512 float32"] == "new"
    assert status["gemm 256x128x128 float32"] == "regression"
    rows = comparison_rows(c)
    assert len(rows[0]) == len(COMPARISON_COLUMNS) and rows[0][:2] == ("op", "gemm 256x128x128 float32")
    assert rows[0][4] == "1.300" and rows[0][6] == "regression"


def test_cross_platform_compare_ratio_of_candidate_to_reference(store):
    h200 = bs.record(store, with_hw(sample_result(platform="h200"), name="NVIDIA H200", device="cuda"))
    c500 = bs.record(store, with_hw(sample_result(platform="c500", scale=2.0), name="MetaX C500", device="cuda"))
    c = bs.diff(store, h200.path, c500.path)
    assert "cross-platform: candidate on c500 (MetaX C500) vs reference on h200 (NVIDIA H200)" in c.note
    assert all(ch.ratio == pytest.approx(2.0) for ch in c.changes) and len(c.changes) == 4
    assert ("device", "NVIDIA H200", "MetaX C500") in c.environment_changes


def test_trend_points_in_order(store):
    for created, scale in ((Q1, 1.2), (Q4, 1.0), (Q4_LATER, 1.1)):  # recorded out of order
        bs.record(store, sample_result(created=created, scale=scale))
    points = bs.trend(store, "bert-tiny", "cpu-x86_64")
    e2e = [p for p in points if p.key == E2E_TILELANG]
    assert [p.version for p in e2e] == ["2026Q4-1", "2026Q4-2", "2027Q1-1"]
    assert [p.median_ms for p in e2e] == pytest.approx([11.0, 12.1, 13.2])
    assert [p.created for p in e2e] == [Q4, Q4_LATER, Q1]
    assert {p.key for p in points} == {"gemm 256x128x128 float32", "softmax 1024x128 float32", E2E_TILELANG, E2E_TORCH}


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
    bs.record(store, sample_result(created=Q4))
    head, tags = git(store, "rev-parse", "HEAD"), git(store, "tag")
    if where == "csv":
        monkeypatch.setattr(tables, "write_csv", _fail_on_third_csv(tables.write_csv))
        expected = RuntimeError
    elif where == "tag":  # after the folder was renamed in and committed

        def tag(repo, bid, commit, message):
            git(store, "tag", "-a", "-m", "half", bid, commit)
            raise RuntimeError("killed while tagging")

        monkeypatch.setattr(bs, "_tag", tag)
        expected = RuntimeError
    else:

        def interrupt(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(tables, "write_json", interrupt)
        expected = KeyboardInterrupt
    with pytest.raises(expected):
        bs.record(store, sample_result(created=Q4_LATER, scale=1.3))

    assert git(store, "rev-parse", "HEAD") == head and git(store, "tag") == tags
    assert not (store / "bert-tiny/cpu-x86_64/2026Q4-2").exists()
    assert_clean(store)
    assert [r.version for r in bs.list_baselines(store)] == ["2026Q4-1"]
    monkeypatch.undo()
    assert bs.record(store, sample_result(created=Q4_LATER)).version == "2026Q4-2"
    assert_clean(store)


def test_leftovers_of_a_killed_writer_are_cleaned_by_the_next(store):
    first = bs.record(store, sample_result(created=Q4))
    # What SIGKILL at each step would leave: a temp folder, a renamed but uncommitted
    # folder, a staged file, and a committed baseline whose tag was never written.
    (store / ".tmp-deadbeef").mkdir()
    (store / ".tmp-deadbeef" / "result.json").write_text("{")
    shutil.copytree(store / first.path, store / "bert-tiny/cpu-x86_64/2026Q4-2")
    (store / "staged.txt").write_text("x")
    git(store, "add", "staged.txt")
    git(store, "tag", "-d", first.tag)

    second = bs.record(store, sample_result(created=Q4_LATER))
    assert second.version == "2026Q4-2"
    assert git(store, "cat-file", "-t", first.tag) == "tag"  # restored
    assert git(store, "rev-parse", f"{first.tag}^{{commit}}") == first.commit
    assert not (store / ".tmp-deadbeef").exists()
    assert git(store, "show", "--name-only", "--format=", "HEAD").splitlines()[0].startswith(second.path)
    assert "staged.txt" not in git(store, "ls-files")


def _slow_record(store, created, run_id, barrier, queue):
    real = tables.write_folder

    def slow(*args):
        time.sleep(0.3)  # keeps the first writer inside the lock while the second arrives
        real(*args)

    tables.write_folder = slow
    barrier.wait()
    try:
        queue.put(("ok", bs.record(store, sample_result(created=created, run_id=run_id)).version))
    except BaseException as e:  # report, so the parent's assertion shows it
        queue.put(("error", repr(e)))


@pytest.mark.slow
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
    assert sorted(bs.load(store, r.path).run_id for r in bs.list_baselines(store)) == ["run-0", "run-1"]
    assert git(store, "rev-list", "--count", "HEAD") == "3"
    assert len(git(store, "tag").splitlines()) == 2
    git(store, "fsck", "--full", "--strict")
    assert_clean(store)


def test_a_held_lock_times_out_with_a_message(store):
    bs.open_store(store)
    with open(store / lock.LOCK_NAME, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        with pytest.raises(BaselineError, match="stayed locked"):
            bs.record(store, sample_result(), lock_timeout=0.2)
    assert bs.list_baselines(store) == []


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
    ref = bs.record(store, sample_result())
    assert git(other, "rev-parse", "-q", "--verify", "HEAD", check=False) == ""  # untouched
    assert git(other, "tag") == "" and not (other / local.MARKER).exists()
    assert bs.load(store, ref.path).run_id == sample_result().run_id


# ---------------------------------------------------------------- schema versions


def test_future_schema_is_refused_with_the_version_needed(store):
    ref = bs.record(store, sample_result())
    manifest_path = store / ref.path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest.update(schema_version=SCHEMA_VERSION + 1, written_by="0.9.0")
    manifest_path.write_text(json.dumps(manifest))
    git(store, "commit", "-qam", "written by a newer evaluator")
    assert [r.path for r in bs.list_baselines(store)] == [ref.path]  # still listed
    with pytest.raises(BaselineError) as err:
        bs.load(store, ref.path)
    message = str(err.value)
    assert f"schema_version {SCHEMA_VERSION + 1}" in message and "evaluator 0.9.0" in message
    assert "\n" not in message


def test_older_schema_is_migrated(store, monkeypatch):
    ref = bs.record(store, sample_result())

    def one_to_two(data):
        return {**data, "settings": {**data["settings"], "migrated_from": 1}}

    monkeypatch.setattr(schema, "SCHEMA_VERSION", schema.SCHEMA_VERSION + 1)
    monkeypatch.setattr(schema, "MIGRATIONS", {schema.SCHEMA_VERSION - 1: one_to_two})
    loaded = bs.load(store, ref.path)
    assert loaded.schema_version == schema.SCHEMA_VERSION and loaded.settings["migrated_from"] == 1

    monkeypatch.setattr(schema, "MIGRATIONS", {})
    with pytest.raises(BaselineError, match="cannot migrate"):
        bs.load(store, ref.path)


def test_failed_initialisation_leaves_no_half_store(store, monkeypatch):
    real = local.run_git

    def no_commit(repo, *args):
        if args[0] == "commit":
            raise BaselineError("commit refused")
        return real(repo, *args)

    monkeypatch.setattr(local, "run_git", no_commit)
    with pytest.raises(BaselineError, match="commit refused"):
        bs.open_store(store)
    assert {p.name for p in store.iterdir()} <= {lock.LOCK_NAME}
    monkeypatch.undo()
    assert bs.record(store, sample_result()).version == "2026Q4-1"


def test_a_run_is_recorded_when_an_older_baseline_does_not_load_and_its_trend_is_left_out(tmp_path):
    """The trend is read after recording: an older baseline damaged in the store's history
    must not fail a run whose own baseline is already in (the run would then say it was not
    recorded, and recording it again would make a second one)."""
    import git

    from evaluator import config
    from evaluator.baseline import stage
    from evaluator.context import Context, Reporter

    store = tmp_path / "store"
    first = bl.record(store, sample_result(run_id="bert-tiny-20261129-120000"))
    (store / first.path / "result.json").write_text("{not json")
    repo = git.Repo(store)
    repo.index.add([f"{first.path}/result.json"])
    repo.index.commit("a damaged baseline")
    r = sample_result(run_id="bert-tiny-20261130-120000")
    cfg = config.build(model="bert-tiny", store=store, reports=tmp_path / "reports")
    (tmp_path / "run").mkdir()
    ctx = Context(cfg, Reporter(), r.environment.hardware, r.environment, None, tmp_path / "run")
    out = stage.record(ctx, r)
    assert out.baseline is not None and out.trend == ()
    assert [b.tag for b in bl.list_baselines(store)] == [first.tag, out.baseline.tag]
