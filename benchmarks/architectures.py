"""Architectures nobody here shaped, through the whole run: what each family does per model.

    python3 benchmarks/architectures.py [--only distilbert,vit,...] [--more] [--markdown]

Each architecture (a tiny transformers config built offline, or a block written by hand
with torch.matmul, @, einsum and a masked SDPA) goes through `evaluate` on the CPU with
every family that has a kernel chosen (`--ops 20`, first config of each space: `--budget
0`), and one line per architecture says, per family, the calls that ran in TileLang /
all its calls, and the reasons the others ran in PyTorch. tests/test_architectures.py
runs the same list and checks each family's count against PyTorch's own.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

ARCHITECTURES = {
    "distilbert": ("hf:DistilBertModel,n_layers=2,dim=64,n_heads=2,hidden_dim=128,vocab_size=1000", {}),
    "bert-padded": (
        "hf:BertModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,vocab_size=1000",
        {"lengths": "16-32"},
    ),
    "t5-encoder": ("hf:T5EncoderModel,num_layers=2,d_model=64,d_ff=128,num_heads=2,d_kv=32,vocab_size=1000", {}),
    "bart": (
        "hf:BartModel,d_model=64,encoder_layers=1,decoder_layers=1,encoder_attention_heads=2,"
        "decoder_attention_heads=2,encoder_ffn_dim=128,decoder_ffn_dim=128,vocab_size=1000",
        {},
    ),
    "mistral-sliding": (
        "hf:MistralModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,"
        "num_key_value_heads=2,intermediate_size=128,vocab_size=1000,sliding_window=8",
        {},
    ),
    "qwen2": (
        "hf:Qwen2Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,"
        "intermediate_size=128,vocab_size=1000",
        {},
    ),
    "phi3": (
        "hf:Phi3Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,"
        "intermediate_size=128,vocab_size=1000,pad_token_id=0,partial_rotary_factor=0.5",
        {},
    ),
    "gpt-neox": (
        "hf:GPTNeoXModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000,rotary_pct=0.25",
        {},
    ),
    "gemma": (
        "hf:GemmaModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,num_key_value_heads=1,"
        "head_dim=32,intermediate_size=128,vocab_size=1000",
        {},
    ),
    "vit": (
        "hf:ViTModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "image_size=32,patch_size=8",
        {},
    ),
    # ALiBi added through Tensor.baddbmm, softmax and Tensor.bmm written out (no SDPA).
    "bloom": ("hf:BloomModel,n_layer=2,hidden_size=64,n_head=2,vocab_size=1000", {}),
    "convnext": ("hf:ConvNextModel,num_stages=2,depths=[1,1],hidden_sizes=[16,32],image_size=32", {}),
    "mobilenet-v2": ("hf:MobileNetV2Model,depth_multiplier=0.35,image_size=32", {}),
    "whisper-encoder": (
        "hf:WhisperEncoder,d_model=64,encoder_layers=1,encoder_attention_heads=2,"
        "encoder_ffn_dim=128,num_mel_bins=16,max_source_positions=32",
        {},
    ),
    "written-block": ("tests/fixtures/written_block.py:make", {}),
}
SEQ = {"whisper-encoder": None, "vit": None, "convnext": None, "mobilenet-v2": None, "written-block": None}
# More architectures (`--more`): each reaches a family by a path the list above covers in
# another form. tests/test_architectures.py checks both lists.
MORE = {
    "swin": ("hf:SwinModel,image_size=32,patch_size=4,embed_dim=32,depths=[1,1],num_heads=[2,4],window_size=4", {}),
    "deberta-v2": (
        "hf:DebertaV2Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        'vocab_size=1000,relative_attention=true,pos_att_type=["p2c","c2p"],max_relative_positions=64',
        {},
    ),
    "falcon-alibi": (
        "hf:FalconModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,vocab_size=1000,"
        "alibi=true,new_decoder_architecture=false",
        {},
    ),
    "opt": (
        "hf:OPTModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,ffn_dim=128,vocab_size=1000,"
        "word_embed_proj_dim=64",
        {},
    ),
    "gptj": ("hf:GPTJModel,n_layer=2,n_embd=64,n_head=2,rotary_dim=16,vocab_size=1000", {}),
    "wav2vec2": (
        "hf:Wav2Vec2Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000,conv_dim=[32,32,32],conv_stride=[5,2,2],conv_kernel=[10,3,3],num_feat_extract_layers=3,"
        "num_conv_pos_embeddings=16,num_conv_pos_embedding_groups=4",
        {"seq_len": 800},  # raw audio samples
    ),
    "llama": (
        "hf:LlamaModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,"
        "intermediate_size=128,vocab_size=1000",
        {},
    ),
    "segformer": (
        "hf:SegformerModel,num_encoder_blocks=2,depths=[1,1],hidden_sizes=[32,64],num_attention_heads=[1,2],"
        "sr_ratios=[4,2],patch_sizes=[7,3],strides=[4,2],mlp_ratios=[2,2]",
        {},
    ),
    "albert": (
        "hf:AlbertModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000,embedding_size=32",
        {},
    ),
    "convbert": (
        "hf:ConvBertModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000,embedding_size=64",
        {},
    ),
    "clip-vision": (
        "hf:CLIPVisionModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "image_size=32,patch_size=8",
        {},
    ),
    "mobilevit": (
        "hf:MobileViTModel,image_size=32,hidden_sizes=[32,48,64],neck_hidden_sizes=[8,8,16,16,24,32,64],"
        "num_attention_heads=2",
        {},
    ),
    "mixtral": (
        "hf:MixtralModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,"
        "intermediate_size=128,num_local_experts=4,num_experts_per_tok=2,vocab_size=1000",
        {},
    ),
    "gpt-bigcode": ("hf:GPTBigCodeModel,n_layer=2,n_embd=64,n_head=2,vocab_size=1000,multi_query=true", {}),
    # Attention logits soft-capped (tanh) and every other layer a sliding window: eager attention.
    "gemma2": (
        "hf:Gemma2Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,num_key_value_heads=1,"
        "head_dim=32,intermediate_size=128,vocab_size=1000,sliding_window=8",
        {},
    ),
    "mpt": ("hf:MptModel,n_layers=2,d_model=64,n_heads=2,expansion_ratio=2,vocab_size=1000", {}),
    "stablelm": (
        "hf:StableLmModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,num_key_value_heads=2,"
        "intermediate_size=128,vocab_size=1000,partial_rotary_factor=0.25",
        {},
    ),
    "phi": (
        "hf:PhiModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000,partial_rotary_factor=0.5",
        {},
    ),
    "roformer": (
        "hf:RoFormerModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000,embedding_size=64",
        {},
    ),
    "xlm-roberta": (
        "hf:XLMRobertaModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000",
        {},
    ),
    "beit": (
        "hf:BeitModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "image_size=32,patch_size=8,use_relative_position_bias=true",
        {},
    ),
    "dinov2": (
        "hf:Dinov2Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,image_size=32,patch_size=8,"
        "mlp_ratio=2",
        {},
    ),
    "wavlm": (
        "hf:WavLMModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000,conv_dim=[32,32,32],conv_stride=[5,2,2],conv_kernel=[10,3,3],num_feat_extract_layers=3,"
        "num_conv_pos_embeddings=16,num_conv_pos_embedding_groups=4,num_buckets=32,max_bucket_distance=64",
        {"seq_len": 800},  # raw audio samples
    ),
    "resnet": (
        "hf:ResNetModel,embedding_size=16,hidden_sizes=[16,32],depths=[1,1],layer_type=bottleneck,image_size=32",
        {},
    ),
    "regnet": ("hf:RegNetModel,embedding_size=16,hidden_sizes=[16,32],depths=[1,1],groups_width=8,image_size=32", {}),
    # Two stages: a 3x3 depthwise at stride 1 (padding="same"), a 5x5 at stride 2 ("valid"
    # behind a ZeroPad2d), each block's squeeze-excite two 1x1 convolutions on a 1x1 map.
    "efficientnet": (
        "hf:EfficientNetModel,image_size=32,width_coefficient=0.25,depth_coefficient=1.0,hidden_dim=320,"
        "kernel_sizes=[3,5],in_channels=[32,16],out_channels=[16,24],strides=[1,2],num_block_repeats=[1,1],"
        "expand_ratios=[1,4],depthwise_padding=[]",
        {},
    ),
    "persimmon": (
        "hf:PersimmonModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000,partial_rotary_factor=0.5",
        {},
    ),
    "hubert": (
        "hf:HubertModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000,conv_dim=[32,32,32],conv_stride=[5,2,2],conv_kernel=[10,3,3],num_feat_extract_layers=3,"
        "num_conv_pos_embeddings=16,num_conv_pos_embedding_groups=4",
        {"seq_len": 800},  # raw audio samples
    ),
    "data2vec-vision": (
        "hf:Data2VecVisionModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "image_size=32,patch_size=8,use_relative_position_bias=true",
        {},
    ),
    # q and k each RMSNorm'd over the head dim before the rotary embedding.
    "qwen3": (
        "hf:Qwen3Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,head_dim=16,"
        "intermediate_size=128,vocab_size=1000",
        {},
    ),
    "qwen3-moe": (
        "hf:Qwen3MoeModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,"
        "head_dim=16,intermediate_size=128,moe_intermediate_size=32,num_experts=4,num_experts_per_tok=2,"
        "vocab_size=1000",
        {},
    ),
    "olmo2": (
        "hf:Olmo2Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,"
        "intermediate_size=128,vocab_size=1000",
        {},
    ),
    # Attention and MLP in parallel off one LayerNorm without bias.
    "cohere": (
        "hf:CohereModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,"
        "intermediate_size=128,vocab_size=1000,use_qk_norm=true",
        {},
    ),
    "gemma3-text": (
        "hf:Gemma3TextModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,num_key_value_heads=1,"
        "head_dim=32,intermediate_size=128,vocab_size=1000,sliding_window=8",
        {},
    ),
    # Multi-head latent attention (q and kv through low-rank projections) and a routed MoE.
    "deepseek-v3": (
        "hf:DeepseekV3Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=4,"
        "intermediate_size=128,moe_intermediate_size=32,n_routed_experts=4,num_experts_per_tok=2,n_group=1,"
        "topk_group=1,first_k_dense_replace=1,q_lora_rank=32,kv_lora_rank=32,qk_rope_head_dim=8,"
        "qk_nope_head_dim=16,v_head_dim=16,vocab_size=1000",
        {},
    ),
    # A shared expert beside the routed ones, gated by a sigmoid.
    "qwen2-moe": (
        "hf:Qwen2MoeModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=2,"
        "intermediate_size=128,moe_intermediate_size=32,shared_expert_intermediate_size=64,num_experts=4,"
        "num_experts_per_tok=2,vocab_size=1000",
        {},
    ),
    "deepseek-v2": (
        "hf:DeepseekV2Model,num_hidden_layers=2,hidden_size=64,num_attention_heads=4,num_key_value_heads=4,"
        "intermediate_size=128,moe_intermediate_size=32,n_routed_experts=4,num_experts_per_tok=2,n_group=1,"
        "topk_group=1,first_k_dense_replace=1,q_lora_rank=32,kv_lora_rank=32,qk_rope_head_dim=8,"
        "qk_nope_head_dim=16,v_head_dim=16,vocab_size=1000",
        {},
    ),
    "modernbert": (
        "hf:ModernBertModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        'vocab_size=1000,layer_types=["full_attention","sliding_attention"],local_attention=16,pad_token_id=0',
        {},
    ),
    "siglip-vision": (
        "hf:SiglipVisionModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "image_size=32,patch_size=8",
        {},
    ),
    "convnextv2": ("hf:ConvNextV2Model,num_stages=2,depths=[1,1],hidden_sizes=[16,32],image_size=32", {}),
    "gpt-neo": (
        "hf:GPTNeoModel,num_layers=2,hidden_size=64,num_heads=2,vocab_size=1000,window_size=8,"
        'attention_types=[[["global","local"],1]]',
        {},
    ),
    "codegen": ("hf:CodeGenModel,n_layer=2,n_embd=64,n_head=2,rotary_dim=16,vocab_size=1000,n_ctx=64", {}),
    "squeezebert": (
        "hf:SqueezeBertModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000,embedding_size=64,q_groups=2,k_groups=2,v_groups=2,post_attention_groups=2,"
        "intermediate_groups=2,output_groups=2",
        {},
    ),
    "mpnet": (
        "hf:MPNetModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,vocab_size=1000",
        {},
    ),
    "electra": (
        "hf:ElectraModel,num_hidden_layers=2,hidden_size=64,num_attention_heads=2,intermediate_size=128,"
        "vocab_size=1000,embedding_size=32",
        {},
    ),
    "pegasus": (
        "hf:PegasusModel,d_model=64,encoder_layers=1,decoder_layers=1,encoder_attention_heads=2,"
        "decoder_attention_heads=2,encoder_ffn_dim=128,decoder_ffn_dim=128,vocab_size=1000",
        {},
    ),
    "mamba": (
        "hf:MambaModel,num_hidden_layers=2,hidden_size=64,state_size=8,expand=2,conv_kernel=4,vocab_size=1000",
        {},
    ),
    "levit": (
        "hf:LevitModel,image_size=32,patch_size=16,hidden_sizes=[32,48],num_attention_heads=[2,2],depths=[1,1],"
        "key_dim=[8,8],drop_path_rate=0,mlp_ratio=[2,2],attention_ratio=[2,2],"
        'down_ops=[["Subsample",8,2,2,2,2]]',
        {},
    ),
    "poolformer": (
        "hf:PoolFormerModel,num_encoder_blocks=2,depths=[1,1],hidden_sizes=[16,32],patch_sizes=[7,3],"
        "strides=[4,2],padding=[2,1],mlp_ratio=2.0,image_size=32",
        {},
    ),
    "funnel": (
        "hf:FunnelModel,block_sizes=[1,1],num_decoder_layers=1,d_model=64,n_head=2,d_head=32,d_inner=128,"
        "vocab_size=1000",
        {},
    ),
    # XLNet: every projection an einsum by a [d_model, heads, head_dim] weight
    "xlnet": ("hf:XLNetModel,n_layer=2,d_model=64,n_head=2,d_inner=128,vocab_size=1000", {}),
}
# The convolutional nets again with model and inputs channels_last on every path.
MORE |= {
    f"{k}-cl": (MORE.get(k, ARCHITECTURES.get(k))[0], {"layout": "channels-last"})
    for k in ("resnet", "regnet", "convnext", "efficientnet")
}
SEQ |= {k: None for k in ("beit", "dinov2", "wavlm", "resnet", "regnet", "efficientnet", "hubert", "data2vec-vision")}
SEQ |= {f"{k}-cl": None for k in ("resnet", "regnet", "convnext", "efficientnet")}
SEQ |= {"swin": None, "segformer": None, "wav2vec2": None, "clip-vision": None, "mobilevit": None}
SEQ |= {"siglip-vision": None, "convnextv2": None, "levit": None, "poolformer": None}


def run(arch: str, reports: Path):
    """The run's result for one architecture (CPU, every family chosen, first configs)."""
    from evaluator import config, pipeline

    spec, extra = {**ARCHITECTURES, **MORE}[arch]
    sizes = dict(batch_size=2) | ({} if arch in SEQ else {"seq_len": 32})
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
        reports=reports,
        **sizes,
        **extra,
    )
    return pipeline.run(cfg).result


