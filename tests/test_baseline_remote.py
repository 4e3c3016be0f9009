"""A shared baseline remote against real git repositories in temp folders (evaluator/baseline/
remote.py, clone.py and rebase.py).

In: a bare repository standing for the shared remote, clones of it standing for hosts, and
synthetic RunResults from tests/samples.py. Out: assertions that concurrent hosts' baselines
and tags all land on the remote with distinct ids and a linear, never-forced history; that a
pull makes another host's baselines readable by list, load, previous, trend and diff; that a
collided id is renumbered and tuned configs never conflict; that failures are one line and
keep the local baseline; and that store specs, clone folders and credentials are handled.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from evaluator.tuning import cache as tuning_cache
from evaluator.baseline import clone as cl, ids, plumbing, remote as rm
from evaluator.baseline import store as bs
from evaluator.baseline.compare import E2E_TILELANG
from evaluator.errors import BaselineError
from gitutil import git
from samples import replace, sample_result

Q4 = "2026-11-29T12:00:00+00:00"
Q4_LATER = "2026-12-02T09:00:00+00:00"


def named(result, model: str):
    return replace(result, model=dataclasses.replace(result.model, name=model))


def on(result, platform: str, name: str):
    env = result.environment
    hw = dataclasses.replace(env.hardware, platform=platform, name=name, device="cuda")
    return replace(result, environment=dataclasses.replace(env, hardware=hw))


@pytest.fixture(autouse=True)
def clone_cache(tmp_path, monkeypatch):
    """Clones of shared remotes go to the test's folder, never to ~/.cache."""
    monkeypatch.setenv(cl.CACHE_ENV, str(tmp_path / "clones"))


@pytest.fixture
def remote(tmp_path) -> Path:
    """A bare shared remote that, like a protected server branch, refuses any non-fast-forward
    update or deletion and logs every ref update (so a force push could not go unnoticed)."""
    path = tmp_path / "shared.git"
    git(tmp_path, "init", "-q", "--bare", str(path))
    for key, value in (
        ("receive.denyNonFastForwards", "true"),
        ("receive.denyDeletes", "true"),
        ("core.logAllRefUpdates", "always"),
    ):
        git(path, "config", key, value)
    return path


def host(remote: Path, tmp_path: Path, name: str) -> bs.Store:
    return bs.open_store(str(remote), clone=tmp_path / name)


