"""A verdict that cannot be fooled: broken outputs, empty evidence and stalled timings
never pass an item, and where the evidence cannot carry a decision the verdict says
INCONCLUSIVE with what to rerun (checklist.verdict, outputs, bench.stalled_sides)."""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch

from evaluator.measuring import bench
from evaluator import checklist as cl
from evaluator.results import CallCount, Verdict
from samples import replace, sample_result


def decide(result):
    return cl.evaluate(cl.load(cl.DEFAULT_CHECKLIST), result)


def status(verdict, metric):
    return next(o for o in verdict.outcomes if o.metric == metric).status


def test_nothing_rewritten_is_inconclusive_and_says_where_the_time_went():
    r = sample_result()
    r = replace(
        r,
        hot_ops=dataclasses.replace(r.hot_ops, selected=()),
        tuned=(),
        verify=(),
        op_bench=(),
        e2e=None,
        soak=None,
        finished=("profile", "kernels"),
    )
    v = decide(r)
    assert v.decision == "INCONCLUSIVE"
    assert v.inconclusive[0].startswith("nothing was rewritten") and "gemm 60%" in v.inconclusive[0]
    assert v.rerun and "--ops" in v.rerun[0]


def test_no_call_in_tilelang_is_inconclusive_not_a_failed_output_check():
    r = sample_result()
    e2e = dataclasses.replace(
        r.e2e,
        tilelang_calls=0,
        fallback_calls=14,
        outputs_match=False,
        speedup=1.0,
        calls=(
            CallCount("gemm", "256x128x128", 0, {"shape not tuned": 12}),
            CallCount("softmax", "1024x128", 0, {"dtype float16 (kernels are float32)": 2}),
        ),
    )
    v = decide(replace(r, e2e=e2e))
    assert v.decision == "INCONCLUSIVE"
    assert status(v, "e2e.outputs_match") == status(v, "e2e.speedup") == "not_evaluated"
    assert "no call ran in TileLang" in v.inconclusive[0] and "shape not tuned (12)" in v.inconclusive[0]


def test_a_flagged_number_that_would_pass_a_blocker_makes_the_verdict_inconclusive():
    r = sample_result()
    stalled = dataclasses.replace(
        r.op_bench[0],
        speedup=40.0,
        flags=("stalled: PyTorch 7.5 ms in the rounds against 30 us when timed again alone",),
    )
    v = decide(replace(r, op_bench=(stalled, r.op_bench[1])))
    assert v.decision == "INCONCLUSIVE"
    assert status(v, "ops.speedup_min") == "fail"
    assert any("stalled: PyTorch" in why for why in v.inconclusive)
    assert any("idle machine" in step and "--reps" in step for step in v.rerun)


def test_a_flag_does_not_rescue_a_clean_failure_of_another_blocker():
    r = sample_result(correct=False)  # kernels-correct fails on clean evidence
    flagged = dataclasses.replace(r.e2e, flags=("unstable",))
    v = decide(replace(r, e2e=flagged))
    assert v.decision == "NO-GO" and v.inconclusive == () and v.rerun == ()


def test_a_stalled_tilelang_side_cannot_fail_a_blocker_either():
    r = sample_result(softmax_speedup=0.3)  # fails ops-no-cliff ...
    stalled = dataclasses.replace(
        r.op_bench[1],
        flags=("stalled: TileLang 0.67 ms in the rounds against 0.2 ms when the tuner timed this config",),
    )
    v = decide(replace(r, op_bench=(r.op_bench[0], stalled)))
    assert v.decision == "INCONCLUSIVE"  # ... but only on a number a stall may have made
    unflagged = decide(sample_result(softmax_speedup=0.3))
    assert unflagged.decision == "NO-GO"


