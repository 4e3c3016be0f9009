"""The kernel sections: hot operators, correctness, speed per operator, roofline, tuning.

In: a RunResult's hot_ops, verify, op_bench, tuned and environment.hardware (its
measured and datasheet ceilings), and a language's `Strings`/`Fmt`. Out: the rows and
chart SVGs (charts.py) of the hot-operator, correctness, per-op and roofline sections,
and the tuning appendix (the best candidates and one example of each failure per
kernel). Flagged numbers are marked, not coloured as good or bad. Where the run timed
torch.compile as a third side, the per-op table gains its time (with the compile time)
and TileLang's ratio to it; where it could not run, the reason stands in the cell.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .. import charts
from ...checklist import op_rows, op_speedup
from ...results import Compiled, OpBench, RunResult, Timing, shape_str
from ..notes import flag_in_words, notes_in_words, op_flags
from ..strings import Fmt, Strings, ct, finite, num


def hot_ops_section(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    h = result.hot_ops
    if h is None or not h.ops:
        return None
    rows = [
        {
            "family": o.family,
            "time": f.ms(o.time_ms),
            "share": f.pct(o.share),
            "calls": f.num(o.calls),
            "shapes": ", ".join(o.shapes[:4]) + (" …" if len(o.shapes) > 4 else ""),
            "kernel": t("selected") if o.family in h.selected else (t("bool_yes") if o.has_kernel else t("bool_no")),
        }
        for o in h.ops
    ]
    chart = charts.hot_ops(
        [(o.family, o.share, o.family in h.selected) for o in h.ops[:15]],
        xlabel=ct("chart.share", t),
        rewritten=ct("selected", t),
        kept=ct("kept", t),
    )
    text = [
        t(
            "text.hot_ops_total",
            total=f.ms(h.total_ms),
            wall=f.ms(h.wall_ms),
            selected=", ".join(h.selected) or t("none"),
        )
    ]
    for fu in h.fusions:
        if fu.shapes and fu.family in h.selected:
            text.append(t("text.hot_ops_fused", family=fu.family, calls=f.num(fu.calls), shapes=", ".join(fu.shapes)))
        if fu.reused:
            text.append(t("text.hot_ops_unfused", family=fu.family, shapes=", ".join(fu.reused)))
    return {"rows": rows, "chart": chart, "text": " ".join(text)}


def verify_section(result: RunResult, t: Strings, f: Fmt) -> list[dict[str, str]]:
    rows = []
    for v in result.verify:
        for c in v.cases:
            rows.append(
                {
                    "family": c.family,
                    "shape": shape_str(c.shape),
                    "dtype": c.dtype,
                    "seed": str(c.seed),
                    "abs": f.num(c.max_abs_err, 2),
                    "rel": f.num(c.max_rel_err, 2),
                    "tol": f"atol {f.tol(c.atol)}, rtol {f.tol(c.rtol)}",
                    "ok": c.passed,
                    "result": t("status.pass" if c.passed else "status.fail"),
                    "reason": c.reason,
                }
            )
    return rows


def _speed_class(s: float | None) -> str:
    return "none" if s is None else ("good" if s >= 1 else ("warn" if s >= 0.5 else "bad"))


def compiled_cell(c: Compiled | None, t: Strings, f: Fmt) -> dict[str, Any]:
    """The torch.compile side of one comparison for a table: its time and compile time, and
    TileLang's ratio to it with the interval; or, where it has no time, why, in place of
    the number (never a blank: a blank would read as "not asked")."""
    if c is None:
        return {"ms": "—", "sub": "", "ratio": "—", "ci": "", "reason": "", "cls": "none"}
    if c.timing is None:
        return {
            "ms": "",
            "sub": "",
            "ratio": "—",
            "ci": "",
            "cls": "none",
            "reason": t("text.compiled_not_run", reason=c.error or t("not_measured")),
        }
    r = c.ratio
    value = r.value if r is not None and finite(r.value) else None
    return {
        "ms": f.ms(c.timing.median_ms),
        "sub": t("text.compiled_in", s=f.secs(c.compile_s)) if finite(c.compile_s) else "",
        "ratio": f.x(value),
        "ci": f.interval(r),
        "reason": "",
        "cls": _speed_class(value),
    }


def ops_section(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    if not result.op_bench:
        return None
    _, which = op_rows(result)
    rows = []
    ordered = sorted(result.op_bench, key=lambda b: (b.source != "model", b.family, b.shape))
    for b in ordered:
        s = op_speedup(b)
        flags = op_flags(b)
        tl_k, pt_k = getattr(b, "tilelang_kernel_ms", None), getattr(b, "torch_kernel_ms", None)
        cross = f"{f.ms(tl_k)} / {f.ms(pt_k)}" if finite(tl_k) or finite(pt_k) else "—"
        notes = [flag_in_words(x, t) for x in flags]
        if getattr(b, "timer_note", ""):
            notes.append(t("text.timer_note", note=notes_in_words(b.timer_note, t)))
        if b.error:
            notes.append(b.error)
        if getattr(b, "compiled", None) is not None and b.compiled.note:
            notes.append(t("text.compiled_note", note=notes_in_words(b.compiled.note, t)))
        # Optional columns show "—" when absent: "not measured" in every cell would crowd
        # out the numbers that were measured.
        rows.append(
            {
                "family": b.family,
                "shape": shape_str(b.shape),
                "dtype": b.dtype,
                "standard": b.source != "model",
                "vendor": f.ms(b.torch.median_ms),
                "tilelang": f.ms(b.tilelang.median_ms if b.tilelang else None),
                "speedup": f.x(s),
                "ci": f.interval(b.ratio) or "—",
                "rounds": b.ratio.rounds if b.ratio is not None and b.ratio.rounds else 0,
                "cls": "none" if flags else _speed_class(s),
                "flagged": bool(flags),
                "compiled": compiled_cell(getattr(b, "compiled", None), t, f),
                "verified": f.yn(getattr(b, "verified", None)),
                "cross": cross,
                "tflops": num(b.tilelang_tflops) or "—",
                "gbps": num(b.tilelang_gbps) or "—",
                "notes": notes,
            }
        )
    chart_rows = [
        (f"{b.family} {shape_str(b.shape)}" + ("" if b.source == "model" else " *"), op_speedup(b), bool(op_flags(b)))
        for b in ordered
    ][:30]
    chart = charts.speedups(chart_rows, xlabel=ct("chart.speedup", t), missing=ct("not_measured", t))
    text = t("text.ops_rows", which=t("text.ops_model" if which == "model shapes" else "text.ops_standard"))
    legend = shape_legend(sorted({b.family for b in ordered}), [b.shape for b in ordered], t)
    if legend:
        text += " " + legend
    modes = sorted({b.compiled.mode for b in ordered if getattr(b, "compiled", None) is not None})
    if modes:
        text += " " + t("text.ops_compiled", mode=", ".join(modes))
    return {
        "rows": rows,
        "chart": chart,
        "text": text,
        "compiled": bool(modes),
        "flagged": t("text.ops_flagged") if any(r["flagged"] for r in rows) else "",
    }


def shape_legend(families: list[str], shapes: list, t: Strings) -> str:
    """What the sizes of each family's shapes are, in the order they are written, and
    what the layout sizes mean where a shape carries them: a manager reading
    1x32x512x512x64x1x32x32x32 should not have to guess."""
    from ... import kernels  # noqa: PLC0415 - the registry imports torch; only a rendered table needs it

    parts = []
    for name in families:
        fam = kernels.REGISTRY.get(name)
        if fam is None:
            continue
        names = fam.shape_names
        least = len(names) - fam.optional_dims
        parts.append(
            f"{name} {'×'.join(names[:least])}" + (f"[×{'×'.join(names[least:])}]" if fam.optional_dims else "")
        )
    if not parts:
        return ""
    text = t("text.shape_legend", legend="; ".join(parts))
    if "attention" in families and any(len(s) >= 9 and any(s[6:9]) for s in shapes):
        text += " " + t("text.pitch_note")
    if "attention" in families and any(len(s) >= 10 and s[9] for s in shapes):
        text += " " + t("text.kv_heads_note")
    if "attention" in families and any(len(s) >= 12 for s in shapes):
        text += " " + t("text.mask_note")
    if "conv2d" in families:
        text += " " + t("text.nchw_note")
    return text


def _tflops(b: OpBench, tm: Timing | None, given: float | None) -> float | None:
    if finite(given) and given > 0:
        return given
    if tm is not None and finite(tm.median_ms) and tm.median_ms > 0 and b.flops > 0:
        return b.flops / (tm.median_ms * 1e-3) / 1e12
    return None


def roofline(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    if not result.op_bench:
        return None
    hw = result.environment.hardware
    # The measured roof (what PyTorch reaches on this box) is the honest ceiling; the
    # datasheet peak is only used where nothing was measured.
    roof_tflops = hw.measured_tflops or hw.peak_tflops
    roof_gbps = hw.measured_gbps or hw.peak_gbps
    pts, table = [], []
    ordered = sorted(result.op_bench, key=lambda b: (b.source != "model", b.family, b.shape))
    for b in ordered:
        if b.bytes <= 0 or b.flops <= 0:
            continue
        intensity = b.flops / b.bytes
        tl = _tflops(b, b.tilelang, b.tilelang_tflops)
        vd = _tflops(b, b.torch, b.torch_tflops)
        if not tl and not vd:
            continue
        n = len(table) + 1
        label = f"{b.family} {shape_str(b.shape)}"
        if tl:
            pts.append(charts.RooflinePoint(label, intensity, tl, "tilelang", n))
        if vd:
            pts.append(charts.RooflinePoint(label, intensity, vd, "vendor", n))
        attainable = min(roof_tflops, intensity * roof_gbps / 1000) if roof_tflops and roof_gbps else None

        def of_roof(x: float | None, given: float | None) -> str:
            pct = given if finite(given) else (x / attainable * 100 if x and attainable else None)
            return f" ({num(pct, plain=True)}%)" if finite(pct) else ""

        table.append(
            {
                "n": n,
                "op": label + ("" if b.source == "model" else " *"),
                "dtype": b.dtype,
                "intensity": f.num(intensity),
                "tilelang": (num(tl, plain=True) + of_roof(tl, b.tilelang_roof_pct)) if tl else f.na,
                "vendor": (num(vd, plain=True) + of_roof(vd, b.torch_roof_pct)) if vd else f.na,
                "flagged": bool(op_flags(b)),
            }
        )
    chart = charts.roofline(
        pts,
        peak_tflops=roof_tflops,
        peak_gbps=roof_gbps,
        xlabel=ct("chart.intensity", t),
        ylabel=ct("chart.tflops", t),
        vendor=ct("kept", t),
        roof=ct("chart.roof", t),
    )
    if chart is None:
        return None
    text = (
        t("text.roofline_peaks", tflops=f.num(roof_tflops), gbps=f.num(roof_gbps))
        if roof_tflops and roof_gbps
        else t("text.roofline_no_peaks")
    )
    if hw.measured_tflops and hw.ceilings_note:
        text += f" ({notes_in_words(hw.ceilings_note, t)})"
    return {"chart": chart, "text": text, "table": table}


def tuning_section(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    kernels = []
    for k in result.tuned:
        counts: dict[str, int] = defaultdict(int)
        for c in k.candidates:
            counts[c.status] += 1
        ok = sorted(
            (c for c in k.candidates if c.status == "ok" and c.latency_ms is not None), key=lambda c: c.latency_ms
        )
        bad: dict[str, Any] = {}
        for c in k.candidates:
            if c.status != "ok":
                bad.setdefault(c.status, c)  # one example per failure kind keeps the appendix short
        cands = [
            {
                "config": f.config(c.config),
                "status": t.get(f"cand.{c.status}", c.status),
                "latency": f.ms(c.latency_ms),
                "compile": f.num(c.compile_s),
                "error": notes_in_words(c.error, t),
                "phase": c.phase,
            }
            for c in [*ok[:8], *bad.values()]
        ]
        # A kernel reused from the tuning cache was not searched in this run: its one
        # "candidate" is the cached config, untimed. Say so instead of an empty table.
        if k.cached:
            empty = t("text.cached_kernel")
        elif not cands:
            empty = t("text.no_candidates")
        else:
            empty = ""
        kernels.append(
            {
                "family": k.family,
                "shape": shape_str(k.shape),
                "dtype": k.dtype,
                "target": k.target,
                "config": f.config(k.config),
                "best": f.ms(ok[0].latency_ms) if ok else f.na,
                "counts": ", ".join(f"{t.get(f'cand.{s}', s)} {n}" for s, n in sorted(counts.items())),
                "tuning_s": f.num(k.tuning_s),
                "cached": f.yn(k.cached),
                "ok": k.ok,
                "candidates": [] if empty else cands,
                "empty": empty,
                "title": t("text.candidates_of", family=k.family, shape=shape_str(k.shape)),
                "truncated": t("text.truncated", shown=len(cands), total=len(k.candidates))
                if not empty and len(cands) < len(k.candidates)
                else "",
            }
        )
    return {"kernels": kernels}
