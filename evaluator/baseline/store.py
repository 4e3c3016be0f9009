"""The baseline store: a git repository holding one folder, commit and annotated tag per run.

In: finished `RunResult`s to record, a store spec (default `reports/baselines/`; a local
folder, or a shared remote's git URL or bare repository, which clone.py turns into a local
clone) and baseline ids `<model>/<platform>/<version>`. Out: `open_store` gives a `Store`
(its folder, and its remote when it has one); `check_health` refuses, before a run, a
store that could not take its baseline (not a store, or a damaged repository); `record`
writes the next version of a model/platform/quarter all or nothing (temp folder, rename, commit, tag, under an exclusive
lock; rolled back on any failure, and what a killed writer left behind is recovered by the
next), with a writer suffix in a clone of a shared remote (the id scheme is in ids.py);
`load`, `previous`, `list_baselines`, `trend` and `diff` read back from the committed tree
alone, migrating older schema versions, so baselines pulled from other hosts read like local
ones. The files inside a folder come from tables.py, reading them back from schema.py, the
lock from lock.py, the comparison from compare.py, running git in the store from
plumbing.py, cloning from clone.py, pulling and pushing from remote.py and rebase.py; these
five are the only baseline modules that import git, and the only repositories they touch
are the store and its remote.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import shutil
import uuid
from pathlib import Path

import git

from ..errors import BaselineError
from ..results import BaselineRef, Comparison, RunResult, TrendPoint
from . import clone as clones
from . import schema, tables
from .local import TMP_PREFIX, TUNING_DIR, Store, StoreLike, open_local, refusal, folder_state as store_state
from .compare import compare, timings
from .ids import VERSION_RE, model_slug, parse_id, parse_time, platform_slug, quarter, version_key, version_parts
from .ids import version as make_version
from .lock import LOCK_NAME, LOCK_TIMEOUT_S, locked
from .plumbing import (
    REMOTE,
    git_config,
    find_damage,
    run_git,
    head_baselines,
    known_ids,
    read_json,
    baseline_ref,
    open_repo,
    repoint_tags,
    tag_map,
    writer_name,
)

DEFAULT_STORE = Path("reports") / "baselines"


# ---------------------------------------------------------------- opening and creating


def open_store(path: StoreLike, *, create: bool = True, clone: str | os.PathLike | None = None) -> Store:
    """The store at `path`, initialised (git repo, marker, first commit) when missing or empty.

    `path` may be a shared remote (a git URL, or the path of a bare repository): the store is
    then a local clone of it, kept in `clone` or under clone.DEFAULT_CLONE_CACHE, cloned on
    first use (the only network access here; `remote.pull` brings it up to date).
    """
    if isinstance(path, Store):
        return path
    if clones.is_remote(path):
        return clones.open_remote(path, create=create, clone=clone)
    return open_local(path, create=create)


def existing(store_path: StoreLike) -> Path | None:
    """The root of an existing store, None when nothing was ever recorded there."""
    if isinstance(store_path, Store):
        return store_path.path
    if clones.is_remote(store_path):
        return clones.existing_clone(store_path)
    p = Path(os.fspath(store_path)).expanduser().absolute()
    state = store_state(p)
    if state == "store":
        return p
    if state in ("missing", "empty", "empty-repo"):
        return None
    raise BaselineError(refusal(p, state))


def check_health(folder: str | os.PathLike) -> None:
    """Before a run: can the store in this local folder take its baseline at the end?
    Read-only, a few git commands. A folder that is not a store is refused as `record`
    would refuse it; a damaged store (HEAD naming no commit, objects missing from its
    history) is one line naming the store and what is wrong. A store not created yet (no
    folder, an empty one, a fresh `git init`) passes: `record` creates it."""
    p = Path(os.fspath(folder)).expanduser().absolute()
    if store_state(p) == "foreign-repo" and (p / LOCK_NAME).exists():
        return  # another first run is initialising it right now; `record` waits for its lock
    root = existing(p)
    if root is None:
        return
    damage = find_damage(root)
    if damage:
        raise BaselineError(
            f"baseline store {root} is damaged: {damage}; repair or restore it, or pass --store "
            "with another folder (nothing was run, and no baseline was changed)"
        )


# ---------------------------------------------------------------- recovery and rollback


def _rmtree_and_prune(root: Path, folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    parent = folder.parent
    while parent != root and root in parent.parents:
        try:
            parent.rmdir()  # only succeeds when empty: never removes a sibling baseline
        except OSError:
            break
        parent = parent.parent


def _recover(repo: git.Repo, root: Path) -> None:
    """Undo what a writer killed mid-record (SIGKILL, power loss) left behind; runs under the lock."""
    for leftover in root.glob(TMP_PREFIX + "*"):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
    if run_git(repo, "diff", "--cached", "--name-only"):
        run_git(repo, "reset", "-q")
    committed = set(head_baselines(repo))
    stale = set()
    for path in run_git(repo, "ls-files", "--others", "--exclude-standard", "-z").split("\0"):
        parts = path.split("/")
        if len(parts) >= 4 and parts[0][:1] not in "._" and VERSION_RE.match(parts[2]):
            folder = "/".join(parts[:3])
            # Renamed into place but never committed: the rename is atomic, the commit is not.
            if folder not in committed and (root / folder / "manifest.json").is_file():
                stale.add(folder)
    for folder in sorted(stale):
        _rmtree_and_prune(root, root / folder)
    repoint_tags(repo, committed)
    tags = tag_map(repo)
    for bid in sorted(committed - set(tags)):
        # Committed but killed before tagging: the baseline is whole, so finish the job.
        commit = run_git(repo, "log", "-1", "--format=%H", "--diff-filter=A", "--", f"{bid}/manifest.json")
        if commit:
            run_git(repo, "tag", "-a", "-m", f"baseline {bid} (tag restored)", bid, commit)


def _rollback(repo: git.Repo, root: Path, bid: str, prev_head: str, tmp: Path) -> None:
    """Best effort, each step on its own: one failing must not stop the others."""

    def attempt(*args: str) -> None:
        with contextlib.suppress(Exception):
            repo.git.execute(["git", *args])

    with contextlib.suppress(Exception):
        if repo.git.execute(["git", "tag", "--list", bid]).strip() == bid:
            attempt("tag", "-d", bid)
    with contextlib.suppress(Exception):
        if repo.git.execute(["git", "rev-parse", "HEAD"]).strip() != prev_head:
            attempt("reset", "-q", "--soft", prev_head)
    attempt("reset", "-q", "--", bid)
    attempt("reset", "-q", "--", TUNING_DIR)  # unstaged only: the saved configs stay valid
    _rmtree_and_prune(root, root / bid)
    shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- recording


def _next_version(
    repo: git.Repo,
    model: str,
    platform: str,
    period: str,
    writer: str | None = None,
    extra: set[str] | frozenset[str] = frozenset(),
) -> str:
    """One above the highest k of this model/platform/quarter this clone knows of (ids.py)."""
    prefix = f"{model}/{platform}/"
    # Tags count too: a tag fetched from the shared remote reserves its number.
    taken = [
        parts[1]
        for name in {*known_ids(repo), *extra}
        if name.startswith(prefix) and (parts := version_parts(name[len(prefix) :])) and parts[0] == period
    ]
    return make_version(period, max(taken, default=0) + 1, writer)


def _messages(r: RunResult, bid: str) -> str:
    hw = r.environment.hardware
    decision = r.verdict.decision if r.verdict else "no verdict"
    speed = f", e2e {r.e2e.speedup:.2f}x" if r.e2e and r.e2e.speedup else ""
    return (
        f"baseline {bid}: {decision}{speed}\n\n"
        f"run {r.run_id}, created {r.created}\n"
        f"device {hw.name} (driver {hw.driver or '-'}, CUDA {hw.cuda or '-'}, target {hw.target})\n"
        f"torch {r.environment.torch}, tilelang {r.environment.tilelang}, "
        f"evaluator {r.environment.evaluator}, python {r.environment.python}\n"
    )


def _tag(repo: git.Repo, bid: str, commit: str, message: str) -> None:
    run_git(repo, "tag", "-a", "-m", message, bid, commit)


def record(store_path: StoreLike, result: RunResult, *, lock_timeout: float = LOCK_TIMEOUT_S) -> BaselineRef:
    """Write `result` as the next baseline of its model/platform/quarter: folder, commit, tag.

    All or nothing: the folder is written in a temp folder inside the store, renamed into
    place, committed and tagged under an exclusive lock; any failure (or Ctrl-C) undoes
    every step, and a writer killed outright is cleaned up by the next one.
    """
    model = model_slug(result.model.name)
    platform = platform_slug(result.environment.hardware.platform)
    period = quarter(result.created)
    store = open_store(store_path, create=True)
    root = store.path
    with locked(root, lock_timeout), open_repo(root) as repo:
        _recover(repo, root)
        # A clone of a shared remote suffixes its ids with its writer id, so that two hosts
        # recording at once never pick the same id (ids.py).
        writer = writer_name(repo, root) if git_config(repo, f"remote.{REMOTE}.url") else None
        version = _next_version(repo, model, platform, period, writer)
        bid = f"{model}/{platform}/{version}"
        folder = root / bid
        tmp = root / f"{TMP_PREFIX}{uuid.uuid4().hex}"
        prev_head = run_git(repo, "rev-parse", "HEAD")
        try:
            tmp.mkdir()
            tables.write_folder(tmp, result, bid)
            if folder.exists():
                raise BaselineError(
                    f"{folder} exists but is not a committed baseline; move it out of the store and rerun"
                )
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.rename(tmp, folder)
            # Tuning configs saved by this (or an interrupted earlier) run ride in the same commit.
            paths = [bid] + ([TUNING_DIR] if (root / TUNING_DIR).is_dir() else [])
            run_git(repo, "add", "--", *paths)
            message = _messages(result, bid)
            run_git(repo, "commit", "-q", "--no-verify", "-m", message, "--", *paths)
            commit = run_git(repo, "rev-parse", "HEAD")
            _tag(repo, bid, commit, message)
        except BaseException as exc:
            _rollback(repo, root, bid, prev_head, tmp)
            if isinstance(exc, OSError):
                raise BaselineError(
                    f"could not write baseline {bid} to {root}: {exc.strerror or exc}; "
                    "nothing was recorded, fix that and rerun"
                ) from exc
            raise
    return BaselineRef(
        store=str(root), model=model, platform=platform, version=version, path=bid, commit=commit, tag=bid
    )


# ---------------------------------------------------------------- reading


def _scan(repo: git.Repo, root: Path, model: str | None, platform: str | None) -> list[BaselineRef]:
    """Committed baselines (of one model and/or platform), oldest first by the run's own time."""
    tags = tag_map(repo)
    found = []
    for bid in head_baselines(repo):
        m, p, _ = bid.split("/")
        if (model and m != model) or (platform and p != platform):
            continue
        manifest = read_json(repo, f"{bid}/manifest.json", "manifest") or {}
        found.append((baseline_ref(repo, root, bid, tags), str(manifest.get("created", ""))))

    def order(item: tuple[BaselineRef, str]) -> tuple:
        try:
            when = parse_time(item[1])
        except (TypeError, ValueError):
            when = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
        return (when, version_key(item[0].version), item[0].path)

    return [ref for ref, _ in sorted(found, key=order)]


