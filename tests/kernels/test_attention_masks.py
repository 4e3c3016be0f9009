"""Attention with the arguments real models pass SDPA: an explicit mask (bool or additive,
broadcast as models broadcast it), a softmax scale of their own, both beside grouped-query
heads and transposed views. The CPU schedule against F.scaled_dot_product_attention in
fp32 and fp16 on tails off every tile; rows the mask hides entirely; the shape encoding,
the profiler's names and the route's; the CUDA schedules lowered for sm_90a with the mask;
and transformers models (BERT with padding, Mistral's sliding window, OPT, Whisper's
encoder, T5's relative-position bias) whose every attention call runs in TileLang under
swap.Router with outputs matching.

In: shapes, seeds, configs and tiny models built offline. Out: pass/fail.
"""

from __future__ import annotations

import math
import shutil

import pytest
import torch
import torch.nn.functional as F

from evaluator.errors import KernelError
from evaluator.kernels.attention import programs as P
from evaluator.kernels import common as C
from evaluator.kernels import attention as A
from tests.routing import count, route_model
from tests.hardware import CPU, H200

FAM = A.FAMILY
SM90 = "cuda -arch=sm_90a"
SDPA = F.scaled_dot_product_attention

# (B, H, Sq, Skv, D) with tails off every tile, and the masks models pass.
TAILS = (2, 3, 37, 45, 16)
MASKS = {
    "bert-padding": (P.MASK_BOOL, 1011),  # [B, 1, Sq, Skv], transformers' expanded padding mask
    "key-padding": (P.MASK_BOOL, 1001),  # [B, 1, 1, Skv]
    "window": (P.MASK_BOOL, 11),  # [1, 1, Sq, Skv]: a sliding window or causal written as a mask
    "bias": (P.MASK_FLOAT, 1111),  # [B, H, Sq, Skv]: ALiBi, relative-position biases
    "head-bias": (P.MASK_FLOAT, 111),  # [1, H, Sq, Skv]: T5's bias without padding
    "fp32-bias": (P.MASK_FP32, 1011),  # a float32 mask beside 16-bit inputs
}


def masked(dims, kind, spread, causal=0, layout=(0, 0, 0), kv=0):
    return FAM.check(tuple(dims) + (causal,) + tuple(layout) + (kv, kind, spread))


def cpu_kernel(shape, dtype, config=None, **params):
    config = FAM.search_space(shape, dtype, CPU)[0] if config is None else config
    return FAM.build(shape, dtype, {**config, **params}, "c")


def check(shape, dtype, seeds=(0, 1, 2), config=None):
    kernel = cpu_kernel(shape, dtype, config)
    atol, rtol = FAM.tolerance(dtype, shape)
    for seed in seeds:
        inputs = FAM.make_inputs(shape, dtype, "cpu", seed)
        out, ref = kernel(*inputs), FAM.reference(*inputs)
        assert out.shape == ref.shape and out.dtype == ref.dtype and torch.isfinite(out).all()
        torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)
    return kernel