def remote_ids(remote: Path) -> list[str]:
    files = git(remote, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
    return sorted(p[: -len("/manifest.json")] for p in files if p.endswith("/manifest.json") and p.count("/") == 3)


def assert_linear_and_never_forced(remote: Path) -> None:
    assert git(remote, "rev-list", "--merges", "HEAD") == ""
    assert len(git(remote, "rev-list", "--max-parents=0", "HEAD").splitlines()) == 1  # one store, one root
    branch = git(remote, "symbolic-ref", "--short", "HEAD")
    # Every update of the branch moved it forward: the old tip is an ancestor of the new one.
    updates = (Path(remote) / "logs" / "refs" / "heads" / branch).read_text().splitlines()
    assert updates
    for line in updates:
        old, new = line.split()[:2]
        if set(old) != {"0"}:
            git(remote, "merge-base", "--is-ancestor", old, new)
    git(remote, "fsck", "--strict")


# ---------------------------------------------------------------- specs and clones


def test_store_specs_clone_folders_and_credentials(tmp_path, remote, monkeypatch):
    for url in (
        "ssh://git@example.com/team/baselines.git",
        "git@example.com:team/baselines.git",
        "https://example.com/team/baselines.git",
        f"file://{remote}",
        str(remote),
    ):
        assert cl.is_remote(url), url
    for local in (tmp_path / "nowhere", tmp_path, "reports/baselines"):
        assert not cl.is_remote(local), local
    # A URL passed through pathlib (an option typed as Path) lost a slash; it is read back whole.
    assert cl.remote_url(Path("ssh://git@example.com/team/baselines.git")) == "ssh://git@example.com/team/baselines.git"
    assert cl.remote_url(Path(f"file://{remote}")) == f"file://{remote}"

    # The default clone folder: one per remote under ~/.cache/evaluator/stores, the URL's
    # credentials neither in the folder name nor in what a message prints.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(cl.CACHE_ENV, raising=False)
    secret = "https://alice:s3cret@example.com/team/baselines.git"
    folder = cl.clone_path(secret)
    assert folder.parent == tmp_path / "home" / ".cache" / "evaluator" / "stores"
    assert "s3cret" not in str(folder) and "alice" not in str(folder)
    assert folder == cl.clone_path("https://bob:other@example.com/team/baselines.git")  # same repository
    assert folder != cl.clone_path("https://example.com/team/other.git")
    assert cl.redact(secret) == "https://***@example.com/team/baselines.git"
    monkeypatch.setenv(cl.CACHE_ENV, str(tmp_path / "cache"))
    assert cl.clone_path(str(remote)).parent == tmp_path / "cache"

    # Opening a remote clones it once into the cache; a second open reuses the clone.
    store = bs.open_store(str(remote))
    assert store.path.parent == tmp_path / "cache" and store.remote == str(remote)
    assert bs.open_store(f"file://{remote}").path == store.path  # the same remote spelled as a URL
    assert git(store.path, "config", "--get", "remote.origin.url") == str(remote)
    assert bs.list_baselines(str(remote)) == []  # nothing pushed yet
    assert bs.previous(str(remote), "bert-tiny", "cpu-x86_64") is None

    other = tmp_path / "other.git"
    git(tmp_path, "init", "-q", "--bare", str(other))
    with pytest.raises(BaselineError, match="is a clone of .*shared.git, not of .*other.git"):
        bs.open_store(str(other), clone=store.path)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(BaselineError, match="exists and is not a clone"):
        bs.open_store(str(remote), clone=tmp_path / "full")


def test_a_plain_local_store_keeps_its_ids_and_has_nothing_to_push(tmp_path, remote):
    ref = bs.record(tmp_path / "mine", sample_result())
    assert ref.version == "2026Q4-1"  # no writer suffix in a store of one's own
    assert bs.open_store(tmp_path / "mine").remote is None
    # What `--push` is checked against before a run: no network, nothing created.
    assert cl.remote_of(tmp_path / "mine") is None and cl.remote_of(tmp_path / "missing") is None
    assert cl.remote_of("https://u:tok@example.com/b.git") == "https://***@example.com/b.git"
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "clone"))
    assert cl.remote_of(tmp_path / "clone") == str(remote) and not (tmp_path / "missing").exists()
    with pytest.raises(BaselineError, match="has no remote to sync with") as err:
        rm.push(tmp_path / "mine")
    assert "\n" not in str(err.value)


def test_ids_with_a_writer_parse_and_sort():
    assert ids.parse_id("bert-base/h200/2026Q4-3-5f0c2a") == ("bert-base", "h200", "2026Q4-3-5f0c2a")
    assert ids.version_parts("2026Q4-3-5f0c2a") == ("2026Q4", 3, "5f0c2a")
    assert ids.version_parts("2026Q4-3") == ("2026Q4", 3, "")
    versions = ["2027Q1-1-000001", "2026Q4-2", "2026Q4-10-aaaaaa", "2026Q4-2-0a0a0a", "2026Q4-1-ffffff"]
    assert sorted(versions, key=ids.version_key) == [
        "2026Q4-1-ffffff",
        "2026Q4-2",
        "2026Q4-2-0a0a0a",
        "2026Q4-10-aaaaaa",
        "2027Q1-1-000001",
    ]
    for bad in ("bert-base/h200/2026Q4-3-5F0C2A", "bert-base/h200/2026Q4-3-abc", "bert-base/h200/2026Q4-0-abcdef"):
        with pytest.raises(BaselineError, match="is not <model>/<platform>"):
            ids.parse_id(bad)


# ---------------------------------------------------------------- two hosts, one remote


