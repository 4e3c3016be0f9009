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
    rest = "X,a=2,b=0.5,c=1e-5,d=true,e=False,f=none,g=gelu_new,h=.5"
    target, opts = hub._split(f"hf:{rest}", rest)
    assert target == "X"
    assert opts == {"a": 2, "b": 0.5, "c": 1e-5, "d": True, "e": False, "f": None, "g": "gelu_new", "h": 0.5}
    assert type(opts["a"]) is int and type(opts["d"]) is bool


def test_options_parse_json_lists_dicts_and_quoted_strings():
    rest = 'X,depths=[2, 2],heads=[2,4],r={"rope_type":"linear","factor":2.0},s="a,b",t=null,u=[]'
    target, opts = hub._split(f"hf:{rest}", rest)
    assert target == "X"
    assert opts == {
        "depths": [2, 2],
        "heads": [2, 4],
        "r": {"rope_type": "linear", "factor": 2.0},
        "s": "a,b",
        "t": None,
        "u": [],
    }


@pytest.mark.parametrize(
    "spec, words",
    [
        ("hf:", "names nothing"),
        ("hf:BertModel,hidden_size", "not key=value"),
        ("timm:,img_size=3", "names nothing"),
    ],
)
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
    # token ids below the vocabulary; the default length 128 capped by the position table;
    # no attention mask without --lengths: the model runs unpadded, as it does by default
    (ids,) = m.inputs
    assert ids.shape == (2, 64) and ids.dtype == torch.long and int(ids.max()) < cfg.vocab_size
    assert m.spec.seq_len == 64 and m.spec.batch_size == 2
    out = _run(m)
    assert isinstance(out, ModelOutput) and out.last_hidden_state.shape == (2, 64, 64)


def test_hf_default_batch_and_sequence():
    m = load_model(BERT)
    assert m.inputs[0].shape == (8, 128) and (m.spec.batch_size, m.spec.seq_len) == (8, 128)


GPT2 = "hf:GPT2Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,n_inner=128"


def test_hf_gpt2_takes_the_common_size_names_through_its_attribute_map():
    m = load_model(GPT2, batch_size=2, seq_len=16)
    assert (m.module.config.n_layer, m.module.config.n_embd) == (2, 64)
    # token ids alone: GPT2Model itself, called positionally
    assert type(m.module).__name__ == "GPT2Model" and len(m.inputs) == 1
    assert type(m.module.h[0].attn.c_attn).__name__ == "Conv1D"  # torch.addmm, not nn.Linear
    # under --lengths its mask goes by name (forward(input_ids, cache, attention_mask, ...))
    padded = load_model(GPT2, batch_size=2, seq_len=16, lengths=(8, 16))
    assert isinstance(padded.module, hub.KeywordCall) and padded.module.names == ("input_ids", "attention_mask")
    gpt2 = padded.module.model
    assert type(gpt2).__name__ == "GPT2Model" and any(mod is gpt2 for mod in padded.module.modules())
    assert _run(padded).last_hidden_state.shape == (2, 16, 64)
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
    m = load_model(
        "hf:T5Model,num_layers=1,d_model=32,d_ff=64,num_heads=2,d_kv=16,vocab_size=100", batch_size=2, seq_len=8
    )
    ids, dec = m.inputs  # forward(input_ids, attention_mask, decoder_input_ids, ...): by name
    assert isinstance(m.module, hub.KeywordCall) and m.module.names == ("input_ids", "decoder_input_ids")
    assert ids.shape == dec.shape == (2, 8)
    assert _run(m).last_hidden_state.shape == (2, 8, 32)


def test_hf_models_are_deterministic_for_a_seed():
    a, b, c = (
        load_model(BERT, batch_size=2, seq_len=8),
        load_model(BERT, batch_size=2, seq_len=8),
        load_model(BERT, batch_size=2, seq_len=8, seed=1),
    )
    assert torch.equal(_run(a).last_hidden_state, _run(b).last_hidden_state)
    assert a.spec.spec_hash == b.spec.spec_hash == c.spec.spec_hash
    assert not torch.equal(a.module.embeddings.word_embeddings.weight, c.module.embeddings.word_embeddings.weight)


def test_hf_dtype_moves_weights_and_pixels():
    m = load_model(VIT, batch_size=1, dtype="bf16")
    assert m.inputs[0].dtype == torch.bfloat16 and next(m.module.parameters()).dtype == torch.bfloat16
    assert torch.isfinite(_run(m).last_hidden_state.float()).all()


