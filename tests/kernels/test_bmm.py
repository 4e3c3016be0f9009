"""Batched GEMM family: the CPU schedule (TileLang's C backend) against torch.matmul and
torch.baddbmm on the layouts models hand it (transposed views, heads of a projection,
one matrix for every batch, an addend), the shape encoding, which calls and profiled ops
are bmm's and which gemm's, the routes of torch.bmm / baddbmm / matmul / einsum, the CUDA
schedules lowered for sm_90a, and eager attention in a hand-written block, BERT, T5 and
DeBERTa-v2 routed to TileLang.

In: shapes, seeds, configs and tiny models. Out: pass/fail. Kernels are compiled once per
process (the family's cache), so the seeds and the routes reuse the same builds.
"""

from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

import pytest
import torch

from evaluator import kernels
from evaluator.routing import router as swap
from evaluator.errors import KernelError
from evaluator.kernels.bmm import programs as P
from evaluator.kernels import common as C
from evaluator.kernels import bmm as BM
from evaluator.kernels import family_for_aten, get
from evaluator.results import Hardware, parse_shape

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from routing import count, route_model  # noqa: E402
from tests.hardware import CPU, H200

FAM = get("bmm")
GEMM = get("gemm")
SM90 = "cuda -arch=sm_90a"

# Layouts as models make them, each with tails off every tile (M, N, K not multiples of 16).
LAYOUTS = {
    "contiguous": (4, 37, 29, 45),
    # eager attention's q @ k^T: q heads of a [b, S, 3H, D] qkv projection, k^T its transposed view
    "scores": (6, 37, 37, 24, 0, 1, 3, 9, 9),
    # probs @ v: probs contiguous, v heads of the projection
    "context": (6, 37, 24, 37, 0, 0, 3, 0, 3),
    # both transposed, pitches differing from each other and from the heads
    "transposed": (6, 37, 29, 45, 1, 1, 3, 5, 4),
    # W @ x: a 2-D first operand shared by every batch, x transposed
    "shared-a": (5, 37, 29, 45, 0, 1, 0, 0, 0, 0, 1),
    # baddbmm: a whole [batch, M, N] addend
    "addend": (4, 37, 29, 45, 0, 1, 0, 0, 0, 1),
    # baddbmm with BLOOM's alibi: one [batch, 1, N] row per batch, B shared
    "addend-row": (4, 37, 29, 45, 0, 0, 0, 0, 0, 2, 0, 1),
}


def check(shape, dtype, seeds=(0, 1, 2), config=None):
    shape = FAM.check(shape)
    kernel = FAM.build(shape, dtype, config or FAM.search_space(shape, dtype, CPU)[0], "c")
    atol, rtol = FAM.tolerance(dtype, shape)
    for seed in seeds:
        inputs = FAM.make_inputs(shape, dtype, "cpu", seed)
        out = kernel(*inputs)
        ref = FAM.reference(*inputs)
        assert out.shape == ref.shape == (shape[0], shape[1], shape[2]) and out.dtype == ref.dtype
        assert torch.isfinite(out).all() and out.abs().max() > 0.1, "output is (nearly) all zeros"
        torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)
    return kernel


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_cpu_fp32_matches_torch_on_every_layout(name):
    shape = LAYOUTS[name]
    assert all(d % 16 for d in shape[1:4])
    check(shape, "float32")


@pytest.mark.parametrize("name", ["scores", "shared-a", "addend-row"])
def test_cpu_fp16_matches_torch(name):
    check(LAYOUTS[name], "float16")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["contiguous", "context", "transposed", "addend"])
def test_cpu_fp16_matches_torch_on_the_other_layouts(name):
    check(LAYOUTS[name], "float16")


def test_inputs_lie_as_the_shape_says():
    a, b = FAM.make_inputs(LAYOUTS["scores"], "float32", "cpu", 0)
    # q: [2, 3, 37, 24] heads of a [2, 37, 9, 24] buffer; k^T: the transposed view of such heads
    assert a.shape == (2, 3, 37, 24) and a.stride() == (37 * 9 * 24, 24, 9 * 24, 1)
    assert b.shape == (2, 3, 24, 37) and b.stride() == (37 * 9 * 24, 24, 1, 9 * 24)
    w, x = FAM.make_inputs(LAYOUTS["shared-a"], "float32", "cpu", 0)
    assert w.shape == (37, 45) and x.shape == (5, 45, 29) and x.stride() == (45 * 29, 1, 45)
    *_, row = FAM.make_inputs(LAYOUTS["addend-row"], "float32", "cpu", 0)
    assert row.shape == (4, 1, 29)


