"""Run tuning candidates in separate, long-lived worker processes, one per device slot.

In: one candidate at a time — a family (named by module and attribute, so the worker can
import it), a shape, dtype, config, target, device, timing policy and tolerance — and the
slot to run it on: an index, and for a GPU slot the CUDA_VISIBLE_DEVICES entry of its
GPU. Out: a plain dict `{"status", "latency_ms", "error", "build_s"}` with the same
statuses the in-process tuner records, plus "crashed" when the candidate killed its
worker or hung.

Why: a kernel that segfaults, or faults on the GPU (illegal address, launch failure),
takes its process down or leaves the CUDA context unusable for every later launch. In
a worker that costs one candidate: the failure is recorded with its reason and a fresh
worker is started for that slot; the other slots go on. The parent compiles candidates
first (in threads), which fills TileLang's on-disk kernel cache, so the worker's build
of the same config is a cache load (40-50 ms measured on the C backend, against 2.4-4 s
to compile it). A worker costs an import of torch and tilelang (4.5 s to ready on an
idle 2-core box, ~10 s while it compiles), so each slot's worker is kept for the whole
run and reused by every tune; `shutdown` (also registered with atexit) stops them all.

Slots: the tuner times candidates on several GPUs at once by giving each GPU a slot.
Slot i's worker is spawned with CUDA_VISIBLE_DEVICES=<its GPU> in its environment from
the first instruction, before torch or CUDA is loaded, so it sees exactly that GPU as
cuda:0 and every request's "cuda" means it. A slot without a GPU (None) inherits this
process's environment, which is what a single-device run and the CPU use; on a CPU, N
slots are simply N worker processes. One candidate runs per worker at a time (a lock
per slot); different slots run concurrently.

Like any 'spawn' child, a worker re-imports the main script: a script that tunes
without an `if __name__ == "__main__":` guard makes the worker fail to start, and its
candidates then run in-process (their error says so). The worker judges a candidate
with `measure.measure`, as the in-process tuner does; the tuner imports this module,
never the other way round.

The same worker runs in another Python interpreter (`start_interpreter`): one with
another TileLang installed, for `evaluate upgrade`. It is started as a subprocess of that
interpreter with one end of a socket pair, over which the same messages cross (a
multiprocessing Connection: pickled dicts); the evaluator package comes from a folder
on its PYTHONPATH holding only a link to this package, so the other interpreter brings
its own torch and TileLang and nothing of this one's. Its output goes to a log file,
whose last line is quoted when the worker dies. The protocol, both ways of starting:

  worker -> {"ready": pid, "import_s", "visible", "versions": {python, torch, tilelang,
             executable}} once it has imported, or {"error": "<one line>"} if it cannot
  parent -> a request dict; None to stop
  worker -> {"stage": "built", "build_s"} once the kernel is built (the parent then
             switches from the build timeout to the run timeout), then the result dict
  a request naming a "handler" (module, function) is answered by that function, which
  the worker imports: `handler(request, send, state) -> dict`, `send` for the "built"
  message, `state` a dict kept across requests (`evaluator.upgrade.side` holds the
  upgrade's); one without is a tuning candidate, answered by `measure.measure`.

A worker that dies or stops answering raises `WorkerDied` (`WorkerHung` for a timeout)
from `Worker.request`; `run_candidate` turns that into a "crashed" result and starts a
fresh worker, as a caller of `start_interpreter` does with `crashed`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import multiprocessing
import multiprocessing.connection
import os
import pickle
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

# An error text with one of these means the CUDA context is gone: every later launch in
# that process fails too, so the worker must be replaced even though it is alive.
POISON_MARKERS = (
    "illegal memory access",
    "unspecified launch failure",
    "misaligned address",
    "cuda error",
    "illegal instruction",
    "device-side assert",
    "an illegal address",
)

START_TIMEOUT_S = 300.0  # importing torch + tilelang (+ CUDA init) on a slow, loaded box
BUILD_TIMEOUT_S = 900.0  # a cache miss in the worker compiles from scratch (nvcc can be slow)
GPU_ENV = "CUDA_VISIBLE_DEVICES"

_LOCK = threading.RLock()  # the slot table, the counters and the generation
_SPAWN_LOCK = threading.Lock()  # os.environ is the whole process's: one spawn at a time may change it
_SLOTS: dict[int, "_Slot"] = {}
_GENERATION = 0  # bumped by shutdown(): a request whose worker shutdown killed starts no new one
_STATS: dict[str, Any] = {
    "started": 0,
    "restarts": 0,
    "crashes": 0,
    "timeouts": 0,
    "poisoned": 0,
    "spawn_s": None,
    "import_s": None,
}


class WorkerStartError(RuntimeError):
    """A worker process could not start (a broken environment, not a bad candidate)."""


def family_spec(family: Any) -> tuple | None:
    """How the worker finds `family`: ("attr", module, name) for a module-level object,
    ("registry", name) for a registered one, ("pickle", bytes) for anything that
    survives a pickle round trip; None when the worker cannot get it at all."""
    module = type(family).__module__
    mod = sys.modules.get(module) if module != "__main__" else None
    for attr, value in vars(mod).items() if mod is not None else ():
        if value is family:
            return ("attr", module, attr)
    from ..kernels import REGISTRY

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
    """Counters since the process started, over all slots: workers started, restarts (a
    worker replaced after a candidate killed, hung or poisoned it), the last spawn's cost;
    and per slot ("slots": index -> pid, gpu, the CUDA_VISIBLE_DEVICES the worker itself
    reported, workers started and candidates run there)."""
    with _LOCK:
        out = dict(_STATS)
        out["slots"] = {i: s.describe() for i, s in sorted(_SLOTS.items())}
        return out


def warm_up(slots: Iterable[tuple[int, str | None]] = ((0, None),)) -> None:
    """Start the workers of these (slot, gpu) pairs now where there are none; they import
    in the background while the caller compiles. A slot busy with a candidate is left be."""
    for index, gpu in slots:
        slot = _slot(index)
        if slot.lock.acquire(blocking=False):
            try:
                _current(slot, gpu)
            finally:
                slot.lock.release()


def wait_ready(slot: int = 0, gpu: str | None = None, timeout: float | None = None) -> bool:
    """Whether the slot's worker has imported (starting it if needed), waiting up to
    `timeout` seconds (None: until it is, or START_TIMEOUT_S). The tuner asks before taking
    a candidate off its queue, so a slot whose worker is restarting leaves the work to
    ready slots, and stops asking once the queue is empty. Raises WorkerStartError."""
    s = _slot(slot)
    with s.lock:
        return _ready(s, gpu, timeout) is not None


def run_candidate(
    spec: tuple,
    shape: tuple,
    dtype: str,
    config: dict,
    target: str,
    device: str,
    policy: Any,
    atol: float,
    rtol: float,
    *,
    timeout_s: float = 60.0,
    build_timeout_s: float = BUILD_TIMEOUT_S,
    slot: int = 0,
    gpu: str | None = None,
) -> dict[str, Any]:
    """Build, run, check and time one config in the worker of `slot` (whose GPU is `gpu`,
    a CUDA_VISIBLE_DEVICES entry; None inherits this process's). `timeout_s` bounds
    running, checking and timing (a hung kernel); building gets `build_timeout_s`.
    Raises WorkerStartError only when a fresh worker cannot start."""
    request = {
        "family": spec,
        "shape": tuple(shape),
        "dtype": dtype,
        "config": dict(config),
        "target": target,
        "device": device,
        "policy": policy,
        "atol": atol,
        "rtol": rtol,
    }
    s = _slot(slot)
    with s.lock:  # one candidate per worker at a time; other slots run meanwhile
        generation = _GENERATION
        worker = _ready(s, gpu)
        with _LOCK:
            s.requests += 1
        try:
            result = worker.request(request, build_timeout_s, timeout_s)
        except WorkerDied as died:
            if generation != _GENERATION:  # shutdown() killed it mid-candidate: not the candidate's fault
                worker.stop(graceful=False)
                s.worker = None
                return crashed(died, "the tuning workers were shut down")
            hung = isinstance(died, WorkerHung)
            _count("timeouts" if hung else "crashes")
            _replace(s)
            then = "the worker was killed and a fresh one started" if hung else "a fresh worker was started"
            return crashed(died, then)
        if result.get("status") != "ok" and is_poisoned(result.get("error", "")):
            _count("poisoned")
            _replace(s)
            result = {**result, "error": f"{result['error']} (CUDA context poisoned; a fresh worker was started)"}
        return result


def shutdown() -> None:
    """Stop every slot's worker. An idle one is asked to exit; one busy with a candidate in
    another thread is killed, and that candidate comes back "crashed" without a new
    worker being started for it. A later request starts fresh workers."""
    global _GENERATION
    with _LOCK:
        _GENERATION += 1
        slots = list(_SLOTS.values())
    for s in slots:
        if s.lock.acquire(blocking=False):
            try:
                if s.worker is not None:
                    s.worker.stop()
                    s.worker = None
            finally:
                s.lock.release()
        elif s.worker is not None:
            s.worker.kill()  # the thread using it sees the exit and cleans up


atexit.register(shutdown)


# ---------------------------------------------------------------- parent side


class WorkerDied(Exception):
    def __init__(self, message: str, build_s: float | None = None):
        super().__init__(message)
        self.build_s = build_s


class WorkerHung(WorkerDied):
    pass


class _Slot:
    """One device slot: its worker (replaced when it dies) and the lock that keeps it to
    one candidate at a time."""

    def __init__(self, index: int):
        self.index = index
        self.lock = threading.Lock()
        self.worker: Worker | None = None
        self.started = 0
        self.requests = 0

    def describe(self) -> dict[str, Any]:
        w = self.worker
        return {
            "pid": w.proc.pid if w else None,
            "gpu": w.gpu if w else None,
            "visible": w.info.get("visible") if w else None,
            "alive": bool(w and w.alive()),
            "started": self.started,
            "requests": self.requests,
        }


def _slot(index: int) -> _Slot:
    with _LOCK:
        if index not in _SLOTS:
            _SLOTS[index] = _Slot(index)
        return _SLOTS[index]


def _count(key: str) -> None:
    with _LOCK:
        _STATS[key] += 1


def _current(slot: _Slot, gpu: str | None) -> "Worker":
    """The slot's live worker for `gpu`, started if there is none (caller holds slot.lock)."""
    w = slot.worker
    if w is not None and w.alive() and w.gpu == gpu:
        return w
    if w is not None:
        if not w.alive():  # died while idle: not any candidate's fault, but a restart all the same
            _count("restarts")
        w.stop()  # alive but for another GPU: the slot was re-assigned, so its worker is too
    slot.worker = _spawned(slot, gpu)
    return slot.worker


def _ready(slot: _Slot, gpu: str | None, timeout: float | None = None) -> "Worker | None":
    """The slot's worker once it has imported; None if it has not within `timeout`."""
    worker = _current(slot, gpu)
    try:
        return worker if worker.wait_ready(timeout) else None
    except WorkerStartError:
        worker.stop(graceful=False)
        slot.worker = None
        raise


def _replace(slot: _Slot) -> None:
    """Discard the slot's worker and start the next one at once, so its imports overlap
    with whatever the caller does before the slot's next candidate."""
    gpu = slot.worker.gpu if slot.worker is not None else None
    if slot.worker is not None:
        slot.worker.stop(graceful=False)
    _count("restarts")
    slot.worker = _spawned(slot, gpu)


def _init_parent_cuda() -> None:
    """CUDA reads CUDA_VISIBLE_DEVICES once, when it initialises. This process must not do
    that in the instant the variable names a worker's GPU, so it initialises first."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.cuda.is_available():
            torch.cuda.init()
    except Exception:
        pass  # no usable CUDA here: nothing to protect


@contextlib.contextmanager
def _spawn_env(gpu: str | None) -> Iterator[None]:
    """CUDA_VISIBLE_DEVICES=gpu for a child spawned inside the block. Set in this process
    because a spawned child re-imports the main script (and so torch) before any code of
    ours runs in it; a child inherits the environment as it is at the exec."""
    with _SPAWN_LOCK:
        if gpu is None:
            yield
            return
        _init_parent_cuda()
        old = os.environ.get(GPU_ENV)
        os.environ[GPU_ENV] = gpu
        try:
            yield
        finally:
            if old is None:
                os.environ.pop(GPU_ENV, None)
            else:
                os.environ[GPU_ENV] = old


def _describe_exit(proc: Any) -> str:
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


class _Exec:
    """A worker started as a subprocess of another interpreter, with the few methods of
    multiprocessing.Process that Worker uses. Its sentinel is a pidfd (readable once the
    process exits) where the OS has them; elsewhere Worker polls."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        self.pid = popen.pid
        self.sentinel: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self.sentinel = os.pidfd_open(popen.pid)

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()  # negative: the signal, as multiprocessing reports it

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def join(self, timeout: float | None = None) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout)

    def kill(self) -> None:
        # Its own session: the compilers it started go with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()

    def close(self) -> None:
        if self.sentinel is not None:
            with contextlib.suppress(OSError):
                os.close(self.sentinel)
            self.sentinel = None


