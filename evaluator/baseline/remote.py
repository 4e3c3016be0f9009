"""A shared baseline remote: a local clone to record into, and pull and push to sync it.

In: a store spec naming a shared remote (a git URL: `ssh://`, `git@host:path`, `https://`,
`file://`, or the path of a bare repository), or an opened `Store` whose folder has an
`origin`. Out: `open_remote` returns a `Store` on a local clone of the remote (kept in the
folder given, else `~/.cache/evaluator/stores/<slug>`; `$EVALUATOR_STORE_CACHE` moves that
cache), which records, lists, loads and compares exactly like a local store; `pull` fetches
and brings the clone up to the remote, with its tags, so baselines recorded on other hosts
are read by `list_baselines`, `load`, `previous`, `trend` and `diff`; `push` does the same
and then pushes the branch and the baselines' tags. Both return a `Sync` saying what moved;
`record_and_push` records and pushes in one step (`evaluate --push`).

How concurrent hosts are reconciled: fetch, rebase, push, and on a rejected push (another
host pushed first) fetch, rebase and push again, a bounded number of times with jittered
backoff. Never a force push and never a deleted remote ref: the branch only fast-forwards
and tags are only created. The rebase replays this clone's unpushed commits onto the
remote's branch one by one (git plumbing, no work-tree merge), so it cannot stop half way:
baseline folders are distinct because ids are unique per writer (ids.py); a tuned config
both sides saved keeps the remote's copy (it is a cache, and hosts then agree); the store's
own files (marker, README) keep the remote's; a baseline whose id the remote already has is
renumbered (ids.py). Tuned configs saved since the last baseline are committed first, so
they travel too. The new commits are built aside and the branch moves once, at the end; the
local tags follow them. Anything else both sides changed is refused with the path, and the
branch stays where it was.

Authentication is whatever git already has (ssh keys and agent, credential helpers); nothing
is stored here, and git is run with prompts off (ssh in batch mode unless the user set
GIT_SSH_COMMAND or core.sshCommand) so a batch run fails in one line instead of hanging.
Every failure is one `BaselineError` line with git's reason; a failed push leaves every
baseline recorded in the clone and says how to retry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Iterator

import git

from ..errors import BaselineError
from ..results import BaselineRef, RunResult
from . import store
from .ids import VERSION_RE, slug, version_parts
from .lock import LOCK_TIMEOUT_S, locked
from .store import META_FILES, REMOTE, REMOTE_TAGS, TUNING_DIR, Store, StoreLike

DEFAULT_CLONE_CACHE = Path("~/.cache/evaluator/stores")
CACHE_ENV = "EVALUATOR_STORE_CACHE"
NET_TIMEOUT_S = 300.0  # one clone, fetch or push; a dead host fails sooner (ssh ConnectTimeout, http low speed)
PUSH_ATTEMPTS = 8
BACKOFF_S = 0.25  # first wait after a rejected push; doubled each time, jittered, capped
BACKOFF_MAX_S = 8.0

# `git@host:path` and `host:path` (git's scp-like syntax): a colon before any slash.
_SCP_RE = re.compile(r"^(?:[^@/\s]+@)?[^@/:\s]+:(?!//)")
_NET_OPTS = ["-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=60"]
_TUNING_COMMIT = "Tuning configs saved since the last baseline"
_LOCK_CONTENTION = re.compile(r"cannot lock ref|Unable to create '.*\.lock'|unable to update local ref")


@dataclasses.dataclass(frozen=True)
class Sync:
    """What one pull or push did. Ids are baseline ids `<model>/<platform>/<version>`."""
    store: str  # the local clone
    remote: str  # the remote's URL, credentials hidden
    branch: str
    head: str  # the clone's commit afterwards
    pulled: tuple[str, ...] = ()  # baselines from other hosts now in the clone
    pushed: tuple[str, ...] = ()  # baselines (and their tags) now on the remote
    renumbered: tuple[tuple[str, str], ...] = ()  # (old id, new id): the remote had the old one
    attempts: int = 1  # pushes tried (more than one: another host pushed first)


# ---------------------------------------------------------------- specs and clones


def _spec_text(spec: str | os.PathLike) -> str:
    """The spec as text. A URL that went through pathlib lost a slash (`Path("ssh://h/x")` is
    `ssh:/h/x`, which git would read as host `ssh`); it gets it back."""
    text = os.fspath(spec).strip()
    m = re.match(r"^(ssh|git|https?|git\+ssh|ssh\+git|file):/(?!/)", text)
    if m and isinstance(spec, os.PathLike):
        rest = text[m.end():]
        return f"file:///{rest}" if m.group(1) == "file" else f"{m.group(1)}://{rest}"
    return text


def is_remote(spec: StoreLike) -> bool:
    """Whether `--store` names a shared remote (a git URL or a bare repository) rather than a folder."""
    if isinstance(spec, Store):
        return False
    text = _spec_text(spec)
    if "://" in text:
        return True
    p = Path(text).expanduser()
    if p.exists():
        return _is_bare(p)
    return bool(_SCP_RE.match(text))


def _is_bare(p: Path) -> bool:
    return (p.is_dir() and not (p / ".git").exists() and (p / "HEAD").is_file() and (p / "objects").is_dir()
            and (p / "refs").is_dir())


def remote_url(spec: str | os.PathLike) -> str:
    """The URL git is given: as typed, or the absolute path of a bare repository."""
    text = _spec_text(spec)
    if "://" in text or (_SCP_RE.match(text) and not Path(text).expanduser().exists()):
        return text
    return str(Path(text).expanduser().absolute())


def _canonical(url: str) -> str:
    """One spelling per repository, to tell whether a clone is of the remote asked for (and
    name its cache folder): credentials left out, so a new token still finds the same clone."""
    url = url.strip().rstrip("/")
    url = re.sub(r"^(https?://)[^/@]*@", r"\1", re.sub(r"^([a-z+]+://[^/:@]*):[^/@]*@", r"\1@", url))
    if url.startswith("file://"):
        url = urllib.parse.unquote(url[len("file://"):])
    if "://" not in url and not _SCP_RE.match(url):
        return os.path.realpath(os.path.expanduser(url))
    return url


def redact(text: str) -> str:
    """URLs with credentials hidden: `https://user:token@host` -> `https://***@host`."""
    def hide(m: re.Match) -> str:
        scheme, user = m.group(1), m.group(2)
        return f"{scheme}***@" if ":" in user or scheme.startswith("http") else m.group(0)
    return re.sub(r"([a-zA-Z][a-zA-Z0-9+.-]*://)([^/@\s]+)@", hide, str(text))


def _cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CLONE_CACHE).expanduser().absolute()


def clone_path(spec: str | os.PathLike, cache: str | os.PathLike | None = None) -> Path:
    """Where the clone of remote `spec` is kept: `<cache>/<readable slug>-<hash of the URL>`."""
    url = remote_url(spec)
    readable = slug(re.sub(r"^[a-z+]+://", "", re.sub(r"//[^/@]*@", "//", url)))[-48:].strip("-._") or "store"
    digest = hashlib.sha256(_canonical(url).encode()).hexdigest()[:10]
    return (Path(cache).expanduser().absolute() if cache else _cache_root()) / f"{readable}-{digest}"


def _clean_env() -> dict[str, str]:
    """The caller's environment without anything pointing git at another repository (a hook's
    GIT_DIR), with prompts off: a credential prompt would hang a batch run."""
    env = {k: v for k, v in os.environ.items() if k not in store._GIT_LOCATION_VARS}
    env.update(GIT_TERMINAL_PROMPT="0", GCM_INTERACTIVE="never", LC_ALL="C", LANGUAGE="C")
    return env


def _ssh_env(env: dict[str, str], root: Path | None) -> dict[str, str]:
    # Batch mode unless the user chose their own ssh command (their auth may live there).
    if "GIT_SSH_COMMAND" in env or "GIT_SSH" in env:
        return env
    args = ["git", *(["-C", str(root)] if root else []), "config", "--get", "core.sshCommand"]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        if subprocess.run(args, env=env, capture_output=True, timeout=30).returncode == 0:
            return env
    return {**env, "GIT_SSH_COMMAND": "ssh -o BatchMode=yes -o ConnectTimeout=20"}


def _net(args: list[str], root: Path | None, timeout: float) -> tuple[int, str, str]:
    """Run a git command that talks to the remote: (status, stdout, stderr); never hangs past
    `timeout` (its whole process group, ssh included, is killed) and never reads a terminal."""
    env = _ssh_env(_clean_env(), root)
    cmd = ["git", *_NET_OPTS, *(["-C", str(root)] if root else []), *args]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, text=True, errors="replace", start_new_session=True)
    except OSError as e:
        raise BaselineError(f"cannot run git ({e.strerror}); install git 2.20 or newer") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return 124, "", f"no answer from the remote within {timeout:g} s"
    except BaseException:  # Ctrl-C: the new session does not get the terminal's SIGINT
        _kill(proc)
        raise
    return proc.returncode, out, err


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.communicate(timeout=10)


_NOISE = ("hint:", "cloning into", "to ", "from ", "please make sure you have the correct access rights",
          "and the repository exists", "fatal: could not read from remote repository",
          "error: failed to push some refs", "warning: you appear to have cloned an empty repository")


def _reason(err: str) -> str:
    """git's reason in one line: 'Permission denied (publickey)', not the generic lines around it."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.lower().startswith(_NOISE)] or lines or ["no error output from git"]
    text = re.sub(r"^(fatal|error): ", "", useful[0])
    return redact(text)[:300]