def test_wrong_result_and_wrong_layout_are_detected():
    shape = LAYOUTS["scores"]
    kernel = check(shape, "float32", seeds=(0,))
    a, b = FAM.make_inputs(shape, "float32", "cpu", 0)
    out = kernel(a, b)
    out[3, 7, 11] += 0.01
    atol, rtol = FAM.tolerance("float32", shape)
    assert not torch.allclose(out, FAM.reference(a, b), atol=atol, rtol=rtol)
    # The kernel reads k^T in place: handed k^T copied to contiguous, it refuses, not misreads.
    with pytest.raises(KernelError, match="operand B"):
        kernel(a, b.contiguous())


def test_alpha_and_beta_are_kernel_parameters():
    shape = FAM.check(LAYOUTS["addend"])
    cfg = {**FAM.search_space(shape, "float32", CPU)[0], "alpha": 0.125, "beta": -0.5}
    kernel = FAM.build(shape, "float32", cfg, "c")
    a, b, add = FAM.make_inputs(shape, "float32", "cpu", 1)
    ref = torch.baddbmm(add, a, b, alpha=0.125, beta=-0.5)
    torch.testing.assert_close(kernel(a, b, add), ref, atol=1e-5, rtol=1e-5)
    assert FAM.params == {"alpha": 1.0, "beta": 1.0}


def test_build_is_cached_and_bad_requests_raise():
    shape = LAYOUTS["contiguous"]
    cfg = FAM.search_space(shape, "float32", CPU)[0]
    assert FAM.build(shape, "float32", cfg, "c") is FAM.build(shape, "float32", dict(cfg), "c")
    with pytest.raises(KernelError, match="unknown config"):
        FAM.build(shape, "float32", {"block_Q": 3}, "c")
    with pytest.raises(KernelError, match="bfloat16"):
        FAM.build(shape, "bfloat16", {}, "c")


# ---------------------------------------------------------------- the shape


def test_shape_is_checked_and_kept_in_its_shortest_form():
    assert FAM.check((8, 64, 64, 32, 0, 0, 0, 0, 0, 0, 0, 0)) == (8, 64, 64, 32)
    assert FAM.check((8, 64, 64, 32, 0, 1)) == (8, 64, 64, 32, 0, 1)
    # heads mean nothing without a pitched operand
    assert FAM.check((8, 64, 64, 32, 0, 1, 4)) == (8, 64, 64, 32, 0, 1)
    assert FAM.check((96, 128, 128, 64, 0, 1, 12, 12, 12)) == (96, 128, 128, 64, 0, 1, 12, 12, 12)
    for bad in [
        (8, 64, 64),
        (8, 0, 64, 32),
        (8, 64, 64, 32, 2),
        (8, 64, 64, 32, 0, 0, 3, 3),
        (8, 64, 64, 32, 0, 0, 4, 2),
        (8, 64, 64, 32, 0, 0, 0, 0, 0, 3),
        (8, 64, 64, 32, 0, 0, 4, 4, 0, 0, 1),
        (8, 64, 64, 32, 0, 0, 0, 0, 0, 0, 1, 1),
    ]:
        with pytest.raises(KernelError, match="batch, M, N, K"):
            FAM.check(bad)
    # tails only in the matrix dims: the batch is a grid dimension, the rest are layouts
    awk = FAM.awkward_shape((96, 128, 128, 64, 0, 1, 12, 12, 12))
    assert awk[0] == 96 and all(d % 16 for d in awk[1:4]) and awk[4:] == (0, 1, 12, 12, 12)
    assert FAM.layout_free((96, 128, 128, 64, 0, 1, 12, 12, 12)) == (96, 128, 128, 64)
    assert FAM.layout_free((4, 37, 29, 45, 0, 0, 0, 0, 0, 2, 0, 1)) == (4, 37, 29, 45, 0, 0, 0, 0, 0, 1)


