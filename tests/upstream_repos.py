"""Real git repositories with controlled history, for the upstream-health tests.

In: a folder. Out: repositories built with the git command line (author and committer
dates, identities, tags, merges, forks and shallow clones exactly as scripted), plus the
commit ids the tests check against. Dates are given in days before AS_OF so the expected
numbers in tests/test_upstream.py can be read off the script below.
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

AS_OF = datetime(2026, 1, 1, tzinfo=timezone.utc)

ALICE_OLD = ("Alice A.", "alice@old.example.org")  # joined to ALICE by .mailmap
ALICE = ("Alice", "alice@example.com")
BOB = ("Bob", "bob@example.com")
CAROL = ("Carol", "carol@example.com")
DAVE = ("Dave", "dave@example.com")
BOT = ("dependabot[bot]", "49699333+dependabot[bot]@users.noreply.github.com")
EVE = ("Eve", "eve@vendor.example")

XSS = "<script>alert(1)</script> (#130)"

# Isolated from whatever the machine's git configuration says (signing, hooks, ...).
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}


def stamp(days_before: float) -> str:
    """A raw git date `days_before` AS_OF (negative: after it)."""
    return f"{int((AS_OF - timedelta(days=days_before)).timestamp())} +0000"


def git(cwd: Path | str, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None) -> str:
    out = subprocess.run(
        ["git", *args], cwd=cwd, env={**GIT_ENV, **(env or {})}, input=stdin, capture_output=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {out.stderr.decode(errors='replace')}")
    return out.stdout.decode().strip()


class Builder:
    """A work tree whose commits carry exactly the identities and dates asked for."""

    def __init__(self, path: Path, *, init: bool = True):
        self.path = Path(path)
        if init:
            self.path.mkdir(parents=True, exist_ok=True)
            git(self.path, "init", "-q", "-b", "main")

    def git(self, *args: str, env: dict[str, str] | None = None) -> str:
        return git(self.path, *args, env=env)

    @staticmethod
    def who(person: tuple[str, str], days: float, role: str) -> dict[str, str]:
        return {f"GIT_{role}_NAME": person[0], f"GIT_{role}_EMAIL": person[1], f"GIT_{role}_DATE": stamp(days)}

    def commit(
        self,
        subject: str,
        *,
        days: float,
        author: tuple[str, str] = ALICE,
        committer: tuple[str, str] | None = None,
        author_days: float | None = None,
        files: dict[str, str] | None = None,
    ) -> str:
        for name, text in (files or {}).items():
            f = self.path / name
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
            self.git("add", name)
        env = {
            **self.who(author, days if author_days is None else author_days, "AUTHOR"),
            **self.who(committer or author, days, "COMMITTER"),
        }
        self.git("commit", "-q", "--allow-empty", "-m", subject, env=env)
        return self.git("rev-parse", "HEAD")

    def merge(self, rev: str, subject: str, *, days: float, author: tuple[str, str] = ALICE) -> str:
        env = {**self.who(author, days, "AUTHOR"), **self.who(author, days, "COMMITTER")}
        self.git("merge", "-q", "--no-ff", "-m", subject, rev, env=env)
        return self.git("rev-parse", "HEAD")

    def tag(self, name: str, rev: str, *, days: float | None = None, tagger: tuple[str, str] = ALICE) -> None:
        """Lightweight without `days`; annotated, dated `days` before AS_OF, with it."""
        if days is None:
            self.git("tag", name, rev)
        else:
            self.git("tag", "-a", "-m", f"Release {name}", name, rev, env=self.who(tagger, days, "COMMITTER"))

    def checkout(self, *args: str) -> None:
        self.git("checkout", "-q", *args)


def build_upstream(path: Path) -> dict[str, str]:
    """The upstream: four people (Alice under two addresses), a bot, tags, a merge, paths.

    days before AS_OF : commit (author)                                   tags
    400 c1  Alice A. (old address) Initial commit, .mailmap
    390 r1  Alice on branch release-0.0                                   v0.0.9 (lightweight)
    380 c2  Bob     src/cpu                                                v0.1.0 (lightweight)
    300 c3  Alice A. src/cuda, "(#101)"
    200 c4  Carol   src/cuda, "(#102)"                                     v0.2.0 (annotated, 199)
    100 c5  Bob     src/cpu
     60 c6  Alice   src/cuda, "(#123)"                                     v0.3.0 (lightweight),
                                                                           v0.5.0 (annotated, -1: after AS_OF)
     40 f1  Carol   on branch feature
     35 c7  Alice   README
     31 p1  Alice   on branch release-0.3 (from c6)                        v0.3.1 (annotated, 30)
     20 m   Alice   merge of feature: "Merge pull request #125 ..."
     10 c8  Dave    src/cpu, subject with <script>, authored 500 days before
      5 c9  bot     "(#131)"
      2 c10 Carol   README                                                 v0.4.0 (annotated, 1), nightly
     -3 c11 Bob     src/cuda, "(#140)": after AS_OF
    """
    b = Builder(path)
    ids: dict[str, str] = {}
    ids["c1"] = b.commit(
        "Initial commit",
        days=400,
        author=ALICE_OLD,
        files={"README.md": "hello\n", ".mailmap": "Alice <alice@example.com> <alice@old.example.org>\n"},
    )
    b.checkout("-b", "release-0.0")
    ids["r1"] = b.commit("Backport fix", days=390, author=ALICE, files={"fix.txt": "1\n"})
    b.tag("v0.0.9", ids["r1"])
    b.checkout("main")
    ids["c2"] = b.commit("Add CPU backend", days=380, author=BOB, files={"src/cpu/a.cc": "// cpu\n"})
    b.tag("v0.1.0", ids["c2"])
    ids["c3"] = b.commit("Add CUDA backend (#101)", days=300, author=ALICE_OLD, files={"src/cuda/k.cu": "// 1\n"})
    ids["c4"] = b.commit("Fix CUDA launch (#102)", days=200, author=CAROL, files={"src/cuda/k.cu": "// 2\n"})
    b.tag("v0.2.0", ids["c4"], days=199)
    ids["c5"] = b.commit("Tune CPU loop", days=100, author=BOB, files={"src/cpu/a.cc": "// cpu 2\n"})
    ids["c6"] = b.commit("Speed up kernels (#123)", days=60, author=ALICE, files={"src/cuda/k.cu": "// 3\n"})
    b.tag("v0.3.0", ids["c6"])
    b.tag("v0.5.0", ids["c6"], days=-1)
    b.checkout("-b", "feature")
    ids["f1"] = b.commit("Feature work", days=40, author=CAROL, files={"feature.txt": "f\n"})
    b.checkout("main")
    ids["c7"] = b.commit("Update docs", days=35, author=ALICE, files={"README.md": "hello docs\n"})
    b.checkout("-b", "release-0.3", ids["c6"])
    ids["p1"] = b.commit("Patch release fix", days=31, author=ALICE, files={"patch.txt": "p\n"})
    b.tag("v0.3.1", ids["p1"], days=30)
    b.checkout("main")
    ids["m"] = b.merge("feature", "Merge pull request #125 from carol/feature", days=20, author=ALICE)
    ids["c8"] = b.commit(XSS, days=10, author_days=500, author=DAVE, files={"src/cpu/b.cc": "// b\n"})
    ids["c9"] = b.commit("Bump pytest (#131)", days=5, author=BOT, files={"requirements.txt": "pytest\n"})
    ids["c10"] = b.commit("Prepare release", days=2, author=CAROL, files={"README.md": "hello 0.4\n"})
    b.tag("v0.4.0", ids["c10"], days=1)
    b.tag("nightly", ids["c10"])
    ids["c11"] = b.commit("Future work (#140)", days=-3, author=BOB, files={"src/cuda/k.cu": "// 4\n"})
    return ids


def build_fork(upstream: Path, path: Path, ids: dict[str, str]) -> dict[str, str]:
    """A vendor fork cloned from upstream at c6, which syncs c7 once and adds its own work.

    50 e1 Eve (MACA backend), 30 sync: merge of upstream c7, 25 e2 Eve, -2 e3 Eve (after AS_OF).
    """
    git(path.parent, "clone", "-q", str(upstream), str(path))
    b = Builder(path, init=False)
    b.git("reset", "-q", "--hard", ids["c6"])
    out = {"e1": b.commit("Add MACA backend", days=50, author=EVE, files={"src/maca/m.cc": "// maca\n"})}
    out["sync"] = b.merge(ids["c7"], "Sync with upstream", days=30, author=EVE)
    out["e2"] = b.commit("Fix MACA build", days=25, author=EVE, files={"src/maca/m.cc": "// maca 2\n"})
    out["e3"] = b.commit("Future fork work", days=-2, author=EVE, files={"src/maca/m.cc": "// maca 3\n"})
    return out


def build_world(root: Path) -> dict[str, str]:
    """`build_upstream` at root/up and `build_fork` at root/fork; every commit id by name."""
    ids = build_upstream(root / "up")
    ids.update(build_fork(root / "up", root / "fork", ids))
    return ids


def fast_import_repo(path: Path, commits: int = 2000, *, authors: int = 40, days: int = 700) -> None:
    """A repository of `commits` linear commits over `days`, built in one `git fast-import` run."""
    git(path.parent, "init", "-q", "-b", "main", str(path))
    end = int(AS_OF.timestamp())
    step = days * 86400 // commits
    dirs = ("src/cuda", "src/cpu", "src/rocm", "python", "docs")
    parts: list[bytes] = []
    for i in range(commits):
        t = end - (commits - i) * step
        name = f"Dev {i % authors}"
        msg = f"Change {i} (#{i + 1})\n".encode()
        blob = f"// {i}\n".encode()
        parts.append(b"commit refs/heads/main\n")
        parts.append(f"mark :{i + 1}\n".encode())
        parts.append(f"author {name} <dev{i % authors}@example.com> {t} +0000\n".encode())
        parts.append(f"committer {name} <dev{i % authors}@example.com> {t} +0000\n".encode())
        parts.append(f"data {len(msg)}\n".encode() + msg)
        parts.append(f"M 100644 inline {dirs[i % len(dirs)]}/f{i % 50}.cc\n".encode())
        parts.append(f"data {len(blob)}\n".encode() + blob + b"\n")
        if i % 100 == 99:
            parts.append(f"reset refs/tags/v0.{i // 100}.0\nfrom :{i + 1}\n\n".encode())
    subprocess.run(["git", "fast-import", "--quiet"], cwd=path, env=GIT_ENV, input=b"".join(parts), check=True)


# ---------------------------------------------------------------- fixtures
# Test modules import these two; pytest gives each importing module its own world.


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("upstream")
    return root, build_world(root)


@pytest.fixture(scope="module")
def health(world):
    from evaluator import upstream

    root, _ = world
    return upstream.measure(str(root / "up"), fork=str(root / "fork"), as_of=AS_OF, cache_dir=root / "cache")
