"""Tuning on several devices, proved on the CPU: two worker slots stand for two GPUs.

In: real TileLang C kernels (gemm, and the crashy test family) on small shapes, tuned with
`devices=[0, 1]` and isolation on; `parse_gpus` and `visible_gpus` with a faked CUDA.
Out: both slots time candidates side by side; the chosen config is re-timed on slot 0
alone and every latency reported for it is slot 0's; a candidate that kills its worker
costs that candidate and that slot's worker while the other slot works on, and a slot
whose worker cannot start leaves its work to the others (or to this process); one device is
exactly the single-worker search; a GPU slot's worker starts with CUDA_VISIBLE_DEVICES
set to its GPU and this process's environment untouched; shutdown ends a busy worker.

The workers import torch and tilelang (several seconds each on 2 cores), so the module
starts them once, in the background, and every test shares them. The last test runs the
same on two real GPUs and skips elsewhere.
"""

import dataclasses
import os
import threading
import time

import pytest
import torch

import crashy_family
from evaluator.device import hardware
from evaluator.tuning import isolation, search as tuning
from evaluator import kernels
from evaluator.errors import ConfigError

GEMM_SHAPE = (48, 40, 32)
ENV_SLOT, ENV_GPU = 2, "7"  # a third worker, spawned as if for GPU 7, to show what it sees


@pytest.fixture(scope="module")
def hw():
    isolation.shutdown()  # workers left by other modules belong to other slot layouts
    isolation.warm_up([(0, None), (1, None), (ENV_SLOT, ENV_GPU)])  # all three import while tests compile
    yield hardware.detect("cpu")
    isolation.shutdown()


def _slots():
    return isolation.stats()["slots"]


def _ready_both():
    isolation.wait_ready(0)
    isolation.wait_ready(1)