def test_operand_layouts_are_read_from_strides():
    side = lambda t, batch: BM.operand_side(t.shape, t.stride(), batch)  # noqa: E731
    qkv = torch.randn(2, 7, 3 * 4, 8)  # [B, S, 3H, D]: GPT-2's split, BERT's separate projections
    q = qkv[:, :, :4].transpose(1, 2)
    assert side(q, (2, 4)) == BM.Side(False, 12, 4, False, False)
    assert side(q.transpose(-1, -2), (2, 4)) == BM.Side(True, 12, 4, False, False)
    assert side(torch.randn(2, 4, 7, 8), (2, 4)) == BM.Side(False, 0, 0, False, False)
    assert side(torch.randn(8, 7, 5).transpose(1, 2), (8,)) == BM.Side(True, 0, 0, False, False)
    # fairseq's [S, B*H, D] read as [B*H, S, D]: every batch a head of one row of pitch B*H
    assert side(torch.randn(7, 6, 8).transpose(0, 1), (6,)) == BM.Side(False, 6, 6, False, False)
    # one matrix for every batch: 2-D, size 1 or expanded by stride 0
    assert side(torch.randn(7, 8), (2, 4)).shared and side(torch.randn(1, 7, 8).expand(3, 7, 8), (3,)).shared
    assert side(torch.randn(7, 8), (3,)) == BM.Side(False, 0, 0, True, False)
    # broadcast over part of the batch: PyTorch's, not copied
    assert side(torch.randn(4, 7, 8), (2, 4)) == "batch dims broadcast in part"
    # neither matrix dim unit-stride, or a base off 16 bytes: copied
    assert side(torch.randn(2, 7, 16)[:, :, ::2], (2,)).copy
    assert BM.operand_side((2, 7, 8), (56, 8, 1), (2,), aligned=False).copy


def test_addend_modes():
    assert BM.addend_side((4, 5, 6), (30, 6, 1), 4, 5, 6) == (P.ADD_FULL, False)
    assert BM.addend_side((4, 1, 6), (6, 6, 1), 4, 5, 6) == (P.ADD_ROW, False)
    assert BM.addend_side((6,), (1,), 4, 5, 6) == (P.ADD_ROW, True)  # one row for all: made per batch
    assert BM.addend_side((5, 6), (6, 1), 4, 5, 6) == (P.ADD_FULL, True)
    assert BM.addend_side((4, 5, 7), (35, 7, 1), 4, 5, 6) == "addend does not broadcast to the product"


# ---------------------------------------------------------------- bmm's calls and gemm's


def _owners(func, *args):
    return [f.name for f in (FAM, GEMM) if f.owns(func, args, {})]


@pytest.mark.parametrize(
    "a, b, owner",
    [
        ((2, 4, 8, 16), (2, 4, 16, 8), "bmm"),  # eager attention
        ((8, 16), (2, 16, 4), "bmm"),  # W @ x: the batch is the second operand's
        ((2, 4, 8, 16), (4, 16, 8), "bmm"),  # broadcast in part: bmm's, and it says why it falls back
        ((2, 8, 16), (16, 4), "gemm"),  # x @ W
        ((8, 16), (16, 4), "gemm"),
        ((16,), (2, 16, 4), None),  # vector products: neither
        ((2, 8, 16), (16,), None),
    ],
)
def test_matmul_goes_to_exactly_one_family(a, b, owner):
    x, y = torch.randn(*a), torch.randn(*b)
    for func in (torch.matmul, torch.Tensor.matmul):
        assert _owners(func, x, y) == ([owner] if owner else [])


def test_einsum_goes_to_exactly_one_family():
    q, k, w = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 6, 8), torch.randn(4, 8)
    assert _owners(torch.einsum, "bhqd,bhkd->bhqk", q, k) == ["bmm"]
    assert _owners(torch.einsum, "bhqk,bhkd->bhqd", torch.randn(2, 3, 5, 6), k) == ["bmm"]
    assert _owners(torch.einsum, "bhqd,nd->bhqn", q, w) == ["gemm"]
    assert _owners(torch.einsum, "ij,ij->ij", w, w) == []
    # a weight whose columns span several letters: XLNet's and Funnel's head projections
    x, heads = torch.randn(5, 2, 8), torch.randn(8, 3, 4)
    assert _owners(torch.einsum, "ibh,hnd->ibnd", x, heads) == ["gemm"]
    assert _owners(torch.einsum, "ibh,ndh->ibnd", x, heads.permute(1, 2, 0)) == ["gemm"]
    assert _owners(torch.einsum, "ibh,nhd->ibnd", x, heads.permute(1, 0, 2)) == ["bmm"]  # k between them
    # and the way back, K over two letters: XLNet's output projection
    assert _owners(torch.einsum, "ibnd,hnd->ibh", torch.randn(5, 2, 3, 4), heads) == ["gemm"]


