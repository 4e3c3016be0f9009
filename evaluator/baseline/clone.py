"""A shared remote's spec, and the local clone every read and record of it works on.

In: a store spec (a git URL: `ssh://`, `git@host:path`, `https://`, `file://`, or the path
of a bare repository; or a folder, or an opened `Store`). Out: whether it names a shared
remote (`is_remote`), the URL git is given and its credential-free spelling (`redact`),
where its clone is kept (`clone_path`: the folder given, else
`~/.cache/evaluator/stores/<slug>`; `$EVALUATOR_STORE_CACHE` moves that cache), the clone
made once (`ensure_clone`, cloned aside and renamed, so an interrupted clone never passes
for a finished one) and opened as a `Store` (`open_remote`), and `_net`, every git command
that talks to the remote.

Authentication is whatever git already has (ssh keys and agent, credential helpers); nothing
is stored here, and git is run with prompts off (ssh in batch mode unless the user set
GIT_SSH_COMMAND or core.sshCommand) so a batch run fails in one line instead of hanging.
Every failure is one `BaselineError` line with git's reason, credentials hidden.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import urllib.parse
from pathlib import Path

from ..errors import BaselineError
from . import plumbing
from .ids import slug
from .plumbing import REMOTE, redact
from .local import MARKER, Store, StoreLike, folder_state, open_local

DEFAULT_CLONE_CACHE = Path("~/.cache/evaluator/stores")
CACHE_ENV = "EVALUATOR_STORE_CACHE"
NET_TIMEOUT_S = 300.0  # one clone, fetch or push; a dead host fails sooner (ssh ConnectTimeout, http low speed)

# `git@host:path` and `host:path` (git's scp-like syntax): a colon before any slash.
_SCP_RE = re.compile(r"^(?:[^@/\s]+@)?[^@/:\s]+:(?!//)")
_NET_OPTS = ["-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=60"]


def _spec_text(spec: str | os.PathLike) -> str:
    """The spec as text. A URL that went through pathlib lost a slash (`Path("ssh://h/x")` is
    `ssh:/h/x`, which git would read as host `ssh`); it gets it back."""
    text = os.fspath(spec).strip()
    m = re.match(r"^(ssh|git|https?|git\+ssh|ssh\+git|file):/(?!/)", text)
    if m and isinstance(spec, os.PathLike):
        rest = text[m.end() :]
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
    return (
        p.is_dir()
        and not (p / ".git").exists()
        and (p / "HEAD").is_file()
        and (p / "objects").is_dir()
        and (p / "refs").is_dir()
    )


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
        url = urllib.parse.unquote(url[len("file://") :])
    if "://" not in url and not _SCP_RE.match(url):
        return os.path.realpath(os.path.expanduser(url))
    return url


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
    env = {k: v for k, v in os.environ.items() if k not in plumbing.GIT_LOCATION_VARS}
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


def run_remote_git(args: list[str], root: Path | None, timeout: float) -> tuple[int, str, str]:
    """Run a git command that talks to the remote: (status, stdout, stderr); never hangs past
    `timeout` (its whole process group, ssh included, is killed) and never reads a terminal."""
    env = _ssh_env(_clean_env(), root)
    cmd = ["git", *_NET_OPTS, *(["-C", str(root)] if root else []), *args]
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            errors="replace",
            start_new_session=True,
        )
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


_NOISE = (
    "hint:",
    "cloning into",
    "to ",
    "from ",
    "please make sure you have the correct access rights",
    "and the repository exists",
    "fatal: could not read from remote repository",
    "error: failed to push some refs",
    "warning: you appear to have cloned an empty repository",
)


def git_reason(err: str) -> str:
    """git's reason in one line: 'Permission denied (publickey)', not the generic lines around it."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.lower().startswith(_NOISE)] or lines or ["no error output from git"]
    text = re.sub(r"^(fatal|error): ", "", useful[0])
    return redact(text)[:300]