def _read_origin(root: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(root), "config", "--get", f"remote.{REMOTE}.url"],
                          env=_clean_env(), capture_output=True, text=True)
    return done.stdout.strip() or None if done.returncode == 0 else None


def ensure_clone(spec: str | os.PathLike, clone: str | os.PathLike | None = None) -> Path:
    """The local clone of remote `spec`, cloned into `clone` (or the cache) the first time."""
    url = remote_url(spec)
    dest = Path(clone).expanduser().absolute() if clone else clone_path(url)
    if (dest / ".git").exists():
        origin = _read_origin(dest)
        if origin is None or _canonical(origin) != _canonical(url):
            raise BaselineError(f"{dest} is a clone of {redact(origin or 'nothing')}, not of {redact(url)}; "
                                "pass another folder for the clone")
        return dest
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BaselineError(f"{dest} exists and is not a clone of {redact(url)}; pass an empty or new folder "
                            "for the clone")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=dest.parent))
    except OSError as e:
        raise BaselineError(f"cannot create the clone folder {dest.parent} ({e.strerror}); "
                            "set EVALUATOR_STORE_CACHE to a writable folder") from None
    try:
        # Cloned aside and renamed: an interrupted clone never passes for a finished one,
        # and two runs cloning at once both end up with the one that was renamed first.
        status, _, err = _net(["clone", "--quiet", url, str(partial)], None, NET_TIMEOUT_S)
        if status != 0:
            raise BaselineError(f"cannot clone baseline store {redact(url)}: {_reason(err)}; check the URL, "
                                f"the network and your git credentials (git ls-remote {redact(url)})")
        try:
            os.rename(partial, dest)  # also replaces an empty folder
        except OSError:
            if not (dest / ".git").exists():
                raise BaselineError(f"cannot move the new clone into {dest}; pass another folder for the clone") \
                    from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return dest