@pytest.mark.parametrize(
    "eq, x_shape, w_shape, kn, problem, out",
    [
        ("ibh,hnd->ibnd", (6, 2, 16), (16, 3, 4), True, (12, 12, 16), (6, 2, 3, 4)),  # N over two letters
        ("ibh,ndh->ibnd", (6, 2, 16), (3, 4, 16), False, (12, 12, 16), (6, 2, 3, 4)),
        ("ibnd,hnd->ibh", (6, 2, 3, 4), (16, 3, 4), False, (12, 16, 12), (6, 2, 16)),  # K over two letters
        ("ibnd,ndh->ibh", (6, 2, 3, 4), (3, 4, 16), True, (12, 16, 12), (6, 2, 16)),
    ],
)
def test_an_einsum_by_a_weight_over_several_letters_routes_as_one_gemm(eq, x_shape, w_shape, kn, problem, out):
    """x @ W with W's N columns or K rows held over several dims ([K, heads, head_dim],
    [heads, head_dim, K]...): one GEMM over the matrix W is in memory, x's contracted dims
    read as one, its output in the equation's dims."""
    torch.manual_seed(0)
    x = torch.randn(*x_shape)
    w = torch.nn.Parameter(torch.randn(*w_shape))
    route = GEMM.route(torch.einsum, (eq, x, w), {}, "float32")
    assert not isinstance(route, str), route
    assert route.shape == problem and route.out[0] == out
    conf = GEMM.search_space(route.shape, "float32", CPU)[0]
    out = route.launch(GEMM.build(route.shape, "float32", conf, "c"))
    torch.testing.assert_close(out, torch.einsum(eq, x, w), rtol=1e-5, atol=1e-5)
    # [K, N...] from an activation would be transposed on every call: it stays in PyTorch,
    # saying so; [N..., K] is the kernel's layout as it lies
    again = GEMM.route(torch.einsum, (eq, x, w.detach() + 0), {}, "float32")
    assert again == "second operand is not a weight" if kn else again.shape == route.shape


def test_profiled_ops_map_to_one_family_with_their_layout():
    assert family_for_aten("aten::bmm").name == "bmm" and family_for_aten("aten::baddbmm").name == "bmm"
    assert family_for_aten("aten::matmul", [[2, 4, 8, 16], [2, 4, 16, 8]]).name == "bmm"
    assert family_for_aten("aten::matmul", [[8, 16], [2, 16, 4]]).name == "bmm"
    assert family_for_aten("aten::matmul", [[2, 8, 16], [16, 4]]).name == "gemm"
    assert family_for_aten("aten::matmul", [[2, 8, 16], [16]]) is None
    assert not GEMM.covers("aten::bmm") and not FAM.covers("aten::linear")
    for shapes in ([[2, 8, 16], [16, 4]], [[2, 4, 8, 16], [2, 4, 16, 8]], [[8, 16], [2, 16, 4]], [[16], [2, 16, 4]]):
        assert FAM.covers("aten::matmul", shapes) + GEMM.covers("aten::matmul", shapes) <= 1
    # BERT-base eager at batch 8: q, v heads of [8, 128, 12, 64] projections, k^T their transposed view
    q, kt, p = [8, 12, 128, 64], [8, 12, 64, 128], [8, 12, 128, 128]
    views, kt_st = [128 * 768, 64, 768, 1], [128 * 768, 64, 1, 768]
    assert FAM.problem_shape("aten::matmul", [q, kt], input_strides=[views, kt_st]) == (
        96,
        128,
        128,
        64,
        0,
        1,
        12,
        12,
        12,
    )
    assert FAM.problem_shape("aten::matmul", [p, q], input_strides=[BM._contiguous(p), views]) == (
        96,
        128,
        64,
        128,
        0,
        0,
        12,
        0,
        12,
    )
    assert FAM.problem_shape("aten::matmul", [q, kt]) == (96, 128, 128, 64)  # no strides recorded
    assert FAM.problem_shape(
        "aten::bmm", [[24, 128, 64], [24, 64, 128]], input_strides=[[8192, 64, 1], [8192, 1, 64]]
    ) == (24, 128, 128, 64, 0, 1)
    bloom = [[24, 1, 128], [24, 128, 64], [24, 64, 128]]
    assert FAM.problem_shape("aten::baddbmm", bloom, [None, None, None, 1.0, 0.125]) == (
        24,
        128,
        128,
        64,
        0,
        0,
        0,
        0,
        0,
        2,
    )
    assert FAM.problem_shape("aten::baddbmm", bloom, [None, None, None, 0.0, 0.125]) == (24, 128, 128, 64)
    assert FAM.problem_shape("aten::bmm", [[24, 128, 64], [12, 64, 128]]) is None


