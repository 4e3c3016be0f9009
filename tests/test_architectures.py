"""Architectures nobody here shaped: every call a kernel family knows is accounted for.

In: tiny configs of third-party architectures (transformers, built offline) and a block
written by hand with `torch.matmul`, `@`, `einsum` and a masked SDPA. Out: each goes
through the whole evaluation with every family that has a kernel chosen; the run
finishes, the outputs match, and for every family the calls the run counts (ran in
TileLang + fell back with a reason) equal the calls PyTorch makes of it in one forward
pass, counted here independently with a TorchFunctionMode of the test's own (fused
variants counted as the base family's call they replace). docs/results.md lists what is routed for each
(`python3 benchmarks/architectures.py`).
"""

from __future__ import annotations

import contextlib
import re
import sys
from types import FunctionType
from pathlib import Path
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from evaluator import config as config
from evaluator import kernels, pipeline
from evaluator.models import load_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from architectures import ARCHITECTURES, MORE, SEQ  # noqa: E402  (the benchmark's lists, one place)

# MobileViT tunes and renders 69 distinct kernel shapes, about two minutes cold on two
# cores: `python3 benchmarks/architectures.py --more` runs it; the suite leaves it out.
OUTSIDE_CI = {"mobilevit"}
# Over 15 s here on two cores: BEiT (its relative position bias is SDPA's float mask, as
# Swin's is), ResNet as given and channels_last (regnet-cl takes the same in-place
# residual and layout).
OUTSIDE_CI |= {"beit", "resnet", "resnet-cl"}
# Under 15 s, but each reaches its families by a path another entry covers, and the
# suite's time is short: RegNet as given (regnet-cl), ConvNeXt and EfficientNet
# channels_last (convnext, efficientnet, regnet-cl), Phi and StableLM (phi3's and
# gpt-neox's partial rotary), Persimmon (the same, with LayerNorm on q and k), XLM-RoBERTa
# (bert), DINOv2 (vit), HuBERT (wav2vec2), Data2VecVision (BEiT).
OUTSIDE_CI |= {"regnet", "convnext-cl", "efficientnet-cl", "phi", "stablelm", "xlm-roberta", "dinov2"}
OUTSIDE_CI |= {"persimmon", "hubert", "data2vec-vision"}
# The suite's 15 minutes: MPT (bloom's ALiBi through baddbmm), WavLM (wav2vec2's front
# end; its gated bias is deberta's batched products) and EfficientNet (mobilenet-v2's
# depthwise convolutions; its string paddings are tests/test_profiling.py's).
OUTSIDE_CI |= {"mpt", "wavlm", "efficientnet"}
# The suite's 15 minutes again: the third batch runs by `benchmarks/architectures.py`; what
# it found has unit tests of its own (tests/test_written.py: a rotary call naming its
# default, a norm's layout kept whether routed or not, a norm on another dtype, a written
# LayerNorm; tests/kernels/test_bmm.py: an einsum by a weight over several letters).
OUTSIDE_CI |= {
    "qwen3", "qwen3-moe", "qwen2-moe", "olmo2", "cohere", "gemma3-text", "deepseek-v3", "deepseek-v2",
    "modernbert", "siglip-vision", "convnextv2", "gpt-neo", "codegen", "squeezebert", "mpnet", "electra",
    "pegasus", "mamba", "levit", "poolformer", "funnel", "xlnet",
}  # fmt: skip
ALL = {name: spec for name, spec in {**ARCHITECTURES, **MORE}.items() if name not in OUTSIDE_CI}

pytest.importorskip("transformers")


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
        if func is F.multi_head_attention_forward:  # one call to a mode: count the calls in its body
            body = FunctionType(
                func.__code__, dict(func.__globals__, has_torch_function=lambda *_: False), None, func.__defaults__
            )
            body.__kwdefaults__ = func.__kwdefaults__
            with self:
                return body(*args, **kwargs)
        return func(*args, **kwargs)

    @staticmethod
    def family(func, args, kwargs) -> str | None:
        # Functions and Tensor methods alike: `b.addmm(x, W)` and `alibi.baddbmm(q, k)`
        # arrive as Tensor.addmm / Tensor.baddbmm.
        if func in (F.linear, torch.addmm, torch.mm, torch.Tensor.addmm, torch.Tensor.mm):
            return "gemm"
        if func is getattr(torch, "_grouped_mm", None):  # F.grouped_mm's body: a mixture of experts' GEMMs
            return "grouped_gemm"
        batched = (torch.bmm, torch.baddbmm, torch.Tensor.bmm, torch.Tensor.baddbmm)
        if func in (torch.matmul, torch.Tensor.matmul, torch.linalg.matmul, torch.einsum, *batched):
            ops = [a for a in (args[1:] if func is torch.einsum else args) if isinstance(a, torch.Tensor)]
            if func is torch.einsum and len(args) == 2 and isinstance(args[1], (list, tuple)):
                ops = list(args[1])
            if func not in batched and len(ops) == 2 and ops[1].dim() == 2 and ops[0].dim() >= 2:
                return "gemm"
            if func is torch.einsum and len(ops) == 2 and "->" in args[0]:
                # x by a weight whose columns or rows span several letters ("td,dnh->tnh",
                # "ibnd,hnd->ibh"): the shared letters end x and one end of the weight, in
                # x's order, and the weight's others end the output
                (a, b), out = args[0].replace(" ", "").split("->")[0].split(","), args[0].split("->")[1].strip()
                k = "".join(c for c in a if c in b)
                n = "".join(c for c in b if c not in k)
                if k and n and a.endswith(k) and b in (k + n, n + k) and out == a[: -len(k)] + n:
                    return "gemm"
            return "bmm"
        if func is F.scaled_dot_product_attention:
            return "attention"
        if func in (F.layer_norm, torch.layer_norm):
            return "layernorm"
        if func in (F.rms_norm, torch.rms_norm):
            return "rmsnorm"
        if func in (F.softmax, torch.softmax, torch.Tensor.softmax):
            return "softmax"
        if func in (F.conv1d, F.conv2d, F.conv_transpose1d, F.conv_transpose2d):
            return "conv"
        return None


