"""Environment and method: where and how the run measured, and what went wrong.

In: a RunResult's environment, model, settings, baseline, stage_errors and the failures
inside finished stages, and a language's `Strings`/`Fmt`. Out: the environment
section's software, hardware, model and settings rows (with the team template folders
in use, so a report that looks different says why), the stage problems in the appendix
(empty only when every stage that ran finished), and the timing policy rows of the
method section.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from ... import resources
from ...results import RunResult, shape_str
from ..notes import mapped
from ..strings import Fmt, Strings


def _value(value: Any, f: Fmt) -> str:
    """A setting as people read it: "—" for unset (None, empty), lists as "a100, h100",
    yes/no for switches, numbers as numbers."""
    if value is None or value == "" or value == [] or value == {}:
        return "—"
    if isinstance(value, bool):
        return f.yn(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(_value(v, f) for v in value)
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, default=str)


def _key(name: str, t: Strings) -> str:
    """A field's name in the report's language ("batch_size" -> "批大小"); dotted names
    part by part; a name the strings do not know stays as it is."""
    return t("key_sep").join(mapped("keys", part, t) for part in name.split("."))


def _flatten(prefix: str, value: Any, f: Fmt) -> Iterable[tuple[str, str]]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _flatten(f"{prefix}.{k}" if prefix else str(k), v, f)
    else:
        yield prefix, _value(value, f)


def _rows(pairs: Iterable[tuple[str, str]], t: Strings) -> list[tuple[str, str]]:
    return [(_key(k, t), v) for k, v in pairs]


def environment_section(result: RunResult, t: Strings, f: Fmt) -> dict[str, Any]:
    env, hw, m = result.environment, result.environment.hardware, result.model
    software = _rows(
        [
            ("evaluator", env.evaluator),
            ("python", env.python),
            ("os", env.os),
            ("cpu", env.cpu),
            ("torch", env.torch),
            ("tilelang", env.tilelang),
        ],
        t,
    )
    software += sorted((getattr(env, "libraries", None) or {}).items())  # package names, as pip spells them
    overrides = resources.template_overrides()
    if overrides:  # a report that looks or reads differently says where that came from
        software.append((t("text.template_overrides"), ", ".join(str(p) for p in overrides)))
    hardware = [
        ("name", hw.name),
        ("target", hw.target),
        ("arch", hw.arch or "—"),
        ("device", hw.device),
        ("platform", hw.platform),
        ("cores", str(hw.cores)),
        ("memory_gb", f.num(hw.memory_gb)),
        ("compute_capability", hw.compute_capability or "—"),
        ("driver", hw.driver or "—"),
        ("cuda", hw.cuda or "—"),
        ("smem_per_block", str(hw.smem_per_block)),
        ("peak_tflops", f.num(hw.peak_tflops)),
        ("peak_gbps", f.num(hw.peak_gbps)),
        ("peak_source", hw.peak_source or (t("text.no_published_peak") if hw.measured_tflops else "—")),
        ("measured_tflops", f.num(hw.measured_tflops)),
        ("measured_gbps", f.num(hw.measured_gbps)),
    ]
    model = [
        ("name", m.name),
        ("source", m.source),
        ("batch_size", str(m.batch_size)),
        ("seq_len", "—" if m.seq_len is None else str(m.seq_len)),
        ("dtype", m.dtype),
        ("layout", m.layout),
        ("parameters", f"{m.parameters:,}"),
        ("spec_hash", m.spec_hash or "—"),
    ]
    if result.baseline is not None:
        b = result.baseline
        model.append(("baseline", f"{b.model}/{b.platform}/{b.version}" + (f" ({b.commit[:10]})" if b.commit else "")))
    settings = list(_flatten("", result.settings, f))
    return {
        "software": software,
        "hardware": _rows(hardware, t),
        "model": _rows(model, t),
        "settings": _rows(settings, t),
    }


def problems_section(result: RunResult, t: Strings, f: Fmt) -> list[tuple[str, str]]:
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


def timing_policy(result: RunResult, f: Fmt) -> list[tuple[str, str]]:
    timing = result.settings.get("timing") if isinstance(result.settings, dict) else None
    return _rows(_flatten("", timing, f), f.t) if isinstance(timing, dict) else []