@pytest.mark.slow
def test_profiler_sees_eager_attention_as_bmm_at_the_routed_layout():
    from evaluator.profiling import profile as profiling
    from evaluator.models import load_model

    m = load_model(
        "hf:BertModel,num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64,"
        "attn_implementation=eager",
        seq_len=24,
    )
    df = profiling.profile_model(m, iters=1, warmup=0)
    rows = df[df.family == "bmm"]
    assert set(rows.op) == {"aten::matmul"}
    batch = 2 * int(m.inputs[0].shape[0])
    assert set(rows["shape"]) == {f"{batch}x24x24x16x0x1x2x2x2", f"{batch}x24x16x24x0x0x2x0x2"}


# ---------------------------------------------------------------- routes


def _router(calls, dtype="float32"):
    """A router with a kernel for every shape these calls route to, and the calls' results
    with and without it."""
    fam = FAM
    table = swap.KernelTable(dtype, "c", build=lambda f, s, c: kernels.get(f).build(s, dtype, c, "c"))
    router = swap.Router([fam], table)
    with router:
        for call in calls:
            call()
    for (_, text), _ in list(router.fell_back.items()):
        if text:
            shape = parse_shape(text)
            cfg = fam.search_space(shape, dtype, CPU)[0]
            table.add("bmm", shape, cfg, fam.build(shape, dtype, cfg, "c"))
    router.reset()
    expected = [call() for call in calls]
    with router:
        got = [call() for call in calls]
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)
    return router


def test_bmm_baddbmm_einsum_and_matmul_route_without_copies():
    torch.manual_seed(0)
    q = torch.randn(2, 37, 3, 16).transpose(1, 2)  # [2, 3, 37, 16] heads of a projection
    k = torch.randn(2, 29, 3, 16).transpose(1, 2)
    a3, b3 = torch.randn(6, 37, 16), torch.randn(6, 16, 29)
    alibi = torch.randn(6, 1, 29)
    w = torch.randn(37, 16)
    calls = [
        lambda: torch.bmm(a3, b3),
        lambda: a3.bmm(b3),
        lambda: torch.baddbmm(alibi, a3, b3, beta=1.0, alpha=0.25),  # BLOOM's alibi scores
        # GPT-2's upcast path: an empty input and beta 0 (PyTorch ignores it, NaN included)
        lambda: torch.baddbmm(torch.full((6, 37, 29), float("nan")), a3, b3, beta=0, alpha=0.5),
        lambda: torch.einsum("bhqd,bhkd->bhqk", q, k),
        lambda: torch.einsum("bhqd,bhkd->bhkq", q, k),  # the output permuted
        lambda: q @ k.transpose(-1, -2),
        lambda: torch.matmul(w, b3),  # 2-D @ 3-D: one A for every batch
    ]
    router = _router(calls)
    counts = {c.shape: c for c in router.counts() if c.family == "bmm"}
    assert sum(c.tilelang for c in counts.values()) == len(calls) and not router.fell_back
    assert not any(c.notes for c in counts.values())
    assert counts["6x37x29x16x0x0x0x0x0x2"].tilelang == 1  # the alibi row, alpha 0.25 built on demand
    # two einsums (one with its output permuted) and the matmul, all on the same views
    assert counts["6x37x29x16x0x1x3x3x3"].tilelang == 3
    assert counts["6x37x29x16x0x0x0x0x0x0x1"].tilelang == 1


