"""Bringing a clone onto its remote's branch without losing a local baseline: the rebase.

In: the clone's repository, under the store's lock, after a fetch (remote.py): the remote's
branch in refs/remotes and its tags in REMOTE_TAGS. Out: the clone's branch on top of the
remote's, with every baseline recorded here replayed onto it, the remote's tags adopted,
and what it pulled and renumbered (`_Integrated`); or one BaselineError naming a path both
sides changed, and the branch where it was.

The rebase replays this clone's unpushed commits onto the remote's branch one by one (git
plumbing, no work-tree merge), so it cannot stop half way: baseline folders are distinct
because ids are unique per writer (ids.py); a tuned config both sides saved keeps the
remote's copy (it is a cache, and hosts then agree); the store's own files (marker,
README) keep the remote's; a baseline whose id the remote already has is renumbered
(ids.py). Tuned configs saved since the last baseline are committed first, so they travel
too. The new commits are built aside and the branch moves once, at the end; the local
tags follow them. Anything else both sides changed is refused with the path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

import git

from ..errors import BaselineError
from . import plumbing, store
from .ids import VERSION_RE, version_parts
from .plumbing import REMOTE, REMOTE_TAGS
from .local import META_FILES, TUNING_DIR

_TUNING_COMMIT = "Tuning configs saved since the last baseline"


def upstream_branch(repo: git.Repo, branch: str) -> str | None:
    ref = f"refs/remotes/{REMOTE}/{branch}^{{commit}}"
    status, out, _ = repo.git.execute(
        ["git", "rev-parse", "-q", "--verify", ref], with_extended_output=True, with_exceptions=False
    )
    return out.strip() if status == 0 and out.strip() else None


@dataclasses.dataclass(frozen=True)
class _Integrated:
    pulled: tuple[str, ...] = ()
    renumbered: tuple[tuple[str, str], ...] = ()


def integrate(repo: git.Repo, root: Path, branch: str) -> _Integrated:
    """Under the lock: bring the clone onto the fetched remote branch, keeping every local baseline."""
    store._recover(repo, root)
    upstream = upstream_branch(repo, branch)
    remote_tags = plumbing.tag_map(repo, REMOTE_TAGS, objects=True)
    if upstream is None:  # an empty remote: whatever we have goes up as it is
        return _Integrated()
    if not plumbing._head_valid(repo):  # a clone made while the remote was empty
        plumbing.run_git(repo, "checkout", "-q", "-B", _local_branch(repo), upstream)
        _adopt_tags(repo, remote_tags)
        return _Integrated(pulled=tuple(sorted(plumbing.head_baselines(repo))))
    _commit_pending_tuning(repo)
    before = set(plumbing.head_baselines(repo))
    old = plumbing.run_git(repo, "rev-parse", "HEAD")
    ours = plumbing.tag_map(repo, objects=True)
    # A remote tag of a name we recorded here is another baseline only when it is another object.
    foreign = {name for name, obj in remote_tags.items() if ours.get(name) != obj}
    renumbered: list[tuple[str, str]] = []
    if old != upstream and _is_ancestor(repo, old, upstream):
        plumbing.run_git(repo, "reset", "-q", "--keep", upstream)  # fast-forward
    elif old != upstream:
        local = plumbing.run_git(repo, "rev-list", "--reverse", "--first-parent", f"{upstream}..{old}").split()
        collide = [b for b in _added(repo, local) if b in foreign or _has_folder(repo, upstream, b)]
        if not _is_ancestor(repo, upstream, old) or collide:
            tip, renumbered = _replay(repo, root, upstream, local, foreign)
            if tip != old:
                # --keep: refuses rather than overwrite anything uncommitted in the work tree.
                try:
                    plumbing.run_git(repo, "reset", "-q", "--keep", tip)
                except BaselineError as e:
                    raise BaselineError(
                        f"could not bring {root} onto the remote's baselines ({e}); "
                        "nothing was lost; commit or remove what `git status` shows there"
                    ) from None
            _retag(repo, renumbered)
    _adopt_tags(repo, remote_tags)
    after = set(plumbing.head_baselines(repo))
    mine = {new for _, new in renumbered}
    return _Integrated(pulled=tuple(sorted(after - before - mine)), renumbered=tuple(renumbered))


def _local_branch(repo: git.Repo) -> str:
    return plumbing.run_git(repo, "symbolic-ref", "--short", "HEAD")


def _is_ancestor(repo: git.Repo, a: str, b: str) -> bool:
    status, _, _ = repo.git.execute(
        ["git", "merge-base", "--is-ancestor", a, b], with_extended_output=True, with_exceptions=False
    )
    return status == 0


def _has_folder(repo: git.Repo, commit: str, bid: str) -> bool:
    return bool(plumbing.run_git(repo, "ls-tree", "--name-only", commit, "--", bid))


def _bid(path: str) -> str | None:
    parts = path.split("/")
    if len(parts) >= 4 and parts[0][:1] not in "._" and VERSION_RE.match(parts[2]):
        return "/".join(parts[:3])
    return None


def _added(repo: git.Repo, commits: list[str]) -> list[str]:
    """Baselines the given commits add (their manifest appears)."""
    return [
        b
        for c in commits
        for ch in _changes(repo, c)
        if ch.status == "A" and (b := _bid(ch.path)) and ch.path == f"{b}/manifest.json"
    ]


def _commit_pending_tuning(repo: git.Repo) -> None:
    """Tuned configs saved since the last baseline are committed first: they travel with the
    push, and the work tree is clean for the rebase (a remote copy of the same config would
    otherwise collide with the uncommitted file)."""
    if plumbing.run_git(repo, "status", "--porcelain", "--untracked-files=all", "--", TUNING_DIR):
        plumbing.run_git(repo, "add", "--all", "--", TUNING_DIR)
        plumbing.run_git(repo, "commit", "-q", "--no-verify", "-m", _TUNING_COMMIT, "--", TUNING_DIR)


@dataclasses.dataclass(frozen=True)
class _Change:
    old_mode: str
    new_mode: str
    old_sha: str
    new_sha: str
    status: str
    path: str


def _changes(repo: git.Repo, commit: str) -> list[_Change]:
    parents = plumbing.run_git(repo, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    args = ["diff-tree", "-r", "-z", "--no-renames", "--no-commit-id"]
    text = (
        plumbing.run_git(repo, *args, "--root", commit)
        if not parents
        else plumbing.run_git(repo, *args, parents[0], commit)
    )
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
    for line in plumbing.run_git(repo, "ls-tree", "-r", "-z", "--full-tree", commit).split("\0"):
        if line:
            meta, path = line.split("\t", 1)
            mode, _, sha = meta.split()
            out[path] = (mode, sha)
    return out


def _replay(
    repo: git.Repo, root: Path, upstream: str, commits: list[str], remote_tags: set[str]
) -> tuple[str, list[tuple[str, str]]]:
    """Replay `commits` (oldest first) onto `upstream`: the new tip and the baselines renumbered.

    Per file, three ways: the commit's parent (base), the commit (mine), the tip so far
    (theirs). Theirs unchanged from base: take mine. Already equal: nothing to do. Both
    changed: a tuned config or the store's own files keep theirs; a new baseline folder the
    remote already has moves to a fresh id; anything else is refused.
    """
    tip = upstream
    entries = _tree(repo, upstream)
    folders = {b for p in entries if (b := _bid(p))}
    known = plumbing.known_ids(repo) | folders
    renames: dict[str, str] = {}
    index = Path(repo.git_dir) / f"evaluator-replay-{uuid.uuid4().hex}.index"
    try:
        for c in commits:
            changes = _changes(repo, c)
            for ch in changes:
                b = _bid(ch.path)
                if (
                    b
                    and ch.status == "A"
                    and ch.path == f"{b}/manifest.json"
                    and b not in renames
                    and (b in remote_tags or b in folders)
                ):
                    renames[b] = _fresh_id(repo, root, b, known)
                    known.add(renames[b])
            updates: dict[str, tuple[str, str] | None] = {}
            for ch in changes:
                b = _bid(ch.path)
                path, sha = ch.path, ch.new_sha
                if b in renames:
                    path = renames[b] + ch.path[len(b) :]
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
                    raise BaselineError(
                        f"{path} was changed both in {root} (commit {c[:10]}) and on the remote; "
                        f"nothing was changed; reconcile it by hand in {root} and retry"
                    )
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
    mine = plumbing.writer_name(repo, root, avoid=frozenset({writer} if writer else ()))
    version = store._next_version(repo, m, p, period, mine, extra=known)
    return f"{m}/{p}/{version}"


def _renumbered_manifest(repo: git.Repo, sha: str, new_bid: str) -> str:
    data = json.loads(plumbing.run_git(repo, "cat-file", "blob", sha))
    _, _, version = new_bid.split("/")
    data.update(id=new_bid, version=version)
    return _hash_blob(repo, json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def _hash_blob(repo: git.Repo, text: str) -> str:
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=repo.git_dir, delete=False) as f:
        f.write(text)
    try:
        return plumbing.run_git(repo, "hash-object", "-w", "--", f.name)
    finally:
        os.unlink(f.name)


@contextlib.contextmanager
def _stdin(text: str, folder: str) -> Iterator[object]:
    with tempfile.TemporaryFile("w+b", dir=folder) as f:
        f.write(text.encode())
        f.seek(0)
        yield f


def _commit(
    repo: git.Repo,
    index: Path,
    c: str,
    parent: str,
    updates: dict[str, tuple[str, str] | None],
    renames: dict[str, str],
) -> str:
    """Commit `c` again on `parent`: the same author, date and message (ids renamed), the files updated."""
    env = {"GIT_INDEX_FILE": str(index)}
    zero = "0" * len(parent)
    _git_with(repo, ["read-tree", parent], env)
    lines = "".join(f"{v[0]} {v[1]}\t{p}\0" if v else f"0 {zero}\t{p}\0" for p, v in updates.items())
    with _stdin(lines, repo.git_dir) as f:
        _git_with(repo, ["update-index", "-z", "--index-info"], env, istream=f)
    tree = _git_with(repo, ["write-tree"], env)
    name, email, date = plumbing.run_git(repo, "log", "-1", "--format=%an%x00%ae%x00%ad", "--date=raw", c).split("\0")
    message = plumbing.run_git(repo, "log", "-1", "--format=%B", c)
    for old, new in renames.items():
        if old in message:
            message = message.replace(old, new) + f"\n\nRenumbered from {old}: the remote already had that id."
    author = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
    return _git_with(repo, ["commit-tree", tree, "-p", parent, "-m", message], author)


def _git_with(repo: git.Repo, args: list[str], env: dict[str, str], istream: object = None) -> str:
    """plumbing.run_git with extra environment (another index, an author) or input."""
    try:
        return repo.git.execute(["git", *args], env=env, istream=istream).strip()
    except git.GitCommandError as e:
        raise BaselineError(
            f"git {args[0]} failed in baseline store {repo.working_tree_dir}: "
            f"{plumbing.first_line(e)}; nothing was changed there"
        ) from None


def _retag(repo: git.Repo, renumbered: list[tuple[str, str]]) -> None:
    """Tags follow the rewritten commits (local tags only: none of them was on the remote)."""
    tags = plumbing.tag_map(repo)
    committed = set(plumbing.head_baselines(repo))
    for old, new in renumbered:
        commit = plumbing.run_git(repo, "log", "-1", "--format=%H", "--diff-filter=A", "--", f"{new}/manifest.json")
        message = plumbing.run_git(repo, "log", "-1", "--format=%B", commit)
        plumbing.run_git(repo, "tag", "-a", "-m", message, new, commit)
        if old in tags:  # the remote's baseline of that id brings its own tag (_adopt_tags)
            plumbing.run_git(repo, "tag", "-d", old)
    plumbing.repoint_tags(repo, committed)


def _adopt_tags(repo: git.Repo, remote_tags: dict[str, str]) -> None:
    """The remote's tags into refs/tags where we have none of that name (ours are never overwritten)."""
    ours = plumbing.tag_map(repo)
    new = [f"create refs/tags/{name} {obj}\n" for name, obj in sorted(remote_tags.items()) if name not in ours]
    if new:
        with _stdin("".join(new), repo.git_dir) as f:
            _git_with(repo, ["update-ref", "--stdin"], {}, istream=f)
