"""Everything the template shows, already formatted: one RunResult in, one dict out.

In: a RunResult and a language. Out: the template's context: each section's value
(one entry per builder in sections/), the page's metadata (title, model,
precision, platform, date, run and baseline ids, the running header) and `t`, the
language's `Strings`, for the template's own fixed words. The template only lays out.
"""

from __future__ import annotations

from typing import Any

from ..results import RunResult
from .sections.comparison import comparison_section, trend_section
from .sections.e2e import e2e_section, soak_section
from .sections.environment import environment_section, problems_section, timing_policy
from .sections.evidence import checklist_rows
from .sections.kernels import hot_ops_section, ops_section, roofline, tuning_section, verify_section
from .sections.page_one import headlines_section, summary_section
from .sections.portability import portability_section
from .sections.upstream import upstream_section
from .strings import Fmt, Strings, day


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
    if m.layout == "channels-last":
        precision += ", " + t("meta.channels_last")
    checks = [
        (name, fn)
        for name, fn in (
            ("summary", summary_section),
            ("headlines", headlines_section),
            ("checklist", checklist_rows),
            ("hot_ops", hot_ops_section),
            ("verify", verify_section),
            ("ops", ops_section),
            ("roofline", roofline),
            ("e2e", e2e_section),
            ("soak", soak_section),
            ("portability", portability_section),
            ("upstream", upstream_section),
            ("comparison", comparison_section),
            ("trend", trend_section),
            ("environment", environment_section),
            ("tuning", tuning_section),
            ("stage_errors", problems_section),
        )
    ]
    ctx: dict[str, Any] = {name: fn(result, t, f) for name, fn in checks}
    baseline = result.baseline
    ctx.update(
        {
            "t": t,
            "lang": lang,
            "html_lang": t("lang_tag"),
            "na": f.na,
            "title": t("title", model=m.name),
            "model": m.name,
            "precision": precision,
            "platform": _platform(result),
            "date": day(result.created),
            "run_id": result.run_id,
            "checklist_name": result.verdict.checklist if result.verdict else t("none"),
            "baseline_id": f"{baseline.model}/{baseline.platform}/{baseline.version}" if baseline else "",
            "header": f"{m.name} · {result.environment.hardware.name} · {day(result.created)}",
            "timing": timing_policy(result, f),
            "method_steps": t.raw("method.steps"),
        }
    )
    return ctx
