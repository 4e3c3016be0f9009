"""The measured branch's history, read in one `git log`, and how far back it reaches.

In: an open `GitRepo`, the branch asked for (None: HEAD) and the as-of time. Out: a
`History` (the as-of head, which is the newest first-parent commit of the branch dated
at or before as_of, and every commit reachable from it, with authors after .mailmap) and
a `Window` that knows where a shallow clone's history stops and collects, metric by
metric, what that cut limits. A window that reaches past the history horizon (the
newest shallow-boundary commit) gives a lower bound: the headline field becomes None,
the bound goes to `lower_bounds` and the reason to `limited`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from evaluator.errors import UpstreamError

from .clock import DAY, iso
from .gitcmd import GitRepo

BOT = re.compile(r"\[bot\]", re.IGNORECASE)
_LOG_FORMAT = "--format=%H%x1f%P%x1f%ct%x1f%aN%x1f%aE%x1f%s"


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    parents: tuple[str, ...]
    time: int  # committer date, unix seconds
    name: str  # author name after .mailmap
    email: str  # author e-mail after .mailmap
    subject: str

    @property
    def author(self) -> str:
        """Who made it, as author metrics key people: the e-mail, lower case."""
        return (self.email or self.name).strip().lower()

    @property
    def bot(self) -> bool:
        return bool(BOT.search(self.name) or BOT.search(self.email))


def parse_log(text: str) -> list[Commit]:
    commits = []
    for rec in text.split("\0"):
        rec = rec.strip("\n")
        if not rec:
            continue
        sha, parents, ct, name, email, subject = rec.split("\x1f", 5)
        commits.append(Commit(sha, tuple(parents.split()), int(ct), name, email, subject))
    return commits


def log(r: GitRepo, *revs: str, env: dict[str, str] | None = None) -> list[Commit]:
    """Every commit reachable from `revs` (`^rev` excludes), in one git run."""
    return parse_log(r.run("log", "-z", "--use-mailmap", "--no-show-signature", _LOG_FORMAT, *revs, "--", env=env))


def _rev(r: GitRepo, rev: str) -> str | None:
    status, out, _ = r.call("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    return out.strip() if status == 0 and out.strip() else None


def resolve_tip(r: GitRepo, branch: str | None) -> tuple[str, str]:
    """The commit to measure from and a name for it: the branch given, else HEAD."""
    if branch:
        if branch.startswith("-"):
            raise UpstreamError(f"branch {branch!r} is not a branch name; pass a name such as main")
        for ref, name in (
            (f"refs/heads/{branch}", branch),
            (f"refs/remotes/origin/{branch}", f"origin/{branch}"),
            (f"refs/remotes/{branch}", branch),
            (branch, branch),
        ):
            sha = _rev(r, ref)
            if sha:
                return sha, name
        raise UpstreamError(
            f"branch {branch!r} not found in {r.role} {r.label}; pass an existing branch (`git branch -a` lists them)"
        )
    sha = _rev(r, "HEAD")
    if sha:
        status, out, _ = r.call("symbolic-ref", "--quiet", "--short", "HEAD")
        return sha, (out.strip() if status == 0 else "HEAD (detached)")
    heads = r.run("for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    if not heads:
        raise UpstreamError(f"{r.role} {r.label} has no commits (empty repository); pass a clone that has history")
    for name in ("main", "master"):
        if name in heads:
            return _rev(r, f"refs/heads/{name}") or "", name
    raise UpstreamError(
        f"{r.role} {r.label} has no default branch (HEAD names a missing branch); "
        f"pass --branch, one of: {', '.join(heads[:5])}"
    )


def head_as_of(r: GitRepo, tip: str, ts: int) -> str | None:
    out = r.run("rev-list", "-n1", "--first-parent", f"--until=@{ts}", tip).strip()
    return out or None


@dataclass(frozen=True)
class History:
    """The measured branch up to as_of."""

    branch: str  # as resolved: "main", "origin/main", "HEAD (detached)"
    tip: str  # the branch's newest commit, whatever its date
    head: str  # the as-of head
    commits: list[Commit]  # reachable from head and dated at or before as_of
    by_sha: dict[str, Commit]  # every commit reachable from head, whatever its date
    shallow_commits: set[str]  # the clone's shallow boundary (empty: not shallow)

    @property
    def newest(self) -> int:
        return max(c.time for c in self.commits)

    @property
    def first(self) -> int:
        return min(c.time for c in self.commits)


def read_history(up: GitRepo, branch: str | None, ts: int, as_of_shown: str) -> History:
    tip, branch_name = resolve_tip(up, branch)
    head = head_as_of(up, tip, ts)
    if head is None:
        raise UpstreamError(
            f"upstream {up.label} has no commits on {branch_name} at or before {as_of_shown}; pass a later --as-of"
        )
    every = log(up, head)
    # Clock skew can put a commit reachable from the as-of head after as_of; it did not
    # exist yet as far as the report is concerned.
    commits = [c for c in every if c.time <= ts]
    return History(branch_name, tip, head, commits, {c.sha: c for c in every}, up.shallow_commits)


@dataclass
class Window:
    """How far back the history reaches as of `ts`, and what the cut limits, metric by
    metric (`limited`, `lower`, in the order the metrics are measured)."""

    ts: int
    horizon: int | None  # newest shallow-boundary commit's date; None: history complete
    limited: dict[str, str] = field(default_factory=dict)
    lower: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, history: History, ts: int) -> Window:
        boundary = [history.by_sha[s].time for s in history.shallow_commits if s in history.by_sha]
        return cls(ts, max(boundary) if boundary else None)

    @property
    def cut(self) -> str:
        return f"history before {iso(self.horizon)[:10]} is missing" if self.horizon else ""

    def complete(self, days: int) -> bool:
        """Whether the last `days` days lie wholly inside the history."""
        return self.horizon is None or self.ts - days * DAY >= self.horizon

    def limit(self, key: str, what: str) -> None:
        """Record that metric `key` is limited: `what` is "lower bound", "unknown", ..."""
        self.limited[key] = f"{what}: {self.cut}"

    def exact(self, key: str, value: Any, days: int) -> Any:
        """`value` when the last `days` days are complete, else None, keeping it as a lower bound."""
        if self.complete(days):
            return value
        self.limit(key, "lower bound")
        self.lower[key] = value
        return None
