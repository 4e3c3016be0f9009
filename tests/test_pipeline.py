"""The pipeline's promises when things go wrong: finished kernels survive Ctrl-C, an
optional stage's error is data (the run still writes its verdict, report and baseline),
and a baseline that cannot be recorded still leaves the report, with one line saying
how to record it later. Each runs the real pipeline on a small user model."""

from __future__ import annotations

import json

import pytest

from evaluator.measuring import bench
from evaluator import config as config
from evaluator import pipeline
from evaluator.baseline import stage as recording
from evaluator.upstream import stage as upstream_stage
from evaluator.errors import BaselineError, UpstreamError

MODEL = "tests/fixtures/user_model.py:make"


def _cfg(tmp_path, **kw):
    # No torch.compile side: tests/test_compiled.py covers it, and each compile costs seconds here.
    opts = dict(
        model=MODEL,
        device="cpu",
        families="gemm,layernorm",
        budget=2,
        fine_rounds=0,
        soak_seconds=0,
        pdf=False,
        reports=tmp_path / "reports",
        reps=3,
        max_shapes=2,
        compile_mode="none",
    )
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

    # the stage looks the name up in its own module, so that is where it is replaced
    monkeypatch.setattr(upstream_stage, "measure", clone_fails)
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
    def disk_full(*args, **kwargs):
        raise BaselineError("could not write baseline: No space left on device")

    monkeypatch.setattr(recording, "record_baseline", disk_full)
    with pytest.raises(BaselineError) as err:
        pipeline.run(_cfg(tmp_path))
    run, r = _results(tmp_path)
    assert (run / "report.html").is_file() and r["verdict"] is not None
    message = str(err.value)
    assert "No space left on device" in message and f"evaluate baseline record {run}" in message
    assert "\n" not in message


@pytest.mark.slow
def test_resume_after_a_kill_skips_finished_stages_and_matches_an_uninterrupted_run(tmp_path):
    """Kill a real CPU run (SIGKILL, nothing gets to clean up) once its kernels stage has
    finished, resume it, and compare with an uninterrupted run of the same config."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    store = tmp_path / "store"
    args = [
        "--model",
        MODEL,
        "--families",
        "gemm,layernorm",
        "--budget",
        "2",
        "--fine-rounds",
        "0",
        "--soak-seconds",
        "6",
        "--no-pdf",
        "--targets",
        "none",
        "--reps",
        "3",
        "--max-shapes",
        "2",
        "--store",
        str(store),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def evaluate(*extra, reports):
        return subprocess.run(
            [sys.executable, "-m", "evaluator.cli", *args, "--reports", str(reports), *extra],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    whole = evaluate(reports=tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-2000:]
    [whole_dir] = list((tmp_path / "whole" / "runs").iterdir())
    expected = json.loads((whole_dir / "results.json").read_text())

    runs = tmp_path / "killed" / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaluator.cli", *args, "--reports", str(tmp_path / "killed")],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    killed_after = None
    while time.time() < deadline and proc.poll() is None:
        for results in runs.glob("*/results.json") if runs.is_dir() else []:
            try:
                finished = json.loads(results.read_text()).get("finished", [])
            except ValueError:
                continue
            if "kernels" in finished:
                proc.send_signal(signal.SIGKILL)
                killed_after = finished
        if killed_after:
            break
        time.sleep(0.05)
    proc.wait(timeout=60)
    assert killed_after is not None and "baseline" not in killed_after, "the run ended before it could be killed"
    [run_dir] = list(runs.iterdir())
    before = json.loads((run_dir / "results.json").read_text())

    resumed = subprocess.run(
        [sys.executable, "-m", "evaluator.cli", "--resume", str(run_dir)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    after = json.loads((run_dir / "results.json").read_text())
    # finished stages were not rerun: the same kernels, measured once, in the same time
    assert after["finished"][: len(killed_after)] == killed_after and after["finished"][-1] == "baseline"
    for stage in killed_after:
        assert after["stage_seconds"][stage] == before["stage_seconds"][stage]
    assert after["tuned"] == before["tuned"] and after["op_bench"] == before["op_bench"]
    # and the run ends where an uninterrupted one does (timings aside)
    assert after["hot_ops"]["selected"] == expected["hot_ops"]["selected"]

    # Keyed by shape: the model's two GEMMs (4x96x48, 4x48x96) take the same time, so the
    # profiler's order between them is noise (a CI run with two test workers swapped them).
    def configs(res):
        return {(t["family"], tuple(t["shape"])): t["config"] for t in res["tuned"]}

    assert configs(after) == configs(expected)
    assert [v["cases"][0]["passed"] for v in after["verify"]] == [v["cases"][0]["passed"] for v in expected["verify"]]
    for key in ("outputs_match", "tilelang_calls", "fallback_calls"):
        assert after["e2e"][key] == expected["e2e"][key]
    assert after["verdict"]["decision"] == expected["verdict"]["decision"]
    assert after["baseline"] is not None and (run_dir / "report.html").is_file()


def test_resume_refuses_what_it_cannot_continue(tmp_path):
    from evaluator.errors import ConfigError

    with pytest.raises(ConfigError, match="not a run folder"):
        pipeline.resume(tmp_path)


def test_resume_of_a_finished_run_names_the_command_that_renders_it(tmp_path):
    import dataclasses
    import json

    from samples import sample_result

    from evaluator import config
    from evaluator.errors import ConfigError
    from evaluator.results import BaselineRef, to_dict

    ref = BaselineRef("/st ore", "bert-tiny", "cpu-x86_64", "2026Q4-1", "p", "abc", "bert-tiny/cpu-x86_64/2026Q4-1")
    (tmp_path / "results.json").write_text(json.dumps(to_dict(dataclasses.replace(sample_result(), baseline=ref))))
    (tmp_path / "config.json").write_text(config.to_json(config.build(model="bert-tiny")))
    with pytest.raises(ConfigError) as err:
        pipeline.resume(tmp_path)
    assert str(err.value).endswith(
        "re-render it with evaluate report --baseline bert-tiny/cpu-x86_64/2026Q4-1 --store '/st ore'"
    )


def test_environment_records_the_model_libraries_installed():
    import importlib.metadata

    from evaluator.device import hardware
    from evaluator import pipeline
    from evaluator.results import Environment, from_dict, to_dict

    env = pipeline.environment(hardware.detect("cpu"))
    assert env.libraries["transformers"] == importlib.metadata.version("transformers")
    assert set(env.libraries) <= set(pipeline.MODEL_LIBRARIES)
    # A baseline written before the field existed still loads, with none recorded.
    old = to_dict(env)
    del old["libraries"]
    assert from_dict(Environment, old).libraries == {}