class Worker:
    """One worker process and the connection to it: a tuning slot's (`_spawned`), or one in
    another interpreter (`start_interpreter`). `label` names it in errors, `log` is where
    its output goes (None: this process's terminal)."""

    def __init__(self, proc: Any, conn: Any, gpu: str | None = None, label: str = "tuning worker", log=None) -> None:
        self.proc, self.conn, self.gpu, self.label, self.log = proc, conn, gpu, label, log
        self.t0 = time.perf_counter()
        self.ready, self.waited_since = False, None
        self.info: dict[str, Any] = {}

    def alive(self) -> bool:
        return self.proc.is_alive()

    def _exit(self) -> str:
        """How the process ended, with the last line it wrote where it wrote to a log."""
        why = _describe_exit(self.proc)
        last = _last_line(self.log)
        return f"{why}: {last}" if last else why

    def _recv(self, timeout: float) -> dict | None:
        """The next message, None on timeout; WorkerDied when the process is gone."""
        sentinel = self.proc.sentinel
        deadline = time.perf_counter() + timeout
        while True:
            left = max(0.0, deadline - time.perf_counter())
            waits = [self.conn] if sentinel is None else [self.conn, sentinel]
            ready = multiprocessing.connection.wait(waits, left if sentinel is not None else min(left, 0.5))
            if ready or (sentinel is None and not self.proc.is_alive()):
                break
            if left <= 0:
                return None
        if self.conn in ready or self.conn.poll():
            try:
                return self.conn.recv()
            except (EOFError, OSError):
                pass
        raise WorkerDied(self._exit())

    def wait_ready(self, timeout: float | None = None) -> bool:
        """True once imported; False if not within `timeout`. START_TIMEOUT_S counts from
        the first wait, not the spawn: a worker warmed up early may wait out a long compile."""
        if self.ready:
            return True
        if self.waited_since is None:
            self.waited_since = time.perf_counter()
        left = START_TIMEOUT_S - (time.perf_counter() - self.waited_since)
        try:
            msg = self._recv(max(0.0, left if timeout is None else min(timeout, left)))
        except WorkerDied as died:
            raise WorkerStartError(f"{self.label} failed to start: {died}") from None
        if msg is None and time.perf_counter() - self.waited_since < START_TIMEOUT_S:
            return False
        if msg is not None and "error" in msg:  # it ran, but could not import what it needs
            self.stop(graceful=False)
            raise WorkerStartError(f"{self.label} failed to start: {msg['error']}")
        if msg is None or "ready" not in msg:
            self.stop(graceful=False)
            raise WorkerStartError(f"{self.label} did not start within {START_TIMEOUT_S:g}s")
        self.ready, self.info = True, msg
        with _LOCK:
            _STATS["spawn_s"] = time.perf_counter() - self.t0
            _STATS["import_s"] = msg.get("import_s")
        return True

    def request(self, request: dict, build_timeout_s: float, timeout_s: float, what: str = "the candidate") -> dict:
        try:
            self.conn.send(request)
        except (BrokenPipeError, EOFError, OSError):
            raise WorkerDied(self._exit()) from None
        build_s = None
        stage, limit = "building", build_timeout_s
        while True:
            try:
                msg = self._recv(limit)
            except WorkerDied as died:
                raise WorkerDied(f"{died} while {stage} {what}", build_s) from None
            if msg is None:
                raise WorkerHung(f"no result after {limit:g}s while {stage} {what} (hung kernel?)", build_s)
            if msg.get("stage") == "built":
                build_s = msg.get("build_s")
                stage, limit = "running", timeout_s
                continue
            return msg

    def kill(self) -> None:
        """From another thread, while a request may be in flight: the process only."""
        if self.proc.is_alive():
            self.proc.kill()

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
        if isinstance(self.proc, _Exec):
            self.proc.close()


