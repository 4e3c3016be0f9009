"""Attention family: the CPU schedule (TileLang's C backend) against
F.scaled_dot_product_attention, shape and config validation, the search spaces, the
CUDA schedule lowered for sm_90a (every config of the H200 space; which key blocks
build the mask; the overlap pipeline's issue order), the mapping from profiled calls,
and routing SDPA calls at the operator.

In: shapes, seeds and configs. Out: pass/fail. Kernels are compiled once per process
(the family's cache), so the seeds and the swap-in reuse the same builds.
"""

import math
import shutil

import pytest
import torch
import torch.nn.functional as F

from evaluator.errors import KernelError
from evaluator.kernels.attention import programs as P
from evaluator.kernels import common as C
from evaluator.kernels import attention as A
from evaluator.results import Hardware
from tests.hardware import A100, CPU, H200

FAM = A.FAMILY
SM90 = "cuda -arch=sm_90a"
SMALL = (1, 2, 128, 128, 64, 0)
OVERLAP = {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256, "overlap": True}
SMALL_CAUSAL = (1, 2, 128, 128, 64, 1)
GPU_SHAPE = (1, 4, 4096, 4096, 128, 0)


def cpu_kernel(shape, dtype, config=None):
    config = FAM.search_space(shape, dtype, CPU)[0] if config is None else config
    return FAM.build(shape, dtype, config, "c")


def check(shape, dtype, seeds=(0, 1, 2), config=None):
    kernel = cpu_kernel(shape, dtype, config)
    atol, rtol = FAM.tolerance(dtype, shape)
    for seed in seeds:
        inputs = FAM.make_inputs(shape, dtype, "cpu", seed)
        out = kernel(*inputs)
        ref = FAM.reference(*inputs)
        assert out.shape == ref.shape == inputs[0].shape and out.dtype == ref.dtype
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)
    return kernel


# ---------------------------------------------------------------- CPU correctness


@pytest.mark.slow
@pytest.mark.parametrize("shape", [SMALL, SMALL_CAUSAL], ids=["full", "causal"])
def test_cpu_fp32_matches_sdpa(shape):
    check(shape, "float32")


@pytest.mark.parametrize("shape", [(1, 2, 45, 77, 32, 1), (2, 1, 77, 45, 32, 1)], ids=["Sq<Skv", "Sq>Skv"])
def test_cpu_fp32_awkward_causal_is_top_left(shape):
    # Sq != Skv and neither a multiple of 16: tails in both loops, and PyTorch's
    # top-left causal alignment (query i sees keys 0..i) rather than bottom-right.
    assert shape[2] % 16 and shape[3] % 16
    kernel = check(shape, "float32")
    q, k, v = FAM.make_inputs(shape, "float32", "cpu", 5)
    out = kernel(q, k, v)
    torch.testing.assert_close(out[:, :, 0], v[:, :, 0])  # row 0 sees key 0 only
    bottom_right = torch.ones(shape[2], shape[3], dtype=torch.bool).tril(shape[3] - shape[2])
    assert not torch.allclose(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bottom_right), atol=1e-3)


def test_cpu_fp16_awkward_causal():
    # fp16 storage, fp32 tiles: one rounding of the output, as PyTorch's CPU kernel.
    shape = FAM.awkward_shape((2, 3, 16, 34, 64, 1))
    assert shape[2] % 16 and shape[3] % 16
    check(shape, "float16")


def test_cpu_other_tiles_causal_tail():
    # A key tile wider than the query tile: the causal loop bound must still reach the
    # diagonal of every query block, and the last block's rows past Sq are not stored.
    check((1, 1, 53, 53, 32, 1), "float32", seeds=(0,), config={"block_M": 16, "block_N": 32})


def test_cpu_bf16_is_refused_clearly():
    with pytest.raises(KernelError, match="bfloat16"):
        FAM.build(SMALL, "bfloat16", {}, "c")
    assert "bfloat16" in FAM.reject_reason(SMALL, "bfloat16", {}, CPU)


def test_wrong_result_is_detectable():
    kernel = check(SMALL_CAUSAL, "float32", seeds=(0,))
    inputs = FAM.make_inputs(SMALL_CAUSAL, "float32", "cpu", 0)
    atol, rtol = FAM.tolerance("float32", SMALL_CAUSAL)
    out = kernel(*inputs)
    out[0, 1, 100, 7] += 1e-3
    assert not torch.allclose(out, FAM.reference(*inputs), atol=atol, rtol=rtol)
    # The causal flag travels with the inputs: a non-causal reference does not match.
    q, k, v = inputs
    assert not torch.allclose(kernel(*inputs), F.scaled_dot_product_attention(q, k, v), atol=1e-2, rtol=1e-2)
    # An all-zero output fails even in fp16: atol follows the output's scale.
    f16_atol, f16_rtol = FAM.tolerance("float16", (4, 32, 4096, 4096, 128, 0))
    ref = torch.full((64,), math.sqrt(math.e / 4096))
    assert not torch.allclose(torch.zeros(64), ref, atol=f16_atol, rtol=f16_rtol)


