"""Conv2d family, both layouts (channels_last and NCHW): the CPU schedule (TileLang's C
backend) against F.conv2d, shape and config validation, the search spaces, problem
shapes and layouts from a real profiler trace, the CUDA schedules lowered for sm_90a,
and the nn.Conv2d swap-in.

In: shapes, seeds and configs. Out: pass/fail. Kernels are compiled once per process
(the family's cache), so the seeds and the swap-in reuse the same builds.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from evaluator import kernels
from evaluator.errors import KernelError
from evaluator.kernels import common as C
from evaluator.kernels.conv2d import layout as conv_layout
from evaluator.kernels import conv2d as conv_module
from evaluator.results import Hardware
from evaluator.tuning import verify
from tests.hardware import A100, CPU, H200

FAM = conv_module.FAMILY
SM90 = "cuda -arch=sm_90a"

# (N, H, W, C, K, R, S, stride, pad): 9 ints are channels_last (nchw = 0)
S3 = (2, 14, 14, 32, 32, 3, 3, 1, 1)  # 3x3 stride 1
S1 = (2, 14, 14, 64, 32, 1, 1, 1, 0)  # 1x1 stride 1
S3S2 = (2, 14, 14, 32, 48, 3, 3, 2, 1)  # 3x3 stride 2 (the swap-in model's second conv)
S1S2 = (2, 13, 13, 24, 40, 1, 1, 2, 0)  # 1x1 stride 2 (a ResNet downsample), odd H/W
RESNET_3X3 = (32, 56, 56, 64, 64, 3, 3, 1, 1)
RESNET_1X1 = (32, 56, 56, 256, 64, 1, 1, 1, 0)


def nchw(shape):
    return tuple(shape[:9]) + (1,)


def check(shape, dtype, seeds=(0, 1, 2)):
    kernel = FAM.build(shape, dtype, FAM.search_space(shape, dtype, CPU)[0], "c")
    atol, rtol = FAM.tolerance(dtype, shape)
    for seed in seeds:
        x, w = FAM.make_inputs(shape, dtype, "cpu", seed)
        out = kernel(x, w)
        # An independent reference: the plain fp32 NCHW convolution, not the family's own code path.
        stride, pad = shape[7], shape[8]
        if len(shape) > 9 and shape[9]:
            assert x.is_contiguous() and out.is_contiguous()
            ref = F.conv2d(x.float(), w.float(), stride=stride, padding=pad)
        else:
            ref = F.conv2d(
                x.permute(0, 3, 1, 2).float(), w.permute(0, 3, 1, 2).float(), stride=stride, padding=pad
            ).permute(0, 2, 3, 1)
        assert out.shape == ref.shape and out.dtype == x.dtype
        assert torch.isfinite(out).all()
        assert out.abs().max() > 0.1, "output is (nearly) all zeros"
        torch.testing.assert_close(out.float(), ref, atol=atol, rtol=rtol)
        torch.testing.assert_close(out, FAM.reference(x, w), atol=atol, rtol=rtol)
    return kernel


# ---------------------------------------------------------------- CPU correctness


@pytest.mark.parametrize("shape", [S3, S3S2, S1S2], ids=["3x3s1", "3x3s2", "1x1s2"])
def test_cpu_fp32(shape):
    check(shape, "float32")


def test_cpu_fp32_awkward_non_square_filter():
    # R != S, odd H and W, C and K not multiples of anything, channel tail in every chunk.
    check((1, 11, 10, 19, 21, 3, 1, 1, 0), "float32")


@pytest.mark.parametrize("shape", [S1, FAM.awkward_shape(S3)], ids=["1x1s1", "awkward"])
def test_cpu_fp16(shape):
    check(shape, "float16")


@pytest.mark.parametrize(
    "shape, dtype",
    [
        (nchw(S3), "float32"),
        (nchw(S1S2), "float32"),
        (nchw(S1), "float16"),
        ((2, 15, 15, 3, 16, 7, 7, 2, 3, 1), "float16"),  # a 3-channel 7x7 stride-2 stem
        (FAM.awkward_shape(nchw(S3S2)), "float16"),
    ],
    ids=["3x3s1", "1x1s2", "1x1s1", "stem", "awkward-3x3s2"],
)
def test_cpu_nchw(shape, dtype):
    check(shape, dtype)


def test_awkward_shape_has_tails():
    N, H, W, Cin, K, R, S, stride, pad, layout = FAM.awkward_shape(RESNET_3X3)
    assert H % 2 and W % 2 and Cin % 16 and K % 16
    assert (N, R, S, stride, pad, layout) == (32, 3, 3, 1, 1, 0)
    assert FAM.awkward_shape(nchw(RESNET_3X3))[9] == 1


def test_cpu_bf16_is_refused_clearly():
    with pytest.raises(KernelError, match="bfloat16"):
        FAM.build(S3, "bfloat16", {}, "c")
    assert "bfloat16" in FAM.reject_reason(S3, "bfloat16", {}, CPU)


def test_wrong_result_is_detectable():
    # The comparison must be able to fail: a perturbed output does not pass.
    kernel = check(S3, "float32", seeds=(0,))
    x, w = FAM.make_inputs(S3, "float32", "cpu", 0)
    out = kernel(x, w)
    out[1, 6, 7, 5] += 0.01
    atol, rtol = FAM.tolerance("float32", S3)
    assert not torch.allclose(out, FAM.reference(x, w), atol=atol, rtol=rtol)


def test_build_is_cached_per_key():
    cfg = FAM.search_space(S3, "float32", CPU)[0]
    assert FAM.build(S3, "float32", cfg, "c") is FAM.build(S3, "float32", dict(cfg), "c")


# ---------------------------------------------------------------- shapes, inputs, reference


@pytest.mark.parametrize(
    "bad",
    [
        (2, 14, 14, 32, 32, 3, 3, 1),  # 8 values
        (2, 14, 14, 0, 32, 3, 3, 1, 1),  # no channels
        (2, 14, 14, 32, 32, 3, 3, 0, 1),  # stride 0
        (2, 14, 14, 32, 32, 3, 3, 1, -1),  # negative padding
        (2, 2, 14, 32, 32, 5, 5, 1, 1),  # padded input smaller than the filter
        (2, "a", 14, 32, 32, 3, 3, 1, 1),
        (2, 14, 14, 32, 32, 3, 3, 1, 1, 2),  # layout flag neither 0 nor 1
        (2, 14, 14, 32, 32, 3, 3, 1, 1, 1, 0),  # 11 values
    ],
)
def test_bad_shapes_raise(bad):
    with pytest.raises(KernelError, match="conv2d"):
        FAM.make_inputs(bad, "float32", "cpu", 0)
    with pytest.raises(KernelError, match="conv2d"):
        FAM.build(bad, "float32", {}, "c")


def test_bad_config_and_target_raise():
    with pytest.raises(KernelError, match="unknown config"):
        FAM.build(S3, "float32", {"block_Q": 3}, "c")
    with pytest.raises(KernelError, match="threads"):
        FAM.build(RESNET_3X3, "float16", {"threads": 96}, SM90)
    with pytest.raises(KernelError, match="float16 or bfloat16"):
        FAM.build(RESNET_3X3, "float32", {}, SM90)


def test_make_inputs_and_reference():
    x, w = FAM.make_inputs(S3S2, "float32", "cpu", 3)
    x2, w2 = FAM.make_inputs(S3S2, "float32", "cpu", 3)
    x3, _ = FAM.make_inputs(S3S2, "float32", "cpu", 4)
    assert torch.equal(x, x2) and torch.equal(w, w2) and not torch.equal(x, x3)
    assert tuple(x.shape) == (2, 14, 14, 32) and tuple(w.shape) == (48, 3, 3, 32)
    ref = FAM.reference(x, w)
    assert tuple(ref.shape) == (2, 7, 7, 48)
    # channels_last in, channels_last out: the NHWC view is already contiguous, so a timed
    # reference holds no hidden copy.
    assert ref.is_contiguous()
    # Stride and padding are not recoverable from plain tensors: a clear error, not a guess.
    with pytest.raises(KernelError, match="make_inputs"):
        FAM.reference(x.clone(), w)
    with pytest.raises(KernelError, match="do not match"):
        FAM.reference(x, w[:, :, :, :16].contiguous())
    # NCHW: nn.Conv2d's own layouts, and F.conv2d on them as they are.
    assert FAM.check(S3S2) == S3S2 + (0,)
    x, w = FAM.make_inputs(nchw(S3S2), "float32", "cpu", 3)
    assert tuple(x.shape) == (2, 32, 14, 14) and tuple(w.shape) == (48, 32, 3, 3)
    assert torch.equal(FAM.reference(x, w), F.conv2d(x, w, stride=2, padding=1))
    assert FAM.input_shapes(nchw(S3S2)) == [(2, 32, 14, 14), (48, 32, 3, 3)]
    with pytest.raises(KernelError, match=r"x \[N, C, H, W\]"):
        FAM.reference(x, w[:, :16].contiguous())


def test_metrics():
    assert FAM.flops(nchw(S3S2)) == FAM.flops(S3S2) and FAM.bytes(nchw(S3S2), "float16") == FAM.bytes(S3S2, "float16")
    N, H, W, Cin, K, R, S, _, _ = S3S2
    P = Q = 7
    assert conv_module.out_size(S3S2) == (P, Q)
    assert FAM.flops(S3S2) == 2 * N * P * Q * K * Cin * R * S
    assert FAM.bytes(S3S2, "float16") == 2 * (N * H * W * Cin + K * R * S * Cin + N * P * Q * K)
    small, large = FAM.tolerance("float16", S1), FAM.tolerance("float16", (1, 7, 7, 2048, 8, 3, 3, 1, 1))
    assert small[0] < large[0] < FAM.tolerance("bfloat16", (1, 7, 7, 2048, 8, 3, 3, 1, 1))[0]


def test_standard_shapes():
    cpu = FAM.standard_shapes("cpu")
    assert 3 <= len(cpu) <= 5 and max(FAM.flops(s) for s in cpu) < 5e7
    cuda = FAM.standard_shapes("cuda")
    assert 3 <= len(cuda) <= 5 and nchw(RESNET_3X3) in cuda and conv_module.RESNET50_STEM in cuda
    layers = conv_module.RESNET50_LAYERS + [conv_module.RESNET50_STEM]
    assert all(nchw(s) in layers for s in cuda[:-1])
    # Both layouts: torchvision's NCHW model and a channels_last one.
    assert {s[9] for s in cuda} == {0, 1} and {s[9] for s in cpu} == {0, 1}
    assert any(s[5] == 1 for s in cuda) and any(s[5] == 7 and s[7] == 2 for s in cuda)
    for shapes in (cpu, cuda):
        assert all(FAM.check(s) == s for s in shapes)
        assert any(s[3] % 16 and s[4] % 16 and s[1] % 2 for s in shapes)


# ---------------------------------------------------------------- problem shapes


def test_problem_shape_from_concrete_inputs():
    x, w = [32, 64, 56, 56], [64, 64, 3, 3]
    want = (32, 56, 56, 64, 64, 3, 3, 1, 1, 1)  # no strides recorded: NCHW, PyTorch's default
    # Argument lists as torch.profiler reports them (mkldnn and cudnn put padding first).
    assert (
        FAM.problem_shape(
            "aten::conv2d", [x, w, [], [], [], [], []], concrete_inputs=[None, None, None, [1, 1], [1, 1], [1, 1], 1]
        )
        == want
    )
    assert (
        FAM.problem_shape(
            "aten::convolution",
            [x, w, [], [], [], [], [], [], []],
            [None, None, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1],
        )
        == want
    )
    assert FAM.problem_shape(
        "aten::mkldnn_convolution", [x, w, [], [], [], [], []], [None, None, None, [1, 1], [2, 2], [1, 1], 1]
    ) == (32, 56, 56, 64, 64, 3, 3, 2, 1, 1)
    assert FAM.problem_shape(
        "aten::cudnn_convolution",
        [x, w, [], [], [], [], [], [], []],
        [None, None, [0, 0], [2, 2], [1, 1], 1, False, False, True],
    ) == (32, 56, 56, 64, 64, 3, 3, 2, 0, 1)
    assert (
        FAM.problem_shape("aten::conv2d", [x, w, [], [], [], [], []], [None, None, None, [1, 1], "same", [1, 1], 1])
        == want
    )
    # The layout from x's strides: channels_last, plainly contiguous, and the ambiguous
    # C == 1 case (both at once), which runs as NCHW.
    args = [None, None, None, [1, 1], [1, 1], [1, 1], 1]
    last = [[64 * 56 * 56, 1, 56 * 64, 64], [576, 1, 192, 64]]
    assert FAM.problem_shape("aten::conv2d", [x, w], args, input_strides=last) == want[:9] + (0,)
    assert FAM.problem_shape("aten::conv2d", [x, w], args, input_strides=[[200704, 3136, 56, 1]]) == want
    assert conv_module.strides_are_channels_last([2, 1, 5, 5], [25, 25, 5, 1]) is False
    assert conv_module.strides_are_channels_last([2, 1, 5, 5], [25, 1, 5, 1]) is False
    assert conv_module.strides_are_channels_last([2, 3, 5, 5], [75, 1, 15, 3]) is True
    # Not computable by this kernel, or not knowable: None, never a guess.
    assert FAM.problem_shape("aten::conv2d", [x, w, [], [], [], [], []]) is None
    # Groups: an eleventh size, left out where it is 1 (the shape ungrouped calls always had).
    assert FAM.problem_shape(
        "aten::conv2d", [x, [64, 32, 3, 3], [], [], [], [], []], [None, None, None, [1, 1], [1, 1], [1, 1], 2]
    ) == want + (2,)
    assert FAM.problem_shape(
        "aten::conv2d", [x, [64, 1, 3, 3], [], [], [], [], []], [None, None, None, [1, 1], [1, 1], [1, 1], 64]
    ) == want + (64,)  # depthwise
    assert (
        FAM.problem_shape(
            "aten::conv2d", [x, [64, 16, 3, 3], [], [], [], [], []], [None, None, None, [1, 1], [1, 1], [1, 1], 2]
        )
        is None
    )  # weight fits no grouping
    assert (
        FAM.problem_shape("aten::conv2d", [x, w, [], [], [], [], []], [None, None, None, [1, 1], [1, 1], [2, 2], 1])
        is None
    )  # dilation
    assert (
        FAM.problem_shape("aten::conv2d", [x, w, [], [], [], [], []], [None, None, None, [1, 2], [1, 1], [1, 1], 1])
        is None
    )  # non-square stride
    assert (
        FAM.problem_shape(
            "aten::convolution",
            [x, w, [], [], [], [], [], [], []],
            [None, None, None, [1, 1], [1, 1], [1, 1], True, [0, 0], 1],
        )
        is None
    )  # transposed
    assert FAM.problem_shape("aten::addmm", [x, w], [None, None]) is None


def test_problem_shape_from_a_real_profiler_trace():
    from evaluator.profiling.profile import _problem_shape

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), torch.nn.Conv2d(8, 4, 1, bias=True)
    ).eval()
    for layout in (1, 0):
        x = torch.randn(2, 3, 17, 17)
        if not layout:
            model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            model(x)
        found = {}
        for evt in prof.events():
            if evt.name in FAM.aten_ops:
                # What profiling records: the family's shape from the event's shapes, scalars and strides.
                shape = _problem_shape(
                    "conv2d", evt.name, evt.input_shapes, evt.concrete_inputs, evt.structured_input_strides
                )
                found.setdefault(evt.name, set()).add(shape)
        assert found["aten::conv2d"] == {f"2x17x17x3x8x3x3x2x1x{layout}", f"2x9x9x8x4x1x1x1x0x{layout}"}
        # Every level of the call chain agrees (the profiler attributes the call to the outermost);
        # which inner op a call reaches depends on the thread count (on one, the 1x1 conv skips
        # mkldnn_convolution), so each level's shapes are some of the outermost's.
        assert all(shapes <= found["aten::conv2d"] for shapes in found.values())


# ---------------------------------------------------------------- search spaces


def test_search_space_cpu():
    cpu = FAM.search_space(S3, "float32", CPU)
    assert 1 <= len(cpu) <= 4
    assert all(FAM.reject_reason(S3, "float32", c, CPU) is None for c in cpu)


def test_search_space_gpu_fits_device():
    layers = conv_module.RESNET50_LAYERS + [conv_module.RESNET50_STEM]
    for shape in layers + [conv_module.channels_last(s) for s in layers] + FAM.standard_shapes("cuda"):
        for dtype in ("float16", "bfloat16"):
            space = FAM.search_space(shape, dtype, H200)
            # Ten, plus the two stream configs of a 1x1 over large images (NCHW); a
            # channels_last 1x1's eight tiles, three with a_copy and three ping-pong ones.
            assert 4 <= len(space) <= 14, (shape, len(space))
            assert all(FAM.reject_reason(shape, dtype, c, H200) is None for c in space)
    # A 3-channel stem packs the taps densely instead of wasting most of each chunk.
    assert all(c["flat_k"] for c in FAM.search_space((32, 224, 224, 3, 64, 7, 7, 2, 3), "float16", H200))
    assert FAM.search_space(RESNET_3X3, "float32", H200) == []
    small = Hardware(**{**H200.__dict__, "smem_per_block": 48 * 1024})
    fitted = FAM.search_space(RESNET_3X3, "float16", small)
    assert fitted and len(fitted) < len(FAM.search_space(RESNET_3X3, "float16", H200))
    assert all(conv_module._tc_smem(c, "float16") <= 48 * 1024 for c in fitted)


def test_reject_reason():
    good = next(c for c in FAM.search_space(RESNET_3X3, "float16", H200) if not c.get("a_copy"))  # a gather
    assert FAM.reject_reason(RESNET_3X3, "float16", good, H200) is None
    big = {**good, "block_M": 256, "block_N": 256, "num_stages": 4}
    assert "shared memory" in FAM.reject_reason(RESNET_3X3, "float16", big, H200)
    assert "threads" in FAM.reject_reason(RESNET_3X3, "float16", {**good, "threads": 100}, H200)
    assert "multiples of 16" in FAM.reject_reason(RESNET_3X3, "float16", {**good, "block_K": 40}, H200)
    assert "unknown config" in FAM.reject_reason(RESNET_3X3, "float16", {"tile": 1}, H200)
    assert "float16 or bfloat16" in FAM.reject_reason(RESNET_3X3, "float32", good, H200)
    # flat_k is the channels_last gather's: on an NCHW shape only with via_nhwc.
    assert "via_nhwc" in FAM.reject_reason(nchw(RESNET_3X3), "float16", {"flat_k": True}, H200)
    assert FAM.reject_reason(nchw(RESNET_3X3), "float16", {"flat_k": True, "via_nhwc": True}, H200) is None
    assert "unknown config" in FAM.reject_reason(RESNET_3X3, "float16", {"via_nhwc": True}, H200)
    assert "stack" in FAM.reject_reason(S3, "float32", {"block_M": 256, "block_N": 256, "block_K": 64}, CPU)
    assert FAM.reject_reason((2, 14), "float16", good, H200).startswith("conv2d: shape")


# ---------------------------------------------------------------- CUDA schedule (lowered, not run)


def _lower(shape, dtype, cfg):
    src = C.lower_source(FAM.program(shape, dtype, cfg, SM90), SM90)
    assert "__global__" in src and "wgmma" in src  # Hopper tensor cores, not a scalar loop
    return src


@pytest.mark.slow
@pytest.mark.parametrize("shape", [RESNET_3X3, RESNET_1X1], ids=["resnet3x3", "resnet1x1"])
def test_every_cuda_config_lowers_for_sm90(shape):
    space = FAM.search_space(shape, "float16", H200)
    for cfg in space:
        src = _lower(shape, "float16", cfg)
        # The gathered A tile streams through 16-byte async copies, the weights through TMA;
        # a `gemm` config (a 1x1) loads both operands by TMA, as the gemm family's ping-pong,
        # and so does an `a_copy` one (a 1x1's pixel tile read as rows of X, a 3x3's in
        # TMA's im2col mode).
        assert ("cp_async_gs" in src or cfg.get("gemm") or cfg.get("a_copy")) and "tma_load" in src, cfg
        if cfg.get("a_copy"):
            assert "cp_async" not in src and src.count("tma_load") == 2, cfg


def test_nchw_space_puts_the_measured_best_first():
    stem, one, one_s2, three = (
        conv_module.RESNET50_STEM,
        conv_module.RESNET50_LAYERS[5],
        conv_module.RESNET50_LAYERS[7],
        conv_module.RESNET50_LAYERS[0],
    )
    first = {s: FAM.search_space(s, "float16", H200)[0] for s in (stem, one, one_s2, three)}
    assert first[stem]["block_K"] == 64 and not first[stem].get("via_nhwc")  # the NCHW gather: 2.75x
    assert first[one]["block_N"] == 256  # memory-bound 1x1 over 56x56 pixels
    assert first[one_s2]["block_M"] == 128
    # A 3x3 goes through the channels_last kernel, transposes included in its time.
    assert first[three].get("via_nhwc") and not first[three]["flat_k"]
    assert not [c for c in FAM.search_space(stem, "float16", H200) if c.get("via_nhwc")]  # 3 channels


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [
        conv_module.RESNET50_STEM,
        conv_module.RESNET50_LAYERS[5],
        conv_module.RESNET50_LAYERS[6],
        conv_module.RESNET50_LAYERS[0],
        conv_module.RESNET50_LAYERS[7],
    ],
    ids=["stem", "1x1-56", "1x1-14", "3x3", "1x1s2"],
)
def test_every_nchw_cuda_config_lowers_for_sm90(shape):
    direct = shape[5] == shape[6] == shape[7] == 1 and shape[8] == 0
    for cfg in FAM.search_space(shape, "float16", H200):
        src = _lower(shape, "float16", cfg)
        # The weights are a plain (K, C*R*S) matrix: TMA where its rows are 16-byte
        # aligned (not the stem's 147 halves). A 1x1 stride-1 layer copies whole pixel
        # rows (vector loads, no per-element tap decoding); other filters gather.
        assert ("tma_load" in src) is (shape[3] * shape[5] * shape[6] % 8 == 0), cfg
        gathers = "% 7)" in src or "/ 7)" in src or "% 56)" in src or "% 28)" in src
        assert gathers is not direct, cfg


@pytest.mark.slow
@pytest.mark.parametrize(
    "dtype, flat_k, cin", [("bfloat16", False, 40), ("float16", True, 3)], ids=["bf16-channel-tail", "fp16-flat-k-stem"]
)
def test_cuda_masked_paths_lower(dtype, flat_k, cin):
    # C = 40 is not a multiple of block_K: both operands masked per channel. C = 3: the
    # flattened R*S*C loop with per-element tap decoding.
    cfg = {"block_M": 64, "block_N": 64, "block_K": 32, "num_stages": 2, "threads": 128, "flat_k": flat_k}
    _lower((4, 9, 9, cin, 24, 3, 3, 2, 1), dtype, cfg)


# ---------------------------------------------------------------- 1x1 stream schedule


ONE_56, ONE_56_WIDE, ONE_28 = (
    (32, 56, 56, 64, 64, 1, 1, 1, 0, 1),
    (32, 56, 56, 64, 256, 1, 1, 1, 0, 1),
    (32, 28, 28, 100, 100, 1, 1, 1, 0, 1),
)


def test_stream_is_first_for_1x1_over_few_channels_and_rejected_elsewhere():
    for shape in (ONE_56, ONE_56_WIDE, (32, 56, 56, 128, 128, 1, 1, 1, 0, 1)):
        space = FAM.search_space(shape, "float16", H200)
        # Measured best on the H200 at 56x56 (0.95x / 0.90x cuDNN against 0.66x / 0.61x tiled).
        assert space[0].get("stream"), shape
        assert not space[-1].get("stream")  # the tiled configs stay in the space
        # One wave of blocks over the SMs: stream blocks per output-channel tile.
        for c in space:
            if c.get("stream"):
                assert c["stream"] * -(-shape[4] // c["block_M"]) <= H200.cores
    cfg = {"stream": 132, "block_M": 64, "block_N": 256, "num_stages": 3, "threads": 256}
    assert FAM.reject_reason(ONE_56, "float16", cfg, H200) is None
    assert FAM.reject_reason(ONE_28, "bfloat16", {**cfg, "block_M": 128, "num_stages": 2}, H200) is None
    # Everywhere else: not in the space, and a one-line reason for the config.
    for shape, why in [
        (nchw(RESNET_3X3), "1x1, stride-1"),
        ((32, 56, 56, 64, 64, 1, 1, 2, 0, 1), "1x1, stride-1"),
        (nchw(RESNET_1X1), "at most 128"),
        (conv_module.RESNET50_STEM, "1x1, stride-1"),
    ]:
        assert not [c for c in FAM.search_space(shape, "float16", H200) if c.get("stream")], shape
        reason = FAM.reject_reason(shape, "float16", cfg, H200)
        assert why in reason and "\n" not in reason, (shape, reason)
    assert "unknown config" in FAM.reject_reason(RESNET_1X1, "float16", cfg, H200)  # channels_last
    assert "pick one" in FAM.reject_reason(ONE_56, "float16", {**cfg, "via_nhwc": True}, H200)
    # Small images: first at 28x28 128->512 (1.05x against 0.66x tiled on the H200), offered
    # after the first tiled config with fewer output channels (tiled measured best there).
    small = FAM.search_space((32, 28, 28, 128, 512, 1, 1, 1, 0, 1), "float16", H200)
    assert small[0].get("stream") and (small[0]["block_M"], small[0]["block_N"]) == (128, 128)
    narrow = FAM.search_space((32, 28, 28, 64, 64, 1, 1, 1, 0, 1), "float16", H200)
    assert not narrow[0].get("stream") and narrow[1].get("stream")
    # Shared memory counts the whole C x block_N pixel tile per stage.
    assert "shared memory" in FAM.reject_reason(
        (32, 56, 56, 128, 128, 1, 1, 1, 0, 1), "float16", {**cfg, "block_M": 128, "num_stages": 4}, H200
    )


@pytest.mark.slow
@pytest.mark.parametrize("shape", [ONE_56, ONE_56_WIDE, ONE_28], ids=["64-64", "64-256", "28x28-100"])
def test_stream_lowers_for_sm90(shape):
    # Lowering only (under a second each): TMA loads into a pipelined ring that a
    # producer warpgroup fills (mbarrier waits), wgmma, a TMA store of each tile.
    cfgs = [c for c in FAM.search_space(shape, "float16", H200) if c.get("stream")] or [
        {"stream": 132, "block_M": 128, "block_N": 256, "num_stages": 2, "threads": 256}
    ]
    for cfg in cfgs:
        for dtype in ("float16", "bfloat16"):
            src = _lower(shape, dtype, cfg)
            assert "tma_load" in src and "tma_store" in src and ".wait(" in src, cfg
            assert "min(" in src  # tiles past the end clamp to the last one


# ---------------------------------------------------------------- via_nhwc layout changes


@pytest.mark.parametrize("dims", [(2, 60, 143), (3, 33, 17), (1, 64, 784), (2, 5, 70)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cpu_transpose_matches_permute(dims, dtype):
    # The CPU counterpart of the CUDA transposes: tails in both dims of the tile.
    kernel = conv_layout.transpose_launcher(*dims, dtype, "c")
    x = torch.randn(*dims).to(C.torch_dtype(dtype))
    assert torch.equal(kernel(x), x.permute(0, 2, 1))


@pytest.mark.parametrize(
    "shape", [(2, 9, 11, 12, 20, 3, 3, 1, 1, 1), (1, 13, 10, 7, 5, 3, 3, 2, 1, 1)], ids=["3x3s1", "3x3s2-odd"]
)
def test_via_channels_last_wrapper_on_cpu(shape):
    # The via_nhwc call path (transpose x, channels_last kernel, transpose y) on the C
    # backend: the CPU channels_last kernel between the CPU transposes.
    last = conv_module.channels_last(shape)
    inner = FAM.build(last, "float32", FAM.search_space(last, "float32", CPU)[0], "c")
    kernel = conv_layout.ViaChannelsLast(inner, shape, "c")
    x, w = FAM.make_inputs(shape, "float32", "cpu", 0)
    out = kernel(x, w)
    assert out.is_contiguous() and out.shape == FAM.reference(x, w).shape
    torch.testing.assert_close(out, FAM.reference(x, w), atol=1e-4, rtol=1e-4)
    assert "batched_transpose" in kernel.source


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape", [(32, 56, 56, 64, 64, 3, 3, 1, 1, 1), (32, 56, 56, 60, 60, 3, 3, 1, 1, 1)], ids=["64", "60"]
)
def test_transposes_lower_for_sm90(shape):
    N, H, W, Cin, K = shape[:5]
    for dtype in ("float16", "bfloat16"):
        for dims in ((N, Cin, H * W), (N, H * W, K)):  # x to NHWC, y back to NCHW
            src = C.lower_source(conv_layout.transpose_program(*dims, dtype), SM90)
            assert "__global__" in src and "__syncthreads" in src
            # Row-contiguous vectors on both sides: 16-byte loads or a TMA store where
            # the rows allow it (60 channels: 120-byte rows, narrower vectors).
            assert "uint4" in src or "uint2" in src or "tma_store" in src, dims


# ---------------------------------------------------------------- swap-in


@pytest.mark.parametrize("channels_last", [False, True])
def test_conv2d_routes_nchw_and_channels_last_and_depthwise(channels_last):
    from tests.routing import count, route_model

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.b = torch.nn.Conv2d(8, 8, 1, bias=False)
            self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)

        def forward(self, x):
            return self.dw(torch.relu(self.b(self.a(x))))

    torch.manual_seed(0)
    x = torch.randn(2, 3, 13, 11)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    router, got, expected = route_model(["conv2d"], M(), (x,))
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert count(router, "conv2d") == (3, 0)  # the depthwise 3x3 too (tests/kernels/test_conv2d_grouped.py)
    # Each layout runs its own kernel: no transposes either way.
    assert {n for c in router.counts() for n in c.notes} == set()
    assert {c.shape.split("x")[9] for c in router.counts() if c.tilelang} == {"0" if channels_last else "1"}
    # The output keeps the layout PyTorch returns: the rest of the model runs as written.
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    assert got.is_contiguous(memory_format=fmt) and expected.is_contiguous(memory_format=fmt)
    assert {c.shape for c in router.counts() if c.tilelang} >= {f"2x7x6x8x8x3x3x1x1x{1 - int(channels_last)}x8"}


# ---------------------------------------------------------------- 1x1 channels_last as one GEMM

GEMM_1X1 = {"gemm": 1, "block_M": 32, "block_N": 32, "block_K": 16}


@pytest.mark.parametrize(
    "shape,dtype",
    [(S1, "float32"), ((2, 7, 9, 24, 40, 1, 1, 1, 0, 0), "float32"), ((3, 5, 11, 72, 24, 1, 1, 1, 0, 0), "float16")],
    ids=["14x14", "odd", "fp16"],
)
def test_gemm_view_matches_conv2d_on_cpu(shape, dtype):
    # `gemm`: x's NHWC memory as the gemm family's [N*H*W, C] operand and the KRSC weight
    # as its [K, C] one, with a zero bias; y back as [N, H, W, K]. Checked by verify on
    # three seeds and a shape no tile divides, and against F.conv2d here.
    from evaluator.tuning import verify

    res = verify.verify(FAM, shape, dtype, GEMM_1X1, "c", "cpu", seeds=(0, 1, 2))
    assert res.passed, [c for c in res.cases if not c.passed]
    kernel = FAM.build(shape, dtype, GEMM_1X1, "c")
    assert isinstance(kernel, conv_module.ViaGemm) and kernel.config["gemm"] == 1 and "linear" in kernel.source
    x, w = FAM.make_inputs(shape, dtype, "cpu", 5)
    ref = F.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(0, 3, 1, 2).float()).permute(0, 2, 3, 1)
    torch.testing.assert_close(kernel(x, w).float(), ref, atol=2e-3, rtol=2e-3)


def test_gemm_view_is_refused_where_the_convolution_is_not_one_gemm():
    for shape in (S3, S1S2, nchw(S1), (2, 14, 14, 64, 32, 1, 1, 1, 1)):
        assert "1x1, stride-1, unpadded channels_last" in FAM.reject_reason(shape, "float32", GEMM_1X1, CPU), shape
    assert "'gemm' must be >= 0" in FAM.reject_reason(S1, "float32", {**GEMM_1X1, "gemm": -1}, CPU)
    # On Hopper the GEMM view's own rules hold: ping-pong takes one warpgroup a tile.
    cfg = {**GEMM_1X1, "gemm": 132, "block_M": 128, "block_N": 128, "block_K": 64, "threads": 256}
    assert "pingpong" in FAM.reject_reason(RESNET_1X1, "float16", cfg, H200)


def test_gemm_view_follows_the_first_config_on_hopper_only():
    # Not timed on a GPU: behind the measured first config (and the a_copy tiles where
    # both channel counts reach 128), the gemm family's ping-pong tiles, one persistent
    # block per SM.
    for shape, copies in (((32, 56, 56, 64, 256, 1, 1, 1, 0, 0), 0), ((32, 14, 14, 1024, 256, 1, 1, 1, 0, 0), 2)):
        space = FAM.search_space(shape, "float16", H200)
        assert not space[0].get("gemm") and all(c.get("a_copy") for c in space[1 : 1 + copies])
        assert [c.get("gemm") for c in space[1 + copies : 4 + copies]] == [132, 132, 132]
    for shape in (RESNET_3X3, (32, 56, 56, 64, 256, 1, 1, 1, 0, 1), (32, 56, 56, 256, 512, 1, 1, 2, 0, 0)):
        assert not [c for c in FAM.search_space(shape, "float16", H200) if c.get("gemm")], shape
    assert not [c for c in FAM.search_space(RESNET_1X1, "float16", A100) if c.get("gemm")]


def test_a_copy_is_offered_and_taken_only_where_one_tile_copy_reads_the_pixel_tile():
    one, three = (32, 28, 28, 128, 512, 1, 1, 1, 0, 0), (32, 14, 14, 256, 256, 3, 3, 1, 1, 0)
    for shape in (one, three, (32, 56, 56, 128, 128, 3, 3, 2, 1, 0)):  # a stride-2 3x3 too
        space = FAM.search_space(shape, "float16", H200)
        # Behind the measured first config, the two tiles the H100 sweep measured.
        tiles = [(c["block_M"], c["block_N"], c["threads"]) for c in space if c.get("a_copy")]
        want = [(128, 128, 256)] + ([(128, 256, 256)] if shape[4] >= 256 else [])  # no wider than K
        assert not space[0].get("a_copy") and tiles == want, shape
        assert all(c.get("a_copy") for c in space[1 : 1 + len(want)]), shape
    # Where it lost on the H100: 64 input or output channels (one k-step; a 64-wide tile).
    for shape in (RESNET_3X3, (32, 56, 56, 64, 256, 1, 1, 1, 0, 0), (32, 56, 56, 256, 64, 1, 1, 1, 0, 0)):
        assert not [c for c in FAM.search_space(shape, "float16", H200) if c.get("a_copy")], shape
    # A 1x1's rows are a plain tile copy anywhere; a k x k filter's im2col copy is TMA's
    # (Hopper): without it TileLang lowers im2col to a loop no better than the gather.
    assert any(c.get("a_copy") for c in FAM.search_space(one, "float16", A100))
    assert not any(c.get("a_copy") for c in FAM.search_space(three, "float16", A100))
    cfg = next(c for c in FAM.search_space(one, "float16", H200) if c.get("a_copy"))
    for shape in ((2, 14, 14, 64, 32, 1, 3, 1, 1, 0), nchw(one)):  # a non-square filter, NCHW
        assert not [c for c in FAM.search_space(shape, "float16", H200) if c.get("a_copy")], shape
        assert "a_copy" in FAM.reject_reason(shape, "float16", cfg, H200), shape
    assert "square filter" in FAM.reject_reason((2, 14, 14, 64, 32, 1, 3, 1, 1, 0), "float16", cfg, H200)
    tail = (2, 14, 14, 96, 64, 1, 1, 1, 0, 0)
    assert "whole channel chunks" in FAM.reject_reason(tail, "float16", {**cfg, "block_K": 64}, H200)
    assert "pick one" in FAM.reject_reason(one, "float16", {**cfg, "flat_k": True}, H200)
    # verify's nearby shape for it keeps the channels whole and the other tails.
    for fam in (FAM, kernels.get("conv_bn_add_relu")):
        near = verify.awkward_for(fam, one, "float16", cfg, SM90)
        assert near[3] == one[3] and near[1] % 2 and near[2] % 2 and near[4] % 16, (fam.name, near)
        assert verify.awkward_for(fam, one, "float16", {**cfg, "a_copy": False}, SM90)[3] % 16, fam.name


@pytest.mark.slow
def test_a_copy_loads_both_operands_by_tma_on_a_warp_specialized_pipeline_for_sm90():
    one = (32, 28, 28, 128, 512, 1, 1, 1, 0, 0)
    three = (32, 14, 14, 256, 256, 3, 3, 1, 1, 0)
    cases = [(FAM, one), (kernels.get("conv_bn_add_relu"), one), (kernels.get("conv_bn_relu"), three)]
    for fam, shape in cases:
        space = fam.search_space(shape, "float16", H200)
        first_gather = next(c for c in space if not c.get("a_copy"))
        gather = C.lower_source(fam.program(shape, "float16", first_gather, SM90), SM90)
        copied = C.lower_source(fam.program(shape, "float16", next(c for c in space if c.get("a_copy")), SM90), SM90)
        assert "cp_async" in gather and "warpgroup_reg_alloc" not in gather
        # One producer warpgroup issues both TMA loads (a 3x3's in im2col mode); the
        # consumers run wgmma.
        assert "cp_async" not in copied and copied.count("tma_load") == 2 and "wgmma" in copied, fam.name
        assert "warpgroup_reg_alloc" in copied and ("tma_load_im2col" in copied) == (shape == three), fam.name


@pytest.mark.slow
def test_gemm_view_lowers_to_the_ping_pong_program_for_sm90():
    shape = (32, 56, 56, 64, 256, 1, 1, 1, 0, 0)
    cfg = next(c for c in FAM.search_space(shape, "float16", H200) if c.get("gemm"))
    src = C.lower_source(FAM.program(shape, "float16", cfg, SM90), SM90)
    # The gemm family's ping-pong program: one producer and two consumer warpgroups.
    assert "wgmma" in src and "warpgroup_reg_alloc" in src and "warpgroup_reg_dealloc" in src
