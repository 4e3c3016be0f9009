"""GEMM's experimental `cluster` = 2 configs (block pairs along N sharing A by TMA
multicast) against F.linear on a Hopper GPU: the llama shape 512x2048x2048 and one with
tails in M, N and K, fp16 and bf16, several seeds; the fused GELU epilogue once.

In: the GPU (skipped without CUDA, or before sm_90). Out: pass/fail. verify() adds the
family's awkward shape, whose K (not a multiple of 8) TMA cannot address and whose
column tiles may not pair: the config must be refused there by config_error, not run;
where its aligned awkward shape (tails at multiples of 8) pairs, it runs there and must pass.
"""

import pytest

from evaluator import kernels
from evaluator.tuning import verify

PAIR = {"cluster": 2, "swizzle": False}
CONFIGS = [
    {**PAIR, "block_M": 64, "block_N": 128, "block_K": 128, "num_stages": 3, "threads": 128},
    {**PAIR, "block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 4, "threads": 256, "policy": "fullrow"},
]
SHAPES = [(512, 2048, 2048), (1000, 1000, 3000)]  # the second: no tile divides M, N or K


@pytest.fixture(scope="module")
def hw(hopper_hw):
    return hopper_hw


def _check(res):
    awkward = res.cases[-1]  # verify's own awkward shape comes last
    assert all(c.passed for c in res.cases[:-1]), [c for c in res.cases[:-1] if not c.passed]
    # Run on aligned tails where the column tiles pair, else refused by config_error
    # (K off multiples of 8, or an odd number of column tiles) under the family's own name.
    assert awkward.passed or f"{res.family}: cluster" in awkward.reason, awkward


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("cfg", CONFIGS, ids=["64x128", "128x128"])
def test_gemm_cluster_matches_linear(cfg, shape, dtype, hw):
    _check(verify.verify(kernels.get("gemm"), shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1, 2)))


def test_gemm_gelu_cluster_matches_linear(hw):
    _check(
        verify.verify(
            kernels.get("gemm_gelu"), (512, 2048, 5632), "float16", CONFIGS[0], hw.target, "cuda", seeds=(0, 1)
        )
    )