def test_build_is_cached_and_validates_config():
    cfg = FAM.search_space(SMALL, "float32", CPU)[0]
    assert FAM.build(SMALL, "float32", cfg, "c") is FAM.build(SMALL, "float32", dict(cfg), "c")
    with pytest.raises(KernelError, match="unknown config"):
        FAM.build(SMALL, "float32", {"block_K": 32}, "c")
    with pytest.raises(KernelError, match="positive"):
        FAM.build(SMALL, "float32", {"block_M": 0}, "c")


# ---------------------------------------------------------------- shapes and data


@pytest.mark.parametrize(
    "bad",
    [
        (1, 2, 128, 128, 64, 2),
        (1, 2, 128, 128, 64),
        (1, 0, 128, 128, 64, 0),
        (1, 2, -3, 128, 64, 1),
        ("a", 2, 3, 4, 5, 0),
    ],
)
def test_shape_validation(bad):
    for call in (
        lambda: FAM.make_inputs(bad, "float32", "cpu", 0),
        lambda: FAM.flops(bad),
        lambda: FAM.search_space(bad, "float32", CPU),
        lambda: FAM.build(bad, "float32", {}, "c"),
    ):
        with pytest.raises(KernelError, match="B, H, Sq, Skv, D"):
            call()


def test_make_inputs_deterministic_and_tagged():
    a = FAM.make_inputs((2, 3, 5, 7, 8, 1), "float16", "cpu", 3)
    b = FAM.make_inputs((2, 3, 5, 7, 8, 1), "float16", "cpu", 3)
    c = FAM.make_inputs((2, 3, 5, 7, 8, 1), "float16", "cpu", 4)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])
    assert [tuple(t.shape) for t in a] == [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8)]
    assert all(t.dtype == torch.float16 and t.is_contiguous() for t in a)
    assert getattr(a[0], A.CAUSAL_ATTR) is True
    assert getattr(FAM.make_inputs(SMALL, "float32", "cpu", 0)[0], A.CAUSAL_ATTR) is False
    with pytest.raises(KernelError, match="make_inputs"):
        FAM.reference(a[0].clone(), a[1], a[2])


def test_metrics():
    B, H, Sq, Skv, D, _ = shape = (2, 4, 256, 512, 64, 0)
    assert FAM.flops(shape) == 4 * B * H * Sq * Skv * D
    assert FAM.flops(shape[:5] + (1,)) == FAM.flops(shape) / 2
    assert FAM.bytes(shape, "float16") == 2 * B * H * (2 * Sq + 2 * Skv) * D
    assert FAM.bytes(shape, "float32") == 2 * FAM.bytes(shape, "float16")
    tols = [FAM.tolerance(dt, shape) for dt in ("float32", "float16", "bfloat16")]
    assert tols[0] < tols[1] < tols[2]
    # Longer key sequences average more values: smaller outputs, smaller atol.
    assert FAM.tolerance("float32", (1, 1, 8, 4096, 64, 0))[0] < FAM.tolerance("float32", (1, 1, 8, 128, 64, 0))[0]
    # ... down to one output ulp at magnitude 1 in fp16 (short causal rows round P at O(1))
    assert FAM.tolerance("float16", (1, 1, 8, 4096, 64, 1))[0] == 2.0**-10


def test_standard_shapes():
    cpu = FAM.standard_shapes("cpu")
    cuda = FAM.standard_shapes("cuda")
    for shapes in (cpu, cuda):
        assert 3 <= len(shapes) <= 5 and all(FAM.check(s) == s for s in shapes)
        assert any(s[2] % 16 and s[3] % 16 for s in shapes)
        assert {s[5] for s in shapes} == {0, 1}
    assert SMALL in cpu and max(FAM.flops(s) for s in cpu) <= 4 * 4 * 256 * 256 * 64
    assert {(4, 32, 4096, 4096, 128, 0), (4, 32, 4096, 4096, 128, 1), (8, 12, 128, 128, 64, 0)} <= set(cuda)
    assert any(s[4] == 64 and s[2] == 4096 for s in cuda)
    awk = FAM.awkward_shape((4, 32, 4096, 4096, 128, 1))
    assert awk[:2] == (4, 32) and awk[4:] == (128, 1) and awk[2] % 16 and awk[3] % 16


# ---------------------------------------------------------------- profiled calls


