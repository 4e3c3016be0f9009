"""Run tuning candidates in a separate, long-lived worker process.

In: one candidate at a time — a family (named by module and attribute, so the worker can
import it), a shape, dtype, config, target, device, timing policy and tolerance. Out: a
plain dict `{"status", "latency_ms", "error", "build_s"}` with the same statuses the
in-process tuner records, plus "crashed" when the candidate killed the worker or hung.

Why: a kernel that segfaults, or faults on the GPU (illegal address, launch failure),
takes its process down or leaves the CUDA context unusable for every later launch. In
the worker that costs one candidate: the failure is recorded with its reason and a fresh
worker is started. The parent compiles candidates first (in threads), which fills
TileLang's on-disk kernel cache, so the worker's build of the same config is a cache
load (40-50 ms measured on the C backend, against 2.4-4 s to compile it). A worker
costs an import of torch and tilelang (4.5 s to ready on an idle 2-core box, ~10 s while
it compiles), so one is kept for the whole run and reused by every tune; `shutdown`
(also registered with atexit) stops it. Like any 'spawn' child, the worker re-imports
the main script: a script that tunes without an `if __name__ == "__main__":` guard makes
the worker fail to start, and its candidates then run in-process (their error says so).
The worker judges a candidate with `measure.measure`, as the in-process tuner does; the
tuner imports this module, never the other way round.
"""

from __future__ import annotations

import atexit
import importlib
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
from typing import Any

# An error text with one of these means the CUDA context is gone: every later launch in
# that process fails too, so the worker must be replaced even though it is alive.
POISON_MARKERS = ("illegal memory access", "unspecified launch failure", "misaligned address", "cuda error",
                  "illegal instruction", "device-side assert", "an illegal address")

START_TIMEOUT_S = 300.0  # importing torch + tilelang (+ CUDA init) on a slow, loaded box
BUILD_TIMEOUT_S = 900.0  # a cache miss in the worker compiles from scratch (nvcc can be slow)

_LOCK = threading.RLock()
_WORKER: "_Worker | None" = None
_STATS: dict[str, Any] = {"started": 0, "restarts": 0, "crashes": 0, "timeouts": 0, "poisoned": 0,
                          "spawn_s": None, "import_s": None}


class WorkerStartError(RuntimeError):
    """The worker process could not start (a broken environment, not a bad candidate)."""


def family_spec(family: Any) -> tuple | None:
    """How the worker finds `family`: ("attr", module, name) for a module-level object,
    ("registry", name) for a registered one, ("pickle", bytes) for anything that
    survives a pickle round trip; None when the worker cannot get it at all."""
    module = type(family).__module__
    mod = sys.modules.get(module) if module != "__main__" else None
    for attr, value in (vars(mod).items() if mod is not None else ()):
        if value is family:
            return ("attr", module, attr)
    from .kernels import REGISTRY
    if REGISTRY.get(family.name) is family:
        return ("registry", family.name)
    try:
        blob = pickle.dumps(family)
        pickle.loads(blob)  # a wrapper whose __getattr__ breaks unpickling fails here, not in the worker
        return ("pickle", blob)
    except Exception:
        return None


def is_poisoned(error: str) -> bool:
    text = error.lower()
    return any(marker in text for marker in POISON_MARKERS)


def stats() -> dict[str, Any]:
    """Counters since the process started: workers started, restarts (a worker replaced
    after a candidate killed, hung or poisoned it), and the last spawn's cost."""
    with _LOCK:
        return dict(_STATS)


def warm_up() -> None:
    """Start the worker now if there is none; it imports in the background while the
    caller compiles."""
    with _LOCK:
        _current()


def run_candidate(spec: tuple, shape: tuple, dtype: str, config: dict, target: str, device: str, policy: Any,
                  atol: float, rtol: float, *, timeout_s: float = 60.0,
                  build_timeout_s: float = BUILD_TIMEOUT_S) -> dict[str, Any]:
    """Build, run, check and time one config in the worker. `timeout_s` bounds running,
    checking and timing (a hung kernel); building gets `build_timeout_s`. Raises
    WorkerStartError only when a fresh worker cannot start."""
    request = {"family": spec, "shape": tuple(shape), "dtype": dtype, "config": dict(config), "target": target,
               "device": device, "policy": policy, "atol": atol, "rtol": rtol}
    global _WORKER
    with _LOCK:
        worker = _current()
        try:
            worker.wait_ready()
        except WorkerStartError:
            worker.stop(graceful=False)
            _WORKER = None
            raise
        try:
            result = worker.request(request, build_timeout_s, timeout_s)
        except _WorkerHung as hung:
            _STATS["timeouts"] += 1
            _replace()
            return {"status": "crashed", "latency_ms": None, "build_s": hung.build_s,
                    "error": f"{hung}; the worker was killed and a fresh one started"}
        except _WorkerDied as died:
            _STATS["crashes"] += 1
            _replace()
            return {"status": "crashed", "latency_ms": None, "build_s": died.build_s,
                    "error": f"{died}; a fresh worker was started"}
        if result.get("status") != "ok" and is_poisoned(result.get("error", "")):
            _STATS["poisoned"] += 1
            _replace()
            result = {**result, "error": f"{result['error']} (CUDA context poisoned; a fresh worker was started)"}
        return result


def shutdown() -> None:
    global _WORKER
    with _LOCK:
        if _WORKER is not None:
            _WORKER.stop()
            _WORKER = None


atexit.register(shutdown)


# ---------------------------------------------------------------- parent side


class _WorkerDied(Exception):
    def __init__(self, message: str, build_s: float | None = None):
        super().__init__(message)
        self.build_s = build_s


