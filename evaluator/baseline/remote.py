"""A shared baseline remote: pull and push, so that hosts recording at once all keep their baselines.

In: a store spec naming a shared remote (a git URL or the path of a bare repository; its
clone comes from clone.py), or an opened `Store` whose folder has an `origin`. Out: `pull`
fetches and brings the clone up to the remote, with its tags, so baselines recorded on
other hosts are read by `list_baselines`, `load`, `previous`, `trend` and `diff`; `push`
does the same and then pushes the branch and the baselines' tags. Both return a `Sync`
saying what moved; `record_and_push` records and pushes in one step (`evaluate --push`).

How concurrent hosts are reconciled: fetch, rebase (rebase.py), push, and on a rejected
push (another host pushed first) fetch, rebase and push again, a bounded number of times
with jittered backoff. Never a force push and never a deleted remote ref: the branch only
fast-forwards and tags are only created. A failed push leaves every baseline recorded in
the clone and says how to retry.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import time

import git

from ..errors import BaselineError
from ..results import BaselineRef, RunResult
from . import plumbing, store
from .clone import NET_TIMEOUT_S, run_remote_git, git_reason, shared_store
from .lock import LOCK_TIMEOUT_S, locked
from .plumbing import REMOTE, REMOTE_TAGS
from .rebase import integrate, upstream_branch
from .store import Store, StoreLike

PUSH_ATTEMPTS = 8
BACKOFF_S = 0.25  # first wait after a rejected push; doubled each time, jittered, capped
BACKOFF_MAX_S = 8.0
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


def pull(spec: StoreLike, *, clone: str | os.PathLike | None = None, timeout: float = NET_TIMEOUT_S) -> Sync:
    """Fetch the remote and bring the clone up to it with its tags (fast-forward; unpushed local
    baselines are replayed on top, as `git pull --rebase` would). Nothing is pushed."""
    st = shared_store(spec, clone, create=False)
    branch = _fetch(st, timeout, "pull from")
    with locked(st.path, LOCK_TIMEOUT_S), plumbing.open_repo(st.path) as repo:
        done = integrate(repo, st.path, branch)
        return Sync(str(st.path), st.remote or "", branch, _head(repo), pulled=done.pulled, renumbered=done.renumbered)


def push(
    spec: StoreLike,
    *,
    clone: str | os.PathLike | None = None,
    attempts: int = PUSH_ATTEMPTS,
    backoff_s: float = BACKOFF_S,
    timeout: float = NET_TIMEOUT_S,
) -> Sync:
    """Fetch, rebase this clone's unpushed baselines onto the remote's branch and push the branch
    and their tags; when another host pushed first, do it again (at most `attempts` times)."""
    st = shared_store(spec, clone, create=True)
    pulled: list[str] = []
    renumbered: list[tuple[str, str]] = []
    why = ""
    for attempt in range(1, max(1, attempts) + 1):
        branch = _fetch(st, timeout, "push to")
        with locked(st.path, LOCK_TIMEOUT_S), plumbing.open_repo(st.path) as repo:
            done = integrate(repo, st.path, branch)
            pulled += done.pulled
            renumbered += done.renumbered
            head, upstream = _head(repo), upstream_branch(repo, branch)
            remote_tags = plumbing.tag_map(repo, REMOTE_TAGS)
            new_tags = sorted(b for b in _baselines_tagged(repo) if b not in remote_tags)
            refspecs = ([f"{head}:refs/heads/{branch}"] if head != upstream else []) + [
                f"refs/tags/{t}:refs/tags/{t}" for t in new_tags
            ]
            if not refspecs:
                return Sync(str(st.path), st.remote or "", branch, head, tuple(pulled), (), tuple(renumbered), attempt)
            # No "+" and no --force: the remote refuses anything that is not a fast-forward
            # or a new tag, which is exactly when we fetch and rebase again. Atomic, so the
            # branch and its tags land together; a server without atomic pushes updates each
            # ref on its own (a tag left behind is pushed by the next push).
            status, out, err = run_remote_git(
                ["push", "--atomic", "--porcelain", "--no-verify", REMOTE, *refspecs], st.path, timeout
            )
            if status != 0 and "does not support --atomic" in err:
                status, out, err = run_remote_git(
                    ["push", "--porcelain", "--no-verify", REMOTE, *refspecs], st.path, timeout
                )
            if status == 0:
                return Sync(
                    str(st.path),
                    st.remote or "",
                    branch,
                    head,
                    tuple(pulled),
                    tuple(new_tags),
                    tuple(renumbered),
                    attempt,
                )
            rejected = [ln for ln in out.splitlines() if ln.startswith("!")]
            if not rejected:  # never reached the refs: auth, network, a missing repository
                raise BaselineError(_push_failed(st, git_reason(err)))
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


def record_and_push(
    spec: StoreLike, result: RunResult, *, attempts: int = PUSH_ATTEMPTS, backoff_s: float = BACKOFF_S
) -> tuple[BaselineRef, Sync]:
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
    with plumbing.open_repo(st.path) as repo:
        return plumbing.baseline_ref(repo, st.path, bid, plumbing.tag_map(repo)), sync


def _push_failed(st: Store, why: str) -> str:
    return (
        f"could not push baselines to {st.remote}: {why}; they stay recorded in {st.path}; "
        f"retry with: evaluate baseline push --store {st.spec}"
    )


def _rejection(lines: list[str]) -> str:
    first = lines[0].split("\t")
    return f"{first[1] if len(first) > 1 else ''} {first[2] if len(first) > 2 else ''}".strip() or lines[0]


def _fetch(st: Store, timeout: float, verb: str) -> str:
    """Fetch the remote's branches and (into REMOTE_TAGS, apart from ours) its tags; the branch to sync."""
    with plumbing.open_repo(st.path) as repo:
        branch = _branch(repo)
    # Forced updates of our own remote-tracking refs, as any fetch does; the remote is only read.
    # Outside the store's lock (a slow network must not keep a finishing run from recording),
    # so two syncs of one clone may fetch at once: git then refuses one a ref lock, and that
    # one simply fetches again.
    for wait in (0.2, 0.5, 1.0, 0.0):
        status, _, err = run_remote_git(
            [
                "fetch",
                "--quiet",
                "--prune",
                "--no-tags",
                REMOTE,
                f"+refs/heads/*:refs/remotes/{REMOTE}/*",
                f"+refs/tags/*:{REMOTE_TAGS}*",
            ],
            st.path,
            timeout,
        )
        if status == 0 or not _LOCK_CONTENTION.search(err) or not wait:
            break
        time.sleep(wait * random.uniform(0.5, 1.5))
    if status != 0:
        msg = f"could not {verb} baseline store {st.remote}: {git_reason(err)}"
        if verb == "push to":
            raise BaselineError(
                f"{msg}; the baselines stay recorded in {st.path}; retry with: evaluate baseline push --store {st.spec}"
            )
        raise BaselineError(
            f"{msg}; check the network and your git credentials, or read the clone as it is ({st.path})"
        )
    return branch


def _branch(repo: git.Repo) -> str:
    """The remote branch the clone syncs with: its branch's upstream (set by clone), else its own name."""
    status, local, _ = repo.git.execute(
        ["git", "symbolic-ref", "-q", "--short", "HEAD"], with_extended_output=True, with_exceptions=False
    )
    if status != 0 or not local.strip():
        raise BaselineError(
            f"baseline store {repo.working_tree_dir} is not on a branch (detached HEAD); "
            f"check it out: git -C {repo.working_tree_dir} switch -"
        )
    merge = plumbing.git_config(repo, f"branch.{local.strip()}.merge")
    return merge[len("refs/heads/") :] if merge and merge.startswith("refs/heads/") else local.strip()


def _head(repo: git.Repo) -> str:
    return plumbing.run_git(repo, "rev-parse", "HEAD") if plumbing._head_valid(repo) else ""


def _baselines_tagged(repo: git.Repo) -> list[str]:
    tags = plumbing.tag_map(repo)
    return [b for b in plumbing.head_baselines(repo) if b in tags]
