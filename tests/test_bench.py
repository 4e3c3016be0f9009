import math


from evaluator import bench


def test_summarize_statistics():
    t = bench.summarize([1.0, 2.0, 3.0, 4.0, 100.0], "perf_counter")
    assert t.median_ms == 3.0 and t.reps == 5
    assert t.p10_ms == 1.0 + 0 and t.p90_ms == 100.0
    assert math.isclose(t.mean_ms, 22.0)
    assert t.cv > 1.0  # one outlier makes the spread obvious


def test_time_callable_counts_reps_and_measures_sleep():
    import time
    t = bench.time_callable(lambda: time.sleep(0.002), "cpu", bench.TimingPolicy(warmup=1, reps=7))
    assert t.reps == 7
    assert 1.5 < t.median_ms < 50


def test_soak_reports_windows_and_drift():
    import time
    calls = []

    def slowing():
        calls.append(1)
        time.sleep(0.001 * (1 + len(calls) / 50))

    s = bench.soak(slowing, "cpu", seconds=1.0, windows=4)
    assert len(s.window_ms) == 4 and 0 < s.iterations < len(calls)  # warm-up calls are not counted
    assert s.drift > 0.05  # a steady slide is visible
    assert any("drifted" in n for n in s.notes)


def test_timing_policy_describes_the_timer():
    assert bench.TimingPolicy().describe("cpu")["timer"] == "perf_counter_interleaved"
    assert bench.TimingPolicy().describe("cuda")["timer"] == "cuda_graph"


def test_a_noisy_measurement_is_remeasured_then_flagged():
    import itertools
    import time
    # Spread within 2x of the median is not "outside load" (that is dropped), it is noise.
    pattern = itertools.cycle([0.001, 0.0018])
    t = bench.time_callable(lambda: time.sleep(next(pattern)), "cpu",
                            bench.TimingPolicy(warmup=0, reps=12, max_cv_cpu=0.05, sample_ms_cpu=0.0))
    assert t.unstable and t.cv > 0.05
    steady = bench.time_callable(lambda: None, "cpu", bench.TimingPolicy(warmup=0, reps=5, max_cv_cpu=10))
    assert not steady.unstable


def test_launch_overhead_of_a_real_kernel():
    from evaluator import hardware, kernels
    fam = kernels.get("softmax")
    shape = tuple(fam.standard_shapes("cpu")[0])
    kernel = fam.build(shape, "float32", fam.search_space(shape, "float32", hardware.detect("cpu"))[0], "c")
    o = bench.launch_overhead(fam, shape, "float32", kernel, "cpu", calls=50)
    assert o.family == "softmax" and o.tilelang_us > 0 and o.torch_us > 0
    assert math.isclose(o.extra_us, o.tilelang_us - o.torch_us)


def test_roofline_attainable():
    # memory-bound side: intensity 1 FLOP/byte x 1000 GB/s = 1 TFLOP/s below a 100 TFLOP/s roof
    assert bench.roofline_attainable(1e9, 1e9, 100.0, 1000.0) == 1e12
    # compute-bound side
    assert bench.roofline_attainable(1e12, 1e6, 100.0, 1000.0) == 100e12
    assert bench.roofline_attainable(1.0, 1.0, None, 1000.0) is None


# ---------------------------------------------------------------- interleaved pairs and ratios


def test_bootstrap_ratio_brackets_the_median_of_paired_ratios():
    r = bench.bootstrap_ratio([2.0, 2.2, 1.9, 2.1, 2.0, 2.05], [1.0, 1.1, 0.95, 1.0, 1.02, 1.0])
    assert 1.9 < r.value < 2.1 and r.low <= r.value <= r.high and r.rounds == 6
    assert bench.bootstrap_ratio([], []).rounds == 0


def test_time_pair_interleaves_and_finds_the_faster_side():
    import time
    policy = bench.TimingPolicy(warmup=0, reps=9, sample_ms_cpu=0.0)
    slow, fast = [lambda: time.sleep(0.004)], [lambda: time.sleep(0.001)]
    t_slow, t_fast, ratio, note = bench.time_pair(slow, fast, "cpu", policy)
    assert t_slow.median_ms > t_fast.median_ms and ratio.value > 1.5 and ratio.low > 1.0 and note == ""


