"""Baseline ids: the names a baseline goes by in the store's folders and git tags.

In: a model name (zoo name, `pkg.mod:factory`, a factory file), a platform slug, a run's
ISO timestamp, or an id typed on the command line. Out: slugs that are safe both as path
components and as git ref components, ids `<model>/<platform>/<YYYY>Q<n>-<k>`, the quarter
a run belongs to, and the keys that sort versions and timestamps. No I/O, no git.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re

from ..errors import BaselineError

VERSION_RE = re.compile(r"^(\d{4})Q([1-4])-([1-9]\d*)$")


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
    """"bert-tiny" -> "bert-tiny"; "pkg.mod:factory" -> "pkg.mod-factory"."""
    s = slug(name)
    if not s:
        raise BaselineError(f"model name {name!r} has no letters or digits to name a baseline after; "
                            "give the model a name")
    return s


def platform_slug(platform: str) -> str:
    s = slug(platform)
    if not s:
        raise BaselineError(f"platform {platform!r} is empty; the hardware stage must set "
                            "Hardware.platform (e.g. 'h200', 'cpu-x86_64')")
    return s


def baseline_id(model: str, platform: str, version: str) -> str:
    return f"{model_slug(model)}/{platform_slug(platform)}/{version}"


def parse_id(baseline_id: str) -> tuple[str, str, str]:
    """(model, platform, version) of an id as typed; refuses anything the store could not hold."""
    parts = str(baseline_id).strip().strip("/").split("/")
    if len(parts) != 3 or not VERSION_RE.match(parts[2]) or any(slug(p) != p for p in parts[:2]):
        raise BaselineError(f"baseline id {baseline_id!r} is not <model>/<platform>/<YYYY>Q<n>-<k> "
                            "(e.g. bert-tiny/h200/2026Q4-1); `evaluate baseline list` shows the ids")
    return parts[0], parts[1], parts[2]


def version_key(version: str) -> tuple[int, int, int]:
    m = VERSION_RE.match(version)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0, 0, 0)


def parse_time(text: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    # Naive timestamps are taken as UTC so runs from different machines still sort together.
    return when.astimezone(dt.timezone.utc) if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def quarter(created: str) -> str:
    """"2026-11-29T12:00:00+00:00" -> "2026Q4": versions are numbered within a quarter."""
    try:
        when = parse_time(created)
    except (TypeError, ValueError):
        raise BaselineError(f"RunResult.created {created!r} is not an ISO timestamp; "
                            "set it with datetime.now(timezone.utc).isoformat()") from None
    return f"{when.year}Q{(when.month - 1) // 3 + 1}"