@pytest.mark.parametrize(
    "spec, words",
    [
        ("hf:BertModle", "did you mean BertModel"),
        ("hf:LlamaForCausalLm", "did you mean LlamaForCausalLM"),
        ("hf:BertConfig", "not a model class .*BertModel"),
        ("hf:PreTrainedModel", "not a model class"),
        ("hf:BertModel,num_hidden_layer=2", "not a field of BertConfig .*num_hidden_layers"),
        ("hf:BertModel,hidden_size=65", "could not build .*multiple"),
        # BERT's default pad_token_id (0) fits any vocab; ModernBERT's 50283 does not
        (
            "hf:ModernBertModel,num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64,"
            "vocab_size=1000",
            "pad_token_id is 50283, the config's default, not below vocab_size 1000: give pad_token_id=0",
        ),
        ("hf:google/vit-base-patch16-224", "nothing is downloaded"),
    ],
)
def test_hf_errors_are_one_line_and_name_close_matches(spec, words):
    _one_line_error(spec, words)


def test_hf_sequence_longer_than_the_position_table():
    msg = _one_line_error(BERT, "takes at most", seq_len=100000)
    assert msg.startswith(
        "hf:BertModel takes at most 512 positions (max_position_embeddings); --seq-len 100000 is longer"
    )
    # GPT-2 names its table n_positions (max_position_embeddings is an alias of it)
    _one_line_error(f"{GPT2},n_positions=32", r"hf:GPT2Model takes at most 32 positions \(n_positions\)", seq_len=64)


def test_hf_image_models_take_their_size_from_the_spec_not_seq_len():
    _one_line_error(VIT, "image_size", seq_len=64)


def test_hf_a_convnet_without_image_size_in_its_config_takes_one_in_the_spec():
    # ResNetConfig has no image_size: the spec's sets the example images' side, as the
    # --seq-len message says it does.
    m = load_model("hf:ResNetModel,embedding_size=8,hidden_sizes=[8,16],depths=[1,1],image_size=32", batch_size=2)
    assert tuple(m.inputs[0].shape) == (2, 3, 32, 32)


def test_missing_transformers_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    msg = _one_line_error(BERT, "transformers is not installed")
    assert "pip install -e '.[hf]'" in msg


# ---------------------------------------------------------------- hf: configs built by their constructors


SWIN = "hf:SwinModel,embed_dim=32,depths=[1,1],num_heads=[2,4],image_size=64,window_size=4"
ROPE = "num_hidden_layers=1,hidden_size=64,num_attention_heads=4,intermediate_size=128"


