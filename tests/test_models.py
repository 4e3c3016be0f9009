"""The zoo and user factories: load, run, determinism, and the zoo written as plain PyTorch.

In: zoo names and the factories in tests/fixtures/user_model.py. Out: assertions that
models load with the sizes asked for, run deterministically for a seed, keep NCHW
inputs, and contain no helper modules written for the evaluator's sake.
"""

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from evaluator.errors import ModelLoadError
from evaluator.models import ZOO, choose_layout, load_model, zoo

FIXTURE = "tests/fixtures/user_model.py"
TINY = ["bert-tiny", "llama-tiny", "resnet-tiny"]


@pytest.mark.parametrize("name", TINY)
def test_tiny_zoo_models_run_and_are_deterministic(name):
    a = load_model(name)
    b = load_model(name)
    assert a.spec.spec_hash == b.spec.spec_hash and a.spec.source == "zoo"
    with torch.inference_mode():
        out_a, out_b = a.module(*a.inputs), b.module(*b.inputs)
    assert torch.equal(out_a, out_b)
    assert torch.isfinite(out_a).all()
    assert a.spec.parameters > 0


@pytest.mark.parametrize("name", TINY)
def test_another_seed_gives_other_weights_and_inputs(name):
    a, b = load_model(name, seed=0), load_model(name, seed=1)
    assert a.spec.spec_hash == b.spec.spec_hash  # same architecture
    pa, pb = next(a.module.parameters()), next(b.module.parameters())
    assert not torch.equal(pa, pb) and not torch.equal(a.inputs[0], b.inputs[0])


@pytest.mark.slow
def test_real_sizes_are_declared_with_the_right_scale():
    # building bert-base and resnet50 is cheap enough to check their parameter counts
    n = sum(p.numel() for p in ZOO["bert-base"].build().parameters())
    assert 100e6 < n < 120e6
    # torchvision's resnet50 has exactly this many
    assert sum(p.numel() for p in ZOO["resnet50"].build().parameters()) == 25_557_032


@pytest.mark.slow
@pytest.mark.parametrize("name", TINY + ["bert-base", "resnet50"])
def test_zoo_holds_no_helper_modules_for_the_tool(name):
    model = ZOO[name].build()
    names = {type(m).__name__ for m in model.modules()}
    assert not names & {"Attention", "AddNorm"}
    assert not any(hasattr(m, "adds_residual_before_norm") or hasattr(m, "causal") for m in model.modules())
    for m in model.modules():  # no nn.Sequential(nn.Linear, activation) pairs
        if isinstance(m, nn.Sequential):
            assert not any(isinstance(c, nn.Linear) for c in m)
    assert not hasattr(zoo, "Attention") and not hasattr(zoo, "AddNorm")


class _CountSdpa(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.causal: list[bool] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            self.causal.append(bool(kwargs.get("is_causal", False)))
        return func(*args, **kwargs)


@pytest.mark.parametrize("name, causal", [("bert-tiny", False), ("llama-tiny", True)])
def test_attention_is_an_inline_sdpa_call_per_layer(name, causal):
    m = load_model(name, seq_len=16)
    with torch.inference_mode(), _CountSdpa() as seen:
        m.module(*m.inputs)
    assert seen.causal == [causal] * len(m.module.layers)


def test_blocks_are_written_as_people_write_them():
    bert = ZOO["bert-tiny"].build()
    layer = bert.layers[0]
    assert isinstance(layer.mlp.act, nn.GELU) and isinstance(layer.attention.norm, nn.LayerNorm)
    assert {n for n, c in layer.attention.named_children()} == {"query", "key", "value", "out", "norm"}
    llama = ZOO["llama-tiny"].build()
    block = llama.layers[0]
    assert isinstance(block.input_layernorm, nn.RMSNorm) and isinstance(block.mlp.act_fn, nn.SiLU)
    assert {n for n, _ in block.mlp.named_children()} == {"gate_proj", "up_proj", "down_proj", "act_fn"}
    resnet = ZOO["resnet-tiny"].build()
    assert [n for n, _ in resnet.named_children()] == [
        "conv1",
        "bn1",
        "relu",
        "maxpool",
        "layer1",
        "layer2",
        "layer3",
        "layer4",
        "avgpool",
        "fc",
    ]
    assert type(resnet.layer2[0]).__name__ == "Bottleneck" and resnet.layer2[0].conv2.stride == (2, 2)


def test_resnets_run_nchw_as_their_users_pass_them():
    m = load_model("resnet-tiny")
    x = m.inputs[0]
    assert x.shape == (2, 3, 64, 64) and x.is_contiguous()
    assert not x.is_contiguous(memory_format=torch.channels_last)
    assert m.module.conv1.weight.is_contiguous()
    with torch.inference_mode():
        assert m.module.conv1(x).is_contiguous()


@pytest.mark.slow
def test_channels_last_converts_the_model_and_its_image_inputs_and_is_recorded():
    given, cl = load_model("resnet-tiny"), load_model("resnet-tiny", layout="channels-last")
    assert given.spec.layout == "as-given" and cl.spec.layout == "channels-last"
    assert cl.inputs[0].is_contiguous(memory_format=torch.channels_last) and not cl.inputs[0].is_contiguous()
    assert cl.module.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    assert given.spec.spec_hash != cl.spec.spec_hash  # another layout is another comparison
    with torch.inference_mode():
        torch.testing.assert_close(cl.module(*cl.inputs), given.module(*given.inputs))
    # token ids are not images: a transformer loads the same either way
    assert load_model("bert-tiny", layout="channels-last").inputs[0].is_contiguous()


def test_auto_layout_is_channels_last_for_a_convolutional_net_on_a_gpu_only():
    resnet, bert = load_model("resnet-tiny"), load_model("bert-tiny")
    assert load_model("resnet-tiny", layout="auto").spec.layout == "as-given"  # on this CPU
    assert choose_layout("auto", resnet.module, resnet.inputs, "cuda") == "channels-last"
    assert choose_layout("auto", resnet.module, resnet.inputs, "cpu") == "as-given"
    assert choose_layout("auto", bert.module, bert.inputs, "cuda") == "as-given"
    depthwise = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 8, 3, groups=8))
    one_conv = nn.Sequential(nn.Conv2d(3, 8, 16, stride=16), nn.Flatten())  # a ViT's patch embedding
    image = (torch.randn(1, 3, 32, 32),)
    assert choose_layout("auto", depthwise, image, "cuda") == "as-given"
    assert choose_layout("auto", one_conv, image, "cuda") == "as-given"
    assert choose_layout("as-given", resnet.module, resnet.inputs, "cuda") == "as-given"
    assert choose_layout("channels-last", bert.module, bert.inputs, "cpu") == "channels-last"