# ---------------------------------------------------------------- CPU correctness


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", list(MASKS))
def test_cpu_masked_attention_matches_sdpa(name, dtype):
    shape = masked(TAILS, *MASKS[name])
    assert shape[2] % 16 and shape[3] % 16
    kernel = check(shape, dtype)
    assert isinstance(kernel, A.MaskedAttention)
    q, k, v, mask = FAM.make_inputs(shape, dtype, "cpu", 0)
    assert tuple(mask.shape) == P.mask_shape(shape) and mask.is_contiguous()
    # The mask counts: the same inputs without it do not pass.
    atol, rtol = FAM.tolerance(dtype, shape)
    assert not torch.allclose(kernel(q, k, v, mask).float(), SDPA(q, k, v).float(), atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cpu_masked_awkward_shape_and_other_tiles(dtype):
    # The family's awkward shape of BERT's masked one, and a key tile wider than the query tile.
    shape = FAM.awkward_shape(masked((2, 2, 128, 128, 32), P.MASK_BOOL, 1011))
    assert shape[2] % 16 and shape[3] % 16 and shape[10:] == (P.MASK_BOOL, 1011)
    check(shape, dtype)
    check(masked((1, 2, 53, 70, 16), P.MASK_FLOAT, 1111), dtype, seeds=(0,), config={"block_M": 16, "block_N": 32})


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cpu_mask_with_grouped_query_heads_and_views(dtype):
    # Mistral-style: 4 query heads over 2 key/value heads with a window mask; the mask is
    # indexed by the query head. And BERT-style transposed views with a padding mask.
    check(masked((2, 4, 33, 50, 16), P.MASK_FLOAT, 1111, kv=2), dtype, seeds=(0, 1))
    check(masked((2, 4, 33, 33, 16), P.MASK_BOOL, 11, kv=1), dtype, seeds=(0, 1))
    kernel = check(masked((2, 2, 37, 37, 16), P.MASK_BOOL, 1011, layout=(2, 2, 2)), dtype, seeds=(0, 1))
    q, k, v, mask = FAM.make_inputs(masked((2, 2, 37, 37, 16), P.MASK_BOOL, 1011, layout=(2, 2, 2)), dtype, "cpu", 0)
    assert [A.row_pitch(t.shape, t.stride()) for t in (q, k, v)] == [2, 2, 2]
    assert kernel(q, k, v, mask).transpose(1, 2).is_contiguous()  # a strided q's output, as flash SDPA's


@pytest.mark.slow
@pytest.mark.parametrize("scale", [1.0, 0.3, 2.5])
@pytest.mark.parametrize("mask", [None, "bias", "bert-padding"])
def test_scale_is_a_kernel_parameter(scale, mask):
    # OPT, Whisper and T5 pass scale=1.0 (queries pre-scaled, or none at all): the tuned
    # config of the shape, built again with the call's scale.
    shape = masked(TAILS, *MASKS[mask]) if mask else FAM.check(TAILS + (0,))
    assert FAM.params == {"scale": 0.0}
    kernel = cpu_kernel(shape, "float32", scale=scale)
    assert kernel is not cpu_kernel(shape, "float32")
    inputs = FAM.make_inputs(shape, "float32", "cpu", 1)
    want = SDPA(*inputs[:3], attn_mask=inputs[3] if mask else None, scale=scale)
    torch.testing.assert_close(kernel(*inputs), want, atol=2e-5, rtol=2e-5)
    assert not torch.allclose(cpu_kernel(shape, "float32")(*inputs), want, atol=1e-3, rtol=1e-3)
    # 0 is SDPA's default, 1/sqrt(D): the same program as no scale at all.
    assert (
        FAM.program(shape, "float32", {"block_M": 16, "block_N": 32, "scale": 0.0}, "c").script()
        == FAM.program(shape, "float32", {"block_M": 16, "block_N": 32}, "c").script()
    )
    with pytest.raises(KernelError, match="scale must be positive"):
        FAM.program(shape, "float32", {"scale": -1.0}, "c")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_rows_the_mask_hides_entirely_match_pytorch(dtype):
    """A query row that sees no key (all False, all -inf) is 0, as PyTorch's SDPA gives it
    on the CPU, math and flash backends alike; a row of nothing but an additive mask's
    float min averages its keys (each is a finite score), as PyTorch's does."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, H, Sq, Skv, D = 1, 2, 21, 40, 16
    tdtype = C.torch_dtype(dtype)
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(B, H, n, D, generator=g).to(tdtype) for n in (Sq, Skv, Skv))
    hidden = torch.rand(B, 1, Sq, Skv, generator=g) < 0.7
    hidden[..., 0] = False
    hidden[0, 0, 3] = True  # row 3 sees no key
    bias = torch.randn(B, H, Sq, Skv, generator=g).to(tdtype)
    cases = [
        (~hidden, (P.MASK_BOOL, 1011), "zero"),
        (bias.masked_fill(hidden, -math.inf), (P.MASK_FLOAT, 1111), "zero"),
    ]
    if dtype == "float32":  # transformers' padding value (fp16's min, -65504, is an ordinary score)
        cases.append((bias.masked_fill(hidden, torch.finfo(torch.float32).min), (P.MASK_FLOAT, 1111), "mean"))
    for mask, (kind, spread), row3 in cases:
        shape = masked((B, H, Sq, Skv, D), kind, spread)
        got = cpu_kernel(shape, dtype, {"block_M": 16, "block_N": 16})(q, k, v, mask)
        want = SDPA(q, k, v, attn_mask=mask)
        with sdpa_kernel(SDPBackend.MATH):  # the reference is the same on PyTorch's math backend
            torch.testing.assert_close(SDPA(q, k, v, attn_mask=mask), want, atol=2e-3, rtol=2e-3)
        torch.testing.assert_close(got, want, atol=2e-3 if dtype == "float16" else 2e-5, rtol=5e-3)
        assert torch.isfinite(got).all()
        if row3 == "zero":
            assert not got[0, :, 3].any()
        else:
            torch.testing.assert_close(got[0, :, 3], v[0].mean(1), atol=2e-5, rtol=2e-5)


# ---------------------------------------------------------------- shapes, profile, route


def test_masked_shapes_are_checked_and_canonical():
    assert FAM.check((2, 4, 8, 8, 16, 0, 0, 0, 0, 4, 1, 1011)) == (2, 4, 8, 8, 16, 0, 0, 0, 0, 0, 1, 1011)
    assert FAM.check((2, 4, 8, 8, 16, 0, 0, 0, 0, 2, 2, 1111)) == (2, 4, 8, 8, 16, 0, 0, 0, 0, 2, 2, 1111)
    assert FAM.check((2, 4, 8, 8, 16, 0, 0, 0, 0, 0, 0, 0)) == (2, 4, 8, 8, 16, 0)  # no mask: dropped
    assert FAM.check((2, 4, 8, 8, 16, 0, 0, 0, 0, 2, 0, 0)) == (2, 4, 8, 8, 16, 0, 0, 0, 0, 2)
    for bad in [
        (2, 4, 8, 8, 16, 0, 0, 0, 0, 0, 4, 1011),  # no such kind
        (2, 4, 8, 8, 16, 0, 0, 0, 0, 0, 1, 1012),  # not binary digits
        (2, 4, 8, 8, 16, 0, 0, 0, 0, 0, 1, 11111),  # five dims
        (2, 4, 8, 8, 16, 0, 0, 0, 0, 0, 0, 11),  # dims without a mask
        (2, 4, 8, 8, 16, 1, 0, 0, 0, 0, 1, 11),  # a mask and causal
        (2, 4, 8, 8, 16, 0, 0, 0, 0, 0, 1),
    ]:  # eleven fields
        with pytest.raises(KernelError, match="mask_dims"):
            FAM.check(bad)
    shape = (8, 12, 128, 128, 64, 0, 0, 0, 0, 0, 1, 1011)
    assert P.mask_shape(shape) == (8, 1, 128, 128) and P.mask_dims(shape) == (True, False, True, True)
    assert FAM.input_shapes(shape)[3] == (8, 1, 128, 128)
    assert FAM.bytes(shape, "float16") == FAM.bytes(shape[:6], "float16") + 8 * 128 * 128
    vit = (16, 12, 197, 197, 64, 0, 0, 0, 0, 0, 2, 1111)
    assert FAM.bytes(vit, "float16") == FAM.bytes(vit[:6], "float16") + 16 * 12 * 197 * 197 * 2
    assert FAM.bytes(vit[:10] + (3, 1111), "float16") == FAM.bytes(vit[:6], "float16") + 16 * 12 * 197 * 197 * 4
    assert FAM.flops(shape) == FAM.flops(shape[:6])


@pytest.mark.parametrize(
    "size,strides,want",
    [
        ((2, 1, 16, 16), (256, 256, 16, 1), 1011),  # BERT's padding mask, materialized
        ((2, 1, 16, 16), (16, 16, 0, 1), 1001),  # ...expanded from [B, 1, 1, Skv] (stride 0 on Sq)
        ((2, 1, 16, 16), (0, 256, 16, 1), 11),  # Mistral's window, expanded over the batch
        ((1, 2, 16, 16), (512, 256, 16, 1), 111),  # T5's bias
        ((16, 16), (16, 1), 11),  # 2-D, right-aligned as PyTorch broadcasts
        ((16,), None, 1),  # no strides recorded: sizes alone
        ((), None, 0),
        ((2, 2, 16, 16), (512, 256, 16, 1), 1111),
        ((2, 2, 16, 15), (480, 240, 15, 1), None),  # does not broadcast to Skv = 16
        ((3, 1, 16, 16), None, None),
        ((1, 2, 1, 16, 16), None, None),
    ],
)
def test_mask_dims_from_sizes_and_strides(size, strides, want):
    assert A.mask_dims_of(size, strides, (2, 2, 16, 16)) == want


def test_problem_shape_names_masked_calls_from_a_real_profile():
    from torch.profiler import ProfilerActivity, profile

    q, k = torch.randn(2, 2, 9, 16).half(), torch.randn(2, 2, 13, 16).half()
    keys = torch.arange(13) < torch.tensor([13, 10])[:, None]  # each sequence's keys
    pad = keys[:, None, None, :].expand(2, 1, 9, 13)  # as transformers expands a padding mask
    bias = torch.randn(1, 2, 9, 13)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        SDPA(q, k, k, attn_mask=pad)
        SDPA(q, k, k, attn_mask=bias, scale=1.0)
        SDPA(q, k, k, attn_mask=bias.half())
    events = [e for e in prof.events() if e.name == A.SDPA]
    assert len(events) == 3
    strides = [getattr(e, "structured_input_strides", None) for e in events]
    got = [
        FAM.problem_shape(e.name, e.input_shapes, e.concrete_inputs, input_strides=st, input_dtypes=e.input_dtypes)
        for e, st in zip(events, strides)
    ]
    tail = (0, 0, 0, 0)
    # Where the profiler records strides, the expanded query dim (stride 0) is seen as broadcast.
    assert got[0] == (2, 2, 9, 13, 16, 0) + tail + (P.MASK_BOOL, 1001 if strides[0] else 1011)
    assert got[1] == (2, 2, 9, 13, 16, 0) + tail + (P.MASK_FP32, 111)  # the scale is a parameter
    assert got[2] == (2, 2, 9, 13, 16, 0) + tail + (P.MASK_FLOAT, 111)
    # Without dtypes the kind is a guess (bool); without a profile's strides, sizes alone:
    # the layout-free shapes agree, so the routed shape replaces the profiled one.
    guess = FAM.problem_shape(A.SDPA, events[1].input_shapes, events[1].concrete_inputs)
    assert guess == (2, 2, 9, 13, 16, 0) + tail + (P.MASK_BOOL, 111)
    assert FAM.layout_free(guess) == FAM.layout_free(got[1]) != FAM.layout_free((2, 2, 9, 13, 16, 0))
    assert FAM.problem_shape(A.SDPA, events[0].input_shapes, [None, None, None, None, 0.0, True, None, False]) is None


def test_route_takes_masks_and_scales_and_says_why_not():
    q, k = torch.randn(2, 4, 8, 16), torch.randn(2, 2, 8, 16)

    def route(*a, **kw):
        return FAM.route(SDPA, a, kw, "float32")

    r = route(q, q, q, attn_mask=torch.ones(2, 1, 8, 8, dtype=torch.bool), scale=1.0)
    assert r.shape == (2, 4, 8, 8, 16, 0, 0, 0, 0, 0, 1, 1011) and r.params == {"scale": 1.0} and not r.notes
    r = route(q, k, k, torch.zeros(4, 8, 8), enable_gqa=True)
    assert r.shape == (2, 4, 8, 8, 16, 0, 0, 0, 0, 2, 2, 111) and r.params == {}
    assert route(q, q, q, scale=16**-0.5).params == {}  # SDPA's default, written out
    expanded = torch.ones(2, 1, 1, 8, dtype=torch.bool).expand(2, 1, 8, 8)
    r = route(q, q, q, attn_mask=expanded)
    assert r.shape[10:] == (1, 1001) and not r.notes  # read at [B, 1, 1, Skv], not materialized
    r = route(q, q, q, attn_mask=torch.zeros(8, 8).t())  # a layout the kernel cannot read: copied
    assert r.shape[10:] == (2, 11) and r.notes == ("mask copied to contiguous",)
    h = q.half()
    assert FAM.route(SDPA, (h, h, h), {"attn_mask": torch.zeros(8, 8)}, "float16").shape[10] == P.MASK_FP32
    assert FAM.route(SDPA, (h, h, h), {"attn_mask": torch.zeros(8, 8).half()}, "float16").shape[10] == P.MASK_FLOAT
    assert (
        route(q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.bool), is_causal=True)
        == "explicit attention mask with is_causal"
    )
    assert route(q, q, q, attn_mask=torch.zeros(8, 8, dtype=torch.int64)) == "attention mask of dtype int64"
    assert "not broadcastable" in route(q, q, q, attn_mask=torch.zeros(8, 7))
    assert route(q, q, q, scale=0.0) == "softmax scale not positive and finite"
    assert route(q, q, q, dropout_p=0.1) == "dropout"


def test_a_routed_masked_call_runs_the_kernel_on_the_mask_it_was_given():
    q = torch.randn(2, 2, 19, 16)
    keys = torch.arange(19) < torch.tensor([19, 11])[:, None]  # per-sequence lengths
    mask = keys[:, None, None, :].expand(2, 1, 19, 19)
    route = FAM.route(SDPA, (q, q, q), {"attn_mask": mask, "scale": 1.0}, "float32")
    kernel = cpu_kernel(route.shape, "float32", {"block_M": 16, "block_N": 16}, **route.params)
    torch.testing.assert_close(route.launch(kernel), SDPA(q, q, q, attn_mask=mask, scale=1.0), atol=2e-5, rtol=2e-5)


# ---------------------------------------------------------------- CUDA schedules (lowered only)


BERT_MASKED = (8, 12, 128, 128, 64, 0, 0, 0, 0, 0, 1, 1011)
VIT_BIASED = (16, 12, 197, 197, 64, 0, 0, 0, 0, 0, 2, 1111)


def test_masked_gpu_space_keeps_the_measured_first_configs():
    for shape in (BERT_MASKED, VIT_BIASED):
        space = FAM.search_space(shape, "float16", H200)
        assert space == FAM.search_space(shape[:6], "float16", H200)  # every schedule takes a mask
        assert all(FAM.reject_reason(shape, "float16", c, H200) is None for c in space)
    assert FAM.search_space(BERT_MASKED, "float16", H200)[0] == {
        "block_M": 128,
        "block_N": 64,
        "num_stages": 1,
        "threads": 256,
    }
    assert FAM.search_space(VIT_BIASED, "float16", H200)[0] == {
        "block_M": 64,
        "block_N": 208,
        "num_stages": 2,
        "threads": 128,
        "overlap": True,
    }


WS = {"block_M": 128, "block_N": 64, "num_stages": 1, "threads": 256}
OVERLAP = {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256, "overlap": True}
ONE_BLOCK = {"block_M": 64, "block_N": 208, "num_stages": 2, "threads": 128, "overlap": True}
PING = {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256, "pingpong": True}


def _lower(shape, cfg, dtype="float16"):
    return C.lower_source(FAM.program(shape, dtype, cfg, SM90), SM90)


def _reads_mask(src):
    """Whether CUDA source reads the mask M: element by element, or vectorized where its
    rows are aligned (two fp16 scores as one 32-bit load)."""
    return "M[" in src or "(M + " in src


def _consumer(src, me):
    """The lowered source of ping-pong consumer warpgroup `me`'s branch."""
    start = src.index("if (((int)threadIdx.x) < 128) {")
    second = src.index("warpgroup_reg_alloc", src.index("warpgroup_reg_alloc") + 1)
    return src[start:second] if me == 0 else src[second:]


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape,cfg",
    [
        (BERT_MASKED, WS),
        (VIT_BIASED, ONE_BLOCK),
        ((4, 12, 512, 500, 64, 0, 0, 0, 0, 0, 3, 111), OVERLAP),
        ((2, 12, 300, 300, 64, 0, 12, 12, 12, 4, 1, 1001), PING),
    ],
    ids=["bert-ws", "vit-one-block", "fp32-bias-overlap", "gqa-views-pingpong"],
)
def test_masked_schedules_lower_for_sm90_reading_the_mask(shape, cfg):
    src = _lower(shape, cfg)
    assert "wgmma" in src and "exp2" in src
    kernel = src[src.index("__global__") :]
    mtype = {P.MASK_BOOL: "uchar", P.MASK_FLOAT: "half_t", P.MASK_FP32: "float"}[shape[10]]
    assert f"const {mtype}* __restrict__ M" in kernel and _reads_mask(kernel)
    if cfg is WS:
        assert "__launch_bounds__(384" in src  # still warp-specialized: a TMA producer warpgroup
    if cfg is PING:
        assert "__launch_bounds__(384, 1)" in src and _reads_mask(_consumer(src, 0)) and _reads_mask(_consumer(src, 1))
    # A row the mask hides entirely divides nothing by its zero sum.
    assert "CUDART_INF_F" in src


