"""The baseline store: a git repository holding one folder, commit and annotated tag per run.

In: finished `RunResult`s to record, a store spec (default `reports/baselines/`; a local
folder, or a shared remote's git URL or bare repository, which remote.py turns into a local
clone) and baseline ids `<model>/<platform>/<version>`. Out: `open_store` gives a `Store`
(its folder, and its remote when it has one); `record` writes the next version of a
model/platform/quarter all or nothing (temp folder, rename, commit, tag, under an exclusive
lock; rolled back on any failure, and what a killed writer left behind is recovered by the
next), with a writer suffix in a clone of a shared remote (the id scheme is in ids.py);
`load`, `previous`, `list_baselines`, `trend` and `diff` read back from the committed tree
alone, migrating older schema versions, so baselines pulled from other hosts read like local
ones. The files inside a folder come from tables.py, reading them back from schema.py, the
lock from lock.py, the comparison from compare.py, cloning, pulling and pushing from
remote.py; this module and remote.py are the only baseline modules that import git, and the
only repositories they touch are the store and its remote.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Any, Iterator, Union

import git

from .. import __version__
from ..errors import BaselineError
from ..results import SCHEMA_VERSION, BaselineRef, Comparison, RunResult, TrendPoint
from . import schema, tables
from .compare import compare, timings
from .ids import (VERSION_RE, WRITER_RE, model_slug, parse_id, parse_time, platform_slug, quarter,
                  version_key, version_parts)
from .ids import version as make_version
from .lock import LOCK_NAME, LOCK_TIMEOUT_S, locked

DEFAULT_STORE = Path("reports") / "baselines"
MARKER = ".evaluator-store"  # tells a store apart from any other git repository
TMP_PREFIX = ".tmp-"
TUNING_DIR = "_tuning"  # the tuning cache (evaluator/tuning_cache.py); committed with the next baseline
META_FILES = (MARKER, ".gitignore", "README.md")  # written once, when the store is created
REMOTE = "origin"  # the shared remote of a clone
REMOTE_TAGS = "refs/evaluator/remote-tags/"  # the remote's tags as last fetched (remote.py)
# This clone's writer id (ids.py) and where it was drawn (host, folder, .git inode), so a
# clone copied elsewhere draws its own.
WRITER_KEY, WRITER_AT_KEY = "evaluator.writer", "evaluator.writerat"

# Variables that point git at another repository (exported inside git hooks, for one).
_GIT_LOCATION_VARS = frozenset({"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                                "GIT_COMMON_DIR", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_PREFIX"})

_GITIGNORE = f"/{LOCK_NAME}\n/{TMP_PREFIX}*\n"
_README = """# Baseline store

