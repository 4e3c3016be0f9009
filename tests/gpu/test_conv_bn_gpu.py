"""conv_bn, conv_bn_relu and conv_bn_add_relu on CUDA: the first configs of the search
space (NCHW through the channels_last kernel for a 3x3, the NCHW GEMM for a 1x1,
channels_last) against PyTorch's conv2d -> batch_norm(eval) (-> relu; -> add -> relu) on
the GPU at ResNet-50's shapes and awkward ones, fp16 and bf16 (conv_bn_add_relu's second
config is its first with the residual read as one tile, `r_shared`); then torchvision's
Bottleneck routed on CUDA, its four conv-bn patterns run fused; and every config that
reads the pixel tile by one tile copy (`a_copy`), with conv2d's, on channels_last tails.

In: a CUDA device (the folder's conftest skips these without one). Out: pass/fail.
Compiling dominates (nvcc), so a fixture compiles every kernel the tests need in
parallel first; the tests then hit the in-process cache.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import torch.nn as nn

from evaluator import kernels
from evaluator.models.zoo import Bottleneck
from evaluator.tuning import verify
from tests.routing import count, route_model

DTYPES = ("float16", "bfloat16")
SHAPES = [
    (32, 56, 56, 64, 64, 3, 3, 1, 1, 1),  # ResNet-50 layer1's 3x3 (via_nhwc first)
    (32, 56, 56, 64, 256, 1, 1, 1, 0, 1),  # its expanding 1x1
    (32, 14, 14, 1024, 256, 1, 1, 1, 0, 0),  # layer3's reducing 1x1, channels_last
    (32, 224, 224, 3, 64, 7, 7, 2, 3, 1),  # the stem
    (3, 27, 29, 60, 44, 3, 3, 2, 1, 1),  # tails everywhere, NCHW
    (3, 27, 29, 60, 44, 3, 3, 2, 1, 0),  # and channels_last
]
FAMILIES = ("conv_bn", "conv_bn_relu", "conv_bn_add_relu")


def configs(fam, shape, dtype, hw):
    return fam.search_space(shape, dtype, hw)[:2]


@pytest.fixture(scope="module")
def precompiled(hw):
    jobs = [
        (kernels.get(f), s, d, c)
        for f in FAMILIES
        for s in SHAPES
        for d in DTYPES
        for c in configs(kernels.get(f), s, d, hw)
    ]

    def build(job):
        fam, *rest = job
        try:
            fam.build(*rest, hw.target)
        except Exception:
            pass  # the test that needs it compiles again and reports the error

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(build, jobs))
    return True


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_pytorch_on_the_gpu(precompiled, hw, family, dtype, shape):
    fam = kernels.get(family)
    space = configs(fam, shape, dtype, hw)
    assert space, f"{family} offers no CUDA config for {shape}"
    atol, rtol = fam.tolerance(dtype, shape)
    for cfg in space:
        kernel = fam.build(shape, dtype, cfg, hw.target)
        for seed in (0, 1):
            ins = fam.make_inputs(shape, dtype, "cuda", seed)
            out, ref = kernel(*ins), fam.reference(*ins)
            assert out.shape == ref.shape and out.dtype == ref.dtype
            torch.testing.assert_close(out.float(), ref.float(), atol=atol, rtol=rtol, msg=lambda m: f"{cfg}: {m}")


def test_a_bottleneck_routed_on_cuda_runs_its_patterns_fused():
    torch.manual_seed(0)
    down = nn.Sequential(nn.Conv2d(64, 128, 1, stride=2, bias=False), nn.BatchNorm2d(128))
    model = Bottleneck(64, 32, stride=2, downsample=down).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.normal_(1, 0.25)
                m.bias.normal_(0, 0.5)
    model = model.half().cuda()
    x = torch.randn(4, 64, 28, 28, device="cuda", dtype=torch.float16)
    fams = ["conv_bn", "conv_bn_relu", "conv_bn_add_relu"]
    router, got, want = route_model(fams, model, (x,), dtype="float16", target="cuda")
    torch.testing.assert_close(got.float(), want.float(), atol=3e-2, rtol=3e-2)
    assert count(router, "conv_bn_relu") == (2, 0)
    assert count(router, "conv_bn_add_relu") == (1, 0) and count(router, "conv_bn") == (1, 0)


# Channels_last shapes whose pixel tile one tile copy reads (conv2d's `a_copy`, offered
# from 128 input and output channels): a 1x1's rows of X, a 3x3's im2col (TMA's mode on
# Hopper), stride 2 too; pixel counts off every tile (7x7 and 27x29 images), and verify's
# own nearby shape adds output-channel tails.
A_COPY_SHAPES = [
    (4, 14, 14, 256, 1024, 1, 1, 1, 0, 0),
    (2, 7, 7, 512, 2048, 1, 1, 1, 0, 0),
    (3, 27, 29, 128, 136, 3, 3, 1, 1, 0),
    (3, 27, 29, 128, 136, 3, 3, 2, 1, 0),
]


def a_copy_configs(fam, shape, hw):
    return [c for c in fam.search_space(shape, "float16", hw) if c.get("a_copy")]


@pytest.fixture(scope="module")
def a_copy_built(hw):
    jobs = []
    for f in ("conv2d", *FAMILIES):
        fam = kernels.get(f)
        for s in A_COPY_SHAPES:
            for c in a_copy_configs(fam, s, hw):
                jobs += [(fam, s, c), (fam, verify.awkward_for(fam, s, "float16", c, hw.target), c)]

    def build(job):
        fam, shape, cfg = job
        try:
            fam.build(shape, "float16", cfg, hw.target)
        except Exception:
            pass  # the test that needs it compiles again and reports the error

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(build, jobs))
    return True


@pytest.mark.parametrize("family", ("conv2d", *FAMILIES))
@pytest.mark.parametrize("shape", A_COPY_SHAPES, ids=str)
def test_a_copy_configs_match_pytorch_on_the_gpu(a_copy_built, hopper_hw, family, shape):
    fam = kernels.get(family)
    space = a_copy_configs(fam, shape, hopper_hw)
    assert space, f"{family} offers no a_copy config for {shape}"
    for cfg in space:
        res = verify.verify(fam, shape, "float16", cfg, hopper_hw.target, "cuda", seeds=(0, 1))
        assert res.passed, (cfg, [c for c in res.cases if not c.passed])
