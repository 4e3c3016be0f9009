"""Loaders for models people already have (hf:, timm:, torchvision:) and the fixtures of
real third-party models (tests/fixtures/hf_models.py, tests/fixtures/tv_resnet.py).

In: model specs with tiny configs, and stand-in timm / torchvision modules where the real
ones cannot be imported (here: torchvision does not load beside the CPU torch build, and
timm imports torchvision). Out: assertions on the built models, their example inputs,
the ModelSpec, and that every failure is one ModelLoadError line saying what to do.
"""
import importlib
import sys
import types

import pytest
import torch
from torch import nn

from evaluator.errors import ModelLoadError
from evaluator.models import hub, load_model

transformers = pytest.importorskip("transformers", reason="the hf: loader needs transformers (pip install -e '.[hf]')")
from transformers.utils import ModelOutput  # noqa: E402

TINY = "num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128"
BERT = f"hf:BertModel,{TINY}"
LLAMA = f"hf:LlamaForCausalLM,{TINY},num_attention_heads=4,num_key_value_heads=2,vocab_size=1000"
VIT = f"hf:ViTModel,{TINY},image_size=32,patch_size=8"
FIX = "tests/fixtures/hf_models.py"


def _run(m):
    with torch.inference_mode():
        return m.module(*m.inputs)


def _one_line_error(spec, words, **kw):
    with pytest.raises(ModelLoadError, match=words) as info:
        load_model(spec, **kw)
    assert "\n" not in str(info.value)
    return str(info.value)


# ---------------------------------------------------------------- spec parsing


def test_options_parse_ints_floats_bools_none_and_strings():
    rest = "X,a=2,b=0.5,c=1e-5,d=true,e=False,f=none,g=gelu_new"
    target, opts = hub._split(f"hf:{rest}", rest)
    assert target == "X"
    assert opts == {"a": 2, "b": 0.5, "c": 1e-5, "d": True, "e": False, "f": None, "g": "gelu_new"}
    assert type(opts["a"]) is int and type(opts["d"]) is bool


@pytest.mark.parametrize("spec, words", [
    ("hf:", "names nothing"),
    ("hf:BertModel,hidden_size", "not key=value"),
    ("timm:,img_size=3", "names nothing"),
])
def test_malformed_specs(spec, words):
    _one_line_error(spec, words)


# ---------------------------------------------------------------- hf: architecture classes


def test_hf_bert_from_default_config_with_overrides():
    m = load_model(f"{BERT},max_position_embeddings=64", batch_size=2)
    cfg = m.module.config
    assert type(m.module).__name__ == "BertModel" and m.spec.source == "hf"
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size) == (2, 64, 2, 128)
    assert cfg.vocab_size == 30522  # not overridden: BertConfig()'s default
    assert cfg._attn_implementation == "sdpa"
    # token ids below the vocabulary; the default length 128 capped by the position table
    (ids,) = m.inputs
    assert ids.shape == (2, 64) and ids.dtype == torch.long and int(ids.max()) < cfg.vocab_size
    assert m.spec.seq_len == 64 and m.spec.batch_size == 2
    out = _run(m)
    assert isinstance(out, ModelOutput) and out.last_hidden_state.shape == (2, 64, 64)


def test_hf_default_batch_and_sequence():
    m = load_model(BERT)
    assert m.inputs[0].shape == (8, 128) and (m.spec.batch_size, m.spec.seq_len) == (8, 128)


def test_hf_gpt2_takes_the_common_size_names_through_its_attribute_map():
    m = load_model("hf:GPT2Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,n_inner=128",
                   batch_size=2, seq_len=16)
    assert (m.module.config.n_layer, m.module.config.n_embd) == (2, 64)
    assert type(m.module.h[0].attn.c_attn).__name__ == "Conv1D"  # torch.addmm, not nn.Linear
    assert _run(m).last_hidden_state.shape == (2, 16, 64)


