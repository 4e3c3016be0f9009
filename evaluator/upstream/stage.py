"""The upstream stage: the health of upstream TileLang (and a vendor fork) from git.

In: the context (the upstream settings). Out: the result with its `UpstreamHealth`, or
"not measured" and why.
"""

from __future__ import annotations

import dataclasses

from ..context import Context
from ..results import RunResult
from . import measure, not_measured


def upstream_health(ctx: Context, result: RunResult) -> RunResult:
    cfg, rep = ctx.cfg, ctx.rep
    rep.stage("Upstream health (git)")
    if not cfg.upstream.repo:
        health = not_measured("no --upstream repository was given")
    else:
        health = measure(
            cfg.upstream.repo, fork=cfg.upstream.fork, as_of=cfg.upstream.as_of, branch=cfg.upstream.branch
        )
    rep.done(f"maintenance score {health.maintenance_score}/10" if health.measured else "not measured")
    return dataclasses.replace(result, upstream=health)