def test_two_hosts_record_different_models_and_both_push(tmp_path, remote):
    a, b = host(remote, tmp_path, "host-a"), host(remote, tmp_path, "host-b")
    ra = bs.record(a, on(sample_result(), "h200", "NVIDIA H200"))
    rb = bs.record(b, named(on(sample_result(run_id="gpt"), "c500", "MetaX C500"), "gpt2-tiny"))
    # Each clone has its own writer id, and the id says so.
    assert ra.version.startswith("2026Q4-1-") and rb.version.startswith("2026Q4-1-")
    assert ra.version != rb.version

    sa = rm.push(a)
    sb = rm.push(b)
    assert sa.pushed == (ra.tag,) and sb.pushed == (rb.tag,) and sb.pulled == (ra.tag,)
    assert remote_ids(remote) == sorted([ra.path, rb.path])
    assert set(git(remote, "tag").splitlines()) == {ra.tag, rb.tag}
    assert git(remote, "rev-parse", f"{rb.tag}^{{commit}}") == sb.head
    assert_linear_and_never_forced(remote)

    # Both clones initialised the empty remote on their own; the second's first commit was dropped.
    assert git(remote, "rev-list", "--count", "HEAD") == "3"
    # The remote would have refused a force push (so the pushes above were none).
    branch = git(remote, "symbolic-ref", "HEAD")
    done = subprocess.run(
        ["git", "-C", str(a.path), "push", "--force", "origin", f"HEAD~1:{branch}"], capture_output=True, text=True
    )
    assert done.returncode != 0 and "non-fast-forward" in done.stderr + done.stdout
    # B's local tag followed its rebased commit.
    assert git(b.path, "rev-parse", f"{rb.tag}^{{commit}}") == git(b.path, "rev-parse", "HEAD")
    assert git(b.path, "status", "--porcelain") == ""


@pytest.mark.slow
def test_two_hosts_record_the_same_model_and_platform_concurrently(tmp_path, remote, monkeypatch):
    clones = [host(remote, tmp_path, f"host-{i}") for i in range(2)]
    pushes: list[list[str]] = []
    real_fetch, real_net = rm._fetch, rm.run_remote_git
    fetched = threading.Barrier(2, timeout=30)
    first = set()

    def fetch_together(st, timeout, verb):
        # Both hosts fetch before either pushes, so one of the pushes is rejected and retried.
        branch = real_fetch(st, timeout, verb)
        if st.path not in first:
            first.add(st.path)
            fetched.wait()
        return branch

    def net(args, root, timeout):
        if "push" in args:
            pushes.append(args)
        return real_net(args, root, timeout)

    monkeypatch.setattr(rm, "_fetch", fetch_together)
    monkeypatch.setattr(rm, "run_remote_git", net)
    results: dict[int, object] = {}
    start = threading.Barrier(2, timeout=30)

    def run(i: int) -> None:
        try:
            start.wait()
            ref = bs.record(clones[i], sample_result(run_id=f"run-{i}", created=Q4))
            results[i] = (ref, rm.push(clones[i], backoff_s=0.01))
        except BaseException as e:  # shown by the assertion below
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(isinstance(r, tuple) for r in results.values()) and len(results) == 2, results
    refs = [results[i][0] for i in range(2)]
    syncs = [results[i][1] for i in range(2)]

    # Same model, platform and quarter, same k, distinct writers: distinct ids and tags.
    assert refs[0].version.split("-")[:2] == refs[1].version.split("-")[:2] == ["2026Q4", "1"]
    assert refs[0].tag != refs[1].tag
    assert sorted(s.attempts for s in syncs) == [1, 2]  # the later push was rejected, then rebased and retried
    assert remote_ids(remote) == sorted(r.path for r in refs)
    assert set(git(remote, "tag").splitlines()) == {r.tag for r in refs}
    for r in refs:
        assert json.loads(git(remote, "show", f"{r.tag}:{r.path}/manifest.json"))["id"] == r.path
    assert_linear_and_never_forced(remote)
    assert all("--force" not in p and "-f" not in p and not any(a.startswith("+") for a in p) for p in pushes)

    # After a pull both hosts see both runs, in the same order.
    for c in clones:
        rm.pull(c)
    runs = [sorted(bs.load(c, r.path).run_id for r in bs.list_baselines(c)) for c in clones]
    assert runs == [["run-0", "run-1"]] * 2


def _record_and_push(remote, clone, run_id, barrier, queue):
    try:
        store = bs.open_store(str(remote), clone=clone)
        barrier.wait()
        ref = bs.record(store, sample_result(run_id=run_id))
        sync = rm.push(store, backoff_s=0.05)
        queue.put(("ok", ref.tag, sync.attempts))
    except BaseException as e:  # reported, so the parent's assertion shows it
        queue.put(("error", repr(e), 0))


@pytest.mark.slow
def test_three_host_processes_record_and_push_at_once(tmp_path, remote):
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(3), ctx.Queue()
    procs = [
        ctx.Process(target=_record_and_push, args=(remote, tmp_path / f"host-{i}", f"run-{i}", barrier, queue))
        for i in range(3)
    ]
    for p in procs:
        p.start()
    outcomes = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [o[0] for o in outcomes] == ["ok"] * 3, outcomes
    tags = {o[1] for o in outcomes}
    assert len(tags) == 3 and remote_ids(remote) == sorted(tags) and set(git(remote, "tag").splitlines()) == tags
    assert_linear_and_never_forced(remote)


