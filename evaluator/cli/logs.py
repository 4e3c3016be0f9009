"""Other tools' output during a run: kept in a file, off the terminal.

In: a file path and whether the user asked for everything (`-v`). Out: a context under
which other libraries' logging (TileLang's compile lines, Inductor's "No valid triton
configs" tracebacks), Python warnings, and anything written to the process's standard
error (Inductor's AUTOTUNE tables, TVM's vectorization warnings from C++) go to that file,
while the terminal keeps the run's own progress and results (standard output). With `-v`
nothing is moved. The run's own errors are printed after the context has put everything
back, so they still reach the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Iterator

# Loggers whose own handlers print to the terminal (TileLang installs one; torch._logging
# configures "torch" with propagate off): their stream handlers are set aside for the run.
_TALKERS = ("tilelang", "torch", "triton", "transformers", "timm", "ray", "weasyprint", "fontTools", "jax")


def _stream_handlers(logger: logging.Logger) -> list[logging.Handler]:
    return [
        h for h in logger.handlers if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
    ]


@contextlib.contextmanager
def third_party_output(path: Path, verbose: bool = False) -> Iterator[Path | None]:
    """Send other tools' output to `path` (made, with its folder) until the block ends;
    yields the path, or None with `verbose` (nothing moved)."""
    if verbose:
        yield None
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    log = open(path, "a", buffering=1, encoding="utf-8", errors="replace")
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    root = logging.getLogger()
    saved: list[tuple[logging.Logger, list[logging.Handler], bool]] = []
    names = set(_TALKERS) | {n for n in logging.Logger.manager.loggerDict if n.split(".")[0] in _TALKERS}
    handler.setLevel(logging.INFO)
    for name in sorted(names):
        logger = logging.getLogger(name)
        streams = _stream_handlers(logger)
        if not streams:
            continue  # it prints nothing of its own (or reaches the root, which writes to the file)
        saved.append((logger, streams, logger.propagate))
        for h in streams:
            logger.removeHandler(h)
        logger.addHandler(handler)  # where it printed, it writes to the file instead
        logger.propagate = False
    root_streams = _stream_handlers(root)
    for h in root_streams:
        root.removeHandler(h)
    root.addHandler(handler)
    logging.captureWarnings(True)
    sys.stderr.flush()
    saved_fd = os.dup(2)
    saved_stderr = sys.stderr
    os.dup2(log.fileno(), 2)  # C++ (TVM) and subprocesses write to the file descriptor itself
    sys.stderr = log
    try:
        yield path
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        sys.stderr = saved_stderr
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        logging.captureWarnings(False)
        root.removeHandler(handler)
        for h in root_streams:
            root.addHandler(h)
        for logger, streams, propagate in saved:
            logger.removeHandler(handler)
            for h in streams:
                logger.addHandler(h)
            logger.propagate = propagate
        log.close()


def adopt(log: Path | None, run_dir: Path) -> Path | None:
    """Move the log, still open, into the run's folder the moment the folder exists (an
    open file keeps writing to its moved inode), so that a run killed before it ends leaves
    no log beside the run folders. Returns where the log is now."""
    if log is None or not log.exists() or (run_dir / "third_party.log").exists():
        return log
    dest = run_dir / "third_party.log"
    try:
        log.replace(dest)
    except OSError:
        return log
    return dest


def settle(log: Path | None, run_dir: Path | None) -> Path | None:
    """Move the log into the run's folder (as third_party.log) once the folder is known;
    an empty log is removed. Returns where the log is, or None."""
    if log is None or not log.exists():
        return None
    if log.stat().st_size == 0:
        log.unlink()
        return None
    if run_dir is not None and run_dir.is_dir():
        dest = run_dir / "third_party.log"
        if log == dest:
            return dest
        with contextlib.suppress(OSError):
            if dest.exists():  # a resumed run adds to the first part's
                dest.write_text(dest.read_text(errors="replace") + log.read_text(errors="replace"))
                log.unlink()
            else:
                log.replace(dest)
            return dest
    return log