def test_problem_shape_from_input_shapes():
    q, k = [2, 4, 16, 8], [2, 4, 24, 8]
    sdpa = A.SDPA
    assert FAM.aten_ops == frozenset({sdpa})
    assert FAM.problem_shape(sdpa, [q, k, k, [], [], [], [], []]) == (2, 4, 16, 24, 8, 0)
    args = [None, None, None, None, 0.0, True, None, False]
    assert FAM.problem_shape(sdpa, [q, k, k, [], [], [], [], []], args) == (2, 4, 16, 24, 8, 1)
    assert FAM.problem_shape(sdpa, [q, k, k], [None] * 5 + [False]) == (2, 4, 16, 24, 8, 0)
    assert FAM.problem_shape(sdpa, [q, k, k], [None] * 6 + [1 / math.sqrt(8)]) == (2, 4, 16, 24, 8, 0)
    # The scale is a kernel parameter: any scale names the same shape.
    assert FAM.problem_shape(sdpa, [q, k, k], [None] * 6 + [0.5]) == (2, 4, 16, 24, 8, 0)
    # A mask is part of the shape: a 2-D [Sq, Skv] one varies along the last two dims
    # (bool unless the dtypes say otherwise; tests/kernels/test_attention_masks.py).
    assert FAM.problem_shape(sdpa, [q, k, k, [16, 24]]) == (2, 4, 16, 24, 8, 0, 0, 0, 0, 0, 1, 11)
    # What the kernel does not compute maps to None rather than to a wrong shape.
    assert FAM.problem_shape(sdpa, [q, k, k, [16, 23]]) is None  # a mask that does not broadcast
    # grouped-query heads (enable_gqa): key/value heads that divide the query's
    assert FAM.problem_shape(sdpa, [q, [2, 2, 24, 8], [2, 2, 24, 8]]) == (2, 4, 16, 24, 8, 0, 0, 0, 0, 2)
    assert FAM.problem_shape(sdpa, [q, [2, 3, 24, 8], [2, 3, 24, 8]]) is None  # 3 does not divide 4
    assert FAM.problem_shape(sdpa, [q, k, [2, 4, 24, 16]]) is None  # value head dim != D
    assert FAM.problem_shape(sdpa, [q, k, k], [None] * 4 + [0.1, True]) is None  # dropout
    assert FAM.problem_shape(sdpa, [[16, 8], [24, 8], [24, 8]]) is None
    assert FAM.problem_shape("aten::bmm", [q, k, k]) is None
    assert FAM.problem_shape(sdpa, []) is None


