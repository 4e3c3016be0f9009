"""Comparing two runs: which measurements got slower, faster, appeared or went away, and why.

In: two `RunResult`s (the reference and the candidate, from the store or straight from a
run), a relative threshold and a noise multiple. Out: a `Comparison` with one `Change` per
TileLang op timing and per end-to-end timing (ratio = candidate / reference time, judged
against a threshold widened by the measured spread), the environment and settings fields
that differ, and a note naming the changes that plausibly explain a regression. Pure
functions over results: no store, no git, so a comparison can run anywhere.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import BaselineError
from ..results import Change, Comparison, RunResult, Timing, shape_str

E2E_TILELANG = "end-to-end tilelang"  # the model with the TileLang kernels swapped in
E2E_TORCH = "end-to-end torch"  # the unmodified model: separates driver/torch drift from kernel drift
# Settings that differ on every run by construction; listing them as "changes" would be noise.
IGNORED_SETTINGS = frozenset({"out", "out_dir", "output", "run_dir", "store", "resume", "run_id"})
# z-distance between p10 and p90 of a normal distribution (2 x 1.2816): turns the p10-p90
# span into a standard-deviation estimate that one slow outlier cannot inflate, unlike cv.
_P10_P90_SIGMAS = 2.5631

# Environment and settings fields whose change can plausibly explain a slower time; a
# change of anything else (the upstream repository, the checklist, a threshold) is
# never named as a cause.
_CAUSE_FIELDS = frozenset(
    {
        "driver",
        "cuda",
        "torch",
        "tilelang",
        "evaluator",
        "device",
        "target",
        "model",
        "clocks",
        "gpu_clocks",
        "power_limit",
        "transformers",
        "timm",
        "torchvision",
        "triton",
    }
)
_CAUSE_SETTINGS = frozenset(
    {
        "device",
        "dtype",
        "batch_size",
        "seq_len",
        "ops",
        "families",
        "max_shapes",
        "tune_budget_s",
        "fine_rounds",
        "isolate",
        "timing",
        "clocks",
    }
)


def op_key(b: Any) -> str:
    """How an op benchmark is named in comparisons, trends and manifests: "gemm 256x128x128 float32"."""
    return f"{b.family} {shape_str(b.shape)} {b.dtype}"


def layout_moves(ref_t: dict[str, Timing], cand_t: dict[str, Timing]) -> dict[str, str]:
    """Reference op keys that are the candidate's under another layout -> the candidate's
    key. A newer evaluator may key the same model call with its memory layout (a
    convolution's NCHW flag, attention's q/k/v row pitches) where an older one did not;
    such a pair is one call, compared as one, when exactly one key on each side matches."""
    from .. import kernels

    def free(key: str) -> tuple | None:
        parts = key.split(" ")
        if len(parts) != 3 or parts[0] not in kernels.REGISTRY:
            return None
        try:
            shape = tuple(int(x) for x in parts[1].split("x"))
        except ValueError:
            return None
        return parts[0], kernels.REGISTRY[parts[0]].layout_free(shape), parts[2]

    gone = [k for k in ref_t if k not in cand_t]
    new = [k for k in cand_t if k not in ref_t]
    by_free: dict[tuple, tuple[list[str], list[str]]] = {}
    for side, keys in ((0, gone), (1, new)):
        for k in keys:
            f = free(k)
            if f is not None:
                by_free.setdefault(f, ([], []))[side].append(k)
    return {old[0]: cand[0] for old, cand in by_free.values() if len(old) == 1 and len(cand) == 1}


def _valid(t: Timing | None) -> bool:
    return t is not None and t.median_ms is not None and math.isfinite(t.median_ms) and t.median_ms > 0


def timings(r: RunResult) -> dict[str, Timing]:
    """Comparison key -> the timing compared: TileLang medians per op, then both end-to-end variants."""
    out: dict[str, Timing] = {}
    for b in r.op_bench:
        if _valid(b.tilelang):
            out.setdefault(op_key(b), b.tilelang)
    if r.e2e:
        if _valid(r.e2e.swapped):
            out[E2E_TILELANG] = r.e2e.swapped
        if _valid(r.e2e.reference):
            out[E2E_TORCH] = r.e2e.reference
    return out


def _rel_spread(t: Timing) -> float:
    """Relative standard deviation of one measurement, from p10/p90 when it has them."""
    m, lo, hi = t.median_ms, t.p10_ms, t.p90_ms
    if all(x is not None and math.isfinite(x) for x in (lo, hi)) and hi > lo:
        return (hi - lo) / (_P10_P90_SIGMAS * m)
    return t.cv if t.cv is not None and math.isfinite(t.cv) and t.cv > 0 else 0.0


def _flatten(value: Any, prefix: str) -> dict[str, str]:
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for k in sorted(value, key=str):
            if prefix == "settings" and k in IGNORED_SETTINGS:
                continue
            out.update(_flatten(value[k], f"{prefix}.{k}"))
        return out
    return {prefix: value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)}


def _environment(r: RunResult) -> dict[str, str]:
    env, hw = r.environment, r.environment.hardware
    fields = {
        "driver": hw.driver,
        "cuda": hw.cuda,
        "torch": env.torch,
        "tilelang": env.tilelang,
        "evaluator": env.evaluator,
        "python": env.python,
        "device": hw.name,
        "os": env.os,
        "target": hw.target,
        "model": f"{r.model.name} ({r.model.spec_hash})" if r.model.spec_hash else r.model.name,
    }
    fields.update({name: version for name, version in (getattr(env, "libraries", None) or {}).items()})
    fields.update(_flatten(r.settings or {}, "settings"))
    return fields


def _label(r: RunResult, given: str) -> str:
    if given:
        return given
    return r.baseline.tag or r.baseline.path if r.baseline else r.run_id


def plausible_cause(field: str) -> bool:
    """Can a change of this environment field explain a regression?"""
    if field in _CAUSE_FIELDS or field.startswith(("clock", "gpu_clock")):
        return True
    if field.startswith("settings."):
        return field.split(".")[1] in _CAUSE_SETTINGS
    return False


def _changes(ref_t: dict[str, Timing], cand_t: dict[str, Timing], threshold: float, noise_k: float) -> list[Change]:
    """One Change per key of either run, the reference's keys first (so rows keep their order)."""
    changes = []
    for key in [*ref_t, *(k for k in cand_t if k not in ref_t)]:
        kind = "e2e" if key in (E2E_TILELANG, E2E_TORCH) else "op"
        a, b = ref_t.get(key), cand_t.get(key)
        if a is None or b is None:
            changes.append(
                Change(
                    kind,
                    key,
                    a.median_ms if a else None,
                    b.median_ms if b else None,
                    None,
                    threshold,
                    "gone" if b is None else "new",
                )
            )
            continue
        limit = max(threshold, noise_k * math.hypot(_rel_spread(a), _rel_spread(b)))
        ratio = b.median_ms / a.median_ms
        status = "regression" if ratio - 1 > limit else "improvement" if ratio - 1 < -limit else "unchanged"
        changes.append(Change(kind, key, a.median_ms, b.median_ms, ratio, limit, status))
    return changes


