"""Upstream health from git history alone: is the core repository alive, and does a fork keep up?

In: a local clone (or a URL, cloned bare into a cache folder) of the upstream repository,
optionally a vendor fork, an as-of time, a branch and the paths of interest. Out: an
`UpstreamHealth` record (the headline numbers as fields, everything else in `details`)
and `summary_rows` for a printed table. Errors are `UpstreamError`s that name the option
the user typed (`measure(repo_option=...)`: `--upstream` for a run, `--repo` for
`evaluate upstream`). No forge API is used: every number comes from a
handful of `git log` / `git for-each-ref` / `git rev-list` runs through gitpython, one per
question, never by loading commit objects one at a time (about 0.35 s for TileLang's ~1,900
commits on main). This is the only module of the project that reads upstream repositories.

Definitions (all times in UTC; "t" is a commit's committer date):
- `as_of` (default: now): commits and tags dated after it are ignored, the measured head is
  the newest first-parent commit of the branch dated at or before it, and every age is
  relative to it. A bare date means the whole of that day in UTC (until 23:59:59.999999
  UTC), so the commits of the day itself count; a timestamp is exact (to the second). The
  record's `as_of` is the bare date for a whole day, else the ISO timestamp.
- "in the last N days" means 0 <= as_of - t < N days.
- Activity counts every commit reachable from the head (merges and bots included, as
  `git rev-list --count` and Scorecard count them). Author metrics key people by their
  e-mail after `.mailmap` (so one person's several addresses join where `.mailmap` says
  so) and leave out bots (a "[bot]" name or address).
- Releases are tags whose name looks like a version (`v1.2`, `0.1.6.post1`, `v2.0-rc1`);
  a release's date is the tagger date of an annotated tag, or the committer date of the
  commit a lightweight tag names; several version tags on one commit count once. The
  median release interval is over the gaps whose later release falls in the last 365 days.
- Bus factor: the fewest authors whose commits add up to at least half of the last 365
  days' human commits (most active first).
- Merged pull requests are commits whose subject ends in "(#N)" (squash merges) or starts
  with "Merge pull request #N" (merge commits), each number counted once.
- The maintenance score follows OpenSSF Scorecard's "Maintained" check with commits only
  (no issue activity without a forge): 10 * commits_90d // 12, at most 10, where 12 =
  90 days // 7 at one commit a week; 0 for a repository younger than 90 days.
- Fork drift is read in the upstream repository with the fork's objects added as
  alternates (neither repository is modified): merge base, commits behind (upstream
  commits missing from the fork) and ahead (fork-only commits), last sync = the newest
  upstream commit contained in the fork (the newest of `git merge-base --all`), and
  `fork_days_behind` = upstream head's commit date minus the last sync's commit date
  (measured against the upstream head, not as_of, so a quiet upstream does not make a
  fork look stale). A fork spec may name its branch as "PATH#BRANCH".
- A shallow clone is measured as far as its history reaches: a window that reaches past
  the history horizon (the newest shallow-boundary commit) gives a lower bound, which goes
  to `details["lower_bounds"]` while the top-level field becomes None; each limited
  metric is named in `details["limited"]` with the reason, and fork drift is not measured.

`details` keys (stable): branch, head_date, as_of_timestamp, shallow, history_horizon,
limited {metric: reason}, lower_bounds {metric: value}, commits_total, first_commit_date,
repo_age_days, weekly_commits (52 ints, oldest week first), weekly_commits_start,
bot_commits_365d, authors_total, authors_365d, authors_new_90d, new_authors_90d (names),
bus_factor, bus_factor_authors (names), top_authors_365d [{name, commits}], releases
[{tag, date, commit, annotated}] oldest first, release_count, releases_365d,
latest_release_date, median_release_interval_days, non_release_tags,
merged_prs_per_month {"YYYY-MM": n} (the 12 months up to as_of, oldest first),
merged_prs_90d, merged_prs_365d, recent_commits [{sha, date, author, subject}] newest
first, paths {path: {exists, commits_30d, commits_90d, commits_365d, authors_90d,
days_since_last_commit, last_commit_date, first_commit_date}}, fork (None without a fork,
else a dict, see `_fork_drift`), score_inputs {...}. Author names and subjects are repository text,
returned verbatim: whoever renders them must escape them.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import statistics
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, time, timezone
from pathlib import Path
from typing import Any, Sequence

import git
from git.exc import GitCommandNotFound, InvalidGitRepositoryError, NoSuchPathError

from evaluator.errors import UpstreamError
from evaluator.results import UpstreamHealth

DAY = 86400
WEEKS = 52
DEFAULT_PATHS: tuple[str, ...] = ("src/cuda", "src/rocm", "src/cpu")
DEFAULT_CACHE_DIR = Path("~/.cache/evaluator/upstream")
# A remote must list its refs within PROBE_TIMEOUT_S before anything is cloned, so a dead
# or firewalled host fails in seconds; a clone of TileLang then takes well under a minute
# on a normal link, and the low-speed limit aborts a stalled transfer long before the
# CLONE_TIMEOUT_S ceiling.
PROBE_TIMEOUT_S = 30.0
CLONE_TIMEOUT_S = 600.0
GIT_TIMEOUT_S = 300.0
# A local clone whose newest commit is older than this may simply not have been fetched.
STALE_CLONE_DAYS = 30

SCORE_LOOKBACK_DAYS = 90
SCORE_COMMITS_PER_WEEK = 1
# Scorecard divides with integers: 1 * 90 // 7 = 12 commits score 10.
SCORE_THRESHOLD = SCORE_COMMITS_PER_WEEK * SCORE_LOOKBACK_DAYS // 7

# "v0.1.6", "0.1.6.post1", "v2.0-rc1", "release-1.2", "tilelang-v0.1.5"
RELEASE_TAG = re.compile(r"^(?:[A-Za-z][\w.-]*?[-_/])?v?\d+(\.\d+)+")
PR_SQUASH = re.compile(r"\(#(\d+)\)\s*$")
PR_MERGE = re.compile(r"^Merge pull request #(\d+)\b")
BOT = re.compile(r"\[bot\]", re.IGNORECASE)

_LOG_FORMAT = "--format=%H%x1f%P%x1f%ct%x1f%aN%x1f%aE%x1f%s"
_TAG_FORMAT = "--format=" + "%1f".join(
    ["%(refname)", "%(objecttype)", "%(objectname)", "%(*objecttype)", "%(*objectname)",
     "%(taggerdate:unix)", "%(committerdate:unix)", "%(*committerdate:unix)"])


# ---------------------------------------------------------------- public API


def not_measured(reason: str) -> UpstreamHealth:
    """The record a run carries when upstream health was not (or could not be) measured."""
    return UpstreamHealth(measured=False, note=reason)


# A bare date stands for the whole day: its last instant in UTC. Kept to the microsecond
# (every other time is cut to the second) so that the record can still say "that day".
END_OF_DAY = time(23, 59, 59, 999999)


def end_of_day(day: date) -> datetime:
    return datetime.combine(day, END_OF_DAY, tzinfo=timezone.utc)


def parse_as_of(text: str | date | datetime | None) -> datetime:
    """A timezone-aware UTC datetime from "YYYY-MM-DD" (the end of that day), an ISO
    timestamp (exact; no zone means UTC), or None (now)."""
    if text is None:
        return datetime.now(timezone.utc).replace(microsecond=0)
    if isinstance(text, datetime):
        value = text
    elif isinstance(text, date):
        return end_of_day(text)
    else:
        try:
            # A date alone first: datetime.fromisoformat would read it as 00:00 and leave
            # out the commits of the day the user named.
            return end_of_day(date.fromisoformat(text.strip()))
        except ValueError:
            pass
        try:
            value = datetime.fromisoformat(text.strip())
        except ValueError:
            raise UpstreamError(
                f"--as-of {text!r} is not a date; pass YYYY-MM-DD or an ISO timestamp such as "
                "2026-01-31T12:00:00+00:00") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    value = value.astimezone(timezone.utc)
    return value if value.time() == END_OF_DAY else value.replace(microsecond=0)


def as_of_text(at: datetime) -> str:
    """How an as-of time is shown: the bare date for a whole day, else the ISO timestamp."""
    return at.date().isoformat() if at.time() == END_OF_DAY else at.isoformat()


def measure(repo: str, *, fork: str | None = None, as_of: datetime | date | str | None = None,
            branch: str | None = None, paths: Sequence[str] | None = None,
            cache_dir: Path | None = None, repo_option: str = "--upstream") -> UpstreamHealth:
    """Measure the upstream repository (and a fork) as of `as_of`; see the module docstring.

    `repo_option` is the option the user gave `repo` with; error messages name it.
    """
    if not str(repo).strip():
        raise UpstreamError(f"no upstream repository given; pass {repo_option} a local clone or a URL")
    at = parse_as_of(as_of)
    ts = int(at.timestamp())
    cache = Path(cache_dir or DEFAULT_CACHE_DIR).expanduser()
    wanted = list(DEFAULT_PATHS if paths is None else paths)
    notes: list[str] = []
    try:
        up = _open(str(repo), "upstream", cache, notes, repo_option)
        try:
            health = _measure_open(up, branch, ts, at, wanted, fork, cache, notes,
                                   default_now=as_of is None)
        finally:
            up.close()
    except GitCommandNotFound:
        raise UpstreamError("git is not installed or not on PATH; install git 2.20 or newer") from None
    return health


def maintenance_score(commits_90d: int, repo_age_days: float) -> float:
    """Scorecard's "Maintained" arithmetic on commits alone (see the module docstring)."""
    if repo_age_days < SCORE_LOOKBACK_DAYS:
        return 0.0
    return float(min(10, 10 * commits_90d // SCORE_THRESHOLD))


def summary_rows(health: UpstreamHealth) -> list[tuple[str, str, str]]:
    """(metric, value, meaning) rows for a printed table; values are plain, unescaped text."""
    if not health.measured:
        return [("Upstream health", "not measured", health.note or "no upstream repository given")]
    d = health.details
    lim = d.get("limited") or {}

    def mark(value: str, *keys: str) -> str:
        return f"{value} (limited: shallow clone)" if any(k in lim for k in keys) and value != "n/a" else value

    rows: list[tuple[str, str, str]] = [
        ("Repository", health.repo, f"branch {d.get('branch', '?')}, history read with git only"),
        ("As of", health.as_of, "commits and tags after this time are ignored"),
        ("Head", health.head[:12], f"committed {_fmt_date(d.get('head_date'))}"),
        ("Last commit", _fmt_days_ago(health.days_since_last_commit), "days since the newest commit"),
        ("Commits 30 / 90 / 365 d",
         " / ".join(_fmt_count(health, k) for k in ("commits_30d", "commits_90d", "commits_365d")),
         "commits on the branch in the last 30, 90 and 365 days"),
        ("Weekly commits (52 w)", mark(_sparkline(d.get("weekly_commits") or []), "weekly_commits"),
         f"oldest week first; peak {max(d.get('weekly_commits') or [0])} a week"),
        ("Repository age", mark(_fmt_days(d.get("repo_age_days")), "repo_age_days"), "since the first commit"),
        ("Active authors (90 d)", _fmt_count(health, "authors_90d"),
         f"people (bots left out); {_fmt_opt(d.get('authors_new_90d'))} new in 90 days, "
         f"{_fmt_opt(d.get('authors_365d'))} in the last year"),
        ("Bus factor", _fmt_opt(d.get("bus_factor")),
         "fewest authors who made half of the last year's commits"),
        ("Releases", mark(_fmt_releases(health), "releases"),
         f"version tags; {_fmt_opt(d.get('releases_365d'))} in the last year"),
        ("Release interval", _fmt_days(d.get("median_release_interval_days")),
         "median gap between releases over the last year"),
        ("Merged PRs 90 / 365 d",
         mark(f"{_fmt_opt(d.get('merged_prs_90d'))} / {_fmt_opt(d.get('merged_prs_365d'))}", "merged_prs"),
         "subjects ending in (#N) or 'Merge pull request #N'"),
    ]
    for path, p in (d.get("paths") or {}).items():
        if not p.get("exists") and not p.get("commits_365d"):
            value = "not in the tree"
        else:
            value = (f"{_fmt_opt(p.get('commits_90d'))} commits / 90 d, last "
                     f"{_fmt_days_ago(p.get('days_since_last_commit'))}")
        rows.append((f"Path {path}", mark(value, "paths"), "activity under this path of interest"))
    f = d.get("fork")
    if f:
        rows.append(("Fork", f.get("repo", ""), f"branch {f.get('branch', '?')}"))
        if f.get("measured"):
            rows += [
                ("Fork behind / ahead", f"{f['behind']} / {f['ahead']} commits",
                 "upstream commits the fork lacks / fork-only commits"),
                ("Fork last sync", f"{_fmt_date(f.get('last_sync_date'))} ({_fmt_days(f.get('days_behind'))} behind)",
                 "newest upstream commit in the fork, and its lag behind the upstream head"),
                ("Fork merge base age", _fmt_days(f.get("merge_base_age_days")), "age of the merge base at as_of"),
                ("Fork missing releases", ", ".join(f.get("missing_releases") or []) or "none",
                 "upstream releases the fork does not contain"),
                ("Fork own commits (90 d)", _fmt_opt(f.get("ahead_commits_90d")),
                 "fork-only commits in the last 90 days"),
            ]
        else:
            rows.append(("Fork drift", "not measured", f.get("reason", "")))
    si = d.get("score_inputs") or {}
    rows.append(("Maintenance score",
                 "n/a" if health.maintenance_score is None else f"{health.maintenance_score:g} / 10",
                 f"Scorecard 'Maintained' from commits only: {_fmt_opt(si.get('commits_90d'))} commits in "
                 f"{SCORE_LOOKBACK_DAYS} days, {si.get('threshold', SCORE_THRESHOLD)} (one a week) score 10"))
    if health.note:
        rows.append(("Note", health.note, "caveats"))
    return rows


# ---------------------------------------------------------------- opening repositories


@dataclass
class _Repo:
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

    def call(self, *args: str, env: dict[str, str] | None = None,
             timeout: float = GIT_TIMEOUT_S) -> tuple[int, str, str]:
        return _call(self.git, list(args), env=env, timeout=timeout)

    def run(self, *args: str, env: dict[str, str] | None = None) -> str:
        status, out, err = self.call(*args, env=env)
        if status != 0:
            raise UpstreamError(
                f"git {args[0]} failed in {self.role} {self.label}: {_one_line(err)}; "
                "check the repository with `git fsck`")
        return out


def _call(g: git.Git, args: list[str], *, env: dict[str, str] | None = None,
          timeout: float = GIT_TIMEOUT_S) -> tuple[int, str, str]:
    # Raw bytes, decoded here: gitpython's surrogateescape would let undecodable names
    # through as lone surrogates, which no JSON or HTML writer accepts.
    status, out, err = g.execute(["git", *args], with_extended_output=True, with_exceptions=False,
                                 stdout_as_string=False, env=env, kill_after_timeout=timeout)
    text = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
    return status, text, err


def _one_line(err: str) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    fatal = [ln for ln in lines if ln.lower().startswith(("fatal:", "error:"))]
    text = (fatal or lines or ["no error output"])[-1]
    return text[:300]


def _is_url(spec: str) -> bool:
    return "://" in spec or spec.startswith("git@") or bool(re.match(r"^[\w.-]+@[\w.-]+:", spec))


def _split_branch(spec: str) -> tuple[str, str | None]:
    """'PATH#BRANCH' -> (PATH, BRANCH), unless a path with that '#' really exists."""
    if "#" in spec and not Path(spec).expanduser().exists():
        base, _, br = spec.rpartition("#")
        if base and br:
            return base, br
    return spec, None


def _open(spec: str, role: str, cache: Path, notes: list[str], flag: str) -> _Repo:
    """`flag`: the option the user passed `spec` with, so the message names what they typed."""
    if _is_url(spec):
        path = _materialize(spec, role, cache, notes)
        return _Repo(git.Repo(path), spec, role, from_url=True)
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
            "(the one holding .git) or a URL") from None
    return _Repo(repo, str(path.resolve()), role)


def _cache_name(url: str) -> str:
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", re.sub(r"^[a-z+]+://", "", url)).strip("_")[-60:]
    return f"{tail}-{hashlib.sha1(url.encode()).hexdigest()[:10]}.git"


def _network_env() -> dict[str, str]:
    env = {"GIT_TERMINAL_PROMPT": "0"}  # a credential prompt would hang a batch run
    if "GIT_SSH_COMMAND" not in os.environ:
        env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes -o ConnectTimeout=20"
    return env


_NET_OPTS = ["-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=60"]


def _net(g: git.Git, args: list[str], timeout: float) -> str | None:
    """Run a network git command; None when it worked, else why not in a few words."""
    status, _, err = _call(g, [*_NET_OPTS, *args], env=_network_env(), timeout=timeout)
    if status == 0:
        return None
    if "Timeout:" in err or "timed out" in err:
        return f"no answer within {timeout:g} s"
    return _one_line(err)


def _materialize(url: str, role: str, cache: Path, notes: list[str]) -> Path:
    """A bare clone of `url` in the cache: cloned the first time, fetched afterwards."""
    dest = cache / _cache_name(url)
    g = git.Git()
    if (dest / "HEAD").exists():
        why = (_net(g, ["ls-remote", "--heads", url], PROBE_TIMEOUT_S)
               or _net(g, ["-C", str(dest), "fetch", "--quiet", "--prune", "--tags", "origin",
                           "+refs/heads/*:refs/heads/*"], CLONE_TIMEOUT_S))
        if why:
            when = datetime.fromtimestamp((dest / "HEAD").stat().st_mtime, timezone.utc)
            for ref in (dest / "FETCH_HEAD", dest / "packed-refs"):
                if ref.exists():
                    when = max(when, datetime.fromtimestamp(ref.stat().st_mtime, timezone.utc))
            notes.append(f"could not refresh the cached clone of {url} ({why}); "
                         f"used the copy last updated {when.date().isoformat()}")
        return dest
    why = _net(g, ["ls-remote", "--heads", url], PROBE_TIMEOUT_S)
    if why:
        raise UpstreamError(f"could not clone {role} {url}: {why}; check the URL and the network, "
                            "or pass a local clone instead")
    try:
        cache.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=cache))
    except OSError as e:
        raise UpstreamError(f"cannot create the clone cache {cache} ({e.strerror}); "
                            "pass a writable cache folder") from None
    try:
        # Cloned into a scratch folder and renamed, so an interrupted clone never
        # passes for a cached one.
        why = _net(g, ["clone", "--bare", "--quiet", url, str(partial)], CLONE_TIMEOUT_S)
        if why:
            raise UpstreamError(f"could not clone {role} {url}: {why}; check the URL and the network, "
                                "or pass a local clone instead")
        try:
            partial.rename(dest)
        except OSError:
            if not (dest / "HEAD").exists():
                raise
        return dest
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)


