"""Portability: whether the rewritten kernels build for other accelerators (lowered, not run).

In: a RunResult's portability (evaluator/portability/'s matrix: a cell per kernel, config kind
and target; the targets' limits and their sources) and a language's `Strings`/`Fmt`.
Out: the matrix section (cells that lower, need re-tuning or fail, each reason once as a
numbered note with the config that fits), one sentence per target, the targets'
footnotes, and page one's line; or one sentence saying why nothing was checked.

evaluator.portability is imported inside the functions, as before the split: it loads
the kernel registry, which a report rendered from a stored baseline does not need.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ...results import RunResult
from ..notes import PORT_PATTERNS, notes_in_words, word_in_words
from ..strings import Fmt, Strings


def port_not_checked(result: RunResult, t: Strings) -> str:
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
    return notes_in_words(text, t, patterns=PORT_PATTERNS)


def _short_target(name: str) -> str:
    """ "AMD Instinct MI300X" -> "MI300X": the column heads; the footnotes give the full name."""
    return name.split(" ", 1)[1].replace("Instinct ", "") if " " in name else name


def _port_cell_reason(c: Any, t: Strings) -> str:
    """A cell that is not "lowers", in words: the limit it breaks, or the failure."""
    if c.status == "needs_retuning":
        return _port_text(c.reason, t)
    return t(
        "portability.fails_to_lower",
        cls=t.get(f"portability.class.{c.failure_class}", c.failure_class),
        reason=_port_text(c.reason, t),
    )


def port_sentences(p: Any, t: Strings, ref: Callable[[Any], int] | None = None) -> list[str]:
    """One sentence per target, from portability.target_facts, in the report's language.
    With `ref` (the matrix's note number of a cell) the reasons are cited, not repeated."""
    from ... import portability as P  # noqa: PLC0415

    out = []
    semi = t("list_semi")
    for fact in P.target_facts(p):
        n = fact.kernels
        text = t("portability.builds", count=n, b=len(fact.builds), n=n, name=fact.name)
        if fact.retune:
            items = semi.join(
                t(
                    "portability.retune_item",
                    label=r.label,
                    kind=t(f"portability.kind.{r.cell.config_kind}"),
                    reason=t("portability.see_note", n=ref(r.cell)) if ref else _port_cell_reason(r.cell, t),
                )
                + (t("portability.fits_and_lowers", config=P.config_str(r.fix)) if r.fix and not ref else "")
                for r in fact.retune
            )
            text += semi + t("portability.retune", count=len(fact.retune), n=len(fact.retune), items=items)
        for fail in fact.failures:
            every = len(fail.labels) == n and n > 1
            cell = next(
                (
                    c
                    for c in p.cells
                    if c.target == fact.target and c.failure_class == fail.failure_class and c.reason == fail.reason
                ),
                None,
            )
            text += semi + t(
                "portability.fail",
                count=n if every else len(fail.labels),
                who=t("portability.all_of_them") if every else t("list_sep").join(fail.labels),
                cls=t.get(f"portability.class.{fail.failure_class}", fail.failure_class),
                reason=t("portability.see_note", n=ref(cell))
                if ref and cell is not None
                else _port_text(fail.reason, t),
            )
        if fact.notes:
            text += semi + t("portability.note", notes=semi.join(_port_text(x, t) for x in fact.notes))
        out.append(text + t("portability.end"))
    return out


def _port_page_one(p: Any, t: Strings) -> str:
    """One line for the manager: which targets build every rewritten kernel unchanged,
    and for the others how many build, how many only after re-tuning, and why not."""
    from ... import portability as P  # noqa: PLC0415

    facts = P.target_facts(p)
    n = len(p.kernels)
    clean = [f for f in facts if len(f.as_is) == n]
    parts = []
    if clean:
        parts.append(
            t("portability.p1_clean", count=n, n=n, targets=t("list_sep").join(_short_target(f.name) for f in clean))
        )
    for f in facts:
        if f in clean:
            continue
        text = t("portability.p1_target", b=len(f.builds), n=n, name=_short_target(f.name))
        extra = []
        if f.retune:
            extra.append(
                t(
                    "portability.p1_retune",
                    count=len(f.retune),
                    n=len(f.retune),
                    kernels=t("list_sep").join(r.label for r in f.retune),
                )
            )
        classes = dict.fromkeys(x.failure_class for x in f.failures)
        extra += [t.get(f"portability.class.{c}", c) for c in classes]
        if extra:
            text += t("portability.p1_paren", what=t("list_semi").join(extra))
        parts.append(text)
    return t("portability.page_one", parts=t("list_semi").join(parts))


# The line targets.TargetSpec.describe() writes, for targets with published launch
# limits and for those without; a recorded line in another shape is shown as written.
_LIMITS = re.compile(
    r"(?P<name>.+?) \((?P<arch>[^()]+)\): (?P<block>\d+ KB) (?P<what>shared memory|LDS) per "
    r"(?P<unit>block|workgroup), (?P<sm>\d+ KB) per (?P<per>SM|CU), (?P<threads>\d+) threads per "
    r"block, (?P<lane>warp|wavefront) (?P<warp>\d+), (?P<count>\d+) (?:SMs|CUs); (?P<cores>.+)"
)
_LIMITS_UNPUBLISHED = re.compile(
    r"(?P<name>.+?) \((?P<arch>[^()]+)\): launch limits not in the public sources; "
    r"(?P<cores>.+)"
)


def _limits_words(limits: str, t: Strings) -> str:
    """A target's recorded limits line in the report's language, rebuilt from its numbers
    (this machine's GPU included); as recorded where the line has another shape."""
    m = _LIMITS.fullmatch(limits)
    if m:
        amd = m["per"] == "CU"
        return t(
            "portability.limits",
            name=m["name"],
            arch=m["arch"],
            block=m["block"],
            sm=m["sm"],
            what=word_in_words(m["what"], t),
            unit=word_in_words(m["unit"], t),
            per=t("portability.cu" if amd else "portability.sm"),
            threads=m["threads"],
            warp=m["warp"],
            lane=t("portability.wavefront" if amd else "portability.warp"),
            count=m["count"],
            cores=word_in_words(m["cores"], t),
        )
    m = _LIMITS_UNPUBLISHED.fullmatch(limits)
    if m:
        return t("portability.limits_unpublished", name=m["name"], arch=m["arch"], cores=word_in_words(m["cores"], t))
    return limits


def _source_words(key: str, source: str, t: Strings) -> str:
    """Where a target's limits come from, in the report's language where the strings carry
    this exact English line (portability.sources.<key>); document titles stay as published."""
    english = Strings("en")
    if english.has(f"portability.sources.{key}") and english(f"portability.sources.{key}") == source:
        return t(f"portability.sources.{key}")
    return source


def _port_footnotes(p: Any, t: Strings) -> list[dict[str, str]]:
    """Per target: its limits and the public documents they come from, in the report's
    language where the recorded English lines have the shape this version writes."""
    out = []
    for key in p.targets:
        limits = p.target_limits.get(key, "")
        source = p.target_sources.get(key, "")
        if t.lang != "en":
            limits, source = _limits_words(limits, t), _source_words(key, source, t)
        out.append({"key": key, "name": p.target_names.get(key, key), "limits": limits, "source": source})
    return out


def portability_section(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    """The matrix section: kernel x target, each cell lowers / needs re-tuning / fails
    with a numbered note giving the reason (and the config that fits), the per-target
    sentences, the targets' limits with their sources, and page one's line."""
    p = result.portability
    if p is None:
        return {"checked": False, "text": port_not_checked(result, t), "page_one": ""}
    from ... import portability as P  # noqa: PLC0415

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
                    shown.append(
                        {
                            "cls": "lowers",
                            "text": t("portability.status.lowers"),
                            "detail": c.instruction,
                            "ref": ref(cell_note(c)) if c.note else "",
                        }
                    )
                    continue
                cls = "retune" if c.status == "needs_retuning" else "fails"
                shown.append(
                    {
                        "cls": cls,
                        "text": t(f"portability.status.{c.status}"),
                        "detail": t.get(f"portability.class.{c.failure_class}", c.failure_class)
                        if cls == "fails"
                        else "",
                        "ref": ref(cell_note(c)),
                    }
                )
            tuned = next((c.config for c in mine if c is not None and c.config_kind == "tuned"), None)
            rows.append(
                {
                    "kernel": label,
                    "kind": t(f"portability.kind.{kind}"),
                    "config": P.config_str(tuned) if tuned else "",
                    "cells": shown,
                }
            )
    summary = port_sentences(p, t, ref=lambda c: ref(cell_note(c)))  # before the notes are listed
    dtypes = sorted({c.dtype for c in p.cells})
    intro = t(
        "portability.intro",
        tilelang=p.tilelang or "?",
        count=len(p.targets),
        n=len(p.targets),
        kernels=len(p.kernels),
        lowerings=f.num(p.lowerings),
        seconds=f.num(p.seconds),
    )
    if result.model.dtype not in dtypes and dtypes:
        intro += " " + t("portability.dtype_note", dtype=", ".join(dtypes), run=result.model.dtype)
    return {
        "checked": True,
        "text": intro,
        "targets": [_short_target(p.target_names.get(k, k)) for k in p.targets],
        "rows": rows,
        "notes": [{"n": n, "text": text} for text, n in refs.items()],
        "summary": summary,
        "footnotes": _port_footnotes(p, t),
        "page_one": _port_page_one(p, t),
    }