@pytest.mark.parametrize(
    "shape",
    [
        (1, 4, 100, 77, 32, 1, 0, 0, 0, 2),
        (2, 4, 64, 64, 32, 0, 4, 2, 2, 2),
        (1, 8, 50, 70, 16, 1, 8, 1, 1, 1),
        (1, 6, 33, 33, 16, 0, 0, 0, 0, 3),
    ],
    ids=["causal-tails", "views", "one-kv-head-views", "group-of-2"],
)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_grouped_query_heads_match_sdpa_with_enable_gqa_on_cpu(shape, dtype):
    # llama 2/3's, Mistral's, Qwen's attention: query head h reads key/value head
    # h // (H // kv_heads), as SDPA's enable_gqa does; contiguous or as transposed views.
    kernel = check(shape, dtype, seeds=(0, 1))
    q, k, v = FAM.make_inputs(shape, dtype, "cpu", 0)
    H, Hkv = shape[1], FAM.check(shape)[9]
    assert k.shape[1] == v.shape[1] == Hkv < H
    if Hkv > 1:  # reading head h % Hkv instead (k.repeat's order) does not pass
        wrong = F.scaled_dot_product_attention(
            q.float(),
            k.float().repeat(1, H // Hkv, 1, 1),
            v.float().repeat(1, H // Hkv, 1, 1),
            is_causal=bool(shape[5]),
        )
        assert not torch.allclose(kernel(q, k, v).float(), wrong, atol=1e-2, rtol=1e-2)


def test_grouped_query_shapes_check_route_and_count():
    assert FAM.check((1, 4, 8, 8, 16, 0, 0, 0, 0, 4)) == (1, 4, 8, 8, 16, 0)  # as many kv heads as heads
    assert FAM.check((1, 4, 8, 8, 16, 0, 4, 4, 4, 4)) == (1, 4, 8, 8, 16, 0, 4, 4, 4)
    assert FAM.check((1, 4, 8, 8, 16, 0, 4, 2, 2, 2)) == (1, 4, 8, 8, 16, 0, 4, 2, 2, 2)
    for bad in ((1, 4, 8, 8, 16, 0, 0, 0, 0, 3), (1, 4, 8, 8, 16, 0, 4, 1, 1, 2)):
        with pytest.raises(KernelError, match="kv_heads"):
            FAM.check(bad)
    gqa = (2, 32, 512, 512, 64, 1, 0, 0, 0, 4)
    assert FAM.input_shapes(gqa) == [(2, 32, 512, 64), (2, 4, 512, 64), (2, 4, 512, 64)]
    assert FAM.bytes(gqa, "float16") == 2 * (2 * 32 * 512 + 2 * 4 * 512) * 64 * 2
    assert FAM.flops(gqa) == FAM.flops(gqa[:6])
    assert FAM.layout_free((2, 32, 512, 512, 64, 1, 32, 4, 4, 4)) == gqa
    q, k = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 8, 16)
    assert FAM.route(F.scaled_dot_product_attention, (q, k, k), {"enable_gqa": True}, "float32").shape == (
        1,
        4,
        8,
        8,
        16,
        0,
        0,
        0,
        0,
        2,
    )
    assert "without enable_gqa" in FAM.route(F.scaled_dot_product_attention, (q, k, k), {}, "float32")
    assert "differ" in FAM.route(
        F.scaled_dot_product_attention,
        (q, torch.randn(1, 3, 8, 16), torch.randn(1, 3, 8, 16)),
        {"enable_gqa": True},
        "float32",
    )
    # DeepSeek's latent attention: q and k with the rotary part (24), v without (16)
    qk, v = torch.randn(1, 4, 8, 24), torch.randn(1, 4, 8, 16)
    why = FAM.route(F.scaled_dot_product_attention, (qk, qk, v), {}, "float32")
    assert why == "value head dim 16, not the query's 24: the kernel reads one head dim"
    assert "key's batch or head dim" in FAM.route(F.scaled_dot_product_attention, (qk, v, v), {}, "float32")


@pytest.mark.slow
@pytest.mark.parametrize(
    "cfg",
    [
        {"block_M": 128, "block_N": 128, "num_stages": 1, "threads": 256},
        {"block_M": 64, "block_N": 128, "num_stages": 2, "threads": 128, "overlap": True},
        {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256, "pingpong": True},
    ],
    ids=["ws", "overlap", "pingpong"],
)
def test_grouped_query_heads_lower_for_sm90_reading_the_groups_head(cfg):
    # TinyLlama's 32 query heads over 4 key/value heads, as its views: head by reads kv head by / 8.
    src = C.lower_source(FAM.program((4, 32, 512, 512, 64, 1, 32, 4, 4, 4), "float16", cfg, SM90), SM90)
    assert "((int)blockIdx.y) >> 3" in src
    plain = C.lower_source(FAM.program((4, 32, 512, 512, 64, 1, 32, 32, 32), "float16", cfg, SM90), SM90)
    assert "((int)blockIdx.y) >> 3" not in plain


@pytest.mark.slow
def test_problem_shape_from_a_real_profile():
    from torch.profiler import ProfilerActivity, profile

    q, k, v = torch.randn(1, 2, 9, 16), torch.randn(1, 2, 13, 16), torch.randn(1, 2, 13, 16)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
        F.scaled_dot_product_attention(q, k, v)
    events = [e for e in prof.events() if e.name == A.SDPA]
    assert len(events) == 2
    got = [FAM.problem_shape(e.name, e.input_shapes, e.concrete_inputs) for e in events]
    assert got == [(1, 2, 9, 13, 16, 1), (1, 2, 9, 13, 16, 0)]


# ---------------------------------------------------------------- search spaces


def test_cpu_search_space():
    space = FAM.search_space(SMALL, "float32", CPU)
    assert 3 <= len(space) <= 4
    assert all(FAM.reject_reason(SMALL, "float32", c, CPU) is None for c in space)
    tiny = FAM.search_space((1, 1, 5, 7, 8, 0), "float32", CPU)
    assert all(c["block_M"] <= 8 and c["block_N"] <= 8 for c in tiny)
    assert "stack" in FAM.reject_reason(SMALL, "float32", {"block_M": 512, "block_N": 512}, CPU)


@pytest.mark.parametrize("D", [64, 128])
def test_gpu_search_space_fits_device(D):
    shape = (4, 32, 4096, 4096, D, 1)
    space = FAM.search_space(shape, "float16", H200)
    assert 4 <= len(space) <= 14
    # What measured fastest on the H200 for this kind of shape comes first (A._measured_first).
    assert space[0] == A._measured_first(D, True, 4096)
    assert space[0] == (
        {"block_M": 128, "block_N": 128, "num_stages": 1, "threads": 256}
        if D == 128
        else {**OVERLAP, "block_M": 64, "block_N": 128, "threads": 128}
    )
    for c in space:
        assert FAM.reject_reason(shape, "float16", c, H200) is None
        assert (c["block_M"] * D + 2 * c["block_N"] * D * c["num_stages"]) * 2 <= H200.smem_per_block
    small = Hardware(**{**H200.__dict__, "smem_per_block": 48 * 1024})
    fitted = FAM.search_space(shape, "float16", small)
    assert 0 < len(fitted) < len(space)
    assert all(A._gpu_smem(c, D, "float16") <= 48 * 1024 for c in fitted)


def test_gpu_search_space_puts_the_measured_best_first():
    # H200 sweep: BERT's s128 ran fastest on 128x64 tiles (1.25x) although 96 blocks of
    # 128 rows leave SMs idle; ViT's s197 on the overlap schedule, all 197 keys in one block.
    bert = FAM.search_space((8, 12, 128, 128, 64, 0), "float16", H200)
    assert bert[0] == {"block_M": 128, "block_N": 64, "num_stages": 1, "threads": 256}
    vit = FAM.search_space((16, 12, 197, 197, 64, 0), "float16", H200)
    assert vit[0] == {**OVERLAP, "block_M": 64, "block_N": 208, "threads": 128}  # every key in one block
    # Without sm_90 the overlap schedule is refused: the largest query tile that gives
    # every SM a block comes first instead.
    old = FAM.search_space((16, 12, 197, 197, 64, 0), "float16", A100)
    assert not old[0].get("overlap") and 16 * 12 * C.ceildiv(197, old[0]["block_M"]) >= 132


def test_overlap_config_checks():
    assert A.GPU_DEFAULTS["overlap"] is False
    assert FAM.reject_reason(GPU_SHAPE, "float16", OVERLAP, H200) is None
    assert "num_stages must be 2" in FAM.reject_reason(GPU_SHAPE, "float16", {**OVERLAP, "num_stages": 1}, H200)
    assert "multiple of 128" in FAM.reject_reason(
        GPU_SHAPE, "float16", {**OVERLAP, "block_M": 32, "block_N": 32, "threads": 64}, H200
    )
    assert "sm_90" in FAM.reject_reason(GPU_SHAPE, "float16", OVERLAP, A100)
    assert not [c for c in FAM.search_space(GPU_SHAPE, "float16", A100) if c.get("overlap")]
    # The tuner's neighbour of the first config flips the flag: rejected with the reason.
    big = (4, 32, 4096, 4096, 128, 1)
    first = FAM.search_space(big, "float16", H200)[0]
    assert "num_stages" in FAM.reject_reason(big, "float16", {**first, "overlap": True}, H200)


def test_overlap_schedule_is_a_valid_order():
    order, stage = P._overlap_schedule()
    names = [n for n, _ in P._OVERLAP_BODY]
    assert sorted(order) == list(range(len(names))) and len(stage) == len(names)
    at = {n: (stage[i], order[i]) for i, n in enumerate(names)}
    # (stage, order) of each producer before its consumer, as TileLang checks; the K
    # load runs a stage ahead of S, and PV a stage behind the softmax that makes P.
    for src, dst in [
        ("copy_k", "qk"),
        ("init_s", "qk"),
        ("qk", "softmax0"),
        ("softmax7", "cast"),
        ("cast", "pv"),
        ("copy_v", "pv"),
        ("softmax4", "rescale"),
        ("rescale", "pv"),
        ("wait_qk", "softmax0"),
        ("wait_pv", "cast"),
        ("wait_pv", "sync"),
    ]:
        assert at[src] < at[dst], (src, dst)
    assert at["copy_k"][0] < at["qk"][0] < at["pv"][0]
    # Within an iteration: S of the next block and PV of this one are issued, then the
    # wait for S, then its softmax, which runs while PV is on the tensor cores.
    assert (
        order[names.index("qk")]
        < order[names.index("pv")]
        < order[names.index("wait_qk")]
        < order[names.index("softmax0")]
        < order[names.index("wait_pv")]
    )


def test_reject_reason():
    ok = {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256}
    assert FAM.reject_reason(GPU_SHAPE, "float16", ok, H200) is None
    assert "unknown config" in FAM.reject_reason(GPU_SHAPE, "float16", {**ok, "block_K": 64}, H200)
    assert "shared memory" in FAM.reject_reason(GPU_SHAPE, "float16", {**ok, "num_stages": 4}, H200)
    assert "threads" in FAM.reject_reason(GPU_SHAPE, "float16", {**ok, "threads": 100}, H200)
    assert "warps" in FAM.reject_reason(GPU_SHAPE, "float16", {**ok, "block_M": 64}, H200)
    assert "spill" in FAM.reject_reason(GPU_SHAPE, "float16", {**ok, "threads": 128}, H200)
    assert "multiple of 16" in FAM.reject_reason((1, 4, 256, 256, 72, 0), "float16", ok, H200)
    assert "float16" in FAM.reject_reason(GPU_SHAPE, "float32", ok, H200)
    assert "B, H, Sq, Skv, D" in FAM.reject_reason((1, 2, 3), "float16", ok, H200)


def test_one_key_block_over_every_key_gets_more_registers():
    # ViT's 197 keys in one 208-wide block: no K/V loop, so 188 accumulator registers a
    # thread build without spills (ptxas); with a loop the same tile is refused.
    whole = {"block_M": 64, "block_N": 208, "num_stages": 1, "threads": 128}
    vit = (16, 12, 197, 197, 64, 0)
    assert FAM.reject_reason(vit, "float16", whole, H200) is None
    assert "spill" in FAM.reject_reason((16, 12, 197, 400, 64, 0), "float16", whole, H200)
    assert "spill" in FAM.reject_reason(vit, "float16", {**whole, "block_N": 256}, H200)  # 224, spilled 48 B
    space = FAM.search_space(vit, "float16", H200)
    assert whole in space and {**whole, "block_M": 128, "threads": 256} in space
    assert {c["block_N"] for c in FAM.search_space((8, 12, 128, 128, 64, 0), "float16", H200)} == {32, 64, 128}


def test_gpu_fp32_is_refused_clearly():
    assert FAM.search_space(GPU_SHAPE, "float32", H200)  # one candidate, so the tuner records why
    with pytest.raises(KernelError, match="float16 or bfloat16"):
        FAM.program(GPU_SHAPE, "float32", {}, SM90)


# ---------------------------------------------------------------- CUDA schedule (lowered only)


H200_SPACE = FAM.search_space(GPU_SHAPE, "float16", H200)


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(H200_SPACE)))
def test_every_h200_config_lowers_for_sm90(index):
    # Causal alternates across configs so both mask paths are lowered without
    # doubling the (multi-second) lowerings.
    shape = GPU_SHAPE[:5] + (index % 2,)
    cfg = H200_SPACE[index]
    src = C.lower_source(FAM.program(shape, "float16", cfg, SM90), SM90)
    assert "__global__" in src and "wgmma" in src  # Hopper tensor cores, not a scalar loop
    assert "exp2" in src


