"""The go/no-go report: one RunResult in, report.html (and report.pdf) out.

In: a `RunResult` (any field may be None or empty: a run that stopped early, a stage that
was not run, or a baseline written before a field existed), an output folder, and a
language ("en" or "zh"). Out: `ReportFiles` naming `report.html` (self-contained: inline
CSS, inline SVG charts, nothing fetched) and `report.pdf` (WeasyPrint, paged, with header
and page numbers), or no PDF and a one-line `pdf_note` saying what to install.

Page one is for a manager: verdict, model, platform, date, five key numbers that cannot
contradict the verdict (numbers the run flagged as unstable or suspect are greyed, with
their intervals), every failed item in plain words, what would change the verdict, a
caveat when the numbers come from a CPU, one line on which accelerators the rewritten
kernels build for (the portability matrix: lowered, not run), and the next steps. The
rest is for engineers.

Every value that comes from outside (model names, commit subjects, paths, tags) reaches
the page through Jinja's autoescaping or matplotlib's XML escaping; only our own CSS and
the chart SVGs are marked safe. Words come from templates/i18n/<lang>.yaml, including
the evidence behind each checklist item and the notes other stages write in English
(matched by pattern, shown as written when no pattern knows them). A team's own
templates/ folder (or $EVALUATOR_TEMPLATES) overrides the template, adds CSS and
rewords strings (see evaluator/resources.py).

A PDF is written only where its text will be right: WeasyPrint needs pango, HarfBuzz's
subsetting library (without it the embedded fonts lose their text mapping and copied
text comes out as "A\\x00 \\x00H..."), and for Chinese a CJK font (without one every
character is a box). `pdf_missing` checks those first; WeasyPrint is imported lazily
because locked-down GPU machines often lack pango.
"""

from __future__ import annotations

import ctypes.util
import glob
import json
import logging
import math
import os
import re
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import unquote, urlsplit

import jinja2
import yaml

from .baseline import plausible_cause
from . import charts, resources
from .checklist import METRICS, kernel_status, op_label, op_rows, op_speedup
from .errors import ReportError
from .results import OpBench, Outcome, Ratio, RunResult, Timing, Verdict, shape_str

TEMPLATES = resources.SHIPPED_TEMPLATES  # the shipped folder; a team's folders come first, see _loader()
LANGS = ("en", "zh")
HTML_NAME = "report.html"
PDF_NAME = "report.pdf"
MAX_ROWS = 60  # long tables (candidates, unchanged comparisons) are cut; the baseline has them all


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    pdf: Path | None
    pdf_note: str = ""


# ---------------------------------------------------------------- strings


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, key by key, so a team's file needs only the keys it rewords."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _is_plural(node: Any) -> bool:
    return isinstance(node, dict) and "other" in node and set(node) <= {"zero", "one", "other"}


def _form(node: Any, n: float | None) -> Any:
    """The plural form of a {zero, one, other} string for count n (Chinese needs only other)."""
    if not _is_plural(node):
        return node
    if n is not None and n == 0 and "zero" in node:
        return node["zero"]
    if n is not None and n == 1 and "one" in node:
        return node["one"]
    return node["other"]


class Strings:
    """One language's strings, falling back to English for a key it lacks.

    A string may be a mapping {zero, one, other}: the form is picked by the count passed
    as `n` (or `count`), so "1 check failed", "2 checks failed" and "nobody" read as prose.
    """

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

    def __call__(self, key: str, /, count: float | None = None, **kw: Any) -> str:
        n = count if count is not None else kw.get("n") if isinstance(kw.get("n"), (int, float)) else None
        text = _form(self._get(key.split(".")), n)
        if count is not None:  # the count picks the plural form and may be quoted too ("all {count} blockers")
            kw = {"count": _num(count) or count, **kw}
        return str(text).format_map(_Keep(kw)) if kw else str(text)

    def raw(self, key: str) -> Any:
        return self._get(key.split("."))

    def has(self, key: str) -> bool:
        try:
            self._get(key.split("."))
            return True
        except ReportError:
            return False

    def get(self, key: str, default: str) -> str:
        """For values that come from data (a severity, a status): unknown ones show as is."""
        return self(key) if self.has(key) else default

    def _metric_node(self, name: str, field: str) -> Any:
        """The metric's own words, else (one per target) the shared words of
        `portability.<target>.kernels_ok`, else ReportError."""
        try:
            return self._get(["metrics", name, field])
        except ReportError:
            key = metric_strings_key(name)
            if key == name:
                raise
            return self._get(["metrics", key, field])

    def raw_metric(self, name: str, field: str) -> Any:
        try:
            return self._metric_node(name, field)
        except ReportError:
            return ""

    def metric(self, name: str, field: str, /, count: float | None = None, **kw: Any) -> str:
        # Metric names contain dots, so they cannot go through the dotted lookup. A baseline
        # written by another version may name a metric this one has no words for.
        try:
            text = str(_form(self._metric_node(name, field), count))
        except ReportError:
            fallback = {"label": name, "fail": "next.unknown_fail", "next": "next.unknown_next",
                        "missing": "next.unknown_missing"}[field]
            text = fallback if field == "label" else str(self._get(fallback.split(".")))
        return text.format_map(_Keep({"metric": name, "target": _target_name(name), **kw}))


_PER_TARGET = re.compile(r"^portability\.([a-z0-9_]+)\.kernels_ok$")


def metric_strings_key(name: str) -> str:
    """Where a metric's words live in i18n/<lang>.yaml: its own name, except the one
    metric per portability target, which share `portability.<target>.kernels_ok`."""
    return "portability.<target>.kernels_ok" if _PER_TARGET.match(name) else name


def _target_name(metric: str) -> str:
    """The accelerator a per-target metric names ("NVIDIA H100"), or ""."""
    m = _PER_TARGET.match(metric)
    if not m:
        return ""
    from . import targets  # noqa: PLC0415 - only for the per-target metrics

    spec = targets.TARGETS.get(m.group(1))
    return spec.name if spec else m.group(1)


class _Keep(dict):
    """format_map mapping that leaves unknown {placeholders} as they are."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _read_strings(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ReportError(f"cannot read report strings {path}: {exc}; fix or restore it") from exc
    if not isinstance(data, dict):
        raise ReportError(f"report strings {path} must be a YAML mapping; fix or restore it")
    return data


def _load_strings(lang: str) -> dict[str, Any]:
    """The shipped strings with a team's i18n/<lang>.yaml files merged on top."""
    shipped = TEMPLATES / "i18n" / f"{lang}.yaml"
    if not shipped.is_file():
        raise ReportError(f"report strings {shipped} are missing; reinstall the package or restore templates/")
    data = _read_strings(shipped)
    for folder in reversed(resources.template_dirs()):  # least specific first, so the team's wins
        path = folder / "i18n" / f"{lang}.yaml"
        if folder != TEMPLATES and path.is_file():
            data = _merge(data, _read_strings(path))
    return data


# ---------------------------------------------------------------- formatting


def _strip(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def _num(v: float | None, digits: int = 3, plain: bool = False) -> str | None:
    """Plain numbers for people: 120, 7,460, 12.5, 1.25, 0.048. Scientific notation only
    below 0.001 (errors such as 1.2e-06) and not with `plain` (rates such as 0.00098
    TFLOP/s), never for days, times or counts."""
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100 or float(v).is_integer():
        return f"{v:.0f}"
    if a >= 10:
        return _strip(f"{v:.1f}")
    if a >= 1:
        return _strip(f"{v:.2f}")
    if a >= 0.001:
        return _strip(f"{v:.{max(digits, 2)}g}")  # g keeps plain notation down to 1e-4
    if plain:
        return _strip(f"{v:.{digits - 1 - math.floor(math.log10(a))}f}") if a > 0 else "0"
    return f"{v:.{max(digits - 1, 1)}e}"


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
        return f"{v:.3f}" if v < 100 else (f"{v:.1f}" if v < 10000 else f"{v:,.0f}")

    def x(self, v: float | None) -> str:
        return self.na if v is None or not math.isfinite(v) else f"{v:.2f}×"

    def pct(self, v: float | None, digits: int = 1) -> str:
        return self.na if v is None or not math.isfinite(v) else f"{v * 100:.{digits}f}%"

    def yn(self, v: bool | None) -> str:
        return self.na if v is None else self.t("bool_yes" if v else "bool_no")

    def us(self, v: float | None) -> str:
        return self.na if v is None or not math.isfinite(v) else f"{_num(v)} µs"

    def mb(self, v: float | None) -> str:
        return self.na if v is None or not math.isfinite(v) else f"{_num(v)} MB"

    def interval(self, r: Ratio | None) -> str:
        """"1.05–1.12×": the 95% interval of a paired ratio, or "" when there is none."""
        if r is None or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (r.low, r.high)):
            return ""
        return f"{r.low:.2f}–{r.high:.2f}×"

    def x_ci(self, v: float | None, r: Ratio | None) -> str:
        """A speedup with its interval: "1.09× (1.05–1.12×)"."""
        ci = self.interval(r)
        return f"{self.x(v)} ({ci})" if ci and v is not None else self.x(v)

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
        if not self.t.has(f"units.{unit}"):
            return f"{text} {unit}"
        return str(_form(self.t.raw(f"units.{unit}"), 1 if text == "1" else v)).format(v=text)

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


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# ---------------------------------------------------------------- notes other stages write


