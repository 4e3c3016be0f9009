"""benchmarks/ptx_stats.py: a config lowered for sm_90a and built by nvcc here, no GPU; the
wgmma shapes counted in its PTX and ptxas's register and spill lines.

In: a gemm config. Out: the counts and lines the script prints; exit 2 and one line on bad input.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("ptx_stats", ROOT / "benchmarks" / "ptx_stats.py")
ps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ps)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_ping_pong_tile_counts_its_wgmma_and_ptxas_lines():
    cfg = {"block_M": 128, "block_N": 64, "num_stages": 4, "pingpong": 1, "persistent": 132}
    counts, lines = ps.stats("gemm", (1024, 1024, 256), cfg)
    # One shape only: 128 rows as two 64-row wgmmas, four 16-deep slices of each 64-deep
    # k-step, for each of two consumers (16), in each copy of the k-loop the compiler keeps.
    ((name, n),) = counts.items()
    assert name == "wgmma.mma_async.sync.aligned.m64n64k16" and n % 16 == 0
    assert any("registers" in ln for ln in lines) and any("spill" in ln for ln in lines)


@pytest.mark.slow
def test_bad_shape_is_one_line_and_exit_2():
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ptx_stats.py"), "gemm", "3152by3072", "{}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "expected a shape" in run.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_family_with_kernel_parameters_and_fast_math():
    # layernorm's eps rides in the config; softmax builds with --use_fast_math, so its
    # exp is ex2.approx.ftz and the script says how it was built.
    counts, lines = ps.stats("layernorm", (3152, 768), {"block_rows": 4, "threads": 256})
    assert any("registers" in ln for ln in lines)
    counts, lines = ps.stats("softmax", (1024, 768), {"block_rows": 4, "threads": 128})
    assert counts.get("ex2.approx.ftz.f32") and "ex2.approx.f32" not in counts
    assert any("--use_fast_math" in ln for ln in lines)