# ---------------------------------------------------------------- history


@dataclass(frozen=True, slots=True)
class _Commit:
    sha: str
    parents: tuple[str, ...]
    time: int  # committer date, unix seconds
    name: str  # author name after .mailmap
    email: str  # author e-mail after .mailmap
    subject: str

    @property
    def author(self) -> str:
        return (self.email or self.name).strip().lower()

    @property
    def bot(self) -> bool:
        return bool(BOT.search(self.name) or BOT.search(self.email))


def _parse_log(text: str) -> list[_Commit]:
    commits = []
    for rec in text.split("\0"):
        rec = rec.strip("\n")
        if not rec:
            continue
        sha, parents, ct, name, email, subject = rec.split("\x1f", 5)
        commits.append(_Commit(sha, tuple(parents.split()), int(ct), name, email, subject))
    return commits


def _rev(r: _Repo, rev: str) -> str | None:
    status, out, _ = r.call("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    return out.strip() if status == 0 and out.strip() else None


def _resolve_tip(r: _Repo, branch: str | None) -> tuple[str, str]:
    """The commit to measure from and a name for it: the branch given, else HEAD."""
    if branch:
        if branch.startswith("-"):
            raise UpstreamError(f"branch {branch!r} is not a branch name; pass a name such as main")
        for ref, name in ((f"refs/heads/{branch}", branch), (f"refs/remotes/origin/{branch}", f"origin/{branch}"),
                          (f"refs/remotes/{branch}", branch), (branch, branch)):
            sha = _rev(r, ref)
            if sha:
                return sha, name
        raise UpstreamError(f"branch {branch!r} not found in {r.role} {r.label}; pass an existing branch "
                            "(`git branch -a` lists them)")
    sha = _rev(r, "HEAD")
    if sha:
        status, out, _ = r.call("symbolic-ref", "--quiet", "--short", "HEAD")
        return sha, (out.strip() if status == 0 else "HEAD (detached)")
    heads = r.run("for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    if not heads:
        raise UpstreamError(f"{r.role} {r.label} has no commits (empty repository); pass a clone that "
                            "has history")
    for name in ("main", "master"):
        if name in heads:
            return _rev(r, f"refs/heads/{name}") or "", name
    raise UpstreamError(f"{r.role} {r.label} has no default branch (HEAD names a missing branch); "
                        f"pass --branch, one of: {', '.join(heads[:5])}")


def _head_as_of(r: _Repo, tip: str, ts: int) -> str | None:
    out = r.run("rev-list", "-n1", "--first-parent", f"--until=@{ts}", tip).strip()
    return out or None


def _log(r: _Repo, *revs: str, env: dict[str, str] | None = None) -> list[_Commit]:
    return _parse_log(r.run("log", "-z", "--use-mailmap", "--no-show-signature", _LOG_FORMAT, *revs,
                            "--", env=env))


# ---------------------------------------------------------------- measurement


def _iso(t: int | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat()


def _days(seconds: float) -> float:
    return round(seconds / DAY, 2)


def _within(t: int, ts: int, days: int) -> bool:
    return 0 <= ts - t < days * DAY


def _measure_open(up: _Repo, branch: str | None, ts: int, at: datetime, wanted: list[str],
                  fork: str | None, cache: Path, notes: list[str], *, default_now: bool) -> UpstreamHealth:
    tip, branch_name = _resolve_tip(up, branch)
    head = _head_as_of(up, tip, ts)
    if head is None:
        raise UpstreamError(f"upstream {up.label} has no commits on {branch_name} at or before "
                            f"{as_of_text(at)}; pass a later --as-of")
    every = _log(up, head)
    by_sha = {c.sha: c for c in every}
    # Clock skew can put a commit reachable from the as-of head after as_of; it did not
    # exist yet as far as the report is concerned.
    commits = [c for c in every if c.time <= ts]
    newest = max(c.time for c in commits)

    shallow_set = up.shallow_commits
    boundary = [by_sha[s].time for s in shallow_set if s in by_sha]
    horizon = max(boundary) if boundary else None
    limited: dict[str, str] = {}
    lower: dict[str, Any] = {}
    cut = f"history before {_iso(horizon)[:10]} is missing" if horizon else ""

    def complete(days: int) -> bool:
        return horizon is None or ts - days * DAY >= horizon

    def exact(key: str, value: Any, days: int) -> Any:
        if complete(days):
            return value
        limited[key] = f"lower bound: {cut}"
        lower[key] = value
        return None

    details: dict[str, Any] = {
        "branch": branch_name,
        "head_date": _iso(by_sha[head].time),
        "as_of_timestamp": at.isoformat(),
        "shallow": bool(shallow_set),
        "history_horizon": _iso(horizon),
    }

    # Activity
    counts = {n: sum(_within(c.time, ts, n) for c in commits) for n in (30, 90, 365)}
    weekly = [0] * WEEKS
    for c in commits:
        if _within(c.time, ts, WEEKS * 7):
            weekly[WEEKS - 1 - (ts - c.time) // (7 * DAY)] += 1
    first = min(c.time for c in commits)
    details.update({
        "commits_total": len(commits),
        "first_commit_date": _iso(first),
        "repo_age_days": _days(ts - first),
        "weekly_commits": weekly,
        "weekly_commits_start": _iso(ts - WEEKS * 7 * DAY),
        "bot_commits_365d": sum(1 for c in commits if c.bot and _within(c.time, ts, 365)),
    })
    if horizon is not None:
        limited["repo_age_days"] = f"lower bound: {cut}"
        limited["commits_total"] = f"lower bound: {cut}"
        if not complete(WEEKS * 7):
            limited["weekly_commits"] = f"lower bounds: {cut}"

    # Authors
    people = [c for c in commits if not c.bot]
    first_seen: dict[str, int] = {}
    display: dict[str, tuple[int, str]] = {}
    for c in people:
        first_seen[c.author] = min(first_seen.get(c.author, c.time), c.time)
        if c.author not in display or c.time > display[c.author][0]:
            display[c.author] = (c.time, c.name or c.email)
    active_90 = {c.author for c in people if _within(c.time, ts, 90)}
    year = Counter(c.author for c in people if _within(c.time, ts, 365))
    new_90 = sorted((a for a in active_90 if _within(first_seen[a], ts, 90)), key=lambda a: display[a][1])
    ranked = sorted(year.items(), key=lambda kv: (-kv[1], display[kv[0]][1]))
    bus, total, acc = [], sum(year.values()), 0
    for a, n in ranked:
        if 2 * acc >= total:
            break
        bus.append(a)
        acc += n
    details.update({
        "authors_total": len(first_seen),
        "authors_365d": exact("authors_365d", len(year), 365),
        "authors_new_90d": len(new_90),
        "new_authors_90d": [display[a][1] for a in new_90],
        "bus_factor": len(bus),
        "bus_factor_authors": [display[a][1] for a in bus],
        "top_authors_365d": [{"name": display[a][1], "commits": n} for a, n in ranked[:10]],
    })
    if horizon is not None:
        # Anyone whose earlier commits were cut off looks new: not even a bound.
        details["authors_new_90d"] = None
        details["new_authors_90d"] = []
        limited["authors_new_90d"] = f"unknown: {cut}"
        limited["authors_total"] = f"lower bound: {cut}"
        if not complete(365):
            details["bus_factor"] = None
            details["bus_factor_authors"] = []
            limited["bus_factor"] = f"unknown: {cut}"
            limited["top_authors_365d"] = f"lower bounds: {cut}"

    # Releases
    releases, other_tags = _releases(up, ts)
    rtimes = [r["_t"] for r in releases]
    intervals = [(rtimes[i] - rtimes[i - 1]) / DAY for i in range(1, len(rtimes)) if _within(rtimes[i], ts, 365)]
    latest = releases[-1] if releases else None
    details.update({
        "releases": [{k: v for k, v in r.items() if k != "_t"} for r in releases],
        "release_count": len(releases),
        "releases_365d": sum(_within(t, ts, 365) for t in rtimes),
        "latest_release_date": latest["date"] if latest else None,
        "median_release_interval_days": round(statistics.median(intervals), 2) if intervals else None,
        "non_release_tags": other_tags,
    })
    if shallow_set:
        limited["releases"] = "may be incomplete: a shallow clone fetches only tags on the commits it has"

    # Merged pull requests
    months = _last_months(at, 12)
    per_month = {m: 0 for m in months}
    seen: set[str] = set()
    prs_90 = prs_365 = 0
    for c in sorted(commits, key=lambda c: c.time):
        m = PR_SQUASH.search(c.subject) or PR_MERGE.match(c.subject)
        if not m or m.group(1) in seen:
            continue
        seen.add(m.group(1))
        key = datetime.fromtimestamp(c.time, timezone.utc).strftime("%Y-%m")
        if key in per_month:
            per_month[key] += 1
        prs_90 += _within(c.time, ts, 90)
        prs_365 += _within(c.time, ts, 365)
    details.update({"merged_prs_per_month": per_month, "merged_prs_90d": prs_90, "merged_prs_365d": prs_365})
    if not complete(365):
        limited["merged_prs"] = f"lower bounds: {cut}"

    details["recent_commits"] = [
        {"sha": c.sha, "date": _iso(c.time), "author": c.name, "subject": c.subject}
        for c in sorted(commits, key=lambda c: -c.time)[:10]]
    details["paths"] = _paths(up, head, ts, wanted, shallow_set)
    if wanted and not complete(30):
        limited["paths"] = f"lower bounds: {cut}"

    # Notes about the clone itself
    if shallow_set:
        notes.insert(0, f"shallow clone: {cut}, limited metrics are listed in details.limited "
                        "(run `git fetch --unshallow` for full history)" if horizon else
                     "shallow clone, but the measured branch's history is complete")
    if default_now and branch_name not in ("HEAD (detached)",) and not up.bare:
        status, out, _ = up.call("rev-list", "--count", f"{tip}..{branch_name}@{{upstream}}")
        if status == 0 and out.strip() not in ("", "0"):
            notes.append(f"local {branch_name} is {out.strip()} commits behind its remote-tracking branch; "
                         "pull, or pass --branch origin/<name>, to measure the newer history")

    stale_days = (int(datetime.now(timezone.utc).timestamp()) - newest) / DAY
    if default_now and not up.from_url and stale_days > STALE_CLONE_DAYS:
        fetch_head = Path(up.repo.git_dir) / "FETCH_HEAD"
        fetched = (f", and it was last fetched {(datetime.now().timestamp() - fetch_head.stat().st_mtime) / DAY:.0f}"
                   " days ago" if fetch_head.exists() else "")
        notes.append(f"the newest commit is {stale_days:.0f} days old{fetched}: if this clone is not "
                     "fresh, run `git fetch` there (or pass the URL) before trusting these numbers")

    # Fork drift
    fork_info = None
    if fork:
        fork_info = _fork_drift(up, head, by_sha, releases, fork, ts, cache, notes, bool(shallow_set))
    details["fork"] = fork_info

    # Score
    c90 = exact("commits_90d", counts[90], 90)
    age = _days(ts - first)
    young = age < SCORE_LOOKBACK_DAYS
    if horizon is not None and young:
        score: float | None = None  # it may only look young because its history is cut
    elif c90 is not None:
        score = maintenance_score(c90, age)
    elif counts[90] >= SCORE_THRESHOLD:
        score = 10.0  # the lower bound already earns the top score
    else:
        score = None
    details["score_inputs"] = {
        "commits_90d": counts[90],
        "lookback_days": SCORE_LOOKBACK_DAYS,
        "commits_per_week_for_10": SCORE_COMMITS_PER_WEEK,
        "threshold": SCORE_THRESHOLD,
        "repo_age_days": age,
        "young_repository": young,
        "rule": f"min(10, 10 * commits_90d // {SCORE_THRESHOLD}); 0 when the repository is younger "
                f"than {SCORE_LOOKBACK_DAYS} days (Scorecard 'Maintained', commits only)",
    }
    if score is None:
        limited["maintenance_score"] = f"unknown: {cut}"

    details["limited"] = limited
    details["lower_bounds"] = lower
    f = fork_info if fork_info and fork_info.get("measured") else None
    return UpstreamHealth(
        measured=True,
        repo=up.label,
        as_of=as_of_text(at),
        head=head,
        days_since_last_commit=_days(ts - newest),
        commits_30d=exact("commits_30d", counts[30], 30),
        commits_90d=c90,
        commits_365d=exact("commits_365d", counts[365], 365),
        authors_90d=exact("authors_90d", len(active_90), 90),
        latest_tag=latest["tag"] if latest else None,
        days_since_release=_days(ts - latest["_t"]) if latest else None,
        maintenance_score=score,
        fork_behind=f["behind"] if f else None,
        fork_ahead=f["ahead"] if f else None,
        fork_days_behind=f["days_behind"] if f else None,
        details=details,
        note="; ".join(notes),
    )


def _last_months(at: datetime, n: int) -> list[str]:
    y, m = at.year, at.month
    out = []
    for _ in range(n):
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y, m - 1) if m > 1 else (y - 1, 12)
    return out[::-1]


def _releases(r: _Repo, ts: int) -> tuple[list[dict[str, Any]], int]:
    """Version tags dated at or before ts, one per commit, oldest first; and the other tags' count."""
    by_commit: dict[str, dict[str, Any]] = {}
    other = 0
    for line in r.run("for-each-ref", _TAG_FORMAT, "refs/tags").splitlines():
        if not line.strip():
            continue
        ref, otype, oname, ptype, pname, tdate, cdate, pcdate = line.split("\x1f")
        name = ref.removeprefix("refs/tags/")
        if not RELEASE_TAG.match(name):
            other += 1
            continue
        if otype == "commit":
            commit, when, annotated = oname, cdate, False
        elif otype == "tag" and ptype == "commit":
            commit, when, annotated = pname, tdate or pcdate, True
        else:
            continue  # a tag of a tree or blob, or of another tag: not a release of code
        if not when or int(when) > ts:
            continue
        t = int(when)
        rel = {"tag": name, "date": _iso(t), "commit": commit, "annotated": annotated, "_t": t}
        prev = by_commit.get(commit)
        if prev is None or (t, name) < (prev["_t"], prev["tag"]):
            by_commit[commit] = rel
    return sorted(by_commit.values(), key=lambda x: (x["_t"], x["tag"])), other


def _paths(r: _Repo, head: str, ts: int, wanted: list[str], boundary: set[str]) -> dict[str, dict[str, Any]]:
    clean = [p.strip().strip("/").removeprefix("./") for p in wanted if p.strip().strip("/")]
    if not clean:
        return {}
    present = {ln.split("\t", 1)[1] for ln in r.run("ls-tree", head, "--", *clean).splitlines() if "\t" in ln}
    out: dict[str, dict[str, Any]] = {}
    for p in clean:
        text = r.run("log", "-z", "--use-mailmap", "--no-show-signature", "--format=%H%x1f%ct%x1f%aE%x1f%aN",
                     head, "--", p)
        rows = []
        for rec in text.split("\0"):
            rec = rec.strip("\n")
            if rec:
                sha, ct, email, name = rec.split("\x1f", 3)
                # A shallow clone's boundary commit diffs against nothing, so it seems
                # to add every path: it says nothing about who changed what.
                if int(ct) <= ts and sha not in boundary:
                    rows.append((int(ct), (email or name).lower(), bool(BOT.search(name) or BOT.search(email))))
        last = max((t for t, _, _ in rows), default=None)
        first = min((t for t, _, _ in rows), default=None)
        out[p] = {
            "exists": p in present,
            "commits_30d": sum(_within(t, ts, 30) for t, _, _ in rows),
            "commits_90d": sum(_within(t, ts, 90) for t, _, _ in rows),
            "commits_365d": sum(_within(t, ts, 365) for t, _, _ in rows),
            "authors_90d": len({a for t, a, bot in rows if not bot and _within(t, ts, 90)}),
            "days_since_last_commit": _days(ts - last) if last is not None else None,
            "last_commit_date": _iso(last),
            "first_commit_date": _iso(first),
        }
    return out


def _alternates_env(extra: Path) -> dict[str, str]:
    entry = str(extra.resolve())
    if any(ch in entry for ch in ':"\\'):
        entry = '"' + entry.replace("\\", "\\\\").replace('"', '\\"') + '"'
    prior = os.environ.get("GIT_ALTERNATE_OBJECT_DIRECTORIES")
    return {"GIT_ALTERNATE_OBJECT_DIRECTORIES": entry + (os.pathsep + prior if prior else "")}


def _fork_drift(up: _Repo, up_head: str, up_commits: dict[str, _Commit], releases: list[dict[str, Any]],
                spec: str, ts: int, cache: Path, notes: list[str], up_shallow: bool) -> dict[str, Any]:
    """Fork drift keys: measured, reason (when not), repo, branch, head, head_date,
    days_since_last_commit, merge_base, merge_base_date, merge_base_age_days, behind, ahead,
    last_sync_commit, last_sync_date, days_behind, sync_age_days, missing_releases (upstream
    releases not in the fork that are on the upstream branch or newer than the last sync,
    oldest first), missing_release_count, ahead_commits_90d, ahead_authors_90d,
    last_own_commit_date."""
    path, fbranch = _split_branch(spec)
    fk = _open(path, "fork", cache, notes, "--fork")
    try:
        tip, fname = _resolve_tip(fk, fbranch)
        fhead = _head_as_of(fk, tip, ts)
        if fhead is None:
            raise UpstreamError(f"fork {fk.label} has no commits on {fname} at or before "
                                f"{_iso(ts)}; pass a later --as-of")
        info: dict[str, Any] = {"repo": fk.label, "branch": fname, "head": fhead}
        why = ("upstream is a shallow clone" if up_shallow else
               "the fork is a shallow clone" if fk.shallow_commits else "")
        if why:
            notes.append(f"fork drift not measured: {why} (run `git fetch --unshallow` there)")
            return {**info, "measured": False, "reason": f"{why}; run `git fetch --unshallow` there"}
        # The fork's objects join the upstream's for these reads only, through the
        # environment: neither repository is written to.
        env = _alternates_env(fk.objects_dir)
        status, out, err = up.call("merge-base", "--all", up_head, fhead, env=env)
        bases = out.split()
        if status == 1 and not bases:
            raise UpstreamError(f"fork {fk.label} shares no history with upstream {up.label}; pass a fork "
                                "of this upstream (or drop --fork)")
        if status != 0:
            raise UpstreamError(f"git merge-base failed between fork {fk.label} and upstream {up.label}: "
                                f"{_one_line(err)}; check both repositories with `git fsck`")
        ahead_s, behind_s = up.run("rev-list", "--left-right", "--count", f"{fhead}...{up_head}",
                                   env=env).split()
        own = _log(up, f"{fhead}", f"^{up_head}", env=env)
        own_by_sha = {c.sha: c for c in own}
        fhead_time = (own_by_sha.get(fhead) or up_commits[fhead]).time
        sync = max(bases, key=lambda s: up_commits[s].time)
        sync_t = up_commits[sync].time
        base_t = up_commits[bases[0]].time
        up_t = up_commits[up_head].time
        in_fork = set(up.run("for-each-ref", "--merged", fhead, "--format=%(refname)", "refs/tags",
                             env=env).split())
        on_branch = set(up.run("for-each-ref", "--merged", up_head, "--format=%(refname)", "refs/tags").split())
        # An old tag on an upstream side branch (a release branch, say) was never the
        # fork's to take; one on the upstream branch or made after the last sync is.
        missing = [r["tag"] for r in releases if f"refs/tags/{r['tag']}" not in in_fork
                   and (f"refs/tags/{r['tag']}" in on_branch or r["_t"] > sync_t)]
        own = [c for c in own if c.time <= ts]
        info.update({
            "measured": True,
            "head_date": _iso(fhead_time),
            "days_since_last_commit": _days(ts - max([fhead_time, *[c.time for c in own]])),
            "merge_base": bases[0],
            "merge_base_date": _iso(base_t),
            "merge_base_age_days": _days(ts - base_t),
            "behind": int(behind_s),
            "ahead": int(ahead_s),
            "last_sync_commit": sync,
            "last_sync_date": _iso(sync_t),
            "days_behind": _days(max(0, up_t - sync_t)),
            "sync_age_days": _days(ts - sync_t),
            "missing_releases": missing,
            "missing_release_count": len(missing),
            "ahead_commits_90d": sum(_within(c.time, ts, 90) for c in own),
            "ahead_authors_90d": len({c.author for c in own if not c.bot and _within(c.time, ts, 90)}),
            "last_own_commit_date": _iso(max((c.time for c in own), default=None)) if own else None,
        })
        return info
    finally:
        fk.close()


# ---------------------------------------------------------------- formatting


def _fmt_opt(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _fmt_count(h: UpstreamHealth, key: str) -> str:
    v = getattr(h, key)
    if v is None:
        lb = (h.details.get("lower_bounds") or {}).get(key)
        return f">= {lb}" if lb is not None else "n/a"
    return str(v)


def _fmt_days(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v / 365.25:.1f} years" if v >= 730 else f"{v:.0f} days" if v >= 10 else f"{v:.1f} days"


def _fmt_days_ago(v: Any) -> str:
    return "n/a" if v is None else f"{_fmt_days(v)} ago"


def _fmt_date(v: Any) -> str:
    return str(v)[:10] if v else "n/a"


def _fmt_releases(h: UpstreamHealth) -> str:
    n = h.details.get("release_count")
    if not n:
        return "none"
    return f"{n}, latest {h.latest_tag} ({_fmt_days_ago(h.days_since_release)})"


def _sparkline(values: Sequence[int]) -> str:
    if not values:
        return "n/a"
    bars = "▁▂▃▄▅▆▇█"
    top = max(values) or 1
    return "".join(bars[max(1, round(v / top * 7))] if v else bars[0] for v in values)