def test_overrides_change_inputs_and_hash():
    small = load_model("bert-tiny", batch_size=1, seq_len=16)
    assert small.inputs[0].shape == (1, 16)
    assert small.spec.batch_size == 1 and small.spec.seq_len == 16
    assert small.spec.spec_hash != load_model("bert-tiny").spec.spec_hash


def test_low_precision_moves_weights_not_token_ids():
    m = load_model("llama-tiny", seq_len=8, dtype="bf16")
    assert next(m.module.parameters()).dtype == torch.bfloat16 and m.inputs[0].dtype == torch.int64
    with torch.inference_mode():
        assert torch.isfinite(m.module(*m.inputs).float()).all()


def test_file_factory_with_keyword_overrides():
    m = load_model(f"{FIXTURE}:make", batch_size=3)
    assert m.spec.source == "file"
    assert m.inputs[0].shape == (3, 48)


def test_module_factory(monkeypatch):
    monkeypatch.syspath_prepend("tests/fixtures")
    m = load_model("user_model:make")
    assert m.spec.source == "module" and m.spec.batch_size == 4


@pytest.mark.parametrize(
    "spec, words",
    [
        ("nonesuch", "bert-tiny"),
        ("nonesuch", "hf:Class"),
        ("no_such_module_xyz:make", "could not import module"),
        ("tests/fixtures/missing.py:make", "does not exist"),
        (f"{FIXTURE}:nothing", "has no callable"),
        (f"{FIXTURE}:broken", "weights not found"),
        (f"{FIXTURE}:wrong_return", "must return"),
    ],
)
def test_bad_model_specs_say_what_was_expected(spec, words):
    with pytest.raises(ModelLoadError, match=words):
        load_model(spec)


def test_bad_dtype():
    with pytest.raises(ModelLoadError, match="fp32"):
        load_model("bert-tiny", dtype="int8")


def test_zoo_bert_names_its_position_limit():
    # without the check, the position embedding raises IndexError deep in the forward
    with pytest.raises(ModelLoadError) as info:
        load_model("bert-tiny", seq_len=100000)
    assert str(info.value) == "bert-tiny takes at most 512 positions (its position table); --seq-len 100000 is longer"
    assert load_model("bert-tiny", batch_size=1, seq_len=512).inputs[0].shape == (1, 512)
    assert load_model("llama-tiny", seq_len=4096).inputs[0].shape == (1, 4096)  # rotary: no table to outgrow


def test_lengths_reach_a_factory_that_takes_them(tmp_path):
    path = tmp_path / "padded.py"
    path.write_text(
        "import torch\n"
        "def make(seq_len=8, lengths=None):\n"
        "    lo, hi = lengths\n"
        "    mask = (torch.arange(seq_len)[None, :] < torch.tensor([[lo], [hi]])).long()\n"
        "    return torch.nn.Embedding(10, 4), (mask,)\n"
    )
    m = load_model(f"{path}:make", lengths=(2, 5))
    assert m.inputs[0].sum(1).tolist() == [2, 5]
    with pytest.raises(ModelLoadError, match="takes no `lengths`"):
        load_model(f"{FIXTURE}:make", lengths=(2, 5))
    with pytest.raises(ModelLoadError, match="resnet-tiny's forward takes images alone"):
        load_model("resnet-tiny", lengths=(2, 5))