@pytest.mark.slow
def test_a_pull_makes_another_hosts_baselines_readable(tmp_path, remote):
    h200, metax = host(remote, tmp_path, "gpu-box"), host(remote, tmp_path, "metax-box")
    first = bs.record(h200, on(sample_result(created=Q4), "h200", "NVIDIA H200"))
    second = bs.record(h200, on(sample_result(created=Q4_LATER, scale=1.2, run_id="r2"), "h200", "NVIDIA H200"))
    rm.push(h200)
    assert bs.previous(metax, "bert-tiny", "h200") is None and bs.trend(metax, "bert-tiny", "h200") == ()

    sync = rm.pull(metax)
    assert sync.pulled == (first.tag, second.tag) and sync.pushed == ()
    assert [r.path for r in bs.list_baselines(metax, platform="h200")] == [first.path, second.path]
    assert bs.previous(metax, "bert-tiny", "h200").run_id == "r2"
    e2e = [p for p in bs.trend(metax, "bert-tiny", "h200") if p.key == E2E_TILELANG]
    assert [p.version for p in e2e] == [first.version, second.version]
    assert bs.load(metax, first.path).baseline.tag == first.tag  # the tag came along

    # A MetaX run compared with the H200 run from the same store.
    c500 = bs.record(metax, on(sample_result(created=Q4_LATER, scale=2.0), "c500", "MetaX C500"))
    c = bs.diff(metax, first.path, c500.path)
    assert "cross-platform: candidate on c500 (MetaX C500) vs reference on h200 (NVIDIA H200)" in c.note
    # Numbering continues above what was pulled: the next H200 baseline here is k=3.
    assert bs.record(metax, on(sample_result(created=Q4_LATER), "h200", "NVIDIA H200")).version.startswith("2026Q4-3-")


def test_readers_take_the_url_itself(tmp_path, remote, monkeypatch):
    monkeypatch.setenv(cl.CACHE_ENV, str(tmp_path / "cache"))
    ref = bs.record(str(remote), sample_result())  # cloned into the cache, recorded there
    rm.push(str(remote))
    fresh = host(remote, tmp_path, "fresh")  # another host: clones what was pushed
    assert [r.path for r in bs.list_baselines(fresh)] == [ref.path]
    assert bs.load(str(remote), ref.path).run_id == sample_result().run_id


# ---------------------------------------------------------------- collisions and conflicts


@pytest.mark.slow
def test_a_collided_id_is_renumbered_before_pushing(tmp_path, remote, monkeypatch):
    # Two clones that drew the same writer id (a clone copied byte for byte) record the same id.
    monkeypatch.setattr(plumbing.secrets, "token_hex", lambda n: "abcdef")
    a, b = host(remote, tmp_path, "host-a"), host(remote, tmp_path, "host-b")
    ra = bs.record(a, sample_result(run_id="first"))
    rb = bs.record(b, sample_result(run_id="second"))
    assert ra.tag == rb.tag == "bert-tiny/cpu-x86_64/2026Q4-1-abcdef"
    rm.push(a)
    monkeypatch.setattr(plumbing.secrets, "token_hex", lambda n: "123456")
    sync = rm.push(b)

    new = "bert-tiny/cpu-x86_64/2026Q4-2-123456"
    assert sync.renumbered == ((rb.tag, new),) and sync.pushed == (new,)
    assert remote_ids(remote) == [ra.tag, new]
    assert bs.load(b, ra.tag).run_id == "first"  # the remote's keeps the id
    moved = bs.load(b, new)
    assert moved.run_id == "second" and moved.baseline.tag == new
    assert json.loads((b.path / new / "manifest.json").read_text())["version"] == "2026Q4-2-123456"
    assert git(b.path, "rev-parse", f"{ra.tag}^{{commit}}") == git(remote, "rev-parse", f"{ra.tag}^{{commit}}")
    assert "Renumbered from" in git(remote, "log", "-1", "--format=%B", new)
    assert git(b.path, "config", "evaluator.writer") == "123456"  # the shared writer id was dropped
    assert_linear_and_never_forced(remote)


