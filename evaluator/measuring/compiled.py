"""torch.compile as the third side of a comparison: the alternative a team weighs against TileLang.

In: a PyTorch callable (a kernel family's reference, or the whole model), the argument
tuples it will be called with (one per rotated input set), a device and a mode as
`--compile-mode` names it. Out: `Prepared`, the compiled callables ready for the timer
with the wall seconds their first calls took (Dynamo's tracing, Inductor's code
generation and, in max-autotune, its autotuning), or the reason it could not be
compiled in one line. bench.py times the callables beside TileLang and PyTorch eager and
turns the whole into a `results.Compiled`.

Modes. "max-autotune" is Inductor's `max-autotune-no-cudagraphs`: our timer captures
each side in a CUDA graph of its own, and Inductor's CUDA graph trees inside that capture
would conflict (a graph tree captures, replays and manages its memory pool by itself,
which cannot happen inside another capture). "default" is Inductor's default mode, the
one worth paying for on a CPU, where max-autotune only adds minutes of C++ builds for
GEMM templates that do not apply. "none" skips the comparison.

Dynamo's state is reset before every compile and after every use (`release`). Its caches
are per code object, and a family's reference is one code object for every shape: without
a reset the second shape would be recompiled with dynamic shapes (a slower, more general
kernel) and the ninth would hit the recompile limit and silently run eagerly. `dynamic=
False` keeps every shape static. The reset also means that a compile that failed half-way
leaves nothing behind for the stages after it.

An optional comparison never fails a run: every exception becomes `error`.
"""

from __future__ import annotations

import math

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

# --compile-mode (config.COMPILE_MODES but "none") -> what torch.compile is given (see the
# module's docstring for why no cudagraphs).
INDUCTOR_MODES = {"max-autotune": "max-autotune-no-cudagraphs", "default": "default"}


@dataclass
class Prepared:
    """A compiled callable warmed up on every input set, or why there is none."""

    mode: str
    inductor_mode: str = ""
    fns: list[Callable[[], object]] = field(default_factory=list)  # one per input set; empty: not compiled
    first_output: Any = None  # of the first input set, for comparing with eager
    compile_s: float | None = None
    error: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.fns)


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and what Dynamo or Inductor said first.

    Their messages run to pages (hints, stacks, "Set TORCHDYNAMO_VERBOSE=1..."); the first
    line names the problem, and Dynamo's "Explanation:" line says it in words."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    text = lines[0] if lines else ""
    if len(lines) > 1 and (text.endswith(":") or lines[1].startswith("Explanation:")):
        text = f"{text} {lines[1]}"
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _graph_breaks() -> tuple[int, str]:
    """Graph breaks Dynamo counted since the last reset, and the first one's reason."""
    from torch._dynamo.utils import counters

    breaks = counters.get("graph_break", {})
    first = next(iter(breaks), "")
    return sum(breaks.values()), first.splitlines()[0].strip() if first else ""


def _cache_counts() -> tuple[int, int]:
    """Inductor FX-graph cache hits and misses since the last reset."""
    from torch._dynamo.utils import counters

    inductor = counters.get("inductor", {})
    return int(inductor.get("fxgraph_cache_hit", 0)), int(inductor.get("fxgraph_cache_miss", 0))


def release() -> None:
    """Forget every compiled graph: frees its memory and leaves no state for later stages."""
    try:
        import torch._dynamo

        torch._dynamo.reset()
        from torch._dynamo.utils import counters

        counters.clear()
    except Exception:  # pragma: no cover - a reset that fails leaves nothing worse than before
        pass


def prepare(fn: Callable[..., Any], calls: Sequence[tuple], device: str, mode: str, *, fullgraph: bool) -> Prepared:
    """`torch.compile(fn)` called once on every argument tuple in `calls`: the first call
    compiles, the others would recompile if a guard failed (they should not: same shapes
    and dtypes). `compile_s` is the wall time of those calls, device work included (a few
    forward passes, negligible beside seconds of compiling).

    `fullgraph=True` (single operators): a graph break is an error, since an operator that
    Dynamo cannot trace whole was not compiled. A whole model is compiled as users compile
    it, graph breaks allowed; how many there were is noted."""
    if mode not in INDUCTOR_MODES:
        return Prepared(mode, error="skipped (--compile-mode none)" if mode == "none" else f"unknown mode {mode!r}")
    prep = Prepared(mode, INDUCTOR_MODES[mode])
    release()
    t0 = time.perf_counter()
    try:
        compiled = torch.compile(fn, mode=prep.inductor_mode, fullgraph=fullgraph, dynamic=False)
        prep.first_output = compiled(*calls[0])
        for args in calls[1:]:
            compiled(*args)
        _sync(device)
    except Exception as exc:  # inductor error, no C++ compiler, a graph break under fullgraph, a dtype...
        prep.error = one_line(exc)
        prep.first_output = None
        release()
        return prep
    prep.compile_s = time.perf_counter() - t0
    n, why = _graph_breaks()
    if n:
        prep.notes.append(f"{n} graph break{'s' if n != 1 else ''} ({why}): those parts ran eagerly")
    hits, misses = _cache_counts()
    if hits:
        # A rerun on the same machine loads Inductor's compiled graphs from disk: the
        # seconds are real, but they are not what a first compile costs.
        prep.notes.append(
            f"{hits} of {hits + misses} graph{'s' if hits + misses != 1 else ''} came from "
            f"Inductor's on-disk cache: {prep.compile_s:.1f} s is a warm compile, not a cold one"
        )
    prep.fns = [(lambda args=args: compiled(*args)) for args in calls]
    return prep


def progress_text(c) -> str:
    """The torch.compile side in a progress line: its time and ratio, or why it has none.
    Escaped for rich markup: Dynamo's reasons quote code, which may hold [brackets]."""
    if c is None:
        return ""
    if c.timing is None:
        return f"; torch.compile: {c.error}".replace("[", "\\[")
    ratio = f", TileLang {c.ratio.value:.3g}x of it" if c.ratio is not None and math.isfinite(c.ratio.value) else ""
    took = "" if c.compile_s is None else f" (compiled in {c.compile_s:.2g} s)"  # 0.05 s: Inductor's cache
    return f"; torch.compile {c.timing.median_ms:.4g} ms{ratio}{took}"
