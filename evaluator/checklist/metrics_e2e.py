"""The metrics of the model end to end with its calls routed to TileLang, and of the soak.

In: a `RunResult`'s e2e and soak. Out: the `E2E` and `SOAK` metrics. A swap-in that was
attempted and crashed is a failure (speedup, match and coverage 0), not "not measured";
one that ran nothing in TileLang compared the model with itself, so its speedup and match
are not evaluated and the verdict says INCONCLUSIVE. An unstable, stalled or contradicted
end-to-end number, and a match against a reference without signal, are doubts, so an
item on them cannot pass.
"""

from __future__ import annotations

from typing import Callable

from ..results import RunResult
from .metric import Metric, stage_note


def _e2e_failed(r: RunResult) -> bool:
    """The swap-in was attempted and crashed."""
    e = r.e2e
    if e is None:
        return bool(r.families) and "e2e" in r.stage_errors
    return e.swapped is None


def _nothing_ran(r: RunResult) -> bool:
    """The swapped model ran, but no call ran in TileLang: it was compared with itself."""
    e = r.e2e
    return e is not None and e.swapped is not None and e.tilelang_calls == 0 and bool(e.calls or e.views)


def _reference_broken(r: RunResult) -> bool:
    return r.e2e is not None and any(k.startswith("reference") for k in r.e2e.nonfinite)


def _e2e_speedup(r: RunResult) -> float | None:
    if _e2e_failed(r):
        return 0.0
    if _nothing_ran(r):
        return None  # no evidence about TileLang either way (the verdict says INCONCLUSIVE)
    return r.e2e.speedup if r.e2e is not None else None


def _e2e_match(r: RunResult) -> float | None:
    if _e2e_failed(r):
        return 0.0
    if r.e2e is None or _nothing_ran(r):
        return None  # nothing was compared: no call ran in TileLang
    return float(r.e2e.outputs_match)


def _match_doubt(r: RunResult) -> str:
    """A reference without signal, or with NaN or Inf of its own: the comparison says
    nothing about the kernels either way."""
    if r.e2e is None:
        return ""
    return r.e2e.error if _reference_broken(r) else r.e2e.no_signal


def _e2e_coverage(r: RunResult) -> float | None:
    if _e2e_failed(r) or _nothing_ran(r):
        return 0.0
    return r.e2e.coverage if r.e2e is not None else None


def _e2e_calls(r: RunResult) -> float | None:
    if r.e2e is None:
        return 0.0 if _e2e_failed(r) else None
    return float(r.e2e.tilelang_calls)


def _e2e_fallback_share(r: RunResult) -> float | None:
    e = r.e2e
    if e is None:
        return 1.0 if _e2e_failed(r) else None
    if not e.calls and not e.views and not e.tilelang_calls:
        return None  # a baseline from before calls were counted
    total = e.tilelang_calls + e.fallback_calls
    return e.fallback_calls / total if total else 1.0


def _e2e_doubt(r: RunResult) -> str:
    e = r.e2e
    if e is None:
        return ""
    bad = [f for f in e.flags if f.startswith(("unstable", "contradicts", "graph capture failed", "stalled"))]
    return "; ".join(bad)


def _e2e_explain(r: RunResult) -> str:
    e = r.e2e
    if e is None:
        return stage_note(r, "e2e", "end-to-end stage not run")
    if e.swapped is None:
        return f"swapped model did not run: {e.error or 'no reason recorded'}"
    err = "n/a" if e.rel_l2_err is None else f"{e.rel_l2_err:.2g}"
    text = (
        f"{e.reference.median_ms:.3f} ms -> {e.swapped.median_ms:.3f} ms ({e.method or e.reference.timer})"
        + (f", {e.ratio.low:.2f}-{e.ratio.high:.2f}x" if e.ratio else "")
        + f"; {e.tilelang_calls} calls in TileLang, {e.fallback_calls} fell back; relative L2 error {err}; "
        f"coverage {e.coverage:.0%}"
    )
    if e.error:
        text += f"; {e.error}"
    return text


def _vs_compiled(r: RunResult) -> float | None:
    c = r.e2e.compiled if r.e2e is not None else None
    if c is None or c.ratio is None or _nothing_ran(r):
        return None
    return c.ratio.value


