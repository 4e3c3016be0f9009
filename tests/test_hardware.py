import pytest

from evaluator import hardware
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