def test_a_clean_row_that_fails_the_minimum_decides_whatever_another_row_is_flagged():
    # the slowest op is clean at 0.3x: the true minimum is at most that, so another op's
    # unstable timing cannot lift it over the bar (seen on a loaded CPU: NO-GO twice, then
    # INCONCLUSIVE on the same evidence)
    r = sample_result(softmax_speedup=0.3)
    unstable = dataclasses.replace(r.op_bench[0], flags=("unstable",))
    v = decide(replace(r, op_bench=(unstable, r.op_bench[1])))
    assert v.decision == "NO-GO" and v.inconclusive == ()
    cliff = next(o for o in v.outcomes if o.metric == "ops.speedup_min")
    assert cliff.status == "fail" and "flagged, the fail stands" in cliff.evidence
    # the flagged row being the slowest one keeps the doubt
    flagged_slowest = dataclasses.replace(r.op_bench[1], flags=("unstable",))
    assert decide(replace(r, op_bench=(r.op_bench[0], flagged_slowest))).decision == "INCONCLUSIVE"


def test_a_reference_without_signal_cannot_pass_the_output_check():
    r = sample_result()
    e2e = dataclasses.replace(r.e2e, no_signal="the reference carries no signal at this input (largest value 2e-24)")
    v = decide(replace(r, e2e=e2e))
    assert status(v, "e2e.outputs_match") == "fail" and v.decision == "INCONCLUSIVE"
    assert any("inputs that make its output vary" in step for step in v.rerun)


def test_nan_outputs_fail_the_output_check_and_a_broken_reference_decides_nothing():
    r = sample_result()
    swapped_nan = dataclasses.replace(
        r.e2e,
        outputs_match=False,
        nonfinite={"swapped NaN": 1024},
        error="swapped output has 1,024 NaN of 98,304 values",
    )
    v = decide(replace(r, e2e=swapped_nan))
    assert v.decision == "NO-GO" and status(v, "e2e.outputs_match") == "fail"
    broken = dataclasses.replace(
        r.e2e,
        outputs_match=False,
        nonfinite={"reference NaN": 98304, "swapped NaN": 98304},
        error="the reference itself has 98,304 NaN of 98,304 values",
    )
    v = decide(replace(r, e2e=broken))
    outcome = next(o for o in v.outcomes if o.metric == "e2e.outputs_match")
    assert outcome.value == 0.0 and outcome.status == "fail" and "the reference itself has" in outcome.evidence
    assert v.decision == "INCONCLUSIVE"
    assert any("finite" in step for step in v.rerun)


@pytest.mark.parametrize("fail_on, code", [("no-go", 1), ("conditional", 1), (None, 0)])
def test_inconclusive_trips_the_gate_as_no_go_does(fail_on, code):
    assert cl.exit_code(Verdict("INCONCLUSIVE", "default", ()), fail_on) == code


def test_the_verdict_round_trips_through_results_json():
    from evaluator.results import RunResult, from_dict, to_dict

    r = sample_result()
    r = replace(
        r,
        hot_ops=dataclasses.replace(r.hot_ops, selected=()),
        tuned=(),
        verify=(),
        op_bench=(),
        e2e=None,
        finished=("profile",),
    )
    r = replace(r, verdict=decide(r))
    back = from_dict(RunResult, to_dict(r))
    assert back.verdict.decision == "INCONCLUSIVE" and back.verdict.inconclusive == r.verdict.inconclusive


# ---------------------------------------------------------------- the guards, measured


class _StalledReference:
    """A kernel family whose PyTorch side sleeps `ms` on every call, as a busy machine's
    other jobs stall it; everything else is the family's own."""

    def __init__(self, family, ms: float):
        self._family, self._ms = family, ms

    def __getattr__(self, name):
        return getattr(self._family, name)

    def reference(self, *args):
        time.sleep(self._ms / 1e3)
        return self._family.reference(*args)


