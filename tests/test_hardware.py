import pytest

from evaluator.device import hardware
from evaluator.errors import DeviceError


def test_cpu_identity():
    hw = hardware.detect("cpu")
    assert hw.target == "c" and hw.device == "cpu"
    assert hw.platform.startswith("cpu-") and hw.cores >= 1 and hw.name


def test_resolve_device():
    assert hardware.resolve_device("cpu") == "cpu"
    assert hardware.resolve_device("auto") in ("cpu", "cuda")
    with pytest.raises(DeviceError):
        hardware.resolve_device("npu")


def test_platform_slug_and_published_peaks():
    assert hardware._slug("NVIDIA H200") == "h200"
    assert hardware._slug("Weird Accelerator 9000") == "weird-accelerator-9000"
    assert hardware.PEAKS["h200"][1] > hardware.PEAKS["h100"][1]


@pytest.mark.slow
def test_measured_ceilings(tmp_path):
    cache = tmp_path / "ceilings.json"
    hw = hardware.measure_ceilings(hardware.detect("cpu"), "float32", cache=cache)
    assert hw.measured_tflops > 0 and hw.measured_gbps > 0 and "matmul" in hw.ceilings_note
    assert not cache.exists()  # CPU ceilings are re-measured every run; only GPU ones are cached


def test_gpu_ceilings_come_from_the_cache(tmp_path):
    import dataclasses
    import json

    gpu = dataclasses.replace(hardware.detect("cpu"), device="cuda", name="NVIDIA H200", driver="580")
    cache = tmp_path / "ceilings.json"
    key = "|".join(("NVIDIA H200", "580", __import__("torch").__version__, "float16"))
    cache.write_text(json.dumps({key: {"measured_tflops": 742.2, "measured_gbps": 4088.4, "ceilings_note": "n"}}))
    hw = hardware.measure_ceilings(gpu, "float16", cache=cache)
    assert hw.measured_tflops == 742.2 and hw.measured_gbps == 4088.4
