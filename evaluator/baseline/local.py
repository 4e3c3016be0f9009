"""The local baseline store: what a store folder is, and opening or creating one.

In: a folder (a path or a `Store`). Out: `folder_state` (store, missing, empty, a git repository
that is not a store, a bare repository, a file...), `refusal` (the one line saying why a
folder cannot be a store and what to pass instead), `open_local` (the `Store` at a folder,
initialised with its marker, .gitignore, README and first commit when missing or empty,
under the store's lock) and the names of the files and folders a store holds. store.py
builds on this for every store, clone.py for the local clone of a shared remote.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Union

import git

from .. import __version__
from ..errors import BaselineError
from ..results import SCHEMA_VERSION
from .lock import LOCK_NAME, LOCK_TIMEOUT_S, locked
from .plumbing import GIT_LOCATION_VARS, first_line, origin_url, prepare_repo, run_git

MARKER = ".evaluator-store"  # tells a store apart from any other git repository
TMP_PREFIX = ".tmp-"
TUNING_DIR = "_tuning"  # the tuning cache (evaluator/tuning_cache.py); committed with the next baseline
META_FILES = (MARKER, ".gitignore", "README.md")  # written once, when the store is created
_GITIGNORE = f"/{LOCK_NAME}\n/{TMP_PREFIX}*\n"
_README = """# Baseline store

Written by `evaluate` (package `evaluator`). One folder, commit and annotated tag per run:
`<model>/<platform>/<version>/` with manifest.json, result.json and CSV tables; tuned
kernel configs live under `_tuning/`, keyed by toolchain. Push to a shared remote to
collect baselines from several machines; `evaluate baseline list --store PATH` lists them.
"""

StoreLike = Union[str, os.PathLike, "Store"]


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


def folder_state(p: Path) -> str:
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


def refusal(p: Path, state: str) -> str:
    return {
        "file": f"baseline store {p} is a file; pass --store with a folder (new or an existing store)",
        "foreign-repo": f"{p} is a git repository but not a baseline store (no {MARKER}); "
        "pass --store with a new folder or an existing store",
        "bare": f"{p} is a bare git repository; clone it (git clone {p} DIR) and pass the clone with --store",
        "foreign": f"{p} exists and is not a baseline store; pass --store with a new or empty folder "
        "or an existing store",
        "missing": f"there is no baseline store at {p}; record a run first or pass --store with the store's path",
    }[state]


def open_local(path: StoreLike, *, create: bool = True) -> Store:
    """The local store at `path`, initialised (git repo, marker, first commit) when missing
    or empty; a folder that is something else is refused with one line saying what to pass."""
    p = Path(os.fspath(path)).expanduser().absolute()
    state = folder_state(p)
    if state == "foreign-repo" and create and (p / LOCK_NAME).exists():
        # Another first run may be initialising this folder right now (its git repository
        # exists, its marker not yet): wait for its lock and look again.
        with locked(p, LOCK_TIMEOUT_S):
            state = folder_state(p)
    if state == "store":
        return Store(p, origin_url(p), os.fspath(path))
    if state in ("empty", "empty-repo", "missing") and create:
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BaselineError(
                f"cannot create baseline store {p}: {e.strerror}; pass --store with a writable folder"
            ) from None
        # Two first runs can race to initialise the same folder; the lock makes one do it.
        with locked(p, LOCK_TIMEOUT_S):
            state = folder_state(p)
            if state in ("empty", "empty-repo"):
                _initialise(p)
            elif state != "store":
                raise BaselineError(refusal(p, state))
        return Store(p, origin_url(p), os.fspath(path))
    if state in ("empty", "empty-repo"):
        raise BaselineError(f"{p} is not initialised as a baseline store yet; record a run into it first")
    raise BaselineError(refusal(p, state))


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
        env = {k: v for k, v in os.environ.items() if k not in GIT_LOCATION_VARS}
        try:
            done = subprocess.run(["git", "init", "-q", str(p)], env=env, capture_output=True, text=True)
        except OSError as e:
            raise BaselineError(
                f"cannot run git to create the baseline store at {p} ({e.strerror}); install git"
            ) from None
        if done.returncode != 0:
            why = (done.stderr.strip() or "git init failed").splitlines()[0]
            raise BaselineError(f"cannot create a git repository at {p} ({why}); check that the folder is writable")
    try:
        repo = git.Repo(p)
    except git.GitError as e:
        raise BaselineError(
            f"cannot open the new git repository at {p} ({first_line(e)}); "
            "check that git is installed and the folder is writable"
        ) from None
    with repo:
        prepare_repo(repo)
        (p / ".gitignore").write_text(_GITIGNORE)
        (p / "README.md").write_text(_README)
        (p / MARKER).write_text(
            json.dumps(
                {"kind": "evaluator-baseline-store", "created_by": __version__, "schema_version": SCHEMA_VERSION},
                indent=2,
            )
            + "\n"
        )
        run_git(repo, "add", "--", ".gitignore", "README.md", MARKER)
        run_git(repo, "commit", "-q", "--no-verify", "-m", "Create baseline store")
