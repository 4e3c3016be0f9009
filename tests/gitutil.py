"""Running git in a test's repositories, without the caller's GIT_* environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git(path: Path, *args: str, check: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, env=env)
    if check:
        assert done.returncode == 0, done.stderr
    return done.stdout.strip()