def test_a_copied_clone_draws_its_own_writer(tmp_path, remote):
    a = host(remote, tmp_path, "host-a")
    ra = bs.record(a, sample_result())
    shutil.copytree(a.path, tmp_path / "copy", symlinks=True)
    copy = bs.open_store(str(remote), clone=tmp_path / "copy")
    rc = bs.record(copy, sample_result(created=Q4_LATER))
    assert rc.version.split("-")[2] != ra.version.split("-")[2]


@pytest.mark.slow
def test_tuned_configs_saved_on_both_hosts_never_conflict(tmp_path, remote):
    a, b = host(remote, tmp_path, "host-a"), host(remote, tmp_path, "host-b")
    key = {"family": "gemm", "shape": [256, 128, 128], "dtype": "float32", "device": "cpu", "tilelang": "0.1.15"}
    tuning_cache.save(a, key, {"block_M": 32})
    tuning_cache.save(b, key, {"block_M": 64})
    bs.record(a, sample_result())
    rm.push(a)
    rb = bs.record(b, sample_result(run_id="b"))
    tuning_cache.save(b, {**key, "shape": [512, 512, 512]}, {"block_M": 128})  # saved after its baseline
    sync = rm.push(b)
    assert sync.pushed == (rb.tag,)
    assert tuning_cache.lookup(b, key) == {"block_M": 32}  # the remote's copy: hosts agree
    rm.pull(a)
    assert tuning_cache.lookup(a, {**key, "shape": [512, 512, 512]}) == {"block_M": 128}  # travelled
    assert git(b.path, "status", "--porcelain") == ""
    assert_linear_and_never_forced(remote)


# ---------------------------------------------------------------- failures


def test_a_push_to_an_unreachable_remote_is_one_line_and_keeps_the_baseline(tmp_path, remote):
    a = host(remote, tmp_path, "host-a")
    git(a.path, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    ref = bs.record(a, sample_result())
    with pytest.raises(BaselineError) as err:
        rm.push(a)
    message = str(err.value)
    assert "\n" not in message and "does not appear to be a git repository" in message
    assert f"stay recorded in {a.path}" in message and f"evaluate baseline push --store {a.spec}" in message
    assert [r.path for r in bs.list_baselines(a)] == [ref.path]
    assert git(a.path, "tag") == ref.tag and git(a.path, "status", "--porcelain") == ""
    with pytest.raises(BaselineError, match="could not pull from") as err:
        rm.pull(a)
    assert "\n" not in str(err.value)

    # Fixed remote: the same command pushes what waited.
    git(a.path, "remote", "set-url", "origin", str(remote))
    assert rm.push(a).pushed == (ref.tag,)


def test_an_auth_failure_names_gits_reason(tmp_path, remote, monkeypatch):
    # What ssh prints when the server refuses the key; git runs it as the transport.
    fake_ssh = tmp_path / "ssh"
    fake_ssh.write_text("#!/bin/sh\necho 'git@example.invalid: Permission denied (publickey).' >&2\nexit 255\n")
    fake_ssh.chmod(0o755)
    monkeypatch.setenv("GIT_SSH_COMMAND", str(fake_ssh))
    with pytest.raises(BaselineError) as err:
        bs.open_store("ssh://git@example.invalid/team/baselines.git", clone=tmp_path / "never")
    assert "\n" not in str(err.value) and "Permission denied (publickey)" in str(err.value)
    assert not (tmp_path / "never").exists()

    a = host(remote, tmp_path, "host-a")
    ref = bs.record(a, sample_result())
    git(a.path, "remote", "set-url", "origin", "git@example.invalid:team/baselines.git")
    with pytest.raises(BaselineError, match=r"Permission denied \(publickey\).*stay recorded") as err:
        rm.push(a)
    assert "\n" not in str(err.value)
    assert [r.path for r in bs.list_baselines(a)] == [ref.path]


def test_rejections_are_retried_a_bounded_number_of_times(tmp_path, remote, monkeypatch):
    a = host(remote, tmp_path, "host-a")
    ref = bs.record(a, sample_result())
    real = rm.run_remote_git
    tries = []

    def always_rejected(args, root, timeout):
        if "push" in args:
            tries.append(args)
            return 1, "To shared.git\n!\tHEAD:refs/heads/master\t[rejected] (fetch first)\nDone\n", ""
        return real(args, root, timeout)

    monkeypatch.setattr(rm, "run_remote_git", always_rejected)
    with pytest.raises(BaselineError, match=r"rejected 3 times, last: .*\(fetch first\)") as err:
        rm.push(a, attempts=3, backoff_s=0)
    assert len(tries) == 3 and "evaluate baseline push --store" in str(err.value)
    assert [r.path for r in bs.list_baselines(a)] == [ref.path]
    assert git(remote, "for-each-ref") == ""  # nothing reached the remote


@pytest.mark.slow
def test_a_conflicting_edit_is_refused_and_nothing_changes(tmp_path, remote):
    a, b = host(remote, tmp_path, "host-a"), host(remote, tmp_path, "host-b")
    ref = bs.record(a, sample_result())
    rm.push(a)
    rm.pull(b)
    for clone, text in ((a, "edited on a\n"), (b, "edited on b\n")):
        (clone.path / ref.path / "soak.csv").write_text(text)
        git(clone.path, "commit", "-qam", "hand edit")
    rm.push(a)
    head = git(b.path, "rev-parse", "HEAD")
    with pytest.raises(BaselineError, match=f"{ref.path}/soak.csv was changed both") as err:
        rm.push(b)
    assert "\n" not in str(err.value)
    assert git(b.path, "rev-parse", "HEAD") == head and (b.path / ref.path / "soak.csv").read_text() == "edited on b\n"


@pytest.mark.slow
def test_a_clone_made_while_the_remote_was_empty_pulls_what_others_pushed(tmp_path, remote):
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "early"))  # before anything was pushed
    a = host(remote, tmp_path, "host-a")
    ref = bs.record(a, sample_result())
    rm.push(a)
    assert bs.list_baselines(tmp_path / "early") == []
    sync = rm.pull(tmp_path / "early")
    assert sync.pulled == (ref.tag,)
    assert bs.load(tmp_path / "early", ref.tag).baseline.tag == ref.tag