@pytest.mark.slow
def test_masked_overlap_keeps_its_softmax_under_pv():
    from tests.kernels.test_attention import _issue_order

    order, _ = P._overlap_schedule(masked=True)
    names = [n for n, _ in P._OVERLAP_BODY]
    assert len(order) == len(names) + 1 and sorted(order) == list(range(len(order)))
    assert P._overlap_schedule() == P._overlap_schedule(masked=False)
    src = _lower((4, 12, 512, 512, 64, 0, 0, 0, 0, 0, 2, 1111), OVERLAP)
    assert "QK PV W1 EXP W0" in _issue_order(src)
    # The mask is read after S lands and before its exp2.
    steady = src[src.index("wait_wgmma<1>") :]
    assert _reads_mask(steady[: steady.index("exp2f(")])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize(
    "shape,cfg",
    [
        (BERT_MASKED, WS),
        (VIT_BIASED, ONE_BLOCK),
        ((4, 12, 512, 512, 64, 0, 0, 0, 0, 0, 2, 1111), OVERLAP),
        ((4, 12, 512, 512, 64, 0, 0, 0, 0, 0, 1, 1011), PING),
    ],
    ids=["bert-ws", "vit-one-block", "bias-overlap", "padding-pingpong"],
)
def test_masked_schedules_build_without_spills_or_serialized_wgmma(shape, cfg, tmp_path):
    from tests.kernels.test_attention import _ptxas_log

    log = _ptxas_log(tmp_path, shape, {**A.GPU_DEFAULTS, **cfg})
    assert "C7514" not in log and "C7512" not in log and "serialized" not in log, log[-2000:]
    assert " 0 bytes spill stores" in log, log[-2000:]