def open_remote(spec: str | os.PathLike, *, create: bool = True, clone: str | os.PathLike | None = None) -> Store:
    """A `Store` on the local clone of remote `spec` (cloned if missing; not fetched: see `pull`).

    A clone of an empty remote is initialised as a store when `create` (its first push
    creates the remote's branch)."""
    url = remote_url(spec)
    dest = ensure_clone(url, clone)
    shown = redact(url)
    state = store._state(dest)
    if state == "store":
        return Store(dest, shown, _retry_spec(spec, dest))
    if state == "empty-repo":
        if not create:
            raise BaselineError(f"nothing was pushed to baseline store {shown} yet; record a run into it first")
        store.open_store(dest, create=True)
        return Store(dest, shown, _retry_spec(spec, dest))
    raise BaselineError(f"{shown} is a git repository but not a baseline store (no {store.MARKER}); "
                        "pass --store with a shared baseline store or an empty repository")


def remote_of(spec: StoreLike) -> str | None:
    """The shared remote a store spec syncs with (credentials hidden), None for a store of one's
    own; no network, nothing created (for checking `--push` before a run)."""
    if isinstance(spec, Store):
        return spec.remote or store._origin_url(spec.path)
    if is_remote(spec):
        return redact(remote_url(spec))
    p = Path(os.fspath(spec)).expanduser().absolute()
    return store._origin_url(p) if (p / ".git").exists() else None


def _retry_spec(spec: str | os.PathLike, dest: Path) -> str:
    """What a message tells the user to pass as --store: what they typed, unless it holds a
    credential (then the clone, whose origin already has it)."""
    text = _spec_text(spec)
    return text if redact(text) == text else str(dest)