def _vs_compiled_explain(r: RunResult) -> str:
    c = r.e2e.compiled if r.e2e is not None else None
    if c is None:
        return "torch.compile was not a side of this run (--compile-mode none, or the e2e stage did not run)"
    if c.timing is None or c.ratio is None:
        return f"torch.compile ({c.mode}) not timed: {c.error or 'no reason recorded'}"
    took = f", compiled in {c.compile_s:.1f} s" if c.compile_s is not None else ""
    return (
        f"torch.compile ({c.mode}) {c.timing.median_ms:.3f} ms against TileLang's "
        f"{r.e2e.swapped.median_ms:.3f} ms: {c.ratio.low:.2f}-{c.ratio.high:.2f}x{took}"
    )


def _vs_compiled_doubt(r: RunResult) -> str:
    c = r.e2e.compiled if r.e2e is not None else None
    return "unstable" if c is not None and c.timing is not None and c.timing.unstable else _e2e_doubt(r)


def _soak(attr: str, scale: float = 1.0, absolute: bool = False) -> Callable[[RunResult], float | None]:
    def measure(r: RunResult) -> float | None:
        if r.soak is None or not r.soak.window_ms:
            return None
        v = getattr(r.soak, attr) * scale
        return abs(v) if absolute else v

    return measure


def _soak_explain(r: RunResult) -> str:
    s = r.soak
    if s is None or not s.window_ms:
        return stage_note(r, "soak", "soak stage not run")
    return (
        f"{s.seconds:.0f} s, {s.iterations} iterations, {len(s.window_ms)} windows "
        f"({s.window_ms[0]:.3f} -> {s.window_ms[-1]:.3f} ms)" + ("; " + "; ".join(s.notes) if s.notes else "")
    )


E2E = [
    Metric(
        "e2e.speedup",
        "x",
        "end-to-end model time without / with calls routed to TileLang (CUDA-graph replay on a GPU); "
        "0 when the swap-in crashed; not evaluated when no call ran in TileLang",
        _e2e_speedup,
        _e2e_explain,
        _e2e_doubt,
    ),
    Metric(
        "e2e.outputs_match",
        "1/0",
        "1 when the model's outputs with calls routed to TileLang match the unmodified model within the "
        "dtype's relative tolerance (no NaN or Inf on either side) and at least one call ran in TileLang; "
        "not evaluated where no call ran; a reference without signal (near zero or constant) or with NaN "
        "or Inf of its own decides nothing",
        _e2e_match,
        _e2e_explain,
        _match_doubt,
    ),
    Metric(
        "e2e.vs_compiled",
        "x",
        "end-to-end time of the model through torch.compile / with calls routed to TileLang, same timer, "
        "same rounds (> 1: TileLang is faster than the free alternative); not evaluated without a "
        "torch.compile side (--compile-mode none)",
        _vs_compiled,
        _vs_compiled_explain,
        _vs_compiled_doubt,
    ),
    Metric(
        "e2e.coverage",
        "fraction",
        "share of the profiled operator time whose calls actually ran in TileLang in the end-to-end run",
        _e2e_coverage,
        _e2e_explain,
    ),
    Metric(
        "e2e.tilelang_calls", "calls", "calls per forward pass that ran a TileLang kernel", _e2e_calls, _e2e_explain
    ),
    Metric(
        "e2e.fallback_share",
        "fraction",
        "share of the chosen families' calls that fell back to PyTorch (shape not tuned, mask, dtype...)",
        _e2e_fallback_share,
        _e2e_explain,
    ),
]

SOAK = [
    Metric(
        "soak.drift_pct",
        "%",
        "absolute change of median latency between the first and last soak window, in percent",
        _soak("drift", 100.0, absolute=True),
        _soak_explain,
    ),
    Metric(
        "soak.cv_pct",
        "%",
        "coefficient of variation of the soak window latencies, in percent",
        _soak("cv", 100.0),
        _soak_explain,
    ),
    Metric(
        "soak.memory_growth_mb",
        "MB",
        "memory growth from the start to the end of the soak",
        _soak("memory_growth_mb"),
        _soak_explain,
    ),
]
