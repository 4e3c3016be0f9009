"""The upgrade rehearsal: the current TileLang against a candidate, kernel by kernel.

In: an `UpgradeResult` (evaluator/upgrade/: each kernel built, verified and timed under
both toolchains, the verdict) and a language's `Strings`/`Fmt`. Out: everything
upgrade.html shows, already formatted: the verdict banner with the reasons in the
report's language, the CPU caveat where the rehearsal ran on a CPU (its timings are for
correctness only), the two toolchains, one row per kernel (each side's build,
verification and time, the speed ratio candidate/current with its interval, PyTorch's
control ratio, the status, why), how the sides were timed (in the page's words; the
result's `placement` sentence is what upgrade.json and the baselines carry), the verdict's rules and the pair of
baselines. Reads the result only.
"""

from __future__ import annotations

from typing import Any

from ...results import UpgradeKernel, UpgradeResult, UpgradeSide, shape_str
from ..strings import Fmt, Strings, day

BANNER = {"SAFE": "go", "REGRESSIONS": "conditional", "BROKEN": "nogo", "INCONCLUSIVE": "inconclusive"}
# The kernel statuses that decide a verdict other than SAFE, in the order the reasons list them.
_REASONS = ("broken", "wrong", "slower", "not_compared")


def _name(k: UpgradeKernel) -> str:
    return f"{k.family} {shape_str(k.shape)}"


def _side(s: UpgradeSide, t: Strings, f: Fmt) -> dict[str, Any]:
    return {
        "state": t.get(f"upgrade.side.{s.status}", s.status),
        "ok": s.verified,
        "error": s.error,
        "time": f.ms(s.tilelang.median_ms) if s.tilelang else "",
        "torch": f.ms(s.torch.median_ms) if s.torch else "",
        "build": f.secs(s.build_s) if s.build_s is not None else "",
    }


def _reasons(r: UpgradeResult, t: Strings, f: Fmt) -> list[str]:
    if r.candidate.error:
        return [t("upgrade.reason.not_started", error=r.candidate.error)]
    out = []
    for status in _REASONS:
        for k in r.kernels:
            if k.status != status:
                continue
            if status == "slower":
                out.append(
                    t(
                        "upgrade.reason.slower",
                        kernel=_name(k),
                        ratio=f.x_ci(k.speed.value, k.speed),
                        tolerance=f.pct(k.tolerance, 0),
                    )
                )
            else:
                out.append(t(f"upgrade.reason.{status}", kernel=_name(k), error=k.candidate.error or k.note))
    if not out and r.verdict.decision == "INCONCLUSIVE":
        out.append(t("upgrade.reason.nothing" if not r.kernels else "upgrade.reason.all_current_fail"))
    return out


def _note(k: UpgradeKernel, t: Strings, f: Fmt) -> str:
    """Why the kernel's outcome, in the page's language where the outcome is a timing."""
    if k.status in ("same", "faster", "slower") and k.tolerance is not None:
        text = t(f"upgrade.note.{k.status}", tolerance=f.pct(k.tolerance, 0))
        return text + (t("upgrade.note.unstable") if "unstable timing" in k.note else "")
    return k.note  # an error's first line: the tool's own words


def upgrade_section(r: UpgradeResult, t: Strings, f: Fmt) -> dict[str, Any]:
    d = r.verdict.decision
    compared = [k for k in r.kernels if k.status in ("same", "faster", "slower")]
    slower = sum(1 for k in r.kernels if k.status == "slower")
    failing = sum(1 for k in r.kernels if k.status in ("broken", "wrong"))
    toolchains = [
        {
            "role": t(f"upgrade.role.{tc.role}"),
            "python": tc.python,
            "version": tc.python_version or f.na,
            "torch": tc.torch or f.na,
            "tilelang": tc.tilelang or f.na,
            "state": tc.error or t("upgrade.started"),
            "ok": not tc.error,
        }
        for tc in (r.current, r.candidate)
    ]
    rows = [
        {
            "kernel": _name(k),
            "dtype": k.dtype,
            "config": f.config(k.config),
            "source": t.get(f"upgrade.source.{k.source}", k.source),
            "current": _side(k.current, t, f),
            "candidate": _side(k.candidate, t, f),
            "speed": f.x(k.speed.value) if k.speed else "",
            "speed_ci": f.interval(k.speed) if k.speed else "",
            "control": f.x_ci(k.control.value, k.control) if k.control else "",
            "status": t.get(f"upgrade.status.{k.status}", k.status),
            "css": k.status,
            "note": _note(k, t, f),
        }
        for k in r.kernels
    ]
    return {
        "key": d,
        "label": t.get(f"upgrade.decision.{d}", d),
        "css": BANNER.get(d, "none"),
        "sentence": t(f"upgrade.summary.{d}", count=slower if d == "REGRESSIONS" else failing or len(compared)),
        "meaning": t(f"upgrade.meaning.{d}"),
        "reasons": _reasons(r, t, f),
        "cpu_caveat": t("upgrade.cpu_caveat") if (r.hardware.device or "").lower() == "cpu" else "",
        "toolchains": toolchains,
        "rows": rows,
        "speed_note": t("upgrade.speed_note", threshold=f.pct(r.threshold, 0)),
        "placement": t("upgrade.placement") if r.placement else "",
        "rules": t.raw("upgrade.rules"),
        "timing": [(k, ", ".join(map(str, v)) if isinstance(v, list) else str(v)) for k, v in r.timing.items()],
        "baselines": (
            t(
                "upgrade.baselines",
                candidate=r.baselines.get("candidate", ""),
                current=r.baselines.get("current", ""),
            )
            if r.baselines.get("candidate") and r.baselines.get("current")
            else ""
        ),
        "diff": (
            f"evaluate baseline diff {r.baselines['current']} {r.baselines['candidate']}"
            if r.baselines.get("candidate") and r.baselines.get("current")
            else ""
        ),
        "baseline_error": t("upgrade.baseline_error", why=r.baseline_error) if r.baseline_error else "",
        "title": t("upgrade.title", model=r.model.name),
        "model": f"{r.model.name} ({r.model.dtype}, batch {r.model.batch_size})",
        "platform": f"{r.hardware.name} ({r.hardware.platform}, {r.hardware.target})",
        "date": day(r.created),
        "generated": t("upgrade.generated", date=day(r.created), run_id=r.run_id, seconds=f.secs(r.seconds)),
        "header": f"{r.model.name} · {r.hardware.name} · {day(r.created)}",
    }
