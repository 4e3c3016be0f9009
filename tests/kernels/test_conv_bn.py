"""conv_bn, conv_bn_relu and conv_bn_add_relu: the CPU schedule (TileLang's C backend)
against PyTorch's conv2d -> batch_norm(eval) (-> relu; -> + residual -> relu) in both
layouts, the folded factors and their cache, shape and config checks, the CUDA schedules
lowered for sm_90a, the router taking the two-, three- and four-call patterns in
torchvision's blocks, and the profile scan naming their shapes.

In: shapes, seeds, configs, small models. Out: pass/fail. Kernels compile once per
process (the family's cache), so seeds and models reuse the builds.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from evaluator import kernels
from evaluator.profiling import profile as profiling
from evaluator.errors import KernelError
from evaluator.kernels import common as C
from evaluator.kernels import conv_bn as CB
from evaluator.models import load_model
from evaluator.models.zoo import Bottleneck
from evaluator.results import Hardware
from tests.routing import count, route_model
from tests.hardware import CPU, H200

SM90 = "cuda -arch=sm_90a"

S3 = (2, 14, 14, 32, 32, 3, 3, 1, 1, 0)  # 3x3 stride 1, channels_last
S3_NCHW = S3[:9] + (1,)
S1S2 = (2, 13, 13, 24, 40, 1, 1, 2, 0, 1)  # a ResNet downsample, odd H and W, NCHW
RESNET50 = [
    (32, 56, 56, 64, 64, 3, 3, 1, 1, 1),
    (32, 56, 56, 64, 256, 1, 1, 1, 0, 1),
    (32, 14, 14, 1024, 256, 1, 1, 1, 0, 1),
]


def independent(x, w, mean, var, weight, bias, *r, shape, relu):
    """fp64 conv, then the eval norm's formula as written (then the residual, the ReLU):
    no code of the family's."""
    stride, pad, nchw = shape[7], shape[8], shape[9]
    if not nchw:
        x, w = x.permute(0, 3, 1, 2), w.permute(0, 3, 1, 2)
    y = F.conv2d(x.double(), w.double(), stride=stride, padding=pad)
    c = (1, -1, 1, 1)
    y = (y - mean.double().view(c)) / torch.sqrt(var.double().view(c) + CB.EPS) * weight.double().view(
        c
    ) + bias.double().view(c)
    if r:
        y = y + (r[0] if nchw else r[0].permute(0, 3, 1, 2)).double()
    if relu:
        y = y.clamp_min(0)
    return y if nchw else y.permute(0, 2, 3, 1)


