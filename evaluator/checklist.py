"""Go/no-go checklists: load and validate the YAML, measure each item, decide.

In: a checklist file (YAML; see checklists/default.yaml) and a `RunResult`. Out: a frozen
`Checklist` (validated with pydantic; errors name the file, the line, the item and what
is allowed) and a `Verdict` whose outcomes carry the measured value and its evidence.

Metrics come from one catalogue, `METRICS`: each maps a `RunResult` to a number, or to
None when the stage that measures it did not run. An item whose metric is None is "not
evaluated": it is listed, never passed. The decision is NO-GO when a blocker fails,
CONDITIONAL GO when anything else fails or a required item could not be evaluated, and
GO only when every required item passed (or failed under a waiver that has not expired).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Callable, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from . import portability as _portability, targets as _targets
from .errors import ChecklistError, ConfigError
from .resources import DEFAULT_CHECKLIST, SHIPPED_CHECKLISTS
from .results import Outcome, OpBench, RunResult, Verdict, shape_str

# Shipped with the package (top-level checklists/ in a checkout); `--checklist production`
# names one of them (or a team's own ./checklists/production.yaml), a path any other file.
CHECKLISTS: Path = SHIPPED_CHECKLISTS

COMPARATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda v, t: v >= t or math.isclose(v, t, rel_tol=1e-9, abs_tol=1e-12),
    "<=": lambda v, t: v <= t or math.isclose(v, t, rel_tol=1e-9, abs_tol=1e-12),
    ">": lambda v, t: v > t,
    "<": lambda v, t: v < t,
    # 1/0 metrics arrive as floats; exact float equality would be a trap for thresholds
    # written as 0.95 in YAML.
    "==": lambda v, t: math.isclose(v, t, rel_tol=1e-9, abs_tol=1e-12),
    "!=": lambda v, t: not math.isclose(v, t, rel_tol=1e-9, abs_tol=1e-12),
}
SEVERITIES = ("blocker", "major", "minor")
DECISIONS = ("GO", "CONDITIONAL GO", "NO-GO")
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


# ---------------------------------------------------------------- the metric catalogue


@dataclass(frozen=True)
class Metric:
    """One measurable number. `measure` returns None when it was not measured, and
    `explain` says where the number came from (or why there is none): the evidence."""

    name: str
    unit: str
    meaning: str
    measure: Callable[[RunResult], float | None]
    explain: Callable[[RunResult], str] = field(default=lambda r: "")
    # Why the number cannot be trusted (unstable timing, a timer or Amdahl check that
    # disagrees), or "": an item measured on such a number fails, it never passes.
    doubt: Callable[[RunResult], str] = field(default=lambda r: "")

    def __call__(self, result: RunResult) -> float | None:
        value = self.measure(result)
        if value is None:
            return None
        value = float(value)
        return value if math.isfinite(value) else None


def _stage_note(result: RunResult, stage: str, fallback: str) -> str:
    err = result.stage_errors.get(stage)
    return f"{stage} stage failed: {err}" if err else fallback


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


def _kernels_explain(r: RunResult) -> str:
    s = kernel_status(r)
    if s is None:
        return _stage_note(r, "verify", "verification stage not run")
    bad = [f for f, ok in s.items() if not ok]
    reasons = []
    for v in r.verify:
        for c in v.cases:
            if not c.passed and c.reason:
                reasons.append(f"{v.family}: {c.reason}")
                break
    text = f"{sum(s.values())}/{len(s)} kernels correct"
    if bad:
        text += "; failing: " + ", ".join(bad)
        if reasons:
            text += " (" + "; ".join(dict.fromkeys(reasons)) + ")"
    return text


# ops -----------------------------------------------------------------


def op_rows(result: RunResult) -> tuple[list[OpBench], str]:
    """The op-benchmark rows the op metrics use: the model's own shapes when any were
    benchmarked (standard sweep shapes say little about this model), else all rows."""
    model = [b for b in result.op_bench if b.source == "model"]
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


def _ops_doubt(r: RunResult) -> str:
    rows, _ = op_rows(r)
    bad = [f"{op_label(b)} ({', '.join(b.flags)})" for b in rows if b.flags]
    return ("flagged: " + "; ".join(bad)) if bad else ""


def _ops_explain(r: RunResult) -> str:
    rows, which = op_rows(r)
    if not rows:
        return _stage_note(r, "bench", "op benchmark stage not run")
    sp = _speedups(r)
    failed = [op_label(b) for b in rows if op_speedup(b) is None]
    parts = [f"{len(sp)} ops on {which}"]
    if sp:
        worst = min(sp, key=lambda x: x[1])
        parts.append(f"slowest: {op_label(worst[0])} at {worst[1]:.2f}x")
    if failed:
        parts.append("no TileLang time for: " + ", ".join(failed))
    return "; ".join(parts)


# e2e / soak ----------------------------------------------------------


def _e2e_failed(r: RunResult) -> bool:
    """The swap-in was attempted and crashed, or ran nothing in TileLang."""
    e = r.e2e
    if e is None:
        return bool(r.families) and "e2e" in r.stage_errors
    return e.swapped is None or e.tilelang_calls == 0 and bool(e.calls or e.views)


def _e2e_speedup(r: RunResult) -> float | None:
    if _e2e_failed(r):
        return 0.0
    return r.e2e.speedup if r.e2e is not None else None


def _e2e_match(r: RunResult) -> float | None:
    if _e2e_failed(r):
        return 0.0
    if r.e2e is None:
        return None
    return float(r.e2e.outputs_match)


def _e2e_coverage(r: RunResult) -> float | None:
    if _e2e_failed(r):
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
    bad = [f for f in e.flags if f.startswith(("unstable", "contradicts", "graph capture failed"))]
    return "; ".join(bad)


def _e2e_explain(r: RunResult) -> str:
    e = r.e2e
    if e is None:
        return _stage_note(r, "e2e", "end-to-end stage not run")
    if e.swapped is None:
        return f"swapped model did not run: {e.error or 'no reason recorded'}"
    err = "n/a" if e.rel_l2_err is None else f"{e.rel_l2_err:.2g}"
    text = (f"{e.reference.median_ms:.3f} ms -> {e.swapped.median_ms:.3f} ms ({e.method or e.reference.timer})"
            + (f", {e.ratio.low:.2f}-{e.ratio.high:.2f}x" if e.ratio else "")
            + f"; {e.tilelang_calls} calls in TileLang, {e.fallback_calls} fell back; relative L2 error {err}; "
            f"coverage {e.coverage:.0%}")
    if e.error:
        text += f"; {e.error}"
    return text


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
        return _stage_note(r, "soak", "soak stage not run")
    return (f"{s.seconds:.0f} s, {s.iterations} iterations, {len(s.window_ms)} windows "
            f"({s.window_ms[0]:.3f} -> {s.window_ms[-1]:.3f} ms)"
            + ("; " + "; ".join(s.notes) if s.notes else ""))


# upstream ------------------------------------------------------------


def _up(getter: Callable[[Any], float | None]) -> Callable[[RunResult], float | None]:
    def measure(r: RunResult) -> float | None:
        u = r.upstream
        if u is None or not u.measured:
            return None
        return getter(u)
    return measure


def _up_explain(r: RunResult) -> str:
    u = r.upstream
    if u is None:
        return _stage_note(r, "upstream", "upstream stage not run")
    if not u.measured:
        return f"upstream not measured: {u.note or 'no reason recorded'}"
    text = f"{u.repo or 'upstream'} at {u.head[:10] or '?'} as of {u.as_of or '?'}"
    return text + (f"; {u.note}" if u.note else "")


def _fork_explain(r: RunResult) -> str:
    u = r.upstream
    if u is None or not u.measured:
        return _up_explain(r)
    if u.fork_days_behind is None:
        fork = (u.details or {}).get("fork")
        if isinstance(fork, dict) and fork.get("reason"):
            return f"fork drift not measured: {fork['reason']}"
        return "no vendor fork given (only applies when evaluating a fork)"
    return f"fork {u.fork_behind} commits behind, {u.fork_ahead} ahead of upstream"


# baselines -----------------------------------------------------------


def _regressions(r: RunResult) -> float | None:
    c = r.comparison
    # A kernel that worked in the previous baseline and is gone now is a regression
    # whatever the timing policy; slower times count only between comparable baselines.
    if c is None:
        return None
    gone = [x for x in c.changes if x.status == "gone"]
    if not c.comparable:
        return float(len(gone)) if gone else None
    return float(len(c.regressions))


def _baseline_explain(r: RunResult) -> str:
    c = r.comparison
    if c is None:
        return "no previous baseline to compare with"
    if not c.comparable:
        return f"previous baseline {c.reference} not comparable: {c.note}"
    regs = c.regressions
    text = f"against {c.reference}: {len(regs)} of {len(c.changes)} measurements regressed"
    if regs:
        text += " (" + ", ".join(f"{x.key} {x.ratio:.2f}x time" if x.ratio else x.key for x in regs[:5]) + ")"
    return text


def _selected_share(r: RunResult) -> float | None:
    if r.hot_ops is None or not r.hot_ops.ops:
        return None
    return sum(o.share for o in r.hot_ops.ops if o.family in r.hot_ops.selected)


def _profile_explain(r: RunResult) -> str:
    if r.hot_ops is None:
        return _stage_note(r, "profile", "profiling stage not run")
    return f"selected: {', '.join(r.hot_ops.selected) or 'none'} of {len(r.hot_ops.ops)} op families"


# portability ---------------------------------------------------------
# The matrix of portability.py: the rewritten kernels lowered for other accelerators and
# judged against their published limits, never run there. The numbers and their evidence
# come from that module; None when the stage did not run or did not check the target.


def _port(name: str) -> Callable[[RunResult], float | None]:
    def measure(r: RunResult) -> float | None:
        return None if r.portability is None else _portability.metrics(r.portability).get(name)
    return measure


def _port_explain(name: str) -> Callable[[RunResult], str]:
    def explain(r: RunResult) -> str:
        p = r.portability
        if p is None:
            if isinstance(r.settings, dict) and r.settings.get("targets") == []:
                return "portability not checked (--targets none)"
            return _stage_note(r, "portability", "portability stage not run")
        key = name.split(".")[1] if name.count(".") == 2 else ""
        if key and key not in p.targets:
            return f"{key} was not among the targets checked ({', '.join(p.targets)})"
        return _portability.explain(p, name)
    return explain


def _port_metric(name: str, meaning: str | None = None) -> Metric:
    unit, text = _portability.METRIC_INFO.get(name, ("fraction", ""))
    return Metric(name, unit, meaning or text, _port(name), _port_explain(name))


_CATALOGUE = [
    Metric("kernels.all_correct", "1/0",
           "1 when every rewritten TileLang kernel matched the PyTorch reference on every verification case",
           _kernels_all_correct, _kernels_explain),
    Metric("kernels.correct_fraction", "fraction",
           "share of rewritten kernel families whose verification cases all passed",
           _kernels_fraction, _kernels_explain),
    Metric("ops.speedup_geomean", "x",
           "geometric mean of vendor-library time / TileLang time over the benchmarked ops with a verified "
           "kernel (the model's own shapes when any were benchmarked); > 1 means TileLang is faster",
           _geomean, _ops_explain, _ops_doubt),
    Metric("ops.speedup_min", "x",
           "the slowest op's vendor-library time / TileLang time (same rows as ops.speedup_geomean); "
           "0 when a shape has no working, verified kernel",
           _min_speedup, _ops_explain, _ops_doubt),
    Metric("ops.count", "ops",
           "number of benchmarked ops with a TileLang time (same rows as ops.speedup_geomean)",
           lambda r: float(len(_speedups(r))) if r.op_bench else None, _ops_explain),
    Metric("e2e.speedup", "x",
           "end-to-end model time without / with calls routed to TileLang (CUDA-graph replay on a GPU); "
           "0 when the swap-in crashed or no call ran in TileLang",
           _e2e_speedup, _e2e_explain, _e2e_doubt),
    Metric("e2e.outputs_match", "1/0",
           "1 when the model's outputs with calls routed to TileLang match the unmodified model within the "
           "dtype's relative tolerance and at least one call ran in TileLang",
           _e2e_match, _e2e_explain),
    Metric("e2e.coverage", "fraction",
           "share of the profiled operator time whose calls actually ran in TileLang in the end-to-end run",
           _e2e_coverage, _e2e_explain),
    Metric("e2e.tilelang_calls", "calls",
           "calls per forward pass that ran a TileLang kernel",
           _e2e_calls, _e2e_explain),
    Metric("e2e.fallback_share", "fraction",
           "share of the chosen families' calls that fell back to PyTorch (shape not tuned, mask, dtype...)",
           _e2e_fallback_share, _e2e_explain),
    Metric("profile.selected_share", "fraction",
           "share of the profiled operator time taken by the op families chosen for rewriting",
           _selected_share, _profile_explain),
    Metric("soak.drift_pct", "%",
           "absolute change of median latency between the first and last soak window, in percent",
           _soak("drift", 100.0, absolute=True), _soak_explain),
    Metric("soak.cv_pct", "%",
           "coefficient of variation of the soak window latencies, in percent",
           _soak("cv", 100.0), _soak_explain),
    Metric("soak.memory_growth_mb", "MB",
           "memory growth from the start to the end of the soak",
           _soak("memory_growth_mb"), _soak_explain),
    _port_metric("portability.targets_ok"),
    _port_metric("portability.kernels_ok"),
    # One per known target, so a checklist can require the accelerators a team deploys on.
    *(_port_metric(f"portability.{key}.kernels_ok",
                   f"share of rewritten kernels that lower, with a config that fits its published limits, "
                   f"for {spec.name} ({spec.arch}); not evaluated when {key} was not among --targets")
      for key, spec in _targets.TARGETS.items()),
    Metric("upstream.commits_per_week_90d", "commits/week",
           "commits to the upstream TileLang repository per week over the last 90 days",
           _up(lambda u: None if u.commits_90d is None else u.commits_90d / (90 / 7)), _up_explain),
    Metric("upstream.active_authors_90d", "authors",
           "distinct commit authors upstream over the last 90 days",
           _up(lambda u: u.authors_90d), _up_explain),
    Metric("upstream.days_since_release", "days",
           "days since the latest upstream release tag",
           _up(lambda u: u.days_since_release), _up_explain),
    Metric("upstream.days_since_last_commit", "days",
           "days since the latest upstream commit",
           _up(lambda u: u.days_since_last_commit), _up_explain),
    Metric("upstream.maintenance_score", "score",
           "0-10, OpenSSF Scorecard's 'Maintained' check from commits only: min(10, 10 x commits in 90 days // 12)",
           _up(lambda u: u.maintenance_score), _up_explain),
    Metric("fork.days_behind", "days",
           "upstream head's commit date minus that of the newest upstream commit the vendor fork contains (0 when in sync)",
           _up(lambda u: u.fork_days_behind), _fork_explain),
    Metric("fork.commits_behind", "commits",
           "upstream commits the vendor fork has not merged",
           _up(lambda u: u.fork_behind), _fork_explain),
    Metric("baseline.regressions", "count",
           "measurements slower than the previous baseline by more than the noise threshold "
           "(not measured when there is no comparable previous baseline)",
           _regressions, _baseline_explain),
]

METRICS: dict[str, Metric] = {m.name: m for m in _CATALOGUE}


def describe_metrics() -> str:
    """The catalogue as plain text, for `evaluate checklist metrics`."""
    width = max(len(n) for n in METRICS)
    uw = max(len(m.unit) for m in METRICS.values())
    return "\n".join(f"{m.name:<{width}}  {m.unit:<{uw}}  {m.meaning}" for m in METRICS.values())


# ---------------------------------------------------------------- the checklist file


class Waiver(BaseModel):
    """A signed-off exception to one item. After `expires` it no longer applies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(min_length=1)
    who: str = Field(min_length=1)
    expires: date


