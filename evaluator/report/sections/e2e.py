"""End to end, calls and soak: the whole model with its calls routed to TileLang.

In: a RunResult's e2e (timing views, call counts and fallbacks per family and shape, the
output check), overhead and soak, and a language's `Strings`/`Fmt`. Out: the e2e
section's key-value rows, views (the one the verdict uses marked), calls and coverage,
each routed family's time inside the model against its op benchmarks, output check and flags; the soak's rows and
latency chart. `_view_name` (a timing
method in words) is also used on page one and in the checklist evidence. Where the run
compiled the model with torch.compile too, the verdict's view gains it as a third side,
and `compiled_sentence` says plainly how TileLang compares with it (also on page one).
"""

from __future__ import annotations

import math
import re
from typing import Any

from .. import charts
from ...measuring import compile_path as paths
from ...checklist import op_rows
from ...results import RunResult, shape_str
from ..notes import e2e_flags, flag_in_words, mapped, notes_in_words, timing_flags
from ..strings import Fmt, Strings, ct, finite, num
from .kernels import compiled_cell


def view_name(method: str, t: Strings) -> str:
    return t.get(f"views.{method}.name", method or t("not_measured"))


def compiled_sentence(result: RunResult, t: Strings, f: Fmt) -> str:
    """TileLang against torch.compile in one plain sentence: end to end where the run
    compiled the model, else the geometric mean over the operators; where torch.compile
    could not run end to end, why. "" where it was not asked for (or the result predates it)."""
    c = getattr(result.e2e, "compiled", None) if result.e2e is not None else None
    if c is not None:
        if c.timing is None:
            return t("compiled.e2e_not_run", mode=c.mode, reason=(c.error or t("not_measured")).rstrip("."))
        value = c.ratio.value if c.ratio is not None and finite(c.ratio.value) else None
        sentence = t("compiled.e2e", x=f.x(value), s=f.secs(c.compile_s), mode=c.mode)
        if paths.OTHER_PROGRAM in (c.note or ""):  # said where the ratio is read, not only in a note
            sentence = f"{sentence} {t('compiled.other_program')}"
        return sentence
    rows, _ = op_rows(result)  # the rows the op metrics use: the model's own shapes where there are any
    timed = [
        b
        for b in rows
        if getattr(b, "compiled", None) is not None
        and b.compiled.ratio is not None
        and finite(b.compiled.ratio.value)
        and b.compiled.ratio.value > 0
    ]
    if timed:
        mean = math.exp(sum(math.log(b.compiled.ratio.value) for b in timed) / len(timed))
        modes = ", ".join(sorted({b.compiled.mode for b in timed}))
        return t("compiled.ops", x=f.x(mean), count=len(timed), n=len(timed), mode=modes)
    return ""