def test_a_reference_side_that_stalls_is_flagged_against_its_profiled_time_and_cannot_pass():
    from evaluator.device import hardware
    from evaluator import kernels

    fam = kernels.get("softmax")
    shape = (64, 128)
    kernel = fam.build(shape, "float32", fam.search_space(shape, "float32", hardware.detect("cpu"))[0], "c")
    ins = fam.make_inputs(shape, "float32", "cpu", 0)
    profiled = bench.time_callable(lambda: fam.reference(*ins), "cpu", bench.TimingPolicy(reps=5)).median_ms
    ob = bench.bench_op(
        _StalledReference(fam, ms=5.0),
        shape,
        "float32",
        kernel,
        "cpu",
        source="model",
        config={},
        policy=bench.TimingPolicy(reps=5, max_seconds=0.5),
        evidence={"PyTorch": (profiled, "for every call of this shape in the profiled forward pass")},
    )
    stalls = [f for f in ob.flags if f.startswith("stalled: PyTorch")]
    assert stalls and stalls[0].endswith("in the profiled forward pass"), ob.flags
    assert ob.speedup > 3  # the number a stall makes: flagged, it cannot pass
    r = sample_result()
    row = dataclasses.replace(r.op_bench[1], speedup=ob.speedup, flags=ob.flags)
    v = decide(replace(r, op_bench=(r.op_bench[0], row)))
    assert status(v, "ops.speedup_min") == "fail" and v.decision == "INCONCLUSIVE"
    calm = bench.bench_op(
        fam,
        shape,
        "float32",
        kernel,
        "cpu",
        source="model",
        config={},
        policy=bench.TimingPolicy(reps=5, max_seconds=0.5),
        evidence={"PyTorch": (profiled * 2, "for every call of this shape in the profiled forward pass")},
    )
    assert not [f for f in calm.flags if f.startswith("stalled")], calm.flags


def test_stalled_sides_reads_the_same_call_timed_again_when_no_other_evidence_is_given():
    x = torch.randn(64, 64)
    quick = bench.Timing(median_ms=1e-4, p10_ms=1e-4, p90_ms=1e-4, mean_ms=1e-4, cv=0.0, reps=5)  # no slower than alone
    slow = dataclasses.replace(quick, median_ms=50.0, p10_ms=50.0, p90_ms=50.0, mean_ms=50.0)
    fns = ([lambda: x @ x], [lambda: x + 1])
    flags = bench.stalled_sides((slow, quick), fns, ("PyTorch", "TileLang"), {}, "cpu", bench.TimingPolicy())
    assert (
        len(flags) == 1
        and flags[0].startswith("stalled: PyTorch 50 ms")
        and flags[0].endswith("when timed again alone")
    )


def test_timing_on_a_cpu_runs_both_sides_on_one_thread_and_says_so():
    from evaluator.device import hardware

    before = torch.get_num_threads()
    try:
        assert hardware.pin_threads("cpu") == 1 and torch.get_num_threads() == 1
        assert hardware.pin_threads("cuda") is None
        assert bench.TimingPolicy().describe("cpu")["threads"] == 1
        assert "threads" not in bench.TimingPolicy().describe("cuda")
    finally:
        torch.set_num_threads(before)


