"""Git in a baseline store: running it, reading refs and committed files, the writer id.

In: an opened store's folder (store.py opens and creates it; remote.py, clone.py and
rebase.py work on the same repository). Out: `_repo`, the store's repository with git
pinned to it (a caller's GIT_DIR and the like cannot redirect it) and an identity where
the machine has none; `_git`, one command whose failure is a one-line BaselineError; the
store's config and shared remote; `_damage`, what keeps the repository from taking a
baseline (a HEAD that names no commit, objects missing from its history); the baselines
HEAD holds, the tags and the remote's tags as last fetched; this clone's writer id
(ids.py); the tags moved back onto the branch; a committed JSON file; a baseline's
`BaselineRef`. Only committed state is read: a baseline counts once its commit exists.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import socket
from pathlib import Path
from typing import Any, Iterator

import git

from ..errors import BaselineError
from ..results import BaselineRef
from .ids import VERSION_RE, WRITER_RE, version_parts

REMOTE = "origin"  # the shared remote of a clone
REMOTE_TAGS = "refs/evaluator/remote-tags/"  # the remote's tags as last fetched (remote.py)
# This clone's writer id (ids.py) and where it was drawn (host, folder, .git inode), so a
# clone copied elsewhere draws its own.
WRITER_KEY, WRITER_AT_KEY = "evaluator.writer", "evaluator.writerat"

# Variables that point git at another repository (exported inside git hooks, for one).
GIT_LOCATION_VARS = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_COMMON_DIR",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_PREFIX",
    }
)


@contextlib.contextmanager
def open_repo(root: Path) -> Iterator[git.Repo]:
    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BaselineError(f"{root} is not a git repository; pass --store with a baseline store") from None
    try:
        prepare_repo(repo)
        yield repo
    finally:
        repo.close()


def prepare_repo(repo: git.Repo) -> None:
    env = {
        # A caller running inside another repository's hook may export these; pin them so
        # every command below acts on the store and nothing else.
        "GIT_DIR": str(repo.git_dir),
        "GIT_WORK_TREE": str(repo.working_tree_dir),
        "GIT_INDEX_FILE": str(Path(repo.git_dir) / "index"),
    }
    common = Path(repo.common_dir)
    pinned = {"GIT_OBJECT_DIRECTORY": str(common / "objects"), "GIT_COMMON_DIR": str(common)}
    env.update({k: pinned.get(k, "") for k in GIT_LOCATION_VARS if k in os.environ and k not in env})
    repo.git.update_environment(**env)
    try:
        repo.git.var("GIT_COMMITTER_IDENT")
    except git.GitCommandError:
        # Locked-down GPU boxes often have no git identity; a baseline must still be recorded.
        who = {
            "GIT_AUTHOR_NAME": "evaluator",
            "GIT_COMMITTER_NAME": "evaluator",
            "GIT_AUTHOR_EMAIL": f"evaluator@{socket.gethostname() or 'localhost'}",
        }
        who["GIT_COMMITTER_EMAIL"] = who["GIT_AUTHOR_EMAIL"]
        repo.git.update_environment(**who)


def first_line(e: BaseException) -> str:
    if isinstance(e, git.GitCommandError):
        text = (e.stderr or e.stdout or "").strip().replace("stderr: ", "").strip("' \n")
        text = text or str(e)
    else:
        text = str(e)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


def run_git(repo: git.Repo, *args: str) -> str:
    try:
        return repo.git.execute(["git", *args])
    except git.GitCommandError as e:
        raise BaselineError(
            f"git {args[0]} failed in baseline store {repo.working_tree_dir}: {first_line(e)}; "
            f"check it with `git -C {repo.working_tree_dir} status`"
        ) from None


def git_config(repo: git.Repo, key: str) -> str | None:
    """One value of the store's git config (local, global or system), None when unset."""
    status, out, _ = repo.git.execute(["git", "config", "--get", key], with_extended_output=True, with_exceptions=False)
    return out.strip() if status == 0 and out.strip() else None


def redact(text: str) -> str:
    """URLs with credentials hidden: `https://user:token@host` -> `https://***@host`."""

    def hide(m: re.Match) -> str:
        scheme, user = m.group(1), m.group(2)
        return f"{scheme}***@" if ":" in user or scheme.startswith("http") else m.group(0)

    return re.sub(r"([a-zA-Z][a-zA-Z0-9+.-]*://)([^/@\s]+)@", hide, str(text))


def origin_url(root: Path) -> str | None:
    """The URL of the store's shared remote (credentials hidden), None for a store of one's own."""
    with contextlib.suppress(Exception), open_repo(root) as repo:
        url = git_config(repo, f"remote.{REMOTE}.url")
        return redact(url) if url else None
    return None