@contextlib.contextmanager
def written_calls(model):
    """The calls a model writes out as several torch calls, counted by what the model's code
    names them: its RMSNorm modules' forwards (LlamaRMSNorm, T5LayerNorm...), Cohere's
    LayerNorm, its
    modeling module's `apply_rotary_pos_emb` and RoFormer's static method
    `apply_rotary_position_embeddings`."""
    counts: Counter = Counter()
    hooks = [
        m.register_forward_hook(lambda *_: counts.update(["rmsnorm"]))
        for m in model.modules()
        if re.search(r"RMSNorm$", type(m).__name__) or type(m).__name__ == "T5LayerNorm"
    ]
    # Cohere's LayerNorm, written out without a bias (its per-head q/k norm, a 2-D weight, is
    # no F.layer_norm over the last dim: elementwise work)
    hooks += [
        m.register_forward_hook(lambda *_: counts.update(["layernorm"]))
        for m in model.modules()
        if type(m).__name__ == "CohereLayerNorm" and m.weight.dim() == 1
    ]
    patched = []
    for mod in {sys.modules[type(m).__module__] for m in model.modules()}:
        fn = getattr(mod, "apply_rotary_pos_emb", None)
        if callable(fn):

            def counted(*args, _fn=fn, **kwargs):
                counts.update(["rope"])
                return _fn(*args, **kwargs)

            setattr(mod, "apply_rotary_pos_emb", counted)
            patched.append((mod, "apply_rotary_pos_emb", fn))
    for cls in {type(m) for m in model.modules()}:
        raw = vars(cls).get("apply_rotary_position_embeddings")
        if isinstance(raw, staticmethod):

            def counted_static(*args, _fn=raw.__func__, **kwargs):
                counts.update(["rope"])
                return _fn(*args, **kwargs)

            setattr(cls, "apply_rotary_position_embeddings", staticmethod(counted_static))
            patched.append((cls, "apply_rotary_position_embeddings", raw))
    try:
        yield counts
    finally:
        for h in hooks:
            h.remove()
        for owner, name, fn in patched:
            setattr(owner, name, fn)


def counted_by_run(e2e) -> Counter:
    """The run's counts per base family: a fused kernel's call is the one base call it replaces."""
    out: Counter = Counter()
    for c in (*e2e.calls, *e2e.not_chosen):
        base = kernels.get(c.family).profile_family if c.family in kernels.REGISTRY else c.family
        base = "conv" if base in ("conv2d", "conv1d") else base
        out[base] += c.tilelang + sum(c.fallback.values())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("arch", sorted(ALL))
def test_every_call_of_every_family_is_accounted_for(arch, tmp_path):
    spec, extra = ALL[arch]
    sizes = dict(batch_size=2) | ({} if arch in SEQ else {"seq_len": 32})
    if "seq_len" in extra:  # raw audio's samples
        sizes, extra = sizes | {"seq_len": extra["seq_len"]}, {k: v for k, v in extra.items() if k != "seq_len"}
    cfg = config.build(
        model=spec,
        device="cpu",
        ops=20,
        budget=0,
        fine_rounds=0,
        reps=3,
        soak_seconds=0,
        pdf=False,
        compile_mode="none",
        reports=tmp_path / "reports",
        **sizes,
        **extra,
    )
    r = pipeline.run(cfg).result
    e = r.e2e
    assert e is not None and e.swapped is not None, r.stage_errors
    assert e.outputs_match or e.tilelang_calls == 0, e.error
    loaded = load_model(
        spec,
        dtype="float32",
        device="cpu",
        **sizes,
        **({"lengths": tuple(int(x) for x in extra["lengths"].split("-"))} if "lengths" in extra else {}),
    )
    with torch.inference_mode(), written_calls(loaded.module) as written, Count() as mine:
        loaded.module(*loaded.inputs)
    mine.calls.update(written)
    theirs = counted_by_run(e)
    for fam in ("gemm", "grouped_gemm", "bmm", "attention", "layernorm", "rmsnorm", "softmax", "conv", "rope"):
        if fam == "bmm" and "bmm" not in kernels.REGISTRY:
            continue
        assert theirs.get(fam, 0) == mine.calls.get(fam, 0), (fam, dict(theirs), dict(mine.calls))
