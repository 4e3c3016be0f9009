"""Real third-party models whose convolutions are depthwise, grouped or 1-D, built offline
from tiny transformers configs: MobileNetV2 (depthwise 3x3 at stride 1 and 2, after
TensorFlow-style F.pad or with PyTorch padding), ConvNeXt (a 4x4 patch embedding on NCHW,
then depthwise 7x7 and 2x2 downsampling on channels_last tensors), Whisper's encoder (two
conv1d, k3 s1 then s2) and Wav2Vec2 (its feature encoder's conv1d stack on raw audio, and
the grouped positional conv1d on a transposed view, its weight normalised every call).

Under swap.Router with kernels built for every (family, shape) the model calls (the C
target; Whisper's tuned by the tuner), every convolution must run in TileLang, the
outputs must match PyTorch's, and the router's counts must add up to the calls the model
made (counted independently here).

In: the models. Out: pass/fail. Each compiles tens of kernels on the C backend: slow.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from evaluator.measuring import bench
from evaluator.device import hardware
from evaluator import kernels
from evaluator.tuning import search as tuning
from tests.routing import count, route_model


class _Calls(TorchFunctionMode):
    """Counts F.conv1d / F.conv2d calls, whoever makes them."""

    def __init__(self):
        super().__init__()
        self.n = {"conv1d": 0, "conv2d": 0}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.conv1d:
            self.n["conv1d"] += 1
        elif func is F.conv2d:
            self.n["conv2d"] += 1
        return func(*args, **(kwargs or {}))


def calls(model, inputs) -> dict[str, int]:
    spy = _Calls()
    with torch.inference_mode(), spy:
        model.eval()(*inputs)
    return spy.n


def mobilenet_v2(tf_padding: bool):
    from transformers import MobileNetV2Config, MobileNetV2Model

    torch.manual_seed(0)
    model = MobileNetV2Model(MobileNetV2Config(depth_multiplier=0.25, image_size=32, tf_padding=tf_padding))
    return model, (torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0)),)


def convnext():
    from transformers import ConvNextConfig, ConvNextModel

    torch.manual_seed(0)
    model = ConvNextModel(ConvNextConfig(depths=[1, 1], hidden_sizes=[8, 16], num_stages=2, image_size=32))
    return model, (torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0)),)


def whisper_encoder():
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    torch.manual_seed(0)
    config = WhisperConfig(
        d_model=32,
        encoder_layers=1,
        encoder_attention_heads=2,
        encoder_ffn_dim=64,
        num_mel_bins=16,
        max_source_positions=32,
    )
    # input_features [B, num_mel_bins, 2 * max_source_positions]
    return WhisperEncoder(config), (torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(0)),)


def wav2vec2():
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    torch.manual_seed(0)
    config = Wav2Vec2Config(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        conv_dim=[16, 16],
        conv_stride=[5, 2],
        conv_kernel=[10, 3],
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
    )
    return Wav2Vec2Model(config), (torch.randn(2, 4000, generator=torch.Generator().manual_seed(0)),)


def _check(name, make, families, want_calls, depthwise=0, grouped_nlc=0):
    model, inputs = make()
    made = calls(model, inputs)
    assert made == want_calls, made  # the model's own convolutions, counted independently
    router, got, expected = route_model(families, model, inputs)
    check = bench.compare_outputs(got, expected, "float32")
    assert check.ok, (name, check.reason)
    for fam in families:
        # Every call of the family ran in TileLang: none fell back, none unseen.
        assert count(router, fam) == (made[fam], 0), (name, fam, router.counts())
    shapes = [c.shape for c in router.counts() if c.tilelang]
    if depthwise:  # (..., groups == C)
        assert sum(1 for s in shapes if s.count("x") == 10 and s.split("x")[3] == s.split("x")[10]) >= depthwise
    if grouped_nlc:  # conv1d (..., ncl 0, groups)
        assert sum(1 for s in shapes if s.count("x") == 8 and s.split("x")[7] == "0") == grouped_nlc
    return router, shapes


@pytest.mark.slow
@pytest.mark.parametrize("tf_padding", [True, False], ids=["tf-padding", "torch-padding"])
def test_mobilenet_v2_depthwise_runs_in_tilelang(tf_padding):
    _, shapes = _check(
        "mobilenet_v2", lambda: mobilenet_v2(tf_padding), ["conv2d"], {"conv1d": 0, "conv2d": 52}, depthwise=5
    )
    # The depthwise 3x3s at stride 1 and 2: padded by F.pad first (TensorFlow's "SAME",
    # asymmetric at stride 2) or by the convolution itself.
    pad = "0" if tf_padding else "1"
    strides = {s.split("x")[7] for s in shapes if s.count("x") == 10 and s.split("x")[8] == pad}
    assert strides == {"1", "2"}, shapes


@pytest.mark.slow
def test_convnext_depthwise_7x7_on_channels_last_runs_in_tilelang():
    _, shapes = _check("convnext", convnext, ["conv2d"], {"conv1d": 0, "conv2d": 4}, depthwise=2)
    # The patch embedding on NCHW pixels, the rest on the channels_last tensors ConvNeXt makes.
    assert set(shapes) == {
        "2x32x32x3x8x4x4x4x0x1",
        "2x8x8x8x16x2x2x2x0x0",
        "2x8x8x8x8x7x7x1x3x0x8",
        "2x4x4x16x16x7x7x1x3x0x16",
    }


@pytest.mark.slow
def test_whisper_encoder_conv1d_runs_tuned_kernels_in_tilelang():
    from evaluator.routing import router as swap

    model, inputs = whisper_encoder()
    fam = kernels.get("conv1d")
    hw = hardware.detect("cpu")
    table = swap.KernelTable("float32", "c")
    want = [(2, 64, 16, 32, 3, 1, 1, 1), (2, 64, 32, 32, 3, 2, 1, 1)]
    for shape in want:
        tuned, kernel = tuning.tune(fam, shape, "float32", hw, budget_s=20)
        assert kernel is not None and tuned.ok and len(tuned.candidates) > 1, tuned
        table.add("conv1d", shape, tuned.config, kernel)
    router = swap.Router([fam], table, model=model)
    with torch.inference_mode():
        expected = model.eval()(*inputs)
        with router:
            got = model(*inputs)
    assert bench.compare_outputs(got, expected, "float32").ok
    rows = sorted((c.shape, c.tilelang, c.fallback) for c in router.counts())
    assert rows == [("2x64x16x32x3x1x1x1", 1, {}), ("2x64x32x32x3x2x1x1", 1, {})]


@pytest.mark.slow
def test_wav2vec2_feature_encoder_and_grouped_positional_conv_run_in_tilelang():
    # Feature encoder: 10-tap stride-5 on the raw audio (one input channel), 3-tap stride 2;
    # the positional convolution: 16 taps, 2 groups, on the transposed hidden states.
    _, shapes = _check("wav2vec2", wav2vec2, ["conv1d"], {"conv1d": 3, "conv2d": 0}, grouped_nlc=1)
    assert set(shapes) == {"2x399x32x32x16x1x8x0x2", "2x4000x1x16x10x5x0x1", "2x799x16x16x3x2x0x1"}