def list_baselines(store_path: StoreLike, model: str | None = None, platform: str | None = None) -> list[BaselineRef]:
    """Baselines in the store (optionally of one model and/or platform), oldest first by run time."""
    root = existing(store_path)
    if root is None:
        if clones.is_remote(store_path):
            return []  # a shared remote nothing was pushed to yet
        p = Path(os.fspath(store_path)).expanduser().absolute()
        if not p.exists():
            raise BaselineError(refusal(p, "missing"))
        return []
    with open_repo(root) as repo:
        return _scan(repo, root, model and model_slug(model), platform and platform_slug(platform))


def _load(repo: git.Repo, root: Path, bid: str, tags: dict[str, str]) -> RunResult:
    manifest = read_json(repo, f"{bid}/manifest.json", "manifest")
    if manifest is None:
        raise BaselineError(f"no baseline {bid} in store {root}; `evaluate baseline list` shows the ids")
    version, writer = schema.check_manifest(manifest, bid)  # before reading a result it may not understand
    data = read_json(repo, f"{bid}/result.json", "result")
    if data is None:
        raise BaselineError(f"baseline {bid} has no result.json; restore it with git checkout")
    result = schema.result_from(data, version, writer, bid)
    return dataclasses.replace(result, baseline=baseline_ref(repo, root, bid, tags))