def existing_clone(spec: str | os.PathLike) -> Path | None:
    """For readers: the clone's folder, or None when nothing was pushed to the remote yet."""
    dest = ensure_clone(spec)
    state = store._state(dest)
    if state == "store":
        return dest
    if state == "empty-repo":
        return None
    raise BaselineError(f"{redact(remote_url(spec))} is a git repository but not a baseline store "
                        f"(no {store.MARKER}); pass --store with a shared baseline store")


def _shared(spec: StoreLike, clone: str | os.PathLike | None, create: bool) -> Store:
    if isinstance(spec, Store):
        st = spec if spec.remote else Store(spec.path, store._origin_url(spec.path), spec.spec)
    elif is_remote(spec):
        st = open_remote(spec, create=create, clone=clone) if create else _clone_for_pull(spec, clone)
    else:
        p = Path(os.fspath(spec)).expanduser().absolute()
        # A clone made while the remote was empty has nothing to open yet, but can be pulled into.
        st = (Store(p, store._origin_url(p), os.fspath(spec)) if not create and store._state(p) == "empty-repo"
              else store.open_store(spec, create=create))
    if not st.remote:
        raise BaselineError(f"baseline store {st.path} has no remote to sync with; pass --store with the shared "
                            f"remote's URL, or add one: git -C {st.path} remote add {REMOTE} URL")
    return st


def _clone_for_pull(spec: str | os.PathLike, clone: str | os.PathLike | None) -> Store:
    dest = ensure_clone(spec, clone)
    if store._state(dest) not in ("store", "empty-repo"):
        return open_remote(spec, create=False, clone=clone)  # raises the refusal
    return Store(dest, redact(remote_url(spec)), _retry_spec(spec, dest))


# ---------------------------------------------------------------- pull and push


def pull(spec: StoreLike, *, clone: str | os.PathLike | None = None, timeout: float = NET_TIMEOUT_S) -> Sync:
    """Fetch the remote and bring the clone up to it with its tags (fast-forward; unpushed local
    baselines are replayed on top, as `git pull --rebase` would). Nothing is pushed."""
    st = _shared(spec, clone, create=False)
    branch = _fetch(st, timeout, "pull from")
    with locked(st.path, LOCK_TIMEOUT_S), store._repo(st.path) as repo:
        done = _integrate(repo, st.path, branch)
        return Sync(str(st.path), st.remote or "", branch, _head(repo), pulled=done.pulled,
                    renumbered=done.renumbered)


def push(spec: StoreLike, *, clone: str | os.PathLike | None = None, attempts: int = PUSH_ATTEMPTS,
         backoff_s: float = BACKOFF_S, timeout: float = NET_TIMEOUT_S) -> Sync:
    """Fetch, rebase this clone's unpushed baselines onto the remote's branch and push the branch
    and their tags; when another host pushed first, do it again (at most `attempts` times)."""
    st = _shared(spec, clone, create=True)
    pulled: list[str] = []
    renumbered: list[tuple[str, str]] = []
    why = ""
    for attempt in range(1, max(1, attempts) + 1):
        branch = _fetch(st, timeout, "push to")
        with locked(st.path, LOCK_TIMEOUT_S), store._repo(st.path) as repo:
            done = _integrate(repo, st.path, branch)
            pulled += done.pulled
            renumbered += done.renumbered
            head, upstream = _head(repo), _upstream(repo, branch)
            remote_tags = store._tags(repo, REMOTE_TAGS)
            new_tags = sorted(b for b in _baselines_tagged(repo) if b not in remote_tags)
            refspecs = ([f"{head}:refs/heads/{branch}"] if head != upstream else []) + \
                [f"refs/tags/{t}:refs/tags/{t}" for t in new_tags]
            if not refspecs:
                return Sync(str(st.path), st.remote or "", branch, head, tuple(pulled), (), tuple(renumbered),
                            attempt)
            # No "+" and no --force: the remote refuses anything that is not a fast-forward
            # or a new tag, which is exactly when we fetch and rebase again. Atomic, so the
            # branch and its tags land together; a server without atomic pushes updates each
            # ref on its own (a tag left behind is pushed by the next push).
            status, out, err = _net(["push", "--atomic", "--porcelain", "--no-verify", REMOTE, *refspecs],
                                    st.path, timeout)
            if status != 0 and "does not support --atomic" in err:
                status, out, err = _net(["push", "--porcelain", "--no-verify", REMOTE, *refspecs], st.path, timeout)
            if status == 0:
                return Sync(str(st.path), st.remote or "", branch, head, tuple(pulled), tuple(new_tags),
                            tuple(renumbered), attempt)
            rejected = [ln for ln in out.splitlines() if ln.startswith("!")]
            if not rejected:  # never reached the refs: auth, network, a missing repository
                raise BaselineError(_push_failed(st, _reason(err)))
            why = _rejection(rejected)
        if attempt < attempts:
            # Jittered so two hosts rejected together do not collide again in lockstep.
            time.sleep(min(BACKOFF_MAX_S, backoff_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5))
    raise BaselineError(_push_failed(st, f"rejected {attempts} times, last: {why}; another host keeps pushing"))


