"""benchmarks/kernel_sweep.py's selection, without a GPU: the cases `--only` builds for an
H200 and what `--shapes` keeps of them; and, on a machine without CUDA, one line and exit 2.

In: the script's functions and the script itself. Out: pass/fail.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.hardware import H200

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("kernel_sweep", ROOT / "benchmarks" / "kernel_sweep.py")
ks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ks)


def test_shapes_keeps_only_the_named_cases_and_fast_math_is_timed_both_ways():
    todo = ks.only_shapes(ks.cases({"attention", "rows"}, H200), "16x12x197x197x64x0,37824x197")
    assert [(f, s) for f, s, _, _ in todo] == [("attention", (16, 12, 197, 197, 64, 0)), ("softmax", (37824, 197))]
    for fam, shape, configs, own in todo:
        # The family's first config, and the same built without fast math beside it.
        assert configs[0] == own[0] and {**own[0], "fast_math": False} in configs
    assert ks.only_shapes(todo, "1x2x3") == []
    swap = ks.only_shapes(ks.cases({"swap"}, H200), "1024x768x768")
    assert any(c.get("swap_ab") and c["block_N"] == 48 for c in swap[0][2])


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_without_cuda_one_line_and_exit_2():
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kernel_sweep.py"), "--only", "attention"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "CUDA" in run.stderr


def test_gated_times_the_swiglu_products_space_and_the_ping_pong_grid():
    todo = ks.cases({"gated"}, H200)
    assert [(f, s) for f, s, _, _ in todo] == ks.GEMM_GATED
    for fam, shape, configs, own in todo:
        assert configs[: len(own)] == own and any(c["pingpong"] for c in configs)
        if fam == "gemm_mul":  # whole-K programs only: nothing that splits K
            assert not any(c["split_k"] > 1 or c["cluster"] or c["stream_k"] for c in configs)


def test_conv_bn_times_resnet50s_patterns_on_the_familys_space_and_the_nchw_tiles():
    todo = ks.cases({"conv_bn"}, H200)
    assert [(f, s) for f, s, _, _ in todo] == ks.CONV_BN
    assert {f for f, _ in ks.CONV_BN} == {"conv_bn", "conv_bn_relu", "conv_bn_add_relu"}
    for fam, shape, configs, own in todo:
        assert own and configs[: len(own)] == own and len(configs) > len(own)
        assert not any(c.get("stream") or c.get("gemm") for c in configs)


def test_conv_bn_cl_times_the_channels_last_patterns_over_wider_tiles_and_the_1x1s_as_conv2d():
    todo = ks.cases({"conv_bn_cl"}, H200)
    fused = [(f, s) for f, s, _, _ in todo if f != "conv2d"]
    assert fused == ks.CONV_BN_CL and all(s[9] == 0 for _, s in fused)  # channels_last
    plain = [s for f, s, _, _ in todo if f == "conv2d"]
    assert plain == ks.CONV_CL_1X1
    for fam, shape, configs, own in todo:
        assert own and configs[: len(own)] == own
        wide = [c for c in configs if c["block_M"] * c["block_N"] >= 128 * 256]
        assert wide, f"{fam} {shape}: no 256-wide tile beyond the space"
        if fam == "conv_bn_add_relu":  # each tile both ways: the residual per element and as one copy
            assert {c.get("r_shared", 0) for c in wide} == {0, 1}
        if fam == "conv2d":  # the gemm family's ping-pong schedule on the GEMM view
            assert any(c.get("gemm") for c in own)
