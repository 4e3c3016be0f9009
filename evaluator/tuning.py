"""Search each family's config space for the fastest correct kernel on one shape.

In: a family, a problem shape, a dtype, the `Hardware`, a time budget and (optionally)
a persistent cache keyed by the toolchain. Out: a `TunedKernel` (the best config and
every candidate's fate: rejected before compiling, failed to compile, failed at run
time, wrong answer, crashed the worker, skipped for lack of budget, or timed — and the
search phase that proposed it) and the compiled best kernel.

Coarse to fine: the family's search space is the coarse grid (best guess first); then
the neighbours of the fastest config, and of the runner-up when it is within 10%, (each
power-of-two size doubled and halved, each flag flipped) are tried, and again around
the new best while a round gains more than 2%, for at most 3 rounds. Every batch
compiles in parallel threads; the family's `reject_reason` turns away, before
compiling, configs that cannot fit the device. The budget bounds the whole search of
one shape. Candidates are judged by `measure.measure`, as in the isolated worker.

A failing candidate is data, never a crash of the run. On CUDA candidates run in an
isolated worker process (`isolation.py`), so a kernel that segfaults, hangs or poisons
the CUDA context costs one candidate, not the run. The cache key holds the problem
shape and the whole toolchain (device, driver, CUDA, tilelang) because TileLang's own
autotune cache has been seen to ignore the problem shape.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from . import isolation
from .bench import TimingPolicy
from .errors import KernelError
from .kernels.base import KernelFamily
from .measure import measure, short_error
from .results import Candidate, Hardware, KernelConfig, Shape, TunedKernel

CacheLookup = Callable[[dict], "dict | None"]
CacheSave = Callable[[dict, dict], None]

FINE_ROUNDS = 3  # hill-climbing rounds around the best config, at most
FINE_GAIN = 0.02  # another round only while the last one made the best faster by more than this
FINE_RUNNER_UP = 1.10  # the second-fastest config's neighbours are tried too when it is this close


def cache_key(family: str, shape: Shape, dtype: str, hw: Hardware, tilelang_version: str) -> dict:
    return {"family": family, "shape": list(shape), "dtype": dtype, "device": hw.name, "driver": hw.driver,
            "cuda": hw.cuda, "tilelang": tilelang_version, "target": hw.target}


def neighbours(config: KernelConfig) -> list[KernelConfig]:
    """Configs one step from `config`: each power-of-two int (>= 2) doubled and halved,
    each bool flipped; other values (0 = off, odd counts, strings) stay as they are."""
    out = []
    for key, value in config.items():
        if isinstance(value, bool):
            out.append({**config, key: not value})
        elif isinstance(value, int) and value >= 2 and value & (value - 1) == 0:
            out.append({**config, key: value * 2})
            out.append({**config, key: value // 2})
    return out


def tune(family: KernelFamily, shape: Shape, dtype: str, hw: Hardware, *, budget_s: float = 60.0,
         tilelang_version: str = "", lookup: CacheLookup | None = None, save: CacheSave | None = None,
         policy: TimingPolicy = TimingPolicy(warmup=1, reps=5, max_seconds=0.5),
         on_candidate: Callable[[Candidate], None] | None = None, isolate: bool | None = None,
         candidate_timeout_s: float = 60.0, fine_rounds: int = FINE_ROUNDS) -> tuple[TunedKernel, Callable | None]:
    """Coarse grid, then neighbours of the best, within `budget_s` seconds in all.

    `isolate`: run each candidate in the worker process (None: on CUDA only — on CPU a
    candidate cannot poison a GPU context and the worker's imports would cost more than
    the candidates). `candidate_timeout_s` bounds one isolated candidate's run and timing.
    """
    t_start = time.perf_counter()
    key = cache_key(family.name, shape, dtype, hw, tilelang_version)
    cached = lookup(key) if lookup else None
    if cached:
        try:
            kernel = family.build(shape, dtype, cached, hw.target)
            cand = Candidate(config=cached, status="ok", error="reused from the tuning cache")
            return TunedKernel(family.name, tuple(shape), dtype, hw.target, cached, (cand,), cached=True,
                               tuning_s=time.perf_counter() - t_start), kernel
        except Exception:
            pass  # a cached config that no longer builds is re-tuned below

    search = _Search(family, tuple(shape), dtype, hw, policy, budget_s, t_start, on_candidate,
                     _isolation_spec(family, hw, isolate), candidate_timeout_s)
    search.batch(list(family.search_space(shape, dtype, hw)), "coarse")
    expanded: set[tuple] = set()
    for rnd in range(1, fine_rounds + 1):
        before = search.best_latency()
        centers = [c for c in search.centers() if _ckey(c) not in expanded]
        if not centers:
            break
        expanded.update(_ckey(c) for c in centers)
        search.batch([n for c in centers for n in neighbours(c)], f"fine-{rnd}")
        if search.spent() or not search.best_latency() < before * (1 - FINE_GAIN):
            break

    best_config, kernel = search.best_config(), None
    if best_config is not None:
        kernel = search.kernels.get(_ckey(best_config))
        if kernel is None:  # timed in the worker: build it here (an in-process cache hit)
            kernel = family.build(shape, dtype, best_config, hw.target)
        if save:
            save(key, best_config)
    tuned = TunedKernel(family.name, tuple(shape), dtype, hw.target, best_config, tuple(search.candidates),
                        cached=False, tuning_s=time.perf_counter() - t_start)
    return tuned, kernel


def compile_workers(n: int) -> int:
    return max(1, min(n, os.cpu_count() or 1, 16))


def _ckey(config: KernelConfig) -> tuple:
    return tuple(sorted((str(k), repr(v)) for k, v in config.items()))


def _isolation_spec(family: KernelFamily, hw: Hardware, isolate: bool | None) -> tuple | str | None:
    """The worker's handle on the family when candidates are to be isolated, else None;
    a string says why isolation was wanted (auto mode) but is impossible."""
    if isolate is False or (isolate is None and hw.device != "cuda"):
        return None
    spec = isolation.family_spec(family)
    if spec is None:
        why = f"{family.name}: the isolation worker can neither import nor unpickle this family object"
        if isolate:
            raise KernelError(why + "; define it at module level or pass isolate=False")
        return why
    isolation.warm_up()  # the worker imports in the background while the first batch compiles
    return spec


class _Search:
    """The candidates of one tune: what was tried, how it went, and the fastest so far."""

    def __init__(self, family: KernelFamily, shape: Shape, dtype: str, hw: Hardware, policy: TimingPolicy,
                 budget_s: float, t_start: float, on_candidate: Callable[[Candidate], None] | None,
                 spec: tuple | str | None, timeout_s: float):
        self.family, self.shape, self.dtype, self.hw, self.policy = family, shape, dtype, hw, policy
        self.budget_s, self.t_start, self.on_candidate, self.timeout_s = budget_s, t_start, on_candidate, timeout_s
        self.spec = spec if isinstance(spec, tuple) else None
        self.note = spec if isinstance(spec, str) else ""  # why candidates ran in-process after all
        self.atol, self.rtol = family.tolerance(dtype, shape)
        self.candidates: list[Candidate] = []
        self.seen: set[tuple] = set()
        self.timed: list[tuple[float, KernelConfig]] = []
        self.kernels: dict[tuple, Callable] = {}  # kernels timed in this process
        self._data: tuple | None = None  # (inputs, reference), made on first in-process use

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

    def record(self, cand: Candidate) -> None:
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
        # Compiling dominates tuning (nvcc takes seconds per candidate) and runs outside the
        # GIL, so a batch compiles concurrently; candidates are run and timed one at a time.
        with ThreadPoolExecutor(max_workers=compile_workers(len(todo))) as pool:
            builds = [pool.submit(_build, self.family, self.shape, self.dtype, c, self.hw.target) for c in todo]
            for config, fut in zip(todo, builds):
                if self.spent() and self.timed:
                    fut.cancel()
                    self.record(Candidate(config, "skipped", error=skip, phase=phase))
                else:
                    self.record(self.evaluate(config, fut.result(), phase))

    def reject_reason(self, config: KernelConfig) -> str:
        try:
            return self.family.reject_reason(self.shape, self.dtype, config, self.hw) or ""
        except Exception:
            return ""  # a bug here must not reject every config; compiling will tell

    def evaluate(self, config: KernelConfig, built: tuple, phase: str) -> Candidate:
        kernel, compile_s, error = built
        if kernel is None:
            return Candidate(config, "compile_error", compile_s=compile_s, error=error, phase=phase)
        if self.spec is not None:
            try:
                r = isolation.run_candidate(self.spec, self.shape, self.dtype, config, self.hw.target,
                                            self.hw.device, self.policy, self.atol, self.rtol,
                                            timeout_s=self.timeout_s)
                return Candidate(config, r["status"], latency_ms=r["latency_ms"], compile_s=compile_s,
                                 error=r["error"], phase=phase)
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


def _build(family, shape, dtype, config, target) -> tuple[Callable | None, float, str]:
    t0 = time.perf_counter()
    try:
        return family.build(shape, dtype, config, target), time.perf_counter() - t0, ""
    except Exception as exc:
        return None, time.perf_counter() - t0, short_error(exc)