@pytest.mark.slow
def test_bf16_lowers_for_sm90():
    cfg = FAM.search_space(GPU_SHAPE, "bfloat16", H200)[0]
    src = C.lower_source(FAM.program(GPU_SHAPE[:5] + (1,), "bfloat16", cfg, SM90), SM90)
    assert "wgmma" in src and "kBFloat16" in src


@pytest.mark.slow
def test_d64_awkward_causal_lowers_for_sm90():
    shape = (2, 3, 135, 119, 64, 1)
    cfg = FAM.search_space(shape, "float16", H200)[0]
    src = C.lower_source(FAM.program(shape, "float16", cfg, SM90), SM90)
    assert "wgmma" in src


@pytest.mark.parametrize("bM,bN", [(128, 128), (128, 64), (64, 128), (64, 64)])
@pytest.mark.parametrize("Sq,Skv", [(512, 512), (197, 197), (135, 119), (119, 135), (300, 4096), (4096, 300)])
@pytest.mark.parametrize("causal", [0, 1])
def test_kv_blocks_mask_exactly_the_blocks_that_need_it(bM, bN, Sq, Skv, causal):
    def visible(q, k):
        return k < Skv and (not causal or k <= q)

    for bx in range(C.ceildiv(Sq, bM)):
        n_blocks, n_full = P.kv_blocks(bx, bM, bN, Skv, causal)
        rows = range(bx * bM, (bx + 1) * bM)
        fully = [all(visible(q, k) for q in rows for k in range(kb * bN, (kb + 1) * bN)) for kb in range(n_blocks)]
        # The unmasked blocks lead and are exactly the fully visible ones: no block that
        # needs the mask skips it, none that does not pays for it.
        assert fully == [True] * n_full + [False] * (n_blocks - n_full), (bx, n_blocks, n_full)
        # Every visible key is visited, and the last visited block holds one.
        assert not any(visible(q, k) for q in rows for k in range(n_blocks * bN, Skv + bN))
        assert any(visible(q, k) for q in rows for k in range((n_blocks - 1) * bN, n_blocks * bN))
        if causal and n_blocks == 1:  # the overlap pipeline visits block 1 as well: fully masked
            assert n_full <= 1 and not any(visible(q, k) for q in rows for k in range(bN, 2 * bN))