Written by `evaluate` (package `evaluator`). One folder, commit and annotated tag per run:
`<model>/<platform>/<version>/` with manifest.json, result.json and CSV tables; tuned
kernel configs live under `_tuning/`, keyed by toolchain. Push to a shared remote to
collect baselines from several machines; `evaluate baseline list --store PATH` lists them.
"""

StoreLike = Union[str, os.PathLike, "Store"]


# ---------------------------------------------------------------- opening and creating


class Store:
    """An opened store: a git work tree holding the store marker. Usable wherever a path is.

    `path` is the local folder every read and record works on; `remote` the shared remote's
    URL (credentials hidden) when the folder is a clone of one (its `origin`), else None;
    `spec` what the caller passed (`--store`), which messages repeat so a retry can be typed.
    """

    def __init__(self, path: Path, remote: str | None = None, spec: str | None = None):
        self.path = path
        self.remote = remote
        self.spec = spec if spec is not None else str(path)

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, remote={self.remote!r})" if self.remote else f"Store({str(self.path)!r})"


def _state(p: Path) -> str:
    if not p.exists():
        return "missing"
    if not p.is_dir():
        return "file"
    names = {c.name for c in p.iterdir() if c.name != LOCK_NAME and not c.name.startswith(TMP_PREFIX)}
    if (p / ".git").exists():
        if (p / MARKER).is_file():
            return "store"
        if names == {".git"}:
            # `git init`, or a clone of a fresh shared remote: ours to initialise.
            with contextlib.suppress(Exception), git.Repo(p) as repo:
                if not repo.head.is_valid():
                    return "empty-repo"
        return "foreign-repo"
    if not names:
        return "empty"
    if (p / "HEAD").is_file() and (p / "objects").is_dir():
        return "bare"
    return "foreign"


def _refusal(p: Path, state: str) -> str:
    return {
        "file": f"baseline store {p} is a file; pass --store with a folder (new or an existing store)",
        "foreign-repo": f"{p} is a git repository but not a baseline store (no {MARKER}); "
                        "pass --store with a new folder or an existing store",
        "bare": f"{p} is a bare git repository; clone it (git clone {p} DIR) and pass the clone "
                "with --store",
        "foreign": f"{p} exists and is not a baseline store; pass --store with a new or empty folder "
                   "or an existing store",
        "missing": f"there is no baseline store at {p}; record a run first or pass --store with "
                   "the store's path",
    }[state]


def open_store(path: StoreLike, *, create: bool = True, clone: str | os.PathLike | None = None) -> Store:
    """The store at `path`, initialised (git repo, marker, first commit) when missing or empty.

    `path` may be a shared remote (a git URL, or the path of a bare repository): the store is
    then a local clone of it, kept in `clone` or under remote.DEFAULT_CLONE_CACHE, cloned on
    first use (the only network access here; `remote.pull` brings it up to date).
    """
    if isinstance(path, Store):
        return path
    from . import remote
    if remote.is_remote(path):
        return remote.open_remote(path, create=create, clone=clone)
    p = Path(os.fspath(path)).expanduser().absolute()
    state = _state(p)
    if state == "foreign-repo" and create and (p / LOCK_NAME).exists():
        # Another first run may be initialising this folder right now (its git repository
        # exists, its marker not yet): wait for its lock and look again.
        with locked(p, LOCK_TIMEOUT_S):
            state = _state(p)
    if state == "store":
        return Store(p, _origin_url(p), os.fspath(path))
    if state in ("empty", "empty-repo", "missing") and create:
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BaselineError(f"cannot create baseline store {p}: {e.strerror}; "
                                "pass --store with a writable folder") from None
        # Two first runs can race to initialise the same folder; the lock makes one do it.
        with locked(p, LOCK_TIMEOUT_S):
            state = _state(p)
            if state in ("empty", "empty-repo"):
                _initialise(p)
            elif state != "store":
                raise BaselineError(_refusal(p, state))
        return Store(p, _origin_url(p), os.fspath(path))
    if state in ("empty", "empty-repo"):
        raise BaselineError(f"{p} is not initialised as a baseline store yet; record a run into it first")
    raise BaselineError(_refusal(p, state))


def existing(store_path: StoreLike) -> Path | None:
    """The root of an existing store, None when nothing was ever recorded there."""
    if isinstance(store_path, Store):
        return store_path.path
    from . import remote
    if remote.is_remote(store_path):
        return remote.existing_clone(store_path)
    p = Path(os.fspath(store_path)).expanduser().absolute()
    state = _state(p)
    if state == "store":
        return p
    if state in ("missing", "empty", "empty-repo"):
        return None
    raise BaselineError(_refusal(p, state))


def _initialise(p: Path) -> None:
    fresh = not (p / ".git").exists()
    try:
        _init_repo(p)
    except BaseException:
        # Half an initialisation would pass for a store (the marker) without a first commit.
        for name in (MARKER, ".gitignore", "README.md"):
            (p / name).unlink(missing_ok=True)
        if fresh:
            shutil.rmtree(p / ".git", ignore_errors=True)
        raise


def _init_repo(p: Path) -> None:
    if not (p / ".git").exists():
        # Not git.Repo.init: an inherited GIT_DIR would make `git init` initialise that one.
        env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARS}
        try:
            done = subprocess.run(["git", "init", "-q", str(p)], env=env, capture_output=True, text=True)
        except OSError as e:
            raise BaselineError(f"cannot run git to create the baseline store at {p} ({e.strerror}); "
                                "install git") from None
        if done.returncode != 0:
            why = (done.stderr.strip() or "git init failed").splitlines()[0]
            raise BaselineError(f"cannot create a git repository at {p} ({why}); check that the folder is writable")
    try:
        repo = git.Repo(p)
    except git.GitError as e:
        raise BaselineError(f"cannot open the new git repository at {p} ({_first_line(e)}); "
                            "check that git is installed and the folder is writable") from None
    with repo:
        _prepare(repo)
        (p / ".gitignore").write_text(_GITIGNORE)
        (p / "README.md").write_text(_README)
        (p / MARKER).write_text(json.dumps({"kind": "evaluator-baseline-store", "created_by": __version__,
                                            "schema_version": SCHEMA_VERSION}, indent=2) + "\n")
        _git(repo, "add", "--", ".gitignore", "README.md", MARKER)
        _git(repo, "commit", "-q", "--no-verify", "-m", "Create baseline store")


# ---------------------------------------------------------------- git plumbing


@contextlib.contextmanager
def _repo(root: Path) -> Iterator[git.Repo]:
    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BaselineError(f"{root} is not a git repository; pass --store with a baseline store") from None
    try:
        _prepare(repo)
        yield repo
    finally:
        repo.close()


def _prepare(repo: git.Repo) -> None:
    env = {
        # A caller running inside another repository's hook may export these; pin them so
        # every command below acts on the store and nothing else.
        "GIT_DIR": str(repo.git_dir), "GIT_WORK_TREE": str(repo.working_tree_dir),
        "GIT_INDEX_FILE": str(Path(repo.git_dir) / "index"),
    }
    common = Path(repo.common_dir)
    pinned = {"GIT_OBJECT_DIRECTORY": str(common / "objects"), "GIT_COMMON_DIR": str(common)}
    env.update({k: pinned.get(k, "") for k in _GIT_LOCATION_VARS if k in os.environ and k not in env})
    repo.git.update_environment(**env)
    try:
        repo.git.var("GIT_COMMITTER_IDENT")
    except git.GitCommandError:
        # Locked-down GPU boxes often have no git identity; a baseline must still be recorded.
        who = {"GIT_AUTHOR_NAME": "evaluator", "GIT_COMMITTER_NAME": "evaluator",
               "GIT_AUTHOR_EMAIL": f"evaluator@{socket.gethostname() or 'localhost'}"}
        who["GIT_COMMITTER_EMAIL"] = who["GIT_AUTHOR_EMAIL"]
        repo.git.update_environment(**who)


def _first_line(e: BaseException) -> str:
    if isinstance(e, git.GitCommandError):
        text = (e.stderr or e.stdout or "").strip().replace("stderr: ", "").strip("' \n")
        text = text or str(e)
    else:
        text = str(e)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


def _git(repo: git.Repo, *args: str) -> str:
    try:
        return repo.git.execute(["git", *args])
    except git.GitCommandError as e:
        raise BaselineError(f"git {args[0]} failed in baseline store {repo.working_tree_dir}: {_first_line(e)}; "
                            f"check it with `git -C {repo.working_tree_dir} status`") from None


def _config(repo: git.Repo, key: str) -> str | None:
    """One value of the store's git config (local, global or system), None when unset."""
    status, out, _ = repo.git.execute(["git", "config", "--get", key], with_extended_output=True,
                                      with_exceptions=False)
    return out.strip() if status == 0 and out.strip() else None