def check(family, shape, dtype, seeds=(0, 1, 2)):
    fam = kernels.get(family)
    kernel = fam.build(shape, dtype, fam.search_space(shape, dtype, CPU)[0], "c")
    atol, rtol = fam.tolerance(dtype, shape)
    for seed in seeds:
        ins = fam.make_inputs(shape, dtype, "cpu", seed)
        out = kernel(*ins)
        ref = fam.reference(*ins)
        assert out.dtype == ref.dtype and out.shape == ref.shape
        torch.testing.assert_close(out.float(), ref.float(), atol=atol, rtol=rtol)
        exact = independent(*ins, shape=shape, relu=fam.relu)
        torch.testing.assert_close(out.double(), exact, atol=atol, rtol=rtol)
        if fam.relu:
            assert (out >= 0).all() and (out == 0).any()


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", [S3, S3_NCHW], ids=["channels_last", "nchw"])
def test_conv_bn_relu_matches_pytorch(shape, dtype):
    check("conv_bn_relu", shape, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_conv_bn_matches_pytorch(dtype):
    check("conv_bn", S3_NCHW, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", [S3, S3_NCHW], ids=["channels_last", "nchw"])
def test_conv_bn_add_relu_matches_pytorch(shape, dtype):
    check("conv_bn_add_relu", shape, dtype)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["conv_bn", "conv_bn_relu", "conv_bn_add_relu"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("nchw", [0, 1])
def test_awkward_shapes_match_pytorch(family, dtype, nchw):
    fam = kernels.get(family)
    awk = fam.awkward_shape(S1S2[:9] + (nchw,))
    assert awk[3] % 16 and awk[4] % 16 and awk[1] % 2
    check(family, awk, dtype)
    check(family, fam.awkward_shape(S3[:9] + (nchw,)), dtype, seeds=(0,))


def test_a_wrong_epilogue_is_caught():
    """The check sees a kernel that leaves the norm out (so these tests can fail)."""
    fam = kernels.get("conv_bn")
    x, w, mean, var, weight, bias = fam.make_inputs(S3_NCHW, "float32", "cpu", 0)
    conv_only = kernels.get("conv2d").build(S3_NCHW, "float32", {}, "c")(x, w)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(conv_only, fam.reference(x, w, mean, var, weight, bias), atol=1e-3, rtol=1e-3)


# ---------------------------------------------------------------- folding


def test_fold_is_the_eval_norm_and_takes_a_conv_bias():
    K = 6
    mean, var, weight, bias, b = (torch.randn(K) for _ in range(5))
    var = var.abs() + 0.1
    scale, shift = CB.fold(mean, var, weight, bias, 1e-3, b)
    y = torch.randn(2, K, 3, 3)
    want = F.batch_norm(y + b.view(1, -1, 1, 1), mean, var, weight, bias, False, 0.0, 1e-3)
    torch.testing.assert_close(y * scale.view(1, -1, 1, 1) + shift.view(1, -1, 1, 1), want)
    scale, shift = CB.fold(mean, var, None, None, 1e-5)  # affine=False
    torch.testing.assert_close(scale, torch.rsqrt(var + 1e-5))


def test_folded_factors_are_made_once_per_norm_and_again_after_an_update():
    bn = nn.BatchNorm2d(8).eval()
    bn.running_var.fill_(4.0)
    args = (bn.running_mean, bn.running_var, bn.weight, bn.bias, bn.eps)
    first = CB.folded(*args)
    assert CB.folded(*args)[0].data_ptr() == first[0].data_ptr()  # the cache
    torch.testing.assert_close(first[0], torch.full((8,), 0.5), atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        bn.weight.mul_(2)  # an in-place update: a new version
    again = CB.folded(*args)
    assert again[0].data_ptr() != first[0].data_ptr()
    torch.testing.assert_close(again[0], torch.full((8,), 1.0), atol=1e-5, rtol=1e-5)
    assert CB.folded(*args[:4], 1e-3)[0].data_ptr() != again[0].data_ptr()  # another eps, another fold


# ---------------------------------------------------------------- shapes and configs


def test_shapes_are_conv2d_shapes_of_one_group():
    fam = kernels.get("conv_bn")
    assert fam.check(S3[:9]) == S3  # 9 ints: channels_last, as conv2d reads them
    with pytest.raises(KernelError, match="conv_bn: one group only"):
        fam.check(S3[:10] + (2,))
    with pytest.raises(KernelError, match="^conv_bn: shape must be"):
        fam.check((1, 2, 3))
    assert fam.profile_family == "conv2d" and fam.fused_op == "aten::batch_norm"
    assert all(len(s) == 10 for s in fam.standard_shapes("cuda") + fam.standard_shapes("cpu"))


@pytest.mark.parametrize("shape", RESNET50 + [S3], ids=str)
def test_the_cuda_space_is_conv2ds_without_the_unfused_schedules(shape):
    for name in ("conv_bn", "conv_bn_relu", "conv_bn_add_relu"):
        fam = kernels.get(name)
        space = fam.search_space(shape, "float16", H200)
        assert space and not any(c.get(k) for c in space for k in CB.UNFUSED_KEYS)
        assert fam.search_space(shape, "float32", H200) == []  # conv2d has no fp32 CUDA schedule
    with pytest.raises(KernelError, match="float16 or bfloat16"):
        kernels.get("conv_bn").build(shape, "float32", {}, SM90)


# The three CUDA programs: NCHW (a 1x1 copied tile, a 3x3 gathered), channels_last
# (whole channel chunks and flat_k), NCHW via channels_last.
LOWER = [
    (RESNET50[1], {"via_nhwc": False}),
    ((4, 9, 9, 24, 40, 3, 3, 2, 1, 1), {"via_nhwc": False, "block_K": 32}),
    (RESNET50[2][:9] + (0,), {}),
    ((4, 9, 9, 24, 40, 3, 3, 2, 1, 0), {"flat_k": True, "block_K": 32}),
    (RESNET50[0], {"via_nhwc": True}),
]


@pytest.mark.parametrize("shape,cfg", LOWER, ids=[str(i) for i in range(len(LOWER))])
def test_cuda_schedules_lower_for_sm90(shape, cfg):
    conv = C.lower_source(kernels.get("conv2d").program(shape, "float16", cfg, SM90), SM90)
    for name in ("conv_bn", "conv_bn_relu", "conv_bn_add_relu"):
        src = C.lower_source(kernels.get(name).program(shape, "float16", cfg, SM90), SM90)
        assert "__global__" in src and "Scale" in src and "Shift" in src
        assert ("max(" in src) == (name != "conv_bn") and ("Rs" in src) == (name == "conv_bn_add_relu")
        # The epilogue leaves conv2d's pipeline as it is: the same wgmma, TMA and barriers.
        for op in ("wgmma", "tma_load", "tma_store", "mbarrier", "cp.async"):
            assert src.count(op) == conv.count(op), op


@pytest.mark.slow
@pytest.mark.parametrize("shape,cfg", [LOWER[0], LOWER[2], LOWER[4]], ids=["nchw", "nhwc", "via_nhwc"])
def test_the_residual_comes_in_as_a_tile_with_r_shared(shape, cfg):
    # Per element, the residual is read in the accumulator fragment's layout: 2-byte loads
    # with a clamped index on NCHW (4-byte pairs on channels_last), which cost ResNet-50's
    # conv_bn_add_relu as much again as its convolution on the H100. Staged (`r_shared`),
    # one bounded tile copy reads it in 8- or 16-byte vectors into the output's shared tile.
    fam = kernels.get("conv_bn_add_relu")
    vector = re.compile(r"\*\(uint[24]\*\)\(Rs \+")
    apart = C.lower_source(fam.program(shape, "float16", cfg, SM90), SM90)
    staged = C.lower_source(fam.program(shape, "float16", {**cfg, "r_shared": 1}, SM90), SM90)
    assert "Rs" in apart and not vector.search(apart)
    assert vector.search(staged) and "Rs[" not in staged
    conv = C.lower_source(kernels.get("conv2d").program(shape, "float16", cfg, SM90), SM90)
    for op in ("wgmma", "tma_load", "tma_store"):
        assert staged.count(op) == conv.count(op), op


def test_only_the_residual_family_offers_r_shared_and_only_on_a_gpu():
    shape = RESNET50[1]
    space = kernels.get("conv_bn_add_relu").search_space(shape, "float16", H200)
    assert "r_shared" not in space[0] and [c.get("r_shared") for c in space[1:4]] == [1, 1, 1]
    assert {**space[1], "r_shared": 0} == {**space[0], "r_shared": 0}  # the first config, staged
    assert kernels.get("conv_bn_add_relu").fine_flags == ("r_shared",)
    for name in ("conv_bn", "conv_bn_relu"):
        assert not any("r_shared" in c for c in kernels.get(name).search_space(shape, "float16", H200))
    cpu = Hardware(target="c", device="cpu", name="test cpu", platform="cpu-x86_64", cores=2)
    assert not any("r_shared" in c for c in kernels.get("conv_bn_add_relu").search_space(shape, "float32", cpu))


# ---------------------------------------------------------------- the router


def _trained(model: nn.Module, seed: int = 0) -> nn.Module:
    """Running statistics and affine weights away from their 0/1 initial values."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                K = m.num_features
                m.running_mean.copy_(torch.randn(K, generator=gen) * 0.5)
                m.running_var.copy_(torch.rand(K, generator=gen) + 0.5)
                m.weight.copy_(torch.randn(K, generator=gen) * 0.25 + 1)
                m.bias.copy_(torch.randn(K, generator=gen) * 0.5)
    return model.eval()


def _block() -> nn.Module:
    """torchvision's Bottleneck with its downsample: conv-bn-relu twice, then conv-bn into
    the residual add, and the downsample's conv-bn."""
    torch.manual_seed(0)
    down = nn.Sequential(nn.Conv2d(16, 32, 1, stride=2, bias=False), nn.BatchNorm2d(32))
    return _trained(Bottleneck(16, 8, stride=2, downsample=down))


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_a_bottleneck_runs_its_conv_bn_relu_and_conv_bn_patterns_fused(layout):
    model, x = _block(), torch.randn(2, 16, 9, 9)
    if layout == "channels_last":
        model, x = model.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
    router, got, want = route_model(["conv2d", "conv_bn", "conv_bn_relu"], model, (x,))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert count(router, "conv_bn_relu") == (2, 0)  # conv1-bn1-relu, conv2-bn2-relu
    assert count(router, "conv_bn") == (2, 0)  # conv3-bn3 (then +=), the downsample
    assert count(router, "conv2d") == (0, 0)
    notes = {c.shape: c.notes for c in router.counts() if c.family == "conv2d"}
    nchw = int(layout == "nchw")
    assert notes[f"2x9x9x8x8x3x3x2x1x{nchw}"] == {"fused into conv_bn_relu": 1}
    assert notes[f"2x9x9x16x32x1x1x2x0x{nchw}"] == {"fused into conv_bn": 1}
    assert not router.reused


def test_each_convolution_is_routed_once_for_the_three_patterns_it_may_start(monkeypatch):
    # conv_bn, conv_bn_relu and conv_bn_add_relu all start at the convolution: the router
    # asks one of them (first_by_class) and hands its answer to the other two, so the
    # host time of a routed ResNet pays for one route per convolution, not three.
    calls = []
    plain = CB.CONV2D.route
    monkeypatch.setattr(CB.CONV2D, "route", lambda *a, **k: calls.append(1) or plain(*a, **k))
    model, x = _block(), torch.randn(2, 16, 9, 9)
    router, got, want = route_model(["conv_bn", "conv_bn_relu", "conv_bn_add_relu"], model, (x,))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    calls.clear()
    with torch.inference_mode(), router:
        model(x)
    assert len(calls) == 4  # the block's four convolutions (with the downsample's), once each


def test_with_only_conv_bn_relu_the_other_norms_run_as_written():
    router, got, want = route_model(["conv_bn_relu"], _block(), (torch.randn(2, 16, 9, 9),))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert count(router, "conv_bn_relu") == (2, 0)


class _Reads(nn.Module):
    """conv-bn-relu written out of place, the norm's result and the convolution's read
    again afterwards, and a norm in training form."""

    def __init__(self, case: str):
        super().__init__()
        self.case = case
        self.conv, self.bn = nn.Conv2d(8, 8, 3, padding=1, bias=True), nn.BatchNorm2d(8)

    def forward(self, x):
        c = self.conv(x)
        if self.case == "training":
            return F.relu(F.batch_norm(c, self.bn.running_mean, self.bn.running_var, training=True))
        y = self.bn(c)
        out = F.relu(y)
        return out + y if self.case == "late" else out + c if self.case == "conv" else out


@pytest.mark.parametrize("case,fused", [("plain", 1), ("late", 1), ("conv", 1), ("training", 0)])
def test_later_reads_and_training_norms_stay_correct(case, fused):
    model = _trained(_Reads(case))
    router, got, want = route_model(["conv2d", "conv_bn", "conv_bn_relu"], model, (torch.randn(2, 8, 7, 7),))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert count(router, "conv_bn_relu")[0] == fused, case
    # A later read of the norm's or the convolution's result computes the convolution
    # then (conv2d's kernel), as does a norm in training form.
    assert count(router, "conv2d")[0] == int(case != "plain"), case
    late = int(case in ("late", "conv"))
    assert router.reused == ({("conv_bn_relu", "2x7x7x8x8x3x3x1x1x1"): 1} if late else {}), case


def test_fp16_bottleneck_under_the_router():
    model, x = _block().half(), torch.randn(2, 16, 9, 9).half()
    router, got, want = route_model(["conv_bn", "conv_bn_relu"], model, (x,), dtype="float16")
    torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2)
    assert count(router, "conv_bn_relu") == (2, 0) and count(router, "conv_bn") == (2, 0)


def test_a_bottleneck_joins_its_residual_and_last_relu_into_the_third_convolution():
    model, x = _block(), torch.randn(2, 16, 9, 9)
    router, got, want = route_model(["conv2d", "conv_bn", "conv_bn_relu", "conv_bn_add_relu"], model, (x,))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert count(router, "conv_bn_relu") == (2, 0)
    assert count(router, "conv_bn_add_relu") == (1, 0)  # conv3, bn3, += identity, relu
    assert count(router, "conv_bn") == (1, 0)  # the downsample, the residual it reads
    notes = {c.shape: c.notes for c in router.counts() if c.family == "conv2d"}
    assert notes["2x5x5x8x32x1x1x1x0x1"] == {"fused into conv_bn_add_relu": 1}
    assert not router.reused


class _Basic(nn.Module):
    """torchvision's BasicBlock shape, its residual written in the ways models write it."""

    def __init__(self, case: str):
        super().__init__()
        self.case = case
        self.conv1, self.bn1 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.case == "left":
            return F.relu(out + x)
        if self.case == "right":
            return torch.relu(x + out)
        if self.case == "no_relu":  # the sum is read by something else than a ReLU
            out += x
            return out * 2
        if self.case == "sum_read":  # the sum read again after its ReLU
            s = out + x
            return F.relu(s) - s
        out += x
        return F.relu(out, inplace=True)


@pytest.mark.parametrize("case,fused", [("inplace", 1), ("left", 1), ("right", 1), ("no_relu", 0), ("sum_read", 1)])
def test_a_basic_blocks_residual_in_every_form_stays_correct(case, fused):
    model = _trained(_Basic(case))
    router, got, want = route_model(
        ["conv2d", "conv_bn", "conv_bn_relu", "conv_bn_add_relu"], model, (torch.randn(2, 8, 7, 7),)
    )
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert count(router, "conv_bn_add_relu")[0] == fused, case
    assert count(router, "conv_bn_relu")[0] == 1, case  # conv1-bn1-relu
    if case == "no_relu":  # the pair ran as conv_bn, the add in PyTorch
        assert count(router, "conv_bn") == (1, 0)


@pytest.mark.slow
def test_resnet_tiny_runs_every_conv_bn_in_tilelang():
    model = _trained(load_model("resnet-tiny").module, seed=1)
    x = torch.randn(2, 3, 64, 64)
    router, got, want = route_model(["conv2d", "conv_bn", "conv_bn_relu", "conv_bn_add_relu"], model, (x,))
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)
    # The stem and two per block are conv-bn-relu; the third joins the residual and its
    # ReLU; the downsamples are conv-bn.
    assert count(router, "conv_bn_relu") == (9, 0)
    assert count(router, "conv_bn_add_relu") == (4, 0)
    assert count(router, "conv_bn") == (4, 0)
    assert count(router, "conv2d") == (0, 0)


# ---------------------------------------------------------------- the profile


def test_the_profile_scan_names_the_patterns_shapes():
    model = dataclasses.replace(load_model("resnet-tiny"), module=_block(), inputs=(torch.randn(2, 16, 9, 9),))
    found = {fu.family: fu for fu in profiling.fusions(model, ("conv2d",))}
    assert found["conv_bn_relu"].shapes == ("2x9x9x16x8x1x1x1x0x1", "2x9x9x8x8x3x3x2x1x1")
    assert found["conv_bn_add_relu"].shapes == ("2x5x5x8x32x1x1x1x0x1",)
    assert found["conv_bn"].shapes == ("2x9x9x16x32x1x1x2x0x1",)  # the downsample
    assert not any(fu.reused for fu in found.values())
    selected = profiling.with_fusions(("conv2d",), tuple(found.values()))
    assert selected[0] == "conv2d" and set(selected) == {"conv2d", "conv_bn", "conv_bn_relu", "conv_bn_add_relu"}
