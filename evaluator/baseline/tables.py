"""The files of one baseline folder: CSV tables, result.json and manifest.json.

In: a finished `RunResult` and the baseline id it is recorded as. Out: one CSV table per
stage that produced data (hot_ops.csv, op_bench.csv, op_ratios.csv, tuning.csv,
verify.csv, e2e.csv, e2e_views.csv, calls.csv, soak.csv, upstream.csv, checklist.csv),
written with pandas; result.json, the whole result that `load` reads back; and
manifest.json, the headline numbers and versions, written last so that a folder holding
a manifest is a finished one. Every file is fsynced before the store commits it. No git:
the store (store.py) decides where the folder goes and commits it.

The CSV bytes are part of the store's format: a cell is formatted by `cell` (floats as
repr, booleans as true/false, JSON for dicts and lists, empty for None and non-finite
numbers) before pandas sees it, so old and new baselines diff line by line.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from .. import __version__
from ..results import SCHEMA_VERSION, Compiled, Ratio, RunResult, Timing, shape_str, to_dict
from .compare import op_key

Record = dict[str, Any]  # column -> value, one row of a table; the keys' order is the columns' order
_TIMING_FIELDS = ("median_ms", "p10_ms", "p90_ms", "mean_ms", "cv", "reps", "timer")


def cell(value: Any) -> str:
    """One CSV cell, formatted the same on every machine and pandas version."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def _timing(prefix: str, t: Timing | None) -> Record:
    return {f"{prefix}_{f}": getattr(t, f) if t else None for f in _TIMING_FIELDS}


def _ratio(r: Ratio | None, *, rounds: bool) -> Record:
    out = {"ratio": r.value if r else None, "ratio_low": r.low if r else None, "ratio_high": r.high if r else None}
    return {**out, "rounds": r.rounds if r else None} if rounds else out


def _compiled(c: Compiled | None) -> Record:
    """The torch.compile side's columns: its mode, time, TileLang's ratio to it (compiled /
    TileLang time), compile seconds, and why there is no time where there is none. All
    empty for a result from before the comparison, or a run with --compile-mode none."""
    r = c.ratio if c else None
    return {
        "compile_mode": c.mode if c else None,
        **_timing("compiled", c.timing if c else None),
        "compiled_ratio": r.value if r else None,
        "compiled_ratio_low": r.low if r else None,
        "compiled_ratio_high": r.high if r else None,
        "compile_s": c.compile_s if c else None,
        "compile_error": c.error if c else None,
        "compile_note": c.note if c else None,
    }


def _hot_ops(r: RunResult) -> list[Record]:
    if not r.hot_ops:
        return []
    return [
        {
            "family": o.family,
            "time_ms": o.time_ms,
            "share": o.share,
            "calls": o.calls,
            "shapes": ";".join(o.shapes),
            "aten_ops": ";".join(o.aten_ops),
            "has_kernel": o.has_kernel,
            "selected": o.family in r.hot_ops.selected,
        }
        for o in r.hot_ops.ops
    ]


def _op_bench(r: RunResult) -> list[Record]:
    # The torch.compile columns come right after `source`, so every column after them keeps
    # the order (and position from the end) it has in every earlier baseline.
    return [
        {
            "family": b.family,
            "shape": shape_str(b.shape),
            "dtype": b.dtype,
            "source": b.source,
            **_compiled(b.compiled),
            **_timing("tilelang", b.tilelang),
            **_timing("torch", b.torch),
            "speedup": b.speedup,
            "flops": b.flops,
            "bytes": b.bytes,
            "tilelang_tflops": b.tilelang_tflops,
            "tilelang_gbps": b.tilelang_gbps,
            "torch_tflops": b.torch_tflops,
            "torch_gbps": b.torch_gbps,
            "config": b.config,
            "error": b.error,
        }
        for b in r.op_bench
    ]


def _op_ratios(r: RunResult) -> list[Record]:
    return [
        {
            "family": b.family,
            "shape": shape_str(b.shape),
            "dtype": b.dtype,
            "verified": b.verified,
            **_ratio(b.ratio, rounds=True),
            "tilelang_kernel_ms": b.tilelang_kernel_ms,
            "torch_kernel_ms": b.torch_kernel_ms,
            "flags": ";".join(b.flags),
            "timer_note": b.timer_note,
        }
        for b in r.op_bench
    ]


def _tuning(r: RunResult) -> list[Record]:
    # One row per candidate tried, so a config that crashed or was rejected stays on record.
    return [
        {
            "family": k.family,
            "shape": shape_str(k.shape),
            "dtype": k.dtype,
            "target": k.target,
            "chosen": c.config == k.config and c.status == "ok",
            "cached": k.cached,
            "config": c.config,
            "status": c.status,
            "latency_ms": c.latency_ms,
            "compile_s": c.compile_s,
            "error": c.error,
            "phase": c.phase,
        }
        for k in r.tuned
        for c in k.candidates
    ]


def _verify(r: RunResult) -> list[Record]:
    return [
        {
            "family": c.family,
            "shape": shape_str(c.shape),
            "dtype": c.dtype,
            "seed": c.seed,
            "max_abs_err": c.max_abs_err,
            "max_rel_err": c.max_rel_err,
            "atol": c.atol,
            "rtol": c.rtol,
            "passed": c.passed,
            "reason": c.reason,
        }
        for v in r.verify
        for c in v.cases
    ]


def _e2e(r: RunResult) -> list[Record]:
    e = r.e2e
    if not e:
        return []
    return [
        {
            "families": ";".join(e.families),
            **_timing("reference", e.reference),
            **_timing("swapped", e.swapped),
            "speedup": e.speedup,
            "samples_per_s_reference": e.samples_per_s_reference,
            "samples_per_s_swapped": e.samples_per_s_swapped,
            "max_abs_err": e.max_abs_err,
            "outputs_match": e.outputs_match,
            "replaced_modules": e.replaced_modules,
            "coverage": e.coverage,
            "amdahl_speedup": e.amdahl_speedup,
            "error": e.error,
            **_compiled(e.compiled),
        }
    ]