def test_redrawn_inputs_keep_shapes_masks_and_ranges():
    ids = torch.randint(0, 1000, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    feats = torch.randn(2, 3) * 4 + 10
    again = bench.redraw_inputs((ids, mask, feats), seed=1)
    assert again[1] is mask and again[0].shape == ids.shape and not torch.equal(again[0], ids)
    assert int(again[0].min()) >= int(ids.min()) and int(again[0].max()) <= int(ids.max())
    assert abs(float(again[2].mean()) - 10) < 10 and again[2].dtype == feats.dtype
    assert bench.redraw_inputs((mask,), seed=1) is None


# ---------------------------------------------------------------- whole runs on models with nothing to judge


def _run(tmp_path, factory: str):
    from evaluator import config as config
    from evaluator import pipeline

    cfg = config.build(
        model=f"tests/fixtures/odd_models.py:{factory}",
        device="cpu",
        budget=2,
        fine_rounds=0,
        soak_seconds=0,
        pdf=False,
        reports=tmp_path / "reports",
        reps=3,
        compile_mode="none",
    )
    return pipeline.run(cfg).result


@pytest.mark.slow
def test_a_model_whose_forward_returns_nan_fails_its_output_check_with_counts(tmp_path):
    r = _run(tmp_path, "nan_output")
    assert not r.e2e.outputs_match and r.e2e.nonfinite["reference NaN"] == 4 * 64 * 64
    assert r.e2e.error.startswith("the reference itself has 16,384 NaN of 16,384 values")
    item = next(o for o in r.verdict.outcomes if o.metric == "e2e.outputs_match")
    assert item.status == "fail" and item.value == 0.0
    assert r.verdict.decision in ("NO-GO", "INCONCLUSIVE") and r.verdict.decision != "GO"


@pytest.mark.slow
def test_a_model_whose_output_carries_no_signal_is_flagged_and_cannot_pass(tmp_path):
    r = _run(tmp_path, "zero_output")
    assert "carries no signal" in r.e2e.no_signal and not r.e2e.inputs_redrawn
    assert any("inputs drawn with another seed gave none either" in f for f in r.e2e.flags)
    item = next(o for o in r.verdict.outcomes if o.metric == "e2e.outputs_match")
    assert item.status == "fail" and "cannot pass on this number" in item.evidence


@pytest.mark.slow
def test_a_model_with_nothing_to_rewrite_is_inconclusive(tmp_path):
    r = _run(tmp_path, "relu_only")
    assert r.families == () and r.verdict.decision == "INCONCLUSIVE"
    assert "nothing was rewritten" in r.verdict.inconclusive[0] and r.verdict.rerun


def _busy(stop_at: float) -> None:
    torch.set_num_threads(1)
    a = torch.randn(512, 512)
    while time.time() < stop_at:
        a @ a


@pytest.mark.slow
def test_the_cpu_demo_gives_the_same_verdict_three_times_beside_a_busy_process(tmp_path):
    import multiprocessing as mp

    from evaluator import config as config
    from evaluator import pipeline

    busy = mp.get_context("spawn").Process(target=_busy, args=(time.time() + 900,), daemon=True)
    busy.start()
    try:
        verdicts, unflagged = [], []
        for i in range(3):
            cfg = config.build(
                model="bert-tiny",
                device="cpu",
                budget=2,
                fine_rounds=0,
                soak_seconds=0,
                pdf=False,
                reports=tmp_path / f"r{i}",
                compile_mode="none",
            )
            r = pipeline.run(cfg).result
            verdicts.append(r.verdict.decision)
            # every op ratio is inside the roof's plausible range or flagged
            unflagged += [b.family for b in r.op_bench if (b.tilelang_roof_pct or 0) > 125 and not b.flags]
    finally:
        busy.terminate()
    assert len(set(verdicts)) == 1, verdicts
    assert not unflagged


def test_a_team_can_require_tilelang_to_beat_torch_compile_end_to_end():
    from evaluator.results import Compiled, Ratio

    r = sample_result()
    slower = Compiled("max-autotune", timing=r.e2e.swapped, ratio=Ratio(0.745, 0.74, 0.75, 20), compile_s=45.0)
    strict = cl.load(cl.DEFAULT_CHECKLIST.parent / "production.yaml")
    v = cl.evaluate(strict, replace(r, e2e=dataclasses.replace(r.e2e, compiled=slower)))
    item = next(o for o in v.outcomes if o.metric == "e2e.vs_compiled")
    assert item.status == "fail" and item.value == pytest.approx(0.745) and "max-autotune" in item.evidence
    faster = dataclasses.replace(slower, ratio=Ratio(1.10, 1.08, 1.12, 20))
    v = cl.evaluate(strict, replace(r, e2e=dataclasses.replace(r.e2e, compiled=faster)))
    assert next(o for o in v.outcomes if o.metric == "e2e.vs_compiled").status == "pass"
    assert cl.METRICS["e2e.vs_compiled"](replace(r, e2e=dataclasses.replace(r.e2e, compiled=None))) is None
