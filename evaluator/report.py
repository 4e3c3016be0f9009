"""The go/no-go report: one RunResult in, report.html (and report.pdf) out.

In: a `RunResult` (any field may be None or empty: a run that stopped early, or a
stage that was not run), an output folder, and a language ("en" or "zh"). Out:
`ReportFiles` naming `report.html` (self-contained: inline CSS, inline SVG charts,
nothing fetched) and `report.pdf` (WeasyPrint, paged, with header and page numbers).

Page one is for a manager: verdict, model, platform, date, five headline numbers, the
failed items in plain words and the next steps. The rest is for engineers. Every value
that comes from outside (model names, commit subjects, paths, tags) reaches the page
through Jinja's autoescaping or matplotlib's XML escaping; only our own CSS and the
chart SVGs are marked safe. WeasyPrint is imported lazily because GPU machines often
lack pango; then the HTML is still written and `pdf_note` says how to get the PDF.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import unquote, urlsplit

import jinja2
import yaml

from . import charts
from .checklist import METRICS, kernel_status, op_label, op_rows, op_speedup
from .errors import ReportError
from .results import Outcome, RunResult, Verdict, shape_str

TEMPLATES = Path(__file__).resolve().parent / "templates"  # package data: found by wheel installs too
LANGS = ("en", "zh")
HTML_NAME = "report.html"
PDF_NAME = "report.pdf"
MAX_FAILED_ON_PAGE_ONE = 6
MAX_ROWS = 60  # long tables (candidates, unchanged comparisons) are cut; the baseline has them all


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    pdf: Path | None
    pdf_note: str = ""


# ---------------------------------------------------------------- strings


class Strings:
    """One language's strings, falling back to English for a key it lacks."""

    def __init__(self, lang: str):
        if lang not in LANGS:
            raise ReportError(f"unknown report language '{lang}'; use one of: {', '.join(LANGS)}")
        self.lang = lang
        self._en = _load_strings("en")
        self._own = _load_strings(lang) if lang != "en" else self._en

    def _get(self, path: list[str]) -> Any:
        for table in (self._own, self._en):
            node: Any = table
            for part in path:
                if not isinstance(node, dict) or part not in node:
                    node = None
                    break
                node = node[part]
            if node is not None:
                return node
        raise ReportError(f"report string '{'.'.join(path)}' missing from templates/i18n/en.yaml; add it there")

    def __call__(self, key: str, **kw: Any) -> str:
        text = self._get(key.split("."))
        return str(text).format(**kw) if kw else str(text)

    def raw(self, key: str) -> Any:
        return self._get(key.split("."))

    def get(self, key: str, default: str) -> str:
        """For values that come from data (a severity, a status): unknown ones show as is."""
        try:
            return self(key)
        except ReportError:
            return default

    def raw_metric(self, name: str, field: str) -> Any:
        try:
            return self._get(["metrics", name, field])
        except ReportError:
            return ""

    def metric(self, name: str, field: str, **kw: Any) -> str:
        # Metric names contain dots, so they cannot go through the dotted lookup. A baseline
        # written by another version may name a metric this one has no words for.
        try:
            text = str(self._get(["metrics", name, field]))
        except ReportError:
            fallback = {"label": name, "fail": "next.unknown_fail", "next": "next.unknown_next",
                        "missing": "next.unknown_missing"}[field]
            text = fallback if field == "label" else str(self._get(fallback.split(".")))
        return text.format_map(_Keep({"metric": name, **kw}))


