"""The rows the command line prints for `baseline show`, `baseline diff` and `compare`.

In: one `RunResult` (usually loaded from the store) or one `Comparison`. Out: plain tuples
of strings, formatted here once so the CLI only lays them out: key/value pairs for
`baseline show`, one row per change (columns COMPARISON_COLUMNS) for `baseline diff` and
`compare`, and the environment fields that differ (`baseline list` prints BaselineRefs as
they are). No store, no git.
"""

from __future__ import annotations

import json
import math

from ..results import Comparison, RunResult
from .compare import op_key

COMPARISON_COLUMNS = ("kind", "key", "reference ms", "candidate ms", "ratio", "threshold", "status")


def _fmt(value: float | None, spec: str = ".4g") -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, spec)


def show_rows(result: RunResult) -> list[tuple[str, str]]:
    """Key/value pairs describing one baseline, for `evaluate baseline show`."""
    env, hw, m = result.environment, result.environment.hardware, result.model
    rows: list[tuple[str, str]] = []
    if result.baseline:
        rows += [
            ("id", result.baseline.path),
            ("commit", result.baseline.commit[:12]),
            ("tag", result.baseline.tag or "(missing)"),
        ]
    rows += [
        ("run", result.run_id),
        ("created", result.created),
        ("schema", str(result.schema_version)),
        ("model", f"{m.name} ({m.source}, batch {m.batch_size}, seq {m.seq_len or '-'}, {m.dtype})"),
        ("model hash", m.spec_hash or "-"),
        ("platform", hw.platform),
        ("device", f"{hw.name} ({hw.device}, target {hw.target})"),
        ("driver", hw.driver or "-"),
        ("cuda", hw.cuda or "-"),
        ("torch", env.torch),
        ("tilelang", env.tilelang),
        ("evaluator", env.evaluator),
        ("python", env.python),
        ("os", env.os),
        ("cpu", env.cpu),
        *sorted((getattr(env, "libraries", None) or {}).items()),
        ("timing", json.dumps((result.settings or {}).get("timing"), sort_keys=True)),
        ("verdict", result.verdict.decision if result.verdict else "-"),
        ("families", ", ".join(result.families) or "-"),
    ]
    for b in result.op_bench:
        tl = b.tilelang.median_ms if b.tilelang else None
        rows.append(
            (
                f"op {op_key(b)}",
                f"TileLang {_fmt(tl)} ms, torch {_fmt(b.torch.median_ms)} ms, "
                f"speedup {_fmt(b.speedup, '.2f')}x" + (f" ({b.error})" if b.error else ""),
            )
        )
    if result.e2e:
        e = result.e2e
        rows.append(
            (
                "end-to-end",
                f"torch {_fmt(e.reference.median_ms)} ms, TileLang "
                f"{_fmt(e.swapped.median_ms if e.swapped else None)} ms, speedup "
                f"{_fmt(e.speedup, '.2f')}x, outputs match: {e.outputs_match}",
            )
        )
    if result.soak:
        rows.append(
            (
                "soak",
                f"{result.soak.seconds:g} s, drift {result.soak.drift:+.1%}, "
                f"memory growth {result.soak.memory_growth_mb:g} MB",
            )
        )
    if result.upstream:
        u = result.upstream
        rows.append(
            (
                "upstream",
                f"{u.repo} @ {u.head[:12]}, score {_fmt(u.maintenance_score, '.1f')}"
                if u.measured
                else f"not measured ({u.note})",
            )
        )
    rows += [(f"error {stage}", msg) for stage, msg in result.stage_errors.items()]
    return rows


def comparison_rows(c: Comparison) -> list[tuple[str, str, str, str, str, str, str]]:
    """One row per change, columns as COMPARISON_COLUMNS, for `baseline diff` and `compare`."""
    # In a comparison that is not comparable (different timing policies) a status is a hint only.
    return [
        (
            ch.kind,
            ch.key,
            _fmt(ch.reference_ms),
            _fmt(ch.candidate_ms),
            _fmt(ch.ratio, ".3f"),
            f"±{ch.threshold:.1%}",
            ch.status if c.comparable or ch.status in ("new", "gone") else f"{ch.status} (not comparable)",
        )
        for ch in c.changes
    ]


def environment_rows(c: Comparison) -> list[tuple[str, str, str]]:
    """(field, reference, candidate) for every environment field that differs."""
    return [(f, a or "-", b or "-") for f, a, b in c.environment_changes]