class Item(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    title: str = Field(min_length=1)
    metric: str
    comparator: str
    threshold: float
    severity: str
    rationale: str = Field(min_length=1)
    # False: the item only applies when its metric exists (a vendor fork, a previous
    # baseline); when not measured it is still listed but does not hold back a GO.
    required: bool = True
    waiver: Waiver | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError("id must be lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
        return v

    @field_validator("metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        if v not in METRICS:
            close = difflib.get_close_matches(v, METRICS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ValueError(f"unknown metric '{v}'; {hint}list them with `evaluate checklist metrics`")
        return v

    @field_validator("comparator")
    @classmethod
    def _comparator(cls, v: str) -> str:
        if v not in COMPARATORS:
            raise ValueError(f"comparator '{v}' is not allowed; use one of {', '.join(COMPARATORS)}")
        return v

    @field_validator("severity")
    @classmethod
    def _severity(cls, v: str) -> str:
        if v not in SEVERITIES:
            raise ValueError(f"severity '{v}' is not allowed; use one of {', '.join(SEVERITIES)}")
        return v


class Checklist(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    # "fail": a required item that was not measured counts as failed (a production gate
    # wants evidence for everything); "conditional": it only prevents a plain GO.
    on_not_evaluated: Literal["conditional", "fail"] = "conditional"
    items: tuple[Item, ...] = Field(min_length=1)
    source: str = ""  # the file it came from; set by load()


_ITEM_FIELDS = list(Item.model_fields)
_TOP_FIELDS = [f for f in Checklist.model_fields if f != "source"]


def _lines(node: yaml.Node | None) -> dict[tuple, int]:
    """Line numbers (1-based) of every mapping key and sequence entry, by path."""
    out: dict[tuple, int] = {}

    def walk(n: yaml.Node, path: tuple) -> None:
        out.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                out[path + (key,)] = k.start_mark.line + 1
                walk(v, path + (key,))
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                out[path + (i,)] = v.start_mark.line + 1
                walk(v, path + (i,))

    if node is not None:
        walk(node, ())
    return out


def _describe(err: dict[str, Any], raw: Any) -> str:
    """One pydantic error in words: what is wrong and what is allowed."""
    loc = err["loc"]
    kind = err["type"]
    leaf = str(loc[-1]) if loc else ""
    in_item = len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int)
    in_waiver = in_item and len(loc) >= 3 and loc[2] == "waiver"
    allowed = (list(Waiver.model_fields) if in_waiver else _ITEM_FIELDS if in_item else _TOP_FIELDS)
    if kind == "missing":
        return f"missing required field '{leaf}' (an item needs: {', '.join(f for f in _ITEM_FIELDS if Item.model_fields[f].is_required())})" \
            if in_item and not in_waiver else f"missing required field '{leaf}'"
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(leaf, allowed, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return f"unknown field '{leaf}'; {hint}allowed fields: {', '.join(allowed)}"
    if kind == "value_error":
        return str(err["ctx"]["error"]) if "ctx" in err else err["msg"]
    if leaf == "threshold":
        return f"threshold must be a number, got {err.get('input')!r}"
    if leaf == "expires":
        return f"waiver expiry must be a date written YYYY-MM-DD, got {err.get('input')!r}"
    if leaf == "items" and kind == "too_short":
        return "the checklist has no items; add at least one under 'items:'"
    if leaf == "on_not_evaluated":
        return f"on_not_evaluated must be 'conditional' or 'fail', got {err.get('input')!r}"
    if kind in ("tuple_type", "model_type", "dict_type"):
        want = "a list of items" if leaf == "items" else "a mapping of field: value"
        return f"'{leaf or 'item'}' must be {want}"
    return f"'{leaf}': {err['msg']}"


def _where(path: Path, loc: tuple, lines: dict[tuple, int], raw: Any) -> str:
    """"file:line: item N (id 'x')" for the deepest location yaml gave a line for."""
    line = None
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            line = lines[loc[:n]]
            break
    where = f"{path}:{line}" if line else str(path)
    if len(loc) >= 2 and loc[0] == "items" and isinstance(loc[1], int):
        idx = loc[1]
        item = raw["items"][idx] if isinstance(raw, dict) and isinstance(raw.get("items"), list) \
            and idx < len(raw["items"]) else None
        ident = item.get("id") if isinstance(item, dict) else None
        where += f": item {idx + 1}" + (f" (id '{ident}')" if ident else "")
    return where


def load(path: str | Path) -> Checklist:
    """Read and validate a checklist; any problem raises ChecklistError naming the spot."""
    path = Path(path)
    if not path.is_file():
        raise ChecklistError(f"checklist file not found: {path}; pass a YAML checklist such as {DEFAULT_CHECKLIST}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ChecklistError(f"cannot read checklist {path}: {exc}; it must be a UTF-8 text file") from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ChecklistError(f"{where}: not valid YAML ({problem}); check the indentation and quoting there") from exc
    if not isinstance(raw, dict):
        raise ChecklistError(f"{path}: a checklist is a mapping with 'name' and 'items' at the top level, "
                             f"got {type(raw).__name__}")
    if "source" in raw:
        raise ChecklistError(f"{path}: 'source' is set by the loader; remove it from the file")
    lines = _lines(node)
    try:
        checklist = Checklist.model_validate({**raw, "source": str(path)})
    except ValidationError as exc:
        errors = exc.errors()
        # pydantic also reports an empty tuple when an item fails; that is noise.
        real = [e for e in errors if e["loc"] != ("items",) or e["type"] != "too_short"]
        errors = real or errors
        # A misspelt field also makes the real one "missing": the typo is the useful message.
        rank = {"extra_forbidden": 0, "value_error": 1, "missing": 3}
        errors.sort(key=lambda e: rank.get(e["type"], 2))
        first = errors[0]
        more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        raise ChecklistError(f"{_where(path, tuple(first['loc']), lines, raw)}: {_describe(first, raw)}{more}") from None
    seen: dict[str, int] = {}
    for i, item in enumerate(checklist.items):
        if item.id in seen:
            where = _where(path, ("items", i, "id"), lines, raw)
            raise ChecklistError(f"{where}: duplicate id '{item.id}' (first used by item {seen[item.id] + 1}); "
                                 "every item needs its own id")
        seen[item.id] = i
    return checklist


def validate(path: str | Path) -> Checklist:
    """`evaluate checklist validate FILE`: the same checks as load()."""
    return load(path)


# ---------------------------------------------------------------- the decision


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def evaluate(checklist: Checklist, result: RunResult, today: date | None = None) -> Verdict:
    """Measure every item against the run and decide GO / CONDITIONAL GO / NO-GO."""
    today = today or date.today()
    outcomes: list[Outcome] = []
    counted_fail: set[str] = set()  # severities that count as failed for the decision
    held_back = False  # something keeps the decision from a plain GO
    for item in checklist.items:
        metric = METRICS[item.metric]
        value = metric(result)
        evidence = metric.explain(result)
        waiver = item.waiver
        waiver_active = waiver is not None and today <= waiver.expires
        if value is None:
            status = "not_evaluated"
            if not item.required:
                evidence += "; optional item, does not affect the verdict"
            elif checklist.on_not_evaluated == "fail":
                counted_fail.add(item.severity)
                evidence += "; counts as failed under this checklist"
            else:
                held_back = True
        elif (doubt := metric.doubt(result)) and not waiver_active:
            # An unstable or contradicted number cannot pass an item, whatever it reads.
            status = "fail"
            counted_fail.add(item.severity)
            evidence += f"; cannot pass on this number: {doubt}"
        elif COMPARATORS[item.comparator](value, item.threshold):
            status = "pass"
        elif waiver_active:
            status = "waived"
            evidence += f"; waived by {waiver.who} until {waiver.expires.isoformat()}: {waiver.reason}"
        else:
            status = "fail"
            counted_fail.add(item.severity)
        if waiver is not None and not waiver_active and status == "fail":
            evidence += f"; waiver by {waiver.who} expired on {waiver.expires.isoformat()}"
        outcomes.append(Outcome(id=item.id, title=item.title, severity=item.severity, metric=item.metric,
                                comparator=item.comparator, threshold=item.threshold, value=value,
                                status=status, rationale=item.rationale, evidence=evidence.strip("; "),
                                unit=metric.unit))
    if "blocker" in counted_fail:
        decision = "NO-GO"
    elif counted_fail or held_back:
        decision = "CONDITIONAL GO"
    else:
        decision = "GO"
    label = f"{checklist.name} ({Path(checklist.source).name})" if checklist.source else checklist.name
    return Verdict(decision=decision, checklist=label, outcomes=tuple(outcomes))


FAIL_ON = ("no-go", "conditional")


def exit_code(verdict: Verdict | None, fail_on: str | None) -> int:
    """`--fail-on` as a CI gate: 1 when the decision is at or below the named level, else 0.
    Without a verdict a gate cannot pass (there is no evidence either way)."""
    if fail_on is None:
        return 0
    if fail_on not in FAIL_ON:
        raise ConfigError(f"--fail-on '{fail_on}' is not allowed; use one of {', '.join(FAIL_ON)}")
    if verdict is None:
        return 1
    tripped = {"no-go": ("NO-GO",), "conditional": ("NO-GO", "CONDITIONAL GO")}[fail_on]
    return 1 if verdict.decision in tripped else 0
