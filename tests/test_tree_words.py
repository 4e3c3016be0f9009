"""The tree speaks of the product: no work-period markers in any tracked file.

In: every file `git ls-files` lists from the repository root, its path and, unless it is
binary (a NUL byte in its first 8 KiB, git's own test), its text. Out: pass, or a failure
listing each `file:line` (or the path) that names a work period: the word for a work
period followed by a number (joined by a space, "-", "_" or nothing), or preceded by
"this", "next" or "next GPU". Evidence is named by model, platform and date instead
(reports/examples/<model>/<platform>/<date>/, reports/examples/kernels/<platform>-<date>/).
"session" in its other senses (an ssh or HTTP session, `setsid`, `requests.Session`)
passes. This file names the pattern, so it is the one file not read; it spells the word
in two parts, so that `git grep` for the markers finds nothing here either.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()
W = "sess" + "ion"
MARKER = re.compile(rf"\b{W}[-_ ]?\d+|\bthis {W}\b|\bnext (?:gpu )?{W}\b", re.IGNORECASE)
BINARY_PROBE = 8192


def _tracked() -> list[str]:
    if shutil.which("git") is None:
        pytest.skip("needs git to list the tracked files")
    p = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=False)
    if p.returncode != 0:
        pytest.skip(f"not a git checkout ({p.stderr.decode(errors='replace').strip()})")
    return [name for name in p.stdout.decode("utf-8", errors="surrogateescape").split("\0") if name]


def markers_in(name: str, data: bytes) -> list[str]:
    """`name:line: text` for each line of `data` (and `name` itself for its path) that
    names a work period; [] for a binary file's contents."""
    found = [f"{name}: in its path"] if MARKER.search(name) else []
    if b"\0" in data[:BINARY_PROBE]:
        return found
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if MARKER.search(line):
            found.append(f"{name}:{number}: {line.strip()[:120]}")
    return found


@pytest.mark.parametrize(
    "text",
    [
        f"see {W} 12",
        f"{W.title()}-7's sweep",
        f"{W}_3/d1",
        f"in this {W}",
        f"the next {W}",
        f"the next GPU {W}",
    ],
)
def test_a_work_period_is_found(text):
    assert markers_in("notes.md", text.encode()) == [f"notes.md:1: {text}"]
    assert markers_in(f"reports/{text}/x.json", b"{}") == [f"reports/{text}/x.json: in its path"]


@pytest.mark.parametrize(
    "text",
    [
        "an ssh session to the GPU machine",
        "requests.Session()",
        "os.setsid()",
        "a git session",
        "sessions of the fleet",
        "session timeout 30 s",
    ],
)
def test_session_in_its_other_senses_passes(text):
    assert markers_in("notes.md", text.encode()) == []


def test_a_binary_file_is_not_read_but_its_path_is():
    assert markers_in("report.pdf", b"%PDF\0 " + f"{W} 12".encode()) == []
    assert markers_in(f"{W}5/report.pdf", b"%PDF\0") == [f"{W}5/report.pdf: in its path"]


def test_no_tracked_file_names_a_work_period():
    found = []
    for name in _tracked():
        if name == SELF:
            continue
        path = ROOT / name
        data = path.read_bytes() if path.is_file() else b""
        found += markers_in(name, data)
    assert not found, (
        f"{len(found)} work-period markers; name the evidence by model, platform and date instead:\n" + "\n".join(found)
    )