class PushError(BaselineError):
    """`record_and_push` recorded the baseline (`ref`) but could not push it; the message says
    why and how to retry."""

    def __init__(self, message: str, ref: BaselineRef):
        super().__init__(message)
        self.ref = ref


def record_and_push(spec: StoreLike, result: RunResult, *, attempts: int = PUSH_ATTEMPTS,
                    backoff_s: float = BACKOFF_S) -> tuple[BaselineRef, Sync]:
    """`evaluate --push`: record `result`, then push. The ref is the baseline as it is on the
    remote (renumbered, should its id have collided). A failed push raises `PushError`, which
    carries the ref of the baseline that stays recorded locally."""
    st = store.open_store(spec, create=True)
    ref = store.record(st, result)
    try:
        sync = push(st, attempts=attempts, backoff_s=backoff_s)
    except BaselineError as e:
        raise PushError(str(e), ref) from None
    # The push rebased the baseline onto the remote (a new commit), and may have renumbered it.
    bid = dict(sync.renumbered).get(ref.tag, ref.tag)
    with store._repo(st.path) as repo:
        return store._ref(repo, st.path, bid, store._tags(repo)), sync


def _push_failed(st: Store, why: str) -> str:
    return (f"could not push baselines to {st.remote}: {why}; they stay recorded in {st.path}; "
            f"retry with: evaluate baseline push --store {st.spec}")


def _rejection(lines: list[str]) -> str:
    first = lines[0].split("\t")
    return f"{first[1] if len(first) > 1 else ''} {first[2] if len(first) > 2 else ''}".strip() or lines[0]


def _fetch(st: Store, timeout: float, verb: str) -> str:
    """Fetch the remote's branches and (into REMOTE_TAGS, apart from ours) its tags; the branch to sync."""
    with store._repo(st.path) as repo:
        branch = _branch(repo)
    # Forced updates of our own remote-tracking refs, as any fetch does; the remote is only read.
    # Outside the store's lock (a slow network must not keep a finishing run from recording),
    # so two syncs of one clone may fetch at once: git then refuses one a ref lock, and that
    # one simply fetches again.
    for wait in (0.2, 0.5, 1.0, 0.0):
        status, _, err = _net(["fetch", "--quiet", "--prune", "--no-tags", REMOTE,
                               f"+refs/heads/*:refs/remotes/{REMOTE}/*", f"+refs/tags/*:{REMOTE_TAGS}*"],
                              st.path, timeout)
        if status == 0 or not _LOCK_CONTENTION.search(err) or not wait:
            break
        time.sleep(wait * random.uniform(0.5, 1.5))
    if status != 0:
        msg = f"could not {verb} baseline store {st.remote}: {_reason(err)}"
        if verb == "push to":
            raise BaselineError(f"{msg}; the baselines stay recorded in {st.path}; "
                                f"retry with: evaluate baseline push --store {st.spec}")
        raise BaselineError(f"{msg}; check the network and your git credentials, or read the clone as it is "
                            f"({st.path})")
    return branch


def _branch(repo: git.Repo) -> str:
    """The remote branch the clone syncs with: its branch's upstream (set by clone), else its own name."""
    status, local, _ = repo.git.execute(["git", "symbolic-ref", "-q", "--short", "HEAD"], with_extended_output=True,
                                        with_exceptions=False)
    if status != 0 or not local.strip():
        raise BaselineError(f"baseline store {repo.working_tree_dir} is not on a branch (detached HEAD); "
                            f"check it out: git -C {repo.working_tree_dir} switch -")
    merge = store._config(repo, f"branch.{local.strip()}.merge")
    return merge[len("refs/heads/"):] if merge and merge.startswith("refs/heads/") else local.strip()


