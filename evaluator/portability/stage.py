"""The portability stage: the rewritten kernels lowered for accelerators not on this machine.

In: the context and the result with its tuned kernels. Out: the result with its
`Portability` matrix (kernels x targets: lowers, needs re-tuning, fails and why).
"""

from __future__ import annotations

import dataclasses

from ..context import Context
from ..results import RunResult
from . import check, from_tuned


def portability_check(ctx: Context, result: RunResult) -> RunResult:
    """The rewritten kernels lowered for accelerators not on this machine (never run there)."""
    cfg, rep = ctx.cfg, ctx.rep
    targets, dtype = cfg.portability.targets, cfg.portability.dtype or cfg.model.dtype
    checked = from_tuned(result.tuned)
    if any(k.dtype != dtype for k in checked):
        # A config tuned at another dtype says nothing about this one: defaults only.
        checked = [dataclasses.replace(k, dtype=dtype, config=None) for k in checked]
    rep.stage(
        f"Portability: lowering {len(checked)} kernels ({dtype}) for "
        f"{', '.join(targets) if targets else 'the default targets'}"
    )
    port = check(checked, targets)
    # The reporter reads rich markup; reasons quote compiler errors, which may hold [brackets].
    lines = [line.replace("[", "\\[") for line in port.summary]
    rep.done(lines[0] if lines else "")
    for line in lines[1:]:
        rep.info(line)
    return dataclasses.replace(result, portability=port)
