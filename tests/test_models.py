import pytest
import torch

from evaluator.errors import ModelLoadError
from evaluator.models import ZOO, load_model

FIXTURE = "tests/fixtures/user_model.py"


@pytest.mark.parametrize("name", ["bert-tiny", "llama-tiny", "resnet-tiny"])
def test_tiny_zoo_models_run_and_are_deterministic(name):
    a = load_model(name)
    b = load_model(name)
    assert a.spec.spec_hash == b.spec.spec_hash
    with torch.inference_mode():
        out_a, out_b = a.module(*a.inputs), b.module(*b.inputs)
    assert torch.equal(out_a, out_b)
    assert torch.isfinite(out_a).all()
    assert a.spec.parameters > 0


def test_real_sizes_are_declared_with_the_right_scale():
    # building bert-base and llama is cheap enough to check their parameter counts
    n = sum(p.numel() for p in ZOO["bert-base"].build().parameters())
    assert 100e6 < n < 120e6


def test_overrides_change_inputs_and_hash():
    small = load_model("bert-tiny", batch_size=1, seq_len=16)
    assert small.inputs[0].shape == (1, 16)
    assert small.spec.batch_size == 1 and small.spec.seq_len == 16
    assert small.spec.spec_hash != load_model("bert-tiny").spec.spec_hash


def test_file_factory_with_keyword_overrides():
    m = load_model(f"{FIXTURE}:make", batch_size=3)
    assert m.spec.source == "file"
    assert m.inputs[0].shape == (3, 48)


def test_module_factory(monkeypatch):
    monkeypatch.syspath_prepend("tests/fixtures")
    m = load_model("user_model:make")
    assert m.spec.source == "module" and m.spec.batch_size == 4


@pytest.mark.parametrize("spec, words", [
    ("nonesuch", "bert-tiny"),
    ("no_such_module_xyz:make", "could not import module"),
    ("tests/fixtures/missing.py:make", "does not exist"),
    (f"{FIXTURE}:nothing", "has no callable"),
    (f"{FIXTURE}:broken", "weights not found"),
    (f"{FIXTURE}:wrong_return", "must return"),
])
def test_bad_model_specs_say_what_was_expected(spec, words):
    with pytest.raises(ModelLoadError, match=words):
        load_model(spec)


def test_bad_dtype():
    with pytest.raises(ModelLoadError, match="fp32"):
        load_model("bert-tiny", dtype="int8")


def test_resnets_run_channels_last_so_swapped_convs_need_no_transposes():
    m = load_model("resnet-tiny")
    x = m.inputs[0]
    assert x.is_contiguous(memory_format=torch.channels_last)
    assert x.permute(0, 2, 3, 1).is_contiguous()  # the NHWC view the conv2d kernel reads
    conv = m.module.stem[0]
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        assert m.module.stem(x).is_contiguous(memory_format=torch.channels_last)