def find_damage(root: Path) -> str | None:
    """What makes the store's repository unusable, in words, or None: read-only and cheap
    (HEAD resolved, and `git fsck --connectivity-only`, which walks commits and trees but
    reads no file contents). A store must be a whole repository; a new one has a first commit."""
    try:
        repo = git.Repo(root)
    except git.GitError as e:
        head = Path(root) / ".git" / "HEAD"
        text = head.read_text(errors="replace").strip() if head.is_file() else ""
        if head.is_file() and not (text.startswith("ref: refs/") or re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", text)):
            return f"its .git/HEAD names neither a branch nor a commit (it holds {text[:40]!r})"
        return f"git cannot open it ({first_line(e)})"
    with repo:
        prepare_repo(repo)
        status, out, err = repo.git.execute(
            ["git", "rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
            with_extended_output=True,
            with_exceptions=False,
        )
        if status != 0:
            _, branch, _ = repo.git.execute(
                ["git", "symbolic-ref", "--quiet", "--short", "HEAD"], with_extended_output=True, with_exceptions=False
            )
            return f"its HEAD{f' (branch {branch.strip()})' if branch.strip() else ''} does not point at a commit"
        status, out, err = repo.git.execute(
            ["git", "fsck", "--connectivity-only", "--no-dangling", "--no-progress"],
            with_extended_output=True,
            with_exceptions=False,
        )
        if status != 0:
            lines = [ln.strip() for ln in f"{out}\n{err}".splitlines() if ln.strip()]
            missing = [ln for ln in lines if ln.startswith("missing ")]
            if missing:
                first = " ".join(missing[0].split()[:3])  # "missing tree <id>"
                many = f"{len(missing)} objects are" if len(missing) > 1 else "1 object is"
                return f"{many} missing from its history ({first})"
            return f"git fsck finds it broken ({lines[0] if lines else f'exit {status}'})"
    return None


def _head_valid(repo: git.Repo) -> bool:
    try:
        return repo.head.is_valid()
    except Exception:
        return False


def head_baselines(repo: git.Repo) -> list[str]:
    """Folders `<model>/<platform>/<version>` that HEAD holds a manifest for."""
    if not _head_valid(repo):
        return []
    out = []
    for line in run_git(repo, "ls-tree", "-r", "--name-only", "-z", "HEAD").split("\0"):
        parts = line.split("/")
        if len(parts) == 4 and parts[3] == "manifest.json" and parts[0][:1] not in "._" and VERSION_RE.match(parts[2]):
            out.append("/".join(parts[:3]))
    return out


def tag_map(repo: git.Repo, namespace: str = "refs/tags/", *, objects: bool = False) -> dict[str, str]:
    """tag name -> the commit it points at (or, with objects=True, the tag object itself)."""
    out = {}
    text = run_git(repo, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(*objectname)", namespace.rstrip("/"))
    for line in text.splitlines():
        name, obj, peeled = (line.split("\0") + ["", ""])[:3]
        out[name[len(namespace) :]] = obj if objects else (peeled or obj)
    return out


def known_ids(repo: git.Repo) -> set[str]:
    """Every baseline id this clone knows of: its branch, its tags and the remote's tags as last fetched."""
    return {*head_baselines(repo), *tag_map(repo), *tag_map(repo, REMOTE_TAGS)}


def writer_name(repo: git.Repo, root: Path, *, avoid: frozenset[str] = frozenset()) -> str:
    """This clone's writer id (ids.py), drawn once and kept in its git config.

    Drawn again when the clone was copied to another host or folder (a copy must not share
    its original's ids) or when `avoid` names it (it collided on the remote); a new one
    differs from every writer already seen in the ids this clone knows.
    """
    where = f"{socket.gethostname()}\0{os.path.realpath(root)}\0{os.stat(repo.git_dir).st_ino}"
    here = hashlib.sha256(where.encode()).hexdigest()[:16]
    current = git_config(repo, WRITER_KEY)
    if current and WRITER_RE.match(current) and git_config(repo, WRITER_AT_KEY) == here and current not in avoid:
        return current
    seen = set(avoid) | {
        parts[2] for bid in known_ids(repo) if (parts := version_parts(bid.rsplit("/", 1)[-1])) and parts[2]
    }
    writer = secrets.token_hex(3)
    while writer in seen:
        writer = secrets.token_hex(3)
    run_git(repo, "config", WRITER_KEY, writer)
    run_git(repo, "config", WRITER_AT_KEY, here)
    return writer


def repoint_tags(repo: git.Repo, committed: set[str]) -> None:
    """Move baseline tags left on commits no longer in the branch (a rebase onto the remote
    rewrote them; a crash came before the tags followed) to the commit that added the
    baseline now. Local tags only: a tag on a rewritten commit was never pushed."""
    if not _head_valid(repo):
        return
    stale = run_git(repo, "for-each-ref", "--no-merged", "HEAD", "--format=%(refname:strip=2)", "refs/tags")
    for bid in stale.splitlines():
        if bid in committed:
            commit = run_git(repo, "log", "-1", "--format=%H", "--diff-filter=A", "--", f"{bid}/manifest.json")
            message = run_git(repo, "for-each-ref", "--format=%(contents)", f"refs/tags/{bid}") or f"baseline {bid}"
            if commit:
                run_git(repo, "tag", "-f", "-a", "-m", message, bid, commit)


def read_json(repo: git.Repo, path: str, what: str) -> dict[str, Any] | None:
    """A JSON object from HEAD's tree (not the work tree: only committed baselines count)."""
    try:
        raw = (repo.head.commit.tree / path).data_stream.read()
    except (KeyError, ValueError):
        return None
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise BaselineError(
            f"{what} {path} in store {repo.working_tree_dir} is not valid JSON ({e}); "
            "restore it with git checkout or remove that baseline"
        ) from None
    if not isinstance(data, dict):
        raise BaselineError(
            f"{what} {path} in store {repo.working_tree_dir} is not a JSON object; "
            "restore it with git checkout or remove that baseline"
        )
    return data


def baseline_ref(repo: git.Repo, root: Path, bid: str, tags: dict[str, str]) -> BaselineRef:
    """The ref of a committed baseline; its commit from the tag, or from history when the tag is missing."""
    m, p, v = bid.split("/")
    commit = tags[bid] if bid in tags else run_git(repo, "log", "-1", "--format=%H", "--", f"{bid}/manifest.json")
    return BaselineRef(
        store=str(root), model=m, platform=p, version=v, path=bid, commit=commit, tag=bid if bid in tags else ""
    )
