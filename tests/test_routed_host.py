"""benchmarks/routed_host.py: bad input is one line and exit 2 (the measurement itself
needs a run folder that `evaluate` wrote; docs/results.md quotes one).

In: the script's command line. Out: its exit status and stderr.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "routed_host.py"

pytestmark = pytest.mark.slow  # each case starts a Python that imports torch: about a second


@pytest.mark.parametrize(
    "make, args, said",
    [
        (False, [], "is not a run folder (config.json and results.json)"),
        (True, ["--rounds", "0"], "--rounds must be a positive integer"),
        (True, [], "config.json does not load"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, make, args, said):
    if make:
        (tmp_path / "config.json").write_text("{}")
        (tmp_path / "results.json").write_text("{}")
    cmd = [sys.executable, str(SCRIPT), str(tmp_path), *args]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and said in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
