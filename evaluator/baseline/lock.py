"""The store's lock: one writer at a time, across processes and across a crash.

In: a store folder and how long to wait. Out: a context manager holding an exclusive
flock on `<store>/.evaluator.lock` (which says who holds it, for the message a waiting
run prints); the kernel releases it when the holder exits or is killed, so a crashed
run never leaves the store locked. Recording a baseline, initialising a store and saving
a tuned config all take it. No git.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path
from typing import Iterator

from ..errors import BaselineError

LOCK_NAME = ".evaluator.lock"
LOCK_TIMEOUT_S = 120.0


@contextlib.contextmanager
def locked(root: Path, timeout: float) -> Iterator[None]:
    """Exclusive flock on the store's lock file; released by the kernel if the holder dies."""
    lock_path = root / LOCK_NAME
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o664)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except (BlockingIOError, PermissionError):
                if time.monotonic() >= deadline:
                    holder = lock_path.read_text(errors="replace").strip() or "another process"
                    raise BaselineError(
                        f"baseline store {root} stayed locked by {holder} for {timeout:.0f} s; "
                        "wait for that run to finish and retry"
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        yield
    finally:
        os.close(fd)
