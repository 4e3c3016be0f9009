"""Conv1d family: F.conv1d as Whisper's and wav2vec2's front ends call it, run by the conv2d
programs on a one-row image. The CPU schedules (TileLang's C backend) against F.conv1d in
fp32 and fp16 on three seeds and an awkward shape, in both layouts ([N, C, L], and the
[N, L, C] memory of a transposed view) and with groups; the shape encoding; problem
shapes from a real profiler trace (aten::conv1d named, never filed under conv2d); the
search spaces and the CUDA schedules lowered for sm_90a; the nn.Conv1d swap-in.

In: shapes, seeds and configs. Out: pass/fail. Kernels compile once per process.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from evaluator.routing import calls
from evaluator import kernels
from evaluator.profiling import profile as profiling
from evaluator.tuning import verify
from evaluator.errors import KernelError
from evaluator.kernels import common as C
from evaluator.kernels import conv1d as conv1d_module
from tests.hardware import CPU, H200

FAM = conv1d_module.FAMILY
SM90 = "cuda -arch=sm_90a"

# (N, L, C, K, S, stride, pad, ncl[, groups])
WHISPER_1 = (2, 64, 16, 32, 3, 1, 1, 1)  # Whisper's conv1: mel bins -> d_model, k3 p1
WHISPER_2 = (2, 64, 32, 32, 3, 2, 1, 1)  # conv2: k3 s2 p1
W2V_FIRST = (2, 400, 1, 16, 10, 5, 0, 1)  # wav2vec2's first feature conv on raw audio
W2V_POS = (2, 40, 32, 32, 16, 1, 8, 0, 2)  # its positional conv: grouped, on a transposed view
NLC = (2, 41, 24, 40, 3, 2, 1, 0)
DEPTHWISE = (2, 37, 12, 12, 5, 1, 2, 1, 12)


def torch_conv1d(x, w, shape):
    stride, pad = shape[5], shape[6]
    groups = shape[8] if len(shape) > 8 else 1
    if not shape[7]:
        x = x.permute(0, 2, 1)
    return F.conv1d(x.float(), w.float(), stride=stride, padding=pad, groups=groups)


# ---------------------------------------------------------------- CPU correctness


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize(
    "shape",
    [WHISPER_1, WHISPER_2, W2V_FIRST, W2V_POS, NLC, DEPTHWISE],
    ids=["whisper-conv1", "whisper-conv2", "w2v-first", "w2v-pos-grouped-nlc", "nlc-s2", "depthwise"],
)
def test_cpu_matches_conv1d_on_seeds_and_an_awkward_shape(shape, dtype):
    cfg = FAM.search_space(shape, dtype, CPU)[0]
    res = verify.verify(FAM, shape, dtype, cfg, "c", "cpu", seeds=(0, 1, 2))
    assert res.passed, [c for c in res.cases if not c.passed]
    assert res.cases[-1].shape == FAM.awkward_shape(shape) and res.cases[-1].shape[1] % 2
    kernel = FAM.build(shape, dtype, cfg, "c")
    x, w = FAM.make_inputs(shape, dtype, "cpu", 7)
    out = kernel(x, w)
    ref = torch_conv1d(x, w, shape)
    # [N, K, L'] and contiguous in both layouts, as F.conv1d returns it.
    assert out.shape == ref.shape and out.is_contiguous() and out.dtype == x.dtype and out.abs().max() > 0.1
    atol, rtol = FAM.tolerance(dtype, shape)
    torch.testing.assert_close(out.float(), ref, atol=atol, rtol=rtol)


def test_wrong_result_is_detectable():
    kernel = FAM.build(WHISPER_2, "float32", FAM.search_space(WHISPER_2, "float32", CPU)[0], "c")
    x, w = FAM.make_inputs(WHISPER_2, "float32", "cpu", 0)
    out = kernel(x, w)
    atol, rtol = FAM.tolerance("float32", WHISPER_2)
    assert torch.allclose(out, FAM.reference(x, w), atol=atol, rtol=rtol)
    out[1, 3, 5] += 0.01
    assert not torch.allclose(out, FAM.reference(x, w), atol=atol, rtol=rtol)
    # The filter reversed (a correlation's taps read the other way) is another result.
    assert not torch.allclose(kernel(x, w.flip(2).contiguous()), FAM.reference(x, w), atol=atol, rtol=rtol)


# ---------------------------------------------------------------- shapes


def test_shape_encoding_and_geometry():
    assert FAM.check(WHISPER_1[:7]) == WHISPER_1  # NCL, PyTorch's default, when left out
    assert FAM.check(NLC + (1,)) == NLC  # one group: left out
    assert FAM.check(W2V_POS) == W2V_POS
    # The 2-D convolution the programs compute: one row, stride and padding along L only.
    g = FAM.geometry(WHISPER_2)
    assert (g.H, g.R, g.sh, g.ph, g.W, g.S, g.sw, g.pw, g.P, g.Q) == (1, 1, 1, 0, 64, 3, 2, 1, 1, 32)
    assert FAM.input_shapes(W2V_POS) == [(2, 40, 32), (32, 16, 16)]  # [N, L, C] memory, nn.Conv1d's weight
    assert FAM.input_shapes(WHISPER_2) == [(2, 32, 64), (32, 32, 3)]
    assert FAM.layout_free(W2V_POS) == (2, 40, 32, 32, 16, 1, 8, 2)
    assert FAM.flops(WHISPER_2) == 2 * 2 * 32 * 32 * 32 * 3
    assert FAM.bytes(W2V_FIRST, "float16") == 2 * (2 * 400 + 16 * 10 + 2 * 79 * 16)
    for bad in [
        (2, 64, 16, 32, 3, 1),
        (2, 64, 16, 32, 3, 0, 1, 1),
        (2, 64, 16, 32, 3, 1, 1, 2),
        (2, 64, 16, 30, 3, 1, 1, 1, 4),
        (2, 2, 16, 32, 9, 1, 1, 1),
        (2, "L", 16, 32, 3, 1, 1, 1),
    ]:
        with pytest.raises(KernelError, match="conv1d") as err:
            FAM.make_inputs(bad, "float32", "cpu", 0)
        assert "\n" not in str(err.value)


def test_make_inputs_and_reference():
    x, w = FAM.make_inputs(W2V_POS, "float32", "cpu", 3)
    assert tuple(x.shape) == (2, 40, 32) and tuple(w.shape) == (32, 16, 16)
    ref = FAM.reference(x, w)
    assert tuple(ref.shape) == (2, 32, 41) and ref.is_contiguous()
    assert torch.equal(ref, F.conv1d(x.permute(0, 2, 1), w, padding=8, groups=2))
    with pytest.raises(KernelError, match="make_inputs"):
        FAM.reference(x.clone(), w)
    with pytest.raises(KernelError, match=r"x \[N, L, C\] and w \[K, C, S\]"):
        FAM.reference(x, w[:, :8].contiguous())


# ---------------------------------------------------------------- problem shapes


def test_conv1d_calls_are_this_familys_and_carry_their_shape():
    x, w = [2, 16, 64], [32, 16, 3]
    assert kernels.family_for_aten("aten::conv1d", [x, w]) is FAM
    # aten::convolution (what conv1d dispatches to) with a 3-D weight is conv1d's, with a 4-D one conv2d's.
    assert kernels.family_for_aten("aten::convolution", [x, w]) is FAM
    assert kernels.family_for_aten("aten::convolution", [[2, 16, 8, 8], [32, 16, 3, 3]]).name == "conv2d"
    assert FAM.problem_shape("aten::conv1d", [x, w, []], [None, None, None, [1], [1], [1], 1]) == WHISPER_1
    assert FAM.problem_shape(
        "aten::convolution", [x, w, [], [], [], [], [], [], []], [None, None, None, [2], [1], [1], False, [0], 1]
    ) == (2, 64, 16, 32, 3, 2, 1, 1)
    assert FAM.problem_shape("aten::conv1d", [x, w, []], [None, None, None, [1], "same", [1], 1]) == WHISPER_1
    # [N, L, C] memory (a transposed view) from x's strides; grouped.
    assert (
        FAM.problem_shape(
            "aten::conv1d",
            [[2, 32, 40], [32, 16, 16]],
            [None, None, None, [1], [8], [1], 2],
            input_strides=[[1280, 1, 32], [256, 16, 1]],
        )
        == W2V_POS
    )
    assert FAM.problem_shape("aten::conv1d", [x, w, []], [None, None, None, [1], [1], [2], 1]) is None  # dilated
    assert FAM.problem_shape("aten::conv1d", [x, w, []]) is None  # no scalars recorded


def test_problem_shapes_from_a_real_profiler_trace():
    class Front(torch.nn.Module):  # Whisper's two convolutions, then a transposed grouped one
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv1d(16, 32, 3, padding=1)
            self.conv2 = torch.nn.Conv1d(32, 32, 3, stride=2, padding=1)
            self.pos = torch.nn.Conv1d(32, 32, 16, padding=8, groups=2)

        def forward(self, x):
            h = F.gelu(self.conv2(F.gelu(self.conv1(x)))).transpose(1, 2).contiguous()  # [N, L, C]
            return self.pos(h.transpose(1, 2))

    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        Front().eval()(torch.randn(2, 16, 64))
    rows = profiling._attributed(prof, use_cuda=False)
    conv = [r for r in rows if r["op"].startswith("aten::conv")]
    # Each call once, at the outermost op, as conv1d's, with its shape: none filed under conv2d.
    assert sorted((r["family"], r["op"], r["shape"]) for r in conv) == [
        ("conv1d", "aten::conv1d", "2x32x32x32x16x1x8x0x2"),
        ("conv1d", "aten::conv1d", "2x64x16x32x3x1x1x1"),
        ("conv1d", "aten::conv1d", "2x64x32x32x3x2x1x1"),
    ]
    assert not [r for r in rows if r["family"] == "conv2d"]


# ---------------------------------------------------------------- search spaces and CUDA schedules


def test_search_spaces():
    for shape in (WHISPER_1, W2V_POS, NLC):
        cpu = FAM.search_space(shape, "float32", CPU)
        assert 1 <= len(cpu) <= 4 and all(FAM.reject_reason(shape, "float32", c, CPU) is None for c in cpu)
    whisper, w2v = conv1d_module.WHISPER_BASE, conv1d_module.WAV2VEC2_BASE
    for shape in [*whisper, *w2v, FAM.awkward_shape(whisper[1])]:
        for dtype in ("float16", "bfloat16"):
            space = FAM.search_space(shape, dtype, H200)
            assert 3 <= len(space) <= 12 and all(FAM.reject_reason(shape, dtype, c, H200) is None for c in space)
    # NCL: the NCHW implicit GEMM (and the channels_last one through transposes); the
    # grouped positional convolution: the GEMM per group on its [N, L, C] memory.
    assert {bool(c.get("via_nhwc")) for c in FAM.search_space(whisper[1], "float16", H200)} == {True, False}
    assert all(c["direct"] is False and not c["via_nhwc"] for c in FAM.search_space(w2v[1], "float16", H200))


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [*conv1d_module.WHISPER_BASE, *conv1d_module.WAV2VEC2_BASE, (8, 1500, 512, 512, 3, 1, 1, 0)],
    ids=["whisper-conv1", "whisper-conv2", "w2v-first", "w2v-pos", "nlc"],
)
def test_cuda_configs_lower_for_sm90(shape):
    for cfg in FAM.search_space(shape, "float16", H200)[:4]:
        src = C.lower_source(FAM.program(shape, "float16", cfg, SM90), SM90)
        assert "__global__" in src and "wgmma" in src, cfg  # Hopper tensor cores


def test_nlc_kernel_returns_ncl_through_a_tilelang_transpose():
    kernel = FAM.build(NLC, "float32", FAM.search_space(NLC, "float32", CPU)[0], "c")
    assert "batched_transpose" in kernel.source
    x, w = FAM.make_inputs(NLC, "float32", "cpu", 1)
    out = kernel(x, w)
    assert out.shape == (2, 40, 21) and out.is_contiguous()


# ---------------------------------------------------------------- swap-in


def test_conv1d_calls_run_in_tilelang_in_both_layouts():
    from tests.routing import count, route_model

    class Front(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv1d(16, 24, 3, padding=1)
            self.conv2 = torch.nn.Conv1d(24, 24, 3, stride=2, padding=1, bias=False)
            self.pos = torch.nn.Conv1d(24, 24, 6, padding=3, groups=3)  # even filter: one sample too many
            self.same = torch.nn.Conv1d(24, 8, 5, padding="same")
            self.dilated = torch.nn.Conv1d(8, 8, 3, dilation=2)

        def forward(self, x):
            h = F.gelu(self.conv2(F.gelu(self.conv1(x))))
            t = h.transpose(1, 2).contiguous().transpose(1, 2)  # [N, L, C] memory, as wav2vec2's
            h = h + self.pos(t)[:, :, :-1]
            return self.dilated(self.same(h))

    torch.manual_seed(0)
    router, got, expected = route_model(["conv1d"], Front(), (torch.randn(2, 16, 31),))
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert count(router, "conv1d") == (4, 1)
    ran = {c.shape for c in router.counts() if c.tilelang}
    assert ran == {"2x31x16x24x3x1x1x1", "2x31x24x24x3x2x1x1", "2x16x24x24x6x1x3x0x3", "2x16x24x8x5x1x2x1"}
    assert {r for c in router.counts() for r in c.fallback} == {"dilated convolution"}
    assert got.is_contiguous()


def test_weights_computed_on_every_call_leave_no_cached_copies_behind():
    # wav2vec2's positional convolution is weight-normalised: each forward makes a new
    # weight tensor. Its [K, S, C] copy is made per call, never cached by a key that dies
    # with the call (the cache would grow by a weight's size every forward).
    from torch.nn.utils.parametrizations import weight_norm

    from tests.routing import count, route_model

    class Pos(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = weight_norm(torch.nn.Conv1d(16, 16, 8, padding=4, groups=2), name="weight", dim=2)
            self.proj = weight_norm(torch.nn.Conv1d(16, 16, 3, padding=1))

        def forward(self, h):  # h [N, L, C]
            return self.proj(F.gelu(self.conv(h.transpose(1, 2))[:, :, :-1]))

    torch.manual_seed(0)
    model, h = Pos().eval(), torch.randn(2, 20, 16)
    router, got, expected = route_model(["conv1d"], model, (h,))
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert count(router, "conv1d") == (2, 0)
    cached = len(calls.DERIVED._cache)
    with torch.inference_mode(), router:
        for _ in range(3):
            torch.testing.assert_close(model(h), expected, atol=1e-4, rtol=1e-4)
    assert count(router, "conv1d") == (8, 0) and len(calls.DERIVED._cache) == cached


def test_ncl_through_the_channels_last_kernel_keeps_one_weight_copy():
    # On CUDA an NCL conv1d may run the channels_last kernel between two transposes
    # (via_nhwc, first in Whisper's space). The 2-D view of the weight is new on every
    # call, so its KRSC copy is keyed by the weight itself: made once, reused after.
    from evaluator.kernels.conv2d import layout as conv_layout
    from evaluator.kernels import conv2d as conv2d_module

    shape = (2, 33, 16, 24, 3, 2, 0, 1)  # unpadded: its channels_last twin is a conv2d shape
    twin = (2, 1, 33, 16, 24, 1, 3, 2, 0, 0)
    inner = conv2d_module.FAMILY.build(twin, "float32", {"block_M": 16, "block_N": 16, "block_K": 16}, "c")
    kernel = conv1d_module.As2d(conv_layout.ViaChannelsLast(inner, FAM.geometry(shape), "c"), FAM.geometry(shape), "c")
    x, w = FAM.make_inputs(shape, "float32", "cpu", 0)
    torch.testing.assert_close(kernel(x, w), FAM.reference(x, w), atol=1e-5, rtol=1e-5)
    cached = len(calls.DERIVED._cache)
    for _ in range(3):
        torch.testing.assert_close(kernel(x, w), FAM.reference(x, w), atol=1e-5, rtol=1e-5)
    assert len(calls.DERIVED._cache) == cached
    # A weight computed on every call (cache=False): no entry at all.
    w2 = w * 1.0
    torch.testing.assert_close(kernel(x, w2, cache=False), FAM.reference(x, w), atol=1e-5, rtol=1e-5)
    assert len(calls.DERIVED._cache) == cached


@pytest.mark.parametrize("dims", [1, 2])
def test_a_transposed_convolution_is_counted_as_falling_back_saying_why(dims):
    # The profile files nn.ConvTranspose's aten::convolution under the convolution family,
    # so the router counts its call there too (no kernel): "3 in TileLang, 0 fell back"
    # with the transposed call run unseen would be a count that does not add up.
    from tests.routing import count, route_model

    conv, up = (torch.nn.Conv1d, torch.nn.ConvTranspose1d) if dims == 1 else (torch.nn.Conv2d, torch.nn.ConvTranspose2d)
    model = torch.nn.Sequential(conv(4, 8, 3, padding=1), up(8, 4, 2, stride=2), conv(4, 4, 3, padding=1))
    x = torch.randn(2, 4, *(16,) * dims)
    family = "conv1d" if dims == 1 else "conv2d"
    router, got, want = route_model([family], model, (x,))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert count(router, family) == (2, 1)
    assert router.fell_back[(family, "")] == {conv1d_module.TRANSPOSED: 1}