def _mask_guards(src):
    """For each per-element mask in the lowered source, the `if` line guarding its loop."""
    lines = src.splitlines()
    guards = []
    for i, line in enumerate(lines):
        if "float condval" in line:
            j = i - 1
            while not lines[j].lstrip().startswith("for (int i"):
                j -= 1
            j -= 1
            while lines[j].lstrip().startswith("#pragma"):
                j -= 1
            guards.append(lines[j].strip())
    return guards


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [(4, 32, 4096, 4096, 128, 0), (4, 12, 512, 512, 64, 1), (16, 12, 197, 197, 64, 0)],
    ids=["full", "causal", "kv-tail"],
)
def test_ws_schedule_masks_only_diagonal_and_tail_blocks(shape):
    cfg = {"block_M": 128, "block_N": 128, "num_stages": 1, "threads": 256}
    src = C.lower_source(FAM.program(shape, "float16", cfg, SM90), SM90)
    assert "__launch_bounds__(384" in src  # still warp-specialized: a TMA producer warpgroup
    guards = _mask_guards(src)
    if not shape[5] and shape[3] % 128 == 0:
        assert guards == []  # no block of a plain s4096 ever builds the mask
    else:
        # The mask is built under a branch on the key-block index, not in every block.
        assert guards and all(g.startswith("if (") and "kb" in g for g in guards), guards