def e2e_section(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    e = result.e2e
    if e is None:
        return None
    ratio = getattr(e, "ratio", None)
    kv = [
        (t("kv.families"), ", ".join(e.families) or t("none")),
        (t("kv.reference"), f"{f.ms(e.reference.median_ms)} ms"),
        (t("kv.swapped"), f"{f.ms(e.swapped.median_ms)} ms" if e.swapped else f.na),
        (t("kv.speedup"), f.x_ci(e.speedup, ratio)),
        (t("kv.samples_ref"), f.num(e.samples_per_s_reference)),
        (t("kv.samples_swapped"), f.num(e.samples_per_s_swapped)),
        (t("kv.amdahl"), f.x(e.amdahl_speedup)),
    ]
    if e.replaced_modules:  # baselines from before calls were routed at the operator
        kv.insert(-1, (t("kv.replaced"), f.num(e.replaced_modules)))
    if getattr(e, "router_overhead_ms", None) is not None:
        kv.append((t("kv.router_overhead"), f"{f.ms(e.router_overhead_ms)} ms"))
    # Per-call host overhead explains a gap between the Amdahl estimate and the measured run.
    for o in result.overhead:
        kv.append(
            (t("kv.launch", family=o.family), f"{f.us(o.tilelang_us)} / {f.us(o.torch_us)} ({shape_str(o.shape)})")
        )
    comp = getattr(e, "compiled", None)
    if comp is not None:
        cell = compiled_cell(comp, t, f)
        kv.append(
            (
                t("kv.vs_compiled", mode=comp.mode),
                cell["reason"] or (f"{cell['ratio']} ({cell['ci']})" if cell["ci"] else cell["ratio"]),
            )
        )
        if comp.compile_s is not None:
            kv.append((t("kv.compile_time"), f.secs(comp.compile_s)))
        if comp.note:
            kv.append((t("kv.compiled_note"), notes_in_words(comp.note, t)))
    method = getattr(e, "method", "") or ""
    views = []
    for view in getattr(e, "views", ()) or ():
        views.append(
            {
                "compiled": compiled_cell(comp, t, f) if comp is not None and view.method == method else None,
                "name": view_name(view.method, t),
                "meaning": t.get(f"views.{view.method}.meaning", ""),
                "used": view.method == method,
                "ref": f.ms(view.reference.median_ms if view.reference else None),
                "swapped": f.ms(view.swapped.median_ms if view.swapped else None),
                "ratio": f.x(view.ratio.value if view.ratio else None),
                "ci": f.interval(view.ratio),
                "rounds": view.ratio.rounds if view.ratio is not None and view.ratio.rounds else 0,
                "flagged": timing_flags(view.reference, view.swapped),
                "note": notes_in_words(view.note, t),
            }
        )
    calls, not_chosen = [], []
    # The router's fallback reasons and layout notes, in words; any other shows as recorded.
    # The families not chosen follow the chosen ones', dimmed: every call they made ran in PyTorch.
    for c in (*(getattr(e, "calls", ()) or ()), *(getattr(e, "not_chosen", ()) or ())):
        fallback = dict(getattr(c, "fallback", {}) or {})
        notes = dict(getattr(c, "notes", {}) or {})
        rows = calls if c.family in e.families else not_chosen
        rows.append(
            {
                "family": c.family,
                "shape": c.shape or "—",
                "tilelang": f.num(c.tilelang),
                "fallback": t("list_semi").join(
                    f"{mapped('fallbacks', reason, t)}: {num(n)}" for reason, n in fallback.items()
                )
                or "—",
                "notes": t("list_semi").join(f"{_call_note(k, t)}: {num(n)}" for k, n in notes.items()),
                "profiled": f.ms(c.profiled_ms) if c.profiled_ms else "—",
                "cls": ("row-fail" if rows is calls else "row-dim") if fallback and not c.tilelang else "",
            }
        )
    tl_calls, fb_calls = getattr(e, "tilelang_calls", 0) or 0, getattr(e, "fallback_calls", 0) or 0
    coverage_text = (
        t(
            "text.coverage",
            coverage=f.pct(e.coverage),
            tilelang=f.num(tl_calls),
            fallback=f.num(fb_calls),
            count=fb_calls,
        )
        if (calls or tl_calls or fb_calls)
        else t("text.coverage_only", coverage=f.pct(e.coverage))
    )
    tol = getattr(e, "tolerance", {}) or {}
    check = [
        (t("kv.outputs_match"), f.yn(e.outputs_match) if e.swapped else f.na),
        (t("kv.max_abs_err"), f.num(e.max_abs_err, 2)),
        (t("kv.rel_l2_err"), f.num(getattr(e, "rel_l2_err", None), 2)),
        (t("kv.rel_max_err"), f.num(getattr(e, "rel_max_err", None), 2)),
    ]
    if tol:
        check.append((t("kv.tolerance"), ", ".join(f"{k} {f.tol(v) if finite(v) else v}" for k, v in tol.items())))
    used = (
        t("text.e2e_method", method=view_name(method, t), meaning=t.get(f"views.{method}.meaning", ""))
        if method
        else ""
    )
    return {
        "kv": kv,
        "error": t("text.e2e_error", error=e.error) if e.error else "",
        "views": views,
        "in_model": _in_model_rows(result, f),
        "in_model_alone": any(getattr(r, "alone", None) for r in getattr(e, "in_model", ()) or ()),
        "kept": (
            t(
                "text.e2e_kept",
                left=", ".join(e.kept.left),
                families=", ".join(e.kept.families),
                x=f.x_ci(e.kept.ratio.value, e.kept.ratio),
            )
            if getattr(e, "kept", None)
            else ""
        ),
        "compiled": compiled_sentence(result, t, f) if comp is not None else "",
        "with_compiled": comp is not None,
        "method": used,
        "calls": calls,
        "not_chosen": not_chosen,
        "calls_notes": any(c["notes"] for c in calls + not_chosen),
        "coverage": coverage_text,
        "check": check,
        "flags": [flag_in_words(x, t) for x in e2e_flags(result)],
    }


def _call_note(note: str, t: Strings) -> str:
    """A call's layout note (swap.py, the families' routes) in words: "fused into gemm_gelu",
    "q/k/v copied to contiguous"."""
    m = re.fullmatch(r"fused into (?P<kernel>\w+)", note)
    if m:
        return t("text.fused_into", kernel=m["kernel"])
    return mapped("call_notes", note, t)


def _in_model_rows(result: RunResult, f: Fmt) -> list[dict[str, Any]]:
    """Each routed family's time inside the model beside its op benchmarks' ratio (the
    geometric mean over the model's shapes); a row is marked where the model shows the
    family clearly worse than the op benchmarks did (as bench._in_model flags it)."""
    rows = []
    for r in getattr(result.e2e, "in_model", ()) or ():
        speedups = [b.speedup for b in result.op_bench if b.family == r.family and b.source == "model" and b.speedup]
        op = math.exp(sum(math.log(x) for x in speedups) / len(speedups)) if speedups else None
        worse = r.ratio is not None and op is not None and r.ratio * 1.1 < op
        alone = getattr(r, "alone", None)
        hurts = r.slows_model  # as bench._alone flags it
        rows.append(
            {
                "family": r.family,
                "ref": f.ms(r.reference_ms),
                "swapped": f.ms(r.swapped_ms),
                "tilelang": f.ms(r.tilelang_ms),
                "ratio": f.x(r.ratio),
                "op": f.x(op),
                "alone": f.x_ci(alone.value, alone) if alone else f.na,
                "cls": "row-fail" if worse or hurts else "",
            }
        )
    return rows


def soak_section(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    s = result.soak
    if s is None:
        return None
    timer = getattr(s, "timer", "") or "perf_counter"
    kv = [
        (t("kv.duration"), f"{f.num(s.seconds)} s"),
        (t("kv.iterations"), f.num(s.iterations)),
        (t("kv.timer"), t.get(f"timers.{timer}", timer)),
        (t("kv.drift"), f.pct(s.drift)),
        (t("kv.cv"), f.pct(s.cv)),
        (t("kv.host_cv"), f.pct(getattr(s, "host_cv", None))),
        (t("kv.memory"), f.mb(s.memory_growth_mb)),
    ]
    if s.reserved_growth_mb is not None:
        kv.append((t("kv.reserved"), f.mb(s.reserved_growth_mb)))
    if s.clocks_mhz:
        kv.append((t("kv.clocks"), f"{min(s.clocks_mhz):.0f}–{max(s.clocks_mhz):.0f} MHz"))
        kv.append((t("kv.throttle"), ", ".join(s.throttle_reasons) or t("none")))
    if s.notes:
        kv.append((t("kv.notes"), notes_in_words("; ".join(s.notes), t)))
    chart = charts.soak(s.window_ms, seconds=s.seconds, xlabel=ct("chart.soak_x", t), ylabel=ct("chart.soak_y", t))
    return {
        "kv": kv,
        "chart": chart,
        "text": t(
            "text.soak_summary",
            seconds=f.num(s.seconds),
            iterations=f.num(s.iterations),
            windows=len(s.window_ms),
            timer=t.get(f"timers.{timer}", timer),
        ),
    }
