"""Judging one kernel on one target: each of its configs, and a fitting one when they fail.

In: a kernel family, a shape, a dtype, the tuned config (or None), a `targets.TargetSpec`
and the optional numerics hook. Out: the kernel's `PortCell`s on that target, one per
config kind ("tuned" when given, "default": the first entry of the family's search space
for the target), each "lowers", "needs_retuning" or "fails" with its failure class and
one-line reason, and, where it does not lower, the first config of the target's own
search space that fits and lowers. A config that lowers can still be unable to launch:
the family's own sizing (`reject_reason` against a `Hardware` built from the target's
published limits) and the lowered kernel's shared memory and threads are checked against
the target's limits; a T.gemm that became scalar loops is a feature gap, not a success.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ..device import targets as T
from ..results import KernelConfig, PortCell, Shape
from .lowering import Lowered, lower_cached, lowering_seconds, classify, first_line

# Configs of the target's search space tried, in the family's order, when looking for one
# that fits and lowers; each is a lowering (0.1-2 s), so the search is bounded.
MAX_FIT_TRIES = 6


def _kb(n: int) -> str:
    return f"{n / 1024:.0f} KB" if n % 1024 == 0 or n >= 10240 else f"{n / 1024:.1f} KB"


_NEED_BYTES = re.compile(r"needs (\d+) (?:B|bytes) of shared memory")
# A config written for one architecture (the sm_90 ping-pong GEMM) refused by the family
# on another: the target lacks what that config uses, but another config may build.
_NEEDS_ARCH = re.compile(r"needs CUDA sm_\d+")


def _limit_phrase(spec: T.TargetSpec) -> str:
    return f"{spec.short} allows {_kb(spec.smem_per_block)} of {spec.smem_word} per {spec.block_word}"


def _judge(
    family: Any,
    shape: Shape,
    dtype: str,
    config: KernelConfig,
    spec: T.TargetSpec,
    numerics: Callable[..., str | None] | None,
) -> tuple[str, str, str, Lowered, str]:
    """(status, failure class, reason, lowering, note) for one config on one target."""
    hw = spec.hardware()
    reject = None
    if hasattr(family, "reject_reason"):
        try:
            reject = family.reject_reason(shape, dtype, config, hw)
        except Exception as exc:  # a family bug must not hide the other cells
            reject = first_line(exc)
    low = lower_cached(family, shape, dtype, config, spec)
    if not low.ok:
        if _NEEDS_ARCH.search(low.error):
            return "needs_retuning", "feature", low.error, low, ""
        return "fails", low.error_class, low.error, low, ""
    # It lowers; can it launch there?
    limits = []
    if reject:
        need = _NEED_BYTES.search(reject)
        if need and spec.smem_per_block:
            text = f"uses {_kb(int(need.group(1)))} of shared memory; {_limit_phrase(spec)}"
            if low.smem_bytes is not None:
                text += f" (the lowered kernel itself requests {_kb(low.smem_bytes)})"
            limits.append(text)
        elif classify(reject, default="resources") == "feature":
            return "fails", "feature", reject, low, ""
        else:
            limits.append(reject)
    if not limits and low.smem_bytes and spec.smem_per_block and low.smem_bytes > spec.smem_per_block:
        limits.append(f"the lowered kernel requests {_kb(low.smem_bytes)} of shared memory; {_limit_phrase(spec)}")
    if low.threads and spec.max_threads_per_block and low.threads > spec.max_threads_per_block:
        limits.append(f"launches {low.threads} threads per block; {spec.short} allows {spec.max_threads_per_block}")
    if limits:
        return "needs_retuning", "resources", "; ".join(limits), low, ""
    # A T.gemm that became scalar loops builds, but it is not the kernel that was tuned.
    if low.uses_gemm and not low.instruction:
        lacks = {"bfloat16": not spec.bf16, "float16": not spec.fp16}.get(dtype, False)
        why = (
            f"{spec.short}'s {spec.matrix_cores or 'matrix cores'} take no {dtype}"
            if lacks
            else f"no matrix-core instruction for {dtype} on {spec.arch}"
        )
        return "fails", "feature", f"{why}: T.gemm lowered to scalar FMA loops", low, ""
    note = ""
    if low.uses_gemm and spec.matrix_instruction and low.instruction != spec.matrix_instruction and spec.key != "local":
        # It builds and runs, but speed measured where the tuned instruction was used
        # does not carry over. Not on the local device: its speed was measured right
        # there, whatever the instruction (a 16-row decode tile runs mma by design).
        note = (
            f"T.gemm lowered to {low.instruction}, not {spec.short}'s {spec.matrix_instruction}: "
            f"speed measured elsewhere does not carry over"
        )
    if numerics is not None and spec.key == "local":
        # Only the local device can run the kernel; the hook compares it with PyTorch.
        try:
            mismatch = numerics(family.name, shape, dtype, config)
        except Exception as exc:
            mismatch = first_line(exc)
        if mismatch:
            return "fails", "numerical", mismatch, low, note
    return "lowers", "", "", low, note


# ---------------------------------------------------------------- one kernel on one target
def cells_for(
    family: Any,
    shape: Shape,
    dtype: str,
    tuned: KernelConfig | None,
    spec: T.TargetSpec,
    numerics: Callable[..., str | None] | None,
) -> list[PortCell]:
    base = dict(family=family.name, shape=tuple(shape), dtype=dtype, target=spec.key)
    kinds = ([("tuned", tuned)] if tuned is not None else []) + [("default", None)]
    gap = T.backend_gap(spec)
    if gap:
        return [
            PortCell(
                **base,
                config_kind=k,
                status="fails",
                failure_class="feature",
                reason=gap,
                config=dict(c) if c is not None else None,
            )
            for k, c in kinds
        ]
    hw = spec.hardware()
    try:
        space = list(family.search_space(shape, dtype, hw))
        space_error = "" if space else _empty_space_reason(family, shape, dtype, hw, spec)
    except Exception as exc:
        space, space_error = [], first_line(exc)
    cells: list[PortCell] = []
    fitting: KernelConfig | None | bool = False  # False: not searched yet
    for kind, config in kinds:
        if kind == "default":
            if not space:
                cells.append(
                    PortCell(
                        **base,
                        config_kind=kind,
                        status="fails",
                        failure_class=classify(space_error, default="feature"),
                        reason=space_error,
                    )
                )
                continue
            config = space[0]
        spent0 = lowering_seconds()
        status, cls, reason, low, note = _judge(family, shape, dtype, config, spec, numerics)
        fit = None
        # Another config cannot give the target a dtype or a backend it lacks: search
        # only for limits, code-generation gaps, numerical mismatches and configs
        # written for another architecture.
        if status != "lowers" and (cls != "feature" or status == "needs_retuning"):
            if fitting is False:
                fitting = _find_fitting(family, shape, dtype, space, spec, numerics)
            fit = fitting if fitting and fitting != config else None
        cells.append(
            PortCell(
                **base,
                config_kind=kind,
                status=status,
                failure_class=cls,
                reason=reason,
                config=dict(config),
                fitting_config=dict(fit) if fit else None,
                instruction=low.instruction,
                smem_bytes=low.smem_bytes,
                threads=low.threads,
                note=note,
                lower_s=round(lowering_seconds() - spent0, 3),
            )
        )
    return cells


def _empty_space_reason(family: Any, shape: Shape, dtype: str, hw: Any, spec: T.TargetSpec) -> str:
    """Why the family offers no config for the target: its own reject reason for its
    defaults when it has one (e.g. no float32 GPU schedule), else a plain sentence."""
    if hasattr(family, "reject_reason"):
        try:
            why = family.reject_reason(shape, dtype, {}, hw)
        except Exception as exc:
            why = first_line(exc)
        if why:
            return why
    return f"{family.name} has no config for {dtype} on {spec.short} (its search space is empty)"


def _find_fitting(
    family: Any,
    shape: Shape,
    dtype: str,
    space: list[KernelConfig],
    spec: T.TargetSpec,
    numerics: Callable[..., str | None] | None,
) -> KernelConfig | None:
    """The first config of the target's search space (the family's order: best guess
    first) that fits the target's limits and lowers cleanly."""
    for config in space[:MAX_FIT_TRIES]:
        status, *_ = _judge(family, shape, dtype, config, spec, numerics)
        if status == "lowers":
            return config
    return None