def test_disturbed_rounds_are_dropped_and_counted():
    class Fake:
        def __init__(self, xs):
            self.xs = iter(xs)

        def sample(self):
            return next(self.xs)

    a = Fake([1.0, 1.0, 9.0, 1.0, 1.0, 1.0])  # a neighbour's burst in round 3
    b = Fake([2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    (xa, xb), dropped = bench.interleaved([a, b], bench.TimingPolicy(reps=6), "cpu")
    assert dropped == 1 and 9.0 not in xa and len(xa) == len(xb) == 5


def test_rotated_inputs_only_on_cuda():
    from evaluator import kernels
    fam = kernels.get("softmax")
    assert len(bench.rotated_inputs(fam, (8, 8), "float32", "cpu", 0, bench.TimingPolicy())) == 1


def test_an_op_faster_than_its_roof_is_flagged():
    from evaluator.results import Timing
    t = Timing(median_ms=1e-3, p10_ms=1e-3, p90_ms=1e-3, mean_ms=1e-3, cv=0.0, reps=5)
    # 1 GB in 1 µs is 1 PB/s: no memory allows it
    assert bench.roof_flags(1.0, 1e9, t, (100.0, 1000.0), "TileLang") == ["TileLang faster than the memory roof allows"]


def test_bench_op_does_not_time_an_unverified_kernel():
    from evaluator import hardware, kernels
    fam = kernels.get("softmax")
    shape = (16, 32)
    kernel = fam.build(shape, "float32", fam.search_space(shape, "float32", hardware.detect("cpu"))[0], "c")
    ob = bench.bench_op(fam, shape, "float32", kernel, "cpu", source="model", config={}, verified=False,
                        policy=bench.TimingPolicy(reps=3))
    assert ob.tilelang is None and ob.speedup is None and not ob.verified and "verification" in ob.error
    ok = bench.bench_op(fam, shape, "float32", kernel, "cpu", source="model", config={},
                        policy=bench.TimingPolicy(reps=5))
    assert ok.tilelang is not None and ok.ratio is not None and ok.ratio.low <= ok.speedup <= ok.ratio.high


# ---------------------------------------------------------------- outputs of any structure


def test_outputs_compare_through_model_output_dicts_dataclasses_and_caches():
    import dataclasses

    import torch
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    @dataclasses.dataclass
    class Out:
        logits: torch.Tensor
        extra: tuple

    class Cache:
        def __init__(self, k):
            self.k = k

    x = torch.randn(4, 8) * 100  # large magnitude: an absolute tolerance would fail it
    ref = (BaseModelOutputWithPooling(last_hidden_state=x, pooler_output=x[:, 0]), {"o": Out(x, (x, 3))}, Cache(x))
    noisy = x * (1 + 1e-5)
    out = (BaseModelOutputWithPooling(last_hidden_state=noisy, pooler_output=noisy[:, 0]),
           {"o": Out(noisy, (noisy, 3))}, Cache(noisy))
    check = bench.compare_outputs(out, ref, "float32")
    assert check.ok and 0 < check.rel_l2 < 1e-4 and check.max_abs > 1e-4
    wrong = (BaseModelOutputWithPooling(last_hidden_state=x, pooler_output=x[:, 0] + 5), {"o": Out(x, (x, 3))},
             Cache(x))
    bad = bench.compare_outputs(wrong, ref, "float32")
    assert not bad.ok and "tolerance" in bad.reason
    assert not bench.compare_outputs((x,), (x, x), "float32").ok
    nan = x.clone()
    nan[0, 0] = float("nan")
    assert bench.compare_outputs(nan, x, "float32").reason == "NaN in the output"


def test_fp16_tolerance_scales_with_magnitude():
    import torch
    ref = torch.randn(64, 64, dtype=torch.float64) * 50
    out = ref + torch.randn_like(ref) * 0.05  # ~1e-3 relative: fine for fp16, not for fp32
    assert bench.compare_outputs(out, ref, "float16").ok
    assert not bench.compare_outputs(out, ref, "float32").ok


def test_amdahl_interval_from_op_ratios():
    from evaluator.results import Ratio
    est = bench.amdahl({"gemm": Ratio(2.0, 1.5, 2.5, 9)}, {"gemm": 0.5})
    assert est is not None
    mid, low, high = est
    assert abs(mid - 1 / (0.5 + 0.25)) < 1e-9 and low < mid < high
    assert bench.amdahl({}, {}) is None