class _Keep(dict):
    """format_map mapping that leaves unknown {placeholders} as they are."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _load_strings(lang: str) -> dict[str, Any]:
    path = TEMPLATES / "i18n" / f"{lang}.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ReportError(f"cannot read report strings {path}: {exc}; restore it from the repository") from exc
    if not isinstance(data, dict):
        raise ReportError(f"report strings {path} must be a YAML mapping; restore it from the repository")
    return data


# ---------------------------------------------------------------- formatting


def _num(v: float | None, digits: int = 3) -> str | None:
    if v is None or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    if float(v).is_integer() and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.{digits}g}" if abs(v) < 1e4 else f"{v:,.0f}"


class Fmt:
    """Formatting bound to one language: every None becomes "not measured"."""

    def __init__(self, t: Strings):
        self.t = t
        self.na = t("not_measured")

    def num(self, v: float | None, digits: int = 3) -> str:
        return _num(v, digits) or self.na

    def ms(self, v: float | None) -> str:
        if v is None or not math.isfinite(v):
            return self.na
        return f"{v:.3f}" if v < 100 else f"{v:.1f}"

    def x(self, v: float | None) -> str:
        return self.na if v is None or not math.isfinite(v) else f"{v:.2f}×"

    def pct(self, v: float | None, digits: int = 1) -> str:
        return self.na if v is None or not math.isfinite(v) else f"{v * 100:.{digits}f}%"

    def yn(self, v: bool | None) -> str:
        return self.na if v is None else self.t("bool_yes" if v else "bool_no")

    def unit(self, v: float | None, unit: str) -> str:
        if v is None:
            return self.na
        if unit == "1/0":
            return self.yn(bool(v))
        if unit == "fraction":
            return self.pct(v, 0)
        if unit == "x":
            text = f"{v:.2f}"
        elif unit == "%":
            text = f"{v:.1f}"
        else:
            text = _num(v) or self.na
        if not unit:
            return text
        # Units the strings do not know (a metric added later) still show, untranslated.
        return self.t.get(f"units.{unit}", "{v} " + unit).format(v=text)

    def config(self, cfg: dict[str, Any] | None) -> str:
        return ", ".join(f"{k}={v}" for k, v in cfg.items()) if cfg else self.na


def _day(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).date().isoformat()
    except (TypeError, ValueError):
        return iso or ""


def _as_date(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).date()
        except ValueError:
            return None
    return None


# ---------------------------------------------------------------- page one


_SYMBOL = {">=": "≥", "<=": "≤", "==": "=", "!=": "≠", ">": ">", "<": "<"}
_DECISION_CLASS = {"GO": "go", "CONDITIONAL GO": "conditional", "NO-GO": "nogo"}
_SEVERITY_ORDER = {"blocker": 0, "major": 1, "minor": 2}


def _metric_status(verdict: Verdict | None, metric: str) -> str:
    if verdict is None:
        return "none"
    got = [o.status for o in verdict.outcomes if o.metric == metric]
    if "fail" in got:
        return "fail"
    if "waived" in got:
        return "waived"
    if got and all(s == "pass" for s in got):
        return "pass"
    return "none"


def _is_optional(o: Outcome) -> bool:
    return "optional item" in o.evidence


def _waiver_date(o: Outcome) -> str:
    m = re.search(r"until (\d{4}-\d{2}-\d{2})", o.evidence)
    return m.group(1) if m else "?"


def _item_title(o: Outcome, t: Strings, f: Fmt) -> str:
    """The item's own title in English; in other languages a description built from the
    metric (checklist files are written in one language, the report in several)."""
    if t.lang == "en":
        return o.title
    return f"{t.metric(o.metric, 'label')} {_SYMBOL.get(o.comparator, o.comparator)} {f.unit(o.threshold, o.unit)}"


def _summary(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    v = result.verdict
    key = v.decision if v is not None and v.decision in _DECISION_CLASS else "NONE"
    outcomes = v.outcomes if v is not None else ()
    failed = sorted((o for o in outcomes if o.status == "fail"), key=lambda o: _SEVERITY_ORDER.get(o.severity, 9))
    missing = [o for o in outcomes if o.status == "not_evaluated" and not _is_optional(o)]
    optional = [o for o in outcomes if o.status == "not_evaluated" and _is_optional(o)]
    waived = [o for o in outcomes if o.status == "waived"]
    blockers = sum(o.severity == "blocker" for o in failed)
    parts = ([t("summary.n_failed", n=len(failed))] if failed else []) + \
        ([t("summary.n_missing", n=len(missing))] if missing else [])
    sentence = t(f"decision_summary.{key}", passed=sum(o.status == "pass" for o in outcomes),
                 total=len(outcomes) - len(optional), blockers=blockers, parts=t("list_sep").join(parts))

    def plain(o: Outcome) -> dict[str, str]:
        kw = dict(value=f.unit(o.value, o.unit), threshold=f.unit(o.threshold, o.unit),
                  comparator=_SYMBOL.get(o.comparator, o.comparator))
        # Sentences that already quote the numbers need no "(measured …)" after them.
        quotes = "{threshold}" in str(t.raw_metric(o.metric, "fail"))
        return {"severity": o.severity, "severity_label": t.get(f"severity.{o.severity}", o.severity),
                "title": _item_title(o, t, f), "plain": t.metric(o.metric, "fail", **kw),
                "measured": "" if quotes else t("summary.measured_vs", **kw), "id": o.id}

    steps: list[str] = []
    if v is None:
        steps.append(t("next.no_verdict"))
    for o in failed:
        steps.append(t.metric(o.metric, "next"))
    for o in missing:
        steps.append(t.metric(o.metric, "missing"))
    for o in waived:
        steps.append(t("next.waiver", title=_item_title(o, t, f), date=_waiver_date(o)))
    if key == "GO":
        steps.append(t("next.go"))
        if result.hot_ops is not None:
            rest = [o.family for o in result.hot_ops.ops
                    if o.family not in result.hot_ops.selected and o.family != "other"][:3]
            if rest:
                steps.append(t("next.extend", families=", ".join(rest)))
    steps.append(t("next.rerun"))
    return {
        "key": key,
        "css": _DECISION_CLASS.get(key, "none"),
        "label": t(f"decision.{key}"),
        "sentence": sentence,
        "meaning": t(f"decision_meaning.{key}"),
        "failed": [plain(o) for o in failed[:MAX_FAILED_ON_PAGE_ONE]],
        "more_failed": max(0, len(failed) - MAX_FAILED_ON_PAGE_ONE),
        "missing": [{"title": _item_title(o, t, f), "severity_label": t.get(f"severity.{o.severity}", o.severity)} for o in missing],
        "optional": t("list_sep").join(_item_title(o, t, f) for o in optional),
        "optional_n": len(optional),
        "waived": [{"title": _item_title(o, t, f), "date": _waiver_date(o)} for o in waived],
        "steps": list(dict.fromkeys(steps)),  # several items can share one remedy
    }


def _headlines(result: RunResult, t: Strings, f: Fmt) -> list[dict[str, str]]:
    v = result.verdict
    rows, _ = op_rows(result)
    sp = [(b, s) for b in rows if (s := op_speedup(b)) is not None]
    geomean = METRICS["ops.speedup_geomean"](result)
    worst = min(sp, key=lambda x: x[1]) if sp else None
    cards = [{
        "label": t("headline.geomean"), "value": f.x(geomean),
        "sub": t("headline.geomean_sub", n=len(sp)) if sp else "",
        "status": _metric_status(v, "ops.speedup_geomean"),
    }, {
        "label": t("headline.worst"), "value": f.x(worst[1]) if worst else f.na,
        "sub": op_label(worst[0]) if worst else "",
        "status": _metric_status(v, "ops.speedup_min"),
    }]
    fams = kernel_status(result) or {}
    cards.append({
        "label": t("headline.correct"),
        "value": f"{sum(fams.values())} / {len(fams)}" if result.verify else f.na,
        "sub": t("headline.correct_sub") if result.verify else "",
        "status": _metric_status(v, "kernels.all_correct"),
    })
    cards.append({
        "label": t("headline.e2e"), "value": f.x(METRICS["e2e.speedup"](result)),
        "sub": t("headline.e2e_sub") if result.e2e is not None else "",
        "status": _metric_status(v, "e2e.speedup"),
    })
    score = METRICS["upstream.maintenance_score"](result)
    cpw = METRICS["upstream.commits_per_week_90d"](result)
    statuses = {_metric_status(v, m) for m in METRICS if m.startswith("upstream.")}
    up_status = "fail" if "fail" in statuses else ("pass" if "pass" in statuses else "none")
    if score is not None:
        value, sub = f"{f.num(score, 2)} / 10", t("headline.upstream_sub_score", commits=f.num(cpw, 2))
    else:
        value, sub = f.num(cpw, 2), (t("headline.upstream_sub_commits") if cpw is not None else "")
    cards.append({"label": t("headline.upstream"), "value": value, "sub": sub, "status": up_status})
    return cards


# ---------------------------------------------------------------- engineer sections


def _checklist_rows(result: RunResult, t: Strings, f: Fmt) -> list[dict[str, str]]:
    if result.verdict is None:
        return []
    order = {"fail": 0, "not_evaluated": 1, "waived": 2, "pass": 3}
    rows = []
    for o in sorted(result.verdict.outcomes, key=lambda o: (order.get(o.status, 9), _SEVERITY_ORDER.get(o.severity, 9))):
        rows.append({
            "id": o.id, "title": _item_title(o, t, f), "original": o.title if t.lang != "en" else "",
            "severity": o.severity, "severity_label": t.get(f"severity.{o.severity}", o.severity), "metric": o.metric,
            "required": f"{_SYMBOL.get(o.comparator, o.comparator)} {f.unit(o.threshold, o.unit)}",
            "measured": f.unit(o.value, o.unit),
            "status": o.status, "status_label": t.get(f"status.{o.status}", o.status), "evidence": o.evidence,
            "rationale": o.rationale,
        })
    return rows


def _hot_ops(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    h = result.hot_ops
    if h is None or not h.ops:
        return None
    rows = [{"family": o.family, "time": f.ms(o.time_ms), "share": f.pct(o.share), "calls": str(o.calls),
             "shapes": ", ".join(o.shapes[:4]) + (" …" if len(o.shapes) > 4 else ""),
             "kernel": t("selected") if o.family in h.selected else (t("bool_yes") if o.has_kernel else t("bool_no"))}
            for o in h.ops]
    chart = charts.hot_ops([(o.family, o.share, o.family in h.selected) for o in h.ops[:15]],
                           xlabel=t("chart.share"), rewritten=t("selected"), kept=t("kept"))
    return {"rows": rows, "chart": chart,
            "text": t("text.hot_ops_total", total=f.ms(h.total_ms), wall=f.ms(h.wall_ms),
                      selected=", ".join(h.selected) or t("none"))}


def _verify(result: RunResult, t: Strings, f: Fmt) -> list[dict[str, str]]:
    rows = []
    for v in result.verify:
        for c in v.cases:
            rows.append({"family": c.family, "shape": shape_str(c.shape), "dtype": c.dtype, "seed": str(c.seed),
                         "abs": f.num(c.max_abs_err, 2), "rel": f.num(c.max_rel_err, 2),
                         "tol": f"atol {c.atol:g}, rtol {c.rtol:g}",
                         "ok": c.passed, "result": t("status.pass" if c.passed else "status.fail"),
                         "reason": c.reason})
    return rows


def _ops(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    if not result.op_bench:
        return None
    _, which = op_rows(result)
    rows = []
    for b in sorted(result.op_bench, key=lambda b: (b.source != "model", b.family, b.shape)):
        s = op_speedup(b)
        rows.append({"family": b.family, "shape": shape_str(b.shape), "dtype": b.dtype,
                     "source": t(f"source.{b.source}") if b.source in ("model", "standard") else b.source,
                     "vendor": f.ms(b.torch.median_ms), "tilelang": f.ms(b.tilelang.median_ms if b.tilelang else None),
                     "speedup": f.x(s), "cls": "none" if s is None else ("good" if s >= 1 else ("warn" if s >= 0.5 else "bad")),
                     "tflops": f.num(b.tilelang_tflops), "gbps": f.num(b.tilelang_gbps), "error": b.error})
    chart_rows = [(f"{b.family} {shape_str(b.shape)}" + ("" if b.source == "model" else " *"), op_speedup(b))
                  for b in sorted(result.op_bench, key=lambda b: (b.source != "model", b.family, b.shape))][:30]
    chart = charts.speedups(chart_rows, xlabel=t("chart.speedup"), missing=t("not_measured"))
    text = t("text.ops_rows", which=t("text.ops_model" if which == "model shapes" else "text.ops_standard"))
    return {"rows": rows, "chart": chart, "text": text}


def _roofline(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    if not result.op_bench:
        return None
    hw = result.environment.hardware
    pts = []
    for b in result.op_bench:
        if b.bytes <= 0 or b.flops <= 0:
            continue
        intensity = b.flops / b.bytes
        label = f"{b.family} {shape_str(b.shape)}"
        tl = b.tilelang_tflops
        if tl is None and b.tilelang is not None and b.tilelang.median_ms > 0:
            tl = b.flops / (b.tilelang.median_ms * 1e-3) / 1e12
        vd = b.torch_tflops
        if vd is None and b.torch.median_ms > 0:
            vd = b.flops / (b.torch.median_ms * 1e-3) / 1e12
        if tl:
            pts.append(charts.RooflinePoint(label, intensity, tl, "tilelang"))
        if vd:
            pts.append(charts.RooflinePoint(label, intensity, vd, "vendor"))
    # The measured roof (what PyTorch reaches on this box) is the honest ceiling; the
    # datasheet peak is only used where nothing was measured.
    roof_tflops = hw.measured_tflops or hw.peak_tflops
    roof_gbps = hw.measured_gbps or hw.peak_gbps
    chart = charts.roofline(pts, peak_tflops=roof_tflops, peak_gbps=roof_gbps,
                            xlabel=t("chart.intensity"), ylabel=t("chart.tflops"), vendor=t("kept"),
                            roof=t("chart.roof"))
    if chart is None:
        return None
    text = (t("text.roofline_peaks", tflops=f.num(roof_tflops), gbps=f.num(roof_gbps))
            if roof_tflops and roof_gbps else t("text.roofline_no_peaks"))
    if hw.measured_tflops and hw.ceilings_note:
        text += f" ({hw.ceilings_note})"
    return {"chart": chart, "text": text}


def _e2e(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    e = result.e2e
    if e is None:
        return None
    kv = [
        (t("kv.families"), ", ".join(e.families) or t("none")),
        (t("kv.reference"), f"{f.ms(e.reference.median_ms)} ms"),
        (t("kv.swapped"), f"{f.ms(e.swapped.median_ms)} ms" if e.swapped else f.na),
        (t("kv.speedup"), f.x(e.speedup)),
        (t("kv.samples_ref"), f.num(e.samples_per_s_reference)),
        (t("kv.samples_swapped"), f.num(e.samples_per_s_swapped)),
        (t("kv.outputs_match"), f.yn(e.outputs_match) if e.swapped else f.na),
        (t("kv.max_abs_err"), f.num(e.max_abs_err, 2)),
        (t("kv.replaced"), str(e.replaced_modules)),
        (t("kv.coverage"), f.pct(e.coverage)),
        (t("kv.amdahl"), f.x(e.amdahl_speedup)),
    ]
    # Per-call host overhead explains a gap between the Amdahl estimate and the measured run.
    for o in result.overhead:
        kv.append((t("kv.launch", family=o.family),
                   f"{f.num(o.tilelang_us)} µs / {f.num(o.torch_us)} µs ({shape_str(o.shape)})"))
    return {"kv": kv, "error": t("text.e2e_error", error=e.error) if e.error else ""}


def _soak(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    s = result.soak
    if s is None:
        return None
    kv = [(t("kv.duration"), f"{f.num(s.seconds)} s"), (t("kv.iterations"), str(s.iterations)),
          (t("kv.drift"), f.pct(s.drift)), (t("kv.cv"), f.pct(s.cv)),
          (t("kv.memory"), f"{f.num(s.memory_growth_mb)} MB")]
    if s.reserved_growth_mb is not None:
        kv.append((t("kv.reserved"), f"{f.num(s.reserved_growth_mb)} MB"))
    if s.clocks_mhz:
        kv.append((t("kv.clocks"), f"{min(s.clocks_mhz):.0f}–{max(s.clocks_mhz):.0f} MHz"))
        kv.append((t("kv.throttle"), ", ".join(s.throttle_reasons) or t("none")))
    if s.notes:
        kv.append((t("kv.notes"), "; ".join(s.notes)))
    chart = charts.soak(s.window_ms, seconds=s.seconds, xlabel=t("chart.soak_x"), ylabel=t("chart.soak_y"))
    return {"kv": kv, "chart": chart,
            "text": t("text.soak_summary", seconds=f.num(s.seconds), iterations=s.iterations, windows=len(s.window_ms))}


def _records(value: Any, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Tolerant reader for the upstream stage's `details` lists: dicts, or tuples in
    `keys` order. Anything else is skipped rather than breaking the report."""
    out = []
    if not isinstance(value, (list, tuple)):
        return out
    for item in value:
        if isinstance(item, dict):
            out.append(item)
        elif isinstance(item, (list, tuple)):
            out.append(dict(zip(keys, item)))
    return out


