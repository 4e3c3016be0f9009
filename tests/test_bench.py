"""The op benchmark, roofline and Amdahl guards and launch overhead (the soak: test_soak.py)."""

import pytest
import math


from evaluator.measuring import bench


def test_launch_overhead_of_a_real_kernel():
    from evaluator.device import hardware
    from evaluator import kernels

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
    from evaluator.device import hardware
    from evaluator import kernels

    fam = kernels.get("softmax")
    shape = (16, 32)
    kernel = fam.build(shape, "float32", fam.search_space(shape, "float32", hardware.detect("cpu"))[0], "c")
    ob = bench.bench_op(
        fam,
        shape,
        "float32",
        kernel,
        "cpu",
        source="model",
        config={},
        verified=False,
        policy=bench.TimingPolicy(reps=3),
    )
    assert ob.tilelang is None and ob.speedup is None and not ob.verified and "verification" in ob.error
    ok = bench.bench_op(
        fam, shape, "float32", kernel, "cpu", source="model", config={}, policy=bench.TimingPolicy(reps=5)
    )
    assert ok.tilelang is not None and ok.ratio is not None and ok.ratio.low <= ok.speedup <= ok.ratio.high


def test_amdahl_interval_from_op_ratios():
    from evaluator.results import Ratio

    est = bench.amdahl({"gemm": Ratio(2.0, 1.5, 2.5, 9)}, {"gemm": 0.5})
    assert est is not None
    mid, low, high = est
    assert abs(mid - 1 / (0.5 + 0.25)) < 1e-9 and low < mid < high
    assert bench.amdahl({}, {}) is None


def test_amdahl_from_the_operator_times_inside_the_model():
    from evaluator.results import FamilyTime

    # GPT-2 on the H200 (2026-12-02): gemm_gelu_tanh replaced addmm and gelu_new's eight
    # elementwise kernels; its op benchmark (against one F.gelu) said 1.1x, the model 1.36x.
    rows = (FamilyTime("gemm", 0.40, 0.43, 0.43), FamilyTime("gemm_gelu_tanh", 0.60, 0.24, 0.24))
    (est, low, high) = bench.amdahl_in_model(rows, 1.6, {"gemm": 36, "gemm_gelu_tanh": 12})
    assert abs(est - 1.6 / (1.6 - (-0.03 + 0.36))) < 1e-9 and low == est == high
    # A family that ran in TileLang without a row: no estimate from these rows.
    assert bench.amdahl_in_model(rows, 1.6, {"gemm": 36, "gemm_gelu_tanh": 12, "layernorm": 25}) is None
    assert bench.amdahl_in_model(rows, 1.6, {"gemm": 36, "gemm_gelu_tanh": 12, "layernorm": 0}) is not None
    assert bench.amdahl_in_model(rows, 0.0, {"gemm": 36}) is None
    assert bench.amdahl_in_model((), 1.6, {}) is None


def test_in_model_family_times_and_their_flags():
    from test_profiling import _routed_layernorm_model

    model, x, router = _routed_layernorm_model()

    def routed():
        with router:
            return model(x)

    rows, flags, total = bench._in_model(
        lambda: model(x), routed, ("layernorm", "gemm"), "cpu", {"layernorm": 1, "gemm": 3}, {"layernorm": 1e6}
    )
    (ln,) = rows
    assert ln.family == "layernorm" and ln.reference_ms > 0 and ln.swapped_ms == ln.tilelang_ms > 0
    assert ln.ratio == ln.reference_ms / ln.swapped_ms
    assert total >= ln.reference_ms  # every family's operator time, layernorm's among them
    # Clearly worse inside the model than the op benchmarks said: flagged with both numbers.
    assert any(f.startswith("layernorm runs ") and "against 1000000.00x in the op benchmarks" in f for f in flags)
    # Calls counted as TileLang's that the profiler gave no time: said, and no row made up.
    assert "the profiler attributed no time to gemm's TileLang calls: no in-model time for gemm" in flags


@pytest.mark.slow
def test_each_family_alone_end_to_end_flags_one_that_makes_the_model_slower():
    import time

    import torch.nn.functional as F

    from evaluator import kernels
    from evaluator.routing import router as swap
    from evaluator.results import FamilyTime
    from test_profiling import _routed_layernorm_model

    model, x, router = _routed_layernorm_model()
    # The model's Linear (M 6, N 32, K 16) routed to a kernel that is right but slow: 20 ms
    # of host time a call, as a launch path can cost a small model.

    def slow_linear(a, w, b):
        time.sleep(0.02)
        return F.linear(a, w, b)

    router.table.add("gemm", (6, 32, 16), {}, slow_linear)
    both = swap.Router([kernels.get("layernorm"), kernels.get("gemm")], router.table)
    rows = (FamilyTime("layernorm", 0.02, 0.02, 0.02), FamilyTime("gemm", 0.01, 0.009, 0.009))
    out, flags, kept = bench._alone(lambda: model(x), both, rows, "cpu", bench.TimingPolicy(warmup=1, reps=7))
    ln, gemm = out
    assert ln.alone is not None and gemm.alone is not None
    assert gemm.alone.high < 0.9  # 20 ms added to a forward pass of a few ms at most
    assert both.only("gemm").families() == {"gemm"} and both.only("layernorm").families() == {"layernorm"}
    flag = next(f for f in flags if f.startswith("routing gemm alone makes the model"))
    # Its profiled operators looked faster (0.01 against 0.009 ms): the flag says so.
    assert "its operators run at 1.11x PyTorch's speed inside the model" in flag
    assert flag.endswith("leaving gemm to PyTorch would be faster")
    if not ln.slows_model:  # the TileLang layernorm on a busy CPU may be slower too; then nothing is kept
        # The model with gemm left to PyTorch, timed in rounds of its own. Its ratio is not
        # compared with gemm's alone: on CI's two shared cores two separately timed batches
        # have read 0.30x against 0.27x for a model that differs by 20 ms a call.
        assert kept is not None and kept.families == ("layernorm",) and kept.left == ("gemm",)
        assert kept.ratio.rounds >= 3 and kept.ratio.value > 0
    else:
        assert kept is None
    # One routed family: its end-to-end ratio is the run's own; nothing more is timed.
    assert bench._alone(lambda: model(x), both, rows[:1], "cpu", bench.TimingPolicy()) == (rows[:1], [], None)