class _WorkerHung(_WorkerDied):
    pass


def _current() -> "_Worker":
    global _WORKER
    if _WORKER is None or not _WORKER.alive():
        if _WORKER is not None:  # died while idle: not any candidate's fault, but a restart all the same
            _WORKER.stop()
            _STATS["restarts"] += 1
        _WORKER = _Worker()
    return _WORKER


def _replace() -> None:
    """Discard the current worker and start the next one at once, so its imports overlap
    with whatever the caller does before the next candidate."""
    global _WORKER
    if _WORKER is not None:
        _WORKER.stop(graceful=False)
    _STATS["restarts"] += 1
    _WORKER = _Worker()


def _describe_exit(proc: multiprocessing.process.BaseProcess) -> str:
    proc.join(timeout=5)
    code = proc.exitcode
    if code is None:
        return "worker process stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"worker process died with signal {name}"
    return f"worker process exited with code {code}"


class _Worker:
    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold a CUDA context
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="evaluator-tuning-worker")
        self.t0 = time.perf_counter()
        self.proc.start()
        child.close()  # else the parent keeps the pipe open and never sees EOF when the child dies
        self.ready = False
        _STATS["started"] += 1

    def alive(self) -> bool:
        return self.proc.is_alive()

    def _recv(self, timeout: float) -> dict | None:
        """The next message, None on timeout; _WorkerDied when the process is gone."""
        ready = multiprocessing.connection.wait([self.conn, self.proc.sentinel], timeout)
        if not ready:
            return None
        if self.conn in ready or self.conn.poll():
            try:
                return self.conn.recv()
            except (EOFError, OSError):
                pass
        raise _WorkerDied(_describe_exit(self.proc))

    def wait_ready(self) -> None:
        if self.ready:
            return
        try:
            msg = self._recv(START_TIMEOUT_S)
        except _WorkerDied as died:
            raise WorkerStartError(f"tuning worker failed to start: {died}") from None
        if msg is None or "ready" not in msg:
            self.stop(graceful=False)
            raise WorkerStartError(f"tuning worker did not start within {START_TIMEOUT_S:g}s")
        self.ready = True
        _STATS["spawn_s"] = time.perf_counter() - self.t0
        _STATS["import_s"] = msg.get("import_s")

    def request(self, request: dict, build_timeout_s: float, timeout_s: float) -> dict:
        try:
            self.conn.send(request)
        except (BrokenPipeError, EOFError, OSError):
            raise _WorkerDied(_describe_exit(self.proc)) from None
        build_s = None
        stage, limit = "building", build_timeout_s
        while True:
            try:
                msg = self._recv(limit)
            except _WorkerDied as died:
                raise _WorkerDied(f"{died} while {stage} the candidate", build_s) from None
            if msg is None:
                raise _WorkerHung(f"no result after {limit:g}s while {stage} the candidate (hung kernel?)", build_s)
            if msg.get("stage") == "built":
                build_s = msg.get("build_s")
                stage, limit = "running", timeout_s
                continue
            return msg

    def stop(self, graceful: bool = True) -> None:
        if graceful and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(timeout=5)
            except (BrokenPipeError, EOFError, OSError):
                pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()


# ---------------------------------------------------------------- worker side


def _load_family(spec: tuple) -> Any:
    kind = spec[0]
    if kind == "attr":
        return getattr(importlib.import_module(spec[1]), spec[2])
    if kind == "registry":
        from . import kernels
        return kernels.get(spec[1])
    return pickle.loads(spec[1])


def _serve(conn: multiprocessing.connection.Connection) -> None:
    """The worker's loop: one request in, one result out, until None or EOF."""
    # Ctrl-C is the parent's to handle; it stops this worker through shutdown().
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    t0 = time.perf_counter()
    importlib.import_module("tilelang")  # now, so that the first candidate's build does not pay for it

    from . import measure  # torch and the kernels, counted in import_s like tilelang
    conn.send({"ready": os.getpid(), "import_s": time.perf_counter() - t0})
    families: dict[tuple, Any] = {}
    data: dict[tuple, tuple] = {}  # (family, shape, dtype, device) -> (inputs, reference): the last one only
    while True:
        try:
            req = conn.recv()
        except (EOFError, OSError):
            return
        if req is None:
            return
        conn.send(_evaluate(req, conn, measure, families, data))


def _evaluate(req: dict, conn, measure, families: dict, data: dict) -> dict[str, Any]:
    spec = req["family"]
    t0 = time.perf_counter()
    try:
        if spec not in families:
            families[spec] = _load_family(spec)
        family = families[spec]
        kernel = family.build(req["shape"], req["dtype"], req["config"], req["target"])
    except Exception as exc:
        return {"status": "compile_error", "latency_ms": None, "build_s": time.perf_counter() - t0,
                "error": measure.short_error(exc)}
    build_s = time.perf_counter() - t0
    conn.send({"stage": "built", "build_s": build_s})
    try:
        key = (spec, req["shape"], req["dtype"], req["device"])
        if key not in data:
            data.clear()
            inputs = family.make_inputs(req["shape"], req["dtype"], req["device"], 0)
            data[key] = (inputs, family.reference(*inputs))
        inputs, ref = data[key]
        status, latency, error = measure.measure(kernel, inputs, ref, req["atol"], req["rtol"], req["device"],
                                                 req["policy"])
    except Exception as exc:
        status, latency, error = "runtime_error", None, measure.short_error(exc)
    return {"status": status, "latency_ms": latency, "build_s": build_s, "error": error}
