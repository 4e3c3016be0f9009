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
    assert bench.TimingPolicy().describe("cpu")["timer"] == "perf_counter"
    assert bench.TimingPolicy().describe("cuda")["timer"] == "cuda_event"


def test_a_noisy_measurement_is_remeasured_then_flagged():
    import itertools
    import time
    pattern = itertools.cycle([0.001, 0.001, 0.001, 0.008])
    t = bench.time_callable(lambda: time.sleep(next(pattern)), "cpu",
                            bench.TimingPolicy(warmup=0, reps=12, max_cv_cpu=0.05))
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