def test_what_stays_in_pytorch_says_why_and_unreadable_layouts_are_copied():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 8, 16)
    table = swap.KernelTable("float32", "c")
    router = swap.Router([FAM], table)
    with router:
        torch.matmul(x, torch.randn(3, 16, 8))  # the second operand broadcast over part of the batch
        torch.matmul(torch.randn(16), torch.randn(2, 16, 4))
        torch.matmul(x, torch.randn(16, 4))  # 2-D weight: gemm's (no gemm in this router: bmm says so)
        torch.bmm(torch.randn(2, 8, 16), torch.randn(2, 16, 4), out=torch.empty(2, 8, 4))
        torch.bmm(torch.randn(2, 8, 32)[:, :, ::2], torch.randn(2, 16, 4))  # no unit stride in A: copied
    reasons = {r for c in router.fell_back.values() for r in c}
    assert "batch dims broadcast in part" in reasons
    assert "a 1-D operand (a matrix-vector product)" in reasons
    assert "second operand is 2-D (a product by a matrix: gemm's)" in reasons
    assert "out= given" in reasons
    assert ("bmm", "2x8x4x16") in router.fell_back  # routed (its shape known), no kernel in the table
    a = torch.randn(2, 8, 32)[:, :, ::2]
    route = FAM.route(torch.bmm, (a, torch.randn(2, 16, 4)), {}, "float32")
    assert route.notes == ("A copied to contiguous",) and route.shape == (2, 8, 4, 16)


# ---------------------------------------------------------------- CUDA schedules (lowered, no GPU)


def test_search_spaces_fit_and_start_where_blocks_fill_the_gpu():
    bert = (96, 128, 128, 64, 0, 1, 12, 12, 12)
    for dtype in ("float16", "bfloat16", "float32"):
        space = FAM.search_space(bert, dtype, H200)
        assert 2 <= len(space) <= 16 and all(FAM.reject_reason(bert, dtype, c, H200) is None for c in space)
        first = space[0]
        assert 96 * math.ceil(128 / first["block_M"]) * math.ceil(128 / first["block_N"]) >= 132
    long = FAM.search_space((32, 1024, 1024, 128, 0, 1), "float16", H200)
    assert (long[0]["block_M"], long[0]["block_N"]) == (128, 256) and any(c["swizzle"] for c in long)
    small = Hardware(**{**H200.__dict__, "smem_per_block": 48 * 1024})
    assert len(FAM.search_space((32, 1024, 1024, 128), "float16", small)) < len(
        FAM.search_space((32, 1024, 1024, 128), "float16", H200)
    )
    assert 1 <= len(FAM.search_space(LAYOUTS["scores"], "float32", CPU)) <= 4
    assert FAM.reject_reason(bert, "float16", {"threads": 96}, H200)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["scores", "transposed", "shared-a", "addend-row"])
def test_tensor_core_schedule_lowers_for_sm90(name):
    shape = FAM.check(LAYOUTS[name])
    cfg = FAM.search_space(shape, "float16", H200)[0]
    src = C.lower_source(FAM.program(shape, "float16", {**cfg, "alpha": 0.5}, SM90), SM90)
    assert "__global__" in src and "wgmma" in src  # Hopper's tensor cores, not a scalar loop


@pytest.mark.slow
def test_bert_shapes_lower_to_tma_loads_of_the_views_in_place():
    # q, v and k^T read where the projections put them: TMA loads of 4-D strided tensors
    for shape in ((96, 128, 128, 64, 0, 1, 12, 12, 12), (96, 128, 64, 128, 0, 0, 12, 0, 12)):
        cfg = FAM.search_space(shape, "float16", H200)[0]
        src = C.lower_source(FAM.program(shape, "float16", cfg, SM90), SM90)
        assert "wgmma" in src and src.count("tma_load") >= 2


def test_fp32_lowers_to_the_simt_schedule():
    shape = FAM.check(LAYOUTS["transposed"])
    cfg = FAM.search_space(shape, "float32", H200)[0]
    assert "thread_M" in cfg
    src = C.lower_source(FAM.program(shape, "float32", cfg, SM90), SM90)
    assert "__global__" in src and "wgmma" not in src and "mma" not in src


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [
        (96, 128, 128, 64, 0, 1, 12, 12, 12),
        (96, 128, 64, 128, 0, 0, 12, 0, 12),
        (32, 1024, 1024, 128, 0, 1),
        (32, 1031, 1031, 135, 1, 0),
        (24, 128, 128, 64, 0, 0, 0, 0, 0, 2),
    ],
)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_every_cuda_candidate_lowers_for_sm90(shape, dtype):
    for cfg in FAM.search_space(shape, dtype, H200):
        assert "__global__" in C.lower_source(FAM.program(shape, dtype, cfg, SM90), SM90)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((96, 128, 128, 64, 0, 1, 12, 12, 12), "float16"),
        ((32, 1024, 1024, 128, 0, 1), "bfloat16"),
        ((24, 37, 45, 71, 1, 0, 3, 3, 0, 1), "float16"),
        ((96, 128, 64, 128, 0, 0, 12, 0, 12), "float32"),
    ],
)
def test_cuda_schedule_compiles_for_sm90(shape, dtype):
    kernel = FAM.build(shape, dtype, FAM.search_space(shape, dtype, H200)[0], SM90)
    assert "__global__" in kernel.source


