"""The profile stage: where the model's time goes, and which families to rewrite.

In: the context (the loaded model, the profile settings). Out: the result with its
`HotOps`, and the terminal told what was chosen, fused, called at no shape a kernel
takes, and left out.
"""

from __future__ import annotations

import dataclasses

from ..context import Context
from ..results import RunResult
from . import profile as profiling


def profile(ctx: Context, result: RunResult) -> RunResult:
    cfg = ctx.cfg
    ctx.rep.stage("Profiling with torch.profiler")
    hot = profiling.hot_ops(
        ctx.loaded, top=cfg.profile.ops, families=cfg.profile.families, iters=cfg.profile.iters, fuse=cfg.profile.fuse
    )
    ctx.rep.done(f"{len(hot.ops)} operator families; rewriting {', '.join(hot.selected) or 'none'}")
    for fu in hot.fusions:
        if fu.shapes:
            ctx.rep.info(
                f"{fu.family}: the model has its pattern {fu.calls} times a forward pass "
                f"({', '.join(fu.shapes)}); each runs as one fused kernel"
            )
        if fu.reused:
            ctx.rep.info(
                f"{fu.family} not fused at {', '.join(fu.reused)}: the first call's result is read "
                "again after the second (a pre-norm residual), so fusing would compute it twice"
            )
    for o in profiling.unnamed(hot):
        ctx.rep.info(
            f"[yellow]{o.family}: {o.calls} calls a pass ({o.share:.0%} of the time) at no shape its kernel "
            f"takes; they run in PyTorch, counted end to end[/]"
        )
    missed = profiling.left_out(hot) if not cfg.profile.families else ()
    if missed:
        ctx.rep.info(
            "not rewritten, with a kernel: "
            + ", ".join(f"{o.family} ({o.share:.0%} of the time)" for o in missed)
            + f"; --ops {len(hot.selected) + len(missed)} rewrites {'it' if len(missed) == 1 else 'them'} too"
        )
    return dataclasses.replace(result, hot_ops=hot)
