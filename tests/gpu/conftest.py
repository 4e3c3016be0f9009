"""Everything under tests/gpu needs CUDA: without it the whole folder is skipped cleanly."""

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    here = str(__file__).rsplit("/", 1)[0]
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gpu)
            if not torch.cuda.is_available():
                item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
