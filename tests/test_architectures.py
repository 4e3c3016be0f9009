"""Architectures nobody here shaped: every call a kernel family knows is accounted for.

In: tiny configs of third-party architectures (transformers, built offline) and a block
written by hand with `torch.matmul`, `@`, `einsum` and a masked SDPA. Out: each goes
through the whole evaluation with every family that has a kernel chosen; the run
finishes, the outputs match, and for every family the calls the run counts (ran in
TileLang + fell back with a reason) equal the calls PyTorch makes of it in one forward
pass, counted here independently with a TorchFunctionMode of the test's own (fused
variants counted as the base family's call they replace). docs/results/architectures.md
lists what is routed for each.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from evaluator import config as config
from evaluator import kernels, pipeline
from evaluator.models import load_model

pytest.importorskip("transformers")

ARCHITECTURES = {
    "distilbert": ("hf:DistilBertModel,n_layers=2,dim=64,n_heads=2,hidden_dim=128,vocab_size=1000", {}),
    "bert-padded": ("hf:BertModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
                    "vocab_size=1000", {"lengths": "16-32"}),
    "t5-encoder": ("hf:T5EncoderModel,num_layers=2,d_model=64,d_ff=128,num_heads=2,d_kv=32,vocab_size=1000", {}),
    "bart": ("hf:BartModel,d_model=64,encoder_layers=1,decoder_layers=1,encoder_attention_heads=2,"
             "decoder_attention_heads=2,encoder_ffn_dim=128,decoder_ffn_dim=128,vocab_size=1000", {}),
    "mistral-sliding": ("hf:MistralModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,"
                        "num_key_value_heads=2,intermediate_size=128,vocab_size=1000,sliding_window=8", {}),
    "qwen2": ("hf:Qwen2Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,"
              "intermediate_size=128,vocab_size=1000", {}),
    "phi3": ("hf:Phi3Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,"
             "intermediate_size=128,vocab_size=1000,partial_rotary_factor=0.5", {}),
    "gpt-neox": ("hf:GPTNeoXModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
                 "vocab_size=1000,rotary_pct=0.25", {}),
    "gemma": ("hf:GemmaModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,num_key_value_heads=1,"
              "head_dim=32,intermediate_size=128,vocab_size=1000", {}),
    "vit": ("hf:ViTModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
            "image_size=32,patch_size=8", {}),
    "convnext": ("hf:ConvNextModel,depths=[1,1],hidden_sizes=[16,32],image_size=32", {}),
    "mobilenet-v2": ("hf:MobileNetV2Model,depth_multiplier=0.35,image_size=32", {}),
    "whisper-encoder": ("hf:WhisperEncoder,d_model=64,encoder_layers=1,encoder_attention_heads=2,"
                        "encoder_ffn_dim=128,num_mel_bins=16,max_source_positions=32", {}),
    "written-block": ("tests/fixtures/written_block.py:make", {}),
}
SEQ = {"whisper-encoder": None, "vit": None, "convnext": None, "mobilenet-v2": None, "written-block": None}


class Count(TorchFunctionMode):
    """The test's own count of the calls each family knows, by the torch function called."""

    def __init__(self):
        super().__init__()
        self.calls: Counter = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        fam = self.family(func, args, kwargs)
        if fam:
            self.calls[fam] += 1
        return func(*args, **kwargs)

    @staticmethod
    def family(func, args, kwargs) -> str | None:
        if func in (F.linear, torch.addmm, torch.mm):
            return "gemm"
        if func in (torch.matmul, torch.Tensor.matmul, torch.bmm, torch.baddbmm, torch.einsum):
            ops = [a for a in (args[1:] if func is torch.einsum else args) if isinstance(a, torch.Tensor)]
            if func is torch.einsum and len(args) == 2 and isinstance(args[1], (list, tuple)):
                ops = list(args[1])
            if func not in (torch.bmm, torch.baddbmm) and len(ops) == 2 and ops[1].dim() == 2 and ops[0].dim() >= 2:
                return "gemm"
            return "bmm"
        if func is F.scaled_dot_product_attention:
            return "attention"
        if func is F.layer_norm:
            return "layernorm"
        if func is F.rms_norm:
            return "rmsnorm"
        if func in (F.softmax, torch.softmax, torch.Tensor.softmax):
            return "softmax"
        if func in (F.conv1d, F.conv2d):
            return "conv"
        return None


def counted_by_run(e2e) -> Counter:
    """The run's counts per base family: a fused kernel's call is the one base call it replaces."""
    out: Counter = Counter()
    for c in (*e2e.calls, *e2e.not_chosen):
        base = kernels.get(c.family).profile_family if c.family in kernels.REGISTRY else c.family
        base = "conv" if base in ("conv2d", "conv1d") else base
        out[base] += c.tilelang + sum(c.fallback.values())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_every_call_of_every_family_is_accounted_for(arch, tmp_path):
    spec, extra = ARCHITECTURES[arch]
    sizes = dict(batch_size=2) | ({} if arch in SEQ else {"seq_len": 32})
    cfg = config.build(model=spec, device="cpu", ops=20, budget=0, fine_rounds=0, reps=3, soak_seconds=0,
                       pdf=False, compile_mode="none", reports=tmp_path / "reports", **sizes, **extra)
    r = pipeline.run(cfg).result
    e = r.e2e
    assert e is not None and e.swapped is not None, r.stage_errors
    assert e.outputs_match or e.tilelang_calls == 0, e.error
    loaded = load_model(spec, dtype="float32", device="cpu", **sizes,
                        **({"lengths": tuple(int(x) for x in extra["lengths"].split("-"))} if "lengths" in extra
                           else {}))
    with torch.inference_mode(), Count() as mine:
        loaded.module(*loaded.inputs)
    theirs = counted_by_run(e)
    for fam in ("gemm", "bmm", "attention", "layernorm", "rmsnorm", "softmax", "conv"):
        if fam == "bmm" and "bmm" not in kernels.REGISTRY:
            continue
        assert theirs.get(fam, 0) == mine.calls.get(fam, 0), (fam, dict(theirs), dict(mine.calls))