def load(store_path: StoreLike, baseline_id: str) -> RunResult:
    """The full RunResult of one baseline, read from the committed tree (migrated if older)."""
    bid = "/".join(parse_id(baseline_id))
    root = existing(store_path)
    if root is None:
        raise BaselineError(
            f"no baseline {bid}: there is no baseline store at {store_path}; pass --store with the store's path"
        )
    with open_repo(root) as repo:
        return _load(repo, root, bid, tag_map(repo))


def previous(store_path: StoreLike, model: str, platform: str) -> RunResult | None:
    """The newest baseline of this model and platform, or None (no store, or none yet)."""
    root = existing(store_path)
    if root is None:
        return None
    with open_repo(root) as repo:
        found = _scan(repo, root, model_slug(model), platform_slug(platform))
        return _load(repo, root, found[-1].path, tag_map(repo)) if found else None


def trend(store_path: StoreLike, model: str, platform: str) -> tuple[TrendPoint, ...]:
    """Per op and end-to-end medians across every baseline of a model and platform, oldest first."""
    root = existing(store_path)
    if root is None:
        return ()
    points = []
    with open_repo(root) as repo:
        tags = tag_map(repo)
        for ref in _scan(repo, root, model_slug(model), platform_slug(platform)):
            r = _load(repo, root, ref.path, tags)
            points += [TrendPoint(ref.version, r.created, key, t.median_ms) for key, t in timings(r).items()]
    return tuple(points)


def diff(store_path: StoreLike, a_id: str, b_id: str, *, threshold: float = 0.05, noise_k: float = 3.0) -> Comparison:
    """Baseline `b_id` (candidate) against `a_id` (reference), both read from the store."""
    a_bid, b_bid = "/".join(parse_id(a_id)), "/".join(parse_id(b_id))
    root = existing(store_path)
    if root is None:
        raise BaselineError(f"there is no baseline store at {store_path}; pass --store with the store's path")
    with open_repo(root) as repo:
        tags = tag_map(repo)
        a, b = _load(repo, root, a_bid, tags), _load(repo, root, b_bid, tags)
    return compare(a, b, threshold=threshold, noise_k=noise_k, reference_id=a_bid, candidate_id=b_bid)