def test_hf_vit_gets_nchw_pixel_values_from_its_config():
    m = load_model(VIT, batch_size=3)
    (x,) = m.inputs
    assert x.shape == (3, 3, 32, 32) and x.is_floating_point() and x.is_contiguous()
    assert not x.is_contiguous(memory_format=torch.channels_last)
    assert m.spec.seq_len is None
    assert _run(m).last_hidden_state.shape == (3, 1 + (32 // 8) ** 2, 64)


def test_hf_causal_lm_returns_logits_without_a_kv_cache():
    m = load_model(LLAMA, batch_size=1, seq_len=16)
    out = _run(m)
    assert isinstance(out, ModelOutput) and out.logits.shape == (1, 16, 1000)
    assert out.get("past_key_values") is None  # use_cache=False: one forward pass, comparable outputs


def test_hf_encoder_decoder_gets_decoder_ids_positionally():
    m = load_model("hf:T5Model,num_layers=1,d_model=32,d_ff=64,num_heads=2,d_kv=16,vocab_size=100",
                   batch_size=2, seq_len=8)
    ids, mask, dec = m.inputs  # forward(input_ids, attention_mask, decoder_input_ids, ...)
    assert ids.shape == dec.shape == (2, 8) and bool((mask == 1).all())
    assert _run(m).last_hidden_state.shape == (2, 8, 32)


def test_hf_models_are_deterministic_for_a_seed():
    a, b, c = load_model(BERT, batch_size=2, seq_len=8), load_model(BERT, batch_size=2, seq_len=8), \
        load_model(BERT, batch_size=2, seq_len=8, seed=1)
    assert torch.equal(_run(a).last_hidden_state, _run(b).last_hidden_state)
    assert a.spec.spec_hash == b.spec.spec_hash == c.spec.spec_hash
    assert not torch.equal(a.module.embeddings.word_embeddings.weight, c.module.embeddings.word_embeddings.weight)


def test_hf_dtype_moves_weights_and_pixels():
    m = load_model(VIT, batch_size=1, dtype="bf16")
    assert m.inputs[0].dtype == torch.bfloat16 and next(m.module.parameters()).dtype == torch.bfloat16
    assert torch.isfinite(_run(m).last_hidden_state.float()).all()


@pytest.mark.parametrize("spec, words", [
    ("hf:BertModle", "did you mean BertModel"),
    ("hf:LlamaForCausalLm", "did you mean LlamaForCausalLM"),
    ("hf:BertConfig", "not a model class .*BertModel"),
    ("hf:PreTrainedModel", "not a model class"),
    ("hf:BertModel,num_hidden_layer=2", "not a field of BertConfig .*num_hidden_layers"),
    ("hf:BertModel,hidden_size=65", "could not build .*multiple"),
    ("hf:google/vit-base-patch16-224", "nothing is downloaded"),
])
def test_hf_errors_are_one_line_and_name_close_matches(spec, words):
    _one_line_error(spec, words)


def test_hf_sequence_longer_than_the_position_table():
    _one_line_error(f"{BERT},max_position_embeddings=32", "exceeds max_position_embeddings=32", seq_len=64)


def test_hf_image_models_take_their_size_from_the_spec_not_seq_len():
    _one_line_error(VIT, "image_size", seq_len=64)


def test_missing_transformers_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    msg = _one_line_error(BERT, "transformers is not installed")
    assert "pip install -e '.[hf]'" in msg


# ---------------------------------------------------------------- hf: local directories


def test_hf_directory_with_config_only_builds_random_weights(tmp_path):
    transformers.BertConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                            architectures=["BertModel"]).save_pretrained(tmp_path)
    m = load_model(f"hf:{tmp_path},num_hidden_layers=2", batch_size=2, seq_len=8)
    assert m.spec.source == "hf" and type(m.module).__name__ == "BertModel"
    assert (m.module.config.hidden_size, m.module.config.num_hidden_layers) == (32, 2)
    assert m.module.config._attn_implementation == "sdpa"
    assert _run(m).last_hidden_state.shape == (2, 8, 32)


def test_hf_directory_with_weights_loads_them(tmp_path):
    torch.manual_seed(3)
    cfg = transformers.BertConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64)
    saved = transformers.BertModel(cfg)
    saved.save_pretrained(tmp_path)
    m = load_model(f"hf:{tmp_path}", batch_size=2, seq_len=8)
    assert torch.equal(m.module.encoder.layer[0].attention.self.query.weight,
                       saved.encoder.layer[0].attention.self.query.weight)


def test_hf_directory_without_config(tmp_path):
    _one_line_error(f"hf:{tmp_path}", "no config.json")


# ---------------------------------------------------------------- timm and torchvision, stand-ins


class _TinyCnn(nn.Module):
    def __init__(self, in_chans=3, num_classes=10):
        super().__init__()
        self.conv = nn.Conv2d(in_chans, 8, 3, padding=1)
        self.fc = nn.Linear(8, num_classes)
        self.pretrained_cfg = {"input_size": (3, 160, 160)}

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


@pytest.fixture
def fake_timm(monkeypatch):
    """A stand-in with timm's API (create_model, is_model, list_models), so the loader's
    own logic is tested where timm cannot be imported."""
    made = {}
    mod = types.ModuleType("timm")
    mod.list_models = lambda: ["resnet18", "resnet50", "vit_small_patch16_224"]
    mod.is_model = lambda name: name.split(".")[0] in mod.list_models()

    def create_model(name, pretrained=False, **kw):
        made.update(name=name, pretrained=pretrained, **kw)
        kw.pop("img_size", None)
        return _TinyCnn(**kw)

    mod.create_model = create_model
    monkeypatch.setitem(sys.modules, "timm", mod)
    return made


def test_timm_loader_builds_without_weights_and_sizes_inputs_from_the_cfg(fake_timm):
    m = load_model("timm:resnet18,num_classes=5", batch_size=2)
    assert fake_timm == {"name": "resnet18", "pretrained": False, "num_classes": 5}
    assert m.spec.source == "timm" and m.inputs[0].shape == (2, 3, 160, 160) and m.inputs[0].is_contiguous()
    assert load_model("timm:resnet18,img_size=48,in_chans=1").inputs[0].shape == (8, 1, 48, 48)


