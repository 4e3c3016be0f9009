import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from samples import sample_result  # noqa: E402


@pytest.fixture
def result():
    """A complete synthetic RunResult (see tests/samples.py)."""
    return sample_result()
