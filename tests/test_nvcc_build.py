"""benchmarks/nvcc_build.py: every family built by nvcc for a CUDA target this machine
does not have (no GPU), through TileLang's own build; bad input is one line and exit 2.

In: the script's command line. Out: its lines and exit status.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "nvcc_build.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(
    "args, said",
    [
        (["--target", "hip:gfx942"], "expected a CUDA target"),
        (["--target", "cuda:sm_77"], "no part in the target table has arch sm_77"),
        (["--only", "nope"], "unknown families nope"),
        (["--configs", "0"], "expected 1 or more"),
        (["--card", "gfx942"], "expected an arch like sm_90"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, said):
    run = _run(*args)
    assert run.returncode == 2 and said in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_an_sm_80_build_for_a_hopper_card_compiles_here():
    run = _run("--only", "rope", "--configs", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 built, 0 failed, for cuda -arch=sm_80 -code=sm_80,sm_90" in run.stdout
