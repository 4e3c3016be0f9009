"""The option checks that need nothing of the run's config: dates, portability targets,
counts and durations, folders the run will write (given, and writable), checklists and git
repositories.

In: one option's raw value (and its flag, for the message). Out: the parsed value, or
`ConfigError` whose message is one sentence naming the option and what it expects.
`config.build` calls them all before any work; the command line's other commands
(`evaluate baselines`, `evaluate bench`) reuse them. Like config.py, this module imports
neither torch nor a kernel at the top.
"""

from __future__ import annotations

import math
import os
import tempfile
from datetime import datetime
from pathlib import Path

from ..errors import ConfigError, EvaluatorError


def parse_as_of(text: str | None) -> datetime | None:
    """None for no --as-of; else upstream's reading of it: a bare date is that whole day
    in UTC (until 23:59:59.999999), a timestamp is exact."""
    if not text:
        return None
    from .. import upstream

    try:
        return upstream.parse_as_of(text)
    except EvaluatorError as exc:
        raise ConfigError(
            f"--as-of '{text}' is not a date; use YYYY-MM-DD (the whole day, UTC) or an "
            "ISO timestamp such as 2026-01-31T12:00:00+00:00"
        ) from exc


# ---------------------------------------------------------------- checks, one per kind of option


def parse_targets(text: str | None, opt: str = "--targets") -> tuple[str, ...]:
    """--targets a100,h100|all|none -> target keys, () for none; None (not given) is the
    default set. Unknown names: one line naming the known targets, before any work."""
    from ..device import targets as T

    words = [w.strip().lower() for w in (text or "").split(",") if w.strip()]
    known = f"known targets: {', '.join(T.TARGETS)}, local (this machine's GPU), all, or none to skip the check"
    if text is not None and not words:
        raise ConfigError(f"{opt} was given no target; {known}")
    if "none" in words:
        if len(words) > 1:
            raise ConfigError(
                f"{opt} {text}: 'none' skips the portability check and cannot be combined with targets; {known}"
            )
        return ()
    bad = [w for w in words if w not in T.TARGETS and w not in ("all", "local")]
    if bad:
        raise ConfigError(f"{opt} {text}: unknown target '{bad[0]}'; {known}")
    try:
        return tuple(s.key for s in T.resolve(words or None))
    except ConfigError as exc:  # 'local' on a machine without a GPU
        raise ConfigError(f"{opt} {text}: {exc}") from None


def check_count(opt: str, value: int | None, minimum: int) -> None:
    """An integer option that must be at least `minimum` (None: not given)."""
    if value is not None and value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
        raise ConfigError(f"{opt} must be {what}, got {value}")


def check_share(opt: str, value: float) -> None:
    """A share of a whole: above 0 and at most 1."""
    if not (math.isfinite(value) and 0 < value <= 1):
        raise ConfigError(f"{opt} must be a share above 0 and at most 1 (0.95 is 95%), got {value:g}")


def check_seconds(opt: str, value: float | None) -> None:
    """A duration in seconds: finite and not negative (0 is allowed: it means skip or minimum)."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"{opt} must be a number of seconds, 0 or more, got {value:g}")


def _can_write(folder: Path) -> bool:
    # os.access answers from the permission bits; ACLs, network filesystems and quotas can
    # still refuse a write, so also create (and drop) a temporary file. TemporaryFile is
    # unnamed on Linux (O_TMPFILE): a concurrent run listing the store never sees it.
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        return False
    return True


def check_folder_given(opt: str, value: str | os.PathLike | None) -> None:
    """A folder option given as an empty (or blank) string: one line, before any work. Left
    to Path, "" is ".", and the run would write into whatever folder it was started from."""
    if value is not None and not os.fspath(value).strip():
        got = "an empty string" if not os.fspath(value) else f"only blanks ({os.fspath(value)!r})"
        raise ConfigError(f"{opt} needs a folder; got {got}")


def check_text_given(opt: str, value: str | None, example: str) -> None:
    """A text option given as an empty (or blank) string: one line, before any work, rather
    than read as the option left out (the default checklist, no upstream, --ops's families)."""
    if value is not None and not str(value).strip():
        raise ConfigError(f"{opt} was given an empty value; give {example}, or leave {opt} out")


def check_writable_folder(opt: str, path: Path) -> None:
    """A folder the run will write into: an existing writable folder, or one that can be
    created (its nearest existing parent is a writable folder). Nothing is created here."""
    path = Path(path).expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{opt} {path} is a file; give a folder (a new one, or an existing one you can write to)")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{opt} {path} cannot be created: {parent} is a file; give a folder you can write to")
    if not _can_write(parent):
        if parent == path:
            raise ConfigError(f"{opt} {path} is not writable; give a folder you can write to (or fix its permissions)")
        raise ConfigError(f"{opt} {path} cannot be created: {parent} is not writable; give a folder you can write to")


def find_checklist(name_or_path: str | Path) -> Path:
    """--checklist: a file, or a name (a team's ./checklists/NAME.yaml before a shipped one)."""
    from .. import resources

    found = resources.find_checklist(name_or_path)
    if found is None:
        raise ConfigError(
            f"checklist '{name_or_path}' does not exist; give a YAML file or a checklist name: "
            f"{', '.join(resources.checklist_names())} (./checklists/NAME.yaml, then shipped)"
        )
    return found


def check_repo(opt: str, value: str | None) -> None:
    if not value or "://" in value or value.startswith("git@"):
        return  # URLs are cloned (and checked) by the upstream stage
    p = Path(value).expanduser()
    if not p.exists():
        raise ConfigError(f"{opt} '{value}' does not exist; give a local git clone or a URL")
    if not ((p / ".git").exists() or ((p / "HEAD").is_file() and (p / "objects").is_dir())):
        raise ConfigError(f"{opt} '{value}' is not a git repository; give the folder of a git clone")
