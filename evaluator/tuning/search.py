"""Search each family's config space for the fastest correct kernel on one shape.

In: a family, a problem shape, a dtype, the `Hardware`, a time budget, (optionally) a
persistent cache keyed by the toolchain, and (optionally) several devices to time on.
Out: a `TunedKernel` (the best config and every candidate's fate: rejected before
compiling, failed to compile, failed at run time, wrong answer, crashed the worker,
skipped for lack of budget, or timed — and the search phase that proposed it) and the
compiled best kernel; on several devices, a `DeviceLog` the caller passes in is filled
with the device that ran each candidate.

Coarse to fine: the family's search space is the coarse grid (best guess first); then
the neighbours of the fastest config, and of the runner-up when it is within 10%, (each
power-of-two size doubled and halved, each flag flipped, the tile turned) are tried, and again around
the new best while a round gains more than 2%, for at most 3 rounds. Every batch
compiles in parallel threads; the family's `reject_reason` turns away, before
compiling, configs that cannot fit the device. The budget bounds the whole search of
one shape. Candidates are judged by `measure.measure`, as in the isolated worker.

A failing candidate is data, never a crash of the run. On CUDA candidates run in an
isolated worker process (`isolation.py`), so a kernel that segfaults, hangs or poisons
the CUDA context costs one candidate, not the run. The cache key holds the problem
shape and the whole toolchain (device, driver, CUDA, tilelang) because TileLang's own
autotune cache has been seen to ignore the problem shape.

Several GPUs (`devices`, from `parse_gpus`): each gets a worker of its own, and a batch's
compiled candidates are timed concurrently, one per worker at a time. Timings from
different GPUs are not comparable to the last percent (clocks, thermals), so once the
search ends the fastest config, and the runner-up when within 5%, are timed again on
the first device alone: the config chosen, and every latency the result reports for it,
come from that one device. With one device (or none given) the search is exactly the
single-worker one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Collection, Sequence

from . import isolation
from ..measuring.bench import TimingPolicy
from .gpus import COMPILE_THREADS_PER_DEVICE, Slot, gpu_slots, compile_workers, parse_gpus, visible_gpus  # noqa: F401
from ..errors import ConfigError, KernelError
from ..kernels.base import KernelFamily
from ..measuring.checks import measure, short_error
from ..results import Candidate, Hardware, KernelConfig, Shape, TunedKernel

CacheLookup = Callable[[dict], "dict | None"]
CacheSave = Callable[[dict, dict], None]

FINE_ROUNDS = 3  # hill-climbing rounds around the best config, at most
FINE_GAIN = 0.02  # another round only while the last one made the best faster by more than this
FINE_RUNNER_UP = 1.10  # the second-fastest config's neighbours are tried too when it is this close
# On several devices the runner-up is re-timed beside the best when this close: two GPUs
# of one model differ by a few percent, enough to swap two near-equal configs.
RETIME_RUNNER_UP = 1.05

# Candidate gets a `device` field once results/kernels.py has one; until then the DeviceLog carries it.
_CANDIDATE_HAS_DEVICE = "device" in {f.name for f in dataclasses.fields(Candidate)}


@dataclass
class DeviceLog:
    """Which device ran what, for a tune on several devices; a caller passes one in and
    reads it afterwards. `devices[i]` is the device of the worker that ran
    `candidates[i]` ("cuda:1"; "cpu:1" names the second worker on a CPU), None where the
    candidate never ran, ran in this process, or the tune had one device. `retimed`: the
    final contenders timed again on the first device alone, each a dict of config,
    first_device, first_latency_ms, device, latency_ms and status."""

    devices: list[str | None] = field(default_factory=list)
    retimed: list[dict] = field(default_factory=list)


def cache_key(
    family: str,
    shape: Shape,
    dtype: str,
    hw: Hardware,
    tilelang_version: str,
    space: Sequence[KernelConfig] | None = None,
) -> dict:
    """The tuning cache's key. With `space` (the family's search space for this shape), a
    digest of it too: a newer evaluator whose family offers new schedules (the GEMM
    family's ping-pong tiles, say) must re-tune, not reuse a best config found without them."""
    key = {
        "family": family,
        "shape": list(shape),
        "dtype": dtype,
        "device": hw.name,
        "driver": hw.driver,
        "cuda": hw.cuda,
        "tilelang": tilelang_version,
        "target": hw.target,
    }
    if space is not None:
        text = json.dumps([dict(c) for c in space], sort_keys=True, default=str)
        key["space"] = hashlib.sha256(text.encode()).hexdigest()[:12]
    return key


def neighbours(config: KernelConfig, flags: Collection[str] = ()) -> list[KernelConfig]:
    """Configs one step from `config`: each power-of-two int (>= 2) doubled and halved,
    each bool flipped, each 0/1 int named in `flags` (the family's `fine_flags`) flipped,
    and the tile turned (block_M and block_N exchanged: a tall tile and a wide one fill
    the SMs differently); other values (0 = off, odd counts, strings) stay as they are."""
    out = []
    for key, value in config.items():
        if isinstance(value, bool):
            out.append({**config, key: not value})
        elif key in flags and value in (0, 1):
            out.append({**config, key: 1 - value})
        elif isinstance(value, int) and value >= 2 and value & (value - 1) == 0:
            out.append({**config, key: value * 2})
            out.append({**config, key: value // 2})
    m, n = config.get("block_M"), config.get("block_N")
    if isinstance(m, int) and isinstance(n, int) and m != n:
        out.append({**config, "block_M": n, "block_N": m})
    return out


def tune(
    family: KernelFamily,
    shape: Shape,
    dtype: str,
    hw: Hardware,
    *,
    budget_s: float = 60.0,
    tilelang_version: str = "",
    lookup: CacheLookup | None = None,
    save: CacheSave | None = None,
    policy: TimingPolicy = TimingPolicy(warmup=1, reps=5, max_seconds=0.5),
    on_candidate: Callable[[Candidate], None] | None = None,
    isolate: bool | None = None,
    candidate_timeout_s: float = 60.0,
    fine_rounds: int = FINE_ROUNDS,
    devices: Sequence[int] | None = None,
    device_log: DeviceLog | None = None,
) -> tuple[TunedKernel, Callable | None]:
    """Coarse grid, then neighbours of the best, within `budget_s` seconds in all.

    `isolate`: run each candidate in a worker process (None: on CUDA, or on several
    devices — on one CPU a candidate cannot poison a GPU context and the worker's imports
    would cost more than the candidates; False with several devices is a ConfigError).
    `candidate_timeout_s` bounds one isolated candidate's run and timing. `devices`:
    torch device indices to time on (`parse_gpus`), one worker each; None or one device
    is the single-worker search. On a CPU the indices only count workers. `device_log` is
    filled as DeviceLog says.
    """
    t_start = time.perf_counter()
    slots = gpu_slots(devices, hw)
    if len(slots) > 1 and isolate is False:
        raise ConfigError("timing on several devices needs isolated workers; use --isolate on or auto, or one GPU")
    space = list(family.search_space(shape, dtype, hw))
    key = cache_key(family.name, shape, dtype, hw, tilelang_version, space)
    cached = lookup(key) if lookup else None
    if cached:
        try:
            kernel = family.build(shape, dtype, cached, hw.target)
            cand = Candidate(config=cached, status="ok", error="reused from the tuning cache")
            if device_log is not None:
                device_log.devices[:] = [None]
            return TunedKernel(
                family.name,
                tuple(shape),
                dtype,
                hw.target,
                cached,
                (cand,),
                cached=True,
                tuning_s=time.perf_counter() - t_start,
            ), kernel
        except Exception:
            pass  # a cached config that no longer builds is re-tuned below

    search = _Search(
        family,
        tuple(shape),
        dtype,
        hw,
        policy,
        budget_s,
        t_start,
        on_candidate,
        _isolation_spec(family, hw, isolate, slots),
        candidate_timeout_s,
        slots,
    )
    search.batch(space, "coarse")
    expanded: set[tuple] = set()
    for rnd in range(1, fine_rounds + 1):
        before = search.best_latency()
        centers = [c for c in search.centers() if _ckey(c) not in expanded]
        if not centers:
            break
        expanded.update(_ckey(c) for c in centers)
        search.batch([n for c in centers for n in neighbours(c, family.fine_flags)], f"fine-{rnd}")
        if search.spent() or not search.best_latency() < before * (1 - FINE_GAIN):
            break
    search.retime()

    best_config, kernel = search.best_config(), None
    if best_config is not None:
        kernel = search.kernels.get(_ckey(best_config))
        if kernel is None:  # timed in the worker: build it here (an in-process cache hit)
            kernel = family.build(shape, dtype, best_config, hw.target)
        if save:
            save(key, best_config)
    candidates = search.final_candidates()
    if device_log is not None:
        device_log.devices[:] = [search.ran_on.get(_ckey(c.config)) for c in candidates]
        device_log.retimed[:] = search.retimed
    tuned = TunedKernel(
        family.name,
        tuple(shape),
        dtype,
        hw.target,
        best_config,
        candidates,
        cached=False,
        tuning_s=time.perf_counter() - t_start,
    )
    return tuned, kernel


def _ckey(config: KernelConfig) -> tuple:
    return tuple(sorted((str(k), repr(v)) for k, v in config.items()))


def _isolation_spec(family: KernelFamily, hw: Hardware, isolate: bool | None, slots: list[Slot]) -> tuple | str | None:
    """The worker's handle on the family when candidates are to be isolated, else None;
    a string says why isolation was wanted (auto mode) but is impossible."""
    if isolate is False or (isolate is None and hw.device != "cuda" and len(slots) == 1):
        return None
    spec = isolation.family_spec(family)
    if spec is None:
        why = f"{family.name}: the isolation worker can neither import nor unpickle this family object"
        if isolate:
            raise KernelError(why + "; define it at module level or pass isolate=False")
        return why
    # the workers import in the background while the first batch compiles
    isolation.warm_up([(s.index, s.gpu) for s in slots])
    return spec


class _Search:
    """The candidates of one tune: what was tried, how it went, and the fastest so far."""

    def __init__(
        self,
        family: KernelFamily,
        shape: Shape,
        dtype: str,
        hw: Hardware,
        policy: TimingPolicy,
        budget_s: float,
        t_start: float,
        on_candidate: Callable[[Candidate], None] | None,
        spec: tuple | str | None,
        timeout_s: float,
        slots: list[Slot],
    ):
        self.family, self.shape, self.dtype, self.hw, self.policy = family, shape, dtype, hw, policy
        self.budget_s, self.t_start, self.on_candidate, self.timeout_s = budget_s, t_start, on_candidate, timeout_s
        self.spec = spec if isinstance(spec, tuple) else None
        self.note = spec if isinstance(spec, str) else ""  # why candidates ran in-process after all
        self.slots = list(slots)  # the live ones: a slot whose worker cannot start leaves
        self.parallel = len(slots) > 1 and self.spec is not None  # some candidates were timed side by side
        self.atol, self.rtol = family.tolerance(dtype, shape)
        self.candidates: list[Candidate] = []
        self.seen: set[tuple] = set()
        self.timed: list[tuple[float, KernelConfig]] = []
        self.kernels: dict[tuple, Callable] = {}  # kernels timed in this process
        self.ran_on: dict[tuple, str] = {}  # config -> label of the worker that ran it (several devices)
        self.retimed: list[dict] = []
        self._data: tuple | None = None  # (inputs, reference), made on first in-process use
        self._lock = threading.Lock()  # timer threads record concurrently
        self._stop = threading.Event()  # set when the caller is interrupted: timer threads take no more

    def spent(self) -> bool:
        return time.perf_counter() - self.t_start > self.budget_s

    def best_latency(self) -> float:
        return min((t for t, _ in self.timed), default=float("inf"))

    def fastest(self, n: int) -> list[KernelConfig]:
        return [c for _, c in sorted(self.timed, key=lambda tc: tc[0])[:n]]

    def centers(self) -> list[KernelConfig]:
        """The fastest config, and the runner-up when it is close enough that noise or
        a different valley could explain the gap; a distant runner-up is not worth a round."""
        ranked = sorted(self.timed, key=lambda tc: tc[0])[:2]
        return [c for t, c in ranked if t <= ranked[0][0] * FINE_RUNNER_UP]

    def best_config(self) -> KernelConfig | None:
        best = self.fastest(1)
        return best[0] if best else None

    def final_candidates(self) -> tuple[Candidate, ...]:
        if not _CANDIDATE_HAS_DEVICE:
            return tuple(self.candidates)
        return tuple(dataclasses.replace(c, device=self.ran_on.get(_ckey(c.config))) for c in self.candidates)

    def record(self, cand: Candidate) -> None:
        with self._lock:
            self.candidates.append(cand)
            if cand.status == "ok" and cand.latency_ms is not None:
                self.timed.append((cand.latency_ms, cand.config))
            if self.on_candidate:
                self.on_candidate(cand)

    def batch(self, configs: list[KernelConfig], phase: str) -> None:
        """Reject, compile (in parallel) and evaluate the configs not tried yet. Once the
        budget is spent the rest are skipped — unless nothing has worked yet, so a shape
        is never left without a kernel while untried configs remain."""
        todo = []
        for config in configs:
            if _ckey(config) in self.seen:
                continue
            self.seen.add(_ckey(config))
            reason = self.reject_reason(config)
            if reason:
                self.record(Candidate(config, "rejected", error=reason, phase=phase))
            else:
                todo.append(config)
        skip = f"tuning budget of {self.budget_s:g}s spent"
        if self.spent() and self.timed:
            for config in todo:
                self.record(Candidate(config, "skipped", error=skip, phase=phase))
            return
        if not todo:
            return
        if not self.timed and len(todo) > 1 and len(self.slots) <= 1:
            # The first candidate is timed before the rest compile: it is often built
            # already (the kernels stage compiles it ahead on a GPU), and where the budget
            # left is shorter than its compile, compiling the rest in parallel would spend
            # the budget on kernels that are never timed (ResNet-50 at --budget 3 waited
            # on ten nvcc runs a shape to time one).
            first, todo = todo[0], todo[1:]
            built = _build(self.family, self.shape, self.dtype, first, self.hw.target)
            self.record(self.evaluate(first, built, phase))
            left = self.budget_s - (time.perf_counter() - self.t_start)
            if self.timed and left < built[1]:
                why = skip if left <= 0 else f"{skip} before it could compile (the first took {built[1]:.1f}s)"
                for config in todo:
                    self.record(Candidate(config, "skipped", error=why, phase=phase))
                return
        # Compiling dominates tuning (nvcc takes seconds per candidate) and runs outside the
        # GIL, so a batch compiles concurrently; each worker runs and times one candidate at
        # a time, and with one worker (or none) they are timed one after another.
        with ThreadPoolExecutor(max_workers=compile_workers(len(todo), len(self.slots))) as pool:
            builds = [pool.submit(_build, self.family, self.shape, self.dtype, c, self.hw.target) for c in todo]
            if self.spec is not None and len(self.slots) > 1:
                self.time_on_all(list(zip(todo, builds)), phase, skip)
                return
            for config, fut in zip(todo, builds):
                if self.spent() and self.timed:
                    fut.cancel()
                    self.record(Candidate(config, "skipped", error=skip, phase=phase))
                else:
                    self.record(self.evaluate(config, fut.result(), phase))

    def time_on_all(self, items: list[tuple[KernelConfig, Future]], phase: str, skip: str) -> None:
        """Time compiled candidates on every slot at once: a thread per slot takes the next
        candidate off a shared queue whenever its worker is free, so a slot whose worker
        is restarting after a crash leaves the work to the others. Candidates are listed
        in the batch's order whatever order they finished in."""
        start = len(self.candidates)
        order = {_ckey(c): i for i, (c, _) in enumerate(items)}
        work: queue.SimpleQueue = queue.SimpleQueue()
        for item in items:
            work.put(item)
        threads = [
            threading.Thread(
                target=self._slot_loop,
                args=(slot, work, phase, skip),
                daemon=True,
                name=f"evaluator-tuning-timer-{slot.index}",
            )
            for slot in list(self.slots)
        ]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        except BaseException:
            self._stop.set()  # Ctrl-C: the threads finish their candidate and take no more
            raise
        # What no worker could take (every slot failed to start) runs here, one at a time.
        while True:
            try:
                config, fut = work.get_nowait()
            except queue.Empty:
                break
            if self.spent() and self.timed:
                fut.cancel()
                self.record(Candidate(config, "skipped", error=skip, phase=phase))
            else:
                self.record(self.evaluate(config, fut.result(), phase))
        with self._lock:
            self.candidates[start:] = sorted(self.candidates[start:], key=lambda c: order[_ckey(c.config)])

    def _slot_loop(self, slot: Slot, work: queue.SimpleQueue, phase: str, skip: str) -> None:
        while not self._stop.is_set():
            try:  # ready before taking work, and no waiting for a restart once the work is gone
                if not isolation.wait_ready(slot.index, slot.gpu, timeout=0.2):
                    if work.empty():
                        return
                    continue
            except isolation.WorkerStartError as exc:
                self._drop(slot, exc)
                return
            try:
                config, fut = work.get_nowait()
            except queue.Empty:
                return
            if self.spent() and self.timed:
                fut.cancel()
                self.record(Candidate(config, "skipped", error=skip, phase=phase))
                continue
            kernel, compile_s, error = fut.result()
            if kernel is None:
                self.record(Candidate(config, "compile_error", compile_s=compile_s, error=error, phase=phase))
                continue
            try:
                cand = self.in_worker(slot, config, compile_s, phase)
            except isolation.WorkerStartError as exc:
                work.put((config, fut))  # not this candidate's fault: another slot (or this process) runs it
                self._drop(slot, exc)
                return
            if not self._stop.is_set():
                self.record(cand)

    def _drop(self, slot: Slot, exc: Exception) -> None:
        """A slot whose worker cannot start leaves this tune; with none left, candidates run
        in-process (their error says why)."""
        with self._lock:
            if slot in self.slots:
                self.slots.remove(slot)
            self.note = str(exc)
            if not self.slots:
                self.spec = None

    def reject_reason(self, config: KernelConfig) -> str:
        return rejection(self.family, self.shape, self.dtype, config, self.hw)

    def evaluate(self, config: KernelConfig, built: tuple, phase: str) -> Candidate:
        kernel, compile_s, error = built
        if kernel is None:
            return Candidate(config, "compile_error", compile_s=compile_s, error=error, phase=phase)
        if self.spec is not None:
            try:
                return self.in_worker(self.slots[0], config, compile_s, phase)
            except isolation.WorkerStartError as exc:
                self.spec, self.note = None, str(exc)  # the rest of this shape runs in-process
        if self._data is None:
            inputs = self.family.make_inputs(self.shape, self.dtype, self.hw.device, 0)
            self._data = (inputs, self.family.reference(*inputs))
        status, latency, error = measure(kernel, *self._data, self.atol, self.rtol, self.hw.device, self.policy)
        if status == "ok":
            self.kernels[_ckey(config)] = kernel
            error = f"evaluated in-process: {self.note}" if self.note else ""
        return Candidate(config, status, latency_ms=latency, compile_s=compile_s, error=error, phase=phase)

    def run_on(self, slot: Slot, config: KernelConfig) -> dict:
        return isolation.run_candidate(
            self.spec,
            self.shape,
            self.dtype,
            config,
            self.hw.target,
            self.hw.device,
            self.policy,
            self.atol,
            self.rtol,
            timeout_s=self.timeout_s,
            slot=slot.index,
            gpu=slot.gpu,
        )

    def in_worker(self, slot: Slot, config: KernelConfig, compile_s: float | None, phase: str) -> Candidate:
        r = self.run_on(slot, config)
        if slot.label is not None:
            with self._lock:
                self.ran_on[_ckey(config)] = slot.label
        return Candidate(
            config, r["status"], latency_ms=r["latency_ms"], compile_s=compile_s, error=r["error"], phase=phase
        )

    def retime(self) -> None:
        """After a search on several devices: time the fastest config, and the runner-up
        when within RETIME_RUNNER_UP, again on the first live slot with no other candidate
        running, and rank them by those numbers. Each re-time puts a config on that slot's
        scale; it repeats while the fastest (or its close runner-up) is still a number from
        the concurrent phase, at most once per config. A config that fails its re-time
        (it worked on another GPU) keeps the failure and leaves the ranking."""
        if not self.parallel or self.spec is None or not self.slots or not self.timed:
            return
        slot, done = self.slots[0], set()
        while self.timed:
            ranked = sorted(self.timed, key=lambda tc: tc[0])[:2]
            todo = [c for t, c in ranked if t <= ranked[0][0] * RETIME_RUNNER_UP and _ckey(c) not in done]
            if not todo:
                return
            for config in todo:
                done.add(_ckey(config))
                try:
                    r = self.run_on(slot, config)
                except isolation.WorkerStartError as exc:
                    self.note = str(exc)  # the first numbers stand (DeviceLog.retimed lacks them)
                    return
                self._replace_timing(slot, config, r)

    def _replace_timing(self, slot: Slot, config: KernelConfig, r: dict) -> None:
        k = _ckey(config)
        i = next(j for j, c in enumerate(self.candidates) if _ckey(c.config) == k)
        first = self.candidates[i]
        self.retimed.append(
            {
                "config": dict(config),
                "first_device": self.ran_on.get(k),
                "first_latency_ms": first.latency_ms,
                "device": slot.label,
                "latency_ms": r["latency_ms"],
                "status": r["status"],
            }
        )
        self.timed = [(t, c) for t, c in self.timed if _ckey(c) != k]
        if r["status"] == "ok" and r["latency_ms"] is not None:
            self.timed.append((r["latency_ms"], first.config))
            self.candidates[i] = dataclasses.replace(first, latency_ms=r["latency_ms"])
        else:
            error = f"worked on {self.ran_on.get(k)}, then failed when re-timed on {slot.label}: {r['error']}"
            self.candidates[i] = dataclasses.replace(first, status=r["status"], latency_ms=None, error=error)
        self.ran_on[k] = slot.label


def rejection(family: KernelFamily, shape: Shape, dtype: str, config: KernelConfig, hw: Hardware) -> str:
    """Why the tuner rejects `config` without compiling it, or ""."""
    try:
        return family.reject_reason(shape, dtype, config, hw) or ""
    except Exception:
        return ""  # a bug here must not reject every config; compiling will tell


def first_candidate(family: KernelFamily, shape: Shape, dtype: str, hw: Hardware) -> KernelConfig | None:
    """The config a tune without a cached winner times first: the first of the space it
    does not reject."""
    return next((c for c in family.search_space(shape, dtype, hw) if not rejection(family, shape, dtype, c, hw)), None)


def _build(family, shape, dtype, config, target) -> tuple[Callable | None, float, str]:
    """(kernel, seconds its compile took, error). A kernel built earlier in this process
    (compiled ahead, or by another shape's tune) reports its own compile time, not the
    instant the cache took to hand it over."""
    t0 = time.perf_counter()
    try:
        kernel = family.build(shape, dtype, config, target)
    except Exception as exc:
        return None, time.perf_counter() - t0, short_error(exc)
    compile_s = getattr(kernel, "compile_s", None)
    return kernel, compile_s if isinstance(compile_s, (int, float)) else time.perf_counter() - t0, ""
