"""The metrics of the rewritten kernels, their op benchmarks and the profile that chose them.

In: a `RunResult`'s hot_ops, tuned, verify and op_bench. Out: the `KERNELS`, `OPS` and
`PROFILE` metrics, and the helpers the report reads the same numbers through
(`kernel_status`, `op_rows`, `op_speedup`, `op_label`). A kernel that failed is a failed
item, never "not measured": a family without a verified kernel counts as not correct, and
a model shape without a working kernel as speedup 0.
"""

from __future__ import annotations

import math

from ..results import OpBench, RunResult, shape_str
from .metric import Metric, stage_note


# kernels -------------------------------------------------------------


def kernel_status(result: RunResult) -> dict[str, bool] | None:
    """Per family: did every verification case pass, and does every model shape it was
    tuned for have a working kernel. A selected family with no verified kernel, or a
    model shape where tuning found no working config, counts as not correct: a failure
    is a failed item, never "not measured"."""
    if not result.verify and not result.tuned and not result.op_bench:
        return None if result.hot_ops is None or not result.families else {f: False for f in result.families}
    verified: dict[str, bool] = {}
    for v in result.verify:
        verified[v.family] = verified.get(v.family, True) and v.passed
    status = {f: verified.get(f, False) for f in result.families}
    status.update({f: ok for f, ok in verified.items() if f not in status})
    for t in result.tuned:
        if not t.ok:
            status[t.family] = False
    for b in result.op_bench:
        if b.source == "model" and not b.verified:
            status[b.family] = False
    return status


def _kernels_all_correct(r: RunResult) -> float | None:
    s = kernel_status(r)
    return None if s is None else float(bool(s) and all(s.values()))


def _kernels_fraction(r: RunResult) -> float | None:
    s = kernel_status(r)
    return None if not s else sum(s.values()) / len(s)


def failing_reasons(r: RunResult) -> list[str]:
    """The first failing verification case's reason per family ("family: reason")."""
    reasons = []
    for v in r.verify:
        for c in v.cases:
            if not c.passed and c.reason:
                reasons.append(f"{v.family}: {c.reason}")
                break
    return reasons


def _kernels_explain(r: RunResult) -> str:
    s = kernel_status(r)
    if s is None:
        return stage_note(r, "verify", "verification stage not run")
    bad = [f for f, ok in s.items() if not ok]
    reasons = failing_reasons(r)
    text = f"{sum(s.values())}/{len(s)} kernel families correct ({len(r.verify)} kernels checked)"
    if bad:
        text += "; failing: " + ", ".join(bad)
        if reasons:
            text += " (" + "; ".join(dict.fromkeys(reasons)) + ")"
    return text


# ops -----------------------------------------------------------------


def fused_away(result: RunResult) -> list[OpBench]:
    """The model-shape rows whose kernel the routed model never ran: every call at that
    shape ran inside another family's fused kernel (ResNet's convolutions inside
    conv_bn_relu), whose own row times that work. Empty without an end-to-end count."""
    if result.e2e is None:
        return []
    away = {(c.family, c.shape) for c in result.e2e.calls if c.all_fused}
    return [b for b in result.op_bench if b.source == "model" and (b.family, shape_str(b.shape)) in away]


def op_rows(result: RunResult) -> tuple[list[OpBench], str]:
    """The op-benchmark rows the op metrics use: the model's own shapes when any were
    benchmarked (standard sweep shapes say little about this model), else all rows. A
    model shape whose every call ran fused into another kernel is left out (`fused_away`):
    its kernel decides nothing the model runs, and the fused kernel's row is counted."""
    away = {id(b) for b in fused_away(result)}
    model = [b for b in result.op_bench if b.source == "model" and id(b) not in away]
    return (model, "model shapes") if model else (list(result.op_bench), "standard shapes")


def op_speedup(b: OpBench) -> float | None:
    if not b.verified:
        return None  # an unverified kernel's time is not a speed
    if b.speedup is not None and math.isfinite(b.speedup) and b.speedup > 0:
        return float(b.speedup)
    if b.tilelang is not None and b.tilelang.median_ms > 0:
        return b.torch.median_ms / b.tilelang.median_ms
    return None


def op_label(b: OpBench) -> str:
    return f"{b.family} {shape_str(b.shape)} {b.dtype}"


