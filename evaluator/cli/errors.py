"""The command line's one error handler, and the finder of the run folder it names.

In: an exception escaping a command. Out: one line on stderr and an exit code: an
`EvaluatorError` (bad input, an unusable environment) is "error: <message>", exit 2; any
other exception is a bug, "error: internal error <Type>: <message> (full traceback in
<file>)", exit 2, the traceback written into the run folder when there is one; Ctrl-C is
"interrupted; finished stages are kept in <run folder>; continue with: evaluate --resume
<run folder>", exit 130 (the command only where --resume can take the folder up). Every
command goes through `reported_errors` (the main command directly, the sub-commands
through `one_line_errors`), so they all fail the same way.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import sys
import tempfile
import traceback
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterator

import typer

from ..errors import EvaluatorError

try:  # typer >= 0.2x carries its own click; before that its usage errors were click's
    from typer import TyperException as UsageError
except ImportError:  # pragma: no cover - older typer
    from click.exceptions import ClickException as UsageError


def say_error(text: str) -> None:
    # Plain print: an error is one line whatever the width, so scripts can grep it.
    print(re.sub(r"\s*[\r\n]+\s*", " ", text).strip(), file=sys.stderr, flush=True)


def _short(text: str, limit: int = 300) -> str:
    # An unexpected exception's message can be pages long (a tensor repr); the whole of
    # it is in the traceback file.
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _save_traceback(exc: BaseException, folders: list[Path | None]) -> str:
    """Write the traceback (causes included) into the first folder that takes it, else a
    temp file; the path written, or why none could be."""
    text = f"evaluate {' '.join(sys.argv[1:])}\n{datetime.now().isoformat(timespec='seconds')}\n\n" + "".join(
        traceback.format_exception(exc)
    )
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for folder in folders:
        if folder is None:
            continue
        path = folder / "traceback.txt" if (folder / "results.json").exists() else folder / f"traceback-{stamp}.txt"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return str(path)
        except OSError:
            continue
    try:
        fd, name = tempfile.mkstemp(prefix="evaluate-traceback-", suffix=".txt")
        with open(fd, "w") as f:
            f.write(text)
        return name
    except OSError as e:
        return f"nowhere: could not write a file ({e.strerror})"


def _resume_hint(folder: Path) -> str:
    """ "; continue with: evaluate --resume <folder>" when `--resume` can take the folder up
    (it has its config and results, and its baseline is not recorded yet); the `evaluate
    report` command that renders it when the baseline is recorded but the report is not;
    else ""."""
    try:
        if not (folder / "config.json").is_file():
            return ""
        ref = json.loads((folder / "results.json").read_text()).get("baseline")
        if ref is not None:
            # Recorded, nothing left to resume: the report (stopped while rendering) comes from the store.
            if (folder / "report.html").is_file():
                return ""
            return (
                f"; its baseline {ref['tag']} is recorded; render its report with: evaluate report "
                f"--baseline {shlex.quote(ref['tag'])} --store {shlex.quote(str(ref['store']))} --out "
                f"{shlex.quote(str(folder))}"
            )
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return ""
    return f"; continue with: evaluate --resume {shlex.quote(str(folder))}"


def _call(hint: Callable[[], Path | None]) -> Path | None:
    try:
        return hint()
    except Exception:  # a hint that fails must not hide the error being reported
        return None


@contextmanager
def reported_errors(
    *, run_dir: Callable[[], Path | None] = lambda: None, scratch: Callable[[], Path | None] = lambda: None
) -> Iterator[None]:
    """The CLI's one error handler, around every command.

    `EvaluatorError` -> "error: <message>", exit 2. Any other exception -> "error: internal
    error <Type>: <message> (full traceback in <file>)", exit 2, the file being in the run
    folder (`run_dir()`), else in `scratch()`, else a temp file. Ctrl-C -> "interrupted;
    finished stages are kept in <run folder>; continue with: evaluate --resume <run
    folder>", exit 130. Exits the commands ask for (`typer.Exit`, e.g. the verdict's exit
    1) and click's own usage errors pass through.
    """
    try:
        yield
    except (typer.Exit, typer.Abort, UsageError):
        raise
    except EvaluatorError as exc:
        say_error(f"error: {exc}")
        raise typer.Exit(2) from exc
    except KeyboardInterrupt as exc:
        where = getattr(exc, "run_dir", None) or _call(run_dir)
        say_error(
            f"interrupted; finished stages are kept in {where}{_resume_hint(Path(where))}"
            if where
            else "interrupted; nothing was recorded"
        )
        raise typer.Exit(130) from None
    except Exception as exc:
        where = getattr(exc, "run_dir", None) or _call(run_dir)
        path = _save_traceback(exc, [Path(where) if where else None, _call(scratch)])
        say_error(f"error: internal error {type(exc).__name__}: {_short(exc)} (full traceback in {path})")
        raise typer.Exit(2) from exc


def one_line_errors(command: Callable) -> Callable:
    """Decorator form of `reported_errors` for the sub-commands (no run folder of their own)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        with reported_errors():
            return command(*args, **kwargs)

    return wrapper


class RunFolder:
    """Finds the run folder this invocation's pipeline made, for the error and interrupt
    messages: the pipeline creates it early but cannot return it when a stage raises."""

    def __init__(self) -> None:
        self.reports: Path | None = None
        self.runs: Path | None = None
        self.before: set[Path] = set()
        self.prefixes: tuple[str, ...] = ()

    def watch(self, cfg) -> None:
        from ..pipeline import slug

        self.reports = cfg.output.reports
        self.runs = cfg.output.reports / "runs"
        self.before = set(self.runs.iterdir()) if self.runs.is_dir() else set()
        self.prefixes = tuple({f"{slug(cfg.model.label)}-", f"{slug(cfg.model.name)}-"})

    def find(self) -> Path | None:
        if self.runs is None or not self.runs.is_dir():
            return None
        new = [p for p in self.runs.iterdir() if p.is_dir() and p not in self.before]
        # Another run writing into the same reports folder may have made one too.
        ours = [p for p in new if p.name.startswith(self.prefixes)] or new
        return max(ours, key=lambda p: p.stat().st_mtime, default=None)