def _origin_url(root: Path) -> str | None:
    """The URL of the store's shared remote (credentials hidden), None for a store of one's own."""
    from .remote import redact
    with contextlib.suppress(Exception), _repo(root) as repo:
        url = _config(repo, f"remote.{REMOTE}.url")
        return redact(url) if url else None
    return None


def _head_valid(repo: git.Repo) -> bool:
    try:
        return repo.head.is_valid()
    except Exception:
        return False


def _head_baselines(repo: git.Repo) -> list[str]:
    """Folders `<model>/<platform>/<version>` that HEAD holds a manifest for."""
    if not _head_valid(repo):
        return []
    out = []
    for line in _git(repo, "ls-tree", "-r", "--name-only", "-z", "HEAD").split("\0"):
        parts = line.split("/")
        if (len(parts) == 4 and parts[3] == "manifest.json" and parts[0][:1] not in "._"
                and VERSION_RE.match(parts[2])):
            out.append("/".join(parts[:3]))
    return out


def _tags(repo: git.Repo, namespace: str = "refs/tags/", *, objects: bool = False) -> dict[str, str]:
    """tag name -> the commit it points at (or, with objects=True, the tag object itself)."""
    out = {}
    text = _git(repo, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(*objectname)", namespace.rstrip("/"))
    for line in text.splitlines():
        name, obj, peeled = (line.split("\0") + ["", ""])[:3]
        out[name[len(namespace):]] = obj if objects else (peeled or obj)
    return out


def _known_ids(repo: git.Repo) -> set[str]:
    """Every baseline id this clone knows of: its branch, its tags and the remote's tags as last fetched."""
    return {*_head_baselines(repo), *_tags(repo), *_tags(repo, REMOTE_TAGS)}


def _writer(repo: git.Repo, root: Path, *, avoid: frozenset[str] = frozenset()) -> str:
    """This clone's writer id (ids.py), drawn once and kept in its git config.

    Drawn again when the clone was copied to another host or folder (a copy must not share
    its original's ids) or when `avoid` names it (it collided on the remote); a new one
    differs from every writer already seen in the ids this clone knows.
    """
    where = f"{socket.gethostname()}\0{os.path.realpath(root)}\0{os.stat(repo.git_dir).st_ino}"
    here = hashlib.sha256(where.encode()).hexdigest()[:16]
    current = _config(repo, WRITER_KEY)
    if current and WRITER_RE.match(current) and _config(repo, WRITER_AT_KEY) == here and current not in avoid:
        return current
    seen = set(avoid) | {parts[2] for bid in _known_ids(repo)
                         if (parts := version_parts(bid.rsplit("/", 1)[-1])) and parts[2]}
    writer = secrets.token_hex(3)
    while writer in seen:
        writer = secrets.token_hex(3)
    _git(repo, "config", WRITER_KEY, writer)
    _git(repo, "config", WRITER_AT_KEY, here)
    return writer


def _repoint_tags(repo: git.Repo, committed: set[str]) -> None:
    """Move baseline tags left on commits no longer in the branch (a rebase onto the remote
    rewrote them; a crash came before the tags followed) to the commit that added the
    baseline now. Local tags only: a tag on a rewritten commit was never pushed."""
    if not _head_valid(repo):
        return
    stale = _git(repo, "for-each-ref", "--no-merged", "HEAD", "--format=%(refname:strip=2)", "refs/tags")
    for bid in stale.splitlines():
        if bid in committed:
            commit = _git(repo, "log", "-1", "--format=%H", "--diff-filter=A", "--", f"{bid}/manifest.json")
            message = _git(repo, "for-each-ref", "--format=%(contents)", f"refs/tags/{bid}") or f"baseline {bid}"
            if commit:
                _git(repo, "tag", "-f", "-a", "-m", message, bid, commit)


def _read_json(repo: git.Repo, path: str, what: str) -> dict[str, Any] | None:
    """A JSON object from HEAD's tree (not the work tree: only committed baselines count)."""
    try:
        raw = (repo.head.commit.tree / path).data_stream.read()
    except (KeyError, ValueError):
        return None
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise BaselineError(f"{what} {path} in store {repo.working_tree_dir} is not valid JSON ({e}); "
                            "restore it with git checkout or remove that baseline") from None
    if not isinstance(data, dict):
        raise BaselineError(f"{what} {path} in store {repo.working_tree_dir} is not a JSON object; "
                            "restore it with git checkout or remove that baseline")
    return data


def _ref(repo: git.Repo, root: Path, bid: str, tags: dict[str, str]) -> BaselineRef:
    """The ref of a committed baseline; its commit from the tag, or from history when the tag is missing."""
    m, p, v = bid.split("/")
    commit = tags[bid] if bid in tags else _git(repo, "log", "-1", "--format=%H", "--", f"{bid}/manifest.json")
    return BaselineRef(store=str(root), model=m, platform=p, version=v, path=bid, commit=commit,
                       tag=bid if bid in tags else "")


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
    if _git(repo, "diff", "--cached", "--name-only"):
        _git(repo, "reset", "-q")
    committed = set(_head_baselines(repo))
    stale = set()
    for path in _git(repo, "ls-files", "--others", "--exclude-standard", "-z").split("\0"):
        parts = path.split("/")
        if len(parts) >= 4 and parts[0][:1] not in "._" and VERSION_RE.match(parts[2]):
            folder = "/".join(parts[:3])
            # Renamed into place but never committed: the rename is atomic, the commit is not.
            if folder not in committed and (root / folder / "manifest.json").is_file():
                stale.add(folder)
    for folder in sorted(stale):
        _rmtree_and_prune(root, root / folder)
    _repoint_tags(repo, committed)
    tags = _tags(repo)
    for bid in sorted(committed - set(tags)):
        # Committed but killed before tagging: the baseline is whole, so finish the job.
        commit = _git(repo, "log", "-1", "--format=%H", "--diff-filter=A", "--", f"{bid}/manifest.json")
        if commit:
            _git(repo, "tag", "-a", "-m", f"baseline {bid} (tag restored)", bid, commit)


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


def _next_version(repo: git.Repo, model: str, platform: str, period: str, writer: str | None = None,
                  extra: set[str] | frozenset[str] = frozenset()) -> str:
    """One above the highest k of this model/platform/quarter this clone knows of (ids.py)."""
    prefix = f"{model}/{platform}/"
    # Tags count too: a tag fetched from the shared remote reserves its number.
    taken = [parts[1] for name in {*_known_ids(repo), *extra} if name.startswith(prefix)
             and (parts := version_parts(name[len(prefix):])) and parts[0] == period]
    return make_version(period, max(taken, default=0) + 1, writer)


def _messages(r: RunResult, bid: str) -> str:
    hw = r.environment.hardware
    decision = r.verdict.decision if r.verdict else "no verdict"
    speed = f", e2e {r.e2e.speedup:.2f}x" if r.e2e and r.e2e.speedup else ""
    return (f"baseline {bid}: {decision}{speed}\n\n"
            f"run {r.run_id}, created {r.created}\n"
            f"device {hw.name} (driver {hw.driver or '-'}, CUDA {hw.cuda or '-'}, target {hw.target})\n"
            f"torch {r.environment.torch}, tilelang {r.environment.tilelang}, "
            f"evaluator {r.environment.evaluator}, python {r.environment.python}\n")


def _tag(repo: git.Repo, bid: str, commit: str, message: str) -> None:
    _git(repo, "tag", "-a", "-m", message, bid, commit)


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
    with locked(root, lock_timeout), _repo(root) as repo:
        _recover(repo, root)
        # A clone of a shared remote suffixes its ids with its writer id, so that two hosts
        # recording at once never pick the same id (ids.py).
        writer = _writer(repo, root) if _config(repo, f"remote.{REMOTE}.url") else None
        version = _next_version(repo, model, platform, period, writer)
        bid = f"{model}/{platform}/{version}"
        folder = root / bid
        tmp = root / f"{TMP_PREFIX}{uuid.uuid4().hex}"
        prev_head = _git(repo, "rev-parse", "HEAD")
        try:
            tmp.mkdir()
            tables.write_folder(tmp, result, bid)
            if folder.exists():
                raise BaselineError(f"{folder} exists but is not a committed baseline; move it out of "
                                    "the store and rerun")
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.rename(tmp, folder)
            # Tuning configs saved by this (or an interrupted earlier) run ride in the same commit.
            paths = [bid] + ([TUNING_DIR] if (root / TUNING_DIR).is_dir() else [])
            _git(repo, "add", "--", *paths)
            message = _messages(result, bid)
            _git(repo, "commit", "-q", "--no-verify", "-m", message, "--", *paths)
            commit = _git(repo, "rev-parse", "HEAD")
            _tag(repo, bid, commit, message)
        except BaseException as exc:
            _rollback(repo, root, bid, prev_head, tmp)
            if isinstance(exc, OSError):
                raise BaselineError(f"could not write baseline {bid} to {root}: {exc.strerror or exc}; "
                                    "nothing was recorded, fix that and rerun") from exc
            raise
    return BaselineRef(store=str(root), model=model, platform=platform, version=version, path=bid,
                       commit=commit, tag=bid)


# ---------------------------------------------------------------- reading


def _scan(repo: git.Repo, root: Path, model: str | None, platform: str | None) -> list[BaselineRef]:
    """Committed baselines (of one model and/or platform), oldest first by the run's own time."""
    tags = _tags(repo)
    found = []
    for bid in _head_baselines(repo):
        m, p, _ = bid.split("/")
        if (model and m != model) or (platform and p != platform):
            continue
        manifest = _read_json(repo, f"{bid}/manifest.json", "manifest") or {}
        found.append((_ref(repo, root, bid, tags), str(manifest.get("created", ""))))

    def order(item: tuple[BaselineRef, str]) -> tuple:
        try:
            when = parse_time(item[1])
        except (TypeError, ValueError):
            when = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
        return (when, version_key(item[0].version), item[0].path)

    return [ref for ref, _ in sorted(found, key=order)]


def list_baselines(store_path: StoreLike, model: str | None = None,
                   platform: str | None = None) -> list[BaselineRef]:
    """Baselines in the store (optionally of one model and/or platform), oldest first by run time."""
    root = existing(store_path)
    if root is None:
        from . import remote
        if remote.is_remote(store_path):
            return []  # a shared remote nothing was pushed to yet
        p = Path(os.fspath(store_path)).expanduser().absolute()
        if not p.exists():
            raise BaselineError(_refusal(p, "missing"))
        return []
    with _repo(root) as repo:
        return _scan(repo, root, model and model_slug(model), platform and platform_slug(platform))


def _load(repo: git.Repo, root: Path, bid: str, tags: dict[str, str]) -> RunResult:
    manifest = _read_json(repo, f"{bid}/manifest.json", "manifest")
    if manifest is None:
        raise BaselineError(f"no baseline {bid} in store {root}; `evaluate baseline list` shows the ids")
    version, writer = schema.check_manifest(manifest, bid)  # before reading a result it may not understand
    data = _read_json(repo, f"{bid}/result.json", "result")
    if data is None:
        raise BaselineError(f"baseline {bid} has no result.json; restore it with git checkout")
    result = schema.result_from(data, version, writer, bid)
    return dataclasses.replace(result, baseline=_ref(repo, root, bid, tags))


def load(store_path: StoreLike, baseline_id: str) -> RunResult:
    """The full RunResult of one baseline, read from the committed tree (migrated if older)."""
    bid = "/".join(parse_id(baseline_id))
    root = existing(store_path)
    if root is None:
        raise BaselineError(f"no baseline {bid}: there is no baseline store at {store_path}; "
                            "pass --store with the store's path")
    with _repo(root) as repo:
        return _load(repo, root, bid, _tags(repo))


def previous(store_path: StoreLike, model: str, platform: str) -> RunResult | None:
    """The newest baseline of this model and platform, or None (no store, or none yet)."""
    root = existing(store_path)
    if root is None:
        return None
    with _repo(root) as repo:
        found = _scan(repo, root, model_slug(model), platform_slug(platform))
        return _load(repo, root, found[-1].path, _tags(repo)) if found else None


def trend(store_path: StoreLike, model: str, platform: str) -> tuple[TrendPoint, ...]:
    """Per op and end-to-end medians across every baseline of a model and platform, oldest first."""
    root = existing(store_path)
    if root is None:
        return ()
    points = []
    with _repo(root) as repo:
        tags = _tags(repo)
        for ref in _scan(repo, root, model_slug(model), platform_slug(platform)):
            r = _load(repo, root, ref.path, tags)
            points += [TrendPoint(ref.version, r.created, key, t.median_ms) for key, t in timings(r).items()]
    return tuple(points)


def diff(store_path: StoreLike, a_id: str, b_id: str, *, threshold: float = 0.05,
         noise_k: float = 3.0) -> Comparison:
    """Baseline `b_id` (candidate) against `a_id` (reference), both read from the store."""
    a_bid, b_bid = "/".join(parse_id(a_id)), "/".join(parse_id(b_id))
    root = existing(store_path)
    if root is None:
        raise BaselineError(f"there is no baseline store at {store_path}; pass --store with the store's path")
    with _repo(root) as repo:
        tags = _tags(repo)
        a, b = _load(repo, root, a_bid, tags), _load(repo, root, b_bid, tags)
    return compare(a, b, threshold=threshold, noise_k=noise_k, reference_id=a_bid, candidate_id=b_bid)
