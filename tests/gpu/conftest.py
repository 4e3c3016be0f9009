"""Everything under tests/gpu needs CUDA: without it the whole folder is skipped cleanly.
`hw` is the device as the tests build for it: its own architecture, or `--gpu-target`."""

import pytest
import torch

from evaluator.device import hardware


def pytest_collection_modifyitems(config, items):
    here = str(__file__).rsplit("/", 1)[0]
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gpu)
            if not torch.cuda.is_available():
                item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


@pytest.fixture(scope="module")
def hw(request):
    return hardware.detect("cuda", request.config.getoption("--gpu-target"))


@pytest.fixture(scope="module")
def hopper_hw(hw):
    """For schedules that need Hopper's own instructions: skipped on an older build target."""
    if hw.arch and hw.arch.startswith("sm_") and int(hw.arch[3:5]) < 90:
        pytest.skip(f"wgmma, TMA and thread-block clusters need sm_90 or newer; building for {hw.arch}")
    return hw
