"""How one time, one comparison and the torch.compile side are recorded.

In: the timer's repeated rounds (timing.py) and the torch.compile measurement
(compiled.py). Out: `Timing` (one callable's spread of times), `Ratio` (two sides timed
in interleaved rounds, with a bootstrap interval) and `Compiled` (torch.compile of the
PyTorch side as a third side). They have a module of their own because both the
per-kernel benchmark (`OpBench`, kernels.py) and the whole model (`E2EBench`, model.py)
are made of them.
"""

from __future__ import annotations

import math

from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """Repeated measurements of one callable, in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    cv: float  # coefficient of variation (std / mean)
    reps: int
    timer: str = "perf_counter"  # "perf_counter" | "cuda_event" | "cuda_graph" | "profiler"
    unstable: bool = False  # spread still too wide after one re-measurement
    dropped: int = 0  # rounds dropped as disturbed by outside load (interleaved timing)


@dataclass(frozen=True)
class Ratio:
    """Reference time / candidate time from interleaved paired rounds, with a 95%
    bootstrap interval over the rounds (> 1: the candidate is faster)."""

    value: float
    low: float
    high: float
    rounds: int = 0


@dataclass(frozen=True)
class Compiled:
    """`torch.compile` of the PyTorch side, the comparison a team weighs against TileLang:
    timed by the same timer in the same interleaved rounds as the other two sides.

    Optional, so never a gate: where it could not run, `error` says why in one line and
    the other numbers stand. None where a result has none: not asked for
    (--compile-mode none), or a result written before this comparison existed."""

    mode: str  # as --compile-mode names it: "max-autotune" | "default"
    inductor_mode: str = ""  # what torch.compile was given ("max-autotune-no-cudagraphs" on CUDA)
    timing: Timing | None = None  # None: it could not run, or had nothing to compare with (`error`)
    # compiled time / TileLang time, paired per round with a 95% interval (> 1: TileLang is
    # faster); None where either side has no time.
    ratio: Ratio | None = None
    compile_s: float | None = None  # wall seconds of the first calls, which trace, compile and autotune
    error: str = ""  # why it could not run (inductor error, no C++ compiler, a graph break...), one line
    note: str = ""  # what to know about a number that stands (graph breaks, outputs that differ from eager)


def geomean(rows: list) -> "Ratio | float":
    """Geometric mean of speedups (numbers or Ratios), a Ratio's interval ends combined the same way."""
    vals = [r.value if isinstance(r, Ratio) else r for r in rows]
    if not all(isinstance(r, Ratio) for r in rows):
        return math.exp(sum(math.log(v) for v in vals) / len(vals))

    def g(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    return Ratio(g(vals), g([r.low for r in rows]), g([r.high for r in rows]), min(r.rounds for r in rows))