def _issue_order(src):
    """The order the lowered source issues QK^T (wgmma_ss), PV (wgmma_rs), the waits for
    the newest-but-one (W1) and all (W0) wgmma groups, and the softmax's exp2 (EXP)."""
    marks = [
        ("wgmma_ss<", "QK"),
        ("wgmma_rs<", "PV"),
        ("wait_wgmma<1>", "W1"),
        ("wait_wgmma<0>", "W0"),
        ("exp2f(", "EXP"),
    ]
    seq = []
    for line in src.splitlines():
        for needle, mark in marks:
            if needle in line and (not seq or seq[-1] != mark):
                seq.append(mark)
    return " ".join(seq)


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [
        (4, 32, 4096, 4096, 128, 1),
        (4, 12, 512, 512, 64, 1),
        (16, 12, 197, 197, 64, 0),
        (2, 3, 135, 119, 64, 1),
        (2, 3, 119, 135, 128, 1),
    ],
    ids=["s4096-d128-causal", "gpt2-causal", "vit-tail", "Sq>Skv-causal", "Sq<Skv-causal"],
)
def test_overlap_lowers_for_sm90_with_softmax_under_pv(shape):
    src = C.lower_source(FAM.program(shape, "float16", OVERLAP, SM90), SM90)
    # No producer warpgroup: all 256 threads load K and V with cp.async (zero-filled
    # past Skv) and issue asynchronous WGMMA.
    assert "__launch_bounds__(256" in src and "cp_async_gs" in src
    order = _issue_order(src)
    # Steady state (or, for two blocks, the pipeline's epilogue): S of block t and PV of
    # block t-1 are issued, S is waited for, its softmax runs, then PV is waited for.
    assert "QK PV W1 EXP W0" in order, order
    # The first S is waited for on its own (no PV before it); the last PV is waited for.
    assert order.startswith("QK W1 EXP W0"), order
    assert src.rindex("wait_wgmma<0>") > src.rindex("wgmma_rs<")