# Notes the bench and upstream stages write in English, as (kind, pattern): the i18n
# string notes.<kind> takes the pattern's named groups. A note no pattern knows is shown
# as written, so a reworded note degrades to English instead of disappearing.
_NOTE_PATTERNS = [(kind, re.compile(rx)) for kind, rx in (
    ("soak_drift", r"latency drifted (?P<pct>[+-]?[\d.]+)% from the first to the last window"),
    ("soak_reserved", r"reserved CUDA memory grew by (?P<mb>[\d.]+) MB"),
    ("soak_memory", r"memory grew by (?P<mb>[\d.]+) MB"),
    ("soak_throttled", r"clock throttled: (?P<reasons>[^;]+)"),
    ("soak_clock_fell", r"SM clock fell from (?P<a>\d+) to (?P<b>\d+) MHz"),
    ("up_shallow", r"shallow clone: (?P<cut>.+?), limited metrics are listed in details\.limited "
                   r"\(run `git fetch --unshallow` for full history\)"),
    ("up_shallow_complete", r"shallow clone, but the measured branch's history is complete"),
    ("up_behind", r"local (?P<branch>\S+) is (?P<n>\d+) commits behind its remote-tracking branch; pull, or "
                  r"pass --branch origin/<name>, to measure the newer history"),
    ("up_stale_fetched", r"the newest commit is (?P<days>\d+) days old, and it was last fetched (?P<fetched>\d+) "
                         r"days ago: if this clone is not fresh, run `git fetch` there \(or pass the URL\) before "
                         r"trusting these numbers"),
    ("up_stale", r"the newest commit is (?P<days>\d+) days old: if this clone is not fresh, run `git fetch` "
                 r"there \(or pass the URL\) before trusting these numbers"),
    ("up_refresh", r"could not refresh the cached clone of (?P<url>\S+) \((?P<why>.*?)\); used the copy last "
                   r"updated (?P<date>\d{4}-\d{2}-\d{2})"),
    ("up_fork_not", r"fork drift not measured: (?P<why>upstream is a shallow clone|the fork is a shallow clone) "
                    r"\(run `git fetch --unshallow` there\)"),
    ("up_fork_reason", r"(?P<why>upstream is a shallow clone|the fork is a shallow clone); run `git fetch "
                       r"--unshallow` there"),
    ("up_none", r"no --upstream (?:repository was )?given"),
    ("cross_platform", r"cross-platform: candidate on (?P<cand>\S+) \((?P<cand_name>.*?)\) vs reference on "
                       r"(?P<ref>\S+) \((?P<ref_name>.*?)\)"),
    ("rule", r"a change counts beyond max\((?P<floor>[\d.]+%), (?P<k>[\d.]+) x combined spread\)"),
    ("soak_eager", r"the model could not be captured in a CUDA graph: soaked eagerly, so host jitter is included"),
    # flags and timer notes the bench stage attaches to numbers
    ("roof", r"(?P<side>TileLang|PyTorch) faster than the (?P<roof>compute|memory) roof allows"),
    ("amdahl", r"contradicts the Amdahl estimate \((?P<est>[\d.]+)x from the op speedups, measured "
               r"(?P<lo>[\d.]+)-(?P<hi>[\d.]+)x\)"),
    ("capture_failed", r"graph capture failed \((?P<why>[^;]*)\)"),
    ("launch_gaps", r"the device number includes launch gaps"),
    ("timer_disagree", r"(?P<side>TileLang|PyTorch): graph replay (?P<a>[\d.]+) µs vs profiler kernel time "
                       r"(?P<b>[\d.]+) µs per call"),
    ("view_eager", r"host path: each forward synchronised, launches included"),
    ("view_router", r"the router itself adds (?P<ms>[\d.]+) ms per forward"),
    ("view_gap", r"graph replay (?P<a>[\d.]+) ms vs kernel sum (?P<b>[\d.]+) ms for the unmodified model: the "
                 r"difference is device time between kernels \(many small launches\), which graph replay "
                 r"includes and the kernel sum does not"),
    ("view_cpu", r"interleaved rounds"),
    ("view_dropped", r"disturbed rounds dropped"),
)]
# Segments of baseline.compare's note the report replaces with its own words (counts
# come from the changes, causes from the filtered environment changes).
_DROPPED_NOTES = re.compile(r"^(likely causes: .*|(?:\d+ (?:regression|improvement|unchanged|new|gone)"
                            r"(?:, )?)+|nothing to compare|NOT COMPARABLE: .*)$")
# The reasons portability.py gives for a cell, as (kind, pattern) for notes.<kind>: a
# target's limit, a missing backend or matrix-core dtype. Compiler errors are shown as
# TileLang wrote them.
_PORT_PATTERNS = [(kind, re.compile(rx)) for kind, rx in (
    ("port_uses", r"uses (?P<kb>[\d.]+ KB) of shared memory"),
    ("port_allows_req", r"(?P<target>[^\s;]+) allows (?P<kb>[\d.]+ KB) of (?P<what>LDS|shared memory) per "
                        r"(?P<unit>workgroup|block) \(the lowered kernel itself requests (?P<req>[\d.]+ KB)\)"),
    ("port_allows", r"(?P<target>[^\s;]+) allows (?P<kb>[\d.]+ KB) of (?P<what>LDS|shared memory) per "
                    r"(?P<unit>workgroup|block)"),
    ("port_requests", r"the lowered kernel requests (?P<kb>[\d.]+ KB) of shared memory"),
    ("port_threads", r"launches (?P<n>\d+) threads per block"),
    ("port_max_threads", r"(?P<target>[^\s;]+) allows (?P<n>\d+)(?=;|$)"),
    ("port_no_dtype", r"(?P<target>[^\s;']+)'s (?P<cores>.+?) take no (?P<dtype>\w+): T\.gemm lowered to scalar "
                      r"FMA loops"),
    ("port_no_mma", r"no matrix-core instruction for (?P<dtype>\w+) on (?P<arch>\S+): T\.gemm lowered to scalar "
                    r"FMA loops"),
    ("port_no_backend", r"no TileLang backend installed for (?P<kind>\w+): TileLang (?P<version>\S+) here has no "
                        r"'(?P<target_kind>[^']+)' target kind \((?P<what>.+) provides it\)"),
    ("port_instruction", r"T\.gemm lowered to (?P<got>\S+), not (?P<target>[^\s']+)'s (?P<want>\S+): speed "
                         r"measured elsewhere does not carry over"),
)]
# Words inside a matched note that are themselves translated (notes.<key>).
_NOTE_WORDS = {"upstream is a shallow clone": "why_up_shallow", "the fork is a shallow clone": "why_fork_shallow",
               "compute": "word_compute", "memory": "word_memory", "shared memory": "word_smem",
               "LDS": "word_lds", "block": "word_block", "workgroup": "word_workgroup"}


def _notes(text: str, t: Strings, drop: re.Pattern | None = None,
           patterns: list[tuple[str, re.Pattern]] | None = None) -> str:
    """A "; "-joined note in the report's language, piece by piece."""
    out: list[str] = []
    pos = 0
    text = text or ""
    while pos < len(text):
        for kind, rx in patterns if patterns is not None else _NOTE_PATTERNS:
            m = rx.match(text, pos)
            if m:
                kw = {k: (t(f"notes.{_NOTE_WORDS[v]}") if v in _NOTE_WORDS else v or "")
                      for k, v in m.groupdict().items()}
                out.append(t(f"notes.{kind}", **kw))
                pos = m.end()
                break
        else:
            nxt = text.find("; ", pos)
            end = len(text) if nxt < 0 else nxt
            piece = text[pos:end].strip()
            if piece and not (drop and drop.match(piece)):
                out.append(piece)
            pos = end
        if text.startswith("; ", pos):
            pos += 2
    return t("list_semi").join(p for p in out if p)


def _flag(flag: str, t: Strings) -> str:
    """A flag a stage attached to a number ("unstable", "contradicts the Amdahl estimate
    (...)"), in words: the short ones by name, the ones carrying numbers by pattern."""
    known = t.raw("flags") if t.has("flags") else {}
    if isinstance(known, dict) and flag in known:
        return str(known[flag])
    return _notes(flag, t) or flag


def _timing_flags(*timings: Timing | None) -> bool:
    return any(tm is not None and getattr(tm, "unstable", False) for tm in timings)


def _op_flags(b: OpBench) -> list[str]:
    """Why an op's number is not clean evidence: its own flags, unstable timings, unverified."""
    flags = list(getattr(b, "flags", ()) or ())
    if _timing_flags(b.tilelang, b.torch) and "unstable" not in flags:
        flags.append("unstable")
    if getattr(b, "verified", True) is False:
        flags.append("not verified")
    return flags


