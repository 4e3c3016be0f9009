"""How far each kernel family can go on the shapes real models run, on CUDA: every config
of a wide grid (much wider than the tuner's search space) compiled in parallel,
verified against PyTorch, and timed on CUDA-graph replay over rotated inputs, PyTorch's
own call timed in the same interleaved rounds. It answers two questions the tuner's
numbers cannot: what the best reachable ratio is, and whether the family's search
space (and its first config) contains that best.

    python3 benchmarks/kernel_sweep.py [--only KEYS] [--shapes 3152x3072x768,...] [--json OUT.json]

KEYS, comma-separated: gemm, llama, pingpong, pingwave, swap, streamk, fused, gated, skinny,
attention, views, masked, bmm, rows, rope, rope_partial, conv2d, resnet50, depthwise, conv1d,
conv_bn (ResNet-50's conv -> batch_norm (-> relu, -> add -> relu) against PyTorch's calls eager),
conv_bn_cl (the same patterns channels_last, at the shapes where the routed model trailed
torch.compile, with tiles wider than the family's space).

Each row: family, shape, PyTorch µs, best TileLang µs and config, the ratio
(PyTorch / TileLang), and the ratios of the family's own first config and of the best
config its search space holds. The wide grids live here, not in the families: they are
research, and every one of them costs a compile.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import torch

from evaluator.measuring import bench, timing
from evaluator.device import hardware
from evaluator import kernels
from evaluator.kernels import common as C
from evaluator.kernels.gemm import pingpong as PP
from evaluator.kernels.conv2d import copy_problem
from evaluator.kernels.conv2d.programs import stream_problem
from evaluator.measuring.checks import check_output

DTYPE = "float16"

GEMM_MODEL = [  # (M, N, K) as nn.Linear: bert-base b8 s128, GPT-2 b4 s512, ViT-B b16, llama zoo
    (1024, 768, 768),
    (1024, 3072, 768),
    (1024, 768, 3072),
    (2048, 2304, 768),
    (3152, 2304, 768),
    (3152, 768, 768),
    (3152, 3072, 768),
    (3152, 768, 3072),
    (8192, 8192, 8192),
]
# GPT-2's other two at b4 s512 (c_fc, c_proj; c_attn is 2048x2304x768 above).
GEMM_GPT2 = [(2048, 3072, 768), (2048, 768, 3072), (2048, 768, 768)]
GEMM_LLAMA = [(512, 5632, 2048), (512, 2048, 2048), (512, 2048, 5632)]  # the zoo's llama, batch 1, 512 tokens
# The fused patterns the models run (their first call's shape): bert-base's and ViT-B's
# GELU(fc1(x)), GPT-2's gelu_new(c_fc(x)); against F.linear then the activation. The plain
# GEMM at ViT-B's shape beside them: what the activation adds to the same tiles.
GEMM_FUSED = [("gemm_gelu", (1024, 3072, 768)), ("gemm_gelu", (3152, 3072, 768)), ("gemm_gelu_tanh", (2048, 3072, 768))]
# SwiGLU's up projection with the product in its epilogue (gemm_mul) against F.linear then
# the multiply, and its gate (gemm_silu) against F.linear then F.silu: TinyLlama's MLP at
# b4 s512 (reports/examples/hf-llama-tinyllama-4l/h200/2026-12-04/), the zoo llama's at b1 s512.
GEMM_GATED = [("gemm_mul", (2048, 5632, 2048)), ("gemm_silu", (2048, 5632, 2048)), ("gemm_mul", (512, 5632, 2048))]
GEMM_SKINNY = [(16, 4096, 4096), (1, 4096, 11008), (32, 1000, 2048)]
ATTENTION = [  # (B, H, Sq, Skv, D, causal)
    (4, 32, 4096, 4096, 128, 0),
    (4, 32, 4096, 4096, 128, 1),
    (4, 32, 4096, 4096, 64, 1),
    (8, 12, 128, 128, 64, 0),
    (4, 12, 512, 512, 64, 1),
    (16, 12, 197, 197, 64, 0),
]
# The same model shapes on the views the models hand SDPA (row pitches q, k, v; see
# attention.py): BERT's per-projection views, GPT-2's split c_attn and timm's packed qkv
# (3H), llama's (its rotary embedding keeps q and k in [B, S, H, D] order). Timed on the
# family's own space only.
ATTENTION_VIEWS = [
    (8, 12, 128, 128, 64, 0, 12, 12, 12),
    (4, 12, 512, 512, 64, 1, 36, 36, 36),
    (16, 12, 197, 197, 64, 0, 36, 36, 36),
    (1, 32, 512, 512, 64, 1, 32, 32, 32),
    # grouped-query heads (enable_gqa): TinyLlama's 32 over 4 at b4 s512,
    # as transformers hands them over; llama-3-8B's 32 over 8 at s4096.
    (4, 32, 512, 512, 64, 1, 32, 4, 4, 4),
    (1, 32, 4096, 4096, 128, 1, 0, 0, 0, 8),
]
# Batched products (bmm): BERT-base's eager attention at b8 s128, 12 heads (96 batches), as
# transformers hands them over (q and v heads of their projections, k^T the transposed view;
# scores 128x128x64, context 128x64x128) and as contiguous torch.bmm operands, and a long
# sequence's 32 x 1024x1024x128. The PyTorch side is the family's reference on the same
# views: torch.bmm's kernel on 3-D operands, and on the 4-D views torch.matmul with the
# copies it makes to reach bmm, as the model runs it.
BMM = [
    (96, 128, 128, 64, 0, 1, 12, 12, 12),
    (96, 128, 64, 128, 0, 0, 12, 0, 12),
    (96, 128, 128, 64, 0, 1),
    (96, 128, 64, 128),
    (32, 1024, 1024, 128, 0, 1),
    (32, 1024, 1024, 128),
]
# Attention with the mask models pass SDPA, against SDPA with that mask (which leaves flash
# attention for its masked backends): BERT-base's padding at b8 s128, a bool [B, 1, Sq, Skv]
# (contiguous, and on the views BERT hands over), and ViT-B's s197 under a per-head float
# bias [B, H, Sq, Skv] as a relative-position bias is; the same shapes unmasked beside them.
ATTENTION_MASKED = [
    (8, 12, 128, 128, 64, 0, 0, 0, 0, 0, 1, 1011),
    (8, 12, 128, 128, 64, 0, 12, 12, 12, 0, 1, 1011),
    (16, 12, 197, 197, 64, 0, 0, 0, 0, 0, 2, 1111),
    (8, 12, 128, 128, 64, 0),
    (16, 12, 197, 197, 64, 0),
]
ROWS = {
    "layernorm": [(1024, 768), (2048, 768), (3152, 768), (16384, 4096)],
    # The pre-norm sum and its norm against PyTorch's add then layer_norm: ViT-B's, GPT-2's.
    "add_layernorm": [(3152, 768), (2048, 768), (16384, 4096)],
    "add_rmsnorm": [(512, 2048), (16384, 4096)],  # the zoo's llama at batch 1, 512 tokens
    "softmax": [(12288, 128), (24576, 512), (37824, 197), (16384, 4096)],
    "rmsnorm": [(1024, 768), (2048, 4096), (16384, 4096)],
}
# (batch, seq, q_heads, kv_heads, head_dim, per_batch): the rotary embedding of q and k
# against the formula's ten elementwise calls and two cats (transformers' llama): TinyLlama
# at b4 s512, an odd sequence, llama-7B's 32 heads of 128 at s4096.
ROPE = [(4, 512, 32, 4, 64, 0), (4, 509, 32, 4, 64, 0), (1, 4096, 32, 32, 128, 0)]
# The forms that rotate part of each head, against each model's own formula (slices, the
# rotation and a cat; GPT-J's repeat_interleave and stack): GPT-NeoX-1.4B's 32 of 128
# dims with q and k read in place from the packed qkv [b, s, 16, 3 * 128] at b4 s512;
# GPT-J-6B's q[..., :64] of 256 in pairs off its sin|cos table, one tensor a call (it
# rotates k, then q, the same shape).
ROPE_PARTIAL = [(4, 512, 16, 16, 128, 0, 32, 0, 6144, 384, 6144, 384), (4, 512, 16, 0, 64, 0, 64, 2, 4096, 256, 0, 0)]
# (N, H, W, C, K, R, S, stride, pad, nchw): ResNet-50's stem, 1x1s and a 3x3 as torchvision
# runs them (NCHW, 1) and as a channels_last model does (0); channels not a multiple of 8 last.
CONV = [
    (32, 224, 224, 3, 64, 7, 7, 2, 3, 1),
    (32, 56, 56, 64, 64, 1, 1, 1, 0, 1),
    (32, 56, 56, 64, 256, 1, 1, 1, 0, 1),
    (32, 14, 14, 1024, 256, 1, 1, 1, 0, 1),
    (32, 56, 56, 256, 512, 1, 1, 2, 0, 1),
    (32, 56, 56, 64, 64, 3, 3, 1, 1, 1),
    (32, 224, 224, 3, 64, 7, 7, 2, 3, 0),
    (32, 56, 56, 64, 256, 1, 1, 1, 0, 0),
    (32, 14, 14, 1024, 256, 1, 1, 1, 0, 0),
    (32, 56, 56, 60, 60, 3, 3, 1, 1, 1),
    (32, 56, 56, 60, 60, 3, 3, 1, 1, 0),
    (32, 28, 28, 100, 100, 1, 1, 1, 0, 1),
]
# Every convolution torchvision's resnet50 runs at batch 32 (NCHW), as its H200 run profiled
# them (reports/examples/torchvision-resnet50/h200/2026-12-01/). With 3 s of tuning a shape
# and every shape tuned (--max-shapes 24, the same day) most ran their first config, and
# 28x28 128->512 ran 0.42x cuDNN.
RESNET50 = [
    (32, 224, 224, 3, 64, 7, 7, 2, 3, 1),
    (32, 56, 56, 64, 64, 1, 1, 1, 0, 1),
    (32, 56, 56, 64, 64, 3, 3, 1, 1, 1),
    (32, 56, 56, 64, 256, 1, 1, 1, 0, 1),
    (32, 56, 56, 256, 64, 1, 1, 1, 0, 1),
    (32, 56, 56, 128, 128, 3, 3, 2, 1, 1),
    (32, 56, 56, 256, 512, 1, 1, 2, 0, 1),
    (32, 28, 28, 128, 128, 3, 3, 1, 1, 1),
    (32, 28, 28, 128, 512, 1, 1, 1, 0, 1),
    (32, 28, 28, 256, 256, 3, 3, 2, 1, 1),
    (32, 28, 28, 512, 1024, 1, 1, 2, 0, 1),
    (32, 14, 14, 256, 256, 3, 3, 1, 1, 1),
    (32, 14, 14, 256, 1024, 1, 1, 1, 0, 1),
    (32, 14, 14, 1024, 256, 1, 1, 1, 0, 1),
    (32, 14, 14, 1024, 512, 1, 1, 1, 0, 1),
    (32, 14, 14, 512, 512, 3, 3, 2, 1, 1),
    (32, 14, 14, 1024, 2048, 1, 1, 2, 0, 1),
    (32, 7, 7, 512, 512, 3, 3, 1, 1, 1),
    (32, 7, 7, 512, 2048, 1, 1, 1, 0, 1),
    (32, 7, 7, 2048, 512, 1, 1, 1, 0, 1),
]
# ResNet-50's conv -> batch_norm(eval) (-> relu) at batch 32, NCHW, each against PyTorch's
# calls eager, as the model runs them: conv_bn_relu where a ReLU follows (the stem, each
# bottleneck's 1x1 reduce and 3x3), conv_bn_add_relu at the 1x1 expand (its norm, the
# residual add, the block's last ReLU), conv_bn at the downsamples.
CONV_BN = [
    ("conv_bn_relu", (32, 224, 224, 3, 64, 7, 7, 2, 3, 1)),
    ("conv_bn_relu", (32, 56, 56, 64, 64, 1, 1, 1, 0, 1)),
    ("conv_bn_relu", (32, 56, 56, 64, 64, 3, 3, 1, 1, 1)),
    ("conv_bn_relu", (32, 56, 56, 128, 128, 3, 3, 2, 1, 1)),
    ("conv_bn_relu", (32, 14, 14, 1024, 256, 1, 1, 1, 0, 1)),
    ("conv_bn_relu", (32, 14, 14, 256, 256, 3, 3, 1, 1, 1)),
    ("conv_bn_add_relu", (32, 56, 56, 64, 256, 1, 1, 1, 0, 1)),
    ("conv_bn_add_relu", (32, 28, 28, 128, 512, 1, 1, 1, 0, 1)),
    ("conv_bn_add_relu", (32, 14, 14, 256, 1024, 1, 1, 1, 0, 1)),
    ("conv_bn", (32, 56, 56, 64, 256, 1, 1, 1, 0, 1)),
    ("conv_bn", (32, 56, 56, 256, 512, 1, 1, 2, 0, 1)),
]
# ResNet-50's fused convolutions channels_last, the shapes whose kernels trailed
# Inductor's most in the routed model (H100, --budget 3: each kept its space's first
# config, 64x128; reports/examples/torchvision-resnet50/h100/2026-12-05-channels-last/):
# every conv_bn_add_relu (the residual add in the epilogue), the slower conv_bn_relus and
# the 3x3s (stride 1 and 2) whose pixel tile TMA's im2col mode can read.
CONV_BN_CL = [
    ("conv_bn_add_relu", (32, 56, 56, 64, 256, 1, 1, 1, 0, 0)),
    ("conv_bn_add_relu", (32, 28, 28, 128, 512, 1, 1, 1, 0, 0)),
    ("conv_bn_add_relu", (32, 14, 14, 256, 1024, 1, 1, 1, 0, 0)),
    ("conv_bn_add_relu", (32, 7, 7, 512, 2048, 1, 1, 1, 0, 0)),
    ("conv_bn_relu", (32, 14, 14, 256, 256, 3, 3, 1, 1, 0)),
    ("conv_bn_relu", (32, 56, 56, 64, 64, 3, 3, 1, 1, 0)),
    ("conv_bn_relu", (32, 56, 56, 128, 128, 3, 3, 2, 1, 0)),
    ("conv_bn_relu", (32, 28, 28, 512, 256, 1, 1, 1, 0, 0)),
]
# The same 1x1s as plain conv2d: its space holds the gemm family's ping-pong tiles on the
# GEMM view (conv2d's `gemm` key), which the fused families cannot take; these say what
# that schedule is worth beside the implicit GEMM.
CONV_CL_1X1 = [(32, 56, 56, 64, 256, 1, 1, 1, 0, 0), (32, 28, 28, 128, 512, 1, 1, 1, 0, 0)]

# (N, H, W, C, K, R, S, stride, pad, nchw, groups): MobileNetV2's depthwise 3x3s at batch 32
# (112x112x32, 56x56x144 at stride 2, 14x14x576) as torchvision runs them (NCHW) and
# channels_last; ConvNeXt-T's first-stage 7x7 in both layouts (transformers' ConvNeXt
# hands it channels_last tensors, torchvision's NCHW). Against cuDNN's grouped convolution.
DEPTHWISE = [
    (32, 112, 112, 32, 32, 3, 3, 1, 1, 1, 32),
    (32, 56, 56, 144, 144, 3, 3, 2, 1, 1, 144),
    (32, 14, 14, 576, 576, 3, 3, 1, 1, 1, 576),
    (32, 112, 112, 32, 32, 3, 3, 1, 1, 0, 32),
    (32, 56, 56, 144, 144, 3, 3, 2, 1, 0, 144),
    (32, 14, 14, 576, 576, 3, 3, 1, 1, 0, 576),
    (32, 56, 56, 96, 96, 7, 7, 1, 3, 1, 96),
    (32, 56, 56, 96, 96, 7, 7, 1, 3, 0, 96),
]
# (N, L, C, K, S, stride, pad, ncl): Whisper-base's encoder front end on 30 s of audio
# (80 mel bins x 3000 frames -> 512, k3; then 512 -> 512, k3 stride 2), batch 1 and 8.
CONV1D = [
    (1, 3000, 80, 512, 3, 1, 1, 1),
    (1, 3000, 512, 512, 3, 2, 1, 1),
    (8, 3000, 80, 512, 3, 1, 1, 1),
    (8, 3000, 512, 512, 3, 2, 1, 1),
]


# (block_M, block_N, block_K, num_stages, threads)
MID_TILES = [
    (64, 64, 64, 4, 128),
    (64, 64, 64, 5, 128),
    (64, 64, 128, 3, 128),
    (64, 128, 64, 3, 128),
    (64, 128, 64, 4, 128),
    (64, 128, 128, 3, 128),
    (64, 128, 32, 5, 128),
    (128, 64, 64, 3, 128),
    (128, 64, 64, 4, 128),
    (128, 64, 128, 3, 128),
    (128, 128, 64, 3, 128),
    (128, 128, 64, 4, 128),
    (128, 128, 64, 3, 256),
    (128, 128, 64, 4, 256),
    (128, 128, 128, 2, 256),
    (128, 128, 32, 5, 256),
    (64, 256, 64, 3, 128),
    (64, 256, 64, 3, 256),
    (128, 256, 64, 3, 256),
    (128, 256, 64, 4, 256),
    (256, 128, 64, 3, 256),
]
BIG_TILES = [
    (128, 256, 64, 3, 256),
    (128, 256, 64, 4, 256),
    (256, 128, 64, 3, 256),
    (256, 128, 64, 4, 256),
    (128, 128, 64, 4, 256),
    (128, 256, 32, 5, 256),
    (256, 256, 64, 2, 512),
]


def gemm_grid(shape) -> list[dict]:
    M, N, K = shape
    base = dict(kernels.get("gemm").schedule(shape, DTYPE, "cuda").defaults)
    out = []
    if M <= 64:  # decode-like: small M tiles, narrow N tiles so enough blocks stream W
        for bM, bN, bK, st in itertools.product((16, 32, 64), (32, 64, 128), (128, 256), (3, 4)):
            if bM > max(16, C.next_pow2(M)):
                continue
            out.append(
                {
                    **base,
                    "block_M": bM,
                    "block_N": bN,
                    "block_K": bK,
                    "num_stages": st,
                    "threads": 128,
                    "policy": "fullcol",
                }
            )
        for bN, sk in itertools.product((64, 128), (2, 4, 8)):
            out.append(
                {**base, "block_M": 64, "block_N": bN, "block_K": 128, "num_stages": 3, "threads": 128, "split_k": sk}
            )
        return out
    tiles = MID_TILES if M * N * K < 4096**3 else BIG_TILES
    if M <= 1024 and M * N * K < 4096**3:
        # cuBLAS runs llama's 512-row GEMMs as 128x64 tiles 8 stages deep
        # (nvjet_sm90_hsh_128x64_64x8_1x2,
        # reports/examples/benchmarks/h200-2026-12-01/graph_gaps_llama.json);
        # the family's tiles stop at 5 stages.
        tiles = tiles + [
            (128, 64, 64, 6, 256),
            (128, 64, 64, 8, 256),
            (128, 64, 64, 8, 128),
            (64, 128, 64, 6, 128),
            (64, 128, 64, 8, 128),
        ]
    for bM, bN, bK, st, th in tiles:
        out.append({**base, "block_M": bM, "block_N": bN, "block_K": bK, "num_stages": st, "threads": th})
    out.append({**out[0], "swizzle": False})
    if M * N * K < 4096**3:
        # Experimental 2-block clusters along N sharing A by TMA multicast (not in the
        # family's space until measured): the llama M=512 shapes ran at 0.80-0.84x cuBLAS,
        # which multicasts on Hopper. Shapes whose column tiles do not pair are rejected.
        for bM, bN, bK, st, th in (
            (64, 128, 128, 3, 128),
            (64, 128, 64, 4, 128),
            (64, 128, 64, 5, 128),
            (128, 128, 64, 4, 256),
            (128, 128, 128, 2, 256),
            (128, 128, 64, 3, 128),
        ):
            out.append(
                {
                    **base,
                    "block_M": bM,
                    "block_N": bN,
                    "block_K": bK,
                    "num_stages": st,
                    "threads": th,
                    "swizzle": False,
                    "cluster": 2,
                }
            )
    if K >= 2048 and M * N <= 4096 * 4096:  # split-K reduced inside the kernel: long K, short output
        for bM, bN, st, th, splits in (
            (128, 256, 3, 256, 2),
            (128, 256, 3, 256, 3),
            (128, 128, 4, 256, 2),
            (128, 128, 4, 256, 3),
            (64, 128, 4, 128, 2),
            (64, 128, 4, 128, 4),
            (128, 128, 3, 128, 2),
        ):
            out.append(
                {
                    **base,
                    "block_M": bM,
                    "block_N": bN,
                    "block_K": 64,
                    "num_stages": st,
                    "threads": th,
                    "split_k": splits,
                    "splitk_fused": True,
                }
            )
    if shape[0] * shape[1] <= 2048 * 3072:
        for sk in (2, 3, 4):
            out.append(
                {**base, "block_M": 64, "block_N": 128, "block_K": 64, "num_stages": 4, "threads": 128, "split_k": sk}
            )
    return out


# The experimental ping-pong schedule (persistent tiles taken in turn by two consumer
# warpgroups; not in the family's space until measured): (block_M, block_N, block_K,
# num_stages), one consumer warpgroup's tile, the deepest rings that fit beside two
# output tiles, on one block per SM.
PINGPONG_TILES = [
    (128, 128, 64, 4),
    (128, 128, 64, 5),
    (128, 128, 128, 2),
    (128, 64, 64, 6),
    (128, 64, 64, 8),
    (64, 128, 64, 6),
    (64, 128, 128, 3),
    (64, 256, 64, 4),
    (128, 160, 64, 4),
    (128, 192, 64, 3),
]


def pingpong_grid(shape) -> list[dict]:
    base = dict(kernels.get("gemm").schedule(shape, DTYPE, "cuda").defaults)
    return [
        {
            **base,
            "block_M": bM,
            "block_N": bN,
            "block_K": bK,
            "num_stages": st,
            "threads": 128,
            "pingpong": 1,
            "persistent": 132,
        }
        for bM, bN, bK, st in PINGPONG_TILES
    ]  # the H200's 132 SMs


def wave_tiles(M: int, N: int, sms: int, rank: str) -> list[tuple[int, int]]:
    """Ping-pong tiles (block_M, block_N), block_N in steps of 16 up to 192 (the
    accumulator's register cap), best first. rank "useful": the share of the longest
    block's time spent on real output (`gemm/pingpong.useful`), intensity breaking ties,
    over tiles no smaller than 128x48; rank "score": that share times the tile's
    arithmetic intensity bM * bN / (bM + bN), the wave schedule's score (gemm's
    `_wave_space`). Does either find faster ping-pong tiles than the fixed list, with
    wgmma's steps of 8? On the H200 neither did, except where it named 128x96 or 128x48
    (reports/examples/kernels/h200-2026-12-02/kernel_sweep_pingwave.json); 120 and 152
    columns ran 3x slower (ncu-width/ there), and the family refuses them."""
    scored = []
    for bM in (128, 64):
        for bN in range(48, 193, 16):
            if rank == "useful" and bM * bN < 128 * 48:
                continue
            share, intensity = PP.useful(M, N, bM, bN, sms), bM * bN / (bM + bN)
            scored.append(((share * intensity,) if rank == "score" else (round(share, 6), intensity)) + (bM, bN))
    return [(t[-2], t[-1]) for t in sorted(scored, reverse=True)]


def pingwave_grid(shape, hw, top: int = 5) -> list[dict]:
    """The `top` ping-pong tiles of each of `wave_tiles`' two rankings at this shape, each
    with the deepest ring that fits (at most 8 stages)."""
    fam = kernels.get("gemm")
    base = {**pingpong_grid(shape)[0], "block_K": 64}
    out = []
    for rank in ("useful", "score"):
        mine = []
        for bM, bN in wave_tiles(shape[0], shape[1], int(hw.cores or 132), rank):
            for stages in range(8, 2, -1):
                cfg = {**base, "block_M": bM, "block_N": bN, "num_stages": stages}
                if fam.reject_reason(shape, DTYPE, cfg, hw) is None:
                    if len(mine) < top:
                        mine.append(cfg)
                    break
        out += mine
    return C.dedupe(out)


def swap_grid(shape, hw) -> list[dict]:
    """Ping-pong tiles of y's transpose (`swap_ab`: 128 features x block_N tokens, block_N
    in steps of 16 from 64 to 192), each with the deepest ring that fits, with and without
    `direct` (the store from registers, which leaves room for more stages); and y's own
    128-row tiles stored directly. The question: do tiles that divide ViT-B's 3152
    tokens into whole waves (144: four full rounds at 3152x3072x768) run as fast per tile
    as 128x128, and does a deeper ring pay for the scattered store?"""
    fam = kernels.get("gemm")
    base = {**pingpong_grid(shape)[0], "block_K": 64, "block_M": 128}
    variants = [{"swap_ab": 1, "block_N": bN, "direct": d} for bN in range(64, 193, 16) for d in (0, 1)]
    # 48 tokens: bert-base's 1024 tokens by 768 features in 22x6 = 132 tiles, one per SM
    # (128x64 leaves 36 of 132 idle at 1024x768x3072).
    variants += [{"swap_ab": 1, "block_N": 48, "direct": 0}]
    variants += [{"swap_ab": 0, "block_N": bN, "direct": 1} for bN in (96, 128, 144, 160, 176)]
    # TileLang's own pipeline on y's transpose, two warpgroups on one 256-row tile as
    # cuBLAS's 256x144 (0.875x against 0.947x for the ping-pong tiles at 3152x3072x768 on
    # the H200: reports/examples/kernels/h200-2026-12-03/kernel_sweep_swap_attention.json).
    wave = {**base, "pingpong": 0, "persistent": 0, "threads": 256, "policy": "fullrow", "swap_ab": 1}
    out = []
    for v in variants + [{**wave, "block_M": bM, "block_N": bN} for bM in (256, 128) for bN in (112, 144, 192)]:
        for stages in range(8, 1, -1):
            cfg = {**base, **v, "num_stages": stages}
            if fam.reject_reason(shape, DTYPE, cfg, hw) is None:
                out.append(cfg)
                break
    return out


def streamk_grid(shape) -> list[dict]:
    """The ping-pong tiles that leave a partial last wave at this shape, each as it is and
    with that wave split by K (`stream_k`, experimental; gemm/pingpong's docstring)."""
    out = []
    for cfg in pingpong_grid(shape):
        if PP.sk_splits(shape, {**cfg, "stream_k": 1}):
            out += [cfg, {**cfg, "stream_k": 1}]
    return out


def attention_grid(shape) -> list[dict]:
    out = []
    for bM, bN, st, th in itertools.product((64, 128), (64, 128), (1, 2), (128, 256)):
        if th == 256 and bM < 128:
            continue
        out.append({"block_M": bM, "block_N": bN, "num_stages": st, "threads": th})
    # FlashAttention-3-style overlap (async WGMMA, softmax under the PV gemm): one or two
    # warpgroups, always two K/V buffers. Causal 64x128 is left out: ptxas serializes its
    # wgmma (warning C7514), so it would only measure the overlap switched off.
    for bM, bN, th in ((128, 128, 256), (128, 64, 256), (64, 128, 128), (64, 64, 128)):
        if shape[5] and (bM, bN) == (64, 128):
            continue
        out.append({"block_M": bM, "block_N": bN, "num_stages": 2, "threads": th, "overlap": True})
    # FlashAttention-3's forward written out (`pingpong`: a TMA producer and two consumer
    # warpgroups): its key-block widths and rings.
    for bN, st in ((128, 2), (128, 3), (64, 2), (64, 4), (176, 2), (192, 2)):
        out.append({"block_M": 128, "block_N": bN, "num_stages": st, "threads": 256, "pingpong": True})
    return out


def bmm_grid(shape) -> list[dict]:
    """Tensor-core tiles around the bmm family's coarse grid: every tile of 64 or 128 rows
    by 64-256 columns, with 32- to 128-wide K steps in rings that fit, on one warpgroup
    (and two for 128 rows); tiles far wider than N left out."""
    N = shape[2]
    base = dict(kernels.get("bmm").schedule(tuple(shape), DTYPE, "cuda").defaults)
    out = []
    for bM, bN, (bK, st) in itertools.product((64, 128), (64, 128, 256), ((32, 4), (64, 2), (64, 3), (128, 2))):
        if bN > max(64, C.next_pow2(N)):
            continue
        for th in (128, 256) if bM == 128 else (128,):
            out.append({**base, "block_M": bM, "block_N": bN, "block_K": bK, "num_stages": st, "threads": th})
    return out


def conv_grid(shape) -> list[dict]:
    """NCHW: tiles over (output channels, pixels), and for a 1x1 over at most 128 channels
    the stream schedule at every image size (the family offers it from 2048 pixels)."""
    if not shape[9]:
        return []
    out = []
    if stream_problem(shape) is None:
        K = shape[4]
        for bM, bN, st, th in (
            (64, 64, 4, 128),
            (64, 128, 4, 128),
            (128, 128, 3, 256),
            (128, 256, 3, 256),
            (64, 256, 3, 256),
        ):
            if bM <= max(64, K):
                out.append(
                    {
                        "block_M": bM,
                        "block_N": bN,
                        "block_K": 32,
                        "num_stages": st,
                        "threads": th,
                        "swizzle": True,
                        "stream": max(1, 132 // C.ceildiv(K, bM)),
                    }
                )  # the H200's 132 SMs
    return out + nchw_tiles()


def nchw_tiles() -> list[dict]:
    """The NCHW implicit GEMM's tiles over (output channels, pixels)."""
    return [
        {"block_M": bM, "block_N": bN, "block_K": bK, "num_stages": st, "threads": th, "swizzle": True}
        for bM, bN, bK, st, th in (
            (64, 64, 32, 4, 128),
            (64, 128, 32, 3, 128),
            (64, 128, 64, 4, 128),
            (64, 256, 32, 4, 256),
            (64, 256, 64, 3, 256),
            (128, 64, 32, 4, 128),
            (128, 128, 32, 3, 256),
            (128, 128, 64, 4, 256),
            (128, 256, 32, 3, 256),
            (64, 128, 16, 6, 128),
            (128, 128, 16, 6, 256),
            (64, 64, 64, 3, 128),
        )
    ]


def cl_tiles(shape: tuple, residual: bool) -> list[dict]:
    """The channels_last implicit GEMM's tiles over (pixels, output channels), the
    256-wide ones the NCHW sweep found best on memory-heavy shapes among them; where one
    tile copy can read the pixel tile (rows of X, or im2col: conv2d.copy_problem), each
    also that way (a_copy); with a residual, each also with the residual read as one tile
    copy (r_shared)."""
    tiles = [
        {"block_M": bM, "block_N": bN, "block_K": bK, "num_stages": st, "threads": th, "swizzle": True, "flat_k": False}
        for bM, bN, bK, st, th in (
            (64, 128, 64, 4, 128),
            (128, 64, 64, 4, 128),
            (128, 128, 64, 4, 256),
            (64, 256, 32, 4, 256),
            (128, 256, 32, 3, 256),
            (128, 256, 64, 3, 256),
        )
    ]
    if copy_problem(shape, 64) is None:
        tiles += [{**t, "a_copy": True} for t in tiles]
    return tiles + [{**t, "r_shared": 1} for t in tiles] if residual else tiles


def depthwise_grid(shape, hw) -> list[dict]:
    """Direct tiles (not yet timed on a GPU): NCHW, rows of 16-64 pixels by 1-16 rows by
    1-16 channels, 1 or 4 neighbours a thread; channels_last, 16-128 channels by 1-8 x 1-8 pixels; 4-16 outputs a
    thread, at most 40 configs, whichever the family refuses (registers, shared memory) left out."""
    fam = kernels.get("conv2d")
    out = []
    if shape[9]:  # and 1 or 4 neighbours along a row a thread
        dims = itertools.product((1, 2, 4, 8, 16), (1, 2, 4, 8, 16), (16, 32, 64), (1, 4))
    else:
        dims = itertools.product((16, 32, 64, 128), (1, 2, 4, 8), (1, 2, 4, 8), (1,))
    for (bC, bH, bW, vec), threads in itertools.product(dims, (128, 256)):
        cfg = {"block_C": bC, "block_H": bH, "block_W": bW, "threads": threads, "vec": vec}
        if 4 <= bC * bH * bW // threads <= 16 and fam.reject_reason(shape, DTYPE, cfg, hw) is None:
            out.append(cfg)
    # Spread over the grid rather than its first corner.
    step = max(1, len(out) // 40)
    return out[::step][:40]


def conv1d_grid(shape) -> list[dict]:
    """NCL: conv_grid's NCHW tiles on the one-row image, and the same through the
    channels_last kernel between transposes (via_nhwc, whole channel chunks or flat taps)."""
    tiles = nchw_tiles()
    flat = shape[2] % 32 != 0
    return tiles + [{**c, "via_nhwc": True, "flat_k": flat} for c in tiles]


def _worth_compiling(fam, shape, cfg, hw) -> bool:
    why = fam.reject_reason(shape, DTYPE, cfg, hw)
    return why is None or "too small for" in why


def family_space(name, shape, hw) -> list[dict]:
    return kernels.get(name).search_space(shape, DTYPE, hw)


def cases(only: set[str], hw, own_only: bool = False) -> list[tuple[str, tuple, list[dict]]]:
    out = []
    if "gemm" in only:
        out += [("gemm", s, gemm_grid(s)) for s in GEMM_MODEL]
    if "llama" in only:
        out += [("gemm", s, gemm_grid(s)) for s in GEMM_LLAMA]
    if "pingpong" in only:  # the ping-pong grid beside the family's own space, every model shape
        out += [("gemm", s, pingpong_grid(s)) for s in GEMM_MODEL + GEMM_LLAMA]
    if "pingwave" in only:  # wave-sized ping-pong tiles beside the family's space, every model shape
        out += [
            ("gemm", s, pingwave_grid(s, hw)) for s in GEMM_MODEL + GEMM_LLAMA + GEMM_GPT2 if s != (8192, 8192, 8192)
        ]
    if "swap" in only:  # tiles of y's transpose and the direct store, beside the family's space
        out += [
            ("gemm", s, swap_grid(s, hw)) for s in GEMM_MODEL + GEMM_GPT2 + GEMM_LLAMA[:1] if s != (8192, 8192, 8192)
        ]
    if "streamk" in only:  # ping-pong with and without its last wave split by K, beside the family's space
        out += [("gemm", s, streamk_grid(s)) for s in GEMM_MODEL + GEMM_LLAMA if streamk_grid(s)]
    if "fused" in only:  # the epilogue's activation beside the ping-pong grid
        out += [(f, s, pingpong_grid(s)) for f, s in GEMM_FUSED + [("gemm", (3152, 3072, 768))]]
    if "gated" in only:  # the gated product's epilogue (and the gate's) beside the ping-pong grid
        out += [(f, s, pingpong_grid(s)) for f, s in GEMM_GATED]
    if "skinny" in only:
        out += [("gemm", s, gemm_grid(s)) for s in GEMM_SKINNY]
    if "attention" in only:
        out += [("attention", s, attention_grid(s)) for s in ATTENTION]
    if "views" in only:
        out += [("attention", s, []) for s in ATTENTION_VIEWS]
    if "bmm" in only:  # batched products: eager attention's on its views, a long sequence's
        out += [("bmm", s, bmm_grid(s)) for s in BMM]
    if "masked" in only:  # the family's space and the attention grid: every schedule takes a mask
        out += [
            ("attention", s, attention_grid(s))
            for s in ATTENTION_MASKED
            if "attention" not in only or s not in ATTENTION
        ]
    if "splitk" in only:  # the shapes where split-K may pay: long K, short output
        out += [("gemm", s, gemm_grid(s)) for s in GEMM_MODEL if s[2] >= 2048]
    if "rows" in only:
        out += [(f, s, []) for f, shapes in ROWS.items() for s in shapes]
    if "rope" in only:
        out += [("rope", s, []) for s in ROPE]
    if "rope_partial" in only:
        out += [("rope", s, []) for s in ROPE_PARTIAL]
    if "conv2d" in only:
        out += [("conv2d", s, conv_grid(s)) for s in CONV]
    if "resnet50" in only:
        out += [("conv2d", s, conv_grid(s)) for s in RESNET50 if s not in CONV or "conv2d" not in only]
    if "depthwise" in only:
        out += [("conv2d", s, depthwise_grid(s, hw)) for s in DEPTHWISE]
    if "conv1d" in only:
        out += [("conv1d", s, conv1d_grid(s)) for s in CONV1D]
    if "conv_bn" in only:  # the NCHW tiles beside the family's space (no stream: no epilogue there)
        out += [(f, s, nchw_tiles()) for f, s in CONV_BN]
    if "conv_bn_cl" in only:
        out += [(f, s, cl_tiles(s, f == "conv_bn_add_relu")) for f, s in CONV_BN_CL]
        out += [("conv2d", s, cl_tiles(s, False)) for s in CONV_CL_1X1]
    full = []
    for fam_name, shape, grid in out:
        fam = kernels.get(fam_name)
        own = family_space(fam_name, shape, hw)
        grid = [] if own_only else grid
        # The grid may break the family's thread rule (it was written for wgmma tiles;
        # small-M tiles would use mma instead): compiling decides.
        if fam_name in ("attention", "softmax") and own:
            # The first config built without nvcc --use_fast_math: what the
            # single-instruction exp2 and division are worth at this shape.
            grid = grid + [{**own[0], "fast_math": False}]
        configs = C.dedupe(own + [c for c in grid if _worth_compiling(fam, shape, c, hw)])
        full.append((fam_name, shape, configs, own))
    return full


def only_shapes(todo: list, shapes: str) -> list:
    """The cases whose shape, written with x, is one of the comma-separated `shapes`."""
    keep = set(shapes.split(","))
    return [c for c in todo if "x".join(map(str, c[1])) in keep]


def _build(job):
    fam_name, shape, cfg, target = job
    try:
        return kernels.get(fam_name).build(shape, DTYPE, cfg, target), ""
    except Exception as exc:  # a config that does not compile is data
        return None, str(exc).splitlines()[0][:200]


def _compile_only(job) -> str:
    return _build(job)[1]


def _best_ratio(torch_ms: float, med: dict, pingpong: bool) -> float | None:
    times = [v for k, v in med.items() if bool(json.loads(k).get("pingpong")) == pingpong]
    return torch_ms / min(times) if times else None


def copy_bandwidth() -> float:
    """GB/s (bytes read + written) of the faster of a 256 MiB device-to-device copy and
    an elementwise kernel over it (the access pattern of a row-wise family), graph-replayed."""
    n = 2**27
    a, b = torch.randn(n, device="cuda").half(), torch.empty(n, dtype=torch.float16, device="cuda")
    best = 0.0
    for fn in (lambda: b.copy_(a), lambda: torch.mul(a, 1.0, out=b)):
        t = bench.time_callable(fn, "cuda", bench.TimingPolicy(reps=10, flush_l2=False))
        best = max(best, 2 * n * 2 / (t.median_ms * 1e-3) / 1e9)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="gemm,skinny,attention,rows")
    ap.add_argument("--json")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--own", action="store_true", help="only the families' own search spaces, no wide grid")
    ap.add_argument("--shapes", help="comma-separated shapes written with x (e.g. 3152x3072x768): only these")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(
            "kernel_sweep: times kernels on CUDA graph replay and needs a CUDA device; torch sees none", file=sys.stderr
        )
        sys.exit(2)
    hw = hardware.detect("cuda")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": hw.name, "rows": []}, f)
    todo = cases(set(args.only.split(",")), hw, own_only=args.own)
    if args.shapes:
        todo = only_shapes(todo, args.shapes)
        if not todo:
            print(
                f"kernel_sweep: --shapes {args.shapes} matched none of the shapes --only {args.only} times "
                f"(write them with x, e.g. 3152x3072x768)",
                file=sys.stderr,
            )
            sys.exit(2)
    print(f"{sum(len(c[2]) for c in todo)} configs over {len(todo)} shapes on {hw.name}", flush=True)
    t0 = time.perf_counter()

    jobs = [(f, s, c, hw.target) for f, s, cs, _ in todo for c in cs]
    # Compiled in worker processes (TVM's lowering holds the GIL), which fill TileLang's
    # disk cache; building here afterwards loads from it.
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        errs = list(pool.map(_compile_only, jobs, chunksize=2))
    print(f"compiled in {time.perf_counter() - t0:.0f} s; {sum(bool(e) for e in errs)} failed", flush=True)
    built = [(None, e) if e else _build(j) for j, e in zip(jobs, errs)]
    print(f"loaded at {time.perf_counter() - t0:.0f} s", flush=True)
    results = {"device": hw.name, "dtype": DTYPE, "copy_gbps": copy_bandwidth(), "rows": []}
    print(f"copy bandwidth {results['copy_gbps']:.0f} GB/s", flush=True)
    i = 0
    policy = bench.TimingPolicy()
    for fam_name, shape, configs, own in todo:
        fam = kernels.get(fam_name)
        mine = built[i : i + len(configs)]
        i += len(configs)
        sets = bench.rotated_inputs(fam, shape, DTYPE, "cuda", 0, policy)
        ref = fam.reference(*sets[0])
        atol, rtol = fam.tolerance(DTYPE, shape)
        samplers, names, errors = [], [], {}
        samplers.append(timing.GraphSampler([lambda s=s: fam.reference(*s) for s in sets], policy))
        names.append("torch")
        for cfg, (k, err) in zip(configs, mine):
            key = json.dumps(cfg, sort_keys=True)
            if k is None:
                errors[key] = err
                continue
            try:
                ok, why, *_ = check_output(k(*sets[0]), ref, atol, rtol)
                if not ok:
                    errors[key] = why
                    continue
                samplers.append(timing.GraphSampler([lambda s=s, k=k: k(*s) for s in sets], policy))
                names.append(key)
            except Exception as exc:
                errors[key] = str(exc).splitlines()[0][:200]
        med = {n: [] for n in names}
        for r in range(args.reps):
            order = list(range(len(samplers)))
            if r % 2:
                order.reverse()
            for j in order:
                med[names[j]].append(samplers[j].sample())
        med = {n: statistics.median(v) for n, v in med.items()}
        torch_ms = med.pop("torch")
        ranked = sorted(med.items(), key=lambda kv: kv[1])
        own_keys = [json.dumps(c, sort_keys=True) for c in own]
        own_best = min((med[k] for k in own_keys if k in med), default=None)
        first = med.get(own_keys[0]) if own_keys else None
        row = {
            "family": fam_name,
            "shape": list(shape),
            "torch_us": torch_ms * 1e3,
            "best_us": ranked[0][1] * 1e3 if ranked else None,
            "best_config": json.loads(ranked[0][0]) if ranked else None,
            "ratio_best": torch_ms / ranked[0][1] if ranked else None,
            "ratio_own_best": torch_ms / own_best if own_best else None,
            "ratio_own_first": torch_ms / first if first else None,
            "top": [[json.loads(k), torch_ms / v] for k, v in ranked[:8]],
            # Every timed config's ratio, so a question about one that did not place is
            # answered from the file.
            "all": [[json.loads(k), torch_ms / v] for k, v in ranked],
            "tried": len(configs),
            "timed": len(med),
            "errors": dict(list(errors.items())[:6]),
            # The best with and without the experimental ping-pong schedule, side by side.
            "ratio_best_pingpong": _best_ratio(torch_ms, med, True),
            "ratio_best_other": _best_ratio(torch_ms, med, False),
            "flops": fam.flops(shape),
            "bytes": fam.bytes(shape, DTYPE),
        }
        if ranked:  # whether the best config runs on Hopper's wgmma path (HGMMA), or mma
            best_k = dict(zip([json.dumps(c, sort_keys=True) for c in configs], [k for k, _ in mine]))[ranked[0][0]]
            src = getattr(best_k, "source", "") or ""
            row["wgmma"] = "wgmma" in src
            row["tma"] = "tma_load" in src or "cp.async.bulk" in src
        results["rows"].append(row)
        if args.json:  # after every shape: a run cut short keeps what it measured
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
        tb = row["bytes"] / (ranked[0][1] * 1e-3) / 1e9 if ranked else 0
        print(
            f"{fam_name:9s} {'x'.join(map(str, shape)):26s} torch {torch_ms * 1e3:8.1f} us | best "
            f"{(row['best_us'] or 0):8.1f} us {row['ratio_best'] or 0:5.2f}x ({tb:5.0f} GB/s) | own space "
            f"{row['ratio_own_best'] or 0:5.2f}x first {row['ratio_own_first'] or 0:5.2f}x | "
            f"{len(med)}/{len(configs)} | {row['best_config']}",
            flush=True,
        )
        if row["ratio_best_pingpong"]:
            print(
                f"{'':36s} pingpong best {row['ratio_best_pingpong']:5.2f}x, "
                f"others {row['ratio_best_other'] or 0:5.2f}x",
                flush=True,
            )
        del samplers, sets
        torch.cuda.empty_cache()
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