@pytest.mark.slow
def test_every_masked_h200_config_lowers_for_sm90():
    for shape in (BERT_MASKED, VIT_BIASED):
        for cfg in FAM.search_space(shape, "float16", H200):
            assert _reads_mask(_lower(shape, cfg)), cfg


# ---------------------------------------------------------------- models


def _tiny_ids(seq=16, padded=True):
    ids = torch.randint(0, 100, (2, seq), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, seq, dtype=torch.long)
    if padded:
        mask[1, seq - 6 :] = 0  # the second sequence is 6 tokens shorter
    return ids, mask


def _bert():
    from transformers import BertConfig, BertModel

    return BertModel(
        BertConfig(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=2,
            intermediate_size=128,
            attn_implementation="sdpa",
        )
    ), _tiny_ids()


def _mistral():
    from transformers import MistralConfig, MistralModel

    config = MistralConfig(
        num_hidden_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=100,
        sliding_window=4,
        attn_implementation="sdpa",
    )
    return MistralModel(config), _tiny_ids()


def _mistral_unpadded():
    model, (ids, _) = _mistral()
    return model, (ids,)


def _opt():
    from transformers import OPTConfig, OPTModel

    config = OPTConfig(
        num_hidden_layers=2,
        hidden_size=64,
        num_attention_heads=2,
        ffn_dim=128,
        word_embed_proj_dim=64,
        vocab_size=100,
        attn_implementation="sdpa",
    )
    return OPTModel(config), _tiny_ids()