def _upstream(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    u = result.upstream
    if u is None or not u.measured:
        note = (u.note if u is not None else "") or result.stage_errors.get("upstream", "") or t("text.stage_not_run")
        return {"measured": False, "text": t("text.upstream_not_measured", note=note)}
    d = u.details or {}
    kv = [(t("kv.last_commit"), f.num(u.days_since_last_commit, 2)), (t("kv.commits_30d"), f.num(u.commits_30d)),
          (t("kv.commits_90d"), f.num(u.commits_90d)), (t("kv.commits_365d"), f.num(u.commits_365d)),
          (t("kv.authors_90d"), f.num(u.authors_90d)), (t("kv.latest_tag"), u.latest_tag or f.na),
          (t("kv.days_since_release"), f.num(u.days_since_release, 2)), (t("kv.score"), f.num(u.maintenance_score, 2))]
    for key, label in (("bus_factor", "kv.bus_factor"), ("merged_prs_90d", "kv.merged_prs_90d"),
                       ("median_release_interval_days", "kv.release_interval")):
        if isinstance(d.get(key), (int, float)):
            kv.append((t(label), f.num(d[key], 2)))
    limited = d.get("limited")
    if isinstance(limited, dict) and limited:
        kv.append((t("kv.limited"), "; ".join(f"{k}: {v}" for k, v in limited.items())))
    fork_d = d.get("fork") if isinstance(d.get("fork"), dict) else {}
    fork = None
    if u.fork_behind is not None or u.fork_days_behind is not None or fork_d:
        fork = [(t("kv.fork_repo"), f"{fork_d.get('repo', '?')} ({fork_d.get('branch', '?')})")] if fork_d else []
        if fork_d and not fork_d.get("measured", True):
            fork.append((t("kv.fork_not_measured"), str(fork_d.get("reason", ""))))
        fork += [(t("kv.fork_behind"), f.num(u.fork_behind)), (t("kv.fork_ahead"), f.num(u.fork_ahead)),
                 (t("kv.fork_days_behind"), f.num(u.fork_days_behind, 2))]
        if fork_d.get("last_sync_date"):
            fork.append((t("kv.fork_last_sync"), _day(str(fork_d["last_sync_date"]))))
        missing_rel = fork_d.get("missing_releases")
        if isinstance(missing_rel, list) and missing_rel:
            tags = [str(r.get("tag", r)) if isinstance(r, dict) else str(r) for r in missing_rel]
            fork.append((t("kv.fork_missing_releases"), ", ".join(tags[-8:])))
    # weekly_commits: ints, oldest week first, starting at weekly_commits_start (upstream.py).
    weekly_raw = d.get("weekly_commits") or []
    counts, labels = [], []
    for w in weekly_raw if isinstance(weekly_raw, (list, tuple)) else []:
        if isinstance(w, dict):
            counts.append(w.get("commits", w.get("count", 0)) or 0)
            labels.append(str(w.get("week", w.get("start", ""))))
        elif isinstance(w, (int, float)):
            counts.append(w)
    start = _as_date(d.get("weekly_commits_start"))
    if start is not None and counts and not labels:
        labels = [(start + timedelta(days=7 * i)).isoformat() for i in range(len(counts))]
    guide = next((o.threshold for o in (result.verdict.outcomes if result.verdict else ())
                  if o.metric == "upstream.commits_per_week_90d"), None)
    weekly = charts.weekly_commits(counts, labels=labels if all(labels) and labels else None,
                                   xlabel=t("chart.weeks_ago") if not (labels and all(labels)) else "",
                                   ylabel=t("chart.commits"), guide=guide)
    rels = [(_as_date(r.get("date")), str(r.get("tag", ""))) for r in _records(d.get("releases"), ("tag", "date"))]
    releases = charts.releases([(dd, tag) for dd, tag in rels if dd is not None], as_of=_as_date(u.as_of),
                               xlabel=t("chart.release_date"), today_label=t("chart.as_of"))
    commits = [{"sha": str(c.get("sha", ""))[:10], "date": _day(str(c.get("date", ""))),
                "author": str(c.get("author", "")), "subject": str(c.get("subject", ""))}
               for c in _records(d.get("recent_commits"), ("sha", "date", "author", "subject"))[:15]]
    authors = [{"name": str(a.get("name", "")), "commits": str(a.get("commits", ""))}
               for a in _records(d.get("top_authors_365d"), ("name", "commits"))[:10]]
    return {"measured": True, "kv": kv, "fork": fork, "weekly": weekly, "releases": releases,
            "commits": commits, "authors": authors, "note": u.note,
            "text": t("text.upstream_as_of", repo=u.repo or "?", head=(u.head or "?")[:12], as_of=u.as_of or "?")}


def _comparison(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    c = result.comparison
    if c is None:
        return {"present": False, "text": t("text.comparison_none")}
    order = {"regression": 0, "improvement": 1, "new": 2, "gone": 3, "unchanged": 4}
    changes = sorted(c.changes, key=lambda x: (order.get(x.status, 9), x.key))
    shown = [x for x in changes if x.status != "unchanged"]
    rest = [x for x in changes if x.status == "unchanged"]
    room = max(0, MAX_ROWS - len(shown))
    shown += rest[:room]
    rows = [{"kind": x.kind, "key": x.key, "ref": f.ms(x.reference_ms), "cand": f.ms(x.candidate_ms),
             "ratio": f.x(x.ratio), "threshold": f.pct(x.threshold), "status": t.get(f"change.{x.status}", x.status),
             "cls": {"regression": "bad", "improvement": "good"}.get(x.status, "none")} for x in shown]
    return {"present": True, "text": t("text.comparison_ref", reference=c.reference, candidate=c.candidate),
            "not_comparable": "" if c.comparable else t("text.not_comparable", note=c.note),
            "note": c.note if c.comparable else "", "rows": rows,
            "more": t("text.more_rows", n=len(rest) - room) if len(rest) > room else "",
            "env": [{"field": a, "before": b, "now": n} for a, b, n in c.environment_changes]}


def _trend(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    if not result.trend:
        return None
    series: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for p in sorted(result.trend, key=lambda p: p.created):
        series[p.key].append((p.version, p.median_ms))
    chart = charts.trend(series, ylabel=t("chart.trend_y"), xlabel=t("chart.version"))
    rows = []
    for key, pts in series.items():
        first, last = pts[0][1], pts[-1][1]
        rows.append({"key": key, "first": f"{f.ms(first)} ({pts[0][0]})", "latest": f"{f.ms(last)} ({pts[-1][0]})",
                     "change": f.x(last / first) if first else f.na})
    return {"chart": chart, "rows": rows[:MAX_ROWS]}


def _flatten(prefix: str, value: Any) -> Iterable[tuple[str, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flatten(f"{prefix}.{k}" if prefix else str(k), v)
    else:
        yield prefix, value if isinstance(value, str) else json.dumps(value, default=str)


def _environment(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    env, hw, m = result.environment, result.environment.hardware, result.model
    software = [("evaluator", env.evaluator), ("python", env.python), ("os", env.os), ("cpu", env.cpu),
                ("torch", env.torch), ("tilelang", env.tilelang)]
    hardware = [("name", hw.name), ("target", hw.target), ("device", hw.device), ("platform", hw.platform),
                ("cores", str(hw.cores)), ("memory_gb", f.num(hw.memory_gb)),
                ("compute_capability", hw.compute_capability or "—"), ("driver", hw.driver or "—"),
                ("cuda", hw.cuda or "—"), ("smem_per_block", str(hw.smem_per_block)),
                ("peak_tflops", f.num(hw.peak_tflops)), ("peak_gbps", f.num(hw.peak_gbps)),
                ("measured_tflops", f.num(hw.measured_tflops)), ("measured_gbps", f.num(hw.measured_gbps))]
    model = [("name", m.name), ("source", m.source), ("batch_size", str(m.batch_size)),
             ("seq_len", "—" if m.seq_len is None else str(m.seq_len)), ("dtype", m.dtype),
             ("parameters", f"{m.parameters:,}"), ("spec_hash", m.spec_hash or "—")]
    if result.baseline is not None:
        b = result.baseline
        model.append(("baseline", f"{b.model}/{b.platform}/{b.version} ({b.commit[:10]})"))
    settings = list(_flatten("", result.settings))
    return {"software": software, "hardware": hardware, "model": model, "settings": settings}


def _tuning(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    kernels = []
    for k in result.tuned:
        counts: dict[str, int] = defaultdict(int)
        for c in k.candidates:
            counts[c.status] += 1
        ok = sorted((c for c in k.candidates if c.status == "ok" and c.latency_ms is not None),
                    key=lambda c: c.latency_ms)
        bad: dict[str, Any] = {}
        for c in k.candidates:
            if c.status != "ok":
                bad.setdefault(c.status, c)  # one example per failure kind keeps the appendix short
        cands = [{"config": f.config(c.config), "status": c.status, "latency": f.ms(c.latency_ms),
                  "compile": f.num(c.compile_s), "error": c.error, "phase": c.phase}
                 for c in [*ok[:8], *bad.values()]]
        kernels.append({"family": k.family, "shape": shape_str(k.shape), "dtype": k.dtype, "target": k.target,
                        "config": f.config(k.config), "best": f.ms(ok[0].latency_ms) if ok else f.na,
                        "counts": ", ".join(f"{s} {n}" for s, n in sorted(counts.items())),
                        "tuning_s": f.num(k.tuning_s), "cached": f.yn(k.cached), "ok": k.ok,
                        "candidates": cands,
                        "title": t("text.candidates_of", family=k.family, shape=shape_str(k.shape)),
                        "truncated": t("text.truncated", shown=len(cands), total=len(k.candidates))
                        if len(cands) < len(k.candidates) else ""})
    return {"kernels": kernels}


def _timing_policy(result: RunResult) -> list[tuple[str, str]]:
    timing = result.settings.get("timing") if isinstance(result.settings, dict) else None
    return list(_flatten("", timing)) if isinstance(timing, dict) else []


# ---------------------------------------------------------------- assembling


def _platform(result: RunResult) -> str:
    hw = result.environment.hardware
    extra = hw.target if hw.target and hw.target not in hw.name else ""
    return f"{hw.name} ({hw.platform}{', ' + extra if extra else ''})" if hw.platform else hw.name


def context(result: RunResult, lang: str = "en") -> dict[str, Any]:
    """Everything the template shows, already formatted (the template only lays out)."""
    t = Strings(lang)
    f = Fmt(t)
    m = result.model
    precision = t("meta.precision", dtype=m.dtype, batch=m.batch_size)
    if m.seq_len:
        precision += ", " + t("meta.seq", seq=m.seq_len)
    checks = [(name, fn) for name, fn in (
        ("summary", _summary), ("headlines", _headlines), ("checklist", _checklist_rows), ("hot_ops", _hot_ops),
        ("verify", _verify), ("ops", _ops), ("roofline", _roofline), ("e2e", _e2e), ("soak", _soak),
        ("upstream", _upstream), ("comparison", _comparison), ("trend", _trend),
        ("environment", _environment), ("tuning", _tuning))]
    ctx: dict[str, Any] = {name: fn(result, t, f) for name, fn in checks}
    baseline = result.baseline
    ctx.update({
        "t": t, "lang": lang, "html_lang": t("lang_tag"), "na": f.na,
        "title": t("title", model=m.name),
        "model": m.name, "precision": precision, "platform": _platform(result),
        "date": _day(result.created), "run_id": result.run_id,
        "checklist_name": result.verdict.checklist if result.verdict else t("none"),
        "baseline_id": f"{baseline.model}/{baseline.platform}/{baseline.version}" if baseline else "",
        "header": f"{m.name} · {result.environment.hardware.name} · {_day(result.created)}",
        "timing": _timing_policy(result), "method_steps": t.raw("method.steps"),
        "stage_errors": sorted(result.stage_errors.items()),
    })
    return ctx


def _environment_jinja() -> jinja2.Environment:
    # Autoescape everything: names, subjects and paths in the result are not ours.
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


_SVG_OK = re.compile(r"^<svg\b")


def _safe_svg(svg: str | None) -> str | None:
    """Charts are our own matplotlib output; refuse anything that could run or fetch."""
    if svg is None:
        return None
    if not _SVG_OK.match(svg) or re.search(r"<script|<foreignObject|\bon\w+\s*=|href=\"(?!#)", svg, re.I):
        raise ReportError("a chart contained script or an external reference; this is a bug in evaluator/charts.py")
    return svg


def render_html(result: RunResult, lang: str = "en") -> str:
    ctx = context(result, lang)
    try:
        css = (TEMPLATES / "report.css").read_text(encoding="utf-8")
        template = _environment_jinja().get_template("report.html.j2")
    except (OSError, jinja2.TemplateNotFound) as exc:
        raise ReportError(f"report template missing ({exc}); restore templates/ from the repository") from exc
    return template.render(**ctx, css=css, svg=_safe_svg)


# ---------------------------------------------------------------- PDF


def local_only_fetcher(root: Path) -> Callable[..., Any]:
    """A WeasyPrint URL fetcher that serves data: URLs and files inside `root`, and
    refuses everything else (network, and files elsewhere on the machine)."""
    import weasyprint.urls as wu

    root = Path(root).resolve()

    def check(url: str) -> None:
        scheme = urlsplit(url).scheme.lower()
        if scheme == "data":
            return
        if scheme == "file":
            path = Path(unquote(urlsplit(url).path)).resolve()
            if path == root or root in path.parents:
                return
            raise ReportError(f"refused to read {path}: the report may only use files inside {root}")
        raise ReportError(f"refused to fetch {url}: the report must not use the network")

    if hasattr(wu, "URLFetcher"):  # WeasyPrint >= 66: fetchers are URLFetcher subclasses
        class LocalFetcher(wu.URLFetcher):
            def fetch(self, url, headers=None):  # noqa: D401
                check(url)
                return super().fetch(url, headers)

        return LocalFetcher(allowed_protocols={"data", "file"}, allow_redirects=False)

    def fetch(url: str, *args: Any, **kwargs: Any) -> Any:
        check(url)
        return wu.default_url_fetcher(url, *args, **kwargs)

    return fetch


class _QuietSvgStyles(logging.Filter):
    """WeasyPrint parses the style attributes of inline SVG as HTML CSS and warns once per
    SVG property (fill, stroke, ...) although its SVG renderer uses them; hundreds of such
    lines would bury a real warning about report.css."""

    _SVG = re.compile(r"^Ignored `(fill|stroke|text-anchor|clip-path|opacity)[\w-]*:")

    def filter(self, record: logging.LogRecord) -> bool:
        return not self._SVG.match(record.getMessage())


def _pdf_elsewhere(result: RunResult, why: str) -> str:
    b = result.baseline
    ref = f"{b.model}/{b.platform}/{b.version}" if b else "ID"
    return (f"PDF not rendered here ({why}); render it on a machine with WeasyPrint and pango: "
            f"`evaluate report --baseline {ref}`")


def render(result: RunResult, out_dir: Path, *, lang: str = "en", pdf: bool = True) -> ReportFiles:
    """Write report.html (always) and report.pdf (when asked and WeasyPrint loads)."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create report folder {out_dir}: {exc}; pick a writable --out") from exc
    html = render_html(result, lang)
    html_path = out_dir / HTML_NAME
    html_path.write_text(html, encoding="utf-8")
    if not pdf:
        return ReportFiles(html=html_path, pdf=None, pdf_note="PDF not requested")
    try:
        import weasyprint
    except (ImportError, OSError) as exc:  # OSError: pango/cairo shared libraries missing
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return ReportFiles(html=html_path, pdf=None, pdf_note=_pdf_elsewhere(result, f"WeasyPrint unavailable: {first}"))
    pdf_path = out_dir / PDF_NAME
    quiet = _QuietSvgStyles()
    logger = logging.getLogger("weasyprint")
    logger.addFilter(quiet)
    try:
        weasyprint.HTML(string=html, base_url=str(out_dir.resolve()) + "/",
                        url_fetcher=local_only_fetcher(out_dir)).write_pdf(str(pdf_path))
    except Exception as exc:  # noqa: BLE001 - any rendering failure leaves the HTML usable
        raise ReportError(f"PDF rendering failed ({type(exc).__name__}: {exc}); the HTML report is at {html_path}") from exc
    finally:
        logger.removeFilter(quiet)
    return ReportFiles(html=html_path, pdf=pdf_path, pdf_note="")
