"""Baseline ids: the names a baseline goes by in the store's folders and git tags.

In: a model name (zoo name, `pkg.mod:factory`, a factory file), a platform slug, a run's
ISO timestamp, a writer id, or an id typed on the command line. Out: slugs that are safe
both as path components and as git ref components, ids `<model>/<platform>/<version>`, the
quarter a run belongs to, and the keys that sort versions and timestamps. No I/O, no git.

The id scheme. A version is `<YYYY>Q<n>-<k>` in a store of one's own, and
`<YYYY>Q<n>-<k>-<writer>` in a clone of a shared remote, e.g. `bert-base/h200/2026Q4-3-5f0c2a`:

- `<YYYY>Q<n>` is the quarter of the run's own timestamp; `<k>` counts from 1 within a model,
  platform and quarter, one above the highest `<k>` the clone knows of (its branch and its
  tags, which include everything pulled), so ids sort by (year, quarter, k, writer).
- `<writer>` is 6 hex digits drawn at random once per clone (kept in the clone's git config,
  `evaluator.writer`, and drawn again when the clone is copied to another host or folder,
  avoiding every writer already seen). Two hosts that record the same model and platform
  at the same time, each not yet having the other's baseline, pick the same `<k>` and
  different writers: both ids, folders and tags are unique, so both land on the remote
  under the ids they were recorded with (the later push is rebased, not renamed), and an
  offline GPU box can print its id in its report long before it pushes.
- Should an id still collide on push (a clone copied byte for byte onto an identical host,
  or plain `-<k>` baselines recorded before the store was shared), the one already on the
  remote keeps it and the local baseline is renumbered before pushing: its folder moves to
  the next free `<k>` with this clone's writer (drawn afresh when it was the one that
  collided), its manifest and tag follow, and `push` reports the old and new id. Only a
  baseline not yet on the remote can be renumbered: once pushed, an id is final. Tags are
  only ever created on the remote, never moved or overwritten, so they never collide.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re

from ..errors import BaselineError

VERSION_RE = re.compile(r"^(\d{4})Q([1-4])-([1-9]\d*)(?:-([0-9a-f]{6}))?$")
WRITER_RE = re.compile(r"^[0-9a-f]{6}$")


def slug(text: str) -> str:
    """Lower-case, path- and ref-safe; idempotent so a slug can be passed where a name is."""
    s = re.sub(r"[^a-z0-9._-]+", "-", str(text).strip().lower())
    s = re.sub(r"\.{2,}", ".", s)
    s = re.sub(r"-{2,}", "-", s).strip("-._")
    if s.endswith(".lock"):  # git refuses ref components ending in .lock
        s = s[:-5] + "-lock"
    if len(s) > 80:
        s = s[:67].rstrip("-._") + "-" + hashlib.sha256(s.encode()).hexdigest()[:12]
    return s


def model_slug(name: str) -> str:
    """ "bert-tiny" -> "bert-tiny"; "pkg.mod:factory" -> "pkg.mod-factory"."""
    s = slug(name)
    if not s:
        raise BaselineError(
            f"model name {name!r} has no letters or digits to name a baseline after; give the model a name"
        )
    return s


def platform_slug(platform: str) -> str:
    s = slug(platform)
    if not s:
        raise BaselineError(
            f"platform {platform!r} is empty; the hardware stage must set Hardware.platform (e.g. 'h200', 'cpu-x86_64')"
        )
    return s


def baseline_id(model: str, platform: str, version: str) -> str:
    return f"{model_slug(model)}/{platform_slug(platform)}/{version}"


def parse_id(baseline_id: str) -> tuple[str, str, str]:
    """(model, platform, version) of an id as typed; refuses anything the store could not hold."""
    parts = str(baseline_id).strip().strip("/").split("/")
    if len(parts) != 3 or not VERSION_RE.match(parts[2]) or any(slug(p) != p for p in parts[:2]):
        raise BaselineError(
            f"baseline id {baseline_id!r} is not <model>/<platform>/<YYYY>Q<n>-<k>[-<writer>] "
            "(e.g. bert-tiny/h200/2026Q4-1 or bert-tiny/h200/2026Q4-1-5f0c2a); "
            "`evaluate baseline list` shows the ids"
        )
    return parts[0], parts[1], parts[2]


def version(period: str, k: int, writer: str | None = None) -> str:
    """("2026Q4", 3, "5f0c2a") -> "2026Q4-3-5f0c2a"; without a writer (a store of one's own) "2026Q4-3"."""
    return f"{period}-{k}-{writer}" if writer else f"{period}-{k}"


def version_parts(version: str) -> tuple[str, int, str] | None:
    """ "2026Q4-3-5f0c2a" -> ("2026Q4", 3, "5f0c2a"); "2026Q4-3" -> ("2026Q4", 3, ""); None if not a version."""
    m = VERSION_RE.match(version)
    return (f"{m.group(1)}Q{m.group(2)}", int(m.group(3)), m.group(4) or "") if m else None


def version_key(version: str) -> tuple[int, int, int, str]:
    """Sort key: year, quarter, k, then the writer (a plain `-k` sorts before its suffixed twins)."""
    m = VERSION_RE.match(version)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) or "") if m else (0, 0, 0, "")


def parse_time(text: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    # Naive timestamps are taken as UTC so runs from different machines still sort together.
    return when.astimezone(dt.timezone.utc) if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def quarter(created: str) -> str:
    """ "2026-11-29T12:00:00+00:00" -> "2026Q4": versions are numbered within a quarter."""
    try:
        when = parse_time(created)
    except (TypeError, ValueError):
        raise BaselineError(
            f"RunResult.created {created!r} is not an ISO timestamp; set it with datetime.now(timezone.utc).isoformat()"
        ) from None
    return f"{when.year}Q{(when.month - 1) // 3 + 1}"
