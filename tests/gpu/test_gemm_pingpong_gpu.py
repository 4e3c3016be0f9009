"""GEMM's experimental `pingpong` configs (persistent tiles taken in turn by two consumer
warpgroups) against F.linear on a Hopper GPU: model shapes and one with tails in M, N
and K, fp16 and bf16, several seeds, one tile per block and many; the fused GELU
epilogue once; and the same inputs run 20 times giving the same bits, which a race on a
ring stage or an output tile would break.

In: the GPU (skipped without CUDA, or before sm_90). Out: pass/fail. verify() adds the
family's awkward shape the config accepts: the first (K off multiples of 8) is refused,
since TMA cannot address its rows, so it checks tails at multiples of 8.
"""

import pytest
import torch

from evaluator import hardware, kernels, verify

PING = {"pingpong": 1, "threads": 128}
CONFIGS = {
    "128x128x4": {**PING, "block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 4, "persistent": 132},
    "64x256x4": {**PING, "block_M": 64, "block_N": 256, "block_K": 64, "num_stages": 4, "persistent": 132},
    # Few blocks, so each walks many tiles and the ring's phases wrap many times.
    "128x64x8-7blocks": {**PING, "block_M": 128, "block_N": 64, "block_K": 64, "num_stages": 8, "persistent": 7},
}
# 1024x3072x768 at 128x128: 192 tiles on 132 blocks, so some blocks' second consumer has
# no tile (it hung there before its rounds were guarded).
SHAPES = [(3152, 3072, 768), (1000, 1000, 3000), (512, 2048, 2048), (1024, 768, 3072), (1024, 3072, 768)]


@pytest.fixture(scope="module")
def hw():
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("wgmma and setmaxnreg need sm_90 or newer")
    return hardware.detect("cuda")


def _check(res):
    assert res.passed, [c for c in res.cases if not c.passed]
    awkward = res.cases[-1]  # verify's own awkward shape comes last: tails at multiples of 8
    assert all(d % 16 and d % 8 == 0 for d in awkward.shape), awkward


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_gemm_pingpong_matches_linear(name, shape, dtype, hw):
    _check(verify.verify(kernels.get("gemm"), shape, dtype, CONFIGS[name], hw.target, "cuda", seeds=(0, 1, 2)))


def test_gemm_gelu_pingpong_matches_linear(hw):
    _check(verify.verify(kernels.get("gemm_gelu"), (2048, 3072, 768), "float16", CONFIGS["128x128x4"], hw.target,
                         "cuda", seeds=(0, 1)))


@pytest.mark.parametrize("name", ["128x128x4", "128x64x8-7blocks"])
def test_gemm_pingpong_is_deterministic(name, hw):
    fam = kernels.get("gemm")
    shape = (3152, 3072, 768)
    k = fam.build(shape, "float16", CONFIGS[name], hw.target)
    x, w, b = fam.make_inputs(shape, "float16", "cuda", 3)
    first = k(x, w, b).clone()
    for _ in range(20):
        assert torch.equal(k(x, w, b), first)
