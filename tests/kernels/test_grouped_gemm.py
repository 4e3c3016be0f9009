"""Grouped GEMM family (a mixture of experts' F.grouped_mm): the CPU schedule (TileLang's C
backend) against torch._grouped_mm on uneven splits (empty groups, groups of one row,
sizes off every tile, one expert, rows past the last offset), one compiled kernel for
every split, the shape encoding and the profiler's split, the calls it falls back on with
their reasons, and the CUDA schedule lowered for sm_90a.

In: shapes, seeds, offsets and a tiny experts module. Out: pass/fail. Kernels are
compiled once per process (the family's cache), so the seeds and routes reuse builds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from evaluator.errors import KernelError
from evaluator.kernels import common as C
from evaluator.kernels import family_for_aten, get

from tests.hardware import CPU, H100, H200
from tests.routing import count, route_model

pytestmark = pytest.mark.skipif(not hasattr(torch, "_grouped_mm"), reason="torch without torch._grouped_mm")

FAM = get("grouped_gemm")
SM90 = "cuda -arch=sm_90a"


def kernel(shape, dtype):
    return FAM.build(shape, dtype, FAM.search_space(shape, dtype, CPU)[0], "c")


@pytest.mark.slow  # eight builds; the fast lane's correctness is the two split tests below
@pytest.mark.parametrize(
    "shape",
    [
        (4, 37, 29, 45, 1),  # experts' [E, N, K] weights transposed, tails in M, N, K
        (3, 130, 40, 64),  # B as [E, K, N], several row tiles a group
        (1, 37, 29, 45),  # one expert
        (6, 7, 24, 16, 1),  # more experts than rows: empty groups and groups of one row
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cpu_schedule_matches_pytorch_on_random_splits(shape, dtype):
    k = kernel(shape, dtype)
    atol, rtol = FAM.tolerance(dtype, shape)
    for seed in (0, 1, 2):
        a, b, offs = FAM.make_inputs(shape, dtype, "cpu", seed)
        assert offs.dtype == torch.int32 and int(offs[-1]) == shape[1]
        out, ref = k(a, b, offs), FAM.reference(a, b, offs)
        assert out.shape == ref.shape == (shape[1], shape[2]) and out.dtype == ref.dtype
        assert out.abs().max() > 0.1, "output is (nearly) all zeros"
        torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)


@pytest.mark.parametrize(
    "offs",
    [
        [0, 0, 40],  # everything in the last group
        [40, 40, 40],  # everything in the first
        [1, 2, 40],  # groups of one row, then the rest
        [16, 17, 33],  # a tile's worth, one row, rows past the last offset
    ],
)
def test_one_kernel_serves_every_split_and_matches_grouped_mm(offs):
    # 16-byte strides (K, N multiples of 4 in fp32): torch._grouped_mm itself is the reference.
    shape = (3, 40, 24, 32, 1)
    k = kernel(shape, "float32")
    a, b, _ = FAM.make_inputs(shape, "float32", "cpu", 0)
    o = torch.tensor(offs, dtype=torch.int32)
    out, ref = k(a, b, o), torch._grouped_mm(a, b, offs=o)
    n = offs[-1]  # rows past the last offset are undefined in PyTorch as here
    torch.testing.assert_close(out[:n], ref[:n], atol=1e-5, rtol=1e-5)
    assert kernel(shape, "float32") is k


def test_every_split_of_a_few_rows_is_covered():
    # All 78 ways to cut 11 rows into 3 groups, with 8-row tiles: a split of 1, 1 and 9
    # rows takes 4 row tiles, all the grid has (ceil(M / 8) + E - 1).
    import itertools

    shape = (3, 11, 8, 8, 1)
    k = FAM.build(shape, "float32", {"block_M": 8, "block_N": 8, "block_K": 8}, "c")
    a, b, _ = FAM.make_inputs(shape, "float32", "cpu", 0)
    for cuts in itertools.combinations_with_replacement(range(12), 2):
        offs = torch.tensor([*cuts, 11], dtype=torch.int32)
        torch.testing.assert_close(k(a, b, offs), FAM.reference(a, b, offs), atol=1e-5, rtol=1e-5)


def test_per_group_reference_agrees_with_grouped_mm():
    a, b, offs = FAM.make_inputs((4, 40, 24, 32, 1), "float32", "cpu", 3)
    from evaluator.kernels.grouped_gemm import per_group

    torch.testing.assert_close(per_group(a, b, offs), torch._grouped_mm(a, b, offs=offs), atol=1e-5, rtol=1e-5)


def test_shape_encoding_and_the_profilers_split():
    assert FAM.check((8, 64, 32, 16, 0)) == (8, 64, 32, 16)
    assert FAM.check((8, 64, 32, 16, 1)) == (8, 64, 32, 16, 1)
    for bad in ((8, 64, 32), (0, 64, 32, 16), (8, 64, 32, 16, 2)):
        with pytest.raises(KernelError, match="E, M, N, K"):
            FAM.check(bad)
    # aten::_grouped_mm is this family's, not gemm's; B's strides give its layout.
    shapes = [[14, 16], [3, 16, 24], [3]]
    assert family_for_aten("aten::_grouped_mm", shapes) is FAM
    assert FAM.problem_shape("aten::_grouped_mm", shapes, None, [[16, 1], [384, 1, 16], [1]]) == (3, 14, 24, 16, 1)
    assert FAM.problem_shape("aten::_grouped_mm", shapes, None, [[16, 1], [384, 24, 1], [1]]) == (3, 14, 24, 16)
    assert FAM.problem_shape("aten::_grouped_mm", shapes) == (3, 14, 24, 16)
    assert FAM.problem_shape("aten::_grouped_mm", [[3, 14, 16], [3, 16, 24], []]) is None  # groups by batch
    assert FAM.layout_free((3, 14, 24, 16, 1)) == (3, 14, 24, 16)
    assert torch._grouped_mm not in get("gemm").functions


class Experts(torch.nn.Module):
    """transformers' experts: an [E, N, K] weight, F.grouped_mm on its transposed view."""

    def __init__(self, offs, three_d=False):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 24, 16) * 0.1)
        self.offs = torch.tensor(offs, dtype=torch.int32)
        self.three_d = three_d

    def forward(self, x):
        if self.three_d:  # groups given by a batch: no offsets
            return F.grouped_mm(x.view(3, -1, 16), self.w.transpose(-2, -1))
        return F.grouped_mm(x, self.w.transpose(-2, -1), offs=self.offs)