def _spawned(slot: _Slot, gpu: str | None) -> Worker:
    """A tuning slot's worker: a 'spawn' child of this process, seeing only `gpu`."""
    ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold a CUDA context
    conn, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, gpu), daemon=True, name=f"evaluator-tuning-worker-{slot.index}")
    worker = Worker(proc, conn, gpu)
    with _spawn_env(gpu):
        proc.start()
    child.close()  # else the parent keeps the pipe open and never sees EOF when the child dies
    with _LOCK:
        _STATS["started"] += 1
        slot.started += 1
    return worker


def _last_line(log: Path | None) -> str:
    """The last non-empty line a worker wrote to its log (its traceback's last line, or
    what a wrapper script said before it exited), shortened; "" when there is none."""
    if log is None:
        return ""
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


# The child's first code: connect to the parent over the inherited socket, then serve.
_BOOT = "import sys; from evaluator.tuning.isolation import serve_fd; serve_fd(int(sys.argv[1]))"


def package_path(folder: Path) -> Path:
    """A folder holding only a link named `evaluator` to this package, made in `folder`:
    on another interpreter's PYTHONPATH it brings the evaluator and nothing else of this
    interpreter's (its site-packages hold the other torch and TileLang)."""
    package = Path(__file__).resolve().parents[1]
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "evaluator"
    if link.is_symlink() and link.resolve() != package:
        link.unlink()
    if not link.exists():
        link.symlink_to(package, target_is_directory=True)
    return folder


