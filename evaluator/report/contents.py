"""Everything the template shows, already formatted: one RunResult in, one dict out.

In: a RunResult and a language. Out: the template's context: each section's value
(one entry per builder in sections/), the page's metadata (title, model,
precision, platform, date, run and baseline ids, the running header) and `t`, the
language's `Strings`, for the template's own fixed words. The template only lays out.
"""

from __future__ import annotations

from typing import Any

from ..results import RunResult
from .sections.comparison import _comparison, _trend
from .sections.e2e import _e2e, _soak
from .sections.environment import _environment, _problems, _timing_policy
from .sections.evidence import _checklist_rows
from .sections.kernels import _hot_ops, _ops, _roofline, _tuning, _verify
from .sections.page_one import _headlines, _summary
from .sections.portability import _portability
from .sections.upstream import _upstream
from .strings import Fmt, Strings, _day


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
        "timing": _timing_policy(result, f), "method_steps": t.raw("method.steps"),
    })
    return ctx