def _notes(
    reference: RunResult,
    candidate: RunResult,
    changes: list[Change],
    env_changes: tuple[tuple[str, str, str], ...],
    comparable: bool,
    threshold: float,
    noise_k: float,
) -> list[str]:
    """The comparison's note, in order: platforms, comparability, counts, the rule, likely causes."""
    pol_a, pol_b = (reference.settings or {}).get("timing"), (candidate.settings or {}).get("timing")
    notes = []
    plat_a, plat_b = reference.environment.hardware.platform, candidate.environment.hardware.platform
    if plat_a != plat_b:
        notes.append(
            f"cross-platform: candidate on {plat_b} ({candidate.environment.hardware.name}) vs "
            f"reference on {plat_a} ({reference.environment.hardware.name})"
        )
    if not comparable:
        notes.append(
            f"NOT COMPARABLE: timing policies differ (reference {json.dumps(pol_a, sort_keys=True)}, "
            f"candidate {json.dumps(pol_b, sort_keys=True)}); ratios are for information only, "
            "rerun both with the same timing settings"
        )
    counts = {s: sum(c.status == s for c in changes) for s in ("regression", "improvement", "unchanged", "new", "gone")}
    notes.append(", ".join(f"{n} {s}" for s, n in counts.items() if n) or "nothing to compare")
    notes.append(f"a change counts beyond max({threshold:.0%}, {noise_k:g} x combined spread)")
    if counts["regression"]:
        plausible = [(f, a, b) for f, a, b in env_changes if plausible_cause(f)]
        if plausible:
            notes.append("likely causes: " + ", ".join(f"{f} {a or '-'} -> {b or '-'}" for f, a, b in plausible[:6]))
        else:
            notes.append("unexplained: no change of driver, toolchain, device or settings that affects speed")
    return notes


def compare(
    reference: RunResult,
    candidate: RunResult,
    *,
    threshold: float = 0.05,
    noise_k: float = 3.0,
    reference_id: str = "",
    candidate_id: str = "",
) -> Comparison:
    """Candidate against reference, per op and end to end; ratio = candidate / reference time.

    A change counts only beyond max(threshold, noise_k x combined relative spread) of the two
    timings, so a noisy op needs a bigger change to be called a regression. The same function
    serves cross-platform comparison (candidate on one platform, reference on another).
    """
    if threshold < 0 or noise_k < 0:
        raise BaselineError(
            f"regression threshold {threshold} and noise multiple {noise_k} must be >= 0; pass e.g. --threshold 0.05"
        )
    ref_t, cand_t = timings(reference), timings(candidate)
    moved = layout_moves(ref_t, cand_t)
    ref_t = {moved.get(k, k): v for k, v in ref_t.items()}
    changes = _changes(ref_t, cand_t, threshold, noise_k)
    env_a, env_b = _environment(reference), _environment(candidate)
    env_changes = tuple(
        (k, env_a.get(k, ""), env_b.get(k, ""))
        for k in [*env_a, *(k for k in env_b if k not in env_a)]
        if env_a.get(k, "") != env_b.get(k, "")
    )
    # Timings taken under different policies (timer, warm-up, repetitions) are not the same quantity.
    comparable = (reference.settings or {}).get("timing") == (candidate.settings or {}).get("timing")
    notes = _notes(reference, candidate, changes, env_changes, comparable, threshold, noise_k)
    notes += [f"same call in another memory layout: {old} is now {new}" for old, new in moved.items()]
    return Comparison(
        reference=_label(reference, reference_id),
        candidate=_label(candidate, candidate_id),
        comparable=comparable,
        note="; ".join(notes),
        changes=tuple(changes),
        environment_changes=env_changes,
    )