def start_interpreter(
    python: str | os.PathLike, *, env: dict[str, str], log: Path, label: str, cwd: Path | None = None
) -> Worker:
    """A worker in another Python interpreter (or a script that execs one): started now, it
    imports in the background; `wait_ready` says when it can take requests. `env` is its
    whole environment (its PYTHONPATH must lead to this package: `package_path`); its
    output goes to `log`. The caller stops it (`Worker.stop`)."""
    mine, theirs = socket.socketpair()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        try:
            popen = subprocess.Popen(
                [os.fspath(python), "-c", _BOOT, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its compilers die with it (_Exec.kill)
            )
        except OSError as exc:
            mine.close()
            theirs.close()
            raise WorkerStartError(f"{label} failed to start: {exc.strerror or exc}") from None
    theirs.close()  # else this process keeps the child's end open and never sees EOF when it dies
    conn = multiprocessing.connection.Connection(mine.detach())
    with _LOCK:
        _STATS["started"] += 1
    return Worker(_Exec(popen), conn, None, label, log)


def crashed(died: WorkerDied, then: str = "") -> dict[str, Any]:
    """A request whose worker died or hung, as a result: status "crashed" and the reason."""
    return {
        "status": "crashed",
        "latency_ms": None,
        "build_s": died.build_s,
        "error": f"{died}; {then}" if then else str(died),
    }


# ---------------------------------------------------------------- worker side


def _load_family(spec: tuple) -> Any:
    kind = spec[0]
    if kind == "attr":
        return getattr(importlib.import_module(spec[1]), spec[2])
    if kind == "registry":
        from .. import kernels

        return kernels.get(spec[1])
    return pickle.loads(spec[1])


def _versions() -> dict[str, str]:
    """What this interpreter brings: the versions an upgrade's baseline records."""
    out = {"python": platform.python_version(), "executable": sys.executable}
    for name in ("torch", "tilelang"):
        module = sys.modules.get(name)
        out[name] = str(getattr(module, "__version__", "unknown")) if module else "not imported"
    return out


def serve_fd(fd: int) -> None:
    """The worker in another interpreter (`start_interpreter`): serve over the inherited
    socket `fd` until told to stop."""
    _serve(multiprocessing.connection.Connection(fd))


def _serve(conn: multiprocessing.connection.Connection, gpu: str | None = None) -> None:
    """The worker's loop: one request in, one result out, until None or EOF."""
    # Ctrl-C is the parent's to handle; it stops this worker through shutdown().
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if gpu is not None and os.environ.get(GPU_ENV) != gpu:
        # A backstop: the parent set it before the exec (see _spawn_env); this only helps
        # if nothing has initialised CUDA yet, which importing torch does not do.
        os.environ[GPU_ENV] = gpu
    t0 = time.perf_counter()
    try:
        importlib.import_module("tilelang")  # now, so that the first candidate's build does not pay for it
        from ..measuring import checks as measure  # torch and the kernels, counted in import_s like tilelang
    except BaseException as exc:  # an interpreter whose TileLang cannot load: the parent is told why
        text = f"{type(exc).__name__}: {exc}".strip().splitlines()
        with contextlib.suppress(OSError):
            conn.send({"error": (text[0] if text else type(exc).__name__)[:300]})
        return

    conn.send(
        {
            "ready": os.getpid(),
            "import_s": time.perf_counter() - t0,
            "visible": os.environ.get(GPU_ENV),
            "versions": _versions(),
        }
    )
    families: dict[tuple, Any] = {}
    data: dict[tuple, tuple] = {}  # (family, shape, dtype, device) -> (inputs, reference): the last one only
    state: dict[str, Any] = {}  # a handler's, kept across its requests
    while True:
        try:
            req = conn.recv()
        except (EOFError, OSError):
            return
        if req is None:
            return
        if "handler" in req:
            conn.send(_handle(req, conn, measure, state))
        else:
            conn.send(_evaluate(req, conn, measure, families, data))


def _handle(req: dict, conn, measure, state: dict) -> dict[str, Any]:
    """A request for a named handler: its answer, or its exception as a runtime error."""
    try:
        module, name = req["handler"]
        handler = getattr(importlib.import_module(module), name)
        return handler(req, conn.send, state)
    except Exception as exc:
        return {"status": "runtime_error", "error": measure.short_error(exc)}


def _evaluate(req: dict, conn, measure, families: dict, data: dict) -> dict[str, Any]:
    spec = req["family"]
    t0 = time.perf_counter()
    try:
        if spec not in families:
            families[spec] = _load_family(spec)
        family = families[spec]
        kernel = family.build(req["shape"], req["dtype"], req["config"], req["target"])
    except Exception as exc:
        return {
            "status": "compile_error",
            "latency_ms": None,
            "build_s": time.perf_counter() - t0,
            "error": measure.short_error(exc),
        }
    build_s = time.perf_counter() - t0
    conn.send({"stage": "built", "build_s": build_s})
    try:
        key = (spec, req["shape"], req["dtype"], req["device"])
        if key not in data:
            data.clear()
            inputs = family.make_inputs(req["shape"], req["dtype"], req["device"], 0)
            data[key] = (inputs, family.reference(*inputs))
        inputs, ref = data[key]
        status, latency, error = measure.measure(
            kernel, inputs, ref, req["atol"], req["rtol"], req["device"], req["policy"]
        )
    except Exception as exc:
        status, latency, error = "runtime_error", None, measure.short_error(exc)
    return {"status": status, "latency_ms": latency, "build_s": build_s, "error": error}