def _e2e_flags(result: RunResult) -> list[str]:
    """The end-to-end number's flags, plus the report's own check for baselines written
    before the bench stage flagged anything: a measured speedup far above what the op
    speedups and coverage allow (Amdahl) is a measurement problem, not a result."""
    e = result.e2e
    if e is None:
        return []
    flags = list(getattr(e, "flags", ()) or ())
    if _timing_flags(e.reference, e.swapped) and "unstable" not in flags:
        flags.append("unstable")
    if (_finite(e.speedup) and _finite(e.amdahl_speedup) and e.amdahl_speedup > 0
            and e.speedup > 1.25 * max(e.amdahl_speedup, 1.0)
            and not any(f.startswith("contradicts the Amdahl estimate") for f in flags)):
        flags.append("contradicts the Amdahl estimate")
    return flags


# ---------------------------------------------------------------- page one


_SYMBOL = {">=": "≥", "<=": "≤", "==": "=", "!=": "≠", ">": ">", "<": "<"}
_DECISION_CLASS = {"GO": "go", "CONDITIONAL GO": "conditional", "NO-GO": "nogo"}
_SEVERITY_ORDER = {"blocker": 0, "major": 1, "minor": 2}


def _outcome(verdict: Verdict | None, metric: str) -> Outcome | None:
    if verdict is None:
        return None
    got = [o for o in verdict.outcomes if o.metric == metric]
    for status in ("fail", "waived", "pass", "not_evaluated"):
        for o in got:
            if o.status == status:
                return o
    return None


def _metric_status(verdict: Verdict | None, metric: str) -> str:
    o = _outcome(verdict, metric)
    return "none" if o is None or o.status == "not_evaluated" else o.status


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


def _condition(o: Outcome, t: Strings, f: Fmt) -> str:
    """"Slowest op speedup ≥ 0.50× (now 0.31×)": an item as a condition on its number."""
    return t("flip.condition", label=t.metric(o.metric, "label"), comparator=_SYMBOL.get(o.comparator, o.comparator),
             threshold=f.unit(o.threshold, o.unit), value=f.unit(o.value, o.unit))


def _headroom(o: Outcome) -> float | None:
    """How far a passing item is from failing, relative to its threshold (None: not comparable)."""
    if o.status != "pass" or not _finite(o.value) or not _finite(o.threshold) or o.threshold == 0:
        return None
    if o.unit == "1/0" or o.comparator in ("==", "!="):
        return None
    diff = o.value - o.threshold if o.comparator in (">=", ">") else o.threshold - o.value
    return diff / abs(o.threshold)


def _flip(result: RunResult, t: Strings, f: Fmt) -> str:
    """One line: what would change the verdict."""
    v = result.verdict
    if v is None:
        return ""
    failed = [o for o in v.outcomes if o.status == "fail"]
    blockers = [o for o in failed if o.severity == "blocker"]
    missing = [o for o in v.outcomes if o.status == "not_evaluated" and not _is_optional(o)]
    sep = t("list_sep")
    if v.decision == "NO-GO" and blockers:
        rest = len(failed) - len(blockers) + len(missing)
        return t("flip.nogo", count=len(blockers), items=sep.join(_condition(o, t, f) for o in blockers)) + \
            (" " + t("flip.nogo_rest", count=rest, n=rest) if rest else "")
    if v.decision == "CONDITIONAL GO":
        parts = [_condition(o, t, f) for o in failed]
        parts += [t("flip.measured", label=t.metric(o.metric, "label")) for o in missing]
        return t("flip.conditional", items=sep.join(parts)) if parts else ""
    if v.decision == "GO":
        close = [(h, o) for o in v.outcomes if (h := _headroom(o)) is not None]
        if not close:
            return ""
        h, o = min(close, key=lambda x: x[0])
        return t("flip.go", item=_condition(o, t, f), headroom=f.pct(h, 0))
    return ""


def _regression_lines(result: RunResult, t: Strings, f: Fmt) -> list[str]:
    c = result.comparison
    if c is None:
        return []
    return [t("summary.regression", key=x.key, ratio=f.x(x.ratio), limit=f.pct(x.threshold, 0))
            for x in c.regressions]


