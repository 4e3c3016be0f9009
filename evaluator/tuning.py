"""Search each family's config space for the fastest correct kernel on one shape.

In: a family, a problem shape, a dtype, the `Hardware`, a time budget and (optionally)
a persistent cache keyed by the toolchain. Out: a `TunedKernel` (the best config and
every candidate's fate: rejected before compiling, failed to compile, failed at run
time, wrong answer, or timed) and the compiled best kernel.

A failing candidate is data, never a crash of the run. The cache key holds the problem
shape and the whole toolchain (device, driver, CUDA, tilelang) because TileLang's own
autotune cache has been seen to ignore the problem shape.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import torch

from .bench import TimingPolicy, time_callable
from .kernels.base import KernelFamily
from .results import Candidate, Hardware, KernelConfig, Shape, TunedKernel

CacheLookup = Callable[[dict], "dict | None"]
CacheSave = Callable[[dict, dict], None]


def cache_key(family: str, shape: Shape, dtype: str, hw: Hardware, tilelang_version: str) -> dict:
    return {"family": family, "shape": list(shape), "dtype": dtype, "device": hw.name, "driver": hw.driver,
            "cuda": hw.cuda, "tilelang": tilelang_version, "target": hw.target}


def check_output(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> tuple[bool, str, float, float]:
    """(passed, reason, max_abs_err, max_rel_err) — NaN, Inf and all-zero outputs fail."""
    if not isinstance(out, torch.Tensor) or out.shape != ref.shape:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        return False, f"wrong output shape {got}, expected {tuple(ref.shape)}", float("inf"), float("inf")
    o, r = out.float(), ref.float()
    if torch.isnan(o).any():
        return False, "NaN in output", float("nan"), float("nan")
    if torch.isinf(o).any() and not torch.isinf(r).any():
        return False, "Inf in output", float("inf"), float("inf")
    if not o.any() and r.any():
        return False, "output is all zeros", float((r).abs().max()), 1.0
    diff = (o - r).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float((diff / r.abs().clamp_min(1e-6)).max()) if diff.numel() else 0.0
    ok = bool(torch.allclose(o, r, atol=atol, rtol=rtol))
    return ok, ("" if ok else f"mismatch: max abs err {max_abs:.3g} > atol {atol:g} + rtol {rtol:g}*|ref|"), max_abs, max_rel


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    # TileLang's compile errors carry the whole generated source; the first lines say why
    return " | ".join(line.strip() for line in text.splitlines()[:3])[:400]


def tune(family: KernelFamily, shape: Shape, dtype: str, hw: Hardware, *, budget_s: float = 60.0,
         tilelang_version: str = "", lookup: CacheLookup | None = None, save: CacheSave | None = None,
         policy: TimingPolicy = TimingPolicy(warmup=1, reps=5, max_seconds=0.5),
         on_candidate: Callable[[Candidate], None] | None = None) -> tuple[TunedKernel, Callable | None]:
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

    inputs = family.make_inputs(shape, dtype, hw.device, 0)
    ref = family.reference(*inputs)
    atol, rtol = family.tolerance(dtype, tuple(shape))
    configs = list(family.search_space(shape, dtype, hw))
    candidates: list[Candidate] = []
    best: tuple[float, KernelConfig, Callable] | None = None
    # Compiling dominates tuning (nvcc takes seconds per candidate) and runs outside the
    # GIL, so candidates compile concurrently; they are run and timed one at a time.
    with ThreadPoolExecutor(max_workers=compile_workers(len(configs))) as pool:
        builds = [pool.submit(_build, family, shape, dtype, config, hw.target) for config in configs]
        for config, fut in zip(configs, builds):
            if time.perf_counter() - t_start > budget_s and best is not None:
                fut.cancel()
                cand = Candidate(config=config, status="skipped", error=f"tuning budget of {budget_s:g}s spent")
            else:
                cand, kernel = _evaluate(fut.result(), config, hw, inputs, ref, atol, rtol, policy)
                if kernel is not None and (best is None or cand.latency_ms < best[0]):
                    best = (cand.latency_ms, config, kernel)
            candidates.append(cand)
            if on_candidate:
                on_candidate(cand)
    if best is not None and save:
        save(key, best[1])
    tuned = TunedKernel(family.name, tuple(shape), dtype, hw.target, best[1] if best else None,
                        tuple(candidates), cached=False, tuning_s=time.perf_counter() - t_start)
    return tuned, (best[2] if best else None)


def compile_workers(n: int) -> int:
    return max(1, min(n, os.cpu_count() or 1, 16))


def _build(family, shape, dtype, config, target) -> tuple[Callable | None, float, str]:
    t0 = time.perf_counter()
    try:
        return family.build(shape, dtype, config, target), time.perf_counter() - t0, ""
    except Exception as exc:
        return None, time.perf_counter() - t0, _short(exc)


def _evaluate(built, config, hw, inputs, ref, atol, rtol, policy):
    kernel, compile_s, error = built
    if kernel is None:
        return Candidate(config, "compile_error", compile_s=compile_s, error=error), None
    try:
        out = kernel(*inputs)
        if hw.device == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:
        return Candidate(config, "runtime_error", compile_s=compile_s, error=_short(exc)), None
    ok, reason, _, _ = check_output(out, ref, atol, rtol)
    if not ok:
        return Candidate(config, "wrong", compile_s=compile_s, error=reason), None
    t = time_callable(lambda: kernel(*inputs), hw.device, policy)
    return Candidate(config, "ok", latency_ms=t.median_ms, compile_s=compile_s), kernel