def test_each_family_alone_is_not_timed_eagerly_where_graph_capture_failed(monkeypatch):
    from evaluator.results import FamilyTime

    real = bench.make_sampler

    def failing(fns, device, policy, **kw):
        sampler, timer, _ = real(fns, device, policy, **kw)
        return sampler, timer, "graph capture failed (RuntimeError: capture)"

    monkeypatch.setattr(bench, "make_sampler", failing)
    rows = (FamilyTime("layernorm", 0.02, 0.02, 0.02), FamilyTime("gemm", 0.01, 0.009, 0.009))
    from evaluator.routing import router as swap

    router = swap.Router([], swap.KernelTable("float32", "c"))
    out, flags, kept = bench._alone(lambda: None, router, rows, "cpu", bench.TimingPolicy(warmup=1, reps=3))
    assert out == rows and kept is None
    assert flags == ["each family alone not measured: graph capture failed (RuntimeError: capture)"]


def test_each_family_alone_is_timed_where_the_graph_took_the_models_own_capture_path(monkeypatch):
    # transformers GPT-2 on the H200 (2026-12-02): its eager path did not capture, its own
    # capture path did; that is graph replay still, so each family alone is timed.
    from evaluator.results import FamilyTime

    real = bench.make_sampler
    own = "graph captured on the model's own capture path (its eager path did not capture: AcceleratorError)"

    def own_path(fns, device, policy, **kw):
        sampler, _, _ = real(fns, device, policy, **kw)
        return sampler, "cuda_graph", own

    monkeypatch.setattr(bench, "make_sampler", own_path)
    rows = (FamilyTime("layernorm", 0.02, 0.02, 0.02), FamilyTime("gemm", 0.01, 0.009, 0.009))
    from evaluator.routing import router as swap

    router = swap.Router([], swap.KernelTable("float32", "c"))
    out, flags, _ = bench._alone(lambda: None, router, rows, "cpu", bench.TimingPolicy(warmup=1, reps=3))
    assert not any("not measured" in f for f in flags), flags
    assert all(r.alone is not None and r.alone.rounds >= 3 for r in out)


def test_in_model_failure_is_a_flag_not_a_crash():
    def boom():
        raise RuntimeError("device lost")

    rows, flags, total = bench._in_model(boom, boom, ("gemm",), "cpu", {}, {})
    assert total == 0.0 and rows == () and flags == ["in-model family times not measured: RuntimeError: device lost"]


def test_timers_disagree_says_whether_the_captured_forward_runs_other_kernels(monkeypatch):
    # transformers' BertModel on the H200 (2026-12-02): graph replay 2.131 ms, eager kernel
    # sum 0.810 ms, and one captured replay 1.773 ms of kernels in 413: another program,
    # not time between kernels.
    monkeypatch.setattr(bench, "graph_kernel_ms", lambda fn: (1.773, 413))
    note = bench._timers_disagree(lambda: None, 2.131, 0.810)
    assert note.startswith("graph replay runs 1.773 ms of kernels (413 kernels) against 0.810 ms eagerly")
    assert "another path while a CUDA graph is captured" in note
    # The same kernels captured as eagerly: the difference is the time between them.
    monkeypatch.setattr(bench, "graph_kernel_ms", lambda fn: (0.83, 290))
    assert "device time between kernels" in bench._timers_disagree(lambda: None, 2.131, 0.810)

    def no_capture(fn):
        raise RuntimeError("capture failed")

    monkeypatch.setattr(bench, "graph_kernel_ms", no_capture)
    assert "device time between kernels" in bench._timers_disagree(lambda: None, 2.131, 0.810)


def test_a_fused_patterns_note_is_not_a_layout_copy():
    from evaluator.results import CallCount
    from evaluator.routing.router import FUSED_INTO

    counts = [
        CallCount("conv2d", "1x64x56x56x64x3x3", 0, notes={f"{FUSED_INTO}conv_bn_relu": 3}),
        CallCount("gemm", "8x64x64", 4, notes={"inputs copied to contiguous": 2}),
        CallCount("attention", "1x2x16x16x32", 2, notes={"inputs copied to contiguous": 1}),
    ]
    assert bench.layout_copies(counts) == 3
