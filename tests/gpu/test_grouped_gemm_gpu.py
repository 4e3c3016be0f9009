"""The grouped_gemm family on CUDA against PyTorch: the first candidates of its search
space at Mixtral's and Qwen-MoE's expert shapes and their tails, with verify's seeds;
hand-made splits (empty groups, one row, everything in one expert); and one kernel
captured in a CUDA graph whose offsets change between replays (the kernel reads them on
the device, never on the host).

In: shapes, configs and offsets on the GPU. Out: pass/fail (skipped without CUDA)."""

import pytest
import torch

from evaluator import kernels
from evaluator.tuning import verify

FAM = kernels.get("grouped_gemm")
SHAPES = [(8, 2048, 1024, 512, 1), (8, 2048, 512, 1024, 1), (60, 1024, 1408, 512, 1), (8, 40, 1024, 512, 1)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=["mixtral-up", "mixtral-down", "qwen-moe", "decode"])
def test_first_candidates_are_correct_on_gpu(shape, dtype, hw):
    space = FAM.search_space(shape, dtype, hw)
    assert space
    for cfg in space[:3]:
        res = verify.verify(FAM, shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, (cfg, [c for c in res.cases if not c.passed])


@pytest.mark.parametrize("b_t", [0, 1])
def test_hand_made_splits_match_the_per_group_product(b_t, hw):
    from evaluator.kernels.grouped_gemm import per_group

    shape = FAM.check((4, 300, 256, 128, b_t))
    kernel = FAM.build(shape, "bfloat16", FAM.search_space(shape, "bfloat16", hw)[0], hw.target)
    a, b, _ = FAM.make_inputs(shape, "bfloat16", "cuda", 0)
    atol, rtol = FAM.tolerance("bfloat16", shape)
    for offs in ([0, 0, 0, 300], [300, 300, 300, 300], [1, 2, 3, 300], [0, 129, 129, 300]):
        o = torch.tensor(offs, dtype=torch.int32, device="cuda")
        torch.testing.assert_close(kernel(a, b, o), per_group(a, b, o), atol=atol, rtol=rtol)


def test_one_graph_replays_with_new_offsets(hw):
    shape = FAM.check((8, 512, 256, 128, 1))
    kernel = FAM.build(shape, "bfloat16", FAM.search_space(shape, "bfloat16", hw)[0], hw.target)
    a, b, offs = FAM.make_inputs(shape, "bfloat16", "cuda", 0)
    kernel(a, b, offs)  # compiled and warm before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kernel(a, b, offs)
    atol, rtol = FAM.tolerance("bfloat16", shape)
    for seed in (1, 2, 3):
        offs.copy_(FAM.make_inputs(shape, "bfloat16", "cuda", seed)[2])
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, FAM.reference(a, b, offs), atol=atol, rtol=rtol)
