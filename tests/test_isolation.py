"""Candidates benchmarked in the isolated worker: one that segfaults, exits, hangs or
reports a poisoned CUDA context costs that candidate only — the failure is recorded with
its reason, a fresh worker takes over, and the good config still wins.

Each worker start imports torch and tilelang (several seconds on 2 cores), so the tests
share one worker where they can; the crashes restart it on purpose."""

import pickle

import pytest
import torch

import crashy_family
from evaluator.device import hardware
from evaluator.tuning import isolation, search as tuning
from evaluator.errors import KernelError


@pytest.fixture(scope="module")
def hw():
    yield hardware.detect("cpu")
    isolation.shutdown()


@pytest.mark.slow
def test_segfault_and_poisoned_context_are_recorded_and_the_good_config_wins(hw):
    before = isolation.stats()
    tk, kernel = tuning.tune(crashy_family.FAMILY, (64,), "float32", hw, isolate=True, budget_s=300)
    by_crash = {c.config["crash"]: c for c in tk.candidates}
    assert by_crash[1].status == "crashed" and "signal SIGSEGV" in by_crash[1].error
    assert by_crash[2].status == "runtime_error" and crashy_family.ILLEGAL_ADDRESS in by_crash[2].error
    assert "poisoned" in by_crash[2].error
    assert by_crash[0].status == "ok" and by_crash[0].latency_ms > 0
    assert tk.config == {"crash": 0} and kernel is not None
    (x,) = crashy_family.FAMILY.make_inputs((64,), "float32", "cpu", 5)
    torch.testing.assert_close(kernel(x), 2 * x)  # the best config is built in this process too
    after = isolation.stats()
    assert after["restarts"] - before["restarts"] == 2
    assert after["crashes"] - before["crashes"] == 1 and after["poisoned"] - before["poisoned"] == 1
    assert after["spawn_s"] and after["spawn_s"] > 0


@pytest.mark.slow
def test_hung_and_exiting_candidates_are_killed_and_recorded(hw):
    before = isolation.stats()
    tk, kernel = tuning.tune(
        crashy_family.HANGS, (64,), "float32", hw, isolate=True, budget_s=300, candidate_timeout_s=2
    )
    by_crash = {c.config["crash"]: c for c in tk.candidates}
    assert by_crash[3].status == "crashed" and "no result after 2s" in by_crash[3].error
    assert by_crash[4].status == "crashed" and "exited with code 7" in by_crash[4].error
    assert tk.config == {"crash": 0} and kernel is not None
    after = isolation.stats()
    assert after["restarts"] - before["restarts"] == 2 and after["timeouts"] - before["timeouts"] == 1


def test_the_worker_is_reused_across_tunes(hw):
    good = crashy_family.GOOD
    tuning.tune(good, (64,), "float32", hw, isolate=True)
    before = isolation.stats()
    tk, _ = tuning.tune(good, (64,), "float32", hw, isolate=True)
    assert tk.config == {"crash": 0} and tk.candidates[0].latency_ms > 0
    after = isolation.stats()
    assert after["started"] == before["started"]
    assert after["slots"][0]["pid"] == before["slots"][0]["pid"]  # one worker, slot 0, the whole time
    assert after["slots"][0]["requests"] == before["slots"][0]["requests"] + 1


def test_how_the_worker_finds_a_family(hw):
    assert isolation.family_spec(crashy_family.FAMILY) == ("attr", "crashy_family", "FAMILY")
    from evaluator import kernels

    assert isolation.family_spec(kernels.get("softmax")) == ("attr", "evaluator.kernels.softmax", "FAMILY")
    made_here = crashy_family.CrashyFamily([{"crash": 0}])
    kind, blob = isolation.family_spec(made_here)
    assert kind == "pickle" and pickle.loads(blob).space == [{"crash": 0}]
    made_here.hook = lambda: None  # a lambda does not pickle: the worker could not get this object
    assert isolation.family_spec(made_here) is None
    with pytest.raises(KernelError, match="isolate=False"):
        tuning.tune(made_here, (64,), "float32", hw, isolate=True)
    tk, _ = tuning.tune(made_here, (64,), "float32", hw)  # auto on CPU: in-process, no worker needed
    assert tk.config == {"crash": 0}


def test_poisoned_context_markers():
    assert isolation.is_poisoned("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert isolation.is_poisoned("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure")
    assert isolation.is_poisoned("misaligned address")
    assert not isolation.is_poisoned("mismatch: max abs err 0.1 > atol 1e-05")