def test_hf_list_values_reach_the_config():
    m = load_model(SWIN, batch_size=2)
    assert m.module.config.depths == [1, 1] and m.module.config.num_heads == [2, 4]
    assert len(m.module.encoder.layers) == 2
    assert _run(m).last_hidden_state.shape == (2, (64 // 4 // 2) ** 2, 64)  # two stages: one merge


def test_hf_phi3_partial_rotary_factor():
    m = load_model(f"hf:Phi3Model,{ROPE},num_key_value_heads=2,partial_rotary_factor=0.5", batch_size=1, seq_len=8)
    assert m.module.config.rope_parameters["partial_rotary_factor"] == 0.5
    assert m.module.rotary_emb.inv_freq.numel() == 16 * 0.5 / 2  # head_dim 16, half of it rotated
    assert _run(m).last_hidden_state.shape == (1, 8, 64)


def test_hf_gpt_neox_rotary_pct_is_taken_into_rope_parameters():
    # GPTNeoXConfig's constructor takes rotary_pct from **kwargs and keeps no attribute of that name
    m = load_model(f"hf:GPTNeoXModel,{ROPE},rotary_pct=0.5", batch_size=1, seq_len=8)
    assert not hasattr(m.module.config, "rotary_pct")
    assert m.module.config.rope_parameters["partial_rotary_factor"] == 0.5
    assert m.module.rotary_emb.inv_freq.numel() == 16 * 0.5 / 2  # the default 0.25 gives 2
    assert _run(m).last_hidden_state.shape == (1, 8, 64)


def test_hf_deberta_v2_position_buckets_an_attribute_only_the_model_reads():
    m = load_model(f"hf:DebertaV2Model,{ROPE},relative_attention=true,position_buckets=16", batch_size=2, seq_len=8)
    assert m.module.config.position_buckets == 16
    assert m.module.encoder.rel_embeddings.weight.shape[0] == 2 * 16  # 2 * max_position_embeddings without it
    assert _run(m).last_hidden_state.shape == (2, 8, 64)


@pytest.mark.slow
def test_hf_an_alias_the_model_never_reads_is_an_error():
    msg = _one_line_error("hf:SwinModel,num_hidden_layers=2", "changed nothing")
    assert msg.startswith(
        "hf:SwinModel: num_hidden_layers=2 changed nothing (SwinModel never reads num_layers; "
        "SwinConfig derives it from depths: give depths=[...] instead)"
    )


def test_hf_a_value_the_config_does_not_hold_is_an_error():
    # num_hidden_layers is GPT-2's alias of n_layer; the constructor sets it after the field
    msg = _one_line_error(f"{GPT2},n_layer=1", "did not hold")
    assert msg.startswith("hf:GPT2Model: n_layer=1 did not hold (GPT2Config has n_layer=2)")


def test_hf_a_dict_value_holds_key_by_key():
    # the config adds its own defaults (rope_theta) to the rope_parameters given
    m = load_model(
        f'hf:LlamaModel,{ROPE},rope_parameters={{"rope_type":"linear","factor":2.0}}', batch_size=1, seq_len=8
    )
    assert m.module.config.rope_parameters["factor"] == 2.0 and "rope_theta" in m.module.config.rope_parameters
    assert _run(m).last_hidden_state.shape == (1, 8, 64)


@pytest.mark.parametrize(
    "spec, words",
    [
        ("hf:WhisperEncodr", "did you mean WhisperEncoder"),
        ("hf:SwinModel,depth=[1,1]", "not a field of SwinConfig .*depths"),
    ],
)
def test_hf_names_inside_model_modules_and_key_typos_get_close_matches(spec, words):
    _one_line_error(spec, words)


# ---------------------------------------------------------------- hf: inputs from forward and config


WHISPER = (
    "d_model=32,encoder_layers=1,decoder_layers=1,encoder_attention_heads=2,decoder_attention_heads=2,"
    "encoder_ffn_dim=64,decoder_ffn_dim=64,num_mel_bins=16,max_source_positions=32,max_target_positions=24"
)


def test_hf_whisper_gets_log_mel_features_and_decoder_ids():
    m = load_model(f"hf:WhisperModel,{WHISPER}", batch_size=2)
    feats, dec = m.inputs  # forward(input_features, attention_mask, decoder_input_ids, ...): by name
    assert feats.shape == (2, 16, 64) and feats.is_floating_point()  # 2 x max_source_positions frames
    assert dec.shape == (2, 24) and m.spec.seq_len == 24  # capped by max_target_positions
    out = _run(m)
    assert out.last_hidden_state.shape == (2, 24, 32) and out.encoder_last_hidden_state.shape == (2, 32, 32)
    _one_line_error(f"hf:WhisperModel,{WHISPER}", r"at most 24 positions \(max_target_positions\)", seq_len=25)


def test_hf_whisper_encoder_is_found_in_its_modeling_module():
    m = load_model(f"hf:WhisperEncoder,{WHISPER}", batch_size=2)
    assert type(m.module).__module__ == "transformers.models.whisper.modeling_whisper"
    assert [t.shape for t in m.inputs] == [(2, 16, 64)] and m.spec.seq_len is None
    assert _run(m).last_hidden_state.shape == (2, 32, 32)
    _one_line_error(f"hf:WhisperEncoder,{WHISPER}", "max_source_positions", seq_len=64)


def test_hf_wav2vec2_gets_raw_audio():
    spec = (
        "hf:Wav2Vec2Model,hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64,"
        "conv_dim=[16,16],conv_stride=[5,2],conv_kernel=[10,3],num_conv_pos_embeddings=16,"
        "num_conv_pos_embedding_groups=2"
    )
    m = load_model(spec, batch_size=2, seq_len=4000)
    (audio,) = m.inputs
    assert audio.shape == (2, 4000) and audio.is_floating_point()
    assert _run(m).last_hidden_state.shape == (2, 399, 32)  # (4000 - 10) // 5 + 1 = 799, then (799 - 3) // 2 + 1
    _one_line_error(spec, "too few audio samples", seq_len=8)


@pytest.mark.parametrize(
    "spec",
    [
        (
            "hf:BartModel,d_model=32,encoder_layers=1,decoder_layers=1,encoder_attention_heads=2,decoder_attention_heads=2,"
            "encoder_ffn_dim=64,decoder_ffn_dim=64"
        ),
        "hf:T5Model,num_layers=1,d_model=32,d_ff=64,num_heads=2,d_kv=16",
    ],
)
def test_hf_encoder_decoders_get_decoder_input_ids(spec):
    m = load_model(spec, batch_size=2, seq_len=8)
    ids, dec = m.inputs  # forward(input_ids, attention_mask, decoder_input_ids, ...): by name
    assert ids.shape == dec.shape == (2, 8) and isinstance(m.module, hub.KeywordCall)
    out = _run(m)
    assert out.last_hidden_state.shape == (2, 8, 32) and out.encoder_last_hidden_state.shape == (2, 8, 32)


# ---------------------------------------------------------------- --lengths: padded batches


def test_lengths_pad_each_row_behind_the_attention_mask():
    m = load_model(f"{BERT},pad_token_id=0", batch_size=16, seq_len=12, lengths=(3, 9), seed=4)
    ids, mask = m.inputs
    counts = mask.sum(1)
    assert mask.shape == (16, 12) and set(mask.unique().tolist()) <= {0, 1}
    assert int(counts.min()) >= 3 and int(counts.max()) <= 9 and len(set(counts.tolist())) > 1
    assert all(bool((mask[i, :n] == 1).all()) and bool((mask[i, n:] == 0).all()) for i, n in enumerate(counts.tolist()))
    assert bool((ids[mask == 0] == 0).all())  # padding is the pad token
    again = load_model(f"{BERT},pad_token_id=0", batch_size=16, seq_len=12, lengths=(3, 9), seed=4)
    assert torch.equal(again.inputs[1], mask)  # seeded
    # the mask is honoured: a padded row's tokens see what they see unpadded
    out = _run(m).last_hidden_state
    n = int(counts[0])
    with torch.inference_mode():
        alone = m.module(ids[:1, :n], mask[:1, :n]).last_hidden_state
    torch.testing.assert_close(out[:1, :n], alone, atol=1e-5, rtol=1e-5)


def test_lengths_reach_a_model_whose_mask_goes_by_name():
    m = load_model(GPT2, batch_size=8, seq_len=16, lengths=(4, 12))
    _, mask = m.inputs
    assert isinstance(m.module, hub.KeywordCall) and mask.sum(1).min() >= 4 and mask.sum(1).max() <= 12
    assert _run(m).last_hidden_state.shape == (8, 16, 64)


def test_lengths_errors():
    _one_line_error(
        "hf:FNetModel,num_hidden_layers=1,hidden_size=32,intermediate_size=64",
        "FNetModel.forward takes no attention_mask",
        lengths=(2, 4),
        seq_len=8,
    )
    _one_line_error(VIT, "its input is pixel_values", lengths=(2, 4))
    _one_line_error(
        BERT, r"--lengths 2-64 is longer than the sequence of hf:BertModel \(16\)", seq_len=16, lengths=(2, 64)
    )
    _one_line_error("bert-tiny", "bert-tiny's forward takes token ids alone", lengths=(2, 4))
    _one_line_error(f"{FIX}:bert", "takes no `lengths`", lengths=(2, 4))


@pytest.mark.parametrize(
    "value, words",
    [
        ("5-3", "LO must be at least 1 and at most HI"),
        ("0-3", "LO must be at least 1"),
        ("4-64", "HI 64 is longer than --seq-len 32"),
        ("16", "is not LO-HI"),
    ],
)
def test_lengths_option_is_checked_at_the_edge(value, words):
    from evaluator import config as config
    from evaluator.errors import ConfigError

    with pytest.raises(ConfigError, match=words) as info:
        config.parse_lengths(value, 32)
    assert "\n" not in str(info.value)
    assert config.parse_lengths("4-32", 32) == (4, 32) and config.parse_lengths(None, 32) is None


# ---------------------------------------------------------------- hf: local directories


def test_hf_directory_with_config_only_builds_random_weights(tmp_path):
    transformers.BertConfig(
        num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64, architectures=["BertModel"]
    ).save_pretrained(tmp_path)
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
    assert torch.equal(
        m.module.encoder.layer[0].attention.self.query.weight, saved.encoder.layer[0].attention.self.query.weight
    )


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