def test_timm_unknown_name_and_seq_len(fake_timm):
    _one_line_error("timm:resnet19", "did you mean resnet18")
    _one_line_error("timm:resnet18", "img_size", seq_len=64)


@pytest.fixture
def fake_torchvision(monkeypatch):
    made = {}
    mod = types.ModuleType("torchvision")
    mod.models = types.SimpleNamespace(list_models=lambda: ["resnet18", "resnet50", "vit_b_16"])

    def get_model(name, weights="DEFAULT", **kw):
        made.update(name=name, weights=weights, **kw)
        return _TinyCnn()

    mod.models.get_model = get_model
    monkeypatch.setitem(sys.modules, "torchvision", mod)
    return made


def test_torchvision_loader_builds_without_weights(fake_torchvision):
    m = load_model("torchvision:resnet18", batch_size=2)
    assert fake_torchvision == {"name": "resnet18", "weights": None}
    assert m.spec.source == "torchvision" and m.inputs[0].shape == (2, 3, 224, 224)
    assert not m.inputs[0].is_contiguous(memory_format=torch.channels_last)
    _one_line_error("torchvision:resnet81", "did you mean resnet18")


@pytest.mark.parametrize("lib, spec", [("timm", "timm:resnet18"), ("torchvision", "torchvision:resnet18")])
def test_missing_timm_or_torchvision_says_what_to_install(monkeypatch, lib, spec):
    monkeypatch.setitem(sys.modules, lib, None)
    msg = _one_line_error(spec, f"{lib} is not installed")
    assert f"pip install -e '.[{lib}]'" in msg


def test_a_library_that_is_installed_but_does_not_import_gives_the_reason(monkeypatch):
    real = importlib.import_module

    def broken(name, *a):
        if name == "timm":
            raise ModuleNotFoundError("No module named 'torchvision'", name="torchvision")
        return real(name, *a)

    monkeypatch.setattr(hub.importlib, "import_module", broken)
    _one_line_error("timm:resnet18", "timm is installed but cannot be imported .*torchvision.*pip install")


# ---------------------------------------------------------------- timm and torchvision, the real ones


def _import_or_skip(lib):
    try:
        return pytest.importorskip(lib, reason=f"{lib} is not installed or does not import beside this torch")
    except pytest.skip.Exception:
        raise
    except Exception as exc:  # e.g. torchvision built for another torch: its C++ ops fail to register
        pytest.skip(f"{lib} does not import here: {type(exc).__name__}")


def test_real_timm_model():
    _import_or_skip("timm")
    m = load_model("timm:resnet18,num_classes=10", batch_size=1)
    assert m.inputs[0].shape == (1, 3, 224, 224)
    assert _run(m).shape == (1, 10)


def test_real_torchvision_model():
    _import_or_skip("torchvision")
    m = load_model("torchvision:resnet18,num_classes=10", batch_size=1)
    assert _run(m).shape == (1, 10)


# ---------------------------------------------------------------- fixtures of real models


@pytest.mark.parametrize("factory, shape", [("bert", (2, 16, 64)), ("gpt2", (2, 16, 64)), ("vit", (2, 17, 64))])
def test_hf_fixtures_load_as_user_factories_and_return_model_outputs(factory, shape):
    m = load_model(f"{FIX}:{factory}")
    assert m.spec.source == "file" and m.module.config._attn_implementation == "sdpa"
    out = _run(m)
    assert isinstance(out, ModelOutput) and out.last_hidden_state.shape == shape
    again = load_model(f"{FIX}:{factory}")
    assert torch.equal(_run(again).last_hidden_state, out.last_hidden_state)


def test_gpt2_fixture_projects_with_addmm():
    from torch.profiler import profile

    m = load_model(f"{FIX}:gpt2", seq_len=8)
    assert m.inputs[0].shape == (2, 8)
    with profile() as prof, torch.inference_mode():
        m.module(*m.inputs)
    names = {e.name for e in prof.events()}
    assert "aten::addmm" in names and "aten::linear" not in names


def test_tv_resnet_fixture_is_a_nchw_resnet18():
    m = load_model("tests/fixtures/tv_resnet.py:resnet")
    assert m.inputs[0].shape == (2, 3, 32, 32) and m.inputs[0].is_contiguous()
    blocks = [type(b).__name__ for b in m.module.modules() if type(b).__name__ == "BasicBlock"]
    assert len(blocks) == 8 and m.spec.parameters == 11_689_512  # torchvision's resnet18
    assert _run(m).shape == (2, 1000)


def test_tv_resnet_copy_matches_torchvision():
    torchvision = _import_or_skip("torchvision")
    sys.path.insert(0, "tests/fixtures")
    try:
        import tv_resnet
    finally:
        sys.path.remove("tests/fixtures")
    torch.manual_seed(0)
    copy = tv_resnet.ResNet(tv_resnet.BasicBlock, [2, 2, 2, 2])
    torch.manual_seed(0)
    real = torchvision.models.resnet18(weights=None)
    a, b = copy.state_dict(), real.state_dict()
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