def _head(repo: git.Repo) -> str:
    return store._git(repo, "rev-parse", "HEAD") if store._head_valid(repo) else ""


def _upstream(repo: git.Repo, branch: str) -> str | None:
    ref = f"refs/remotes/{REMOTE}/{branch}^{{commit}}"
    status, out, _ = repo.git.execute(["git", "rev-parse", "-q", "--verify", ref], with_extended_output=True,
                                      with_exceptions=False)
    return out.strip() if status == 0 and out.strip() else None


def _baselines_tagged(repo: git.Repo) -> list[str]:
    tags = store._tags(repo)
    return [b for b in store._head_baselines(repo) if b in tags]


# ---------------------------------------------------------------- the rebase


@dataclasses.dataclass(frozen=True)
class _Integrated:
    pulled: tuple[str, ...] = ()
    renumbered: tuple[tuple[str, str], ...] = ()


def _integrate(repo: git.Repo, root: Path, branch: str) -> _Integrated:
    """Under the lock: bring the clone onto the fetched remote branch, keeping every local baseline."""
    store._recover(repo, root)
    upstream = _upstream(repo, branch)
    remote_tags = store._tags(repo, REMOTE_TAGS, objects=True)
    if upstream is None:  # an empty remote: whatever we have goes up as it is
        return _Integrated()
    if not store._head_valid(repo):  # a clone made while the remote was empty
        store._git(repo, "checkout", "-q", "-B", _local_branch(repo), upstream)
        _adopt_tags(repo, remote_tags)
        return _Integrated(pulled=tuple(sorted(store._head_baselines(repo))))
    _commit_pending_tuning(repo)
    before = set(store._head_baselines(repo))
    old = store._git(repo, "rev-parse", "HEAD")
    ours = store._tags(repo, objects=True)
    # A remote tag of a name we recorded here is another baseline only when it is another object.
    foreign = {name for name, obj in remote_tags.items() if ours.get(name) != obj}
    renumbered: list[tuple[str, str]] = []
    if old != upstream and _is_ancestor(repo, old, upstream):
        store._git(repo, "reset", "-q", "--keep", upstream)  # fast-forward
    elif old != upstream:
        local = store._git(repo, "rev-list", "--reverse", "--first-parent", f"{upstream}..{old}").split()
        collide = [b for b in _added(repo, local) if b in foreign or _has_folder(repo, upstream, b)]
        if not _is_ancestor(repo, upstream, old) or collide:
            tip, renumbered = _replay(repo, root, upstream, local, foreign)
            if tip != old:
                # --keep: refuses rather than overwrite anything uncommitted in the work tree.
                try:
                    store._git(repo, "reset", "-q", "--keep", tip)
                except BaselineError as e:
                    raise BaselineError(f"could not bring {root} onto the remote's baselines ({e}); "
                                        "nothing was lost; commit or remove what `git status` shows there") from None
            _retag(repo, renumbered)
    _adopt_tags(repo, remote_tags)
    after = set(store._head_baselines(repo))
    mine = {new for _, new in renumbered}
    return _Integrated(pulled=tuple(sorted(after - before - mine)), renumbered=tuple(renumbered))


def _local_branch(repo: git.Repo) -> str:
    return store._git(repo, "symbolic-ref", "--short", "HEAD")


def _is_ancestor(repo: git.Repo, a: str, b: str) -> bool:
    status, _, _ = repo.git.execute(["git", "merge-base", "--is-ancestor", a, b], with_extended_output=True,
                                    with_exceptions=False)
    return status == 0


def _has_folder(repo: git.Repo, commit: str, bid: str) -> bool:
    return bool(store._git(repo, "ls-tree", "--name-only", commit, "--", bid))


def _bid(path: str) -> str | None:
    parts = path.split("/")
    if len(parts) >= 4 and parts[0][:1] not in "._" and VERSION_RE.match(parts[2]):
        return "/".join(parts[:3])
    return None


def _added(repo: git.Repo, commits: list[str]) -> list[str]:
    """Baselines the given commits add (their manifest appears)."""
    return [b for c in commits for ch in _changes(repo, c)
            if ch.status == "A" and (b := _bid(ch.path)) and ch.path == f"{b}/manifest.json"]