def _summary(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    v = result.verdict
    key = v.decision if v is not None and v.decision in _DECISION_CLASS else "NONE"
    outcomes = v.outcomes if v is not None else ()
    failed = sorted((o for o in outcomes if o.status == "fail"), key=lambda o: _SEVERITY_ORDER.get(o.severity, 9))
    missing = [o for o in outcomes if o.status == "not_evaluated" and not _is_optional(o)]
    optional = [o for o in outcomes if o.status == "not_evaluated" and _is_optional(o)]
    waived = [o for o in outcomes if o.status == "waived"]
    blockers = sum(o.severity == "blocker" for o in failed)
    parts = ([t("summary.n_failed", count=len(failed), n=len(failed))] if failed else []) + \
        ([t("summary.n_missing", count=len(missing), n=len(missing))] if missing else [])
    passed = sum(o.status == "pass" for o in outcomes)
    sentence = t(f"decision_summary.{key}", count=blockers if key == "NO-GO" else None, passed=passed,
                 total=len(outcomes) - len(optional), blockers=blockers, parts=t("list_sep").join(parts))

    def plain(o: Outcome) -> dict[str, Any]:
        kw = dict(value=f.unit(o.value, o.unit), threshold=f.unit(o.threshold, o.unit),
                  comparator=_SYMBOL.get(o.comparator, o.comparator), n=_num(o.value) or f.na)
        # Sentences that already quote the numbers need no "(measured …)" after them.
        text = t.raw_metric(o.metric, "fail")
        quotes = "{threshold}" in str(_form(text, o.value))
        details = _regression_lines(result, t, f) if o.metric == "baseline.regressions" else []
        return {"severity": o.severity, "severity_label": t.get(f"severity.{o.severity}", o.severity),
                "title": _item_title(o, t, f), "plain": t.metric(o.metric, "fail", count=o.value, **kw),
                "measured": "" if quotes else t("summary.measured_vs", **kw), "id": o.id, "details": details}

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
    hw = result.environment.hardware
    return {
        "key": key,
        "css": _DECISION_CLASS.get(key, "none"),
        "label": t(f"decision.{key}"),
        "sentence": sentence,
        "meaning": t(f"decision_meaning.{key}"),
        # Every failed item, named in full: a manager must not have to open the checklist
        # to learn what the last one was.
        "failed": [plain(o) for o in failed],
        "flip": _flip(result, t, f),
        "cpu_caveat": t("caveat.cpu") if (hw.device or "").lower() == "cpu" else "",
        "missing": [{"title": _item_title(o, t, f), "severity_label": t.get(f"severity.{o.severity}", o.severity)}
                    for o in missing],
        "optional": t("list_sep").join(_item_title(o, t, f) for o in optional),
        "optional_n": len(optional),
        "waived": [{"title": _item_title(o, t, f), "date": _waiver_date(o)} for o in waived],
        "steps": list(dict.fromkeys(steps)),  # several items can share one remedy
    }


def _untrusted_speed(result: RunResult) -> str:
    """Why no speed number is evidence at all: a kernel or the model's output is wrong."""
    fams = kernel_status(result) or {}
    if any(ok is False for ok in fams.values()):
        return "kernels_wrong"
    e = result.e2e
    if e is not None and e.swapped is not None and not e.outputs_match:
        return "outputs_differ"
    return ""


def _card(label: str, value: str, sub: str, status: str, *, flags: Iterable[str] = (), t: Strings,
          ci: str = "", crosses: bool = False) -> dict[str, str]:
    """A key number. Green only when its item passed and nothing casts doubt on it:
    flagged or unstable numbers, and intervals that reach across the threshold, are grey
    with the reason underneath, so a card never looks better than the evidence."""
    notes = [_flag(x, t) for x in dict.fromkeys(flags)]
    if crosses:
        notes.append(t("headline.crosses"))
    doubtful = bool(notes)
    shown = "flagged" if doubtful and status in ("pass", "none", "waived") else status
    return {"label": label, "value": value, "sub": sub, "status": shown, "dim": doubtful,
            "ci": t("headline.ci", ci=ci) if ci else "", "doubt": t("list_semi").join(notes)}


def _crosses(o: Outcome | None, r: Ratio | None) -> bool:
    """Does the 95% interval reach the other side of the item's threshold?"""
    if o is None or r is None or o.unit != "x" or not _finite(o.threshold):
        return False
    if not (_finite(r.low) and _finite(r.high)):
        return False
    if o.comparator in (">=", ">"):
        return o.status == "pass" and r.low < o.threshold
    if o.comparator in ("<=", "<"):
        return o.status == "pass" and r.high > o.threshold
    return False


def _headlines(result: RunResult, t: Strings, f: Fmt) -> list[dict[str, str]]:
    v = result.verdict
    rows, _ = op_rows(result)
    sp = [(b, s) for b in rows if (s := op_speedup(b)) is not None]
    geomean = METRICS["ops.speedup_geomean"](result)
    worst = min(sp, key=lambda x: x[1]) if sp else None
    wrong = _untrusted_speed(result)
    wrong_flag = [t(f"headline.{wrong}")] if wrong else []
    flagged_ops = [b for b, _ in sp if _op_flags(b)]
    cards = [_card(
        t("headline.geomean"), f.x(geomean),
        t("headline.geomean_sub", count=len(sp), n=len(sp)) if sp else "",
        _metric_status(v, "ops.speedup_geomean"), t=t,
        flags=wrong_flag + ([t("headline.ops_flagged", count=len(flagged_ops), n=len(flagged_ops), total=len(sp))]
                            if flagged_ops else []))]
    no_time = [b for b in rows if op_speedup(b) is None]
    if no_time:
        # A model shape without a verified TileLang time is the slowest there is (the
        # checklist counts it as 0): name it rather than the slowest of the others.
        b = no_time[0]
        cards.append(_card(t("headline.worst"), t("headline.no_kernel"), op_label(b),
                           _metric_status(v, "ops.speedup_min"), t=t, flags=wrong_flag + _op_flags(b)))
    elif worst:
        b, s = worst
        cards.append(_card(t("headline.worst"), f.x(s), op_label(b), _metric_status(v, "ops.speedup_min"), t=t,
                           ci=f.interval(b.ratio), crosses=_crosses(_outcome(v, "ops.speedup_min"), b.ratio),
                           flags=wrong_flag + _op_flags(b)))
    else:
        cards.append(_card(t("headline.worst"), f.na, "", _metric_status(v, "ops.speedup_min"), t=t))
    fams = kernel_status(result) or {}
    cards.append(_card(
        t("headline.correct"), f"{sum(fams.values())} / {len(fams)}" if result.verify else f.na,
        t("headline.correct_sub") if result.verify else "", _metric_status(v, "kernels.all_correct"), t=t))
    e = result.e2e
    e2e_value = METRICS["e2e.speedup"](result)
    sub = ""
    if e is not None:
        sub = t("headline.e2e_sub", method=_view_name(e.method, t)) if e.method else t("headline.e2e_sub_plain")
        if _finite(e.amdahl_speedup):
            sub += t("list_semi") + t("headline.amdahl", x=f.x(e.amdahl_speedup))
    cards.append(_card(t("headline.e2e"), f.x(e2e_value), sub, _metric_status(v, "e2e.speedup"), t=t,
                       ci=f.interval(e.ratio) if e is not None else "",
                       crosses=_crosses(_outcome(v, "e2e.speedup"), e.ratio if e is not None else None),
                       flags=(wrong_flag + _e2e_flags(result)) if e is not None else ()))
    score = METRICS["upstream.maintenance_score"](result)
    cpw = METRICS["upstream.commits_per_week_90d"](result)
    statuses = {_metric_status(v, m) for m in METRICS if m.startswith("upstream.")}
    up_status = "fail" if "fail" in statuses else ("pass" if "pass" in statuses else "none")
    if score is not None:
        value, sub = f"{f.num(score, 2)} / 10", t("headline.upstream_sub_score", commits=f.num(cpw, 2))
    else:
        value, sub = f.num(cpw, 2), (t("headline.upstream_sub_commits") if cpw is not None else "")
    cards.append(_card(t("headline.upstream"), value, sub, up_status, t=t))
    return cards


# ---------------------------------------------------------------- checklist evidence


def _stage(result: RunResult, stage: str, t: Strings) -> str:
    err = result.stage_errors.get(stage)
    return t("evidence.stage_failed", stage=stage, error=err) if err else t("evidence.stage_not_run", stage=stage)


def _ev_kernels(r: RunResult, t: Strings, f: Fmt) -> str:
    s = kernel_status(r)
    if s is None:
        return _stage(r, "verify", t)
    bad = [fam for fam, ok in s.items() if not ok]
    text = t("evidence.kernels", ok=sum(s.values()), n=len(s), count=len(s))
    if bad:
        reasons = []
        for v in r.verify:
            for c in v.cases:
                if not c.passed and c.reason:
                    reasons.append(f"{v.family}: {c.reason}")
                    break
        text += t("list_semi") + t("evidence.kernels_failing", families=", ".join(bad))
        if reasons:
            text += f" ({'; '.join(dict.fromkeys(reasons))})"
    return text


def _ev_ops(r: RunResult, t: Strings, f: Fmt) -> str:
    rows, which = op_rows(r)
    if not rows:
        return _stage(r, "bench", t)
    sp = [(b, s) for b in rows if (s := op_speedup(b)) is not None]
    parts = [t("evidence.ops", count=len(sp), n=len(sp),
               which=t("text.ops_model" if which == "model shapes" else "text.ops_standard"))]
    if sp:
        b, s = min(sp, key=lambda x: x[1])
        parts.append(t("evidence.ops_slowest", op=op_label(b), x=f.x_ci(s, b.ratio)))
    failed = [op_label(b) for b in rows if op_speedup(b) is None]
    if failed:
        parts.append(t("evidence.ops_failed", ops=", ".join(failed)))
    return t("list_semi").join(parts)


def _ev_e2e(r: RunResult, t: Strings, f: Fmt) -> str:
    e = r.e2e
    if e is None:
        return _stage(r, "e2e", t)
    if e.swapped is None:
        return t("evidence.e2e_failed", error=e.error or t("none"))
    method = getattr(e, "method", "") or e.reference.timer
    ci = f.interval(getattr(e, "ratio", None))
    parts = [t("evidence.e2e", ref=f.ms(e.reference.median_ms), swapped=f.ms(e.swapped.median_ms),
               method=_view_name(method, t) + (t("comma") + ci if ci else ""), families=", ".join(e.families) or t("none"))]
    if getattr(e, "calls", ()) or getattr(e, "tilelang_calls", 0) or getattr(e, "fallback_calls", 0):
        parts.append(t("evidence.e2e_calls", tilelang=f.num(e.tilelang_calls), fallback=f.num(e.fallback_calls)))
    if _finite(getattr(e, "rel_l2_err", None)):
        parts.append(t("evidence.e2e_rel_l2", err=f.num(e.rel_l2_err, 2)))
    elif _finite(e.max_abs_err):
        parts.append(t("evidence.e2e_abs", err=f.num(e.max_abs_err, 2)))
    parts.append(t("evidence.e2e_coverage", coverage=f.pct(e.coverage, 0)))
    if e.error:
        parts.append(e.error)
    return t("list_semi").join(parts)


def _ev_profile(r: RunResult, t: Strings, f: Fmt) -> str:
    if r.hot_ops is None:
        return _stage(r, "profile", t)
    return t("evidence.profile", selected=", ".join(r.hot_ops.selected) or t("none"), n=len(r.hot_ops.ops))


def _ev_soak(r: RunResult, t: Strings, f: Fmt) -> str:
    s = r.soak
    if s is None or not s.window_ms:
        return _stage(r, "soak", t)
    text = t("evidence.soak", seconds=f.num(s.seconds), iterations=f.num(s.iterations), windows=len(s.window_ms),
             first=f.ms(s.window_ms[0]), last=f.ms(s.window_ms[-1]))
    notes = _notes("; ".join(s.notes), t)
    return text + (t("list_semi") + notes if notes else "")


def _ev_upstream(r: RunResult, t: Strings, f: Fmt) -> str:
    u = r.upstream
    if u is None:
        return _stage(r, "upstream", t)
    if not u.measured:
        return t("evidence.upstream_not_measured", note=_notes(u.note, t) or t("none"))
    text = t("evidence.upstream", repo=u.repo or "upstream", head=u.head[:10] or "?", as_of=u.as_of or "?")
    note = _notes(u.note, t)
    return text + (t("list_semi") + note if note else "")


def _ev_fork(r: RunResult, t: Strings, f: Fmt) -> str:
    u = r.upstream
    if u is None or not u.measured:
        return _ev_upstream(r, t, f)
    if u.fork_days_behind is None:
        fork = (u.details or {}).get("fork")
        if isinstance(fork, dict) and fork.get("reason"):
            return t("evidence.fork_not_measured", reason=_notes(str(fork["reason"]), t))
        return t("evidence.fork_none")
    return t("evidence.fork", behind=f.num(u.fork_behind), ahead=f.num(u.fork_ahead))


def _ev_baseline(r: RunResult, t: Strings, f: Fmt) -> str:
    c = r.comparison
    if c is None:
        return t("evidence.baseline_none")
    if not c.comparable:
        return t("evidence.baseline_not_comparable", reference=c.reference)
    regs = c.regressions
    text = t("evidence.baseline", reference=c.reference, n=len(regs), total=len(c.changes), count=len(regs))
    if regs:
        text += " (" + ", ".join(f"{x.key} {f.x(x.ratio)}" if x.ratio else x.key for x in regs) + ")"
    return text


def _ev_portability(r: RunResult, t: Strings, f: Fmt, metric: str) -> str:
    p = r.portability
    if p is None:
        return _port_not_checked(r, t)
    m = _PER_TARGET.match(metric)
    if m:
        if m.group(1) not in p.targets:
            return t("evidence.port_not_target", target=m.group(1), targets=", ".join(p.targets))
        return _port_sentences(p, t)[p.targets.index(m.group(1))]
    from . import portability as P  # noqa: PLC0415

    facts = P.target_facts(p)
    good = [x.target for x in facts if len(x.builds) == x.kernels]
    bad = [x.target for x in facts if len(x.builds) < x.kernels]
    text = t("evidence.port", ok=len(good), n=len(facts), count=len(facts), good=", ".join(good) or t("none"))
    return text + (t("list_semi") + t("evidence.port_bad", bad=", ".join(bad)) if bad else "")


_EVIDENCE: dict[str, Callable[[RunResult, Strings, Fmt], str]] = {
    "kernels": _ev_kernels, "ops": _ev_ops, "e2e": _ev_e2e, "profile": _ev_profile, "soak": _ev_soak,
    "upstream": _ev_upstream, "fork": _ev_fork, "baseline": _ev_baseline,
}
# What checklist.evaluate appends to an item's evidence (waivers, optional items).
_EVIDENCE_TAILS = [(kind, re.compile(rx)) for kind, rx in (
    ("doubt", r"cannot pass on this number: (?P<doubt>.*?)(?=; waive|$)"),
    ("optional", r"optional item, does not affect the verdict"),
    ("counts_failed", r"counts as failed under this checklist"),
    ("waived", r"waived by (?P<who>.+?) until (?P<date>\d{4}-\d{2}-\d{2}): (?P<reason>.*)"),
    ("waiver_expired", r"waiver by (?P<who>.+?) expired on (?P<date>\d{4}-\d{2}-\d{2})"),
)]


def _doubt(text: str, t: Strings) -> str:
    """checklist's "why this number cannot pass" in words: "flagged: OP (flag, flag); ..."
    for ops, "flag; flag" for the end-to-end number."""
    def flags(group: str) -> str:
        return t("list_sep").join(_flag(x.strip(), t) for x in group.split(", "))
    if text.startswith("flagged: "):
        ops = re.sub(r"\(([^()]*)\)", lambda m: f"({flags(m.group(1))})", text[len("flagged: "):])
        return t("evidence.doubt_ops", ops=ops)
    return t("list_semi").join(_flag(x, t) for x in text.split("; ") if x)


def _evidence(o: Outcome, result: RunResult, t: Strings, f: Fmt) -> str:
    """An item's evidence in the report's language, rebuilt from the run; the checklist's
    own English text where the metric is one this version does not know."""
    build = _EVIDENCE.get(o.metric.split(".")[0]) if o.metric in METRICS else None
    if o.metric in METRICS and o.metric.startswith("portability."):
        build = lambda r, t, f: _ev_portability(r, t, f, o.metric)  # noqa: E731 - it needs the target
    if build is None:
        return o.evidence
    parts = [build(result, t, f)]
    for kind, rx in _EVIDENCE_TAILS:
        m = rx.search(o.evidence or "")
        if m:
            kw = m.groupdict()
            if "doubt" in kw:
                kw["doubt"] = _doubt(kw["doubt"], t)
            parts.append(t(f"evidence.{kind}", **kw))
    return t("list_semi").join(p for p in parts if p)


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
            "status": o.status, "status_label": t.get(f"status.{o.status}", o.status),
            "evidence": _evidence(o, result, t, f), "rationale": o.rationale,
        })
    return rows


