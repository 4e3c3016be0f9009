"""The verdict stage: the checklist applied to the run.

In: the context (the checklist file) and the whole result. Out: the result with its
`Verdict`.
"""

from __future__ import annotations

import dataclasses

from ..context import Context
from ..results import RunResult
from . import evaluate, load


def decide(ctx: Context, result: RunResult) -> RunResult:
    ctx.rep.stage("Evaluating the checklist")
    verdict = evaluate(load(ctx.cfg.output.checklist), result)
    ctx.rep.done(verdict.decision)
    return dataclasses.replace(result, verdict=verdict)