def _speedups(r: RunResult) -> list[tuple[OpBench, float]]:
    rows, _ = op_rows(r)
    return [(b, s) for b in rows if (s := op_speedup(b)) is not None]


def _geomean(r: RunResult) -> float | None:
    sp = _speedups(r)
    return math.exp(sum(math.log(s) for _, s in sp) / len(sp)) if sp else None


def _min_speedup(r: RunResult) -> float | None:
    rows, _ = op_rows(r)
    if rows and any(op_speedup(b) is None for b in rows):
        return 0.0  # a shape without a working, verified kernel is the worst speed there is
    sp = _speedups(r)
    return min(s for _, s in sp) if sp else None


def _clean_min(r: RunResult) -> float | None:
    """The slowest op among the rows with no flag: the true minimum is at most this, so a
    flagged row elsewhere cannot lift a minimum that fails here."""
    rows, _ = op_rows(r)
    clean = [s for b in rows if not b.flags and (s := op_speedup(b)) is not None]
    return min(clean) if clean else None


def _ops_doubt(r: RunResult) -> str:
    rows, _ = op_rows(r)
    bad = [f"{op_label(b)} ({', '.join(b.flags)})" for b in rows if b.flags]
    return ("flagged: " + "; ".join(bad)) if bad else ""


def _ops_explain(r: RunResult) -> str:
    rows, which = op_rows(r)
    if not rows:
        return stage_note(r, "bench", "op benchmark stage not run")
    sp = _speedups(r)
    failed = [op_label(b) for b in rows if op_speedup(b) is None]
    parts = [f"{len(sp)} ops on {which}"]
    if sp:
        worst = min(sp, key=lambda x: x[1])
        parts.append(f"slowest: {op_label(worst[0])} at {worst[1]:.2f}x")
    if failed:
        parts.append("no TileLang time for: " + ", ".join(failed))
    away = fused_away(r)
    if away:
        fams = ", ".join(sorted({b.family for b in away}))
        parts.append(
            f"{len(away)} shape{'s' * (len(away) != 1)} ({fams}) left out: every call ran fused into another kernel"
        )
    return "; ".join(parts)


# profile -------------------------------------------------------------


def _selected_share(r: RunResult) -> float | None:
    if r.hot_ops is None or not r.hot_ops.ops:
        return None
    return sum(o.share for o in r.hot_ops.ops if o.family in r.hot_ops.selected)


def _profile_explain(r: RunResult) -> str:
    if r.hot_ops is None:
        return stage_note(r, "profile", "profiling stage not run")
    return f"selected: {', '.join(r.hot_ops.selected) or 'none'} of {len(r.hot_ops.ops)} op families"


KERNELS = [
    Metric(
        "kernels.all_correct",
        "1/0",
        "1 when every rewritten TileLang kernel matched the PyTorch reference on every verification case",
        _kernels_all_correct,
        _kernels_explain,
    ),
    Metric(
        "kernels.correct_fraction",
        "fraction",
        "share of rewritten kernel families whose verification cases all passed",
        _kernels_fraction,
        _kernels_explain,
    ),
]

OPS = [
    Metric(
        "ops.speedup_geomean",
        "x",
        "geometric mean of vendor-library time / TileLang time over the benchmarked ops with a verified "
        "kernel (the model's own shapes when any were benchmarked); > 1 means TileLang is faster",
        _geomean,
        _ops_explain,
        _ops_doubt,
    ),
    Metric(
        "ops.speedup_min",
        "x",
        "the slowest op's vendor-library time / TileLang time (same rows as ops.speedup_geomean); "
        "0 when a shape has no working, verified kernel",
        _min_speedup,
        _ops_explain,
        _ops_doubt,
        _clean_min,
    ),
    Metric(
        "ops.count",
        "ops",
        "number of benchmarked ops with a TileLang time (same rows as ops.speedup_geomean)",
        lambda r: float(len(_speedups(r))) if r.op_bench else None,
        _ops_explain,
    ),
]

PROFILE = [
    Metric(
        "profile.selected_share",
        "fraction",
        "share of the profiled operator time taken by the op families chosen for rewriting",
        _selected_share,
        _profile_explain,
    ),
]
