"""Which GPUs a tune runs on (evaluator/gpus.py): compile threads per device. (`--gpus`
parsing and the slots are exercised with the multi-device search, test_multi_device_tuning.py.)

In: a faked core count. Out: pass/fail."""

from evaluator.tuning import gpus


def test_compile_threads_grow_with_the_devices_tuned_on(monkeypatch):
    monkeypatch.setattr(gpus.os, "cpu_count", lambda: 64)
    assert [gpus.compile_workers(n) for n in (0, 5, 40)] == [1, 5, 16]
    assert gpus.compile_workers(40, 2) == 32 and gpus.compile_workers(100, 8) == 64
