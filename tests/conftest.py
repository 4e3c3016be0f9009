import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from samples import sample_result  # noqa: E402

# One torch thread per xdist worker: the workers already fill the cores, and two OpenMP
# threads each on a 2-core CI host wait on each other's barriers across scheduler quanta.
# Measured with two busy processes beside it: resnet-tiny's conv2d read 0.54-1.06 ms a
# pass on one thread and 0.8-752 ms on two, which is how CI ranked its 0.03 ms gemm head,
# and once its batchnorm, above the convolutions (`python3 benchmarks/profile_contention.py`
# measures it again: another run, 0.59-0.75 ms and conv2d first in 8 of 8 runs on one
# thread; 0.88-1.13 ms and 7 of 8 on two). `-n 0` keeps torch's own default.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)


def pytest_addoption(parser):
    # tests/gpu build for the device's own architecture unless told otherwise: an H200
    # runs code built for sm_80, so `--gpu-target cuda:sm_80` checks the Ampere schedules
    # on a Hopper card.
    parser.addoption(
        "--gpu-target",
        default=None,
        help="the TileLang target tests/gpu build for, as --target spells it (default: the device's own)",
    )


@pytest.fixture
def result():
    """A complete synthetic RunResult (see tests/samples.py)."""
    return sample_result()