@pytest.mark.slow
def test_overlap_one_key_block_lowers_without_the_pipeline():
    # Skv <= block_N, non-causal (BERT s128): one block, computed without the pipeline.
    src = C.lower_source(FAM.program((8, 12, 128, 128, 64, 0), "float16", OVERLAP, SM90), SM90)
    assert "wgmma" in src and "wait_wgmma<1>" not in src


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_schedule_compiles_for_sm90():
    kernel = FAM.build(GPU_SHAPE, "float16", H200_SPACE[0], SM90)
    assert "__global__" in kernel.source


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
# One warpgroup with split_count at head dim 128 spills 56 bytes (255 registers). The
# space leaves split_count out (slower on the H200, 2026-12-03 sweep); it stays buildable.
@pytest.mark.parametrize("block_N,D,one_wg", [(128, 128, False), (64, 128, False), (128, 64, False), (128, 64, True)])
def test_overlap_wgmma_stays_asynchronous_in_ptxas(block_N, D, one_wg, tmp_path):
    # ptxas serializes every wgmma of a kernel (warning C7514) when a non-wgmma
    # instruction touches an accumulator while its wgmma is in flight, or when it cannot
    # prove the pipeline's guards; the overlap would then be gone without any error. Also:
    # no register spills. one_wg: 64x128 tiles on one warpgroup (the causal head-dim-64
    # first config, GPT-2's and llama's) with `split_count`.
    cfg = {**OVERLAP, "block_N": block_N, **({"block_M": 64, "threads": 128, "split_count": True} if one_wg else {})}
    log = _ptxas_log(tmp_path, (4, 32, 4096, 4096, D, 1), cfg)
    assert "C7514" not in log and "serialized" not in log, log[-2000:]
    assert " 0 bytes spill stores" in log, log[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_one_warpgroup_causal_overlap_is_serialized_without_split_count(tmp_path):
    # Why `split_count` exists: the first config at head dim 64, causal, written with
    # T.max(n, 2) as its loop count, has every wgmma serialized by ptxas (found in session
    # 16; the 0.83x at 4x32x4096^2x64 causal was measured this way). When TileLang or
    # ptxas stop doing that, this fails and the variant can go.
    cfg = {**OVERLAP, "block_M": 64, "threads": 128}
    assert "C7514" in _ptxas_log(tmp_path, (4, 32, 4096, 4096, 64, 1), cfg)
    # Serialized or not, it ran faster than the split variant on the H200 (0.83x SDPA
    # against 0.61x,
    # reports/examples/kernels/h200-2026-12-03/kernel_sweep_swap_attention.json): it stays
    # first and the split variant is not searched.
    space = FAM.search_space((4, 32, 4096, 4096, 64, 1), "float16", H200)
    assert space[0] == cfg and not any(c.get("split_count") for c in space)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("fast", [True, False])
def test_fast_math_builds_each_exp2_as_one_unguarded_instruction(fast):
    # The GPU default (fast_math) builds with nvcc --use_fast_math, carried by the PrimFunc:
    # every exp2 of the softmax is ex2.approx.ftz (one MUFU.EX2, no denormal guard of a
    # compare and two multiplies) and 1/l_sum an approximate division. Off, neither.
    ps = _ptx_stats()
    cfg = {**OVERLAP, "block_M": 64, "threads": 128, "fast_math": fast}
    attrs = FAM.program((4, 32, 4096, 4096, 64, 1), "float16", cfg, SM90).attrs
    assert ("tilelang_pass_configs" in attrs) == fast
    counts, lines = ps.stats("attention", (4, 32, 4096, 4096, 64, 1), cfg)
    ftz, plain = counts.get("ex2.approx.ftz.f32", 0), counts.get("ex2.approx.f32", 0)
    assert (ftz > 0 and plain == 0) if fast else (plain > 0 and ftz == 0), counts
    assert ("div.approx.ftz.f32" in counts) == fast and ("div.rn.f32" in counts) != fast, counts


def _ptx_stats():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("ptx_stats", Path(__file__).parents[2] / "benchmarks/ptx_stats.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ptxas_log(tmp_path, shape, cfg):
    import subprocess

    from tilelang.contrib.nvcc import default_compile_options

    src = tmp_path / "attention.cu"
    prim = FAM.program(shape, "float16", cfg, SM90)
    src.write_text(C.lower_source(prim, SM90))
    fast = ["--use_fast_math"] if prim.attrs and "tilelang_pass_configs" in prim.attrs else []  # as TileLang builds it
    cmd = [
        "nvcc",
        *default_compile_options(),
        *fast,
        "-w",
        "-gencode",
        "arch=compute_90a,code=sm_90a",
        "-cubin",
        "-Xptxas",
        "-v",
        "-o",
        str(tmp_path / "attention.cubin"),
        str(src),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-2000:]
    return log


# ---------------------------------------------------------------- routing at the operator


def test_sdpa_routes_from_any_call_site_and_counts_masks():
    """SDPA inside a block, on transposed views of a packed qkv as timm passes them,
    causal or not, with the default scale written out or a causal bool mask: the views
    are read in place (row pitch 3H = 6, no copy); a call with both a mask and is_causal
    falls back and is counted with its reason."""
    from tests.routing import count, route_model
    import torch.nn.functional as F

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(32, 96)

        def forward(self, x):
            B, S, _ = x.shape
            q, k, v = self.qkv(x).view(B, S, 3, 2, 16).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            b = F.scaled_dot_product_attention(q, k, v, scale=16**-0.5)
            mask = torch.ones(S, S, dtype=torch.bool).tril()
            c = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            d = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)
            return a + b + c + d

    torch.manual_seed(0)
    router, got, expected = route_model(["attention"], Block(), (torch.randn(2, 19, 32),))
    torch.testing.assert_close(got, expected, atol=2e-4, rtol=1e-4)
    assert count(router, "attention") == (3, 1)
    reasons = {r for c in router.counts() for r in c.fallback}
    notes = {n for c in router.counts() for n in c.notes}
    assert reasons == {"explicit attention mask with is_causal"} and not notes
    assert {c.shape for c in router.counts() if c.tilelang} == {
        "2x2x19x19x16x1x6x6x6",
        "2x2x19x19x16x0x6x6x6",
        "2x2x19x19x16x0x6x6x6x0x1x11",
    }