def _read_origin(root: Path) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(root), "config", "--get", f"remote.{REMOTE}.url"],
        env=_clean_env(),
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def ensure_clone(spec: str | os.PathLike, clone: str | os.PathLike | None = None) -> Path:
    """The local clone of remote `spec`, cloned into `clone` (or the cache) the first time."""
    url = remote_url(spec)
    dest = Path(clone).expanduser().absolute() if clone else clone_path(url)
    if (dest / ".git").exists():
        origin = _read_origin(dest)
        if origin is None or _canonical(origin) != _canonical(url):
            raise BaselineError(
                f"{dest} is a clone of {redact(origin or 'nothing')}, not of {redact(url)}; "
                "pass another folder for the clone"
            )
        return dest
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BaselineError(
            f"{dest} exists and is not a clone of {redact(url)}; pass an empty or new folder for the clone"
        )
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=dest.parent))
    except OSError as e:
        raise BaselineError(
            f"cannot create the clone folder {dest.parent} ({e.strerror}); "
            "set EVALUATOR_STORE_CACHE to a writable folder"
        ) from None
    try:
        # Cloned aside and renamed: an interrupted clone never passes for a finished one,
        # and two runs cloning at once both end up with the one that was renamed first.
        status, _, err = run_remote_git(["clone", "--quiet", url, str(partial)], None, NET_TIMEOUT_S)
        if status != 0:
            raise BaselineError(
                f"cannot clone baseline store {redact(url)}: {git_reason(err)}; check the URL, "
                f"the network and your git credentials (git ls-remote {redact(url)})"
            )
        try:
            os.rename(partial, dest)  # also replaces an empty folder
        except OSError:
            if not (dest / ".git").exists():
                raise BaselineError(
                    f"cannot move the new clone into {dest}; pass another folder for the clone"
                ) from None
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
    state = folder_state(dest)
    if state == "store":
        return Store(dest, shown, _retry_spec(spec, dest))
    if state == "empty-repo":
        if not create:
            raise BaselineError(f"nothing was pushed to baseline store {shown} yet; record a run into it first")
        open_local(dest, create=True)
        return Store(dest, shown, _retry_spec(spec, dest))
    raise BaselineError(
        f"{shown} is a git repository but not a baseline store (no {MARKER}); "
        "pass --store with a shared baseline store or an empty repository"
    )


def remote_of(spec: StoreLike) -> str | None:
    """The shared remote a store spec syncs with (credentials hidden), None for a store of one's
    own; no network, nothing created (for checking `--push` before a run)."""
    if isinstance(spec, Store):
        return spec.remote or plumbing.origin_url(spec.path)
    if is_remote(spec):
        return redact(remote_url(spec))
    p = Path(os.fspath(spec)).expanduser().absolute()
    return plumbing.origin_url(p) if (p / ".git").exists() else None


def _retry_spec(spec: str | os.PathLike, dest: Path) -> str:
    """What a message tells the user to pass as --store: what they typed, unless it holds a
    credential (then the clone, whose origin already has it)."""
    text = _spec_text(spec)
    return text if redact(text) == text else str(dest)


def existing_clone(spec: str | os.PathLike) -> Path | None:
    """For readers: the clone's folder, or None when nothing was pushed to the remote yet."""
    dest = ensure_clone(spec)
    state = folder_state(dest)
    if state == "store":
        return dest
    if state == "empty-repo":
        return None
    raise BaselineError(
        f"{redact(remote_url(spec))} is a git repository but not a baseline store "
        f"(no {MARKER}); pass --store with a shared baseline store"
    )


def shared_store(spec: StoreLike, clone: str | os.PathLike | None, create: bool) -> Store:
    if isinstance(spec, Store):
        st = spec if spec.remote else Store(spec.path, plumbing.origin_url(spec.path), spec.spec)
    elif is_remote(spec):
        st = open_remote(spec, create=create, clone=clone) if create else _clone_for_pull(spec, clone)
    else:
        p = Path(os.fspath(spec)).expanduser().absolute()
        # A clone made while the remote was empty has nothing to open yet, but can be pulled into.
        st = (
            Store(p, plumbing.origin_url(p), os.fspath(spec))
            if not create and folder_state(p) == "empty-repo"
            else open_local(spec, create=create)
        )
    if not st.remote:
        raise BaselineError(
            f"baseline store {st.path} has no remote to sync with; pass --store with the shared "
            f"remote's URL, or add one: git -C {st.path} remote add {REMOTE} URL"
        )
    return st


def _clone_for_pull(spec: str | os.PathLike, clone: str | os.PathLike | None) -> Store:
    dest = ensure_clone(spec, clone)
    if folder_state(dest) not in ("store", "empty-repo"):
        return open_remote(spec, create=False, clone=clone)  # raises the refusal
    return Store(dest, redact(remote_url(spec)), _retry_spec(spec, dest))