def _commit_pending_tuning(repo: git.Repo) -> None:
    """Tuned configs saved since the last baseline are committed first: they travel with the
    push, and the work tree is clean for the rebase (a remote copy of the same config would
    otherwise collide with the uncommitted file)."""
    if store._git(repo, "status", "--porcelain", "--untracked-files=all", "--", TUNING_DIR):
        store._git(repo, "add", "--all", "--", TUNING_DIR)
        store._git(repo, "commit", "-q", "--no-verify", "-m", _TUNING_COMMIT, "--", TUNING_DIR)


@dataclasses.dataclass(frozen=True)
class _Change:
    old_mode: str
    new_mode: str
    old_sha: str
    new_sha: str
    status: str
    path: str


def _changes(repo: git.Repo, commit: str) -> list[_Change]:
    parents = store._git(repo, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    args = ["diff-tree", "-r", "-z", "--no-renames", "--no-commit-id"]
    text = store._git(repo, *args, "--root", commit) if not parents else store._git(repo, *args, parents[0], commit)
    tokens = text.split("\0")
    out, i = [], 0
    while i + 1 < len(tokens) and tokens[i].startswith(":"):
        old_mode, new_mode, old_sha, new_sha, status = tokens[i][1:].split()
        out.append(_Change(old_mode, new_mode, old_sha, new_sha, status[:1], tokens[i + 1]))
        i += 2
    return out


def _tree(repo: git.Repo, commit: str) -> dict[str, tuple[str, str]]:
    """path -> (mode, object) of every file in a commit."""
    out = {}
    for line in store._git(repo, "ls-tree", "-r", "-z", "--full-tree", commit).split("\0"):
        if line:
            meta, path = line.split("\t", 1)
            mode, _, sha = meta.split()
            out[path] = (mode, sha)
    return out


def _replay(repo: git.Repo, root: Path, upstream: str, commits: list[str],
            remote_tags: set[str]) -> tuple[str, list[tuple[str, str]]]:
    """Replay `commits` (oldest first) onto `upstream`: the new tip and the baselines renumbered.

    Per file, three ways: the commit's parent (base), the commit (mine), the tip so far
    (theirs). Theirs unchanged from base: take mine. Already equal: nothing to do. Both
    changed: a tuned config or the store's own files keep theirs; a new baseline folder the
    remote already has moves to a fresh id; anything else is refused.
    """
    tip = upstream
    entries = _tree(repo, upstream)
    folders = {b for p in entries if (b := _bid(p))}
    known = store._known_ids(repo) | folders
    renames: dict[str, str] = {}
    index = Path(repo.git_dir) / f"evaluator-replay-{uuid.uuid4().hex}.index"
    try:
        for c in commits:
            changes = _changes(repo, c)
            for ch in changes:
                b = _bid(ch.path)
                if (b and ch.status == "A" and ch.path == f"{b}/manifest.json" and b not in renames
                        and (b in remote_tags or b in folders)):
                    renames[b] = _fresh_id(repo, root, b, known)
                    known.add(renames[b])
            updates: dict[str, tuple[str, str] | None] = {}
            for ch in changes:
                b = _bid(ch.path)
                path, sha = ch.path, ch.new_sha
                if b in renames:
                    path = renames[b] + ch.path[len(b):]
                    if ch.path == f"{b}/manifest.json" and ch.status != "D":
                        sha = _renumbered_manifest(repo, ch.new_sha, renames[b])
                base = None if ch.status == "A" else (ch.old_mode, ch.old_sha)
                mine = None if ch.status == "D" else (ch.new_mode, sha)
                theirs = entries.get(path)
                if theirs == base:
                    updates[path] = mine
                elif theirs == mine:
                    continue
                elif path.startswith(TUNING_DIR + "/") or path in META_FILES:
                    continue  # the remote's copy wins: a cache entry, or the store's own files
                else:
                    raise BaselineError(f"{path} was changed both in {root} (commit {c[:10]}) and on the remote; "
                                        f"nothing was changed; reconcile it by hand in {root} and retry")
            updates = {p: v for p, v in updates.items() if entries.get(p) != v}
            if not updates:
                continue  # already on the remote (e.g. the store's first commit, made twice)
            tip = _commit(repo, index, c, tip, updates, renames)
            for p, v in updates.items():
                if v is None:
                    entries.pop(p, None)
                else:
                    entries[p] = v
                    folders.add(_bid(p) or "")
    finally:
        index.unlink(missing_ok=True)
    return tip, sorted(renames.items())


def _fresh_id(repo: git.Repo, root: Path, bid: str, known: set[str]) -> str:
    """The next free id of the same model/platform/quarter, with a writer id of our own."""
    m, p, v = bid.split("/")
    period, _, writer = version_parts(v)  # type: ignore[misc]
    # The collision says our writer id is shared (a copied clone): draw another one.
    mine = store._writer(repo, root, avoid=frozenset({writer} if writer else ()))
    version = store._next_version(repo, m, p, period, mine, extra=known)
    return f"{m}/{p}/{version}"


def _renumbered_manifest(repo: git.Repo, sha: str, new_bid: str) -> str:
    data = json.loads(store._git(repo, "cat-file", "blob", sha))
    _, _, version = new_bid.split("/")
    data.update(id=new_bid, version=version)
    return _hash_blob(repo, json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def _hash_blob(repo: git.Repo, text: str) -> str:
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=repo.git_dir, delete=False) as f:
        f.write(text)
    try:
        return store._git(repo, "hash-object", "-w", "--", f.name)
    finally:
        os.unlink(f.name)


@contextlib.contextmanager
def _stdin(text: str, folder: str) -> Iterator[object]:
    with tempfile.TemporaryFile("w+b", dir=folder) as f:
        f.write(text.encode())
        f.seek(0)
        yield f


def _commit(repo: git.Repo, index: Path, c: str, parent: str, updates: dict[str, tuple[str, str] | None],
            renames: dict[str, str]) -> str:
    """Commit `c` again on `parent`: the same author, date and message (ids renamed), the files updated."""
    env = {"GIT_INDEX_FILE": str(index)}
    zero = "0" * len(parent)
    _git_with(repo, ["read-tree", parent], env)
    lines = "".join(f"{v[0]} {v[1]}\t{p}\0" if v else f"0 {zero}\t{p}\0" for p, v in updates.items())
    with _stdin(lines, repo.git_dir) as f:
        _git_with(repo, ["update-index", "-z", "--index-info"], env, istream=f)
    tree = _git_with(repo, ["write-tree"], env)
    name, email, date = store._git(repo, "log", "-1", "--format=%an%x00%ae%x00%ad", "--date=raw", c).split("\0")
    message = store._git(repo, "log", "-1", "--format=%B", c)
    for old, new in renames.items():
        if old in message:
            message = message.replace(old, new) + f"\n\nRenumbered from {old}: the remote already had that id."
    author = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
    return _git_with(repo, ["commit-tree", tree, "-p", parent, "-m", message], author)


def _git_with(repo: git.Repo, args: list[str], env: dict[str, str], istream: object = None) -> str:
    """store._git with extra environment (another index, an author) or input."""
    try:
        return repo.git.execute(["git", *args], env=env, istream=istream).strip()
    except git.GitCommandError as e:
        raise BaselineError(f"git {args[0]} failed in baseline store {repo.working_tree_dir}: "
                            f"{store._first_line(e)}; nothing was changed there") from None


def _retag(repo: git.Repo, renumbered: list[tuple[str, str]]) -> None:
    """Tags follow the rewritten commits (local tags only: none of them was on the remote)."""
    tags = store._tags(repo)
    committed = set(store._head_baselines(repo))
    for old, new in renumbered:
        commit = store._git(repo, "log", "-1", "--format=%H", "--diff-filter=A", "--", f"{new}/manifest.json")
        message = store._git(repo, "log", "-1", "--format=%B", commit)
        store._git(repo, "tag", "-a", "-m", message, new, commit)
        if old in tags:  # the remote's baseline of that id brings its own tag (_adopt_tags)
            store._git(repo, "tag", "-d", old)
    store._repoint_tags(repo, committed)


def _adopt_tags(repo: git.Repo, remote_tags: dict[str, str]) -> None:
    """The remote's tags into refs/tags where we have none of that name (ours are never overwritten)."""
    ours = store._tags(repo)
    new = [f"create refs/tags/{name} {obj}\n" for name, obj in sorted(remote_tags.items()) if name not in ours]
    if new:
        with _stdin("".join(new), repo.git_dir) as f:
            _git_with(repo, ["update-ref", "--stdin"], {}, istream=f)