def test_experts_run_in_tilelang_counted_once():
    torch.manual_seed(0)
    router, got, expected = route_model(["gemm", "grouped_gemm"], Experts([4, 4, 14]), (torch.randn(14, 16),))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert count(router, "grouped_gemm") == (1, 0) and count(router, "gemm") == (0, 0)


def test_a_3d_first_operand_falls_back_with_its_reason():
    torch.manual_seed(0)
    router, got, expected = route_model(["grouped_gemm"], Experts([], three_d=True), (torch.randn(15, 16),))
    torch.testing.assert_close(got, expected)
    assert count(router, "grouped_gemm") == (0, 1)
    reasons = [r for c in router.counts() for r in c.fallback]
    assert reasons == ["grouped GEMM with a 3-D first operand (groups by batch): no kernel"]


def test_route_reasons_and_layouts():
    x, offs = torch.randn(14, 16), torch.tensor([4, 9, 14], dtype=torch.int32)
    w = torch.randn(3, 24, 16)
    route = FAM.route
    call = torch._grouped_mm
    assert route(call, (x, w.transpose(-2, -1)), {"offs": offs, "bias": torch.randn(3, 24)}, "float32") == (
        "grouped GEMM with a bias: no kernel"
    )
    got = route(call, (x, w.transpose(-2, -1)), {"offs": offs, "out_dtype": torch.float16}, "float32")
    assert got == "grouped GEMM with out_dtype float16: no kernel"
    assert route(call, (x, w.transpose(-2, -1)), {"offs": offs.long()}, "float32") == "offsets are not int32 [3]"
    assert route(call, (x.half(), w.half().transpose(-2, -1)), {"offs": offs}, "float32").startswith("dtype float16")
    assert route(call, (x, w.transpose(-2, -1)), {"offs": offs}, "float32").shape == (3, 14, 24, 16, 1)
    plain = route(call, (x, w.permute(0, 2, 1).contiguous()), {"offs": offs}, "float32")
    assert plain.shape == (3, 14, 24, 16) and plain.notes == ()
    odd = route(call, (x.t().contiguous().t(), w.transpose(-2, -1)[:, :, ::2]), {"offs": offs}, "float32")
    assert odd.shape == (3, 14, 12, 16) and odd.notes == ("A copied to contiguous", "B copied to contiguous")


def test_search_spaces_fit_and_fp32_on_cuda_says_why():
    shape = (8, 8192, 14336, 4096, 1)
    space = FAM.search_space(shape, "bfloat16", H200)
    assert space and all(FAM.reject_reason(shape, "bfloat16", c, H200) is None for c in space)
    assert FAM.search_space((60, 2048, 1408, 2048, 1), "bfloat16", H200)[0]["block_M"] == 64  # short groups
    with pytest.raises(KernelError, match="no fp32 GPU schedule"):
        FAM.program(shape, "float32", None, SM90)


def test_tensor_core_schedule_lowers_for_sm90():
    shape = (8, 1000, 1000, 512, 1)
    src = C.lower_source(FAM.program(shape, "bfloat16", FAM.search_space(shape, "bfloat16", H200)[0], SM90), SM90)
    assert "wgmma" in src and "grouped_gemm_tc" in src and "Offs" in src
    # Each block finds its group once, before the warp roles split, and neither role
    # resets what it found (the producer's loads and the consumer's store both read it).
    after = src.split("if (grp < 0) {", 1)[1]
    assert "tma_load" in after and "row0 = 0;" not in after and "rows = 0;" not in after


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(8, 8192, 4096, 14336, 1), (3, 37, 29, 45), (60, 100, 1408, 2048, 1)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_candidates_lower_for_sm90(shape, dtype):
    for cfg in FAM.search_space(shape, dtype, H200)[:3]:
        src = C.lower_source(FAM.program(shape, dtype, cfg, SM90), SM90)
        assert "wgmma" in src and "grouped_gemm_tc" in src, cfg


def test_the_measured_best_tile_leads_the_cuda_space():
    # The H100 bench (`evaluate bench --family grouped_gemm --dtype bf16 --budget 60`) timed
    # the space at Mixtral's down projection and Qwen-MoE's experts; the fastest config must
    # be the first, which is all a short --budget compiles.
    import json

    path = (
        Path(__file__).parents[2]
        / "reports/examples/kernels/h100-2026-12-05/bench_grouped_gemm_budget60_down_qwen.json"
    )
    rows = json.loads(path.read_text())
    assert len(rows) == 2
    tile = ("block_M", "block_N", "block_K", "num_stages", "threads")
    for r in rows:
        timed = [c for c in r["tuned"]["candidates"] if c["status"] == "ok"]
        best = min(timed, key=lambda c: c["latency_ms"])["config"]
        first = FAM.search_space(tuple(r["tuned"]["shape"]), "bfloat16", H100)[0]
        assert tuple(first[k] for k in tile) == tuple(best[k] for k in tile), r["tuned"]["shape"]