# ---------------------------------------------------------------- engineer sections


def _hot_ops(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    h = result.hot_ops
    if h is None or not h.ops:
        return None
    rows = [{"family": o.family, "time": f.ms(o.time_ms), "share": f.pct(o.share), "calls": f.num(o.calls),
             "shapes": ", ".join(o.shapes[:4]) + (" …" if len(o.shapes) > 4 else ""),
             "kernel": t("selected") if o.family in h.selected else (t("bool_yes") if o.has_kernel else t("bool_no"))}
            for o in h.ops]
    chart = charts.hot_ops([(o.family, o.share, o.family in h.selected) for o in h.ops[:15]],
                           xlabel=_ct("chart.share", t), rewritten=_ct("selected", t), kept=_ct("kept", t))
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


def _speed_class(s: float | None) -> str:
    return "none" if s is None else ("good" if s >= 1 else ("warn" if s >= 0.5 else "bad"))


def _ops(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    if not result.op_bench:
        return None
    _, which = op_rows(result)
    rows = []
    ordered = sorted(result.op_bench, key=lambda b: (b.source != "model", b.family, b.shape))
    for b in ordered:
        s = op_speedup(b)
        flags = _op_flags(b)
        tl_k, pt_k = getattr(b, "tilelang_kernel_ms", None), getattr(b, "torch_kernel_ms", None)
        cross = f"{f.ms(tl_k)} / {f.ms(pt_k)}" if _finite(tl_k) or _finite(pt_k) else "—"
        notes = [_flag(x, t) for x in flags]
        if getattr(b, "timer_note", ""):
            notes.append(t("text.timer_note", note=_notes(b.timer_note, t)))
        if b.error:
            notes.append(b.error)
        # Optional columns show "—" when absent: "not measured" in every cell would crowd
        # out the numbers that were measured.
        rows.append({"family": b.family, "shape": shape_str(b.shape), "dtype": b.dtype,
                     "standard": b.source != "model",
                     "vendor": f.ms(b.torch.median_ms), "tilelang": f.ms(b.tilelang.median_ms if b.tilelang else None),
                     "speedup": f.x(s), "ci": f.interval(b.ratio) or "—",
                     "rounds": b.ratio.rounds if b.ratio is not None and b.ratio.rounds else 0,
                     "cls": "none" if flags else _speed_class(s), "flagged": bool(flags),
                     "verified": f.yn(getattr(b, "verified", None)), "cross": cross,
                     "tflops": _num(b.tilelang_tflops) or "—", "gbps": _num(b.tilelang_gbps) or "—", "notes": notes})
    chart_rows = [(f"{b.family} {shape_str(b.shape)}" + ("" if b.source == "model" else " *"), op_speedup(b))
                  for b in ordered][:30]
    chart = charts.speedups(chart_rows, xlabel=_ct("chart.speedup", t), missing=_ct("not_measured", t))
    text = t("text.ops_rows", which=t("text.ops_model" if which == "model shapes" else "text.ops_standard"))
    return {"rows": rows, "chart": chart, "text": text,
            "flagged": t("text.ops_flagged") if any(r["flagged"] for r in rows) else ""}


def _tflops(b: OpBench, tm: Timing | None, given: float | None) -> float | None:
    if _finite(given) and given > 0:
        return given
    if tm is not None and _finite(tm.median_ms) and tm.median_ms > 0 and b.flops > 0:
        return b.flops / (tm.median_ms * 1e-3) / 1e12
    return None


def _roofline(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
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
            pct = given if _finite(given) else (x / attainable * 100 if x and attainable else None)
            return f" ({_num(pct, plain=True)}%)" if _finite(pct) else ""

        table.append({"n": n, "op": label + ("" if b.source == "model" else " *"), "dtype": b.dtype,
                      "intensity": f.num(intensity),
                      "tilelang": (_num(tl, plain=True) + of_roof(tl, b.tilelang_roof_pct)) if tl else f.na,
                      "vendor": (_num(vd, plain=True) + of_roof(vd, b.torch_roof_pct)) if vd else f.na,
                      "flagged": bool(_op_flags(b))})
    chart = charts.roofline(pts, peak_tflops=roof_tflops, peak_gbps=roof_gbps,
                            xlabel=_ct("chart.intensity", t), ylabel=_ct("chart.tflops", t),
                            vendor=_ct("kept", t), roof=_ct("chart.roof", t))
    if chart is None:
        return None
    text = (t("text.roofline_peaks", tflops=f.num(roof_tflops), gbps=f.num(roof_gbps))
            if roof_tflops and roof_gbps else t("text.roofline_no_peaks"))
    if hw.measured_tflops and hw.ceilings_note:
        text += f" ({hw.ceilings_note})"
    return {"chart": chart, "text": text, "table": table}


def _view_name(method: str, t: Strings) -> str:
    return t.get(f"views.{method}.name", method or t("not_measured"))


def _e2e(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
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
        kv.append((t("kv.launch", family=o.family), f"{f.us(o.tilelang_us)} / {f.us(o.torch_us)} ({shape_str(o.shape)})"))
    method = getattr(e, "method", "") or ""
    views = []
    for view in getattr(e, "views", ()) or ():
        views.append({"name": _view_name(view.method, t), "meaning": t.get(f"views.{view.method}.meaning", ""),
                      "used": view.method == method, "ref": f.ms(view.reference.median_ms if view.reference else None),
                      "swapped": f.ms(view.swapped.median_ms if view.swapped else None),
                      "ratio": f.x(view.ratio.value if view.ratio else None), "ci": f.interval(view.ratio),
                      "rounds": view.ratio.rounds if view.ratio is not None and view.ratio.rounds else 0,
                      "flagged": _timing_flags(view.reference, view.swapped), "note": _notes(view.note, t)})
    calls = []
    # The router's common fallback reasons, in words; any other reason shows as recorded.
    words = t.raw("fallbacks") if t.has("fallbacks") and isinstance(t.raw("fallbacks"), dict) else {}
    for c in getattr(e, "calls", ()) or ():
        fallback = dict(getattr(c, "fallback", {}) or {})
        notes = dict(getattr(c, "notes", {}) or {})
        calls.append({"family": c.family, "shape": c.shape or "—", "tilelang": f.num(c.tilelang),
                      "fallback": t("list_semi").join(f"{words.get(reason, reason)}: {_num(n)}"
                                                      for reason, n in fallback.items()) or "—",
                      "notes": t("list_semi").join(f"{k}: {_num(n)}" for k, n in notes.items()),
                      "profiled": f.ms(c.profiled_ms) if c.profiled_ms else "—",
                      "cls": "row-fail" if fallback and not c.tilelang else ""})
    tl_calls, fb_calls = getattr(e, "tilelang_calls", 0) or 0, getattr(e, "fallback_calls", 0) or 0
    coverage_text = t("text.coverage", coverage=f.pct(e.coverage), tilelang=f.num(tl_calls), fallback=f.num(fb_calls),
                      count=fb_calls) if (calls or tl_calls or fb_calls) else t("text.coverage_only", coverage=f.pct(e.coverage))
    tol = getattr(e, "tolerance", {}) or {}
    check = [(t("kv.outputs_match"), f.yn(e.outputs_match) if e.swapped else f.na),
             (t("kv.max_abs_err"), f.num(e.max_abs_err, 2)),
             (t("kv.rel_l2_err"), f.num(getattr(e, "rel_l2_err", None), 2)),
             (t("kv.rel_max_err"), f.num(getattr(e, "rel_max_err", None), 2))]
    if tol:
        check.append((t("kv.tolerance"), ", ".join(f"{k} {_num(v, 2) or v}" for k, v in tol.items())))
    used = (t("text.e2e_method", method=_view_name(method, t), meaning=t.get(f"views.{method}.meaning", ""))
            if method else "")
    return {"kv": kv, "error": t("text.e2e_error", error=e.error) if e.error else "", "views": views,
            "method": used, "calls": calls, "calls_notes": any(c["notes"] for c in calls),
            "coverage": coverage_text, "check": check, "flags": [_flag(x, t) for x in _e2e_flags(result)]}


def _soak(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    s = result.soak
    if s is None:
        return None
    timer = getattr(s, "timer", "") or "perf_counter"
    kv = [(t("kv.duration"), f"{f.num(s.seconds)} s"), (t("kv.iterations"), f.num(s.iterations)),
          (t("kv.timer"), t.get(f"timers.{timer}", timer)),
          (t("kv.drift"), f.pct(s.drift)), (t("kv.cv"), f.pct(s.cv)),
          (t("kv.host_cv"), f.pct(getattr(s, "host_cv", None))),
          (t("kv.memory"), f.mb(s.memory_growth_mb))]
    if s.reserved_growth_mb is not None:
        kv.append((t("kv.reserved"), f.mb(s.reserved_growth_mb)))
    if s.clocks_mhz:
        kv.append((t("kv.clocks"), f"{min(s.clocks_mhz):.0f}–{max(s.clocks_mhz):.0f} MHz"))
        kv.append((t("kv.throttle"), ", ".join(s.throttle_reasons) or t("none")))
    if s.notes:
        kv.append((t("kv.notes"), _notes("; ".join(s.notes), t)))
    chart = charts.soak(s.window_ms, seconds=s.seconds, xlabel=_ct("chart.soak_x", t), ylabel=_ct("chart.soak_y", t))
    return {"kv": kv, "chart": chart,
            "text": t("text.soak_summary", seconds=f.num(s.seconds), iterations=f.num(s.iterations),
                      windows=len(s.window_ms), timer=t.get(f"timers.{timer}", timer))}


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
        note = (u.note if u is not None else "") or result.stage_errors.get("upstream", "")
        return {"measured": False, "text": t("text.upstream_not_measured", note=_notes(note, t) if note else t("text.stage_not_run"))}
    d = u.details or {}
    kv = [(t("kv.last_commit"), f.num(u.days_since_last_commit)), (t("kv.commits_30d"), f.num(u.commits_30d)),
          (t("kv.commits_90d"), f.num(u.commits_90d)), (t("kv.commits_365d"), f.num(u.commits_365d)),
          (t("kv.authors_90d"), f.num(u.authors_90d)), (t("kv.latest_tag"), u.latest_tag or f.na),
          (t("kv.days_since_release"), f.num(u.days_since_release)), (t("kv.score"), f.num(u.maintenance_score))]
    for key, label in (("bus_factor", "kv.bus_factor"), ("merged_prs_90d", "kv.merged_prs_90d"),
                       ("median_release_interval_days", "kv.release_interval")):
        if _finite(d.get(key)):
            kv.append((t(label), f.num(d[key])))
    limited = d.get("limited")
    if isinstance(limited, dict) and limited:
        kv.append((t("kv.limited"), "; ".join(f"{k}: {v}" for k, v in limited.items())))
    fork_d = d.get("fork") if isinstance(d.get("fork"), dict) else {}
    fork = None
    if u.fork_behind is not None or u.fork_days_behind is not None or fork_d:
        fork = [(t("kv.fork_repo"), f"{fork_d.get('repo', '?')} ({fork_d.get('branch', '?')})")] if fork_d else []
        if fork_d and not fork_d.get("measured", True):
            fork.append((t("kv.fork_not_measured"), _notes(str(fork_d.get("reason", "")), t)))
        fork += [(t("kv.fork_behind"), f.num(u.fork_behind)), (t("kv.fork_ahead"), f.num(u.fork_ahead)),
                 (t("kv.fork_days_behind"), f.num(u.fork_days_behind))]
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
                                   xlabel=_ct("chart.weeks_ago", t) if not (labels and all(labels)) else "",
                                   ylabel=_ct("chart.commits", t), guide=guide)
    rels = [(_as_date(r.get("date")), str(r.get("tag", ""))) for r in _records(d.get("releases"), ("tag", "date"))]
    releases = charts.releases([(dd, tag) for dd, tag in rels if dd is not None], as_of=_as_date(u.as_of),
                               xlabel=_ct("chart.release_date", t), today_label=_ct("chart.as_of", t))
    commits = [{"sha": str(c.get("sha", ""))[:10], "date": _day(str(c.get("date", ""))),
                "author": str(c.get("author", "")), "subject": str(c.get("subject", ""))}
               for c in _records(d.get("recent_commits"), ("sha", "date", "author", "subject"))[:15]]
    authors = [{"name": str(a.get("name", "")), "commits": str(a.get("commits", ""))}
               for a in _records(d.get("top_authors_365d"), ("name", "commits"))[:10]]
    return {"measured": True, "kv": kv, "fork": fork, "weekly": weekly, "releases": releases,
            "commits": commits, "authors": authors, "note": _notes(u.note, t),
            "text": t("text.upstream_as_of", repo=u.repo or "?", head=(u.head or "?")[:12], as_of=u.as_of or "?")}


# Environment fields whose change can plausibly explain a slower measurement: the
# software and hardware under the kernels and the shape of the work. The upstream repo,
# the checklist, thresholds, soak length and output paths change what is reported, not
# how fast anything runs, so they are never offered as a cause.
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
    rows = [{"kind": t.get(f"kinds.{x.kind}", x.kind), "key": x.key, "ref": f.ms(x.reference_ms),
             "cand": f.ms(x.candidate_ms), "ratio": f.x(x.ratio), "threshold": f.pct(x.threshold),
             "status": t.get(f"change.{x.status}", x.status),
             "cls": {"regression": "bad", "improvement": "good"}.get(x.status, "none")} for x in shown]
    counts = {s: sum(x.status == s for x in c.changes) for s in order}
    summary = t("list_sep").join(t(f"counts.{s}", count=n, n=n) for s, n in counts.items() if n) or t("counts.nothing")
    env = [{"field": a, "before": b, "now": n, "cause": plausible_cause(a)} for a, b, n in c.environment_changes]
    causes = [e for e in env if e["cause"]]
    cause_text = ""
    if c.regressions:
        cause_text = (t("text.causes", causes=t("list_sep").join(f"{e['field']} {e['before'] or '-'} → {e['now'] or '-'}"
                                                                  for e in causes))
                      if causes else t("text.causes_none"))
    return {"present": True, "text": t("text.comparison_ref", reference=c.reference, candidate=c.candidate),
            "not_comparable": "" if c.comparable else t("text.not_comparable"),
            "summary": summary, "note": _notes(c.note, t, drop=_DROPPED_NOTES), "causes": cause_text, "rows": rows,
            "more": t("text.more_rows", count=len(rest) - room, n=len(rest) - room) if len(rest) > room else "",
            "env": env}


def _trend(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any] | None:
    if not result.trend:
        return None
    series: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for p in sorted(result.trend, key=lambda p: p.created):
        series[p.key].append((p.version, p.median_ms))
    chart = charts.trend(series, ylabel=_ct("chart.trend_y", t), xlabel=_ct("chart.version", t))
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
    overrides = resources.template_overrides()
    if overrides:  # a report that looks or reads differently says where that came from
        software.append((t("text.template_overrides"), ", ".join(str(p) for p in overrides)))
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


def _problems(result: RunResult, t: Strings, f: Fmt) -> list[tuple[str, str]]:
    """Stages that failed, plus failures inside a stage that finished (the swapped-in model
    that did not run, ops without a TileLang time): "every stage finished" only when none."""
    rows = sorted(result.stage_errors.items())
    e = result.e2e
    if e is not None and e.error and "e2e" not in result.stage_errors:
        rows.append(("e2e", e.error))
    for b in result.op_bench:
        if b.error and "bench" not in result.stage_errors:
            rows.append(("bench", f"{b.family} {shape_str(b.shape)}: {b.error}"))
    for k in result.tuned:
        if not k.ok and "tune" not in result.stage_errors:
            rows.append(("tune", t("text.tune_failed", family=k.family, shape=shape_str(k.shape))))
    return rows


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
        cands = [{"config": f.config(c.config), "status": t.get(f"cand.{c.status}", c.status),
                  "latency": f.ms(c.latency_ms), "compile": f.num(c.compile_s), "error": c.error, "phase": c.phase}
                 for c in [*ok[:8], *bad.values()]]
        # A kernel reused from the tuning cache was not searched in this run: its one
        # "candidate" is the cached config, untimed. Say so instead of an empty table.
        if k.cached:
            empty = t("text.cached_kernel")
        elif not cands:
            empty = t("text.no_candidates")
        else:
            empty = ""
        kernels.append({"family": k.family, "shape": shape_str(k.shape), "dtype": k.dtype, "target": k.target,
                        "config": f.config(k.config), "best": f.ms(ok[0].latency_ms) if ok else f.na,
                        "counts": ", ".join(f"{t.get(f'cand.{s}', s)} {n}" for s, n in sorted(counts.items())),
                        "tuning_s": f.num(k.tuning_s), "cached": f.yn(k.cached), "ok": k.ok,
                        "candidates": [] if empty else cands, "empty": empty,
                        "title": t("text.candidates_of", family=k.family, shape=shape_str(k.shape)),
                        "truncated": t("text.truncated", shown=len(cands), total=len(k.candidates))
                        if not empty and len(cands) < len(k.candidates) else ""})
    return {"kernels": kernels}


def _timing_policy(result: RunResult) -> list[tuple[str, str]]:
    timing = result.settings.get("timing") if isinstance(result.settings, dict) else None
    return list(_flatten("", timing)) if isinstance(timing, dict) else []


def _ct(key: str, t: Strings) -> str:
    """Chart text: translated where matplotlib has the glyphs, English otherwise, so a
    Chinese report on a machine without a CJK font gets readable charts and no warnings."""
    text = t(key)
    if text.isascii() or charts.cjk_font():
        return text
    return Strings("en")(key)


# ---------------------------------------------------------------- portability


def _port_not_checked(result: RunResult, t: Strings) -> str:
    """Why a run has no portability matrix, in one sentence."""
    err = result.stage_errors.get("portability")
    if err:
        return t("portability.failed", error=err)
    if isinstance(result.settings, dict) and result.settings.get("targets") == []:
        return t("portability.skipped")
    if not result.tuned and result.hot_ops is not None:
        return t("portability.no_kernels")
    return t("portability.not_checked")


def _port_text(text: str, t: Strings) -> str:
    return _notes(text, t, patterns=_PORT_PATTERNS)


def _short_target(name: str) -> str:
    """"AMD Instinct MI300X" -> "MI300X": the column heads; the footnotes give the full name."""
    return name.split(" ", 1)[1].replace("Instinct ", "") if " " in name else name


def _port_cell_reason(c: Any, t: Strings) -> str:
    """A cell that is not "lowers", in words: the limit it breaks, or the failure."""
    if c.status == "needs_retuning":
        return _port_text(c.reason, t)
    return t("portability.fails_to_lower", cls=t.get(f"portability.class.{c.failure_class}", c.failure_class),
             reason=_port_text(c.reason, t))


def _port_sentences(p: Any, t: Strings, ref: Callable[[Any], int] | None = None) -> list[str]:
    """One sentence per target, from portability.target_facts, in the report's language.
    With `ref` (the matrix's note number of a cell) the reasons are cited, not repeated."""
    from . import portability as P  # noqa: PLC0415

    out = []
    semi = t("list_semi")
    for fact in P.target_facts(p):
        n = fact.kernels
        text = t("portability.builds", count=n, b=len(fact.builds), n=n, name=fact.name)
        if fact.retune:
            items = semi.join(
                t("portability.retune_item", label=r.label, kind=t(f"portability.kind.{r.cell.config_kind}"),
                  reason=t("portability.see_note", n=ref(r.cell)) if ref else _port_cell_reason(r.cell, t))
                + (t("portability.fits_and_lowers", config=P.config_str(r.fix)) if r.fix and not ref else "")
                for r in fact.retune)
            text += semi + t("portability.retune", count=len(fact.retune), n=len(fact.retune), items=items)
        for fail in fact.failures:
            every = len(fail.labels) == n and n > 1
            cell = next((c for c in p.cells if c.target == fact.target and c.failure_class == fail.failure_class
                         and c.reason == fail.reason), None)
            text += semi + t("portability.fail", count=n if every else len(fail.labels),
                             who=t("portability.all_of_them") if every else t("list_sep").join(fail.labels),
                             cls=t.get(f"portability.class.{fail.failure_class}", fail.failure_class),
                             reason=t("portability.see_note", n=ref(cell)) if ref and cell is not None
                             else _port_text(fail.reason, t))
        if fact.notes:
            text += semi + t("portability.note", notes=semi.join(_port_text(x, t) for x in fact.notes))
        out.append(text + t("portability.end"))
    return out


def _port_page_one(p: Any, t: Strings) -> str:
    """One line for the manager: which targets build every rewritten kernel unchanged,
    and for the others how many build, how many only after re-tuning, and why not."""
    from . import portability as P  # noqa: PLC0415

    facts = P.target_facts(p)
    n = len(p.kernels)
    clean = [f for f in facts if len(f.as_is) == n]
    parts = []
    if clean:
        parts.append(t("portability.p1_clean", count=n, n=n,
                       targets=t("list_sep").join(_short_target(f.name) for f in clean)))
    for f in facts:
        if f in clean:
            continue
        text = t("portability.p1_target", b=len(f.builds), n=n, name=_short_target(f.name))
        extra = []
        if f.retune:
            extra.append(t("portability.p1_retune", count=len(f.retune), n=len(f.retune),
                           kernels=t("list_sep").join(r.label for r in f.retune)))
        classes = dict.fromkeys(x.failure_class for x in f.failures)
        extra += [t.get(f"portability.class.{c}", c) for c in classes]
        if extra:
            text += t("portability.p1_paren", what=t("list_semi").join(extra))
        parts.append(text)
    return t("portability.page_one", parts=t("list_semi").join(parts))


def _port_footnotes(p: Any, t: Strings) -> list[dict[str, str]]:
    """Per target: its limits and the public documents they come from. In another
    language the limits are rebuilt from the target table when it still says what the run
    recorded; otherwise the recorded English line is shown as it is."""
    from . import targets as T  # noqa: PLC0415

    out = []
    for key in p.targets:
        limits = p.target_limits.get(key, "")
        spec = T.TARGETS.get(key)
        if t.lang != "en" and spec is not None and spec.describe() == limits and spec.smem_per_block:
            amd = spec.vendor == "amd"
            limits = t("portability.limits", name=spec.name, arch=spec.arch,
                       block=f"{spec.smem_per_block // 1024} KB", sm=f"{spec.smem_per_sm // 1024} KB",
                       what=t("notes.word_lds" if amd else "notes.word_smem"),
                       unit=t("notes.word_workgroup" if amd else "notes.word_block"),
                       per=t("portability.cu" if amd else "portability.sm"), threads=spec.max_threads_per_block,
                       warp=spec.warp_size, lane=t("portability.wavefront" if amd else "portability.warp"),
                       count=spec.sm_count, cores=spec.matrix_cores)
        elif t.lang != "en" and spec is not None and spec.describe() == limits:
            limits = t("portability.limits_unpublished", name=spec.name, arch=spec.arch, cores=spec.matrix_cores)
        out.append({"key": key, "name": p.target_names.get(key, key), "limits": limits,
                    "source": p.target_sources.get(key, "")})
    return out


def _portability(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    """The matrix section: kernel x target, each cell lowers / needs re-tuning / fails
    with a numbered note giving the reason (and the config that fits), the per-target
    sentences, the targets' limits with their sources, and page one's line."""
    p = result.portability
    if p is None:
        return {"checked": False, "text": _port_not_checked(result, t), "page_one": ""}
    from . import portability as P  # noqa: PLC0415

    cells = {(P.kernel_label(c.family, c.shape, c.dtype), c.config_kind, c.target): c for c in p.cells}
    refs: dict[str, int] = {}  # note text -> its number; cells with the same reason share one

    def ref(text: str) -> int:
        return refs.setdefault(text, len(refs) + 1)

    def cell_note(c: Any) -> str:
        if c.status == "lowers":
            return _port_text(c.note, t)
        note = _port_cell_reason(c, t) if c.status == "fails" else _port_text(c.reason, t)
        return note + (t("portability.fits", config=P.config_str(c.fitting_config)) if c.fitting_config else "")

    rows = []
    for label in p.kernels:
        for kind in ("tuned", "default"):
            mine = [cells.get((label, kind, key)) for key in p.targets]
            if not any(mine):
                continue
            shown = []
            for c in mine:
                if c is None:
                    shown.append({"cls": "none", "text": "—", "detail": "", "ref": ""})
                    continue
                if c.status == "lowers":
                    shown.append({"cls": "lowers", "text": t("portability.status.lowers"), "detail": c.instruction,
                                  "ref": ref(cell_note(c)) if c.note else ""})
                    continue
                cls = "retune" if c.status == "needs_retuning" else "fails"
                shown.append({"cls": cls, "text": t(f"portability.status.{c.status}"),
                              "detail": t.get(f"portability.class.{c.failure_class}", c.failure_class)
                              if cls == "fails" else "", "ref": ref(cell_note(c))})
            tuned = next((c.config for c in mine if c is not None and c.config_kind == "tuned"), None)
            rows.append({"kernel": label, "kind": t(f"portability.kind.{kind}"),
                         "config": P.config_str(tuned) if tuned else "", "cells": shown})
    summary = _port_sentences(p, t, ref=lambda c: ref(cell_note(c)))  # before the notes are listed
    dtypes = sorted({c.dtype for c in p.cells})
    intro = t("portability.intro", tilelang=p.tilelang or "?", count=len(p.targets), n=len(p.targets),
              kernels=len(p.kernels), lowerings=f.num(p.lowerings), seconds=f.num(p.seconds))
    if result.model.dtype not in dtypes and dtypes:
        intro += " " + t("portability.dtype_note", dtype=", ".join(dtypes), run=result.model.dtype)
    return {"checked": True, "text": intro, "targets": [_short_target(p.target_names.get(k, k)) for k in p.targets],
            "rows": rows, "notes": [{"n": n, "text": text} for text, n in refs.items()],
            "summary": summary, "footnotes": _port_footnotes(p, t),
            "page_one": _port_page_one(p, t)}


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
        ("portability", _portability), ("upstream", _upstream), ("comparison", _comparison), ("trend", _trend),
        ("environment", _environment), ("tuning", _tuning), ("stage_errors", _problems))]
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
    })
    return ctx


def _loader() -> jinja2.BaseLoader:
    """A team's folders first, then the shipped one; "shipped/report.html.j2" always names
    the shipped template, so a team's template can extend or include it."""
    return jinja2.ChoiceLoader([
        *(jinja2.FileSystemLoader(str(d)) for d in resources.template_dirs()),
        jinja2.PrefixLoader({"shipped": jinja2.FileSystemLoader(str(TEMPLATES))}),
    ])


def _environment_jinja() -> jinja2.Environment:
    # Autoescape everything: names, subjects and paths in the result are not ours.
    return jinja2.Environment(loader=_loader(), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _css() -> str:
    """The shipped stylesheet, then each team's report.css after it: later rules win, so a
    team restyles with a few rules instead of a copy of the whole file."""
    shipped = TEMPLATES / "report.css"
    parts = [shipped.read_text(encoding="utf-8")]
    for folder in reversed(resources.template_dirs()):
        path = folder / "report.css"
        if folder != TEMPLATES and path.is_file():
            parts.append(f"/* {path.name} from {folder} */\n" + path.read_text(encoding="utf-8"))
    return "\n".join(parts)


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
        css = _css()
        template = _environment_jinja().get_template("report.html.j2")
    except (OSError, jinja2.TemplateNotFound) as exc:
        raise ReportError(f"report template missing ({exc}); reinstall the package or restore templates/") from exc
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


@dataclass(frozen=True)
class Requirement:
    """Something WeasyPrint needs for a PDF whose text is right, and how to get it."""

    what: str  # "pango"
    packages: tuple[str, ...]  # Debian/Ubuntu packages that provide it
    why: str  # finishes "install X so ..."
    pip: bool = False  # a Python package, not a system one


# WeasyPrint dlopens these by name (weasyprint/text/ffi.py); the Debian/Ubuntu package of each.
_LIBS = (("gobject-2.0", "libglib2.0-0"), ("pango-1.0", "libpango-1.0-0"), ("harfbuzz", "libharfbuzz0b"),
         ("fontconfig", "libfontconfig1"), ("pangoft2-1.0", "libpangoft2-1.0-0"))
# Chinese fonts on disk, for machines without fc-list (fontconfig's tools are a separate package).
_CJK_FILES = re.compile(r"(?i)(cjk|wqy|wenquanyi|droidsansfallback|sourcehan|notosanssc|notoserifsc|simhei|simsun|"
                        r"msyh|pingfang|hiragino|uming|ukai)")


def _import_weasyprint() -> Any:
    import weasyprint  # noqa: PLC0415 - lazy: GPU machines often lack pango
    return weasyprint


def has_cjk_font() -> bool:
    """Is a font with Chinese glyphs installed where fontconfig (and so pango) finds it?"""
    try:
        out = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True, timeout=20)
        if out.returncode == 0:
            return bool(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass  # no fc-list: look at the font folders fontconfig reads by default
    roots = ["/usr/share/fonts", "/usr/local/share/fonts", os.path.expanduser("~/.fonts"),
             os.path.expanduser("~/.local/share/fonts"), "/Library/Fonts", "/System/Library/Fonts"]
    return any(_CJK_FILES.search(os.path.basename(p)) for root in roots
               for p in glob.glob(os.path.join(root, "**", "*.tt[fc]"), recursive=True) + glob.glob(
                   os.path.join(root, "**", "*.otf"), recursive=True))


def pdf_missing(lang: str = "en") -> list[Requirement]:
    """What this machine lacks for a PDF whose text can be read and copied; [] when nothing.

    Checked in WeasyPrint's own terms where it can be: the module imports (pango and its
    companions load), it loaded HarfBuzz's subsetter (else fonts are embedded without their
    text mapping), and for Chinese fontconfig knows a font with Chinese glyphs.
    """
    missing: list[Requirement] = []
    try:
        _import_weasyprint()
    except ImportError:
        return [Requirement("WeasyPrint", ("weasyprint",), "the report can be laid out as a PDF", pip=True)]
    except OSError as exc:  # a shared library WeasyPrint dlopens is not installed
        packages = tuple(pkg for lib, pkg in _LIBS if ctypes.util.find_library(lib) is None) or \
            ("libpango-1.0-0", "libpangoft2-1.0-0")
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return [Requirement(f"pango ({first})", packages, "WeasyPrint can lay out text")]
    from weasyprint.text import ffi  # noqa: PLC0415 - only once the import above worked
    subset = getattr(ffi, "harfbuzz_subset", None)
    try:
        new_enough = bool(ffi.harfbuzz.hb_version_atleast(4, 1, 0))
    except AttributeError:  # an older WeasyPrint without the check: trust the library lookup
        new_enough = True
    if subset is None or not new_enough:
        missing.append(Requirement("HarfBuzz subsetting", ("libharfbuzz-subset0",), "its text can be copied"))
    if lang == "zh" and not has_cjk_font():
        missing.append(Requirement("a CJK font", ("fonts-noto-cjk",), "Chinese text shows instead of boxes"))
    return missing


def missing_note(missing: list[Requirement], html: Path | None = None, result: RunResult | None = None) -> str:
    """One line: what to install, why, and where the HTML is."""
    sep = "; "
    pip = [r for r in missing if r.pip]
    apt = [r for r in missing if not r.pip]
    parts = []
    if apt:
        pkgs = " ".join(dict.fromkeys(p for r in apt for p in r.packages))
        parts.append(" and ".join(f"{' '.join(r.packages)} so {r.why}" for r in apt) + f" (apt-get install {pkgs})")
    if pip:
        parts.append(" and ".join(f"{' '.join(r.packages)} so {r.why}" for r in pip)
                     + f" (pip install {' '.join(p for r in pip for p in r.packages)})")
    text = "PDF not written: install " + " and ".join(parts)
    if html is not None:
        text += f"{sep}the HTML is at {html}"
    b = result.baseline if result is not None else None
    if b is not None:
        text += f"{sep}or render the PDF on a machine that has them: `evaluate report --baseline {b.model}/{b.platform}/{b.version}`"
    return text


def render(result: RunResult, out_dir: Path, *, lang: str = "en", pdf: bool = True) -> ReportFiles:
    """Write report.html (always) and report.pdf (when asked and this machine can write
    one whose text is right; otherwise `pdf_note` says in one line what to install)."""
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
    missing = pdf_missing(lang)
    if missing:
        return ReportFiles(html=html_path, pdf=None, pdf_note=missing_note(missing, html_path, result))
    weasyprint = _import_weasyprint()
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
