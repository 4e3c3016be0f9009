"""The compare and baseline stages: this run against the previous one, then recorded.

In: the context (the store, the threshold, --push) and the result. Out: the result with
its `Comparison` with the previous baseline of this model and platform, and with its
`BaselineRef` and trend once recorded (and pushed).
"""

from __future__ import annotations

import dataclasses
import json

from ..context import Context
from ..errors import BaselineError
from ..results import RunResult, to_dict
from . import PushError, compare, previous, record as record_baseline, record_and_push, trend


def compare_previous(ctx: Context, result: RunResult) -> RunResult:
    cfg, rep = ctx.cfg, ctx.rep
    rep.stage("Comparing with the previous baseline")
    prev = previous(cfg.output.store, result.model.name, ctx.hw.platform)
    if prev is None:
        rep.done("no previous baseline for this model and platform")
        return result
    ref_id = prev.baseline.tag if prev.baseline else prev.run_id
    comp = compare(
        prev, result, threshold=cfg.output.regression_threshold, reference_id=ref_id, candidate_id="this run"
    )
    rep.done(
        f"against {ref_id}: {len(comp.regressions)} regressions"
        + ("" if comp.comparable else " (not comparable: timing policies differ)")
    )
    return dataclasses.replace(result, comparison=comp)


def record(ctx: Context, result: RunResult) -> RunResult:
    """Record the baseline; with --push, send it to the shared remote too. A push that
    fails keeps the baseline recorded locally: the run goes on and says how to retry."""
    cfg, rep = ctx.cfg, ctx.rep
    rep.stage("Recording the baseline")
    store = cfg.output.store_remote or cfg.output.store
    note = ""
    if cfg.output.push:
        try:
            ref, sync = record_and_push(store, result)
            note = f", pushed to {sync.remote}"
        except PushError as exc:
            ref, note = exc.ref, " (not pushed)"
            ctx.push_error = exc
    else:
        ref = record_baseline(store, result)
    (ctx.run_dir / "baseline.json").write_text(json.dumps(to_dict(ref), indent=1))
    rep.done(f"{ref.tag} in {ref.store}{note}")
    # the trend is read after recording so that this run is its newest point
    try:
        points = trend(cfg.output.store, result.model.name, ctx.hw.platform)
    except BaselineError as exc:  # an older baseline that does not load: this run's is recorded all the same
        rep.info(f"[yellow]the trend is left out of the report: {str(exc).splitlines()[0]}[/]")
        points = ()
    return dataclasses.replace(result, baseline=ref, trend=points)