def _opt_unpadded():
    model, (ids, _) = _opt()
    return model, (ids,)


def _whisper_encoder():
    from transformers import WhisperConfig, WhisperModel

    config = WhisperConfig(
        d_model=64,
        encoder_layers=2,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        num_mel_bins=8,
        max_source_positions=16,
        vocab_size=100,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        attn_implementation="sdpa",
    )
    features = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(0))
    return WhisperModel(config).get_encoder(), (features,)


def _t5():
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        num_layers=2, d_model=64, d_kv=32, num_heads=2, d_ff=128, vocab_size=100, attn_implementation="sdpa"
    )
    return T5EncoderModel(config), _tiny_ids()


# name: (model factory, the attention shapes the model's calls take, the scale they pass)
MODELS = {
    # transformers expands the padding to a bool [B, 1, Sq, Skv] mask; BERT's q, k, v are views.
    "bert-padding": (_bert, {"2x2x16x16x32x0x2x2x2x0x1x1011"}, None),
    # The sliding window arrives as a bool mask: one [Sq, Skv] window expanded over the
    # batch (stride 0, read once), or with padding one per sequence. With a mask,
    # transformers repeats the 2 key/value heads itself (no enable_gqa).
    "mistral-window": (_mistral_unpadded, {"2x4x16x16x16x0x4x0x0x0x1x11"}, None),
    "mistral-window-padding": (_mistral, {"2x4x16x16x16x0x4x0x0x0x1x1011"}, None),
    # OPT scales q itself and passes scale=1.0; with padding a bool mask, without it is_causal.
    "opt-padding": (_opt, {"2x2x16x16x32x0x2x0x0x0x1x1011"}, 1.0),
    "opt-causal": (_opt_unpadded, {"2x2x16x16x32x1x2x0x0"}, 1.0),
    "whisper-encoder": (_whisper_encoder, {"2x2x16x16x32x0"}, 1.0),
    # T5: the relative-position bias plus the padding as one float mask, and no scaling at all.
    "t5-bias": (_t5, {"2x2x16x16x32x0x2x2x2x0x2x1111"}, 1.0),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_models_run_their_masked_and_scaled_attention_in_tilelang(name, monkeypatch):
    make, shapes, scale = MODELS[name]
    torch.manual_seed(0)
    model, inputs = make()
    seen = []
    real = A.AttentionFamily.route

    def spy(self, func, args, kwargs, dtype):
        r = real(self, func, args, kwargs, dtype)
        seen.append(r if isinstance(r, str) else r.params)
        return r

    monkeypatch.setattr(A.AttentionFamily, "route", spy)
    router, got, expected = route_model(["attention"], model, inputs)
    torch.testing.assert_close(got[0], expected[0], atol=2e-5, rtol=2e-5)
    ran, fell = count(router, "attention")
    rows = [c for c in router.counts() if c.family == "attention"]
    assert fell == 0 and ran == 2, rows  # both layers' attention, none fell back
    assert {c.shape for c in rows} == shapes, rows
    assert all(p == ({"scale": scale} if scale else {}) for p in seen), seen


def test_kernel_sweep_times_masked_attention_beside_unmasked():
    # `python3 benchmarks/kernel_sweep.py --only masked` on the GPU: BERT's padding and
    # ViT-B's bias against SDPA with the same mask, the unmasked shapes beside them.
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "kernel_sweep.py"
    spec = importlib.util.spec_from_file_location("kernel_sweep", path)
    ks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ks)
    todo = ks.cases({"masked"}, H200)
    shapes = [s for _, s, _, _ in todo]
    assert {BERT_MASKED, VIT_BIASED, (8, 12, 128, 128, 64, 0), (16, 12, 197, 197, 64, 0)} <= set(shapes)
    for fam, shape, configs, own in todo:
        assert fam == "attention" and own and configs[: len(own)] == own  # the family's space first
        assert all(FAM.reject_reason(shape, "float16", c, H200) is None for c in own)
    inputs = FAM.make_inputs(BERT_MASKED, "float16", "cpu", 0)
    assert inputs[3].shape == (8, 1, 128, 128) and inputs[3].dtype == torch.bool  # what SDPA is timed with
    assert FAM.make_inputs(VIT_BIASED, "float16", "cpu", 0)[3].dtype == torch.float16


def test_a_float32_mask_beside_16_bit_inputs_is_referenced_in_float32():
    """On CUDA, SDPA's memory-efficient backend rejects a float32 mask beside fp16 q and
    cuDNN reads it as fp16 (pytorch/pytorch#191612), so the family's reference takes that
    case in float32, the precision the mask was given in, and rounds once at the end."""
    shape = masked(TAILS, *MASKS["fp32-bias"])
    q, k, v, mask = FAM.make_inputs(shape, "float16", "cpu", 0)
    assert mask.dtype == torch.float32 and q.dtype == torch.float16
    want = SDPA(q.float(), k.float(), v.float(), attn_mask=mask).to(torch.float16)
    assert torch.equal(FAM.reference(q, k, v, mask), want)
    # A 16-bit mask stays on PyTorch's own 16-bit path.
    shape16 = masked(TAILS, *MASKS["bias"])
    q, k, v, mask = FAM.make_inputs(shape16, "float16", "cpu", 0)
    assert torch.equal(FAM.reference(q, k, v, mask), SDPA(q, k, v, attn_mask=mask))