@pytest.mark.slow
def test_two_slots_time_side_by_side_and_the_best_is_retimed_on_slot_0(hw):
    _ready_both()  # so that both take work from the first candidate on
    before = _slots()
    fam = kernels.get("gemm")
    log = tuning.DeviceLog()
    tk, kernel = tuning.tune(
        fam, GEMM_SHAPE, "float32", hw, isolate=True, devices=[0, 1], device_log=log, budget_s=300, fine_rounds=0
    )
    # listed in the search space's order, whatever order they finished in
    assert [c.config for c in tk.candidates] == fam.search_space(GEMM_SHAPE, "float32", hw)
    assert all(c.status == "ok" for c in tk.candidates) and len(log.devices) == len(tk.candidates)
    first_device = {tuple(sorted(r["config"].items())): r["first_device"] for r in log.retimed}
    first = [first_device.get(tuple(sorted(c.config.items())), d) for c, d in zip(tk.candidates, log.devices)]
    assert set(first) == {"cpu:0", "cpu:1"}  # both slots timed candidates
    # the chosen config, and a runner-up within 5%, were timed again on slot 0 alone ...
    assert log.retimed and {r["device"] for r in log.retimed} == {"cpu:0"}
    chosen = next(i for i, c in enumerate(tk.candidates) if c.config == tk.config)
    final = [r for r in log.retimed if r["config"] == tk.config]
    assert final and log.devices[chosen] == "cpu:0"
    # ... and the latency the result reports for it is that re-time, the fastest listed
    assert tk.candidates[chosen].latency_ms == final[-1]["latency_ms"]
    assert tk.candidates[chosen].latency_ms == min(c.latency_ms for c in tk.candidates)
    assert all(r["first_latency_ms"] > 0 and r["first_device"] in ("cpu:0", "cpu:1") for r in log.retimed)
    after = _slots()
    ran = sum(after[i]["requests"] - before[i]["requests"] for i in (0, 1))
    assert ran == len(tk.candidates) + len(log.retimed)
    x, w, b = fam.make_inputs(GEMM_SHAPE, "float32", "cpu", 7)
    torch.testing.assert_close(kernel(x, w, b), torch.nn.functional.linear(x, w, b), atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_a_crash_on_one_slot_costs_one_candidate_and_the_other_slot_works_on(hw):
    _ready_both()
    before, stats_before = _slots(), isolation.stats()
    fam = crashy_family.CrashyFamily([{"crash": 1}, {"crash": 0}, {"crash": 5}, {"crash": 6}])  # 5, 6 work
    log = tuning.DeviceLog()
    tk, _ = tuning.tune(
        fam, (64,), "float32", hw, isolate=True, devices=[0, 1], device_log=log, budget_s=300, fine_rounds=0
    )
    statuses = {c.config["crash"]: c.status for c in tk.candidates}
    assert statuses == {1: "crashed", 0: "ok", 5: "ok", 6: "ok"}
    assert "signal SIGSEGV" in tk.candidates[0].error and tk.config["crash"] in (0, 5, 6)
    crashed_on = log.devices[0]
    other = 1 - int(crashed_on.split(":")[1])
    after = _slots()
    assert after[1 - other]["pid"] != before[1 - other]["pid"]  # the crashed slot got a fresh worker
    assert after[other]["pid"] == before[other]["pid"]  # the other one never stopped
    assert after[other]["requests"] > before[other]["requests"]  # and timed working candidates meanwhile
    assert log.devices[tk.candidates.index(next(c for c in tk.candidates if c.config == tk.config))] == "cpu:0"
    stats_after = isolation.stats()
    assert stats_after["crashes"] - stats_before["crashes"] == 1
    assert stats_after["restarts"] - stats_before["restarts"] == 1


def test_one_device_is_exactly_the_single_worker_search(hw):
    isolation.wait_ready(0)
    fam = kernels.get("gemm")
    before = _slots()
    log = tuning.DeviceLog()
    one, _ = tuning.tune(fam, GEMM_SHAPE, "float32", hw, isolate=True, devices=[0], device_log=log, fine_rounds=0)
    plain, _ = tuning.tune(fam, GEMM_SHAPE, "float32", hw, isolate=True, fine_rounds=0)
    assert [(c.config, c.status, c.phase, c.error) for c in one.candidates] == [
        (c.config, c.status, c.phase, c.error) for c in plain.candidates
    ]
    assert log.devices == [None] * len(one.candidates) and log.retimed == []  # nothing re-timed
    after = _slots()
    assert after[0]["requests"] - before[0]["requests"] == 2 * len(one.candidates)
    assert after[1]["requests"] == before[1]["requests"] and after[0]["pid"] == before[0]["pid"]


def test_a_slot_that_cannot_start_leaves_its_work_to_the_others(hw, monkeypatch):
    isolation.wait_ready(0)
    real = isolation.wait_ready

    def slot_1_broken(slot=0, gpu=None, timeout=None):
        if slot == 1:
            raise isolation.WorkerStartError("tuning worker failed to start: (slot 1 made to fail)")
        return real(slot, gpu, timeout)

    monkeypatch.setattr(isolation, "wait_ready", slot_1_broken)
    log = tuning.DeviceLog()
    tk, kernel = tuning.tune(
        kernels.get("gemm"), GEMM_SHAPE, "float32", hw, isolate=True, devices=[0, 1], device_log=log, fine_rounds=0
    )
    assert kernel is not None and all(c.status == "ok" and not c.error for c in tk.candidates)
    assert set(log.devices) == {"cpu:0"} and log.retimed  # slot 0 did it all, and re-timed the best
    # with no slot left, the candidates run in this process and say why
    monkeypatch.setattr(isolation, "wait_ready", lambda *a, **k: slot_1_broken(1))
    monkeypatch.setattr(isolation, "run_candidate", lambda *a, **k: slot_1_broken(1))
    tk, kernel = tuning.tune(
        kernels.get("gemm"), GEMM_SHAPE, "float32", hw, isolate=True, devices=[0, 1], device_log=log, fine_rounds=0
    )
    assert kernel is not None and all(c.status == "ok" for c in tk.candidates)
    assert all("evaluated in-process" in c.error and "slot 1 made to fail" in c.error for c in tk.candidates)
    assert set(log.devices) == {None} and log.retimed == []


def test_a_gpu_slot_worker_sees_its_gpu_alone(hw):
    parent = os.environ.get("CUDA_VISIBLE_DEVICES")
    isolation.wait_ready(ENV_SLOT, ENV_GPU)
    slots = _slots()
    assert slots[ENV_SLOT]["visible"] == ENV_GPU and slots[ENV_SLOT]["gpu"] == ENV_GPU
    assert slots[0]["visible"] == parent  # a slot without a GPU inherits this process's setting
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == parent  # set for the spawn only


def test_devices_map_to_the_visible_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert tuning.visible_gpus() == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,GPU-8f2a,3")  # CUDA stopped at an entry it could not use
    assert tuning.visible_gpus() == ["5", "GPU-8f2a"]
    cuda = dataclasses.replace(hardware.detect("cpu"), device="cuda")
    assert [(s.index, s.gpu, s.label) for s in tuning.gpu_slots([1, 0], cuda)] == [
        (0, "GPU-8f2a", "cuda:1"),
        (1, "5", "cuda:0"),
    ]
    assert [(s.index, s.gpu, s.label) for s in tuning.gpu_slots([1], cuda)] == [(0, "GPU-8f2a", None)]
    assert [(s.index, s.gpu, s.label) for s in tuning.gpu_slots(None, cuda)] == [(0, None, None)]
    with pytest.raises(ConfigError, match="cuda:2 is not visible"):
        tuning.gpu_slots([0, 2], cuda)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert tuning.visible_gpus() == []


@pytest.mark.parametrize(
    "spec, visible, want",
    [
        ("all", ["0", "1"], [0, 1]),
        ("ALL", 3, [0, 1, 2]),
        ("2", 2, [0, 1]),
        ("1", 2, [0]),
        ("1,", 2, [1]),
        ("1,0", ["3", "5"], [1, 0]),
        ("0, 1", 2, [0, 1]),
    ],
)
def test_parse_gpus(spec, visible, want):
    assert tuning.parse_gpus(spec, visible) == want


@pytest.mark.parametrize(
    "spec, visible, message",
    [
        ("3", 2, "--gpus 3 asks for 3 GPUs but 2 GPUs are visible (0, 1); give all, a count from 1 to 2"),
        ("0", 2, "asks for 0 GPUs"),
        ("2,", ["4", "6"], "--gpus 2, names GPU 2 but 2 GPUs are visible (4, 6); give indices from 0 to 1"),
        ("0,0", 2, "names a GPU twice"),
        ("0,,1", 2, "not understood; give all, a count (2), or comma-separated GPU indices"),
        (",", 2, "not understood"),
        ("-1", 2, "not understood"),
        ("two", 2, "not understood"),
        ("", 2, "not understood"),
        ("all", 0, "no GPU is visible"),
        ("1", [], "no GPU is visible"),
    ],
)
def test_parse_gpus_says_what_was_expected(spec, visible, message):
    with pytest.raises(ConfigError) as err:
        tuning.parse_gpus(spec, visible)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_several_devices_need_isolation_and_distinct_devices(hw):
    with pytest.raises(ConfigError, match="needs isolated workers"):
        tuning.tune(kernels.get("gemm"), GEMM_SHAPE, "float32", hw, isolate=False, devices=[0, 1])
    with pytest.raises(ConfigError, match="repeats a device"):
        tuning.tune(kernels.get("gemm"), GEMM_SHAPE, "float32", hw, isolate=True, devices=[1, 1])


@pytest.mark.slow
def test_shutdown_ends_a_busy_worker_without_starting_another(hw):
    isolation.wait_ready(1)
    started = isolation.stats()["started"]
    spec = isolation.family_spec(crashy_family.HANGS)
    out = {}
    run = threading.Thread(
        target=lambda: out.update(
            isolation.run_candidate(
                spec,
                (64,),
                "float32",
                {"crash": 3},
                hw.target,
                "cpu",
                tuning.TimingPolicy(warmup=1, reps=3),
                1e-6,
                1e-6,
                timeout_s=60,
                slot=1,
            )
        )
    )
    run.start()
    time.sleep(1.0)  # the candidate is hanging in slot 1's worker now
    isolation.shutdown()
    run.join(timeout=30)
    assert not run.is_alive() and out["status"] == "crashed" and "shut down" in out["error"]
    assert isolation.stats()["started"] == started and not any(s["alive"] for s in _slots().values())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_two_gpus_one_worker_each():
    """The same search on real GPUs: each worker sees only its own GPU, both time, the best
    is re-timed on the first, and the kernel it picked is right."""
    hw = hardware.detect("cuda")
    visible = tuning.visible_gpus()
    log = tuning.DeviceLog()
    tk, kernel = tuning.tune(
        kernels.get("gemm"),
        (1024, 768, 768),
        "float16",
        hw,
        budget_s=300,
        fine_rounds=0,
        devices=tuning.parse_gpus("2", visible),
        device_log=log,
    )
    slots = _slots()
    assert [slots[i]["visible"] for i in (0, 1)] == visible[:2] and slots[0]["pid"] != slots[1]["pid"]
    assert set(log.devices) - {None} <= {"cuda:0", "cuda:1"} and {r["device"] for r in log.retimed} == {"cuda:0"}
    fam = kernels.get("gemm")
    x, w, b = fam.make_inputs((1024, 768, 768), "float16", "cuda", 3)
    atol, rtol = fam.tolerance("float16", (1024, 768, 768))
    torch.testing.assert_close(kernel(x, w, b), torch.nn.functional.linear(x, w, b), atol=atol, rtol=rtol)
    isolation.shutdown()
