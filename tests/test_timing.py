"""The device timer: interleaved rounds, bootstrap ratios, disturbed rounds dropped, noisy timings flagged."""

import math

import pytest
import torch
from unittest import mock

from evaluator.measuring import timing
from evaluator.measuring import timing as bench


def test_summarize_statistics():
    t = bench.summarize([1.0, 2.0, 3.0, 4.0, 100.0], "perf_counter")
    assert t.median_ms == 3.0 and t.reps == 5
    assert t.p10_ms == 1.0 + 0 and t.p90_ms == 100.0
    assert math.isclose(t.mean_ms, 22.0)
    assert t.cv > 1.0  # one outlier makes the spread obvious


def test_time_callable_counts_reps_and_measures_sleep():
    import time

    t = bench.time_callable(lambda: time.sleep(0.002), "cpu", bench.TimingPolicy(warmup=1, reps=7))
    # A round another job disturbed (over twice the median) is dropped and counted, not lost:
    # on a loaded CI machine the kept rounds alone are not always 7.
    assert t.reps + t.dropped == 7 and t.reps >= 3
    assert 1.5 < t.median_ms < 50


def test_timing_policy_describes_the_timer():
    assert bench.TimingPolicy().describe("cpu")["timer"] == "perf_counter_interleaved"
    assert bench.TimingPolicy().describe("cuda")["timer"] == "cuda_graph"


def test_a_noisy_measurement_is_remeasured_then_flagged():
    import itertools
    import time

    # Spread within 2x of the median is not "outside load" (that is dropped), it is noise.
    pattern = itertools.cycle([0.001, 0.0018])
    t = bench.time_callable(
        lambda: time.sleep(next(pattern)),
        "cpu",
        bench.TimingPolicy(warmup=0, reps=12, max_cv_cpu=0.05, sample_ms_cpu=0.0),
    )
    assert t.unstable and t.cv > 0.05
    steady = bench.time_callable(lambda: None, "cpu", bench.TimingPolicy(warmup=0, reps=5, max_cv_cpu=10))
    assert not steady.unstable


def test_one_disturbed_round_does_not_make_a_number_unstable():
    # bert-base's layernorm_residual on the H200: 19 rounds within 3.25-3.33 us, one at 5 us.
    rounds = [3.25 + 0.004 * i for i in range(19)] + [5.0]
    t = bench.summarize([r / 1e3 for r in rounds], "cuda_graph")
    assert t.cv > 0.05 and bench.spread(t) < 0.02
    # half the rounds slow is not one disturbed round: it stays flagged
    bimodal = bench.summarize([1.0, 1.8] * 10, "cuda_graph")
    assert bench.spread(bimodal) > 0.2


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


def test_a_capture_is_hidden_from_the_model_unless_it_must_see_it(monkeypatch):
    """transformers asks torch.cuda whether a stream is capturing and then takes another
    path (H200: BertModel's SDPA on the MATH backend); the timer's capture answers False,
    and the retry for a model whose eager path cannot be captured answers as torch does."""
    import torch

    from evaluator.measuring import timing

    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with timing.unobserved_capture():
        assert torch.cuda.is_current_stream_capturing() is False
    assert torch.cuda.is_current_stream_capturing() is True
    with timing.model_sees_capture(), timing.unobserved_capture():
        assert torch.cuda.is_current_stream_capturing() is True
    with timing.unobserved_capture():
        assert torch.cuda.is_current_stream_capturing() is False


def test_captured_hides_the_capture_first_then_lets_the_model_see_it():
    # The timer's and the soak's one way to capture: hidden, else the model's own path.
    seen = []

    def make():
        seen.append(timing._hide_capture)
        if timing._hide_capture:
            raise RuntimeError("capture of a host sync")
        return "graph"

    got, first, how = timing.captured(make)
    assert got == "graph" and isinstance(first, RuntimeError) and seen == [True, False] and how == "own path"
    assert timing._hide_capture  # restored
    assert timing.captured(lambda: "hidden worked") == ("hidden worked", None, "hidden")

    tries = []

    def never():
        tries.append((timing._hide_capture, timing._fill_scalars))
        raise ValueError("no")

    with pytest.raises(ValueError):
        timing.captured(never)
    assert timing._hide_capture and not timing._fill_scalars
    # hidden, the model's own path, then hidden with its host numbers filled on the device
    assert tries == [(True, False), (False, False), (True, True)]


def test_a_host_number_copied_to_the_device_is_filled_there_in_the_last_capture_try():
    # transformers' eager attention mask: torch.tensor(0.0, device=..., dtype=...), a copy
    # from pageable host memory that a CUDA graph cannot hold (GPT-J under transformers 5.17)
    made = []

    def make():
        with timing.unobserved_capture():
            t = torch.tensor(0.0, device="meta", dtype=torch.float16)
            kept = torch.tensor([1.0, 2.0], device="meta")  # not one number: as called
            cpu = torch.tensor(3, device="cpu")  # on the host: as called
        made.append((t, kept, cpu))
        if not timing._fill_scalars:
            raise RuntimeError("Cannot copy between CPU and CUDA tensors during CUDA graph capture")
        return "graph"

    with mock.patch.object(torch, "full", wraps=torch.full) as full:
        assert timing.captured(make)[2] == "scalars filled"
    assert full.call_args_list == [mock.call((), 0.0, dtype=torch.float16, device="meta")]
    t, kept, cpu = made[-1]
    assert t.dtype == torch.float16 and t.shape == () and kept.shape == (2,) and cpu.item() == 3