@pytest.mark.slow
def test_tags_left_on_rewritten_commits_are_healed(tmp_path, remote):
    a, b = host(remote, tmp_path, "host-a"), host(remote, tmp_path, "host-b")
    bs.record(a, sample_result())
    rb = bs.record(b, sample_result(run_id="b"))
    before = git(b.path, "rev-parse", rb.tag)  # the tag object made when b recorded
    rm.push(a)
    rm.push(b)
    # As if b had been killed after the rebase and before its tag followed.
    orphan = git(b.path, "rev-parse", f"{before}^{{commit}}")
    assert orphan != git(b.path, "rev-parse", "HEAD")
    git(b.path, "tag", "-f", rb.tag, orphan)
    bs.record(b, sample_result(run_id="next", created=Q4_LATER))  # its recovery step re-points the tag
    assert git(b.path, "rev-parse", f"{rb.tag}^{{commit}}") == git(remote, "rev-parse", f"{rb.tag}^{{commit}}")


@pytest.mark.slow
def test_record_and_push_is_one_step_and_a_failed_push_keeps_the_ref(tmp_path, remote, monkeypatch):
    a = host(remote, tmp_path, "host-a")
    ref, sync = rm.record_and_push(a, sample_result())
    assert sync.pushed == (ref.tag,) and remote_ids(remote) == [ref.path]

    # The ref returned is the baseline as it is on the remote: its rebased commit, and its new
    # id should it have collided (b and c draw the same writer id, like a copied clone).
    draws = iter(["abcdef", "abcdef", "fedcba"])
    monkeypatch.setattr(plumbing.secrets, "token_hex", lambda n: next(draws))
    b, c = host(remote, tmp_path, "host-b"), host(remote, tmp_path, "host-c")
    first, _ = rm.record_and_push(b, sample_result(run_id="b", created=Q4_LATER))
    moved, sync = rm.record_and_push(c, sample_result(run_id="c", created=Q4_LATER))
    assert first.tag.endswith("-abcdef") and sync.renumbered == ((first.tag, moved.tag),)
    assert moved.tag == sync.pushed[0] == "bert-tiny/cpu-x86_64/2026Q4-3-fedcba"
    assert moved.commit == sync.head == git(remote, "rev-parse", f"{moved.tag}^{{commit}}")

    git(a.path, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    with pytest.raises(rm.PushError, match="retry with: evaluate baseline push --store") as err:
        rm.record_and_push(a, sample_result(run_id="offline", created=Q4_LATER))
    assert bs.load(a, err.value.ref.tag).run_id == "offline" and "\n" not in str(err.value)