def summary(result) -> dict[str, tuple[int, int, Counter]]:
    """family -> (calls in TileLang, all calls, reasons the others stayed in PyTorch)."""
    out: dict[str, list] = {}
    e = result.e2e
    for c in (*e.calls, *e.not_chosen):
        row = out.setdefault(c.family, [0, 0, Counter()])
        row[0] += c.tilelang
        row[1] += c.tilelang + sum(c.fallback.values())
        row[2].update(c.fallback)
    return {f: (t, n, why) for f, (t, n, why) in out.items()}


def _unnamed(result):
    from evaluator.profiling import profile

    return profile.unnamed(result.hot_ops) if result.hot_ops else ()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated architecture keys")
    ap.add_argument("--markdown", action="store_true", help="one table row per architecture")
    ap.add_argument("--more", action="store_true", help="the architectures outside the test's list")
    args = ap.parse_args()
    keys = args.only.split(",") if args.only else sorted(MORE if args.more else ARCHITECTURES)
    unknown = [k for k in keys if k not in ARCHITECTURES and k not in MORE]
    if unknown:
        known = ", ".join(sorted({**ARCHITECTURES, **MORE}))
        print(f"architectures: unknown {', '.join(unknown)}; known: {known}", file=sys.stderr)
        sys.exit(2)
    if args.markdown:
        print("| architecture | outputs | families: calls in TileLang / all |\n| --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for arch in keys:
            r = run(arch, Path(tmp) / arch)
            if r.e2e is None:  # no family chosen (or the stage failed): the run says why
                unnamed = ", ".join(f"{o.family} ({o.calls} calls at no shape its kernel takes)" for o in _unnamed(r))
                why = r.stage_errors or unnamed or "no family chosen"
                line = f"no end-to-end run: {why}"
                print(f"| {arch} | {line} |  |" if args.markdown else f"{arch}: {line}", flush=True)
                continue
            fams = summary(r)
            cells = "; ".join(
                f"{f} {t}/{n}" + (f" ({', '.join(f'{w} {k}' for w, k in why.most_common(2))})" if t < n else "")
                for f, (t, n, why) in sorted(fams.items())
            )
            match = "match" if r.e2e.outputs_match else f"differ: {r.e2e.error}"
            print(f"| {arch} | {match} | {cells} |" if args.markdown else f"{arch}: {match}; {cells}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
