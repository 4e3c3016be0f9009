"""Conv2d with groups: depthwise (MobileNetV2's 3x3 at stride 1 and 2, ConvNeXt's 7x7, a
channel multiplier) and grouped (ResNeXt-style) in both layouts. The CPU schedule
(TileLang's C backend) against F.conv2d in fp32 and fp16 on three seeds and a shape no
tile divides; the shape encoding (groups an optional eleventh size); problem shapes from
a real profiler trace; the CUDA schedules (direct, the GEMM per group, through the layout
transposes on NCHW) in the search space and lowered for sm_90a; the nn.Conv2d swap-in.

In: shapes, seeds and configs. Out: pass/fail. Kernels compile once per process.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from evaluator.routing import calls
from evaluator import kernels
from evaluator.tuning import verify
from evaluator.errors import KernelError
from evaluator.kernels import common as C
from evaluator.kernels.conv2d import grouped as GR
from evaluator.kernels import conv2d as conv_module
from tests.hardware import CPU, H200

FAM = conv_module.FAMILY
SM90 = "cuda -arch=sm_90a"

# (N, H, W, C, K, R, S, stride, pad, nchw, groups)
DW_S1 = (2, 12, 10, 16, 16, 3, 3, 1, 1, 1, 16)  # MobileNetV2's depthwise 3x3, NCHW
DW_S2 = (2, 13, 11, 24, 24, 3, 3, 2, 1, 0, 24)  # stride 2, odd sizes, channels_last
DW_7X7 = (2, 9, 9, 8, 8, 7, 7, 1, 3, 0, 8)  # ConvNeXt's, on its channels_last tensors
DW_MULT = (1, 9, 7, 6, 12, 3, 3, 1, 0, 1, 6)  # two output channels an input channel, unpadded
GROUPED = (2, 9, 9, 32, 32, 3, 3, 1, 1, 1, 4)  # ResNeXt-style: 8 channels a group
GROUPED_S2 = (2, 10, 9, 24, 36, 3, 3, 2, 1, 0, 3)

# MobileNetV2 at batch 32 (torchvision: NCHW, padding 1) and ConvNeXt-T's first stage.
MOBILENET = [
    (32, 112, 112, 32, 32, 3, 3, 1, 1, 1, 32),
    (32, 56, 56, 144, 144, 3, 3, 2, 1, 1, 144),
    (32, 14, 14, 576, 576, 3, 3, 1, 1, 1, 576),
]
CONVNEXT = (32, 56, 56, 96, 96, 7, 7, 1, 3, 0, 96)
RESNEXT = (32, 56, 56, 128, 128, 3, 3, 1, 1, 1, 32)


def torch_conv(x, w, shape):
    """An independent fp32 reference: F.conv2d on NCHW-shaped views."""
    stride, pad, groups = shape[7], shape[8], shape[10]
    if shape[9]:
        return F.conv2d(x.float(), w.float(), stride=stride, padding=pad, groups=groups)
    return F.conv2d(
        x.permute(0, 3, 1, 2).float(), w.permute(0, 3, 1, 2).float(), stride=stride, padding=pad, groups=groups
    ).permute(0, 2, 3, 1)


# ---------------------------------------------------------------- CPU correctness


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize(
    "shape",
    [DW_S1, DW_S2, DW_7X7, DW_MULT, GROUPED, GROUPED_S2],
    ids=["dw-s1-nchw", "dw-s2-nhwc", "dw-7x7-nhwc", "dw-multiplier", "grouped-nchw", "grouped-s2-nhwc"],
)
def test_cpu_matches_conv2d_on_seeds_and_an_awkward_shape(shape, dtype):
    cfg = FAM.search_space(shape, dtype, CPU)[0]
    res = verify.verify(FAM, shape, dtype, cfg, "c", "cpu", seeds=(0, 1, 2))
    assert res.passed, [c for c in res.cases if not c.passed]
    # The awkward shape verify added moved the group's channels off every tile.
    awk = res.cases[-1].shape
    assert awk != shape and awk[10] > 1 and (awk[3] // awk[10] == 1 or (awk[3] // awk[10]) % 16)
    kernel = FAM.build(shape, dtype, cfg, "c")
    atol, rtol = FAM.tolerance(dtype, shape)
    x, w = FAM.make_inputs(shape, dtype, "cpu", 7)
    out = kernel(x, w)
    ref = torch_conv(x, w, shape)
    assert out.shape == ref.shape and out.dtype == x.dtype and out.abs().max() > 0.1
    torch.testing.assert_close(out.float(), ref, atol=atol, rtol=rtol)


def test_wrong_result_is_detectable():
    kernel = FAM.build(DW_S1, "float32", FAM.search_space(DW_S1, "float32", CPU)[0], "c")
    x, w = FAM.make_inputs(DW_S1, "float32", "cpu", 0)
    out = kernel(x, w)
    atol, rtol = FAM.tolerance("float32", DW_S1)
    assert torch.allclose(out, FAM.reference(x, w), atol=atol, rtol=rtol)
    out[1, 5, 3, 4] += 0.01
    assert not torch.allclose(out, FAM.reference(x, w), atol=atol, rtol=rtol)
    # Ungrouped weights on the same tensors are another convolution altogether.
    dense = F.conv2d(x, w.repeat(1, 16, 1, 1), padding=1)
    assert not torch.allclose(kernel(x, w), dense, atol=atol, rtol=rtol)


# ---------------------------------------------------------------- shapes


def test_groups_are_an_optional_eleventh_size():
    # One group: the 10-int shape every ungrouped call always had (tuned-cache keys stay).
    assert FAM.check((2, 14, 14, 32, 32, 3, 3, 1, 1, 1, 1)) == (2, 14, 14, 32, 32, 3, 3, 1, 1, 1)
    assert FAM.check(DW_S1) == DW_S1
    assert FAM.input_shapes(DW_S1) == [(2, 16, 12, 10), (16, 1, 3, 3)]
    assert FAM.input_shapes(GROUPED_S2) == [(2, 10, 9, 24), (36, 3, 3, 8)]
    assert FAM.layout_free(GROUPED) == GROUPED[:9] + (4,)
    assert conv_module.channels_last(GROUPED) == GROUPED[:9] + (0, 4)
    # Work and tolerance follow the group's reduction, C/G x R x S.
    N, H, W, Cin, K, R, S = DW_S1[:7]
    assert FAM.flops(DW_S1) == 2 * N * 12 * 10 * K * R * S
    assert FAM.bytes(DW_S1, "float16") == 2 * (N * H * W * Cin + K * R * S + N * 12 * 10 * K)
    assert FAM.tolerance("float16", MOBILENET[2]) < FAM.tolerance("float16", MOBILENET[2][:10])
    for bad in [
        (2, 14, 14, 32, 32, 3, 3, 1, 1, 1, 3),
        (2, 14, 14, 32, 30, 3, 3, 1, 1, 1, 4),
        (2, 14, 14, 32, 32, 3, 3, 1, 1, 1, 0),
        (2, 14, 14, 32, 32, 3, 3, 1, 1, 1, 4, 1),
    ]:
        with pytest.raises(KernelError, match="multiples of groups") as err:
            FAM.check(bad)
        assert "\n" not in str(err.value)


def test_awkward_shapes_move_the_groups_channels():
    # Depthwise: the channel count (and with it the groups); grouped: each group's channels.
    awk = FAM.awkward_shape(MOBILENET[1])
    assert awk[3] == awk[10] and awk[4] == awk[3] and awk[3] % 16 and awk[1] % 2 and awk[5:9] == (3, 3, 2, 1)
    awk = FAM.awkward_shape(RESNEXT)
    assert awk[10] == 32 and (awk[3] // 32) % 16 and (awk[4] // 32) % 16 and awk[9] == 1
    assert FAM.awkward_shapes(RESNEXT) == [awk]  # no aligned twin: no `gemm` config takes groups


def test_problem_shape_from_a_real_profiler_trace():
    from evaluator.profiling.profile import _problem_shape

    model = torch.nn.Sequential(
        torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8),
        torch.nn.Conv2d(8, 16, 3, padding=1, groups=2, bias=False),
    ).eval()
    for layout in (1, 0):
        x = torch.randn(2, 8, 13, 13)
        if not layout:
            model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            model(x)
        found = {
            _problem_shape("conv2d", e.name, e.input_shapes, e.concrete_inputs, e.structured_input_strides)
            for e in prof.events()
            if e.name == "aten::conv2d"
        }
        assert found == {f"2x13x13x8x8x3x3x2x1x{layout}x8", f"2x7x7x8x16x3x3x1x1x{layout}x2"}


# ---------------------------------------------------------------- search spaces and configs


def test_search_spaces_offer_only_schedules_that_take_groups():
    # CPU: depthwise a direct loop nest (pixels x channels), other groupings the GEMM per
    # group (its channel chunk too), no tile wider than a group's channels.
    for shape in (DW_S1, DW_S2, GROUPED):
        cpu = FAM.search_space(shape, "float32", CPU)
        keys = {"block_M", "block_N"} if shape[3] == shape[10] else {"block_M", "block_N", "block_K"}
        assert 1 <= len(cpu) <= 4 and all(set(c) == keys for c in cpu), cpu
    assert all(c["block_N"] <= 8 and c["block_K"] <= 8 for c in FAM.search_space(GROUPED, "float32", CPU))
    assert FAM.search_space(DW_S2, "float32", CPU)[0]["block_N"] in (8, 24)  # channel tiles that divide K first
    for shape in [*MOBILENET, *[conv_module.channels_last(s) for s in MOBILENET], CONVNEXT, CONVNEXT[:9] + (1, 96)]:
        for dtype in ("float16", "bfloat16"):
            space = FAM.search_space(shape, dtype, H200)
            # Depthwise: the direct kernel only (a GEMM per channel would be one column wide).
            assert 3 <= len(space) <= 8 and all(
                set(c) == {"block_C", "block_H", "block_W", "threads", "vec"} for c in space
            )
            # NCHW: a thread's neighbours along a row first (taps read once), then one a thread.
            assert {c["vec"] for c in space} == ({4, 1} if shape[9] else {1})
            assert all(FAM.reject_reason(shape, dtype, c, H200) is None for c in space)
            assert all(GR.direct_per_thread(c) <= GR.DIRECT_MAX_PER_THREAD for c in space)
    for shape in (RESNEXT, conv_module.channels_last(RESNEXT)):
        space = FAM.search_space(shape, "float16", H200)
        assert 3 <= len(space) <= 8 and all(c["direct"] is False for c in space)
        # NCHW runs the channels_last GEMM between TileLang transposes; the tile no wider
        # than the group's 4 output channels rounded up to the MMA's 16.
        assert all(c["via_nhwc"] is bool(shape[9]) and c["block_N"] == 16 for c in space)
    assert FAM.search_space(DW_S1, "float32", H200) == []  # no fp32 CUDA schedule


def test_grouped_config_errors():
    direct = FAM.search_space(MOBILENET[0], "float16", H200)[0]
    assert "implicit GEMM per group" in FAM.reject_reason(RESNEXT, "float16", direct, H200)
    assert "via_nhwc" in FAM.reject_reason(RESNEXT, "float16", {"direct": False}, H200)
    assert "NCHW shapes" in FAM.reject_reason(
        conv_module.channels_last(RESNEXT), "float16", {"direct": False, "via_nhwc": True}, H200
    )
    assert "spill" in FAM.reject_reason(MOBILENET[0], "float16", {**direct, "block_C": 64, "block_W": 64}, H200)
    assert "multiple of vec" in FAM.reject_reason(MOBILENET[0], "float16", {**direct, "vec": 3}, H200)
    assert "NCHW tile's" in FAM.reject_reason(CONVNEXT, "float16", {**direct, "vec": 4}, H200)
    assert "shared memory" in FAM.reject_reason(
        CONVNEXT, "float16", {"block_C": 1024, "block_H": 4, "block_W": 4, "threads": 1024}, H200
    )
    assert "unknown config" in FAM.reject_reason(DW_S1, "float32", {"block_C": 8}, CPU)  # a CUDA tile key
    assert "stack" in FAM.reject_reason(DW_S1, "float32", {"block_M": 256, "block_N": 256}, CPU)


# ---------------------------------------------------------------- CUDA schedules (lowered, not run)


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [MOBILENET[0], MOBILENET[1], conv_module.channels_last(MOBILENET[2]), CONVNEXT, FAM.awkward_shape(DW_S2)],
    ids=["112x112-nchw", "56x56s2-nchw", "14x14-nhwc", "convnext-7x7-nhwc", "awkward-nhwc"],
)
def test_depthwise_direct_configs_lower_for_sm90(shape):
    for cfg in FAM.search_space(shape, "float16", H200):
        src = C.lower_source(FAM.program(shape, "float16", cfg, SM90), SM90)
        # CUDA cores on fp32 registers, the input tile staged in shared memory once.
        assert "__global__" in src and "wgmma" not in src and "__syncthreads" in src, cfg
        assert "conv2d_depthwise_" + ("nchw" if shape[9] else "nhwc") in src
        if not shape[9] and shape[4] % cfg["block_C"] == 0:
            assert "uint4" in src, cfg  # channels innermost: 16-byte vector loads along C
        if shape[9] and cfg["vec"] == 4:
            assert "uint2" in src, cfg  # a thread's 4 neighbours along a row: one 8-byte store


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [RESNEXT, conv_module.channels_last(RESNEXT), FAM.awkward_shape(GROUPED_S2)],
    ids=["resnext-nchw", "resnext-nhwc", "awkward-nhwc"],
)
def test_grouped_gemm_lowers_for_sm90(shape):
    for dtype in ("float16", "bfloat16"):
        for cfg in FAM.search_space(shape, dtype, H200)[:3]:
            src = C.lower_source(FAM.program(shape, dtype, cfg, SM90), SM90)
            assert "wgmma" in src and "conv2d_grouped_tc" in src, cfg


def test_via_channels_last_grouped_on_cpu():
    # The NCHW grouped GEMM's call path (transpose x, channels_last kernel, transpose y)
    # on the C backend: the CPU grouped kernel between the CPU transposes.
    from evaluator.kernels.conv2d import layout as conv_layout

    last = conv_module.channels_last(GROUPED)
    inner = FAM.build(last, "float32", FAM.search_space(last, "float32", CPU)[0], "c")
    kernel = conv_layout.ViaChannelsLast(inner, GROUPED, "c")
    x, w = FAM.make_inputs(GROUPED, "float32", "cpu", 0)
    torch.testing.assert_close(kernel(x, w), FAM.reference(x, w), atol=1e-4, rtol=1e-4)


# ---------------------------------------------------------------- swap-in


@pytest.mark.parametrize("channels_last", [False, True])
def test_depthwise_and_grouped_calls_run_in_tilelang(channels_last):
    from tests.routing import count, route_model

    class Block(torch.nn.Module):  # MobileNetV2's inverted residual, and a grouped 3x3
        def __init__(self):
            super().__init__()
            self.expand = torch.nn.Conv2d(8, 24, 1, bias=False)
            self.dw = torch.nn.Conv2d(24, 24, 3, stride=2, padding=1, groups=24, bias=False)
            self.dw7 = torch.nn.Conv2d(24, 24, 7, padding=3, groups=24)  # ConvNeXt's, with a bias
            self.grouped = torch.nn.Conv2d(24, 24, 3, padding=1, groups=3)
            self.dilated = torch.nn.Conv2d(24, 8, 3, padding=2, dilation=2, groups=8)

        def forward(self, x):
            return self.dilated(self.grouped(self.dw7(F.relu6(self.dw(self.expand(x))))))

    torch.manual_seed(0)
    model, x = Block(), torch.randn(2, 8, 15, 13)
    if channels_last:
        model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    router, got, expected = route_model(["conv2d"], model, (x,))
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert count(router, "conv2d") == (4, 1)
    layout = "0" if channels_last else "1"
    ran = {c.shape for c in router.counts() if c.tilelang}
    assert ran == {
        f"2x15x13x8x24x1x1x1x0x{layout}",
        f"2x15x13x24x24x3x3x2x1x{layout}x24",
        f"2x8x7x24x24x7x7x1x3x{layout}x24",
        f"2x8x7x24x24x3x3x1x1x{layout}x3",
    }
    assert {r for c in router.counts() for r in c.fallback} == {"dilated convolution"}
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    assert got.is_contiguous(memory_format=fmt)


def test_weights_computed_on_every_call_leave_no_cached_copies_behind():
    # A weight-normalised convolution makes a new weight tensor each forward: its KRSC copy
    # (channels_last) is made per call, never cached by a key that dies with the call.
    from torch.nn.utils.parametrizations import weight_norm

    from tests.routing import count, route_model

    model = torch.nn.Sequential(
        weight_norm(torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)), weight_norm(torch.nn.Conv2d(8, 4, 1))
    ).eval()
    model = model.to(memory_format=torch.channels_last)
    x = torch.randn(2, 8, 9, 7).contiguous(memory_format=torch.channels_last)
    router, got, expected = route_model(["conv2d"], model, (x,))
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    cached = len(calls.DERIVED._cache)
    with torch.inference_mode(), router:
        for _ in range(3):
            torch.testing.assert_close(model(x), expected, atol=1e-4, rtol=1e-4)
    assert count(router, "conv2d") == (8, 0) and len(calls.DERIVED._cache) == cached


def test_nchw_through_the_channels_last_kernel_with_a_computed_weight():
    # On CUDA an NCHW layer may run the channels_last kernel between transposes
    # (via_nhwc); with a weight-normalised weight the route makes its KRSC copy per call.
    from torch.nn.utils.parametrizations import weight_norm

    from evaluator.routing import router as swap
    from evaluator.kernels.conv2d import layout as conv_layout

    shape = (2, 9, 7, 8, 8, 3, 3, 1, 1, 1, 2)
    last = conv_module.channels_last(shape)
    kernel = conv_layout.ViaChannelsLast(
        FAM.build(last, "float32", FAM.search_space(last, "float32", CPU)[0], "c"), shape, "c"
    )
    table = swap.KernelTable("float32", "c")
    table.add("conv2d", shape, {}, kernel)
    model = weight_norm(torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)).eval()
    x = torch.randn(2, 8, 9, 7)
    router = swap.Router([FAM], table)
    with torch.inference_mode():
        expected = model(x)
        with router:
            got = [model(x) for _ in range(2)]
        cached = len(calls.DERIVED._cache)
        with router:
            got += [model(x) for _ in range(2)]
    for out in got:
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert [(c.tilelang, c.fallback) for c in router.counts()] == [(4, {})] and len(calls.DERIVED._cache) == cached


# ---------------------------------------------------------------- the GPU sweep's entries


def test_kernel_sweep_times_depthwise_and_conv1d_at_the_models_shapes():
    # benchmarks/kernel_sweep.py --only depthwise,conv1d (run on an H100/H200 against cuDNN):
    # MobileNetV2's three depthwise layers at batch 32 in both layouts and ConvNeXt-T's 7x7;
    # Whisper-base's two front-end conv1d at batch 1 and 8. The family's own space first,
    # then a wider grid of configs the family accepts.
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "kernel_sweep.py"
    spec = importlib.util.spec_from_file_location("kernel_sweep", path)
    ks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ks)
    todo = ks.cases({"depthwise", "conv1d"}, H200)
    shapes = {(f, "x".join(map(str, s))) for f, s, _, _ in todo}
    assert {("conv2d", "x".join(map(str, s))) for s in MOBILENET} <= shapes
    assert ("conv2d", "32x14x14x576x576x3x3x1x1x0x576") in shapes and (
        "conv2d",
        "32x56x56x96x96x7x7x1x3x0x96",
    ) in shapes
    assert {("conv1d", "1x3000x80x512x3x1x1x1"), ("conv1d", "8x3000x512x512x3x2x1x1")} <= shapes
    for fam, shape, configs, own in todo:
        family = kernels.get(fam)
        assert own and configs[: len(own)] == own and len(configs) > len(own), shape
        assert all(family.reject_reason(shape, "float16", c, H200) is None for c in configs), shape
