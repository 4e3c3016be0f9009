"""A toolchain as a worker process: a Python interpreter, the TileLang it brings, and the
worker that builds, verifies and times kernels in it.

In: an interpreter (`--toolchain PYTHON` for the candidate; this process's own for the
current toolchain), the run folder (for the worker's log and the package link), and
requests for `evaluate upgrade`'s handlers (side.py). Out: `check_interpreter` (a
`ConfigError`, exit 2, for a path that is not an executable file), `probe` (the Python,
torch and TileLang versions the interpreter brings, or a `ConfigError` saying why its
TileLang does not import), and `ToolchainWorker`:
started early so its imports overlap the profiling and tuning, it answers each request
with a dict — a worker that crashes or hangs answers "crashed" with its reason and is
replaced before the next request; one that cannot start answers "not_started" with the
reason (its traceback's last line, or what a wrapper script printed), and `info()` is the
`Toolchain` record either way.

The worker protocol is the tuner's (tuning/isolation.py: `start_interpreter`): the same
messages, the same build and run timeouts, the same crash and hang handling. The worker
imports this checkout's evaluator through a folder on its PYTHONPATH holding only a link
to the package; the candidate's environment drops this process's PYTHONPATH (it belongs
to the current toolchain) and, unless TILELANG_CACHE_DIR is set, gets a TileLang kernel
cache of its own, so a fork that reports the same version number never loads kernels
another TileLang compiled. The current side keeps this process's environment: its worker
imports the TileLang this process tuned with.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..results import Toolchain
from ..tuning import isolation

BUILD_TIMEOUT_S = isolation.BUILD_TIMEOUT_S  # a cache miss compiles from scratch
CHECK_TIMEOUT_S = 600.0  # verifying on every seed and the awkward shape, readying the samplers
SAMPLE_TIMEOUT_S = 120.0  # one timing sample: a hung kernel, not a slow one
PROBE_TIMEOUT_S = 300.0  # importing TileLang the first time can take a while (its C library)
CACHE_HOME = Path.home() / ".cache" / "evaluator" / "toolchains"

# Run by the other interpreter: its versions as one JSON line, or why an import failed.
_PROBE = (
    "import json, platform, sys\n"
    "out = {'python': platform.python_version(), 'executable': sys.executable}\n"
    "for name in ('torch', 'tilelang'):\n"
    "    try:\n"
    "        out[name] = str(getattr(__import__(name), '__version__', 'unknown'))\n"
    "    except BaseException as exc:\n"
    "        out['error'] = f'{name} does not import: {type(exc).__name__}: {exc}'.splitlines()[0][:300]\n"
    "        break\n"
    "print('EVALUATOR-PROBE ' + json.dumps(out))\n"
)


def check_interpreter(path: str, option: str = "--toolchain") -> str:
    """The interpreter's path, absolute; ConfigError when it is not an executable file."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ConfigError(
            f"{option} {path}: no such file; give a Python interpreter with the other TileLang installed, "
            "e.g. /opt/tl-next/bin/python"
        )
    if p.is_dir() or not os.access(p, os.X_OK):
        raise ConfigError(f"{option} {path}: not an executable file; give a Python interpreter, e.g. venv/bin/python")
    return str(p.absolute())


def probe(python: str, option: str = "--toolchain") -> dict[str, str]:
    """What the interpreter brings: {python, executable, torch, tilelang} versions, read by
    running it (in the candidate's environment: its own site-packages, no PYTHONPATH of
    this process). ConfigError when it is not a Python or its torch or TileLang does not
    import, so a bad --toolchain stops the command before any profiling or tuning."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    try:
        done = subprocess.run(
            [python, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{option} {python}: importing torch and TileLang took over {PROBE_TIMEOUT_S:g}s") from None
    except OSError as exc:
        raise ConfigError(
            f"{option} {python}: cannot run it ({exc.strerror or exc}); give a Python interpreter"
        ) from None
    line = next((x for x in done.stdout.splitlines() if x.startswith("EVALUATOR-PROBE ")), None)
    if line is None:
        said = [x.strip() for x in (done.stderr or done.stdout).splitlines() if x.strip()]
        why = said[-1][:200] if said else f"it ran the probe and printed nothing, exit code {done.returncode}"
        raise ConfigError(f"{option} {python} is not a Python interpreter that runs ({why})")
    out = json.loads(line.split(" ", 1)[1])
    if "error" in out:
        raise ConfigError(f"{option} {python}: {out['error']}; install TileLang (and torch) into that interpreter")
    return out


def environment(role: str, python: str, link_dir: Path) -> dict[str, str]:
    """The worker's whole environment (see the module's docstring)."""
    env = dict(os.environ)
    link = str(isolation.package_path(link_dir))
    if role == "current":
        env["PYTHONPATH"] = os.pathsep.join(p for p in (link, os.environ.get("PYTHONPATH", "")) if p)
        return env
    env.pop("PYTHONHOME", None)
    env["PYTHONPATH"] = link
    if "TILELANG_CACHE_DIR" not in os.environ:
        digest = hashlib.sha256(os.path.realpath(python).encode()).hexdigest()[:12]
        env["TILELANG_CACHE_DIR"] = str(CACHE_HOME / digest / "tilelang-cache")
    return env


class ToolchainWorker:
    """One toolchain's worker, restarted after a crash; see the module's docstring."""

    def __init__(self, role: str, python: str | None, folder: Path):
        self.role = role
        self.python = python or sys.executable
        self.folder = folder
        self.log = folder / f"toolchain-{role}.log"
        self.env = environment(role, self.python, folder / "pythonpath")
        self.label = f"the {role} toolchain's worker ({self.python})"
        self.worker: isolation.Worker | None = None
        self.start_error = ""
        self.versions: dict[str, str] = {}
        self.restarts = 0

    def start(self) -> None:
        """Start the worker if there is none; it imports in the background."""
        if self.worker is not None or self.start_error:
            return
        try:
            self.worker = isolation.start_interpreter(self.python, env=self.env, log=self.log, label=self.label)
        except isolation.WorkerStartError as exc:
            self.start_error = str(exc)

    def ready(self) -> bool:
        """Whether the worker has imported and can take requests (waits for it)."""
        self.start()
        if self.worker is None:
            return False
        try:
            self.worker.wait_ready()
        except isolation.WorkerStartError as exc:
            self.worker, self.start_error = None, str(exc)
            return False
        self.versions = dict(self.worker.info.get("versions", {}))
        return True

    def info(self) -> Toolchain:
        v = self.versions
        return Toolchain(
            role=self.role,
            python=self.python,
            executable=v.get("executable", ""),
            python_version=v.get("python", ""),
            torch=v.get("torch", ""),
            tilelang=v.get("tilelang", ""),
            error=self.start_error,
        )

    def ask(self, request: dict[str, Any], *, timeout_s: float, what: str) -> dict[str, Any]:
        """The worker's answer to one request; "not_started" or "crashed" with the reason
        where there is no answer. A crashed or hung worker is replaced for the next request."""
        if not self.ready():
            return {"status": "not_started", "error": self.start_error}
        try:
            return self.worker.request(request, BUILD_TIMEOUT_S, timeout_s, what)
        except isolation.WorkerDied as died:
            self.worker.stop(graceful=False)
            self.worker = None
            self.restarts += 1
            self.start()  # a fresh one imports while the caller records this one
            then = "the worker was killed and a fresh one started" if isinstance(died, isolation.WorkerHung) else ""
            return isolation.crashed(died, then or "a fresh worker was started")

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None
