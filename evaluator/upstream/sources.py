"""Where a repository comes from: a local folder, or a URL cloned bare into a cache.

In: the spec the user typed (a path, a URL, or for a fork "PATH#BRANCH"), its role
("upstream", "fork"), the cache folder and the option it was given with. Out: an open
`GitRepo`, plus notes (appended to the caller's list) when a cached clone could not be
refreshed. Failures are one-line `UpstreamError`s naming the option. A remote must list
its refs within PROBE_TIMEOUT_S before anything is cloned, so a dead or firewalled host
fails in seconds; a clone of TileLang then takes well under a minute on a normal link,
and the low-speed limit aborts a stalled transfer long before the CLONE_TIMEOUT_S ceiling.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import git
from git.exc import InvalidGitRepositoryError, NoSuchPathError

from evaluator.errors import UpstreamError

from .gitcmd import GitRepo, call_git, one_line

PROBE_TIMEOUT_S = 30.0
CLONE_TIMEOUT_S = 600.0
_NET_OPTS = ["-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=60"]


def is_url(spec: str) -> bool:
    return "://" in spec or spec.startswith("git@") or bool(re.match(r"^[\w.-]+@[\w.-]+:", spec))


def split_branch(spec: str) -> tuple[str, str | None]:
    """'PATH#BRANCH' -> (PATH, BRANCH), unless a path with that '#' really exists."""
    if "#" in spec and not Path(spec).expanduser().exists():
        base, _, br = spec.rpartition("#")
        if base and br:
            return base, br
    return spec, None


def open_repo(spec: str, role: str, cache: Path, notes: list[str], flag: str) -> GitRepo:
    """`flag`: the option the user passed `spec` with, so the message names what they typed."""
    if is_url(spec):
        path = _materialize(spec, role, cache, notes)
        return GitRepo(git.Repo(path), spec, role, from_url=True)
    path = Path(spec).expanduser()
    if not path.exists():
        raise UpstreamError(f"{role} path {spec} does not exist; pass {flag} a local clone or a URL")
    if not path.is_dir():
        raise UpstreamError(f"{role} path {spec} is a file, not a repository; pass {flag} the folder of a clone")
    try:
        # No search upwards: a plain folder inside some other checkout must not be
        # mistaken for the repository the user meant.
        repo = git.Repo(path)
    except (InvalidGitRepositoryError, NoSuchPathError):
        raise UpstreamError(
            f"{role} path {spec} is not a git repository; pass {flag} the top folder of a clone "
            "(the one holding .git) or a URL"
        ) from None
    return GitRepo(repo, str(path.resolve()), role)


def _cache_name(url: str) -> str:
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", re.sub(r"^[a-z+]+://", "", url)).strip("_")[-60:]
    return f"{tail}-{hashlib.sha1(url.encode()).hexdigest()[:10]}.git"


def _network_env() -> dict[str, str]:
    env = {"GIT_TERMINAL_PROMPT": "0"}  # a credential prompt would hang a batch run
    if "GIT_SSH_COMMAND" not in os.environ:
        env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes -o ConnectTimeout=20"
    return env


def _net(g: git.Git, args: list[str], timeout: float) -> str | None:
    """Run a network git command; None when it worked, else why not in a few words."""
    status, _, err = call_git(g, [*_NET_OPTS, *args], env=_network_env(), timeout=timeout)
    if status == 0:
        return None
    if "Timeout:" in err or "timed out" in err:
        return f"no answer within {timeout:g} s"
    return one_line(err)


def _materialize(url: str, role: str, cache: Path, notes: list[str]) -> Path:
    """A bare clone of `url` in the cache: cloned the first time, fetched afterwards."""
    dest = cache / _cache_name(url)
    if (dest / "HEAD").exists():
        _refresh(url, dest, notes)
        return dest
    g = git.Git()
    why = _net(g, ["ls-remote", "--heads", url], PROBE_TIMEOUT_S)
    if why:
        raise UpstreamError(
            f"could not clone {role} {url}: {why}; check the URL and the network, or pass a local clone instead"
        )
    try:
        cache.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=cache))
    except OSError as e:
        raise UpstreamError(
            f"cannot create the clone cache {cache} ({e.strerror}); pass a writable cache folder"
        ) from None
    try:
        # Cloned into a scratch folder and renamed, so an interrupted clone never
        # passes for a cached one.
        why = _net(g, ["clone", "--bare", "--quiet", url, str(partial)], CLONE_TIMEOUT_S)
        if why:
            raise UpstreamError(
                f"could not clone {role} {url}: {why}; check the URL and the network, or pass a local clone instead"
            )
        try:
            partial.rename(dest)
        except OSError:
            if not (dest / "HEAD").exists():
                raise
        return dest
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)


def _refresh(url: str, dest: Path, notes: list[str]) -> None:
    """Fetch into a cached clone; when the remote cannot be reached, note how old the copy is."""
    g = git.Git()
    why = _net(g, ["ls-remote", "--heads", url], PROBE_TIMEOUT_S) or _net(
        g,
        ["-C", str(dest), "fetch", "--quiet", "--prune", "--tags", "origin", "+refs/heads/*:refs/heads/*"],
        CLONE_TIMEOUT_S,
    )
    if why:
        when = datetime.fromtimestamp((dest / "HEAD").stat().st_mtime, timezone.utc)
        for ref in (dest / "FETCH_HEAD", dest / "packed-refs"):
            if ref.exists():
                when = max(when, datetime.fromtimestamp(ref.stat().st_mtime, timezone.utc))
        notes.append(
            f"could not refresh the cached clone of {url} ({why}); used the copy last updated {when.date().isoformat()}"
        )
