"""conv2d's two NCHW schedules that only run on CUDA, against F.conv2d on the GPU: the
1x1 `stream` schedule (weight tile kept in shared memory, pixel tiles streamed through a
pipelined loop) and the via_nhwc path with its TileLang layout changes (x to NHWC, the
channels_last kernel, y back to NCHW), at the sweep's shapes and awkward ones, fp16 and
bf16; and the transposes alone against torch.permute on tails in both tile dims. Then the
grouped schedules (the direct depthwise kernel in both layouts at MobileNetV2's and
ConvNeXt's shapes, the GEMM per group at ResNeXt's) and conv1d (Whisper-base's and
wav2vec2-base's front ends) against PyTorch on the GPU, and a model with depthwise and
1-D convolutions routed on CUDA.

In: a CUDA device (the folder's conftest skips these without one). Out: pass/fail.
Compiling dominates (nvcc, 10-30 s a kernel), so a fixture compiles every kernel the
tests need in parallel first; the tests then hit the in-process cache.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from evaluator import kernels
from evaluator.tuning import verify
from evaluator.kernels.conv2d import layout
from evaluator.kernels import conv2d as conv_module

FAM = conv_module.FAMILY
DTYPES = ("float16", "bfloat16")
# Sweep shapes, then awkward ones: a pixel count that is not a multiple of 8 (no TMA
# on the X rows, a pixel-tile tail), C and K not multiples of 16.
STREAM_SHAPES = [
    (32, 56, 56, 64, 64, 1, 1, 1, 0, 1),
    (32, 56, 56, 64, 256, 1, 1, 1, 0, 1),
    (32, 28, 28, 100, 100, 1, 1, 1, 0, 1),
    (3, 29, 31, 60, 72, 1, 1, 1, 0, 1),
]
VIA_SHAPES = [
    (32, 56, 56, 64, 64, 3, 3, 1, 1, 1),
    (32, 56, 56, 60, 60, 3, 3, 1, 1, 1),
    (32, 28, 28, 64, 64, 3, 3, 1, 1, 1),
    (3, 27, 29, 60, 44, 3, 3, 2, 1, 1),
]
# A stream config for shapes the search space gives none (small images).
STREAM_FALLBACK = {"stream": 132, "block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256}


def stream_configs(shape, dtype, hw):
    return [c for c in FAM.search_space(shape, dtype, hw) if c.get("stream")] or [STREAM_FALLBACK]


def via_config(shape, dtype, hw):
    return next(c for c in FAM.search_space(shape, dtype, hw) if c.get("via_nhwc"))


@pytest.fixture(scope="module")
def precompiled(hw):
    jobs = [(s, d, c) for s in STREAM_SHAPES for d in DTYPES for c in stream_configs(s, d, hw)]
    jobs += [(s, d, via_config(s, d, hw)) for s in VIA_SHAPES for d in DTYPES]

    def build(job):
        try:
            FAM.build(*job, hw.target)
        except Exception:
            pass  # the test that needs it compiles again and reports the error

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(build, jobs))
    return True


def _check(shape, dtype, cfg, hw, seeds=(0, 1)):
    kernel = FAM.build(shape, dtype, cfg, hw.target)
    atol, rtol = FAM.tolerance(dtype, shape)
    for seed in seeds:
        x, w = FAM.make_inputs(shape, dtype, "cuda", seed)
        out = kernel(x, w)
        ref = torch.nn.functional.conv2d(x.float(), w.float(), stride=shape[7], padding=shape[8])
        assert out.shape == ref.shape and out.dtype == x.dtype and out.is_contiguous()
        assert out.abs().max() > 0.1, "output is (nearly) all zeros"
        torch.testing.assert_close(out.float(), ref, atol=atol, rtol=rtol)
        torch.testing.assert_close(out, FAM.reference(x, w), atol=atol, rtol=rtol)
    return kernel


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", STREAM_SHAPES, ids=["64-64", "64-256", "28x28-100", "awkward"])
def test_stream_matches_conv2d(shape, dtype, hw, precompiled):
    for cfg in stream_configs(shape, dtype, hw):
        _check(shape, dtype, cfg, hw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", VIA_SHAPES, ids=["64", "60", "28x28", "awkward-s2"])
def test_via_nhwc_with_tilelang_transposes_matches_conv2d(shape, dtype, hw, precompiled):
    kernel = _check(shape, dtype, via_config(shape, dtype, hw), hw)
    assert isinstance(kernel, layout.ViaChannelsLast)
    assert "batched_transpose" in kernel.source  # the layout changes are TileLang kernels


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dims", [(32, 60, 3136), (32, 3136, 60), (2, 61, 143), (3, 143, 61), (1, 64, 784)])
def test_transpose_matches_permute(dims, dtype, hw):
    kernel = layout.transpose_launcher(*dims, dtype, hw.target)
    x = torch.randn(*dims, device="cuda").to(conv_module.C.torch_dtype(dtype))
    assert torch.equal(kernel(x), x.permute(0, 2, 1))


# Channels_last 1x1s as one GEMM (`gemm`): ResNet-50's two that missed in
# channels_last and an odd one (pixel and channel tails; verify adds tails at multiples of 8).
GEMM_SHAPES = [
    (32, 56, 56, 64, 256, 1, 1, 1, 0, 0),
    (32, 14, 14, 1024, 256, 1, 1, 1, 0, 0),
    (3, 29, 31, 64, 72, 1, 1, 1, 0, 0),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=["56x56-64-256", "14x14-1024-256", "odd"])
def test_gemm_view_matches_conv2d_on_gpu(shape, dtype, hw):
    from evaluator.tuning import verify

    configs = [c for c in FAM.search_space(shape, dtype, hw) if c.get("gemm")]
    assert configs
    for cfg in configs:
        res = verify.verify(FAM, shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, (cfg, [c for c in res.cases if not c.passed])
        assert isinstance(FAM.build(shape, dtype, cfg, hw.target), conv_module.ViaGemm)


# ---------------------------------------------------------------- groups and conv1d

CONV1D = kernels.get("conv1d")
# MobileNetV2 at batch 32 (NCHW as torchvision runs it, and channels_last), ConvNeXt-T's
# 7x7 on its channels_last tensors, a depthwise channel multiplier; odd sizes and
# channel counts come from verify's awkward shape.
DEPTHWISE_SHAPES = [
    (32, 112, 112, 32, 32, 3, 3, 1, 1, 1, 32),
    (32, 56, 56, 144, 144, 3, 3, 2, 1, 1, 144),
    (32, 14, 14, 576, 576, 3, 3, 1, 1, 1, 576),
    (32, 56, 56, 144, 144, 3, 3, 2, 1, 0, 144),
    (32, 14, 14, 576, 576, 3, 3, 1, 1, 0, 576),
    (8, 56, 56, 96, 96, 7, 7, 1, 3, 0, 96),
    (4, 28, 28, 32, 64, 3, 3, 1, 1, 1, 32),
]
# ResNeXt-50 32x4d's grouped 3x3 (4 and 8 channels a group) in both layouts.
GROUPED_SHAPES = [(8, 56, 56, 128, 128, 3, 3, 1, 1, 1, 32), (8, 28, 28, 256, 256, 3, 3, 2, 1, 0, 32)]
# Whisper-base's two front-end convolutions on 3000 frames; wav2vec2-base's first feature
# convolution and its grouped positional one on [N, L, C] memory.
CONV1D_SHAPES = [
    (8, 3000, 80, 512, 3, 1, 1, 1),
    (8, 3000, 512, 512, 3, 2, 1, 1),
    (8, 16000, 1, 512, 10, 5, 0, 1),
    (8, 49, 768, 768, 128, 1, 64, 0, 16),
]


def _verify_first(fam, shape, dtype, hw, n=3):
    configs = fam.search_space(shape, dtype, hw)[:n]
    assert configs, shape
    for cfg in configs:
        res = verify.verify(fam, shape, dtype, cfg, hw.target, "cuda", seeds=(0, 1))
        assert res.passed, (cfg, [c for c in res.cases if not c.passed])


@pytest.fixture(scope="module")
def precompiled_groups(hw):
    jobs = [
        (fam, s, d, c)
        for fam, shapes in ((FAM, DEPTHWISE_SHAPES + GROUPED_SHAPES), (CONV1D, CONV1D_SHAPES))
        for s in shapes
        for d in DTYPES
        for c in fam.search_space(s, d, hw)[:3]
    ]
    jobs += [(fam, fam.awkward_shape(s), d, c) for fam, s, d, c in jobs]

    def build(job):
        fam, shape, dtype, cfg = job
        try:
            fam.build(shape, dtype, cfg, hw.target)
        except Exception:
            pass  # the test that needs it compiles again and reports the error

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(build, jobs))
    return True


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape",
    DEPTHWISE_SHAPES,
    ids=["mnv2-112", "mnv2-56s2", "mnv2-14", "mnv2-56s2-nhwc", "mnv2-14-nhwc", "convnext-7x7-nhwc", "multiplier"],
)
def test_depthwise_direct_matches_conv2d(shape, dtype, hw, precompiled_groups):
    assert all(c.get("direct", True) and "block_C" in c for c in FAM.search_space(shape, dtype, hw))
    _verify_first(FAM, shape, dtype, hw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", GROUPED_SHAPES, ids=["resnext-nchw", "resnext-s2-nhwc"])
def test_grouped_gemm_matches_conv2d(shape, dtype, hw, precompiled_groups):
    _verify_first(FAM, shape, dtype, hw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", CONV1D_SHAPES, ids=["whisper-conv1", "whisper-conv2", "w2v-first", "w2v-pos"])
def test_conv1d_matches_pytorch(shape, dtype, hw, precompiled_groups):
    _verify_first(CONV1D, shape, dtype, hw)


def test_depthwise_and_conv1d_route_on_gpu(hw):
    from tests.routing import count, route_model

    class Net(torch.nn.Module):  # a 1-D front end, then an inverted residual with its depthwise 3x3
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv1d(16, 64, 3, padding=1)
            self.conv2 = torch.nn.Conv1d(64, 64, 3, stride=2, padding=1)
            self.expand = torch.nn.Conv2d(64, 128, 1)
            self.dw = torch.nn.Conv2d(128, 128, 3, stride=2, padding=1, groups=128, bias=False)

        def forward(self, x):
            h = torch.nn.functional.gelu(self.conv2(torch.nn.functional.gelu(self.conv1(x))))
            return self.dw(torch.relu(self.expand(h.view(-1, 64, 8, 8))))

    model = Net().half().cuda().eval()
    x = torch.randn(4, 16, 128, device="cuda", dtype=torch.float16)
    router, got, expected = route_model(["conv1d", "conv2d"], model, (x,), dtype="float16", target=hw.target)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)
    assert count(router, "conv1d") == (2, 0) and count(router, "conv2d") == (2, 0)
