"""Upstream health from git history alone: is the core repository alive, and does a fork keep up?

In: a local clone (or a URL, cloned bare into a cache folder) of the upstream repository,
optionally a vendor fork, an as-of time, a branch and the paths of interest. Out: an
`UpstreamHealth` record: the headline numbers as fields, and the typed parts `activity`,
`authors`, `releases`, `fork`, `score_inputs` and `caveats` that the report and the
checklist read. Also `summary_rows` for a printed table. Errors are `UpstreamError`s that name the option the
user typed (`measure(repo_option=...)`: `--upstream` for a run, `--repo` for `evaluate
upstream`). No forge API is used: every number comes from a handful of `git log` /
`git for-each-ref` / `git rev-list` runs through gitpython, one per question, never by
loading commit objects one at a time (about 0.35 s for TileLang's ~1,900 commits on
main). This package is the only part of the project that reads upstream repositories.

The modules, in the order a measurement uses them:
- clock: --as-of parsing (a bare date means the whole of that day in UTC, a timestamp
  is exact to the second) and day arithmetic; "in the last N days" means
  0 <= as_of - t < N days, t being a commit's committer date, all times in UTC.
- sources, gitcmd: a path or URL to an open repository, and running git in it.
- history: the as-of head (the newest first-parent commit of the branch dated at or
  before as_of; commits and tags dated after as_of are ignored, every age is relative
  to it), its commits, and the `Window` of a shallow clone: a metric whose window
  reaches past the history horizon (the newest shallow-boundary commit) is a lower
  bound, its headline field None, the bound in `caveats.lower_bounds` and the reason in
  `caveats.limited`; fork drift is then not measured.
- activity, authors, releases, fork, score: one part each, their definitions at the top
  of each module.
- health: the parts measured in order and joined into the record; details: the parts
  rebuilt from the `details` dict of results written before they existed; summary: the
  printed table.
Author names and subjects are repository text, returned verbatim: whoever renders them
must escape them.
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Sequence

from git.exc import GitCommandNotFound

from evaluator.errors import UpstreamError
from evaluator.results import UpstreamHealth

from .activity import PR_MERGE, PR_SQUASH, WEEKS
from .clock import DAY, END_OF_DAY, as_of_text, end_of_day, parse_as_of
from ..results.upstream import from_details
from .gitcmd import GIT_TIMEOUT_S
from .health import STALE_CLONE_DAYS, measure_open
from .history import BOT
from .releases import RELEASE_TAG
from .score import SCORE_COMMITS_PER_WEEK, SCORE_LOOKBACK_DAYS, SCORE_THRESHOLD, maintenance_score
from .sources import CLONE_TIMEOUT_S, PROBE_TIMEOUT_S, open_repo
from .summary import summary_rows

__all__ = [
    "BOT",
    "CLONE_TIMEOUT_S",
    "DAY",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_PATHS",
    "END_OF_DAY",
    "GIT_TIMEOUT_S",
    "PROBE_TIMEOUT_S",
    "PR_MERGE",
    "PR_SQUASH",
    "RELEASE_TAG",
    "SCORE_COMMITS_PER_WEEK",
    "SCORE_LOOKBACK_DAYS",
    "SCORE_THRESHOLD",
    "STALE_CLONE_DAYS",
    "WEEKS",
    "as_of_text",
    "end_of_day",
    "from_details",
    "maintenance_score",
    "measure",
    "not_measured",
    "parse_as_of",
    "summary_rows",
]

DEFAULT_PATHS: tuple[str, ...] = ("src/cuda", "src/rocm", "src/cpu")
DEFAULT_CACHE_DIR = Path("~/.cache/evaluator/upstream")


def not_measured(reason: str) -> UpstreamHealth:
    """The record a run carries when upstream health was not (or could not be) measured."""
    return UpstreamHealth(measured=False, note=reason)


def measure(
    repo: str,
    *,
    fork: str | None = None,
    as_of: datetime | date | str | None = None,
    branch: str | None = None,
    paths: Sequence[str] | None = None,
    cache_dir: Path | None = None,
    repo_option: str = "--upstream",
) -> UpstreamHealth:
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
        up = open_repo(str(repo), "upstream", cache, notes, repo_option)
        try:
            return measure_open(up, branch, ts, at, wanted, fork, cache, notes, default_now=as_of is None)
        finally:
            up.close()
    except GitCommandNotFound:
        raise UpstreamError("git is not installed or not on PATH; install git 2.20 or newer") from None
