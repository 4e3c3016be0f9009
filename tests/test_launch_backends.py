"""benchmarks/launch_backends.py: bad input is one line and exit 2, on any machine; the
measurement itself needs a CUDA device (tests/gpu runs the script there).

In: the script's command line. Out: its exit status and stderr.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "launch_backends.py"


@pytest.mark.parametrize(
    "args, said",
    [
        (["--shape", "12a"], "expected integers joined by x"),
        (["--family", "nope"], "--family nope: expected one of"),
        (["--calls", "0"], "expected 1 or more"),
    ]
    + ([] if torch.cuda.is_available() else [([], "needs a CUDA device")]),
)
def test_bad_input_is_one_line_and_exit_2(args, said):
    run = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and said in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