def _e2e_views(r: RunResult) -> list[Record]:
    if not r.e2e:
        return []
    return [
        {
            "method": v.method,
            **_timing("reference", v.reference),
            **_timing("swapped", v.swapped),
            **_ratio(v.ratio, rounds=False),
            "note": v.note,
        }
        for v in r.e2e.views
    ]


def _calls(r: RunResult) -> list[Record]:
    if not r.e2e:
        return []
    return [
        {
            "family": c.family,
            "shape": c.shape,
            "tilelang_calls": c.tilelang,
            "fallback_calls": sum(c.fallback.values()),
            "fallback_reasons": ";".join(f"{k}={v}" for k, v in sorted(c.fallback.items())),
            "profiled_ms": c.profiled_ms,
            "notes": ";".join(f"{k}={v}" for k, v in sorted(c.notes.items())),
        }
        for c in r.e2e.calls
    ]


def _soak(r: RunResult) -> list[Record]:
    return [{"window": i, "median_ms": ms} for i, ms in enumerate(r.soak.window_ms)] if r.soak else []


def _upstream(r: RunResult) -> list[Record]:
    if not r.upstream:
        return []
    # One row per scalar metric: the typed sub-results (activity, authors, releases, fork,
    # score inputs, caveats) hold series and records for the report, kept whole in
    # result.json; as CSV cells they would be Python reprs, not diffable values.
    return [
        {"metric": f.name, "value": getattr(r.upstream, f.name)}
        for f in dataclasses.fields(r.upstream)
        if f.name not in _UPSTREAM_RECORDS
    ]


_UPSTREAM_RECORDS = frozenset({"activity", "authors", "releases", "fork", "score_inputs", "caveats"})


def _checklist(r: RunResult) -> list[Record]:
    if not r.verdict:
        return []
    return [
        {
            "id": o.id,
            "title": o.title,
            "severity": o.severity,
            "metric": o.metric,
            "comparator": o.comparator,
            "threshold": o.threshold,
            "value": o.value,
            "unit": o.unit,
            "status": o.status,
            "rationale": o.rationale,
            "evidence": o.evidence,
        }
        for o in r.verdict.outcomes
    ]


# File name -> its rows, in the order the files are written and listed in the manifest.
_BUILDERS: dict[str, Callable[[RunResult], list[Record]]] = {
    "hot_ops.csv": _hot_ops,
    "op_bench.csv": _op_bench,
    "op_ratios.csv": _op_ratios,
    "tuning.csv": _tuning,
    "verify.csv": _verify,
    "e2e.csv": _e2e,
    "e2e_views.csv": _e2e_views,
    "calls.csv": _calls,
    "soak.csv": _soak,
    "upstream.csv": _upstream,
    "checklist.csv": _checklist,
}
TABLES = tuple(_BUILDERS)


def tables(r: RunResult) -> dict[str, pd.DataFrame]:
    """CSV name -> its table (every cell already a string), only for the stages that produced rows."""
    out = {}
    for name, build in _BUILDERS.items():
        records = build(r)
        if records:
            out[name] = pd.DataFrame([{k: cell(v) for k, v in rec.items()} for rec in records])
    return out


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    # newline="" and "\n": the same bytes on every OS, as git stores them.
    with open(path, "w", newline="", encoding="utf-8") as f:
        frame.to_csv(f, index=False, lineterminator="\n")
        f.flush()
        os.fsync(f.fileno())


def write_json(path: Path, data: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def manifest(r: RunResult, data: dict[str, Any], bid: str, table_names: list[str]) -> dict[str, Any]:
    """What `baseline list` and a person browsing the store read without parsing result.json."""
    model, platform, version = bid.split("/")
    env = data["environment"]
    return {
        "schema_version": SCHEMA_VERSION,
        "id": bid,
        "model_slug": model,
        "platform": platform,
        "version": version,
        "created": r.created,
        "recorded": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "run_id": r.run_id,
        "written_by": __version__,  # the evaluator that wrote this layout: named when a reader is too old
        **{k: env[k] for k in ("evaluator", "python", "os", "cpu", "torch", "tilelang")},
        "hardware": env["hardware"],
        "model": data["model"],
        "settings": data["settings"],
        "verdict": r.verdict.decision if r.verdict else None,
        "summary": {
            "families": list(r.families),
            "e2e_speedup": r.e2e.speedup
            if r.e2e and r.e2e.speedup is not None and math.isfinite(r.e2e.speedup)
            else None,
            "op_speedups": {
                op_key(b): b.speedup for b in r.op_bench if b.speedup is not None and math.isfinite(b.speedup)
            },
            "verify_passed": all(v.passed for v in r.verify) if r.verify else None,
            "soak_drift": r.soak.drift if r.soak and math.isfinite(r.soak.drift) else None,
        },
        "stage_errors": data["stage_errors"],
        "tables": table_names,
    }


def write_folder(folder: Path, r: RunResult, bid: str) -> None:
    """Every file of baseline `bid` into `folder` (an empty temp folder the store renames into place)."""
    # The ref's commit does not exist yet; `load` fills `baseline` in from git instead.
    data = to_dict(dataclasses.replace(r, baseline=None))
    frames = tables(r)
    for name, frame in frames.items():
        write_csv(folder / name, frame)
    write_json(folder / "result.json", data)
    # The manifest goes last, so a folder with a manifest is a finished one.
    write_json(folder / "manifest.json", manifest(r, data, bid, list(frames)))