# ---------------------------------------------------------------- models


class EagerAttention(torch.nn.Module):
    """Attention written out, as many models do: both products are batched matmuls."""

    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x):
        B, S, D = x.shape
        d = D // self.heads
        q, k, v = (t.view(B, S, self.heads, d).transpose(1, 2) for t in self.qkv(x).split(D, dim=-1))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
        y = scores.softmax(dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(B, S, D))


def _all_in_tilelang(router, calls):
    assert count(router, "bmm") == (calls, 0)
    assert not any(c.notes for c in router.counts() if c.family == "bmm")  # every operand read in place


def test_hand_written_attention_block_runs_both_products_in_tilelang():
    torch.manual_seed(0)
    router, got, expected = route_model(["bmm"], EagerAttention(), (torch.randn(2, 40, 32),))
    _all_in_tilelang(router, 2)
    shapes = {c.shape for c in router.counts() if c.family == "bmm"}
    assert shapes == {"8x40x40x8x0x1x4x12x12", "8x40x8x40x0x0x4x0x12"}  # q, k, v: heads of one qkv row
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def _ids(batch=2, seq=24):
    return torch.randint(0, 100, (batch, seq), generator=torch.Generator().manual_seed(0))


def test_bert_eager_attention_routes_scores_and_context_beside_gemm():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    cfg._attn_implementation = "eager"
    model = transformers.BertModel(cfg)
    # gemm first: torch.matmul is asked of gemm, which leaves the batched products to bmm
    router, got, expected = route_model(["gemm", "bmm"], model, (_ids(),))
    _all_in_tilelang(router, 4)
    assert {c.shape for c in router.counts() if c.family == "bmm"} == {"8x24x24x8x0x1x4x4x4", "8x24x8x24x0x0x4x0x4"}
    assert count(router, "gemm")[0] == 2 * 6 + 1 and count(router, "gemm")[1] == 0
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, atol=1e-4, rtol=1e-4)


def test_t5_eager_attention_with_position_bias_routes():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)
    cfg._attn_implementation = "eager"
    router, got, expected = route_model(["bmm"], transformers.T5EncoderModel(cfg), (_ids(),))
    _all_in_tilelang(router, 4)
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, atol=1e-5, rtol=1e-5)


def test_deberta_v2_disentangled_attention_routes_every_bmm():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.DebertaV2Config(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        relative_attention=True,
        pos_att_type=["p2c", "c2p"],
        position_buckets=16,
        max_relative_positions=32,
    )
    router, got, expected = route_model(["bmm"], transformers.DebertaV2Model(cfg), (_ids(),))
    # per layer: the scores (k^T / scale: a transposed tensor), c2p and p2c (position keys and
    # queries transposed) and the context
    _all_in_tilelang(router, 8)
    assert {c.shape: c.tilelang for c in router.counts() if c.family == "bmm"} == {
        "8x24x24x8x0x1": 2,
        "8x24x32x8x0x1": 4,
        "8x24x8x24": 2,
    }
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, atol=1e-5, rtol=1e-5)


def test_kernel_sweep_times_bert_and_the_long_product_on_the_family_space_and_a_wider_grid():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "kernel_sweep.py"
    spec = importlib.util.spec_from_file_location("kernel_sweep", path)
    ks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ks)
    todo = ks.cases({"bmm"}, H200)
    assert [s for _, s, _, _ in todo] == ks.BMM and {f for f, *_ in todo} == {"bmm"}
    assert {s[:4] for s in ks.BMM} == {(96, 128, 128, 64), (96, 128, 64, 128), (32, 1024, 1024, 128)}
    for _, shape, configs, own in todo:
        assert configs[: len(own)] == own and len(configs) > len(own)
    picked = ks.only_shapes(todo, "96x128x128x64x0x1x12x12x12")
    assert [s for _, s, _, _ in picked] == [(96, 128, 128, 64, 0, 1, 12, 12, 12)]
