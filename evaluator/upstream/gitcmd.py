"""Running git in a repository opened for reading.

In: a gitpython `Repo` and the label and role ("upstream", "fork") the user knows it by.
Out: `GitRepo`, whose `run` returns a git command's stdout as text (invalid UTF-8
replaced) or raises an `UpstreamError` naming the repository, and whose `call` returns
(status, stdout, stderr) for commands whose failure is an answer. Every git command of
the upstream measurement goes through `call_git`, with a timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import git

from evaluator.errors import UpstreamError

GIT_TIMEOUT_S = 300.0


@dataclass
class GitRepo:
    """A repository opened for reading, with the label the user knows it by."""

    repo: git.Repo
    label: str
    role: str
    from_url: bool = False  # fetched just now into the cache, so as fresh as the remote

    def __post_init__(self) -> None:
        # gitpython takes a bare repository without a config file (as some mirrors are)
        # for a work tree's .git and would run git in its parent folder; run git inside
        # the git folder unless a work tree really points at it.
        tree = self.repo.working_tree_dir
        self.bare = self.repo.bare or tree is None or not (Path(tree) / ".git").exists()
        self.git = git.Git(self.repo.git_dir if self.bare else tree)

    def close(self) -> None:
        self.repo.close()

    @property
    def objects_dir(self) -> Path:
        return Path(self.repo.common_dir) / "objects"

    @property
    def shallow_commits(self) -> set[str]:
        f = Path(self.repo.common_dir) / "shallow"
        return set(f.read_text().split()) if f.exists() else set()

    def call(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = GIT_TIMEOUT_S
    ) -> tuple[int, str, str]:
        return call_git(self.git, list(args), env=env, timeout=timeout)

    def run(self, *args: str, env: dict[str, str] | None = None) -> str:
        status, out, err = self.call(*args, env=env)
        if status != 0:
            raise UpstreamError(
                f"git {args[0]} failed in {self.role} {self.label}: {one_line(err)}; "
                "check the repository with `git fsck`"
            )
        return out


def call_git(
    g: git.Git, args: list[str], *, env: dict[str, str] | None = None, timeout: float = GIT_TIMEOUT_S
) -> tuple[int, str, str]:
    # Raw bytes, decoded here: gitpython's surrogateescape would let undecodable names
    # through as lone surrogates, which no JSON or HTML writer accepts.
    status, out, err = g.execute(
        ["git", *args],
        with_extended_output=True,
        with_exceptions=False,
        stdout_as_string=False,
        env=env,
        kill_after_timeout=timeout,
    )
    text = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
    return status, text, err


def one_line(err: str) -> str:
    """The line of git's stderr that says what went wrong, for a one-line error message."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    fatal = [ln for ln in lines if ln.lower().startswith(("fatal:", "error:"))]
    text = (fatal or lines or ["no error output"])[-1]
    return text[:300]
