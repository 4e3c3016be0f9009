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

from evaluator import kernels
from evaluator.tuning import verify

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
def hw(hopper_hw):
    return hopper_hw


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
    _check(
        verify.verify(
            kernels.get("gemm_gelu"),
            (2048, 3072, 768),
            "float16",
            CONFIGS["128x128x4"],
            hw.target,
            "cuda",
            seeds=(0, 1),
        )
    )


@pytest.mark.parametrize("name", ["128x128x4", "128x64x8-7blocks"])
def test_gemm_pingpong_is_deterministic(name, hw):
    fam = kernels.get("gemm")
    shape = (3152, 3072, 768)
    k = fam.build(shape, "float16", CONFIGS[name], hw.target)
    x, w, b = fam.make_inputs(shape, "float16", "cuda", 3)
    first = k(x, w, b).clone()
    for _ in range(20):
        assert torch.equal(k(x, w, b), first)


# The experimental stream_k tail (not in the search space): shapes whose last wave is
# partial at 128x128 on 132 blocks. 3000x1000x1000 has tails in M, N and K.
SK = {**CONFIGS["128x128x4"], "num_stages": 5, "stream_k": 1}
SK_SHAPES = [(3152, 3072, 768), (3152, 2304, 768), (2048, 2304, 768), (3000, 1000, 1000)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SK_SHAPES)
def test_gemm_stream_k_matches_linear(shape, dtype, hw):
    from evaluator.kernels.gemm import pingpong as PP

    assert PP.sk_splits(shape, SK)
    _check(verify.verify(kernels.get("gemm"), shape, dtype, SK, hw.target, "cuda", seeds=(0, 1, 2)))


def test_gemm_stream_k_counters_reset_across_calls_and_graph_replays(hw):
    # The last contributor of a tail tile resets its counter: a call that left one set
    # would make the next call's reduction skip partials. The reduction's order depends on
    # which contributor is last, so calls are compared with PyTorch, not bit for bit.
    fam = kernels.get("gemm")
    shape = (3152, 3072, 768)
    k = fam.build(shape, "float16", SK, hw.target)
    x, w, b = fam.make_inputs(shape, "float16", "cuda", 4)
    ref = fam.reference(x, w, b).float()

    def close(y):
        return (y.float() - ref).abs().max().item() < 0.05 * ref.abs().max().item()

    for _ in range(20):
        assert close(k(x, w, b))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = k(x, w, b)
    for _ in range(10):
        g.replay()
        torch.cuda.synchronize()
        assert close(y)


# 128x96, which leads the space where its tiles fill one to three rounds
# (reports/examples/kernels/h200-2026-12-02/kernel_sweep_pingwave.json), with tails in M, N
# and K (1000 = 10 x 96 + 40 columns).
@pytest.mark.parametrize(
    "shape,dtype", [((2048, 2304, 768), "float16"), ((1024, 3072, 768), "bfloat16"), ((1000, 1000, 3000), "float16")]
)
def test_gemm_pingpong_128x96_matches_linear(shape, dtype, hw):
    cfg = {**CONFIGS["128x128x4"], "block_N": 96, "num_stages": 6}
    _check(verify.verify(kernels.get("gemm"), shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1, 2)))


# y's transpose in tiles of 128 features x 144 tokens (`swap_ab`), through the shared
# output tile and straight from registers (`direct`), and the plain tile stored directly:
# ViT-B's token count (3152 = 21 x 144 + 128), tails in M, N and K, the bias down the rows,
# and GPT-2's gelu_new epilogue.
SWAP = {**CONFIGS["128x128x4"], "block_N": 144, "swap_ab": 1}


@pytest.mark.parametrize(
    "cfg",
    [
        SWAP,
        {**SWAP, "direct": 1, "num_stages": 6},
        {**CONFIGS["128x128x4"], "direct": 1, "num_stages": 6},
        {**SWAP, "block_N": 96, "num_stages": 6},
        {**SWAP, "block_N": 48, "num_stages": 8},
    ],
    ids=["swap", "swap-direct", "direct", "swap-96", "swap-48"],
)
@pytest.mark.parametrize(
    "shape,dtype", [((3152, 3072, 768), "float16"), ((3152, 768, 768), "bfloat16"), ((1000, 1000, 3000), "float16")]
)
def test_gemm_pingpong_swap_and_direct_match_linear(cfg, shape, dtype, hw):
    _check(verify.verify(kernels.get("gemm"), shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1, 2)))


def test_gemm_gelu_tanh_swap_matches_linear(hw):
    _check(
        verify.verify(
            kernels.get("gemm_gelu_tanh"), (2048, 768, 3072), "float16", SWAP, hw.target, "cuda", seeds=(0, 1)
        )
    )


# TileLang's own pipeline on y's transpose, 256 features x 144 tokens a tile (outside the
# search space: 0.875x cuBLAS on the H200,
# reports/examples/kernels/h200-2026-12-03/kernel_sweep_swap_attention.json).
@pytest.mark.parametrize("shape,dtype", [((3152, 3072, 768), "float16"), ((1000, 1000, 3000), "bfloat16")])
def test_gemm_wave_swap_matches_linear(shape, dtype, hw):
    cfg = {
        "block_M": 256,
        "block_N": 144,
        "block_K": 64,
        "num_stages": 3,
        "threads": 256,
        "policy": "fullrow",
        "swap_ab": 1,
    }
    # T.copy, not TMA, loads the tiles: verify's awkward shape may leave K off multiples of 8.
    res = verify.verify(kernels.get("gemm"), shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1, 2))
    assert res.passed, [c for c in res.cases if not c.passed]
