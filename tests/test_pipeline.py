"""The pipeline's promises when things go wrong: finished kernels survive Ctrl-C, an
optional stage's error is data (the run still writes its verdict, report and baseline),
and a baseline that cannot be recorded still leaves the report, with one line saying
how to record it later. Each runs the real pipeline on a small user model."""

from __future__ import annotations

import json

import pytest

from evaluator import bench, config, pipeline, upstream
from evaluator.errors import BaselineError, UpstreamError

MODEL = "tests/fixtures/user_model.py:make"


def _cfg(tmp_path, **kw):
    opts = dict(model=MODEL, device="cpu", families="gemm,layernorm", budget=2, fine_rounds=0, soak_seconds=0,
                pdf=False, reports=tmp_path / "reports", reps=3, max_shapes=2)
    opts.update(kw)
    return config.build(**opts)


def _results(tmp_path):
    [run] = list((tmp_path / "reports" / "runs").iterdir())
    return run, json.loads((run / "results.json").read_text())


@pytest.mark.slow
def test_ctrl_c_keeps_every_kernel_that_finished(tmp_path, monkeypatch):
    real = bench.bench_op
    calls = []

    def interrupted_second_time(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(bench, "bench_op", interrupted_second_time)
    with pytest.raises(KeyboardInterrupt):
        pipeline.run(_cfg(tmp_path))
    _, r = _results(tmp_path)
    # the first kernel was tuned, verified and benchmarked before Ctrl-C: all three are kept
    assert len(r["tuned"]) >= 1 and len(r["verify"]) == 1 and len(r["op_bench"]) == 1


@pytest.mark.slow
def test_an_optional_stage_error_is_data_and_the_run_finishes(tmp_path, monkeypatch):
    def clone_fails(*args, **kwargs):
        raise UpstreamError("could not clone https://example.invalid/tilelang: network unreachable")

    monkeypatch.setattr(upstream, "measure", clone_fails)
    cfg = _cfg(tmp_path)
    cfg = cfg.__class__(**{**cfg.__dict__, "upstream": cfg.upstream.__class__(repo="https://example.invalid/tilelang")})
    out = pipeline.run(cfg)
    assert "network unreachable" in out.result.stage_errors["upstream"]
    assert out.result.verdict is not None and out.result.baseline is not None and out.html.is_file()
    # a tool failure is never a pass: the upstream items say why they were not evaluated
    ups = [o for o in out.result.verdict.outcomes if o.metric.startswith("upstream.")]
    assert ups and all(o.status != "pass" for o in ups) and "network unreachable" in ups[0].evidence


@pytest.mark.slow
def test_a_baseline_that_cannot_be_recorded_still_leaves_the_report(tmp_path, monkeypatch):
    from evaluator import baseline

    def disk_full(*args, **kwargs):
        raise BaselineError("could not write baseline: No space left on device")

    monkeypatch.setattr(baseline, "record", disk_full)
    with pytest.raises(BaselineError) as err:
        pipeline.run(_cfg(tmp_path))
    run, r = _results(tmp_path)
    assert (run / "report.html").is_file() and r["verdict"] is not None
    message = str(err.value)
    assert "No space left on device" in message and f"evaluate baseline record {run}" in message
    assert "\n" not in message
